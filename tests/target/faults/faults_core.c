/* SPDX-License-Identifier: MIT */
/* Faults image, NPU core: the victim core acts out the scenario; see faults_ctrl.c. */
#include <assert.h>
#include <string.h>

#include "npu/hal.h"
#include "npu/wait.h"

#define SEM_NEVER 3

/* Through a variable, so the compiler does not reject the constant as out of bounds. */
static volatile uintptr_t unmapped_address = 0x8;

int main(void)
{
    const char *arg = hal_bootargs();
    uint32_t victim = hal_chip()->ncores > 1 ? 1 : 0;

    hal_wait_release();
    if (hal_self()->core_id == victim) {
        if (strcmp(arg, "illegal") == 0)
            __asm__ volatile(".word 0"); /* all-zero: an illegal instruction */
        if (strcmp(arg, "load") == 0)
            (void)*(volatile uint32_t *)unmapped_address;
        if (strcmp(arg, "spin") == 0)
            for (;;)
                __asm__ volatile("nop"); /* deliberately never waits */
        if (strcmp(arg, "poll") == 0)
            while (hal_sem_read(SEM_NEVER) == 0)
                ; /* deliberately polls a register instead of waiting */
        if (strcmp(arg, "core-exit") == 0)
            return 7;
        assert(strcmp(arg, "assert") != 0);
    }
    hal_sem_wait(SEM_NEVER, 1);
    return NPU_EXIT_FAIL;
}
