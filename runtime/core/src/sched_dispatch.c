/* SPDX-License-Identifier: MIT */
/*
 * Dealing arriving requests to data-parallel replicas (rt/sched.h, sched_dispatch; docs/
 * serving.md, "Disaggregated experts"): round robin, least loaded, or cache-aware (the
 * replica whose prefix index holds most of the prompt, as SGLang's router and Mooncake's
 * conductor route). Load is what a replica has left to run, in tokens: a deterministic
 * stand-in for the queueing delay such routers estimate.
 * Not modelled: moving a request between replicas after it was dealt.
 */
#include <assert.h>
#include <string.h>

#include "rt/sched.h"

static const char *const dispatch_names[RT_DISPATCH_COUNT] = {
    [RT_DISPATCH_RR] = "rr", [RT_DISPATCH_LOAD] = "load", [RT_DISPATCH_PREFIX] = "prefix",
};

const char *rt_dispatch_name(enum rt_dispatch d)
{
    assert((unsigned)d < RT_DISPATCH_COUNT);
    return (unsigned)d < RT_DISPATCH_COUNT ? dispatch_names[d] : "unknown";
}

int rt_dispatch_parse(const char *name)
{
    for (int d = 0; name && d < (int)RT_DISPATCH_COUNT; d++)
        if (strcmp(name, dispatch_names[d]) == 0)
            return d;
    return -1;
}

/* Tokens s has left to run: its running requests' prompt rows and output tokens still to
   come, and the whole lengths of its queued ones and of those dealt to it that it has not
   taken in yet (dealt in this same round of arrivals: they follow next_arrival). */
static uint64_t sched_count_load(const struct rt_sched *s)
{
    uint64_t n = 0;
    for (uint32_t k = 0; k < s->nrunning; k++) {
        const struct rt_request *r = &s->reqs[s->running[k]];
        n += (uint64_t)(r->input_len - r->prefilled) + (r->output_len - r->generated);
    }
    for (uint32_t i = s->queue_first; i < s->nreqs; i++) {
        const bool arrived = i < s->next_arrival;
        if (!arrived && (!s->p.owner || s->p.owner[i] == RT_SCHED_UNDEALT))
            break; /* dealing follows arrival order: nothing later is dealt */
        const enum rt_req_state st = s->reqs[i].state;
        if (sched_owns(s, i) && (arrived ? st == RT_REQ_QUEUED : st == RT_REQ_FUTURE))
            n += (uint64_t)s->reqs[i].input_len + s->reqs[i].output_len;
    }
    return n;
}

/* Blocks of request i's prompt that s's prefix index holds (0 without one). */
static uint32_t sched_count_held(const struct rt_sched *s, uint32_t i)
{
    if (!s->kvc->px || !s->prefix_of)
        return 0;
    struct rt_kv_prefix p;
    s->prefix_of(s->prefix_ctx, i, &p);
    return kvc_prefix_hit(s->kvc, &p);
}

uint32_t sched_dispatch(struct rt_sched *const *s, uint32_t n, uint32_t i, enum rt_dispatch d)
{
    assert(s && n >= 1 && (unsigned)d < RT_DISPATCH_COUNT);
    if (d == RT_DISPATCH_RR)
        return i % n;
    /* The tokens ahead of it there, plus its own prompt rows the replica's cache leaves to
       prefill: a held prefix wins until the holder's queue costs more than it saves. */
    uint32_t best = 0, best_held = 0;
    uint64_t best_cost = UINT64_MAX;
    for (uint32_t k = 0; k < n; k++) {
        const uint32_t held = d == RT_DISPATCH_PREFIX ? sched_count_held(s[k], i) : 0;
        const uint64_t saved = (uint64_t)held * s[k]->kvc->cfg.block_tokens;
        const uint64_t cost = sched_count_load(s[k]) + s[k]->reqs[i].input_len - saved;
        if (cost < best_cost || (cost == best_cost && held > best_held))
            best = k, best_held = held, best_cost = cost;
    }
    return best;
}
