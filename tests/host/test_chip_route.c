/* SPDX-License-Identifier: MIT */
/*
 * The ROUTE command (emulator/model/chip_route.c): its draws equal routing_draw's for
 * uniform and skewed models, across layers in any order (the cached table rotated or
 * rebuilt) and across a change of model; refusals, with nothing written, of arguments or
 * output outside the issuing core's SRAM (another core's, HBM, past the end), of bad model
 * parameters and row counts (up to NPU_ROUTE_PAIRS_MAX draws accepted). The chip of
 * chip_fixture.h.
 */
#include <string.h>

#include "chip_fixture.h"
#include "chip_route.h"

#define ARGS_OFF 0x1000u
#define OUT_OFF 0x2000u

static struct chip_route route;
static char err[160];

static int setup(void **state)
{
    memset(&route, 0, sizeof(route));
    *state = fix_new(false, 0);
    return 0;
}

static int teardown(void **state)
{
    fix_free(*state);
    return 0;
}

static uint64_t sram_addr(uint32_t core, uint64_t off)
{
    return npu_map_instance_base(NPU_MAP_SRAM, core) + off;
}

/* Writes a into core's SRAM at ARGS_OFF and runs ROUTE there as core `as`. */
static int route_cmd(struct fix *f, uint32_t core, uint32_t as, const struct npu_route_args *a)
{
    memcpy(f->sram[core] + ARGS_OFF, a, sizeof(*a));
    err[0] = '\0';
    return chip_route_draw(&route, &f->e.mem, as, sram_addr(core, ARGS_OFF), err, sizeof(err));
}

static struct npu_route_args args(uint32_t core, uint32_t skew, uint32_t layer, uint32_t rows)
{
    return (struct npu_route_args){ .out = sram_addr(core, OUT_OFF), .seed = 7, .experts = 128,
                                    .k = 8, .skew_milli = skew, .layer = layer, .req = 3,
                                    .pos = 100, .rows = rows };
}

/* The command's rows equal routing_draw's. */
static void expect_draws(struct fix *f, uint32_t core, const struct npu_route_args *a)
{
    const struct routing_model rm = { .experts = a->experts, .k = a->k,
                                      .skew_milli = a->skew_milli, .seed = a->seed };
    uint64_t cum[ROUTING_EXPERTS_MAX];
    uint32_t want[ROUTING_EXPERTS_MAX], got[ROUTING_EXPERTS_MAX];
    routing_layer_table(&rm, a->layer, cum);
    for (uint32_t i = 0; i < a->rows; i++) {
        routing_draw(&rm, cum, a->layer, a->req, a->pos + i, want);
        memcpy(got, f->sram[core] + OUT_OFF + (uint64_t)i * a->k * 4, a->k * 4);
        assert_memory_equal(got, want, a->k * 4);
    }
}

static void test_draws_equal_routing_model(void **state)
{
    struct fix *f = *state;
    static const uint32_t layers[] = { 0, 1, 2, 47, 5, 5, 0 }; /* rotate forward, back, rebuild */
    for (uint32_t skew = 0; skew <= 1000; skew += 1000)
        for (size_t i = 0; i < sizeof(layers) / sizeof(layers[0]); i++) {
            struct npu_route_args a = args(2, skew, layers[i], 37);
            assert_int_equal(route_cmd(f, 2, 2, &a), NPU_OK);
            expect_draws(f, 2, &a);
        }
    struct npu_route_args a = args(2, 1000, 5, 3); /* another model, same layer */
    a.experts = 64, a.k = 4, a.seed = 11;
    assert_int_equal(route_cmd(f, 2, 2, &a), NPU_OK);
    expect_draws(f, 2, &a);
}

/* A refused command writes nothing. */
static void expect_refused(struct fix *f, uint32_t core, uint32_t as,
                           const struct npu_route_args *a, int rc)
{
    memset(f->sram[core] + OUT_OFF, 0xab, 64);
    assert_int_equal(route_cmd(f, core, as, a), rc);
    assert_true(err[0] != '\0');
    for (uint32_t i = 0; i < 64; i++)
        assert_int_equal(f->sram[core][OUT_OFF + i], 0xab);
}

static void test_refuses_addresses(void **state)
{
    struct fix *f = *state;
    struct npu_route_args a = args(1, 0, 0, 4);
    expect_refused(f, 1, 2, &a, NPU_ERR_RANGE);   /* arguments in another core's SRAM */
    a.out = sram_addr(2, OUT_OFF);
    expect_refused(f, 1, 1, &a, NPU_ERR_RANGE);   /* output in another core's SRAM */
    a.out = npu_memmap[NPU_MAP_HBM].base;
    expect_refused(f, 1, 1, &a, NPU_ERR_RANGE);   /* output in HBM */
    a.out = sram_addr(1, SRAM_BYTES - 4 * 8 * 4 + 4);
    expect_refused(f, 1, 1, &a, NPU_ERR_RANGE);   /* output past the SRAM's end */
    a.out = UINT64_MAX - 8;
    expect_refused(f, 1, 1, &a, NPU_ERR_RANGE);   /* wraps */
    a = args(1, 0, 0, 4);
    err[0] = '\0';
    assert_int_equal(chip_route_draw(&route, &f->e.mem, 1, sram_addr(1, SRAM_BYTES - 8), err,
                                     sizeof(err)), NPU_ERR_RANGE); /* args past the end */
}

static void test_refuses_parameters(void **state)
{
    struct fix *f = *state;
    struct npu_route_args a = args(1, 0, 0, 4);
    a.experts = 0;
    expect_refused(f, 1, 1, &a, NPU_ERR_INVAL);
    a.experts = ROUTING_EXPERTS_MAX + 1;
    expect_refused(f, 1, 1, &a, NPU_ERR_INVAL);
    a = args(1, 0, 0, 4), a.k = 0;
    expect_refused(f, 1, 1, &a, NPU_ERR_INVAL);
    a.k = a.experts + 1;
    expect_refused(f, 1, 1, &a, NPU_ERR_INVAL);
    a = args(1, 0, 0, 4), a.reserved = 1;
    expect_refused(f, 1, 1, &a, NPU_ERR_INVAL);
    a = args(1, 0, 0, 0);
    expect_refused(f, 1, 1, &a, NPU_ERR_INVAL);
    a = args(1, 0, 0, NPU_ROUTE_PAIRS_MAX / 8 + 1); /* k = 8 */
    expect_refused(f, 1, 1, &a, NPU_ERR_INVAL);
    a = args(1, 0, 0, NPU_ROUTE_PAIRS_MAX / 8); /* the most: accepted */
    assert_int_equal(route_cmd(f, 1, 1, &a), NPU_OK);
    expect_draws(f, 1, &a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_draws_equal_routing_model, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_addresses, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_parameters, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
