/* SPDX-License-Identifier: MIT */
/*
 * The MoE by units (plan.moe_units_rows; docs/images.md, "MoE by units"): a MoE op of few
 * rows, a decode iteration's, under expert parallelism over tp > 1 ranks.
 *
 * Why: decode is bound by reading the weights of the experts its rows touch. With experts
 * (or slices of them) fixed to ranks, a rank whose experts the few rows all touch reads two
 * or three times the mean rank's bytes while the others wait at the combine (Qwen3-30B-A3B,
 * 8 rows under skewed routing: the busiest rank read 12 units of 128 columns a layer against
 * a mean of 3.6). Here the work is dealt, not the weights:
 *   1. every rank routes all n rows (the residual rows are on every rank) and sorts the
 *      choices by expert (the same on every rank);
 *   2. each touched expert is cut into units of w columns of its intermediate width
 *      (w = moe_intermediate_size / (expert_units x moe_unit_split): the expert map's unit,
 *      split further), and the units, expert by expert, are dealt round the ranks, starting
 *      at rank l mod tp in layer l so that no rank always takes the remainder;
 *   3. a rank loads each of its units' gate and up rows and down columns through its expert
 *      ring from the HBM share of whichever rank the map gives the unit's slice (HBM is one
 *      address space; a DMA costs the reading core's channel, docs/engines.md), runs the
 *      SwiGLU over its expert's rows, weighs the outputs and adds them to the rows' top-k
 *      slots (zero where no unit of the slot's expert ran here);
 *   4. the k slots are summed in top-k order and the partial outputs all-reduced, then
 *      added to the residual: the structure of the paired MN/K split (model_moe.c), whose
 *      sum over ranks commutes with the weighting and the combine.
 * Modelled: every byte and operation of that. Not modelled: overlapping the all-reduce with
 * the next layer's work. Shapes: n rows, d hidden, k choices per row, w unit columns, ne
 * rows of one expert.
 */
#include <stdio.h>

#include "model_moe.h"
#include "npu/hal.h"
#include "npu/vector.h"

bool exec_moe_units_apply(const struct exec_model *m, uint32_t n)
{
    return m->plan->moe_units_rows && n <= m->plan->moe_units_rows;
}

/* Units per expert and their columns. */
static void unit_shape(const struct exec_model *m, uint32_t *per_expert, uint32_t *w)
{
    *per_expert = m->plan->expert_units * m->plan->moe_unit_split;
    *w = m->cfg->moe_intermediate_size / *per_expert;
}

/* Rank q's share of layer l's expert tensor kind: the planner writes an EP tensor's shares
   rank after rank (checked at start, exec_moe_units_check). */
static const struct npu_image_tensor *share_of(const struct exec_model *m, uint32_t l,
                                               enum model_tensor_kind kind, uint32_t q)
{
    return m->w.t[l][kind] - m->rank + q;
}

bool exec_moe_units_check(const struct exec_model *m)
{
    if (!m->plan->moe_units_rows)
        return true;
    const struct npu_image_header *h = (const struct npu_image_header *)m->image;
    const struct npu_image_tensor *ts = (const void *)(m->image + h->tensors_off);
    const uint32_t U = m->plan->expert_units * m->plan->moe_unit_split;
    bool ok = U && m->cfg->moe_intermediate_size % U == 0;
    for (uint32_t l = 0; ok && l < m->cfg->num_layers; l++)
        for (uint32_t k = MT_E_GATE; ok && k <= MT_E_DOWN; k++) {
            const struct npu_image_tensor *t = m->w.t[l][k];
            const uint64_t at = t ? (uint64_t)(t - ts) : 0; /* this rank's entry */
            ok = t && at >= m->rank && at - m->rank + m->tp <= h->tensors_count;
            for (uint32_t q = 0; ok && q < m->tp; q++) {
                const struct npu_image_tensor *s = &ts[at - m->rank + q];
                ok = s->rank == q && s->layer == l && s->kind == k;
            }
        }
    if (!ok)
        printf("MODEL error: core %u: the MoE by units needs every rank's expert shares in rank "
               "order in the tensor table and units (%u) that divide the expert width %u\n",
               hal_self()->core_id, U, m->cfg->moe_intermediate_size);
    return ok;
}

/* Where unit j of expert e (columns [j w, j w + w)) is: its slice in layer l's map, of copy
   j mod the expert's copies (a replicated expert's units read from every copy's HBM). */
static uint32_t unit_slice(const struct moe_ep_map *x, uint32_t e, uint32_t col0, uint32_t w)
{
    const uint32_t rep = npu_expert_replica(col0 / w, x->reps[e]);
    for (uint32_t y = x->efirst[e]; y < x->efirst[e + 1]; y++) {
        const uint32_t s = x->by_expert[y];
        if (x->rep[s] == rep && col0 >= x->f0[s] && col0 < (uint32_t)x->f0[s] + x->width[s])
            return s;
    }
    return x->n; /* the image check keeps every unit of every copy in the map */
}

/* Loads unit (e, col0) of layer l: gate and up [w][d] rows and down [d][w] columns, through
   the ring; their addresses in SRAM. */
static void load_unit(struct exec_model *m, uint32_t l, const struct moe_ep_map *x, uint32_t e,
                      uint32_t col0, uint32_t w, uint64_t addr[3])
{
    const uint32_t s = unit_slice(x, e, col0, w), q = x->rank[s], d = m->cfg->hidden_size;
    const uint64_t eb = m->buf.eb, off = col0 - x->f0[s];
    const enum model_tensor_kind kinds[3] = { MT_E_GATE, MT_E_UP, MT_E_DOWN };
    for (int i = 0; i < 3; i++) {
        const struct npu_image_tensor *t = share_of(m, l, kinds[i], q);
        const uint64_t base = exec_hbm_addr(m, t->hbm_off) + (s - t->block0) * t->block_bytes;
        const bool down = kinds[i] == MT_E_DOWN; /* [d][width]: w columns of each row */
        const struct exec_ring_src r = {
            .t = t, .block = s, .part = 1 + (uint32_t)(off / w),
            .src = base + (down ? off * eb : off * d * eb), .rows = down ? d : 1,
            .row_bytes = down ? w * eb : (uint64_t)w * d * eb,
            .src_stride = down ? (uint64_t)x->width[s] * eb : (uint64_t)w * d * eb };
        addr[i] = exec_ring_load(m, l, &r);
    }
}

/* Expert e's rows (normalised, in xb) into ugather, in pair order. */
static void gather_rows(struct exec_model *m, uint32_t e)
{
    const struct moe_pairs *p = &moe_pairs;
    moe_gather_pairs(m, m->buf.a.ugather, m->buf.a.xb, p->first[e], p->first[e + 1] - p->first[e]);
}

/* Unit (e, col0) over expert e's ne rows in ugather: SwiGLU over its w columns, weighted,
   added to the rows' slots. */
static void run_unit(struct exec_model *m, uint32_t l, const struct moe_ep_map *x, uint32_t e,
                     uint32_t col0, uint32_t w)
{
    const struct npu_act_layout *a = &m->buf.a;
    const struct moe_pairs *p = &moe_pairs;
    const uint32_t d = m->cfg->hidden_size, k = m->cfg->experts_per_token;
    const uint32_t ne = p->first[e + 1] - p->first[e];
    const uint64_t row = (uint64_t)d * m->buf.eb;
    uint64_t wt[3];
    load_unit(m, l, x, e, col0, w, wt);
    /* hb[ne][w] = gather[ne][d] gate_u[w][d]^T, hb2 likewise with up */
    exec_gemm(m, a->hb, a->ugather, wt[0], ne, w, d, d, d, w, true, false, false);
    exec_gemm(m, a->hb2, a->ugather, wt[1], ne, w, d, d, d, w, true, false, false);
    exec_vec(m, exec_vec_act(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_SWIGLU,
                                                         .x = a->hb, .y = a->hb2, .out = a->hb,
                                                         .rows = ne, .cols = w }));
    /* ueout[ne][d] = hb[ne][w] down_u[d][w]^T, then / (1 / weight) of each pair */
    exec_gemm(m, a->ueout, a->hb, wt[2], ne, d, w, w, w, d, true, false, false);
    exec_vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_ROW_DIV, .x = a->ueout,
                                         .y = a->rweight + p->first[e] * 4ull, .out = a->ueout,
                                         .rows = ne, .cols = d, .ldy = 1, .x_type = m->buf.dt,
                                         .out_type = m->buf.dt, .y_type = NPU_DTYPE_FP32 });
    for (uint32_t i = 0; i < ne; i++) {
        const uint64_t r = p->row[p->first[e] + i], j = p->slot[p->first[e] + i];
        const uint64_t dst = a->ucombine + (r * k + j) * row;
        exec_vec(m, exec_vec_act(m, (struct vector_op_args){
                        .op = NPU_VECTOR_OP_ADD, .x = dst, .y = a->ueout + i * row,
                        .out = dst, .rows = 1, .cols = d }));
    }
}

/* Steps 2 and 3: this rank's units, dealt expert by expert from rank l mod tp. */
static void run_units(struct exec_model *m, uint32_t l)
{
    const struct moe_ep_map *x = moe_ep_map(m, l);
    const struct moe_pairs *p = &moe_pairs;
    uint32_t per, w, next = l % m->tp; /* the rank the next unit goes to */
    unit_shape(m, &per, &w);
    for (uint32_t e = 0; e < m->cfg->num_experts; e++) {
        if (p->first[e + 1] == p->first[e])
            continue;
        bool gathered = false;
        for (uint32_t j = 0; j < per; j++, next = (next + 1) % m->tp) {
            if (next != m->rank)
                continue;
            if (!gathered)
                gather_rows(m, e), gathered = true;
            run_unit(m, l, x, e, j * w, w);
        }
    }
}

int exec_moe_units(struct exec_model *m, uint32_t l, const struct exec_tile *tile)
{
    const struct npu_act_layout *a = &m->buf.a;
    const uint32_t d = m->cfg->hidden_size, k = m->cfg->experts_per_token, n = tile->n;
    int rc = moe_route_all(m, l, tile);
    if (rc != NPU_OK)
        return rc;
    exec_stage_after_route(m, l); /* the router read the layer's last shares */
    exec_vec(m, exec_vec_act(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_FILL,
                                                         .x = a->ucombine, .out = a->ucombine,
                                                         .rows = n * k, .cols = d,
                                                         .scalar = 0.0f }));
    run_units(m, l);
    if (tile->whole) /* the layer's last units' loads are queued: the head's behind them
                        (a later tile's would reload the ring and read the layer's shares) */
        exec_head_ahead(m, l, true);
    if (m->attn_next) /* its last loads are queued: the next layer's first steps behind */
        exec_attention_prefetch_next(m, l + 1, tile, true);
    moe_sum_slots(m, a->xb2, a->ucombine, n);
    rc = exec_allreduce(m, a->xb2, (uint64_t)n * d, m->buf.dt);
    if (rc == NPU_OK)
        exec_add_rows(m, tile->xt, a->xb2, n, d);
    return rc;
}
