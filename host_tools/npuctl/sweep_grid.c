/* SPDX-License-Identifier: MIT */
/* npuctl sweep's grid (sweep.h): the grid file's lines, the runs' points, names and serve
   arguments. Pure: no process is started and nothing is written. */
#define _POSIX_C_SOURCE 200809L
#include "sweep.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "npu_enums.h"
#include "npuctl.h"

void sweep_free_words(char **words, int n)
{
    for (int i = 0; i < n; i++)
        free(words[i]);
}

/* One word from *s into buf (at most len - 1 characters): quotes group, \ escapes in
   "...". 0, or NPU_ERR_FORMAT for an open quote or an overlong word. */
static int next_word(const char **s, char *buf, size_t len)
{
    size_t n = 0;
    char quote = 0;
    const char *p = *s;
    for (; *p && (quote || (*p != ' ' && *p != '\t')); p++) {
        char c = *p;
        if (!quote && (c == '\'' || c == '"')) {
            quote = c;
            continue;
        }
        if (quote && c == quote) {
            quote = 0;
            continue;
        }
        if (quote == '"' && c == '\\' && p[1])
            c = *++p;
        if (n + 1 >= len)
            return NPU_ERR_FORMAT;
        buf[n++] = c;
    }
    buf[n] = '\0';
    *s = p;
    return quote ? NPU_ERR_FORMAT : NPU_OK;
}

int sweep_split_words(const char *text, char **words, int max, int *n, char *err,
                      size_t errlen)
{
    char word[1024];
    *n = 0;
    for (const char *s = text;;) {
        while (*s == ' ' || *s == '\t')
            s++;
        if (!*s)
            return NPU_OK;
        if (next_word(&s, word, sizeof(word))) {
            snprintf(err, errlen, "a quote is not closed, or a word passes %zu characters",
                     sizeof(word) - 1);
            sweep_free_words(words, *n);
            return NPU_ERR_FORMAT;
        }
        if (*n == max) {
            snprintf(err, errlen, "more than %d words", max);
            sweep_free_words(words, *n);
            return NPU_ERR_RANGE;
        }
        if (!(words[*n] = strdup(word))) {
            sweep_free_words(words, *n);
            return NPU_ERR_NOMEM;
        }
        ++*n;
    }
}

/* Appends words to the grid's fixed arguments. */
static int base_append(struct sweep_grid *g, char *const *words, int n, char *err,
                       size_t errlen)
{
    if (g->nbase + n > (int)SWEEP_WORDS_MAX) {
        snprintf(err, errlen, "more than %u fixed serve arguments", SWEEP_WORDS_MAX);
        return NPU_ERR_RANGE;
    }
    char **b = realloc(g->base, (size_t)(g->nbase + n) * sizeof(*b));
    if (!b)
        return NPU_ERR_NOMEM;
    g->base = b;
    for (int i = 0; i < n; i++) {
        if (!(b[g->nbase] = strdup(words[i])))
            return NPU_ERR_NOMEM;
        g->nbase++;
    }
    return NPU_OK;
}

/* The options the sweep gives every run itself. */
static bool sweep_owns(const char *word)
{
    return !strcmp(word, "--out") || !strncmp(word, "--out=", 6) || !strcmp(word, "-o") ||
           !strcmp(word, "--force");
}

/* Whether kv is a label the sweep gives each run (run=, series= or sweep=): then err says
   so. */
static bool label_owned(const char *kv, const char *where, char *err, size_t errlen)
{
    if (strncmp(kv, "run=", 4) && strncmp(kv, "series=", 7) && strncmp(kv, "sweep=", 6))
        return false;
    snprintf(err, errlen, "%s: --label %s: the sweep gives each run its labels run, series "
             "and sweep; name yours otherwise", where, kv);
    return true;
}

static int check_owned(char *const *words, int n, const char *where, char *err, size_t errlen)
{
    for (int i = 0; i < n; i++) {
        if (sweep_owns(words[i])) {
            snprintf(err, errlen, "%s: %s: the sweep gives each run its own --out (and "
                     "--force); leave it out", where, words[i]);
            return NPU_ERR_INVAL;
        }
        const char *kv = !strncmp(words[i], "--label=", 8) ? words[i] + 8
                         : !strcmp(words[i], "--label") && i + 1 < n ? words[i + 1] : "";
        if (label_owned(kv, where, err, errlen))
            return NPU_ERR_INVAL;
    }
    return NPU_OK;
}

int sweep_grid_add_base(struct sweep_grid *g, char *const *argv, int argc, char *err,
                        size_t errlen)
{
    int rc = check_owned(argv, argc, "after --", err, errlen);
    return rc ? rc : base_append(g, argv, argc, err, errlen);
}

/* A label of [A-Za-z0-9.+-] from the value's words: "layered --groups 2" -> layered-groups-2. */
static void default_label(char *const *words, int n, char *label, size_t len)
{
    size_t k = 0;
    for (int i = 0; i < n && k + 1 < len; i++) {
        const char *w = words[i];
        while (*w == '-')
            w++;
        if (i && k + 1 < len)
            label[k++] = '-';
        for (; *w && k + 1 < len; w++)
            label[k++] = (strchr("+-.", *w) || (*w >= '0' && *w <= '9') ||
                          (*w >= 'a' && *w <= 'z') || (*w >= 'A' && *w <= 'Z')) ? *w : '-';
    }
    label[k] = '\0';
}

static bool label_ok(const char *s)
{
    return *s && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.+-")
                     == strlen(s);
}

/* A value's "[LABEL]" into label (left empty without one), *text moved past it: 0, or
   NPU_ERR_FORMAT with err. */
static int value_label(const struct sweep_axis *a, const char **text, char *label,
                       const char *where, char *err, size_t errlen)
{
    const char *t = *text;
    while (*t == ' ' || *t == '\t')
        t++;
    *text = t;
    if (*t != '[')
        return NPU_OK;
    const char *end = strchr(t, ']');
    if (!end || end - t - 1 > (int)SWEEP_LABEL_MAX) {
        snprintf(err, errlen, "%s: %s: a [LABEL] is not closed or passes %u characters",
                 where, a->opt, SWEEP_LABEL_MAX);
        return NPU_ERR_FORMAT;
    }
    snprintf(label, SWEEP_LABEL_MAX + 1, "%.*s", (int)(end - t - 1), t + 1);
    if (!label_ok(label)) {
        snprintf(err, errlen, "%s: [%s]: a label is of A-Z, a-z, 0-9, '.', '+' and '-'", where,
                 label);
        return NPU_ERR_FORMAT;
    }
    *text = end + 1;
    return NPU_OK;
}

/* One value of an axis: "[LABEL] WORD..." */
static int axis_value(struct sweep_axis *a, const char *text, const char *where, char *err,
                      size_t errlen)
{
    struct sweep_value *v = &a->values[a->nvalues];
    char label[SWEEP_LABEL_MAX + 1] = "";
    if (value_label(a, &text, label, where, err, errlen))
        return NPU_ERR_FORMAT;
    char *words[SWEEP_WORDS_MAX], msg[160];
    int n = 0, rc = sweep_split_words(text, words, (int)SWEEP_WORDS_MAX, &n, msg, sizeof(msg));
    if (rc == NPU_OK && n == 0) {
        snprintf(err, errlen, "%s: %s: an empty value (values are separated by '|')", where,
                 a->opt);
        return NPU_ERR_INVAL;
    }
    if (rc) {
        snprintf(err, errlen, "%s: %s: %s", where, a->opt, msg);
        return rc;
    }
    if (!strcmp(a->opt, "--label") && label_owned(words[0], where, err, errlen))
        rc = NPU_ERR_INVAL;
    if (rc || (rc = check_owned(words + 1, n - 1, where, err, errlen)) ||
        !(v->words = malloc((size_t)n * sizeof(*v->words)))) {
        sweep_free_words(words, n);
        return rc ? rc : NPU_ERR_NOMEM;
    }
    memcpy(v->words, words, (size_t)n * sizeof(*words));
    v->nwords = n;
    if (!label[0])
        default_label(words, n, label, sizeof(label));
    snprintf(v->label, sizeof(v->label), "%s", label);
    for (int i = 0; i < a->nvalues; i++)
        if (!strcmp(a->values[i].label, v->label)) {
            snprintf(err, errlen, "%s: %s: two values labelled '%s' (name one with [LABEL])",
                     where, a->opt, v->label);
            a->nvalues++; /* freed with the grid */
            return NPU_ERR_INVAL;
        }
    a->nvalues++;
    return NPU_OK;
}

/* "vary --opt: V | V ..." */
static int axis_line(struct sweep_grid *g, const char *rest, const char *where, char *err,
                     size_t errlen)
{
    const char *colon = strchr(rest, ':');
    while (*rest == ' ' || *rest == '\t')
        rest++;
    const bool dashes = !strncmp(rest, "--", 2); /* "--sched" or "sched" */
    rest += dashes ? 2 : 0;
    const size_t olen = colon ? strcspn(rest, " \t:") : 0;
    if (!colon || olen < 1 || rest[0] == '-' || olen + 2 >= sizeof(g->axes[0].opt)) {
        snprintf(err, errlen, "%s: expected 'vary OPTION: VALUE | VALUE ...' (OPTION a serve "
                 "option, its dashes optional)", where);
        return NPU_ERR_FORMAT;
    }
    if (g->naxes == (int)SWEEP_AXES_MAX) {
        snprintf(err, errlen, "%s: more than %u axes", where, SWEEP_AXES_MAX);
        return NPU_ERR_RANGE;
    }
    struct sweep_axis *a = &g->axes[g->naxes];
    snprintf(a->opt, sizeof(a->opt), "--%.*s", (int)olen, rest);
    a->key = a->opt + 2;
    for (int i = 0; i < g->naxes; i++)
        if (!strcmp(g->axes[i].opt, a->opt)) {
            snprintf(err, errlen, "%s: %s is varied twice", where, a->opt);
            return NPU_ERR_INVAL;
        }
    if (sweep_owns(a->opt)) {
        snprintf(err, errlen, "%s: %s: the sweep gives each run its own", where, a->opt);
        return NPU_ERR_INVAL;
    }
    g->naxes++; /* from here on the axis is the grid's, freed with it */
    for (const char *v = colon + 1;;) {
        const size_t len = strcspn(v, "|");
        char text[8192];
        if (a->nvalues == (int)SWEEP_VALUES_MAX || len >= sizeof(text)) {
            snprintf(err, errlen, "%s: %s: more than %u values, or one too long", where,
                     a->opt, SWEEP_VALUES_MAX);
            return NPU_ERR_RANGE;
        }
        snprintf(text, sizeof(text), "%.*s", (int)len, v);
        int rc = axis_value(a, text, where, err, errlen);
        if (rc)
            return rc;
        if (!v[len])
            return NPU_OK;
        v += len + 1;
    }
}

int sweep_grid_add_axis(struct sweep_grid *g, const char *text, const char *where, char *err,
                        size_t errlen)
{
    if (strlen(text) >= 8192) {
        snprintf(err, errlen, "%s: an axis of more than 8191 characters", where);
        return NPU_ERR_RANGE;
    }
    return axis_line(g, text, where, err, errlen);
}

int sweep_grid_line(struct sweep_grid *g, const char *line, const char *where, char *err,
                    size_t errlen)
{
    char text[8192];
    if (strlen(line) >= sizeof(text)) {
        snprintf(err, errlen, "%s: the line passes %zu characters", where, sizeof(text) - 1);
        return NPU_ERR_FORMAT;
    }
    snprintf(text, sizeof(text), "%s", line);
    char *hash = strchr(text, '#'); /* a comment, outside quotes or not: '#' is not a value */
    if (hash)
        *hash = '\0';
    char *s = text;
    while (*s == ' ' || *s == '\t' || *s == '\r')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = '\0';
    if (!*s)
        return NPU_OK;
    if (!strncmp(s, "vary ", 5) || !strncmp(s, "vary\t", 5))
        return axis_line(g, s + 5, where, err, errlen);
    if (!strncmp(s, "serve:", 6)) {
        char *words[SWEEP_WORDS_MAX], msg[160];
        int nw = 0, rc = sweep_split_words(s + 6, words, (int)SWEEP_WORDS_MAX, &nw, msg,
                                           sizeof(msg));
        if (rc) {
            snprintf(err, errlen, "%s: serve: %s", where, msg);
            return rc;
        }
        rc = check_owned(words, nw, where, err, errlen);
        rc = rc ? rc : base_append(g, words, nw, err, errlen);
        sweep_free_words(words, nw);
        return rc;
    }
    if (!strncmp(s, "name:", 5)) {
        for (s += 5; *s == ' ' || *s == '\t'; s++)
            ;
        if (!label_ok(s) || strlen(s) > SWEEP_LABEL_MAX) {
            snprintf(err, errlen, "%s: name: '%s': 1 to %u of A-Z, a-z, 0-9, '.', '+', '-'",
                     where, s, SWEEP_LABEL_MAX);
            return NPU_ERR_FORMAT;
        }
        snprintf(g->name, sizeof(g->name), "%s", s);
        return NPU_OK;
    }
    snprintf(err, errlen, "%s: expected 'name: NAME', 'serve: ARGS' or 'vary OPTION: "
             "VALUE | ...', not '%.40s'", where, s);
    return NPU_ERR_FORMAT;
}

int sweep_grid_load(struct sweep_grid *g, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NPU_ERR_IO;
    }
    if (!g->name[0]) { /* the file's base name, up to its first '.' */
        const char *b = strrchr(path, '/');
        b = b ? b + 1 : path;
        snprintf(g->name, sizeof(g->name), "%.*s", (int)strcspn(b, "."), b);
        for (char *c = g->name; *c; c++) /* a name of the label's characters */
            *c = label_ok((char[]){ *c, '\0' }) ? *c : '-';
        if (!g->name[0])
            snprintf(g->name, sizeof(g->name), "sweep");
    }
    char line[8192], where[NPUCTL_PATH_MAX + 16];
    int rc = NPU_OK;
    for (unsigned no = 1; rc == NPU_OK && fgets(line, sizeof(line), f); no++) {
        snprintf(where, sizeof(where), "%s:%u", path, no);
        const size_t len = strlen(line);
        if (len == sizeof(line) - 1 && line[len - 1] != '\n') {
            snprintf(err, errlen, "%s: the line passes %zu characters", where,
                     sizeof(line) - 2);
            rc = NPU_ERR_FORMAT;
            break;
        }
        line[strcspn(line, "\n")] = '\0';
        rc = sweep_grid_line(g, line, where, err, errlen);
    }
    if (rc == NPU_OK && ferror(f)) {
        snprintf(err, errlen, "%s: read error", path);
        rc = NPU_ERR_IO;
    }
    fclose(f);
    return rc;
}

void sweep_grid_free(struct sweep_grid *g)
{
    sweep_free_words(g->base, g->nbase);
    free(g->base);
    for (int a = 0; a < g->naxes; a++)
        for (int v = 0; v < g->axes[a].nvalues; v++) {
            sweep_free_words(g->axes[a].values[v].words, g->axes[a].values[v].nwords);
            free(g->axes[a].values[v].words);
        }
    memset(g, 0, sizeof(*g));
}

size_t sweep_grid_runs(const struct sweep_grid *g)
{
    size_t n = 1;
    for (int a = 0; a < g->naxes; a++)
        n *= (size_t)g->axes[a].nvalues; /* at most 64^8: the caller caps the product */
    return n;
}

void sweep_grid_point(const struct sweep_grid *g, size_t i, struct sweep_point *p)
{
    for (int a = g->naxes - 1; a >= 0; a--) { /* the last axis turns fastest */
        p->idx[a] = (int)(i % (size_t)g->axes[a].nvalues);
        i /= (size_t)g->axes[a].nvalues;
    }
}

/* Axes joined as key=label by '_', the axis `skip` left out (-1: none). */
static void join_name(const struct sweep_grid *g, const struct sweep_point *p, int skip,
                      char *buf, size_t len)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int a = 0; a < g->naxes && k < len; a++)
        if (a != skip)
            k += (size_t)snprintf(buf + k, len - k, "%s%s=%s", k ? "_" : "", g->axes[a].key,
                                  g->axes[a].values[p->idx[a]].label);
    if (!buf[0])
        snprintf(buf, len, "%s", g->name);
}

void sweep_run_name(const struct sweep_grid *g, const struct sweep_point *p, char *buf,
                    size_t len)
{
    join_name(g, p, -1, buf, len);
}

void sweep_series_name(const struct sweep_grid *g, const struct sweep_point *p, char *buf,
                       size_t len)
{
    int skip = -1;
    for (int a = 0; a < g->naxes; a++)
        if (!strcmp(g->axes[a].opt, "--request-rate"))
            skip = a;
    join_name(g, p, skip, buf, len);
}

char **sweep_run_args(const struct sweep_grid *g, size_t i, const char *runs_dir, int *argc)
{
    struct sweep_point p;
    char name[SWEEP_NAME_MAX + 1], series[SWEEP_NAME_MAX + 1];
    struct npuctl_argv a = { 0 };
    sweep_grid_point(g, i, &p);
    sweep_run_name(g, &p, name, sizeof(name));
    sweep_series_name(g, &p, series, sizeof(series));
    for (int k = 0; k < g->nbase; k++)
        npuctl_argv_push(&a, g->base[k]);
    bool threads = false;
    for (int k = 0; k < g->nbase; k++)
        threads = threads || !strncmp(g->base[k], "--threads", 9);
    for (int ax = 0; ax < g->naxes; ax++) {
        const struct sweep_value *v = &g->axes[ax].values[p.idx[ax]];
        npuctl_argv_push(&a, g->axes[ax].opt);
        threads = threads || !strcmp(g->axes[ax].opt, "--threads");
        for (int k = 0; k < v->nwords; k++) {
            npuctl_argv_push(&a, v->words[k]);
            threads = threads || !strncmp(v->words[k], "--threads", 9);
        }
    }
    if (!threads) { /* one QEMU thread a run: --jobs runs fill the CPUs */
        npuctl_argv_push(&a, "--threads");
        npuctl_argv_push(&a, "single");
    }
    npuctl_argv_push(&a, "--out");
    npuctl_argv_pushf(&a, "%s/%s", runs_dir, name);
    npuctl_argv_push(&a, "--force");
    npuctl_argv_pushf(&a, "--label=run=%s", name);
    npuctl_argv_pushf(&a, "--label=series=%s", series);
    npuctl_argv_pushf(&a, "--label=sweep=%s", g->name);
    char **argv = NULL;
    if (npuctl_argv_finish(&a, &argv))
        return NULL;
    *argc = (int)a.n;
    return argv;
}
