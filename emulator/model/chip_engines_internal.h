/* SPDX-License-Identifier: MIT */
/*
 * Between the engine queues (chip_engines.c) and what each engine does with a descriptor
 * (chip_engine_ops.c): checking it at submit, timing it at start, applying it at the end.
 */
#ifndef CHIP_ENGINES_INTERNAL_H
#define CHIP_ENGINES_INTERNAL_H

#include "chip_engines.h"

/* A queued descriptor and the chip time from which it may start (its submit time). */
struct chip_engine_slot {
    struct npu_desc d;
    uint64_t ready_ps;
};

/* Resources one transfer may cross: a multicast tree over a 32 x 32 mesh has 1023 links. */
#define CHIP_PATH_MAX 2048u

/* How a descriptor runs: for `cycles` of its engine, or as a transfer over `path`. */
struct chip_engine_plan {
    bool is_flow;
    uint64_t cycles;          /* compute engines */
    uint64_t piped_cycles;    /* matrix: the cycles when it follows an independent command
                                 through the array (chip_engine_gemm_independent) */
    uint32_t path[CHIP_PATH_MAX]; /* transfers: resources crossed (HBM channel, NoC links) */
    uint32_t path_len;
    uint64_t bytes;
    uint64_t latency_cycles;  /* added after the transfer */
};

/* Checks everything a descriptor names against the chip; err names the problem. */
int chip_engine_desc_check(const struct chip_engines *e, uint32_t core,
                           const struct npu_desc *d, char *err, size_t errlen);

/* How a checked descriptor runs. */
void chip_engine_desc_plan(const struct chip_engines *e, uint32_t core,
                           const struct npu_desc *d, struct chip_engine_plan *plan);
/* The operands' extents of GEMM command d (false if its shape is invalid). */
bool chip_engine_gemm_extent(const struct npu_desc *d, struct chip_gemm_extent *x);
/* Whether two GEMM commands are independent: neither reads nor writes what the other
   writes (then the later may flow through the array right behind the earlier's last fold:
   docs/engines.md). */
bool chip_engine_gemm_independent(const struct chip_gemm_extent *a,
                                  const struct chip_gemm_extent *b);

/* The vector engine (chip_engine_vector.c). */
int chip_engine_vector_check(const struct chip_engines *e, uint32_t core,
                             const struct npu_desc *d, char *err, size_t errlen);
uint64_t chip_engine_vector_cycles(const struct chip_engines *e, uint32_t core,
                                   const struct npu_desc *d);
/* Bytes a vector descriptor reads and writes in SRAM (its operands' element data). */
uint64_t chip_engine_vector_bytes(const struct npu_desc *d);
uint64_t chip_engine_vector_alu_ops(const struct npu_desc *d);
/* Runs the arithmetic; 0 or the library's refusal (counted as an engine error). */
int chip_engine_vector_run(const struct chip_engines *e, const struct npu_desc *d);

/* The DMA engine's queues (chip_engine_dma.c): copies and gathers. */
int chip_engine_dma_check(const struct chip_engines *e, uint32_t core, const struct npu_desc *d,
                          char *err, size_t errlen);
void chip_engine_dma_plan(const struct chip_engines *e, uint32_t core, const struct npu_desc *d,
                          struct chip_engine_plan *plan);
/* Counters and (functional mode, or KEEP_DATA) the data of a completed DMA descriptor. */
void chip_engine_dma_finish(struct chip_engines *e, uint32_t core, const struct npu_desc *d,
                            struct chip_engine_counters *count);

/* The NoC endpoint (chip_engine_noc.c). */
int chip_engine_noc_check(const struct chip_engines *e, uint32_t core,
                          const struct npu_desc *d, char *err, size_t errlen);
void chip_engine_noc_plan(const struct chip_engines *e, uint32_t core, const struct npu_desc *d,
                          struct chip_engine_plan *plan);
void chip_engine_noc_finish(struct chip_engines *e, uint32_t core, const struct npu_desc *d,
                            uint64_t now, struct chip_engine_counters *count);

/* Adds the XY route from core a to core b to a plan; with `seen` (a byte per link), only the
 * links not already in it (for multicast trees). */
void chip_engine_route_add(const struct chip_engines *e, uint32_t a, uint32_t b, uint8_t *seen,
                           struct chip_engine_plan *plan);

/* Posts d's SIGNAL (to signal_core) and SIGNAL2 semaphores, leaving from core `from`. */
void chip_engine_desc_signal(struct chip_engines *e, uint32_t from, const struct npu_desc *d,
                             uint64_t now, uint32_t signal_core);

/*
 * Applies a descriptor completed at chip time `now`: memory (functional mode), counters,
 * and its SIGNAL and SIGNAL2 (from the core where the data landed: a NoC write's increment
 * travels with the data).
 */
void chip_engine_desc_finish(struct chip_engines *e, uint32_t core, const struct npu_desc *d,
                             uint64_t now, struct chip_engine_counters *count);

#endif
