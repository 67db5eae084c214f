/* SPDX-License-Identifier: MIT */
/*
 * Serve image, control core: one iteration through the mailbox (rt/mailbox.h). The
 * scheduler's plan becomes the mailbox's runs with their token ids and KV blocks; the
 * cores run it; the tokens come back, are printed with the chip time they were ready at,
 * and the scheduler is told.
 */
#include <inttypes.h>
#include <stdio.h>

#include "npu/hal.h"
#include "npu/wait.h"
#include "serve_ctrl.h"

/* Prompt token `pos` of request r: the trace's ids, else (performance runs) a stand-in. */
static uint32_t prompt_token(const struct serve *sv, uint32_t r, uint32_t pos)
{
    const struct rt_blob_req *b = &rt_blob_reqs(sv->blob)[r];
    if (b->ids_first != RT_BLOB_NO_IDS)
        return rt_blob_ids(sv->blob)[b->ids_first + pos];
    return (uint32_t)((pos * 7919ull + r * 104729ull + 1) % sv->vocab);
}

/* The mailbox's copy of run i; false if the mailbox's arrays are full (not expected:
   the plan bounds rows and blocks). */
static bool write_run(struct serve *sv, const struct rt_run *run, uint32_t i,
                      uint32_t *ntok, uint32_t *nblk)
{
    struct rt_mailbox *mb = sv->mb;
    const struct rt_request *q = &sv->reqs[run->req];
    const uint32_t held = q->kv.blocks;
    if (*ntok + run->count > RT_MB_TOKENS_MAX || *nblk + held > RT_MB_BLOCKS_MAX)
        return false;
    mb->runs[i] = (struct rt_mb_run){
        .req = run->req, .pos = run->pos, .count = run->count,
        .flags = (run->prefill ? RT_MB_PREFILL : 0) | (run->wants_token ? RT_MB_WANTS_TOKEN : 0),
        .token_first = *ntok, .block_first = *nblk, .nblocks = held,
        .ring_row = q->kv.ring_row == RT_KVC_NO_RING ? 0 : q->kv.ring_row };
    for (uint32_t j = 0; j < run->count; j++)
        mb->tokens[*ntok + j] = run->prefill ? prompt_token(sv, run->req, run->pos + j)
                                             : sv->last_token[run->req];
    kvc_seq_block_ids(&sv->kvc, &q->kv, &mb->blocks[*nblk], held);
    *ntok += run->count, *nblk += held;
    return true;
}

static void post_go(struct serve *sv)
{
    sv->seq++;
    for (uint32_t c = 0; c < sv->ncores; c++) {
        struct hal_sem_post_args go = { .core = sv->cores[c], .sem = RT_SEM_GO,
                                        .op = NPU_SEM_OP_INC, .value = 1 };
        hal_sem_post(&go);
    }
}

static void print_iteration(const struct serve *sv, const struct rt_iter_plan *it,
                            uint64_t t0, uint64_t t1)
{
    printf("SERVE iter n=%" PRIu32 " t0=%" PRIu64 " t1=%" PRIu64 " runs=%" PRIu32 " prefill=%"
           PRIu32 " decode=%" PRIu32 " group=%" PRIu32 " groups=%" PRIu32 " queue=%" PRIu32
           " running=%" PRIu32 " blocks=%" PRIu32 "/%" PRIu32 " ring=%" PRIu64 "/%" PRIu64 "\n",
           sv->seq, t0, t1, it->nruns, it->prefill_tokens, it->decode_tokens, it->group,
           it->groups, sched_queue_len(&sv->sched), sv->sched.nrunning,
           kvc_blocks_used(&sv->kvc), sv->kvc.cfg.sram_blocks, kvc_ring_rows_used(&sv->kvc),
           sv->kvc.cfg.ring_rows);
    if (!sv->engine_trace)
        return;
    for (uint32_t c = 0; c < sv->ncores; c++) {
        const uint64_t *b = sv->mb->busy_ps[sv->cores[c]];
        printf("SERVE engines core=%" PRIu32 " n=%" PRIu32 " matrix=%" PRIu64 " vector=%" PRIu64
               " dma=%" PRIu64 " noc=%" PRIu64 "\n", sv->cores[c], sv->seq, b[0], b[1], b[2],
               b[3]);
    }
}

/* Tokens of the runs that wanted one, at chip time t. */
static void record_tokens(struct serve *sv, const struct rt_iter_plan *it, uint64_t t)
{
    for (uint32_t i = 0; i < it->nruns; i++) {
        const struct rt_run *run = &it->runs[i];
        if (!run->wants_token)
            continue;
        uint32_t tok = sv->mb->out_token[i];
        sv->last_token[run->req] = tok;
        printf("SERVE token id=%" PRIu32 " n=%" PRIu32 " t=%" PRIu64 " token=%" PRIu32 "\n",
               run->req, sv->reqs[run->req].generated, t, tok);
    }
}

int serve_run_iteration(struct serve *sv, struct rt_iter_plan *it)
{
    struct rt_mailbox *mb = sv->mb;
    uint32_t ntok = 0, nblk = 0;
    for (uint32_t i = 0; i < it->nruns; i++)
        if (!write_run(sv, &it->runs[i], i, &ntok, &nblk)) {
            printf("SERVE abort reason=mailbox_full n=%" PRIu32 "\n", sv->seq + 1);
            return NPU_ERR_NOMEM;
        }
    mb->cmd = RT_MB_RUN, mb->nruns = it->nruns, mb->nprefill = it->nprefill;
    mb->layer0 = it->layer0, mb->layer1 = it->layer1, mb->engine_trace = sv->engine_trace;
    uint64_t t0 = hal_time_ps();
    mb->seq = sv->seq + 1;
    post_go(sv);
    int rc = hal_sem_wait(RT_SEM_DONE, sv->seq * sv->ncores);
    uint64_t t1 = hal_time_ps();
    if (rc != NPU_OK || mb->failed) {
        printf("SERVE abort reason=core_failed n=%" PRIu32 "\n", sv->seq);
        return rc != NPU_OK ? rc : NPU_ERR_STATE;
    }
    record_tokens(sv, it, t1);
    print_iteration(sv, it, t0, t1);
    return NPU_OK;
}

void serve_stop_cores(struct serve *sv)
{
    sv->mb->cmd = RT_MB_STOP;
    post_go(sv);
    hal_sem_wait(RT_SEM_DONE, sv->seq * sv->ncores);
}
