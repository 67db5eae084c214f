/* SPDX-License-Identifier: MIT */
/*
 * PD disaggregation (docs/serving.md, "PD disaggregation"; the NPU paper, section 4.3.1):
 * the image's instances (npu_plan.instances) are split into prefill instances and decode
 * instances, each running its own iterations concurrently with the others.
 *
 *   prefill instance  admits queued requests first come first served (its KV cache holds
 *                     the prompt) and runs chunked prefill: up to `chunk` prompt rows per
 *                     iteration, oldest first; a prompt's last chunk gives the first token
 *   decode instance   admits prefilled requests in the order their prefill ended (its KV
 *                     cache reserves prompt + output); an admitted request's first decode
 *                     run carries a pull: the decode cores copy the prompt's KV from the
 *                     prefill instance's cores over the NoC before the layers run, and the
 *                     prefill instance's blocks are freed when that iteration completes;
 *                     every running request decodes every iteration (stall-free)
 *
 * Placement (which instance is which) is the caller's: npu_plan's instances are bands of
 * columns, and rt_pd_roles gives the bands at the two sides to prefill and the centre to
 * decode, as the paper's PP-prioritised placement does. Decode cores with other engine
 * sizes are the chip's business (npuctl serve --decode-cores writes the chip file), not the
 * scheduler's.
 *
 * Prefix caching (pd_prefix_source; each prefill instance's cache with a prefix index): a
 * prompt admitted by a prefill instance starts at the blocks that instance's index holds,
 * its blocks are published there chunk by chunk (before the pull frees its own hold),
 * and the pull copies the shared blocks with the rest. The queue's head goes to the prefill
 * instance that holds most of its prefix among those free to take it now (Mooncake's
 * cache-aware choice, without its estimate of the queueing delay).
 * Not modelled: instances of different shapes, KV transfer overlapped with the decode
 * iteration before it.
 */
#ifndef RT_SCHED_PD_H
#define RT_SCHED_PD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rt/kvc.h"
#include "rt/request.h"
#include "rt/sched.h"

#define RT_PD_INSTANCES_MAX 8u

enum rt_pd_role { RT_PD_PREFILL, RT_PD_DECODE };

struct rt_pd_params {
    uint32_t num_layers;
    uint32_t max_batch, max_tokens; /* per instance (the image's plan) */
    uint32_t chunk;                 /* prompt rows per prefill iteration (<= max_tokens) */
    uint32_t instances;             /* 2..RT_PD_INSTANCES_MAX */
    uint32_t prefill_instances;     /* 1..instances - 1 */
};

struct rt_pd_inst {
    enum rt_pd_role role;
    struct rt_kvc *kvc;             /* this instance's cache (every core of it alike) */
    uint32_t running[RT_SCHED_RUNNING_MAX]; /* admitted here, in admission order */
    uint32_t nrunning;
    bool busy;                      /* an iteration is planned and not complete */
};

struct rt_pd {
    struct rt_pd_params p;
    struct rt_request *reqs;        /* r->kv: the request's cache on its decode instance */
    uint32_t nreqs;
    struct rt_kv_seq *pkv;          /* [nreqs]: the prompt's cache on its prefill instance */
    uint8_t *pinst, *dinst;         /* [nreqs]: its prefill and decode instances */
    uint32_t *ready;                /* [nreqs]: prefilled, waiting for a decode instance */
    uint32_t ready_first, ready_count;
    uint32_t next_arrival, queue_first;
    struct rt_pd_inst inst[RT_PD_INSTANCES_MAX];
    uint32_t finished, rejected;
    uint64_t iterations;
    rt_sched_prefix_fn prefix_of;   /* NULL: no prefix caching */
    const void *prefix_ctx;
};

/* The prefill instances when none are asked for: half of them (at least 1 of 2). */
static inline uint32_t rt_pd_prefill_default(uint32_t instances)
{
    return instances / 2;
}

/* Roles by placement: instance bands left to right, prefill ones taken alternately from
   the two ends, decode ones in the centre. */
void rt_pd_roles(uint32_t instances, uint32_t prefill_instances, enum rt_pd_role *roles);

/* 0; NPU_ERR_INVAL with the reason in err for bad parameters. kvcs[i]: instance i's cache
   (initialised); pkv, pinst, dinst and ready: arrays of nreqs the caller owns. */
int pd_init(struct rt_pd *pd, const struct rt_pd_params *p, struct rt_request *reqs,
            uint32_t nreqs, struct rt_kvc *const *kvcs, struct rt_kv_seq *pkv, uint8_t *pinst,
            uint8_t *dinst, uint32_t *ready, char *err, size_t errlen);

/* As sched_arrive: requests up to now_ps become QUEUED or REJECTED (empty, too long, a
   cache that can never hold them on the prefill or the decode side). */
uint32_t pd_arrive(struct rt_pd *pd, uint64_t now_ps, uint32_t max_seq);
uint64_t pd_next_arrival_ps(const struct rt_pd *pd);

/* Plans instance i's next iteration into it (it->runs[k].pull marks a pull); false if the
   instance is busy or has nothing to run. Marks it busy. */
bool pd_next(struct rt_pd *pd, uint32_t i, struct rt_iter_plan *it);

/* Instance i's iteration `it` ran: prompts advance, first tokens hand requests over to
   the decode side, pulled prompts free their prefill cache, finished requests free theirs. */
void pd_complete(struct rt_pd *pd, uint32_t i, const struct rt_iter_plan *it);

/* Prefix caching: where the prompts' hashes come from (the prefill instances' caches have
   prefix indexes). Call after pd_init. */
void pd_prefix_source(struct rt_pd *pd, rt_sched_prefix_fn fn, const void *ctx);

bool pd_done(const struct rt_pd *pd);
uint32_t pd_queue_len(const struct rt_pd *pd);

#endif
