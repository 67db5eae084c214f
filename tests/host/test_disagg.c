/* SPDX-License-Identifier: MIT */
/*
 * Attention/expert disaggregation's plan (models/planner/src/npu_disagg.c, docs/images.md
 * "Attention/expert disaggregation (plan only)"): the expert band in the middle columns and
 * the replicas beside it, what each core holds against hand counts, the latency model's
 * equations (MegaScale-Infer section 4.1, constraint 3 and equation 5), and the refusals.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "chip_config.h"
#include "model_config.h"
#include "npu_disagg.h"
#include "npu_enums.h"

static struct model_config dense, moe, qwen;
static struct chip_config c4x4, large;

static int setup(void **state)
{
    (void)state;
    char err[512];
    if (model_config_load(&dense, NPU_SOURCE_DIR "/models/tiny/tiny-dense.toml", err,
                          sizeof(err)) ||
        model_config_load(&moe, NPU_SOURCE_DIR "/models/tiny/tiny-moe.toml", err,
                          sizeof(err)) ||
        model_config_load(&qwen, NPU_SOURCE_DIR "/models/configs/qwen3-30b-a3b.toml", err,
                          sizeof(err)) ||
        chip_config_load(&c4x4, NPU_SOURCE_DIR "/models/chips/mesh-4x4.toml", err,
                         sizeof(err)) ||
        chip_config_load(&large, NPU_SOURCE_DIR "/models/chips/large-64.toml", err,
                         sizeof(err)))
        fail_msg("%s", err);
    return 0;
}

static struct npu_disagg_request request(uint32_t replicas, uint32_t tp_a, uint32_t experts)
{
    return (struct npu_disagg_request){ .replicas = replicas, .tp_a = tp_a,
                                        .expert_cores = experts, .micro_batches = 3,
                                        .batch = 24 * replicas, .context = 256,
                                        .elem_bytes = 2 };
}

static bool overlaps(const struct noc_rect *a, const struct noc_rect *b)
{
    return a->row0 < b->row0 + b->rows && b->row0 < a->row0 + a->rows &&
           a->col0 < b->col0 + b->cols && b->col0 < a->col0 + a->cols;
}

/* large-64 (8 x 8), Qwen3-30B-A3B: experts on columns 2-5, four replicas of a column each,
   nearest the band first and alternating sides; no two rectangles share a core. */
static void test_placement(void **state)
{
    (void)state;
    static struct npu_disagg_plan p;
    char err[256];
    const struct npu_disagg_request r = request(4, 8, 32);
    assert_int_equal(npu_disagg_plan(&qwen, &large, &r, &p, err, sizeof(err)), NPU_OK);
    assert_int_equal(p.experts.col0, 2);
    assert_int_equal(p.experts.cols, 4);
    assert_int_equal(p.experts.rows, 8);
    assert_int_equal(p.experts_per_core, 4);
    assert_int_equal(p.units, 1);
    assert_int_equal(p.idle_cores, 0);
    const uint16_t cols[4] = { 1, 0, 6, 7 }; /* left nearest first, then right */
    for (uint32_t i = 0; i < 4; i++) {
        assert_int_equal(p.replica[i].col0, cols[i]);
        assert_int_equal(p.replica[i].rows, 8);
        assert_false(overlaps(&p.replica[i], &p.experts));
    }
    /* tp_a of 4: two replicas a column; 6 of them around a band of 4 columns */
    const struct npu_disagg_request r2 = request(6, 4, 32);
    assert_int_equal(npu_disagg_plan(&qwen, &large, &r2, &p, err, sizeof(err)), NPU_OK);
    for (uint32_t i = 0; i < 6; i++) {
        assert_int_equal(p.replica[i].rows, 4);
        assert_false(overlaps(&p.replica[i], &p.experts));
        for (uint32_t j = 0; j < i; j++)
            assert_false(overlaps(&p.replica[i], &p.replica[j]));
    }
    assert_int_equal(p.idle_cores, 64 - 24 - 32);
}

/* What a core holds, counted by hand: tiny-moe (d 128, 4 layers, 4 heads of 32, 2 KV heads,
   8 experts of 128 columns, vocab 512) on 4 x 4, one replica of 4, 8 expert cores. */
static void test_holdings(void **state)
{
    (void)state;
    static struct npu_disagg_plan p;
    char err[256];
    const struct npu_disagg_request r = request(2, 4, 8);
    assert_int_equal(npu_disagg_plan(&moe, &c4x4, &r, &p, err, sizeof(err)), NPU_OK);
    const double d = moe.hidden_size, hd = moe.head_dim, L = moe.num_layers;
    const double layer = d * hd * (moe.num_heads + 2.0 * moe.num_kv_heads) +
                         hd * moe.num_heads * d + 2 * d + d * moe.num_experts;
    const double attn = (L * layer + 2.0 * moe.vocab_size * d + d) * 2;
    assert_int_equal(p.attn_core_weight_bytes, (uint64_t)(attn / 4));
    double pos = 0; /* positions a request holds over the layers: the window where it slides */
    for (uint32_t l = 0; l < moe.num_layers; l++)
        pos += model_is_sliding_layer(&moe, l) && moe.sliding_window < 256 ? moe.sliding_window
                                                                           : 256;
    assert_true(pos < 256 * L); /* tiny-moe slides on some layers */
    const double kv = 24.0 * pos * 2 * moe.num_kv_heads * hd * 2; /* 24 requests a replica */
    assert_int_equal(p.attn_core_kv_bytes, (uint64_t)ceil(kv / 4));
    const double experts = L * moe.num_experts * 3 * d * moe.moe_intermediate_size * 2;
    assert_int_equal(p.expert_core_bytes, (uint64_t)(experts / 8));
    assert_int_equal(p.experts_per_core, moe.num_experts / 8);
    /* on 8 x 8, 16 expert cores for 8 experts: each expert in 2 units of 64 columns */
    const struct npu_disagg_request u = request(1, 4, 16);
    assert_int_equal(npu_disagg_plan(&moe, &large, &u, &p, err, sizeof(err)), NPU_OK);
    assert_int_equal(p.units, 2);
    assert_int_equal(p.experts_per_core, 0);
    assert_int_equal(p.expert_core_bytes, (uint64_t)(experts / 16));
}

/* Constraint 3 and equation 5 hold for what the model computed where m meets it, one
   micro-batch overlaps nothing, and more micro-batches mean fewer rows each. */
static void test_latency_model(void **state)
{
    (void)state;
    static struct npu_disagg_plan p;
    char err[256];
    struct npu_disagg_request r = request(4, 8, 32);
    r.batch = 256, r.context = 2048;
    double last_rows = 1e30;
    for (uint32_t m = 1; m <= 4; m++) {
        r.micro_batches = m;
        assert_int_equal(npu_disagg_plan(&qwen, &large, &r, &p, err, sizeof(err)), NPU_OK);
        const struct npu_disagg_times *t = &p.t;
        assert_true(t->t_a > 0 && t->t_e > 0 && t->t_c > 0);
        assert_true(t->t_f == fmax(t->t_a, t->t_e));
        assert_int_equal(t->m_min, (uint32_t)ceil(2 * (1 + t->t_c / t->t_f)));
        const double trip = t->t_a + t->t_e + 2 * t->t_c, L = qwen.num_layers;
        const double eq5 = trip + t->t_f * (m * L - 1.0) + m * t->t_head;
        const double bubbles = trip * L + t->t_head; /* m = 1: nothing overlaps */
        assert_int_equal(t->overlapped, m * t->t_f >= trip);
        if (m >= t->m_min || t->overlapped)
            assert_true(fabs(t->t_iter - eq5) <= 1e-9 * eq5);
        if (m == 1)
            assert_true(fabs(t->t_iter - bubbles) <= 1e-9 * bubbles);
        assert_true(t->t_iter >= eq5 * (1 - 1e-12)); /* never better than equation 5 */
        assert_true(fabs(t->tokens_per_s * t->t_iter - 256) < 1e-6);
        assert_true(t->rows_a < last_rows);
        last_rows = t->rows_a;
        assert_true(fabs(t->rows_e - 256.0 * qwen.experts_per_token / (m * 128.0)) < 1e-9);
    }
}

static void expect_refusal(const struct model_config *m, const struct chip_config *c,
                           const struct npu_disagg_request *r, const char *needle)
{
    static struct npu_disagg_plan p;
    char err[512] = "";
    int rc = npu_disagg_plan(m, c, r, &p, err, sizeof(err));
    if (rc == NPU_OK || !strstr(err, needle))
        fail_msg("rc %d, message '%s', wanted '%s'", rc, err, needle);
}

static void test_refusals(void **state)
{
    (void)state;
    struct npu_disagg_request r = request(2, 4, 8);
    expect_refusal(&dense, &c4x4, &r, "has no experts");
    r = request(3, 4, 8);
    expect_refusal(&moe, &c4x4, &r, "= 20, the chip has 16");
    r = request(2, 3, 8);
    expect_refusal(&moe, &c4x4, &r, "tp_a 3 neither divides");
    r = request(2, 4, 6);
    expect_refusal(&moe, &c4x4, &r, "not whole columns");
    r = request(1, 4, 12);
    expect_refusal(&moe, &c4x4, &r, "12 expert cores neither divide");
    r = request(2, 4, 8);
    r.batch = 5; /* 2 replicas x 3 micro-batches */
    expect_refusal(&moe, &c4x4, &r, "leaves a micro-batch empty");
    r = request(4, 8, 32);
    r.batch = 4096, r.context = 40960; /* 3.75 TiB of KV cache */
    expect_refusal(&qwen, &large, &r, "of HBM");
    r = request(3, 16, 16); /* 3 columns a side: one replica of 2 columns on each */
    expect_refusal(&qwen, &large, &r, "do not fit beside");
}

/* The search against brute force on tiny-moe over 4 x 4 (every tp_a, expert columns,
   replicas, m and batch): the best it returns meets the SLO and none has more tokens/s. */
static void test_search(void **state)
{
    (void)state;
    static struct npu_disagg_plan best, p;
    struct npu_disagg_request br;
    char err[256];
    struct npu_disagg_search s = { .slo_s = 0.0005, .context = 256, .m_max = 4,
                                   .elem_bytes = 2 };
    assert_int_equal(npu_disagg_search(&moe, &c4x4, &s, &br, &best, err, sizeof(err)), NPU_OK);
    assert_true(s.tried > 0);
    assert_true(best.t.t_iter <= s.slo_s);
    double most = 0;
    for (uint32_t tp = 1; tp <= 4; tp *= 2)
        for (uint32_t ne = 4; ne <= 12; ne += 4)
            for (uint32_t na = 1; na * tp + ne <= 16; na++)
                for (uint32_t mb = 1; mb <= 4; mb++)
                    for (uint32_t b = na * mb; b <= 2048; b++) {
                        struct npu_disagg_request r = { .replicas = na, .tp_a = tp,
                                                        .expert_cores = ne, .micro_batches = mb,
                                                        .batch = b, .context = 256,
                                                        .elem_bytes = 2 };
                        if (npu_disagg_plan(&moe, &c4x4, &r, &p, err, sizeof(err)) ||
                            p.t.t_iter > s.slo_s)
                            continue;
                        most = p.t.tokens_per_s > most ? p.t.tokens_per_s : most;
                    }
    assert_true(most > 0);
    assert_true(fabs(best.t.tokens_per_s - most) <= 1e-9 * most);
    expect_refusal(&dense, &c4x4, &br, "has no experts"); /* the plan's own refusal */
    s.slo_s = 1e-9;
    assert_int_equal(npu_disagg_search(&moe, &c4x4, &s, &br, &best, err, sizeof(err)),
                     NPU_ERR_INVAL);
    assert_non_null(strstr(err, "no plan of tiny-moe on mesh-4x4 meets a TBT of 0.0 ms"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_placement),
        cmocka_unit_test(test_holdings),
        cmocka_unit_test(test_latency_model),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_search),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
