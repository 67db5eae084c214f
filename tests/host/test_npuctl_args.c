/* SPDX-License-Identifier: MIT */
/*
 * npuctl command line: --mesh parsing, option validation (--threads, --timeout, --port,
 * --core, --mode, the bench options), `--` passthrough, image and chip resolution, the exact
 * QEMU and gdb argv built for a given chip config (with --mode: `,mode=...` in -machine),
 * shell quoting, dispatch exit codes, and the child launcher (exit status forwarding, signal
 * status, --timeout killing the process group).
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "npu_enums.h"
#include "npuctl.h"

#define ARGC(a) ((int)(sizeof(a) / sizeof((a)[0])))

static char err[NPUCTL_ERR_MAX];

/* ---- --mesh */

static void test_mesh_good(void **state)
{
    (void)state;
    uint32_t r = 0, c = 0;
    assert_int_equal(npuctl_parse_mesh("4x4", &r, &c, err, sizeof(err)), NPU_OK);
    assert_int_equal(r, 4);
    assert_int_equal(c, 4);
    assert_int_equal(npuctl_parse_mesh("1x32", &r, &c, err, sizeof(err)), NPU_OK);
    assert_int_equal(r, 1);
    assert_int_equal(c, 32);
    assert_int_equal(npuctl_parse_mesh("32X2", &r, &c, err, sizeof(err)), NPU_OK);
    assert_int_equal(r, 32);
    assert_int_equal(c, 2);
}

static void test_mesh_bad_form(void **state)
{
    (void)state;
    static const char *const bad[] = { "4y4", "4x", "x4", "", "4", "4x4x4", "-1x4", "+4x4",
                                       " 4x4", "4x 4", "4x4 ", "4.0x4", "ax4" };
    uint32_t r = 77, c = 77;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(npuctl_parse_mesh(bad[i], &r, &c, err, sizeof(err)), NPU_ERR_FORMAT);
        assert_non_null(strstr(err, "expected ROWSxCOLS, e.g. 4x4"));
    }
    assert_int_equal(r, 77);
    npuctl_parse_mesh("4y4", &r, &c, err, sizeof(err));
    assert_string_equal(err, "--mesh '4y4': expected ROWSxCOLS, e.g. 4x4");
}

static void test_mesh_out_of_range(void **state)
{
    (void)state;
    static const char *const bad[] = { "0x4", "4x0", "33x1", "1x33", "99999999999x4" };
    uint32_t r = 77, c = 77;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(npuctl_parse_mesh(bad[i], &r, &c, err, sizeof(err)), NPU_ERR_RANGE);
        assert_non_null(strstr(err, "--mesh '"));
        assert_non_null(strstr(err, "1..32"));
    }
    assert_int_equal(r, 77);
    npuctl_parse_mesh("40x4", &r, &c, err, sizeof(err));
    assert_string_equal(err, "--mesh '40x4': rows and columns must each be 1..32");
}

/* ---- option parsing */

static void test_defaults(void **state)
{
    (void)state;
    struct npuctl_run_opts o;
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_RUN, 0, NULL, &o, err, sizeof(err)), 0);
    assert_string_equal(o.image, "boot");
    assert_null(o.ctrl_elf);
    assert_string_equal(o.chip, "large-64");
    assert_false(o.mesh_set);
    assert_int_equal(o.threads, NPUCTL_THREADS_MULTI);
    assert_int_equal(o.timeout_s, 600);
    assert_false(o.watchdog_set);
    assert_false(o.quiet_guest_errors);
    assert_int_equal(o.machine_mode, NPUCTL_MACHINE_DEFAULT);
    assert_int_equal(o.extra_argc, 0);
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_SELFTEST, 0, NULL, &o, err,
                                           sizeof(err)), 0);
    assert_string_equal(o.image, "selftest");
    assert_int_equal(o.timeout_s, 600);
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_DEBUG, 0, NULL, &o, err, sizeof(err)),
                     0);
    assert_string_equal(o.image, "boot");
    assert_int_equal(o.timeout_s, 0);
    assert_int_equal(o.gdb_port, 1234);
    assert_int_equal(o.gdb_core, 0);
}

static void test_image_arguments(void **state)
{
    (void)state;
    struct npuctl_run_opts o;
    char *one[] = { "hello", "--chip", "small-4" };
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_RUN, ARGC(one), one, &o, err,
                                           sizeof(err)), 0);
    assert_string_equal(o.image, "hello");
    assert_string_equal(o.chip, "small-4");
    char *two[] = { "a/ctrl.elf", "--mesh=2x3", "b/core.elf" };
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_RUN, ARGC(two), two, &o, err,
                                           sizeof(err)), 0);
    assert_null(o.image);
    assert_string_equal(o.ctrl_elf, "a/ctrl.elf");
    assert_string_equal(o.core_elf, "b/core.elf");
    assert_true(o.mesh_set);
    assert_int_equal(o.mesh_rows, 2);
    assert_int_equal(o.mesh_cols, 3);
    char *three[] = { "a", "b", "c" };
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_RUN, ARGC(three), three, &o, err,
                                           sizeof(err)), NPU_ERR_INVAL);
    assert_non_null(strstr(err, "'c'"));
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_SELFTEST, 1, one, &o, err,
                                           sizeof(err)), NPU_ERR_INVAL);
    assert_non_null(strstr(err, "'hello'"));
}

static void test_threads(void **state)
{
    (void)state;
    struct npuctl_run_opts o;
    char *single[] = { "--threads", "single" };
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_RUN, 2, single, &o, err, sizeof(err)),
                     0);
    assert_int_equal(o.threads, NPUCTL_THREADS_SINGLE);
    char *multi[] = { "--threads=multi" };
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_RUN, 1, multi, &o, err, sizeof(err)),
                     0);
    assert_int_equal(o.threads, NPUCTL_THREADS_MULTI);
    char *bad[] = { "--threads", "dual" };
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_RUN, 2, bad, &o, err, sizeof(err)),
                     NPU_ERR_INVAL);
    assert_string_equal(err, "--threads 'dual': expected single, multi or auto");
    char *autos[] = { "--threads", "auto" };
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_RUN, 2, autos, &o, err, sizeof(err)),
                     0);
    assert_int_equal(o.threads, NPUCTL_THREADS_AUTO);
    /* auto: single on a host of 1 or 2 CPUs, multi on more; the others stay as given */
    assert_int_equal(npuctl_resolve_threads(NPUCTL_THREADS_AUTO, 1), NPUCTL_THREADS_SINGLE);
    assert_int_equal(npuctl_resolve_threads(NPUCTL_THREADS_AUTO, 2), NPUCTL_THREADS_SINGLE);
    assert_int_equal(npuctl_resolve_threads(NPUCTL_THREADS_AUTO, 3), NPUCTL_THREADS_MULTI);
    assert_int_equal(npuctl_resolve_threads(NPUCTL_THREADS_AUTO, 64), NPUCTL_THREADS_MULTI);
    assert_int_equal(npuctl_resolve_threads(NPUCTL_THREADS_SINGLE, 64), NPUCTL_THREADS_SINGLE);
    assert_int_equal(npuctl_resolve_threads(NPUCTL_THREADS_MULTI, 1), NPUCTL_THREADS_MULTI);
    char *missing[] = { "--threads" };
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_RUN, 1, missing, &o, err, sizeof(err)),
                     NPU_ERR_INVAL);
    assert_string_equal(err, "run: --threads needs a value (single|multi|auto)");
}

static void test_timeout(void **state)
{
    (void)state;
    struct npuctl_run_opts o;
    char *ok[] = { "--timeout", "5" };
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_RUN, 2, ok, &o, err, sizeof(err)), 0);
    assert_int_equal(o.timeout_s, 5);
    char *zero[] = { "--timeout=0" };
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_SELFTEST, 1, zero, &o, err,
                                           sizeof(err)), 0);
    assert_int_equal(o.timeout_s, 0);
    static const char *const bad_form[] = { "abc", "-1", "1.5", "", "5s", " 5" };
    for (size_t i = 0; i < sizeof(bad_form) / sizeof(bad_form[0]); i++) {
        char *argv[] = { "--timeout", (char *)bad_form[i] };
        assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_RUN, 2, argv, &o, err,
                                               sizeof(err)), NPU_ERR_FORMAT);
        assert_non_null(strstr(err, "--timeout '"));
    }
    char *big[] = { "--timeout", "604801" };
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_RUN, 2, big, &o, err, sizeof(err)),
                     NPU_ERR_RANGE);
    assert_string_equal(err, "--timeout '604801': out of range 0..604800");
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_DEBUG, 2, ok, &o, err, sizeof(err)),
                     NPU_ERR_NOTFOUND);
    assert_non_null(strstr(err, "'--timeout' is not used"));
}

static void test_other_options(void **state)
{
    (void)state;
    struct npuctl_run_opts o;
    char *dbg[] = { "--port", "4444", "--core=63", "--watchdog-ms", "250",
                    "--quiet-guest-errors", "--print-cmd" };
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_DEBUG, ARGC(dbg), dbg, &o, err,
                                           sizeof(err)), 0);
    assert_int_equal(o.gdb_port, 4444);
    assert_int_equal(o.gdb_core, 63);
    assert_true(o.watchdog_set);
    assert_int_equal(o.watchdog_ms, 250);
    assert_true(o.quiet_guest_errors && o.print_cmd);
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_RUN, 2, dbg, &o, err, sizeof(err)),
                     NPU_ERR_NOTFOUND);
    assert_non_null(strstr(err, "'--port' is not used"));
    char *port0[] = { "--port", "0" }, *port_big[] = { "--port", "65536" };
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_DEBUG, 2, port0, &o, err, sizeof(err)),
                     NPU_ERR_RANGE);
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_DEBUG, 2, port_big, &o, err,
                                           sizeof(err)), NPU_ERR_RANGE);
    char *unknown[] = { "--frobnicate=1" };
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_RUN, 1, unknown, &o, err, sizeof(err)),
                     NPU_ERR_NOTFOUND);
    assert_non_null(strstr(err, "unknown option '--frobnicate'"));
    char *flag_value[] = { "--print-cmd=yes" };
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_RUN, 1, flag_value, &o, err,
                                           sizeof(err)), NPU_ERR_INVAL);
    char *bad_mesh[] = { "--mesh", "4y4" };
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_RUN, 2, bad_mesh, &o, err, sizeof(err)),
                     NPU_ERR_FORMAT);
    assert_string_equal(err, "--mesh '4y4': expected ROWSxCOLS, e.g. 4x4");
    char *swallow[] = { "--chip", "--print-cmd" };
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_RUN, 2, swallow, &o, err, sizeof(err)),
                     NPU_ERR_INVAL);
    assert_string_equal(err, "run: --chip needs a value (NAME|PATH), not the option "
                             "'--print-cmd'");
    char *help[] = { "-h" };
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_RUN, 1, help, &o, err, sizeof(err)), 0);
    assert_true(o.help);
}

static void test_machine_mode(void **state)
{
    (void)state;
    struct npuctl_run_opts o;
    char *perf[] = { "--mode", "performance" };
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_RUN, 2, perf, &o, err, sizeof(err)), 0);
    assert_int_equal(o.machine_mode, NPUCTL_MACHINE_PERFORMANCE);
    assert_string_equal(npuctl_machine_mode_name(o.machine_mode), "performance");
    char *func[] = { "--mode=functional" };
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_SELFTEST, 1, func, &o, err,
                                           sizeof(err)), 0);
    assert_int_equal(o.machine_mode, NPUCTL_MACHINE_FUNCTIONAL);
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_DEBUG, 2, perf, &o, err, sizeof(err)),
                     0);
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_BENCH, 2, perf, &o, err, sizeof(err)),
                     NPU_ERR_INVAL); /* bench needs its benchmark's name */
    char *bad[] = { "--mode", "fast" };
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_RUN, 2, bad, &o, err, sizeof(err)),
                     NPU_ERR_INVAL);
    assert_string_equal(err, "--mode 'fast': expected functional or performance");
    assert_null(npuctl_machine_mode_name(NPUCTL_MACHINE_DEFAULT));
}

static void test_bench_args(void **state)
{
    (void)state;
    struct npuctl_run_opts o;
    char *all[] = { "gemm", "--quick", "--raw", "--mode", "functional", "--mesh", "4x4",
                    "--repeat=5", "--timeout", "30", "--", "-d", "int" };
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_BENCH, ARGC(all), all, &o, err,
                                           sizeof(err)), 0);
    assert_string_equal(o.image, "gemm");
    assert_true(o.bench_quick && o.bench_raw && o.mesh_set);
    assert_int_equal(o.machine_mode, NPUCTL_MACHINE_FUNCTIONAL);
    assert_int_equal(o.bench_repeat, 5);
    assert_int_equal(o.timeout_s, 30);
    assert_int_equal(o.extra_argc, 2);
    char *none[] = { "--quick" };
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_BENCH, 1, none, &o, err, sizeof(err)),
                     NPU_ERR_INVAL);
    assert_string_equal(err, "bench: which benchmark? gemm, dma, noc, collectives, m2n or host");
    char *two[] = { "gemm", "dma" };
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_BENCH, 2, two, &o, err, sizeof(err)),
                     NPU_ERR_INVAL);
    assert_non_null(strstr(err, "unexpected argument 'dma'"));
    char *zero[] = { "host", "--repeat", "0" };
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_BENCH, 3, zero, &o, err, sizeof(err)),
                     NPU_ERR_RANGE);
    assert_string_equal(err, "--repeat '0': out of range 1..100");
    char *port[] = { "noc", "--port", "1" };
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_BENCH, 3, port, &o, err, sizeof(err)),
                     NPU_ERR_NOTFOUND);
    assert_non_null(strstr(err, "'--port' is not used"));
    char *quick[] = { "--quick" };
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_RUN, 1, quick, &o, err, sizeof(err)),
                     NPU_ERR_NOTFOUND);
    assert_string_equal(err, "run: option '--quick' is not used by this command (npuctl run "
                             "--help)");
}

static void test_passthrough(void **state)
{
    (void)state;
    struct npuctl_run_opts o;
    char *argv[] = { "img", "--", "-d", "int", "--mesh", "2x2" };
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_RUN, ARGC(argv), argv, &o, err,
                                           sizeof(err)), 0);
    assert_string_equal(o.image, "img");
    assert_false(o.mesh_set);
    assert_int_equal(o.extra_argc, 4);
    assert_ptr_equal(o.extra_argv, &argv[2]);
    char *only[] = { "--" };
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_RUN, 1, only, &o, err, sizeof(err)), 0);
    assert_int_equal(o.extra_argc, 0);
    assert_string_equal(o.image, "boot");
}

/* ---- image and chip resolution */

static char tmpdir[256];

static void write_file(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("x", f);
    fclose(f);
}

static int setup_images(void **state)
{
    (void)state;
    char dir[512];
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/npuctl_test.XXXXXX");
    if (!mkdtemp(tmpdir))
        return -1;
    snprintf(dir, sizeof(dir), "%s/boot", tmpdir);
    mkdir(dir, 0755);
    write_file(dir, "ctrl.elf");
    write_file(dir, "core.elf");
    snprintf(dir, sizeof(dir), "%s/half", tmpdir);
    mkdir(dir, 0755);
    write_file(dir, "ctrl.elf");
    return 0;
}

static int teardown_images(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_resolve_named_image(void **state)
{
    (void)state;
    struct npuctl_run_opts o;
    struct npuctl_files f;
    char want[512];
    npuctl_parse_run_args(NPUCTL_MODE_RUN, 0, NULL, &o, err, sizeof(err));
    assert_int_equal(npuctl_resolve_images(&o, tmpdir, &f, err, sizeof(err)), 0);
    snprintf(want, sizeof(want), "%s/boot/ctrl.elf", tmpdir);
    assert_string_equal(f.ctrl_elf, want);
    snprintf(want, sizeof(want), "%s/boot/core.elf", tmpdir);
    assert_string_equal(f.core_elf, want);

    o.image = "half";
    assert_int_equal(npuctl_resolve_images(&o, tmpdir, &f, err, sizeof(err)),
                     NPU_ERR_NOTFOUND);
    snprintf(want, sizeof(want), "image 'half': missing file %s/half/core.elf", tmpdir);
    assert_string_equal(err, want);

    o.image = "nosuch";
    assert_int_equal(npuctl_resolve_images(&o, tmpdir, &f, err, sizeof(err)),
                     NPU_ERR_NOTFOUND);
    assert_non_null(strstr(err, "image 'nosuch': no directory"));
    assert_non_null(strstr(err, "boot"));

    snprintf(want, sizeof(want), "%s/boot", tmpdir);
    o.image = want; /* a NAME with '/' is the directory itself */
    assert_int_equal(npuctl_resolve_images(&o, "/nonexistent", &f, err, sizeof(err)), 0);
}

static void test_resolve_image_paths(void **state)
{
    (void)state;
    char ctrl[512], core[512];
    snprintf(ctrl, sizeof(ctrl), "%s/boot/ctrl.elf", tmpdir);
    snprintf(core, sizeof(core), "%s/half/core.elf", tmpdir);
    char *argv[] = { ctrl, core };
    struct npuctl_run_opts o;
    struct npuctl_files f;
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_RUN, 2, argv, &o, err, sizeof(err)), 0);
    assert_int_equal(npuctl_resolve_images(&o, "/nonexistent", &f, err, sizeof(err)),
                     NPU_ERR_NOTFOUND);
    assert_non_null(strstr(err, "CORE.elf"));
    assert_non_null(strstr(err, core));
    snprintf(core, sizeof(core), "%s/boot/core.elf", tmpdir);
    assert_int_equal(npuctl_resolve_images(&o, "/nonexistent", &f, err, sizeof(err)), 0);
    assert_string_equal(f.ctrl_elf, ctrl);
    assert_string_equal(f.core_elf, core);
    snprintf(core, sizeof(core), "%s/boot", tmpdir); /* a directory is not an image */
    assert_int_equal(npuctl_resolve_images(&o, "/nonexistent", &f, err, sizeof(err)),
                     NPU_ERR_INVAL);
}

static void test_resolve_chip(void **state)
{
    (void)state;
    char path[256];
    assert_int_equal(npuctl_resolve_chip_path("large-64", "/src", path, sizeof(path), err,
                                              sizeof(err)), 0);
    assert_string_equal(path, "/src/models/chips/large-64.toml");
    assert_int_equal(npuctl_resolve_chip_path("my.toml", "/src", path, sizeof(path), err,
                                              sizeof(err)), 0);
    assert_string_equal(path, "my.toml");
    assert_int_equal(npuctl_resolve_chip_path("dir/chip", "/src", path, sizeof(path), err,
                                              sizeof(err)), 0);
    assert_string_equal(path, "dir/chip");
}

/* ---- the QEMU and gdb argv */

static void assert_argv(char **got, const char *const *want)
{
    size_t i = 0;
    for (; want[i]; i++) {
        assert_non_null(got[i]);
        assert_string_equal(got[i], want[i]);
    }
    assert_null(got[i]);
}

static void make_launch(struct chip_config *cfg, struct npuctl_files *f)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->mesh_rows = 8;
    cfg->mesh_cols = 8;
    memset(f, 0, sizeof(*f));
    strcpy(f->qemu, "/b/qemu-system-riscv64");
    strcpy(f->chip_path, "/s/models/chips/large-64.toml");
    strcpy(f->ctrl_elf, "/fw/boot/ctrl.elf");
    strcpy(f->core_elf, "/fw/boot/core.elf");
}

static void test_qemu_argv_default(void **state)
{
    (void)state;
    struct chip_config cfg;
    struct npuctl_files f;
    struct npuctl_run_opts o;
    char **argv;
    make_launch(&cfg, &f);
    npuctl_parse_run_args(NPUCTL_MODE_RUN, 0, NULL, &o, err, sizeof(err));
    assert_int_equal(npuctl_build_qemu_argv(&o, &cfg, &f, &argv), 0);
    static const char *const want[] = {
        "/b/qemu-system-riscv64", "-machine",
        "npu-mesh,config=/s/models/chips/large-64.toml,rows=8,cols=8,"
        "core-image=/fw/boot/core.elf",
        "-smp", "65", "-kernel", "/fw/boot/ctrl.elf", "-accel", "tcg,thread=multi",
        "-nodefaults", "-display", "none", "-monitor", "none", "-serial", "stdio",
        "-no-reboot", "-d", "guest_errors", NULL };
    assert_argv(argv, want);
    npuctl_free_argv(argv);
}

static void test_qemu_argv_options(void **state)
{
    (void)state;
    struct chip_config cfg;
    struct npuctl_files f;
    struct npuctl_run_opts o;
    char **argv;
    make_launch(&cfg, &f);
    strcpy(f.core_elf, "/fw/a,b/core.elf"); /* commas are doubled inside -machine */
    char *args[] = { "--mesh", "2x3", "--threads", "single", "--watchdog-ms", "500",
                     "--quiet-guest-errors", "--", "-d", "int" };
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_RUN, ARGC(args), args, &o, err,
                                           sizeof(err)), 0);
    assert_int_equal(npuctl_build_qemu_argv(&o, &cfg, &f, &argv), 0);
    static const char *const want[] = {
        "/b/qemu-system-riscv64", "-machine",
        "npu-mesh,config=/s/models/chips/large-64.toml,rows=2,cols=3,"
        "core-image=/fw/a,,b/core.elf,watchdog-ms=500",
        "-smp", "7", "-kernel", "/fw/boot/ctrl.elf", "-accel", "tcg,thread=single",
        "-nodefaults", "-display", "none", "-monitor", "none", "-serial", "stdio",
        "-no-reboot", "-d", "int", NULL };
    assert_argv(argv, want);
    npuctl_free_argv(argv);
}

static void test_qemu_argv_mode(void **state)
{
    (void)state;
    struct chip_config cfg;
    struct npuctl_files f;
    struct npuctl_run_opts o;
    char **argv;
    make_launch(&cfg, &f);
    char *args[] = { "--watchdog-ms", "500", "--mode", "performance" };
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_RUN, ARGC(args), args, &o, err,
                                           sizeof(err)), 0);
    assert_int_equal(npuctl_build_qemu_argv(&o, &cfg, &f, &argv), 0);
    static const char *const want[] = {
        "/b/qemu-system-riscv64", "-machine",
        "npu-mesh,config=/s/models/chips/large-64.toml,rows=8,cols=8,"
        "core-image=/fw/boot/core.elf,watchdog-ms=500,mode=performance",
        "-smp", "65", "-kernel", "/fw/boot/ctrl.elf", "-accel", "tcg,thread=multi",
        "-nodefaults", "-display", "none", "-monitor", "none", "-serial", "stdio",
        "-no-reboot", "-d", "guest_errors", NULL };
    assert_argv(argv, want);
    npuctl_free_argv(argv);
    char *func[] = { "--mode", "functional" };
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_SELFTEST, 2, func, &o, err,
                                           sizeof(err)), 0);
    assert_int_equal(npuctl_build_qemu_argv(&o, &cfg, &f, &argv), 0);
    assert_string_equal(argv[2], "npu-mesh,config=/s/models/chips/large-64.toml,rows=8,"
                                 "cols=8,core-image=/fw/boot/core.elf,mode=functional");
    npuctl_free_argv(argv);
}

static void test_qemu_argv_debug(void **state)
{
    (void)state;
    struct chip_config cfg;
    struct npuctl_files f;
    struct npuctl_run_opts o;
    char **argv;
    make_launch(&cfg, &f);
    cfg.mesh_rows = 1;
    cfg.mesh_cols = 1;
    char *args[] = { "--port", "4321", "--core", "3", "--", "-s" };
    assert_int_equal(npuctl_parse_run_args(NPUCTL_MODE_DEBUG, ARGC(args), args, &o, err,
                                           sizeof(err)), 0);
    assert_int_equal(npuctl_build_qemu_argv(&o, &cfg, &f, &argv), 0);
    static const char *const want[] = {
        "/b/qemu-system-riscv64", "-machine",
        "npu-mesh,config=/s/models/chips/large-64.toml,rows=1,cols=1,"
        "core-image=/fw/boot/core.elf",
        "-smp", "2", "-kernel", "/fw/boot/ctrl.elf", "-accel", "tcg,thread=multi",
        "-nodefaults", "-display", "none", "-monitor", "none", "-serial", "stdio",
        "-no-reboot", "-d", "guest_errors", "-gdb", "tcp:localhost:4321", "-S", "-s", NULL };
    assert_argv(argv, want);
    npuctl_free_argv(argv);

    assert_int_equal(npuctl_build_gdb_argv(&o, &f, &argv), 0);
    static const char *const gdb[] = {
        "gdb-multiarch", "-q", "-ex", "set architecture riscv:rv64",
        "-ex", "file /fw/boot/ctrl.elf",
        "-ex", "add-symbol-file /fw/boot/core.elf -o 0x1030000000",
        "-ex", "target extended-remote localhost:4321", NULL };
    assert_argv(argv, gdb);
    npuctl_free_argv(argv);
    assert_int_equal(npuctl_core_sram_base(0), 0x1000000000ull);
}

static void test_quote_argv(void **state)
{
    (void)state;
    char *argv[] = { "/b/qemu", "-machine", "a=b,c", "two words", "it's", "", "$x", NULL };
    char *line;
    assert_int_equal(npuctl_quote_argv(argv, &line), 0);
    assert_string_equal(line, "/b/qemu -machine a=b,c 'two words' 'it'\\''s' '' '$x'");
    free(line);
}

/* ---- dispatch and the launcher */

static void test_dispatch(void **state)
{
    (void)state;
    char *unknown[] = { "npuctl", "frob", NULL };
    assert_int_equal(npuctl_main(2, unknown), NPUCTL_EXIT_USAGE);
    char *bad[] = { "npuctl", "run", "--mesh", "4y4", NULL };
    assert_int_equal(npuctl_main(4, bad), NPUCTL_EXIT_USAGE);
    char *help[] = { "npuctl", "help", "run", NULL };
    assert_int_equal(npuctl_main(3, help), 0);
    char *help_bench[] = { "npuctl", "help", "bench", NULL };
    assert_int_equal(npuctl_main(3, help_bench), 0);
    char *bench_unknown[] = { "npuctl", "bench", "frob", NULL };
    assert_int_equal(npuctl_main(3, bench_unknown), NPUCTL_EXIT_USAGE);
    char *bench_repeat[] = { "npuctl", "bench", "gemm", "--repeat", "2", NULL };
    assert_int_equal(npuctl_main(5, bench_repeat), NPUCTL_EXIT_USAGE);
}

static int spawn_sh(const char *script, uint32_t timeout_s, int *status)
{
    char *argv[] = { "/bin/sh", "-c", (char *)script, NULL };
    struct npuctl_spawn sp = { .argv = argv, .own_group = true, .stdin_null = true,
                               .timeout_s = timeout_s };
    struct npuctl_child_exit ex = { -1, -1 };
    int rc = npuctl_spawn_wait(&sp, &ex, err, sizeof(err));
    *status = ex.status;
    if (rc == NPU_OK || rc == NPU_ERR_TIMEOUT)
        assert_int_equal(ex.signal, ex.status > 128 ? ex.status - 128 : 0);
    return rc;
}

static void test_spawn_status(void **state)
{
    (void)state;
    int status = -1;
    assert_int_equal(spawn_sh("exit 3", 10, &status), NPU_OK);
    assert_int_equal(status, 3);
    /* stdin is /dev/null; no timeout */
    assert_int_equal(spawn_sh("[ \"$(readlink /proc/$$/fd/0)\" = /dev/null ] && exit 5; exit 6",
                              0, &status), NPU_OK);
    assert_int_equal(status, 5);
    assert_int_equal(spawn_sh("kill -TERM $$", 10, &status), NPU_OK);
    assert_int_equal(status, 128 + 15);
    char *missing[] = { "/nonexistent/qemu", NULL };
    struct npuctl_spawn sp = { .argv = missing, .own_group = true };
    struct npuctl_child_exit ex;
    assert_int_equal(npuctl_spawn_wait(&sp, &ex, err, sizeof(err)), NPU_ERR_IO);
    assert_non_null(strstr(err, "/nonexistent/qemu"));
}

/* Processes of group pgid that are not zombies yet (from /proc/PID/stat). */
static int count_live_in_group(long pgid)
{
    DIR *d = opendir("/proc");
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char path[300], buf[512], state = 0;
        long ppid, pgrp = 0;
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t len = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[len] = '\0';
        const char *rest = strrchr(buf, ')'); /* the command name may hold spaces */
        if (rest && sscanf(rest + 1, " %c %ld %ld", &state, &ppid, &pgrp) == 3 &&
            pgrp == pgid && state != 'Z')
            n++;
    }
    closedir(d);
    return n;
}

static void test_spawn_timeout(void **state)
{
    (void)state;
    int status = -1;
    char pidfile[64], script[160];
    snprintf(pidfile, sizeof(pidfile), "/tmp/npuctl_test_pid.%ld", (long)getpid());
    /* sh forks sleep (a command follows it): the grandchild must die with the group. */
    snprintf(script, sizeof(script), "echo $$ > %s; sleep 30; exit 0", pidfile);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(spawn_sh(script, 1, &status), NPU_ERR_TIMEOUT);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_int_equal(status, 128 + 9);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    assert_true(secs >= 0.9 && secs < 5.0);
    long pgid = 0;
    FILE *f = fopen(pidfile, "r");
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%ld", &pgid), 1);
    fclose(f);
    unlink(pidfile);
    int live = -1;
    for (int i = 0; i < 200 && live != 0; i++) { /* SIGKILL lands asynchronously */
        live = count_live_in_group(pgid);
        if (live)
            nanosleep(&(struct timespec){ 0, 10000000L }, NULL);
    }
    assert_int_equal(live, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mesh_good),
        cmocka_unit_test(test_mesh_bad_form),
        cmocka_unit_test(test_mesh_out_of_range),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_image_arguments),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_other_options),
        cmocka_unit_test(test_machine_mode),
        cmocka_unit_test(test_bench_args),
        cmocka_unit_test(test_passthrough),
        cmocka_unit_test_setup_teardown(test_resolve_named_image, setup_images,
                                        teardown_images),
        cmocka_unit_test_setup_teardown(test_resolve_image_paths, setup_images,
                                        teardown_images),
        cmocka_unit_test(test_resolve_chip),
        cmocka_unit_test(test_qemu_argv_default),
        cmocka_unit_test(test_qemu_argv_options),
        cmocka_unit_test(test_qemu_argv_mode),
        cmocka_unit_test(test_qemu_argv_debug),
        cmocka_unit_test(test_quote_argv),
        cmocka_unit_test(test_dispatch),
        cmocka_unit_test(test_spawn_status),
        cmocka_unit_test(test_spawn_timeout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
