/* SPDX-License-Identifier: MIT */
/*
 * Serve image, NPU cores (docs/serving.md, "Control core and cores"): after the set-up the
 * model image also does (model_setup.c), a core runs the iterations the control core posts
 * in its mailbox (rt/mailbox.h) until told to stop: for each, it waits for RT_SEM_GO, reads
 * the iteration's runs, their token ids and KV blocks, interprets its layer program over
 * them (model_exec.h), and reports back through the control core's RT_SEM_DONE; rank 0
 * first writes the tokens. On stop every rank prints its report (model_report.c).
 */
#include <inttypes.h>
#include <stdio.h>

#include "model_exec.h"
#include "model_report.h"
#include "model_setup.h"
#include "npu/engine.h"
#include "npu/hal.h"
#include "npu/wait.h"
#include "rt/mailbox.h"

static struct model_core mc;
static struct exec_run runs[RT_MB_RUNS_MAX];
static uint32_t out[RT_MB_RUNS_MAX];
static float logit[RT_MB_RUNS_MAX];

static struct rt_mailbox *mailbox(void)
{
    return (struct rt_mailbox *)(uintptr_t)(hal_chip()->dram_base + RT_MAILBOX_DRAM_OFFSET);
}

/* The mailbox's runs as the interpreter's; the control core checked every index. */
static struct exec_batch read_batch(const struct rt_mailbox *mb)
{
    for (uint32_t i = 0; i < mb->nruns; i++) {
        const struct rt_mb_run *r = &mb->runs[i];
        runs[i] = (struct exec_run){ .req = r->req, .pos = r->pos, .count = r->count,
                                     .tokens = &mb->tokens[r->token_first],
                                     .wants_token = r->flags & RT_MB_WANTS_TOKEN,
                                     .blocks = &mb->blocks[r->block_first],
                                     .nblocks = r->nblocks, .ring_row = r->ring_row };
    }
    return (struct exec_batch){ .runs = runs, .nruns = mb->nruns, .nprefill = mb->nprefill,
                                .layer0 = mb->layer0, .layer1 = mb->layer1 };
}

static void busy_now(uint64_t busy[4])
{
    for (uint32_t e = 0; e < 4; e++)
        busy[e] = engine_perf_read((enum npu_perf)(NPU_PERF_MATRIX_BUSY_PS + e));
}

/* One iteration; its outputs and this core's engine time into the mailbox. */
static int serve_iteration(struct rt_mailbox *mb)
{
    uint64_t before[4], after[4];
    busy_now(before);
    struct exec_batch b = read_batch(mb);
    int rc = exec_iteration(&mc.m, mc.ops, mc.nops, &b, out, logit);
    if (rc != NPU_OK)
        return rc;
    if (mc.m.rank == 0 && mc.m.pipe_stage + 1 == mc.m.pipe_stages) /* where the logits are */
        for (uint32_t i = 0; i < b.nruns; i++)
            if (b.runs[i].wants_token)
                mb->out_token[i] = out[i], mb->out_logit[i] = logit[i];
    if (mb->engine_trace) {
        busy_now(after);
        for (uint32_t e = 0; e < 4; e++)
            mb->busy_ps[hal_self()->core_id][e] = after[e] - before[e];
    }
    return NPU_OK;
}

int main(void)
{
    hal_wait_release();
    int rc = model_core_setup(&mc);
    if (rc == NPU_ERR_NOTFOUND)
        return NPU_EXIT_OK; /* outside the plan: the control core does not wait for it */
    if (rc == NPU_OK)
        rc = model_core_load(&mc);
    /* a core that failed to set up still answers every iteration, so the control core
       hears of it instead of waiting forever; it reports the failure and runs nothing */
    uint64_t busy_ps = 0; /* chip time spent in iterations */
    uint32_t served = 0;
    for (uint32_t seq = 1;; seq++) {
        if (rc == NPU_OK)
            exec_set_cat(&mc.m, EXEC_CAT_OTHER); /* closes the accounting ... */
        hal_sem_wait(RT_SEM_GO, seq);
        mc.m.cat_t0 = hal_time_ps();             /* ... so idle time counts nowhere */
        struct rt_mailbox *mb = mailbox();
        if (mb->cmd == RT_MB_STOP)
            break;
        if (rc == NPU_OK) {
            uint64_t t0 = hal_time_ps();
            rc = serve_iteration(mb);
            busy_ps += hal_time_ps() - t0;
            served++;
        }
        if (rc != NPU_OK) {
            mb->failed = 1; /* every failing core writes the same value */
            printf("SERVE core-failed core=%u n=%" PRIu32 " rc=%d\n", hal_self()->core_id,
                   seq, rc);
        }
        model_core_post_done(RT_SEM_DONE);
    }
    /* after a failure anywhere, no rank reports: the report's barriers would wait for a
       rank that is not there */
    if (rc == NPU_OK && !mailbox()->failed) {
        char what[32];
        snprintf(what, sizeof(what), "iterations=%" PRIu32, served);
        report_run(&mc.m, mc.m.comm, what, busy_ps);
    }
    model_core_post_done(RT_SEM_DONE);
    return rc == NPU_OK ? NPU_EXIT_OK : NPU_EXIT_FAIL;
}
