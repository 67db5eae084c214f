/* SPDX-License-Identifier: MIT */
/*
 * The console-line protocol: THE definition of every line the host reads from the chip
 * console (docs/outputs.md, "The console lines"). The firmware prints these lines with the
 * encoder (lines_print_*), the host reads them with the decoder (lines_parse); both walk
 * the same table, built below from one list per kind, so the two sides cannot drift.
 *
 * A line's text is
 *   PREFIX [EVENT] key=value key=value ... [TEXT]
 * PREFIX is SERVE (the serve image's control core, and a failing core), MODEL (the
 * interpreter's report) or BENCH (the benchmark images). EVENT is one or more words naming
 * the kind ("iter", "image ok:"); a kind without one starts with its first field and is
 * known by that field's key ("MODEL rank=0 ..."). Fields are printed in table order, each
 * as " key=value" (TEXT: " text", free words to the end of the line).
 *
 * Decoding: unknown keys are ignored (the firmware may add fields), a required key that is
 * missing or a value that does not read as its type is an error, an unknown SERVE event is
 * an error (dropping one would give wrong metrics) and an unknown MODEL or BENCH kind is not
 * a protocol line (free messages such as `MODEL error: ...` are not part of it).
 *
 * The library is portable (host and the cores' newlib) and never allocates.
 */
#ifndef RT_LINES_H
#define RT_LINES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The types of values. The token in a field list (U32, F3, ...) names the type, its C type
   in the kind's struct (LINES_CTYPE_*) and its print precision. */
enum lines_type {
    LINES_T_U32,    /* decimal, uint32_t */
    LINES_T_U64,    /* decimal, uint64_t */
    LINES_T_I32,    /* decimal with a sign, int32_t (return codes) */
    LINES_T_X64,    /* uint64_t as "%#0<prec>" PRIx64: "0x" and zero-padded hex digits */
    LINES_T_FIX,    /* double as "%.<prec>f" */
    LINES_T_G,      /* double as "%.<prec>g" */
    LINES_T_WORD,   /* a string without blanks; prec > 0: at most prec characters printed */
    LINES_T_PAIR32, /* USED/TOTAL, both below 2^32 (struct lines_pair) */
    LINES_T_PAIR64, /* USED/TOTAL (struct lines_pair) */
    LINES_T_LIST,   /* whole numbers separated by commas (struct lines_list) */
    LINES_T_TEXT,   /* free text to the end of the line; only as the last field */
};

#define LINES_CTYPE_U32 uint32_t
#define LINES_CTYPE_U64 uint64_t
#define LINES_CTYPE_I32 int32_t
#define LINES_CTYPE_X64 uint64_t
#define LINES_CTYPE_F0 double
#define LINES_CTYPE_F2 double
#define LINES_CTYPE_F3 double
#define LINES_CTYPE_F4 double
#define LINES_CTYPE_G7 double
#define LINES_CTYPE_WORD const char *
#define LINES_CTYPE_WORD64 const char *
#define LINES_CTYPE_PAIR32 struct lines_pair
#define LINES_CTYPE_PAIR64 struct lines_pair
#define LINES_CTYPE_LIST struct lines_list
#define LINES_CTYPE_TEXT const char *

#define LINES_TYPE_U32 LINES_T_U32, 0
#define LINES_TYPE_U64 LINES_T_U64, 0
#define LINES_TYPE_I32 LINES_T_I32, 0
#define LINES_TYPE_X64 LINES_T_X64, 18
#define LINES_TYPE_F0 LINES_T_FIX, 0
#define LINES_TYPE_F2 LINES_T_FIX, 2
#define LINES_TYPE_F3 LINES_T_FIX, 3
#define LINES_TYPE_F4 LINES_T_FIX, 4
#define LINES_TYPE_G7 LINES_T_G, 7
#define LINES_TYPE_WORD LINES_T_WORD, 0
#define LINES_TYPE_WORD64 LINES_T_WORD, 64
#define LINES_TYPE_PAIR32 LINES_T_PAIR32, 0
#define LINES_TYPE_PAIR64 LINES_T_PAIR64, 0
#define LINES_TYPE_LIST LINES_T_LIST, 0
#define LINES_TYPE_TEXT LINES_T_TEXT, 0

struct lines_pair {
    uint64_t used, total;
};

/* Encoding: v[0..n). Decoding: the n values, in storage of the struct lines_line. */
struct lines_list {
    const uint64_t *v;
    uint32_t n;
};

/*
 * The kinds: K(ID, name, PREFIX, EVENT). EVENT NULL: the line starts with its first field
 * and is known by the key of its first word, which must be one of its fields up to its
 * first required one. The fields of kind `name` are LINES_FIELDS_<name>(F, S):
 * F(S, member, "key", TYPE, REQ | OPT). REQ: decoding refuses a line without it; OPT: the
 * firmware may leave it out (absent.member) and the decoder tells whether it was there.
 */
#define LINES_KINDS(K) \
    K(SERVE_BEGIN, serve_begin, "SERVE", "begin") \
    K(SERVE_INSTANCE, serve_instance, "SERVE", "instance") \
    K(SERVE_ARRIVE, serve_arrive, "SERVE", "arrive") \
    K(SERVE_REJECT, serve_reject, "SERVE", "reject") \
    K(SERVE_FAIL, serve_fail, "SERVE", "fail") \
    K(SERVE_ADMIT, serve_admit, "SERVE", "admit") \
    K(SERVE_TOKEN, serve_token, "SERVE", "token") \
    K(SERVE_FINISH, serve_finish, "SERVE", "finish") \
    K(SERVE_ITER, serve_iter, "SERVE", "iter") \
    K(SERVE_ENGINES, serve_engines, "SERVE", "engines") \
    K(SERVE_DONE, serve_done, "SERVE", "done") \
    K(SERVE_ABORT, serve_abort, "SERVE", "abort") \
    K(SERVE_CORE_FAILED, serve_core_failed, "SERVE", "core-failed") \
    K(MODEL_IMAGE_OK, model_image_ok, "MODEL", "image ok:") \
    K(MODEL_REQ, model_req, "MODEL", NULL) \
    K(MODEL_ROUTED, model_routed, "MODEL", "routed") \
    K(MODEL_ROW, model_row, "MODEL", NULL) \
    K(MODEL_ROOFLINE, model_roofline, "MODEL", "roofline") \
    K(MODEL_REUSE, model_reuse, "MODEL", "reuse") \
    K(MODEL_DONE, model_done, "MODEL", "done") \
    K(MODEL_RANK, model_rank, "MODEL", NULL) \
    K(MODEL_FAILED, model_failed, "MODEL", "failed") \
    K(BENCH_CHIP, bench_chip, "BENCH", "chip") \
    K(BENCH_ENGINES, bench_engines, "BENCH", "engines") \
    K(BENCH_END, bench_end, "BENCH", "end") \
    K(BENCH_GEMM, bench_gemm, "BENCH", "gemm") \
    K(BENCH_DMA, bench_dma, "BENCH", "dma") \
    K(BENCH_NOC, bench_noc, "BENCH", "noc") \
    K(BENCH_COLL, bench_coll, "BENCH", "coll") \
    K(BENCH_M2N, bench_m2n, "BENCH", "m2n") \
    K(BENCH_HOST, bench_host, "BENCH", "host") \
    K(BENCH_SKIP, bench_skip, "BENCH", "skip") \
    K(BENCH_WARN, bench_warn, "BENCH", "warn") \
    K(BENCH_ERROR, bench_error, "BENCH", "error")

/* ---- SERVE: the serve image's control core (docs/serving.md). Times are chip ps. */

#define LINES_FIELDS_serve_begin(F, S) \
    F(S, requests, "requests", U32, REQ) \
    F(S, sched, "sched", WORD, OPT) \
    F(S, layers, "layers", U32, OPT) \
    F(S, blocks, "blocks", U32, OPT)       /* SRAM KV blocks */ \
    F(S, ring, "ring", U64, OPT)           /* HBM ring rows */ \
    F(S, instances, "instances", U32, OPT)
/* pd-disagg: one per instance; role prefill or decode */
#define LINES_FIELDS_serve_instance(F, S) \
    F(S, id, "id", U32, REQ) \
    F(S, role, "role", WORD, REQ) \
    F(S, cores, "cores", U32, REQ)
/* one per request at its arrival, before its admit or reject */
#define LINES_FIELDS_serve_arrive(F, S) \
    F(S, id, "id", U32, REQ) \
    F(S, t, "t", U64, REQ) \
    F(S, input, "input", U32, REQ) \
    F(S, output, "output", U32, REQ)
#define LINES_FIELDS_serve_reject(F, S) \
    F(S, id, "id", U32, REQ) \
    F(S, t, "t", U64, REQ) \
    F(S, reason, "reason", WORD, REQ)
/* a request ended by a failed run: reason is the control core's abort reason */
#define LINES_FIELDS_serve_fail(F, S) \
    F(S, id, "id", U32, REQ) \
    F(S, t, "t", U64, REQ) \
    F(S, reason, "reason", WORD, REQ)
/* reserved SRAM blocks, ring rows, prompt tokens found in the prefix cache */
#define LINES_FIELDS_serve_admit(F, S) \
    F(S, id, "id", U32, REQ) \
    F(S, t, "t", U64, REQ) \
    F(S, blocks, "blocks", U32, OPT) \
    F(S, ring, "ring", U64, OPT) \
    F(S, cached, "cached", U32, OPT)
/* the n-th output token (from 0) of request id */
#define LINES_FIELDS_serve_token(F, S) \
    F(S, id, "id", U32, REQ) \
    F(S, n, "n", U32, REQ) \
    F(S, t, "t", U64, REQ) \
    F(S, token, "token", U32, REQ)
#define LINES_FIELDS_serve_finish(F, S) \
    F(S, id, "id", U32, REQ) \
    F(S, t, "t", U64, REQ)
/* one iteration of instance inst; the cache figures are its; pulls: runs whose prompt KV
   came from a prefill instance first; with a prefix index, cached: its blocks, evicted:
   blocks evicted from it so far */
#define LINES_FIELDS_serve_iter(F, S) \
    F(S, n, "n", U32, REQ) \
    F(S, t0, "t0", U64, REQ) \
    F(S, t1, "t1", U64, REQ) \
    F(S, runs, "runs", U32, OPT) \
    F(S, prefill, "prefill", U32, OPT) \
    F(S, decode, "decode", U32, OPT) \
    F(S, group, "group", U32, OPT) \
    F(S, groups, "groups", U32, OPT) \
    F(S, queue, "queue", U32, OPT) \
    F(S, running, "running", U32, OPT) \
    F(S, blocks, "blocks", PAIR32, OPT) \
    F(S, ring, "ring", PAIR64, OPT) \
    F(S, inst, "inst", U32, OPT) \
    F(S, pulls, "pulls", U32, OPT) \
    F(S, cached, "cached", U32, OPT) \
    F(S, evicted, "evicted", U64, OPT)
/* busy time of core's engines during iteration n (serve option engine_trace) */
#define LINES_FIELDS_serve_engines(F, S) \
    F(S, core, "core", U32, REQ) \
    F(S, n, "n", U32, REQ) \
    F(S, matrix, "matrix", U64, OPT) \
    F(S, vector, "vector", U64, OPT) \
    F(S, dma, "dma", U64, OPT) \
    F(S, noc, "noc", U64, OPT)
#define LINES_FIELDS_serve_done(F, S) \
    F(S, t, "t", U64, REQ) \
    F(S, finished, "finished", U32, OPT) \
    F(S, rejected, "rejected", U32, OPT) \
    F(S, iterations, "iterations", U32, OPT)
/* a failed run: reason bad_image|bad_trace|bad_sched|no_memory|stuck|mailbox_full|
   core_failed|clock, the figure some reasons give, or a message */
#define LINES_FIELDS_serve_abort(F, S) \
    F(S, reason, "reason", WORD, REQ) \
    F(S, queue, "queue", U32, OPT) \
    F(S, n, "n", U32, OPT) \
    F(S, detail, "detail", TEXT, OPT)
/* printed by a core whose iteration n failed with rc */
#define LINES_FIELDS_serve_core_failed(F, S) \
    F(S, core, "core", U32, REQ) \
    F(S, n, "n", U32, REQ) \
    F(S, rc, "rc", I32, REQ)

/* ---- MODEL: the interpreter's lines (docs/images.md, "Output") */

#define LINES_FIELDS_model_image_ok(F, S) \
    F(S, model, "model", WORD64, REQ) \
    F(S, chip, "chip", WORD64, REQ) \
    F(S, tp, "tp", U32, REQ) \
    F(S, bytes, "bytes", U64, REQ) \
    F(S, checksum, "checksum", X64, REQ)
/* the model image: request req's step-th output token and its logit */
#define LINES_FIELDS_model_req(F, S) \
    F(S, req, "req", U32, REQ) \
    F(S, step, "step", U32, REQ) \
    F(S, token, "token", U32, REQ) \
    F(S, logit, "logit", G7, REQ)
/* MoE: tokens routed to each expert of a layer over the run; a model with more experts than
   one console line holds prints them in lines of LINES_ROUTED_PER_LINE experts, each
   saying its first expert (absent: 0, the whole layer in one line) */
#define LINES_ROUTED_PER_LINE 16u
#define LINES_FIELDS_model_routed(F, S) \
    F(S, layer, "layer", U32, REQ) \
    F(S, first, "first", U32, OPT) \
    F(S, tokens, "tokens", LIST, REQ)
/* a row of the breakdown: `layer=L`, `[stage=S] layer=outside` or `[stage=S] layers=all` */
#define LINES_FIELDS_model_row(F, S) \
    F(S, stage, "stage", U32, OPT) \
    F(S, layer, "layer", WORD, OPT) \
    F(S, layers, "layers", WORD, OPT) \
    F(S, attn_us, "attn_us", F3, REQ) \
    F(S, ffn_us, "ffn_us", F3, REQ) \
    F(S, coll_us, "coll_us", F3, REQ) \
    F(S, weights_us, "weights_us", F3, REQ) \
    F(S, other_us, "other_us", F3, REQ) \
    F(S, total_us, "total_us", F3, REQ) \
    F(S, gflop, "gflop", F3, REQ) \
    F(S, hbm_mib, "hbm_mib", F3, REQ) \
    F(S, expert_mib, "expert_mib", F3, REQ) \
    F(S, bound_us, "bound_us", F3, REQ) \
    F(S, x_bound, "x_bound", F2, REQ)
#define LINES_FIELDS_model_roofline(F, S) \
    F(S, op, "op", WORD, REQ) \
    F(S, measured_us, "measured_us", F3, REQ) \
    F(S, bound_us, "bound_us", F3, REQ) \
    F(S, x_bound, "x_bound", F2, REQ) \
    F(S, gflop, "gflop", F3, REQ) \
    F(S, hbm_mib, "hbm_mib", F3, REQ) \
    F(S, noc_mib_hops, "noc_mib_hops", F3, REQ) \
    F(S, descs, "descs", U64, REQ)
/* layer reuse (docs/images.md, "Layer reuse"); the tile figures with keys=tiles */
#define LINES_FIELDS_model_reuse(F, S) \
    F(S, stage, "stage", U32, REQ) \
    F(S, keys, "keys", WORD, REQ) \
    F(S, layers_recorded, "layers_recorded", U64, REQ) \
    F(S, layers_replayed, "layers_replayed", U64, REQ) \
    F(S, layers_unslotted, "layers_unslotted", U64, REQ) \
    F(S, tiles_recorded, "tiles_recorded", U64, OPT) \
    F(S, tiles_replayed, "tiles_replayed", U64, OPT) \
    F(S, tiles_full, "tiles_full", U64, OPT) \
    F(S, heads_recorded, "heads_recorded", U64, OPT) \
    F(S, heads_replayed, "heads_replayed", U64, OPT)
/* the last pipeline stage's rank 0; requests and new (model image) or iterations (serve) */
#define LINES_FIELDS_model_done(F, S) \
    F(S, model, "model", WORD, REQ) \
    F(S, requests, "requests", U32, OPT) \
    F(S, new_tokens, "new", U32, OPT) \
    F(S, iterations, "iterations", U32, OPT) \
    F(S, chip_us, "chip_us", F3, REQ)
/* every rank's weight traffic */
#define LINES_FIELDS_model_rank(F, S) \
    F(S, rank, "rank", U32, REQ) \
    F(S, core, "core", U32, REQ) \
    F(S, hbm_bytes, "hbm_bytes", U64, REQ) \
    F(S, expert_load_bytes, "expert_load_bytes", U64, REQ) \
    F(S, expert_load_bytes_at_load, "expert_load_bytes_at_load", U64, OPT)
#define LINES_FIELDS_model_failed(F, S) \
    F(S, rc, "rc", I32, REQ) \
    F(S, detail, "detail", TEXT, OPT)

/* ---- BENCH: the benchmark images (docs/benchmarks.md) */

#define LINES_FIELDS_bench_chip(F, S) \
    F(S, name, "name", WORD, REQ) \
    F(S, rows, "rows", U32, REQ) \
    F(S, cols, "cols", U32, REQ) \
    F(S, cores, "cores", U32, REQ) \
    F(S, mode, "mode", WORD, REQ) \
    F(S, freq_mhz, "freq_mhz", U32, REQ) \
    F(S, cycle_ps, "cycle_ps", U64, REQ) \
    F(S, cmd_cycles, "cmd_cycles", U32, REQ) \
    F(S, sram_bytes, "sram_bytes", U64, REQ)
#define LINES_FIELDS_bench_engines(F, S) \
    F(S, sa_rows, "sa_rows", U32, REQ) \
    F(S, sa_cols, "sa_cols", U32, REQ) \
    F(S, sram_bytes_per_cycle, "sram_bytes_per_cycle", U32, REQ) \
    F(S, hbm_gbps, "hbm_gbps", U32, REQ) \
    F(S, hbm_latency_cycles, "hbm_latency_cycles", U32, REQ) \
    F(S, noc_link_gbps, "noc_link_gbps", U32, REQ) \
    F(S, noc_hop_cycles, "noc_hop_cycles", U32, REQ)
#define LINES_FIELDS_bench_end(F, S) \
    F(S, chip_ps, "chip_ps", U64, REQ)
#define LINES_FIELDS_bench_gemm(F, S) \
    F(S, m, "m", U32, REQ) \
    F(S, n, "n", U32, REQ) \
    F(S, k, "k", U32, REQ) \
    F(S, tiles, "tiles", U32, REQ) \
    F(S, mt, "mt", U32, REQ) \
    F(S, nt, "nt", U32, REQ) \
    F(S, kt, "kt", U32, REQ) \
    F(S, ps, "ps", U64, REQ) \
    F(S, bound_ps, "bound_ps", F0, REQ) \
    F(S, formula_ps, "formula_ps", U64, REQ) \
    F(S, util, "util", F4, REQ)
#define LINES_FIELDS_bench_dma(F, S) \
    F(S, case_name, "case", WORD, REQ) \
    F(S, cores, "cores", U32, REQ) \
    F(S, core, "core", U32, REQ) \
    F(S, dir, "dir", WORD, REQ) \
    F(S, bytes, "bytes", U64, REQ) \
    F(S, rows, "rows", U32, REQ) \
    F(S, ps, "ps", U64, REQ) \
    F(S, xfer_ps, "xfer_ps", F0, REQ) \
    F(S, latency_ps, "latency_ps", U64, REQ) \
    F(S, cmd_ps, "cmd_ps", U64, REQ) \
    F(S, late_ps, "late_ps", U64, REQ) \
    F(S, eff, "eff", F4, REQ)
#define LINES_FIELDS_bench_noc(F, S) \
    F(S, case_name, "case", WORD, REQ) \
    F(S, flows, "flows", U32, REQ) \
    F(S, src, "src", U32, REQ) \
    F(S, dst, "dst", U32, REQ) \
    F(S, hops, "hops", U64, REQ) \
    F(S, bytes, "bytes", U32, REQ) \
    F(S, ps, "ps", U64, REQ) \
    F(S, xfer_ps, "xfer_ps", F0, REQ) \
    F(S, share, "share", F4, REQ) \
    F(S, hop_ps, "hop_ps", U64, REQ) \
    F(S, cmd_ps, "cmd_ps", U64, REQ) \
    F(S, bound_ps, "bound_ps", F0, REQ) \
    F(S, ratio, "ratio", F4, REQ)
#define LINES_FIELDS_bench_coll(F, S) \
    F(S, op, "op", WORD, REQ) \
    F(S, placement, "placement", WORD, REQ) \
    F(S, p, "p", U32, REQ) \
    F(S, rows, "rows", U32, REQ) \
    F(S, cols, "cols", U32, REQ) \
    F(S, bytes, "bytes", U64, REQ) \
    F(S, ps, "ps", U64, REQ) \
    F(S, bw_ps, "bw_ps", F0, REQ) \
    F(S, lat_ps, "lat_ps", U64, REQ) \
    F(S, eff, "eff", F4, REQ)
#define LINES_FIELDS_bench_m2n(F, S) \
    F(S, op, "op", WORD, REQ) \
    F(S, m, "m", U32, REQ) \
    F(S, n, "n", U32, REQ) \
    F(S, bytes, "bytes", U64, REQ) \
    F(S, ps, "ps", U64, REQ) \
    F(S, bw_ps, "bw_ps", F0, REQ) \
    F(S, lat_ps, "lat_ps", U64, REQ) \
    F(S, eff, "eff", F4, REQ)
#define LINES_FIELDS_bench_host(F, S) \
    F(S, cores, "cores", U32, REQ) \
    F(S, n, "n", U64, REQ) \
    F(S, k, "k", U64, REQ) \
    F(S, bytes, "bytes", U64, REQ) \
    F(S, submits, "submits", U64, REQ) \
    F(S, descs, "descs", U64, REQ) \
    F(S, chip_ps, "chip_ps", U64, REQ)
/* notes for the reader (npuctl bench prints them as they are) */
#define LINES_FIELDS_bench_skip(F, S) F(S, text, "text", TEXT, REQ)
#define LINES_FIELDS_bench_warn(F, S) F(S, text, "text", TEXT, REQ)
#define LINES_FIELDS_bench_error(F, S) F(S, text, "text", TEXT, REQ)

/* ---- what the lists make */

#define LINES_ENUM_(ID, name, prefix, event) LINES_##ID,
enum lines_kind { LINES_KINDS(LINES_ENUM_) LINES_KIND_COUNT };
#undef LINES_ENUM_

/* struct lines_<name>: the values of a line of that kind, then absent.<member> for every
   field: set by the firmware to leave an optional field out, by the decoder when the line
   did not have it (the value is then 0 or NULL). Strings and lists of a decoded line point
   into its struct lines_line. */
#define LINES_MEMBER_(S, member, key, type, req) LINES_CTYPE_##type member;
#define LINES_ABSENT_(S, member, key, type, req) bool member;
#define LINES_STRUCT_(ID, name, prefix, event) \
    struct lines_##name { \
        LINES_FIELDS_##name(LINES_MEMBER_, name) \
        struct { LINES_FIELDS_##name(LINES_ABSENT_, name) } absent; \
    };
LINES_KINDS(LINES_STRUCT_)
#undef LINES_STRUCT_
#undef LINES_ABSENT_
#undef LINES_MEMBER_

/* The values of a line of any kind: the member named after the kind. */
#define LINES_UNION_(ID, name, prefix, event) struct lines_##name name;
struct lines_value {
    union {
        LINES_KINDS(LINES_UNION_)
    };
};
#undef LINES_UNION_

/* ---- the table */

enum lines_need { LINES_OPT, LINES_REQ };

struct lines_field {
    const char *key;
    enum lines_type type;
    uint32_t prec;            /* FIX / G digits, X64 width, WORD most characters (0: all) */
    enum lines_need need;
    size_t offset;            /* of the value in the kind's struct */
    size_t absent_offset;     /* of its absent flag */
};

struct lines_kind_def {
    const char *name;         /* "serve_iter" */
    const char *prefix;       /* "SERVE", "MODEL", "BENCH" */
    const char *event;        /* "iter"; NULL: known by its first field */
    const struct lines_field *fields;
    uint32_t nfields;
};

/* The definition of a kind; NULL for a value out of range. */
const struct lines_kind_def *lines_describe_kind(enum lines_kind kind);

/* ---- encoding (the firmware) */

/*
 * Formats a line of `kind` (no newline) into buf: 0, NPU_ERR_INVAL (a kind out of range, a
 * required field marked absent, a NULL string, a word with a blank, text with a newline, a
 * PAIR32 value past 32 bits) with nothing written, or NPU_ERR_RANGE if buf is too small
 * (buf then holds the start of the line).
 */
int lines_format(char *buf, size_t len, enum lines_kind kind, const struct lines_value *v);

/* The same line and '\n' on stdout, of any length: 0 or NPU_ERR_INVAL (nothing printed). */
int lines_print(enum lines_kind kind, const struct lines_value *v);

/* lines_print_<name>(v): lines_print of the kind of v, for every kind. */
#define LINES_PRINT_DECL_(ID, name, prefix, event) \
    int lines_print_##name(const struct lines_##name *v);
LINES_KINDS(LINES_PRINT_DECL_)
#undef LINES_PRINT_DECL_

/* ---- decoding (the host) */

#define LINES_TEXT_MAX 1024u  /* longest line text lines_parse takes */
#define LINES_WORDS_MAX 48u   /* key=value words kept of a line */

struct lines_word {
    const char *key, *val;
};

/* A decoded line: its kind, its values, and the storage they point into. */
struct lines_line {
    enum lines_kind kind;
    struct lines_value v;
    uint32_t nwords;                        /* every key=value word, unknown keys too, */
    struct lines_word words[LINES_WORDS_MAX]; /* in order (not those of a TEXT tail) */
    char buf[LINES_TEXT_MAX];
    uint64_t list[LINES_TEXT_MAX / 2];
};

/* The protocol text of a console line ("[ T us WHO ] TEXT"): the first SERVE, MODEL or
   BENCH word that starts a word of the line (after a blank or ']') and is followed by a
   blank; NULL if there is none. */
const char *lines_find(const char *line);

/*
 * The kind of a protocol text (from its prefix on; a trailing newline is ignored): 0 and
 * *kind; NPU_ERR_FORMAT for an unknown SERVE event ("unknown SERVE event 'WORD'" in err);
 * NPU_ERR_NOTFOUND for any other text, which is not a line of the protocol. err may be
 * NULL.
 */
int lines_identify(const char *text, enum lines_kind *kind, char *err, size_t errlen);

/*
 * Decodes a protocol text into *line: lines_identify's results, or NPU_ERR_FORMAT with the
 * reason in err ("missing t=", "n='zero' is not a whole number", "blocks='3' is not
 * USED/TOTAL", a value out of its type's range, a text longer than LINES_TEXT_MAX); on
 * an error after the kind was known, line->kind is set. errno is left as it was.
 */
int lines_parse(const char *text, struct lines_line *line, char *err, size_t errlen);

#endif
