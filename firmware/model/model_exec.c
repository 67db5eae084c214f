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
 * A weight GEMM y[N] = W[N][K] x[K] with W (this rank's share) at w: the whole GEMM on one
 * core; else the share, then the chain runs and the collective completes y on every rank.
 */
static int wgemm(struct exec_model *m, uint64_t y, uint64_t x, uint64_t w, uint32_t n,
                 uint32_t k)
{
    const struct exec_tp *tp = &m->tp;
    uint32_t lo, hi;
    if (tp->partition == EXEC_SINGLE) {
        gemm(m, y, x, w, 1, n, k, k, k, n, true);
        return NPU_OK;
    }
    struct noc_coll_args a = { .buf = y, .count = n, .dtype = NPU_DTYPE_FP32 };
    if (tp->partition == EXEC_MN) {
        exec_compute_share(tp, n, &lo, &hi); /* rows lo..hi of W: y[lo..hi) */
        gemm(m, y + (uint64_t)lo * 4, x, w, 1, hi - lo, k, k, k, hi - lo, true);
        int rc = chain_run(m);
        return rc != NPU_OK ? rc : noc_allgather(tp->comm, &a);
    }
    exec_compute_share(tp, k, &lo, &hi); /* columns lo..hi of W: a partial y */
    gemm(m, y, x + (uint64_t)lo * 4, w, 1, n, hi - lo, hi - lo, hi - lo, n, true);
    int rc = chain_run(m);
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

/* Scores, softmax and weighted values of every head at position pos: q -> attn. */
static void heads(struct exec_model *m, uint32_t l, uint32_t pos)
{
    const struct model_config *c = m->cfg;
    const uint32_t hd = c->head_dim, kvd = c->num_kv_heads * hd;
    const uint32_t group = c->num_heads / c->num_kv_heads;
    const uint64_t kc = m->kcache + ((uint64_t)l * m->max_seq) * kvd * 4;
    const uint64_t vc = m->vcache + ((uint64_t)l * m->max_seq) * kvd * 4;
    /* Causal; a sliding layer sees the last sliding_window positions (this one included). */
    const uint32_t first = model_is_sliding_layer(c, l) && pos + 1 > c->sliding_window
                               ? pos + 1 - c->sliding_window : 0;
    const uint32_t n = pos + 1 - first;
    const uint64_t k0 = kc + (uint64_t)first * kvd * 4, v0 = vc + (uint64_t)first * kvd * 4;
    for (uint32_t g = 0; g < c->num_kv_heads; g++) {
        uint64_t qg = m->q + (uint64_t)g * group * hd * 4;
        uint64_t og = m->attn + (uint64_t)g * group * hd * 4;
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

/* Attention of one layer at position pos: xb (normed [d]) -> xb2 ([d]). */
static int attention(struct exec_model *m, uint32_t l, uint32_t pos)
{
    const struct model_config *c = m->cfg;
    const struct exec_layer *w = &m->layers[l];
    const uint32_t d = c->hidden_size, hd = c->head_dim, nh = c->num_heads;
    const uint32_t kvd = c->num_kv_heads * hd;
    const uint64_t row = ((uint64_t)l * m->max_seq + pos) * kvd * 4; /* this position */
    const uint64_t k = m->kcache + row, v = m->vcache + row;
    int rc = wgemm(m, m->q, m->xb, w->wq, nh * hd, d); /* q[nh * hd] */
    if (rc == NPU_OK)
        rc = wgemm(m, k, m->xb, w->wk, kvd, d);         /* k[kvd], into the cache */
    if (rc == NPU_OK)
        rc = wgemm(m, v, m->xb, w->wv, kvd, d);         /* v[kvd], into the cache */
    if (rc != NPU_OK)
        return rc;
    if (c->qk_norm) { /* per head: rows of hd */
        vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_RMSNORM, .x = m->q, .y = w->q_norm,
                                        .out = m->q, .rows = nh, .cols = hd, .ldy = hd,
                                        .scalar = (float)c->rms_norm_eps });
        vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_RMSNORM, .x = k, .y = w->k_norm,
                                        .out = k, .rows = c->num_kv_heads, .cols = hd,
                                        .ldy = hd, .scalar = (float)c->rms_norm_eps });
    }
    vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_ROPE, .x = m->q, .out = m->q, .rows = nh,
                                    .cols = hd, .k = nh, .pos = pos, .rope_half = true,
                                    .scalar = (float)c->rope_theta });
    vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_ROPE, .x = k, .out = k,
                                    .rows = c->num_kv_heads, .cols = hd, .k = c->num_kv_heads,
                                    .pos = pos, .rope_half = true,
                                    .scalar = (float)c->rope_theta });
    heads(m, l, pos);
    return wgemm(m, m->xb2, m->attn, w->wo, d, nh * hd); /* [d] */
}

/* SwiGLU: out[d] = W_down (silu(W_gate xb) * (W_up xb)), hidden width ff. */
static int swiglu(struct exec_model *m, uint64_t out, uint64_t gate, uint64_t up,
                  uint64_t down, uint32_t ff)
{
    const uint32_t d = m->cfg->hidden_size;
    int rc = wgemm(m, m->hb, m->xb, gate, ff, d);   /* gate[ff] */
    if (rc == NPU_OK)
        rc = wgemm(m, m->hb2, m->xb, up, ff, d);    /* up[ff] */
    if (rc != NPU_OK)
        return rc;
    vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_SWIGLU, .x = m->hb, .y = m->hb2,
                                    .out = m->hb, .rows = 1, .cols = ff });
    return wgemm(m, out, m->hb, down, d, ff);       /* [d] */
}

/*
 * MoE layer l: xb (normed [d]) -> xb2 ([d]). The router's top-k decides which experts run,
 * so the chain is cut there: the hart reads the k experts and weights (renormalised as the
 * reference does), then chains each expert and its weighted sum into xb2, in top-k order.
 */
static int moe(struct exec_model *m, uint32_t l)
{
    const struct model_config *c = m->cfg;
    const struct exec_layer *w = &m->layers[l];
    const uint32_t d = c->hidden_size, mff = c->moe_intermediate_size, k = c->experts_per_token;
    gemm(m, m->probs, m->xb, w->router, 1, c->num_experts, d, d, d, c->num_experts, true);
    vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_SOFTMAX, .x = m->probs, .out = m->probs,
                                    .rows = 1, .cols = c->num_experts });
    vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_TOPK, .x = m->probs,
                                    .out = m->topk_val, .aux = m->topk_idx, .rows = 1,
                                    .cols = c->num_experts, .k = k, .ldout = k, .ldaux = k });
    int rc = chain_run(m);
    if (rc != NPU_OK)
        return rc;
    const float *val = (const float *)(uintptr_t)m->topk_val;
    const uint32_t *idx = (const uint32_t *)(uintptr_t)m->topk_idx;
    double norm = 0.0;
    for (uint32_t j = 0; j < k; j++)
        norm += val[j];
    for (uint32_t j = 0; j < k; j++) {
        const uint64_t e = idx[j];
        float weight = c->norm_topk_prob ? (float)(val[j] / norm) : val[j];
        rc = swiglu(m, m->moe_out, w->e_gate + e * w->e_up_stride,
                    w->e_up + e * w->e_up_stride, w->e_down + e * w->e_down_stride, mff);
        if (rc != NPU_OK)
            return rc;
        /* xb2 = w0 * out0, then xb2 += w_j * out_j, as the reference sums */
        vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_SCALE, .x = m->moe_out,
                                        .out = j ? m->moe_out : m->xb2, .rows = 1, .cols = d,
                                        .scalar = weight });
        if (j)
            vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_ADD, .x = m->xb2,
                                            .y = m->moe_out, .out = m->xb2, .rows = 1,
                                            .cols = d });
        m->expert_tokens[(uint64_t)l * c->num_experts + e]++;
    }
    return NPU_OK;
}

int exec_run_token(struct exec_model *m, uint32_t token, uint32_t pos)
{
    const struct model_config *c = m->cfg;
    const uint32_t d = c->hidden_size;
    const float eps = (float)c->rms_norm_eps;
    assert(pos < m->max_seq);
    nchain = 0;
    copy(m, m->x, m->embed + (uint64_t)token * d * 4, d * 4); /* x = embed[token] */
    for (uint32_t l = 0; l < c->num_layers; l++) {
        const struct exec_layer *w = &m->layers[l];
        vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_RMSNORM, .x = m->x,
                                        .y = w->attn_norm, .out = m->xb, .rows = 1, .cols = d,
                                        .scalar = eps });
        int rc = attention(m, l, pos);
        if (rc != NPU_OK)
            return rc;
        vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_ADD, .x = m->x, .y = m->xb2,
                                        .out = m->x, .rows = 1, .cols = d });
        vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_RMSNORM, .x = m->x,
                                        .y = w->ffn_norm, .out = m->xb, .rows = 1, .cols = d,
                                        .scalar = eps });
        rc = c->arch == MODEL_MOE
                 ? moe(m, l)
                 : swiglu(m, m->xb2, w->w_gate, w->w_up, w->w_down, c->intermediate_size);
        if (rc != NPU_OK)
            return rc;
        vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_ADD, .x = m->x, .y = m->xb2,
                                        .out = m->x, .rows = 1, .cols = d });
    }
    vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_RMSNORM, .x = m->x, .y = m->final_norm,
                                    .out = m->xb, .rows = 1, .cols = d, .scalar = eps });
    int rc = wgemm(m, m->logits, m->xb, m->lm_head, c->vocab_size, d); /* logits[V] */
    if (rc != NPU_OK)
        return rc;
    vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_ARGMAX, .x = m->logits,
                                    .aux = m->argmax, .rows = 1, .cols = c->vocab_size });
    rc = chain_run(m);
    return rc != NPU_OK ? rc : (int)*(volatile uint32_t *)(uintptr_t)m->argmax;
}
