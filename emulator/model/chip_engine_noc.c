/* SPDX-License-Identifier: MIT */
/*
 * NoC-endpoint descriptors: WRITE (local SRAM to any core's SRAM), READ (any core's SRAM to
 * local SRAM) and MULTICAST (local SRAM to the same offset on every core of a rectangle).
 *
 * Timing: data moves as one flow over the links of its XY route (row first, then column);
 * a multicast is one flow over the union of the routes to all destinations (routers
 * replicate, so a link shared by several destinations carries the data once), limited by
 * its most contended link. Latency after the transfer: the hops of the longest route (a read
 * also pays the request's trip to the remote core). A completion signal leaves from where
 * the data lands.
 */
#include <stdio.h>
#include <string.h>

#include "chip_config.h"
#include "chip_engines_internal.h"

struct rect {
    uint32_t r0, c0, r1, c1;
};

static struct rect rect_of(uint64_t b)
{
    return (struct rect){ (uint32_t)(b & 0xffff), (uint32_t)((b >> 16) & 0xffff),
                          (uint32_t)((b >> 32) & 0xffff), (uint32_t)(b >> 48) };
}

static bool side(const struct chip_engines *e, uint64_t addr, uint32_t rows, uint32_t bytes,
                 uint32_t stride, struct chip_mem_range *r)
{
    uint64_t extent;
    return chip_mem_extent(rows, bytes, stride, &extent) &&
           chip_mem_locate(&e->mem, addr, extent, r);
}

static int fail(char *err, size_t errlen, int rc, uint32_t core, const char *what)
{
    snprintf(err, errlen, "core %u: %s", core, what);
    return rc;
}

static int check_multicast(const struct chip_engines *e, uint32_t core,
                           const struct npu_desc *d, char *err, size_t errlen)
{
    struct rect r = rect_of(d->b);
    struct chip_mem_range dst;
    if (r.r0 > r.r1 || r.c0 > r.c1 || r.r1 >= e->rows || r.c1 >= e->cols)
        return fail(err, errlen, NPU_ERR_RANGE, core,
                    "multicast rectangle is empty or outside the mesh");
    /* The offset must fit every SRAM: check it on the first destination. */
    uint64_t first = npu_map_instance_base(NPU_MAP_SRAM, r.r0 * e->cols + r.c0);
    if (d->c > e->mem.sram_bytes || !side(e, first + d->c, d->m, d->n, d->ldc, &dst) ||
        dst.kind != CHIP_MEM_SRAM)
        return fail(err, errlen, NPU_ERR_RANGE, core,
                    "multicast destination offset runs past the end of SRAM");
    return NPU_OK;
}

int chip_engine_noc_check(const struct chip_engines *e, uint32_t core,
                          const struct npu_desc *d, char *err, size_t errlen)
{
    struct chip_mem_range src, dst;
    if (d->op < NPU_NOC_OP_WRITE || d->op > NPU_NOC_OP_MULTICAST)
        return fail(err, errlen, NPU_ERR_INVAL, core, "unknown NoC op");
    if (!side(e, d->a, d->m, d->n, d->lda, &src) || src.kind != CHIP_MEM_SRAM)
        return fail(err, errlen, NPU_ERR_RANGE, core,
                    "NoC source is not inside one core's SRAM (or has a bad shape)");
    if (d->op != NPU_NOC_OP_READ && src.core != core)
        return fail(err, errlen, NPU_ERR_RANGE, core,
                    "a NoC write or multicast sends from this core's SRAM");
    if (d->op == NPU_NOC_OP_MULTICAST)
        return check_multicast(e, core, d, err, errlen);
    if (!side(e, d->c, d->m, d->n, d->ldc, &dst) || dst.kind != CHIP_MEM_SRAM)
        return fail(err, errlen, NPU_ERR_RANGE, core,
                    "NoC destination is not inside one core's SRAM (or has a bad shape)");
    if (d->op == NPU_NOC_OP_READ && dst.core != core)
        return fail(err, errlen, NPU_ERR_RANGE, core, "a NoC read lands in this core's SRAM");
    return NPU_OK;
}

void chip_engine_route_add(const struct chip_engines *e, uint32_t a, uint32_t b, uint8_t *seen,
                           struct chip_engine_plan *plan)
{
    uint32_t r = a / e->cols, c = a % e->cols, rb = b / e->cols, cb = b % e->cols;
    while (c != cb || r != rb) {
        uint32_t dir = c != cb ? (cb > c ? 0 : 1) : (rb > r ? 2 : 3); /* E W S N */
        uint32_t link = chip_engines_link(e, r, c, dir);
        bool repeat = seen && seen[link - e->nhbm];
        if (!repeat && plan->path_len < CHIP_PATH_MAX) {
            if (seen)
                seen[link - e->nhbm] = 1;
            plan->path[plan->path_len++] = link;
        }
        if (c != cb)
            c = cb > c ? c + 1 : c - 1;
        else
            r = rb > r ? r + 1 : r - 1;
    }
}

void chip_engine_noc_plan(const struct chip_engines *e, uint32_t core, const struct npu_desc *d,
                          struct chip_engine_plan *plan)
{
    uint8_t seen[CHIP_CORES_MAX * 4];
    uint32_t hops = 0;
    plan->is_flow = true;
    plan->bytes = (uint64_t)d->m * d->n;
    plan->path_len = 0;
    if (d->op == NPU_NOC_OP_MULTICAST) {
        struct rect r = rect_of(d->b);
        memset(seen, 0, (size_t)e->ncores * 4); /* routes to several cores share links */
        for (uint32_t row = r.r0; row <= r.r1; row++)
            for (uint32_t col = r.c0; col <= r.c1; col++) {
                uint32_t dst = row * e->cols + col, h = chip_hops(e->clock, core, dst);
                chip_engine_route_add(e, core, dst, seen, plan);
                hops = h > hops ? h : hops;
            }
    } else {
        struct chip_mem_range src, dst;
        side(e, d->a, d->m, d->n, d->lda, &src);
        side(e, d->c, d->m, d->n, d->ldc, &dst);
        chip_engine_route_add(e, src.core, dst.core, NULL, plan); /* one route: no repeats */
        hops = chip_hops(e->clock, src.core, dst.core);
        if (d->op == NPU_NOC_OP_READ)
            hops *= 2; /* the request travels first */
    }
    plan->latency_cycles = (uint64_t)hops * e->clock->p.hop_cycles;
}

/* Copies m rows of n bytes between two host pointers (either may be NULL: no data). */
static void copy_rows(uint8_t *dst, uint32_t ldd, const uint8_t *src, uint32_t lds,
                      const struct npu_desc *d)
{
    if (!dst || !src)
        return;
    for (uint32_t row = 0; row < d->m; row++)
        memmove(dst + (uint64_t)row * ldd, src + (uint64_t)row * lds, d->n);
}

/* Applies a completed descriptor: data (functional mode), counters, and the signals. */
void chip_engine_noc_finish(struct chip_engines *e, uint32_t core, const struct npu_desc *d,
                            uint64_t now, struct chip_engine_counters *count)
{
    struct chip_mem_range src, dst;
    uint64_t bytes = (uint64_t)d->m * d->n;
    side(e, d->a, d->m, d->n, d->lda, &src);
    /* A write or read has one destination: a 1 x 1 "rectangle" whose address is d->c. */
    struct rect r = d->op == NPU_NOC_OP_MULTICAST ? rect_of(d->b) : (struct rect){ 0, 0, 0, 0 };
    for (uint32_t row = r.r0; row <= r.r1; row++)
        for (uint32_t col = r.c0; col <= r.c1; col++) {
            uint64_t to = d->c;
            if (d->op == NPU_NOC_OP_MULTICAST)
                to += npu_map_instance_base(NPU_MAP_SRAM, row * e->cols + col);
            side(e, to, d->m, d->n, d->ldc, &dst);
            if (e->cfg.functional || (d->flags & NPU_DESC_KEEP_DATA))
                copy_rows(dst.host, d->ldc, src.host, d->lda, d);
            count->bytes += bytes;
            count->sram_bytes += 2 * bytes;
            if (d->op != NPU_NOC_OP_MULTICAST)
                count->noc_byte_hops += bytes * chip_hops(e->clock, src.core, dst.core);
            chip_engine_desc_signal(e, dst.core, d, now,
                                    d->op == NPU_NOC_OP_MULTICAST ? dst.core : d->signal_core);
        }
    if (d->op == NPU_NOC_OP_MULTICAST) {
        struct chip_engine_plan plan; /* the tree's links each carry the data once */
        chip_engine_noc_plan(e, core, d, &plan);
        count->noc_byte_hops += bytes * plan.path_len;
    }
}
