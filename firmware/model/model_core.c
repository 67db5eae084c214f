/* SPDX-License-Identifier: MIT */
/*
 * Model image, NPU cores (docs/images.md): runs the image `npuctl flash` placed at the base
 * of HBM, which the control core has checked before releasing the cores. Each core finds its
 * entry (rank, SRAM map, layer program) and its weight shares, sets up the tensor-parallel
 * group, loads its resident weights, then runs iterations of the requests given as bootargs
 * until every request has its tokens (model_exec.h interprets the program).
 *
 * Requests (bootargs): prompt=T1,T2,... (request 0; also prompt0=), prompt1=... up to the
 * plan's max_batch, startR=I (request R joins at iteration I), new=N tokens each (default
 * 16); or, for performance runs, prompt_len=L [requests=R] [context=C]: R requests of L
 * synthetic tokens, each already holding C positions of KV cache (the cache's contents are
 * not computed: performance mode moves no data), so one iteration of a given shape can be
 * timed on its own (npuctl bench model).
 * An iteration carries every joined, unfinished request: the rest of its prompt (up to the
 * plan's max_tokens over all requests; a longer prompt continues next iteration) or one
 * decode row. Rank 0 prints `MODEL req=R step=S token=T logit=L` per generated token, the
 * expert routing counts and the per-layer breakdown; every rank prints its weight traffic.
 * A disaggregated plan (plan.disagg, model_disagg.c): request r runs on replica r mod
 * replicas; every core follows every replica's requests so that all replicas and the
 * expert instance run the same iterations (a replica with no rows too), and the first
 * replica's rank 0 prints the report.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_config.h"
#include "model_exec.h"
#include "model_report.h"
#include "model_setup.h"
#include "noc/collective.h"
#include "noc/placement.h"
#include "npu/hal.h"
#include "npu/wait.h"
#include "rt/lines.h"

#define DONE_SEM 0u
#define REQ_MAX 64u                     /* the planner's max_batch limit */
#define TOKENS_MAX 4096u                /* prompt tokens of one request */
#define POOL_TOKENS (12u * TOKENS_MAX)  /* every request's prompt and new tokens (the firmware
                                           fits 1 MiB of SRAM: NPU_IMAGE_APP_BASE) */

struct request {
    uint32_t ctx;                /* positions held before the first iteration (context=) */
    uint32_t len, start, done_prompt, generated;
    uint32_t *tokens;            /* [len + new] in pool: prompt, then generated (position
                                    ctx + i at i) */
};

static struct request reqs[REQ_MAX];
static uint32_t pool[POOL_TOKENS];
static uint32_t pool_used;
static struct model_core mc;

static int report_done(int status)
{
    model_core_post_done(DONE_SEM);
    return status;
}

/* key=T1,T2,... into dst[]; the count (0 if absent), or -1 (with a message) if malformed. */
static int parse_tokens(const char *key, uint32_t *dst, uint32_t room)
{
    const char *p = hal_bootarg_value(key);
    int n = 0;
    while (p && *p && *p != ' ') {
        char *end;
        unsigned long v = strtoul(p, &end, 10);
        if (end == p || n == (int)TOKENS_MAX || n == (int)room ||
            (*end != ',' && *end != ' ' && *end)) {
            printf("MODEL error: bootarg %s: token %d is not a number, or more than %u "
                   "tokens\n", key, n, TOKENS_MAX);
            return -1;
        }
        dst[n++] = (uint32_t)v;
        p = *end == ',' ? end + 1 : end;
    }
    return n;
}

static uint32_t bootarg_u32(const char *key, uint32_t dflt)
{
    const char *v = hal_bootarg_value(key);
    return v ? (uint32_t)strtoul(v, NULL, 10) : dflt;
}

/* Room for n tokens in the pool, or NULL (with a message). */
static uint32_t *pool_take(uint32_t n)
{
    if (n > POOL_TOKENS - pool_used) {
        printf("MODEL error: the requests' tokens pass %u in all\n", POOL_TOKENS);
        return NULL;
    }
    pool_used += n;
    return pool + pool_used - n;
}

/* Synthetic prompts for performance runs: prompt_len=L [requests=R] [context=C]. */
static uint32_t parse_synthetic(uint32_t plen, uint32_t n_new)
{
    uint32_t n = bootarg_u32("requests", 1), ctx = bootarg_u32("context", 0);
    if (n == 0 || n > REQ_MAX || plen > TOKENS_MAX) {
        printf("MODEL error: requests=1..%u, prompt_len=1..%u\n", REQ_MAX, TOKENS_MAX);
        return 0;
    }
    if (ctx && mc.m.plan->mode != NPU_IMAGE_PERFORMANCE) {
        printf("MODEL error: context=%" PRIu32 " needs a performance-mode image (the held "
               "positions' keys and values are not computed)\n", ctx);
        return 0;
    }
    for (uint32_t r = 0; r < n; r++) {
        reqs[r].len = plen, reqs[r].ctx = ctx;
        if (!(reqs[r].tokens = pool_take(plen + n_new)))
            return 0;
        for (uint32_t i = 0; i < plen; i++)
            reqs[r].tokens[i] =
                (uint32_t)((i * 7919ull + r * 104729ull + 1) % mc.cfg.vocab_size);
    }
    return n;
}

/* The requests from the bootargs; their count, or 0 (with a message). */
static uint32_t parse_requests(uint32_t n_new)
{
    uint32_t n = 0, plen = bootarg_u32("prompt_len", 0);
    if (plen)
        return parse_synthetic(plen, n_new);
    for (uint32_t r = 0; r < REQ_MAX; r++) {
        char key[16];
        snprintf(key, sizeof(key), "prompt%" PRIu32, r);
        bool alias = r == 0 && hal_bootarg_value("prompt"); /* prompt= is prompt0= */
        /* parsed in place, at the pool's free end */
        uint32_t room = POOL_TOKENS - pool_used;
        int len = parse_tokens(alias ? "prompt" : key, pool + pool_used,
                               room > n_new ? room - n_new : 0);
        if (len < 0)
            return 0;
        if (len == 0)
            break;
        if (!(reqs[n].tokens = pool_take((uint32_t)len + n_new)))
            return 0;
        snprintf(key, sizeof(key), "start%" PRIu32, r);
        reqs[n].start = bootarg_u32(key, 0);
        reqs[n++].len = (uint32_t)len;
    }
    if (n == 0)
        printf("MODEL error: no prompt (bootargs prompt=T1,T2,... or prompt_len=L)\n");
    return n;
}

/* Each request against the model and the plan. */
static int check_requests(uint32_t nreq, uint32_t n_new)
{
    const struct npu_plan *p = mc.m.plan;
    if (nreq > p->max_batch) {
        printf("MODEL error: %" PRIu32 " requests; the image's plan takes max_batch %" PRIu32
               "\n", nreq, p->max_batch);
        return NPU_ERR_RANGE;
    }
    for (uint32_t r = 0; r < nreq; r++) {
        for (uint32_t i = 0; i < reqs[r].len; i++)
            if (reqs[r].tokens[i] >= mc.cfg.vocab_size) {
                printf("MODEL error: request %" PRIu32 ": prompt token %" PRIu32 " = %" PRIu32
                       " is not below vocab_size %" PRIu32 "\n", r, i, reqs[r].tokens[i],
                       mc.cfg.vocab_size);
                return NPU_ERR_RANGE;
            }
        if ((uint64_t)reqs[r].ctx + reqs[r].len + n_new > p->max_seq) {
            if (reqs[r].ctx)
                printf("MODEL error: request %" PRIu32 ": %" PRIu32 " held positions, a prompt "
                       "of %" PRIu32 " tokens plus %" PRIu32 " new pass the plan's max_seq (%"
                       PRIu32 ")\n", r, reqs[r].ctx, reqs[r].len, n_new, p->max_seq);
            else
                printf("MODEL error: request %" PRIu32 ": prompt of %" PRIu32 " tokens plus %"
                       PRIu32 " new passes the plan's max_seq (%" PRIu32 ")\n", r, reqs[r].len,
                       n_new, p->max_seq);
            return NPU_ERR_RANGE;
        }
    }
    return NPU_OK;
}

/* The replica request r runs on: under disaggregation r mod replicas, else the one
   instance (0). This core's replica: NO_REPLICA on the expert instance. */
#define NO_REPLICA UINT32_MAX
static uint32_t owner(uint32_t r)
{
    return mc.m.plan->disagg ? r % mc.m.replicas : 0;
}

static uint32_t my_replica(void)
{
    return mc.m.serves_experts ? NO_REPLICA : mc.m.plan->disagg ? mc.m.replica : 0;
}

/* Iteration t's runs of replica k: its joined requests with tokens left, prompts first come
   first served. */
static uint32_t make_runs(uint32_t t, uint32_t nreq, uint32_t n_new, uint32_t k,
                          struct exec_run *runs)
{
    uint32_t n = 0, budget = mc.m.plan->max_tokens;
    for (uint32_t r = 0; r < nreq && budget > 0; r++) {
        struct request *q = &reqs[r];
        if (t < q->start || q->generated == n_new || owner(r) != k)
            continue;
        uint32_t at = q->done_prompt < q->len ? q->done_prompt : q->len + q->generated - 1;
        uint32_t pos = q->ctx + at;
        uint32_t count = q->done_prompt < q->len ? q->len - q->done_prompt : 1;
        count = count < budget ? count : budget;
        budget -= count;
        /* request r's cache: the r-th max_seq positions' worth of ring rows (no pool
           blocks: these images are planned without one) */
        runs[n++] = (struct exec_run){ .req = r, .pos = pos, .count = count,
                                       .tokens = &q->tokens[at],
                                       .wants_token = at + count >= q->len,
                                       .ring_row = r * npu_kv_local_rows(mc.m.plan,
                                                                          mc.m.plan->max_seq) };
    }
    return n;
}

/* One iteration of this core's: under disaggregation every replica and the expert
   instance run every iteration in step (the dispatch rounds are collectives of both
   roles), a replica with no rows of its own too; otherwise an iteration with rows. */
static int run_iteration(const struct exec_batch *b, const struct npu_prog_op *ops,
                         uint32_t nops, uint32_t *out, float *logit)
{
    if (mc.m.serves_experts)
        return exec_iteration_experts(&mc.m, ops, nops);
    if (mc.m.plan->disagg)
        return exec_iteration_disagg(&mc.m, ops, nops, b, out, logit);
    return b->nruns ? exec_iteration(&mc.m, ops, nops, b, out, logit) : NPU_OK;
}

/* The requests of n runs after their iteration: prompts consumed, and with out (this
   core's runs) the tokens kept and printed; without (another replica's runs, which this
   core follows only to know when every request is done), counted. */
static void advance(const struct exec_run *runs, uint32_t n, const uint32_t *out,
                    const float *logit)
{
    for (uint32_t i = 0; i < n; i++) {
        struct request *q = &reqs[runs[i].req];
        if (q->done_prompt < q->len)
            q->done_prompt += runs[i].count;
        if (!runs[i].wants_token)
            continue;
        if (out)
            q->tokens[q->len + q->generated] = out[i];
        /* the last stage's rank 0: where the logits are */
        if (out && mc.m.rank == 0 && mc.m.pipe.stage + 1 == mc.m.pipe.stages)
            lines_print_model_req(&(struct lines_model_req){
                .req = runs[i].req, .step = q->generated, .token = out[i],
                .logit = (double)logit[i] });
        q->generated++;
    }
}

/* Under disaggregation, the other replicas' requests after iteration t, as they ran it. */
static void advance_others(uint32_t t, uint32_t nreq, uint32_t n_new)
{
    static struct exec_run others[REQ_MAX];
    for (uint32_t k = 0; mc.m.plan->disagg && k < mc.m.replicas; k++)
        if (k != my_replica())
            advance(others, make_runs(t, nreq, n_new, k, others), NULL, NULL);
}

static int run_requests(uint32_t nreq, uint32_t n_new, const struct npu_prog_op *ops,
                        uint32_t nops)
{
    static struct exec_run runs[REQ_MAX];
    static uint32_t out[REQ_MAX];
    static float logit[REQ_MAX];
    for (uint32_t t = 0;; t++) {
        uint32_t n = my_replica() == NO_REPLICA ? 0
                                                : make_runs(t, nreq, n_new, my_replica(), runs);
        bool pending = false, joined = false; /* over every replica's requests */
        for (uint32_t r = 0; r < nreq; r++) {
            pending |= reqs[r].generated < n_new;
            joined |= t >= reqs[r].start && reqs[r].generated < n_new;
        }
        if (!pending)
            return NPU_OK;
        if (!joined)
            continue; /* nobody has joined yet */
        struct exec_batch b = { .runs = runs, .nruns = n, .layer0 = 0,
                                .layer1 = mc.cfg.num_layers };
        int rc = run_iteration(&b, ops, nops, out, logit);
        if (rc != NPU_OK)
            return rc;
        advance_others(t, nreq, n_new); /* first: their runs depend on their state only */
        advance(runs, n, out, logit);
    }
}

int main(void)
{
    hal_wait_release();
    int rc = model_core_setup(&mc);
    if (rc == NPU_ERR_NOTFOUND)
        return report_done(NPU_EXIT_OK); /* outside the plan */
    uint32_t n_new = bootarg_u32("new", 16);
    if (rc == NPU_OK && n_new == 0) {
        printf("MODEL error: new=0: every request generates at least one token (bootarg new)\n");
        rc = NPU_ERR_INVAL;
    }
    uint32_t nreq = rc == NPU_OK ? parse_requests(n_new) : 0;
    if (rc == NPU_OK && nreq == 0)
        rc = NPU_ERR_INVAL; /* parse_requests said why */
    if (rc == NPU_OK)
        rc = check_requests(nreq, n_new);
    if (rc == NPU_OK)
        rc = model_core_load(&mc);
    uint64_t t0 = hal_time_ps();
    if (rc == NPU_OK)
        rc = run_requests(nreq, n_new, mc.ops, mc.nops);
    if (rc == NPU_OK) {
        report_run(&mc.m, mc.m.comm,
                   &(struct lines_model_done){ .requests = nreq, .new_tokens = n_new,
                                               .absent = { .iterations = true } },
                   hal_time_ps() - t0);
    } else {
        char detail[24];
        snprintf(detail, sizeof(detail), "(core %u)", hal_self()->core_id);
        lines_print_model_failed(&(struct lines_model_failed){ .rc = rc, .detail = detail });
    }
    return report_done(rc == NPU_OK ? NPU_EXIT_OK : NPU_EXIT_FAIL);
}
