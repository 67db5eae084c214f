/* SPDX-License-Identifier: MIT */
/*
 * The ops of one layer on one tile of rows (model_exec.h) other than attention
 * (model_attn.c): RMSNorm, residual adds, the SwiGLU FFN (dense or one expert). Shapes:
 * n = tile rows, d = hidden size, ff = the FFN's width.
 */
#include <assert.h>

#include "model_exec.h"
#include "npu/hal.h"
#include "npu/vector.h"

/* A vector op on operands of the activations' type. */
static void layer_vec_act(struct exec_model *m, struct vector_op_args v)
{
    exec_vec(m, exec_vec_act(m, v));
}

/* x [n][d] -> out [n][d], RMSNorm with weight w [d]. */
void exec_rmsnorm(struct exec_model *m, uint64_t out, uint64_t x, uint64_t w, uint32_t n,
                  uint32_t d)
{
    layer_vec_act(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_RMSNORM, .x = x, .y = w,
                                              .out = out, .rows = n, .cols = d, .ldy = d,
                                              .scalar = (float)m->cfg->rms_norm_eps });
}

void exec_add_rows(struct exec_model *m, uint64_t xt, uint64_t y, uint32_t n, uint32_t d)
{
    layer_vec_act(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_ADD, .x = xt, .y = y,
                                              .out = xt, .rows = n, .cols = d });
}

bool exec_ffn_paired(const struct exec_model *m, bool expert)
{
    return npu_ffn_paired(m->plan, expert); /* the layout's rule (npu_layout.c) */
}

/* Whether the paired dense FFN's gate and up shares lie one after the other in SRAM (as
   q, k and v do): then they run as one GEMM of twice the width, hb[n][2 fs] = x[n][d]
   (W_gate,r | W_up,r)^T. Qwen3-8B at tp 64 has shares of 192 rows: two GEMMs took two
   folds of the 128-wide array per 128 columns of K each (half of the second one empty),
   one takes three. */
static bool ffn_up_fusable(struct exec_model *m, uint32_t l)
{
    const struct npu_image_tensor *tg = m->w.t[l][MT_W_GATE], *tu = m->w.t[l][MT_W_UP];
    const uint64_t wg = exec_share_addr(m, tg, l, MT_W_GATE, 0);
    const uint64_t wu = exec_share_addr(m, tu, l, MT_W_UP, 0), fs = tg->rows;
    return wg && wu && tu->rows == fs && tu->cols == tg->cols && tu->col0 == tg->col0 &&
           wu == wg + fs * tg->cols * m->buf.eb;
}

/* The paired FFN's first half: the gate and up of rows x (this rank's fs columns each)
   into hb (fused: hb[n][2 fs]) or hb and hb2; expert block e (0 if dense). */
static void ffn_gate_up(struct exec_model *m, uint32_t l, uint64_t x, uint32_t n, bool expert,
                        uint32_t e)
{
    const uint32_t d = m->cfg->hidden_size;
    const enum npu_gemm up = expert ? NPU_GEMM_EXP_UP : NPU_GEMM_FFN_UP;
    const enum model_tensor_kind kg = expert ? MT_E_GATE : MT_W_GATE;
    const enum model_tensor_kind ku = expert ? MT_E_UP : MT_W_UP;
    const uint32_t fs = m->w.t[l][kg]->rows;
    if (!expert && ffn_up_fusable(m, l)) {
        const struct npu_image_tensor *tg = m->w.t[l][MT_W_GATE];
        exec_gemm(m, m->buf.a.hb, x, exec_share_addr(m, tg, l, MT_W_GATE, 0), n, 2 * fs,
                  tg->cols, d, tg->cols, 2 * fs, true, false, false);
        return;
    }
    exec_wgemm_local(m, up, m->buf.a.hb, x, n, l, kg, e, fs, d);
    exec_wgemm_local(m, up, m->buf.a.hb2, x, n, l, ku, e, fs, d);
}

/* Its second half: SwiGLU of the gate and up into the hidden, then out[n][d], this rank's
   partial sum of hidden W_down,r^T. */
static void ffn_down(struct exec_model *m, uint32_t l, uint64_t out, uint32_t n, bool expert,
                     uint32_t e)
{
    const uint32_t d = m->cfg->hidden_size;
    const enum npu_gemm down = expert ? NPU_GEMM_EXP_DOWN : NPU_GEMM_FFN_DOWN;
    const enum model_tensor_kind kd = expert ? MT_E_DOWN : MT_W_DOWN;
    const uint32_t fs = m->w.t[l][expert ? MT_E_GATE : MT_W_GATE]->rows;
    const struct npu_act_layout *a = &m->buf.a;
    const bool fused = !expert && ffn_up_fusable(m, l); /* the hidden into hb2 */
    const uint64_t eb = m->buf.eb, hidden = fused ? a->hb2 : a->hb;
    layer_vec_act(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_SWIGLU, .x = a->hb,
                                              .y = fused ? a->hb + fs * eb : a->hb2,
                                              .out = hidden, .rows = n, .cols = fs,
                                              .ldx = fused ? 2 * fs : 0,
                                              .ldy = fused ? 2 * fs : 0 });
    exec_wgemm_local(m, down, out, hidden, n, l, kd, e, d, fs);
}

/* out[n][d] = W_down (silu(W_gate x) * (W_up x)), width ff; expert block e (0 if dense). */
int exec_swiglu(struct exec_model *m, uint32_t l, uint64_t out, uint64_t x, uint32_t n,
                bool expert, uint32_t e, uint32_t ff, bool partial)
{
    const uint32_t d = m->cfg->hidden_size;
    const enum npu_gemm up = expert ? NPU_GEMM_EXP_UP : NPU_GEMM_FFN_UP;
    const enum npu_gemm down = expert ? NPU_GEMM_EXP_DOWN : NPU_GEMM_FFN_DOWN;
    if (exec_ffn_paired(m, expert)) { /* hb[n][fs]: this rank's columns of the hidden
                                           (EP: all ff of a whole expert) */
        ffn_gate_up(m, l, x, n, expert, e);
        ffn_down(m, l, out, n, expert, e); /* partial [n][d] */
        return partial ? NPU_OK : exec_allreduce(m, out, (uint64_t)n * d, m->buf.dt);
    }
    int rc = exec_wgemm(m, up, m->buf.a.hb, x, n, l, expert ? MT_E_GATE : MT_W_GATE, e, ff, d);
    if (rc == NPU_OK)
        rc = exec_wgemm(m, up, m->buf.a.hb2, x, n, l, expert ? MT_E_UP : MT_W_UP, e, ff, d);
    if (rc != NPU_OK)
        return rc;
    layer_vec_act(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_SWIGLU, .x = m->buf.a.hb,
                                              .y = m->buf.a.hb2, .out = m->buf.a.hb, .rows = n,
                                              .cols = ff });
    return exec_wgemm(m, down, out, m->buf.a.hb, n, l, expert ? MT_E_DOWN : MT_W_DOWN, e, d,
                      ff);
}

bool exec_ffn_pipelined(const struct exec_model *m)
{
    return m->tp > 1 && exec_ffn_paired(m, false);
}

void exec_ffn_begin(struct exec_model *m, uint32_t l, const struct exec_tile *tile)
{
    exec_set_cat(m, EXEC_CAT_FFN);
    exec_rmsnorm(m, m->buf.a.xb, tile->xt, exec_weight_addr(m, l, MT_FFN_NORM), tile->n,
                 m->cfg->hidden_size);
    ffn_gate_up(m, l, m->buf.a.xb, tile->n, false, 0);
}

void exec_ffn_middle(struct exec_model *m, uint32_t l, const struct exec_tile *tile)
{
    exec_set_cat(m, EXEC_CAT_FFN);
    ffn_down(m, l, m->buf.a.xb2, tile->n, false, 0);
}

int exec_ffn_end(struct exec_model *m, uint32_t l, const struct exec_tile *tile)
{
    (void)l;
    const uint32_t d = m->cfg->hidden_size;
    int rc = exec_allreduce_after(m, m->buf.a.xb2, (uint64_t)tile->n * d, m->buf.dt);
    exec_set_cat(m, EXEC_CAT_FFN);
    if (rc == NPU_OK)
        exec_add_rows(m, tile->xt, m->buf.a.xb2, tile->n, d);
    return rc;
}

int exec_ffn(struct exec_model *m, uint32_t l, const struct exec_tile *tile)
{
    exec_attention_kept_drop(); /* its collectives' peers' writes declare no local range */
    const uint32_t d = m->cfg->hidden_size;
    exec_set_cat(m, EXEC_CAT_FFN);
    exec_rmsnorm(m, m->buf.a.xb, tile->xt, exec_weight_addr(m, l, MT_FFN_NORM), tile->n, d);
    int rc = exec_swiglu(m, l, m->buf.a.xb2, m->buf.a.xb, tile->n, false, 0,
                         m->cfg->intermediate_size, false);
    if (rc == NPU_OK)
        exec_add_rows(m, tile->xt, m->buf.a.xb2, tile->n, d);
    return rc;
}
