/* SPDX-License-Identifier: MIT */
/*
 * The per-core vector engine (design brief, section 4): L lanes of A ALUs each, working on
 * rows of fp32 or bf16 data. As for the matrix engine, two pure halves: the arithmetic of
 * each op on host pointers (functional mode; the QEMU glue validated the guest addresses,
 * with num_span_bytes() of each operand's shape) and vector_op_cycles() (both modes).
 *
 * Operands. A matrix operand is rows x cols, row-major, row stride `ld` elements (ld >= cols),
 * element type NUM_FP32 or NUM_BF16 chosen per operand, any alignment. Every value is
 * converted to fp32, computed in fp32 (each operation rounded, no fma) and rounded to the
 * output's type on store (bf16: nearest even). A cast is VECTOR_OP_CAST with different
 * input and output types. Per-row statistics (`max`, `sum`, `m_old`, `m_new`, `div`) are
 * fp32 vectors of `rows` contiguous elements; top-k/argmax indices are uint32.
 * In place: an output may be exactly one of the op's inputs (same pointer, shape, ld and
 * type); any other overlap between the spans (num_span_bytes, padding included) of an
 * output and an input or another output is NPU_ERR_INVAL. Every op returns NPU_OK or
 * NPU_ERR_INVAL (NULL pointer, rows or cols 0, ld < cols, bad type or op, op-specific
 * checks below); on error nothing is written.
 * Row loops run in increasing column order; that order is part of the contract.
 *
 * Not modelled: other activations (GELU, ...), LayerNorm, Gemma-style (1 + w) RMSNorm,
 * partial-rotary RoPE, RoPE scaling (YaRN, NTK), fp32 exception flags, and the engine's own
 * SRAM bandwidth (the timing is ALU-bound).
 */
#ifndef VECTOR_ENGINE_H
#define VECTOR_ENGINE_H

#include <stdint.h>

#include "npu_enums.h"
#include "npu_numeric.h"

enum vector_op {
    /* elementwise, vector_eltwise(); y only for ADD, MUL, MAX, SWIGLU */
    VECTOR_OP_ADD,     /* x + y */
    VECTOR_OP_MUL,     /* x * y */
    VECTOR_OP_MAX,     /* x > y ? x : y, NaN if either is NaN (torch.maximum) */
    VECTOR_OP_SCALE,   /* x * scalar */
    VECTOR_OP_EXP,     /* expf(x) */
    VECTOR_OP_SILU,    /* x / (1 + expf(-x)); silu(-inf) is NaN, as x * sigmoid(x) */
    VECTOR_OP_SWIGLU,  /* silu(x) * y: x = gate, y = up */
    VECTOR_OP_CAST,    /* x, rounded to out's type */
    /* row-wise */
    VECTOR_OP_RMSNORM, /* vector_rmsnorm() */
    VECTOR_OP_ROW_MAX, /* vector_row_max() */
    VECTOR_OP_EXP_SUM, /* vector_exp_sum() */
    VECTOR_OP_RESCALE, /* vector_rescale() */
    VECTOR_OP_ROW_DIV, /* vector_row_div() */
    VECTOR_OP_SOFTMAX, /* vector_softmax() */
    VECTOR_OP_ROPE,    /* vector_rope() */
    VECTOR_OP_TOPK,    /* vector_topk() */
    VECTOR_OP_ARGMAX,  /* vector_argmax() */
    VECTOR_OP_MASK,    /* vector_mask() */
    VECTOR_OP_FILL,    /* vector_fill() */
    VECTOR_OP_COUNT
};

struct vector_in {  /* rows x cols input: element [r][c] at p + (r * ld + c) * size */
    const void *p;
    uint32_t ld;
    enum num_type type;
};

struct vector_out { /* rows x cols output, same layout */
    void *p;
    uint32_t ld;
    enum num_type type;
};

/* out[r][c] = op(x[r][c], y[r][c]) for r < rows, c < cols. */
struct vector_eltwise_args {
    enum vector_op op; /* VECTOR_OP_ADD .. VECTOR_OP_CAST */
    struct vector_in x, y;
    struct vector_out out;
    uint32_t rows, cols;
    float scalar; /* SCALE */
};
int vector_eltwise(const struct vector_eltwise_args *a);

/*
 * RMSNorm, per row (llama): ss = sum_c x*x (c increasing, from +0); mean = ss / (float)cols;
 * inv = 1 / sqrtf(mean + eps); out[r][c] = (x[r][c] * inv) * w[c]. w is 1 x cols (ld
 * ignored). eps must be finite and >= 0.
 */
struct vector_rmsnorm_args {
    struct vector_in x, w;
    struct vector_out out;
    uint32_t rows, cols;
    float eps;
};
int vector_rmsnorm(const struct vector_rmsnorm_args *a);

/* max[r] = max_c x[r][c]; NaN if the row holds a NaN. max: fp32[rows]. */
struct vector_row_max_args {
    struct vector_in x;
    uint32_t rows, cols;
    void *max;
};
int vector_row_max(const struct vector_row_max_args *a);

/*
 * Online-softmax step: e = expf(x[r][c] - max[r]); out[r][c] = e; sum[r] = sum_c e of the
 * fp32 values before rounding to out's type (c increasing, from +0). max, sum: fp32[rows].
 */
struct vector_exp_sum_args {
    struct vector_in x;
    const void *max;
    struct vector_out out;
    void *sum;
    uint32_t rows, cols;
};
int vector_exp_sum(const struct vector_exp_sum_args *a);

/*
 * Rescale of an online-softmax accumulator: f = m_old[r] == m_new[r] ? 1 : expf(m_old[r] -
 * m_new[r]) (so -inf == -inf gives 1, not NaN); out[r][c] = x[r][c] * f. Usually in place
 * (out == x). m_old, m_new: fp32[rows]. Also rescales a running sum (cols = 1).
 */
struct vector_rescale_args {
    struct vector_in x;
    const void *m_old, *m_new;
    struct vector_out out;
    uint32_t rows, cols;
};
int vector_rescale(const struct vector_rescale_args *a);

/* out[r][c] = x[r][c] / div[r]: the final normalisation. div: fp32[rows]. */
struct vector_row_div_args {
    struct vector_in x;
    const void *div;
    struct vector_out out;
    uint32_t rows, cols;
};
int vector_row_div(const struct vector_row_div_args *a);

/*
 * Full softmax per row: m = row max, s = sum_c expf(x - m), out = expf(x - m) / s; bit for
 * bit vector_row_max + vector_exp_sum (fp32 out) + vector_row_div.
 */
struct vector_softmax_args {
    struct vector_in x;
    struct vector_out out;
    uint32_t rows, cols;
};
int vector_softmax(const struct vector_softmax_args *a);

/*
 * Rotary position embedding. cols = head dimension d, even. Row r has position
 *   p = positions ? positions[r / rows_per_pos] : pos + r / rows_per_pos  (64-bit sum)
 * (positions: uint32[ceil(rows / rows_per_pos)] or NULL; rows_per_pos >= 1, e.g. the number
 * of heads when the rows of one token's heads are adjacent). For i < d/2:
 *   inv_freq = 1 / powf(theta, (float)(2i) / (float)d); ang = (float)p * inv_freq;
 *   (x0, x1) = the pair; out0 = x0 * cosf(ang) - x1 * sinf(ang);
 *                        out1 = x0 * sinf(ang) + x1 * cosf(ang)
 * Pairs: VECTOR_ROPE_INTERLEAVED (2i, 2i+1), Meta's llama reference (complex view);
 * VECTOR_ROPE_HALF (i, i + d/2), HF transformers' rotate_half / GPT-NeoX.
 * theta must be finite and > 0.
 */
enum vector_rope_pairing {
    VECTOR_ROPE_INTERLEAVED = 0,
    VECTOR_ROPE_HALF = 1,
};
struct vector_rope_args {
    struct vector_in x;
    struct vector_out out;
    uint32_t rows, cols;
    float theta;
    uint32_t pos, rows_per_pos;
    const void *positions;
    enum vector_rope_pairing pairing;
};
int vector_rope(const struct vector_rope_args *a);

/*
 * Top-k per row, 1 <= k <= min(cols, VECTOR_TOPK_MAX): values[r][0..k) in descending order
 * and indices[r][0..k) (uint32, row stride ld_indices >= k) their columns. Equal values:
 * the lower column first (-0 equals +0); a NaN ranks above +inf (as torch.topk). values.p
 * may be NULL (indices only).
 */
#define VECTOR_TOPK_MAX 64u
struct vector_topk_args {
    struct vector_in x;
    uint32_t rows, cols, k;
    struct vector_out values;
    void *indices;
    uint32_t ld_indices;
};
int vector_topk(const struct vector_topk_args *a);

/* indices[r] = the top-1 column of row r (same order as top-k). indices: uint32[rows]. */
struct vector_argmax_args {
    struct vector_in x;
    uint32_t rows, cols;
    void *indices;
};
int vector_argmax(const struct vector_argmax_args *a);

/*
 * Attention mask over a block of key columns (causal, optionally a sliding window). Row r
 * sees columns lo(r) <= c <= hi(r), with (in 64-bit arithmetic)
 *   hi(r) = pos + r / rows_per_pos       (pos signed: negative masks whole rows;
 *                                          rows_per_pos 0 means 1)
 *   lo(r) = hi(r) - window + 1 if window > 0, else no lower limit.
 * out[r][c] = x[r][c] for a visible column, else NPU_VECTOR_MASKED, rounded to out's type.
 * window must be a finite whole number >= 0 (0: no window), else NPU_ERR_INVAL. In place
 * allowed (out == x).
 */
/*
 * Hazard: the masked value is a large finite negative, not -inf, on purpose. In an online
 * softmax, a block whose columns are all masked for a row then has a finite row max, and
 * EXP_SUM's exp(x - max) stays finite, where -inf would give exp(-inf - -inf) = NaN and
 * poison the running sum and accumulator. Once the row sees a real score, RESCALE's factor
 * exp(-1e30 - new max) is 0 and wipes the masked block's contribution. (A row that sees no
 * column at all ends up with a uniform average instead of NaN: not something to rely on.)
 * Must match NPU_VECTOR_MASKED in hal/include/npu/vector.h (the firmware's copy).
 */
#define NPU_VECTOR_MASKED (-1.0e30f)
struct vector_mask_args {
    struct vector_in x;
    struct vector_out out;
    uint32_t rows, cols;
    float window;          /* in positions; 0: no window */
    int32_t pos;           /* last visible column of row 0 */
    uint32_t rows_per_pos; /* 0 means 1 */
};
int vector_mask(const struct vector_mask_args *a);

/* out = value in every element (zeroing accumulators and partial sums). */
struct vector_fill_args {
    struct vector_out out;
    uint32_t rows, cols;
    float value;
};
int vector_fill(const struct vector_fill_args *a);

/* ---- timing ---- */

struct vector_engine_cfg {
    uint32_t lanes;          /* L, 1..4096 */
    uint32_t alus_per_lane;  /* A, 1..256 */
    uint32_t pipeline_depth; /* P cycles, 0..1024 */
};

/* NPU_OK or NPU_ERR_INVAL. */
int vector_engine_cfg_check(const struct vector_engine_cfg *cfg);

/*
 *   alu    = ceil(elements * ops[op] / (L * A))
 *   cover  = (rows - 1) * alu / ((1 + barriers[op]) * rows)   (other rows' issue time, exact)
 *   cycles = alu + P + ceil(barriers[op] * max(0, P - cover))
 * elements: of the main input (rows * cols; SWIGLU: of the output; RoPE: of x). The unit is
 * pipelined as a vector processor's lanes are: one start-up (the pipeline depth P) per
 * operation, then L * A ALU operations per cycle, rows streaming back to back (Hennessy and
 * Patterson, "Computer Architecture: A Quantitative Approach", 6th ed., section 4.2, vector
 * execution time = start-up + elements / lanes per convoy). A row-wide reduction whose result
 * a later pass of the same row needs (barriers) splits the op into passes; the next pass of a
 * row starts when that row's reduction leaves the pipeline, so the drain is hidden behind the
 * other rows' issue and costs only what they do not cover (the per-row scalar work, rsqrt or
 * exp of the factor, hides in it). ALU costs: add,
 * sub, mul, max, compare 1; divide 2; exp 4; sin, cos 4 each.
 *
 *   op        ops  barriers   breakdown
 *   ADD MUL MAX SCALE CAST  1  0
 *   EXP        4   0
 *   SILU       7   0          exp 4, add 1, divide 2
 *   SWIGLU     8   0          silu 7, mul 1
 *   RMSNORM    4   1          square 1, sum 1, * inv 1, * w 1
 *   ROW_MAX    1   1
 *   EXP_SUM    6   1          sub 1, exp 4, sum 1
 *   RESCALE    1   1          mul 1 (factor exp per row)
 *   ROW_DIV    2   0          divide 2
 *   SOFTMAX    9   2          max 1, sub 1, exp 4, sum 1, divide 2 (barriers: max, sum)
 *   ROPE       7   0          2 mul + 1 add per element, sin + cos per pair (8 / 2)
 *   TOPK       8   1          compare-and-insert into a k <= 64 list (log2 64 + 2)
 *   ARGMAX     2   1          compare 1, index select 1
 *   MASK       1   0          select 1 (the column bounds are per-row scalar work)
 *
 * Returns 0 for elements == 0, an invalid cfg or op. Saturates at UINT64_MAX.
 */
uint64_t vector_op_cycles(const struct vector_engine_cfg *cfg, enum vector_op op,
                          uint64_t elements, uint32_t rows);

/* ALU operations per element of an op (the table above; 0 for an invalid op). */
uint32_t vector_op_alu_ops(enum vector_op op);

#endif
