/* SPDX-License-Identifier: MIT */
/*
 * The MoE's outputs into the residual rows tile by tile (docs/images.md, "MoE outputs by
 * tiles"). Under expert parallelism each rank sums the MoE outputs of its slice of the op's
 * rows (model_moe_ep.c, step 4), and every rank adds every row's to its residual rows (step
 * 5), because the next layer's attention reads whole rows on every rank. One all-gather of
 * all of them made the next layer's first QKV GEMM wait for the last row: a 512-row prefill
 * of Qwen3-30B-A3B on large-64 gathers 2 MiB into every rank, 7.2 us a layer with the
 * array idle. Where the next op is the next layer's attention over the same rows, in SRAM
 * and tile by tile (model_layer_ops.c, attn_tiles), the rows go tile by tile instead: the
 * first tile's at once, each later tile's when the attention is about to read it (its norm
 * and QKV GEMM), which is beside the tile before's softmax steps. A tile's rows go as one
 * exchange of blocks: each rank whose slice holds rows of the tile multicasts them to the
 * whole group (noc_exchange_blocks, NOC_EXCHANGE_GROUP), into ep_out at their place.
 * Each element is added as the one all-gather would have it, so no result changes.
 * Modelled: the exchanges' traffic, agreements and waits. Not done: anything but a MoE op
 * that is its layer's only MoE tile, whose next layer runs on this core's stage, with the
 * rows in SRAM, on a mesh2d group (a rectangle of cores), without reuse or
 * disaggregation; anything else reading the rows first settles them (exec_layer_rows_settle).
 * HAZARD: ep_out holds the sums until the last tile's rows are added; nothing else writes
 * it between a MoE op and the next layer's attention (the dispatch buffers and the
 * attention's chunks lie elsewhere: npu_layout.c).
 */
#include <assert.h>

#include "model_moe.h"
#include "noc/collective.h"

/* The rows waiting: layer `layer`'s MoE outputs of its n rows (each rank's slice of
   `slice` rows in ep_out at its place), rows [0, done) already added to the residual rows
   at xt. */
struct moe_rows_wait {
    bool set;
    uint32_t layer, n, slice, done;
    uint64_t xt;
};
static struct moe_rows_wait later;

bool exec_moe_rows_defers(const struct exec_model *m, const struct exec_tile *tile)
{
    /* attn_next: the next layer's attention over these rows is the next op on this core,
       nothing reused */
    return m->attn_next && tile->whole && tile->n > m->plan->tile_rows && m->buf.x_in_sram &&
           !m->plan->disagg && m->tp > 1 && m->comm->group.placement == NOC_PLACE_MESH2D &&
           !noc_group_is_pair(&m->comm->group);
}

/* Rows [a, b) of the waiting ones: the ranks holding any multicast theirs to every rank,
   then every rank adds them. */
static int gather_rows(struct exec_model *m, uint32_t a, uint32_t b)
{
    const uint32_t d = m->cfg->hidden_size, S = later.slice;
    const uint64_t row = (uint64_t)d * m->buf.eb, out = m->buf.a.ep_out;
    uint32_t owners = 0;
    for (uint32_t q = 0; q < m->tp; q++) /* the slices [q S, q S + S) that meet [a, b) */
        owners += (uint64_t)q * S < b && (uint64_t)q * S + S > a && (uint64_t)q * S < later.n;
    const uint32_t lo = m->rank * S, hi = lo + S < later.n ? lo + S : later.n;
    const uint32_t r0 = lo > a ? lo : a, r1 = hi < b ? hi : b;
    const struct noc_exchange_block blk = {
        .src = out + r0 * row, .dst_offset = r0 * row, .to = 0, .dest = NOC_EXCHANGE_GROUP,
        .rows = r1 > r0 ? r1 - r0 : 0, .row_bytes = (uint32_t)row, .src_stride = (uint32_t)row,
        .dst_stride = (uint32_t)row };
    const struct noc_exchange_args x = { .buf = out, .bytes = (uint64_t)later.n * row,
                                         .blocks = &blk, .nblocks = r0 < r1,
                                         .arrivals = owners, .multicast = true };
    /* this rank's sums of the rows (the vector queue) before any rank writes them */
    const enum exec_cat was = m->acct.cat;
    int rc = exec_wait_for_collective(m, out + (uint64_t)a * row, (uint64_t)(b - a) * row);
    exec_set_cat(m, EXEC_CAT_COLL);
    rc = rc == NPU_OK ? noc_exchange_blocks(m->comm, &x) : rc;
    exec_set_cat(m, was);
    if (rc == NPU_OK)
        exec_add_rows(m, later.xt + (uint64_t)a * row, out + (uint64_t)a * row, b - a, d);
    return rc;
}

/* The waiting rows up to row `upto` (of the op's), tile by tile. */
static int gather_upto(struct exec_model *m, uint32_t upto)
{
    const uint32_t T = m->plan->tile_rows;
    int rc = NPU_OK;
    upto = upto < later.n ? upto : later.n;
    while (rc == NPU_OK && later.done < upto) {
        const uint32_t b = later.n - later.done < T ? later.n : later.done + T;
        rc = gather_rows(m, later.done, b);
        later.done = b;
    }
    later.set = later.done < later.n;
    return rc;
}

int exec_moe_rows_start(struct exec_model *m, uint32_t l, const struct exec_tile *tile,
                        uint32_t slice)
{
    assert(!later.set && "the rows of one MoE op wait at a time");
    later = (struct moe_rows_wait){ .set = true, .layer = l, .n = tile->n, .slice = slice,
                                    .xt = tile->xt };
    return gather_upto(m, m->plan->tile_rows);
}

int exec_moe_rows_take(struct exec_model *m, uint32_t l, uint64_t x, uint32_t upto)
{
    if (!later.set)
        return NPU_OK;
    if (later.layer + 1 != l || later.xt != x) /* not the attention they wait for */
        return exec_moe_rows_settle(m);
    return gather_upto(m, upto);
}

int exec_moe_rows_settle(struct exec_model *m)
{
    return later.set ? gather_upto(m, later.n) : NPU_OK;
}

bool exec_moe_rows_pending(void)
{
    return later.set;
}

void exec_moe_rows_forget(void)
{
    later.set = false;
}
