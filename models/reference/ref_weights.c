/* SPDX-License-Identifier: MIT */
/*
 * The reference model's memory: weights generated from the config's seed (rounded to bf16),
 * activations and the KV cache (ref_model.h).
 */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "npu_enums.h"
#include "ref_model.h"

/* splitmix64: a small, well-mixed generator; one stream per tensor. */
static uint64_t mix(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Rounds to the nearest bf16 (even on ties): the chip holds weights in bf16. */
static float round_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* n values uniform in [-scale, scale] (centre 0), or around 1 for norms (centre 1). */
static void fill(float *w, uint64_t n, uint64_t seed, uint64_t tensor, float centre,
                 float scale)
{
    uint64_t state = seed * 0x100000001b3ull + tensor;
    for (uint64_t i = 0; i < n; i++) {
        double u = (double)(mix(&state) >> 11) / (double)(1ull << 53); /* [0, 1) */
        w[i] = round_bf16(centre + scale * (float)(2.0 * u - 1.0));
    }
}

/* Hands out consecutive pieces of the arena, filling each from its own stream. */
struct carver {
    float *next;
    uint64_t seed, tensor;
};

static float *carve(struct carver *c, uint64_t n, float centre, float scale)
{
    float *p = c->next;
    fill(p, n, c->seed, c->tensor++, centre, scale);
    c->next += n;
    return p;
}

static void carve_layer(struct carver *c, const struct model_config *m, struct ref_layer *l)
{
    const uint64_t d = m->hidden_size, hd = m->head_dim, qd = m->num_heads * hd;
    const uint64_t kvd = m->num_kv_heads * hd;
    const float in_d = 1.0f / sqrtf((float)d), in_q = 1.0f / sqrtf((float)qd);
    l->attn_norm = carve(c, d, 1.0f, 0.1f);
    l->wq = carve(c, qd * d, 0.0f, in_d);
    l->wk = carve(c, kvd * d, 0.0f, in_d);
    l->wv = carve(c, kvd * d, 0.0f, in_d);
    l->wo = carve(c, d * qd, 0.0f, in_q);
    l->q_norm = m->qk_norm ? carve(c, hd, 1.0f, 0.1f) : NULL;
    l->k_norm = m->qk_norm ? carve(c, hd, 1.0f, 0.1f) : NULL;
    l->ffn_norm = carve(c, d, 1.0f, 0.1f);
    if (m->arch == MODEL_DENSE) {
        const uint64_t ff = m->intermediate_size;
        l->w_gate = carve(c, ff * d, 0.0f, in_d);
        l->w_up = carve(c, ff * d, 0.0f, in_d);
        l->w_down = carve(c, d * ff, 0.0f, 1.0f / sqrtf((float)ff));
        return;
    }
    const uint64_t e = m->num_experts, mff = m->moe_intermediate_size;
    l->router = carve(c, e * d, 0.0f, in_d);
    l->e_gate = carve(c, e * mff * d, 0.0f, in_d);
    l->e_up = carve(c, e * mff * d, 0.0f, in_d);
    l->e_down = carve(c, e * d * mff, 0.0f, 1.0f / sqrtf((float)mff));
}

/* Activations and caches, zeroed. */
static int alloc_state(struct ref_model *m)
{
    const struct model_config *c = &m->cfg;
    const size_t d = c->hidden_size, kvd = (size_t)c->num_kv_heads * c->head_dim;
    const size_t hidden = c->intermediate_size > c->moe_intermediate_size
                              ? c->intermediate_size : c->moe_intermediate_size;
    const size_t cache = (size_t)c->num_layers * m->max_seq * kvd;
    struct ref_state *s = &m->s;
    s->x = calloc(d, sizeof(float));
    s->xb = calloc(d, sizeof(float));
    s->xb2 = calloc(d, sizeof(float));
    s->q = calloc((size_t)c->num_heads * c->head_dim, sizeof(float));
    s->att = calloc(m->max_seq, sizeof(float));
    s->hb = calloc(hidden, sizeof(float));
    s->hb2 = calloc(hidden, sizeof(float));
    s->moe_out = calloc(d, sizeof(float));
    s->router_probs = calloc(c->num_experts ? c->num_experts : 1, sizeof(float));
    s->logits = calloc(c->vocab_size, sizeof(float));
    s->key_cache = calloc(cache, sizeof(float));
    s->value_cache = calloc(cache, sizeof(float));
    m->expert_tokens = calloc((size_t)c->num_layers * (c->num_experts ? c->num_experts : 1),
                              sizeof(uint64_t));
    bool ok = s->x && s->xb && s->xb2 && s->q && s->att && s->hb && s->hb2 && s->moe_out &&
              s->router_probs && s->logits && s->key_cache && s->value_cache &&
              m->expert_tokens;
    return ok ? NPU_OK : NPU_ERR_NOMEM;
}

int ref_model_init(struct ref_model *m, const struct model_config *cfg, uint32_t max_seq)
{
    memset(m, 0, sizeof(*m));
    uint64_t params = model_param_count(cfg);
    if (params > REF_PARAMS_MAX || max_seq == 0 || max_seq > cfg->max_position ||
        cfg->experts_per_token > REF_TOPK_MAX)
        return NPU_ERR_RANGE;
    m->cfg = *cfg;
    m->max_seq = max_seq;
    m->arena = malloc(params * sizeof(float));
    m->layers = calloc(cfg->num_layers, sizeof(*m->layers));
    if (!m->arena || !m->layers || alloc_state(m) != NPU_OK) {
        ref_model_free(m);
        return NPU_ERR_NOMEM;
    }
    const uint64_t d = cfg->hidden_size, v = cfg->vocab_size;
    struct carver c = { .next = m->arena, .seed = cfg->seed, .tensor = 1 };
    m->embed = carve(&c, v * d, 0.0f, 1.0f);
    for (uint32_t l = 0; l < cfg->num_layers; l++)
        carve_layer(&c, cfg, &m->layers[l]);
    m->final_norm = carve(&c, d, 1.0f, 0.1f);
    m->lm_head = cfg->tie_embeddings ? m->embed
                                     : carve(&c, v * d, 0.0f, 1.0f / sqrtf((float)d));
    assert((uint64_t)(c.next - m->arena) == params && "model_param_count disagrees");
    return NPU_OK;
}

void ref_model_free(struct ref_model *m)
{
    struct ref_state *s = &m->s;
    float *bufs[] = { s->x, s->xb, s->xb2, s->q, s->att, s->hb, s->hb2, s->moe_out,
                      s->router_probs, s->logits, s->key_cache, s->value_cache, m->arena };
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
        free(bufs[i]);
    free(m->layers);
    free(m->expert_tokens);
    memset(m, 0, sizeof(*m));
}
