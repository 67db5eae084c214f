/* SPDX-License-Identifier: MIT */
/*
 * npuctl bench collectives: the table of `BENCH coll` lines (firmware/bench/bench_coll.c),
 * the target line (ring placement, messages of 4 MiB and more: at least 85 % of the
 * bandwidth bound) and, per operation and group size, the placements ranked at the largest
 * message measured. See docs/benchmarks.md.
 */
#include <stdio.h>
#include <string.h>

#include "cmd_bench.h"

#define COLL_TARGET 0.85
#define COLL_LARGE_BYTES (4ull << 20) /* "large": 4 MiB, 64 KiB a rank at p = 64 */

static void coll_header(const struct bench_output *out)
{
    const struct bench_rec *e = bench_first(out, "engines");
    bench_print_chip(out, "collectives");
    printf("NoC: B = %s GB/s per link and direction, %s cycles per hop; bf16 buffers, groups "
           "at (0,0)\n", bench_str(e, "noc_link_gbps"), bench_str(e, "noc_hop_cycles"));
    printf("measured: chip time from the first rank's start to the last rank's end, after a\n"
           "          barrier of the group (the collective's agreement included)\n"
           "bw bound: (p-1)/p x N / B (allgather, reduce_scatter), twice that (allreduce);\n"
           "          eff = bw bound / measured\n"
           "lat bound: ring steps x the ring's longest step in hops x hop latency (rows then\n"
           "          columns for mesh2d; twice for allreduce)\n"
           "placements run the ring algorithms; 'multicast' is the one-step multicast\n"
           "          all-gather (alone, or after the ring reduce-scatter of allreduce), its\n"
           "          gather bounds those of XY multicast trees on the R x C rectangle:\n"
           "          max((R-1) C, C-1)/p x N / B and R-1 + C-1 hops\n\n");
    printf("%-15s %-12s %3s %10s %13s %13s %13s %7s\n", "op", "placement", "p", "bytes",
           "measured us", "bw bound us", "lat bound us", "eff");
}

/* The ring placement's worst efficiency over messages of at least 4 MiB. */
static void coll_print_target(const struct bench_output *out)
{
    double worst = 2.0;
    const struct bench_rec *at = NULL;
    size_t n = 0;
    for (size_t i = 0; i < out->n; i++) {
        const struct bench_rec *r = &out->recs[i];
        if (!bench_is(r, "coll", "placement", "ring") ||
            bench_get_u64(r, "bytes") < COLL_LARGE_BYTES)
            continue;
        n++;
        if (bench_get_d(r, "eff") < worst)
            worst = bench_get_d(r, "eff"), at = r;
    }
    if (!at) {
        printf("ring placement, messages >= 4 MiB: not measured in this run\n");
        return;
    }
    printf("ring placement, messages >= 4 MiB (%zu cases): min eff %.3f (%s, p=%s, %s bytes) "
           "(target >= %.2f): %s\n", n, worst, bench_str(at, "op"), bench_str(at, "p"),
           bench_str(at, "bytes"), COLL_TARGET, bench_verdict(worst >= COLL_TARGET));
}

/* Per op and p, the placements at the largest message measured, fastest first. */
static void coll_print_ranking(const struct bench_output *out)
{
    static const char *const ops[] = { "allgather", "reduce_scatter", "allreduce" };
    static const char *const ps[] = { "4", "16", "64" };
    for (size_t o = 0; o < 3; o++)
        for (size_t p = 0; p < 3; p++) {
            const struct bench_rec *best[8];
            size_t n = 0;
            uint64_t top = 0;
            for (size_t i = 0; i < out->n; i++)
                if (bench_is(&out->recs[i], "coll", "op", ops[o]) &&
                    strcmp(bench_str(&out->recs[i], "p"), ps[p]) == 0 &&
                    bench_get_u64(&out->recs[i], "bytes") > top)
                    top = bench_get_u64(&out->recs[i], "bytes");
            for (size_t i = 0; i < out->n && n < 8; i++) {
                const struct bench_rec *r = &out->recs[i];
                if (bench_is(r, "coll", "op", ops[o]) && strcmp(bench_str(r, "p"), ps[p]) == 0 &&
                    bench_get_u64(r, "bytes") == top) {
                    size_t k = n++; /* insertion by measured time */
                    while (k > 0 && bench_get_d(best[k - 1], "ps") > bench_get_d(r, "ps")) {
                        best[k] = best[k - 1];
                        k--;
                    }
                    best[k] = r;
                }
            }
            if (n == 0)
                continue;
            printf("%-14s p=%-2s %9llu bytes:", ops[o], ps[p], (unsigned long long)top);
            for (size_t k = 0; k < n; k++)
                printf(" %s %.2f us%s", bench_str(best[k], "placement"),
                       bench_get_d(best[k], "ps") / 1e6, k + 1 < n ? "," : "\n");
        }
}

int bench_report_coll(const struct bench_output *out)
{
    size_t rows = 0;
    coll_header(out);
    for (size_t i = 0; i < out->n; i++) {
        const struct bench_rec *r = &out->recs[i];
        if (!bench_is(r, "coll", NULL, NULL))
            continue;
        printf("%-15s %-12s %3s %10s %13.3f %13.3f %13.3f %7.4f\n", bench_str(r, "op"),
               bench_str(r, "placement"), bench_str(r, "p"), bench_str(r, "bytes"),
               bench_get_d(r, "ps") / 1e6, bench_get_d(r, "bw_ps") / 1e6,
               bench_get_d(r, "lat_ps") / 1e6, bench_get_d(r, "eff"));
        rows++;
    }
    printf("\n");
    bench_print_notes(out);
    printf("placements at the largest message, fastest first:\n");
    coll_print_ranking(out);
    printf("\n");
    coll_print_target(out);
    return rows ? 0 : 2;
}
