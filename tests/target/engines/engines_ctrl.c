/* SPDX-License-Identifier: MIT */
/* Engines image, control core: releases the cores and prints the TAP of their engine checks. */
#include <stdio.h>

#include "engine_checks.h"
#include "npu/hal.h"
#include "npu/wait.h"
#include "tap.h"

int main(void)
{
    tap_plan(1 + ECHECK__COUNT);
    tap_diag("chip '%s', %u x %u mesh, %s mode, systolic %ux%u, HBM %u GB/s per core", 
             hal_chip()->config_name, hal_chip()->rows, hal_chip()->cols,
             hal_chip()->performance ? "performance" : "functional", hal_chip()->sa_rows,
             hal_chip()->sa_cols, hal_chip()->hbm_gbps);
    checks_collect(ECHECK__COUNT, echeck_names, 10 * HAL_PS_PER_S);
    return tap_done();
}
