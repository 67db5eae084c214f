/* SPDX-License-Identifier: MIT */
/*
 * Control core of every benchmark image: prints the chip's parameters (`BENCH chip` and
 * `BENCH engines` lines, what npuctl bench puts in its table headers), releases the NPU
 * cores, waits until each has posted BENCH_DONE_SEM, and prints `BENCH end` with the chip
 * time.
 */
#include "bench.h"
#include "npu/hal.h"
#include "npu/wait.h"

int main(void)
{
    const struct hal_chip_info *c = hal_chip();
    /* Two lines: the chip console cuts lines longer than 240 characters. */
    lines_print_bench_chip(&(struct lines_bench_chip){
        .name = c->config_name, .rows = c->rows, .cols = c->cols, .cores = c->ncores,
        .mode = c->performance ? "performance" : "functional", .freq_mhz = c->freq_mhz,
        .cycle_ps = hal_cycle_ps(), .cmd_cycles = c->cmd_cost_cycles,
        .sram_bytes = c->sram_bytes });
    lines_print_bench_engines(&(struct lines_bench_engines){
        .sa_rows = c->sa_rows, .sa_cols = c->sa_cols,
        .sram_bytes_per_cycle = c->sram_bytes_per_cycle, .hbm_gbps = c->hbm_gbps,
        .hbm_latency_cycles = c->hbm_latency_cycles, .noc_link_gbps = c->noc_link_gbps,
        .noc_hop_cycles = c->noc_hop_cycles });
    hal_release_cores();
    /* A core that ends without reporting stops the run with its status or a deadlock. */
    hal_sem_wait(BENCH_DONE_SEM, c->ncores);
    lines_print_bench_end(&(struct lines_bench_end){ .chip_ps = hal_time_ps() });
    return NPU_EXIT_OK;
}
