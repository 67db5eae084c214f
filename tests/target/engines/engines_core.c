/* SPDX-License-Identifier: MIT */
/*
 * Engines image, NPU core: exercises the DMA, matrix and NoC engines of this core and their
 * semaphores (engine_checks.h), reporting to the control core. Buffers live in this core's
 * SRAM past the image (engines_data_base()), and in this core's share of HBM.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "engine_checks.h"
#include "npu/dma.h"
#include "npu/hal.h"
#include "npu/matrix.h"
#include "npu/mmio.h"
#include "npu/noc_endpoint.h"
#include "npu/wait.h"

extern char __image_end[];
#define SEM_A 10u
#define SEM_B 11u
#define SEM_NOC 12u
#define SEM_GATE 13u
#define SEM_AFTER 14u
#define SEM_MCAST 17u
#define XFER_BYTES 61440u    /* divides evenly at 30, 64 and 120 GB/s */

#define expect(ok, check, ...) checks_expect((ok), (check), echeck_names[check], __VA_ARGS__)

static struct npu_desc descs[4];
static uint64_t sram, hbm; /* this core's data area in SRAM, and its share of HBM */

uint64_t engines_data_base(void)
{
    /* The same offset on every core: the image is the same everywhere. */
    return ((uint64_t)(uintptr_t)__image_end + 0xffff) & ~0xffffull;
}

static uint8_t *at(uint64_t offset)
{
    return (uint8_t *)(uintptr_t)(sram + offset);
}

static struct engine_sync signal_self(uint32_t sem)
{
    return (struct engine_sync){ .signal = true, .signal_core = (uint16_t)hal_self()->core_id,
                                 .signal_sem = (uint8_t)sem, .signal_value = 1 };
}

/* Submits descs[0..n) and waits until local semaphore `sem` reaches `value`. */
static int run_and_wait(uint32_t n, uint32_t sem, uint32_t value)
{
    int rc = engine_submit(descs, n);
    return rc != NPU_OK ? rc : hal_sem_wait(sem, value);
}

static void check_dma_data(void)
{
    const uint32_t len = 4096;
    for (uint32_t i = 0; i < len; i++)
        at(0)[i] = (uint8_t)(i * 7 + hal_self()->core_id);
    memset(at(0x1000), 0, len);
    struct dma_copy_args out = { .src = sram, .dst = hbm, .rows = 1, .row_bytes = len,
                                 .src_stride = len, .dst_stride = len,
                                 .sync = signal_self(SEM_A) };
    struct dma_copy_args in = { .src = hbm, .dst = sram + 0x1000, .rows = 16, .row_bytes = 64,
                                .src_stride = 256, .dst_stride = 128,
                                .sync = signal_self(SEM_A) };
    in.sync.wait = true, in.sync.wait_sem = SEM_A, in.sync.wait_value = 1;
    dma_copy_desc(&descs[0], &out);
    dma_copy_desc(&descs[1], &in);
    int rc = run_and_wait(2, SEM_A, 2);
    uint32_t bad = 0;
    for (uint32_t row = 0; row < 16; row++)
        bad += memcmp(at(0x1000 + row * 128), at(row * 256), 64) != 0;
    expect(rc == NPU_OK && bad == 0, ECHECK_DMA_DATA, "rc %d, %u of 16 strided rows differ",
           rc, bad);
}

static void check_dma_time(void)
{
    const struct hal_chip_info *c = hal_chip();
    struct dma_copy_args a = { .src = sram + 0x10000, .dst = hbm + 0x10000, .rows = 1,
                               .row_bytes = XFER_BYTES, .src_stride = XFER_BYTES,
                               .dst_stride = XFER_BYTES, .sync = signal_self(SEM_B) };
    dma_copy_desc(&descs[0], &a);
    uint64_t t0 = hal_time_ps();
    int rc = run_and_wait(1, SEM_B, 1);
    uint64_t got = hal_time_ps() - t0;
    uint64_t want = (c->cmd_cost_cycles + c->hbm_latency_cycles) * hal_cycle_ps() +
                    (uint64_t)XFER_BYTES * 1000 / c->hbm_gbps;
    expect(rc == NPU_OK && got == want, ECHECK_DMA_TIME, "rc %d, %" PRIu64 " ps, expected %"
           PRIu64, rc, got, want);
}


static uint64_t timed_gemm_and_dma(bool gemm, bool dma, uint32_t *sem_count)
{
    uint32_t n = 0;
    struct matrix_gemm_desc_args g = {
        .op = NPU_MATRIX_OP_GEMM_F32, .a = sram + 0x20000, .b = sram + 0x24000,
        .c = sram + 0x28000, .m = 32, .n = 32, .k = 32, .lda = 32, .ldb = 32, .ldc = 32,
        .sync = signal_self(SEM_B),
    };
    struct dma_copy_args d = { .src = sram + 0x10000, .dst = hbm + 0x10000, .rows = 1,
                               .row_bytes = XFER_BYTES, .src_stride = XFER_BYTES,
                               .dst_stride = XFER_BYTES, .sync = signal_self(SEM_B) };
    if (gemm)
        matrix_gemm_desc(&descs[n++], &g);
    if (dma)
        dma_copy_desc(&descs[n++], &d);
    uint64_t t0 = hal_time_ps();
    *sem_count += n;
    if (run_and_wait(n, SEM_B, *sem_count) != NPU_OK)
        return 0;
    return hal_time_ps() - t0;
}

static void check_overlap(void)
{
    uint32_t count = hal_sem_read(SEM_B);
    uint64_t flops0 = engine_perf_read(NPU_PERF_FLOPS);
    uint64_t busy0 = engine_perf_read(NPU_PERF_MATRIX_BUSY_PS);
    uint64_t g = timed_gemm_and_dma(true, false, &count);
    uint64_t flops = engine_perf_read(NPU_PERF_FLOPS) - flops0;
    uint64_t busy = engine_perf_read(NPU_PERF_MATRIX_BUSY_PS) - busy0;
    uint64_t cost = hal_chip()->cmd_cost_cycles * hal_cycle_ps();
    expect(flops == 2 * 32 * 32 * 32 && busy == g - cost, ECHECK_OVERLAP,
           "counters after a 32^3 GEMM: %" PRIu64 " FLOPs (expected 65536), matrix busy %"
           PRIu64 " ps (expected %" PRIu64 ")", flops, busy, g - cost);
    uint64_t d = timed_gemm_and_dma(false, true, &count);
    uint64_t both = timed_gemm_and_dma(true, true, &count);
    uint64_t longer = g > d ? g : d;
    expect(g && d && both == longer, ECHECK_OVERLAP, "GEMM %" PRIu64 " ps, DMA %" PRIu64
           " ps, together %" PRIu64 " ps (expected %" PRIu64 ")", g, d, both, longer);
}

static void check_noc(void)
{
    const struct hal_core_info *self = hal_self();
    uint32_t n = hal_chip()->ncores, next = (self->core_id + 1) % n;
    uint32_t prev = (self->core_id + n - 1) % n;
    struct hal_core_info dst;
    hal_core_info_get(next, &dst);
    for (uint32_t i = 0; i < 1024; i++)
        at(0x8400)[i] = (uint8_t)(i + 31 * self->core_id);
    struct noc_write_args w = {
        .src = sram + 0x8400, .dst = dst.sram_base + (sram - self->sram_base) + 0x8000,
        .rows = 1,
        .row_bytes = 1024, .src_stride = 1024, .dst_stride = 1024,
        .sync = { .signal = true, .signal_core = (uint16_t)next, .signal_sem = SEM_NOC,
                  .signal_value = 1 },
    };
    noc_write_desc(&descs[0], &w);
    int rc = engine_submit(descs, 1);
    if (rc == NPU_OK)
        rc = hal_sem_wait_until(SEM_NOC, 1, hal_time_ps() + HAL_PS_PER_S);
    uint32_t bad = 0;
    for (uint32_t i = 0; i < 1024; i++)
        bad += at(0x8000)[i] != (uint8_t)(i + 31 * prev);
    expect(rc == NPU_OK && bad == 0, ECHECK_NOC, "rc %d, %u of 1024 bytes from core %u wrong",
           rc, bad, prev);
}

/* After check_noc every core's 0x8000 inbox holds its predecessor's bytes. */
static void check_noc_read_multicast(void)
{
    const struct hal_core_info *self = hal_self();
    uint32_t n = hal_chip()->ncores, next = (self->core_id + 1) % n;
    struct hal_core_info other;
    hal_core_info_get(next, &other);
    uint64_t next_inbox = other.sram_base + (sram - self->sram_base) + 0x8000;
    struct noc_read_args r = { .src = next_inbox, .dst = sram + 0x9800, .rows = 1,
                               .row_bytes = 256, .src_stride = 256, .dst_stride = 256,
                               .sync = signal_self(SEM_B) };
    noc_read_desc(&descs[0], &r);
    uint32_t count = hal_sem_read(SEM_B) + 1;
    int rc = run_and_wait(1, SEM_B, count);
    uint32_t bad = 0;
    for (uint32_t i = 0; i < 256; i++) /* the next core's inbox holds this core's bytes */
        bad += at(0x9800)[i] != (uint8_t)(i + 31 * self->core_id);
    if (self->core_id == 0) {
        for (uint32_t i = 0; i < 512; i++)
            at(0x9c00)[i] = (uint8_t)(255 - i);
        struct noc_multicast_args m = {
            .src = sram + 0x9c00, .dst_offset = (sram - self->sram_base) + 0xa000, .rows = 1,
            .row_bytes = 512, .src_stride = 512, .dst_stride = 512, .row0 = 0, .col0 = 0,
            .row1 = (uint16_t)(hal_chip()->rows - 1), .col1 = (uint16_t)(hal_chip()->cols - 1),
            .sync = { .signal = true, .signal_sem = SEM_MCAST, .signal_value = 1 },
        };
        noc_multicast_desc(&descs[0], &m);
        rc |= engine_submit(descs, 1);
    }
    if (rc == NPU_OK)
        rc = hal_sem_wait_until(SEM_MCAST, 1, hal_time_ps() + HAL_PS_PER_S);
    for (uint32_t i = 0; i < 512; i++)
        bad += at(0xa000)[i] != (uint8_t)(255 - i);
    expect(rc == NPU_OK && bad == 0, ECHECK_NOC_RM, "rc %d, %u bytes wrong", rc, bad);
}

static void check_wait(void)
{
    struct dma_copy_args a = { .src = sram, .dst = hbm, .rows = 1, .row_bytes = 256,
                               .src_stride = 256, .dst_stride = 256,
                               .sync = signal_self(SEM_AFTER) };
    a.sync.wait = true, a.sync.wait_sem = SEM_GATE, a.sync.wait_value = 1;
    a.sync.irq = true;
    dma_copy_desc(&descs[0], &a);
    uintptr_t irq_status = (uintptr_t)hal_self()->regs_base + CORE_IRQ_STATUS_OFFSET;
    int rc = engine_submit(descs, 1);
    hal_sleep_ps(HAL_PS_PER_US);
    uint32_t blocked = engine_pending(NPU_ENGINE_DMA);
    bool early_irq = mmio_read32(irq_status) & CORE_IRQ_STATUS_ENGINE_MASK;
    struct hal_sem_post_args open = { .core = hal_self()->core_id, .sem = SEM_GATE,
                                      .op = NPU_SEM_OP_INC, .value = 1 };
    uint64_t opened = hal_time_ps();
    hal_sem_post(&open);
    hal_sem_wait(SEM_AFTER, 1);
    bool irq = mmio_read32(irq_status) & CORE_IRQ_STATUS_ENGINE_MASK;
    mmio_write32(irq_status, CORE_IRQ_STATUS_ENGINE_MASK);
    expect(rc == NPU_OK && blocked == 1 && hal_time_ps() > opened && !early_irq && irq &&
           engine_pending(NPU_ENGINE_DMA) == 0, ECHECK_WAIT,
           "rc %d, %u pending while closed, done at %" PRIu64 " ps, opened at %" PRIu64
           ", IRQ_STATUS.ENGINE before %d after %d", rc, blocked, hal_time_ps(), opened,
           early_irq, irq);
}

static void check_bad(void)
{
    struct dma_copy_args a = { .src = 0x8, .dst = sram, .rows = 1, .row_bytes = 64,
                               .src_stride = 64, .dst_stride = 64 };
    dma_copy_desc(&descs[0], &a);
    dma_copy_desc(&descs[1], &a);
    descs[1].a = sram; /* a good one first would still be refused with the bad one */
    struct npu_desc swap = descs[0];
    descs[0] = descs[1];
    descs[1] = swap;
    int rc = engine_submit(descs, 2);
    descs[0].engine = 9;
    int rc_engine = engine_submit(descs, 1);
    expect(rc == NPU_ERR_RANGE && rc_engine == NPU_ERR_INVAL &&
           engine_pending(NPU_ENGINE_DMA) == 0, ECHECK_BAD,
           "bad address gave %d, bad engine gave %d, %u queued", rc, rc_engine,
           engine_pending(NPU_ENGINE_DMA));
}

int main(void)
{
    const struct hal_chip_info *c = hal_chip();
    sram = engines_data_base();
    hbm = c->hbm_base + hal_self()->core_id * (c->hbm_size / c->ncores);
    hal_wait_release();
    check_dma_data();
    check_dma_time();
    check_gemm_data();
    check_vector_data();
    check_overlap();
    check_noc();
    check_noc_read_multicast();
    check_wait();
    check_bad();
    return checks_done();
}
