/* SPDX-License-Identifier: MIT */
/*
 * The console-line protocol (runtime/lines, rt/lines.h): every kind of the table formatted
 * with representative and edge values and read back; the refusals of the decoder and the
 * encoder; and golden lines, copied from the consoles of real runs (npuctl serve, flash,
 * bench) before the firmware printed through the encoder, so the format cannot drift.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "npu_enums.h"
#include "rt/lines.h"

static char err[256];
static struct lines_line line;

/* ---- the table itself */

/* The fields an event-less kind's line may start with: up to its first required one. */
static uint32_t lead_fields(const struct lines_kind_def *d)
{
    uint32_t i = 0;
    while (i < d->nfields && d->fields[i].need != LINES_REQ)
        i++;
    assert_true(i < d->nfields);
    return i + 1;
}

static void test_table(void **state)
{
    (void)state;
    for (int k = 0; k < LINES_KIND_COUNT; k++) {
        const struct lines_kind_def *d = lines_describe_kind((enum lines_kind)k);
        assert_non_null(d);
        assert_true(d->nfields > 0);
        for (uint32_t i = 0; i < d->nfields; i++) {
            /* a text only last; keys unique within a kind */
            if (d->fields[i].type == LINES_T_TEXT)
                assert_int_equal(i, d->nfields - 1);
            for (uint32_t j = 0; j < i; j++)
                assert_string_not_equal(d->fields[i].key, d->fields[j].key);
        }
        /* events unique within a prefix; an event-less kind starts with a required field
           within its first few, so that its first key names it */
        for (int o = 0; o < k; o++) {
            const struct lines_kind_def *e = lines_describe_kind((enum lines_kind)o);
            if (strcmp(d->prefix, e->prefix) != 0)
                continue;
            if (d->event && e->event)
                assert_string_not_equal(d->event, e->event);
            for (uint32_t i = 0; !d->event && !e->event && i < lead_fields(d); i++)
                for (uint32_t j = 0; j < lead_fields(e); j++)
                    assert_string_not_equal(d->fields[i].key, e->fields[j].key);
        }
    }
    assert_null(lines_describe_kind(LINES_KIND_COUNT));
}

/* ---- round trips of every kind, driven by the table */

enum { VAR_ZERO, VAR_MAX, VAR_TYPICAL, VAR_NO_OPTIONAL, VAR_COUNT };

static const uint64_t list_max[] = { UINT64_MAX, 0, 1 };
static const uint64_t list_typical[] = { 37, 29, 45, 37, 43, 34, 40, 19 };
static const char name64[] = "a-name-of-exactly-sixty-four-characters-0123456789-abcdefghijklm";

/* A value for field f of variant var, written at p. */
static void fill_value(const struct lines_field *f, int var, char *p)
{
    switch (f->type) {
    case LINES_T_U32:
        *(uint32_t *)p = var == VAR_ZERO ? 0 : var == VAR_MAX ? UINT32_MAX : 12345;
        break;
    case LINES_T_U64:
        *(uint64_t *)p = var == VAR_ZERO ? 0 : var == VAR_MAX ? UINT64_MAX : 9304428173ull;
        break;
    case LINES_T_I32:
        *(int32_t *)p = var == VAR_ZERO ? 0 : var == VAR_MAX ? INT32_MIN : -5;
        break;
    case LINES_T_X64:
        *(uint64_t *)p = var == VAR_ZERO ? 0 : var == VAR_MAX ? UINT64_MAX
                                                            : 0x28202d2c22890971ull;
        break;
    case LINES_T_FIX: /* values the precision prints exactly */
        *(double *)p = var == VAR_ZERO ? 0.0 : var == VAR_MAX ? 4294967296.0 * 65536.0
                                                 : f->prec ? -1969.5 : 1028000.0;
        break;
    case LINES_T_G:
        *(double *)p = var == VAR_ZERO ? 0.0 : var == VAR_MAX ? -1.5e-10 : 1.948007;
        break;
    case LINES_T_WORD:
        *(const char **)p = var == VAR_ZERO ? "" : var == VAR_MAX && f->prec ? name64
                                                       : "hbm>sram";
        break;
    case LINES_T_PAIR32:
    case LINES_T_PAIR64: {
        uint64_t max = f->type == LINES_T_PAIR32 ? UINT32_MAX : UINT64_MAX;
        *(struct lines_pair *)p = var == VAR_ZERO ? (struct lines_pair){ 0, 0 }
                                  : var == VAR_MAX ? (struct lines_pair){ max, max }
                                                   : (struct lines_pair){ 3, 64 };
        break;
    }
    case LINES_T_LIST:
        *(struct lines_list *)p = var == VAR_ZERO ? (struct lines_list){ NULL, 0 }
                                  : var == VAR_MAX ? (struct lines_list){ list_max, 3 }
                                                   : (struct lines_list){ list_typical, 8 };
        break;
    case LINES_T_TEXT:
        *(const char **)p = var == VAR_ZERO ? "x"
                            : var == VAR_MAX ? "request 3: token 2 = 900 is not below vocab_size "
                                               "512 (a=b, c = d)"
                                             : "no trace_bytes= bootarg, or more than 5 bytes";
        break;
    }
}

static void check_value(const struct lines_kind_def *d, const struct lines_field *f,
                        const char *want, const char *got)
{
    const char *ws, *gs;
    switch (f->type) {
    case LINES_T_U32:
        assert_int_equal(*(const uint32_t *)got, *(const uint32_t *)want);
        break;
    case LINES_T_U64:
    case LINES_T_X64:
        assert_true(*(const uint64_t *)got == *(const uint64_t *)want);
        break;
    case LINES_T_I32:
        assert_int_equal(*(const int32_t *)got, *(const int32_t *)want);
        break;
    case LINES_T_FIX:
    case LINES_T_G:
        if (*(const double *)got != *(const double *)want)
            fail_msg("%s %s: %.17g read back as %.17g", d->name, f->key,
                     *(const double *)want, *(const double *)got);
        break;
    case LINES_T_WORD:
    case LINES_T_TEXT:
        ws = *(const char *const *)want, gs = *(const char *const *)got;
        assert_non_null(gs);
        assert_string_equal(gs, ws);
        break;
    case LINES_T_PAIR32:
    case LINES_T_PAIR64:
        assert_true(((const struct lines_pair *)got)->used ==
                    ((const struct lines_pair *)want)->used);
        assert_true(((const struct lines_pair *)got)->total ==
                    ((const struct lines_pair *)want)->total);
        break;
    case LINES_T_LIST: {
        const struct lines_list *wl = (const void *)want, *gl = (const void *)got;
        assert_int_equal(gl->n, wl->n);
        for (uint32_t i = 0; i < wl->n; i++)
            assert_true(gl->v[i] == wl->v[i]);
        break;
    }
    }
}

static void round_trip(enum lines_kind kind, int var)
{
    const struct lines_kind_def *d = lines_describe_kind(kind);
    struct lines_value v;
    char text[LINES_TEXT_MAX], again[LINES_TEXT_MAX];
    memset(&v, 0, sizeof(v));
    for (uint32_t i = 0; i < d->nfields; i++) {
        const struct lines_field *f = &d->fields[i];
        fill_value(f, var, (char *)&v + f->offset);
        *(bool *)((char *)&v + f->absent_offset) = var == VAR_NO_OPTIONAL && f->need == LINES_OPT;
    }
    assert_int_equal(lines_format(text, sizeof(text), kind, &v), NPU_OK);
    if (lines_parse(text, &line, err, sizeof(err)) != NPU_OK)
        fail_msg("%s variant %d: '%s' does not read back: %s", d->name, var, text, err);
    assert_int_equal(line.kind, kind);
    for (uint32_t i = 0; i < d->nfields; i++) {
        const struct lines_field *f = &d->fields[i];
        bool absent = *(const bool *)((const char *)&line.v + f->absent_offset);
        assert_int_equal(absent, var == VAR_NO_OPTIONAL && f->need == LINES_OPT);
        if (!absent)
            check_value(d, f, (const char *)&v + f->offset, (const char *)&line.v + f->offset);
    }
    /* what was read formats to the same text */
    assert_int_equal(lines_format(again, sizeof(again), kind, &line.v), NPU_OK);
    assert_string_equal(again, text);
}

static void test_round_trip_every_kind(void **state)
{
    (void)state;
    for (int k = 0; k < LINES_KIND_COUNT; k++)
        for (int var = 0; var < VAR_COUNT; var++)
            round_trip((enum lines_kind)k, var);
}

/* Typed use, as the firmware and serve_log.c write it. */
static void test_typed(void **state)
{
    (void)state;
    char text[256];
    struct lines_value v = { .serve_iter = {
        .n = 1, .t0 = 192000000, .t1 = 340603886, .runs = 1, .prefill = 8,
        .blocks = { 1, 32 }, .ring = { 0, 8192 }, .inst = 0,
        .absent = { .decode = true, .group = true, .groups = true, .queue = true,
                    .running = true, .pulls = true, .cached = true, .evicted = true } } };
    assert_int_equal(lines_format(text, sizeof(text), LINES_SERVE_ITER, &v), NPU_OK);
    assert_string_equal(text, "SERVE iter n=1 t0=192000000 t1=340603886 runs=1 prefill=8 "
                              "blocks=1/32 ring=0/8192 inst=0");
    assert_int_equal(lines_parse(text, &line, err, sizeof(err)), NPU_OK);
    assert_int_equal(line.kind, LINES_SERVE_ITER);
    assert_true(line.v.serve_iter.t1 == 340603886);
    assert_true(line.v.serve_iter.absent.pulls);
    assert_false(line.v.serve_iter.absent.blocks);
    assert_true(line.v.serve_iter.blocks.total == 32);
}

/* ---- golden lines: what the firmware printed before the encoder, byte for byte */

struct golden {
    enum lines_kind kind;
    struct lines_value v;
    const char *text;
};

static const uint64_t routed[] = { 37, 29, 45, 37, 43, 34, 40, 19 };

static const struct golden goldens[] = {
    { LINES_SERVE_BEGIN, { .serve_begin = { .requests = 16, .sched = "pd-disagg", .layers = 4,
                                            .blocks = 32, .ring = 8192, .instances = 4 } },
      "SERVE begin requests=16 sched=pd-disagg layers=4 blocks=32 ring=8192 instances=4" },
    { LINES_SERVE_INSTANCE, { .serve_instance = { .id = 0, .role = "prefill", .cores = 4 } },
      "SERVE instance id=0 role=prefill cores=4" },
    { LINES_SERVE_ARRIVE, { .serve_arrive = { .id = 0, .t = 192000000, .input = 30,
                                              .output = 15 } },
      "SERVE arrive id=0 t=192000000 input=30 output=15" },
    { LINES_SERVE_REJECT, { .serve_reject = { .id = 1, .t = 273000000, .reason = "too_long" } },
      "SERVE reject id=1 t=273000000 reason=too_long" },
    { LINES_SERVE_ADMIT, { .serve_admit = { .id = 0, .t = 192000000, .blocks = 1, .ring = 0,
                                            .absent = { .cached = true } } },
      "SERVE admit id=0 t=192000000 blocks=1 ring=0" },
    { LINES_SERVE_ADMIT, { .serve_admit = { .id = 3, .t = 192000000, .blocks = 2, .ring = 0,
                                            .cached = 1024 } },
      "SERVE admit id=3 t=192000000 blocks=2 ring=0 cached=1024" },
    { LINES_SERVE_TOKEN, { .serve_token = { .id = 0, .n = 0, .t = 788515510, .token = 435 } },
      "SERVE token id=0 n=0 t=788515510 token=435" },
    { LINES_SERVE_FINISH, { .serve_finish = { .id = 0, .t = 1722314748 } },
      "SERVE finish id=0 t=1722314748" },
    { LINES_SERVE_ITER, { .serve_iter = { .n = 1, .t0 = 192000000, .t1 = 340603886, .runs = 1,
                                          .prefill = 8, .decode = 0, .group = 0, .groups = 1,
                                          .queue = 0, .running = 1, .blocks = { 1, 32 },
                                          .ring = { 0, 8192 }, .inst = 0, .pulls = 0,
                                          .absent = { .cached = true, .evicted = true } } },
      "SERVE iter n=1 t0=192000000 t1=340603886 runs=1 prefill=8 decode=0 group=0 groups=1 "
      "queue=0 running=1 blocks=1/32 ring=0/8192 inst=0 pulls=0" },
    { LINES_SERVE_ITER, { .serve_iter = { .n = 2, .t0 = 192000000, .t1 = 340603886, .runs = 1,
                                          .prefill = 8, .decode = 0, .group = 0, .groups = 1,
                                          .queue = 0, .running = 1, .blocks = { 3, 32 },
                                          .ring = { 0, 8192 }, .inst = 1, .pulls = 0,
                                          .cached = 2, .evicted = 5 } },
      "SERVE iter n=2 t0=192000000 t1=340603886 runs=1 prefill=8 decode=0 group=0 groups=1 "
      "queue=0 running=1 blocks=3/32 ring=0/8192 inst=1 pulls=0 cached=2 evicted=5" },
    { LINES_SERVE_ENGINES, { .serve_engines = { .core = 0, .n = 1, .matrix = 145860000,
                                                .vector = 12724000, .dma = 3415204,
                                                .noc = 939254 } },
      "SERVE engines core=0 n=1 matrix=145860000 vector=12724000 dma=3415204 noc=939254" },
    { LINES_SERVE_DONE, { .serve_done = { .t = 9304428173ull, .finished = 16, .rejected = 0,
                                          .iterations = 191 } },
      "SERVE done t=9304428173 finished=16 rejected=0 iterations=191" },
    { LINES_SERVE_ABORT, { .serve_abort = {
          .reason = "bad_trace", .absent = { .queue = true, .n = true },
          .detail = "no trace_bytes= bootarg, or more than 251658240 bytes (run with npuctl "
                    "serve)" } },
      "SERVE abort reason=bad_trace no trace_bytes= bootarg, or more than 251658240 bytes "
      "(run with npuctl serve)" },
    { LINES_SERVE_ABORT, { .serve_abort = {
          .reason = "bad_sched", .absent = { .queue = true, .n = true },
          .detail = "scheduler 'bogus' or KV cache (32 blocks) refused" } },
      "SERVE abort reason=bad_sched scheduler 'bogus' or KV cache (32 blocks) refused" },
    { LINES_MODEL_IMAGE_OK, { .model_image_ok = { .model = "tiny-moe", .chip = "mesh-2x2",
                                                  .tp = 2, .bytes = 7631360,
                                                  .checksum = 0x28202d2c22890971ull } },
      "MODEL image ok: model=tiny-moe chip=mesh-2x2 tp=2 bytes=7631360 "
      "checksum=0x28202d2c22890971" },
    { LINES_MODEL_REQ, { .model_req = { .req = 0, .step = 2, .token = 375,
                                        .logit = (double)1.68556f } },
      "MODEL req=0 step=2 token=375 logit=1.68556" },
    { LINES_MODEL_ROUTED, { .model_routed = { .layer = 2, .tokens = { routed, 8 },
                                              .absent = { .first = true } } },
      "MODEL routed layer=2 tokens=37,29,45,37,43,34,40,19" },
    { LINES_MODEL_ROUTED, { .model_routed = { .layer = 3, .first = 16,
                                              .tokens = { routed, 8 } } },
      "MODEL routed layer=3 first=16 tokens=37,29,45,37,43,34,40,19" },
    { LINES_MODEL_ROW, { .model_row = {
          .layer = "2", .attn_us = 136.668, .ffn_us = 197.912, .coll_us = 969.661,
          .weights_us = 119.216, .other_us = 0.0, .total_us = 1423.457, .gflop = 0.026,
          .hbm_mib = 5.575, .expert_mib = 4.688, .bound_us = 101.952, .x_bound = 13.96,
          .absent = { .stage = true, .layers = true } } },
      "MODEL layer=2 attn_us=136.668 ffn_us=197.912 coll_us=969.661 weights_us=119.216 "
      "other_us=0.000 total_us=1423.457 gflop=0.026 hbm_mib=5.575 expert_mib=4.688 "
      "bound_us=101.952 x_bound=13.96" },
    { LINES_MODEL_ROW, { .model_row = {
          .stage = 1, .layers = "all", .attn_us = 277.328, .ffn_us = 366.272,
          .coll_us = 1050.472, .weights_us = 212.672, .other_us = 0.0, .total_us = 1906.744,
          .gflop = 0.051, .hbm_mib = 9.838, .expert_mib = 8.062, .bound_us = 200.560,
          .x_bound = 9.51, .absent = { .layer = true } } },
      "MODEL stage=1 layers=all attn_us=277.328 ffn_us=366.272 coll_us=1050.472 "
      "weights_us=212.672 other_us=0.000 total_us=1906.744 gflop=0.051 hbm_mib=9.838 "
      "expert_mib=8.062 bound_us=200.560 x_bound=9.51" },
    { LINES_MODEL_ROOFLINE, { .model_roofline = {
          .op = "ffn", .measured_us = 366.272, .bound_us = 111.360, .x_bound = 3.29,
          .gflop = 0.029, .hbm_mib = 0.0, .noc_mib_hops = 0.0, .descs = 1070 } },
      "MODEL roofline op=ffn measured_us=366.272 bound_us=111.360 x_bound=3.29 gflop=0.029 "
      "hbm_mib=0.000 noc_mib_hops=0.000 descs=1070" },
    { LINES_MODEL_REUSE, { .model_reuse = {
          .stage = 0, .keys = "tiles", .layers_recorded = 74, .layers_replayed = 280,
          .layers_unslotted = 0, .tiles_recorded = 84, .tiles_replayed = 83,
          .tiles_full = 74, .heads_recorded = 2, .heads_replayed = 9 } },
      "MODEL reuse stage=0 keys=tiles layers_recorded=74 layers_replayed=280 "
      "layers_unslotted=0 tiles_recorded=84 tiles_replayed=83 tiles_full=74 heads_recorded=2 "
      "heads_replayed=9" },
    { LINES_MODEL_DONE, { .model_done = { .model = "tiny-moe", .requests = 2,
                                          .new_tokens = 8, .chip_us = 1969.826,
                                          .absent = { .iterations = true } } },
      "MODEL done model=tiny-moe requests=2 new=8 chip_us=1969.826" },
    { LINES_MODEL_RANK, { .model_rank = { .rank = 1, .core = 3, .hbm_bytes = 10320384,
                                          .expert_load_bytes = 7274496,
                                          .expert_load_bytes_at_load = 0 } },
      "MODEL rank=1 core=3 hbm_bytes=10320384 expert_load_bytes=7274496 "
      "expert_load_bytes_at_load=0" },
    { LINES_BENCH_CHIP, { .bench_chip = { .name = "large-64", .rows = 8, .cols = 8,
                                          .cores = 64, .mode = "performance",
                                          .freq_mhz = 500, .cycle_ps = 2000, .cmd_cycles = 4,
                                          .sram_bytes = 33554432 } },
      "BENCH chip name=large-64 rows=8 cols=8 cores=64 mode=performance freq_mhz=500 "
      "cycle_ps=2000 cmd_cycles=4 sram_bytes=33554432" },
    { LINES_BENCH_GEMM, { .bench_gemm = { .m = 16, .n = 16, .k = 16, .tiles = 1, .mt = 16,
                                          .nt = 16, .kt = 16, .ps = 1028000, .bound_ps = 500.0,
                                          .formula_ps = 1028000, .util = 500.0 / 1028000 } },
      "BENCH gemm m=16 n=16 k=16 tiles=1 mt=16 nt=16 kt=16 ps=1028000 bound_ps=500 "
      "formula_ps=1028000 util=0.0005" },
    { LINES_BENCH_DMA, { .bench_dma = { .case_name = "single", .cores = 1, .core = 0,
                                        .dir = "hbm>sram", .bytes = 1024, .rows = 1,
                                        .ps = 216534, .xfer_ps = 1024 * 1000.0 / 120,
                                        .latency_ps = 200000, .cmd_ps = 8000, .late_ps = 0,
                                        .eff = 1024 * 1000.0 / 120 / 216534 } },
      "BENCH dma case=single cores=1 core=0 dir=hbm>sram bytes=1024 rows=1 ps=216534 "
      "xfer_ps=8533 latency_ps=200000 cmd_ps=8000 late_ps=0 eff=0.0394" },
    { LINES_BENCH_SKIP, { .bench_skip = { .text = "p=4 bytes=67108864 reason=exceeds_free_sram "
                                                  "free=32028672" } },
      "BENCH skip p=4 bytes=67108864 reason=exceeds_free_sram free=32028672" },
};

static void test_golden(void **state)
{
    (void)state;
    char text[LINES_TEXT_MAX], again[LINES_TEXT_MAX];
    for (size_t i = 0; i < sizeof(goldens) / sizeof(goldens[0]); i++) {
        const struct golden *g = &goldens[i];
        assert_int_equal(lines_format(text, sizeof(text), g->kind, &g->v), NPU_OK);
        assert_string_equal(text, g->text);
        /* and the console line, prefix and newline included, reads back to the same text */
        char console[LINES_TEXT_MAX + 64];
        snprintf(console, sizeof(console), "[     192.000000 us ctrl      ] %s\n", g->text);
        const char *p = lines_find(console);
        assert_non_null(p);
        if (lines_parse(p, &line, err, sizeof(err)) != NPU_OK)
            fail_msg("golden %zu: %s", i, err);
        assert_int_equal(line.kind, g->kind);
        assert_int_equal(lines_format(again, sizeof(again), line.kind, &line.v), NPU_OK);
        assert_string_equal(again, g->text);
    }
}

/* ---- refusals */

static void expect_refused(const char *text, int rc, const char *what)
{
    int got = lines_parse(text, &line, err, sizeof(err));
    if (got != rc || !strstr(err, what))
        fail_msg("'%s': rc %d, err '%s'; want %d and '%s'", text, got, err, rc, what);
}

static void test_refused(void **state)
{
    (void)state;
    expect_refused("SERVE finish id=1", NPU_ERR_FORMAT, "missing t=");
    assert_int_equal(line.kind, LINES_SERVE_FINISH);
    expect_refused("SERVE token id=0 n=zero t=5 token=1", NPU_ERR_FORMAT,
                   "n='zero' is not a whole number");
    expect_refused("SERVE token id=0 n=-1 t=5 token=1", NPU_ERR_FORMAT, "n='-1'");
    expect_refused("SERVE token id=0 n=1 t=5x token=1", NPU_ERR_FORMAT, "t='5x'");
    expect_refused("SERVE token id=0 n=4294967296 t=5 token=1", NPU_ERR_FORMAT,
                   "n=4294967296 is out of range");
    expect_refused("SERVE done t=18446744073709551616", NPU_ERR_FORMAT, "out of range");
    expect_refused("SERVE iter n=0 t0=0 t1=5 blocks=3", NPU_ERR_FORMAT,
                   "blocks='3' is not USED/TOTAL");
    expect_refused("SERVE iter n=0 t0=0 t1=5 blocks=1/4294967296", NPU_ERR_FORMAT,
                   "out of range");
    expect_refused("SERVE frobnicate id=0", NPU_ERR_FORMAT, "unknown SERVE event 'frobnicate'");
    expect_refused("SERVE id=0", NPU_ERR_FORMAT, "unknown SERVE event 'id=0'");
    expect_refused("SERVE abort queue=1", NPU_ERR_FORMAT, "missing reason=");
    expect_refused("SERVE core-failed core=1 n=2 rc=x", NPU_ERR_FORMAT, "rc='x'");
    expect_refused("MODEL routed layer=1 tokens=1,,2", NPU_ERR_FORMAT, "tokens='1,,2'");
    expect_refused("MODEL routed layer=1 tokens=1,", NPU_ERR_FORMAT, "tokens='1,'");
    expect_refused("MODEL roofline op=ffn measured_us=abc bound_us=1 x_bound=1 gflop=1 "
                   "hbm_mib=1 noc_mib_hops=1 descs=1", NPU_ERR_FORMAT,
                   "measured_us='abc' is not a number");
    expect_refused("MODEL image ok: model=m chip=c tp=1 bytes=1 checksum=zz", NPU_ERR_FORMAT,
                   "checksum='zz'");
    expect_refused("BENCH skip", NPU_ERR_FORMAT, "missing the text");
    /* not protocol lines: free messages, unknown MODEL and BENCH kinds, other text */
    expect_refused("MODEL error: core 3: something", NPU_ERR_NOTFOUND, "");
    expect_refused("MODEL image refused: truncated", NPU_ERR_NOTFOUND, "");
    expect_refused("MODEL frob=1", NPU_ERR_NOTFOUND, "");
    expect_refused("BENCH newkind a=1", NPU_ERR_NOTFOUND, "");
    expect_refused("serve: firmware up", NPU_ERR_NOTFOUND, "");
    enum lines_kind k;
    assert_int_equal(lines_identify("SERVE frobnicate", &k, NULL, 0), NPU_ERR_FORMAT);
    assert_int_equal(lines_identify("MODEL rank=3 core=1", &k, NULL, 0), NPU_OK);
    assert_int_equal(k, LINES_MODEL_RANK);
    assert_int_equal(lines_identify("MODEL layers=all attn_us=1", &k, NULL, 0), NPU_OK);
    assert_int_equal(k, LINES_MODEL_ROW);
    assert_int_equal(lines_identify("MODEL done model=x chip_us=1", &k, NULL, 0), NPU_OK);
    assert_int_equal(k, LINES_MODEL_DONE);
    /* a line longer than the decoder takes */
    char longline[LINES_TEXT_MAX + 16];
    memset(longline, 'x', sizeof(longline) - 1);
    longline[sizeof(longline) - 1] = '\0';
    memcpy(longline, "SERVE finish id=1 t=2 ", 22);
    expect_refused(longline, NPU_ERR_FORMAT, "characters");
}

/* Unknown keys are ignored (the firmware may add fields); a text tail and key=value words
   come apart; the first of two equal keys counts. */
static void test_tolerant(void **state)
{
    (void)state;
    assert_int_equal(lines_parse("SERVE finish id=1 new_key=zz t=5 id=9 plain\r\n", &line, err,
                                 sizeof(err)), NPU_OK);
    assert_int_equal(line.v.serve_finish.id, 1);
    assert_true(line.v.serve_finish.t == 5);
    assert_int_equal(line.nwords, 4);
    assert_string_equal(line.words[1].key, "new_key");
    assert_string_equal(line.words[1].val, "zz");
    assert_int_equal(lines_parse("SERVE abort reason=stuck queue=3", &line, err, sizeof(err)),
                     NPU_OK);
    assert_int_equal(line.v.serve_abort.queue, 3);
    assert_true(line.v.serve_abort.absent.n && line.v.serve_abort.absent.detail);
    assert_int_equal(lines_parse("SERVE abort reason=bad_image core 5 is beyond n=3  x",
                                 &line, err, sizeof(err)), NPU_OK);
    assert_string_equal(line.v.serve_abort.detail, "core 5 is beyond n=3  x");
    assert_true(line.v.serve_abort.absent.n);
    assert_int_equal(lines_parse("BENCH error core=3 op=allreduce rc=-5\n", &line, err,
                                 sizeof(err)), NPU_OK);
    assert_int_equal(line.kind, LINES_BENCH_ERROR);
    assert_string_equal(line.v.bench_error.text, "core=3 op=allreduce rc=-5");
}

static void test_find(void **state)
{
    (void)state;
    const char *l = "[   0.000000 us ctrl      ] SERVE begin requests=4";
    assert_ptr_equal(lines_find(l), strstr(l, "SERVE"));
    assert_null(lines_find("[ 6000.0 us ctrl ] OBSERVE is no event (SERVE starts a word)"));
    assert_null(lines_find("[ 6000.0 us ctrl ] SERVE"));
    l = "BENCH end chip_ps=1";
    assert_ptr_equal(lines_find(l), l);
    l = "[ 1.0 us c3(0,3) ]MODEL rank=0 core=3";
    assert_ptr_equal(lines_find(l), strstr(l, "MODEL"));
}

/* The encoder refuses what would not read back, and a buffer too small. */
static void test_encode_refused(void **state)
{
    (void)state;
    char text[64];
    struct lines_value v = { .serve_reject = { .id = 1, .t = 2, .reason = "too long" } };
    assert_int_equal(lines_format(text, sizeof(text), LINES_SERVE_REJECT, &v), NPU_ERR_INVAL);
    v.serve_reject.reason = NULL;
    assert_int_equal(lines_format(text, sizeof(text), LINES_SERVE_REJECT, &v), NPU_ERR_INVAL);
    v.serve_reject.reason = "too_long";
    v.serve_reject.absent.t = true;
    assert_int_equal(lines_format(text, sizeof(text), LINES_SERVE_REJECT, &v), NPU_ERR_INVAL);
    v.serve_reject.absent.t = false;
    assert_int_equal(lines_format(text, 10, LINES_SERVE_REJECT, &v), NPU_ERR_RANGE);
    assert_string_equal(text, "SERVE rej");
    assert_int_equal(lines_format(text, sizeof(text), LINES_SERVE_REJECT, &v), NPU_OK);
    assert_int_equal(lines_format(text, sizeof(text), LINES_KIND_COUNT, &v), NPU_ERR_INVAL);
    struct lines_value a = { .serve_abort = { .reason = "x", .detail = "two\nlines" } };
    assert_int_equal(lines_format(text, sizeof(text), LINES_SERVE_ABORT, &a), NPU_ERR_INVAL);
    struct lines_value p = { .serve_iter = { .blocks = { 1ull << 32, 1 } } };
    assert_int_equal(lines_format(text, sizeof(text), LINES_SERVE_ITER, &p), NPU_ERR_INVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_round_trip_every_kind),
        cmocka_unit_test(test_typed),
        cmocka_unit_test(test_golden),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_tolerant),
        cmocka_unit_test(test_find),
        cmocka_unit_test(test_encode_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
