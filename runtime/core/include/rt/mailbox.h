/* SPDX-License-Identifier: MIT */
/*
 * The control core's iteration mailboxes (docs/serving.md, "Control core and cores"): one
 * per instance of the plan (npu_plan.instances; one unless PD disaggregation runs), at
 * fixed offsets of the control core's DRAM, written by one side at a time and handed over
 * by semaphores, so who reads what is fixed by the chip clock, not by QEMU's scheduling of
 * the harts:
 *   1. the control core writes the iteration (cmd RUN) and adds 1 to RT_SEM_GO of every
 *      core of the instance; 2. each core waits for RT_SEM_GO >= its round count, reads the
 *      mailbox, runs the iteration (first pulling the KV of runs marked RT_MB_PULL from the
 *      prefill instance's cores); rank 0 of the last stage writes the tokens; each core
 *      (engine_trace: after writing its engines' busy time) adds 1 to RT_SEM_GATHER of the
 *      instance's lead core (rank 0 of stage 0), which, once all have, sets the control
 *      core's RT_SEM_ANSWER0 + instance to the round and then adds 1 to its RT_SEM_DONE (the
 *      two land at the same chip time, in that order); 3. the control core, woken by
 *      RT_SEM_DONE, reads the outputs of the instances whose answer semaphore caught up with
 *      their round, and only then writes their next iterations. cmd STOP ends the cores'
 *      loop: they report and answer once more through the same gather.
 * The trace blob (rt/trace_blob.h) is loaded at RT_TRACE_DRAM_OFFSET.
 */
#ifndef RT_MAILBOX_H
#define RT_MAILBOX_H

#include <stdint.h>

#include "npu_image.h"
#include "npu_limits.h"

#define RT_MAILBOX_DRAM_OFFSET (12u << 20)
#define RT_MAILBOX_BYTES (512u << 10) /* one instance's */
#define RT_MB_INSTANCES_MAX 8u
#define RT_TRACE_DRAM_OFFSET NPU_TRACE_DRAM_OFFSET /* npu_limits.h */

#define RT_SEM_GO 2u     /* on each NPU core: rounds posted (1 is the interpreter's) */
#define RT_SEM_GATHER 6u /* on an instance's lead core: its other cores' rounds done */
#define RT_SEM_DONE 1u   /* on the control core: rounds done, summed over the instances */
#define RT_SEM_ANSWER0 3u /* on the control core, + instance: its last round done */

#define RT_MB_RUNS_MAX NPU_IMAGE_RUNS_MAX /* runs per iteration (npu_image.h) */
#define RT_MB_BLOCKS_MAX (2u * NPU_KV_BLOCKS_MAX) /* two caches' worth: a pull lists the
                                                     prefill side's blocks too */
#define RT_MB_TOKENS_MAX NPU_ITER_TOKENS_MAX
#define RT_MB_CORES_MAX (NPU_MESH_DIM_MAX * NPU_MESH_DIM_MAX)

enum rt_mb_cmd { RT_MB_RUN = 1, RT_MB_STOP = 2 };
enum rt_mb_run_flags { RT_MB_PREFILL = 1u, RT_MB_WANTS_TOKEN = 2u, RT_MB_PULL = 4u };

struct rt_mb_run {
    uint32_t req, pos, count, flags;
    uint32_t token_first;       /* its token ids: tokens[token_first .. + count) */
    uint32_t block_first;       /* its SRAM blocks: blocks[block_first .. + nblocks) */
    uint32_t nblocks;           /* positions [0, nblocks x kv_block) are in these blocks */
    uint32_t reserved;
    uint64_t ring_row;          /* the rest at ring row ring_row + position */
    /* RT_MB_PULL: positions [0, pos) are first copied from the same rank and stage of
       instance pull_instance, where they sit in blocks[pull_block_first .. + pull_nblocks)
       and then at ring row pull_ring_row + position */
    uint32_t pull_instance, pull_block_first, pull_nblocks, reserved2;
    uint64_t pull_ring_row;
};

struct rt_mailbox {
    uint32_t seq;               /* iteration number, from 1 */
    uint32_t cmd;               /* enum rt_mb_cmd */
    uint32_t nruns, nprefill;   /* runs [0, nprefill) are prefill runs ... */
    uint32_t layer0, layer1;    /* ... of layers [layer0, layer1) */
    uint32_t engine_trace;      /* 1: cores report their engines' busy time */
    uint32_t failed;            /* set (to 1, by any core) when an iteration failed */
    struct rt_mb_run runs[RT_MB_RUNS_MAX];
    uint32_t out_token[RT_MB_RUNS_MAX];  /* rank 0: run i's token (wants_token runs) */
    float out_logit[RT_MB_RUNS_MAX];
    uint64_t busy_ps[RT_MB_CORES_MAX][4]; /* core c: matrix, vector, dma (both queues),
                                             noc busy time */
    uint32_t blocks[RT_MB_BLOCKS_MAX];
    uint32_t tokens[RT_MB_TOKENS_MAX];
};

_Static_assert(sizeof(struct rt_mailbox) <= RT_MAILBOX_BYTES, "the mailbox fits its region");
_Static_assert(RT_SEM_ANSWER0 + RT_MB_INSTANCES_MAX <= 12u, "application semaphores");
_Static_assert(RT_MAILBOX_DRAM_OFFSET + RT_MB_INSTANCES_MAX * RT_MAILBOX_BYTES <=
               RT_TRACE_DRAM_OFFSET, "the mailboxes end where the trace starts");

static inline struct rt_mailbox *rt_mailbox_at(uint64_t dram_base, uint32_t instance)
{
    return (struct rt_mailbox *)(uintptr_t)(dram_base + RT_MAILBOX_DRAM_OFFSET +
                                            (uint64_t)instance * RT_MAILBOX_BYTES);
}

#endif
