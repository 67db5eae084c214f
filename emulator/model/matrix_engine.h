/* SPDX-License-Identifier: MIT */
/*
 * The per-core matrix engine (design brief, section 4): a weight-stationary R x C systolic
 * array. Two independent halves, both pure functions:
 *
 * - matrix_gemm(): the arithmetic of one GEMM on host pointers (the QEMU glue has already
 *   validated the guest addresses; matrix_gemm_spans() tells it how many bytes each operand
 *   spans). Used in functional mode.
 * - matrix_gemm_cycles(): the time the GEMM takes, its SRAM traffic and FLOPs. Used in both
 *   modes; it never looks at data.
 *
 * GEMM:  C[M x N] (+)= op(A)[M x K] * op(B)[K x N]
 *   All operands row-major, leading dimensions in elements:
 *     op(A) = A     A stored M x K, lda >= K;   op(A)[i][k] = A[i * lda + k]
 *     op(A) = A^T   A stored K x M, lda >= M;   op(A)[i][k] = A[k * lda + i]
 *     op(B) = B     B stored K x N, ldb >= N;   op(B)[k][j] = B[k * ldb + j]
 *     op(B) = B^T   B stored N x K, ldb >= K;   op(B)[k][j] = B[j * ldb + k]
 *     C             stored M x N, ldc >= N;     C[i][j]     = C[i * ldc + j]
 *
 * Summation order (fixed, part of the contract, so a host loop in the same order matches
 * bit for bit): for every output element, in fp32 with each operation rounded (no fma),
 *     acc = MATRIX_ACCUMULATE ? (float)C_old[i][j] : +0.0f;
 *     for (k = 0; k < K; k++) acc = acc + (float)op(A)[i][k] * (float)op(B)[k][j];
 *     C[i][j] = acc               (BF16_BF16: rounded to bf16 once, nearest even)
 * bf16 x bf16 products are exact in fp32, so in the bf16 modes only the additions round.
 * Note +0.0f + -0.0f = +0.0f: a sum of negative zeros without ACCUMULATE is +0.
 *
 * Not modelled: integer and fp8 modes, saturation, bias or activation fused into the GEMM,
 * sparsity, the array's real partial-sum order across folds (the functional result is the
 * sequential sum above; only the timing is per fold).
 */
#ifndef MATRIX_ENGINE_H
#define MATRIX_ENGINE_H

#include <stdint.h>

#include "npu_enums.h"
#include "npu_numeric.h"

/* Element types of a GEMM: inputs (A, B) and output (C). */
enum matrix_dtype {
    MATRIX_BF16_FP32 = 0, /* A, B bf16; C fp32 (accumulates in fp32) */
    MATRIX_BF16_BF16 = 1, /* A, B bf16; C bf16 (fp32 accumulation, rounded once) */
    MATRIX_FP32 = 2,      /* A, B, C fp32 */
};
#define MATRIX_DTYPE_COUNT 3u

/* Bits of matrix_gemm_args.flags. */
enum matrix_flag {
    MATRIX_TRANS_A = 1u,    /* op(A) = A^T */
    MATRIX_TRANS_B = 2u,    /* op(B) = B^T */
    MATRIX_ACCUMULATE = 4u, /* C += ..., else C is overwritten (C_old never read) */
};
#define MATRIX_FLAGS_ALL 7u

struct matrix_gemm_args {
    const void *a, *b;           /* op(A) M x K, op(B) K x N (layouts above) */
    void *c;                     /* C M x N; its span overlaps neither A's nor B's */
    uint32_t m, n, k;            /* all >= 1 */
    uint32_t lda, ldb, ldc;      /* row strides in elements */
    uint32_t flags;              /* matrix_flag bits */
    enum matrix_dtype dtype;
};

/* Bytes each operand spans from its base pointer (num_span_bytes of its stored shape). */
struct matrix_spans {
    uint64_t a, b, c;
};

/* Element types of the inputs and of C for a valid dtype. */
enum num_type matrix_dtype_in_type(enum matrix_dtype dt);
enum num_type matrix_dtype_out_type(enum matrix_dtype dt);

/*
 * Checks the shape (not the pointers): dims >= 1, a known dtype and flags, every leading
 * dimension >= the stored row length. Fills *s. NPU_OK or NPU_ERR_INVAL.
 */
int matrix_gemm_spans(const struct matrix_gemm_args *g, struct matrix_spans *s);

/*
 * The GEMM. NPU_ERR_INVAL for a bad shape (matrix_gemm_spans), a NULL pointer, or C's
 * span overlapping A's or B's (spans include the padding between rows); NPU_ERR_NOMEM if
 * its fixed 80 KiB work area cannot be allocated. On error C is untouched.
 */
int matrix_gemm(const struct matrix_gemm_args *g);

/* ---- timing ---- */

struct matrix_engine_cfg {
    uint32_t rows;                 /* R: array rows (the K direction), 1..4096 */
    uint32_t cols;                 /* C: array columns (the N direction), 1..4096 */
    uint32_t sram_bytes_per_cycle; /* local SRAM bandwidth available to the engine, >= 1 */
};

/* NPU_OK or NPU_ERR_INVAL. */
int matrix_engine_cfg_check(const struct matrix_engine_cfg *cfg);

struct matrix_gemm_timing {
    uint64_t cycles;         /* max(compute_cycles, sram_cycles) */
    uint64_t compute_cycles; /* the array's schedule */
    uint64_t stream_cycles;  /* its folds alone (the FN * ... term below): what the command costs
                                when it follows an independent one through the array */
    uint64_t sram_cycles;    /* ceil(sram_bytes / sram_bytes_per_cycle) */
    uint64_t sram_bytes;     /* bytes read + written in SRAM */
    uint64_t folds;          /* ceil(K / R) * ceil(N / C) */
    uint64_t flops;          /* 2 * M * N * K */
    double utilisation;      /* flops / (2 * R * C * cycles), in (0, 1] */
};

/*
 * Cycles of C[M x N] (+)= op(A)[M x K] * op(B)[K x N] on the array; fills *t if not NULL.
 * Returns 0 (and zeroes *t) for an invalid cfg, a zero dim, a bad dtype or unknown flags;
 * every valid GEMM takes at least one cycle. Sums and products saturate at UINT64_MAX.
 * Transposes cost nothing (the operand fetch reads either layout at full bandwidth).
 *
 *   FK = ceil(K / R), FN = ceil(N / C), folds = FK * FN
 *   The weight operand op(B) is cut into folds of R (along K) x C (along N); a fold
 *   narrower than C costs as much as a full one, and the last K-fold of each N-fold holds
 *   KR = K mod R weight rows when KR > 0. Fold order: N-folds outer, K-folds inner.
 *   Per fold, the M rows of op(A)'s K-slice stream through the array: M cycles. Weights are
 *   double-buffered and shift in a row a cycle: the cycles that load the next fold's weight
 *   rows (R, or KR) overlap the current fold, so a fold lasts max(M, R), a partial one
 *   max(M, KR) (with M < R the array waits for weights: GEMV is weight-load bound, and a
 *   half-height fold loads in half the time; its unused rows still cost MACs when M is
 *   large). The switch to the next fold's weights travels down the array with the
 *   wavefront (as in the TPU's staggered weight switch), so consecutive folds follow each
 *   other without draining; the first weight load (min(K, R) cycles) and one fill/drain of
 *   the wavefront (R + C - 2 cycles) are exposed once per command:
 *     compute_cycles = min(K, R) + FN * (floor(K / R) * max(M, R) + [KR > 0] max(M, KR))
 *                      + (R + C - 2)
 *   This is the NPU paper's section 3.1 form, T = N_tiles * T_cycles + T_inject. (SCALE-Sim
 *   charges 2R + C + M - 2 per fold: no overlap of folds at all.)
 *
 *   SRAM traffic, with ei = bytes of an input element (bf16 2, fp32 4), eo = bytes of a C
 *   element (BF16_BF16 2, else 4), and fp32 partial sums (4 bytes) kept in SRAM between the
 *   K-folds of an N-fold:
 *     A:  FN * M * K * ei                     (op(A) streamed once per N-fold)
 *     B:  K * N * ei                          (each weight loaded once)
 *     C:  M * N * ((FK - 1) * 4               (partial sums written after each K-fold but the last)
 *                + (FK - 1) * 4               (and read back by the next K-fold)
 *                + eo                         (final write)
 *                + (ACCUMULATE ? eo : 0))     (C_old read by the first K-fold)
 *     sram_cycles = ceil(sram_bytes / sram_bytes_per_cycle)
 *   cycles = max(compute_cycles, sram_cycles)
 *   In steady state the array needs R * ei + C * 8 bytes per cycle (inputs in, partial sums
 *   in and out); below that the GEMM is SRAM-bound.
 *
 * Example: R = C = 128, M = N = K = 4096: folds = 1024, compute = 128 + 1024 * 4096 + 254 =
 * 4194686 cycles, utilisation 4194304 / 4194686 = 0.99991 when not SRAM-bound; M = N = K =
 * 1024: 128 + 64 * 1024 + 254 = 65918 cycles, utilisation 0.9942.
 */
uint64_t matrix_gemm_cycles(const struct matrix_engine_cfg *cfg, uint32_t m, uint32_t n,
                            uint32_t k, enum matrix_dtype dtype, uint32_t flags,
                            struct matrix_gemm_timing *t);

/*
 * A batch of `batch` GEMMs of one shape in one command (npu_desc.batch): their folds follow
 * each other through the array as one GEMM's do (no operand of one is the output of
 * another, so nothing waits for a drain), so the first weight load and the fill/drain are
 * exposed once:
 *   compute_cycles = min(K, R) + batch * (one GEMM's fold term) + (R + C - 2)
 * and sram_bytes, folds and flops are batch times one GEMM's. batch 0 counts as 1. The
 * attention of a decode row (a few query rows against each KV head's keys) is the case:
 * per head, one fold that costs about four times its streaming in weight load and drain.
 */
uint64_t matrix_gemm_batch_cycles(const struct matrix_engine_cfg *cfg, uint32_t m, uint32_t n,
                                  uint32_t k, enum matrix_dtype dtype, uint32_t flags,
                                  uint32_t batch, struct matrix_gemm_timing *t);

/* 2 * M * N * K (saturating). */
uint64_t matrix_gemm_flops(uint32_t m, uint32_t n, uint32_t k);

#endif
