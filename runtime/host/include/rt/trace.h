/* SPDX-License-Identifier: MIT */
/*
 * Request traces on the host (docs/traces.md): the native JSON-lines format, importers of
 * published traces, a seeded generator, and the blob the chip receives (rt/trace_blob.h).
 *
 * Native format, one JSON object per line:
 *   {"timestamp": 12.5, "input_length": 2048, "output_length": 128,
 *    "hash_ids": [1, 2], "input_ids": [101, 7, ...]}
 * timestamp in milliseconds from the start of the trace, non-decreasing; hash_ids and
 * input_ids optional (input_ids: input_length token ids, used by functional runs).
 * Errors name the file, the line and the field.
 */
#ifndef RT_TRACE_H
#define RT_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct rt_trace_entry {
    double timestamp_ms;
    uint32_t input_length, output_length;
    uint32_t *input_ids;     /* [input_length] or NULL */
    uint64_t *hash_ids;      /* [nhash] or NULL */
    uint32_t nhash;
};

struct rt_trace {
    struct rt_trace_entry *e;
    size_t n;
};

void trace_free(struct rt_trace *t);

/* The native format. 0, or a negative npu_status with "FILE:LINE: ..." in err. */
int trace_read_jsonl(const char *path, struct rt_trace *t, char *err, size_t errlen);
/* The same from an open stream; `name` is the file's name in the messages. */
int trace_read_jsonl_stream(FILE *f, const char *name, struct rt_trace *t, char *err,
                            size_t errlen);
int trace_write_jsonl(const char *path, const struct rt_trace *t, char *err, size_t errlen);

enum rt_trace_format {
    RT_TRACE_AZURE,     /* Azure LLM inference trace CSV: TIMESTAMP, ContextTokens,
                           GeneratedTokens (timestamps as dates, relative to the first) */
    RT_TRACE_BURSTGPT,  /* BurstGPT CSV: Timestamp (s), Request tokens, Response tokens */
    RT_TRACE_VIDUR,     /* Vidur CSV: arrived_at (s), num_prefill_tokens, num_decode_tokens */
};
/* "azure" | "burstgpt" | "vidur" -> format, -1 if unknown. */
int trace_format_parse(const char *name);
/* Imports a CSV of that format (columns found by header name). Rows with zero lengths are
   kept (the runtime rejects them with a reason); a malformed row is an error naming it. */
int trace_import(const char *path, enum rt_trace_format fmt, struct rt_trace *t, char *err,
                 size_t errlen);
/* The same, keeping only the first `limit` rows (0: all) without reading the rest: the
   published traces run to millions of rows. */
int trace_import_limit(const char *path, enum rt_trace_format fmt, size_t limit,
                       struct rt_trace *t, char *err, size_t errlen);
/* The same from an open stream; `name` is the file's name in the messages. */
int trace_import_stream(FILE *f, const char *name, enum rt_trace_format fmt, size_t limit,
                        struct rt_trace *t, char *err, size_t errlen);

/* What of a trace to keep (npuctl trace import's --where, --window, --time-scale, --limit).
   Rows are kept when every `where` column equals its value (CSV only) and their time,
   from the trace's start (a CSV's first row; a native trace's 0), is in [from_s, to_s);
   reading stops at the first row past to_s or once `limit` rows are kept. The rows kept
   are then timed from the first of them, times scaled by time_scale. */
#define RT_IMPORT_WHERE_MAX 8u
struct rt_import_filter {
    size_t limit;          /* 0: every row */
    double from_s, to_s;   /* the window; to_s INFINITY: to the end */
    double time_scale;     /* > 0; 0.5: twice the rate */
    size_t nwhere;
    const char *where_col[RT_IMPORT_WHERE_MAX], *where_val[RT_IMPORT_WHERE_MAX];
};
/* The filter that keeps every row as it is. */
struct rt_import_filter trace_filter_all(void);
/* A CSV of that format through the filter; a `where` column missing from the header is an
   error naming it. */
int trace_import_filtered(const char *path, enum rt_trace_format fmt,
                          const struct rt_import_filter *flt, struct rt_trace *t, char *err,
                          size_t errlen);
/* A native trace through the filter (its `where` must be empty). */
void trace_select(struct rt_trace *t, const struct rt_import_filter *flt);

/* A length distribution fitted to published statistics: log-normal matching mean and std,
   clamped to [min, max]; p90 is kept for the report of how well the fit matches. */
struct rt_len_dist {
    double mean, std, p90;
    uint32_t min, max;
};

enum rt_arrival { RT_ARRIVAL_POISSON, RT_ARRIVAL_GAMMA };

struct rt_trace_gen_params {
    uint32_t count;            /* requests */
    double rate;               /* requests per second */
    enum rt_arrival arrival;
    double cv;                 /* gamma: coefficient of variation of inter-arrival times */
    struct rt_len_dist input, output;
    uint64_t seed;
    /* Shared prefixes (prefix caching studies): with prefixes > 0, a prefix_share of the
       requests (each drawn from its own stream) begins with one of `prefixes` prompts of
       prefix_tokens tokens (drawn uniformly), added to its drawn input length; every
       request gets hash_ids of hash_block tokens each: the prefix's for the hash blocks
       the prefix fills, its own after. 0 prefixes: no hash_ids, as before. */
    uint32_t prefixes, prefix_tokens, hash_block;
    double prefix_share;       /* in [0, 1] */
};

/* Presets: "sharegpt", "arxiv" (layered-prefill paper, Table 4). 0 or NPU_ERR_NOTFOUND. */
int trace_len_preset(const char *name, struct rt_len_dist *input, struct rt_len_dist *output);
/* Seeded: the same parameters give the same trace on every machine. */
int trace_gen(const struct rt_trace_gen_params *p, struct rt_trace *t, char *err,
              size_t errlen);

/* vLLM's benchmark load knobs on any trace (docs/traces.md, "Load knobs"): keep the first
   num_prompts requests (0: all; more than the trace has is refused), and with a rate re-time
   them as the generator would (gaps from the seed's arrival stream: Poisson for burstiness
   1, else gamma of shape burstiness, mean 1/rate either way; INFINITY: every request at 0),
   keeping their lengths and prompts. rate 0: the trace's own timestamps (burstiness must be
   1 then). 0, or a negative npu_status with the reason in err. */
struct rt_trace_load {
    uint32_t num_prompts;
    double rate;       /* requests per second, INFINITY, or 0 */
    double burstiness; /* > 0 */
    uint64_t seed;
};
int trace_apply_load(struct rt_trace *t, const struct rt_trace_load *l, char *err,
                     size_t errlen);

/* Checks a trace against a model before a run: lengths > 0 are not required (the runtime
   rejects those per request), input_ids below vocab. 0 or NPU_ERR_RANGE naming the entry. */
int trace_check_ids(const struct rt_trace *t, uint32_t vocab, char *err, size_t errlen);

/* Prompt ids for entry i of `len` tokens when the trace has none (functional runs), below
   vocab: the tokens of a hash block the prompt fills (hash_block > 0 and e has a hash id
   for it) are deterministic in (seed, that hash id, position in the block), so prompts
   with equal hash ids share their tokens there as the trace says; the others in (seed, i,
   position). e may be NULL (no hash ids). */
void trace_synth_ids(uint64_t seed, size_t i, const struct rt_trace_entry *e,
                     uint32_t hash_block, uint32_t len, uint32_t vocab, uint32_t *ids);

/* Whether the trace's own input_ids agree with its hash_ids: the tokens of every filled
   hash block named by one hash id are the same wherever it occurs (prefix caching reuses
   one prompt's KV for the other). 0, or NPU_ERR_FORMAT naming both requests. */
int trace_check_hash_ids(const struct rt_trace *t, uint32_t hash_block, char *err,
                         size_t errlen);

/* The chip's blob (rt/trace_blob.h). */
struct rt_blob_opts {
    bool with_ids;         /* include input_ids (trace_synth_ids where the trace has none) */
    uint32_t vocab;        /* the model's (with_ids) */
    uint64_t seed;         /* of the synthetic ids */
    uint64_t room;         /* bytes the chip has for the blob: the control core's DRAM from
                              NPU_TRACE_DRAM_OFFSET; 0: no limit */
    uint32_t hash_block;   /* tokens per hash id: carry the trace's hash_ids (as many as
                              the prompt has hash blocks) and synthesise ids by them; 0:
                              leave them out */
};
/* A blob of more than o->room bytes is refused with NPU_ERR_RANGE before anything is
   allocated. *blob is malloc'ed. */
int trace_blob_build(const struct rt_trace *t, const struct rt_blob_opts *o, void **blob,
                     size_t *bytes, char *err, size_t errlen);

#endif
