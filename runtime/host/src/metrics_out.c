/* SPDX-License-Identifier: MIT */
/*
 * A serving run's outputs (docs/outputs.md): summary.json (vLLM's benchmark key names
 * where they overlap, built with jansson so strings are always escaped), requests.csv and
 * tokens.csv, and the terminal report. The Perfetto trace is in metrics_trace.c.
 */
#include "rt/metrics.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "npu_enums.h"

/* jansson refuses NaN and infinities; a null says "not defined" in JSON. */
static void set_real(json_t *o, const char *key, double v)
{
    json_object_set_new(o, key, isfinite(v) ? json_real(v) : json_null());
}

static void set_int(json_t *o, const char *key, uint64_t v)
{
    json_object_set_new(o, key, json_integer((json_int_t)v));
}

/* vLLM's mean_/median_/std_/pNN_ keys of one distribution, plus max_. */
static void set_dist_vllm(json_t *o, const char *name, const struct rt_dist *d)
{
    static const char *const stat[] = { "mean", "median", "std", "p90", "p99", "max" };
    const double v[] = { d->mean, d->median, d->std, d->p90, d->p99, d->max };
    char key[64];
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        snprintf(key, sizeof(key), "%s_%s_ms", stat[i], name);
        set_real(o, key, v[i]);
    }
}

static json_t *dist_object(const struct rt_dist *d)
{
    json_t *o = json_object();
    set_int(o, "count", d->n);
    set_real(o, "mean", d->mean);
    set_real(o, "median", d->median);
    set_real(o, "std", d->std);
    set_real(o, "p90", d->p90);
    set_real(o, "p99", d->p99);
    set_real(o, "max", d->max);
    return o;
}

static json_t *energy_object(const struct rt_energy *e)
{
    if (!e->valid)
        return json_null();
    json_t *o = json_object();
    set_real(o, "mac", e->mac);
    set_real(o, "vector", e->vector);
    set_real(o, "sram", e->sram);
    set_real(o, "hbm", e->hbm);
    set_real(o, "noc", e->noc);
    set_real(o, "static", e->stat);
    set_real(o, "total", e->total);
    return o;
}

static void summary_counts(json_t *o, const struct rt_summary *s)
{
    json_t *reasons = json_object();
    json_object_set_new(o, "complete", json_boolean(s->done));
    set_int(o, "num_prompts", s->total);
    set_int(o, "completed", s->completed);
    set_int(o, "rejected", s->rejected);
    for (size_t i = 0; i < s->nreasons; i++)
        set_int(reasons, s->reasons[i].reason, s->reasons[i].count);
    json_object_set_new(o, "rejected_reasons", reasons);
    set_int(o, "unfinished", s->unfinished);
    set_int(o, "failed", s->failed);
    json_object_set_new(o, "failure", s->failure[0] ? json_string(s->failure) : json_null());
    set_real(o, "duration", s->duration_s);
    set_real(o, "arrival_rate", s->arrival_rate);
    set_int(o, "total_input_tokens", s->total_input_tokens);
    set_int(o, "total_output_tokens", s->total_output_tokens);
    set_real(o, "request_throughput", s->request_throughput);
    set_real(o, "output_throughput", s->output_throughput);
    set_real(o, "total_token_throughput", s->total_token_throughput);
}

static void summary_slo(json_t *o, const struct rt_summary *s, const struct rt_slo *slo)
{
    json_t *so = json_object();
    set_real(so, "ttft_ms", slo && slo->ttft_ms > 0.0 ? slo->ttft_ms : NAN);
    set_real(so, "tbt_ms", slo && slo->tbt_ms > 0.0 ? slo->tbt_ms : NAN);
    json_object_set_new(o, "slo", so);
    set_real(o, "slo_attainment", s->slo_attainment);
    set_real(o, "ttft_attainment", s->ttft_attainment);
    set_real(o, "tbt_attainment", s->tbt_attainment);
    set_real(o, "jain_fairness", s->jain_fairness);
}

static void summary_chip(json_t *o, const struct rt_summary *s)
{
    set_int(o, "expert_load_bytes", s->expert_load_bytes);
    set_int(o, "hbm_bytes", s->hbm_bytes);
    set_int(o, "noc_byte_hops", s->noc_byte_hops);
    json_object_set_new(o, "energy_j", energy_object(&s->energy));
    set_real(o, "energy_per_token_j", s->energy_per_token_j);
    set_real(o, "energy_per_output_token_j", s->energy_per_output_token_j);
    set_int(o, "iterations", s->iterations);
    set_real(o, "mean_decode_batch", s->mean_decode_batch);
    /* null without a prefix cache: "no cache" is not "no hits" */
    set_real(o, "prefix_cache_hit_rate", s->prefix_cache ? s->prefix_hit_rate : NAN);
    if (s->prefix_cache) {
        set_int(o, "prefix_cache_hit_tokens", s->prefix_hit_tokens);
        set_int(o, "prefix_cache_evicted_blocks", s->prefix_evicted_blocks);
    } else {
        json_object_set_new(o, "prefix_cache_hit_tokens", json_null());
        json_object_set_new(o, "prefix_cache_evicted_blocks", json_null());
    }
}

/* vLLM's per-request arrays, in request order: lengths (output: tokens generated), the
   TTFT and every inter-token gap in seconds (0 and none for a request without a token, as
   vLLM gives a failed one), and the error ("" or the reject reason or failure). */
static void summary_arrays(json_t *o, const struct rt_serve_log *log)
{
    json_t *in = json_array(), *out = json_array(), *ttfts = json_array();
    json_t *itls = json_array(), *errors = json_array();
    for (size_t i = 0; i < log->nreqs; i++) {
        const struct rt_req_record *r = &log->reqs[i];
        json_array_append_new(in, json_integer(r->input_len));
        json_array_append_new(out, json_integer(r->finished ? r->ntokens : 0));
        const bool first = r->ntokens > 0 && r->token_ps[0] >= r->arrival_ps;
        json_array_append_new(ttfts, json_real(first ? (r->token_ps[0] - r->arrival_ps) / 1e12
                                                     : 0.0));
        json_t *gaps = json_array();
        for (uint32_t k = 1; k < r->ntokens; k++)
            json_array_append_new(gaps, json_real((r->token_ps[k] - r->token_ps[k - 1]) / 1e12));
        json_array_append_new(itls, gaps);
        json_array_append_new(errors, json_string(r->finished ? "" : r->reason[0] ? r->reason
                                                                : "unfinished"));
    }
    json_object_set_new(o, "input_lens", in);
    json_object_set_new(o, "output_lens", out);
    json_object_set_new(o, "ttfts", ttfts);
    json_object_set_new(o, "itls", itls);
    json_object_set_new(o, "errors", errors);
}

/* The run keys first, as vLLM writes them; request_goodput: requests within the SLO (TTFT
   and every TBT) per second of the run. */
static void summary_run(json_t *o, const struct rt_run_keys *run, const struct rt_summary *s,
                        const struct rt_slo *slo, const struct rt_serve_log *log)
{
    json_object_set_new(o, "date", json_string(run->date));
    json_object_set_new(o, "backend", json_string(run->backend));
    json_object_set_new(o, "model_id", json_string(run->model_id));
    if (isinf(run->request_rate))
        json_object_set_new(o, "request_rate", json_string("inf"));
    else
        set_real(o, "request_rate", run->request_rate); /* NAN (one request): null */
    set_real(o, "burstiness", run->burstiness);
    json_object_set_new(o, "max_concurrency", run->max_concurrency
                                                  ? json_integer(run->max_concurrency)
                                                  : json_null());
    size_t good = 0;
    for (size_t i = 0; log && i < log->nreqs; i++)
        good += metrics_request_meets_slo(&log->reqs[i], slo);
    set_real(o, "request_goodput", s->duration_s > 0 ? good / s->duration_s : NAN);
}

int metrics_write_summary_json(const char *path, const struct rt_summary *s,
                               const struct rt_slo *slo, const struct rt_label *labels,
                               size_t nlabels, const struct rt_run_keys *run,
                               const struct rt_serve_log *log, char *err, size_t errlen)
{
    json_t *o = json_object(), *lab = json_object();
    for (size_t i = 0; i < nlabels; i++)
        json_object_set_new(lab, labels[i].key, json_string(labels[i].value ? labels[i].value
                                                                            : ""));
    json_object_set_new(o, "labels", lab);
    if (run)
        summary_run(o, run, s, slo, log);
    summary_counts(o, s);
    set_dist_vllm(o, "ttft", &s->ttft);
    set_dist_vllm(o, "tpot", &s->tpot);
    set_dist_vllm(o, "itl", &s->itl);
    set_dist_vllm(o, "e2el", &s->e2el);
    json_object_set_new(o, "tbt", dist_object(&s->tbt));
    summary_slo(o, s, slo);
    summary_chip(o, s);
    if (run && log)
        summary_arrays(o, log);
    int rc = json_dump_file(o, path,
                            JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
    json_decref(o);
    if (rc) {
        snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
        return NPU_ERR_IO;
    }
    return 0;
}

/* ---- CSV */

static const char *req_state(const struct rt_req_record *r)
{
    if (r->rejected)
        return "rejected";
    if (r->finished)
        return "finished";
    if (r->failed)
        return "failed";
    if (r->admitted)
        return "running";
    return r->arrived ? "queued" : "unseen";
}

/* A time column in ms, empty when the event did not happen. */
static void csv_ms(FILE *f, bool have, double ms)
{
    if (have)
        fprintf(f, "%.6f", ms);
    fputc(',', f);
}

static double ms_of(uint64_t ps)
{
    return (double)ps / 1e9;
}

/* A text column, quoted as RFC 4180 wants when it holds a comma, a quote or a newline. */
static void csv_text(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void csv_request(FILE *f, const struct rt_req_record *r, const struct rt_slo *slo,
                        const char *run)
{
    uint32_t n = r->ntokens;
    double arrival = ms_of(r->arrival_ps), first = n ? ms_of(r->token_ps[0]) : 0.0;
    double last = n ? ms_of(r->token_ps[n - 1]) : ms_of(r->finish_ps), max_gap = 0.0;
    for (uint32_t k = 1; k < n; k++) {
        double g = ms_of(r->token_ps[k]) - ms_of(r->token_ps[k - 1]);
        max_gap = g > max_gap ? g : max_gap;
    }
    fprintf(f, "%u,", r->id);
    csv_ms(f, r->arrived, arrival);
    csv_ms(f, r->admitted, ms_of(r->admit_ps));
    csv_ms(f, n > 0, first);
    csv_ms(f, r->finished || r->rejected, ms_of(r->finish_ps));
    csv_ms(f, r->arrived && n > 0, first - arrival);
    csv_ms(f, n > 1, n > 1 ? (last - first) / (double)(n - 1) : 0.0);
    csv_ms(f, n > 1, max_gap);
    csv_ms(f, r->arrived && r->finished && !r->rejected, last - arrival);
    fprintf(f, "%u,%u,%u,%d,%s,", r->input_len, r->output_len, n,
            metrics_request_meets_slo(r, slo) ? 1 : 0, req_state(r));
    csv_text(f, r->rejected || r->failed ? r->reason : "");
    fputc(',', f);
    csv_ms(f, r->arrived && r->admitted, ms_of(r->admit_ps) - arrival);
    csv_ms(f, n > 1, n > 1 ? (last - first) / (double)(n - 1) : 0.0); /* vLLM's TPOT */
    if (r->admitted && r->cache_known)
        fprintf(f, "%u", r->cached);
    fputc(',', f);
    csv_text(f, run ? run : "");
    fputc('\n', f);
}

static int csv_close(FILE *f, const char *path, char *err, size_t errlen)
{
    int bad = ferror(f);
    if (fclose(f) || bad) {
        snprintf(err, errlen, "%s: write error", path);
        return NPU_ERR_IO;
    }
    return 0;
}

int metrics_write_requests_csv(const char *path, const char *tokens_path,
                               const struct rt_serve_log *log, const struct rt_slo *slo,
                               const char *run, char *err, size_t errlen)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, errlen, "%s: cannot create: %s", path, strerror(errno));
        return NPU_ERR_IO;
    }
    fprintf(f, "id,arrival_ms,admit_ms,first_token_ms,finish_ms,ttft_ms,mean_tbt_ms,"
               "max_tbt_ms,e2e_ms,input_tokens,output_tokens,generated,slo_met,state,reason,"
               "queue_ms,tpot_ms,cached_tokens,run\n");
    for (size_t i = 0; i < log->nreqs; i++)
        csv_request(f, &log->reqs[i], slo, run);
    int rc = csv_close(f, path, err, errlen);
    if (rc || !tokens_path)
        return rc;
    if (!(f = fopen(tokens_path, "w"))) {
        snprintf(err, errlen, "%s: cannot create: %s", tokens_path, strerror(errno));
        return NPU_ERR_IO;
    }
    fprintf(f, "id,n,t_ms,token\n");
    for (size_t i = 0; i < log->nreqs; i++)
        for (uint32_t k = 0; k < log->reqs[i].ntokens; k++)
            fprintf(f, "%u,%u,%.6f,%u\n", log->reqs[i].id, k,
                    (double)log->reqs[i].token_ps[k] / 1e9, log->reqs[i].tokens[k]);
    return csv_close(f, tokens_path, err, errlen);
}

/* ---- terminal report */

static void report_limit(char *buf, size_t len, const char *what, double limit)
{
    if (limit > 0.0)
        snprintf(buf, len, "%s<=%g ms", what, limit);
    else
        snprintf(buf, len, "%s unlimited", what);
}

static void report_energy(FILE *f, const struct rt_summary *s)
{
    uint64_t tokens = s->total_input_tokens + s->total_output_tokens;
    const struct rt_energy *e = &s->energy;
    if (!e->valid || tokens == 0) {
        fprintf(f, "  energy/token   %s\n", !e->valid ? "(no chip stats)" : "(no tokens served)");
        return;
    }
    double k = 1e3 / (double)tokens; /* J in total -> mJ per token */
    fprintf(f, "  energy/token   %.4f mJ (mac %.4f, vector %.4f, sram %.4f, hbm %.4f, "
               "noc %.4f, static %.4f); %.4f mJ per output token\n",
            e->total * k, e->mac * k, e->vector * k, e->sram * k, e->hbm * k, e->noc * k,
            e->stat * k, s->energy_per_output_token_j * 1e3);
}

void metrics_print_report(FILE *f, const struct rt_summary *s, const struct rt_slo *slo)
{
    char tt[48], tb[48];
    report_limit(tt, sizeof(tt), "TTFT", slo ? slo->ttft_ms : 0.0);
    report_limit(tb, sizeof(tb), "TBT", slo ? slo->tbt_ms : 0.0);
    fprintf(f, "serving: %zu of %zu requests completed, %zu rejected", s->completed, s->total,
            s->rejected);
    for (size_t i = 0; i < s->nreasons; i++)
        fprintf(f, "%s%s %zu", i ? ", " : " (", s->reasons[i].reason, s->reasons[i].count);
    fprintf(f, "%s", s->nreasons ? ")" : "");
    if (s->failed)
        fprintf(f, ", %zu failed (%s)", s->failed, s->failure);
    fprintf(f, ", %zu unfinished%s\n", s->unfinished,
            s->done ? "" : " -- INCOMPLETE RUN (no SERVE done)");
    fprintf(f, "  duration       %.6f s, %llu iterations, mean decode batch %.2f\n",
            s->duration_s, (unsigned long long)s->iterations, s->mean_decode_batch);
    fprintf(f, "  throughput     %.3f req/s, %.2f output tok/s, %.2f tok/s in+out\n",
            s->request_throughput, s->output_throughput, s->total_token_throughput);
    fprintf(f, "  TTFT (ms)      mean %.3f  p99 %.3f\n", s->ttft.mean, s->ttft.p99);
    fprintf(f, "  TBT (ms)       mean %.3f  p99 %.3f  std %.3f  max %.3f\n", s->tbt.mean,
            s->tbt.p99, s->tbt.std, s->tbt.max);
    fprintf(f, "  SLO            %.1f%% met (%s, %s; TTFT %.1f%%, TBT %.1f%%), Jain %.3f\n",
            s->slo_attainment * 100.0, tt, tb, s->ttft_attainment * 100.0,
            s->tbt_attainment * 100.0, s->jain_fairness);
    fprintf(f, "  traffic        expert load %.3f GB, HBM %.3f GB\n",
            (double)s->expert_load_bytes / 1e9, (double)s->hbm_bytes / 1e9);
    if (s->prefix_cache)
        fprintf(f, "  prefix cache   %llu of %llu prompt tokens found (%.1f%%), %llu blocks "
                "evicted\n", (unsigned long long)s->prefix_hit_tokens,
                (unsigned long long)s->prefix_query_tokens, s->prefix_hit_rate * 100.0,
                (unsigned long long)s->prefix_evicted_blocks);
    report_energy(f, s);
}
