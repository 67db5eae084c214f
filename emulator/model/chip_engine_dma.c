/* SPDX-License-Identifier: MIT */
/*
 * The DMA engine's two ops (both queues, NPU_ENGINE_DMA and NPU_ENGINE_DMA2): checks at
 * submit, how long one runs, and its effect at completion.
 *
 * COPY moves m rows of n bytes from a (row stride lda) to c (row stride ldc). GATHER moves m
 * rows of n bytes to c (stride ldc), row r from a + idx[r] x lda, idx being uint32[m] at b:
 * an embedding lookup's rows by token, in one descriptor instead of one per row, as a real
 * DMA engine walks a descriptor or index list. Either side of a row is this core's SRAM or
 * HBM; the index list is this core's SRAM or the control DRAM.
 *
 * Modelled: a transfer of m x n bytes over the core's HBM channel (or stack) with one
 * latency, or through SRAM, the same for both ops: the engine fetches a gather's rows back
 * to back. Not modelled: the time to read the index list (4 bytes a row beside the row's
 * n; its SRAM bytes are counted), rows of a gather landing in different HBM channels.
 * Hazard: the index list is read when the gather is submitted (every row is checked then)
 * and, where the rows move (functional mode, KEEP_DATA), again when it completes: a
 * firmware that changes it in between gets the new rows, and a row that is then out of
 * range is an engine error and moves nothing. At most NPU_GATHER_ROWS_MAX rows (the check
 * at submit walks them all); the list may not overlap the destination.
 */
#include <stdio.h>
#include <string.h>

#include "chip_engines_internal.h"

static int fail(char *err, size_t errlen, int rc, uint32_t core, const char *what)
{
    snprintf(err, errlen, "core %u: %s", core, what);
    return rc;
}

/* One side of a copy: m rows of n bytes, `stride` apart, located in *r. */
static bool copy_side(const struct chip_engines *e, uint64_t addr, const struct npu_desc *d,
                      uint32_t stride, struct chip_mem_range *r)
{
    uint64_t extent;
    return chip_mem_extent(d->m, d->n, stride, &extent) &&
           chip_mem_locate(&e->mem, addr, extent, r);
}

/* A side the DMA engine may touch: this core's SRAM or HBM. */
static bool dma_side(const struct chip_mem_range *r, uint32_t core)
{
    return (r->kind == CHIP_MEM_SRAM && r->core == core) || r->kind == CHIP_MEM_HBM;
}

/* The gather's index list (uint32[m] at b), or NULL if it is not in backed memory of this
   core's SRAM or the control DRAM. */
static const uint8_t *gather_index(const struct chip_engines *e, uint32_t core,
                                   const struct npu_desc *d)
{
    struct chip_mem_range r;
    if (!chip_mem_locate(&e->mem, d->b, (uint64_t)d->m * 4, &r) || !r.host ||
        !((r.kind == CHIP_MEM_SRAM && r.core == core) || r.kind == CHIP_MEM_DRAM))
        return NULL;
    return r.host;
}

static uint32_t index_at(const uint8_t *idx, uint32_t row)
{
    uint32_t v;
    memcpy(&v, idx + (uint64_t)row * 4, sizeof(v)); /* little-endian guest, unaligned ok */
    return v;
}

/* Where row r of a gather lies, if in the same memory as the table's first row `table`
   (an address past 2^64 is none). */
static bool gather_row(const struct chip_engines *e, const struct npu_desc *d,
                       const struct chip_mem_range *table, uint32_t idx,
                       struct chip_mem_range *r)
{
    const uint64_t off = (uint64_t)idx * d->lda;
    return off <= UINT64_MAX - d->a && chip_mem_locate(&e->mem, d->a + off, d->n, r) &&
           r->kind == table->kind && r->core == table->core;
}

static int check_gather(const struct chip_engines *e, uint32_t core, const struct npu_desc *d,
                        char *err, size_t errlen)
{
    struct chip_mem_range table, dst, row;
    if (d->m > NPU_GATHER_ROWS_MAX)
        return fail(err, errlen, NPU_ERR_INVAL, core,
                    "a gather of more than NPU_GATHER_ROWS_MAX rows");
    if (d->m == 0 || d->n == 0 || !copy_side(e, d->c, d, d->ldc, &dst) || !dma_side(&dst, core))
        return fail(err, errlen, NPU_ERR_RANGE, core,
                    "gather destination is empty, overflows, has a stride shorter than a "
                    "row, or is not this core's SRAM or HBM");
    if (!chip_mem_locate(&e->mem, d->a, d->n, &table) || !dma_side(&table, core))
        return fail(err, errlen, NPU_ERR_RANGE, core,
                    "gather table's first row is not in this core's SRAM or HBM");
    const uint8_t *idx = gather_index(e, core, d);
    if (!idx)
        return fail(err, errlen, NPU_ERR_RANGE, core,
                    "gather index list (m uint32 at b) is not in this core's SRAM or the "
                    "control DRAM");
    uint64_t extent;
    chip_mem_extent(d->m, d->n, d->ldc, &extent); /* checked with dst above */
    if (d->b < d->c + extent && d->c < d->b + (uint64_t)d->m * 4)
        return fail(err, errlen, NPU_ERR_RANGE, core,
                    "gather index list overlaps its destination");
    for (uint32_t r = 0; r < d->m; r++)
        if (!gather_row(e, d, &table, index_at(idx, r), &row)) {
            char what[160];
            snprintf(what, sizeof(what), "gather row %u (index %u) is not in the memory of "
                     "the table's first row", r, index_at(idx, r));
            return fail(err, errlen, NPU_ERR_RANGE, core, what);
        }
    return NPU_OK;
}

int chip_engine_dma_check(const struct chip_engines *e, uint32_t core, const struct npu_desc *d,
                          char *err, size_t errlen)
{
    struct chip_mem_range src, dst;
    if (d->op == NPU_DMA_OP_GATHER)
        return check_gather(e, core, d, err, errlen);
    if (d->op != NPU_DMA_OP_COPY)
        return fail(err, errlen, NPU_ERR_INVAL, core, "unknown DMA op");
    if (!copy_side(e, d->a, d, d->lda, &src) || !copy_side(e, d->c, d, d->ldc, &dst))
        return fail(err, errlen, NPU_ERR_RANGE, core,
                    "copy source or destination is empty, overflows, has a stride shorter "
                    "than a row, or is not inside one memory");
    if (!dma_side(&src, core) || !dma_side(&dst, core))
        return fail(err, errlen, NPU_ERR_RANGE, core,
                    "a DMA copy goes between this core's SRAM and HBM");
    return NPU_OK;
}

/* The memories of a checked descriptor's source (a gather's: its table's) and
   destination. */
static void dma_sides(const struct chip_engines *e, const struct npu_desc *d,
                      struct chip_mem_range *src, struct chip_mem_range *dst)
{
    if (d->op == NPU_DMA_OP_GATHER)
        chip_mem_locate(&e->mem, d->a, d->n, src);
    else
        copy_side(e, d->a, d, d->lda, src);
    copy_side(e, d->c, d, d->ldc, dst);
}

/* A DMA through an HBM stack on the mesh edge: the NoC route between the core and the
 * stack's router (in the direction the data goes), then the stack. */
static void plan_stack(const struct chip_engines *e, uint32_t core, bool from_hbm,
                       struct chip_engine_plan *plan)
{
    uint32_t router;
    uint32_t stack = chip_engines_hbm_stack(e, core, &router);
    plan->is_flow = true;
    plan->path_len = 0;
    plan->path[plan->path_len++] = stack;
    chip_engine_route_add(e, from_hbm ? router : core, from_hbm ? core : router, NULL, plan);
    plan->latency_cycles = e->cfg.hbm_latency_cycles +
                           (uint64_t)chip_hops(e->clock, core, router) * e->clock->p.hop_cycles;
}

static uint64_t div_ceil(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

void chip_engine_dma_plan(const struct chip_engines *e, uint32_t core, const struct npu_desc *d,
                          struct chip_engine_plan *plan)
{
    struct chip_mem_range src, dst;
    const struct chip_engine_sizes *sz = chip_engines_core_sizes(e, core);
    plan->bytes = (uint64_t)d->m * d->n;
    dma_sides(e, d, &src, &dst);
    if ((src.kind == CHIP_MEM_HBM || dst.kind == CHIP_MEM_HBM) && e->cfg.hbm_stacks) {
        plan_stack(e, core, src.kind == CHIP_MEM_HBM, plan);
    } else if (src.kind == CHIP_MEM_HBM || dst.kind == CHIP_MEM_HBM) {
        plan->is_flow = true;
        plan->path[plan->path_len++] = core; /* the core's HBM channel */
        plan->latency_cycles = e->cfg.hbm_latency_cycles;
    } else {
        plan->cycles = 1 + div_ceil(plan->bytes, sz->sram_bytes_per_cycle);
    }
}

/* A gather's rows, re-read from its index list: every row checked first, then moved;
   false, nothing moved, if a row is no longer in range (the list changed after the check
   at submit; it cannot overlap the destination, so the moves do not change it). */
static bool move_gather(const struct chip_engines *e, uint32_t core, const struct npu_desc *d,
                        const struct chip_mem_range *dst)
{
    struct chip_mem_range table, row;
    const uint8_t *idx = gather_index(e, core, d);
    if (!idx || !chip_mem_locate(&e->mem, d->a, d->n, &table))
        return false;
    for (uint32_t r = 0; r < d->m; r++)
        if (!gather_row(e, d, &table, index_at(idx, r), &row))
            return false;
    for (uint32_t r = 0; r < d->m && dst->host; r++)
        if (gather_row(e, d, &table, index_at(idx, r), &row) && row.host)
            memmove(dst->host + (uint64_t)r * d->ldc, row.host, d->n);
    return true;
}

static void move_copy(const struct npu_desc *d, const struct chip_mem_range *src,
                      const struct chip_mem_range *dst)
{
    if (!src->host || !dst->host)
        return;
    for (uint32_t row = 0; row < d->m; row++)
        memmove(dst->host + (uint64_t)row * d->ldc, src->host + (uint64_t)row * d->lda, d->n);
}

void chip_engine_dma_finish(struct chip_engines *e, uint32_t core, const struct npu_desc *d,
                            struct chip_engine_counters *count)
{
    const uint64_t bytes = (uint64_t)d->m * d->n;
    struct chip_mem_range src, dst, list;
    dma_sides(e, d, &src, &dst);
    count->bytes += bytes;
    count->sram_bytes += bytes * ((src.kind == CHIP_MEM_SRAM) + (dst.kind == CHIP_MEM_SRAM));
    count->hbm_bytes += bytes * ((src.kind == CHIP_MEM_HBM) + (dst.kind == CHIP_MEM_HBM));
    if (d->op == NPU_DMA_OP_GATHER && chip_mem_locate(&e->mem, d->b, (uint64_t)d->m * 4, &list))
        count->sram_bytes += list.kind == CHIP_MEM_SRAM ? (uint64_t)d->m * 4 : 0;
    if (!e->cfg.functional && !(d->flags & NPU_DESC_KEEP_DATA))
        return;
    if (d->op != NPU_DMA_OP_GATHER)
        move_copy(d, &src, &dst);
    else if (!move_gather(e, core, d, &dst))
        count->errors++;
}
