/* SPDX-License-Identifier: MIT */
/*
 * Iteration planning (sched_next of rt/sched.h): admission and one planner per policy.
 *
 * Shared rules: admission is FCFS in arrival order (the first queued request that cannot be
 * admitted blocks the ones behind it), limited by max_batch, by the rows the policy leaves
 * for prompts and by the KV cache (NOMEM ends admission for this iteration). Each request
 * has at most one run per iteration; prefill runs come first. Before an iteration is
 * returned, every run's KV space is grown to cover its rows.
 *
 * Modelled: static batching, continuous batching (prefill first), Sarathi-style chunked
 * prefill, layered prefill (whole prompts or chunks, fixed or adaptive layer groups) and the
 * NPU paper's PD fusion (PD disaggregation is sched_pd.c). Not modelled: preemption,
 * priorities, pipeline stages, any cost model (the planners count rows, tokens and units, never time).
 */
#include <assert.h>
#include <string.h>

#include "npu_enums.h"
#include "rt/sched.h"

#define SCHED_NONE UINT32_MAX

static uint32_t min_u32(uint32_t a, uint32_t b)
{
    return a < b ? a : b;
}

/* ---- admission --------------------------------------------------------------------------- */

/* The oldest QUEUED request, SCHED_NONE if none. Everything before queue_first has left the
   queue (admitted or rejected), so the scan only ever moves forward. */
static uint32_t sched_queue_head(struct rt_sched *s)
{
    while (s->queue_first < s->next_arrival &&
           (!sched_owns(s, s->queue_first) || s->reqs[s->queue_first].state != RT_REQ_QUEUED))
        s->queue_first++;
    return s->queue_first < s->next_arrival ? s->queue_first : SCHED_NONE;
}

/* Request q's prompt hashes: none without prefix caching or a source. */
static void sched_prefix(const struct rt_sched *s, uint32_t q, struct rt_kv_prefix *p)
{
    *p = (struct rt_kv_prefix){ .input_len = s->reqs[q].input_len };
    if (s->kvc->px && s->prefix_of)
        s->prefix_of(s->prefix_ctx, q, p);
}

/* Admits request q if the batch and the KV cache allow it now. With prefix caching, the
   prompt's cached blocks count as prefilled (sched_prompt_left said how many). */
static bool sched_admit(struct rt_sched *s, uint32_t q)
{
    struct rt_request *r = &s->reqs[q];
    assert(r->state == RT_REQ_QUEUED);
    if (s->nrunning >= s->p.max_batch)
        return false;
    uint32_t hit = 0;
    struct rt_kv_prefix p;
    sched_prefix(s, q, &p);
    int rc = kvc_seq_admit_prefix(s->kvc, &r->kv, q, rt_request_max_len(r), &p, &hit);
    /* NPU_ERR_RANGE cannot happen: sched_arrive rejected what can never fit. */
    assert(rc == NPU_OK || rc == NPU_ERR_NOMEM);
    if (rc != NPU_OK)
        return false;
    r->prefilled = r->cached = hit * s->kvc->cfg.block_tokens;
    r->state = RT_REQ_RUNNING;
    s->running[s->nrunning++] = q;
    return true;
}

/* Prompt tokens queued request q would still have to prefill if admitted now. */
static uint32_t sched_prompt_left(const struct rt_sched *s, uint32_t q)
{
    struct rt_kv_prefix p;
    sched_prefix(s, q, &p);
    return s->reqs[q].input_len - kvc_prefix_hit(s->kvc, &p) * s->kvc->cfg.block_tokens;
}

static uint32_t sched_decoding_count(const struct rt_sched *s)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->nrunning; i++)
        n += rt_request_decoding(&s->reqs[s->running[i]]);
    return n;
}

/* ---- building a plan ----------------------------------------------------------------- */

static void plan_begin(const struct rt_sched *s, struct rt_iter_plan *it)
{
    memset(it, 0, sizeof(*it));
    it->layer1 = s->p.num_layers;
    it->groups = 1;
}

/* A prefill run of `count` prompt tokens from where the request's prompt stands. The
   iteration's layer range must already be set: the token comes only after the last layer. */
static void plan_prefill(const struct rt_sched *s, struct rt_iter_plan *it, uint32_t req,
                         uint32_t count)
{
    const struct rt_request *r = &s->reqs[req];
    assert(it->nruns == it->nprefill && it->nruns < RT_SCHED_RUNS_MAX);
    assert(count >= 1 && r->prefilled + count <= r->input_len);
    struct rt_run *run = &it->runs[it->nruns++];
    run->req = req;
    run->pos = r->prefilled;
    run->count = count;
    run->prefill = true;
    run->wants_token = run->pos + count == r->input_len && it->layer1 == s->p.num_layers;
    it->nprefill++;
    it->prefill_tokens += count;
}

/* Every request that has its whole prompt decodes one token, in admission order. */
static void plan_decodes(const struct rt_sched *s, struct rt_iter_plan *it)
{
    for (uint32_t i = 0; i < s->nrunning; i++) {
        const struct rt_request *r = &s->reqs[s->running[i]];
        if (!rt_request_decoding(r))
            continue;
        assert(it->nruns < RT_SCHED_RUNS_MAX && r->generated >= 1);
        struct rt_run *run = &it->runs[it->nruns++];
        run->req = s->running[i];
        run->pos = r->input_len + r->generated - 1;
        run->count = 1;
        run->prefill = false;
        run->wants_token = true;
        it->decode_tokens++;
    }
}

static bool plan_finish(struct rt_sched *s, struct rt_iter_plan *it)
{
    if (it->nruns == 0)
        return false;
    assert(it->prefill_tokens + it->decode_tokens <= s->p.max_tokens);
    assert(it->nruns <= s->p.max_batch && it->layer0 < it->layer1);
    for (uint32_t i = 0; i < it->nruns; i++) {
        const struct rt_run *run = &it->runs[i];
        kvc_seq_grow(s->kvc, &s->reqs[run->req].kv, run->pos + run->count);
    }
    return true;
}

/* Admits FCFS while each whole prompt (what the prefix cache leaves of it) fits `rows`;
   plans those prompts. Rows left. */
static uint32_t plan_admit_whole(struct rt_sched *s, struct rt_iter_plan *it, uint32_t rows)
{
    uint32_t q;
    while ((q = sched_queue_head(s)) != SCHED_NONE && sched_prompt_left(s, q) <= rows &&
           sched_admit(s, q)) {
        const struct rt_request *r = &s->reqs[q];
        rows -= r->input_len - r->prefilled;
        plan_prefill(s, it, q, r->input_len - r->prefilled);
    }
    return rows;
}

/* Up to `chunks` prompt chunks of at most `chunk` tokens, `tokens` in all: first the running
   requests still prefilling (admission order), then new admissions FCFS. */
static void plan_chunks(struct rt_sched *s, struct rt_iter_plan *it, uint32_t tokens,
                        uint32_t chunks, uint32_t chunk)
{
    uint32_t nold = s->nrunning, q;
    for (uint32_t i = 0; i < nold && tokens && chunks; i++) {
        const struct rt_request *r = &s->reqs[s->running[i]];
        if (r->prefilled == r->input_len)
            continue;
        uint32_t c = min_u32(min_u32(r->input_len - r->prefilled, chunk), tokens);
        plan_prefill(s, it, s->running[i], c);
        tokens -= c;
        chunks--;
    }
    while (tokens && chunks && (q = sched_queue_head(s)) != SCHED_NONE && sched_admit(s, q)) {
        const struct rt_request *r = &s->reqs[q];
        uint32_t c = min_u32(min_u32(r->input_len - r->prefilled, chunk), tokens);
        plan_prefill(s, it, q, c);
        tokens -= c;
        chunks--;
    }
}

/* ---- static, continuous, chunked, pd-fusion --------------------------------------------- */

/* A batch is formed only when the previous one has drained; its first iteration is all its
   prompts, the rest are its decodes. */
static void plan_static(struct rt_sched *s, struct rt_iter_plan *it)
{
    if (s->batch_open) {
        plan_decodes(s, it);
        return;
    }
    assert(s->nrunning == 0);
    plan_admit_whole(s, it, s->p.max_tokens);
    s->batch_open = it->nruns > 0;
}

/* Prefill first: new prompts (whole) get an iteration of their own; else everyone decodes. */
static void plan_continuous(struct rt_sched *s, struct rt_iter_plan *it)
{
    plan_admit_whole(s, it, s->p.max_tokens);
    if (it->nruns == 0)
        plan_decodes(s, it);
}

/* Sarathi-Serve: decodes first (init guarantees they fit the budget), prompt chunks in the
   rest of the budget. */
static void plan_chunked(struct rt_sched *s, struct rt_iter_plan *it)
{
    uint32_t budget = min_u32(s->p.chunk, s->p.max_tokens);
    uint32_t ndecode = sched_decoding_count(s);
    assert(ndecode <= budget);
    plan_chunks(s, it, budget - ndecode, UINT32_MAX, UINT32_MAX);
    plan_decodes(s, it);
}

/* The NPU paper, 4.3.2: a decode costs 1 unit (decodes first, init guarantees they fit), the
   remaining units buy whole chunks of prefill_units each; rows still bound the chunks. */
static void plan_pd_fusion(struct rt_sched *s, struct rt_iter_plan *it)
{
    uint32_t ndecode = sched_decoding_count(s);
    assert(ndecode <= s->p.budget && ndecode <= s->p.max_tokens);
    uint32_t chunks = (s->p.budget - ndecode) / s->p.prefill_units;
    plan_chunks(s, it, s->p.max_tokens - ndecode, chunks, s->p.chunk);
    plan_decodes(s, it);
}

/* ---- layered prefill --------------------------------------------------------------------- */

static uint32_t layered_groups(const struct rt_sched *s, uint32_t tokens)
{
    /* max(1, ceil(L / group_tokens)): a cycle has at least one prompt token */
    assert(tokens >= 1);
    uint32_t g = s->p.groups;
    if (g == 0)
        g = (uint32_t)(((uint64_t)tokens + s->p.group_tokens - 1) / s->p.group_tokens);
    return min_u32(g, s->p.num_layers);
}

/* Opens a cycle over the prefill runs planned into `tmp` (whose layer range is the whole
   model, so pos and count are final; wants_token is redone per group). */
static void layered_open(struct rt_sched *s, const struct rt_iter_plan *tmp)
{
    if (tmp->nprefill == 0)
        return;
    memcpy(s->lp_runs, tmp->runs, tmp->nprefill * sizeof(tmp->runs[0]));
    s->lp_nruns = tmp->nprefill;
    s->lp_group = 0;
    s->lp_groups = layered_groups(s, tmp->prefill_tokens);
}

/* layered: merge whole prompts FCFS while they and the running decodes fit the rows. */
static void layered_admit_whole(struct rt_sched *s, struct rt_iter_plan *tmp)
{
    plan_admit_whole(s, tmp, s->p.max_tokens - sched_decoding_count(s));
}

/* layered-chunked: the next chunk of the oldest request still prefilling, else new requests
   merged while their first chunks fit one chunk (and the rows the decodes leave). */
static void layered_admit_chunk(struct rt_sched *s, struct rt_iter_plan *tmp)
{
    uint32_t cap = min_u32(s->p.chunk, s->p.max_tokens - sched_decoding_count(s)), q;
    for (uint32_t i = 0; i < s->nrunning; i++) {
        const struct rt_request *r = &s->reqs[s->running[i]];
        if (r->prefilled < r->input_len) {
            plan_prefill(s, tmp, s->running[i], min_u32(r->input_len - r->prefilled, cap));
            return;
        }
    }
    while ((q = sched_queue_head(s)) != SCHED_NONE &&
           tmp->prefill_tokens + min_u32(sched_prompt_left(s, q), cap) <= cap &&
           sched_admit(s, q))
        plan_prefill(s, tmp, q, min_u32(s->reqs[q].input_len - s->reqs[q].prefilled, cap));
}

/* One layer group of the open cycle (same prefill runs every time), then every decode. A
   group g of G over N layers spans N / G layers, the first N % G groups one more. */
static void plan_layered(struct rt_sched *s, struct rt_iter_plan *it)
{
    if (s->lp_nruns == 0) {
        /* Plan the cycle's runs over the whole model, keep them, then replan the group. */
        if (s->p.kind == RT_SCHED_LAYERED)
            layered_admit_whole(s, it);
        else
            layered_admit_chunk(s, it);
        layered_open(s, it);
        plan_begin(s, it);
    }
    if (s->lp_nruns) {
        uint32_t n = s->p.num_layers, g = s->lp_group, groups = s->lp_groups;
        uint32_t base = n / groups, extra = n % groups;
        it->group = g;
        it->groups = groups;
        it->layer0 = g * base + min_u32(g, extra);
        it->layer1 = it->layer0 + base + (g < extra);
        for (uint32_t i = 0; i < s->lp_nruns; i++) {
            /* prefilled only moves after the last group: the runs stay identical */
            assert(s->lp_runs[i].pos == s->reqs[s->lp_runs[i].req].prefilled);
            plan_prefill(s, it, s->lp_runs[i].req, s->lp_runs[i].count);
        }
    }
    plan_decodes(s, it);
}

bool sched_next(struct rt_sched *s, struct rt_iter_plan *it)
{
    assert(s && it);
    plan_begin(s, it);
    switch (s->p.kind) {
    case RT_SCHED_STATIC:
        plan_static(s, it);
        break;
    case RT_SCHED_CONTINUOUS:
        plan_continuous(s, it);
        break;
    case RT_SCHED_CHUNKED:
        plan_chunked(s, it);
        break;
    case RT_SCHED_LAYERED:
    case RT_SCHED_LAYERED_CHUNKED:
        plan_layered(s, it);
        break;
    case RT_SCHED_PD_FUSION:
        plan_pd_fusion(s, it);
        break;
    default:
        assert(0 && "sched_next: policy not built");  /* sched_init refuses it */
        return false;
    }
    return plan_finish(s, it);
}
