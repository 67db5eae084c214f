/* SPDX-License-Identifier: MIT */
/*
 * npuctl bench host: host wall-clock time per engine command and per descriptor.
 *
 * For each mesh (4x4 and 16x16, or --mesh), mode (functional and performance, or --mode) and
 * chain length k (1 and 16 descriptors per command), the bench_host image runs with every
 * core issuing n commands of k descriptors (firmware/bench/bench_host.c), n chosen so that a
 * run carries about the same number of descriptors whatever the mesh. Each point is run
 * --repeat times (default 3, --quick 1) and so is a baseline of the same image with n=0
 * (boot, release, report); the figure is (median wall time - median baseline) / commands,
 * and / descriptors. Wall time is clock_gettime(CLOCK_MONOTONIC) around the QEMU process.
 */
#define _POSIX_C_SOURCE 200809L
#include "cmd_bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HOST_DESCS_FULL 409600u /* descriptors per run: 1600 chains of 16 on 16x16 */
#define HOST_DESCS_QUICK 16384u
#define HOST_REPEAT_DEFAULT 3u
#define HOST_REPEAT_MAX 100u
#define HOST_TARGET_US 2.0
#define NOISE_FACTOR 3.0 /* a figure is firm when its extra time is 3 x the runs' spread */

struct host_point {
    uint32_t rows, cols;
    enum npuctl_machine_mode mode;
    uint32_t k;                 /* 0: the baseline */
    uint64_t commands, descs;
    double median_s, min_s, max_s;
    double base_s;              /* the median of its baseline */
};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Runs one point `repeat` times; fills its wall-time statistics and counts. */
static int host_measure(const struct npuctl_run_opts *o, struct host_point *p, uint64_t n,
                        uint32_t repeat)
{
    char args[96];
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
            p->commands = bench_get_u64(r, "commands");
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
    printf("npuctl bench host: host wall-clock time per engine command, chip %s, TCG %s, "
           "this host: %ld CPUs\n", o->chip,
           o->threads == NPUCTL_THREADS_SINGLE ? "single-threaded" : "multi-threaded",
           sysconf(_SC_NPROCESSORS_ONLN));
    printf("measured: wall-clock time of the QEMU run (CLOCK_MONOTONIC around it), median of "
           "%u run(s),\n          minus the median of the same image issuing no command "
           "(boot, release, report)\ncommands: every core submits n chains of k DMA "
           "descriptors (256 bytes HBM -> SRAM each,\n          the last signalling the core) "
           "and waits for each chain before the next\n\n", repeat);
    printf("%-6s %-12s %3s %9s %11s %8s %8s %8s %11s %11s\n", "mesh", "mode", "k", "commands",
           "descriptors", "run s", "base s", "spread s", "us/command", "us/desc");
}

/* One row; true if the figure is noisy (the extra time under NOISE_FACTOR x the spread). */
static bool host_print_row(const struct host_point *p, const struct host_point *base)
{
    char mesh[16];
    double extra = p->median_s - base->median_s;
    double spread = (p->max_s - p->min_s) > (base->max_s - base->min_s)
                        ? p->max_s - p->min_s : base->max_s - base->min_s;
    bool noisy = extra < NOISE_FACTOR * spread;
    snprintf(mesh, sizeof(mesh), "%ux%u", p->rows, p->cols);
    printf("%-6s %-12s %3u %9llu %11llu %8.2f %8.2f %8.2f %11.2f %11.3f%s\n", mesh,
           npuctl_machine_mode_name(p->mode), p->k, (unsigned long long)p->commands,
           (unsigned long long)p->descs, p->median_s, base->median_s, spread,
           extra * 1e6 / (double)p->commands, extra * 1e6 / (double)p->descs,
           noisy ? " *" : "");
    return noisy;
}

/* One mesh and mode: the baseline, then k = 1 and k = 16. */
static int host_mesh_mode(const struct npuctl_run_opts *o, uint32_t rows, uint32_t cols,
                          enum npuctl_machine_mode mode, uint32_t repeat,
                          struct host_point *target, bool *noisy)
{
    static const uint32_t chains[] = { 1, 16 };
    uint32_t descs = o->bench_quick ? HOST_DESCS_QUICK : HOST_DESCS_FULL;
    struct host_point base = { .rows = rows, .cols = cols, .mode = mode };
    int rc = host_measure(o, &base, 0, repeat);
    for (size_t i = 0; rc == 0 && i < sizeof(chains) / sizeof(chains[0]); i++) {
        struct host_point p = { .rows = rows, .cols = cols, .mode = mode, .k = chains[i] };
        uint64_t n = descs / ((uint64_t)rows * cols * chains[i]);
        rc = host_measure(o, &p, n ? n : 1, repeat);
        p.base_s = base.median_s;
        if (rc == 0 && !o->print_cmd) {
            *noisy |= host_print_row(&p, &base);
            fflush(stdout);
            if (rows == 16 && cols == 16 && mode == NPUCTL_MACHINE_PERFORMANCE && p.k > 1)
                *target = p;
        }
    }
    return rc;
}

static void host_print_target(const struct host_point *t)
{
    if (t->commands == 0) {
        printf("target (<= %.1f us per command, performance mode, 16x16, chains): not "
               "measured in this run\n", HOST_TARGET_US);
        return;
    }
    double per_cmd = (t->median_s - t->base_s) * 1e6 / (double)t->commands;
    printf("performance mode, 16x16, chains of %u descriptors: %.2f us of host time per "
           "command (target <= %.1f us): %s\n", t->k, per_cmd, HOST_TARGET_US,
           bench_verdict(per_cmd <= HOST_TARGET_US));
}

int bench_host(const struct npuctl_run_opts *o)
{
    static const uint32_t meshes[][2] = { { 4, 4 }, { 16, 16 } };
    static const enum npuctl_machine_mode modes[] = { NPUCTL_MACHINE_FUNCTIONAL,
                                                      NPUCTL_MACHINE_PERFORMANCE };
    uint32_t repeat = o->bench_repeat ? o->bench_repeat
                      : o->bench_quick ? 1 : HOST_REPEAT_DEFAULT;
    size_t nmesh = o->mesh_set || o->bench_quick ? 1 : 2;
    struct host_point target = { 0 };
    bool noisy = false;
    int rc = 0;
    if (!o->print_cmd)
        host_header(o, repeat);
    for (size_t m = 0; rc == 0 && m < nmesh; m++)
        for (size_t d = 0; rc == 0 && d < 2; d++) {
            if (o->machine_mode != NPUCTL_MACHINE_DEFAULT && modes[d] != o->machine_mode)
                continue;
            rc = host_mesh_mode(o, o->mesh_set ? o->mesh_rows : meshes[m][0],
                                o->mesh_set ? o->mesh_cols : meshes[m][1], modes[d], repeat,
                                &target, &noisy);
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
