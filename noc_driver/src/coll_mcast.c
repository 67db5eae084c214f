/* SPDX-License-Identifier: MIT */
/*
 * Multicast all-gather (docs/noc-driver.md, "All-gather algorithms"): every rank multicasts
 * its chunk to the group's rectangle in one descriptor and waits until every non-empty
 * chunk has landed in its own buffer. One step instead of the ring's size - 1: the ring
 * pays a hop latency and a descriptor per step and segment, the multicast one descriptor
 * per rank whatever the group size. Link load: a link carries each chunk whose XY multicast
 * tree crosses it, once (the emulator models a multicast as one flow over the union of its
 * routes), about as much as the busiest link of a ring.
 *
 * Hazards:
 * - A multicast writes one SRAM offset in every destination, so every rank's buffer must sit
 *   at the same offset; coll_mcast_fits() checks that on the agreed headers (the same on
 *   every rank, so every rank takes the same algorithm), else the caller runs the ring.
 * - The rectangle includes the sender (loopback): its own chunk is rewritten in place with
 *   the same bytes, and counted as a delivery like any other.
 * - Inside an all-reduce the multicast follows the reduce-scatter: a rank multicasts its
 *   chunk once its own sum is final, and every rank's reads and adds of that chunk's region
 *   came before that sum (they are on its chain), so the multicast overwrites nothing still
 *   in use. It signals its own phase's ARRIVE semaphore, so it may land early.
 */
#include <assert.h>

#include "coll_internal.h"
#include "npu/hal.h"
#include "npu/noc_endpoint.h"

/* Offset of rank k's buffer in its own SRAM (from its header h, the agreed headers). */
static uint64_t buf_offset(const struct noc_comm *c, const struct coll_header *h, uint32_t k)
{
    return h[k].buf - npu_map_instance_base(NPU_MAP_SRAM, c->group.core[k]);
}

bool coll_mcast_fits(const struct noc_comm *c)
{
    if (c->cfg.gather == NOC_GATHER_RING || noc_group_is_pair(&c->group))
        return false; /* a pair's two rectangles: the ring */
    const struct coll_header *h = coll_headers(c);
    const uint64_t off = buf_offset(c, h, 0);
    for (uint32_t k = 1; k < c->group.size; k++)
        if (buf_offset(c, h, k) != off)
            return false;
    return true;
}

/* One multicast of rows x row_bytes from src (src_stride apart) to dst_offset (dst_stride
   apart) in the SRAM of every core of rectangle r (`members` of the group, the sender
   included); each landing counts on ARRIVE there, and on our SENT. */
int coll_mcast_rect(struct noc_comm *c, struct coll_stream *st, const struct noc_rect *r,
                    uint32_t members, uint64_t src, uint64_t dst_offset, uint32_t rows,
                    uint64_t row_bytes, uint64_t src_stride, uint64_t dst_stride)
{
    assert(row_bytes <= UINT32_MAX && src_stride <= UINT32_MAX && dst_stride <= UINT32_MAX &&
           "a block is in SRAM");
    struct noc_multicast_args m = {
        .src = src, .dst_offset = dst_offset, .rows = rows, .row_bytes = (uint32_t)row_bytes,
        .src_stride = (uint32_t)src_stride, .dst_stride = (uint32_t)dst_stride,
        .row0 = r->row0, .col0 = r->col0, .row1 = (uint16_t)(r->row0 + r->rows - 1),
        .col1 = (uint16_t)(r->col0 + r->cols - 1),
        .sync = { .signal = true, .signal_sem = (uint8_t)coll_arrive_sem(c), .signal_value = 1,
                  .signal2 = true, .signal2_core = (uint16_t)hal_self()->core_id,
                  .signal2_sem = (uint8_t)coll_sem(c, COLL_SEM_SENT), .signal2_value = 1 },
    };
    noc_multicast_desc(coll_stream_next(st, NPU_ENGINE_NOC), &m);
    int rc = coll_stream_flush(st); /* before SENT expects one landing per member */
    if (rc == NPU_OK)
        coll_expect_of(c)->sent += members;
    return rc;
}

/* The same to the whole group's rectangle. */
static int mcast_rows(struct noc_comm *c, struct coll_stream *st, uint64_t src,
                      uint64_t dst_offset, uint32_t rows, uint64_t row_bytes,
                      uint64_t src_stride, uint64_t dst_stride)
{
    return coll_mcast_rect(c, st, &c->group.rect, c->group.size, src, dst_offset, rows, row_bytes,
                      src_stride, dst_stride);
}

int coll_mcast_allgather(struct noc_comm *c, uint64_t count, enum npu_dtype dtype)
{
    const uint64_t eb = coll_elem_bytes(dtype), off = buf_offset(c, coll_headers(c), c->rank);
    const uint64_t lo = coll_bound(count, c->group.size, c->rank);
    const uint64_t bytes = (coll_bound(count, c->group.size, c->rank + 1) - lo) * eb;
    struct coll_stream st;
    coll_stream_begin(&st, c);
    if (bytes > 0) {
        int rc = mcast_rows(c, &st, coll_headers(c)[c->rank].buf + lo * eb, off + lo * eb, 1,
                            bytes, bytes, bytes);
        if (rc != NPU_OK)
            return rc;
    }
    /* non-empty chunks: the multicasts that land here */
    *coll_arrive_expect(c) += coll_nonempty_parts(count, c->group.size);
    return coll_stream_finish(&st);
}

int coll_mcast_allgather_blocks(struct noc_comm *c, const struct noc_gather_blocks_args *a)
{
    const uint64_t eb = coll_elem_bytes(a->dtype), off = buf_offset(c, coll_headers(c), c->rank);
    const uint64_t lo = coll_bound(a->cols, c->group.size, c->rank);
    const uint64_t width = (coll_bound(a->cols, c->group.size, c->rank + 1) - lo) * eb;
    struct coll_stream st;
    coll_stream_begin(&st, c);
    if (width > 0) { /* rows x width bytes, src_ld and ld elements apart */
        int rc = mcast_rows(c, &st, a->src, off + lo * eb, a->rows, width, a->src_ld * eb,
                            a->ld * eb);
        if (rc != NPU_OK)
            return rc;
    }
    *coll_arrive_expect(c) += coll_nonempty_parts(a->cols, c->group.size);
    return coll_stream_finish(&st);
}

bool coll_line_rect(const struct noc_comm *c, const uint16_t *ranks, uint32_t len,
                    struct noc_rect *out)
{
    const uint32_t mc = c->group.mesh_cols;
    uint32_t r0 = UINT32_MAX, r1 = 0, c0 = UINT32_MAX, c1 = 0;
    for (uint32_t k = 0; k < len; k++) {
        const uint32_t core = c->group.core[ranks[k]], row = core / mc, col = core % mc;
        r0 = row < r0 ? row : r0, r1 = row > r1 ? row : r1;
        c0 = col < c0 ? col : c0, c1 = col > c1 ? col : c1;
    }
    /* a group's cores are distinct, so len of them in a rectangle of len cores fill it */
    if ((uint64_t)(r1 - r0 + 1) * (c1 - c0 + 1) != len)
        return false;
    *out = (struct noc_rect){ .row0 = (uint16_t)r0, .col0 = (uint16_t)c0,
                              .rows = (uint16_t)(r1 - r0 + 1), .cols = (uint16_t)(c1 - c0 + 1) };
    return true;
}

bool coll_mcast_line_fits(const struct noc_comm *c, const struct coll_ring *r,
                          struct noc_rect *rect)
{
    if (c->cfg.gather == NOC_GATHER_RING || noc_group_is_pair(&c->group) || r->len < 2 ||
        !coll_line_rect(c, r->ranks, r->len, rect))
        return false;
    const struct coll_header *h = coll_headers(c);
    const uint64_t off = buf_offset(c, h, r->ranks[0]);
    for (uint32_t k = 1; k < r->len; k++)
        if (buf_offset(c, h, r->ranks[k]) != off)
            return false;
    return true;
}

int coll_mcast_line_allgather(struct noc_comm *c, const struct coll_ring *r,
                              const struct noc_rect *rect)
{
    const uint64_t eb = coll_elem_bytes(r->dtype), off = buf_offset(c, coll_headers(c), c->rank);
    const uint64_t lo = r->bounds[r->pos], bytes = (r->bounds[r->pos + 1] - lo) * eb;
    struct coll_stream st;
    coll_stream_begin(&st, c);
    if (bytes > 0) {
        int rc = coll_mcast_rect(c, &st, rect, r->len, coll_headers(c)[c->rank].buf + lo * eb,
                            off + lo * eb, 1, bytes, bytes, bytes);
        if (rc != NPU_OK)
            return rc;
    }
    uint32_t parts = 0; /* the line's non-empty chunks: the multicasts that land here */
    for (uint32_t k = 0; k < r->len; k++)
        parts += r->bounds[k + 1] > r->bounds[k];
    *coll_arrive_expect(c) += parts;
    return coll_stream_finish(&st);
}
