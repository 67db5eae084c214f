/* SPDX-License-Identifier: MIT */
/* Per-core buffer layout shared by the planner and the firmware (npu_layout.h). */
#include "npu_layout.h"

#include <assert.h>
#include <string.h>

#include "noc/coll_sizes.h"

uint32_t npu_dtype_bytes(uint32_t dtype)
{
    return dtype == NPU_IMAGE_BF16 ? 2u : 4u;
}

static uint64_t take(uint64_t *at, uint64_t bytes)
{
    uint64_t here = *at;
    *at += (bytes + 63) & ~63ull;
    return here;
}

bool npu_layout_xt2(const struct model_config *c, const struct npu_plan *p)
{
    return c->arch != MODEL_MOE && !p->x_in_sram;
}

bool npu_layout_xt3(const struct model_config *c, const struct npu_plan *p)
{
    return npu_layout_xt2(c, p) && npu_ffn_paired(p, false); /* paired: tp > 1 */
}

bool npu_ffn_paired(const struct npu_plan *p, bool expert)
{
    const enum npu_gemm up = expert ? NPU_GEMM_EXP_UP : NPU_GEMM_FFN_UP;
    const enum npu_gemm down = expert ? NPU_GEMM_EXP_DOWN : NPU_GEMM_FFN_DOWN;
    if (expert && p->partition[up] == NPU_PART_EP) /* whole experts, local rows */
        return true;
    return p->tp > 1 && p->partition[up] == NPU_PART_MN && p->partition[down] == NPU_PART_K;
}

uint32_t npu_ffn_hidden_width(const struct model_config *c, const struct npu_plan *p, int buf)
{
    const uint32_t ff = c->intermediate_size;
    if (!ff || !npu_ffn_paired(p, false))
        return ff; /* no dense FFN, or the whole hidden (the unpaired GEMMs complete it) */
    return buf == 0 ? 2 * (ff / p->tp) : ff / p->tp; /* the fused gate and up: [n][2 fs] */
}

/* Columns of an FFN GEMM's chunks in ytmp: only GEMMs completed from chunks (2D) need them,
   and a paired FFN completes nothing before its down GEMM's all-reduce. */
static uint64_t ffn_chunk_width(const struct model_config *c, const struct npu_plan *p)
{
    uint64_t w = npu_ffn_paired(p, false) ? 0 : c->intermediate_size;
    if (c->num_experts && !npu_ffn_paired(p, true) && c->moe_intermediate_size > w)
        w = c->moe_intermediate_size;
    return w;
}

void npu_act_layout(const struct model_config *c, const struct npu_plan *p,
                    struct npu_act_layout *o)
{
    const uint64_t t = p->tile_rows, b = p->max_batch, eb = npu_dtype_bytes(p->dtype);
    const uint64_t d = c->hidden_size, qd = (uint64_t)c->num_heads * c->head_dim;
    const uint64_t kvd = (uint64_t)c->num_kv_heads * c->head_dim, blk = p->attn_block;
    const uint64_t e = c->num_experts ? c->num_experts : 1;
    const uint64_t k = c->experts_per_token ? c->experts_per_token : 1;
    uint64_t at = 0;
    const uint64_t gs = npu_plan_is_ep(p) && p->tp > 1 && p->moe_rows > t
                          ? (p->moe_rows + p->tp - 1) / p->tp : 0; /* an EP group's slice */
    /* xt holds the rows an op works on when the residual rows are in HBM: a tile, or an EP
       MoE group of moe_rows */
    const uint64_t xr = npu_moe_groups_in_xt(p) ? p->moe_rows : t;
    o->xt = take(&at, xr * d * eb), o->xb = take(&at, (gs > t ? gs : t) * d * eb);
    o->xb2 = take(&at, t * d * eb);
    o->xt2 = take(&at, npu_layout_xt2(c, p) ? t * d * eb : 0);
    o->xt3 = take(&at, npu_layout_xt3(c, p) ? t * d * eb : 0);
    o->q = take(&at, t * qd * eb);
    o->attn = o->q; /* q is dead once its heads are in qg: attention's output reuses it */
    o->knew = take(&at, t * kvd * eb), o->vnew = take(&at, t * kvd * eb);
    o->positions = take(&at, t * 4);
    o->kblk = take(&at, blk * kvd * eb), o->vblk = take(&at, blk * kvd * eb);
    const uint64_t wn = npu_kv_window_rows(p);
    o->kwin = take(&at, wn * kvd * eb), o->vwin = take(&at, wn * kvd * eb);
    const uint64_t group = c->num_heads / c->num_kv_heads;
    o->qg = take(&at, t * qd * eb);
    const uint64_t scratch = at; /* attention's own buffers, scores .. gmax: ytmp overlays */
    o->scores = take(&at, t * group * blk * 4), o->probs_blk = take(&at, t * group * blk * eb);
    const uint64_t nh = c->num_heads;
    o->m_a = take(&at, nh * t * 4), o->m_b = take(&at, nh * t * 4);
    o->rsum = take(&at, nh * t * 4);
    o->acc = take(&at, t * qd * 4 + nh * t * 4);
    o->gmax = take(&at, npu_kv_is_split(p) ? nh * t * 4 : 0);
    /* ytmp, an MN or 2D GEMM's output chunks, lives only within one weight GEMM: QKV before
       attention's steps, O after its output left acc, the FFN's, the LM head's. So it
       overlays attention's scratch (HAZARD: never hold ytmp across attention, nor
       attention's state across a weight GEMM), grown where the scratch is smaller. */
    uint64_t wide = qd + 2 * kvd > d ? qd + 2 * kvd : d;
    const uint64_t ffw = ffn_chunk_width(c, p);
    wide = ffw > wide ? ffw : wide;
    /* the head's chunks: only a 2D head completes its logits from chunks (MN writes its
       columns in place, K its partial logits) */
    const uint64_t bv = p->tp > 1 && p->partition[NPU_GEMM_LM_HEAD] == NPU_PART_2D
                            ? b * c->vocab_size : 0;
    /* the QKV GEMM's chunks after the O GEMM's, so that tile i + 1's QKV GEMM may run while
       tile i's O collective reads and writes its chunks (model_layer_ops.c); with
       attn_deep both lie outside the scratch (below) */
    const bool o_chunks = p->tp > 1 && p->partition[NPU_GEMM_O] == NPU_PART_2D;
    const bool deep = o_chunks && p->attn_deep;
    const uint64_t od = o_chunks ? (t * d * eb + 63) & ~63ull : 0;
    const uint64_t qkvd = t * (qd + 2 * kvd) * eb;
    uint64_t yt = (t * wide > bv ? t * wide : bv) * eb;
    yt = !deep && od + qkvd > yt ? od + qkvd : yt;
    o->ytmp = o->yo = scratch, o->yqkv = scratch + (deep ? 0 : od); /* the same without O chunks */
    if (yt > at - scratch)
        take(&at, yt - (at - scratch));
    /* EP: the MoE runs over groups of g = moe_rows rows; a rank routes a slice of s = ceil(g
       / p) of them, whose k choices reach at most kx = expert_fanout expert slices (k if
       every expert is whole), and serves the rows routed to its slices, at most g per slice
       (a row picks an expert once) and g x min(kx, its slices) in all. */
    const uint64_t p_ep = npu_plan_is_ep(p) && p->tp > 1 ? p->tp : 0;
    const uint64_t kx = p_ep && p->expert_fanout ? p->expert_fanout : k;
    const uint64_t per_rank = !p_ep ? 0 : p->expert_rank_slices ? p->expert_rank_slices
                                                                : (e + p_ep - 1) / p_ep;
    const uint64_t g = p_ep && p->moe_rows > t ? p->moe_rows : t;
    const uint64_t slice = p_ep ? (g + p_ep - 1) / p_ep : 0;
    const uint64_t rr = slice > t ? slice : t; /* rows the router and top-k see */
    /* The FFN's hidden: a dense FFN's (npu_ffn_hidden_width), an expert's over a tile or an
       EP group's rows. */
    const uint64_t moe = c->num_experts ? 1 : 0, mff = c->moe_intermediate_size;
    /* disaggregated: an expert core takes every replica's group at once, and a slice up to
       all of their rows */
    const uint64_t senders = p->disagg ? p->instances - 1 : 1, ga = g * senders;
    uint64_t hbw[2] = { t * npu_ffn_hidden_width(c, p, 0), t * npu_ffn_hidden_width(c, p, 1) };
    for (int i = 0; i < 2; i++)
        hbw[i] = moe && (t > ga ? t : ga) * mff > hbw[i] ? (t > ga ? t : ga) * mff : hbw[i];
    o->hb = take(&at, hbw[0] * eb), o->hb2 = take(&at, hbw[1] * eb);
    o->probs = take(&at, moe * rr * e * 4); /* a dense model has no router */
    o->topk_val = take(&at, moe * rr * k * 4), o->topk_idx = take(&at, moe * rr * k * 4);
    o->rweight = take(&at, moe * rr * kx * 4);
    o->gather = take(&at, p_ep || !moe ? 0 : t * d * eb);
    o->eout = take(&at, p_ep || !moe ? 0 : t * d * eb);
    o->combine = take(&at, moe * (p_ep ? slice : t) * k * d * eb); /* EP: the slice only */
    o->ep_send = take(&at, slice * kx * d * eb);
    o->ep_recv = take(&at, ga * (kx < per_rank ? kx : per_rank) * d * eb);
    o->ep_out = take(&at, p_ep * slice * d * eb);
    /* attn_deep: the O and QKV GEMMs' chunks outside attention's scratch, so that two
       tiles' attention may be in flight (model_layer_ops.c): tile i's O collective beside
       tile i + 1's steps, tile i + 1's QKV collectives beside tile i's O GEMM. Over
       ep_recv where it holds both (the dispatch's rows are dead while attention runs, and
       the hazard tracker orders the rest), else their own. */
    const uint64_t steps = (o->vblk - o->kblk) + blk * kvd * eb; /* kblk and vblk */
    if (deep && o->ep_out - o->ep_recv >= od + qkvd) {
        /* at its end: a MoE group's received rows fill it from the start, and the spill
           that copies them to HBM (the MoE over the layer) then runs beside the next
           group's QKV GEMM unless they reach these chunks (the hazard tracker's ranges) */
        o->yo = (o->ep_out - od - qkvd) & ~63ull, o->yqkv = o->yo + od;
    } else if (deep) { /* the QKV chunks over the step buffers where they fit: the steps'
                          loads and GEMMs come before the next tile's QKV GEMM and after
                          its unchunking on their in-order queues anyway; not where every
                          iteration is one tile, whose first steps load before its QKV GEMM
                          (firmware attn_prefetch) */
        const bool one_tile = p->max_tokens <= t && npu_kv_is_split(p);
        o->yo = take(&at, od);
        o->yqkv = steps >= qkvd && !one_tile ? o->kblk : take(&at, qkvd);
    }
    o->ep_counts = take(&at, p_ep ? p->expert_map_slices * 4ull : 0); /* per slice */
    /* the all-to-all-v's plan: what this rank learns of the counts (noc/coll_sizes.h) */
    o->ep_matrix = take(&at, p_ep ? npu_ep_plan_words(c, p) * 4 : 0);
    const uint64_t u = p->moe_units_rows; /* the MoE by units: an expert's rows, their
                                             outputs, and every row's k slots */
    o->ugather = take(&at, u * d * eb), o->ueout = take(&at, u * d * eb);
    o->ucombine = take(&at, u * k * d * eb);
    o->hx = take(&at, b * d * eb);
    const bool split_head = npu_lm_head_split(p); /* logits of the rank's vocabulary slice */
    o->logits = take(&at, b * (split_head ? c->vocab_size / p->tp : c->vocab_size) * eb);
    o->argmax = take(&at, b * 4);
    o->lm_picks = take(&at, split_head ? (uint64_t)p->tp * b * 8 : 0);
    /* HAZARD: both overlays are written while the buffers beneath are idle only because
       the firmware's passes say so (model_layer_ops.c, layer_op_fused); the hazard tracker
       orders the copies against the last and next users of the bytes beneath. */
    const uint64_t gx = (uint64_t)npu_moe_group_rows(p) * d * eb;
    const bool layer_wide = npu_moe_layer_wide(p);
    o->xg_attn = layer_wide && p_ep * slice * d * eb >= gx ? o->ep_out : o->xt;
    o->xg_comb = layer_wide && o->kwin - o->q >= gx ? o->q : o->xt;
    o->bytes = at;
}

bool npu_lm_head_split(const struct npu_plan *p)
{
    return p->tp > 1 && p->partition[NPU_GEMM_LM_HEAD] == NPU_PART_MN;
}

uint64_t npu_kv_row_bytes(const struct model_config *c, const struct npu_plan *p)
{
    return (uint64_t)c->num_kv_heads * c->head_dim * npu_dtype_bytes(p->dtype);
}

uint64_t npu_kv_pool_bytes(const struct model_config *c, const struct npu_plan *p)
{
    return 2ull * p->stage_layers * p->kv_sram_blocks * p->kv_block * npu_kv_row_bytes(c, p);
}

uint64_t npu_kv_ring_bytes(const struct model_config *c, const struct npu_plan *p)
{
    return 2ull * p->stage_layers * p->kv_ring_rows * npu_kv_row_bytes(c, p);
}

uint64_t npu_kv_pool_offset(const struct model_config *c, const struct npu_plan *p, bool v,
                            uint32_t layer, uint32_t block, uint32_t pos)
{
    const uint64_t local = layer % p->stage_layers; /* a core keeps its stage's layers */
    const uint64_t blocks = ((uint64_t)v * p->stage_layers + local) * p->kv_sram_blocks + block;
    return (blocks * p->kv_block + pos) * npu_kv_row_bytes(c, p);
}

uint64_t npu_kv_ring_offset(const struct model_config *c, const struct npu_plan *p, bool v,
                            uint32_t layer, uint64_t row)
{
    const uint64_t local = layer % p->stage_layers;
    const uint64_t rows = ((uint64_t)v * p->stage_layers + local) * p->kv_ring_rows + row;
    return rows * npu_kv_row_bytes(c, p);
}

bool npu_kv_is_split(const struct npu_plan *p)
{
    return p->kv_split && p->tp > 1;
}

/* The bit-reversed order of [0, P), P the power of two >= tp, without the values past tp:
   table[i] for i < tp (O(P) time). */
static void kv_shift_order(uint32_t tp, uint16_t *table)
{
    uint32_t bits = 0, n = 0;
    while ((1u << bits) < tp)
        bits++;
    for (uint32_t k = 0; k < (1u << bits); k++) {
        uint32_t rev = 0;
        for (uint32_t b = 0; b < bits; b++)
            rev |= ((k >> b) & 1u) << (bits - 1 - b);
        if (rev < tp)
            table[n++] = (uint16_t)rev;
    }
}

void npu_kv_rank_shifts(const struct npu_plan *p, uint16_t *table)
{
    if (npu_kv_is_split(p)) {
        kv_shift_order(p->tp, table);
        return;
    }
    for (uint32_t i = 0; i < p->tp; i++)
        table[i] = 0;
}

uint32_t npu_kv_rank_shift(const struct npu_plan *p, uint32_t req)
{
    /* The (req mod tp)-th rank of the bit-reversed order of [0, P) (0, P/2, P/4, 3P/4, ...;
       ranks past tp skipped): any tp consecutive ids start on distinct ranks, and on a
       power-of-two group 2^j consecutive ids from a multiple of 2^j start evenly spaced, so
       a batch of equal contexts from id 0 puts the same number of blocks on every rank.
       (37 q mod tp did not: 8 requests of 32 blocks on 64 ranks gave ranks 3 to 5 blocks,
       and the ranks with 3 waited at the combine for those with 5.) */
    if (!npu_kv_is_split(p))
        return 0;
    uint16_t table[NPU_MESH_DIM_MAX * NPU_MESH_DIM_MAX];
    kv_shift_order(p->tp, table);
    return table[req % p->tp];
}

uint32_t npu_kv_ranks(const struct npu_plan *p)
{
    return npu_kv_is_split(p) ? p->tp : 1;
}

bool npu_moe_groups_in_xt(const struct npu_plan *p)
{
    return npu_plan_is_ep(p) && p->tp > 1 && p->moe_rows > p->tile_rows && !p->x_in_sram;
}

uint32_t npu_moe_group_rows(const struct npu_plan *p)
{
    return p->moe_rows / p->tile_rows * p->tile_rows;
}

uint32_t npu_moe_layer_groups(const struct npu_plan *p)
{
    const uint64_t g = npu_moe_group_rows(p);
    return g ? (uint32_t)((p->max_tokens + g - 1) / g) : 0;
}

bool npu_moe_wide_able(const struct npu_plan *p)
{
    const uint32_t n = npu_moe_groups_in_xt(p) ? npu_moe_layer_groups(p) : 0;
    return n > 1 && n <= NPU_MOE_WIDE_GROUPS_MAX;
}

bool npu_moe_layer_wide(const struct npu_plan *p)
{
    return npu_moe_wide_able(p) && p->expert_placement == NPU_EXPERTS_BALANCED;
}

uint64_t npu_moe_x_rows_bytes(const struct model_config *c, const struct npu_plan *p)
{
    return ((uint64_t)p->max_tokens * c->hidden_size * npu_dtype_bytes(p->dtype) + 63) & ~63ull;
}

static uint64_t rank_slices(const struct model_config *c, const struct npu_plan *p)
{
    return p->expert_rank_slices ? p->expert_rank_slices : (c->num_experts + p->tp - 1) / p->tp;
}

uint64_t npu_moe_spill_group_rows(const struct model_config *c, const struct npu_plan *p,
                                  uint64_t g)
{
    const uint64_t kx = p->expert_fanout ? p->expert_fanout : c->experts_per_token;
    const uint64_t per_rank = rank_slices(c, p);
    return g * (kx < per_rank ? kx : per_rank);
}

uint32_t npu_ep_plan_words(const struct model_config *c, const struct npu_plan *p)
{
    return (uint32_t)noc_a2av_plan_words(npu_plan_ep_ranks(p), p->expert_map_slices,
                                         (uint32_t)rank_slices(c, p));
}

void npu_moe_spill_layout(const struct model_config *c, const struct npu_plan *p,
                          struct npu_moe_spill *o)
{
    memset(o, 0, sizeof(*o));
    if (!npu_moe_layer_wide(p))
        return;
    const uint64_t eb = npu_dtype_bytes(p->dtype), d = c->hidden_size;
    const uint64_t k = c->experts_per_token, g = npu_moe_group_rows(p);
    const uint64_t per_rank = rank_slices(c, p);
    const uint64_t slice = (p->moe_rows + p->tp - 1) / p->tp;
    o->cap = p->moe_spill_rows;
    o->runs = 16; /* after the header's two uint64 */
    uint64_t rec = 0;
    take(&rec, o->runs + per_rank * 8);
    o->counts = take(&rec, npu_ep_plan_words(c, p) * 4);
    o->topk_val = take(&rec, p->mode ? 0 : slice * k * 4);
    o->topk_idx = take(&rec, p->mode ? 0 : slice * k * 4);
    o->stride = rec;
    o->groups = (uint32_t)((p->max_tokens + g - 1) / g);
    uint64_t at = 0;
    o->rows = take(&at, o->cap * d * eb);
    o->stash = take(&at, o->groups * o->stride);
    o->half = at; /* take keeps it 64-byte aligned */
    o->bytes = (p->moe_spill_parity ? 2 : 1) * o->half; /* a half per layer parity */
}

uint32_t npu_kv_window_rows(const struct npu_plan *p)
{
    return npu_kv_is_split(p) ? p->kv_window : 0;
}

uint32_t npu_kv_window_default(const struct model_config *c, const struct npu_plan *p)
{
    if (!npu_kv_is_split(p) || !p->tile_rows)
        return 0;
    const uint64_t t = p->tile_rows, need = (p->max_tokens + t - 1) / t * t;
    const uint64_t fit = NPU_KV_WINDOW_BYTES / (2 * npu_kv_row_bytes(c, p)) / t * t;
    const uint64_t w = need < fit ? need : fit;
    return (uint32_t)(w > t ? w : t); /* the tile's own rows at least */
}

uint32_t npu_kv_stripe(const struct npu_plan *p)
{
    return p->kv_block * npu_kv_ranks(p);
}

uint64_t npu_kv_local_rows(const struct npu_plan *p, uint64_t positions)
{
    const uint64_t w = npu_kv_stripe(p);
    return npu_kv_is_split(p) ? (positions + w - 1) / w * p->kv_block : positions;
}

static uint64_t stage_align(uint64_t bytes)
{
    return (bytes + 63) & ~63ull;
}

void npu_stage_map_layer(const struct npu_image_tensor *const t[NPU_STAGE_KINDS],
                         uint32_t ring_slots, struct npu_stage_map *map)
{
    memset(map, 0, sizeof(*map));
    uint64_t at = 0;
    for (uint32_t kind = 0; kind < NPU_STAGE_KINDS; kind++) {
        if (!t[kind] || model_tensor_is_expert(kind) || kind == MT_EMBED ||
            kind == MT_FINAL_NORM || kind == MT_LM_HEAD)
            continue;
        map->off[kind] = at;
        at += stage_align(t[kind]->blocks * t[kind]->block_bytes);
    }
    map->experts = at;
    const struct npu_image_tensor *g = t[MT_E_GATE], *u = t[MT_E_UP], *d = t[MT_E_DOWN];
    if (g && ring_slots) { /* the expert ring: slots of the largest expert matrix */
        assert(u && d && u->blocks == g->blocks && d->blocks == g->blocks);
        uint64_t span = g->block_bytes > u->block_bytes ? g->block_bytes : u->block_bytes;
        span = d->block_bytes > span ? d->block_bytes : span;
        map->ring_span = stage_align(span);
        map->ring_slots = g->blocks ? ring_slots : 0; /* a rank may hold no expert */
    } else if (g) {
        assert(u && d && u->blocks == g->blocks && d->blocks == g->blocks);
        map->off[MT_E_UP] = stage_align(g->block_bytes);
        map->off[MT_E_DOWN] = map->off[MT_E_UP] + stage_align(u->block_bytes);
        map->expert_span = map->off[MT_E_DOWN] + stage_align(d->block_bytes);
        map->expert_slots = g->blocks;
    }
    map->bytes = at + map->expert_span * map->expert_slots + map->ring_span * map->ring_slots;
}
