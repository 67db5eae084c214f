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
#include "routing_model.h"

#define MOE_PAIRS_MAX 8192u

/* The (row, choice) pairs of n rows sorted by expert, then row: pair i of expert e is
   row[first[e] + i], its place in the row's top-k slot[...]. */
struct moe_pairs {
    uint32_t row[MOE_PAIRS_MAX];
    uint8_t slot[MOE_PAIRS_MAX];
    uint32_t first[ROUTING_EXPERTS_MAX + 1];
};
extern struct moe_pairs moe_pairs;

/* Performance mode: the routing model of the plan in *rm and layer l's table of it (kept in
   m->route.table; the previous layer's is rotated, not rebuilt). */
const uint64_t *moe_routing(struct exec_model *m, uint32_t l, struct routing_model *rm);
/* xb[n][d] = RMSNorm(x), probs[n][E] = softmax(xb router^T), topk of each row; flushed. */
int moe_route(struct exec_model *m, uint32_t l, uint64_t x, uint32_t n);
/* Sorts the choices of tile rows [r0, r1) (functional: the top-k of moe_route over those
   rows; performance: the routing model) into moe_pairs, and writes 1 / weight in pair order
   to a.rweight. */
void moe_sort_choices(struct exec_model *m, uint32_t l, const struct exec_tile *tile,
                      uint32_t r0, uint32_t r1);
/* out[n][d] = sum over j of slots[n][j][d], in top-k order (the reference's order). */
void moe_sum_slots(struct exec_model *m, uint64_t out, uint64_t slots, uint32_t n);

/* model_moe_ep.c: the MoE op under expert parallelism over tp > 1 ranks. */
int exec_moe_ep(struct exec_model *m, uint32_t l, const struct exec_tile *tile);
/* Whether this rank's expert shares are the experts the dispatch sends it (the image's
   tensor table against npu_plan_expert_first); says which layer is not on the console. */
bool exec_moe_ep_owns(const struct exec_model *m);

#endif
