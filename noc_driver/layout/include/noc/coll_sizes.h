/* SPDX-License-Identifier: MIT */
/*
 * What the planner, the image check and the NoC driver must agree on about the collectives
 * (docs/noc-driver.md): the scratch a rank gives a communicator for a segment size, the
 * limits of segments and of M2N pairs, and how a count is split into per-rank parts.
 * Plain C: built for the host (planner, image check, tests) and for the cores (noc/collective.h
 * includes it), so the two sides cannot drift apart.
 */
#ifndef NOC_COLL_SIZES_H
#define NOC_COLL_SIZES_H

#include <stdint.h>

#include "npu_limits.h"

/* Scratch each rank gives a communicator: receive slots for reductions and tokens. */
#define NOC_COMM_SEGMENT_DEFAULT 65536u
#define NOC_COMM_SEGMENT_MAX (1u << 20)
#define NOC_COMM_RECV_SLOTS 4u /* per bank; two banks */
#define NOC_COMM_SCRATCH_BYTES(segment_bytes) \
    (1024ull + 2ull * NOC_COMM_RECV_SLOTS * (uint64_t)(segment_bytes))
/* M2N senders x receivers, all-to-all-v ranks x buckets: at most noc_m2n_pairs(ncores)
   counts, NOC_M2N_PAIRS_MAX on chips of 64 cores or more (64 ranks x 256 buckets: an EP
   dispatch whose hot experts are split over several ranks, docs/images.md "Expert
   placement"), 8192 on smaller ones, whose SRAM the larger mailbox would crowd. */
#define NOC_M2N_PAIRS_MAX NPU_COUNTS_MAX /* npu_limits.h */
#define NOC_M2N_PAIRS_SMALL NPU_COUNTS_SMALL_MAX
static inline uint32_t noc_m2n_pairs(uint32_t ncores)
{
    return ncores >= NPU_COUNTS_LARGE_CORES ? NOC_M2N_PAIRS_MAX : NOC_M2N_PAIRS_SMALL;
}

/* All-to-all-v (noc_alltoallv_dispatch) over `size` ranks and `buckets` buckets, no rank
   owning more than `owned_max`: the words of the plan a rank keeps, and the count words that
   land in a rank's mailbox (each owner's totals and offsets, each sender's counts of the
   rank's buckets; at most noc_m2n_pairs). Linear in size, never size x buckets. */
static inline uint64_t noc_a2av_plan_words(uint32_t size, uint32_t buckets, uint32_t owned_max)
{
    return 4ull + 4ull * buckets + 4ull * size * owned_max;
}
static inline uint64_t noc_a2av_mailbox_words(uint32_t size, uint32_t buckets,
                                              uint32_t owned_max)
{
    return 2ull * buckets + 2ull * size * owned_max;
}

/* Element boundary of part k of `count` split in `parts`: rank r's chunk of a collective is
   [coll_bound(count, size, r), coll_bound(count, size, r + 1)). */
static inline uint64_t coll_bound(uint64_t count, uint32_t parts, uint32_t k)
{
    /* count < 2^40 (a buffer in SRAM) and parts <= 1024: no overflow. */
    return count * k / parts;
}
/* Parts of `count` split in `parts` (coll_bound) that are not empty: with count < parts
   the bounds rise by at most one per part, so exactly `count` of them rise. */
static inline uint32_t coll_nonempty_parts(uint64_t count, uint32_t parts)
{
    return count < parts ? (uint32_t)count : parts;
}

#endif
