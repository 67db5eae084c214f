/* SPDX-License-Identifier: MIT */
/*
 * The ops of one layer on one tile of rows (model_exec.h): attention with the KV cache and
 * an online softmax, the dense FFN, and MoE. Shapes: n = tile rows, d = hidden size,
 * qd = heads x head_dim, kvd = kv heads x head_dim, B = attention block (positions).
 */
#include <assert.h>
#include <math.h>

#include "model_exec.h"
#include "npu/hal.h"
#include "npu/vector.h"

static struct vector_op_args f32(struct vector_op_args v)
{
    v.x_type = v.y_type = v.out_type = NPU_DTYPE_FP32;
    return v;
}

static struct vector_op_args act(const struct exec_model *m, struct vector_op_args v)
{
    v.x_type = v.y_type = v.out_type = m->dt;
    return v;
}

/* x [n][d] -> out [n][d], RMSNorm with weight w [d]. */
void exec_rmsnorm(struct exec_model *m, uint64_t out, uint64_t x, uint64_t w, uint32_t n,
                    uint32_t d)
{
    exec_vec(m, act(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_RMSNORM, .x = x, .y = w,
                                                .out = out, .rows = n, .cols = d, .ldy = d,
                                                .scalar = (float)m->cfg->rms_norm_eps }));
}

void exec_add_rows(struct exec_model *m, uint64_t xt, uint64_t y, uint32_t n, uint32_t d)
{
    exec_vec(m, act(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_ADD, .x = xt, .y = y,
                                                .out = xt, .rows = n, .cols = d }));
}

/* Address of K (v false) or V of `pos` of run r in layer l, and how many positions from pos
   on are contiguous there (the rest of its pool block and of the blocks with the following
   ids after it, which the pool keeps next to each other; a ring segment is contiguous). */
static uint64_t kv_addr(const struct exec_model *m, const struct exec_run *r, uint32_t l,
                        bool v, uint32_t pos, uint32_t *span)
{
    const uint32_t B = m->plan->kv_block, blk = pos / B;
    if (blk < r->nblocks) {
        uint32_t last = blk;
        while (last + 1 < r->nblocks && r->blocks[last + 1] == r->blocks[last] + 1)
            last++;
        *span = (last + 1 - blk) * B - pos % B;
        return m->kv_pool + npu_kv_pool_offset(m->cfg, m->plan, v, l, r->blocks[blk], pos % B);
    }
    *span = UINT32_MAX;
    return m->kv_ring + npu_kv_ring_offset(m->cfg, m->plan, v, l, r->ring_row + pos);
}

/* Segment g's new keys and values into its cache, split where its blocks are. */
static void store_kv(struct exec_model *m, uint32_t l, const struct exec_seg *g)
{
    const uint64_t row = npu_kv_row_bytes(m->cfg, m->plan);
    for (uint32_t i = 0; i < g->count;) {
        uint32_t span;
        uint64_t k = kv_addr(m, g->run, l, false, g->pos + i, &span);
        uint64_t v = kv_addr(m, g->run, l, true, g->pos + i, &span);
        uint32_t n = g->count - i < span ? g->count - i : span;
        exec_copy(m, k, m->a.knew + (g->row + i) * row, 1, n * row, n * row, n * row);
        exec_copy(m, v, m->a.vnew + (g->row + i) * row, 1, n * row, n * row, n * row);
        i += n;
    }
}

/* q/k norms and RoPE of the tile's rows; its keys and values into the cache. */
static void rotate_and_store(struct exec_model *m, uint32_t l, const struct exec_tile *tile)
{
    const struct model_config *c = m->cfg;
    const struct npu_act_layout *a = &m->a;
    const uint32_t hd = c->head_dim, nh = c->num_heads, nkv = c->num_kv_heads, n = tile->n;
    uint32_t *pos = (uint32_t *)(uintptr_t)a->positions;
    for (uint32_t s = 0; s < tile->nsegs; s++) /* the chain was flushed: nothing reads it */
        for (uint32_t i = 0; i < tile->segs[s].count; i++)
            pos[tile->segs[s].row + i] = tile->segs[s].pos + i;
    if (c->qk_norm) { /* per head: rows of hd */
        exec_rmsnorm(m, a->q, a->q, exec_weight_addr(m, l, MT_Q_NORM), n * nh, hd);
        exec_rmsnorm(m, a->knew, a->knew, exec_weight_addr(m, l, MT_K_NORM), n * nkv, hd);
    }
    const uint64_t bufs[2] = { a->q, a->knew };
    const uint32_t heads[2] = { nh, nkv };
    for (int i = 0; i < 2; i++) /* row r's heads at positions[r] */
        exec_vec(m, act(m, (struct vector_op_args){
            .op = NPU_VECTOR_OP_ROPE, .x = bufs[i], .y = a->positions, .out = bufs[i],
            .rows = n * heads[i], .cols = hd, .k = heads[i], .rope_half = true,
            .scalar = (float)c->rope_theta, .y_type = NPU_DTYPE_FP32 }));
    for (uint32_t s = 0; s < tile->nsegs; s++)
        store_kv(m, l, &tile->segs[s]);
}

/*
 * KV head h of segment g against cache block [b0, b0 + nb): the group's query heads as one
 * matrix of n x group rows (row t * group + j is row t's j-th head of the group, whose
 * position is pos + t: MASK's k = group), scores, mask, and the online softmax update of
 * (max, sum, acc). m_old/m_new: this block's parity of the max buffers.
 */
static void kv_head_block(struct exec_model *m, const struct exec_seg *g, uint32_t h,
                          uint32_t b0, uint32_t nb, bool first, uint32_t window,
                          uint64_t m_old, uint64_t m_new)
{
    const struct model_config *c = m->cfg;
    const struct npu_act_layout *a = &m->a;
    const uint32_t hd = c->head_dim, kvd = c->num_kv_heads * hd;
    const uint32_t group = c->num_heads / c->num_kv_heads, rows = g->count * group;
    const uint64_t eb = m->eb, span = (uint64_t)m->plan->tile_rows * group; /* per KV head */
    const uint64_t first_row = h * span + (uint64_t)g->row * group;
    const uint64_t stat = first_row * 4;                  /* fp32 statistics of these rows */
    const uint64_t acc = a->acc + first_row * hd * 4;
    /* scores[rows][nb] = Q_h[rows][hd] K_blk,h[nb][hd]^T / sqrt(hd) */
    exec_gemm(m, a->scores, a->qg + first_row * hd * eb, a->kblk + (uint64_t)h * hd * eb, rows,
              nb, hd, hd, kvd, nb, true, true, false);
    exec_vec(m, f32((struct vector_op_args){ .op = NPU_VECTOR_OP_SCALE, .x = a->scores,
                                             .out = a->scores, .rows = rows, .cols = nb,
                                             .scalar = 1.0f / sqrtf((float)hd) }));
    /* Row t sees block columns up to pos + t - b0, and with a window the last `window`
       positions only. A step wholly before the segment's first position, without a window,
       hides nothing: no mask. */
    if (window || b0 + nb - 1 > g->pos)
        exec_vec(m, f32((struct vector_op_args){ .op = NPU_VECTOR_OP_MASK, .x = a->scores,
                                                 .out = a->scores, .rows = rows, .cols = nb,
                                                 .k = group, .pos = g->pos - b0,
                                                 .scalar = (float)window }));
    exec_vec(m, f32((struct vector_op_args){ .op = NPU_VECTOR_OP_ROW_MAX, .x = a->scores,
                                             .aux = m_new + stat, .rows = rows, .cols = nb,
                                             .ldaux = 1 }));
    if (!first) /* running max */
        exec_vec(m, f32((struct vector_op_args){ .op = NPU_VECTOR_OP_MAX, .x = m_new + stat,
                                                 .y = m_old + stat, .out = m_new + stat,
                                                 .rows = 1, .cols = rows }));
    struct vector_op_args e = f32((struct vector_op_args){
        .op = NPU_VECTOR_OP_EXP_SUM, .x = a->scores, .y = m_new + stat, .out = a->probs_blk,
        .aux = (first ? a->l : a->rsum) + stat, .rows = rows, .cols = nb, .ldy = 1,
        .ldaux = 1 });
    e.out_type = m->dt;
    exec_vec(m, e);
    if (!first) { /* acc and the sum so far scaled by exp(old max - new max), then += */
        exec_vec(m, f32((struct vector_op_args){ .op = NPU_VECTOR_OP_RESCALE, .x = acc,
                                                 .y = m_old + stat, .aux = m_new + stat,
                                                 .out = acc, .rows = rows, .cols = hd,
                                                 .ldy = 1, .ldaux = 1 }));
        exec_vec(m, f32((struct vector_op_args){ .op = NPU_VECTOR_OP_RESCALE, .x = a->l + stat,
                                                 .y = m_old + stat, .aux = m_new + stat,
                                                 .out = a->l + stat, .rows = rows, .cols = 1,
                                                 .ldy = 1, .ldaux = 1 }));
        exec_vec(m, f32((struct vector_op_args){ .op = NPU_VECTOR_OP_ADD, .x = a->l + stat,
                                                 .y = a->rsum + stat, .out = a->l + stat,
                                                 .rows = 1, .cols = rows }));
    }
    /* acc[rows][hd] (+)= P[rows][nb] V_blk,h[nb][hd] */
    exec_gemm(m, acc, a->probs_blk, a->vblk + (uint64_t)h * hd * eb, rows, hd, nb, nb, kvd, hd,
              false, true, !first);
}

/* K and V of positions [b0, b0 + nb) into kblk and vblk: one copy per contiguous piece. */
static void gather_kv(struct exec_model *m, uint32_t l, const struct exec_run *r, uint32_t b0,
                      uint32_t nb)
{
    const uint64_t row = npu_kv_row_bytes(m->cfg, m->plan);
    for (uint32_t pos = b0, n; pos < b0 + nb; pos += n) {
        uint32_t contig;
        uint64_t k = kv_addr(m, r, l, false, pos, &contig);
        uint64_t v = kv_addr(m, r, l, true, pos, &contig);
        n = b0 + nb - pos < contig ? b0 + nb - pos : contig;
        exec_copy(m, m->a.kblk + (pos - b0) * row, k, 1, n * row, n * row, n * row);
        exec_copy(m, m->a.vblk + (pos - b0) * row, v, 1, n * row, n * row, n * row);
    }
}

/* Attention of one segment over its cache, step by step (a step: up to attn_block positions
   of whole cache blocks, keys and values gathered once for all heads), then attn = acc / sum
   back in the [row][head][hd] layout. */
static void attend(struct exec_model *m, uint32_t l, bool sliding, const struct exec_seg *g)
{
    const struct model_config *c = m->cfg;
    const struct npu_act_layout *a = &m->a;
    const uint32_t hd = c->head_dim, qd = c->num_heads * hd, B = m->plan->kv_block;
    const uint32_t A = m->plan->attn_block;
    const uint32_t group = c->num_heads / c->num_kv_heads, nkv = c->num_kv_heads;
    const uint32_t last = g->pos + g->count - 1;
    const uint32_t window = sliding ? c->sliding_window : 0;
    const uint32_t lo = window && g->pos + 1 > window ? g->pos + 1 - window : 0;
    const uint64_t eb = m->eb, gb = (uint64_t)group * hd * eb;
    const uint64_t span = (uint64_t)m->plan->tile_rows * group;
    /* qg[h][rows][hd]: KV head h's query heads, row by row (one strided copy per KV head) */
    for (uint32_t h = 0; h < nkv; h++)
        exec_copy(m, a->qg + (h * span + (uint64_t)g->row * group) * hd * eb,
                  a->q + ((uint64_t)g->row * qd + (uint64_t)h * group * hd) * eb, g->count, gb,
                  (uint64_t)qd * eb, gb);
    uint32_t parity = 0;
    /* steps end at multiples of B, where pool blocks end (a window may start mid-block), and
       hold at most A positions */
    for (uint32_t b0 = lo, nb; b0 <= last; b0 += nb, parity ^= 1) {
        nb = b0 / B * B + A - b0;
        nb = last + 1 - b0 < nb ? last + 1 - b0 : nb;
        gather_kv(m, l, g->run, b0, nb);
        uint64_t m_old = parity ? a->m_b : a->m_a, m_new = parity ? a->m_a : a->m_b;
        for (uint32_t h = 0; h < nkv; h++)
            kv_head_block(m, g, h, b0, nb, b0 == lo, window, m_old, m_new);
    }
    for (uint32_t h = 0; h < nkv; h++) {
        const uint64_t first_row = h * span + (uint64_t)g->row * group;
        struct vector_op_args v = f32((struct vector_op_args){
            .op = NPU_VECTOR_OP_ROW_DIV, .x = a->acc + first_row * hd * 4,
            .y = a->l + first_row * 4, .out = a->qg + first_row * hd * eb,
            .rows = g->count * group, .cols = hd, .ldy = 1 });
        v.out_type = m->dt;
        exec_vec(m, v); /* the queries are done with: their buffer takes the output */
        exec_copy(m, a->attn + ((uint64_t)g->row * qd + (uint64_t)h * group * hd) * eb,
                  a->qg + first_row * hd * eb, g->count, gb, gb, (uint64_t)qd * eb);
    }
}

int exec_attention(struct exec_model *m, uint32_t l, bool sliding, const struct exec_tile *tile)
{
    const struct model_config *c = m->cfg;
    const struct npu_act_layout *a = &m->a;
    const uint32_t d = c->hidden_size, qd = c->num_heads * c->head_dim;
    const uint32_t kvd = c->num_kv_heads * c->head_dim, n = tile->n;
    exec_set_cat(m, EXEC_CAT_ATTN);
    exec_rmsnorm(m, a->xb, tile->xt, exec_weight_addr(m, l, MT_ATTN_NORM), n, d);
    int rc = exec_wgemm(m, NPU_GEMM_QKV, a->q, a->xb, n, l, MT_WQ, 0, qd, d);
    if (rc == NPU_OK)
        rc = exec_wgemm(m, NPU_GEMM_QKV, a->knew, a->xb, n, l, MT_WK, 0, kvd, d);
    if (rc == NPU_OK)
        rc = exec_wgemm(m, NPU_GEMM_QKV, a->vnew, a->xb, n, l, MT_WV, 0, kvd, d);
    if (rc == NPU_OK)
        rc = exec_flush(m); /* the positions buffer is rewritten next */
    if (rc != NPU_OK)
        return rc;
    rotate_and_store(m, l, tile);
    for (uint32_t s = 0; s < tile->nsegs; s++)
        attend(m, l, sliding, &tile->segs[s]);
    rc = exec_wgemm(m, NPU_GEMM_O, a->xb2, a->attn, n, l, MT_WO, 0, d, qd);
    if (rc == NPU_OK)
        exec_add_rows(m, tile->xt, a->xb2, n, d);
    return rc;
}

bool exec_ffn_paired(const struct exec_model *m, bool expert)
{
    const enum npu_gemm up = expert ? NPU_GEMM_EXP_UP : NPU_GEMM_FFN_UP;
    const enum npu_gemm down = expert ? NPU_GEMM_EXP_DOWN : NPU_GEMM_FFN_DOWN;
    if (expert && m->plan->partition[up] == NPU_PART_EP) /* whole experts, local rows */
        return true;
    return m->tp > 1 && m->plan->partition[up] == NPU_PART_MN &&
           m->plan->partition[down] == NPU_PART_K;
}

/* out[n][d] = W_down (silu(W_gate x) * (W_up x)), width ff; expert block e (0 if dense). */
int exec_swiglu(struct exec_model *m, uint32_t l, uint64_t out, uint64_t x, uint32_t n,
                bool expert, uint32_t e, uint32_t ff, bool partial)
{
    const uint32_t d = m->cfg->hidden_size;
    const enum npu_gemm up = expert ? NPU_GEMM_EXP_UP : NPU_GEMM_FFN_UP;
    const enum npu_gemm down = expert ? NPU_GEMM_EXP_DOWN : NPU_GEMM_FFN_DOWN;
    const enum model_tensor_kind kg = expert ? MT_E_GATE : MT_W_GATE;
    const enum model_tensor_kind ku = expert ? MT_E_UP : MT_W_UP;
    const enum model_tensor_kind kd = expert ? MT_E_DOWN : MT_W_DOWN;
    if (exec_ffn_paired(m, expert)) { /* hb[n][fs]: this rank's columns of the hidden
                                           (EP: all ff of a whole expert) */
        const uint32_t fs = m->t[l][kg]->rows;
        exec_wgemm_local(m, up, m->a.hb, x, n, l, kg, e, fs, d);
        exec_wgemm_local(m, up, m->a.hb2, x, n, l, ku, e, fs, d);
        exec_vec(m, act(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_SWIGLU, .x = m->a.hb,
                                                    .y = m->a.hb2, .out = m->a.hb, .rows = n,
                                                    .cols = fs }));
        exec_wgemm_local(m, down, out, m->a.hb, n, l, kd, e, d, fs); /* partial [n][d] */
        return partial ? NPU_OK : exec_allreduce(m, out, (uint64_t)n * d);
    }
    int rc = exec_wgemm(m, up, m->a.hb, x, n, l, kg, e, ff, d);
    if (rc == NPU_OK)
        rc = exec_wgemm(m, up, m->a.hb2, x, n, l, ku, e, ff, d);
    if (rc != NPU_OK)
        return rc;
    exec_vec(m, act(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_SWIGLU, .x = m->a.hb,
                                                .y = m->a.hb2, .out = m->a.hb, .rows = n,
                                                .cols = ff }));
    return exec_wgemm(m, down, out, m->a.hb, n, l, kd, e, d, ff);
}

int exec_ffn(struct exec_model *m, uint32_t l, const struct exec_tile *tile)
{
    const uint32_t d = m->cfg->hidden_size;
    exec_set_cat(m, EXEC_CAT_FFN);
    exec_rmsnorm(m, m->a.xb, tile->xt, exec_weight_addr(m, l, MT_FFN_NORM), tile->n, d);
    int rc = exec_swiglu(m, l, m->a.xb2, m->a.xb, tile->n, false, 0, m->cfg->intermediate_size,
                         false);
    if (rc == NPU_OK)
        exec_add_rows(m, tile->xt, m->a.xb2, tile->n, d);
    return rc;
}
