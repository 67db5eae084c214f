/* SPDX-License-Identifier: MIT */
/*
 * Pipeline stages (model_exec.h, docs/images.md "Pipeline stages"): the hand-over of an
 * iteration's residual rows from a stage to the next, rank to rank over the NoC, and of the
 * tokens from the last stage back to the others. A message's arrival increments a
 * semaphore of the receiver, which sleeps on it (never spins); each message is acknowledged
 * before the sender goes on, so a buffer is never rewritten while in flight. Residual rows
 * the plan keeps in HBM are not sent: the sender says they are ready and the receiver
 * copies them from the sender's HBM rows (a DMA, HBM to HBM). The next iteration starts
 * only when the tokens are back. Without micro-batches the stages run one after another
 * within an iteration, so a receiver's buffers are idle when a message lands; with them
 * (plan.micro_batches) a message lands while the receiver runs another part, which is safe
 * because the parts' residual rows, and their tokens' places in argmax, do not overlap.
 */
#include <assert.h>

#include "model_exec.h"
#include "noc/noc.h"
#include "npu/hal.h"

#define SEM_PIPE 3u   /* +1 per residual message received */
#define SEM_TOKENS 4u /* +1 per token message received */

/* The same SRAM offset as `addr` of this core, in core `core`. */
static uint64_t peer_addr(const struct exec_model *m, uint32_t core, uint64_t addr)
{
    return noc_sram_addr(core, addr - m->buf.sram);
}

/* bytes from src to the same place of core's SRAM, plus `at` bytes */
static int send(struct exec_model *m, uint32_t core, uint64_t src, uint64_t at, uint64_t bytes,
                uint32_t sem, bool control)
{
    assert(bytes >= 1 && bytes <= UINT32_MAX);
    struct noc_write_async_args w = {
        .src = src, .dst = peer_addr(m, core, src + at), .bytes = (uint32_t)bytes,
        .on_arrival = { .enable = true, .core = (uint16_t)core, .sem = (uint8_t)sem,
                        .value = 1 },
        .control = control };
    return noc_write_async(&w);
}

int exec_pipe_send(struct exec_model *m, uint32_t row0, uint32_t rows)
{
    assert(m->pipe.stage + 1 < m->pipe.stages);
    const uint64_t row = (uint64_t)m->cfg->hidden_size * m->buf.eb;
    /* in HBM, the rows' last copies back run on the second DMA queue, which a flush does
       not wait for: the next stage copies them from there once signalled */
    int rc = exec_flush(m);
    if (rc == NPU_OK && !m->buf.x_in_sram)
        rc = exec_wait_for(m, m->buf.x_all + row0 * row, rows * row);
    if (rc != NPU_OK)
        return rc;
    enum exec_cat was = m->acct.cat;
    exec_set_cat(m, EXEC_CAT_COLL);
    const uint32_t next = m->pipe.core[m->pipe.stage + 1];
    if (m->buf.x_in_sram) {
        rc = send(m, next, m->buf.x_all + row0 * row, 0, rows * row, SEM_PIPE, false);
    } else { /* in HBM, where they are: the next stage copies them */
        struct noc_sem_args ready = { .core = next, .sem = SEM_PIPE, .value = 1 };
        rc = noc_sem_inc(&ready);
    }
    if (rc == NPU_OK)
        rc = noc_write_barrier();
    exec_set_cat(m, was);
    return rc;
}

int exec_pipe_recv(struct exec_model *m, uint32_t row0, uint32_t rows)
{
    assert(m->pipe.stage > 0);
    enum exec_cat was = m->acct.cat;
    exec_set_cat(m, EXEC_CAT_COLL); /* waiting for the previous stage counts here */
    int rc = noc_sem_wait(SEM_PIPE, ++m->pipe.recvs);
    if (rc == NPU_OK && !m->buf.x_in_sram) { /* the previous stage is done with them */
        const uint64_t row = (uint64_t)m->cfg->hidden_size * m->buf.eb, at = row0 * row;
        exec_copy(m, m->buf.x_all + at, m->pipe.prev_x + at, 1, rows * row, rows * row,
                  rows * row);
        rc = exec_flush(m);
    }
    exec_set_cat(m, was);
    return rc;
}

int exec_pipe_send_tokens(struct exec_model *m, uint32_t nw, uint32_t w0)
{
    assert(m->pipe.stage + 1 == m->pipe.stages && w0 + nw <= m->plan->max_batch);
    int rc = NPU_OK;
    for (uint32_t s = 0; rc == NPU_OK && s + 1 < m->pipe.stages; s++)
        rc = send(m, m->pipe.core[s], m->buf.a.argmax, w0 * 4ull, nw * 4ull, SEM_TOKENS, true);
    return rc == NPU_OK ? noc_write_barrier() : rc;
}

int exec_pipe_recv_tokens(struct exec_model *m)
{
    assert(m->pipe.stage + 1 < m->pipe.stages);
    return noc_sem_wait(SEM_TOKENS, ++m->pipe.token_recvs);
}
