/* SPDX-License-Identifier: MIT */
/*
 * The engines of every core and their command queues (docs/engines.md).
 *
 * Firmware writes an array of struct npu_desc into its SRAM and submits it with one command.
 * Each descriptor goes to the queue of its engine (matrix, vector, DMA, NoC); an engine runs
 * its queue in order, one descriptor at a time. A descriptor may wait until a local
 * semaphore reaches a value before it starts, and may add to a semaphore of any core when it
 * completes, so that transfers and compute overlap without the hart.
 *
 * Timing: the matrix and vector engines take the cycles of their formulas (matrix_engine.h,
 * vector_engine.h); DMA and NoC transfers are flows in a max-min fair bandwidth model
 * (flow_net.h) over the core's HBM channel (or, with HBM stacks on the mesh edge, the NoC
 * route to its stack and the stack) or the XY route of NoC links, plus a fixed latency. Effects on memory are applied when a descriptor completes.
 *
 * Modes: functional (engines compute on the guest's bytes) or performance (timing, traffic
 * and counters only; guest memory untouched).
 *
 * Not modelled yet: multicast, NoC reads, energy, firmware-visible counters; see
 * docs/engines.md.
 */
#ifndef CHIP_ENGINES_H
#define CHIP_ENGINES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chip_clock.h"
#include "chip_mem.h"
#include "flow_net.h"
#include "npu_enums.h"
#include "npu_structs.h"

/* What differs between a base core and an alt core (chip_config.h, heterogeneous cores). */
struct chip_engine_sizes {
    uint32_t sa_rows, sa_cols, sram_bytes_per_cycle, vec_lanes;
    uint64_t hbm_bytes_per_s;           /* its HBM channel (no stacks) */
};

struct chip_engine_cfg {
    uint32_t sa_rows, sa_cols;          /* systolic array of the matrix engine */
    uint32_t sram_bytes_per_cycle;      /* SRAM bandwidth a matrix engine can use */
    uint32_t vec_lanes, vec_alus_per_lane, vec_pipeline_cycles;
    uint64_t hbm_bytes_per_s;           /* per core (its HBM channel), if no stacks */
    uint32_t hbm_stacks;                /* 0: a channel per core; else stacks on the west edge */
    uint64_t hbm_stack_bytes_per_s;
    uint32_t hbm_latency_cycles;
    uint64_t noc_link_bytes_per_s;      /* per link and direction */
    bool functional;                    /* false: performance mode */
    bool congestion_free;               /* flows do not share bandwidth */
    /* Heterogeneous cores: alt_core[c] (copied at init; NULL: none) gives core c the sizes
       in alt instead of the fields above. */
    const bool *alt_core;
    struct chip_engine_sizes alt;
    /* Called when a descriptor with NPU_DESC_IRQ completes on `core` (chip time, no hart
       running); may be NULL. */
    void (*on_irq)(void *opaque, uint32_t core);
    void *opaque;
    /* Every descriptor run goes to this log when it ends (NULL: none; chip_engine_log.h). */
    struct chip_engine_log *log;
};

struct chip_engine_counters {
    uint64_t descs;      /* descriptors completed */
    uint64_t busy_ps;    /* chip time the engine was running a descriptor */
    uint64_t flops;      /* matrix: 2 * M * N * K */
    uint64_t bytes;      /* DMA / NoC: bytes moved */
    uint64_t elements;   /* vector: elements processed */
    uint64_t alu_ops;    /* vector: ALU operations (elements x the op's cost) */
    uint64_t errors;     /* descriptors whose arithmetic the library refused, gathers whose
                            index list left the range after the check at submit */
    uint64_t sram_bytes; /* bytes this engine read or wrote in SRAM (any core's) */
    uint64_t hbm_bytes;  /* DMA: bytes read or written in HBM */
    uint64_t noc_byte_hops; /* NoC: bytes times router hops */
};

struct chip_engine_slot;

/* The bytes [lo, hi) a GEMM command's operands A, B and C span (batch strides included). */
struct chip_gemm_extent {
    uint64_t lo[3], hi[3];
};

#define CHIP_MATRIX_RECENT 8u /* covers a fill and drain of R + C - 2 behind folds of R
                                  cycles each, for arrays up to C = 6R */

struct chip_engine_queue {
    struct chip_engine_slot *ring; /* capacity grows up to NPU_ENGINE_QUEUE_MAX */
    uint32_t cap, head, len;
    bool busy;              /* the head descriptor is running */
    uint64_t started_ps;
    uint32_t flow;          /* DMA / NoC: flow of the running descriptor ... */
    /* matrix: the last commands run and when each ended, newest first (a command queued
       behind them may flow through the array right after the newest: it must not touch
       what any of them whose results were still draining writes) */
    uint32_t nrecent, newest; /* entries in use; the newest's index (a ring) */
    bool next_ready;        /* the command behind the newest was ready (queued, its waits
                               met) when the newest started */
    uint64_t second_met_ps; /* when the command behind the one running became ready (its
                               start if next_ready; UINT64_MAX: not yet) */
    struct chip_gemm_extent recent[CHIP_MATRIX_RECENT];
    uint64_t recent_end_ps[CHIP_MATRIX_RECENT];
    uint64_t latency_cycles; /* ... and the latency added after it */
    struct chip_engine_counters count;
};

struct chip_engines {
    struct chip_clock *clock;
    struct chip_engine_cfg cfg;
    struct chip_mem mem;
    uint32_t ncores, rows, cols;
    struct chip_engine_queue *queues;   /* [core * NPU_ENGINE_COUNT + engine] */
    bool *alt_core;                     /* [core]: uses cfg.alt (NULL: every core base) */
    struct chip_engine_sizes sizes[2];  /* [0]: the base fields of cfg, [1]: cfg.alt */
    struct flow_net net;                /* HBM channels or stacks, then NoC links */
    uint32_t nhbm;                      /* HBM resources: cores, or stacks */
    uint32_t *flow_owner;               /* flow id -> queue index */
    uint32_t flow_owner_cap;
    uint64_t flow_gen;                  /* bumps whenever the next completion may move */
    bool flow_pending;                  /* an EV_FLOW of generation flow_gen is queued ... */
    uint64_t flow_ev_ps, flow_ev_seq;   /* ... at this time, with this sequence number */
};

int chip_engines_init(struct chip_engines *e, struct chip_clock *clock,
                      const struct chip_engine_cfg *cfg, const struct chip_mem *mem);
void chip_engines_destroy(struct chip_engines *e);

/*
 * Command: hart `core` submits `count` descriptors read from its SRAM at desc_addr, at its
 * local time. All are validated first; on any error none is queued and `err` names the
 * descriptor and the problem (NPU_ERR_RANGE for addresses, NPU_ERR_INVAL otherwise,
 * NPU_ERR_NOMEM when a queue is full).
 */
int chip_engines_submit(struct chip_engines *e, uint32_t core, uint64_t desc_addr,
                        uint32_t count, char *err, size_t errlen);

/* The engine sizes of a core: the base fields of the config, or alt for an alt core. */
const struct chip_engine_sizes *chip_engines_core_sizes(const struct chip_engines *e,
                                                        uint32_t core);

/* Descriptors queued or running on one engine of a core. */
uint32_t chip_engines_pending(const struct chip_engines *e, uint32_t core,
                              enum npu_engine engine);

const struct chip_engine_counters *chip_engines_counters(const struct chip_engines *e,
                                                         uint32_t core,
                                                         enum npu_engine engine);

/* Hooks for struct chip_clock_params (unit = the chip_engines). */
void chip_engines_on_event(void *unit, const struct evq_event *ev);
void chip_engines_on_sem_change(void *unit, uint32_t core, uint32_t sem);

/* The HBM stack a core uses and the core whose router the stack is attached to. */
uint32_t chip_engines_hbm_stack(const struct chip_engines *e, uint32_t core,
                                uint32_t *router_core);

/* Index of the NoC link leaving router (row, col) in direction dir (0 E, 1 W, 2 S, 3 N). */
uint32_t chip_engines_link(const struct chip_engines *e, uint32_t row, uint32_t col,
                           uint32_t dir);

#endif
