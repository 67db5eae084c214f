/* SPDX-License-Identifier: MIT */
/* Internals shared by the collectives (noc/collective.h). */
#ifndef NOC_COLL_INTERNAL_H
#define NOC_COLL_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "noc/collective.h"
#include "npu_structs.h"

/* Driver semaphores of a slot: NOC_SEM_USER_END + 9 * slot + one of these. */
enum coll_sem {
    COLL_SEM_HDR,      /* +1 per header landed in this core's mailbox */
    COLL_SEM_ARRIVE0,  /* +1 per data segment landed in phase 0 of a collective, ... */
    COLL_SEM_ARRIVE1,  /* one per phase: a neighbour may send a later phase's data */
    COLL_SEM_ARRIVE2,  /* before this core is done with an earlier phase (2-D */
    COLL_SEM_ARRIVE3,  /* all-reduce: the column predecessor runs its own rows) */
    COLL_SEM_VDONE,    /* +1 per reduction of this core done */
    COLL_SEM_CREDIT,   /* +1 per receive slot the next rank has freed */
    COLL_SEM_SENT,     /* +1 per data write of this core landed (acknowledged) */
    COLL_SEM_COUNTS,   /* +1 per M2N or all-to-all-v count row landed */
    COLL_SEM_PER_SLOT,
};
#define COLL_PHASES_MAX 4u /* the 2-D all-reduce: columns, rows, rows, columns */

enum coll_kind {
    COLL_BARRIER = 1,
    COLL_BROADCAST,
    COLL_ALLGATHER,
    COLL_REDUCE_SCATTER,
    COLL_ALLREDUCE,
    COLL_ALLTOALL,
    COLL_M2N_DISPATCH,
    COLL_M2N_COMBINE,
    COLL_ALLGATHER_ROWS, /* line collectives of a MESH2D group (noc_allgather_line, ...) */
    COLL_ALLGATHER_COLS,
    COLL_ALLREDUCE_ROWS,
    COLL_ALLREDUCE_COLS,
    COLL_A2AV_DISPATCH, /* all-to-all-v by buckets (noc_alltoallv_dispatch, ...) */
    COLL_A2AV_COMBINE,
    COLL_ALLGATHER_BLOCKS, /* column blocks into place (noc_allgather_blocks) */
    COLL_EXCHANGE_BLOCKS,  /* named blocks to named ranks (noc_exchange_blocks) */
};

/* A line collective: its all-gather may multicast (coll_mcast_line_fits), so its header
   carries the communicator's all-gather algorithm too, judged alike on every rank. */
static inline bool coll_kind_is_line(enum coll_kind kind)
{
    return kind >= COLL_ALLGATHER_ROWS && kind <= COLL_ALLREDUCE_COLS;
}

/* Local checks a rank reports in its header (0: passed). */
enum coll_fault {
    COLL_OK = 0,
    COLL_BAD_BUFFER,   /* a buffer outside this core's SRAM (or in the driver's part) */
    COLL_BAD_ARGS,     /* zero count, unknown dtype, root or senders out of range */
    COLL_BAD_COUNTS,   /* M2N, all-to-all-v: more than NOC_M2N_PAIRS_MAX counts, or a plan
                          too small */
    COLL_BUSY,         /* the caller keeps too many descriptors queued on NoC or vector */
    COLL_ABORT,        /* this rank gave up waiting for the others' headers */
};

/* What every rank multicasts before a collective (64 bytes, in every member's mailbox). */
struct coll_header {
    uint32_t magic;
    uint32_t seq;
    uint8_t kind, dtype, placement, fault;
    uint16_t rank, size;
    struct noc_rect rect;
    uint32_t root;            /* broadcast root; M2N senders; all-to-all-v: bucket map hash;
                                 reductions: enum noc_reduce_op */
    uint32_t capacity;        /* M2N receiver, all-to-all-v: recv_capacity (elements) */
    uint64_t count;
    uint64_t buf, buf2;       /* this rank's buffers (global addresses) */
    uint64_t scratch;         /* this rank's scratch (tokens land there) */
};
_Static_assert(sizeof(struct coll_header) == 64, "coll_header is one 64-byte slot");
#define COLL_MAGIC 0x4c4f434eu /* "NCOL" */
#define COLL_COUNT_MAX (1ull << 40) /* elements: more than any SRAM holds */

/* What the semaphores of a slot of this core should read once everything issued has
   happened (the driver's bookkeeping; one per core and slot). */
struct coll_expect {
    uint32_t hdr, arrive[COLL_PHASES_MAX], vdone, credit, sent, counts;
    bool broken;              /* a timeout left the slot's semaphores out of step */
};
struct coll_expect *coll_expect_of(const struct noc_comm *c);

/* The descriptor stream of one rank's collective: batches submitted with flow control. */
struct coll_stream {
    struct noc_comm *c;
    uint32_t n;               /* descriptors in the batch */
    uint64_t deadline_ps;     /* no wait of this phase goes past it */
    bool failed;              /* a wait hit the deadline: nothing more is submitted */
};

uint32_t coll_sem(const struct noc_comm *c, enum coll_sem s);
/* ARRIVE of the current phase, and the bank of receive slots it uses. */
uint32_t coll_arrive_sem(const struct noc_comm *c);
uint32_t *coll_arrive_expect(const struct noc_comm *c);
uint64_t coll_slot_addr(const struct noc_comm *c, uint64_t scratch, uint32_t q);
uint32_t coll_elem_bytes(enum npu_dtype dt);
/* The headers of the current collective (every rank's), valid after coll_agree. */
const struct coll_header *coll_headers(const struct noc_comm *c);
/* This core's mailbox of the current collective's parity: counts area for M2N. */
uint32_t *coll_counts_area(const struct noc_comm *c);
uint64_t coll_counts_offset(const struct noc_comm *c);

/* Submits multicast m (its rectangle filled here) to every rectangle of the group: one
   descriptor, or two for a pair group (d holds them until the engine has them). */
struct noc_multicast_args;
int coll_multicast_group(const struct noc_comm *c, struct noc_multicast_args *m,
                         struct npu_desc d[2]);

/* Marks the communicator's slot broken on this core (a timeout: counts out of step). */
void coll_break(struct noc_comm *c);
/* Agreement: exchange headers, judge them; NPU_OK or the error every rank returns. */
int coll_agree(struct noc_comm *c, struct coll_header *mine);
/* A header with this rank's fields filled; the caller adds the collective's. */
void coll_header_init(const struct noc_comm *c, struct coll_header *h, enum coll_kind kind);
/* COLL_OK if `count` elements of `elem_bytes` from addr lie inside this core's SRAM, below
   the driver's mailboxes and clear of the communicator's scratch (no overflow). */
enum coll_fault coll_check_buffer(const struct noc_comm *c, uint64_t addr, uint64_t count,
                                  uint64_t elem_bytes);

/* The descriptor stream. */
void coll_stream_begin(struct coll_stream *st, struct noc_comm *c);
struct npu_desc *coll_stream_next(struct coll_stream *st, enum npu_engine engine);
int coll_stream_flush(struct coll_stream *st);
/* Flushes, then waits until everything expected of this phase has happened, and moves on to
   the next phase. NPU_ERR_TIMEOUT (the communicator is then broken) past the deadline. */
int coll_stream_finish(struct coll_stream *st);
/* The end of a collective: the sequence number moves on; counters near wrapping restart. */
void coll_done(struct noc_comm *c);

/* Appends a NoC write of `bytes` (0: a token into the destination's token area) that
   signals ARRIVE of the current phase on `dst_core` and SENT here. */
struct coll_write {
    uint64_t src, dst;
    uint64_t bytes;
    uint32_t dst_core;
    bool wait;                /* gate on local semaphore wait_sem >= wait_value */
    uint32_t wait_sem, wait_value;
    bool wait2;
    uint32_t wait2_sem, wait2_value;
    bool keep_data;           /* metadata: the bytes move in performance mode too */
};
void coll_emit_write(struct coll_stream *st, const struct coll_write *w);
/* Writes [src, src + bytes) to dst on dst_core in segments (none if bytes is 0). */
void coll_emit_block(struct coll_stream *st, uint64_t src, uint64_t dst, uint64_t bytes,
                     uint32_t dst_core);
/* Segments of a block of `bytes`. */
uint32_t coll_segments(const struct noc_comm *c, uint64_t bytes);
/* M2N and all-to-all-v: `row` (entries counts, in this core's SRAM; NULL: this rank sends
   none) is multicast to every member's counts area at entry rank x entries; waits until
   `rows` rows have landed here. */
int coll_exchange_counts(struct noc_comm *c, const uint32_t *row, uint32_t entries,
                         uint32_t rows);

/* Ring phases over `ring` (ranks in ring order; this rank at position `pos`). Parts k =
   [bounds[k], bounds[k + 1]) elements of buf (each rank's buf from its header). A phase
   returns when all of its traffic has landed, so the next phase needs no gate. */
struct coll_ring {
    const uint16_t *ranks;
    uint32_t len, pos;
    const uint64_t *bounds;   /* len + 1 element offsets */
    enum npu_dtype dtype;
    enum noc_reduce_op op;    /* reduce-scatter: how the parts combine */
};
int coll_ring_allgather(struct noc_comm *c, const struct coll_ring *r);
/* Multicast all-gather of the whole group (coll_mcast.c): usable when the communicator
   allows it and every rank's buffer is at the same SRAM offset (agreed headers). */
bool coll_mcast_fits(const struct noc_comm *c);
int coll_mcast_allgather(struct noc_comm *c, uint64_t count, enum npu_dtype dtype);
/* One multicast of rows x row_bytes from src (src_stride apart) to dst_offset (dst_stride
   apart) in the SRAM of every core of rectangle r (`members` of the group, the sender
   included); each landing counts on ARRIVE there, and on this rank's SENT. */
int coll_mcast_rect(struct noc_comm *c, struct coll_stream *st, const struct noc_rect *r,
                    uint32_t members, uint64_t src, uint64_t dst_offset, uint32_t rows,
                    uint64_t row_bytes, uint64_t src_stride, uint64_t dst_stride);
/* The rectangle of the mesh that the cores of ranks[0, len) fill exactly (a MESH2D grid
   laid over its rectangle row by row: a grid row or column is a row or column of cores), if
   they do. */
bool coll_line_rect(const struct noc_comm *c, const uint16_t *ranks, uint32_t len,
                    struct noc_rect *out);
/* Multicast all-gather of one grid line (ring r: the line's ranks, this rank's position,
   the chunks' bounds): usable when the communicator allows it, the line's cores fill a
   rectangle of the mesh (*rect) and the line's buffers sit at one SRAM offset. */
bool coll_mcast_line_fits(const struct noc_comm *c, const struct coll_ring *r,
                          struct noc_rect *rect);
int coll_mcast_line_allgather(struct noc_comm *c, const struct coll_ring *r,
                              const struct noc_rect *rect);
/* Multicast of this rank's column block (noc_allgather_blocks) into every rank's dst. */
int coll_mcast_allgather_blocks(struct noc_comm *c, const struct noc_gather_blocks_args *a);
int coll_ring_reduce_scatter(struct noc_comm *c, const struct coll_ring *r);

/* Scratch layout: tokens at 0, header staging at 512, two banks of receive slots from 1024
   (consecutive phases use different banks: the next phase's data may land early). */
#define COLL_SCRATCH_TOKENS 0u
#define COLL_SCRATCH_HEADER 512u
#define COLL_SCRATCH_SLOTS 1024u

#endif
