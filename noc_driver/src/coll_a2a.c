/* SPDX-License-Identifier: MIT */
/*
 * All-to-all and M2N dispatch/combine (noc/collective.h): direct writes from every sender to
 * every receiver, in segments. Rank r starts with rank r + 1 and goes round, so at any moment
 * the ranks write to different destinations.
 */
#include <stdio.h>
#include <string.h>

#include "coll_internal.h"
#include "npu/hal.h"
#include "npu/noc_endpoint.h"
#include "npu/wait.h"

uint32_t coll_segments(const struct noc_comm *c, uint64_t bytes)
{
    return (uint32_t)((bytes + c->cfg.segment_bytes - 1) / c->cfg.segment_bytes);
}

void coll_emit_block(struct coll_stream *st, uint64_t src, uint64_t dst, uint64_t bytes,
                     uint32_t dst_core)
{
    const uint64_t seg = st->c->cfg.segment_bytes;
    for (uint64_t off = 0; off < bytes; off += seg) {
        struct coll_write w = { .src = src + off, .dst = dst + off,
                                .bytes = bytes - off < seg ? bytes - off : seg,
                                .dst_core = dst_core };
        coll_emit_write(st, &w);
    }
}

static int alltoall_body(struct noc_comm *c, uint64_t block_bytes)
{
    const struct coll_header *h = coll_headers(c);
    const uint32_t size = c->group.size;
    struct coll_stream st;
    coll_stream_begin(&st, c);
    for (uint32_t s = 0; s < size; s++) {
        uint32_t q = (c->rank + 1 + s) % size; /* ... and our own block last */
        coll_emit_block(&st, h[c->rank].buf + q * block_bytes,
                        h[q].buf2 + c->rank * block_bytes, block_bytes, c->group.core[q]);
    }
    *coll_arrive_expect(c) += size * coll_segments(c, block_bytes);
    return coll_stream_finish(&st);
}

int noc_alltoall(struct noc_comm *c, const struct noc_alltoall_args *a)
{
    struct coll_header h;
    coll_header_init(c, &h, COLL_ALLTOALL);
    h.count = a->count;
    h.dtype = (uint8_t)a->dtype;
    h.buf = a->buf;
    h.buf2 = a->recv;
    const uint64_t eb = coll_elem_bytes(a->dtype);
    if ((a->dtype != NPU_DTYPE_BF16 && a->dtype != NPU_DTYPE_FP32) || a->count == 0 ||
        a->count > COLL_COUNT_MAX)
        h.fault = COLL_BAD_ARGS;
    else if (coll_check_buffer(c, a->buf, a->count * c->group.size, eb) ||
             coll_check_buffer(c, a->recv, a->count * c->group.size, eb))
        h.fault = COLL_BAD_BUFFER;
    int rc = coll_agree(c, &h);
    if (rc != NPU_OK)
        return rc;
    rc = alltoall_body(c, a->count * coll_elem_bytes(a->dtype));
    coll_done(c);
    return rc;
}

/* ---- M2N ---- */

/* Elements sender i moves (its row of counts), or receiver j (its column). */
static uint64_t row_total(const uint32_t *row, uint32_t n)
{
    uint64_t total = 0;
    for (uint32_t j = 0; j < n; j++)
        total += row[j];
    return total;
}

static uint64_t column_total(const struct noc_m2n_plan *p, uint32_t j)
{
    uint64_t total = 0;
    for (uint32_t i = 0; i < p->senders; i++)
        total += p->counts[i * p->receivers + j];
    return total;
}

/* A sender's checks: its counts (dispatch: the caller's row, in its SRAM; combine: the
   plan's row) and the buffer they fill. */
static enum coll_fault m2n_check_sender(const struct noc_comm *c, bool combine,
                                        const struct noc_m2n_args *a,
                                        const struct noc_m2n_plan *plan)
{
    const uint32_t n = c->group.size - a->senders;
    const uint64_t eb = coll_elem_bytes(a->dtype);
    const uint32_t *row = combine ? plan->counts + (uint64_t)c->rank * n : a->counts;
    if (!combine && (!row || coll_check_buffer(c, (uint64_t)(uintptr_t)row, n, 4)))
        return COLL_BAD_ARGS;
    return coll_check_buffer(c, combine ? a->recv : a->send, row_total(row, n), eb);
}

/* The header of an M2N call with this rank's local checks. */
static void m2n_header(const struct noc_comm *c, struct coll_header *h, enum coll_kind kind,
                       const struct noc_m2n_args *a, const struct noc_m2n_plan *plan)
{
    const bool combine = kind == COLL_M2N_COMBINE;
    coll_header_init(c, h, kind);
    h->dtype = (uint8_t)a->dtype;
    h->root = a->senders;
    h->buf = a->send;
    h->buf2 = a->recv;
    h->capacity = a->recv_capacity > UINT32_MAX ? UINT32_MAX : (uint32_t)a->recv_capacity;
    if (a->senders == 0 || a->senders >= c->group.size ||
        (a->dtype != NPU_DTYPE_BF16 && a->dtype != NPU_DTYPE_FP32)) {
        h->fault = COLL_BAD_ARGS;
        return;
    }
    const uint32_t n = c->group.size - a->senders;
    if ((uint64_t)a->senders * n > noc_m2n_pairs(hal_chip()->ncores) ||
        plan->capacity < a->senders * n ||
        (combine && (plan->senders != a->senders || plan->receivers != n))) {
        h->fault = COLL_BAD_COUNTS;
        return;
    }
    if (c->rank < a->senders)
        h->fault = (uint8_t)m2n_check_sender(c, combine, a, plan);
    else if (combine) /* sends back what dispatch put in recv */
        h->fault = (uint8_t)coll_check_buffer(c, a->recv,
                                              column_total(plan, c->rank - a->senders),
                                              coll_elem_bytes(a->dtype));
    else
        h->fault = (uint8_t)coll_check_buffer(c, a->recv, h->capacity,
                                              coll_elem_bytes(a->dtype));
}

int coll_exchange_counts(struct noc_comm *c, const uint32_t *row, uint32_t entries,
                         uint32_t rows)
{
    struct coll_expect *ex = coll_expect_of(c);
    if (row) {
        static struct npu_desc d[2];
        const uint32_t bytes = entries * (uint32_t)sizeof(uint32_t);
        struct noc_multicast_args mc = {
            .src = (uint64_t)(uintptr_t)row,
            .dst_offset = coll_counts_offset(c) + (uint64_t)c->rank * bytes,
            .rows = 1, .row_bytes = bytes, .src_stride = bytes, .dst_stride = bytes,
            .sync = { .signal = true, .signal_sem = (uint8_t)coll_sem(c, COLL_SEM_COUNTS),
                      .signal_value = 1, .keep_data = true }, /* performance mode too */
        };
        int rc = coll_multicast_group(c, &mc, d);
        if (rc != NPU_OK) {
            coll_break(c); /* the others wait for a row that will not come */
            return rc;
        }
    }
    ex->counts += rows;
    int rc = hal_sem_wait_until(coll_sem(c, COLL_SEM_COUNTS), ex->counts,
                                hal_time_ps() + c->cfg.timeout_ps);
    if (rc != NPU_OK && !c->cfg.quiet)
        printf("noc: rank %u: call #%u: count rows missing after %llu ns\n",
               (unsigned)c->rank, (unsigned)c->seq,
               (unsigned long long)(c->cfg.timeout_ps / 1000));
    if (rc != NPU_OK)
        coll_break(c); /* COUNTS is out of step on this core now */
    return rc;
}

/* Element offset, in receiver j's buffer, of the block from sender i. */
static uint64_t recv_offset(const struct noc_m2n_plan *p, uint32_t i, uint32_t j)
{
    uint64_t off = 0;
    for (uint32_t k = 0; k < i; k++)
        off += p->counts[k * p->receivers + j];
    return off;
}

/* Element offset, in sender i's buffer, of its block for receiver j. */
static uint64_t send_offset(const struct noc_m2n_plan *p, uint32_t i, uint32_t j)
{
    uint64_t off = 0;
    for (uint32_t k = 0; k < j; k++)
        off += p->counts[i * p->receivers + k];
    return off;
}

/* Every receiver's total fits its capacity? (Judged alike on every rank.) */
static int m2n_check_capacity(const struct noc_comm *c, const struct noc_m2n_plan *p)
{
    const struct coll_header *h = coll_headers(c);
    for (uint32_t j = 0; j < p->receivers; j++) {
        uint64_t total = recv_offset(p, p->senders, j);
        if (total > h[p->senders + j].capacity) {
            if (!c->cfg.quiet)
                printf("noc: rank %u: m2n_dispatch #%u refused: rank %u receives %llu "
                       "elements, more than its recv_capacity %u\n", (unsigned)c->rank,
                       (unsigned)c->seq, (unsigned)(p->senders + j), (unsigned long long)total,
                       (unsigned)h[p->senders + j].capacity);
            return NPU_ERR_INVAL;
        }
    }
    return NPU_OK;
}

/* Dispatch: sender i writes its block for each receiver j, starting with j = i mod N. */
static void m2n_emit_dispatch(struct coll_stream *st, const struct noc_m2n_plan *p,
                              uint64_t eb)
{
    const struct noc_comm *c = st->c;
    const struct coll_header *h = coll_headers(c);
    const uint32_t m = p->senders, n = p->receivers, i = c->rank;
    for (uint32_t s = 0; s < n; s++) {
        uint32_t j = (i + s) % n;
        coll_emit_block(st, h[i].buf + send_offset(p, i, j) * eb,
                        h[m + j].buf2 + recv_offset(p, i, j) * eb, p->counts[i * n + j] * eb,
                        c->group.core[m + j]);
    }
}

/* Combine: receiver j writes each sender's block back, starting with i = j mod M. */
static void m2n_emit_combine(struct coll_stream *st, const struct noc_m2n_plan *p,
                             uint64_t eb)
{
    const struct noc_comm *c = st->c;
    const struct coll_header *h = coll_headers(c);
    const uint32_t m = p->senders, n = p->receivers, j = c->rank - m;
    for (uint32_t s = 0; s < m; s++) {
        uint32_t i = (j + s) % m;
        coll_emit_block(st, h[m + j].buf2 + recv_offset(p, i, j) * eb,
                        h[i].buf2 + send_offset(p, i, j) * eb, p->counts[i * n + j] * eb,
                        c->group.core[i]);
    }
}

/* Segments that land on this rank: dispatch on receivers, combine on senders. */
static uint32_t m2n_arrivals(const struct noc_comm *c, const struct noc_m2n_plan *p,
                             bool combine, uint64_t eb)
{
    const uint32_t m = p->senders, n = p->receivers;
    uint32_t segs = 0;
    if (!combine && c->rank >= m)
        for (uint32_t i = 0; i < m; i++)
            segs += coll_segments(c, p->counts[i * n + c->rank - m] * eb);
    if (combine && c->rank < m)
        for (uint32_t j = 0; j < n; j++)
            segs += coll_segments(c, p->counts[c->rank * n + j] * eb);
    return segs;
}

static int m2n_move(struct noc_comm *c, const struct noc_m2n_plan *p, bool combine,
                    enum npu_dtype dt)
{
    const uint64_t eb = coll_elem_bytes(dt);
    struct coll_stream st;
    coll_stream_begin(&st, c);
    if (!combine && c->rank < p->senders)
        m2n_emit_dispatch(&st, p, eb);
    if (combine && c->rank >= p->senders)
        m2n_emit_combine(&st, p, eb);
    *coll_arrive_expect(c) += m2n_arrivals(c, p, combine, eb);
    return coll_stream_finish(&st);
}

int noc_m2n_dispatch(struct noc_comm *c, const struct noc_m2n_args *a,
                     struct noc_m2n_plan *plan)
{
    struct coll_header h;
    m2n_header(c, &h, COLL_M2N_DISPATCH, a, plan);
    int rc = coll_agree(c, &h);
    if (rc != NPU_OK)
        return rc;
    rc = coll_exchange_counts(c, c->rank < a->senders ? a->counts : NULL,
                              c->group.size - a->senders, a->senders);
    if (rc == NPU_OK) {
        plan->senders = a->senders;
        plan->receivers = c->group.size - a->senders;
        memcpy(plan->counts, coll_counts_area(c),
               (size_t)plan->senders * plan->receivers * sizeof(uint32_t));
        rc = m2n_check_capacity(c, plan);
    }
    if (rc == NPU_OK)
        rc = m2n_move(c, plan, false, a->dtype);
    coll_done(c);
    return rc;
}

int noc_m2n_combine(struct noc_comm *c, const struct noc_m2n_args *a,
                    const struct noc_m2n_plan *plan)
{
    struct coll_header h;
    m2n_header(c, &h, COLL_M2N_COMBINE, a, plan);
    int rc = coll_agree(c, &h);
    if (rc != NPU_OK)
        return rc;
    rc = m2n_move(c, plan, true, a->dtype);
    coll_done(c);
    return rc;
}
