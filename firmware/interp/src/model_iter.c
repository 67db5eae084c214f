/* SPDX-License-Identifier: MIT */
/* Set-up, resident weights and the iteration loop of the interpreter (model_exec.h). */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "model_exec.h"
#include "model_moe.h"
#include "npu/engine.h"
#include "npu/hal.h"
#include "npu/vector.h"
#include "npu/wait.h"

extern char __image_end[];

/* Scratch tiles of the op loops below (not model state; a tile holds a segment per run, too
   large for the hart's stack): an op uses [0], or [0] and [1] for two tiles in flight;
   the MoE over the layer's finishing pass [1] inside layer_op_fused's [0]. */
static struct exec_tile op_tiles[2];

/* Layout offsets -> addresses in this core's SRAM. */
static void place_layout(struct exec_model *m, uint64_t base)
{
    uint64_t *f = (uint64_t *)&m->buf.a;
    for (size_t i = 0; i < offsetof(struct npu_act_layout, bytes) / 8; i++)
        f[i] += base;
}

static void index_tensors(struct exec_model *m)
{
    const struct npu_image_header *h = (const void *)m->image;
    const struct npu_image_tensor *ts = (const void *)(m->image + h->tensors_off);
    for (uint64_t i = 0; i < h->tensors_count; i++) {
        const struct npu_image_tensor *t = &ts[i];
        if (t->rank != NPU_IMAGE_IDLE && t->rank != m->rank)
            continue;
        if (t->kind == MT_EMBED)
            m->w.embed = t;
        else if (t->kind == MT_FINAL_NORM)
            m->w.final_norm = t;
        else if (t->kind == MT_LM_HEAD)
            m->w.lm_head = t;
        else
            m->w.t[t->layer][t->kind] = t;
    }
}

/* The double buffer's second copy (plan.stage_double): the last bytes of the staging
   buffer, as many as the largest non-expert part of this core's layers (the planner's
   sizing, npu_stage_map_layer). False, said on the console, if the buffer is too small. */
static bool stage_second(struct exec_model *m)
{
    const uint32_t L = m->plan->stage_layers, l0 = m->pipe.stage * L;
    uint64_t most = 0, whole = 0;
    for (uint32_t l = l0; l < l0 + L && l < m->cfg->num_layers; l++) {
        struct npu_stage_map map;
        npu_stage_map_layer(m->w.t[l], m->plan->expert_slots, &map);
        most = map.experts > most ? map.experts : most;
        whole = map.bytes > whole ? map.bytes : whole;
    }
    most = (most + 63) & ~63ull, whole = (whole + 63) & ~63ull;
    m->w.stage_b = m->w.stage + m->w.stage_bytes - most;
    if (whole + most <= m->w.stage_bytes)
        return true;
    printf("MODEL error: core %u: a staging buffer of %llu bytes holds no second copy of %llu "
           "bytes beside a layer's %llu\n", hal_self()->core_id,
           (unsigned long long)m->w.stage_bytes, (unsigned long long)most,
           (unsigned long long)whole);
    return false;
}

int exec_init(struct exec_model *m, const struct npu_image_core *core)
{
    const struct model_config *c = m->cfg;
    const struct npu_plan *p = m->plan;
    m->buf.sram = hal_self()->sram_base;
    if ((uint64_t)(uintptr_t)__image_end > m->buf.sram + NPU_IMAGE_APP_BASE ||
        noc_reserved_bytes() > NPU_IMAGE_NOC_RESERVE(hal_chip()->ncores)) {
        printf("MODEL error: core %u: firmware or NoC mailboxes overlap the plan's SRAM\n",
               hal_self()->core_id);
        return NPU_ERR_NOMEM;
    }
    if (c->num_layers > NPU_MODEL_LAYERS_MAX || c->num_experts > NPU_MODEL_EXPERTS_MAX ||
        (uint64_t)p->tile_rows * (c->experts_per_token ? c->experts_per_token : 1) >
            NPU_ROUTED_PAIRS_MAX ||
        ((uint64_t)p->moe_rows + p->tp - 1) / p->tp * c->experts_per_token >
            NPU_ROUTED_PAIRS_MAX) { /* the planner and the image check refuse these first */
        printf("MODEL error: %s: this firmware takes at most %u layers, %u experts and "
               "tile_rows (or an EP group's slice) x top-k %u\n", c->name,
               NPU_MODEL_LAYERS_MAX, NPU_MODEL_EXPERTS_MAX, NPU_ROUTED_PAIRS_MAX);
        return NPU_ERR_RANGE;
    }
    m->buf.eb = npu_dtype_bytes(p->dtype);
    m->buf.dt = p->dtype == NPU_IMAGE_BF16 ? NPU_DTYPE_BF16 : NPU_DTYPE_FP32;
    npu_act_layout(c, p, &m->buf.a);
    if (m->buf.a.bytes > core->sram_act_bytes) { /* an image planned by another layout */
        printf("MODEL error: core %u: the tile buffers need %llu bytes, the image planned "
               "%llu\n", hal_self()->core_id, (unsigned long long)m->buf.a.bytes,
               (unsigned long long)core->sram_act_bytes);
        return NPU_ERR_FORMAT;
    }
    place_layout(m, m->buf.sram + core->sram_act);
    const uint64_t hbm = (uint64_t)(uintptr_t)m->image;
    m->buf.x_in_sram = p->x_in_sram;
    m->buf.x_all = (p->x_in_sram ? m->buf.sram : hbm) + core->x_off;
    struct npu_moe_spill spill;
    npu_moe_spill_layout(c, p, &spill);
    if (spill.bytes && spill.cap < npu_moe_spill_group_rows(c, p, npu_moe_group_rows(p))) {
        printf("MODEL error: core %u: the MoE spill holds %llu rows, less than a group's\n",
               hal_self()->core_id, (unsigned long long)spill.cap);
        return NPU_ERR_FORMAT;
    }
    if (spill.bytes && core->x_bytes < npu_moe_x_rows_bytes(c, p) + spill.bytes) {
        printf("MODEL error: core %u: the residual rows and the MoE spill need %llu bytes of "
               "HBM, the image planned %llu\n", hal_self()->core_id,
               (unsigned long long)(npu_moe_x_rows_bytes(c, p) + spill.bytes),
               (unsigned long long)core->x_bytes);
        return NPU_ERR_FORMAT;
    }
    m->buf.kv_ring = (p->kv_in_sram ? m->buf.sram : hbm) + core->kv_off;
    m->buf.kv_pool = m->buf.sram + core->kv_pool_off;
    m->w.stage = m->buf.sram + core->sram_stage, m->w.stage_bytes = core->sram_stage_bytes;
    m->w.staged_next = 0, m->w.stage_deferred = 0;
    npu_kv_rank_shifts(p, m->kv_shift);
    index_tensors(m);
    exec_chain_init(m);
    if (p->stage_double && !stage_second(m))
        return NPU_ERR_FORMAT;
    if (m->tp > 1 && npu_plan_is_ep(p) && (!exec_moe_ep_owns(m) || !exec_moe_units_check(m)))
        return NPU_ERR_FORMAT;
    m->acct.layer = c->num_layers;
    m->acct.cat = EXEC_CAT_OTHER;
    exec_rebase_cat(m);
    return exec_reuse_init(m);
}

int exec_load_resident(struct exec_model *m)
{
    const struct npu_image_header *h = (const void *)m->image;
    const struct npu_image_tensor *ts = (const void *)(m->image + h->tensors_off);
    exec_set_cat(m, EXEC_CAT_WEIGHTS);
    for (uint64_t i = 0; i < h->tensors_count; i++) {
        const struct npu_image_tensor *t = &ts[i];
        if (t->sram_off == NPU_IMAGE_NOWHERE || t->blocks == 0 || /* EP: no experts here */
            (t->rank != NPU_IMAGE_IDLE && t->rank != m->rank) ||
            npu_plan_tensor_stage(m->plan, t) != m->pipe.stage)
            continue;
        uint64_t bytes = t->block_bytes * t->blocks;
        exec_copy(m, m->buf.sram + t->sram_off, (uint64_t)(uintptr_t)m->image + t->hbm_off, 1,
                  bytes, bytes, bytes);
        if (model_tensor_is_expert(t->kind))
            m->acct.stats[m->cfg->num_layers].expert_bytes += bytes; /* at load, once */
    }
    exec_set_cat(m, EXEC_CAT_OTHER);
    return exec_flush(m);
}

/* The segments of the runs inside tile rows [t0, t0 + n). */
static void make_tile(const struct exec_run *runs, uint32_t nruns, uint32_t t0, uint32_t n,
                      struct exec_tile *tile)
{
    tile->t0 = t0, tile->n = n, tile->nsegs = 0;
    uint32_t row = 0;
    for (uint32_t i = 0; i < nruns; i++) {
        uint32_t lo = row > t0 ? row : t0, end = row + runs[i].count;
        uint32_t hi = end < t0 + n ? end : t0 + n;
        if (lo < hi)
            tile->segs[tile->nsegs++] = (struct exec_seg){
                .run = &runs[i], .req = runs[i].req, .pos = runs[i].pos + (lo - row),
                .row = lo - t0, .count = hi - lo };
        row = end;
    }
}

/* Embeddings of the tile's rows into its residual rows (segment by segment: a walk over
   every run's rows per tile would cost the harts rows x tiles steps per layer op). */
static void embed_tile(struct exec_model *m, const struct exec_tile *tile)
{
    const uint64_t row = (uint64_t)m->cfg->hidden_size * m->buf.eb;
    const uint64_t table = (uint64_t)(uintptr_t)m->image + m->w.embed->hbm_off;
    for (uint32_t s = 0; s < tile->nsegs; s++) {
        const struct exec_seg *g = &tile->segs[s];
        const uint32_t *tokens = g->run->tokens + (g->pos - g->run->pos);
        for (uint32_t j = 0; j < g->count; j++)
            exec_copy(m, tile->xt + (uint64_t)(g->row + j) * row, table + tokens[j] * row, 1,
                      row, row, row);
    }
}

int exec_tile_full(struct exec_model *m, const struct npu_prog_op *op, struct exec_tile *tile,
                   uint64_t x)
{
    const uint64_t row = (uint64_t)m->cfg->hidden_size * m->buf.eb, n = tile->n;
    int rc = NPU_OK;
    exec_set_cat(m, EXEC_CAT_OTHER);
    const bool copies = !m->buf.x_in_sram && !tile->in_xt;
    if (copies && op->kind != NPU_OP_EMBED)
        exec_copy(m, tile->xt, x, 1, n * row, n * row, n * row);
    if (op->flags & EXEC_OP_PREFETCH)
        exec_copy(m, tile->pre_dst, tile->pre_src, 1, tile->pre_bytes, tile->pre_bytes,
                  tile->pre_bytes);
    switch (op->kind) {
    case NPU_OP_EMBED: embed_tile(m, tile); break;
    case NPU_OP_ATTENTION:
        rc = exec_attention(m, op->layer, op->flags & NPU_OP_SLIDING, tile);
        if (rc == NPU_OK && (op->flags & EXEC_OP_WITH_FFN)) {
            if (tile->t0 == 0)
                exec_stage_next(m, op->layer); /* at the FFN, as layer_op does */
            rc = exec_ffn(m, op->layer, tile);
        }
        break;
    case NPU_OP_FFN: rc = exec_ffn(m, op->layer, tile); break;
    default: rc = exec_moe(m, op->layer, tile); break;
    }
    exec_set_cat(m, EXEC_CAT_OTHER);
    if (rc == NPU_OK && (copies || (op->flags & EXEC_OP_WITH_FFN)))
        exec_copy(m, x, tile->xt, 1, n * row, n * row, n * row);
    return rc;
}

static int run_tile(struct exec_model *m, const struct npu_prog_op *op, struct exec_tile *tile,
                    uint64_t x)
{
    return m->treuse.enabled ? exec_reuse_tile(m, op, tile, x) : exec_tile_full(m, op, tile, x);
}

/* Whether the MoE layers' attention and MoE run fused, group by group: with the residual rows in
   HBM and EP MoE groups larger than a tile, attention's tiles of a group leave their rows in
   xt (sized for a group), the MoE runs over them there, and each row is copied in and out
   once a layer instead of twice (prefill-2048 of Qwen3-30B-A3B: 32 MB a layer and rank). */
static bool layer_fused(const struct exec_model *m)
{
    return m->cfg->arch == MODEL_MOE && npu_moe_groups_in_xt(m->plan);
}

/* Residual rows [row0, row0 + n) from x_all into SRAM at buf (in) or back, outside any
   tile. */
static int rows_copy(struct exec_model *m, uint64_t buf, uint32_t row0, uint32_t n, bool in)
{
    const uint64_t row = (uint64_t)m->cfg->hidden_size * m->buf.eb, bytes = n * row;
    const uint64_t x = m->buf.x_all + (uint64_t)row0 * row;
    int rc = m->treuse.enabled ? exec_reuse_tile_flush(m) : NPU_OK; /* replays first */
    if (rc != NPU_OK)
        return rc;
    const enum exec_cat was = m->acct.cat;
    exec_set_cat(m, EXEC_CAT_OTHER);
    if (in)
        exec_copy(m, buf, x, 1, bytes, bytes, bytes);
    else
        exec_copy(m, x, buf, 1, bytes, bytes, bytes);
    exec_set_cat(m, was);
    return NPU_OK;
}

static int group_copy(struct exec_model *m, uint32_t row0, uint32_t n, bool in)
{
    return rows_copy(m, m->buf.a.xt, row0, n, in);
}

/* The MoE over the layer's groups at once (npu_moe_layer_wide): more than one group this
   iteration. */
static bool layer_wide(const struct exec_model *m, uint32_t rows)
{
    return npu_moe_layer_wide(m->plan) && rows > npu_moe_group_rows(m->plan);
}

/* The MoE of one group in xt (tile: the group): group by group, or its first pass. */
static int group_moe(struct exec_model *m, uint32_t l, struct exec_tile *tile, uint64_t x,
                     bool wide)
{
    const struct npu_prog_op moe = { .kind = NPU_OP_MOE, .layer = l };
    if (!wide)
        return run_tile(m, &moe, tile, x);
    int rc = m->treuse.enabled ? exec_reuse_tile_flush(m) : NPU_OK; /* replays first */
    return rc == NPU_OK ? exec_moe_wide_dispatch_group(m, l, tile) : rc;
}

/* The MoE over the layer's second and third passes for the wave of op rows [w0, w1): the
   experts once, then each group's combine into its residual rows. Runs in full under tile
   reuse (not recorded). */
static int layer_wide_finish(struct exec_model *m, uint32_t l, const struct exec_run *runs,
                             uint32_t nruns, uint32_t row0, uint32_t w0, uint32_t w1)
{
    const uint32_t G = npu_moe_group_rows(m->plan);
    struct exec_tile *const tile = &op_tiles[1]; /* layer_op_fused has [0] */
    int rc = exec_moe_wide_serve_slices(m, l);
    for (uint32_t g0 = w0; rc == NPU_OK && g0 < w1; g0 += G) {
        const uint32_t gn = w1 - g0 < G ? w1 - g0 : G;
        rc = group_copy(m, row0 + g0, gn, true);
        make_tile(runs, nruns, g0, gn, tile);
        tile->xt = m->buf.a.xt, tile->in_xt = true;
        if (rc == NPU_OK)
            rc = exec_moe_wide_combine_group(m, l, tile, g0 / G);
        if (rc == NPU_OK)
            rc = group_copy(m, row0 + g0, gn, false);
    }
    exec_moe_wide_start_wave(m);
    return rc;
}

/* The layer's attention op and then its MoE op, group by group (layer_fused), or with the
   MoE over the layer (layer_wide) in three passes. The groups are whole tiles (moe_rows
   rounded down to tile_rows; fewer rows than a MoE group holds): attention's tiles keep the
   op-row alignment split attention's window slots assume. */
static int layer_op_fused(struct exec_model *m, const struct npu_prog_op *op,
                          const struct exec_run *runs, uint32_t nruns, uint32_t row0,
                          uint32_t rows)
{
    const uint64_t row = (uint64_t)m->cfg->hidden_size * m->buf.eb;
    const uint32_t T = m->plan->tile_rows, G = npu_moe_group_rows(m->plan);
    const bool wide = layer_wide(m, rows);
    struct exec_tile *const tile = &op_tiles[0];
    int rc = NPU_OK;
    exec_set_layer(m, op->layer);
    uint32_t wave = 0; /* the first op row of the wave */
    if (wide)
        exec_moe_wide_begin_layer(m);
    for (uint32_t g0 = 0; rc == NPU_OK && g0 < rows; g0 += G) {
        const uint32_t gn = rows - g0 < G ? rows - g0 : G;
        const uint64_t x = m->buf.x_all + (uint64_t)(row0 + g0) * row;
        if (wide && g0 > wave && !exec_moe_wide_has_room(m, gn)) {
            rc = layer_wide_finish(m, op->layer, runs, nruns, row0, wave, g0);
            wave = g0;
        }
        if (rc == NPU_OK)
            rc = group_copy(m, row0 + g0, gn, true);
        for (uint32_t t0 = g0; rc == NPU_OK && t0 < g0 + gn; t0 += T) {
            make_tile(runs, nruns, t0, g0 + gn - t0 < T ? g0 + gn - t0 : T, tile);
            tile->xt = m->buf.a.xt + (uint64_t)(t0 - g0) * row, tile->in_xt = true;
            rc = run_tile(m, op, tile, x + (uint64_t)(t0 - g0) * row);
        }
        make_tile(runs, nruns, g0, gn, tile);
        tile->xt = m->buf.a.xt, tile->in_xt = true;
        if (rc == NPU_OK)
            rc = group_moe(m, op->layer, tile, x, wide);
        if (rc == NPU_OK)
            rc = group_copy(m, row0 + g0, gn, false);
    }
    if (rc == NPU_OK && wide)
        rc = layer_wide_finish(m, op->layer, runs, nruns, row0, wave, rows);
    return rc == NPU_OK && m->treuse.enabled ? exec_reuse_tile_flush(m) : rc;
}

/* Whether a dense layer runs its attention and FFN tile by tile: with the residual rows in
   HBM, a tile's rows then come in and go back once a layer instead of once an op (Qwen3-8B
   prefill-2048 on large-64: rank 0's copies took 20.6 of its 92.2 ms), through two tiles
   in SRAM, the next tile's rows loading while this one computes. Tile i's FFN runs before
   tile i + 1's attention, which reads only the keys and values the attention of tiles <= i
   wrote into the cache, so no result changes. */
static bool layer_dense_fused(const struct exec_model *m)
{
    return npu_layout_xt2(m->cfg, m->plan);
}

/* The dense layer of op (its attention; the program's next op is its FFN) tile by tile:
   each tile one op (EXEC_OP_WITH_FFN) that loads the next tile's rows into the other
   buffer first (EXEC_OP_PREFETCH) and writes its own back last. */
static int layer_op_dense_fused(struct exec_model *m, const struct npu_prog_op *op,
                                const struct exec_run *runs, uint32_t nruns, uint32_t row0,
                                uint32_t rows)
{
    const uint64_t row = (uint64_t)m->cfg->hidden_size * m->buf.eb;
    const uint64_t xt[2] = { m->buf.a.xt, m->buf.a.xt2 };
    const uint32_t T = m->plan->tile_rows;
    struct exec_tile *const tile = &op_tiles[0];
    exec_set_layer(m, op->layer);
    int rc = rows_copy(m, xt[0], row0, rows < T ? rows : T, true);
    for (uint32_t t0 = 0, i = 0; rc == NPU_OK && t0 < rows; t0 += T, i ^= 1) {
        const uint32_t n = rows - t0 < T ? rows - t0 : T, next = t0 + n;
        const uint32_t nn = rows - next < T ? rows - next : T; /* 0 after the last */
        const uint64_t x = m->buf.x_all + (uint64_t)(row0 + t0) * row;
        struct npu_prog_op fused = *op;
        fused.flags |= EXEC_OP_WITH_FFN | (nn ? EXEC_OP_PREFETCH : 0);
        make_tile(runs, nruns, t0, n, tile);
        tile->xt = xt[i], tile->in_xt = true;
        tile->pre_dst = xt[i ^ 1], tile->pre_src = x + (uint64_t)n * row, tile->pre_bytes = nn * row;
        rc = run_tile(m, &fused, tile, x);
    }
    return rc == NPU_OK && m->treuse.enabled ? exec_reuse_tile_flush(m) : rc;
}

/* A paired dense FFN over tiles of residual rows in SRAM, each tile's all-reduce beside the
   next tile's gate and up GEMM (exec_ffn_begin). Not under tile reuse, whose tiles start
   with the engines idle. */
static bool ffn_overlapped(const struct exec_model *m)
{
    return m->buf.x_in_sram && !m->treuse.enabled && exec_ffn_pipelined(m);
}

static int layer_ffn_overlapped(struct exec_model *m, const struct npu_prog_op *op,
                                const struct exec_run *runs, uint32_t nruns, uint32_t row0,
                                uint32_t rows)
{
    const uint64_t row = (uint64_t)m->cfg->hidden_size * m->buf.eb;
    const uint32_t T = m->plan->tile_rows;
    struct exec_tile *const tiles = op_tiles;
    exec_stage_next(m, op->layer);
    make_tile(runs, nruns, 0, rows < T ? rows : T, &tiles[0]);
    tiles[0].xt = m->buf.x_all + (uint64_t)row0 * row;
    exec_ffn_begin(m, op->layer, &tiles[0]);
    int rc = NPU_OK;
    for (uint32_t t0 = 0, i = 0; rc == NPU_OK && t0 < rows; t0 += T, i ^= 1) {
        const uint32_t next = t0 + tiles[i].n;
        exec_ffn_middle(m, op->layer, &tiles[i]);
        if (next < rows) {
            make_tile(runs, nruns, next, rows - next < T ? rows - next : T, &tiles[i ^ 1]);
            tiles[i ^ 1].xt = m->buf.x_all + (uint64_t)(row0 + next) * row;
            exec_ffn_begin(m, op->layer, &tiles[i ^ 1]);
        }
        rc = exec_ffn_end(m, op->layer, &tiles[i]);
    }
    return rc;
}

/* Attention over tiles of residual rows in SRAM, tile i + 1's norm and QKV GEMM issued
   before tile i's O collective, which waits only for its O GEMM and runs beside them
   (exec_attention_begin). Not under tile reuse, whose tiles start with the engines idle. */
static bool attn_overlapped(const struct exec_model *m)
{
    return m->buf.x_in_sram && !m->treuse.enabled && m->tp > 1;
}

static int layer_attn_overlapped(struct exec_model *m, const struct npu_prog_op *op,
                                 const struct exec_run *runs, uint32_t nruns, uint32_t row0,
                                 uint32_t rows)
{
    const uint64_t row = (uint64_t)m->cfg->hidden_size * m->buf.eb;
    const uint32_t T = m->plan->tile_rows, l = op->layer;
    const bool sliding = op->flags & NPU_OP_SLIDING;
    struct exec_tile *const tiles = op_tiles;
    bool started[2];
    make_tile(runs, nruns, 0, rows < T ? rows : T, &tiles[0]);
    tiles[0].xt = m->buf.x_all + (uint64_t)row0 * row;
    started[0] = exec_attention_begin(m, l, &tiles[0]);
    int rc = NPU_OK;
    for (uint32_t t0 = 0, i = 0; rc == NPU_OK && t0 < rows; t0 += T, i ^= 1) {
        const uint32_t next = t0 + tiles[i].n;
        rc = exec_attention_mid(m, l, sliding, &tiles[i], started[i]);
        if (rc == NPU_OK && next < rows) {
            make_tile(runs, nruns, next, rows - next < T ? rows - next : T, &tiles[i ^ 1]);
            tiles[i ^ 1].xt = m->buf.x_all + (uint64_t)(row0 + next) * row;
            started[i ^ 1] = exec_attention_begin(m, l, &tiles[i ^ 1]);
        }
        if (rc == NPU_OK)
            rc = exec_attention_end(m, l, &tiles[i], true);
    }
    return rc;
}

/* Runs one layer op over every tile of the runs' rows, which start at residual row row0;
   the residual rows move in and out unless in SRAM. A tile may replay a recorded one of its
   shape instead (tile reuse, model_reuse_tile.c). */
static int layer_op(struct exec_model *m, const struct npu_prog_op *op,
                    const struct exec_run *runs, uint32_t nruns, uint32_t row0, uint32_t rows)
{
    const uint64_t row = (uint64_t)m->cfg->hidden_size * m->buf.eb;
    exec_set_layer(m, op->kind == NPU_OP_EMBED ? m->cfg->num_layers : op->layer);
    /* EP MoE runs over groups of moe_rows (xt holds a group when the residual is in HBM) */
    if (op->kind == NPU_OP_ATTENTION && layer_fused(m))
        return layer_op_fused(m, op, runs, nruns, row0, rows);
    if (op->kind == NPU_OP_MOE && layer_fused(m))
        return NPU_OK; /* ran with the layer's attention, which the program puts before it */
    if (op->kind == NPU_OP_ATTENTION && layer_dense_fused(m))
        return layer_op_dense_fused(m, op, runs, nruns, row0, rows);
    if (op->kind == NPU_OP_FFN && layer_dense_fused(m))
        return NPU_OK; /* likewise */
    if (op->kind == NPU_OP_FFN && ffn_overlapped(m))
        return layer_ffn_overlapped(m, op, runs, nruns, row0, rows);
    if (op->kind == NPU_OP_ATTENTION && attn_overlapped(m))
        return layer_attn_overlapped(m, op, runs, nruns, row0, rows);
    const uint32_t step = op->kind == NPU_OP_MOE ? m->plan->moe_rows : m->plan->tile_rows;
    if (op->kind == NPU_OP_FFN)
        exec_stage_next(m, op->layer);
    int rc = NPU_OK;
    for (uint32_t t0 = 0; rc == NPU_OK && t0 < rows; t0 += step) {
        struct exec_tile *const tile = &op_tiles[0];
        uint32_t n = rows - t0 < step ? rows - t0 : step;
        make_tile(runs, nruns, t0, n, tile);
        const uint64_t x = m->buf.x_all + (uint64_t)(row0 + t0) * row;
        tile->xt = m->buf.x_in_sram ? x : m->buf.a.xt, tile->in_xt = false;
        rc = run_tile(m, op, tile, x);
    }
    return rc == NPU_OK && m->treuse.enabled ? exec_reuse_tile_flush(m) : rc;
}

bool exec_op_runs_all(const struct npu_prog_op *op, const struct exec_batch *b)
{
    return op->kind == NPU_OP_EMBED ? b->layer0 == 0
                                    : op->layer >= b->layer0 && op->layer < b->layer1;
}

bool exec_op_has_rows(const struct npu_prog_op *op, const struct exec_batch *b)
{
    /* the prefill runs take part in their layers only (the embedding: before layer 0);
       the decode runs, after them, in every layer */
    return op->kind == NPU_OP_HEAD || exec_op_runs_all(op, b) || b->nprefill < b->nruns;
}

int exec_op(struct exec_model *m, const struct npu_prog_op *op, const struct exec_batch *b,
            uint32_t *out, float *logit)
{
    if (op->kind == NPU_OP_HEAD)
        return exec_head(m, b->runs, b->nruns, out, logit);
    if (!exec_op_has_rows(op, b))
        return NPU_OK; /* no rows in this layer: nothing to stage or run */
    uint32_t rows = 0, prows = 0;
    for (uint32_t i = 0; i < b->nruns; i++)
        rows += b->runs[i].count, prows += i < b->nprefill ? b->runs[i].count : 0;
    const bool all = exec_op_runs_all(op, b);
    const uint32_t first = all ? 0 : b->nprefill, row0 = all ? 0 : prows;
    if (op->kind == NPU_OP_STAGE) {
        /* the next layer runs in this iteration and on this core's stage */
        const struct npu_prog_op next = { .kind = NPU_OP_STAGE, .layer = op->layer + 1 };
        /* not under layer reuse: a recorded layer would carry its neighbour's load, and a
           replayed one loads nothing (measured: 11.6 % more HBM bytes than full simulation) */
        const bool more = !m->lreuse.enabled && (op->layer + 1) % m->plan->stage_layers != 0 &&
                          op->layer + 1 < m->cfg->num_layers && exec_op_has_rows(&next, b);
        exec_set_layer(m, op->layer);
        exec_stage_layer(m, op->layer, more);
        return NPU_OK;
    }
    if (op->kind == NPU_OP_SEND || op->kind == NPU_OP_RECV) {
        /* the rows that ran the sending stage's last layer, on both sides */
        exec_set_layer(m, op->kind == NPU_OP_SEND ? op->layer : op->layer + 1);
        return op->kind == NPU_OP_SEND ? exec_pipe_send(m, row0, rows - row0)
                                       : exec_pipe_recv(m, row0, rows - row0);
    }
    return layer_op(m, op, b->runs + first, b->nruns - first, row0, rows - row0);
}

int exec_iteration(struct exec_model *m, const struct npu_prog_op *ops, uint32_t nops,
                   const struct exec_batch *b, uint32_t *out, float *logit)
{
    uint32_t rows = 0;
    for (uint32_t i = 0; i < b->nruns; i++)
        rows += b->runs[i].count;
    assert(b->nruns >= 1 && b->nruns <= m->plan->max_batch && rows <= m->plan->max_tokens);
    assert(b->nprefill <= b->nruns && b->layer0 <= b->layer1 &&
           b->layer1 <= m->cfg->num_layers);
    /* the expert ring keeps what it holds within an iteration only, so expert-load bytes
       count each routed expert once per layer and iteration (as the reference does) */
    memset(m->w.ring.held, 0, sizeof(m->w.ring.held));
    m->w.ring.backward = false;
    m->w.staged_next = 0; /* the head may have streamed through the staging buffer */
    m->w.stage_deferred = 0;
    int rc = NPU_OK;
    for (uint32_t i = 0, used = 0; rc == NPU_OK && i < nops; i += used) {
        used = 0;
        if (m->lreuse.enabled)
            rc = exec_reuse_layers(m, ops + i, nops - i, b, &used);
        if (rc == NPU_OK && used == 0)
            rc = exec_op(m, &ops[i], b, out, logit), used = 1;
    }
    if (rc == NPU_OK && m->pipe.stage + 1 < m->pipe.stages)
        rc = exec_head_tokens_from_last_stage(m, b->runs, b->nruns, out, logit);
    exec_set_layer(m, m->cfg->num_layers);
    exec_set_cat(m, EXEC_CAT_OTHER);
    m->acct.iterations++;
    return rc;
}
