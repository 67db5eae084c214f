/* SPDX-License-Identifier: MIT */
/*
 * npuctl plan --disagg SPEC (docs/images.md, "Attention/expert disaggregation: the latency
 * model's plan"): the two roles of a MoE model's disaggregated decoding on the chip, what
 * each core holds, and the MegaScale-Infer latency model's estimate (npu_disagg.h). Nothing
 * is built or run; --roles disagg builds the executed form (band=last estimates it).
 */
#define _POSIX_C_SOURCE 200809L
#include "npuctl.h"

#include <stdio.h>
#include <string.h>

#include "kv_config.h"
#include "npu_disagg.h"
#include "npu_image.h"
#include "npu_enums.h"

enum { K_REPLICAS, K_TP_A, K_EXPERTS, K_M, K_BATCH, K_CONTEXT, K_SLO, K_BAND, K__COUNT };
static const char *const spec_keys[K__COUNT] = { "replicas", "tp-a", "experts", "m", "batch",
                                                 "context", "slo-ms", "band" };

/* band=middle|last: where the expert band is (last: the executed form, --roles disagg). */
static int parse_band(const char *v, uint32_t *band_last)
{
    if (strcmp(v, "middle") && strcmp(v, "last"))
        return npuctl_usage_error("--disagg band: '%s' (middle or last)", v);
    *band_last = strcmp(v, "last") == 0;
    return 0;
}

/* SPEC's KEY=VALUE pairs over the defaults already in *r and *slo_ms; *given: a bit per key
   (a key given twice is refused). */
static int parse_spec(const char *spec, struct npu_disagg_request *r, uint32_t *slo_ms,
                      uint32_t *given)
{
    uint32_t *fields[K__COUNT] = { &r->replicas, &r->tp_a, &r->expert_cores, &r->micro_batches,
                                   &r->batch, &r->context, slo_ms, &r->band_last };
    const uint32_t most[K__COUNT] = { NPU_DISAGG_REPLICAS_MAX, 1u << 16, 1u << 16, 64,
                                      NPU_DISAGG_BATCH_MAX, 1u << 24, 1u << 24, 1 };
    char buf[256];
    *given = 0;
    if (snprintf(buf, sizeof(buf), "%s", spec) >= (int)sizeof(buf))
        return npuctl_usage_error("--disagg: '%s' is longer than %zu characters", spec,
                                  sizeof(buf) - 1);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        int k = -1;
        for (int i = 0; eq && i < K__COUNT; i++)
            k = strlen(spec_keys[i]) == (size_t)(eq - tok) &&
                        !strncmp(tok, spec_keys[i], (size_t)(eq - tok))
                    ? i
                    : k;
        if (k < 0)
            return npuctl_usage_error("--disagg: '%s' is not KEY=VALUE with KEY one of "
                                      "replicas, tp-a, experts, m, batch, context, slo-ms, "
                                      "band", tok);
        if (*given & (1u << k))
            return npuctl_usage_error("--disagg: %s is given twice", spec_keys[k]);
        *given |= 1u << k;
        if (k == K_BAND) {
            if (parse_band(eq + 1, fields[k]))
                return NPUCTL_EXIT_USAGE;
            continue;
        }
        char name[32];
        snprintf(name, sizeof(name), "--disagg %s", spec_keys[k]);
        if (npuctl_parse_u32(name, eq + 1, 1, most[k], fields[k]))
            return NPUCTL_EXIT_USAGE;
    }
    return 0;
}

/* The keys that do not apply: the plan's shape under --search, the SLO without it. */
static int check_keys(uint32_t given, bool search)
{
    const uint32_t shape = 1u << K_REPLICAS | 1u << K_TP_A | 1u << K_EXPERTS | 1u << K_BATCH;
    const uint32_t bad = search ? given & shape : given & (1u << K_SLO);
    for (int k = 0; k < K__COUNT; k++)
        if (bad & (1u << k))
            return npuctl_usage_error("--disagg %s: %s", spec_keys[k],
                                      search ? "--search disagg chooses it"
                                             : "applies to --search disagg only");
    return 0;
}

/* The defaults for model m on chip c: tp-a the largest divisor of the rows that divides
   the heads, the experts on the whole columns nearest half the mesh whose cores fit the
   experts, a replica a column of the rest, 3 micro-batches (the paper's least for fast
   communication), 64 requests a replica at 2048 positions. */
static void defaults(const struct model_config *m, const struct chip_config *c,
                     struct npu_disagg_request *r)
{
    const uint32_t R = c->mesh_rows, C = c->mesh_cols;
    uint32_t tp = R, we = C / 2 ? C / 2 : 1;
    while (tp > 1 && (R % tp || m->num_heads % tp))
        tp--;
    for (uint32_t k = 0; k < C; k++) { /* C/2, C/2 - 1, C/2 + 1, ... */
        const uint32_t lo = C / 2 > k ? C / 2 - k : 0, hi = C / 2 + k;
        if (lo && npu_disagg_experts_fit(m, lo * R)) {
            we = lo;
            break;
        }
        if (hi < C && npu_disagg_experts_fit(m, hi * R)) {
            we = hi;
            break;
        }
    }
    *r = (struct npu_disagg_request){ .tp_a = tp, .expert_cores = we * R,
                                      .replicas = (C - we) * (R / tp), .micro_batches = 3,
                                      .context = 2048, .elem_bytes = 2 };
    r->batch = 64 * r->replicas;
}

int npuctl_plan_disagg(const struct npuctl_image_opts *o)
{
    char err[NPUCTL_ERR_MAX], mpath[NPUCTL_PATH_MAX], cpath[NPUCTL_PATH_MAX];
    static char text[MODEL_CONFIG_TEXT_MAX];
    struct model_config cfg;
    struct chip_config chip;
    if (npuctl_find_model(o->model, mpath, sizeof(mpath), err, sizeof(err)) ||
        kv_config_read(mpath, text, sizeof(text), err, sizeof(err)) ||
        model_config_parse(&cfg, text, mpath, err, sizeof(err)) ||
        npuctl_load_chip(o->chip, &chip, cpath, sizeof(cpath), err, sizeof(err)))
        return npuctl_usage_error("%s", err);
    struct npu_disagg_request r;
    defaults(&cfg, &chip, &r);
    if (o->req.dtype == NPU_IMAGE_FP32)
        r.elem_bytes = 4;
    uint32_t slo_ms = 150, given = 0;
    if (o->search)
        r.micro_batches = 4; /* the most tried: the paper's N_m */
    int rc = parse_spec(o->disagg ? o->disagg : "", &r, &slo_ms, &given);
    if (rc == 0)
        rc = check_keys(given, o->search);
    if (rc)
        return rc;
    if (!(given & (1u << K_BATCH))) /* 64 a replica of the replicas asked for */
        r.batch = 64 * r.replicas;
    static struct npu_disagg_plan plan;
    if (o->search) {
        struct npu_disagg_search s = { .slo_s = slo_ms / 1e3, .context = r.context,
                                       .m_max = r.micro_batches, .elem_bytes = r.elem_bytes };
        rc = npu_disagg_search(&cfg, &chip, &s, &r, &plan, err, sizeof(err));
        if (rc == NPU_OK)
            printf("search (MegaScale-Infer Algorithm 1 over the latency model, an estimate): "
                   "%u candidates meet a TBT of %u ms at %u positions with m <= %u; the most "
                   "tokens/s:\n", s.tried, slo_ms, s.context, s.m_max);
    } else {
        rc = npu_disagg_plan(&cfg, &chip, &r, &plan, err, sizeof(err));
    }
    if (rc != NPU_OK) {
        fprintf(stderr, "npuctl: plan refused: %s\n", err);
        return NPUCTL_EXIT_USAGE;
    }
    npu_disagg_print(stdout, &cfg, &chip, &r, &plan);
    return 0;
}
