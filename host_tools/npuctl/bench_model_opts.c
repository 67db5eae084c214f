/* SPDX-License-Identifier: MIT */
/*
 * npuctl bench model's options (docs/benchmarks.md, "bench model"): its own table and the
 * plan options less those each shape sets (the mode and the iteration's shape), and its
 * usage.
 */
#define _POSIX_C_SOURCE 200809L
#include <string.h>

#include "chip_engine_log.h"
#include "cmd_bench.h"
#include "npu_image.h"
#include "npuctl.h"
#include "opts.h"
#include "serve_opts.h"

enum { BM_OUT, BM_SHAPES, BM_TIMEOUT, BM_SLO, BM_EXPERT_CORES, BM_ENGINE_LOG };

static int apply_bench_model_opt(void *ctx, const struct npuctl_opt *opt, const char *v,
                                 char *err, size_t errlen)
{
    struct bench_model_opts *o = ctx;
    (void)err, (void)errlen; /* the number parsers print their refusals */
    switch (opt->id) {
    case BM_OUT: o->out = v; return 0;
    case BM_SHAPES: o->only = v; return 0;
    case BM_TIMEOUT: return npuctl_parse_u32(opt->name, v, 1, NPUCTL_TIMEOUT_MAX_S,
                                             &o->timeout_s);
    case BM_SLO: return npuctl_parse_u32(opt->name, v, 1, 1u << 24, &o->slo_ms);
    case BM_EXPERT_CORES: o->expert_cores = v; return 0;
    default:
        o->engine_log = true;
        o->engine_log_core = CHIP_ENGINE_LOG_ALL;
        return strcmp(v, "all") == 0
                   ? 0 : npuctl_parse_u32(opt->name, v, 0, CHIP_CORES_MAX - 1,
                                          &o->engine_log_core);
    }
}

#define C_BMODEL NPUCTL_CMD_BIT(NPUCTL_CMD_BENCH_MODEL)
static const struct npuctl_opt bench_model_table[] = {
    { "--shapes", NULL, "LIST", NULL,
      "the shapes to run, comma-separated (default: all of prefill-512, prefill-512-ctx8k, "
      "prefill-2048, decode-b8-ctx4k, decode-b64-ctx1k)", BM_SHAPES, C_BMODEL },
    { "--out", NULL, "DIR", NULL,
      "keep the images, consoles and stats files in DIR (default: a temporary directory, "
      "removed)", BM_OUT, C_BMODEL },
    { "--timeout", NULL, "SECONDS", "3600", "wall-clock limit of each shape's run",
      BM_TIMEOUT, C_BMODEL },
    { "--slo-ms", NULL, "MS", "150",
      "--search disagg: the TBT SLO an iteration must meet (MegaScale-Infer's 150 ms)",
      BM_SLO, C_BMODEL },
    { "--expert-cores", NULL, "SPEC", NULL,
      "--search disagg on a heterogeneous mesh: the expert band's cores with other engines "
      "and cost (SPEC: sa=RxC, sram_bytes_per_cycle, vector_lanes, hbm_gbps, cost, power, "
      "as serve's --decode-cores); also runs every core of that kind, and prints tokens/s per "
      "unit of the chip's cost (core_cost, alt_core_cost)", BM_EXPERT_CORES, C_BMODEL },
    { "--engine-log", NULL, "all|CORE", NULL,
      "also write DIR/SHAPE.engines.json (needs --out): every descriptor the engines ran (of "
      "every core, or of CORE), a Perfetto / chrome://tracing trace (docs/benchmarks.md)",
      BM_ENGINE_LOG, C_BMODEL },
};
static const struct npuctl_opt_group bench_model_group = {
    "bench model options", bench_model_table,
    sizeof(bench_model_table) / sizeof(bench_model_table[0]), apply_bench_model_opt,
};

/* Defaults, then the options (no check of what is required). */
static int parse_only(int argc, char **argv, struct bench_model_opts *o, bool *help, char *err,
                      size_t errlen)
{
    void *const ctx[NPUCTL_GROUPS_MAX] = { o, &o->image };
    struct npuctl_args args;
    *o = (struct bench_model_opts){ .timeout_s = 3600, .slo_ms = 150 };
    npuctl_image_opts_init(&o->image);
    o->image.req.mode = NPU_IMAGE_PERFORMANCE;
    int rc = npuctl_opts_parse(&npuctl_spec_bench_model, ctx, argc, argv, &args, err, errlen);
    *help = args.help;
    npuctl_args_free(&args);
    return rc;
}

static int parse_only_bench_model(int argc, char **argv, char *err, size_t errlen)
{
    static struct bench_model_opts o; /* large: not on the stack */
    bool help;
    return parse_only(argc, argv, &o, &help, err, errlen);
}

int bench_model_parse(int argc, char **argv, struct bench_model_opts *o, bool *done)
{
    char err[NPUCTL_ERR_MAX];
    bool help;
    *done = true;
    if (parse_only(argc, argv, o, &help, err, sizeof(err)))
        return err[0] ? npuctl_usage_error("%s", err) : NPUCTL_EXIT_USAGE;
    if (help) {
        npuctl_opts_print_help(stdout, &npuctl_spec_bench_model);
        return 0;
    }
    if (!o->image.model)
        return npuctl_usage_error("bench model: --model NAME|PATH is required (npuctl "
                                  "models lists them)");
    const struct npu_plan_request *q = &o->image.req;
    if (o->image.search && (q->instances || q->disagg || q->micro_batches > 1 || q->tp))
        return npuctl_usage_error("bench model --search disagg: it chooses --instances, "
                                  "--roles, --micro-batches and --tp itself");
    if (o->expert_cores && !o->image.search)
        return npuctl_usage_error("bench model --expert-cores: with --search disagg only");
    struct serve_hetero spec;
    if (o->expert_cores && hetero_parse("--expert-cores", o->expert_cores, &spec))
        return NPUCTL_EXIT_USAGE; /* it said why */
    if (o->engine_log && !o->out)
        return npuctl_usage_error("bench model: --engine-log needs --out DIR (the logs are "
                                  "kept there)");
    *done = false;
    return 0;
}

const struct npuctl_cmd_spec npuctl_spec_bench_model = {
    "bench model", NPUCTL_CMD_BENCH_MODEL,
    "npuctl bench model --model NAME|PATH [--chip NAME|PATH] [--shapes LIST] [OPTIONS]\n",
    "step shapes of a model against the whole chip's lower bound",
    "  Named step shapes in performance mode, one iteration each: prefill-512,\n"
    "  prefill-512-ctx8k, prefill-2048, decode-b8-ctx4k, decode-b64-ctx1k. Prints chip\n"
    "  time, the whole-chip lower bound (model and chip configs only: matrix FLOPs at\n"
    "  peak, least HBM bytes beyond the chip's SRAM), their ratio, each engine kind's\n"
    "  busy share, HBM bytes against the least, and rank 0's categories. The plan options\n"
    "  are plan's, less those each shape sets: --mode, --max-batch, --max-tokens and\n"
    "  --max-seq. With --search disagg, each shape on the colocated plan and on every\n"
    "  disaggregated plan the firmware runs (I equal bands: I - 1 attention replicas\n"
    "  and the experts; m = 1..4 micro-batches), measured beside the latency model's\n"
    "  estimate, and the fastest within --slo-ms.\n",
    { &bench_model_group, &npuctl_plan_group }, false, 0, parse_only_bench_model,
};
