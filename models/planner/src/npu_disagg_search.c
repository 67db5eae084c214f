/* SPDX-License-Identifier: MIT */
/* MegaScale-Infer's deployment plan search (section 4.2, Algorithm 1) over the latency
   model of npu_disagg.c (npu_disagg.h). */
#include "npu_disagg.h"

#include <string.h>

#include "npu_enums.h"
#include "npu_plan_internal.h"

/* The largest batch in [lo, hi] whose plan is accepted and meets the SLO (that only
   grows harder with the batch: binary search), or 0. */
static uint32_t largest_batch(const struct model_config *m, const struct chip_config *c,
                              struct npu_disagg_request *r, double slo, uint32_t lo,
                              uint32_t hi, struct npu_disagg_plan *p)
{
    char err[256];
    uint32_t good = 0;
    while (lo <= hi) {
        r->batch = lo + (hi - lo) / 2;
        if (npu_disagg_plan(m, c, r, p, err, sizeof(err)) == NPU_OK && p->t.t_iter <= slo) {
            good = r->batch, lo = r->batch + 1;
        } else {
            hi = r->batch - 1;
        }
    }
    return good;
}

/* The better batch of the largest that meets the SLO and the largest whole number of full
   micro-batches under it: a replica's rows round up, so a batch just past a multiple of
   n_a m costs a row more for every micro-batch and can lose throughput. */
static bool best_batch(const struct model_config *m, const struct chip_config *c,
                       struct npu_disagg_request *r, double slo, struct npu_disagg_plan *p)
{
    char err[256];
    const uint32_t step = r->replicas * r->micro_batches;
    const uint32_t most = largest_batch(m, c, r, slo, step, NPU_DISAGG_BATCH_MAX, p);
    if (!most)
        return false;
    const uint32_t full = most / step * step;
    r->batch = full;
    npu_disagg_plan(m, c, r, p, err, sizeof(err));
    const double at_full = p->t.tokens_per_s;
    r->batch = most;
    npu_disagg_plan(m, c, r, p, err, sizeof(err));
    if (full != most && at_full > p->t.tokens_per_s) {
        r->batch = full;
        npu_disagg_plan(m, c, r, p, err, sizeof(err));
    }
    return true;
}

/* More tokens per second; at equal throughput, fewer cores. */
static bool better(const struct npu_disagg_plan *a, const struct npu_disagg_request *ra,
                   const struct npu_disagg_plan *b, const struct npu_disagg_request *rb)
{
    if (a->t.tokens_per_s != b->t.tokens_per_s)
        return a->t.tokens_per_s > b->t.tokens_per_s;
    return ra->replicas * ra->tp_a + ra->expert_cores < rb->replicas * rb->tp_a + rb->expert_cores;
}

/* Every candidate with tp_a and N_e expert cores: replicas 1.., m 1..m_max (p: scratch). */
static void try_cores(const struct model_config *m, const struct chip_config *c,
                      struct npu_disagg_search *s, uint32_t tp_a, uint32_t ne,
                      struct npu_disagg_request *best, struct npu_disagg_plan *bp,
                      struct npu_disagg_plan *p, bool *found)
{
    const uint32_t cores = c->mesh_rows * c->mesh_cols;
    for (uint32_t na = 1; na * tp_a + ne <= cores && na <= NPU_DISAGG_REPLICAS_MAX; na++)
        for (uint32_t mb = 1; mb <= s->m_max; mb++) {
            struct npu_disagg_request r = { .replicas = na, .tp_a = tp_a, .expert_cores = ne,
                                            .micro_batches = mb, .context = s->context,
                                            .elem_bytes = s->elem_bytes };
            if (!best_batch(m, c, &r, s->slo_s, p))
                continue;
            s->tried++;
            if (!*found || better(p, &r, bp, best))
                *best = r, *bp = *p, *found = true;
        }
}

int npu_disagg_search(const struct model_config *m, const struct chip_config *c,
                      struct npu_disagg_search *s, struct npu_disagg_request *best,
                      struct npu_disagg_plan *plan, char *err, size_t errlen)
{
    static struct npu_disagg_plan scratch;
    const uint32_t R = c->mesh_rows, C = c->mesh_cols;
    bool found = false;
    s->tried = 0;
    if (m->arch != MODEL_MOE)
        return fail(err, errlen, NPU_ERR_INVAL, "disaggregation: %s has no experts", m->name);
    if (!s->m_max || s->m_max > NPU_DISAGG_SEARCH_M_MAX || !s->context || s->slo_s <= 0)
        return fail(err, errlen, NPU_ERR_INVAL, "disaggregation search: up to %u micro-batches "
                    "(1..%u), a context of %u positions (at least 1) and a TBT SLO of %.1f ms "
                    "(above 0)", s->m_max,
                    NPU_DISAGG_SEARCH_M_MAX, s->context, s->slo_s * 1e3);
    for (uint32_t tp_a = 1; tp_a <= R * (C - 1); tp_a++) {
        if ((R % tp_a && tp_a % R) || m->num_heads % tp_a)
            continue;
        for (uint32_t cols = 1; cols < C; cols++)
            if (npu_disagg_experts_fit(m, cols * R))
                try_cores(m, c, s, tp_a, cols * R, best, plan, &scratch, &found);
    }
    if (!found)
        return fail(err, errlen, NPU_ERR_INVAL, "disaggregation: no plan of %s on %s meets a "
                    "TBT of %.1f ms at %u positions a request", m->name, c->name,
                    s->slo_s * 1e3, s->context);
    return NPU_OK;
}
