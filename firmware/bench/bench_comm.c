/* SPDX-License-Identifier: MIT */
/* Communicators of the collective benchmarks (bench_comm.h). */
#include "bench_comm.h"

#include "bench.h"
#include "noc/noc.h"
#include "npu/hal.h"

uint64_t bench_comm_scratch(void)
{
    const struct hal_core_info *self = hal_self();
    return self->sram_base + self->sram_size - noc_reserved_bytes() -
           2 * NOC_COMM_SCRATCH_BYTES(NOC_COMM_SEGMENT_DEFAULT);
}

int bench_comm_mesh(struct noc_group *g, struct noc_comm *c)
{
    const struct noc_group_args ga = { .placement = NOC_PLACE_LINEAR,
                                       .rect = { 0, 0, (uint16_t)hal_chip()->rows,
                                                 (uint16_t)hal_chip()->cols },
                                       .mesh_rows = hal_chip()->rows,
                                       .mesh_cols = hal_chip()->cols };
    const struct noc_comm_config cc = { .group = g, .slot = 1,
                                        .scratch = bench_comm_scratch() +
                                                   NOC_COMM_SCRATCH_BYTES(
                                                       NOC_COMM_SEGMENT_DEFAULT) };
    int rc = noc_group_init(g, &ga);
    if (rc == NPU_OK)
        rc = noc_comm_init(c, &cc);
    if (rc != NPU_OK)
        bench_print_note(LINES_BENCH_ERROR, "core=%u setup=%d", hal_self()->core_id, rc);
    return rc;
}
