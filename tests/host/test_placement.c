/* SPDX-License-Identifier: MIT */
/*
 * Core placement maps (noc_driver/layout/src/placement.c): every placement is a bijection from
 * ranks onto the rectangle's cores; ring steps (the closing one included) are 1 hop on a
 * closed snake and at most 2 hops interleaved; mesh2d rows and columns are interleaved lines;
 * exact orders pinned for small cases; bad rectangles refused; pair groups of two
 * rectangles. Also the collectives' split of
 * a count into per-rank parts (noc/coll_sizes.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "noc/coll_sizes.h"
#include "noc/placement.h"
#include "npu_enums.h"

static struct noc_group g;

static void init(enum noc_placement p, uint16_t r0, uint16_t c0, uint16_t rows, uint16_t cols)
{
    struct noc_group_args a = { .placement = p, .rect = { r0, c0, rows, cols },
                                .mesh_rows = 8, .mesh_cols = 8 };
    assert_int_equal(noc_group_init(&g, &a), NPU_OK);
}

/* Each core of the rectangle exactly once; returns the longest ring step in hops. */
static uint32_t check_bijection_and_worst_step(void)
{
    uint8_t seen[64] = { 0 };
    uint32_t worst = 0;
    for (uint32_t k = 0; k < g.size; k++) {
        uint32_t core = g.core[k], row = core / 8, col = core % 8;
        assert_true(row >= g.rect.row0 && row < (uint32_t)g.rect.row0 + g.rect.rows);
        assert_true(col >= g.rect.col0 && col < (uint32_t)g.rect.col0 + g.rect.cols);
        assert_int_equal(seen[core]++, 0);
        assert_int_equal(noc_group_rank_of(&g, core), (int)k);
        uint32_t h = noc_group_hops(&g, k, (k + 1) % g.size);
        worst = h > worst ? h : worst;
    }
    return worst;
}

static void test_interleave_order(void **state)
{
    (void)state;
    static const uint32_t five[] = { 0, 2, 4, 3, 1 }, four[] = { 0, 2, 3, 1 };
    for (uint32_t i = 0; i < 5; i++)
        assert_int_equal(noc_interleave(i, 5), five[i]);
    for (uint32_t i = 0; i < 4; i++)
        assert_int_equal(noc_interleave(i, 4), four[i]);
    assert_int_equal(noc_interleave(0, 1), 0);
    assert_int_equal(noc_interleave(1, 2), 1);
}

static void test_exact_small_orders(void **state)
{
    (void)state;
    init(NOC_PLACE_LINEAR, 0, 0, 2, 2);
    static const uint16_t linear[] = { 0, 1, 8, 9 }, ring[] = { 0, 1, 9, 8 };
    assert_memory_equal(g.core, linear, sizeof(linear));
    init(NOC_PLACE_RING, 0, 0, 2, 2);
    assert_memory_equal(g.core, ring, sizeof(ring));
    /* Interleaved 1 x 5 at (3, 2): columns 2, 4, 6, 5, 3. */
    init(NOC_PLACE_INTERLEAVED, 3, 2, 1, 5);
    static const uint16_t line[] = { 26, 28, 30, 29, 27 };
    assert_memory_equal(g.core, line, sizeof(line));
    /* mesh2d 2 x 3 at (0,0): row-major grid, columns interleaved 0, 2, 1. */
    init(NOC_PLACE_MESH2D, 0, 0, 2, 3);
    static const uint16_t grid[] = { 0, 2, 1, 8, 10, 9 };
    assert_memory_equal(g.core, grid, sizeof(grid));
    assert_int_equal(g.grid_rows, 2);
    assert_int_equal(g.grid_cols, 3);
}

static void test_step_bounds(void **state)
{
    (void)state;
    for (uint16_t rows = 1; rows <= 8; rows++)
        for (uint16_t cols = 1; cols <= 8; cols++) {
            if (rows * cols < 2)
                continue;
            bool closes = rows >= 2 && cols >= 2 && (rows % 2 == 0 || cols % 2 == 0);
            init(NOC_PLACE_RING, 8 - rows, 8 - cols, rows, cols);
            assert_true(check_bijection_and_worst_step() <= (closes ? 1u : 2u));
            init(NOC_PLACE_INTERLEAVED, 0, 0, rows, cols);
            assert_true(check_bijection_and_worst_step() <= 2u);
            init(NOC_PLACE_LINEAR, 0, 0, rows, cols);
            check_bijection_and_worst_step();
            init(NOC_PLACE_MESH2D, 0, 0, rows, cols);
            check_bijection_and_worst_step();
            for (uint32_t i = 0; i < rows; i++) /* row rings: <= 2 hops a step */
                for (uint32_t j = 0; j < cols; j++) {
                    assert_true(noc_group_hops(&g, i * cols + j, i * cols + (j + 1) % cols) <= 2);
                    assert_true(noc_group_hops(&g, i * cols + j,
                                               ((i + 1) % rows) * cols + j) <= 2);
                }
        }
    /* The linear order of an 8 x 8 group steps 8 hops at row ends, 14 to close. */
    init(NOC_PLACE_LINEAR, 0, 0, 8, 8);
    assert_int_equal(check_bijection_and_worst_step(), 14);
}

static void test_bad_groups(void **state)
{
    (void)state;
    struct noc_group_args a = { .placement = NOC_PLACE_RING, .rect = { 6, 6, 3, 2 },
                                .mesh_rows = 8, .mesh_cols = 8 };
    assert_int_equal(noc_group_init(&g, &a), NPU_ERR_RANGE); /* past the mesh */
    a.rect = (struct noc_rect){ 0, 0, 0, 2 };
    assert_int_equal(noc_group_init(&g, &a), NPU_ERR_RANGE); /* empty */
    a.rect = (struct noc_rect){ 0, 0, 2, 2 };
    a.placement = (enum noc_placement)7;
    assert_int_equal(noc_group_init(&g, &a), NPU_ERR_INVAL);
    init(NOC_PLACE_RING, 0, 0, 2, 2);
    assert_int_equal(noc_group_rank_of(&g, 2), NPU_ERR_RANGE);
    assert_int_equal(noc_placement_parse("mesh2d"), NOC_PLACE_MESH2D);
    assert_int_equal(noc_placement_parse("torus"), NPU_ERR_INVAL);
    assert_string_equal(noc_placement_name(NOC_PLACE_INTERLEAVED), "interleaved");
}

/* A pair group: a's ranks then b's, in their own orders, over both rectangles (the result
   may be written over a or b); overlapping rectangles and a pair of pairs refused. */
static void test_pair_groups(void **state)
{
    (void)state;
    struct noc_group a, b, p;
    init(NOC_PLACE_RING, 0, 0, 2, 4);
    a = g;
    init(NOC_PLACE_INTERLEAVED, 2, 0, 1, 4);
    b = g;
    assert_int_equal(noc_group_pair(&p, &a, &b), NPU_OK);
    assert_true(noc_group_is_pair(&p) && !noc_group_is_pair(&a));
    assert_int_equal(p.size, 12);
    for (uint32_t k = 0; k < 12; k++)
        assert_int_equal(p.core[k], k < 8 ? a.core[k] : b.core[k - 8]);
    assert_int_equal(noc_group_rank_of(&p, b.core[3]), 11);
    struct noc_group over_b = b; /* the pair written over its second half */
    assert_int_equal(noc_group_pair(&over_b, &a, &over_b), NPU_OK);
    assert_int_equal(over_b.size, 12);
    assert_memory_equal(over_b.core, p.core, 12 * sizeof(p.core[0]));
    init(NOC_PLACE_RING, 1, 2, 2, 2); /* overlaps a */
    assert_int_equal(noc_group_pair(&p, &a, &g), NPU_ERR_INVAL);
    assert_int_equal(noc_group_pair(&p, &a, &b), NPU_OK);
    assert_int_equal(noc_group_pair(&g, &p, &b), NPU_ERR_INVAL); /* a pair of a pair */
}

/* coll_nonempty_parts counts the parts coll_bound leaves non-empty, against a count of them
   one by one (the multicast all-gather expects one landing per non-empty part). */
static void test_nonempty_parts(void **state)
{
    (void)state;
    for (uint32_t parts = 1; parts <= 70; parts++)
        for (uint64_t count = 0; count <= 300; count++) {
            uint32_t want = 0;
            for (uint32_t k = 0; k < parts; k++)
                want += coll_bound(count, parts, k + 1) > coll_bound(count, parts, k);
            assert_int_equal(coll_nonempty_parts(count, parts), want);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_interleave_order),
        cmocka_unit_test(test_exact_small_orders),
        cmocka_unit_test(test_step_bounds),
        cmocka_unit_test(test_bad_groups),
        cmocka_unit_test(test_pair_groups),
        cmocka_unit_test(test_nonempty_parts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
