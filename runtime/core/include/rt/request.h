/* SPDX-License-Identifier: MIT */
/*
 * A serving request as the control core's runtime sees it (docs/serving.md): its arrival in
 * chip time, its lengths, and where it is in its life. Every submitted request ends
 * FINISHED or REJECTED with a reason; nothing is dropped.
 */
#ifndef RT_REQUEST_H
#define RT_REQUEST_H

#include <stdbool.h>
#include <stdint.h>

#include "rt/kvc.h"

enum rt_req_state {
    RT_REQ_FUTURE,   /* not arrived yet (chip time < arrival) */
    RT_REQ_QUEUED,   /* arrived, waiting for admission */
    RT_REQ_RUNNING,  /* admitted: holds KV-cache space, prefilling or decoding */
    RT_REQ_FINISHED, /* every output token generated, KV space returned */
    RT_REQ_REJECTED, /* never admitted; reject says why */
};

enum rt_reject_reason {
    RT_REJECT_NONE,
    RT_REJECT_EMPTY,        /* input_length or output_length is 0 */
    RT_REJECT_TOO_LONG,     /* input + output passes the image's max_seq */
    RT_REJECT_KV_NEVER,     /* its KV cache can never fit the SRAM blocks plus the HBM ring */
    RT_REJECT_PROMPT_ROWS,  /* the scheduler runs whole prompts and this one passes the
                               rows of an iteration (max_tokens) */
    RT_REJECT_BAD_TOKEN,    /* a prompt token id is not below the vocabulary size */
    RT_REJECT_COUNT,
};

/* "too_long", ...: stable words for outputs (CSV, summary). */
const char *rt_reject_reason_name(enum rt_reject_reason r);

struct rt_request {
    uint32_t id;                /* index in the trace */
    uint32_t cached;            /* prompt tokens found in the prefix cache at admission
                                   (counted in prefilled) */
    uint64_t arrival_ps;        /* chip time of arrival (held: when it is sent) */
    bool held;                  /* --max-concurrency held it back: its arrival_ps moves */
    uint32_t input_len, output_len;
    enum rt_req_state state;
    enum rt_reject_reason reject;
    uint32_t prefilled;         /* prompt tokens whose KV is written in every layer */
    uint32_t generated;         /* output tokens produced (the first comes with the prefill) */
    struct rt_kv_seq kv;        /* its KV-cache space while RUNNING */
};

/* Positions of KV cache the request may write: its prompt and every output token but the
   last (which is never fed back). */
static inline uint32_t rt_request_max_len(const struct rt_request *r)
{
    return r->input_len + (r->output_len ? r->output_len - 1 : 0);
}

/* What makes a request unservable whatever the cache: nothing to prefill or generate
   (RT_REJECT_EMPTY), or longer than the plan's max_seq (RT_REJECT_TOO_LONG); else
   RT_REJECT_NONE. The schedulers add their own reasons. */
static inline enum rt_reject_reason rt_request_shape_reject(const struct rt_request *r,
                                                            uint32_t max_seq)
{
    if (r->input_len == 0 || r->output_len == 0)
        return RT_REJECT_EMPTY;
    if ((uint64_t)r->input_len + r->output_len > max_seq)
        return RT_REJECT_TOO_LONG;
    return RT_REJECT_NONE;
}

/* Requests QUEUED among reqs[first, end). */
static inline uint32_t rt_requests_queued(const struct rt_request *reqs, uint32_t first,
                                          uint32_t end)
{
    uint32_t n = 0;
    for (uint32_t i = first; i < end; i++)
        n += reqs[i].state == RT_REQ_QUEUED;
    return n;
}

static inline bool rt_request_decoding(const struct rt_request *r)
{
    return r->state == RT_REQ_RUNNING && r->prefilled == r->input_len;
}

#endif
