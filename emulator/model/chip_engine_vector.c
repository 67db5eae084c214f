/* SPDX-License-Identifier: MIT */
/*
 * Vector-engine descriptors: which fields each op uses (the operand table of
 * docs/engines.md), the checks at submit (every operand inside the core's SRAM; an output
 * either disjoint from every input or exactly one of them), the timing
 * (vector_op_cycles()) and the arithmetic at completion (vector_engine.c).
 *
 * Operand roles: a = x (rows x cols, lda, type dtypes byte 0); b = y (same shape, ldb, byte
 * 1), w (1 x cols), or fp32[rows] statistics, or uint32 positions (ROPE); c = out (rows x
 * cols or rows x k, ldc, byte 2); d = fp32[rows] statistics, uint32[rows] indices or uint32
 * rows x k indices (ldd).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "chip_engines_internal.h"
#include "vector_engine.h"

enum role { NONE, MAT, ROW_W, ROWS_F32, ROWS_U32, TOPK_IDX, POSITIONS, TOPK_VAL };

struct vop {
    enum vector_op op;
    enum role b, c, d;     /* a is always x (MAT) */
};

static const struct vop vops[] = {
    [NPU_VECTOR_OP_ADD] = { VECTOR_OP_ADD, MAT, MAT, NONE },
    [NPU_VECTOR_OP_MUL] = { VECTOR_OP_MUL, MAT, MAT, NONE },
    [NPU_VECTOR_OP_MAX] = { VECTOR_OP_MAX, MAT, MAT, NONE },
    [NPU_VECTOR_OP_SCALE] = { VECTOR_OP_SCALE, NONE, MAT, NONE },
    [NPU_VECTOR_OP_EXP] = { VECTOR_OP_EXP, NONE, MAT, NONE },
    [NPU_VECTOR_OP_SILU] = { VECTOR_OP_SILU, NONE, MAT, NONE },
    [NPU_VECTOR_OP_SWIGLU] = { VECTOR_OP_SWIGLU, MAT, MAT, NONE },
    [NPU_VECTOR_OP_CAST] = { VECTOR_OP_CAST, NONE, MAT, NONE },
    [NPU_VECTOR_OP_RMSNORM] = { VECTOR_OP_RMSNORM, ROW_W, MAT, NONE },
    [NPU_VECTOR_OP_ROW_MAX] = { VECTOR_OP_ROW_MAX, NONE, NONE, ROWS_F32 },
    [NPU_VECTOR_OP_EXP_SUM] = { VECTOR_OP_EXP_SUM, ROWS_F32, MAT, ROWS_F32 },
    [NPU_VECTOR_OP_RESCALE] = { VECTOR_OP_RESCALE, ROWS_F32, MAT, ROWS_F32 },
    [NPU_VECTOR_OP_ROW_DIV] = { VECTOR_OP_ROW_DIV, ROWS_F32, MAT, NONE },
    [NPU_VECTOR_OP_SOFTMAX] = { VECTOR_OP_SOFTMAX, NONE, MAT, NONE },
    [NPU_VECTOR_OP_ROPE] = { VECTOR_OP_ROPE, POSITIONS, MAT, NONE },
    [NPU_VECTOR_OP_TOPK] = { VECTOR_OP_TOPK, NONE, TOPK_VAL, TOPK_IDX },
    [NPU_VECTOR_OP_ARGMAX] = { VECTOR_OP_ARGMAX, NONE, NONE, ROWS_U32 },
    [NPU_VECTOR_OP_MASK] = { VECTOR_OP_MASK, NONE, MAT, NONE },
    [NPU_VECTOR_OP_FILL] = { VECTOR_OP_FILL, NONE, MAT, NONE },
};
#define NVOPS (sizeof(vops) / sizeof(vops[0]))

struct span {
    uint64_t addr, len;
    bool output;
};

static uint32_t type_bytes(const struct npu_desc *d, unsigned byte)
{
    return ((d->dtypes >> (8 * byte)) & 0xff) == NPU_DTYPE_BF16 ? 2 : 4;
}

/* Bytes an operand of `role` spans; 0 if the shape is impossible. */
static uint64_t role_bytes(const struct npu_desc *d, enum role role, uint32_t ld, unsigned byte)
{
    uint64_t rows = d->m, cols = d->n, ext = 0;
    switch (role) {
    case MAT:
        return chip_mem_extent(rows, cols * type_bytes(d, byte), (uint64_t)ld * type_bytes(d, byte),
                               &ext) && ld >= cols ? ext : 0;
    case ROW_W:
        return cols * type_bytes(d, byte);
    case ROWS_F32:
    case ROWS_U32:
        return rows * 4;
    case POSITIONS:
        return d->k ? (rows + d->k - 1) / d->k * 4 : 0;
    case TOPK_IDX:
        return chip_mem_extent(rows, (uint64_t)d->k * 4, (uint64_t)ld * 4, &ext) && ld >= d->k ? ext : 0;
    case TOPK_VAL:
        return chip_mem_extent(rows, (uint64_t)d->k * type_bytes(d, 2),
                               (uint64_t)ld * type_bytes(d, 2), &ext) && ld >= d->k ? ext : 0;
    default:
        return 0;
    }
}

/* MASK: s0 must hold a finite whole number >= 0 (the window). */
static bool mask_window_ok(const struct npu_desc *d)
{
    float w;
    memcpy(&w, &d->s0, 4);
    return w >= 0.0f && isfinite(w) && floorf(w) == w;
}

static int fail(char *err, size_t errlen, int rc, uint32_t core, const char *what)
{
    snprintf(err, errlen, "core %u: %s", core, what);
    return rc;
}

/* Collects the operand spans of d; false if one is outside the core's SRAM. */
static bool collect(const struct chip_engines *e, uint32_t core, const struct npu_desc *d,
                    const struct vop *v, struct span *s, unsigned *n)
{
    const struct { uint64_t addr; enum role role; uint32_t ld; unsigned byte; bool out; } ops[] = {
        { d->a, MAT, d->lda, 0, false },
        { d->b, v->b, d->ldb, 1, false },
        { d->c, v->c, d->ldc, 2, true },
        { d->d, v->d, d->ldd, 0, v->d != ROWS_F32 || v->op != VECTOR_OP_RESCALE },
    };
    *n = 0;
    for (unsigned i = 0; i < 4; i++) {
        if (ops[i].role == NONE || ((ops[i].role == POSITIONS || ops[i].role == TOPK_VAL) &&
                                    ops[i].addr == 0))
            continue; /* unused, or optional and absent */
        uint64_t len = role_bytes(d, ops[i].role, ops[i].ld, ops[i].byte);
        struct chip_mem_range r;
        if (!len || !chip_mem_locate(&e->mem, ops[i].addr, len, &r) ||
            r.kind != CHIP_MEM_SRAM || r.core != core)
            return false;
        s[(*n)++] = (struct span){ ops[i].addr, len, ops[i].out };
    }
    return true;
}

/* An output must be disjoint from every other operand, or be exactly one of the inputs. */
static bool overlaps_ok(const struct span *s, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        for (unsigned j = 0; j < n; j++) {
            if (i == j || !s[i].output)
                continue;
            bool disjoint = s[i].addr + s[i].len <= s[j].addr || s[j].addr + s[j].len <= s[i].addr;
            bool same = s[i].addr == s[j].addr && s[i].len == s[j].len && !s[j].output;
            if (!disjoint && !same)
                return false;
        }
    return true;
}

int chip_engine_vector_check(const struct chip_engines *e, uint32_t core,
                             const struct npu_desc *d, char *err, size_t errlen)
{
    struct span s[4];
    unsigned n;
    if (d->op >= NVOPS || d->op == 0)
        return fail(err, errlen, NPU_ERR_INVAL, core, "unknown vector op");
    const struct vop *v = &vops[d->op];
    if (!d->m || !d->n || (d->dtypes & 0xfefefefe) ||
        ((v->op == VECTOR_OP_TOPK) && (d->k < 1 || d->k > VECTOR_TOPK_MAX || d->k > d->n)) ||
        ((v->op == VECTOR_OP_ROPE) && (d->k < 1 || d->n % 2)))
        return fail(err, errlen, NPU_ERR_INVAL, core,
                    "vector shape, k or element types not valid for this op");
    if (v->op == VECTOR_OP_MASK && !mask_window_ok(d))
        return fail(err, errlen, NPU_ERR_INVAL, core,
                    "MASK window s0 is not a finite whole number >= 0");
    if (v->op == VECTOR_OP_FILL && (d->a != d->c || d->lda != d->ldc))
        return fail(err, errlen, NPU_ERR_INVAL, core,
                    "FILL: x must name the same buffer as out");
    if (!collect(e, core, d, v, s, &n))
        return fail(err, errlen, NPU_ERR_RANGE, core,
                    "a vector operand is outside this core's SRAM or its leading dimension "
                    "is too small");
    if (!overlaps_ok(s, n))
        return fail(err, errlen, NPU_ERR_INVAL, core,
                    "a vector output overlaps an operand it is not identical to");
    return NPU_OK;
}

uint64_t chip_engine_vector_alu_ops(const struct npu_desc *d)
{
    return (uint64_t)d->m * d->n * vector_op_alu_ops(vops[d->op].op);
}

uint64_t chip_engine_vector_bytes(const struct npu_desc *d)
{
    const struct vop *v = &vops[d->op];
    uint64_t elems = (uint64_t)d->m * d->n, total = elems * type_bytes(d, 0);
    if (v->op == VECTOR_OP_FILL) /* x is not read */
        total = 0;
    if (v->b == MAT)
        total += elems * type_bytes(d, 1);
    if (v->c == MAT)
        total += elems * type_bytes(d, 2);
    return total; /* row statistics and indices are small: not counted */
}

uint64_t chip_engine_vector_cycles(const struct chip_engines *e, uint32_t core,
                                   const struct npu_desc *d)
{
    const struct vector_engine_cfg cfg = {
        .lanes = chip_engines_core_sizes(e, core)->vec_lanes, .alus_per_lane = e->cfg.vec_alus_per_lane,
        .pipeline_depth = e->cfg.vec_pipeline_cycles,
    };
    uint64_t cycles = vector_op_cycles(&cfg, vops[d->op].op, (uint64_t)d->m * d->n, d->m);
    return cycles ? cycles : 1;
}

static void *host(const struct chip_engines *e, uint64_t addr)
{
    struct chip_mem_range r;
    return addr && chip_mem_locate(&e->mem, addr, 1, &r) ? r.host : NULL;
}

static enum num_type dtype_of(const struct npu_desc *d, unsigned byte)
{
    return type_bytes(d, byte) == 2 ? NUM_BF16 : NUM_FP32;
}

static int run_eltwise(const struct npu_desc *d, const struct vop *v, struct vector_in x,
                       struct vector_in y, struct vector_out out)
{
    float scalar;
    memcpy(&scalar, &d->s0, 4);
    const struct vector_eltwise_args a = { .op = v->op, .x = x, .y = y, .out = out,
                                           .rows = d->m, .cols = d->n, .scalar = scalar };
    return vector_eltwise(&a);
}

static int run_rowwise(const struct chip_engines *e, const struct npu_desc *d,
                       const struct vop *v, struct vector_in x, struct vector_out out)
{
    void *b = host(e, d->b), *dd = host(e, d->d);
    float s0;
    memcpy(&s0, &d->s0, 4);
    switch (v->op) {
    case VECTOR_OP_RMSNORM: {
        const struct vector_in w = { b, 0, dtype_of(d, 1) };
        return vector_rmsnorm(&(struct vector_rmsnorm_args){ x, w, out, d->m, d->n, s0 });
    }
    case VECTOR_OP_ROW_MAX:
        return vector_row_max(&(struct vector_row_max_args){ x, d->m, d->n, dd });
    case VECTOR_OP_EXP_SUM:
        return vector_exp_sum(&(struct vector_exp_sum_args){ x, b, out, dd, d->m, d->n });
    case VECTOR_OP_RESCALE:
        return vector_rescale(&(struct vector_rescale_args){ x, b, dd, out, d->m, d->n });
    case VECTOR_OP_ROW_DIV:
        return vector_row_div(&(struct vector_row_div_args){ x, b, out, d->m, d->n });
    case VECTOR_OP_SOFTMAX:
        return vector_softmax(&(struct vector_softmax_args){ x, out, d->m, d->n });
    case VECTOR_OP_ROPE:
        return vector_rope(&(struct vector_rope_args){
            x, out, d->m, d->n, s0, d->s1, d->k, b,
            (d->dtypes >> 24) ? VECTOR_ROPE_HALF : VECTOR_ROPE_INTERLEAVED });
    case VECTOR_OP_TOPK:
        return vector_topk(&(struct vector_topk_args){ x, d->m, d->n, d->k, out, dd, d->ldd });
    case VECTOR_OP_ARGMAX:
        return vector_argmax(&(struct vector_argmax_args){ x, d->m, d->n, dd });
    case VECTOR_OP_MASK:
        return vector_mask(&(struct vector_mask_args){ x, out, d->m, d->n, s0,
                                                       (int32_t)d->s1, d->k });
    case VECTOR_OP_FILL:
        return vector_fill(&(struct vector_fill_args){ out, d->m, d->n, s0 });
    default:
        return NPU_ERR_INVAL;
    }
}

int chip_engine_vector_run(const struct chip_engines *e, const struct npu_desc *d)
{
    const struct vop *v = &vops[d->op];
    const struct vector_in x = { host(e, d->a), d->lda, dtype_of(d, 0) };
    const struct vector_in y = { host(e, d->b), d->ldb, dtype_of(d, 1) };
    const struct vector_out out = { host(e, d->c), d->ldc, dtype_of(d, 2) };
    if (v->op <= VECTOR_OP_CAST)
        return run_eltwise(d, v, x, y, out);
    return run_rowwise(e, d, v, x, out);
}
