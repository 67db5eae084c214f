/* SPDX-License-Identifier: MIT */
/*
 * Host unit tests of the matrix engine (emulator/model/matrix_engine.[ch]) and of the bf16
 * helpers it uses (models/numeric/include/npu_numeric.h).
 * Covers: bf16 <-> fp32 edge cases (ties to even, overflow to inf, NaN quieting, denormals,
 * signed zero, every bf16 pattern round-tripping); span and overlap helpers; the GEMM bit for
 * bit against a plain triple loop in the documented order, for odd shapes, both transposes,
 * accumulate, all dtypes and padded leading dimensions (padding untouched); the summation
 * order and the single final bf16 rounding pinned on hand-made cases; special values;
 * argument errors leaving C untouched; the timing formula on hand-computed cases (K and N
 * not multiples of the array, a non-square array, SRAM-bound cases), its monotonicity in
 * M, N and K, the large-shape utilisation above 0.9, invalid input and saturation.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <math.h>

#include "matrix_engine.h"
#include "npu_enums.h"
#include "npu_numeric.h"

NUM_FP_CONTRACT_OFF

/* ---- bf16 ---- */

static uint16_t to_bf16(uint32_t bits)
{
    return num_fp32_to_bf16(num_fp32_from_bits(bits));
}

static void test_bf16_rounding(void **state)
{
    (void)state;
    assert_int_equal(to_bf16(0x3f800000u), 0x3f80);        /* 1.0 exact */
    assert_int_equal(to_bf16(0x3f807fffu), 0x3f80);        /* below half: down */
    assert_int_equal(to_bf16(0x3f808000u), 0x3f80);        /* tie, even below */
    assert_int_equal(to_bf16(0x3f808001u), 0x3f81);        /* above half: up */
    assert_int_equal(to_bf16(0x3f818000u), 0x3f82);        /* tie, even above */
    assert_int_equal(to_bf16(0xbf818000u), 0xbf82);        /* sign symmetric */
    assert_int_equal(to_bf16(0x3fffffffu), 0x4000);        /* carry into the exponent */
    assert_int_equal(to_bf16(0x7f7f7fffu), 0x7f7f);        /* largest bf16 stays */
    assert_int_equal(to_bf16(0x7f7f8000u), 0x7f80);        /* tie to even overflows to inf */
    assert_int_equal(to_bf16(0x7f7fffffu), 0x7f80);        /* FLT_MAX -> inf */
    assert_int_equal(to_bf16(0xff7fffffu), 0xff80);        /* -FLT_MAX -> -inf */
    assert_true(num_round_bf16(1.00390625f) == 1.0f);      /* 1 + 2^-8: tie to 1.0 */
}

static void test_bf16_special_values(void **state)
{
    (void)state;
    assert_int_equal(num_fp32_to_bf16(INFINITY), 0x7f80);
    assert_int_equal(num_fp32_to_bf16(-INFINITY), 0xff80);
    assert_int_equal(num_fp32_to_bf16(0.0f), 0x0000);
    assert_int_equal(num_fp32_to_bf16(-0.0f), 0x8000);
    assert_int_equal(to_bf16(0x7fc00000u), 0x7fc0);        /* quiet NaN */
    assert_int_equal(to_bf16(0xffc00000u), 0xffc0);        /* sign kept */
    assert_int_equal(to_bf16(0x7f800001u), 0x7fc0);        /* sNaN, low payload: not inf */
    assert_int_equal(to_bf16(0x7f810000u), 0x7fc1);        /* payload top bits kept, quiet */
    assert_int_equal(to_bf16(0x7fffffffu), 0x7fff);        /* no carry out of a NaN */
    assert_int_equal(to_bf16(0xffffffffu), 0xffff);
    assert_true(num_bf16_is_nan(0x7f81) && num_bf16_is_nan(0xffc0));
    assert_false(num_bf16_is_nan(0x7f80) || num_bf16_is_nan(0xff80));
    assert_true(isnan(num_bf16_to_fp32(0x7fc0)));
    assert_true(isinf(num_bf16_to_fp32(0xff80)) && num_bf16_to_fp32(0xff80) < 0);
    assert_true(signbit(num_bf16_to_fp32(0x8000)) && num_bf16_to_fp32(0x8000) == 0.0f);
}

static void test_bf16_denormals(void **state)
{
    (void)state;
    assert_int_equal(to_bf16(0x00000001u), 0x0000); /* smallest fp32 denormal -> +0 */
    assert_int_equal(to_bf16(0x80000001u), 0x8000); /* -> -0 */
    assert_int_equal(to_bf16(0x00010000u), 0x0001); /* smallest bf16 denormal exact */
    assert_int_equal(to_bf16(0x00008000u), 0x0000); /* tie to even (0) */
    assert_int_equal(to_bf16(0x00018000u), 0x0002); /* tie to even (2) */
    assert_int_equal(to_bf16(0x00008001u), 0x0001); /* above half: up, no flush */
    assert_int_equal(to_bf16(0x807fffffu), 0x8080); /* largest denormal -> smallest normal */
    assert_int_equal(num_fp32_to_bits(num_bf16_to_fp32(0x0001)), 0x00010000u);
    assert_int_equal(num_fp32_to_bits(num_bf16_to_fp32(0x807f)), 0x807f0000u);
}

static void test_bf16_round_trip_all(void **state)
{
    (void)state;
    for (uint32_t h = 0; h <= 0xffffu; h++) {
        float f = num_bf16_to_fp32((uint16_t)h);
        assert_int_equal(num_fp32_to_bits(f), h << 16); /* exact widening */
        uint16_t back = num_fp32_to_bf16(f);
        assert_int_equal(back, num_bf16_is_nan((uint16_t)h) ? (h | 0x40u) : h);
    }
}

static void test_numeric_helpers(void **state)
{
    (void)state;
    unsigned char buf[16] = { 0 };
    num_store(buf + 1, 1, NUM_FP32, 1.5f); /* unaligned */
    assert_true(num_load(buf + 1, 1, NUM_FP32) == 1.5f);
    num_store(buf + 1, 0, NUM_BF16, 1.00390625f);
    assert_true(num_load(buf + 1, 0, NUM_BF16) == 1.0f);
    num_store_u32(buf + 3, 2, 0xdeadbeefu);
    assert_int_equal(num_load_u32(buf + 3, 2), 0xdeadbeefu);
    assert_int_equal(num_type_bytes(NUM_BF16), 2);
    assert_int_equal(num_type_bytes(NUM_FP32), 4);
    assert_int_equal(num_span_bytes(3, 5, 8, 2), (2 * 8 + 5) * 2);
    assert_int_equal(num_span_bytes(0, 5, 8, 2), 0);
    assert_int_equal(num_span_bytes(1, 5, 0, 4), 20);
    assert_true(num_span_bytes(UINT32_MAX, UINT32_MAX, UINT32_MAX, 4) == UINT64_MAX);
    assert_true(num_ranges_overlap(buf, 4, buf + 3, 4));
    assert_false(num_ranges_overlap(buf, 4, buf + 4, 4));
    assert_false(num_ranges_overlap(buf + 4, 4, buf, 4));
    assert_false(num_ranges_overlap(buf, 0, buf, 4));
}

/* ---- functional GEMM ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

/* A random value in about [-4, 4) with a full fp32 mantissa (bf16 stores round it). */
static float rnd_value(void)
{
    return ((float)(rnd() & 0xffffffu) / 16777216.0f - 0.5f) * 8.0f;
}

static void fill(void *p, size_t n, enum num_type t)
{
    for (size_t i = 0; i < n; i++)
        num_store(p, i, t, rnd_value());
}

/* The plain triple loop, in the order matrix_engine.h documents. */
static void ref_gemm(const struct matrix_gemm_args *g)
{
    enum num_type ti = matrix_dtype_in_type(g->dtype), to = matrix_dtype_out_type(g->dtype);
    bool ta = g->flags & MATRIX_TRANS_A, tb = g->flags & MATRIX_TRANS_B;
    for (uint32_t i = 0; i < g->m; i++)
        for (uint32_t j = 0; j < g->n; j++) {
            size_t ci = (size_t)i * g->ldc + j;
            float acc = (g->flags & MATRIX_ACCUMULATE) ? num_load(g->c, ci, to) : 0.0f;
            for (uint32_t k = 0; k < g->k; k++) {
                float a = num_load(g->a, ta ? (size_t)k * g->lda + i : (size_t)i * g->lda + k, ti);
                float b = num_load(g->b, tb ? (size_t)j * g->ldb + k : (size_t)k * g->ldb + j, ti);
                acc = acc + a * b;
            }
            num_store(g->c, ci, to, acc);
        }
}

/* Runs the engine and the reference on the same inputs; C buffers must match byte for byte. */
static void check_gemm(uint32_t m, uint32_t n, uint32_t k, enum matrix_dtype dt,
                       uint32_t flags, uint32_t pad)
{
    bool ta = flags & MATRIX_TRANS_A, tb = flags & MATRIX_TRANS_B;
    struct matrix_gemm_args g = { .m = m, .n = n, .k = k, .flags = flags, .dtype = dt,
                                  .lda = (ta ? m : k) + pad, .ldb = (tb ? k : n) + pad,
                                  .ldc = n + pad };
    struct matrix_spans s;
    assert_int_equal(matrix_gemm_spans(&g, &s), NPU_OK);
    size_t ab = (size_t)s.a + 8, bb = (size_t)s.b + 8, cb = (size_t)s.c + 8;
    void *a = malloc(ab), *b = malloc(bb), *c = malloc(cb), *cref = malloc(cb);
    assert_non_null(a && b && c && cref);
    enum num_type ti = matrix_dtype_in_type(dt), to = matrix_dtype_out_type(dt);
    fill(a, ab / num_type_bytes(ti), ti);
    fill(b, bb / num_type_bytes(ti), ti);
    fill(c, cb / num_type_bytes(to), to); /* old C and the padding */
    memcpy(cref, c, cb);
    g.a = a, g.b = b, g.c = c;
    assert_int_equal(matrix_gemm(&g), NPU_OK);
    g.c = cref;
    ref_gemm(&g);
    if (memcmp(c, cref, cb) != 0)
        fail_msg("mismatch m=%u n=%u k=%u dtype=%d flags=%u pad=%u", m, n, k, dt, flags, pad);
    free(a), free(b), free(c), free(cref);
}

static void test_gemm_matches_reference(void **state)
{
    (void)state;
    static const uint32_t shapes[][3] = {
        { 1, 1, 1 }, { 1, 8, 16 }, { 1, 70, 3 }, { 3, 5, 7 }, { 17, 33, 65 }, { 129, 1, 2 },
        { 2, 130, 3 }, { 5, 64, 9 }, { 4, 65, 1 }, { 7, 1, 100 },
        { 3, 5, 600 }, { 70, 66, 300 }, /* several blocks of 64 rows, 64 columns, 256 k */
    };
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
        for (uint32_t dt = 0; dt < MATRIX_DTYPE_COUNT; dt++)
            for (uint32_t flags = 0; flags <= MATRIX_FLAGS_ALL; flags++)
                for (uint32_t pad = 0; pad <= 3; pad += 3)
                    check_gemm(shapes[s][0], shapes[s][1], shapes[s][2],
                               (enum matrix_dtype)dt, flags, pad);
}

static void test_gemm_order_pinned(void **state)
{
    (void)state;
    /* Increasing k: (0 + 1) + 1e8 = 1e8; + -1e8 = 0. Reversed, it would be 1. */
    float a[3] = { 1.0f, 1e8f, -1e8f }, b[3] = { 1.0f, 1.0f, 1.0f }, c = 42.0f;
    struct matrix_gemm_args g = { a, b, &c, 1, 1, 3, 3, 1, 1, 0, MATRIX_FP32 };
    assert_int_equal(matrix_gemm(&g), NPU_OK);
    assert_true(c == 0.0f);
    /* ACCUMULATE starts from C_old: (1e8 + -1e8) + 1 = 1; summing the products first and
       adding C_old last would give (-1e8 + 1) + 1e8 = 0. */
    float a2[2] = { -1e8f, 1.0f }, c2 = 1e8f;
    struct matrix_gemm_args g2 = { a2, b, &c2, 1, 1, 2, 2, 1, 1, MATRIX_ACCUMULATE,
                                   MATRIX_FP32 };
    assert_int_equal(matrix_gemm(&g2), NPU_OK);
    assert_true(c2 == 1.0f);
    /* BF16_BF16 rounds once: 1 + 3 * 2^-9 -> 0x3f81, per-step rounding would stay 1.0. */
    uint16_t ab[4] = { 0x3f80, 0x3b00, 0x3b00, 0x3b00 }, bb[4] = { 0x3f80, 0x3f80, 0x3f80,
                                                                   0x3f80 }, cb = 0;
    struct matrix_gemm_args g3 = { ab, bb, &cb, 1, 1, 4, 4, 1, 1, 0, MATRIX_BF16_BF16 };
    assert_int_equal(matrix_gemm(&g3), NPU_OK);
    assert_int_equal(cb, 0x3f81);
    /* Same in BF16_FP32: the exact sum 1 + 3 * 2^-9. */
    float cf = 0;
    g3.c = &cf, g3.dtype = MATRIX_BF16_FP32;
    assert_int_equal(matrix_gemm(&g3), NPU_OK);
    assert_true(cf == 1.0f + 3.0f / 512.0f);
}

static void test_gemm_special_values(void **state)
{
    (void)state;
    float a[2] = { INFINITY, 1.0f }, b[2] = { 0.0f, 2.0f }, c = 0;
    struct matrix_gemm_args g = { a, b, &c, 1, 1, 2, 2, 1, 1, 0, MATRIX_FP32 };
    assert_int_equal(matrix_gemm(&g), NPU_OK);
    assert_true(isnan(c)); /* inf * 0 */
    float nz = -0.0f, one = 1.0f;
    struct matrix_gemm_args z = { &nz, &one, &c, 1, 1, 1, 1, 1, 1, 0, MATRIX_FP32 };
    assert_int_equal(matrix_gemm(&z), NPU_OK);
    assert_true(c == 0.0f && !signbit(c)); /* +0 + -0 = +0 */
    c = -0.0f, z.flags = MATRIX_ACCUMULATE;
    assert_int_equal(matrix_gemm(&z), NPU_OK);
    assert_true(c == 0.0f && signbit(c)); /* -0 + -0 = -0 */
    uint16_t big[2] = { 0x7f7f, 0x7f7f }, two[2] = { 0x4000, 0x4000 }, cb = 0;
    struct matrix_gemm_args o = { big, two, &cb, 1, 1, 2, 2, 1, 1, 0, MATRIX_BF16_BF16 };
    assert_int_equal(matrix_gemm(&o), NPU_OK);
    assert_int_equal(cb, 0x7f80); /* overflows to +inf */
}

static void test_gemm_invalid(void **state)
{
    (void)state;
    float a[64], b[64], c[64];
    for (int i = 0; i < 64; i++)
        a[i] = b[i] = 1.0f, c[i] = 7.0f;
    const struct matrix_gemm_args ok = { a, b, c, 2, 3, 4, 4, 3, 3, 0, MATRIX_FP32 };
    struct matrix_gemm_args g = ok;
    assert_int_equal(matrix_gemm(&g), NPU_OK);
    for (int i = 0; i < 64; i++)
        c[i] = 7.0f;
#define BAD(field, value)                                       \
    do {                                                        \
        g = ok;                                                 \
        g.field = value;                                        \
        assert_int_equal(matrix_gemm(&g), NPU_ERR_INVAL);       \
    } while (0)
    BAD(m, 0); BAD(n, 0); BAD(k, 0);
    BAD(lda, 3); BAD(ldb, 2); BAD(ldc, 2);
    BAD(dtype, (enum matrix_dtype)3); BAD(flags, 8u);
    BAD(a, NULL); BAD(b, NULL); BAD(c, NULL);
    BAD(c, a + 4);      /* C inside A */
    BAD(c, b + 8);      /* C overlaps the end of B: B spans b[0..12), C starts at b[8] */
    BAD(c, a + 6);      /* C partly overlapping A (A spans a[0..8)) */
    g = ok, g.flags = MATRIX_TRANS_A, g.lda = 1;
    assert_int_equal(matrix_gemm(&g), NPU_ERR_INVAL); /* A^T stored K x M: lda >= M = 2 */
    g.lda = 2;
    assert_int_equal(matrix_gemm(&g), NPU_OK);
    g = ok, g.flags = MATRIX_TRANS_B, g.ldb = 3;
    assert_int_equal(matrix_gemm(&g), NPU_ERR_INVAL); /* B^T stored N x K: ldb >= K = 4 */
    for (int i = 6; i < 64; i++)
        assert_true(c[i] == 7.0f); /* untouched past the valid C */
#undef BAD
}

static void test_gemm_spans(void **state)
{
    (void)state;
    struct matrix_gemm_args g = { NULL, NULL, NULL, 3, 5, 7, 9, 6, 8, MATRIX_TRANS_A,
                                  MATRIX_BF16_BF16 };
    struct matrix_spans s;
    assert_int_equal(matrix_gemm_spans(&g, &s), NPU_OK); /* pointers are not looked at */
    assert_int_equal(s.a, (6 * 9 + 3) * 2);  /* A stored 7 x 3 */
    assert_int_equal(s.b, (6 * 6 + 5) * 2);  /* B stored 7 x 5 */
    assert_int_equal(s.c, (2 * 8 + 5) * 2);  /* C 3 x 5, bf16 */
    g.flags = MATRIX_TRANS_B, g.dtype = MATRIX_BF16_FP32, g.lda = 7, g.ldb = 7;
    assert_int_equal(matrix_gemm_spans(&g, &s), NPU_OK);
    assert_int_equal(s.a, (2 * 7 + 7) * 2);  /* A stored 3 x 7 */
    assert_int_equal(s.b, (4 * 7 + 7) * 2);  /* B stored 5 x 7 */
    assert_int_equal(s.c, (2 * 8 + 5) * 4);  /* fp32 */
    assert_int_equal(matrix_dtype_in_type(MATRIX_FP32), NUM_FP32);
    assert_int_equal(matrix_dtype_out_type(MATRIX_BF16_FP32), NUM_FP32);
    assert_int_equal(matrix_dtype_out_type(MATRIX_BF16_BF16), NUM_BF16);
}

/* ---- timing ---- */

static const struct matrix_engine_cfg arr4 = { 4, 4, 1u << 30 };

static void expect_timing(const struct matrix_engine_cfg *cfg, uint32_t m, uint32_t n,
                          uint32_t k, enum matrix_dtype dt, uint32_t flags, uint64_t folds,
                          uint64_t compute, uint64_t bytes, uint64_t cycles)
{
    struct matrix_gemm_timing t;
    assert_int_equal(matrix_gemm_cycles(cfg, m, n, k, dt, flags, &t), cycles);
    assert_int_equal(t.cycles, cycles);
    assert_int_equal(t.folds, folds);
    assert_int_equal(t.compute_cycles, compute);
    assert_int_equal(t.sram_bytes, bytes);
    assert_int_equal(t.sram_cycles, (bytes + cfg->sram_bytes_per_cycle - 1) /
                                        cfg->sram_bytes_per_cycle);
    assert_int_equal(t.flops, 2ull * m * n * k);
    double util = (double)t.flops / (2.0 * cfg->rows * cfg->cols * (double)cycles);
    assert_true(fabs(t.utilisation - util) < 1e-12);
}

static void test_timing_hand_computed(void **state)
{
    (void)state;
    /* 4x4, M=N=K=4: 1 fold; load 4 + 1 * max(4, 4) + fill/drain (4 + 4 - 2) = 14;
       A 32 + B 32 + C 16 * 4 bytes. */
    expect_timing(&arr4, 4, 4, 4, MATRIX_BF16_FP32, 0, 1, 14, 128, 14);
    struct matrix_gemm_timing t;
    matrix_gemm_cycles(&arr4, 4, 4, 4, MATRIX_BF16_FP32, 0, &t);
    assert_true(fabs(t.utilisation - 128.0 / (32.0 * 14.0)) < 1e-12);
    /* K = 5: FK = 2, 2 folds: 4 + 2 * 4 + 6; A 40, B 40, C 16 * (8 + 4). */
    expect_timing(&arr4, 4, 4, 5, MATRIX_BF16_FP32, 0, 2, 18, 272, 18);
    /* N = 6: FN = 2: A read twice 2 * 32, B 48, C 24 * 4. */
    expect_timing(&arr4, 4, 6, 4, MATRIX_BF16_FP32, 0, 2, 18, 208, 18);
    /* Transposes cost nothing. */
    expect_timing(&arr4, 4, 6, 4, MATRIX_BF16_FP32, MATRIX_TRANS_A | MATRIX_TRANS_B, 2, 18,
                  208, 18);
    /* 2x3 array, M=5 N=7 K=3: FK 2, FN 3, 6 folds of max(5, 2): 2 + 30 + (2 + 3 - 2).
       BF16_BF16: A 3 * 5 * 3 * 2 = 90, B 42, C 35 * (8 + 2) = 350. */
    const struct matrix_engine_cfg arr23 = { 2, 3, 1u << 30 };
    expect_timing(&arr23, 5, 7, 3, MATRIX_BF16_BF16, 0, 6, 35, 482, 35);
    /* M = 1 < R: each of the 4 folds waits R = 4 cycles for its weights: 4 + 16 + 6.
       A 2 * 1 * 8 * 2 = 32, B 128, C 8 * (8 + 4) = 96. */
    expect_timing(&arr4, 1, 8, 8, MATRIX_BF16_FP32, 0, 4, 26, 256, 26);
    /* M = 9 > R: folds of 9 cycles: 4 + 4 * 9 + 6. A 2 * 9 * 8 * 2, B 128, C 72 * 12. */
    expect_timing(&arr4, 9, 8, 8, MATRIX_BF16_FP32, 0, 4, 46, 1280, 46);
    /* A partial K-fold loads only its rows: M = 1, K = 6 = 4 + 2, N = 8: per N-fold
       max(1, 4) + max(1, 2) = 6 cycles, 4 + 2 * 6 + 6 = 22 (a padded fold would make it 26).
       A 2 * 1 * 6 * 2 = 24, B 96, C 8 * (8 + 4) = 96. */
    expect_timing(&arr4, 1, 8, 6, MATRIX_BF16_FP32, 0, 4, 22, 216, 22);
    /* K = 2 < R: the first load is 2 rows, each fold max(1, 2): 2 + 2 * 2 + 6 = 12.
       A 2 * 1 * 2 * 2 = 8, B 32, C 8 * 4 = 32. */
    expect_timing(&arr4, 1, 8, 2, MATRIX_BF16_FP32, 0, 2, 12, 72, 12);
    /* M >= R: a partial fold still streams all M rows (its idle array rows cost MACs):
       M = 9, K = 6: per N-fold 9 + 9, 4 + 2 * 18 + 6 = 46, as with K = 8. A 2 * 9 * 6 * 2
       = 216, B 96, C 72 * 12 = 864. */
    expect_timing(&arr4, 9, 8, 6, MATRIX_BF16_FP32, 0, 4, 46, 1176, 46);
}

/* A batch: its folds follow each other, one weight load and one fill/drain exposed. */
static void test_timing_batch(void **state)
{
    (void)state;
    struct matrix_gemm_timing one, four;
    /* 4x4, M = 2 < R, N = K = 4: one fold each; 4 GEMMs: 4 + 4 * 4 + 6 = 26 cycles against
       4 x 14 = 56 as separate commands; bytes and flops 4x one GEMM's. */
    matrix_gemm_cycles(&arr4, 2, 4, 4, MATRIX_BF16_FP32, 0, &one);
    assert_int_equal(matrix_gemm_batch_cycles(&arr4, 2, 4, 4, MATRIX_BF16_FP32, 0, 4, &four),
                     26);
    assert_int_equal(one.cycles, 14);
    assert_int_equal(four.folds, 4 * one.folds);
    assert_int_equal(four.sram_bytes, 4 * one.sram_bytes);
    assert_int_equal(four.flops, 4 * one.flops);
    /* batch 0 and 1 are one GEMM */
    assert_int_equal(matrix_gemm_batch_cycles(&arr4, 2, 4, 4, MATRIX_BF16_FP32, 0, 0, NULL), 14);
    assert_int_equal(matrix_gemm_batch_cycles(&arr4, 2, 4, 4, MATRIX_BF16_FP32, 0, 1, NULL), 14);
}

static void test_timing_sram_bound(void **state)
{
    (void)state;
    /* FP32 accumulate, 4 B/cycle: A 64 + B 64 + C 16 * (4 + 4) = 256 bytes -> 64 > 14. */
    const struct matrix_engine_cfg narrow = { 4, 4, 4 };
    expect_timing(&narrow, 4, 4, 4, MATRIX_FP32, MATRIX_ACCUMULATE, 1, 14, 256, 64);
    struct matrix_gemm_timing t;
    matrix_gemm_cycles(&narrow, 4, 4, 4, MATRIX_FP32, MATRIX_ACCUMULATE, &t);
    assert_true(fabs(t.utilisation - 0.0625) < 1e-12);
    /* BF16_BF16 accumulate, 8^3 on 4x4 at 16 B/cycle: 4 folds, 4 + 4 * 8 + 6 = 42 cycles;
       A 2 * 128 + B 128 + C 64 * (8 + 2 + 2) = 1152 bytes -> 72 cycles. */
    const struct matrix_engine_cfg mid = { 4, 4, 16 };
    expect_timing(&mid, 8, 8, 8, MATRIX_BF16_BF16, MATRIX_ACCUMULATE, 4, 42, 1152, 72);
    /* The SRAM cycles round up: 1152 / 17 = 67.8 -> 68 (above the 42 compute cycles). */
    const struct matrix_engine_cfg odd = { 4, 4, 17 };
    expect_timing(&odd, 8, 8, 8, MATRIX_BF16_BF16, MATRIX_ACCUMULATE, 4, 42, 1152, 68);
}

static void test_timing_monotonic(void **state)
{
    (void)state;
    const struct matrix_engine_cfg cfgs[] = { { 4, 4, 8 }, { 3, 5, 1u << 20 }, { 8, 2, 3 } };
    for (size_t ci = 0; ci < 3; ci++)
        for (uint32_t dt = 0; dt < MATRIX_DTYPE_COUNT; dt++)
            for (uint32_t fl = 0; fl <= MATRIX_ACCUMULATE; fl += MATRIX_ACCUMULATE) {
                const struct matrix_engine_cfg *c = &cfgs[ci];
                enum matrix_dtype d = (enum matrix_dtype)dt;
                uint64_t pm = 0, pn = 0, pk = 0;
                for (uint32_t x = 1; x <= 40; x++) {
                    uint64_t cm = matrix_gemm_cycles(c, x, 7, 9, d, fl, NULL);
                    uint64_t cn = matrix_gemm_cycles(c, 7, x, 9, d, fl, NULL);
                    uint64_t ck = matrix_gemm_cycles(c, 7, 9, x, d, fl, NULL);
                    assert_true(cm >= pm && cn >= pn && ck >= pk);
                    assert_true(cm > 0 && cn > 0 && ck > 0);
                    pm = cm, pn = cn, pk = ck;
                }
            }
}

static void test_timing_large_utilisation(void **state)
{
    (void)state;
    /* 128 x 128 fed at R * 2 + C * 8 = 1280 B/cycle (its steady-state need). */
    const struct matrix_engine_cfg big = { 128, 128, 1280 };
    struct matrix_gemm_timing t;
    uint64_t cyc = matrix_gemm_cycles(&big, 4096, 4096, 4096, MATRIX_BF16_FP32, 0, &t);
    assert_int_equal(cyc, 128 + 1024ull * 4096 + 254);
    assert_int_equal(t.compute_cycles, cyc); /* compute-bound */
    assert_true(t.utilisation > 0.9 && t.utilisation <= 1.0);
    assert_true(fabs(t.utilisation - 4194304.0 / 4194686.0) < 1e-12);
    /* 1024^3: 64 folds, 128 + 65536 + 254 cycles (SRAM: 78 MiB / 1280 B < 65918). */
    cyc = matrix_gemm_cycles(&big, 1024, 1024, 1024, MATRIX_BF16_FP32, 0, &t);
    assert_int_equal(cyc, 65918);
    assert_true(t.utilisation > 0.99);
    const struct matrix_engine_cfg small = { 32, 32, 1u << 20 };
    static const uint32_t dims[] = { 2048, 4096, 8192 };
    for (int i = 0; i < 3; i++) {
        matrix_gemm_cycles(&big, dims[i], dims[i], dims[i], MATRIX_BF16_BF16, 0, &t);
        assert_true(t.utilisation > 0.9 || dims[i] < 4096);
        matrix_gemm_cycles(&small, dims[i], dims[i], dims[i], MATRIX_FP32, 0, &t);
        assert_true(t.utilisation > 0.9);
    }
    /* Decode-like GEMV: M = 1 is latency-bound, far below peak. */
    matrix_gemm_cycles(&big, 1, 4096, 4096, MATRIX_BF16_FP32, 0, &t);
    assert_true(t.utilisation < 0.01);
}

static void test_timing_invalid_and_saturation(void **state)
{
    (void)state;
    struct matrix_gemm_timing t;
    memset(&t, 0xff, sizeof(t));
    assert_int_equal(matrix_gemm_cycles(&arr4, 0, 4, 4, MATRIX_FP32, 0, &t), 0);
    assert_int_equal(t.cycles, 0);
    assert_int_equal(t.flops, 0);
    assert_int_equal(matrix_gemm_cycles(&arr4, 4, 0, 4, MATRIX_FP32, 0, NULL), 0);
    assert_int_equal(matrix_gemm_cycles(&arr4, 4, 4, 0, MATRIX_FP32, 0, NULL), 0);
    assert_int_equal(matrix_gemm_cycles(&arr4, 4, 4, 4, (enum matrix_dtype)3, 0, NULL), 0);
    assert_int_equal(matrix_gemm_cycles(&arr4, 4, 4, 4, MATRIX_FP32, 8, NULL), 0);
    const struct matrix_engine_cfg bad[] = { { 0, 4, 1 }, { 4, 0, 1 }, { 4, 4, 0 },
                                             { 4097, 4, 1 } };
    for (int i = 0; i < 4; i++) {
        assert_int_equal(matrix_engine_cfg_check(&bad[i]), NPU_ERR_INVAL);
        assert_int_equal(matrix_gemm_cycles(&bad[i], 4, 4, 4, MATRIX_FP32, 0, NULL), 0);
    }
    assert_int_equal(matrix_engine_cfg_check(&arr4), NPU_OK);
    const struct matrix_engine_cfg one = { 1, 1, 1 };
    assert_true(matrix_gemm_cycles(&one, UINT32_MAX, UINT32_MAX, UINT32_MAX, MATRIX_FP32,
                                   MATRIX_ACCUMULATE, &t) == UINT64_MAX);
    assert_true(t.flops == UINT64_MAX && t.sram_bytes == UINT64_MAX);
    assert_true(matrix_gemm_flops(3, 5, 7) == 210);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_rounding),
        cmocka_unit_test(test_bf16_special_values),
        cmocka_unit_test(test_bf16_denormals),
        cmocka_unit_test(test_bf16_round_trip_all),
        cmocka_unit_test(test_numeric_helpers),
        cmocka_unit_test(test_gemm_matches_reference),
        cmocka_unit_test(test_gemm_order_pinned),
        cmocka_unit_test(test_gemm_special_values),
        cmocka_unit_test(test_gemm_invalid),
        cmocka_unit_test(test_gemm_spans),
        cmocka_unit_test(test_timing_hand_computed),
        cmocka_unit_test(test_timing_batch),
        cmocka_unit_test(test_timing_sram_bound),
        cmocka_unit_test(test_timing_monotonic),
        cmocka_unit_test(test_timing_large_utilisation),
        cmocka_unit_test(test_timing_invalid_and_saturation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
