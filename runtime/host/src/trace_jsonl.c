/* SPDX-License-Identifier: MIT */
/*
 * The native trace format (rt/trace.h, docs/traces.md): one JSON object per line, read with
 * jansson one line at a time so that an error names the line it is on.
 */
#define _POSIX_C_SOURCE 200809L
#include "rt/trace.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu_enums.h"
#include "npu_limits.h"

void trace_free(struct rt_trace *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n; i++) {
        free(t->e[i].input_ids);
        free(t->e[i].hash_ids);
    }
    free(t->e);
    t->e = NULL;
    t->n = 0;
}

/* Where a line's error is reported; the prefix of every message. */
struct jsonl_at {
    const char *path;
    size_t line;
    char *err;
    size_t errlen;
};

static void jsonl_format_double(double v, char *buf, size_t len);

static int jsonl_fail(const struct jsonl_at *at, const char *field, const char *what)
{
    if (field)
        snprintf(at->err, at->errlen, "%s:%zu: field '%s': %s", at->path, at->line, field,
                 what);
    else
        snprintf(at->err, at->errlen, "%s:%zu: %s", at->path, at->line, what);
    return NPU_ERR_FORMAT;
}

/* A required or optional non-negative integer field no larger than max. */
static int jsonl_get_uint(const struct jsonl_at *at, json_t *v, const char *field,
                          uint64_t max, uint64_t *out)
{
    char what[160];
    if (!v)
        return jsonl_fail(at, field, "missing");
    if (!json_is_integer(v))
        return jsonl_fail(at, field, json_is_number(v) ? "not an integer"
                                                       : "not a number");
    json_int_t n = json_integer_value(v);
    if (n < 0 || (uint64_t)n > max) {
        if (n < 0)
            snprintf(what, sizeof(what), "%" JSON_INTEGER_FORMAT " is negative", n);
        else
            snprintf(what, sizeof(what), "%" JSON_INTEGER_FORMAT " is more than %" PRIu64, n,
                     max);
        return jsonl_fail(at, field, what);
    }
    *out = (uint64_t)n;
    return 0;
}

static int jsonl_get_hash_ids(const struct jsonl_at *at, json_t *arr,
                              struct rt_trace_entry *e)
{
    if (!arr || json_is_null(arr))
        return 0;
    if (!json_is_array(arr))
        return jsonl_fail(at, "hash_ids", "not an array");
    size_t n = json_array_size(arr);
    if (n > UINT32_MAX)
        return jsonl_fail(at, "hash_ids", "too many entries");
    e->hash_ids = n ? malloc(n * sizeof(uint64_t)) : NULL;
    if (n && !e->hash_ids)
        return jsonl_fail(at, "hash_ids", "out of memory");
    e->nhash = (uint32_t)n;
    for (size_t k = 0; k < n; k++)
        if (jsonl_get_uint(at, json_array_get(arr, k), "hash_ids", UINT64_MAX,
                           &e->hash_ids[k]))
            return NPU_ERR_FORMAT;
    return 0;
}

static int jsonl_get_input_ids(const struct jsonl_at *at, json_t *arr,
                               struct rt_trace_entry *e)
{
    char what[128];
    if (!arr || json_is_null(arr))
        return 0;
    if (!json_is_array(arr))
        return jsonl_fail(at, "input_ids", "not an array");
    size_t n = json_array_size(arr);
    if (n != e->input_length) {
        snprintf(what, sizeof(what), "%zu ids, input_length is %" PRIu32, n, e->input_length);
        return jsonl_fail(at, "input_ids", what);
    }
    e->input_ids = n ? malloc(n * sizeof(uint32_t)) : NULL;
    if (n && !e->input_ids)
        return jsonl_fail(at, "input_ids", "out of memory");
    for (size_t k = 0; k < n; k++) {
        uint64_t id;
        if (jsonl_get_uint(at, json_array_get(arr, k), "input_ids", UINT32_MAX, &id))
            return NPU_ERR_FORMAT;
        e->input_ids[k] = (uint32_t)id;
    }
    return 0;
}

/* One object; prev_ms is the previous line's timestamp (or -1 for the first line). */
static int jsonl_parse_entry(const struct jsonl_at *at, json_t *o, double prev_ms,
                             struct rt_trace_entry *e)
{
    char what[160];
    uint64_t in, out;
    if (!json_is_object(o))
        return jsonl_fail(at, NULL, "not a JSON object");
    json_t *ts = json_object_get(o, "timestamp");
    if (!ts)
        return jsonl_fail(at, "timestamp", "missing");
    if (!json_is_number(ts))
        return jsonl_fail(at, "timestamp", "not a number");
    e->timestamp_ms = json_number_value(ts);
    char now[40], before[40];
    jsonl_format_double(e->timestamp_ms, now, sizeof(now));
    jsonl_format_double(prev_ms, before, sizeof(before));
    if (e->timestamp_ms < 0) {
        snprintf(what, sizeof(what), "%s is negative (milliseconds from the start)", now);
        return jsonl_fail(at, "timestamp", what);
    }
    if (e->timestamp_ms > NPU_ARRIVAL_MAX_PS / 1e9) {
        snprintf(what, sizeof(what), "%s ms is past the latest arrival a run may have "
                 "(%.0f ms, NPU_ARRIVAL_MAX_PS)", now, NPU_ARRIVAL_MAX_PS / 1e9);
        return jsonl_fail(at, "timestamp", what);
    }
    if (e->timestamp_ms < prev_ms) {
        snprintf(what, sizeof(what), "timestamp %s ms is before the previous line's %s ms", now,
                 before);
        return jsonl_fail(at, NULL, what);
    }
    if (jsonl_get_uint(at, json_object_get(o, "input_length"), "input_length",
                       NPU_REQUEST_TOKENS_MAX, &in) ||
        jsonl_get_uint(at, json_object_get(o, "output_length"), "output_length",
                       NPU_REQUEST_TOKENS_MAX, &out))
        return NPU_ERR_FORMAT;
    e->input_length = (uint32_t)in;
    e->output_length = (uint32_t)out;
    if (jsonl_get_hash_ids(at, json_object_get(o, "hash_ids"), e) ||
        jsonl_get_input_ids(at, json_object_get(o, "input_ids"), e))
        return NPU_ERR_FORMAT;
    return 0;
}

static bool jsonl_blank(const char *s)
{
    s += strspn(s, " \t\r\n");
    return *s == '\0';
}

static int jsonl_append(struct rt_trace *t, size_t *cap)
{
    if (t->n < *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : 256;
    struct rt_trace_entry *e = realloc(t->e, ncap * sizeof(*e));
    if (!e)
        return NPU_ERR_NOMEM;
    t->e = e;
    *cap = ncap;
    return 0;
}

static int jsonl_read_lines(FILE *f, struct jsonl_at *at, struct rt_trace *t)
{
    char *line = NULL;
    size_t linecap = 0, cap = 0;
    int rc = 0;
    ssize_t len;
    while (rc == 0 && (len = getline(&line, &linecap, f)) >= 0) {
        at->line++;
        const char *nul = memchr(line, '\0', (size_t)len);
        if (nul) { /* it would end the line early for the JSON reader: refuse, not skip */
            char what[64];
            snprintf(what, sizeof(what), "a NUL byte at column %zu", (size_t)(nul - line) + 1);
            rc = jsonl_fail(at, NULL, what);
            break;
        }
        if (jsonl_blank(line))
            continue;
        if (t->n == NPU_TRACE_REQUESTS_MAX) {
            char what[96];
            snprintf(what, sizeof(what), "more than %u requests (NPU_TRACE_REQUESTS_MAX): cut "
                     "the trace", NPU_TRACE_REQUESTS_MAX);
            rc = jsonl_fail(at, NULL, what);
            break;
        }
        json_error_t je;
        json_t *o = json_loads(line, JSON_REJECT_DUPLICATES, &je);
        if (!o) {
            char what[256];
            int n = snprintf(what, sizeof(what), "not JSON: %s", je.text);
            if (je.column > 0 && n > 0 && (size_t)n < sizeof(what))
                n += snprintf(what + n, sizeof(what) - (size_t)n, " (column %d)", je.column);
            if (t->n == 0 && line[0] != '{' && line[0] != '[' && strchr(line, ',') && n > 0 &&
                (size_t)n < sizeof(what)) /* a CSV header or row */
                snprintf(what + n, sizeof(what) - (size_t)n, "; a CSV trace? npuctl trace "
                         "import --format azure|burstgpt|vidur converts one");
            rc = jsonl_fail(at, NULL, what);
            break;
        }
        rc = jsonl_append(t, &cap);
        if (rc == 0) {
            struct rt_trace_entry *e = &t->e[t->n++];
            *e = (struct rt_trace_entry){ 0 };
            rc = jsonl_parse_entry(at, o, t->n > 1 ? t->e[t->n - 2].timestamp_ms : -1.0, e);
        } else
            jsonl_fail(at, NULL, "out of memory");
        json_decref(o);
    }
    free(line);
    return rc;
}

int trace_read_jsonl_stream(FILE *f, const char *name, struct rt_trace *t, char *err,
                            size_t errlen)
{
    *t = (struct rt_trace){ 0 };
    struct jsonl_at at = { .path = name, .err = err, .errlen = errlen };
    int rc = jsonl_read_lines(f, &at, t);
    if (rc == 0 && ferror(f)) {
        snprintf(err, errlen, "%s:%zu: read error", name, at.line);
        rc = NPU_ERR_IO;
    }
    if (rc)
        trace_free(t);
    return rc;
}

int trace_read_jsonl(const char *path, struct rt_trace *t, char *err, size_t errlen)
{
    *t = (struct rt_trace){ 0 };
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NPU_ERR_IO;
    }
    int rc = trace_read_jsonl_stream(f, path, t, err, errlen);
    fclose(f);
    return rc;
}

/* The shortest of %.15g..%.17g that reads back as the same double: exact round trips,
   and the generator's microsecond-rounded timestamps stay short ("1234.567"). A whole
   number keeps a ".0" so that the file and the messages show a time, not a count. */
static void jsonl_format_double(double v, char *buf, size_t len)
{
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, len, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    if (!strpbrk(buf, ".eEn"))
        strncat(buf, ".0", len - strlen(buf) - 1);
}

static int jsonl_write_entry(FILE *f, const struct rt_trace_entry *e)
{
    char ts[40];
    jsonl_format_double(e->timestamp_ms, ts, sizeof(ts));
    fprintf(f, "{\"timestamp\": %s, \"input_length\": %" PRIu32 ", \"output_length\": %" PRIu32,
            ts, e->input_length, e->output_length);
    if (e->hash_ids) {
        fputs(", \"hash_ids\": [", f);
        for (uint32_t k = 0; k < e->nhash; k++)
            fprintf(f, "%s%" PRIu64, k ? ", " : "", e->hash_ids[k]);
        fputc(']', f);
    }
    if (e->input_ids) {
        fputs(", \"input_ids\": [", f);
        for (uint32_t k = 0; k < e->input_length; k++)
            fprintf(f, "%s%" PRIu32, k ? ", " : "", e->input_ids[k]);
        fputc(']', f);
    }
    return fputs("}\n", f) < 0 ? NPU_ERR_IO : 0;
}

/* "-" writes to stdout (npuctl trace gen -o -). */
int trace_write_jsonl(const char *path, const struct rt_trace *t, char *err, size_t errlen)
{
    bool out = strcmp(path, "-") == 0;
    FILE *f = out ? stdout : fopen(path, "w");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NPU_ERR_IO;
    }
    int rc = 0;
    for (size_t i = 0; i < t->n && rc == 0; i++)
        rc = jsonl_write_entry(f, &t->e[i]);
    if (out ? fflush(f) != 0 : fclose(f) != 0)
        rc = NPU_ERR_IO;
    if (rc)
        snprintf(err, errlen, "%s: write error", path);
    return rc;
}
