/* SPDX-License-Identifier: MIT */
/*
 * Vector engine: elementwise ops, RMSNorm, softmax (whole, or the pieces of an online
 * softmax), RoPE, top-k, argmax, attention masks and casts on rows of fp32 or bf16 data in
 * this core's SRAM; arithmetic in fp32. Which operands each op uses: docs/engines.md.
 */
#ifndef NPU_VECTOR_H
#define NPU_VECTOR_H

#include <stdbool.h>

#include "npu/engine.h"

/*
 * The value NPU_VECTOR_OP_MASK writes into a masked element (rounded to out's type).
 * Hazard: a large finite negative, not -inf, on purpose: an online softmax over a block
 * whose columns are all masked keeps a finite row max, so exp(x - max) stays finite instead
 * of exp(-inf - -inf) = NaN; the rescale by exp(-1e30 - new max) = 0 drops the block once
 * the row sees a real score. Must match NPU_VECTOR_MASKED in emulator/model/vector_engine.h.
 */
#define NPU_VECTOR_MASKED (-1.0e30f)

struct vector_op_args {
    enum npu_vector_op op;
    uint64_t x;                /* rows x cols, ldx elements apart */
    uint64_t y;                /* second operand: y, w, a row statistic, positions, or 0 */
    uint64_t out;              /* rows x cols (TOPK: rows x k values, or 0) */
    uint64_t aux;              /* row statistics or indices, or 0 */
    uint32_t rows, cols;
    uint32_t k;                /* TOPK: k; ROPE: rows per position; MASK: rows per position
                                  (0 means 1) */
    uint32_t ldx, ldy, ldout, ldaux;
    enum npu_dtype x_type, y_type, out_type;
    float scalar;              /* SCALE factor, RMSNORM eps, ROPE theta; MASK: window (0: none) */
    uint32_t pos;              /* ROPE: position of the first row; MASK: last visible column of
                                  row 0 (signed) */
    bool rope_half;            /* ROPE: pairs (i, i + d/2) instead of (2i, 2i+1) */
    struct engine_sync sync;
};

void vector_op_desc(struct npu_desc *d, const struct vector_op_args *args);

/* The bytes each operand of a vector op spans from its address (the operand table of
   docs/engines.md, as the engine checks them), for callers that order descriptors by
   their data; 0: the op does not use it. aux is written (statistics, indices, top-k) or,
   aux_read, read (RESCALE's old maxima). Leading dimensions of 0 count as cols. */
struct vector_op_extents {
    uint64_t x, y, out, aux;
    bool aux_read;
};
void vector_op_extents(const struct vector_op_args *a, struct vector_op_extents *e);

#endif
