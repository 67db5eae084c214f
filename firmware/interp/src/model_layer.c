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

/* The paired FFN's gate and up shares as one GEMM where they lie one after the other in
   SRAM (as q, k and v do): hb[n][2 fs] = x[n][d] (W_gate,r | W_up,r)^T, then SwiGLU of its
   halves into hb2[n][fs]. Qwen3-8B at tp 64 has shares of 192 rows: two GEMMs took two
   folds of the 128-wide array per 128 columns of K each (half of the second one empty),
   one takes three. False (nothing issued) where the shares are not adjacent. */
static bool ffn_up_fused(struct exec_model *m, uint32_t l, uint64_t x, uint32_t n)
{
    const struct npu_image_tensor *tg = m->w.t[l][MT_W_GATE], *tu = m->w.t[l][MT_W_UP];
    const uint64_t eb = m->buf.eb, wg = exec_share_addr(m, tg, l, MT_W_GATE, 0);
    const uint64_t wu = exec_share_addr(m, tu, l, MT_W_UP, 0), fs = tg->rows;
    if (!wg || !wu || tu->rows != fs || tu->cols != tg->cols || tu->col0 != tg->col0 ||
        wu != wg + fs * tg->cols * eb)
        return false;
    const struct npu_act_layout *a = &m->buf.a;
    exec_gemm(m, a->hb, x, wg, n, (uint32_t)(2 * fs), tg->cols, m->cfg->hidden_size,
              tg->cols, (uint32_t)(2 * fs), true, false, false);
    layer_vec_act(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_SWIGLU, .x = a->hb,
                                              .y = a->hb + fs * eb, .out = a->hb2, .rows = n,
                                              .cols = (uint32_t)fs, .ldx = (uint32_t)(2 * fs),
                                              .ldy = (uint32_t)(2 * fs) });
    return true;
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
        const uint32_t fs = m->w.t[l][kg]->rows;
        if (!expert && ffn_up_fused(m, l, x, n)) { /* the hidden in hb2 */
            exec_wgemm_local(m, down, out, m->buf.a.hb2, n, l, kd, e, d, fs);
            return partial ? NPU_OK : exec_allreduce(m, out, (uint64_t)n * d, m->buf.dt);
        }
        exec_wgemm_local(m, up, m->buf.a.hb, x, n, l, kg, e, fs, d);
        exec_wgemm_local(m, up, m->buf.a.hb2, x, n, l, ku, e, fs, d);
        layer_vec_act(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_SWIGLU, .x = m->buf.a.hb,
                                                  .y = m->buf.a.hb2, .out = m->buf.a.hb, .rows = n,
                                                  .cols = fs });
        exec_wgemm_local(m, down, out, m->buf.a.hb, n, l, kd, e, d, fs); /* partial [n][d] */
        return partial ? NPU_OK : exec_allreduce(m, out, (uint64_t)n * d, m->buf.dt);
    }
    int rc = exec_wgemm(m, up, m->buf.a.hb, x, n, l, kg, e, ff, d);
    if (rc == NPU_OK)
        rc = exec_wgemm(m, up, m->buf.a.hb2, x, n, l, ku, e, ff, d);
    if (rc != NPU_OK)
        return rc;
    layer_vec_act(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_SWIGLU, .x = m->buf.a.hb,
                                              .y = m->buf.a.hb2, .out = m->buf.a.hb, .rows = n,
                                              .cols = ff });
    return exec_wgemm(m, down, out, m->buf.a.hb, n, l, kd, e, d, ff);
}

int exec_ffn(struct exec_model *m, uint32_t l, const struct exec_tile *tile)
{
    const uint32_t d = m->cfg->hidden_size;
    exec_set_cat(m, EXEC_CAT_FFN);
    exec_rmsnorm(m, m->buf.a.xb, tile->xt, exec_weight_addr(m, l, MT_FFN_NORM), tile->n, d);
    int rc = exec_swiglu(m, l, m->buf.a.xb2, m->buf.a.xb, tile->n, false, 0,
                         m->cfg->intermediate_size, false);
    if (rc == NPU_OK)
        exec_add_rows(m, tile->xt, m->buf.a.xb2, tile->n, d);
    return rc;
}
