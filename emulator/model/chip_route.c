/* SPDX-License-Identifier: MIT */
/* The ROUTE command's draws (chip_route.h). */
#include "chip_route.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "npu_enums.h"
#include "npu_memmap.h"
#include "npu_structs.h"

/* Whether [addr, addr + len) is in the core's SRAM (*out: where): 0, or NPU_ERR_RANGE with
   the reason in err. */
static int sram_of(const struct chip_mem *mem, uint32_t core, uint64_t addr, uint64_t len,
                   const char *what, struct chip_mem_range *out, char *err, size_t errlen)
{
    if (chip_mem_locate(mem, addr, len, out) && out->kind == CHIP_MEM_SRAM && out->core == core)
        return NPU_OK;
    snprintf(err, errlen, "core %u: ROUTE %s [0x%llx, +%llu) is not in its SRAM", core, what,
             (unsigned long long)addr, (unsigned long long)len);
    return NPU_ERR_RANGE;
}

static int check_args(const struct npu_route_args *a, uint32_t core, char *err, size_t errlen)
{
    if (a->experts == 0 || a->experts > ROUTING_EXPERTS_MAX || a->k == 0 ||
        a->k > a->experts || a->reserved != 0) {
        snprintf(err, errlen, "core %u: ROUTE with experts %u, k %u, reserved %u (experts "
                 "1..%u, k 1..experts, reserved 0)", core, a->experts, a->k, a->reserved,
                 ROUTING_EXPERTS_MAX);
        return NPU_ERR_INVAL;
    }
    if (a->rows == 0 || (uint64_t)a->rows * a->k > NPU_ROUTE_PAIRS_MAX) {
        snprintf(err, errlen, "core %u: ROUTE of %u rows of %u experts (1 row or more, "
                 "%u draws at most)", core, a->rows, a->k, NPU_ROUTE_PAIRS_MAX);
        return NPU_ERR_INVAL;
    }
    return NPU_OK;
}

/* The layer table of a's model: the cached one, rotated from the cached layer, or new. */
static const uint64_t *table_of(struct chip_route *r, const struct npu_route_args *a)
{
    const struct routing_model rm = { .experts = a->experts, .k = a->k,
                                      .skew_milli = a->skew_milli, .seed = a->seed };
    const bool same = r->valid && r->rm.experts == rm.experts && r->rm.k == rm.k &&
                      r->rm.skew_milli == rm.skew_milli && r->rm.seed == rm.seed;
    if (!same)
        routing_layer_table(&rm, a->layer, r->cum);
    else if (r->layer != a->layer)
        routing_layer_table_rotate(&rm, r->layer, a->layer, r->cum);
    r->rm = rm, r->layer = a->layer, r->valid = 1;
    return r->cum;
}

int chip_route_draw(struct chip_route *r, const struct chip_mem *mem, uint32_t core,
                    uint64_t args_addr, char *err, size_t errlen)
{
    struct chip_mem_range ra, ro;
    struct npu_route_args a;
    int rc = sram_of(mem, core, args_addr, sizeof(a), "arguments", &ra, err, errlen);
    if (rc != NPU_OK)
        return rc;
    if (!ra.host) {
        snprintf(err, errlen, "core %u: ROUTE: no SRAM contents to read", core);
        return NPU_ERR_STATE;
    }
    memcpy(&a, ra.host, sizeof(a));
    rc = check_args(&a, core, err, errlen);
    if (rc == NPU_OK)
        rc = sram_of(mem, core, a.out, (uint64_t)a.rows * a.k * sizeof(uint32_t), "output",
                     &ro, err, errlen);
    if (rc != NPU_OK)
        return rc;
    const uint64_t *cum = table_of(r, &a);
    uint32_t row[ROUTING_EXPERTS_MAX];
    for (uint32_t i = 0; i < a.rows; i++) {
        routing_draw(&r->rm, cum, a.layer, a.req, a.pos + i, row);
        if (ro.host) /* the host is little endian, as for descriptors (chip_engines.c) */
            memcpy(ro.host + (uint64_t)i * a.k * sizeof(uint32_t), row, a.k * sizeof(uint32_t));
    }
    return NPU_OK;
}
