/* SPDX-License-Identifier: MIT */
/*
 * Tile reuse (performance mode, bootarg reuse_tiles, `--layer-reuse tiles`; docs/images.md
 * "Layer reuse", "Tile reuse"): inside a layer that runs in full, a tile of rows replays a
 * recorded tile of the same op and shape instead of going through the engines.
 *
 * Why: layered prefill runs a whole prompt through a layer group at once, so a layer that
 * must be recorded has up to max_tokens / tile_rows tiles, and layer keys of prompts of
 * different lengths never match. The tiles of such a layer repeat: every full tile of an
 * FFN op or embedding does the same work, a MoE tile's follows its routing, and an
 * attention tile's where its rows' contexts end. Each tile starts with this core's engines
 * idle (layer_op flushes the chain at its first op), so a tile is a unit the chip can
 * repeat.
 *
 * Keys. A class is the op (kind and flags), the tile's row count and the bytes it loads
 * ahead for the next tile (EXEC_OP_PREFETCH), and:
 * - attention: per segment (one run's rows in the tile; more than EXEC_TILE_SEGS: not
 *   keyed, run in full) its rows, its run's KV pool blocks and where its context ends;
 *   ends match within the layer keys' tolerance (half a stripe and a quarter of the
 *   context, nearest class first) and in the same stripe, so that the busiest rank holds as
 *   many KV blocks (tile_distance); under split attention, so do its positions in the
 *   window (the query-parallel part);
 * - MoE: the load of its routing (moe_tile_draw): the routed pairs of the busiest rank
 *   under expert parallelism (a pair per expert slice), the units of the busiest rank under
 *   the MoE by units, else the number of experts routed to. Every rank draws the
 *   routing model's choices of all the tile's rows (the same on every rank). A tile that
 *   routes to an expert the group has not staged in this layer (m->treuse.group_staged) runs in
 *   full and is not recorded: the first route of an expert in a layer moves its weights
 *   (expert-load bytes), and a replay must not move them again;
 * - embeddings, dense FFN: the rows alone (the same work per row);
 * - the MoE over the layer's units (a group's route, dispatch and spill; its combine:
 *   model_moe_wide.c), keyed like a MoE tile but with the load matched within
 *   1/EXEC_TILE_LOAD_TOL (load_gap), a combine also by which side copies it issues at its
 *   start (exec_reuse_tile_sides); a combine class a replayed first pass will need is
 *   pinned (new_class skips it);
 * - a MoE group's attention by its side copies too, and where it runs the group before's
 *   exchange (with two tiles in flight: exec_moe_wide_exchange_key) by that exchange's rows
 *   and load (within the same share); it replays only where the exchange can (its
 *   combine's class recorded), else runs in full.
 *
 * Recording: the group starts the tile together (a barrier: see record_tile), BEGIN, the
 * tile in full, END in replay slot EXEC_REUSE_LAYER_SLOTS + class; the chip time and the
 * layer statistics it added are kept. Replay: consecutive replays of a class are queued
 * and repeated at once (one REPEAT with a count, one sleep) before anything else runs and
 * at the end of the op (exec_reuse_tile_flush). Inside a recorded layer the layer's slot
 * is open around these: the repeats count as the layer's work (chip_replay.h allows a
 * REPEAT while another slot is being recorded).
 *
 * Every rank decides the same way (the key, the draws and the class table are the same on
 * each), so collectives stay matched. Modelled: chip time, energy, traffic and per-layer
 * statistics of a tile like the recorded one. Not modelled: a replayed tile's own routing
 * and KV-block placement (per rank, the split of its time between categories is the
 * recorded tile's; `MODEL routed` counts the tiles that ran), the data (refused in
 * functional mode), and a replayed tile's contention with other groups' traffic.
 */
#include <stddef.h>
#include <string.h>

#include "model_exec.h"
#include "model_moe.h"

void exec_reuse_tile_new_layer(struct exec_model *m)
{
    memset(m->treuse.group_staged, 0, sizeof(m->treuse.group_staged));
    m->treuse.group_staged_n = 0;
}

/* The key of op (a layer_op kind) over tile; MoE: but the load (moe_tile_draw). */
static void make_key(const struct exec_model *m, const struct npu_prog_op *op,
                     const struct exec_tile *tile, struct exec_tile_class *k)
{
    memset(k, 0, offsetof(struct exec_tile_class, span_ps));
    k->kind = op->kind, k->flags = op->flags, k->n = tile->n;
    if (op->flags & EXEC_OP_GROUP) { /* the copies beside a MoE group's attention */
        /* by the copies every rank has alike (rows back, rows in), not the spill, whose
           bytes are this rank's received rows (none on some): every rank keys alike, and
           a spill the recording lacked is issued before the replay (sides_missing) */
        k->flags &= (uint16_t)~EXEC_OP_PREFETCH;
        k->sides = exec_reuse_tile_sides(tile) & EXEC_SIDES_GROUP;
    }
    /* the next tile's rows loaded at its start; not a MoE group's side copies (its rows
       around it, exec_tile_side_copies), which only the wave's first and last groups lack */
    k->pre_bytes = (op->flags & EXEC_OP_PREFETCH) && !(op->flags & EXEC_OP_GROUP)
                       ? (uint32_t)tile->pre.bytes : 0;
    if (op->kind != NPU_OP_ATTENTION)
        return; /* every row does the same work: a row copy from the table (the
                   embeddings), the FFN, the MoE by its routing */
    if (op->flags & EXEC_OP_GROUP) /* the group before's exchange inside it */
        exec_moe_wide_exchange_key(&k->xn, &k->xload);
    k->nsegs = tile->nsegs; /* more than EXEC_TILE_SEGS: not keyed */
    for (uint32_t s = 0; s < tile->nsegs && s < EXEC_TILE_SEGS; s++) {
        const struct exec_seg *g = &tile->segs[s];
        k->segs[s] = (struct exec_tile_seg){ .count = g->count, .end = g->pos + g->count,
                                             .nblocks = g->run->nblocks,
                                             .window = exec_attn_window(m, tile, g) };
    }
}

/* How far a recorded load (the busiest rank's routed pairs) is from a key's, or UINT64_MAX
   if too far: within a 1/EXEC_TILE_LOAD_TOL share where `near` (the MoE over the layer's
   units and exchanges), else exactly. Why: under skewed routing the busiest rank's pairs
   differ from group to group by a few, so exact keys recorded most groups' units anew. */
static uint64_t load_gap(uint32_t recorded, uint32_t load, bool near)
{
    const uint32_t d = recorded > load ? recorded - load : load - recorded;
    return d <= (near ? load / EXEC_TILE_LOAD_TOL : 0) ? d : UINT64_MAX;
}

/* How far class c is from key k: 0 if equal, UINT64_MAX if c cannot serve k. */
static uint64_t tile_distance(const struct exec_model *m, const struct exec_tile_class *c,
                              const struct exec_tile_class *k)
{
    if (c->kind != k->kind || c->flags != k->flags || c->n != k->n ||
        c->pre_bytes != k->pre_bytes || c->nsegs != k->nsegs || c->xn != k->xn ||
        ((k->flags & (EXEC_OP_GROUP | EXEC_OP_WIDE_COMBINE)) &&
         (c->sides & EXEC_SIDES_GROUP) != k->sides))
        return UINT64_MAX;
    const bool wide = k->flags & (EXEC_OP_WIDE_DISPATCH | EXEC_OP_WIDE_COMBINE);
    const uint64_t dl = load_gap(c->load, k->load, wide), dx = load_gap(c->xload, k->xload, true);
    if (dl == UINT64_MAX || dx == UINT64_MAX)
        return UINT64_MAX;
    const uint32_t w = npu_kv_stripe(m->plan);
    uint64_t dist = dl + dx;
    for (uint32_t s = 0; s < k->nsegs; s++) {
        const struct exec_tile_seg *a = &c->segs[s], *b = &k->segs[s];
        if (a->count != b->count || a->nblocks != b->nblocks ||
            (a->end + w - 1) / w != (b->end + w - 1) / w) /* the busiest rank: as many
                                                              blocks */
            return UINT64_MAX;
        const uint64_t d = exec_reuse_end_gap(m, a->end, b->end, 1);
        const uint64_t dw = exec_reuse_end_gap(m, a->window, b->window, 1);
        if (d == UINT64_MAX || dw == UINT64_MAX)
            return UINT64_MAX;
        dist += d + dw;
    }
    return dist;
}

static struct exec_tile_class *find_class(struct exec_model *m,
                                          const struct exec_tile_class *k)
{
    struct exec_tile_class *best = NULL;
    uint64_t best_dist = UINT64_MAX;
    for (uint32_t i = 0; i < EXEC_REUSE_TILE_SLOTS; i++) {
        struct exec_tile_class *c = &m->treuse.classes[i];
        if (!c->last_used)
            continue;
        const uint64_t d = tile_distance(m, c, k);
        if (d < best_dist)
            best = c, best_dist = d;
    }
    return best;
}

/* A free slot, else the least recently used of those no combine waits for (pins: the MoE
   over the layer's, below); NULL if every class is pinned. */
static struct exec_tile_class *new_class(struct exec_model *m)
{
    struct exec_tile_class *lru = NULL;
    for (uint32_t i = 0; i < EXEC_REUSE_TILE_SLOTS; i++) {
        struct exec_tile_class *c = &m->treuse.classes[i];
        if (!c->last_used)
            return c;
        if (!c->pins && (!lru || c->last_used < lru->last_used))
            lru = c;
    }
    return lru;
}

/* The MoE by units' load (model_moe_units.c): its units dealt as the op deals them, from
   rank l mod tp, each carrying its expert's rows; the busiest rank's rows x 256 + units. */
static uint32_t units_load(const struct exec_model *m, uint32_t l, const uint32_t *rows)
{
    static uint32_t prs[NOC_GROUP_MAX], uns[NOC_GROUP_MAX];
    const uint32_t per = m->plan->expert_units * m->plan->moe_unit_split;
    memset(prs, 0, m->tp * sizeof(prs[0])), memset(uns, 0, m->tp * sizeof(uns[0]));
    uint32_t next = l % m->tp, most = 0;
    for (uint32_t e = 0; e < m->cfg->num_experts; e++)
        for (uint32_t j = 0; rows[e] && j < per; j++, next = (next + 1) % m->tp) {
            prs[next] += rows[e], uns[next]++;
            const uint32_t w = prs[next] * 256 + uns[next];
            most = w > most ? w : most;
        }
    return most;
}

/* Rows per expert of the routing model's choices of the tile's rows, and per copy of a
   replicated expert under map x (NULL: none) in *copies ([E][NPU_EXPERT_REPLICAS_MAX],
   moe_copy_index; scratch: not model state). Every rank draws all the tile's rows, so every
   rank counts the same. */
static const uint32_t *draw_expert_rows(struct exec_model *m, uint32_t l,
                                        const struct exec_tile *tile,
                                        const struct moe_ep_map *x, const uint32_t **copies)
{
    static uint32_t idx[4 * ROUTING_EXPERTS_MAX]; /* a chunk of rows' choices [rows][k] */
    static uint32_t rows[ROUTING_EXPERTS_MAX];
    static uint32_t copy_rows[ROUTING_EXPERTS_MAX * NPU_EXPERT_REPLICAS_MAX];
    const uint32_t E = m->cfg->num_experts, k = m->cfg->experts_per_token;
    const uint32_t chunk = (uint32_t)(sizeof(idx) / sizeof(idx[0])) / k;
    memset(rows, 0, E * sizeof(rows[0]));
    memset(copy_rows, 0, E * NPU_EXPERT_REPLICAS_MAX * sizeof(copy_rows[0]));
    for (uint32_t s = 0; s < tile->nsegs; s++) /* a row's k are distinct */
        for (uint32_t i0 = 0; i0 < tile->segs[s].count; i0 += chunk) {
            const uint32_t n = tile->segs[s].count - i0 < chunk ? tile->segs[s].count - i0 : chunk;
            const uint32_t row0 = tile->segs[s].row + i0; /* the group's row of idx[0] */
            moe_draw_rows(m, l, tile->segs[s].req, tile->segs[s].pos + i0, n, idx);
            for (uint32_t j = 0; j < n * k; j++) {
                const uint32_t e = idx[j];
                const uint32_t c = npu_expert_replica(row0 + j / k, x ? x->reps[e] : 1);
                rows[e]++, copy_rows[moe_copy_index(e, c)]++;
            }
        }
    *copies = copy_rows;
    return rows;
}

/* The busiest rank's routed pairs under map x (a pair per slice of the copy a row goes to;
   copies: rows per expert's copy, draw_expert_rows), or without a map the number of experts
   routed to. */
static uint32_t pairs_most(const struct exec_model *m, const struct moe_ep_map *x,
                           const uint32_t *rows, const uint32_t *copies)
{
    static uint32_t pairs[NOC_GROUP_MAX];
    if (x)
        memset(pairs, 0, m->tp * sizeof(pairs[0]));
    uint32_t most = 0;
    for (uint32_t e = 0; e < m->cfg->num_experts; e++) {
        if (!rows[e])
            continue;
        for (uint32_t y = x ? x->efirst[e] : 0; x && y < x->efirst[e + 1]; y++) {
            const uint32_t s = x->by_expert[y], q = x->rank[s]; /* a slice's rank */
            pairs[q] += copies[moe_copy_index(e, x->rep[s])];
            most = pairs[q] > most ? pairs[q] : most;
        }
        most += !x;
    }
    return most;
}

/* Draws the routing model's choices of the tile's rows: *load for the key (struct
   exec_tile_class), and whether they route only to experts the group staged in this layer
   (the others are marked staged: the tile, run in full, stages them). */
static bool moe_tile_draw(struct exec_model *m, uint32_t l, const struct exec_tile *tile,
                          uint32_t *load)
{
    /* the plan's map, not this rank's tensors: a rank may hold no expert, and every rank
       must decide alike */
    const bool ep = m->tp > 1 && npu_plan_is_ep(m->plan);
    const bool units = ep && exec_moe_units_apply(m, tile->n);
    const struct moe_ep_map *x = ep && !units ? moe_ep_map(m, l) : NULL;
    const bool streamed = !m->plan->weights_resident;
    const uint32_t *copies;
    const uint32_t *rows = draw_expert_rows(m, l, tile, x, &copies);
    bool steady = true;
    for (uint32_t e = 0; streamed && e < m->cfg->num_experts; e++)
        if (rows[e] && !m->treuse.group_staged[e])
            m->treuse.group_staged[e] = 1, m->treuse.group_staged_n++, steady = false;
    *load = units ? units_load(m, l, rows) : pairs_most(m, x, rows, copies);
    return steady;
}

static uint32_t slot_of(const struct exec_model *m, const struct exec_tile_class *c)
{
    return EXEC_REUSE_LAYER_SLOTS + (uint32_t)(c - m->treuse.classes);
}

/* The side copies a tile issues at its start (exec_tile_side_copies): bit 0 the group
   before's spill (this rank's received rows: none on some ranks), 1 its rows back, 2 the
   next group's rows in (EXEC_SIDES_GROUP: alike on every rank). */
uint8_t exec_reuse_tile_sides(const struct exec_tile *tile)
{
    return (uint8_t)((tile->spill.bytes != 0) | (tile->back.bytes != 0) << 1 |
                     (tile->pre.bytes != 0) << 2);
}

/* Before a replay of class c in tile's place: the side copies the tile has and c's
   recording did not, issued now (the replay waits for them: it wants idle engines). The
   keys of a group's attention and combine hold which rows back and in there are (a wave's
   first group has no copy back, its last no load), not the spill, which differs between
   ranks; and a pinned combine's class is chosen at its first pass by the copies foreseen
   then (model_moe_wide.c, combine_sides), before its wave's end is known. Without the
   copies' presence in the keys a class recorded at a wave's first group served the others
   and their copies were lost (the layered arXiv pair's HBM bytes 4.6 % low once unit loads
   matched within EXEC_TILE_LOAD_TOL). A copy the recording had and the tile lacks stays in
   the replay's traffic. Per rank: the flush it may add changes timing, not the order of
   the collectives. */
int exec_reuse_sides_missing(struct exec_model *m, const struct exec_tile_class *c,
                             const struct exec_tile *tile)
{
    const uint8_t miss = exec_reuse_tile_sides(tile) & (uint8_t)~c->sides;
    if (!miss)
        return NPU_OK;
    const int rc = exec_reuse_tile_flush(m); /* after the replays before it */
    if (rc != NPU_OK)
        return rc;
    const enum exec_cat was = m->acct.cat;
    exec_set_cat(m, EXEC_CAT_OTHER); /* as exec_tile_side_copies' callers */
    const struct exec_side_copy *const copy[3] = { &tile->spill, &tile->back, &tile->pre };
    for (uint32_t i = 0; i < 3; i++)
        if (miss & (1u << i))
            exec_copy_side(m, copy[i]->dst, copy[i]->src, copy[i]->bytes);
    exec_set_cat(m, was);
    return NPU_OK;
}

/* Runs the tile in full, recording it in class c. */
static int record_tile(struct exec_model *m, const struct npu_prog_op *op,
                       struct exec_tile *tile, uint64_t x, struct exec_tile_class *c)
{
    static struct exec_recording r; /* exec_stats: not on the hart's small stack */
    c->sides = op->flags & EXEC_OP_PREFETCH ? exec_reuse_tile_sides(tile) : 0;
    int rc = exec_record_begin(m, slot_of(m, c), &r);
    if (rc == NPU_OK)
        rc = exec_tile_full(m, op, tile, x);
    if (rc == NPU_OK)
        rc = exec_record_end(m, &r, &c->span_ps, &c->delta);
    m->treuse.counts[EXEC_REUSE_RECORDED] += rc == NPU_OK;
    return rc;
}

int exec_reuse_tile_flush(struct exec_model *m)
{
    struct exec_tile_reuse *t = &m->treuse;
    if (t->pending == 0)
        return NPU_OK;
    const struct exec_tile_class *c = t->pending_class;
    const uint32_t n = t->pending;
    t->pending = 0, t->pending_class = NULL;
    exec_stats_add_times(&m->acct.stats[m->acct.layer], &c->delta, n);
    t->counts[EXEC_REUSE_REPLAYED] += n;
    return exec_replay_slot(m, slot_of(m, c), n, c->span_ps);
}

/* Queues a replay of class c, after the queued ones of the same class. */
static int replay_tile(struct exec_model *m, struct exec_tile_class *c)
{
    struct exec_tile_reuse *t = &m->treuse;
    if (t->pending && (t->pending_class != c || t->pending == NPU_REPLAY_COUNT_MAX)) {
        int rc = exec_reuse_tile_flush(m);
        if (rc != NPU_OK)
            return rc;
    }
    t->pending_class = c, t->pending++;
    return NPU_OK;
}

/* The tile in full, not recorded, after the replays queued. */
static int tile_unrecorded(struct exec_model *m, const struct npu_prog_op *op,
                           struct exec_tile *tile, uint64_t x)
{
    m->treuse.counts[EXEC_REUSE_FULL]++;
    int rc = exec_reuse_tile_flush(m);
    return rc == NPU_OK ? exec_tile_full(m, op, tile, x) : rc;
}

int exec_reuse_tile(struct exec_model *m, const struct npu_prog_op *op, struct exec_tile *tile,
                    uint64_t x)
{
    static struct exec_tile_class key;
    make_key(m, op, tile, &key);
    if (key.nsegs > EXEC_TILE_SEGS ||
        (op->kind == NPU_OP_MOE && !moe_tile_draw(m, op->layer, tile, &key.load)))
        return tile_unrecorded(m, op, tile, x);
    m->treuse.uses++;
    struct exec_tile_class *c = find_class(m, &key);
    if (c) {
        c->last_used = m->treuse.uses;
        if (!key.xn || exec_moe_wide_exchange_replay(m)) {
            const int rc = op->flags & EXEC_OP_PREFETCH ? exec_reuse_sides_missing(m, c, tile)
                                                        : NPU_OK;
            return rc == NPU_OK ? replay_tile(m, c) : rc;
        }
        return tile_unrecorded(m, op, tile, x); /* its exchange runs, so the unit in full */
    }
    int rc = exec_reuse_tile_flush(m); /* before its class may be the one replaced */
    if (rc != NPU_OK)
        return rc;
    c = new_class(m);
    if (!c) {
        m->treuse.counts[EXEC_REUSE_FULL]++;
        return exec_tile_full(m, op, tile, x);
    }
    *c = key;
    c->last_used = m->treuse.uses;
    return record_tile(m, op, tile, x, c);
}

/* ---- The MoE over the layer's units (model_moe_wide.c) ---- */

const uint32_t *exec_reuse_wide_draw(struct exec_model *m, uint32_t l,
                                     const struct exec_tile *tile, uint32_t *load)
{
    const struct moe_ep_map *x = moe_ep_map(m, l);
    const uint32_t *copies;
    const uint32_t *rows = draw_expert_rows(m, l, tile, x, &copies);
    *load = pairs_most(m, x, rows, copies);
    return copies;
}

static void unit_key(uint32_t flags, uint32_t n, uint32_t load, uint8_t sides,
                     struct exec_tile_class *k)
{
    memset(k, 0, offsetof(struct exec_tile_class, span_ps));
    k->kind = NPU_OP_MOE, k->flags = (uint16_t)flags, k->n = n, k->load = load;
    k->sides = sides;
}

struct exec_tile_class *exec_reuse_unit_find(struct exec_model *m, uint32_t flags, uint32_t n,
                                             uint32_t load, uint8_t sides)
{
    static struct exec_tile_class key;
    unit_key(flags, n, load, sides, &key);
    struct exec_tile_class *c = find_class(m, &key);
    if (c)
        c->last_used = ++m->treuse.uses;
    return c;
}

int exec_reuse_unit_new(struct exec_model *m, uint32_t flags, uint32_t n, uint32_t load,
                        uint8_t sides, struct exec_tile_class **out)
{
    *out = NULL;
    int rc = exec_reuse_tile_flush(m); /* before its class may be the one replaced */
    struct exec_tile_class *c = rc == NPU_OK ? new_class(m) : NULL;
    if (!c)
        return rc;
    unit_key(flags, n, load, sides, c);
    c->pins = 0, c->staged_next = false, c->last_used = ++m->treuse.uses;
    *out = c;
    return NPU_OK;
}

int exec_reuse_unit_begin(struct exec_model *m, struct exec_tile_class *c,
                          struct exec_recording *r)
{
    return exec_record_begin(m, slot_of(m, c), r);
}

int exec_reuse_unit_end(struct exec_model *m, struct exec_tile_class *c,
                        const struct exec_recording *r)
{
    int rc = exec_record_end(m, r, &c->span_ps, &c->delta);
    m->treuse.counts[EXEC_REUSE_RECORDED] += rc == NPU_OK;
    return rc;
}

int exec_reuse_unit_replay(struct exec_model *m, struct exec_tile_class *c)
{
    int rc = replay_tile(m, c);
    return rc == NPU_OK ? exec_reuse_tile_flush(m) : rc;
}

/* ---- The LM head as a unit (model_head.c, exec_head) ---- */

/* Under layer reuse the head is a unit like the MoE over the layer's (above): its work is
   the same for the same rows wanting tokens, so a recorded head replays. The key is those
   rows alone: every rank of the group must decide alike (the head all-gathers its picks),
   and whether the last layer loaded the head's first piece, and into which half of the
   staging buffer, differs between ranks (exec_head_ahead follows each rank's hazards); a
   replay stands for the recorded head's first piece, loaded ahead or not. Its counts are
   the head's own (m->lreuse.heads); the half its pieces end in is kept in the class
   (staged_next) and set after a replay, as after the recording. */
int exec_reuse_head(struct exec_model *m, uint32_t nw,
                    int (*run)(struct exec_model *m, const void *arg), const void *arg)
{
    static struct exec_tile_class key;
    static struct exec_recording r;
    memset(&key, 0, offsetof(struct exec_tile_class, span_ps));
    key.kind = NPU_OP_HEAD, key.n = nw; /* exec_head flushed the queued tile replays */
    struct exec_tile_class *c = find_class(m, &key);
    int rc;
    if (c) {
        c->last_used = ++m->treuse.uses;
        exec_stats_add_times(&m->acct.stats[m->acct.layer], &c->delta, 1);
        m->lreuse.heads[EXEC_REUSE_REPLAYED]++;
        m->w.head_ahead = false, m->w.stream_half = c->staged_next;
        return exec_replay_slot(m, slot_of(m, c), 1, c->span_ps);
    }
    if ((c = new_class(m)) == NULL) {
        m->lreuse.heads[EXEC_REUSE_FULL]++;
        return run(m, arg);
    }
    *c = key;
    c->last_used = ++m->treuse.uses;
    rc = exec_record_begin(m, slot_of(m, c), &r);
    if (rc == NPU_OK)
        rc = run(m, arg);
    if (rc == NPU_OK)
        rc = exec_record_end(m, &r, &c->span_ps, &c->delta);
    c->staged_next = m->w.stream_half;
    if (rc != NPU_OK)
        c->last_used = 0; /* not recorded: free again */
    m->lreuse.heads[EXEC_REUSE_RECORDED] += rc == NPU_OK;
    return rc;
}
