/* SPDX-License-Identifier: MIT */
/*
 * Model configs (docs/model-config.md): what a models/configs/NAME.toml or models/tiny/
 * NAME.toml file describes, parsed with the project's flat config parser (kv_config.h). The
 * host reference (models/reference/) and the planner share this struct.
 *
 * Modelled: decoder-only transformers with RMSNorm, RoPE, grouped-query attention (causal,
 * optionally a sliding window on some layers), optional per-head RMSNorm of queries and keys
 * (Qwen3), SwiGLU feed-forward, and MoE layers (softmax router, top-k, optional
 * renormalisation, SwiGLU experts). What a real model has beyond this is listed in its file.
 */
#ifndef MODEL_CONFIG_H
#define MODEL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MODEL_NAME_MAX 64u
#define MODEL_CONFIG_TEXT_MAX 16384u /* bytes of a config file the loaders read */

enum model_arch { MODEL_DENSE = 0, MODEL_MOE = 1 };

struct model_config {
    char name[MODEL_NAME_MAX];
    char arch_name[16];             /* "dense" or "moe", as in the file */
    enum model_arch arch;
    uint32_t hidden_size;           /* d */
    uint32_t num_layers;
    uint32_t num_heads;             /* query heads */
    uint32_t num_kv_heads;          /* divides num_heads */
    uint32_t head_dim;
    uint32_t intermediate_size;     /* dense SwiGLU width (0: every layer is MoE) */
    uint32_t vocab_size;
    uint32_t max_position;
    double rope_theta;
    double rms_norm_eps;
    uint32_t qk_norm;               /* 1: RMSNorm per query/key head before RoPE */
    uint32_t tie_embeddings;        /* 1: LM head = embedding matrix */
    uint32_t num_experts;           /* MoE */
    uint32_t experts_per_token;     /* MoE top-k */
    uint32_t moe_intermediate_size; /* MoE expert SwiGLU width */
    uint32_t norm_topk_prob;        /* MoE: renormalise the top-k weights */
    uint32_t sliding_window;        /* tokens (0: none) */
    uint32_t sliding_window_period; /* layer l slides if l % period == offset (0: none) */
    uint32_t sliding_window_offset;
    uint64_t seed;                  /* tiny models: weights from this seed */
};

/* Parses a config; NPU_OK or NPU_ERR_FORMAT with err naming the file, line and field (or
   the two fields that contradict each other). */
int model_config_parse(struct model_config *m, const char *text, const char *filename,
                       char *err, size_t errlen);
int model_config_load(struct model_config *m, const char *path, char *err, size_t errlen);

/* Whether layer l uses the sliding window. */
bool model_is_sliding_layer(const struct model_config *m, uint32_t layer);

/* Parameters (elements) of the whole model: embeddings, every layer, final norm, LM head. */
uint64_t model_count_params(const struct model_config *m);

#endif
