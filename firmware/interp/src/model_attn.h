/* SPDX-License-Identifier: MIT */
/*
 * Attention's pieces shared by its files (model_exec.h has the interface): the tile's
 * softmax state, a step's rows, and the functions model_attn.c (the cache's steps, the
 * online softmax, the held PV GEMM) and model_attn_window.c (split attention's window and
 * combine) call in each other. Private to the interpreter.
 */
#ifndef MODEL_ATTN_H
#define MODEL_ATTN_H

#include <stdbool.h>
#include <stdint.h>

#include "model_exec.h"
#include "npu/vector.h"

/* A vector op on fp32 operands (statistics, scores). */
static inline void attn_vec_f32(struct exec_model *m, struct vector_op_args v)
{
    exec_vec(m, exec_vec_f32(v));
}

/* The tile's softmax state (see the file header). */
struct attn_state {
    uint64_t span;  /* rows per KV head: n x group */
    uint64_t rows;  /* R = kv heads x span */
    uint64_t l;     /* fp32 [R], after acc's [R][hd] */
};

/* One step of a segment's online softmax: local rows [lr, lr + nb) of this rank's cache,
   whose first column is position p0; mask: some column is hidden from some row (then the
   columns are consecutive positions p0, p0 + 1, ...). */
struct attn_step {
    uint32_t lr, nb, p0;
    bool mask;
};

/* A step's keys and values: [nb][kvd] eb each, rows kvd apart. */
struct attn_kv {
    uint64_t k, v;
};

/* The first position segment g's first row sees (a sliding window's lower end, else 0). */
static inline uint32_t attn_seg_lo(const struct exec_seg *g, uint32_t window)
{
    return window && g->pos + 1 > window ? g->pos + 1 - window : 0;
}

/* Whether every row of g sees every position in [first, last] (MASK would hide nothing). */
bool attn_step_plain(const struct exec_seg *g, uint32_t window, uint32_t first, uint32_t last);

/* The online softmax update of a step's scores (model_attn.c). */
void attn_softmax_update(struct exec_model *m, const struct attn_state *st, uint64_t scores,
                         uint64_t probs, uint64_t first_row, uint32_t rows, uint32_t cols,
                         bool first, uint64_t m_old, uint64_t m_new);

/* KV heads [h0, h0 + hb) of segment g against step s (model_attn.c). */
void attn_heads_step(struct exec_model *m, const struct attn_state *st, const struct exec_seg *g,
                     uint32_t h0, uint32_t hb, const struct attn_step *s, struct attn_kv kv,
                     bool first, uint32_t window, uint64_t m_old, uint64_t m_new);

/* The held PV GEMM (model_attn.c): issue it now; whether one is held. */
void attn_pv_flush(struct exec_model *m);
bool attn_pv_is_held(void);

/* The first position of segment g inside the window (model_attn_window.c). */
uint32_t attn_window_first(const struct exec_model *m, const struct exec_tile *tile,
                           const struct exec_seg *g);

/* The window part of the tile (cached[s]: segment s's state holds cache steps). */
void attn_run_window(struct exec_model *m, const struct attn_state *st,
                     const struct exec_tile *tile, uint32_t window, const bool *cached);

/* Whether every row's state is whole on one rank (gather outputs, not states). */
bool attn_window_whole(const struct exec_model *m, const struct exec_tile *tile, uint32_t window);

/* The whole window's output gathered; the ranks' states combined; whether the combine
   ends in reduce-scatters (its output then gathered into qg). */
int attn_gather_out(struct exec_model *m, const struct attn_state *st,
                    const struct exec_tile *tile, bool after);
int attn_combine(struct exec_model *m, const struct attn_state *st,
                 const struct exec_tile *tile, bool after);
bool attn_combine_scatters(const struct exec_model *m, const struct attn_state *st);

/* Head-local exchanges (model_attn_xchg.c): where the tile's window is whole and the
   partitions allow, the QKV chunks' pieces each rank reads (instead of the column
   all-gather); where each rank's rows of the output are one unit's (a whole window, or the
   combine's reduce-scatters) and the O GEMM is 2D, the output's pieces each O share reads
   (instead of the all-gather of qg); false where they do not apply (the same on every
   rank). */
bool attn_xchg_qkv(struct exec_model *m, uint32_t l, const struct exec_tile *tile,
                   bool sliding, struct exec_qkv_xchg *out);
bool attn_xchg_out(struct exec_model *m, const struct attn_state *st,
                   const struct exec_tile *tile, struct noc_exchange_args *out);

#endif
