/* SPDX-License-Identifier: MIT */
/*
 * Communicators, the agreement before every collective, and the descriptor stream that
 * feeds the engines with flow control (noc/collective.h, docs/noc-driver.md).
 */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "coll_internal.h"
#include "noc/noc.h"
#include "npu/engine.h"
#include "npu/noc_endpoint.h"
#include "npu/hal.h"
#include "npu/wait.h"

/* Per core: what each slot's semaphores should read (they only grow). */
static struct coll_expect expect[NOC_COMM_SLOTS];

/* A batch of descriptors in SRAM for one submit. */
static struct npu_desc batch[NPU_SUBMIT_MAX];

/* Most descriptors a collective keeps queued per engine (a queue holds 1024). */
#define STREAM_WINDOW (NPU_ENGINE_QUEUE_MAX - NPU_SUBMIT_MAX)

struct coll_expect *coll_expect_of(const struct noc_comm *c)
{
    return &expect[c->cfg.slot];
}

uint32_t coll_sem(const struct noc_comm *c, enum coll_sem s)
{
    return COLL_SEM_BASE + c->cfg.slot * COLL_SEM_PER_SLOT + (uint32_t)s;
}

uint32_t coll_elem_bytes(enum npu_dtype dt)
{
    return dt == NPU_DTYPE_BF16 ? 2u : 4u;
}

uint64_t coll_bound(uint64_t count, uint32_t parts, uint32_t k)
{
    /* count < 2^40 (a buffer in SRAM) and parts <= 1024: no overflow. */
    return count * k / parts;
}

/* Mailbox layout at the top of SRAM: per slot, per parity: headers, then M2N counts. */
static uint64_t parity_bytes(void)
{
    return (uint64_t)hal_chip()->ncores * sizeof(struct coll_header) +
           NOC_M2N_PAIRS_MAX * sizeof(uint32_t);
}

uint64_t noc_reserved_bytes(void)
{
    return NOC_COMM_SLOTS * 2 * parity_bytes();
}

static uint64_t mailbox_offset(const struct noc_comm *c)
{
    return hal_chip()->sram_bytes - noc_reserved_bytes() +
           (c->cfg.slot * 2 + c->seq % 2) * parity_bytes();
}

const struct coll_header *coll_headers(const struct noc_comm *c)
{
    return (const struct coll_header *)(uintptr_t)(hal_self()->sram_base + mailbox_offset(c));
}

uint64_t coll_counts_offset(const struct noc_comm *c)
{
    return mailbox_offset(c) + (uint64_t)hal_chip()->ncores * sizeof(struct coll_header);
}

uint32_t *coll_counts_area(const struct noc_comm *c)
{
    return (uint32_t *)(uintptr_t)(hal_self()->sram_base + coll_counts_offset(c));
}

enum coll_fault coll_check_buffer(uint64_t addr, uint64_t bytes)
{
    const struct hal_core_info *self = hal_self();
    uint64_t end = self->sram_base + self->sram_size - noc_reserved_bytes();
    if (addr < self->sram_base || addr > end || bytes > end - addr)
        return COLL_BAD_BUFFER;
    return COLL_OK;
}

int noc_comm_init(struct noc_comm *c, const struct noc_comm_config *cfg)
{
    uint32_t seg = cfg->segment_bytes ? cfg->segment_bytes : NOC_COMM_SEGMENT_DEFAULT;
    if (cfg->slot >= NOC_COMM_SLOTS || seg % 4 || seg < 64 || !cfg->group ||
        coll_check_buffer(cfg->scratch, NOC_COMM_SCRATCH_BYTES(seg)) != COLL_OK)
        return NPU_ERR_INVAL;
    int rank = noc_group_rank_of(cfg->group, hal_self()->core_id);
    if (rank < 0)
        return NPU_ERR_RANGE;
    memset(c, 0, sizeof(*c));
    c->cfg = *cfg;
    c->cfg.segment_bytes = seg;
    c->cfg.timeout_ps = cfg->timeout_ps ? cfg->timeout_ps : NOC_COMM_TIMEOUT_DEFAULT_PS;
    c->group = *cfg->group;
    c->cfg.group = &c->group;
    c->rank = (uint32_t)rank;
    return NPU_OK;
}

void coll_header_init(const struct noc_comm *c, struct coll_header *h, enum coll_kind kind)
{
    memset(h, 0, sizeof(*h));
    h->magic = COLL_MAGIC;
    h->seq = c->seq;
    h->kind = (uint8_t)kind;
    h->placement = (uint8_t)c->group.placement;
    h->rank = (uint16_t)c->rank;
    h->size = (uint16_t)c->group.size;
    h->rect = c->group.rect;
}

static const char *kind_name(uint32_t kind)
{
    static const char *const names[] = { "?", "barrier", "broadcast", "allgather",
                                         "reduce_scatter", "allreduce", "alltoall",
                                         "m2n_dispatch", "m2n_combine" };
    return kind < sizeof(names) / sizeof(names[0]) ? names[kind] : "?";
}

/* One console line from this rank about the collective being refused. */
static void refuse(const struct noc_comm *c, const struct coll_header *mine, const char *msg)
{
    printf("noc: rank %" PRIu32 " (core %" PRIu32 "): %s #%" PRIu32 " on a %s group of %" PRIu32
           " at (%u,%u) refused: %s\n", c->rank, hal_self()->core_id, kind_name(mine->kind),
           mine->seq, noc_placement_name(c->group.placement), c->group.size,
           c->group.rect.row0, c->group.rect.col0, msg);
}

static bool same_call(const struct coll_header *a, const struct coll_header *b)
{
    return a->magic == COLL_MAGIC && a->seq == b->seq && a->kind == b->kind &&
           a->size == b->size && a->placement == b->placement &&
           memcmp(&a->rect, &b->rect, sizeof(a->rect)) == 0;
}

/* Judges every rank's header in rank order; the first fault decides (the same everywhere). */
static int judge(const struct noc_comm *c, const struct coll_header *mine)
{
    static const char *const faults[] = { "", "a buffer outside its SRAM",
                                          "bad arguments (count, dtype, root or senders)",
                                          "M2N counts beyond the driver's limits" };
    const struct coll_header *h = coll_headers(c);
    char msg[160];
    for (uint32_t k = 0; k < c->group.size; k++) {
        if (!same_call(&h[k], mine) || h[k].rank != k) {
            snprintf(msg, sizeof(msg), "rank %" PRIu32 " called %s #%" PRIu32 " on another "
                     "group (size %u at (%u,%u))", k, kind_name(h[k].kind), h[k].seq,
                     h[k].size, h[k].rect.row0, h[k].rect.col0);
            refuse(c, mine, msg);
            return NPU_ERR_INVAL;
        }
        if (h[k].fault != COLL_OK) {
            snprintf(msg, sizeof(msg), "rank %" PRIu32 ": %s", k,
                     h[k].fault < 4 ? faults[h[k].fault] : "?");
            refuse(c, mine, msg);
            return h[k].fault == COLL_BAD_BUFFER ? NPU_ERR_RANGE : NPU_ERR_INVAL;
        }
        if (h[k].count != h[0].count || h[k].dtype != h[0].dtype || h[k].root != h[0].root) {
            snprintf(msg, sizeof(msg), "rank %" PRIu32 ": count %" PRIu64 ", dtype %u, "
                     "root/senders %" PRIu32 " differ from rank 0's %" PRIu64 ", %u, %" PRIu32,
                     k, h[k].count, h[k].dtype, h[k].root, h[0].count, h[0].dtype, h[0].root);
            refuse(c, mine, msg);
            return NPU_ERR_INVAL;
        }
    }
    return NPU_OK;
}

/* The ranks whose header has not come, on the console. */
static void report_missing(const struct noc_comm *c, const struct coll_header *mine)
{
    const struct coll_header *h = coll_headers(c);
    char msg[160];
    int len = snprintf(msg, sizeof(msg), "no header within %" PRIu64 " ns from rank(s)",
                       c->cfg.timeout_ps / 1000);
    for (uint32_t k = 0; k < c->group.size && len < (int)sizeof(msg) - 8; k++)
        if (!same_call(&h[k], mine))
            len += snprintf(msg + len, sizeof(msg) - (size_t)len, " %" PRIu32, k);
    refuse(c, mine, msg);
}

int coll_agree(struct noc_comm *c, struct coll_header *mine)
{
    assert(c->cfg.group == &c->group && "communicator not initialised (noc_comm_init)");
    if (c->broken)
        return NPU_ERR_STATE;
    mine->scratch = c->cfg.scratch;
    struct coll_header *staged = (struct coll_header *)(uintptr_t)(c->cfg.scratch +
                                                                   COLL_SCRATCH_HEADER);
    *staged = *mine;
    const struct noc_rect *r = &c->group.rect;
    struct noc_multicast_args m = {
        .src = (uint64_t)(uintptr_t)staged,
        .dst_offset = mailbox_offset(c) + c->rank * sizeof(struct coll_header),
        .rows = 1, .row_bytes = sizeof(*staged), .src_stride = sizeof(*staged),
        .dst_stride = sizeof(*staged), .row0 = r->row0, .col0 = r->col0,
        .row1 = (uint16_t)(r->row0 + r->rows - 1), .col1 = (uint16_t)(r->col0 + r->cols - 1),
        .sync = { .signal = true, .signal_sem = (uint8_t)coll_sem(c, COLL_SEM_HDR),
                  .signal_value = 1, .keep_data = true }, /* performance mode too */
    };
    noc_multicast_desc(&batch[0], &m);
    int rc = engine_submit(&batch[0], 1);
    if (rc != NPU_OK) {
        refuse(c, mine, "the NoC engine refused the header");
        c->broken = true;
        return rc;
    }
    struct coll_expect *ex = coll_expect_of(c);
    ex->hdr += c->group.size;
    rc = hal_sem_wait_until(coll_sem(c, COLL_SEM_HDR), ex->hdr,
                            hal_time_ps() + c->cfg.timeout_ps);
    if (rc != NPU_OK) {
        report_missing(c, mine);
        c->broken = true;
        return rc;
    }
    rc = judge(c, mine);
    if (rc != NPU_OK)
        c->seq++; /* every rank refused this call alike: the next one goes on */
    return rc;
}

void coll_stream_begin(struct coll_stream *st, struct noc_comm *c)
{
    memset(st, 0, sizeof(*st));
    st->c = c;
}

/* Waits until at most `limit` of the `issued` items counted by semaphore sem are pending. */
static int window_wait(uint32_t sem, uint32_t issued, uint32_t limit)
{
    return issued > limit ? hal_sem_wait(sem, issued - limit) : NPU_OK;
}

int coll_stream_flush(struct coll_stream *st)
{
    if (st->n == 0)
        return NPU_OK;
    const struct coll_expect *ex = coll_expect_of(st->c);
    /* Keep room in each engine queue: what is not yet known done, plus this batch. */
    int rc = window_wait(coll_sem(st->c, COLL_SEM_SENT), ex->sent, STREAM_WINDOW);
    if (rc == NPU_OK)
        rc = window_wait(coll_sem(st->c, COLL_SEM_VDONE), ex->vdone, STREAM_WINDOW);
    if (rc == NPU_OK)
        rc = engine_submit(batch, st->n);
    /* Agreed collectives are valid: a refusal here is a driver bug. */
    if (rc != NPU_OK)
        printf("noc: rank %" PRIu32 ": the engines refused a collective's descriptors (%d)\n",
               st->c->rank, rc);
    assert(rc == NPU_OK);
    st->n = 0;
    return rc;
}

struct npu_desc *coll_stream_next(struct coll_stream *st, enum npu_engine engine)
{
    if (st->n == NPU_SUBMIT_MAX)
        coll_stream_flush(st);
    struct npu_desc *d = &batch[st->n++];
    memset(d, 0, sizeof(*d));
    d->engine = (uint8_t)engine;
    return d;
}

int coll_stream_finish(struct coll_stream *st)
{
    int rc = coll_stream_flush(st);
    const struct coll_expect *ex = coll_expect_of(st->c);
    const uint32_t sems[] = { COLL_SEM_ARRIVE0, COLL_SEM_ARRIVE1, COLL_SEM_VDONE,
                              COLL_SEM_CREDIT, COLL_SEM_SENT };
    const uint32_t want[] = { ex->arrive[0], ex->arrive[1], ex->vdone, ex->credit, ex->sent };
    for (uint32_t i = 0; rc == NPU_OK && i < sizeof(sems) / sizeof(sems[0]); i++)
        rc = hal_sem_wait(coll_sem(st->c, (enum coll_sem)sems[i]), want[i]);
    return rc;
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
            .signal_sem = (uint8_t)coll_sem(c, c->phase % 2 ? COLL_SEM_ARRIVE1
                                                            : COLL_SEM_ARRIVE0),
            .signal_value = 1, .signal2 = true, .signal2_core = (uint16_t)hal_self()->core_id,
            .signal2_sem = (uint8_t)coll_sem(c, COLL_SEM_SENT), .signal2_value = 1,
        },
    };
    noc_write_desc(coll_stream_next(st, NPU_ENGINE_NOC), &a);
    ex->sent++;
}
