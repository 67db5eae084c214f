/* SPDX-License-Identifier: MIT */
/*
 * The chip's discrete-event queue: a binary min-heap of events ordered by the key
 * (time_ps, src, seq). `src` is the id of the hart or unit that scheduled the event and
 * `seq` that source's own running count, so keys are unique and the order of two events
 * never depends on the host order in which they were pushed. That is what makes a run a
 * pure function of its inputs.
 */
#ifndef EVENT_QUEUE_H
#define EVENT_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct evq_event {
    uint64_t time_ps; /* when the event takes effect */
    uint32_t src;     /* tie-break 1: the scheduling hart or unit */
    uint32_t kind;    /* interpreted by the owner of the queue */
    uint64_t seq;     /* tie-break 2: per-source sequence number */
    uint64_t arg0;
    uint64_t arg1;
};

struct evq {
    struct evq_event *heap; /* heap[0] is the earliest event */
    size_t len;
    size_t cap;
};

int evq_init(struct evq *q, size_t initial_cap);
void evq_destroy(struct evq *q);
int evq_push(struct evq *q, const struct evq_event *ev);
/* Removes the earliest event into *out; returns false if the queue is empty. */
bool evq_pop(struct evq *q, struct evq_event *out);
/* The earliest event, or NULL. */
const struct evq_event *evq_peek(const struct evq *q);
/* Removes every event for which drop(ctx, ev) is true, in O(len); the rest pop as before. */
void evq_drop_if(struct evq *q, bool (*drop)(const void *ctx, const struct evq_event *ev),
                 const void *ctx);

static inline bool evq_is_empty(const struct evq *q)
{
    return q->len == 0;
}

/* Strict order of two keys: true if a comes before b. */
bool evq_before(const struct evq_event *a, const struct evq_event *b);

#endif
