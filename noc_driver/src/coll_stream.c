/* SPDX-License-Identifier: MIT */
/*
 * The descriptor stream of a collective (coll_internal.h): descriptors are built into a
 * batch in SRAM and submitted 256 at a time, keeping the engine queues from overflowing by
 * waiting for the collective's own completion counters; every wait has the communicator's
 * deadline, so a peer that never does its part makes this rank fail instead of hang.
 */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "coll_internal.h"
#include "noc/noc.h"
#include "npu/engine.h"
#include "npu/hal.h"
#include "npu/noc_endpoint.h"
#include "npu/wait.h"

/* A batch of descriptors in SRAM for one submit. */
static struct npu_desc batch[NPU_SUBMIT_MAX];

/* Most descriptors of a collective not yet known done, per engine: with the caller's
   NOC_COMM_QUEUED_MAX and one batch they fit a queue. */
#define STREAM_WINDOW (NPU_ENGINE_QUEUE_MAX - NPU_SUBMIT_MAX - NOC_COMM_QUEUED_MAX - 8)

/* Restart the slot's data counters once they pass this (they are 32-bit and only grow). */
#define COUNTER_RESTART (1u << 30)

void coll_stream_begin(struct coll_stream *st, struct noc_comm *c)
{
    memset(st, 0, sizeof(*st));
    st->c = c;
    st->deadline_ps = hal_time_ps() + c->cfg.timeout_ps;
}

/* Waits, until the stream's deadline, for semaphore sem to reach value. */
static int stream_wait(struct coll_stream *st, uint32_t sem, uint32_t value)
{
    int rc = hal_sem_wait_until(sem, value, st->deadline_ps);
    if (rc != NPU_OK && !st->failed) {
        if (!st->c->cfg.quiet)
            printf("noc: rank %" PRIu32 " (core %" PRIu32 "): collective #%" PRIu32 " phase %"
                   PRIu32 ": semaphore %" PRIu32 " at %" PRIu32 ", waited for %" PRIu32
                   " until the deadline: %d\n", st->c->rank, hal_self()->core_id, st->c->seq,
                   st->c->phase, sem, hal_sem_read(sem), value, rc);
        st->failed = true;
        coll_break(st->c);
    }
    return rc;
}

/* Waits until at most `limit` of the `issued` items counted by semaphore sem are pending. */
static int window_wait(struct coll_stream *st, uint32_t sem, uint32_t issued, uint32_t limit)
{
    return issued > limit ? stream_wait(st, sem, issued - limit) : NPU_OK;
}

int coll_stream_flush(struct coll_stream *st)
{
    if (st->n == 0 || st->failed) {
        st->n = 0;
        return st->failed ? NPU_ERR_TIMEOUT : NPU_OK;
    }
    const struct coll_expect *ex = coll_expect_of(st->c);
    int rc = window_wait(st, coll_sem(st->c, COLL_SEM_SENT), ex->sent, STREAM_WINDOW);
    if (rc == NPU_OK)
        rc = window_wait(st, coll_sem(st->c, COLL_SEM_VDONE), ex->vdone, STREAM_WINDOW);
    if (rc == NPU_OK) {
        rc = engine_submit(batch, st->n);
        /* The agreement checked every address and the queues' room: a refusal here is a
           driver bug. */
        assert(rc == NPU_OK && "the engines refused an agreed collective's descriptors");
    }
    st->n = 0;
    return rc;
}

struct npu_desc *coll_stream_next(struct coll_stream *st, enum npu_engine engine)
{
    if (st->n == NPU_SUBMIT_MAX)
        coll_stream_flush(st); /* a failure is kept in st->failed */
    struct npu_desc *d = &batch[st->n++];
    engine_desc_clear(d);
    d->engine = (uint8_t)engine;
    return d;
}

int coll_stream_finish(struct coll_stream *st)
{
    int rc = coll_stream_flush(st);
    const struct coll_expect *ex = coll_expect_of(st->c);
    const uint32_t sems[] = { coll_arrive_sem(st->c), coll_sem(st->c, COLL_SEM_VDONE),
                              coll_sem(st->c, COLL_SEM_CREDIT), coll_sem(st->c, COLL_SEM_SENT) };
    const uint32_t want[] = { *coll_arrive_expect(st->c), ex->vdone, ex->credit, ex->sent };
    for (uint32_t i = 0; rc == NPU_OK && i < sizeof(sems) / sizeof(sems[0]); i++)
        rc = stream_wait(st, sems[i], want[i]);
    st->c->phase++;
    return rc;
}

/* Sets this core's semaphore `sem` to 0 (it lands at once: no hops). */
static void sem_clear(uint32_t sem)
{
    struct hal_sem_post_args p = { .core = hal_self()->core_id, .sem = sem,
                                   .op = NPU_SEM_OP_SET, .value = 0 };
    hal_sem_post(&p);
}

void coll_done(struct noc_comm *c)
{
    struct coll_expect *ex = coll_expect_of(c);
    c->seq++;
    bool high = ex->vdone > COUNTER_RESTART || ex->credit > COUNTER_RESTART ||
                ex->sent > COUNTER_RESTART;
    for (uint32_t p = 0; p < COLL_PHASES_MAX; p++)
        high |= ex->arrive[p] > COUNTER_RESTART;
    if (!high || ex->broken)
        return;
    /* Everything expected has happened and nothing more can come before the next call's
       agreement, which needs this rank's header: the data counters may restart. (HDR and
       COUNTS cannot: the others' next headers may already be landing.) */
    for (uint32_t p = 0; p < COLL_PHASES_MAX; p++) {
        sem_clear(coll_sem(c, (enum coll_sem)(COLL_SEM_ARRIVE0 + p)));
        ex->arrive[p] = 0;
    }
    sem_clear(coll_sem(c, COLL_SEM_VDONE));
    sem_clear(coll_sem(c, COLL_SEM_CREDIT));
    sem_clear(coll_sem(c, COLL_SEM_SENT));
    ex->vdone = ex->credit = ex->sent = 0;
}

void coll_emit_write(struct coll_stream *st, const struct coll_write *w)
{
    struct noc_comm *c = st->c;
    struct coll_expect *ex = coll_expect_of(c);
    const struct coll_header *dst_hdr = NULL;
    uint64_t src = w->src, dst = w->dst, bytes = w->bytes;
    if (bytes == 0) { /* a token: the semaphores move, no data does */
        int k = -1;
        for (uint32_t r = 0; r < c->group.size && k < 0; r++)
            if (c->group.core[r] == w->dst_core)
                k = (int)r;
        assert(k >= 0);
        dst_hdr = &coll_headers(c)[k];
        src = c->cfg.scratch + COLL_SCRATCH_TOKENS;
        dst = dst_hdr->scratch + COLL_SCRATCH_TOKENS + 64;
        bytes = 4;
    }
    struct noc_write_args a = {
        .src = src, .dst = dst, .rows = 1, .row_bytes = (uint32_t)bytes,
        .src_stride = (uint32_t)bytes, .dst_stride = (uint32_t)bytes,
        .sync = {
            .wait = w->wait, .wait_sem = (uint8_t)w->wait_sem, .wait_value = w->wait_value,
            .wait2 = w->wait2, .wait2_sem = (uint8_t)w->wait2_sem,
            .wait2_value = w->wait2_value, .signal = true,
            .signal_core = (uint16_t)w->dst_core,
            .signal_sem = (uint8_t)coll_arrive_sem(c),
            .signal_value = 1, .signal2 = true, .signal2_core = (uint16_t)hal_self()->core_id,
            .signal2_sem = (uint8_t)coll_sem(c, COLL_SEM_SENT), .signal2_value = 1,
            .keep_data = w->keep_data,
        },
    };
    noc_write_desc(coll_stream_next(st, NPU_ENGINE_NOC), &a);
    ex->sent++;
}
