/* SPDX-License-Identifier: MIT */
/*
 * npuctl trace gen|import|show (docs/traces.md): writes request traces in the native
 * JSON-lines format and summarises them. Exit status 0, or 2 for a bad argument or file
 * (the message names the option, or the file and line).
 */
#define _POSIX_C_SOURCE 200809L
#include "npuctl.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opts.h"
#include "rt/trace.h"
#include "trace_opts.h"

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

static int u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* hash_ids (prefix caching): how many requests have them, and how many of those begin
   with a hash id another one begins with (a prefix cache can serve at most those). */
static void print_hashes(FILE *f, const struct rt_trace *t)
{
    size_t n = 0, repeats = 0;
    uint64_t *first = malloc((t->n ? t->n : 1) * sizeof(*first));
    for (size_t i = 0; first && i < t->n; i++)
        if (t->e[i].hash_ids && t->e[i].nhash)
            first[n++] = t->e[i].hash_ids[0];
    if (first)
        qsort(first, n, sizeof(*first), u64_cmp);
    for (size_t k = 1; first && k < n; k++)
        repeats += first[k] == first[k - 1];
    free(first);
    if (n)
        fprintf(f, "  hashes hash_ids on %zu of %zu requests, %zu of them beginning with one "
                "another begins with\n", n, t->n, repeats);
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
    print_hashes(f, t);
}

static int trace_show(int argc, char **argv)
{
    struct npuctl_args args;
    bool done;
    int rc = npuctl_opts_run(&npuctl_spec_trace_show, NULL, argc, argv, &args, &done);
    if (done)
        return rc;
    const char *file = args.npos == 1 ? args.pos[0] : NULL;
    npuctl_args_free(&args);
    if (!file)
        return npuctl_usage_error("trace show: exactly one FILE is required");
    char err[NPUCTL_ERR_MAX];
    struct rt_trace t;
    if (trace_read_jsonl(file, &t, err, sizeof(err)))
        return npuctl_usage_error("%s", err);
    printf("trace: %s\n", file);
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

static int trace_gen_cmd(int argc, char **argv)
{
    struct trace_gen_opts o;
    char err[NPUCTL_ERR_MAX], what[160];
    struct rt_trace t;
    bool done;
    int rc = trace_gen_parse(argc, argv, &o, &done);
    if (done)
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
    struct trace_import_opts o;
    bool done;
    int rc = trace_import_parse(argc, argv, &o, &done);
    if (done)
        return rc;
    const bool mooncake = strcmp(o.format, "mooncake") == 0;
    int fmt = mooncake ? 0 : trace_format_parse(o.format);
    if (fmt < 0)
        return npuctl_usage_error("--format: unknown value '%s' (azure, burstgpt, vidur or "
                                  "mooncake)", o.format);
    if (mooncake && o.flt.nwhere)
        return npuctl_usage_error("--where: Mooncake's JSON lines have no CSV columns");
    char err[NPUCTL_ERR_MAX], what[NPUCTL_PATH_MAX + 64];
    struct rt_trace t;
    o.flt.limit = (size_t)o.limit;
    /* Mooncake's JSON lines (timestamp in ms from the start, input_length, output_length,
       hash_ids) are the native format: read with its checks, then filtered */
    if (mooncake ? trace_read_jsonl(o.in, &t, err, sizeof(err))
                 : trace_import_filtered(o.in, (enum rt_trace_format)fmt, &o.flt, &t, err,
                                         sizeof(err)))
        return npuctl_usage_error("%s", err);
    if (mooncake)
        trace_select(&t, &o.flt);
    if (t.n == 0) {
        trace_free(&t);
        return npuctl_usage_error("trace import: %s: no row passes the filters (--where, "
                                  "--window)", o.in);
    }
    snprintf(what, sizeof(what), "imported from %s, %s format", o.in, o.format);
    rc = write_and_report(&t, o.out, what, NULL, NULL);
    trace_free(&t);
    return rc;
}

int npuctl_cmd_trace(int argc, char **argv)
{
    static const char *const subs[] = { "gen", "import", "show" };
    /* The arguments after the command word; tolerate the word itself in front as well. */
    if (argc > 0 && !strcmp(argv[0], "trace"))
        argc--, argv++;
    if (argc > 0 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) {
        npuctl_print_usage(stdout, "trace");
        return 0;
    }
    if (argc < 1) {
        npuctl_print_usage(stderr, "trace");
        return npuctl_usage_error("trace: gen, import or show is required");
    }
    if (!strcmp(argv[0], "gen"))
        return trace_gen_cmd(argc - 1, argv + 1);
    if (!strcmp(argv[0], "import"))
        return trace_import_cmd(argc - 1, argv + 1);
    if (!strcmp(argv[0], "show"))
        return trace_show(argc - 1, argv + 1);
    char hint[96];
    npuctl_format_suggestion(argv[0], subs, 3, hint, sizeof(hint));
    return npuctl_usage_error("trace: unknown subcommand '%s'%s (gen, import or show; npuctl "
                              "trace --help)", argv[0], hint);
}
