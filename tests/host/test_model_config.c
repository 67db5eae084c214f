/* SPDX-License-Identifier: MIT */
/*
 * Model configs (models/modeldesc/src/model_config.c, docs/model-config.md): the tiny and real model
 * files parse; the real ones give the parameter counts their publishers state (a check of
 * the numbers copied from them); every kind of bad field is refused with a message naming
 * the file, line and field, and fields that contradict each other are refused too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "model_config.h"
#include "npu_enums.h"

static char path[512], err[512];

static void load(struct model_config *m, const char *rel)
{
    snprintf(path, sizeof(path), "%s/models/%s", NPU_SOURCE_DIR, rel);
    int rc = model_config_load(m, path, err, sizeof(err));
    if (rc != NPU_OK)
        fail_msg("%s: %s", rel, err);
}

static void test_tiny_models(void **state)
{
    (void)state;
    struct model_config m;
    load(&m, "tiny/tiny-dense.toml");
    assert_int_equal(m.arch, MODEL_DENSE);
    assert_int_equal(m.hidden_size, 128);
    assert_true(m.rms_norm_eps == 1e-5);
    assert_false(model_is_sliding_layer(&m, 0));
    load(&m, "tiny/tiny-moe.toml");
    assert_int_equal(m.arch, MODEL_MOE);
    assert_int_equal(m.experts_per_token, 2);
    assert_true(model_is_sliding_layer(&m, 0) && !model_is_sliding_layer(&m, 1) &&
                model_is_sliding_layer(&m, 2));
}

/* Total parameters against the publisher's figure (within 3 %: biases, sinks and the like
   are not in the format). */
static void expect_params(const char *file, double published)
{
    struct model_config m;
    load(&m, file);
    double got = (double)model_count_params(&m);
    if (got < published * 0.97 || got > published * 1.03)
        fail_msg("%s: %.3g parameters, the publisher says %.3g", file, got, published);
}

static void test_real_models(void **state)
{
    (void)state;
    expect_params("configs/qwen3-4b.toml", 4.0e9);       /* model card: 4.0B */
    expect_params("configs/qwen3-8b.toml", 8.2e9);       /* 8.2B */
    expect_params("configs/qwen3-32b.toml", 32.8e9);     /* 32.8B */
    expect_params("configs/qwen3-30b-a3b.toml", 30.5e9); /* 30.5B total, 3.3B active */
    expect_params("configs/gpt-oss-20b.toml", 20.9e9);   /* 20.9B total (21B) */
    expect_params("configs/mixtral-8x22b.toml", 141e9);  /* 141B total, 39B active */
    expect_params("configs/dbrx.toml", 132e9);           /* 132B total, 36B active */
}

static const char *good =
    "name = \"t\"\narch = \"moe\"\nhidden_size = 64\nnum_layers = 2\nnum_heads = 4\n"
    "num_kv_heads = 2\nhead_dim = 16\nintermediate_size = 0\nvocab_size = 100\n"
    "max_position = 256\nrope_theta = 10000.0\nrms_norm_eps = 1e-6\nqk_norm = 0\n"
    "tie_embeddings = 1\nnum_experts = 4\nexperts_per_token = 2\nmoe_intermediate_size = 32\n"
    "norm_topk_prob = 1\nsliding_window = 0\nsliding_window_period = 0\n"
    "sliding_window_offset = 0\nseed = 7\n";

/* good with line `key = ...` replaced by `line` (or removed when line is ""). */
static int parse_with(const char *key, const char *line, char *msg, size_t len)
{
    char text[2048] = "", copy[2048];
    strcpy(copy, good);
    for (char *l = strtok(copy, "\n"); l; l = strtok(NULL, "\n")) {
        bool hit = strncmp(l, key, strlen(key)) == 0 && l[strlen(key)] == ' ';
        strcat(text, hit ? line : l);
        if (!hit || *line)
            strcat(text, "\n");
    }
    struct model_config m;
    return model_config_parse(&m, text, "t.toml", msg, len);
}

static void expect_refusal(const char *key, const char *line, const char *needle)
{
    int rc = parse_with(key, line, err, sizeof(err));
    if (rc != NPU_ERR_FORMAT || !strstr(err, needle))
        fail_msg("%s -> '%s': rc %d, message '%s', wanted '%s'", key, line, rc, err, needle);
}

static void test_refusals(void **state)
{
    (void)state;
    struct model_config m;
    assert_int_equal(model_config_parse(&m, good, "t.toml", err, sizeof(err)), NPU_OK);
    assert_true(m.rope_theta == 10000.0 && m.rms_norm_eps == 1e-6);
    expect_refusal("seed", "", "t.toml: missing field 'seed'");
    expect_refusal("seed", "seed = 7\nflavour = 3", "t.toml:23: unknown field 'flavour'");
    expect_refusal("num_heads", "num_heads = 5", "num_heads 5 is not a multiple of num_kv_heads 2");
    expect_refusal("arch", "arch = \"sparse\"", "field 'arch' must be \"dense\" or \"moe\"");
    expect_refusal("num_experts", "num_experts = 0", "arch 'moe' needs num_experts >= 2");
    expect_refusal("experts_per_token", "experts_per_token = 5", "(got 5 of 4)");
    expect_refusal("sliding_window", "sliding_window = 64", "sliding_window and "
                   "sliding_window_period must both be 0 or both be set");
    expect_refusal("rms_norm_eps", "rms_norm_eps = 2.0", "t.toml:12: field 'rms_norm_eps' = 2 "
                   "is out of range");
    expect_refusal("rope_theta", "rope_theta = 1e", "field 'rope_theta' must be a number");
    expect_refusal("rope_theta", "rope_theta = nan", "field 'rope_theta' must be a number");
    expect_refusal("head_dim", "head_dim = 15", "head_dim 15 must be even");
    expect_refusal("intermediate_size", "intermediate_size = 64", "arch 'moe' needs "
                   "intermediate_size = 0");
    expect_refusal("hidden_size", "hidden_size = -3", "field 'hidden_size' must be an "
                   "unsigned integer");
    assert_int_equal(model_config_load(&m, "/nonexistent/x.toml", err, sizeof(err)),
                     NPU_ERR_IO);
    assert_non_null(strstr(err, "/nonexistent/x.toml: cannot open"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_models),
        cmocka_unit_test(test_real_models),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
