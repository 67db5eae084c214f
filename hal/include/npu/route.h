/* SPDX-License-Identifier: MIT */
/*
 * The ROUTE command (docs/engines.md, "Routing draws"): the emulator writes the routing
 * model's draws of a run of rows into this core's SRAM. A simulation service, not chip
 * hardware: performance mode's stand-in for the router's output data, taking no chip time
 * (the router's GEMM and top-k are submitted to the engines as usual). It gives exactly
 * what routing_draw() (models/routing) gives for each row, at native speed instead of in
 * emulated code.
 */
#ifndef NPU_ROUTE_H
#define NPU_ROUTE_H

#include "npu_structs.h"

/*
 * Draws the rows `a` (in this core's SRAM) describes into a->out. Returns 0, or the
 * chip's refusal: NPU_ERR_RANGE (a or its output outside this core's SRAM), NPU_ERR_INVAL
 * (experts not 1..256, k not 1..experts, reserved not 0, rows 0 or rows x k above
 * NPU_ROUTE_PAIRS_MAX), NPU_ERR_STATE (the control core); nothing is written then and the
 * emulator logs why.
 */
int route_draw_rows(const struct npu_route_args *a);

#endif
