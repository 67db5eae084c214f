/* SPDX-License-Identifier: MIT */
/*
 * Requests (rt/request.h): the stable words naming why a request was rejected, as the run's
 * outputs (CSV, summary) print them. The request's life itself is driven by the scheduler.
 */
#include "rt/request.h"

#include <assert.h>

const char *rt_reject_reason_name(enum rt_reject_reason r)
{
    /* Outputs are compared across runs and tools: these words must not change. */
    static const char *const names[RT_REJECT_COUNT] = {
        [RT_REJECT_NONE] = "none",
        [RT_REJECT_EMPTY] = "empty",
        [RT_REJECT_TOO_LONG] = "too_long",
        [RT_REJECT_KV_NEVER] = "kv_never_fits",
        [RT_REJECT_PROMPT_ROWS] = "prompt_rows",
        [RT_REJECT_BAD_TOKEN] = "bad_token",
    };
    assert((unsigned)r < RT_REJECT_COUNT);
    return (unsigned)r < RT_REJECT_COUNT ? names[r] : "unknown";
}
