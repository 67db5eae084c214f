/* SPDX-License-Identifier: MIT */
/*
 * The chip clock (design brief, section 3). Chip time belongs to this model, not to QEMU.
 *
 * Harts are untimed control processors. Each hart has a local time: the chip time at which it
 * last woke, plus the configured cost of every command it has issued since. A hart that has
 * nothing to do waits for a condition (timer, semaphore, release). Chip time advances only
 * when no hart runs: chip_clock_advance() then pops the earliest events in key order
 * (time, source, sequence), applies them, and wakes exactly the harts whose wait is satisfied.
 * Every hart waiting with no event pending is a deadlock.
 *
 * Modelled: hart local time, command cost, per-core semaphores written locally or across the
 * mesh with a hop latency (XY distance; the control core's link to router (0,0) is one hop),
 * timers, the release of the NPU cores, exit. Not modelled here: engines, NoC bandwidth and
 * contention (they schedule their own events on this queue when they come).
 *
 * Not thread-safe: the QEMU glue calls it with the big QEMU lock held.
 */
#ifndef CHIP_CLOCK_H
#define CHIP_CLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "event_queue.h"
#include "npu_enums.h"
#include "npu_limits.h"
#include "npu_memmap.h"

#define CHIP_SEMS_PER_CORE NPU_CORE_SEM_COUNT /* from the register specification */
/* The latest chip time a wait may name (about 53 days; npu_limits.h): sums of times never
   overflow. */
#define CHIP_TIME_MAX_PS NPU_TIME_MAX_PS

enum chip_hart_state {
    CHIP_HART_RUNNING,  /* executing instructions; chip time cannot advance */
    CHIP_HART_WAITING,  /* waiting for a condition */
    CHIP_HART_FINISHED, /* exited; takes no further part */
};

/* What a hart waits for: it wakes when any condition selected in `kind` holds. */
struct chip_wait {
    uint32_t kind;        /* npu_wait_kind bits */
    uint64_t deadline_ps; /* NPU_WAIT_TIMER: local time >= deadline */
    uint32_t sem;         /* NPU_WAIT_SEM: sems[sem] >= value */
    uint32_t value;
};

struct chip_hart {
    enum chip_hart_state state;
    uint64_t now_ps;       /* local time */
    struct chip_wait wait; /* valid while WAITING */
    uint32_t wait_gen;     /* bumps at every wait; stale events carry an old value */
    uint32_t cause;        /* npu_wait_kind bit that ended the last wait */
    bool check_pending;    /* an EV_CHECK at now_ps will evaluate the wait (the hart's own
                              commands took it past chip time) */
    uint64_t seq;          /* next sequence number of events this hart schedules */
    uint32_t sems[CHIP_SEMS_PER_CORE];
    uint32_t row, col;     /* router the hart's core sits on */
    int exit_status;
};

struct chip_clock_params {
    uint32_t rows, cols;      /* mesh; harts 0..rows*cols-1 are NPU cores */
    uint64_t cycle_ps;        /* one core cycle */
    uint32_t cmd_cost_cycles; /* charged to a hart per command */
    uint32_t hop_cycles;      /* NoC latency per router hop */
    /* Called for every hart that wakes (its state is RUNNING again). */
    void (*on_wake)(void *opaque, uint32_t hart);
    void *opaque;
    /* Units built on the clock (the engines): their own events, and semaphore changes. */
    void (*on_unit_event)(void *unit, const struct evq_event *ev);
    void (*on_sem_change)(void *unit, uint32_t core, uint32_t sem);
    void *unit;
};

/* Event kinds from CHIP_EV_UNIT on belong to the unit (on_unit_event). */
#define CHIP_EV_UNIT 16u

struct chip_clock {
    struct chip_clock_params p;
    uint32_t ncores;       /* NPU cores; the control core is hart `ncores` */
    uint32_t nharts;       /* ncores + 1 */
    struct chip_hart *harts;
    struct evq queue;
    uint64_t time_ps;      /* time of the last applied event */
    uint32_t nrunning;     /* harts in CHIP_HART_RUNNING */
    bool released;         /* the control core released the NPU cores */
    uint32_t first_failed; /* lowest NPU core that exited non-zero, or UINT32_MAX */
    uint64_t events_applied;
    size_t drop_len;       /* queue length at which the stale events are dropped */
};

int chip_clock_init(struct chip_clock *c, const struct chip_clock_params *p);
void chip_clock_destroy(struct chip_clock *c);

static inline uint32_t chip_clock_ctrl_hart(const struct chip_clock *c)
{
    return c->ncores;
}

/* Local time of a hart. */
uint64_t chip_hart_time(const struct chip_clock *c, uint32_t hart);

/* Charges `cycles` of chip time to a running hart. */
void chip_hart_charge(struct chip_clock *c, uint32_t hart, uint64_t cycles);

/*
 * Starts a wait. Returns NPU_OK with *cause = the npu_wait_kind bit that already holds (the
 * hart goes on running) or 0 (the hart now waits); NPU_ERR_INVAL for a bad wait (no kind,
 * bad semaphore, the control core waiting for release); NPU_ERR_RANGE for a deadline past
 * CHIP_TIME_MAX_PS. A condition is judged at the hart's own time: if that is ahead of chip
 * time, the hart waits until chip time catches up, so a SET landing in between counts.
 */
int chip_hart_wait(struct chip_clock *c, uint32_t hart, const struct chip_wait *w,
                   uint32_t *cause);

/* The hart has finished with `status`. */
void chip_hart_exit(struct chip_clock *c, uint32_t hart, int status);

/*
 * Command: semaphore operation (npu_sem_op) from `hart` on semaphore `sem` of `target`
 * (a hart index). Charges the command cost; the operation lands after the hop latency.
 */
int chip_sem_post(struct chip_clock *c, uint32_t hart, uint32_t target, uint32_t sem,
                  uint32_t op, uint32_t value);

/*
 * A unit schedules one of its events (kind >= CHIP_EV_UNIT) on behalf of core `src`, at a
 * time not before chip time. The key's sequence number comes from that core's counter.
 */
int chip_clock_schedule(struct chip_clock *c, uint32_t src, uint64_t time_ps, uint32_t kind,
                        uint64_t arg0, uint64_t arg1);

/* A semaphore operation issued by a unit of core `src` (no hart is charged), landing at
 * time_ps plus the hop latency to the target. */
int chip_sem_post_from_unit(struct chip_clock *c, uint32_t src, uint64_t time_ps,
                            uint32_t target, uint32_t sem, uint32_t op, uint32_t value);

/*
 * Command from the running control core: release every NPU core waiting for
 * NPU_WAIT_RELEASE. NPU_ERR_STATE from any other hart, or from a hart not running.
 */
int chip_release_cores(struct chip_clock *c, uint32_t hart);

/* True while some hart runs: chip time cannot advance. */
static inline bool chip_clock_any_running(const struct chip_clock *c)
{
    return c->nrunning != 0;
}

/* True when no hart runs and at least one waits: time must advance. */
bool chip_clock_is_quiescent(const struct chip_clock *c);

/* The lowest-numbered NPU core that exited with a non-zero status, or UINT32_MAX. */
static inline uint32_t chip_clock_first_failed(const struct chip_clock *c)
{
    return c->first_failed;
}

/*
 * Advances chip time until at least one hart wakes. Applies every event of the earliest time
 * that wakes somebody, in key order. Returns NPU_OK, or NPU_ERR_DEADLOCK if the queue ran dry
 * with every hart still waiting (chip time then stays at the last applied event).
 */
int chip_clock_advance(struct chip_clock *c);

/* One line describing what a hart does or waits for (for deadlock and watchdog reports). */
void chip_hart_describe(const struct chip_clock *c, uint32_t hart, char *buf, size_t len);

/* Router hops between two harts' cores (the control core attaches at (0,0), one hop away). */
uint32_t chip_hops(const struct chip_clock *c, uint32_t a, uint32_t b);

#endif
