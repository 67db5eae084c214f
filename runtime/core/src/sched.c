/* SPDX-License-Identifier: MIT */
/*
 * Iteration-level schedulers (rt/sched.h), the policy-independent part: parameters, the
 * arrival of requests (with the rejections that can be decided at once), the bookkeeping
 * after an iteration ran, and the policy names. The per-policy planning of an iteration
 * (sched_next) is in sched_policy.c.
 *
 * Modelled: FCFS queues in arrival (index) order, admission against max_batch, the rows of
 * an iteration and the KV cache, request lifetimes. Not modelled: preemption, priorities,
 * micro-batches over pipeline stages. PD disaggregation is sched_pd.c. Deterministic: no clock of
 * its own (the caller passes chip time), no randomness.
 */
#include "rt/sched.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "npu_enums.h"

static const char *const sched_names[RT_SCHED_KIND_COUNT] = {
    [RT_SCHED_STATIC] = "static",
    [RT_SCHED_CONTINUOUS] = "continuous",
    [RT_SCHED_CHUNKED] = "chunked",
    [RT_SCHED_LAYERED] = "layered",
    [RT_SCHED_LAYERED_CHUNKED] = "layered-chunked",
    [RT_SCHED_PD_FUSION] = "pd-fusion",
    [RT_SCHED_PD_DISAGG] = "pd-disagg",
};

const char *rt_sched_kind_name(enum rt_sched_kind k)
{
    assert((unsigned)k < RT_SCHED_KIND_COUNT);
    return (unsigned)k < RT_SCHED_KIND_COUNT ? sched_names[k] : "unknown";
}

int rt_sched_kind_parse(const char *name)
{
    for (int k = 0; name && k < (int)RT_SCHED_KIND_COUNT; k++)
        if (strcmp(name, sched_names[k]) == 0)
            return k;
    return -1;
}

/* ---- parameters ------------------------------------------------------------------------ */

static int sched_refuse(char *err, size_t errlen, const char *kind, const char *param,
                        uint32_t value, const char *must, uint32_t bound)
{
    if (err && errlen)
        snprintf(err, errlen, "%s: %s %u must be %s %u", kind, param, (unsigned)value, must,
                 (unsigned)bound);
    return NPU_ERR_INVAL;
}

/* What every policy needs: decodes of a full batch must fit one iteration's rows. */
static int sched_check_common(const struct rt_sched_params *p, const char *kind, char *err,
                              size_t errlen)
{
    if (p->num_layers < 1)
        return sched_refuse(err, errlen, kind, "num_layers", p->num_layers, ">=", 1);
    if (p->max_tokens < 1)
        return sched_refuse(err, errlen, kind, "max_tokens", p->max_tokens, ">=", 1);
    if (p->max_batch < 1)
        return sched_refuse(err, errlen, kind, "max_batch", p->max_batch, ">=", 1);
    if (p->max_batch > RT_SCHED_RUNNING_MAX)
        return sched_refuse(err, errlen, kind, "max_batch", p->max_batch, "<=",
                            RT_SCHED_RUNNING_MAX);
    if (p->max_batch > p->max_tokens)
        return sched_refuse(err, errlen, kind, "max_batch", p->max_batch, "<= max_tokens",
                            p->max_tokens);
    return NPU_OK;
}

static int sched_check_policy(const struct rt_sched_params *p, const char *kind, char *err,
                              size_t errlen)
{
    bool layered = p->kind == RT_SCHED_LAYERED || p->kind == RT_SCHED_LAYERED_CHUNKED;
    /* Stall-free decoding: every running request's decode fits the budget. */
    if (p->kind == RT_SCHED_CHUNKED && p->chunk < p->max_batch)
        return sched_refuse(err, errlen, kind, "chunk", p->chunk, ">= max_batch", p->max_batch);
    if ((p->kind == RT_SCHED_LAYERED_CHUNKED || p->kind == RT_SCHED_PD_FUSION) && p->chunk < 1)
        return sched_refuse(err, errlen, kind, "chunk", p->chunk, ">=", 1);
    if (layered && p->groups == 0 && p->group_tokens < 1)
        return sched_refuse(err, errlen, kind, "group_tokens (adaptive groups)",
                            p->group_tokens, ">=", 1);
    if (p->kind != RT_SCHED_PD_FUSION)
        return NPU_OK;
    if (p->prefill_units < 1)
        return sched_refuse(err, errlen, kind, "prefill_units", p->prefill_units, ">=", 1);
    if (p->budget < p->max_batch)
        return sched_refuse(err, errlen, kind, "budget", p->budget, ">= max_batch",
                            p->max_batch);
    /* Else a prefill could never be bought even with nothing decoding. */
    if (p->budget < p->prefill_units)
        return sched_refuse(err, errlen, kind, "budget", p->budget, ">= prefill_units",
                            p->prefill_units);
    return NPU_OK;
}

static void sched_take(struct rt_sched *s, uint32_t i);

int sched_init(struct rt_sched *s, const struct rt_sched_params *p, struct rt_request *reqs,
               uint32_t nreqs, struct rt_kvc *kvc, char *err, size_t errlen)
{
    assert(s && p && kvc && (reqs || nreqs == 0));
    if (err && errlen)
        err[0] = '\0';
    if ((unsigned)p->kind >= RT_SCHED_KIND_COUNT) {
        if (err && errlen)
            snprintf(err, errlen, "scheduler: unknown kind %u", (unsigned)p->kind);
        return NPU_ERR_INVAL;
    }
    if (p->kind == RT_SCHED_PD_DISAGG) {
        if (err && errlen)
            snprintf(err, errlen, "pd-disagg: planned by pd_init (rt/sched_pd.h)");
        return NPU_ERR_STATE;
    }
    const char *kind = sched_names[p->kind];
    int rc = sched_check_common(p, kind, err, errlen);
    if (rc == NPU_OK)
        rc = sched_check_policy(p, kind, err, errlen);
    if (rc != NPU_OK)
        return rc;
    memset(s, 0, sizeof(*s));
    s->p = *p;
    s->reqs = reqs;
    s->nreqs = nreqs;
    s->kvc = kvc;
    /* A request the loader already rejected (a bad token) keeps its reason and is skipped;
       every other one starts its life here. */
    if (p->replicas > 1 && p->replica >= p->replicas) {
        if (err && errlen)
            snprintf(err, errlen, "scheduler: replica %u of %u", p->replica, p->replicas);
        return NPU_ERR_INVAL;
    }
    for (uint32_t i = 0; i < nreqs; i++)
        if (sched_owns(s, i)) /* else another replica's, or not dealt yet */
            sched_take(s, i);
    return NPU_OK;
}

/* Request i is this scheduler's: counted, and its life starts (unless the loader rejected
   it). */
static void sched_take(struct rt_sched *s, uint32_t i)
{
    struct rt_request *r = &s->reqs[i];
    s->nown++;
    if (r->state == RT_REQ_REJECTED) {
        s->rejected++;
        return;
    }
    r->state = RT_REQ_FUTURE;
    r->reject = RT_REJECT_NONE;
    r->prefilled = r->generated = r->cached = 0;
    memset(&r->kv, 0, sizeof(r->kv));
    r->kv.head = r->kv.tail = RT_KVC_NONE;
    r->kv.ring_row = RT_KVC_NO_RING;
}

void sched_accept_request(struct rt_sched *s, uint32_t i)
{
    assert(s && i < s->nreqs && i >= s->next_arrival && sched_owns(s, i));
    sched_take(s, i);
}

void sched_prefix_source(struct rt_sched *s, rt_sched_prefix_fn fn, const void *ctx)
{
    assert(s);
    s->prefix_of = fn;
    s->prefix_ctx = ctx;
}

/* ---- arrivals ---------------------------------------------------------------------------- */

/* Policies that run every prompt whole in one iteration. */
static bool sched_whole_prompts(const struct rt_sched *s)
{
    return s->p.kind == RT_SCHED_STATIC || s->p.kind == RT_SCHED_CONTINUOUS ||
           s->p.kind == RT_SCHED_LAYERED;
}

static enum rt_reject_reason sched_reject_reason(const struct rt_sched *s,
                                                 const struct rt_request *r, uint32_t max_seq)
{
    enum rt_reject_reason why = rt_request_shape_reject(r, max_seq);
    if (why != RT_REJECT_NONE)
        return why;
    if (!kvc_seq_fits_ever(s->kvc, rt_request_max_len(r)))
        return RT_REJECT_KV_NEVER;
    if (sched_whole_prompts(s) && r->input_len > s->p.max_tokens)
        return RT_REJECT_PROMPT_ROWS;
    return RT_REJECT_NONE;
}

uint32_t sched_arrive(struct rt_sched *s, uint64_t now_ps, uint32_t max_seq)
{
    uint32_t n = 0;
    /* Arrivals are in index order: the first one in the future stops the scan. */
    while (s->next_arrival < s->nreqs && s->reqs[s->next_arrival].arrival_ps <= now_ps) {
        const uint32_t i = s->next_arrival++;
        struct rt_request *r = &s->reqs[i];
        assert(!s->p.owner || s->p.owner[i] != RT_SCHED_UNDEALT); /* dealt on arrival */
        if (!sched_owns(s, i))
            continue; /* another replica's scheduler takes it */
        n++;
        if (r->state != RT_REQ_FUTURE)
            continue;  /* rejected by the loader, counted at init */
        r->reject = sched_reject_reason(s, r, max_seq);
        if (r->reject == RT_REJECT_NONE) {
            r->state = RT_REQ_QUEUED;
        } else {
            r->state = RT_REQ_REJECTED;
            s->rejected++;
        }
    }
    return n;
}

uint64_t sched_next_arrival_ps(const struct rt_sched *s)
{
    uint32_t i = s->next_arrival;
    /* round robin: at most replicas - 1 steps; dealt: past the others' requests */
    while (i < s->nreqs && !sched_may_own(s, i))
        i++;
    return i < s->nreqs ? s->reqs[i].arrival_ps : UINT64_MAX;
}

/* ---- after an iteration ------------------------------------------------------------------ */

/* Finished requests give their KV space back and leave running[] (order kept). */
static void sched_retire_finished(struct rt_sched *s)
{
    uint32_t kept = 0;
    for (uint32_t i = 0; i < s->nrunning; i++) {
        struct rt_request *r = &s->reqs[s->running[i]];
        if (r->generated < r->output_len) {
            s->running[kept++] = s->running[i];
            continue;
        }
        r->state = RT_REQ_FINISHED;
        kvc_seq_free(s->kvc, &r->kv);
        s->finished++;
    }
    s->nrunning = kept;
}

void sched_complete(struct rt_sched *s, const struct rt_iter_plan *it)
{
    assert(s && it && it->nprefill <= it->nruns && it->nruns <= RT_SCHED_RUNS_MAX);
    /* Prompt rows count once their KV is written in every layer: after the last group. */
    bool all_layers = it->layer1 == s->p.num_layers;
    for (uint32_t i = 0; i < it->nruns; i++) {
        const struct rt_run *run = &it->runs[i];
        struct rt_request *r = &s->reqs[run->req];
        assert(run->req < s->nreqs && r->state == RT_REQ_RUNNING);
        if (run->prefill && all_layers) {
            assert(run->pos == r->prefilled && r->prefilled + run->count <= r->input_len);
            r->prefilled += run->count;
            /* Its prompt so far is in the cache in every layer: the whole blocks of it can
               serve other prompts (vLLM caches a block once it is full, likewise). */
            if (s->kvc->px && s->prefix_of) {
                struct rt_kv_prefix p;
                s->prefix_of(s->prefix_ctx, run->req, &p);
                kvc_seq_publish_upto(s->kvc, &r->kv, &p, r->prefilled);
            }
        }
        if (run->wants_token) {
            assert(r->generated < r->output_len);
            r->generated++;
        }
    }
    sched_retire_finished(s);
    if (s->lp_nruns && it->nprefill) {
        assert(it->group == s->lp_group && it->groups == s->lp_groups);
        if (++s->lp_group == s->lp_groups)
            s->lp_nruns = s->lp_group = s->lp_groups = 0;  /* the cycle ends */
    }
    if (s->batch_open && s->nrunning == 0)
        s->batch_open = false;
    s->iterations++;
}

bool sched_done(const struct rt_sched *s)
{
    return s->finished + s->rejected == s->nown;
}

uint32_t sched_queue_len(const struct rt_sched *s)
{
    if (s->p.replicas <= 1)
        return rt_requests_queued(s->reqs, s->queue_first, s->next_arrival);
    uint32_t n = 0;
    for (uint32_t i = s->queue_first; i < s->next_arrival; i++)
        n += sched_owns(s, i) && s->reqs[i].state == RT_REQ_QUEUED;
    return n;
}
