/* SPDX-License-Identifier: MIT */
/*
 * The image against its model (npu_image.h, docs/images.md "Refusals"): what the structure
 * check (npu_image.c) cannot see, because it needs the model's configuration. An image whose
 * checksum was recomputed after its contents were changed passes the structure check; this
 * one makes sure such an image either runs or is refused before any core is released:
 *   - the model is one the interpreter takes (npu_limits.h) and the plan's stages cover
 *     its layers;
 *   - every core's program is exactly its stage's program (npu_prog_stage: the planner
 *     writes programs with the same function);
 *   - every tensor entry is a tensor of the model (kind, layer), its share lies inside the
 *     tensor (one expert's for experts) and its blocks are its rows x cols x the dtype's
 *     bytes;
 *   - every tensor a core's layers read exists for the core's rank (or is shared);
 *   - every core's buffers, residual rows and KV ring are as large as the interpreter will
 *     lay them out from the configuration and plan (npu_layout.h).
 * Plain C, two tables allocated and freed here (the model's tensors, and which rank has
 * which): it runs on the control core before the release, and on the host in the tests.
 */
#include "npu_image.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_weights.h"
#include "npu_enums.h"
#include "npu_layout.h"
#include "npu_limits.h"

#define KINDS (MT_LM_HEAD + 1)

/* A tensor of the model: its whole shape (one expert's block for experts), 0 rows if the
   model has none of this kind at this layer. */
struct want {
    uint32_t rows, cols;
    uint32_t blocks;       /* experts: E, else 1 */
    uint64_t area;         /* summed over the image's entries: rows x cols x blocks */
};

struct model_table {
    const struct model_config *cfg;
    struct want *w;        /* [(layers + 1) * KINDS]: per-layer kinds, then the model's own */
};

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return rc;
}

static bool per_layer(uint32_t kind)
{
    return kind != MT_EMBED && kind != MT_FINAL_NORM && kind != MT_LM_HEAD;
}

static struct want *slot(const struct model_table *m, uint32_t kind, uint32_t layer)
{
    const uint32_t l = per_layer(kind) ? layer : m->cfg->num_layers;
    return &m->w[(uint64_t)l * KINDS + kind];
}

static void note_tensor(const struct model_tensor *t, void *ctx)
{
    struct model_table *m = ctx;
    const uint32_t e = model_tensor_is_expert(t->kind) ? m->cfg->num_experts : 1;
    *slot(m, t->kind, t->layer) = (struct want){ .rows = t->rows / e, .cols = t->cols,
                                                 .blocks = e };
    if (t->kind == MT_EMBED && m->cfg->tie_embeddings) /* the image holds a head all the same */
        *slot(m, MT_LM_HEAD, 0) = (struct want){ .rows = t->rows, .cols = t->cols,
                                                 .blocks = 1 };
}

/* Each entry a tensor of the model, its share inside it. */
static int check_entries(const struct model_table *m, const struct npu_image_header *h,
                         const struct npu_image_tensor *ts, char *err, size_t errlen)
{
    const uint32_t eb = npu_dtype_bytes(h->plan.dtype);
    for (uint64_t i = 0; i < h->tensors_count; i++) {
        const struct npu_image_tensor *t = &ts[i];
        const bool known = t->kind < KINDS && (!per_layer(t->kind) ||
                                               t->layer < m->cfg->num_layers);
        const struct want *w = known ? slot(m, t->kind, t->layer) : NULL;
        const uint64_t share = (uint64_t)t->rows * t->cols * eb;
        const bool fits = w && w->rows && (uint64_t)t->row0 + t->rows <= w->rows &&
                          (uint64_t)t->col0 + t->cols <= w->cols && t->rows && t->cols &&
                          share == t->block_bytes;
        if (!fits)
            return fail(err, errlen, NPU_ERR_FORMAT, "tensor %" PRIu64 " (kind %u, layer %u): "
                        "a [%u][%u] share at (%u,%u) of %" PRIu64 " bytes is not a part of "
                        "%s's tensors (%s [%u][%u])", i, t->kind, t->layer, t->rows, t->cols,
                        t->row0, t->col0, t->block_bytes, m->cfg->name,
                        w && w->rows ? "whole" : "none of this kind and layer",
                        w ? w->rows : 0, w ? w->cols : 0);
        if (t->rank != NPU_IMAGE_IDLE && t->rank >= h->plan.tp)
            return fail(err, errlen, NPU_ERR_FORMAT, "tensor %" PRIu64 ": rank %u of tp %u", i,
                        t->rank, h->plan.tp);
    }
    return NPU_OK;
}

/* Every tensor of the model is there for every rank (its own share, or a shared copy), and
   its shares add up to the whole tensor (a shared copy is the whole; the ranks' shares
   partition it, as the planner splits it; expert-parallel experts are covered by the expert
   map's check instead): one pass over the entries into a bitmap of (kind, layer) x rank
   and an area per (kind, layer). */
static int check_needs(const struct model_table *m, const struct npu_image_header *h,
                       const struct npu_image_tensor *ts, char *err, size_t errlen)
{
    const uint32_t tp = h->plan.tp, L = m->cfg->num_layers;
    const uint64_t slots = ((uint64_t)L + 1) * KINDS, row = (uint64_t)tp + 1; /* + shared */
    uint8_t *seen = calloc(slots * row, 1);
    if (!seen)
        return fail(err, errlen, NPU_ERR_NOMEM, "no memory for the image's model check");
    for (uint64_t i = 0; i < h->tensors_count; i++) { /* check_entries vetted each */
        struct want *w = slot(m, ts[i].kind, ts[i].layer);
        const uint64_t at = (uint64_t)(w - m->w);
        seen[at * row + (ts[i].rank == NPU_IMAGE_IDLE ? tp : ts[i].rank)] = 1;
        w->area += (uint64_t)ts[i].rows * ts[i].cols * ts[i].blocks;
    }
    int rc = NPU_OK;
    for (uint64_t at = 0; at < slots && rc == NPU_OK; at++) {
        const uint32_t k = (uint32_t)(at % KINDS), l = (uint32_t)(at / KINDS);
        const struct want *w = &m->w[at];
        if (!w->rows || per_layer(k) != (l < L))
            continue;
        /* under EP a rank's expert blocks are as wide as its widest slice (balanced
           placement pads them); the expert map's check covers each expert once instead */
        const bool mapped = model_tensor_is_expert(k) && npu_plan_is_ep(&h->plan) &&
                            h->plan.tp > 1;
        if (!mapped && w->area != (uint64_t)w->rows * w->cols * w->blocks)
            rc = fail(err, errlen, NPU_ERR_FORMAT, "the shares of kind %u%s%u hold %" PRIu64
                      " elements, %s's tensor has %" PRIu64, k, l < L ? ", layer " : "",
                      l < L ? l : 0u, w->area, m->cfg->name,
                      (uint64_t)w->rows * w->cols * w->blocks);
        if (seen[at * row + tp])
            continue;
        for (uint32_t r = 0; r < tp && rc == NPU_OK; r++)
            if (!seen[at * row + r])
                rc = fail(err, errlen, NPU_ERR_FORMAT, "no tensor of kind %u%s%u for rank %u "
                          "(%s has one)", k, l < L ? ", layer " : "", l < L ? l : 0u, r,
                          m->cfg->name);
    }
    free(seen);
    return rc;
}

/* Each core's program is its stage's (npu_prog_stage). */
static int check_programs(const struct model_config *c, const struct npu_image_header *h,
                          const uint8_t *image, char *err, size_t errlen)
{
    const struct npu_image_core *cores = (const void *)(image + h->cores_off);
    const struct npu_prog_op *prog = (const void *)(image + h->prog_off);
    struct npu_prog_op want[NPU_PROG_STAGE_OPS_MAX];
    for (uint64_t i = 0; i < h->cores_count; i++) {
        const struct npu_image_core *core = &cores[i];
        if (core->rank == NPU_IMAGE_IDLE)
            continue;
        const uint32_t n = npu_prog_stage(c, &h->plan, core->stage, want);
        bool same = core->prog_count == n;
        for (uint32_t k = 0; same && k < n; k++) {
            const struct npu_prog_op *o = &prog[core->prog_first + k];
            same = o->kind == want[k].kind && o->flags == want[k].flags &&
                   o->layer == want[k].layer;
        }
        if (!same)
            return fail(err, errlen, NPU_ERR_FORMAT, "core %" PRIu64 ": its program of %u ops "
                        "is not stage %u's (%u ops of %s's layers and the plan)", i,
                        core->prog_count, core->stage, n, c->name);
    }
    return NPU_OK;
}

/* Each core's buffers as large as the interpreter lays them out (exec_init does the same
   sums after the release; an image that disagrees is refused here instead). */
static int check_buffers(const struct model_config *c, const struct npu_image_header *h,
                         const uint8_t *image, char *err, size_t errlen)
{
    const struct npu_plan *p = &h->plan;
    const struct npu_image_core *cores = (const void *)(image + h->cores_off);
    struct npu_act_layout a;
    npu_act_layout(c, p, &a);
    struct npu_moe_spill spill;
    npu_moe_spill_layout(c, p, &spill);
    const uint64_t x = (uint64_t)p->max_tokens * c->hidden_size * npu_dtype_bytes(p->dtype);
    const uint64_t kv = npu_kv_ring_bytes(c, p);
    for (uint64_t i = 0; i < h->cores_count; i++) {
        const struct npu_image_core *core = &cores[i];
        if (core->rank == NPU_IMAGE_IDLE)
            continue;
        if (core->sram_act_bytes < a.bytes || core->x_bytes < x + spill.bytes ||
            core->kv_bytes < kv ||
            (spill.bytes && spill.cap < npu_moe_spill_group_rows(c, p, npu_moe_group_rows(p))))
            return fail(err, errlen, NPU_ERR_FORMAT, "core %" PRIu64 ": tile buffers %" PRIu64
                        ", residual rows and spill %" PRIu64 ", KV ring %" PRIu64 " bytes; "
                        "%s's layout needs %" PRIu64 ", %" PRIu64 " and %" PRIu64, i,
                        core->sram_act_bytes, core->x_bytes, core->kv_bytes, c->name, a.bytes,
                        x + spill.bytes, kv);
    }
    return NPU_OK;
}

int npu_image_check_model(const void *image, const struct model_config *c, char *err,
                          size_t errlen)
{
    const struct npu_image_header *h = image;
    const struct npu_plan *p = &h->plan;
    const uint64_t k = c->experts_per_token ? c->experts_per_token : 1;
    if (c->num_layers > NPU_MODEL_LAYERS_MAX || c->num_experts > NPU_MODEL_EXPERTS_MAX ||
        p->tile_rows * k > NPU_ROUTED_PAIRS_MAX ||
        (p->moe_rows + p->tp - 1) / p->tp * k > NPU_ROUTED_PAIRS_MAX)
        return fail(err, errlen, NPU_ERR_FORMAT, "%s: %u layers, %u experts, tile_rows %u x "
                    "top-k %" PRIu64 ": past npu_limits.h", c->name, c->num_layers,
                    c->num_experts, p->tile_rows, k);
    if ((uint64_t)p->stages * p->stage_layers != c->num_layers)
        return fail(err, errlen, NPU_ERR_FORMAT, "plan: %u stages of %u layers for %s's %u",
                    p->stages, p->stage_layers, c->name, c->num_layers);
    struct model_table m = { .cfg = c };
    m.w = calloc(((uint64_t)c->num_layers + 1) * KINDS, sizeof(*m.w));
    int rc = m.w ? NPU_OK : NPU_ERR_NOMEM;
    if (rc != NPU_OK)
        fail(err, errlen, rc, "no memory for the image's model check");
    if (rc == NPU_OK)
        model_tensors_each(c, note_tensor, &m);
    const struct npu_image_tensor *ts =
        (const void *)((const uint8_t *)image + h->tensors_off);
    if (rc == NPU_OK)
        rc = check_entries(&m, h, ts, err, errlen);
    if (rc == NPU_OK)
        rc = check_needs(&m, h, ts, err, errlen);
    if (rc == NPU_OK)
        rc = check_programs(c, h, image, err, errlen);
    if (rc == NPU_OK)
        rc = check_buffers(c, h, image, err, errlen);
    free(m.w);
    return rc;
}

uint32_t npu_prog_stage(const struct model_config *c, const struct npu_plan *p, uint32_t st,
                        struct npu_prog_op *ops)
{
    const uint32_t l0 = st * p->stage_layers, l1 = l0 + p->stage_layers;
    uint32_t n = 0;
    if (st == 0)
        ops[n++] = (struct npu_prog_op){ .kind = NPU_OP_EMBED };
    else
        ops[n++] = (struct npu_prog_op){ .kind = NPU_OP_RECV, .layer = l0 - 1 };
    for (uint32_t l = l0; l < l1; l++) {
        if (!p->weights_resident)
            ops[n++] = (struct npu_prog_op){ .kind = NPU_OP_STAGE, .layer = l };
        ops[n++] = (struct npu_prog_op){ .kind = NPU_OP_ATTENTION, .layer = l,
                                         .flags = model_is_sliding_layer(c, l)
                                                      ? NPU_OP_SLIDING : 0 };
        ops[n++] = (struct npu_prog_op){ .kind = c->arch == MODEL_MOE ? NPU_OP_MOE
                                                                      : NPU_OP_FFN,
                                         .layer = l };
    }
    if (st + 1 < p->stages)
        ops[n++] = (struct npu_prog_op){ .kind = NPU_OP_SEND, .layer = l1 - 1 };
    else
        ops[n++] = (struct npu_prog_op){ .kind = NPU_OP_HEAD };
    return n;
}
