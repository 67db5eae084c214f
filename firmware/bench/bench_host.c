/* SPDX-License-Identifier: MIT */
/*
 * Host-cost benchmark, NPU cores: every core issues n submits (bootarg n=, default
 * 0), each a SUBMIT of a chain of k descriptors (k=, default 1, at most NPU_SUBMIT_MAX): DMA
 * copies of bytes= (default 256) bytes from its HBM share into its SRAM, the last one
 * signalling the core, which waits for it before the next command. Nothing here is timed in
 * chip time: `npuctl bench host` measures the host's wall-clock time of the whole run and
 * subtracts a run with n=0 (boot, release, report: the same image doing no commands).
 * Core 0 prints the counts as one BENCH line.
 */
#include <inttypes.h>
#include <stdio.h>

#include "bench.h"
#include "npu/dma.h"
#include "npu/hal.h"
#include "npu/wait.h"

#define SEM_HOST 1u

static struct npu_desc chain[NPU_SUBMIT_MAX];

static void build_chain(uint32_t k, uint32_t bytes)
{
    for (uint32_t i = 0; i < k; i++) {
        struct dma_copy_args a = {
            .src = bench_hbm_base() + (uint64_t)i * bytes,
            .dst = bench_data_base() + (uint64_t)i * bytes, .rows = 1, .row_bytes = bytes,
            .src_stride = bytes, .dst_stride = bytes,
        };
        if (i + 1 == k)
            a.sync = bench_signal(hal_self()->core_id, SEM_HOST);
        dma_copy_desc(&chain[i], &a);
    }
}

int main(void)
{
    hal_wait_release();
    uint64_t n = bench_arg_u64("n", 0), k = bench_arg_u64("k", 1);
    uint64_t bytes = bench_arg_u64("bytes", 256);
    if (k < 1 || k > NPU_SUBMIT_MAX || bytes < 1 || k * bytes > bench_data_bytes()) {
        bench_print_note(LINES_BENCH_ERROR, "host k=%" PRIu64 " bytes=%" PRIu64 ": need 1 <= "
                         "k <= %u and k x bytes within the free SRAM", k, bytes,
                         NPU_SUBMIT_MAX);
        return bench_done(NPU_EXIT_FAIL);
    }
    build_chain((uint32_t)k, (uint32_t)bytes);
    uint32_t count = hal_sem_read(SEM_HOST);
    uint64_t t0 = hal_time_ps();
    for (uint64_t i = 0; i < n; i++)
        if (bench_submit_wait(chain, (uint32_t)k, SEM_HOST, ++count) != NPU_OK)
            return bench_done(NPU_EXIT_FAIL);
    if (hal_self()->core_id == 0)
        lines_print_bench_host(&(struct lines_bench_host){
            .cores = hal_chip()->ncores, .n = n, .k = k, .bytes = bytes,
            .submits = n * hal_chip()->ncores, .descs = n * k * hal_chip()->ncores,
            .chip_ps = hal_time_ps() - t0 });
    return bench_done(NPU_EXIT_OK);
}
