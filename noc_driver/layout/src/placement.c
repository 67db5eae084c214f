/* SPDX-License-Identifier: MIT */
/* Core placement maps (noc/placement.h). */
#include "noc/placement.h"

#include <string.h>

#include "npu_enums.h"

static const char *const names[NOC_PLACE_COUNT] = { "linear", "interleaved", "ring",
                                                     "mesh2d" };

const char *noc_placement_name(enum noc_placement p)
{
    return (unsigned)p < NOC_PLACE_COUNT ? names[p] : "?";
}

int noc_placement_parse(const char *name)
{
    for (uint32_t i = 0; i < NOC_PLACE_COUNT; i++)
        if (strcmp(name, names[i]) == 0)
            return (int)i;
    return NPU_ERR_INVAL;
}

uint32_t noc_interleave(uint32_t i, uint32_t n)
{
    uint32_t out = (n + 1) / 2; /* 0, 2, 4, ... go out */
    if (i < out)
        return 2 * i;
    uint32_t last_odd = n % 2 ? n - 2 : n - 1;
    return last_odd - 2 * (i - out); /* ... and the odd ones come back */
}

/* Position k of the snake over an R x C rectangle: row by row, alternating direction. */
static void snake(uint32_t k, uint32_t cols, uint32_t *r, uint32_t *c)
{
    *r = k / cols;
    *c = *r % 2 ? cols - 1 - k % cols : k % cols;
}

/*
 * Position k of a Hamiltonian cycle of an R x C rectangle with R even and C >= 2: along row
 * 0, a snake over rows 1..R-1 and columns C-1..1 (ending at (R-1, 1)), then up column 0.
 */
static void closed_snake(uint32_t k, uint32_t rows, uint32_t cols, uint32_t *r, uint32_t *c)
{
    uint32_t body = (rows - 1) * (cols - 1);
    if (k < cols) {
        *r = 0, *c = k;
    } else if (k < cols + body) {
        uint32_t m = k - cols, w = cols - 1;
        *r = 1 + m / w;
        *c = (m / w) % 2 ? 1 + m % w : cols - 1 - m % w;
    } else {
        *r = rows - 1 - (k - cols - body), *c = 0;
    }
}

static bool ring_closes(uint32_t rows, uint32_t cols)
{
    return rows >= 2 && cols >= 2 && (rows % 2 == 0 || cols % 2 == 0);
}

/* Rectangle coordinates of rank k under placement p. */
static void place(const struct noc_group *g, uint32_t k, uint32_t *r, uint32_t *c)
{
    uint32_t rows = g->rect.rows, cols = g->rect.cols;
    switch (g->placement) {
    case NOC_PLACE_LINEAR:
        *r = k / cols, *c = k % cols;
        return;
    case NOC_PLACE_MESH2D:
        *r = noc_interleave(k / cols, rows), *c = noc_interleave(k % cols, cols);
        return;
    case NOC_PLACE_RING:
        if (ring_closes(rows, cols) && rows % 2 == 0) {
            closed_snake(k, rows, cols, r, c);
            return;
        }
        if (ring_closes(rows, cols)) {
            closed_snake(k, cols, rows, c, r); /* transposed: columns play rows */
            return;
        }
        snake(noc_interleave(k, g->size), cols, r, c); /* no closed snake: interleaved */
        return;
    default: /* NOC_PLACE_INTERLEAVED */
        snake(noc_interleave(k, g->size), cols, r, c);
        return;
    }
}

int noc_group_init(struct noc_group *g, const struct noc_group_args *a)
{
    const struct noc_rect *rc = &a->rect;
    if ((unsigned)a->placement >= NOC_PLACE_COUNT)
        return NPU_ERR_INVAL;
    if (rc->rows == 0 || rc->cols == 0 || (uint32_t)rc->row0 + rc->rows > a->mesh_rows ||
        (uint32_t)rc->col0 + rc->cols > a->mesh_cols ||
        (uint32_t)rc->rows * rc->cols > NOC_GROUP_MAX)
        return NPU_ERR_RANGE;
    memset(g, 0, sizeof(*g));
    g->placement = a->placement;
    g->rect = *rc;
    g->mesh_cols = a->mesh_cols;
    g->size = (uint32_t)rc->rows * rc->cols;
    g->grid_rows = a->placement == NOC_PLACE_MESH2D ? rc->rows : 1;
    g->grid_cols = a->placement == NOC_PLACE_MESH2D ? rc->cols : g->size;
    for (uint32_t k = 0; k < g->size; k++) {
        uint32_t r, c;
        place(g, k, &r, &c);
        g->core[k] = (uint16_t)((rc->row0 + r) * a->mesh_cols + rc->col0 + c);
    }
    return NPU_OK;
}

static bool rects_overlap(const struct noc_rect *a, const struct noc_rect *b)
{
    return a->row0 < b->row0 + b->rows && b->row0 < a->row0 + a->rows &&
           a->col0 < b->col0 + b->cols && b->col0 < a->col0 + a->cols;
}

int noc_group_pair(struct noc_group *g, const struct noc_group *a, const struct noc_group *b)
{
    if (noc_group_is_pair(a) || noc_group_is_pair(b) || rects_overlap(&a->rect, &b->rect) ||
        a->mesh_cols != b->mesh_cols || a->size + b->size > NOC_GROUP_MAX)
        return NPU_ERR_INVAL;
    /* g may be a or b: b's cores move into place first, then a's */
    const struct noc_rect ra = a->rect, rb = b->rect;
    const uint32_t na = a->size, nb = b->size, cols = a->mesh_cols;
    memmove(g->core + na, b->core, nb * sizeof(b->core[0]));
    memmove(g->core, a->core, na * sizeof(a->core[0]));
    g->placement = NOC_PLACE_LINEAR;
    g->rect = ra, g->rect2 = rb;
    g->mesh_cols = cols;
    g->size = na + nb;
    g->grid_rows = 1, g->grid_cols = g->size;
    return NPU_OK;
}

int noc_group_rank_of(const struct noc_group *g, uint32_t core)
{
    for (uint32_t k = 0; k < g->size; k++)
        if (g->core[k] == core)
            return (int)k;
    return NPU_ERR_RANGE;
}

uint32_t noc_group_hops(const struct noc_group *g, uint32_t a, uint32_t b)
{
    uint32_t ra = g->core[a] / g->mesh_cols, ca = g->core[a] % g->mesh_cols;
    uint32_t rb = g->core[b] / g->mesh_cols, cb = g->core[b] % g->mesh_cols;
    return (ra > rb ? ra - rb : rb - ra) + (ca > cb ? ca - cb : cb - ca);
}
