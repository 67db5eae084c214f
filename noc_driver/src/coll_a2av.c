/* SPDX-License-Identifier: MIT */
/*
 * All-to-all-v by buckets (noc/collective.h): the MoE dispatch and combine when the experts
 * are spread over the whole group and every rank has rows to route. Each rank multicasts its
 * per-bucket counts (keep_data: the metadata moves in performance mode too), so every rank
 * knows the [size][buckets] matrix and computes every block's place; then each sender writes
 * its block for rank q straight into q's recv buffer, starting with q = rank + 1 and going
 * round (at any moment the ranks write to different destinations). The combine is the same
 * traffic backwards, from the receivers' recv buffers into the senders' send buffers. By
 * bucket (plan.by_bucket), a receiver's buckets are contiguous: each (sender, bucket) block
 * is written on its own, so a pair with several buckets costs several writes.
 */
#include <stdio.h>
#include <string.h>

#include "coll_internal.h"
#include "npu/hal.h"

/* First bucket of rank q, and one past its last. */
static uint32_t lo_of(const struct noc_alltoallv_plan *p, uint32_t q)
{
    return p->bucket_first[q];
}

static uint32_t hi_of(const struct noc_alltoallv_plan *p, uint32_t q)
{
    return p->bucket_first[q + 1];
}

/* Elements sender i has for rank q: its counts of q's buckets. */
static uint64_t block_count(const struct noc_alltoallv_plan *p, uint32_t i, uint32_t q)
{
    uint64_t n = 0;
    for (uint32_t b = lo_of(p, q); b < hi_of(p, q); b++)
        n += p->counts[(uint64_t)i * p->buckets + b];
    return n;
}

/* Element offset of sender i's block for q: in i's send buffer, and in q's recv buffer. */
static uint64_t send_offset(const struct noc_alltoallv_plan *p, uint32_t i, uint32_t q)
{
    uint64_t off = 0;
    for (uint32_t b = 0; b < lo_of(p, q); b++)
        off += p->counts[(uint64_t)i * p->buckets + b];
    return off;
}

/* Every sender's elements of bucket b. */
static uint64_t bucket_total(const struct noc_alltoallv_plan *p, uint32_t size, uint32_t b)
{
    if (p->totals)
        return p->totals[b];
    uint64_t n = 0;
    for (uint32_t s = 0; s < size; s++)
        n += p->counts[(uint64_t)s * p->buckets + b];
    return n;
}

void noc_alltoallv_sum_totals(struct noc_alltoallv_plan *p, uint32_t size)
{
    if (!p->totals)
        return;
    for (uint32_t b = 0; b < p->buckets; b++)
        p->totals[b] = 0;
    for (uint32_t s = 0; s < size; s++) /* row by row: one pass over the matrix */
        for (uint32_t b = 0; b < p->buckets; b++)
            p->totals[b] += p->counts[(uint64_t)s * p->buckets + b];
}

/* Elements of q's buckets from every sender before sender i (by-sender layout), i.e. where
   i's block for q starts in q's recv; recv_offset(p, size, q) is q's whole receive. */
static uint64_t recv_offset(const struct noc_alltoallv_plan *p, uint32_t i, uint32_t q)
{
    uint64_t off = 0;
    for (uint32_t k = 0; k < i; k++)
        off += block_count(p, k, q);
    return off;
}

/* Owner of bucket b. */
static uint32_t owner_of(const struct noc_alltoallv_plan *p, uint32_t size, uint32_t b)
{
    uint32_t q = 0;
    while (q + 1 < size && hi_of(p, q) <= b)
        q++;
    return q;
}

/* Element offset of sender i's elements of bucket b (owned by q) in q's recv. */
static uint64_t bucket_recv_offset(const struct noc_alltoallv_plan *p, uint32_t size,
                                   uint32_t q, uint32_t i, uint32_t b)
{
    uint64_t off = 0;
    if (!p->by_bucket) {
        off = recv_offset(p, i, q);
        for (uint32_t k = lo_of(p, q); k < b; k++)
            off += p->counts[(uint64_t)i * p->buckets + k];
        return off;
    }
    for (uint32_t k = lo_of(p, q); k < b; k++) /* q's earlier buckets, every sender's */
        off += bucket_total(p, size, k);
    for (uint32_t s = 0; s < i; s++)
        off += p->counts[(uint64_t)s * p->buckets + b];
    return off;
}

uint64_t noc_alltoallv_recv_offset(const struct noc_alltoallv_plan *p, uint32_t size,
                                   uint32_t i, uint32_t b)
{
    return bucket_recv_offset(p, size, owner_of(p, size, b), i, b);
}

/* FNV-1a of the bucket map: the ranks' maps must agree (the header's root). */
static uint32_t map_hash(const uint32_t *first, uint32_t size)
{
    uint32_t h = 2166136261u;
    for (uint32_t q = 0; q <= size; q++)
        h = (h ^ first[q]) * 16777619u;
    return h;
}

static bool map_ok(const struct noc_alltoallv_plan *p, uint32_t size)
{
    if (!p->bucket_first || p->bucket_first[0] != 0 || p->bucket_first[size] != p->buckets)
        return false;
    for (uint32_t q = 0; q < size; q++)
        if (p->bucket_first[q] > p->bucket_first[q + 1])
            return false;
    return true;
}

/* The header with this rank's local checks. */
static void a2av_header(const struct noc_comm *c, struct coll_header *h, enum coll_kind kind,
                        const struct noc_alltoallv_args *a, const struct noc_alltoallv_plan *p)
{
    const uint32_t size = c->group.size;
    const uint64_t eb = coll_elem_bytes(a->dtype);
    coll_header_init(c, h, kind);
    h->dtype = (uint8_t)a->dtype;
    h->count = p->buckets;
    h->buf = a->send;
    h->buf2 = a->recv;
    h->capacity = a->recv_capacity > UINT32_MAX ? UINT32_MAX : (uint32_t)a->recv_capacity;
    if (p->buckets == 0 || !map_ok(p, size) ||
        (a->dtype != NPU_DTYPE_BF16 && a->dtype != NPU_DTYPE_FP32)) {
        h->fault = COLL_BAD_ARGS;
        return;
    }
    h->root = map_hash(p->bucket_first, size) ^ (p->by_bucket ? 0x9e3779b9u : 0u);
    if ((uint64_t)size * p->buckets > noc_m2n_pairs(hal_chip()->ncores) ||
        p->capacity < (uint64_t)size * p->buckets) {
        h->fault = COLL_BAD_COUNTS;
        return;
    }
    uint64_t sent = 0;
    if (kind == COLL_A2AV_DISPATCH) {
        if (!a->counts ||
            coll_check_buffer(c, (uint64_t)(uintptr_t)a->counts, p->buckets, 4) != COLL_OK) {
            h->fault = COLL_BAD_ARGS;
            return;
        }
        for (uint32_t b = 0; b < p->buckets; b++)
            sent += a->counts[b];
    } else { /* the plan dispatch filled: what this rank sent, and now gets back */
        sent = send_offset(p, c->rank, size);
    }
    h->fault = (uint8_t)coll_check_buffer(c, a->send, sent, eb);
    if (h->fault == COLL_OK)
        h->fault = (uint8_t)coll_check_buffer(c, a->recv, a->recv_capacity, eb);
}

/* Every rank's total fits its recv_capacity? (Judged alike on every rank.) */
static int a2av_check_capacity(const struct noc_comm *c, const struct noc_alltoallv_plan *p)
{
    const struct coll_header *h = coll_headers(c);
    for (uint32_t q = 0; q < c->group.size; q++) {
        uint64_t total = 0;
        for (uint32_t b = lo_of(p, q); b < hi_of(p, q); b++)
            total += bucket_total(p, c->group.size, b);
        if (total > h[q].capacity) {
            printf("noc: rank %u: alltoallv_dispatch #%u refused: rank %u receives %llu "
                   "elements, more than its recv_capacity %u\n", (unsigned)c->rank,
                   (unsigned)c->seq, (unsigned)q, (unsigned long long)total,
                   (unsigned)h[q].capacity);
            return NPU_ERR_INVAL;
        }
    }
    return NPU_OK;
}

/* Segments that arrive for the blocks sender i writes to q (dispatch), or q sends back to i
   (combine): one block per (i, q), or per (i, bucket) by bucket. */
static uint32_t pair_segments(const struct noc_comm *c, const struct noc_alltoallv_plan *p,
                              uint32_t i, uint32_t q, uint64_t eb)
{
    if (!p->by_bucket)
        return coll_segments(c, block_count(p, i, q) * eb);
    uint32_t n = 0;
    for (uint32_t b = lo_of(p, q); b < hi_of(p, q); b++)
        n += coll_segments(c, p->counts[(uint64_t)i * p->buckets + b] * eb);
    return n;
}

/* The blocks between sender i's send buffer (at `send`; i's block for q at element soff)
   and q's recv (at `recv`), in the dispatch's direction or back. */
static void emit_pair(struct coll_stream *st, const struct noc_alltoallv_plan *p, uint32_t i,
                      uint32_t q, bool combine, uint64_t send, uint64_t soff, uint64_t recv,
                      uint64_t eb, uint32_t dst_core)
{
    const uint32_t size = st->c->group.size;
    if (!p->by_bucket) {
        uint64_t s = send + soff * eb, r = recv + recv_offset(p, i, q) * eb;
        coll_emit_block(st, combine ? r : s, combine ? s : r, block_count(p, i, q) * eb,
                        dst_core);
        return;
    }
    uint64_t s = send + soff * eb;
    for (uint32_t b = lo_of(p, q); b < hi_of(p, q); b++) {
        uint64_t n = p->counts[(uint64_t)i * p->buckets + b] * eb;
        uint64_t r = recv + bucket_recv_offset(p, size, q, i, b) * eb;
        if (n)
            coll_emit_block(st, combine ? r : s, combine ? s : r, n, dst_core);
        s += n;
    }
}

/* Dispatch: this rank's blocks for every q, into q's recv. Combine: every sender's blocks in
   this rank's recv, back into the sender's send buffer. */
static int a2av_move(struct noc_comm *c, const struct noc_alltoallv_plan *p, bool combine,
                     enum npu_dtype dt)
{
    const struct coll_header *h = coll_headers(c);
    const uint32_t size = c->group.size, me = c->rank;
    const uint64_t eb = coll_elem_bytes(dt);
    struct coll_stream st;
    uint32_t arrivals = 0;
    /* dispatch: this rank's block for q starts where its blocks for the ranks before q end,
       kept as the loop goes round (one pass over this rank's row, not one per q) */
    uint64_t mine = combine ? 0 : send_offset(p, me, (me + 1) % size);
    coll_stream_begin(&st, c);
    for (uint32_t s = 1; s <= size; s++) {
        uint32_t q = (me + s) % size; /* ... and this rank itself last */
        if (q == 0)
            mine = 0;
        if (!combine)
            emit_pair(&st, p, me, q, false, h[me].buf, mine, h[q].buf2, eb, c->group.core[q]);
        else
            emit_pair(&st, p, q, me, true, h[q].buf, send_offset(p, q, me), h[me].buf2, eb,
                      c->group.core[q]);
        if (!combine)
            mine += block_count(p, me, q);
        arrivals += combine ? pair_segments(c, p, me, q, eb) : pair_segments(c, p, q, me, eb);
    }
    *coll_arrive_expect(c) += arrivals;
    return coll_stream_finish(&st);
}

int noc_alltoallv_dispatch(struct noc_comm *c, const struct noc_alltoallv_args *a,
                           struct noc_alltoallv_plan *plan)
{
    struct coll_header h;
    a2av_header(c, &h, COLL_A2AV_DISPATCH, a, plan);
    int rc = coll_agree(c, &h);
    if (rc != NPU_OK)
        return rc;
    rc = coll_exchange_counts(c, a->counts, plan->buckets, c->group.size);
    if (rc == NPU_OK) {
        memcpy(plan->counts, coll_counts_area(c),
               (size_t)c->group.size * plan->buckets * sizeof(uint32_t));
        noc_alltoallv_sum_totals(plan, c->group.size);
        rc = a2av_check_capacity(c, plan);
    }
    if (rc == NPU_OK)
        rc = a2av_move(c, plan, false, a->dtype);
    coll_done(c);
    return rc;
}

int noc_alltoallv_combine(struct noc_comm *c, const struct noc_alltoallv_args *a,
                          const struct noc_alltoallv_plan *plan)
{
    struct coll_header h;
    a2av_header(c, &h, COLL_A2AV_COMBINE, a, plan);
    int rc = coll_agree(c, &h);
    if (rc != NPU_OK)
        return rc;
    rc = a2av_move(c, plan, true, a->dtype);
    coll_done(c);
    return rc;
}
