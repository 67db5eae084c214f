/* SPDX-License-Identifier: MIT */
/*
 * Dataflow ordering of the interpreter's chain (model_exec.c; docs/firmware.md, "Dataflow"):
 * instead of every descriptor waiting for the one before it, a descriptor waits only for
 * the earlier descriptors of the other engines whose SRAM it reads or writes (read after
 * write, write after read, write after write), so the matrix, vector and DMA engines of a
 * core work at the same time wherever the data allows, as tt-metal's reader, compute and
 * writer kernels do with semaphores between them.
 *
 * How: each engine's queue runs in order (docs/engines.md), so a descriptor needs no wait
 * for its own engine, and a wait for "engine X has completed n descriptors" (X's semaphore,
 * counted by every descriptor of X) covers every earlier descriptor of X. A descriptor
 * holds two waits; with the second DMA queue one may need three (hz_set_submit), and the
 * hart then waits out one itself. The second queue's loads are kept in a table of their
 * destinations rather than the window (model_hazard.c says why).
 * Conflicts are found among the last HZ_WINDOW descriptors; an older one that is not known
 * complete is waited for as if it conflicted (safe, and rare: a chain is flushed at every
 * collective and every switch of category). Ranges may be larger than what an operand
 * touches (never smaller): a false conflict costs overlap, never correctness.
 */
#ifndef MODEL_HAZARD_H
#define MODEL_HAZARD_H

#include <stdbool.h>
#include <stdint.h>

#include "npu/engine.h"

enum hz_engine { HZ_MATRIX, HZ_VECTOR, HZ_DMA, HZ_DMA2, HZ_ENGINES };

/* Bytes [lo, hi) of global address space; lo == hi: none. */
struct hz_range {
    uint64_t lo, hi;
};

#define HZ_READS 4u
#define HZ_WRITES 2u
struct hz_access {
    struct hz_range rd[HZ_READS], wr[HZ_WRITES];
};

/* [base, base + (rows - 1) x stride + row) in bytes; none if base is 0 or rows 0. */
struct hz_range hz_span(uint64_t base, uint64_t rows, uint64_t stride, uint64_t row);

/* The sync of the next descriptor of engine e with accesses a: it waits for the conflicting
   earlier descriptors of the other engines and counts itself on its engine's semaphore; a
   `side` one is not waited for by hz_wait_flush. Records it in the window. */
struct engine_sync hz_sync(enum hz_engine e, const struct hz_access *a, bool side);
/* A descriptor waits for two other engines at most; it may need three (a GEMM: its weights
   on the second DMA queue, its input from a copy, its output's last reader on the vector
   engine; any descriptor once loads of the second queue have left the window). Then the
   hart waits for one itself, after `submit` has put every descriptor built so far on the
   engines: callers take the new descriptor's slot after hz_sync returns. */
void hz_set_submit(void (*submit)(void));
/* Waits until every descriptor issued so far but the side ones is complete (each engine's
   semaphore reaches its last such descriptor: the queues run in order); 0 or the wait's
   error. */
int hz_wait_flush(void);
/* Waits until every descriptor issued so far that reads or writes `r` is complete (and,
   the queues running in order, each engine's earlier ones), not the others: a collective
   on r may then run while they do. The caller has submitted them. 0 or the wait's error. */
int hz_wait_range(struct hz_range r);
/* Waits until at most `most` of each engine's issued descriptors are not complete, so that
   putting the built ones on the queues cannot overfill them (a put does not wait, and
   puts at every category switch would otherwise pile up: 2048 embedding copies of a
   prefill filled the DMA queue's 1024). `most` must be at least the descriptors built
   and not yet put, which it then never waits for. 0 or the wait's error. */
int hz_make_room(uint32_t most);
/* The same for engine e alone (a collective's agreement refuses more than
   NOC_COMM_QUEUED_MAX queued vector descriptors). */
int hz_make_room_on(enum hz_engine e, uint32_t most);
/* The count of engine x's descriptors that a write of r would wait for now (the newest
   one reading or writing r, as far as the window tells; the same for every range that the
   window holds no access of). */
uint32_t hz_need_of(enum hz_engine x, struct hz_range r);
/* Whether every descriptor issued to engine e so far is complete (reads its semaphore). */
bool hz_idle(enum hz_engine e);
/* Waits until every descriptor issued so far is complete, side ones too (the engines idle,
   as a recording or replay of the chip needs); 0 or the wait's error. */
int hz_wait_all(void);

#endif
