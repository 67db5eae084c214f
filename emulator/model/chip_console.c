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
    con->stamps = true;
    con->partial = calloc(nharts, sizeof(*con->partial));
    return con->partial ? NPU_OK : NPU_ERR_NOMEM;
}

void chip_console_destroy(struct chip_console *con)
{
    free(con->partial);
    free(con->pending);
    free(con->arena);
    memset(con, 0, sizeof(*con));
}

static int reserve(void **buf, size_t *cap, size_t need, size_t elem, size_t first)
{
    if (need <= *cap)
        return NPU_OK;
    size_t n = *cap ? *cap : first;
    while (n < need)
        n *= 2;
    void *p = realloc(*buf, n * elem);
    if (!p)
        return NPU_ERR_NOMEM;
    *buf = p;
    *cap = n;
    return NPU_OK;
}

static int append_line(struct chip_console *con, uint32_t hart, uint64_t time_ps,
                       const char *text, uint32_t len)
{
    struct chip_console_partial *p = &con->partial[hart];
    if (reserve((void **)&con->pending, &con->cap, con->npending + 1, sizeof(*con->pending),
                64) ||
        reserve((void **)&con->arena, &con->arena_cap, con->arena_len + len, 1, 4096))
        return NPU_ERR_NOMEM;
    struct chip_console_line *l = &con->pending[con->npending++];
    *l = (struct chip_console_line){ .time_ps = time_ps, .hart = hart, .len = len,
                                     .seq = p->seq++, .off = con->arena_len };
    memcpy(con->arena + con->arena_len, text, len);
    con->arena_len += len;
    return NPU_OK;
}

static int queue_line(struct chip_console *con, uint32_t hart, uint64_t time_ps)
{
    static const char dropped[] = "[console: more lines than the chip keeps between two clock "
                                  "steps; the rest are dropped until the next step]";
    struct chip_console_partial *p = &con->partial[hart];
    uint32_t len = p->len;
    p->len = 0;
    if (p->queued > CHIP_CONSOLE_HART_LINES)
        return NPU_OK;
    if (++p->queued > CHIP_CONSOLE_HART_LINES)
        return append_line(con, hart, time_ps, dropped, sizeof(dropped) - 1);
    return append_line(con, hart, time_ps, p->buf, len);
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

static void emit_line(struct chip_console *con, const struct chip_console_line *l)
{
    char out[CHIP_CONSOLE_LINE_MAX + 64], who[32];
    if (l->hart + 1 == con->nharts)
        snprintf(who, sizeof(who), "ctrl");
    else
        snprintf(who, sizeof(who), "c%u(%u,%u)", l->hart, l->hart / con->cols,
                 l->hart % con->cols);
    unsigned long long us = l->time_ps / 1000000, frac = l->time_ps % 1000000;
    int n = con->stamps ? snprintf(out, sizeof(out), "[%8llu.%06llu us %-10s] %.*s\n", us,
                                   frac, who, (int)l->len, con->arena + l->off)
                        : snprintf(out, sizeof(out), "%.*s\n", (int)l->len,
                                   con->arena + l->off);
    if (con->emit && n > 0)
        con->emit(con->opaque, out, (size_t)n < sizeof(out) ? (size_t)n : sizeof(out) - 1);
}

/* Prints the lines stamped before time_ps, keeps the others (with their text) for later. */
void chip_console_flush_before(struct chip_console *con, uint64_t time_ps)
{
    for (uint32_t h = 0; h < con->nharts; h++)
        con->partial[h].queued = 0;
    if (con->npending == 0)
        return; /* qsort with no array is undefined */
    qsort(con->pending, con->npending, sizeof(*con->pending), line_cmp);
    size_t i = 0, kept = 0, text = 0;
    for (; i < con->npending && con->pending[i].time_ps < time_ps; i++)
        emit_line(con, &con->pending[i]);
    if (i == con->npending) {
        con->npending = con->arena_len = 0;
        return;
    }
    /* Lines are sorted by key, not by arena offset: copy the kept texts to a new arena. */
    char *arena = malloc(con->arena_cap);
    if (!arena) {
        for (; i < con->npending; i++) /* out of memory: print them now, out of step */
            emit_line(con, &con->pending[i]);
        con->npending = con->arena_len = 0;
        return;
    }
    for (; i < con->npending; i++, kept++) {
        struct chip_console_line l = con->pending[i];
        memcpy(arena + text, con->arena + l.off, l.len);
        l.off = text;
        text += l.len;
        con->pending[kept] = l;
    }
    free(con->arena);
    con->arena = arena;
    con->npending = kept;
    con->arena_len = text;
}

void chip_console_flush(struct chip_console *con)
{
    chip_console_flush_before(con, UINT64_MAX);
    /* A line stamped UINT64_MAX cannot exist: hart times stay below CHIP_TIME_MAX_PS. */
}
