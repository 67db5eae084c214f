/* SPDX-License-Identifier: MIT */
/*
 * Checks that every NPU core runs on itself, reported to the control core's TAP stream.
 * A core reports each failure with a "# core N: ..." line and by incrementing the control
 * core's semaphore CHECKS_FAIL_SEM(check); it ends with CHECKS_DONE_SEM. The control core
 * releases the cores, waits for all of them (with a chip-time limit, so a core that never
 * reports is a failed test, not a hang) and prints one TAP point per check.
 */
#ifndef CORE_CHECKS_H
#define CORE_CHECKS_H

#include <stdbool.h>
#include <stdint.h>

#define CHECKS_DONE_SEM 0u
#define CHECKS_FAIL_SEM(check) (1u + (check))
#define CHECKS_MAX 16u

/* Core side: records a failure of `check` unless ok; returns ok. */
bool checks_expect(bool ok, uint32_t check, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Core side: tells the control core this core is done; returns the core's exit status. */
int checks_done(void);

/* Control side: releases the cores, collects, prints 1 + ncheck TAP points; true if all ok. */
bool checks_collect(uint32_t ncheck, const char *const *names, uint64_t limit_ps);

#endif
