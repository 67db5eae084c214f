/* SPDX-License-Identifier: MIT */
/*
 * Model image, control core (docs/images.md, "Flashing"): checks the image at the base of
 * HBM before any core reads it: format version, size (bootarg image_bytes, which npuctl
 * flash passes: the file's real size), checksum, every table entry in bounds, and that it
 * was built for this chip and mode. A bad image is refused with one line naming what is
 * wrong and the run fails without releasing the cores, so nothing is half-loaded. A good
 * one: the cores are released, each loads its own shares (model_core.c), and the control
 * core waits until each has reported.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "npu/hal.h"
#include "npu/wait.h"
#include "model_setup.h"
#include "npu_image.h"

#define DONE_SEM 0u

int main(void)
{
    if (model_image_check() != NPU_OK)
        return NPU_EXIT_FAIL; /* the cores are never released */
    const struct npu_image_header *h = (const void *)(uintptr_t)hal_chip()->hbm_base;
    if (h->plan.instances != 1 && !h->plan.disagg) { /* disaggregated: replicas + experts */
        printf("MODEL image refused: %u instances: the model image runs one, or a "
               "disaggregated plan's replicas and expert instance (serve several with npuctl "
               "serve --sched pd-disagg)\n", h->plan.instances);
        return NPU_EXIT_FAIL;
    }
    hal_release_cores();
    int rc = hal_sem_wait(DONE_SEM, hal_chip()->ncores);
    return rc == NPU_OK ? NPU_EXIT_OK : NPU_EXIT_FAIL;
}
