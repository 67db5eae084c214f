/* SPDX-License-Identifier: MIT */
/*
 * The summary of a serving run (rt/metrics.h): counts, throughputs, latency
 * distributions, fairness, SLO attainment, energy; and the chip stats JSON reader.
 * Latency statistics cover the completed requests only (as vLLM's benchmark counts only
 * successful ones); SLO attainment covers every request, so rejections cost attainment.
 */
#include "rt/metrics.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "npu_enums.h"
#include "rt/mailbox.h"

#define PS_PER_MS 1e9

static bool req_completed(const struct rt_req_record *r)
{
    return r->finished && !r->rejected;
}

static double ps_to_ms(uint64_t a, uint64_t b)
{
    return ((double)b - (double)a) / PS_PER_MS;
}

/* End-to-end: the last token (the finish line for a request without tokens). */
static uint64_t req_end_ps(const struct rt_req_record *r)
{
    return r->ntokens ? r->token_ps[r->ntokens - 1] : r->finish_ps;
}

static bool limit_ok(double value_ms, double limit_ms)
{
    return limit_ms <= 0.0 || value_ms <= limit_ms;
}

static bool req_ttft_ok(const struct rt_req_record *r, const struct rt_slo *slo)
{
    if (!req_completed(r))
        return false;
    if (!slo || r->ntokens == 0)
        return true;
    return limit_ok(ps_to_ms(r->arrival_ps, r->token_ps[0]), slo->ttft_ms);
}

static bool req_tbt_ok(const struct rt_req_record *r, const struct rt_slo *slo)
{
    if (!req_completed(r))
        return false;
    for (uint32_t i = 1; slo && i < r->ntokens; i++)
        if (!limit_ok(ps_to_ms(r->token_ps[i - 1], r->token_ps[i]), slo->tbt_ms))
            return false;
    return true;
}

bool metrics_request_meets_slo(const struct rt_req_record *r, const struct rt_slo *slo)
{
    return req_ttft_ok(r, slo) && req_tbt_ok(r, slo);
}

double metrics_percentile(const double *sorted, size_t n, double p)
{
    if (n == 0)
        return 0.0;
    double rank = p / 100.0 * (double)(n - 1);
    size_t lo = (size_t)floor(rank), hi = lo + 1 < n ? lo + 1 : lo;
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - (double)lo);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Sorts v. std is the population one (numpy's default, as vLLM reports it). */
static void dist_compute(double *v, size_t n, struct rt_dist *d)
{
    memset(d, 0, sizeof(*d));
    if (n == 0)
        return;
    qsort(v, n, sizeof(*v), cmp_double);
    double sum = 0.0, sq = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    d->n = n;
    d->mean = sum / (double)n;
    for (size_t i = 0; i < n; i++)
        sq += (v[i] - d->mean) * (v[i] - d->mean);
    d->std = sqrt(sq / (double)n);
    d->median = metrics_percentile(v, n, 50.0);
    d->p90 = metrics_percentile(v, n, 90.0);
    d->p99 = metrics_percentile(v, n, 99.0);
    d->max = v[n - 1];
}

static void count_reason(struct rt_summary *s, const char *reason)
{
    size_t i = 0;
    while (i < s->nreasons && strcmp(s->reasons[i].reason, reason) != 0)
        i++;
    if (i == s->nreasons && i == RT_REASONS_MAX) {
        i--; /* the last slot becomes the bucket of every further reason */
        snprintf(s->reasons[i].reason, sizeof(s->reasons[i].reason), "other");
    } else if (i == s->nreasons) {
        snprintf(s->reasons[i].reason, sizeof(s->reasons[i].reason), "%s", reason);
        s->nreasons++;
    }
    s->reasons[i].count++;
}

/* Counts, tokens and the span of the run: first arrival to last token. */
static void summarise_counts(const struct rt_serve_log *log, struct rt_summary *s)
{
    uint64_t first = UINT64_MAX, last_arrival = 0, last_token = 0;
    size_t arrivals = 0;
    for (size_t i = 0; i < log->nreqs; i++) {
        const struct rt_req_record *r = &log->reqs[i];
        if (r->arrived) {
            arrivals++;
            first = r->arrival_ps < first ? r->arrival_ps : first;
            last_arrival = r->arrival_ps > last_arrival ? r->arrival_ps : last_arrival;
        }
        if (r->admitted && r->cache_known) {
            s->prefix_cache = true;
            s->prefix_hit_tokens += r->cached;
            s->prefix_query_tokens += r->input_len;
        }
        if (r->ntokens && r->token_ps[r->ntokens - 1] > last_token)
            last_token = r->token_ps[r->ntokens - 1];
        if (r->rejected) {
            s->rejected++;
            count_reason(s, r->reason);
        } else if (r->finished) {
            s->completed++;
            s->total_input_tokens += r->input_len;
            s->total_output_tokens += r->ntokens;
        } else if (r->failed) {
            s->failed++;
        } else {
            s->unfinished++;
        }
    }
    s->prefix_hit_rate = s->prefix_query_tokens
                             ? (double)s->prefix_hit_tokens / (double)s->prefix_query_tokens
                             : 0.0;
    first = arrivals ? first : 0;
    uint64_t end = last_token ? last_token : log->end_ps;
    s->duration_s = end > first ? (double)(end - first) / 1e12 : 0.0;
    if (arrivals > 1 && last_arrival > first)
        s->arrival_rate = (double)(arrivals - 1) / ((double)(last_arrival - first) / 1e12);
    if (s->duration_s > 0.0) {
        s->request_throughput = (double)s->completed / s->duration_s;
        s->output_throughput = (double)s->total_output_tokens / s->duration_s;
        s->total_token_throughput =
            (double)(s->total_input_tokens + s->total_output_tokens) / s->duration_s;
    }
}

struct lat_arrays {
    double *ttft, *tpot, *e2el, *itl;
    size_t nttft, ntpot, ne2el, nitl;
};

static void collect_request(const struct rt_req_record *r, struct lat_arrays *a)
{
    a->e2el[a->ne2el++] = ps_to_ms(r->arrival_ps, req_end_ps(r));
    if (r->ntokens == 0)
        return;
    double ttft = ps_to_ms(r->arrival_ps, r->token_ps[0]);
    a->ttft[a->nttft++] = ttft;
    if (r->ntokens > 1) /* vLLM's TPOT: (e2e - ttft) / (output tokens - 1) */
        a->tpot[a->ntpot++] = (a->e2el[a->ne2el - 1] - ttft) / (double)(r->ntokens - 1);
    for (uint32_t k = 1; k < r->ntokens; k++)
        a->itl[a->nitl++] = ps_to_ms(r->token_ps[k - 1], r->token_ps[k]);
}

static void summarise_latency(const struct rt_serve_log *log, struct rt_summary *s)
{
    size_t ngaps = 0, nreq = s->completed ? s->completed : 1;
    for (size_t i = 0; i < log->nreqs; i++)
        if (req_completed(&log->reqs[i]) && log->reqs[i].ntokens > 1)
            ngaps += log->reqs[i].ntokens - 1;
    struct lat_arrays a = { .ttft = malloc(nreq * sizeof(double)),
                            .tpot = malloc(nreq * sizeof(double)),
                            .e2el = malloc(nreq * sizeof(double)),
                            .itl = malloc((ngaps ? ngaps : 1) * sizeof(double)) };
    if (a.ttft && a.tpot && a.e2el && a.itl) { /* out of memory: the distributions stay 0 */
        for (size_t i = 0; i < log->nreqs; i++)
            if (req_completed(&log->reqs[i]))
                collect_request(&log->reqs[i], &a);
        dist_compute(a.ttft, a.nttft, &s->ttft);
        dist_compute(a.tpot, a.ntpot, &s->tpot);
        dist_compute(a.e2el, a.ne2el, &s->e2el);
        dist_compute(a.itl, a.nitl, &s->itl);
        s->tbt = s->itl; /* the same gaps under our name */
    }
    free(a.ttft);
    free(a.tpot);
    free(a.e2el);
    free(a.itl);
}

/* Jain's index (sum x)^2 / (n sum x^2) over x = e2e / output tokens: 1 when every request
   waits the same per token, 1/n when one takes it all. */
static double jain_fairness(const struct rt_serve_log *log)
{
    double sum = 0.0, sq = 0.0;
    size_t n = 0;
    for (size_t i = 0; i < log->nreqs; i++) {
        const struct rt_req_record *r = &log->reqs[i];
        if (!req_completed(r) || r->ntokens == 0)
            continue;
        double x = ps_to_ms(r->arrival_ps, req_end_ps(r)) / (double)r->ntokens;
        sum += x;
        sq += x * x;
        n++;
    }
    return n && sq > 0.0 ? sum * sum / ((double)n * sq) : (n ? 1.0 : 0.0);
}

static void summarise_slo(const struct rt_serve_log *log, const struct rt_slo *slo,
                          struct rt_summary *s)
{
    size_t both = 0, ttft = 0, tbt = 0;
    for (size_t i = 0; i < log->nreqs; i++) {
        bool a = req_ttft_ok(&log->reqs[i], slo), b = req_tbt_ok(&log->reqs[i], slo);
        ttft += a;
        tbt += b;
        both += a && b;
    }
    if (log->nreqs == 0)
        return;
    s->slo_attainment = (double)both / (double)log->nreqs;
    s->ttft_attainment = (double)ttft / (double)log->nreqs;
    s->tbt_attainment = (double)tbt / (double)log->nreqs;
}

static void summarise_iters(const struct rt_serve_log *log, struct rt_summary *s)
{
    /* per instance, its latest cumulative count (the control core serves at most
       RT_MB_INSTANCES_MAX: a line naming another is not counted) */
    uint64_t decode = 0, n = 0, evicted[RT_MB_INSTANCES_MAX] = { 0 };
    for (size_t i = 0; i < log->niters; i++) {
        const struct rt_iter_record *it = &log->iters[i];
        if (it->cache_known && it->inst < RT_MB_INSTANCES_MAX && it->evicted > evicted[it->inst])
            evicted[it->inst] = it->evicted;
        if (it->decode_tokens > 0) {
            decode += it->decode_tokens;
            n++;
        }
    }
    for (size_t k = 0; k < RT_MB_INSTANCES_MAX; k++)
        s->prefix_evicted_blocks += evicted[k];
    s->iterations = log->iterations;
    s->mean_decode_batch = n ? (double)decode / (double)n : 0.0;
}

void metrics_summarise(const struct rt_serve_log *log, const struct rt_slo *slo,
                       struct rt_summary *s)
{
    /* The chip-stats fields are the caller's input (rt/metrics.h): keep them. */
    struct rt_energy energy = s->energy;
    uint64_t hbm = s->hbm_bytes, noc = s->noc_byte_hops;
    memset(s, 0, sizeof(*s));
    s->energy = energy;
    s->hbm_bytes = hbm;
    s->noc_byte_hops = noc;
    s->total = log->nreqs;
    s->done = log->done;
    snprintf(s->failure, sizeof(s->failure), "%s", log->cause);
    s->expert_load_bytes = log->expert_load_bytes;
    summarise_counts(log, s);
    summarise_latency(log, s);
    s->jain_fairness = jain_fairness(log);
    summarise_slo(log, slo, s);
    summarise_iters(log, s);
    uint64_t tokens = s->total_input_tokens + s->total_output_tokens;
    if (s->energy.valid && tokens)
        s->energy_per_token_j = s->energy.total / (double)tokens;
    if (s->energy.valid && s->total_output_tokens)
        s->energy_per_output_token_j = s->energy.total / (double)s->total_output_tokens;
}

static int json_get_number(json_t *obj, const char *key, double *out)
{
    json_t *v = json_object_get(obj, key);
    if (!json_is_number(v))
        return -1;
    *out = json_number_value(v);
    return 0;
}

static int json_get_u64(json_t *obj, const char *key, uint64_t *out)
{
    json_t *v = json_object_get(obj, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return -1;
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

/* The per-core engine busy times (cores[i].matrix.busy_ps, ...), summed. */
static const char *read_busy(json_t *root, struct rt_chip_stats *s)
{
    static const char *const kinds[RT_ENGINE_KINDS] = { "matrix", "vector", "dma", "noc",
                                                         "dma2" };
    json_t *cores = json_object_get(root, "cores");
    if (!json_is_array(cores) || json_array_size(cores) == 0)
        return "cores";
    s->cores = (uint32_t)json_array_size(cores);
    for (size_t i = 0; i < json_array_size(cores); i++)
        for (int k = 0; k < RT_ENGINE_KINDS; k++) {
            double busy;
            json_t *eng = json_object_get(json_array_get(cores, i), kinds[k]);
            if (!eng && k == RT_ENGINE_KINDS - 1)
                continue; /* dma2: absent from stats written before the second DMA queue */
            if (json_get_number(eng, "busy_ps", &busy))
                return "cores[].{matrix, vector, dma, noc, dma2}.busy_ps";
            s->busy_ps[k] += busy;
        }
    return NULL;
}

int metrics_read_chip(const char *path, struct rt_chip_stats *s, char *err, size_t errlen)
{
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    memset(s, 0, sizeof(*s));
    if (!root) {
        snprintf(err, errlen, "%s:%d: %s", path, je.line, je.text);
        return je.line < 0 ? NPU_ERR_IO : NPU_ERR_FORMAT;
    }
    json_t *total = json_object_get(root, "total"), *en = json_object_get(root, "energy_j");
    struct rt_energy *e = &s->energy;
    const char *bad = NULL;
    if (json_get_number(root, "chip_time_ps", &s->chip_time_ps))
        bad = "chip_time_ps";
    else if (json_get_u64(total, "hbm_bytes", &s->hbm_bytes))
        bad = "total.hbm_bytes";
    else if (json_get_u64(total, "noc_byte_hops", &s->noc_byte_hops))
        bad = "total.noc_byte_hops";
    else if (json_get_number(en, "mac", &e->mac) || json_get_number(en, "vector", &e->vector)
             || json_get_number(en, "sram", &e->sram) || json_get_number(en, "hbm", &e->hbm)
             || json_get_number(en, "noc", &e->noc) || json_get_number(en, "static", &e->stat)
             || json_get_number(en, "total", &e->total))
        bad = "energy_j {mac, vector, sram, hbm, noc, static, total}";
    else
        bad = read_busy(root, s);
    json_decref(root);
    if (bad) {
        snprintf(err, errlen, "%s: missing or not a number: %s", path, bad);
        memset(s, 0, sizeof(*s));
        return NPU_ERR_FORMAT;
    }
    e->valid = true;
    return 0;
}

int metrics_read_chip_stats(const char *path, struct rt_energy *e, uint64_t *hbm_bytes,
                            uint64_t *noc_byte_hops, char *err, size_t errlen)
{
    struct rt_chip_stats s;
    int rc = metrics_read_chip(path, &s, err, errlen);
    *e = s.energy;
    if (rc == 0)
        *hbm_bytes = s.hbm_bytes, *noc_byte_hops = s.noc_byte_hops;
    return rc;
}
