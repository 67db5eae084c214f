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
 * Admission reserves what a sequence may need (its maximum length), so growing never
 * fails: SRAM blocks are taken from the reservation as the sequence grows. A sequence that
 * can never fit is refused (kvc_seq_fits_ever); one that does not fit now waits.
 * Not modelled: eviction, preemption, prefix sharing (hash_ids are carried, not used).
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

struct rt_kvc_config {
    uint32_t block_tokens;  /* positions per block id (npu_kv_stripe: the plan's kv_block,
                               times ranks when split), >= 1 */
    uint32_t sram_blocks;   /* blocks in the SRAM pool, 0..RT_KVC_BLOCKS_MAX */
    uint64_t ring_rows;     /* rows of the HBM ring (positions, unless split), may be 0 */
    uint32_t ranks;         /* cores a block's positions are dealt over (0 or 1: none);
                               divides block_tokens */
};

/* One sequence's KV space (embedded in struct rt_request). */
struct rt_kv_seq {
    uint32_t id;            /* owner id (request id), for the invariant checks */
    uint32_t head, tail;    /* its SRAM block list (RT_KVC_NONE: empty) */
    uint32_t blocks;        /* SRAM blocks held */
    uint32_t reserved;      /* SRAM blocks reserved: positions [0, reserved * B) are in
                               SRAM, the rest in the ring segment */
    uint32_t capacity;      /* positions it may hold (its maximum length) */
    uint32_t len;           /* positions grown to so far */
    uint64_t ring_row;      /* first row of its ring segment, RT_KVC_NO_RING if none */
    uint64_t ring_rows;     /* rows of that segment (its maximum length), 0 if none */
    bool admitted;
};

struct rt_kvc_seg {          /* a ring segment, in allocation order */
    uint64_t row, rows;
    bool live;
};

struct rt_kvc {
    struct rt_kvc_config cfg;
    uint32_t next[RT_KVC_BLOCKS_MAX];  /* next block of the same list */
    uint32_t owner[RT_KVC_BLOCKS_MAX]; /* owning sequence id + 1; 0: free */
    uint32_t free_head, free_count;
    uint32_t unreserved;               /* free blocks no sequence has reserved */
    struct rt_kvc_seg segs[RT_KVC_SEGS_MAX]; /* FIFO: [seg_first, seg_first + nsegs) mod */
    uint32_t seg_first, nsegs;
    uint64_t ring_head;                /* next free row after the newest segment */
    uint64_t ring_used;                /* rows in live segments */
};

/* 0, or NPU_ERR_RANGE (more blocks than RT_KVC_BLOCKS_MAX, block_tokens 0 or not a
   multiple of ranks). */
int kvc_init(struct rt_kvc *k, const struct rt_kvc_config *cfg);

/* Whether a sequence of max_len positions could be admitted into an empty manager. */
bool kvc_seq_fits_ever(const struct rt_kvc *k, uint32_t max_len);

/* Admits sequence `id` of up to max_len positions: reserves SRAM blocks (all it needs if
   enough are unreserved, else what is unreserved) and, if that is short, a ring segment of
   max_len rows. 0; NPU_ERR_NOMEM if it must wait (nothing was taken); NPU_ERR_RANGE if it
   can never fit. */
int kvc_seq_admit(struct rt_kvc *k, struct rt_kv_seq *s, uint32_t id, uint32_t max_len);

/* Grows s to new_len positions (<= capacity), taking reserved blocks as needed. Cannot fail:
   a programming error asserts. */
void kvc_seq_grow(struct rt_kvc *k, struct rt_kv_seq *s, uint32_t new_len);

/* Returns s's blocks to the free list and its ring segment to the ring. */
void kvc_seq_free(struct rt_kvc *k, struct rt_kv_seq *s);

/* s's block ids in position order into ids[max]; how many were written. */
uint32_t kvc_seq_block_ids(const struct rt_kvc *k, const struct rt_kv_seq *s, uint32_t *ids,
                           uint32_t max);

/* Blocks in use (held by sequences) and ring rows in live segments. */
uint32_t kvc_blocks_used(const struct rt_kvc *k);
/* Ring rows a sequence of len positions needs (len unless split). */
uint64_t kvc_ring_rows_for(const struct rt_kvc *k, uint32_t len);
uint64_t kvc_ring_rows_used(const struct rt_kvc *k);

/* Invariants, given every admitted sequence: each block is free (on the free list once) or
   on exactly one sequence's list; counts and reservations add up; ring segments lie inside
   the ring and do not overlap. 0, or NPU_ERR_STATE with what is wrong in err. */
int kvc_check(const struct rt_kvc *k, const struct rt_kv_seq *const *seqs, uint32_t nseqs,
              char *err, size_t errlen);

#endif
