/* SPDX-License-Identifier: MIT */
/*
 * Host unit tests of the flow-level bandwidth model (emulator/model/flow_net.[ch]).
 * Round numbers: 1 GB/s = 1 byte per ns, so 1000 bytes at 1 GB/s take 1000000 ps.
 * Covers: one flow alone (full capacity, exact completion, remaining bytes around it, the
 * counters); two flows on one link (half each) and on separate links (full each); the
 * classic max-min example (three links, hand-computed rates), then a cancel and a completion
 * re-solving it; a completion freeing bandwidth; staggered starts; the floor rounding of
 * shares (three flows on 1 GB/s); congestion-free mode; determinism (add order, unrelated
 * re-solves, a random scenario run twice and against golden values); cancel; instant flows
 * (zero bytes, empty path); 64-bit extremes; invalid arguments; set_capacity; id reuse and
 * slot growth; busy time; locality (an add or remove re-solves only the flows of its
 * component, counted by `solved_flows`; a flow in another component keeps its exact end
 * time); completion ties by key; remaining() before the latest re-solve; and a randomized
 * stress (fixed-seed LCG, both modes) checking after every call that no resource is over
 * capacity, the max-min property, remaining == 0 exactly from the completion
 * time on, that every flow completes and that the bytes per resource add up. Deferred
 * re-solves: one instant by hand (a cancel, two equal completions, one re-solve each time),
 * failing calls while a re-solve is pending, and a randomized comparison of a model queried
 * as the chip engines query it against one re-solved after every call and against a
 * from-scratch max-min solve.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "flow_net.h"
#include "npu_enums.h"

#define GBPS 1000000000ull /* 1 GB/s: one byte per ns */
#define US 1000000ull      /* one microsecond in ps */

static uint32_t lcg_state;

static uint32_t lcg_next(void)
{
    lcg_state = lcg_state * 1664525u + 1013904223u;
    return lcg_state >> 8;
}

static uint32_t add_ok(struct flow_net *n, uint64_t t, uint64_t key, const uint32_t *path,
                       uint32_t len, uint64_t bytes)
{
    uint32_t id = UINT32_MAX;
    assert_int_equal(flow_net_add(n, t, key, path, len, bytes, &id), NPU_OK);
    assert_true(id != UINT32_MAX);
    return id;
}

/* The next completion is `id` at `t`: nothing left there; then it is removed at `t`. */
static void complete(struct flow_net *n, uint64_t t, uint32_t id)
{
    uint64_t got_t = 0;
    uint32_t got_id = UINT32_MAX;
    assert_true(flow_net_next_completion(n, &got_t, &got_id));
    assert_int_equal(got_t, t);
    assert_int_equal(got_id, id);
    assert_int_equal(flow_net_end_ps(n, id), t);
    assert_int_equal(flow_net_remaining(n, t, id), 0);
    assert_int_equal(flow_net_remove(n, t, id), NPU_OK);
}

static void test_single_flow(void **state)
{
    (void)state;
    struct flow_net n;
    const uint64_t cap[1] = { GBPS };
    const uint32_t path[1] = { 0 };
    assert_int_equal(flow_net_init(&n, 1, cap, false), NPU_OK);
    uint32_t id = add_ok(&n, 0, 1, path, 1, 1000);
    assert_int_equal(id, 0);
    assert_int_equal(flow_net_rate(&n, id), GBPS);
    assert_int_equal(flow_net_resource_flows(&n, 0), 1);
    assert_int_equal(flow_net_remaining(&n, 0, id), 1000);
    assert_int_equal(flow_net_remaining(&n, 500000, id), 500);
    assert_int_equal(flow_net_remaining(&n, 999999, id), 1); /* 0.001 byte left rounds up */
    assert_int_equal(flow_net_remaining(&n, 1000000, id), 0);
    complete(&n, 1000000, id);
    assert_false(flow_net_next_completion(&n, NULL, NULL));
    assert_int_equal(flow_net_active_count(&n), 0);
    assert_int_equal(flow_net_resource_flows(&n, 0), 0);
    assert_int_equal(flow_net_resource_bytes(&n, 0), 1000);
    assert_int_equal(flow_net_resource_busy_ps(&n, 0, 5000000), 1000000);
    flow_net_destroy(&n);
}

static void test_two_flows_one_link(void **state)
{
    (void)state;
    struct flow_net n;
    const uint64_t cap[1] = { GBPS };
    const uint32_t path[1] = { 0 };
    assert_int_equal(flow_net_init(&n, 1, cap, false), NPU_OK);
    uint32_t a = add_ok(&n, 0, 1, path, 1, 1000);
    uint32_t b = add_ok(&n, 0, 2, path, 1, 1000);
    assert_int_equal(flow_net_rate(&n, a), GBPS / 2);
    assert_int_equal(flow_net_rate(&n, b), GBPS / 2);
    assert_int_equal(flow_net_end_ps(&n, b), 2000000);
    complete(&n, 2000000, a); /* equal times: lower key first */
    complete(&n, 2000000, b); /* the re-solve at 2 us did not move it */
    assert_int_equal(flow_net_resource_bytes(&n, 0), 2000);
    flow_net_destroy(&n);
}

static void test_two_flows_separate_links(void **state)
{
    (void)state;
    struct flow_net n;
    const uint64_t cap[2] = { GBPS, 2 * GBPS };
    const uint32_t p0[1] = { 0 }, p1[1] = { 1 };
    assert_int_equal(flow_net_init(&n, 2, cap, false), NPU_OK);
    uint32_t a = add_ok(&n, 0, 1, p0, 1, 1000);
    uint32_t b = add_ok(&n, 0, 2, p1, 1, 1000);
    assert_int_equal(flow_net_rate(&n, a), GBPS);
    assert_int_equal(flow_net_rate(&n, b), 2 * GBPS);
    complete(&n, 500000, b);
    complete(&n, 1000000, a);
    flow_net_destroy(&n);
}

/*
 * Links A (10 GB/s), B (4 GB/s), C (1 GB/s); flow 1 over A+B, flow 2 over A, flow 3 over B+C.
 * C is the first bottleneck (flow 3: 1), then B (flow 1: 4 - 1 = 3), then A (flow 2:
 * 10 - 3 = 7). Cancelling flow 3 at 0.5 us gives flow 1 all of B (4) and flow 2 6; when
 * flow 1 ends flow 2 gets all of A.
 */
static void test_max_min_classic(void **state)
{
    (void)state;
    struct flow_net n;
    const uint64_t cap[3] = { 10 * GBPS, 4 * GBPS, 1 * GBPS };
    const uint32_t p1[2] = { 0, 1 }, p2[1] = { 0 }, p3[2] = { 1, 2 };
    assert_int_equal(flow_net_init(&n, 3, cap, false), NPU_OK);
    uint32_t f1 = add_ok(&n, 0, 1, p1, 2, 3000);
    uint32_t f2 = add_ok(&n, 0, 2, p2, 1, 7000);
    uint32_t f3 = add_ok(&n, 0, 3, p3, 2, 1000);
    assert_int_equal(flow_net_rate(&n, f1), 3 * GBPS);
    assert_int_equal(flow_net_rate(&n, f2), 7 * GBPS);
    assert_int_equal(flow_net_rate(&n, f3), 1 * GBPS);
    for (uint32_t f = 0; f < 3; f++)
        assert_int_equal(flow_net_end_ps(&n, f), 1000000);
    assert_int_equal(flow_net_remove(&n, 500000, f3), NPU_OK); /* cancel: 500 bytes moved */
    assert_int_equal(flow_net_rate(&n, f1), 4 * GBPS);
    assert_int_equal(flow_net_rate(&n, f2), 6 * GBPS);
    assert_int_equal(flow_net_end_ps(&n, f1), 500000 + 375000);  /* 1500 B at 4 B/ns */
    assert_int_equal(flow_net_end_ps(&n, f2), 500000 + 583334);  /* ceil(3500 / 6 ns) */
    complete(&n, 875000, f1);
    assert_int_equal(flow_net_rate(&n, f2), 10 * GBPS);
    assert_int_equal(flow_net_remaining(&n, 875000, f2), 1250);
    complete(&n, 1000000, f2); /* 1250 B at 10 B/ns */
    assert_int_equal(flow_net_resource_bytes(&n, 0), 10000);
    assert_int_equal(flow_net_resource_bytes(&n, 1), 3500);
    assert_int_equal(flow_net_resource_bytes(&n, 2), 500);
    assert_int_equal(flow_net_resource_busy_ps(&n, 2, 2000000), 500000);
    assert_int_equal(flow_net_resource_busy_ps(&n, 0, 2000000), 1000000);
    flow_net_destroy(&n);
}

static void test_end_frees_bandwidth(void **state)
{
    (void)state;
    struct flow_net n;
    const uint64_t cap[1] = { GBPS };
    const uint32_t path[1] = { 0 };
    assert_int_equal(flow_net_init(&n, 1, cap, false), NPU_OK);
    uint32_t a = add_ok(&n, 0, 7, path, 1, 1000);
    uint32_t b = add_ok(&n, 0, 8, path, 1, 3000);
    assert_int_equal(flow_net_end_ps(&n, b), 6000000); /* at half rate throughout */
    complete(&n, 2000000, a);
    assert_int_equal(flow_net_rate(&n, b), GBPS);
    assert_int_equal(flow_net_remaining(&n, 2000000, b), 2000);
    complete(&n, 4000000, b); /* 2000 B left at full rate */
    flow_net_destroy(&n);
}

static void test_staggered_starts(void **state)
{
    (void)state;
    struct flow_net n;
    const uint64_t cap[1] = { GBPS };
    const uint32_t path[1] = { 0 };
    assert_int_equal(flow_net_init(&n, 1, cap, false), NPU_OK);
    uint32_t a = add_ok(&n, 0, 1, path, 1, 2000);
    assert_int_equal(flow_net_end_ps(&n, a), 2000000);
    uint32_t b = add_ok(&n, 1000000, 2, path, 1, 500);
    assert_int_equal(flow_net_remaining(&n, 1000000, a), 1000);
    assert_int_equal(flow_net_rate(&n, a), GBPS / 2);
    complete(&n, 2000000, b); /* 500 B at half rate */
    complete(&n, 2500000, a); /* 500 B left at full rate */
    assert_int_equal(flow_net_resource_busy_ps(&n, 0, 2500000), 2500000);
    flow_net_destroy(&n);
}

/* Shares are floored to whole bytes per second: 1e9 / 3 = 333333333 B/s. */
static void test_floor_rounding(void **state)
{
    (void)state;
    struct flow_net n;
    const uint64_t cap[1] = { GBPS };
    const uint32_t path[1] = { 0 };
    assert_int_equal(flow_net_init(&n, 1, cap, false), NPU_OK);
    uint32_t id[3];
    for (uint32_t i = 0; i < 3; i++)
        id[i] = add_ok(&n, 0, i, path, 1, 1000);
    for (uint32_t i = 0; i < 3; i++) {
        assert_int_equal(flow_net_rate(&n, id[i]), 333333333);
        /* 1e15 picobytes / 333333333 B/s = 3000000.003 ps, rounded up */
        assert_int_equal(flow_net_end_ps(&n, id[i]), 3000001);
        assert_int_equal(flow_net_remaining(&n, 3000000, id[i]), 1);
    }
    complete(&n, 3000001, id[0]);
    complete(&n, 3000001, id[1]);
    complete(&n, 3000001, id[2]);
    flow_net_destroy(&n);
}

static void test_congestion_free(void **state)
{
    (void)state;
    struct flow_net n;
    const uint64_t cap[2] = { 4 * GBPS, GBPS };
    const uint32_t p0[1] = { 0 }, p01[2] = { 0, 1 };
    assert_int_equal(flow_net_init(&n, 2, cap, true), NPU_OK);
    uint32_t a = add_ok(&n, 0, 1, p0, 1, 4000);
    uint32_t b = add_ok(&n, 0, 2, p0, 1, 4000);
    uint32_t c = add_ok(&n, 0, 3, p01, 2, 1000);
    assert_int_equal(flow_net_rate(&n, a), 4 * GBPS);
    assert_int_equal(flow_net_rate(&n, b), 4 * GBPS);
    assert_int_equal(flow_net_rate(&n, c), GBPS); /* the slowest link of its path */
    assert_int_equal(n.solves, 0);
    complete(&n, 1000000, a);
    complete(&n, 1000000, b);
    complete(&n, 1000000, c);
    assert_int_equal(flow_net_resource_bytes(&n, 0), 9000);
    assert_int_equal(flow_net_resource_bytes(&n, 1), 1000);
    flow_net_destroy(&n);
}

static void test_cancel(void **state)
{
    (void)state;
    struct flow_net n;
    const uint64_t cap[1] = { GBPS };
    const uint32_t path[1] = { 0 };
    assert_int_equal(flow_net_init(&n, 1, cap, false), NPU_OK);
    uint32_t a = add_ok(&n, 0, 1, path, 1, 10000);
    uint32_t b = add_ok(&n, 0, 2, path, 1, 1000);
    assert_int_equal(flow_net_remove(&n, 1000000, a), NPU_OK); /* a moved 500 B */
    assert_int_equal(flow_net_rate(&n, a), 0);
    assert_int_equal(flow_net_end_ps(&n, a), FLOW_NET_NEVER);
    assert_int_equal(flow_net_remove(&n, 1000000, a), NPU_ERR_INVAL);
    assert_int_equal(flow_net_rate(&n, b), GBPS);
    complete(&n, 1500000, b); /* 500 B left at full rate */
    assert_int_equal(flow_net_resource_bytes(&n, 0), 1500);
    /* a cancel at the start moves nothing */
    uint32_t c = add_ok(&n, 2000000, 3, path, 1, 1000);
    assert_int_equal(flow_net_remove(&n, 2000000, c), NPU_OK);
    assert_int_equal(flow_net_resource_bytes(&n, 0), 1500);
    assert_int_equal(flow_net_resource_busy_ps(&n, 0, 9000000), 1500000);
    flow_net_destroy(&n);
}

static void test_instant_flows(void **state)
{
    (void)state;
    struct flow_net n;
    const uint64_t cap[1] = { GBPS };
    const uint32_t path[1] = { 0 };
    assert_int_equal(flow_net_init(&n, 1, cap, false), NPU_OK);
    uint32_t a = add_ok(&n, 0, 10, path, 1, 1000);
    uint32_t z = add_ok(&n, 300000, 20, path, 1, 0);  /* zero bytes */
    uint32_t l = add_ok(&n, 300000, 30, NULL, 0, 4096); /* local copy */
    assert_int_equal(n.solves, 1); /* instant flows do not re-solve */
    assert_int_equal(flow_net_rate(&n, a), GBPS);
    assert_int_equal(flow_net_rate(&n, z), FLOW_NET_UNLIMITED);
    assert_int_equal(flow_net_rate(&n, l), FLOW_NET_UNLIMITED);
    assert_int_equal(flow_net_resource_flows(&n, 0), 1);
    assert_int_equal(flow_net_remaining(&n, 300000, l), 0);
    complete(&n, 300000, z);
    complete(&n, 300000, l);
    complete(&n, 1000000, a);
    assert_int_equal(flow_net_resource_bytes(&n, 0), 1000);
    flow_net_destroy(&n);

    assert_int_equal(flow_net_init(&n, 0, NULL, false), NPU_OK); /* no resources at all */
    l = add_ok(&n, 5, 1, NULL, 0, 1);
    complete(&n, 5, l);
    flow_net_destroy(&n);
}

static void test_extremes(void **state)
{
    (void)state;
    struct flow_net n;
    const uint64_t cap[2] = { 1, UINT64_MAX };
    const uint32_t p0[1] = { 0 }, p1[1] = { 1 };
    assert_int_equal(flow_net_init(&n, 2, cap, false), NPU_OK);
    uint32_t slow = add_ok(&n, 0, 1, p0, 1, UINT64_MAX);
    uint32_t fast = add_ok(&n, 0, 2, p1, 1, UINT64_MAX);
    assert_int_equal(flow_net_end_ps(&n, slow), FLOW_NET_NEVER); /* saturated */
    assert_int_equal(flow_net_end_ps(&n, fast), FLOW_NET_PS_PER_S); /* exactly one second */
    assert_int_equal(flow_net_remaining(&n, FLOW_NET_PS_PER_S, slow), UINT64_MAX - 1);
    /* one ps before the end, 2^64 - 1 picobytes are left: ceil(18446744.07) bytes */
    assert_int_equal(flow_net_remaining(&n, FLOW_NET_PS_PER_S - 1, fast), 18446745);
    complete(&n, FLOW_NET_PS_PER_S, fast);
    assert_int_equal(flow_net_resource_bytes(&n, 1), UINT64_MAX);
    assert_int_equal(flow_net_remove(&n, 3 * FLOW_NET_PS_PER_S, slow), NPU_OK);
    assert_int_equal(flow_net_resource_bytes(&n, 0), 3);
    flow_net_destroy(&n);
}

static void test_invalid_init(void **state)
{
    (void)state;
    struct flow_net n;
    const uint64_t cap[3] = { GBPS, 0, GBPS };
    assert_int_equal(flow_net_init(NULL, 1, cap, false), NPU_ERR_INVAL);
    assert_int_equal(flow_net_init(&n, 2, NULL, false), NPU_ERR_INVAL);
    assert_int_equal(flow_net_init(&n, 3, cap, false), NPU_ERR_INVAL); /* capacity 0 */
    flow_net_destroy(&n); /* harmless after a failed init */
    flow_net_destroy(NULL);
}

static void test_invalid_add_remove(void **state)
{
    (void)state;
    struct flow_net n;
    const uint64_t cap[3] = { GBPS, GBPS, 2 };
    const uint32_t ok[2] = { 0, 1 }, out[2] = { 0, 3 }, rep[3] = { 0, 1, 0 }, slow[1] = { 2 };
    uint32_t id;
    assert_int_equal(flow_net_init(&n, 3, cap, false), NPU_OK);
    assert_int_equal(flow_net_add(NULL, 0, 1, ok, 2, 10, &id), NPU_ERR_INVAL);
    assert_int_equal(flow_net_add(&n, 0, 1, ok, 2, 10, NULL), NPU_ERR_INVAL);
    assert_int_equal(flow_net_add(&n, 0, 1, NULL, 2, 10, &id), NPU_ERR_INVAL);
    assert_int_equal(flow_net_add(&n, 0, 1, out, 2, 10, &id), NPU_ERR_RANGE);
    assert_int_equal(flow_net_add(&n, 0, 1, rep, 3, 10, &id), NPU_ERR_INVAL);
    assert_int_equal(flow_net_add(&n, 0, 1, rep, 3, 0, &id), NPU_ERR_INVAL); /* even instant */
    id = add_ok(&n, 100, 1, ok, 2, 10);
    assert_int_equal(flow_net_add(&n, 100, 1, ok, 1, 10, &id), NPU_ERR_INVAL); /* key active */
    assert_int_equal(flow_net_add(&n, 99, 2, ok, 1, 10, &id), NPU_ERR_RANGE);  /* time back */
    /* capacity 2 B/s carries at most two flows (each needs >= 1 B/s) */
    add_ok(&n, 100, 2, slow, 1, 10);
    add_ok(&n, 100, 3, slow, 1, 10);
    assert_int_equal(flow_net_add(&n, 100, 4, slow, 1, 10, &id), NPU_ERR_RANGE);
    assert_int_equal(flow_net_active_count(&n), 3); /* failed adds changed nothing */
    assert_int_equal(flow_net_resource_flows(&n, 2), 2);
    add_ok(&n, 100, 4, slow, 1, 0); /* an instant flow takes no bandwidth */
    assert_int_equal(flow_net_remove(NULL, 100, 0), NPU_ERR_INVAL);
    assert_int_equal(flow_net_remove(&n, 100, 99), NPU_ERR_INVAL);
    assert_int_equal(flow_net_remove(&n, 100, 4), NPU_ERR_INVAL); /* never-used slot */
    assert_int_equal(flow_net_remove(&n, 50, 0), NPU_ERR_RANGE);
    assert_int_equal(flow_net_remove(&n, 200, 0), NPU_OK);
    id = add_ok(&n, 200, 1, ok, 2, 10); /* a key is free again once its flow ended */
    assert_int_equal(flow_net_rate(&n, 99), 0);
    assert_int_equal(flow_net_remaining(&n, 0, 99), 0);
    assert_int_equal(flow_net_end_ps(&n, 99), FLOW_NET_NEVER);
    assert_int_equal(flow_net_resource_bytes(&n, 3), 0);
    assert_int_equal(flow_net_resource_busy_ps(&n, 3, 0), 0);
    assert_int_equal(flow_net_resource_flows(&n, 3), 0);
    assert_false(flow_net_next_completion(NULL, NULL, NULL));
    flow_net_destroy(&n);
}

static void test_set_capacity(void **state)
{
    (void)state;
    struct flow_net n;
    const uint64_t cap[2] = { GBPS, GBPS };
    const uint32_t p0[1] = { 0 };
    assert_int_equal(flow_net_init(&n, 2, cap, false), NPU_OK);
    assert_int_equal(flow_net_set_capacity(NULL, 0, GBPS), NPU_ERR_INVAL);
    assert_int_equal(flow_net_set_capacity(&n, 2, GBPS), NPU_ERR_RANGE);
    assert_int_equal(flow_net_set_capacity(&n, 0, 0), NPU_ERR_INVAL);
    assert_int_equal(flow_net_set_capacity(&n, 0, 4 * GBPS), NPU_OK);
    uint32_t a = add_ok(&n, 0, 1, p0, 1, 4000);
    assert_int_equal(flow_net_end_ps(&n, a), 1000000);
    assert_int_equal(flow_net_set_capacity(&n, 0, GBPS), NPU_ERR_STATE);
    assert_int_equal(flow_net_set_capacity(&n, 1, 2 * GBPS), NPU_OK); /* idle resource */
    complete(&n, 1000000, a);
    assert_int_equal(flow_net_set_capacity(&n, 0, GBPS), NPU_OK);
    flow_net_destroy(&n);
}

static void test_id_reuse(void **state)
{
    (void)state;
    struct flow_net n;
    const uint64_t cap[1] = { GBPS };
    const uint32_t path[1] = { 0 };
    assert_int_equal(flow_net_init(&n, 1, cap, false), NPU_OK);
    for (uint32_t i = 0; i < 3; i++)
        assert_int_equal(add_ok(&n, 0, i, path, 1, 1000), i);
    assert_int_equal(flow_net_remove(&n, 10, 1), NPU_OK);
    assert_int_equal(add_ok(&n, 10, 100, path, 1, 1000), 1); /* lowest free id */
    assert_int_equal(flow_net_remove(&n, 20, 2), NPU_OK);
    assert_int_equal(flow_net_remove(&n, 20, 0), NPU_OK);
    assert_int_equal(add_ok(&n, 20, 101, path, 1, 1000), 0);
    assert_int_equal(add_ok(&n, 20, 102, path, 1, 1000), 2);
    for (uint32_t i = 3; i < 40; i++) /* past the initial slots */
        assert_int_equal(add_ok(&n, 20, 200 + i, path, 1, 1000), i);
    assert_int_equal(flow_net_active_count(&n), 40);
    assert_int_equal(flow_net_rate(&n, 39), GBPS / 40);
    flow_net_destroy(&n);
}

/* ---- determinism ---- */

/* Four flows over shared links added at one instant in a given order; returns the
 * (time, key) sequence of completions, processed to the end. */
static void run_order(const uint32_t *perm, uint64_t *out)
{
    static const uint32_t paths[4][3] = { { 0, 1 }, { 1, 2, 3 }, { 0 }, { 2, 3 } };
    static const uint32_t lens[4] = { 2, 3, 1, 2 };
    static const uint64_t bytes[4] = { 7777, 12345, 3333, 999 };
    const uint64_t cap[4] = { 3 * GBPS + 7, 5 * GBPS - 3, 2 * GBPS + 1, 999999937 };
    struct flow_net n;
    assert_int_equal(flow_net_init(&n, 4, cap, false), NPU_OK);
    uint64_t key_of[8];
    key_of[add_ok(&n, 0, 1000, paths[0], 1, 50000)] = 1000; /* started earlier */
    for (uint32_t i = 0; i < 4; i++) {
        uint32_t f = perm[i];
        uint32_t id = add_ok(&n, 1000, 10 * (f + 1), paths[f], lens[f], bytes[f]);
        assert_true(id < 8);
        key_of[id] = 10 * (f + 1);
    }
    for (uint32_t k = 0; k < 5; k++) {
        uint64_t t;
        uint32_t id;
        assert_true(flow_net_next_completion(&n, &t, &id));
        out[2 * k] = t;
        out[2 * k + 1] = key_of[id];
        assert_int_equal(flow_net_remove(&n, t, id), NPU_OK);
    }
    assert_false(flow_net_next_completion(&n, NULL, NULL));
    for (uint32_t r = 0; r < 4; r++)
        out[10 + r] = flow_net_resource_bytes(&n, r);
    flow_net_destroy(&n);
}

static void test_determinism_add_order(void **state)
{
    (void)state;
    static const uint32_t perms[4][4] = {
        { 0, 1, 2, 3 }, { 3, 2, 1, 0 }, { 1, 3, 0, 2 }, { 2, 0, 3, 1 },
    };
    uint64_t ref[14], got[14];
    run_order(perms[0], ref);
    for (uint32_t p = 1; p < 4; p++) {
        run_order(perms[p], got);
        assert_memory_equal(ref, got, sizeof(ref));
    }
}

/* Re-solves caused by unrelated flows never move a completion time (exact rebasing). */
static void test_determinism_unrelated_resolves(void **state)
{
    (void)state;
    const uint64_t cap[2] = { 999999937, 3 * GBPS + 1 };
    const uint32_t p0[1] = { 0 }, p1[1] = { 1 };
    struct flow_net n;
    assert_int_equal(flow_net_init(&n, 2, cap, false), NPU_OK);
    uint32_t x = add_ok(&n, 0, 1, p0, 1, 123457);
    uint32_t y = add_ok(&n, 0, 2, p0, 1, 98765);
    uint64_t ex = flow_net_end_ps(&n, x), ey = flow_net_end_ps(&n, y);
    uint64_t t = 1;
    for (uint32_t i = 0; i < 200 && t < ey; i++, t += 333) { /* churn on the other link */
        uint32_t z = add_ok(&n, t, 100 + i, p1, 1, 1 + i * 7);
        assert_true(flow_net_rate(&n, z) >= 1); /* the query re-solves now */
        if (i % 3 != 0)
            assert_int_equal(flow_net_remove(&n, t + 111, z), NPU_OK);
        else
            assert_int_equal(flow_net_remove(&n, t, z), NPU_OK);
        assert_int_equal(flow_net_rate(&n, x), cap[0] / 2);
    }
    assert_true(n.solves > 400);
    assert_int_equal(flow_net_end_ps(&n, x), ex);
    assert_int_equal(flow_net_end_ps(&n, y), ey);
    flow_net_destroy(&n);
}

/* ---- locality: a start or end re-solves only the flows it can affect ---- */

#define L_NRES 201u /* 200 flows on separate resources; the last one stays idle */

static void test_locality_separate_resources(void **state)
{
    (void)state;
    static uint64_t cap[L_NRES];
    struct flow_net n;
    for (uint32_t r = 0; r < L_NRES; r++)
        cap[r] = GBPS + r;
    assert_int_equal(flow_net_init(&n, L_NRES, cap, false), NPU_OK);
    for (uint32_t r = 0; r < L_NRES - 1; r++) {
        uint64_t before = n.solved_flows;
        uint32_t id = add_ok(&n, r, 1000 + r, &r, 1, 1000000 + r);
        assert_int_equal(flow_net_rate(&n, id), GBPS + r); /* the query re-solves now */
        assert_int_equal(n.solved_flows - before, 1); /* each add solves its own flow only */
    }
    uint64_t solves = n.solves, solved = n.solved_flows;
    const uint32_t idle[1] = { L_NRES - 1 }, shared[2] = { L_NRES - 1, 5 };
    uint32_t x = add_ok(&n, 1000, 1, idle, 1, 5000);   /* alone on the idle resource */
    assert_int_equal(flow_net_rate(&n, x), GBPS + L_NRES - 1);
    assert_int_equal(n.solved_flows - solved, 1);
    assert_int_equal(flow_net_remove(&n, 2000, x), NPU_OK); /* leaves no flow to re-solve */
    assert_int_equal(n.solved_flows - solved, 1);
    x = add_ok(&n, 3000, 2, shared, 2, 5000);  /* shares resource 5 with one flow */
    assert_int_equal(n.solves - solves, 2);    /* the add re-solved the remove's resource */
    assert_int_equal(n.solved_flows - solved, 1); /* (with no flow left on it) */
    assert_int_equal(flow_net_rate(&n, x), (GBPS + 5) / 2);
    assert_int_equal(flow_net_rate(&n, 5), (GBPS + 5) / 2);
    assert_int_equal(flow_net_rate(&n, 6), GBPS + 6);
    assert_int_equal(n.solved_flows - solved, 3);
    assert_int_equal(flow_net_remove(&n, 4000, x), NPU_OK); /* re-solves flow 5 alone */
    assert_int_equal(flow_net_rate(&n, 5), GBPS + 5);
    assert_int_equal(n.solved_flows - solved, 4);
    assert_int_equal(n.solves - solves, 4); /* still one re-solve per add or remove */
    flow_net_destroy(&n);
}

/*
 * A flow alone on its resource keeps its exact rate and completion time while flows start
 * and end in other components (chains of shared links that merge and split), and none of
 * those re-solves includes it.
 */
static void test_locality_other_component(void **state)
{
    (void)state;
    const uint64_t cap[6] = { 999999937, 3 * GBPS + 1, 2 * GBPS + 3, 5 * GBPS - 7, GBPS, 11 };
    struct flow_net n;
    assert_int_equal(flow_net_init(&n, 6, cap, false), NPU_OK);
    const uint32_t p0[1] = { 0 };
    uint32_t x = add_ok(&n, 0, 1, p0, 1, 1234567);
    uint64_t end = flow_net_end_ps(&n, x), t = 1;
    uint32_t live[8], nlive = 0;
    lcg_state = 7;
    for (uint32_t i = 0; i < 2000 && t < end; i++, t += 1 + lcg_next() % 500) {
        uint64_t before = n.solved_flows;
        bool added = nlive < 8 && (nlive == 0 || lcg_next() % 2);
        if (added) {
            uint32_t path[2] = { 1 + lcg_next() % 5, 0 }, len = 1;
            if (lcg_next() % 2 && (path[1] = 1 + lcg_next() % 5) != path[0])
                len = 2;
            live[nlive++] = add_ok(&n, t, 100 + i, path, len, 1 + lcg_next() % 100000);
        } else {
            uint32_t k = lcg_next() % nlive;
            assert_int_equal(flow_net_remove(&n, t, live[k]), NPU_OK);
            live[k] = live[--nlive];
        }
        assert_int_equal(flow_net_rate(&n, x), cap[0]); /* the query re-solves now */
        assert_int_equal(flow_net_end_ps(&n, x), end);
        assert_true(n.solved_flows - before <= nlive); /* never flow x */
        assert_true(n.solved_flows - before >= added); /* at least the flow added */
    }
    assert_true(n.solves > 1000);
    while (nlive > 0)
        assert_int_equal(flow_net_remove(&n, t, live[--nlive]), NPU_OK);
    complete(&n, end, x);
    assert_int_equal(flow_net_resource_bytes(&n, 0), 1234567);
    flow_net_destroy(&n);
}

/* Equal completion times come out by key, whatever the ids and the add order. */
static void test_completion_order_ties(void **state)
{
    (void)state;
    static uint64_t cap[64];
    struct flow_net n;
    for (uint32_t r = 0; r < 64; r++)
        cap[r] = GBPS;
    assert_int_equal(flow_net_init(&n, 64, cap, false), NPU_OK);
    uint64_t key_of[64];
    for (uint32_t r = 0; r < 64; r++) {
        uint64_t key = ((r * 37u) % 64) * 1000; /* a permutation of the keys */
        key_of[add_ok(&n, 0, key, &r, 1, r % 2 ? 2000 : 1000)] = key;
    }
    uint64_t prev = 0;
    for (uint32_t i = 0; i < 64; i++) {
        uint64_t t;
        uint32_t id;
        assert_true(flow_net_next_completion(&n, &t, &id));
        assert_int_equal(t, i < 32 ? 1000000 : 2000000);
        if (i % 32 != 0) /* keys ascend within each completion time */
            assert_true(key_of[id] > prev);
        prev = key_of[id];
        assert_int_equal(flow_net_remove(&n, t, id), NPU_OK);
    }
    flow_net_destroy(&n);
}

/* remaining() at a time before the latest re-solve counts as that re-solve's time, also for
 * a flow the re-solve did not touch (as if it had been rebased there). */
static void test_remaining_before_resolve(void **state)
{
    (void)state;
    const uint64_t cap[2] = { GBPS, GBPS };
    const uint32_t p0[1] = { 0 }, p1[1] = { 1 };
    struct flow_net n;
    assert_int_equal(flow_net_init(&n, 2, cap, false), NPU_OK);
    uint32_t a = add_ok(&n, 0, 1, p0, 1, 1000);
    assert_int_equal(flow_net_remaining(&n, 100000, a), 900);
    uint32_t b = add_ok(&n, 400000, 2, p1, 1, 1000); /* another component */
    assert_int_equal(flow_net_remaining(&n, 100000, a), 600);
    assert_int_equal(flow_net_remaining(&n, 500000, a), 500);
    assert_int_equal(flow_net_remaining(&n, 0, b), 1000);
    complete(&n, 1000000, a);
    complete(&n, 1400000, b);
    flow_net_destroy(&n);
}

/* ---- randomized stress ---- */

#define S_NRES 24u
#define S_MAXF 40u
#define S_MAXLEN 6u
#define S_SLOTS 64u
#define S_STEPS 3000u

struct sflow {
    bool active;
    uint64_t key, bytes;
    uint32_t path[S_MAXLEN];
    uint32_t len;
};

struct scen {
    struct flow_net n;
    bool congestion_free;
    uint64_t cap[S_NRES];
    struct sflow fl[S_SLOTS];
    uint64_t expect[S_NRES]; /* bytes per resource */
    uint64_t now;
    uint64_t nkeys;
    uint64_t hash; /* FNV-1a of the completions */
    uint32_t completed, cancelled;
    uint64_t sum_active; /* over the steps: the mean concurrency */
};

static void hash_u64(uint64_t *h, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        *h ^= (v >> (8 * i)) & 0xffu;
        *h *= 1099511628211ull;
    }
}

static bool s_shares(const struct sflow *f)
{
    return f->active && f->bytes != 0 && f->len != 0;
}

static bool s_crosses(const struct sflow *f, uint32_t r)
{
    for (uint32_t k = 0; k < f->len; k++)
        if (f->path[k] == r)
            return true;
    return false;
}

struct s_load {
    uint64_t sum[S_NRES], max[S_NRES]; /* rates of the sharing flows on each resource */
    uint32_t count[S_NRES];
};

static void s_loads(struct scen *s, struct s_load *l)
{
    memset(l, 0, sizeof(*l));
    for (uint32_t id = 0; id < S_SLOTS; id++) {
        const struct sflow *f = &s->fl[id];
        if (!s_shares(f))
            continue;
        uint64_t rate = flow_net_rate(&s->n, id);
        for (uint32_t k = 0; k < f->len; k++) {
            uint32_t r = f->path[k];
            l->sum[r] += rate;
            l->max[r] = rate > l->max[r] ? rate : l->max[r];
            l->count[r]++;
        }
    }
}

/* Max-min: some resource of the path is saturated (up to the floor slack, fewer B/s than
 * it has flows) and no flow on it gets more than this one. */
static bool s_has_bottleneck(const struct scen *s, const struct s_load *l,
                             const struct sflow *f, uint64_t rate)
{
    for (uint32_t k = 0; k < f->len; k++) {
        uint32_t r = f->path[k];
        if (s->cap[r] - l->sum[r] < l->count[r] && rate == l->max[r])
            return true;
    }
    return false;
}

static void s_check_flow(struct scen *s, const struct s_load *l, uint32_t id)
{
    const struct sflow *f = &s->fl[id];
    uint64_t rate = flow_net_rate(&s->n, id), end = flow_net_end_ps(&s->n, id);
    assert_true(end >= s->now);
    /* remaining is zero exactly from the completion time on */
    assert_int_equal(flow_net_remaining(&s->n, s->now, id) == 0, end <= s->now);
    assert_true(flow_net_remaining(&s->n, s->now, id) <= f->bytes);
    if (!s_shares(f)) {
        assert_int_equal(rate, FLOW_NET_UNLIMITED);
        return;
    }
    assert_true(rate >= 1);
    if (s->congestion_free) {
        uint64_t min = UINT64_MAX;
        for (uint32_t k = 0; k < f->len; k++)
            min = s->cap[f->path[k]] < min ? s->cap[f->path[k]] : min;
        assert_int_equal(rate, min);
    } else {
        assert_true(s_has_bottleneck(s, l, f, rate));
    }
}

static void s_check(struct scen *s)
{
    static struct s_load l;
    uint32_t active = 0;
    s_loads(s, &l);
    for (uint32_t r = 0; r < S_NRES; r++) {
        assert_int_equal(flow_net_resource_flows(&s->n, r), l.count[r]);
        if (!s->congestion_free)
            assert_true(l.sum[r] <= s->cap[r]);
    }
    for (uint32_t id = 0; id < S_SLOTS; id++) {
        if (!s->fl[id].active)
            continue;
        active++;
        s_check_flow(s, &l, id);
    }
    assert_int_equal(flow_net_active_count(&s->n), active);
}

static void s_end(struct scen *s, uint32_t id)
{
    struct sflow *f = &s->fl[id];
    uint64_t done = f->bytes - flow_net_remaining(&s->n, s->now, id);
    assert_int_equal(flow_net_remove(&s->n, s->now, id), NPU_OK);
    for (uint32_t k = 0; k < f->len; k++)
        s->expect[f->path[k]] += done;
    f->active = false;
}

static void s_add(struct scen *s)
{
    uint64_t next;
    uint64_t t = s->now + (lcg_next() % 3 == 0 ? 0 : lcg_next() % 2000000);
    if (flow_net_next_completion(&s->n, &next, NULL) && next < t)
        t = next; /* never step past a completion */
    struct sflow f = { .active = true };
    uint32_t len = lcg_next() % S_MAXLEN;
    while (f.len < len) { /* distinct resources */
        uint32_t r = lcg_next() % S_NRES;
        if (!s_crosses(&f, r))
            f.path[f.len++] = r;
    }
    f.bytes = lcg_next() % 8 == 0 ? 0 : 1 + lcg_next() % 500000;
    f.key = (++s->nkeys) * 0x9e3779b97f4a7c15ull; /* unique, not monotonic */
    uint32_t id = UINT32_MAX;
    s->now = t;
    assert_int_equal(flow_net_add(&s->n, t, f.key, f.path, f.len, f.bytes, &id), NPU_OK);
    assert_true(id < S_SLOTS && !s->fl[id].active);
    s->fl[id] = f;
}

/* Removes the next completion; false if nothing is active. */
static bool s_complete_next(struct scen *s)
{
    uint64_t t;
    uint32_t id;
    if (!flow_net_next_completion(&s->n, &t, &id))
        return false;
    assert_true(t >= s->now && s->fl[id].active);
    s->now = t;
    assert_int_equal(flow_net_remaining(&s->n, t, id), 0);
    hash_u64(&s->hash, t);
    hash_u64(&s->hash, s->fl[id].key);
    s_end(s, id);
    s->completed++;
    return true;
}

static void s_step(struct scen *s)
{
    uint32_t op = lcg_next() % 16, active = flow_net_active_count(&s->n);
    if (op < 9 && active < S_MAXF) {
        s_add(s);
    } else if (op == 9 && active > 0) {
        uint32_t id;
        do
            id = lcg_next() % S_SLOTS;
        while (!s->fl[id].active);
        s_end(s, id);
        s->cancelled++;
    } else {
        s_complete_next(s);
    }
}

/* Runs a random scenario; returns its completion hash. */
static uint64_t run_scenario(struct scen *s, uint32_t seed, bool congestion_free)
{
    memset(s, 0, sizeof(*s));
    lcg_state = seed;
    s->congestion_free = congestion_free;
    s->hash = 1469598103934665603ull;
    for (uint32_t r = 0; r < S_NRES; r++)
        s->cap[r] = (1 + lcg_next() % 16) * GBPS + lcg_next() % 1000;
    assert_int_equal(flow_net_init(&s->n, S_NRES, s->cap, congestion_free), NPU_OK);
    for (uint32_t step = 0; step < S_STEPS; step++) {
        s_step(s);
        s_check(s);
        s->sum_active += flow_net_active_count(&s->n);
    }
    uint32_t guard = 0;
    while (s_complete_next(s)) { /* everything completes */
        s_check(s);
        assert_true(++guard <= S_SLOTS);
    }
    assert_int_equal(flow_net_active_count(&s->n), 0);
    for (uint32_t r = 0; r < S_NRES; r++) {
        assert_int_equal(flow_net_resource_bytes(&s->n, r), s->expect[r]);
        assert_true(flow_net_resource_busy_ps(&s->n, r, s->now) <= s->now);
        hash_u64(&s->hash, s->expect[r]);
    }
    hash_u64(&s->hash, s->now);
    flow_net_destroy(&s->n);
    return s->hash;
}

static void test_stress_random(void **state)
{
    (void)state;
    static struct scen s;
    for (uint32_t seed = 1; seed <= 3; seed++) {
        run_scenario(&s, seed, false);
        assert_true(s.completed > 500 && s.cancelled > 20);
        assert_true(s.sum_active > 20 * S_STEPS); /* over 20 flows at once on average */
        run_scenario(&s, seed, true);
        assert_true(s.completed > 500);
    }
}

static void test_determinism_random(void **state)
{
    (void)state;
    static struct scen s;
    uint64_t a = run_scenario(&s, 42, false);
    uint64_t end_a = s.now;
    uint64_t b = run_scenario(&s, 42, false);
    assert_int_equal(a, b);
    assert_int_equal(end_a, s.now);
    /* Golden values: integer-only arithmetic gives these on every host and compiler (checked
     * with gcc -O0/-O2/-O3 -march=native and clang -O2). Update them only when the scenario
     * above or the model's rounding changes on purpose. */
    assert_int_equal(a, 0x92a88e52cf923e8bull);
    assert_int_equal(end_a, 15297360729ull);
    assert_true(run_scenario(&s, 43, false) != a);
}

/* ---- deferred re-solves: once per instant, with the results of one after every call ---- */

/* Forces the pending re-solve (any query of an active flow does), as if the model were eager. */
static void settle(struct flow_net *n, uint32_t id)
{
    (void)flow_net_rate(n, id);
}

/*
 * Three flows and a two-link one start at 0 and one is cancelled at once: one re-solve, at the
 * first query. At 3000001 ps two flows complete: the second comes out without a re-solve (its
 * time is final), the last query re-solves once for both removals. `eager` settles after every
 * call instead; the rates and times are the same, by hand:
 * 1e9 / 3 = 333333333 B/s each on link 0; ceil(1000e12 / 333333333) = 3000001 ps; then the
 * two-link flow has 2e15 - 333333333 * 3000001 = 999999667666667 picobytes left, alone at
 * 1e9 B/s: 1000000 ps more.
 */
static void run_one_instant(bool eager)
{
    const uint64_t cap[2] = { GBPS, GBPS };
    const uint32_t p0[1] = { 0 }, p01[2] = { 0, 1 };
    struct flow_net n;
    uint64_t t;
    uint32_t id;
    assert_int_equal(flow_net_init(&n, 2, cap, false), NPU_OK);
    uint32_t ids[4];
    for (uint32_t i = 0; i < 4; i++) {
        ids[i] = add_ok(&n, 0, 1 + i, i < 3 ? p0 : p01, i < 3 ? 1 : 2, i < 3 ? 1000 : 2000);
        if (eager)
            settle(&n, ids[i]);
    }
    assert_int_equal(flow_net_remove(&n, 0, ids[1]), NPU_OK); /* cancelled: moved nothing */
    if (eager)
        settle(&n, ids[0]);
    assert_int_equal(n.solves, eager ? 5 : 0);
    assert_true(flow_net_next_completion(&n, &t, &id));
    assert_int_equal(n.solves, eager ? 5 : 1);
    assert_int_equal(n.solved_flows, eager ? 1 + 2 + 3 + 4 + 3 : 3);
    assert_int_equal(t, 3000001);
    assert_int_equal(id, ids[0]);
    for (uint32_t i = 0; i < 4; i++)
        if (i != 1)
            assert_int_equal(flow_net_rate(&n, ids[i]), 333333333);
    assert_int_equal(flow_net_remove(&n, 3000001, ids[0]), NPU_OK);
    if (eager)
        settle(&n, ids[3]);
    uint64_t solves = n.solves;
    assert_true(flow_net_next_completion(&n, &t, &id)); /* already final: no re-solve */
    assert_int_equal(n.solves, solves);
    assert_int_equal(t, 3000001);
    assert_int_equal(id, ids[2]);
    assert_int_equal(flow_net_remove(&n, 3000001, ids[2]), NPU_OK);
    assert_true(flow_net_next_completion(&n, &t, &id)); /* re-solves for both removals */
    assert_int_equal(n.solves, solves + 1);
    assert_int_equal(t, 4000001);
    assert_int_equal(id, ids[3]);
    assert_int_equal(flow_net_rate(&n, ids[3]), GBPS);
    assert_int_equal(flow_net_remaining(&n, 3000001, ids[3]), 1000);
    complete(&n, 4000001, ids[3]);
    assert_int_equal(flow_net_resource_bytes(&n, 0), 4000);
    assert_int_equal(flow_net_resource_bytes(&n, 1), 2000);
    flow_net_destroy(&n);
}

static void test_deferred_one_instant(void **state)
{
    (void)state;
    run_one_instant(false);
    run_one_instant(true);
}

/* The argument checks see the flows whose re-solve is pending, and fail without doing it. */
static void test_deferred_errors(void **state)
{
    (void)state;
    const uint64_t cap[2] = { 2, GBPS }; /* room for two flows on resource 0 */
    const uint32_t p0[1] = { 0 }, p1[1] = { 1 }, p11[2] = { 1, 1 };
    struct flow_net n;
    uint32_t id = UINT32_MAX;
    assert_int_equal(flow_net_init(&n, 2, cap, false), NPU_OK);
    uint32_t x = add_ok(&n, 100, 1, p0, 1, 1);
    uint32_t y = add_ok(&n, 100, 2, p0, 1, 1);
    assert_int_equal(flow_net_add(&n, 100, 3, p0, 1, 1, &id), NPU_ERR_RANGE); /* full */
    assert_int_equal(flow_net_add(&n, 99, 3, p0, 1, 1, &id), NPU_ERR_RANGE);  /* the past */
    assert_int_equal(flow_net_add(&n, 100, 1, p1, 1, 1, &id), NPU_ERR_INVAL); /* key of x */
    assert_int_equal(flow_net_add(&n, 100, 3, p11, 2, 1, &id), NPU_ERR_INVAL);
    assert_int_equal(flow_net_remove(&n, 99, x), NPU_ERR_RANGE);
    assert_int_equal(id, UINT32_MAX);
    assert_int_equal(n.solves, 0);
    assert_int_equal(flow_net_remove(&n, 100, y), NPU_OK);
    uint32_t z = add_ok(&n, 100, 3, p0, 1, 1); /* room again */
    assert_int_equal(z, y);                    /* the lowest free id */
    assert_int_equal(n.solves, 0);
    complete(&n, 100 + FLOW_NET_PS_PER_S, x); /* 1 B/s each; ties by key */
    assert_int_equal(n.solves, 1);
    complete(&n, 100 + FLOW_NET_PS_PER_S, z);
    assert_int_equal(flow_net_resource_bytes(&n, 0), 2);
    flow_net_destroy(&n);
}

/*
 * Randomized: bursts of adds, cancels and bad calls at one instant, completions handled as
 * the chip engines do (remove while the next completion is due, then ask again), on two
 * models: `lazy` is queried only where the engines query, `eager` after every call. At the
 * end of an instant (not every one: time may also advance with the re-solve still pending)
 * both must agree on every rate, end time, remaining amount and counter, and the rates must
 * be the max-min allocation computed from scratch by the definition in flow_net.h.
 */
#define D_NRES 7u
#define D_SLOTS 48u
#define D_MAXLEN 4u
#define D_INSTANTS 1500u

struct dflow {
    bool active;
    uint64_t key, bytes;
    uint32_t path[D_MAXLEN + 1]; /* + 1: a bad call may repeat a resource */
    uint32_t len;
};

struct dscen {
    struct flow_net lazy, eager;
    uint64_t cap[D_NRES];
    struct dflow fl[D_SLOTS];
    uint64_t now, last_ps, nkeys; /* last_ps: of the latest add or remove */
    uint32_t nactive, completed, cancelled, bad;
};

static bool d_crosses(const struct dflow *f, uint32_t r)
{
    for (uint32_t k = 0; k < f->len; k++)
        if (f->path[k] == r)
            return true;
    return false;
}

/* Max-min rates of the active sharing flows, solved from scratch (UINT64_MAX: not sharing). */
static void d_reference(const struct dscen *d, uint64_t *rate)
{
    uint64_t avail[D_NRES];
    uint32_t unfrozen[D_NRES] = { 0 };
    memcpy(avail, d->cap, sizeof(avail));
    for (uint32_t i = 0; i < D_SLOTS; i++) {
        const struct dflow *f = &d->fl[i];
        rate[i] = UINT64_MAX;
        for (uint32_t k = 0; f->active && f->bytes && k < f->len; k++)
            unfrozen[f->path[k]]++;
    }
    for (;;) {
        uint32_t b = D_NRES;
        for (uint32_t r = 0; r < D_NRES; r++)
            if (unfrozen[r] && (b == D_NRES || avail[r] / unfrozen[r] < avail[b] / unfrozen[b]))
                b = r; /* strict: ties go to the lowest index */
        if (b == D_NRES)
            return;
        uint64_t share = avail[b] / unfrozen[b];
        for (uint32_t i = 0; i < D_SLOTS; i++) {
            const struct dflow *f = &d->fl[i];
            if (!f->active || !f->bytes || rate[i] != UINT64_MAX || !d_crosses(f, b))
                continue;
            rate[i] = share;
            for (uint32_t k = 0; k < f->len; k++) {
                avail[f->path[k]] -= share;
                unfrozen[f->path[k]]--;
            }
        }
    }
}

/* The eager model re-solves after every call: any query of an active flow does it. */
static void d_settle(struct dscen *d)
{
    for (uint32_t i = 0; i < D_SLOTS; i++)
        if (d->fl[i].active) {
            settle(&d->eager, i);
            return;
        }
}

static void d_compare(struct dscen *d)
{
    uint64_t ref[D_SLOTS], t1 = 0, t2 = 0;
    uint32_t id1 = 0, id2 = 0;
    assert_int_equal(flow_net_next_completion(&d->lazy, &t1, &id1),
                     flow_net_next_completion(&d->eager, &t2, &id2));
    assert_int_equal(t1, t2);
    assert_int_equal(id1, id2);
    d_reference(d, ref);
    for (uint32_t i = 0; i < D_SLOTS; i++) {
        if (!d->fl[i].active)
            continue;
        assert_int_equal(flow_net_rate(&d->lazy, i), ref[i]);
        assert_int_equal(flow_net_rate(&d->eager, i), ref[i]);
        assert_int_equal(flow_net_end_ps(&d->lazy, i), flow_net_end_ps(&d->eager, i));
        assert_int_equal(flow_net_remaining(&d->lazy, d->now, i),
                         flow_net_remaining(&d->eager, d->now, i));
    }
    for (uint32_t r = 0; r < D_NRES; r++) {
        assert_int_equal(flow_net_resource_flows(&d->lazy, r),
                         flow_net_resource_flows(&d->eager, r));
        assert_int_equal(flow_net_resource_bytes(&d->lazy, r),
                         flow_net_resource_bytes(&d->eager, r));
        assert_int_equal(flow_net_resource_busy_ps(&d->lazy, r, d->now),
                         flow_net_resource_busy_ps(&d->eager, r, d->now));
    }
    assert_int_equal(flow_net_active_count(&d->lazy), d->nactive);
}

static void d_remove(struct dscen *d, uint32_t id)
{
    assert_int_equal(flow_net_remove(&d->lazy, d->now, id), NPU_OK);
    assert_int_equal(flow_net_remove(&d->eager, d->now, id), NPU_OK);
    d->last_ps = d->now;
    d->fl[id].active = false;
    d->nactive--;
    d_settle(d);
}

/* As the engines do: remove while the earliest completion is due, then ask again. */
static void d_complete_due(struct dscen *d)
{
    uint64_t t1, t2;
    uint32_t id1, id2;
    for (;;) {
        bool any = flow_net_next_completion(&d->lazy, &t1, &id1);
        assert_int_equal(any, flow_net_next_completion(&d->eager, &t2, &id2));
        if (!any)
            return;
        assert_int_equal(t1, t2);
        assert_int_equal(id1, id2);
        if (t1 > d->now)
            return;
        d_remove(d, id1);
        d->completed++;
    }
}

static struct dflow d_random_flow(struct dscen *d)
{
    static const uint64_t sizes[4] = { 1000, 4096, 65536, 0 };
    struct dflow f = { .active = true };
    uint32_t len = lcg_next() % (D_MAXLEN + 1);
    while (f.len < len) { /* distinct resources */
        uint32_t r = lcg_next() % D_NRES;
        if (!d_crosses(&f, r))
            f.path[f.len++] = r;
    }
    f.bytes = lcg_next() % 8 == 0 ? 0 : sizes[lcg_next() % 4]; /* equal sizes: equal ends */
    if (f.bytes == 0 && lcg_next() % 2)
        f.bytes = 1 + lcg_next() % 300000;
    f.key = (++d->nkeys) * 0x9e3779b97f4a7c15ull; /* unique, not monotonic */
    return f;
}

static void d_add(struct dscen *d)
{
    struct dflow f = d_random_flow(d);
    uint32_t id1 = UINT32_MAX, id2 = UINT32_MAX;
    assert_int_equal(flow_net_add(&d->lazy, d->now, f.key, f.path, f.len, f.bytes, &id1),
                     NPU_OK);
    assert_int_equal(flow_net_add(&d->eager, d->now, f.key, f.path, f.len, f.bytes, &id2),
                     NPU_OK);
    assert_int_equal(id1, id2);
    assert_true(id1 < D_SLOTS && !d->fl[id1].active);
    d->fl[id1] = f;
    d->last_ps = d->now;
    d->nactive++;
    d_settle(d);
}

/* A call that fails (the past, a key in use, a repeated resource): same error, no change. */
static void d_bad_call(struct dscen *d)
{
    struct dflow f = d_random_flow(d);
    uint32_t id = UINT32_MAX, pick = lcg_next() % 3;
    int want = NPU_ERR_INVAL;
    uint64_t t = d->now;
    if (pick == 0 && d->last_ps > 0) {
        t = d->last_ps - 1; /* before the latest call */
        want = NPU_ERR_RANGE;
    } else if (pick == 1 && d->nactive > 0) {
        for (uint32_t i = 0; i < D_SLOTS; i++)
            if (d->fl[i].active)
                f.key = d->fl[i].key;
    } else {
        if (f.len == 0)
            f.path[f.len++] = 0;
        f.path[f.len++] = f.path[0];
    }
    assert_int_equal(flow_net_add(&d->lazy, t, f.key, f.path, f.len, f.bytes, &id), want);
    assert_int_equal(flow_net_add(&d->eager, t, f.key, f.path, f.len, f.bytes, &id), want);
    assert_int_equal(id, UINT32_MAX);
    d->bad++;
}

/* One chip-time instant: due completions, a burst of calls, maybe a comparison, a step. */
static void d_instant(struct dscen *d)
{
    uint64_t next;
    /* The lazy model is asked only when something is due, so that time often advances past
     * a pending re-solve (then the next add or remove does it). */
    if (flow_net_next_completion(&d->eager, &next, NULL) && next <= d->now)
        d_complete_due(d);
    for (uint32_t op = 0, nops = 1 + lcg_next() % 10; op < nops; op++) {
        uint32_t pick = lcg_next() % 20;
        if (pick < 14 && d->nactive < D_SLOTS - 1) {
            d_add(d);
        } else if (pick < 18 && d->nactive > 0) {
            uint32_t id;
            do
                id = lcg_next() % D_SLOTS;
            while (!d->fl[id].active);
            d_remove(d, id);
            d->cancelled++;
        } else {
            d_bad_call(d);
        }
    }
    if (lcg_next() % 3 != 0)
        d_compare(d);
    uint64_t t = d->now + (lcg_next() % 4 == 0 ? 0 : 1 + lcg_next() % 3000000);
    if (flow_net_next_completion(&d->eager, &next, NULL) && next < t)
        t = next; /* never step past a completion */
    d->now = t > d->now ? t : d->now;
}

static void run_deferred(struct dscen *d, uint32_t seed)
{
    memset(d, 0, sizeof(*d));
    lcg_state = seed;
    for (uint32_t r = 0; r < D_NRES; r++) /* few distinct capacities: ties between shares */
        d->cap[r] = (1 + lcg_next() % 3) * GBPS + (r % 2 ? 0 : lcg_next() % 5);
    assert_int_equal(flow_net_init(&d->lazy, D_NRES, d->cap, false), NPU_OK);
    assert_int_equal(flow_net_init(&d->eager, D_NRES, d->cap, false), NPU_OK);
    for (uint32_t i = 0; i < D_INSTANTS; i++)
        d_instant(d);
    uint64_t next;
    while (flow_net_next_completion(&d->eager, &next, NULL)) { /* everything completes */
        d->now = next > d->now ? next : d->now;
        d_complete_due(d);
    }
    d_compare(d);
    assert_int_equal(d->nactive, 0);
    assert_true(d->completed > 1000 && d->cancelled > 300 && d->bad > 200);
    /* one re-solve per instant at most, plus the drain, against one per call */
    assert_true(d->lazy.solves <= 2 * D_INSTANTS + d->completed / 2);
    assert_true(3 * d->lazy.solves < d->eager.solves);
    flow_net_destroy(&d->lazy);
    flow_net_destroy(&d->eager);
}

static void test_deferred_matches_eager(void **state)
{
    (void)state;
    static struct dscen d;
    for (uint32_t seed = 1; seed <= 4; seed++)
        run_deferred(&d, seed);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_flow),
        cmocka_unit_test(test_two_flows_one_link),
        cmocka_unit_test(test_two_flows_separate_links),
        cmocka_unit_test(test_max_min_classic),
        cmocka_unit_test(test_end_frees_bandwidth),
        cmocka_unit_test(test_staggered_starts),
        cmocka_unit_test(test_floor_rounding),
        cmocka_unit_test(test_congestion_free),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_instant_flows),
        cmocka_unit_test(test_extremes),
        cmocka_unit_test(test_invalid_init),
        cmocka_unit_test(test_invalid_add_remove),
        cmocka_unit_test(test_set_capacity),
        cmocka_unit_test(test_id_reuse),
        cmocka_unit_test(test_determinism_add_order),
        cmocka_unit_test(test_determinism_unrelated_resolves),
        cmocka_unit_test(test_locality_separate_resources),
        cmocka_unit_test(test_locality_other_component),
        cmocka_unit_test(test_completion_order_ties),
        cmocka_unit_test(test_remaining_before_resolve),
        cmocka_unit_test(test_stress_random),
        cmocka_unit_test(test_determinism_random),
        cmocka_unit_test(test_deferred_one_instant),
        cmocka_unit_test(test_deferred_errors),
        cmocka_unit_test(test_deferred_matches_eager),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
