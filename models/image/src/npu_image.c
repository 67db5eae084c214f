/* SPDX-License-Identifier: MIT */
/* Image checks shared by the host and the firmware (npu_image.h). */
#include "npu_image.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "model_weights.h"
#include "noc/coll_sizes.h"
#include "noc/placement.h"
#include "npu_layout.h"
#include "npu_limits.h"
#include "npu_regs.h"

_Static_assert(sizeof(struct npu_image_header) % 8 == 0, "header is 8-byte aligned");
_Static_assert(sizeof(struct npu_image_tensor) == 64, "tensor entry layout");
_Static_assert(sizeof(struct npu_image_core) == 136, "core entry layout");
_Static_assert(sizeof(struct npu_prog_op) == 8, "program op layout");

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && errlen)
        vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return code;
}

uint64_t npu_image_fnv1a(uint64_t hash, const void *data, size_t bytes)
{
    const uint8_t *p = data;
    for (size_t i = 0; i < bytes; i++) {
        hash ^= p[i];
        hash *= 0x100000001b3ull;
    }
    return hash;
}

uint64_t npu_image_checksum(const void *image, uint64_t bytes)
{
    const size_t at = offsetof(struct npu_image_header, checksum);
    static const uint64_t zero = 0;
    uint64_t h = npu_image_fnv1a(NPU_IMAGE_FNV_INIT, image, at);
    h = npu_image_fnv1a(h, &zero, sizeof(zero));
    return npu_image_fnv1a(h, (const uint8_t *)image + at + 8, (size_t)(bytes - at - 8));
}

/* Whether [off, off + count * size) lies inside [0, limit), without overflow. */
static bool inside(uint64_t off, uint64_t count, uint64_t size, uint64_t limit)
{
    if (size && count > (UINT64_MAX - off) / size)
        return false;
    return off <= limit && count * size <= limit - off;
}

static int check_plan(const struct npu_image_header *h, char *err, size_t errlen)
{
    const struct npu_plan *p = &h->plan;
    uint32_t last_row0 = 0, last_col0 = 0;
    if (p->stages >= 1 && p->stages <= 1024)
        npu_plan_stage_origin(p, p->stages - 1, &last_row0, &last_col0);
    if (p->tp == 0 || p->stages == 0 || p->stages > 1024 || p->stage_layers == 0 ||
        p->stage_grid_cols == 0 || p->instances == 0 || p->instances > 64 ||
        p->tp != p->rect_rows * p->rect_cols ||
        (uint64_t)last_row0 + p->rect_rows > h->mesh_rows ||
        (uint64_t)p->stage_grid_cols * p->rect_cols > p->instance_cols ||
        (uint64_t)p->rect_col0 + (uint64_t)p->instances * p->instance_cols > h->mesh_cols)
        return fail(err, errlen, NPU_ERR_FORMAT,
                    "plan: tp %u, stages %u of %u layers, rectangle %ux%u at (%u,%u), last "
                    "stage at (%u,%u), %u instance(s) of %u columns, on a %ux%u mesh", p->tp,
                    p->stages, p->stage_layers, p->rect_rows, p->rect_cols, p->rect_row0,
                    p->rect_col0, last_row0, last_col0, p->instances, p->instance_cols,
                    h->mesh_rows, h->mesh_cols);
    for (uint32_t g = 0; g < NPU_GEMM_COUNT; g++)
        if (p->partition[g] < NPU_PART_MN || p->partition[g] > NPU_PART_EP ||
            (p->partition[g] == NPU_PART_EP && !npu_plan_is_ep(p)) ||
            (p->partition[g] == NPU_PART_2D && p->tp > 1 && p->placement != NOC_PLACE_MESH2D))
            return fail(err, errlen, NPU_ERR_FORMAT, "plan: partition of %s is %u (placement "
                        "%u)", npu_gemm_name((enum npu_gemm)g), p->partition[g], p->placement);
    if (p->mode > NPU_IMAGE_PERFORMANCE || p->dtype > NPU_IMAGE_BF16 || p->max_batch == 0 ||
        p->max_tokens < p->max_batch || p->tile_rows == 0 || p->max_seq == 0 ||
        p->kv_block == 0 || p->routing > NPU_ROUTING_SKEWED ||
        p->kv_sram_blocks > NPU_KV_BLOCKS_MAX || p->kv_ring_rows == 0)
        return fail(err, errlen, NPU_ERR_FORMAT,
                    "plan: mode %u, dtype %u, max_batch %u, max_tokens %u, tile_rows %u, "
                    "max_seq %u, kv_block %u, routing %u, kv_sram_blocks %u, kv_ring_rows %"
                    PRIu64 " out of range", p->mode, p->dtype, p->max_batch, p->max_tokens,
                    p->tile_rows, p->max_seq, p->kv_block, p->routing, p->kv_sram_blocks,
                    p->kv_ring_rows);
    if ((p->moe_spill_rows != 0) != npu_moe_layer_wide(p) ||
        (p->moe_spill_rows && p->moe_spill_rows < npu_moe_group_rows(p)))
        return fail(err, errlen, NPU_ERR_FORMAT, "plan: moe_spill_rows %u (the MoE over the "
                    "layer %s, groups of %u rows)", p->moe_spill_rows,
                    npu_moe_layer_wide(p) ? "on" : "off", npu_moe_group_rows(p));
    if (p->attn_block < p->kv_block || p->attn_block % p->kv_block)
        return fail(err, errlen, NPU_ERR_FORMAT, "plan: attn_block %u is not a multiple of "
                    "kv_block %u", p->attn_block, p->kv_block);
    if (p->kv_split > 1)
        return fail(err, errlen, NPU_ERR_FORMAT, "plan: kv_split %u is not 0 or 1",
                    p->kv_split);
    if (npu_kv_is_split(p) ? !p->kv_window || p->kv_window % p->tile_rows : p->kv_window)
        return fail(err, errlen, NPU_ERR_FORMAT, "plan: kv_window %u is not a multiple of "
                    "tile_rows %u under split attention (or 0 without)", p->kv_window,
                    p->tile_rows);
    if (p->comm_segment < 64 || p->comm_segment > NOC_COMM_SEGMENT_MAX ||
        p->comm_segment % 4)
        return fail(err, errlen, NPU_ERR_FORMAT, "plan: comm_segment %u is not a multiple of 4 "
                    "in [64, %u]", p->comm_segment, NOC_COMM_SEGMENT_MAX);
    const bool ep = npu_plan_is_ep(p) && p->tp > 1;
    if (p->moe_rows < p->tile_rows || p->moe_rows > p->max_tokens ||
        (p->moe_rows != p->tile_rows && !ep))
        return fail(err, errlen, NPU_ERR_FORMAT, "plan: moe_rows %u is not tile_rows %u, or "
                    "not in [tile_rows, max_tokens %u] with expert parallelism over tp > 1",
                    p->moe_rows, p->tile_rows, p->max_tokens);
    if (p->expert_slots > NPU_EXPERT_SLOTS_MAX || (p->expert_slots && !ep))
        return fail(err, errlen, NPU_ERR_FORMAT, "plan: expert_slots %u is not in [0, %u], or "
                    "not 0 without expert parallelism over tp > 1", p->expert_slots,
                    NPU_EXPERT_SLOTS_MAX);
    if (ep ? p->expert_units < 1 || p->expert_units > NPU_EXPERT_UNITS_MAX ||
                 p->expert_placement > NPU_EXPERTS_BALANCED || p->expert_fanout < 1 ||
                 p->expert_map_slices < 1 || p->expert_map_slices > NPU_EXPERT_MAP_MAX ||
                 p->expert_rank_slices < 1 || p->expert_rank_slices > p->expert_map_slices
           : p->expert_units || p->expert_placement || p->expert_fanout ||
                 p->expert_rank_slices || p->expert_map_slices)
        return fail(err, errlen, NPU_ERR_FORMAT, "plan: expert units %u, placement %u, fanout "
                    "%u, slices per rank %u, per layer %u: out of range, or not 0 without "
                    "expert parallelism over tp > 1", p->expert_units, p->expert_placement,
                    p->expert_fanout, p->expert_rank_slices, p->expert_map_slices);
    if (p->stage_double > NPU_STAGE_OWN ||
        (p->stage_double == NPU_STAGE_DOUBLE && (p->weights_resident || p->stage_layers < 2)))
        return fail(err, errlen, NPU_ERR_FORMAT, "plan: stage_double %u needs staged weights "
                    "and 2 or more layers a stage (%u)", p->stage_double, p->stage_layers);
    if (p->micro_batches > p->max_tokens ||
        (p->micro_batches > 1 && p->stages < 2 && !p->disagg))
        return fail(err, errlen, NPU_ERR_FORMAT, "plan: %u micro-batches: at most max_tokens "
                    "(%u), and more than one only over pipeline stages (%u) or disaggregated",
                    p->micro_batches, p->max_tokens, p->stages);
    if (p->moe_spill_parity > 1 || (p->moe_spill_parity && !p->moe_spill_rows))
        return fail(err, errlen, NPU_ERR_FORMAT, "plan: moe_spill_parity %u: 0, or 1 with the "
                    "MoE over the layer's spill (moe_spill_rows %u)", p->moe_spill_parity,
                    p->moe_spill_rows);
    if (p->disagg > 1 ||
        (p->disagg && (p->instances < 2 || !ep || p->stages != 1 || !p->x_in_sram ||
                       p->micro_batches > NPU_DISAGG_PARTS_MAX ||
                       p->rect_cols != p->instance_cols ||
                       p->moe_rows < (p->max_tokens + (p->micro_batches ? p->micro_batches
                                                                         : 1) - 1) /
                                         (p->micro_batches ? p->micro_batches : 1) ||
                       p->moe_units_rows || p->moe_spill_rows || p->attn_deep)))
        return fail(err, errlen, NPU_ERR_FORMAT, "plan: disagg %u needs 2 or more instances "
                    "(%u), expert parallelism over tp > 1, one stage (%u), the residual rows "
                    "in SRAM, at most " "16 micro-batches, tp filling its band, MoE groups "
                    "that hold a micro-batch of max_tokens, and neither the MoE by units, over the layer, nor two tiles' "
                    "attention in flight", p->disagg, p->instances, p->stages);
    if (p->attn_deep > 1 ||
        (p->attn_deep && (p->tp < 2 || p->partition[NPU_GEMM_O] != NPU_PART_2D)))
        return fail(err, errlen, NPU_ERR_FORMAT, "plan: attn_deep %u: 0, or 1 with a 2D O "
                    "GEMM over tp > 1 ranks (tp %u, O partition %u)", p->attn_deep, p->tp,
                    p->partition[NPU_GEMM_O]);
    if ((p->moe_units_rows != 0) != (p->moe_unit_split != 0) || p->moe_unit_split > 64 ||
        (p->moe_units_rows && (!ep || p->weights_resident || p->expert_slots < 3 ||
                               p->moe_units_rows > p->tile_rows)))
        return fail(err, errlen, NPU_ERR_FORMAT, "plan: the MoE by units over %u rows, units "
                    "split %u: both 0, or split 1..64 with expert parallelism over tp > 1, "
                    "staged experts, a ring of at least 3 slots and at most tile_rows %u rows "
                    "(its buffers are a tile's)", p->moe_units_rows, p->moe_unit_split,
                    p->tile_rows);
    return NPU_OK;
}

static int check_core(const struct npu_image_header *h, const struct npu_image_core *c,
                      uint64_t i, char *err, size_t errlen)
{
    if (c->rank != NPU_IMAGE_IDLE && (c->rank >= h->plan.tp || c->stage >= h->plan.stages ||
                                      c->instance >= h->plan.instances || c->reserved))
        return fail(err, errlen, NPU_ERR_FORMAT, "core %" PRIu64 ": rank %u of %u, stage %u "
                    "of %u, instance %u of %u", i, c->rank, h->plan.tp, c->stage,
                    h->plan.stages, c->instance, h->plan.instances);
    if (!inside(c->prog_first, c->prog_count, 1, h->prog_count))
        return fail(err, errlen, NPU_ERR_FORMAT, "core %" PRIu64 ": program ops %u+%u of %"
                    PRIu64, i, c->prog_first, c->prog_count, h->prog_count);
    /* the NoC driver's mailboxes are at the top of SRAM */
    const uint64_t res = NPU_IMAGE_NOC_RESERVE((uint64_t)h->mesh_rows * h->mesh_cols);
    const uint64_t top = h->sram_bytes > res ? h->sram_bytes - res : 0;
    if (c->rank != NPU_IMAGE_IDLE && (c->sram_end > top || c->sram_act < NPU_IMAGE_APP_BASE))
        return fail(err, errlen, NPU_ERR_FORMAT, "core %" PRIu64 ": SRAM plan [%#" PRIx64
                    ", %#" PRIx64 ") outside [%#x, %#" PRIx64 ")", i, c->sram_act,
                    c->sram_end, NPU_IMAGE_APP_BASE, top);
    if (c->rank != NPU_IMAGE_IDLE && c->kv_pool_bytes &&
        (c->kv_pool_off < NPU_IMAGE_APP_BASE || !inside(c->kv_pool_off, c->kv_pool_bytes, 1,
                                                        c->sram_end)))
        return fail(err, errlen, NPU_ERR_FORMAT, "core %" PRIu64 ": KV pool [%#" PRIx64 ", +%#"
                    PRIx64 ") outside its SRAM plan", i, c->kv_pool_off, c->kv_pool_bytes);
    /* the collectives' scratch sits below the tile buffers (npu_plan_cores.c) */
    const uint64_t scratch = NOC_COMM_SCRATCH_BYTES(h->plan.comm_segment);
    if (c->rank != NPU_IMAGE_IDLE && h->plan.tp > 1 &&
        (c->comm_scratch < NPU_IMAGE_APP_BASE || !inside(c->comm_scratch, scratch, 1,
                                                         c->sram_act)))
        return fail(err, errlen, NPU_ERR_FORMAT, "core %" PRIu64 ": the collectives' scratch "
                    "[%#" PRIx64 ", +%#" PRIx64 ") runs into the tile buffers at %#" PRIx64, i,
                    c->comm_scratch, scratch, c->sram_act);
    return NPU_OK;
}

static int check_tensor(const struct npu_image_header *h, const struct npu_image_tensor *t,
                        uint64_t i, char *err, size_t errlen)
{
    uint64_t bytes = t->block_bytes * t->blocks;
    const bool expert = model_tensor_is_expert(t->kind);
    if ((t->blocks == 0 && !(expert && npu_plan_is_ep(&h->plan))) ||
        (!expert && t->block0 != 0) || t->block0 > UINT32_MAX - t->blocks || t->reserved ||
        (t->blocks && t->block_bytes > UINT64_MAX / t->blocks) ||
        !inside(t->hbm_off, bytes, 1, h->weights_off + h->weights_bytes) ||
        t->hbm_off < h->weights_off)
        return fail(err, errlen, NPU_ERR_FORMAT, "tensor %" PRIu64 " (kind %u, layer %u): %"
                    PRIu64 " bytes at %#" PRIx64 " outside the weights [%#" PRIx64 ", +%#"
                    PRIx64 ")", i, t->kind, t->layer, bytes, t->hbm_off, h->weights_off,
                    h->weights_bytes);
    if (t->sram_off != NPU_IMAGE_NOWHERE &&
        (t->sram_off < NPU_IMAGE_APP_BASE || !inside(t->sram_off, bytes, 1, h->sram_bytes)))
        return fail(err, errlen, NPU_ERR_FORMAT, "tensor %" PRIu64 ": SRAM offset %#" PRIx64
                    " outside the core's SRAM", i, t->sram_off);
    return NPU_OK;
}

/* Every copy of each expert in the layer's slices x[i0, i0 + n) holds all U units (covered:
   the units each copy holds, as check_expert_layer found them), in as many slices as the
   expert's first copy: the plan's fan-out counts one copy's slices (a row's choice goes to
   one copy), so a copy cut finer would overrun the dispatch. */
static int check_expert_copies(const struct npu_image_expert_slice *x, uint64_t i0, uint64_t n,
                               uint32_t U,
                               const uint8_t (*covered)[NPU_EXPERT_REPLICAS_MAX], char *err,
                               size_t errlen)
{
    static uint16_t slices[NPU_MODEL_EXPERTS_MAX][NPU_EXPERT_REPLICAS_MAX];
    memset(slices, 0, sizeof(slices));
    for (uint64_t i = i0; i < i0 + n; i++) /* in range: check_expert_layer checked it */
        slices[x[i].expert][x[i].rep]++;
    for (uint64_t i = i0; i < i0 + n; i++)
        for (uint32_t c = 0; c < x[i].reps; c++)
            if (covered[x[i].expert][c] != (1u << U) - 1 ||
                slices[x[i].expert][c] != slices[x[i].expert][0])
                return fail(err, errlen, NPU_ERR_FORMAT, "expert map: layer %u holds only "
                            "part of copy %u of expert %u's %u units, or in other slices "
                            "than its copy 0", x[i].layer, c, x[i].expert, U);
    return NPU_OK;
}

/* One layer's slices (the expert map, from index i0): ranks in order, units in range, each
   copy of an expert holding its units once, every copy of an expert saying how many there
   are, and counts the dispatch's exchange holds. */
static int check_expert_layer(const struct npu_image_header *h,
                              const struct npu_image_expert_slice *x, uint64_t i0, uint64_t n,
                              char *err, size_t errlen)
{
    /* units held, per expert and copy (<= 8: a byte); each expert's copies (0: none yet) */
    static uint8_t covered[NPU_MODEL_EXPERTS_MAX][NPU_EXPERT_REPLICAS_MAX];
    static uint8_t reps[NPU_MODEL_EXPERTS_MAX];
    memset(covered, 0, sizeof(covered)), memset(reps, 0, sizeof(reps));
    const uint32_t U = h->plan.expert_units;
    const uint64_t limit = NPU_IMAGE_A2A_COUNTS((uint64_t)h->mesh_rows * h->mesh_cols);
    uint32_t most = 0; /* slices of the rank holding the most (ranks are in order) */
    for (uint64_t i = i0, run = 0; i < i0 + n; i++) {
        run = i > i0 && x[i].rank == x[i - 1].rank ? run + 1 : 1;
        most = run > most ? (uint32_t)run : most;
    }
    if (n > h->plan.expert_map_slices || most > h->plan.expert_rank_slices ||
        noc_a2av_mailbox_words(npu_plan_ep_ranks(&h->plan), (uint32_t)n, most) > limit)
        return fail(err, errlen, NPU_ERR_FORMAT, "expert map: layer %u has %" PRIu64 " slices, "
                    "%u on one rank (at most %u and %u per rank as the plan says, and a "
                    "dispatch whose count exchange fits the driver's %" PRIu64 " words)",
                    x[i0].layer, n, most, h->plan.expert_map_slices,
                    h->plan.expert_rank_slices, limit);
    for (uint64_t i = i0; i < i0 + n; i++) {
        const struct npu_image_expert_slice *s = &x[i];
        /* units within the 8 a byte holds: the shift below stays inside 32 bits (a slice
           of unit0 132 once shifted past them: found by tests/fuzz's image harness) */
        const uint32_t bits = s->units && s->unit0 + s->units <= 8
                                  ? ((1u << s->units) - 1) << s->unit0 : 0;
        const bool copy_ok = s->reps >= 1 && s->reps <= NPU_EXPERT_REPLICAS_MAX &&
                             s->rep < s->reps;
        if (s->rank >= h->plan.tp || (i > i0 && s->rank < x[i - 1].rank) ||
            s->expert >= NPU_MODEL_EXPERTS_MAX || !s->units || s->unit0 + s->units > U ||
            !copy_ok || (reps[s->expert] && reps[s->expert] != s->reps) ||
            (covered[s->expert][s->rep] & bits))
            return fail(err, errlen, NPU_ERR_FORMAT, "expert map: slice %" PRIu64 " (layer %u, "
                        "rank %u, expert %u, units %u+%u of %u, copy %u of %u) is out of "
                        "order, out of range, overlaps another or disagrees with the expert's "
                        "other copies on their number", i, s->layer, s->rank, s->expert,
                        s->unit0, s->units, U, s->rep, s->reps);
        covered[s->expert][s->rep] |= (uint8_t)bits, reps[s->expert] = s->reps;
    }
    int rc = check_expert_copies(x, i0, n, U, (const uint8_t (*)[NPU_EXPERT_REPLICAS_MAX])covered,
                                 err, errlen);
    if (rc != NPU_OK)
        return rc;
    /* the MoE by units loads its units through every rank's ring: a rank without a slice
       has none (ranks are in order, so the map names them all when it names 0 .. tp - 1) */
    uint32_t ranks = 0;
    for (uint64_t i = i0; i < i0 + n; i++)
        ranks += i == i0 || x[i].rank != x[i - 1].rank;
    if (h->plan.moe_units_rows && (ranks != h->plan.tp || x[i0].rank != 0))
        return fail(err, errlen, NPU_ERR_FORMAT, "expert map: layer %u gives slices to %u of "
                    "%u ranks; the MoE by units needs every rank to hold one", x[i0].layer,
                    ranks, h->plan.tp);
    return NPU_OK;
}

static int check_expert_map(const uint8_t *image, const struct npu_image_header *h, char *err,
                            size_t errlen)
{
    const bool ep = npu_plan_is_ep(&h->plan) && h->plan.tp > 1;
    if (!inside(h->experts_off, h->experts_count, sizeof(struct npu_image_expert_slice),
                h->file_bytes) || h->experts_off % 8 || (h->experts_count > 0) != ep)
        return fail(err, errlen, NPU_ERR_FORMAT, "expert map: %" PRIu64 " slices at %#" PRIx64
                    " outside the file, misaligned, or %s expert parallelism",
                    h->experts_count, h->experts_off, ep ? "none with" : "present without");
    const struct npu_image_expert_slice *x = (const void *)(image + h->experts_off);
    for (uint64_t i = 0; i < h->experts_count;) {
        uint64_t n = 1;
        while (i + n < h->experts_count && x[i + n].layer == x[i].layer)
            n++;
        if (i + n < h->experts_count && x[i + n].layer < x[i].layer)
            return fail(err, errlen, NPU_ERR_FORMAT, "expert map: layers out of order at "
                        "slice %" PRIu64, i + n);
        int rc = check_expert_layer(h, x, i, n, err, errlen);
        if (rc != NPU_OK)
            return rc;
        i += n;
    }
    return NPU_OK;
}

const struct npu_image_expert_slice *npu_image_expert_layer(const struct npu_image_header *h,
                                                            uint32_t layer, uint32_t *n)
{
    const struct npu_image_expert_slice *x =
        (const void *)((const uint8_t *)h + h->experts_off);
    uint64_t lo = 0, hi = h->experts_count; /* first slice of a layer >= `layer` */
    while (lo < hi) {
        const uint64_t mid = lo + (hi - lo) / 2;
        if (x[mid].layer < layer)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint64_t end = lo;
    while (end < h->experts_count && x[end].layer == layer)
        end++;
    *n = (uint32_t)(end - lo);
    return end > lo ? &x[lo] : NULL;
}

static int check_tables(const uint8_t *image, const struct npu_image_header *h, char *err,
                        size_t errlen)
{
    const uint64_t n = h->file_bytes;
    if (!inside(h->config_off, h->config_bytes, 1, n) ||
        !inside(h->tensors_off, h->tensors_count, sizeof(struct npu_image_tensor), n) ||
        !inside(h->cores_off, h->cores_count, sizeof(struct npu_image_core), n) ||
        !inside(h->prog_off, h->prog_count, sizeof(struct npu_prog_op), n) ||
        h->tensors_off % 8 || h->cores_off % 8 || h->prog_off % 8)
        return fail(err, errlen, NPU_ERR_FORMAT, "a table lies outside the %" PRIu64
                    "-byte file or is misaligned", n);
    if (!h->config_bytes || memchr(image + h->config_off, '\0', h->config_bytes) !=
                                image + h->config_off + h->config_bytes - 1)
        return fail(err, errlen, NPU_ERR_FORMAT, "the model config (%" PRIu64 " bytes) is not "
                    "one string ending at its last byte", h->config_bytes);
    if (h->plan.mode == NPU_IMAGE_FUNCTIONAL ? !inside(h->weights_off, h->weights_bytes, 1, n)
                                             : !inside(h->weights_off, h->weights_bytes, 1,
                                                       h->hbm_end))
        return fail(err, errlen, NPU_ERR_FORMAT, "weights [%#" PRIx64 ", +%#" PRIx64
                    ") outside the image", h->weights_off, h->weights_bytes);
    if (h->cores_count != (uint64_t)h->mesh_rows * h->mesh_cols)
        return fail(err, errlen, NPU_ERR_FORMAT, "%" PRIu64 " core entries for a %ux%u mesh",
                    h->cores_count, h->mesh_rows, h->mesh_cols);
    const struct npu_image_core *cores = (const void *)(image + h->cores_off);
    for (uint64_t i = 0; i < h->cores_count; i++) {
        int rc = check_core(h, &cores[i], i, err, errlen);
        if (rc != NPU_OK)
            return rc;
    }
    const struct npu_image_tensor *ts = (const void *)(image + h->tensors_off);
    for (uint64_t i = 0; i < h->tensors_count; i++) {
        int rc = check_tensor(h, &ts[i], i, err, errlen);
        if (rc != NPU_OK)
            return rc;
    }
    return check_expert_map(image, h, err, errlen);
}

int npu_image_check(const void *image, uint64_t bytes, char *err, size_t errlen)
{
    const struct npu_image_header *h = image;
    if (bytes < sizeof(*h))
        return fail(err, errlen, NPU_ERR_FORMAT, "truncated: %" PRIu64
                    " bytes, the header alone has %u", bytes, (unsigned)sizeof(*h));
    if (h->magic != NPU_IMAGE_MAGIC)
        return fail(err, errlen, NPU_ERR_FORMAT, "not a model image (bad magic)");
    if (h->version != NPU_IMAGE_VERSION || h->header_bytes != sizeof(*h))
        return fail(err, errlen, NPU_ERR_FORMAT, "format version %u (header %u bytes); this "
                    "build reads version %u (%u bytes)", h->version, h->header_bytes,
                    NPU_IMAGE_VERSION, (unsigned)sizeof(*h)); /* newlib-nano: no %zu */
    if (h->file_bytes != bytes)
        return fail(err, errlen, NPU_ERR_FORMAT, "%s: %" PRIu64 " bytes, the header says %"
                    PRIu64, bytes < h->file_bytes ? "truncated" : "trailing bytes", bytes,
                    h->file_bytes);
    uint64_t sum = npu_image_checksum(image, bytes);
    if (sum != h->checksum)
        return fail(err, errlen, NPU_ERR_FORMAT, "checksum %#018" PRIx64 ", the header says %#018"
                    PRIx64 " (the image is corrupt)", sum, h->checksum);
    if (h->hbm_end < h->file_bytes)
        return fail(err, errlen, NPU_ERR_FORMAT, "hbm_end %#" PRIx64 " before the file's end",
                    h->hbm_end);
    int rc = check_plan(h, err, errlen);
    return rc != NPU_OK ? rc : check_tables(image, h, err, errlen);
}

int npu_image_check_chip(const struct npu_image_header *h, const struct npu_image_chip *chip,
                         char *err, size_t errlen)
{
    const char *field = NULL;
    uint64_t built = 0, have = 0;
    if (h->mesh_rows != chip->mesh_rows)
        field = "mesh_rows", built = h->mesh_rows, have = chip->mesh_rows;
    else if (h->mesh_cols != chip->mesh_cols)
        field = "mesh_cols", built = h->mesh_cols, have = chip->mesh_cols;
    else if (h->sram_bytes != chip->sram_bytes)
        field = "sram_bytes", built = h->sram_bytes, have = chip->sram_bytes;
    else if (h->sa_rows != chip->sa_rows || h->sa_cols != chip->sa_cols)
        field = "sa_rows x sa_cols", built = (uint64_t)h->sa_rows * 10000 + h->sa_cols,
        have = (uint64_t)chip->sa_rows * 10000 + chip->sa_cols;
    else if (h->hbm_end > chip->hbm_bytes)
        field = "hbm_bytes (the image claims more)", built = h->hbm_end,
        have = chip->hbm_bytes;
    if (field)
        return fail(err, errlen, NPU_ERR_INVAL, "image built for chip %.64s, this chip is "
                    "%s: %s %" PRIu64 " != %" PRIu64, h->chip_name, chip->name, field, built,
                    have);
    if ((h->plan.mode == NPU_IMAGE_PERFORMANCE) != chip->performance)
        return fail(err, errlen, NPU_ERR_INVAL, "a %s image on a machine in %s mode (npuctl "
                    "flash --mode ...)", h->plan.mode ? "performance" : "functional",
                    chip->performance ? "performance" : "functional");
    return NPU_OK;
}

const char *npu_gemm_name(enum npu_gemm g)
{
    static const char *const names[NPU_GEMM_COUNT] = {
        "qkv", "o", "ffn_up", "ffn_down", "expert_up", "expert_down", "lm_head",
    };
    return (unsigned)g < NPU_GEMM_COUNT ? names[g] : "?";
}

bool npu_plan_is_ep(const struct npu_plan *p)
{
    return p->partition[NPU_GEMM_EXP_UP] == NPU_PART_EP &&
           p->partition[NPU_GEMM_EXP_DOWN] == NPU_PART_EP;
}

bool npu_plan_core_serves_experts(const struct npu_plan *p, const struct npu_image_core *c)
{
    return p->disagg && c->rank != NPU_IMAGE_IDLE && c->instance + 1 == p->instances;
}

uint32_t npu_plan_ep_ranks(const struct npu_plan *p)
{
    return p->disagg ? p->tp * p->instances : p->tp;
}

uint32_t npu_plan_expert_first(const struct npu_plan *p, uint32_t experts, uint32_t rank)
{
    return (uint32_t)((uint64_t)experts * rank / p->tp);
}

uint32_t npu_plan_tensor_stage(const struct npu_plan *p, const struct npu_image_tensor *t)
{
    if (t->kind == MT_EMBED)
        return 0;
    if (t->kind == MT_FINAL_NORM || t->kind == MT_LM_HEAD)
        return p->stages - 1;
    return t->layer / p->stage_layers;
}

void npu_plan_stage_origin(const struct npu_plan *p, uint32_t s, uint32_t *row0, uint32_t *col0)
{
    const uint32_t cols = p->stage_grid_cols ? p->stage_grid_cols : 1;
    const uint32_t gr = s / cols, gc = gr % 2 ? cols - 1 - s % cols : s % cols;
    *row0 = p->rect_row0 + gr * p->rect_rows;
    *col0 = p->rect_col0 + gc * p->rect_cols;
}

void npu_plan_instance_stage_origin(const struct npu_plan *p, uint32_t inst, uint32_t s,
                                    uint32_t *row0, uint32_t *col0)
{
    npu_plan_stage_origin(p, s, row0, col0);
    *col0 += inst * p->instance_cols;
}

const char *npu_partition_name(enum npu_partition p)
{
    static const char *const names[] = { "?", "mn", "k", "2d", "ep" };
    return (unsigned)p < sizeof(names) / sizeof(names[0]) ? names[p] : "?";
}
