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
    struct engine_sync sync;
};

void matrix_gemm_desc(struct npu_desc *d, const struct matrix_gemm_desc_args *args);

#endif
