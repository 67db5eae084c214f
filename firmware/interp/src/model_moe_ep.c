/* SPDX-License-Identifier: MIT */
/*
 * The MoE op under expert parallelism (plan partition ep, tp = p > 1 ranks; docs/images.md,
 * "Expert parallelism"), over a group of n <= moe_rows rows (the whole iteration's rows when
 * they fit: "MoE groups"). Rank r holds whole experts [rE/p, (r+1)E/p) and owns a slice of the
 * group's rows, [r S, r S + S) with S = ceil(n / p):
 *   1. route: RMSNorm, router and top-k of its slice only (nobody else knows these choices);
 *   2. dispatch: its rows, sorted by expert (hence by owner), go over the NoC to the ranks
 *      holding their experts (noc_alltoallv_dispatch; the per-expert counts travel with it);
 *   3. serve: the dispatch leaves each expert's rows from every sender as one run (its
 *      by-bucket layout); each rank runs one SwiGLU per expert it holds over that run
 *      (grouped expert GEMM) and writes the outputs over it, where the combine reads them;
 *   4. combine: the outputs go back to the slice owners (noc_alltoallv_combine), which weight
 *      them and sum each row's k slots in top-k order (the reference's order);
 *   5. all-gather of the slices' outputs; every rank adds them to the residual rows.
 * Modelled hazard: the attention block is still replicated over the group, so the residual
 * rows arrive on every rank; the MoE uses only its slice of them, and an expert's owner gets
 * its rows through the dispatch alone. Expert-load bytes are counted by the expert's owner;
 * every rank counts the routed tokens from the dispatch's count matrix.
 */
#include <stdio.h>

#include "model_moe.h"
#include "noc/collective.h"
#include "npu/hal.h"
#include "npu/vector.h"

_Static_assert(NPU_IMAGE_A2A_COUNTS_MAX == NOC_M2N_PAIRS_MAX,
               "the planner's limit on ranks x experts is the driver's count matrix");

/* The dispatch's bucket map (expert owners) and count matrix [p][E]: scratch of one MoE op,
   not model state (struct exec_model). */
static uint32_t owner_first[NOC_GROUP_MAX + 1];
static uint32_t counts_store[NOC_M2N_PAIRS_MAX];

static struct noc_alltoallv_plan dispatch_plan(const struct exec_model *m)
{
    const uint32_t E = m->cfg->num_experts;
    for (uint32_t q = 0; q <= m->tp; q++)
        owner_first[q] = npu_plan_expert_first(m->plan, E, q);
    return (struct noc_alltoallv_plan){ .buckets = E, .bucket_first = owner_first,
                                        .counts = counts_store,
                                        .capacity = NOC_M2N_PAIRS_MAX,
                                        .by_bucket = true }; /* an expert's rows: one run */
}

bool exec_moe_ep_owns(const struct exec_model *m)
{
    const uint32_t E = m->cfg->num_experts;
    const uint32_t lo = npu_plan_expert_first(m->plan, E, m->rank);
    const uint32_t hi = npu_plan_expert_first(m->plan, E, m->rank + 1);
    for (uint32_t l = 0; l < m->cfg->num_layers; l++)
        for (uint32_t k = MT_E_GATE; k <= MT_E_DOWN; k++) {
            const struct npu_image_tensor *t = m->w.t[l][k];
            if (t && (t->block0 != lo || t->blocks != hi - lo)) {
                printf("MODEL error: core %u: rank %u holds experts [%u, %u) of layer %u, "
                       "the dispatch sends it [%u, %u)\n", hal_self()->core_id, m->rank,
                       t->block0, t->block0 + t->blocks, l, lo, hi);
                return false;
            }
        }
    return true;
}

static struct noc_alltoallv_args dispatch_args(const struct exec_model *m, uint32_t n)
{
    const uint32_t k = m->cfg->experts_per_token, E = m->cfg->num_experts;
    const uint32_t per_rank = (E + m->tp - 1) / m->tp;
    const uint64_t rows = (uint64_t)n * (k < per_rank ? k : per_rank);
    return (struct noc_alltoallv_args){ .counts = (const uint32_t *)(uintptr_t)m->buf.a.ep_counts,
                                        .send = m->buf.a.ep_send, .recv = m->buf.a.ep_recv,
                                        .recv_capacity = rows * m->cfg->hidden_size,
                                        .dtype = m->buf.dt };
}

/* Steps 1-2 on this rank's slice of nr rows (xb): its rows by expert into ep_send, the
   elements per expert into ep_counts, then the dispatch. */
static int dispatch(struct exec_model *m, struct noc_alltoallv_plan *plan, uint32_t n,
                    uint32_t nr)
{
    const struct moe_pairs *p = &moe_pairs;
    const uint32_t d = m->cfg->hidden_size, E = m->cfg->num_experts;
    const uint32_t k = m->cfg->experts_per_token;
    const uint64_t row = (uint64_t)d * m->buf.eb;
    uint32_t *counts = (uint32_t *)(uintptr_t)m->buf.a.ep_counts;
    for (uint32_t i = 0; i < nr * k; i++)
        exec_copy(m, m->buf.a.ep_send + i * row, m->buf.a.xb + p->row[i] * row, 1, row, row, row);
    for (uint32_t e = 0; e < E; e++)
        counts[e] = (p->first[e + 1] - p->first[e]) * d;
    int rc = exec_flush(m);
    if (rc != NPU_OK)
        return rc;
    struct noc_alltoallv_args a = dispatch_args(m, n);
    exec_set_cat(m, EXEC_CAT_COLL);
    rc = noc_alltoallv_dispatch(m->comm, &a, plan);
    exec_set_cat(m, EXEC_CAT_FFN);
    return rc;
}

/* Step 3: every expert this rank holds, over every row of the group dispatched to it. The
   dispatch left each expert's rows as one run of ep_recv (by bucket), so the expert's
   SwiGLU reads them there and writes its outputs over them (the up projections have read
   them by then): no gather, no scatter. Groups alternate the direction in which they walk
   the experts: a ring too small for the rank's experts still holds the last ones served,
   and the next group serves those first (a layer of G groups loads 3 x experts + (G - 1) x
   max(0, 3 x experts - slots) matrices instead of G x 3 x experts). */
static int serve_experts(struct exec_model *m, uint32_t l, const struct noc_alltoallv_plan *plan)
{
    const struct npu_image_tensor *g = m->w.t[l][MT_E_GATE];
    const uint32_t E = m->cfg->num_experts, d = m->cfg->hidden_size;
    const bool backward = m->w.ring.backward;
    m->w.ring.backward = !backward;
    for (uint32_t i = 0; i < E; i++) { /* the dispatch's matrix has every sender's choices */
        const uint32_t e = backward ? E - 1 - i : i;
        uint64_t elems = 0; /* each count is rows x d: one division per expert, not per pair */
        for (uint32_t q = 0; q < m->tp; q++)
            elems += plan->counts[q * E + e];
        m->acct.expert_tokens[(uint64_t)l * E + e] += elems / d;
        if (e < g->block0 || e >= g->block0 + g->blocks || elems == 0)
            continue; /* not this rank's, or no rows */
        const uint64_t rows = m->buf.a.ep_recv +
                              noc_alltoallv_recv_offset(plan, m->tp, 0, e) * m->buf.eb;
        exec_stage_expert(m, l, e);
        int rc = exec_swiglu(m, l, rows, rows, (uint32_t)(elems / d), true, e,
                             m->cfg->moe_intermediate_size, true); /* whole expert */
        if (rc != NPU_OK)
            return rc;
    }
    return exec_flush(m);
}

/* Step 4 after the combine: the slice's k outputs per row (in ep_send, pair order) weighted,
   put in their top-k slots and summed into out[nr][d]. */
static void weigh_and_sum(struct exec_model *m, uint64_t out, uint32_t nr)
{
    const struct moe_pairs *p = &moe_pairs;
    const struct npu_act_layout *a = &m->buf.a;
    const uint32_t d = m->cfg->hidden_size, k = m->cfg->experts_per_token;
    const uint64_t row = (uint64_t)d * m->buf.eb;
    exec_vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_ROW_DIV, .x = a->ep_send,
                                         .y = a->rweight, .out = a->ep_send, .rows = nr * k,
                                         .cols = d, .ldy = 1, .x_type = m->buf.dt,
                                         .out_type = m->buf.dt, .y_type = NPU_DTYPE_FP32 });
    for (uint32_t i = 0; i < nr * k; i++)
        exec_copy(m, a->combine + ((uint64_t)p->row[i] * k + p->slot[i]) * row,
                  a->ep_send + i * row, 1, row, row, row);
    moe_sum_slots(m, out, a->combine, nr);
}

int exec_moe_ep(struct exec_model *m, uint32_t l, const struct exec_tile *tile)
{
    const uint32_t d = m->cfg->hidden_size, n = tile->n, slice = (n + m->tp - 1) / m->tp;
    const uint32_t r0 = m->rank * slice < n ? m->rank * slice : n;
    const uint32_t nr = n - r0 < slice ? n - r0 : slice;
    const uint64_t row = (uint64_t)d * m->buf.eb;
    struct noc_alltoallv_plan plan = dispatch_plan(m);
    exec_set_cat(m, EXEC_CAT_FFN);
    int rc = moe_route(m, l, tile->xt + r0 * row, nr);
    if (rc == NPU_OK) {
        moe_sort_choices(m, l, tile, r0, r0 + nr);
        rc = dispatch(m, &plan, n, nr);
    }
    if (rc == NPU_OK)
        rc = serve_experts(m, l, &plan);
    if (rc == NPU_OK) {
        struct noc_alltoallv_args a = dispatch_args(m, n);
        exec_set_cat(m, EXEC_CAT_COLL);
        rc = noc_alltoallv_combine(m->comm, &a, &plan);
        exec_set_cat(m, EXEC_CAT_FFN);
    }
    if (rc != NPU_OK)
        return rc;
    if (nr > 0)
        weigh_and_sum(m, m->buf.a.ep_out + (uint64_t)m->rank * slice * row, nr);
    rc = exec_flush(m);
    if (rc == NPU_OK) { /* step 5 */
        struct noc_coll_args a = { .buf = m->buf.a.ep_out, .count = (uint64_t)m->tp * slice * d,
                                   .dtype = m->buf.dt };
        exec_set_cat(m, EXEC_CAT_COLL);
        rc = noc_allgather(m->comm, &a);
        exec_set_cat(m, EXEC_CAT_FFN);
    }
    if (rc == NPU_OK)
        exec_add_rows(m, tile->xt, m->buf.a.ep_out, n, d);
    return rc;
}
