/* SPDX-License-Identifier: MIT */
/*
 * The host reference implementation of the model architectures (docs/models.md): a plain,
 * readable forward pass with fp32 activations and weights (dot products and norms summed in
 * double), one token at a time with a KV cache, in the manner of llama2.c. It is the oracle
 * the chip's functional runs are compared with.
 *
 * Modelled: RMSNorm, RoPE (rotate-half pairing: element i with i + head_dim/2, as the
 * Hugging Face Qwen3, Mixtral and GPT-OSS code does), grouped-query attention with a causal
 * mask and, on the layers model_is_sliding_layer() names, a sliding window of the last
 * sliding_window positions, optional per-head RMSNorm of queries and keys (Qwen3), SwiGLU
 * feed-forward, MoE layers (softmax router over all experts, top-k with ties to the lower
 * index, optional renormalisation of the k weights, weighted sum of SwiGLU experts), final
 * RMSNorm, LM head, greedy decoding. Weights are generated from the config's seed and rounded
 * to bf16, so the chip and the reference start from the same numbers.
 * Not modelled: biases, attention sinks, clamped activations, rope scaling, LayerNorm, tokenizer.
 */
#ifndef REF_MODEL_H
#define REF_MODEL_H

#include <stdint.h>

#include "model_config.h"

#define REF_PARAMS_MAX (256ull << 20) /* the reference holds tiny and small models only */
#define REF_TOPK_MAX 64u

/* One transformer block's weights; matrices are row-major [out][in]. */
struct ref_layer {
    float *attn_norm;          /* [d] */
    float *wq;                 /* [n_heads * hd][d] */
    float *wk, *wv;            /* [n_kv * hd][d] */
    float *wo;                 /* [d][n_heads * hd] */
    float *q_norm, *k_norm;    /* [hd] each (qk_norm), else NULL */
    float *ffn_norm;           /* [d] */
    float *w_gate, *w_up;      /* dense: [ff][d] */
    float *w_down;             /* dense: [d][ff] */
    float *router;             /* MoE: [E][d] */
    float *e_gate, *e_up;      /* MoE: [E][mff][d] */
    float *e_down;             /* MoE: [E][d][mff] */
};

/* Activations and the KV cache of one sequence. */
struct ref_state {
    float *x, *xb, *xb2;       /* [d] residual stream and scratch */
    float *q;                  /* [n_heads * hd] */
    float *att_out;            /* [n_heads * hd]: the heads' outputs, before wo */
    float *att;                /* [max_seq] scores of one head */
    float *hb, *hb2;           /* [max(ff, mff)] */
    float *moe_out;            /* [d] */
    float *router_probs;       /* [E] */
    float *logits;             /* [vocab] */
    float *key_cache;          /* [layers][max_seq][n_kv * hd] */
    float *value_cache;        /* [layers][max_seq][n_kv * hd] */
};

struct ref_model {
    struct model_config cfg;
    uint32_t max_seq;
    float *embed;              /* [vocab][d] */
    float *final_norm;         /* [d] */
    float *lm_head;            /* [vocab][d] (= embed when tied) */
    struct ref_layer *layers;  /* [num_layers] */
    struct ref_state s;
    uint64_t *expert_tokens;   /* [layers][E]: tokens routed to each expert so far */
    float *arena;              /* every weight, one allocation */
};

/* Builds the model from cfg (weights from cfg->seed) for sequences of up to max_seq
   positions. NPU_ERR_RANGE if the model is larger than REF_PARAMS_MAX, max_seq exceeds
   max_position or experts_per_token exceeds REF_TOPK_MAX; NPU_ERR_NOMEM if the host has no room. */
int ref_model_init(struct ref_model *m, const struct model_config *cfg, uint32_t max_seq);
void ref_model_free(struct ref_model *m);

/* Runs token at position pos (0, 1, ... in order; the cache holds the earlier ones) and
   returns the logits [vocab], valid until the next call. */
const float *ref_model_forward(struct ref_model *m, uint32_t token, uint32_t pos);

/* Greedy decoding: feeds prompt[0..n_prompt), then appends n_new tokens (each the argmax of
   the logits) to out[0..n_new); the last one is not fed back, so n_prompt + n_new - 1
   positions are used. NPU_ERR_RANGE if they pass max_seq. */
int ref_generate(struct ref_model *m, const uint32_t *prompt, uint32_t n_prompt,
                 uint32_t n_new, uint32_t *out);

/* Index of the largest value (ties: the lowest index). */
uint32_t ref_argmax(const float *v, uint32_t n);

/* The building blocks, exposed for the tests. */
void ref_rmsnorm(float *out, const float *x, const float *w, uint32_t n, float eps);
void ref_softmax(float *x, uint32_t n);
void ref_matmul(float *out, const float *w, const float *x, uint32_t rows, uint32_t cols);
void ref_rope(float *v, uint32_t head_dim, uint32_t pos, double theta);
/* Top-k of probs[0..n) (ties: lower index first): idx[0..k), in decreasing order. */
void ref_topk(const float *probs, uint32_t n, uint32_t k, uint32_t *idx);

#endif
