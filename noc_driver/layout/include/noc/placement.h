/* SPDX-License-Identifier: MIT */
/*
 * Core placement (docs/noc-driver.md): turns a logical group of ranks on a sub-rectangle of
 * the mesh into physical cores. Pure computation on the mesh geometry, shared by the
 * firmware and the host tests.
 *
 * Placements (the NPU paper, section 4.1 and Figure 4; section 5.4 compares them):
 *   LINEAR       rank order row by row (T10's "linear-seq"): neighbours are adjacent inside a
 *                row, the step to the next row and the ring's closing step are far.
 *   INTERLEAVED  the snake over the rectangle taken every other core, out and back
 *                (WaferLLM's "linear-interleave"): every logical step, the closing one
 *                included, is at most 2 hops.
 *   RING         a closed snake (Hamiltonian cycle) over the rectangle: every step 1 hop.
 *                It exists when the rectangle has an even side of at least 2 and the other
 *                side is at least 2; otherwise (a single row or column, or both sides odd)
 *                the interleaved order is used: at most 2 hops.
 *   MESH2D       a grid of rows x cols ranks, rank = i * cols + j; each dimension is laid out
 *                interleaved (the paper: "within each dimension, cores are arranged according
 *                to an interleaved linear topology"), so row and column rings are at most 2
 *                hops a step. Collectives on a MESH2D group run along rows then columns.
 */
#ifndef NOC_PLACEMENT_H
#define NOC_PLACEMENT_H

#include <stdbool.h>
#include <stdint.h>

#include "npu_limits.h"

#define NOC_GROUP_MAX (NPU_MESH_DIM_MAX * NPU_MESH_DIM_MAX) /* the largest mesh */

enum noc_placement {
    NOC_PLACE_LINEAR = 0,
    NOC_PLACE_INTERLEAVED = 1,
    NOC_PLACE_RING = 2,
    NOC_PLACE_MESH2D = 3,
};
#define NOC_PLACE_COUNT 4u

/* A sub-rectangle of the mesh: rows x cols routers from (row0, col0). */
struct noc_rect {
    uint16_t row0, col0, rows, cols;
};

struct noc_group_args {
    enum noc_placement placement;
    struct noc_rect rect;          /* the group is every core of it */
    uint32_t mesh_rows, mesh_cols; /* the chip's mesh */
};

struct noc_group {
    enum noc_placement placement;
    struct noc_rect rect;
    struct noc_rect rect2;         /* a pair group's second rectangle (noc_group_pair); 0 x 0
                                      otherwise */
    uint32_t mesh_cols;
    uint32_t size;                 /* rect.rows * rect.cols ranks */
    uint32_t grid_rows, grid_cols; /* MESH2D: rank = i * grid_cols + j; else 1 x size */
    uint16_t core[NOC_GROUP_MAX];  /* rank -> core id (row * mesh_cols + col) */
};

/* Fills g; NPU_ERR_INVAL for an unknown placement, NPU_ERR_RANGE for a rectangle that is
   empty, outside the mesh or larger than NOC_GROUP_MAX. */
int noc_group_init(struct noc_group *g, const struct noc_group_args *args);

/* A pair group: the ranks of `a` in a's order, then those of `b` (ranks a->size ..), over
   two disjoint rectangles of the same mesh, as two core sets that exchange data (M2N from
   a's ranks to b's, docs/noc-driver.md "Pair groups"). Linear placement, a grid of one row:
   the ring collectives run in rank order; the multicast all-gather and the line
   collectives do not apply. NPU_ERR_INVAL if a or b is itself a pair, the rectangles
   overlap, the meshes differ or the ranks pass NOC_GROUP_MAX. */
int noc_group_pair(struct noc_group *g, const struct noc_group *a, const struct noc_group *b);
static inline bool noc_group_is_pair(const struct noc_group *g)
{
    return g->rect2.rows != 0;
}

/* The rank of `core` in g, or NPU_ERR_RANGE if it is not a member. */
int noc_group_rank_of(const struct noc_group *g, uint32_t core);

/* Mesh hops between the cores of two ranks (XY routing: Manhattan distance). */
uint32_t noc_group_hops(const struct noc_group *g, uint32_t rank_a, uint32_t rank_b);

/*
 * Position i (0..n-1) of a line of n cores laid out interleaved: the physical index of the
 * i-th logical element, so that logical neighbours (and n-1 -> 0) are at most 2 apart:
 * 0, 2, 4, ..., then the odd indices back down.
 */
uint32_t noc_interleave(uint32_t i, uint32_t n);

const char *noc_placement_name(enum noc_placement p);
/* The placement called `name` ("linear", "interleaved", "ring", "mesh2d"), or
   NPU_ERR_INVAL. */
int noc_placement_parse(const char *name);

#endif
