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

static void swap(struct evq_event *a, struct evq_event *b)
{
    struct evq_event t = *a;
    *a = *b;
    *b = t;
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
    size_t i = q->len++;
    q->heap[i] = *ev;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!evq_before(&q->heap[i], &q->heap[parent]))
            break;
        swap(&q->heap[i], &q->heap[parent]);
        i = parent;
    }
    return NPU_OK;
}

bool evq_pop(struct evq *q, struct evq_event *out)
{
    if (q->len == 0)
        return false;
    *out = q->heap[0];
    q->heap[0] = q->heap[--q->len];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < q->len && evq_before(&q->heap[l], &q->heap[m]))
            m = l;
        if (r < q->len && evq_before(&q->heap[r], &q->heap[m]))
            m = r;
        if (m == i)
            break;
        swap(&q->heap[i], &q->heap[m]);
        i = m;
    }
    return true;
}

const struct evq_event *evq_peek(const struct evq *q)
{
    return q->len ? &q->heap[0] : NULL;
}
