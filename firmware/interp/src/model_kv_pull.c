/* SPDX-License-Identifier: MIT */
/*
 * KV pull (PD disaggregation, docs/serving.md): a decode core copies a request's prompt KV,
 * every layer of its stage, K and V, from the core of the same rank and stage in the
 * prefill instance. Both cores were planned alike (npu_plan.instances), so a position's
 * bytes sit at the same offsets in both; only which blocks and which ring segment differ.
 * With split attention each pair of cores moves the rows of its own positions only.
 *
 * Each piece goes by the cheapest path the engines allow: source in the other core's SRAM
 * and destination in this core's SRAM: one NoC read; source in HBM: one DMA copy (to SRAM or
 * HBM); source in the other core's SRAM and destination in HBM: a NoC read into the tile
 * buffers (free before the iteration's layers run), then a DMA copy. Modelled: the bytes
 * and their routes. Not modelled: overlap of the pull with the previous decode iteration
 * (the decode core pulls at the start of the iteration that first decodes the request).
 */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>

#include "model_exec.h"
#include "noc/noc.h"
#include "npu/hal.h"

static bool in_sram(uint64_t addr, uint64_t sram, uint64_t bytes)
{
    return addr >= sram && addr - sram < bytes;
}

/* One NoC read; a full queue is drained first. */
static int pull_read(uint64_t dst, uint64_t src, uint32_t bytes)
{
    struct noc_read_async_args a = { .src = src, .dst = dst, .bytes = bytes };
    int rc = noc_read_async(&a);
    if (rc == NPU_ERR_NOMEM) {
        rc = noc_read_barrier();
        if (rc == NPU_OK)
            rc = noc_read_async(&a);
    }
    return rc;
}

/* One contiguous piece of `bytes` from src to dst. */
static int pull_piece(struct exec_model *m, const struct exec_kv_pull *p, uint64_t dst,
                      uint64_t src, uint64_t bytes)
{
    const uint64_t sram_bytes = hal_self()->sram_size;
    const bool src_remote = in_sram(src, p->src.sram, sram_bytes);
    if (!src_remote) { /* HBM: the DMA takes it to SRAM or HBM */
        exec_copy(m, dst, src, 1, bytes, bytes, bytes);
        return NPU_OK;
    }
    if (in_sram(dst, m->buf.sram, sram_bytes))
        return pull_read(dst, src, (uint32_t)bytes);
    /* remote SRAM to HBM: through the bounce buffer, a piece at a time */
    for (uint64_t at = 0; at < bytes; at += p->bounce_bytes) {
        uint64_t n = bytes - at < p->bounce_bytes ? bytes - at : p->bounce_bytes;
        int rc = exec_flush(m); /* the bounce buffer's previous copy is done */
        if (rc == NPU_OK)
            rc = pull_read(p->bounce, src + at, (uint32_t)n);
        if (rc == NPU_OK)
            rc = noc_read_barrier();
        if (rc != NPU_OK)
            return rc;
        exec_copy(m, dst + at, p->bounce, 1, n, n, n);
    }
    return NPU_OK;
}

int exec_kv_pull(struct exec_model *m, const struct exec_kv_pull *p)
{
    const uint64_t row = npu_kv_row_bytes(m->cfg, m->plan);
    const uint32_t l0 = m->pipe.stage * m->plan->stage_layers;
    const uint32_t rows = exec_kv_local_count(m, p->req, p->count); /* this rank's of them */
    assert(p->bounce_bytes >= row);
    /* HAZARD: the bounce buffer overlays the residual tiles (xt...), whose copies back to
       HBM may still run on the second DMA queue, and the NoC reads into it are not chain
       descriptors: wait for what touches it first */
    int rc = exec_wait_for(m, p->bounce, p->bounce_bytes);
    for (uint32_t l = l0; rc == NPU_OK && l < l0 + m->plan->stage_layers; l++)
        for (uint32_t v = 0; rc == NPU_OK && v < 2; v++)
            for (uint32_t at = 0; rc == NPU_OK && at < rows;) {
                uint32_t ss, ds;
                uint64_t src = exec_kv_addr(m, &p->src, l, v, at, &ss);
                uint64_t dst = exec_kv_addr(m, &p->dst, l, v, at, &ds);
                uint32_t n = rows - at;
                n = n < ss ? n : ss;
                n = n < ds ? n : ds;
                rc = pull_piece(m, p, dst, src, (uint64_t)n * row);
                at += n;
            }
    if (rc == NPU_OK)
        rc = noc_read_barrier();
    if (rc == NPU_OK)
        rc = exec_flush(m);
    if (rc != NPU_OK)
        printf("MODEL error: core %u: KV pull of %u positions failed (%d)\n",
               hal_self()->core_id, p->count, rc);
    return rc;
}
