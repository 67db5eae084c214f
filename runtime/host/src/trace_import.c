/* SPDX-License-Identifier: MIT */
/*
 * Importers of published request traces (docs/traces.md, "Importers"): CSV files whose
 * columns are found by their header names, so extra or reordered columns do not matter.
 * Timestamps become milliseconds relative to the first row; the rows must already be in
 * time order, since re-sorting would hide a broken file rather than report it.
 */
#define _POSIX_C_SOURCE 200809L
#include "rt/trace.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu_enums.h"
#include "npu_limits.h"

#define CSV_COLUMNS_MAX 64

/* The three columns a format needs, by header name. */
struct import_spec {
    const char *name;
    const char *time_col, *input_col, *output_col;
    bool time_is_date; /* Azure: "2023-11-16 18:15:46.6805900"; else seconds */
};

static const struct import_spec import_specs[] = {
    [RT_TRACE_AZURE] = { "azure", "TIMESTAMP", "ContextTokens", "GeneratedTokens", true },
    [RT_TRACE_BURSTGPT] = { "burstgpt", "Timestamp", "Request tokens", "Response tokens",
                            false },
    [RT_TRACE_VIDUR] = { "vidur", "arrived_at", "num_prefill_tokens", "num_decode_tokens",
                         false },
};

int trace_format_parse(const char *name)
{
    for (size_t i = 0; name && i < sizeof(import_specs) / sizeof(import_specs[0]); i++)
        if (strcmp(name, import_specs[i].name) == 0)
            return (int)i;
    return -1;
}

/* Times are whole nanoseconds until the first row is subtracted: a date with 100 ns ticks
   (1.7e18 ns since 1970) keeps every digit, and "46.7005900" minus "46.6805900" is 20 ms
   exactly rather than 20.000000000000018. */

struct import_ctx {
    const char *path;
    const struct import_spec *spec;
    const struct rt_import_filter *flt;
    size_t line;
    int col[3]; /* time, input, output */
    int where_col[RT_IMPORT_WHERE_MAX];
    int64_t first_kept;  /* the first row kept, ns after the first row */
    bool have_first;
    char *err;
    size_t errlen;
};

static char *import_trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
        s[--n] = '\0';
    return s;
}

/* Splits a CSV line in place; double-quoted fields may hold commas ("" is a quote). */
static int import_split(char *line, char **fields, int max)
{
    int n = 0;
    char *p = line;
    for (;;) {
        if (n == max) /* columns past the last one a header can name are ignored */
            return n;
        char *start = p, *w = p;
        bool quoted = *p == '"';
        for (p += quoted; *p && (quoted || *p != ','); p++) {
            if (quoted && *p == '"') {
                if (p[1] != '"') {
                    quoted = false;
                    continue;
                }
                p++;
            }
            *w++ = *p;
        }
        char sep = *p;
        *w = '\0';
        fields[n++] = import_trim(start);
        if (sep != ',')
            return n;
        p++;
    }
}

/* Days since 1970-01-01 of a proleptic Gregorian date (Hinnant's days_from_civil). */
static int64_t import_days(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* Digits after a decimal point as nanoseconds (past the ninth ignored); s is past the
   point. NULL if there is no digit. */
static const char *import_parse_fraction(const char *s, int64_t *ns)
{
    int64_t scale = 100000000;
    *ns = 0;
    if (*s < '0' || *s > '9')
        return NULL;
    for (; *s >= '0' && *s <= '9'; s++, scale /= 10)
        *ns += (*s - '0') * scale;
    return s;
}

/* "YYYY-MM-DD HH:MM:SS[.f...][Z|+HH:MM|-HH:MM]" ('T' also separates date and time). */
static bool import_parse_date(const char *s, int64_t *ns)
{
    int y, mo, d, h, mi, sec, n = 0;
    if (sscanf(s, "%4d-%2d-%2d%*1[ T]%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &n) != 6 ||
        n == 0 || mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 ||
        mi > 59 || sec < 0 || sec > 60)
        return false;
    s += n;
    int64_t frac = 0;
    if (*s == '.' && !(s = import_parse_fraction(s + 1, &frac)))
        return false;
    int64_t offset = 0;
    if (*s == '+' || *s == '-') {
        int oh, om, m = 0;
        if (sscanf(s + 1, "%2d:%2d%n", &oh, &om, &m) != 2 || s[1 + m] != '\0')
            return false;
        offset = (*s == '+' ? 1 : -1) * (int64_t)(oh * 3600 + om * 60);
    } else if (*s && strcmp(s, "Z") != 0)
        return false;
    int64_t whole = import_days(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - offset;
    if (whole <= -(INT64_MAX / 1000000000) || whole >= INT64_MAX / 1000000000 - 1)
        return false; /* nanoseconds from 1970 in 64 bits: the years 1678..2261 */
    *ns = whole * 1000000000 + frac;
    return true;
}

static int import_fail(const struct import_ctx *c, const char *col, const char *fmt,
                       const char *value)
{
    char what[320];
    snprintf(what, sizeof(what), fmt, value);
    if (col)
        snprintf(c->err, c->errlen, "%s:%zu: column '%s': %s", c->path, c->line, col, what);
    else
        snprintf(c->err, c->errlen, "%s:%zu: %s", c->path, c->line, what);
    return NPU_ERR_FORMAT;
}

/* Seconds: "[-]digits[.digits]" exactly, else (an exponent) through strtod. */
static bool import_parse_seconds(const char *v, int64_t *ns)
{
    const char *s = v + (*v == '-');
    char *end;
    int64_t frac = 0;
    errno = 0;
    long long whole = *s >= '0' && *s <= '9' ? strtoll(s, &end, 10) : -1;
    if (whole >= 0 && whole < INT64_MAX / 1000000000 && !errno &&
        (*end == '\0' || (*end == '.' && (end = (char *)import_parse_fraction(end + 1, &frac)) &&
                           *end == '\0'))) {
        *ns = (*v == '-' ? -1 : 1) * (whole * 1000000000 + frac);
        return true;
    }
    double x = strtod(v, &end);
    if (end == v || *end || !(fabs(x) < 9e9))
        return false;
    *ns = llround(x * 1e9);
    return true;
}

static int import_parse_time(const struct import_ctx *c, const char *v, int64_t *ns)
{
    if (c->spec->time_is_date ? import_parse_date(v, ns) : import_parse_seconds(v, ns))
        return 0;
    return import_fail(c, c->spec->time_col,
                       c->spec->time_is_date ? "'%s' is not a date YYYY-MM-DD HH:MM:SS[.f] "
                                               "of the years 1678..2261"
                                             : "'%s' is not a number of seconds", v);
}

/* A token count: a whole number, also written as "123.0" (pandas writes counts so when a
   column has gaps). */
static int import_parse_count(const struct import_ctx *c, const char *col, const char *v,
                              uint32_t *out)
{
    char *end;
    errno = 0;
    double x = v[0] >= '0' && v[0] <= '9' ? strtod(v, &end) : -1.0;
    if (x < 0 || *end || errno || x != floor(x))
        return import_fail(c, col, "'%s' is not a whole number of tokens", v);
    if (x > NPU_REQUEST_TOKENS_MAX)
        return import_fail(c, col, "'%s' tokens: more than a request may have "
                           "(NPU_REQUEST_TOKENS_MAX)", v);
    *out = (uint32_t)x;
    return 0;
}

static int import_header(struct import_ctx *c, char *line)
{
    char *f[CSV_COLUMNS_MAX];
    /* A UTF-8 byte-order mark, as spreadsheet programs write. */
    if (strncmp(line, "\xef\xbb\xbf", 3) == 0)
        line += 3;
    int n = import_split(line, f, CSV_COLUMNS_MAX);
    const char *want[3 + RT_IMPORT_WHERE_MAX] = { c->spec->time_col, c->spec->input_col,
                                                  c->spec->output_col };
    const size_t nwant = 3 + c->flt->nwhere;
    for (size_t k = 0; k < c->flt->nwhere; k++)
        want[3 + k] = c->flt->where_col[k];
    for (size_t k = 0; k < nwant; k++) {
        int *col = k < 3 ? &c->col[k] : &c->where_col[k - 3];
        *col = -1;
        for (int i = 0; i < n; i++)
            if (strcmp(f[i], want[k]) == 0)
                *col = i;
        if (*col < 0) {
            char fmt[96];
            snprintf(fmt, sizeof(fmt), "no column '%%s' in the header (%s%s)", c->spec->name,
                     k < 3 ? " format" : " format; --where names a column");
            return import_fail(c, NULL, fmt, want[k]);
        }
    }
    return 0;
}

static int import_append(struct rt_trace *t, size_t *cap)
{
    if (t->n < *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : 1024;
    struct rt_trace_entry *e = realloc(t->e, ncap * sizeof(*e));
    if (!e)
        return NPU_ERR_NOMEM;
    t->e = e;
    *cap = ncap;
    return 0;
}

/* A row's place in the filter. */
enum import_keep { IMPORT_KEEP, IMPORT_SKIP, IMPORT_PAST };

/* Whether a row at rel ns from the first row, with these fields, is kept. */
static enum import_keep import_filter(const struct import_ctx *c, int64_t rel, char **f)
{
    const double s = (double)rel / 1e9;
    if (s >= c->flt->to_s)
        return IMPORT_PAST;
    if (s < c->flt->from_s)
        return IMPORT_SKIP;
    for (size_t k = 0; k < c->flt->nwhere; k++)
        if (strcmp(f[c->where_col[k]], c->flt->where_val[k]) != 0)
            return IMPORT_SKIP;
    return IMPORT_KEEP;
}

/* One data row: its time from the first row's (*t0, set by the first row) into *rel, and,
   when the filter keeps it, its lengths into e (*keep says which). */
static int import_row(struct import_ctx *c, char *line, int64_t *t0, bool first,
                      int64_t *rel, enum import_keep *keep, struct rt_trace_entry *e)
{
    char *f[CSV_COLUMNS_MAX];
    char count[32];
    int n = import_split(line, f, CSV_COLUMNS_MAX);
    for (size_t k = 0; k < 3 + c->flt->nwhere; k++)
        if ((k < 3 ? c->col[k] : c->where_col[k - 3]) >= n) {
            snprintf(count, sizeof(count), "%d", n);
            return import_fail(c, NULL, "%s columns, too few for the header", count);
        }
    int64_t t = 0;
    *e = (struct rt_trace_entry){ 0 };
    int rc = import_parse_time(c, f[c->col[0]], &t);
    if (rc)
        return rc;
    if (first)
        *t0 = t;
    /* checked: two times far apart overflow the difference (the arrival limit applies to
       the rows kept, timed from the first of them: import_arrival) */
    if (__builtin_sub_overflow(t, *t0, rel))
        return import_fail(c, c->spec->time_col, "'%s' is more than the latest arrival a run "
                           "may have (NPU_ARRIVAL_MAX_PS) after the first row's",
                           f[c->col[0]]);
    if ((*keep = import_filter(c, *rel, f)) != IMPORT_KEEP)
        return 0;
    if (!c->have_first)
        c->first_kept = *rel, c->have_first = true;
    const double ps = (double)(*rel - c->first_kept) * 1e3 * c->flt->time_scale;
    if (ps > (double)NPU_ARRIVAL_MAX_PS)
        return import_fail(c, c->spec->time_col, "'%s' is more than the latest arrival a run "
                           "may have (NPU_ARRIVAL_MAX_PS) after the first row kept (times "
                           "scaled by --time-scale)", f[c->col[0]]);
    rc = import_parse_count(c, c->spec->input_col, f[c->col[1]], &e->input_length);
    rc = rc ? rc : import_parse_count(c, c->spec->output_col, f[c->col[2]], &e->output_length);
    e->timestamp_ms = (double)*rel / 1e6;
    return rc;
}

static bool import_blank(const char *s)
{
    return s[strspn(s, " \t\r\n")] == '\0';
}

/* The rows in time order: rel against the previous row's (kept or not). */
static int import_order(const struct import_ctx *c, int64_t rel, int64_t prev)
{
    if (rel >= prev)
        return 0;
    char what[192];
    snprintf(what, sizeof(what), "timestamp %.4f ms is before the previous row's %.4f ms "
             "(rows must be in time order)", (double)rel / 1e6, (double)prev / 1e6);
    return import_fail(c, NULL, "%s", what);
}

static int import_rows(FILE *f, struct import_ctx *c, struct rt_trace *t)
{
    char *line = NULL;
    size_t linecap = 0, cap = 0, rows = 0;
    const size_t limit = c->flt->limit;
    bool header = false;
    int64_t t0 = 0, prev = 0;
    int rc = 0;
    ssize_t len;
    while (rc == 0 && (limit == 0 || t->n < limit) &&
           (len = getline(&line, &linecap, f)) >= 0) {
        c->line++;
        if (memchr(line, '\0', (size_t)len)) { /* it would cut the row short: refuse */
            rc = import_fail(c, NULL, "%s", "a NUL byte in the row");
            break;
        }
        if (import_blank(line))
            continue;
        if (!header) {
            rc = import_header(c, line);
            header = true;
            continue;
        }
        if ((rc = import_append(t, &cap)) != 0) {
            import_fail(c, NULL, "%s", "out of memory");
            break;
        }
        struct rt_trace_entry *e = &t->e[t->n];
        int64_t rel = 0;
        enum import_keep keep = IMPORT_SKIP;
        rc = import_row(c, line, &t0, rows++ == 0, &rel, &keep, e);
        rc = rc ? rc : import_order(c, rel, prev);
        prev = rel;
        if (rc == 0 && keep == IMPORT_PAST)
            break; /* in time order: no later row is in the window */
        if (rc == 0 && keep == IMPORT_KEEP && t->n == NPU_TRACE_REQUESTS_MAX)
            rc = import_fail(c, NULL, "%s", "more rows than a trace may hold "
                             "(NPU_TRACE_REQUESTS_MAX): keep the first with --limit");
        t->n += rc == 0 && keep == IMPORT_KEEP;
    }
    if (rc == 0 && !header)
        rc = import_fail(c, NULL, "%s", "empty file: no header");
    free(line);
    return rc;
}

struct rt_import_filter trace_filter_all(void)
{
    return (struct rt_import_filter){ .to_s = INFINITY, .time_scale = 1.0 };
}

/* The kept rows timed from the first of them, scaled. */
static void import_rebase(struct rt_trace *t, double scale)
{
    const double first = t->n ? t->e[0].timestamp_ms : 0.0;
    for (size_t i = 0; i < t->n; i++)
        t->e[i].timestamp_ms = (t->e[i].timestamp_ms - first) * scale;
}

static int import_stream(FILE *f, const char *name, enum rt_trace_format fmt,
                         const struct rt_import_filter *flt, struct rt_trace *t, char *err,
                         size_t errlen)
{
    *t = (struct rt_trace){ 0 };
    if ((unsigned)fmt >= sizeof(import_specs) / sizeof(import_specs[0])) {
        snprintf(err, errlen, "%s: unknown trace format %d", name, (int)fmt);
        return NPU_ERR_INVAL;
    }
    struct import_ctx c = { .path = name, .spec = &import_specs[fmt], .flt = flt, .err = err,
                            .errlen = errlen };
    int rc = import_rows(f, &c, t);
    if (rc == 0 && ferror(f)) {
        snprintf(err, errlen, "%s:%zu: read error", name, c.line);
        rc = NPU_ERR_IO;
    }
    if (rc)
        trace_free(t);
    else
        import_rebase(t, flt->time_scale);
    return rc;
}

int trace_import_stream(FILE *f, const char *name, enum rt_trace_format fmt, size_t limit,
                        struct rt_trace *t, char *err, size_t errlen)
{
    struct rt_import_filter flt = trace_filter_all();
    flt.limit = limit;
    return import_stream(f, name, fmt, &flt, t, err, errlen);
}

int trace_import_filtered(const char *path, enum rt_trace_format fmt,
                          const struct rt_import_filter *flt, struct rt_trace *t, char *err,
                          size_t errlen)
{
    *t = (struct rt_trace){ 0 };
    if ((unsigned)fmt >= sizeof(import_specs) / sizeof(import_specs[0]))
        return import_stream(NULL, path, fmt, flt, t, err, errlen); /* says so */
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NPU_ERR_IO;
    }
    int rc = import_stream(f, path, fmt, flt, t, err, errlen);
    fclose(f);
    return rc;
}

int trace_import_limit(const char *path, enum rt_trace_format fmt, size_t limit,
                       struct rt_trace *t, char *err, size_t errlen)
{
    struct rt_import_filter flt = trace_filter_all();
    flt.limit = limit;
    return trace_import_filtered(path, fmt, &flt, t, err, errlen);
}

void trace_select(struct rt_trace *t, const struct rt_import_filter *flt)
{
    size_t k = 0;
    for (size_t i = 0; i < t->n; i++) {
        const double s = t->e[i].timestamp_ms / 1e3;
        const bool keep = s >= flt->from_s && s < flt->to_s && (!flt->limit || k < flt->limit);
        if (!keep) {
            free(t->e[i].input_ids);
            free(t->e[i].hash_ids);
            continue;
        }
        t->e[k++] = t->e[i];
    }
    t->n = k;
    import_rebase(t, flt->time_scale);
}

int trace_import(const char *path, enum rt_trace_format fmt, struct rt_trace *t, char *err,
                 size_t errlen)
{
    return trace_import_limit(path, fmt, 0, t, err, errlen);
}
