/* SPDX-License-Identifier: MIT */
/*
 * DMA benchmark, NPU cores: HBM <-> SRAM copies of 1 KiB .. 16 MiB and of the largest whole
 * MiB the core's free SRAM holds, both directions, one 2-D strided copy, and copies by
 * several cores at once (each core has its own HBM channel). Per copy and core it prints the
 * measured chip time (issuing the submit to waking on the completion semaphore) next to its
 * parts by the configuration: the transfer bytes / hbm_gbps, the HBM latency and the command
 * cost; eff = transfer / measured.
 *
 * Every case has a slot: an absolute chip time at which its cores start, the same on every
 * core (bench.h), so the cores of a multi-core case start together without a barrier.
 */
#include "bench.h"
#include "npu/dma.h"
#include "npu/hal.h"
#include "npu/wait.h"

#define SEM_DMA 1u
#define MAX_CASES 48u
#define KIB 1024ull
#define MIB (1024ull * 1024ull)

struct dma_case {
    const char *name;   /* single, largest, strided, multi */
    uint32_t cores;     /* cores 0 .. cores-1 take part */
    bool to_hbm;        /* SRAM -> HBM, else HBM -> SRAM */
    uint32_t rows, row_bytes;
    uint32_t hbm_stride; /* bytes between rows on the HBM side */
    uint64_t start_ps;  /* the slot */
};

static struct dma_case cases[MAX_CASES];
static uint32_t ncases;

/* Adds a case unless its SRAM side does not fit in the free SRAM of this chip. */
static void add_case(const char *name, uint32_t cores, bool to_hbm, uint32_t rows,
                     uint32_t row_bytes, uint32_t hbm_stride)
{
    if (ncases < MAX_CASES && (uint64_t)rows * row_bytes <= bench_data_bytes())
        cases[ncases++] = (struct dma_case){ name, cores, to_hbm, rows, row_bytes, hbm_stride,
                                             0 };
}

static void add_contiguous(const char *name, uint32_t cores, uint64_t bytes)
{
    add_case(name, cores, false, 1, (uint32_t)bytes, (uint32_t)bytes);
    add_case(name, cores, true, 1, (uint32_t)bytes, (uint32_t)bytes);
}

static void build_cases(bool quick)
{
    const uint32_t n = hal_chip()->ncores;
    uint64_t largest = bench_data_bytes() / MIB * MIB;
    for (uint64_t b = KIB; b <= 16 * MIB; b *= 2)
        if (!quick || b == KIB || b == MIB || b == 16 * MIB)
            add_contiguous("single", 1, b);
    if (!quick && largest > 16 * MIB)
        add_contiguous("largest", 1, largest);
    add_case("strided", 1, false, 4096, 256, 512); /* 1 MiB in 256-byte rows, 512 apart */
    uint32_t groups[] = { 2, 8, n };
    for (uint32_t g = quick ? 2 : 0; g < 3; g++)
        if (groups[g] <= n && (g == 2 || groups[g] < n))
            add_contiguous("multi", groups[g], quick ? MIB : 16 * MIB);
}

static uint64_t case_bytes(const struct dma_case *c)
{
    return (uint64_t)c->rows * c->row_bytes;
}

/*
 * Slots: twice a pessimistic figure (every core of the case on one channel of hbm_gbps, the
 * latency, a route across the whole mesh), plus 1 us, in whole us. A case that still
 * overruns makes the next start late, which its lines report (late_ps).
 */
static void place_slots(void)
{
    const struct hal_chip_info *chip = hal_chip();
    uint64_t t = BENCH_SLOT_BASE_PS;
    for (uint32_t i = 0; i < ncases; i++) {
        uint64_t est = bench_cmd_ps() + ((uint64_t)chip->hbm_latency_cycles +
                       (uint64_t)(chip->rows + chip->cols) * chip->noc_hop_cycles) *
                       hal_cycle_ps() + (uint64_t)bench_xfer_ps(case_bytes(&cases[i]) *
                       cases[i].cores, chip->hbm_gbps);
        cases[i].start_ps = t;
        t += (2 * est + HAL_PS_PER_US) / HAL_PS_PER_US * HAL_PS_PER_US;
    }
}

static int run_case(const struct dma_case *c, uint32_t *sem_count)
{
    const struct hal_chip_info *chip = hal_chip();
    uint64_t sram = bench_data_base(), hbm = bench_hbm_base();
    struct dma_copy_args a = {
        .src = c->to_hbm ? sram : hbm, .dst = c->to_hbm ? hbm : sram, .rows = c->rows,
        .row_bytes = c->row_bytes, .src_stride = c->to_hbm ? c->row_bytes : c->hbm_stride,
        .dst_stride = c->to_hbm ? c->hbm_stride : c->row_bytes,
        .sync = bench_signal(hal_self()->core_id, SEM_DMA),
    };
    struct npu_desc d;
    dma_copy_desc(&d, &a);
    uint64_t late = bench_sleep_until(c->start_ps), t0 = hal_time_ps();
    int rc = bench_submit_wait(&d, 1, SEM_DMA, ++*sem_count);
    if (rc != NPU_OK)
        return rc;
    uint64_t ps = hal_time_ps() - t0, bytes = case_bytes(c);
    double xfer = bench_xfer_ps(bytes, chip->hbm_gbps);
    lines_print_bench_dma(&(struct lines_bench_dma){
        .case_name = c->name, .cores = c->cores, .core = hal_self()->core_id,
        .dir = c->to_hbm ? "sram>hbm" : "hbm>sram", .bytes = bytes, .rows = c->rows, .ps = ps,
        .xfer_ps = xfer, .latency_ps = (uint64_t)chip->hbm_latency_cycles * hal_cycle_ps(),
        .cmd_ps = bench_cmd_ps(), .late_ps = late, .eff = xfer / (double)ps });
    return NPU_OK;
}

int main(void)
{
    hal_wait_release();
    build_cases(bench_has_flag("quick"));
    place_slots();
    uint32_t sem_count = hal_sem_read(SEM_DMA);
    int failed = 0;
    for (uint32_t i = 0; i < ncases; i++)
        if (hal_self()->core_id < cases[i].cores)
            failed += run_case(&cases[i], &sem_count) != NPU_OK;
    return bench_done(failed ? NPU_EXIT_FAIL : NPU_EXIT_OK);
}
