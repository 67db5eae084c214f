/* SPDX-License-Identifier: MIT */
/*
 * The parser of a serving run's console (rt/serve_log.h). Each line is scanned for
 * "SERVE " (the control core's events) or "MODEL rank=" (a core's traffic report); the
 * rest of a line is key=value words. Unknown keys are skipped so the firmware can add
 * fields without breaking older hosts; unknown events are errors because silently
 * dropping one would give wrong metrics.
 */
#define _POSIX_C_SOURCE 200809L
#include "rt/serve_log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu_enums.h"

#define KV_MAX 32
#define REQUESTS_MAX (1u << 24) /* a begin line asking for more is corrupt, not a run */

struct kv {
    const char *key, *val;
};

struct parse_ctx {
    const char *path;
    size_t lineno;
    struct kv kv[KV_MAX];
    size_t nkv;
    uint64_t max_t;          /* the latest chip time seen: end of an unfinished run */
    struct rt_serve_log *log;
    char *err;
    size_t errlen;
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

/* Splits the words after the event into key=value pairs (in place). */
static void split_words(struct parse_ctx *c, char *text)
{
    char *save = NULL;
    c->nkv = 0;
    for (char *w = strtok_r(text, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
        char *eq = strchr(w, '=');
        if (!eq || c->nkv == KV_MAX)
            continue;
        *eq = '\0';
        c->kv[c->nkv].key = w;
        c->kv[c->nkv++].val = eq + 1;
    }
}

static const char *find_val(const struct parse_ctx *c, const char *key)
{
    for (size_t i = 0; i < c->nkv; i++)
        if (strcmp(c->kv[i].key, key) == 0)
            return c->kv[i].val;
    return NULL;
}

static bool parse_u64_text(const char *s, const char **end, uint64_t *out)
{
    char *e;
    if (!s || *s < '0' || *s > '9')
        return false;
    *out = strtoull(s, &e, 10);
    *end = e;
    return true;
}

/* A decimal value; a missing key keeps *out when optional. */
static int get_u64(struct parse_ctx *c, const char *key, bool required, uint64_t *out)
{
    const char *v = find_val(c, key), *end;
    if (!v)
        return required ? fail(c, NPU_ERR_FORMAT, "missing %s=", key) : 0;
    if (!parse_u64_text(v, &end, out) || *end)
        return fail(c, NPU_ERR_FORMAT, "%s='%s' is not a whole number", key, v);
    if (strcmp(key, "t") == 0 || strcmp(key, "t1") == 0)
        c->max_t = *out > c->max_t ? *out : c->max_t;
    return 0;
}

static int get_u32(struct parse_ctx *c, const char *key, bool required, uint32_t *out)
{
    uint64_t v = *out;
    int rc = get_u64(c, key, required, &v);
    if (rc == 0 && v > UINT32_MAX)
        return fail(c, NPU_ERR_FORMAT, "%s=%llu is out of range", key, (unsigned long long)v);
    *out = (uint32_t)v;
    return rc;
}

/* "USED/TOTAL" (optional: the firmware may leave it out). */
static int get_pair(struct parse_ctx *c, const char *key, uint64_t *used, uint64_t *total)
{
    const char *v = find_val(c, key), *end;
    if (!v)
        return 0;
    if (!parse_u64_text(v, &end, used) || *end != '/' || !parse_u64_text(end + 1, &end, total)
        || *end)
        return fail(c, NPU_ERR_FORMAT, "%s='%s' is not USED/TOTAL", key, v);
    return 0;
}

static int on_begin(struct parse_ctx *c)
{
    struct rt_serve_log *log = c->log;
    uint64_t n = 0;
    const char *sched = find_val(c, "sched");
    if (log->reqs)
        return fail(c, NPU_ERR_FORMAT, "a second SERVE begin");
    int rc = get_u64(c, "requests", true, &n);
    if (rc == 0 && (n == 0 || n > REQUESTS_MAX))
        return fail(c, NPU_ERR_FORMAT, "requests=%llu is out of range", (unsigned long long)n);
    if (rc == 0 && !(log->reqs = calloc(n, sizeof(*log->reqs))))
        return fail(c, NPU_ERR_NOMEM, "no memory for %llu requests", (unsigned long long)n);
    if (rc)
        return rc;
    log->nreqs = n;
    for (size_t i = 0; i < n; i++)
        log->reqs[i].id = (uint32_t)i;
    snprintf(log->sched, sizeof(log->sched), "%s", sched ? sched : "");
    rc = get_u32(c, "layers", false, &log->layers);
    rc = rc ? rc : get_u32(c, "blocks", false, &log->blocks_total);
    return rc ? rc : get_u64(c, "ring", false, &log->ring_total);
}

/* The request a per-request event names. */
static int get_req(struct parse_ctx *c, struct rt_req_record **r)
{
    uint64_t id = 0;
    if (!c->log->reqs)
        return fail(c, NPU_ERR_FORMAT, "request event before SERVE begin");
    int rc = get_u64(c, "id", true, &id);
    if (rc)
        return rc;
    if (id >= c->log->nreqs)
        return fail(c, NPU_ERR_FORMAT, "id=%llu out of range (requests=%zu)",
                    (unsigned long long)id, c->log->nreqs);
    *r = &c->log->reqs[id];
    return 0;
}

static int on_arrive(struct parse_ctx *c)
{
    struct rt_req_record *r = NULL;
    int rc = get_req(c, &r);
    rc = rc ? rc : get_u64(c, "t", true, &r->arrival_ps);
    rc = rc ? rc : get_u32(c, "input", true, &r->input_len);
    rc = rc ? rc : get_u32(c, "output", true, &r->output_len);
    if (rc == 0)
        r->arrived = true;
    return rc;
}

static int on_reject(struct parse_ctx *c)
{
    struct rt_req_record *r = NULL;
    const char *reason = find_val(c, "reason");
    int rc = get_req(c, &r);
    rc = rc ? rc : get_u64(c, "t", true, &r->finish_ps);
    if (rc == 0 && !reason)
        rc = fail(c, NPU_ERR_FORMAT, "missing reason=");
    if (rc)
        return rc;
    r->rejected = true;
    snprintf(r->reason, sizeof(r->reason), "%s", reason);
    return 0;
}

static int on_admit(struct parse_ctx *c)
{
    struct rt_req_record *r = NULL;
    int rc = get_req(c, &r);
    rc = rc ? rc : get_u64(c, "t", true, &r->admit_ps);
    if (rc == 0)
        r->admitted = true;
    return rc;
}

static int on_finish(struct parse_ctx *c)
{
    struct rt_req_record *r = NULL;
    int rc = get_req(c, &r);
    rc = rc ? rc : get_u64(c, "t", true, &r->finish_ps);
    if (rc == 0)
        r->finished = true;
    return rc;
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

static int on_token(struct parse_ctx *c)
{
    struct rt_req_record *r = NULL;
    uint64_t n = 0, t = 0;
    uint32_t tok = 0;
    int rc = get_req(c, &r);
    rc = rc ? rc : get_u64(c, "n", true, &n);
    rc = rc ? rc : get_u64(c, "t", true, &t);
    rc = rc ? rc : get_u32(c, "token", true, &tok);
    if (rc)
        return rc;
    if (n != r->ntokens)
        return fail(c, NPU_ERR_FORMAT, "token n=%llu of id=%u out of sequence (expected n=%u)",
                    (unsigned long long)n, r->id, r->ntokens);
    if ((rc = token_reserve(c, r)))
        return rc;
    r->token_ps[r->ntokens] = t;
    r->tokens[r->ntokens++] = tok;
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

static int on_iter(struct parse_ctx *c)
{
    struct rt_serve_log *log = c->log;
    struct rt_iter_record *a = array_push(log->iters, &log->niters, sizeof(*a));
    if (!a)
        return fail(c, NPU_ERR_NOMEM, "no memory for iteration records");
    log->iters = a;
    struct rt_iter_record *it = &a[log->niters - 1];
    uint64_t bu = 0, bt = 0;
    int rc = get_u64(c, "n", true, &it->n);
    rc = rc ? rc : get_u64(c, "t0", true, &it->t0_ps);
    rc = rc ? rc : get_u64(c, "t1", true, &it->t1_ps);
    rc = rc ? rc : get_u32(c, "runs", false, &it->runs);
    rc = rc ? rc : get_u32(c, "prefill", false, &it->prefill_tokens);
    rc = rc ? rc : get_u32(c, "decode", false, &it->decode_tokens);
    rc = rc ? rc : get_u32(c, "group", false, &it->group);
    rc = rc ? rc : get_u32(c, "groups", false, &it->groups);
    rc = rc ? rc : get_u32(c, "queue", false, &it->queue);
    rc = rc ? rc : get_u32(c, "running", false, &it->running);
    rc = rc ? rc : get_pair(c, "blocks", &bu, &bt);
    rc = rc ? rc : get_pair(c, "ring", &it->ring_used, &it->ring_total);
    rc = rc ? rc : get_u32(c, "inst", false, &it->inst);
    rc = rc ? rc : get_u32(c, "pulls", false, &it->pulls);
    if (rc == 0 && (bu > UINT32_MAX || bt > UINT32_MAX))
        rc = fail(c, NPU_ERR_FORMAT, "blocks= out of range");
    it->blocks_used = (uint32_t)bu;
    it->blocks_total = (uint32_t)bt;
    return rc;
}

static int on_engines(struct parse_ctx *c)
{
    static const char *const names[4] = { "matrix", "vector", "dma", "noc" };
    struct rt_serve_log *log = c->log;
    struct rt_engine_record *a = array_push(log->engines, &log->nengines, sizeof(*a));
    if (!a)
        return fail(c, NPU_ERR_NOMEM, "no memory for engine records");
    log->engines = a;
    struct rt_engine_record *e = &a[log->nengines - 1];
    int rc = get_u32(c, "core", true, &e->core);
    rc = rc ? rc : get_u64(c, "n", true, &e->n);
    for (int i = 0; i < 4 && rc == 0; i++)
        rc = get_u64(c, names[i], false, &e->busy_ps[i]);
    return rc;
}

static int on_done(struct parse_ctx *c)
{
    struct rt_serve_log *log = c->log;
    log->iterations = log->niters;
    int rc = get_u64(c, "t", true, &log->end_ps);
    rc = rc ? rc : get_u64(c, "iterations", false, &log->iterations);
    log->done = rc == 0;
    return rc;
}

/* pd-disagg: `instance id=I role=prefill|decode cores=N`, one per instance of the plan. */
static int on_instance(struct parse_ctx *c)
{
    uint32_t id = 0, cores = 0;
    const char *role = find_val(c, "role");
    int rc = get_u32(c, "id", true, &id);
    rc = rc ? rc : get_u32(c, "cores", true, &cores);
    if (rc == 0 && (!role || (strcmp(role, "prefill") && strcmp(role, "decode"))))
        return fail(c, NPU_ERR_FORMAT, "role='%s' is neither prefill nor decode",
                    role ? role : "");
    if (rc == 0 && role[0] == 'p')
        c->log->prefill_instances++;
    else if (rc == 0)
        c->log->decode_instances++;
    return rc;
}

/* A failed run: `abort reason=WORD ...` (control core) or `core-failed core=C ...` (a core).
   The run stays not done (the caller reports it incomplete); the reason is kept. */
static int on_abort(struct parse_ctx *c)
{
    c->log->done = false;
    return 0;
}

static const struct {
    const char *name;
    int (*fn)(struct parse_ctx *c);
} events[] = {
    { "abort", on_abort },   { "core-failed", on_abort },
    { "begin", on_begin },   { "arrive", on_arrive }, { "reject", on_reject },
    { "admit", on_admit },   { "token", on_token },   { "finish", on_finish },
    { "iter", on_iter },     { "engines", on_engines }, { "done", on_done },
    { "instance", on_instance },
};

/* "WORD" at a word start of line (the console prefix ends with "] "). */
static char *find_word(char *line, const char *word)
{
    for (char *p = strstr(line, word); p; p = strstr(p + 1, word))
        if (p == line || p[-1] == ' ' || p[-1] == ']')
            return p;
    return NULL;
}

static int parse_serve(struct parse_ctx *c, char *text)
{
    size_t len = strcspn(text, " \t");
    char save = text[len];
    text[len] = '\0';
    for (size_t i = 0; i < sizeof(events) / sizeof(events[0]); i++)
        if (strcmp(text, events[i].name) == 0) {
            split_words(c, save ? text + len + 1 : text + len);
            return events[i].fn(c);
        }
    return fail(c, NPU_ERR_FORMAT, "unknown SERVE event '%s'", text);
}

static int parse_line(struct parse_ctx *c, char *line)
{
    char *p = find_word(line, "SERVE ");
    if (p)
        return parse_serve(c, p + strlen("SERVE "));
    if (!(p = find_word(line, "MODEL rank=")))
        return 0;
    uint64_t bytes = 0;
    split_words(c, p + strlen("MODEL "));
    int rc = get_u64(c, "expert_load_bytes", false, &bytes);
    c->log->expert_load_bytes += bytes;
    return rc;
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
    struct parse_ctx c = { .path = path, .log = log, .err = err, .errlen = errlen };
    memset(log, 0, sizeof(*log));
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NPU_ERR_IO;
    }
    int rc = parse_stream(&c, f);
    fclose(f);
    if (rc)
        return rc;
    if (!log->reqs) {
        snprintf(err, errlen, "%s: no SERVE begin line (not a serving run?)", path);
        return NPU_ERR_FORMAT;
    }
    if (!log->done) {
        log->end_ps = c.max_t;
        log->iterations = log->niters;
    }
    return 0;
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
