/* SPDX-License-Identifier: MIT */
/* The matrix engine: functional GEMM and the weight-stationary timing. See matrix_engine.h. */
#include "matrix_engine.h"

#include <float.h>
#include <stdlib.h>

NUM_FP_CONTRACT_OFF

/*
 * Blocking (host speed only; every element still sums k = 0..K-1 in order into one fp32
 * accumulator): C is computed in blocks of BLOCK_M rows x BLOCK_N columns held in fp32; for
 * each block, op(B) is converted BLOCK_K rows at a time into an fp32 panel and every row of
 * the block runs through those k in order. Host memory is a fixed-size work area (80 KiB),
 * whatever the shape.
 */
#define BLOCK_M 64u
#define BLOCK_N 64u
#define BLOCK_K 256u

struct gemm_work {
    float acc[BLOCK_M * BLOCK_N];   /* acc[ii * BLOCK_N + jj] = C[i0 + ii][j0 + jj] */
    float panel[BLOCK_K * BLOCK_N]; /* panel[kk * BLOCK_N + jj] = op(B)[k0 + kk][j0 + jj] */
};

/* The part of C a block covers: rows [i0, i0 + mb), columns [j0, j0 + nb). */
struct gemm_block {
    uint32_t i0, mb, j0, nb;
};

enum num_type matrix_dtype_in_type(enum matrix_dtype dt)
{
    return dt == MATRIX_FP32 ? NUM_FP32 : NUM_BF16;
}

enum num_type matrix_dtype_out_type(enum matrix_dtype dt)
{
    return dt == MATRIX_BF16_BF16 ? NUM_BF16 : NUM_FP32;
}

int matrix_gemm_spans(const struct matrix_gemm_args *g, struct matrix_spans *s)
{
    if (g->m == 0 || g->n == 0 || g->k == 0 || (unsigned)g->dtype >= MATRIX_DTYPE_COUNT ||
        (g->flags & ~MATRIX_FLAGS_ALL) != 0)
        return NPU_ERR_INVAL;
    bool ta = g->flags & MATRIX_TRANS_A, tb = g->flags & MATRIX_TRANS_B;
    uint32_t a_rows = ta ? g->k : g->m, a_cols = ta ? g->m : g->k; /* as stored */
    uint32_t b_rows = tb ? g->n : g->k, b_cols = tb ? g->k : g->n;
    if (g->lda < a_cols || g->ldb < b_cols || g->ldc < g->n)
        return NPU_ERR_INVAL;
    uint32_t ei = num_type_bytes(matrix_dtype_in_type(g->dtype));
    uint32_t eo = num_type_bytes(matrix_dtype_out_type(g->dtype));
    s->a = num_span_bytes(a_rows, a_cols, g->lda, ei);
    s->b = num_span_bytes(b_rows, b_cols, g->ldb, ei);
    s->c = num_span_bytes(g->m, g->n, g->ldc, eo);
    return NPU_OK;
}

static int gemm_check(const struct matrix_gemm_args *g)
{
    struct matrix_spans s;
    int rc = matrix_gemm_spans(g, &s);
    if (rc)
        return rc;
    if (!g->a || !g->b || !g->c)
        return NPU_ERR_INVAL;
    if (num_ranges_overlap(g->c, s.c, g->a, s.a) || num_ranges_overlap(g->c, s.c, g->b, s.b))
        return NPU_ERR_INVAL;
    return NPU_OK;
}

static uint32_t min_u32(uint32_t a, uint32_t b)
{
    return a < b ? a : b;
}

/* panel[kk][jj] = op(B)[k0 + kk][j0 + jj] for kk < kb, jj < nb. */
static void gemm_pack_panel(const struct matrix_gemm_args *g, const struct gemm_block *bl,
                            uint32_t k0, uint32_t kb, float *panel)
{
    enum num_type t = matrix_dtype_in_type(g->dtype);
    if (g->flags & MATRIX_TRANS_B) { /* op(B)[k][j] = B[j][k]: read rows of B in order */
        for (uint32_t jj = 0; jj < bl->nb; jj++) {
            size_t row = (size_t)(bl->j0 + jj) * g->ldb + k0;
            for (uint32_t kk = 0; kk < kb; kk++)
                panel[kk * BLOCK_N + jj] = num_load(g->b, row + kk, t);
        }
        return;
    }
    for (uint32_t kk = 0; kk < kb; kk++) {
        size_t row = (size_t)(k0 + kk) * g->ldb + bl->j0;
        for (uint32_t jj = 0; jj < bl->nb; jj++)
            panel[kk * BLOCK_N + jj] = num_load(g->b, row + jj, t);
    }
}

/* acc[jj] += a * bp[jj]; a constant trip count for full blocks lets -O2 vectorise it. */
static void gemm_axpy(float *restrict acc, float a, const float *restrict bp, uint32_t nb)
{
    if (nb == BLOCK_N) {
        for (uint32_t jj = 0; jj < BLOCK_N; jj++)
            acc[jj] = acc[jj] + a * bp[jj];
        return;
    }
    for (uint32_t jj = 0; jj < nb; jj++)
        acc[jj] = acc[jj] + a * bp[jj];
}

/* Four steps k .. k+3 of a full row: acc += a[0] * bp[0][:]; ... in that order per element. */
static void gemm_axpy4(float *restrict acc, const float *a, const float *restrict bp)
{
    for (uint32_t jj = 0; jj < BLOCK_N; jj++) {
        float s = acc[jj];
        s = s + a[0] * bp[jj];
        s = s + a[1] * bp[BLOCK_N + jj];
        s = s + a[2] * bp[2 * BLOCK_N + jj];
        s = s + a[3] * bp[3 * BLOCK_N + jj];
        acc[jj] = s;
    }
}

/* One row i of the block through k = k0 .. k0 + kb - 1, in order. */
static void gemm_row_chunk(const struct matrix_gemm_args *g, float *acc, const float *panel,
                           uint32_t i, uint32_t k0, uint32_t kb, uint32_t nb)
{
    enum num_type t = matrix_dtype_in_type(g->dtype);
    bool ta = g->flags & MATRIX_TRANS_A;
    size_t a_idx = ta ? (size_t)k0 * g->lda + i : (size_t)i * g->lda + k0;
    size_t a_step = ta ? g->lda : 1;
    uint32_t kk = 0;
    if (nb == BLOCK_N) /* the common case: four k per pass over the accumulators */
        for (; kk + 4 <= kb; kk += 4, a_idx += 4 * a_step) {
            float a[4];
            for (uint32_t q = 0; q < 4; q++)
                a[q] = num_load(g->a, a_idx + q * a_step, t);
            gemm_axpy4(acc, a, panel + kk * BLOCK_N);
        }
    for (; kk < kb; kk++, a_idx += a_step)
        gemm_axpy(acc, num_load(g->a, a_idx, t), panel + kk * BLOCK_N, nb);
}

/* Loads (ACCUMULATE) or zeroes the block's accumulators, or stores them (store = true). */
static void gemm_block_io(const struct matrix_gemm_args *g, const struct gemm_block *bl,
                          float *acc, bool store)
{
    enum num_type t = matrix_dtype_out_type(g->dtype);
    for (uint32_t ii = 0; ii < bl->mb; ii++) {
        size_t c0 = (size_t)(bl->i0 + ii) * g->ldc + bl->j0;
        float *row = acc + ii * BLOCK_N;
        for (uint32_t jj = 0; jj < bl->nb; jj++) {
            if (store)
                num_store(g->c, c0 + jj, t, row[jj]);
            else
                row[jj] = (g->flags & MATRIX_ACCUMULATE) ? num_load(g->c, c0 + jj, t) : 0.0f;
        }
    }
}

static void gemm_block(const struct matrix_gemm_args *g, const struct gemm_block *bl,
                       struct gemm_work *w)
{
    gemm_block_io(g, bl, w->acc, false);
    for (uint64_t k0 = 0; k0 < g->k; k0 += BLOCK_K) { /* 64-bit: no wrap near 2^32 */
        uint32_t kb = min_u32(g->k - (uint32_t)k0, BLOCK_K);
        gemm_pack_panel(g, bl, (uint32_t)k0, kb, w->panel);
        for (uint32_t ii = 0; ii < bl->mb; ii++)
            gemm_row_chunk(g, w->acc + ii * BLOCK_N, w->panel, bl->i0 + ii, (uint32_t)k0, kb,
                           bl->nb);
    }
    gemm_block_io(g, bl, w->acc, true);
}

int matrix_gemm(const struct matrix_gemm_args *g)
{
    int rc = gemm_check(g);
    if (rc)
        return rc;
    struct gemm_work *w = malloc(sizeof(*w));
    if (!w)
        return NPU_ERR_NOMEM;
    for (uint64_t j0 = 0; j0 < g->n; j0 += BLOCK_N)
        for (uint64_t i0 = 0; i0 < g->m; i0 += BLOCK_M) {
            struct gemm_block bl = { (uint32_t)i0, min_u32(g->m - (uint32_t)i0, BLOCK_M),
                                     (uint32_t)j0, min_u32(g->n - (uint32_t)j0, BLOCK_N) };
            gemm_block(g, &bl, w);
        }
    free(w);
    return NPU_OK;
}

/* ---- timing ---- */

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
    return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

int matrix_engine_cfg_check(const struct matrix_engine_cfg *cfg)
{
    if (cfg->rows < 1 || cfg->rows > 4096 || cfg->cols < 1 || cfg->cols > 4096 ||
        cfg->sram_bytes_per_cycle < 1)
        return NPU_ERR_INVAL;
    return NPU_OK;
}

uint64_t matrix_gemm_flops(uint32_t m, uint32_t n, uint32_t k)
{
    return sat_mul(sat_mul(2u * (uint64_t)m, n), k);
}

/* SRAM bytes of the GEMM (formula in matrix_engine.h). */
static uint64_t gemm_sram_bytes(uint32_t m, uint32_t n, uint32_t k, uint64_t fk, uint64_t fn,
                                enum matrix_dtype dt, uint32_t flags)
{
    uint64_t ei = num_type_bytes(matrix_dtype_in_type(dt));
    uint64_t eo = num_type_bytes(matrix_dtype_out_type(dt));
    uint64_t a = sat_mul(sat_mul(fn, (uint64_t)m * k), ei);
    uint64_t b = sat_mul((uint64_t)k * n, ei);
    uint64_t per_c = sat_add(sat_mul(fk - 1, 8), eo + ((flags & MATRIX_ACCUMULATE) ? eo : 0));
    uint64_t c = sat_mul((uint64_t)m * n, per_c);
    return sat_add(sat_add(a, b), c);
}

uint64_t matrix_gemm_cycles(const struct matrix_engine_cfg *cfg, uint32_t m, uint32_t n,
                            uint32_t k, enum matrix_dtype dtype, uint32_t flags,
                            struct matrix_gemm_timing *t)
{
    return matrix_gemm_batch_cycles(cfg, m, n, k, dtype, flags, 1, t);
}

uint64_t matrix_gemm_batch_cycles(const struct matrix_engine_cfg *cfg, uint32_t m, uint32_t n,
                                  uint32_t k, enum matrix_dtype dtype, uint32_t flags,
                                  uint32_t batch, struct matrix_gemm_timing *t)
{
    const uint64_t nb = batch ? batch : 1;
    struct matrix_gemm_timing r = { 0 };
    if (matrix_engine_cfg_check(cfg) || m == 0 || n == 0 || k == 0 ||
        (unsigned)dtype >= MATRIX_DTYPE_COUNT || (flags & ~MATRIX_FLAGS_ALL) != 0) {
        if (t)
            *t = r;
        return 0;
    }
    uint64_t fk = ceil_div(k, cfg->rows), fn = ceil_div(n, cfg->cols);
    r.folds = sat_mul(fk * fn, nb); /* fk * fn < 2^64: each factor < 2^32 */
    /* A fold streams M rows but cannot switch before the next fold's weight rows are in:
       R of them, or K mod R for the last K-fold of an N-fold (matrix_engine.h). */
    const uint64_t kr = k % cfg->rows, full = k / cfg->rows;
    const uint64_t per_fold = m > cfg->rows ? m : cfg->rows;
    const uint64_t per_part = kr == 0 ? 0 : m > kr ? m : kr;
    const uint64_t per_nfold = sat_add(sat_mul(full, per_fold), per_part);
    const uint64_t first_load = k < cfg->rows ? k : cfg->rows;
    const uint64_t fill_drain = (uint64_t)cfg->rows + cfg->cols - 2;
    r.stream_cycles = sat_mul(sat_mul(fn, per_nfold), nb);
    r.compute_cycles = sat_add(sat_add(first_load, r.stream_cycles), fill_drain);
    r.sram_bytes = sat_mul(gemm_sram_bytes(m, n, k, fk, fn, dtype, flags), nb);
    r.sram_cycles = ceil_div(r.sram_bytes, cfg->sram_bytes_per_cycle);
    r.cycles = r.compute_cycles > r.sram_cycles ? r.compute_cycles : r.sram_cycles;
    r.flops = sat_mul(matrix_gemm_flops(m, n, k), nb);
    r.utilisation = (double)r.flops / (2.0 * cfg->rows * cfg->cols * (double)r.cycles);
    if (t)
        *t = r;
    return r.cycles;
}
