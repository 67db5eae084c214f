/* SPDX-License-Identifier: MIT */
/* The reference forward pass (ref_model.h), one token at a time, in fp32. */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "npu_enums.h"
#include "ref_model.h"

void ref_rmsnorm(float *out, const float *x, const float *w, uint32_t n, float eps)
{
    /* out[n] = x[n] / sqrt(mean(x^2) + eps) * w[n] */
    double ss = 0.0;
    for (uint32_t i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    float inv = (float)(1.0 / sqrt(ss / n + eps));
    for (uint32_t i = 0; i < n; i++)
        out[i] = x[i] * inv * w[i];
}

void ref_softmax(float *x, uint32_t n)
{
    float max = x[0];
    for (uint32_t i = 1; i < n; i++)
        max = x[i] > max ? x[i] : max;
    double sum = 0.0;
    for (uint32_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
    for (uint32_t i = 0; i < n; i++)
        x[i] = (float)(x[i] / sum);
}

void ref_matmul(float *out, const float *w, const float *x, uint32_t rows, uint32_t cols)
{
    /* out[rows] = W[rows][cols] x[cols] */
    for (uint32_t r = 0; r < rows; r++) {
        const float *row = w + (size_t)r * cols;
        double acc = 0.0;
        for (uint32_t c = 0; c < cols; c++)
            acc += (double)row[c] * x[c];
        out[r] = (float)acc;
    }
}

void ref_rope(float *v, uint32_t head_dim, uint32_t pos, double theta)
{
    /* v[head_dim]: element i pairs with i + head_dim / 2, angle pos * theta^(-2i/head_dim) */
    const uint32_t half = head_dim / 2;
    for (uint32_t i = 0; i < half; i++) {
        double angle = pos * pow(theta, -2.0 * i / head_dim);
        float c = (float)cos(angle), s = (float)sin(angle);
        float a = v[i], b = v[i + half];
        v[i] = a * c - b * s;
        v[i + half] = a * s + b * c;
    }
}

uint32_t ref_argmax(const float *v, uint32_t n)
{
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (v[i] > v[best])
            best = i;
    return best;
}

void ref_topk(const float *probs, uint32_t n, uint32_t k, uint32_t *idx)
{
    for (uint32_t j = 0; j < k; j++) {
        uint32_t best = UINT32_MAX;
        for (uint32_t i = 0; i < n; i++) {
            bool taken = false;
            for (uint32_t t = 0; t < j; t++)
                taken |= idx[t] == i;
            if (!taken && (best == UINT32_MAX || probs[i] > probs[best]))
                best = i;
        }
        idx[j] = best;
    }
}

/* Attention of layer l at position pos: s->xb (normed input [d]) -> s->xb2 ([d]). */
static void attention(struct ref_model *m, uint32_t l, uint32_t pos)
{
    const struct model_config *c = &m->cfg;
    const struct ref_layer *w = &m->layers[l];
    struct ref_state *s = &m->s;
    const uint32_t hd = c->head_dim, kvd = c->num_kv_heads * hd;
    const uint32_t group = c->num_heads / c->num_kv_heads;
    float *kc = s->key_cache + ((size_t)l * m->max_seq) * kvd;
    float *vc = s->value_cache + ((size_t)l * m->max_seq) * kvd;
    float *k = kc + (size_t)pos * kvd, *v = vc + (size_t)pos * kvd;
    ref_matmul(s->q, w->wq, s->xb, c->num_heads * hd, c->hidden_size); /* q[nh * hd] */
    ref_matmul(k, w->wk, s->xb, kvd, c->hidden_size);                  /* k[nkv * hd] */
    ref_matmul(v, w->wv, s->xb, kvd, c->hidden_size);                  /* v[nkv * hd] */
    for (uint32_t h = 0; h < c->num_heads; h++) {
        if (w->q_norm)
            ref_rmsnorm(s->q + h * hd, s->q + h * hd, w->q_norm, hd, (float)c->rms_norm_eps);
        ref_rope(s->q + h * hd, hd, pos, c->rope_theta);
    }
    for (uint32_t h = 0; h < c->num_kv_heads; h++) {
        if (w->k_norm)
            ref_rmsnorm(k + h * hd, k + h * hd, w->k_norm, hd, (float)c->rms_norm_eps);
        ref_rope(k + h * hd, hd, pos, c->rope_theta);
    }
    /* Causal; a sliding layer sees the last sliding_window positions (this one included). */
    uint32_t first = model_is_sliding_layer(c, l) && pos + 1 > c->sliding_window
                         ? pos + 1 - c->sliding_window : 0;
    float *out = s->att_out; /* [nh * hd]: the heads' outputs, before wo */
    const float scale = 1.0f / sqrtf((float)hd);
    for (uint32_t h = 0; h < c->num_heads; h++) {
        const float *q = s->q + h * hd;
        const uint32_t kvh = h / group;
        for (uint32_t t = first; t <= pos; t++) {
            const float *kt = kc + (size_t)t * kvd + kvh * hd;
            double dot = 0.0;
            for (uint32_t i = 0; i < hd; i++)
                dot += (double)q[i] * kt[i];
            s->att[t - first] = (float)dot * scale;
        }
        ref_softmax(s->att, pos + 1 - first);
        float *o = out + h * hd;
        memset(o, 0, hd * sizeof(float));
        for (uint32_t t = first; t <= pos; t++) {
            const float *vt = vc + (size_t)t * kvd + kvh * hd;
            for (uint32_t i = 0; i < hd; i++)
                o[i] += s->att[t - first] * vt[i];
        }
    }
    ref_matmul(s->xb2, w->wo, out, c->hidden_size, c->num_heads * hd); /* [d] */
}

/* SwiGLU: out[d] = W_down (silu(W_gate x) * (W_up x)), hidden width ff. */
static void swiglu(struct ref_state *s, float *out, const float *x, const float *gate,
                   const float *up, const float *down, uint32_t d, uint32_t ff)
{
    ref_matmul(s->hb, gate, x, ff, d);
    ref_matmul(s->hb2, up, x, ff, d);
    for (uint32_t i = 0; i < ff; i++) {
        float g = s->hb[i];
        s->hb[i] = g / (1.0f + expf(-g)) * s->hb2[i];
    }
    ref_matmul(out, down, s->hb, d, ff);
}

/* MoE layer l: s->xb (normed [d]) -> s->xb2 ([d]). */
static void moe(struct ref_model *m, uint32_t l)
{
    const struct model_config *c = &m->cfg;
    const struct ref_layer *w = &m->layers[l];
    struct ref_state *s = &m->s;
    const uint32_t d = c->hidden_size, mff = c->moe_intermediate_size, k = c->experts_per_token;
    uint32_t idx[REF_TOPK_MAX];
    ref_matmul(s->router_probs, w->router, s->xb, c->num_experts, d); /* logits [E] */
    ref_softmax(s->router_probs, c->num_experts);
    ref_topk(s->router_probs, c->num_experts, k, idx);
    double norm = 0.0;
    for (uint32_t j = 0; j < k; j++)
        norm += s->router_probs[idx[j]];
    memset(s->xb2, 0, d * sizeof(float));
    for (uint32_t j = 0; j < k; j++) {
        const size_t e = idx[j];
        float weight = c->norm_topk_prob ? (float)(s->router_probs[e] / norm)
                                         : s->router_probs[e];
        swiglu(s, s->moe_out, s->xb, w->e_gate + e * mff * d, w->e_up + e * mff * d,
               w->e_down + e * d * mff, d, mff);
        for (uint32_t i = 0; i < d; i++)
            s->xb2[i] += weight * s->moe_out[i];
        m->expert_tokens[(size_t)l * c->num_experts + e]++;
    }
}

const float *ref_model_forward(struct ref_model *m, uint32_t token, uint32_t pos)
{
    const struct model_config *c = &m->cfg;
    struct ref_state *s = &m->s;
    const uint32_t d = c->hidden_size;
    const float eps = (float)c->rms_norm_eps;
    assert(token < c->vocab_size && pos < m->max_seq);
    memcpy(s->x, m->embed + (size_t)token * d, d * sizeof(float)); /* x[d] */
    for (uint32_t l = 0; l < c->num_layers; l++) {
        const struct ref_layer *w = &m->layers[l];
        ref_rmsnorm(s->xb, s->x, w->attn_norm, d, eps);
        attention(m, l, pos);
        for (uint32_t i = 0; i < d; i++)
            s->x[i] += s->xb2[i];
        ref_rmsnorm(s->xb, s->x, w->ffn_norm, d, eps);
        if (c->arch == MODEL_MOE)
            moe(m, l);
        else
            swiglu(s, s->xb2, s->xb, w->w_gate, w->w_up, w->w_down, d, c->intermediate_size);
        for (uint32_t i = 0; i < d; i++)
            s->x[i] += s->xb2[i];
    }
    ref_rmsnorm(s->xb, s->x, m->final_norm, d, eps);
    ref_matmul(s->logits, m->lm_head, s->xb, c->vocab_size, d); /* logits[vocab] */
    return s->logits;
}

int ref_generate(struct ref_model *m, const uint32_t *prompt, uint32_t n_prompt,
                 uint32_t n_new, uint32_t *out)
{
    if (n_prompt == 0 || n_new == 0 || (uint64_t)n_prompt + n_new - 1 > m->max_seq)
        return NPU_ERR_RANGE;
    const float *logits = NULL;
    for (uint32_t p = 0; p < n_prompt; p++)
        logits = ref_model_forward(m, prompt[p], p);
    for (uint32_t i = 0; i < n_new; i++) {
        out[i] = ref_argmax(logits, m->cfg.vocab_size);
        if (i + 1 < n_new)
            logits = ref_model_forward(m, out[i], n_prompt + i);
    }
    return NPU_OK;
}
