/* SPDX-License-Identifier: MIT */
/*
 * The op loops of a layer over its tiles of rows (model_exec.h): a tile's op in full
 * (exec_tile_full), a MoE layer's attention and MoE group by group or over the layer, a
 * dense layer's attention and FFN tile by tile when the residual rows are in HBM, and the
 * overlapped loops that issue tile i + 1's first GEMM before tile i's last collective.
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "model_exec.h"
#include "model_moe.h"
#include "npu/hal.h"

/* Scratch tiles of the op loops below (not model state; a tile holds a segment per run, too
   large for the hart's stack): an op uses [0], or [0] and [1] for two tiles in flight
   (attn_tiles: three); the MoE over the layer's finishing pass [1] inside layer_op_fused's
   [0]. */
static struct exec_tile op_tiles[3];

/* The segments of the runs inside tile rows [t0, t0 + n). */
static void make_tile(const struct exec_run *runs, uint32_t nruns, uint32_t t0, uint32_t n,
                      struct exec_tile *tile)
{
    tile->t0 = t0, tile->n = n, tile->nsegs = 0;
    tile->spill.bytes = tile->back.bytes = tile->pre.bytes = 0;
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
    tile->whole = t0 == 0 && n == row; /* row: every run's rows */
}

void exec_make_tile(const struct exec_run *runs, uint32_t nruns, uint32_t n,
                    struct exec_tile *tile)
{
    make_tile(runs, nruns, 0, n, tile);
}

/* Embeddings of the tile's rows into its residual rows, a DMA gather per segment by the
   run's tokens where they are (the mailbox, or the model image's request pool: both stay
   until the iteration ends). One copy per row was half of the descriptors of a chunked
   serving run (docs/results.md). */
static void embed_tile(struct exec_model *m, const struct exec_tile *tile)
{
    const uint64_t row = (uint64_t)m->cfg->hidden_size * m->buf.eb;
    const uint64_t table = (uint64_t)(uintptr_t)m->image + m->w.embed->hbm_off;
    for (uint32_t s = 0; s < tile->nsegs; s++) {
        const struct exec_seg *g = &tile->segs[s];
        exec_gather(m, &(struct exec_gather_args){
                           .dst = tile->xt + (uint64_t)g->row * row, .table = table,
                           .index = g->run->tokens + (g->pos - g->run->pos), .rows = g->count,
                           .row_bytes = row });
    }
}

static int attn_tiles(struct exec_model *m, uint32_t l, bool sliding,
                      const struct exec_run *runs, uint32_t nruns, uint32_t base, uint32_t lo,
                      uint32_t hi, uint64_t x, bool in_xt);

/* A MoE group's attention (EXEC_OP_GROUP: `group` holds the group's rows in xt) through
   attn_tiles, which reuses op_tiles: so the group's runs and rows are read first. */
static int attn_group(struct exec_model *m, const struct npu_prog_op *op,
                      const struct exec_tile *group)
{
    if (group->nsegs == 0)
        return NPU_OK;
    const struct exec_seg *first = &group->segs[0], *last = &group->segs[group->nsegs - 1];
    const struct exec_run *runs = first->run;
    const uint32_t nruns = (uint32_t)(last->run - runs) + 1;
    const uint32_t base = group->t0 + first->row - (first->pos - runs->pos); /* runs[0]'s */
    const uint32_t lo = group->t0, hi = group->t0 + group->n;
    return attn_tiles(m, op->layer, op->flags & NPU_OP_SLIDING, runs, nruns, base, lo, hi,
                      group->xt, group->in_xt);
}

void exec_tile_side_copies(struct exec_model *m, const struct exec_tile *tile)
{
    if (tile->spill.bytes)
        exec_copy_side(m, tile->spill.dst, tile->spill.src, tile->spill.bytes);
    if (tile->back.bytes)
        exec_copy_side(m, tile->back.dst, tile->back.src, tile->back.bytes);
    if (tile->pre.bytes)
        exec_copy_side(m, tile->pre.dst, tile->pre.src, tile->pre.bytes);
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
    if (op->flags & EXEC_OP_PREFETCH) /* on the second queue, as rows_copy's */
        exec_tile_side_copies(m, tile);
    switch (op->kind) {
    case NPU_OP_EMBED: embed_tile(m, tile); break;
    case NPU_OP_ATTENTION:
        if (op->flags & EXEC_OP_GROUP) {
            rc = attn_group(m, op, tile);
            break;
        }
        rc = exec_attention(m, op->layer, op->flags & NPU_OP_SLIDING, tile);
        if (rc == NPU_OK && (op->flags & EXEC_OP_WITH_FFN)) {
            if (op->flags & EXEC_OP_LAST) /* not beside the other tiles' attention */
                exec_stage_next(m, op->layer);
            rc = exec_ffn(m, op->layer, tile);
        }
        break;
    case NPU_OP_FFN: rc = exec_ffn(m, op->layer, tile); break;
    default: rc = exec_moe(m, op->layer, tile); break;
    }
    exec_set_cat(m, EXEC_CAT_OTHER);
    if (rc == NPU_OK && (op->flags & EXEC_OP_WITH_FFN)) /* a fused tile's, as rows_copy's */
        exec_copy_side(m, x, tile->xt, n * row);
    else if (rc == NPU_OK && copies)
        exec_copy(m, x, tile->xt, 1, n * row, n * row, n * row);
    return rc;
}

static int run_tile(struct exec_model *m, const struct npu_prog_op *op, struct exec_tile *tile,
                    uint64_t x)
{
    return m->treuse.on ? exec_reuse_tile(m, op, tile, x) : exec_tile_full(m, op, tile, x);
}

/* Whether the MoE layers' attention and MoE run fused, group by group: with the residual rows in
   HBM and EP MoE groups larger than a tile, attention's tiles of a group leave their rows in
   xt (sized for a group), the MoE runs over them there, and each row is copied in and out
   once a layer instead of twice (prefill-2048 of Qwen3-30B-A3B: 32 MB a layer and rank). */
static bool layer_fused(const struct exec_model *m)
{
    return m->cfg->arch == MODEL_MOE && npu_moe_groups_in_xt(m->plan);
}

/* The copy of residual rows [row0, row0 + n) from x_all into SRAM at buf (in) or back. */
static struct exec_side_copy rows_span(const struct exec_model *m, uint64_t buf,
                                       uint32_t row0, uint32_t n, bool in)
{
    const uint64_t row = (uint64_t)m->cfg->hidden_size * m->buf.eb;
    const uint64_t x = m->buf.x_all + (uint64_t)row0 * row;
    return (struct exec_side_copy){ in ? buf : x, in ? x : buf, (uint64_t)n * row };
}

/* c on the second DMA queue now, outside any tile, after the replays queued. */
static int side_copy_now(struct exec_model *m, struct exec_side_copy c)
{
    int rc = m->treuse.enabled ? exec_reuse_tile_flush(m) : NPU_OK; /* replays first */
    if (rc != NPU_OK)
        return rc;
    const enum exec_cat was = m->acct.cat;
    exec_set_cat(m, EXEC_CAT_OTHER);
    exec_copy_side(m, c.dst, c.src, c.bytes);
    exec_set_cat(m, was);
    return NPU_OK;
}

/* Residual rows [row0, row0 + n) from x_all into SRAM at buf (in) or back, outside any
   tile. */
static int rows_copy(struct exec_model *m, uint64_t buf, uint32_t row0, uint32_t n, bool in)
{
    return side_copy_now(m, rows_span(m, buf, row0, n, in));
}

/* The group buffers of a fused MoE layer: xt, and with the MoE over the layer a second
   (npu_act_layout's xg_attn or xg_comb, by pass), so that the next group's rows load
   while this one computes. */
struct group_bufs {
    uint64_t buf[2];
    uint32_t next;   /* the buffer the next group takes */
    bool loaded;     /* the next group's rows are already loading into it */
};

static void group_bufs_init(struct group_bufs *b, uint64_t xt, uint64_t second)
{
    b->buf[0] = xt, b->buf[1] = second; /* xt: none */
    b->next = 0, b->loaded = false;
}

/* The buffer of the next group, rows [row0, row0 + n) of x_all: loaded now unless already
   loading. */
static int group_take(struct exec_model *m, struct group_bufs *b, uint32_t row0, uint32_t n,
                      uint64_t *buf)
{
    *buf = b->buf[b->next];
    b->next ^= 1;
    const bool was = b->loaded;
    b->loaded = false;
    return was ? NPU_OK : rows_copy(m, *buf, row0, n, true);
}

/* Starts loading the group after the one just taken (rows [row0, row0 + n)) into the other
   buffer, when there is one: on the second DMA queue, behind the copy back of the group
   that last used it. */
static int group_prefetch(struct exec_model *m, struct group_bufs *b, uint32_t row0, uint32_t n)
{
    if (b->buf[0] == b->buf[1] || b->loaded || !n)
        return NPU_OK;
    b->loaded = true;
    return rows_copy(m, b->buf[b->next], row0, n, true);
}

/*
 * Under tile reuse the MoE over the layer's units (a group's attention, its dispatch, its
 * combine: docs/images.md, "Tile reuse") start with the engines idle. So that the rows'
 * copies still run beside a group's work, as in the full run, where the group before's rows
 * go back and the next group's load on the second queue while it computes, the unit issues
 * them at its start (tile->back, then tile->pre: exec_tile_side_copies), in that order on
 * that queue; a copy before the unit would run alone. A replayed unit's span holds its
 * recorded unit's copies (the same sizes but for a wave's first and last groups).
 */
/* A unit's side copies (exec_tile's back and pre): the group before's copy back (*back,
   taken) and the next group's load (group_prefetch's, n rows from row0; n = 0: none). */
static void group_sides_in(struct exec_model *m, struct group_bufs *b, uint32_t row0,
                           uint32_t n, struct exec_side_copy *back,
                           struct exec_side_copy sides[2])
{
    sides[0] = *back, sides[1].bytes = 0;
    back->bytes = 0;
    if (b->buf[0] == b->buf[1] || b->loaded || !n)
        return;
    b->loaded = true;
    sides[1] = rows_span(m, b->buf[b->next], row0, n, true);
}

/* The group's rows back from buf: left to the next unit under tile reuse (*back), else
   now; now too with one group buffer, which the next group's rows load into as it is
   taken. */
static int group_back(struct exec_model *m, const struct group_bufs *b, uint64_t buf,
                      uint32_t row0, uint32_t n, struct exec_side_copy *back)
{
    if (!m->treuse.on || b->buf[0] == b->buf[1])
        return rows_copy(m, buf, row0, n, false);
    *back = rows_span(m, buf, row0, n, false);
    return NPU_OK;
}

/* A copy back no unit took (the wave's last group's). */
static int group_back_now(struct exec_model *m, struct exec_side_copy *back)
{
    const struct exec_side_copy c = *back;
    back->bytes = 0;
    return c.bytes ? side_copy_now(m, c) : NPU_OK;
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

/* The MoE over the layer's third pass for the wave of op rows [w0, w1): each group's
   combine into its residual rows (the next group's loading meanwhile into the other
   buffer). Under tile reuse each combine is a unit (model_moe_wide.c) holding those copies
   (group_sides_in). */
static int layer_wide_combines(struct exec_model *m, uint32_t l, const struct exec_run *runs,
                               uint32_t nruns, uint32_t row0, uint32_t w0, uint32_t w1)
{
    const uint32_t G = npu_moe_group_rows(m->plan);
    struct exec_tile *const tile = &op_tiles[1]; /* layer_op_fused has [0] */
    struct group_bufs bufs, *const b = &bufs;
    group_bufs_init(b, m->buf.a.xt, m->buf.a.xg_comb);
    struct exec_side_copy back = { 0 };
    int rc = NPU_OK;
    if (w0 < w1)
        exec_moe_wide_stage_first(m, l, w0 / G);
    for (uint32_t g0 = w0; rc == NPU_OK && g0 < w1; g0 += G) {
        const uint32_t gn = w1 - g0 < G ? w1 - g0 : G, g1 = g0 + gn;
        uint64_t buf;
        rc = group_take(m, b, row0 + g0, gn, &buf);
        make_tile(runs, nruns, g0, gn, tile);
        tile->xt = buf, tile->in_xt = true;
        struct exec_side_copy sides[2];
        if (rc == NPU_OK && m->treuse.on) {
            group_sides_in(m, b, row0 + g1, w1 - g1 < G ? w1 - g1 : G, &back, sides);
            tile->back = sides[0], tile->pre = sides[1];
        } else if (rc == NPU_OK)
            rc = group_prefetch(m, b, row0 + g1, w1 - g1 < G ? w1 - g1 : G);
        if (rc == NPU_OK)
            rc = exec_moe_wide_combine_group(m, l, tile, g0 / G, true, true);
        if (rc == NPU_OK)
            rc = group_back(m, b, buf, row0 + g0, gn, &back);
    }
    if (rc == NPU_OK)
        rc = group_back_now(m, &back);
    exec_moe_wide_start_wave(m, l);
    return rc;
}

/* The MoE over the layer's second and third passes for the wave of op rows [w0, w1): the
   experts once, then the combines. */
static int layer_wide_finish(struct exec_model *m, uint32_t l, const struct exec_run *runs,
                             uint32_t nruns, uint32_t row0, uint32_t w0, uint32_t w1)
{
    int rc = exec_moe_wide_serve_slices(m, l);
    return rc == NPU_OK ? layer_wide_combines(m, l, runs, nruns, row0, w0, w1) : rc;
}

/*
 * A dense layer's last FFN tile's all-reduce and residual add, left to the next layer's
 * attention (attn_tiles), which runs them once its first two tiles' norms and QKV GEMMs and
 * (with attn_deep) the first tile's QKV collectives and steps are issued, so the array
 * computes those while the all-reduce runs
 * (Qwen3-8B prefill-512 at context 8K on large-64: the next layer's first QKV GEMM waited
 * 8.8 us a layer for it). Run after the second tile's norm and QKV GEMM are issued too:
 * before them, the hart sat in the all-reduce while that GEMM waited (7.6 us). The
 * attention's first tiles read rows the FFN finished before; the last tile's rows are read
 * by its own norm, after these; the O GEMM, the next writer of xb2, comes after too. Only where
 * that attention is the next op over the same rows on this core's stage (exec_layer_op
 * settles them for any other), the FFN has more than two tiles, and nothing is reused.
 */
static struct {
    bool set;
    uint32_t layer;
    struct exec_tile last; /* its last tile: n and xt (exec_ffn_end reads no more) */
} ffn_later;

static bool ffn_defers(const struct exec_model *m, uint32_t rows)
{
    /* attn_next: the next op is the next layer's attention over these rows on this core,
       nothing reused; more than two tiles: it begins its first two before it runs this */
    return m->attn_next && rows > 2 * m->plan->tile_rows;
}

/* The waiting FFN end, now: from the next layer's attention (ffn_defers' attn_next made
   it the next op, over the same rows) or before any other op (exec_layer_rows_settle). */
static int ffn_later_run(struct exec_model *m)
{
    if (!ffn_later.set)
        return NPU_OK;
    ffn_later.set = false;
    const enum exec_cat was = m->acct.cat;
    int rc = exec_ffn_end(m, ffn_later.layer, &ffn_later.last);
    exec_set_cat(m, was);
    return rc;
}

/*
 * A layer's combines left to the next layer's first pass (layer_op_fused): layer `layer`
 * over op rows [0, rows) from row0 of `runs`, one wave, its experts served. The next
 * layer's pass over the same rows runs group g's combine right before group g's
 * attention, on the rows it has just loaded: each residual row then comes in and goes back
 * once a layer instead of twice (Qwen3-30B-A3B prefill-2048 on large-64: 16 of a rank's 55
 * MiB of HBM traffic a layer), and the combines' collectives come between attention's
 * work instead of in a pass of their own with the matrix idle. Layer l + 1's attention of
 * group g reads its own rows and the keys and values of groups <= g, all of layer l's
 * output by then, so no result changes. Anything else runs the combines first
 * (exec_layer_settle). The per-layer statistics charge a layer's combines to the next.
 */
static struct {
    bool set;
    uint32_t layer, row0, rows, nruns;
    const struct exec_run *runs;
} pending;

int exec_layer_settle(struct exec_model *m)
{
    if (!pending.set)
        return NPU_OK;
    pending.set = false;
    const uint32_t was = m->acct.layer;
    exec_set_layer(m, pending.layer);
    int rc = layer_wide_combines(m, pending.layer, pending.runs, pending.nruns, pending.row0,
                                 0, pending.rows);
    exec_set_layer(m, was);
    return rc;
}

bool exec_op_keeps_combines(const struct exec_model *m, const struct npu_prog_op *op)
{
    return op->kind == NPU_OP_STAGE ||
           ((op->kind == NPU_OP_ATTENTION || op->kind == NPU_OP_MOE) && layer_fused(m));
}

bool exec_layer_pending(void)
{
    return pending.set;
}

void exec_layer_forget(struct exec_model *m)
{
    pending.set = false;
    ffn_later.set = false;
    exec_moe_rows_forget();
    exec_moe_wide_dispatch_forget(m);
}

int exec_layer_rows_settle(struct exec_model *m)
{
    int rc = exec_moe_rows_settle(m);
    return rc == NPU_OK ? ffn_later_run(m) : rc;
}

bool exec_layer_rows_pending(void)
{
    return ffn_later.set || exec_moe_rows_pending();
}

/* Whether layer l's combines wait for layer l + 1's first pass: all of its rows in one
   wave, and layer l + 1 next on this core's stage; not under layer reuse (a recorded layer
   would carry its neighbour's combines, a replayed one none), nor under skewed routing:
   a combine's per-pair work for the hot experts' split slices then sits between two
   groups' attention instead of beside the next combine's collectives (Qwen3-30B-A3B
   prefill-2048 skewed:1.0 on large-64: 58.09 ms in the third pass, 61.55 deferred;
   uniform 46.58 against 43.37). */
static bool layer_defers(const struct exec_model *m, uint32_t l, uint32_t rows)
{
    const uint32_t G = npu_moe_group_rows(m->plan);
    const bool skewed = m->plan->mode && m->plan->routing == NPU_ROUTING_SKEWED;
    /* tile reuse implies layer reuse: its units of a layer's groups (model_moe_wide.c) are
       kept for one layer at a time */
    assert(!m->treuse.enabled || m->lreuse.enabled);
    if (!m->plan->moe_spill_parity || m->lreuse.enabled || skewed ||
        l + 1 >= m->cfg->num_layers ||
        (l + 1) % m->plan->stage_layers == 0)
        return false;
    uint64_t worst = 0;
    for (uint32_t g0 = 0; g0 < rows; g0 += G)
        worst += npu_moe_spill_group_rows(m->cfg, m->plan, rows - g0 < G ? rows - g0 : G);
    return worst <= m->plan->moe_spill_rows;
}

/* Whether layer l's pass over op rows [0, rows) from row0 of runs takes the pending
   combines. */
static bool layer_takes_pending(uint32_t l, const struct exec_run *runs, uint32_t nruns,
                                uint32_t row0, uint32_t rows)
{
    return pending.set && pending.layer + 1 == l && pending.runs == runs &&
           pending.nruns == nruns && pending.row0 == row0 && pending.rows == rows;
}

/* Layer l - 1's combine of the group of op rows [g0, g0 + gn), its rows in buf (0: the
   sums stay in ep_out for group_add_early): charged to layer l (exec_set_layer would wait
   for the engines). */
static int group_combine_prev(struct exec_model *m, uint32_t l, const struct exec_run *runs,
                              uint32_t nruns, uint32_t g0, uint32_t gn, uint64_t buf)
{
    struct exec_tile *const tile = &op_tiles[1]; /* free until the group's attention */
    make_tile(runs, nruns, g0, gn, tile);
    tile->xt = buf, tile->in_xt = true;
    return exec_moe_wide_combine_group(m, l - 1, tile, g0 / npu_moe_group_rows(m->plan), false,
                                       buf != 0);
}

/* Layer l - 1's combine of the next group (op rows [g0, g0 + gn)), armed by
   layer_op_fused to run beside this group's router GEMM (exec_layer_beside_route): the
   combine's collectives then overlap that GEMM instead of coming between this group's
   dispatch and the next group's QKV GEMM with the matrix idle. Its sums wait in ep_out,
   which nothing else writes until that group's attention (the dispatch fills ep_send and
   ep_recv, the spill reads ep_recv), and are added once the group's rows are in SRAM
   (group_add_early), so every rank does the same whatever buffers it has. */
static struct {
    bool set;
    uint32_t layer, g0, gn, nruns;
    const struct exec_run *runs;
} beside;

int exec_layer_beside_route(struct exec_model *m)
{
    if (!beside.set)
        return NPU_OK;
    beside.set = false;
    return group_combine_prev(m, beside.layer, beside.runs, beside.nruns, beside.g0, beside.gn,
                              0);
}

static void arm_beside(uint32_t l, const struct exec_run *runs, uint32_t nruns, uint32_t g0,
                       uint32_t gn)
{
    beside.set = true, beside.layer = l, beside.g0 = g0, beside.gn = gn;
    beside.runs = runs, beside.nruns = nruns;
}

/* The early combine's sums (ep_out[gn][d]) into the group's rows, now in buf. */
static void group_add_early(struct exec_model *m, uint64_t buf, uint32_t gn)
{
    exec_set_cat(m, EXEC_CAT_FFN);
    exec_add_rows(m, buf, m->buf.a.ep_out, gn, m->cfg->hidden_size);
}

/* The attention tiles of the group of op rows [g0, g0 + gn) in xt (x: its rows in x_all):
   over tp > 1 ranks one op over the group (EXEC_OP_GROUP: its tiles overlapped, and under
   tile reuse the group is the unit recorded and replayed), else tile by tile. */
static int group_attention(struct exec_model *m, const struct npu_prog_op *op,
                           const struct exec_run *runs, uint32_t nruns, uint32_t g0,
                           uint32_t gn, uint64_t x, uint64_t buf,
                           const struct exec_side_copy sides[3])
{
    const uint64_t row = (uint64_t)m->cfg->hidden_size * m->buf.eb;
    const uint32_t T = m->plan->tile_rows, step = m->tp > 1 ? gn : T;
    struct npu_prog_op tile_op = *op;
    tile_op.flags |= m->tp > 1 ? EXEC_OP_GROUP : 0;
    struct exec_tile *const tile = &op_tiles[0];
    int rc = NPU_OK;
    for (uint32_t t0 = g0; rc == NPU_OK && t0 < g0 + gn; t0 += step) {
        make_tile(runs, nruns, t0, g0 + gn - t0 < step ? g0 + gn - t0 : step, tile);
        tile->xt = buf + (uint64_t)(t0 - g0) * row, tile->in_xt = true;
        struct npu_prog_op this_op = tile_op;
        if (t0 == g0 && (sides[0].bytes || sides[1].bytes || sides[2].bytes)) {
            /* group_sides_in's, and the spill exec_moe_wide_take_spill left to it */
            tile->back = sides[0], tile->pre = sides[1], tile->spill = sides[2];
            this_op.flags |= EXEC_OP_PREFETCH;
        }
        rc = run_tile(m, &this_op, tile, x + (uint64_t)(t0 - g0) * row);
    }
    return rc;
}

/* layer_op_fused's pass over the groups: the op and its rows, the group buffers and what
   carries from one group to the next. */
struct fused_pass {
    const struct npu_prog_op *op;
    const struct exec_run *runs;
    uint32_t nruns, row0, rows;
    bool wide, take;
    uint32_t wave;         /* the first op row of the wave */
    bool combined;         /* this group's combine ran beside the one before's router */
    struct group_bufs b;
    struct exec_side_copy back; /* under tile reuse: group_back's */
};

/* The group of op rows from g0: its rows in (the next group's loading, or the wave's
   finished first), the combine it takes, its attention, its MoE (or first pass), its rows
   out. */
static int fused_group(struct exec_model *m, struct fused_pass *p, uint32_t g0)
{
    const uint64_t row = (uint64_t)m->cfg->hidden_size * m->buf.eb;
    const uint32_t G = npu_moe_group_rows(m->plan), l = p->op->layer, rows = p->rows;
    const uint32_t gn = rows - g0 < G ? rows - g0 : G, g1 = g0 + gn;
    const uint32_t gn1 = rows - g1 < G ? rows - g1 : G;
    const uint64_t x = m->buf.x_all + (uint64_t)(p->row0 + g0) * row;
    struct exec_tile *const tile = &op_tiles[0];
    int rc = NPU_OK;
    if (p->wide && g0 > p->wave && !exec_moe_wide_has_room(m, l, gn)) {
        assert(!p->combined && "a group combined early was loaded in this wave");
        rc = group_back_now(m, &p->back);
        rc = rc == NPU_OK ? layer_wide_finish(m, l, p->runs, p->nruns, p->row0, p->wave, g0) : rc;
        p->wave = g0;
        group_bufs_init(&p->b, m->buf.a.xt, m->buf.a.xg_attn);
    }
    uint64_t buf = 0;
    if (rc == NPU_OK)
        rc = group_take(m, &p->b, p->row0 + g0, gn, &buf);
    /* the next group's rows, unless its wave ends first (the spill grows linearly) */
    const bool ahead = p->wide && g1 < rows && exec_moe_wide_has_room(m, l, gn + gn1);
    struct exec_side_copy sides[3] = { { 0 } };
    if (rc == NPU_OK && p->wide && m->treuse.on) {
        group_sides_in(m, &p->b, p->row0 + g1, ahead ? gn1 : 0, &p->back, sides);
        exec_moe_wide_take_spill(&sides[2]);
    } else if (rc == NPU_OK && ahead)
        rc = group_prefetch(m, &p->b, p->row0 + g1, gn1);
    if (rc == NPU_OK && p->wide && g1 >= rows) /* the second pass's first matrices */
        exec_moe_wide_prefetch(m, l);
    if (rc == NPU_OK && p->combined)
        group_add_early(m, buf, gn);
    else if (rc == NPU_OK && p->take)
        rc = group_combine_prev(m, l, p->runs, p->nruns, g0, gn, buf);
    if (rc == NPU_OK)
        rc = group_attention(m, p->op, p->runs, p->nruns, g0, gn, x, buf, sides);
    make_tile(p->runs, p->nruns, g0, gn, tile);
    tile->xt = buf, tile->in_xt = true;
    m->w.route_last = g1 >= rows; /* its router reads the layer's shares last */
    /* the next group's combine beside this one's router (the same on every rank) */
    const bool armed = rc == NPU_OK && p->take && g1 < rows && !m->treuse.on;
    if (armed)
        arm_beside(l, p->runs, p->nruns, g1, gn1);
    if (rc == NPU_OK)
        rc = group_moe(m, l, tile, x, p->wide);
    p->combined = armed && !beside.set; /* else its router did not run: combine it next */
    beside.set = false;
    if (rc == NPU_OK && p->wide)
        rc = group_back(m, &p->b, buf, p->row0 + g0, gn, &p->back);
    else if (rc == NPU_OK)
        rc = rows_copy(m, buf, p->row0 + g0, gn, false);
    return rc;
}

/* The layer's attention op and then its MoE op, group by group (layer_fused), or with the
   MoE over the layer (layer_wide) in three passes, where the next group's rows load into
   the second buffer while this group computes, unless the next group starts a new wave
   (the wave's combines come between). The groups are whole tiles (moe_rows rounded down
   to tile_rows; fewer rows than a MoE group holds): attention's tiles keep the op-row
   alignment split attention's window slots assume. */
static int layer_op_fused(struct exec_model *m, const struct npu_prog_op *op,
                          const struct exec_run *runs, uint32_t nruns, uint32_t row0,
                          uint32_t rows)
{
    const uint64_t row = (uint64_t)m->cfg->hidden_size * m->buf.eb;
    const uint32_t G = npu_moe_group_rows(m->plan), l = op->layer;
    const bool wide = layer_wide(m, rows);
    const bool take = layer_takes_pending(l, runs, nruns, row0, rows);
    struct fused_pass p = { .op = op, .runs = runs, .nruns = nruns, .row0 = row0,
                            .rows = rows, .wide = wide, .take = take };
    /* taking combines, the second buffer is an expert ring slot where one holds a group
       (xg_attn lies over their ep_out), else xt alone */
    const uint64_t ring = take ? exec_ring_scratch(m, (uint64_t)G * row) : 0;
    group_bufs_init(&p.b, m->buf.a.xt, !take ? m->buf.a.xg_attn : ring ? ring : m->buf.a.xt);
    int rc = take ? NPU_OK : exec_layer_settle(m);
    pending.set = false;
    exec_set_layer(m, l);
    if (wide)
        exec_moe_wide_begin_layer(m, l);
    for (uint32_t g0 = 0; rc == NPU_OK && g0 < rows; g0 += G)
        rc = fused_group(m, &p, g0);
    assert((rc != NPU_OK || !exec_moe_wide_dispatch_pending()) &&
           "the layer's last group dispatches at once");
    if (rc == NPU_OK)
        rc = group_back_now(m, &p.back);
    const uint32_t wave = p.wave;
    if (take)
        exec_moe_wide_start_wave(m, l - 1);
    if (rc == NPU_OK && wide && wave == 0 && layer_defers(m, l, rows)) {
        rc = exec_moe_wide_serve_slices(m, l);
        pending.set = rc == NPU_OK, pending.layer = l, pending.runs = runs;
        pending.nruns = nruns, pending.row0 = row0, pending.rows = rows;
    } else if (rc == NPU_OK && wide) {
        rc = layer_wide_finish(m, l, runs, nruns, row0, wave, rows);
    }
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
        fused.flags |= EXEC_OP_WITH_FFN | (nn ? EXEC_OP_PREFETCH : EXEC_OP_LAST);
        make_tile(runs, nruns, t0, n, tile);
        tile->xt = xt[i], tile->in_xt = true;
        tile->pre = (struct exec_side_copy){ xt[i ^ 1], x + (uint64_t)n * row, nn * row };
        rc = run_tile(m, &fused, tile, x);
    }
    return rc == NPU_OK && m->treuse.enabled ? exec_reuse_tile_flush(m) : rc;
}

bool exec_layer_dense_overlapped(const struct exec_model *m)
{
    return npu_layout_xt3(m->cfg, m->plan); /* the layout's rule: its third tile buffer */
}

static int attn_deep_next(struct exec_model *m, uint32_t l, bool sliding,
                          const struct exec_tile *nx, bool started);

/* A dense layer's tile of op rows [t0, t0 + min(T, rows - t0)) with its rows in buffer xt:
   the rows in from HBM (the first tile's; the loops load the others ahead), its norm and
   QKV GEMM issued (*started: exec_attention_begin's). */
static int dense_tile_in(struct exec_model *m, uint32_t l, const struct exec_run *runs,
                         uint32_t nruns, uint32_t row0, uint32_t t0, uint32_t rows, uint64_t xt,
                         struct exec_tile *tile, bool *started)
{
    const uint32_t T = m->plan->tile_rows, n = rows - t0 < T ? rows - t0 : T;
    int rc = NPU_OK;
    if (t0 == 0) {
        exec_set_layer(m, l);
        rc = rows_copy(m, xt, row0, n, true);
    }
    make_tile(runs, nruns, t0, n, tile);
    tile->xt = xt, tile->in_xt = true;
    *started = exec_attention_begin(m, l, tile);
    return rc;
}

/* Tile t's FFN norm and GEMMs (its all-reduce comes later). The layer's last tile: the
   next layer's loads start with its FFN (not beside attention), and with one staging copy
   once its GEMMs, the last readers of the layer's shares, are issued. */
static void ffn_gemms(struct exec_model *m, uint32_t l, const struct exec_tile *t, bool last)
{
    exec_attention_kept_drop(); /* its collectives' peers' writes declare no local range */
    if (last)
        exec_stage_next(m, l);
    exec_ffn_begin(m, l, t);
    exec_ffn_middle(m, l, t);
    if (last)
        exec_stage_after_ffn(m, l);
}

/* layer_op_dense_fused without tile reuse: the same tiles, tile i's FFN all-reduce beside
   tile i + 1's norm and QKV GEMM, whose rows are in already, and three residual buffers:
   tile i + 2's rows load (on the second DMA queue, behind tile i - 1's going back from the
   same buffer) while tile i computes, so a tile's norm never waits for its rows. With
   attn_deep tile i + 1's attention starts beside tile i's FFN: per tile i, tile i's combine
   or gather and O GEMM, tile i + 1's norm and QKV GEMM, tile i's O collective (beside that
   GEMM), tile i's FFN GEMMs, tile i + 1's QKV collectives (beside them) and steps, tile
   i's FFN all-reduce (beside the steps). Tile i + 1's attention reads only its own rows and
   the keys and values of tiles <= i + 1, so no result changes. */
static int layer_op_dense_overlapped(struct exec_model *m, const struct npu_prog_op *op,
                                     const struct exec_run *runs, uint32_t nruns,
                                     uint32_t row0, uint32_t rows)
{
    const uint64_t xt[3] = { m->buf.a.xt, m->buf.a.xt2, m->buf.a.xt3 };
    const uint32_t T = m->plan->tile_rows, l = op->layer;
    const bool sliding = op->flags & NPU_OP_SLIDING, deep = m->plan->attn_deep;
    struct exec_tile *const tiles = op_tiles;
    bool started[2];
    int rc = dense_tile_in(m, l, runs, nruns, row0, 0, rows, xt[0], &tiles[0], &started[0]);
    if (rc == NPU_OK && T < rows) /* tile 1's rows; the loop loads two tiles ahead */
        rc = rows_copy(m, xt[1], row0 + T, rows - T < T ? rows - T : T, true);
    if (rc == NPU_OK && deep)
        rc = attn_deep_next(m, l, sliding, &tiles[0], started[0]);
    for (uint32_t t0 = 0, i = 0, b = 0; rc == NPU_OK && t0 < rows;
         t0 += T, i ^= 1, b = (b + 1) % 3) {
        struct exec_tile *const cur = &tiles[i], *const nx = &tiles[i ^ 1];
        const uint32_t next = t0 + cur->n, after = next + T; /* tiles i + 1, i + 2 */
        const uint64_t nxt = xt[(b + 1) % 3];
        if (next < rows && after < rows) /* tile i + 2's rows, where tile i - 1's were */
            rc = rows_copy(m, xt[(b + 2) % 3], row0 + after, rows - after < T ? rows - after : T,
                           true);
        if (rc == NPU_OK)
            rc = deep ? exec_attention_out(m, l, sliding, cur, true, true)
                      : exec_attention_mid(m, l, sliding, cur, started[i], true);
        if (rc == NPU_OK && deep && next < rows)
            dense_tile_in(m, l, runs, nruns, row0, next, rows, nxt, nx, &started[i ^ 1]);
        if (rc == NPU_OK)
            rc = exec_attention_end(m, l, cur, true);
        /* HAZARD: unfused QKV GEMMs (not started) are issued by attn_deep_next and read xb,
           which the FFN's norm rewrites: then tile i + 1's attention goes first */
        const bool early = deep && next < rows && !started[i ^ 1];
        if (rc == NPU_OK && early)
            rc = attn_deep_next(m, l, sliding, nx, started[i ^ 1]);
        if (rc == NPU_OK)
            ffn_gemms(m, l, cur, next >= rows);
        if (rc == NPU_OK && !deep && next < rows)
            dense_tile_in(m, l, runs, nruns, row0, next, rows, nxt, nx, &started[i ^ 1]);
        if (rc == NPU_OK && deep && !early && next < rows)
            rc = attn_deep_next(m, l, sliding, nx, started[i ^ 1]);
        if (rc == NPU_OK)
            rc = exec_ffn_end(m, l, cur);
        if (rc == NPU_OK)
            rc = rows_copy(m, xt[b], row0 + t0, cur->n, false);
    }
    return rc;
}

/* A paired dense FFN over tiles of residual rows in SRAM, each tile's all-reduce beside the
   next tile's gate and up GEMM (exec_ffn_begin). Not under tile reuse, whose tiles start
   with the engines idle. */
static bool ffn_overlapped(const struct exec_model *m)
{
    return m->buf.x_in_sram && !m->treuse.on && exec_ffn_pipelined(m);
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
    if (m->attn_next) /* on the first queue, idle under the FFN (its weights are staged) */
        exec_attention_prefetch_next(m, op->layer + 1, &tiles[0], false);
    exec_ffn_begin(m, op->layer, &tiles[0]);
    int rc = NPU_OK;
    for (uint32_t t0 = 0, i = 0; rc == NPU_OK && t0 < rows; t0 += T, i ^= 1) {
        const uint32_t next = t0 + tiles[i].n;
        exec_ffn_middle(m, op->layer, &tiles[i]);
        if (next < rows) {
            make_tile(runs, nruns, next, rows - next < T ? rows - next : T, &tiles[i ^ 1]);
            tiles[i ^ 1].xt = m->buf.x_all + (uint64_t)(row0 + next) * row;
            exec_ffn_begin(m, op->layer, &tiles[i ^ 1]);
        } else if (ffn_defers(m, rows)) {
            ffn_later.set = true, ffn_later.layer = op->layer;
            ffn_later.last = (struct exec_tile){ .n = tiles[i].n, .xt = tiles[i].xt };
            break;
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
    return m->buf.x_in_sram && !m->treuse.on && m->tp > 1;
}

/* Tile i + 1 (nx) after tile i's begin: its QKV collectives and steps. */
static int attn_deep_next(struct exec_model *m, uint32_t l, bool sliding,
                          const struct exec_tile *nx, bool started)
{
    int rc = exec_attention_qkv(m, l, sliding, nx, started, true);
    return rc == NPU_OK ? exec_attention_steps(m, l, sliding, nx, true) : rc;
}

/* make_tile over runs whose first starts at op row base (a tile's op rows: t0). */
static void make_tile_at(const struct exec_run *runs, uint32_t nruns, uint32_t base,
                         uint32_t t0, uint32_t n, struct exec_tile *tile)
{
    make_tile(runs, nruns, t0 - base, n, tile);
    tile->t0 = t0;
}

/* The tile of op rows [t0, t0 + T) of attn_tiles' [lo, hi): the MoE outputs its rows wait
   for added (exec_moe_rows_take), its segments, rows, norm and QKV GEMM issued (*started:
   exec_attention_begin's). */
static int attn_tile_begin(struct exec_model *m, uint32_t l, const struct exec_run *runs,
                           uint32_t nruns, uint32_t base, uint32_t lo, uint32_t hi, uint64_t x,
                           bool in_xt, uint32_t t0, struct exec_tile *tile, bool *started)
{
    const uint64_t row = (uint64_t)m->cfg->hidden_size * m->buf.eb;
    const uint32_t T = m->plan->tile_rows, n = hi - t0 < T ? hi - t0 : T;
    int rc = exec_moe_rows_take(m, l, x, t0 - lo + n);
    make_tile_at(runs, nruns, base, t0, n, tile);
    tile->xt = x + (uint64_t)(t0 - lo) * row, tile->in_xt = in_xt;
    *started = rc == NPU_OK && exec_attention_begin(m, l, tile);
    return rc;
}

/* Attention over op rows [lo, hi), whose residual rows start at x (row lo's), tiles
   overlapped (and with attn_deep two in flight); runs[0] starts at op row base; in_xt: the
   rows are a group's in xt. With attn_deep, per tile i: its gather or combine and O GEMM,
   tile i + 1's QKV collectives (beside that GEMM) and steps, tile i + 2's norm and QKV GEMM,
   then tile i's O collective, beside those steps and that GEMM (the hart waits in each
   collective, so what is to run beside one is issued before it). Tile i + 2's norm rewrites
   xb after tile i + 1's QKV GEMM is issued (attn_deep_next issues it when begin did not). */
static int attn_tiles(struct exec_model *m, uint32_t l, bool sliding,
                      const struct exec_run *runs, uint32_t nruns, uint32_t base, uint32_t lo,
                      uint32_t hi, uint64_t x, bool in_xt)
{
    const bool deep = m->plan->attn_deep; /* two tiles in flight (npu_layout.h, yo) */
    struct exec_tile *const tiles = op_tiles;
    bool started[3];
    int rc = attn_tile_begin(m, l, runs, nruns, base, lo, hi, x, in_xt, lo, &tiles[0],
                             &started[0]);
    rc = rc == NPU_OK && deep ? attn_deep_next(m, l, sliding, &tiles[0], started[0]) : rc;
    /* the MoE group before's exchange, beside tile 0's steps (model_moe_wide.c): before
       tile 1's QKV GEMM writes its chunks, which lie over the receive buffer */
    rc = rc == NPU_OK ? exec_moe_wide_dispatch_settle(m) : rc;
    if (rc == NPU_OK && deep && lo + tiles[0].n < hi)
        rc = attn_tile_begin(m, l, runs, nruns, base, lo, hi, x, in_xt, lo + tiles[0].n,
                             &tiles[1], &started[1]);
    rc = rc == NPU_OK ? ffn_later_run(m) : rc; /* beside the issued work */
    for (uint32_t t0 = lo, i = 0; rc == NPU_OK && t0 < hi; t0 += tiles[i].n, i = (i + 1) % 3) {
        const uint32_t j = (i + 1) % 3, next = t0 + tiles[i].n; /* tile i + 1 */
        if (!deep) {
            rc = exec_attention_mid(m, l, sliding, &tiles[i], started[i], true);
            if (rc == NPU_OK && next < hi)
                rc = attn_tile_begin(m, l, runs, nruns, base, lo, hi, x, in_xt, next,
                                     &tiles[j], &started[j]);
        } else {
            rc = exec_attention_out(m, l, sliding, &tiles[i], true, true);
            if (rc == NPU_OK && next < hi)
                rc = attn_deep_next(m, l, sliding, &tiles[j], started[j]);
            if (rc == NPU_OK && next < hi && next + tiles[j].n < hi)
                rc = attn_tile_begin(m, l, runs, nruns, base, lo, hi, x, in_xt,
                                     next + tiles[j].n, &tiles[(i + 2) % 3],
                                     &started[(i + 2) % 3]);
        }
        if (rc == NPU_OK)
            rc = exec_attention_end(m, l, &tiles[i], true);
    }
    return rc;
}

static int layer_attn_overlapped(struct exec_model *m, const struct npu_prog_op *op,
                                 const struct exec_run *runs, uint32_t nruns, uint32_t row0,
                                 uint32_t rows)
{
    const uint64_t row = (uint64_t)m->cfg->hidden_size * m->buf.eb;
    return attn_tiles(m, op->layer, op->flags & NPU_OP_SLIDING, runs, nruns, 0, 0, rows,
                      m->buf.x_all + (uint64_t)row0 * row, false);
}

/* Whether layer op's MoE loads its first expert slices as the layer's attention starts
   (exec_moe_prefetch; else as its rows are dispatched): one MoE group over all the op's
   rows (not the MoE over the layer, whose first pass lends a ring slot), and not under
   tile reuse (a replayed tile wants the engines idle, so a load across it would wait).
   Attention reads little from HBM beside it: Qwen3-30B-A3B on large-64, prefill-512 at
   context 8K 20.34 -> 18.77 ms (docs/images.md, "Expert ring"). */
static bool moe_prefetch_early(const struct exec_model *m, const struct npu_prog_op *op,
                               uint32_t rows)
{
    /* the fused loop's groups are moe_rows rounded down to whole tiles */
    const uint32_t group = layer_fused(m) ? npu_moe_group_rows(m->plan) : m->plan->moe_rows;
    return op->kind == NPU_OP_ATTENTION && m->cfg->arch == MODEL_MOE && !m->treuse.on &&
           !m->plan->disagg && rows <= group && !layer_wide(m, rows) &&
           !pending.set && !m->w.stage_own;
}

bool exec_op_prefetches_attention(const struct exec_model *m, const struct npu_prog_op *op,
                                  uint32_t rows)
{
    if (rows > m->plan->tile_rows) /* one tile: the next attention's is whole as well */
        return false;
    if (op->kind == NPU_OP_FFN) /* layer_ffn_overlapped */
        return !layer_dense_fused(m) && ffn_overlapped(m);
    return op->kind == NPU_OP_MOE && !layer_fused(m) && !m->plan->disagg && m->tp > 1 &&
           npu_plan_is_ep(m->plan) && rows <= m->plan->moe_rows &&
           exec_moe_units_apply(m, rows); /* exec_moe_units */
}

void exec_attention_preload(struct exec_model *m, const struct npu_prog_op *op,
                            const struct exec_batch *b)
{
    const uint32_t first = exec_op_runs_all(op, b) ? 0 : b->nprefill;
    exec_set_layer(m, op->layer);
    exec_set_cat(m, EXEC_CAT_ATTN);
    make_tile(b->runs + first, b->nruns - first, 0, exec_op_rows(op, b), &op_tiles[0]);
    exec_attention_prefetch_next(m, op->layer, &op_tiles[0], false);
    exec_attention_prefetch_drop(); /* loaded: the recording takes them so */
}

int exec_layer_op(struct exec_model *m, const struct npu_prog_op *op,
                  const struct exec_run *runs, uint32_t nruns, uint32_t row0, uint32_t rows)
{
    const uint64_t row = (uint64_t)m->cfg->hidden_size * m->buf.eb;
    /* the layer before's MoE rows or FFN end that wait: only attn_tiles takes them */
    const bool takes = op->kind == NPU_OP_ATTENTION && !layer_fused(m) &&
                       !layer_dense_fused(m) && attn_overlapped(m);
    const int rc0 = takes ? NPU_OK : exec_layer_rows_settle(m);
    if (rc0 != NPU_OK)
        return rc0;
    if (moe_prefetch_early(m, op, rows)) {
        exec_set_layer(m, op->layer);
        exec_moe_prefetch(m, op->layer, rows, true); /* the op's only group */
    }
    /* EP MoE runs over groups of moe_rows (xt holds a group when the residual is in HBM) */
    if (op->kind == NPU_OP_ATTENTION && layer_fused(m))
        return layer_op_fused(m, op, runs, nruns, row0, rows); /* takes or settles */
    if (op->kind == NPU_OP_MOE && layer_fused(m))
        return NPU_OK; /* ran with the layer's attention, which the program puts before it */
    exec_set_layer(m, op->kind == NPU_OP_EMBED ? m->cfg->num_layers : op->layer);
    if (op->kind == NPU_OP_ATTENTION && layer_dense_fused(m))
        return !m->treuse.on && exec_layer_dense_overlapped(m)
                   ? layer_op_dense_overlapped(m, op, runs, nruns, row0, rows)
                   : layer_op_dense_fused(m, op, runs, nruns, row0, rows);
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
        m->w.route_last = op->kind == NPU_OP_MOE && t0 + n >= rows; /* as layer_op_fused */
        rc = run_tile(m, op, tile, x);
    }
    return rc == NPU_OK && m->treuse.enabled ? exec_reuse_tile_flush(m) : rc;
}

