/* SPDX-License-Identifier: MIT */
/*
 * npuctl bench host: host wall-clock time per engine command (one descriptor, the unit of
 * work an engine executes) and per submit (one SUBMIT of a chain, waited for).
 *
 * For each mesh (4x4 and 16x16, or --mesh; --quick: 4x4), mode (functional and performance,
 * or --mode), TCG threading (single and multi, or --threads; --quick: --threads' alone,
 * default multi) and chain length k (1 and 16 descriptors per submit), the bench_host image
 * runs with every core issuing n submits of k descriptors (firmware/bench/bench_host.c), n
 * chosen so that a run carries the same number of descriptors whatever the mesh: enough
 * that the time they add is seconds, well above the run-to-run noise of booting hundreds of
 * harts. Each point is run --repeat times (default 3, --quick 1) and so is a baseline of the
 * same image with n=0 (boot, release, report); the figure is (median wall time - median
 * baseline) / commands, and / submits. Wall time is clock_gettime(CLOCK_MONOTONIC) around
 * the QEMU process.
 */
#define _POSIX_C_SOURCE 200809L
#include "cmd_bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Descriptors per run, by chain length: 16x16 runs n = 4096 single submits, 1024 chains. */
#define HOST_DESCS_K1 1048576u
#define HOST_DESCS_CHAIN 4194304u
#define HOST_DESCS_QUICK 16384u
#define HOST_REPEAT_DEFAULT 3u
#define HOST_REPEAT_MAX 100u
#define HOST_TARGET_US 2.0
#define NOISE_FACTOR 3.0 /* a figure is firm when its extra time is 3 x the runs' spread */

struct host_point {
    uint32_t rows, cols;
    enum npuctl_machine_mode mode;
    enum npuctl_threads threads;
    uint32_t k;                 /* 0: the baseline */
    uint64_t submits, descs;
    double median_s, min_s, max_s;
    double base_s;              /* the median of its baseline */
    bool noisy;                 /* the extra time is under NOISE_FACTOR x the spread */
};

/* Host microseconds per descriptor of a measured point. */
static double host_per_desc(const struct host_point *p)
{
    return (p->median_s - p->base_s) * 1e6 / (double)p->descs;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Runs one point `repeat` times; fills its wall-time statistics and counts. */
static int host_measure(const struct npuctl_run_opts *opts, struct host_point *p,
                        uint64_t n, uint32_t repeat)
{
    struct npuctl_run_opts run = *opts;
    const struct npuctl_run_opts *o = &run;
    char args[96];
    run.threads = p->threads;
    double wall[HOST_REPEAT_MAX];
    snprintf(args, sizeof(args), "n=%llu k=%u", (unsigned long long)n, p->k ? p->k : 1);
    struct bench_launch l = { .image = "bench_host", .bootargs = args, .mode = p->mode,
                              .mesh_set = true, .rows = p->rows, .cols = p->cols };
    for (uint32_t i = 0; i < repeat; i++) {
        struct bench_output out;
        int rc = bench_run_image(o, &l, &out);
        const struct bench_rec *r = rc == 0 ? bench_first(&out, "host") : NULL;
        if (rc == 0 && !out.printed && !r) {
            npuctl_print_error("bench host: the run printed no 'BENCH host' line");
            rc = NPUCTL_EXIT_USAGE;
        }
        if (r) {
            p->submits = bench_get_u64(r, "submits");
            p->descs = bench_get_u64(r, "descs");
        }
        wall[i] = out.wall_s;
        bench_output_free(&out);
        if (rc)
            return rc;
    }
    qsort(wall, repeat, sizeof(wall[0]), cmp_double);
    p->min_s = wall[0];
    p->max_s = wall[repeat - 1];
    p->median_s = repeat % 2 ? wall[repeat / 2] : (wall[repeat / 2 - 1] + wall[repeat / 2]) / 2;
    return 0;
}

static void host_header(const struct npuctl_run_opts *o, uint32_t repeat)
{
    printf("npuctl bench host: host wall-clock time per engine command, chip %s, this host: "
           "%ld CPUs\n", o->chip, sysconf(_SC_NPROCESSORS_ONLN));
    printf("measured: wall-clock time of the QEMU run (CLOCK_MONOTONIC around it), median of "
           "%u run(s),\n          minus the median of the same image issuing no command "
           "(boot, release, report)\nwork:     every core submits n chains of k DMA "
           "descriptors (256 bytes HBM -> SRAM each,\n          the last signalling the core) "
           "and waits for each chain before the next\ncommand:  one descriptor (what an "
           "engine executes); submit: one SUBMIT of a chain, waited for\n\n", repeat);
    printf("%-6s %-12s %-6s %3s %9s %9s %8s %8s %8s %10s %11s\n", "mesh", "mode", "tcg", "k",
           "submits", "commands", "run s", "base s", "spread s", "us/submit", "us/command");
}

static const char *threads_name(enum npuctl_threads t)
{
    return t == NPUCTL_THREADS_SINGLE ? "single" : "multi";
}

/* One row; true if the figure is noisy (the extra time under NOISE_FACTOR x the spread). */
static bool host_print_row(const struct host_point *p, const struct host_point *base)
{
    char mesh[16];
    double extra = p->median_s - base->median_s;
    double spread = (p->max_s - p->min_s) > (base->max_s - base->min_s)
                        ? p->max_s - p->min_s : base->max_s - base->min_s;
    bool noisy = extra < NOISE_FACTOR * spread;
    char per_submit[16] = "-", per_command[16] = "-"; /* a run no slower than the base
                                                           resolves no cost: none shown */
    if (extra > 0) {
        snprintf(per_submit, sizeof(per_submit), "%.2f", extra * 1e6 / (double)p->submits);
        snprintf(per_command, sizeof(per_command), "%.3f", extra * 1e6 / (double)p->descs);
    }
    snprintf(mesh, sizeof(mesh), "%ux%u", p->rows, p->cols);
    printf("%-6s %-12s %-6s %3u %9llu %9llu %8.2f %8.2f %8.2f %10s %11s%s\n", mesh,
           npuctl_machine_mode_name(p->mode), threads_name(p->threads), p->k,
           (unsigned long long)p->submits, (unsigned long long)p->descs, p->median_s,
           base->median_s, spread, per_submit, per_command, noisy ? " *" : "");
    return noisy;
}

/* A point's descriptors spread over the cores: n submits of k per core (at least 1). */
static uint64_t host_submits_per_core(const struct npuctl_run_opts *o, uint32_t cores,
                                      uint32_t k)
{
    uint64_t descs = o->bench_quick ? HOST_DESCS_QUICK
                     : k == 1       ? HOST_DESCS_K1 : HOST_DESCS_CHAIN;
    uint64_t n = descs / ((uint64_t)cores * k);
    return n ? n : 1;
}

/* One mesh, mode and threading: the baseline, then k = 1 and k = 16. */
static int host_mesh_mode(const struct npuctl_run_opts *o, const struct host_point *cfg,
                          uint32_t repeat, struct host_point *target, bool *noisy)
{
    static const uint32_t chains[] = { 1, 16 };
    struct host_point base = *cfg;
    int rc = host_measure(o, &base, 0, repeat);
    for (size_t i = 0; rc == 0 && i < sizeof(chains) / sizeof(chains[0]); i++) {
        struct host_point p = *cfg;
        p.k = chains[i];
        rc = host_measure(o, &p, host_submits_per_core(o, p.rows * p.cols, p.k), repeat);
        p.base_s = base.median_s;
        if (rc == 0 && !o->print_cmd) {
            bool row_noisy = host_print_row(&p, &base);
            *noisy |= row_noisy;
            fflush(stdout);
            p.noisy = row_noisy;
            if (p.rows == 16 && p.cols == 16 && p.mode == NPUCTL_MACHINE_PERFORMANCE &&
                p.k > 1 && (target->descs == 0 || host_per_desc(&p) < host_per_desc(target)))
                *target = p;
        }
    }
    return rc;
}

static void host_print_target(const struct host_point *t)
{
    if (t->descs == 0) {
        printf("target (<= %.1f us per command, performance mode, 16x16, chains): not "
               "measured in this run\n", HOST_TARGET_US);
        return;
    }
    double per_cmd = host_per_desc(t);
    printf("performance mode, 16x16, chains of %u descriptors, TCG %s: %.3f us of host time "
           "per command (target <= %.1f us): %s\n", t->k, threads_name(t->threads), per_cmd,
           HOST_TARGET_US, t->noisy || per_cmd <= 0 ? "not resolved (noisy)"
                           : bench_verdict(per_cmd <= HOST_TARGET_US));
}

int bench_host(const struct npuctl_run_opts *o)
{
    static const uint32_t meshes[][2] = { { 4, 4 }, { 16, 16 } };
    static const enum npuctl_machine_mode modes[] = { NPUCTL_MACHINE_FUNCTIONAL,
                                                      NPUCTL_MACHINE_PERFORMANCE };
    static const enum npuctl_threads threads[] = { NPUCTL_THREADS_SINGLE,
                                                   NPUCTL_THREADS_MULTI };
    uint32_t repeat = o->bench_repeat ? o->bench_repeat
                      : o->bench_quick ? 1 : HOST_REPEAT_DEFAULT;
    size_t nmesh = o->mesh_set || o->bench_quick ? 1 : 2;
    struct host_point target = { 0 };
    bool noisy = false;
    int rc = 0;
    if (!o->print_cmd)
        host_header(o, repeat);
    for (size_t m = 0; rc == 0 && m < nmesh; m++)
        for (size_t d = 0; rc == 0 && d < 2; d++)
            for (size_t t = 0; rc == 0 && t < 2; t++) {
                if ((o->machine_mode != NPUCTL_MACHINE_DEFAULT && modes[d] != o->machine_mode) ||
                    ((o->threads_set || o->bench_quick) &&
                     threads[t] != npuctl_threads_here(o->threads)))
                    continue;
                struct host_point cfg = {
                    .rows = o->mesh_set ? o->mesh_rows : meshes[m][0],
                    .cols = o->mesh_set ? o->mesh_cols : meshes[m][1],
                    .mode = modes[d], .threads = threads[t],
                };
                rc = host_mesh_mode(o, &cfg, repeat, &target, &noisy);
            }
    if (rc == 0 && !o->print_cmd) {
        if (noisy)
            printf("* noisy: the time the commands added is under %.0f x the spread of the "
                   "runs; use --repeat or a quieter host\n", NOISE_FACTOR);
        printf("\n");
        host_print_target(&target);
    }
    return rc;
}
