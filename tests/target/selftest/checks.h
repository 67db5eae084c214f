/* SPDX-License-Identifier: MIT */
/* The checks every NPU core runs in the selftest image, and how they are reported. */
#ifndef SELFTEST_CHECKS_H
#define SELFTEST_CHECKS_H

#include "core_checks.h"

/* NPU-core semaphore used by the ring check. */
#define SEM_RING 4

enum core_check {
    CHECK_IDENTITY,  /* ID and COORD registers agree with the devicetree and the map */
    CHECK_SRAM,      /* the image runs from the core's own SRAM; its last 4 KiB work */
    CHECK_TIMER,     /* timers wake exactly at the deadline; chip time never goes back */
    CHECK_PAST,      /* a deadline already passed does not wait and costs nothing */
    CHECK_CMD_COST,  /* a command advances the hart's time by exactly cmd_cost cycles */
    CHECK_RING,      /* a semaphore posted by the previous core wakes this one */
    CHECK__COUNT
};

static const char *const check_names[CHECK__COUNT] = {
    [CHECK_IDENTITY] = "ID and COORD registers match the devicetree and the memory map",
    [CHECK_SRAM] = "the image runs from the core's own SRAM and its last 4 KiB read back",
    [CHECK_TIMER] = "timers wake exactly at their deadline (core 0: 10 s of chip time)",
    [CHECK_PAST] = "a timer already in the past returns at once and costs no time",
    [CHECK_CMD_COST] = "a command costs exactly cmd_cost_cycles of chip time",
    [CHECK_RING] = "a semaphore posted by the previous core in a ring wakes the next",
};

#endif
