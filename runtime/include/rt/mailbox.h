/* SPDX-License-Identifier: MIT */
/*
 * The control core's iteration mailbox (docs/serving.md, "Control core and cores"): one
 * region at a fixed offset of the control core's DRAM, written by one side at a time and
 * handed over by semaphores, so who reads what is fixed by the chip clock, not by QEMU's
 * scheduling of the harts:
 *   1. the control core writes the iteration (cmd RUN) and adds 1 to RT_SEM_GO of every
 *      core of the plan; 2. each core waits for RT_SEM_GO >= its iteration count, reads the
 *      mailbox, runs the iteration; rank 0 writes the tokens; each core (engine_trace: after
 *      writing its engines' busy time) adds 1 to the control core's RT_SEM_DONE; 3. the
 *      control core waits for RT_SEM_DONE to reach the plan's cores x iterations and only then
 *      reads the outputs and writes the next iteration. cmd STOP ends the cores' loop.
 * The trace blob (rt/trace_blob.h) is loaded at RT_TRACE_DRAM_OFFSET.
 */
#ifndef RT_MAILBOX_H
#define RT_MAILBOX_H

#include <stdint.h>

#define RT_MAILBOX_DRAM_OFFSET (12u << 20)
#define RT_MAILBOX_BYTES (4u << 20)
#define RT_TRACE_DRAM_OFFSET (16u << 20)

#define RT_SEM_GO 2u    /* on each NPU core: iterations posted (1 is the interpreter's) */
#define RT_SEM_DONE 1u  /* on the control core: iterations done, summed over the cores */

#define RT_MB_RUNS_MAX 64u
#define RT_MB_BLOCKS_MAX 65536u
#define RT_MB_TOKENS_MAX 131072u
#define RT_MB_CORES_MAX 1024u

enum rt_mb_cmd { RT_MB_RUN = 1, RT_MB_STOP = 2 };
enum rt_mb_run_flags { RT_MB_PREFILL = 1u, RT_MB_WANTS_TOKEN = 2u };

struct rt_mb_run {
    uint32_t req, pos, count, flags;
    uint32_t token_first;       /* its token ids: tokens[token_first .. + count) */
    uint32_t block_first;       /* its SRAM blocks: blocks[block_first .. + nblocks) */
    uint32_t nblocks;           /* positions [0, nblocks x kv_block) are in these blocks */
    uint32_t reserved;
    uint64_t ring_row;          /* the rest at ring row ring_row + position */
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
    uint64_t busy_ps[RT_MB_CORES_MAX][4]; /* core c: matrix, vector, dma, noc busy time */
    uint32_t blocks[RT_MB_BLOCKS_MAX];
    uint32_t tokens[RT_MB_TOKENS_MAX];
};

_Static_assert(sizeof(struct rt_mailbox) <= RT_MAILBOX_BYTES, "the mailbox fits its region");

#endif
