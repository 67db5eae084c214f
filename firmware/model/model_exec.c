/* SPDX-License-Identifier: MIT */
/* One token's forward pass as a descriptor chain (model_exec.h). */
#include "model_exec.h"

#include <assert.h>
#include <math.h>

#include "npu/dma.h"
#include "npu/hal.h"
#include "npu/matrix.h"
#include "npu/vector.h"
#include "npu/wait.h"

#define SEM_STEP 1u
#define CHAIN_MAX 256u

static struct npu_desc chain[CHAIN_MAX];
static uint32_t nchain;

/* The sync of the next descriptor: start after the previous one, count itself when done. */
static struct engine_sync next_sync(struct exec_model *m)
{
    uint32_t index = m->steps + nchain;
    return (struct engine_sync){
        .wait = index > 0, .wait_sem = SEM_STEP, .wait_value = index,
        .signal = true, .signal_core = (uint16_t)hal_self()->core_id, .signal_sem = SEM_STEP,
        .signal_value = 1,
    };
}

static int chain_run(struct exec_model *m);

/* The next descriptor of the chain; a full chain is run first (its order is kept). */
static struct npu_desc *push(struct exec_model *m)
{
    if (nchain == CHAIN_MAX) {
        int rc = chain_run(m);
        assert(rc == NPU_OK && "the engines refused a model chain");
        (void)rc;
    }
    return &chain[nchain++];
}

/* C[m x n] = A[m x k] B, B stored [n][k] (a weight [out][in]) when trans_b, else [k][n]. */
static void gemm(struct exec_model *m, uint64_t c, uint64_t a, uint64_t b, uint32_t rows,
                 uint32_t n, uint32_t k, uint32_t lda, uint32_t ldb, uint32_t ldc,
                 bool trans_b)
{
    struct matrix_gemm_desc_args g = {
        .op = NPU_MATRIX_OP_GEMM_F32, .a = a, .b = b, .c = c, .m = rows, .n = n, .k = k,
        .lda = lda, .ldb = ldb, .ldc = ldc, .trans_b = trans_b, .sync = next_sync(m),
    };
    matrix_gemm_desc(push(m), &g);
}

void exec_compute_share(const struct exec_tp *tp, uint32_t n, uint32_t *lo, uint32_t *hi)
{
    uint32_t p = tp->partition == EXEC_SINGLE ? 1 : tp->size, r = p == 1 ? 0 : tp->rank;
    *lo = (uint32_t)((uint64_t)n * r / p);
    *hi = (uint32_t)((uint64_t)n * (r + 1) / p);
}

/* Submits the chain built so far and waits for it. */
static int chain_run(struct exec_model *m)
{
    int rc = engine_submit(chain, nchain);
    if (rc != NPU_OK)
        return rc;
    m->steps += nchain;
    nchain = 0;
    return hal_sem_wait(SEM_STEP, m->steps);
}

/*
 * A weight GEMM Y[B][N] = X[B][K] W^T with W (this rank's share) at w: the whole GEMM on one
 * core; else the share, then the chain runs and collectives complete Y on every rank (MN:
 * one all-gather per row, whose shares are column slices; K: one all-reduce of all of Y).
 */
static int wgemm(struct exec_model *m, uint64_t y, uint64_t x, uint64_t w, uint32_t b,
                 uint32_t n, uint32_t k)
{
    const struct exec_tp *tp = &m->tp;
    uint32_t lo, hi;
    if (tp->partition == EXEC_SINGLE) {
        gemm(m, y, x, w, b, n, k, k, k, n, true);
        return NPU_OK;
    }
    if (tp->partition == EXEC_MN) {
        exec_compute_share(tp, n, &lo, &hi); /* rows lo..hi of W: columns lo..hi of Y */
        gemm(m, y + (uint64_t)lo * 4, x, w, b, hi - lo, k, k, k, n, true);
        int rc = chain_run(m);
        for (uint32_t r = 0; rc == NPU_OK && r < b; r++) {
            struct noc_coll_args a = { .buf = y + (uint64_t)r * n * 4, .count = n,
                                       .dtype = NPU_DTYPE_FP32 };
            rc = noc_allgather(tp->comm, &a);
        }
        return rc;
    }
    exec_compute_share(tp, k, &lo, &hi); /* columns lo..hi of W: a partial Y */
    gemm(m, y, x + (uint64_t)lo * 4, w, b, n, hi - lo, k, hi - lo, n, true);
    int rc = chain_run(m);
    struct noc_coll_args a = { .buf = y, .count = (uint64_t)b * n, .dtype = NPU_DTYPE_FP32 };
    return rc != NPU_OK ? rc : noc_allreduce(tp->comm, &a);
}

/* A vector op on fp32 rows x cols (row stride = cols unless ld given). */
static void vec(struct exec_model *m, struct vector_op_args v)
{
    v.x_type = v.y_type = v.out_type = NPU_DTYPE_FP32;
    if (!v.ldx)
        v.ldx = v.cols;
    if (v.y && !v.ldy)
        v.ldy = v.cols;
    if (v.out && !v.ldout)
        v.ldout = v.cols;
    v.sync = next_sync(m);
    vector_op_desc(push(m), &v);
}

/* Copies bytes within this core's SRAM (the DMA engine). */
static void copy(struct exec_model *m, uint64_t dst, uint64_t src, uint32_t bytes)
{
    struct dma_copy_args a = { .src = src, .dst = dst, .rows = 1, .row_bytes = bytes,
                               .src_stride = bytes, .dst_stride = bytes,
                               .sync = next_sync(m) };
    dma_copy_desc(push(m), &a);
}

/* KV cache of request req, layer l: its first position's row. */
static uint64_t cache_at(const struct exec_model *m, uint64_t base, uint32_t req, uint32_t l,
                         uint32_t pos)
{
    const uint64_t kvd = (uint64_t)m->cfg->num_kv_heads * m->cfg->head_dim;
    return base + (((uint64_t)req * m->cfg->num_layers + l) * m->max_seq + pos) * kvd * 4;
}

/* Scores, softmax and weighted values of every head of row r: q[r] -> attn[r]. */
static void heads(struct exec_model *m, uint32_t l, uint32_t r, const struct exec_row *row)
{
    const struct model_config *c = m->cfg;
    const uint32_t hd = c->head_dim, kvd = c->num_kv_heads * hd, qd = c->num_heads * hd;
    const uint32_t group = c->num_heads / c->num_kv_heads, pos = row->pos;
    /* Causal; a sliding layer sees the last sliding_window positions (this one included). */
    const uint32_t first = model_is_sliding_layer(c, l) && pos + 1 > c->sliding_window
                               ? pos + 1 - c->sliding_window : 0;
    const uint32_t n = pos + 1 - first;
    const uint64_t k0 = cache_at(m, m->kcache, row->req, l, first);
    const uint64_t v0 = cache_at(m, m->vcache, row->req, l, first);
    for (uint32_t g = 0; g < c->num_kv_heads; g++) {
        uint64_t qg = m->q + ((uint64_t)r * qd + (uint64_t)g * group * hd) * 4;
        uint64_t og = m->attn + ((uint64_t)r * qd + (uint64_t)g * group * hd) * 4;
        /* scores[group][n] = Q_g[group][hd] K_g^T (K rows of this head, kvd apart) */
        gemm(m, m->scores, qg, k0 + (uint64_t)g * hd * 4, group, n, hd, hd, kvd, n, true);
        vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_SCALE, .x = m->scores,
                                        .out = m->scores, .rows = group, .cols = n,
                                        .scalar = 1.0f / sqrtf((float)hd) });
        vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_SOFTMAX, .x = m->scores,
                                        .out = m->scores, .rows = group, .cols = n });
        /* out_g[group][hd] = P[group][n] V_g[n][hd] */
        gemm(m, og, m->scores, v0 + (uint64_t)g * hd * 4, group, hd, n, n, kvd, hd, false);
    }
}

/* q/k norms and RoPE of the step's rows, then each row's keys and values into its cache. */
static void rotate_and_store(struct exec_model *m, uint32_t l, const struct exec_row *rows,
                             uint32_t b)
{
    const struct model_config *c = m->cfg;
    const struct exec_layer *w = &m->layers[l];
    const uint32_t hd = c->head_dim, nh = c->num_heads, nkv = c->num_kv_heads;
    const float eps = (float)c->rms_norm_eps;
    if (c->qk_norm) { /* per head: rows of hd */
        vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_RMSNORM, .x = m->q, .y = w->q_norm,
                                        .out = m->q, .rows = b * nh, .cols = hd, .ldy = hd,
                                        .scalar = eps });
        vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_RMSNORM, .x = m->knew,
                                        .y = w->k_norm, .out = m->knew, .rows = b * nkv,
                                        .cols = hd, .ldy = hd, .scalar = eps });
    }
    /* Row r's heads at positions[r]: rows_per_pos = the heads of one row. */
    vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_ROPE, .x = m->q, .y = m->positions,
                                    .out = m->q, .rows = b * nh, .cols = hd, .k = nh,
                                    .rope_half = true, .scalar = (float)c->rope_theta });
    vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_ROPE, .x = m->knew, .y = m->positions,
                                    .out = m->knew, .rows = b * nkv, .cols = hd, .k = nkv,
                                    .rope_half = true, .scalar = (float)c->rope_theta });
    const uint32_t kvb = nkv * hd * 4;
    for (uint32_t r = 0; r < b; r++) {
        copy(m, cache_at(m, m->kcache, rows[r].req, l, rows[r].pos), m->knew + r * kvb, kvb);
        copy(m, cache_at(m, m->vcache, rows[r].req, l, rows[r].pos), m->vnew + r * kvb, kvb);
    }
}

/* Attention of one layer for the step's rows: xb (normed [B][d]) -> xb2 ([B][d]). */
static int attention(struct exec_model *m, uint32_t l, const struct exec_row *rows, uint32_t b)
{
    const struct model_config *c = m->cfg;
    const struct exec_layer *w = &m->layers[l];
    const uint32_t d = c->hidden_size, qd = c->num_heads * c->head_dim;
    const uint32_t kvd = c->num_kv_heads * c->head_dim;
    int rc = wgemm(m, m->q, m->xb, w->wq, b, qd, d);        /* q[B][qd] */
    if (rc == NPU_OK)
        rc = wgemm(m, m->knew, m->xb, w->wk, b, kvd, d);   /* k[B][kvd] */
    if (rc == NPU_OK)
        rc = wgemm(m, m->vnew, m->xb, w->wv, b, kvd, d);   /* v[B][kvd] */
    if (rc != NPU_OK)
        return rc;
    rotate_and_store(m, l, rows, b);
    for (uint32_t r = 0; r < b; r++)
        heads(m, l, r, &rows[r]);
    return wgemm(m, m->xb2, m->attn, w->wo, b, d, qd);     /* [B][d] */
}

/* SwiGLU of `b` rows of xb at x: out[b][d] = W_down (silu(W_gate x) * (W_up x)), width ff. */
static int swiglu(struct exec_model *m, uint64_t out, uint64_t x, uint32_t b, uint64_t gate,
                  uint64_t up, uint64_t down, uint32_t ff)
{
    const uint32_t d = m->cfg->hidden_size;
    int rc = wgemm(m, m->hb, x, gate, b, ff, d);    /* gate[b][ff] */
    if (rc == NPU_OK)
        rc = wgemm(m, m->hb2, x, up, b, ff, d);     /* up[b][ff] */
    if (rc != NPU_OK)
        return rc;
    vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_SWIGLU, .x = m->hb, .y = m->hb2,
                                    .out = m->hb, .rows = b, .cols = ff });
    return wgemm(m, out, m->hb, down, b, d, ff);    /* [b][d] */
}

/* Row r's chosen experts, weighted into xb2[r] in top-k order, as the reference sums. */
static int experts(struct exec_model *m, uint32_t l, uint32_t r)
{
    const struct model_config *c = m->cfg;
    const struct exec_layer *w = &m->layers[l];
    const uint32_t d = c->hidden_size, k = c->experts_per_token;
    const float *val = (const float *)(uintptr_t)m->topk_val + (uint64_t)r * k;
    const uint32_t *idx = (const uint32_t *)(uintptr_t)m->topk_idx + (uint64_t)r * k;
    const uint64_t xr = m->xb + (uint64_t)r * d * 4, yr = m->xb2 + (uint64_t)r * d * 4;
    double norm = 0.0;
    for (uint32_t j = 0; j < k; j++)
        norm += val[j];
    for (uint32_t j = 0; j < k; j++) {
        const uint64_t e = idx[j];
        float weight = c->norm_topk_prob ? (float)(val[j] / norm) : val[j];
        int rc = swiglu(m, m->moe_out, xr, 1, w->e_gate + e * w->e_up_stride,
                        w->e_up + e * w->e_up_stride, w->e_down + e * w->e_down_stride,
                        c->moe_intermediate_size);
        if (rc != NPU_OK)
            return rc;
        /* xb2[r] = w0 * out0, then xb2[r] += w_j * out_j */
        vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_SCALE, .x = m->moe_out,
                                        .out = j ? m->moe_out : yr, .rows = 1, .cols = d,
                                        .scalar = weight });
        if (j)
            vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_ADD, .x = yr, .y = m->moe_out,
                                            .out = yr, .rows = 1, .cols = d });
        m->expert_tokens[(uint64_t)l * c->num_experts + e]++;
    }
    return NPU_OK;
}

/*
 * MoE layer l: xb (normed [B][d]) -> xb2 ([B][d]). The router's top-k decides which experts
 * run, so the chain is cut there: the hart reads each row's k experts and weights
 * (renormalised as the reference does), then chains those experts row by row.
 */
static int moe(struct exec_model *m, uint32_t l, uint32_t b)
{
    const struct model_config *c = m->cfg;
    const uint32_t d = c->hidden_size, e = c->num_experts, k = c->experts_per_token;
    gemm(m, m->probs, m->xb, m->layers[l].router, b, e, d, d, d, e, true); /* [B][E] */
    vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_SOFTMAX, .x = m->probs, .out = m->probs,
                                    .rows = b, .cols = e });
    vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_TOPK, .x = m->probs,
                                    .out = m->topk_val, .aux = m->topk_idx, .rows = b,
                                    .cols = e, .k = k, .ldout = k, .ldaux = k });
    int rc = chain_run(m);
    for (uint32_t r = 0; rc == NPU_OK && r < b; r++)
        rc = experts(m, l, r);
    return rc;
}

/* One transformer block for the step's rows, on x ([B][d]). */
static int layer(struct exec_model *m, uint32_t l, const struct exec_row *rows, uint32_t b)
{
    const struct model_config *c = m->cfg;
    const struct exec_layer *w = &m->layers[l];
    const uint32_t d = c->hidden_size;
    const float eps = (float)c->rms_norm_eps;
    vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_RMSNORM, .x = m->x, .y = w->attn_norm,
                                    .out = m->xb, .rows = b, .cols = d, .ldy = d,
                                    .scalar = eps });
    int rc = attention(m, l, rows, b);
    if (rc != NPU_OK)
        return rc;
    vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_ADD, .x = m->x, .y = m->xb2,
                                    .out = m->x, .rows = b, .cols = d });
    vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_RMSNORM, .x = m->x, .y = w->ffn_norm,
                                    .out = m->xb, .rows = b, .cols = d, .ldy = d,
                                    .scalar = eps });
    rc = c->arch == MODEL_MOE
             ? moe(m, l, b)
             : swiglu(m, m->xb2, m->xb, b, w->w_gate, w->w_up, w->w_down,
                      c->intermediate_size);
    if (rc != NPU_OK)
        return rc;
    vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_ADD, .x = m->x, .y = m->xb2,
                                    .out = m->x, .rows = b, .cols = d });
    return NPU_OK;
}

int exec_run_step(struct exec_model *m, const struct exec_row *rows, uint32_t b,
                  uint32_t *out)
{
    const struct model_config *c = m->cfg;
    const uint32_t d = c->hidden_size;
    assert(b >= 1 && b <= m->batch_max);
    uint32_t *positions = (uint32_t *)(uintptr_t)m->positions;
    nchain = 0;
    for (uint32_t r = 0; r < b; r++) {
        assert(rows[r].token < c->vocab_size && rows[r].pos < m->max_seq);
        positions[r] = rows[r].pos;
        copy(m, m->x + (uint64_t)r * d * 4, m->embed + (uint64_t)rows[r].token * d * 4, d * 4);
    }
    for (uint32_t l = 0; l < c->num_layers; l++) {
        int rc = layer(m, l, rows, b);
        if (rc != NPU_OK)
            return rc;
    }
    vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_RMSNORM, .x = m->x, .y = m->final_norm,
                                    .out = m->xb, .rows = b, .cols = d, .ldy = d,
                                    .scalar = (float)c->rms_norm_eps });
    int rc = wgemm(m, m->logits, m->xb, m->lm_head, b, c->vocab_size, d); /* [B][V] */
    if (rc != NPU_OK)
        return rc;
    vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_ARGMAX, .x = m->logits,
                                    .aux = m->argmax, .rows = b, .cols = c->vocab_size,
                                    .ldaux = 1 });
    rc = chain_run(m);
    for (uint32_t r = 0; rc == NPU_OK && r < b; r++)
        out[r] = ((volatile uint32_t *)(uintptr_t)m->argmax)[r];
    return rc;
}
