/* SPDX-License-Identifier: MIT */
/*
 * Engine queues on the chip clock (emulator/model/chip_engines.c): submit checks, exact
 * DMA / NoC / GEMM completion times, bandwidth sharing on a NoC link, in-order queues, WAIT
 * and SIGNAL, functional effects and performance mode. A 2x2 mesh, 2000 ps cycles, HBM and
 * NoC links at 64 GB/s (1 byte per 15.625 ps), 100 cycles of HBM latency.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "chip_engine_log.h"
#include "chip_fixture.h"
#include "chip_stats.h"
#include "matrix_engine.h"
#include "vector_engine.h"

#define HOP (2 * CYCLE)

static uint64_t sram_addr(uint32_t core, uint64_t off)
{
    return npu_map_instance_base(NPU_MAP_SRAM, core) + off;
}

static uint64_t hbm_addr(uint64_t off)
{
    return npu_memmap[NPU_MAP_HBM].base + off;
}

static int setup_mode(void **state, bool functional, uint32_t stacks)
{
    *state = fix_new(functional, stacks);
    return 0;
}

static int setup(void **state)
{
    return setup_mode(state, true, 0);
}

static int setup_perf(void **state)
{
    return setup_mode(state, false, 0);
}

/* One HBM stack on the west edge: it sits at router (1, 0), core 2's. */
static int setup_stack(void **state)
{
    return setup_mode(state, true, 1);
}

/* Heterogeneous cores: cores 1 and 3 have a 4x4 array, 64 B/cycle of SRAM, 4 vector lanes
   and a 128 GB/s HBM channel (the others: 16x16, 256, 16, 64 GB/s). */
static const bool alt_cores[NCORES] = { false, true, false, true };
static const struct chip_engine_sizes alt_sizes = {
    .sa_rows = 4, .sa_cols = 4, .sram_bytes_per_cycle = 64, .vec_lanes = 4,
    .hbm_bytes_per_s = 128000000000ull,
};

static int setup_alt(void **state)
{
    *state = fix_new_alt(false, 0, alt_cores, alt_sizes);
    return 0;
}

static int teardown(void **state)
{
    fix_free(*state);
    return 0;
}

/* Writes descriptors at offset 0 of the core's SRAM and submits them. */
static int submit(struct fix *f, uint32_t core, const struct npu_desc *d, uint32_t n)
{
    char err[256] = "";
    memcpy(f->sram[core], d, n * sizeof(*d));
    return chip_engines_submit(&f->e, core, sram_addr(core, 0), n, err, sizeof(err));
}

static struct npu_desc copy(enum npu_engine eng, uint64_t src, uint64_t dst, uint32_t bytes,
                            uint32_t signal_core, uint32_t sem)
{
    struct npu_desc d = { .engine = (uint8_t)eng, .op = NPU_DMA_OP_COPY, .a = src, .c = dst,
                          .m = 1, .n = bytes, .lda = bytes, .ldc = bytes };
    if (signal_core != UINT32_MAX) {
        d.flags = NPU_DESC_SIGNAL;
        d.signal_core = (uint16_t)signal_core;
        d.signal_sem = (uint8_t)sem;
        d.signal_value = 1;
    }
    return d;
}

/* Every hart but `keep` exits; `keep` waits for semaphore sem >= value; returns wake time. */
static uint64_t wait_for(struct fix *f, uint32_t keep, uint32_t sem, uint32_t value)
{
    const struct chip_wait w = { .kind = NPU_WAIT_SEM, .sem = sem, .value = value };
    uint32_t cause;
    for (uint32_t h = 0; h < f->c.nharts; h++)
        if (h != keep && f->c.harts[h].state == CHIP_HART_RUNNING)
            chip_hart_exit(&f->c, h, 0);
    assert_int_equal(chip_hart_wait(&f->c, keep, &w, &cause), NPU_OK);
    assert_int_equal(cause, 0);
    assert_int_equal(chip_clock_advance(&f->c), NPU_OK);
    assert_int_equal(f->c.harts[keep].state, CHIP_HART_RUNNING);
    return chip_hart_time(&f->c, keep);
}

static void test_dma_alone_exact_time_and_data(void **state)
{
    struct fix *f = *state;
    for (uint32_t i = 0; i < 64000; i++)
        f->sram[1][0x10000 + i] = (uint8_t)i;
    struct npu_desc d = copy(NPU_ENGINE_DMA, sram_addr(1, 0x10000), hbm_addr(0x1000), 64000,
                             1, 3);
    assert_int_equal(submit(f, 1, &d, 1), NPU_OK);
    /* 64000 bytes at 64 GB/s = 1000000 ps, plus 100 cycles of latency. */
    assert_int_equal(wait_for(f, 1, 3, 1), 1000000 + 100 * CYCLE);
    assert_memory_equal(f->hbm + 0x1000, f->sram[1] + 0x10000, 64000);
    assert_int_equal(chip_engines_counters(&f->e, 1, NPU_ENGINE_DMA)->bytes, 64000);
    assert_int_equal(chip_engines_counters(&f->e, 1, NPU_ENGINE_DMA)->busy_ps,
                     1000000 + 100 * CYCLE);
}

/* The second DMA queue: its copy does not wait behind the first queue's (two descriptors on
   DMA run one after the other), and the two queues share the core's HBM channel (each half
   of it while both run). Counted apart: DMA2's counters hold its own copy. */
static void test_dma2_beside_dma(void **state)
{
    struct fix *f = *state;
    for (uint32_t i = 0; i < 64000; i++)
        f->hbm[0x40000 + i] = (uint8_t)(i * 7);
    struct npu_desc d[3] = {
        copy(NPU_ENGINE_DMA, sram_addr(1, 0x10000), hbm_addr(0x1000), 64000, 1, 3),
        copy(NPU_ENGINE_DMA, sram_addr(1, 0x20000), hbm_addr(0x20000), 64000, 1, 3),
        copy(NPU_ENGINE_DMA2, hbm_addr(0x40000), sram_addr(1, 0x30000), 64000, 1, 4),
    };
    assert_int_equal(submit(f, 1, d, 3), NPU_OK);
    /* both queues' first copies run at 32 GB/s: 2000000 ps, then the latency */
    assert_int_equal(wait_for(f, 1, 4, 1), 2000000 + 100 * CYCLE);
    assert_memory_equal(f->sram[1] + 0x30000, f->hbm + 0x40000, 64000);
    /* DMA's second copy started after its first: alone on the channel from 2000000 ps */
    assert_int_equal(wait_for(f, 1, 3, 2), 2000000 + 100 * CYCLE + 1000000 + 100 * CYCLE);
    assert_int_equal(chip_engines_counters(&f->e, 1, NPU_ENGINE_DMA2)->bytes, 64000);
    assert_int_equal(chip_engines_counters(&f->e, 1, NPU_ENGINE_DMA)->bytes, 128000);
}

static void test_queue_runs_in_order(void **state)
{
    struct fix *f = *state;
    struct npu_desc d[2] = {
        copy(NPU_ENGINE_DMA, sram_addr(0, 0x10000), hbm_addr(0), 64000, 0, 3),
        copy(NPU_ENGINE_DMA, sram_addr(0, 0x10000), hbm_addr(0x20000), 64000, 0, 3),
    };
    assert_int_equal(submit(f, 0, d, 2), NPU_OK);
    assert_int_equal(chip_engines_pending(&f->e, 0, NPU_ENGINE_DMA), 2);
    assert_int_equal(wait_for(f, 0, 3, 2), 2 * (1000000 + 100 * CYCLE));
    assert_int_equal(chip_engines_pending(&f->e, 0, NPU_ENGINE_DMA), 0);
}

/* The engine log (chip_engine_log.h): core 0's two queued copies, each with its start,
   length and time queued, in chip microseconds; core 1's copy filtered out; the file a
   complete JSON document. */
static void test_engine_log(void **state)
{
    struct fix *f = *state;
    char path[] = "/tmp/npu-engine-log-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    struct chip_engine_log log;
    assert_int_equal(chip_engine_log_open(&log, path, 0), NPU_OK);
    f->e.cfg.log = &log;
    struct npu_desc d[2] = {
        copy(NPU_ENGINE_DMA, sram_addr(0, 0x10000), hbm_addr(0), 64000, 0, 3),
        copy(NPU_ENGINE_DMA, sram_addr(0, 0x10000), hbm_addr(0x20000), 64000, 0, 3),
    };
    struct npu_desc other = copy(NPU_ENGINE_DMA, sram_addr(1, 0x10000), hbm_addr(0x40000),
                                 64000, UINT32_MAX, 0);
    assert_int_equal(submit(f, 0, d, 2), NPU_OK);
    assert_int_equal(submit(f, 1, &other, 1), NPU_OK);
    assert_int_equal(wait_for(f, 0, 3, 2), 2 * (1000000 + 100 * CYCLE));
    assert_int_equal(chip_engines_pending(&f->e, 1, NPU_ENGINE_DMA), 0); /* ran, unlogged */
    assert_int_equal(chip_engine_log_close(&log), NPU_OK);
    f->e.cfg.log = NULL;
    assert_int_equal(log.events, 2);
    char text[2048] = "";
    FILE *in = fopen(path, "r");
    assert_non_null(in);
    size_t n = fread(text, 1, sizeof(text) - 1, in);
    fclose(in);
    unlink(path);
    text[n] = '\0';
    /* 1.2 us each (1 us of transfer, 100 cycles of latency); the second queued 1.2 us */
    assert_non_null(strstr(text, "{\"name\": \"dma 1x64000 B\", \"ph\": \"X\", \"pid\": 0, "
                                 "\"tid\": \"dma\", \"ts\": 0.000000, \"dur\": 1.200000, "
                                 "\"args\": {\"queued_us\": 0.000000"));
    assert_non_null(strstr(text, "\"ts\": 1.200000, \"dur\": 1.200000, "
                                 "\"args\": {\"queued_us\": 1.200000"));
    assert_null(strstr(text, "\"pid\": 1"));
    assert_non_null(strstr(text, "\"traceEvents\": ["));
    assert_string_equal(text + n - 4, "\n]}\n");
}

static void test_noc_link_shared(void **state)
{
    struct fix *f = *state;
    /* 0 -> 3 crosses E(0,0) and S(0,1); 1 -> 3 crosses S(0,1): they share S(0,1). */
    struct npu_desc a = copy(NPU_ENGINE_NOC, sram_addr(0, 0x10000), sram_addr(3, 0x20000),
                             64000, 3, 1);
    struct npu_desc b = copy(NPU_ENGINE_NOC, sram_addr(1, 0x10000), sram_addr(3, 0x40000),
                             64000, 3, 1);
    memset(f->sram[0] + 0x10000, 0xaa, 64000);
    assert_int_equal(submit(f, 0, &a, 1), NPU_OK);
    assert_int_equal(submit(f, 1, &b, 1), NPU_OK);
    /* Half of 64 GB/s each: 2000000 ps; then 1 hop (4000 ps) for 1 -> 3, 2 hops for 0 -> 3,
     * and the increment lands with the data. */
    assert_int_equal(wait_for(f, 3, 1, 1), 2000000 + 1 * HOP);
    /* Hart 3 runs; applying the rest of the queue lands 0 -> 3 at 2 hops, nobody to wake. */
    assert_int_equal(chip_clock_advance(&f->c), NPU_ERR_DEADLOCK);
    assert_int_equal(f->c.time_ps, 2000000 + 2 * HOP);
    assert_int_equal(f->c.harts[3].sems[1], 2);
    assert_int_equal(f->sram[3][0x20000], 0xaa);
}

/*
 * Four cores start DMAs at the same instant, each on its own HBM channel. Core 0's is the
 * shortest, so the later starts leave the earliest transfer end where it was: its event is
 * kept rather than superseded (a re-scheduled copy would sit right after it in the event
 * order, the control hart having scheduled nothing in between). 7 events reach the wake:
 * 4 starts, that transfer end, core 0's descriptor end and its semaphore increment; three
 * stale transfer-end events would make 10.
 */
static void test_transfer_end_event_kept(void **state)
{
    struct fix *f = *state;
    for (uint32_t core = 0; core < NCORES; core++) {
        struct npu_desc d = copy(NPU_ENGINE_DMA, sram_addr(core, 0x10000),
                                 hbm_addr(0x40000 * core), core ? 128000 : 64000, 0, 3);
        assert_int_equal(submit(f, core, &d, 1), NPU_OK);
    }
    assert_int_equal(wait_for(f, 0, 3, 1), 1000000 + 100 * CYCLE);
    assert_int_equal(f->c.events_applied, 7);
    /* The others: 2000000 ps at 64 GB/s, the latency, then their hops to core 0. */
    assert_int_equal(wait_for(f, 0, 3, 4), 2000000 + 100 * CYCLE + 2 * HOP);
}

static void test_gemm_time_and_data(void **state)
{
    struct fix *f = *state;
    float *a = (float *)(f->sram[2] + 0x1000), *b = (float *)(f->sram[2] + 0x2000);
    float *c = (float *)(f->sram[2] + 0x3000);
    a[0] = 1, a[1] = 2, a[2] = 3, a[3] = 4; /* 2 x 2 */
    b[0] = 5, b[1] = 6, b[2] = 7, b[3] = 8;
    struct npu_desc d = { .engine = NPU_ENGINE_MATRIX, .op = NPU_MATRIX_OP_GEMM_F32,
                          .flags = NPU_DESC_SIGNAL, .signal_core = 2, .signal_sem = 4,
                          .signal_value = 1, .a = sram_addr(2, 0x1000),
                          .b = sram_addr(2, 0x2000), .c = sram_addr(2, 0x3000), .m = 2, .n = 2,
                          .k = 2, .lda = 2, .ldb = 2, .ldc = 2 };
    assert_int_equal(submit(f, 2, &d, 1), NPU_OK);
    const struct matrix_engine_cfg cfg = { .rows = 16, .cols = 16, .sram_bytes_per_cycle = 256 };
    uint64_t cycles = matrix_gemm_cycles(&cfg, 2, 2, 2, MATRIX_FP32, 0, NULL);
    assert_int_equal(wait_for(f, 2, 4, 1), cycles * CYCLE);
    assert_true(c[0] == 19 && c[1] == 22 && c[2] == 43 && c[3] == 50);
    assert_int_equal(chip_engines_counters(&f->e, 2, NPU_ENGINE_MATRIX)->flops, 16);
}

/* Two 2 x 2 GEMMs in one descriptor: one A (stride 0), B and C 0x100 bytes apart. Each
   result is its own GEMM's, in the time of a batch of 2; a batch is refused when its C
   operands overlap, one of its operands leaves the SRAM, it carries strides without a
   batch, or it is larger than NPU_GEMM_BATCH_MAX. */
static void test_gemm_batch(void **state)
{
    struct fix *f = *state;
    float *a = (float *)(f->sram[2] + 0x1000), *b = (float *)(f->sram[2] + 0x2000);
    float *c = (float *)(f->sram[2] + 0x3000);
    a[0] = 1, a[1] = 2, a[2] = 3, a[3] = 4;
    b[0] = 5, b[1] = 6, b[2] = 7, b[3] = 8;       /* B0 */
    b[64] = 1, b[65] = 0, b[66] = 0, b[67] = 1;   /* B1 = I at +0x100 */
    struct npu_desc d = { .engine = NPU_ENGINE_MATRIX, .op = NPU_MATRIX_OP_GEMM_F32,
                          .flags = NPU_DESC_SIGNAL, .signal_core = 2, .signal_sem = 4,
                          .signal_value = 1, .a = sram_addr(2, 0x1000),
                          .b = sram_addr(2, 0x2000), .c = sram_addr(2, 0x3000), .m = 2, .n = 2,
                          .k = 2, .lda = 2, .ldb = 2, .ldc = 2, .batch = 2, .stride_b = 0x100,
                          .stride_c = 0x100 };
    assert_int_equal(submit(f, 2, &d, 1), NPU_OK);
    const struct matrix_engine_cfg cfg = { .rows = 16, .cols = 16, .sram_bytes_per_cycle = 256 };
    uint64_t cycles = matrix_gemm_batch_cycles(&cfg, 2, 2, 2, MATRIX_FP32, 0, 2, NULL);
    assert_true(cycles < 2 * matrix_gemm_cycles(&cfg, 2, 2, 2, MATRIX_FP32, 0, NULL));
    assert_int_equal(wait_for(f, 2, 4, 1), cycles * CYCLE);
    assert_true(c[0] == 19 && c[1] == 22 && c[2] == 43 && c[3] == 50);
    assert_true(c[64] == 1 && c[65] == 2 && c[66] == 3 && c[67] == 4);
    assert_int_equal(chip_engines_counters(&f->e, 2, NPU_ENGINE_MATRIX)->flops, 32);
    struct npu_desc bad = d;
    bad.stride_c = 8; /* C is 16 bytes */
    assert_int_equal(submit(f, 2, &bad, 1), NPU_ERR_INVAL);
    bad = d, bad.stride_c = SRAM_BYTES; /* the second C past the SRAM */
    assert_int_equal(submit(f, 2, &bad, 1), NPU_ERR_RANGE);
    bad = d, bad.stride_b = 0x1000; /* the second B is the first C */
    assert_int_equal(submit(f, 2, &bad, 1), NPU_ERR_INVAL);
    bad = d, bad.batch = 1;
    assert_int_equal(submit(f, 2, &bad, 1), NPU_ERR_INVAL);
    bad = d, bad.batch = NPU_GEMM_BATCH_MAX + 1, bad.stride_b = bad.stride_c = 0x10;
    assert_int_equal(submit(f, 2, &bad, 1), NPU_ERR_INVAL);
}

static struct npu_desc gemm32(uint32_t core, uint8_t sem)
{
    return (struct npu_desc){ .engine = NPU_ENGINE_MATRIX, .op = NPU_MATRIX_OP_GEMM_F32,
                              .flags = NPU_DESC_SIGNAL, .signal_core = (uint16_t)core,
                              .signal_sem = sem, .signal_value = 1, .a = sram_addr(core, 0x1000),
                              .b = sram_addr(core, 0x2000), .c = sram_addr(core, 0x3000),
                              .m = 32, .n = 32, .k = 32, .lda = 32, .ldb = 32, .ldc = 32 };
}

/* Matrix commands queued behind each other (docs/engines.md, "Matrix"): one that was ready
   when the one before it started, and touches nothing that one writes, flows through the
   array right behind it and costs its folds alone; one that reads the other's output, or
   follows an idle array, pays its weight load and fill and drain. */
static void test_gemm_pipelined(void **state)
{
    struct fix *f = *state;
    const struct matrix_engine_cfg cfg = { .rows = 16, .cols = 16, .sram_bytes_per_cycle = 256 };
    struct matrix_gemm_timing t;
    const uint64_t full = matrix_gemm_batch_cycles(&cfg, 32, 32, 32, MATRIX_FP32, 0, 1, &t);
    const uint64_t piped = t.stream_cycles > t.sram_cycles ? t.stream_cycles : t.sram_cycles;
    assert_true(piped < full && t.stream_cycles == 4 * 32); /* 2 x 2 folds of max(32, 16) */
    struct npu_desc d[3] = { gemm32(0, 4), gemm32(0, 4), gemm32(0, 4) };
    d[1].a = sram_addr(0, 0x5000), d[1].b = sram_addr(0, 0x6000), d[1].c = sram_addr(0, 0x7000);
    d[2].a = d[1].c; /* reads the second's output */
    assert_int_equal(submit(f, 0, d, 3), NPU_OK);
    assert_int_equal(wait_for(f, 0, 4, 2), (full + piped) * CYCLE);
    assert_int_equal(wait_for(f, 0, 4, 3), (full + piped + full) * CYCLE);
    /* after an idle array the weight load and the drain are paid again */
    const uint64_t t0 = chip_hart_time(&f->c, 0);
    assert_int_equal(submit(f, 0, &d[1], 1), NPU_OK);
    assert_int_equal(wait_for(f, 0, 4, 4), t0 + full * CYCLE);
    /* behind a short command (one fold of 16 cycles: shorter than a load and a drain,
       2 x 16 + 16 - 2), the first one's results are still draining when a third one's
       weights load: a third that reads them pays in full, one that does not flows on */
    struct npu_desc s3[3] = { gemm32(0, 4), gemm32(0, 4), gemm32(0, 4) };
    s3[1].a = sram_addr(0, 0x5000), s3[1].b = sram_addr(0, 0x6000), s3[1].c = sram_addr(0, 0x7000);
    s3[1].m = 4, s3[1].n = 16, s3[1].k = 16, s3[1].lda = s3[1].ldb = s3[1].ldc = 16;
    s3[2].a = s3[0].c, s3[2].c = sram_addr(0, 0x9000); /* reads the first's output */
    const uint64_t small = matrix_gemm_batch_cycles(&cfg, 4, 16, 16, MATRIX_FP32, 0, 1, &t);
    const uint64_t small_piped = t.stream_cycles > t.sram_cycles ? t.stream_cycles
                                                                  : t.sram_cycles;
    assert_true(small_piped < 2 * 16 + 16 - 2 && small_piped < small);
    const uint64_t t1 = chip_hart_time(&f->c, 0);
    assert_int_equal(submit(f, 0, s3, 3), NPU_OK);
    assert_int_equal(wait_for(f, 0, 4, 7), t1 + (full + small_piped + full) * CYCLE);
    const uint64_t t2 = chip_hart_time(&f->c, 0);
    s3[2].a = sram_addr(0, 0xb000); /* now independent of both */
    assert_int_equal(submit(f, 0, s3, 3), NPU_OK);
    assert_int_equal(wait_for(f, 0, 4, 10), t2 + (full + small_piped + piped) * CYCLE);
}

/* gemm32's cycles on the fixture's 16 x 16 array: in full, and its folds alone (piped). */
static void gemm32_cycles(uint64_t *full, uint64_t *piped)
{
    const struct matrix_engine_cfg cfg = { .rows = 16, .cols = 16, .sram_bytes_per_cycle = 256 };
    struct matrix_gemm_timing t;
    *full = matrix_gemm_batch_cycles(&cfg, 32, 32, 32, MATRIX_FP32, 0, 1, &t);
    *piped = t.stream_cycles > t.sram_cycles ? t.stream_cycles : t.sram_cycles;
}

/* A GEMM that becomes ready while the one before it runs (its wait met by a DMA load, as
   an expert ring's GEMM is): `early` cycles before that one ends, it pays its full cycles
   less `early`, at least its folds alone. 32 x 32 x 32 on 16 x 16: full 174 cycles, folds
   128, so load, fill and drain are 46. */
static void test_gemm_ready_late(void **state)
{
    struct fix *f = *state;
    uint64_t full, piped;
    gemm32_cycles(&full, &piped);
    assert_int_equal(full, 174);
    assert_int_equal(piped, 128);
    /* loads of 100 cycles' latency plus 60 (7680 bytes at 64 GB/s), or plus 20 (2560) */
    const uint32_t bytes[2] = { 7680, 2560 };
    const uint64_t load[2] = { 160, 120 };
    /* ready 14 cycles before the first GEMM's end (< 46: pays 174 - 14), then 54 (>= 46) */
    const uint64_t cost[2] = { full - (full - load[0]), piped };
    for (int i = 0; i < 2; i++) {
        const uint64_t t0 = chip_hart_time(&f->c, 0);
        struct npu_desc d[3] = { gemm32(0, 4), gemm32(0, 6),
                                 copy(NPU_ENGINE_DMA, hbm_addr(0x1000), sram_addr(0, 0x20000),
                                      bytes[i], 0, 5) };
        d[1].a = sram_addr(0, 0x5000), d[1].b = sram_addr(0, 0x20000);
        d[1].c = sram_addr(0, 0x7000);
        d[1].flags |= NPU_DESC_WAIT, d[1].wait_sem = 5, d[1].wait_value = (uint32_t)i + 1;
        assert_int_equal(submit(f, 0, d, 3), NPU_OK);
        assert_int_equal(wait_for(f, 0, 5, (uint32_t)i + 1), t0 + load[i] * CYCLE);
        assert_int_equal(wait_for(f, 0, 6, (uint32_t)i + 1), t0 + (full + cost[i]) * CYCLE);
        assert_true(cost[i] >= piped && cost[i] < full);
    }
}

/* An alt core times its GEMMs with its own array and its HBM copies with its own channel;
   a base core of the same chip keeps the base sizes. */
static void test_alt_core_sizes(void **state)
{
    struct fix *f = *state;
    const struct matrix_engine_cfg base = { .rows = 16, .cols = 16, .sram_bytes_per_cycle = 256 };
    const struct matrix_engine_cfg alt = { .rows = 4, .cols = 4, .sram_bytes_per_cycle = 64 };
    uint64_t base_cycles = matrix_gemm_cycles(&base, 32, 32, 32, MATRIX_FP32, 0, NULL);
    uint64_t alt_cycles = matrix_gemm_cycles(&alt, 32, 32, 32, MATRIX_FP32, 0, NULL);
    assert_true(alt_cycles > base_cycles);
    struct npu_desc d = gemm32(1, 4);
    assert_int_equal(submit(f, 1, &d, 1), NPU_OK);
    assert_int_equal(wait_for(f, 1, 4, 1), alt_cycles * CYCLE);
    fix_free(f);
    *state = f = fix_new_alt(false, 0, alt_cores, alt_sizes);
    d = gemm32(2, 4);
    assert_int_equal(submit(f, 2, &d, 1), NPU_OK);
    assert_int_equal(wait_for(f, 2, 4, 1), base_cycles * CYCLE);
    fix_free(f);
    /* 64000 bytes into HBM: 500000 ps at 128 GB/s on core 3, plus 100 cycles of latency. */
    *state = f = fix_new_alt(false, 0, alt_cores, alt_sizes);
    d = copy(NPU_ENGINE_DMA, sram_addr(3, 0x10000), hbm_addr(0x1000), 64000, 3, 3);
    assert_int_equal(submit(f, 3, &d, 1), NPU_OK);
    assert_int_equal(wait_for(f, 3, 3, 1), 500000 + 100 * CYCLE);
    /* static power by core type: cores 1 and 3 (alt) at 900 mW, 0 and 2 at 500, for 1 us:
       (2 x 900 + 2 x 500) mW x 1e6 ps = 2.8e-6 J */
    struct chip_config cfg = { .static_mw_per_core = 500, .alt_static_mw_per_core = 900 };
    struct chip_energy en;
    chip_stats_energy(&f->e, &cfg, 1000000, &en);
    assert_true(fabs(en.static_j - 2.8e-6) < 1e-15);
    cfg.alt_static_mw_per_core = 0; /* none of their own: a base core's */
    chip_stats_energy(&f->e, &cfg, 1000000, &en);
    assert_true(fabs(en.static_j - 2.0e-6) < 1e-15);
}

static void test_wait_holds_back_the_queue(void **state)
{
    struct fix *f = *state;
    struct npu_desc d = copy(NPU_ENGINE_DMA, sram_addr(0, 0x10000), hbm_addr(0), 64000, 0, 3);
    d.flags |= NPU_DESC_WAIT;
    d.wait_sem = 7;
    d.wait_value = 1;
    assert_int_equal(submit(f, 0, &d, 1), NPU_OK);
    /* Core 1 opens the gate: its post lands at 8000 + 1 hop = 12000. */
    assert_int_equal(chip_sem_post(&f->c, 1, 0, 7, NPU_SEM_OP_INC, 1), NPU_OK);
    assert_int_equal(wait_for(f, 0, 3, 1), 12000 + 1000000 + 100 * CYCLE);
}

/* WAIT and WAIT2 must both hold: the later of the two gates decides the start. */
static void test_wait2_needs_both_gates(void **state)
{
    struct fix *f = *state;
    struct npu_desc d = copy(NPU_ENGINE_DMA, sram_addr(0, 0x10000), hbm_addr(0), 64000, 0, 3);
    d.flags |= NPU_DESC_WAIT | NPU_DESC_WAIT2;
    d.wait_sem = 7;
    d.wait_value = 1;
    d.wait2_sem = 8;
    d.wait2_value = 2;
    assert_int_equal(submit(f, 0, &d, 1), NPU_OK);
    /* sem 7 lands at 8000 + 1 hop; sem 8 gets 1 from core 2 (1 hop) and 1 from core 3
       (2 hops: 8000 + 8000), so WAIT2 holds only at 16000. */
    assert_int_equal(chip_sem_post(&f->c, 1, 0, 7, NPU_SEM_OP_INC, 1), NPU_OK);
    assert_int_equal(chip_sem_post(&f->c, 2, 0, 8, NPU_SEM_OP_INC, 1), NPU_OK);
    assert_int_equal(chip_sem_post(&f->c, 3, 0, 8, NPU_SEM_OP_INC, 1), NPU_OK);
    assert_int_equal(wait_for(f, 0, 3, 1), 16000 + 1000000 + 100 * CYCLE);
}

/* SIGNAL2 of a NoC write leaves from the destination: an acknowledgement to the sender. */
static void test_signal2_acknowledges_a_write(void **state)
{
    struct fix *f = *state;
    struct npu_desc d = copy(NPU_ENGINE_NOC, sram_addr(0, 0x10000), sram_addr(3, 0x20000),
                             64000, 3, 1);
    d.flags |= NPU_DESC_SIGNAL2;
    d.signal2_core = 0;
    d.signal2_sem = 5;
    d.signal2_value = 2;
    assert_int_equal(submit(f, 0, &d, 1), NPU_OK);
    /* Data and core 3's increment land after 2 hops; the acknowledgement 2 hops later. */
    assert_int_equal(wait_for(f, 0, 5, 2), 1000000 + 4 * HOP);
    assert_int_equal(f->c.harts[3].sems[1], 1);
    assert_int_equal(f->c.harts[0].sems[5], 2);
}

static void test_bad_descriptors_refused(void **state)
{
    struct fix *f = *state;
    char err[256] = "";
    struct npu_desc d[2] = {
        copy(NPU_ENGINE_DMA, sram_addr(0, 0x10000), hbm_addr(0), 64, UINT32_MAX, 0),
        copy(NPU_ENGINE_DMA, 0x8, hbm_addr(0), 64, UINT32_MAX, 0),
    };
    memcpy(f->sram[0], d, sizeof(d));
    assert_int_equal(chip_engines_submit(&f->e, 0, sram_addr(0, 0), 2, err, sizeof(err)),
                     NPU_ERR_RANGE);
    assert_non_null(strstr(err, "descriptor 1"));
    assert_int_equal(chip_engines_pending(&f->e, 0, NPU_ENGINE_DMA), 0);
    /* Another core's SRAM as a DMA source, a HBM range running past its end, a bad engine. */
    d[1] = copy(NPU_ENGINE_DMA, sram_addr(1, 0), hbm_addr(0), 64, UINT32_MAX, 0);
    assert_int_equal(submit(f, 0, d, 2), NPU_ERR_RANGE);
    d[1] = copy(NPU_ENGINE_DMA, sram_addr(0, 0), hbm_addr(HBM_BYTES - 32), 64, UINT32_MAX, 0);
    assert_int_equal(submit(f, 0, d, 2), NPU_ERR_RANGE);
    d[1].engine = 9;
    assert_int_equal(submit(f, 0, d, 2), NPU_ERR_INVAL);
    d[1] = copy(NPU_ENGINE_DMA, sram_addr(0, 0), hbm_addr(0), 64, UINT32_MAX, 0);
    d[1].flags |= NPU_DESC_WAIT2;
    d[1].wait2_sem = 32; /* no such semaphore */
    assert_int_equal(submit(f, 0, d, 2), NPU_ERR_RANGE);
    d[1].flags = NPU_DESC_SIGNAL2;
    d[1].signal2_core = 5; /* 4 cores and the control core */
    assert_int_equal(submit(f, 0, d, 2), NPU_ERR_RANGE);
    d[1].signal2_core = 4;
    d[1].batch = 2; /* a batch on the DMA engine */
    assert_int_equal(submit(f, 0, d, 2), NPU_ERR_INVAL);
    d[1] = copy(NPU_ENGINE_DMA, sram_addr(0, 0), hbm_addr(0), 64, 7 /* no such core */, 0);
    assert_int_equal(submit(f, 0, d, 2), NPU_ERR_RANGE);
    assert_int_equal(chip_engines_submit(&f->e, 0, sram_addr(0, SRAM_BYTES - 32), 1, err,
                                         sizeof(err)), NPU_ERR_RANGE);
    assert_int_equal(chip_engines_pending(&f->e, 0, NPU_ENGINE_DMA), 0);
}

/* A gather of 4 rows of 256 bytes by index [3, 0, 3, 7] from a table in HBM into core 1's
   SRAM: timed as one copy of its 1024 bytes (1024 B at 64 GB/s = 16000 ps, plus 100
   cycles of latency), the rows in index order, the index list's bytes counted in SRAM. */
static struct npu_desc gather(uint64_t table, uint64_t index, uint64_t dst, uint32_t rows)
{
    return (struct npu_desc){ .engine = NPU_ENGINE_DMA, .op = NPU_DMA_OP_GATHER,
                              .flags = NPU_DESC_SIGNAL, .signal_core = 1, .signal_sem = 3,
                              .signal_value = 1, .a = table, .b = index, .c = dst, .m = rows,
                              .n = 256, .lda = 256, .ldc = 256 };
}

static void test_dma_gather_rows_time_and_data(void **state)
{
    struct fix *f = *state;
    const uint32_t index[4] = { 3, 0, 3, 7 };
    for (uint32_t i = 0; i < 8 * 256; i++)
        f->hbm[0x4000 + i] = (uint8_t)(i / 256 + 1); /* row i holds i + 1 */
    memcpy(f->sram[1] + 0x8000, index, sizeof(index));
    struct npu_desc d = gather(hbm_addr(0x4000), sram_addr(1, 0x8000), sram_addr(1, 0x10000), 4);
    assert_int_equal(submit(f, 1, &d, 1), NPU_OK);
    assert_int_equal(wait_for(f, 1, 3, 1), 16000 + 100 * CYCLE);
    for (uint32_t r = 0; r < 4; r++)
        for (uint32_t b = 0; b < 256; b += 85)
            assert_int_equal(f->sram[1][0x10000 + r * 256 + b], index[r] + 1);
    const struct chip_engine_counters *c = chip_engines_counters(&f->e, 1, NPU_ENGINE_DMA);
    assert_int_equal(c->bytes, 1024);
    assert_int_equal(c->hbm_bytes, 1024);
    assert_int_equal(c->sram_bytes, 1024 + sizeof(index));
    assert_int_equal(c->errors, 0);
}

/* Refused at submit: a row past the end of HBM (its number named), an index list in another
   core's SRAM or in HBM, a table in another core's SRAM, a row in another memory than the
   table's first, a list overlapping the destination, too many rows, a row address past
   2^64, an unknown DMA op. */
static void test_dma_gather_refused(void **state)
{
    struct fix *f = *state;
    char err[256] = "";
    const uint32_t index[3] = { 0, 1, (uint32_t)(HBM_BYTES / 256) };
    memcpy(f->sram[0] + 0x8000, index, sizeof(index));
    struct npu_desc d = gather(hbm_addr(0), sram_addr(0, 0x8000), sram_addr(0, 0x10000), 3);
    memcpy(f->sram[0], &d, sizeof(d));
    assert_int_equal(chip_engines_submit(&f->e, 0, sram_addr(0, 0), 1, err, sizeof(err)),
                     NPU_ERR_RANGE);
    assert_non_null(strstr(err, "gather row 2"));
    d.m = 2; /* rows 0 and 1 only: accepted */
    assert_int_equal(submit(f, 0, &d, 1), NPU_OK);
    d.b = sram_addr(1, 0x8000);
    assert_int_equal(submit(f, 0, &d, 1), NPU_ERR_RANGE);
    d.b = hbm_addr(0x100);
    assert_int_equal(submit(f, 0, &d, 1), NPU_ERR_RANGE);
    d.b = sram_addr(0, 0x8000);
    d.a = sram_addr(1, 0);
    assert_int_equal(submit(f, 0, &d, 1), NPU_ERR_RANGE);
    /* the table's first row at the end of core 0's SRAM: row 1 lies past it */
    d.a = sram_addr(0, SRAM_BYTES - 256);
    assert_int_equal(submit(f, 0, &d, 1), NPU_ERR_RANGE);
    d.a = hbm_addr(0);
    d.c = sram_addr(0, 0x8000 - 256); /* the destination's second row is the list */
    assert_int_equal(submit(f, 0, &d, 1), NPU_ERR_RANGE);
    d.c = sram_addr(0, 0x10000);
    d.m = NPU_GATHER_ROWS_MAX + 1;
    assert_int_equal(submit(f, 0, &d, 1), NPU_ERR_INVAL);
    d.m = 2; /* a row number past 2^64 from a table high in HBM */
    const uint32_t far[2] = { 0, UINT32_MAX };
    memcpy(f->sram[0] + 0x8000, far, sizeof(far));
    d.a = hbm_addr(HBM_BYTES - 256), d.lda = UINT32_MAX;
    assert_int_equal(submit(f, 0, &d, 1), NPU_ERR_RANGE);
    d.a = hbm_addr(0), d.lda = 256;
    d.op = 3;
    assert_int_equal(submit(f, 0, &d, 1), NPU_ERR_INVAL);
}

/* The index list changed after the check at submit to a row out of range: the gather
   completes (its time is its bytes') and counts an engine error, moving no row. */
static void test_dma_gather_index_changed(void **state)
{
    struct fix *f = *state;
    const uint32_t index[2] = { 1, 2 }, bad = (uint32_t)(HBM_BYTES / 256);
    memcpy(f->sram[1] + 0x8000, index, sizeof(index));
    struct npu_desc d = gather(hbm_addr(0), sram_addr(1, 0x8000), sram_addr(1, 0x10000), 2);
    assert_int_equal(submit(f, 1, &d, 1), NPU_OK);
    memset(f->hbm + 256, 0x77, 256);
    memcpy(f->sram[1] + 0x8004, &bad, sizeof(bad));
    assert_int_equal(wait_for(f, 1, 3, 1), 8000 + 100 * CYCLE);
    assert_int_equal(chip_engines_counters(&f->e, 1, NPU_ENGINE_DMA)->errors, 1);
    assert_int_equal(f->sram[1][0x10000], 0); /* row 0 (index 1) valid, yet not moved */
}

static void test_performance_mode_leaves_data(void **state)
{
    struct fix *f = *state;
    memset(f->sram[1] + 0x10000, 0x5a, 64000);
    struct npu_desc d = copy(NPU_ENGINE_DMA, sram_addr(1, 0x10000), hbm_addr(0x1000), 64000,
                             1, 3);
    assert_int_equal(submit(f, 1, &d, 1), NPU_OK);
    assert_int_equal(wait_for(f, 1, 3, 1), 1000000 + 100 * CYCLE); /* same timing */
    assert_int_equal(f->hbm[0x1000], 0);                              /* data untouched */
    assert_int_equal(chip_engines_counters(&f->e, 1, NPU_ENGINE_DMA)->bytes, 64000);
}

static void test_vector_softmax_time_and_data(void **state)
{
    struct fix *f = *state;
    float *x = (float *)(f->sram[0] + 0x1000), *out = (float *)(f->sram[0] + 0x2000);
    for (uint32_t i = 0; i < 2 * 8; i++)
        x[i] = (float)(i % 8);
    struct npu_desc d = { .engine = NPU_ENGINE_VECTOR, .op = NPU_VECTOR_OP_SOFTMAX,
                          .flags = NPU_DESC_SIGNAL, .signal_core = 0, .signal_sem = 2,
                          .signal_value = 1, .a = sram_addr(0, 0x1000),
                          .c = sram_addr(0, 0x2000), .m = 2, .n = 8, .lda = 8, .ldc = 8 };
    assert_int_equal(submit(f, 0, &d, 1), NPU_OK);
    const struct vector_engine_cfg cfg = { .lanes = 16, .alus_per_lane = 4,
                                           .pipeline_depth = 8 };
    uint64_t cycles = vector_op_cycles(&cfg, VECTOR_OP_SOFTMAX, 16, 2);
    assert_int_equal(wait_for(f, 0, 2, 1), cycles * CYCLE);
    float sum = 0;
    for (uint32_t i = 0; i < 8; i++)
        sum += out[i];
    assert_true(sum > 0.9999f && sum < 1.0001f && out[7] > out[6]);
    assert_int_equal(chip_engines_counters(&f->e, 0, NPU_ENGINE_VECTOR)->elements, 16);
}

static void test_vector_bad_descriptors(void **state)
{
    struct fix *f = *state;
    struct npu_desc d = { .engine = NPU_ENGINE_VECTOR, .op = NPU_VECTOR_OP_ADD,
                          .a = sram_addr(0, 0x1000), .b = sram_addr(0, 0x2000),
                          .c = sram_addr(0, 0x1004), .m = 4, .n = 4, .lda = 4, .ldb = 4,
                          .ldc = 4 };
    assert_int_equal(submit(f, 0, &d, 1), NPU_ERR_INVAL);   /* out overlaps x partly */
    d.c = sram_addr(0, 0x1000);
    assert_int_equal(submit(f, 0, &d, 1), NPU_OK);          /* in place is fine */
    d.b = sram_addr(1, 0);
    assert_int_equal(submit(f, 0, &d, 1), NPU_ERR_RANGE);   /* y in another core's SRAM */
    d.b = sram_addr(0, 0x2000);
    d.op = 99;
    assert_int_equal(submit(f, 0, &d, 1), NPU_ERR_INVAL);   /* unknown op */
    d.op = NPU_VECTOR_OP_TOPK;
    d.k = 5;                                                /* k > cols */
    assert_int_equal(submit(f, 0, &d, 1), NPU_ERR_INVAL);
    d.op = NPU_VECTOR_OP_ADD;
    d.stride_a = 1;
    assert_int_equal(submit(f, 0, &d, 1), NPU_ERR_INVAL);   /* a GEMM stride on a vector op */
}

static void test_noc_read(void **state)
{
    struct fix *f = *state;
    for (uint32_t i = 0; i < 64000; i++)
        f->sram[3][0x10000 + i] = (uint8_t)(i * 3);
    struct npu_desc d = copy(NPU_ENGINE_NOC, sram_addr(3, 0x10000), sram_addr(0, 0x20000),
                             64000, 0, 5);
    d.op = NPU_NOC_OP_READ;
    assert_int_equal(submit(f, 0, &d, 1), NPU_OK);
    /* 1000000 ps of transfer; the request's 2 hops and the data's 2 hops after it. */
    assert_int_equal(wait_for(f, 0, 5, 1), 1000000 + 4 * HOP);
    assert_memory_equal(f->sram[0] + 0x20000, f->sram[3] + 0x10000, 64000);
    /* A read into another core's SRAM is refused. */
    d.c = sram_addr(1, 0x20000);
    char err[256];
    memcpy(f->sram[0], &d, sizeof(d));
    assert_int_equal(chip_engines_submit(&f->e, 0, sram_addr(0, 0), 1, err, sizeof(err)),
                     NPU_ERR_RANGE);
}

static void test_noc_multicast(void **state)
{
    struct fix *f = *state;
    memset(f->sram[0] + 0x10000, 0x3c, 64000);
    struct npu_desc d = copy(NPU_ENGINE_NOC, sram_addr(0, 0x10000), 0x30000, 64000, 0, 6);
    d.op = NPU_NOC_OP_MULTICAST;
    d.b = 0 | 0ull << 16 | 1ull << 32 | 1ull << 48; /* rows 0..1, cols 0..1 */
    assert_int_equal(submit(f, 0, &d, 1), NPU_OK);
    /* The tree E(0,0), S(0,0), S(0,1) carries the data once: 1000000 ps, then 2 hops. */
    assert_int_equal(wait_for(f, 3, 6, 1), 1000000 + 2 * HOP);
    assert_int_equal(chip_clock_advance(&f->c), NPU_ERR_DEADLOCK); /* the other signals */
    for (uint32_t core = 0; core < NCORES; core++) {
        assert_int_equal(f->sram[core][0x30000 + 63999], 0x3c);
        assert_int_equal(f->c.harts[core].sems[6], 1);
    }
    assert_int_equal(chip_engines_counters(&f->e, 0, NPU_ENGINE_NOC)->noc_byte_hops,
                     3 * 64000);
    d.b = 0 | 0ull << 16 | 2ull << 32 | 1ull << 48; /* row 2 does not exist */
    assert_int_equal(submit(f, 0, &d, 1), NPU_ERR_RANGE);
}

static void test_hbm_stack_shared_over_noc(void **state)
{
    struct fix *f = *state;
    uint32_t router;
    assert_int_equal(chip_engines_hbm_stack(&f->e, 3, &router), 0);
    assert_int_equal(router, 2);
    struct npu_desc a = copy(NPU_ENGINE_DMA, sram_addr(1, 0x10000), hbm_addr(0), 64000, 1, 3);
    struct npu_desc b = copy(NPU_ENGINE_DMA, sram_addr(3, 0x10000), hbm_addr(0x100000), 64000,
                             3, 3);
    assert_int_equal(submit(f, 1, &a, 1), NPU_OK);
    assert_int_equal(submit(f, 3, &b, 1), NPU_OK);
    /* Both share the stack: half of 64 GB/s each; then 100 cycles plus the hops to the
     * stack's router (core 3: 1 hop, core 1: 2 hops). */
    assert_int_equal(wait_for(f, 3, 3, 1), 2000000 + 100 * CYCLE + 1 * HOP);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_dma_alone_exact_time_and_data, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queue_runs_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_engine_log, setup, teardown),
        cmocka_unit_test_setup_teardown(test_noc_link_shared, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gemm_time_and_data, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gemm_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gemm_pipelined, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gemm_ready_late, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dma2_beside_dma, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alt_core_sizes, setup_alt, teardown),
        cmocka_unit_test_setup_teardown(test_noc_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_noc_multicast, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wait_holds_back_the_queue, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wait2_needs_both_gates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_signal2_acknowledges_a_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_descriptors_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_transfer_end_event_kept, setup_perf, teardown),
        cmocka_unit_test_setup_teardown(test_dma_gather_rows_time_and_data, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dma_gather_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dma_gather_index_changed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vector_softmax_time_and_data, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vector_bad_descriptors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hbm_stack_shared_over_noc, setup_stack, teardown),
        cmocka_unit_test_setup_teardown(test_performance_mode_leaves_data, setup_perf,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
