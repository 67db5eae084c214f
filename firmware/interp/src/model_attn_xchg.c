/* SPDX-License-Identifier: MIT */
/*
 * Split attention's head-local exchanges (docs/images.md, "Head-local exchanges"): where a
 * tile's window holds every position its rows see (attn_window_whole), rank r runs one unit,
 * the queries of KV head h = r / parts in part p = r % parts of the tile's rows, and reads
 * nothing else of the QKV GEMM's output but that unit's query rows and head h's keys and
 * values. So instead of the all-gather along the grid's columns that brings every rank all
 * of Q, K and V (Qwen3-30B-A3B on large-64: 1.1 MiB a rank and tile of 128 rows), each rank
 * receives those pieces (40 KiB), and the owners of the tile's KV blocks, which store them,
 * every head's keys and values. Likewise after attention: the O GEMM's 2-D share on grid
 * column j reads only the output columns of its K range (4 query heads there), so each unit
 * multicasts to each grid column just the heads its ranks multiply (128 KiB a rank instead
 * of 1 MiB; one multicast a column: as unicasts to each rank, the blocks crowded the
 * columns' links and took the last rank twice as long).
 *
 * The pieces land where the all-gathers would have put them, so everything after reads the
 * same addresses; what a rank does not read holds older data.
 * Hazard: a rank's window (kwin, vwin) then holds valid keys and values for its own head
 * only. That is all it ever reads there: its units are always head r / parts's (the unit map
 * is fixed when kv heads x parts = tp, which attn_window_whole requires), and the owners'
 * cache steps read the cache, which the owners store from every head's keys and values.
 * Modelled: every byte each rank receives. Only the unit's query heads are normed and
 * rotated (model_attn.c, attn_unit_head), and only the chunks it read pieces of are
 * unchunked into q, k and v (model_wgemm.c, qkv_collect).
 */
#include <assert.h>

#include "model_attn.h"
#include "model_exec.h"

/* One exchange's blocks: the hart builds them, the call turns them into descriptors. A
   rank sends at most 3 a chunk to R - 1 receivers, or one to each rank whose O share reads
   its unit's heads (Qwen3-30B-A3B at tp 256 on 16 x 16: 64); more fall back to the
   all-gathers. Small: the firmware's SRAM is 1 MiB (npu_image.h). */
#define XCHG_BLOCKS_MAX 128u
static struct noc_exchange_block xblocks[XCHG_BLOCKS_MAX];

/* Half-open range intersection; false if empty. */
static bool span_cut(uint32_t a0, uint32_t a1, uint32_t b0, uint32_t b1, uint32_t *lo,
                     uint32_t *hi)
{
    *lo = a0 > b0 ? a0 : b0, *hi = a1 < b1 ? a1 : b1;
    return *lo < *hi;
}

/* What rank k reads of the tile's Q (columns [q0, q1), rows [r0, r1)) and of K and V
   (columns [kv0, kv1) of kv heads x hd, every row). */
struct xchg_need {
    uint32_t q0, q1, r0, r1, kv0, kv1;
};

static struct xchg_need need_of(const struct exec_model *m, uint32_t k, uint32_t n, bool owner)
{
    const struct model_config *c = m->cfg;
    const uint32_t hd = c->head_dim, nkv = c->num_kv_heads, group = c->num_heads / nkv;
    const uint32_t parts = m->tp / nkv, h = k / parts, p = k % parts;
    return (struct xchg_need){ .q0 = h * group * hd, .q1 = (h + 1) * group * hd,
                               .r0 = n * p / parts, .r1 = n * (p + 1) / parts,
                               .kv0 = owner ? 0 : h * hd,
                               .kv1 = owner ? nkv * hd : (h + 1) * hd };
}

/* Marks the ranks that own some position of the tile (they store its keys and values). */
static void tile_owners(const struct exec_model *m, const struct exec_tile *tile, bool *owner)
{
    const uint32_t B = m->plan->kv_block, tp = m->tp;
    for (uint32_t k = 0; k < tp; k++)
        owner[k] = false;
    for (uint32_t s = 0; s < tile->nsegs; s++) {
        const struct exec_seg *g = &tile->segs[s];
        const uint32_t shift = m->kv_shift[g->req % tp];
        for (uint32_t b = g->pos / B; g->count && b <= (g->pos + g->count - 1) / B; b++)
            owner[(b % tp + shift) % tp] = true;
    }
}

/* Appends to out[*n] (if out) the blocks of chunk i (at ch) that rank k reads: its query
   rows, then its key and value columns (one block where they are adjacent); returns them. */
static uint32_t chunk_blocks(const struct exec_qkv_chunks *ch, uint32_t rows, uint64_t eb,
                             uint32_t i, uint32_t k, const struct xchg_need *nd,
                             struct noc_exchange_block *out)
{
    const uint64_t chunk = (uint64_t)i * rows * ch->width * eb, ld = (uint64_t)ch->width * eb;
    uint32_t n = 0, lo, hi;
    /* [column in the chunk, width, first row, rows] of each piece */
    uint32_t piece[3][4], np = 0;
    if (span_cut(nd->q0, nd->q1, i * ch->q, (i + 1) * ch->q, &lo, &hi))
        piece[np][0] = lo - i * ch->q, piece[np][1] = hi - lo, piece[np][2] = nd->r0,
        piece[np++][3] = nd->r1 - nd->r0;
    const uint32_t base[2] = { ch->q, ch->q + ch->k }, w[2] = { ch->k, ch->v };
    for (uint32_t t = 0; t < 2; t++)
        if (span_cut(nd->kv0, nd->kv1, i * w[t], (i + 1) * w[t], &lo, &hi)) {
            const uint32_t col = base[t] + lo - i * w[t];
            if (np && piece[np - 1][0] + piece[np - 1][1] == col && piece[np - 1][2] == 0 &&
                piece[np - 1][3] == rows)
                piece[np - 1][1] += hi - lo; /* v's right after k's, every row */
            else
                piece[np][0] = col, piece[np][1] = hi - lo, piece[np][2] = 0,
                piece[np++][3] = rows;
        }
    for (uint32_t e = 0; e < np; e++) {
        if (piece[e][3] == 0)
            continue;
        const uint64_t off = chunk + (uint64_t)piece[e][2] * ld + piece[e][0] * eb;
        if (out)
            out[n] = (struct noc_exchange_block){
                .src = ch->base + off, .dst_offset = off, .to = k, .rows = piece[e][3],
                .row_bytes = (uint32_t)(piece[e][1] * eb), .src_stride = (uint32_t)ld,
                .dst_stride = (uint32_t)ld };
        n++;
    }
    return n;
}

/* Whether the tile's attention runs on head-local pieces (the file header): split
   attention over a whole window, one unit a rank, the 2D grid filling the group. The same
   on every rank. */
static bool xchg_applies(const struct exec_model *m, const struct exec_tile *tile,
                         bool sliding)
{
    const struct npu_plan *p = m->plan;
    return m->tp > 1 && npu_kv_is_split(p) && (uint32_t)p->rect_rows * p->rect_cols == m->tp &&
           m->comm->group.placement == NOC_PLACE_MESH2D && !noc_group_is_pair(&m->comm->group) &&
           attn_window_whole(m, tile, sliding ? m->cfg->sliding_window : 0);
}

bool attn_xchg_qkv(struct exec_model *m, uint32_t l, const struct exec_tile *tile,
                   bool sliding, struct exec_qkv_xchg *out)
{
    static bool owner[NOC_GROUP_MAX];
    struct exec_qkv_chunks ch;
    if (!xchg_applies(m, tile, sliding) || !exec_wgemm_qkv_chunks(m, l, tile->n, &ch) ||
        ch.parts != m->plan->rect_rows)
        return false;
    if (3 * (ch.parts - 1) > XCHG_BLOCKS_MAX) /* the same on every rank */
        return false;
    tile_owners(m, tile, owner);
    const uint32_t C = m->plan->rect_cols, i = m->rank / C, j = m->rank % C;
    uint32_t sent = 0, arrivals = 0;
    for (uint32_t r = 0; r < ch.parts; r++) { /* the ranks of grid column j */
        const uint32_t k = r * C + j;
        if (r == i)
            continue;
        const struct xchg_need to = need_of(m, k, tile->n, owner[k]);
        const struct xchg_need mine = need_of(m, m->rank, tile->n, owner[m->rank]);

        sent += chunk_blocks(&ch, tile->n, m->buf.eb, i, k, &to, xblocks + sent);
        arrivals += chunk_blocks(&ch, tile->n, m->buf.eb, r, m->rank, &mine, NULL);
    }
    const struct xchg_need mine = need_of(m, m->rank, tile->n, owner[m->rank]);
    *out = (struct exec_qkv_xchg){
        .xg = { .buf = ch.base, .bytes = ch.bytes, .blocks = xblocks, .nblocks = sent,
                .arrivals = arrivals },
        .cols = { { mine.q0, mine.q1 }, { mine.kv0, mine.kv1 }, { mine.kv0, mine.kv1 } } };
    return true;
}

/* The query heads [*h0, *h1) of the O GEMM's K range on rank k (2D: its grid column's). */
static void o_heads(const struct exec_model *m, uint32_t k, uint32_t *h0, uint32_t *h1)
{
    const uint32_t C = m->plan->rect_cols, per = m->cfg->num_heads / C;
    *h0 = k % C * per, *h1 = *h0 + per;
}

/* The block of unit r's output (query heads [h_r group, + group) of its rows) that the O
   shares of grid column j read, if any: one multicast to the column (its every rank reads
   the same heads). */
static bool out_block(const struct exec_model *m, const struct attn_state *st, uint32_t n,
                      uint32_t r, uint32_t j, struct noc_exchange_block *b)
{
    const uint32_t hd = m->cfg->head_dim, nkv = m->cfg->num_kv_heads;
    const uint32_t group = m->cfg->num_heads / nkv, parts = m->tp / nkv;
    const uint32_t h = r / parts, p = r % parts, r0 = n * p / parts, r1 = n * (p + 1) / parts;
    uint32_t k0, k1, lo, hi;
    o_heads(m, j, &k0, &k1);
    if (!span_cut(k0, k1, h * group, (h + 1) * group, &lo, &hi) || r0 == r1)
        return false;
    const uint64_t eb = m->buf.eb, row = (uint64_t)group * hd * eb;
    const uint64_t off = ((h * st->span + (uint64_t)r0 * group + (lo - h * group)) * hd) * eb;
    *b = (struct noc_exchange_block){ .src = m->buf.a.qg + off, .dst_offset = off, .to = j,
                                      .dest = NOC_EXCHANGE_GRID_COL, .rows = r1 - r0,
                                      .row_bytes = (uint32_t)((hi - lo) * hd * eb),
                                      .src_stride = (uint32_t)row, .dst_stride = (uint32_t)row };
    return true;
}

/* Whether rank r's chunk of the state's rows (R / tp of them) is unit r's rows, as the out
   exchange needs: one unit a rank in rank order (kv heads x parts = tp) over equal parts of
   the tile's rows; with the O GEMM 2D on a mesh2d grid filling the group. The same on every
   rank. */
static bool out_applies(const struct exec_model *m, const struct exec_tile *tile)
{
    const struct npu_plan *p = m->plan;
    const uint32_t nkv = m->cfg->num_kv_heads, parts = m->tp / nkv;
    return m->tp > 1 && npu_kv_is_split(p) && (uint32_t)p->rect_rows * p->rect_cols == m->tp &&
           m->comm->group.placement == NOC_PLACE_MESH2D && !noc_group_is_pair(&m->comm->group) &&
           p->partition[NPU_GEMM_O] == NPU_PART_2D && m->cfg->num_heads % p->rect_cols == 0 &&
           parts && nkv * parts == m->tp && tile->n % parts == 0;
}

bool attn_xchg_out(struct exec_model *m, const struct attn_state *st,
                   const struct exec_tile *tile, struct noc_exchange_args *out)
{
    const struct npu_plan *p = m->plan;
    if (!out_applies(m, tile))
        return false;
    const uint32_t C = p->rect_cols, j = m->rank % C;
    if (C > XCHG_BLOCKS_MAX) /* a block a column at most; the same on every rank */
        return false;
    uint32_t sent = 0, arrivals = 0;
    struct noc_exchange_block b;
    for (uint32_t c = 0; c < C; c++) /* this unit's heads to each column reading them */
        sent += out_block(m, st, tile->n, m->rank, c, &xblocks[sent]);
    for (uint32_t r = 0; r < m->tp; r++) /* every unit's (this one's too) to this column */
        arrivals += out_block(m, st, tile->n, r, j, &b);
    *out = (struct noc_exchange_args){ .buf = m->buf.a.qg,
                                       .bytes = st->rows * m->cfg->head_dim * m->buf.eb,
                                       .blocks = xblocks, .nblocks = sent,
                                       .arrivals = arrivals, .multicast = true };
    return true;
}
