/* SPDX-License-Identifier: MIT */
/*
 * The weights of a model generated from its seed (docs/models.md): the list of its tensors
 * in one fixed order, and the values of each. Plain C without allocation, so the host
 * reference and the firmware build bit-identical weights.
 *
 * Tensor t (numbered 1, 2, ... in the order below) holds n values uniform in
 * [centre - scale, centre + scale] from splitmix64 seeded with seed * 0x100000001b3 + t,
 * each rounded to the nearest bf16: embed; per layer: attn_norm, wq, wk, wv, wo, (q_norm,
 * k_norm), ffn_norm, then gate, up, down (dense) or router, expert gates, ups, downs (MoE);
 * final_norm; lm_head (unless tied). Matrices are row-major [out][in]; scales 1/sqrt(in),
 * embeddings 1, norms 1 +- 0.1.
 */
#ifndef MODEL_WEIGHTS_H
#define MODEL_WEIGHTS_H

#include <stdbool.h>
#include <stdint.h>

#include "model_config.h"

enum model_tensor_kind {
    MT_EMBED, MT_ATTN_NORM, MT_WQ, MT_WK, MT_WV, MT_WO, MT_Q_NORM, MT_K_NORM, MT_FFN_NORM,
    MT_W_GATE, MT_W_UP, MT_W_DOWN, MT_ROUTER, MT_E_GATE, MT_E_UP, MT_E_DOWN, MT_FINAL_NORM,
    MT_LM_HEAD,
};

struct model_tensor {
    enum model_tensor_kind kind;
    uint32_t layer;          /* for per-layer tensors */
    uint32_t rows, cols;     /* [rows][cols]; a vector is 1 x cols; experts: rows = E * out */
    uint64_t elems;
    uint64_t stream;         /* t: its generator stream */
    float centre, scale;
};

/* Calls fn for every tensor of the model, in order. */
void model_tensors_each(const struct model_config *m,
                        void (*fn)(const struct model_tensor *t, void *ctx), void *ctx);

/* Writes the n values of tensor t starting at value `first` (for filling in pieces). */
void model_tensor_fill(float *dst, const struct model_tensor *t, uint64_t seed,
                       uint64_t first, uint64_t n);

/* Whether tensors of this kind hold experts (E blocks, one per expert). */
static inline bool model_tensor_is_expert(uint32_t kind)
{
    return kind == MT_E_GATE || kind == MT_E_UP || kind == MT_E_DOWN;
}

#endif
