/* SPDX-License-Identifier: MIT */
/*
 * Adversary image, control core (issue 26, docs/testing.md): releases the cores, each of
 * which submits random and adversarial descriptors and register writes (adv_core.c), and
 * waits until every core has posted that it is done. The run must end 0: the chip refuses
 * what is invalid with a guest error and a status, runs what is valid, and keeps going.
 * Optional bootarg: seed=N (default 1), trials=N per core (default 400).
 */
#include <stdio.h>

#include "adv.h"
#include "npu/hal.h"
#include "npu/wait.h"

int main(void)
{
    hal_release_cores();
    /* the cores never aim their random semaphore posts at the control core */
    hal_sem_wait(ADV_SEM_DONE, hal_chip()->ncores);
    printf("adversary: every core done\n");
    return NPU_EXIT_OK;
}
