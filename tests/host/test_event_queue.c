/* SPDX-License-Identifier: MIT */
/*
 * Host unit tests of the chip event queue (emulator/model/event_queue.[ch]).
 * Covers: pops ordered by time; ties broken by src then seq whatever the push order
 * (hand-made scrambled orders and many pushes in a fixed-seed LCG order, checked against a
 * sorted reference, also with pops interleaved); growth past the initial capacity; the
 * default capacity; pop and peek on an empty queue; evq_before as a strict order; dropping
 * events by a predicate mid-run.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "event_queue.h"
#include "npu_enums.h"

static uint32_t lcg_state;

static uint32_t lcg_next(void)
{
    lcg_state = lcg_state * 1664525u + 1013904223u;
    return lcg_state >> 8;
}

static struct evq_event ev(uint64_t time_ps, uint32_t src, uint64_t seq, uint64_t id)
{
    struct evq_event e = { .time_ps = time_ps, .src = src, .seq = seq, .arg0 = id };
    return e;
}

static int cmp_key(const void *pa, const void *pb)
{
    const struct evq_event *a = pa, *b = pb;
    if (a->time_ps != b->time_ps)
        return a->time_ps < b->time_ps ? -1 : 1;
    if (a->src != b->src)
        return a->src < b->src ? -1 : 1;
    return a->seq < b->seq ? -1 : (a->seq > b->seq);
}

static void assert_same_event(const struct evq_event *got, const struct evq_event *want)
{
    assert_int_equal(got->time_ps, want->time_ps);
    assert_int_equal(got->src, want->src);
    assert_int_equal(got->seq, want->seq);
    assert_int_equal(got->arg0, want->arg0);
}

/* Pushes evs[order[i]] for every i, then checks the pops against evs sorted by key. */
static void push_in_order_and_check(const struct evq_event *evs, const size_t *order, size_t n)
{
    struct evq q;
    assert_int_equal(evq_init(&q, 4), NPU_OK);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(evq_push(&q, &evs[order[i]]), NPU_OK);
    assert_int_equal(q.len, n);
    struct evq_event *sorted = malloc(n * sizeof(*sorted));
    assert_non_null(sorted);
    for (size_t i = 0; i < n; i++)
        sorted[i] = evs[i];
    qsort(sorted, n, sizeof(*sorted), cmp_key);
    for (size_t i = 0; i < n; i++) {
        struct evq_event out;
        const struct evq_event *head = evq_peek(&q);
        assert_non_null(head);
        assert_same_event(head, &sorted[i]);
        assert_true(evq_pop(&q, &out));
        assert_same_event(&out, &sorted[i]);
    }
    assert_true(evq_is_empty(&q));
    free(sorted);
    evq_destroy(&q);
}

static void test_orders_by_time(void **state)
{
    (void)state;
    const uint64_t times[] = { 50000, 10000, 40000, 0, 20000, 30000, 10001 };
    const uint64_t want[] = { 0, 10000, 10001, 20000, 30000, 40000, 50000 };
    struct evq q;
    assert_int_equal(evq_init(&q, 0), NPU_OK);
    for (size_t i = 0; i < 7; i++) {
        /* Source and sequence go against time, so only time can order these. */
        struct evq_event e = ev(times[i], 7 - (uint32_t)i, 100 - i, i);
        assert_int_equal(evq_push(&q, &e), NPU_OK);
    }
    for (size_t i = 0; i < 7; i++) {
        struct evq_event out;
        assert_true(evq_pop(&q, &out));
        assert_int_equal(out.time_ps, want[i]);
    }
    assert_true(evq_is_empty(&q));
    evq_destroy(&q);
}

static void test_tie_break_src_then_seq(void **state)
{
    (void)state;
    /* Same time everywhere except 0 and 8; src ties broken by seq. */
    const struct evq_event evs[] = {
        ev(500, 3, 0, 0), ev(500, 1, 2, 1), ev(500, 1, 0, 2), ev(500, 2, 1, 3),
        ev(500, 1, 1, 4), ev(400, 9, 9, 5), ev(500, 0, 7, 6), ev(500, 2, 0, 7),
        ev(600, 0, 0, 8), ev(500, 3, 5, 9),
    };
    const size_t n = sizeof(evs) / sizeof(evs[0]);
    const size_t orders[][10] = {
        { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 },
        { 9, 8, 7, 6, 5, 4, 3, 2, 1, 0 },
        { 4, 9, 1, 6, 2, 8, 0, 3, 7, 5 },
        { 2, 4, 1, 7, 3, 0, 9, 6, 5, 8 },
    };
    for (size_t k = 0; k < sizeof(orders) / sizeof(orders[0]); k++)
        push_in_order_and_check(evs, orders[k], n);
}

static void test_tie_break_explicit_sequence(void **state)
{
    (void)state;
    struct evq q;
    assert_int_equal(evq_init(&q, 0), NPU_OK);
    const struct evq_event evs[] = { ev(7, 2, 1, 0), ev(7, 1, 1, 1), ev(7, 2, 0, 2),
                                     ev(7, 1, 0, 3) };
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(evq_push(&q, &evs[i]), NPU_OK);
    /* (7,1,0) (7,1,1) (7,2,0) (7,2,1) */
    const uint64_t want_ids[] = { 3, 1, 2, 0 };
    for (size_t i = 0; i < 4; i++) {
        struct evq_event out;
        assert_true(evq_pop(&q, &out));
        assert_int_equal(out.arg0, want_ids[i]);
    }
    evq_destroy(&q);
}

/* n events with few distinct times and sources (many ties), seq unique per source. */
static struct evq_event *random_events(size_t n, uint32_t seed)
{
    struct evq_event *evs = malloc(n * sizeof(*evs));
    assert_non_null(evs);
    uint64_t next_seq[5] = { 0 };
    lcg_state = seed;
    for (size_t i = 0; i < n; i++) {
        uint32_t src = lcg_next() % 5;
        evs[i] = ev((lcg_next() % 16) * 1000, src, next_seq[src]++, i);
    }
    /* Fisher-Yates with the same LCG: push order unrelated to seq order. */
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = lcg_next() % (i + 1);
        struct evq_event t = evs[i];
        evs[i] = evs[j];
        evs[j] = t;
    }
    return evs;
}

static void test_many_random_pushes(void **state)
{
    (void)state;
    const size_t n = 2000;
    struct evq_event *evs = random_events(n, 12345u);
    size_t *order = malloc(n * sizeof(*order));
    assert_non_null(order);
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    push_in_order_and_check(evs, order, n);
    free(order);
    free(evs);
}

/* Pushes and pops interleaved; every pop must be the minimum of what is in the queue. */
static void test_interleaved_push_pop(void **state)
{
    (void)state;
    const size_t n = 1500;
    struct evq_event *evs = random_events(n, 777u);
    struct evq_event *ref = malloc(n * sizeof(*ref));
    assert_non_null(ref);
    size_t nref = 0, next = 0;
    struct evq q;
    assert_int_equal(evq_init(&q, 1), NPU_OK);
    lcg_state = 99u;
    while (next < n || nref > 0) {
        if (next < n && (nref == 0 || lcg_next() % 3 != 0)) {
            assert_int_equal(evq_push(&q, &evs[next]), NPU_OK);
            ref[nref++] = evs[next++];
            continue;
        }
        qsort(ref, nref, sizeof(*ref), cmp_key);
        struct evq_event out;
        assert_true(evq_pop(&q, &out));
        assert_same_event(&out, &ref[0]);
        for (size_t i = 1; i < nref; i++)
            ref[i - 1] = ref[i];
        nref--;
        assert_int_equal(q.len, nref);
    }
    assert_true(evq_is_empty(&q));
    free(ref);
    free(evs);
    evq_destroy(&q);
}

static bool drop_every_third(const void *ctx, const struct evq_event *e)
{
    (void)ctx;
    return e->arg0 % 3 == 0;
}

/* evq_drop_if in the middle of a run: the rest still pops in key order, pushes continue. */
static void test_drop_if(void **state)
{
    (void)state;
    const size_t n = 1200, half = n / 2;
    struct evq_event *evs = random_events(n, 4242u);
    struct evq_event *ref = malloc(n * sizeof(*ref));
    assert_non_null(ref);
    struct evq q;
    size_t nref = 0;
    assert_int_equal(evq_init(&q, 4), NPU_OK);
    for (size_t i = 0; i < n; i++) {
        if (i == half) {
            evq_drop_if(&q, drop_every_third, NULL);
            assert_int_equal(q.len, nref);
        }
        assert_int_equal(evq_push(&q, &evs[i]), NPU_OK);
        if (i >= half || !drop_every_third(NULL, &evs[i]))
            ref[nref++] = evs[i];
    }
    qsort(ref, nref, sizeof(*ref), cmp_key);
    for (size_t i = 0; i < nref; i++) {
        struct evq_event out;
        assert_true(evq_pop(&q, &out));
        assert_same_event(&out, &ref[i]);
    }
    assert_true(evq_is_empty(&q));
    evq_drop_if(&q, drop_every_third, NULL); /* empty: nothing to do */
    assert_true(evq_is_empty(&q));
    free(ref);
    free(evs);
    evq_destroy(&q);
}

static void test_growth_past_initial_capacity(void **state)
{
    (void)state;
    struct evq q;
    assert_int_equal(evq_init(&q, 2), NPU_OK);
    assert_int_equal(q.cap, 2);
    for (uint64_t i = 0; i < 100; i++) {
        struct evq_event e = ev((99 - i) * 10, 0, i, i);
        assert_int_equal(evq_push(&q, &e), NPU_OK);
        assert_int_equal(q.len, i + 1);
        assert_true(q.cap >= q.len);
    }
    for (uint64_t i = 0; i < 100; i++) {
        struct evq_event out;
        assert_true(evq_pop(&q, &out));
        assert_int_equal(out.time_ps, i * 10);
        assert_int_equal(out.arg0, 99 - i);
    }
    assert_true(evq_is_empty(&q));
    evq_destroy(&q);
    assert_null(q.heap);
    assert_int_equal(q.len, 0);
    assert_int_equal(q.cap, 0);
}

static void test_default_capacity(void **state)
{
    (void)state;
    struct evq q;
    assert_int_equal(evq_init(&q, 0), NPU_OK);
    assert_int_equal(q.cap, 16);
    assert_int_equal(q.len, 0);
    evq_destroy(&q);
}

static void test_empty_pop_and_peek(void **state)
{
    (void)state;
    struct evq q;
    struct evq_event out;
    assert_int_equal(evq_init(&q, 0), NPU_OK);
    assert_true(evq_is_empty(&q));
    assert_null(evq_peek(&q));
    assert_false(evq_pop(&q, &out));
    struct evq_event e = ev(5, 1, 2, 3);
    assert_int_equal(evq_push(&q, &e), NPU_OK);
    assert_false(evq_is_empty(&q));
    assert_non_null(evq_peek(&q));
    assert_int_equal(evq_peek(&q)->time_ps, 5);
    assert_int_equal(q.len, 1); /* peek does not remove */
    assert_true(evq_pop(&q, &out));
    assert_same_event(&out, &e);
    assert_true(evq_is_empty(&q));
    assert_null(evq_peek(&q));
    assert_false(evq_pop(&q, &out));
    assert_int_equal(q.len, 0);
    evq_destroy(&q);
}

static void test_before_is_strict(void **state)
{
    (void)state;
    struct evq_event a = ev(10, 2, 3, 0), b = a;
    assert_false(evq_before(&a, &b));
    b.arg0 = 42; /* payload takes no part in the key */
    b.kind = 9;
    assert_false(evq_before(&a, &b));
    assert_false(evq_before(&b, &a));
    b = ev(11, 0, 0, 0);
    assert_true(evq_before(&a, &b));
    assert_false(evq_before(&b, &a));
    b = ev(10, 3, 0, 0);
    assert_true(evq_before(&a, &b));
    b = ev(10, 2, 4, 0);
    assert_true(evq_before(&a, &b));
    assert_false(evq_before(&b, &a));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_orders_by_time),
        cmocka_unit_test(test_tie_break_src_then_seq),
        cmocka_unit_test(test_tie_break_explicit_sequence),
        cmocka_unit_test(test_many_random_pushes),
        cmocka_unit_test(test_interleaved_push_pop),
        cmocka_unit_test(test_growth_past_initial_capacity),
        cmocka_unit_test(test_default_capacity),
        cmocka_unit_test(test_empty_pop_and_peek),
        cmocka_unit_test(test_before_is_strict),
        cmocka_unit_test(test_drop_if),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
