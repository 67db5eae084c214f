/* SPDX-License-Identifier: MIT */
/*
 * Host unit tests of the iteration-level schedulers, exact small scenarios: they pin
 * static, continuous, chunked and pd-fusion plans, the adaptive layer-group count (a
 * 2048-token prompt: 4 groups of 512; capped at num_layers), layered merging and
 * layered-chunked rows, the rejection reasons and names, idling until an arrival, and
 * sched_init's refusals and messages. The simulator's checks are test_sched.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "npu_enums.h"
#include "rt/kvc.h"
#include "rt/request.h"
#include "rt/sched.h"
#include "sched_fixture.h"

/* Two layers, 64 rows, a roomy KV cache, every request arrived at 0. chunk, budget and
   prefill_units: 0 keeps params()'s. */
static void small_start(enum rt_sched_kind kind, uint32_t max_batch, uint32_t chunk,
                        uint32_t budget, uint32_t prefill_units)
{
    struct rt_sched_params p = params(kind);
    p.num_layers = 2;
    p.max_batch = max_batch;
    p.max_tokens = 64;
    p.chunk = chunk ? chunk : p.chunk;
    p.budget = budget ? budget : p.budget;
    p.prefill_units = prefill_units ? prefill_units : p.prefill_units;
    start(&p, 4, 256, 0);
    assert_int_equal(sched_arrive(&sch, 0, 4096), nreqs);
}

static void test_static_exact(void **state)
{
    (void)state;
    nreqs = 0;
    add_req(0, 10, 3);
    add_req(0, 20, 1);
    add_req(0, 5, 2);
    small_start(RT_SCHED_STATIC, 2, 0, 0, 0);
    next_plan(2, 2);  /* the batch: both prompts, whole */
    expect_run(0, 0, 0, 10, true);
    expect_run(1, 1, 0, 20, true);
    sched_complete(&sch, &plan);
    assert_int_equal(reqs[1].state, RT_REQ_FINISHED);
    next_plan(1, 0);  /* a slot is free, but the batch has not drained */
    expect_run(0, 0, 10, 1, true);
    assert_int_equal(reqs[2].state, RT_REQ_QUEUED);
    sched_complete(&sch, &plan);
    next_plan(1, 0);
    expect_run(0, 0, 11, 1, true);
    sched_complete(&sch, &plan);
    assert_int_equal(reqs[0].state, RT_REQ_FINISHED);
    next_plan(1, 1);
    expect_run(0, 2, 0, 5, true);
    sched_complete(&sch, &plan);
    next_plan(1, 0);
    expect_run(0, 2, 5, 1, true);
    sched_complete(&sch, &plan);
    assert_true(sched_done(&sch));
    assert_false(sched_next(&sch, &plan));
    assert_int_equal(kvc_blocks_used(&kvc), 0);
}

static void test_continuous_exact(void **state)
{
    (void)state;
    nreqs = 0;
    add_req(0, 10, 3);
    add_req(0, 30, 2);
    add_req(MS, 4, 2);
    struct rt_sched_params p = params(RT_SCHED_CONTINUOUS);
    p.num_layers = 2;
    p.max_batch = 4;
    p.max_tokens = 32;
    start(&p, 4, 256, 0);
    assert_int_equal(sched_arrive(&sch, 0, 4096), 2);
    next_plan(1, 1);  /* 10 + 30 rows do not fit 32: r1 waits for the next iteration */
    expect_run(0, 0, 0, 10, true);
    sched_complete(&sch, &plan);
    next_plan(1, 1);  /* prefill first: r0 does not decode beside the new prompt */
    expect_run(0, 1, 0, 30, true);
    sched_complete(&sch, &plan);
    assert_int_equal(sched_arrive(&sch, MS, 4096), 1);
    next_plan(1, 1);
    expect_run(0, 2, 0, 4, true);
    sched_complete(&sch, &plan);
    next_plan(3, 0);
    expect_run(0, 0, 10, 1, true);
    expect_run(1, 1, 30, 1, true);
    expect_run(2, 2, 4, 1, true);
    sched_complete(&sch, &plan);
    next_plan(1, 0);
    expect_run(0, 0, 11, 1, true);
    sched_complete(&sch, &plan);
    assert_true(sched_done(&sch));
}

static void test_chunked_exact(void **state)
{
    (void)state;
    nreqs = 0;
    add_req(0, 20, 3);
    add_req(0, 5, 2);
    small_start(RT_SCHED_CHUNKED, 2, 8, 0, 0);
    next_plan(1, 1);  /* r0's first chunk takes the whole budget: r1 is not admitted */
    expect_run(0, 0, 0, 8, false);
    assert_int_equal(reqs[1].state, RT_REQ_QUEUED);
    sched_complete(&sch, &plan);
    next_plan(1, 1);
    expect_run(0, 0, 8, 8, false);
    sched_complete(&sch, &plan);
    next_plan(2, 2);  /* the rest of r0's prompt, then r1's first chunk */
    expect_run(0, 0, 16, 4, true);
    expect_run(1, 1, 0, 4, false);
    sched_complete(&sch, &plan);
    next_plan(2, 1);  /* r0 decodes first in the budget; prefill runs still come first */
    expect_run(0, 1, 4, 1, true);
    expect_run(1, 0, 20, 1, true);
    sched_complete(&sch, &plan);
    next_plan(2, 0);
    expect_run(0, 0, 21, 1, true);
    expect_run(1, 1, 5, 1, true);
    sched_complete(&sch, &plan);
    assert_true(sched_done(&sch));
    /* The budget's last token still admits a request. */
    nreqs = 0;
    add_req(0, 1, 2);
    add_req(0, 5, 1);
    small_start(RT_SCHED_CHUNKED, 2, 2, 0, 0);
    next_plan(2, 2);
    expect_run(0, 0, 0, 1, true);
    expect_run(1, 1, 0, 1, false);
    sched_complete(&sch, &plan);
    next_plan(2, 1);  /* r0's decode leaves r1 one token */
    expect_run(0, 1, 1, 1, false);
    expect_run(1, 0, 1, 1, true);
}

static void test_pd_fusion_exact(void **state)
{
    (void)state;
    nreqs = 0;
    add_req(0, 10, 3);
    add_req(0, 3, 2);
    add_req(0, 6, 2);
    small_start(RT_SCHED_PD_FUSION, 3, 4, 4, 2);
    next_plan(2, 2);  /* 4 units: two chunks */
    expect_run(0, 0, 0, 4, false);
    expect_run(1, 1, 0, 3, true);
    sched_complete(&sch, &plan);
    next_plan(2, 1);  /* one decode: 3 units left, one chunk */
    expect_run(0, 0, 4, 4, false);
    expect_run(1, 1, 3, 1, true);
    sched_complete(&sch, &plan);
    assert_int_equal(reqs[1].state, RT_REQ_FINISHED);
    next_plan(2, 2);
    expect_run(0, 0, 8, 2, true);
    expect_run(1, 2, 0, 4, false);
    sched_complete(&sch, &plan);
    next_plan(2, 1);
    expect_run(0, 2, 4, 2, true);
    expect_run(1, 0, 10, 1, true);
    sched_complete(&sch, &plan);
    next_plan(2, 0);
    expect_run(0, 0, 11, 1, true);
    expect_run(1, 2, 6, 1, true);
    sched_complete(&sch, &plan);
    assert_true(sched_done(&sch));
}

/* One layered cycle over `layers` layers; checks each group's range against the expected
   starts (bounds[g] .. bounds[g + 1]). */
static void expect_cycle(const uint32_t *bounds, uint32_t groups, uint32_t prompt)
{
    for (uint32_t g = 0; g < groups; g++) {
        next_plan(1, 1);
        assert_int_equal(plan.group, g);
        assert_int_equal(plan.groups, groups);
        assert_int_equal(plan.layer0, bounds[g]);
        assert_int_equal(plan.layer1, bounds[g + 1]);
        expect_run(0, 0, 0, prompt, g + 1 == groups);
        sched_complete(&sch, &plan);
        assert_int_equal(reqs[0].prefilled, g + 1 == groups ? prompt : 0);
    }
}

static void layered_one(uint32_t layers, uint32_t groups_param, uint32_t prompt)
{
    nreqs = 0;
    add_req(0, prompt, 2);
    struct rt_sched_params p = params(RT_SCHED_LAYERED);
    p.num_layers = layers;
    p.max_tokens = 4096;
    p.group_tokens = 512;
    p.groups = groups_param;
    start(&p, 16, 512, 0);
    assert_int_equal(sched_arrive(&sch, 0, 8192), 1);
}

static void test_layered_groups(void **state)
{
    (void)state;
    static const uint32_t four[] = { 0, 8, 16, 24, 32 };
    layered_one(32, 0, 2048);  /* adaptive: ceil(2048 / 512) = 4 groups of 8 layers */
    expect_cycle(four, 4, 2048);
    next_plan(1, 0);  /* after the cycle: a decode over every layer */
    assert_true(plan.layer0 == 0 && plan.layer1 == 32 && plan.group == 0 && plan.groups == 1);
    expect_run(0, 0, 2048, 1, true);
    sched_complete(&sch, &plan);
    assert_true(sched_done(&sch));
    static const uint32_t five[] = { 0, 7, 14, 20, 26, 32 };
    layered_one(32, 0, 2049);  /* 5 groups: 7, 7, 6, 6, 6 */
    expect_cycle(five, 5, 2049);
    static const uint32_t capped[] = { 0, 1, 2, 3 };
    layered_one(3, 0, 2048);  /* capped at num_layers */
    expect_cycle(capped, 3, 2048);
    static const uint32_t one[] = { 0, 3 };
    layered_one(3, 0, 100);  /* a short prompt: one group */
    expect_cycle(one, 1, 100);
    static const uint32_t fixed[] = { 0, 3, 6, 8, 10 };
    layered_one(10, 4, 100);  /* fixed N_lg = 4 over 10 layers: 3, 3, 2, 2 */
    expect_cycle(fixed, 4, 100);
}

/* Concurrent prompts merge into one cycle while they fit the rows; the running decodes
   count against the rows too. */
static void test_layered_merge(void **state)
{
    (void)state;
    nreqs = 0;
    add_req(0, 40, 3);
    add_req(0, 50, 5);
    add_req(0, 99, 2);
    struct rt_sched_params p = params(RT_SCHED_LAYERED);
    p.num_layers = 4;
    p.groups = 2;
    p.max_batch = 4;
    p.max_tokens = 100;
    start(&p, 4, 256, 0);
    sched_arrive(&sch, 0, 4096);
    for (uint32_t g = 0; g < 2; g++) {
        next_plan(2, 2);  /* 40 + 50 fit 100 rows, + 99 does not */
        assert_int_equal(plan.layer0, 2 * g);
        expect_run(0, 0, 0, 40, g == 1);
        expect_run(1, 1, 0, 50, g == 1);
        sched_complete(&sch, &plan);
    }
    for (uint32_t i = 0; i < 2; i++) {
        next_plan(2, 0);  /* 99 rows + 2 decodes pass 100: r2 waits, no cycle */
        assert_true(plan.layer0 == 0 && plan.layer1 == 4 && plan.groups == 1);
        expect_run(0, 0, 40 + i, 1, true);
        expect_run(1, 1, 50 + i, 1, true);
        sched_complete(&sch, &plan);
    }
    assert_int_equal(reqs[0].state, RT_REQ_FINISHED);
    for (uint32_t g = 0; g < 2; g++) {
        next_plan(2, 1);  /* 99 + r1's decode fit: r2's cycle, r1 decoding in each group */
        expect_run(0, 2, 0, 99, g == 1);
        expect_run(1, 1, 52 + g, 1, true);
        sched_complete(&sch, &plan);
    }
}

static void test_layered_chunked_exact(void **state)
{
    (void)state;
    nreqs = 0;
    add_req(0, 40, 3);
    add_req(0, 6, 2);
    add_req(0, 8, 2);
    struct rt_sched_params p = params(RT_SCHED_LAYERED_CHUNKED);
    p.num_layers = 4;
    p.groups = 2;
    p.chunk = 16;
    p.max_batch = 4;
    p.max_tokens = 64;
    start(&p, 4, 256, 0);
    sched_arrive(&sch, 0, 4096);
    static const uint32_t pos[] = { 0, 16, 32 }, cnt[] = { 16, 16, 8 };
    for (uint32_t c = 0; c < 3; c++) {
        for (uint32_t g = 0; g < 2; g++) {
            next_plan(1, 1);  /* r0's chunks; r1 does not merge (6 more passes 16) */
            expect_run(0, 0, pos[c], cnt[c], c == 2 && g == 1);
            sched_complete(&sch, &plan);
        }
    }
    for (uint32_t g = 0; g < 2; g++) {
        next_plan(3, 2);  /* r1 and r2 merged: 6 + 8 fit one chunk */
        expect_run(0, 1, 0, 6, g == 1);
        expect_run(1, 2, 0, 8, g == 1);
        expect_run(2, 0, 40 + g, 1, true);
        sched_complete(&sch, &plan);
    }
}

/* The decodes of running requests shrink a chunk so the rows fit max_tokens. */
static void test_layered_chunked_rows(void **state)
{
    (void)state;
    nreqs = 0;
    add_req(0, 2, 5);
    add_req(0, 20, 1);
    struct rt_sched_params p = params(RT_SCHED_LAYERED_CHUNKED);
    p.num_layers = 1;
    p.groups = 1;
    p.chunk = 10;
    p.max_batch = 2;
    p.max_tokens = 10;
    start(&p, 4, 256, 0);
    sched_arrive(&sch, 0, 4096);
    next_plan(1, 1);  /* r1's first chunk (10) does not fit beside r0's 2 tokens */
    expect_run(0, 0, 0, 2, true);
    sched_complete(&sch, &plan);
    static const uint32_t pos[] = { 0, 9, 18 }, cnt[] = { 9, 9, 2 };
    for (uint32_t c = 0; c < 3; c++) {
        next_plan(2, 1);  /* chunks of 9: r0's decode takes a row */
        expect_run(0, 1, pos[c], cnt[c], c == 2);
        expect_run(1, 0, 2 + c, 1, true);
        sched_complete(&sch, &plan);
    }
    assert_int_equal(reqs[1].state, RT_REQ_FINISHED);
}

static void test_rejections(void **state)
{
    (void)state;
    for (int chunked = 0; chunked < 2; chunked++) {
        nreqs = 0;
        add_req(0, 0, 5);   /* empty */
        add_req(0, 5, 0);   /* empty */
        add_req(0, 60, 50); /* 110 > max_seq 100 */
        add_req(0, 40, 20); /* 59 positions: 15 blocks of 8, and past the 50-row ring */
        add_req(0, 30, 5);  /* prompt 30 > max_tokens 20 (fits the ring) */
        add_req(0, 5, 3);
        add_req(0, 5, 3);
        reqs[6].state = RT_REQ_REJECTED;  /* the loader found a bad token */
        reqs[6].reject = RT_REJECT_BAD_TOKEN;
        struct rt_sched_params p = params(chunked ? RT_SCHED_CHUNKED : RT_SCHED_CONTINUOUS);
        p.max_batch = 2;
        p.max_tokens = 20;
        p.chunk = 8;
        start(&p, 4, 8, 50);
        assert_int_equal(sched_arrive(&sch, 0, 100), 7);
        static const enum rt_reject_reason want[] = {
            RT_REJECT_EMPTY, RT_REJECT_EMPTY, RT_REJECT_TOO_LONG, RT_REJECT_KV_NEVER,
            RT_REJECT_PROMPT_ROWS, RT_REJECT_NONE, RT_REJECT_BAD_TOKEN,
        };
        for (uint32_t i = 0; i < 7; i++) {
            enum rt_reject_reason w = want[i];
            if (chunked && w == RT_REJECT_PROMPT_ROWS)
                w = RT_REJECT_NONE;  /* chunks need no whole prompt in one iteration */
            assert_int_equal(reqs[i].reject, w);
            assert_int_equal(reqs[i].state, w == RT_REJECT_NONE ? RT_REQ_QUEUED
                                                                : RT_REQ_REJECTED);
        }
        assert_int_equal(sched_queue_len(&sch), chunked ? 2 : 1);
        while (sched_next(&sch, &plan))
            sched_complete(&sch, &plan);
        assert_true(sched_done(&sch));
        assert_int_equal(sch.finished, chunked ? 2 : 1);
        assert_int_equal(sch.rejected, chunked ? 5 : 6);
    }
    assert_string_equal(rt_reject_reason_name(RT_REJECT_EMPTY), "empty");
    assert_string_equal(rt_reject_reason_name(RT_REJECT_TOO_LONG), "too_long");
    assert_string_equal(rt_reject_reason_name(RT_REJECT_KV_NEVER), "kv_never_fits");
    assert_string_equal(rt_reject_reason_name(RT_REJECT_PROMPT_ROWS), "prompt_rows");
    assert_string_equal(rt_reject_reason_name(RT_REJECT_BAD_TOKEN), "bad_token");
}

/* Nothing to run before the first arrival; the clock jumps to it. */
static void test_idle_until_arrival(void **state)
{
    (void)state;
    nreqs = 0;
    add_req(5 * MS, 4, 1);
    add_req(9 * MS, 4, 1);
    struct rt_sched_params p = params(RT_SCHED_CONTINUOUS);
    start(&p, 4, 64, 0);
    assert_int_equal(sched_arrive(&sch, 0, 4096), 0);
    assert_false(sched_next(&sch, &plan));
    assert_int_equal(sched_next_arrival_ps(&sch), 5 * MS);
    assert_int_equal(sched_arrive(&sch, 5 * MS, 4096), 1);
    assert_int_equal(sched_next_arrival_ps(&sch), 9 * MS);
    next_plan(1, 1);
    sched_complete(&sch, &plan);
    assert_int_equal(reqs[0].state, RT_REQ_FINISHED);
    assert_false(sched_done(&sch));
    assert_false(sched_next(&sch, &plan));
    assert_int_equal(sched_arrive(&sch, UINT64_MAX, 4096), 1);
    assert_int_equal(sched_next_arrival_ps(&sch), UINT64_MAX);
    next_plan(1, 1);
    sched_complete(&sch, &plan);
    assert_true(sched_done(&sch));
}

static void expect_refused(struct rt_sched_params p, int rc, const char *words)
{
    err[0] = '\0';
    assert_int_equal(sched_init(&sch, &p, reqs, 0, &kvc, err, sizeof(err)), rc);
    if (!strstr(err, words))
        fail_msg("message \"%s\" lacks \"%s\"", err, words);
}

static void test_init_refuses(void **state)
{
    (void)state;
    struct rt_sched_params p = params(RT_SCHED_CHUNKED);
    p.chunk = 0;
    expect_refused(p, NPU_ERR_INVAL, "chunked: chunk 0 must be >= max_batch 8");
    p.chunk = 7;
    expect_refused(p, NPU_ERR_INVAL, "chunk 7");
    expect_refused(params(RT_SCHED_PD_DISAGG), NPU_ERR_STATE, "pd-disagg: planned by pd_init");
    p = params(RT_SCHED_STATIC);
    p.max_batch = RT_SCHED_RUNNING_MAX + 1;
    p.max_tokens = 4096;
    expect_refused(p, NPU_ERR_INVAL, "max_batch 65");
    p.max_batch = 0;
    expect_refused(p, NPU_ERR_INVAL, "max_batch 0");
    p = params(RT_SCHED_CONTINUOUS);
    p.max_tokens = 4;
    expect_refused(p, NPU_ERR_INVAL, "max_batch 8 must be <= max_tokens 4");
    p.max_tokens = 0;
    expect_refused(p, NPU_ERR_INVAL, "max_tokens 0");
    p = params(RT_SCHED_LAYERED);
    p.num_layers = 0;
    expect_refused(p, NPU_ERR_INVAL, "num_layers 0");
    p = params(RT_SCHED_LAYERED);
    p.group_tokens = 0;
    expect_refused(p, NPU_ERR_INVAL, "layered: group_tokens");
    p.groups = 4;  /* fixed groups need no group_tokens */
    start(&p, 4, 8, 0);
    p = params(RT_SCHED_LAYERED_CHUNKED);
    p.chunk = 0;
    expect_refused(p, NPU_ERR_INVAL, "layered-chunked: chunk 0");
    p = params(RT_SCHED_PD_FUSION);
    p.budget = 7;
    expect_refused(p, NPU_ERR_INVAL, "pd-fusion: budget 7 must be >= max_batch 8");
    p.budget = 8;
    p.prefill_units = 9;
    expect_refused(p, NPU_ERR_INVAL, "budget 8 must be >= prefill_units 9");
    p.prefill_units = 0;
    expect_refused(p, NPU_ERR_INVAL, "prefill_units 0");
    p.prefill_units = 8;
    p.chunk = 0;
    expect_refused(p, NPU_ERR_INVAL, "pd-fusion: chunk 0");
}

static void test_kind_names(void **state)
{
    (void)state;
    static const char *const names[] = { "static", "continuous", "chunked", "layered",
                                         "layered-chunked", "pd-fusion", "pd-disagg" };
    for (int k = 0; k < (int)RT_SCHED_KIND_COUNT; k++) {
        assert_string_equal(rt_sched_kind_name((enum rt_sched_kind)k), names[k]);
        assert_int_equal(rt_sched_kind_parse(names[k]), k);
    }
    assert_int_equal(rt_sched_kind_parse("layered_chunked"), -1);
    assert_int_equal(rt_sched_kind_parse(""), -1);
    assert_int_equal(rt_sched_kind_parse(NULL), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kind_names),
        cmocka_unit_test(test_init_refuses),
        cmocka_unit_test(test_rejections),
        cmocka_unit_test(test_idle_until_arrival),
        cmocka_unit_test(test_static_exact),
        cmocka_unit_test(test_continuous_exact),
        cmocka_unit_test(test_chunked_exact),
        cmocka_unit_test(test_pd_fusion_exact),
        cmocka_unit_test(test_layered_groups),
        cmocka_unit_test(test_layered_merge),
        cmocka_unit_test(test_layered_chunked_exact),
        cmocka_unit_test(test_layered_chunked_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
