/* SPDX-License-Identifier: MIT */
/*
 * Serving metrics (runtime/host/src/serve_log.c, metrics*.c; docs/outputs.md) on a hand-written
 * run, tests/host/data/serve/run.log: 4 requests, 3 finished with the token times below,
 * 1 rejected; 3 iterations, engine records of 2 cores, two MODEL rank lines.
 *   id 0: arrives 0 ms, tokens 10 15 20       TTFT 10  gaps 5 5   e2e 20  TPOT 5
 *   id 1: arrives 2 ms, tokens 12 30          TTFT 10  gap 18     e2e 28  TPOT 18
 *   id 2: arrives 4 ms, tokens 24 28 32 36    TTFT 20  gaps 4 4 4 e2e 32  TPOT 4
 *   id 3: arrives 5 ms, rejected (too_long)
 * Every expected number below is worked out by hand from that table.
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "npu_enums.h"
#include "rt/metrics.h"
#include "rt/serve_log.h"

#define MS 1000000000ull /* ps */

static char tmpdir[256] = "/tmp/test_metrics.XXXXXX";
static char err[512];

static const char *data_path(const char *name)
{
    static char p[512];
    snprintf(p, sizeof(p), "%s/tests/host/data/serve/%s", NPU_SOURCE_DIR, name);
    return p;
}

static const char *tmp_path(const char *name)
{
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof(p[k]), "%s/%s", tmpdir, name);
    return p[k];
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char *buf = calloc(1, 1 << 16);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void expect_near(const char *what, double got, double want)
{
    if (fabs(got - want) > 1e-9 * (1.0 + fabs(want)))
        fail_msg("%s: got %.12g, want %.12g", what, got, want);
}

static void load_run(struct rt_serve_log *log)
{
    if (serve_log_parse(data_path("run.log"), log, err, sizeof(err)))
        fail_msg("run.log: %s", err);
}

static void summarise_run(struct rt_serve_log *log, struct rt_summary *s, double ttft_ms,
                          double tbt_ms)
{
    struct rt_slo slo = { ttft_ms, tbt_ms };
    load_run(log);
    memset(s, 0, sizeof(*s));
    if (metrics_read_chip_stats(data_path("chip_stats.json"), &s->energy, &s->hbm_bytes,
                                &s->noc_byte_hops, err, sizeof(err)))
        fail_msg("chip_stats.json: %s", err);
    metrics_summarise(log, &slo, s);
}

static void test_parse(void **state)
{
    (void)state;
    struct rt_serve_log log;
    load_run(&log);
    assert_true(log.done);
    assert_int_equal(log.nreqs, 4);
    assert_string_equal(log.sched, "fcfs");
    assert_int_equal(log.layers, 2);
    assert_int_equal(log.blocks_total, 64);
    assert_int_equal(log.end_ps, 36 * MS);
    assert_int_equal(log.iterations, 3);
    assert_int_equal(log.niters, 3);
    assert_int_equal(log.nengines, 3);
    assert_int_equal(log.expert_load_bytes, 3500000); /* not the _at_load keys */
    const struct rt_req_record *r = log.reqs;
    assert_true(r[0].arrived && r[0].admitted && r[0].finished && !r[0].rejected);
    assert_int_equal(r[1].arrival_ps, 2 * MS);
    assert_int_equal(r[2].admit_ps, 6 * MS);
    assert_int_equal(r[2].input_len, 16);
    assert_int_equal(r[2].ntokens, 4);
    assert_int_equal(r[2].token_ps[3], 36 * MS);
    assert_int_equal(r[2].tokens[3], 304);
    assert_int_equal(r[1].ntokens, 2);
    assert_true(r[3].rejected && !r[3].admitted);
    assert_string_equal(r[3].reason, "too_long");
    const struct rt_iter_record *it = &log.iters[1];
    assert_int_equal(it->prefill_tokens, 16);
    assert_int_equal(it->decode_tokens, 2);
    assert_int_equal(it->blocks_used, 5);
    assert_int_equal(it->ring_used, 30);
    assert_int_equal(it->ring_total, 128);
    assert_int_equal(log.engines[2].busy_ps[0], 9 * MS);
    serve_log_free(&log);
}

static void test_percentile(void **state)
{
    (void)state;
    const double v[] = { 1, 2, 3, 4 };
    expect_near("p0", metrics_percentile(v, 4, 0), 1);
    expect_near("p50", metrics_percentile(v, 4, 50), 2.5);
    expect_near("p99", metrics_percentile(v, 4, 99), 3.97); /* numpy.percentile */
    expect_near("p100", metrics_percentile(v, 4, 100), 4);
    expect_near("one", metrics_percentile(v, 1, 99), 1);
    expect_near("none", metrics_percentile(v, 0, 50), 0);
}

static void test_summary(void **state)
{
    (void)state;
    struct rt_serve_log log;
    struct rt_summary s;
    summarise_run(&log, &s, 25.0, 10.0); /* id 1 misses on TBT (18 ms) only */
    assert_int_equal(s.total, 4);
    assert_int_equal(s.completed, 3);
    assert_int_equal(s.rejected, 1);
    assert_int_equal(s.unfinished, 0);
    assert_int_equal(s.nreasons, 1);
    assert_string_equal(s.reasons[0].reason, "too_long");
    assert_int_equal(s.total_input_tokens, 28);
    assert_int_equal(s.total_output_tokens, 9);
    expect_near("duration", s.duration_s, 0.036);
    expect_near("arrival_rate", s.arrival_rate, 3 / 0.005);
    expect_near("request_throughput", s.request_throughput, 3 / 0.036);
    expect_near("output_throughput", s.output_throughput, 9 / 0.036);
    expect_near("total_token_throughput", s.total_token_throughput, 37 / 0.036);
    expect_near("ttft mean", s.ttft.mean, 40.0 / 3);
    expect_near("ttft median", s.ttft.median, 10);
    expect_near("ttft std", s.ttft.std, sqrt(200.0 / 9));
    expect_near("ttft p90", s.ttft.p90, 18);
    expect_near("ttft p99", s.ttft.p99, 19.8);
    expect_near("tpot mean", s.tpot.mean, 9);
    expect_near("tpot median", s.tpot.median, 5);
    expect_near("e2el mean", s.e2el.mean, 80.0 / 3);
    /* gaps 4 4 4 5 5 18 */
    assert_int_equal(s.tbt.n, 6);
    expect_near("tbt mean", s.tbt.mean, 40.0 / 6);
    expect_near("tbt median", s.tbt.median, 4.5);
    expect_near("tbt std", s.tbt.std, sqrt(1398.0 / 54)); /* sum of squares 1398/9 */
    expect_near("tbt p90", s.tbt.p90, 11.5);
    expect_near("tbt p99", s.tbt.p99, 17.35);
    expect_near("tbt max", s.tbt.max, 18);
    expect_near("itl = tbt", s.itl.p99, s.tbt.p99);
    double x[3] = { 20.0 / 3, 14, 8 }, sum = x[0] + x[1] + x[2];
    expect_near("jain", s.jain_fairness,
                sum * sum / (3 * (x[0] * x[0] + x[1] * x[1] + x[2] * x[2])));
    expect_near("slo", s.slo_attainment, 0.5);
    expect_near("ttft attainment", s.ttft_attainment, 0.75);
    expect_near("tbt attainment", s.tbt_attainment, 0.5);
    assert_int_equal(s.expert_load_bytes, 3500000);
    assert_int_equal(s.hbm_bytes, 123456789);
    assert_int_equal(s.noc_byte_hops, 987654);
    expect_near("energy static", s.energy.stat, 0.04);
    expect_near("energy/token", s.energy_per_token_j, 0.37 / 37);
    expect_near("energy/output token", s.energy_per_output_token_j, 0.37 / 9);
    assert_int_equal(s.iterations, 3);
    expect_near("mean decode batch", s.mean_decode_batch, 2.5);
    /* the admit lines' cached= (request 2 found 8 of its 16 prompt tokens) over the
       admitted prompts' 8 + 4 + 16 tokens */
    assert_true(s.prefix_cache);
    assert_int_equal(s.prefix_hit_tokens, 8);
    assert_int_equal(s.prefix_query_tokens, 28);
    expect_near("prefix hit rate", s.prefix_hit_rate, 8.0 / 28);
    assert_int_equal(s.prefix_evicted_blocks, 3); /* the iter lines' latest evicted= */
    assert_true(s.done);
    serve_log_free(&log);
}

static void test_slo_variants(void **state)
{
    (void)state;
    struct rt_serve_log log;
    struct rt_summary s;
    summarise_run(&log, &s, 15.0, 10.0); /* id 2 now misses on TTFT (20 ms) too */
    expect_near("slo", s.slo_attainment, 0.25);
    expect_near("ttft attainment", s.ttft_attainment, 0.5);
    expect_near("tbt attainment", s.tbt_attainment, 0.5);
    metrics_summarise(&log, NULL, &s); /* no SLO: every completed request meets it */
    expect_near("no slo", s.slo_attainment, 0.75);
    expect_near("kept energy", s.energy_per_token_j, 0.37 / 37);
    serve_log_free(&log);
}

static void test_csv(void **state)
{
    (void)state;
    struct rt_serve_log log;
    struct rt_slo slo = { 25.0, 10.0 };
    load_run(&log);
    if (metrics_write_requests_csv(tmp_path("requests.csv"), tmp_path("tokens.csv"), &log,
                                   &slo, "rate=2,\"x\"", err, sizeof(err)))
        fail_msg("%s", err);
    char *req = read_text(tmp_path("requests.csv")), *tok = read_text(tmp_path("tokens.csv"));
    /* queue_ms = admit - arrival; tpot_ms = (last - first) / (generated - 1); the run's
       name quoted as RFC 4180 quotes a comma and a quote */
    assert_string_equal(req,
        "id,arrival_ms,admit_ms,first_token_ms,finish_ms,ttft_ms,mean_tbt_ms,max_tbt_ms,"
        "e2e_ms,input_tokens,output_tokens,generated,slo_met,state,reason,queue_ms,tpot_ms,"
        "cached_tokens,run\n"
        "0,0.000000,0.000000,10.000000,20.000000,10.000000,5.000000,5.000000,20.000000,"
        "8,3,3,1,finished,,0.000000,5.000000,0,\"rate=2,\"\"x\"\"\"\n"
        "1,2.000000,2.000000,12.000000,30.000000,10.000000,18.000000,18.000000,28.000000,"
        "4,2,2,0,finished,,0.000000,18.000000,0,\"rate=2,\"\"x\"\"\"\n"
        "2,4.000000,6.000000,24.000000,36.000000,20.000000,4.000000,4.000000,32.000000,"
        "16,4,4,1,finished,,2.000000,4.000000,8,\"rate=2,\"\"x\"\"\"\n"
        "3,5.000000,,,5.000000,,,,,100000,10,0,0,rejected,too_long,,,,\"rate=2,\"\"x\"\"\"\n");
    assert_non_null(strstr(tok, "id,n,t_ms,token\n0,0,10.000000,101\n"));
    assert_non_null(strstr(tok, "\n2,3,36.000000,304\n"));
    size_t lines = 0;
    for (const char *p = tok; *p; p++)
        lines += *p == '\n';
    assert_int_equal(lines, 1 + 9);
    free(req);
    free(tok);
    /* read back as npuctl plot does: finished requests only, sorted */
    struct rt_samples ttft, tbt;
    if (metrics_read_latency_samples(tmp_path("requests.csv"), tmp_path("tokens.csv"), &ttft,
                                     &tbt, err, sizeof(err)))
        fail_msg("%s", err);
    const double want_ttft[] = { 10, 10, 20 }, want_tbt[] = { 4, 4, 4, 5, 5, 18 };
    assert_int_equal(ttft.n, 3);
    assert_int_equal(tbt.n, 6);
    for (size_t i = 0; i < 6; i++) {
        expect_near("ttft sample", ttft.v[i % 3], want_ttft[i % 3]);
        expect_near("tbt sample", tbt.v[i], want_tbt[i]);
    }
    metrics_samples_free(&ttft);
    metrics_samples_free(&tbt);
    write_text(tmp_path("bad.csv"), "id,state\n0,finished\n");
    assert_int_equal(metrics_read_latency_samples(tmp_path("bad.csv"), tmp_path("tokens.csv"),
                                                  &ttft, &tbt, err, sizeof(err)),
                     NPU_ERR_FORMAT);
    assert_non_null(strstr(err, "bad.csv: no column 'ttft_ms'"));
    serve_log_free(&log);
}

static double json_num(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_number(v))
        fail_msg("summary.json: %s missing", key);
    return json_number_value(v);
}

static void test_summary_json(void **state)
{
    (void)state;
    struct rt_serve_log log;
    struct rt_summary s;
    struct rt_slo slo = { 25.0, 10.0 };
    struct rt_label labels[] = { { "chip", "tiny-2" }, { "sched", "fcfs" },
                                 { "request_rate", "4" } };
    summarise_run(&log, &s, slo.ttft_ms, slo.tbt_ms);
    if (metrics_write_summary_json(tmp_path("summary.json"), &s, &slo, labels, 3, NULL, NULL,
                                   err, sizeof(err)))
        fail_msg("%s", err);
    json_error_t je;
    json_t *o = json_load_file(tmp_path("summary.json"), 0, &je);
    if (!o)
        fail_msg("summary.json does not parse: %d: %s", je.line, je.text);
    expect_near("completed", json_num(o, "completed"), 3);
    expect_near("duration", json_num(o, "duration"), 0.036);
    expect_near("mean_ttft_ms", json_num(o, "mean_ttft_ms"), 40.0 / 3);
    expect_near("p99_ttft_ms", json_num(o, "p99_ttft_ms"), 19.8);
    expect_near("p99_itl_ms", json_num(o, "p99_itl_ms"), 17.35);
    expect_near("median_tpot_ms", json_num(o, "median_tpot_ms"), 5);
    expect_near("tbt.p90", json_num(json_object_get(o, "tbt"), "p90"), 11.5);
    expect_near("slo.tbt_ms", json_num(json_object_get(o, "slo"), "tbt_ms"), 10);
    expect_near("rejected_reasons.too_long",
                json_num(json_object_get(o, "rejected_reasons"), "too_long"), 1);
    expect_near("energy_j.total", json_num(json_object_get(o, "energy_j"), "total"), 0.37);
    expect_near("energy_per_token_j", json_num(o, "energy_per_token_j"), 0.01);
    expect_near("slo_attainment", json_num(o, "slo_attainment"), 0.5);
    expect_near("prefix_cache_hit_rate", json_num(o, "prefix_cache_hit_rate"), 8.0 / 28);
    expect_near("prefix_cache_hit_tokens", json_num(o, "prefix_cache_hit_tokens"), 8);
    expect_near("prefix_cache_evicted_blocks", json_num(o, "prefix_cache_evicted_blocks"), 3);
    assert_string_equal(json_string_value(json_object_get(json_object_get(o, "labels"),
                                                          "sched")), "fcfs");
    assert_true(json_is_true(json_object_get(o, "complete")));
    json_decref(o);
    serve_log_free(&log);
}

/* vLLM's run keys and per-request arrays, read as its result readers do: the keys at the
   top level, the arrays one entry per prompt in request order, seconds. */
static void test_summary_run_keys(void **state)
{
    (void)state;
    struct rt_serve_log log;
    struct rt_summary s;
    struct rt_slo slo = { 25.0, 10.0 };
    summarise_run(&log, &s, slo.ttft_ms, slo.tbt_ms);
    const struct rt_run_keys run = { .date = "20261202-120000", .backend = "npu-mesh",
                                     .model_id = "tiny-moe", .request_rate = INFINITY,
                                     .burstiness = NAN, .max_concurrency = 4 };
    if (metrics_write_summary_json(tmp_path("summary.json"), &s, &slo, NULL, 0, &run, &log, err,
                                   sizeof(err)))
        fail_msg("%s", err);
    json_error_t je;
    json_t *o = json_load_file(tmp_path("summary.json"), 0, &je);
    if (!o)
        fail_msg("summary.json does not parse: %d: %s", je.line, je.text);
    assert_string_equal(json_string_value(json_object_get(o, "date")), "20261202-120000");
    assert_string_equal(json_string_value(json_object_get(o, "backend")), "npu-mesh");
    assert_string_equal(json_string_value(json_object_get(o, "model_id")), "tiny-moe");
    assert_string_equal(json_string_value(json_object_get(o, "request_rate")), "inf");
    assert_true(json_is_null(json_object_get(o, "burstiness")));
    expect_near("max_concurrency", json_num(o, "max_concurrency"), 4);
    /* requests 0 and 2 meet 25 ms / 10 ms (1 has a gap of 18 ms, 3 was rejected) */
    expect_near("request_goodput", json_num(o, "request_goodput"), 2 / 0.036);
    static const double in[] = { 8, 4, 16, 100000 }, out[] = { 3, 2, 4, 0 };
    static const double ttft[] = { 0.010, 0.010, 0.020, 0 };
    static const char *const errors[] = { "", "", "", "too_long" };
    static const size_t gaps[] = { 2, 1, 3, 0 };
    json_t *a[] = { json_object_get(o, "input_lens"), json_object_get(o, "output_lens"),
                    json_object_get(o, "ttfts"), json_object_get(o, "itls"),
                    json_object_get(o, "errors") };
    for (size_t k = 0; k < 5; k++)
        assert_int_equal(json_array_size(a[k]), 4);
    for (size_t i = 0; i < 4; i++) {
        expect_near("input_lens[i]", json_number_value(json_array_get(a[0], i)), in[i]);
        expect_near("output_lens[i]", json_number_value(json_array_get(a[1], i)), out[i]);
        expect_near("ttfts[i]", json_number_value(json_array_get(a[2], i)), ttft[i]);
        assert_int_equal(json_array_size(json_array_get(a[3], i)), gaps[i]);
        assert_string_equal(json_string_value(json_array_get(a[4], i)), errors[i]);
    }
    expect_near("itls[1][0]", json_number_value(json_array_get(json_array_get(a[3], 1), 0)),
                0.018);
    json_decref(o);
    /* a finite rate is a number, and the trace's own timing has no burstiness */
    const struct rt_run_keys rated = { .date = "d", .backend = "b", .model_id = "m",
                                       .request_rate = 2.5, .burstiness = 0.5 };
    if (metrics_write_summary_json(tmp_path("summary.json"), &s, &slo, NULL, 0, &rated, &log,
                                   err, sizeof(err)))
        fail_msg("%s", err);
    o = json_load_file(tmp_path("summary.json"), 0, &je);
    assert_non_null(o);
    expect_near("request_rate", json_num(o, "request_rate"), 2.5);
    expect_near("burstiness", json_num(o, "burstiness"), 0.5);
    assert_true(json_is_null(json_object_get(o, "max_concurrency")));
    json_decref(o);
    serve_log_free(&log);
}

static size_t count_events(json_t *ev, const char *ph, const char *name, int tid)
{
    size_t n = 0, i;
    json_t *e;
    json_array_foreach(ev, i, e) {
        const char *p = json_string_value(json_object_get(e, "ph"));
        const char *nm = json_string_value(json_object_get(e, "name"));
        int t = (int)json_integer_value(json_object_get(e, "tid"));
        n += p && strcmp(p, ph) == 0 && (!name || (nm && strcmp(nm, name) == 0)) &&
             (tid < 0 || t == tid);
    }
    return n;
}

static void test_perfetto(void **state)
{
    (void)state;
    struct rt_serve_log log;
    struct rt_label labels[] = { { "chip", "tiny \"2\"" } }; /* quotes must be escaped */
    load_run(&log);
    if (metrics_write_perfetto_labelled(tmp_path("trace.json"), &log, labels, 1, err,
                                        sizeof(err)))
        fail_msg("%s", err);
    json_error_t je;
    json_t *o = json_load_file(tmp_path("trace.json"), 0, &je);
    if (!o)
        fail_msg("trace.json does not parse: %d: %s", je.line, je.text);
    json_t *ev = json_object_get(o, "traceEvents");
    assert_true(json_is_array(ev));
    assert_string_equal(json_string_value(json_object_get(o, "displayTimeUnit")), "ns");
    assert_int_equal(count_events(ev, "M", NULL, -1), 4); /* process, tid 0, 2 cores */
    assert_int_equal(count_events(ev, "X", NULL, 0), 3);
    assert_int_equal(count_events(ev, "X", "prefill", 0), 1);
    assert_int_equal(count_events(ev, "X", "prefill+decode", 0), 1);
    assert_int_equal(count_events(ev, "X", "decode", 0), 1);
    assert_int_equal(count_events(ev, "C", NULL, -1), 15);
    assert_int_equal(count_events(ev, "C", "kv_blocks_cached", -1), 3);
    assert_int_equal(count_events(ev, "C", "kv_blocks_used", -1), 3);
    assert_int_equal(count_events(ev, "X", NULL, 1), 8); /* core 0: 4 + 4 engines */
    assert_int_equal(count_events(ev, "X", NULL, 2), 3); /* core 1: noc idle */
    /* 3 request spans with their phases nested: request 2 alone queued (4 to 6 ms; the
       others were admitted as they arrived), each a prefill and a decode phase and a
       first-token instant; the rejected one an instant */
    assert_int_equal(count_events(ev, "b", NULL, -1), 3 + 1 + 3 + 3);
    assert_int_equal(count_events(ev, "e", NULL, -1), 3 + 1 + 3 + 3);
    assert_int_equal(count_events(ev, "b", "queued", -1), 1);
    assert_int_equal(count_events(ev, "b", "prefill", -1), 3);
    assert_int_equal(count_events(ev, "e", "decode", -1), 3);
    assert_int_equal(count_events(ev, "n", "first token", -1), 3);
    assert_int_equal(count_events(ev, "i", NULL, -1), 1);
    assert_int_equal(json_array_size(ev), 4 + 3 + 15 + 11 + 7 + 17);
    /* the admit lines' cached= on each prefill phase (request 2: 8 tokens) */
    size_t pk;
    json_t *px;
    json_array_foreach(ev, pk, px)
        if (!strcmp(json_string_value(json_object_get(px, "ph")), "b") &&
            !strcmp(json_string_value(json_object_get(px, "name")), "prefill"))
            assert_int_equal(json_integer_value(json_object_get(
                                 json_object_get(px, "args"), "cached_tokens")),
                             json_integer_value(json_object_get(px, "id")) == 2 ? 8 : 0);
    static const struct { const char *ph, *name; double ts; int id; } at[] = {
        { "b", "queued", 4000.0, 2 }, { "e", "queued", 6000.0, 2 },
        { "b", "prefill", 6000.0, 2 }, { "n", "first token", 24000.0, 2 },
        { "e", "decode", 36000.0, 2 }, { "n", "first token", 12000.0, 1 },
    };
    for (size_t k = 0; k < sizeof(at) / sizeof(at[0]); k++) {
        size_t j, hits = 0;
        json_t *x;
        json_array_foreach(ev, j, x)
            hits += !strcmp(json_string_value(json_object_get(x, "ph")), at[k].ph) &&
                    !strcmp(json_string_value(json_object_get(x, "name")), at[k].name) &&
                    json_integer_value(json_object_get(x, "id")) == at[k].id &&
                    json_number_value(json_object_get(x, "ts")) == at[k].ts;
        if (hits != 1)
            fail_msg("%s %s of request %d at %.0f us: %zu events", at[k].ph, at[k].name,
                     at[k].id, at[k].ts, hits);
    }
    size_t i, found = 0;
    json_t *e;
    json_array_foreach(ev, i, e) { /* core 0's matrix in iteration 1: from its start */
        if (json_integer_value(json_object_get(e, "tid")) == 1 &&
            json_number_value(json_object_get(e, "dur")) == 9000.0) {
            expect_near("ts", json_number_value(json_object_get(e, "ts")), 12000.0);
            assert_string_equal(json_string_value(json_object_get(e, "name")), "matrix");
            found++;
        }
    }
    assert_int_equal(found, 1);
    json_t *args = json_object_get(json_array_get(ev, 0), "args");
    assert_string_equal(json_string_value(json_object_get(args, "name")), "tiny \"2\" (fcfs)");
    json_decref(o);
    serve_log_free(&log);
}

static void expect_bad(const char *text, int line, const char *what);

/* pd-disagg: instance lines, overlapping iterations of two instances, each on its track. */
static void test_instances(void **state)
{
    (void)state;
    struct rt_serve_log log;
    write_text(tmp_path("pd.log"),
               "[ 0.0 us ctrl ] SERVE begin requests=1 sched=pd-disagg instances=2\n"
               "[ 0.0 us ctrl ] SERVE instance id=0 role=prefill cores=4\n"
               "[ 0.0 us ctrl ] SERVE instance id=1 role=decode cores=4\n"
               "[ 1.0 us ctrl ] SERVE iter n=1 t0=0 t1=9 prefill=8 blocks=1/8 inst=0\n"
               "[ 1.0 us ctrl ] SERVE iter n=2 t0=5 t1=12 decode=1 blocks=2/8 inst=1 pulls=1\n");
    if (serve_log_parse(tmp_path("pd.log"), &log, err, sizeof(err)))
        fail_msg("%s", err);
    assert_int_equal(log.prefill_instances, 1);
    assert_int_equal(log.decode_instances, 1);
    assert_int_equal(log.niters, 2);
    assert_int_equal(log.iters[1].inst, 1);
    assert_int_equal(log.iters[1].pulls, 1);
    if (metrics_write_perfetto_labelled(tmp_path("pd.json"), &log, NULL, 0, err, sizeof(err)))
        fail_msg("%s", err);
    json_error_t je;
    json_t *o = json_load_file(tmp_path("pd.json"), 0, &je);
    assert_non_null(o);
    json_t *ev = json_object_get(o, "traceEvents");
    assert_int_equal(count_events(ev, "X", "prefill", 0), 1);
    assert_int_equal(count_events(ev, "X", "decode", 1000001), 1); /* its own track */
    assert_int_equal(count_events(ev, "M", "thread_name", 1000001), 1);
    assert_int_equal(count_events(ev, "C", "kv_blocks_used", -1), 1);
    assert_int_equal(count_events(ev, "C", "kv_blocks_used inst 1", -1), 1);
    json_decref(o);
    serve_log_free(&log);
    const char *begin = "[ 0.0 us ctrl ] SERVE begin requests=1 sched=pd-disagg\n";
    char text[256];
    snprintf(text, sizeof(text), "%s%s", begin,
             "[ 0.0 us ctrl ] SERVE instance id=0 role=both cores=4\n");
    expect_bad(text, 2, "role='both' is neither prefill nor decode");
}

/* A log of the given lines must fail, naming `line` and containing `what`. */
static void expect_bad(const char *text, int line, const char *what)
{
    struct rt_serve_log log;
    char want[64];
    write_text(tmp_path("bad.log"), text);
    int rc = serve_log_parse(tmp_path("bad.log"), &log, err, sizeof(err));
    serve_log_free(&log);
    snprintf(want, sizeof(want), "bad.log:%d: ", line);
    if (rc != NPU_ERR_FORMAT || !strstr(err, want) || !strstr(err, what))
        fail_msg("rc %d, err '%s'; want '%s' and '%s'", rc, err, want, what);
}

static void test_malformed(void **state)
{
    (void)state;
    const char *begin = "[ 0.0 us ctrl ] SERVE begin requests=2 sched=x\n";
    char text[512];
    snprintf(text, sizeof(text), "%s%s", begin, "[ 1.0 us ctrl ] SERVE frobnicate id=0\n");
    expect_bad(text, 2, "unknown SERVE event 'frobnicate'");
    snprintf(text, sizeof(text), "%s\nnoise\n%s", begin,
             "[ 1.0 us ctrl ] SERVE token id=0 n=zero t=5 token=1\n");
    expect_bad(text, 4, "n='zero'");
    snprintf(text, sizeof(text), "%s%s", begin, "[ 1.0 us ctrl ] SERVE admit id=2 t=5\n");
    expect_bad(text, 2, "id=2 out of range");
    snprintf(text, sizeof(text), "%s%s", begin, "[ 1.0 us ctrl ] SERVE finish id=1\n");
    expect_bad(text, 2, "missing t=");
    snprintf(text, sizeof(text), "%s%s", begin,
             "[ 1.0 us ctrl ] SERVE token id=1 n=1 t=5 token=1\n");
    expect_bad(text, 2, "out of sequence");
    expect_bad("[ 1.0 us ctrl ] SERVE arrive id=0 t=0 input=1 output=1\n", 1, "before");
    snprintf(text, sizeof(text), "%s%s", begin,
             "[ 1.0 us ctrl ] SERVE iter n=0 t0=0 t1=5 blocks=3\n");
    expect_bad(text, 2, "USED/TOTAL");
}

static void test_incomplete(void **state)
{
    (void)state;
    struct rt_serve_log log;
    struct rt_summary s;
    struct rt_slo slo = { 25.0, 10.0 };
    if (serve_log_parse(data_path("incomplete.log"), &log, err, sizeof(err)))
        fail_msg("incomplete.log: %s", err);
    assert_false(log.done);
    assert_int_equal(log.end_ps, 20 * MS);
    assert_int_equal(log.reqs[0].ntokens, 2);
    memset(&s, 0, sizeof(s));
    metrics_summarise(&log, &slo, &s);
    assert_false(s.done);
    assert_int_equal(s.completed, 0);
    assert_int_equal(s.unfinished, 2);
    expect_near("slo", s.slo_attainment, 0);
    expect_near("duration", s.duration_s, 0.020);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    metrics_print_report(f, &s, &slo);
    fclose(f);
    assert_non_null(strstr(buf, "INCOMPLETE"));
    free(buf);
    serve_log_free(&log);
}

static void test_chip_stats_errors(void **state)
{
    (void)state;
    struct rt_energy e;
    uint64_t hbm, noc;
    int rc = metrics_read_chip_stats(tmp_path("none.json"), &e, &hbm, &noc, err, sizeof(err));
    assert_int_equal(rc, NPU_ERR_IO);
    assert_non_null(strstr(err, "none.json"));
    write_text(tmp_path("stats.json"), "{\"chip_time_ps\": 5, \"total\": {\"hbm_bytes\": 1, "
                                       "\"noc_byte_hops\": 2}, \"energy_j\": {\"mac\": 1}}");
    rc = metrics_read_chip_stats(tmp_path("stats.json"), &e, &hbm, &noc, err, sizeof(err));
    assert_int_equal(rc, NPU_ERR_FORMAT);
    assert_non_null(strstr(err, "stats.json"));
    assert_non_null(strstr(err, "energy_j"));
    assert_false(e.valid);
    /* every field but the cores' engine busy times: the error names those */
    write_text(tmp_path("stats.json"),
               "{\"chip_time_ps\": 5, \"total\": {\"hbm_bytes\": 1, \"noc_byte_hops\": 2}, "
               "\"energy_j\": {\"mac\": 1, \"vector\": 1, \"sram\": 1, \"hbm\": 1, \"noc\": 1, "
               "\"static\": 1, \"total\": 6}, \"cores\": [{\"core\": 0, \"matrix\": "
               "{\"busy_ps\": 1}}]}");
    struct rt_chip_stats cs;
    rc = metrics_read_chip(tmp_path("stats.json"), &cs, err, sizeof(err));
    assert_int_equal(rc, NPU_ERR_FORMAT);
    assert_non_null(strstr(err, "busy_ps"));
}

/* The engines' busy times summed over the cores, as bench model reads them. */
static void test_chip_busy(void **state)
{
    (void)state;
    struct rt_chip_stats cs;
    assert_int_equal(metrics_read_chip(data_path("chip_stats.json"), &cs, err, sizeof(err)), 0);
    assert_int_equal(cs.cores, 2);
    double total = 0;
    for (int k = 0; k < RT_ENGINE_KINDS; k++)
        total += cs.busy_ps[k];
    assert_true(cs.busy_ps[0] > 0 && cs.chip_time_ps > 0);
    assert_true(total > cs.busy_ps[0]);
}

static void test_report(void **state)
{
    (void)state;
    struct rt_serve_log log;
    struct rt_summary s;
    struct rt_slo slo = { 25.0, 10.0 };
    summarise_run(&log, &s, slo.ttft_ms, slo.tbt_ms);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    metrics_print_report(f, &s, &slo);
    fclose(f);
    assert_non_null(strstr(buf, "3 of 4 requests completed, 1 rejected (too_long 1)"));
    assert_non_null(strstr(buf, "50.0% met"));
    assert_non_null(strstr(buf, "energy/token   10.0000 mJ"));
    assert_null(strstr(buf, "INCOMPLETE"));
    free(buf);
    serve_log_free(&log);
}

static int setup(void **state)
{
    (void)state;
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    static const char *const files[] = { "requests.csv", "tokens.csv", "summary.json",
                                         "trace.json", "bad.log", "stats.json", "bad.csv",
                                         "pd.log", "pd.json" };
    (void)state;
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
        unlink(tmp_path(files[i]));
    return rmdir(tmpdir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),        cmocka_unit_test(test_percentile),
        cmocka_unit_test(test_summary),      cmocka_unit_test(test_slo_variants),
        cmocka_unit_test(test_csv),          cmocka_unit_test(test_summary_json),
        cmocka_unit_test(test_summary_run_keys),
        cmocka_unit_test(test_perfetto),     cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_incomplete),   cmocka_unit_test(test_chip_stats_errors),
        cmocka_unit_test(test_chip_busy),
        cmocka_unit_test(test_report),       cmocka_unit_test(test_instances),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
