/* SPDX-License-Identifier: MIT */
/*
 * npuctl command lines: the QEMU invocation of run / selftest / debug and the gdb-multiarch
 * invocation that attaches to a debug run. Pure functions of the options, the chip config and
 * the resolved files (and, for `--threads auto`, the host's CPUs), checked by
 * tests/host/test_npuctl_args.c.
 *
 *   QEMU -machine npu-mesh,config=CFG,rows=R,cols=C,core-image=CORE[,watchdog-ms=N]
 *                 [,mode=functional|performance]
 *        -smp R*C+1 -kernel CTRL -accel tcg,thread=multi|single -nodefaults -display none
 *        -monitor none -serial stdio -no-reboot [-d guest_errors] [-gdb tcp:localhost:P -S]
 *        [EXTRA...]
 */
#define _POSIX_C_SOURCE 200809L
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "npuctl.h"

#include <inttypes.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "npu_enums.h"
#include "npu_memmap.h"

/* Multi-threaded TCG gives each hart a host thread. On a host of 1 or 2 CPUs the harts'
   threads mostly take turns, and each wake-up crosses threads: the first 8 requests of the
   reference serving run took 15 % less wall time single-threaded on this project's 2-CPU
   machine (docs/results.md), with identical results. Larger hosts keep multi (not measured
   here). */
enum npuctl_threads npuctl_resolve_threads(enum npuctl_threads t, long cpus)
{
    if (t != NPUCTL_THREADS_AUTO)
        return t;
    return cpus > 0 && cpus <= 2 ? NPUCTL_THREADS_SINGLE : NPUCTL_THREADS_MULTI;
}

long npuctl_host_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        return CPU_COUNT(&set);
    return sysconf(_SC_NPROCESSORS_ONLN);
}

enum npuctl_threads npuctl_threads_here(enum npuctl_threads t)
{
    return npuctl_resolve_threads(t, t == NPUCTL_THREADS_AUTO ? npuctl_host_cpus() : 0);
}

void npuctl_get_mesh(const struct npuctl_run_opts *opts, const struct chip_config *cfg,
                     uint32_t *rows, uint32_t *cols)
{
    *rows = opts->mesh_set ? opts->mesh_rows : cfg->mesh_rows;
    *cols = opts->mesh_set ? opts->mesh_cols : cfg->mesh_cols;
}

uint64_t npuctl_core_sram_base(uint32_t core)
{
    return npu_map_instance_base(NPU_MAP_SRAM, core);
}

/* A value inside a QEMU -machine option string: ',' must be doubled. Caller frees. */
static char *qemu_opt_escape(const char *s)
{
    size_t commas = 0;
    for (const char *p = s; *p; p++)
        commas += *p == ',';
    char *out = malloc(strlen(s) + commas + 1);
    if (!out)
        return NULL;
    char *q = out;
    for (const char *p = s; *p; p++) {
        *q++ = *p;
        if (*p == ',')
            *q++ = ',';
    }
    *q = '\0';
    return out;
}

static void push_machine(struct npuctl_argv *a, const struct npuctl_run_opts *opts,
                         const struct npuctl_files *files, uint32_t rows, uint32_t cols)
{
    char *cfg = qemu_opt_escape(files->chip_path);
    char *core = qemu_opt_escape(files->core_elf);
    char watchdog[32] = "", mode[32] = "";
    if (opts->watchdog_set)
        snprintf(watchdog, sizeof(watchdog), ",watchdog-ms=%" PRIu32, opts->watchdog_ms);
    if (opts->machine_mode != NPUCTL_MACHINE_DEFAULT)
        snprintf(mode, sizeof(mode), ",mode=%s", npuctl_machine_mode_name(opts->machine_mode));
    if (cfg && core)
        npuctl_argv_pushf(a, "npu-mesh,config=%s,rows=%" PRIu32 ",cols=%" PRIu32
                          ",core-image=%s%s%s%s", cfg, rows, cols, core, watchdog, mode,
                          opts->tap ? ",console-stamps=off" : "");
    else
        a->failed = true;
    free(cfg);
    free(core);
}

int npuctl_build_qemu_argv(const struct npuctl_run_opts *opts, const struct chip_config *cfg,
                           const struct npuctl_files *files, char ***argv_out)
{
    struct npuctl_argv a = { 0 };
    uint32_t rows, cols;
    npuctl_get_mesh(opts, cfg, &rows, &cols);
    npuctl_argv_push(&a, files->qemu);
    npuctl_argv_push(&a, "-machine");
    push_machine(&a, opts, files, rows, cols);
    npuctl_argv_push(&a, "-smp");
    npuctl_argv_pushf(&a, "%" PRIu32, rows * cols + 1);
    npuctl_argv_push(&a, "-kernel");
    npuctl_argv_push(&a, files->ctrl_elf);
    npuctl_argv_push(&a, "-accel");
    npuctl_argv_push(&a, npuctl_threads_here(opts->threads) == NPUCTL_THREADS_SINGLE
                             ? "tcg,thread=single"
                             : "tcg,thread=multi");
    static const char *const fixed[] = { "-nodefaults", "-display", "none", "-monitor", "none",
                                         "-serial", "stdio", "-no-reboot" };
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        npuctl_argv_push(&a, fixed[i]);
    if (!opts->quiet_guest_errors) {
        npuctl_argv_push(&a, "-d");
        npuctl_argv_push(&a, "guest_errors");
    }
    if (opts->mode == NPUCTL_MODE_DEBUG) {
        npuctl_argv_push(&a, "-gdb");
        npuctl_argv_pushf(&a, "tcp:localhost:%" PRIu32, opts->gdb_port);
        npuctl_argv_push(&a, "-S");
    }
    for (int i = 0; i < opts->extra_argc; i++)
        npuctl_argv_push(&a, opts->extra_argv[i]);
    return npuctl_argv_finish(&a, argv_out);
}

/* A file name as one gdb command argument: double-quoted if it has blanks or quotes. */
static char *gdb_quote_path(const char *path)
{
    if (strpbrk(path, " \t\"'\\") == NULL)
        return strdup(path);
    char *out = malloc(2 * strlen(path) + 3), *q = out;
    if (!out)
        return NULL;
    *q++ = '"';
    for (const char *p = path; *p; p++) {
        if (*p == '"' || *p == '\\')
            *q++ = '\\';
        *q++ = *p;
    }
    *q++ = '"';
    *q = '\0';
    return out;
}

int npuctl_build_gdb_argv(const struct npuctl_run_opts *opts, const struct npuctl_files *files,
                          char ***argv_out)
{
    struct npuctl_argv a = { 0 };
    char *ctrl = gdb_quote_path(files->ctrl_elf);
    char *core = gdb_quote_path(files->core_elf);
    if (!ctrl || !core)
        a.failed = true;
    npuctl_argv_push(&a, "gdb-multiarch");
    npuctl_argv_push(&a, "-q");
    npuctl_argv_push(&a, "-ex");
    npuctl_argv_push(&a, "set architecture riscv:rv64");
    npuctl_argv_push(&a, "-ex");
    npuctl_argv_pushf(&a, "file %s", ctrl ? ctrl : "");
    npuctl_argv_push(&a, "-ex");
    npuctl_argv_pushf(&a, "add-symbol-file %s -o 0x%" PRIx64, core ? core : "",
                      npuctl_core_sram_base(opts->gdb_core));
    npuctl_argv_push(&a, "-ex");
    npuctl_argv_pushf(&a, "target extended-remote localhost:%" PRIu32, opts->gdb_port);
    free(ctrl);
    free(core);
    return npuctl_argv_finish(&a, argv_out);
}
