/* SPDX-License-Identifier: MIT */
/* DMA engine: copies between this core's SRAM and HBM, contiguous or 2-D strided. */
#ifndef NPU_DMA_H
#define NPU_DMA_H

#include "npu/engine.h"

struct dma_copy_args {
    uint64_t src, dst;         /* this core's SRAM or HBM, either way */
    uint32_t rows;             /* 1 for a contiguous copy */
    uint32_t row_bytes;
    uint32_t src_stride;       /* bytes between rows (>= row_bytes when rows > 1) */
    uint32_t dst_stride;
    struct engine_sync sync;
};

/* Fills d with a DMA copy; a contiguous copy has rows 1 and strides equal to row_bytes. */
void dma_copy_desc(struct npu_desc *d, const struct dma_copy_args *args);

#endif
