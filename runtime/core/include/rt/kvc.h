/* SPDX-License-Identifier: MIT */
/*
 * KV-cache manager (docs/serving.md, "KV cache"; the NPU paper, section 4.2): every core
 * holds the same layout, so one manager on the control core decides for all of them.
 *
 * SRAM: a pool of blocks of `block_tokens` positions (all layers, K and V), managed at block
 * granularity: a free list and one list per sequence, both linked through next[] (the
 * paper's linked lists of block ids). HBM: a ring buffer of `ring_rows` positions, managed
 * coarsely: a sequence that does not fit its SRAM blocks gets one contiguous segment of its
 * maximum length in the ring (positions past its SRAM blocks live at ring_row + pos).
 * Split attention (`ranks` > 1, npu_plan.kv_split): a block is a stripe of block_tokens
 * positions dealt over `ranks` cores, block_tokens / ranks each (one pool block on every
 * core), and ring rows are a core's own rows: a segment for max_len positions is
 * ceil(max_len / block_tokens) x block_tokens / ranks rows (npu_kv_local_rows).
 *
 * Paged ring (rt_kvc_config.ring_paged, with prefix caching): the ring is cut into blocks
 * too, with ids after the SRAM pool's, and a sequence's positions are all in blocks (SRAM
 * ones taken first); there are no segments, so blocks in HBM can be shared like SRAM's.
 *
 * Admission reserves what a sequence may need (its maximum length), so growing never
 * fails: SRAM blocks are taken from the reservation as the sequence grows. A sequence that
 * can never fit is refused (kvc_seq_fits_ever); one that does not fit now waits.
 *
 * Prefix caching (optional, docs/serving.md section 3a; kvc_prefix_attach): a
 * prompt's whole blocks are published into an index once prefilled in every layer, keyed
 * by the block before them and the prompt's hash ids over their positions (Mooncake's
 * hash_ids). A later prompt whose first blocks match takes them as its shared prefix
 * (reference-counted, read-only: nobody writes below a sequence's prefilled positions) and
 * prefills only the rest. A cached block no sequence holds stays until its space is
 * wanted: then the least recently used one without cached successors is evicted. Such
 * blocks count as unreserved, so caching never makes a sequence wait.
 * Not modelled: preemption, sharing positions of a ring segment (a paged ring's blocks are
 * shared like SRAM's).
 */
#ifndef RT_KVC_H
#define RT_KVC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "npu_limits.h"

#define RT_KVC_BLOCKS_MAX NPU_KV_BLOCKS_MAX /* SRAM blocks a manager tracks (npu_limits.h) */
#define RT_KVC_SEGS_MAX 1024u    /* live HBM ring segments */
#define RT_KVC_NONE 0xffffffffu  /* no block (list end) */
#define RT_KVC_NO_RING UINT64_MAX
#define RT_KVC_CACHED UINT32_MAX /* owner[] of a block in the prefix index */
#define RT_KVC_BUCKETS 4096u     /* prefix index hash buckets (a power of two) */

struct rt_kvc_config {
    uint32_t block_tokens;  /* positions per block id (npu_kv_stripe: the plan's kv_block,
                               times ranks when split), >= 1 */
    uint32_t sram_blocks;   /* blocks in the SRAM pool, 0..RT_KVC_BLOCKS_MAX */
    uint64_t ring_rows;     /* rows of the HBM ring (positions, unless split), may be 0 */
    uint32_t ranks;         /* cores a block's positions are dealt over (0 or 1: none);
                               divides block_tokens */
    bool ring_paged;        /* the ring as blocks too (prefix caching shares them): ids
                               sram_blocks + h are ring rows [h x W, (h + 1) x W), W =
                               block_tokens / ranks, as many as the ring holds within
                               RT_KVC_BLOCKS_MAX ids; no segments */
};

/* One sequence's KV space (embedded in struct rt_request). */
struct rt_kv_seq {
    uint32_t id;            /* owner id (request id), for the invariant checks */
    uint32_t head, tail;    /* its own block list (RT_KVC_NONE: empty): SRAM blocks, and
                               a paged ring's */
    uint32_t shared;        /* prefix blocks taken from the prefix index: positions
                               [0, shared * B), read-only */
    uint32_t prefix_tail;   /* the last of them (the chain runs back through parent[]) */
    uint32_t blocks;        /* blocks held (its own, after the shared ones) */
    uint32_t reserved;      /* own blocks reserved: positions [0, (shared + reserved) * B)
                               are in blocks, the rest in the ring segment */
    uint32_t capacity;      /* positions it may hold (its maximum length) */
    uint32_t len;           /* positions grown to so far */
    bool admitted;
    uint64_t ring_row;      /* first row of its ring segment, RT_KVC_NO_RING if none */
    uint64_t ring_rows;     /* rows of that segment (its maximum length), 0 if none */
};

struct rt_kvc_seg {          /* a ring segment, in allocation order */
    uint64_t row, rows;
    bool live;
};

/* A prompt's prefix hashes (Mooncake's hash_ids): hash[i] names the tokens of positions
   [i * hash_block, (i + 1) * hash_block); only hash blocks the prompt fills are used. */
struct rt_kv_prefix {
    const uint64_t *hash;    /* [nhash], NULL if none */
    uint32_t nhash;
    uint32_t hash_block;     /* tokens per hash id, 0: no hashes */
    uint32_t input_len;      /* the prompt's length */
};

/* The prefix index (kvc_prefix_attach): per block, valid while owner[b] == RT_KVC_CACHED. */
struct rt_kvc_index {
    uint32_t parent[RT_KVC_BLOCKS_MAX];   /* the block before it, RT_KVC_NONE: first */
    uint32_t ref[RT_KVC_BLOCKS_MAX];      /* admitted sequences whose prefix holds it */
    uint32_t children[RT_KVC_BLOCKS_MAX]; /* cached blocks whose parent it is */
    uint32_t hnext[RT_KVC_BLOCKS_MAX];    /* next block of its hash bucket */
    uint64_t key[RT_KVC_BLOCKS_MAX];      /* its positions' hashes and its end position */
    uint32_t used[RT_KVC_BLOCKS_MAX];     /* last use, on the index's clock */
    uint32_t bucket[RT_KVC_BUCKETS];      /* first block of each bucket */
    uint32_t cached;                      /* blocks in the index */
    uint32_t evictable;                   /* of them, held by no sequence (ref 0) */
    uint32_t clock;                       /* advances when a sequence takes a prefix,
                                             publishes blocks, or frees a prefix (at most
                                             2 + a prompt's blocks per request) */
    uint64_t evictions;                   /* blocks evicted so far */
};

struct rt_kvc {
    struct rt_kvc_config cfg;
    struct rt_kvc_index *px;           /* the prefix index, NULL: no prefix caching */
    uint32_t next[RT_KVC_BLOCKS_MAX];  /* next block of the same list */
    uint32_t owner[RT_KVC_BLOCKS_MAX]; /* owning sequence id + 1; 0: free */
    uint32_t free_head, free_count;    /* free_count: both free lists */
    uint32_t ring_blocks;              /* ring_paged: the ring's blocks (ids after SRAM's) */
    uint32_t free_ring_head, free_ring_count; /* ring_paged: the free ring blocks */
    uint32_t unreserved;               /* free or evictable blocks no sequence has reserved */
    struct rt_kvc_seg segs[RT_KVC_SEGS_MAX]; /* FIFO: [seg_first, seg_first + nsegs) mod */
    uint32_t seg_first, nsegs;
    uint64_t ring_head;                /* next free row after the newest segment */
    uint64_t ring_used;                /* rows in live segments */
};

/* 0, or NPU_ERR_RANGE (more blocks than RT_KVC_BLOCKS_MAX, block_tokens 0 or not a
   multiple of ranks). */
int kvc_init(struct rt_kvc *k, const struct rt_kvc_config *cfg);

/* Turns prefix caching on for a fresh manager (no sequence admitted yet): px is the
   index's storage, owned by the caller for the manager's life. */
void kvc_prefix_attach(struct rt_kvc *k, struct rt_kvc_index *px);

/* Blocks of prefix p (whole SRAM blocks of B = block_tokens positions, each inside hash
   blocks the prompt fills, and short of its last position, which must be computed for
   its first token) that the index could key. */
uint32_t kvc_prefix_blocks(const struct rt_kvc *k, const struct rt_kv_prefix *p);

/* Blocks of p's prefix that kvc_seq_admit_prefix would take from the index now (0 without
   an index). */
uint32_t kvc_prefix_hit(const struct rt_kvc *k, const struct rt_kv_prefix *p);

/* kvc_seq_admit for a prompt with prefix p: takes kvc_prefix_hit's blocks as s's shared
   prefix (*hit_blocks, 0 if none) and reserves the rest. Same returns as kvc_seq_admit. */
int kvc_seq_admit_prefix(struct rt_kvc *k, struct rt_kv_seq *s, uint32_t id, uint32_t max_len,
                         const struct rt_kv_prefix *p, uint32_t *hit_blocks);

/* Whether kvc_seq_admit_prefix(k, ., ., max_len, p, .) would admit now (changes nothing). */
bool kvc_seq_can_admit(const struct rt_kvc *k, uint32_t max_len, const struct rt_kv_prefix *p);

/* s has the first `written` positions of its prompt p in the cache in every layer (a
   prefill chunk done; written <= s->len): its keyable own blocks that end by then join the
   index (and s's shared prefix) in position order, up to the first one the index already
   has under the same predecessor. Nobody writes below a sequence's written positions, so
   those blocks never change again. Blocks published; 0 without an index. */
uint32_t kvc_seq_publish_upto(struct rt_kvc *k, struct rt_kv_seq *s,
                              const struct rt_kv_prefix *p, uint32_t written);
/* The same once the whole prompt is written (written = p->input_len). */
uint32_t kvc_seq_publish(struct rt_kvc *k, struct rt_kv_seq *s, const struct rt_kv_prefix *p);

/* Blocks s's positions run through: its shared prefix and its own. */
static inline uint32_t kvc_seq_nblocks(const struct rt_kv_seq *s)
{
    return s->shared + s->blocks;
}

/* Whether a sequence of max_len positions could be admitted into an empty manager. */
bool kvc_seq_fits_ever(const struct rt_kvc *k, uint32_t max_len);

/* Admits sequence `id` of up to max_len positions: reserves blocks (all it needs if
   enough are unreserved, else what is unreserved) and, if that is short, a ring segment of
   max_len rows (a paged ring: no segment; it waits). 0; NPU_ERR_NOMEM if it must wait (nothing was taken); NPU_ERR_RANGE if it
   can never fit. */
int kvc_seq_admit(struct rt_kvc *k, struct rt_kv_seq *s, uint32_t id, uint32_t max_len);

/* Grows s to new_len positions (<= capacity), taking reserved blocks as needed. Cannot fail:
   a programming error asserts. */
void kvc_seq_grow(struct rt_kvc *k, struct rt_kv_seq *s, uint32_t new_len);

/* Returns s's blocks to the free list, its ring segment to the ring and its hold on its
   shared prefix to the index. */
void kvc_seq_free(struct rt_kvc *k, struct rt_kv_seq *s);

/* s's block ids in position order (its shared prefix, then its own) into ids[max]; how
   many were written. */
uint32_t kvc_seq_block_ids(const struct rt_kvc *k, const struct rt_kv_seq *s, uint32_t *ids,
                           uint32_t max);

/* SRAM blocks in use (held or cached), and ring rows in live segments (paged: in ring
   blocks in use). */
uint32_t kvc_blocks_used(const struct rt_kvc *k);
/* Ring rows a sequence of len positions needs (len unless split). */
uint64_t kvc_ring_rows_for(const struct rt_kvc *k, uint32_t len);
uint64_t kvc_ring_rows_used(const struct rt_kvc *k);

/* Invariants, given every admitted sequence: each block is free (on the free list once), on
   exactly one sequence's list or in the prefix index (found under its key, its references
   and successors counted right); counts and reservations add up; ring segments lie inside
   the ring and do not overlap. 0, or NPU_ERR_STATE with what is wrong in err. */
int kvc_check(const struct rt_kvc *k, const struct rt_kv_seq *const *seqs, uint32_t nseqs,
              char *err, size_t errlen);

#endif
