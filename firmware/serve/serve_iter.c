/* SPDX-License-Identifier: MIT */
/*
 * Serve image, control core: one iteration through the mailbox (rt/mailbox.h). The
 * scheduler's plan becomes the mailbox's runs with their token ids and KV blocks; the
 * cores run it; the tokens come back, are printed with the chip time they were ready at,
 * and the scheduler is told.
 */
#include "npu/hal.h"
#include "npu/wait.h"
#include "rt/lines.h"
#include "serve_ctrl.h"

/* Prompt token `pos` of request r: the trace's ids, else (performance runs) a stand-in. */
static uint32_t prompt_token(const struct serve *sv, uint32_t r, uint32_t pos)
{
    const struct rt_blob_req *b = &rt_blob_reqs(sv->blob)[r];
    if (b->ids_first != RT_BLOB_NO_IDS)
        return rt_blob_ids(sv->blob)[b->ids_first + pos];
    return (uint32_t)((pos * 7919ull + r * 104729ull + 1) % sv->vocab);
}

/* The cache `run` uses on its instance, and for a pull the one it copies from. */
static void run_caches(const struct serve *sv, const struct rt_run *run,
                       const struct rt_kv_seq **seq, const struct rt_kvc **src_kvc,
                       const struct rt_kv_seq **src)
{
    *seq = &sv->reqs[run->req].kv, *src = NULL, *src_kvc = NULL;
    if (!sv->pd_mode)
        return;
    if (run->prefill)
        *seq = &sv->pd.pkv[run->req];
    if (run->pull)
        *src = &sv->pd.pkv[run->req], *src_kvc = &sv->inst[sv->pd.pinst[run->req]].kvc;
}

/* The mailbox's copy of run k of instance i; false if the mailbox's arrays are full (not
   expected: the plan bounds rows, and npuctl serve the blocks a full batch lists). */
static bool write_run(struct serve *sv, uint32_t i, const struct rt_run *run, uint32_t k,
                      uint32_t *ntok, uint32_t *nblk)
{
    struct serve_inst *in = &sv->inst[i];
    const struct rt_kv_seq *q, *src;
    const struct rt_kvc *src_kvc;
    run_caches(sv, run, &q, &src_kvc, &src);
    const uint32_t held = kvc_seq_nblocks(q), pulled = src ? kvc_seq_nblocks(src) : 0;
    if (*ntok + run->count > RT_MB_TOKENS_MAX || *nblk + held + pulled > RT_MB_BLOCKS_MAX)
        return false;
    in->mb->runs[k] = (struct rt_mb_run){
        .req = run->req, .pos = run->pos, .count = run->count,
        .flags = (run->prefill ? RT_MB_PREFILL : 0) | (run->wants_token ? RT_MB_WANTS_TOKEN : 0) |
                 (src ? RT_MB_PULL : 0),
        .token_first = *ntok, .block_first = *nblk, .nblocks = held,
        .ring_row = q->ring_row == RT_KVC_NO_RING ? 0 : q->ring_row };
    for (uint32_t j = 0; j < run->count; j++)
        in->mb->tokens[*ntok + j] = run->prefill ? prompt_token(sv, run->req, run->pos + j)
                                                 : sv->last_token[run->req];
    kvc_seq_block_ids(&in->kvc, q, &in->mb->blocks[*nblk], held);
    *ntok += run->count, *nblk += held;
    if (src) {
        struct rt_mb_run *m = &in->mb->runs[k];
        m->pull_instance = sv->pd.pinst[run->req], m->pull_block_first = *nblk;
        m->pull_nblocks = pulled;
        m->pull_ring_row = src->ring_row == RT_KVC_NO_RING ? 0 : src->ring_row;
        kvc_seq_block_ids(src_kvc, src, &in->mb->blocks[*nblk], pulled);
        *nblk += pulled;
    }
    return true;
}

static void post_go(struct serve_inst *in)
{
    in->seq++;
    for (uint32_t c = 0; c < in->ncores; c++) {
        struct hal_sem_post_args go = { .core = in->cores[c], .sem = RT_SEM_GO,
                                        .op = NPU_SEM_OP_INC, .value = 1 };
        hal_sem_post(&go);
    }
}

static void print_iteration(const struct serve *sv, uint32_t i, const struct rt_iter_plan *it,
                            uint64_t t1)
{
    const struct serve_inst *in = &sv->inst[i];
    uint32_t pulls = 0;
    for (uint32_t k = 0; k < it->nruns; k++)
        pulls += it->runs[k].pull;
    lines_print_serve_iter(&(struct lines_serve_iter){
        .n = in->n, .t0 = in->t0, .t1 = t1, .runs = it->nruns, .prefill = it->prefill_tokens,
        .decode = it->decode_tokens, .group = it->group, .groups = it->groups,
        .queue = sv->pd_mode  ? pd_queue_len(&sv->pd)
                 : sv->disagg ? sched_queue_len(&sv->dsched[i])
                              : sched_queue_len(&sv->sched),
        .running = sv->pd_mode  ? sv->pd.inst[i].nrunning
                   : sv->disagg ? sv->dsched[i].nrunning
                                : sv->sched.nrunning,
        .blocks = { kvc_blocks_used(&in->kvc), in->kvc.cfg.sram_blocks },
        .ring = { kvc_ring_rows_used(&in->kvc), in->kvc.cfg.ring_rows }, .inst = i,
        .pulls = pulls, .cached = in->kvc.px ? in->kvc.px->cached : 0,
        .evicted = in->kvc.px ? in->kvc.px->evictions : 0,
        .absent = { .cached = !in->kvc.px, .evicted = !in->kvc.px } });
    if (!sv->engine_trace)
        return;
    for (uint32_t c = 0; c < in->ncores; c++) {
        const uint64_t *b = in->mb->busy_ps[in->cores[c]];
        lines_print_serve_engines(&(struct lines_serve_engines){
            .core = in->cores[c], .n = in->n, .matrix = b[0], .vector = b[1], .dma = b[2],
            .noc = b[3] });
    }
}

/* Tokens of the runs that wanted one, at chip time t. */
static void record_tokens(struct serve *sv, uint32_t i, const struct rt_iter_plan *it,
                          uint64_t t)
{
    for (uint32_t k = 0; k < it->nruns; k++) {
        const struct rt_run *run = &it->runs[k];
        if (!run->wants_token)
            continue;
        uint32_t tok = sv->inst[i].mb->out_token[k];
        sv->last_token[run->req] = tok;
        lines_print_serve_token(&(struct lines_serve_token){
            .id = run->req, .n = sv->reqs[run->req].generated, .t = t, .token = tok });
    }
}

int serve_post(struct serve *sv, uint32_t i, const struct rt_iter_plan *it)
{
    struct serve_inst *in = &sv->inst[i];
    struct rt_mailbox *mb = in->mb;
    uint32_t ntok = 0, nblk = 0;
    for (uint32_t k = 0; k < it->nruns; k++)
        if (!write_run(sv, i, &it->runs[k], k, &ntok, &nblk)) {
            serve_abort(&(struct lines_serve_abort){
                .reason = "mailbox_full", .n = sv->iterations + 1,
                .absent = { .queue = true, .detail = true } });
            return NPU_ERR_NOMEM;
        }
    mb->cmd = RT_MB_RUN, mb->nruns = it->nruns, mb->nprefill = it->nprefill;
    mb->layer0 = it->layer0, mb->layer1 = it->layer1, mb->engine_trace = sv->engine_trace;
    in->n = ++sv->iterations;
    in->t0 = hal_time_ps();
    mb->seq = in->seq + 1;
    post_go(in);
    return NPU_OK;
}

void serve_post_round(struct serve *sv, uint32_t i)
{
    struct serve_inst *in = &sv->inst[i];
    struct rt_mailbox *mb = in->mb;
    mb->cmd = RT_MB_RUN, mb->nruns = 0, mb->nprefill = 0;
    mb->layer0 = 0, mb->layer1 = 0, mb->engine_trace = sv->engine_trace;
    mb->seq = in->seq + 1;
    post_go(in);
}

bool serve_answered(const struct serve *sv, uint32_t i)
{
    return hal_sem_read(RT_SEM_ANSWER0 + i) == sv->inst[i].seq;
}

int serve_wait_answer(struct serve *sv, uint64_t deadline_ps)
{
    int rc = deadline_ps == UINT64_MAX
                 ? hal_sem_wait(RT_SEM_DONE, sv->answers + 1)
                 : hal_sem_wait_until(RT_SEM_DONE, sv->answers + 1, deadline_ps);
    if (rc == NPU_OK)
        sv->answers = hal_sem_read(RT_SEM_DONE);
    return rc == NPU_ERR_TIMEOUT ? NPU_OK : rc;
}

int serve_finish(struct serve *sv, uint32_t i, const struct rt_iter_plan *it)
{
    const struct serve_inst *in = &sv->inst[i];
    uint64_t t1 = hal_time_ps();
    if (in->mb->failed) {
        serve_abort(&(struct lines_serve_abort){
            .reason = "core_failed", .n = in->n, .absent = { .queue = true, .detail = true } });
        return NPU_ERR_STATE;
    }
    record_tokens(sv, i, it, t1);
    print_iteration(sv, i, it, t1);
    return NPU_OK;
}

int serve_run_iteration(struct serve *sv, struct rt_iter_plan *it)
{
    int rc = serve_post(sv, 0, it);
    while (rc == NPU_OK && !serve_answered(sv, 0))
        serve_wait_answer(sv, UINT64_MAX);
    return rc == NPU_OK ? serve_finish(sv, 0, it) : rc;
}

void serve_stop_cores(struct serve *sv)
{
    for (uint32_t i = 0; i < sv->ninst; i++) { /* one instance's reports after another's */
        sv->inst[i].mb->cmd = RT_MB_STOP;
        post_go(&sv->inst[i]);
        while (!serve_answered(sv, i))
            serve_wait_answer(sv, UINT64_MAX);
    }
}
