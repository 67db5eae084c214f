/* SPDX-License-Identifier: MIT */
/* Collectives image, control core: releases the cores and prints the TAP of their checks. */
#include "coll_checks.h"
#include "npu/hal.h"
#include "npu/wait.h"
#include "tap.h"

int main(void)
{
    tap_plan(1 + CCHECK__COUNT);
    tap_diag("chip '%s', %u x %u mesh, %s mode", hal_chip()->config_name, hal_chip()->rows,
             hal_chip()->cols, hal_chip()->performance ? "performance" : "functional");
    checks_collect(CCHECK__COUNT, ccheck_names, 60 * HAL_PS_PER_S);
    return tap_done();
}
