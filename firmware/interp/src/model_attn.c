/* SPDX-License-Identifier: MIT */
/*
 * Attention of one tile of rows (model_exec.h): QKV, q/k norms and RoPE, the new keys and
 * values into the KV cache, an online softmax over the cache in steps, the O projection.
 *
 * Shapes: n = tile rows, d = hidden size, qd = heads x hd, kvd = kv heads x hd, group =
 * heads / kv heads, B = kv_block, A = attn_block (positions per step). The tile's softmax
 * state is laid out per KV head h: rows h x span + row x group + j (span = n x group, j the
 * query head within h's group), R = kv heads x span rows in all: qg [R][hd] eb, acc [R][hd]
 * fp32, then the running sums l [R] fp32 right after acc, maxima m_a/m_b [R] fp32.
 *
 * Split attention (npu_plan.kv_split, docs/images.md "Split attention"): cache block b
 * lives on rank (b + shift) % tp only (npu_layout.h: local rows, npu_kv_rank_shift), every
 * rank runs the online softmax over its own positions, and the ranks then combine their
 * states (attn_combine): an all-reduce with MAX gives the rows' global maxima M, each rank
 * rescales its acc and l by exp(m_rank - M), acc and l are reduce-scattered (each rank then
 * holds R / tp rows' sums), each rank divides its rows, and an all-gather of acc / l gives
 * every rank the output (one all-reduce of [acc | l] and every rank dividing all R rows
 * where R is not a multiple of tp).
 * A rank holding none of a segment's positions contributes m = MASKED, l = 0, acc = 0.
 *
 * The window and the combine are in model_attn_window.c.
 * Modelled: every op and byte of that. Not modelled: overlapping the combine with the
 * next segment's or layer's work (the collectives wait for the queued ops).
 */
#include <assert.h>
#include <math.h>

#include "model_attn.h"
#include "model_exec.h"
#include "model_hazard.h"
#include "npu/hal.h"
#include "npu/vector.h"

/* Split: which block of each stripe of request req this rank holds (npu_layout.h:
   block b is on rank (b + shift) mod tp). */
static uint32_t attn_kv_slot(const struct exec_model *m, uint32_t req)
{
    return (m->rank + m->tp - m->kv_shift[req % m->tp]) % m->tp;
}

/* Position of this rank's local row lr of request req (npu_layout.h). */
static uint32_t attn_kv_position(const struct exec_model *m, uint32_t req, uint32_t lr)
{
    const uint32_t B = m->plan->kv_block;
    if (!npu_kv_is_split(m->plan))
        return lr;
    return lr / B * npu_kv_stripe(m->plan) + attn_kv_slot(m, req) * B + lr % B;
}

static uint32_t attn_kv_local_row(const struct exec_model *m, uint32_t pos)
{
    const uint32_t B = m->plan->kv_block;
    return npu_kv_is_split(m->plan) ? pos / npu_kv_stripe(m->plan) * B + pos % B : pos;
}

static bool attn_kv_owns(const struct exec_model *m, uint32_t req, uint32_t pos)
{
    return !npu_kv_is_split(m->plan) || pos / m->plan->kv_block % m->tp == attn_kv_slot(m, req);
}

uint32_t exec_kv_local_count(const struct exec_model *m, uint32_t req, uint32_t count)
{
    const uint32_t B = m->plan->kv_block, W = npu_kv_stripe(m->plan);
    if (!npu_kv_is_split(m->plan))
        return count;
    const uint32_t rest = count % W, before = attn_kv_slot(m, req) * B;
    const uint32_t tail = rest <= before ? 0 : rest - before < B ? rest - before : B;
    return count / W * B + tail;
}

/* This rank's local rows [*r0, *r1) holding request req's positions of [lo, hi]; false if
   none. */
static bool attn_kv_local_range(const struct exec_model *m, uint32_t req, uint32_t lo,
                                uint32_t hi, uint32_t *r0, uint32_t *r1)
{
    const uint64_t B = m->plan->kv_block, tp = m->tp;
    const uint64_t r = npu_kv_is_split(m->plan) ? attn_kv_slot(m, req) : 0;
    uint64_t first = lo, last = hi;
    if (npu_kv_is_split(m->plan)) {
        uint64_t b = lo / B, dn = (r + tp - b % tp) % tp; /* blocks to the next owned one */
        first = dn ? (b + dn) * B : lo;
        b = hi / B;
        uint64_t up = (b % tp + tp - r) % tp;             /* blocks back to the last one */
        if (up > b)
            return false;
        last = up ? (b - up) * B + B - 1 : hi;
    }
    if (first > last)
        return false;
    *r0 = attn_kv_local_row(m, (uint32_t)first);
    *r1 = attn_kv_local_row(m, (uint32_t)last) + 1;
    return true;
}

uint64_t exec_kv_addr(const struct exec_model *m, const struct exec_kv_cache *k, uint32_t l,
                      bool v, uint32_t row, uint32_t *span)
{
    const uint32_t B = m->plan->kv_block, blk = row / B, S = m->plan->kv_sram_blocks;
    if (blk < k->nblocks) {
        /* Ids from S on are blocks of the ring (a paged ring, rt/kvc.h): ring rows
           [(id - S) x B, + B). A span stays in one memory. */
        const uint32_t id = k->blocks[blk];
        const bool ring = id >= S;
        uint32_t last = blk;
        while (last + 1 < k->nblocks && k->blocks[last + 1] == k->blocks[last] + 1 &&
               (k->blocks[last + 1] >= S) == ring)
            last++;
        *span = (last + 1 - blk) * B - row % B;
        if (ring)
            return k->ring + npu_kv_ring_offset(m->cfg, m->plan, v, l,
                                                (uint64_t)(id - S) * B + row % B);
        return k->pool + npu_kv_pool_offset(m->cfg, m->plan, v, l, id, row % B);
    }
    *span = UINT32_MAX;
    return k->ring + npu_kv_ring_offset(m->cfg, m->plan, v, l, k->ring_row + row);
}

static struct exec_kv_cache attn_run_cache(const struct exec_model *m, const struct exec_run *r)
{
    return (struct exec_kv_cache){ .sram = m->buf.sram, .pool = m->buf.kv_pool,
                                   .ring = m->buf.kv_ring, .blocks = r->blocks,
                                   .nblocks = r->nblocks, .ring_row = r->ring_row };
}

/* Segment g's new keys and values of the positions this rank holds into its cache, split
   where its blocks are. */
static void attn_store_kv(struct exec_model *m, uint32_t l, const struct exec_seg *g)
{
    const uint64_t row = npu_kv_row_bytes(m->cfg, m->plan);
    const uint32_t B = m->plan->kv_block;
    const struct exec_kv_cache k = attn_run_cache(m, g->run);
    for (uint32_t i = 0; i < g->count;) {
        const uint32_t pos = g->pos + i, to_block_end = B - pos % B;
        if (!attn_kv_owns(m, g->req, pos)) {
            i += to_block_end;
            continue;
        }
        uint32_t span, lr = attn_kv_local_row(m, pos);
        uint64_t kd = exec_kv_addr(m, &k, l, false, lr, &span);
        uint64_t vd = exec_kv_addr(m, &k, l, true, lr, &span);
        uint32_t n = g->count - i < span ? g->count - i : span;
        if (npu_kv_is_split(m->plan) && n > to_block_end) /* the next block is another rank's */
            n = to_block_end;
        exec_copy(m, kd, m->buf.a.knew + (g->row + i) * row, 1, n * row, n * row, n * row);
        exec_copy(m, vd, m->buf.a.vnew + (g->row + i) * row, 1, n * row, n * row, n * row);
        i += n;
    }
}

/* The norm (if the model has one) and RoPE of `rows` head vectors of hd at buf, `per` of
   them to a position (row r's at positions[r / per]). */
static void attn_rotate_heads(struct exec_model *m, uint32_t l, enum model_tensor_kind norm,
                              uint64_t buf, uint32_t rows, uint32_t per)
{
    const struct model_config *c = m->cfg;
    if (c->qk_norm)
        exec_rmsnorm(m, buf, buf, exec_weight_addr(m, l, norm), rows, c->head_dim);
    exec_vec(m, exec_vec_act(m, (struct vector_op_args){
        .op = NPU_VECTOR_OP_ROPE, .x = buf, .y = m->buf.a.positions, .out = buf, .rows = rows,
        .cols = c->head_dim, .k = per, .rope_half = true, .scalar = (float)c->rope_theta }));
}

/* q/k norms and RoPE of the tile's rows (q's only with `queries`). */
static void attn_rotate(struct exec_model *m, uint32_t l, const struct exec_tile *tile,
                        bool queries)
{
    const struct model_config *c = m->cfg;
    const struct npu_act_layout *a = &m->buf.a;
    const uint32_t nh = c->num_heads, nkv = c->num_kv_heads, n = tile->n;
    uint32_t *pos = (uint32_t *)(uintptr_t)a->positions;
    for (uint32_t s = 0; s < tile->nsegs; s++) /* the chain was flushed: nothing reads it */
        for (uint32_t i = 0; i < tile->segs[s].count; i++)
            pos[tile->segs[s].row + i] = tile->segs[s].pos + i;
    if (queries)
        attn_rotate_heads(m, l, MT_Q_NORM, a->q, n * nh, nh);
    attn_rotate_heads(m, l, MT_K_NORM, a->knew, n * nkv, nkv);
}

/* KV head h's unit of a whole window on this rank (attn_window_whole): its query heads are
   the only ones it reads, so only they are normed and rotated, in qg's [n x group] rows. */
static bool attn_unit_head(const struct exec_model *m, const struct exec_tile *tile,
                           uint32_t window, uint32_t *h)
{
    const uint32_t parts = m->tp / m->cfg->num_kv_heads;
    if (m->tp < 2 || !npu_kv_is_split(m->plan) || !attn_window_whole(m, tile, window))
        return false;
    *h = m->rank / parts; /* attn_window_whole: kv heads x parts = tp, units in rank order */
    return true;
}

/* The tile's keys and values into the cache. */
static void attn_store(struct exec_model *m, uint32_t l, const struct exec_tile *tile)
{
    for (uint32_t s = 0; s < tile->nsegs; s++)
        attn_store_kv(m, l, &tile->segs[s]);
}

/* The state of `rows` rows from first_row after a step that is not the first: acc and the
   sum so far scaled by exp(old max - new max), then the step's sums (rsum) added. */
static void attn_rescale_state(struct exec_model *m, const struct attn_state *st,
                               uint64_t first_row, uint32_t rows, uint64_t m_old, uint64_t m_new)
{
    const uint64_t stat = first_row * 4, acc = m->buf.a.acc + first_row * m->cfg->head_dim * 4;
    attn_vec_f32(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_RESCALE, .x = acc,
                                             .y = m_old + stat, .aux = m_new + stat,
                                             .out = acc, .rows = rows,
                                             .cols = m->cfg->head_dim, .ldy = 1, .ldaux = 1 });
    attn_vec_f32(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_RESCALE, .x = st->l + stat,
                                             .y = m_old + stat, .aux = m_new + stat,
                                             .out = st->l + stat, .rows = rows, .cols = 1,
                                             .ldy = 1, .ldaux = 1 });
    attn_vec_f32(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_ADD, .x = st->l + stat,
                                             .y = m->buf.a.rsum + stat, .out = st->l + stat,
                                             .rows = 1, .cols = rows });
}

/* The online softmax update of `rows` state rows from state row `first_row` (fp32 statistics
   at m_old/m_new + first_row x 4) with their step's scores [rows][cols]: the new maxima,
   the probabilities (in the activations' type) into probs, and the sums; after a first
   step the state is rescaled by exp(old max - new max) and the step's sums added. */
void attn_softmax_update(struct exec_model *m, const struct attn_state *st,
                         uint64_t scores, uint64_t probs, uint64_t first_row,
                         uint32_t rows, uint32_t cols, bool first, uint64_t m_old,
                         uint64_t m_new)
{
    const uint64_t stat = first_row * 4;
    attn_vec_f32(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_ROW_MAX, .x = scores,
                                             .aux = m_new + stat, .rows = rows, .cols = cols,
                                             .ldaux = 1 });
    if (!first) /* running max */
        attn_vec_f32(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_MAX, .x = m_new + stat,
                                                 .y = m_old + stat, .out = m_new + stat,
                                                 .rows = 1, .cols = rows });
    struct vector_op_args e = exec_vec_f32((struct vector_op_args){
        .op = NPU_VECTOR_OP_EXP_SUM, .x = scores, .y = m_new + stat, .out = probs,
        .aux = (first ? st->l : m->buf.a.rsum) + stat, .rows = rows, .cols = cols, .ldy = 1,
        .ldaux = 1 });
    e.out_type = m->buf.dt;
    exec_vec(m, e);
    if (!first)
        attn_rescale_state(m, st, first_row, rows, m_old, m_new);
}

/* A unit's PV GEMM held back until the next unit's scores GEMM and softmax are issued, so
   that the array runs that scores GEMM while the vector engine runs this unit's softmax,
   and each GEMM finds the next one ready behind it (docs/engines.md: it then streams
   without its weight load and drain). Held only while two units' scores and
   probabilities fit in their buffers (the halves: decode rows' units are a few rows
   each), nor past a load over the V rows it reads (attn_pv_flush_over), nor out of
   exec_attention_steps. The next step of the same state rows takes it right behind its
   own scores GEMM, before its softmax (whose rescale of acc must follow this GEMM): the
   array runs that scores GEMM while the vector engine runs this step's softmax, where
   before it idled through it and then paid the PV GEMM's weight load and drain in full
   (a split-attention window unit's steps, 64 query rows against 384 positions: 1.53 us
   against 0.77 streaming). */
static struct {
    bool held;
    struct exec_gemm_args pv;
    uint32_t row, h0, slot; /* its segment's first tile row, first KV head, buffer half */
    uint64_t v_lo, v_hi;    /* the V rows it reads */
} attn_pv;

void attn_pv_flush(struct exec_model *m)
{
    if (attn_pv.held)
        exec_gemm_many(m, &attn_pv.pv);
    attn_pv.held = false;
}

bool attn_pv_is_held(void)
{
    return attn_pv.held;
}

/* Flush before a load into [lo, hi) of the V buffer: the held GEMM reads what it
   overwrites, and issued after the load it would read the new rows. */
static void attn_pv_flush_over(struct exec_model *m, uint64_t lo, uint64_t hi)
{
    if (attn_pv.held && lo < attn_pv.v_hi && attn_pv.v_lo < hi)
        attn_pv_flush(m);
}

/*
 * KV heads [h0, h0 + hb) of segment g against step s: each head's query heads as one matrix
 * of count x group rows (row t * group + j is row t's j-th head of the group, whose
 * position is pos + t: MASK's k = group), scores, mask, and the online softmax update of
 * (max, sum, acc). m_old/m_new: this step's parity of the max buffers. The heads' two GEMMs
 * are one batched command each (scores and probabilities of head h0 + i at i x rows x nb):
 * a decode row's GEMM is one fold of the array, whose weight load and drain cost about
 * four times its streaming, and a batch pays them once (docs/engines.md). The PV GEMM goes
 * after the next unit's scores where attn_pv allows.
 */
void attn_heads_step(struct exec_model *m, const struct attn_state *st,
                     const struct exec_seg *g, uint32_t h0, uint32_t hb,
                     const struct attn_step *s, struct attn_kv kv, bool first,
                     uint32_t window, uint64_t m_old, uint64_t m_new)
{
    const struct model_config *c = m->cfg;
    const struct npu_act_layout *a = &m->buf.a;
    const uint32_t hd = c->head_dim, kvd = c->num_kv_heads * hd, nb = s->nb;
    const uint32_t group = c->num_heads / c->num_kv_heads, rows = g->count * group;
    const uint64_t eb = m->buf.eb, row0 = h0 * st->span + (uint64_t)g->row * group;
    const uint64_t sc = (uint64_t)rows * nb; /* a head's scores (and probabilities) */
    const uint64_t half = (uint64_t)m->plan->tile_rows * group * m->plan->attn_block / 2;
    const bool two = sc * hb <= half; /* two units fit the buffers */
    if (attn_pv.held && !two)
        attn_pv_flush(m);
    /* the held GEMM is this unit's previous step's: it goes behind this step's scores GEMM,
       before this step's softmax, whose rescale of acc must follow it */
    const bool same = attn_pv.held && attn_pv.row == g->row && attn_pv.h0 == h0;
    const uint32_t slot = attn_pv.held ? attn_pv.slot ^ 1 : 0;
    const uint64_t scores = a->scores + slot * half * 4, probs = a->probs_blk + slot * half * eb;
    /* scores_i[rows][nb] = Q_h[rows][hd] K_step,h[nb][hd]^T, h = h0 + i */
    exec_gemm_many(m, &(struct exec_gemm_args){
                          .c = scores, .a = a->qg + row0 * hd * eb,
                          .b = kv.k + (uint64_t)h0 * hd * eb, .rows = rows, .n = nb, .k = hd,
                          .lda = hd, .ldb = kvd, .ldc = nb, .trans_b = true, .f32_out = true,
                          .batch = hb, .stride_a = st->span * hd * eb, .stride_b = hd * eb,
                          .stride_c = sc * 4 });
    if (same)
        attn_pv_flush(m);
    attn_vec_f32(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_SCALE, .x = scores,
                                             .out = scores, .rows = hb * rows, .cols = nb,
                                             .scalar = 1.0f / sqrtf((float)hd) });
    for (uint32_t i = 0; i < hb; i++) {
        const uint64_t sco = scores + i * sc * 4; /* head h0 + i's */
        /* row t sees positions up to pos + t, with a window the last `window` only */
        if (s->mask)
            attn_vec_f32(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_MASK, .x = sco,
                                                     .out = sco, .rows = rows, .cols = nb,
                                                     .k = group, .pos = g->pos - s->p0,
                                                     .scalar = (float)window });
        attn_softmax_update(m, st, sco, probs + i * sc * eb, row0 + i * st->span, rows, nb,
                            first, m_old, m_new);
    }
    /* acc_h[rows][hd] (+)= P_i[rows][nb] V_step,h[nb][hd] */
    const struct exec_gemm_args pv = {
        .c = a->acc + row0 * hd * 4, .a = probs, .b = kv.v + (uint64_t)h0 * hd * eb,
        .rows = rows, .n = hd, .k = nb, .lda = nb, .ldb = kvd, .ldc = hd, .f32_out = true,
        .accumulate = !first, .batch = hb, .stride_a = sc * eb, .stride_b = hd * eb,
        .stride_c = st->span * hd * 4 };
    attn_pv_flush(m); /* the held unit's, behind this unit's scores and softmax */
    if (!two) {
        exec_gemm_many(m, &pv);
        return;
    }
    attn_pv.held = true, attn_pv.pv = pv, attn_pv.row = g->row, attn_pv.h0 = h0;
    attn_pv.slot = slot, attn_pv.v_lo = kv.v, attn_pv.v_hi = kv.v + (uint64_t)nb * kvd * eb;
}

/* How many KV heads of a segment of `count` rows one step of nb positions batches: as many
   as the scores buffer holds ([tile rows x group][attn_block]; a head's take count x
   group x nb), at most NPU_GEMM_BATCH_MAX. A step shorter than attn_block (a split cache's
   one block per stripe) batches more heads: Qwen3-8B prefill-2048's steps of 128 of 384. */
static uint32_t attn_heads_batch(const struct exec_model *m, uint32_t count, uint32_t nb)
{
    const uint64_t t = m->plan->tile_rows, nkv = m->cfg->num_kv_heads;
    uint64_t hb = count && nb ? t * m->plan->attn_block / ((uint64_t)count * nb) : 1;
    hb = hb < nkv ? hb : nkv;
    hb = hb < NPU_GEMM_BATCH_MAX ? hb : NPU_GEMM_BATCH_MAX;
    return hb ? (uint32_t)hb : 1;
}

/* Where the next step's nb keys and values go in kblk and vblk: right after the previous
   step's, or back at row 0 when they do not fit (a ring of attn_block rows). A step's
   loads then wait only for the GEMMs of the steps whose rows they overwrite, so steps
   shorter than the block buffers load ahead of the previous step's GEMMs (a decode row's
   step is often one KV block: Qwen3-8B decode-b64 ran each block's 512 KiB load and its
   GEMMs one after the other). */
static struct attn_kv attn_step_rows(struct exec_model *m, uint32_t nb)
{
    const uint64_t row = npu_kv_row_bytes(m->cfg, m->plan);
    const uint32_t at = m->kv_step_at + nb <= m->plan->attn_block ? m->kv_step_at : 0;
    assert(nb <= m->plan->attn_block);
    m->kv_step_at = at + nb;
    return (struct attn_kv){ m->buf.a.kblk + at * row, m->buf.a.vblk + at * row };
}

/* K and V of local rows [lr, lr + nb) into the step's rows `to`: one copy per contiguous
   piece (side: on the second DMA queue). */
static void attn_gather_kv(struct exec_model *m, uint32_t l, const struct exec_kv_cache *k,
                           uint32_t lr, uint32_t nb, struct attn_kv to, bool side)
{
    const uint64_t row = npu_kv_row_bytes(m->cfg, m->plan);
    for (uint32_t at = lr, n; at < lr + nb; at += n) {
        uint32_t contig;
        uint64_t kd = exec_kv_addr(m, k, l, false, at, &contig);
        uint64_t vd = exec_kv_addr(m, k, l, true, at, &contig);
        n = lr + nb - at < contig ? lr + nb - at : contig;
        if (side) {
            exec_copy_side(m, to.k + (at - lr) * row, kd, n * row);
            exec_copy_side(m, to.v + (at - lr) * row, vd, n * row);
            continue;
        }
        exec_copy(m, to.k + (at - lr) * row, kd, 1, n * row, n * row, n * row);
        exec_copy(m, to.v + (at - lr) * row, vd, 1, n * row, n * row, n * row);
    }
}

/*
 * Steps still whole in the step ring, for a later tile of the same iteration and layer: a
 * prompt's chunk of several tiles reads the same cached positions before the window in each
 * tile (Qwen3-30B-A3B prefill-512 at context 8K on large-64: each of the 4 tiles loaded the
 * rank's block of 128 positions, two 128 KiB copies of 2.4 us on the chain's queue before
 * its first scores GEMM). A step is known by where its first key row lies in the cache and
 * its length, and kept only if it is one contiguous piece of the cache (two runs may share
 * the block of a step's first row, a prefix cache's, and not the blocks after it): the
 * positions before a tile's window were written by earlier iterations or
 * earlier tiles, and nothing rewrites them within the op. An entry is dropped when any
 * descriptor writes its rows (exec_attention_kept_written, from every descriptor's
 * accesses: the next step's loads, a buffer laid over the ring), at every MoE or FFN op
 * (whose peers' NoC writes no local descriptor declares) and at every recording and replay
 * of layer or tile reuse (a replay issues no descriptors: the steps it stands for would
 * have moved the ring). Only where attn_prefetch may load early (split attention, the QKV
 * GEMM's chunks not over the ring).
 */
#define ATTN_KEPT_MAX 4u
struct attn_kept_step {
    uint64_t src, bytes; /* the step's first key row in the cache; its K (and V) bytes */
    uint32_t layer, iter, nb;
    struct attn_kv kv;
};
static struct {
    uint32_t n;
    struct attn_kept_step e[ATTN_KEPT_MAX];
} attn_kept;

void exec_attention_kept_drop(void)
{
    attn_kept.n = 0;
}

void exec_attention_kept_drop_range(uint64_t lo, uint64_t hi)
{
    for (uint32_t i = 0; i < attn_kept.n;) {
        const uint64_t k = attn_kept.e[i].kv.k, v = attn_kept.e[i].kv.v, b = attn_kept.e[i].bytes;
        if ((lo < k + b && k < hi) || (lo < v + b && v < hi))
            attn_kept.e[i] = attn_kept.e[--attn_kept.n];
        else
            i++;
    }
}

void exec_attention_kept_written(const struct hz_access *h)
{
    if (!attn_kept.n)
        return;
    for (uint32_t i = 0; i < HZ_WRITES; i++)
        if (h->wr[i].hi > h->wr[i].lo)
            exec_attention_kept_drop_range(h->wr[i].lo, h->wr[i].hi);
}

static bool kept_take(const struct exec_model *m, uint32_t l, uint64_t src, uint32_t nb,
                      struct attn_kv *kv)
{
    for (uint32_t i = 0; i < attn_kept.n; i++)
        if (attn_kept.e[i].src == src && attn_kept.e[i].nb == nb && attn_kept.e[i].layer == l &&
            attn_kept.e[i].iter == m->acct.iterations) {
            *kv = attn_kept.e[i].kv;
            return true;
        }
    return false;
}

static void kept_add(const struct exec_model *m, uint32_t l, uint64_t src, uint32_t nb,
                     struct attn_kv kv)
{
    if (attn_kept.n == ATTN_KEPT_MAX)
        attn_kept.e[0] = attn_kept.e[--attn_kept.n]; /* full: the first entry makes room */
    attn_kept.e[attn_kept.n++] = (struct attn_kept_step){
        .src = src, .bytes = (uint64_t)nb * npu_kv_row_bytes(m->cfg, m->plan), .layer = l,
        .iter = m->acct.iterations, .nb = nb, .kv = kv };
}

/* The steps attn_prefetch loaded, in the order the attention takes them. */
#define ATTN_PRE_MAX 8u
static struct {
    uint32_t layer, n, used;
    struct attn_kv kv[ATTN_PRE_MAX];
    uint32_t lr[ATTN_PRE_MAX], nb[ATTN_PRE_MAX];
} attn_pre;

/* The next step's rows if it was prefetched (the same rows of the same layer). */
static bool attn_pre_take(uint32_t l, uint32_t lr, uint32_t nb, struct attn_kv *kv)
{
    if (attn_pre.used >= attn_pre.n || attn_pre.layer != l)
        return false;
    const uint32_t i = attn_pre.used++;
    assert(attn_pre.lr[i] == lr && attn_pre.nb[i] == nb && "the attention's own order");
    *kv = attn_pre.kv[i];
    return true;
}

/* Whether every row of g sees every position in [first, last]: row t sees [pos + t -
   window + 1, pos + t] (no lower end without a window), so row 0 must see `last` and the
   last row `first`. Then MASK would hide nothing. */
bool attn_step_plain(const struct exec_seg *g, uint32_t window, uint32_t first,
                     uint32_t last)
{
    return last <= g->pos && (!window || (uint64_t)first + window >= (uint64_t)g->pos + g->count);
}

/* The step of segment g from local row lr (rows up to r1 are its): it ends where a cache
   block ends and holds at most A positions. A step some row must not see all of needs MASK;
   split, a step's blocks are not consecutive positions, so a step that needs it is one
   block, and a multi-block step stops before the first block that needs it. */
static struct attn_step attn_step_next(const struct exec_model *m, const struct exec_seg *g,
                                       uint32_t window, uint32_t lr, uint32_t r1)
{
    const uint32_t B = m->plan->kv_block, A = m->plan->attn_block;
    struct attn_step s = { .lr = lr, .nb = lr / B * B + A - lr,
                           .p0 = attn_kv_position(m, g->req, lr) };
    s.nb = r1 - lr < s.nb ? r1 - lr : s.nb;
    s.mask = !attn_step_plain(g, window, s.p0, attn_kv_position(m, g->req, lr + s.nb - 1));
    if (!s.mask || !npu_kv_is_split(m->plan) || s.nb <= B - lr % B)
        return s;
    const uint32_t lim = lr + s.nb;
    uint32_t end = lr, e = lr / B * B + B; /* whole blocks no row needs masked */
    while (e <= lim && attn_step_plain(g, window, s.p0, attn_kv_position(m, g->req, e - 1)))
        end = e, e += B;
    if (end > lr) {
        s.nb = end - lr, s.mask = false;
        return s;
    }
    s.nb = (e < lim ? e : lim) - lr;
    s.mask = !attn_step_plain(g, window, s.p0, attn_kv_position(m, g->req, lr + s.nb - 1));
    return s;
}

/* A segment none of whose positions this rank holds: the empty softmax state (max MASKED,
   sum 0, acc 0), which the combine weighs by exp(MASKED - M) = 0. */
static void attn_fill_empty(struct exec_model *m, const struct attn_state *st,
                            const struct exec_seg *g)
{
    const struct model_config *c = m->cfg;
    const uint32_t hd = c->head_dim, nkv = c->num_kv_heads;
    const uint32_t rows = g->count * (c->num_heads / nkv);
    const uint64_t first = (uint64_t)g->row * (c->num_heads / nkv);
    const struct { uint64_t buf; uint32_t width; float value; } fills[3] = {
        { m->buf.a.m_a, 1, NPU_VECTOR_MASKED }, { st->l, 1, 0.0f }, { m->buf.a.acc, hd, 0.0f } };
    for (int i = 0; i < 3; i++) { /* KV head h's rows at h x span */
        const uint64_t at = fills[i].buf + first * fills[i].width * 4;
        const uint32_t ld = (uint32_t)(st->span * fills[i].width);
        attn_vec_f32(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_FILL, .x = at, .out = at,
                                                 .rows = nkv, .cols = rows * fills[i].width,
                                                 .ldx = ld, .ldout = ld,
                                                 .scalar = fills[i].value });
    }
}

static bool attn_prefetch_allowed(const struct exec_model *m);

/* Segment g's online softmax over this rank's positions of its cache before the window,
   step by step (a step gathers the keys and values once for all heads); its final maxima
   end in m_a. False if the rank holds none of them (the state is then the empty one). */
static bool attn_run_segment(struct exec_model *m, const struct attn_state *st, uint32_t l,
                             uint32_t window, const struct exec_tile *tile,
                             const struct exec_seg *g)
{
    const struct model_config *c = m->cfg;
    const struct npu_act_layout *a = &m->buf.a;
    const uint32_t wfirst = attn_window_first(m, tile, g), lo = attn_seg_lo(g, window);
    const struct exec_kv_cache k = attn_run_cache(m, g->run);
    uint32_t r0, r1, steps = 0;
    if (wfirst <= lo || !attn_kv_local_range(m, g->req, lo, wfirst - 1, &r0, &r1)) {
        attn_fill_empty(m, st, g);
        return false;
    }
    for (uint32_t lr = r0; lr < r1; lr += attn_step_next(m, g, window, lr, r1).nb)
        steps++;
    uint32_t parity = 1 ^ ((steps - 1) & 1); /* parity 1 writes the new maxima to m_a */
    for (uint32_t lr = r0; lr < r1; parity ^= 1) {
        const struct attn_step s = attn_step_next(m, g, window, lr, r1);
        struct attn_kv kv;
        uint32_t contig;
        const uint64_t src = exec_kv_addr(m, &k, l, false, s.lr, &contig);
        /* one contiguous piece: its rows are [src, src + nb rows) wherever the run's later
           blocks lie (two runs may share a first block, a prefix cache's) */
        const bool keep = contig >= s.nb && attn_prefetch_allowed(m);
        if (!attn_pre_take(l, s.lr, s.nb, &kv) && !(keep && kept_take(m, l, src, s.nb, &kv))) {
            kv = attn_step_rows(m, s.nb);
            attn_pv_flush_over(m, kv.v, kv.v + (uint64_t)s.nb * npu_kv_row_bytes(c, m->plan));
            attn_gather_kv(m, l, &k, s.lr, s.nb, kv, false);
            if (keep)
                kept_add(m, l, src, s.nb, kv);
        }
        const uint64_t m_old = parity ? a->m_b : a->m_a, m_new = parity ? a->m_a : a->m_b;
        for (uint32_t h = 0, hb = attn_heads_batch(m, g->count, s.nb); h < c->num_kv_heads;
             h += hb)
            attn_heads_step(m, st, g, h, hb < c->num_kv_heads - h ? hb : c->num_kv_heads - h,
                            &s, kv, lr == r0, window, m_old, m_new);
        lr += s.nb;
    }
    return true;
}


/* Whether a step's nb ring rows from k miss every prefetched step's. */
static bool attn_pre_apart(const struct exec_model *m, uint64_t k, uint32_t nb)
{
    const uint64_t row = npu_kv_row_bytes(m->cfg, m->plan);
    for (uint32_t i = 0; i < attn_pre.n; i++)
        if (k < attn_pre.kv[i].k + attn_pre.nb[i] * row && attn_pre.kv[i].k < k + nb * row)
            return false;
    return true;
}

/* Whether a tile's steps may load before its QKV GEMM: split attention (the steps then read
   only positions before the window, which earlier iterations wrote), and the QKV GEMM's
   chunks not over the step ring (npu_layout.c, attn_deep: that GEMM comes between the
   loads and their steps). */
static bool attn_prefetch_allowed(const struct exec_model *m)
{
    const struct npu_act_layout *a = &m->buf.a;
    const struct model_config *c = m->cfg;
    const uint64_t ring_end = a->vblk + (uint64_t)m->plan->attn_block *
                                            npu_kv_row_bytes(c, m->plan);
    const uint64_t qkv_end = a->yqkv + (uint64_t)m->plan->tile_rows * m->buf.eb *
                                           (c->num_heads + 2 * c->num_kv_heads) * c->head_dim;
    return npu_kv_is_split(m->plan) && (a->yqkv >= ring_end || a->kblk >= qkv_end);
}

/*
 * The first steps of layer l's attention over the op's only tile: their cached keys and
 * values loaded into the step ring where the steps will look for them, as the attention
 * starts, so that they load beside the norm, the QKV GEMM and its collectives, which leave
 * HBM idle (Qwen3-8B decode-b64 waited 38 us a layer for its steps' loads), and within
 * the tile, so that tile reuse records them. On the second DMA queue when it is idle, as
 * many steps as the ring holds without overwriting one another; when it is still loading
 * the next layer's weights (which have time to spare), one step on the first queue: behind
 * those loads the steps would wait longer than the QKV phase's DMA copies can wait behind
 * one step (Qwen3-8B decode-b8: 3.55 ms with every early step behind the weights, 3.41
 * with one on the first queue). At most `most` steps, on the second queue if side.
 */
static void attn_prefetch(struct exec_model *m, uint32_t l, const struct exec_tile *tile,
                          bool side, uint32_t most, bool dry)
{
    assert(attn_pre.n == 0 && "the last prefetch was taken");
    if (!attn_prefetch_allowed(m))
        return;
    /* the attention's window: the program's op flags follow model_is_sliding_layer */
    const uint32_t window = model_is_sliding_layer(m->cfg, l) ? m->cfg->sliding_window : 0;
    attn_pre.layer = l, attn_pre.used = 0;
    for (uint32_t i = 0; i < tile->nsegs; i++) {
        const struct exec_seg *g = &tile->segs[i];
        const uint32_t wfirst = attn_window_first(m, tile, g), lo = attn_seg_lo(g, window);
        const struct exec_kv_cache k = attn_run_cache(m, g->run);
        uint32_t r0, r1;
        if (wfirst <= lo || !attn_kv_local_range(m, g->req, lo, wfirst - 1, &r0, &r1))
            continue;
        for (uint32_t lr = r0; lr < r1;) {
            const struct attn_step s = attn_step_next(m, g, window, lr, r1);
            const uint32_t at = m->kv_step_at;
            const struct attn_kv kv = attn_step_rows(m, s.nb);
            if (attn_pre.n == most || !attn_pre_apart(m, kv.k, s.nb)) {
                m->kv_step_at = at; /* the attention takes it from here */
                return;
            }
            if (!dry) /* dry: taken as loaded by the layer before (layer reuse) */
                attn_gather_kv(m, l, &k, s.lr, s.nb, kv, side);
            attn_pre.kv[attn_pre.n] = kv, attn_pre.lr[attn_pre.n] = s.lr;
            attn_pre.nb[attn_pre.n++] = s.nb;
            lr += s.nb;
        }
    }
}

/* From the op before layer l's attention, as many steps as the ring holds (side: on the
   second queue): a decode MoE op by units once its last expert loads are queued, behind
   them, so that they load while the experts' last GEMMs, the ranks' wait for the slowest
   and the MoE's all-reduce leave HBM idle (Qwen3-30B-A3B decode-b8: about 24 us a layer);
   a dense FFN as it starts, on the first queue, idle under it. The attention then starts
   on steps already in SRAM. The ring is attention's alone (npu_layout.c), and the hazard
   tracker orders these loads after the last reads of its rows. */
void exec_attention_prefetch_next(struct exec_model *m, uint32_t l, const struct exec_tile *tile,
                                  bool side)
{
    if (tile->whole && attn_pre.n == 0)
        attn_prefetch(m, l, tile, side, ATTN_PRE_MAX, false);
}

void exec_attention_prefetch_drop(void)
{
    attn_pre.n = attn_pre.used = 0;
}

bool exec_attention_begin(struct exec_model *m, uint32_t l, const struct exec_tile *tile)
{
    const struct npu_act_layout *a = &m->buf.a;
    exec_set_cat(m, EXEC_CAT_ATTN);
    const bool side = exec_side_idle(m);
    if (m->lreuse.kv_steady) { /* recorded in the steady state: the op before loaded them */
        m->lreuse.kv_steady = false;
        if (tile->whole && attn_pre.n == 0)
            attn_prefetch(m, l, tile, side, ATTN_PRE_MAX, true);
    }
    if (tile->whole && !(attn_pre.n && attn_pre.layer == l)) /* not already, by the op before */
        attn_prefetch(m, l, tile, side, side ? ATTN_PRE_MAX : 1, false);
    exec_rmsnorm(m, a->xb, tile->xt, exec_weight_addr(m, l, MT_ATTN_NORM), tile->n,
                 m->cfg->hidden_size);
    /* q[n][qd], knew[n][kvd], vnew[n][kvd] = xb[n][d] (Wq | Wk | Wv)^T: the GEMM now */
    return exec_wgemm_qkv_start(m, a->xb, tile->n, l);
}

int exec_attention_qkv(struct exec_model *m, uint32_t l, bool sliding,
                       const struct exec_tile *tile, bool started, bool after)
{
    const struct npu_act_layout *a = &m->buf.a;
    exec_set_cat(m, EXEC_CAT_ATTN);
    struct exec_qkv_xchg xg; /* each rank only the pieces it reads (model_attn_xchg.c) */
    const bool local = started && attn_xchg_qkv(m, l, tile, sliding, &xg);
    return exec_wgemm_qkv_finish(m, a->q, a->knew, a->vnew, a->xb, tile->n, l, started, after,
                                 local ? &xg : NULL);
}

/* The softmax state's layout for a tile of n rows (the file header). */
static struct attn_state attn_state_of(const struct exec_model *m, uint32_t n)
{
    const uint32_t nkv = m->cfg->num_kv_heads, group = m->cfg->num_heads / nkv;
    const uint64_t span = (uint64_t)n * group, rows = nkv * span;
    return (struct attn_state){ .span = span, .rows = rows,
                                .l = m->buf.a.acc + rows * m->cfg->head_dim * 4 };
}

/* Whether a tile's cache stores wait until the O projection's input is copied (see
   exec_attention_steps). */
static bool attn_stores_late(const struct exec_model *m, bool overlapped)
{
    return overlapped && npu_kv_is_split(m->plan);
}

int exec_attention_steps(struct exec_model *m, uint32_t l, bool sliding,
                         const struct exec_tile *tile, bool overlapped)
{
    const struct model_config *c = m->cfg;
    const struct npu_act_layout *a = &m->buf.a;
    const uint32_t hd = c->head_dim, qd = c->num_heads * hd, n = tile->n;
    const uint32_t nkv = c->num_kv_heads, group = c->num_heads / nkv;
    const uint64_t eb = m->buf.eb, gb = (uint64_t)group * hd * eb, span = (uint64_t)n * group;
    const struct attn_state st = attn_state_of(m, n);
    exec_set_cat(m, EXEC_CAT_ATTN);
    int rc = exec_wait_for(m, a->positions, (uint64_t)n * 4); /* attn_rotate rewrites it */
    if (rc != NPU_OK)
        return rc;
    const uint32_t window = sliding ? c->sliding_window : 0;
    uint32_t unit = 0;
    const bool one = attn_unit_head(m, tile, window, &unit);
    /* Split attention reads the tile's own positions from the window, never from the
       cache, so where the O collective waits only for its GEMM (overlapped) the stores
       wait until the O projection's input is copied and run beside the next tile's work:
       on the DMA queue (in order) they held up the copies attention waits for (the owner
       of a prefill tile's block stored 512 KiB first, and the ranks' gather waited for
       it). Not otherwise: with the O collective waiting for the whole chain they only
       moved the wait (Qwen3-30B-A3B serving 8 arXiv requests: 0.8 % more chip time). */
    attn_rotate(m, l, tile, !one);
    if (!attn_stores_late(m, overlapped))
        attn_store(m, l, tile);
    for (uint32_t h = one ? unit : 0; h < (one ? unit + 1 : nkv); h++) /* qg[h][n x group][hd]:
                                                                         KV head h's queries */
        exec_copy(m, a->qg + h * span * hd * eb, a->q + h * gb, n, gb, (uint64_t)qd * eb, gb);
    if (one) /* that unit's queries only (Qwen3-30B-A3B at tp 64: 8 of 32 heads) */
        attn_rotate_heads(m, l, MT_Q_NORM, a->qg + unit * span * hd * eb, (uint32_t)span, group);
    bool cached[EXEC_RUNS_MAX];
    for (uint32_t s = 0; s < tile->nsegs; s++)
        cached[s] = attn_run_segment(m, &st, l, window, tile, &tile->segs[s]);
    if (npu_kv_is_split(m->plan))
        attn_run_window(m, &st, tile, window, cached);
    attn_pv_flush(m);
    assert(attn_pre.used == attn_pre.n && "every prefetched step taken");
    attn_pre.n = attn_pre.used = 0;
    return NPU_OK;
}

int exec_attention_out(struct exec_model *m, uint32_t l, bool sliding,
                       const struct exec_tile *tile, bool overlapped, bool after)
{
    const struct model_config *c = m->cfg;
    const struct npu_act_layout *a = &m->buf.a;
    const uint32_t d = c->hidden_size, hd = c->head_dim, qd = c->num_heads * hd, n = tile->n;
    const uint32_t nkv = c->num_kv_heads, group = c->num_heads / nkv;
    const uint64_t eb = m->buf.eb, gb = (uint64_t)group * hd * eb, span = (uint64_t)n * group;
    const struct attn_state st = attn_state_of(m, n);
    exec_set_cat(m, EXEC_CAT_ATTN);
    bool whole = false; /* the output in qg, gathered */
    if (npu_kv_is_split(m->plan)) {
        /* every row's state on one rank: gather outputs, not states */
        whole = attn_window_whole(m, tile, sliding ? c->sliding_window : 0);
        int rc = whole ? attn_gather_out(m, &st, tile, after) : attn_combine(m, &st, tile, after);
        if (rc != NPU_OK)
            return rc;
        whole = whole || attn_combine_scatters(m, &st);
    }
    if (!whole) { /* attn[n][qd] = acc / l, back in the [row][head][hd] layout (qg takes the
                     quotient) */
        struct vector_op_args v = exec_vec_f32((struct vector_op_args){
            .op = NPU_VECTOR_OP_ROW_DIV, .x = a->acc, .y = st.l, .out = a->qg,
            .rows = (uint32_t)st.rows, .cols = hd, .ldy = 1 });
        v.out_type = m->buf.dt;
        exec_vec(m, v);
    }
    /* attn[n][qd]: the heads of the columns this rank's O share multiplies, the others
       unread (a 2-D share reads one KV head's group of Qwen3-8B's 8 at tp 64) */
    uint32_t c0, c1;
    exec_wgemm_cols(m, l, MT_WO, &c0, &c1);
    for (uint32_t h = 0; h < nkv; h++)
        if (h * group * hd < c1 && (h + 1) * group * hd > c0)
            exec_copy(m, a->attn + h * gb, a->qg + h * span * hd * eb, n, gb, gb,
                      (uint64_t)qd * eb);
    if (attn_stores_late(m, overlapped)) /* beside the O GEMM */
        attn_store(m, l, tile);
    exec_wgemm_start(m, NPU_GEMM_O, a->xb2, a->attn, n, l, MT_WO, 0, d, qd);
    return NPU_OK;
}

int exec_attention_mid(struct exec_model *m, uint32_t l, bool sliding,
                       const struct exec_tile *tile, bool started, bool overlapped)
{
    int rc = exec_attention_qkv(m, l, sliding, tile, started, false);
    if (rc == NPU_OK)
        rc = exec_attention_steps(m, l, sliding, tile, overlapped);
    return rc == NPU_OK ? exec_attention_out(m, l, sliding, tile, overlapped, false) : rc;
}

int exec_attention_end(struct exec_model *m, uint32_t l, const struct exec_tile *tile,
                       bool after)
{
    const uint32_t d = m->cfg->hidden_size;
    int rc = exec_wgemm_finish(m, NPU_GEMM_O, m->buf.a.xb2, tile->n, l, MT_WO, d, after);
    exec_set_cat(m, EXEC_CAT_ATTN);
    if (rc == NPU_OK)
        exec_add_rows(m, tile->xt, m->buf.a.xb2, tile->n, d);
    return rc;
}

int exec_attention(struct exec_model *m, uint32_t l, bool sliding, const struct exec_tile *tile)
{
    const bool started = exec_attention_begin(m, l, tile);
    int rc = exec_attention_mid(m, l, sliding, tile, started, false);
    return rc == NPU_OK ? exec_attention_end(m, l, tile, false) : rc;
}
