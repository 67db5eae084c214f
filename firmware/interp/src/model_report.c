/* SPDX-License-Identifier: MIT */
/*
 * The end-of-run report of the model image (model_report.h). Roofline bounds are per core
 * (rank 0's view): compute at 2 x sa_rows x sa_cols FLOPs per cycle, HBM at the core's
 * hbm_gbps, collectives at one NoC link per core (byte-hops / noc_link_gbps: a ring sends
 * every byte one hop). An op's bound is the largest of the three; measured / bound says how
 * far it is from it (1.00 = on the bound). The lines are rt/lines.h's MODEL kinds.
 */
#include "model_report.h"

#include <inttypes.h>
#include <stdio.h>

#include "noc/noc.h"
#include "npu/hal.h"

#define SEM_REPORT 5u /* pipeline stages report one after another: +1 is a stage's turn */

static const char *const cat_names[EXEC_CAT_COUNT] = { "attn", "ffn", "coll", "weights",
                                                       "other" };

/* The roofline bound of (flops, hbm bytes, noc byte-hops) in ps on this chip. */
static double bound_ps(uint64_t flops, uint64_t hbm, uint64_t noc)
{
    const struct hal_chip_info *c = hal_chip();
    double peak = 2.0 * c->sa_rows * c->sa_cols * c->freq_mhz * 1e6;   /* FLOP/s */
    double t = flops / peak, th = hbm / (c->hbm_gbps * 1e9), tn = noc / (c->noc_link_gbps * 1e9);
    t = th > t ? th : t;
    return (tn > t ? tn : t) * 1e12;
}

/* A row of the breakdown: `row` names it (layer, outside, all), s gives the figures. */
static void print_row(struct lines_model_row *row, const struct exec_stats *s)
{
    uint64_t ps = 0, flops = 0, hbm = 0, noc = 0;
    for (int c = 0; c < EXEC_CAT_COUNT; c++)
        ps += s->ps[c], flops += s->flops[c], hbm += s->hbm_bytes[c], noc += s->noc_byte_hops[c];
    double b = bound_ps(flops, hbm, noc);
    row->attn_us = s->ps[EXEC_CAT_ATTN] / 1e6;
    row->ffn_us = s->ps[EXEC_CAT_FFN] / 1e6;
    row->coll_us = s->ps[EXEC_CAT_COLL] / 1e6;
    row->weights_us = s->ps[EXEC_CAT_WEIGHTS] / 1e6;
    row->other_us = s->ps[EXEC_CAT_OTHER] / 1e6;
    row->total_us = ps / 1e6;
    row->gflop = flops / 1e9;
    row->hbm_mib = hbm / 1048576.0;
    row->expert_mib = s->expert_bytes / 1048576.0;
    row->bound_us = b / 1e6;
    row->x_bound = b > 0 ? ps / b : 0.0;
    lines_print_model_row(row);
}

static void print_rooflines(const struct exec_stats *sum)
{
    for (int c = 0; c < EXEC_CAT_COUNT; c++) {
        double b = bound_ps(sum->flops[c], sum->hbm_bytes[c], sum->noc_byte_hops[c]);
        lines_print_model_roofline(&(struct lines_model_roofline){
            .op = cat_names[c], .measured_us = sum->ps[c] / 1e6, .bound_us = b / 1e6,
            .x_bound = b > 0 ? sum->ps[c] / b : 0.0, .gflop = sum->flops[c] / 1e9,
            .hbm_mib = sum->hbm_bytes[c] / 1048576.0,
            .noc_mib_hops = sum->noc_byte_hops[c] / 1048576.0, .descs = sum->descs[c] });
    }
}

/* This core's stage's layers [*l0, *l1). */
static void stage_layers(const struct exec_model *m, uint32_t *l0, uint32_t *l1)
{
    *l0 = m->pipe.stage * m->plan->stage_layers, *l1 = *l0 + m->plan->stage_layers;
}

static void print_routing(const struct exec_model *m)
{
    const struct model_config *c = m->cfg;
    uint32_t l0, l1;
    stage_layers(m, &l0, &l1);
    const uint32_t E = c->num_experts, per = LINES_ROUTED_PER_LINE;
    for (uint32_t l = l0; c->arch == MODEL_MOE && l < l1; l++) /* per expert, over the run */
        for (uint32_t e0 = 0; e0 < E; e0 += per) /* console lines are cut at 240 chars */
            lines_print_model_routed(&(struct lines_model_routed){
                .layer = l, .first = e0,
                .tokens = { &m->acct.expert_tokens[l * E + e0], E - e0 < per ? E - e0 : per },
                .absent = { .first = E <= per } });
}

/* The reuse line (docs/images.md, "Layer reuse"): its layer counts, and with tile reuse its
   tile counts. */
static void print_reuse(const struct exec_model *m)
{
    const uint64_t *lc = m->lreuse.counts, *tc = m->treuse.counts;
    const bool tiles = m->treuse.enabled;
    if (!m->lreuse.enabled)
        return;
    lines_print_model_reuse(&(struct lines_model_reuse){
        .stage = m->pipe.stage, .keys = tiles ? "tiles" : m->lreuse.shapes ? "shapes" : "runs",
        .layers_recorded = lc[EXEC_REUSE_RECORDED], .layers_replayed = lc[EXEC_REUSE_REPLAYED],
        .layers_unslotted = lc[EXEC_REUSE_FULL], .tiles_recorded = tc[EXEC_REUSE_RECORDED],
        .tiles_replayed = tc[EXEC_REUSE_REPLAYED], .tiles_full = tc[EXEC_REUSE_FULL],
        .heads_recorded = m->lreuse.heads[EXEC_REUSE_RECORDED],
        .heads_replayed = m->lreuse.heads[EXEC_REUSE_REPLAYED],
        .absent = { .tiles_recorded = !tiles, .tiles_replayed = !tiles, .tiles_full = !tiles } });
}

/* Stage rank 0's lines: its layers, what ran outside them, its sums and rooflines; the
   last stage ends with `MODEL done`. */
static void print_stage(struct exec_model *m, const struct lines_model_done *done,
                        uint64_t chip_ps, const struct exec_stats *sum,
                        const struct exec_stats *layers)
{
    const struct model_config *c = m->cfg;
    const bool staged = m->pipe.stages > 1;
    uint32_t l0, l1;
    stage_layers(m, &l0, &l1);
    print_routing(m);
    if (!hal_bootarg_has("quiet_layers"))
        for (uint32_t l = l0; l < l1; l++) {
            char layer[12];
            snprintf(layer, sizeof(layer), "%" PRIu32, l);
            print_row(&(struct lines_model_row){
                          .layer = layer, .absent = { .stage = true, .layers = true } },
                      &m->acct.stats[l]);
        }
    print_row(&(struct lines_model_row){ .stage = m->pipe.stage, .layer = "outside",
                                         .absent = { .stage = !staged, .layers = true } },
              &m->acct.stats[c->num_layers]);
    print_row(&(struct lines_model_row){ .stage = m->pipe.stage, .layers = "all",
                                         .absent = { .stage = !staged, .layer = true } },
              layers);
    print_rooflines(sum);
    print_reuse(m);
    if (m->pipe.stage + 1 == m->pipe.stages) {
        struct lines_model_done d = *done;
        d.model = c->name;
        d.chip_us = (double)chip_ps / 1e6;
        lines_print_model_done(&d);
    }
}

void report_run(struct exec_model *m, struct noc_comm *comm, const struct lines_model_done *done,
                uint64_t chip_ps)
{
    const struct model_config *c = m->cfg;
    struct exec_stats sum = { 0 }, layers = { 0 };
    uint64_t expert = 0;
    exec_reuse_settle(m); /* the layer replays' statistics not added yet */
    for (uint32_t l = 0; l <= c->num_layers; l++) {
        exec_stats_add(&sum, &m->acct.stats[l]);
        if (l < c->num_layers)
            exec_stats_add(&layers, &m->acct.stats[l]);
        expert += m->acct.stats[l].expert_bytes;
    }
    /* the stages' lines come in stage order; a disaggregated plan's instances' one instance
       after another, the first replica's report the run's (the others print their ranks'
       traffic only) */
    const bool chained = m->plan->disagg && m->replica > 0;
    if (m->rank == 0 && (m->pipe.stage > 0 || chained))
        noc_sem_wait(SEM_REPORT, 1);
    if (m->rank == 0 && !chained)
        print_stage(m, done, chip_ps, &sum, &layers);
    /* Every rank's traffic, one rank at a time (a barrier between two ranks' lines keeps
       the console lines whole). */
    for (uint32_t r = 0; r < m->tp; r++) {
        if (r == m->rank)
            lines_print_model_rank(&(struct lines_model_rank){
                .rank = r, .core = hal_self()->core_id,
                .hbm_bytes = sum.hbm_bytes[0] + sum.hbm_bytes[1] + sum.hbm_bytes[2] +
                             sum.hbm_bytes[3] + sum.hbm_bytes[4],
                .expert_load_bytes = expert - m->acct.stats[c->num_layers].expert_bytes,
                .expert_load_bytes_at_load = m->acct.stats[c->num_layers].expert_bytes });
        if (comm)
            noc_barrier(comm);
    }
    if (m->rank == 0 && m->pipe.stage + 1 < m->pipe.stages)
        noc_sem_inc(&(struct noc_sem_args){ .core = m->pipe.core[m->pipe.stage + 1],
                                            .sem = SEM_REPORT, .value = 1 });
    else if (m->rank == 0 && m->plan->disagg && m->replica + 1 < m->plan->instances)
        noc_sem_inc(&(struct noc_sem_args){ /* rank 0 of the next band, same row */
                        .core = hal_self()->core_id + m->plan->instance_cols,
                        .sem = SEM_REPORT, .value = 1 });
}
