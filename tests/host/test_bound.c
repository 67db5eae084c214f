/* SPDX-License-Identifier: MIT */
/*
 * The whole-chip lower bound of a model step (models/planner/src/npu_bound.c,
 * docs/benchmarks.md): FLOPs and bytes against hand counts on the tiny models, the chip's
 * peak and bandwidth, the experts a step touches against the routing model's own draws, and
 * the SRAM credit; the array floor against the share of a 16 x 16 array each GEMM's rows use.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "chip_config.h"
#include "model_config.h"
#include "npu_bound.h"
#include "npu_enums.h"
#include "routing_model.h"

static struct model_config dense, moe;
static struct chip_config chip;

static int setup(void **state)
{
    (void)state;
    char err[512];
    if (model_config_load(&dense, NPU_SOURCE_DIR "/models/tiny/tiny-dense.toml", err,
                          sizeof(err)) ||
        model_config_load(&moe, NPU_SOURCE_DIR "/models/tiny/tiny-moe.toml", err,
                          sizeof(err)) ||
        chip_config_load(&chip, NPU_SOURCE_DIR "/models/chips/mesh-2x2.toml", err,
                         sizeof(err)))
        fail_msg("%s", err);
    return 0;
}

/* tiny-dense (d 128, 4 layers, 4 heads of 32, 2 KV heads, FFN 256, vocab 512) on mesh-2x2
   (4 cores, 16 x 16 arrays at 500 MHz, 64 GB/s HBM each, 4 MiB SRAM each). */
static void test_dense_hand_count(void **state)
{
    (void)state;
    struct npu_bound b;
    const struct npu_bound_opts o = { .elem_bytes = 2 };
    const struct npu_bound_shape s = { .requests = 2, .rows = 3, .context = 5 };
    assert_int_equal(npu_bound_step(&dense, &chip, &s, &o, &b), NPU_OK);
    const double t = 6, qkv = 128.0 * 32 * (4 + 4), oproj = 32.0 * 4 * 128, ffn = 3.0 * 128 * 256;
    const double vis = 6 + 7 + 8; /* rows at positions 5, 6, 7 see 6, 7, 8 positions */
    double flops = 4 * (2 * t * (qkv + oproj) + 2 * 2 * 4 * 32 * vis * 2 + 2 * t * ffn) +
                   2.0 * 2 * 128 * 512;
    assert_float_equal(b.flops, flops, 0.5);
    assert_float_equal(b.peak_flops, 4 * 2 * 16 * 16 * 500e6, 1);
    assert_float_equal(b.matrix_s, flops / b.peak_flops, 1e-15);
    double weights = 4 * (qkv + oproj + 2 * 128 + ffn) * 2 + (512.0 * 128 + 128) * 2;
    assert_float_equal(b.weight_bytes, weights, 0.5);
    assert_float_equal(b.kv_bytes, 4 * 2 * 5 * 2 * 2 * 32 * 2.0, 0.5); /* 5 held positions */
    assert_float_equal(b.other_bytes, t * 128 * 2, 0.5);
    /* the tiny model fits the chip's 16 MiB of SRAM: nothing need cross HBM */
    assert_float_equal(b.sram_bytes, 4 * 4194304.0, 0.5);
    assert_float_equal(b.hbm_bytes, 0, 0);
    assert_float_equal(b.bound_s, b.matrix_s, 0);
}

/* The SRAM credit: with 64 KiB cores the bytes beyond the chip's SRAM cross HBM at 4 x 64
   GB/s; more context reads more K and V. */
static void test_hbm_beyond_sram(void **state)
{
    (void)state;
    struct chip_config small = chip;
    small.sram_bytes = 65536;
    struct npu_bound a, b;
    const struct npu_bound_opts o = { .elem_bytes = 2 };
    struct npu_bound_shape s = { .requests = 1, .rows = 1, .context = 100 };
    assert_int_equal(npu_bound_step(&dense, &small, &s, &o, &a), NPU_OK);
    double read = a.weight_bytes + a.kv_bytes + a.other_bytes;
    assert_float_equal(a.hbm_bytes, read - 4 * 65536.0, 0.5);
    assert_float_equal(a.hbm_bw, 4 * 64e9, 1);
    assert_float_equal(a.hbm_s, a.hbm_bytes / a.hbm_bw, 1e-15);
    s.context = 900;
    assert_int_equal(npu_bound_step(&dense, &small, &s, &o, &b), NPU_OK);
    assert_float_equal(b.kv_bytes - a.kv_bytes, 4 * 800 * 2 * 2 * 32 * 2.0, 0.5);
    assert_true(b.bound_s > a.bound_s);
}

/* tiny-moe: 8 experts, top-2, a 64-position window on even layers. The experts touched are
   the routing model's own draws; one row touches exactly k per layer, many rows all. */
static void test_moe_experts(void **state)
{
    (void)state;
    struct npu_bound b;
    const struct npu_bound_opts o = { .elem_bytes = 2, .skew_milli = 1000, .seed = 7 };
    struct npu_bound_shape s = { .requests = 1, .rows = 1, .context = 200 };
    assert_int_equal(npu_bound_step(&moe, &chip, &s, &o, &b), NPU_OK);
    assert_float_equal(b.experts_touched, 4 * 2, 0);
    /* sliding layers 0 and 2 read 63 held positions, full layers 1 and 3 all 200 */
    assert_float_equal(b.kv_bytes, (2 * 63 + 2 * 200) * 2 * 2 * 32 * 2.0, 0.5);
    s.rows = 512;
    assert_int_equal(npu_bound_step(&moe, &chip, &s, &o, &b), NPU_OK);
    assert_float_equal(b.experts_touched, 4 * 8, 0);
    /* a few rows: the count is the draws' union, layer by layer */
    s.rows = 3;
    assert_int_equal(npu_bound_step(&moe, &chip, &s, &o, &b), NPU_OK);
    const struct routing_model rm = { 8, 2, 1000, 7 };
    double want = 0;
    for (uint32_t l = 0; l < 4; l++) {
        uint64_t cum[ROUTING_EXPERTS_MAX];
        uint32_t e[2], hit = 0;
        routing_layer_table(&rm, l, cum);
        for (uint32_t i = 0; i < 3; i++) {
            routing_draw(&rm, cum, l, 0, 200 + i, e);
            hit |= 1u << e[0] | 1u << e[1];
        }
        want += __builtin_popcount(hit);
    }
    assert_float_equal(b.experts_touched, want, 0);
}

/* The array floor: with 2 rows a step every GEMM's weights meet 2 rows (attention: one row
   times 2 query heads per KV head; the LM head: the 2 token rows), so each uses 2 of the
   array's 16 rows: 8 times the FLOPs' time. With 16 rows and more, it is the bound's. */
static void test_array_floor_dense(void **state)
{
    (void)state;
    struct npu_bound b;
    const struct npu_bound_opts o = { .elem_bytes = 2 };
    struct npu_bound_shape s = { .requests = 2, .rows = 1, .context = 40 };
    assert_int_equal(npu_bound_step(&dense, &chip, &s, &o, &b), NPU_OK);
    assert_float_equal(b.array_flops, 8 * b.flops, 1e-6 * b.flops);
    assert_float_equal(b.array_s, b.array_flops / b.peak_flops, 1e-15);
    assert_float_equal(b.floor_s, b.array_s > b.hbm_s ? b.array_s : b.hbm_s, 0);
    assert_true(b.floor_s >= b.bound_s);
    s = (struct npu_bound_shape){ .requests = 16, .rows = 16, .context = 0 };
    assert_int_equal(npu_bound_step(&dense, &chip, &s, &o, &b), NPU_OK);
    assert_float_equal(b.array_flops, b.flops, 1e-9 * b.flops);
    assert_float_equal(b.floor_s, b.bound_s, 1e-15);
}

/* MoE: an expert's GEMMs use min(1, rows routed to it / 16) of the array, its rows the
   routing model's draws; the rest of the layer meets all 12 rows (attention: 6 x 2). */
static void test_array_floor_moe(void **state)
{
    (void)state;
    struct npu_bound b;
    const struct npu_bound_opts o = { .elem_bytes = 2, .skew_milli = 1000, .seed = 7 };
    const struct npu_bound_shape s = { .requests = 2, .rows = 6, .context = 0 };
    assert_int_equal(npu_bound_step(&moe, &chip, &s, &o, &b), NPU_OK);
    const struct routing_model rm = { 8, 2, 1000, 7 };
    const double expert = 3.0 * 128 * 128, u = 12.0 / 16;
    double experts = 0, experts_array = 0;
    for (uint32_t l = 0; l < 4; l++) {
        uint64_t cum[ROUTING_EXPERTS_MAX];
        uint32_t e[2], rows[8] = { 0 };
        routing_layer_table(&rm, l, cum);
        for (uint32_t r = 0; r < 2; r++)
            for (uint32_t i = 0; i < 6; i++) {
                routing_draw(&rm, cum, l, r, i, e);
                rows[e[0]]++, rows[e[1]]++;
            }
        for (uint32_t x = 0; x < 8; x++) {
            if (!rows[x])
                continue;
            experts += 2.0 * rows[x] * expert;
            experts_array += 2.0 * rows[x] * expert / (rows[x] >= 16 ? 1.0 : rows[x] / 16.0);
        }
    }
    /* the LM head's 2 token rows use 2 / 16 */
    const double head = 2.0 * 2 * 128 * 512;
    const double rest = b.flops - experts - head;
    assert_true(experts_array > experts);
    assert_float_equal(b.array_flops, rest / u + experts_array + head * 8, 1e-9 * b.array_flops);
}

static void test_refusals(void **state)
{
    (void)state;
    struct npu_bound b;
    struct npu_bound_opts o = { .elem_bytes = 2 };
    const struct npu_bound_shape none = { .requests = 0, .rows = 1 };
    assert_int_equal(npu_bound_step(&dense, &chip, &none, &o, &b), NPU_ERR_INVAL);
    const struct npu_bound_shape ok = { .requests = 1, .rows = 1 };
    o.elem_bytes = 3;
    assert_int_equal(npu_bound_step(&dense, &chip, &ok, &o, &b), NPU_ERR_INVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dense_hand_count),
        cmocka_unit_test(test_hbm_beyond_sram),
        cmocka_unit_test(test_moe_experts),
        cmocka_unit_test(test_array_floor_dense),
        cmocka_unit_test(test_array_floor_moe),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
