/* SPDX-License-Identifier: MIT */
/*
 * Serve image, control core: attention/expert disaggregation (plan.disagg; docs/serving.md,
 * "Disaggregated experts"). Each attention replica has a scheduler of its own (the policy
 * the bootargs name, over the requests dealt to it: i mod replicas by default, a stateless
 * round robin, as MegaScale-Infer's attention nodes are plain data-parallel replicas; with
 * dispatch=load or prefix, dealt at arrival to the least loaded replica or the one whose
 * prefix cache holds most of the prompt, sched_dispatch) and its own KV cache. A round:
 * every replica's scheduler plans its iteration,
 * then every replica and the expert instance start together, because an iteration's MoE
 * rounds are collectives of both roles (model_disagg.c): a replica with nothing to run takes
 * part with no rows. The round ends when every instance answered; each replica's iteration
 * then completes as a lone instance's does (tokens, finish lines, its iteration line).
 * Not modelled: replicas that run their iterations out of step, prefill on other cores
 * (PD disaggregation beside it).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu/hal.h"
#include "npu/wait.h"
#include "rt/lines.h"
#include "serve_ctrl.h"

int serve_disagg_init(struct serve *sv, const struct rt_sched_params *sp, char *err,
                      size_t errlen)
{
    sv->disagg = true;
    sv->nrep = sv->ninst - 1; /* the image check: 2 or more instances */
    const char *name = hal_bootarg_value("dispatch");
    char word[16] = "rr";
    if (name)
        snprintf(word, sizeof(word), "%.*s", (int)strcspn(name, " "), name);
    const int d = rt_dispatch_parse(word);
    if (d < 0) {
        snprintf(err, errlen, "dispatch=%s: rr, load or prefix", word);
        return NPU_ERR_INVAL;
    }
    sv->dispatch = (enum rt_dispatch)d;
    uint8_t *owner = NULL;
    if (sv->dispatch != RT_DISPATCH_RR) {
        owner = malloc(sv->nreqs ? sv->nreqs : 1);
        if (!owner) {
            snprintf(err, errlen, "dispatch: no memory for %" PRIu32 " requests", sv->nreqs);
            return NPU_ERR_NOMEM;
        }
        /* dealt at arrival; one the loader refused goes where round robin puts it */
        for (uint32_t i = 0; i < sv->nreqs; i++)
            owner[i] = sv->reqs[i].state == RT_REQ_REJECTED ? (uint8_t)(i % sv->nrep)
                                                            : RT_SCHED_UNDEALT;
    }
    sv->owner = owner;
    int rc = NPU_OK;
    for (uint32_t k = 0; rc == NPU_OK && k < sv->nrep; k++) {
        struct rt_sched_params p = *sp;
        p.replica = k, p.replicas = sv->nrep, p.owner = owner;
        rc = sched_init(&sv->dsched[k], &p, sv->reqs, sv->nreqs, &sv->inst[k].kvc, err, errlen);
    }
    return rc;
}

/* Requests due by now that no replica has yet are dealt (not under round robin). */
static void deal_arrivals(struct serve *sv, uint64_t now)
{
    struct rt_sched *s[RT_MB_INSTANCES_MAX];
    for (uint32_t k = 0; k < sv->nrep; k++)
        s[k] = &sv->dsched[k];
    for (uint32_t i = sv->arrived; sv->owner && i < sv->nreqs &&
                                   sv->reqs[i].arrival_ps <= now; i++)
        if (sv->owner[i] == RT_SCHED_UNDEALT) {
            const uint32_t k = sched_dispatch(s, sv->nrep, i, sv->dispatch);
            sv->owner[i] = (uint8_t)k;
            sched_accept_request(s[k], i);
        }
}

uint32_t serve_disagg_arrive(struct serve *sv, uint64_t now)
{
    deal_arrivals(sv, now);
    for (uint32_t k = 0; k < sv->nrep; k++) /* each takes its own; all stop where this does */
        sched_arrive(&sv->dsched[k], now, sv->max_seq);
    uint32_t n = 0;
    while (sv->arrived + n < sv->nreqs && sv->reqs[sv->arrived + n].arrival_ps <= now)
        n++;
    sv->arrived += n;
    return n;
}

uint32_t serve_disagg_finished(const struct serve *sv)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < sv->nrep; k++)
        n += sv->dsched[k].finished;
    return n;
}

uint32_t serve_disagg_rejected(const struct serve *sv)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < sv->nrep; k++)
        n += sv->dsched[k].rejected;
    return n;
}

/* Every request ended (each counted by the one replica it was dealt to). */
static bool all_done(const struct serve *sv)
{
    return serve_disagg_finished(sv) + serve_disagg_rejected(sv) == sv->nreqs;
}

/* The round's iterations (has[k]: replica k runs its[k], else no rows) on every replica and
   the expert instance, started together; waits for every answer, then completes them. */
static int run_round(struct serve *sv, struct rt_iter_plan *its, const bool *has)
{
    int rc = NPU_OK;
    for (uint32_t k = 0; k < sv->nrep; k++) {
        if (!has[k] || rc != NPU_OK) { /* after a refusal: no rows, so the round completes */
            serve_post_round(sv, k);
            continue;
        }
        serve_announce_running(sv, &sv->dsched[k]);
        rc = serve_post(sv, k, &its[k]);
        if (rc != NPU_OK) /* its mailbox refused (printed): posted with no rows instead */
            serve_post_round(sv, k);
    }
    serve_post_round(sv, sv->nrep); /* the expert instance */
    for (uint32_t i = 0; i < sv->ninst; i++)
        while (!serve_answered(sv, i))
            serve_wait_answer(sv, UINT64_MAX);
    if (rc != NPU_OK)
        return rc;
    for (uint32_t i = 0; i < sv->ninst; i++)
        if (sv->inst[i].mb->failed) {
            serve_abort(&(struct lines_serve_abort){
                .reason = "core_failed", .n = sv->iterations,
                .absent = { .queue = true, .detail = true } });
            return NPU_ERR_STATE;
        }
    for (uint32_t k = 0; rc == NPU_OK && k < sv->nrep; k++) {
        if (!has[k])
            continue;
        rc = serve_finish(sv, k, &its[k]);
        if (rc == NPU_OK) {
            sched_complete(&sv->dsched[k], &its[k]);
            serve_announce_finishes(sv, &its[k]);
        }
    }
    return rc;
}

/* The chip time of the next arrival of any replica (UINT64_MAX: none). */
static uint64_t next_arrival(const struct serve *sv)
{
    uint64_t next = UINT64_MAX;
    for (uint32_t k = 0; k < sv->nrep; k++) {
        const uint64_t t = sched_next_arrival_ps(&sv->dsched[k]);
        next = t < next ? t : next;
    }
    return next;
}

int serve_disagg_all(struct serve *sv)
{
    static struct rt_iter_plan its[RT_MB_INSTANCES_MAX];
    bool has[RT_MB_INSTANCES_MAX];
    for (;;) {
        serve_take_arrivals(sv);
        if (all_done(sv))
            return NPU_OK;
        bool any = false;
        for (uint32_t k = 0; k < sv->nrep; k++)
            any |= has[k] = sched_next(&sv->dsched[k], &its[k]);
        if (any) {
            int rc = run_round(sv, its, has);
            if (rc != NPU_OK)
                return rc;
            continue;
        }
        const uint64_t next = next_arrival(sv);
        if (next == UINT64_MAX) { /* nothing runs, nothing comes, yet not done */
            uint32_t queued = 0;
            for (uint32_t k = 0; k < sv->nrep; k++)
                queued += sched_queue_len(&sv->dsched[k]);
            serve_abort(&(struct lines_serve_abort){
                .reason = "stuck", .queue = queued, .absent = { .n = true, .detail = true } });
            return NPU_ERR_STATE;
        }
        if (hal_sleep_until_ps(next) != NPU_OK) { /* the chip clock jumps to the arrival */
            serve_print_abort("clock", "the next arrival at %" PRIu64 " ps is past the chip "
                              "clock's range", next);
            return NPU_ERR_STATE;
        }
    }
}
