/* SPDX-License-Identifier: MIT */
/* Deterministic line console; see chip_console.h for why lines are held back. */
#include "chip_console.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu_enums.h"

int chip_console_init(struct chip_console *con, uint32_t nharts, uint32_t cols,
                      void (*emit)(void *, const char *, size_t), void *opaque)
{
    memset(con, 0, sizeof(*con));
    con->nharts = nharts;
    con->cols = cols;
    con->emit = emit;
    con->opaque = opaque;
    con->partial = calloc(nharts, sizeof(*con->partial));
    return con->partial ? NPU_OK : NPU_ERR_NOMEM;
}

void chip_console_destroy(struct chip_console *con)
{
    free(con->partial);
    free(con->pending);
    memset(con, 0, sizeof(*con));
}

static int queue_line(struct chip_console *con, uint32_t hart, uint64_t time_ps)
{
    struct chip_console_partial *p = &con->partial[hart];
    if (con->npending == con->cap) {
        size_t cap = con->cap ? con->cap * 2 : 64;
        struct chip_console_line *lines = realloc(con->pending, cap * sizeof(*lines));
        if (!lines)
            return NPU_ERR_NOMEM;
        con->pending = lines;
        con->cap = cap;
    }
    struct chip_console_line *l = &con->pending[con->npending++];
    l->time_ps = time_ps;
    l->hart = hart;
    l->seq = p->seq++;
    memcpy(l->text, p->buf, p->len);
    l->text[p->len] = '\0';
    p->len = 0;
    return NPU_OK;
}

int chip_console_putc(struct chip_console *con, uint32_t hart, uint64_t time_ps, char ch)
{
    if (hart >= con->nharts)
        return NPU_ERR_RANGE;
    struct chip_console_partial *p = &con->partial[hart];
    if (ch == '\n')
        return queue_line(con, hart, time_ps);
    if (ch == '\r')
        return NPU_OK;
    if (p->len == CHIP_CONSOLE_LINE_MAX) {
        int rc = queue_line(con, hart, time_ps);
        if (rc)
            return rc;
    }
    p->buf[p->len++] = ch;
    return NPU_OK;
}

int chip_console_end_line(struct chip_console *con, uint32_t hart, uint64_t time_ps)
{
    if (hart >= con->nharts)
        return NPU_ERR_RANGE;
    return con->partial[hart].len ? queue_line(con, hart, time_ps) : NPU_OK;
}

static int line_cmp(const void *pa, const void *pb)
{
    const struct chip_console_line *a = pa, *b = pb;
    if (a->time_ps != b->time_ps)
        return a->time_ps < b->time_ps ? -1 : 1;
    if (a->hart != b->hart)
        return a->hart < b->hart ? -1 : 1;
    return a->seq < b->seq ? -1 : (a->seq > b->seq);
}

void chip_console_flush(struct chip_console *con)
{
    if (con->npending == 0)
        return; /* pending may still be NULL, which qsort must not get */
    qsort(con->pending, con->npending, sizeof(*con->pending), line_cmp);
    for (size_t i = 0; i < con->npending; i++) {
        const struct chip_console_line *l = &con->pending[i];
        char out[CHIP_CONSOLE_LINE_MAX + 64], who[32];
        if (l->hart + 1 == con->nharts)
            snprintf(who, sizeof(who), "ctrl");
        else
            snprintf(who, sizeof(who), "c%u(%u,%u)", l->hart, l->hart / con->cols,
                     l->hart % con->cols);
        unsigned long long us = l->time_ps / 1000000, frac = l->time_ps % 1000000;
        int n = snprintf(out, sizeof(out), "[%8llu.%06llu us %-10s] %s\n", us, frac, who,
                         l->text);
        if (con->emit && n > 0)
            con->emit(con->opaque, out, (size_t)n < sizeof(out) ? (size_t)n : sizeof(out) - 1);
    }
    con->npending = 0;
}
