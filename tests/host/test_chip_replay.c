/* SPDX-License-Identifier: MIT */
/*
 * Replay slots (emulator/model/chip_replay.c): BEGIN / END record what a core's engines did
 * in between, REPEAT adds it COUNT times (not the descriptor count); refusals in functional
 * mode, with work pending, for unrecorded slots and out-of-range slots and counts; a slot
 * being recorded counts a nested repeat; other cores' counters untouched. The chip of
 * chip_fixture.h.
 */
#include <string.h>

#include "chip_fixture.h"
#include "chip_replay.h"

static struct chip_replay replay; /* with the fixture of the running test */
static char err[128];

static int setup_mode(void **state, bool functional)
{
    *state = fix_new(functional, 0);
    assert_int_equal(chip_replay_init(&replay, NCORES), NPU_OK);
    return 0;
}

static int setup_perf(void **state)
{
    return setup_mode(state, false);
}

static int setup_functional(void **state)
{
    return setup_mode(state, true);
}

static int teardown(void **state)
{
    chip_replay_destroy(&replay);
    fix_free(*state);
    return 0;
}

static int cmd(struct fix *f, uint32_t core, uint32_t op, uint32_t slot, uint32_t count)
{
    err[0] = '\0';
    return chip_replay_apply_op(&replay, &f->e, core, op, slot, count, err, sizeof(err));
}

/* Core 1 copies `bytes` from its SRAM to HBM, signalling its semaphore 3. */
static int submit_copy(struct fix *f, uint32_t bytes)
{
    struct npu_desc d = {
        .engine = NPU_ENGINE_DMA, .op = NPU_DMA_OP_COPY,
        .a = npu_map_instance_base(NPU_MAP_SRAM, 1) + 0x10000,
        .c = npu_memmap[NPU_MAP_HBM].base + 0x1000, .m = 1, .n = bytes, .lda = bytes,
        .ldc = bytes, .flags = NPU_DESC_SIGNAL, .signal_core = 1, .signal_sem = 3,
        .signal_value = 1,
    };
    memcpy(f->sram[1], &d, sizeof(d));
    char why[256];
    return chip_engines_submit(&f->e, 1, npu_map_instance_base(NPU_MAP_SRAM, 1), 1, why,
                               sizeof(why));
}

/* Every other hart exits; core 1 waits for its semaphore 3 >= value. */
static void wait_copy(struct fix *f, uint32_t value)
{
    const struct chip_wait w = { .kind = NPU_WAIT_SEM, .sem = 3, .value = value };
    uint32_t cause;
    for (uint32_t h = 0; h < f->c.nharts; h++)
        if (h != 1 && f->c.harts[h].state == CHIP_HART_RUNNING)
            chip_hart_exit(&f->c, h, 0);
    assert_int_equal(chip_hart_wait(&f->c, 1, &w, &cause), NPU_OK);
    assert_int_equal(chip_clock_advance(&f->c), NPU_OK);
    assert_int_equal(f->c.harts[1].state, CHIP_HART_RUNNING);
}

static const struct chip_engine_counters *dma(struct fix *f, uint32_t core)
{
    return chip_engines_counters(&f->e, core, NPU_ENGINE_DMA);
}

static void test_repeat_adds_the_recorded_work(void **state)
{
    struct fix *f = *state;
    assert_int_equal(submit_copy(f, 1000), NPU_OK); /* before BEGIN: not recorded */
    wait_copy(f, 1);
    assert_int_equal(cmd(f, 1, NPU_REPLAY_OP_BEGIN, 2, 0), NPU_OK);
    assert_int_equal(submit_copy(f, 64000), NPU_OK);
    wait_copy(f, 2);
    assert_int_equal(cmd(f, 1, NPU_REPLAY_OP_END, 2, 0), NPU_OK);
    const uint64_t busy = dma(f, 1)->busy_ps;
    const uint64_t one = 64000 / 64 * 1000 + 100 * CYCLE; /* 1 us plus the latency */
    assert_int_equal(dma(f, 1)->bytes, 65000);
    assert_int_equal(cmd(f, 1, NPU_REPLAY_OP_REPEAT, 2, 3), NPU_OK);
    assert_int_equal(dma(f, 1)->bytes, 65000 + 3 * 64000);
    assert_int_equal(dma(f, 1)->hbm_bytes, 65000 + 3 * 64000);
    assert_int_equal(dma(f, 1)->busy_ps, busy + 3 * one);
    assert_int_equal(dma(f, 1)->descs, 2); /* what the emulator ran */
    /* The slot stays recorded: another REPEAT adds it again. */
    assert_int_equal(cmd(f, 1, NPU_REPLAY_OP_REPEAT, 2, 1), NPU_OK);
    assert_int_equal(dma(f, 1)->bytes, 65000 + 4 * 64000);
    /* Nothing else moved: the other cores, the other engines. */
    assert_int_equal(dma(f, 0)->bytes, 0);
    assert_int_equal(chip_engines_counters(&f->e, 1, NPU_ENGINE_MATRIX)->busy_ps, 0);
}

static void test_refusals(void **state)
{
    struct fix *f = *state;
    assert_int_equal(cmd(f, 1, NPU_REPLAY_OP_END, 0, 0), NPU_ERR_STATE);
    assert_non_null(strstr(err, "without BEGIN"));
    assert_int_equal(cmd(f, 1, NPU_REPLAY_OP_REPEAT, 0, 1), NPU_ERR_STATE);
    assert_non_null(strstr(err, "not recorded"));
    assert_int_equal(cmd(f, 1, NPU_REPLAY_OP_BEGIN, NPU_REPLAY_SLOTS, 0), NPU_ERR_RANGE);
    assert_int_equal(cmd(f, NCORES, NPU_REPLAY_OP_BEGIN, 0, 0), NPU_ERR_RANGE);
    assert_int_equal(cmd(f, 1, 0, 0, 0), NPU_ERR_INVAL);
    assert_int_equal(cmd(f, 1, NPU_REPLAY_OP_BEGIN, 0, 0), NPU_OK);
    assert_int_equal(cmd(f, 1, NPU_REPLAY_OP_REPEAT, 0, 1), NPU_ERR_STATE); /* begun only */
    assert_int_equal(submit_copy(f, 64000), NPU_OK);
    assert_int_equal(cmd(f, 1, NPU_REPLAY_OP_END, 0, 0), NPU_ERR_STATE); /* pending */
    assert_non_null(strstr(err, "pending"));
    wait_copy(f, 1);
    assert_int_equal(cmd(f, 1, NPU_REPLAY_OP_END, 0, 0), NPU_OK);
    assert_int_equal(cmd(f, 1, NPU_REPLAY_OP_REPEAT, 0, 0), NPU_ERR_RANGE);
    assert_int_equal(cmd(f, 1, NPU_REPLAY_OP_REPEAT, 0, NPU_REPLAY_COUNT_MAX + 1),
                     NPU_ERR_RANGE);
    assert_int_equal(dma(f, 1)->bytes, 64000); /* nothing was added */
    /* Nested: a slot being recorded counts a repeat of another as its own work. */
    assert_int_equal(cmd(f, 1, NPU_REPLAY_OP_BEGIN, 1, 0), NPU_OK);
    assert_int_equal(cmd(f, 1, NPU_REPLAY_OP_REPEAT, 1, 1), NPU_ERR_STATE); /* itself */
    assert_non_null(strstr(err, "not recorded"));
    assert_int_equal(cmd(f, 1, NPU_REPLAY_OP_REPEAT, 0, 2), NPU_OK);
    assert_int_equal(cmd(f, 1, NPU_REPLAY_OP_END, 1, 0), NPU_OK);
    assert_int_equal(dma(f, 1)->bytes, 3 * 64000ull);
    assert_int_equal(cmd(f, 1, NPU_REPLAY_OP_REPEAT, 1, 1), NPU_OK); /* the 2 repeats, again */
    assert_int_equal(dma(f, 1)->bytes, 5 * 64000ull);
    assert_int_equal(cmd(f, 1, NPU_REPLAY_OP_REPEAT, 0, NPU_REPLAY_COUNT_MAX), NPU_OK);
    assert_int_equal(dma(f, 1)->bytes, 5 * 64000ull + NPU_REPLAY_COUNT_MAX * 64000ull);
}

static void test_functional_mode_refuses(void **state)
{
    struct fix *f = *state;
    assert_int_equal(cmd(f, 1, NPU_REPLAY_OP_BEGIN, 0, 0), NPU_ERR_STATE);
    assert_non_null(strstr(err, "performance mode"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_repeat_adds_the_recorded_work, setup_perf,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_refusals, setup_perf, teardown),
        cmocka_unit_test_setup_teardown(test_functional_mode_refuses, setup_functional,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
