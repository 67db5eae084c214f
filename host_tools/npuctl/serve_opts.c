/* SPDX-License-Identifier: MIT */
/* npuctl serve's options (docs/serving.md, "npuctl serve"). */
#define _POSIX_C_SOURCE 200809L
#include "serve_opts.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu_enums.h"

#define DEFAULT_TRACE "models/traces/tiny-16.jsonl"

const char *const serve_reuse_names[SERVE_REUSE_COUNT] = { "off", "on", "shapes", "tiles" };

static int bad(const char *opt, const char *v, const char *what)
{
    npuctl_print_error("%s %s: %s (npuctl serve --help)", opt, v ? v : "(missing)", what);
    return NPUCTL_EXIT_USAGE;
}

/* A count of at least 1: 0 is never "the default" here (leave the option out for that). */
static int parse_count(const char *opt, const char *v, uint32_t *out)
{
    return npuctl_parse_u32(opt, v, 1, UINT32_MAX, out);
}

/* --inject-fault KIND:CORE:ROUND (docs/serving.md, "Faults") as the cores' bootargs. */
static int parse_fault(struct serve_opts *o, const char *v)
{
    static const char *const kinds[] = { "trap", "deadlock", "timeout", "spin" };
    char text[48];
    uint64_t core = 0, round = 0;
    const char *c1 = v ? strchr(v, ':') : NULL, *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    const size_t klen = c1 ? (size_t)(c1 - v) : 0;
    snprintf(text, sizeof(text), "%.*s", c2 && c2 - c1 - 1 < 40 ? (int)(c2 - c1 - 1) : 0,
             c1 ? c1 + 1 : "");
    if (c2 && npuctl_parse_decimal(text, 65535, &core) == NPU_OK &&
        npuctl_parse_decimal(c2 + 1, UINT32_MAX, &round) == NPU_OK && round >= 1)
        for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
            if (klen == strlen(kinds[k]) && !strncmp(v, kinds[k], klen)) {
                snprintf(o->fault, sizeof(o->fault), "fault=%s fault_core=%u fault_round=%u",
                         kinds[k], (unsigned)core, (unsigned)round);
                return 0;
            }
    return bad("--inject-fault", v, "KIND:CORE:ROUND with KIND trap, deadlock, timeout or "
                                    "spin, ROUND from 1");
}

/* The serve options of one pair; NPUCTL_IMAGE_UNKNOWN if it is none of them. */
static int parse_serve_option(struct serve_opts *o, const char *opt, const char *v)
{
    struct rt_sched_params *s = &o->sched;
    double x = 0;
    int rc = 0;
    if (!strcmp(opt, "--trace")) o->trace = v;
    else if (!strcmp(opt, "--out")) o->out = v;
    else if (!strcmp(opt, "--threads")) o->threads = v;
    else if (!strcmp(opt, "--layer-reuse")) {
        uint32_t k = 0;
        while (k < SERVE_REUSE_COUNT && (!v || strcmp(v, serve_reuse_names[k])))
            k++;
        if (k == SERVE_REUSE_COUNT)
            return bad(opt, v, "off, on, shapes or tiles");
        o->layer_reuse = (enum serve_reuse)k;
    }
    else if (!strcmp(opt, "--decode-cores")) {
        rc = serve_hetero_parse(v, &o->decode_cores);
        o->decode_cores.spec = v;
    }
    else if (!strcmp(opt, "--sched")) {
        int k = v ? rt_sched_kind_parse(v) : -1;
        if (k < 0)
            return bad(opt, v, "static, continuous, chunked, layered, layered-chunked, "
                               "pd-fusion or pd-disagg");
        s->kind = (enum rt_sched_kind)k;
    } else if (!strcmp(opt, "--chunk")) rc = parse_count(opt, v, &s->chunk);
    else if (!strcmp(opt, "--groups")) {
        if (v && !strcmp(v, "adaptive"))
            s->groups = 0;
        else
            rc = parse_count(opt, v, &s->groups);
    } else if (!strcmp(opt, "--group-tokens")) rc = parse_count(opt, v, &s->group_tokens);
    else if (!strcmp(opt, "--budget")) rc = parse_count(opt, v, &s->budget);
    else if (!strcmp(opt, "--prefill-units")) rc = parse_count(opt, v, &s->prefill_units);
    else if (!strcmp(opt, "--timeout")) /* 0: none, as for npuctl run */
        rc = npuctl_parse_u32(opt, v, 0, NPUCTL_TIMEOUT_MAX_S, &o->timeout_s);
    else if (!strcmp(opt, "--prefill-instances")) rc = parse_count(opt, v, &o->prefill_instances);
    else if (!strcmp(opt, "--watchdog-ms"))
        rc = npuctl_parse_u32(opt, v, 1, NPUCTL_WATCHDOG_MAX_MS, &o->watchdog_ms);
    else if (!strcmp(opt, "--inject-fault")) rc = parse_fault(o, v);
    else if (!strcmp(opt, "--slo-ttft-ms")) {
        rc = npuctl_parse_real(opt, v, 0, 1e12, &x);
        o->slo.ttft_ms = rc ? o->slo.ttft_ms : x;
    } else if (!strcmp(opt, "--slo-tbt-ms")) {
        rc = npuctl_parse_real(opt, v, 0, 1e12, &x);
        o->slo.tbt_ms = rc ? o->slo.tbt_ms : x;
    } else if (!strcmp(opt, "--seed"))
        rc = npuctl_parse_uint(opt, v, 0, UINT64_MAX, &o->seed);
    else
        return NPUCTL_IMAGE_UNKNOWN;
    return rc || v ? rc : bad(opt, v, "needs a value");
}

static void set_defaults(struct serve_opts *o)
{
    static char trace[NPUCTL_PATH_MAX];
    snprintf(trace, sizeof(trace), "%s/" DEFAULT_TRACE, npuctl_get_dir(NPUCTL_DIR_SOURCE));
    *o = (struct serve_opts){ .trace = trace, .out = "serve-out", .timeout_s = 600, .seed = 1,
                              .slo = { .ttft_ms = 10000, .tbt_ms = 125 } };
    npuctl_image_opts_init(&o->image);
    o->image.model = "tiny-moe";
    /* without --tp, the tiny models (128 wide) on 4 cores (1x4 at (0,0)), the others on
       every core (the planner's default) */
    o->image.narrow_tp = 4;
    o->image.req.kv_sram_blocks = -1;  /* an SRAM block pool, the ring in HBM */
    o->sched = (struct rt_sched_params){ .kind = RT_SCHED_CHUNKED, .chunk = 512,
                                         .group_tokens = 512 };
}

int serve_opts_parse(int argc, char **argv, struct serve_opts *o)
{
    set_defaults(o);
    for (int i = 0; i < argc; i++) {
        const char *opt = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v && v[0] == '-' && v[1] == '-')
            v = NULL; /* `--chunk --out DIR`: --chunk has no value (not "--out") */
        if (!strcmp(opt, "-h") || !strcmp(opt, "--help")) {
            npuctl_print_usage(stdout, "serve");
            o->help = true;
            return 0;
        }
        if (!strcmp(opt, "--engine-trace")) {
            o->engine_trace = true;
            continue;
        }
        int rc = parse_serve_option(o, opt, v);
        if (rc == NPUCTL_IMAGE_UNKNOWN)
            rc = npuctl_image_option(&o->image, opt, v);
        if (rc == NPUCTL_IMAGE_UNKNOWN) {
            npuctl_print_error("unknown option '%s' (npuctl serve --help)", opt);
            return NPUCTL_EXIT_USAGE;
        }
        if (rc)
            return rc;
        i++;
    }
    if (o->decode_cores.set && o->sched.kind != RT_SCHED_PD_DISAGG) {
        npuctl_print_error("--decode-cores: only --sched pd-disagg has decode cores");
        return NPUCTL_EXIT_USAGE;
    }
    if (o->sched.kind == RT_SCHED_PD_FUSION && !o->sched.budget)
        o->sched.budget = 256; /* the NPU paper gives no number; docs/serving.md says why */
    if (o->sched.kind == RT_SCHED_PD_FUSION && !o->sched.prefill_units)
        o->sched.prefill_units = 64;
    return 0;
}

uint32_t serve_opts_prefill_instances(const struct serve_opts *o, uint32_t instances)
{
    return o->prefill_instances ? o->prefill_instances : rt_pd_prefill_default(instances);
}

void serve_opts_describe(const struct serve_opts *o, char *buf, size_t len)
{
    const struct rt_sched_params *s = &o->sched;
    switch (s->kind) {
    case RT_SCHED_CHUNKED: snprintf(buf, len, "chunk=%u", s->chunk); break;
    case RT_SCHED_LAYERED_CHUNKED:
    case RT_SCHED_LAYERED:
        if (s->groups)
            snprintf(buf, len, "groups=%u%s%.0u", s->groups,
                     s->kind == RT_SCHED_LAYERED_CHUNKED ? " chunk=" : "",
                     s->kind == RT_SCHED_LAYERED_CHUNKED ? s->chunk : 0);
        else
            snprintf(buf, len, "groups=adaptive group_tokens=%u%s%.0u", s->group_tokens,
                     s->kind == RT_SCHED_LAYERED_CHUNKED ? " chunk=" : "",
                     s->kind == RT_SCHED_LAYERED_CHUNKED ? s->chunk : 0);
        break;
    case RT_SCHED_PD_FUSION:
        snprintf(buf, len, "budget=%u prefill_units=%u chunk=%u", s->budget, s->prefill_units,
                 s->chunk);
        break;
    case RT_SCHED_PD_DISAGG:
        snprintf(buf, len, "chunk=%u instances=%u prefill_instances=%u", s->chunk,
                 o->image.req.instances,
                 serve_opts_prefill_instances(o, o->image.req.instances));
        break;
    default: snprintf(buf, len, "-"); break;
    }
}
