/* SPDX-License-Identifier: MIT */
/*
 * Split attention's window and combine (model_attn.c has the cache's steps and the file
 * header's layout of the softmax state).
 *
 * The window (split attention only): the QKV GEMM's gather brings every rank all the tile's
 * new keys and values, and each rank keeps the op's last Wn rows of them (kwin, vwin: op row
 * r at slot r % Wn; npu_kv_window_rows). Positions inside the window are not the owners'
 * work: the queries of KV head h in part p of the tile's rows run over them on rank
 * (h x parts + p) % tp (parts = tp / kv heads), so a prompt's first chunk, whose positions
 * would otherwise sit on the few owners of its blocks, is spread over every rank; the
 * owners run the positions before the window. Both are steps of the same online softmax
 * and the combine merges them unchanged.
 *
 * The combine (attn_combine) is described in model_attn.c's header.
 * Modelled: every op and byte of that. Not modelled: overlapping the combine with the
 * next segment's or layer's work (the collectives wait for the queued ops).
 */
#include <assert.h>
#include <math.h>

#include "model_attn.h"
#include "model_exec.h"
#include "npu/hal.h"
#include "npu/vector.h"

/* The op row of the first row segment g's run has in this op. */
static uint32_t attn_run_row0(const struct exec_tile *tile, const struct exec_seg *g)
{
    return tile->t0 + g->row - (g->pos - g->run->pos);
}

/* The first position of segment g inside the window (the op's rows [end - Wn, end), end
   the tile's last row + 1); without a window, one past its last position. */
uint32_t attn_window_first(const struct exec_model *m, const struct exec_tile *tile,
                           const struct exec_seg *g)
{
    const uint32_t wn = npu_kv_window_rows(m->plan);
    if (!wn)
        return g->pos + g->count;
    const uint32_t end = tile->t0 + tile->n, wlo = end > wn ? end - wn : 0;
    const uint32_t row0 = attn_run_row0(tile, g);
    return g->run->pos + (row0 < wlo ? wlo - row0 : 0);
}

uint32_t exec_attn_window(const struct exec_model *m, const struct exec_tile *tile,
                          const struct exec_seg *g)
{
    return g->pos + g->count - attn_window_first(m, tile, g); /* unsplit: 0 */
}

/* Tile rows [*r0, *r1) whose queries of KV head h this rank runs over the window: units
   (h, part), parts = tp / kv heads (at least 1), dealt round the ranks. */
static bool attn_window_rows(const struct exec_model *m, uint32_t n, uint32_t h, uint32_t *r0,
                             uint32_t *r1)
{
    const uint32_t nkv = m->cfg->num_kv_heads, parts = m->tp / nkv ? m->tp / nkv : 1;
    for (uint32_t p = 0; p < parts; p++)
        if ((h * parts + p) % m->tp == m->rank) {
            *r0 = (uint32_t)((uint64_t)n * p / parts);
            *r1 = (uint32_t)((uint64_t)n * (p + 1) / parts);
            return *r0 < *r1;
        }
    return false;
}

/* The next window step of g from position p (its last at `last`): at most A positions, not
   past the window's wrap. */
static struct attn_step attn_window_step(const struct exec_model *m, const struct exec_seg *g,
                                         uint32_t window, uint32_t slot, uint32_t p,
                                         uint32_t last)
{
    const uint32_t wn = npu_kv_window_rows(m->plan), A = m->plan->attn_block;
    uint32_t nb = last + 1 - p < A ? last + 1 - p : A;
    nb = wn - slot < nb ? wn - slot : nb;
    return (struct attn_step){ .lr = slot, .nb = nb, .p0 = p,
                               .mask = !attn_step_plain(g, window, p, p + nb - 1) };
}

/* KV head h of segment g (this rank's rows of it) over the window's positions, after the
   cache's steps (cached: the state holds them, maxima in m_a) or from the empty state; the
   final maxima end in m_a. */
static void attn_window_head(struct exec_model *m, const struct attn_state *st,
                             const struct exec_tile *tile, const struct exec_seg *g,
                             uint32_t h, uint32_t window, bool cached)
{
    const struct npu_act_layout *a = &m->buf.a;
    const uint32_t wn = npu_kv_window_rows(m->plan);
    const uint32_t lo = attn_seg_lo(g, window);
    const uint32_t wf = attn_window_first(m, tile, g), first = wf > lo ? wf : lo;
    const uint32_t last = g->pos + g->count - 1, row0 = attn_run_row0(tile, g);
    const uint64_t row = npu_kv_row_bytes(m->cfg, m->plan);
    uint32_t steps = 0;
    for (uint32_t p = first; p <= last; steps++)
        p += attn_window_step(m, g, window, (row0 + p - g->run->pos) % wn, p, last).nb;
    /* parity 1 writes the new maxima to m_a: after the cache's steps the first reads m_a */
    uint32_t parity = cached ? 0 : 1 ^ ((steps - 1) & 1);
    for (uint32_t p = first, i = 0; p <= last; i++, parity ^= 1) {
        const uint32_t slot = (row0 + p - g->run->pos) % wn;
        const struct attn_step s = attn_window_step(m, g, window, slot, p, last);
        const uint64_t m_old = parity ? a->m_b : a->m_a, m_new = parity ? a->m_a : a->m_b;
        attn_heads_step(m, st, g, h, 1, &s, (struct attn_kv){ a->kwin + slot * row,
                                                             a->vwin + slot * row },
                        !cached && i == 0, window, m_old, m_new);
        p += s.nb;
    }
    if (parity == 1 && steps) { /* the last step used parity 0: it wrote m_b */
        const uint32_t group = m->cfg->num_heads / m->cfg->num_kv_heads;
        const uint64_t at = (h * st->span + (uint64_t)g->row * group) * 4;
        const uint64_t bytes = (uint64_t)g->count * group * 4;
        exec_copy(m, a->m_a + at, a->m_b + at, 1, bytes, bytes, bytes);
    }
}

/* Whether parts[0, n) are decode rows of the window in consecutive tile rows and slots: one
   row each, whose only window position is its own (one unmasked step of one column). */
static bool attn_window_is_decode(const struct exec_model *m, const struct exec_tile *tile,
                                    const struct exec_seg *parts, uint32_t n, uint32_t window)
{
    const uint32_t wn = npu_kv_window_rows(m->plan);
    if (n < 2)
        return false;
    const uint32_t slot0 = (tile->t0 + parts[0].row) % wn;
    if (slot0 + n > wn)
        return false;
    for (uint32_t i = 0; i < n; i++) {
        const struct exec_seg *g = &parts[i];
        const uint32_t wf = attn_window_first(m, tile, g), lo = attn_seg_lo(g, window);
        if (g->count != 1 || g->row != parts[0].row + i || (wf > lo ? wf : lo) != g->pos)
            return false;
    }
    return true;
}

/*
 * KV head h of decode rows parts[0, n) over their own window positions
 * (attn_window_is_decode), as attn_window_head does row by row, but with one batched
 * scores GEMM and one batched PV GEMM over the rows (batch i: row i's query heads against
 * its own key and value) and each softmax op over all n x group rows at once: a row's GEMMs
 * are a fold of the array each, whose weight load and drain cost about 4 times their
 * streaming (docs/engines.md), and a batch pays them once. cached: some row's state holds
 * cache steps (maxima in m_a); the others then hold the empty state (attn_fill_empty: max
 * MASKED, sum and acc 0), which a step that is not the first turns into what a first step
 * writes (rescaled by exp(MASKED - max) = 0, then the step's sums added; a -0 output may
 * come out +0). The final maxima end in m_a.
 */
_Static_assert(EXEC_RUNS_MAX <= NPU_GEMM_BATCH_MAX, "a unit's decode rows are one batch");
static void attn_window_decode(struct exec_model *m, const struct attn_state *st,
                               const struct exec_tile *tile, const struct exec_seg *parts,
                               uint32_t n, uint32_t h, bool cached)
{
    const struct model_config *c = m->cfg;
    const struct npu_act_layout *a = &m->buf.a;
    const uint32_t hd = c->head_dim, kvd = c->num_kv_heads * hd;
    const uint32_t group = c->num_heads / c->num_kv_heads, rows = n * group;
    const uint64_t eb = m->buf.eb, row = npu_kv_row_bytes(c, m->plan);
    const uint64_t row0 = h * st->span + (uint64_t)parts[0].row * group, stat = row0 * 4;
    const uint64_t slot0 = (tile->t0 + parts[0].row) % npu_kv_window_rows(m->plan);
    /* one step: without cache steps it is the first and writes the maxima to m_a */
    const uint64_t m_old = cached ? a->m_a : a->m_b, m_new = cached ? a->m_b : a->m_a;
    const bool first = !cached;
    /* scores_i[group][1] = Q_i[group][hd] k_i[1][hd]^T, row i's own key */
    exec_gemm_many(m, &(struct exec_gemm_args){
                          .c = a->scores, .a = a->qg + row0 * hd * eb,
                          .b = a->kwin + slot0 * row + (uint64_t)h * hd * eb, .rows = group,
                          .n = 1, .k = hd, .lda = hd, .ldb = kvd, .ldc = 1, .trans_b = true,
                          .f32_out = true, .batch = n, .stride_a = group * hd * eb,
                          .stride_b = row, .stride_c = group * 4ull });
    attn_vec_f32(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_SCALE, .x = a->scores,
                                             .out = a->scores, .rows = rows, .cols = 1,
                                             .scalar = 1.0f / sqrtf((float)hd) });
    attn_softmax_update(m, st, a->scores, a->probs_blk, row0, rows, 1, first, m_old, m_new);
    /* acc_i[group][hd] (+)= P_i[group][1] v_i[1][hd] */
    exec_gemm_many(m, &(struct exec_gemm_args){
                          .c = a->acc + row0 * hd * 4, .a = a->probs_blk,
                          .b = a->vwin + slot0 * row + (uint64_t)h * hd * eb, .rows = group,
                          .n = hd, .k = 1, .lda = 1, .ldb = kvd, .ldc = hd, .f32_out = true,
                          .accumulate = !first, .batch = n, .stride_a = group * eb,
                          .stride_b = row, .stride_c = group * hd * 4ull });
    if (cached) /* the step wrote the maxima to m_b */
        exec_copy(m, a->m_a + stat, a->m_b + stat, 1, rows * 4ull, rows * 4ull, rows * 4ull);
}

/* The window part of the tile: its keys and values into the window, then this rank's
   (KV head, rows) units over it; cached[s]: segment s's state holds cache steps. */
void attn_run_window(struct exec_model *m, const struct attn_state *st,
                     const struct exec_tile *tile, uint32_t window, const bool *cached)
{
    const struct npu_act_layout *a = &m->buf.a;
    const uint32_t wn = npu_kv_window_rows(m->plan), n = tile->n;
    const uint64_t row = npu_kv_row_bytes(m->cfg, m->plan), slot = tile->t0 % wn;
    assert(slot + n <= wn && "the window is a multiple of tile rows");
    attn_pv_flush(m); /* a part's state rows lie inside a segment's, at another first row */
    exec_copy(m, a->kwin + slot * row, a->knew, 1, n * row, n * row, n * row);
    exec_copy(m, a->vwin + slot * row, a->vnew, 1, n * row, n * row, n * row);
    static struct exec_seg parts[EXEC_RUNS_MAX];
    static bool part_cached[EXEC_RUNS_MAX];
    for (uint32_t h = 0; h < m->cfg->num_kv_heads; h++) {
        uint32_t r0, r1, np = 0;
        bool any = false; /* some part's state holds cache steps */
        if (!attn_window_rows(m, n, h, &r0, &r1))
            continue;
        for (uint32_t i = 0; i < tile->nsegs; i++) {
            const struct exec_seg *g = &tile->segs[i];
            const uint32_t lo = g->row > r0 ? g->row : r0;
            const uint32_t hi = g->row + g->count < r1 ? g->row + g->count : r1;
            if (lo >= hi)
                continue;
            parts[np] = *g; /* its rows [lo, hi) */
            parts[np].pos = g->pos + (lo - g->row), parts[np].row = lo;
            parts[np].count = hi - lo;
            part_cached[np] = cached[i];
            any = any || cached[i];
            np++;
        }
        if (attn_window_is_decode(m, tile, parts, np, window)) {
            /* it uses the buffers' first halves; a rank's units share one row range
               (attn_window_rows), so every head of this tile took this path */
            assert(!attn_pv_is_held() && "no held PV GEMM reads the first halves");
            attn_window_decode(m, st, tile, parts, np, h, any);
            continue;
        }
        for (uint32_t i = 0; i < np; i++)
            attn_window_head(m, st, tile, &parts[i], h, window, part_cached[i]);
    }
}

/* Whether the window holds every position the tile's rows see (a prompt's chunks up to the
   window's size) and every rank runs one equal unit of rows, in rank order: then each row's
   state is whole on one rank, and the ranks gather outputs instead of combining states. The
   same on every rank. */
bool attn_window_whole(const struct exec_model *m, const struct exec_tile *tile,
                       uint32_t window)
{
    const uint32_t nkv = m->cfg->num_kv_heads, parts = m->tp / nkv;
    if (parts == 0 || nkv * parts != m->tp || tile->n % parts)
        return false;
    for (uint32_t i = 0; i < tile->nsegs; i++)
        if (attn_window_first(m, tile, &tile->segs[i]) > attn_seg_lo(&tile->segs[i], window))
            return false;
    return true;
}

/* The whole window's output (or the combine's): this rank's rows, acc / l, into qg (they
   are chunk `rank` of qg's [R][hd]), then the all-gather of qg, or where attn_xchg_out
   applies the exchange of the pieces each O share reads (after: once the work on qg is
   done). */
int attn_gather_out(struct exec_model *m, const struct attn_state *st,
                    const struct exec_tile *tile, bool after)
{
    const struct npu_act_layout *a = &m->buf.a;
    const uint64_t hd = m->cfg->head_dim, rows = st->rows / m->tp, r0 = m->rank * rows;
    struct vector_op_args v = exec_vec_f32((struct vector_op_args){
        .op = NPU_VECTOR_OP_ROW_DIV, .x = a->acc + r0 * hd * 4, .y = st->l + r0 * 4,
        .out = a->qg + r0 * hd * m->buf.eb, .rows = (uint32_t)rows, .cols = (uint32_t)hd,
        .ldy = 1 });
    v.out_type = m->buf.dt;
    exec_vec(m, v);
    struct noc_exchange_args xg;
    if (attn_xchg_out(m, st, tile, &xg))
        return exec_exchange(m, &xg, after);
    return exec_collective(m, true, NOC_REDUCE_SUM, a->qg, st->rows * hd, m->buf.dt, after);
}

/* Whether the combine ends in reduce-scatters: every rank's chunk of acc's R x hd elements
   and of l's R is the same R / tp rows, and they are enough rows for the bytes the output's
   all-gather saves to pay for the sums' collective (Qwen3-8B on large-64: 4 rows a rank,
   decode-b8, lost 0.3 us a layer; 32 rows, decode-b64, gained 1.5 us). */
#define ATTN_SCATTER_ROWS_MIN 16
bool attn_combine_scatters(const struct exec_model *m, const struct attn_state *st)
{
    return st->rows % m->tp == 0 && st->rows / m->tp >= ATTN_SCATTER_ROWS_MIN;
}

/* Split attention: the ranks' states into the whole softmax's (the file header); after:
   each collective once the work on its buffer is done. Where attn_combine_scatters, acc and
   l are reduce-scattered and each rank divides its own rows (attn_gather_out): the sum's
   all-gather would carry [acc | l] in fp32 to every rank for each to divide all R rows,
   the output's carries acc / l in the activations' type. */
int attn_combine(struct exec_model *m, const struct attn_state *st,
                 const struct exec_tile *tile, bool after)
{
    const struct npu_act_layout *a = &m->buf.a;
    const uint64_t R = st->rows, hd = m->cfg->head_dim;
    /* gmax[R] = M: the maxima over the ranks (an all-reduce with MAX) */
    exec_copy(m, a->gmax, a->m_a, 1, R * 4, R * 4, R * 4);
    int rc = exec_collective(m, false, NOC_REDUCE_MAX, a->gmax, R, NPU_DTYPE_FP32, after);
    if (rc != NPU_OK)
        return rc;
    /* acc and l times exp(m - M), then [acc | l] summed over the ranks */
    const uint64_t bufs[2] = { a->acc, st->l };
    const uint32_t cols[2] = { (uint32_t)hd, 1 };
    for (int i = 0; i < 2; i++)
        attn_vec_f32(m, (struct vector_op_args){ .op = NPU_VECTOR_OP_RESCALE, .x = bufs[i],
                                                 .y = a->m_a, .aux = a->gmax, .out = bufs[i],
                                                 .rows = (uint32_t)R, .cols = cols[i],
                                                 .ldy = 1, .ldaux = 1 });
    if (!attn_combine_scatters(m, st))
        return exec_collective(m, false, NOC_REDUCE_SUM, a->acc, R * hd + R, NPU_DTYPE_FP32,
                               after);
    rc = exec_reduce_scatter(m, a->acc, R * hd, NPU_DTYPE_FP32, after);
    if (rc == NPU_OK)
        rc = exec_reduce_scatter(m, st->l, R, NPU_DTYPE_FP32, after);
    return rc == NPU_OK ? attn_gather_out(m, st, tile, after) : rc;
}
