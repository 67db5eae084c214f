/* SPDX-License-Identifier: MIT */
/*
 * Reading a run's CSV outputs back (rt/metrics.h): the TTFTs and TBT gaps of its finished
 * requests, for `npuctl plot`'s CDFs. It lives beside the writer so the column names are
 * known in one place; columns are found by header name, so columns added later do not
 * break older readers.
 */
#define _POSIX_C_SOURCE 200809L
#include "rt/metrics.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "npu_enums.h"

#define CSV_COLS 32
#define CSV_NAMES 4

static int push(struct rt_samples *s, size_t *cap, double x)
{
    if (s->n == *cap) {
        size_t c = *cap ? *cap * 2 : 64;
        double *v = realloc(s->v, c * sizeof(*v));
        if (!v)
            return NPU_ERR_NOMEM;
        s->v = v;
        *cap = c;
    }
    s->v[s->n++] = x;
    return 0;
}

/* Splits a CSV line in place. No quoting is read: only the columns before `reason` are
   ever asked for (id, state, ttft_ms; id, t_ms), and the writer quotes only `reason` and
   `run`, which come after them. */
static size_t csv_split(char *line, char **cols)
{
    size_t n = 0;
    line[strcspn(line, "\r\n")] = '\0';
    for (char *p = line; n < CSV_COLS; p++) {
        cols[n++] = p;
        if (!(p = strchr(p, ',')))
            break;
        *p = '\0';
    }
    return n;
}

struct csv_reader {
    const char *path;
    FILE *f;
    char *line;
    size_t cap, lineno, idx[CSV_NAMES];
    char *err;
    size_t errlen;
};

static int csv_open(struct csv_reader *r, const char *const *names, size_t nnames)
{
    char *cols[CSV_COLS];
    if (!(r->f = fopen(r->path, "r"))) {
        snprintf(r->err, r->errlen, "%s: cannot open: %s", r->path, strerror(errno));
        return NPU_ERR_IO;
    }
    r->lineno = 1;
    size_t n = getline(&r->line, &r->cap, r->f) < 0 ? 0 : csv_split(r->line, cols);
    for (size_t k = 0; k < nnames; k++) {
        for (r->idx[k] = 0; r->idx[k] < n; r->idx[k]++)
            if (strcmp(cols[r->idx[k]], names[k]) == 0)
                break;
        if (r->idx[k] == n) {
            snprintf(r->err, r->errlen, "%s: no column '%s' in the header", r->path, names[k]);
            return NPU_ERR_FORMAT;
        }
    }
    return 0;
}

/* The next row's named columns into vals; 1 at the end of the file. */
static int csv_next(struct csv_reader *r, size_t nnames, char **vals)
{
    char *cols[CSV_COLS];
    if (getline(&r->line, &r->cap, r->f) < 0)
        return 1;
    r->lineno++;
    size_t n = csv_split(r->line, cols);
    for (size_t k = 0; k < nnames; k++)
        vals[k] = r->idx[k] < n ? cols[r->idx[k]] : "";
    return 0;
}

static void csv_close(struct csv_reader *r)
{
    free(r->line);
    if (r->f)
        fclose(r->f);
}

static int bad_value(struct csv_reader *r, const char *what, const char *v)
{
    snprintf(r->err, r->errlen, "%s:%zu: %s '%s' is not a number", r->path, r->lineno, what,
             v);
    return NPU_ERR_FORMAT;
}

static bool parse_num(const char *v, double *out)
{
    char *end;
    *out = strtod(v, &end);
    return *v && !*end;
}

struct finished_set {
    bool *by_id;
    size_t n;
};

static int mark_finished(struct finished_set *f, size_t id)
{
    if (id >= f->n) {
        size_t n = (id + 1) * 2;
        bool *p = realloc(f->by_id, n * sizeof(*p));
        if (!p)
            return NPU_ERR_NOMEM;
        memset(p + f->n, 0, (n - f->n) * sizeof(*p));
        f->by_id = p;
        f->n = n;
    }
    f->by_id[id] = true;
    return 0;
}

static int read_requests(struct csv_reader *r, struct rt_samples *ttft, struct finished_set *fs)
{
    static const char *const names[] = { "id", "state", "ttft_ms" };
    char *v[CSV_NAMES];
    size_t cap = 0;
    double id, x;
    int rc = csv_open(r, names, 3);
    while (rc == 0 && csv_next(r, 3, v) == 0) {
        if (strcmp(v[1], "finished") != 0)
            continue;
        if (!parse_num(v[0], &id) || id < 0)
            return bad_value(r, "id", v[0]);
        if (*v[2] && !parse_num(v[2], &x))
            return bad_value(r, "ttft_ms", v[2]);
        rc = *v[2] ? push(ttft, &cap, x) : 0;
        rc = rc ? rc : mark_finished(fs, (size_t)id);
    }
    return rc;
}

/* Token rows come by request, in order: a gap is a row after one of the same request. */
static int read_tokens(struct csv_reader *r, struct rt_samples *tbt,
                       const struct finished_set *fs)
{
    static const char *const names[] = { "id", "t_ms" };
    char *v[CSV_NAMES];
    size_t cap = 0;
    double id, t, prev_id = -1.0, prev_t = 0.0;
    int rc = csv_open(r, names, 2);
    while (rc == 0 && csv_next(r, 2, v) == 0) {
        if (!parse_num(v[0], &id) || id < 0)
            return bad_value(r, "id", v[0]);
        if (!parse_num(v[1], &t))
            return bad_value(r, "t_ms", v[1]);
        if (id == prev_id && (size_t)id < fs->n && fs->by_id[(size_t)id])
            rc = push(tbt, &cap, t - prev_t);
        prev_id = id;
        prev_t = t;
    }
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int metrics_read_latency_samples(const char *requests_csv, const char *tokens_csv,
                                 struct rt_samples *ttft, struct rt_samples *tbt, char *err,
                                 size_t errlen)
{
    struct csv_reader r = { .path = requests_csv, .err = err, .errlen = errlen };
    struct finished_set fs = { NULL, 0 };
    memset(ttft, 0, sizeof(*ttft));
    memset(tbt, 0, sizeof(*tbt));
    int rc = read_requests(&r, ttft, &fs);
    csv_close(&r);
    if (rc == 0) {
        r = (struct csv_reader){ .path = tokens_csv, .err = err, .errlen = errlen };
        rc = read_tokens(&r, tbt, &fs);
        csv_close(&r);
    }
    free(fs.by_id);
    if (rc == NPU_ERR_NOMEM)
        snprintf(err, errlen, "%s: out of memory", requests_csv);
    if (rc) {
        metrics_samples_free(ttft);
        metrics_samples_free(tbt);
        return rc;
    }
    if (ttft->n)
        qsort(ttft->v, ttft->n, sizeof(double), cmp_double);
    if (tbt->n)
        qsort(tbt->v, tbt->n, sizeof(double), cmp_double);
    return 0;
}

void metrics_samples_free(struct rt_samples *s)
{
    free(s->v);
    s->v = NULL;
    s->n = 0;
}
