/* SPDX-License-Identifier: MIT */
/* Binary min-heap of chip events; see event_queue.h for the ordering contract. */
#include "event_queue.h"

#include <stdlib.h>

#include "npu_enums.h"

bool evq_before(const struct evq_event *a, const struct evq_event *b)
{
    if (a->time_ps != b->time_ps)
        return a->time_ps < b->time_ps;
    if (a->src != b->src)
        return a->src < b->src;
    return a->seq < b->seq;
}

int evq_init(struct evq *q, size_t initial_cap)
{
    q->len = 0;
    q->cap = initial_cap ? initial_cap : 16;
    q->heap = malloc(q->cap * sizeof(*q->heap));
    return q->heap ? NPU_OK : NPU_ERR_NOMEM;
}

void evq_destroy(struct evq *q)
{
    free(q->heap);
    q->heap = NULL;
    q->len = q->cap = 0;
}

/*
 * Both operations move a hole rather than swapping entries (one 48-byte copy per level
 * instead of three). The pop sinks the hole from the root to a leaf along the earlier child
 * (one comparison per level), then lets the last entry rise from there: the last entry is
 * usually one of the latest events, so it rises little, and this takes about half the
 * comparisons of sifting it down from the root. Keys are unique, so any heap pops the same
 * sequence.
 */
static void rise(struct evq *q, size_t hole, const struct evq_event *ev)
{
    while (hole > 0) {
        size_t parent = (hole - 1) / 2;
        if (!evq_before(ev, &q->heap[parent]))
            break;
        q->heap[hole] = q->heap[parent];
        hole = parent;
    }
    q->heap[hole] = *ev;
}

int evq_push(struct evq *q, const struct evq_event *ev)
{
    if (q->len == q->cap) {
        size_t cap = q->cap * 2;
        struct evq_event *heap = realloc(q->heap, cap * sizeof(*heap));
        if (!heap)
            return NPU_ERR_NOMEM;
        q->heap = heap;
        q->cap = cap;
    }
    rise(q, q->len++, ev);
    return NPU_OK;
}

/* Moves ev down from the hole to its place, below which the heap is in order. */
static void sink(struct evq *q, size_t hole, const struct evq_event *ev)
{
    for (size_t c = 2 * hole + 1; c < q->len; c = 2 * hole + 1) {
        if (c + 1 < q->len && evq_before(&q->heap[c + 1], &q->heap[c]))
            c++;
        if (!evq_before(&q->heap[c], ev))
            break;
        q->heap[hole] = q->heap[c];
        hole = c;
    }
    q->heap[hole] = *ev;
}

bool evq_pop(struct evq *q, struct evq_event *out)
{
    if (q->len == 0)
        return false;
    *out = q->heap[0];
    size_t len = --q->len, hole = 0;
    if (len == 0)
        return true;
    for (size_t c = 1; c < len; c = 2 * hole + 1) {
        if (c + 1 < len && evq_before(&q->heap[c + 1], &q->heap[c]))
            c++;
        q->heap[hole] = q->heap[c];
        hole = c;
    }
    struct evq_event last = q->heap[len];
    rise(q, hole, &last);
    return true;
}

const struct evq_event *evq_peek(const struct evq *q)
{
    return q->len ? &q->heap[0] : NULL;
}

void evq_drop_if(struct evq *q, bool (*drop)(const void *ctx, const struct evq_event *ev),
                 const void *ctx)
{
    size_t kept = 0;
    for (size_t i = 0; i < q->len; i++)
        if (!drop(ctx, &q->heap[i]))
            q->heap[kept++] = q->heap[i];
    q->len = kept;
    for (size_t i = kept / 2; i-- > 0;) { /* bottom-up heap construction */
        struct evq_event ev = q->heap[i];
        sink(q, i, &ev);
    }
}
