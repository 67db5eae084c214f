/* SPDX-License-Identifier: MIT */
/* The chip clock: harts, waits, semaphores and stepping. See chip_clock.h. */
#include "chip_clock.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum chip_event_kind {
    EV_TIMER,   /* src = hart; arg0 = wait generation */
    EV_CHECK,   /* src = hart; arg0 = wait generation: judge the wait at the hart's time */
    EV_SEM,     /* arg0 = target hart << 32 | sem; arg1 = op << 32 | value */
    EV_RELEASE, /* release the NPU cores */
};

/* Queue length below which stale events are left to be popped: dropping them costs more. */
static size_t drop_floor(const struct chip_clock *c)
{
    return 1024 + 8 * (size_t)c->nharts;
}

int chip_clock_init(struct chip_clock *c, const struct chip_clock_params *p)
{
    memset(c, 0, sizeof(*c));
    c->p = *p;
    c->ncores = p->rows * p->cols;
    c->nharts = c->ncores + 1;
    c->harts = calloc(c->nharts, sizeof(*c->harts));
    if (!c->harts)
        return NPU_ERR_NOMEM;
    int rc = evq_init(&c->queue, 4u * c->nharts);
    if (rc) {
        free(c->harts);
        return rc;
    }
    for (uint32_t h = 0; h < c->nharts; h++) {
        c->harts[h].state = CHIP_HART_RUNNING;
        c->harts[h].row = h < c->ncores ? h / p->cols : 0;
        c->harts[h].col = h < c->ncores ? h % p->cols : 0;
    }
    c->nrunning = c->nharts;
    c->first_failed = UINT32_MAX;
    c->drop_len = drop_floor(c);
    return NPU_OK;
}

void chip_clock_destroy(struct chip_clock *c)
{
    evq_destroy(&c->queue);
    free(c->harts);
    c->harts = NULL;
}

uint64_t chip_hart_time(const struct chip_clock *c, uint32_t hart)
{
    assert(hart < c->nharts);
    return c->harts[hart].now_ps;
}

void chip_hart_charge(struct chip_clock *c, uint32_t hart, uint64_t cycles)
{
    assert(hart < c->nharts && c->harts[hart].state == CHIP_HART_RUNNING);
    c->harts[hart].now_ps += cycles * c->p.cycle_ps;
}

uint32_t chip_hops(const struct chip_clock *c, uint32_t a, uint32_t b)
{
    const struct chip_hart *x = &c->harts[a], *y = &c->harts[b];
    uint32_t dr = x->row > y->row ? x->row - y->row : y->row - x->row;
    uint32_t dc = x->col > y->col ? x->col - y->col : y->col - x->col;
    if (a == b)
        return 0;
    /* The control core reaches the mesh through one link to router (0,0). */
    return dr + dc + (a == c->ncores) + (b == c->ncores);
}

static int schedule(struct chip_clock *c, uint32_t src, uint64_t time_ps, uint32_t kind,
                    uint64_t arg0, uint64_t arg1)
{
    struct evq_event ev = {
        .time_ps = time_ps, .src = src, .kind = kind,
        .seq = c->harts[src].seq++, .arg0 = arg0, .arg1 = arg1,
    };
    return evq_push(&c->queue, &ev);
}

/* The npu_wait_kind bit of h's wait that holds at time t (>= chip time), or 0. */
static uint32_t wait_holds(const struct chip_clock *c, const struct chip_hart *h, uint64_t t)
{
    const struct chip_wait *w = &h->wait;
    if ((w->kind & NPU_WAIT_TIMER) && w->deadline_ps <= t)
        return NPU_WAIT_TIMER;
    if ((w->kind & NPU_WAIT_SEM) && h->sems[w->sem] >= w->value)
        return NPU_WAIT_SEM;
    if ((w->kind & NPU_WAIT_RELEASE) && c->released)
        return NPU_WAIT_RELEASE;
    return 0;
}

static bool wait_is_valid(const struct chip_clock *c, uint32_t hart, const struct chip_wait *w)
{
    const uint32_t all = NPU_WAIT_TIMER | NPU_WAIT_SEM | NPU_WAIT_RELEASE;
    if (w->kind == 0 || (w->kind & ~all))
        return false;
    if ((w->kind & NPU_WAIT_SEM) && w->sem >= CHIP_SEMS_PER_CORE)
        return false;
    return !((w->kind & NPU_WAIT_RELEASE) && hart == c->ncores); /* it releases, not waits */
}

int chip_hart_wait(struct chip_clock *c, uint32_t hart, const struct chip_wait *w,
                   uint32_t *cause)
{
    assert(hart < c->nharts);
    struct chip_hart *h = &c->harts[hart];
    assert(h->state == CHIP_HART_RUNNING);
    if (!wait_is_valid(c, hart, w))
        return NPU_ERR_INVAL;
    if ((w->kind & NPU_WAIT_TIMER) && w->deadline_ps > CHIP_TIME_MAX_PS)
        return NPU_ERR_RANGE;
    h->wait = *w;
    uint32_t holds = wait_holds(c, h, h->now_ps);
    /* Semaphores are known as of chip time; the hart may be ahead of it. */
    bool judge_later = holds && holds != NPU_WAIT_TIMER && h->now_ps > c->time_ps;
    if (holds && !judge_later) {
        h->cause = holds;
        *cause = holds;
        return NPU_OK;
    }
    h->wait_gen++;
    h->check_pending = judge_later;
    int rc = NPU_OK;
    if (judge_later)
        rc = schedule(c, hart, h->now_ps, EV_CHECK, h->wait_gen, 0);
    if (rc == NPU_OK && (w->kind & NPU_WAIT_TIMER))
        rc = schedule(c, hart, w->deadline_ps, EV_TIMER, h->wait_gen, 0);
    if (rc)
        return rc;
    h->state = CHIP_HART_WAITING;
    c->nrunning--;
    *cause = 0;
    return NPU_OK;
}

void chip_hart_exit(struct chip_clock *c, uint32_t hart, int status)
{
    assert(hart < c->nharts);
    struct chip_hart *h = &c->harts[hart];
    if (h->state == CHIP_HART_FINISHED)
        return;
    if (h->state == CHIP_HART_RUNNING)
        c->nrunning--;
    h->state = CHIP_HART_FINISHED;
    h->exit_status = status;
    if (status != 0 && hart < c->ncores && hart < c->first_failed)
        c->first_failed = hart;
}

static bool sem_op_is_valid(const struct chip_clock *c, uint32_t target, uint32_t sem,
                            uint32_t op)
{
    return target < c->nharts && sem < CHIP_SEMS_PER_CORE &&
           (op == NPU_SEM_OP_INC || op == NPU_SEM_OP_SET);
}

int chip_sem_post_from_unit(struct chip_clock *c, uint32_t src, uint64_t time_ps,
                            uint32_t target, uint32_t sem, uint32_t op, uint32_t value)
{
    assert(src < c->nharts && time_ps >= c->time_ps);
    if (!sem_op_is_valid(c, target, sem, op))
        return NPU_ERR_RANGE;
    uint64_t at = time_ps + (uint64_t)chip_hops(c, src, target) * c->p.hop_cycles * c->p.cycle_ps;
    return schedule(c, src, at, EV_SEM, (uint64_t)target << 32 | sem, (uint64_t)op << 32 | value);
}

int chip_sem_post(struct chip_clock *c, uint32_t hart, uint32_t target, uint32_t sem,
                  uint32_t op, uint32_t value)
{
    assert(hart < c->nharts);
    if (!sem_op_is_valid(c, target, sem, op))
        return NPU_ERR_RANGE;
    chip_hart_charge(c, hart, c->p.cmd_cost_cycles);
    return chip_sem_post_from_unit(c, hart, c->harts[hart].now_ps, target, sem, op, value);
}

int chip_clock_schedule(struct chip_clock *c, uint32_t src, uint64_t time_ps, uint32_t kind,
                        uint64_t arg0, uint64_t arg1)
{
    assert(src < c->nharts && kind >= CHIP_EV_UNIT && time_ps >= c->time_ps);
    return schedule(c, src, time_ps, kind, arg0, arg1);
}

int chip_release_cores(struct chip_clock *c, uint32_t hart)
{
    if (hart != chip_clock_ctrl_hart(c) || c->harts[hart].state != CHIP_HART_RUNNING)
        return NPU_ERR_STATE;
    chip_hart_charge(c, hart, c->p.cmd_cost_cycles);
    return schedule(c, hart, c->harts[hart].now_ps, EV_RELEASE, 0, 0);
}

bool chip_clock_is_quiescent(const struct chip_clock *c)
{
    if (c->nrunning != 0)
        return false;
    for (uint32_t h = 0; h < c->nharts; h++)
        if (c->harts[h].state == CHIP_HART_WAITING)
            return true;
    return false;
}

/*
 * A wait of `hart` holds at chip time with `cause`: wake it. If the hart's own commands took
 * it past chip time, judge the wait again when chip time reaches the hart's (a SET may lower
 * the semaphore in between).
 */
static void wake(struct chip_clock *c, uint32_t hart, uint32_t cause, uint32_t *woken)
{
    struct chip_hart *h = &c->harts[hart];
    if (h->state != CHIP_HART_WAITING || h->check_pending)
        return;
    if (h->now_ps > c->time_ps) {
        h->check_pending = true;
        schedule(c, hart, h->now_ps, EV_CHECK, h->wait_gen, 0);
        return;
    }
    h->cause = cause;
    h->now_ps = c->time_ps;
    h->state = CHIP_HART_RUNNING;
    c->nrunning++;
    (*woken)++;
    if (c->p.on_wake)
        c->p.on_wake(c->p.opaque, hart);
}

static bool is_stale(const struct chip_clock *c, const struct evq_event *ev)
{
    if (ev->kind != EV_TIMER && ev->kind != EV_CHECK)
        return false;
    const struct chip_hart *h = &c->harts[ev->src];
    return h->state != CHIP_HART_WAITING || h->wait_gen != (uint32_t)ev->arg0;
}

static bool stale_cb(const void *c, const struct evq_event *ev)
{
    return is_stale(c, ev);
}

/*
 * Most waits arm a timer (a timeout far ahead) and end by a semaphore, leaving the timer in
 * the queue until its deadline: in a large run that is most of the queue (190000 events),
 * and every push and pop pays for it. A stale event stays stale (a wait that ended never
 * becomes current again: each wait bumps wait_gen, and a finished hart stays finished), and
 * popping one changes nothing (see chip_clock_advance), so they are dropped in bulk when the
 * queue has doubled since the last time. Called as an advance starts: no hart runs then.
 */
static void drop_stale(struct chip_clock *c)
{
    evq_drop_if(&c->queue, stale_cb, c);
    c->drop_len = 2 * c->queue.len > drop_floor(c) ? 2 * c->queue.len : drop_floor(c);
}

static void apply_sem(struct chip_clock *c, const struct evq_event *ev, uint32_t *woken)
{
    uint32_t target = (uint32_t)(ev->arg0 >> 32), sem = (uint32_t)ev->arg0;
    uint32_t op = (uint32_t)(ev->arg1 >> 32), value = (uint32_t)ev->arg1;
    struct chip_hart *t = &c->harts[target];
    t->sems[sem] = op == NPU_SEM_OP_SET ? value : t->sems[sem] + value;
    if (t->state == CHIP_HART_WAITING && (t->wait.kind & NPU_WAIT_SEM) &&
        t->wait.sem == sem && t->sems[sem] >= t->wait.value)
        wake(c, target, NPU_WAIT_SEM, woken);
    if (c->p.on_sem_change)
        c->p.on_sem_change(c->p.unit, target, sem);
}

static void apply(struct chip_clock *c, const struct evq_event *ev, uint32_t *woken)
{
    struct chip_hart *h = &c->harts[ev->src];
    uint32_t cause;
    switch (ev->kind) {
    case EV_TIMER:
        wake(c, ev->src, NPU_WAIT_TIMER, woken);
        break;
    case EV_CHECK:
        h->check_pending = false;
        cause = wait_holds(c, h, c->time_ps);
        if (cause)
            wake(c, ev->src, cause, woken); /* else: its timer or a semaphore wakes it */
        break;
    case EV_SEM:
        apply_sem(c, ev, woken);
        break;
    case EV_RELEASE:
        c->released = true;
        for (uint32_t i = 0; i < c->ncores; i++)
            if (c->harts[i].state == CHIP_HART_WAITING &&
                (c->harts[i].wait.kind & NPU_WAIT_RELEASE))
                wake(c, i, NPU_WAIT_RELEASE, woken);
        break;
    default:
        assert(ev->kind >= CHIP_EV_UNIT && c->p.on_unit_event);
        c->p.on_unit_event(c->p.unit, ev);
    }
}

int chip_clock_advance(struct chip_clock *c)
{
    uint32_t woken = 0;
    struct evq_event ev;
    if (c->queue.len >= c->drop_len)
        drop_stale(c);
    while (evq_pop(&c->queue, &ev)) {
        /* A timer or resume of a wait that already ended is dropped: no time passes. It may
         * be the last event at the wake time, so the stop test below still applies. */
        if (!is_stale(c, &ev)) {
            assert(ev.time_ps >= c->time_ps);
            c->time_ps = ev.time_ps;
            c->events_applied++;
            apply(c, &ev, &woken);
        }
        const struct evq_event *next = evq_peek(&c->queue);
        if (woken && (!next || next->time_ps > c->time_ps))
            return NPU_OK;
    }
    return woken ? NPU_OK : NPU_ERR_DEADLOCK;
}

void chip_hart_describe(const struct chip_clock *c, uint32_t hart, char *buf, size_t len)
{
    const struct chip_hart *h = &c->harts[hart];
    if (h->state == CHIP_HART_FINISHED) {
        snprintf(buf, len, "finished with status %d", h->exit_status);
        return;
    }
    if (h->state == CHIP_HART_RUNNING) {
        snprintf(buf, len, "running (not waiting) at local time %llu ps",
                 (unsigned long long)h->now_ps);
        return;
    }
    int n = snprintf(buf, len, "waiting since %llu ps for", (unsigned long long)h->now_ps);
    const char *sep = "";
    if (h->wait.kind & NPU_WAIT_TIMER && n >= 0 && (size_t)n < len) {
        n += snprintf(buf + n, len - n, " timer at %llu ps",
                      (unsigned long long)h->wait.deadline_ps);
        sep = " or";
    }
    if (h->wait.kind & NPU_WAIT_SEM && n >= 0 && (size_t)n < len) {
        n += snprintf(buf + n, len - n, "%s semaphore %u >= %u (now %u)", sep, h->wait.sem,
                      h->wait.value, h->sems[h->wait.sem]);
        sep = " or";
    }
    if (h->wait.kind & NPU_WAIT_RELEASE && n >= 0 && (size_t)n < len)
        snprintf(buf + n, len - n, "%s release by the control core", sep);
}
