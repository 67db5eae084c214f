/* SPDX-License-Identifier: MIT */
/*
 * npu-ref: the host reference model on the command line (docs/models.md). Prints, for a
 * prompt, the greedy tokens and their logits in the same form as the chip's model image:
 *   npu-ref MODEL.toml PROMPT NEW      PROMPT = comma-separated token ids
 *   REF step=0 token=184 logit=1.875303
 * and, for a MoE model, how many tokens each expert of each layer received:
 *   REF routed layer=0 tokens=3,0,5,...
 * With a fourth argument EB (bytes per weight element), a MoE model also prints the expert
 * weights a chip streaming them must load when the prompt is one iteration and each decode
 * step another: per iteration and layer, every expert some token routes to, once:
 *   REF expert_load_bytes=N
 * `npu-ref --routing MODEL.toml LEN NEW SEED SKEW_MILLI EB` prints the same figure for a
 * performance-mode run of one request of LEN synthetic tokens, whose experts the seeded
 * routing model draws (routing_model.h) instead of a router.
 * Exit status 0, or 2 with a message for bad arguments or a model the reference refuses.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu_enums.h"
#include "ref_model.h"
#include "routing_model.h"

#define PROMPT_MAX 4096u

static int usage(const char *msg)
{
    fprintf(stderr, "npu-ref: %s\nusage: npu-ref MODEL.toml PROMPT NEW\n", msg);
    return 2;
}

/* Parses "t1,t2,..." into out; returns the count, or 0 for a malformed list. */
static uint32_t parse_prompt(const char *s, uint32_t *out, uint32_t vocab)
{
    uint32_t n = 0;
    while (*s && n < PROMPT_MAX) {
        char *end;
        unsigned long v = strtoul(s, &end, 10);
        if (end == s || v >= vocab || (*end != ',' && *end != '\0'))
            return 0;
        out[n++] = (uint32_t)v;
        s = *end ? end + 1 : end;
    }
    return *s ? 0 : n;
}

/* Experts that received tokens since the last call (each once per layer); `seen` holds
   the counts as of the last call. */
static uint64_t expert_iteration_loads(const struct ref_model *m, uint64_t *seen)
{
    const struct model_config *c = &m->cfg;
    uint64_t n = 0;
    for (size_t i = 0; c->arch == MODEL_MOE && i < (size_t)c->num_layers * c->num_experts; i++) {
        n += m->expert_tokens[i] != seen[i];
        seen[i] = m->expert_tokens[i];
    }
    return n;
}

/* --routing: the expert-weight bytes of one request under the routing model. */
static int routing_bytes(int argc, char **argv)
{
    struct model_config cfg;
    char err[512];
    if (argc != 8)
        return usage("--routing MODEL.toml LEN NEW SEED SKEW_MILLI EB");
    if (model_config_load(&cfg, argv[2], err, sizeof(err)) != NPU_OK)
        return usage(err);
    const uint32_t len = (uint32_t)strtoul(argv[3], NULL, 10);
    const uint32_t n_new = (uint32_t)strtoul(argv[4], NULL, 10);
    struct routing_model rm = { .experts = cfg.num_experts, .k = cfg.experts_per_token,
                                .seed = strtoull(argv[5], NULL, 10),
                                .skew_milli = (uint32_t)strtoul(argv[6], NULL, 10) };
    if (cfg.arch != MODEL_MOE || len == 0 || n_new == 0 || cfg.num_experts > ROUTING_EXPERTS_MAX)
        return usage("--routing needs a MoE model (at most 256 experts), LEN and NEW >= 1");
    const uint64_t expert = 3ull * cfg.moe_intermediate_size * cfg.hidden_size *
                            strtoull(argv[7], NULL, 10);
    uint64_t cum[ROUTING_EXPERTS_MAX], loads = 0;
    uint32_t pick[ROUTING_EXPERTS_MAX];
    for (uint32_t l = 0; l < cfg.num_layers; l++) {
        routing_layer_table(&rm, l, cum);
        /* iteration 0: the prompt's rows; then one row per decode step but the last */
        for (uint32_t it = 0; it < n_new; it++) {
            uint8_t used[ROUTING_EXPERTS_MAX] = { 0 };
            uint32_t first = it == 0 ? 0 : len + it - 1, last = it == 0 ? len : len + it;
            for (uint32_t pos = first; pos < last; pos++) {
                routing_draw(&rm, cum, l, 0, pos, pick);
                for (uint32_t j = 0; j < rm.k; j++)
                    used[pick[j]] = 1;
            }
            for (uint32_t e = 0; e < cfg.num_experts; e++)
                loads += used[e];
        }
    }
    printf("REF expert_load_bytes=%llu\n", (unsigned long long)(loads * expert));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--routing") == 0)
        return routing_bytes(argc, argv);
    static uint32_t prompt[PROMPT_MAX];
    struct model_config cfg;
    char err[512];
    if (argc != 4 && argc != 5)
        return usage("expected three or four arguments");
    if (model_config_load(&cfg, argv[1], err, sizeof(err)) != NPU_OK)
        return usage(err);
    uint32_t n = parse_prompt(argv[2], prompt, cfg.vocab_size);
    long n_new = strtol(argv[3], NULL, 10);
    if (n == 0 || n_new < 1 || n + (uint64_t)n_new > cfg.max_position)
        return usage("PROMPT must be token ids below vocab_size, NEW >= 1, both within "
                     "max_position");
    struct ref_model m;
    if (ref_model_init(&m, &cfg, n + (uint32_t)n_new) != NPU_OK)
        return usage("the reference cannot hold this model (too large?)");
    const float *logits = NULL;
    const uint64_t expert_bytes = argc == 5 ? 3ull * cfg.moe_intermediate_size *
                                                  cfg.hidden_size * strtoull(argv[4], NULL, 10)
                                            : 0;
    uint64_t loads = 0;
    uint64_t *before = calloc((size_t)cfg.num_layers * (cfg.num_experts + 1), sizeof(uint64_t));
    if (!before)
        return usage("out of memory");
    for (uint32_t p = 0; p < n; p++)
        logits = ref_model_forward(&m, prompt[p], p);
    loads += expert_iteration_loads(&m, before);
    for (long i = 0; i < n_new; i++) {
        uint32_t tok = ref_argmax(logits, cfg.vocab_size);
        printf("REF step=%ld token=%u logit=%.7g\n", i, tok, (double)logits[tok]);
        if (i + 1 < n_new) {
            logits = ref_model_forward(&m, tok, n + (uint32_t)i);
            loads += expert_iteration_loads(&m, before);
        }
    }
    if (expert_bytes && cfg.arch == MODEL_MOE)
        printf("REF expert_load_bytes=%llu\n", (unsigned long long)(loads * expert_bytes));
    free(before);
    for (uint32_t l = 0; cfg.arch == MODEL_MOE && l < cfg.num_layers; l++) {
        printf("REF routed layer=%u tokens=", l); /* per expert, over all forward passes */
        for (uint32_t e = 0; e < cfg.num_experts; e++)
            printf("%s%llu", e ? "," : "",
                   (unsigned long long)m.expert_tokens[(size_t)l * cfg.num_experts + e]);
        printf("\n");
    }
    ref_model_free(&m);
    return 0;
}
