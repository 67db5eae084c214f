/* SPDX-License-Identifier: MIT */
/*
 * npuctl trace gen|import|show (docs/traces.md): writes request traces in the native
 * JSON-lines format and summarises them. Exit status 0, or 2 for a bad argument or file
 * (the message names the option, or the file and line).
 */
#define _POSIX_C_SOURCE 200809L
#include "npuctl.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu_limits.h"
#include "rt/trace.h"

static const char trace_usage[] =
    "usage: npuctl trace gen|import|show ...\n"
    "npuctl trace gen --count N --rate R [OPTIONS] -o FILE\n"
    "  Generate a trace (seeded; the same options give the same file on every machine).\n"
    "  --count N             requests\n"
    "  --rate R              mean arrival rate, requests per second\n"
    "  --arrival poisson|gamma  arrival process (default poisson)\n"
    "  --cv C                gamma: coefficient of variation of the gaps (required)\n"
    "  --lengths sharegpt|arxiv|tiny  length preset (default sharegpt)\n"
    "  --input-mean M --input-std S --input-p90 P --input-min A --input-max B\n"
    "  --output-mean M --output-std S --output-p90 P --output-min A --output-max B\n"
    "                        override fields of the preset (log-normal fitted to mean, std)\n"
    "  --seed S              (default 1)\n"
    "  -o FILE               the trace, JSON lines ('-': standard output)\n"
    "npuctl trace import --format azure|burstgpt|vidur IN [--limit N] -o FILE\n"
    "  Convert a published trace (CSV) to JSON lines; timestamps relative to the first row.\n"
    "  --limit N             keep the first N rows only\n"
    "npuctl trace show FILE\n"
    "  Requests, span, mean rate, and mean, std and p90 of the input and output lengths.\n";

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

/* ---- show: what a trace holds */

struct len_stats {
    double mean, std;
    uint32_t p90, min, max;
};

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Population std; p90 by nearest rank (the smallest value with 90% at or below it). */
static void stats_of(const struct rt_trace *t, bool output, struct len_stats *s)
{
    *s = (struct len_stats){ 0 };
    uint32_t *v = malloc(t->n * sizeof(uint32_t));
    if (!v || t->n == 0) {
        free(v);
        return;
    }
    double sum = 0, sq = 0;
    for (size_t i = 0; i < t->n; i++) {
        v[i] = output ? t->e[i].output_length : t->e[i].input_length;
        sum += v[i];
    }
    s->mean = sum / (double)t->n;
    for (size_t i = 0; i < t->n; i++)
        sq += (v[i] - s->mean) * (v[i] - s->mean);
    s->std = sqrt(sq / (double)t->n);
    qsort(v, t->n, sizeof(uint32_t), cmp_u32);
    s->p90 = v[(size_t)ceil(0.9 * (double)t->n) - 1];
    s->min = v[0];
    s->max = v[t->n - 1];
    free(v);
}

static void print_lengths(FILE *f, const char *what, const struct rt_trace *t, bool output,
                          const struct rt_len_dist *target)
{
    struct len_stats s;
    stats_of(t, output, &s);
    fprintf(f, "  %-6s mean %.1f  std %.1f  p90 %" PRIu32 "  (min %" PRIu32 ", max %" PRIu32
            ")\n", what, s.mean, s.std, s.p90, s.min, s.max);
    if (!target)
        return;
    fprintf(f, "         target mean %.0f  std %.0f  p90 ", target->mean, target->std);
    if (target->p90 > 0)
        fprintf(f, "%.0f", target->p90);
    else
        fputs("-", f);
    fprintf(f, "  (clamped to %" PRIu32 "..%" PRIu32 ")\n", target->min, target->max);
}

static void print_summary(FILE *f, const struct rt_trace *t, const struct rt_len_dist *in,
                          const struct rt_len_dist *out)
{
    size_t with_ids = 0;
    for (size_t i = 0; i < t->n; i++)
        with_ids += t->e[i].input_ids != NULL;
    fprintf(f, "  requests %zu\n", t->n);
    if (t->n == 0)
        return;
    double first = t->e[0].timestamp_ms, last = t->e[t->n - 1].timestamp_ms;
    fprintf(f, "  span   %.3f ms (first arrival %.3f ms, last %.3f ms)\n", last - first, first,
            last);
    /* Arrivals per second between the first and the last: n - 1 gaps in the span. */
    if (t->n > 1 && last > first)
        fprintf(f, "  rate   %.3f req/s\n", (double)(t->n - 1) * 1000.0 / (last - first));
    else
        fprintf(f, "  rate   - (all at one instant)\n");
    print_lengths(f, "input", t, false, in);
    print_lengths(f, "output", t, true, out);
    fprintf(f, "  ids    input_ids on %zu of %zu requests\n", with_ids, t->n);
}

static int trace_show(int argc, char **argv)
{
    if (argc != 1 || argv[0][0] == '-')
        return npuctl_usage_error("trace show: exactly one FILE is required%s%s",
                                  argc > 0 ? ", not " : "", argc > 0 ? argv[argc > 1] : "");
    char err[NPUCTL_ERR_MAX];
    struct rt_trace t;
    if (trace_read_jsonl(argv[0], &t, err, sizeof(err)))
        return npuctl_usage_error("%s", err);
    printf("trace: %s\n", argv[0]);
    print_summary(stdout, &t, NULL, NULL);
    trace_free(&t);
    return 0;
}

/* Writes the trace and reports it: on stdout, or stderr when the trace itself goes there. */
static int write_and_report(const struct rt_trace *t, const char *out, const char *what,
                            const struct rt_len_dist *in, const struct rt_len_dist *outd)
{
    char err[NPUCTL_ERR_MAX];
    if (trace_write_jsonl(out, t, err, sizeof(err)))
        return npuctl_usage_error("-o %s", err);
    FILE *f = strcmp(out, "-") == 0 ? stderr : stdout;
    fprintf(f, "trace: %s (%s)\n", out, what);
    print_summary(f, t, in, outd);
    return 0;
}

/* ---- gen */

enum { OV_MEAN, OV_STD, OV_P90, OV_MIN, OV_MAX, OV_COUNT };

struct gen_opts {
    struct rt_trace_gen_params p;
    const char *lengths, *out;
    bool count_set, rate_set, cv_set;
    double ov[2][OV_COUNT]; /* --input-* / --output-* overrides; NAN: not given */
};

/* --input-mean ... --output-max: which distribution and field, or false. */
static bool parse_override(struct gen_opts *o, const char *opt, const char *v, int *rc)
{
    static const char *const fields[OV_COUNT] = { "mean", "std", "p90", "min", "max" };
    int which = !strncmp(opt, "--input-", 8) ? 0 : !strncmp(opt, "--output-", 9) ? 1 : -1;
    if (which < 0)
        return false;
    const char *field = opt + (which ? 9 : 8);
    for (int k = 0; k < OV_COUNT; k++)
        if (!strcmp(field, fields[k])) {
            double x = 0;
            uint32_t n = 0;
            if (k >= OV_MIN)
                *rc = npuctl_parse_u32(opt, v, 0, NPU_REQUEST_TOKENS_MAX, &n), x = n;
            else
                *rc = parse_num(opt, v, k != OV_MEAN, &x);
            o->ov[which][k] = x;
            return true;
        }
    return false;
}

static int parse_gen_option(struct gen_opts *o, const char *opt, const char *v)
{
    int rc = 0;
    if (!v)
        return npuctl_usage_error("%s needs a value (npuctl trace --help)", opt);
    if (!strcmp(opt, "--count"))
        o->count_set = true,
        rc = npuctl_parse_u32(opt, v, 1, NPU_TRACE_REQUESTS_MAX, &o->p.count);
    else if (!strcmp(opt, "--rate"))
        o->rate_set = true, rc = parse_num(opt, v, false, &o->p.rate);
    else if (!strcmp(opt, "--cv"))
        o->cv_set = true, rc = parse_num(opt, v, false, &o->p.cv);
    else if (!strcmp(opt, "--seed"))
        rc = npuctl_parse_uint(opt, v, 0, UINT64_MAX, &o->p.seed);
    else if (!strcmp(opt, "--lengths"))
        o->lengths = v;
    else if (!strcmp(opt, "-o") || !strcmp(opt, "--out"))
        o->out = v;
    else if (!strcmp(opt, "--arrival")) {
        if (strcmp(v, "poisson") && strcmp(v, "gamma"))
            return npuctl_usage_error("--arrival: unknown value '%s' (poisson or gamma)", v);
        o->p.arrival = strcmp(v, "gamma") ? RT_ARRIVAL_POISSON : RT_ARRIVAL_GAMMA;
    } else if (!parse_override(o, opt, v, &rc))
        return npuctl_usage_error("trace gen: unknown option '%s' (npuctl trace --help)", opt);
    return rc;
}

static void apply_overrides(const double *ov, struct rt_len_dist *d)
{
    if (!isnan(ov[OV_MEAN])) d->mean = ov[OV_MEAN];
    if (!isnan(ov[OV_STD])) d->std = ov[OV_STD];
    if (!isnan(ov[OV_P90])) d->p90 = ov[OV_P90];
    if (!isnan(ov[OV_MIN])) d->min = (uint32_t)ov[OV_MIN];
    if (!isnan(ov[OV_MAX])) d->max = (uint32_t)ov[OV_MAX];
}

static int parse_gen_args(int argc, char **argv, struct gen_opts *o)
{
    *o = (struct gen_opts){ .lengths = "sharegpt", .p.seed = 1 };
    for (int w = 0; w < 2; w++)
        for (int k = 0; k < OV_COUNT; k++)
            o->ov[w][k] = NAN;
    for (int i = 0; i < argc; i += 2) {
        int rc = parse_gen_option(o, argv[i], i + 1 < argc ? argv[i + 1] : NULL);
        if (rc)
            return rc;
    }
    if (!o->count_set || !o->rate_set || !o->out)
        return npuctl_usage_error("trace gen: %s is required", !o->count_set  ? "--count N"
                                                               : !o->rate_set ? "--rate R"
                                                                              : "-o FILE");
    if (o->p.count == 0)
        return npuctl_usage_error("--count: a trace needs at least 1 request");
    if (o->p.arrival == RT_ARRIVAL_GAMMA && !o->cv_set)
        return npuctl_usage_error(
            "--arrival gamma needs --cv C (the gaps' coefficient of variation)");
    if (o->p.arrival == RT_ARRIVAL_POISSON && o->cv_set)
        return npuctl_usage_error("--cv applies to --arrival gamma only (Poisson gaps have cv 1)");
    if (trace_len_preset(o->lengths, &o->p.input, &o->p.output))
        return npuctl_usage_error("--lengths: unknown preset '%s' (sharegpt, arxiv or tiny)",
                                  o->lengths);
    apply_overrides(o->ov[0], &o->p.input);
    apply_overrides(o->ov[1], &o->p.output);
    return 0;
}

static int trace_gen_cmd(int argc, char **argv)
{
    struct gen_opts o;
    char err[NPUCTL_ERR_MAX], what[160];
    struct rt_trace t;
    int rc = parse_gen_args(argc, argv, &o);
    if (rc)
        return rc;
    if (trace_gen(&o.p, &t, err, sizeof(err)))
        return npuctl_usage_error("trace gen: %s", err);
    if (o.p.arrival == RT_ARRIVAL_GAMMA)
        snprintf(what, sizeof(what), "gamma arrivals cv %g", o.p.cv);
    else
        snprintf(what, sizeof(what), "Poisson arrivals");
    snprintf(what + strlen(what), sizeof(what) - strlen(what),
             " at %g req/s, %s lengths, seed %" PRIu64, o.p.rate, o.lengths, o.p.seed);
    rc = write_and_report(&t, o.out, what, &o.p.input, &o.p.output);
    trace_free(&t);
    return rc;
}

/* ---- import */

static int trace_import_cmd(int argc, char **argv)
{
    const char *in = NULL, *out = NULL, *format = NULL;
    uint64_t limit = 0;
    for (int i = 0; i < argc; i++) {
        const char *opt = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (opt[0] != '-' || !strcmp(opt, "-")) {
            if (in)
                return npuctl_usage_error("trace import: one input file, not '%s' and '%s'", in,
                                          opt);
            in = opt;
            continue;
        }
        if (!strcmp(opt, "--format") || !strcmp(opt, "-o") || !strcmp(opt, "--out") ||
            !strcmp(opt, "--limit")) {
            if (!v)
                return npuctl_usage_error("%s needs a value (npuctl trace --help)", opt);
            i++;
        } else
            return npuctl_usage_error("trace import: unknown option '%s' (npuctl trace --help)",
                                      opt);
        if (!strcmp(opt, "--format"))
            format = v;
        else if (!strcmp(opt, "--limit")) {
            if (npuctl_parse_uint(opt, v, 1, NPU_TRACE_REQUESTS_MAX, &limit))
                return NPUCTL_EXIT_USAGE;
        } else
            out = v;
    }
    if (!format || !in || !out)
        return npuctl_usage_error("trace import: %s is required",
                                  !format ? "--format azure|burstgpt|vidur"
                                  : !in   ? "the input file IN"
                                          : "-o FILE");
    int fmt = trace_format_parse(format);
    if (fmt < 0)
        return npuctl_usage_error("--format: unknown value '%s' (azure, burstgpt or vidur)",
                                  format);
    char err[NPUCTL_ERR_MAX], what[NPUCTL_PATH_MAX + 64];
    struct rt_trace t;
    if (trace_import_limit(in, (enum rt_trace_format)fmt, (size_t)limit, &t, err,
                           sizeof(err)))
        return npuctl_usage_error("%s", err);
    snprintf(what, sizeof(what), "imported from %s, %s format", in, format);
    int rc = write_and_report(&t, out, what, NULL, NULL);
    trace_free(&t);
    return rc;
}

int npuctl_cmd_trace(int argc, char **argv)
{
    /* The arguments after the command word; tolerate the word itself in front as well. */
    if (argc > 0 && !strcmp(argv[0], "trace"))
        argc--, argv++;
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(trace_usage, stdout);
            return 0;
        }
    if (argc < 1) {
        fputs(trace_usage, stderr);
        return npuctl_usage_error("trace: gen, import or show is required");
    }
    if (!strcmp(argv[0], "gen"))
        return trace_gen_cmd(argc - 1, argv + 1);
    if (!strcmp(argv[0], "import"))
        return trace_import_cmd(argc - 1, argv + 1);
    if (!strcmp(argv[0], "show"))
        return trace_show(argc - 1, argv + 1);
    return npuctl_usage_error(
        "trace: unknown subcommand '%s' (gen, import or show; npuctl trace --help)", argv[0]);
}
