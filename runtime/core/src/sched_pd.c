/* SPDX-License-Identifier: MIT */
/*
 * PD disaggregation (rt/sched_pd.h): one FCFS queue of arrived requests feeds the prefill
 * instances, one FIFO of prefilled requests feeds the decode instances. Each instance has
 * its own KV cache; a request holds its prompt's blocks on the prefill side until the
 * decode instance's iteration that pulled them completes, so a prompt's KV is never freed
 * before it is copied. Deterministic: no clock of its own, no randomness.
 */
#include "rt/sched_pd.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "npu_enums.h"

void rt_pd_roles(uint32_t instances, uint32_t prefill_instances, enum rt_pd_role *roles)
{
    for (uint32_t i = 0; i < instances; i++)
        roles[i] = RT_PD_DECODE;
    for (uint32_t k = 0; k < prefill_instances && k < instances; k++)
        roles[k % 2 ? instances - 1 - k / 2 : k / 2] = RT_PD_PREFILL; /* 0, n-1, 1, n-2 ... */
}

static int pd_refuse(char *err, size_t errlen, const char *what, uint32_t v, uint32_t lo,
                     uint32_t hi)
{
    if (err && errlen)
        snprintf(err, errlen, "pd-disagg: %s %u must be in [%u, %u]", what, (unsigned)v,
                 (unsigned)lo, (unsigned)hi);
    return NPU_ERR_INVAL;
}

static int pd_check(const struct rt_pd_params *p, char *err, size_t errlen)
{
    if (p->instances < 2 || p->instances > RT_PD_INSTANCES_MAX)
        return pd_refuse(err, errlen, "instances (npuctl --instances)", p->instances, 2,
                         RT_PD_INSTANCES_MAX);
    if (p->prefill_instances < 1 || p->prefill_instances >= p->instances)
        return pd_refuse(err, errlen, "prefill instances", p->prefill_instances, 1,
                         p->instances - 1);
    if (p->num_layers < 1)
        return pd_refuse(err, errlen, "num_layers", p->num_layers, 1, UINT32_MAX);
    if (p->max_tokens < 1)
        return pd_refuse(err, errlen, "max_tokens", p->max_tokens, 1, UINT32_MAX);
    if (p->max_batch < 1 || p->max_batch > RT_SCHED_RUNNING_MAX || p->max_batch > p->max_tokens)
        return pd_refuse(err, errlen, "max_batch", p->max_batch, 1,
                         p->max_tokens < RT_SCHED_RUNNING_MAX ? p->max_tokens
                                                              : RT_SCHED_RUNNING_MAX);
    if (p->chunk < 1 || p->chunk > p->max_tokens)
        return pd_refuse(err, errlen, "chunk", p->chunk, 1, p->max_tokens);
    return NPU_OK;
}

int pd_init(struct rt_pd *pd, const struct rt_pd_params *p, struct rt_request *reqs,
            uint32_t nreqs, struct rt_kvc *const *kvcs, struct rt_kv_seq *pkv, uint8_t *pinst,
            uint8_t *dinst, uint32_t *ready, char *err, size_t errlen)
{
    assert(pd && p && kvcs && (nreqs == 0 || (reqs && pkv && pinst && dinst && ready)));
    if (err && errlen)
        err[0] = '\0';
    int rc = pd_check(p, err, errlen);
    if (rc != NPU_OK)
        return rc;
    memset(pd, 0, sizeof(*pd));
    pd->p = *p;
    pd->reqs = reqs, pd->nreqs = nreqs, pd->pkv = pkv, pd->pinst = pinst, pd->dinst = dinst;
    pd->ready = ready;
    enum rt_pd_role roles[RT_PD_INSTANCES_MAX];
    rt_pd_roles(p->instances, p->prefill_instances, roles);
    for (uint32_t i = 0; i < p->instances; i++)
        pd->inst[i] = (struct rt_pd_inst){ .role = roles[i], .kvc = kvcs[i] };
    for (uint32_t i = 0; i < nreqs; i++) {
        struct rt_request *r = &reqs[i];
        if (r->state == RT_REQ_REJECTED) { /* by the loader: keeps its reason */
            pd->rejected++;
            continue;
        }
        r->state = RT_REQ_FUTURE, r->reject = RT_REJECT_NONE;
        r->prefilled = r->generated = r->cached = 0;
        memset(&r->kv, 0, sizeof(r->kv));
        r->kv.head = r->kv.tail = RT_KVC_NONE, r->kv.ring_row = RT_KVC_NO_RING;
        pkv[i] = r->kv;
        pinst[i] = dinst[i] = UINT8_MAX;
    }
    return NPU_OK;
}

/* ---- arrivals ---------------------------------------------------------------------------- */

/* Whether some instance of `role` could ever hold len positions (all are alike). */
static bool pd_fits_ever(const struct rt_pd *pd, enum rt_pd_role role, uint32_t len)
{
    for (uint32_t i = 0; i < pd->p.instances; i++)
        if (pd->inst[i].role == role)
            return kvc_seq_fits_ever(pd->inst[i].kvc, len);
    return false;
}

static enum rt_reject_reason pd_reject_reason(const struct rt_pd *pd, const struct rt_request *r,
                                              uint32_t max_seq)
{
    enum rt_reject_reason why = rt_request_shape_reject(r, max_seq);
    if (why != RT_REJECT_NONE)
        return why;
    if (!pd_fits_ever(pd, RT_PD_PREFILL, r->input_len) ||
        !pd_fits_ever(pd, RT_PD_DECODE, rt_request_max_len(r)))
        return RT_REJECT_KV_NEVER;
    return RT_REJECT_NONE;
}

uint32_t pd_arrive(struct rt_pd *pd, uint64_t now_ps, uint32_t max_seq)
{
    uint32_t n = 0;
    while (pd->next_arrival < pd->nreqs && pd->reqs[pd->next_arrival].arrival_ps <= now_ps) {
        struct rt_request *r = &pd->reqs[pd->next_arrival++];
        n++;
        if (r->state != RT_REQ_FUTURE)
            continue;
        r->reject = pd_reject_reason(pd, r, max_seq);
        r->state = r->reject == RT_REJECT_NONE ? RT_REQ_QUEUED : RT_REQ_REJECTED;
        pd->rejected += r->state == RT_REQ_REJECTED;
    }
    return n;
}

uint64_t pd_next_arrival_ps(const struct rt_pd *pd)
{
    return pd->next_arrival < pd->nreqs ? pd->reqs[pd->next_arrival].arrival_ps : UINT64_MAX;
}

/* ---- planning ---------------------------------------------------------------------------- */

void pd_prefix_source(struct rt_pd *pd, rt_sched_prefix_fn fn, const void *ctx)
{
    assert(pd);
    pd->prefix_of = fn, pd->prefix_ctx = ctx;
}

/* Request id's prompt hashes (none without prefix caching). */
static void pd_prefix(const struct rt_pd *pd, uint32_t id, struct rt_kv_prefix *p)
{
    *p = (struct rt_kv_prefix){ .input_len = pd->reqs[id].input_len };
    if (pd->prefix_of)
        pd->prefix_of(pd->prefix_ctx, id, p);
}

/* Whether a prefill instance after i, idle with a free batch slot and the KV room to admit
   prompt p now (it is asked next this round), holds more of it than i does: then it takes
   the queue's head. */
static bool pd_later_holds_more(const struct rt_pd *pd, uint32_t i,
                                const struct rt_kv_prefix *p)
{
    if (!pd->prefix_of || !p->hash)
        return false;
    const uint32_t mine = kvc_prefix_hit(pd->inst[i].kvc, p);
    for (uint32_t j = i + 1; j < pd->p.instances; j++) {
        const struct rt_pd_inst *o = &pd->inst[j];
        if (o->role == RT_PD_PREFILL && !o->busy && o->nrunning < pd->p.max_batch &&
            kvc_prefix_hit(o->kvc, p) > mine && kvc_seq_can_admit(o->kvc, p->input_len, p))
            return true;
    }
    return false;
}

/* Prefill instance i admits queued requests in order while its batch and cache allow. */
static void pd_admit_prefill(struct rt_pd *pd, uint32_t i)
{
    struct rt_pd_inst *in = &pd->inst[i];
    while (pd->queue_first < pd->next_arrival && in->nrunning < pd->p.max_batch) {
        uint32_t id = pd->queue_first, hit = 0;
        struct rt_request *r = &pd->reqs[id];
        if (r->state != RT_REQ_QUEUED) {
            pd->queue_first++;
            continue;
        }
        struct rt_kv_prefix p;
        pd_prefix(pd, id, &p);
        if (pd_later_holds_more(pd, i, &p) ||
            kvc_seq_admit_prefix(in->kvc, &pd->pkv[id], id, r->input_len, &p, &hit) != NPU_OK)
            return; /* first come first served: the head waits, so does the rest */
        r->prefilled = r->cached = hit * in->kvc->cfg.block_tokens;
        r->state = RT_REQ_RUNNING;
        pd->pinst[id] = (uint8_t)i;
        in->running[in->nrunning++] = id;
        pd->queue_first++;
    }
}

static void pd_plan_prefill(struct rt_pd *pd, uint32_t i, struct rt_iter_plan *it)
{
    struct rt_pd_inst *in = &pd->inst[i];
    uint32_t budget = pd->p.chunk;
    for (uint32_t k = 0; k < in->nrunning && budget > 0; k++) {
        uint32_t id = in->running[k];
        struct rt_request *r = &pd->reqs[id];
        uint32_t n = r->input_len - r->prefilled;
        n = n < budget ? n : budget;
        kvc_seq_grow(in->kvc, &pd->pkv[id], r->prefilled + n);
        it->runs[it->nruns++] = (struct rt_run){ .req = id, .pos = r->prefilled, .count = n,
                                                 .prefill = true,
                                                 .wants_token = r->prefilled + n ==
                                                                r->input_len };
        it->prefill_tokens += n, budget -= n;
    }
    it->nprefill = it->nruns;
}

/* Decode instance i admits prefilled requests in the order their prefill ended. */
static void pd_admit_decode(struct rt_pd *pd, uint32_t i)
{
    struct rt_pd_inst *in = &pd->inst[i];
    while (pd->ready_count > 0 && in->nrunning < pd->p.max_batch) {
        uint32_t id = pd->ready[pd->ready_first];
        struct rt_request *r = &pd->reqs[id];
        if (kvc_seq_admit(in->kvc, &r->kv, id, rt_request_max_len(r)) != NPU_OK)
            return;
        pd->dinst[id] = (uint8_t)i;
        in->running[in->nrunning++] = id;
        pd->ready_first = (pd->ready_first + 1) % pd->nreqs, pd->ready_count--;
    }
}

static void pd_plan_decode(struct rt_pd *pd, uint32_t i, struct rt_iter_plan *it)
{
    struct rt_pd_inst *in = &pd->inst[i];
    for (uint32_t k = 0; k < in->nrunning; k++) {
        uint32_t id = in->running[k];
        struct rt_request *r = &pd->reqs[id];
        uint32_t pos = r->input_len + r->generated - 1; /* the newest token's position */
        bool pull = r->kv.len == 0;
        kvc_seq_grow(in->kvc, &r->kv, pos + 1);
        it->runs[it->nruns++] = (struct rt_run){ .req = id, .pos = pos, .count = 1,
                                                 .wants_token = true, .pull = pull };
        it->decode_tokens++;
    }
}

bool pd_next(struct rt_pd *pd, uint32_t i, struct rt_iter_plan *it)
{
    assert(i < pd->p.instances);
    struct rt_pd_inst *in = &pd->inst[i];
    if (in->busy)
        return false;
    memset(it, 0, sizeof(*it));
    it->layer1 = pd->p.num_layers, it->groups = 1;
    if (in->role == RT_PD_PREFILL) {
        pd_admit_prefill(pd, i);
        pd_plan_prefill(pd, i, it);
    } else {
        pd_admit_decode(pd, i);
        pd_plan_decode(pd, i, it);
    }
    in->busy = it->nruns > 0;
    return in->busy;
}

/* ---- after an iteration ------------------------------------------------------------------ */

static void pd_finish(struct rt_pd *pd, struct rt_request *r)
{
    r->state = RT_REQ_FINISHED;
    pd->finished++;
}

/* Leaves instance i's running list (order kept). */
static void pd_leave(struct rt_pd_inst *in, uint32_t id)
{
    uint32_t kept = 0;
    for (uint32_t k = 0; k < in->nrunning; k++)
        if (in->running[k] != id)
            in->running[kept++] = in->running[k];
    in->nrunning = kept;
}

static void pd_complete_prefill(struct rt_pd *pd, uint32_t i, const struct rt_run *run)
{
    struct rt_request *r = &pd->reqs[run->req];
    assert(run->prefill && run->pos == r->prefilled && run->pos + run->count <= r->input_len);
    r->prefilled += run->count;
    if (pd->prefix_of && pd->inst[i].kvc->px) { /* the chunk is written: publish it */
        struct rt_kv_prefix p;
        pd_prefix(pd, run->req, &p);
        kvc_seq_publish_upto(pd->inst[i].kvc, &pd->pkv[run->req], &p, r->prefilled);
    }
    if (!run->wants_token)
        return;
    r->generated = 1;
    pd_leave(&pd->inst[i], run->req);
    if (r->output_len == 1) { /* nothing to decode: the prompt's cache goes at once */
        kvc_seq_free(pd->inst[i].kvc, &pd->pkv[run->req]);
        pd_finish(pd, r);
        return;
    }
    pd->ready[(pd->ready_first + pd->ready_count++) % pd->nreqs] = run->req;
}

static void pd_complete_decode(struct rt_pd *pd, uint32_t i, const struct rt_run *run)
{
    struct rt_request *r = &pd->reqs[run->req];
    assert(!run->prefill && run->wants_token && r->generated < r->output_len);
    if (run->pull) /* copied: the prefill side's blocks are free to reuse */
        kvc_seq_free(pd->inst[pd->pinst[run->req]].kvc, &pd->pkv[run->req]);
    if (++r->generated < r->output_len)
        return;
    kvc_seq_free(pd->inst[i].kvc, &r->kv);
    pd_leave(&pd->inst[i], run->req);
    pd_finish(pd, r);
}

void pd_complete(struct rt_pd *pd, uint32_t i, const struct rt_iter_plan *it)
{
    assert(i < pd->p.instances && pd->inst[i].busy);
    for (uint32_t k = 0; k < it->nruns; k++) {
        assert(pd->reqs[it->runs[k].req].state == RT_REQ_RUNNING);
        if (pd->inst[i].role == RT_PD_PREFILL)
            pd_complete_prefill(pd, i, &it->runs[k]);
        else
            pd_complete_decode(pd, i, &it->runs[k]);
    }
    pd->inst[i].busy = false;
    pd->iterations++;
}

bool pd_done(const struct rt_pd *pd)
{
    return pd->finished + pd->rejected == pd->nreqs;
}

uint32_t pd_queue_len(const struct rt_pd *pd)
{
    return rt_requests_queued(pd->reqs, pd->queue_first, pd->next_arrival);
}
