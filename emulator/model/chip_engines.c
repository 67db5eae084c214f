/* SPDX-License-Identifier: MIT */
/* Engine queues: submit, start, transfer completion, end of a descriptor. See chip_engines.h. */
#include "chip_engines.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chip_engine_log.h"
#include "chip_engines_internal.h"

enum {
    EV_ENG_TRY = CHIP_EV_UNIT, /* arg0 = queue: start its head if it can */
    EV_ENG_DONE,               /* arg0 = queue: its running descriptor completes */
    EV_FLOW,                   /* arg0 = flow generation: the earliest transfer ends */
};

#define NLINK_DIRS 4u

static uint32_t queue_core(uint32_t q)
{
    return q / NPU_ENGINE_COUNT;
}

uint32_t chip_engines_link(const struct chip_engines *e, uint32_t row, uint32_t col,
                           uint32_t dir)
{
    return e->nhbm + (row * e->cols + col) * NLINK_DIRS + dir;
}

uint32_t chip_engines_hbm_stack(const struct chip_engines *e, uint32_t core,
                                uint32_t *router_core)
{
    uint32_t s = e->cfg.hbm_stacks, row = core / e->cols;
    uint32_t stack = row * s / e->rows;                   /* the stack of the core's band */
    *router_core = (2 * stack + 1) * e->rows / (2 * s) * e->cols; /* its middle row, col 0 */
    return stack;
}

static int init_net(struct chip_engines *e)
{
    e->nhbm = e->cfg.hbm_stacks ? e->cfg.hbm_stacks : e->ncores;
    uint32_t nres = e->nhbm + e->ncores * NLINK_DIRS;
    uint64_t *cap = malloc(nres * sizeof(*cap));
    if (!cap)
        return NPU_ERR_NOMEM;
    for (uint32_t r = 0; r < nres; r++)
        cap[r] = r >= e->nhbm        ? e->cfg.noc_link_bytes_per_s
                 : e->cfg.hbm_stacks ? e->cfg.hbm_stack_bytes_per_s
                                     : chip_engines_core_sizes(e, r)->hbm_bytes_per_s;
    int rc = flow_net_init(&e->net, nres, cap, e->cfg.congestion_free);
    free(cap);
    return rc;
}

int chip_engines_init(struct chip_engines *e, struct chip_clock *clock,
                      const struct chip_engine_cfg *cfg, const struct chip_mem *mem)
{
    memset(e, 0, sizeof(*e));
    e->clock = clock;
    e->cfg = *cfg;
    e->mem = *mem;
    e->ncores = clock->ncores;
    e->rows = clock->p.rows;
    e->cols = clock->p.cols;
    e->cfg.alt_core = NULL; /* the caller's array: e->alt_core is the copy */
    e->sizes[0] = (struct chip_engine_sizes){
        .sa_rows = cfg->sa_rows, .sa_cols = cfg->sa_cols,
        .sram_bytes_per_cycle = cfg->sram_bytes_per_cycle, .vec_lanes = cfg->vec_lanes,
        .hbm_bytes_per_s = cfg->hbm_bytes_per_s,
    };
    e->sizes[1] = cfg->alt;
    e->queues = calloc((size_t)e->ncores * NPU_ENGINE_COUNT, sizeof(*e->queues));
    if (cfg->alt_core) {
        e->alt_core = malloc(e->ncores * sizeof(*e->alt_core));
        if (e->alt_core)
            memcpy(e->alt_core, cfg->alt_core, e->ncores * sizeof(*e->alt_core));
    }
    int rc = !e->queues || (cfg->alt_core && !e->alt_core) ? NPU_ERR_NOMEM : init_net(e);
    if (rc) {
        free(e->queues);
        free(e->alt_core);
        e->queues = NULL;
        e->alt_core = NULL;
    }
    return rc;
}

const struct chip_engine_sizes *chip_engines_core_sizes(const struct chip_engines *e,
                                                        uint32_t core)
{
    return &e->sizes[e->alt_core && e->alt_core[core]];
}

void chip_engines_destroy(struct chip_engines *e)
{
    for (size_t q = 0; e->queues && q < (size_t)e->ncores * NPU_ENGINE_COUNT; q++)
        free(e->queues[q].ring);
    free(e->queues);
    free(e->alt_core);
    free(e->flow_owner);
    flow_net_destroy(&e->net);
    memset(e, 0, sizeof(*e));
}

uint32_t chip_engines_pending(const struct chip_engines *e, uint32_t core,
                              enum npu_engine engine)
{
    return e->queues[core * NPU_ENGINE_COUNT + engine].len;
}

const struct chip_engine_counters *chip_engines_counters(const struct chip_engines *e,
                                                         uint32_t core,
                                                         enum npu_engine engine)
{
    return &e->queues[core * NPU_ENGINE_COUNT + engine].count;
}

static int queue_reserve(struct chip_engine_queue *q, uint32_t extra)
{
    if (q->len + extra > NPU_ENGINE_QUEUE_MAX)
        return NPU_ERR_NOMEM;
    if (q->len + extra <= q->cap)
        return NPU_OK;
    uint32_t cap = q->cap ? q->cap : 16;
    while (cap < q->len + extra)
        cap *= 2;
    struct chip_engine_slot *ring = malloc(cap * sizeof(*ring));
    if (!ring)
        return NPU_ERR_NOMEM;
    for (uint32_t i = 0; i < q->len; i++) /* unwrap into the new ring */
        ring[i] = q->ring[(q->head + i) % q->cap];
    free(q->ring);
    q->ring = ring;
    q->cap = cap;
    q->head = 0;
    return NPU_OK;
}

/*
 * Schedules an event for the earliest transfer end, superseding any earlier one. Most
 * transfer starts leave that time where it was; then, if the control hart's source has
 * scheduled nothing since the pending event, that event already holds the place in the
 * (time, source, seq) order that a new one would take (no key lies between the two), and it
 * is kept: the run is the same, without a stale event per transfer start in the queue.
 */
static void flow_reschedule(struct chip_engines *e)
{
    uint64_t t;
    uint32_t id;
    bool any = flow_net_next_completion(&e->net, &t, &id);
    uint64_t seq = e->clock->harts[e->ncores].seq; /* the key a new event would get */
    if (any && e->flow_pending && t == e->flow_ev_ps && seq == e->flow_ev_seq + 1)
        return;
    e->flow_gen++;
    e->flow_pending = any;
    if (!any)
        return;
    e->flow_ev_ps = t;
    e->flow_ev_seq = seq;
    chip_clock_schedule(e->clock, e->ncores, t, EV_FLOW, e->flow_gen, 0);
}

static int flow_owner_set(struct chip_engines *e, uint32_t id, uint32_t q)
{
    if (id >= e->flow_owner_cap) {
        uint32_t cap = e->flow_owner_cap ? e->flow_owner_cap : 64;
        while (cap <= id)
            cap *= 2;
        uint32_t *owner = realloc(e->flow_owner, cap * sizeof(*owner));
        if (!owner)
            return NPU_ERR_NOMEM;
        e->flow_owner = owner;
        e->flow_owner_cap = cap;
    }
    e->flow_owner[id] = q;
    return NPU_OK;
}

static bool head_may_start(const struct chip_engines *e, uint32_t q, uint64_t now)
{
    const struct chip_engine_queue *queue = &e->queues[q];
    if (queue->busy || queue->len == 0)
        return false;
    const struct chip_engine_slot *s = &queue->ring[queue->head];
    if (s->ready_ps > now)
        return false;
    const uint32_t *sems = e->clock->harts[queue_core(q)].sems;
    if ((s->d.flags & NPU_DESC_WAIT) && sems[s->d.wait_sem] < s->d.wait_value)
        return false;
    return !(s->d.flags & NPU_DESC_WAIT2) || sems[s->d.wait2_sem] >= s->d.wait2_value;
}

/*
 * Whether the matrix queue's head flows through the array right behind the last command
 * (docs/engines.md, "Matrix"): it starts as the last one ends, it was ready when that one
 * started (queued, its semaphore waits met: next_ready), so its weights could load during
 * that one's folds, and it touches nothing that a recent command writes whose results were
 * still draining when its weights began to load (R + R + C - 2 cycles before `now`: the
 * last one's always; earlier ones' when the commands between were short). It then costs its
 * folds alone: its weight load and its fill hid under the last command's folds and drain,
 * as the folds of one command or of a batch do (TPU-style double-buffered weights and a
 * weight FIFO). A command that depends or follows an idle array pays them in full; one that
 * became ready only while the last one ran, partly (matrix_cycles).
 */
static bool matrix_follows(const struct chip_engines *e, uint32_t q, uint64_t now)
{
    const struct chip_engine_queue *queue = &e->queues[q];
    struct chip_gemm_extent x;
    if (!queue->nrecent ||
        queue->recent_end_ps[queue->newest] != now ||
        !chip_engine_gemm_extent(&queue->ring[queue->head].d, &x))
        return false;
    const struct chip_engine_sizes *sz = chip_engines_core_sizes(e, queue_core(q));
    const uint64_t reach = (2ull * sz->sa_rows + sz->sa_cols) * e->clock->p.cycle_ps;
    for (uint32_t i = 0; i < queue->nrecent; i++) { /* newest first */
        const uint32_t r = (queue->newest + CHIP_MATRIX_RECENT - i) % CHIP_MATRIX_RECENT;
        if (i > 0 && queue->recent_end_ps[r] + reach <= now)
            return true; /* this one's results and the older ones' were complete */
        if (!chip_engine_gemm_independent(&queue->recent[r], &x))
            return false;
    }
    return queue->nrecent < CHIP_MATRIX_RECENT; /* the history reached the idle array */
}

/* The matrix queue head's cycles, starting at `now` (plan: its full and its piped cycles).
   Behind the last command (matrix_follows) and ready when that one started: its folds alone.
   Ready only while that one ran, `early` cycles before its end: its first weights shift in
   from then (R cycles), and its fill follows the last one's folds, so of the load and the
   fill and drain (full - piped) it hides what `early` covers and pays the rest; ready
   at the end or later, or not behind it: in full. A weight FIFO fed from SRAM has the
   next weights as soon as they are there, not only if they were there a command before. */
static uint64_t matrix_cycles(const struct chip_engines *e, uint32_t q, uint64_t now,
                              const struct chip_engine_plan *plan)
{
    const struct chip_engine_queue *queue = &e->queues[q];
    if (!matrix_follows(e, q, now))
        return plan->cycles;
    if (queue->next_ready)
        return plan->piped_cycles;
    if (queue->second_met_ps >= now)
        return plan->cycles;
    const uint64_t hide = plan->cycles - plan->piped_cycles;
    const uint64_t early = (now - queue->second_met_ps) / e->clock->p.cycle_ps;
    return early >= hide ? plan->piped_cycles : plan->cycles - early;
}

/* The matrix queue's history: d, which ended at `now`, is the newest (an invalid shape,
   never accepted, would span nothing). */
static void matrix_remember(struct chip_engine_queue *queue, const struct npu_desc *d,
                            uint64_t now)
{
    queue->newest = (queue->newest + 1) % CHIP_MATRIX_RECENT;
    if (!chip_engine_gemm_extent(d, &queue->recent[queue->newest]))
        memset(&queue->recent[queue->newest], 0, sizeof(queue->recent[0]));
    queue->recent_end_ps[queue->newest] = now;
    queue->nrecent += queue->nrecent < CHIP_MATRIX_RECENT;
}

/* Whether the slot behind the head of q is ready at `now`: queued, its waits met. */
static bool second_ready(const struct chip_engines *e, uint32_t q, uint64_t now)
{
    const struct chip_engine_queue *queue = &e->queues[q];
    if (queue->len < 2)
        return false;
    const struct chip_engine_slot *s = &queue->ring[(queue->head + 1) % queue->cap];
    const uint32_t *sems = e->clock->harts[queue_core(q)].sems;
    return s->ready_ps <= now &&
           (!(s->d.flags & NPU_DESC_WAIT) || sems[s->d.wait_sem] >= s->d.wait_value) &&
           (!(s->d.flags & NPU_DESC_WAIT2) || sems[s->d.wait2_sem] >= s->d.wait2_value);
}

/* A running matrix command's successor may have become ready at `now` (a semaphore it
   waits on changed, or it was just queued): when, for matrix_cycles. */
static void matrix_note_second(struct chip_engines *e, uint32_t core, uint64_t now)
{
    const uint32_t q = core * NPU_ENGINE_COUNT + NPU_ENGINE_MATRIX;
    struct chip_engine_queue *queue = &e->queues[q];
    if (queue->busy &&
        queue->second_met_ps == UINT64_MAX && second_ready(e, q, now))
        queue->second_met_ps = now;
}

/* Starts the head of queue q at chip time `now` if it may start. */
static void queue_try_start(struct chip_engines *e, uint32_t q, uint64_t now)
{
    if (!head_may_start(e, q, now))
        return;
    struct chip_engine_queue *queue = &e->queues[q];
    const struct npu_desc *d = &queue->ring[queue->head].d;
    struct chip_engine_plan plan;
    chip_engine_desc_plan(e, queue_core(q), d, &plan);
    queue->busy = true;
    queue->started_ps = now;
    if (!plan.is_flow) {
        const bool matrix = d->engine == NPU_ENGINE_MATRIX;
        const uint64_t cycles = matrix ? matrix_cycles(e, q, now, &plan) : plan.cycles;
        queue->next_ready = second_ready(e, q, now);
        queue->second_met_ps = queue->next_ready ? now : UINT64_MAX;
        chip_clock_schedule(e->clock, queue_core(q), now + cycles * e->clock->p.cycle_ps,
                            EV_ENG_DONE, q, 0);
        return;
    }
    uint32_t id;
    if (flow_net_add(&e->net, now, q, plan.path, plan.path_len, plan.bytes, &id) != NPU_OK ||
        flow_owner_set(e, id, q) != NPU_OK) {
        /* Out of host memory: finish at once rather than lose the descriptor. */
        chip_clock_schedule(e->clock, queue_core(q), now, EV_ENG_DONE, q, 0);
        return;
    }
    queue->flow = id;
    queue->latency_cycles = plan.latency_cycles;
    flow_reschedule(e);
}

static void queue_finish_head(struct chip_engines *e, uint32_t q, uint64_t now)
{
    struct chip_engine_queue *queue = &e->queues[q];
    uint32_t core = queue_core(q);
    assert(queue->busy && queue->len > 0);
    struct npu_desc d = queue->ring[queue->head].d;
    chip_engine_desc_finish(e, core, &d, now, &queue->count);
    if (e->cfg.log)
        chip_engine_log_desc(e->cfg.log, core, &d, queue->ring[queue->head].ready_ps,
                             queue->started_ps, now);
    queue->count.descs++;
    queue->count.busy_ps += now - queue->started_ps;
    if (d.engine == NPU_ENGINE_MATRIX)
        matrix_remember(queue, &d, now);
    queue->head = (queue->head + 1) % queue->cap;
    queue->len--;
    queue->busy = false;
    if ((d.flags & NPU_DESC_IRQ) && e->cfg.on_irq)
        e->cfg.on_irq(e->cfg.opaque, core);
    queue_try_start(e, q, now);
}

/* Transfers ending now leave the network; their descriptors end after their latency. */
static void flow_complete_due(struct chip_engines *e, uint64_t now)
{
    uint64_t t;
    uint32_t id;
    while (flow_net_next_completion(&e->net, &t, &id) && t <= now) {
        uint32_t q = e->flow_owner[id];
        flow_net_remove(&e->net, now, id);
        chip_clock_schedule(e->clock, queue_core(q),
                            now + e->queues[q].latency_cycles * e->clock->p.cycle_ps,
                            EV_ENG_DONE, q, 0);
    }
    flow_reschedule(e);
}

void chip_engines_on_event(void *unit, const struct evq_event *ev)
{
    struct chip_engines *e = unit;
    uint64_t now = e->clock->time_ps;
    switch (ev->kind) {
    case EV_ENG_TRY:
        queue_try_start(e, (uint32_t)ev->arg0, now);
        break;
    case EV_ENG_DONE:
        queue_finish_head(e, (uint32_t)ev->arg0, now);
        break;
    case EV_FLOW:
        if (ev->arg0 == e->flow_gen) {
            e->flow_pending = false;
            flow_complete_due(e, now);
        }
        break;
    default:
        assert(!"unknown engine event");
    }
}

void chip_engines_on_sem_change(void *unit, uint32_t core, uint32_t sem)
{
    struct chip_engines *e = unit;
    if (core >= e->ncores)
        return;
    for (uint32_t eng = 0; eng < NPU_ENGINE_COUNT; eng++) {
        uint32_t q = core * NPU_ENGINE_COUNT + eng;
        const struct chip_engine_queue *queue = &e->queues[q];
        const struct npu_desc *d = &queue->ring[queue->head].d;
        if (queue->len && !queue->busy && (d->wait_sem == sem || d->wait2_sem == sem))
            queue_try_start(e, q, e->clock->time_ps);
    }
    matrix_note_second(e, core, e->clock->time_ps);
}

static int read_descs(const struct chip_engines *e, uint32_t core, uint64_t addr,
                      uint32_t count, struct npu_desc *out, char *err, size_t errlen)
{
    struct chip_mem_range r;
    uint64_t len = (uint64_t)count * sizeof(struct npu_desc);
    if (count == 0 || count > NPU_SUBMIT_MAX) {
        snprintf(err, errlen, "core %u: SUBMIT_COUNT %u is not 1..%u", core, count,
                 NPU_SUBMIT_MAX);
        return NPU_ERR_INVAL;
    }
    if (!chip_mem_locate(&e->mem, addr, len, &r) || r.kind != CHIP_MEM_SRAM || r.core != core) {
        snprintf(err, errlen, "core %u: descriptors [0x%llx, +%llu) are not in its SRAM", core,
                 (unsigned long long)addr, (unsigned long long)len);
        return NPU_ERR_RANGE;
    }
    if (r.host)
        memcpy(out, r.host, len);
    else
        memset(out, 0, len); /* no guest memory: nothing to run */
    return NPU_OK;
}

int chip_engines_submit(struct chip_engines *e, uint32_t core, uint64_t desc_addr,
                        uint32_t count, char *err, size_t errlen)
{
    struct npu_desc descs[NPU_SUBMIT_MAX];
    uint32_t per_engine[NPU_ENGINE_COUNT] = { 0 };
    assert(core < e->ncores);
    int rc = read_descs(e, core, desc_addr, count, descs, err, errlen);
    for (uint32_t i = 0; rc == NPU_OK && i < count; i++) {
        rc = chip_engine_desc_check(e, core, &descs[i], err, errlen);
        if (rc == NPU_OK)
            per_engine[descs[i].engine]++;
        else
            snprintf(err + strlen(err), errlen - strlen(err), " (descriptor %u at 0x%llx)", i,
                     (unsigned long long)(desc_addr + i * sizeof(struct npu_desc)));
    }
    for (uint32_t eng = 0; rc == NPU_OK && eng < NPU_ENGINE_COUNT; eng++)
        if (queue_reserve(&e->queues[core * NPU_ENGINE_COUNT + eng], per_engine[eng])) {
            snprintf(err, errlen, "core %u: engine %u queue full (%u descriptors at most)",
                     core, eng, NPU_ENGINE_QUEUE_MAX);
            rc = NPU_ERR_NOMEM;
        }
    if (rc != NPU_OK)
        return rc;
    uint64_t now = chip_hart_time(e->clock, core);
    for (uint32_t i = 0; i < count; i++) {
        struct chip_engine_queue *q = &e->queues[core * NPU_ENGINE_COUNT + descs[i].engine];
        q->ring[(q->head + q->len++) % q->cap] = (struct chip_engine_slot){ descs[i], now };
    }
    matrix_note_second(e, core, now);
    for (uint32_t eng = 0; eng < NPU_ENGINE_COUNT; eng++)
        if (per_engine[eng])
            chip_clock_schedule(e->clock, core, now, EV_ENG_TRY,
                                core * NPU_ENGINE_COUNT + eng, 0);
    return NPU_OK;
}
