/* SPDX-License-Identifier: MIT */
/*
 * The host reference model (models/reference/): its building blocks against hand-computed
 * values; properties that pin the architecture (a window at least as long as the sequence
 * changes nothing, a MoE layer whose experts are all one FFN equals that dense FFN, expert
 * routing counts k per token and layer, the seed decides the weights); refusal of models too
 * large for it; and the greedy tokens of both tiny models for a fixed prompt (a regression
 * pin, taken from this implementation when it was written).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "npu_enums.h"
#include "ref_model.h"

static struct model_config load(const char *rel)
{
    char path[512], err[512];
    struct model_config m;
    snprintf(path, sizeof(path), "%s/models/%s", NPU_SOURCE_DIR, rel);
    if (model_config_load(&m, path, err, sizeof(err)) != NPU_OK)
        fail_msg("%s", err);
    return m;
}

static void test_blocks(void **state)
{
    (void)state;
    float x[2] = { 3, 4 }, w[2] = { 1, 2 }, out[2];
    ref_rmsnorm(out, x, w, 2, 0.0f); /* rms = sqrt(12.5) */
    assert_float_equal(out[0], 3 / sqrtf(12.5f), 1e-6);
    assert_float_equal(out[1], 8 / sqrtf(12.5f), 1e-6);
    float s[3] = { 1, 2, 3 };
    ref_softmax(s, 3);
    assert_float_equal(s[0] + s[1] + s[2], 1.0, 1e-6);
    assert_float_equal(s[2] / s[1], expf(1.0f), 1e-5);
    /* RoPE pairs i with i + hd/2: pos 1, hd 4: pair (0,2) turns 1 rad, (1,3) 0.01 rad. */
    float v[4] = { 1, 1, 0, 0 };
    ref_rope(v, 4, 1, 10000.0);
    assert_float_equal(v[0], cosf(1.0f), 1e-6);
    assert_float_equal(v[2], sinf(1.0f), 1e-6);
    assert_float_equal(v[1], cosf(0.01f), 1e-6);
    assert_float_equal(v[3], sinf(0.01f), 1e-6);
    float u[4] = { 0.3f, -1, 2, 5 };
    ref_rope(u, 4, 0, 10000.0); /* position 0: unchanged */
    assert_true(u[0] == 0.3f && u[3] == 5);
    float p[5] = { 0.1f, 0.3f, 0.3f, 0.05f, 0.25f };
    uint32_t idx[3];
    ref_topk(p, 5, 3, idx); /* ties to the lower index */
    assert_true(idx[0] == 1 && idx[1] == 2 && idx[2] == 4);
    assert_int_equal(ref_argmax(p, 5), 1);
    float mat[6] = { 1, 2, 3, 4, 5, 6 }, vec[3] = { 1, 0, -1 }, res[2];
    ref_matmul(res, mat, vec, 2, 3); /* [2][3] x [3] */
    assert_true(res[0] == -2 && res[1] == -2);
}

/* Logits of tokens 0..n-1 fed in order; out[n][vocab]. */
static void run(struct ref_model *m, const uint32_t *tokens, uint32_t n, float *out)
{
    for (uint32_t p = 0; p < n; p++)
        memcpy(out + (size_t)p * m->cfg.vocab_size, ref_model_forward(m, tokens[p], p),
               m->cfg.vocab_size * sizeof(float));
}

static void test_sliding_window(void **state)
{
    (void)state;
    struct model_config c = load("tiny/tiny-moe.toml");
    const uint32_t n = 24, vocab = c.vocab_size;
    uint32_t tokens[24];
    for (uint32_t i = 0; i < n; i++)
        tokens[i] = (i * 37 + 11) % vocab;
    float *a = malloc(sizeof(float) * n * vocab), *b = malloc(sizeof(float) * n * vocab);
    struct ref_model m;
    c.sliding_window = 8; /* window 8 on even layers */
    assert_int_equal(ref_model_init(&m, &c, 64), NPU_OK);
    run(&m, tokens, n, a);
    ref_model_free(&m);
    c.sliding_window = 24; /* as long as the sequence: the same as no window at all */
    assert_int_equal(ref_model_init(&m, &c, 64), NPU_OK);
    run(&m, tokens, n, b);
    ref_model_free(&m);
    c.sliding_window = 0, c.sliding_window_period = 0;
    struct model_config full = c;
    float *f = malloc(sizeof(float) * n * vocab);
    assert_int_equal(ref_model_init(&m, &full, 64), NPU_OK);
    run(&m, tokens, n, f);
    ref_model_free(&m);
    assert_memory_equal(b, f, sizeof(float) * n * vocab);
    /* Window 8: the first 8 positions see everything; later ones do not. */
    assert_memory_equal(a, f, sizeof(float) * 8 * vocab);
    for (uint32_t p = 8; p < n; p++) /* from position 8 on, each position sees less */
        assert_true(memcmp(a + p * vocab, f + p * vocab, sizeof(float) * vocab) != 0);
    free(a), free(b), free(f);
}

/* A MoE model whose experts are all the same FFN equals the dense model with that FFN. */
static void test_moe_equals_dense(void **state)
{
    (void)state;
    struct model_config mc = load("tiny/tiny-moe.toml");
    mc.sliding_window = 0, mc.sliding_window_period = 0;
    struct model_config dc = mc;
    dc.arch = MODEL_DENSE, dc.intermediate_size = mc.moe_intermediate_size;
    dc.num_experts = dc.experts_per_token = dc.moe_intermediate_size = 0;
    struct ref_model moe, dense;
    assert_int_equal(ref_model_init(&moe, &mc, 32), NPU_OK);
    assert_int_equal(ref_model_init(&dense, &dc, 32), NPU_OK);
    const size_t d = mc.hidden_size, mff = mc.moe_intermediate_size, v = mc.vocab_size;
    memcpy(dense.embed, moe.embed, v * d * sizeof(float));
    memcpy(dense.lm_head, moe.lm_head, v * d * sizeof(float));
    memcpy(dense.final_norm, moe.final_norm, d * sizeof(float));
    for (uint32_t l = 0; l < mc.num_layers; l++) {
        struct ref_layer *a = &moe.layers[l], *b = &dense.layers[l];
        const size_t qd = mc.num_heads * mc.head_dim, kvd = mc.num_kv_heads * mc.head_dim;
        memcpy(b->attn_norm, a->attn_norm, d * sizeof(float));
        memcpy(b->ffn_norm, a->ffn_norm, d * sizeof(float));
        memcpy(b->wq, a->wq, qd * d * sizeof(float));
        memcpy(b->wk, a->wk, kvd * d * sizeof(float));
        memcpy(b->wv, a->wv, kvd * d * sizeof(float));
        memcpy(b->wo, a->wo, d * qd * sizeof(float));
        memcpy(b->w_gate, a->e_gate, mff * d * sizeof(float)); /* expert 0 */
        memcpy(b->w_up, a->e_up, mff * d * sizeof(float));
        memcpy(b->w_down, a->e_down, d * mff * sizeof(float));
        for (uint32_t e = 1; e < mc.num_experts; e++) {
            memcpy(a->e_gate + e * mff * d, a->e_gate, mff * d * sizeof(float));
            memcpy(a->e_up + e * mff * d, a->e_up, mff * d * sizeof(float));
            memcpy(a->e_down + e * d * mff, a->e_down, d * mff * sizeof(float));
        }
    }
    double worst = 0.0;
    for (uint32_t p = 0; p < 16; p++) {
        uint32_t tok = (p * 53 + 5) % v;
        const float *lm = ref_model_forward(&moe, tok, p), *ld = ref_model_forward(&dense, tok, p);
        double diff = 0.0, scale = 0.0; /* normalised: largest difference / largest logit */
        for (size_t i = 0; i < v; i++) {
            diff = fmax(diff, fabs((double)lm[i] - ld[i]));
            scale = fmax(scale, fabs((double)ld[i]));
        }
        worst = fmax(worst, diff / scale);
    }
    printf("moe vs dense: normalised logit difference %g\n", worst);
    assert_true(worst < 1e-5); /* the two top-k weights sum to 1 up to rounding */
    /* Every token went to k experts in every layer. */
    for (uint32_t l = 0; l < mc.num_layers; l++) {
        uint64_t sum = 0;
        for (uint32_t e = 0; e < mc.num_experts; e++)
            sum += moe.expert_tokens[l * mc.num_experts + e];
        assert_int_equal(sum, 16 * mc.experts_per_token);
    }
    ref_model_free(&moe);
    ref_model_free(&dense);
}

static void test_seed_and_limits(void **state)
{
    (void)state;
    struct model_config c = load("tiny/tiny-dense.toml");
    struct ref_model a, b;
    assert_int_equal(ref_model_init(&a, &c, 16), NPU_OK);
    assert_int_equal(ref_model_init(&b, &c, 16), NPU_OK);
    assert_memory_equal(ref_model_forward(&a, 3, 0), ref_model_forward(&b, 3, 0),
                        c.vocab_size * sizeof(float));
    ref_model_free(&b);
    c.seed++;
    assert_int_equal(ref_model_init(&b, &c, 16), NPU_OK);
    assert_true(memcmp(ref_model_forward(&b, 3, 0), ref_model_forward(&a, 3, 0),
                       c.vocab_size * sizeof(float)) != 0);
    ref_model_free(&a);
    ref_model_free(&b);
    assert_int_equal(ref_model_init(&a, &c, c.max_position + 1), NPU_ERR_RANGE);
    struct model_config big = load("configs/qwen3-8b.toml");
    assert_int_equal(ref_model_init(&a, &big, 16), NPU_ERR_RANGE);
    c = load("tiny/tiny-dense.toml");
    assert_int_equal(ref_model_init(&a, &c, 8), NPU_OK);
    uint32_t prompt[4] = { 1, 2, 3, 4 }, out[8];
    assert_int_equal(ref_generate(&a, prompt, 4, 5, out), NPU_OK); /* 8 positions fed */
    assert_int_equal(ref_generate(&a, prompt, 4, 6, out), NPU_ERR_RANGE); /* 9 > 8 */
    ref_model_free(&a);
}

/* Greedy tokens of a fixed prompt (pinned when this implementation was written). */
static void expect_generation(const char *file, const uint32_t *want, uint32_t n)
{
    struct model_config c = load(file);
    struct ref_model m;
    uint32_t prompt[7] = { 17, 204, 3, 99, 511, 42, 8 }, out[16];
    assert_int_equal(ref_model_init(&m, &c, 64), NPU_OK);
    assert_int_equal(ref_generate(&m, prompt, 7, n, out), NPU_OK);
    for (uint32_t i = 0; i < n; i++)
        printf("%u%s", out[i], i + 1 < n ? ", " : "\n");
    assert_memory_equal(out, want, n * sizeof(uint32_t));
    ref_model_free(&m);
}

static void test_generation(void **state)
{
    (void)state;
    static const uint32_t dense[16] = { 184, 318, 69, 99, 355, 412, 276, 454,
                                        476, 156, 99, 308, 23, 323, 147, 255 };
    static const uint32_t moe[16] = { 388, 67, 184, 115, 450, 9, 30, 146,
                                      344, 115, 450, 9, 30, 146, 344, 278 };
    expect_generation("tiny/tiny-dense.toml", dense, 16);
    expect_generation("tiny/tiny-moe.toml", moe, 16);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocks),
        cmocka_unit_test(test_sliding_window),
        cmocka_unit_test(test_moe_equals_dense),
        cmocka_unit_test(test_seed_and_limits),
        cmocka_unit_test(test_generation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
