/* SPDX-License-Identifier: MIT */
/*
 * Collectives over a group of cores (docs/noc-driver.md).
 *
 * A communicator binds a group (noc/placement.h) to a slot of driver semaphores and
 * mailboxes, and to a scratch area in each member's SRAM. Every member calls the same
 * collectives in the same order; each call:
 *   1. agrees: every rank multicasts a 64-byte header (kind, sequence number, count,
 *      dtype, root, group, its buffer addresses, the result of its local checks) to the
 *      group's rectangle and waits for all of them (with a chip-time deadline). Every rank
 *      then judges the same headers, so a bad group, a buffer outside SRAM or counts that
 *      differ fail on every rank, with the same error code and a console line naming the
 *      rank at fault. A rank whose header never comes makes the others time out
 *      (NPU_ERR_TIMEOUT) and tell the group (an abort header); a phase whose traffic does
 *      not come within the timeout fails the same way. The slot is then broken on that core
 *      (NPU_ERR_STATE afterwards). The caller may keep at most NOC_COMM_QUEUED_MAX
 *      descriptors queued on its NoC and vector engines during a collective.
 *   2. moves the data as chains of engine descriptors that wait for and signal semaphores,
 *      so transfers, reductions and forwarding run without the hart, pipelined in segments
 *      (NoC transfers overlap the vector engine's reductions). See the design doc for why
 *      this cannot deadlock.
 *
 * Buffers are in each rank's own SRAM (global addresses), may sit at different offsets on
 * different ranks, and hold `count` elements of `dtype` (NPU_DTYPE_BF16 or NPU_DTYPE_FP32).
 * Rank r's chunk is elements [r * count / size, (r + 1) * count / size).
 *
 * Reduction order (part of the contract, so a host loop in the same order matches bit for
 * bit): ring reductions (not MESH2D) sum chunk c as in[c+1] + in[c+2] + ... + in[c] (ranks
 * modulo size), each addition rounded to dtype; MESH2D reduces along the grid's columns
 * first, in the same ring order over the rows of a column, then along its rows. A line
 * collective (below) is a 1-D ring over the line's ranks in line order.
 *
 * Line collectives: on a MESH2D group (rank = i * grid_cols + j), every grid row (or every
 * grid column) runs the collective on its own ranks at the same time, each line on its own
 * buffers, as if it were a group of its own: the 2-D tensor partition's all-reduce along a
 * row and all-gather along a column. They use the group's communicator (its slot, scratch
 * and agreement: every rank of the whole group calls, and the headers check that all call
 * the same line collective with the same count), so no further slot is needed.
 */
#ifndef NOC_COLLECTIVE_H
#define NOC_COLLECTIVE_H

#include <stdbool.h>
#include <stdint.h>

#include "noc/coll_sizes.h"
#include "noc/placement.h"
#include "npu_enums.h"

#define NOC_COMM_SLOTS 2u
/* The default timeout scales with the chip's configured speed (issue 26: a fixed 100 ms
   failed valid runs on a 10 MHz chip): NOC_COMM_TIMEOUT_CYCLES core cycles plus the latency
   of NOC_COMM_TIMEOUT_HOPS hops (1 s at 1 GHz, 100 s at 10 MHz). A long timeout costs no
   wall time: when every hart waits, the chip clock jumps to the earliest deadline. */
#define NOC_COMM_TIMEOUT_CYCLES 1000000000ull
#define NOC_COMM_TIMEOUT_HOPS 65536ull
#define NOC_COMM_QUEUED_MAX 64u /* descriptors the caller may leave queued on NoC, vector */

/* How all-gathers (and the all-gather half of all-reduces) move data: AUTO multicasts each
   rank's chunk to the group in one step when every rank's buffer is at the same SRAM offset
   (checked on the agreed headers), else runs the ring; RING always runs the ring (or the
   rows-then-columns rings of MESH2D). Every rank of a communicator must choose the same. */
enum noc_gather_algo { NOC_GATHER_AUTO = 0, NOC_GATHER_RING = 1 };

struct noc_comm_config {
    const struct noc_group *group;
    uint32_t slot;            /* 0..NOC_COMM_SLOTS-1: communicators that share a core and
                                 run at the same time need different slots */
    uint64_t scratch;         /* this core's SRAM, NOC_COMM_SCRATCH_BYTES(segment_bytes) */
    uint32_t segment_bytes;   /* pipelining unit, a multiple of 4, 64..NOC_COMM_SEGMENT_MAX
                                 (0: the default) */
    uint64_t timeout_ps;      /* how long a rank waits for the others, in the agreement and
                                 for each phase's traffic (0: the default,
                                 noc_comm_timeout_default_ps) */
    enum noc_gather_algo gather;
    bool quiet;               /* refusals and timeouts are returned without their console
                                 line: for tests that provoke them on purpose */
};

/* Per-rank state. (What the slot's semaphores should read is kept per core and slot, so
   communicators can follow each other on a slot.) */
struct noc_comm {
    struct noc_comm_config cfg;
    struct noc_group group;   /* a copy: the caller's may go */
    uint32_t rank;
    uint32_t seq;             /* collectives called so far */
    uint32_t phase;           /* data phase of the current collective (0..3) */
};

/* NPU_ERR_INVAL for a bad slot, segment size or scratch; NPU_ERR_RANGE if this core is not
   in the group; NPU_ERR_STATE if a timeout broke the slot earlier (until the next boot). No
   other communicator may be using the slot on any member; members must have created theirs
   before any member calls a collective on it. */
int noc_comm_init(struct noc_comm *c, const struct noc_comm_config *cfg);
/* The default timeout on this chip: NOC_COMM_TIMEOUT_CYCLES cycles and NOC_COMM_TIMEOUT_HOPS
   hops' latency, in chip picoseconds. */
uint64_t noc_comm_timeout_default_ps(void);

/* What a reduction combines elements with: the vector engine's ADD (rounded to the dtype,
   in the order below) or MAX (exact, so its order does not show). */
enum noc_reduce_op { NOC_REDUCE_SUM = 0, NOC_REDUCE_MAX = 1 };

struct noc_coll_args {
    uint64_t buf;             /* this rank's buffer (global SRAM address) */
    uint64_t count;           /* elements, the same on every rank (>= 1) */
    enum npu_dtype dtype;     /* NPU_DTYPE_BF16 or NPU_DTYPE_FP32 */
    uint32_t root;            /* broadcast: the rank whose buffer is sent */
    enum noc_reduce_op op;    /* reduce-scatter, all-reduce (also along lines): the same
                                 on every rank (agreed); zero-initialised args sum */
};

/* Every rank waits until all have called it. */
int noc_barrier(struct noc_comm *c);
/* buf of root is copied into buf of every rank. */
int noc_broadcast(struct noc_comm *c, const struct noc_coll_args *a);
/* In place: rank r's chunk is at its place in buf; afterwards every buf holds all chunks. */
int noc_allgather(struct noc_comm *c, const struct noc_coll_args *a);
/* In place: afterwards rank r's chunk of buf holds the sum over ranks of that chunk; the
   other chunks of buf hold partial sums. */
int noc_reduce_scatter(struct noc_comm *c, const struct noc_coll_args *a);
/* In place: afterwards every buf holds the element-wise sum (or maximum: a->op) over ranks
   (reduce-scatter, then all-gather). */
int noc_allreduce(struct noc_comm *c, const struct noc_coll_args *a);

/* All-gather of column blocks straight into place: dst is a [rows][ld] matrix of `dtype`
   at the same SRAM offset on every rank; rank r owns columns [r cols / size, (r + 1) cols /
   size) of every row (coll_bound), and sends them from src, [rows][src_ld] elements that
   start at its first column (src = dst + first column: in place; or a buffer of its own,
   such as a GEMM's output). One 2-D multicast per rank writes the block into every rank's
   dst: no gather buffer, no copies. Needs the multicast all-gather (NOC_GATHER_AUTO, dst
   at the same offset everywhere: else NPU_ERR_INVAL on every rank). */
struct noc_gather_blocks_args {
    uint64_t dst, src;        /* global SRAM addresses */
    uint32_t rows, cols;      /* rows x cols of dst are gathered */
    uint32_t ld, src_ld;      /* elements from one row to the next (ld >= cols) */
    enum npu_dtype dtype;
};
int noc_allgather_blocks(struct noc_comm *c, const struct noc_gather_blocks_args *a);

/*
 * Exchange of named blocks: every rank sends its own list of 2-D blocks, each to one other
 * rank of the group, into that rank's receive buffer (`buf`, `bytes` long, the same size on
 * every rank, anywhere in its SRAM), and expects `arrivals` blocks in its own; with
 * `multicast`, a block may instead go to every rank of a grid line of a MESH2D group, or
 * to every rank of a group that fills a rectangle, in one multicast (the buffers then at
 * one SRAM offset). For traffic that no all-gather shape
 * fits: each rank gets only what it reads (split attention's per-head pieces,
 * docs/noc-driver.md "Exchange of blocks"). Checked locally (sources in SRAM, destinations
 * inside `bytes`, no unicast to this rank itself, a line only on a grid whose line fills a
 * rectangle of the mesh) and on the agreed headers (the same `bytes` and `multicast`; with
 * it, one buffer offset; the deliveries sent and expected add up), refused alike on
 * every rank. Blocks must not overlap in a receiver's buffer (their order is not defined);
 * as with every collective, the caller's queued work on buf and on the sources is done
 * before the call.
 */
enum noc_exchange_dest {
    NOC_EXCHANGE_RANK = 0,    /* rank `to` alone (not this one) */
    NOC_EXCHANGE_GRID_COL,    /* one multicast to every rank of the MESH2D grid column of
                                 rank `to` (this one included if it is there) */
    NOC_EXCHANGE_GRID_ROW,    /* likewise its grid row */
    NOC_EXCHANGE_GROUP,       /* one multicast to every rank of the group (this one
                                 included; `to`: any of its ranks), whose cores must fill a
                                 rectangle of the mesh (any placement but a pair's) */
};
struct noc_exchange_block {
    uint64_t src;             /* this rank's SRAM (global address) */
    uint64_t dst_offset;      /* bytes from the start of the receiver's buf */
    uint32_t to;              /* the receiving rank, or a rank of the receiving line */
    enum noc_exchange_dest dest;
    uint32_t rows, row_bytes; /* rows x row_bytes bytes ... */
    uint32_t src_stride, dst_stride; /* ... their starts this many bytes apart */
};
struct noc_exchange_args {
    uint64_t buf, bytes;      /* this rank's receive buffer (global SRAM address), its size */
    const struct noc_exchange_block *blocks; /* what this rank sends */
    uint32_t nblocks;
    uint32_t arrivals;        /* the deliveries that land in buf (a multicast: one each) */
    bool multicast;           /* the same on every rank: blocks may go to a grid line, and
                                 every rank's buf is at one SRAM offset (checked) */
};
int noc_exchange_blocks(struct noc_comm *c, const struct noc_exchange_args *a);

/* The lines of a MESH2D grid: NOC_LINE_ROWS, grid row i (its grid_cols ranks in order of
   j); NOC_LINE_COLS, grid column j (its grid_rows ranks in order of i). */
enum noc_line { NOC_LINE_ROWS = 0, NOC_LINE_COLS = 1 };
/* As noc_allgather and noc_allreduce, over each line of the grid separately: `count` is the
   line's buffer, and the rank at position k of its line owns chunk [k * count / len, (k + 1)
   * count / len). NPU_ERR_INVAL on every rank if the group is not MESH2D. */
int noc_allgather_line(struct noc_comm *c, const struct noc_coll_args *a, enum noc_line line);
int noc_allreduce_line(struct noc_comm *c, const struct noc_coll_args *a, enum noc_line line);

/* All-to-all: buf holds size blocks of count elements, block q for rank q; recv gets size
   blocks, block q from rank q. */
struct noc_alltoall_args {
    uint64_t buf, recv;
    uint64_t count;           /* elements per block, the same on every rank */
    enum npu_dtype dtype;
};
int noc_alltoall(struct noc_comm *c, const struct noc_alltoall_args *a);

/*
 * M2N dispatch and combine (MoE token dispatch): ranks 0..senders-1 send, the others
 * receive. Sender i has counts[j] elements for receiver j (j = 0..receivers-1), laid out in
 * its send buffer one block after another; receiver j gets the blocks of senders 0, 1, ...
 * one after another in its recv buffer (of recv_capacity elements). The count matrix is
 * kept in `plan` (storage of senders x receivers entries, the caller's) for the combine,
 * which sends every block back from where dispatch put it to where it came from (into the
 * sender's recv buffer, laid out like its send buffer).
 */
struct noc_m2n_plan {
    uint32_t senders, receivers;
    uint32_t *counts;         /* [senders][receivers], filled by dispatch */
    uint32_t capacity;        /* entries of counts */
};
struct noc_m2n_args {
    uint32_t senders;         /* M, 1..size-1, the same on every rank */
    const uint32_t *counts;   /* dispatch, sender: receivers entries (in its SRAM); ignored
                                 on receivers and by combine (which uses the plan) */
    uint64_t send, recv;      /* sender: send (dispatch) / recv (combine); receiver: recv */
    uint64_t recv_capacity;   /* elements recv can hold */
    enum npu_dtype dtype;
};
int noc_m2n_dispatch(struct noc_comm *c, const struct noc_m2n_args *a,
                     struct noc_m2n_plan *plan);
int noc_m2n_combine(struct noc_comm *c, const struct noc_m2n_args *a,
                    const struct noc_m2n_plan *plan);

/*
 * All-to-all-v by buckets (MoE dispatch with the experts spread over the whole group, every
 * rank both sender and receiver). `buckets` buckets (experts) are owned by the ranks in
 * order: rank q owns [bucket_first[q], bucket_first[q + 1]). Every rank's send buffer holds
 * its buckets one after another (bucket 0 first, counts[b] elements each). Dispatch leaves in
 * rank q's recv, sender by sender (0, 1, ...), that sender's elements of q's buckets in
 * bucket order; with `by_bucket`, bucket by bucket instead (every sender's elements of the
 * bucket, sender 0 first), so each of q's buckets is one contiguous run of rows, as a grouped
 * expert GEMM reads them. Every rank passes the same bucket_first.
 *
 * No rank holds the [size][buckets] count matrix: before the data, every sender writes each
 * owner its counts of the owner's buckets, and every owner writes each sender where its
 * elements of each bucket land and every bucket's total (docs/noc-driver.md, "All-to-all-v").
 * A rank keeps what it learnt in `words` (the caller's storage of noc_a2av_plan_words words,
 * noc/coll_sizes.h): the combine sends every block back from where the dispatch put it, and a
 * caller may copy the words away and back between the two (the plan is then the same).
 */
struct noc_alltoallv_plan {
    uint32_t buckets;
    const uint32_t *bucket_first; /* [size + 1]: 0, ..., buckets (non-decreasing) */
    uint32_t *words;              /* filled by dispatch, read by combine and the queries */
    uint32_t capacity;            /* words of storage */
    bool by_bucket;               /* recv layout: bucket-major (else sender-major); the same
                                     on every rank */
};
struct noc_alltoallv_args {
    const uint32_t *counts;       /* dispatch: buckets entries (in this core's SRAM) */
    uint64_t send, recv;          /* this rank's buffers (global SRAM addresses) */
    uint64_t recv_capacity;       /* elements recv can hold */
    enum npu_dtype dtype;
};
int noc_alltoallv_dispatch(struct noc_comm *c, const struct noc_alltoallv_args *a,
                           struct noc_alltoallv_plan *plan);
int noc_alltoallv_combine(struct noc_comm *c, const struct noc_alltoallv_args *a,
                          const struct noc_alltoallv_plan *plan);
/* After a dispatch, on the rank that made it. Every sender's elements of bucket b (any b): */
uint64_t noc_alltoallv_total(const struct noc_alltoallv_plan *p, uint32_t b);
/* Sender i's elements of bucket b, and their element offset in this rank's recv; b one of
   this rank's buckets (else an assertion). */
uint32_t noc_alltoallv_count(const struct noc_alltoallv_plan *p, uint32_t i, uint32_t b);
uint64_t noc_alltoallv_recv_offset(const struct noc_alltoallv_plan *p, uint32_t i, uint32_t b);

/* Bytes at the top of every core's SRAM that the driver keeps for its mailboxes: the
   applications' SRAM ends at sram_size - this. */
uint64_t noc_reserved_bytes(void);

#endif
