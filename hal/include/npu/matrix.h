/* SPDX-License-Identifier: MIT */
/*
 * Matrix engine: C[m x n] (+)= op(A)[m x k] * op(B)[k x n] on the systolic array, operands
 * in this core's SRAM, row-major with leading dimensions in elements.
 */
#ifndef NPU_MATRIX_H
#define NPU_MATRIX_H

#include <stdbool.h>

#include "npu/engine.h"

struct matrix_gemm_desc_args {
    enum npu_matrix_op op;     /* data types: NPU_MATRIX_OP_GEMM_BF16_F32, ... */
    uint64_t a, b, c;
    uint32_t m, n, k;
    uint32_t lda, ldb, ldc;
    bool trans_a;              /* A stored as k x m */
    bool trans_b;              /* B stored as n x k */
    bool accumulate;           /* C += instead of C = */
    /* batch > 1: that many GEMMs of this shape in one command, the i-th on a + i * stride_a,
       b + i * stride_b and c + i * stride_c (bytes; a stride of 0 shares the operand; the C
       operands must not overlap, nor any C an A or B). One weight load and one drain of
       the array for all (docs/engines.md). 0 or 1: one GEMM, strides 0. */
    uint32_t batch;
    uint64_t stride_a, stride_b, stride_c;
    struct engine_sync sync;
};

void matrix_gemm_desc(struct npu_desc *d, const struct matrix_gemm_desc_args *args);

#endif
