/* SPDX-License-Identifier: MIT */
/*
 * npuctl utilities: `npuctl: ...` error messages, growing NULL-terminated argv vectors and
 * POSIX-shell quoting of a command line (what --print-cmd and debug print).
 */
#define _POSIX_C_SOURCE 200809L
#include "npuctl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu_enums.h"

void npuctl_print_error(const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    fputs("npuctl: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void npuctl_free_argv(char **argv)
{
    if (!argv)
        return;
    for (char **p = argv; *p; p++)
        free(*p);
    free(argv);
}

/* Takes ownership of s (NULL means an allocation failed). */
static void argv_push_owned(struct npuctl_argv *a, char *s)
{
    if (!s)
        a->failed = true;
    if (a->failed) {
        free(s);
        return;
    }
    if (a->n + 2 > a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 32;
        char **v = realloc(a->v, cap * sizeof(*v));
        if (!v) {
            a->failed = true;
            free(s);
            return;
        }
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = s;
    a->v[a->n] = NULL;
}

void npuctl_argv_push(struct npuctl_argv *a, const char *s)
{
    argv_push_owned(a, strdup(s));
}

void npuctl_argv_pushf(struct npuctl_argv *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s) {
        va_start(ap, fmt);
        vsnprintf(s, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    argv_push_owned(a, s);
}

int npuctl_argv_finish(struct npuctl_argv *a, char ***argv_out)
{
    if (a->failed || a->n == 0) {
        if (a->v) {
            a->v[a->n] = NULL;
            npuctl_free_argv(a->v);
        }
        *argv_out = NULL;
        return NPU_ERR_NOMEM;
    }
    *argv_out = a->v;
    return NPU_OK;
}

/* Characters that need no quoting in a POSIX shell word. */
static bool is_shell_safe(const char *s)
{
    if (*s == '\0')
        return false;
    return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                     "@%+=:,./_-") == strlen(s);
}

static void quote_word(FILE *f, const char *s)
{
    if (is_shell_safe(s)) {
        fputs(s, f);
        return;
    }
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputs("'\\''", f);
        else
            fputc(*s, f);
    }
    fputc('\'', f);
}

int npuctl_quote_argv(char *const *argv, char **line_out)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        *line_out = NULL;
        return NPU_ERR_NOMEM;
    }
    for (size_t i = 0; argv[i]; i++) {
        if (i)
            fputc(' ', f);
        quote_word(f, argv[i]);
    }
    if (fclose(f) != 0) {
        free(buf);
        *line_out = NULL;
        return NPU_ERR_NOMEM;
    }
    *line_out = buf;
    return NPU_OK;
}

int npuctl_usage_error(const char *fmt, ...)
{
    char msg[NPUCTL_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    npuctl_print_error("%s", msg);
    return NPUCTL_EXIT_USAGE;
}
