/* SPDX-License-Identifier: MIT */
/* npuctl serve's options (docs/serving.md, "npuctl serve"; docs/cli.md): the tables of
   serve's own and of its scheduler's options, with the plan options (image_opts.c) for the
   image, parsed into a struct serve_opts, and serve's usage. */
#define _POSIX_C_SOURCE 200809L
#include "serve_opts.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu_enums.h"
#include "opts.h"

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

enum serve_opt {
    SV_TRACE, SV_OUT, SV_SEED, SV_SLO_TTFT, SV_SLO_TBT, SV_TIMEOUT, SV_THREADS, SV_WATCHDOG,
    SV_ENGINE_TRACE, SV_LAYER_REUSE, SV_FAULT, SV_SCHED, SV_CHUNK, SV_GROUPS,
    SV_GROUP_TOKENS, SV_BUDGET, SV_PREFILL_UNITS, SV_PREFILL_INSTANCES, SV_DECODE_CORES,
    SV_NUM_PROMPTS, SV_REQUEST_RATE, SV_BURSTINESS, SV_MAX_CONCURRENCY, SV_FORCE, SV_LABEL,
    SV_PREFIX_CACHE, SV_HASH_BLOCK, SV_DISPATCH,
};

/* The scheduler and its parameters. */
static int apply_sched_opt(void *ctx, const struct npuctl_opt *opt, const char *v, char *err,
                           size_t errlen)
{
    struct serve_opts *o = ctx;
    struct rt_sched_params *s = &o->sched;
    const char *name = opt->name;
    (void)err, (void)errlen; /* the refusals are printed */
    switch ((enum serve_opt)opt->id) {
    case SV_SCHED: {
        int k = rt_sched_kind_parse(v);
        if (k < 0)
            return bad(name, v, "static, continuous, chunked, layered, layered-chunked, "
                                "pd-fusion or pd-disagg");
        s->kind = (enum rt_sched_kind)k;
        return 0;
    }
    case SV_CHUNK: return parse_count(name, v, &s->chunk);
    case SV_GROUPS:
        if (strcmp(v, "adaptive") == 0) {
            s->groups = 0;
            return 0;
        }
        return parse_count(name, v, &s->groups);
    case SV_GROUP_TOKENS: return parse_count(name, v, &s->group_tokens);
    case SV_BUDGET: return parse_count(name, v, &s->budget);
    case SV_PREFILL_UNITS: return parse_count(name, v, &s->prefill_units);
    case SV_PREFILL_INSTANCES: return parse_count(name, v, &o->prefill_instances);
    case SV_PREFIX_CACHE: {
        int k = npuctl_opt_word_index(opt, v);
        if (k < 0)
            return bad(name, v, "off or on");
        o->prefix_cache = k == 1;
        return 0;
    }
    case SV_HASH_BLOCK: return npuctl_parse_u32(name, v, 1, NPU_REQUEST_TOKENS_MAX, &o->hash_block);
    case SV_DISPATCH: {
        int d = rt_dispatch_parse(v);
        if (d < 0)
            return bad(name, v, "rr, load or prefix");
        o->dispatch = (enum rt_dispatch)d;
        return 0;
    }
    case SV_DECODE_CORES: {
        int rc = serve_hetero_parse(v, &o->decode_cores); /* resets decode_cores */
        o->decode_cores.spec = v;
        return rc;
    }
    default: return NPUCTL_EXIT_USAGE;
    }
}

/* The options of a run's time, SLO and checks. */
static int apply_run_opt(struct serve_opts *o, const struct npuctl_opt *opt, const char *v)
{
    const char *name = opt->name;
    double x = 0;
    int rc = 0;
    switch ((enum serve_opt)opt->id) {
    case SV_TIMEOUT: /* 0: none, as for npuctl run */
        return npuctl_parse_u32(name, v, 0, NPUCTL_TIMEOUT_MAX_S, &o->timeout_s);
    case SV_WATCHDOG: return npuctl_parse_u32(name, v, 1, NPUCTL_WATCHDOG_MAX_MS, &o->watchdog_ms);
    case SV_FAULT: return parse_fault(o, v);
    case SV_SEED: return npuctl_parse_uint(name, v, 0, UINT64_MAX, &o->seed);
    case SV_SLO_TTFT:
        rc = npuctl_parse_real(name, v, 0, 1e12, &x);
        o->slo.ttft_ms = rc ? o->slo.ttft_ms : x;
        return rc;
    case SV_SLO_TBT:
        rc = npuctl_parse_real(name, v, 0, 1e12, &x);
        o->slo.tbt_ms = rc ? o->slo.tbt_ms : x;
        return rc;
    case SV_NUM_PROMPTS: return parse_count(name, v, &o->load.num_prompts);
    case SV_REQUEST_RATE:
        if (v && strcmp(v, "inf") == 0) {
            o->load.rate = INFINITY;
            return 0;
        }
        rc = npuctl_parse_real(name, v, 1e-9, 1e9, &x);
        o->load.rate = rc ? o->load.rate : x;
        return rc;
    case SV_BURSTINESS:
        rc = npuctl_parse_real(name, v, 1e-3, 1e3, &x);
        o->load.burstiness = rc ? o->load.burstiness : x;
        return rc;
    case SV_MAX_CONCURRENCY: return parse_count(name, v, &o->max_concurrency);
    default: return NPUCTL_EXIT_USAGE;
    }
}

/* The label keys serve writes itself: a --label cannot stand for one of them. */
static const char *const own_label_keys[] = {
    "chip", "model", "sched", "sched_params", "mode", "trace", "request_rate", "layer_reuse",
    "decode_cores", "prefix_cache",
};

/* --label KEY=VALUE: KEY of a-z, 0-9 and _, not one of serve's own, given once. */
static int parse_label(struct serve_opts *o, const char *v)
{
    const char *eq = v ? strchr(v, '=') : NULL;
    const size_t klen = eq ? (size_t)(eq - v) : 0;
    if (!eq || klen == 0 || klen > SERVE_LABEL_KEY_MAX || strspn(v, "abcdefghijklmnopqrstuvwxyz"
                                                             "0123456789_") != klen)
        return bad("--label", v, "KEY=VALUE with KEY of 1 to 32 of a-z, 0-9 and _");
    if (!eq[1] || strlen(eq + 1) > 200)
        return bad("--label", v, "the value is empty or longer than 200 characters");
    for (const unsigned char *c = (const unsigned char *)eq + 1; *c; c++)
        if (*c < 0x20 || *c == 0x7f) /* it goes into CSV rows and plot scripts as it is */
            return bad("--label", v, "the value holds a control character");
    for (size_t i = 0; i < sizeof(own_label_keys) / sizeof(own_label_keys[0]); i++)
        if (strlen(own_label_keys[i]) == klen && !strncmp(v, own_label_keys[i], klen))
            return bad("--label", v, "serve writes this label itself");
    for (uint32_t i = 0; i < o->nlabels; i++)
        if (strlen(o->labels[i].key) == klen && !strncmp(v, o->labels[i].key, klen))
            return bad("--label", v, "this key was given already");
    if (o->nlabels == SERVE_LABELS_MAX)
        return bad("--label", v, "at most 16 labels");
    struct serve_label *l = &o->labels[o->nlabels++];
    snprintf(l->key, sizeof(l->key), "%.*s", (int)klen, v);
    l->value = eq + 1;
    return 0;
}

static int apply_serve_opt(void *ctx, const struct npuctl_opt *opt, const char *v, char *err,
                           size_t errlen)
{
    struct serve_opts *o = ctx;
    (void)err, (void)errlen; /* the refusals are printed */
    int k = 0;
    switch ((enum serve_opt)opt->id) {
    case SV_TRACE: o->trace = v; return 0;
    case SV_OUT: o->out = v; return 0;
    case SV_ENGINE_TRACE: o->engine_trace = true; return 0;
    case SV_FORCE: o->force = true; return 0;
    case SV_LABEL: return parse_label(o, v);
    case SV_THREADS: /* checked now, used by the run (serve_run.c) */
        if (npuctl_opt_word_index(opt, v) < 0)
            return bad(opt->name, v, "single, multi or auto");
        o->threads = v;
        return 0;
    case SV_LAYER_REUSE:
        if ((k = npuctl_opt_word_index(opt, v)) < 0)
            return bad(opt->name, v, "off, on, shapes or tiles");
        o->layer_reuse = (enum serve_reuse)k;
        return 0;
    default: return apply_run_opt(o, opt, v);
    }
}

#define C_SERVE NPUCTL_CMD_BIT(NPUCTL_CMD_SERVE)

static const struct npuctl_opt serve_table[] = {
    { "--trace", NULL, "FILE", NULL,
      "the request trace, JSON lines (docs/traces.md; npuctl trace import converts "
      "published CSV traces; default: models/traces/tiny-16.jsonl of the source tree)",
      SV_TRACE, C_SERVE },
    { "--out", NULL, "DIR", "serve-out",
      "the run's directory: summary.json, requests.csv, tokens.csv, trace.json, console.log "
      "(docs/outputs.md); refused if it holds an earlier run's, unless --force",
      SV_OUT, C_SERVE },
    { "--force", NULL, NULL, NULL,
      "replace an earlier run's outputs in --out (they are removed before this run starts)",
      SV_FORCE, C_SERVE },
    { "--label", NULL, "KEY=VALUE", NULL,
      "a label of the run in summary.json and trace.json, beside serve's own (chip, model, "
      "sched ...); repeatable; `run` titles the run in compare, plot and sweep tables",
      SV_LABEL, C_SERVE },
    { "--seed", NULL, "N", "1", "seed of the prompt ids where the trace has none", SV_SEED,
      C_SERVE },
    { "--slo-ttft-ms", NULL, "MS", "10000",
      "SLO on the time to the first token; 0: no limit", SV_SLO_TTFT, C_SERVE },
    { "--slo-tbt-ms", NULL, "MS", "125", "SLO on every time between tokens; 0: no limit",
      SV_SLO_TBT, C_SERVE },
    { "--timeout", NULL, "SECONDS", "600",
      "wall-clock limit of the run (exit 124, the outputs still written); 0: none",
      SV_TIMEOUT, C_SERVE },
    { "--threads", NULL, "single|multi|auto", "auto",
      "TCG threading; auto: single on a host of at most 2 CPUs, else multi", SV_THREADS,
      C_SERVE },
    { "--watchdog-ms", NULL, "N", NULL,
      "machine watchdog: a hart running N ms without waiting fails (default: the "
      "machine's)", SV_WATCHDOG, C_SERVE },
    { "--engine-trace", NULL, NULL, NULL,
      "each core's engine busy time per iteration, in trace.json", SV_ENGINE_TRACE, C_SERVE },
    { "--layer-reuse", NULL, "off|on|shapes|tiles", "off",
      "performance mode: time one layer of each run of alike layers and replay the others "
      "(on), also layers recorded in earlier iterations (shapes), also alike tiles inside "
      "a layer (tiles); docs/images.md, \"Layer reuse\"", SV_LAYER_REUSE, C_SERVE },
    { "--num-prompts", NULL, "N", NULL,
      "serve only the trace's first N requests (default: all; vLLM's --num-prompts)",
      SV_NUM_PROMPTS, C_SERVE },
    { "--request-rate", NULL, "R|inf", NULL,
      "re-time the trace's requests at R per second, gaps drawn from --seed as `trace gen` "
      "draws them (Poisson, or gamma with --burstiness); inf: all at once (default: the "
      "trace's own timestamps)", SV_REQUEST_RATE, C_SERVE },
    { "--burstiness", NULL, "B", "1",
      "with --request-rate: the gaps' gamma shape, 1 Poisson, below 1 burstier (vLLM's "
      "--burstiness)", SV_BURSTINESS, C_SERVE },
    { "--max-concurrency", NULL, "C", NULL,
      "at most C requests in flight: a request arriving beyond them is sent when one ends, "
      "its TTFT counted from then (vLLM's --max-concurrency; default: no limit)",
      SV_MAX_CONCURRENCY, C_SERVE },
    { "--inject-fault", NULL, "KIND:CORE:ROUND", NULL,
      "a fault on CORE at its ROUND-th round (from 1), KIND trap, deadlock, timeout or "
      "spin (docs/serving.md, \"Faults\")", SV_FAULT, C_SERVE },
};

static const struct npuctl_opt sched_table[] = {
    { "--sched", NULL, "static|continuous|chunked|layered|layered-chunked|pd-fusion|pd-disagg",
      "chunked", "the scheduler (docs/serving.md, section 4)", SV_SCHED, C_SERVE },
    { "--chunk", NULL, "N", "512",
      "prefill chunk, tokens (chunked: the token budget; layered-chunked, pd-fusion, "
      "pd-disagg)", SV_CHUNK, C_SERVE },
    { "--groups", NULL, "N|adaptive", "adaptive",
      "layered, layered-chunked: layer groups of a prefill cycle; adaptive: from "
      "--group-tokens", SV_GROUPS, C_SERVE },
    { "--group-tokens", NULL, "N", "512",
      "layered, adaptive groups: prompt tokens per layer group", SV_GROUP_TOKENS, C_SERVE },
    { "--budget", NULL, "N",  NULL,
      "pd-fusion: units of an iteration, a decode costing 1 (default 256)", SV_BUDGET,
      C_SERVE },
    { "--prefill-units", NULL, "N", NULL,
      "pd-fusion: units of a prefill chunk (default 64)", SV_PREFILL_UNITS, C_SERVE },
    { "--prefill-instances", NULL, "N", NULL,
      "pd-disagg: instances of the plan that prefill, the others decode (default: half of "
      "--instances)", SV_PREFILL_INSTANCES, C_SERVE },
    { "--prefix-cache", NULL, "off|on", "off",
      "reuse the KV blocks of prompts whose first hash blocks (the trace's hash_ids) match "
      "an earlier prompt's (docs/serving.md, section 3a; pd-disagg: on the prefill instances)",
      SV_PREFIX_CACHE, C_SERVE },
    { "--hash-block", NULL, "N", "512",
      "prompt tokens one of the trace's hash_ids names (Mooncake's 512); synthetic prompt "
      "ids follow the hash ids either way", SV_HASH_BLOCK, C_SERVE },
    { "--dispatch", NULL, "rr|load|prefix", "rr",
      "--roles disagg: how arriving requests are dealt to the attention replicas: round "
      "robin, the least loaded (tokens left to run), or the least loaded counting the "
      "prompt tokens each replica's prefix cache would save", SV_DISPATCH, C_SERVE },
    { "--decode-cores", NULL, "SPEC", NULL,
      "pd-disagg: other engine sizes for the decode instances' cores, "
      "sa=RxC,sram_bytes_per_cycle=N,vector_lanes=N,hbm_gbps=N,cost=X,power=MW (any of "
      "them; default: the chip's; cost is written as alt_core_cost and serve does not use "
      "it; power as alt_static_mw_per_core, their static power in the energy report)",
      SV_DECODE_CORES, C_SERVE },
};

static const struct npuctl_opt_group serve_group = {
    "serve options", serve_table, sizeof(serve_table) / sizeof(serve_table[0]),
    apply_serve_opt,
};
static const struct npuctl_opt_group sched_group = {
    "scheduler options", sched_table, sizeof(sched_table) / sizeof(sched_table[0]),
    apply_sched_opt,
};

static void set_defaults(struct serve_opts *o)
{
    static char trace[NPUCTL_PATH_MAX];
    snprintf(trace, sizeof(trace), "%s/" DEFAULT_TRACE, npuctl_get_dir(NPUCTL_DIR_SOURCE));
    *o = (struct serve_opts){ .trace = trace, .out = "serve-out", .threads = "auto",
                              .timeout_s = 600, .seed = 1, .load = { .burstiness = 1 },
                              .slo = { .ttft_ms = 10000, .tbt_ms = 125 } };
    npuctl_image_opts_init(&o->image);
    o->image.model = NPUCTL_SERVE_DEFAULT_MODEL;
    /* without --tp, the tiny models (128 wide) on 4 cores (1x4 at (0,0)), the others on
       every core (the planner's default) */
    o->image.narrow_tp = 4;
    o->image.req.kv_sram_blocks = -1;  /* an SRAM block pool, the ring in HBM */
    o->sched = (struct rt_sched_params){ .kind = RT_SCHED_CHUNKED, .chunk = 512,
                                         .group_tokens = 512 };
    o->hash_block = 512; /* Mooncake's traces */
}

/* Defaults, then the options; 0 or a refusal (in err, or printed). */
static int parse_only(int argc, char **argv, struct serve_opts *o, char *err, size_t errlen)
{
    void *const ctx[NPUCTL_GROUPS_MAX] = { o, o, &o->image };
    struct npuctl_args args;
    set_defaults(o);
    int rc = npuctl_opts_parse(&npuctl_spec_serve, ctx, argc, argv, &args, err, errlen);
    o->help = args.help;
    npuctl_args_free(&args);
    return rc;
}

static int parse_only_serve(int argc, char **argv, char *err, size_t errlen)
{
    static struct serve_opts o; /* large: not on the stack */
    return parse_only(argc, argv, &o, err, errlen);
}

int serve_opts_parse(int argc, char **argv, struct serve_opts *o)
{
    char err[NPUCTL_ERR_MAX];
    if (parse_only(argc, argv, o, err, sizeof(err))) {
        if (err[0])
            npuctl_print_error("%s", err);
        return NPUCTL_EXIT_USAGE;
    }
    if (o->help) {
        npuctl_opts_print_help(stdout, &npuctl_spec_serve);
        return 0;
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

const struct npuctl_cmd_spec npuctl_spec_serve = {
    "serve", NPUCTL_CMD_SERVE, "npuctl serve [OPTIONS]\n",
    "serve a request trace on the emulated chip and write the run's outputs",
    "  Serve a request trace on the emulated chip (docs/serving.md): read and check the\n"
    "  trace, plan and build the model image, check the scheduler against the plan, run\n"
    "  the serve firmware with the console going to DIR/console.log, then write\n"
    "  DIR/summary.json (vLLM's keys), requests.csv, tokens.csv and trace.json (Perfetto)\n"
    "  and print the report (docs/outputs.md). Exit status: 0 when every request ended\n"
    "  finished or rejected, 1 when the run failed or ended incomplete on the chip, 2 for\n"
    "  bad input (named before the run), 124 on --timeout.\n",
    { &serve_group, &sched_group, &npuctl_plan_group }, false, 0, parse_only_serve,
};

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
