/* SPDX-License-Identifier: MIT */
/*
 * The MoE op on one tile (model_exec.h). The router's top-k decides which experts run, so
 * the chain is cut there: the hart reads each row's k experts and weights (functional mode;
 * renormalised as the reference does) or draws them from the seeded routing model
 * (performance mode, routing_model.h), then, expert by expert in ascending order: stage its
 * weights if the plan streams them, gather its rows, one SwiGLU over them, scale each row by
 * its weight, and scatter the rows to combine[row][j] (j: the choice's place in the row's
 * top-k). The k slots are summed in top-k order, the reference's order.
 * Expert parallelism (plan partition ep): a rank holds whole experts and runs only those;
 * the activations are replicated over the group, so every rank already holds the rows its
 * experts need (the dispatch is the local gather) and the combine is one all-reduce of the
 * partial outputs. The slots of other ranks' experts are zero on this rank (FILL).
 * Shapes: n tile rows, d hidden, E experts, k per row, ne rows of one expert.
 */
#include <assert.h>

#include "model_exec.h"
#include "npu/hal.h"
#include "npu/vector.h"
#include "routing_model.h"

#define MOE_PAIRS_MAX 8192u

/* The tile's (row, choice) pairs sorted by expert, then row: pair i of expert e is
   pairs[first[e] + i]. */
static uint32_t pair_row[MOE_PAIRS_MAX];
static uint8_t pair_slot[MOE_PAIRS_MAX];
static uint32_t first[ROUTING_EXPERTS_MAX + 1];

/* Each row's k experts and weights: from the top-k (functional) or the routing model. */
static void choices(struct exec_model *m, uint32_t l, const struct exec_tile *tile,
                    uint32_t *idx, float *wgt)
{
    const struct model_config *c = m->cfg;
    const uint32_t k = c->experts_per_token;
    if (!m->plan->mode) {
        const float *val = (const float *)(uintptr_t)m->a.topk_val;
        const uint32_t *top = (const uint32_t *)(uintptr_t)m->a.topk_idx;
        for (uint32_t r = 0; r < tile->n; r++) {
            double norm = 0.0;
            for (uint32_t j = 0; j < k; j++)
                norm += val[r * k + j];
            for (uint32_t j = 0; j < k; j++) {
                idx[r * k + j] = top[r * k + j];
                wgt[r * k + j] = c->norm_topk_prob ? (float)(val[r * k + j] / norm)
                                                   : val[r * k + j];
            }
        }
        return;
    }
    const struct routing_model rm = { .experts = c->num_experts, .k = k,
                                      .skew_milli = m->plan->routing_skew_milli,
                                      .seed = m->plan->routing_seed };
    if (m->routing_layer != l + 1) {
        routing_layer_table(&rm, l, m->routing_table);
        m->routing_layer = l + 1;
    }
    for (uint32_t s = 0; s < tile->nsegs; s++)
        for (uint32_t i = 0; i < tile->segs[s].count; i++) {
            uint32_t r = tile->segs[s].row + i;
            routing_draw(&rm, m->routing_table, l, tile->segs[s].req, tile->segs[s].pos + i,
                         &idx[r * k]);
            for (uint32_t j = 0; j < k; j++)
                wgt[r * k + j] = 1.0f / (float)k;
        }
}

/* Sorts the pairs by expert (counting sort) and writes 1 / weight in that order. */
static void sort_pairs(struct exec_model *m, uint32_t n, const uint32_t *idx, const float *wgt)
{
    const uint32_t E = m->cfg->num_experts, k = m->cfg->experts_per_token;
    float *rw = (float *)(uintptr_t)m->a.rweight; /* the chain was flushed at the top-k */
    for (uint32_t e = 0; e <= E; e++)
        first[e] = 0;
    for (uint32_t i = 0; i < n * k; i++)
        first[idx[i] + 1]++;
    for (uint32_t e = 0; e < E; e++)
        first[e + 1] += first[e];
    uint32_t fill[ROUTING_EXPERTS_MAX];
    for (uint32_t e = 0; e < E; e++)
        fill[e] = first[e];
    for (uint32_t r = 0; r < n; r++)
        for (uint32_t j = 0; j < k; j++) {
            uint32_t at = fill[idx[r * k + j]]++;
            pair_row[at] = r, pair_slot[at] = (uint8_t)j;
            rw[at] = 1.0f / wgt[r * k + j];
        }
}

/* Expert e over its rows: gather, SwiGLU, scale, scatter into combine. */
static int run_expert(struct exec_model *m, uint32_t l, uint32_t e)
{
    const struct model_config *c = m->cfg;
    const struct npu_act_layout *a = &m->a;
    const uint32_t d = c->hidden_size, k = c->experts_per_token, ne = first[e + 1] - first[e];
    const uint64_t row = (uint64_t)d * m->eb;
    exec_stage_expert(m, l, e);
    for (uint32_t i = 0; i < ne; i++)
        exec_copy(m, a->gather + i * row, a->xb + pair_row[first[e] + i] * row, 1, row, row,
                  row);
    /* Paired split: a partial output, weighted and combined; one all-reduce after all the
       experts (the sum over ranks commutes with the weighting and the combine). */
    int rc = exec_swiglu(m, l, a->eout, a->gather, ne, true, e, c->moe_intermediate_size,
                         true);
    if (rc != NPU_OK)
        return rc;
    struct vector_op_args v = { .op = NPU_VECTOR_OP_ROW_DIV, .x = a->eout,
                                .y = a->rweight + first[e] * 4ull, .out = a->eout, .rows = ne,
                                .cols = d, .ldy = 1, .x_type = m->dt, .out_type = m->dt,
                                .y_type = NPU_DTYPE_FP32 };
    exec_vec(m, v);
    for (uint32_t i = 0; i < ne; i++) {
        uint64_t r = pair_row[first[e] + i], j = pair_slot[first[e] + i];
        exec_copy(m, a->combine + (r * k + j) * row, a->eout + i * row, 1, row, row, row);
    }
    return NPU_OK;
}

/* The experts this rank runs: [*lo, *hi) (all of them unless the plan is EP). */
static void own_experts(const struct exec_model *m, uint32_t l, uint32_t *lo, uint32_t *hi)
{
    const struct npu_image_tensor *g = m->t[l][MT_E_GATE];
    *lo = g->block0, *hi = g->block0 + g->blocks;
}

/* EP: combine[n][k][d] = 0, so the slots of experts on other ranks add nothing here. */
static void zero_combine(struct exec_model *m, uint32_t n)
{
    const uint32_t d = m->cfg->hidden_size, k = m->cfg->experts_per_token;
    exec_vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_FILL, .x = m->a.combine,
                                         .out = m->a.combine, .rows = n * k, .cols = d,
                                         .scalar = 0.0f, .x_type = m->dt, .y_type = m->dt,
                                         .out_type = m->dt });
}

/* xb2[n][d] = sum over j of combine[n][j][d], in top-k order. */
static void combine(struct exec_model *m, uint32_t n)
{
    const struct npu_act_layout *a = &m->a;
    const uint32_t d = m->cfg->hidden_size, k = m->cfg->experts_per_token;
    const uint64_t row = (uint64_t)d * m->eb;
    for (uint32_t j = 0; j < k; j++) {
        struct vector_op_args v = {
            .op = j ? NPU_VECTOR_OP_ADD : NPU_VECTOR_OP_SCALE, .x = j ? a->xb2 : a->combine,
            .y = j ? a->combine + j * row : 0, .out = a->xb2, .rows = n, .cols = d,
            .ldx = j ? d : k * d, .ldy = j ? k * d : 0, .ldout = d, .scalar = 1.0f,
            .x_type = m->dt, .y_type = m->dt, .out_type = m->dt };
        exec_vec(m, v);
    }
}

int exec_moe(struct exec_model *m, uint32_t l, const struct exec_tile *tile)
{
    const struct model_config *c = m->cfg;
    const struct npu_act_layout *a = &m->a;
    const uint32_t d = c->hidden_size, E = c->num_experts, k = c->experts_per_token;
    const uint32_t n = tile->n;
    static uint32_t idx[MOE_PAIRS_MAX];
    static float wgt[MOE_PAIRS_MAX];
    assert(n * k <= MOE_PAIRS_MAX && E <= ROUTING_EXPERTS_MAX);
    exec_set_cat(m, EXEC_CAT_FFN);
    exec_rmsnorm(m, a->xb, tile->xt, exec_weight_addr(m, l, MT_FFN_NORM), n, d);
    /* probs[n][E] = xb[n][d] router[E][d]^T, softmax, top-k */
    exec_gemm(m, a->probs, a->xb, exec_weight_addr(m, l, MT_ROUTER), n, E, d, d, d, E, true,
              true, false);
    exec_vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_SOFTMAX, .x = a->probs,
                                         .out = a->probs, .rows = n, .cols = E });
    exec_vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_TOPK, .x = a->probs,
                                         .out = a->topk_val, .aux = a->topk_idx, .rows = n,
                                         .cols = E, .k = k, .ldout = k, .ldaux = k });
    int rc = exec_flush(m);
    if (rc != NPU_OK)
        return rc;
    choices(m, l, tile, idx, wgt);
    sort_pairs(m, n, idx, wgt);
    uint32_t lo, hi;
    own_experts(m, l, &lo, &hi);
    if (hi - lo < E)
        zero_combine(m, n);
    for (uint32_t e = 0; e < E; e++) /* every rank knows the routing: all count it */
        m->expert_tokens[(uint64_t)l * E + e] += first[e + 1] - first[e];
    for (uint32_t e = lo; rc == NPU_OK && e < hi; e++)
        if (first[e + 1] > first[e])
            rc = run_expert(m, l, e);
    if (rc != NPU_OK)
        return rc;
    combine(m, n);
    if (exec_ffn_paired(m, true))
        rc = exec_allreduce(m, a->xb2, (uint64_t)n * d);
    if (rc == NPU_OK)
        exec_add_rows(m, tile->xt, a->xb2, n, d);
    return rc;
}
