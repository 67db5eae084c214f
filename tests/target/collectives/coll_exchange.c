/* SPDX-License-Identifier: MIT */
/*
 * Collectives image, NPU core: the exchange of named blocks (noc_exchange_blocks), which
 * split attention uses to send each rank only the pieces it reads (docs/noc-driver.md).
 * Rank s sends a 2-D block (3 rows of 24 bytes, 40 apart at the source, 32 apart at the
 * destination) to ranks s + 1 and s + 3 of its group (those that are not s itself), into
 * slot s of their buffers; every rank checks that exactly the slots of its senders changed,
 * to the senders' bytes, and the rest kept their sentinel; on mesh2d groups also the
 * multicast form (each rank's block to the grid column of the next rank, itself included
 * when there), and its refusal without the `multicast` declaration; on ring and mesh2d
 * groups the group form (each even rank's block to every rank, itself included). Then two refusals, on
 * every rank alike: one rank expecting a block more than is sent (NPU_ERR_INVAL, nobody waits for it),
 * and one block reaching past the receivers' buffers (NPU_ERR_RANGE).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "coll_checks.h"
#include "coll_data.h"
#include "noc/collective.h"

#define expect(ok, check, ...) checks_expect((ok), (check), ccheck_names[check], __VA_ARGS__)

#define XB_ROWS 3u
#define XB_ROW_BYTES 24u
#define XB_SRC_STRIDE 40u
#define XB_DST_STRIDE 32u
#define XB_SLOT (XB_ROWS * XB_DST_STRIDE) /* a sender's slot in a receiver's buffer */

/* Whether sender s sends to receiver r in a group of n ranks. */
static bool xb_sends(uint32_t s, uint32_t r, uint32_t n)
{
    return r != s && (r == (s + 1) % n || r == (s + 3) % n);
}

/* Byte b of row `row` of sender s's block. */
static uint8_t xb_byte(uint32_t s, uint32_t row, uint32_t b)
{
    return (uint8_t)(s * 7 + row * 31 + b + 1);
}

static uint32_t xb_blocks(uint32_t rank, uint32_t n, uint64_t src,
                          struct noc_exchange_block *out)
{
    uint32_t k = 0;
    for (uint32_t r = 0; r < n; r++)
        if (xb_sends(rank, r, n))
            out[k++] = (struct noc_exchange_block){
                .src = src, .dst_offset = (uint64_t)rank * XB_SLOT, .to = r, .rows = XB_ROWS,
                .row_bytes = XB_ROW_BYTES, .src_stride = XB_SRC_STRIDE,
                .dst_stride = XB_DST_STRIDE };
    return k;
}

/* Bytes of the receive buffer that differ from what the exchange should leave. */
static uint64_t xb_mismatches(uint32_t rank, uint32_t n, const uint8_t *buf)
{
    uint64_t bad = 0;
    for (uint32_t s = 0; s < n; s++)
        for (uint32_t i = 0; i < XB_SLOT; i++) {
            const uint32_t row = i / XB_DST_STRIDE, b = i % XB_DST_STRIDE;
            const bool lands = xb_sends(s, rank, n) && b < XB_ROW_BYTES;
            const uint8_t want = lands ? xb_byte(s, row, b) : 0xa5;
            if (buf[(uint64_t)s * XB_SLOT + i] != want && bad++ == 0)
                printf("# exchange of %" PRIu32 " ranks: rank %" PRIu32 " byte %" PRIu32
                       " of sender %" PRIu32 "'s slot = %u, want %u\n", n, rank, i, s,
                       buf[(uint64_t)s * XB_SLOT + i], want);
        }
    return bad;
}

/* The multicast form on a mesh2d group: rank s multicasts its block to the grid column of
   rank s + 1 (itself included when it is there), into slot s. */
static bool xb_mcast_lands(uint32_t s, uint32_t r, uint32_t n, uint32_t grid_cols)
{
    return (s + 1) % n % grid_cols == r % grid_cols;
}

static uint64_t xb_mcast_mismatches(uint32_t rank, uint32_t n, uint32_t gc, const uint8_t *buf)
{
    uint64_t bad = 0;
    for (uint32_t s = 0; s < n; s++)
        for (uint32_t i = 0; i < XB_SLOT; i++) {
            const uint32_t row = i / XB_DST_STRIDE, b = i % XB_DST_STRIDE;
            const bool lands = xb_mcast_lands(s, rank, n, gc) && b < XB_ROW_BYTES;
            bad += buf[(uint64_t)s * XB_SLOT + i] != (lands ? xb_byte(s, row, b) : 0xa5);
        }
    return bad;
}

/* The group form, on ring and mesh2d groups: each even rank multicasts its block to the whole
   group (itself included), into slot s; every rank expects one delivery per even rank. */
static uint64_t xb_group_mismatches(uint32_t rank, uint32_t n, const uint8_t *buf)
{
    uint64_t bad = 0;
    for (uint32_t s = 0; s < n; s++)
        for (uint32_t i = 0; i < XB_SLOT; i++) {
            const uint32_t row = i / XB_DST_STRIDE, b = i % XB_DST_STRIDE;
            const bool lands = s % 2 == 0 && b < XB_ROW_BYTES;
            if (buf[(uint64_t)s * XB_SLOT + i] != (lands ? xb_byte(s, row, b) : 0xa5) &&
                bad++ == 0)
                printf("# group exchange of %" PRIu32 " ranks: rank %" PRIu32 " byte %" PRIu32
                       " of sender %" PRIu32 "'s slot wrong\n", n, rank, i, s);
        }
    return bad;
}

static void xb_group_run(const struct coll_case *cs, struct noc_comm *comm, uint64_t data)
{
    const uint32_t n = comm->group.size, rank = comm->rank;
    uint8_t *const buf = (uint8_t *)(uintptr_t)data + 256;
    memset(buf, 0xa5, (size_t)n * XB_SLOT);
    const struct noc_exchange_block b = {
        .src = data, .dst_offset = (uint64_t)rank * XB_SLOT, .to = 0, .dest = NOC_EXCHANGE_GROUP,
        .rows = XB_ROWS, .row_bytes = XB_ROW_BYTES, .src_stride = XB_SRC_STRIDE,
        .dst_stride = XB_DST_STRIDE };
    struct noc_exchange_args a = { .buf = data + 256, .bytes = (uint64_t)n * XB_SLOT,
                                   .blocks = &b, .nblocks = rank % 2 == 0,
                                   .arrivals = (n + 1) / 2, .multicast = true };
    int rc = noc_exchange_blocks(comm, &a);
    uint64_t bad = rc == NPU_OK ? xb_group_mismatches(rank, n, buf) : 0;
    expect(rc == NPU_OK && bad == 0, CCHECK_EXCHANGE, "exchange multicast to the group %s %ux%u: "
           "rc %d, %" PRIu64 " wrong bytes", noc_placement_name(cs->placement), cs->rows,
           cs->cols, rc, bad);
}

static void xb_mcast_run(const struct coll_case *cs, struct noc_comm *comm, uint64_t data)
{
    const uint32_t n = comm->group.size, rank = comm->rank, gc = comm->group.grid_cols;
    uint8_t *const buf = (uint8_t *)(uintptr_t)data + 256;
    memset(buf, 0xa5, (size_t)n * XB_SLOT);
    uint32_t arrivals = 0;
    for (uint32_t s = 0; s < n; s++)
        arrivals += xb_mcast_lands(s, rank, n, gc);
    const struct noc_exchange_block b = {
        .src = data, .dst_offset = (uint64_t)rank * XB_SLOT, .to = (rank + 1) % n,
        .dest = NOC_EXCHANGE_GRID_COL, .rows = XB_ROWS, .row_bytes = XB_ROW_BYTES,
        .src_stride = XB_SRC_STRIDE, .dst_stride = XB_DST_STRIDE };
    struct noc_exchange_args a = { .buf = data + 256, .bytes = (uint64_t)n * XB_SLOT,
                                   .blocks = &b, .nblocks = 1, .arrivals = arrivals,
                                   .multicast = true };
    int rc = noc_exchange_blocks(comm, &a);
    uint64_t bad = rc == NPU_OK ? xb_mcast_mismatches(rank, n, gc, buf) : 0;
    expect(rc == NPU_OK && bad == 0, CCHECK_EXCHANGE, "exchange multicast to grid columns %ux%u: "
           "rc %d, %" PRIu64 " wrong bytes", cs->rows, cs->cols, rc, bad);
    const bool quiet = comm->cfg.quiet;
    comm->cfg.quiet = true;
    a.multicast = false; /* a line block without the declaration */
    rc = noc_exchange_blocks(comm, &a);
    expect(rc == NPU_ERR_INVAL, CCHECK_EXCHANGE, "exchange multicast without .multicast: rc %d, "
           "want NPU_ERR_INVAL", rc);
    comm->cfg.quiet = quiet;
}

void coll_exchange_run(const struct coll_case *cs, struct noc_comm *comm, uint64_t data)
{
    static struct noc_exchange_block blocks[2];
    const uint32_t n = comm->group.size, rank = comm->rank;
    uint8_t *const src = (uint8_t *)(uintptr_t)data;
    uint8_t *const buf = src + 256; /* n slots */
    for (uint32_t row = 0; row < XB_ROWS; row++)
        for (uint32_t b = 0; b < XB_SRC_STRIDE; b++)
            src[row * XB_SRC_STRIDE + b] = b < XB_ROW_BYTES ? xb_byte(rank, row, b) : 0x5a;
    memset(buf, 0xa5, (size_t)n * XB_SLOT);
    uint32_t arrivals = 0;
    for (uint32_t s = 0; s < n; s++)
        arrivals += xb_sends(s, rank, n);
    struct noc_exchange_args a = { .buf = data + 256, .bytes = (uint64_t)n * XB_SLOT,
                                   .blocks = blocks, .nblocks = xb_blocks(rank, n, data, blocks),
                                   .arrivals = arrivals };
    int rc = noc_exchange_blocks(comm, &a);
    uint64_t bad = rc == NPU_OK ? xb_mismatches(rank, n, buf) : 0;
    expect(rc == NPU_OK && bad == 0, CCHECK_EXCHANGE, "exchange %s %ux%u: rc %d, %" PRIu64
           " wrong bytes", noc_placement_name(cs->placement), cs->rows, cs->cols, rc, bad);
    if (cs->placement == NOC_PLACE_MESH2D)
        xb_mcast_run(cs, comm, data);
    xb_group_run(cs, comm, data);
    if (n < 2 || a.nblocks == 0)
        return;
    const bool quiet = comm->cfg.quiet;
    comm->cfg.quiet = true;
    a.arrivals = arrivals + (rank == 0); /* more than anyone sends */
    rc = noc_exchange_blocks(comm, &a);
    expect(rc == NPU_ERR_INVAL, CCHECK_EXCHANGE, "exchange with rank 0 expecting a block "
           "more: rc %d, want NPU_ERR_INVAL", rc);
    a.arrivals = arrivals;
    blocks[0].dst_offset = rank == n - 1 ? a.bytes - XB_ROW_BYTES : blocks[0].dst_offset;
    rc = noc_exchange_blocks(comm, &a);
    expect(rc == NPU_ERR_RANGE, CCHECK_EXCHANGE, "exchange with a block past the buffer's "
           "end: rc %d, want NPU_ERR_RANGE", rc);
    comm->cfg.quiet = quiet;
}

void coll_exchange_cases(uint64_t data)
{
    static const uint16_t shapes[][2] = { { 1, 2 }, { 1, 3 }, { 2, 2 }, { 2, 4 }, { 4, 4 },
                                          { 8, 8 } };
    for (uint32_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        struct coll_case cs = { .placement = s % 2 ? NOC_PLACE_MESH2D : NOC_PLACE_RING,
                                .rows = shapes[s][0], .cols = shapes[s][1],
                                .kind = CCHECK_EXCHANGE, .count = 1,
                                .dtype = NPU_DTYPE_FP32 };
        coll_case_run(&cs, data, 0);
    }
}
