/* SPDX-License-Identifier: MIT */
/*
 * The image against its model (npu_image.h, docs/images.md "Refusals"): what the structure
 * check (npu_image.c) cannot see, because it needs the model's configuration. An image whose
 * checksum was recomputed after its contents were changed passes the structure check; this
 * one makes sure such an image either runs or is refused before any core is released:
 *   - the model is one the interpreter takes (npu_limits.h), the plan's stages cover its
 *     layers and its partitions split the model into equal, non-empty shares
 *     (npu_partition_fits, the planner's rule);
 *   - every core's program is exactly its stage's program (npu_prog_stage: the planner
 *     writes programs with the same function);
 *   - under expert parallelism the expert map names every expert of every layer and no other;
 *   - every tensor entry is a tensor of the model (kind, layer) holding exactly the share the
 *     planner gives its rank (npu_tensor_share, the function the planner writes the table
 *     with), in blocks of rows x cols x the dtype's bytes;
 *   - every tensor of the model is there once for every rank, or once shared;
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
    uint32_t rows, cols;   /* one block's */
    uint32_t blocks;       /* experts: E, else 1 */
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

/* The share the planner gives `rank` of (kind, layer) (npu_tensor_share). */
static struct npu_share expected(const struct npu_image_header *h, const struct want *w,
                                 uint32_t kind, uint32_t layer, uint32_t rank)
{
    uint32_t n = 0;
    const struct npu_image_expert_slice *x =
        per_layer(kind) ? npu_image_expert_layer(h, layer, &n) : NULL;
    return npu_tensor_share(kind, w->rows * w->blocks, w->cols, w->blocks, &h->plan, x, n,
                            rank == NPU_IMAGE_IDLE ? 0 : rank);
}

/* Each entry a tensor of the model (kind, layer), holding exactly the share the planner
   gives its rank (npu_tensor_share) in blocks of rows x cols x the dtype's bytes. */
static int check_entries(const struct model_table *m, const struct npu_image_header *h,
                         const struct npu_image_tensor *ts, char *err, size_t errlen)
{
    const uint32_t eb = npu_dtype_bytes(h->plan.dtype);
    for (uint64_t i = 0; i < h->tensors_count; i++) {
        const struct npu_image_tensor *t = &ts[i];
        const bool known = t->kind < KINDS && (!per_layer(t->kind) ||
                                               t->layer < m->cfg->num_layers);
        const struct want *w = known ? slot(m, t->kind, t->layer) : NULL;
        if (!w || !w->rows)
            return fail(err, errlen, NPU_ERR_FORMAT, "tensor %" PRIu64 " (kind %u, layer %u) "
                        "is not a tensor of %s", i, t->kind, t->layer, m->cfg->name);
        if (t->rank != NPU_IMAGE_IDLE && t->rank >= h->plan.tp)
            return fail(err, errlen, NPU_ERR_FORMAT, "tensor %" PRIu64 ": rank %u of tp %u", i,
                        t->rank, h->plan.tp);
        const struct npu_share s = expected(h, w, t->kind, t->layer, t->rank);
        if (!t->rows || !t->cols || s.rank != t->rank || s.block0 != t->block0 ||
            s.blocks != t->blocks ||
            s.rows != t->rows || s.cols != t->cols || s.row0 != t->row0 ||
            s.col0 != t->col0 || (uint64_t)t->rows * t->cols * eb != t->block_bytes)
            return fail(err, errlen, NPU_ERR_FORMAT, "tensor %" PRIu64 " (kind %u, layer %u, "
                        "rank %u): blocks %u+%u of [%u][%u] at (%u,%u), %" PRIu64 " bytes a "
                        "block; %s's plan gives blocks %u+%u of [%u][%u] at (%u,%u)", i,
                        t->kind, t->layer, t->rank, t->block0, t->blocks, t->rows, t->cols,
                        t->row0, t->col0, t->block_bytes, m->cfg->name, s.block0, s.blocks,
                        s.rows, s.cols, s.row0, s.col0);
    }
    return NPU_OK;
}

/* Every tensor of the model there once for every rank (its own share), or once for all
   (a shared copy): one pass over the entries into a bitmap of (kind, layer) x rank. */
static int check_needs(const struct model_table *m, const struct npu_image_header *h,
                       const struct npu_image_tensor *ts, char *err, size_t errlen)
{
    const uint32_t tp = h->plan.tp, L = m->cfg->num_layers;
    const uint64_t slots = ((uint64_t)L + 1) * KINDS, row = (uint64_t)tp + 1; /* + shared */
    uint8_t *seen = calloc(slots * row, 1);
    if (!seen)
        return fail(err, errlen, NPU_ERR_NOMEM, "no memory for the image's model check");
    int rc = NPU_OK;
    for (uint64_t i = 0; i < h->tensors_count && rc == NPU_OK; i++) { /* entries vetted */
        const uint64_t at = (uint64_t)(slot(m, ts[i].kind, ts[i].layer) - m->w);
        uint8_t *b = &seen[at * row + (ts[i].rank == NPU_IMAGE_IDLE ? tp : ts[i].rank)];
        if (*b)
            rc = fail(err, errlen, NPU_ERR_FORMAT, "tensor %" PRIu64 " (kind %u, layer %u, "
                      "rank %u) is given twice", i, ts[i].kind, ts[i].layer, ts[i].rank);
        *b = 1;
    }
    for (uint64_t at = 0; at < slots && rc == NPU_OK; at++) {
        const uint32_t k = (uint32_t)(at % KINDS), l = (uint32_t)(at / KINDS);
        if (!m->w[at].rows || per_layer(k) != (l < L) || seen[at * row + tp])
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

/* Under expert parallelism the map names, for every layer of the model, every expert of
   it and no other (npu_image.c checked the slices' order, units and overlaps; the cores
   index per-expert tables by these ids). */
static int check_expert_map(const struct model_config *c, const struct npu_image_header *h,
                            char *err, size_t errlen)
{
    if (!(npu_plan_is_ep(&h->plan) && h->plan.tp > 1))
        return NPU_OK;
    const struct npu_image_expert_slice *x =
        (const void *)((const uint8_t *)h + h->experts_off);
    for (uint64_t i = 0; i < h->experts_count; i++)
        if (x[i].layer >= c->num_layers || x[i].expert >= c->num_experts)
            return fail(err, errlen, NPU_ERR_FORMAT, "expert map: slice %" PRIu64 " names "
                        "layer %u, expert %u; %s has %u layers of %u experts", i, x[i].layer,
                        x[i].expert, c->name, c->num_layers, c->num_experts);
    uint8_t named[NPU_MODEL_EXPERTS_MAX];
    for (uint32_t l = 0; l < c->num_layers; l++) {
        uint32_t n = 0, count = 0;
        const struct npu_image_expert_slice *s = npu_image_expert_layer(h, l, &n);
        memset(named, 0, sizeof(named));
        for (uint32_t i = 0; i < n; i++)
            count += !named[s[i].expert], named[s[i].expert] = 1;
        if (count != c->num_experts)
            return fail(err, errlen, NPU_ERR_FORMAT, "expert map: layer %u names %u of %s's "
                        "%u experts", l, count, c->name, c->num_experts);
    }
    return NPU_OK;
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
    const uint64_t kx = p->expert_fanout > k ? p->expert_fanout : k; /* pairs a row makes */
    if (c->num_layers > NPU_MODEL_LAYERS_MAX || c->num_experts > NPU_MODEL_EXPERTS_MAX ||
        p->tile_rows * k > NPU_ROUTED_PAIRS_MAX ||
        ((uint64_t)p->moe_rows + p->tp - 1) / p->tp * kx > NPU_ROUTED_PAIRS_MAX)
        return fail(err, errlen, NPU_ERR_FORMAT, "%s: %u layers, %u experts, tile_rows %u x "
                    "top-k %" PRIu64 ", a rank's MoE rows x %" PRIu64 " slices: past "
                    "npu_limits.h", c->name, c->num_layers, c->num_experts, p->tile_rows, k,
                    kx);
    if ((uint64_t)p->stages * p->stage_layers != c->num_layers)
        return fail(err, errlen, NPU_ERR_FORMAT, "plan: %u stages of %u layers for %s's %u",
                    p->stages, p->stage_layers, c->name, c->num_layers);
    for (uint32_t g = 0; g < NPU_GEMM_COUNT; g++) /* equal, non-empty shares, as planned */
        if (npu_partition_fits(c, p, (enum npu_gemm)g, err, errlen) != NPU_OK)
            return NPU_ERR_FORMAT;
    struct model_table m = { .cfg = c };
    m.w = calloc(((uint64_t)c->num_layers + 1) * KINDS, sizeof(*m.w));
    int rc = m.w ? NPU_OK : NPU_ERR_NOMEM;
    if (rc != NPU_OK)
        fail(err, errlen, rc, "no memory for the image's model check");
    if (rc == NPU_OK)
        model_tensors_each(c, note_tensor, &m);
    const struct npu_image_tensor *ts =
        (const void *)((const uint8_t *)image + h->tensors_off);
    if (rc == NPU_OK) /* before the entries: their expected shares read the map */
        rc = check_expert_map(c, h, err, errlen);
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
