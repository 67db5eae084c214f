/* SPDX-License-Identifier: MIT */
/*
 * The reference model's memory: weights generated from the config's seed (model_weights.h),
 * activations and the KV cache (ref_model.h).
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "npu_enums.h"
#include "model_weights.h"
#include "ref_model.h"

/* Places each tensor in the arena, in order, and fills it from its stream. */
struct placer {
    struct ref_model *m;
    float *next;
};

static float **slot_of(struct ref_model *m, const struct model_tensor *t)
{
    struct ref_layer *l = &m->layers[t->layer];
    switch (t->kind) {
    case MT_EMBED: return &m->embed;
    case MT_ATTN_NORM: return &l->attn_norm;
    case MT_WQ: return &l->wq;
    case MT_WK: return &l->wk;
    case MT_WV: return &l->wv;
    case MT_WO: return &l->wo;
    case MT_Q_NORM: return &l->q_norm;
    case MT_K_NORM: return &l->k_norm;
    case MT_FFN_NORM: return &l->ffn_norm;
    case MT_W_GATE: return &l->w_gate;
    case MT_W_UP: return &l->w_up;
    case MT_W_DOWN: return &l->w_down;
    case MT_ROUTER: return &l->router;
    case MT_E_GATE: return &l->e_gate;
    case MT_E_UP: return &l->e_up;
    case MT_E_DOWN: return &l->e_down;
    case MT_FINAL_NORM: return &m->final_norm;
    default: return &m->lm_head;
    }
}

static void place(const struct model_tensor *t, void *ctx)
{
    struct placer *p = ctx;
    *slot_of(p->m, t) = p->next;
    model_tensor_fill(p->next, t, p->m->cfg.seed, 0, t->elems);
    p->next += t->elems;
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
    s->att_out = calloc((size_t)c->num_heads * c->head_dim, sizeof(float));
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
    bool ok = s->x && s->xb && s->xb2 && s->q && s->att_out && s->att && s->hb && s->hb2 && s->moe_out &&
              s->router_probs && s->logits && s->key_cache && s->value_cache &&
              m->expert_tokens;
    return ok ? NPU_OK : NPU_ERR_NOMEM;
}

int ref_model_init(struct ref_model *m, const struct model_config *cfg, uint32_t max_seq)
{
    memset(m, 0, sizeof(*m));
    uint64_t params = model_count_params(cfg);
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
    struct placer p = { .m = m, .next = m->arena };
    model_tensors_each(cfg, place, &p);
    if (cfg->tie_embeddings)
        m->lm_head = m->embed;
    assert((uint64_t)(p.next - m->arena) == params && "model_count_params disagrees");
    return NPU_OK;
}

void ref_model_free(struct ref_model *m)
{
    struct ref_state *s = &m->s;
    float *bufs[] = { s->x, s->xb, s->xb2, s->q, s->att_out, s->att, s->hb, s->hb2, s->moe_out,
                      s->router_probs, s->logits, s->key_cache, s->value_cache, m->arena };
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
        free(bufs[i]);
    free(m->layers);
    free(m->expert_tokens);
    memset(m, 0, sizeof(*m));
}
