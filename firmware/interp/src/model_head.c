/* SPDX-License-Identifier: MIT */
/*
 * The final norm, the LM head and the greedy choice of each run's next token
 * (model_exec.h).
 *
 * Vocab-parallel head (npu_lm_head_split: MN over tp > 1 ranks): rank r computes the logits
 * of its vocabulary slice [r V/tp, (r+1) V/tp) only, logits[B][V/tp], takes their argmax
 * (ARGMAX on the vector engine), and the ranks all-gather one (value, index) pair per row,
 * [tp][B][2] x 4 bytes; every rank then keeps the largest value, the lowest index on ties
 * (the ranks' slices ascend, so that is the lowest rank), as ARGMAX over the whole row
 * would. The whole logits, B x V elements (19.4 MB for 64 rows of Qwen3's 151,936), are
 * never gathered nor held. Other partitions complete the logits on every rank first.
 * Not modelled: sampling other than greedy.
 */
#include "model_exec.h"

#include <string.h>

#include "npu/vector.h"
#include "npu_numeric.h"

/* One row's choice as the ranks exchange it. */
struct head_pick {
    float value;
    uint32_t index;
};
_Static_assert(sizeof(struct head_pick) == 8, "two fp32 elements of the all-gather");

/* out[i] (and logit[i] when `logits`) of each run that wants a token, from the argmax
   buffer (the w-th such run's token is its w-th entry) and the value of each: picks[w], or
   (picks NULL) the logits row w at the token. Performance mode: no data, token 0. */
static void read_tokens(const struct exec_model *m, const struct exec_run *runs,
                        uint32_t nruns, bool logits, const struct head_pick *picks,
                        uint32_t *out, float *logit)
{
    const uint32_t V = m->cfg->vocab_size;
    const volatile uint32_t *am = (const volatile uint32_t *)(uintptr_t)m->buf.a.argmax;
    const uint8_t *lg = (const uint8_t *)(uintptr_t)m->buf.a.logits;
    for (uint32_t i = 0, w = 0; i < nruns; i++) {
        if (!runs[i].wants_token)
            continue;
        uint32_t t = m->plan->mode ? 0 : am[w];
        out[i] = t;
        if (m->plan->mode || !logits)
            logit[i] = 0.0f;
        else
            logit[i] = picks ? picks[w].value
                            : num_load(lg, (size_t)w * V + t, m->buf.eb == 4 ? NUM_FP32
                                                                            : NUM_BF16);
        w++;
    }
}

/* Vocab-parallel: this rank's slice's logits, their argmax, and the pick over the ranks
   (the file header); afterwards argmax holds the tokens and picks[0 .. nw) their values. */
static int head_split(struct exec_model *m, uint32_t nw)
{
    const struct npu_image_tensor *t = m->w.lm_head;
    const uint32_t d = m->cfg->hidden_size, vp = t->rows; /* this rank's vocabulary slice */
    exec_wgemm_own(m, m->buf.a.logits, m->buf.a.xb, nw, 0, MT_LM_HEAD, d); /* [nw][vp] */
    exec_vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_ARGMAX, .x = m->buf.a.logits,
                                         .aux = m->buf.a.argmax, .rows = nw, .cols = vp,
                                         .ldaux = 1, .x_type = m->buf.dt });
    int rc = exec_flush(m);
    if (rc != NPU_OK)
        return rc;
    volatile uint32_t *am = (volatile uint32_t *)(uintptr_t)m->buf.a.argmax;
    struct head_pick *pk = (struct head_pick *)(uintptr_t)m->buf.a.lm_picks; /* [tp][nw] */
    const uint8_t *lg = (const uint8_t *)(uintptr_t)m->buf.a.logits;
    for (uint32_t w = 0; w < nw && !m->plan->mode; w++) /* performance mode: no data */
        pk[(uint64_t)m->rank * nw + w] = (struct head_pick){
            .value = num_load(lg, (size_t)w * vp + am[w], m->buf.eb == 4 ? NUM_FP32 : NUM_BF16),
            .index = t->row0 + am[w] };
    rc = exec_allgather(m, m->buf.a.lm_picks, 2ull * m->tp * nw, NPU_DTYPE_FP32);
    for (uint32_t w = 0; rc == NPU_OK && w < nw && !m->plan->mode; w++) {
        struct head_pick best = pk[w];
        for (uint32_t r = 1; r < m->tp; r++) /* strictly larger: ties keep the lower index */
            if (pk[(uint64_t)r * nw + w].value > best.value)
                best = pk[(uint64_t)r * nw + w];
        pk[w] = best; /* row w's entries are read: its rank-0 entry takes the pick */
        am[w] = best.index;
    }
    return rc;
}

/* The head's work over batch b's nw rows that want tokens: their last rows' copies, the
   final norm, the logits and the choice (into argmax; split: picks too). */
static int head_compute(struct exec_model *m, const void *arg)
{
    const struct exec_batch *b = arg;
    const struct model_config *c = m->cfg;
    const uint32_t d = c->hidden_size, V = c->vocab_size;
    const uint64_t row = (uint64_t)d * m->buf.eb;
    uint32_t nw = 0, r = b->row_base;
    for (uint32_t i = 0; i < b->nruns; r += b->runs[i].count, i++)
        if (b->runs[i].wants_token)
            exec_copy(m, m->buf.a.hx + nw++ * row,
                      m->buf.x_all + (r + b->runs[i].count - 1) * row, 1, row, row, row);
    uint64_t norm = m->buf.sram + m->w.final_norm->sram_off;
    if (m->w.final_norm->sram_off == NPU_IMAGE_NOWHERE) { /* staged into a free tile buffer */
        norm = m->buf.a.xb2;
        exec_copy(m, norm, (uint64_t)(uintptr_t)m->image + m->w.final_norm->hbm_off, 1, row, row,
                  row);
    }
    exec_rmsnorm(m, m->buf.a.xb, m->buf.a.hx, norm, nw, d);
    if (npu_lm_head_split(m->plan))
        return head_split(m, nw);
    int rc = exec_wgemm(m, NPU_GEMM_LM_HEAD, m->buf.a.logits, m->buf.a.xb, nw, 0, MT_LM_HEAD, 0,
                        V, d);
    if (rc != NPU_OK)
        return rc;
    exec_vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_ARGMAX, .x = m->buf.a.logits,
                                         .aux = m->buf.a.argmax, .rows = nw, .cols = V,
                                         .ldaux = 1, .x_type = m->buf.dt });
    return exec_flush(m);
}

int exec_head(struct exec_model *m, const struct exec_batch *b, uint32_t *out, float *logit)
{
    uint32_t nw = 0;
    for (uint32_t i = 0; i < b->nruns; i++)
        nw += b->runs[i].wants_token;
    int rc = m->lreuse.enabled ? exec_reuse_tile_flush(m) : NPU_OK; /* charged to their op */
    if (rc != NPU_OK)
        return rc;
    exec_set_layer(m, m->cfg->num_layers);
    exec_set_cat(m, EXEC_CAT_OTHER);
    if (nw == 0)
        return NPU_OK;
    /* under layer reuse (performance mode: no data) a recorded head replays */
    rc = m->lreuse.enabled ? exec_reuse_head(m, nw, head_compute, b) : head_compute(m, b);
    if (rc == NPU_OK && m->pipe.stages > 1)
        rc = exec_pipe_send_tokens(m, nw, b->token_base);
    const struct head_pick *picks = (const struct head_pick *)(uintptr_t)m->buf.a.lm_picks;
    if (rc == NPU_OK)
        read_tokens(m, b->runs, b->nruns, true, npu_lm_head_split(m->plan) ? picks : NULL, out,
                    logit);
    return rc;
}

int exec_head_tokens_from_last_stage(struct exec_model *m, const struct exec_run *runs,
                                     uint32_t nruns, uint32_t messages, uint32_t *out,
                                     float *logit)
{
    int rc = NPU_OK;
    for (uint32_t i = 0; rc == NPU_OK && i < messages; i++)
        rc = exec_pipe_recv_tokens(m);
    if (rc == NPU_OK && messages > 0)
        read_tokens(m, runs, nruns, false, NULL, out, logit);
    return rc;
}
