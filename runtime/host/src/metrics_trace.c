/* SPDX-License-Identifier: MIT */
/*
 * The Chrome/Perfetto trace of a serving run (rt/metrics.h, docs/outputs.md). Written as
 * a stream with fprintf, not built with jansson: a long run has hundreds of thousands of
 * events and the tree would cost far more memory than the file. Times are chip time in
 * microseconds (the format's unit), with picosecond digits.
 */
#include "rt/metrics.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "npu_enums.h"

#define TID_ITER 0
#define TID_CORE0 1 /* core N is tid N + 1 */
#define TID_INST0 1000000u /* pd-disagg: instance I > 0's iterations are tid TID_INST0 + I */

static uint32_t iter_tid(uint32_t inst)
{
    return inst ? TID_INST0 + inst : TID_ITER;
}

struct trace_out {
    FILE *f;
    bool started;
};

static void put_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

/* Starts an event object: `{"ph": PH, "pid": 0, "tid": TID, "name": NAME` (unclosed). */
static void ev_open(struct trace_out *t, const char *ph, uint32_t tid, const char *name)
{
    fputs(t->started ? ",\n" : "\n", t->f);
    t->started = true;
    fprintf(t->f, "{\"ph\": \"%s\", \"pid\": 0, \"tid\": %u, \"name\": ", ph, tid);
    put_str(t->f, name);
}

static double ps_to_us(uint64_t ps)
{
    return (double)ps / 1e6;
}

static void ev_meta(struct trace_out *t, const char *what, uint32_t tid, const char *name)
{
    ev_open(t, "M", tid, what);
    fputs(", \"args\": {\"name\": ", t->f);
    put_str(t->f, name);
    fputs("}}", t->f);
}

static const char *label_find(const struct rt_label *labels, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (labels[i].key && labels[i].value && strcmp(labels[i].key, key) == 0)
            return labels[i].value;
    return NULL;
}

static void trace_metadata(struct trace_out *t, const struct rt_serve_log *log,
                           const struct rt_label *labels, size_t nlabels)
{
    const char *chip = label_find(labels, nlabels, "chip");
    char name[160];
    snprintf(name, sizeof(name), "%s%s%s%s", chip ? chip : "npu", log->sched[0] ? " (" : "",
             log->sched, log->sched[0] ? ")" : "");
    ev_meta(t, "process_name", TID_ITER, name);
    ev_meta(t, "thread_name", TID_ITER, "control core: iterations");
    uint32_t ninst = 0;
    for (size_t i = 0; i < log->niters; i++)
        ninst = log->iters[i].inst >= ninst ? log->iters[i].inst + 1 : ninst;
    for (uint32_t i = 1; i < ninst; i++) { /* instance 0 keeps the track above */
        snprintf(name, sizeof(name), "control core: instance %u iterations", i);
        ev_meta(t, "thread_name", iter_tid(i), name);
    }
    uint32_t max_core = 0;
    for (size_t i = 0; i < log->nengines; i++)
        max_core = log->engines[i].core > max_core ? log->engines[i].core : max_core;
    bool *seen = log->nengines ? calloc((size_t)max_core + 1, sizeof(bool)) : NULL;
    for (size_t i = 0; seen && i < log->nengines; i++)
        seen[log->engines[i].core] = true;
    for (uint32_t c = 0; seen && c <= max_core; c++) {
        if (!seen[c])
            continue;
        snprintf(name, sizeof(name), "core %u", c);
        ev_meta(t, "thread_name", TID_CORE0 + c, name);
    }
    free(seen);
}

static const char *iter_name(const struct rt_iter_record *it)
{
    if (it->prefill_tokens && it->decode_tokens)
        return "prefill+decode";
    if (it->prefill_tokens)
        return "prefill";
    return it->decode_tokens ? "decode" : "idle";
}

/* A counter; instances other than 0 (pd-disagg) get their own, named "NAME inst I". */
static void ev_counter(struct trace_out *t, const char *base, uint32_t inst, uint64_t ts_ps,
                       uint64_t v)
{
    char name[64];
    snprintf(name, sizeof(name), inst ? "%s inst %u" : "%s", base, inst);
    ev_open(t, "C", TID_ITER, name);
    fprintf(t->f, ", \"ts\": %.6f, \"args\": {", ps_to_us(ts_ps));
    put_str(t->f, name);
    fprintf(t->f, ": %llu}}", (unsigned long long)v);
}

static void trace_iterations(struct trace_out *t, const struct rt_serve_log *log)
{
    for (size_t i = 0; i < log->niters; i++) {
        const struct rt_iter_record *it = &log->iters[i];
        uint64_t dur = it->t1_ps > it->t0_ps ? it->t1_ps - it->t0_ps : 0;
        ev_open(t, "X", iter_tid(it->inst), iter_name(it));
        fprintf(t->f, ", \"ts\": %.6f, \"dur\": %.6f, \"args\": {\"n\": %llu, \"runs\": %u, "
                      "\"prefill\": %u, \"decode\": %u, \"group\": %u, \"groups\": %u, "
                      "\"pulls\": %u}}",
                ps_to_us(it->t0_ps), ps_to_us(dur), (unsigned long long)it->n, it->runs,
                it->prefill_tokens, it->decode_tokens, it->group, it->groups, it->pulls);
        ev_counter(t, "kv_blocks_used", it->inst, it->t0_ps, it->blocks_used);
        if (it->cache_known)
            ev_counter(t, "kv_blocks_cached", it->inst, it->t0_ps, it->cached_blocks);
        ev_counter(t, "ring_rows_used", it->inst, it->t0_ps, it->ring_used);
        ev_counter(t, "queue", 0, it->t0_ps, it->queue);
        ev_counter(t, "running", it->inst, it->t0_ps, it->running);
    }
}

struct iter_start {
    uint64_t n, t0_ps;
};

static int cmp_iter_start(const void *a, const void *b)
{
    uint64_t x = ((const struct iter_start *)a)->n, y = ((const struct iter_start *)b)->n;
    return x < y ? -1 : x > y;
}

/* Engine busy time of an iteration, drawn from the iteration's start: the firmware
   reports how long each engine worked, not when. */
static void trace_engines(struct trace_out *t, const struct rt_serve_log *log)
{
    static const char *const names[4] = { "matrix", "vector", "dma", "noc" };
    struct iter_start *idx = log->nengines ? malloc(log->niters * sizeof(*idx) + 1) : NULL;
    for (size_t i = 0; idx && i < log->niters; i++)
        idx[i] = (struct iter_start){ log->iters[i].n, log->iters[i].t0_ps };
    if (idx)
        qsort(idx, log->niters, sizeof(*idx), cmp_iter_start);
    for (size_t i = 0; idx && i < log->nengines; i++) {
        const struct rt_engine_record *e = &log->engines[i];
        struct iter_start key = { e->n, 0 };
        const struct iter_start *it =
            bsearch(&key, idx, log->niters, sizeof(*idx), cmp_iter_start);
        for (int k = 0; it && k < 4; k++) {
            if (e->busy_ps[k] == 0)
                continue;
            ev_open(t, "X", TID_CORE0 + e->core, names[k]);
            fprintf(t->f, ", \"ts\": %.6f, \"dur\": %.6f, \"args\": {\"iteration\": %llu}}",
                    ps_to_us(it->t0_ps), ps_to_us(e->busy_ps[k]), (unsigned long long)e->n);
        }
    }
    free(idx);
}

/* One async event of request id (category "request"): "b", "e" or "n" (an instant). */
static void ev_async(struct trace_out *t, const char *ph, const char *name, uint32_t id,
                     uint64_t ps)
{
    ev_open(t, ph, TID_ITER, name);
    fprintf(t->f, ", \"cat\": \"request\", \"id\": %u, \"ts\": %.6f}", id, ps_to_us(ps));
}

/* The prefill phase's begin, with the prompt tokens the prefix cache held (when known). */
static void ev_prefill_begin(struct trace_out *t, const struct rt_req_record *r, uint64_t ps)
{
    if (!r->cache_known) {
        ev_async(t, "b", "prefill", r->id, ps);
        return;
    }
    ev_open(t, "b", TID_ITER, "prefill");
    fprintf(t->f, ", \"cat\": \"request\", \"id\": %u, \"ts\": %.6f, \"args\": "
            "{\"cached_tokens\": %u}}", r->id, ps_to_us(ps), r->cached);
}

/* A phase nested in the request's span, from t0 to t1 (left out when empty). */
static void ev_phase(struct trace_out *t, const char *name, uint32_t id, uint64_t t0,
                     uint64_t t1)
{
    if (t1 <= t0)
        return;
    ev_async(t, "b", name, id, t0);
    ev_async(t, "e", name, id, t1);
}

/* The phases of a request inside its span: queued (arrival to admission), prefill
   (admission to the first token), decode (first token to the span's end), and the first
   token as an instant. */
static void trace_phases(struct trace_out *t, const struct rt_req_record *r, uint64_t end)
{
    const uint64_t admit = r->admitted ? r->admit_ps : end;
    const uint64_t first = r->ntokens ? r->token_ps[0] : end;
    ev_phase(t, "queued", r->id, r->arrival_ps, admit);
    if (r->admitted && first > admit) {
        ev_prefill_begin(t, r, admit);
        ev_async(t, "e", "prefill", r->id, first);
    }
    if (r->ntokens) {
        ev_async(t, "n", "first token", r->id, first);
        ev_phase(t, "decode", r->id, first, end);
    }
}

/* Each request as an async span from arrival to its last token (or the end of an
   unfinished run), with its phases nested; a rejection as an instant. */
static void trace_requests(struct trace_out *t, const struct rt_serve_log *log)
{
    char name[48];
    for (size_t i = 0; i < log->nreqs; i++) {
        const struct rt_req_record *r = &log->reqs[i];
        snprintf(name, sizeof(name), "%s %u", r->rejected ? "reject" : "request", r->id);
        if (r->rejected) {
            ev_open(t, "i", TID_ITER, name);
            fprintf(t->f, ", \"s\": \"p\", \"ts\": %.6f, \"args\": {\"reason\": ",
                    ps_to_us(r->finish_ps));
            put_str(t->f, r->reason);
            fputs("}}", t->f);
            continue;
        }
        if (!r->arrived)
            continue;
        uint64_t end = r->finished ? r->finish_ps : log->end_ps;
        if (r->ntokens && r->token_ps[r->ntokens - 1] > end)
            end = r->token_ps[r->ntokens - 1];
        ev_open(t, "b", TID_ITER, name);
        fprintf(t->f, ", \"cat\": \"request\", \"id\": %u, \"ts\": %.6f, \"args\": "
                      "{\"input\": %u, \"output\": %u, \"generated\": %u}}",
                r->id, ps_to_us(r->arrival_ps), r->input_len, r->output_len, r->ntokens);
        trace_phases(t, r, end);
        ev_async(t, "e", name, r->id, end);
    }
}

static void trace_other_data(FILE *f, const struct rt_label *labels, size_t nlabels)
{
    fputs("\"otherData\": {", f);
    for (size_t i = 0, k = 0; i < nlabels; i++) {
        if (!labels[i].key || !labels[i].value)
            continue;
        fputs(k++ ? ", " : "", f);
        put_str(f, labels[i].key);
        fputs(": ", f);
        put_str(f, labels[i].value);
    }
    fputs("},\n", f);
}

int metrics_write_perfetto_labelled(const char *path, const struct rt_serve_log *log,
                                    const struct rt_label *labels, size_t nlabels, char *err,
                                    size_t errlen)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, errlen, "%s: cannot create: %s", path, strerror(errno));
        return NPU_ERR_IO;
    }
    struct trace_out t = { .f = f };
    fputs("{\"displayTimeUnit\": \"ns\",\n", f);
    trace_other_data(f, labels, nlabels);
    fputs("\"traceEvents\": [", f);
    trace_metadata(&t, log, labels, nlabels);
    trace_iterations(&t, log);
    trace_engines(&t, log);
    trace_requests(&t, log);
    fputs("\n]}\n", f);
    int bad = ferror(f);
    if (fclose(f) || bad) {
        snprintf(err, errlen, "%s: write error", path);
        return NPU_ERR_IO;
    }
    return 0;
}

int metrics_write_perfetto(const char *path, const struct rt_serve_log *log, char *err,
                           size_t errlen)
{
    return metrics_write_perfetto_labelled(path, log, NULL, 0, err, errlen);
}
