/* SPDX-License-Identifier: MIT */
/*
 * What the MoE op's two paths share (model_moe.c: experts on the tile's ranks by tensor
 * partition; model_moe_ep.c: expert parallelism with dispatch over the NoC): the router and
 * top-k, each row's choices, the pairs sorted by expert, and the sum of the k slots.
 * Shapes: n rows, d hidden, E experts, k choices per row.
 */
#ifndef MODEL_MOE_H
#define MODEL_MOE_H

#include "model_exec.h"
#include "noc/placement.h"
#include "npu_image.h"
#include "routing_model.h"

#define MOE_PAIRS_MAX NPU_ROUTED_PAIRS_MAX /* npu_limits.h */

/* The (row, choice) pairs of n rows sorted by bucket (expert, or under EP expert slice),
   then row: pair i of bucket b is row[first[b] + i], its place in the row's top-k slot[...];
   part[...] is 0 for the first slice of its choice, 1 for the others (their outputs add to
   the first's). */
struct moe_pairs {
    uint32_t row[MOE_PAIRS_MAX];
    uint8_t slot[MOE_PAIRS_MAX];
    uint8_t part[MOE_PAIRS_MAX];
    uint32_t first[NPU_EXPERT_MAP_MAX + 1];
    uint32_t rows; /* the rows sorted: every row[] is below it */
};
extern struct moe_pairs moe_pairs;

/* dst[count][d] = the rows of src[.][d] that pairs [first, first + count) of moe_pairs
   name (row[first + i]): one DMA gather, the pairs' row list its index list (which
   moe_sort_choices waits for before rewriting it). */
void moe_gather_pairs(struct exec_model *m, uint64_t dst, uint64_t src, uint32_t first,
                      uint32_t count);

/* Layer l's expert map (npu_image_expert_slice) as the EP dispatch uses it: slice s of
   `n` is units of expert[s], columns [f0[s], f0[s] + width[s]) of its intermediate width,
   held by rank[s]; rank q holds slices [first[q], first[q + 1]); an expert's slices are
   by_expert[efirst[e] .. efirst[e + 1]) (ascending). */
struct moe_ep_map {
    uint32_t layer; /* whose map this is, + 1 (0: none yet) */
    uint32_t n;
    uint32_t first[NOC_GROUP_MAX + 1];
    uint16_t expert[NPU_EXPERT_MAP_MAX], rank[NPU_EXPERT_MAP_MAX];
    uint16_t f0[NPU_EXPERT_MAP_MAX];    /* < moe_intermediate_size <= 65536 */
    uint32_t width[NPU_EXPERT_MAP_MAX]; /* up to 65536: a whole expert of the widest */
    uint16_t by_expert[NPU_EXPERT_MAP_MAX];
    uint16_t efirst[ROUTING_EXPERTS_MAX + 1];
    uint8_t rep[NPU_EXPERT_MAP_MAX];     /* a slice's copy of its expert */
    uint8_t reps[ROUTING_EXPERTS_MAX];   /* an expert's copies (1: not replicated) */
};
/* The index of copy c of expert e in tables of rows per expert's copy. */
static inline uint32_t moe_copy_index(uint32_t e, uint32_t c)
{
    return e * NPU_EXPERT_REPLICAS_MAX + c;
}
/* Whether slice s of map x serves the choice of its expert by the group's row `row`: a slice
   of the copy that row goes to (npu_expert_replica). */
static inline bool moe_ep_serves(const struct moe_ep_map *x, uint32_t s, uint32_t row)
{
    return x->rep[s] == npu_expert_replica(row, x->reps[x->expert[s]]);
}
/* Layer l's map (kept until another layer's is asked for). */
const struct moe_ep_map *moe_ep_map(const struct exec_model *m, uint32_t l);

/* Performance mode: the routing model's experts of request req's rows at positions
   [pos, pos + n) in layer l into out[n][k] (in SRAM), drawn by the ROUTE command (npu/route.h:
   the emulator draws what routing_draw would, at native speed). */
void moe_draw_rows(const struct exec_model *m, uint32_t l, uint32_t req, uint32_t pos,
                   uint32_t n, uint32_t *out);
/* xb[n][d] = RMSNorm(x), probs[n][E] = softmax(xb router^T), topk of each row; flushed. */
int moe_route(struct exec_model *m, uint32_t l, uint64_t x, uint32_t n);
/* Sorts the choices of tile rows [r0, r1) (functional: the top-k of moe_route over those
   rows; performance: the routing model) into moe_pairs by expert, or with `map` by expert
   slice (a choice becomes one pair per slice of its expert), and writes 1 / weight in pair
   order to a.rweight. */
void moe_sort_choices(struct exec_model *m, uint32_t l, const struct exec_tile *tile,
                      uint32_t r0, uint32_t r1, const struct moe_ep_map *map);
/* The tile's rows all routed (moe_route), their choices sorted by expert (moe_sort_choices
   without a map) and the routed tokens counted; flushed. */
int moe_route_all(struct exec_model *m, uint32_t l, const struct exec_tile *tile);
/* out[n][d] = sum over j of slots[n][j][d], in top-k order (the reference's order). */
void moe_sum_slots(struct exec_model *m, uint64_t out, uint64_t slots, uint32_t n);

/* model_moe_ep.c: the MoE op under expert parallelism over tp > 1 ranks. */
int exec_moe_ep(struct exec_model *m, uint32_t l, const struct exec_tile *tile);
/* Its steps, which the MoE over the layer (model_moe_wide.c) also runs on a group `tile`
   (rows in tile->xt), with plan = moe_ep_plan(m, x), x layer l's map:
   - route this rank's slice of the rows, sort its choices into moe_pairs, dispatch them
     (ep_recv then holds the rows of this rank's slices, by slice; with `prefetch` the
     first slices load into the ring meanwhile, exec_moe_prefetch), and count the routed
     tokens;
   - one slice `block` of this rank's (w columns) over n rows at `rows`, outputs over them;
   - the combine of the outputs in ep_recv (moe_pairs: the group's), weighting, the sum of
     each row's slots, the all-gather, and the sum into tile->xt. */
struct noc_alltoallv_plan moe_ep_plan(const struct exec_model *m, const struct moe_ep_map *x);
/* The rank's slice of a group of n rows, [r0, r0 + nr), slice = ceil(n / tp). */
void moe_ep_rank_rows(const struct exec_model *m, uint32_t n, uint32_t *r0, uint32_t *nr,
                      uint32_t *slice);
/* Every sender's elements (rows x d) of slice s: the plan's totals (moe_ep_plan's array,
   kept by the dispatch). */
uint64_t moe_ep_slice_elems(const struct noc_alltoallv_plan *plan, uint32_t s);
int moe_ep_route_dispatch(struct exec_model *m, uint32_t l, const struct exec_tile *tile,
                          const struct moe_ep_map *x, struct noc_alltoallv_plan *plan,
                          bool prefetch);
/* The same in two halves, so that other work may be issued between them: the route, the
   sort and the send buffer's gather (not waited for; *bytes gathered), then, on the group's
   n rows and layer l's map and plan again, the exchange and the count. */
int moe_ep_route_gather(struct exec_model *m, uint32_t l, const struct exec_tile *tile,
                        const struct moe_ep_map *x, uint64_t *bytes);
int moe_ep_dispatch_later(struct exec_model *m, uint32_t l, uint32_t n,
                          const struct moe_ep_map *x, struct noc_alltoallv_plan *plan,
                          uint64_t bytes);
void moe_ep_serve_slice(struct exec_model *m, uint32_t l, uint64_t rows, uint32_t n,
                        uint32_t block, uint32_t w);
int moe_ep_combine_add(struct exec_model *m, const struct exec_tile *tile,
                       const struct moe_ep_map *x, const struct noc_alltoallv_plan *plan);
/* The same with this rank's outputs from row from_row of ep_recv (the dispatch's layout,
   shifted): the MoE over the layer loads the next group's outputs beside them. Without
   `add`, the sums stay in ep_out[n][d] for the caller to add (the tile's xt unused). */
int moe_ep_combine_add_from(struct exec_model *m, const struct exec_tile *tile,
                            const struct moe_ep_map *x, const struct noc_alltoallv_plan *plan,
                            uint64_t from_row, bool add);
/* Disaggregated (plan.disagg), on the expert instance: one dispatch round of layer l (one
   micro-batch of every replica at once) taken over the pair group, every slice this rank
   holds served over its rows, and the outputs sent back; the replicas' ranks run
   moe_ep_route_dispatch and moe_ep_combine_add of the same round. */
int exec_moe_ep_serve_round(struct exec_model *m, uint32_t l);

/* model_moe_wide.c: the MoE over the layer (npu_moe_layer_wide). A fused layer l calls
   begin_layer, then dispatch_group for each group (its rows in tile->xt after attention) in
   row order, serve_slices once, then combine_group for each group again in the same order
   (its residual rows in tile->xt, to which the MoE output is added); groups are numbered
   from 0 in the layer. Layers l and l + 1 keep separate state (and spill halves), so
   layer l's combines may come between layer l + 1's dispatches (without `ahead`: the
   next group's outputs are not staged, ep_recv takes layer l + 1's rows meanwhile). */
void exec_moe_wide_begin_layer(struct exec_model *m, uint32_t l);
/* Whether the spill still has room for a group of n rows' worst case; if not, serve and
   finish the groups recorded so far, then start the next wave. */
bool exec_moe_wide_has_room(const struct exec_model *m, uint32_t l, uint32_t n);
void exec_moe_wide_start_wave(struct exec_model *m, uint32_t l);
int exec_moe_wide_dispatch_group(struct exec_model *m, uint32_t l, const struct exec_tile *tile);
/* A group's exchange (the first pass's step 2 after its gather, and the spill) left to the
   next group's attention, which runs it once its first tile's steps are issued (attn_tiles)
   (model_moe_wide.c, dispatch_defers): settle runs it if one waits (the next dispatch, the
   experts' pass and any combine run it first too; a prefetch of the layer's second pass
   waits for it); pending says whether one waits; forget drops it, with a spill no unit
   took and the pins of combines that will not run (exec_layer_forget). */
int exec_moe_wide_dispatch_settle(struct exec_model *m);
bool exec_moe_wide_dispatch_pending(void);
void exec_moe_wide_dispatch_forget(struct exec_model *m);
/* Under tile reuse a keyed group's exchange waits too: key says whether one waits and its
   rows (*n) and load, which key the next group's attention unit (model_reuse_tile.c);
   replay stands for it where that unit replays: true (its record from the routing
   model's draws, its combine's class pinned to replay) where its combine's class is
   recorded, else false (nothing done: the unit runs in full, the exchange with it). */
bool exec_moe_wide_exchange_key(uint32_t *n, uint32_t *load);
bool exec_moe_wide_exchange_replay(struct exec_model *m);
int exec_moe_wide_serve_slices(struct exec_model *m, uint32_t l);
/* Under tile reuse: the spill copy of the last group's first pass, which the next group's
   attention unit issues at its start (bytes 0: none pending); taken, it is no longer
   pending. */
void exec_moe_wide_take_spill(struct exec_side_copy *c);
/* The second pass's first matrices (the rank's first slice's gate and up) into the expert
   ring, called as the wave's last group starts its attention: the second DMA queue is
   idle then, and the pass's first GEMM would otherwise wait for them. Only where the
   wave's groups so far routed rows to that slice (expert-load bytes count what is
   served), the ring has 3 slots or more (the last, which the first pass may lend as a
   group buffer, is left alone), and tiles are not replayed (a replay wants the engines
   idle). */
void exec_moe_wide_prefetch(struct exec_model *m, uint32_t l);
int exec_moe_wide_combine_group(struct exec_model *m, uint32_t l, const struct exec_tile *tile,
                                uint32_t group, bool ahead, bool add);
/* The third pass's first group's outputs (group `group`, the wave's first), loading on the
   second DMA queue as the pass starts (model_moe_wide.c says why). */
void exec_moe_wide_stage_first(struct exec_model *m, uint32_t l, uint32_t group);

/* Layer l's first expert slices, in the order the MoE group will serve them, loaded into
   the expert ring: as the layer's attention starts where the layer's rows are one MoE
   group and tiles are not replayed (model_layer_ops.c), else while the NoC dispatches the
   group's rows (the dispatch's `prefetch`); only where its `rows` touch most experts and
   its slices are staged (model_moe_ep.c). Slices already in the ring are not loaded
   again, so the second call finds the first's. `only`: the group is the layer's only one
   (the order in which it serves its slices, serve_order). */
void exec_moe_prefetch(struct exec_model *m, uint32_t l, uint32_t rows, bool only);

/* model_moe_units.c: the MoE by units (plan.moe_units_rows), for a MoE op of at most that
   many rows under expert parallelism; the check at start (the tensor table's order, the
   unit width), which says what is wrong on the console. */
bool exec_moe_units_apply(const struct exec_model *m, uint32_t n);
int exec_moe_units(struct exec_model *m, uint32_t l, const struct exec_tile *tile);
bool exec_moe_units_check(const struct exec_model *m);

/* Whether this rank's expert shares are the experts the dispatch sends it (the image's
   tensor table against npu_plan_expert_first); says which layer is not on the console. */
bool exec_moe_ep_owns(const struct exec_model *m);

#endif
