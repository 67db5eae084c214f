/* SPDX-License-Identifier: MIT */
/*
 * GEMM benchmark, NPU core: core 0 runs C[M x N] = A[M x K] * B[K x N] (bf16 in, fp32 out)
 * on its matrix engine for a grid of shapes and prints, per shape, the measured chip time
 * (from issuing the submit to waking on the completion semaphore), the peak bound
 * 2MNK / (2 R C) cycles, the time the documented formula predicts
 * (emulator/model/matrix_engine.h: one command, plus per descriptor
 * max(R + folds max(M, R) + R + C - 2, SRAM bytes / SRAM bytes per cycle)) and the utilisation
 * bound / measured. Other cores only report done.
 *
 * A GEMM whose operands do not fit in the core's free SRAM (4096^3 needs 32 MiB for A alone)
 * runs as a chain of tile descriptors on the same engine, submitted together: K and N are
 * cut in multiples of the array (accumulating over K tiles), M only if it must be. In
 * performance mode the tiles all reuse the same buffers; the data is never touched.
 */
#include "bench.h"
#include "npu/hal.h"
#include "npu/matrix.h"
#include "npu/wait.h"

#define SEM_GEMM 1u
#define MAX_TILES 1024u /* one engine queue */
#define IN_BYTES 2u     /* bf16 */
#define OUT_BYTES 4u    /* fp32 */
#define FUNCTIONAL_MACS_MAX (1ull << 27) /* functional mode: the host computes every MAC */

struct shape {
    uint32_t m, n, k;
    bool quick; /* part of the reduced grid (bootarg `quick`) */
};

static const struct shape shapes[] = {
    /* small, array-sized, not multiples of the array */
    { 16, 16, 16, true }, { 64, 64, 64, false }, { 127, 129, 130, true },
    { 128, 128, 128, true }, { 200, 300, 100, false }, { 256, 256, 256, false },
    { 500, 500, 500, false }, { 512, 512, 512, false }, { 1000, 1000, 1000, false },
    /* large squares */
    { 1024, 1024, 1024, true }, { 2048, 2048, 2048, false }, { 3000, 3000, 3000, false },
    { 4096, 4096, 4096, true }, { 8192, 8192, 8192, false },
    /* M sweep against 4096 x 4096 weights: decode (M = 1) to prefill */
    { 1, 4096, 4096, true }, { 8, 4096, 4096, false }, { 32, 4096, 4096, false },
    { 128, 4096, 4096, false }, { 512, 4096, 4096, false }, { 1024, 4096, 4096, false },
    { 2048, 4096, 4096, false },
    /* LLM-like rectangles (Llama-7B FFN: 4096 <-> 11008) */
    { 1, 11008, 4096, false }, { 2048, 11008, 4096, false }, { 2048, 4096, 11008, false },
    { 4096, 11008, 4096, false },
};

static struct npu_desc descs[MAX_TILES];

struct tiling {
    uint32_t mt, nt, kt; /* tile dimensions (the last tiles may be partial) */
    uint32_t count;
};

static uint64_t div_ceil(uint64_t a, uint64_t b)
{
    return (a + b - 1) / b;
}

static bool tile_fits(uint64_t mt, uint64_t nt, uint64_t kt)
{
    return mt * kt * IN_BYTES + kt * nt * IN_BYTES + mt * nt * OUT_BYTES <= bench_data_bytes();
}

/* Cuts K, then N (multiples of the array), then M until a tile fits in free SRAM. */
static struct tiling tile_plan(const struct shape *s)
{
    const uint32_t r = hal_chip()->sa_rows, c = hal_chip()->sa_cols;
    struct tiling t = { s->m, s->n, s->k, 0 };
    while (!tile_fits(t.mt, t.nt, t.kt)) {
        if (t.kt >= t.nt && t.kt > r)
            t.kt = (uint32_t)(div_ceil(div_ceil(t.kt, 2), r) * r);
        else if (t.nt > c)
            t.nt = (uint32_t)(div_ceil(div_ceil(t.nt, 2), c) * c);
        else if (t.mt > 1)
            t.mt = (uint32_t)div_ceil(t.mt, 2);
        else
            return (struct tiling){ 1, 1, 1, UINT32_MAX }; /* nothing fits: skipped */
    }
    uint64_t count = div_ceil(s->m, t.mt) * div_ceil(s->n, t.nt) * div_ceil(s->k, t.kt);
    t.count = count > MAX_TILES ? UINT32_MAX : (uint32_t)count;
    return t;
}

/* Cycles of one GEMM descriptor by the formula of matrix_engine.h (bf16 -> fp32). */
static uint64_t formula_cycles(uint64_t m, uint64_t n, uint64_t k, bool acc)
{
    const uint64_t r = hal_chip()->sa_rows, c = hal_chip()->sa_cols;
    uint64_t fk = div_ceil(k, r), fn = div_ceil(n, c);
    uint64_t compute = r + fk * fn * (m > r ? m : r) + (r + c - 2);
    uint64_t bytes = fn * m * k * IN_BYTES + k * n * IN_BYTES +
                     m * n * ((fk - 1) * 8 + OUT_BYTES + (acc ? OUT_BYTES : 0));
    uint64_t sram = div_ceil(bytes, hal_chip()->sram_bytes_per_cycle);
    return compute > sram ? compute : sram;
}

static uint32_t min_u32(uint32_t a, uint32_t b)
{
    return a < b ? a : b;
}

/* Fills descs with the tiles of shape s; returns the formula's cycles of all of them. */
static uint64_t build_tiles(const struct shape *s, const struct tiling *t)
{
    uint64_t a = bench_data_base(), b = a + (uint64_t)t->mt * t->kt * IN_BYTES;
    uint64_t c = b + (uint64_t)t->kt * t->nt * IN_BYTES, cycles = 0;
    uint32_t i = 0;
    for (uint32_t m0 = 0; m0 < s->m; m0 += t->mt)
        for (uint32_t n0 = 0; n0 < s->n; n0 += t->nt)
            for (uint32_t k0 = 0; k0 < s->k; k0 += t->kt, i++) {
                struct matrix_gemm_desc_args g = {
                    .op = NPU_MATRIX_OP_GEMM_BF16_F32, .a = a, .b = b, .c = c,
                    .m = min_u32(t->mt, s->m - m0), .n = min_u32(t->nt, s->n - n0),
                    .k = min_u32(t->kt, s->k - k0), .lda = t->kt, .ldb = t->nt,
                    .ldc = t->nt, .accumulate = k0 > 0,
                };
                if (i + 1 == t->count)
                    g.sync = bench_signal(hal_self()->core_id, SEM_GEMM);
                matrix_gemm_desc(&descs[i], &g);
                cycles += formula_cycles(g.m, g.n, g.k, g.accumulate);
            }
    return cycles;
}

static int run_shape(const struct shape *s, uint32_t *sem_count)
{
    if (!hal_chip()->performance && (uint64_t)s->m * s->n * s->k > FUNCTIONAL_MACS_MAX) {
        bench_print_note(LINES_BENCH_SKIP, "gemm m=%u n=%u k=%u: too large for functional "
                         "mode (the host computes it)", s->m, s->n, s->k);
        return NPU_OK;
    }
    struct tiling t = tile_plan(s);
    if (t.count > MAX_TILES) {
        bench_print_note(LINES_BENCH_SKIP, "gemm m=%u n=%u k=%u: more than %u tiles in the "
                         "free SRAM", s->m, s->n, s->k, MAX_TILES);
        return NPU_OK;
    }
    const uint64_t cyc = hal_cycle_ps();
    uint64_t formula_ps = bench_cmd_ps() + build_tiles(s, &t) * cyc;
    uint64_t t0 = hal_time_ps();
    int rc = bench_submit_wait(descs, t.count, SEM_GEMM, ++*sem_count);
    if (rc != NPU_OK)
        return rc;
    uint64_t ps = hal_time_ps() - t0;
    double peak_cycles = (double)s->m * s->n * s->k /
                         ((double)hal_chip()->sa_rows * hal_chip()->sa_cols);
    double bound_ps = peak_cycles * (double)cyc;
    lines_print_bench_gemm(&(struct lines_bench_gemm){
        .m = s->m, .n = s->n, .k = s->k, .tiles = t.count, .mt = t.mt, .nt = t.nt, .kt = t.kt,
        .ps = ps, .bound_ps = bound_ps, .formula_ps = formula_ps,
        .util = bound_ps / (double)ps });
    return NPU_OK;
}

int main(void)
{
    hal_wait_release();
    if (hal_self()->core_id != 0)
        return bench_done(NPU_EXIT_OK);
    bool quick = bench_has_flag("quick");
    uint32_t sem_count = hal_sem_read(SEM_GEMM);
    int failed = 0;
    for (uint32_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
        if (!quick || shapes[i].quick)
            failed += run_shape(&shapes[i], &sem_count) != NPU_OK;
    return bench_done(failed ? NPU_EXIT_FAIL : NPU_EXIT_OK);
}
