/* SPDX-License-Identifier: MIT */
/*
 * Serve image, control core: PD disaggregation (docs/serving.md, "PD disaggregation";
 * rt/sched_pd.h). The instances run concurrently: whenever one is idle and has work, its
 * next iteration is posted; the control core then sleeps until some instance answers or the
 * next request arrives, whichever comes first in chip time, and takes in every instance
 * that answered. Bootargs (besides serve_ctrl.c's): prefill_instances= (default: half the
 * instances), chunk= (prompt rows per prefill iteration).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu/hal.h"
#include "npu/wait.h"
#include "rt/lines.h"
#include "serve_ctrl.h"

int serve_pd_init(struct serve *sv, uint32_t layers, char *err, size_t errlen)
{
    const struct npu_plan *p = &sv->image->plan;
    const char *arg = hal_bootarg_value("prefill_instances");
    const char *chunk = hal_bootarg_value("chunk");
    struct rt_pd_params pp = {
        .num_layers = layers, .max_batch = p->max_batch, .max_tokens = p->max_tokens,
        .chunk = chunk ? (uint32_t)strtoul(chunk, NULL, 10) : p->max_tokens,
        .instances = sv->ninst,
        .prefill_instances = arg ? (uint32_t)strtoul(arg, NULL, 10) : rt_pd_prefill_default(sv->ninst) };
    struct rt_kvc *kvcs[RT_PD_INSTANCES_MAX];
    for (uint32_t i = 0; i < sv->ninst && i < RT_PD_INSTANCES_MAX; i++)
        kvcs[i] = &sv->inst[i].kvc;
    const uint32_t n = sv->nreqs ? sv->nreqs : 1;
    struct rt_kv_seq *pkv = calloc(n, sizeof(*pkv));
    uint8_t *pinst = calloc(n, 1), *dinst = calloc(n, 1);
    uint32_t *ready = calloc(n, sizeof(*ready));
    if (!pkv || !pinst || !dinst || !ready) {
        snprintf(err, errlen, "pd-disagg: no memory for %" PRIu32 " requests", sv->nreqs);
        return NPU_ERR_NOMEM;
    }
    int rc = pd_init(&sv->pd, &pp, sv->reqs, sv->nreqs, kvcs, pkv, pinst, dinst, ready, err,
                     errlen);
    for (uint32_t i = 0; rc == NPU_OK && i < sv->ninst; i++)
        lines_print_serve_instance(&(struct lines_serve_instance){
            .id = i, .role = sv->pd.inst[i].role == RT_PD_PREFILL ? "prefill" : "decode",
            .cores = sv->inst[i].ncores });
    return rc;
}

/* Posts the next iteration of every idle instance that has one; how many are busy. */
static int post_idle(struct serve *sv, uint32_t *busy)
{
    *busy = 0;
    for (uint32_t i = 0; i < sv->ninst; i++) {
        struct serve_inst *in = &sv->inst[i];
        if (!sv->pd.inst[i].busy && pd_next(&sv->pd, i, &in->it)) {
            serve_announce_admissions(sv, &in->it);
            int rc = serve_post(sv, i, &in->it);
            if (rc != NPU_OK)
                return rc;
        }
        *busy += sv->pd.inst[i].busy;
    }
    return NPU_OK;
}

/* Takes in every busy instance that answered. */
static int take_answers(struct serve *sv)
{
    for (uint32_t i = 0; i < sv->ninst; i++) {
        if (!sv->pd.inst[i].busy || !serve_answered(sv, i))
            continue;
        int rc = serve_finish(sv, i, &sv->inst[i].it);
        if (rc != NPU_OK)
            return rc;
        pd_complete(&sv->pd, i, &sv->inst[i].it);
        serve_announce_finishes(sv, &sv->inst[i].it);
    }
    return NPU_OK;
}

int serve_pd_all(struct serve *sv)
{
    for (;;) {
        serve_take_arrivals(sv);
        int rc = take_answers(sv);
        if (rc != NPU_OK)
            return rc;
        if (sv->max_concurrency) /* the requests that just ended free their slots now */
            serve_take_arrivals(sv);
        if (pd_done(&sv->pd))
            return NPU_OK;
        uint32_t busy;
        rc = post_idle(sv, &busy);
        if (rc != NPU_OK)
            return rc;
        uint64_t next = pd_next_arrival_ps(&sv->pd);
        if (!busy && next == UINT64_MAX) { /* nothing runs, nothing comes, yet not done */
            serve_abort(&(struct lines_serve_abort){
                .reason = "stuck", .queue = pd_queue_len(&sv->pd),
                .absent = { .n = true, .detail = true } });
            return NPU_ERR_STATE;
        }
        /* an answer or the next arrival; the chip clock jumps to the arrival */
        rc = busy ? serve_wait_answer(sv, next) : hal_sleep_until_ps(next);
        if (rc != NPU_OK) {
            serve_print_abort("clock", "the next arrival at %" PRIu64 " ps is past the chip "
                              "clock's range", next); /* never spin on a refused wait */
            return NPU_ERR_STATE;
        }
    }
}
