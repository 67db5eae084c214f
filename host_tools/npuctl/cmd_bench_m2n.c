/* SPDX-License-Identifier: MIT */
/*
 * npuctl bench m2n: the table of `BENCH m2n` lines (firmware/bench/bench_m2n.c), then, per
 * case, the all-to-all-v's time over M2N's on the same exchange (MegaScale-Infer's section
 * 7.3 compares its M2N library with NCCL the same way). See docs/benchmarks.md.
 */
#include <stdio.h>
#include <string.h>

#include "cmd_bench.h"

static void m2n_header(const struct bench_output *out)
{
    const struct bench_rec *e = bench_first(out, "engines");
    bench_print_chip(out, "m2n");
    printf("NoC: B = %s GB/s per link and direction, %s cycles per hop; M senders on the\n"
           "rows at (0,0), N receivers right below, one pair group; bf16, `bytes` from every\n"
           "sender to every receiver\n", bench_str(e, "noc_link_gbps"),
           bench_str(e, "noc_hop_cycles"));
    printf("measured: chip time from the first member's start to the last one's end, after a\n"
           "          barrier (the collective's agreement and count exchange included)\n"
           "bw bound: max(N x bytes / B: a sender's one endpoint, L x bytes / B: the L\n"
           "          blocks the busiest link carries over the XY routes); n2m backwards\n"
           "lat bound: one write's hops between the farthest pair; eff = bw bound / measured\n\n");
    printf("%-10s %3s %3s %10s %13s %13s %13s %10s %7s\n", "op", "M", "N", "bytes",
           "measured us", "bw bound us", "lat bound us", "GB/s", "eff");
}

/* The same case's record of another op, or NULL. */
static const struct bench_rec *same_case(const struct bench_output *out,
                                         const struct bench_rec *r, const char *op)
{
    for (size_t i = 0; i < out->n; i++) {
        const struct bench_rec *q = &out->recs[i];
        if (bench_is(q, "m2n", "op", op) && !strcmp(bench_str(q, "m"), bench_str(r, "m")) &&
            !strcmp(bench_str(q, "n"), bench_str(r, "n")) &&
            !strcmp(bench_str(q, "bytes"), bench_str(r, "bytes")))
            return q;
    }
    return NULL;
}

int bench_report_m2n(const struct bench_output *out)
{
    size_t rows = 0;
    m2n_header(out);
    for (size_t i = 0; i < out->n; i++) {
        const struct bench_rec *r = &out->recs[i];
        if (!bench_is(r, "m2n", NULL, NULL))
            continue;
        const double us = bench_get_d(r, "ps") / 1e6;
        const double moved = (double)bench_get_u64(r, "m") * bench_get_u64(r, "n") *
                             bench_get_u64(r, "bytes");
        printf("%-10s %3s %3s %10s %13.3f %13.3f %13.3f %10.1f %7.4f\n", bench_str(r, "op"),
               bench_str(r, "m"), bench_str(r, "n"), bench_str(r, "bytes"), us,
               bench_get_d(r, "bw_ps") / 1e6, bench_get_d(r, "lat_ps") / 1e6,
               us > 0 ? moved / (us * 1e3) : 0.0, bench_get_d(r, "eff"));
        rows++;
    }
    printf("\nall-to-all-v against M2N on the same exchange (time ratio, > 1: M2N faster):\n");
    for (size_t i = 0; i < out->n; i++) {
        const struct bench_rec *r = &out->recs[i];
        const struct bench_rec *a = bench_is(r, "m2n", "op", "m2n") ? same_case(out, r,
                                                                           "alltoallv")
                                                                 : NULL;
        if (a && bench_get_d(r, "ps") > 0)
            printf("  M=%s N=%s %10s bytes: %.3f (%.3f against %.3f us)\n", bench_str(r, "m"),
                   bench_str(r, "n"), bench_str(r, "bytes"),
                   bench_get_d(a, "ps") / bench_get_d(r, "ps"), bench_get_d(a, "ps") / 1e6,
                   bench_get_d(r, "ps") / 1e6);
    }
    printf("\n");
    bench_print_notes(out);
    return rows ? 0 : 2;
}
