/* SPDX-License-Identifier: MIT */
/* Model image, control core: releases the NPU cores and waits until each has reported. */
#include "npu/hal.h"
#include "npu/wait.h"

#define DONE_SEM 0u

int main(void)
{
    hal_release_cores();
    int rc = hal_sem_wait(DONE_SEM, hal_chip()->ncores);
    return rc == NPU_OK ? NPU_EXIT_OK : NPU_EXIT_FAIL;
}
