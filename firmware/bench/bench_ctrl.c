/* SPDX-License-Identifier: MIT */
/*
 * Control core of every benchmark image: prints the chip's parameters (`BENCH chip` and
 * `BENCH engines` lines, what npuctl bench puts in its table headers), releases the NPU
 * cores, waits until each has posted BENCH_DONE_SEM, and prints `BENCH end` with the chip
 * time.
 */
#include <inttypes.h>
#include <stdio.h>

#include "bench.h"
#include "npu/hal.h"
#include "npu/wait.h"

int main(void)
{
    const struct hal_chip_info *c = hal_chip();
    /* Two lines: the chip console cuts lines longer than 240 characters. */
    printf("BENCH chip name=%s rows=%u cols=%u cores=%u mode=%s freq_mhz=%u cycle_ps=%" PRIu64
           " cmd_cycles=%u sram_bytes=%" PRIu64 "\n", c->config_name, c->rows, c->cols,
           c->ncores, c->performance ? "performance" : "functional", c->freq_mhz,
           hal_cycle_ps(), c->cmd_cost_cycles, c->sram_bytes);
    printf("BENCH engines sa_rows=%u sa_cols=%u sram_bytes_per_cycle=%u hbm_gbps=%u"
           " hbm_latency_cycles=%u noc_link_gbps=%u noc_hop_cycles=%u\n", c->sa_rows,
           c->sa_cols, c->sram_bytes_per_cycle, c->hbm_gbps, c->hbm_latency_cycles,
           c->noc_link_gbps, c->noc_hop_cycles);
    hal_release_cores();
    /* A core that ends without reporting stops the run with its status or a deadlock. */
    hal_sem_wait(BENCH_DONE_SEM, c->ncores);
    printf("BENCH end chip_ps=%" PRIu64 "\n", hal_time_ps());
    return NPU_EXIT_OK;
}
