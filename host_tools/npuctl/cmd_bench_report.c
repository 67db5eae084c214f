/* SPDX-License-Identifier: MIT */
/*
 * npuctl bench gemm / dma / noc: the tables and target lines made from the BENCH lines of
 * one run (cmd_bench.h). Every figure printed comes from the firmware's measurement or its
 * analytical bound; npuctl only derives ratios and GB/s from them and judges the targets:
 *   gemm  utilisation >= 0.90 for large shapes
 *   dma   >= 0.95 of hbm_gbps for transfers of 1 MiB and more; per-core bandwidth holds
 *         when several cores transfer at once
 *   noc   measured = analytical figure (hop latency, link bandwidth, max-min sharing)
 */
#include "cmd_bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GEMM_TARGET 0.90
#define DMA_TARGET 0.95
#define DMA_TARGET_BYTES (1024u * 1024u)
#define MATCH_TOLERANCE 0.001 /* "matches": within 0.1 % of the analytical figure */

static double us(uint64_t ps)
{
    return (double)ps / 1e6;
}

/* ---- gemm */

struct gemm_class {
    uint32_t min_dim;   /* M, N and K all >= this */
    size_t count;
    double min_util;
    const struct bench_rec *worst;
};

static void gemm_class_add(struct gemm_class *c, const struct bench_rec *r)
{
    if (bench_get_u64(r, "m") < c->min_dim || bench_get_u64(r, "n") < c->min_dim ||
        bench_get_u64(r, "k") < c->min_dim)
        return;
    double u = bench_get_d(r, "util");
    if (c->count++ == 0 || u < c->min_util) {
        c->min_util = u;
        c->worst = r;
    }
}

static void gemm_class_print(const struct gemm_class *c, const char *label)
{
    if (c->count == 0) {
        printf("%s: no shape in this run\n", label);
        return;
    }
    printf("%s (%zu shapes): min utilisation %.3f at %sx%sx%s (target >= %.2f): %s\n", label,
           c->count, c->min_util, bench_str(c->worst, "m"), bench_str(c->worst, "n"),
           bench_str(c->worst, "k"), GEMM_TARGET,
           bench_verdict(c->min_util >= GEMM_TARGET));
}

static void gemm_header(const struct bench_output *out)
{
    const struct bench_rec *e = bench_first(out, "engines");
    bench_print_chip(out, "gemm");
    printf("matrix engine of core 0: %s x %s array, bf16 A and B, fp32 C\n"
           "measured: chip time from the submit command to the completion semaphore; a GEMM\n"
           "          whose operands exceed the core's free SRAM runs as a chain of tiles\n"
           "          (K and N cut in multiples of the array), submitted at once\n"
           "bound:    peak, M*N*K / (%s x %s) cycles; util = bound / measured\n"
           "formula:  matrix_gemm_cycles() (emulator/model/matrix_engine.h) per tile, plus "
           "one command\n\n", bench_str(e, "sa_rows"), bench_str(e, "sa_cols"),
           bench_str(e, "sa_rows"), bench_str(e, "sa_cols"));
    printf("%6s %6s %6s %5s %14s %14s %14s %7s\n", "M", "N", "K", "tiles", "measured us",
           "bound us", "formula us", "util");
}

int bench_report_gemm(const struct bench_output *out)
{
    struct gemm_class large = { .min_dim = 1024 }, huge = { .min_dim = 4096 };
    size_t shapes = 0, exact = 0;
    gemm_header(out);
    for (size_t i = 0; i < out->n; i++) {
        const struct bench_rec *r = &out->recs[i];
        if (!bench_is(r, "gemm", NULL, NULL))
            continue;
        uint64_t ps = bench_get_u64(r, "ps"), formula = bench_get_u64(r, "formula_ps");
        printf("%6s %6s %6s %5s %14.3f %14.3f %14.3f %7.4f\n", bench_str(r, "m"),
               bench_str(r, "n"), bench_str(r, "k"), bench_str(r, "tiles"), us(ps),
               bench_get_d(r, "bound_ps") / 1e6, us(formula), bench_get_d(r, "util"));
        shapes++;
        exact += ps == formula;
        gemm_class_add(&large, r);
        gemm_class_add(&huge, r);
    }
    printf("\n");
    bench_print_notes(out);
    gemm_class_print(&large, "large GEMMs, M, N, K >= 1024");
    gemm_class_print(&huge, "large GEMMs, M, N, K >= 4096");
    printf("measured = formula: %zu of %zu shapes\n", exact, shapes);
    return shapes ? 0 : 2;
}

/* ---- dma */

static bool dma_same_case(const struct bench_rec *a, const struct bench_rec *b)
{
    static const char *const keys[] = { "case", "cores", "dir", "bytes", "rows" };
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (strcmp(bench_str(a, keys[i]), bench_str(b, keys[i])) != 0)
            return false;
    return true;
}

/* One table row: the cores of a case, their slowest time and lowest efficiency. */
struct dma_row {
    const struct bench_rec *first;
    uint32_t cores;
    uint64_t max_ps, bytes;
    double min_eff, gbps_per_core;
    uint32_t late;          /* cores that reached the case's slot late */
};

/* Gathers the row of every record of the case of recs[i] (the lines of a case's cores may
 * interleave with another case's if a case overran its slot); marks them used. */
static void dma_row_at(const struct bench_output *out, size_t i, bool *used,
                       struct dma_row *row)
{
    memset(row, 0, sizeof(*row));
    row->first = &out->recs[i];
    row->min_eff = 1e9;
    row->bytes = bench_get_u64(row->first, "bytes");
    for (size_t j = i; j < out->n; j++) {
        if (used[j] || !bench_is(&out->recs[j], "dma", NULL, NULL) ||
            !dma_same_case(row->first, &out->recs[j]))
            continue;
        uint64_t ps = bench_get_u64(&out->recs[j], "ps");
        double eff = bench_get_d(&out->recs[j], "eff");
        row->max_ps = ps > row->max_ps ? ps : row->max_ps;
        row->min_eff = eff < row->min_eff ? eff : row->min_eff;
        row->late += bench_get_u64(&out->recs[j], "late_ps") > 0;
        row->cores++;
        used[j] = true;
    }
    row->gbps_per_core = (double)row->bytes * 1000.0 / (double)row->max_ps;
}

static void dma_header(const struct bench_output *out)
{
    const struct bench_rec *e = bench_first(out, "engines");
    bench_print_chip(out, "dma");
    printf("DMA engine, HBM <-> SRAM: %s GB/s per core (hbm_gbps, its own channel), latency %s "
           "cycles\nmeasured: chip time from the submit command to the completion semaphore "
           "(rows of a case\n          with several cores: the slowest core, the lowest "
           "efficiency)\nbound:    transfer = bytes / hbm_gbps; latency = hbm_latency_cycles; "
           "the model's\n          figure is command + transfer + latency; eff = transfer / "
           "measured\n\n", bench_str(e, "hbm_gbps"), bench_str(e, "hbm_latency_cycles"));
    printf("%-8s %5s %-9s %10s %5s %13s %13s %11s %7s %10s %9s\n", "case", "cores", "direction",
           "bytes", "rows", "measured us", "transfer us", "latency us", "eff", "GB/s/core",
           "GB/s sum");
}

/* GB/s of the single-core case of the same direction and size, 0 if none. */
static double dma_alone_gbps(const struct bench_output *out, const struct dma_row *multi)
{
    for (size_t i = 0; i < out->n; i++) {
        const struct bench_rec *r = &out->recs[i];
        if (bench_is(r, "dma", "case", "single") &&
            strcmp(bench_str(r, "dir"), bench_str(multi->first, "dir")) == 0 &&
            bench_get_u64(r, "bytes") == multi->bytes)
            return (double)multi->bytes * 1000.0 / (double)bench_get_u64(r, "ps");
    }
    return 0.0;
}

struct dma_summary {
    bool have_worst;
    struct dma_row worst;   /* the lowest efficiency among rows of >= 1 MiB */
    struct dma_row multi;   /* the row with the most cores */
    double multi_ratio;     /* its per-core GB/s over the same copy alone */
};

static void dma_summarise(const struct bench_output *out, const struct dma_row *row,
                          struct dma_summary *s)
{
    if (row->bytes >= DMA_TARGET_BYTES && (!s->have_worst || row->min_eff < s->worst.min_eff)) {
        s->worst = *row;
        s->have_worst = true;
    }
    double alone = dma_alone_gbps(out, row);
    if (row->cores > 1 && alone > 0.0) {
        double ratio = row->gbps_per_core / alone;
        if (row->cores > s->multi.cores ||
            (row->cores == s->multi.cores && ratio < s->multi_ratio)) {
            s->multi = *row;
            s->multi_ratio = ratio;
        }
    }
}

static void dma_print_summary(const struct dma_summary *s)
{
    if (s->have_worst)
        printf("transfers >= 1 MiB: min efficiency %.4f at %llu bytes (target >= %.2f of "
               "hbm_gbps): %s\n", s->worst.min_eff, (unsigned long long)s->worst.bytes,
               DMA_TARGET, bench_verdict(s->worst.min_eff >= DMA_TARGET));
    else
        printf("transfers >= 1 MiB: none in this run\n");
    if (s->multi.cores)
        printf("%u cores at once, %llu bytes each: %.2f GB/s per core = %.4f of the same copy "
               "alone: per-core bandwidth %s\n", s->multi.cores,
               (unsigned long long)s->multi.bytes, s->multi.gbps_per_core, s->multi_ratio,
               s->multi_ratio >= 1.0 - MATCH_TOLERANCE ? "holds" : "does NOT hold");
}

static void dma_print_row(const struct dma_row *row)
{
    const struct bench_rec *r = row->first;
    printf("%-8s %5u %-9s %10llu %5s %13.3f %13.3f %11.3f %7.4f %10.2f %9.1f%s\n",
           bench_str(r, "case"), row->cores, bench_str(r, "dir"),
           (unsigned long long)row->bytes, bench_str(r, "rows"), us(row->max_ps),
           bench_get_d(r, "xfer_ps") / 1e6, bench_get_d(r, "latency_ps") / 1e6, row->min_eff,
           row->gbps_per_core, row->gbps_per_core * row->cores, row->late ? " late" : "");
}

int bench_report_dma(const struct bench_output *out)
{
    struct dma_summary s = { 0 };
    size_t rows = 0, late = 0;
    bool *used = calloc(out->n ? out->n : 1, sizeof(*used));
    if (!used)
        return 2;
    dma_header(out);
    for (size_t i = 0; i < out->n; i++) {
        if (used[i] || !bench_is(&out->recs[i], "dma", NULL, NULL))
            continue;
        struct dma_row row;
        dma_row_at(out, i, used, &row);
        dma_print_row(&row);
        dma_summarise(out, &row, &s);
        late += row.late;
        rows++;
    }
    free(used);
    printf("\n");
    bench_print_notes(out);
    if (late)
        printf("note: %zu core(s) reached a slot late (rows marked 'late'): a case overran "
               "its slot, so cases overlapped\n", late);
    dma_print_summary(&s);
    return rows ? 0 : 2;
}

/* ---- noc */

static void noc_header(const struct bench_output *out)
{
    const struct bench_rec *e = bench_first(out, "engines");
    bench_print_chip(out, "noc");
    printf("NoC writes, each signalling its destination, which observes the arrival: links of "
           "%s GB/s\nper direction (noc_link_gbps), %s cycles per hop (noc_hop_cycles), XY "
           "routes\nmeasured: chip time from the source's submit command to the arrival\n"
           "bound:    command + bytes / (noc_link_gbps x share) + hops x noc_hop_cycles; "
           "share = 1 / the\n          most flows of the case on one link of the route "
           "(max-min fair)\n\n", bench_str(e, "noc_link_gbps"), bench_str(e, "noc_hop_cycles"));
    printf("%-9s %5s %9s %4s %9s %13s %13s %6s %8s %9s\n", "case", "flows", "src>dst", "hops",
           "bytes", "measured ns", "bound ns", "share", "ratio", "GB/s got");
}

/* Bandwidth a flow got: its bytes over the measured time minus command and hop latency. */
static double noc_got_gbps(const struct bench_rec *r)
{
    double xfer_ps = (double)bench_get_u64(r, "ps") - bench_get_d(r, "cmd_ps") -
                     bench_get_d(r, "hop_ps");
    return xfer_ps > 0 ? bench_get_d(r, "bytes") * 1000.0 / xfer_ps : 0.0;
}

/* Per case: the extreme ratios of its flows. */
static void noc_print_case_line(const struct bench_output *out, const char *name,
                                const char *what)
{
    double lo = INFINITY, hi = -INFINITY, got_lo = INFINITY, share = 0;
    for (size_t i = 0; i < out->n; i++) {
        const struct bench_rec *r = &out->recs[i];
        if (!bench_is(r, "noc", "case", name))
            continue;
        lo = fmin(lo, bench_get_d(r, "ratio"));
        hi = fmax(hi, bench_get_d(r, "ratio"));
        got_lo = fmin(got_lo, noc_got_gbps(r));
        share = bench_get_d(r, "share");
    }
    if (isinf(lo))
        return;
    bool match = fabs(lo - 1.0) <= MATCH_TOLERANCE && fabs(hi - 1.0) <= MATCH_TOLERANCE;
    printf("%-9s %s: each got >= %.2f GB/s, analytical share %.4f; bound/measured %.4f .. "
           "%.4f: %s\n", name, what, got_lo, share, lo, hi, match ? "matches" : "DIFFERS");
}

static void noc_print_latency(const struct bench_output *out)
{
    const struct bench_rec *first = NULL, *last = NULL;
    for (size_t i = 0; i < out->n; i++)
        if (bench_is(&out->recs[i], "noc", "case", "latency")) {
            first = first ? first : &out->recs[i];
            last = &out->recs[i];
        }
    if (!first || first == last)
        return;
    double hops = bench_get_d(last, "hops") - bench_get_d(first, "hops");
    double slope = (bench_get_d(last, "ps") - bench_get_d(first, "ps")) / hops;
    double model = (bench_get_d(last, "hop_ps") - bench_get_d(first, "hop_ps")) / hops;
    printf("latency   per hop (slope from %s to %s hops): %.3f ns measured, noc_hop_cycles x "
           "cycle = %.3f ns: %s\n", bench_str(first, "hops"), bench_str(last, "hops"),
           slope / 1e3, model / 1e3,
           fabs(slope - model) <= MATCH_TOLERANCE * model ? "matches" : "DIFFERS");
}

/* The largest one-flow write to a neighbour, end to end (latency and command included). */
static void noc_print_bandwidth(const struct bench_output *out)
{
    const struct bench_rec *big = NULL;
    const struct bench_rec *e = bench_first(out, "engines");
    for (size_t i = 0; i < out->n; i++)
        if (bench_is(&out->recs[i], "noc", "case", "bandwidth") &&
            (!big || bench_get_u64(&out->recs[i], "bytes") > bench_get_u64(big, "bytes")))
            big = &out->recs[i];
    if (!big)
        return;
    double gbps = bench_get_d(big, "bytes") * 1000.0 / bench_get_d(big, "ps");
    printf("bandwidth %s bytes to a neighbour: %.2f GB/s end to end = %.4f of noc_link_gbps "
           "%s\n", bench_str(big, "bytes"), gbps, gbps / bench_get_d(e, "noc_link_gbps"),
           bench_str(e, "noc_link_gbps"));
}

int bench_report_noc(const struct bench_output *out)
{
    size_t rows = 0;
    noc_header(out);
    for (size_t i = 0; i < out->n; i++) {
        const struct bench_rec *r = &out->recs[i];
        if (!bench_is(r, "noc", NULL, NULL))
            continue;
        char route[24];
        snprintf(route, sizeof(route), "%s>%s", bench_str(r, "src"), bench_str(r, "dst"));
        printf("%-9s %5s %9s %4s %9s %13.3f %13.3f %6.4f %8.4f %9.2f\n", bench_str(r, "case"),
               bench_str(r, "flows"), route, bench_str(r, "hops"), bench_str(r, "bytes"),
               bench_get_d(r, "ps") / 1e3, bench_get_d(r, "bound_ps") / 1e3,
               bench_get_d(r, "share"), bench_get_d(r, "ratio"), noc_got_gbps(r));
        rows++;
    }
    printf("\n");
    bench_print_notes(out);
    noc_print_latency(out);
    noc_print_bandwidth(out);
    noc_print_case_line(out, "bandwidth", "(one write to a neighbour)");
    noc_print_case_line(out, "shared2", "(two writes share a link)");
    noc_print_case_line(out, "shared4", "(four writes share a link)");
    noc_print_case_line(out, "separate", "(two writes on disjoint links)");
    noc_print_case_line(out, "opposite", "(the two directions of a link)");
    noc_print_case_line(out, "sink2", "(two writes into one core, from both sides)");
    return rows ? 0 : 2;
}
