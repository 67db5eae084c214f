/* SPDX-License-Identifier: MIT */
/*
 * Chip time, waiting and semaphores (docs/clock.md).
 *
 * A hart never spins. To wait it writes its WAIT registers and executes WFI; the chip clock
 * advances only when no hart runs and wakes exactly the harts whose condition holds. The
 * loop around WFI in hal_wait() only tolerates spurious wake-ups: every pass sleeps.
 */
#ifndef NPU_WAIT_H
#define NPU_WAIT_H

#include <stdint.h>

#include "npu_enums.h"

#define HAL_PS_PER_US 1000000ull
#define HAL_PS_PER_MS 1000000000ull
#define HAL_PS_PER_S 1000000000000ull

struct hal_wait_args {
    uint32_t kind;        /* npu_wait_kind bits: wake when any holds */
    uint64_t deadline_ps; /* NPU_WAIT_TIMER */
    uint32_t sem;         /* NPU_WAIT_SEM: local semaphore index ... */
    uint32_t value;       /* ... reaches at least this value */
};

struct hal_sem_post_args {
    uint32_t core;        /* target core id (hal_chip()->ncores: the control core) */
    uint32_t sem;         /* semaphore index on the target */
    uint32_t op;          /* npu_sem_op */
    uint32_t value;
};

/* This hart's chip time. */
uint64_t hal_time_ps(void);

/* Waits; *cause receives the npu_wait_kind bit that ended the wait. */
int hal_wait(const struct hal_wait_args *args, uint32_t *cause);

int hal_sleep_until_ps(uint64_t deadline_ps);
int hal_sleep_ps(uint64_t duration_ps);

/* Waits until local semaphore `sem` >= value. */
int hal_sem_wait(uint32_t sem, uint32_t value);
/* Same with a deadline: returns NPU_ERR_TIMEOUT if the deadline came first. */
int hal_sem_wait_until(uint32_t sem, uint32_t value, uint64_t deadline_ps);
uint32_t hal_sem_read(uint32_t sem);

/* Command: semaphore operation on any core; lands after the NoC latency. */
int hal_sem_post(const struct hal_sem_post_args *args);

/* Control core: release the NPU cores. NPU cores: wait for that release. */
int hal_release_cores(void);
int hal_wait_release(void);

#endif
