/* SPDX-License-Identifier: MIT */
/*
 * npuctl argument parsing for run, selftest, debug, bench and flash: their option tables
 * (run's options, debug's and bench's), their usages, and the parse itself, a pure function
 * of argv (no file is read, nothing is started), so the host unit tests can cover every
 * form. The forms are opts.h's: `--opt VALUE`, `--opt=VALUE`, and `--` ending the options
 * and passing everything after it to QEMU. Each error message names the option and the
 * value.
 */
#include "npuctl.h"

#include <stdio.h>
#include <string.h>

#include "npu_enums.h"
#include "opts.h"

enum opt_id {
    OPT_CHIP, OPT_MESH, OPT_THREADS, OPT_TIMEOUT, OPT_WATCHDOG, OPT_QUIET, OPT_TAP,
    OPT_PRINT_CMD, OPT_PORT, OPT_CORE, OPT_MODE, OPT_QUICK, OPT_RAW, OPT_REPEAT,
};

#define C_RUN NPUCTL_CMD_BIT(NPUCTL_CMD_RUN)
#define C_SELFTEST NPUCTL_CMD_BIT(NPUCTL_CMD_SELFTEST)
#define C_DEBUG NPUCTL_CMD_BIT(NPUCTL_CMD_DEBUG)
#define C_BENCH NPUCTL_CMD_BIT(NPUCTL_CMD_BENCH)
#define C_FLASH NPUCTL_CMD_BIT(NPUCTL_CMD_FLASH)
#define C_LAUNCH (C_RUN | C_SELFTEST | C_DEBUG | C_BENCH | C_FLASH)
#define BENCH_REPEAT_MAX 100u
#define MODE_HELP "engine mode of the machine: performance keeps the timing and never " \
                  "touches the data"
#define THREADS_HELP "TCG threading; auto: single on a host of at most 2 CPUs, else multi"

static int apply_run_opt(void *ctx, const struct npuctl_opt *opt, const char *value,
                         char *err, size_t errlen);

/* run's options, which every command that starts QEMU takes (flash: with the image's chip
   and mode for defaults; debug: without --timeout). */
static const struct npuctl_opt run_opts[] = {
    { "--chip", NULL, "NAME|PATH", NPUCTL_DEFAULT_CHIP,
      "chip config: models/chips/NAME.toml (npuctl chips lists them), or a file", OPT_CHIP,
      C_LAUNCH & ~C_FLASH },
    { "--chip", NULL, "NAME|PATH", NULL,
      "chip config: models/chips/NAME.toml, or a file (default: the image's chip)", OPT_CHIP,
      C_FLASH },
    { "--mesh", NULL, "RxC", NULL,
      "override the config's mesh, e.g. 4x4 (1..32 each; default: the config's)", OPT_MESH,
      C_LAUNCH },
    { "--threads", NULL, "single|multi|auto", "multi", THREADS_HELP, OPT_THREADS,
      C_LAUNCH & ~C_BENCH },
    { "--threads", NULL, "single|multi|auto", NULL,
      THREADS_HELP " (default: multi; host measures both unless --threads or --quick is "
      "given, then this one)", OPT_THREADS, C_BENCH },
    { "--mode", NULL, "functional|performance", NULL,
      MODE_HELP " (default: the machine's, functional)", OPT_MODE,
      C_RUN | C_SELFTEST | C_DEBUG },
    { "--mode", NULL, "functional|performance", NULL,
      MODE_HELP " (default: performance; host measures both)", OPT_MODE, C_BENCH },
    { "--mode", NULL, "functional|performance", NULL, MODE_HELP " (default: the image's)",
      OPT_MODE, C_FLASH },
    { "--watchdog-ms", NULL, "N", NULL,
      "machine watchdog: a hart running N ms without waiting fails (default: the "
      "machine's)", OPT_WATCHDOG, C_LAUNCH },
    { "--timeout", NULL, "SECONDS", "600",
      "wall-clock limit (bench: of each QEMU run); then QEMU's process group is killed and "
      "npuctl exits 124; 0: none", OPT_TIMEOUT, C_LAUNCH & ~C_DEBUG },
    { "--quiet-guest-errors", NULL, NULL, NULL, "do not pass -d guest_errors to QEMU",
      OPT_QUIET, C_LAUNCH },
    { "--tap", NULL, NULL, NULL,
      "console lines without their [chip time, hart] stamps: the on-target tests' TAP as "
      "TAP consumers read it (prove, TAP::Parser)", OPT_TAP, C_RUN | C_SELFTEST | C_FLASH },
    { "--print-cmd", NULL, NULL, NULL, "print the QEMU command line instead of running it",
      OPT_PRINT_CMD, C_LAUNCH },
};

static const struct npuctl_opt debug_opts[] = {
    { "--port", NULL, "P", "1234", "gdb stub port", OPT_PORT, C_DEBUG },
    { "--core", NULL, "K", "0", "load the core image's symbols at core K's SRAM", OPT_CORE,
      C_DEBUG },
};

static const struct npuctl_opt bench_opts[] = {
    { "--quick", NULL, NULL, NULL, "a reduced variant (the smoke tests use it)", OPT_QUICK,
      C_BENCH },
    { "--raw", NULL, NULL, NULL, "also print the chip console of every run", OPT_RAW,
      C_BENCH },
    { "--repeat", NULL, "N", NULL,
      "host only: runs per point, the median is kept (default: 3; with --quick 1)",
      OPT_REPEAT, C_BENCH },
};

#define GROUP(title, table) { title, table, sizeof(table) / sizeof(table[0]), apply_run_opt }
static const struct npuctl_opt_group run_group = GROUP("run options", run_opts);
static const struct npuctl_opt_group debug_group = GROUP("debug options", debug_opts);
static const struct npuctl_opt_group bench_group = GROUP("bench options", bench_opts);

static const char *const mode_names[] = { "run", "selftest", "debug", "bench" };

const char *npuctl_mode_name(enum npuctl_mode mode)
{
    return mode_names[mode];
}

const char *npuctl_machine_mode_name(enum npuctl_machine_mode mode)
{
    return mode == NPUCTL_MACHINE_FUNCTIONAL    ? "functional"
           : mode == NPUCTL_MACHINE_PERFORMANCE ? "performance"
                                                : NULL;
}

int npuctl_parse_mesh(const char *text, uint32_t *rows, uint32_t *cols, char *err,
                      size_t errlen)
{
    char part[32];
    const char *x = strpbrk(text, "xX");
    size_t len = x ? (size_t)(x - text) : 0;
    uint64_t r = 0, c = 0;
    int rc_r = NPU_ERR_FORMAT, rc_c = NPU_ERR_FORMAT;
    if (x && len < sizeof(part)) {
        memcpy(part, text, len);
        part[len] = '\0';
        rc_r = npuctl_parse_decimal(part, UINT32_MAX, &r);
        rc_c = npuctl_parse_decimal(x + 1, UINT32_MAX, &c);
    }
    if (rc_r == NPU_ERR_FORMAT || rc_c == NPU_ERR_FORMAT) {
        snprintf(err, errlen, "--mesh '%s': expected ROWSxCOLS, e.g. 4x4", text);
        return NPU_ERR_FORMAT;
    }
    /* A number too large for 32 bits is out of range like any other too-large value. */
    uint32_t r32 = rc_r ? UINT32_MAX : (uint32_t)r, c32 = rc_c ? UINT32_MAX : (uint32_t)c;
    char why[256];
    int rc = chip_config_check_mesh(r32, c32, why, sizeof(why));
    if (rc) {
        const char *reason = strstr(why, ": "); /* drop the checker's "mesh RxC: " */
        snprintf(err, errlen, "--mesh '%s': %s", text, reason ? reason + 2 : why);
        return rc;
    }
    *rows = r32;
    *cols = c32;
    return NPU_OK;
}

static int parse_number_opt(const char *opt, const char *value, uint32_t min, uint32_t max,
                            uint32_t *out, char *err, size_t errlen)
{
    uint64_t v;
    int rc = npuctl_parse_decimal(value, max, &v);
    if (rc == NPU_OK && v < min)
        rc = NPU_ERR_RANGE;
    if (rc == NPU_ERR_FORMAT) {
        snprintf(err, errlen, "%s '%s': expected a whole number %u..%u", opt, value, min, max);
        return rc;
    }
    if (rc) {
        snprintf(err, errlen, "%s '%s': out of range %u..%u", opt, value, min, max);
        return rc;
    }
    *out = (uint32_t)v;
    return NPU_OK;
}

static int parse_threads(const char *value, enum npuctl_threads *out, char *err, size_t errlen)
{
    if (strcmp(value, "multi") == 0)
        *out = NPUCTL_THREADS_MULTI;
    else if (strcmp(value, "single") == 0)
        *out = NPUCTL_THREADS_SINGLE;
    else if (strcmp(value, "auto") == 0)
        *out = NPUCTL_THREADS_AUTO;
    else {
        snprintf(err, errlen, "--threads '%s': expected single, multi or auto", value);
        return NPU_ERR_INVAL;
    }
    return NPU_OK;
}

static int parse_machine_mode(const char *value, enum npuctl_machine_mode *out, char *err,
                              size_t errlen)
{
    if (strcmp(value, "functional") == 0)
        *out = NPUCTL_MACHINE_FUNCTIONAL;
    else if (strcmp(value, "performance") == 0)
        *out = NPUCTL_MACHINE_PERFORMANCE;
    else {
        snprintf(err, errlen, "--mode '%s': expected functional or performance", value);
        return NPU_ERR_INVAL;
    }
    return NPU_OK;
}

/* The options of bench alone. */
static int apply_bench_opt(enum opt_id id, const char *name, const char *value,
                           struct npuctl_run_opts *o, char *err, size_t errlen)
{
    switch (id) {
    case OPT_QUICK:
        o->bench_quick = true;
        return NPU_OK;
    case OPT_RAW:
        o->bench_raw = true;
        return NPU_OK;
    case OPT_REPEAT:
        return parse_number_opt(name, value, 1, BENCH_REPEAT_MAX, &o->bench_repeat, err,
                                errlen);
    default:
        return NPU_ERR_INVAL;
    }
}

static int apply_opt(enum opt_id id, const char *name, const char *value,
                     struct npuctl_run_opts *o, char *err, size_t errlen)
{
    switch (id) {
    case OPT_CHIP:
        if (*value == '\0') {
            snprintf(err, errlen, "--chip: expected a chip NAME or a PATH, got ''");
            return NPU_ERR_INVAL;
        }
        o->chip = value;
        return NPU_OK;
    case OPT_MESH:
        o->mesh_set = true;
        return npuctl_parse_mesh(value, &o->mesh_rows, &o->mesh_cols, err, errlen);
    case OPT_THREADS:
        o->threads_set = true;
        return parse_threads(value, &o->threads, err, errlen);
    case OPT_TIMEOUT:
        return parse_number_opt(name, value, 0, NPUCTL_TIMEOUT_MAX_S, &o->timeout_s, err,
                                errlen);
    case OPT_WATCHDOG:
        o->watchdog_set = true;
        return parse_number_opt(name, value, 1, NPUCTL_WATCHDOG_MAX_MS, &o->watchdog_ms, err,
                                errlen);
    case OPT_PORT:
        return parse_number_opt(name, value, 1, 65535, &o->gdb_port, err, errlen);
    case OPT_CORE:
        return parse_number_opt(name, value, 0, CHIP_CORES_MAX - 1, &o->gdb_core, err,
                                errlen);
    case OPT_QUIET:
        o->quiet_guest_errors = true;
        return NPU_OK;
    case OPT_PRINT_CMD:
        o->print_cmd = true;
        return NPU_OK;
    case OPT_TAP:
        o->tap = true;
        return NPU_OK;
    case OPT_MODE:
        return parse_machine_mode(value, &o->machine_mode, err, errlen);
    default:
        return apply_bench_opt(id, name, value, o, err, errlen);
    }
}

static int apply_run_opt(void *ctx, const struct npuctl_opt *opt, const char *value,
                         char *err, size_t errlen)
{
    return apply_opt((enum opt_id)opt->id, opt->name, value, ctx, err, errlen);
}

static void set_defaults(enum npuctl_mode mode, struct npuctl_run_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->mode = mode;
    o->chip = NPUCTL_DEFAULT_CHIP;
    o->threads = NPUCTL_THREADS_MULTI;
    o->timeout_s = mode == NPUCTL_MODE_DEBUG ? 0 : NPUCTL_DEFAULT_TIMEOUT_S;
    o->gdb_port = NPUCTL_DEFAULT_GDB_PORT;
    o->gdb_core = 0;
}

/* bench: the one positional argument is the benchmark (checked by cmd_bench.c). */
static int set_bench_name(struct npuctl_run_opts *o, int npos, char **pos, char *err,
                          size_t errlen)
{
    if (npos > 1) {
        snprintf(err, errlen, "bench: unexpected argument '%s' (expected one benchmark: "
                 "gemm, dma, noc, collectives, m2n or host)", pos[1]);
        return NPU_ERR_INVAL;
    }
    if (npos == 0 || *pos[0] == '\0') {
        snprintf(err, errlen, "bench: which benchmark? gemm, dma, noc, collectives, m2n or "
                 "host");
        return NPU_ERR_INVAL;
    }
    o->image = pos[0];
    return NPU_OK;
}

/* Turns the positional arguments into an image NAME or a CTRL/CORE pair. */
static int set_images(struct npuctl_run_opts *o, int npos, char **pos, char *err,
                      size_t errlen)
{
    if (o->mode == NPUCTL_MODE_BENCH)
        return set_bench_name(o, npos, pos, err, errlen);
    if (o->mode == NPUCTL_MODE_SELFTEST && npos > 0) {
        snprintf(err, errlen, "selftest: takes no image argument, got '%s' (use npuctl run)",
                 pos[0]);
        return NPU_ERR_INVAL;
    }
    if (npos > 2) {
        snprintf(err, errlen, "%s: unexpected argument '%s' (expected NAME or CTRL.elf "
                 "CORE.elf)", mode_names[o->mode], pos[2]);
        return NPU_ERR_INVAL;
    }
    for (int k = 0; k < npos; k++)
        if (*pos[k] == '\0') {
            snprintf(err, errlen, "%s: empty image argument", mode_names[o->mode]);
            return NPU_ERR_INVAL;
        }
    if (npos == 2) {
        o->ctrl_elf = pos[0];
        o->core_elf = pos[1];
    } else {
        o->image = npos == 1 ? pos[0]
                   : o->mode == NPUCTL_MODE_SELFTEST ? NPUCTL_SELFTEST_IMAGE
                                                     : NPUCTL_DEFAULT_IMAGE;
    }
    return NPU_OK;
}

static const struct npuctl_cmd_spec *const mode_specs[] = {
    [NPUCTL_MODE_RUN] = &npuctl_spec_run,
    [NPUCTL_MODE_SELFTEST] = &npuctl_spec_selftest,
    [NPUCTL_MODE_DEBUG] = &npuctl_spec_debug,
    [NPUCTL_MODE_BENCH] = &npuctl_spec_bench,
};

/* Defaults, then the options of spec's command into *out: what every launch parses. */
static int parse_launch(const struct npuctl_cmd_spec *spec, enum npuctl_mode mode, int argc,
                        char **argv, struct npuctl_run_opts *out, struct npuctl_args *args,
                        char *err, size_t errlen)
{
    void *const ctx[NPUCTL_GROUPS_MAX] = { out, out, out };
    set_defaults(mode, out);
    int rc = npuctl_opts_parse(spec, ctx, argc, argv, args, err, errlen);
    out->help = args->help;
    out->extra_argc = args->extra_argc;
    out->extra_argv = args->extra_argv;
    return rc;
}

int npuctl_parse_run_args(enum npuctl_mode mode, int argc, char **argv,
                          struct npuctl_run_opts *out, char *err, size_t errlen)
{
    struct npuctl_args args;
    int rc = parse_launch(mode_specs[mode], mode, argc, argv, out, &args, err, errlen);
    if (rc == NPU_OK && !out->help)
        rc = set_images(out, args.npos, args.pos, err, errlen);
    npuctl_args_free(&args);
    return rc;
}

int npuctl_parse_flash_args(int argc, char **argv, struct npuctl_run_opts *out,
                            const char **image, char *err, size_t errlen)
{
    struct npuctl_args args;
    int rc = parse_launch(&npuctl_spec_flash, NPUCTL_MODE_RUN, argc, argv, out, &args, err,
                          errlen);
    *image = rc == NPU_OK && args.npos == 1 ? args.pos[0] : NULL;
    if (rc == NPU_OK && !out->help && !*image) {
        snprintf(err, errlen, "flash: IMAGE is required (npuctl flash --help)");
        rc = NPU_ERR_INVAL;
    }
    npuctl_args_free(&args);
    return rc;
}

/* ---- the usages (parse_only: the options alone, without the positional checks) */

#define PARSE_ONLY(fn, spec, mode)                                                           \
    static int fn(int argc, char **argv, char *err, size_t errlen)                           \
    {                                                                                        \
        struct npuctl_run_opts o;                                                            \
        struct npuctl_args args;                                                             \
        int rc = parse_launch(&spec, mode, argc, argv, &o, &args, err, errlen);              \
        npuctl_args_free(&args);                                                             \
        return rc;                                                                           \
    }
PARSE_ONLY(parse_only_run, npuctl_spec_run, NPUCTL_MODE_RUN)
PARSE_ONLY(parse_only_selftest, npuctl_spec_selftest, NPUCTL_MODE_SELFTEST)
PARSE_ONLY(parse_only_debug, npuctl_spec_debug, NPUCTL_MODE_DEBUG)
PARSE_ONLY(parse_only_bench, npuctl_spec_bench, NPUCTL_MODE_BENCH)
PARSE_ONLY(parse_only_flash, npuctl_spec_flash, NPUCTL_MODE_RUN)

#define LAUNCH_GROUPS { &run_group, &debug_group, &bench_group }

const struct npuctl_cmd_spec npuctl_spec_run = {
    "run", NPUCTL_CMD_RUN,
    "npuctl run [NAME | CTRL.elf CORE.elf] [OPTIONS] [-- QEMU ARGS...]\n",
    "run a firmware image pair on the emulated chip",
    "  Run a firmware image pair on the emulated chip. NAME (default " NPUCTL_DEFAULT_IMAGE
    ") is the\n  directory $NPU_FIRMWARE_DIR/NAME/ holding ctrl.elf and core.elf (a NAME "
    "with '/' is that\n  directory itself). Exit status: QEMU's (128+N on signal N), 124 on "
    "--timeout, 2 on error.\n",
    LAUNCH_GROUPS, true, -1, parse_only_run,
};

const struct npuctl_cmd_spec npuctl_spec_selftest = {
    "selftest", NPUCTL_CMD_SELFTEST, "npuctl selftest [OPTIONS] [-- QEMU ARGS...]\n",
    "run the on-target self-tests (TAP)",
    "  Run the on-target self-tests: the same as `npuctl run " NPUCTL_SELFTEST_IMAGE
    "`, with run's options.\n",
    LAUNCH_GROUPS, true, -1, parse_only_selftest,
};

const struct npuctl_cmd_spec npuctl_spec_debug = {
    "debug", NPUCTL_CMD_DEBUG,
    "npuctl debug [NAME | CTRL.elf CORE.elf] [OPTIONS] [-- QEMU ARGS...]\n",
    "start QEMU halted with a gdb stub and print how to attach",
    "  Start QEMU halted at reset with a gdb stub (-gdb tcp:localhost:PORT -S, no timeout)\n"
    "  and print the gdb-multiarch command that attaches. gdb threads are the harts:\n"
    "  thread N+1 is NPU core N, the last thread is the control core.\n"
    "  Takes run's options except --timeout.\n",
    LAUNCH_GROUPS, true, -1, parse_only_debug,
};

const struct npuctl_cmd_spec npuctl_spec_bench = {
    "bench", NPUCTL_CMD_BENCH,
    "npuctl bench gemm|dma|noc|collectives|m2n|host [OPTIONS] [-- QEMU ARGS...]\n",
    "measure the engines, the NoC, the collectives or the host against their bounds",
    "  Run a benchmark image and print its measurements as a table next to the analytical\n"
    "  bound, with one summary line per target (docs/benchmarks.md):\n"
    "    gemm  matrix-engine utilisation of core 0 over a grid of GEMM shapes\n"
    "    dma   HBM <-> SRAM transfers, 1 KiB .. 16 MiB and more, one and several cores\n"
    "    noc   latency per hop, link bandwidth, two and four writes sharing links\n"
    "    collectives  all-gather, reduce-scatter, all-reduce on 4, 16, 64 cores, each\n"
    "          placement, 1 KiB .. 64 MiB, beside the bandwidth and latency bounds\n"
    "    m2n   M2N dispatch, N2M combine and the all-to-all-v between two core sets\n"
    "          (M = N = 8, 4 KiB .. 1 MiB a pair; M = N = 4 .. 32 at 256 KiB)\n"
    "    host  host wall-clock time per engine command and per submit, 4x4 and 16x16\n"
    "  gemm, dma, noc, collectives and m2n run in performance mode unless --mode says\n"
    "  otherwise; host measures both modes (or the one --mode names), both meshes (or\n"
    "  --mesh) and both TCG threadings (or --threads); --mesh and --mode apply to every\n"
    "  run. host --quick: the 4x4 mesh (or --mesh) and one threading (--threads, default\n"
    "  multi), fewer commands, one run per point. Exit status 0 whether targets are met\n"
    "  or not; 2 if a run fails or on bad arguments.\n",
    LAUNCH_GROUPS, true, -1, parse_only_bench,
};

const struct npuctl_cmd_spec npuctl_spec_flash = {
    "flash", NPUCTL_CMD_FLASH, "npuctl flash IMAGE [OPTIONS] [-- QEMU ARGS...]\n",
    "run the model firmware with an image built by build-image",
    "  Run the model firmware with IMAGE at the base of HBM: the control core checks the\n"
    "  image (version, checksum, tables, built for this chip and mode) before any core\n"
    "  loads from it, and refuses a bad one (exit 1). --chip and --mode default to the\n"
    "  image's. Requests come as bootargs: -- -append \"prompt=1,2,3 new=8\"\n"
    "  (docs/images.md). Takes run's options.\n",
    LAUNCH_GROUPS, true, 1, parse_only_flash,
};
