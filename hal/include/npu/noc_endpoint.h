/* SPDX-License-Identifier: MIT */
/*
 * NoC endpoint: writes a region of this core's SRAM into any core's SRAM over the mesh (XY
 * routing); with sync.signal the destination core's semaphore is incremented when the data
 * has landed. The NoC driver (noc_driver/) builds transfers and collectives on top.
 */
#ifndef NPU_NOC_ENDPOINT_H
#define NPU_NOC_ENDPOINT_H

#include "npu/engine.h"

struct noc_write_args {
    uint64_t src;              /* this core's SRAM */
    uint64_t dst;              /* any core's SRAM (a global address names the core) */
    uint32_t rows, row_bytes, src_stride, dst_stride;
    struct engine_sync sync;
};

void noc_write_desc(struct npu_desc *d, const struct noc_write_args *args);

#endif
