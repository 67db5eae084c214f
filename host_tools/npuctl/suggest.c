/* SPDX-License-Identifier: MIT */
/*
 * npuctl's "did you mean": the known names closest to a word that named nothing (a model,
 * a chip, an option, a command). Closeness is the optimal-string-alignment distance
 * (Levenshtein with transpositions of neighbours, as typing errors go), case-insensitive,
 * with leading dashes ignored so that options compare by their words; a name that the word
 * begins (or that begins the word) counts as one edit away, so `qwen3-30b` finds
 * qwen3-30b-a3b and `--chunk-size` finds --chunk. A word of one letter, or of more than
 * WORD_MAX, gets no suggestion (npuctl_suggest says why).
 */
#define _POSIX_C_SOURCE 200809L
#include "npuctl.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define WORD_MAX 64u /* longer words are compared by their first 64 characters */

static const char *skip_dashes(const char *s)
{
    while (*s == '-')
        s++;
    return s;
}

static size_t min3(size_t a, size_t b, size_t c)
{
    size_t m = a < b ? a : b;
    return m < c ? m : c;
}

size_t npuctl_edit_distance(const char *a, const char *b)
{
    size_t n = strnlen(a, WORD_MAX), m = strnlen(b, WORD_MAX);
    /* three rows of the dynamic programme: i - 2, i - 1 and i */
    size_t rows[3][WORD_MAX + 1];
    for (size_t j = 0; j <= m; j++)
        rows[0][j] = j;
    for (size_t i = 1; i <= n; i++) {
        size_t *cur = rows[i % 3], *prev = rows[(i + 2) % 3], *prev2 = rows[(i + 1) % 3];
        cur[0] = i;
        for (size_t j = 1; j <= m; j++) {
            char x = (char)tolower((unsigned char)a[i - 1]);
            char y = (char)tolower((unsigned char)b[j - 1]);
            size_t cost = x != y;
            cur[j] = min3(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost);
            if (i > 1 && j > 1 && x == tolower((unsigned char)b[j - 2]) &&
                tolower((unsigned char)a[i - 2]) == y && prev2[j - 2] + 1 < cur[j])
                cur[j] = prev2[j - 2] + 1;
        }
    }
    return rows[n % 3][m];
}

static bool starts_with_nocase(const char *s, const char *prefix)
{
    size_t n = strlen(prefix);
    return n > 0 && strncasecmp(s, prefix, n) == 0;
}

/* The distance of name from word as the suggestions rank it (see the top of the file). */
static size_t closeness(const char *word, const char *name)
{
    const char *w = skip_dashes(word), *n = skip_dashes(name);
    size_t d = npuctl_edit_distance(w, n);
    /* a prefix of three characters or more: the rest of the name was left off (or added) */
    bool prefix = (strlen(w) >= 3 && starts_with_nocase(n, w)) ||
                  (strlen(n) >= 3 && starts_with_nocase(w, n));
    return prefix && d > 1 ? 1 : d;
}

/* Whether s (dashes skipped) is short enough for the distance to read it whole. */
static bool read_whole(const char *s)
{
    return strlen(skip_dashes(s)) <= WORD_MAX;
}

size_t npuctl_suggest(const char *word, const char *const *names, size_t n, const char **out,
                      size_t max)
{
    size_t len = strlen(skip_dashes(word));
    /* One letter is one edit from every one-letter name (-o from -h): closeness says
       nothing there. A word longer than the distance reads would be measured by its first
       WORD_MAX characters against a limit made of its whole length: no suggestion. */
    if (len < 2 || len > WORD_MAX)
        return 0;
    size_t limit = len < 3 ? 1 : len / 3 + 1; /* about one edit in three characters */
    size_t best = limit + 1, count = 0;
    for (size_t i = 0; i < n; i++) {
        if (!read_whole(names[i]))
            continue;
        size_t d = closeness(word, names[i]);
        if (d > limit || d > best || strcmp(word, names[i]) == 0)
            continue;
        if (d < best)
            best = d, count = 0;
        bool seen = false; /* a name listed twice (an option of two commands) once */
        for (size_t k = 0; k < count; k++)
            seen |= strcmp(out[k], names[i]) == 0;
        if (!seen && count < max)
            out[count++] = names[i];
    }
    return count;
}

void npuctl_format_suggestion(const char *word, const char *const *names, size_t n, char *buf,
                              size_t len)
{
    const char *best[3];
    size_t k = npuctl_suggest(word, names, n, best, 3);
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < k && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s",
                                 i == 0 ? "; did you mean " : i + 1 == k ? " or " : ", ",
                                 best[i]);
    if (k > 0 && used < len)
        snprintf(buf + used, len - used, "?");
}
