/* SPDX-License-Identifier: MIT */
/*
 * Host unit tests of the chip clock (emulator/model/chip_clock.[ch], design brief section 3).
 * A 2x2 mesh: NPU cores 0..3 and the control hart 4; one core cycle is 2000 ps, a command
 * costs 4 cycles (8000 ps) and a router hop 2 cycles (4000 ps). An on_wake callback logs
 * every wake (hart, chip time, local time, cause).
 * Covers: initial state; timer waits (deadline already passed, exact wake times, order,
 * monotonic chip time, ties woken in one advance); chip_hops incl. the control core;
 * semaphore post latency for every pair of harts, INC and SET, SEM waits (only on their own
 * semaphore); resuming at the hart's own local time (EV_RESUME); TIMER|SEM waits ending by
 * whichever comes first while the stale timer neither advances chip time nor lets an advance
 * run past the wake; stale timers dropped in bulk without changing a wake; RELEASE; argument errors; deadlock with chip_hart_describe; exit and
 * all_finished; is_quiescent; and determinism of two scripted scenarios (a ring, and ties at
 * one instant) under different host orders of the harts' operations.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "chip_clock.h"
#include "npu_enums.h"

#define CYCLE_PS 2000u
#define CMD_PS (4u * CYCLE_PS) /* cmd_cost_cycles 4 */
#define HOP_PS (2u * CYCLE_PS) /* hop_cycles 2 */
#define NCORES 4u
#define CTRL 4u
#define NHARTS 5u
#define LOG_MAX 64u

struct wake_rec {
    uint32_t hart;
    uint64_t chip_ps;
    uint64_t local_ps;
    uint32_t cause;
};

struct fixture {
    struct chip_clock c;
    struct wake_rec log[LOG_MAX];
    size_t nlog;
};

static void on_wake(void *opaque, uint32_t hart)
{
    struct fixture *f = opaque;
    assert_true(f->nlog < LOG_MAX);
    assert_int_equal(f->c.harts[hart].state, CHIP_HART_RUNNING);
    if (f->nlog > 0) /* chip time never goes back */
        assert_true(f->c.time_ps >= f->log[f->nlog - 1].chip_ps);
    struct wake_rec r = { hart, f->c.time_ps, chip_hart_time(&f->c, hart),
                          f->c.harts[hart].cause };
    f->log[f->nlog++] = r;
}

static void fixture_init(struct fixture *f)
{
    memset(f, 0, sizeof(*f));
    const struct chip_clock_params p = {
        .rows = 2, .cols = 2, .cycle_ps = CYCLE_PS, .cmd_cost_cycles = 4, .hop_cycles = 2,
        .on_wake = on_wake, .opaque = f,
    };
    assert_int_equal(chip_clock_init(&f->c, &p), NPU_OK);
}

static int setup(void **state)
{
    struct fixture *f = malloc(sizeof(*f));
    if (!f)
        return -1;
    fixture_init(f);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    chip_clock_destroy(&f->c);
    free(f);
    return 0;
}

/* chip_hart_wait as one number: the cause that already holds, 0 (now waiting) or an error. */
static int hart_wait(struct chip_clock *c, uint32_t hart, const struct chip_wait *w)
{
    uint32_t cause = 0;
    int rc = chip_hart_wait(c, hart, w, &cause);
    return rc < 0 ? rc : (int)cause;
}

static bool all_finished(const struct chip_clock *c)
{
    for (uint32_t h = 0; h < c->nharts; h++)
        if (c->harts[h].state != CHIP_HART_FINISHED)
            return false;
    return true;
}

static int wait_timer(struct chip_clock *c, uint32_t hart, uint64_t deadline_ps)
{
    const struct chip_wait w = { .kind = NPU_WAIT_TIMER, .deadline_ps = deadline_ps };
    return hart_wait(c, hart, &w);
}

static int wait_sem(struct chip_clock *c, uint32_t hart, uint32_t sem, uint32_t value)
{
    const struct chip_wait w = { .kind = NPU_WAIT_SEM, .sem = sem, .value = value };
    return hart_wait(c, hart, &w);
}

static int wait_timer_or_sem(struct chip_clock *c, uint32_t hart, uint64_t deadline_ps,
                             uint32_t sem, uint32_t value)
{
    const struct chip_wait w = { .kind = NPU_WAIT_TIMER | NPU_WAIT_SEM,
                                 .deadline_ps = deadline_ps, .sem = sem, .value = value };
    return hart_wait(c, hart, &w);
}

static int wait_release(struct chip_clock *c, uint32_t hart)
{
    const struct chip_wait w = { .kind = NPU_WAIT_RELEASE };
    return hart_wait(c, hart, &w);
}

static void assert_wake(const struct fixture *f, size_t i, uint32_t hart, uint64_t t,
                        uint32_t cause)
{
    assert_true(i < f->nlog);
    assert_int_equal(f->log[i].hart, hart);
    assert_int_equal(f->log[i].chip_ps, t);
    assert_int_equal(f->log[i].local_ps, t);
    assert_int_equal(f->log[i].cause, cause);
}

static void assert_state(const struct chip_clock *c, uint32_t hart, enum chip_hart_state s)
{
    assert_int_equal(c->harts[hart].state, s);
}

/* ---- initial state */

static void test_all_harts_start_running(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(f->c.ncores, NCORES);
    assert_int_equal(f->c.nharts, NHARTS);
    assert_int_equal(chip_clock_ctrl_hart(&f->c), CTRL);
    assert_int_equal(f->c.time_ps, 0);
    assert_int_equal(f->c.nrunning, NHARTS);
    assert_false(f->c.released);
    for (uint32_t h = 0; h < NHARTS; h++) {
        assert_state(&f->c, h, CHIP_HART_RUNNING);
        assert_int_equal(chip_hart_time(&f->c, h), 0);
    }
    assert_true(evq_is_empty(&f->c.queue));
    assert_false(chip_clock_is_quiescent(&f->c));
    assert_false(all_finished(&f->c));
}

static void test_charge_advances_local_time_only(void **state)
{
    struct fixture *f = *state;
    chip_hart_charge(&f->c, 2, 3);
    assert_int_equal(chip_hart_time(&f->c, 2), 3 * CYCLE_PS);
    chip_hart_charge(&f->c, 2, 1);
    assert_int_equal(chip_hart_time(&f->c, 2), 4 * CYCLE_PS);
    assert_int_equal(chip_hart_time(&f->c, 1), 0);
    assert_int_equal(f->c.time_ps, 0);
}

/* ---- timers */

static void test_timer_already_passed_does_not_wait(void **state)
{
    struct fixture *f = *state;
    chip_hart_charge(&f->c, 0, 10); /* local time 20000 */
    const uint64_t deadlines[] = { 0, 19999, 20000 };
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(wait_timer(&f->c, 0, deadlines[i]), NPU_WAIT_TIMER);
        assert_state(&f->c, 0, CHIP_HART_RUNNING);
        assert_int_equal(f->c.harts[0].cause, NPU_WAIT_TIMER);
        assert_int_equal(chip_hart_time(&f->c, 0), 20000);
    }
    assert_int_equal(f->c.nrunning, NHARTS);
    assert_true(evq_is_empty(&f->c.queue));
    assert_int_equal(f->nlog, 0);
    /* One picosecond later is in the future: the hart waits. */
    assert_int_equal(wait_timer(&f->c, 0, 20001), 0);
    assert_state(&f->c, 0, CHIP_HART_WAITING);
    assert_int_equal(f->c.nrunning, NHARTS - 1);
}

static void test_timers_wake_at_deadline_in_order(void **state)
{
    struct fixture *f = *state;
    const uint64_t deadline[NHARTS] = { 30000, 10000, 50000, 20000, 40000 };
    const uint32_t order[NHARTS] = { 1, 3, 0, 4, 2 };
    for (uint32_t h = 0; h < NHARTS; h++)
        assert_int_equal(wait_timer(&f->c, h, deadline[h]), 0);
    assert_true(chip_clock_is_quiescent(&f->c));
    for (size_t i = 0; i < NHARTS; i++) {
        assert_int_equal(chip_clock_advance(&f->c), NPU_OK);
        assert_int_equal(f->nlog, i + 1);
        assert_wake(f, i, order[i], deadline[order[i]], NPU_WAIT_TIMER);
        assert_int_equal(f->c.time_ps, deadline[order[i]]);
        assert_int_equal(f->c.nrunning, 1);
        chip_hart_exit(&f->c, order[i], 0);
    }
    assert_true(all_finished(&f->c));
    assert_int_equal(f->c.events_applied, NHARTS);
}

static void test_ties_wake_in_one_advance(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(wait_timer(&f->c, 4, 7000), 0);
    assert_int_equal(wait_timer(&f->c, 1, 9000), 0);
    assert_int_equal(wait_timer(&f->c, 3, 7000), 0);
    assert_int_equal(wait_timer(&f->c, 0, 7000), 0);
    assert_int_equal(wait_timer(&f->c, 2, 7000), 0);
    assert_int_equal(chip_clock_advance(&f->c), NPU_OK);
    /* All four at 7000, in key order (source = hart), hart 1 still waiting. */
    assert_int_equal(f->nlog, 4);
    assert_wake(f, 0, 0, 7000, NPU_WAIT_TIMER);
    assert_wake(f, 1, 2, 7000, NPU_WAIT_TIMER);
    assert_wake(f, 2, 3, 7000, NPU_WAIT_TIMER);
    assert_wake(f, 3, 4, 7000, NPU_WAIT_TIMER);
    assert_state(&f->c, 1, CHIP_HART_WAITING);
    assert_int_equal(f->c.nrunning, 4);
    assert_int_equal(f->c.time_ps, 7000);
    for (uint32_t h = 0; h < NHARTS; h++)
        if (h != 1)
            assert_int_equal(wait_timer(&f->c, h, 100000), 0);
    assert_int_equal(chip_clock_advance(&f->c), NPU_OK);
    assert_int_equal(f->nlog, 5);
    assert_wake(f, 4, 1, 9000, NPU_WAIT_TIMER);
}

/* ---- semaphores across the mesh */

static const uint32_t expected_hops[NHARTS][NHARTS] = {
    /* to:  0  1  2  3  ctrl;  cores (0,0) (0,1) (1,0) (1,1), ctrl on a link to (0,0) */
    { 0, 1, 1, 2, 1 },
    { 1, 0, 2, 1, 2 },
    { 1, 2, 0, 1, 2 },
    { 2, 1, 1, 0, 3 },
    { 1, 2, 2, 3, 0 },
};

static void test_hops(void **state)
{
    struct fixture *f = *state;
    for (uint32_t a = 0; a < NHARTS; a++)
        for (uint32_t b = 0; b < NHARTS; b++)
            assert_int_equal(chip_hops(&f->c, a, b), expected_hops[a][b]);
}

/* `src` posts INC 1 to semaphore 5 of `dst`, which waits for it; the rest exit. */
static void post_and_check_latency(uint32_t src, uint32_t dst)
{
    struct fixture f;
    fixture_init(&f);
    for (uint32_t h = 0; h < NHARTS; h++)
        if (h != src && h != dst)
            chip_hart_exit(&f.c, h, 0);
    assert_int_equal(chip_sem_post(&f.c, src, dst, 5, NPU_SEM_OP_INC, 1), NPU_OK);
    assert_int_equal(chip_hart_time(&f.c, src), CMD_PS);
    assert_int_equal(f.c.harts[dst].sems[5], 0); /* lands only when time advances */
    if (src != dst)
        chip_hart_exit(&f.c, src, 0);
    assert_int_equal(wait_sem(&f.c, dst, 5, 1), 0);
    assert_int_equal(chip_clock_advance(&f.c), NPU_OK);
    const uint64_t t = CMD_PS + (uint64_t)expected_hops[src][dst] * HOP_PS;
    assert_int_equal(f.nlog, 1);
    assert_wake(&f, 0, dst, t, NPU_WAIT_SEM);
    assert_int_equal(f.c.time_ps, t);
    assert_int_equal(f.c.harts[dst].sems[5], 1);
    chip_clock_destroy(&f.c);
}

static void test_sem_post_latency_all_pairs(void **state)
{
    (void)state;
    for (uint32_t src = 0; src < NHARTS; src++)
        for (uint32_t dst = 0; dst < NHARTS; dst++)
            post_and_check_latency(src, dst);
}

static void exit_all_but(struct chip_clock *c, uint32_t keep_a, uint32_t keep_b)
{
    for (uint32_t h = 0; h < NHARTS; h++)
        if (h != keep_a && h != keep_b)
            chip_hart_exit(c, h, 0);
}

static void test_sem_inc_and_set(void **state)
{
    struct fixture *f = *state;
    exit_all_but(&f->c, 0, 1);
    /* Core 0 -> core 1 is one hop: each post lands 4000 ps after its charged time. */
    assert_int_equal(chip_sem_post(&f->c, 0, 1, 2, NPU_SEM_OP_INC, 3), NPU_OK); /* 12000 */
    assert_int_equal(chip_sem_post(&f->c, 0, 1, 2, NPU_SEM_OP_INC, 4), NPU_OK); /* 20000 */
    assert_int_equal(chip_sem_post(&f->c, 0, 1, 2, NPU_SEM_OP_SET, 10), NPU_OK); /* 28000 */
    assert_int_equal(chip_sem_post(&f->c, 0, 1, 2, NPU_SEM_OP_INC, 1), NPU_OK); /* 36000 */
    assert_int_equal(chip_sem_post(&f->c, 0, 1, 2, NPU_SEM_OP_SET, 2), NPU_OK); /* 44000 */
    assert_int_equal(chip_hart_time(&f->c, 0), 5 * CMD_PS);
    chip_hart_exit(&f->c, 0, 0);

    assert_int_equal(wait_sem(&f->c, 1, 2, 7), 0);
    assert_int_equal(chip_clock_advance(&f->c), NPU_OK);
    assert_wake(f, 0, 1, 20000, NPU_WAIT_SEM);
    assert_int_equal(f->c.harts[1].sems[2], 7);

    assert_int_equal(wait_sem(&f->c, 1, 2, 11), 0);
    assert_int_equal(chip_clock_advance(&f->c), NPU_OK);
    assert_int_equal(f->nlog, 2); /* SET 10 at 28000 was not enough */
    assert_wake(f, 1, 1, 36000, NPU_WAIT_SEM);
    assert_int_equal(f->c.harts[1].sems[2], 11);

    /* SET also lowers the value. */
    assert_int_equal(wait_timer(&f->c, 1, 50000), 0);
    assert_int_equal(chip_clock_advance(&f->c), NPU_OK);
    assert_wake(f, 2, 1, 50000, NPU_WAIT_TIMER);
    assert_int_equal(f->c.harts[1].sems[2], 2);
    for (uint32_t s = 0; s < CHIP_SEMS_PER_CORE; s++)
        if (s != 2)
            assert_int_equal(f->c.harts[1].sems[s], 0);
}

static void test_sem_other_semaphore_does_not_wake(void **state)
{
    struct fixture *f = *state;
    exit_all_but(&f->c, 0, 1);
    assert_int_equal(chip_sem_post(&f->c, 0, 1, 2, NPU_SEM_OP_INC, 5), NPU_OK); /* 12000 */
    assert_int_equal(chip_sem_post(&f->c, 0, 1, 1, NPU_SEM_OP_INC, 1), NPU_OK); /* 20000 */
    chip_hart_exit(&f->c, 0, 0);
    assert_int_equal(wait_sem(&f->c, 1, 1, 1), 0);
    assert_int_equal(chip_clock_advance(&f->c), NPU_OK);
    assert_int_equal(f->nlog, 1);
    assert_wake(f, 0, 1, 20000, NPU_WAIT_SEM);
    assert_int_equal(f->c.harts[1].sems[2], 5);
    assert_int_equal(f->c.harts[1].sems[1], 1);
}

static void test_sem_wait_already_satisfied(void **state)
{
    struct fixture *f = *state;
    exit_all_but(&f->c, 2, 3);
    assert_int_equal(chip_sem_post(&f->c, 3, 2, 31, NPU_SEM_OP_SET, 5), NPU_OK); /* 12000 */
    assert_int_equal(wait_timer(&f->c, 3, 100000), 0);
    assert_int_equal(wait_timer(&f->c, 2, 15000), 0);
    assert_int_equal(chip_clock_advance(&f->c), NPU_OK);
    assert_wake(f, 0, 2, 15000, NPU_WAIT_TIMER);
    assert_int_equal(wait_sem(&f->c, 2, 31, 5), NPU_WAIT_SEM);
    assert_int_equal(wait_sem(&f->c, 2, 31, 0), NPU_WAIT_SEM);
    assert_state(&f->c, 2, CHIP_HART_RUNNING);
    assert_int_equal(f->c.harts[2].cause, NPU_WAIT_SEM);
    assert_int_equal(wait_sem(&f->c, 2, 31, 6), 0);
    assert_state(&f->c, 2, CHIP_HART_WAITING);
}

/* ---- a hart whose own commands ran past the event resumes at its local time */

static void test_resume_at_own_local_time(void **state)
{
    struct fixture *f = *state;
    exit_all_but(&f->c, 0, 1);
    assert_int_equal(chip_sem_post(&f->c, 1, 0, 0, NPU_SEM_OP_INC, 1), NPU_OK); /* 12000 */
    assert_int_equal(wait_timer(&f->c, 1, 1000000), 0);
    chip_hart_charge(&f->c, 0, 10); /* local time 20000 */
    assert_int_equal(wait_sem(&f->c, 0, 0, 1), 0);
    assert_int_equal(chip_clock_advance(&f->c), NPU_OK);
    assert_int_equal(f->nlog, 1);
    assert_wake(f, 0, 0, 20000, NPU_WAIT_SEM);
    assert_int_equal(f->c.time_ps, 20000);
    assert_int_equal(f->c.harts[0].sems[0], 1);
    assert_false(f->c.harts[0].check_pending);
    assert_state(&f->c, 1, CHIP_HART_WAITING);
}

static void test_resume_before_later_events(void **state)
{
    struct fixture *f = *state;
    exit_all_but(&f->c, 0, 1);
    /* The sem lands at 12000 while core 0 is at 20000; core 1's timer is at 20001. */
    assert_int_equal(chip_sem_post(&f->c, 1, 0, 0, NPU_SEM_OP_INC, 1), NPU_OK);
    assert_int_equal(wait_timer(&f->c, 1, 20001), 0);
    chip_hart_charge(&f->c, 0, 10);
    assert_int_equal(wait_timer_or_sem(&f->c, 0, 30000, 0, 1), 0);
    assert_int_equal(chip_clock_advance(&f->c), NPU_OK);
    assert_int_equal(f->nlog, 1);
    assert_wake(f, 0, 0, 20000, NPU_WAIT_SEM);
    assert_int_equal(wait_sem(&f->c, 0, 9, 1), 0);
    assert_int_equal(chip_clock_advance(&f->c), NPU_OK);
    assert_int_equal(f->nlog, 2);
    assert_wake(f, 1, 1, 20001, NPU_WAIT_TIMER);
}

/* ---- TIMER|SEM: whichever comes first */

static void test_timer_or_sem_sem_first(void **state)
{
    struct fixture *f = *state;
    exit_all_but(&f->c, 0, 1);
    assert_int_equal(chip_sem_post(&f->c, 1, 0, 0, NPU_SEM_OP_INC, 1), NPU_OK); /* 12000 */
    assert_int_equal(wait_sem(&f->c, 1, 3, 1), 0);
    assert_int_equal(wait_timer_or_sem(&f->c, 0, 50000, 0, 1), 0);
    assert_int_equal(chip_clock_advance(&f->c), NPU_OK);
    assert_int_equal(f->nlog, 1);
    assert_wake(f, 0, 0, 12000, NPU_WAIT_SEM);
    /* Everybody waits for semaphores nobody posts: only the stale timer at 50000 is left. */
    assert_int_equal(wait_sem(&f->c, 0, 1, 1), 0);
    const uint64_t applied = f->c.events_applied;
    assert_int_equal(chip_clock_advance(&f->c), NPU_ERR_DEADLOCK);
    assert_int_equal(f->c.time_ps, 12000);
    assert_int_equal(f->c.events_applied, applied);
    assert_int_equal(f->nlog, 1);
    assert_true(evq_is_empty(&f->c.queue));
}

static void test_timer_or_sem_timer_first(void **state)
{
    struct fixture *f = *state;
    exit_all_but(&f->c, 0, 1);
    assert_int_equal(chip_sem_post(&f->c, 1, 0, 0, NPU_SEM_OP_INC, 1), NPU_OK); /* 12000 */
    assert_int_equal(wait_sem(&f->c, 1, 3, 1), 0);
    assert_int_equal(wait_timer_or_sem(&f->c, 0, 10000, 0, 1), 0);
    assert_int_equal(chip_clock_advance(&f->c), NPU_OK);
    assert_wake(f, 0, 0, 10000, NPU_WAIT_TIMER);
    assert_int_equal(f->c.harts[0].sems[0], 0);
    assert_int_equal(wait_sem(&f->c, 0, 0, 1), 0);
    assert_int_equal(chip_clock_advance(&f->c), NPU_OK);
    assert_int_equal(f->nlog, 2);
    assert_wake(f, 1, 0, 12000, NPU_WAIT_SEM);
}

/*
 * The semaphore (source 1) and the timer (source 2) of hart 2's wait fall at the same time;
 * the semaphore comes first by key and wakes it. The then stale timer must not let the same
 * advance go on to hart 3's later timer: hart 2 runs at 16000 before anything later happens.
 */
static void test_stale_timer_at_wake_time_ends_advance(void **state)
{
    struct fixture *f = *state;
    chip_hart_exit(&f->c, 0, 0);
    chip_hart_exit(&f->c, CTRL, 0);
    assert_int_equal(chip_sem_post(&f->c, 1, 2, 0, NPU_SEM_OP_INC, 1), NPU_OK); /* 16000 */
    assert_int_equal(wait_sem(&f->c, 1, 3, 1), 0);
    assert_int_equal(wait_timer(&f->c, 3, 30000), 0);
    assert_int_equal(wait_timer_or_sem(&f->c, 2, 16000, 0, 1), 0);
    assert_int_equal(chip_clock_advance(&f->c), NPU_OK);
    assert_int_equal(f->nlog, 1);
    assert_wake(f, 0, 2, 16000, NPU_WAIT_SEM);
    assert_int_equal(f->c.time_ps, 16000);
    assert_state(&f->c, 3, CHIP_HART_WAITING);
    /* Hart 2 acts at 16000, before hart 3's timer: its post lands at 16000 + 8000 + 4000. */
    assert_int_equal(chip_sem_post(&f->c, 2, 3, 4, NPU_SEM_OP_INC, 1), NPU_OK);
    assert_int_equal(wait_sem(&f->c, 2, 3, 1), 0);
    assert_int_equal(chip_clock_advance(&f->c), NPU_OK);
    assert_int_equal(f->nlog, 2);
    assert_wake(f, 1, 3, 30000, NPU_WAIT_TIMER);
    assert_int_equal(f->c.harts[3].sems[4], 1);
}

/*
 * 3000 TIMER|SEM waits each ended by the semaphore leave 3000 stale timers 1 s ahead; the
 * queue drops them in bulk instead of holding them (it stays under its drop threshold,
 * 1024 + 8 per hart), and nothing else changes: every wake at its exact time, then a live
 * timer still fires at its deadline.
 */
static void test_stale_timers_dropped(void **state)
{
    struct fixture *f = *state;
    exit_all_but(&f->c, 0, 0);
    for (uint64_t i = 0; i < 3000; i++) {
        f->nlog = 0;
        /* a post to itself lands after the command, 0 hops */
        assert_int_equal(chip_sem_post(&f->c, 0, 0, 2, NPU_SEM_OP_INC, 1), NPU_OK);
        assert_int_equal(wait_timer_or_sem(&f->c, 0, 1000000000000ull, 2, (uint32_t)i + 1), 0);
        assert_int_equal(chip_clock_advance(&f->c), NPU_OK);
        assert_int_equal(f->nlog, 1);
        assert_wake(f, 0, 0, (i + 1) * CMD_PS, NPU_WAIT_SEM);
        assert_true(f->c.queue.len <= 1024 + 8 * NHARTS);
    }
    f->nlog = 0;
    assert_int_equal(wait_timer(&f->c, 0, 3000 * CMD_PS + 5), 0);
    assert_int_equal(chip_clock_advance(&f->c), NPU_OK);
    assert_wake(f, 0, 0, 3000 * CMD_PS + 5, NPU_WAIT_TIMER);
    assert_int_equal(f->c.events_applied, 3000 + 1); /* stale events never count */
}

/* ---- release of the NPU cores */

static void test_release_wakes_waiting_cores(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(wait_release(&f->c, 0), 0);
    chip_hart_charge(&f->c, 1, 5); /* local 10000: past the release at 8000 */
    assert_int_equal(wait_release(&f->c, 1), 0);
    assert_int_equal(wait_sem(&f->c, 2, 0, 1), 0);
    const struct chip_wait rt = { .kind = NPU_WAIT_RELEASE | NPU_WAIT_TIMER,
                                  .deadline_ps = 100000 };
    assert_int_equal(hart_wait(&f->c, 3, &rt), 0);
    assert_int_equal(chip_release_cores(&f->c, CTRL), NPU_OK);
    assert_int_equal(chip_hart_time(&f->c, CTRL), CMD_PS);
    assert_false(f->c.released); /* takes effect when time advances */
    assert_int_equal(wait_timer(&f->c, CTRL, 60000), 0);

    assert_int_equal(chip_clock_advance(&f->c), NPU_OK);
    assert_true(f->c.released);
    assert_int_equal(f->nlog, 2);
    assert_wake(f, 0, 0, CMD_PS, NPU_WAIT_RELEASE);
    assert_wake(f, 1, 3, CMD_PS, NPU_WAIT_RELEASE);
    assert_state(&f->c, 2, CHIP_HART_WAITING);

    /* Later RELEASE waits hold at once. */
    assert_int_equal(wait_release(&f->c, 0), NPU_WAIT_RELEASE);
    assert_int_equal(f->c.harts[0].cause, NPU_WAIT_RELEASE);
    assert_int_equal(wait_timer(&f->c, 0, 70000), 0);
    assert_int_equal(wait_timer(&f->c, 3, 70000), 0);

    assert_int_equal(chip_clock_advance(&f->c), NPU_OK);
    assert_int_equal(f->nlog, 3);
    assert_wake(f, 2, 1, 10000, NPU_WAIT_RELEASE);
    assert_int_equal(wait_release(&f->c, 1), NPU_WAIT_RELEASE);
    assert_int_equal(wait_timer(&f->c, 1, 70000), 0);

    /* Core 2 was never woken; next are ctrl at 60000, then 0, 1, 3 at 70000. */
    assert_int_equal(chip_clock_advance(&f->c), NPU_OK);
    assert_int_equal(f->nlog, 4);
    assert_wake(f, 3, CTRL, 60000, NPU_WAIT_TIMER);
    assert_int_equal(wait_sem(&f->c, CTRL, 0, 1), 0);
    assert_int_equal(chip_clock_advance(&f->c), NPU_OK);
    assert_int_equal(f->nlog, 7);
    assert_wake(f, 4, 0, 70000, NPU_WAIT_TIMER);
    assert_wake(f, 5, 1, 70000, NPU_WAIT_TIMER);
    assert_wake(f, 6, 3, 70000, NPU_WAIT_TIMER);
    assert_state(&f->c, 2, CHIP_HART_WAITING);
}

static void test_only_ctrl_may_release(void **state)
{
    struct fixture *f = *state;
    for (uint32_t h = 0; h < NCORES; h++) {
        assert_int_equal(chip_release_cores(&f->c, h), NPU_ERR_STATE);
        assert_int_equal(chip_hart_time(&f->c, h), 0);
    }
    assert_true(evq_is_empty(&f->c.queue));
    assert_int_equal(wait_release(&f->c, 0), 0);
    assert_int_equal(chip_release_cores(&f->c, CTRL), NPU_OK);
    exit_all_but(&f->c, 0, 0);
    assert_int_equal(chip_clock_advance(&f->c), NPU_OK);
    assert_wake(f, 0, 0, CMD_PS, NPU_WAIT_RELEASE);
}

/* ---- argument errors */

static void test_invalid_waits(void **state)
{
    struct fixture *f = *state;
    const struct chip_wait bad[] = {
        { .kind = 0 },
        { .kind = 8 },
        { .kind = NPU_WAIT_TIMER | 8, .deadline_ps = 100 },
        { .kind = NPU_WAIT_SEM, .sem = CHIP_SEMS_PER_CORE, .value = 1 },
        { .kind = NPU_WAIT_SEM | NPU_WAIT_TIMER, .sem = 1000, .deadline_ps = 100 },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(hart_wait(&f->c, 1, &bad[i]), NPU_ERR_INVAL);
        assert_state(&f->c, 1, CHIP_HART_RUNNING);
    }
    assert_int_equal(f->c.nrunning, NHARTS);
    assert_true(evq_is_empty(&f->c.queue));
    /* The semaphore index only matters for SEM waits; 31 is the last valid one. */
    const struct chip_wait t = { .kind = NPU_WAIT_TIMER, .deadline_ps = 100, .sem = 1000 };
    assert_int_equal(hart_wait(&f->c, 1, &t), 0);
    assert_int_equal(wait_sem(&f->c, 2, CHIP_SEMS_PER_CORE - 1, 1), 0);
}

static void test_sem_post_bad_target(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(chip_sem_post(&f->c, 0, NHARTS, 0, NPU_SEM_OP_INC, 1), NPU_ERR_RANGE);
    assert_int_equal(chip_sem_post(&f->c, 0, 1000, 0, NPU_SEM_OP_INC, 1), NPU_ERR_RANGE);
    assert_int_equal(chip_sem_post(&f->c, 0, 1, CHIP_SEMS_PER_CORE, NPU_SEM_OP_INC, 1),
                     NPU_ERR_RANGE);
    assert_int_equal(chip_sem_post(&f->c, 0, 1, 0, 0, 1), NPU_ERR_RANGE);
    assert_int_equal(chip_sem_post(&f->c, 0, 1, 0, 3, 1), NPU_ERR_RANGE);
    assert_int_equal(chip_sem_post(&f->c, CTRL, NHARTS, 0, NPU_SEM_OP_SET, 1), NPU_ERR_RANGE);
    assert_true(evq_is_empty(&f->c.queue));
    assert_int_equal(chip_hart_time(&f->c, 0), 0);
    assert_int_equal(chip_hart_time(&f->c, CTRL), 0);
    /* The control core (hart N) is a valid target. */
    assert_int_equal(chip_sem_post(&f->c, 0, CTRL, CHIP_SEMS_PER_CORE - 1, NPU_SEM_OP_SET, 1),
                     NPU_OK);
}

/* ---- deadlock, describe, exit */

static void describe_is(const struct chip_clock *c, uint32_t hart, const char *want)
{
    char buf[256];
    chip_hart_describe(c, hart, buf, sizeof(buf));
    assert_string_equal(buf, want);
}

static void test_deadlock_report(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(chip_sem_post(&f->c, 1, 0, 3, NPU_SEM_OP_INC, 1), NPU_OK); /* 12000 */
    assert_int_equal(wait_sem(&f->c, 1, 0, 1), 0);
    assert_int_equal(wait_sem(&f->c, 0, 3, 2), 0);
    chip_hart_exit(&f->c, 2, 7);
    chip_hart_exit(&f->c, CTRL, -3);
    describe_is(&f->c, 3, "running (not waiting) at local time 0 ps");
    assert_int_equal(wait_timer(&f->c, 3, 5000), 0);
    describe_is(&f->c, 3, "waiting since 0 ps for timer at 5000 ps");
    assert_int_equal(chip_clock_advance(&f->c), NPU_OK);
    assert_wake(f, 0, 3, 5000, NPU_WAIT_TIMER);
    assert_int_equal(wait_sem(&f->c, 3, 31, 4), 0);

    assert_int_equal(chip_clock_advance(&f->c), NPU_ERR_DEADLOCK);
    assert_int_equal(f->nlog, 1);
    assert_int_equal(f->c.time_ps, 12000); /* the last applied event */
    assert_true(chip_clock_is_quiescent(&f->c));
    assert_false(all_finished(&f->c));
    describe_is(&f->c, 0, "waiting since 0 ps for semaphore 3 >= 2 (now 1)");
    describe_is(&f->c, 1, "waiting since 8000 ps for semaphore 0 >= 1 (now 0)");
    describe_is(&f->c, 2, "finished with status 7");
    describe_is(&f->c, 3, "waiting since 5000 ps for semaphore 31 >= 4 (now 0)");
    describe_is(&f->c, CTRL, "finished with status -3");
    /* Still deadlocked when asked again. */
    assert_int_equal(chip_clock_advance(&f->c), NPU_ERR_DEADLOCK);
    assert_int_equal(f->c.time_ps, 12000);
}

static void test_deadlock_with_empty_queue(void **state)
{
    struct fixture *f = *state;
    for (uint32_t h = 0; h < CTRL; h++)
        assert_int_equal(wait_release(&f->c, h), 0);
    /* The control core releases; it may not wait to be released itself. */
    assert_int_equal(wait_release(&f->c, CTRL), NPU_ERR_INVAL);
    const struct chip_wait never = { .kind = NPU_WAIT_SEM, .sem = 0, .value = 1 };
    assert_int_equal(hart_wait(&f->c, CTRL, &never), 0);
    assert_true(chip_clock_is_quiescent(&f->c));
    assert_int_equal(chip_clock_advance(&f->c), NPU_ERR_DEADLOCK);
    assert_int_equal(f->c.time_ps, 0);
    assert_int_equal(f->nlog, 0);
    describe_is(&f->c, 0, "waiting since 0 ps for release by the control core");
}

static void test_describe_combined_wait_and_truncation(void **state)
{
    struct fixture *f = *state;
    const struct chip_wait w = { .kind = NPU_WAIT_TIMER | NPU_WAIT_SEM | NPU_WAIT_RELEASE,
                                 .deadline_ps = 9000, .sem = 4, .value = 2 };
    assert_int_equal(hart_wait(&f->c, 2, &w), 0);
    describe_is(&f->c, 2, "waiting since 0 ps for timer at 9000 ps or semaphore 4 >= 2 "
                          "(now 0) or release by the control core");
    char small[12];
    memset(small, 'x', sizeof(small));
    chip_hart_describe(&f->c, 2, small, 10);
    assert_string_equal(small, "waiting s");
    assert_int_equal(small[10], 'x');
    assert_int_equal(small[11], 'x');
}

/* ---- a condition is judged at the hart's own time: a SET landing before it counts */

static void test_set_before_own_time_blocks_immediate_wait(void **state)
{
    struct fixture *f = *state;
    f->c.harts[0].sems[0] = 1;
    /* Hart 1 sets hart 0's semaphore 0 to 0: lands at 8000 + 1 hop = 12000. */
    assert_int_equal(chip_sem_post(&f->c, 1, 0, 0, NPU_SEM_OP_SET, 0), NPU_OK);
    chip_hart_charge(&f->c, 0, 10); /* hart 0 is at 20000, ahead of chip time 0 */
    /* sems[0] is 1 as of chip time, but not at 20000: the hart must wait. */
    assert_int_equal(wait_sem(&f->c, 0, 0, 1), 0);
    for (uint32_t h = 1; h < NHARTS; h++)
        chip_hart_exit(&f->c, h, 0);
    assert_int_equal(chip_clock_advance(&f->c), NPU_ERR_DEADLOCK);
    assert_int_equal(f->nlog, 0);
    assert_int_equal(f->c.harts[0].sems[0], 0);
    assert_int_equal(f->c.time_ps, 20000);
}

static void test_set_before_own_time_cancels_wake(void **state)
{
    struct fixture *f = *state;
    chip_hart_charge(&f->c, 0, 10);                       /* hart 0 at 20000 */
    assert_int_equal(wait_sem(&f->c, 0, 0, 1), 0);
    /* INC lands at 12000 (satisfied, but hart 0 is at 20000), SET 0 lands at 16000. */
    assert_int_equal(chip_sem_post(&f->c, 1, 0, 0, NPU_SEM_OP_INC, 1), NPU_OK);
    chip_hart_charge(&f->c, 2, 2);
    assert_int_equal(chip_sem_post(&f->c, 2, 0, 0, NPU_SEM_OP_SET, 0), NPU_OK);
    for (uint32_t h = 1; h < NHARTS; h++)
        chip_hart_exit(&f->c, h, 0);
    assert_int_equal(chip_clock_advance(&f->c), NPU_ERR_DEADLOCK);
    assert_int_equal(f->nlog, 0); /* judged at 20000: the semaphore is 0 again */
    assert_int_equal(f->c.harts[0].state, CHIP_HART_WAITING);
}

static void test_deadline_beyond_time_max(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(wait_timer(&f->c, 0, CHIP_TIME_MAX_PS + 1), NPU_ERR_RANGE);
    assert_int_equal(f->c.harts[0].state, CHIP_HART_RUNNING);
    assert_int_equal(wait_timer(&f->c, 0, CHIP_TIME_MAX_PS), 0);
}

static void test_release_from_waiting_ctrl_refused(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(wait_timer(&f->c, CTRL, 1000), 0);
    assert_int_equal(chip_release_cores(&f->c, CTRL), NPU_ERR_STATE);
    chip_hart_exit(&f->c, 0, 0);
    assert_int_equal(chip_release_cores(&f->c, 0), NPU_ERR_STATE);
}

/* The chip stops on the lowest NPU core that exited non-zero; the control core's status is
 * its own business (it ends the run anyway). */
static void test_first_failed_core(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(chip_clock_first_failed(&f->c), UINT32_MAX);
    chip_hart_exit(&f->c, 2, 0);
    assert_int_equal(chip_clock_first_failed(&f->c), UINT32_MAX);
    chip_hart_exit(&f->c, 3, 5);
    assert_int_equal(chip_clock_first_failed(&f->c), 3);
    chip_hart_exit(&f->c, 1, 2);
    assert_int_equal(chip_clock_first_failed(&f->c), 1);
    chip_hart_exit(&f->c, CTRL, 9);
    assert_int_equal(chip_clock_first_failed(&f->c), 1);
}

static void test_exit_and_all_finished(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(wait_timer(&f->c, 1, 5000), 0);
    for (uint32_t h = 0; h < NHARTS; h++) {
        assert_false(all_finished(&f->c));
        chip_hart_exit(&f->c, h, (int)h + 10);
        assert_state(&f->c, h, CHIP_HART_FINISHED);
    }
    assert_true(all_finished(&f->c));
    assert_false(chip_clock_is_quiescent(&f->c));
    assert_int_equal(f->c.nrunning, 0);
    chip_hart_exit(&f->c, 3, 99); /* a second exit changes nothing */
    assert_int_equal(f->c.harts[3].exit_status, 13);
    assert_int_equal(f->c.nrunning, 0);
    describe_is(&f->c, 3, "finished with status 13");
    /* The finished hart's timer is stale: nobody wakes, no time passes. */
    assert_int_equal(chip_clock_advance(&f->c), NPU_ERR_DEADLOCK);
    assert_int_equal(f->c.time_ps, 0);
    assert_int_equal(f->nlog, 0);
}

static void test_quiescent(void **state)
{
    struct fixture *f = *state;
    assert_false(chip_clock_is_quiescent(&f->c));
    for (uint32_t h = 0; h < NCORES; h++)
        assert_int_equal(wait_timer(&f->c, h, 1000), 0);
    assert_false(chip_clock_is_quiescent(&f->c)); /* the control core still runs */
    chip_hart_exit(&f->c, CTRL, 0);
    assert_true(chip_clock_is_quiescent(&f->c));
    assert_int_equal(chip_clock_advance(&f->c), NPU_OK);
    assert_int_equal(f->nlog, 4);
    assert_false(chip_clock_is_quiescent(&f->c));
    for (uint32_t h = 0; h < 3; h++)
        chip_hart_exit(&f->c, h, 0);
    assert_false(chip_clock_is_quiescent(&f->c));
    assert_int_equal(wait_sem(&f->c, 3, 0, 1), 0);
    assert_true(chip_clock_is_quiescent(&f->c));
    chip_hart_exit(&f->c, 3, 0);
    assert_false(chip_clock_is_quiescent(&f->c));
    assert_true(all_finished(&f->c));
}

/* ---- determinism: scripted scenarios under different host orders */

enum op_kind { OP_END, OP_CHARGE, OP_POST, OP_WAIT, OP_RELEASE, OP_EXIT }; /* 0: no more */

struct op {
    enum op_kind kind;
    uint32_t a, b, c, d; /* CHARGE cycles; POST target sem op value; WAIT kind sem value abs */
    uint64_t t_ps;       /* WAIT: timer deadline, relative to the hart's local time unless abs */
};

#define MAX_OPS 9u
#define CHARGE(n) { OP_CHARGE, n, 0, 0, 0, 0 }
#define POST(t, s, o, v) { OP_POST, t, s, o, v, 0 }
#define WAIT(k, s, v, rel) { OP_WAIT, k, s, v, 0, rel }
#define WAIT_AT(k, s, v, at) { OP_WAIT, k, s, v, 1, at }
#define EXIT(st) { OP_EXIT, st, 0, 0, 0, 0 }

typedef struct op script_t[NHARTS][MAX_OPS];

/* Ring: after the release each core signals the next, then the control core. */
#define RING_CORE(h, next, prev)                                                             \
    { WAIT(NPU_WAIT_RELEASE, 0, 0, 0), CHARGE(3 * ((h) + 1)),                               \
      POST(next, 1, NPU_SEM_OP_INC, 1), WAIT(NPU_WAIT_SEM | NPU_WAIT_TIMER, 1, 1, 100000),   \
      POST(CTRL, 0, NPU_SEM_OP_INC, 1), POST(prev, 2, NPU_SEM_OP_SET, (h) + 10),            \
      WAIT(NPU_WAIT_TIMER, 0, 0, 2000 * (4 - (h))), EXIT(h) }

static const script_t ring_script = {
    RING_CORE(0, 1, 3), RING_CORE(1, 2, 0), RING_CORE(2, 3, 1), RING_CORE(3, 0, 2),
    { { OP_RELEASE, 0, 0, 0, 0, 0 }, WAIT(NPU_WAIT_SEM, 0, 4, 0), EXIT(0) },
};

/*
 * Ties: every core SETs control semaphore 0 to h+1, charged so that all four land at 20000
 * (1, 2, 2, 3 hops), and waits for a timer at 20000; the control core waits for that
 * semaphore or a timer at 20000. Only the key order decides the cause and the final value.
 */
#define TIE_CORE(h, cycles)                                                                  \
    { CHARGE(cycles), POST(CTRL, 0, NPU_SEM_OP_SET, (h) + 1),                               \
      WAIT_AT(NPU_WAIT_TIMER, 0, 0, 20000), EXIT(h) }

static const script_t tie_script = {
    TIE_CORE(0, 4), TIE_CORE(1, 2), TIE_CORE(2, 2), TIE_CORE(3, 0),
    { WAIT_AT(NPU_WAIT_SEM | NPU_WAIT_TIMER, 0, 1, 20000), EXIT(0) },
};

enum host_order { ORDER_LOW_FIRST, ORDER_HIGH_FIRST, ORDER_RANDOM };

static void run_op(struct chip_clock *c, uint32_t h, const struct op *o)
{
    switch (o->kind) {
    case OP_CHARGE:
        chip_hart_charge(c, h, o->a);
        break;
    case OP_POST:
        assert_int_equal(chip_sem_post(c, h, o->a, o->b, o->c, o->d), NPU_OK);
        break;
    case OP_WAIT: {
        const struct chip_wait w = { .kind = o->a, .sem = o->b, .value = o->c,
                                     .deadline_ps = (o->d ? 0 : chip_hart_time(c, h)) + o->t_ps };
        assert_true(hart_wait(c, h, &w) >= 0);
        break;
    }
    case OP_RELEASE:
        assert_int_equal(chip_release_cores(c, h), NPU_OK);
        break;
    case OP_EXIT:
        chip_hart_exit(c, h, (int)o->a);
        break;
    case OP_END:
        fail();
    }
}

static uint32_t lcg_state;

static uint32_t lcg_next(void)
{
    lcg_state = lcg_state * 1664525u + 1013904223u;
    return lcg_state >> 8;
}

/* The hart that issues the next operation, or NHARTS if none can. */
static uint32_t pick_hart(const struct chip_clock *c, const script_t *script, const size_t *pc,
                          enum host_order order)
{
    uint32_t ready[NHARTS], n = 0;
    for (uint32_t h = 0; h < NHARTS; h++)
        if (c->harts[h].state == CHIP_HART_RUNNING && (*script)[h][pc[h]].kind != OP_END)
            ready[n++] = h;
    if (n == 0)
        return NHARTS;
    if (order == ORDER_LOW_FIRST)
        return ready[0];
    if (order == ORDER_HIGH_FIRST)
        return ready[n - 1];
    return ready[lcg_next() % n];
}

/* Runs the script to the end, one operation at a time, the hart chosen by `order`. */
static void run_scenario(struct fixture *f, const script_t *script, enum host_order order,
                         uint32_t seed)
{
    size_t pc[NHARTS] = { 0 };
    fixture_init(f);
    lcg_state = seed;
    for (int steps = 0; steps < 1000; steps++) {
        uint32_t h = pick_hart(&f->c, script, pc, order);
        if (h < NHARTS) {
            run_op(&f->c, h, &(*script)[h][pc[h]++]);
            continue;
        }
        if (all_finished(&f->c))
            return;
        assert_true(chip_clock_is_quiescent(&f->c));
        assert_int_equal(chip_clock_advance(&f->c), NPU_OK);
    }
    fail_msg("scenario did not finish");
}

static const struct wake_rec expected_ring[] = {
    { 0, 8000, 8000, NPU_WAIT_RELEASE },  { 1, 8000, 8000, NPU_WAIT_RELEASE },
    { 2, 8000, 8000, NPU_WAIT_RELEASE },  { 3, 8000, 8000, NPU_WAIT_RELEASE },
    { 1, 28000, 28000, NPU_WAIT_SEM },    /* sem at 26000, resumes at its local 28000 */
    { 2, 36000, 36000, NPU_WAIT_SEM },    { 3, 40000, 40000, NPU_WAIT_SEM },
    { 0, 48000, 48000, NPU_WAIT_SEM },    { 1, 50000, 50000, NPU_WAIT_TIMER },
    { 2, 56000, 56000, NPU_WAIT_TIMER },  { 3, 58000, 58000, NPU_WAIT_TIMER },
    { CTRL, 60000, 60000, NPU_WAIT_SEM }, { 0, 72000, 72000, NPU_WAIT_TIMER },
};

static void assert_log(const struct fixture *f, const struct wake_rec *want, size_t n)
{
    assert_int_equal(f->nlog, n);
    for (size_t i = 0; i < n; i++)
        assert_wake(f, i, want[i].hart, want[i].chip_ps, want[i].cause);
}

static void assert_ring_result(const struct fixture *f)
{
    assert_log(f, expected_ring, sizeof(expected_ring) / sizeof(expected_ring[0]));
    assert_int_equal(f->c.time_ps, 72000);
    for (uint32_t h = 0; h < NCORES; h++)
        assert_int_equal(f->c.harts[h].exit_status, (int)h);
    /* Last SETs: core h sets sem 2 of core h-1 to h+10. */
    const uint32_t sem2[NCORES] = { 11, 12, 13, 10 };
    for (uint32_t h = 0; h < NCORES; h++)
        assert_int_equal(f->c.harts[h].sems[2], sem2[h]);
    assert_int_equal(f->c.harts[CTRL].sems[0], 4);
}

/* At 20000, in key order: core 0's SET wakes ctrl, core 0's timer, core 1's SET, ... */
static const struct wake_rec expected_tie[] = {
    { CTRL, 20000, 20000, NPU_WAIT_SEM }, { 0, 20000, 20000, NPU_WAIT_TIMER },
    { 1, 20000, 20000, NPU_WAIT_TIMER },  { 2, 20000, 20000, NPU_WAIT_TIMER },
    { 3, 20000, 20000, NPU_WAIT_TIMER },
};

static void assert_tie_result(const struct fixture *f)
{
    assert_log(f, expected_tie, sizeof(expected_tie) / sizeof(expected_tie[0]));
    assert_int_equal(f->c.time_ps, 20000);
    assert_int_equal(f->c.harts[CTRL].sems[0], 4); /* core 3's SET is the last by key */
}

static void check_determinism(const script_t *script, void (*check)(const struct fixture *))
{
    struct fixture *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
    assert_non_null(a);
    assert_non_null(b);
    run_scenario(a, script, ORDER_LOW_FIRST, 0);
    check(a);
    const struct { enum host_order order; uint32_t seed; } runs[] = {
        { ORDER_HIGH_FIRST, 0 }, { ORDER_RANDOM, 1 }, { ORDER_RANDOM, 2 }, { ORDER_RANDOM, 3 },
    };
    for (size_t r = 0; r < sizeof(runs) / sizeof(runs[0]); r++) {
        run_scenario(b, script, runs[r].order, runs[r].seed);
        assert_log(b, a->log, a->nlog);
        assert_int_equal(b->c.time_ps, a->c.time_ps);
        assert_int_equal(b->c.events_applied, a->c.events_applied);
        for (uint32_t h = 0; h < NHARTS; h++) {
            assert_int_equal(chip_hart_time(&b->c, h), chip_hart_time(&a->c, h));
            assert_memory_equal(b->c.harts[h].sems, a->c.harts[h].sems,
                                sizeof(a->c.harts[h].sems));
        }
        chip_clock_destroy(&b->c);
    }
    chip_clock_destroy(&a->c);
    free(a);
    free(b);
}

static void test_determinism_ring(void **state)
{
    (void)state;
    check_determinism(&ring_script, assert_ring_result);
}

static void test_determinism_ties(void **state)
{
    (void)state;
    check_determinism(&tie_script, assert_tie_result);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_all_harts_start_running),
        T(test_charge_advances_local_time_only),
        T(test_timer_already_passed_does_not_wait),
        T(test_timers_wake_at_deadline_in_order),
        T(test_ties_wake_in_one_advance),
        T(test_hops),
        cmocka_unit_test(test_sem_post_latency_all_pairs),
        T(test_sem_inc_and_set),
        T(test_sem_other_semaphore_does_not_wake),
        T(test_sem_wait_already_satisfied),
        T(test_resume_at_own_local_time),
        T(test_resume_before_later_events),
        T(test_timer_or_sem_sem_first),
        T(test_timer_or_sem_timer_first),
        T(test_stale_timer_at_wake_time_ends_advance),
        T(test_stale_timers_dropped),
        T(test_release_wakes_waiting_cores),
        T(test_only_ctrl_may_release),
        T(test_invalid_waits),
        T(test_sem_post_bad_target),
        T(test_deadlock_report),
        T(test_deadlock_with_empty_queue),
        T(test_describe_combined_wait_and_truncation),
        T(test_exit_and_all_finished),
        T(test_first_failed_core),
        T(test_set_before_own_time_blocks_immediate_wait),
        T(test_set_before_own_time_cancels_wake),
        T(test_deadline_beyond_time_max),
        T(test_release_from_waiting_ctrl_refused),
        T(test_quiescent),
        cmocka_unit_test(test_determinism_ring),
        cmocka_unit_test(test_determinism_ties),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
