/* SPDX-License-Identifier: MIT */
/* The ROUTE command (npu/route.h). */
#include "npu/route.h"

#include "npu/hal.h"
#include "npu/mmio.h"

int route_draw_rows(const struct npu_route_args *a)
{
    uintptr_t r = (uintptr_t)hal_self()->regs_base;
    mmio_write64(r + CORE_ROUTE_ADDR_OFFSET, (uint64_t)(uintptr_t)a);
    mmio_write32(r + CORE_ROUTE_OFFSET, CORE_ROUTE_GO_MASK);
    const int rc = (int32_t)mmio_read32(r + CORE_CMD_STATUS_OFFSET);
    __asm__ volatile("" ::: "memory"); /* the chip wrote a->out behind the compiler's back */
    return rc;
}
