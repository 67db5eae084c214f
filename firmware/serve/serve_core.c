/* SPDX-License-Identifier: MIT */
/*
 * Serve image, NPU cores (docs/serving.md, "Control core and cores"): after the set-up the
 * model image also does (model_setup.c), a core runs the iterations the control core posts
 * in its instance's mailbox (rt/mailbox.h) until told to stop: for each, it waits for
 * RT_SEM_GO, reads the iteration's runs, their token ids and KV blocks, pulls the prompt KV
 * of runs new to this (decode) instance from the prefill instance's core of its rank and
 * stage (model_kv_pull.c), interprets its layer program over the runs (model_exec.h), and
 * answers through the instance's lead core, which tells the control core once every core of
 * the instance has; rank 0 first writes the tokens. On stop every rank prints its report
 * (model_report.c). Under attention/expert disaggregation (plan.disagg) a replica's round
 * may carry no runs and the expert instance's never does: both take part in the round's
 * MoE exchanges (model_disagg.c, serve_disagg.c).
 */
#include <stdlib.h>
#include <string.h>

#include "model_exec.h"
#include "model_report.h"
#include "model_setup.h"
#include "npu/engine.h"
#include "npu/hal.h"
#include "npu/wait.h"
#include "noc/collective.h"
#include "noc/noc.h"
#include "rt/lines.h"
#include "rt/mailbox.h"

static struct model_core mc;
static struct exec_run runs[RT_MB_RUNS_MAX];
static uint32_t out[RT_MB_RUNS_MAX];
static float logit[RT_MB_RUNS_MAX];
/* this core's instance: its lead core (rank 0 of stage 0) and cores; and the core of this
   rank and stage in every instance (the source of a pull) */
static uint32_t lead, ninst_cores;
static uint32_t peer[RT_MB_INSTANCES_MAX];

static struct rt_mailbox *mailbox(void)
{
    return rt_mailbox_at(hal_chip()->dram_base, mc.core->instance);
}

static const struct npu_image_core *image_cores(const struct npu_image_header **h)
{
    *h = (const void *)(uintptr_t)hal_chip()->hbm_base;
    return (const void *)((const uint8_t *)*h + (*h)->cores_off);
}

static void find_instance_cores(void)
{
    const struct npu_image_header *h;
    const struct npu_image_core *cores = image_cores(&h);
    for (uint32_t i = 0; i < h->cores_count; i++) {
        const struct npu_image_core *c = &cores[i];
        if (c->rank == NPU_IMAGE_IDLE)
            continue;
        if (c->instance == mc.core->instance) {
            ninst_cores++;
            if (c->rank == 0 && c->stage == 0)
                lead = i;
        }
        if (c->rank == mc.core->rank && c->stage == mc.core->stage &&
            c->instance < RT_MB_INSTANCES_MAX)
            peer[c->instance] = i;
    }
}

/* This core's round `seq` is done: the lead gathers its instance's cores, then tells the
   control core which instance finished which round, and wakes it. */
static void post_round_done(uint32_t seq)
{
    if (hal_self()->core_id != lead) {
        struct hal_sem_post_args g = { .core = lead, .sem = RT_SEM_GATHER,
                                       .op = NPU_SEM_OP_INC, .value = 1 };
        hal_sem_post(&g);
        return;
    }
    hal_sem_wait(RT_SEM_GATHER, seq * (ninst_cores - 1));
    struct hal_sem_post_args answer = { .core = hal_chip()->ncores,
                                        .sem = RT_SEM_ANSWER0 + mc.core->instance,
                                        .op = NPU_SEM_OP_SET, .value = seq };
    hal_sem_post(&answer); /* lands before the DONE below, at the same chip time */
    model_core_post_done(RT_SEM_DONE);
}

/* Whether a core of this instance failed, or under disaggregation of any instance. */
static bool any_failed(void)
{
    const struct npu_plan *p = mc.m.plan;
    bool failed = mailbox()->failed;
    for (uint32_t i = 0; p->disagg && i < p->instances; i++)
        failed |= rt_mailbox_at(hal_chip()->dram_base, i)->failed != 0;
    return failed;
}

/* Run i's pull: the prompt's KV from the prefill instance's core of this rank and stage. */
static int pull_run(const struct rt_mailbox *mb, uint32_t i)
{
    const struct rt_mb_run *r = &mb->runs[i];
    const struct npu_image_header *h;
    const struct npu_image_core *src = &image_cores(&h)[peer[r->pull_instance]];
    const uint64_t sram = noc_sram_addr(peer[r->pull_instance], 0);
    const uint64_t hbm = (uint64_t)(uintptr_t)h;
    struct exec_kv_pull p = {
        .src = { .sram = sram, .pool = sram + src->kv_pool_off,
                 .ring = (h->plan.kv_in_sram ? sram : hbm) + src->kv_off,
                 .blocks = &mb->blocks[r->pull_block_first], .nblocks = r->pull_nblocks,
                 .ring_row = r->pull_ring_row },
        .dst = { .sram = mc.m.buf.sram, .pool = mc.m.buf.kv_pool, .ring = mc.m.buf.kv_ring,
                 .blocks = &mb->blocks[r->block_first], .nblocks = r->nblocks,
                 .ring_row = r->ring_row },
        .req = r->req, .count = r->pos,
        .bounce = mc.m.buf.sram + mc.core->sram_act, .bounce_bytes = mc.core->sram_act_bytes };
    return exec_kv_pull(&mc.m, &p);
}

static int pull_runs(const struct rt_mailbox *mb)
{
    int rc = NPU_OK;
    bool charged = false;
    for (uint32_t i = 0; rc == NPU_OK && i < mb->nruns; i++) {
        if (!(mb->runs[i].flags & RT_MB_PULL))
            continue;
        if (!charged) { /* pulls are charged outside the layers */
            exec_set_layer(&mc.m, mc.cfg.num_layers);
            exec_set_cat(&mc.m, EXEC_CAT_OTHER);
            charged = true;
        }
        rc = pull_run(mb, i);
    }
    return rc;
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

/* Matrix, vector, DMA and NoC busy time; the DMA's two queues summed (they may run at the
   same time, so the sum may pass the iteration's length). */
static void busy_now(uint64_t busy[4])
{
    for (uint32_t e = 0; e < 4; e++)
        busy[e] = engine_perf_read((enum npu_perf)(NPU_PERF_MATRIX_BUSY_PS + e));
    busy[NPU_ENGINE_DMA] += engine_perf_read(NPU_PERF_DMA2_BUSY_PS);
}

/* Fault injection for the serving fault tests (`npuctl serve --inject-fault KIND:CORE:ROUND`,
   docs/serving.md "Faults"): at round ROUND, core CORE traps (an illegal instruction),
   deadlocks (waits for a round nobody posts), stalls past its collectives' timeout (the
   others time out, then it does), or spins without waiting (the watchdog's case). These
   break the house rules on purpose; nothing else calls them. */
static struct {
    const char *kind; /* NULL: no fault for this core */
    uint32_t round;
} fault;

/* Once, before the first round: the bootargs are not read again on the rounds' path. */
static void read_fault(void)
{
    const char *kind = hal_bootarg_value("fault");
    const char *core = hal_bootarg_value("fault_core"), *round = hal_bootarg_value("fault_round");
    if (kind && core && round && strtoul(core, NULL, 10) == hal_self()->core_id)
        fault.kind = kind, fault.round = (uint32_t)strtoul(round, NULL, 10);
}

static void inject_fault(uint32_t seq)
{
    const char *kind = fault.kind;
    if (!kind || fault.round != seq)
        return;
    if (!strncmp(kind, "trap", 4))
        __asm__ volatile(".word 0"); /* an illegal instruction */
    else if (!strncmp(kind, "deadlock", 8))
        hal_sem_wait(RT_SEM_GO, seq + 1); /* the control core waits for this round */
    else if (!strncmp(kind, "timeout", 7))
        hal_sleep_ps(2 * noc_comm_timeout_default_ps());
    else if (!strncmp(kind, "spin", 4))
        for (volatile uint32_t k = 0;; k++) /* never waits: chip time stands still */
            ;
}

/* One iteration; its outputs and this core's engine time into the mailbox. */
static int serve_iteration(struct rt_mailbox *mb)
{
    uint64_t before[4], after[4];
    busy_now(before);
    struct exec_batch b = read_batch(mb);
    int rc = pull_runs(mb);
    if (rc == NPU_OK && mc.m.serves_experts) /* disaggregated: its rounds, no runs */
        rc = exec_iteration_experts(&mc.m, mc.ops, mc.nops);
    else if (rc == NPU_OK && mc.m.plan->disagg) /* a replica, with no runs too */
        rc = exec_iteration_disagg(&mc.m, mc.ops, mc.nops, &b, out, logit);
    else if (rc == NPU_OK)
        rc = exec_iteration(&mc.m, mc.ops, mc.nops, &b, out, logit);
    if (rc != NPU_OK)
        return rc;
    if (mc.m.rank == 0 && mc.m.pipe.stage + 1 == mc.m.pipe.stages) /* where the logits are */
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
    find_instance_cores();
    read_fault();
    /* a core that failed to set up still answers every iteration, so the control core
       hears of it instead of waiting forever; it reports the failure and runs nothing */
    uint64_t busy_ps = 0; /* chip time spent in iterations */
    uint32_t served = 0;
    uint32_t seq = 1;
    for (;; seq++) {
        if (rc == NPU_OK) { /* closes the accounting ... */
            exec_set_cat(&mc.m, EXEC_CAT_OTHER);
            exec_charge_now(&mc.m);
        }
        hal_sem_wait(RT_SEM_GO, seq);
        mc.m.acct.cat_t0 = hal_time_ps();        /* ... so idle time counts nowhere */
        struct rt_mailbox *mb = mailbox();
        if (mb->cmd == RT_MB_STOP)
            break;
        if (rc == NPU_OK) {
            uint64_t t0 = hal_time_ps();
            inject_fault(seq);
            rc = serve_iteration(mb);
            busy_ps += hal_time_ps() - t0;
            /* a disaggregated replica's round without rows is no iteration of its own */
            served += mb->nruns > 0 || !mc.m.plan->disagg || mc.m.serves_experts;
        }
        if (rc != NPU_OK) {
            mb->failed = 1; /* every failing core writes the same value */
            lines_print_serve_core_failed(&(struct lines_serve_core_failed){
                .core = hal_self()->core_id, .n = seq, .rc = rc });
        }
        post_round_done(seq);
    }
    /* after a failure anywhere, no rank reports: the report's barriers would wait for a
       rank that is not there (a disaggregated plan's instances report in turn: any
       instance's failure) */
    if (rc == NPU_OK && !any_failed())
        report_run(&mc.m, mc.m.comm,
                   &(struct lines_model_done){
                       .iterations = served,
                       .absent = { .requests = true, .new_tokens = true } },
                   busy_ps);
    post_round_done(seq); /* the STOP round */
    return rc == NPU_OK ? NPU_EXIT_OK : NPU_EXIT_FAIL;
}
