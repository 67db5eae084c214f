/* SPDX-License-Identifier: MIT */
/*
 * Vector check of the engines image: RMSNorm, softmax, SwiGLU with a bf16 output and top-k on
 * small odd shapes, against the hart's own reference. The emulator computes with the host's
 * libm and the hart with newlib's, so results may differ in the last bits: relative 1e-6
 * (bf16 outputs: one bf16 ulp); top-k indices must match exactly.
 */
#include <math.h>
#include <string.h>

#include "engine_checks.h"
#include "npu/hal.h"
#include "npu/vector.h"
#include "npu/wait.h"

#define ROWS 3
#define COLS 21
#define SEM_VEC 16u
#define VEC_OFFSET 0x8800u /* in the data area: x, y, out, aux at 1 KiB steps */

static struct npu_desc desc;

static float *buf(unsigned i)
{
    return (float *)(uintptr_t)(engines_data_base() + VEC_OFFSET + i * 0x400);
}

static float x_at(unsigned r, unsigned c)
{
    return (float)((int)((r * 7 + c * 11) % 23) - 11) / 8.0f;
}

static bool close_to(float got, float want, float rel)
{
    float diff = fabsf(got - want), scale = fabsf(want) > 1e-30f ? fabsf(want) : 1e-30f;
    return diff <= rel * scale;
}

static int run(struct vector_op_args *a)
{
    a->sync = (struct engine_sync){ .signal = true, .signal_core = (uint16_t)hal_self()->core_id,
                                    .signal_sem = SEM_VEC, .signal_value = 1 };
    vector_op_desc(&desc, a);
    int rc = engine_submit(&desc, 1);
    if (rc == NPU_OK)
        rc = hal_sem_wait(SEM_VEC, hal_sem_read(SEM_VEC) + 1);
    return rc;
}

static uint32_t rmsnorm_errors(void)
{
    float *x = buf(0), *w = buf(1), *out = buf(2);
    for (unsigned c = 0; c < COLS; c++)
        w[c] = 0.5f + c / 16.0f;
    struct vector_op_args a = { .op = NPU_VECTOR_OP_RMSNORM, .x = (uintptr_t)x, .y = (uintptr_t)w,
                                .out = (uintptr_t)out, .rows = ROWS, .cols = COLS, .ldx = COLS,
                                .ldout = COLS, .scalar = 1e-5f };
    if (run(&a) != NPU_OK)
        return 1;
    uint32_t bad = 0;
    for (unsigned r = 0; r < ROWS; r++) {
        float ss = 0;
        for (unsigned c = 0; c < COLS; c++)
            ss += x[r * COLS + c] * x[r * COLS + c];
        float inv = 1.0f / sqrtf(ss / (float)COLS + 1e-5f);
        for (unsigned c = 0; c < COLS; c++)
            bad += !close_to(out[r * COLS + c], x[r * COLS + c] * inv * w[c], 1e-6f);
    }
    return bad;
}

static uint32_t softmax_errors(void)
{
    float *x = buf(0), *out = buf(2);
    struct vector_op_args a = { .op = NPU_VECTOR_OP_SOFTMAX, .x = (uintptr_t)x,
                                .out = (uintptr_t)out, .rows = ROWS, .cols = COLS, .ldx = COLS,
                                .ldout = COLS };
    if (run(&a) != NPU_OK)
        return 1;
    uint32_t bad = 0;
    for (unsigned r = 0; r < ROWS; r++) {
        float m = x[r * COLS], s = 0;
        for (unsigned c = 1; c < COLS; c++)
            m = x[r * COLS + c] > m ? x[r * COLS + c] : m;
        for (unsigned c = 0; c < COLS; c++)
            s += expf(x[r * COLS + c] - m);
        for (unsigned c = 0; c < COLS; c++)
            bad += !close_to(out[r * COLS + c], expf(x[r * COLS + c] - m) / s, 1e-6f);
    }
    return bad;
}

static uint32_t swiglu_errors(void)
{
    float *x = buf(0), *y = buf(1);
    uint16_t *out = (uint16_t *)buf(2);
    for (unsigned i = 0; i < ROWS * COLS; i++)
        y[i] = 1.0f + (float)(i % 5) / 4.0f;
    struct vector_op_args a = { .op = NPU_VECTOR_OP_SWIGLU, .x = (uintptr_t)x, .y = (uintptr_t)y,
                                .out = (uintptr_t)out, .rows = ROWS, .cols = COLS, .ldx = COLS,
                                .ldy = COLS, .ldout = COLS, .out_type = NPU_DTYPE_BF16 };
    if (run(&a) != NPU_OK)
        return 1;
    uint32_t bad = 0;
    for (unsigned i = 0; i < ROWS * COLS; i++) {
        uint32_t u = (uint32_t)out[i] << 16;
        float got;
        memcpy(&got, &u, 4);
        float want = x[i] / (1.0f + expf(-x[i])) * y[i];
        bad += !close_to(got, want, 1.0f / 128); /* one bf16 ulp */
    }
    return bad;
}

static uint32_t topk_errors(void)
{
    float *x = buf(0);
    uint32_t *idx = (uint32_t *)buf(3);
    for (unsigned c = 0; c < COLS; c++)
        x[c] = (float)(c % 6); /* row 0: ties at 5.0 in columns 5, 11, 17 */
    struct vector_op_args a = { .op = NPU_VECTOR_OP_TOPK, .x = (uintptr_t)x,
                                .aux = (uintptr_t)idx, .rows = 1, .cols = COLS, .k = 4,
                                .ldx = COLS, .ldaux = 4 };
    if (run(&a) != NPU_OK)
        return 1;
    return (idx[0] != 5) + (idx[1] != 11) + (idx[2] != 17) + (idx[3] != 4);
}

int check_vector_data(void)
{
    float *x = buf(0);
    for (unsigned r = 0; r < ROWS; r++)
        for (unsigned c = 0; c < COLS; c++)
            x[r * COLS + c] = x_at(r, c);
    uint32_t rms = rmsnorm_errors(), soft = softmax_errors(), glu = swiglu_errors();
    uint32_t top = topk_errors();
    checks_expect(rms + soft + glu + top == 0, ECHECK_VECTOR, echeck_names[ECHECK_VECTOR],
                  "mismatches: RMSNorm %u, softmax %u, SwiGLU %u, top-k %u", rms, soft, glu,
                  top);
    return (int)(rms + soft + glu + top);
}
