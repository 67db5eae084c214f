/* SPDX-License-Identifier: MIT */
/* The vector engine: row ops in fp32 and the lane timing. See vector_engine.h. */
#include "vector_engine.h"

#include <float.h>
#include <math.h>

NUM_FP_CONTRACT_OFF

/* ---- operand checks: every operand is a rows x cols region (a vector is rows x 1) ---- */

struct region {
    const void *p;
    uint32_t rows, cols, ld;
    enum num_type type; /* uint32 indices count as NUM_FP32 (4 bytes) */
};

static struct region reg_in(const struct vector_in *x, uint32_t rows, uint32_t cols)
{
    return (struct region){ x->p, rows, cols, x->ld, x->type };
}

static struct region reg_out(const struct vector_out *o, uint32_t rows, uint32_t cols)
{
    return (struct region){ o->p, rows, cols, o->ld, o->type };
}

static struct region reg_vec(const void *p, uint32_t n) /* fp32 or uint32 [n] */
{
    return (struct region){ p, n, 1, 1, NUM_FP32 };
}

static bool reg_valid(const struct region *r)
{
    return r->p && r->rows && r->cols && r->ld >= r->cols && num_type_valid(r->type);
}

static uint64_t reg_bytes(const struct region *r)
{
    return num_span_bytes(r->rows, r->cols, r->ld, num_type_bytes(r->type));
}

static bool reg_same(const struct region *a, const struct region *b)
{
    return a->p == b->p && a->rows == b->rows && a->cols == b->cols && a->ld == b->ld &&
           a->type == b->type;
}

static bool reg_overlap(const struct region *a, const struct region *b)
{
    return num_ranges_overlap(a->p, reg_bytes(a), b->p, reg_bytes(b));
}

/* All valid; outputs overlap neither inputs (except an exact alias if alias_ok) nor each other. */
static int regions_check(const struct region *in, size_t nin, const struct region *out,
                         size_t nout, bool alias_ok)
{
    for (size_t i = 0; i < nin; i++)
        if (!reg_valid(&in[i]))
            return NPU_ERR_INVAL;
    for (size_t o = 0; o < nout; o++) {
        if (!reg_valid(&out[o]))
            return NPU_ERR_INVAL;
        for (size_t i = 0; i < nin; i++)
            if (reg_overlap(&out[o], &in[i]) && !(alias_ok && reg_same(&out[o], &in[i])))
                return NPU_ERR_INVAL;
        for (size_t p = 0; p < o; p++)
            if (reg_overlap(&out[o], &out[p]))
                return NPU_ERR_INVAL;
    }
    return NPU_OK;
}

static float in_at(const struct vector_in *x, uint32_t r, uint32_t c)
{
    return num_load(x->p, (size_t)r * x->ld + c, x->type);
}

static void out_at(const struct vector_out *o, uint32_t r, uint32_t c, float v)
{
    num_store(o->p, (size_t)r * o->ld + c, o->type, v);
}

static float vec_at(const void *p, uint32_t r)
{
    return num_load(p, r, NUM_FP32);
}

/* ---- elementwise ---- */

static float silu(float x)
{
    return x / (1.0f + expf(-x));
}

static float eltwise_one(enum vector_op op, float x, float y, float s)
{
    switch (op) {
    case VECTOR_OP_ADD: return x + y;
    case VECTOR_OP_MUL: return x * y;
    case VECTOR_OP_MAX: return (x > y || isnan(x)) ? x : y;
    case VECTOR_OP_SCALE: return x * s;
    case VECTOR_OP_EXP: return expf(x);
    case VECTOR_OP_SILU: return silu(x);
    case VECTOR_OP_SWIGLU: return silu(x) * y;
    default: return x; /* CAST */
    }
}

int vector_eltwise(const struct vector_eltwise_args *a)
{
    if ((unsigned)a->op > VECTOR_OP_CAST)
        return NPU_ERR_INVAL;
    bool binary = a->op == VECTOR_OP_ADD || a->op == VECTOR_OP_MUL || a->op == VECTOR_OP_MAX ||
                  a->op == VECTOR_OP_SWIGLU;
    struct region in[2] = { reg_in(&a->x, a->rows, a->cols), reg_in(&a->y, a->rows, a->cols) };
    struct region out = reg_out(&a->out, a->rows, a->cols);
    int rc = regions_check(in, binary ? 2 : 1, &out, 1, true);
    if (rc)
        return rc;
    for (uint32_t r = 0; r < a->rows; r++)
        for (uint32_t c = 0; c < a->cols; c++) {
            float y = binary ? in_at(&a->y, r, c) : 0.0f;
            out_at(&a->out, r, c, eltwise_one(a->op, in_at(&a->x, r, c), y, a->scalar));
        }
    return NPU_OK;
}

/* ---- normalisation ---- */

int vector_rmsnorm(const struct vector_rmsnorm_args *a)
{
    struct region in[2] = { reg_in(&a->x, a->rows, a->cols),
                            { a->w.p, 1, a->cols, a->cols, a->w.type } };
    struct region out = reg_out(&a->out, a->rows, a->cols);
    int rc = regions_check(in, 2, &out, 1, true);
    if (rc || !(a->eps >= 0.0f && isfinite(a->eps)))
        return rc ? rc : NPU_ERR_INVAL;
    for (uint32_t r = 0; r < a->rows; r++) {
        float ss = 0.0f;
        for (uint32_t c = 0; c < a->cols; c++) {
            float v = in_at(&a->x, r, c);
            ss = ss + v * v;
        }
        float inv = 1.0f / sqrtf(ss / (float)a->cols + a->eps);
        for (uint32_t c = 0; c < a->cols; c++)
            out_at(&a->out, r, c, (in_at(&a->x, r, c) * inv) * num_load(a->w.p, c, a->w.type));
    }
    return NPU_OK;
}

/* ---- softmax pieces ---- */

static float row_max(const struct vector_in *x, uint32_t r, uint32_t cols)
{
    float m = -INFINITY;
    for (uint32_t c = 0; c < cols; c++) {
        float v = in_at(x, r, c);
        if (v > m || isnan(v))
            m = v;
        if (isnan(m))
            break;
    }
    return m;
}

int vector_row_max(const struct vector_row_max_args *a)
{
    struct region in = reg_in(&a->x, a->rows, a->cols), out = reg_vec(a->max, a->rows);
    int rc = regions_check(&in, 1, &out, 1, false);
    if (rc)
        return rc;
    for (uint32_t r = 0; r < a->rows; r++)
        num_store(a->max, r, NUM_FP32, row_max(&a->x, r, a->cols));
    return NPU_OK;
}

/* out[r][c] = expf(x - m) (if out), returns their fp32 sum in increasing c. */
static float row_exp_sum(const struct vector_in *x, uint32_t r, uint32_t cols, float m,
                         const struct vector_out *out)
{
    float s = 0.0f;
    for (uint32_t c = 0; c < cols; c++) {
        float e = expf(in_at(x, r, c) - m);
        if (out)
            out_at(out, r, c, e);
        s = s + e;
    }
    return s;
}

int vector_exp_sum(const struct vector_exp_sum_args *a)
{
    struct region in[2] = { reg_in(&a->x, a->rows, a->cols), reg_vec(a->max, a->rows) };
    struct region out[2] = { reg_out(&a->out, a->rows, a->cols), reg_vec(a->sum, a->rows) };
    int rc = regions_check(in, 2, out, 2, true);
    if (rc)
        return rc;
    for (uint32_t r = 0; r < a->rows; r++) {
        float s = row_exp_sum(&a->x, r, a->cols, vec_at(a->max, r), &a->out);
        num_store(a->sum, r, NUM_FP32, s);
    }
    return NPU_OK;
}

int vector_rescale(const struct vector_rescale_args *a)
{
    struct region in[3] = { reg_in(&a->x, a->rows, a->cols), reg_vec(a->m_old, a->rows),
                            reg_vec(a->m_new, a->rows) };
    struct region out = reg_out(&a->out, a->rows, a->cols);
    int rc = regions_check(in, 3, &out, 1, true);
    if (rc)
        return rc;
    for (uint32_t r = 0; r < a->rows; r++) {
        float mo = vec_at(a->m_old, r), mn = vec_at(a->m_new, r);
        float f = mo == mn ? 1.0f : expf(mo - mn);
        for (uint32_t c = 0; c < a->cols; c++)
            out_at(&a->out, r, c, in_at(&a->x, r, c) * f);
    }
    return NPU_OK;
}

int vector_row_div(const struct vector_row_div_args *a)
{
    struct region in[2] = { reg_in(&a->x, a->rows, a->cols), reg_vec(a->div, a->rows) };
    struct region out = reg_out(&a->out, a->rows, a->cols);
    int rc = regions_check(in, 2, &out, 1, true);
    if (rc)
        return rc;
    for (uint32_t r = 0; r < a->rows; r++) {
        float d = vec_at(a->div, r);
        for (uint32_t c = 0; c < a->cols; c++)
            out_at(&a->out, r, c, in_at(&a->x, r, c) / d);
    }
    return NPU_OK;
}

int vector_softmax(const struct vector_softmax_args *a)
{
    struct region in = reg_in(&a->x, a->rows, a->cols);
    struct region out = reg_out(&a->out, a->rows, a->cols);
    int rc = regions_check(&in, 1, &out, 1, true);
    if (rc)
        return rc;
    for (uint32_t r = 0; r < a->rows; r++) {
        float m = row_max(&a->x, r, a->cols);
        float s = row_exp_sum(&a->x, r, a->cols, m, NULL);
        for (uint32_t c = 0; c < a->cols; c++) /* recomputes the same expf values */
            out_at(&a->out, r, c, expf(in_at(&a->x, r, c) - m) / s);
    }
    return NPU_OK;
}

/* ---- RoPE ---- */

static void rope_row(const struct vector_rope_args *a, uint32_t r)
{
    uint32_t pi = r / a->rows_per_pos, half = a->cols / 2;
    uint64_t p = a->positions ? num_load_u32(a->positions, pi) : (uint64_t)a->pos + pi;
    for (uint32_t i = 0; i < half; i++) {
        float inv_freq = 1.0f / powf(a->theta, (float)(2 * i) / (float)a->cols);
        float ang = (float)p * inv_freq, cs = cosf(ang), sn = sinf(ang);
        uint32_t c0 = a->pairing == VECTOR_ROPE_HALF ? i : 2 * i;
        uint32_t c1 = a->pairing == VECTOR_ROPE_HALF ? i + half : 2 * i + 1;
        float x0 = in_at(&a->x, r, c0), x1 = in_at(&a->x, r, c1);
        out_at(&a->out, r, c0, x0 * cs - x1 * sn);
        out_at(&a->out, r, c1, x0 * sn + x1 * cs);
    }
}

int vector_rope(const struct vector_rope_args *a)
{
    if (a->cols % 2 != 0 || a->rows_per_pos == 0 || !(a->theta > 0.0f) ||
        !isfinite(a->theta) || (a->pairing != VECTOR_ROPE_INTERLEAVED &&
                                a->pairing != VECTOR_ROPE_HALF))
        return NPU_ERR_INVAL;
    uint32_t npos = a->rows / a->rows_per_pos + (a->rows % a->rows_per_pos != 0);
    struct region in[2] = { reg_in(&a->x, a->rows, a->cols), reg_vec(a->positions, npos) };
    struct region out = reg_out(&a->out, a->rows, a->cols);
    int rc = regions_check(in, a->positions ? 2 : 1, &out, 1, true);
    if (rc)
        return rc;
    for (uint32_t r = 0; r < a->rows; r++)
        rope_row(a, r);
    return NPU_OK;
}

/* ---- top-k ---- */

/* True when (a at column ia) ranks before (b at column ib). */
static bool topk_before(float a, uint32_t ia, float b, uint32_t ib)
{
    bool na = isnan(a), nb = isnan(b);
    if (na || nb)
        return na && (!nb || ia < ib);
    return a > b || (a == b && ia < ib);
}

static void topk_row(const struct vector_topk_args *a, uint32_t r, float *vals, uint32_t *idx)
{
    uint32_t n = 0;
    for (uint32_t c = 0; c < a->cols; c++) {
        float v = in_at(&a->x, r, c);
        if (n == a->k && !topk_before(v, c, vals[n - 1], idx[n - 1]))
            continue;
        uint32_t pos = n < a->k ? n++ : n - 1; /* full: the last entry drops out */
        for (; pos > 0 && topk_before(v, c, vals[pos - 1], idx[pos - 1]); pos--) {
            vals[pos] = vals[pos - 1];
            idx[pos] = idx[pos - 1];
        }
        vals[pos] = v;
        idx[pos] = c;
    }
}

int vector_topk(const struct vector_topk_args *a)
{
    if (a->k < 1 || a->k > VECTOR_TOPK_MAX || a->k > a->cols)
        return NPU_ERR_INVAL;
    struct region in = reg_in(&a->x, a->rows, a->cols);
    struct region out[2] = { { a->indices, a->rows, a->k, a->ld_indices, NUM_FP32 },
                             reg_out(&a->values, a->rows, a->k) };
    int rc = regions_check(&in, 1, out, a->values.p ? 2 : 1, false);
    if (rc)
        return rc;
    float vals[VECTOR_TOPK_MAX];
    uint32_t idx[VECTOR_TOPK_MAX];
    for (uint32_t r = 0; r < a->rows; r++) {
        topk_row(a, r, vals, idx);
        for (uint32_t j = 0; j < a->k; j++) {
            num_store_u32(a->indices, (size_t)r * a->ld_indices + j, idx[j]);
            if (a->values.p)
                out_at(&a->values, r, j, vals[j]);
        }
    }
    return NPU_OK;
}

int vector_argmax(const struct vector_argmax_args *a)
{
    struct vector_topk_args t = { .x = a->x, .rows = a->rows, .cols = a->cols, .k = 1,
                                  .indices = a->indices, .ld_indices = 1 };
    return vector_topk(&t);
}

/* ---- attention mask ---- */

int vector_mask(const struct vector_mask_args *a)
{
    float w = a->window;
    if (!(w >= 0.0f) || !isfinite(w) || floorf(w) != w)
        return NPU_ERR_INVAL;
    struct region in = reg_in(&a->x, a->rows, a->cols);
    struct region out = reg_out(&a->out, a->rows, a->cols);
    int rc = regions_check(&in, 1, &out, 1, true);
    if (rc)
        return rc;
    uint32_t k = a->rows_per_pos ? a->rows_per_pos : 1;
    /* hi - c + 1 < 2^31 + 2^32 + 1 < 2^33: a longer window never binds (and fits int64) */
    int64_t win = w >= 0x1p33f ? INT64_C(1) << 33 : (int64_t)w;
    for (uint32_t r = 0; r < a->rows; r++) {
        int64_t hi = (int64_t)a->pos + r / k, lo = win > 0 ? hi - win + 1 : INT64_MIN;
        for (uint32_t c = 0; c < a->cols; c++) {
            bool visible = (int64_t)c >= lo && (int64_t)c <= hi;
            out_at(&a->out, r, c, visible ? in_at(&a->x, r, c) : NPU_VECTOR_MASKED);
        }
    }
    return NPU_OK;
}

int vector_fill(const struct vector_fill_args *a)
{
    struct region out = reg_out(&a->out, a->rows, a->cols);
    int rc = regions_check(NULL, 0, &out, 1, true);
    if (rc)
        return rc;
    for (uint32_t r = 0; r < a->rows; r++)
        for (uint32_t c = 0; c < a->cols; c++)
            out_at(&a->out, r, c, a->value);
    return NPU_OK;
}

/* ---- timing ---- */

static const struct {
    uint8_t ops, barriers;
} op_cost[VECTOR_OP_COUNT] = {
    [VECTOR_OP_ADD] = { 1, 0 },     [VECTOR_OP_MUL] = { 1, 0 },     [VECTOR_OP_MAX] = { 1, 0 },
    [VECTOR_OP_SCALE] = { 1, 0 },   [VECTOR_OP_EXP] = { 4, 0 },     [VECTOR_OP_SILU] = { 7, 0 },
    [VECTOR_OP_SWIGLU] = { 8, 0 },  [VECTOR_OP_CAST] = { 1, 0 },    [VECTOR_OP_RMSNORM] = { 4, 1 },
    [VECTOR_OP_ROW_MAX] = { 1, 1 }, [VECTOR_OP_EXP_SUM] = { 6, 1 }, [VECTOR_OP_RESCALE] = { 1, 1 },
    [VECTOR_OP_ROW_DIV] = { 2, 0 }, [VECTOR_OP_SOFTMAX] = { 9, 2 }, [VECTOR_OP_ROPE] = { 7, 0 },
    [VECTOR_OP_TOPK] = { 8, 1 },    [VECTOR_OP_ARGMAX] = { 2, 1 },  [VECTOR_OP_MASK] = { 1, 0 },
    [VECTOR_OP_FILL] = { 1, 0 },
};

int vector_engine_cfg_check(const struct vector_engine_cfg *cfg)
{
    if (cfg->lanes < 1 || cfg->lanes > 4096 || cfg->alus_per_lane < 1 ||
        cfg->alus_per_lane > 256 || cfg->pipeline_depth > 1024)
        return NPU_ERR_INVAL;
    return NPU_OK;
}

uint32_t vector_op_alu_ops(enum vector_op op)
{
    return (unsigned)op < VECTOR_OP_COUNT ? op_cost[op].ops : 0;
}

uint64_t vector_op_cycles(const struct vector_engine_cfg *cfg, enum vector_op op,
                          uint64_t elements, uint32_t rows)
{
    if (vector_engine_cfg_check(cfg) || (unsigned)op >= VECTOR_OP_COUNT || elements == 0)
        return 0;
    uint64_t width = (uint64_t)cfg->lanes * cfg->alus_per_lane;
    uint64_t ops = op_cost[op].ops;
    /* ceil(elements * ops / width) = q * ops + ceil(rem * ops / width), q = elements / width */
    uint64_t q = elements / width, rem = elements % width;
    if (q > UINT64_MAX / ops - 1)
        return UINT64_MAX;
    uint64_t alu = q * ops + (rem * ops + width - 1) / width; /* rem * ops < 2^20 * 9 */
    /* One fill per operation; a row-wide reduction's next pass waits only for the rows
       already in flight: its bubble is what the other rows' issue time does not cover,
       in exact fractions of a cycle (so the time never falls as elements grow). */
    const uint64_t b = op_cost[op].barriers, p = cfg->pipeline_depth;
    const uint64_t r = rows ? rows : 1, slots = (1 + b) * r;  /* slots < 2^35 */
    uint64_t pipe = p;
    if (b && p) {
        const uint64_t need = p * slots;                      /* < 2^45 */
        if (r == 1 || alu < (need + r - 2) / (r - 1)) {       /* the cover falls short */
            uint64_t gap = need - (r - 1) * alu;              /* (r - 1) alu < need */
            pipe += (b * gap + slots - 1) / slots;            /* b gap < 2^47 */
        }
    }
    return alu > UINT64_MAX - pipe ? UINT64_MAX : alu + pipe;
}
