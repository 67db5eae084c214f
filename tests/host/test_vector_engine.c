/* SPDX-License-Identifier: MIT */
/*
 * Host unit tests of the vector engine (emulator/model/vector_engine.[ch]).
 * References are straightforward host loops. Where they perform the same fp32 operations in
 * the same order (and the same libm calls: expf, sqrtf, powf, cosf, sinf) the result must
 * match bit for bit; a double-precision reference checks the maths within a stated relative
 * tolerance, and so does the online-softmax combination (different rounding steps).
 * Covers: every elementwise op on every fp32/bf16 operand combination, odd shapes, 1 element,
 * padded strides, in place; casts; RMSNorm; row max, exp-sum, rescale, row divide, full
 * softmax (= their composition bit for bit) and online softmax over two halves = full
 * softmax; RoPE in both pairings against the llama (complex) and HF (rotate_half) forms,
 * positions and rows_per_pos; top-k and argmax with ties, NaN and signed zero; the attention
 * mask (causal, rows per position, negative start, window, bf16, in place, refused windows,
 * an online softmax over a fully masked block); argument and overlap errors; the timing
 * formula on hand-computed cases, monotonicity and saturation.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <math.h>

#include "npu_enums.h"
#include "npu_numeric.h"
#include "vector_engine.h"

NUM_FP_CONTRACT_OFF

#define REL_TOL 1e-5 /* vs double references and the online combination */

static uint64_t rng_state = 0x243f6a8885a308d3ull;

static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static float rnd_value(float scale)
{
    return ((float)(rnd() & 0xffffffu) / 16777216.0f - 0.5f) * 2.0f * scale;
}

/* A rows x cols matrix of type t with row stride ld, random contents (padding too). */
struct mat {
    void *p;
    uint32_t rows, cols, ld;
    enum num_type t;
};

static struct mat mat_new(uint32_t rows, uint32_t cols, uint32_t pad, enum num_type t,
                          float scale)
{
    struct mat m = { NULL, rows, cols, cols + pad, t };
    size_t n = (size_t)rows * m.ld;
    m.p = malloc(n * num_type_bytes(t));
    assert_non_null(m.p);
    for (size_t i = 0; i < n; i++)
        num_store(m.p, i, t, rnd_value(scale));
    return m;
}

static struct mat mat_clone(const struct mat *m)
{
    struct mat c = *m;
    size_t bytes = (size_t)m->rows * m->ld * num_type_bytes(m->t);
    c.p = malloc(bytes);
    assert_non_null(c.p);
    memcpy(c.p, m->p, bytes);
    return c;
}

static float at(const struct mat *m, uint32_t r, uint32_t c)
{
    return num_load(m->p, (size_t)r * m->ld + c, m->t);
}

static void set(const struct mat *m, uint32_t r, uint32_t c, float v)
{
    num_store(m->p, (size_t)r * m->ld + c, m->t, v);
}

static struct vector_in vin(const struct mat *m)
{
    return (struct vector_in){ m->p, m->ld, m->t };
}

static struct vector_out vout(const struct mat *m)
{
    return (struct vector_out){ m->p, m->ld, m->t };
}

static void assert_same(const struct mat *a, const struct mat *b)
{
    size_t bytes = (size_t)a->rows * a->ld * num_type_bytes(a->t);
    assert_memory_equal(a->p, b->p, bytes);
}

static void assert_close(double got, double want, const char *what)
{
    if (!(fabs(got - want) <= REL_TOL * fabs(want) + 1e-30))
        fail_msg("%s: got %.9g want %.9g", what, got, want);
}

/* ---- elementwise ---- */

static float ref_silu(float x)
{
    return x / (1.0f + expf(-x));
}

static float ref_eltwise(enum vector_op op, float x, float y, float s)
{
    switch (op) {
    case VECTOR_OP_ADD: return x + y;
    case VECTOR_OP_MUL: return x * y;
    case VECTOR_OP_MAX: return isnan(x) || isnan(y) ? NAN : (x > y ? x : y);
    case VECTOR_OP_SCALE: return x * s;
    case VECTOR_OP_EXP: return expf(x);
    case VECTOR_OP_SILU: return ref_silu(x);
    case VECTOR_OP_SWIGLU: return ref_silu(x) * y;
    default: return x;
    }
}

static void check_eltwise(enum vector_op op, uint32_t rows, uint32_t cols, enum num_type tx,
                          enum num_type ty, enum num_type to)
{
    struct mat x = mat_new(rows, cols, 2, tx, 6.0f), y = mat_new(rows, cols, 0, ty, 3.0f);
    struct mat out = mat_new(rows, cols, 1, to, 1.0f), ref = mat_clone(&out);
    struct vector_eltwise_args a = { op, vin(&x), vin(&y), vout(&out), rows, cols, 0.37f };
    assert_int_equal(vector_eltwise(&a), NPU_OK);
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t c = 0; c < cols; c++)
            set(&ref, r, c, ref_eltwise(op, at(&x, r, c), at(&y, r, c), 0.37f));
    assert_same(&out, &ref); /* padding untouched too */
    if (tx == to) { /* in place on x gives the same */
        struct mat xi = mat_clone(&x);
        a.x = vin(&xi), a.out = vout(&xi);
        assert_int_equal(vector_eltwise(&a), NPU_OK);
        for (uint32_t r = 0; r < rows; r++)
            for (uint32_t c = 0; c < cols; c++)
                assert_int_equal(num_fp32_to_bits(at(&xi, r, c)),
                                 num_fp32_to_bits(at(&ref, r, c)));
        free(xi.p);
    }
    free(x.p), free(y.p), free(out.p), free(ref.p);
}

static void test_eltwise_all_ops_and_types(void **state)
{
    (void)state;
    static const uint32_t shapes[][2] = { { 1, 1 }, { 1, 33 }, { 3, 7 }, { 5, 64 } };
    for (int op = VECTOR_OP_ADD; op <= VECTOR_OP_CAST; op++)
        for (size_t s = 0; s < 4; s++)
            for (uint32_t types = 0; types < 8; types++)
                check_eltwise((enum vector_op)op, shapes[s][0], shapes[s][1],
                              (enum num_type)(types & 1), (enum num_type)((types >> 1) & 1),
                              (enum num_type)(types >> 2));
}

static void test_eltwise_special_values(void **state)
{
    (void)state;
    float x[6] = { NAN, 1.0f, -0.0f, -INFINITY, 100.0f, -100.0f };
    float y[6] = { 1.0f, NAN, 0.0f, 1.0f, 1.0f, 1.0f }, o[6];
    struct vector_eltwise_args a = { VECTOR_OP_MAX, { x, 6, NUM_FP32 }, { y, 6, NUM_FP32 },
                                     { o, 6, NUM_FP32 }, 1, 6, 0 };
    assert_int_equal(vector_eltwise(&a), NPU_OK);
    assert_true(isnan(o[0]) && isnan(o[1]) && o[3] == 1.0f);
    assert_true(o[2] == 0.0f && !signbit(o[2])); /* equal values give y */
    a.op = VECTOR_OP_SILU;
    assert_int_equal(vector_eltwise(&a), NPU_OK);
    assert_true(isnan(o[3]));                         /* silu(-inf), documented */
    assert_true(o[4] == 100.0f);                      /* silu(100) = 100 */
    assert_true(o[5] == 0.0f && signbit(o[5]));       /* -100 / (1 + e^100 = inf) = -0 */
    /* CAST fp32 -> bf16: ties to even, NaN quiet, inf kept. */
    float cx[4] = { 1.00390625f, 1.01171875f, INFINITY, NAN };
    uint16_t cb[4];
    struct vector_eltwise_args c = { VECTOR_OP_CAST, { cx, 4, NUM_FP32 }, { NULL, 0, 0 },
                                     { cb, 4, NUM_BF16 }, 1, 4, 0 };
    assert_int_equal(vector_eltwise(&c), NPU_OK);
    assert_int_equal(cb[0], 0x3f80);
    assert_int_equal(cb[1], 0x3f82);
    assert_int_equal(cb[2], 0x7f80);
    assert_int_equal(cb[3], 0x7fc0);
    float back[4]; /* bf16 -> fp32 exact */
    struct vector_eltwise_args w = { VECTOR_OP_CAST, { cb, 4, NUM_BF16 }, { NULL, 0, 0 },
                                     { back, 4, NUM_FP32 }, 1, 4, 0 };
    assert_int_equal(vector_eltwise(&w), NPU_OK);
    assert_true(back[0] == 1.0f && back[1] == 1.015625f && isinf(back[2]) && isnan(back[3]));
}

/* ---- RMSNorm ---- */

static void check_rmsnorm(uint32_t rows, uint32_t cols, enum num_type t)
{
    struct mat x = mat_new(rows, cols, 3, t, 2.0f), w = mat_new(1, cols, 0, t, 1.5f);
    struct mat out = mat_new(rows, cols, 1, t, 1.0f), ref = mat_clone(&out);
    const float eps = 1e-5f;
    struct vector_rmsnorm_args a = { vin(&x), vin(&w), vout(&out), rows, cols, eps };
    assert_int_equal(vector_rmsnorm(&a), NPU_OK);
    for (uint32_t r = 0; r < rows; r++) {
        float ss = 0.0f;
        double ssd = 0.0;
        for (uint32_t c = 0; c < cols; c++) {
            ss = ss + at(&x, r, c) * at(&x, r, c);
            ssd += (double)at(&x, r, c) * at(&x, r, c);
        }
        float inv = 1.0f / sqrtf(ss / (float)cols + eps);
        double invd = 1.0 / sqrt(ssd / cols + eps);
        for (uint32_t c = 0; c < cols; c++) {
            set(&ref, r, c, (at(&x, r, c) * inv) * at(&w, 0, c));
            if (t == NUM_FP32)
                assert_close(at(&out, r, c), at(&x, r, c) * invd * at(&w, 0, c), "rmsnorm");
        }
    }
    assert_same(&out, &ref);
    free(x.p), free(w.p), free(out.p), free(ref.p);
}

static void test_rmsnorm(void **state)
{
    (void)state;
    for (int t = 0; t < 2; t++) {
        check_rmsnorm(1, 1, (enum num_type)t);
        check_rmsnorm(3, 7, (enum num_type)t);
        check_rmsnorm(2, 129, (enum num_type)t);
    }
    float z[3] = { 0, 0, 0 }, w[3] = { 1, 1, 1 }, o[3];
    struct vector_rmsnorm_args a = { { z, 3, NUM_FP32 }, { w, 0, NUM_FP32 }, { o, 3, NUM_FP32 },
                                     1, 3, 0.0f };
    assert_int_equal(vector_rmsnorm(&a), NPU_OK); /* zero row, eps 0: 0 * inf = NaN */
    assert_true(isnan(o[0]));
    a.eps = -1.0f;
    assert_int_equal(vector_rmsnorm(&a), NPU_ERR_INVAL);
    a.eps = NAN;
    assert_int_equal(vector_rmsnorm(&a), NPU_ERR_INVAL);
}

/* ---- softmax ---- */

static void test_softmax_is_composition(void **state)
{
    (void)state;
    const uint32_t rows = 4, cols = 37;
    struct mat x = mat_new(rows, cols, 2, NUM_BF16, 20.0f);
    struct mat sm = mat_new(rows, cols, 0, NUM_FP32, 1.0f), p = mat_clone(&sm);
    float m[4], l[4];
    struct vector_softmax_args s = { vin(&x), vout(&sm), rows, cols };
    assert_int_equal(vector_softmax(&s), NPU_OK);
    struct vector_row_max_args rm = { vin(&x), rows, cols, m };
    assert_int_equal(vector_row_max(&rm), NPU_OK);
    struct vector_exp_sum_args es = { vin(&x), m, vout(&p), l, rows, cols };
    assert_int_equal(vector_exp_sum(&es), NPU_OK);
    struct vector_row_div_args rd = { vin(&p), l, vout(&p), rows, cols };
    assert_int_equal(vector_row_div(&rd), NPU_OK); /* in place */
    assert_same(&sm, &p);
    for (uint32_t r = 0; r < rows; r++) { /* vs double */
        double md = -INFINITY, sd = 0;
        for (uint32_t c = 0; c < cols; c++)
            md = fmax(md, at(&x, r, c));
        assert_true(m[r] == (float)md);
        for (uint32_t c = 0; c < cols; c++)
            sd += exp(at(&x, r, c) - md);
        for (uint32_t c = 0; c < cols; c++)
            assert_close(at(&sm, r, c), exp(at(&x, r, c) - md) / sd, "softmax");
    }
    free(x.p), free(sm.p), free(p.p);
}

static void test_exp_sum_bf16_sum_unrounded(void **state)
{
    (void)state;
    float x[5] = { 0.1f, 0.2f, -0.3f, 1.7f, 0.0f }, m = 1.7f, sum;
    uint16_t e[5];
    struct vector_exp_sum_args a = { { x, 5, NUM_FP32 }, &m, { e, 5, NUM_BF16 }, &sum, 1, 5 };
    assert_int_equal(vector_exp_sum(&a), NPU_OK);
    float s = 0.0f;
    for (int c = 0; c < 5; c++) {
        float v = expf(x[c] - m);
        assert_int_equal(e[c], num_fp32_to_bf16(v));
        s = s + v;
    }
    assert_true(sum == s);
}

/* Online softmax over columns [0, split) and [split, cols), combined, = full softmax. */
static void test_online_softmax_two_halves(void **state)
{
    (void)state;
    const uint32_t rows = 3, cols = 41, split = 19, n2 = cols - split;
    struct mat x = mat_new(rows, cols, 0, NUM_FP32, 15.0f);
    set(&x, 1, 30, 40.0f); /* row 1: the max sits in the second half */
    struct mat full = mat_new(rows, cols, 0, NUM_FP32, 1.0f), p = mat_clone(&full);
    struct vector_softmax_args s = { vin(&x), vout(&full), rows, cols };
    assert_int_equal(vector_softmax(&s), NPU_OK);
    float m1[3], m2[3], m[3], l1[3], l2[3], l[3];
    float *xs = x.p, *ps = p.p;
    struct vector_in h1 = { xs, cols, NUM_FP32 }, h2 = { xs + split, cols, NUM_FP32 };
    struct vector_out p1 = { ps, cols, NUM_FP32 }, p2 = { ps + split, cols, NUM_FP32 };
    assert_int_equal(vector_row_max(&(struct vector_row_max_args){ h1, rows, split, m1 }), 0);
    assert_int_equal(vector_row_max(&(struct vector_row_max_args){ h2, rows, n2, m2 }), 0);
    assert_int_equal(vector_exp_sum(&(struct vector_exp_sum_args){ h1, m1, p1, l1, rows,
                                                                   split }), 0);
    assert_int_equal(vector_exp_sum(&(struct vector_exp_sum_args){ h2, m2, p2, l2, rows,
                                                                   n2 }), 0);
    struct vector_eltwise_args mx = { VECTOR_OP_MAX, { m1, 1, NUM_FP32 }, { m2, 1, NUM_FP32 },
                                      { m, 1, NUM_FP32 }, rows, 1, 0 };
    assert_int_equal(vector_eltwise(&mx), NPU_OK);
    struct vector_in p1i = { ps, cols, NUM_FP32 }, p2i = { ps + split, cols, NUM_FP32 };
    struct vector_rescale_args r1 = { p1i, m1, m, p1, rows, split };
    struct vector_rescale_args r2 = { p2i, m2, m, p2, rows, n2 };
    assert_int_equal(vector_rescale(&r1), NPU_OK);
    assert_int_equal(vector_rescale(&r2), NPU_OK);
    struct vector_rescale_args rl1 = { { l1, 1, NUM_FP32 }, m1, m, { l1, 1, NUM_FP32 }, rows, 1 };
    struct vector_rescale_args rl2 = { { l2, 1, NUM_FP32 }, m2, m, { l2, 1, NUM_FP32 }, rows, 1 };
    assert_int_equal(vector_rescale(&rl1), NPU_OK);
    assert_int_equal(vector_rescale(&rl2), NPU_OK);
    struct vector_eltwise_args add = { VECTOR_OP_ADD, { l1, 1, NUM_FP32 }, { l2, 1, NUM_FP32 },
                                       { l, 1, NUM_FP32 }, rows, 1, 0 };
    assert_int_equal(vector_eltwise(&add), NPU_OK);
    struct vector_row_div_args d = { { ps, cols, NUM_FP32 }, l, vout(&p), rows, cols };
    assert_int_equal(vector_row_div(&d), NPU_OK);
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t c = 0; c < cols; c++)
            assert_close(at(&p, r, c), at(&full, r, c), "online softmax");
    free(x.p), free(full.p), free(p.p);
}

static void test_softmax_edges(void **state)
{
    (void)state;
    float x[4] = { -INFINITY, -INFINITY, NAN, 2.0f }, m[2], o[4];
    struct vector_row_max_args rm = { { x, 2, NUM_FP32 }, 2, 2, m };
    assert_int_equal(vector_row_max(&rm), NPU_OK);
    assert_true(isinf(m[0]) && m[0] < 0);
    assert_true(isnan(m[1])); /* NaN first, then a number: stays NaN */
    float one = 3.0f; /* 1 element: softmax = 1 */
    struct vector_softmax_args s = { { &one, 1, NUM_FP32 }, { o, 1, NUM_FP32 }, 1, 1 };
    assert_int_equal(vector_softmax(&s), NPU_OK);
    assert_true(o[0] == 1.0f);
    /* Rescale with m_old == m_new == -inf: factor 1, not NaN. */
    float acc[2] = { 0.0f, 5.0f }, mo[1] = { -INFINITY }, mn[1] = { -INFINITY };
    struct vector_rescale_args r = { { acc, 2, NUM_FP32 }, mo, mn, { acc, 2, NUM_FP32 }, 1, 2 };
    assert_int_equal(vector_rescale(&r), NPU_OK);
    assert_true(acc[0] == 0.0f && acc[1] == 5.0f);
    mn[0] = 1.0f, mo[0] = 0.0f;
    assert_int_equal(vector_rescale(&r), NPU_OK);
    assert_true(acc[1] == 5.0f * expf(-1.0f));
}

/* ---- RoPE ---- */

static void rope_ref(const float *x, float *out, uint32_t d, float theta, uint32_t p, bool half)
{
    for (uint32_t i = 0; i < d / 2; i++) {
        float inv_freq = 1.0f / powf(theta, (float)(2 * i) / (float)d);
        float ang = (float)p * inv_freq, cs = cosf(ang), sn = sinf(ang);
        if (half) { /* HF: q * cos + rotate_half(q) * sin, rotate_half = (-x2, x1) */
            out[i] = x[i] * cs + (-x[i + d / 2]) * sn;
            out[i + d / 2] = x[i + d / 2] * cs + x[i] * sn;
        } else {    /* Meta: (x0 + i x1) * (cos + i sin) */
            out[2 * i] = x[2 * i] * cs - x[2 * i + 1] * sn;
            out[2 * i + 1] = x[2 * i] * sn + x[2 * i + 1] * cs;
        }
    }
}

static void test_rope(void **state)
{
    (void)state;
    enum { ROWS = 6, D = 10 };
    float x[ROWS * D], o[ROWS * D], ref[D];
    for (int i = 0; i < ROWS * D; i++)
        x[i] = rnd_value(3.0f);
    uint32_t positions[3] = { 7, 0, 123456 };
    for (int pairing = 0; pairing < 2; pairing++) {
        struct vector_rope_args a = { { x, D, NUM_FP32 }, { o, D, NUM_FP32 }, ROWS, D,
                                      500000.0f, 40, 2, NULL, (enum vector_rope_pairing)pairing };
        assert_int_equal(vector_rope(&a), NPU_OK);
        for (uint32_t r = 0; r < ROWS; r++) { /* rows 2r, 2r+1 share position 40 + r / 2 */
            rope_ref(x + r * D, ref, D, 500000.0f, 40 + r / 2, pairing == VECTOR_ROPE_HALF);
            assert_memory_equal(o + r * D, ref, sizeof(ref));
        }
        a.positions = positions, a.theta = 10000.0f;
        assert_int_equal(vector_rope(&a), NPU_OK);
        for (uint32_t r = 0; r < ROWS; r++) {
            rope_ref(x + r * D, ref, D, 10000.0f, positions[r / 2], pairing == VECTOR_ROPE_HALF);
            assert_memory_equal(o + r * D, ref, sizeof(ref));
            if (r / 2 == 1) /* position 0 is the identity */
                assert_memory_equal(o + r * D, x + r * D, sizeof(ref));
            double n0 = 0, n1 = 0; /* a rotation keeps the norm */
            for (int c = 0; c < D; c++) {
                n0 += (double)x[r * D + c] * x[r * D + c];
                n1 += (double)o[r * D + c] * o[r * D + c];
            }
            assert_close(n1, n0, "rope norm");
        }
    }
}

static void test_rope_bf16_in_place_and_errors(void **state)
{
    (void)state;
    uint16_t xb[8], ob[8];
    float xf[8], of[8];
    for (int i = 0; i < 8; i++)
        xb[i] = num_fp32_to_bf16(rnd_value(2.0f)), xf[i] = num_bf16_to_fp32(xb[i]);
    rope_ref(xf, of, 8, 10000.0f, 3, false);
    struct vector_rope_args a = { { xb, 8, NUM_BF16 }, { xb, 8, NUM_BF16 }, 1, 8, 10000.0f, 3, 1,
                                  NULL, VECTOR_ROPE_INTERLEAVED };
    assert_int_equal(vector_rope(&a), NPU_OK); /* in place */
    for (int i = 0; i < 8; i++)
        ob[i] = num_fp32_to_bf16(of[i]);
    assert_memory_equal(xb, ob, sizeof(xb));
    struct vector_rope_args b = a;
    b.cols = 7, b.x.ld = b.out.ld = 7;
    assert_int_equal(vector_rope(&b), NPU_ERR_INVAL); /* odd dimension */
    b = a, b.theta = 0.0f;
    assert_int_equal(vector_rope(&b), NPU_ERR_INVAL);
    b.theta = INFINITY;
    assert_int_equal(vector_rope(&b), NPU_ERR_INVAL);
    b = a, b.rows_per_pos = 0;
    assert_int_equal(vector_rope(&b), NPU_ERR_INVAL);
    b = a, b.pairing = (enum vector_rope_pairing)2;
    assert_int_equal(vector_rope(&b), NPU_ERR_INVAL);
    b = a, b.positions = xb + 1; /* positions inside the output */
    assert_int_equal(vector_rope(&b), NPU_ERR_INVAL);
}

/* ---- top-k ---- */

static bool ref_before(float a, uint32_t ia, float b, uint32_t ib)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && (!isnan(b) || ia < ib);
    return a > b || (a == b && ia < ib);
}

/* Selection of the k best by repeated scans: independent of the engine's insertion. */
static void ref_topk(const float *row, uint32_t cols, uint32_t k, float *v, uint32_t *idx)
{
    bool used[256] = { false };
    for (uint32_t j = 0; j < k; j++) {
        uint32_t best = UINT32_MAX;
        for (uint32_t c = 0; c < cols; c++)
            if (!used[c] && (best == UINT32_MAX || ref_before(row[c], c, row[best], best)))
                best = c;
        used[best] = true, v[j] = row[best], idx[j] = best;
    }
}

static void test_topk_random_with_ties(void **state)
{
    (void)state;
    static const uint32_t cases[][3] = { { 1, 1, 1 }, { 2, 5, 5 }, { 3, 100, 64 },
                                         { 4, 37, 7 }, { 1, 256, 1 } };
    for (size_t ci = 0; ci < 5; ci++) {
        uint32_t rows = cases[ci][0], cols = cases[ci][1], k = cases[ci][2];
        float x[4 * 256], v[4 * 64], rv[64];
        uint32_t idx[4 * 70], ri[64];
        for (uint32_t i = 0; i < rows * cols; i++) /* few distinct values: many ties */
            x[i] = (float)(int)(rnd() % 9) - 4.0f;
        struct vector_topk_args a = { { x, cols, NUM_FP32 }, rows, cols, k, { v, k, NUM_FP32 },
                                      idx, k + 3 };
        assert_int_equal(vector_topk(&a), NPU_OK);
        for (uint32_t r = 0; r < rows; r++) {
            ref_topk(x + r * cols, cols, k, rv, ri);
            assert_memory_equal(v + r * k, rv, k * sizeof(float));
            assert_memory_equal(idx + r * (k + 3), ri, k * sizeof(uint32_t));
        }
        uint32_t am[4];
        struct vector_argmax_args g = { { x, cols, NUM_FP32 }, rows, cols, am };
        assert_int_equal(vector_argmax(&g), NPU_OK);
        for (uint32_t r = 0; r < rows; r++)
            assert_int_equal(am[r], idx[r * (k + 3)]);
    }
}

static void test_topk_order_rules(void **state)
{
    (void)state;
    float x[8] = { 1.0f, -0.0f, 3.0f, NAN, 0.0f, 3.0f, INFINITY, NAN }, v[6];
    uint32_t idx[6];
    struct vector_topk_args a = { { x, 8, NUM_FP32 }, 1, 8, 6, { v, 6, NUM_FP32 }, idx, 6 };
    assert_int_equal(vector_topk(&a), NPU_OK);
    static const uint32_t want[6] = { 3, 7, 6, 2, 5, 0 }; /* NaNs, inf, 3 (col 2 first), 1 */
    assert_memory_equal(idx, want, sizeof(want));
    a.k = 8, a.values.p = NULL, a.ld_indices = 8; /* indices only */
    uint32_t all[8];
    a.indices = all;
    assert_int_equal(vector_topk(&a), NPU_OK);
    assert_int_equal(all[6], 1); /* -0 and +0 tie: column 1 before column 4 */
    assert_int_equal(all[7], 4);
    uint16_t xb[4] = { 0x3f80, 0x4000, 0x4000, 0xbf80 }, vb[2]; /* bf16 1, 2, 2, -1 */
    uint32_t ib[2];
    struct vector_topk_args b = { { xb, 4, NUM_BF16 }, 1, 4, 2, { vb, 2, NUM_BF16 }, ib, 2 };
    assert_int_equal(vector_topk(&b), NPU_OK);
    assert_true(vb[0] == 0x4000 && vb[1] == 0x4000 && ib[0] == 1 && ib[1] == 2);
    b.k = 0;
    assert_int_equal(vector_topk(&b), NPU_ERR_INVAL);
    b.k = 5; /* > cols */
    assert_int_equal(vector_topk(&b), NPU_ERR_INVAL);
    float big[100] = { 0 };
    uint32_t bi[100];
    struct vector_topk_args c = { { big, 100, NUM_FP32 }, 1, 100, 65, { NULL, 0, 0 }, bi, 65 };
    assert_int_equal(vector_topk(&c), NPU_ERR_INVAL); /* k > 64 */
    c.k = 64, c.ld_indices = 63;
    assert_int_equal(vector_topk(&c), NPU_ERR_INVAL); /* ld_indices < k */
    c.ld_indices = 64, c.values = (struct vector_out){ bi + 10, 64, NUM_FP32 };
    assert_int_equal(vector_topk(&c), NPU_ERR_INVAL); /* values overlap indices */
}

/* ---- argument and overlap errors ---- */

static void test_invalid_arguments(void **state)
{
    (void)state;
    float x[32], y[32], o[32];
    for (int i = 0; i < 32; i++)
        x[i] = y[i] = 1.0f, o[i] = 9.0f;
    const struct vector_eltwise_args ok = { VECTOR_OP_ADD, { x, 8, NUM_FP32 },
                                            { y, 8, NUM_FP32 }, { o, 8, NUM_FP32 }, 2, 8, 0 };
    struct vector_eltwise_args a = ok;
    assert_int_equal(vector_eltwise(&a), NPU_OK);
    for (int i = 0; i < 16; i++)
        o[i] = 9.0f;
#define BAD(stmt)                                          \
    do {                                                   \
        a = ok;                                            \
        stmt;                                              \
        assert_int_equal(vector_eltwise(&a), NPU_ERR_INVAL); \
    } while (0)
    BAD(a.op = VECTOR_OP_RMSNORM);
    BAD(a.op = (enum vector_op)-1);
    BAD(a.rows = 0);
    BAD(a.cols = 0);
    BAD(a.x.ld = 7);
    BAD(a.out.ld = 7);
    BAD(a.y.p = NULL);
    BAD(a.out.p = NULL);
    BAD(a.x.type = (enum num_type)2);
    BAD(a.out.p = x + 1);                      /* shifted alias of x */
    BAD(a.out.p = x; a.out.type = NUM_BF16);   /* same bytes, other type */
    BAD(a.out.p = x; a.out.ld = 9);            /* same start, other stride */
    BAD(a.out.p = y + 15);                     /* last element of y */
    for (int i = 0; i < 32; i++)
        assert_true(o[i] == 9.0f && x[i] == 1.0f && y[i] == 1.0f);
    a = ok, a.op = VECTOR_OP_EXP, a.y.p = NULL; /* unary: y not looked at */
    assert_int_equal(vector_eltwise(&a), NPU_OK);
    a = ok, a.out.p = y; /* exact alias of y */
    assert_int_equal(vector_eltwise(&a), NPU_OK);
    assert_true(y[0] == 2.0f && y[15] == 2.0f && y[16] == 1.0f);
#undef BAD
    float m[2];
    struct vector_row_max_args rm = { { x, 8, NUM_FP32 }, 2, 8, x + 3 };
    assert_int_equal(vector_row_max(&rm), NPU_ERR_INVAL); /* stats inside the input */
    rm.max = NULL;
    assert_int_equal(vector_row_max(&rm), NPU_ERR_INVAL);
    rm.max = m;
    assert_int_equal(vector_row_max(&rm), NPU_OK);
    struct vector_exp_sum_args es = { { x, 8, NUM_FP32 }, m, { o, 8, NUM_FP32 }, o + 15, 2, 8 };
    assert_int_equal(vector_exp_sum(&es), NPU_ERR_INVAL); /* sum inside out */
}

/* ---- attention mask ---- */

/* Reference: is column c of row r visible (64-bit, as the spec reads)? */
static bool ref_visible(int32_t pos, uint32_t k, float window, uint32_t r, uint32_t c)
{
    int64_t hi = (int64_t)pos + r / (k ? k : 1);
    if ((int64_t)c > hi)
        return false;
    return !(window > 0.0f) || (double)c >= (double)hi - (double)window + 1.0;
}

/* Runs MASK on a random padded x into a random padded out; checks every element against
 * the reference and that the padding is untouched. Returns the number of visible elements. */
static uint32_t check_mask(uint32_t rows, uint32_t cols, int32_t pos, uint32_t k, float window,
                           enum num_type tx, enum num_type to)
{
    struct mat x = mat_new(rows, cols, 3, tx, 4.0f), out = mat_new(rows, cols, 2, to, 1.0f);
    struct mat ref = mat_clone(&out);
    uint32_t visible = 0;
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t c = 0; c < cols; c++) {
            bool v = ref_visible(pos, k, window, r, c);
            visible += v;
            set(&ref, r, c, v ? at(&x, r, c) : NPU_VECTOR_MASKED);
        }
    struct vector_mask_args a = { vin(&x), vout(&out), rows, cols, window, pos, k };
    assert_int_equal(vector_mask(&a), NPU_OK);
    assert_same(&out, &ref);
    if (tx == to) { /* in place gives the same */
        struct mat xi = mat_clone(&x);
        a.x = vin(&xi), a.out = vout(&xi);
        assert_int_equal(vector_mask(&a), NPU_OK);
        for (uint32_t r = 0; r < rows; r++)
            for (uint32_t c = 0; c < cols; c++)
                assert_int_equal(num_fp32_to_bits(at(&xi, r, c)),
                                 num_fp32_to_bits(at(&ref, r, c)));
        free(xi.p);
    }
    free(x.p), free(out.p), free(ref.p);
    return visible;
}

static void test_mask_causal(void **state)
{
    (void)state;
    /* k = 1, a square causal block: row r sees columns 0..r (the lower triangle). */
    assert_int_equal(check_mask(5, 5, 0, 1, 0.0f, NUM_FP32, NUM_FP32), 15);
    /* k = 0 means 1; s1 = 2: row r sees 0..r+2 of 6 columns: 3+4+5+6+6 */
    assert_int_equal(check_mask(5, 6, 2, 0, 0.0f, NUM_FP32, NUM_FP32), 24);
    /* k = 2 (two heads per token): rows 2j, 2j+1 see 0..1+j of 4 columns: 2,2,3,3,4,4 */
    assert_int_equal(check_mask(6, 4, 1, 2, 0.0f, NUM_FP32, NUM_FP32), 18);
    /* hand check of one row: x = 1..4, s1 = 1, row 0 sees columns 0, 1 */
    float x[4] = { 1, 2, 3, 4 }, o[4];
    struct vector_mask_args a = { { x, 4, NUM_FP32 }, { o, 4, NUM_FP32 }, 1, 4, 0.0f, 1, 1 };
    assert_int_equal(vector_mask(&a), NPU_OK);
    assert_true(o[0] == 1.0f && o[1] == 2.0f && o[2] == -1.0e30f && o[3] == -1.0e30f);
    assert_true(isfinite(NPU_VECTOR_MASKED) && NPU_VECTOR_MASKED == -1.0e30f);
    for (int t = 0; t < 20; t++) /* random shapes, k, positions around the block */
        check_mask(1 + rnd() % 9, 1 + rnd() % 40, (int32_t)(rnd() % 60) - 20, rnd() % 4,
                   0.0f, NUM_FP32, NUM_FP32);
}

static void test_mask_negative_start(void **state)
{
    (void)state;
    /* s1 = -3, k = 2: hi(r) = -3 + r / 2 < 0 for rows 0..5 (whole rows masked), 0 for 6, 7 */
    const uint32_t rows = 8, cols = 4;
    struct mat x = mat_new(rows, cols, 0, NUM_FP32, 4.0f), out = mat_clone(&x);
    struct vector_mask_args a = { vin(&x), vout(&out), rows, cols, 0.0f, -3, 2 };
    assert_int_equal(vector_mask(&a), NPU_OK);
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t c = 0; c < cols; c++) {
            bool v = r >= 6 && c == 0;
            assert_true(at(&out, r, c) == (v ? at(&x, r, c) : NPU_VECTOR_MASKED));
        }
    /* extremes: no overflow in hi(r) = s1 + r / k */
    assert_int_equal(check_mask(3, 5, INT32_MIN, 1, 0.0f, NUM_FP32, NUM_FP32), 0);
    assert_int_equal(check_mask(3, 5, INT32_MAX, 1, 0.0f, NUM_FP32, NUM_FP32), 15);
    assert_int_equal(check_mask(3, 5, INT32_MAX, 1, 2.0f, NUM_FP32, NUM_FP32), 0);
    free(x.p), free(out.p);
}

static void test_mask_window(void **state)
{
    (void)state;
    /* W = 3, s1 = 5: row r sees columns 3+r .. 5+r of 10 */
    const uint32_t rows = 4, cols = 10;
    struct mat x = mat_new(rows, cols, 1, NUM_FP32, 4.0f), out = mat_new(rows, cols, 1,
                                                                         NUM_FP32, 1.0f);
    struct vector_mask_args a = { vin(&x), vout(&out), rows, cols, 3.0f, 5, 1 };
    assert_int_equal(vector_mask(&a), NPU_OK);
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t c = 0; c < cols; c++) {
            bool v = c >= 3 + r && c <= 5 + r;
            assert_true(at(&out, r, c) == (v ? at(&x, r, c) : NPU_VECTOR_MASKED));
        }
    assert_int_equal(check_mask(rows, cols, 5, 1, 3.0f, NUM_FP32, NUM_FP32), 12);
    /* W = 1: the diagonal only; k = 2 with a window; a window longer than any block */
    assert_int_equal(check_mask(6, 6, 0, 1, 1.0f, NUM_FP32, NUM_FP32), 6);
    assert_int_equal(check_mask(6, 8, 4, 2, 3.0f, NUM_FP32, NUM_FP32), 18);
    assert_int_equal(check_mask(4, 4, 0, 1, 1.0e20f, NUM_FP32, NUM_FP32), 10);
    /* a window entirely left of the block: every column masked */
    assert_int_equal(check_mask(2, 5, -4, 1, 3.0f, NUM_FP32, NUM_FP32), 0);
    for (int t = 0; t < 20; t++)
        check_mask(1 + rnd() % 9, 1 + rnd() % 40, (int32_t)(rnd() % 60) - 20, rnd() % 4,
                   (float)(rnd() % 12), NUM_FP32, NUM_FP32);
    free(x.p), free(out.p);
}

static void test_mask_bf16_and_in_place(void **state)
{
    (void)state;
    /* every fp32/bf16 in/out combination; in place where the types agree (check_mask) */
    for (int tx = NUM_FP32; tx <= NUM_BF16; tx++)
        for (int to = NUM_FP32; to <= NUM_BF16; to++) {
            check_mask(5, 7, 1, 1, 0.0f, (enum num_type)tx, (enum num_type)to);
            check_mask(6, 9, 2, 2, 2.0f, (enum num_type)tx, (enum num_type)to);
        }
    /* bf16 in place: masked elements hold bf16(-1e30), still finite */
    uint16_t xb[6];
    for (int i = 0; i < 6; i++)
        xb[i] = num_fp32_to_bf16((float)(i + 1));
    struct vector_mask_args a = { { xb, 3, NUM_BF16 }, { xb, 3, NUM_BF16 }, 2, 3, 0.0f, 0, 1 };
    assert_int_equal(vector_mask(&a), NPU_OK);
    uint16_t m = num_fp32_to_bf16(NPU_VECTOR_MASKED);
    assert_true(isfinite(num_bf16_to_fp32(m)) && num_bf16_to_fp32(m) < -9.0e29f);
    const uint16_t want[6] = { num_fp32_to_bf16(1.0f), m, m, num_fp32_to_bf16(4.0f),
                               num_fp32_to_bf16(5.0f), m };
    assert_memory_equal(xb, want, sizeof(xb));
}

/* FILL writes the value into every element of a strided region (in the out's type), over
   NaN and infinities too (it never reads them), and leaves the gaps between rows alone. */
static void test_fill(void **state)
{
    (void)state;
    float o[3 * 5];
    for (int i = 0; i < 15; i++)
        o[i] = i % 2 ? NAN : INFINITY;
    struct vector_fill_args a = { { o, 5, NUM_FP32 }, 3, 4, 0.0f };
    assert_int_equal(vector_fill(&a), NPU_OK);
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 5; c++)
            if (c < 4)
                assert_true(o[r * 5 + c] == 0.0f && !signbit(o[r * 5 + c]));
            else
                assert_false(isfinite(o[r * 5 + c]));
    uint16_t b[4] = { 0 };
    struct vector_fill_args f = { { b, 2, NUM_BF16 }, 2, 2, 1.00390625f };
    assert_int_equal(vector_fill(&f), NPU_OK);
    for (int i = 0; i < 4; i++)
        assert_int_equal(b[i], num_fp32_to_bf16(1.00390625f));
    f.rows = 0;
    assert_int_equal(vector_fill(&f), NPU_ERR_INVAL);
    f.rows = 2, f.out.ld = 1; /* rows would overlap */
    assert_int_equal(vector_fill(&f), NPU_ERR_INVAL);
}

static void test_mask_errors(void **state)
{
    (void)state;
    float x[8], o[8];
    for (int i = 0; i < 8; i++)
        x[i] = 1.0f, o[i] = 9.0f;
    const struct vector_mask_args ok = { { x, 4, NUM_FP32 }, { o, 4, NUM_FP32 }, 2, 4, 2.0f, 1,
                                         1 };
    struct vector_mask_args a = ok;
    static const float bad_w[] = { -1.0f, 2.5f, 0.5f, -0.5f, INFINITY, -INFINITY, NAN };
    for (size_t i = 0; i < sizeof(bad_w) / sizeof(bad_w[0]); i++) {
        a = ok, a.window = bad_w[i];
        assert_int_equal(vector_mask(&a), NPU_ERR_INVAL);
    }
    a = ok, a.rows = 0;
    assert_int_equal(vector_mask(&a), NPU_ERR_INVAL);
    a = ok, a.out.p = x + 1; /* shifted alias of x */
    assert_int_equal(vector_mask(&a), NPU_ERR_INVAL);
    a = ok, a.x.p = NULL;
    assert_int_equal(vector_mask(&a), NPU_ERR_INVAL);
    for (int i = 0; i < 8; i++) /* nothing written */
        assert_true(o[i] == 9.0f && x[i] == 1.0f);
    a = ok, a.window = -0.0f; /* -0 is a whole number: no window */
    assert_int_equal(vector_mask(&a), NPU_OK);
}

/* The hazard the finite masked value is for: an online softmax whose first block is fully
 * masked for a row stays finite and equals the softmax of the visible columns. */
static void test_mask_online_softmax_fully_masked_block(void **state)
{
    (void)state;
    enum { COLS = 8, SPLIT = 4 };
    float x[COLS], xm[COLS], p[COLS], full[COLS], m1, m2, m, l1, l2;
    for (int c = 0; c < COLS; c++)
        x[c] = rnd_value(3.0f);
    /* the query is at key position 5 (s1 = 5 for the whole row): block 1 (keys 0..3) is
     * masked by a window of 2 (keys 4, 5 visible), block 2 (keys 4..7) by causality. */
    struct vector_mask_args mk = { { x, COLS, NUM_FP32 }, { xm, COLS, NUM_FP32 }, 1, SPLIT,
                                   2.0f, 5, 1 };
    assert_int_equal(vector_mask(&mk), NPU_OK);
    mk.x.p = x + SPLIT, mk.out.p = xm + SPLIT, mk.pos = 5 - SPLIT;
    assert_int_equal(vector_mask(&mk), NPU_OK);
    for (int c = 0; c < SPLIT; c++)
        assert_true(xm[c] == NPU_VECTOR_MASKED);
    struct vector_in h1 = { xm, COLS, NUM_FP32 }, h2 = { xm + SPLIT, COLS, NUM_FP32 };
    struct vector_out p1 = { p, COLS, NUM_FP32 }, p2 = { p + SPLIT, COLS, NUM_FP32 };
    assert_int_equal(vector_row_max(&(struct vector_row_max_args){ h1, 1, SPLIT, &m1 }), 0);
    assert_int_equal(vector_exp_sum(&(struct vector_exp_sum_args){ h1, &m1, p1, &l1, 1,
                                                                   SPLIT }), 0);
    assert_true(isfinite(m1) && isfinite(l1));
    assert_int_equal(vector_row_max(&(struct vector_row_max_args){ h2, 1, SPLIT, &m2 }), 0);
    assert_int_equal(vector_exp_sum(&(struct vector_exp_sum_args){ h2, &m2, p2, &l2, 1,
                                                                   SPLIT }), 0);
    m = m1 > m2 ? m1 : m2;
    struct vector_in p1i = { p, COLS, NUM_FP32 }, p2i = { p + SPLIT, COLS, NUM_FP32 };
    assert_int_equal(vector_rescale(&(struct vector_rescale_args){ p1i, &m1, &m, p1, 1,
                                                                   SPLIT }), 0);
    assert_int_equal(vector_rescale(&(struct vector_rescale_args){ p2i, &m2, &m, p2, 1,
                                                                   SPLIT }), 0);
    float f1 = m1 == m ? 1.0f : expf(m1 - m), f2 = m2 == m ? 1.0f : expf(m2 - m);
    float l = l1 * f1 + l2 * f2;
    /* reference: softmax over the two visible keys 4, 5 */
    struct vector_softmax_args s = { { x + 4, 2, NUM_FP32 }, { full, 2, NUM_FP32 }, 1, 2 };
    assert_int_equal(vector_softmax(&s), NPU_OK);
    for (int c = 0; c < COLS; c++) {
        float want = c == 4 || c == 5 ? full[c - 4] : 0.0f;
        assert_true(isfinite(p[c] / l));
        assert_close(p[c] / l, want, "masked online softmax");
    }
}

/* ---- timing ---- */

static void test_timing(void **state)
{
    (void)state;
    const struct vector_engine_cfg cfg = { 16, 2, 10 }; /* 32 ALU ops per cycle */
    assert_int_equal(vector_engine_cfg_check(&cfg), NPU_OK);
    assert_int_equal(vector_op_cycles(&cfg, VECTOR_OP_ADD, 100, 1), 4 + 10);
    assert_int_equal(vector_op_cycles(&cfg, VECTOR_OP_ADD, 64, 4), 2 + 10);
    assert_int_equal(vector_op_cycles(&cfg, VECTOR_OP_EXP, 1, 1), 1 + 10);
    /* SOFTMAX, 2 rows: alu 18 in 3 passes of 2 rows (3 cycles a row's pass); the second
       row covers 3 of each barrier's 10-cycle drain */
    assert_int_equal(vector_op_cycles(&cfg, VECTOR_OP_SOFTMAX, 64, 2), 18 + 10 + 2 * 7);
    assert_int_equal(vector_op_cycles(&cfg, VECTOR_OP_RMSNORM, 4096, 1), 512 + 20);
    assert_int_equal(vector_op_cycles(&cfg, VECTOR_OP_SWIGLU, 4096, 8), 1024 + 10);
    /* TOPK, 4 rows: 31.25 cycles a row's pass, the drain is covered */
    assert_int_equal(vector_op_cycles(&cfg, VECTOR_OP_TOPK, 1000, 4), 250 + 10);
    /* many short rows (ROW_MAX over 512 rows of 8): one fill for the whole op, not one per
       row (a pipelined unit streams the rows) */
    assert_int_equal(vector_op_cycles(&cfg, VECTOR_OP_ROW_MAX, 4096, 512), 128 + 10);
    /* two rows of RMSNORM: alu 8, 2 cycles a row's pass cover 2 of the drain's 10 */
    assert_int_equal(vector_op_cycles(&cfg, VECTOR_OP_RMSNORM, 64, 2), 8 + 10 + 8);
    /* SOFTMAX, 3 rows, 64 elements: alu 18, cover 2 * 18 / 9 = 4, bubble 2 * 6 */
    assert_int_equal(vector_op_cycles(&cfg, VECTOR_OP_SOFTMAX, 64, 3), 18 + 10 + 12);
    assert_int_equal(vector_op_cycles(&cfg, VECTOR_OP_ROPE, 33, 3), 8 + 10); /* 231 / 32 */
    /* MASK costs what ADD does: 1 ALU op per element, one pipeline fill per op */
    assert_int_equal(vector_op_cycles(&cfg, VECTOR_OP_MASK, 100, 1), 4 + 10);
    assert_int_equal(vector_op_cycles(&cfg, VECTOR_OP_MASK, 64, 4), 2 + 10);
    assert_int_equal(vector_op_alu_ops(VECTOR_OP_MASK), vector_op_alu_ops(VECTOR_OP_ADD));
    static const uint32_t ops[VECTOR_OP_COUNT] = { 1, 1, 1, 1, 4, 7, 8, 1, 4, 1, 6, 1, 2, 9,
                                                   7, 8, 2, 1, 1 };
    for (int op = 0; op < VECTOR_OP_COUNT; op++) {
        assert_int_equal(vector_op_alu_ops((enum vector_op)op), ops[op]);
        uint64_t prev = 0, first = vector_op_cycles(&cfg, (enum vector_op)op, 1, 3);
        for (uint64_t e = 1; e < 300; e += 1) { /* rises with elements, not with rows */
            uint64_t c1 = vector_op_cycles(&cfg, (enum vector_op)op, e, 3);
            assert_true(c1 >= prev && c1 > 0);
            assert_true(vector_op_cycles(&cfg, (enum vector_op)op, e, 4) <= c1);
            prev = c1;
        }
        assert_true(prev > first);
    }
    assert_int_equal(vector_op_alu_ops(VECTOR_OP_COUNT), 0);
    assert_int_equal(vector_op_cycles(&cfg, VECTOR_OP_COUNT, 10, 1), 0);
    assert_int_equal(vector_op_cycles(&cfg, VECTOR_OP_ADD, 0, 1), 0);
    const struct vector_engine_cfg widest = { 4096, 256, 1024 };
    assert_int_equal(vector_engine_cfg_check(&widest), NPU_OK);
    assert_int_equal(vector_op_cycles(&widest, VECTOR_OP_SOFTMAX, 1u << 20, 1),
                     9 + 1024 * 3); /* 9 * 2^20 / 2^20 */
    const struct vector_engine_cfg no[3] = { { 1, 257, 0 }, { 4097, 1, 0 }, { 1, 1, 1025 } };
    for (int i = 0; i < 3; i++)
        assert_int_equal(vector_engine_cfg_check(&no[i]), NPU_ERR_INVAL);
    const struct vector_engine_cfg one = { 1, 1, 0 }, bad = { 0, 1, 0 };
    assert_int_equal(vector_op_cycles(&one, VECTOR_OP_MUL, 5, 5), 5);
    assert_int_equal(vector_engine_cfg_check(&bad), NPU_ERR_INVAL);
    assert_int_equal(vector_op_cycles(&bad, VECTOR_OP_MUL, 5, 5), 0);
    assert_true(vector_op_cycles(&one, VECTOR_OP_SOFTMAX, UINT64_MAX, 1) == UINT64_MAX);
    assert_true(vector_op_cycles(&one, VECTOR_OP_ADD, UINT64_MAX, 1) == UINT64_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_eltwise_all_ops_and_types),
        cmocka_unit_test(test_eltwise_special_values),
        cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_softmax_is_composition),
        cmocka_unit_test(test_exp_sum_bf16_sum_unrounded),
        cmocka_unit_test(test_online_softmax_two_halves),
        cmocka_unit_test(test_softmax_edges),
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_rope_bf16_in_place_and_errors),
        cmocka_unit_test(test_topk_random_with_ties),
        cmocka_unit_test(test_topk_order_rules),
        cmocka_unit_test(test_mask_causal),
        cmocka_unit_test(test_mask_negative_start),
        cmocka_unit_test(test_mask_window),
        cmocka_unit_test(test_mask_bf16_and_in_place),
        cmocka_unit_test(test_mask_errors),
        cmocka_unit_test(test_fill),
        cmocka_unit_test(test_mask_online_softmax_fully_masked_block),
        cmocka_unit_test(test_invalid_arguments),
        cmocka_unit_test(test_timing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
