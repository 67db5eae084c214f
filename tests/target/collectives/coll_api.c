/* SPDX-License-Identifier: MIT */
/*
 * Collectives image, NPU core: the NoC dataflow API (async write and read with barriers,
 * remote semaphore increment and set, multicast, a circular buffer that wraps) and the
 * refusals of bad collectives (counts that differ, a buffer outside SRAM, a rank with another
 * group), which must fail on every rank and hang none.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "coll_checks.h"
#include "noc/cb.h"
#include "noc/noc.h"
#include "npu/hal.h"
#include "npu/wait.h"

#define expect(ok, check, ...) checks_expect((ok), (check), ccheck_names[check], __VA_ARGS__)

#define SEM_WRITE 1u
#define SEM_SET 2u
#define SEM_MCAST 3u
#define SEM_FILLED 4u
#define SEM_FREED 5u
#define API_BYTES 4096u
#define PAGE 256u
#define PAGES 4u

static uint8_t *at(uint64_t addr)
{
    return (uint8_t *)(uintptr_t)addr;
}

/* Write to the next core, read back from it, semaphores inc and set. */
static void check_write_read(uint64_t data)
{
    const uint32_t me = hal_self()->core_id, n = hal_chip()->ncores;
    const uint32_t next = (me + 1) % n, prev = (me + n - 1) % n;
    const uint64_t off = data - hal_self()->sram_base;
    for (uint32_t i = 0; i < API_BYTES; i++)
        at(data)[i] = (uint8_t)(i * 3 + me);
    struct noc_write_async_args w = {
        .src = data, .dst = noc_sram_addr(next, off + API_BYTES), .bytes = API_BYTES,
        .on_arrival = { .enable = true, .core = (uint16_t)next, .sem = SEM_WRITE, .value = 1 },
    };
    int rc = noc_write_async(&w);
    if (rc == NPU_OK)
        rc = noc_write_barrier();
    uint32_t acked = noc_writes_acked(), issued = noc_writes_issued();
    if (rc == NPU_OK)
        rc = noc_sem_wait(SEM_WRITE, 1); /* prev's write has landed here */
    uint32_t bad = 0;
    for (uint32_t i = 0; i < API_BYTES; i++)
        bad += at(data + API_BYTES)[i] != (uint8_t)(i * 3 + prev);
    /* Read back what our write left in the next core (it has landed: the barrier). */
    struct noc_read_async_args r = { .src = noc_sram_addr(next, off + API_BYTES),
                                     .dst = data + 2 * API_BYTES, .bytes = API_BYTES };
    if (rc == NPU_OK)
        rc = noc_read_async(&r);
    if (rc == NPU_OK)
        rc = noc_read_barrier();
    for (uint32_t i = 0; i < API_BYTES; i++)
        bad += at(data + 2 * API_BYTES)[i] != (uint8_t)(i * 3 + me);
    struct noc_sem_args s = { .core = next, .sem = SEM_SET, .value = 5 };
    if (rc == NPU_OK)
        rc = noc_sem_set(&s);
    s.value = 2;
    if (rc == NPU_OK)
        rc = noc_sem_inc(&s); /* lands after the set: same route, same latency */
    if (rc == NPU_OK)
        rc = noc_sem_wait(SEM_SET, 7);
    expect(rc == NPU_OK && bad == 0 && acked == issued, CCHECK_API,
           "write/read/semaphores: rc %d, %u bad bytes, %u of %u writes acked", rc, bad, acked,
           issued);
}

/* Core 0 multicasts to the whole mesh. */
static void check_multicast(uint64_t data)
{
    const uint64_t off = data - hal_self()->sram_base + 4 * API_BYTES;
    int rc = NPU_OK;
    if (hal_self()->core_id == 0) {
        for (uint32_t i = 0; i < API_BYTES; i++)
            at(data + 3 * API_BYTES)[i] = (uint8_t)(i ^ 0x5a);
        struct noc_multicast_async_args m = {
            .src = data + 3 * API_BYTES, .dst_offset = off, .bytes = API_BYTES,
            .row1 = (uint16_t)(hal_chip()->rows - 1), .col1 = (uint16_t)(hal_chip()->cols - 1),
            .on_arrival = { .enable = true, .sem = SEM_MCAST, .value = 1 },
        };
        uint32_t before = noc_writes_issued();
        rc = noc_multicast_async(&m);
        if (rc == NPU_OK)
            rc = noc_write_barrier();
        if (noc_writes_issued() - before != hal_chip()->ncores)
            rc = NPU_ERR_STATE;
    }
    if (rc == NPU_OK)
        rc = noc_sem_wait(SEM_MCAST, 1);
    uint32_t bad = 0;
    for (uint32_t i = 0; i < API_BYTES; i++)
        bad += at(hal_self()->sram_base + off)[i] != (uint8_t)(i ^ 0x5a);
    expect(rc == NPU_OK && bad == 0, CCHECK_API, "multicast: rc %d, %u bad bytes", rc, bad);
}

/* Even cores produce 12 pages in pushes of 3 into a ring of 4 pages on the next core. */
static void check_circular_buffer(uint64_t data)
{
    const uint32_t me = hal_self()->core_id;
    const uint32_t producer = me & ~1u, consumer = producer + 1;
    if (consumer >= hal_chip()->ncores)
        return;
    const uint64_t ring = data + 8 * API_BYTES, src = data + 12 * API_BYTES;
    struct noc_cb_config cfg = { .producer_core = producer, .consumer_core = consumer,
                                 .ring_offset = ring - hal_self()->sram_base,
                                 .page_bytes = PAGE, .pages = PAGES,
                                 .filled_sem = SEM_FILLED, .freed_sem = SEM_FREED };
    struct noc_cb cb;
    int rc = noc_cb_init(&cb, &cfg);
    uint32_t bad = 0;
    for (uint32_t batch = 0; rc == NPU_OK && batch < 4; batch++) {
        if (me == producer) {
            for (uint32_t i = 0; i < 3 * PAGE; i++)
                at(src)[i] = (uint8_t)(batch * 3 + i / PAGE);
            rc = noc_cb_reserve_back(&cb, 3);
            if (rc == NPU_OK)
                rc = noc_cb_push_back(&cb, src, 3);
            if (rc == NPU_OK)
                rc = noc_write_barrier(); /* src is reused by the next batch */
        } else {
            rc = noc_cb_wait_front(&cb, 3);
            for (uint32_t p = 0; rc == NPU_OK && p < 3; p++) {
                uint64_t page = ring + (uint64_t)((cb.popped + p) % PAGES) * PAGE;
                for (uint32_t i = 0; i < PAGE; i++)
                    bad += at(page)[i] != (uint8_t)(batch * 3 + p);
            }
            if (rc == NPU_OK)
                rc = noc_cb_pop_front(&cb, 3);
        }
    }
    expect(rc == NPU_OK && bad == 0, CCHECK_API, "circular buffer (%s): rc %d, %u bad bytes",
           me == producer ? "producer" : "consumer", rc, bad);
}

void coll_api_check(uint64_t data)
{
    check_write_read(data);
    check_multicast(data);
    check_circular_buffer(data);
}

/* ---- refusals ---- */

#define SEGMENT 1024u
#define ERROR_TIMEOUT_PS (20 * HAL_PS_PER_US)

/* A communicator on slot 0 (the cases are over; the last check leaves slot 0 broken). */
static int error_comm(struct noc_comm *c, struct noc_group *g, uint64_t scratch,
                      struct noc_rect rect)
{
    struct noc_group_args a = { .placement = NOC_PLACE_RING, .rect = rect,
                                .mesh_rows = hal_chip()->rows, .mesh_cols = hal_chip()->cols };
    struct noc_comm_config cfg = { .group = g, .slot = 0, .scratch = scratch,
                                   .segment_bytes = SEGMENT, .timeout_ps = ERROR_TIMEOUT_PS,
                                   .quiet = true }; /* the refusals are provoked */
    int rc = noc_group_init(g, &a);
    return rc == NPU_OK ? noc_comm_init(c, &cfg) : rc;
}

/* All-to-all-v refusals on the 2 x 2 group: bucket maps that differ, a receiver whose blocks
   exceed its recv_capacity, a rank whose plan storage cannot hold what the count exchange
   teaches it (noc_a2av_plan_words: 4 + 4 x 4 buckets + 4 x 4 ranks x 1 owned = 36 words);
   each NPU_ERR_INVAL on every rank, and a good call after. */
static void a2av_refusals(struct noc_comm *c, uint64_t data)
{
    static uint32_t counts[4] = { 8, 8, 8, 8 }, first[5], store[64];
    const uint32_t rank = c->rank;
    for (uint32_t q = 0; q <= 4; q++)
        first[q] = q;
    first[1] = rank == 0 ? 0 : 1; /* rank 0 thinks rank 0 owns no bucket */
    struct noc_alltoallv_plan plan = { .buckets = 4, .bucket_first = first, .words = store,
                                       .capacity = 64 };
    struct noc_alltoallv_args a = { .counts = counts, .send = data, .recv = data + 4096,
                                    .recv_capacity = 64, .dtype = NPU_DTYPE_FP32 };
    int rc = noc_alltoallv_dispatch(c, &a, &plan);
    expect(rc == NPU_ERR_INVAL, CCHECK_MISMATCH, "rank %u: all-to-all-v with another bucket "
           "map: rc %d, want NPU_ERR_INVAL", rank, rc);
    first[1] = 1;
    a.recv_capacity = rank == 1 ? 16 : 64; /* rank 1 gets 4 x 8 elements */
    rc = noc_alltoallv_dispatch(c, &a, &plan);
    expect(rc == NPU_ERR_INVAL, CCHECK_MISMATCH, "rank %u: all-to-all-v over rank 1's "
           "recv_capacity: rc %d, want NPU_ERR_INVAL", rank, rc);
    a.recv_capacity = 64;
    plan.capacity = rank == 2 ? 32 : 64; /* rank 2's storage is 4 words short */
    rc = noc_alltoallv_dispatch(c, &a, &plan);
    expect(rc == NPU_ERR_INVAL, CCHECK_MISMATCH, "rank %u: all-to-all-v whose plan storage "
           "is too small on rank 2: rc %d, want NPU_ERR_INVAL", rank, rc);
    plan.capacity = 64;
    rc = noc_alltoallv_dispatch(c, &a, &plan);
    expect(rc == NPU_OK, CCHECK_MISMATCH, "rank %u: a good all-to-all-v after the refusals: "
           "rc %d", rank, rc);
}

void coll_error_checks(uint64_t data, uint64_t scratch)
{
    static struct noc_group g;
    static struct noc_comm c;
    if (hal_self()->row >= 2 || hal_self()->col >= 2)
        return; /* the 2 x 2 group at (0,0) only */
    int rc = error_comm(&c, &g, scratch, (struct noc_rect){ 0, 0, 2, 2 });
    if (!expect(rc == NPU_OK, CCHECK_MISMATCH, "the 2x2 communicator: rc %d", rc))
        return;
    const uint32_t rank = c.rank;
    struct noc_coll_args a = { .buf = data, .count = 100 + (rank == 0),
                               .dtype = NPU_DTYPE_FP32 };
    rc = noc_allreduce(&c, &a);
    expect(rc == NPU_ERR_INVAL, CCHECK_MISMATCH, "rank %u: rc %d, want NPU_ERR_INVAL", rank,
           rc);
    a.count = 100;
    if (rank == 1)
        a.buf = hal_self()->sram_base + hal_self()->sram_size - 64;
    rc = noc_allgather(&c, &a);
    expect(rc == NPU_ERR_RANGE, CCHECK_BAD_BUFFER, "rank %u: rc %d, want NPU_ERR_RANGE", rank,
           rc);
    a.buf = data;
    a.op = rank == 3 ? NOC_REDUCE_MAX : NOC_REDUCE_SUM; /* one rank takes the maximum */
    rc = noc_allreduce(&c, &a);
    expect(rc == NPU_ERR_INVAL, CCHECK_MISMATCH, "rank %u: all-reduce with another operation "
           "on rank 3: rc %d, want NPU_ERR_INVAL", rank, rc);
    a.op = NOC_REDUCE_SUM;
    rc = noc_allreduce(&c, &a); /* the communicator still works after refusals */
    expect(rc == NPU_OK, CCHECK_MISMATCH, "rank %u: a good all-reduce after the refusals: "
           "rc %d", rank, rc);
    a2av_refusals(&c, data);
    c.cfg.gather = rank == 2 ? NOC_GATHER_RING : NOC_GATHER_AUTO; /* a misconfigured rank */
    rc = noc_allgather(&c, &a);
    expect(rc == NPU_ERR_INVAL, CCHECK_MISMATCH, "rank %u: all-gather with another algorithm "
           "on rank 2: rc %d, want NPU_ERR_INVAL", rank, rc);
    c.cfg.gather = NOC_GATHER_AUTO;
    rc = noc_allgather(&c, &a);
    expect(rc == NPU_OK, CCHECK_MISMATCH, "rank %u: a good all-gather after it: rc %d", rank,
           rc);
    /* Rank 3 (core (1,0) on the ring) calls on a 1 x 2 group of its own row: its row
       partner sees a foreign header, ranks 0 and 1 miss rank 3's and time out (20 us). */
    if (rank == 3) {
        static struct noc_group g2;
        rc = error_comm(&c, &g2, scratch, (struct noc_rect){ 1, 0, 1, 2 });
        c.seq = 8; /* as if it had taken part so far */
    }
    if (rc == NPU_OK)
        rc = noc_allreduce(&c, &a);
    expect(rc == NPU_ERR_INVAL || rc == NPU_ERR_TIMEOUT, CCHECK_BAD_GROUP,
           "rank %u: rc %d, want NPU_ERR_INVAL or NPU_ERR_TIMEOUT", rank, rc);
}
