/* SPDX-License-Identifier: MIT */
/*
 * The engine log (machine property engine-log=FILE): every descriptor an engine ran, as a
 * Chrome / Perfetto trace (JSON, one "X" event a descriptor: process = core, thread =
 * engine, start and length in chip microseconds, and how long it was queued behind its
 * waits and its engine's earlier descriptors). It is what the per-layer categories cannot
 * show: which engine waits for which, descriptor by descriptor.
 *
 * Modelled: the descriptors the engines execute. Not in it: work a replay adds at once
 * (chip_replay.h: a replayed layer or tile adds its recorded counters, not descriptors),
 * the harts' own time, and flows' sharing of links (a DMA's length includes its waiting
 * for bandwidth).
 */
#ifndef CHIP_ENGINE_LOG_H
#define CHIP_ENGINE_LOG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "npu_structs.h"

#define CHIP_ENGINE_LOG_ALL UINT32_MAX /* core filter: every core */

struct chip_engine_log {
    FILE *f;
    uint32_t core;      /* the one core logged, or CHIP_ENGINE_LOG_ALL */
    uint64_t events;    /* written so far */
    bool failed;        /* a write failed: the file is incomplete */
};

/* Opens `path` and writes the trace's head; 0 or NPU_ERR_IO (errno says why). */
int chip_engine_log_open(struct chip_engine_log *log, const char *path, uint32_t core);

/* One descriptor of `core` that became ready (submitted) at ready_ps, started at start_ps
   and ended at end_ps (chip time). */
void chip_engine_log_desc(struct chip_engine_log *log, uint32_t core, const struct npu_desc *d,
                          uint64_t ready_ps, uint64_t start_ps, uint64_t end_ps);

/* Writes the trace's tail and closes it; 0, or NPU_ERR_IO if any write failed. */
int chip_engine_log_close(struct chip_engine_log *log);

#endif
