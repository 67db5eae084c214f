/* SPDX-License-Identifier: MIT */
/* The checks every NPU core runs in the `collectives` test image (docs/noc-driver.md). */
#ifndef COLL_CHECKS_H
#define COLL_CHECKS_H

#include <stdbool.h>
#include <stdint.h>

#include "core_checks.h"
#include "noc/collective.h"

enum coll_check {
    CCHECK_PLACEMENT,  /* placements: members, distinct cores, hop bounds */
    CCHECK_BARRIER,
    CCHECK_BROADCAST,
    CCHECK_ALLGATHER,
    CCHECK_REDUCE_SCATTER,
    CCHECK_ALLREDUCE,
    CCHECK_ALLTOALL,
    CCHECK_M2N,
    CCHECK_ALLTOALLV,  /* all-to-all-v by buckets (MoE dispatch over the whole group) */
    CCHECK_API,        /* async write/read, barriers, semaphores, multicast, circular buffer */
    CCHECK_MISMATCH,   /* counts that differ across ranks fail on every rank */
    CCHECK_BAD_BUFFER, /* a buffer outside SRAM fails on every rank */
    CCHECK_BAD_GROUP,  /* a rank with another group: every rank fails, nobody hangs */
    CCHECK_LINES,      /* all-gather and all-reduce along the rows or columns of a grid */
    CCHECK_EXCHANGE,   /* exchange of named blocks */
    CCHECK__COUNT
};

static const char *const ccheck_names[CCHECK__COUNT] = {
    [CCHECK_PLACEMENT] = "placements map ranks to distinct cores of the rectangle; ring steps "
                         "1 hop (closed snake), interleaved and mesh2d steps <= 2 hops",
    [CCHECK_BARRIER] = "barrier on every placement and group size",
    [CCHECK_BROADCAST] = "broadcast matches the root's buffer exactly",
    [CCHECK_ALLGATHER] = "all-gather matches every rank's chunk exactly",
    [CCHECK_REDUCE_SCATTER] = "reduce-scatter matches the host sum in the documented order "
                              "(bit exact, bf16 and fp32)",
    [CCHECK_ALLREDUCE] = "all-reduce matches the host sum in the documented order (bit exact)",
    [CCHECK_ALLTOALL] = "all-to-all delivers every block exactly",
    [CCHECK_M2N] = "M2N dispatch with variable sizes (zeros included) and combine back",
    [CCHECK_ALLTOALLV] = "all-to-all-v by buckets: every (sender, bucket) block where "
                         "noc_alltoallv_recv_offset says, ranks owning no bucket included, "
                         "every bucket's total known to every rank, and the receivers' "
                         "changes combined back into the send buffers",
    [CCHECK_API] = "NoC API: async write/read with barriers, remote semaphore inc/set, "
                   "multicast, circular buffer with wrap-around",
    [CCHECK_MISMATCH] = "counts that differ across ranks, all-to-all-v bucket maps that "
                        "differ or blocks over a recv_capacity: NPU_ERR_INVAL on every rank",
    [CCHECK_BAD_BUFFER] = "a buffer outside SRAM: NPU_ERR_RANGE on every rank",
    [CCHECK_BAD_GROUP] = "a rank calling with another group: every rank fails, none hangs",
    [CCHECK_LINES] = "line collectives: all-gather and all-reduce along every row or column "
                     "of a mesh2d grid (bit exact); refused on a ring group",
    [CCHECK_EXCHANGE] = "exchange of named 2-D blocks, unicast and multicast to grid "
                        "columns: exactly the senders' slots change; deliveries sent and "
                        "expected that differ, a block past the buffer or a multicast "
                        "without its declaration: refused on every rank",
};

/* One collective case run by the members of each group tiled over the mesh. */
struct coll_case {
    enum noc_placement placement;
    uint32_t rows, cols;       /* the group's rectangle */
    uint32_t kind;             /* enum coll_check of the collective */
    uint64_t count;
    enum npu_dtype dtype;
    uint32_t variant;          /* CCHECK_LINES: COLL_LINE_* bits */
    enum noc_gather_algo gather; /* the communicator's all-gather algorithm */
    bool stagger;              /* rank r's buffer 64 r bytes further: offsets differ, so
                                  NOC_GATHER_AUTO must fall back to the ring */
    enum noc_reduce_op op;     /* reductions: sum or maximum */
    bool blocks;               /* all-gather: noc_allgather_blocks over a [3][count + 5]
                                  matrix (the ring algorithm must refuse it) */
};
#define COLL_LINE_COLS 1u      /* along the columns (else the rows) */
#define COLL_LINE_REDUCE 2u    /* all-reduce (else all-gather) */

/* Runs case `cs` on this core if it belongs to one of its groups; checks the result. */
void coll_case_run(const struct coll_case *cs, uint64_t data, uint64_t scratch);
void coll_api_check(uint64_t data);
void coll_error_checks(uint64_t data, uint64_t scratch);
/* The line collectives (coll_lines.c): every case, and one case on this core's comm. */
void coll_lines_cases(uint64_t data);
void coll_lines_run(const struct coll_case *cs, struct noc_comm *comm, uint64_t buf);
/* The exchange of named blocks (coll_exchange.c). */
void coll_exchange_cases(uint64_t data);
void coll_exchange_run(const struct coll_case *cs, struct noc_comm *comm, uint64_t data);

#endif
