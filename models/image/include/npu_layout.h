/* SPDX-License-Identifier: MIT */
/*
 * The per-core buffers of a model run (docs/images.md, "SRAM of a core"): one function that
 * the planner and the firmware both call, so the SRAM the planner reserves for a core's tile
 * buffers is exactly what the firmware uses. Offsets are from the start of the buffer arena;
 * every buffer is 64-byte aligned. T = tile rows, B = requests per iteration, eb = bytes of
 * an activation element (fp32 4, bf16 2); statistics and scores are fp32.
 */
#ifndef NPU_LAYOUT_H
#define NPU_LAYOUT_H

#include <stdbool.h>
#include <stdint.h>

#include "model_config.h"
#include "model_weights.h"
#include "npu_image.h"

struct npu_act_layout {
    uint64_t xt, xb, xb2;          /* [T][d] eb: residual tile, normed, block output (xb:
                                      [max(T, S)][d], S the slice of an EP MoE group) */
    uint64_t xt2, xt3;             /* [T][d] eb: a dense model's second and third residual
                                      tiles when the rows are in HBM (npu_layout_xt2,
                                      npu_layout_xt3); else empty */
    uint64_t q, attn;              /* [T][qd] eb, one buffer: q, then attention's output */
    uint64_t knew, vnew;           /* [T][kvd] eb: the tile's new keys and values */
    uint64_t positions;            /* uint32 [T] */
    uint64_t kblk, vblk;           /* [attn_block][kvd] eb: one attention step's keys, values */
    uint64_t kwin, vwin;           /* split attention: [Wn][kvd] eb, the keys and values of
                                      the op's last Wn rows, row r at r % Wn
                                      (npu_kv_window_rows); else empty */
    uint64_t qg;                   /* [kv heads][T x group][hd] eb: queries by KV head */
    uint64_t scores;               /* [T x group][attn_block] fp32 (group = heads / kv heads) */
    uint64_t probs_blk;            /* [T x group][attn_block] eb: exp(scores - max) */
    uint64_t m_a, m_b, rsum;       /* [kv heads][T x group] fp32: online-softmax statistics */
    uint64_t acc;                  /* [kv heads][T x group][hd] fp32: weighted values, then
                                      room for [kv heads][T x group] fp32 more (split
                                      attention keeps the sums there: one all-reduce) */
    uint64_t gmax;                 /* split attention: [heads x T] fp32, the row maxima
                                      over the ranks (all-reduce with MAX); else empty */
    uint64_t hb, hb2;              /* eb: the dense FFN's hidden rows, [T][2 fs] and
                                      [T][fs] when paired (fs = ff / tp: the rank's share,
                                      gate and up fused), else [T][ff] each; with experts,
                                      at least [max(T, G)][mff], G = moe_rows under EP */
    uint64_t probs;                /* [R][E] fp32: router, R = max(T, S) (the buffers from
                                      here to combine are empty in a dense model) */
    uint64_t topk_val, topk_idx;   /* [R][k] fp32, uint32 */
    uint64_t rweight;              /* [R][k] fp32: 1 / (weight of a row's choice) */
    uint64_t gather, eout;         /* [T][d] eb: rows routed to one expert, its output
                                      (empty under EP, which computes in place) */
    uint64_t combine;              /* [T][k][d] eb: each row's k weighted expert outputs
                                      (EP: [S][k][d], the rank's slice) */
    /* Expert parallelism over p > 1 ranks (else empty): the MoE runs over groups of G =
       max(T, moe_rows) rows; a rank routes its slice of S = ceil(G / p) rows and serves the
       rows routed to its experts (at most min(k, ceil(E / p)) per row of the group), which
       arrive expert by expert (the dispatch's by-bucket layout) and are computed in place. */
    uint64_t ep_send;              /* [S x k][d] eb: the slice's rows by expert, then results */
    uint64_t ep_recv;              /* [G x min(k, ceil(E / p))][d] eb: rows for its experts */
    uint64_t ep_out;               /* [p x S][d] eb: every slice's MoE output (all-gather) */
    uint64_t ep_counts;            /* uint32 [expert_map_slices]: elements this rank's rows
                                      route to each expert slice */
    uint64_t ep_matrix;            /* uint32 [noc_a2av_plan_words]: what the dispatch's
                                      count exchange taught this rank (its plan's words) */
    uint64_t ugather;              /* MoE by units, u = moe_units_rows: [u][d] eb, an
                                      expert's rows */
    uint64_t ueout;                /* [u][d] eb: a unit's outputs over them */
    uint64_t ucombine;             /* [u x k][d] eb: each row's k slots, summed over this
                                      rank's units of the slot's expert */
    uint64_t hx;                   /* [B][d] eb: each request's last row */
    uint64_t logits;               /* [B][V] eb; vocab-parallel head: [B][V / tp] */
    uint64_t argmax;               /* uint32 [B] */
    uint64_t lm_picks;             /* vocab-parallel head: [tp][B] (fp32 value, uint32
                                      index), every rank's argmax (all-gather); else empty */
    uint64_t ytmp;                 /* eb: max(T x max(qd + 2 kvd, d, ff), B x V; no B x V
                                      with a vocab-parallel head): an MN or 2D GEMM's
                                      chunks [rank][T][share] (q, k, v together); overlays
                                      scores .. gmax (npu_layout.c says why) */
    uint64_t yo;                   /* eb: a 2D O GEMM's chunks [rank][T][share] (T x d),
                                      outside attention's scratch (npu_layout.c: over
                                      ep_recv, or its own); else ytmp */
    uint64_t yqkv;                 /* eb: with yo of its own, the QKV GEMM's chunks
                                      [rank][T][qd + 2 kvd] after it; else ytmp */
    /* The MoE over the layer (npu_moe_layer_wide): a second buffer of a group's residual
       rows ([G][d] eb, G = npu_moe_group_rows), so that the next group's rows load while
       this one computes, laid over buffers idle in that pass (no SRAM of its own); xt
       itself (no second buffer) where they are too small or the layer is not wide. */
    uint64_t xg_attn;              /* while groups' attention and dispatch run: over ep_out
                                      (the combine's, idle until the third pass) */
    uint64_t xg_comb;              /* while their combines run: over attention's tile
                                      buffers q .. vblk (idle then; not the window, which
                                      a later wave's groups of the layer still read) */
    uint64_t bytes;                /* the arena */
};

/* Whether the LM head is vocab-parallel: MN over tp > 1 ranks, each rank choosing from
   its vocabulary slice's logits (firmware model_head.c), so no rank holds all of them. */
bool npu_lm_head_split(const struct npu_plan *p);

/* Whether the residual rows of a dense model's layers go through two tiles in SRAM: the
   rows live in HBM, and the next tile's rows load while this one's compute. */
bool npu_layout_xt2(const struct model_config *c, const struct npu_plan *p);
/* And a third (xt3): with a paired FFN (firmware layer_op_dense_overlapped, not under tile
   reuse) the rows of the tile after next load while this one's compute, behind the one
   before it going back from that buffer on the same queue. */
bool npu_layout_xt3(const struct model_config *c, const struct npu_plan *p);
/* Whether an FFN (expert: the experts') is paired: gate and up give each rank its share of
   the hidden's columns and the down GEMM's partial sums complete it (MN then K over tp > 1
   ranks, or whole experts under EP), so no rank holds the whole hidden. */
bool npu_ffn_paired(const struct npu_plan *p, bool expert);
/* Columns of the dense FFN's hidden buffers (buf 0: hb, 1: hb2; 0 with no dense FFN). */
uint32_t npu_ffn_hidden_width(const struct model_config *c, const struct npu_plan *p, int buf);

/* Bytes of an activation / weight element of the plan. */
uint32_t npu_dtype_bytes(uint32_t dtype);

void npu_act_layout(const struct model_config *c, const struct npu_plan *p,
                    struct npu_act_layout *out);

/*
 * The KV cache of one core (docs/serving.md, "KV cache"): a pool of kv_sram_blocks blocks in
 * SRAM, laid out [K|V][layer][block][kv_block][kvd], and a ring of kv_ring_rows positions,
 * laid out [K|V][layer][row][kvd]. Each core holds the same layout; the control core's KV
 * manager (runtime/core/include/rt/kvc.h) decides which blocks and rows a request owns.
 */
uint64_t npu_kv_row_bytes(const struct model_config *c, const struct npu_plan *p);
uint64_t npu_kv_pool_bytes(const struct model_config *c, const struct npu_plan *p);
uint64_t npu_kv_ring_bytes(const struct model_config *c, const struct npu_plan *p);
/* Offsets of (K or V, layer, block, position in block) in the pool and (K or V, layer, row)
   in the ring. */
uint64_t npu_kv_pool_offset(const struct model_config *c, const struct npu_plan *p, bool v,
                            uint32_t layer, uint32_t block, uint32_t pos);
uint64_t npu_kv_ring_offset(const struct model_config *c, const struct npu_plan *p, bool v,
                            uint32_t layer, uint64_t row);

/*
 * Split attention (npu_plan.kv_split): cache block b = pos / kv_block of request req belongs
 * to rank (b + npu_kv_rank_shift(req)) % tp, where it is local block b / tp, so a rank's
 * positions are rows (pos / W) x kv_block + pos % kv_block of its own cache, W = tp x
 * kv_block positions (a stripe: one block id of the control core's KV manager, one pool
 * block on every rank). Unsplit: W = kv_block, every
 * rank holds every position, and the local row is the position.
 */
bool npu_kv_is_split(const struct npu_plan *p); /* kv_split over tp > 1 ranks */
/* EP MoE groups larger than a tile with the residual rows in HBM: a group's rows are held in
   xt (sized for moe_rows), and a MoE layer's attention and MoE run fused, group by group
   (docs/images.md, "MoE groups"). */
bool npu_moe_groups_in_xt(const struct npu_plan *p);
/* Rows of one group of a fused layer: moe_rows rounded down to whole tiles. */
uint32_t npu_moe_group_rows(const struct npu_plan *p);

/*
 * The MoE over the layer (docs/images.md, "MoE over the layer"; firmware model_moe_wide.c):
 * fused layers whose iteration can take more than one group (at most
 * NPU_MOE_WIDE_GROUPS_MAX), under balanced placement, dispatch every group first, keeping
 * each group's received rows in HBM, then serve each expert slice once over the rows of all
 * groups, then combine group by group. The HBM after the residual rows (at x_off +
 * npu_moe_x_rows_bytes) holds, with plan.moe_spill_parity, two halves of `half` bytes,
 * layer l's in half l mod 2 (a layer's combines may run group by group inside the next
 * layer's first pass, which spills beside them), else one, each:
 *   rows:  [cap][d] eb, the groups' received rows one after the other (a group's by slice),
 *          cap = moe_spill_rows (the planner's: max_tokens x min(fan-out, the rank's slices),
 *          less where HBM is short; a group of G rows needs at most G x that minimum, and
 *          a layer whose groups' worst cases would pass the spill serves and combines the
 *          groups before the one that would first: a wave);
 *   stash: [groups] records of `stride` bytes: the group's first spilled row and row count
 *          (uint64 each), its (count, offset) in rows of each slice the rank holds (uint32
 *          pairs, at `runs`), the dispatch's plan words (uint32 [noc_a2av_plan_words], at
 *          `counts`) and, functional mode, the rank's rows' top-k ([S][k] fp32 and
 *          uint32, at `topk_val`, `topk_idx`; S = ceil(moe_rows / tp)).
 */
/* Words of the EP dispatch's plan (ep_matrix, a wide record's `counts`): what a rank keeps
   of an all-to-all-v over tp ranks and a layer's slices (noc_a2av_plan_words). */
uint32_t npu_ep_plan_words(const struct model_config *c, const struct npu_plan *p);
#define NPU_MOE_WIDE_GROUPS_MAX 1024u
/* Groups of a fused layer of max_tokens rows (npu_moe_group_rows each). */
uint32_t npu_moe_layer_groups(const struct npu_plan *p);
/* Fused layers of more than one group (and at most NPU_MOE_WIDE_GROUPS_MAX): the MoE over
   the layer applies if the placement is balanced. Contiguous placement keeps group by group:
   measured, it served prefill-2048 faster that way (135.8 against 160.8 ms: whole hot
   experts make one rank's pass over every group's rows the longest pole), and the layered
   reference run too (115.6 against 120.8 s), though it loaded half the expert bytes. */
bool npu_moe_wide_able(const struct npu_plan *p);
bool npu_moe_layer_wide(const struct npu_plan *p);
struct npu_moe_spill {
    uint64_t rows, cap;            /* offset of the spilled rows; rows they hold */
    uint64_t stash, stride;        /* offset of the records, bytes of one */
    uint64_t runs, counts, topk_val, topk_idx; /* offsets inside a record */
    uint32_t groups;               /* records */
    uint64_t half;                 /* bytes of one layer parity's spill (offsets above
                                      are inside a half) */
    uint64_t bytes;                /* its halves; 0 when the plan is not layer-wide */
};
void npu_moe_spill_layout(const struct model_config *c, const struct npu_plan *p,
                          struct npu_moe_spill *out);
/* The most rows one group of g rows can spill: g x min(fan-out, the rank's slices). */
uint64_t npu_moe_spill_group_rows(const struct model_config *c, const struct npu_plan *p,
                                  uint64_t g);
/* Bytes of the residual rows before the spill (max_tokens x d x eb, 64-byte aligned). */
uint64_t npu_moe_x_rows_bytes(const struct model_config *c, const struct npu_plan *p);
/* Split: the rank holding cache block b of request `req` is (b + s) mod tp, s =
   npu_kv_rank_shift(req): each request's stripes start at another rank, so that many
   requests' first blocks (a decode batch's short contexts, all their blocks in the first
   stripe) do not all sit on rank 0. A stripe still gives every rank one block, so a rank's
   local rows are the same as without the shift. */
uint32_t npu_kv_rank_shift(const struct npu_plan *p, uint32_t req);
/* The same for request ids 0..tp-1 into table[tp] (it repeats every tp ids), in one pass:
   the firmware's copy (npu_kv_rank_shift costs O(P) a call). */
void npu_kv_rank_shifts(const struct npu_plan *p, uint16_t *table);
uint32_t npu_kv_stripe(const struct npu_plan *p);
/* Cores a stripe's positions are dealt over (the KV manager's rt_kvc_config.ranks). */
uint32_t npu_kv_ranks(const struct npu_plan *p);
/* Split attention's window (npu_plan.kv_window; firmware model_attn.c, "The window"): how
   many of an op's latest rows every rank keeps the keys and values of, so that attention
   over them runs query-parallel. 0 unsplit. The planner's default: what max_tokens needs,
   at most NPU_KV_WINDOW_BYTES of K and V, a multiple of tile_rows. */
#define NPU_KV_WINDOW_BYTES (1ull << 20)
/* The most K and V the planner widens a default window to once the plan fits, if the SRAM
   left keeps every other choice (docs/images.md, "Split attention"). */
#define NPU_KV_WINDOW_WIDE_BYTES (8ull << 20)
uint32_t npu_kv_window_rows(const struct npu_plan *p);
uint32_t npu_kv_window_default(const struct model_config *c, const struct npu_plan *p);
/* Rows of its own cache one rank needs for positions [0, positions) (the most any rank
   holds). */
uint64_t npu_kv_local_rows(const struct npu_plan *p, uint64_t positions);

/* ---- Staging of one layer's weights (plans whose weights are not resident in SRAM)
 *
 * The staging buffer holds the rank's non-expert shares of one layer in tensor-kind order,
 * then one slot per expert the rank holds (its gate, up and down blocks), or with an expert
 * ring (npu_plan.expert_slots) that many slots of one expert matrix each; every piece is
 * 64-byte aligned. The planner sizes the buffer with npu_stage_map_layer and the cores place
 * the shares with it, so the two cannot disagree. The embeddings, the final norm and the LM
 * head are not staged per layer.
 */
#define NPU_STAGE_KINDS (MT_LM_HEAD + 1u)
struct npu_stage_map {
    uint64_t off[NPU_STAGE_KINDS]; /* a share's offset from the buffer; an expert kind's
                                      offset within an expert slot; 0 where none */
    uint64_t experts;              /* offset of expert slot 0 (the end of the other shares) */
    uint64_t expert_span;          /* bytes of one expert slot */
    uint32_t expert_slots;         /* the rank's experts in the layer (0 with a ring) */
    uint64_t ring_span;            /* expert ring (npu_plan.expert_slots): bytes of a slot, */
    uint32_t ring_slots;           /* the largest expert matrix; slots (0: no ring) */
    uint64_t bytes;                /* the layer: experts + the expert slots or the ring */
};
/* t[kind]: this rank's share of tensor kind `kind` of the layer, or NULL where it has none;
   ring_slots: the plan's expert_slots. */
void npu_stage_map_layer(const struct npu_image_tensor *const t[NPU_STAGE_KINDS],
                         uint32_t ring_slots, struct npu_stage_map *map);

#endif
