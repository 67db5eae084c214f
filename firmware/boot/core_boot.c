/* SPDX-License-Identifier: MIT */
/*
 * Boot image, NPU core: wait for the control core's release, report in with id and mesh
 * coordinates, increment the control core's BOOT_SEM, finish.
 */
#include <inttypes.h>
#include <stdio.h>

#include "npu/hal.h"
#include "npu/wait.h"

#define BOOT_SEM 0

int main(void)
{
    const struct hal_core_info *self = hal_self();

    hal_wait_release();
    printf("core %u at (%u,%u) up: SRAM 0x%" PRIx64 " (%" PRIu64 " KiB), registers 0x%" PRIx64
           "\n", self->core_id, self->row, self->col, self->sram_base, self->sram_size >> 10,
           self->regs_base);
    struct hal_sem_post_args up = {
        .core = hal_chip()->ncores, .sem = BOOT_SEM, .op = NPU_SEM_OP_INC, .value = 1,
    };
    return hal_sem_post(&up) == NPU_OK ? NPU_EXIT_OK : NPU_EXIT_FAIL;
}
