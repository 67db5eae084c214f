/* SPDX-License-Identifier: MIT */
/*
 * The parser of a serving run's console (rt/serve_log.h). The lines are the protocol of
 * rt/lines.h, read with its decoder: a SERVE line (the control core's events) or a
 * `MODEL rank=` line (a core's traffic report); other MODEL lines are skipped unread. The
 * decoder ignores unknown keys (the firmware may add fields) and refuses unknown SERVE
 * events, because silently dropping one would give wrong metrics; this file checks what
 * the values mean (ids in range, tokens in sequence).
 */
#define _POSIX_C_SOURCE 200809L
#include "rt/serve_log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu_enums.h"
#include "npu_limits.h"
#include "rt/lines.h"

/* a begin line asking for more than a trace may hold is corrupt, not a run */
#define REQUESTS_MAX NPU_TRACE_REQUESTS_MAX

struct parse_ctx {
    const char *path;
    size_t lineno;
    uint64_t max_t;          /* the latest chip time seen: end of an unfinished run */
    struct rt_serve_log *log;
    char *err;
    size_t errlen;
    struct lines_line line;  /* the line being read */
};

static int fail(struct parse_ctx *c, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct parse_ctx *c, int rc, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (c->err && c->errlen)
        snprintf(c->err, c->errlen, "%s:%zu: %s", c->path, c->lineno, msg);
    return rc;
}

static void saw_time(struct parse_ctx *c, uint64_t t)
{
    c->max_t = t > c->max_t ? t : c->max_t;
}

static int on_begin(struct parse_ctx *c, const struct lines_value *v)
{
    const struct lines_serve_begin *b = &v->serve_begin;
    struct rt_serve_log *log = c->log;
    if (log->reqs)
        return fail(c, NPU_ERR_FORMAT, "a second SERVE begin");
    if (b->requests == 0 || b->requests > REQUESTS_MAX)
        return fail(c, NPU_ERR_FORMAT, "requests=%u is out of range", b->requests);
    if (!(log->reqs = calloc(b->requests, sizeof(*log->reqs))))
        return fail(c, NPU_ERR_NOMEM, "no memory for %u requests", b->requests);
    log->nreqs = b->requests;
    for (size_t i = 0; i < log->nreqs; i++)
        log->reqs[i].id = (uint32_t)i;
    snprintf(log->sched, sizeof(log->sched), "%s", b->absent.sched ? "" : b->sched);
    log->layers = b->layers;
    log->blocks_total = b->blocks;
    log->ring_total = b->ring;
    return 0;
}

/* The request a per-request event names. */
static int get_req(struct parse_ctx *c, uint32_t id, struct rt_req_record **r)
{
    if (!c->log->reqs)
        return fail(c, NPU_ERR_FORMAT, "request event before SERVE begin");
    if (id >= c->log->nreqs)
        return fail(c, NPU_ERR_FORMAT, "id=%u out of range (requests=%zu)", id,
                    c->log->nreqs);
    *r = &c->log->reqs[id];
    return 0;
}

static int on_arrive(struct parse_ctx *c, const struct lines_value *v)
{
    const struct lines_serve_arrive *a = &v->serve_arrive;
    struct rt_req_record *r = NULL;
    int rc = get_req(c, a->id, &r);
    if (rc)
        return rc;
    saw_time(c, a->t);
    r->arrival_ps = a->t;
    r->input_len = a->input;
    r->output_len = a->output;
    r->arrived = true;
    return 0;
}

/* A request ended without finishing: rejected, or failed by a failed run. */
static int end_unfinished(struct parse_ctx *c, uint32_t id, uint64_t t, const char *reason,
                          bool failed)
{
    struct rt_req_record *r = NULL;
    int rc = get_req(c, id, &r);
    if (rc)
        return rc;
    saw_time(c, t);
    r->finish_ps = t;
    r->rejected = !failed, r->failed = failed;
    snprintf(r->reason, sizeof(r->reason), "%s", reason);
    return 0;
}

static int on_reject(struct parse_ctx *c, const struct lines_value *v)
{
    const struct lines_serve_reject *j = &v->serve_reject;
    return end_unfinished(c, j->id, j->t, j->reason, false);
}

static int on_admit(struct parse_ctx *c, const struct lines_value *v)
{
    struct rt_req_record *r = NULL;
    int rc = get_req(c, v->serve_admit.id, &r);
    if (rc)
        return rc;
    saw_time(c, v->serve_admit.t);
    r->admit_ps = v->serve_admit.t;
    r->admitted = true;
    r->cache_known = !v->serve_admit.absent.cached;
    r->cached = r->cache_known ? v->serve_admit.cached : 0;
    return 0;
}

static int on_finish(struct parse_ctx *c, const struct lines_value *v)
{
    struct rt_req_record *r = NULL;
    int rc = get_req(c, v->serve_finish.id, &r);
    if (rc)
        return rc;
    saw_time(c, v->serve_finish.t);
    r->finish_ps = v->serve_finish.t;
    r->finished = true;
    return 0;
}

/* Token arrays grow to 4, then double at every power of two: no capacity field needed. */
static int token_reserve(struct parse_ctx *c, struct rt_req_record *r)
{
    uint32_t n = r->ntokens;
    if (n != 0 && (n < 4 || (n & (n - 1)) != 0))
        return 0;
    size_t cap = n == 0 ? 4 : (size_t)n * 2;
    uint64_t *ps = realloc(r->token_ps, cap * sizeof(*ps));
    if (ps)
        r->token_ps = ps;
    uint32_t *ids = ps ? realloc(r->tokens, cap * sizeof(*ids)) : NULL;
    if (ids)
        r->tokens = ids;
    return ids ? 0 : fail(c, NPU_ERR_NOMEM, "no memory for the tokens of id=%u", r->id);
}

static int on_token(struct parse_ctx *c, const struct lines_value *v)
{
    const struct lines_serve_token *k = &v->serve_token;
    struct rt_req_record *r = NULL;
    int rc = get_req(c, k->id, &r);
    if (rc)
        return rc;
    saw_time(c, k->t);
    if (k->n != r->ntokens)
        return fail(c, NPU_ERR_FORMAT, "token n=%u of id=%u out of sequence (expected n=%u)",
                    k->n, r->id, r->ntokens);
    if ((rc = token_reserve(c, r)))
        return rc;
    r->token_ps[r->ntokens] = k->t;
    r->tokens[r->ntokens++] = k->token;
    return 0;
}

/* Appends one zeroed element to a growing array (doubling). */
static void *array_push(void *base, size_t *n, size_t elem)
{
    size_t cnt = *n;
    if (cnt == 0 || (cnt & (cnt - 1)) == 0) {
        void *p = realloc(base, (cnt ? cnt * 2 : 16) * elem);
        if (!p)
            return NULL;
        base = p;
    }
    memset((char *)base + cnt * elem, 0, elem);
    *n = cnt + 1;
    return base;
}

/* Optional figures the line left out read as 0. */
static int on_iter(struct parse_ctx *c, const struct lines_value *v)
{
    const struct lines_serve_iter *i = &v->serve_iter;
    struct rt_serve_log *log = c->log;
    struct rt_iter_record *a = array_push(log->iters, &log->niters, sizeof(*a));
    if (!a)
        return fail(c, NPU_ERR_NOMEM, "no memory for iteration records");
    log->iters = a;
    saw_time(c, i->t1);
    a[log->niters - 1] = (struct rt_iter_record){
        .n = i->n, .t0_ps = i->t0, .t1_ps = i->t1, .runs = i->runs,
        .prefill_tokens = i->prefill, .decode_tokens = i->decode, .group = i->group,
        .groups = i->groups, .queue = i->queue, .running = i->running,
        .blocks_used = (uint32_t)i->blocks.used, .blocks_total = (uint32_t)i->blocks.total,
        .ring_used = i->ring.used, .ring_total = i->ring.total, .inst = i->inst,
        .pulls = i->pulls, .cache_known = !i->absent.cached, .cached_blocks = i->cached,
        .evicted = i->evicted };
    return 0;
}

static int on_engines(struct parse_ctx *c, const struct lines_value *v)
{
    const struct lines_serve_engines *e = &v->serve_engines;
    struct rt_serve_log *log = c->log;
    struct rt_engine_record *a = array_push(log->engines, &log->nengines, sizeof(*a));
    if (!a)
        return fail(c, NPU_ERR_NOMEM, "no memory for engine records");
    log->engines = a;
    a[log->nengines - 1] = (struct rt_engine_record){
        .core = e->core, .n = e->n, .busy_ps = { e->matrix, e->vector, e->dma, e->noc } };
    return 0;
}

static int on_done(struct parse_ctx *c, const struct lines_value *v)
{
    const struct lines_serve_done *d = &v->serve_done;
    struct rt_serve_log *log = c->log;
    saw_time(c, d->t);
    log->end_ps = d->t;
    log->iterations = d->absent.iterations ? log->niters : d->iterations;
    log->done = true;
    return 0;
}

/* pd-disagg: one per instance of the plan. */
static int on_instance(struct parse_ctx *c, const struct lines_value *v)
{
    const char *role = v->serve_instance.role;
    if (strcmp(role, "prefill") == 0)
        c->log->prefill_instances++;
    else if (strcmp(role, "decode") == 0)
        c->log->decode_instances++;
    else
        return fail(c, NPU_ERR_FORMAT, "role='%s' is neither prefill nor decode", role);
    return 0;
}

static int on_fail(struct parse_ctx *c, const struct lines_value *v)
{
    const struct lines_serve_fail *f = &v->serve_fail;
    return end_unfinished(c, f->id, f->t, f->reason, true);
}

/* A failed run: `abort` (control core) or `core-failed` (a core). The run stays not done
   (the caller reports it incomplete); the first reason and core are kept for its cause. */
static int on_abort(struct parse_ctx *c, const struct lines_value *v)
{
    (void)v;
    c->log->done = false;
    if (!c->log->abort_reason[0])
        snprintf(c->log->abort_reason, sizeof(c->log->abort_reason), "%s",
                 v->serve_abort.reason);
    return 0;
}

static int on_core_failed(struct parse_ctx *c, const struct lines_value *v)
{
    c->log->done = false;
    if (c->log->failed_core < 0) {
        c->log->failed_core = (int32_t)v->serve_core_failed.core;
        c->log->failed_rc = v->serve_core_failed.rc;
    }
    return 0;
}

/* The machine's own lines (not the protocol's): a core's FATAL report and the stop line. */
static void machine_line(struct parse_ctx *c, const char *line)
{
    struct rt_serve_log *log = c->log;
    const char *fatal = strstr(line, "FATAL: "), *stop = strstr(line, "[npu-mesh] stop: ");
    unsigned core;
    if (fatal && !log->fatal[0]) {
        snprintf(log->fatal, sizeof(log->fatal), "%s", fatal + 7);
        if (sscanf(fatal + 7, "core %u ", &core) == 1 && log->failed_core < 0)
            log->failed_core = (int32_t)core;
    }
    if (stop && !log->stop[0]) {
        snprintf(log->stop, sizeof(log->stop), "%s", stop + 17);
        if (sscanf(stop + 17, "core %u ", &core) == 1 && log->failed_core < 0)
            log->failed_core = (int32_t)core; /* "core N (r,c) exited with status S" */
    }
}

/* A core's traffic report. */
static int on_rank(struct parse_ctx *c, const struct lines_value *v)
{
    c->log->expert_load_bytes += v->model_rank.expert_load_bytes;
    return 0;
}

/* The kinds this parser reads; the others are skipped without being decoded. */
static int (*const handlers[LINES_KIND_COUNT])(struct parse_ctx *c,
                                               const struct lines_value *v) = {
    [LINES_SERVE_BEGIN] = on_begin,     [LINES_SERVE_INSTANCE] = on_instance,
    [LINES_SERVE_ARRIVE] = on_arrive,   [LINES_SERVE_REJECT] = on_reject,
    [LINES_SERVE_ADMIT] = on_admit,     [LINES_SERVE_TOKEN] = on_token,
    [LINES_SERVE_FINISH] = on_finish,   [LINES_SERVE_ITER] = on_iter,
    [LINES_SERVE_ENGINES] = on_engines, [LINES_SERVE_DONE] = on_done,
    [LINES_SERVE_ABORT] = on_abort,     [LINES_SERVE_CORE_FAILED] = on_core_failed,
    [LINES_SERVE_FAIL] = on_fail,
    [LINES_MODEL_RANK] = on_rank,
};

static int parse_line(struct parse_ctx *c, const char *line)
{
    const char *text = lines_find(line);
    enum lines_kind kind;
    char msg[200];
    if (!text) {
        machine_line(c, line);
        return 0;
    }
    int rc = lines_identify(text, &kind, msg, sizeof(msg));
    if (rc == NPU_ERR_NOTFOUND || (rc == NPU_OK && !handlers[kind]))
        return 0;
    if (rc == NPU_OK)
        rc = lines_parse(text, &c->line, msg, sizeof(msg));
    if (rc != NPU_OK)
        return fail(c, NPU_ERR_FORMAT, "%s", msg);
    return handlers[kind](c, &c->line.v);
}

static int parse_stream(struct parse_ctx *c, FILE *f)
{
    char *buf = NULL;
    size_t cap = 0;
    ssize_t n;
    int rc = 0;
    while (rc == 0 && (n = getline(&buf, &cap, f)) >= 0) {
        c->lineno++;
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
            buf[--n] = '\0';
        rc = parse_line(c, buf);
    }
    free(buf);
    if (rc == 0 && ferror(f))
        rc = fail(c, NPU_ERR_IO, "read error");
    return rc;
}

int serve_log_parse(const char *path, struct rt_serve_log *log, char *err, size_t errlen)
{
    memset(log, 0, sizeof(*log));
    log->failed_core = -1;
    struct parse_ctx *c = calloc(1, sizeof(*c));
    if (!c) {
        snprintf(err, errlen, "%s: no memory", path);
        return NPU_ERR_NOMEM;
    }
    c->path = path, c->log = log, c->err = err, c->errlen = errlen;
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        free(c);
        return NPU_ERR_IO;
    }
    int rc = parse_stream(c, f);
    uint64_t max_t = c->max_t;
    fclose(f);
    free(c);
    if (rc)
        return rc;
    if (!log->reqs) {
        snprintf(err, errlen, "%s: no SERVE begin line (not a serving run?)", path);
        return NPU_ERR_FORMAT;
    }
    if (!log->done) {
        log->end_ps = max_t;
        log->iterations = log->niters;
    }
    return 0;
}

/* The run's cause, from the machine's stop line first (it says how the run ended), then
   the control core's abort. */
static void run_cause(struct rt_serve_log *log, bool timed_out)
{
    char at[24] = "";
    if (log->failed_core >= 0)
        snprintf(at, sizeof(at), " (core %d)", (int)log->failed_core);
    const char *word = timed_out                       ? "timeout"
                       : strstr(log->stop, "deadlock") ? "deadlock"
                       : strstr(log->stop, "watchdog") ? "watchdog"
                       : strstr(log->fatal, "assertion") ? "assert"
                       : strstr(log->fatal, "trap")    ? "trap"
                       : log->abort_reason[0]          ? log->abort_reason
                                                       : "exit";
    if (!strcmp(word, "core_failed") && log->failed_rc == NPU_ERR_TIMEOUT)
        word = "core_timeout"; /* a core's wait with a deadline (a collective) gave up */
    const bool by_core = !strcmp(word, "trap") || !strcmp(word, "assert") ||
                         !strcmp(word, "core_failed") || !strcmp(word, "core_timeout") ||
                         !strcmp(word, "exit");
    snprintf(log->cause, sizeof(log->cause), "%s%s", word, by_core ? at : "");
}

size_t serve_log_fail_unended(struct rt_serve_log *log, bool timed_out)
{
    if (log->done && !timed_out)
        return 0;
    run_cause(log, timed_out);
    size_t n = 0;
    for (size_t i = 0; i < log->nreqs; i++) {
        struct rt_req_record *r = &log->reqs[i];
        if (r->failed && !strcmp(r->reason, "core_failed") && log->failed_core >= 0)
            snprintf(r->reason, sizeof(r->reason), "%.31s", log->cause); /* names the core */
        if (r->finished || r->rejected || r->failed)
            continue;
        r->failed = true;
        r->finish_ps = log->end_ps;
        snprintf(r->reason, sizeof(r->reason), "%.31s", log->cause);
        n++;
    }
    return n;
}

void serve_log_free(struct rt_serve_log *log)
{
    for (size_t i = 0; log->reqs && i < log->nreqs; i++) {
        free(log->reqs[i].token_ps);
        free(log->reqs[i].tokens);
    }
    free(log->reqs);
    free(log->iters);
    free(log->engines);
    memset(log, 0, sizeof(*log));
}
