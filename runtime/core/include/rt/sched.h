/* SPDX-License-Identifier: MIT */
/*
 * Iteration-level schedulers (docs/serving.md, "Schedulers"). One is chosen per run. Each
 * iteration the control core lets arrived requests join (sched_arrive), asks for the next
 * iteration (sched_next), runs it on the cores, and reports it done (sched_complete).
 *
 * An iteration is a list of runs (one request's rows: a prompt, a chunk of one, or one
 * decode token). Prefill runs come first (rows [0, P) of the iteration) and run the layers
 * [layer0, layer1); decode runs follow and run every layer. Only layered prefill uses a
 * layer range narrower than the model: its prefill runs stay the same, in the same order,
 * for the N_lg iterations of one layer-group cycle, so their residual rows persist.
 *
 *   static      batches of up to max_batch queued requests; a batch runs to completion
 *               (whole prompts, then decodes) before the next is formed
 *   continuous  Orca/vLLM-style, prefill first: an iteration with newly admitted prompts
 *               runs only those (whole); otherwise every running request decodes
 *   chunked     Sarathi-Serve: token budget `chunk` per iteration, decodes first, then
 *               prompt chunks of the remaining budget, first come first served
 *   layered     layered prefill (layered-prefill paper, section 4): the admitted prompts'
 *               prefill runs one layer group per iteration while every running request
 *               decodes; N_lg fixed (`groups`) or adaptive max(1, ceil(L / group_tokens));
 *               concurrent prompts merged while they fit the iteration's rows
 *   layered-chunked  layered within each chunk of `chunk` tokens
 *   pd-fusion   the NPU paper, section 4.3.2: budget units per iteration, a decode costs 1,
 *               a prefill chunk of `chunk` tokens costs `prefill_units`; decodes first
 *   pd-disagg   prefill and decode on different instances of the plan: rt/sched_pd.h
 * Pipeline stages are the cores' business (docs/images.md): a plan's stages run every
 * iteration one after another, and layered prefill works whether its groups coincide with
 * the stages or not. Not built: overlapping iterations or micro-batches over the stages.
 */
#ifndef RT_SCHED_H
#define RT_SCHED_H

#include <stdbool.h>
#include <stdint.h>

#include "npu_image.h"
#include "rt/kvc.h"
#include "rt/request.h"

#define RT_SCHED_RUNS_MAX NPU_IMAGE_RUNS_MAX /* runs per iteration (npu_image.h) */
#define RT_SCHED_RUNNING_MAX NPU_BATCH_MAX  /* requests running at once */

enum rt_sched_kind {
    RT_SCHED_STATIC,
    RT_SCHED_CONTINUOUS,
    RT_SCHED_CHUNKED,
    RT_SCHED_LAYERED,
    RT_SCHED_LAYERED_CHUNKED,
    RT_SCHED_PD_FUSION,
    RT_SCHED_PD_DISAGG,
    RT_SCHED_KIND_COUNT,
};

/* "static", "continuous", "chunked", "layered", "layered-chunked", "pd-fusion",
   "pd-disagg"; and back (-1 if unknown). */
const char *rt_sched_kind_name(enum rt_sched_kind k);
int rt_sched_kind_parse(const char *name);

struct rt_sched_params {
    enum rt_sched_kind kind;
    uint32_t num_layers;     /* the model's */
    uint32_t max_batch;      /* requests running at once (<= RT_SCHED_RUNNING_MAX) */
    uint32_t max_tokens;     /* rows of one iteration (the image's plan) */
    uint32_t chunk;          /* chunked: token budget; layered-chunked: chunk size;
                                pd-fusion: tokens of one prefill chunk */
    uint32_t groups;         /* layered: N_lg, 0 = adaptive */
    uint32_t group_tokens;   /* layered, adaptive: N_lg(L) = max(1, ceil(L / group_tokens)) */
    uint32_t budget;         /* pd-fusion: units per iteration */
    uint32_t prefill_units;  /* pd-fusion: units of one prefill chunk */
    /* Attention/expert disaggregation (docs/serving.md, "Disaggregated experts"): this
       scheduler is replica `replica` of `replicas` and schedules request i only when
       i mod replicas == replica (the others are the other replicas'), or, with `owner`,
       when owner[i] == replica: a dispatcher deals each request at its arrival
       (sched_dispatch), RT_SCHED_UNDEALT before. 0 or 1 replicas: every request. */
    uint32_t replica, replicas;
    const uint8_t *owner;    /* [nreqs] or NULL */
};

#define RT_SCHED_UNDEALT 0xffu

/* How a dispatcher deals arriving requests to replicas (sched_dispatch). */
enum rt_dispatch {
    RT_DISPATCH_RR,      /* request i to replica i mod replicas (no owner array) */
    RT_DISPATCH_LOAD,    /* to the replica with the fewest tokens left to run */
    RT_DISPATCH_PREFIX,  /* to the replica with the least load plus uncached prompt */
    RT_DISPATCH_COUNT,
};
/* "rr", "load", "prefix"; and back (-1 if unknown). */
const char *rt_dispatch_name(enum rt_dispatch d);
int rt_dispatch_parse(const char *name);

/* One run of an iteration. */
struct rt_run {
    uint32_t req;            /* index into the request array */
    uint32_t pos, count;     /* positions [pos, pos + count) */
    bool prefill;            /* prompt rows (else one decode row) */
    bool wants_token;        /* its last row gives a token this iteration */
    bool pull;               /* pd-disagg: first decode on this instance; its prompt's KV
                                comes from its prefill instance first (rt/sched_pd.h) */
};

struct rt_iter_plan {
    struct rt_run runs[RT_SCHED_RUNS_MAX];
    uint32_t nruns, nprefill;    /* runs [0, nprefill) are prefill runs */
    uint32_t layer0, layer1;     /* the prefill runs' layers [layer0, layer1) */
    uint32_t group, groups;      /* layered: this iteration's group of N_lg (else 0 of 1) */
    uint32_t prefill_tokens, decode_tokens;
};

/* Request req's prompt hashes, for prefix caching (the control core reads them from the
   trace blob). */
typedef void (*rt_sched_prefix_fn)(const void *ctx, uint32_t req, struct rt_kv_prefix *p);

struct rt_sched {
    struct rt_sched_params p;
    rt_sched_prefix_fn prefix_of;   /* NULL: no prompt has hashes */
    const void *prefix_ctx;
    struct rt_request *reqs;     /* all requests, in arrival order */
    uint32_t nreqs;
    uint32_t nown;               /* of them, this scheduler's (sched_owns) */
    struct rt_kvc *kvc;
    uint32_t next_arrival;       /* first request not yet arrived */
    uint32_t queue_first;        /* first request that may still be QUEUED (FCFS) */
    uint32_t running[RT_SCHED_RUNNING_MAX]; /* admitted, in admission order */
    uint32_t nrunning;
    uint32_t finished, rejected;
    /* static: the current batch is running; no admission until it drains */
    bool batch_open;
    /* layered: the current cycle's prefill runs, group and group count */
    struct rt_run lp_runs[RT_SCHED_RUNS_MAX];
    uint32_t lp_nruns, lp_group, lp_groups;
    /* iterations planned, for the tests' and the trace's sake */
    uint64_t iterations;
};

/* 0; NPU_ERR_INVAL with a message in err for bad parameters (zero chunk for a chunked
   policy, budget below prefill_units, ...); NPU_ERR_STATE for pd-disagg, which has its
   own scheduler (rt/sched_pd.h). */
int sched_init(struct rt_sched *s, const struct rt_sched_params *p, struct rt_request *reqs,
               uint32_t nreqs, struct rt_kvc *kvc, char *err, size_t errlen);

/* Prefix caching (the KV cache has a prefix index, kvc_prefix_attach): where the requests'
   prompt hashes come from. A request admitted with a cached prefix starts with those
   positions prefilled (rt_request.cached); its prompt's blocks, once prefilled, are published
   for later ones. Call after sched_init. */
void sched_prefix_source(struct rt_sched *s, rt_sched_prefix_fn fn, const void *ctx);

/* Requests whose arrival_ps <= now_ps become QUEUED, or REJECTED at once if they can never
   run (empty, too long for the KV cache, a whole prompt passing max_tokens where the policy
   needs whole prompts). Returns how many arrived. max_seq: the image's longest sequence. */
uint32_t sched_arrive(struct rt_sched *s, uint64_t now_ps, uint32_t max_seq);

/* Whether request i is this scheduler's (rt_sched_params.replica). */
static inline bool sched_owns(const struct rt_sched *s, uint32_t i)
{
    if (s->p.replicas <= 1)
        return true;
    return s->p.owner ? s->p.owner[i] == s->p.replica : i % s->p.replicas == s->p.replica;
}

/* Whether request i is, or may be dealt to, this scheduler. */
static inline bool sched_may_own(const struct rt_sched *s, uint32_t i)
{
    return sched_owns(s, i) || (s->p.owner && s->p.owner[i] == RT_SCHED_UNDEALT);
}

/* The replica a dispatcher of policy d deals request i to, among the n schedulers s[] of
   one request array (replica k is s[k]): load, the fewest tokens left to run there (its
   queued, dealt and running requests' prompt and output tokens still to come); prefix, the
   least of that plus i's prompt tokens the replica's prefix index does not hold
   (kvc_prefix_hit), ties to the one holding more; then the lowest index. The caller sets
   the owner array and calls sched_accept_request. */
uint32_t sched_dispatch(struct rt_sched *const *s, uint32_t n, uint32_t i, enum rt_dispatch d);
/* Request i (undealt, not yet arrived for s) is s's now. */
void sched_accept_request(struct rt_sched *s, uint32_t i);

/* Chip time of the next arrival, UINT64_MAX if every request has arrived. */
uint64_t sched_next_arrival_ps(const struct rt_sched *s);

/* Admits what the policy and the KV cache allow and plans the next iteration into it (KV
   space grown for its rows). false if there is nothing to run now. */
bool sched_next(struct rt_sched *s, struct rt_iter_plan *it);

/* The iteration ran: advances prompts and layer groups, counts tokens (wants_token runs
   produced one each), finishes requests and frees their KV space. */
void sched_complete(struct rt_sched *s, const struct rt_iter_plan *it);

/* Every request FINISHED or REJECTED. */
bool sched_done(const struct rt_sched *s);

/* Requests QUEUED now (arrived, not admitted). */
uint32_t sched_queue_len(const struct rt_sched *s);

#endif
