/* SPDX-License-Identifier: MIT */
/*
 * Host unit tests of the dispatcher that deals arriving requests to data-parallel replicas
 * (runtime/core/src/sched_dispatch.c, rt/sched.h): names; round robin; the least loaded
 * replica (tokens left to run, queued and running); the replica whose prefix index holds
 * most of the prompt, ties by load; and two replicas' schedulers over one request array with
 * an owner array, requests dealt at arrival, every one ending on the replica it was dealt.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "npu_enums.h"
#include "rt/kvc.h"
#include "rt/request.h"
#include "rt/sched.h"

#define NREQ 6u
#define MS 1000000000ull /* picoseconds */

static struct rt_request reqs[NREQ];
static uint8_t owner[NREQ];
static struct rt_kvc kvcs[2];
static struct rt_kvc_index pxs[2]; /* ~270 KiB each: not on the stack */
static struct rt_sched scheds[2];
static struct rt_sched *sp[2] = { &scheds[0], &scheds[1] };
static const uint64_t shared_hashes[] = { 7, 8, 9 };
static char err[200];

/* Requests 2, 4 and 5 share three hash blocks of 16 tokens; the others have none. */
static void prefix_of(const void *ctx, uint32_t req, struct rt_kv_prefix *p)
{
    (void)ctx;
    const bool shares = req == 2 || req == 4 || req == 5;
    *p = (struct rt_kv_prefix){ .hash = shares ? shared_hashes : NULL, .nhash = shares ? 3 : 0,
                                .hash_block = 16, .input_len = reqs[req].input_len };
}

/* Two replicas of a chunked scheduler over reqs, every request undealt. */
static void start(bool prefix)
{
    memset(owner, RT_SCHED_UNDEALT, sizeof(owner));
    const uint32_t len[NREQ] = { 200, 20, 40, 20, 40, 40 };
    for (uint32_t i = 0; i < NREQ; i++)
        reqs[i] = (struct rt_request){ .id = i, .arrival_ps = i * MS, .input_len = len[i],
                                       .output_len = 4 };
    for (uint32_t k = 0; k < 2; k++) {
        struct rt_kvc_config c = { .block_tokens = 16, .sram_blocks = 64 };
        assert_int_equal(kvc_init(&kvcs[k], &c), NPU_OK);
        struct rt_sched_params p = { .kind = RT_SCHED_CHUNKED, .num_layers = 2,
                                     .max_batch = 4, .max_tokens = 64, .chunk = 64,
                                     .replica = k, .replicas = 2, .owner = owner };
        assert_int_equal(sched_init(&scheds[k], &p, reqs, NREQ, &kvcs[k], err, sizeof(err)),
                         NPU_OK);
        assert_int_equal(scheds[k].nown, 0);
        if (prefix) {
            kvc_prefix_attach(&kvcs[k], &pxs[k]);
            sched_prefix_source(&scheds[k], prefix_of, NULL);
        }
    }
}

/* Request i arrives at its time: dealt by d, then each replica takes what is its. */
static uint32_t arrive(uint32_t i, enum rt_dispatch d)
{
    const uint32_t k = sched_dispatch(sp, 2, i, d);
    owner[i] = (uint8_t)k;
    sched_accept_request(sp[k], i);
    for (uint32_t r = 0; r < 2; r++)
        sched_arrive(sp[r], reqs[i].arrival_ps, 4096);
    return k;
}

/* Runs replica k's iterations until it has nothing to run. */
static void drain(uint32_t k)
{
    struct rt_iter_plan it;
    while (sched_next(sp[k], &it))
        sched_complete(sp[k], &it);
}

static void test_names(void **state)
{
    (void)state;
    for (int d = 0; d < (int)RT_DISPATCH_COUNT; d++)
        assert_int_equal(rt_dispatch_parse(rt_dispatch_name((enum rt_dispatch)d)), d);
    assert_int_equal(rt_dispatch_parse("random"), -1);
    assert_int_equal(rt_dispatch_parse(NULL), -1);
}

/* Load: request 0 (200 + 4 tokens) goes to replica 0, so 1 goes to replica 1, and 2 to
   replica 1 too (24 tokens there against 204); round robin ignores all that. */
static void test_load(void **state)
{
    (void)state;
    start(false);
    assert_int_equal(arrive(0, RT_DISPATCH_LOAD), 0);
    assert_int_equal(arrive(1, RT_DISPATCH_LOAD), 1);
    assert_int_equal(arrive(2, RT_DISPATCH_LOAD), 1);
    assert_int_equal(sched_dispatch(sp, 2, 3, RT_DISPATCH_RR), 1);
    assert_int_equal(sched_dispatch(sp, 2, 4, RT_DISPATCH_RR), 0);
    assert_true(sched_owns(sp[1], 2) && !sched_owns(sp[0], 2) && !sched_may_own(sp[0], 2));
    assert_true(sched_may_own(sp[0], 3) && sched_may_own(sp[1], 3)); /* not dealt yet */
    assert_int_equal(scheds[0].nown + scheds[1].nown, 3);
}

/* A burst: six requests due at once are dealt in one pass before either replica takes any
   in (as the control core deals a round's arrivals); load must count the ones just dealt,
   or every one would go to replica 0. */
static void test_load_burst(void **state)
{
    (void)state;
    start(false);
    for (uint32_t i = 0; i < NREQ; i++)
        reqs[i].arrival_ps = 0;
    uint32_t on[2] = { 0, 0 };
    for (uint32_t i = 0; i < NREQ; i++) {
        const uint32_t k = sched_dispatch(sp, 2, i, RT_DISPATCH_LOAD);
        owner[i] = (uint8_t)k;
        sched_accept_request(sp[k], i);
        on[k]++;
    }
    /* request 0 (204 tokens) alone on replica 0, the other five (180 in all) on 1 */
    assert_int_equal(owner[0], 0);
    assert_int_equal(on[0], 1);
    assert_int_equal(on[1], 5);
    for (uint32_t r = 0; r < 2; r++)
        assert_int_equal(sched_arrive(sp[r], 0, 4096), on[r]); /* its own arrivals */
    assert_int_equal(sched_queue_len(sp[0]) + sched_queue_len(sp[1]), NREQ);
}

/* Prefix: request 2's prompt is published on replica 1, where load dealt it. With replica
   0 idle and replica 1 given request 3 (20 + 4 tokens, round robin), request 4 still goes
   to replica 1, the busier, where 32 of its 40 prompt tokens are cached (24 + 8 < 0 + 40),
   though load would deal it to 0; request 5 then goes to replica 0 (0 + 40 < 24 + 44 + 8):
   a held prefix wins only while the queue in front of it costs less than it saves. */
static void test_prefix(void **state)
{
    (void)state;
    start(true);
    assert_int_equal(arrive(0, RT_DISPATCH_PREFIX), 0);
    assert_int_equal(arrive(1, RT_DISPATCH_PREFIX), 1);
    assert_int_equal(arrive(2, RT_DISPATCH_PREFIX), 1); /* no prefix held: by load */
    drain(1); /* 1 and 2 run to the end: 2's prompt is in replica 1's index */
    drain(0);
    assert_int_equal(pxs[1].cached, 2);
    assert_int_equal(arrive(3, RT_DISPATCH_RR), 1);
    assert_int_equal(sched_dispatch(sp, 2, 4, RT_DISPATCH_LOAD), 0);
    assert_int_equal(arrive(4, RT_DISPATCH_PREFIX), 1);
    assert_int_equal(arrive(5, RT_DISPATCH_PREFIX), 0);
    drain(0);
    drain(1);
    assert_int_equal(reqs[4].cached, 32);
    assert_int_equal(reqs[5].cached, 0);
    for (uint32_t i = 0; i < NREQ; i++)
        assert_int_equal(reqs[i].state, RT_REQ_FINISHED);
    assert_true(sched_done(sp[0]) && sched_done(sp[1]));
    assert_int_equal(scheds[0].nown + scheds[1].nown, NREQ);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_load),
        cmocka_unit_test(test_load_burst),
        cmocka_unit_test(test_prefix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
