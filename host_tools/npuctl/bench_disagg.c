/* SPDX-License-Identifier: MIT */
/*
 * npuctl bench model --search disagg (docs/benchmarks.md, "bench model --search disagg"):
 * MegaScale-Infer's Algorithm 1 (section 4.2) with the simulator in SIMULATE's place, over
 * the disaggregated plans the firmware runs (docs/images.md, "Disaggregated execution"):
 * for a step shape, the colocated plan the options give, then every split of the mesh's
 * columns into I >= 2 equal bands (I - 1 attention replicas of tp = the band's cores and
 * the expert band) with m = 1..4 ping-pong micro-batches (the paper's N_m), each planned,
 * built and run as one iteration. Each row prints the measured chip time, the latency
 * model's estimate of the same plan (npu_disagg.h with the expert band last, as it runs),
 * their ratio, and the tokens per second per core of the chip; the best plan is the one
 * with the most tokens per second whose iteration meets the TBT SLO. What it cannot search:
 * the batch (the shape fixes it: the model image takes at most 64 requests) and plans the
 * firmware does not run (an expert band of another width, tp_a != tp_e).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include "cmd_bench.h"
#include "npu_disagg.h"
#include "npu_enums.h"
#include "npu_layout.h"
#include "npuctl.h"

#define M_MAX 4u /* the paper's N_m */

/* One candidate's result. */
struct row {
    uint32_t instances, tp, m; /* instances 1: the colocated plan */
    double chip_ms, model_ms;  /* model_ms 0: no estimate */
};

/* The latency model's estimate of the executed plan (0 if it refuses it). */
static double model_ms(const struct bench_model_opts *o, const struct shape *sh,
                       const struct npu_image_header *h, const struct row *r)
{
    const struct npu_disagg_request q = {
        .replicas = r->instances - 1, .tp_a = r->tp, .expert_cores = r->tp,
        .micro_batches = r->m, .batch = sh->s.requests,
        .context = sh->s.context + sh->s.rows, .elem_bytes = npu_dtype_bytes(h->plan.dtype),
        .band_last = 1 };
    static struct npu_disagg_plan p; /* large: not on the stack */
    char err[256];
    return npu_disagg_plan(&o->model, &o->chip, &q, &p, err, sizeof(err)) == NPU_OK
               ? p.t.t_iter * 1e3 : 0.0;
}

static void print_row(const struct shape *sh, const struct row *r, uint32_t cores,
                      double slo_ms)
{
    const double tps = sh->s.requests / (r->chip_ms / 1e3);
    char plan[48], est[32] = "-", ratio[16] = "-";
    if (r->instances == 1)
        snprintf(plan, sizeof(plan), "colocated, tp %u", r->tp);
    else
        snprintf(plan, sizeof(plan), "%u x %u + %u experts", r->instances - 1, r->tp, r->tp);
    if (r->model_ms > 0) {
        snprintf(est, sizeof(est), "%.3f", r->model_ms);
        snprintf(ratio, sizeof(ratio), "%.2f", r->chip_ms / r->model_ms);
    }
    printf("%-18s %-26s %2u %10.3f %10s %7s %10.1f %9.2f  %s\n", sh->name, plan, r->m,
           r->chip_ms, est, ratio, tps, tps / cores, r->chip_ms <= slo_ms ? "yes" : "no");
    fflush(stdout);
}

/* Plans, builds and runs one candidate (io); false if the planner refused it (it said why,
   and a line says it was skipped). */
static int measure(const struct bench_model_opts *o, const struct npuctl_image_opts *io,
                   const struct shape *sh, const char *dir, struct row *r, bool *ran)
{
    struct npu_image_header h;
    struct measured m;
    int rc = bench_model_measure(o, io, sh, dir, &h, &m, ran);
    if (rc || !*ran) {
        if (!rc && r->instances == 1)
            printf("%-18s colocated: not planned (the reason is above)\n", sh->name);
        else if (!rc)
            printf("%-18s %u x %u + %u experts, m %u: not planned (the reason is above)\n",
                   sh->name, r->instances - 1, r->tp, r->tp, r->m);
        return rc;
    }
    r->tp = h.plan.tp, r->chip_ms = m.chip_us / 1e3;
    r->model_ms = r->instances > 1 ? model_ms(o, sh, &h, r) : 0;
    return 0;
}

int bench_model_search_disagg(const struct bench_model_opts *o, const struct shape *sh,
                              const char *dir)
{
    const uint32_t R = o->chip.mesh_rows, C = o->chip.mesh_cols, cores = R * C;
    const double slo = o->slo_ms;
    if (!bench_model_shape_fits(o, sh))
        return 0;
    printf("bench model --search disagg: %s on %s, %s (%u requests), TBT SLO %.0f ms\n",
           o->model.name, o->chip.name, sh->name, sh->s.requests, slo);
    printf("%-18s %-26s %2s %10s %10s %7s %10s %9s  %s\n", "shape", "plan", "m", "chip ms",
           "model ms", "x model", "tokens/s", "per core", "SLO");
    struct row col = { .instances = 1, .m = 1 }, best = { 0 };
    bool ran;
    int rc = measure(o, &o->image, sh, dir, &col, &ran);
    if (rc == 0 && ran)
        print_row(sh, &col, cores, slo);
    for (uint32_t I = 2; rc == 0 && I <= C; I++)
        for (uint32_t mb = 1; rc == 0 && C % I == 0 && mb <= M_MAX; mb++) {
            struct npuctl_image_opts io = o->image;
            struct row r = { .instances = I, .tp = R * (C / I), .m = mb };
            io.req.instances = I, io.req.tp = r.tp, io.req.disagg = 1;
            io.req.micro_batches = mb;
            rc = measure(o, &io, sh, dir, &r, &ran);
            if (rc || !ran)
                continue;
            print_row(sh, &r, cores, slo);
            if (r.chip_ms <= slo && (!best.m || r.chip_ms < best.chip_ms))
                best = r;
        }
    if (rc)
        return rc;
    if (!best.m) {
        printf("%-18s searched: no disaggregated plan ran within the SLO\n", sh->name);
        return 0;
    }
    printf("%-18s searched: %u replica(s) of %u + %u expert cores, m %u: %.1f tokens/s per "
           "core", sh->name, best.instances - 1, best.tp, best.tp, best.m,
           sh->s.requests / (best.chip_ms / 1e3) / cores);
    if (col.chip_ms > 0)
        printf(", %.2fx the colocated plan's", col.chip_ms / best.chip_ms);
    printf("\n");
    return 0;
}
