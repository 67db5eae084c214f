/* SPDX-License-Identifier: MIT */
/*
 * Host unit tests of the traces (runtime/host/src/trace_*.c, docs/traces.md).
 * Covers: JSONL round trip (exact doubles, ids) and reading of a sample with blank lines and
 * extra keys; each malformed line refused naming file, line and field; each importer on its
 * sample (values, relative timestamps, CRLF, extra and reordered columns, --limit) and its
 * errors naming line and column; the generator's determinism, Poisson rate, gamma cv and
 * log-normal fit against the presets over 20000 draws; the blob built and checked, and
 * rt_blob_check refusing a flipped byte, a truncation and hand-made bad blobs (checksum
 * fixed) naming the request; the bundled traces in models/traces/.
 * Hash ids: synthetic tokens follow equal hash ids over filled hash blocks (and stay the
 * old request-seeded ones without them); trace_check_hash_ids accepting agreeing ids and
 * naming both requests when they differ; blob v2 carrying each request's hash ids
 * (truncated to its hash blocks) and rt_blob_check refusing bad hash fields.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "npu_enums.h"
#include "npu_limits.h"
#include "rt/trace.h"
#include "rt/trace_blob.h"

static char err[1024];

static const char *data(const char *name)
{
    static char path[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(path[k], sizeof(path[k]), "%s/tests/host/data/traces/%s", NPU_SOURCE_DIR, name);
    return path[k];
}

/* Reading `name` fails with NPU_ERR_FORMAT and a message holding each of want[]. */
static void expect_read_error(const char *name, const char *const *want)
{
    struct rt_trace t;
    err[0] = '\0';
    assert_int_equal(trace_read_jsonl(data(name), &t, err, sizeof(err)), NPU_ERR_FORMAT);
    assert_null(t.e);
    for (; *want; want++) {
        if (!strstr(err, *want))
            fail_msg("'%s' lacks '%s'", err, *want);
    }
}

static void test_jsonl_errors(void **state)
{
    (void)state;
    expect_read_error("bad-json.jsonl", (const char *[]){ "bad-json.jsonl:3:", "not JSON",
                                                         NULL });
    expect_read_error("missing-field.jsonl", (const char *[]){
        "missing-field.jsonl:2: field 'input_length': missing", NULL });
    expect_read_error("negative-length.jsonl", (const char *[]){
        "negative-length.jsonl:4: field 'output_length': -3 is negative", NULL });
    expect_read_error("out-of-order.jsonl", (const char *[]){
        "out-of-order.jsonl:2: timestamp 10.0 ms is before the previous line's 12.5 ms",
        NULL });
    expect_read_error("ids-mismatch.jsonl", (const char *[]){
        "ids-mismatch.jsonl:1: field 'input_ids': 2 ids, input_length is 3", NULL });
    expect_read_error("non-integer-length.jsonl", (const char *[]){
        "non-integer-length.jsonl:1: field 'input_length': not an integer", NULL });
    struct rt_trace t;
    assert_int_equal(trace_read_jsonl(data("no-such-file.jsonl"), &t, err, sizeof(err)),
                     NPU_ERR_IO);
}

static void test_jsonl_read_sample(void **state)
{
    (void)state;
    struct rt_trace t;
    assert_int_equal(trace_read_jsonl(data("good.jsonl"), &t, err, sizeof(err)), 0);
    assert_int_equal(t.n, 3);
    assert_int_equal(t.e[0].input_length, 4);
    assert_int_equal(t.e[0].nhash, 2);
    assert_int_equal(t.e[0].hash_ids[1], 8);
    assert_int_equal(t.e[0].input_ids[3], 511);
    assert_true(t.e[1].timestamp_ms == 12.5);
    assert_null(t.e[1].input_ids);
    assert_null(t.e[1].hash_ids);
    assert_int_equal(t.e[2].input_length, 0); /* kept: the runtime rejects it */
    assert_int_equal(trace_check_ids(&t, 512, err, sizeof(err)), 0);
    assert_int_equal(trace_check_ids(&t, 511, err, sizeof(err)), NPU_ERR_RANGE);
    assert_non_null(strstr(err, "request 0: input_ids[3] = 511"));
    trace_free(&t);
}

static void tmp_path(char *path, size_t len)
{
    snprintf(path, len, "/tmp/test_trace_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
}

/* Issue 26: the limits of npu_limits.h, refused by the reader with the line and field
   before anything is allocated for the request (a 4294967295-token prompt once made the
   host build 16 GiB of prompt ids; a request at day 54 passed the chip clock's range). */
static void test_jsonl_limits(void **state)
{
    (void)state;
    expect_read_error("too-long.jsonl", (const char *[]){
        "too-long.jsonl:2: field 'input_length': 4294967295 is more than 16777216", NULL });
    expect_read_error("too-late.jsonl", (const char *[]){
        "too-late.jsonl:2: field 'timestamp': 4665600000.0 ms is past the latest arrival",
        "NPU_ARRIVAL_MAX_PS", NULL });
    /* A NUL byte would end the line early for the JSON reader: refused, not skipped. */
    expect_read_error("nul-byte.jsonl", (const char *[]){
        "nul-byte.jsonl:2: a NUL byte at column 1", NULL });
    /* One request more than a trace may hold, refused at its line. */
    char path[64];
    tmp_path(path, sizeof(path));
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (uint32_t i = 0; i <= NPU_TRACE_REQUESTS_MAX; i++)
        fprintf(f, "{\"timestamp\": %u.0, \"input_length\": 1, \"output_length\": 1}\n", i);
    assert_int_equal(fclose(f), 0);
    struct rt_trace t;
    assert_int_equal(trace_read_jsonl(path, &t, err, sizeof(err)), NPU_ERR_FORMAT);
    unlink(path);
    assert_non_null(strstr(err, ":65537: more than 65536 requests"));
    assert_null(t.e);
}

static void test_jsonl_round_trip(void **state)
{
    (void)state;
    uint32_t ids[3] = { 5, 0, 4000000000u };
    uint64_t hashes[2] = { 1, UINT64_MAX / 2 };
    struct rt_trace_entry e[3] = {
        { .timestamp_ms = 0.1 + 0.2, .input_length = 3, .output_length = 7, .input_ids = ids,
          .hash_ids = hashes, .nhash = 2 },
        { .timestamp_ms = 1e6 / 3.0, .input_length = 9, .output_length = 1 },
        { .timestamp_ms = 123456789.25, .input_length = 0, .output_length = 0 },
    };
    struct rt_trace t = { e, 3 }, back;
    char path[64];
    tmp_path(path, sizeof(path));
    assert_int_equal(trace_write_jsonl(path, &t, err, sizeof(err)), 0);
    assert_int_equal(trace_read_jsonl(path, &back, err, sizeof(err)), 0);
    unlink(path);
    assert_int_equal(back.n, 3);
    for (size_t i = 0; i < 3; i++) {
        assert_true(back.e[i].timestamp_ms == e[i].timestamp_ms); /* bit for bit */
        assert_int_equal(back.e[i].input_length, e[i].input_length);
        assert_int_equal(back.e[i].output_length, e[i].output_length);
        assert_int_equal(back.e[i].nhash, e[i].nhash);
        assert_int_equal(back.e[i].input_ids != NULL, e[i].input_ids != NULL);
    }
    assert_memory_equal(back.e[0].input_ids, ids, sizeof(ids));
    assert_memory_equal(back.e[0].hash_ids, hashes, sizeof(hashes));
    trace_free(&back);
}

static void expect_entry(const struct rt_trace *t, size_t i, double ms, uint32_t in,
                         uint32_t out)
{
    if (t->e[i].timestamp_ms != ms) /* exact: times are whole ns until divided once */
        fail_msg("row %zu: %.9f ms, expected %.9f", i, t->e[i].timestamp_ms, ms);
    assert_int_equal(t->e[i].input_length, in);
    assert_int_equal(t->e[i].output_length, out);
}

static void test_import_samples(void **state)
{
    (void)state;
    struct rt_trace t;
    assert_int_equal(trace_format_parse("azure"), RT_TRACE_AZURE);
    assert_int_equal(trace_format_parse("mooncake"), -1);
    /* CRLF lines; the last row is past midnight. */
    assert_int_equal(trace_import(data("azure.csv"), RT_TRACE_AZURE, &t, err, sizeof(err)), 0);
    assert_int_equal(t.n, 4);
    expect_entry(&t, 0, 0.0, 374, 44);
    expect_entry(&t, 1, 20.0, 396, 109);
    expect_entry(&t, 2, 1400.0, 879, 32);
    expect_entry(&t, 3, 1680.59, 91, 0);
    trace_free(&t);
    assert_int_equal(trace_import(data("burstgpt.csv"), RT_TRACE_BURSTGPT, &t, err,
                                  sizeof(err)), 0);
    assert_int_equal(t.n, 4);
    expect_entry(&t, 0, 0.0, 472, 18);
    expect_entry(&t, 1, 40000.0, 1087, 230);
    expect_entry(&t, 3, 113000.0, 1360, 0);
    trace_free(&t);
    /* Reordered and extra columns. */
    assert_int_equal(trace_import(data("vidur.csv"), RT_TRACE_VIDUR, &t, err, sizeof(err)), 0);
    assert_int_equal(t.n, 4);
    expect_entry(&t, 0, 0.0, 2048, 128);
    expect_entry(&t, 1, 250.0, 512, 64);
    expect_entry(&t, 3, 1125.0, 3000, 20);
    trace_free(&t);
    assert_int_equal(trace_import_limit(data("vidur.csv"), RT_TRACE_VIDUR, 2, &t, err,
                                        sizeof(err)), 0);
    assert_int_equal(t.n, 2);
    trace_free(&t);
}

/* --where, --window, --time-scale and --limit (docs/traces.md, "Importers"): the rows kept
   are timed from the first of them; the window is from the file's first row; reading stops
   past the window or at the limit. BurstGPT's rows: 5 s ChatGPT, 45 ChatGPT, 118 GPT-4
   (API log), 118 ChatGPT. */
static void test_import_filters(void **state)
{
    (void)state;
    struct rt_trace t;
    struct rt_import_filter f = trace_filter_all();
    f.nwhere = 2;
    f.where_col[0] = "Model", f.where_val[0] = "ChatGPT";
    f.where_col[1] = "Log Type", f.where_val[1] = "Conversation log";
    assert_int_equal(trace_import_filtered(data("burstgpt.csv"), RT_TRACE_BURSTGPT, &f, &t, err,
                                           sizeof(err)), 0);
    assert_int_equal(t.n, 3);
    expect_entry(&t, 0, 0.0, 472, 18);
    expect_entry(&t, 1, 40000.0, 1087, 230);
    expect_entry(&t, 2, 113000.0, 1360, 0);
    trace_free(&t);
    f.where_val[0] = "GPT-4"; /* and "Conversation log": no row */
    assert_int_equal(trace_import_filtered(data("burstgpt.csv"), RT_TRACE_BURSTGPT, &f, &t, err,
                                           sizeof(err)), 0);
    assert_int_equal(t.n, 0);
    trace_free(&t);
    f = trace_filter_all(); /* from 40 s after the first row: the last three, timed from 45 s */
    f.from_s = 40.0, f.time_scale = 0.5;
    assert_int_equal(trace_import_filtered(data("burstgpt.csv"), RT_TRACE_BURSTGPT, &f, &t, err,
                                           sizeof(err)), 0);
    assert_int_equal(t.n, 3);
    expect_entry(&t, 0, 0.0, 1087, 230);
    expect_entry(&t, 1, 36500.0, 417, 276);
    trace_free(&t);
    f = trace_filter_all(); /* [0, 113) s: the first two; the limit cuts the second */
    f.to_s = 113.0;
    assert_int_equal(trace_import_filtered(data("burstgpt.csv"), RT_TRACE_BURSTGPT, &f, &t, err,
                                           sizeof(err)), 0);
    assert_int_equal(t.n, 2);
    trace_free(&t);
    f.limit = 1;
    assert_int_equal(trace_import_filtered(data("burstgpt.csv"), RT_TRACE_BURSTGPT, &f, &t, err,
                                           sizeof(err)), 0);
    assert_int_equal(t.n, 1);
    trace_free(&t);
    f = trace_filter_all(); /* a --where column the file lacks */
    f.nwhere = 1, f.where_col[0] = "model", f.where_val[0] = "x";
    assert_int_equal(trace_import_filtered(data("burstgpt.csv"), RT_TRACE_BURSTGPT, &f, &t, err,
                                           sizeof(err)), NPU_ERR_FORMAT);
    assert_non_null(strstr(err, ":1: no column 'model' in the header"));
    /* a window 35 days into a trace: the arrival limit (about 26.7 days) is on the rows
       kept, timed from the first of them, not on their distance from the file's start */
    char far[] = "/tmp/test_trace_far_XXXXXX";
    const int fd = mkstemp(far);
    assert_true(fd >= 0);
    FILE *ff = fdopen(fd, "w");
    fputs("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
          "0,ChatGPT,10,2,12,Conversation log\n3000000,ChatGPT,20,3,23,Conversation log\n"
          "3000010,ChatGPT,30,4,34,Conversation log\n", ff);
    fclose(ff);
    f = trace_filter_all();
    f.from_s = 2999000.0;
    assert_int_equal(trace_import_filtered(far, RT_TRACE_BURSTGPT, &f, &t, err, sizeof(err)),
                     0);
    assert_int_equal(t.n, 2);
    expect_entry(&t, 1, 10000.0, 30, 4);
    trace_free(&t);
    f.from_s = 0.0; /* the whole file: its last row is past the limit from the first */
    assert_int_equal(trace_import_filtered(far, RT_TRACE_BURSTGPT, &f, &t, err, sizeof(err)),
                     NPU_ERR_FORMAT);
    assert_non_null(strstr(err, ":3: column 'Timestamp': '3000000' is more than the latest"));
    unlink(far);
    /* a native trace: its own clock, the same rules */
    assert_int_equal(trace_read_jsonl(data("good.jsonl"), &t, err, sizeof(err)), 0);
    const size_t n = t.n;
    assert_true(n >= 2);
    const double first = t.e[0].timestamp_ms;
    f = trace_filter_all();
    f.from_s = first / 1e3 + 1e-9, f.time_scale = 2.0;
    trace_select(&t, &f);
    assert_int_equal(t.n, n - 1);
    assert_true(t.e[0].timestamp_ms == 0.0);
    trace_free(&t);
}

static void expect_import_error(const char *name, enum rt_trace_format f, const char *want)
{
    struct rt_trace t;
    assert_int_equal(trace_import(data(name), f, &t, err, sizeof(err)), NPU_ERR_FORMAT);
    if (!strstr(err, name) || !strstr(err, want))
        fail_msg("'%s' lacks '%s: %s'", err, name, want);
}

static void test_import_errors(void **state)
{
    (void)state;
    expect_import_error("burstgpt-out-of-order.csv", RT_TRACE_BURSTGPT,
                        ":4: timestamp 25000.0000 ms is before the previous row's 40000");
    expect_import_error("azure-bad-number.csv", RT_TRACE_AZURE,
                        ":3: column 'ContextTokens': '12x' is not a whole number");
    expect_import_error("vidur-missing-column.csv", RT_TRACE_VIDUR,
                        ":1: no column 'num_decode_tokens'");
    /* Issue 26: dates far apart overflowed the nanoseconds' difference (undefined
       behaviour); a date past 2261 overflowed the nanoseconds themselves; counts past
       npu_limits.h's. Each refused naming the line and column. */
    expect_import_error("azure-far-apart.csv", RT_TRACE_AZURE,
                        ":3: column 'TIMESTAMP': '2200-01-01 00:00:00' is more than the latest "
                        "arrival");
    expect_import_error("azure-far-date.csv", RT_TRACE_AZURE,
                        ":3: column 'TIMESTAMP': '9999-12-31 23:59:59' is not a date");
    expect_import_error("azure-too-long.csv", RT_TRACE_AZURE,
                        ":3: column 'ContextTokens': '4294967295' tokens: more than a request");
    /* A NUL byte would cut the row short ("1" tokens): refused, as by the JSONL reader. */
    expect_import_error("azure-nul.csv", RT_TRACE_AZURE, ":3: a NUL byte in the row");
    /* A file in one format read as another: the header says so. */
    expect_import_error("vidur.csv", RT_TRACE_AZURE, ":1: no column 'TIMESTAMP'");
}

static struct rt_trace_gen_params gen_params(const char *preset, uint32_t count, double rate,
                                             uint64_t seed)
{
    struct rt_trace_gen_params p = { .count = count, .rate = rate, .seed = seed };
    assert_int_equal(trace_len_preset(preset, &p.input, &p.output), 0);
    return p;
}

/* A generated trace that would pass the latest arrival a run may have is refused by the
   generator rather than by serve (issue 26: the limits agree). */
static void test_gen_limit(void **state)
{
    (void)state;
    struct rt_trace_gen_params p = gen_params("sharegpt", 100, 1e-5, 1);
    struct rt_trace t;
    assert_int_equal(trace_gen(&p, &t, err, sizeof(err)), NPU_ERR_RANGE);
    assert_non_null(strstr(err, "past the latest arrival a run may have"));
    assert_null(t.e);
}

static void test_gen_determinism(void **state)
{
    (void)state;
    struct rt_trace a, b, c;
    struct rt_trace_gen_params p = gen_params("sharegpt", 200, 3.0, 42);
    assert_int_equal(trace_gen(&p, &a, err, sizeof(err)), 0);
    assert_int_equal(trace_gen(&p, &b, err, sizeof(err)), 0);
    p.seed = 43;
    assert_int_equal(trace_gen(&p, &c, err, sizeof(err)), 0);
    assert_memory_equal(a.e, b.e, a.n * sizeof(*a.e));
    size_t same = 0;
    for (size_t i = 0; i < a.n; i++)
        same += a.e[i].input_length == c.e[i].input_length;
    assert_true(same < a.n / 4);
    assert_true(a.e[0].timestamp_ms > 0); /* one drawn gap before the first */
    trace_free(&a);
    trace_free(&b);
    trace_free(&c);
    struct rt_len_dist in, out;
    assert_int_equal(trace_len_preset("nope", &in, &out), NPU_ERR_NOTFOUND);
    p.rate = 0;
    assert_int_equal(trace_gen(&p, &a, err, sizeof(err)), NPU_ERR_INVAL);
}

/* Mean and coefficient of variation of the gaps between arrivals (from 0). */
static void gap_stats(const struct rt_trace *t, double *mean_s, double *cv)
{
    double sum = 0, sq = 0, prev = 0;
    for (size_t i = 0; i < t->n; i++, prev = t->e[i - 1].timestamp_ms)
        sum += (t->e[i].timestamp_ms - prev) / 1e3;
    *mean_s = sum / (double)t->n;
    prev = 0;
    for (size_t i = 0; i < t->n; i++, prev = t->e[i - 1].timestamp_ms) {
        double d = (t->e[i].timestamp_ms - prev) / 1e3 - *mean_s;
        sq += d * d;
    }
    *cv = sqrt(sq / (double)t->n) / *mean_s;
}

static void test_gen_arrivals(void **state)
{
    (void)state;
    struct rt_trace t;
    double mean, cv;
    struct rt_trace_gen_params p = gen_params("tiny", 20000, 5.0, 7);
    assert_int_equal(trace_gen(&p, &t, err, sizeof(err)), 0);
    gap_stats(&t, &mean, &cv);
    assert_true(fabs(1.0 / mean - 5.0) < 0.15);   /* 3% */
    assert_true(fabs(cv - 1.0) < 0.05);
    trace_free(&t);
    static const double cvs[] = { 0.5, 2.0 };
    for (int k = 0; k < 2; k++) {
        p.arrival = RT_ARRIVAL_GAMMA;
        p.cv = cvs[k];
        assert_int_equal(trace_gen(&p, &t, err, sizeof(err)), 0);
        gap_stats(&t, &mean, &cv);
        if (fabs(1.0 / mean - 5.0) > 0.25 || fabs(cv - cvs[k]) > 0.08 * cvs[k])
            fail_msg("gamma cv %g: rate %g, cv %g", cvs[k], 1.0 / mean, cv);
        trace_free(&t);
    }
}

/* The load knobs (docs/traces.md, "Load knobs"): the first N requests, re-timed as the
   generator times them (a generated trace served at its own rate and seed keeps its
   timestamps), gamma gaps of the burstiness' shape, inf at 0; refusals name the knob. */
static void test_load_knobs(void **state)
{
    (void)state;
    struct rt_trace g, t;
    struct rt_trace_gen_params p = gen_params("tiny", 4000, 8.0, 5);
    assert_int_equal(trace_gen(&p, &g, err, sizeof(err)), 0);
    p.rate = 2.0; /* the same lengths, other timestamps */
    assert_int_equal(trace_gen(&p, &t, err, sizeof(err)), 0);
    struct rt_trace_load l = { .rate = 8.0, .burstiness = 1, .seed = 5 };
    assert_int_equal(trace_apply_load(&t, &l, err, sizeof(err)), 0);
    assert_memory_equal(g.e, t.e, g.n * sizeof(*g.e));
    l.burstiness = 0.25; /* cv 2 */
    assert_int_equal(trace_apply_load(&t, &l, err, sizeof(err)), 0);
    double mean, cv;
    gap_stats(&t, &mean, &cv);
    if (fabs(1.0 / mean - 8.0) > 0.5 || fabs(cv - 2.0) > 0.16)
        fail_msg("burstiness 0.25: rate %g, cv %g", 1.0 / mean, cv);
    for (size_t i = 0; i < t.n; i++)
        assert_int_equal(t.e[i].input_length, g.e[i].input_length);
    l = (struct rt_trace_load){ .num_prompts = 10, .rate = INFINITY, .burstiness = 1 };
    assert_int_equal(trace_apply_load(&t, &l, err, sizeof(err)), 0);
    assert_int_equal(t.n, 10);
    for (size_t i = 0; i < t.n; i++)
        assert_true(t.e[i].timestamp_ms == 0.0 &&
                    t.e[i].output_length == g.e[i].output_length);
    l = (struct rt_trace_load){ .num_prompts = 11, .burstiness = 1 };
    assert_int_equal(trace_apply_load(&t, &l, err, sizeof(err)), NPU_ERR_RANGE);
    assert_non_null(strstr(err, "--num-prompts 11: the trace has 10 requests"));
    l = (struct rt_trace_load){ .burstiness = 2 }; /* no rate to shape */
    assert_int_equal(trace_apply_load(&t, &l, err, sizeof(err)), NPU_ERR_INVAL);
    assert_non_null(strstr(err, "only with --request-rate"));
    l = (struct rt_trace_load){ .burstiness = 1 }; /* nothing asked: nothing changes */
    assert_int_equal(trace_apply_load(&t, &l, err, sizeof(err)), 0);
    assert_int_equal(t.n, 10);
    trace_free(&g);
    trace_free(&t);
}

static void expect_lengths(const struct rt_trace *t, bool output, const struct rt_len_dist *d,
                           double mean_tol, double std_tol)
{
    double sum = 0, sq = 0;
    for (size_t i = 0; i < t->n; i++)
        sum += output ? t->e[i].output_length : t->e[i].input_length;
    double mean = sum / (double)t->n;
    for (size_t i = 0; i < t->n; i++) {
        double x = output ? t->e[i].output_length : t->e[i].input_length;
        sq += (x - mean) * (x - mean);
        assert_true(x >= d->min && x <= d->max);
    }
    double std = sqrt(sq / (double)t->n);
    if (fabs(mean / d->mean - 1) > mean_tol || fabs(std / d->std - 1) > std_tol)
        fail_msg("mean %.1f std %.1f, target %.1f %.1f", mean, std, d->mean, d->std);
}

static void test_gen_lengths(void **state)
{
    (void)state;
    static const char *const presets[] = { "sharegpt", "arxiv" };
    for (int k = 0; k < 2; k++) {
        struct rt_trace t;
        struct rt_trace_gen_params p = gen_params(presets[k], 20000, 1.0, 11);
        assert_int_equal(trace_gen(&p, &t, err, sizeof(err)), 0);
        /* The clamp at 32768 takes ~4.5% off arXiv's input std (docs/traces.md). */
        expect_lengths(&t, false, &p.input, 0.03, 0.07);
        expect_lengths(&t, true, &p.output, 0.03, 0.07);
        trace_free(&t);
        /* The fit alone, unclamped: tighter. */
        p.input.max = p.output.max = UINT32_MAX;
        assert_int_equal(trace_gen(&p, &t, err, sizeof(err)), 0);
        expect_lengths(&t, false, &p.input, 0.02, 0.05);
        expect_lengths(&t, true, &p.output, 0.02, 0.05);
        trace_free(&t);
    }
}

static void test_blob_build(void **state)
{
    (void)state;
    struct rt_trace t;
    void *blob;
    size_t bytes;
    assert_int_equal(trace_read_jsonl(data("good.jsonl"), &t, err, sizeof(err)), 0);
    assert_int_equal(trace_blob_build(&t, &(struct rt_blob_opts){ 0 }, &blob, &bytes, err,
                                      sizeof(err)), 0);
    assert_int_equal(bytes, sizeof(struct rt_blob_header) + 3 * sizeof(struct rt_blob_req));
    assert_int_equal(rt_blob_check(blob, bytes, err, sizeof(err)), 0);
    assert_int_equal(rt_blob_reqs(blob)[1].arrival_ps, 12500000000ull);
    assert_int_equal(rt_blob_reqs(blob)[1].ids_first, RT_BLOB_NO_IDS);
    free(blob);
    /* With ids: request 0's own, request 1's synthesised below the vocabulary. */
    const struct rt_blob_opts ids_on = { .with_ids = true, .vocab = 512, .seed = 9 };
    assert_int_equal(trace_blob_build(&t, &ids_on, &blob, &bytes, err, sizeof(err)), 0);
    assert_int_equal(rt_blob_check(blob, bytes, err, sizeof(err)), 0);
    const struct rt_blob_header *h = blob;
    assert_int_equal(h->ids_count, 7);
    const uint32_t *ids = rt_blob_ids(blob);
    assert_memory_equal(ids, t.e[0].input_ids, 4 * sizeof(uint32_t));
    uint32_t synth[3];
    trace_synth_ids(9, 1, NULL, 0, 3, 512, synth);
    assert_int_equal(rt_blob_reqs(blob)[1].ids_first, 4);
    assert_memory_equal(ids + 4, synth, sizeof(synth));
    for (int k = 0; k < 3; k++)
        assert_true(synth[k] < 512);
    free(blob);
    /* An id beyond the vocabulary is refused before anything is built. */
    assert_int_equal(trace_blob_build(&t, &(struct rt_blob_opts){ .with_ids = true,
                                                                  .vocab = 100, .seed = 9 },
                                      &blob, &bytes, err, sizeof(err)),
                     NPU_ERR_RANGE);
    assert_null(blob);
    trace_free(&t);
}

/* Recomputes a hand-edited blob's checksum, so that only the edit is wrong. */
static void blob_reseal(void *blob)
{
    struct rt_blob_header *h = blob;
    uint64_t sum = 0xcbf29ce484222325ull;
    for (uint64_t k = sizeof(*h); k < h->bytes; k++)
        sum = (sum ^ ((uint8_t *)blob)[k]) * 0x100000001b3ull;
    h->checksum = sum;
}

static void expect_check_error(const void *blob, uint64_t bytes, const char *want)
{
    assert_int_equal(rt_blob_check(blob, bytes, err, sizeof(err)), NPU_ERR_FORMAT);
    if (!strstr(err, want))
        fail_msg("'%s' lacks '%s'", err, want);
}

static void test_blob_check_refuses(void **state)
{
    (void)state;
    struct rt_trace t;
    void *blob;
    size_t bytes;
    struct rt_trace_gen_params p = gen_params("tiny", 5, 50.0, 1);
    assert_int_equal(trace_gen(&p, &t, err, sizeof(err)), 0);
    assert_int_equal(trace_blob_build(&t, &(struct rt_blob_opts){ .with_ids = true,
                                                                  .vocab = 512, .seed = 1 },
                                      &blob, &bytes, err, sizeof(err)), 0);
    trace_free(&t);
    uint8_t *b = blob;
    struct rt_blob_req *r = (struct rt_blob_req *)(b + sizeof(struct rt_blob_header));
    b[bytes - 1] ^= 0x10;
    expect_check_error(blob, bytes, "checksum");
    b[bytes - 1] ^= 0x10;
    assert_int_equal(rt_blob_check(blob, bytes, err, sizeof(err)), 0);
    expect_check_error(blob, bytes - 4, "were loaded");
    expect_check_error(blob, 16, "shorter than its 48-byte header");
    uint64_t keep = r[2].arrival_ps;
    r[2].arrival_ps = r[1].arrival_ps - 1;
    blob_reseal(blob);
    expect_check_error(blob, bytes, "request 2 arrives at");
    r[2].arrival_ps = keep;
    r[4].ids_first = ((struct rt_blob_header *)blob)->ids_count - 1;
    blob_reseal(blob);
    expect_check_error(blob, bytes, "request 4: ids");
    r[4].ids_first = RT_BLOB_NO_IDS;
    blob_reseal(blob);
    assert_int_equal(rt_blob_check(blob, bytes, err, sizeof(err)), 0);
    ((struct rt_blob_header *)blob)->magic ^= 1;
    expect_check_error(blob, bytes, "magic");
    free(blob);
}

/* ---- hash ids: synthetic prompts, their check, the blob's copy --------------------------- */

#define VOCAB_BIG (1u << 20) /* few chance equalities: differing tokens differ */

/* trace_synth_ids as it was before hash ids (request-seeded only), written out again so
   that a change of the ids of traces without hashes shows. */
static void old_synth_ids(uint64_t seed, size_t i, uint32_t len, uint32_t vocab, uint32_t *ids)
{
    const uint64_t golden = 0x9e3779b97f4a7c15ull;
    uint64_t m = (uint64_t)i + golden, base;
    m = (m ^ (m >> 30)) * 0xbf58476d1ce4e5b9ull;
    m = (m ^ (m >> 27)) * 0x94d049bb133111ebull;
    base = seed ^ (m ^ (m >> 31));
    base = (base ^ (base >> 30)) * 0xbf58476d1ce4e5b9ull;
    base = (base ^ (base >> 27)) * 0x94d049bb133111ebull;
    base ^= base >> 31;
    for (uint32_t k = 0; k < len; k++) {
        uint64_t z = base + (uint64_t)k * golden;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        ids[k] = vocab ? (uint32_t)((z ^ (z >> 31)) % vocab) : 0;
    }
}

static void assert_tokens_differ(const uint32_t *a, const uint32_t *b, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++)
        if (a[k] == b[k])
            fail_msg("token %u is the same (%u)", k, a[k]);
}

/* Tokens follow the hash ids over the hash blocks a prompt fills, wherever they sit and
   whatever the request's index; elsewhere they are the request's own. */
static void test_synth_ids_by_hash(void **state)
{
    (void)state;
    static uint64_t ha[] = { 5, 6, 7 }, hb[] = { 5, 9, 7 }, hc[] = { 6, 5 };
    const struct rt_trace_entry a = { .input_length = 40, .hash_ids = ha, .nhash = 3 },
                                b = { .input_length = 40, .hash_ids = hb, .nhash = 3 },
                                c = { .input_length = 32, .hash_ids = hc, .nhash = 2 };
    uint32_t ia[40], ib[40], ic[32], old[40];
    trace_synth_ids(3, 0, &a, 16, 40, VOCAB_BIG, ia);
    trace_synth_ids(3, 7, &b, 16, 40, VOCAB_BIG, ib);
    assert_memory_equal(ia, ib, 16 * sizeof(ia[0]));   /* hash 5 */
    assert_tokens_differ(ia + 16, ib + 16, 16);        /* 6 against 9 */
    assert_tokens_differ(ia + 32, ib + 32, 8);         /* 7, but 40 tokens fill 2 blocks */
    old_synth_ids(3, 0, 40, VOCAB_BIG, old);
    assert_memory_equal(ia + 32, old + 32, 8 * sizeof(ia[0]));
    assert_tokens_differ(ia, old, 32);
    trace_synth_ids(3, 2, &c, 16, 32, VOCAB_BIG, ic);  /* the same ids, other places */
    assert_memory_equal(ic, ia + 16, 16 * sizeof(ic[0]));
    assert_memory_equal(ic + 16, ia, 16 * sizeof(ic[0]));
    trace_synth_ids(4, 0, &a, 16, 40, VOCAB_BIG, ib);  /* the seed still matters */
    assert_tokens_differ(ia, ib, 40);
    trace_synth_ids(3, 0, &a, 16, 40, 7, ia);
    for (uint32_t k = 0; k < 40; k++)
        assert_true(ia[k] < 7);
}

/* Without hash blocks to follow, an entry's tokens are the old request-seeded ones. */
static void test_synth_ids_without_hashes(void **state)
{
    (void)state;
    static uint64_t h[] = { 5, 6, 7 };
    const struct rt_trace_entry with = { .input_length = 40, .hash_ids = h, .nhash = 3 },
                                none = { .input_length = 40 },
                                shorter = { .input_length = 15, .hash_ids = h, .nhash = 3 };
    uint32_t ids[40], old[40];
    static const size_t idx[] = { 0, 1, 5, 1000 };
    for (size_t k = 0; k < sizeof(idx) / sizeof(idx[0]); k++) {
        old_synth_ids(9, idx[k], 40, 512, old);
        trace_synth_ids(9, idx[k], NULL, 16, 40, 512, ids);
        assert_memory_equal(ids, old, sizeof(ids));
        trace_synth_ids(9, idx[k], &with, 0, 40, 512, ids);  /* hash_block 0 */
        assert_memory_equal(ids, old, sizeof(ids));
        trace_synth_ids(9, idx[k], &none, 16, 40, 512, ids);
        assert_memory_equal(ids, old, sizeof(ids));
        trace_synth_ids(9, idx[k], &shorter, 16, 15, 512, ids);  /* no hash block filled */
        assert_memory_equal(ids, old, 15 * sizeof(ids[0]));
    }
    trace_synth_ids(9, 0, &with, 16, 40, 0, ids);  /* no vocabulary: zeros */
    for (uint32_t k = 0; k < 40; k++)
        assert_int_equal(ids[k], 0);
}

/* Two 40-token prompts with their own ids, hash blocks of 16: hash 1 shared (block 0),
   block 1 named differently, hash 3 shared over a block 40 tokens do not fill. */
static uint32_t cid[2][40];
static uint64_t chash[2][3] = { { 1, 2, 3 }, { 1, 4, 3 } };
static struct rt_trace_entry cent[2];

static struct rt_trace check_trace(void)
{
    for (uint32_t r = 0; r < 2; r++) {
        for (uint32_t k = 0; k < 40; k++)
            cid[r][k] = k < 16 ? k : 100 * (r + 1) + k;
        cent[r] = (struct rt_trace_entry){ .input_length = 40, .output_length = 1,
                                           .input_ids = cid[r], .hash_ids = chash[r],
                                           .nhash = 3 };
    }
    return (struct rt_trace){ .e = cent, .n = 2 };
}

static void expect_hash_mismatch(const struct rt_trace *t, uint32_t hash_block)
{
    err[0] = '\0';
    assert_int_equal(trace_check_hash_ids(t, hash_block, err, sizeof(err)), NPU_ERR_FORMAT);
    if (!strstr(err, "request 1") || !strstr(err, "request 0"))
        fail_msg("'%s' does not name both requests", err);
}

static void test_check_hash_ids(void **state)
{
    (void)state;
    struct rt_trace t = check_trace();
    assert_int_equal(trace_check_hash_ids(&t, 16, err, sizeof(err)), 0);
    cid[1][5] ^= 1;  /* inside hash 1's block */
    expect_hash_mismatch(&t, 16);
    assert_int_equal(trace_check_hash_ids(&t, 0, err, sizeof(err)), 0);  /* no hash blocks */
    cid[1][5] ^= 1;
    cent[1].input_ids = NULL;  /* synthetic ids cannot be those of request 0 */
    expect_hash_mismatch(&t, 16);
    cent[0].input_ids = NULL;  /* both synthetic: they follow the hashes */
    assert_int_equal(trace_check_hash_ids(&t, 16, err, sizeof(err)), 0);
    /* ids trace_synth_ids makes agree with their hashes. */
    t = check_trace();
    chash[1][1] = 2;
    for (uint32_t r = 0; r < 2; r++)
        trace_synth_ids(1, r, &cent[r], 16, 40, VOCAB_BIG, cid[r]);
    assert_int_equal(trace_check_hash_ids(&t, 16, err, sizeof(err)), 0);
    chash[1][1] = 4;
}

/* Four requests: 40 tokens with 5 hash ids (3 hash blocks: 2 ids dropped), 16 with 1, 20
   with none, 33 with 2 (of 3 hash blocks). */
static uint64_t bh0[] = { 1, 2, 3, 4, 5 }, bh1[] = { 1 }, bh3[] = { 1, 2 };
static struct rt_trace_entry bent[4];

static struct rt_trace hash_trace(void)
{
    static const uint32_t len[4] = { 40, 16, 20, 33 };
    static uint64_t *const hash[4] = { bh0, bh1, NULL, bh3 };
    static const uint32_t nhash[4] = { 5, 1, 0, 2 };
    for (uint32_t i = 0; i < 4; i++)
        bent[i] = (struct rt_trace_entry){ .timestamp_ms = i, .input_length = len[i],
                                           .output_length = 2, .hash_ids = hash[i],
                                           .nhash = nhash[i] };
    return (struct rt_trace){ .e = bent, .n = 4 };
}

/* The blob's ids are trace_synth_ids' by the hashes (requests 0 and 1 share hash 1's). */
static void expect_blob_ids(const void *blob, const struct rt_trace *t, uint32_t hash_block)
{
    const struct rt_blob_req *r = rt_blob_reqs(blob);
    uint32_t want[40];
    for (uint32_t i = 0; i < t->n; i++) {
        trace_synth_ids(5, i, &t->e[i], hash_block, t->e[i].input_length, 1000, want);
        assert_memory_equal(rt_blob_ids(blob) + r[i].ids_first, want,
                            t->e[i].input_length * sizeof(want[0]));
    }
}

static void test_blob_hashes(void **state)
{
    (void)state;
    struct rt_trace t = hash_trace();
    void *blob;
    size_t bytes;
    struct rt_blob_opts o = { .with_ids = true, .vocab = 1000, .seed = 5, .hash_block = 16 };
    assert_int_equal(trace_blob_build(&t, &o, &blob, &bytes, err, sizeof(err)), 0);
    assert_int_equal(rt_blob_check(blob, bytes, err, sizeof(err)), 0);
    const struct rt_blob_header *h = blob;
    const struct rt_blob_req *r = rt_blob_reqs(blob);
    assert_int_equal(h->version, 2);
    assert_int_equal(h->hash_block, 16);
    assert_int_equal(h->hash_count, 6);
    assert_int_equal(h->ids_count, 109);
    assert_int_equal(bytes, sizeof(*h) + 4 * sizeof(*r) + 6 * sizeof(uint64_t) + 109 * 4);
    static const uint32_t nhash[] = { 3, 1, 0, 2 }, first[] = { 0, 3, 0, 4 };
    static const uint64_t hashes[] = { 1, 2, 3, 1, 1, 2 };
    for (uint32_t i = 0; i < 4; i++) {
        assert_int_equal(r[i].nhash, nhash[i]);
        assert_int_equal(r[i].hash_first, first[i]);
        assert_int_equal(r[i].reserved, 0);
    }
    assert_memory_equal(rt_blob_hashes(blob), hashes, sizeof(hashes));
    expect_blob_ids(blob, &t, 16);
    assert_memory_equal(rt_blob_ids(blob) + r[1].ids_first, rt_blob_ids(blob), 16 * 4);
    free(blob);
    o.hash_block = 0;  /* no hash ids carried, ids request-seeded */
    assert_int_equal(trace_blob_build(&t, &o, &blob, &bytes, err, sizeof(err)), 0);
    assert_int_equal(rt_blob_check(blob, bytes, err, sizeof(err)), 0);
    h = blob;
    r = rt_blob_reqs(blob);
    assert_true(h->hash_block == 0 && h->hash_count == 0);
    assert_int_equal(bytes, sizeof(*h) + 4 * sizeof(*r) + 109 * 4);
    for (uint32_t i = 0; i < 4; i++)
        assert_true(r[i].nhash == 0 && r[i].hash_first == 0);
    expect_blob_ids(blob, &t, 0);
    free(blob);
}

/* rt_blob_check on hash ids edited by hand (checksum resealed): each edit refused, each
   undo accepted again. */
static void expect_hash_edit(void *blob, uint64_t bytes, uint64_t *field, uint64_t value,
                             const char *want)
{
    const uint64_t keep = *field;
    *field = value;
    blob_reseal(blob);
    expect_check_error(blob, bytes, want);
    *field = keep;
    blob_reseal(blob);
    assert_int_equal(rt_blob_check(blob, bytes, err, sizeof(err)), 0);
}

static void test_blob_check_hashes(void **state)
{
    (void)state;
    struct rt_trace t = hash_trace();
    void *blob;
    size_t bytes;
    const struct rt_blob_opts o = { .hash_block = 16 };
    assert_int_equal(trace_blob_build(&t, &o, &blob, &bytes, err, sizeof(err)), 0);
    struct rt_blob_header *h = blob;
    struct rt_blob_req *r = (struct rt_blob_req *)rt_blob_reqs(blob);
    uint64_t nhash = r[1].nhash;  /* 32-bit fields edited through a copy */
    r[1].nhash = 2;  /* 16 tokens: one hash block */
    blob_reseal(blob);
    expect_check_error(blob, bytes, "request 1: hash ids [3, 5)");
    r[1].nhash = (uint32_t)nhash;
    expect_hash_edit(blob, bytes, &r[3].hash_first, 5, "request 3: hash ids [5, 7)");
    expect_hash_edit(blob, bytes, &r[2].hash_first, 1, "request 2: reserved field or");
    r[2].reserved = 1;
    blob_reseal(blob);
    expect_check_error(blob, bytes, "request 2: reserved field");
    r[2].reserved = 0;
    blob_reseal(blob);
    h->hash_block = 0;
    expect_check_error(blob, bytes, "6 hash ids without a hash block size");
    h->hash_block = 16;
    expect_hash_edit(blob, bytes, &h->hash_count, 5, "5 hash ids and");
    free(blob);
}

/* The bundled traces are what `npuctl trace gen` makes of their documented options. */
static void test_bundled_traces(void **state)
{
    (void)state;
    static const struct {
        const char *file, *preset;
        uint32_t count;
        double rate;
    } bundled[] = { { "tiny-16.jsonl", "tiny", 16, 50.0 }, { "arxiv-100.jsonl", "arxiv", 100, 1.0 } };
    for (size_t k = 0; k < 2; k++) {
        char path[512];
        struct rt_trace file, gen;
        snprintf(path, sizeof(path), "%s/models/traces/%s", NPU_SOURCE_DIR, bundled[k].file);
        assert_int_equal(trace_read_jsonl(path, &file, err, sizeof(err)), 0);
        struct rt_trace_gen_params p = gen_params(bundled[k].preset, bundled[k].count,
                                                  bundled[k].rate, 1);
        assert_int_equal(trace_gen(&p, &gen, err, sizeof(err)), 0);
        assert_int_equal(file.n, gen.n);
        for (size_t i = 0; i < gen.n; i++)
            if (file.e[i].timestamp_ms != gen.e[i].timestamp_ms ||
                file.e[i].input_length != gen.e[i].input_length ||
                file.e[i].output_length != gen.e[i].output_length)
                fail_msg("%s: request %zu differs from the generator's", bundled[k].file, i);
        trace_free(&file);
        trace_free(&gen);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jsonl_limits),
        cmocka_unit_test(test_jsonl_errors),       cmocka_unit_test(test_jsonl_read_sample),
        cmocka_unit_test(test_jsonl_round_trip),   cmocka_unit_test(test_import_samples),
        cmocka_unit_test(test_import_errors),      cmocka_unit_test(test_gen_limit),
        cmocka_unit_test(test_import_filters),
        cmocka_unit_test(test_gen_determinism),
        cmocka_unit_test(test_gen_arrivals),       cmocka_unit_test(test_gen_lengths),
        cmocka_unit_test(test_load_knobs),
        cmocka_unit_test(test_blob_build),         cmocka_unit_test(test_blob_check_refuses),
        cmocka_unit_test(test_bundled_traces),
        cmocka_unit_test(test_synth_ids_by_hash),  cmocka_unit_test(test_synth_ids_without_hashes),
        cmocka_unit_test(test_check_hash_ids),     cmocka_unit_test(test_blob_hashes),
        cmocka_unit_test(test_blob_check_hashes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
