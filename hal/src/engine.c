/* SPDX-License-Identifier: MIT */
/* Engine command submission and the per-engine descriptor builders (npu/engine.h). */
#include <string.h>

#include "npu/dma.h"
#include "npu/hal.h"
#include "npu/matrix.h"
#include "npu/mmio.h"
#include "npu/noc_endpoint.h"
#include "npu/vector.h"

void engine_sync_apply(struct npu_desc *d, const struct engine_sync *sync)
{
    if (sync->wait) {
        d->flags |= NPU_DESC_WAIT;
        d->wait_sem = sync->wait_sem;
        d->wait_value = sync->wait_value;
    }
    if (sync->signal) {
        d->flags |= NPU_DESC_SIGNAL;
        d->signal_core = sync->signal_core;
        d->signal_sem = sync->signal_sem;
        d->signal_value = sync->signal_value;
    }
    if (sync->irq)
        d->flags |= NPU_DESC_IRQ;
    if (sync->keep_data)
        d->flags |= NPU_DESC_KEEP_DATA;
    if (sync->wait2) {
        d->flags |= NPU_DESC_WAIT2;
        d->wait2_sem = sync->wait2_sem;
        d->wait2_value = sync->wait2_value;
    }
    if (sync->signal2) {
        d->flags |= NPU_DESC_SIGNAL2;
        d->signal2_core = sync->signal2_core;
        d->signal2_sem = sync->signal2_sem;
        d->signal2_value = sync->signal2_value;
    }
}

int engine_submit(const struct npu_desc *descs, uint32_t count)
{
    uintptr_t r = (uintptr_t)hal_self()->regs_base;
    mmio_write64(r + CORE_SUBMIT_ADDR_OFFSET, (uint64_t)(uintptr_t)descs);
    mmio_write32(r + CORE_SUBMIT_COUNT_OFFSET, count);
    mmio_write32(r + CORE_SUBMIT_OFFSET, CORE_SUBMIT_GO_MASK);
    return (int32_t)mmio_read32(r + CORE_CMD_STATUS_OFFSET);
}

uint64_t engine_perf_read(enum npu_perf id)
{
    uintptr_t r = (uintptr_t)hal_self()->regs_base;
    mmio_write32(r + CORE_PERF_SEL_OFFSET, (uint32_t)id);
    return mmio_read64(r + CORE_PERF_VALUE_OFFSET);
}

int engine_replay(enum npu_replay_op op, uint32_t slot, uint32_t count)
{
    uintptr_t r = (uintptr_t)hal_self()->regs_base;
    mmio_write32(r + CORE_REPLAY_SLOT_OFFSET, slot);
    mmio_write32(r + CORE_REPLAY_COUNT_OFFSET, count);
    mmio_write32(r + CORE_REPLAY_OP_OFFSET, (uint32_t)op << CORE_REPLAY_OP_OP_LSB);
    return (int32_t)mmio_read32(r + CORE_CMD_STATUS_OFFSET);
}

uint32_t engine_pending(enum npu_engine engine)
{
    const uintptr_t r = (uintptr_t)hal_self()->regs_base;
    const uint32_t v = mmio_read32(r + (engine < 4 ? CORE_ENGINE_PENDING_OFFSET
                                                   : CORE_ENGINE_PENDING_HI_OFFSET));
    return (v >> (8 * (engine % 4))) & 0xff;
}

static void copy_desc(struct npu_desc *d, enum npu_engine engine, uint64_t src, uint64_t dst,
                      uint32_t rows, uint32_t row_bytes, uint32_t src_stride,
                      uint32_t dst_stride)
{
    engine_desc_clear(d);
    d->engine = engine;
    d->op = NPU_DMA_OP_COPY;
    d->a = src;
    d->c = dst;
    d->m = rows;
    d->n = row_bytes;
    d->lda = src_stride;
    d->ldc = dst_stride;
}

void dma_copy_desc(struct npu_desc *d, const struct dma_copy_args *a)
{
    copy_desc(d, a->second_queue ? NPU_ENGINE_DMA2 : NPU_ENGINE_DMA, a->src, a->dst, a->rows,
              a->row_bytes, a->src_stride, a->dst_stride);
    engine_sync_apply(d, &a->sync);
}

void dma_gather_desc(struct npu_desc *d, const struct dma_gather_args *a)
{
    copy_desc(d, a->second_queue ? NPU_ENGINE_DMA2 : NPU_ENGINE_DMA, a->table, a->dst, a->rows,
              a->row_bytes, a->table_stride, a->dst_stride);
    d->op = NPU_DMA_OP_GATHER;
    d->b = a->index;
    engine_sync_apply(d, &a->sync);
}

void noc_write_desc(struct npu_desc *d, const struct noc_write_args *a)
{
    copy_desc(d, NPU_ENGINE_NOC, a->src, a->dst, a->rows, a->row_bytes, a->src_stride,
              a->dst_stride);
    d->op = NPU_NOC_OP_WRITE;
    engine_sync_apply(d, &a->sync);
}

void noc_read_desc(struct npu_desc *d, const struct noc_read_args *a)
{
    copy_desc(d, NPU_ENGINE_NOC, a->src, a->dst, a->rows, a->row_bytes, a->src_stride,
              a->dst_stride);
    d->op = NPU_NOC_OP_READ;
    engine_sync_apply(d, &a->sync);
}

void noc_multicast_desc(struct npu_desc *d, const struct noc_multicast_args *a)
{
    copy_desc(d, NPU_ENGINE_NOC, a->src, a->dst_offset, a->rows, a->row_bytes, a->src_stride,
              a->dst_stride);
    d->op = NPU_NOC_OP_MULTICAST;
    d->b = (uint64_t)a->row0 | (uint64_t)a->col0 << 16 | (uint64_t)a->row1 << 32 |
           (uint64_t)a->col1 << 48;
    engine_sync_apply(d, &a->sync);
}

void matrix_gemm_desc(struct npu_desc *d, const struct matrix_gemm_desc_args *a)
{
    engine_desc_clear(d);
    d->engine = NPU_ENGINE_MATRIX;
    d->op = (uint8_t)a->op;
    d->a = a->a;
    d->b = a->b;
    d->c = a->c;
    d->m = a->m;
    d->n = a->n;
    d->k = a->k;
    d->lda = a->lda;
    d->ldb = a->ldb;
    d->ldc = a->ldc;
    d->flags = (a->trans_a ? NPU_DESC_TRANS_A : 0) | (a->trans_b ? NPU_DESC_TRANS_B : 0) |
               (a->accumulate ? NPU_DESC_ACCUMULATE : 0);
    if (a->batch > 1) {
        d->batch = a->batch;
        d->stride_a = a->stride_a;
        d->stride_b = a->stride_b;
        d->stride_c = a->stride_c;
    }
    engine_sync_apply(d, &a->sync);
}

static uint64_t type_bytes(enum npu_dtype t)
{
    return t == NPU_DTYPE_BF16 ? 2 : 4;
}

/* rows of row bytes, stride bytes apart: from the first byte to the last one's end */
static uint64_t extent(uint64_t rows, uint64_t row, uint64_t stride)
{
    return rows && row ? (rows - 1) * stride + row : 0;
}

void vector_op_extents(const struct vector_op_args *a, struct vector_op_extents *e)
{
    const uint64_t rows = a->rows, cols = a->cols, k = a->k ? a->k : 1;
    const uint64_t ldx = a->ldx ? a->ldx : cols, ldy = a->ldy ? a->ldy : cols;
    const uint64_t ldo = a->ldout ? a->ldout : cols, lda = a->ldaux ? a->ldaux : k;
    const uint64_t tx = type_bytes(a->x_type), ty = type_bytes(a->y_type);
    const uint64_t to = type_bytes(a->out_type);
    *e = (struct vector_op_extents){ .x = extent(rows, cols * tx, ldx * tx),
                                     .out = extent(rows, cols * to, ldo * to) };
    switch (a->op) {
    case NPU_VECTOR_OP_ADD: case NPU_VECTOR_OP_MUL: case NPU_VECTOR_OP_MAX:
    case NPU_VECTOR_OP_SWIGLU:
        e->y = extent(rows, cols * ty, ldy * ty);
        break;
    case NPU_VECTOR_OP_RMSNORM: /* w: one row */
        e->y = cols * ty;
        break;
    case NPU_VECTOR_OP_ROW_MAX: /* d[r] */
        e->out = 0, e->aux = rows * 4;
        break;
    case NPU_VECTOR_OP_EXP_SUM: /* b[r] in, d[r] out */
        e->y = rows * 4, e->aux = rows * 4;
        break;
    case NPU_VECTOR_OP_RESCALE: /* b[r] and d[r] in */
        e->y = rows * 4, e->aux = rows * 4, e->aux_read = true;
        break;
    case NPU_VECTOR_OP_ROW_DIV:
        e->y = rows * 4;
        break;
    case NPU_VECTOR_OP_ROPE: /* a position per k rows */
        e->y = (rows + k - 1) / k * 4;
        break;
    case NPU_VECTOR_OP_TOPK: /* rows x k values (optional) and indices */
        e->out = a->out ? extent(rows, k * to, ldo * to) : 0;
        e->aux = extent(rows, k * 4, lda * 4);
        break;
    case NPU_VECTOR_OP_ARGMAX:
        e->out = 0, e->aux = rows * 4;
        break;
    default: /* SCALE, EXP, SILU, CAST, SOFTMAX, MASK, FILL: x to out */
        break;
    }
    if (a->op == NPU_VECTOR_OP_FILL)
        e->x = 0; /* writes out only */
}

void vector_op_desc(struct npu_desc *d, const struct vector_op_args *a)
{
    engine_desc_clear(d);
    d->engine = NPU_ENGINE_VECTOR;
    d->op = (uint8_t)a->op;
    d->a = a->x;
    d->b = a->y;
    d->c = a->out;
    d->d = a->aux;
    d->m = a->rows;
    d->n = a->cols;
    d->k = a->k; /* k, s0 and s1 are packed for every op: ROPE and MASK use all three */
    d->lda = a->ldx;
    d->ldb = a->ldy;
    d->ldc = a->ldout;
    d->ldd = a->ldaux;
    memcpy(&d->s0, &a->scalar, sizeof(d->s0));
    d->s1 = a->pos;
    d->dtypes = (uint32_t)a->x_type | (uint32_t)a->y_type << 8 | (uint32_t)a->out_type << 16 |
                (uint32_t)(a->rope_half ? 1 : 0) << 24;
    engine_sync_apply(d, &a->sync);
}
