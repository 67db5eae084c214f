/* SPDX-License-Identifier: MIT */
/*
 * Numeric helpers shared by the engines (matrix_engine, vector_engine): the two element types
 * the engines read and write, conversions between them, and unaligned element access.
 *
 * bf16 is the upper 16 bits of an IEEE-754 binary32 (1 sign, 8 exponent, 7 fraction bits).
 * - bf16 -> fp32 is exact (the low 16 bits become zero).
 * - fp32 -> bf16 rounds to nearest, ties to even, on the bit pattern; inf stays inf, finite
 *   values above the largest bf16 round to inf, denormals are kept (no flush to zero), the
 *   sign of zero is kept, and a NaN stays a NaN: the sign and the top 7 payload bits are kept
 *   and the quiet bit (bit 6 of the bf16) is set, so a signalling NaN whose payload lives only
 *   in the low bits never turns into inf.
 *
 * Element access goes through memcpy: an element pointer into the emulated SRAM needs no
 * alignment. Elements are stored in host byte order, which must be little-endian like the
 * guest's (checked at compile time in the engines).
 *
 * Arithmetic is IEEE binary32 with each operation rounded (FLT_EVAL_METHOD 0, no fused
 * multiply-add): every file doing engine arithmetic, and every host reference that must match
 * it bit for bit, starts with NUM_FP_CONTRACT_OFF at file scope, because GCC in its GNU modes
 * otherwise contracts a * b + c into an fma on hosts that have one (aarch64, x86 with -mfma).
 *
 * Not modelled: other formats (fp16, fp8, int8), rounding modes other than nearest-even,
 * floating-point exception flags.
 */
#ifndef NPU_NUMERIC_H
#define NPU_NUMERIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <float.h>

/* What the engines' arithmetic relies on (checked wherever this header is used). */
#if FLT_EVAL_METHOD != 0
#error "the engines need fp32 arithmetic without excess precision (FLT_EVAL_METHOD 0)"
#endif
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the engines read guest (little-endian) data in host byte order"
#endif

#if defined(__clang__)
#define NUM_FP_CONTRACT_OFF _Pragma("STDC FP_CONTRACT OFF")
#elif defined(__GNUC__)
#define NUM_FP_CONTRACT_OFF _Pragma("GCC optimize(\"fp-contract=off\")")
#else
#define NUM_FP_CONTRACT_OFF
#endif

/* Element type of an operand in memory. Computation is always fp32. */
enum num_type {
    NUM_FP32 = 0, /* 4 bytes, IEEE binary32 */
    NUM_BF16 = 1, /* 2 bytes, upper half of a binary32 */
};
#define NUM_TYPE_COUNT 2u

static inline bool num_type_valid(enum num_type t)
{
    return (unsigned)t < NUM_TYPE_COUNT;
}

/* Bytes per element: 4 (fp32) or 2 (bf16). */
static inline uint32_t num_type_bytes(enum num_type t)
{
    return t == NUM_BF16 ? 2u : 4u;
}

static inline uint32_t num_fp32_to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static inline float num_fp32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* bf16 bit pattern -> fp32 value (exact). */
static inline float num_bf16_to_fp32(uint16_t h)
{
    return num_fp32_from_bits((uint32_t)h << 16);
}

/* fp32 value -> bf16 bit pattern, round to nearest even; NaN stays (quiet) NaN. */
static inline uint16_t num_fp32_to_bf16(float f)
{
    uint32_t u = num_fp32_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u); /* cannot wrap: the largest non-NaN is 0xff800000 */
    return (uint16_t)(u >> 16);
}

/* fp32 -> fp32 rounded through bf16 (the value a bf16 store keeps). */
static inline float num_round_bf16(float f)
{
    return num_bf16_to_fp32(num_fp32_to_bf16(f));
}

static inline bool num_bf16_is_nan(uint16_t h)
{
    return (h & 0x7fffu) > 0x7f80u;
}

/* Element i of an array of type t at base (any alignment), as fp32. */
static inline float num_load(const void *base, size_t i, enum num_type t)
{
    if (t == NUM_BF16) {
        uint16_t h;
        memcpy(&h, (const unsigned char *)base + 2 * i, sizeof(h));
        return num_bf16_to_fp32(h);
    }
    float f;
    memcpy(&f, (const unsigned char *)base + 4 * i, sizeof(f));
    return f;
}

/* Stores v as element i of an array of type t at base (bf16: rounded to nearest even). */
static inline void num_store(void *base, size_t i, enum num_type t, float v)
{
    if (t == NUM_BF16) {
        uint16_t h = num_fp32_to_bf16(v);
        memcpy((unsigned char *)base + 2 * i, &h, sizeof(h));
        return;
    }
    memcpy((unsigned char *)base + 4 * i, &v, sizeof(v));
}

static inline uint32_t num_load_u32(const void *base, size_t i)
{
    uint32_t u;
    memcpy(&u, (const unsigned char *)base + 4 * i, sizeof(u));
    return u;
}

static inline void num_store_u32(void *base, size_t i, uint32_t u)
{
    memcpy((unsigned char *)base + 4 * i, &u, sizeof(u));
}

/*
 * Bytes spanned by a row-major rows x cols matrix with a row stride of ld elements of
 * elem_bytes each: ((rows - 1) * ld + cols) * elem_bytes, 0 if rows or cols is 0. The
 * element count always fits 64 bits; the byte count saturates at UINT64_MAX (no SRAM is
 * that large, so a saturated span always fails the caller's bounds check).
 */
static inline uint64_t num_span_bytes(uint32_t rows, uint32_t cols, uint32_t ld,
                                      uint32_t elem_bytes)
{
    if (rows == 0 || cols == 0)
        return 0;
    uint64_t elems = (uint64_t)(rows - 1) * ld + cols;
    if (elem_bytes != 0 && elems > UINT64_MAX / elem_bytes)
        return UINT64_MAX;
    return elems * elem_bytes;
}

/* True when the byte ranges [a, a + alen) and [b, b + blen) share a byte. */
static inline bool num_ranges_overlap(const void *a, uint64_t alen, const void *b,
                                      uint64_t blen)
{
    uintptr_t pa = (uintptr_t)a, pb = (uintptr_t)b;
    if (alen == 0 || blen == 0)
        return false;
    return pa < pb ? pb - pa < alen : pa - pb < blen;
}

#endif
