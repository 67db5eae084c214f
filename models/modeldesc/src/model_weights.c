/* SPDX-License-Identifier: MIT */
/* Seeded model weights (model_weights.h). */
#include "model_weights.h"

#include <math.h>

#include "npu_numeric.h"

/* splitmix64 from state; advances state. */
static uint64_t mix(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void model_tensor_fill(float *dst, const struct model_tensor *t, uint64_t seed,
                       uint64_t first, uint64_t n)
{
    /* splitmix64's state moves by a constant per value: jump straight to `first`. */
    uint64_t state = seed * 0x100000001b3ull + t->stream + first * 0x9e3779b97f4a7c15ull;
    for (uint64_t i = 0; i < n; i++) {
        double u = (double)(mix(&state) >> 11) / (double)(1ull << 53); /* [0, 1) */
        dst[i] = num_round_bf16(t->centre + t->scale * (float)(2.0 * u - 1.0));
    }
}

struct walker {
    void (*fn)(const struct model_tensor *t, void *ctx);
    void *ctx;
    uint64_t stream;
};

static void emit(struct walker *w, enum model_tensor_kind kind, uint32_t layer, uint64_t rows,
                 uint64_t cols, float centre, float scale)
{
    struct model_tensor t = { .kind = kind, .layer = layer, .rows = (uint32_t)rows,
                              .cols = (uint32_t)cols, .elems = rows * cols,
                              .stream = w->stream++, .centre = centre, .scale = scale };
    w->fn(&t, w->ctx);
}

static void emit_layer(struct walker *w, const struct model_config *m, uint32_t l)
{
    const uint64_t d = m->hidden_size, hd = m->head_dim, qd = m->num_heads * hd;
    const uint64_t kvd = m->num_kv_heads * hd;
    const float in_d = 1.0f / sqrtf((float)d), in_q = 1.0f / sqrtf((float)qd);
    emit(w, MT_ATTN_NORM, l, 1, d, 1.0f, 0.1f);
    emit(w, MT_WQ, l, qd, d, 0.0f, in_d);
    emit(w, MT_WK, l, kvd, d, 0.0f, in_d);
    emit(w, MT_WV, l, kvd, d, 0.0f, in_d);
    emit(w, MT_WO, l, d, qd, 0.0f, in_q);
    if (m->qk_norm) {
        emit(w, MT_Q_NORM, l, 1, hd, 1.0f, 0.1f);
        emit(w, MT_K_NORM, l, 1, hd, 1.0f, 0.1f);
    }
    emit(w, MT_FFN_NORM, l, 1, d, 1.0f, 0.1f);
    if (m->arch == MODEL_DENSE) {
        const uint64_t ff = m->intermediate_size;
        emit(w, MT_W_GATE, l, ff, d, 0.0f, in_d);
        emit(w, MT_W_UP, l, ff, d, 0.0f, in_d);
        emit(w, MT_W_DOWN, l, d, ff, 0.0f, 1.0f / sqrtf((float)ff));
        return;
    }
    const uint64_t e = m->num_experts, mff = m->moe_intermediate_size;
    emit(w, MT_ROUTER, l, e, d, 0.0f, in_d);
    emit(w, MT_E_GATE, l, e * mff, d, 0.0f, in_d);
    emit(w, MT_E_UP, l, e * mff, d, 0.0f, in_d);
    emit(w, MT_E_DOWN, l, e * d, mff, 0.0f, 1.0f / sqrtf((float)mff));
}

void model_tensors_each(const struct model_config *m,
                        void (*fn)(const struct model_tensor *t, void *ctx), void *ctx)
{
    struct walker w = { .fn = fn, .ctx = ctx, .stream = 1 };
    const uint64_t d = m->hidden_size, v = m->vocab_size;
    emit(&w, MT_EMBED, 0, v, d, 0.0f, 1.0f);
    for (uint32_t l = 0; l < m->num_layers; l++)
        emit_layer(&w, m, l);
    emit(&w, MT_FINAL_NORM, 0, 1, d, 1.0f, 0.1f);
    if (!m->tie_embeddings)
        emit(&w, MT_LM_HEAD, 0, v, d, 0.0f, 1.0f / sqrtf((float)d));
}
