/* SPDX-License-Identifier: MIT */
/*
 * Ring phases (docs/noc-driver.md): all-gather and reduce-scatter over a ring of ranks, as
 * descriptor chains. Each part of the buffer is cut into S segments (the same S for every
 * part, from the largest); step s, segment t is sequence number q = s * S + t.
 *
 * All-gather, rank at position m, step s = 0..len-2: send part (m - s) to the next rank's
 * buffer. Step 0 sends our own part; step s >= 1 forwards what arrived at step s - 1: its
 * write waits for ARRIVE >= q - S + 1.
 *
 * Reduce-scatter, step s: send part (m - s - 1) into receive slot q % K of the next rank;
 * the next rank's vector engine adds it into its own copy of that part (in place) and frees
 * the slot (CREDIT to us). Our write of (s, t) waits for our add of (s - 1, t) (VDONE) and,
 * from q >= K on, for the slot it overwrites to be free (WAIT2 on CREDIT). After len - 1
 * steps part m holds the sum over the ring, in the order of collective.h.
 *
 * Consecutive phases of a collective use different banks of receive slots and each phase its
 * own ARRIVE semaphore: a neighbour may start a later phase (in a 2-D all-reduce, even two
 * phases later) before this rank has ended the current one.
 *
 * Why no deadlock: every descriptor waits only on events of smaller sequence numbers (its own
 * rank's earlier adds, the previous rank's earlier writes, the next rank's earlier adds),
 * engine queues run in sequence order, and the hart submits in sequence order, blocking only
 * on its own earlier descriptors (the window). So the smallest unfinished descriptor of the
 * whole ring is always submitted and free to run.
 */
#include <assert.h>

#include "coll_internal.h"
#include "npu/vector.h"

/* Segment t of part k (elements): [*lo, *lo + *len). */
static void segment(const struct coll_ring *r, uint32_t k, uint32_t segs, uint32_t t,
                    uint64_t *lo, uint64_t *len)
{
    uint64_t part = r->bounds[k + 1] - r->bounds[k];
    uint64_t a = part * t / segs, b = part * (t + 1) / segs;
    *lo = r->bounds[k] + a;
    *len = b - a;
}

static uint32_t segments_of(const struct noc_comm *c, const struct coll_ring *r)
{
    uint64_t most = 0, eb = coll_elem_bytes(r->dtype);
    for (uint32_t k = 0; k < r->len; k++)
        if (r->bounds[k + 1] - r->bounds[k] > most)
            most = r->bounds[k + 1] - r->bounds[k];
    uint64_t per = c->cfg.segment_bytes / eb;
    uint64_t segs = (most + per - 1) / per;
    return segs ? (uint32_t)segs : 1u;
}

static const struct coll_header *hdr_of(const struct noc_comm *c, uint32_t rank)
{
    return &coll_headers(c)[rank];
}

int coll_ring_allgather(struct noc_comm *c, const struct coll_ring *r)
{
    struct coll_stream st;
    const uint32_t len = r->len, m = r->pos, segs = segments_of(c, r);
    const uint32_t next = r->ranks[(m + 1) % len];
    const uint64_t eb = coll_elem_bytes(r->dtype);
    const uint32_t abase = *coll_arrive_expect(c);
    coll_stream_begin(&st, c);
    for (uint32_t s = 0; s + 1 < len; s++) {
        uint32_t k = (m + len - s) % len;
        for (uint32_t t = 0; t < segs; t++) {
            uint64_t lo, n;
            segment(r, k, segs, t, &lo, &n);
            struct coll_write w = {
                .src = hdr_of(c, r->ranks[m])->buf + lo * eb,
                .dst = hdr_of(c, next)->buf + lo * eb, .bytes = n * eb,
                .dst_core = c->group.core[next],
            };
            if (s > 0) {
                w.wait = true, w.wait_sem = coll_arrive_sem(c);
                w.wait_value = abase + (s - 1) * segs + t + 1;
            }
            coll_emit_write(&st, &w);
        }
    }
    *coll_arrive_expect(c) += (len - 1) * segs;
    return coll_stream_finish(&st);
}

/* The add (or max) of step s, segment t: slot + our copy of the part received, into that
   copy. */
static void emit_add(struct coll_stream *st, const struct coll_ring *r, uint32_t q,
                     uint64_t lo, uint64_t n, uint32_t abase)
{
    struct noc_comm *c = st->c;
    struct coll_expect *ex = coll_expect_of(c);
    const uint32_t prev = r->ranks[(r->pos + r->len - 1) % r->len];
    const uint64_t eb = coll_elem_bytes(r->dtype);
    uint64_t mine = hdr_of(c, r->ranks[r->pos])->buf + lo * eb;
    uint64_t slot = coll_slot_addr(c, c->cfg.scratch, q);
    if (n == 0) { /* token: add within the token area, nothing real changes */
        mine = c->cfg.scratch + COLL_SCRATCH_TOKENS + 128;
        slot = c->cfg.scratch + COLL_SCRATCH_TOKENS + 192;
        n = 1;
    }
    struct vector_op_args v = {
        .op = r->op == NOC_REDUCE_MAX ? NPU_VECTOR_OP_MAX : NPU_VECTOR_OP_ADD,
        .x = slot, .y = mine, .out = mine, .rows = 1,
        .cols = (uint32_t)n, .ldx = (uint32_t)n, .ldy = (uint32_t)n, .ldout = (uint32_t)n,
        .x_type = r->dtype, .y_type = r->dtype, .out_type = r->dtype,
        .sync = {
            .wait = true, .wait_sem = (uint8_t)coll_arrive_sem(c),
            .wait_value = abase + q + 1,
            .signal = true, .signal_core = (uint16_t)c->group.core[r->ranks[r->pos]],
            .signal_sem = (uint8_t)coll_sem(c, COLL_SEM_VDONE), .signal_value = 1,
            .signal2 = true, .signal2_core = (uint16_t)c->group.core[prev],
            .signal2_sem = (uint8_t)coll_sem(c, COLL_SEM_CREDIT), .signal2_value = 1,
        },
    };
    vector_op_desc(coll_stream_next(st, NPU_ENGINE_VECTOR), &v);
    ex->vdone++;
}

int coll_ring_reduce_scatter(struct noc_comm *c, const struct coll_ring *r)
{
    struct coll_expect *ex = coll_expect_of(c);
    struct coll_stream st;
    const uint32_t len = r->len, m = r->pos, segs = segments_of(c, r);
    const uint32_t next = r->ranks[(m + 1) % len];
    const uint64_t eb = coll_elem_bytes(r->dtype);
    const uint32_t abase = *coll_arrive_expect(c), vbase = ex->vdone, cbase = ex->credit;
    assert((uint64_t)c->cfg.segment_bytes >= eb);
    coll_stream_begin(&st, c);
    for (uint32_t s = 0; s + 1 < len; s++) {
        uint32_t ks = (m + 2 * len - s - 1) % len, kr = (m + 2 * len - s - 2) % len;
        for (uint32_t t = 0; t < segs; t++) {
            uint32_t q = s * segs + t;
            uint64_t lo, n;
            segment(r, ks, segs, t, &lo, &n);
            struct coll_write w = {
                .src = hdr_of(c, r->ranks[m])->buf + lo * eb,
                .dst = coll_slot_addr(c, hdr_of(c, next)->scratch, q),
                .bytes = n * eb, .dst_core = c->group.core[next],
            };
            if (s > 0) { /* our add of (s - 1, t) made what we send */
                w.wait = true, w.wait_sem = coll_sem(c, COLL_SEM_VDONE);
                w.wait_value = vbase + (s - 1) * segs + t + 1;
            }
            if (q >= NOC_COMM_RECV_SLOTS) { /* the slot's previous segment has been added */
                w.wait2 = true, w.wait2_sem = coll_sem(c, COLL_SEM_CREDIT);
                w.wait2_value = cbase + q - NOC_COMM_RECV_SLOTS + 1;
            }
            coll_emit_write(&st, &w);
            segment(r, kr, segs, t, &lo, &n);
            emit_add(&st, r, q, lo, n, abase);
        }
    }
    *coll_arrive_expect(c) += (len - 1) * segs;
    ex->credit += (len - 1) * segs;
    return coll_stream_finish(&st);
}
