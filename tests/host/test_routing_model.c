/* SPDX-License-Identifier: MIT */
/*
 * The routing model of performance mode (models/routing/src/routing_model.c, docs/images.md
 * "Routing without activations"): a row's draw is k distinct experts in range, a function of
 * (seed, layer, request, position) only; uniform routing spreads rows evenly; Zipf-skewed
 * routing makes one expert per layer hot, a different one in different layers, with the
 * popularity weights 1 / i^alpha; the cumulative table is strictly increasing.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "routing_model.h"

static uint64_t cum[ROUTING_EXPERTS_MAX];

/* Increment of expert e in the table. */
static uint64_t weight(const uint64_t *c, uint32_t e)
{
    return e ? c[e] - c[e - 1] : c[0];
}

static void check_draw(const struct routing_model *rm, const uint32_t *ex)
{
    for (uint32_t j = 0; j < rm->k; j++) {
        if (ex[j] >= rm->experts)
            fail_msg("expert %u of %u", ex[j], rm->experts);
        for (uint32_t i = 0; i < j; i++)
            if (ex[i] == ex[j])
                fail_msg("expert %u drawn twice (choices %u and %u of %u)", ex[j], i, j, rm->k);
    }
}

static void test_draws_distinct_in_range(void **state)
{
    (void)state;
    const struct routing_model models[] = {
        { .experts = 8, .k = 2, .skew_milli = 0, .seed = 1 },
        { .experts = 8, .k = 2, .skew_milli = 1500, .seed = 7 },
        { .experts = 8, .k = 8, .skew_milli = 1500, .seed = 3 },  /* every expert */
        { .experts = 128, .k = 8, .skew_milli = 1200, .seed = 42 },
        { .experts = 256, .k = 16, .skew_milli = 3000, .seed = 5 }, /* very skewed */
        { .experts = 3, .k = 3, .skew_milli = 0, .seed = 9 },
        { .experts = 1, .k = 1, .skew_milli = 0, .seed = 9 },
    };
    uint32_t ex[ROUTING_EXPERTS_MAX];
    for (size_t m = 0; m < sizeof(models) / sizeof(models[0]); m++) {
        const struct routing_model *rm = &models[m];
        for (uint32_t layer = 0; layer < 4; layer++) {
            routing_layer_table(rm, layer, cum);
            for (uint32_t req = 0; req < 3; req++)
                for (uint32_t pos = 0; pos < 500; pos++) {
                    memset(ex, 0xff, sizeof(ex));
                    routing_draw(rm, cum, layer, req, pos, ex);
                    check_draw(rm, ex);
                    assert_int_equal(ex[rm->k], UINT32_MAX); /* writes k choices only */
                }
        }
    }
}

/* The draw as first written: a walk over the experts not yet taken. routing_draw must
   give the same experts with its faster search (the chips' runs and the host reference
   depend on these bits). */
static void draw_by_walk(const struct routing_model *rm, const uint64_t *c, uint32_t layer,
                         uint32_t req, uint32_t pos, uint32_t *experts)
{
    uint64_t s = ((rm->seed * 0x9e3779b97f4a7c15ull + layer) * 0x100000001b3ull + req) *
                     0x100000001b3ull + pos;
    uint8_t taken[ROUTING_EXPERTS_MAX] = { 0 };
    for (uint32_t j = 0; j < rm->k; j++) {
        uint64_t left = 0;
        for (uint32_t e = 0; e < rm->experts; e++)
            left += taken[e] ? 0 : weight(c, e);
        uint64_t z = (s += 0x9e3779b97f4a7c15ull); /* splitmix64 */
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        uint64_t u = (z ^ (z >> 31)) % left;
        uint32_t e = 0;
        for (;; e++) {
            uint64_t w = taken[e] ? 0 : weight(c, e);
            if (u < w)
                break;
            u -= w;
        }
        taken[e] = 1;
        experts[j] = e;
    }
}

static void test_draws_match_walk(void **state)
{
    (void)state;
    const struct routing_model models[] = {
        { .experts = 128, .k = 8, .skew_milli = 1000, .seed = 1 },
        { .experts = 128, .k = 8, .skew_milli = 0, .seed = 2 },
        { .experts = 256, .k = 16, .skew_milli = 3000, .seed = 5 },
        { .experts = 8, .k = 8, .skew_milli = 1500, .seed = 3 },
        { .experts = 1, .k = 1, .skew_milli = 0, .seed = 9 },
    };
    uint32_t a[ROUTING_EXPERTS_MAX], b[ROUTING_EXPERTS_MAX];
    for (size_t m = 0; m < sizeof(models) / sizeof(models[0]); m++) {
        const struct routing_model *rm = &models[m];
        for (uint32_t layer = 0; layer < 3; layer++) {
            routing_layer_table(rm, layer, cum);
            for (uint32_t req = 0; req < 4; req++)
                for (uint32_t pos = 0; pos < 2000; pos++) {
                    routing_draw(rm, cum, layer, req, pos, a);
                    draw_by_walk(rm, cum, layer, req, pos, b);
                    if (memcmp(a, b, rm->k * sizeof(a[0])))
                        fail_msg("model %zu layer %u req %u pos %u: draw differs from the walk",
                                 m, layer, req, pos);
                }
        }
    }
}

/* Tables of small weights, where draws land on the boundaries between experts. */
static void test_draws_match_walk_small_weights(void **state)
{
    (void)state;
    const struct routing_model rm = { .experts = 8, .k = 8, .skew_milli = 0, .seed = 4 };
    uint64_t c[8];
    uint32_t a[8], b[8];
    for (uint32_t table = 0; table < 3; table++) {
        uint64_t total = 0;
        for (uint32_t e = 0; e < rm.experts; e++)
            c[e] = total += 1 + (e * (table + 1)) % 3; /* weights 1..3 */
        for (uint32_t pos = 0; pos < 5000; pos++) {
            routing_draw(&rm, c, 0, table, pos, a);
            draw_by_walk(&rm, c, 0, table, pos, b);
            if (memcmp(a, b, sizeof(a)))
                fail_msg("table %u pos %u: draw differs from the walk", table, pos);
        }
    }
}

/* A table rotated from another layer's is routing_layer_table's, bit for bit, for every
   layer pair tried, skewed and uniform, and chained (as the chip does layer after layer). */
static void test_table_rotate(void **state)
{
    (void)state;
    static const uint32_t experts[] = { 1, 7, 128, 256 };
    static const uint32_t skews[] = { 0, 1000, 1500 };
    uint64_t want[ROUTING_EXPERTS_MAX], got[ROUTING_EXPERTS_MAX];
    for (size_t i = 0; i < sizeof(experts) / sizeof(experts[0]); i++)
        for (size_t j = 0; j < sizeof(skews) / sizeof(skews[0]); j++) {
            const struct routing_model rm = { .experts = experts[i], .k = 1,
                                              .skew_milli = skews[j], .seed = 5 + i };
            routing_layer_table(&rm, 3, got);
            uint32_t from = 3;
            for (uint32_t layer = 0; layer < 48; layer += 5) {
                routing_layer_table_rotate(&rm, from, layer, got);
                routing_layer_table(&rm, layer, want);
                assert_memory_equal(want, got, sizeof(want[0]) * rm.experts);
                from = layer;
            }
        }
}

static void test_draws_deterministic(void **state)
{
    (void)state;
    const struct routing_model rm = { .experts = 8, .k = 2, .skew_milli = 1500, .seed = 11 };
    uint64_t cum2[ROUTING_EXPERTS_MAX];
    uint32_t a[2], b[2];
    uint32_t differ_pos = 0, differ_req = 0, differ_layer = 0, differ_seed = 0;
    const struct routing_model other = { .experts = 8, .k = 2, .skew_milli = 1500, .seed = 12 };
    uint64_t cum_other[ROUTING_EXPERTS_MAX];
    routing_layer_table(&rm, 1, cum);
    routing_layer_table(&rm, 1, cum2); /* the table is a function of (model, layer) */
    assert_memory_equal(cum, cum2, sizeof(cum[0]) * rm.experts);
    routing_layer_table(&other, 1, cum_other);
    for (uint32_t pos = 0; pos < 200; pos++) {
        /* The same (seed, layer, req, pos) gives the same draw, whatever came between. */
        routing_draw(&rm, cum, 1, 3, pos, a);
        routing_draw(&rm, cum, 1, 4, pos + 17, b);
        routing_draw(&rm, cum2, 1, 3, pos, b);
        assert_memory_equal(a, b, sizeof(a));
        /* Neighbouring positions, another request, another seed: different draws at
           least sometimes. */
        routing_draw(&rm, cum, 1, 3, pos + 1, b);
        differ_pos += memcmp(a, b, sizeof(a)) != 0;
        routing_draw(&rm, cum, 1, 4, pos, b);
        differ_req += memcmp(a, b, sizeof(a)) != 0;
        routing_draw(&rm, cum, 2, 3, pos, b); /* the same table, another layer's stream */
        differ_layer += memcmp(a, b, sizeof(a)) != 0;
        routing_draw(&other, cum_other, 1, 3, pos, b);
        differ_seed += memcmp(a, b, sizeof(a)) != 0;
    }
    /* With 8 experts a repeat of an ordered pair is far from certain: expect most to differ. */
    assert_true(differ_pos > 100);
    assert_true(differ_req > 100);
    assert_true(differ_layer > 100);
    assert_true(differ_seed > 50);
}

/* Counts of each expert over `rows` rows of layer `layer` (request r, position p). */
static void count(const struct routing_model *rm, uint32_t layer, uint32_t rows,
                  uint32_t *counts)
{
    uint32_t ex[ROUTING_EXPERTS_MAX];
    memset(counts, 0, sizeof(*counts) * rm->experts);
    routing_layer_table(rm, layer, cum);
    for (uint32_t i = 0; i < rows; i++) {
        routing_draw(rm, cum, layer, i / 1000, i % 1000, ex);
        for (uint32_t j = 0; j < rm->k; j++)
            counts[ex[j]]++;
    }
}

static void test_uniform_balanced(void **state)
{
    (void)state;
    const struct routing_model rm = { .experts = 8, .k = 2, .skew_milli = 0, .seed = 1 };
    uint32_t counts[8];
    for (uint32_t layer = 0; layer < 4; layer++) {
        count(&rm, layer, 20000, counts);
        const double mean = 20000.0 * 2 / 8;
        uint32_t total = 0;
        for (uint32_t e = 0; e < 8; e++) {
            total += counts[e];
            if (fabs(counts[e] - mean) > 0.1 * mean)
                fail_msg("uniform layer %u: expert %u chosen %u times, the mean is %.0f",
                         layer, e, counts[e], mean);
        }
        assert_int_equal(total, 40000);
    }
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static void test_skewed_hot_experts(void **state)
{
    (void)state;
    const struct routing_model rm = { .experts = 8, .k = 2, .skew_milli = 1500, .seed = 1 };
    uint32_t counts[8], sorted[8], hot[8];
    for (uint32_t layer = 0; layer < 8; layer++) {
        count(&rm, layer, 20000, counts);
        memcpy(sorted, counts, sizeof(counts));
        qsort(sorted, 8, sizeof(sorted[0]), cmp_u32);
        const uint32_t top = sorted[7], median = sorted[4]; /* the upper median */
        if (top < 3 * median)
            fail_msg("skewed:1.5 layer %u: the top expert chosen %u times, the median %u",
                     layer, top, median);
        hot[layer] = 0;
        for (uint32_t e = 1; e < 8; e++)
            if (counts[e] > counts[hot[layer]])
                hot[layer] = e;
        /* The hot expert is the one the table gives the largest weight. */
        uint32_t heavy = 0;
        for (uint32_t e = 1; e < 8; e++)
            heavy = weight(cum, e) > weight(cum, heavy) ? e : heavy;
        assert_int_equal(hot[layer], heavy);
    }
    uint32_t distinct = 0;
    for (uint32_t a = 0; a < 8; a++) {
        bool fresh = true;
        for (uint32_t b = 0; b < a; b++)
            fresh = fresh && hot[a] != hot[b];
        distinct += fresh;
    }
    if (distinct < 2)
        fail_msg("skewed: expert %u is the hot one of all 8 layers (no rotation)", hot[0]);
}

static void test_cum_table(void **state)
{
    (void)state;
    const struct routing_model models[] = {
        { .experts = 8, .k = 2, .skew_milli = 0, .seed = 1 },
        { .experts = 8, .k = 2, .skew_milli = 1500, .seed = 1 },
        { .experts = 128, .k = 8, .skew_milli = 800, .seed = 99 },
        { .experts = 256, .k = 8, .skew_milli = 4000, .seed = 2 }, /* tail weights tiny */
    };
    for (size_t m = 0; m < sizeof(models) / sizeof(models[0]); m++) {
        const struct routing_model *rm = &models[m];
        const double alpha = rm->skew_milli / 1000.0;
        for (uint32_t layer = 0; layer < 6; layer++) {
            routing_layer_table(rm, layer, cum);
            assert_true(cum[0] > 0);
            for (uint32_t e = 1; e < rm->experts; e++)
                if (cum[e] <= cum[e - 1])
                    fail_msg("experts %u alpha %.3f layer %u: cum[%u] = %llu after %llu",
                             rm->experts, alpha, layer, e, (unsigned long long)cum[e],
                             (unsigned long long)cum[e - 1]);
            /* The weights, sorted by popularity, are 1 / i^alpha of the largest (uniform:
               all equal). */
            uint64_t w[ROUTING_EXPERTS_MAX];
            for (uint32_t e = 0; e < rm->experts; e++)
                w[e] = weight(cum, e);
            uint32_t hot = 0;
            for (uint32_t e = 1; e < rm->experts; e++)
                hot = w[e] > w[hot] ? e : hot;
            for (uint32_t i = 0; i < rm->experts; i++) {
                /* Popularity rank i is expert hot + i (the order rotates as a whole). */
                const double got = (double)w[(hot + i) % rm->experts];
                const double want = 1.0 + floor(pow(i + 1.0, -alpha) * 1099511627776.0);
                if (fabs(got - want) > 1e-9 * want + 2.0)
                    fail_msg("experts %u alpha %.3f layer %u: popularity rank %u weighs %.0f, "
                             "1 + 2^40 / %u^alpha is %.0f", rm->experts, alpha, layer, i, got,
                             i + 1, want);
            }
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_draws_distinct_in_range),
        cmocka_unit_test(test_draws_match_walk),
        cmocka_unit_test(test_draws_match_walk_small_weights),
        cmocka_unit_test(test_draws_deterministic),
        cmocka_unit_test(test_uniform_balanced),
        cmocka_unit_test(test_skewed_hot_experts),
        cmocka_unit_test(test_cum_table),
        cmocka_unit_test(test_table_rotate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
