/* SPDX-License-Identifier: MIT */
/*
 * Barrier, all-gather, reduce-scatter, all-reduce (1-D rings and MESH2D rows-then-columns),
 * the line collectives of a MESH2D grid, and broadcast (noc/collective.h).
 */
#include <assert.h>
#include <stdio.h>

#include "coll_internal.h"
#include "npu/hal.h"

/* Ranks 0..N-1 in order: the ring of a 1-D group. */
static uint16_t identity[NOC_GROUP_MAX];
/* A row or a column of a MESH2D group, and part bounds. */
static uint16_t line[NOC_GROUP_MAX];
static uint64_t bounds[NOC_GROUP_MAX + 1];

static bool dtype_ok(enum npu_dtype dt)
{
    return dt == NPU_DTYPE_BF16 || dt == NPU_DTYPE_FP32;
}

static bool is_2d(const struct noc_comm *c)
{
    return c->group.placement == NOC_PLACE_MESH2D;
}

/* The header of a collective on buffer a->buf; local checks included. */
static void header_of(const struct noc_comm *c, struct coll_header *h, enum coll_kind kind,
                      const struct noc_coll_args *a)
{
    coll_header_init(c, h, kind);
    h->count = a->count;
    h->dtype = (uint8_t)a->dtype;
    h->root = a->root;
    h->buf = a->buf;
    if (kind == COLL_ALLGATHER || kind == COLL_ALLREDUCE || coll_kind_is_line(kind))
        h->capacity = (uint32_t)c->cfg.gather; /* judged: every rank the same algorithm */
    const bool reduces = kind == COLL_REDUCE_SCATTER || kind == COLL_ALLREDUCE ||
                         kind == COLL_ALLREDUCE_ROWS || kind == COLL_ALLREDUCE_COLS;
    if (reduces)
        h->root = (uint32_t)a->op; /* judged with root: every rank the same operation */
    if (a->count == 0 || a->count > COLL_COUNT_MAX || !dtype_ok(a->dtype) ||
        a->root >= c->group.size || (kind >= COLL_ALLGATHER_ROWS && !is_2d(c)) ||
        (reduces && a->op != NOC_REDUCE_SUM && a->op != NOC_REDUCE_MAX))
        h->fault = COLL_BAD_ARGS; /* line collectives need a grid */
    else
        h->fault = (uint8_t)coll_check_buffer(c, a->buf, a->count, coll_elem_bytes(a->dtype));
}

static void ring_1d(const struct noc_comm *c, const struct noc_coll_args *a,
                    struct coll_ring *r)
{
    for (uint32_t k = 0; k < c->group.size; k++)
        identity[k] = (uint16_t)k;
    for (uint32_t k = 0; k <= c->group.size; k++)
        bounds[k] = coll_bound(a->count, c->group.size, k);
    *r = (struct coll_ring){ .ranks = identity, .len = c->group.size, .pos = c->rank,
                             .bounds = bounds, .dtype = a->dtype, .op = a->op };
}

/* Row i of the grid (parts: the chunks of its ranks), this rank at column j. */
static void ring_row(const struct noc_comm *c, const struct noc_coll_args *a,
                     struct coll_ring *r)
{
    const uint32_t cols = c->group.grid_cols, i = c->rank / cols;
    for (uint32_t k = 0; k < cols; k++)
        line[k] = (uint16_t)(i * cols + k);
    for (uint32_t k = 0; k <= cols; k++)
        bounds[k] = coll_bound(a->count, c->group.size, i * cols + k);
    *r = (struct coll_ring){ .ranks = line, .len = cols, .pos = c->rank % cols,
                             .bounds = bounds, .dtype = a->dtype, .op = a->op };
}

/* Column j of the grid (parts: the row blocks), this rank at row i. */
static void ring_col(const struct noc_comm *c, const struct noc_coll_args *a,
                     struct coll_ring *r)
{
    const uint32_t cols = c->group.grid_cols, rows = c->group.grid_rows;
    for (uint32_t k = 0; k < rows; k++)
        line[k] = (uint16_t)(k * cols + c->rank % cols);
    for (uint32_t k = 0; k <= rows; k++)
        bounds[k] = coll_bound(a->count, c->group.size, k * cols);
    *r = (struct coll_ring){ .ranks = line, .len = rows, .pos = c->rank / cols,
                             .bounds = bounds, .dtype = a->dtype, .op = a->op };
}

static int gather(struct noc_comm *c, const struct noc_coll_args *a)
{
    struct coll_ring r;
    if (coll_mcast_fits(c))
        return coll_mcast_allgather(c, a->count, a->dtype);
    if (!is_2d(c)) {
        ring_1d(c, a, &r);
        return coll_ring_allgather(c, &r);
    }
    ring_row(c, a, &r); /* my row's chunks, then the row blocks down the columns */
    int rc = coll_ring_allgather(c, &r);
    if (rc == NPU_OK) {
        ring_col(c, a, &r);
        rc = coll_ring_allgather(c, &r);
    }
    return rc;
}

static int scatter(struct noc_comm *c, const struct noc_coll_args *a)
{
    struct coll_ring r;
    if (!is_2d(c)) {
        ring_1d(c, a, &r);
        return coll_ring_reduce_scatter(c, &r);
    }
    ring_col(c, a, &r); /* row blocks summed down the columns, then chunks along the row */
    int rc = coll_ring_reduce_scatter(c, &r);
    if (rc == NPU_OK) {
        ring_row(c, a, &r);
        rc = coll_ring_reduce_scatter(c, &r);
    }
    return rc;
}

/* Agreement, then `body`; the sequence number moves on whatever happens. */
static int run(struct noc_comm *c, enum coll_kind kind, const struct noc_coll_args *a,
               int (*body)(struct noc_comm *, const struct noc_coll_args *))
{
    struct coll_header h;
    header_of(c, &h, kind, a);
    int rc = coll_agree(c, &h);
    if (rc != NPU_OK)
        return rc;
    rc = body ? body(c, a) : NPU_OK;
    coll_done(c);
    return rc;
}

static int allreduce_body(struct noc_comm *c, const struct noc_coll_args *a)
{
    int rc = scatter(c, a);
    return rc == NPU_OK ? gather(c, a) : rc;
}

int noc_barrier(struct noc_comm *c)
{
    struct coll_header h;
    coll_header_init(c, &h, COLL_BARRIER);
    int rc = coll_agree(c, &h);
    if (rc == NPU_OK)
        coll_done(c);
    return rc;
}

int noc_allgather(struct noc_comm *c, const struct noc_coll_args *a)
{
    return run(c, COLL_ALLGATHER, a, gather);
}

int noc_reduce_scatter(struct noc_comm *c, const struct noc_coll_args *a)
{
    return run(c, COLL_REDUCE_SCATTER, a, scatter);
}

int noc_allreduce(struct noc_comm *c, const struct noc_coll_args *a)
{
    return run(c, COLL_ALLREDUCE, a, allreduce_body);
}

/* The grid line through this rank (a row, or a column), as a ring of its own: the buffer
   is the line's, split among the line's ranks. */
static void ring_line(const struct noc_comm *c, const struct noc_coll_args *a, bool rows,
                      struct coll_ring *r)
{
    const uint32_t cols = c->group.grid_cols, i = c->rank / cols, j = c->rank % cols;
    const uint32_t len = rows ? cols : c->group.grid_rows;
    for (uint32_t k = 0; k < len; k++)
        line[k] = (uint16_t)(rows ? i * cols + k : k * cols + j);
    for (uint32_t k = 0; k <= len; k++)
        bounds[k] = coll_bound(a->count, len, k);
    *r = (struct coll_ring){ .ranks = line, .len = len, .pos = rows ? j : i,
                             .bounds = bounds, .dtype = a->dtype, .op = a->op };
}

/* All-gather (reduce false) or all-reduce along every line: a 1-D ring per line. */
static int line_body(struct noc_comm *c, const struct noc_coll_args *a, bool rows,
                     bool reduce)
{
    struct coll_ring r;
    struct noc_rect rect;
    ring_line(c, a, rows, &r);
    int rc = reduce ? coll_ring_reduce_scatter(c, &r) : NPU_OK;
    if (rc == NPU_OK && coll_mcast_line_fits(c, &r, &rect)) /* one step, as gather's */
        return coll_mcast_line_allgather(c, &r, &rect);
    return rc == NPU_OK ? coll_ring_allgather(c, &r) : rc;
}

static int gather_rows(struct noc_comm *c, const struct noc_coll_args *a)
{
    return line_body(c, a, true, false);
}

static int gather_cols(struct noc_comm *c, const struct noc_coll_args *a)
{
    return line_body(c, a, false, false);
}

static int reduce_rows(struct noc_comm *c, const struct noc_coll_args *a)
{
    return line_body(c, a, true, true);
}

static int reduce_cols(struct noc_comm *c, const struct noc_coll_args *a)
{
    return line_body(c, a, false, true);
}

int noc_allgather_line(struct noc_comm *c, const struct noc_coll_args *a, enum noc_line dim)
{
    assert((unsigned)dim <= NOC_LINE_COLS);
    return dim == NOC_LINE_ROWS ? run(c, COLL_ALLGATHER_ROWS, a, gather_rows)
                                : run(c, COLL_ALLGATHER_COLS, a, gather_cols);
}

int noc_allreduce_line(struct noc_comm *c, const struct noc_coll_args *a, enum noc_line dim)
{
    assert((unsigned)dim <= NOC_LINE_COLS);
    return dim == NOC_LINE_ROWS ? run(c, COLL_ALLREDUCE_ROWS, a, reduce_rows)
                                : run(c, COLL_ALLREDUCE_COLS, a, reduce_cols);
}

/* A chain from the root in rank order, pipelined in segments: each rank forwards a segment
   as soon as it has landed. */
static int broadcast_body(struct noc_comm *c, const struct noc_coll_args *a)
{
    const uint32_t size = c->group.size, m = (c->rank + size - a->root) % size;
    const uint64_t eb = coll_elem_bytes(a->dtype), per = c->cfg.segment_bytes / eb;
    const uint32_t segs = (uint32_t)((a->count + per - 1) / per);
    const uint32_t next = (c->rank + 1) % size, abase = *coll_arrive_expect(c);
    const struct coll_header *h = coll_headers(c);
    struct coll_stream st;
    coll_stream_begin(&st, c);
    for (uint32_t t = 0; m + 1 < size && t < segs; t++) {
        uint64_t lo = a->count * t / segs, hi = a->count * (t + 1) / segs;
        struct coll_write w = { .src = h[c->rank].buf + lo * eb, .dst = h[next].buf + lo * eb,
                                .bytes = (hi - lo) * eb, .dst_core = c->group.core[next] };
        if (m > 0) {
            w.wait = true;
            w.wait_sem = coll_arrive_sem(c);
            w.wait_value = abase + t + 1;
        }
        coll_emit_write(&st, &w);
    }
    if (m > 0)
        *coll_arrive_expect(c) += segs;
    return coll_stream_finish(&st);
}

int noc_broadcast(struct noc_comm *c, const struct noc_coll_args *a)
{
    return run(c, COLL_BROADCAST, a, broadcast_body);
}

/* noc_allgather_blocks: the header (dst's extent, columns, row stride), the local checks,
   and the multicast. */
int noc_allgather_blocks(struct noc_comm *c, const struct noc_gather_blocks_args *a)
{
    struct coll_header h;
    coll_header_init(c, &h, COLL_ALLGATHER_BLOCKS);
    const uint64_t eb = coll_elem_bytes(a->dtype);
    h.count = (uint64_t)a->rows * a->ld, h.dtype = (uint8_t)a->dtype, h.root = a->cols;
    h.buf = a->dst, h.buf2 = a->ld, h.capacity = (uint32_t)c->cfg.gather;
    const uint64_t lo = coll_bound(a->cols, c->group.size, c->rank);
    const uint64_t w = coll_bound(a->cols, c->group.size, c->rank + 1) - lo;
    if (a->rows == 0 || a->cols == 0 || a->cols > a->ld || w > a->src_ld ||
        !dtype_ok(a->dtype) || h.count > COLL_COUNT_MAX)
        h.fault = COLL_BAD_ARGS;
    else if ((h.fault = (uint8_t)coll_check_buffer(c, a->dst, h.count, eb)) == COLL_OK && w)
        h.fault = (uint8_t)coll_check_buffer(c, a->src, (uint64_t)(a->rows - 1) * a->src_ld + w,
                                             eb);
    int rc = coll_agree(c, &h);
    if (rc != NPU_OK)
        return rc;
    rc = coll_mcast_fits(c) ? coll_mcast_allgather_blocks(c, a) : NPU_ERR_INVAL;
    if (rc == NPU_ERR_INVAL && !c->cfg.quiet)
        printf("noc: rank %u (core %u): allgather_blocks needs the multicast all-gather "
               "(NOC_GATHER_AUTO, dst at the same offset on every rank)\n", c->rank,
               hal_self()->core_id);
    coll_done(c);
    return rc;
}
