/* SPDX-License-Identifier: MIT */
/*
 * Exchange of named blocks (noc_exchange_blocks, docs/noc-driver.md "Exchange of blocks"):
 * after the agreement every rank writes each of its blocks straight into the receiver's
 * buffer, one 2-D NoC write a block (or one 2-D multicast to a grid line's rectangle or the
 * group's), and
 * waits until its own expected deliveries have landed and its writes have been
 * acknowledged. One step: no forwarding, no reduction.
 *
 * Hazards:
 * - The receiver's buffer address comes from its agreed header, so a block lands where that
 *   rank said, whatever the sender's own layout.
 * - A sender writes only once it holds every header, and each receiver sent its header only
 *   after its queued work on buf was done (the caller's contract, as for every collective),
 *   so a block overwrites nothing still in use. It signals this phase's ARRIVE, which the
 *   receiver expects from its own call on, so a block may land before the receiver has
 *   judged the headers.
 * - Two blocks that overlap in a receiver land in no defined order: the caller must not
 *   send them (not checked: it would need every rank's list on every rank).
 */
#include <assert.h>
#include <stdio.h>

#include "coll_internal.h"
#include "npu/hal.h"
#include "npu/noc_endpoint.h"

/* The bytes a block spans at its source or destination (stride between row starts). */
static uint64_t block_span(uint32_t rows, uint32_t row_bytes, uint32_t stride)
{
    return (uint64_t)(rows - 1) * stride + row_bytes;
}

/* The ranks of block b's grid line (its `to` rank's column or row), or of the whole group,
   into ranks; their number. */
static uint32_t line_ranks(const struct noc_comm *c, const struct noc_exchange_block *b,
                           uint16_t *ranks)
{
    if (b->dest == NOC_EXCHANGE_GROUP) {
        for (uint32_t k = 0; k < c->group.size; k++)
            ranks[k] = (uint16_t)k;
        return c->group.size;
    }
    const uint32_t cols = c->group.grid_cols, i = b->to / cols, j = b->to % cols;
    const bool col = b->dest == NOC_EXCHANGE_GRID_COL;
    const uint32_t len = col ? c->group.grid_rows : cols;
    for (uint32_t k = 0; k < len; k++)
        ranks[k] = (uint16_t)(col ? k * cols + j : i * cols + k);
    return len;
}

/* COLL_OK if block b can be sent by this rank into buffers of a->bytes. */
static enum coll_fault block_check(const struct noc_comm *c, const struct noc_exchange_args *a,
                                   const struct noc_exchange_block *b)
{
    static uint16_t ranks[NOC_GROUP_MAX];
    struct noc_rect rect;
    const bool line = b->dest != NOC_EXCHANGE_RANK;
    if (b->to >= c->group.size || (!line && b->to == c->rank) || b->rows == 0 ||
        b->row_bytes == 0 ||
        (b->rows > 1 && (b->src_stride < b->row_bytes || b->dst_stride < b->row_bytes)))
        return COLL_BAD_ARGS;
    const bool grid = b->dest == NOC_EXCHANGE_GRID_COL || b->dest == NOC_EXCHANGE_GRID_ROW;
    if (line && (!a->multicast || b->dest > NOC_EXCHANGE_GROUP ||
                 (grid && c->group.placement != NOC_PLACE_MESH2D) ||
                 noc_group_is_pair(&c->group) ||
                 !coll_line_rect(c, ranks, line_ranks(c, b, ranks), &rect)))
        return COLL_BAD_ARGS; /* a line or the group needs the declaration and a rectangle */
    const uint64_t dst_end = b->dst_offset + block_span(b->rows, b->row_bytes, b->dst_stride);
    if (dst_end > a->bytes || dst_end < b->dst_offset)
        return COLL_BAD_BUFFER;
    return coll_check_buffer(c, b->src, block_span(b->rows, b->row_bytes, b->src_stride), 1);
}

static void header_of(const struct noc_comm *c, struct coll_header *h,
                      const struct noc_exchange_args *a)
{
    static uint16_t ranks[NOC_GROUP_MAX];
    coll_header_init(c, h, COLL_EXCHANGE_BLOCKS);
    h->count = a->bytes, h->buf = a->buf, h->root = a->multicast; /* agreed */
    h->buf2 = a->arrivals; /* judged: the deliveries sent (capacity) and expected agree */
    if (a->bytes == 0 || a->bytes > COLL_COUNT_MAX || (a->nblocks && !a->blocks)) {
        h->fault = COLL_BAD_ARGS;
        return;
    }
    h->fault = (uint8_t)coll_check_buffer(c, a->buf, a->bytes, 1);
    uint64_t deliveries = 0;
    for (uint32_t i = 0; i < a->nblocks && h->fault == COLL_OK; i++) {
        const struct noc_exchange_block *b = &a->blocks[i];
        h->fault = (uint8_t)block_check(c, a, b);
        deliveries += b->dest == NOC_EXCHANGE_RANK ? 1 : line_ranks(c, b, ranks);
    }
    h->capacity = (uint32_t)deliveries;
}

/* Block b as one 2-D write into its receiver's buffer: ARRIVE there, SENT here. */
static void emit_block(struct coll_stream *st, const struct noc_exchange_block *b)
{
    struct noc_comm *c = st->c;
    const struct noc_write_args w = {
        .src = b->src, .dst = coll_headers(c)[b->to].buf + b->dst_offset, .rows = b->rows,
        .row_bytes = b->row_bytes,
        .src_stride = b->rows > 1 ? b->src_stride : b->row_bytes,
        .dst_stride = b->rows > 1 ? b->dst_stride : b->row_bytes,
        .sync = { .signal = true, .signal_core = (uint16_t)c->group.core[b->to],
                  .signal_sem = (uint8_t)coll_arrive_sem(c), .signal_value = 1,
                  .signal2 = true, .signal2_core = (uint16_t)hal_self()->core_id,
                  .signal2_sem = (uint8_t)coll_sem(c, COLL_SEM_SENT), .signal2_value = 1 },
    };
    noc_write_desc(coll_stream_next(st, NPU_ENGINE_NOC), &w);
    coll_expect_of(c)->sent++;
}

/* Block b as one 2-D multicast to its grid line's (or the group's) rectangle, at the same
   offset of every member's buffer (the headers agreed on one offset). */
static int emit_line_block(struct coll_stream *st, const struct noc_exchange_block *b)
{
    static uint16_t ranks[NOC_GROUP_MAX];
    struct noc_comm *c = st->c;
    struct noc_rect r;
    const uint32_t len = line_ranks(c, b, ranks);
    const bool fits = coll_line_rect(c, ranks, len, &r);
    assert(fits && "checked before the agreement");
    (void)fits;
    const uint64_t off = coll_headers(c)[c->rank].buf -
                         npu_map_instance_base(NPU_MAP_SRAM, c->group.core[c->rank]);
    return coll_mcast_rect(c, st, &r, len, b->src, off + b->dst_offset, b->rows, b->row_bytes,
                           b->rows > 1 ? b->src_stride : b->row_bytes,
                           b->rows > 1 ? b->dst_stride : b->row_bytes);
}

int noc_exchange_blocks(struct noc_comm *c, const struct noc_exchange_args *a)
{
    struct coll_header h;
    header_of(c, &h, a);
    int rc = coll_agree(c, &h);
    if (rc != NPU_OK)
        return rc;
    struct coll_stream st;
    coll_stream_begin(&st, c);
    for (uint32_t i = 0; i < a->nblocks && rc == NPU_OK; i++) {
        if (a->blocks[i].dest == NOC_EXCHANGE_RANK)
            emit_block(&st, &a->blocks[i]);
        else
            rc = emit_line_block(&st, &a->blocks[i]);
    }
    *coll_arrive_expect(c) += a->arrivals;
    if (rc == NPU_OK)
        rc = coll_stream_finish(&st);
    coll_done(c);
    return rc;
}
