/* SPDX-License-Identifier: MIT */
/*
 * The MoE over the layer (docs/images.md, "MoE over the layer"): under expert parallelism
 * with the residual rows in HBM, an iteration of more rows than one MoE group runs each MoE
 * layer in three passes instead of group by group:
 *   1. per group (its attention just run in xt): route, dispatch (model_moe_ep.c's steps),
 *      then the group's received rows (ep_recv, by slice) go to this rank's spill in HBM,
 *      with the group's record: where they went, each held slice's run in them, the
 *      dispatch's plan (what its count exchange taught this rank), and in functional mode
 *      the top-k of the rank's rows; with two tiles' attention in flight the exchange
 *      and the spill run inside the next group's attention (dispatch_defers);
 *   2. once: each slice this rank holds over the rows of every group, in chunks of up to
 *      moe_rows rows gathered from the spill into ep_recv and xt in turn (the next chunk
 *      loading beside this one's GEMMs), outputs written back over them;
 *      its three matrices are loaded once a layer however many groups (the expert ring
 *      keeps them across the chunks);
 *   3. per group again: its rows (now outputs) and the dispatch's plan back, its choices sorted
 *      again (the routing model's draws, or the stashed top-k), the combine, and the sum
 *      into the group's residual rows; the next group's outputs load (second DMA queue)
 *      into ep_recv beside this group's where it has room, while this one combines.
 * The spill holds moe_spill_rows rows: when the wave's groups' worst cases and the next
 * group's (npu_moe_spill_group_rows) would pass it, the groups before it are served and
 * combined first (a wave; its slices are loaded again in the next).
 * Why: group by group, a layer loads every slice once per group its ring cannot keep (a
 * 2048-row prefill of Qwen3-30B-A3B on large-64: 4 groups of 512 rows, 203 GB of HBM for 58
 * GB of weights), and balanced placement, which spreads a hot expert over several ranks,
 * made that worse. Modelled: the spill's DMA traffic and the records' copies (engine
 * descriptors, chip time); the count matrix's copies move their bytes in performance mode
 * too (exec_copy_kept), since each combine runs on its own group's plan. Not modelled: the
 * hart's reads and writes of a record's header and runs (a few words per group). HAZARD: the passes share ep_recv, moe_pairs and the count
 * matrix with its totals (moe_ep_plan: a group's combine restores its matrix and sums the
 * totals again). A group's spill copies run on the second DMA queue (exec_copy_side), which
 * exec_flush does not wait for: the next group's dispatch drains first (exec_drain), so
 * they have read ep_recv and the count matrix before peers write the next group's into
 * them; the chain's own readers and writers of either wait by their data (the hazard
 * tracker's loads table).
 */
#include <assert.h>
#include <stdio.h>

#include "model_moe.h"
#include "npu/hal.h"

/* The layer being run: its first group not yet served (the wave's), groups recorded so
   far, rows the wave spilled so far, and the wave's groups' worst cases summed: a wave ends
   where the next group's worst case would pass the spill. That is the same on every rank,
   so all end a wave at the same group and the collectives stay matched; the busiest rank's
   actual rows (every rank could sum them from the count matrices) would cost each hart a
   pass over the matrix per group, which 64 harts on 2 host cores made 3x slower to
   simulate. */
struct wide_state {
    uint32_t first, groups;
    uint64_t rows, reserved;
};
/* Per layer parity, as the spill's halves: a layer's combines may wait while the next
   layer's first pass runs (model_layer_ops.c, layer_op_fused). */
static struct wide_state wides[2];

static struct wide_state *wide_of(uint32_t l)
{
    return &wides[l & 1];
}

/* A group's record, at the start of its stash entry (hart-written; then the runs). */
struct wide_record {
    uint64_t first_row; /* its first row in the spill */
    uint64_t rows;      /* rows it spilled: its runs' sum */
};

/* Layer l's half of the spill (npu_layout.h). */
static uint64_t spill_base(const struct exec_model *m, const struct npu_moe_spill *s,
                           uint32_t l)
{
    const uint64_t half = m->plan->moe_spill_parity ? (l & 1) * s->half : 0;
    return m->buf.x_all + npu_moe_x_rows_bytes(m->cfg, m->plan) + half;
}

static uint64_t record_addr(const struct exec_model *m, const struct npu_moe_spill *s,
                            uint32_t l, uint32_t g)
{
    return spill_base(m, s, l) + s->stash + (uint64_t)g * s->stride;
}

static struct wide_record *record(const struct exec_model *m, const struct npu_moe_spill *s,
                                  uint32_t l, uint32_t g)
{
    return (struct wide_record *)(uintptr_t)record_addr(m, s, l, g);
}

/* [held slices][2]: (rows, offset in the group's rows) of each slice this rank holds */
static uint32_t *runs(const struct exec_model *m, const struct npu_moe_spill *s, uint32_t l,
                      uint32_t g)
{
    return (uint32_t *)(uintptr_t)(record_addr(m, s, l, g) + s->runs);
}

/* A group's record, its rows just counted, in the wave: its rows in the spill. */
static void wave_add_rows(struct exec_model *m, const struct npu_moe_spill *s,
                          struct wide_state *w, const struct wide_record *rec, uint32_t n)
{
    assert(w->rows + rec->rows <= s->cap &&
           rec->rows <= npu_moe_spill_group_rows(m->cfg, m->plan, n) &&
           "a row picks an expert once");
    w->rows += rec->rows;
}

/* Group w->groups (of n rows) closes in the wave: its worst case reserved
   (exec_moe_wide_has_room). */
static void wave_reserve(struct exec_model *m, struct wide_state *w, uint32_t n)
{
    w->groups++;
    w->reserved += npu_moe_spill_group_rows(m->cfg, m->plan, n);
}

/* The third pass's outputs in ep_recv: group `group`'s from row `at`, loaded or loading on
   the second DMA queue (set), so that the next group's load beside this one's combine. */
static struct {
    uint32_t layer, group;
    uint64_t at;
    bool set;
} staged;

void exec_moe_wide_begin_layer(struct exec_model *m, uint32_t l)
{
    (void)m;
    *wide_of(l) = (struct wide_state){ 0 };
}

bool exec_moe_wide_has_room(const struct exec_model *m, uint32_t l, uint32_t n)
{
    return wide_of(l)->reserved + npu_moe_spill_group_rows(m->cfg, m->plan, n) <=
           m->plan->moe_spill_rows;
}

void exec_moe_wide_start_wave(struct exec_model *m, uint32_t l)
{
    (void)m;
    struct wide_state *w = wide_of(l);
    w->first = w->groups, w->rows = w->reserved = 0;
    staged.set = false;
}

/* Functional mode: the top-k of the rank's nr rows, to the record (in) or back. */
static void copy_topk(struct exec_model *m, const struct npu_moe_spill *s, uint32_t l,
                      uint32_t g, uint32_t nr, bool out)
{
    const uint64_t bytes = (uint64_t)nr * m->cfg->experts_per_token * 4;
    const uint64_t rec = record_addr(m, s, l, g), a[2] = { m->buf.a.topk_val, m->buf.a.topk_idx };
    const uint64_t r[2] = { rec + s->topk_val, rec + s->topk_idx };
    for (int i = 0; bytes && !m->plan->mode && i < 2; i++)
        exec_copy(m, out ? r[i] : a[i], out ? a[i] : r[i], 1, bytes, bytes, bytes);
}

/* The words of the dispatch's plan this rank uses (its slices' columns): what a record
   keeps of it. */
static uint64_t plan_bytes(const struct exec_model *m, const struct moe_ep_map *x)
{
    return noc_a2av_plan_words(m->tp, x->n, x->first[m->rank + 1] - x->first[m->rank]) * 4;
}

/*
 * Under tile reuse a group's spill copy (its received rows from ep_recv to the spill, the
 * second DMA queue) is left to the next unit, the next group's attention, which issues it
 * at its start (exec_tile.spill), as the full run overlaps it with that attention: issued
 * inside the first pass's unit, the unit's end waited for it, and every group's attention
 * began about 8 us later than in the full run (a 3,982-token layered prompt of
 * Qwen3-30B-A3B on large-64: 134 us a group against 128, TTFT 6 % high). A replayed first
 * pass leaves its spill too (the rows its record holds), so the attention unit after it
 * records the same work. What no unit took is issued before the next dispatch and before
 * the second pass (spill_now); the layer's last group spills at once. The same on every
 * rank. HAZARD: the next dispatch's peers write ep_recv, so the copy must be issued before
 * that dispatch's drain, which spill_now at its start guarantees.
 */
static struct exec_side_copy spill_left;
/* The group being dispatched is the layer's last (m->w.route_last as its dispatch began:
   routing clears that flag). */
static bool spill_last;

void exec_moe_wide_take_spill(struct exec_side_copy *c)
{
    *c = spill_left;
    spill_left.bytes = 0;
}

static void spill_now(struct exec_model *m)
{
    struct exec_side_copy c;
    exec_moe_wide_take_spill(&c);
    if (c.bytes)
        exec_copy_side(m, c.dst, c.src, c.bytes);
}

/* The wave's next group's rows (`rows` of them, from ep_recv) to their place in layer l's
   spill: left to the next unit under tile reuse but for the layer's last group (the second
   pass reads the spill next) and an exchange inside the next group's attention (`now`: as
   the full run issues it), else now. */
static void spill_rows(struct exec_model *m, const struct npu_moe_spill *s, uint32_t l,
                       uint64_t rows, bool now)
{
    const uint64_t row = (uint64_t)m->cfg->hidden_size * m->buf.eb;
    const uint64_t dst = spill_base(m, s, l) + s->rows + wide_of(l)->rows * row;
    const uint64_t bytes = rows * row;
    if (!bytes)
        return;
    if (m->treuse.on && !spill_last && !now)
        spill_left = (struct exec_side_copy){ dst, m->buf.a.ep_recv, bytes };
    else
        exec_copy_side(m, dst, m->buf.a.ep_recv, bytes);
}

/* What a group's exchange left: its record (the group's first row in the spill, each held
   slice's run), its received rows' spill (`now`: see spill_rows), the plan's words and the
   top-k kept, its rows in the wave. */
static void dispatch_done(struct exec_model *m, uint32_t l, uint32_t g, uint32_t n,
                          const struct moe_ep_map *x, const struct noc_alltoallv_plan *plan,
                          bool now)
{
    struct npu_moe_spill s;
    npu_moe_spill_layout(m->cfg, m->plan, &s);
    struct wide_state *w = wide_of(l);
    const uint32_t d = m->cfg->hidden_size, lo = x->first[m->rank], hi = x->first[m->rank + 1];
    struct wide_record *rec = record(m, &s, l, g);
    uint32_t *run = runs(m, &s, l, g);
    rec->first_row = w->rows, rec->rows = 0;
    for (uint32_t i = lo; i < hi; i++) { /* the by-bucket layout: slice lo's run first */
        const uint64_t elems = moe_ep_slice_elems(plan, i);
        run[2 * (i - lo)] = (uint32_t)(elems / d);
        run[2 * (i - lo) + 1] = (uint32_t)(noc_alltoallv_recv_offset(plan, 0, i) / d);
        rec->rows += elems / d;
    }
    exec_set_cat(m, EXEC_CAT_FFN);
    const uint64_t mat = plan_bytes(m, x);
    /* beside the next group's attention (second DMA queue): in the chain's queue they held
       up its first loads with the matrix idle */
    spill_rows(m, &s, l, rec->rows, now);
    /* kept: the combine reads them back in every mode */
    exec_copy_kept(m, record_addr(m, &s, l, g) + s.counts, m->buf.a.ep_matrix, mat, true);
    uint32_t r0, nr, slice;
    moe_ep_rank_rows(m, n, &r0, &nr, &slice);
    copy_topk(m, &s, l, g, nr, true);
    wave_add_rows(m, &s, w, rec, n);
}

/* A group's exchange left to the next group's attention (exec_moe_wide_dispatch_settle):
   layer l's group g of n rows, its send buffer of `bytes` gathered; under tile reuse
   (keyed) the busiest rank's routed pairs and the rows per expert's copy of its routing,
   which key that attention's unit (exec_moe_wide_exchange_key) and stand for the exchange where
   the unit replays (exec_moe_wide_exchange_replay). */
static struct {
    bool set;
    uint32_t l, g, n;
    uint64_t bytes;
    bool prefetch; /* exec_moe_wide_prefetch waits for its record */
    bool keyed;
    uint32_t load;
    uint32_t rows[ROUTING_EXPERTS_MAX * NPU_EXPERT_REPLICAS_MAX]; /* per expert's copy */
} later;

/* Whether a group's exchange waits for the next group's attention: the matrix then runs
   that attention's first tile (its QKV GEMM, and its steps once the hart has issued them)
   while the count rounds and the rows' writes go, where it idled through them between
   this group's router GEMM and the next group's QKV GEMM (Qwen3-30B-A3B prefill-2048 on
   large-64: about 6 us a group; docs/images.md, "MoE over the layer"). Not for the
   layer's last group (the second pass reads its spill next), nor without two tiles'
   attention in flight (attn_tiles runs it after its first tile's QKV collectives;
   attention's chunks over ep_recv are then dead until the next tile's QKV GEMM, issued
   after it). Under tile reuse only a keyed group's (`keyed`): the next attention's unit
   carries its key. */
static bool dispatch_defers(const struct exec_model *m, bool keyed)
{
    return !spill_last && m->plan->attn_deep && (!m->treuse.on || keyed);
}

/* The first pass in full; `keyed` (under tile reuse, NULL: not keyed): the rows per
   expert's copy of the group's routing and its load, kept where the exchange waits. */
static int dispatch_full(struct exec_model *m, uint32_t l, const struct exec_tile *tile,
                         const uint32_t *keyed, uint32_t load)
{
    struct npu_moe_spill s;
    npu_moe_spill_layout(m->cfg, m->plan, &s);
    const struct moe_ep_map *x = moe_ep_map(m, l);
    struct noc_alltoallv_plan plan = moe_ep_plan(m, x);
    struct wide_state *w = wide_of(l);
    assert(w->groups < s.groups && "the planner's group count");
    /* the previous group's spill copies (second DMA queue) have read ep_recv and the count
       matrix before this dispatch's peers write them; for a layer's first group, those of
       the layer before where its combines wait for this pass (its wave still open) */
    const struct wide_state *prev = wide_of(l + 1); /* layer l - 1's parity */
    int rc = w->groups > w->first || prev->groups > prev->first ? exec_drain(m) : NPU_OK;
    const uint32_t g = w->groups;
    if (rc == NPU_OK && dispatch_defers(m, keyed != NULL)) {
        assert(!later.set && "exec_moe_wide_dispatch_group settles the one before");
        uint64_t bytes;
        rc = moe_ep_route_gather(m, l, tile, x, &bytes);
        later.set = rc == NPU_OK, later.l = l, later.g = g, later.n = tile->n;
        later.bytes = bytes, later.prefetch = false;
        later.keyed = keyed != NULL, later.load = load;
        for (uint32_t e = 0; keyed && e < m->cfg->num_experts * NPU_EXPERT_REPLICAS_MAX; e++)
            later.rows[e] = keyed[e];
    } else if (rc == NPU_OK) {
        /* no prefetch: measured slower on prefill-2048 (84.34 ms against 83.94) */
        rc = moe_ep_route_dispatch(m, l, tile, x, &plan, false);
        if (rc == NPU_OK)
            dispatch_done(m, l, g, tile->n, x, &plan, false);
    }
    if (rc == NPU_OK) /* deferred or not, the next group's room counts this one */
        wave_reserve(m, w, tile->n);
    return rc;
}

int exec_moe_wide_dispatch_settle(struct exec_model *m)
{
    if (!later.set)
        return NPU_OK;
    later.set = false;
    const enum exec_cat was = m->acct.cat;
    const struct moe_ep_map *x = moe_ep_map(m, later.l); /* the one map: layer l's again */
    struct noc_alltoallv_plan plan = moe_ep_plan(m, x);
    int rc = moe_ep_dispatch_later(m, later.l, later.n, x, &plan, later.bytes);
    if (rc == NPU_OK)
        dispatch_done(m, later.l, later.g, later.n, x, &plan, true);
    if (rc == NPU_OK && later.prefetch) /* its record is in: the prediction has every group */
        exec_moe_wide_prefetch(m, later.l);
    exec_set_cat(m, was);
    return rc;
}

bool exec_moe_wide_dispatch_pending(void)
{
    return later.set;
}

/* Tile reuse of the first and third passes (docs/images.md, "Tile reuse"): a group's route,
   dispatch and spill, and its combine, are units keyed like a MoE tile (its rows and the
   busiest rank's routed pairs, exec_reuse_wide_draw, matched within 1/32). A first pass
   replays only where both its class and its combine's are recorded: its record (the runs
   its dispatch would have received) then comes from the routing model's draws, which every
   rank makes alike, and the count matrix the combine would read back is never written, so
   that combine must replay too; its class is pinned until then. Otherwise the first pass
   runs in full (recorded when its class is new) and its combine replays if that class
   exists, else runs in full, recorded. With two tiles' attention in flight
   (dispatch_defers) the first pass is the route and gather alone, in full (the exchange
   needs its counts), and the exchange goes into the next group's attention unit, keyed by
   it, which replays only with it (exec_moe_wide_exchange_replay: the same rule through the
   combine's class). The group whose router loads the next layer's shares (m->w.route_last)
   always runs in full. Group by group of the layer: under tile reuse a layer's combines run
   in its own op (layer_defers: not under layer reuse). SRAM: 4 bytes a group, for the first
   WIDE_UNITS_MAX groups of a layer (the reference plan's 33,280 rows are 130 groups of
   256); later groups run in full. */
#define WIDE_UNITS_MAX 160u
enum wide_how { WIDE_FULL, WIDE_KEYED, WIDE_REPLAYED };
static struct {
    uint8_t how;   /* enum wide_how of its first pass */
    uint8_t comb;  /* WIDE_REPLAYED: the combine's class (m->treuse.classes), pinned */
    uint16_t load; /* WIDE_KEYED: the key's load (at most a group's rows x k) */
} units[WIDE_UNITS_MAX];

/* The side copies group g's combine will issue (exec_reuse_tile_sides), as its first pass
   foresees them (a keyed first pass is never the layer's last group): with two group
   buffers the group before's rows back but in the wave's first group, and the next
   group's rows in (a wave that ends at g has none: a replay then counts that load); with
   one, none (each group's rows go back and come in as it is taken). */
static uint8_t combine_sides(const struct exec_model *m, uint32_t l, uint32_t g)
{
    if (m->buf.a.xg_comb == m->buf.a.xt)
        return 0;
    return (uint8_t)((g > wide_of(l)->first) << 1 | 1u << 2);
}

/* Group g's first pass replays (or its exchange): its combine, class c, must replay too,
   and c stays until then. */
static void pin_combine(struct exec_model *m, uint32_t g, struct exec_tile_class *c)
{
    units[g].how = WIDE_REPLAYED, c->pins++;
    units[g].comb = (uint8_t)(c - m->treuse.classes);
}

/* What a replayed exchange leaves: group g's record from the rows per expert's copy (each
   slice of a copy receives all the copy's rows; by bucket, the rank's slices in turn), the wave's
   counts and the layer's routed rows; its spill where `spill` (a replayed exchange inside
   the next group's attention: that unit's span holds it). */
static void record_from_draw(struct exec_model *m, uint32_t l, uint32_t g,
                             const uint32_t *per_copy, uint32_t n, bool spill)
{
    struct npu_moe_spill s;
    npu_moe_spill_layout(m->cfg, m->plan, &s);
    const struct moe_ep_map *x = moe_ep_map(m, l);
    struct wide_state *w = wide_of(l);
    assert(g < s.groups && "the planner's group count");
    const uint32_t E = m->cfg->num_experts, lo = x->first[m->rank], hi = x->first[m->rank + 1];
    struct wide_record *rec = record(m, &s, l, g);
    uint32_t *run = runs(m, &s, l, g);
    rec->first_row = w->rows, rec->rows = 0;
    for (uint32_t i = lo; i < hi; i++) {
        const uint32_t rows = per_copy[moe_copy_index(x->expert[i], x->rep[i])];
        run[2 * (i - lo)] = rows;
        run[2 * (i - lo) + 1] = (uint32_t)rec->rows;
        rec->rows += rows;
    }
    for (uint32_t e = 0; e < E; e++)
        for (uint32_t c = 0; c < x->reps[e]; c++)
            m->acct.expert_tokens[(uint64_t)l * E + e] += per_copy[moe_copy_index(e, c)];
    if (spill)
        spill_rows(m, &s, l, rec->rows, false);
    wave_add_rows(m, &s, w, rec, n);
}

/* The first pass of a group whose class is new (or NULL: none free): in full, recorded. */
static int dispatch_record(struct exec_model *m, uint32_t l, const struct exec_tile *tile,
                           struct exec_tile_class *d)
{
    static struct exec_recording r; /* exec_stats: not on the hart's small stack */
    if (!d) {
        m->treuse.counts[EXEC_REUSE_FULL]++;
        return dispatch_full(m, l, tile, NULL, 0);
    }
    int rc = exec_reuse_unit_begin(m, d, &r);
    rc = rc == NPU_OK ? dispatch_full(m, l, tile, NULL, 0) : rc;
    return rc == NPU_OK ? exec_reuse_unit_end(m, d, &r) : rc;
}

/* Group g's first pass under tile reuse, keyed by its rows per expert's copy and load. */
static int dispatch_keyed(struct exec_model *m, uint32_t l, const struct exec_tile *tile,
                          uint32_t g, const uint32_t *per_copy, uint32_t load)
{
    const uint32_t n = tile->n;
    units[g].how = WIDE_KEYED, units[g].load = (uint16_t)load;
    if (dispatch_defers(m, true)) { /* route and gather here, the exchange in the next unit */
        m->treuse.counts[EXEC_REUSE_FULL]++;
        return dispatch_full(m, l, tile, per_copy, load);
    }
    struct exec_tile_class *d = exec_reuse_unit_find(m, EXEC_OP_WIDE_DISPATCH, n, load, 0);
    struct exec_tile_class *c =
        d ? exec_reuse_unit_find(m, EXEC_OP_WIDE_COMBINE, n, load, combine_sides(m, l, g)) : NULL;
    if (c) {
        pin_combine(m, g, c);
        record_from_draw(m, l, g, per_copy, n, true);
        wave_reserve(m, wide_of(l), n);
        return exec_reuse_unit_replay(m, d);
    }
    if (d) { /* recorded, but not its combine yet: that combine records */
        m->treuse.counts[EXEC_REUSE_FULL]++;
        return dispatch_full(m, l, tile, NULL, 0);
    }
    int rc = exec_reuse_unit_new(m, EXEC_OP_WIDE_DISPATCH, n, load, 0, &d);
    return rc == NPU_OK ? dispatch_record(m, l, tile, d) : rc;
}

int exec_moe_wide_dispatch_group(struct exec_model *m, uint32_t l, const struct exec_tile *tile)
{
    const int rc0 = exec_moe_wide_dispatch_settle(m); /* where no attention took it */
    if (rc0 != NPU_OK)
        return rc0;
    exec_attention_kept_drop(); /* its peers' writes declare no local range */
    struct wide_state *w = wide_of(l);
    const uint32_t g = w->groups;
    _Static_assert(EXEC_REUSE_TILE_SLOTS <= 256, "a class index in a byte");
    if (g < WIDE_UNITS_MAX)
        units[g].how = WIDE_FULL;
    spill_now(m); /* the group before's, where no unit took it: it reads ep_recv */
    spill_last = m->w.route_last;
    if (!m->treuse.on || m->w.route_last || g >= WIDE_UNITS_MAX)
        return dispatch_full(m, l, tile, NULL, 0);
    uint32_t load;
    const uint32_t *per_copy = exec_reuse_wide_draw(m, l, tile, &load);
    if (load > UINT16_MAX)
        return dispatch_full(m, l, tile, NULL, 0);
    return dispatch_keyed(m, l, tile, g, per_copy, load);
}

bool exec_moe_wide_exchange_key(uint32_t *n, uint32_t *load)
{
    const bool keyed = later.set && later.keyed;
    *n = keyed ? later.n : 0, *load = keyed ? later.load : 0;
    return keyed;
}

bool exec_moe_wide_exchange_replay(struct exec_model *m)
{
    assert(later.set && later.keyed && "exec_moe_wide_exchange_key said one waits");
    struct exec_tile_class *c = exec_reuse_unit_find(m, EXEC_OP_WIDE_COMBINE, later.n,
                                                     later.load,
                                                     combine_sides(m, later.l, later.g));
    if (!c)
        return false; /* the combine records: the count matrix must be written */
    later.set = false;
    pin_combine(m, later.g, c);
    record_from_draw(m, later.l, later.g, later.rows, later.n, false);
    return true;
}

void exec_moe_wide_dispatch_forget(struct exec_model *m)
{
    later.set = false;
    spill_left.bytes = 0;
    for (uint32_t g = 0; g < WIDE_UNITS_MAX; g++) { /* combines pinned to replay: not now */
        if (units[g].how == WIDE_REPLAYED && m->treuse.classes[units[g].comb].pins)
            m->treuse.classes[units[g].comb].pins--;
        units[g].how = WIDE_FULL;
    }
}

/* Where a slice's walk over the wave's groups stands: group g, rows done in it. */
struct cursor {
    uint32_t g, done;
};

/* Rows of slice j (the rank's j-th) of layer l between the spill and buf (ep_recv or xt):
   up to `want` from the cursor, into buf (in) or back; returns the rows moved. */
static uint32_t move_rows(struct exec_model *m, const struct npu_moe_spill *s, uint32_t l,
                          uint32_t j, struct cursor *c, uint32_t want, bool in, uint64_t buf)
{
    const uint64_t row = (uint64_t)m->cfg->hidden_size * m->buf.eb;
    const uint64_t rows = spill_base(m, s, l) + s->rows;
    uint32_t moved = 0;
    for (; c->g < wide_of(l)->groups && moved < want; c->g++, c->done = 0) { /* the wave's */
        const uint32_t *run = runs(m, s, l, c->g), n = run[2 * j];
        const uint32_t take = n - c->done < want - moved ? n - c->done : want - moved;
        if (take) {
            const uint64_t at = rows + (record(m, s, l, c->g)->first_row + run[2 * j + 1] +
                                        c->done) * row;
            const uint64_t to = buf + (uint64_t)moved * row, b = take * row;
            exec_copy(m, in ? to : at, in ? at : to, 1, b, b, b);
        }
        moved += take, c->done += take;
        if (c->done < n)
            break; /* the chunk is full inside this group's run */
    }
    return moved;
}

/* A chunk of the rank's slices over the wave's rows: slice j, from its cursor, n rows. */
struct chunk {
    uint32_t j, n;
    struct cursor from;
};

/* The chunk after (*j, *at), loaded into buf: false after the last slice's last. */
static bool next_chunk(struct exec_model *m, const struct npu_moe_spill *s, uint32_t l,
                       uint32_t slices, uint32_t *j, struct cursor *at, uint64_t buf,
                       struct chunk *c)
{
    for (; *j < slices; ++*j, *at = (struct cursor){ wide_of(l)->first, 0 }) {
        c->from = *at;
        c->n = move_rows(m, s, l, *j, at, m->plan->moe_rows, true, buf);
        if (c->n) {
            c->j = *j;
            return true;
        }
    }
    return false;
}

/* Each slice over its rows in chunks of up to moe_rows (ep_recv, hb and xt hold a
   group's), two buffers in turn: chunk k + 1's rows load (the first DMA queue) while chunk
   k's GEMMs run, behind chunk k - 1's outputs going back from that buffer. xt is free here:
   the wave's groups went back to HBM, and the combines load theirs after (the hazard
   tracker orders the second queue's last copy out of it before the first chunk in). One
   buffer, the load waited for the chunk before it: 18 us of a 44 us chunk on Qwen3-30B-A3B
   prefill-2048. */
void exec_moe_wide_prefetch(struct exec_model *m, uint32_t l)
{
    const struct moe_ep_map *x = moe_ep_map(m, l);
    const uint32_t lo = x->first[m->rank], hi = x->first[m->rank + 1];
    const struct wide_state *w = wide_of(l);
    if (lo == hi || m->w.map.ring_slots < 3 || m->treuse.on)
        return;
    struct npu_moe_spill s;
    npu_moe_spill_layout(m->cfg, m->plan, &s);
    /* the groups whose records are written; where none routed rows to the slice but one's
       exchange waits (a layer of two groups), once that one's record is in */
    const bool waits = later.set && later.l == l;
    uint64_t rows = 0;
    for (uint32_t g = w->first; g < (waits ? later.g : w->groups); g++)
        rows += runs(m, &s, l, g)[0]; /* slice lo's rows in group g */
    later.prefetch = waits && !rows;
    if (!rows)
        return;
    const uint64_t bytes = (uint64_t)x->width[lo] * m->cfg->hidden_size * m->buf.eb;
    const enum exec_cat was = m->acct.cat;
    exec_set_cat(m, EXEC_CAT_FFN);
    exec_expert_slice_addr(m, l, MT_E_GATE, 0, bytes);
    exec_expert_slice_addr(m, l, MT_E_UP, 0, bytes);
    exec_set_cat(m, was);
}

int exec_moe_wide_serve_slices(struct exec_model *m, uint32_t l)
{
    const int rc0 = exec_moe_wide_dispatch_settle(m); /* a wave's last group's */
    if (rc0 != NPU_OK)
        return rc0;
    exec_attention_kept_drop(); /* its peers' writes declare no local range */
    struct npu_moe_spill s;
    npu_moe_spill_layout(m->cfg, m->plan, &s);
    const struct moe_ep_map *x = moe_ep_map(m, l);
    const uint32_t lo = x->first[m->rank], hi = x->first[m->rank + 1];
    const uint64_t bufs[2] = { m->buf.a.ep_recv, m->buf.a.xt };
    exec_set_cat(m, EXEC_CAT_FFN);
    spill_now(m); /* a wave's last group's, where its attention did not take it */
    uint32_t j = 0;
    struct cursor at = { wide_of(l)->first, 0 };
    struct chunk cur, nx;
    bool have = next_chunk(m, &s, l, hi - lo, &j, &at, bufs[0], &cur);
    for (uint32_t k = 0; have; k ^= 1) {
        const bool more = next_chunk(m, &s, l, hi - lo, &j, &at, bufs[k ^ 1], &nx);
        moe_ep_serve_slice(m, l, bufs[k], cur.n, cur.j, x->width[lo + cur.j]);
        move_rows(m, &s, l, cur.j, &cur.from, cur.n, false, bufs[k]);
        cur = nx, have = more;
    }
    return exec_flush(m);
}

/* Layer l's group g's outputs from the spill into ep_recv from row `at`: on the second
   DMA queue (beside the combine before), or with `now` on the chain's, where the second
   queue is busy with the residual rows' copies (a combine inside the next layer's pass). */
static void stage_outputs(struct exec_model *m, const struct npu_moe_spill *s, uint32_t l,
                          uint32_t g, uint64_t at, bool now)
{
    const uint64_t row = (uint64_t)m->cfg->hidden_size * m->buf.eb;
    const struct wide_record *rec = record(m, s, l, g);
    const uint64_t dst = m->buf.a.ep_recv + at * row, bytes = rec->rows * row;
    const uint64_t src = spill_base(m, s, l) + s->rows + rec->first_row * row;
    if (bytes && now)
        exec_load_rows(m, dst, src, bytes);
    else if (bytes)
        exec_copy_side(m, dst, src, bytes);
    staged.layer = l, staged.group = g, staged.at = at, staged.set = true;
}

/* Group g's outputs (rows [at, at + n) of ep_recv) are loaded or loading: the next
   group's start loading after them where ep_recv has room, else before them where they
   fit there, else as that group's combine starts. ep_recv holds a group's worst case;
   a Qwen3-30B-A3B prefill-2048 rank receives about a third of it. Room is the buffer's
   own rows (up to ep_out, which moe_ep_combine_add_from checks), and a next group that
   received no rows on this rank stages nothing after this one's: it was put at
   at + n, which is the buffer's end when this group filled it (the layered reference plan
   with balanced placement, core 54 under skewed routing: an assertion). */
static void stage_next(struct exec_model *m, const struct npu_moe_spill *s, uint32_t l,
                       uint32_t g, uint64_t at)
{
    if (g + 1 >= wide_of(l)->groups)
        return;
    const uint64_t row = (uint64_t)m->cfg->hidden_size * m->buf.eb;
    const uint64_t cap = (m->buf.a.ep_out - m->buf.a.ep_recv) / row;
    const uint64_t n = record(m, s, l, g)->rows, n1 = record(m, s, l, g + 1)->rows;
    if (n1 > 0 && at + n + n1 <= cap)
        stage_outputs(m, s, l, g + 1, at + n, false);
    else if (n1 <= at)
        stage_outputs(m, s, l, g + 1, 0, false);
}

/* Under tile reuse the wave's first combine is a unit, whose recording starts with the
   engines drained and the ranks aligned (exec_record_begin): its outputs' load, issued
   inside it, then ran after the wait for the slowest rank to finish the experts' pass, where
   the full run's load runs during that wait (a 3,982-token layered prompt of Qwen3-30B-A3B
   on large-64 under skewed:1.0: about 24 us a layer more under tiles). So the third pass
   issues that load first, in either mode; the combine finds it staged, as every later
   group's is by the combine before (stage_next). */
void exec_moe_wide_stage_first(struct exec_model *m, uint32_t l, uint32_t group)
{
    struct npu_moe_spill s;
    npu_moe_spill_layout(m->cfg, m->plan, &s);
    assert(group < wide_of(l)->groups && "a group of the wave");
    const enum exec_cat was = m->acct.cat;
    exec_set_cat(m, EXEC_CAT_FFN);
    stage_outputs(m, &s, l, group, 0, false);
    exec_set_cat(m, was);
}

/* The group's outputs staged as above (the combine waits for their load by range; with
   `ahead` the next group's start loading beside it), its dispatch plan and top-k back, its
   choices sorted again, the combine and the sum. */
static int combine_full(struct exec_model *m, uint32_t l, const struct exec_tile *tile,
                        uint32_t group, bool ahead, bool add)
{
    struct npu_moe_spill s;
    npu_moe_spill_layout(m->cfg, m->plan, &s);
    const struct wide_state *w = wide_of(l);
    assert(group >= w->first && group < w->groups && "a group of the wave");
    const struct moe_ep_map *x = moe_ep_map(m, l);
    struct noc_alltoallv_plan plan = moe_ep_plan(m, x);
    const uint64_t row = (uint64_t)m->cfg->hidden_size * m->buf.eb;
    const struct wide_record *rec = record(m, &s, l, group);
    const uint64_t mat = plan_bytes(m, x);
    exec_set_cat(m, EXEC_CAT_FFN);
    if (!staged.set || staged.layer != l || staged.group != group)
        stage_outputs(m, &s, l, group, 0, !ahead);
    const uint64_t at = staged.at;
    staged.set = false;
    if (ahead)
        stage_next(m, &s, l, group, at);
    exec_copy_kept(m, m->buf.a.ep_matrix, record_addr(m, &s, l, group) + s.counts, mat, false);
    uint32_t r0, nr, slice;
    moe_ep_rank_rows(m, tile->n, &r0, &nr, &slice);
    copy_topk(m, &s, l, group, nr, false);
    /* the hart reads the matrix and the top-k: waits for those alone, since the combine
       may run beside a router GEMM (exec_layer_beside_route) */
    const uint64_t topk = m->plan->mode ? 0 : (uint64_t)nr * m->cfg->experts_per_token * 4;
    int rc = exec_wait_for(m, m->buf.a.ep_matrix, mat);
    if (rc == NPU_OK && topk)
        rc = exec_wait_for(m, m->buf.a.topk_val, topk);
    if (rc == NPU_OK && topk)
        rc = exec_wait_for(m, m->buf.a.topk_idx, topk);
    if (rc == NPU_OK && rec->rows) /* and the combine sends the outputs */
        rc = exec_wait_for(m, m->buf.a.ep_recv + at * row, rec->rows * row);
    if (rc != NPU_OK)
        return rc;
    moe_sort_choices(m, l, tile, r0, r0 + nr, x);
    return moe_ep_combine_add_from(m, tile, x, &plan, at, add);
}

/* The combine with the group before's rows going back and the next group's loading beside
   it (tile->back, pre: set under tile reuse, model_layer_ops.c, group_sides_in). */
static int combine_with_load(struct exec_model *m, uint32_t l, const struct exec_tile *tile,
                             uint32_t group, bool ahead, bool add)
{
    if (tile->pre.bytes || tile->back.bytes) {
        exec_set_cat(m, EXEC_CAT_OTHER);
        exec_tile_side_copies(m, tile);
    }
    return combine_full(m, l, tile, group, ahead, add);
}

/* A replayed combine. Where its recording staged the next group's outputs (stage_next:
   room for them, a next group), its span and traffic hold that load, so that group's
   combine, run in full, takes them as staged rather than loading them again. */
static int combine_replay(struct exec_model *m, uint32_t l, const struct exec_tile *tile,
                          uint32_t group, struct exec_tile_class *c)
{
    if (c->staged_next && group + 1 < wide_of(l)->groups)
        staged.layer = l, staged.group = group + 1, staged.at = 0, staged.set = true;
    const int rc = exec_reuse_sides_missing(m, c, tile);
    return rc == NPU_OK ? exec_reuse_unit_replay(m, c) : rc;
}

/* The combine of a group whose class is new (or NULL: none free): in full, recorded, with
   whether it staged the next group's outputs. */
static int combine_record(struct exec_model *m, uint32_t l, const struct exec_tile *tile,
                          uint32_t group, struct exec_tile_class *c)
{
    static struct exec_recording r;
    if (!c) {
        m->treuse.counts[EXEC_REUSE_FULL]++;
        return combine_with_load(m, l, tile, group, true, true);
    }
    c->sides = exec_reuse_tile_sides(tile);
    int rc = exec_reuse_unit_begin(m, c, &r);
    rc = rc == NPU_OK ? combine_with_load(m, l, tile, group, true, true) : rc;
    c->staged_next = staged.set && staged.layer == l && staged.group == group + 1;
    return rc == NPU_OK ? exec_reuse_unit_end(m, c, &r) : rc;
}

/* Under tile reuse (above): the combine replays where its first pass did, or where its
   class is recorded; else it runs in full, recorded where its first pass was keyed. Its
   key holds which side copies it issues (exec_reuse_tile_sides: a wave's first group has
   no copy back, its last no load), not their sizes (docs/images.md, "Tile reuse": with
   the sizes in, the 6-request layered sample recorded twice the units for 0.2 % of mean
   TTFT). */
int exec_moe_wide_combine_group(struct exec_model *m, uint32_t l, const struct exec_tile *tile,
                                uint32_t group, bool ahead, bool add)
{
    const int rc0 = exec_moe_wide_dispatch_settle(m); /* it reads ep_recv and the plan */
    if (rc0 != NPU_OK)
        return rc0;
    exec_attention_kept_drop(); /* its peers' writes declare no local range */
    if (!m->treuse.on || group >= WIDE_UNITS_MAX || units[group].how == WIDE_FULL)
        return combine_with_load(m, l, tile, group, ahead, add);
    assert(ahead && add && "tile reuse: the third pass's combines (layer_wide_combines)");
    const uint32_t how = units[group].how;
    units[group].how = WIDE_FULL;
    struct exec_tile_class *c = &m->treuse.classes[units[group].comb];
    if (how == WIDE_REPLAYED) {
        c->pins--;
        return combine_replay(m, l, tile, group, c);
    }
    c = exec_reuse_unit_find(m, EXEC_OP_WIDE_COMBINE, tile->n, units[group].load,
                             exec_reuse_tile_sides(tile));
    if (c)
        return combine_replay(m, l, tile, group, c);
    int rc = exec_reuse_unit_new(m, EXEC_OP_WIDE_COMBINE, tile->n, units[group].load,
                                 exec_reuse_tile_sides(tile), &c);
    return rc == NPU_OK ? combine_record(m, l, tile, group, c) : rc;
}
