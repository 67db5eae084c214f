/* SPDX-License-Identifier: MIT */
/*
 * Weight GEMMs split over the tensor-parallel group, and the collectives that complete
 * them (model_exec.h).
 *
 * MN: rank r computes Y's columns of its share, Y_r[T][n_r] = X[T][K] W_r^T, in place in
 * Y[T][N], and the NoC driver's block all-gather multicasts them into every rank's Y as one
 * 2-D write (rows of n_r elements, N apart): no gather buffer, no copies. The earlier
 * layout computed Y^T and turned it back with an identity GEMM (thousands of matrix cycles
 * per GEMM), then gathered chunks and copied them in place (64 DMA descriptors per GEMM at
 * tp 64, which doubled what the simulator executes).
 * 2D: the rank's partial chunk, [T][w] at ytmp + i T w (the O GEMM's at yo: with two tiles'
 * attention in flight it lies outside attention's scratch; i: the share's index along N, w
 * the chunk's width), is completed by the all-reduce along the grid row and the all-gather along
 * the column; 2-D copies put each chunk's columns in place in Y (unchunk).
 * q, k and v share one chunk ([T][n_q + n_k + n_v]) computed by one GEMM (when the shares
 * lie one after the other, as staging places them); MN gathers its three parts into q, k
 * and v, 2D completes the chunk with one pair of collectives.
 * The O projection's and the dense FFN's collectives may wait for their own GEMM only
 * (exec_wgemm_finish with `after`, exec_allreduce_after), so that the next tile's first
 * GEMM, issued before them, runs beside them (model_layer_ops.c); the others wait for the
 * whole chain.
 */
#include <assert.h>

#include "model_exec.h"
#include "model_hazard.h"
#include "noc/collective.h"

/* Index of the share along N, and how many shares N is split into (MN: tp, 2D: the grid's
   rows). Shares are equal (the planner refuses other splits). */
static uint32_t share_index(const struct npu_image_tensor *t)
{
    return t->row0 / t->rows;
}

static uint32_t share_parts(const struct exec_model *m, enum npu_partition part)
{
    return part == NPU_PART_MN ? m->tp : m->plan->rect_rows;
}

/*
 * This rank's part of Y for share rows [r0, r1) of W at w (the rows of a streamed chunk),
 * over the share's K columns [col0, col0 + cols) of x (MN: all of them). K gives Y[:, r0:r1]
 * (partial); MN and 2D give the share's output columns into its chunk of ytmp ([rows][share
 * rows]; one row: into Y itself, which is that layout).
 */
static void share_gemm(struct exec_model *m, enum npu_partition part, uint64_t y, uint64_t yt,
                       uint64_t x, uint64_t w, uint32_t rows, const struct npu_image_tensor *t,
                       uint32_t r0, uint32_t r1, uint32_t n, uint32_t k)
{
    const uint64_t eb = m->buf.eb, xs = x + (uint64_t)t->col0 * eb;
    if (m->tp == 1 || part == NPU_PART_K) { /* Y[:, r0:r1] (+ partial over K columns) */
        exec_gemm(m, y + r0 * eb, xs, w, rows, r1 - r0, t->cols, k, t->cols, n, true, false,
                  false);
    } else if (part == NPU_PART_MN || rows == 1) { /* Y[:, row0 + r0 .. row0 + r1) in place */
        exec_gemm(m, y + (t->row0 + r0) * eb, xs, w, rows, r1 - r0, t->cols, k, t->cols, n,
                  true, false, false);
    } else {                                /* 2D: chunk[rows][share rows], columns r0 .. r1 */
        const uint64_t chunk = yt + (uint64_t)t->row0 * rows * eb;
        exec_gemm(m, chunk + r0 * eb, xs, w, rows, r1 - r0, t->cols, k, t->cols, t->rows,
                  true, false, false);
    }
}

/* The collectives that bring every rank's chunk of `chunk` elements (this rank's is chunk i
   of yt): MN with one row (its chunks are Y's columns), and 2D, where rank (i, j) holds a
   partial chunk over K_j; the all-reduce along grid row i completes it, the all-gather
   along grid column j brings every chunk, or the exchange xg (not NULL) the pieces of
   other chunks that this rank reads. */
static int collect_chunks(struct exec_model *m, enum npu_partition part, uint64_t yt,
                          uint32_t i, uint64_t chunk, const struct noc_exchange_args *xg)
{
    const uint64_t all = chunk * share_parts(m, part);
    if (part == NPU_PART_MN) {
        struct noc_coll_args a = { .buf = yt, .count = all, .dtype = m->buf.dt };
        return noc_allgather(m->comm, &a);
    }
    int rc = NPU_OK;
    if (m->plan->rect_cols > 1) {
        struct noc_coll_args a = { .buf = yt + i * chunk * m->buf.eb, .count = chunk,
                                   .dtype = m->buf.dt };
        rc = noc_allreduce_line(m->comm, &a, NOC_LINE_ROWS);
    }
    if (rc == NPU_OK && xg)
        return noc_exchange_blocks(m->comm, xg);
    if (rc == NPU_OK && m->plan->rect_rows > 1) {
        struct noc_coll_args a = { .buf = yt, .count = all, .dtype = m->buf.dt };
        rc = noc_allgather_line(m->comm, &a, NOC_LINE_COLS);
    }
    return rc;
}

/* The index list of unchunk's gather for `rows` rows of `parts` chunks (row r's piece of
   chunk i is table row i rows + r, and lands at r parts + i), kept while the shape lasts. */
#define UNCHUNK_PIECES_MAX 1024u
static uint32_t unchunk_idx[UNCHUNK_PIECES_MAX];
static uint32_t unchunk_rows, unchunk_parts;

static const uint32_t *unchunk_list(struct exec_model *m, uint32_t rows, uint32_t parts)
{
    if (rows == unchunk_rows && parts == unchunk_parts)
        return unchunk_idx;
    /* HAZARD: the list of a gather of the shape before */
    int rc = exec_wait_for(m, (uint64_t)(uintptr_t)unchunk_idx, sizeof(unchunk_idx));
    assert(rc == NPU_OK && "a wait without a deadline");
    (void)rc;
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t i = 0; i < parts; i++)
            unchunk_idx[r * parts + i] = i * rows + r;
    unchunk_rows = rows, unchunk_parts = parts;
    return unchunk_idx;
}

/* Y[rows][n] from `parts` chunks [rows][w] at yt (columns [off, off + n / parts) of chunk i
   are Y's columns [i n / parts, ...)): Y's rows are its chunks' pieces in turn, so one DMA
   gather of rows x parts pieces (a 2-D copy per chunk, or per row, was 13 % of the
   descriptors of a chunked serving run). Where only some columns are read, or the list
   would not fit, a 2-D copy per chunk (per chunk that holds read columns), or per row where
   the rows are fewer than the chunks. */
static void unchunk(struct exec_model *m, uint64_t y, uint64_t yt, uint32_t rows, uint32_t n,
                    uint32_t parts, uint32_t w, uint32_t off, const uint32_t read[2])
{
    const uint64_t eb = m->buf.eb, ni = n / parts, cb = ni * eb;
    if (!read && rows > 1 && (uint64_t)rows * parts <= UNCHUNK_PIECES_MAX) {
        exec_gather(m, &(struct exec_gather_args){
                           .dst = y, .table = yt + off * eb,
                           .index = unchunk_list(m, rows, parts), .rows = rows * parts,
                           .row_bytes = cb, .table_stride = w * eb,
                           .table_rows = rows * parts });
    } else if (parts <= rows) {
        for (uint64_t i = 0; i < parts; i++) /* chunk i: rows x ni, to columns i ni */
            if (!read || (i * ni < read[1] && (i + 1) * ni > read[0])) /* read: its columns */
                exec_copy(m, y + i * cb, yt + (i * rows * w + off) * eb, rows, cb, w * eb,
                          n * eb);
    } else {
        for (uint64_t r = 0; r < rows; r++) /* row r: one piece of ni from every chunk */
            exec_copy(m, y + r * n * eb, yt + (r * w + off) * eb, parts, cb,
                      (uint64_t)rows * w * eb, cb);
    }
}

/* After the shares: the collectives that complete Y on every rank. */
static int complete(struct exec_model *m, enum npu_partition part, uint64_t y, uint64_t yt,
                    uint32_t rows, uint32_t n, const struct npu_image_tensor *t)
{
    if (m->tp == 1)
        return NPU_OK;
    enum exec_cat was = m->acct.cat;
    exec_set_cat(m, EXEC_CAT_COLL);
    int rc;
    if (part == NPU_PART_K) {
        struct noc_coll_args a = { .buf = y, .count = (uint64_t)rows * n, .dtype = m->buf.dt };
        rc = noc_allreduce(m->comm, &a);
    } else if (part == NPU_PART_MN && rows > 1) { /* each rank's columns into place */
        struct noc_gather_blocks_args g = { .dst = y, .src = y + (uint64_t)t->row0 * m->buf.eb,
                                            .rows = rows, .cols = n, .ld = n, .src_ld = n,
                                            .dtype = m->buf.dt };
        rc = noc_allgather_blocks(m->comm, &g);
    } else { /* MN with one row (Y itself is the chunks), or 2D (chunks at yt) */
        rc = collect_chunks(m, part, rows == 1 ? y : yt, share_index(t),
                            (uint64_t)rows * t->rows, NULL);
    }
    exec_set_cat(m, was);
    if (rc == NPU_OK && part == NPU_PART_2D && rows > 1)
        unchunk(m, y, yt, rows, n, share_parts(m, part), t->rows, 0, NULL);
    return rc;
}

/* A streamed share goes in at least this many pieces, so that all but the first piece's
   load hide behind GEMMs: a share loaded whole and then multiplied takes the sum of both
   (Qwen3-30B-A3B's LM head share on large-64 at decode, 9.7 MB: 81 us, then 79 us). */
#define STREAM_PIECES 4u

/* Rows of t a streamed piece holds: a STREAM_PIECES-th of its rows, at most as many as fit
   in half of the staging buffer (*halves), else as many as fit in all of it. */
static uint32_t piece_rows(const struct exec_model *m, const struct npu_image_tensor *t,
                           uint64_t *half, bool *halves)
{
    const uint64_t row_bytes = (uint64_t)t->cols * m->buf.eb;
    *half = (m->w.stage_bytes / 2) & ~63ull;
    *halves = *half >= row_bytes; /* else pieces of the whole buffer, in series */
    const uint32_t fit = (uint32_t)((*halves ? *half : m->w.stage_bytes) / row_bytes);
    const uint32_t even = (t->rows + STREAM_PIECES - 1) / STREAM_PIECES;
    assert(fit >= 1 && "the planner sizes the buffer for a row of every streamed share");
    return *halves && even < fit ? even : fit;
}

/* Rows [r0, r1) of streamed share t into dst, on the second DMA queue: in order behind the
   piece before (on the first, two pieces' loads shared the channel and the first GEMM
   waited for both), each waiting by its data for the GEMM that read its half. */
static void load_piece(struct exec_model *m, const struct npu_image_tensor *t, uint64_t dst,
                       uint32_t r0, uint32_t r1)
{
    const uint64_t row_bytes = (uint64_t)t->cols * m->buf.eb;
    const enum exec_cat was = m->acct.cat;
    exec_set_cat(m, EXEC_CAT_WEIGHTS);
    exec_copy_side(m, dst, exec_hbm_addr(m, t->hbm_off + r0 * row_bytes), (r1 - r0) * row_bytes);
    exec_set_cat(m, was);
}

/* Share rows [r0, *r1) of t in SRAM: the whole share where it is resident or staged (w),
   else the next piece streamed through the staging buffer, as many rows as fit in half of
   it. The pieces alternate between the halves, so that a piece loads while the GEMM of the
   one before reads the other half (the hazard tracker orders a load after the GEMM that
   read its half two pieces ago): Qwen3-8B's LM head share on large-64, 19 MB streamed in
   two pieces through the whole buffer, loaded and multiplied in series, 328 us at the end
   of each decode step. The first piece may have loaded during the last layer
   (exec_head_ahead). Only the LM head streams (exec_share_addr: layers' shares are
   resident or staged whole), after the last layer, so the buffer holds nothing else then. */
static uint64_t share_piece(struct exec_model *m, const struct npu_image_tensor *t, uint64_t w,
                            uint32_t r0, uint32_t *r1)
{
    if (w) {
        *r1 = t->rows;
        return w;
    }
    uint64_t half;
    bool halves;
    const uint32_t chunk = piece_rows(m, t, &half, &halves);
    *r1 = t->rows - r0 < chunk ? t->rows : r0 + chunk;
    const uint64_t dst = m->w.stage + (halves && m->w.stream_half ? half : 0);
    m->w.stream_half = halves && !m->w.stream_half;
    if (r0 == 0 && m->w.head_ahead) { /* loaded during the last layer */
        m->w.head_ahead = false;
        return dst;
    }
    load_piece(m, t, dst, r0, *r1);
    return dst;
}

static bool overlaps(uint64_t lo, uint64_t hi, uint64_t a, uint64_t b)
{
    return lo < b && a < hi;
}

/* Which half of the staging buffer the head's first piece takes (exec_head_ahead): not one
   holding the layer's own shares while their readers are still to come (UINT32_MAX:
   neither), else the one whose last matrix reader was issued first (a MoE layer's: its
   expert ring's earlier slots). */
static uint32_t ahead_half(struct exec_model *m, uint32_t l, uint64_t half, bool read)
{
    uint64_t lo, hi;
    exec_stage_copy(m, l, &lo, &hi);
    const uint64_t s = m->w.stage;
    const bool own[2] = { overlaps(lo, hi, s, s + half), overlaps(lo, hi, s + half, s + 2 * half) };
    if (!read && own[0] && own[1])
        return UINT32_MAX;
    if (!read && own[0] != own[1])
        return own[0] ? 1 : 0;
    const uint32_t n0 = hz_need_of(HZ_MATRIX, (struct hz_range){ s, s + half });
    const uint32_t n1 = hz_need_of(HZ_MATRIX, (struct hz_range){ s + half, s + 2 * half });
    return n1 < n0 ? 1 : 0;
}

void exec_head_ahead(struct exec_model *m, uint32_t l, bool read)
{
    const struct npu_image_tensor *t = m->w.lm_head;
    if (!m->head_due || l + 1 != m->cfg->num_layers || m->w.head_ahead || !t ||
        t->sram_off != NPU_IMAGE_NOWHERE || m->treuse.on)
        return; /* not the last layer of a pass with the head, a head that does not stream,
                   or an op whose tiles replay (a replayed tile would not stand for it) */
    uint64_t half;
    bool halves;
    const uint32_t chunk = piece_rows(m, t, &half, &halves);
    const uint32_t h = halves ? ahead_half(m, l, half, read) : UINT32_MAX;
    if (h == UINT32_MAX)
        return; /* pieces of the whole buffer, or both halves hold shares still to be read */
    const uint64_t dst = m->w.stage + h * half;
    load_piece(m, t, dst, 0, t->rows < chunk ? t->rows : chunk);
    exec_ring_forget(m, dst, dst + half); /* slots it overwrites hold nothing now */
    m->w.stream_half = h == 1, m->w.head_ahead = true;
}

/* Where GEMM g's 2D chunks go: the O GEMM's in yo (outside attention's scratch, which ytmp
   overlays), the others' in ytmp. */
static uint64_t chunks_at(const struct exec_model *m, enum npu_gemm g)
{
    return g == NPU_GEMM_O ? m->buf.a.yo : m->buf.a.ytmp;
}

static const struct npu_image_tensor *wgemm_tensor(const struct exec_model *m, uint32_t layer,
                                                   enum model_tensor_kind kind)
{
    return kind == MT_LM_HEAD ? m->w.lm_head : m->w.t[layer][kind];
}

void exec_wgemm_cols(const struct exec_model *m, uint32_t layer, enum model_tensor_kind kind,
                     uint32_t *c0, uint32_t *c1)
{
    const struct npu_image_tensor *t = wgemm_tensor(m, layer, kind);
    *c0 = t->col0, *c1 = t->col0 + t->cols; /* share_gemm reads X's columns [c0, c1) */
}

void exec_wgemm_start(struct exec_model *m, enum npu_gemm g, uint64_t y, uint64_t x,
                      uint32_t rows, uint32_t layer, enum model_tensor_kind kind,
                      uint32_t block, uint32_t n, uint32_t k)
{
    const struct npu_image_tensor *t = wgemm_tensor(m, layer, kind);
    const enum npu_partition part = (enum npu_partition)m->plan->partition[g];
    const uint64_t w = exec_share_addr(m, t, layer, kind, block);
    for (uint32_t r0 = 0, r1; r0 < t->rows; r0 = r1)
        share_gemm(m, part, y, chunks_at(m, g), x, share_piece(m, t, w, r0, &r1), rows, t, r0,
                   r1, n, k);
}

/* The bytes the collective completing y reads and writes: y itself, or (2D with several
   rows) every chunk at yt. */
static uint64_t complete_span(const struct exec_model *m, enum npu_partition part, uint64_t y,
                              uint64_t yt, uint32_t rows, uint32_t n, uint64_t *bytes)
{
    *bytes = (uint64_t)rows * n * m->buf.eb;
    return part == NPU_PART_2D && rows > 1 ? yt : y;
}

int exec_wgemm_finish(struct exec_model *m, enum npu_gemm g, uint64_t y, uint32_t rows,
                      uint32_t layer, enum model_tensor_kind kind, uint32_t n, bool after)
{
    if (m->tp == 1)
        return NPU_OK;
    const struct npu_image_tensor *t = wgemm_tensor(m, layer, kind);
    const enum npu_partition part = (enum npu_partition)m->plan->partition[g];
    const uint64_t yt = chunks_at(m, g);
    uint64_t bytes, at = complete_span(m, part, y, yt, rows, n, &bytes);
    int rc = after ? exec_wait_for_collective(m, at, bytes) : exec_flush(m);
    return rc != NPU_OK ? rc : complete(m, part, y, yt, rows, n, t);
}

int exec_wgemm(struct exec_model *m, enum npu_gemm g, uint64_t y, uint64_t x, uint32_t rows,
               uint32_t layer, enum model_tensor_kind kind, uint32_t block, uint32_t n,
               uint32_t k)
{
    exec_wgemm_start(m, g, y, x, rows, layer, kind, block, n, k);
    return exec_wgemm_finish(m, g, y, rows, layer, kind, n, false);
}

void exec_wgemm_own(struct exec_model *m, uint64_t y, uint64_t x, uint32_t rows,
                    uint32_t layer, enum model_tensor_kind kind, uint32_t k)
{
    const struct npu_image_tensor *t = kind == MT_LM_HEAD ? m->w.lm_head : m->w.t[layer][kind];
    const uint64_t eb = m->buf.eb, w = exec_share_addr(m, t, layer, kind, 0);
    for (uint32_t r0 = 0, r1; r0 < t->rows; r0 = r1) { /* y[:, r0:r1] */
        const uint64_t piece = share_piece(m, t, w, r0, &r1);
        exec_gemm(m, y + r0 * eb, x + (uint64_t)t->col0 * eb, piece, rows, r1 - r0, t->cols, k,
                  t->cols, t->rows, true, false, false);
    }
}

/* The fused q, k and v shares (exec_wgemm_qkv): their chunk holds [rows][w], w = the three
   share widths, q's columns first. One GEMM if the shares are one matrix in SRAM. */
static void qkv_gemm(struct exec_model *m, const struct npu_image_tensor *const t[3],
                     const uint64_t w[3], uint64_t x, uint32_t rows, uint32_t ldx)
{
    const uint64_t eb = m->buf.eb, row_bytes = (uint64_t)t[0]->cols * eb;
    const uint32_t width = t[0]->rows + t[1]->rows + t[2]->rows;
    const uint64_t chunk = m->buf.a.yqkv + (uint64_t)share_index(t[0]) * rows * width * eb;
    const uint64_t xs = x + (uint64_t)t[0]->col0 * eb;
    bool one = true;
    for (int i = 1; i < 3; i++)
        one = one && t[i]->cols == t[0]->cols && t[i]->col0 == t[0]->col0 &&
              w[i] == w[i - 1] + t[i - 1]->rows * row_bytes;
    if (one) { /* chunk[rows][width] = X[rows][K] (Wq_r | Wk_r | Wv_r)^T */
        exec_gemm(m, chunk, xs, w[0], rows, width, t[0]->cols, ldx, t[0]->cols, width, true,
                  false, false);
        return;
    }
    for (uint32_t i = 0, off = 0; i < 3; off += t[i]->rows, i++)
        exec_gemm(m, chunk + off * eb, x + (uint64_t)t[i]->col0 * eb, w[i], rows, t[i]->rows,
                  t[i]->cols, ldx, t[i]->cols, width, true, false, false);
}

/* The q, k and v shares of the layer (t, w) and whether they run fused: one GEMM into one
   chunk and one pair of collectives (MN or 2D over ranks, shares of one index, in SRAM). */
static bool qkv_shares(struct exec_model *m, uint32_t layer,
                       const struct npu_image_tensor *t[3], uint64_t w[3])
{
    const enum npu_partition part = (enum npu_partition)m->plan->partition[NPU_GEMM_QKV];
    const enum model_tensor_kind kinds[3] = { MT_WQ, MT_WK, MT_WV };
    bool fused = m->tp > 1 && part != NPU_PART_K;
    for (int i = 0; i < 3; i++) {
        t[i] = m->w.t[layer][kinds[i]];
        w[i] = exec_share_addr(m, t[i], layer, kinds[i], 0);
        fused = fused && w[i] && share_index(t[i]) == share_index(t[0]);
    }
    return fused;
}

bool exec_wgemm_qkv_start(struct exec_model *m, uint64_t x, uint32_t rows, uint32_t layer)
{
    const struct npu_image_tensor *t[3];
    uint64_t w[3];
    if (!qkv_shares(m, layer, t, w))
        return false;
    qkv_gemm(m, t, w, x, rows, m->cfg->hidden_size);
    return true;
}

/* The fused chunk's collectives: MN gathers q's, k's and v's columns of the chunk straight
   into place; 2D completes the chunks, then copies each part's columns out. */
static int qkv_collect(struct exec_model *m, const uint64_t y[3], const uint32_t n[3],
                       const struct npu_image_tensor *const t[3], uint32_t rows,
                       const struct exec_qkv_xchg *xg)
{
    const enum npu_partition part = (enum npu_partition)m->plan->partition[NPU_GEMM_QKV];
    const uint32_t width = t[0]->rows + t[1]->rows + t[2]->rows;
    const uint64_t chunk = m->buf.a.yqkv + (uint64_t)share_index(t[0]) * rows * width * m->buf.eb;
    enum exec_cat was = m->acct.cat;
    exec_set_cat(m, EXEC_CAT_COLL);
    int rc = NPU_OK;
    if (part == NPU_PART_MN) {
        for (uint32_t i = 0, off = 0; i < 3 && rc == NPU_OK; off += t[i]->rows, i++) {
            struct noc_gather_blocks_args g = { .dst = y[i], .src = chunk + off * m->buf.eb,
                                                .rows = rows, .cols = n[i], .ld = n[i],
                                                .src_ld = width, .dtype = m->buf.dt };
            rc = noc_allgather_blocks(m->comm, &g);
        }
        exec_set_cat(m, was);
        return rc;
    }
    const bool local = part == NPU_PART_2D && xg;
    rc = collect_chunks(m, part, m->buf.a.yqkv, share_index(t[0]), (uint64_t)rows * width,
                        local ? &xg->xg : NULL);
    exec_set_cat(m, was);
    /* exchanged: only the chunks this rank read pieces of (the rest hold older data) */
    for (uint32_t i = 0, off = 0; i < 3 && rc == NPU_OK; off += t[i]->rows, i++)
        unchunk(m, y[i], m->buf.a.yqkv, rows, n[i], share_parts(m, part), width, off,
                local ? xg->cols[i] : NULL);
    return rc;
}

/* Waits for the queued work on what the fused chunk's collectives touch: every chunk, and
   under MN (which gathers straight into place) q, k and v as well; 0 or the wait's error. */
static int qkv_wait(struct exec_model *m, const uint64_t y[3], const uint32_t n[3],
                    const struct npu_image_tensor *const t[3], uint32_t rows)
{
    const enum npu_partition part = (enum npu_partition)m->plan->partition[NPU_GEMM_QKV];
    const uint64_t width = t[0]->rows + t[1]->rows + t[2]->rows, eb = m->buf.eb;
    int rc = exec_wait_for_collective(m, m->buf.a.yqkv,
                                      share_parts(m, part) * rows * width * eb);
    for (int i = 0; i < 3 && rc == NPU_OK && part == NPU_PART_MN; i++)
        rc = exec_wait_for(m, y[i], (uint64_t)rows * n[i] * eb);
    return rc;
}

bool exec_wgemm_qkv_chunks(struct exec_model *m, uint32_t layer, uint32_t rows,
                           struct exec_qkv_chunks *out)
{
    const struct npu_image_tensor *t[3];
    uint64_t w[3];
    if (m->plan->partition[NPU_GEMM_QKV] != NPU_PART_2D || !qkv_shares(m, layer, t, w))
        return false;
    *out = (struct exec_qkv_chunks){ .base = m->buf.a.yqkv,
                                     .parts = share_parts(m, NPU_PART_2D), .q = t[0]->rows,
                                     .k = t[1]->rows, .v = t[2]->rows };
    out->width = out->q + out->k + out->v;
    out->bytes = (uint64_t)out->parts * rows * out->width * m->buf.eb;
    return true;
}

int exec_wgemm_qkv_finish(struct exec_model *m, uint64_t q, uint64_t k, uint64_t v, uint64_t x,
                          uint32_t rows, uint32_t layer, bool started, bool after,
                          const struct exec_qkv_xchg *xg)
{
    const struct model_config *c = m->cfg;
    const uint32_t d = c->hidden_size, n[3] = { c->num_heads * c->head_dim,
                                                c->num_kv_heads * c->head_dim,
                                                c->num_kv_heads * c->head_dim };
    const enum model_tensor_kind kinds[3] = { MT_WQ, MT_WK, MT_WV };
    const uint64_t y[3] = { q, k, v };
    const struct npu_image_tensor *t[3];
    uint64_t w[3];
    if (!started) { /* one GEMM and one collective each */
        int rc = NPU_OK;
        for (int i = 0; i < 3 && rc == NPU_OK; i++)
            rc = exec_wgemm(m, NPU_GEMM_QKV, y[i], x, rows, layer, kinds[i], 0, n[i], d);
        return rc;
    }
    const bool fused = qkv_shares(m, layer, t, w);
    assert(fused && "started means fused");
    (void)fused;
    int rc = after ? qkv_wait(m, y, n, t, rows) : exec_flush(m);
    return rc != NPU_OK ? rc : qkv_collect(m, y, n, t, rows, xg);
}

int exec_wgemm_qkv(struct exec_model *m, uint64_t q, uint64_t k, uint64_t v, uint64_t x,
                   uint32_t rows, uint32_t layer)
{
    const bool started = exec_wgemm_qkv_start(m, x, rows, layer);
    return exec_wgemm_qkv_finish(m, q, k, v, x, rows, layer, started, false, NULL);
}

/* This rank's share alone (no collective): MN gives y[rows][share rows] of the output
   columns; K takes x as this rank's column slice (ldx apart) and gives a partial y[rows][n];
   EP gives y[rows][n] of a whole expert. */
void exec_wgemm_local(struct exec_model *m, enum npu_gemm g, uint64_t y, uint64_t x,
                      uint32_t rows, uint32_t layer, enum model_tensor_kind kind, uint32_t block,
                      uint32_t n, uint32_t ldx)
{
    const struct npu_image_tensor *t = m->w.t[layer][kind];
    uint64_t w = exec_share_addr(m, t, layer, kind, block);
    assert(w && "local shares are staged or resident");
    if (m->plan->partition[g] == NPU_PART_MN || m->plan->partition[g] == NPU_PART_EP)
        exec_gemm(m, y, x, w, rows, t->rows, t->cols, ldx, t->cols, t->rows, true, false,
                  false); /* EP: the whole expert, y[rows][n] complete for these rows */
    else
        exec_gemm(m, y, x, w, rows, n, t->cols, ldx, t->cols, n, true, false, false);
}

/* What exec_collective and exec_reduce_scatter share: once the queued work is done (after:
   the queued work on a's buffer), `call` over the ranks, counted as collective time. */
/* Before a collective on [buf, + bytes): the queued work done, or (after) the queued work
   on that buffer. */
static int coll_ready(struct exec_model *m, uint64_t buf, uint64_t bytes, bool after)
{
    return after ? exec_wait_for_collective(m, buf, bytes) : exec_flush(m);
}

static int exec_coll_call(struct exec_model *m,
                          int (*call)(struct noc_comm *, const struct noc_coll_args *),
                          const struct noc_coll_args *a, bool after)
{
    if (m->tp == 1)
        return NPU_OK;
    int rc = coll_ready(m, a->buf, a->count * (a->dtype == NPU_DTYPE_BF16 ? 2 : 4), after);
    if (rc != NPU_OK)
        return rc;
    enum exec_cat was = m->acct.cat;
    exec_set_cat(m, EXEC_CAT_COLL);
    rc = call(m->comm, a);
    exec_set_cat(m, was);
    return rc;
}

int exec_collective(struct exec_model *m, bool gather, enum noc_reduce_op op, uint64_t y,
                    uint64_t count, enum npu_dtype dt, bool after)
{
    const struct noc_coll_args a = { .buf = y, .count = count, .dtype = dt, .op = op };
    return exec_coll_call(m, gather ? noc_allgather : noc_allreduce, &a, after);
}

int exec_reduce_scatter(struct exec_model *m, uint64_t y, uint64_t count, enum npu_dtype dt,
                        bool after)
{
    const struct noc_coll_args a = { .buf = y, .count = count, .dtype = dt,
                                     .op = NOC_REDUCE_SUM };
    return exec_coll_call(m, noc_reduce_scatter, &a, after);
}

int exec_allreduce(struct exec_model *m, uint64_t y, uint64_t count, enum npu_dtype dt)
{
    return exec_collective(m, false, NOC_REDUCE_SUM, y, count, dt, false);
}

int exec_allreduce_after(struct exec_model *m, uint64_t y, uint64_t count, enum npu_dtype dt)
{
    return exec_collective(m, false, NOC_REDUCE_SUM, y, count, dt, true);
}

int exec_exchange(struct exec_model *m, const struct noc_exchange_args *a, bool after)
{
    if (m->tp == 1)
        return NPU_OK;
    int rc = coll_ready(m, a->buf, a->bytes, after);
    if (rc != NPU_OK)
        return rc;
    enum exec_cat was = m->acct.cat;
    exec_set_cat(m, EXEC_CAT_COLL);
    rc = noc_exchange_blocks(m->comm, a);
    exec_set_cat(m, was);
    return rc;
}

int exec_allgather(struct exec_model *m, uint64_t y, uint64_t count, enum npu_dtype dt)
{
    return exec_collective(m, true, NOC_REDUCE_SUM, y, count, dt, false);
}
