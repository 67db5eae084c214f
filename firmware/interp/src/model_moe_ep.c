/* SPDX-License-Identifier: MIT */
/*
 * The MoE op under expert parallelism (plan partition ep, tp = p > 1 ranks; docs/images.md,
 * "Expert parallelism", "Expert placement"), over a group of n <= moe_rows rows (the whole
 * iteration's rows when they fit: "MoE groups"). The image's expert map gives each rank, per
 * layer, slices of experts (units of the intermediate width; a whole expert under contiguous
 * placement, the popular ones spread over several ranks under balanced placement). Rank r
 * owns a slice of the group's rows, [r S, r S + S) with S = ceil(n / p):
 *   1. route: RMSNorm, router and top-k of its rows only (nobody else knows these choices);
 *   2. dispatch: each choice becomes one pair per slice of its expert (of one copy of a
 *      copied expert: the row's, npu_expert_replica); the pairs, sorted by slice (hence by
 *      owner), go over the NoC to the slices' ranks (noc_alltoallv_dispatch; the per-slice
 *      counts travel with it);
 *   3. serve: the dispatch leaves each slice's rows from every sender as one run (its
 *      by-bucket layout); each rank runs one SwiGLU per slice it holds over that run
 *      (grouped expert GEMM over the slice's columns) and writes the outputs over it;
 *   4. combine: the outputs go back to the row owners (noc_alltoallv_combine), which weight
 *      them, add a choice's slices (its partial outputs) in slice order, and sum each row's
 *      k slots in top-k order (the reference's order);
 *   5. all-gather of the row slices' outputs; every rank adds them to the residual rows (in
 *      the model's last layer, the rows whose tokens are wanted alone: gather_wanted).
 * Modelled hazard: the attention block is still replicated over the group, so the residual
 * rows arrive on every rank; the MoE uses only its slice of them, and a slice's owner gets
 * its rows through the dispatch alone. Expert-load bytes are counted by each slice's owner
 * (a slice's bytes); every rank counts the routed tokens from the slices' totals, which the
 * dispatch's count exchange gives every rank.
 */
#include <assert.h>
#include <stdio.h>

#include "model_moe.h"
#include "noc/collective.h"
#include "npu/hal.h"
#include "npu/vector.h"

/* The map of the layer last asked for: scratch, not model state (struct exec_model). */
static struct moe_ep_map ep_map;

/* The dispatch's group: the tensor-parallel group, or under disaggregation the pair group of
   every replica's ranks followed by the expert instance's (model_setup.c, join_pair), where
   expert rank r is rank base + r. */
static uint32_t ep_base(const struct exec_model *m)
{
    return m->plan->disagg ? m->tp * m->replicas : 0;
}

static uint32_t ep_self(const struct exec_model *m)
{
    return ep_base(m) + m->rank;
}

static struct noc_comm *ep_comm(const struct exec_model *m)
{
    return m->moe_comm ? m->moe_comm : m->comm;
}

/* Builds ep_map from layer l's slices of the image's expert map. */
static void build_map(const struct exec_model *m, uint32_t l, struct moe_ep_map *x)
{
    const struct npu_image_header *h = (const struct npu_image_header *)m->image;
    const uint32_t U = m->plan->expert_units, E = m->cfg->num_experts;
    const uint32_t unit = m->cfg->moe_intermediate_size / U;
    uint32_t n;
    const struct npu_image_expert_slice *s = npu_image_expert_layer(h, l, &n);
    const uint32_t P = npu_plan_ep_ranks(m->plan), base = ep_base(m);
    x->layer = l + 1, x->n = n;
    for (uint32_t q = 0; q <= P; q++)
        x->first[q] = 0;
    for (uint32_t e = 0; e <= E; e++)
        x->efirst[e] = 0;
    for (uint32_t i = 0; i < n; i++) { /* the image check keeps these in range */
        x->expert[i] = s[i].expert, x->rank[i] = s[i].rank;
        x->f0[i] = (uint16_t)(s[i].unit0 * unit), x->width[i] = s[i].units * unit;
        x->rep[i] = s[i].rep, x->reps[s[i].expert] = s[i].reps;
        x->first[base + s[i].rank + 1]++, x->efirst[s[i].expert + 1]++;
    }
    for (uint32_t q = 0; q < P; q++)
        x->first[q + 1] += x->first[q];
    for (uint32_t e = 0; e < E; e++)
        x->efirst[e + 1] += x->efirst[e];
    uint16_t fill[ROUTING_EXPERTS_MAX];
    for (uint32_t e = 0; e < E; e++)
        fill[e] = x->efirst[e];
    for (uint32_t i = 0; i < n; i++)
        x->by_expert[fill[s[i].expert]++] = (uint16_t)i;
}

const struct moe_ep_map *moe_ep_map(const struct exec_model *m, uint32_t l)
{
    if (ep_map.layer != l + 1)
        build_map(m, l, &ep_map);
    return &ep_map;
}

struct noc_alltoallv_plan moe_ep_plan(const struct exec_model *m, const struct moe_ep_map *x)
{
    return (struct noc_alltoallv_plan){ .buckets = x->n, .bucket_first = x->first,
                                        .words = (uint32_t *)(uintptr_t)m->buf.a.ep_matrix,
                                        .capacity = npu_ep_plan_words(m->cfg, m->plan),
                                        .by_bucket = true /* a slice's rows: one run */ };
}

/* Layer l's map against this rank's expert shares and the model. */
static bool owns_layer(const struct exec_model *m, uint32_t l)
{
    const struct moe_ep_map *x = moe_ep_map(m, l);
    const uint32_t lo = x->first[ep_self(m)], hi = x->first[ep_self(m) + 1];
    bool ok = x->n > 0 && m->cfg->moe_intermediate_size % m->plan->expert_units == 0;
    for (uint32_t i = 0; ok && i < x->n; i++)
        ok = x->expert[i] < m->cfg->num_experts;
    for (uint32_t k = MT_E_GATE; ok && k <= MT_E_DOWN; k++) {
        const struct npu_image_tensor *t = m->w.t[l][k];
        ok = !t || (t->block0 == lo && t->blocks == hi - lo);
    }
    if (!ok)
        printf("MODEL error: core %u: rank %u's expert shares of layer %u are not its slices "
               "[%u, %u) of the image's expert map (or the map names an expert the model does "
               "not have)\n", hal_self()->core_id, m->rank, l, lo, hi);
    return ok;
}

bool exec_moe_ep_owns(const struct exec_model *m)
{
    for (uint32_t l = 0; l < m->cfg->num_layers; l++)
        if (!owns_layer(m, l))
            return false;
    return true;
}

static struct noc_alltoallv_args dispatch_args(const struct exec_model *m, uint32_t n)
{
    const uint32_t kx = m->plan->expert_fanout, per_rank = m->plan->expert_rank_slices;
    const uint64_t rows = (uint64_t)n * (kx < per_rank ? kx : per_rank);
    return (struct noc_alltoallv_args){ .counts = (const uint32_t *)(uintptr_t)m->buf.a.ep_counts,
                                        .send = m->buf.a.ep_send, .recv = m->buf.a.ep_recv,
                                        .recv_capacity = rows * m->cfg->hidden_size,
                                        .dtype = m->buf.dt };
}

/* Step 2's first half on this rank's slice of rows (xb, routed and sorted): its pairs by
   expert slice into ep_send (issued, not waited for) and the elements per slice into
   ep_counts. Returns the bytes gathered. */
static uint64_t dispatch_gather(struct exec_model *m, uint32_t S)
{
    const struct moe_pairs *p = &moe_pairs;
    const uint32_t d = m->cfg->hidden_size;
    uint32_t *counts = (uint32_t *)(uintptr_t)m->buf.a.ep_counts;
    moe_gather_pairs(m, m->buf.a.ep_send, m->buf.a.xb, 0, p->first[S]);
    for (uint32_t s = 0; s < S; s++)
        counts[s] = (p->first[s + 1] - p->first[s]) * d;
    return (uint64_t)p->first[S] * d * m->buf.eb;
}

/* Its second half, the exchange of a group of n rows, once the gather is done. */
static int dispatch_send(struct exec_model *m, struct noc_alltoallv_plan *plan, uint32_t n)
{
    struct noc_alltoallv_args a = dispatch_args(m, n);
    exec_set_cat(m, EXEC_CAT_COLL);
    int rc = noc_alltoallv_dispatch(ep_comm(m), &a, plan);
    exec_set_cat(m, EXEC_CAT_FFN);
    return rc;
}

/* Step 2 whole: the gather, a wait for every engine, the exchange. */
static int dispatch(struct exec_model *m, struct noc_alltoallv_plan *plan,
                    const struct exec_tile *tile, uint32_t l, bool prefetch)
{
    dispatch_gather(m, plan->buckets);
    int rc = exec_flush(m);
    if (rc != NPU_OK)
        return rc;
    if (prefetch) /* while the NoC dispatches */
        exec_moe_prefetch(m, l, tile->n, tile->whole);
    return dispatch_send(m, plan, tile->n);
}

void moe_ep_rank_rows(const struct exec_model *m, uint32_t n, uint32_t *r0, uint32_t *nr,
                      uint32_t *slice)
{
    *slice = (n + m->tp - 1) / m->tp;
    *r0 = m->rank * *slice < n ? m->rank * *slice : n;
    *nr = n - *r0 < *slice ? n - *r0 : *slice;
}

uint64_t moe_ep_slice_elems(const struct noc_alltoallv_plan *plan, uint32_t s)
{
    return noc_alltoallv_total(plan, s); /* every rank learns every slice's total */
}

/* Step 1 on this rank's slice of the group's rows, its choices sorted into moe_pairs. */
static int route_sorted(struct exec_model *m, uint32_t l, const struct exec_tile *tile,
                        const struct moe_ep_map *x)
{
    const uint64_t row = (uint64_t)m->cfg->hidden_size * m->buf.eb;
    uint32_t r0, nr, slice;
    moe_ep_rank_rows(m, tile->n, &r0, &nr, &slice);
    exec_set_cat(m, EXEC_CAT_FFN);
    int rc = moe_route(m, l, tile->xt + r0 * row, nr);
    /* HAZARD: the router may have run the layer before's combine beside its GEMM
       (exec_layer_beside_route), which asked for that layer's map: the one map (and x,
       which points to it) becomes this layer's again */
    const struct moe_ep_map *again = moe_ep_map(m, l);
    assert(again == x && "one map at a time");
    (void)again;
    if (rc == NPU_OK)
        exec_stage_after_route(m, l); /* the router read the layer's last shares */
    if (rc == NPU_OK)
        moe_sort_choices(m, l, tile, r0, r0 + nr, x);
    return rc;
}

/* Every slice's routed rows into the accounting, once the exchange told every total. */
static void count_tokens(struct exec_model *m, uint32_t l, const struct moe_ep_map *x,
                         const struct noc_alltoallv_plan *plan)
{
    const uint32_t d = m->cfg->hidden_size, E = m->cfg->num_experts;
    for (uint32_t s = 0; s < x->n; s++)
        if (x->f0[s] == 0) /* a copy's rows, counted at its first slice */
            m->acct.expert_tokens[(uint64_t)l * E + x->expert[s]] +=
                moe_ep_slice_elems(plan, s) / d;
}

int moe_ep_route_dispatch(struct exec_model *m, uint32_t l, const struct exec_tile *tile,
                          const struct moe_ep_map *x, struct noc_alltoallv_plan *plan,
                          bool prefetch)
{
    int rc = route_sorted(m, l, tile, x);
    rc = rc == NPU_OK ? dispatch(m, plan, tile, l, prefetch) : rc;
    if (rc == NPU_OK)
        count_tokens(m, l, x, plan);
    return rc;
}

int moe_ep_route_gather(struct exec_model *m, uint32_t l, const struct exec_tile *tile,
                        const struct moe_ep_map *x, uint64_t *bytes)
{
    *bytes = 0;
    int rc = route_sorted(m, l, tile, x);
    if (rc == NPU_OK)
        *bytes = dispatch_gather(m, x->n); /* a bucket per slice (moe_ep_plan) */
    return rc;
}

int moe_ep_dispatch_later(struct exec_model *m, uint32_t l, uint32_t n,
                          const struct moe_ep_map *x, struct noc_alltoallv_plan *plan,
                          uint64_t bytes)
{
    const struct npu_act_layout *a = &m->buf.a;
    /* (the waits are charged to the caller's category: attention's work they wait for) */
    /* the gather; then what of this rank's own still reads or writes the receive buffer
       (attention's chunks lie over its end, npu_layout.c), since the peers' writes into it
       declare no range to the hazard tracker: they start once this rank's second count
       round tells them where (docs/noc-driver.md) */
    int rc = exec_wait_for_collective(m, a->ep_send, bytes ? bytes : 1);
    rc = rc == NPU_OK ? exec_wait_for(m, a->ep_recv, a->ep_out - a->ep_recv) : rc;
    exec_attention_kept_drop_range(a->ep_recv, a->ep_out);
    rc = rc == NPU_OK ? dispatch_send(m, plan, n) : rc;
    if (rc == NPU_OK)
        count_tokens(m, l, x, plan);
    return rc;
}

void moe_ep_serve_slice(struct exec_model *m, uint32_t l, uint64_t rows, uint32_t n,
                        uint32_t block, uint32_t w)
{
    const uint32_t d = m->cfg->hidden_size;
    const uint64_t bytes = (uint64_t)w * d * m->buf.eb; /* of each matrix's slice */
    const struct npu_act_layout *a = &m->buf.a;
    /* hb[n][w] = x[n][d] gate[w][d]^T, hb2 likewise with up */
    exec_gemm(m, a->hb, rows, exec_expert_slice_addr(m, l, MT_E_GATE, block, bytes), n, w, d,
              d, d, w, true, false, false);
    exec_gemm(m, a->hb2, rows, exec_expert_slice_addr(m, l, MT_E_UP, block, bytes), n, w, d,
              d, d, w, true, false, false);
    exec_vec(m, exec_vec_act(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_SWIGLU,
                                                         .x = a->hb, .y = a->hb2, .out = a->hb,
                                                         .rows = n, .cols = w }));
    /* out[n][d] = hb[n][w] down[d][w]^T: the slice's partial output */
    exec_gemm(m, rows, a->hb, exec_expert_slice_addr(m, l, MT_E_DOWN, block, bytes), n, d, w,
              w, w, d, true, false, false);
}

/* The order in which a MoE group serves this rank's slices [lo, hi): order[i] is the i-th,
   from the group's direction (backward: hi - 1 down to lo). Groups of a layer alternate the
   direction (serve_experts): a ring too small for the rank's slices still holds the last
   ones served, and the next group serves those first (a layer of G groups loads 3 x slices
   + (G - 1) x max(0, 3 x slices - ring slots) matrices instead of G x 3 x slices). The
   layer's only group (`only`) leaves nothing to a next group, so it serves the widest
   slices first (stable, so equal widths keep the direction): the ring loads matrix
   k + slots only once GEMM k has read its slot, and a whole expert's matrix behind a
   one-unit slice's short GEMMs left the array waiting for its load (Qwen3-30B-A3B
   prefill-512 skewed:1.0 on large-64, a ring of 2 slots: 11.6 us a layer on rank 0). */
/* serve_order's output: scratch of one call at a time (not on the hart's small stack) */
static uint32_t serve_slices[NPU_EXPERT_MAP_MAX];

static uint32_t serve_order(const struct moe_ep_map *x, uint32_t lo, uint32_t hi, bool backward,
                            bool only, uint32_t *order)
{
    const uint32_t n = hi - lo;
    assert(n <= NPU_EXPERT_MAP_MAX && "a layer's slices");
    for (uint32_t i = 0; i < n; i++) {
        const uint32_t s = backward ? hi - 1 - i : lo + i;
        uint32_t j = i;
        for (; only && j > 0 && x->width[order[j - 1]] < x->width[s]; j--)
            order[j] = order[j - 1];
        order[j] = s;
    }
    return n;
}

/* Step 3: every expert slice this rank holds, over every row of the group dispatched to it.
   The dispatch left each slice's rows as one run of ep_recv (by bucket), so the slice's
   SwiGLU reads them there and writes its outputs over them (the up projections have read
   them by then): no gather, no scatter. The slices in serve_order's order; `last`: the
   layer's last group, after whose loads the head's first piece may load (exec_head_ahead);
   `only`: the layer's only group. */
static int serve_experts(struct exec_model *m, uint32_t l, const struct moe_ep_map *x,
                         const struct noc_alltoallv_plan *plan, bool last, bool only)
{
    const uint32_t d = m->cfg->hidden_size;
    const uint32_t lo = x->first[ep_self(m)], hi = x->first[ep_self(m) + 1];
    uint32_t *const order = serve_slices;
    const uint32_t n = serve_order(x, lo, hi, m->w.ring.backward, only, order);
    m->w.ring.backward = !m->w.ring.backward;
    for (uint32_t i = 0; i < n; i++) {
        const uint32_t s = order[i];
        const uint64_t elems = moe_ep_slice_elems(plan, s); /* rows x d */
        if (elems == 0)
            continue;
        const uint64_t rows = m->buf.a.ep_recv +
                              noc_alltoallv_recv_offset(plan, 0, s) * m->buf.eb;
        moe_ep_serve_slice(m, l, rows, (uint32_t)(elems / d), s - lo, x->width[s]);
    }
    if (last)
        exec_head_ahead(m, l, true);
    return exec_flush(m);
}

/* The index list of weigh_and_sum's gather: slot (row, choice) of the rows' top-k from the
   pair holding its first slice. Tiles of at most COMBINE_SLOTS_MAX / k rows per rank (the
   reference plan's: 9 x 8); more take a copy per pair. */
#define COMBINE_SLOTS_MAX 1024u
static uint32_t combine_src[COMBINE_SLOTS_MAX];

/* Step 4 after the combine: the slice's pair outputs (in ep_send, pair order) weighted and
   put in their top-k slots (one gather of every choice's first slice; a choice's further
   slices added to it in pair order, after it), then the k slots of each row summed into
   out[nr][d]. */
static void weigh_and_sum(struct exec_model *m, uint64_t out, uint32_t nr, uint32_t pairs)
{
    const struct moe_pairs *p = &moe_pairs;
    const struct npu_act_layout *a = &m->buf.a;
    const uint32_t d = m->cfg->hidden_size, k = m->cfg->experts_per_token;
    const uint64_t row = (uint64_t)d * m->buf.eb;
    exec_vec(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_ROW_DIV, .x = a->ep_send,
                                         .y = a->rweight, .out = a->ep_send, .rows = pairs,
                                         .cols = d, .ldy = 1, .x_type = m->buf.dt,
                                         .out_type = m->buf.dt, .y_type = NPU_DTYPE_FP32 });
    const bool gather = nr > 0 && nr * k <= COMBINE_SLOTS_MAX;
    if (gather) {
        /* HAZARD: the list of the last tile's gather */
        int rc = exec_wait_for(m, (uint64_t)(uintptr_t)combine_src, sizeof(combine_src));
        assert(rc == NPU_OK && "a wait without a deadline");
        (void)rc;
        for (uint32_t j = 0; j < nr * k; j++)
            combine_src[j] = UINT32_MAX;
        for (uint32_t i = 0; i < pairs; i++)
            if (!p->part[i])
                combine_src[p->row[i] * k + p->slot[i]] = i;
        for (uint32_t j = 0; j < nr * k; j++)
            assert(combine_src[j] != UINT32_MAX && "every slot has a first slice");
        exec_gather(m, &(struct exec_gather_args){ .dst = a->combine, .table = a->ep_send,
                                                   .index = combine_src, .rows = nr * k,
                                                   .row_bytes = row, .table_rows = pairs });
    }
    for (uint32_t i = 0; i < pairs; i++) {
        const uint64_t dst = a->combine + ((uint64_t)p->row[i] * k + p->slot[i]) * row;
        if (!p->part[i] && !gather)
            exec_copy(m, dst, a->ep_send + i * row, 1, row, row, row);
        else if (p->part[i])
            exec_vec(m, exec_vec_act(m, (struct vector_op_args){
                            .op = NPU_VECTOR_OP_ADD, .x = dst, .y = a->ep_send + i * row,
                            .out = dst, .rows = 1, .cols = d }));
    }
    moe_sum_slots(m, out, a->combine, nr);
}

/* Whether the rows' outputs of this MoE (x: its layer's map) are read by the LM head
   alone: the model's last layer in a pass that runs the head, outside attention/expert
   disaggregation and tile reuse (a replayed tile would stand for a different gather). */
static bool head_reads_only(const struct exec_model *m, const struct moe_ep_map *x)
{
    /* x's layer, not the one charged: a layer's deferred combines run in the next */
    return m->head_due && x->layer == m->cfg->num_layers && !m->plan->disagg &&
           !m->treuse.on;
}

/* The tile rows whose next token is wanted: the last row of each run that wants one, in
   ascending order (as the tile's segments). */
static uint32_t wanted_rows(const struct exec_tile *tile, uint32_t *rows)
{
    uint32_t n = 0;
    for (uint32_t s = 0; s < tile->nsegs; s++) {
        const struct exec_seg *g = &tile->segs[s];
        if (g->run->wants_token && g->pos + g->count == g->run->pos + g->run->count)
            rows[n++] = g->row + g->count - 1;
    }
    return n;
}

/* The most wanted rows any rank's slice holds (0: none in this tile). */
static uint32_t wanted_per_rank(const uint32_t *rows, uint32_t n, uint32_t slice)
{
    uint32_t k = 0;
    for (uint32_t i = 0, j = 0; i < n; i = j) {
        while (j < n && rows[j] / slice == rows[i] / slice)
            j++;
        k = j - i > k ? j - i : k;
    }
    return k;
}

/* Where wanted row i (of want[], ascending) is packed: its slice's rank's chunk, [tp][k][d]
   rows, at its place among that slice's wanted rows (*j, carried from row i - 1). */
static uint64_t packed_row(const uint32_t *want, uint32_t i, uint32_t slice, uint32_t k,
                           uint32_t *j)
{
    *j = i > 0 && want[i] / slice == want[i - 1] / slice ? *j + 1 : 0;
    return (uint64_t)(want[i] / slice) * k + *j;
}

/* Step 5 in the model's last layer when only the head reads its outputs: the all-gather
   moves the wanted rows alone (k per rank, packed at the start of each rank's chunk of
   ep_out: [tp][k][d]) and only they get the MoE's output added; the other rows keep their
   residual before the layer, which nothing reads. Qwen3-30B-A3B's 512-row prefill on
   large-64: 64 rows of 4 KiB gathered instead of 512. The packing copies go towards lower
   rows, each after the rows it reads (the j-th wanted row of a slice sits at its j-th row
   or later); the all-gather waits for them and for the rank's own sums (with them, in the
   vector queue's order, the weighing that reads rweight, as moe_ep_combine_add_from's)
   before any rank writes. */
static int gather_wanted(struct exec_model *m, const struct exec_tile *tile,
                         const uint32_t *want, uint32_t nw, uint32_t slice, uint32_t k)
{
    const uint32_t d = m->cfg->hidden_size;
    const uint64_t row = (uint64_t)d * m->buf.eb, ep_out = m->buf.a.ep_out;
    for (uint32_t i = 0, j = 0; i < nw; i++) {
        const uint64_t at = packed_row(want, i, slice, k, &j) * row;
        if (want[i] / slice == m->rank && at != want[i] * row)
            exec_copy(m, ep_out + at, ep_out + want[i] * row, 1, row, row, row);
    }
    const uint64_t all = (uint64_t)m->tp * k * d;
    int rc = exec_wait_for_collective(m, ep_out, (uint64_t)m->tp * slice * row);
    if (rc == NPU_OK) {
        struct noc_coll_args g = { .buf = ep_out, .count = all, .dtype = m->buf.dt };
        exec_set_cat(m, EXEC_CAT_COLL);
        rc = noc_allgather(m->comm, &g);
        exec_set_cat(m, EXEC_CAT_FFN);
    }
    for (uint32_t i = 0, j = 0; rc == NPU_OK && i < nw; i++)
        exec_add_rows(m, tile->xt + want[i] * row,
                      ep_out + packed_row(want, i, slice, k, &j) * row, 1, d);
    return rc;
}

int moe_ep_combine_add(struct exec_model *m, const struct exec_tile *tile,
                       const struct moe_ep_map *x, const struct noc_alltoallv_plan *plan)
{
    return moe_ep_combine_add_from(m, tile, x, plan, 0, true);
}

int moe_ep_combine_add_from(struct exec_model *m, const struct exec_tile *tile,
                            const struct moe_ep_map *x, const struct noc_alltoallv_plan *plan,
                            uint64_t from_row, bool add)
{
    const uint32_t d = m->cfg->hidden_size, n = tile->n;
    const uint64_t row = (uint64_t)d * m->buf.eb;
    uint32_t r0, nr, slice;
    moe_ep_rank_rows(m, n, &r0, &nr, &slice);
    struct noc_alltoallv_args a = dispatch_args(m, n);
    if (from_row) { /* the buffer's rows from there (the group's worst case sized a) */
        const uint64_t rows = (m->buf.a.ep_out - m->buf.a.ep_recv) / row;
        assert(from_row < rows && "the outputs start inside ep_recv");
        a.recv += from_row * row, a.recv_capacity = (rows - from_row) * d;
    }
    exec_set_cat(m, EXEC_CAT_COLL);
    int rc = noc_alltoallv_combine(ep_comm(m), &a, plan);
    exec_set_cat(m, EXEC_CAT_FFN);
    if (rc != NPU_OK)
        return rc;
    if (nr > 0)
        weigh_and_sum(m, m->buf.a.ep_out + (uint64_t)m->rank * slice * row, nr,
                      moe_pairs.first[x->n]);
    uint32_t want[EXEC_RUNS_MAX], nw = 0;
    if (n > 0 && add && head_reads_only(m, x))
        nw = wanted_rows(tile, want);
    const uint32_t k = nw ? wanted_per_rank(want, nw, slice) : 0;
    if (nw && (uint64_t)k * m->tp < n)
        return gather_wanted(m, tile, want, nw, slice, k);
    /* the rows tile by tile, beside the next layer's attention (model_moe_rows.c) */
    if (n > 0 && add && from_row == 0 && exec_moe_rows_defers(m, tile))
        return exec_moe_rows_start(m, x->layer - 1, tile, slice);
    /* the sums done (and with them, in the vector queue's order, the weighing that reads
       rweight, which the hart rewrites at the next sort); not the whole chain: a router
       GEMM may run beside (exec_layer_beside_route) */
    const uint64_t all = (uint64_t)m->tp * slice * d;
    rc = exec_wait_for_collective(m, m->buf.a.ep_out, all * m->buf.eb);
    if (rc == NPU_OK && n > 0) { /* step 5 (a disaggregated replica's part may be empty) */
        struct noc_coll_args g = { .buf = m->buf.a.ep_out, .count = all, .dtype = m->buf.dt };
        exec_set_cat(m, EXEC_CAT_COLL);
        rc = noc_allgather(m->comm, &g);
        exec_set_cat(m, EXEC_CAT_FFN);
    }
    if (rc == NPU_OK && n > 0 && add)
        exec_add_rows(m, tile->xt, m->buf.a.ep_out, n, d);
    return rc;
}

int exec_moe_ep_serve_round(struct exec_model *m, uint32_t l)
{
    const uint32_t d = m->cfg->hidden_size, E = m->cfg->num_experts;
    const struct moe_ep_map *x = moe_ep_map(m, l);
    struct noc_alltoallv_plan plan = moe_ep_plan(m, x);
    uint32_t *counts = (uint32_t *)(uintptr_t)m->buf.a.ep_counts;
    for (uint32_t s = 0; s < x->n; s++)
        counts[s] = 0; /* it sends nothing: its ranks own buckets only */
    /* every replica's group of up to moe_rows rows at once (npu_act_layout sizes ep_recv) */
    struct noc_alltoallv_args a = dispatch_args(m, m->plan->moe_rows * m->replicas);
    exec_set_cat(m, EXEC_CAT_COLL);
    int rc = noc_alltoallv_dispatch(ep_comm(m), &a, &plan);
    exec_set_cat(m, EXEC_CAT_FFN);
    for (uint32_t s = 0; rc == NPU_OK && s < x->n; s++)
        if (x->f0[s] == 0)
            m->acct.expert_tokens[(uint64_t)l * E + x->expert[s]] +=
                moe_ep_slice_elems(&plan, s) / d;
    if (rc == NPU_OK)
        rc = serve_experts(m, l, x, &plan, false, false);
    if (rc == NPU_OK) {
        exec_set_cat(m, EXEC_CAT_COLL);
        rc = noc_alltoallv_combine(ep_comm(m), &a, &plan);
        exec_set_cat(m, EXEC_CAT_FFN);
    }
    return rc;
}

int exec_moe_ep(struct exec_model *m, uint32_t l, const struct exec_tile *tile)
{
    const struct moe_ep_map *x = moe_ep_map(m, l);
    struct noc_alltoallv_plan plan = moe_ep_plan(m, x);
    int rc = moe_ep_route_dispatch(m, l, tile, x, &plan, true);
    if (rc == NPU_OK)
        rc = serve_experts(m, l, x, &plan, tile->whole, tile->whole);
    return rc == NPU_OK ? moe_ep_combine_add(m, tile, x, &plan) : rc;
}

/* Whether layer l's MoE group of `rows` rows (not by units) has its slices staged through
   the ring and rows enough that a slice is seldom untouched (at least 4 choices per expert
   on average): then its first slices are worth loading early. */
static bool prefetch_pays(const struct exec_model *m, uint32_t l, uint32_t rows)
{
    const struct npu_image_tensor *g = m->w.t[l][MT_E_GATE];
    return m->tp > 1 && npu_plan_is_ep(m->plan) && g && g->blocks &&
           g->sram_off == NPU_IMAGE_NOWHERE && m->w.map.ring_slots &&
           !exec_moe_units_apply(m, rows) &&
           (uint64_t)rows * m->cfg->experts_per_token >= 4ull * m->cfg->num_experts;
}

void exec_moe_prefetch(struct exec_model *m, uint32_t l, uint32_t rows, bool only)
{
    if (!prefetch_pays(m, l, rows))
        return;
    const struct moe_ep_map *x = moe_ep_map(m, l);
    const uint32_t lo = x->first[ep_self(m)], hi = x->first[ep_self(m) + 1];
    const uint32_t slots = m->w.map.ring_slots, d = m->cfg->hidden_size;
    const enum model_tensor_kind kinds[3] = { MT_E_GATE, MT_E_UP, MT_E_DOWN };
    uint32_t loaded = 0;
    /* the order serve_experts will walk them in */
    const uint32_t n = serve_order(x, lo, hi, m->w.ring.backward, only, serve_slices);
    for (uint32_t i = 0; i < n && loaded < slots; i++) {
        const uint32_t s = serve_slices[i];
        const uint64_t bytes = (uint64_t)x->width[s] * d * m->buf.eb;
        for (int k = 0; k < 3 && loaded < slots; k++, loaded++)
            exec_expert_slice_addr(m, l, kinds[k], s - lo, bytes);
    }
}
