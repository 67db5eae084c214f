/* SPDX-License-Identifier: MIT */
/* The whole-chip lower bound of one model step (npu_bound.h). */
#include "npu_bound.h"

#include <stdbool.h>
#include <string.h>

#include "npu_enums.h"
#include "routing_model.h"

/* Positions row p (0-based position) attends to in layer l. */
static double visible(const struct model_config *m, uint32_t layer, uint64_t pos)
{
    uint64_t v = pos + 1;
    if (model_is_sliding_layer(m, layer) && m->sliding_window && v > m->sliding_window)
        v = m->sliding_window;
    return (double)v;
}

/* Sum over the step's rows of the positions they see, and the context positions (held
   before the step, so read from memory) that some row sees: the first row's window. */
static void attention_reach(const struct model_config *m, uint32_t layer,
                            const struct npu_bound_shape *s, double *sum_vis, double *kv_pos)
{
    double one = 0;
    for (uint32_t i = 0; i < s->rows; i++)
        one += visible(m, layer, (uint64_t)s->context + i);
    *sum_vis = one * s->requests;
    double ctx = s->context;
    if (model_is_sliding_layer(m, layer) && m->sliding_window && ctx > m->sliding_window - 1)
        ctx = m->sliding_window - 1;
    *kv_pos = ctx * s->requests;
}

/* Rows of the step routed to each expert of `layer` (rows[num_experts]), drawn as the cores
   draw them; returns the distinct experts touched. */
static uint32_t expert_rows(const struct model_config *m, const struct npu_bound_shape *s,
                            const struct routing_model *rm, uint32_t layer, uint32_t *rows)
{
    uint64_t cum[ROUTING_EXPERTS_MAX];
    uint32_t picks[ROUTING_EXPERTS_MAX], n = 0;
    memset(rows, 0, sizeof(*rows) * m->num_experts);
    routing_layer_table(rm, layer, cum);
    for (uint32_t r = 0; r < s->requests; r++)
        for (uint32_t i = 0; i < s->rows; i++) {
            routing_draw(rm, cum, layer, r, s->context + i, picks);
            for (uint32_t j = 0; j < m->experts_per_token; j++)
                n += rows[picks[j]]++ == 0;
        }
    return n;
}

/* The most of the array's peak a GEMM can use when each of its weights meets at most M
   rows, in the chip's own matrix formula (docs/engines.md): a fold of R x C weights lasts
   max(M, its weight rows) cycles, so with the weights stationary it does at most
   min(M, R) / R of the array's work a cycle, and with the rows stationary instead (the
   other operand streaming) min(M, C) / C. Partitions cannot raise M: cutting a GEMM over
   cores splits its rows or its weights, never gives a weight more rows. */
static double array_use(const struct chip_config *c, double rows)
{
    const double side = c->sa_rows < c->sa_cols ? c->sa_rows : c->sa_cols;
    return rows >= side ? 1.0 : rows / side;
}

/* One layer's FLOPs, their array-time equivalent and the bytes it reads; adds to out. */
static void bound_layer(const struct model_config *m, const struct chip_config *chip,
                        const struct npu_bound_shape *s, const struct routing_model *rm,
                        double eb, uint32_t layer, struct npu_bound *out)
{
    const double d = m->hidden_size, hd = m->head_dim, h = m->num_heads;
    const double kvh = m->num_kv_heads, t = (double)s->requests * s->rows;
    const double qkv = d * hd * (h + 2 * kvh), o = hd * h * d;
    double sum_vis, kv_pos;
    attention_reach(m, layer, s, &sum_vis, &kv_pos);
    /* attention: a request's K and V meet its rows times the query heads of a KV head */
    const double attn = 2 * 2 * h * hd * sum_vis, proj = 2 * t * (qkv + o);
    out->flops += proj + attn;
    out->array_flops += proj / array_use(chip, t) +
                        attn / array_use(chip, (double)s->rows * (h / kvh));
    out->weight_bytes += (qkv + o + 2 * d) * eb;
    out->kv_bytes += kv_pos * 2 * kvh * hd * eb;
    if (m->arch == MODEL_MOE) {
        const double expert = 3 * d * m->moe_intermediate_size;
        const double router = 2 * t * d * m->num_experts;
        uint32_t rows[ROUTING_EXPERTS_MAX];
        uint32_t touched = expert_rows(m, s, rm, layer, rows);
        out->flops += router + 2 * t * m->experts_per_token * expert;
        out->array_flops += router / array_use(chip, t);
        for (uint32_t e = 0; e < m->num_experts; e++) /* each expert's weights meet its rows */
            if (rows[e])
                out->array_flops += 2.0 * rows[e] * expert / array_use(chip, rows[e]);
        out->weight_bytes += (d * m->num_experts + touched * expert) * eb;
        out->experts_touched += touched;
    } else {
        const double ffn = 3 * d * m->intermediate_size;
        out->flops += 2 * t * ffn;
        out->array_flops += 2 * t * ffn / array_use(chip, t);
        out->weight_bytes += ffn * eb;
    }
}

int npu_bound_step(const struct model_config *m, const struct chip_config *chip,
                   const struct npu_bound_shape *s, const struct npu_bound_opts *o,
                   struct npu_bound *out)
{
    if (!s->requests || !s->rows || (o->elem_bytes != 2 && o->elem_bytes != 4) ||
        (m->arch == MODEL_MOE && (m->num_experts > ROUTING_EXPERTS_MAX ||
                                  m->experts_per_token > m->num_experts)))
        return NPU_ERR_INVAL;
    memset(out, 0, sizeof(*out));
    const struct routing_model rm = { .experts = m->num_experts, .k = m->experts_per_token,
                                      .skew_milli = o->skew_milli, .seed = o->seed };
    const double eb = o->elem_bytes, d = m->hidden_size;
    for (uint32_t l = 0; l < m->num_layers; l++)
        bound_layer(m, chip, s, &rm, eb, l, out);
    const double head = 2.0 * s->requests * d * m->vocab_size;       /* LM head, token rows */
    out->flops += head;
    out->array_flops += head / array_use(chip, s->requests);
    out->weight_bytes += ((double)m->vocab_size * d + d) * eb;      /* LM head, final norm */
    out->other_bytes = (double)s->requests * s->rows * d * eb;       /* embedding rows */
    const double cores = (double)chip->mesh_rows * chip->mesh_cols, hz = chip->freq_mhz * 1e6;
    out->peak_flops = cores * 2.0 * chip->sa_rows * chip->sa_cols * hz;
    out->matrix_s = out->flops / out->peak_flops;
    out->sram_bytes = cores * (double)chip->sram_bytes;
    double read = out->weight_bytes + out->kv_bytes + out->other_bytes;
    out->hbm_bytes = read > out->sram_bytes ? read - out->sram_bytes : 0;
    out->hbm_bw = chip->hbm_stacks ? chip->hbm_stacks * (double)chip->hbm_stack_gbps * 1e9
                                   : cores * (double)chip->hbm_gbps * 1e9;
    out->hbm_s = out->hbm_bytes / out->hbm_bw;
    out->bound_s = out->matrix_s > out->hbm_s ? out->matrix_s : out->hbm_s;
    out->array_s = out->array_flops / out->peak_flops;
    out->floor_s = out->array_s > out->hbm_s ? out->array_s : out->hbm_s;
    return NPU_OK;
}
