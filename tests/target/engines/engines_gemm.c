/* SPDX-License-Identifier: MIT */
/*
 * GEMM check of the engines image: odd shapes in every data type, transposes and
 * accumulation, against the hart's own reference. The inputs are multiples of 1/4 below 8,
 * so every product and partial sum is exact in fp32 and the reference matches bit for bit
 * whatever the order of accumulation; bf16 outputs are rounded to nearest even once.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "engine_checks.h"
#include "npu/hal.h"
#include "npu/matrix.h"
#include "npu/wait.h"

#define M 7
#define N 13
#define K 19
#define SEM_GEMM 15u
#define GEMM_OFFSET 0x4000u /* in the data area (engines_data_base): A, B, C at 4 KiB steps */

static struct npu_desc desc;
static float ref[M][N];

static uint16_t bf16_from_f32(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1); /* round to nearest even (no NaN/inf here) */
    return (uint16_t)(u >> 16);
}

static float f32_from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static float value(uint32_t i, uint32_t j, uint32_t salt)
{
    return (float)((i * 3 + j * 5 + salt) % 29) / 4.0f;
}

/* Element (i, j) of op(X) where X is stored rows x ld, transposed or not. */
static uint32_t index_of(bool trans, uint32_t i, uint32_t j, uint32_t ld)
{
    return trans ? j * ld + i : i * ld + j;
}

static void fill(void *p, bool bf16, bool trans, uint32_t rows, uint32_t cols, uint32_t ld,
                 uint32_t salt)
{
    for (uint32_t i = 0; i < rows; i++)
        for (uint32_t j = 0; j < cols; j++) {
            float v = value(i, j, salt);
            uint32_t at = index_of(trans, i, j, ld);
            if (bf16)
                ((uint16_t *)p)[at] = bf16_from_f32(v);
            else
                ((float *)p)[at] = v;
        }
}

/* One GEMM case: fills A (M x K), B (K x N), C, runs it, compares C with the reference. */
static bool gemm_case(enum npu_matrix_op op, bool ta, bool tb, bool acc)
{
    uint64_t base = engines_data_base() + GEMM_OFFSET;
    void *a = (void *)(uintptr_t)base, *b = (void *)(uintptr_t)(base + 0x1000);
    void *c = (void *)(uintptr_t)(base + 0x2000);
    bool in16 = op != NPU_MATRIX_OP_GEMM_F32, out16 = op == NPU_MATRIX_OP_GEMM_BF16_BF16;
    uint32_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
    fill(a, in16, ta, M, K, lda, 1);
    fill(b, in16, tb, K, N, ldb, 2);
    for (uint32_t i = 0; i < M; i++)
        for (uint32_t j = 0; j < N; j++) {
            float s = acc ? 1.0f : 0.0f;
            for (uint32_t k = 0; k < K; k++)
                s += value(i, k, 1) * value(k, j, 2);
            ref[i][j] = s;
            if (out16)
                ((uint16_t *)c)[i * ldc + j] = bf16_from_f32(acc ? 1.0f : 0.0f);
            else
                ((float *)c)[i * ldc + j] = acc ? 1.0f : 0.0f;
        }
    struct matrix_gemm_desc_args g = {
        .op = op, .a = base, .b = base + 0x1000, .c = base + 0x2000, .m = M, .n = N, .k = K,
        .lda = lda, .ldb = ldb, .ldc = ldc, .trans_a = ta, .trans_b = tb, .accumulate = acc,
        .sync = { .signal = true, .signal_core = (uint16_t)hal_self()->core_id,
                  .signal_sem = SEM_GEMM, .signal_value = 1 },
    };
    matrix_gemm_desc(&desc, &g);
    if (engine_submit(&desc, 1) != NPU_OK)
        return false;
    hal_sem_wait(SEM_GEMM, hal_sem_read(SEM_GEMM) + 1);
    uint32_t bad = 0;
    for (uint32_t i = 0; i < M; i++)
        for (uint32_t j = 0; j < N; j++) {
            float got = out16 ? f32_from_bf16(((uint16_t *)c)[i * ldc + j])
                              : ((float *)c)[i * ldc + j];
            float want = out16 ? f32_from_bf16(bf16_from_f32(ref[i][j])) : ref[i][j];
            bad += memcmp(&got, &want, 4) != 0;
        }
    return bad == 0;
}

int check_gemm_data(void)
{
    static const struct { enum npu_matrix_op op; bool ta, tb, acc; } cases[] = {
        { NPU_MATRIX_OP_GEMM_BF16_F32, false, false, false },
        { NPU_MATRIX_OP_GEMM_BF16_BF16, false, false, false },
        { NPU_MATRIX_OP_GEMM_F32, false, false, false },
        { NPU_MATRIX_OP_GEMM_BF16_F32, true, false, false },
        { NPU_MATRIX_OP_GEMM_F32, false, true, true },
        { NPU_MATRIX_OP_GEMM_BF16_BF16, true, true, true },
    };
    uint32_t failed = 0;
    for (uint32_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        if (!gemm_case(cases[i].op, cases[i].ta, cases[i].tb, cases[i].acc)) {
            failed++;
            checks_expect(false, ECHECK_GEMM_DATA, echeck_names[ECHECK_GEMM_DATA],
                          "case %u (op %u, trans_a %d, trans_b %d, accumulate %d) differs", i,
                          cases[i].op, cases[i].ta, cases[i].tb, cases[i].acc);
        }
    return (int)failed;
}
