/* SPDX-License-Identifier: MIT */
/* MegaScale-Infer's deployment plan search (section 4.2, Algorithm 1) over the latency
   model of npu_disagg.c (npu_disagg.h). */
#include "npu_disagg.h"

#include <string.h>

#include "npu_enums.h"
#include "npu_plan_internal.h"

/* The largest batch in [lo, hi] whose plan is accepted and meets the SLO (the iteration
   grows with the batch), or 0; *p then holds its plan. */
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
    if (good) {
        r->batch = good;
        npu_disagg_plan(m, c, r, p, err, sizeof(err));
    }
    return good;
}

static bool better(const struct npu_disagg_plan *a, const struct npu_disagg_request *ra,
                   const struct npu_disagg_plan *b, const struct npu_disagg_request *rb)
{
    if (a->t.per_core != b->t.per_core)
        return a->t.per_core > b->t.per_core;
    return ra->replicas * ra->tp_a + ra->expert_cores < rb->replicas * rb->tp_a + rb->expert_cores;
}

/* Every candidate with tp_a and N_e expert cores: replicas 1.., m 1..m_max. */
static void try_cores(const struct model_config *m, const struct chip_config *c,
                      struct npu_disagg_search *s, uint32_t tp_a, uint32_t ne,
                      struct npu_disagg_request *best, struct npu_disagg_plan *bp, bool *found)
{
    static struct npu_disagg_plan p;
    const uint32_t cores = c->mesh_rows * c->mesh_cols;
    for (uint32_t na = 1; na * tp_a + ne <= cores && na <= NPU_DISAGG_REPLICAS_MAX; na++)
        for (uint32_t mb = 1; mb <= s->m_max; mb++) {
            struct npu_disagg_request r = { .replicas = na, .tp_a = tp_a, .expert_cores = ne,
                                            .micro_batches = mb, .context = s->context,
                                            .elem_bytes = s->elem_bytes };
            if (!largest_batch(m, c, &r, s->slo_s, na * mb, 1u << 20, &p))
                continue;
            s->tried++;
            if (!*found || better(&p, &r, bp, best))
                *best = r, *bp = p, *found = true;
        }
}

int npu_disagg_search(const struct model_config *m, const struct chip_config *c,
                      struct npu_disagg_search *s, struct npu_disagg_request *best,
                      struct npu_disagg_plan *plan, char *err, size_t errlen)
{
    const uint32_t R = c->mesh_rows, C = c->mesh_cols;
    bool found = false;
    s->tried = 0;
    if (m->arch != MODEL_MOE)
        return fail(err, errlen, NPU_ERR_INVAL, "disaggregation: %s has no experts", m->name);
    for (uint32_t tp_a = 1; tp_a <= R * (C - 1); tp_a++) {
        if ((R % tp_a && tp_a % R) || m->num_heads % tp_a)
            continue;
        for (uint32_t cols = 1; cols < C; cols++)
            try_cores(m, c, s, tp_a, cols * R, best, plan, &found);
    }
    if (!found)
        return fail(err, errlen, NPU_ERR_INVAL, "disaggregation: no plan of %s on %s meets a "
                    "TBT of %.1f ms at %u positions a request", m->name, c->name,
                    s->slo_s * 1e3, s->context);
    return NPU_OK;
}
