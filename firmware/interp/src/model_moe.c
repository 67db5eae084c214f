/* SPDX-License-Identifier: MIT */
/*
 * The MoE op on one tile (model_exec.h). The router's top-k decides which experts run, so
 * the chain is cut there: the hart reads each row's k experts and weights (functional mode;
 * renormalised as the reference does) or draws them from the seeded routing model
 * (performance mode, routing_model.h), then, expert by expert in ascending order: stage its
 * weights if the plan streams them, gather its rows, one SwiGLU over them, scale each row by
 * its weight, and scatter the rows to combine[row][j] (j: the choice's place in the row's
 * top-k). The k slots are summed in top-k order, the reference's order.
 * This file runs every expert on the ranks of the tile by the tensor partition of the expert
 * GEMMs (MN, K, 2D; the paired MN/K split ends in one all-reduce). Expert parallelism, where
 * a rank holds whole experts and rows are dispatched to them over the NoC, is
 * model_moe_ep.c. Shapes: n tile rows, d hidden, E experts, k per row, ne rows of one expert.
 */
#include <assert.h>

#include "model_moe.h"
#include "npu/hal.h"
#include "npu/route.h"
#include "npu/vector.h"

struct moe_pairs moe_pairs;

int moe_route(struct exec_model *m, uint32_t l, uint64_t x, uint32_t n)
{
    const struct model_config *c = m->cfg;
    const struct npu_act_layout *a = &m->buf.a;
    const uint32_t d = c->hidden_size, E = c->num_experts;
    if (n > 0) { /* probs[n][E] = xb[n][d] router[E][d]^T */
        exec_rmsnorm(m, a->xb, x, exec_weight_addr(m, l, MT_FFN_NORM), n, d);
        exec_gemm(m, a->probs, a->xb, exec_weight_addr(m, l, MT_ROUTER), n, E, d, d, d, E,
                  true, true, false);
    }
    /* beside the GEMM (its output is not read until the softmax) */
    int rc = exec_layer_beside_route(m);
    if (rc != NPU_OK)
        return rc;
    if (n > 0) { /* softmax, top-k */
        exec_vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_SOFTMAX, .x = a->probs,
                                             .out = a->probs, .rows = n, .cols = E });
        exec_vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_TOPK, .x = a->probs,
                                             .out = a->topk_val, .aux = a->topk_idx,
                                             .rows = n, .cols = E, .k = c->experts_per_token,
                                             .ldout = c->experts_per_token,
                                             .ldaux = c->experts_per_token });
    }
    return exec_flush(m);
}

void moe_draw_rows(const struct exec_model *m, uint32_t l, uint32_t req, uint32_t pos,
                   uint32_t n, uint32_t *out)
{
    const uint32_t k = m->cfg->experts_per_token;
    const uint32_t most = NPU_ROUTE_PAIRS_MAX / k; /* rows per command */
    for (uint32_t i = 0; i < n; i += most) {
        const struct npu_route_args a = {
            .out = (uint64_t)(uintptr_t)(out + (uint64_t)i * k), .seed = m->plan->routing_seed,
            .experts = m->cfg->num_experts, .k = k, .skew_milli = m->plan->routing_skew_milli,
            .layer = l, .req = req, .pos = pos + i,
            .rows = n - i < most ? n - i : most };
        int rc = route_draw_rows(&a);
        assert(rc == NPU_OK && "the chip refused a ROUTE the plan allows");
        (void)rc;
    }
}

/* Each row's k experts and weights: from the top-k (functional; idx may be the top-k's own
   index buffer: an element is read before it is written) or the routing model. */
static void choices(struct exec_model *m, uint32_t l, const struct exec_tile *tile,
                    uint32_t r0, uint32_t r1, uint32_t *idx, float *wgt)
{
    const struct model_config *c = m->cfg;
    const uint32_t k = c->experts_per_token;
    if (!m->plan->mode) {
        const float *val = (const float *)(uintptr_t)m->buf.a.topk_val;
        const uint32_t *top = (const uint32_t *)(uintptr_t)m->buf.a.topk_idx;
        for (uint32_t r = 0; r < r1 - r0; r++) {
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
    for (uint32_t s = 0; s < tile->nsegs; s++) { /* the segment's rows inside [r0, r1) */
        const struct exec_seg *g = &tile->segs[s];
        const uint32_t lo = g->row > r0 ? g->row : r0;
        const uint32_t hi = g->row + g->count < r1 ? g->row + g->count : r1;
        if (lo < hi)
            moe_draw_rows(m, l, g->req, g->pos + (lo - g->row), hi - lo, &idx[(lo - r0) * k]);
        for (uint32_t r = lo; r < hi; r++)
            for (uint32_t j = 0; j < k; j++)
                wgt[(r - r0) * k + j] = 1.0f / (float)k;
    }
}

/* Pairs per bucket of the choices idx[n][k] of the group's rows [r0, r0 + n) into p->first
   (prefix sums): per expert, or per slice of the copy of the expert the row goes to (map). */
static void count_buckets(struct moe_pairs *p, const uint32_t *idx, uint32_t pairs,
                          uint32_t buckets, const struct moe_ep_map *map, uint32_t r0, uint32_t k)
{
    for (uint32_t b = 0; b <= buckets; b++)
        p->first[b] = 0;
    for (uint32_t i = 0; i < pairs; i++) {
        if (!map) {
            p->first[idx[i] + 1]++;
            continue;
        }
        for (uint32_t x = map->efirst[idx[i]]; x < map->efirst[idx[i] + 1]; x++)
            if (moe_ep_serves(map, map->by_expert[x], r0 + i / k))
                p->first[map->by_expert[x] + 1]++;
    }
    for (uint32_t b = 0; b < buckets; b++)
        p->first[b + 1] += p->first[b];
}

void moe_sort_choices(struct exec_model *m, uint32_t l, const struct exec_tile *tile,
                      uint32_t r0, uint32_t r1, const struct moe_ep_map *map)
{
    static uint32_t fill[NPU_EXPERT_MAP_MAX];
    static float wgt[MOE_PAIRS_MAX];
    /* each row's choices in place of the top-k's indices (its rows, rr >= n, and the chain
       was flushed after it; functional mode copies them onto themselves, performance mode's
       top-k wrote nothing). Not the weights: the MoE over the layer stashes the top-k's
       values after this sort and sorts them again later, which would normalise twice. */
    uint32_t *idx = (uint32_t *)(uintptr_t)m->buf.a.topk_idx;
    const uint32_t E = m->cfg->num_experts, k = m->cfg->experts_per_token, n = r1 - r0;
    const uint32_t buckets = map ? map->n : E;
    struct moe_pairs *p = &moe_pairs;
    float *rw = (float *)(uintptr_t)m->buf.a.rweight; /* the chain was flushed at the top-k */
    assert(n * k <= MOE_PAIRS_MAX && E <= ROUTING_EXPERTS_MAX);
    /* HAZARD: the pairs' rows are the index list of gathers (moe_gather_pairs) */
    int rc = exec_wait_for(m, (uint64_t)(uintptr_t)p->row, sizeof(p->row));
    assert(rc == NPU_OK && "a wait without a deadline");
    (void)rc;
    choices(m, l, tile, r0, r1, idx, wgt);
    count_buckets(p, idx, n * k, buckets, map, r0, k); /* then a counting sort by bucket */
    assert(p->first[buckets] <= MOE_PAIRS_MAX && "the planner's fan-out");
    for (uint32_t b = 0; b < buckets; b++)
        fill[b] = p->first[b];
    p->rows = n;
    for (uint32_t r = 0; r < n; r++)
        for (uint32_t j = 0; j < k; j++) {
            const uint32_t e = idx[r * k + j];
            const uint32_t x0 = map ? map->efirst[e] : 0, x1 = map ? map->efirst[e + 1] : 1;
            bool part = false; /* a slice after the copy's first adds a partial output */
            for (uint32_t x = x0; x < x1; x++) {
                if (map && !moe_ep_serves(map, map->by_expert[x], r0 + r))
                    continue;
                const uint32_t at = fill[map ? map->by_expert[x] : e]++;
                p->row[at] = r, p->slot[at] = (uint8_t)j, p->part[at] = part;
                rw[at] = 1.0f / wgt[r * k + j];
                part = true;
            }
        }
}

void moe_gather_pairs(struct exec_model *m, uint64_t dst, uint64_t src, uint32_t first,
                      uint32_t count)
{
    if (count == 0)
        return;
    exec_gather(m, &(struct exec_gather_args){
                       .dst = dst, .table = src, .index = moe_pairs.row + first, .rows = count,
                       .row_bytes = (uint64_t)m->cfg->hidden_size * m->buf.eb,
                       .table_rows = moe_pairs.rows });
}

void moe_sum_slots(struct exec_model *m, uint64_t out, uint64_t slots, uint32_t n)
{
    const uint32_t d = m->cfg->hidden_size, k = m->cfg->experts_per_token;
    const uint64_t row = (uint64_t)d * m->buf.eb;
    for (uint32_t j = 0; j < k; j++) {
        struct vector_op_args v = {
            .op = j ? NPU_VECTOR_OP_ADD : NPU_VECTOR_OP_SCALE, .x = j ? out : slots,
            .y = j ? slots + j * row : 0, .out = out, .rows = n, .cols = d,
            .ldx = j ? d : k * d, .ldy = j ? k * d : 0, .ldout = d, .scalar = 1.0f,
            .x_type = m->buf.dt, .y_type = m->buf.dt, .out_type = m->buf.dt };
        exec_vec(m, v);
    }
}

int moe_route_all(struct exec_model *m, uint32_t l, const struct exec_tile *tile)
{
    const uint32_t E = m->cfg->num_experts;
    exec_set_cat(m, EXEC_CAT_FFN);
    int rc = moe_route(m, l, tile->xt, tile->n);
    if (rc != NPU_OK)
        return rc;
    moe_sort_choices(m, l, tile, 0, tile->n, NULL);
    for (uint32_t e = 0; e < E; e++)
        m->acct.expert_tokens[(uint64_t)l * E + e] += moe_pairs.first[e + 1] - moe_pairs.first[e];
    return NPU_OK;
}

/* Expert e over its rows: gather, SwiGLU, scale, scatter into combine. */
static int run_expert(struct exec_model *m, uint32_t l, uint32_t e)
{
    const struct npu_act_layout *a = &m->buf.a;
    const struct moe_pairs *p = &moe_pairs;
    const uint32_t d = m->cfg->hidden_size, k = m->cfg->experts_per_token;
    const uint32_t ne = p->first[e + 1] - p->first[e];
    const uint64_t row = (uint64_t)d * m->buf.eb;
    exec_stage_expert(m, l, e);
    moe_gather_pairs(m, a->gather, a->xb, p->first[e], ne);
    /* Paired split: a partial output, weighted and combined; one all-reduce after all the
       experts (the sum over ranks commutes with the weighting and the combine). */
    int rc = exec_swiglu(m, l, a->eout, a->gather, ne, true, e,
                         m->cfg->moe_intermediate_size, true);
    if (rc != NPU_OK)
        return rc;
    struct vector_op_args v = { .op = NPU_VECTOR_OP_ROW_DIV, .x = a->eout,
                                .y = a->rweight + p->first[e] * 4ull, .out = a->eout,
                                .rows = ne, .cols = d, .ldy = 1, .x_type = m->buf.dt,
                                .out_type = m->buf.dt, .y_type = NPU_DTYPE_FP32 };
    exec_vec(m, v);
    for (uint32_t i = 0; i < ne; i++) {
        uint64_t r = p->row[p->first[e] + i], j = p->slot[p->first[e] + i];
        exec_copy(m, a->combine + (r * k + j) * row, a->eout + i * row, 1, row, row, row);
    }
    return NPU_OK;
}

int exec_moe(struct exec_model *m, uint32_t l, const struct exec_tile *tile)
{
    exec_attention_kept_drop(); /* its peers' writes declare no local range */
    if (m->tp > 1 && npu_plan_is_ep(m->plan))
        return exec_moe_units_apply(m, tile->n) ? exec_moe_units(m, l, tile)
                                                : exec_moe_ep(m, l, tile);
    const struct model_config *c = m->cfg;
    const struct npu_act_layout *a = &m->buf.a;
    const uint32_t d = c->hidden_size, E = c->num_experts, n = tile->n;
    int rc = moe_route_all(m, l, tile);
    for (uint32_t e = 0; rc == NPU_OK && e < E; e++)
        if (moe_pairs.first[e + 1] > moe_pairs.first[e])
            rc = run_expert(m, l, e);
    if (rc != NPU_OK)
        return rc;
    moe_sum_slots(m, a->xb2, a->combine, n);
    if (exec_ffn_paired(m, true))
        rc = exec_allreduce(m, a->xb2, (uint64_t)n * d, m->buf.dt);
    if (rc == NPU_OK)
        exec_add_rows(m, tile->xt, a->xb2, n, d);
    return rc;
}
