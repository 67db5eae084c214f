/* SPDX-License-Identifier: MIT */
/*
 * npuctl trace gen / import / show: their option tables and usages (docs/traces.md), and
 * the parse of gen's and import's arguments into what cmd_trace.c runs.
 */
#define _POSIX_C_SOURCE 200809L
#include "trace_opts.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu_limits.h"
#include "npuctl.h"
#include "npu_enums.h"
#include "opts.h"

enum {
    G_COUNT, G_RATE, G_ARRIVAL, G_CV, G_LENGTHS, G_SEED, G_OUT, G_PREFIXES, G_PREFIX_TOKENS,
    G_PREFIX_SHARE, G_HASH_BLOCK,
    G_OV, /* G_OV + TRACE_OV_COUNT x (0 input, 1 output) + field: the overrides */
};

/* A finite number; positive unless zero_ok. */
static int parse_num(const char *opt, const char *v, bool zero_ok, double *out)
{
    double x = 0;
    if (npuctl_parse_real(opt, v, 0.0, DBL_MAX, &x))
        return NPUCTL_EXIT_USAGE;
    if (x == 0 && !zero_ok)
        return npuctl_usage_error("%s '%s': must be more than 0", opt, v);
    *out = x;
    return 0;
}

/* --input-mean ... --output-max: a length in tokens for min and max, else a number (the
   mean more than 0). */
static int parse_override(struct trace_gen_opts *o, const struct npuctl_opt *opt, const char *v)
{
    int which = (opt->id - G_OV) / TRACE_OV_COUNT, k = (opt->id - G_OV) % TRACE_OV_COUNT;
    double x = 0;
    uint32_t n = 0;
    int rc;
    if (k >= TRACE_OV_MIN)
        rc = npuctl_parse_u32(opt->name, v, 0, NPU_REQUEST_TOKENS_MAX, &n), x = n;
    else
        rc = parse_num(opt->name, v, k != TRACE_OV_MEAN, &x);
    if (rc == 0)
        o->ov[which][k] = x;
    return rc;
}

static int apply_gen_opt(void *ctx, const struct npuctl_opt *opt, const char *v, char *err,
                         size_t errlen)
{
    struct trace_gen_opts *o = ctx;
    const char *name = opt->name;
    (void)err, (void)errlen; /* the number parsers print their refusals */
    switch (opt->id) {
    case G_COUNT:
        o->count_set = true;
        return npuctl_parse_u32(name, v, 1, NPU_TRACE_REQUESTS_MAX, &o->p.count);
    case G_RATE: o->rate_set = true; return parse_num(name, v, false, &o->p.rate);
    case G_CV: o->cv_set = true; return parse_num(name, v, false, &o->p.cv);
    case G_SEED: return npuctl_parse_uint(name, v, 0, UINT64_MAX, &o->p.seed);
    case G_LENGTHS: o->lengths = v; return 0;
    case G_PREFIXES: return npuctl_parse_u32(name, v, 1, NPU_TRACE_REQUESTS_MAX, &o->p.prefixes);
    case G_PREFIX_TOKENS:
        return npuctl_parse_u32(name, v, 1, NPU_REQUEST_TOKENS_MAX, &o->p.prefix_tokens);
    case G_PREFIX_SHARE: return npuctl_parse_real(name, v, 0.0, 1.0, &o->p.prefix_share);
    case G_HASH_BLOCK:
        return npuctl_parse_u32(name, v, 1, NPU_REQUEST_TOKENS_MAX, &o->p.hash_block);
    case G_OUT: o->out = v; return 0;
    case G_ARRIVAL:
        if (strcmp(v, "poisson") && strcmp(v, "gamma"))
            return npuctl_usage_error("--arrival: unknown value '%s' (poisson or gamma)", v);
        o->p.arrival = strcmp(v, "gamma") ? RT_ARRIVAL_POISSON : RT_ARRIVAL_GAMMA;
        return 0;
    default: return parse_override(o, opt, v);
    }
}

#define C_GEN NPUCTL_CMD_BIT(NPUCTL_CMD_TRACE_GEN)
#define C_IMPORT NPUCTL_CMD_BIT(NPUCTL_CMD_TRACE_IMPORT)
/* side: 0 input, 1 output */
#define OVERRIDE(dir, side, field, metavar, what, k)                                         \
    { "--" #dir "-" #field, NULL, metavar, NULL,                                             \
      "the " #dir " lengths' " what " (default: the preset's)",                             \
      G_OV + (side) * TRACE_OV_COUNT + (k), C_GEN }

static const struct npuctl_opt gen_table[] = {
    { "--count", NULL, "N", NULL, "requests; required", G_COUNT, C_GEN },
    { "--rate", NULL, "R", NULL, "mean arrival rate, requests per second; required", G_RATE,
      C_GEN },
    { "--arrival", NULL, "poisson|gamma", "poisson", "arrival process", G_ARRIVAL, C_GEN },
    { "--cv", NULL, "C", NULL,
      "gamma: coefficient of variation of the gaps (required with gamma)", G_CV, C_GEN },
    { "--lengths", NULL, "sharegpt|arxiv|tiny", "sharegpt",
      "length preset; the --input-* and --output-* options override its fields (log-normal "
      "fitted to mean and std, clamped to min..max)", G_LENGTHS, C_GEN },
    OVERRIDE(input, 0, mean, "M", "mean", TRACE_OV_MEAN),
    OVERRIDE(input, 0, std, "S", "standard deviation", TRACE_OV_STD),
    OVERRIDE(input, 0, p90, "P", "90th percentile", TRACE_OV_P90),
    OVERRIDE(input, 0, min, "A", "least value", TRACE_OV_MIN),
    OVERRIDE(input, 0, max, "B", "largest value", TRACE_OV_MAX),
    OVERRIDE(output, 1, mean, "M", "mean", TRACE_OV_MEAN),
    OVERRIDE(output, 1, std, "S", "standard deviation", TRACE_OV_STD),
    OVERRIDE(output, 1, p90, "P", "90th percentile", TRACE_OV_P90),
    OVERRIDE(output, 1, min, "A", "least value", TRACE_OV_MIN),
    OVERRIDE(output, 1, max, "B", "largest value", TRACE_OV_MAX),
    { "--prefixes", NULL, "G", NULL,
      "shared prompt prefixes (prefix caching): --prefix-share of the requests begin with "
      "one of G prefixes of --prefix-tokens, and every request gets hash_ids (default: "
      "none)", G_PREFIXES, C_GEN },
    { "--prefix-tokens", NULL, "N", NULL,
      "with --prefixes: tokens of each shared prefix, added to the drawn input length",
      G_PREFIX_TOKENS, C_GEN },
    { "--prefix-share", NULL, "F", "1", "with --prefixes: the share of requests that have one",
      G_PREFIX_SHARE, C_GEN },
    { "--hash-block", NULL, "N", "512",
      "with --prefixes: tokens per hash id (Mooncake's 512; serve's --hash-block must match)",
      G_HASH_BLOCK, C_GEN },
    { "--seed", NULL, "S", "1", "seed: the same options give the same file on every machine",
      G_SEED, C_GEN },
    { "-o", "--out", "FILE", NULL, "the trace, JSON lines ('-': standard output); required",
      G_OUT, C_GEN },
};

static const struct npuctl_opt_group gen_group = {
    "trace gen options", gen_table, sizeof(gen_table) / sizeof(gen_table[0]), apply_gen_opt,
};

static void apply_overrides(const double *ov, struct rt_len_dist *d)
{
    if (!isnan(ov[TRACE_OV_MEAN])) d->mean = ov[TRACE_OV_MEAN];
    if (!isnan(ov[TRACE_OV_STD])) d->std = ov[TRACE_OV_STD];
    if (!isnan(ov[TRACE_OV_P90])) d->p90 = ov[TRACE_OV_P90];
    if (!isnan(ov[TRACE_OV_MIN])) d->min = (uint32_t)ov[TRACE_OV_MIN];
    if (!isnan(ov[TRACE_OV_MAX])) d->max = (uint32_t)ov[TRACE_OV_MAX];
}

/* Defaults, then the options (no check of what is required). */
static int parse_gen_only(int argc, char **argv, struct trace_gen_opts *o, bool *help,
                          char *err, size_t errlen)
{
    void *const ctx[NPUCTL_GROUPS_MAX] = { o };
    struct npuctl_args args;
    *o = (struct trace_gen_opts){ .lengths = "sharegpt", .p.seed = 1, .p.hash_block = 512,
                                  .p.prefix_share = 1.0 };
    for (int w = 0; w < 2; w++)
        for (int k = 0; k < TRACE_OV_COUNT; k++)
            o->ov[w][k] = NAN;
    int rc = npuctl_opts_parse(&npuctl_spec_trace_gen, ctx, argc, argv, &args, err, errlen);
    *help = args.help;
    npuctl_args_free(&args);
    return rc;
}

/* What gen needs beyond each option's own value. */
static int check_gen(struct trace_gen_opts *o)
{
    if (!o->count_set || !o->rate_set || !o->out)
        return npuctl_usage_error("trace gen: %s is required", !o->count_set  ? "--count N"
                                                               : !o->rate_set ? "--rate R"
                                                                              : "-o FILE");
    if (o->p.arrival == RT_ARRIVAL_GAMMA && !o->cv_set)
        return npuctl_usage_error(
            "--arrival gamma needs --cv C (the gaps' coefficient of variation)");
    if (o->p.arrival == RT_ARRIVAL_POISSON && o->cv_set)
        return npuctl_usage_error("--cv applies to --arrival gamma only (Poisson gaps have cv 1)");
    if (!o->p.prefixes != !o->p.prefix_tokens)
        return npuctl_usage_error("--prefixes G and --prefix-tokens N go together");
    if (trace_len_preset(o->lengths, &o->p.input, &o->p.output))
        return npuctl_usage_error("--lengths: unknown preset '%s' (sharegpt, arxiv or tiny)",
                                  o->lengths);
    apply_overrides(o->ov[0], &o->p.input);
    apply_overrides(o->ov[1], &o->p.output);
    return 0;
}

int trace_gen_parse(int argc, char **argv, struct trace_gen_opts *o, bool *done)
{
    char err[NPUCTL_ERR_MAX];
    bool help;
    *done = true;
    if (parse_gen_only(argc, argv, o, &help, err, sizeof(err)))
        return err[0] ? npuctl_usage_error("%s", err) : NPUCTL_EXIT_USAGE;
    if (help) {
        npuctl_opts_print_help(stdout, &npuctl_spec_trace_gen);
        return 0;
    }
    int rc = check_gen(o);
    *done = rc != 0;
    return rc;
}

/* ---- import */

enum { I_FORMAT, I_LIMIT, I_OUT, I_WHERE, I_WINDOW, I_TIME_SCALE };

/* A number of seconds: digits with an optional fraction, nothing else. */
static bool parse_seconds(const char *s, size_t len, double *out)
{
    char buf[32], *end;
    if (len == 0 || len >= sizeof(buf) || strspn(s, "0123456789.") < len)
        return false;
    snprintf(buf, sizeof(buf), "%.*s", (int)len, s);
    *out = strtod(buf, &end);
    return *end == '\0' && *out <= 1e9;
}

/* --window FROM:TO in seconds from the trace's start (TO empty: to the end). */
static int parse_window(struct rt_import_filter *f, const char *v, char *err, size_t errlen)
{
    const char *colon = v ? strchr(v, ':') : NULL;
    f->to_s = INFINITY;
    if (!colon || !parse_seconds(v, (size_t)(colon - v), &f->from_s) ||
        (colon[1] && !parse_seconds(colon + 1, strlen(colon + 1), &f->to_s))) {
        snprintf(err, errlen, "--window %s: FROM:TO, seconds from the trace's start (TO may "
                 "be left out)", v ? v : "");
        return NPU_ERR_INVAL;
    }
    if (f->to_s <= f->from_s) {
        snprintf(err, errlen, "--window %s: TO must be after FROM", v);
        return NPU_ERR_INVAL;
    }
    return 0;
}

/* --where COLUMN=VALUE, repeatable. */
static int parse_where(struct rt_import_filter *f, const char *v, char *err, size_t errlen)
{
    const char *eq = v ? strchr(v, '=') : NULL;
    if (!eq || eq == v) {
        snprintf(err, errlen, "--where %s: COLUMN=VALUE (a CSV column's header name)", v);
        return NPU_ERR_INVAL;
    }
    if (f->nwhere == RT_IMPORT_WHERE_MAX) {
        snprintf(err, errlen, "--where: at most %u", RT_IMPORT_WHERE_MAX);
        return NPU_ERR_RANGE;
    }
    static char cols[RT_IMPORT_WHERE_MAX][128];
    snprintf(cols[f->nwhere], sizeof(cols[0]), "%.*s", (int)(eq - v), v);
    f->where_col[f->nwhere] = cols[f->nwhere];
    f->where_val[f->nwhere++] = eq + 1;
    return 0;
}

static int apply_import_opt(void *ctx, const struct npuctl_opt *opt, const char *v, char *err,
                            size_t errlen)
{
    struct trace_import_opts *o = ctx;
    switch (opt->id) {
    case I_LIMIT:
        return npuctl_parse_uint(opt->name, v, 1, NPU_TRACE_REQUESTS_MAX, &o->limit);
    case I_FORMAT: o->format = v; return 0;
    case I_WHERE: return parse_where(&o->flt, v, err, errlen);
    case I_WINDOW: return parse_window(&o->flt, v, err, errlen);
    case I_TIME_SCALE:
        return npuctl_parse_real(opt->name, v, 1e-6, 1e6, &o->flt.time_scale);
    default: o->out = v; return 0;
    }
}

static const struct npuctl_opt import_table[] = {
    { "--format", NULL, "azure|burstgpt|vidur|mooncake", NULL,
      "the file's layout (CSV; mooncake: its JSON lines, the native format); required",
      I_FORMAT,
      C_IMPORT },
    { "--limit", NULL, "N", NULL,
      "keep the first N rows that pass the filters only (default: every row)", I_LIMIT,
      C_IMPORT },
    { "--where", NULL, "COLUMN=VALUE", NULL,
      "keep the rows whose CSV column COLUMN is VALUE (repeatable: all must hold; BurstGPT: "
      "\"Model=ChatGPT\", \"Log Type=Conversation log\")", I_WHERE, C_IMPORT },
    { "--window", NULL, "FROM:TO", NULL,
      "keep the rows from FROM to TO seconds after the trace's start (TO empty: to the end)",
      I_WINDOW, C_IMPORT },
    { "--time-scale", NULL, "X", "1",
      "multiply the kept rows' times by X (0.5: twice the rate)", I_TIME_SCALE, C_IMPORT },
    { "-o", "--out", "FILE", NULL, "the trace, JSON lines ('-': standard output); required",
      I_OUT, C_IMPORT },
};

static const struct npuctl_opt_group import_group = {
    "trace import options", import_table, sizeof(import_table) / sizeof(import_table[0]),
    apply_import_opt,
};

static int parse_import_only(int argc, char **argv, struct trace_import_opts *o, bool *help,
                             char *err, size_t errlen)
{
    void *const ctx[NPUCTL_GROUPS_MAX] = { o };
    struct npuctl_args args;
    *o = (struct trace_import_opts){ .flt = trace_filter_all() };
    int rc = npuctl_opts_parse(&npuctl_spec_trace_import, ctx, argc, argv, &args, err,
                               errlen);
    *help = args.help;
    o->in = rc == 0 && args.npos > 0 ? args.pos[0] : NULL;
    npuctl_args_free(&args);
    return rc;
}

int trace_import_parse(int argc, char **argv, struct trace_import_opts *o, bool *done)
{
    char err[NPUCTL_ERR_MAX];
    bool help;
    *done = true;
    if (parse_import_only(argc, argv, o, &help, err, sizeof(err)))
        return err[0] ? npuctl_usage_error("%s", err) : NPUCTL_EXIT_USAGE;
    if (help) {
        npuctl_opts_print_help(stdout, &npuctl_spec_trace_import);
        return 0;
    }
    if (!o->format || !o->in || !o->out)
        return npuctl_usage_error("trace import: %s is required",
                                  !o->format ? "--format azure|burstgpt|vidur"
                                  : !o->in   ? "the input file IN"
                                             : "-o FILE");
    *done = false;
    return 0;
}

/* ---- the usages */

static int parse_only_gen(int argc, char **argv, char *err, size_t errlen)
{
    struct trace_gen_opts o;
    bool help;
    return parse_gen_only(argc, argv, &o, &help, err, errlen);
}

static int parse_only_import(int argc, char **argv, char *err, size_t errlen)
{
    struct trace_import_opts o;
    bool help;
    return parse_import_only(argc, argv, &o, &help, err, errlen);
}

static int parse_only_show(int argc, char **argv, char *err, size_t errlen)
{
    struct npuctl_args args;
    int rc = npuctl_opts_parse(&npuctl_spec_trace_show, NULL, argc, argv, &args, err, errlen);
    npuctl_args_free(&args);
    return rc;
}

const struct npuctl_cmd_spec npuctl_spec_trace_gen = {
    "trace gen", NPUCTL_CMD_TRACE_GEN, "npuctl trace gen --count N --rate R [OPTIONS] -o FILE\n",
    "generate a seeded request trace",
    "  Generate a trace (seeded; the same options give the same file on every machine).\n",
    { &gen_group }, false, 0, parse_only_gen,
};

const struct npuctl_cmd_spec npuctl_spec_trace_import = {
    "trace import", NPUCTL_CMD_TRACE_IMPORT,
    "npuctl trace import --format azure|burstgpt|vidur|mooncake IN [OPTIONS] -o FILE\n",
    "convert a published trace (CSV) to JSON lines",
    "  Convert a published trace (CSV, or Mooncake's JSON lines) to JSON lines: the rows\n"
    "  that pass --where and --window, up to --limit, timed from the first of them and\n"
    "  scaled by --time-scale (docs/traces.md, \"Importers\").\n",
    { &import_group }, false, 1, parse_only_import,
};

const struct npuctl_cmd_spec npuctl_spec_trace_show = {
    "trace show", NPUCTL_CMD_TRACE_SHOW, "npuctl trace show FILE\n",
    "summarise a trace",
    "  Requests, span, mean rate, and mean, std and p90 of the input and output lengths.\n",
    { NULL }, false, 1, parse_only_show,
};
