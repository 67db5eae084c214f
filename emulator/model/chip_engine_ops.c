/* SPDX-License-Identifier: MIT */
/*
 * What each engine does with a descriptor: the checks at submit (every address range must
 * lie in memory the engine may touch), how long it runs, and its effect at completion (the
 * DMA engine's in chip_engine_dma.c, the vector engine's and the NoC endpoint's in their
 * own files). A GEMM computes C[m x n] (+)= A[m x k] * B[k x n] with leading dimensions in
 * elements (see npu_desc in hal/regspec/npu_regs.toml).
 */
#include <stdio.h>
#include <string.h>

#include "chip_engines_internal.h"
#include "chip_config.h"
#include "matrix_engine.h"

#define GEMM_DIM_MAX (1u << 20)

static int fail(char *err, size_t errlen, int rc, const char *fmt, uint32_t core,
                const char *what)
{
    snprintf(err, errlen, fmt, core, what);
    return rc;
}

/* Element sizes of a GEMM op: inputs and output; false for an unknown op. */
static bool gemm_sizes(uint8_t op, uint32_t *in, uint32_t *out)
{
    switch (op) {
    case NPU_MATRIX_OP_GEMM_BF16_F32:
        *in = 2, *out = 4;
        return true;
    case NPU_MATRIX_OP_GEMM_BF16_BF16:
        *in = 2, *out = 2;
        return true;
    case NPU_MATRIX_OP_GEMM_F32:
        *in = 4, *out = 4;
        return true;
    default:
        return false;
    }
}

static enum matrix_dtype gemm_dtype(uint8_t op)
{
    return op == NPU_MATRIX_OP_GEMM_F32         ? MATRIX_FP32
           : op == NPU_MATRIX_OP_GEMM_BF16_BF16 ? MATRIX_BF16_BF16
                                                : MATRIX_BF16_FP32;
}

static uint32_t gemm_flags(uint16_t flags)
{
    return ((flags & NPU_DESC_TRANS_A) ? MATRIX_TRANS_A : 0) |
           ((flags & NPU_DESC_TRANS_B) ? MATRIX_TRANS_B : 0) |
           ((flags & NPU_DESC_ACCUMULATE) ? MATRIX_ACCUMULATE : 0);
}

static bool spans_overlap(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
    return a < b + blen && b < a + alen;
}

/* A 2-D operand in this core's SRAM: rows x cols elements of esize bytes, ld apart. */
static bool operand_ok(const struct chip_engines *e, uint32_t core, uint64_t addr,
                       uint32_t rows, uint32_t cols, uint32_t ld, uint32_t esize)
{
    uint64_t extent;
    struct chip_mem_range r;
    return ld >= cols &&
           chip_mem_extent(rows, (uint64_t)cols * esize, (uint64_t)ld * esize, &extent) &&
           chip_mem_locate(&e->mem, addr, extent, &r) && r.kind == CHIP_MEM_SRAM &&
           r.core == core;
}

/* GEMMs in a descriptor (batch 0 means one). */
static uint32_t gemm_batch(const struct npu_desc *d)
{
    return d->batch ? d->batch : 1;
}

/* The bytes a batch's operand spans: from its first to the end of its last (span bytes
   each, stride apart); false on overflow. */
static bool batch_extent(uint32_t batch, uint64_t stride, uint64_t span, uint64_t *extent)
{
    const uint64_t n = batch - 1;
    if (stride && n > (UINT64_MAX - span) / stride)
        return false;
    *extent = n * stride + span;
    return true;
}

/* A 2-D operand of every GEMM of the batch, each `stride` bytes after the last, in this
   core's SRAM: the first and the last are checked (SRAM is one window, so those between
   are in it too). */
static bool batch_operand_ok(const struct chip_engines *e, uint32_t core, uint64_t addr,
                             uint64_t stride, uint32_t batch, uint32_t rows, uint32_t cols,
                             uint32_t ld, uint32_t esize)
{
    const uint64_t off = (uint64_t)(batch - 1) * stride;
    return (!stride || off / stride == batch - 1u) && addr <= UINT64_MAX - off &&
           operand_ok(e, core, addr, rows, cols, ld, esize) &&
           operand_ok(e, core, addr + off, rows, cols, ld, esize);
}

static int check_gemm_batch(uint32_t core, const struct npu_desc *d,
                            const struct matrix_spans *span, char *err, size_t errlen)
{
    const uint32_t nb = gemm_batch(d);
    uint64_t ea, eb, ec;
    if (nb == 1 && (d->stride_a || d->stride_b || d->stride_c))
        return fail(err, errlen, NPU_ERR_INVAL, "core %u: %s", core,
                    "GEMM strides set without a batch");
    if (nb > 1 && d->stride_c < span->c)
        return fail(err, errlen, NPU_ERR_INVAL, "core %u: %s", core,
                    "GEMM batch: the C operands overlap (stride_c below C's span)");
    /* no C of the batch may overlap any A or B: then their order does not matter */
    if (!batch_extent(nb, d->stride_a, span->a, &ea) ||
        !batch_extent(nb, d->stride_b, span->b, &eb) ||
        !batch_extent(nb, d->stride_c, span->c, &ec) || spans_overlap(d->c, ec, d->a, ea) ||
        spans_overlap(d->c, ec, d->b, eb))
        return fail(err, errlen, NPU_ERR_INVAL, "core %u: %s", core,
                    "GEMM C overlaps A or B");
    return NPU_OK;
}

static int check_gemm(const struct chip_engines *e, uint32_t core, const struct npu_desc *d,
                      char *err, size_t errlen)
{
    uint32_t in, out;
    bool ta = d->flags & NPU_DESC_TRANS_A, tb = d->flags & NPU_DESC_TRANS_B;
    const uint32_t nb = gemm_batch(d);
    if (nb > NPU_GEMM_BATCH_MAX)
        return fail(err, errlen, NPU_ERR_INVAL, "core %u: %s", core,
                    "GEMM batch above NPU_GEMM_BATCH_MAX");
    if (!gemm_sizes(d->op, &in, &out))
        return fail(err, errlen, NPU_ERR_INVAL, "core %u: %s", core, "unknown matrix op");
    if (!d->m || !d->n || !d->k || d->m > GEMM_DIM_MAX || d->n > GEMM_DIM_MAX ||
        d->k > GEMM_DIM_MAX)
        return fail(err, errlen, NPU_ERR_INVAL, "core %u: %s", core,
                    "GEMM dimensions must be 1..1048576");
    if (!batch_operand_ok(e, core, d->a, d->stride_a, nb, ta ? d->k : d->m, ta ? d->m : d->k,
                          d->lda, in))
        return fail(err, errlen, NPU_ERR_RANGE, "core %u: %s", core,
                    "GEMM A is outside this core's SRAM or lda is too small");
    if (!batch_operand_ok(e, core, d->b, d->stride_b, nb, tb ? d->n : d->k, tb ? d->k : d->n,
                          d->ldb, in))
        return fail(err, errlen, NPU_ERR_RANGE, "core %u: %s", core,
                    "GEMM B is outside this core's SRAM or ldb is too small");
    if (!batch_operand_ok(e, core, d->c, d->stride_c, nb, d->m, d->n, d->ldc, out))
        return fail(err, errlen, NPU_ERR_RANGE, "core %u: %s", core,
                    "GEMM C is outside this core's SRAM or ldc is too small");
    const struct matrix_gemm_args shape = {
        .m = d->m, .n = d->n, .k = d->k, .lda = d->lda, .ldb = d->ldb, .ldc = d->ldc,
        .flags = gemm_flags(d->flags), .dtype = gemm_dtype(d->op),
    };
    struct matrix_spans span;
    if (matrix_gemm_spans(&shape, &span) != NPU_OK)
        return fail(err, errlen, NPU_ERR_INVAL, "core %u: %s", core,
                    "GEMM shape, flags or leading dimensions invalid");
    return check_gemm_batch(core, d, &span, err, errlen);
}

/* The bytes [lo, hi) of a GEMM command's operand: its first GEMM's span plus the batch's
   strides (the spans were checked when it was submitted). */
static void gemm_extent(const struct npu_desc *d, uint64_t base, uint64_t stride,
                        uint64_t span, uint64_t *lo, uint64_t *hi)
{
    uint64_t ext = span;
    if (!batch_extent(gemm_batch(d), stride, span, &ext))
        ext = UINT64_MAX - base;
    *lo = base, *hi = base + ext;
}

bool chip_engine_gemm_extent(const struct npu_desc *d, struct chip_gemm_extent *x)
{
    const struct matrix_gemm_args shape = {
        .m = d->m, .n = d->n, .k = d->k, .lda = d->lda, .ldb = d->ldb, .ldc = d->ldc,
        .flags = gemm_flags(d->flags), .dtype = gemm_dtype(d->op),
    };
    struct matrix_spans span;
    if (matrix_gemm_spans(&shape, &span) != NPU_OK)
        return false;
    gemm_extent(d, d->a, d->stride_a, span.a, &x->lo[0], &x->hi[0]);
    gemm_extent(d, d->b, d->stride_b, span.b, &x->lo[1], &x->hi[1]);
    gemm_extent(d, d->c, d->stride_c, span.c, &x->lo[2], &x->hi[2]);
    return true;
}

bool chip_engine_gemm_independent(const struct chip_gemm_extent *a,
                                  const struct chip_gemm_extent *b)
{
    for (int x = 0; x < 3; x++) /* a's C against b's operands, b's C against a's */
        if ((a->lo[2] < b->hi[x] && b->lo[x] < a->hi[2]) ||
            (b->lo[2] < a->hi[x] && a->lo[x] < b->hi[2]))
            return false;
    return true;
}

int chip_engine_desc_check(const struct chip_engines *e, uint32_t core,
                           const struct npu_desc *d, char *err, size_t errlen)
{
    const uint32_t gemm_flags = NPU_DESC_TRANS_A | NPU_DESC_TRANS_B | NPU_DESC_ACCUMULATE;
    uint32_t allowed = NPU_DESC_WAIT | NPU_DESC_SIGNAL | NPU_DESC_IRQ | NPU_DESC_WAIT2 |
                       NPU_DESC_SIGNAL2;
    if (d->engine == NPU_ENGINE_MATRIX)
        allowed |= gemm_flags;
    if (d->engine == NPU_ENGINE_DMA || d->engine == NPU_ENGINE_DMA2 ||
        d->engine == NPU_ENGINE_NOC)
        allowed |= NPU_DESC_KEEP_DATA;
    if (d->engine >= NPU_ENGINE_COUNT)
        return fail(err, errlen, NPU_ERR_INVAL, "core %u: %s", core, "no such engine");
    if (d->flags & ~allowed)
        return fail(err, errlen, NPU_ERR_INVAL, "core %u: %s", core,
                    "flags not valid for this engine");
    if ((d->flags & NPU_DESC_WAIT) && d->wait_sem >= CHIP_SEMS_PER_CORE)
        return fail(err, errlen, NPU_ERR_RANGE, "core %u: %s", core, "wait_sem out of range");
    if ((d->flags & NPU_DESC_SIGNAL) &&
        (d->signal_sem >= CHIP_SEMS_PER_CORE || d->signal_core >= e->clock->nharts))
        return fail(err, errlen, NPU_ERR_RANGE, "core %u: %s", core,
                    "signal_sem or signal_core out of range");
    if ((d->flags & NPU_DESC_WAIT2) && d->wait2_sem >= CHIP_SEMS_PER_CORE)
        return fail(err, errlen, NPU_ERR_RANGE, "core %u: %s", core, "wait2_sem out of range");
    if ((d->flags & NPU_DESC_SIGNAL2) &&
        (d->signal2_sem >= CHIP_SEMS_PER_CORE || d->signal2_core >= e->clock->nharts))
        return fail(err, errlen, NPU_ERR_RANGE, "core %u: %s", core,
                    "signal2_sem or signal2_core out of range");
    if ((d->flags & NPU_DESC_KEEP_DATA) && (uint64_t)d->m * d->n > NPU_KEEP_DATA_MAX)
        return fail(err, errlen, NPU_ERR_INVAL, "core %u: %s", core,
                    "a KEEP_DATA transfer moves more than NPU_KEEP_DATA_MAX bytes");
    if (d->engine != NPU_ENGINE_MATRIX &&
        (d->batch || d->stride_a || d->stride_b || d->stride_c))
        return fail(err, errlen, NPU_ERR_INVAL, "core %u: %s", core,
                    "batch and strides are for the matrix engine only (must be 0)");
    switch (d->engine) {
    case NPU_ENGINE_MATRIX:
        return check_gemm(e, core, d, err, errlen);
    case NPU_ENGINE_DMA:
    case NPU_ENGINE_DMA2:
        return chip_engine_dma_check(e, core, d, err, errlen);
    case NPU_ENGINE_NOC:
        return chip_engine_noc_check(e, core, d, err, errlen);
    default:
        return chip_engine_vector_check(e, core, d, err, errlen);
    }
}

void chip_engine_desc_plan(const struct chip_engines *e, uint32_t core,
                           const struct npu_desc *d, struct chip_engine_plan *plan)
{
    /* Not memset: the path array is large and only path_len entries are ever read. */
    plan->is_flow = false;
    plan->cycles = plan->bytes = plan->latency_cycles = 0;
    plan->path_len = 0;
    const struct chip_engine_sizes *sz = chip_engines_core_sizes(e, core);
    if (d->engine == NPU_ENGINE_MATRIX) {
        const struct matrix_engine_cfg cfg = {
            .rows = sz->sa_rows, .cols = sz->sa_cols,
            .sram_bytes_per_cycle = sz->sram_bytes_per_cycle,
        };
        struct matrix_gemm_timing t;
        plan->cycles = matrix_gemm_batch_cycles(&cfg, d->m, d->n, d->k, gemm_dtype(d->op),
                                                gemm_flags(d->flags), gemm_batch(d), &t);
        plan->piped_cycles = t.stream_cycles > t.sram_cycles ? t.stream_cycles
                                                             : t.sram_cycles;
        return;
    }
    if (d->engine == NPU_ENGINE_VECTOR) {
        plan->cycles = chip_engine_vector_cycles(e, core, d);
        return;
    }
    if (d->engine == NPU_ENGINE_NOC) {
        chip_engine_noc_plan(e, core, d, plan);
        return;
    }
    chip_engine_dma_plan(e, core, d, plan);
}

/* The batch's GEMMs in order (the check at submit keeps every C apart from every A and B,
   so the order does not change the result). */
static int finish_gemm(const struct chip_engines *e, const struct npu_desc *d)
{
    for (uint32_t i = 0; i < gemm_batch(d); i++) {
        struct chip_mem_range a, b, c;
        chip_mem_locate(&e->mem, d->a + i * d->stride_a, 1, &a);
        chip_mem_locate(&e->mem, d->b + i * d->stride_b, 1, &b);
        chip_mem_locate(&e->mem, d->c + i * d->stride_c, 1, &c);
        if (!a.host || !b.host || !c.host)
            return NPU_OK;
        struct matrix_gemm_args args = {
            .a = a.host, .b = b.host, .c = c.host, .m = d->m, .n = d->n, .k = d->k,
            .lda = d->lda, .ldb = d->ldb, .ldc = d->ldc, .flags = gemm_flags(d->flags),
            .dtype = gemm_dtype(d->op),
        };
        const int rc = matrix_gemm(&args);
        if (rc != NPU_OK)
            return rc;
    }
    return NPU_OK;
}

static void desc_finish_data(struct chip_engines *e, uint32_t core, const struct npu_desc *d,
                             struct chip_engine_counters *count)
{
    if (d->engine == NPU_ENGINE_MATRIX) {
        const struct chip_engine_sizes *sz = chip_engines_core_sizes(e, core);
        const struct matrix_engine_cfg cfg = {
            .rows = sz->sa_rows, .cols = sz->sa_cols,
            .sram_bytes_per_cycle = sz->sram_bytes_per_cycle,
        };
        struct matrix_gemm_timing t;
        matrix_gemm_batch_cycles(&cfg, d->m, d->n, d->k, gemm_dtype(d->op),
                                 gemm_flags(d->flags), gemm_batch(d), &t);
        count->sram_bytes += t.sram_bytes;
        count->flops += t.flops;
        if (e->cfg.functional && finish_gemm(e, d) != NPU_OK)
            count->errors++;
        return;
    }
    if (d->engine == NPU_ENGINE_VECTOR) {
        count->elements += (uint64_t)d->m * d->n;
        count->sram_bytes += chip_engine_vector_bytes(d);
        count->alu_ops += chip_engine_vector_alu_ops(d);
        if (e->cfg.functional && chip_engine_vector_run(e, d) != NPU_OK)
            count->errors++;
        return;
    }
    chip_engine_dma_finish(e, core, d, count);
}

void chip_engine_desc_signal(struct chip_engines *e, uint32_t from, const struct npu_desc *d,
                             uint64_t now, uint32_t signal_core)
{
    if (d->flags & NPU_DESC_SIGNAL)
        chip_sem_post_from_unit(e->clock, from, now, signal_core, d->signal_sem,
                                NPU_SEM_OP_INC, d->signal_value);
    if (d->flags & NPU_DESC_SIGNAL2)
        chip_sem_post_from_unit(e->clock, from, now, d->signal2_core, d->signal2_sem,
                                NPU_SEM_OP_INC, d->signal2_value);
}

void chip_engine_desc_finish(struct chip_engines *e, uint32_t core, const struct npu_desc *d,
                             uint64_t now, struct chip_engine_counters *count)
{
    if (d->engine == NPU_ENGINE_NOC) {
        chip_engine_noc_finish(e, core, d, now, count); /* signals from the destinations */
        return;
    }
    desc_finish_data(e, core, d, count);
    chip_engine_desc_signal(e, core, d, now, d->signal_core);
}
