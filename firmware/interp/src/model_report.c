/* SPDX-License-Identifier: MIT */
/*
 * The end-of-run report of the model image (model_report.h). Roofline bounds are per core
 * (rank 0's view): compute at 2 x sa_rows x sa_cols FLOPs per cycle, HBM at the core's
 * hbm_gbps, collectives at one NoC link per core (byte-hops / noc_link_gbps: a ring sends
 * every byte one hop). An op's bound is the largest of the three; measured / bound says how
 * far it is from it (1.00 = on the bound).
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

static void print_row(const char *label, const struct exec_stats *s)
{
    uint64_t ps = 0, flops = 0, hbm = 0, noc = 0;
    printf("MODEL %s", label);
    for (int c = 0; c < EXEC_CAT_COUNT; c++) {
        printf(" %s_us=%.3f", cat_names[c], s->ps[c] / 1e6);
        ps += s->ps[c], flops += s->flops[c], hbm += s->hbm_bytes[c], noc += s->noc_byte_hops[c];
    }
    double b = bound_ps(flops, hbm, noc);
    printf(" total_us=%.3f gflop=%.3f hbm_mib=%.3f expert_mib=%.3f bound_us=%.3f "
           "x_bound=%.2f\n", ps / 1e6, flops / 1e9, hbm / 1048576.0,
           s->expert_bytes / 1048576.0, b / 1e6, b > 0 ? ps / b : 0.0);
}

static void print_rooflines(const struct exec_stats *sum)
{
    for (int c = 0; c < EXEC_CAT_COUNT; c++) {
        double b = bound_ps(sum->flops[c], sum->hbm_bytes[c], sum->noc_byte_hops[c]);
        printf("MODEL roofline op=%s measured_us=%.3f bound_us=%.3f x_bound=%.2f gflop=%.3f "
               "hbm_mib=%.3f noc_mib_hops=%.3f descs=%" PRIu64 "\n", cat_names[c],
               sum->ps[c] / 1e6, b / 1e6, b > 0 ? sum->ps[c] / b : 0.0, sum->flops[c] / 1e9,
               sum->hbm_bytes[c] / 1048576.0, sum->noc_byte_hops[c] / 1048576.0,
               sum->descs[c]);
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
    for (uint32_t l = l0; c->arch == MODEL_MOE && l < l1; l++) {
        printf("MODEL routed layer=%" PRIu32 " tokens=", l); /* per expert, over the run */
        for (uint32_t e = 0; e < c->num_experts; e++)
            printf("%s%" PRIu64, e ? "," : "", m->acct.expert_tokens[l * c->num_experts + e]);
        printf("\n");
    }
}

/* The reuse line (docs/images.md, "Layer reuse"): its layer counts, and with tile reuse its
   tile counts. */
static void print_reuse(const struct exec_model *m)
{
    const uint64_t *lc = m->lreuse.counts, *tc = m->treuse.counts;
    if (m->lreuse.enabled)
        printf("MODEL reuse stage=%u keys=%s layers_recorded=%" PRIu64 " layers_replayed=%"
               PRIu64 " layers_unslotted=%" PRIu64, m->pipe.stage,
               m->treuse.enabled ? "tiles" : m->lreuse.shapes ? "shapes" : "runs",
               lc[EXEC_REUSE_RECORDED], lc[EXEC_REUSE_REPLAYED], lc[EXEC_REUSE_FULL]);
    if (m->treuse.enabled)
        printf(" tiles_recorded=%" PRIu64 " tiles_replayed=%" PRIu64 " tiles_full=%" PRIu64,
               tc[EXEC_REUSE_RECORDED], tc[EXEC_REUSE_REPLAYED], tc[EXEC_REUSE_FULL]);
    if (m->lreuse.enabled)
        printf("\n");
}

/* Stage rank 0's lines: its layers, what ran outside them, its sums and rooflines; the
   last stage ends with `MODEL done`. */
static void print_stage(struct exec_model *m, const char *what, uint64_t chip_ps,
                        const struct exec_stats *sum, const struct exec_stats *layers)
{
    const struct model_config *c = m->cfg;
    uint32_t l0, l1;
    stage_layers(m, &l0, &l1);
    print_routing(m);
    if (!hal_bootarg_has("quiet_layers"))
        for (uint32_t l = l0; l < l1; l++) {
            char label[24];
            snprintf(label, sizeof(label), "layer=%" PRIu32, l);
            print_row(label, &m->acct.stats[l]);
        }
    char label[40];
    snprintf(label, sizeof(label), m->pipe.stages > 1 ? "stage=%u layer=outside" : "layer=outside",
             m->pipe.stage);
    print_row(label, &m->acct.stats[c->num_layers]);
    snprintf(label, sizeof(label), m->pipe.stages > 1 ? "stage=%u layers=all" : "layers=all",
             m->pipe.stage);
    print_row(label, layers);
    print_rooflines(sum);
    print_reuse(m);
    if (m->pipe.stage + 1 == m->pipe.stages)
        printf("MODEL done model=%s %s chip_us=%.3f\n", c->name, what, (double)chip_ps / 1e6);
}

void report_run(struct exec_model *m, struct noc_comm *comm, const char *what, uint64_t chip_ps)
{
    const struct model_config *c = m->cfg;
    struct exec_stats sum = { 0 }, layers = { 0 };
    uint64_t expert = 0;
    for (uint32_t l = 0; l <= c->num_layers; l++) {
        exec_stats_add(&sum, &m->acct.stats[l]);
        if (l < c->num_layers)
            exec_stats_add(&layers, &m->acct.stats[l]);
        expert += m->acct.stats[l].expert_bytes;
    }
    if (m->rank == 0 && m->pipe.stage > 0)
        noc_sem_wait(SEM_REPORT, 1); /* the stages' lines come in stage order */
    if (m->rank == 0)
        print_stage(m, what, chip_ps, &sum, &layers);
    /* Every rank's traffic, one rank at a time (a barrier between two ranks' lines keeps
       the console lines whole). */
    for (uint32_t r = 0; r < m->tp; r++) {
        if (r == m->rank)
            printf("MODEL rank=%" PRIu32 " core=%u hbm_bytes=%" PRIu64 " expert_load_bytes=%"
                   PRIu64 " expert_load_bytes_at_load=%" PRIu64 "\n", r, hal_self()->core_id,
                   sum.hbm_bytes[0] + sum.hbm_bytes[1] + sum.hbm_bytes[2] + sum.hbm_bytes[3] +
                       sum.hbm_bytes[4],
                   expert - m->acct.stats[c->num_layers].expert_bytes,
                   m->acct.stats[c->num_layers].expert_bytes);
        if (comm)
            noc_barrier(comm);
    }
    if (m->rank == 0 && m->pipe.stage + 1 < m->pipe.stages)
        noc_sem_inc(&(struct noc_sem_args){ .core = m->pipe.core[m->pipe.stage + 1],
                                            .sem = SEM_REPORT, .value = 1 });
}
