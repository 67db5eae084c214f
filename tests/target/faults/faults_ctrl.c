/* SPDX-License-Identifier: MIT */
/*
 * Faults image, control core: deliberately broken runs, chosen with QEMU's -append (the
 * devicetree's /chosen/bootargs), that the chip must end with a report and a non-zero status:
 *   illegal     core 1 executes an illegal instruction            -> NPU_EXIT_TRAP
 *   load        core 1 loads from an unmapped address             -> NPU_EXIT_TRAP
 *   ctrl-store  the control core stores beyond the backed HBM     -> NPU_EXIT_TRAP
 *   deadlock    every hart waits for a semaphore nobody posts     -> NPU_EXIT_DEADLOCK
 *   spin        core 1 loops without ever waiting (watchdog)      -> NPU_EXIT_WATCHDOG
 *   poll        core 1 polls a semaphore register in a loop       -> NPU_EXIT_WATCHDOG
 *   core-exit   core 1 returns 7 from main                        -> 7
 *   assert      an assert() fails on core 1                       -> NPU_EXIT_ASSERT
 * Core 1 is core 0 on a one-core mesh. The other cores wait on a semaphore forever.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "npu/hal.h"
#include "npu/wait.h"

static const char *const scenarios[] = { "illegal", "load", "ctrl-store", "deadlock", "spin",
                                         "core-exit", "assert", "poll" };

int main(void)
{
    const char *arg = hal_bootargs();
    bool known = false;
    for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
        known |= strcmp(arg, scenarios[i]) == 0;
    if (!known) {
        printf("faults: unknown scenario '%s'; pass one of illegal, load, ctrl-store, "
               "deadlock, spin, poll, core-exit, assert with -append\n", arg);
        return NPU_EXIT_FAIL;
    }
    printf("faults: scenario '%s'\n", arg);
    hal_release_cores();
    if (strcmp(arg, "ctrl-store") == 0) {
        volatile uint32_t *beyond =
            (volatile uint32_t *)(uintptr_t)(hal_chip()->hbm_base + hal_chip()->hbm_size);
        *beyond = 1;
    }
    /* Never satisfied: the cores never post this many. */
    hal_sem_wait(0, hal_chip()->ncores + 1);
    printf("faults: the control core woke up, which no scenario allows\n");
    return NPU_EXIT_FAIL;
}
