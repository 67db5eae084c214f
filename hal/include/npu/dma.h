/* SPDX-License-Identifier: MIT */
/* DMA engine: copies between this core's SRAM and HBM, contiguous or 2-D strided, and
   gathers of rows by an index list, on one of its two queues. */
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

/* rows rows of row_bytes bytes into dst (dst_stride apart), row r from table +
   index[r] x table_stride: an embedding lookup in one descriptor. Every row lies in the
   memory of the table's first row (this core's SRAM or HBM). The engine reads the index
   list when the gather is submitted and again when it completes: it must not change until
   then (docs/engines.md, "DMA"). */
struct dma_gather_args {
    uint64_t table, dst;       /* this core's SRAM or HBM, either way */
    uint64_t index;            /* uint32_t[rows]: this core's SRAM or the control DRAM */
    uint32_t rows;
    uint32_t row_bytes;
    uint32_t table_stride;     /* bytes between the table's rows */
    uint32_t dst_stride;       /* >= row_bytes when rows > 1 */
    bool second_queue;         /* as dma_copy_args' */
    struct engine_sync sync;
};

/* Fills d with a DMA gather. */
void dma_gather_desc(struct npu_desc *d, const struct dma_gather_args *args);

#endif
