/* SPDX-License-Identifier: MIT */
/*
 * All-to-all-v by buckets (noc/collective.h): the MoE dispatch and combine when the experts
 * are spread over the whole group and every rank has rows to route.
 *
 * The counts go first, in two rounds of small writes (keep_data: the metadata moves in
 * performance mode too), so that a rank learns only what it needs, linear in the group's
 * size (the whole [size][buckets] matrix, all-gathered as before, did not fit the mailbox
 * of 256 ranks x 128 experts):
 *   round 1: every sender writes each owner its counts of the owner's buckets, with where
 *            each sits in its send buffer;
 *   round 2: every owner, now holding its buckets' columns, writes each sender where its
 *            elements of each bucket land in the owner's recv, with every bucket's total.
 * Then each sender writes its blocks straight into the owners' recv buffers, starting with
 * q = rank + 1 and going round (at any moment the ranks write to different destinations).
 * The combine is the same traffic backwards. By bucket (plan.by_bucket), each (sender,
 * bucket) block is written on its own, so a pair with several buckets costs several writes.
 * Each round is a phase of its own: a fast owner's round-2 write may land before a slow
 * sender's round-1 write, and the phases count arrivals on different semaphores.
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "coll_internal.h"
#include "noc/noc.h"
#include "npu/hal.h"

/*
 * The plan's words (noc_a2av_plan_words), P ranks, B buckets, this rank owning nb:
 *   [0, 4)               P, this rank, B, nb;
 *   mine [B][2]          this rank as sender: each bucket's count and its offset in send;
 *   land [B][2]          each bucket: where this rank's elements land in the owner's recv,
 *                        and every sender's total;
 *   col  [P][nb][2]      this rank as owner: sender s's count of its j-th bucket and where
 *                        it sits in s's send;
 *   back [P][nb][2]      where s's elements of the j-th bucket sit in this rank's recv, and
 *                        the bucket's total (round 2's messages).
 * The mailbox: round 2 lands at words [0, 2B) (land's layout), round 1 at [2B, 2B + 2 P nb)
 * (col's layout).
 */
enum { W_SIZE, W_RANK, W_BUCKETS, W_OWNED, W_HEAD };
#define W_BY_BUCKET 0x80000000u /* in W_OWNED: the layout the dispatch used */

struct a2av_view {
    uint32_t P, me, B, lo, nb;
    uint32_t *mine, *land, *col, *back;
};

static void view_of(const struct noc_alltoallv_plan *p, struct a2av_view *v)
{
    uint32_t *w = p->words;
    v->P = w[W_SIZE], v->me = w[W_RANK], v->B = w[W_BUCKETS], v->nb = w[W_OWNED] & ~W_BY_BUCKET;
    v->lo = p->bucket_first[v->me];
    v->mine = w + W_HEAD, v->land = v->mine + 2 * v->B, v->col = v->land + 2 * v->B;
    v->back = v->col + 2ull * v->P * v->nb;
}

static uint32_t lo_of(const struct noc_alltoallv_plan *p, uint32_t q)
{
    return p->bucket_first[q];
}

static uint32_t owned(const struct noc_alltoallv_plan *p, uint32_t q)
{
    return p->bucket_first[q + 1] - p->bucket_first[q];
}

static uint32_t owned_max(const struct noc_alltoallv_plan *p, uint32_t size)
{
    uint32_t most = 0;
    for (uint32_t q = 0; q < size; q++)
        most = owned(p, q) > most ? owned(p, q) : most;
    return most;
}

uint64_t noc_alltoallv_total(const struct noc_alltoallv_plan *p, uint32_t b)
{
    struct a2av_view v;
    view_of(p, &v);
    assert(b < v.B);
    return v.land[2 * b + 1];
}

uint32_t noc_alltoallv_count(const struct noc_alltoallv_plan *p, uint32_t i, uint32_t b)
{
    struct a2av_view v;
    view_of(p, &v);
    assert(i < v.P && b >= v.lo && b < v.lo + v.nb && "one of this rank's buckets");
    return v.col[2 * ((uint64_t)i * v.nb + b - v.lo)];
}

uint64_t noc_alltoallv_recv_offset(const struct noc_alltoallv_plan *p, uint32_t i, uint32_t b)
{
    struct a2av_view v;
    view_of(p, &v);
    assert(i < v.P && b >= v.lo && b < v.lo + v.nb && "one of this rank's buckets");
    return v.back[2 * ((uint64_t)i * v.nb + b - v.lo)];
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

/* The counts the plan's storage and the mailbox must hold. */
static bool room_ok(const struct noc_comm *c, const struct noc_alltoallv_plan *p)
{
    const uint32_t size = c->group.size, most = owned_max(p, size);
    return p->words &&
           noc_a2av_mailbox_words(size, p->buckets, most) <= noc_m2n_pairs(hal_chip()->ncores) &&
           p->capacity >= noc_a2av_plan_words(size, p->buckets, most);
}

/* This rank's elements in its send buffer: from the caller's counts (dispatch), or from the
   plan the dispatch filled (combine; COLL_BAD_COUNTS if it is another rank's or group's,
   or the dispatch used the other layout). */
static enum coll_fault sent_elems(const struct noc_comm *c, enum coll_kind kind,
                                  const struct noc_alltoallv_args *a,
                                  const struct noc_alltoallv_plan *p, uint64_t *sent)
{
    *sent = 0;
    if (kind == COLL_A2AV_DISPATCH) {
        if (!a->counts ||
            coll_check_buffer(c, (uint64_t)(uintptr_t)a->counts, p->buckets, 4) != COLL_OK)
            return COLL_BAD_ARGS;
        for (uint32_t b = 0; b < p->buckets; b++)
            *sent += a->counts[b];
        return COLL_OK;
    }
    const uint32_t *w = p->words;
    if (w[W_SIZE] != c->group.size || w[W_RANK] != c->rank || w[W_BUCKETS] != p->buckets ||
        w[W_OWNED] != (owned(p, c->rank) | (p->by_bucket ? W_BY_BUCKET : 0)))
        return COLL_BAD_COUNTS;
    for (uint32_t b = 0; b < p->buckets; b++)
        *sent += w[W_HEAD + 2 * b];
    return COLL_OK;
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
    if (!room_ok(c, p)) {
        h->fault = COLL_BAD_COUNTS;
        return;
    }
    if (coll_check_buffer(c, (uint64_t)(uintptr_t)p->words, p->capacity, 4) != COLL_OK) {
        h->fault = COLL_BAD_ARGS; /* the plan's words: the round-1 writes' source */
        return;
    }
    uint64_t sent;
    h->fault = (uint8_t)sent_elems(c, kind, a, p, &sent);
    if (h->fault == COLL_OK)
        h->fault = (uint8_t)coll_check_buffer(c, a->send, sent, eb);
    if (h->fault == COLL_OK)
        h->fault = (uint8_t)coll_check_buffer(c, a->recv, a->recv_capacity, eb);
}

/* A metadata write of `words` words from this core into core q's mailbox at word `at`. */
static void emit_counts(struct coll_stream *st, const uint32_t *src, uint64_t words,
                        uint32_t q, uint64_t at)
{
    struct noc_comm *c = st->c;
    struct coll_write w = {
        .src = (uint64_t)(uintptr_t)src,
        .dst = noc_sram_addr(c->group.core[q], coll_counts_offset(c) + at * 4),
        .bytes = words * 4, .dst_core = c->group.core[q], .keep_data = true,
    };
    coll_emit_write(st, &w);
}

/* Round 1: this rank's counts and send offsets (mine) to every owner, into its col. */
static int round_counts(struct noc_comm *c, const struct noc_alltoallv_plan *p,
                        const struct noc_alltoallv_args *a, struct a2av_view *v)
{
    uint64_t off = 0;
    for (uint32_t b = 0; b < v->B; b++) {
        v->mine[2 * b] = a->counts[b], v->mine[2 * b + 1] = (uint32_t)off;
        off += a->counts[b];
    }
    struct coll_stream st;
    coll_stream_begin(&st, c);
    for (uint32_t s = 1; s <= v->P; s++) {
        const uint32_t q = (v->me + s) % v->P, n = owned(p, q);
        if (n)
            emit_counts(&st, v->mine + 2 * lo_of(p, q), 2ull * n, q,
                        2ull * v->B + 2ull * v->me * n);
    }
    *coll_arrive_expect(c) += v->nb ? v->P : 0;
    int rc = coll_stream_finish(&st);
    if (rc == NPU_OK)
        memcpy(v->col, coll_counts_area(c) + 2 * v->B, 8ull * v->P * v->nb);
    return rc;
}

/* A total as a word, saturated at UINT32_MAX: a recv_capacity lies in SRAM's elements,
   below that, so the capacity check still refuses a saturated total. Offsets below a total
   that fits fit too. */
static uint32_t saturate(uint64_t n)
{
    return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

/* Round 2's messages: where each sender's elements of this rank's buckets land, and the
   buckets' totals. */
static void fill_back(const struct noc_alltoallv_plan *p, struct a2av_view *v)
{
    uint64_t base = 0; /* by bucket: the buckets before j; by sender: the senders before s */
    for (uint32_t j = 0; p->by_bucket && j < v->nb; j++) {
        uint64_t at = base;
        for (uint32_t s = 0; s < v->P; s++) {
            v->back[2 * ((uint64_t)s * v->nb + j)] = (uint32_t)at;
            at += v->col[2 * ((uint64_t)s * v->nb + j)];
        }
        for (uint32_t s = 0; s < v->P; s++)
            v->back[2 * ((uint64_t)s * v->nb + j) + 1] = saturate(at - base);
        base = at;
    }
    for (uint32_t s = 0; !p->by_bucket && s < v->P; s++)
        for (uint32_t j = 0; j < v->nb; j++) {
            v->back[2 * ((uint64_t)s * v->nb + j)] = (uint32_t)base;
            base += v->col[2 * ((uint64_t)s * v->nb + j)];
        }
    for (uint32_t j = 0; !p->by_bucket && j < v->nb; j++) {
        uint64_t total = 0;
        for (uint32_t s = 0; s < v->P; s++)
            total += v->col[2 * ((uint64_t)s * v->nb + j)];
        for (uint32_t s = 0; s < v->P; s++)
            v->back[2 * ((uint64_t)s * v->nb + j) + 1] = saturate(total);
    }
}

/* Round 2: every sender gets, from each owner, its land entries of the owner's buckets. */
static int round_offsets(struct noc_comm *c, const struct noc_alltoallv_plan *p,
                         struct a2av_view *v)
{
    fill_back(p, v);
    struct coll_stream st;
    coll_stream_begin(&st, c);
    for (uint32_t s = 1; v->nb && s <= v->P; s++) {
        const uint32_t q = (v->me + s) % v->P;
        emit_counts(&st, v->back + 2ull * q * v->nb, 2ull * v->nb, q, 2ull * v->lo);
    }
    uint32_t owners = 0;
    for (uint32_t q = 0; q < v->P; q++)
        owners += owned(p, q) > 0;
    *coll_arrive_expect(c) += owners;
    int rc = coll_stream_finish(&st);
    if (rc == NPU_OK)
        memcpy(v->land, coll_counts_area(c), 8ull * v->B);
    return rc;
}

/* Every rank's total fits its recv_capacity? (Judged alike on every rank: all know every
   bucket's total.) */
static int a2av_check_capacity(const struct noc_comm *c, const struct noc_alltoallv_plan *p,
                               const struct a2av_view *v)
{
    const struct coll_header *h = coll_headers(c);
    for (uint32_t q = 0; q < v->P; q++) {
        uint64_t total = 0;
        for (uint32_t b = lo_of(p, q); b < lo_of(p, q) + owned(p, q); b++)
            total += v->land[2 * b + 1];
        if (total > h[q].capacity) {
            if (!c->cfg.quiet)
                printf("noc: rank %u: alltoallv_dispatch #%u refused: rank %u receives %llu "
                       "elements, more than its recv_capacity %u\n", (unsigned)c->rank,
                       (unsigned)c->seq, (unsigned)q, (unsigned long long)total,
                       (unsigned)h[q].capacity);
            return NPU_ERR_INVAL;
        }
    }
    return NPU_OK;
}

/* Segments that arrive for sender i's elements of this rank's buckets (dispatch). */
static uint32_t owner_segments(const struct noc_comm *c, const struct noc_alltoallv_plan *p,
                               const struct a2av_view *v, uint32_t i, uint64_t eb)
{
    const uint32_t *col = v->col + 2ull * i * v->nb;
    uint64_t block = 0;
    uint32_t n = 0;
    for (uint32_t j = 0; j < v->nb; j++) {
        n += coll_segments(c, col[2 * j] * eb);
        block += col[2 * j];
    }
    return p->by_bucket ? n : coll_segments(c, block * eb);
}

/* Segments that arrive back from owner q (combine): this rank's elements of q's buckets. */
static uint32_t sender_segments(const struct noc_comm *c, const struct noc_alltoallv_plan *p,
                                const struct a2av_view *v, uint32_t q, uint64_t eb)
{
    uint64_t block = 0;
    uint32_t n = 0;
    for (uint32_t b = lo_of(p, q); b < lo_of(p, q) + owned(p, q); b++) {
        n += coll_segments(c, v->mine[2 * b] * eb);
        block += v->mine[2 * b];
    }
    return p->by_bucket ? n : coll_segments(c, block * eb);
}

/* One direction of the blocks between a sender's send buffer and an owner's recv: `n`
   buckets whose (count, send offset) pairs are at `cs` and (recv offset, total) pairs at
   `rt`. By sender, the pair's buckets are one contiguous block on both sides. */
static void emit_blocks(struct coll_stream *st, bool by_bucket, bool combine, uint32_t n,
                        const uint32_t *cs, const uint32_t *rt, uint64_t send, uint64_t recv,
                        uint64_t eb, uint32_t dst_core)
{
    uint64_t block = 0;
    for (uint32_t j = 0; j < n; j++) {
        const uint64_t bytes = (uint64_t)cs[2 * j] * eb;
        const uint64_t s = send + (uint64_t)cs[2 * j + 1] * eb, r = recv + (uint64_t)rt[2 * j] * eb;
        if (by_bucket && bytes)
            coll_emit_block(st, combine ? r : s, combine ? s : r, bytes, dst_core);
        block += bytes;
    }
    if (!by_bucket && n && block) {
        const uint64_t s = send + (uint64_t)cs[1] * eb, r = recv + (uint64_t)rt[0] * eb;
        coll_emit_block(st, combine ? r : s, combine ? s : r, block, dst_core);
    }
}

/* The first rank this rank writes its blocks to, the others following in rank order
   (round): dispatch, the (me + 1)-th owner (mod their number), skipping the ranks that own
   nothing; combine, rank o + 1, o this rank's place among the owners. Where every rank owns buckets (expert parallelism) both
   are me + 1, me + 2, ..., me last. Where only some do (M2N-shaped: senders that own none),
   each sender starts at another owner, and each owner at another sender, instead of every
   one at the same (measured, `npuctl bench m2n`: the senders of 8 x 8 all writing to one
   receiver first made the exchange 3x slower). */
static uint32_t first_write(const struct noc_alltoallv_plan *p, const struct a2av_view *v,
                            bool combine)
{
    uint32_t no = 0, mine = 0;
    for (uint32_t q = 0; q < v->P; q++) {
        mine = q == v->me ? no : mine;
        no += owned(p, q) > 0;
    }
    if (combine)
        return (mine + 1) % v->P;
    const uint32_t want = no ? (v->me + 1) % no : 0; /* the want-th owner in rank order */
    for (uint32_t q = 0, k = 0; q < v->P; q++)
        if (owned(p, q) && k++ == want)
            return q;
    return 0; /* no owner: nothing to write */
}

/* Dispatch: this rank's blocks for every owner q, into q's recv. Combine: every sender's
   blocks in this rank's recv, back into the sender's send buffer. */
static int a2av_move(struct noc_comm *c, const struct noc_alltoallv_plan *p,
                     const struct a2av_view *v, bool combine, enum npu_dtype dt)
{
    const struct coll_header *h = coll_headers(c);
    const uint64_t eb = coll_elem_bytes(dt);
    const uint32_t first = first_write(p, v, combine);
    struct coll_stream st;
    uint32_t arrivals = 0;
    coll_stream_begin(&st, c);
    for (uint32_t k = 0; k < v->P; k++) {
        const uint32_t q = (first + k) % v->P, core = c->group.core[q];
        if (!combine) { /* an owner of nothing gets nothing */
            const uint32_t b = lo_of(p, q);
            emit_blocks(&st, p->by_bucket, false, owned(p, q), v->mine + 2 * b,
                        v->land + 2 * b, h[v->me].buf, h[q].buf2, eb, core);
        } else {
            const uint64_t at = 2ull * q * v->nb;
            emit_blocks(&st, p->by_bucket, true, v->nb, v->col + at, v->back + at, h[q].buf,
                        h[v->me].buf2, eb, core);
        }
    }
    for (uint32_t q = 0; q < v->P; q++)
        arrivals += combine ? sender_segments(c, p, v, q, eb) : owner_segments(c, p, v, q, eb);
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
    uint32_t *w = plan->words;
    w[W_SIZE] = c->group.size, w[W_RANK] = c->rank, w[W_BUCKETS] = plan->buckets;
    w[W_OWNED] = owned(plan, c->rank) | (plan->by_bucket ? W_BY_BUCKET : 0);
    struct a2av_view v;
    view_of(plan, &v);
    rc = round_counts(c, plan, a, &v);
    if (rc == NPU_OK)
        rc = round_offsets(c, plan, &v);
    if (rc == NPU_OK)
        rc = a2av_check_capacity(c, plan, &v);
    if (rc == NPU_OK)
        rc = a2av_move(c, plan, &v, false, a->dtype);
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
    struct a2av_view v;
    view_of(plan, &v);
    rc = a2av_move(c, plan, &v, true, a->dtype);
    coll_done(c);
    return rc;
}
