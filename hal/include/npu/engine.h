/* SPDX-License-Identifier: MIT */
/*
 * Engine commands (docs/engines.md): build struct npu_desc entries with the per-engine
 * helpers (npu/dma.h, npu/matrix.h, npu/noc_endpoint.h), then submit them in one command.
 * Synchronisation is by semaphores: a descriptor can wait for a local semaphore before it
 * starts and add to any core's semaphore when it completes; the hart waits with
 * hal_sem_wait() (npu/wait.h), never by polling.
 */
#ifndef NPU_ENGINE_H
#define NPU_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "npu_enums.h"
#include "npu_structs.h"

/* Semaphore conditions of one descriptor; zero-initialised means none. */
struct engine_sync {
    bool wait;             /* start when local semaphore wait_sem >= wait_value */
    uint8_t wait_sem;
    uint32_t wait_value;
    bool signal;           /* on completion add signal_value to signal_sem of signal_core */
    uint16_t signal_core;
    uint8_t signal_sem;
    uint32_t signal_value;
    bool irq;              /* on completion raise this core's IRQ_STATUS.ENGINE */
    bool keep_data;        /* DMA/NoC: move the bytes in performance mode too (control
                              messages, at most NPU_KEEP_DATA_MAX bytes) */
    bool wait2;            /* and start only when local semaphore wait2_sem >= wait2_value */
    uint8_t wait2_sem;
    uint32_t wait2_value;
    bool signal2;          /* on completion also add signal2_value to signal2_sem of */
    uint16_t signal2_core; /* signal2_core (NoC: posted from where the data lands) */
    uint8_t signal2_sem;
    uint32_t signal2_value;
};

/* Applies a sync to a descriptor's flags and fields. */
void engine_sync_apply(struct npu_desc *d, const struct engine_sync *sync);

/* Zeroes a descriptor with 16 inline stores. Why not memset: a call per descriptor into
   newlib's memset (a jump table, several translated blocks) was a tenth of the harts'
   emulated instructions in a performance run. */
static inline void engine_desc_clear(struct npu_desc *d)
{
    typedef uint64_t __attribute__((may_alias)) word;
    _Static_assert(sizeof(struct npu_desc) % sizeof(word) == 0, "whole words");
    word *w = (word *)d;
#pragma GCC unroll 16
    for (unsigned i = 0; i < sizeof(*d) / sizeof(word); i++)
        w[i] = 0;
}

/*
 * Command: queues `count` descriptors (in this core's SRAM) on their engines. Returns 0, or
 * the chip's refusal (NPU_ERR_RANGE: an address outside what the engine may touch;
 * NPU_ERR_INVAL: a bad field; NPU_ERR_NOMEM: a queue is full); then nothing was queued and
 * the emulator logs which descriptor and why.
 */
int engine_submit(const struct npu_desc *descs, uint32_t count);

/* Counter `id` (npu_perf) of this core, as of the last clock step. */
uint64_t engine_perf_read(enum npu_perf id);

/* Descriptors queued or running on an engine of this core (0..255, saturating). */
uint32_t engine_pending(enum npu_engine engine);

/*
 * Performance mode only (docs/engines.md, "Replay"): npu_replay_op `op` on replay slot
 * `slot` of this core's engine counters; `count` is REPEAT's repetitions. BEGIN and END
 * record what the engines did in between, REPEAT adds count times that to the counters
 * (the caller waits out the chip time). 0, or the chip's refusal: NPU_ERR_STATE (functional
 * mode, engines not idle, slot not recorded or another being recorded), NPU_ERR_RANGE
 * (slot, count, or counters that would overflow), NPU_ERR_INVAL (no such op).
 */
int engine_replay(enum npu_replay_op op, uint32_t slot, uint32_t count);

#endif
