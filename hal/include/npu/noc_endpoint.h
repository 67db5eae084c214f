/* SPDX-License-Identifier: MIT */
/*
 * NoC endpoint: writes a region of this core's SRAM into any core's SRAM over the mesh (XY
 * routing), reads another core's SRAM, or multicasts to a rectangle of cores; with
 * sync.signal the destination's semaphore is incremented when the data has landed. The NoC
 * driver (noc_driver/) builds transfers and collectives on top.
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

/* Reads a region of any core's SRAM into this core's SRAM; sync.signal fires here. */
struct noc_read_args {
    uint64_t src;              /* any core's SRAM */
    uint64_t dst;              /* this core's SRAM */
    uint32_t rows, row_bytes, src_stride, dst_stride;
    struct engine_sync sync;
};

void noc_read_desc(struct npu_desc *d, const struct noc_read_args *args);

/*
 * Writes a region of this core's SRAM to the same offset of the SRAM of every core in the
 * rectangle [row0, row1] x [col0, col1] (the routers replicate the data along the XY tree).
 * With sync.signal, semaphore signal_sem of every destination core is incremented when its
 * copy has landed (signal_core is ignored).
 */
struct noc_multicast_args {
    uint64_t src;              /* this core's SRAM */
    uint64_t dst_offset;       /* offset in each destination core's SRAM */
    uint32_t rows, row_bytes, src_stride, dst_stride;
    uint16_t row0, col0, row1, col1;
    struct engine_sync sync;
};

void noc_multicast_desc(struct npu_desc *d, const struct noc_multicast_args *args);

#endif
