/* SPDX-License-Identifier: MIT */
/*
 * Serving metrics from a parsed run (docs/serving.md, "Metrics"; files: docs/outputs.md):
 * per-request latencies, the summary whose keys follow vLLM's benchmark results where they
 * overlap, and the Chrome/Perfetto trace.
 *
 * Definitions (layered-prefill paper, section 5.1):
 *   TTFT = first token - arrival; TBT = the gaps between consecutive tokens of a request;
 *   end-to-end = last token - arrival; a request meets the SLO if its TTFT <= ttft SLO and
 *   every one of its TBTs <= tbt SLO; rejected requests do not meet it (they count in the
 *   denominator). Throughputs over the run's span (first arrival to last token).
 *   Jain's fairness index over the requests' normalised latency (end-to-end / output tokens).
 *   Energy per token = total chip energy / (prompt + generated tokens), as the paper's
 *   section 5.1 defines it; the components are reported too.
 */
#ifndef RT_METRICS_H
#define RT_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "rt/serve_log.h"

struct rt_slo {
    double ttft_ms, tbt_ms;
};

struct rt_dist {                 /* of a set of values in ms */
    size_t n;
    double mean, std, median, p90, p99, max;
};

struct rt_energy {               /* joules, from the chip's stats JSON (energy_j) */
    double mac, vector, sram, hbm, noc, stat, total;
    bool valid;
};

#define RT_REASONS_MAX 16   /* distinct reject reasons counted; more go to "other" */

struct rt_reason_count {
    char reason[32];
    size_t count;
};

/* The chip-stats fields (energy, hbm_bytes, noc_byte_hops) are inputs: fill them with
   metrics_read_chip_stats before metrics_summarise, which keeps them (zero-initialise the
   struct so they read as absent otherwise); the writers derive the energy per token from
   them again, so reading the chip stats after metrics_summarise works too. */
struct rt_summary {
    size_t completed, rejected, total;
    size_t unfinished;           /* neither finished, rejected nor failed */
    size_t failed;               /* ended by a failed run (serve_log_fail_unended) */
    char failure[64];            /* the failed run's cause, "" if none */
    bool done;                   /* the log had its SERVE done line */
    double duration_s;
    double arrival_rate;         /* measured: (arrivals - 1) / (last - first arrival), 1/s */
    uint64_t total_input_tokens, total_output_tokens;
    double request_throughput, output_throughput, total_token_throughput;
    struct rt_dist ttft, tpot, itl, tbt, e2el;
    double jain_fairness;
    double slo_attainment, ttft_attainment, tbt_attainment;
    uint64_t expert_load_bytes, hbm_bytes, noc_byte_hops;
    struct rt_energy energy;
    double energy_per_token_j;   /* total / (input + output tokens of completed requests) */
    double energy_per_output_token_j;
    uint64_t iterations;
    double mean_decode_batch;
    bool prefix_cache;           /* the run had a prefix cache (its admit lines said) */
    uint64_t prefix_hit_tokens;  /* admitted prompts' tokens found in it */
    uint64_t prefix_query_tokens; /* admitted prompts' tokens */
    double prefix_hit_rate;      /* hit / query (0 with no admission) */
    uint64_t prefix_evicted_blocks; /* blocks evicted from the prefix indexes (iter lines) */
    struct rt_reason_count reasons[RT_REASONS_MAX];
    size_t nreasons;
};

/* What a run's chip stats JSON (machine property stats=) holds, as the tools read it. */
enum { RT_ENGINE_KINDS = 5 }; /* matrix, vector, dma, noc, dma2: the JSON's per-core
                                 objects */
struct rt_chip_stats {
    double chip_time_ps;                  /* the whole run */
    uint64_t hbm_bytes, noc_byte_hops;    /* totals over the cores */
    struct rt_energy energy;
    uint32_t cores;
    double busy_ps[RT_ENGINE_KINDS];      /* each engine kind's busy time, summed over cores */
};

/* Reads the stats JSON into s: 0, or NPU_ERR_IO / NPU_ERR_FORMAT with err naming the file
   and the field. */
int metrics_read_chip(const char *path, struct rt_chip_stats *s, char *err, size_t errlen);
/* Reads energy and traffic totals from the chip's stats JSON (metrics_read_chip). */
int metrics_read_chip_stats(const char *path, struct rt_energy *e, uint64_t *hbm_bytes,
                            uint64_t *noc_byte_hops, char *err, size_t errlen);

/* slo NULL, or a limit <= 0, means no limit on that quantity. */
void metrics_summarise(const struct rt_serve_log *log, const struct rt_slo *slo,
                       struct rt_summary *s);

/* A finished request whose TTFT and every TBT are within the SLO (section 5.1). */
bool metrics_request_meets_slo(const struct rt_req_record *r, const struct rt_slo *slo);
/* The p-th percentile (0..100) of sorted[n], interpolated linearly between the two
   nearest ranks as numpy.percentile does by default; 0 for n == 0. */
double metrics_percentile(const double *sorted, size_t n, double p);

/* labels: free-form "key": "value" pairs to put in the summary (chip, model, sched, ...). */
struct rt_label { const char *key, *value; };

/* vLLM's run keys (its benchmark's result file) of a serving run (docs/outputs.md). */
struct rt_run_keys {
    const char *date;          /* the run's start, "YYYYMMDD-HHMMSS" UTC */
    const char *backend;       /* "npu-mesh" */
    const char *model_id;
    double request_rate;       /* requests per second as served; INFINITY: all at once */
    double burstiness;         /* the re-timed gaps' gamma shape; NAN: the trace's own */
    uint32_t max_concurrency;  /* 0: no limit (null) */
};

/* summary.json; with run (else NULL) also vLLM's run keys, request_goodput and, from log,
   the per-request arrays (input_lens, output_lens, ttfts, itls, errors) in request order. */
int metrics_write_summary_json(const char *path, const struct rt_summary *s,
                               const struct rt_slo *slo, const struct rt_label *labels,
                               size_t nlabels, const struct rt_run_keys *run,
                               const struct rt_serve_log *log, char *err, size_t errlen);
/* One row per request: id, arrival, first token, finish, TTFT, mean/max TBT, e2e, tokens,
   SLO met, state, reason, queue delay, TPOT and the run's name (run: NULL or "" leaves it
   empty); and the token times in a second file (id, n, t_ms). */
int metrics_write_requests_csv(const char *path, const char *tokens_path,
                               const struct rt_serve_log *log, const struct rt_slo *slo,
                               const char *run, char *err, size_t errlen);
/* Chrome/Perfetto JSON: pid = chip, tid 0 = the control core's iterations (with their
   shape in args), one tid per core for engine activity (when recorded), counters for KV
   blocks, ring rows, queue length and running requests. */
int metrics_write_perfetto(const char *path, const struct rt_serve_log *log, char *err,
                           size_t errlen);
/* The same, with the process named after the "chip" label (and "sched") and the labels
   kept in the trace's metadata. */
int metrics_write_perfetto_labelled(const char *path, const struct rt_serve_log *log,
                                    const struct rt_label *labels, size_t nlabels, char *err,
                                    size_t errlen);
/* Reads requests.csv and tokens.csv back: the TTFTs and the TBT gaps (ms) of the finished
   requests, each sorted ascending (npuctl plot's CDFs). 0, or a negative npu_status with
   the file (and line) in err. */
struct rt_samples {
    double *v;
    size_t n;
};
int metrics_read_latency_samples(const char *requests_csv, const char *tokens_csv,
                                 struct rt_samples *ttft, struct rt_samples *tbt, char *err,
                                 size_t errlen);
void metrics_samples_free(struct rt_samples *s);

/* The terminal report. */
void metrics_print_report(FILE *f, const struct rt_summary *s, const struct rt_slo *slo);

#endif
