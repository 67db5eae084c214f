/* SPDX-License-Identifier: MIT */
/*
 * KV-cache manager (rt/kvc.h; the NPU paper, section 4.2).
 *
 * Modelled: the SRAM block pool as linked lists of block ids (a free list, one list per
 * sequence, all through next[]); reservations at admission so that growing never fails; a
 * spill of the positions past a sequence's SRAM reservation into one contiguous segment of
 * its maximum length in an HBM ring, allocated in FIFO order and reclaimed from the oldest
 * end (a segment freed out of order stays dead until every older one is freed too); or a
 * paged ring, cut into blocks with a free list of their own (ring_paged).
 * The prefix index (shared prompt blocks, their eviction) is kvc_prefix.c.
 * Not modelled: preemption, compaction of the ring, moving a sequence between SRAM and
 * HBM. No allocation: the manager is one fixed-size struct (and the index the caller's).
 */
#include "rt/kvc.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "kvc_internal.h"
#include "npu_enums.h"

uint32_t kvc_blocks_for(const struct rt_kvc *k, uint32_t len)
{
    return (uint32_t)(((uint64_t)len + k->cfg.block_tokens - 1) / k->cfg.block_tokens);
}

uint32_t kvc_ids(const struct rt_kvc *k)
{
    return k->cfg.sram_blocks + k->ring_blocks;
}

/* Ascending ids [first, end) linked as a free list; its head. */
static uint32_t kvc_link_free(struct rt_kvc *k, uint32_t first, uint32_t end)
{
    for (uint32_t b = first; b < end; b++)
        k->next[b] = b + 1 < end ? b + 1 : RT_KVC_NONE;
    return first < end ? first : RT_KVC_NONE;
}

int kvc_init(struct rt_kvc *k, const struct rt_kvc_config *cfg)
{
    assert(k && cfg);
    if (cfg->block_tokens == 0 || cfg->sram_blocks > RT_KVC_BLOCKS_MAX ||
        (cfg->ranks > 1 && cfg->block_tokens % cfg->ranks))
        return NPU_ERR_RANGE;
    memset(k, 0, sizeof(*k));
    k->cfg = *cfg;
    if (cfg->ring_paged) {
        uint64_t w = cfg->block_tokens / (cfg->ranks > 1 ? cfg->ranks : 1);
        uint64_t n = cfg->ring_rows / w, room = RT_KVC_BLOCKS_MAX - cfg->sram_blocks;
        k->ring_blocks = (uint32_t)(n < room ? n : room);
    }
    /* Ascending ids on the free lists so a fresh manager hands out 0, 1, 2, ... */
    k->free_head = kvc_link_free(k, 0, cfg->sram_blocks);
    k->free_ring_head = kvc_link_free(k, cfg->sram_blocks, kvc_ids(k));
    k->free_ring_count = k->ring_blocks;
    k->free_count = kvc_ids(k);
    k->unreserved = kvc_ids(k);
    return NPU_OK;
}

void kvc_push_free(struct rt_kvc *k, uint32_t b)
{
    uint32_t *head = &k->free_head;
    if (b >= k->cfg.sram_blocks)
        head = &k->free_ring_head, k->free_ring_count++;
    k->next[b] = *head;
    *head = b;
    k->free_count++;
}

/* A free block, SRAM's first; RT_KVC_NONE if both lists are empty. */
static uint32_t kvc_pop_free(struct rt_kvc *k)
{
    uint32_t *head = k->free_head != RT_KVC_NONE ? &k->free_head : &k->free_ring_head;
    uint32_t b = *head;
    if (b == RT_KVC_NONE)
        return b;
    *head = k->next[b];
    k->free_count--;
    k->free_ring_count -= b >= k->cfg.sram_blocks;
    return b;
}

bool kvc_seq_fits_ever(const struct rt_kvc *k, uint32_t max_len)
{
    /* Into an empty manager: every block is unreserved and the ring starts at row 0. */
    if (k->cfg.ring_paged)
        return kvc_blocks_for(k, max_len) <= kvc_ids(k);
    return kvc_blocks_for(k, max_len) <= k->cfg.sram_blocks ||
           kvc_ring_rows_for(k, max_len) <= k->cfg.ring_rows;
}

uint64_t kvc_ring_rows_for(const struct rt_kvc *k, uint32_t len)
{
    if (k->cfg.ranks <= 1)
        return len;
    return (uint64_t)kvc_blocks_for(k, len) * (k->cfg.block_tokens / k->cfg.ranks);
}

static struct rt_kvc_seg *kvc_seg_at(struct rt_kvc *k, uint32_t i)
{
    return &k->segs[(k->seg_first + i) % RT_KVC_SEGS_MAX];
}

/* First row of a free contiguous range of `rows` rows, RT_KVC_NO_RING if none now. The
   live rows are [oldest, head) when not wrapped, [oldest, end) + [0, head) when wrapped. */
static uint64_t kvc_ring_find(const struct rt_kvc *k, uint64_t rows)
{
    uint64_t end = k->cfg.ring_rows;
    if (k->nsegs == 0)
        return rows <= end ? 0 : RT_KVC_NO_RING;
    if (k->nsegs == RT_KVC_SEGS_MAX)
        return RT_KVC_NO_RING;
    uint64_t oldest = k->segs[k->seg_first % RT_KVC_SEGS_MAX].row;
    if (k->ring_head > oldest) {
        if (rows <= end - k->ring_head)
            return k->ring_head;
        return rows <= oldest ? 0 : RT_KVC_NO_RING;
    }
    return rows <= oldest - k->ring_head ? k->ring_head : RT_KVC_NO_RING;
}

static void kvc_ring_push(struct rt_kvc *k, uint64_t row, uint64_t rows)
{
    struct rt_kvc_seg *g = kvc_seg_at(k, k->nsegs);
    g->row = row;
    g->rows = rows;
    g->live = true;
    k->nsegs++;
    k->ring_head = row + rows;
    k->ring_used += rows;
}

static void kvc_ring_free(struct rt_kvc *k, uint64_t row, uint64_t rows)
{
    uint32_t i = 0;
    while (i < k->nsegs && !(kvc_seg_at(k, i)->live && kvc_seg_at(k, i)->row == row))
        i++;
    assert(i < k->nsegs && kvc_seg_at(k, i)->rows == rows);
    kvc_seg_at(k, i)->live = false;
    k->ring_used -= rows;
    /* FIFO reclamation: only the oldest end gives space back. */
    while (k->nsegs && !kvc_seg_at(k, 0)->live) {
        k->seg_first = (k->seg_first + 1) % RT_KVC_SEGS_MAX;
        k->nsegs--;
    }
    if (k->nsegs == 0) {
        k->seg_first = 0;
        k->ring_head = 0;
    }
}

/* Admission with a shared prefix of `hit` index blocks ending at `tail`, `idle` of which no
   sequence holds yet (taking them uses up unreserved space: kvc_prefix_find keeps idle
   within it). */
/* What admitting max_len positions with `hit` takes now, without taking it: the blocks to
   reserve and, when they fall short, the ring segment (ring_row RT_KVC_NO_RING: none). 0;
   NPU_ERR_NOMEM if it must wait; NPU_ERR_RANGE if it can never fit. */
static int kvc_admit_plan(const struct rt_kvc *k, uint32_t max_len, const struct kvc_hit *hit,
                          uint32_t *need, uint64_t *ring_row, uint64_t *ring_rows)
{
    if (!kvc_seq_fits_ever(k, max_len))
        return NPU_ERR_RANGE;
    assert(hit->idle <= k->unreserved && hit->blocks <= kvc_blocks_for(k, max_len));
    const uint32_t room = k->unreserved - hit->idle;
    *need = kvc_blocks_for(k, max_len) - hit->blocks;
    *ring_row = RT_KVC_NO_RING, *ring_rows = 0;
    if (*need <= room)
        return NPU_OK;
    if (k->cfg.ring_paged)
        return NPU_ERR_NOMEM; /* the ring's blocks are in the count already */
    *ring_rows = kvc_ring_rows_for(k, max_len);
    *ring_row = kvc_ring_find(k, *ring_rows);
    *need = room;
    return *ring_row == RT_KVC_NO_RING ? NPU_ERR_NOMEM : NPU_OK;
}

static int kvc_admit(struct rt_kvc *k, struct rt_kv_seq *s, uint32_t id, uint32_t max_len,
                     const struct kvc_hit *hit)
{
    /* owner[] holds id + 1, and RT_KVC_CACHED (UINT32_MAX) marks the prefix index's */
    assert(k && s && id < UINT32_MAX - 1);  /* s may be uninitialised: it is overwritten */
    uint32_t need;
    uint64_t ring_row, ring_rows;
    int rc = kvc_admit_plan(k, max_len, hit, &need, &ring_row, &ring_rows);
    if (rc != NPU_OK)
        return rc;
    if (ring_row != RT_KVC_NO_RING)
        kvc_ring_push(k, ring_row, ring_rows);
    memset(s, 0, sizeof(*s));
    s->id = id;
    s->head = s->tail = RT_KVC_NONE;
    s->prefix_tail = RT_KVC_NONE;
    if (hit->blocks)
        kvc_prefix_take(k, s, hit);  /* unreserved -= hit->idle */
    k->unreserved -= need;
    s->reserved = need;
    s->capacity = max_len;
    s->ring_row = ring_row;
    s->ring_rows = ring_rows;
    s->admitted = true;
    return NPU_OK;
}

bool kvc_seq_can_admit(const struct rt_kvc *k, uint32_t max_len, const struct rt_kv_prefix *p)
{
    assert(k && p);
    struct kvc_hit hit = { .tail = RT_KVC_NONE };
    if (k->px)
        kvc_prefix_find(k, p, &hit);
    uint32_t need;
    uint64_t ring_row, ring_rows;
    return kvc_admit_plan(k, max_len, &hit, &need, &ring_row, &ring_rows) == NPU_OK;
}

int kvc_seq_admit(struct rt_kvc *k, struct rt_kv_seq *s, uint32_t id, uint32_t max_len)
{
    return kvc_admit(k, s, id, max_len, &(struct kvc_hit){ .tail = RT_KVC_NONE });
}

int kvc_seq_admit_prefix(struct rt_kvc *k, struct rt_kv_seq *s, uint32_t id, uint32_t max_len,
                         const struct rt_kv_prefix *p, uint32_t *hit_blocks)
{
    assert(k && p && hit_blocks);
    struct kvc_hit hit = { .tail = RT_KVC_NONE };
    if (k->px)
        kvc_prefix_find(k, p, &hit);
    int rc = kvc_admit(k, s, id, max_len, &hit);
    *hit_blocks = rc == NPU_OK ? hit.blocks : 0;
    return rc;
}

void kvc_seq_grow(struct rt_kvc *k, struct rt_kv_seq *s, uint32_t new_len)
{
    assert(k && s && s->admitted && new_len <= s->capacity);
    if (new_len <= s->len)
        return;
    s->len = new_len;
    uint32_t want = kvc_blocks_for(k, new_len);
    want = want > s->shared ? want - s->shared : 0;
    if (want > s->reserved)
        want = s->reserved;
    while (s->blocks < want) {
        /* Reserved blocks are free or evictable (unreserved counts both): an empty free
           list means the prefix index gives one back. */
        if (k->free_count == 0)
            kvc_prefix_evict(k);
        uint32_t b = kvc_pop_free(k);
        assert(b != RT_KVC_NONE && k->owner[b] == 0);
        k->next[b] = RT_KVC_NONE;
        k->owner[b] = s->id + 1;
        if (s->tail == RT_KVC_NONE)
            s->head = b;
        else
            k->next[s->tail] = b;
        s->tail = b;
        s->blocks++;
    }
}

void kvc_seq_free(struct rt_kvc *k, struct rt_kv_seq *s)
{
    assert(k && s && s->admitted);
    for (uint32_t b = s->head; b != RT_KVC_NONE; b = k->next[b]) {
        assert(k->owner[b] == s->id + 1);
        k->owner[b] = 0;
    }
    /* Splice the whole list in front of the free list: the most recently used blocks are
       handed out first, deterministically. A paged ring's blocks go back one by one, each
       to its memory's list. */
    if (k->cfg.ring_paged) {
        for (uint32_t b = s->head, n; b != RT_KVC_NONE; b = n) {
            n = k->next[b];
            kvc_push_free(k, b);
        }
    } else if (s->head != RT_KVC_NONE) {
        k->next[s->tail] = k->free_head;
        k->free_head = s->head;
        k->free_count += s->blocks;
    }
    k->unreserved += s->reserved;
    if (s->shared)
        kvc_prefix_release(k, s);
    if (s->ring_row != RT_KVC_NO_RING)
        kvc_ring_free(k, s->ring_row, s->ring_rows);
    memset(s, 0, sizeof(*s));
    s->head = s->tail = RT_KVC_NONE;
    s->ring_row = RT_KVC_NO_RING;
}

uint32_t kvc_seq_block_ids(const struct rt_kvc *k, const struct rt_kv_seq *s, uint32_t *ids,
                           uint32_t max)
{
    assert(k && s && (ids || max == 0));
    uint32_t n = s->shared ? kvc_prefix_ids(k, s, ids, max) : 0;
    for (uint32_t b = s->head; b != RT_KVC_NONE && n < max; b = k->next[b])
        ids[n++] = b;
    return n;
}

uint32_t kvc_blocks_used(const struct rt_kvc *k)
{
    return k->cfg.sram_blocks - (k->free_count - k->free_ring_count);
}

uint64_t kvc_ring_rows_used(const struct rt_kvc *k)
{
    if (!k->cfg.ring_paged)
        return k->ring_used;
    const uint32_t w = k->cfg.block_tokens / (k->cfg.ranks > 1 ? k->cfg.ranks : 1);
    return (uint64_t)(k->ring_blocks - k->free_ring_count) * w;
}

/* ---- invariant checks ------------------------------------------------------------------ */

int kvc_fail(char *err, size_t errlen, const char *what, uint64_t a, uint64_t b)
{
    if (err && errlen)
        snprintf(err, errlen, "kvc: %s (%llu, %llu)", what, (unsigned long long)a,
                 (unsigned long long)b);
    return NPU_ERR_STATE;
}

/* Walks one list whose blocks must all carry `owner`; its length into *len. A list longer
   than the pool has a cycle (a block linked twice). */
static int kvc_check_list(const struct rt_kvc *k, uint32_t head, uint32_t owner, uint32_t *len,
                          char *err, size_t errlen)
{
    uint32_t n = 0;
    for (uint32_t b = head; b != RT_KVC_NONE; b = k->next[b]) {
        if (b >= kvc_ids(k))
            return kvc_fail(err, errlen, "block id out of the pool (block, owner)", b, owner);
        if (k->owner[b] != owner)
            return kvc_fail(err, errlen, "block on a list it does not belong to (block, owner)",
                            b, k->owner[b]);
        if (++n > kvc_ids(k))
            return kvc_fail(err, errlen, "list loops (owner, length)", owner, n);
    }
    *len = n;
    return NPU_OK;
}

/* Segments in FIFO order follow each other from the oldest, wrapping to row 0 at most once
   and then staying below the oldest: that is what allocation does, and it implies that
   they lie inside the ring and do not overlap. */
static int kvc_check_ring(const struct rt_kvc *k, char *err, size_t errlen)
{
    if (k->nsegs > RT_KVC_SEGS_MAX)
        return kvc_fail(err, errlen, "too many ring segments", k->nsegs, RT_KVC_SEGS_MAX);
    uint64_t live = 0, first = 0, end = 0;
    bool wrapped = false;
    for (uint32_t i = 0; i < k->nsegs; i++) {
        const struct rt_kvc_seg *g = &k->segs[(k->seg_first + i) % RT_KVC_SEGS_MAX];
        if (i == 0) {
            first = g->row;
            if (!g->live)
                return kvc_fail(err, errlen, "dead segment at the front (row, rows)", g->row,
                                g->rows);
        } else if (g->row == 0 && !wrapped) {
            wrapped = true;
        } else if (g->row != end) {
            return kvc_fail(err, errlen, "ring segment out of FIFO order (row, expected)",
                            g->row, end);
        }
        end = g->row + g->rows;
        if (g->rows == 0 || g->row >= k->cfg.ring_rows || g->rows > k->cfg.ring_rows - g->row)
            return kvc_fail(err, errlen, "ring segment outside the ring (row, rows)", g->row,
                            g->rows);
        if (wrapped && end > first)
            return kvc_fail(err, errlen, "ring segments overlap (end, oldest row)", end, first);
        live += g->live ? g->rows : 0;
    }
    if (live != k->ring_used)
        return kvc_fail(err, errlen, "ring_used differs from the live rows", k->ring_used, live);
    if (k->ring_head != (k->nsegs ? end : 0))
        return kvc_fail(err, errlen, "ring_head is not after the newest segment", k->ring_head,
                        end);
    return NPU_OK;
}

static bool kvc_seg_is_live(const struct rt_kvc *k, uint64_t row, uint64_t rows)
{
    for (uint32_t i = 0; i < k->nsegs && i < RT_KVC_SEGS_MAX; i++) {
        const struct rt_kvc_seg *g = &k->segs[(k->seg_first + i) % RT_KVC_SEGS_MAX];
        if (g->live && g->row == row && g->rows == rows)
            return true;
    }
    return false;
}

/* One sequence's own numbers: its list, its reservation, its ring segment. */
static int kvc_check_seq(const struct rt_kvc *k, const struct rt_kv_seq *s, char *err,
                         size_t errlen)
{
    uint32_t len;
    if (!s->admitted)
        return kvc_fail(err, errlen, "listed sequence not admitted (id, 0)", s->id, 0);
    int rc = kvc_check_list(k, s->head, s->id + 1, &len, err, errlen);
    if (rc)
        return rc;
    if (len != s->blocks)
        return kvc_fail(err, errlen, "sequence list length differs from blocks", len, s->blocks);
    uint32_t want = kvc_blocks_for(k, s->len);
    want = want > s->shared ? want - s->shared : 0;
    if (s->blocks != (want < s->reserved ? want : s->reserved) || s->len > s->capacity)
        return kvc_fail(err, errlen, "sequence blocks differ from min(reserved, len/B - "
                        "shared) (id, blocks)", s->id, s->blocks);
    bool ring = s->ring_row != RT_KVC_NO_RING;
    if (!ring && ((uint64_t)s->reserved + s->shared) * k->cfg.block_tokens < s->capacity)
        return kvc_fail(err, errlen, "sequence capacity past its SRAM and no ring (id, cap)",
                        s->id, s->capacity);
    if (ring && (s->ring_rows != kvc_ring_rows_for(k, s->capacity) ||
                 !kvc_seg_is_live(k, s->ring_row, s->ring_rows)))
        return kvc_fail(err, errlen, "sequence ring segment is not a live segment (id, row)",
                        s->id, s->ring_row);
    return NPU_OK;
}

/* Sequences are distinct owners with distinct ring segments, and every live segment is
   someone's (the caller lists every admitted sequence). */
static int kvc_check_owners(const struct rt_kvc *k, const struct rt_kv_seq *const *seqs,
                            uint32_t nseqs, char *err, size_t errlen)
{
    uint32_t ringed = 0, live = 0;
    for (uint32_t i = 0; i < nseqs; i++) {
        ringed += seqs[i]->ring_row != RT_KVC_NO_RING;
        for (uint32_t j = 0; j < i; j++) {
            if (seqs[j]->id == seqs[i]->id)
                return kvc_fail(err, errlen, "two sequences with one id", seqs[i]->id, j);
            if (seqs[i]->ring_row != RT_KVC_NO_RING && seqs[j]->ring_row == seqs[i]->ring_row)
                return kvc_fail(err, errlen, "two sequences share a ring segment (id, row)",
                                seqs[i]->id, seqs[i]->ring_row);
        }
    }
    for (uint32_t i = 0; i < k->nsegs && i < RT_KVC_SEGS_MAX; i++)
        live += k->segs[(k->seg_first + i) % RT_KVC_SEGS_MAX].live;
    if (ringed != live)
        return kvc_fail(err, errlen, "live ring segments without a sequence (segments, seqs)",
                        live, ringed);
    return NPU_OK;
}

int kvc_check(const struct rt_kvc *k, const struct rt_kv_seq *const *seqs, uint32_t nseqs,
              char *err, size_t errlen)
{
    assert(k && (seqs || nseqs == 0));
    uint32_t free_len, listed = 0;
    uint64_t promised = 0;
    if (k->cfg.sram_blocks > RT_KVC_BLOCKS_MAX || k->cfg.block_tokens == 0)
        return kvc_fail(err, errlen, "bad configuration", k->cfg.sram_blocks,
                        k->cfg.block_tokens);
    /* Owners tie each block to one list: a block on two lists has a wrong owner on one of
       them, or makes a list loop. Lists being disjoint, their lengths adding up to the pool
       means every block is on one. */
    uint32_t ring_free_len;
    int rc = kvc_check_list(k, k->free_head, 0, &free_len, err, errlen);
    if (rc == NPU_OK)
        rc = kvc_check_list(k, k->free_ring_head, 0, &ring_free_len, err, errlen);
    if (rc)
        return rc;
    free_len += ring_free_len;
    if (free_len != k->free_count || ring_free_len != k->free_ring_count)
        return kvc_fail(err, errlen, "free list lengths differ from the counts (free, ring "
                        "free)", free_len, ring_free_len);
    for (uint32_t b = k->free_head; b != RT_KVC_NONE; b = k->next[b])
        if (b >= k->cfg.sram_blocks)
            return kvc_fail(err, errlen, "a ring block on the SRAM free list (block, 0)", b, 0);
    for (uint32_t b = k->free_ring_head; b != RT_KVC_NONE; b = k->next[b])
        if (b < k->cfg.sram_blocks)
            return kvc_fail(err, errlen, "an SRAM block on the ring's free list (block, 0)", b,
                            0);
    for (uint32_t i = 0; i < nseqs; i++) {
        if ((rc = kvc_check_seq(k, seqs[i], err, errlen)) != NPU_OK)
            return rc;
        listed += seqs[i]->blocks;
        promised += seqs[i]->reserved - seqs[i]->blocks;
    }
    if ((rc = kvc_check_owners(k, seqs, nseqs, err, errlen)) != NPU_OK)
        return rc;
    uint32_t cached = 0, evictable = 0;
    if (k->px && (rc = kvc_prefix_check(k, seqs, nseqs, &cached, &evictable, err, errlen)))
        return rc;
    if ((uint64_t)free_len + listed + cached != kvc_ids(k))
        return kvc_fail(err, errlen, "blocks on no list (free + held + cached, pool)",
                        free_len + listed + cached, kvc_ids(k));
    if (promised + k->unreserved != (uint64_t)k->free_count + evictable)
        return kvc_fail(err, errlen, "reservations do not add up (promised + unreserved, "
                        "free + evictable)", promised + k->unreserved,
                        k->free_count + evictable);
    return kvc_check_ring(k, err, errlen);
}
