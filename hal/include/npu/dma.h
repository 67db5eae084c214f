/* SPDX-License-Identifier: MIT */
/* DMA engine: copies between this core's SRAM and HBM, contiguous or 2-D strided, on one of
   its two queues. */
#ifndef NPU_DMA_H
#define NPU_DMA_H

#include "npu/engine.h"

struct dma_copy_args {
    uint64_t src, dst;         /* this core's SRAM or HBM, either way */
    uint32_t rows;             /* 1 for a contiguous copy */
    uint32_t row_bytes;
    uint32_t src_stride;       /* bytes between rows (>= row_bytes when rows > 1) */
    uint32_t dst_stride;
    /* true: on the second DMA queue (NPU_ENGINE_DMA2), which runs in its own order beside
       the first, sharing the core's HBM channel: a long load there does not hold up the
       copies queued on the first */
    bool second_queue;
    struct engine_sync sync;
};

/* Fills d with a DMA copy; a contiguous copy has rows 1 and strides equal to row_bytes. */
void dma_copy_desc(struct npu_desc *d, const struct dma_copy_args *args);

#endif
