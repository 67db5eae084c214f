/* SPDX-License-Identifier: MIT */
/*
 * The ROUTE command (block `core`, struct npu_route_args of hal/regspec/npu_regs.toml): the
 * routing model's draws of a run of rows, written into the core's SRAM by the emulator.
 *
 * What it is: a simulation service, not chip hardware. In performance mode the router has no
 * real activations, so each row's experts come from the seeded routing model
 * (models/routing); the router's GEMM and top-k still run on the engines and take their
 * chip time. The draws themselves are only data, and the harts drew them in emulated code:
 * 35 % of every guest instruction of a serving run (measured: docs/results.md). Drawn here
 * they cost the host a native call and the chip nothing, exactly the same values (the same
 * routing_draw: integer draws over a table built with IEEE double arithmetic and no fused
 * multiply-adds, as on the cores).
 *
 * Every address and size comes from the guest and is checked: the arguments and the output
 * must lie in the issuing core's SRAM, the model's parameters within routing_model.h's
 * limits, the draws (rows x k) within NPU_ROUTE_PAIRS_MAX, which bounds the time one
 * command holds QEMU's lock.
 */
#ifndef CHIP_ROUTE_H
#define CHIP_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#include "chip_mem.h"
#include "routing_model.h"

/* One core's cached layer table: the routing model's, for the last layer drawn. */
struct chip_route {
    struct routing_model rm;
    uint32_t layer;
    uint32_t valid;
    uint64_t cum[ROUTING_EXPERTS_MAX];
};

/*
 * Draws what the npu_route_args at args_addr (in core's SRAM) asks into its `out`. Returns 0,
 * NPU_ERR_RANGE (an address outside the core's SRAM), NPU_ERR_INVAL (the model's
 * parameters, rows not 1 or more, rows x k above NPU_ROUTE_PAIRS_MAX) or NPU_ERR_STATE (no
 * SRAM contents to read), with the reason in err; nothing is written then.
 */
int chip_route_draw(struct chip_route *r, const struct chip_mem *mem, uint32_t core,
                    uint64_t args_addr, char *err, size_t errlen);

#endif
