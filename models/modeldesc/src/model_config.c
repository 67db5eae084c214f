/* SPDX-License-Identifier: MIT */
/* Model config parser and checks (model_config.h). */
#include "model_config.h"

#include <stdio.h>
#include <string.h>

#include "kv_config.h"
#include "npu_enums.h"

#define U32(key, member, lo, hi) \
    { key, KV_U32, offsetof(struct model_config, member), lo, hi, 0, 0, false }
#define REAL(key, member, lo, hi) \
    { key, KV_F64, offsetof(struct model_config, member), 0, 0, lo, hi, false }

static const struct kv_field fields[] = {
    { "name", KV_STRING, offsetof(struct model_config, name), 1, MODEL_NAME_MAX - 1, 0, 0, false },
    { "arch", KV_STRING, offsetof(struct model_config, arch_name), 1, 15, 0, 0, false },
    U32("hidden_size", hidden_size, 1, 65536),
    U32("num_layers", num_layers, 1, 1024),
    U32("num_heads", num_heads, 1, 1024),
    U32("num_kv_heads", num_kv_heads, 1, 1024),
    U32("head_dim", head_dim, 2, 1024),
    U32("intermediate_size", intermediate_size, 0, 1u << 20),
    U32("vocab_size", vocab_size, 2, 1u << 24),
    U32("max_position", max_position, 1, 1u << 24),
    REAL("rope_theta", rope_theta, 1.0, 1e12),
    REAL("rms_norm_eps", rms_norm_eps, 1e-12, 1.0),
    U32("qk_norm", qk_norm, 0, 1),
    U32("tie_embeddings", tie_embeddings, 0, 1),
    U32("num_experts", num_experts, 0, 1024),
    U32("experts_per_token", experts_per_token, 0, 1024),
    U32("moe_intermediate_size", moe_intermediate_size, 0, 65536),
    U32("norm_topk_prob", norm_topk_prob, 0, 1),
    U32("sliding_window", sliding_window, 0, 1u << 24),
    U32("sliding_window_period", sliding_window_period, 0, 1024),
    U32("sliding_window_offset", sliding_window_offset, 0, 1023),
    { "seed", KV_U64, offsetof(struct model_config, seed), 0, UINT64_MAX, 0, 0, false },
};
#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

/* The fields that must agree with each other. */
static int check_consistent(const struct model_config *m, const char *f, char *err,
                            size_t errlen)
{
    if (m->num_heads % m->num_kv_heads)
        return kv_config_error(err, errlen,
                               "%s: num_heads %u is not a multiple of num_kv_heads %u", f,
                               m->num_heads, m->num_kv_heads);
    if (m->head_dim % 2)
        return kv_config_error(err, errlen,
                               "%s: head_dim %u must be even (RoPE rotates pairs)", f,
                               m->head_dim);
    if (m->arch == MODEL_DENSE && (m->intermediate_size == 0 || m->num_experts ||
                                   m->experts_per_token || m->moe_intermediate_size))
        return kv_config_error(err, errlen,
                               "%s: arch 'dense' needs intermediate_size > 0 and "
                               "num_experts, experts_per_token, moe_intermediate_size = 0", f);
    if (m->arch == MODEL_MOE && m->intermediate_size)
        return kv_config_error(err, errlen,
                               "%s: arch 'moe' needs intermediate_size = 0 (every layer "
                               "is MoE; dense layers in a MoE model are not modelled)", f);
    if (m->arch == MODEL_MOE && (m->num_experts < 2 || m->experts_per_token < 1 ||
                                 m->experts_per_token > m->num_experts ||
                                 m->moe_intermediate_size == 0))
        return kv_config_error(err, errlen,
                               "%s: arch 'moe' needs num_experts >= 2, experts_per_token "
                               "1..num_experts (got %u of %u) and moe_intermediate_size > 0", f,
                               m->experts_per_token, m->num_experts);
    if ((m->sliding_window == 0) != (m->sliding_window_period == 0))
        return kv_config_error(err, errlen,
                               "%s: sliding_window and sliding_window_period must both "
                               "be 0 or both be set", f);
    if (m->sliding_window_period && m->sliding_window_offset >= m->sliding_window_period)
        return kv_config_error(err, errlen,
                               "%s: sliding_window_offset %u must be below "
                               "sliding_window_period %u", f, m->sliding_window_offset,
                               m->sliding_window_period);
    return NPU_OK;
}

int model_config_parse(struct model_config *m, const char *text, const char *filename,
                       char *err, size_t errlen)
{
    memset(m, 0, sizeof(*m));
    int rc = kv_config_parse(m, fields, NFIELDS, text, filename, err, errlen);
    if (rc)
        return rc;
    if (strcmp(m->arch_name, "dense") == 0)
        m->arch = MODEL_DENSE;
    else if (strcmp(m->arch_name, "moe") == 0)
        m->arch = MODEL_MOE;
    else
        return kv_config_error(err, errlen,
                               "%s: field 'arch' must be \"dense\" or \"moe\", got \"%s\"",
                               filename, m->arch_name);
    return check_consistent(m, filename, err, errlen);
}

int model_config_load(struct model_config *m, const char *path, char *err, size_t errlen)
{
    char text[MODEL_CONFIG_TEXT_MAX];
    int rc = kv_config_read(path, text, sizeof(text), err, errlen);
    return rc ? rc : model_config_parse(m, text, path, err, errlen);
}

bool model_is_sliding_layer(const struct model_config *m, uint32_t layer)
{
    return m->sliding_window_period &&
           layer % m->sliding_window_period == m->sliding_window_offset;
}

uint64_t model_count_params(const struct model_config *m)
{
    const uint64_t d = m->hidden_size, hd = m->head_dim;
    uint64_t attn = d * hd * (m->num_heads + 2ull * m->num_kv_heads) + hd * m->num_heads * d;
    uint64_t norms = 2 * d + (m->qk_norm ? 2 * hd : 0);
    uint64_t ffn = m->arch == MODEL_MOE
                       ? d * m->num_experts +
                             3ull * d * m->moe_intermediate_size * m->num_experts
                       : 3ull * d * m->intermediate_size;
    uint64_t embed = (uint64_t)m->vocab_size * d;
    return embed + m->num_layers * (attn + norms + ffn) + d +
           (m->tie_embeddings ? 0 : embed);
}
