/* SPDX-License-Identifier: MIT */
/* The planner: model + chip + plan request -> image (npu_plan.h, docs/images.md). */
#include "npu_plan_internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "model_weights.h"
#include "noc/coll_sizes.h"
#include "noc/placement.h"
#include "npu_layout.h"
#include "npu_limits.h"
#include "npu_numeric.h"
#include "npu_regs.h"

void npu_plan_request_init(struct npu_plan_request *req)
{
    *req = (struct npu_plan_request){ .stages = 1, .micro_batches = 1, .placement = -1,
                                      .dtype = -1, .routing_seed = 1, .expert_placement = -1,
                                      .expert_replicas = -1,
                                      .kv_split = -1, .moe_units_rows = -1,
                                      .attn_deep = -1 };
}

static void add_entry(struct planner *pl, const struct model_tensor *t, struct npu_share sh)
{
    if (pl->ntensors == pl->cap) {
        pl->cap = pl->cap ? pl->cap * 2 : 256;
        pl->tensors = realloc(pl->tensors, pl->cap * sizeof(*pl->tensors));
        pl->sources = realloc(pl->sources, pl->cap * sizeof(*pl->sources));
        if (!pl->tensors || !pl->sources)
            abort(); /* host out of memory */
    }
    uint64_t block = (uint64_t)sh.rows * sh.cols * pl->eb;
    pl->tensors[pl->ntensors] = (struct npu_image_tensor){
        .kind = t->kind, .layer = t->layer, .rank = sh.rank, .blocks = sh.blocks,
        .rows = sh.rows, .cols = sh.cols, .row0 = sh.row0, .col0 = sh.col0,
        .block0 = sh.block0, .hbm_off = pl->weights_end, .sram_off = NPU_IMAGE_NOWHERE,
        .block_bytes = block,
    };
    pl->sources[pl->ntensors++] = *t;
    pl->weights_end = align_up(pl->weights_end + block * sh.blocks, 64);
}

/* One entry for a replicated tensor, or one share per rank for a split one
   (npu_tensor_share: the rule the image check holds the table to). */
static void plan_tensor(const struct model_tensor *t, void *ctx)
{
    struct planner *pl = ctx;
    const uint32_t blocks = model_tensor_is_expert(t->kind) ? pl->cfg->num_experts : 1;
    if (npu_tensor_gemm(t->kind) < 0) {
        add_entry(pl, t, npu_tensor_share(t->kind, t->rows, t->cols, 1, &pl->plan, NULL, 0, 0));
        return;
    }
    uint64_t x0 = 0, nx = 0; /* the layer's slices of the expert map (EP) */
    while (x0 < pl->nxmap && pl->xmap[x0].layer < t->layer)
        x0++;
    while (x0 + nx < pl->nxmap && pl->xmap[x0 + nx].layer == t->layer)
        nx++;
    for (uint32_t r = 0; r < pl->plan.tp; r++)
        add_entry(pl, t, npu_tensor_share(t->kind, t->rows, t->cols, blocks, &pl->plan,
                                          nx ? &pl->xmap[x0] : NULL, (uint32_t)nx, r));
}

/* 2-D over the group's R x C grid: the grid is a mesh2d group's (its rows and columns are
   what the line collectives run along), and the blocks are equal (row blocks are the
   column all-gather's chunks; equal column blocks as the NPU paper's Table 2 has them). */
static int check_2d(struct planner *pl, enum npu_gemm g)
{
    const struct model_config *c = pl->cfg;
    const struct npu_plan *p = &pl->plan;
    const uint32_t R = p->rect_rows, C = p->rect_cols;
    if (p->tp > 1 && p->placement != NOC_PLACE_MESH2D)
        return fail(pl->err, pl->errlen, NPU_ERR_INVAL, "%s: the %s GEMM's 2-D partition "
                    "needs --placement mesh2d (its %ux%u grid of ranks is a mesh2d group's, "
                    "whose rows and columns the collectives run along); the placement is %s",
                    c->name, npu_gemm_name(g), R, C,
                    noc_placement_name((enum noc_placement)p->placement));
    return npu_partition_fits(c, p, g, pl->err, pl->errlen);
}

/* Partitions (auto: the FFN's and experts' up GEMMs MN and their down GEMMs K, so the hidden
   activations stay split and one all-reduce completes the FFN, Megatron-LM's pairing; the
   LM head MN where the vocabulary splits evenly; the others K below the hidden size and MN
   from it on, the NPU paper's section 5.6; 2D and EP where the automatic plan picks them,
   npu_plan_auto.c) and the check that every split dimension gives each rank at least one
   row or column. */
static uint32_t auto_partition(const struct planner *pl, const struct npu_plan_request *req,
                               enum npu_gemm g)
{
    if (npu_planner_auto_2d(pl, req, g))
        return NPU_PART_2D;
    if ((g == NPU_GEMM_EXP_UP || g == NPU_GEMM_EXP_DOWN) && npu_planner_auto_ep(pl, req))
        return NPU_PART_EP;
    if (g == NPU_GEMM_LM_HEAD) /* vocab-parallel (npu_lm_head_split): K would all-reduce the
                                  whole B x V logits, 19 MB for 64 rows of Qwen3 */
        return pl->cfg->vocab_size % pl->plan.tp == 0 ? NPU_PART_MN : NPU_PART_K;
    if (g == NPU_GEMM_FFN_UP || g == NPU_GEMM_EXP_UP)
        return NPU_PART_MN;
    if (g == NPU_GEMM_FFN_DOWN || g == NPU_GEMM_EXP_DOWN)
        return NPU_PART_K;
    return pl->plan.max_tokens < pl->cfg->hidden_size ? NPU_PART_K : NPU_PART_MN;
}

/* Expert parallelism: both expert GEMMs or neither, and only for experts. */
static int check_ep(struct planner *pl)
{
    const uint32_t *part = pl->plan.partition;
    for (uint32_t g = 0; g < NPU_GEMM_COUNT; g++)
        if (part[g] == NPU_PART_EP && g != NPU_GEMM_EXP_UP && g != NPU_GEMM_EXP_DOWN)
            return fail(pl->err, pl->errlen, NPU_ERR_INVAL, "partition of %s: ep applies to "
                        "the expert GEMMs only", npu_gemm_name((enum npu_gemm)g));
    if ((part[NPU_GEMM_EXP_UP] == NPU_PART_EP) != (part[NPU_GEMM_EXP_DOWN] == NPU_PART_EP))
        return fail(pl->err, pl->errlen, NPU_ERR_INVAL, "partition: expert_up and expert_down "
                    "must both be ep (experts are whole on their ranks) or neither");
    if (part[NPU_GEMM_EXP_UP] == NPU_PART_EP && pl->cfg->arch != MODEL_MOE)
        return fail(pl->err, pl->errlen, NPU_ERR_INVAL, "partition ep: %s has no experts",
                    pl->cfg->name);
    /* whole experts in order (the expert placement checks its own map) */
    const uint32_t tp = pl->plan.tp, E = pl->cfg->num_experts, most = (E + tp - 1) / tp;
    const uint64_t words = noc_a2av_mailbox_words(npu_plan_ep_ranks(&pl->plan), E, most);
    const uint64_t limit = NPU_IMAGE_A2A_COUNTS((uint64_t)pl->chip->mesh_rows *
                                                pl->chip->mesh_cols);
    if (part[NPU_GEMM_EXP_UP] == NPU_PART_EP && words > limit)
        return fail(pl->err, pl->errlen, NPU_ERR_INVAL, "partition ep: the dispatch's count "
                    "exchange over %u ranks and %u experts needs %llu words of the NoC "
                    "driver's mailbox, which holds %llu on %s", tp, E,
                    (unsigned long long)words, (unsigned long long)limit, pl->chip->name);
    return NPU_OK;
}

static int plan_partitions(struct planner *pl, const struct npu_plan_request *req)
{
    const struct model_config *c = pl->cfg;
    for (uint32_t g = 0; g < NPU_GEMM_COUNT; g++) {
        uint32_t part = req->partition[g];
        if (part == NPU_PLAN_AUTO)
            part = auto_partition(pl, req, (enum npu_gemm)g);
        if (part < NPU_PART_MN || part > NPU_PART_EP)
            return fail(pl->err, pl->errlen, NPU_ERR_INVAL, "partition of %s: %u is not mn, "
                        "k, 2d or ep", npu_gemm_name((enum npu_gemm)g), part);
        if (pl->plan.disagg && (g == NPU_GEMM_EXP_UP || g == NPU_GEMM_EXP_DOWN)) {
            if (req->partition[g] != NPU_PLAN_AUTO && part != NPU_PART_EP)
                return fail(pl->err, pl->errlen, NPU_ERR_INVAL, "--roles disagg: the expert "
                            "instance holds whole experts (or units of them): partition of "
                            "%s must be ep", npu_gemm_name((enum npu_gemm)g));
            part = NPU_PART_EP;
        }
        pl->plan.partition[g] = part;
        if (part == NPU_PART_EP)
            continue; /* whole experts per rank: nothing is split */
        if (part == NPU_PART_2D) {
            int rc = check_2d(pl, (enum npu_gemm)g);
            if (rc != NPU_OK)
                return rc;
            continue;
        }
        int rc = npu_partition_fits(c, &pl->plan, (enum npu_gemm)g, pl->err, pl->errlen);
        if (rc != NPU_OK)
            return rc;
    }
    return check_ep(pl);
}

/* The TP group's rectangle: the whole mesh, whole rows, or a rows x cols block at (0, 0). */
static int plan_group(struct planner *pl, const struct npu_plan_request *req)
{
    const struct npu_plan_chip *ch = pl->chip;
    struct npu_plan *p = &pl->plan;
    p->instances = req->instances ? req->instances : 1;
    p->disagg = req->disagg ? 1 : 0;
    if (p->disagg && (p->instances < 2 || (req->stages && req->stages != 1) ||
                      pl->cfg->arch != MODEL_MOE))
        return fail(pl->err, pl->errlen, NPU_ERR_INVAL, "--roles disagg: a MoE model (%s is "
                    "%s) and --instances 2 or more (%u: the last instance serves the experts, "
                    "the others are attention replicas), one pipeline stage", pl->cfg->name,
                    pl->cfg->arch == MODEL_MOE ? "one" : "dense", p->instances);
    if (p->instances > 64 || ch->mesh_cols % p->instances)
        return fail(pl->err, pl->errlen, NPU_ERR_RANGE, "%u instances: the %u columns of %s "
                    "do not split into that many bands (at most 64)", p->instances,
                    ch->mesh_cols, ch->name);
    p->instance_cols = ch->mesh_cols / p->instances;
    const uint32_t band = p->instance_cols, ncores = ch->mesh_rows * band;
    p->stages = req->stages ? req->stages : 1;
    p->tp = req->tp ? req->tp : ncores / p->stages;
    if (p->stages > pl->cfg->num_layers || pl->cfg->num_layers % p->stages)
        return fail(pl->err, pl->errlen, NPU_ERR_RANGE, "%s: %u layers do not split into %u "
                    "pipeline stages of equal size", pl->cfg->name, pl->cfg->num_layers,
                    p->stages);
    p->stage_layers = pl->cfg->num_layers / p->stages;
    if (p->tp == 0 || (uint64_t)p->tp * p->stages > ncores)
        return fail(pl->err, pl->errlen, NPU_ERR_RANGE, "tp %u x %u stage(s) needs more cores "
                    "than %s has (%u%s)", p->tp, p->stages, ch->name, ncores,
                    p->instances > 1 ? " per instance" : "");
    /* the widest rectangle of tp cores whose stages fit a grid of such rectangles in the
       instance's band of columns */
    for (uint32_t cols = band; cols >= 1 && p->rect_rows == 0; cols--) {
        uint32_t rows = p->tp / cols, per_row = band / cols;
        if (p->tp % cols || rows > ch->mesh_rows)
            continue;
        per_row = per_row < p->stages ? per_row : p->stages;
        if ((uint64_t)(p->stages + per_row - 1) / per_row * rows <= ch->mesh_rows)
            p->rect_rows = rows, p->rect_cols = cols, p->stage_grid_cols = per_row;
    }
    if (p->rect_rows == 0)
        return fail(pl->err, pl->errlen, NPU_ERR_RANGE, "tp %u is not a rectangle of the "
                    "%ux%u mesh%s%s", p->tp, ch->mesh_rows, band,
                    p->stages > 1 ? " that its stages can stack into" : "",
                    p->instances > 1 ? " (one instance's band)" : "");
    if (p->disagg && (p->tp < 2 || p->rect_cols != p->instance_cols))
        return fail(pl->err, pl->errlen, NPU_ERR_RANGE, "--roles disagg: tp %u must be 2 or "
                    "more and fill its band's %u columns (a %ux%u rectangle here), so that "
                    "the replicas form one rectangle beside the experts' band", p->tp,
                    p->instance_cols, p->rect_rows, p->rect_cols);
    p->placement = req->placement < 0 ? npu_planner_auto_placement(pl, req)
                                      : (uint32_t)req->placement;
    if (p->placement > 3)
        return fail(pl->err, pl->errlen, NPU_ERR_INVAL, "placement %u", p->placement);
    return NPU_OK;
}

/* MoE groups (npu_plan.moe_rows): with expert parallelism the whole iteration's rows by
   default (the planner halves them if the buffers do not fit); else the tile. The expert
   ring (npu_plan.expert_slots) with expert parallelism. */
static int plan_moe_rows(struct planner *pl, const struct npu_plan_request *req)
{
    struct npu_plan *p = &pl->plan;
    const bool ep = npu_plan_is_ep(p) && p->tp > 1;
    if (req->moe_rows && (!ep || req->moe_rows < p->tile_rows ||
                          req->moe_rows > p->max_tokens))
        return fail(pl->err, pl->errlen, NPU_ERR_INVAL, "moe_rows %u: MoE groups need expert "
                    "parallelism over tp > 1 and tile_rows %u <= moe_rows <= max_tokens %u",
                    req->moe_rows, p->tile_rows, p->max_tokens);
    p->moe_rows = !ep ? p->tile_rows : req->moe_rows ? req->moe_rows : p->max_tokens;
    const uint32_t part = (p->max_tokens + p->micro_batches - 1) / p->micro_batches;
    if (p->disagg && p->moe_rows < part) /* a replica's micro-batch is one MoE group */
        return fail(pl->err, pl->errlen, NPU_ERR_INVAL, "moe_rows %u: under --roles disagg a "
                    "micro-batch of up to %u rows (max_tokens %u in %u parts) is one MoE "
                    "group", p->moe_rows, part, p->max_tokens, p->micro_batches);
    if (req->expert_slots && (!ep || req->expert_slots > NPU_EXPERT_SLOTS_MAX))
        return fail(pl->err, pl->errlen, NPU_ERR_INVAL, "expert_slots %u: the expert ring "
                    "needs expert parallelism over tp > 1 and 1..%u slots", req->expert_slots,
                    NPU_EXPERT_SLOTS_MAX);
    /* three: a whole expert's gate, up and down in flight, the next one's loading as each
       is read (widen_ring may give the default more once the groups are chosen) */
    p->expert_slots = !ep ? 0 : req->expert_slots ? req->expert_slots : 3;
    return NPU_OK;
}

/* Micro-batches over the stages, once the iteration's shape is known. */
static int plan_micro_batches(struct planner *pl, const struct npu_plan_request *req)
{
    struct npu_plan *p = &pl->plan;
    p->micro_batches = req->micro_batches ? req->micro_batches : 1;
    if (p->micro_batches > p->max_tokens ||
        (p->micro_batches > 1 && p->stages < 2 && !p->disagg) ||
        (p->disagg && p->micro_batches > NPU_DISAGG_PARTS_MAX))
        return fail(pl->err, pl->errlen, NPU_ERR_RANGE, "%u micro-batches: at most max-tokens "
                    "(%u) parts of an iteration's rows, and more than one only over pipeline "
                    "stages (--stages 2 or more; %u) or disaggregated (--roles disagg, at "
                    "most %u)", p->micro_batches, p->max_tokens, p->stages,
                    NPU_DISAGG_PARTS_MAX);
    return NPU_OK;
}

/* Iteration shape and element type. */
static int plan_shape(struct planner *pl, const struct npu_plan_request *req)
{
    const struct model_config *c = pl->cfg;
    struct npu_plan *p = &pl->plan;
    p->mode = req->mode;
    p->dtype = req->dtype >= 0 ? (uint32_t)req->dtype
               : req->mode == NPU_IMAGE_PERFORMANCE ? NPU_IMAGE_BF16 : NPU_IMAGE_FP32;
    p->max_batch = req->max_batch ? req->max_batch : 8;
    p->max_tokens = req->max_tokens ? req->max_tokens : 512;
    p->max_seq = req->max_seq ? req->max_seq : (c->max_position < 4096 ? c->max_position : 4096);
    if (req->kv_split < -1 || req->kv_split > 1 || (req->kv_split == 1 && p->tp == 1))
        return fail(pl->err, pl->errlen, NPU_ERR_INVAL, "kv_split %d is not 0 or 1 (or there "
                    "is one rank: tp %u, nothing to split over)", req->kv_split, p->tp);
    npu_planner_auto_shape(pl, req);
    p->comm_segment = req->comm_segment ? req->comm_segment
                      : pl->chip->sram_bytes >= NPU_IMAGE_COMM_SEGMENT_LARGE_SRAM
                          ? NPU_IMAGE_COMM_SEGMENT_LARGE : NPU_IMAGE_COMM_SEGMENT_SMALL;
    p->kv_ring_rows = req->kv_ring_rows ? req->kv_ring_rows
                                        : p->max_batch * npu_kv_local_rows(p, p->max_seq);
    p->routing = req->routing;
    p->routing_skew_milli = req->routing_skew_milli;
    p->routing_seed = req->routing_seed;
    if (p->tile_rows > p->max_tokens)
        p->tile_rows = p->max_tokens;
    if (p->tile_rows < p->max_batch) /* the LM head runs one row per request in a tile */
        p->tile_rows = p->max_batch;
    if (p->max_seq > c->max_position)
        return fail(pl->err, pl->errlen, NPU_ERR_RANGE, "max_seq %u passes %s's max_position "
                    "%u", p->max_seq, c->name, c->max_position);
    if (p->max_tokens < p->max_batch)
        return fail(pl->err, pl->errlen, NPU_ERR_RANGE, "max_tokens %u below max_batch %u "
                    "(every request of an iteration needs a row)", p->max_tokens,
                    p->max_batch);
    if (p->attn_block < p->kv_block || p->attn_block % p->kv_block)
        return fail(pl->err, pl->errlen, NPU_ERR_INVAL, "attn_block %u is not a multiple of "
                    "kv_block %u (an attention step gathers whole cache blocks)",
                    p->attn_block, p->kv_block);
    p->kv_window = req->kv_window ? req->kv_window : npu_kv_window_default(c, p);
    if (req->kv_window && (!p->kv_split || req->kv_window % p->tile_rows))
        return fail(pl->err, pl->errlen, NPU_ERR_INVAL, "kv_window %u needs split attention "
                    "(kv_split 1) and a multiple of tile_rows %u", req->kv_window,
                    p->tile_rows);
    if (p->comm_segment < 64 || p->comm_segment > NOC_COMM_SEGMENT_MAX || p->comm_segment % 4)
        return fail(pl->err, pl->errlen, NPU_ERR_INVAL, "comm_segment %u is not a multiple of "
                    "4 in [64, %u]", p->comm_segment, NOC_COMM_SEGMENT_MAX);
    if (p->max_batch > NPU_IMAGE_RUNS_MAX || c->experts_per_token > 64)
        return fail(pl->err, pl->errlen, NPU_ERR_RANGE, "max_batch %u / top-%u: at most %u / 64",
                    p->max_batch, c->experts_per_token, NPU_IMAGE_RUNS_MAX);
    pl->eb = npu_dtype_bytes(p->dtype);
    return NPU_OK;
}


/* Stores n values of row as the image's element type at dst. */
static void put_row(const struct planner *pl, uint8_t *dst, const float *row, uint64_t n)
{
    for (uint64_t j = 0; j < n; j++, dst += pl->eb) {
        uint16_t h = num_fp32_to_bf16(row[j]); /* exact: values are bf16 */
        memcpy(dst, pl->eb == 4 ? (const void *)&row[j] : (const void *)&h, pl->eb);
    }
}

/* An EP expert share: each block holds its slice of the expert map at its start, gate and
   up as [w][d] (the slice's rows), down as [d][w] (its columns), w the slice's width. */
static void fill_slices(const struct planner *pl, const struct npu_image_tensor *t,
                        const struct model_tensor *src, uint8_t *image, float *row)
{
    const uint32_t U = pl->plan.expert_units, E = pl->cfg->num_experts;
    const uint64_t out = src->rows / E, in = src->cols;
    const bool down = t->kind == MT_E_DOWN;
    const uint64_t unit = (down ? in : out) / U;
    for (uint32_t b = 0; b < t->blocks; b++) {
        const struct npu_image_expert_slice *x = npu_planner_expert_slice(pl, t->layer,
                                                                          t->block0 + b);
        const uint64_t f0 = x->unit0 * unit, w = x->units * unit, e = x->expert;
        uint8_t *dst = image + t->hbm_off + b * t->block_bytes;
        for (uint64_t r = 0; r < (down ? out : w); r++, dst += (down ? w : in) * pl->eb) {
            const uint64_t at = down ? (e * out + r) * in + f0 : (e * out + f0 + r) * in;
            model_tensor_fill(row, src, pl->cfg->seed, at, down ? w : in);
            put_row(pl, dst, row, down ? w : in);
        }
    }
}

/* Functional images carry the weights: each share generated from the model's seed. */
static void fill_weights(const struct planner *pl, uint8_t *image)
{
    uint64_t maxcols = 1;
    for (uint64_t i = 0; i < pl->ntensors; i++)
        maxcols = pl->tensors[i].cols > maxcols ? pl->tensors[i].cols : maxcols;
    float *row = malloc(sizeof(float) * maxcols);
    if (!row)
        abort();
    for (uint64_t i = 0; i < pl->ntensors; i++) {
        const struct npu_image_tensor *t = &pl->tensors[i];
        const struct model_tensor *src = &pl->sources[i];
        const bool expert = model_tensor_is_expert(t->kind);
        if (expert && t->rank != NPU_IMAGE_IDLE && npu_plan_is_ep(&pl->plan) &&
            pl->plan.tp > 1) { /* over one rank EP holds every expert whole (no map) */
            fill_slices(pl, t, src, image, row);
            continue;
        }
        const uint64_t out = src->rows / (expert ? pl->cfg->num_experts : 1), in = src->cols;
        uint8_t *dst = image + t->hbm_off;
        for (uint64_t b = 0; b < t->blocks; b++)
            for (uint64_t r = 0; r < t->rows; r++) {
                model_tensor_fill(row, src, pl->cfg->seed,
                                  ((t->block0 + b) * out + t->row0 + r) * in + t->col0,
                                  t->cols);
                for (uint64_t j = 0; j < t->cols; j++, dst += pl->eb) {
                    uint16_t h = num_fp32_to_bf16(row[j]); /* exact: values are bf16 */
                    memcpy(dst, pl->eb == 4 ? (const void *)&row[j] : (const void *)&h, pl->eb);
                }
            }
    }
    free(row);
}

static void print_summary(const struct planner *pl, const struct npu_plan_request *req,
                          const struct npu_image_core *core0,
                          const struct npu_image_header *h, FILE *f)
{
    const struct npu_plan *p = &pl->plan;
    static const char *const places[] = { "linear", "interleaved", "ring", "mesh2d" };
    fprintf(f, "plan: %s on %s (%ux%u), %s, %s\n", pl->cfg->name, pl->chip->name,
            pl->chip->mesh_rows, pl->chip->mesh_cols,
            p->mode ? "performance" : "functional", p->dtype ? "bf16" : "fp32");
    fprintf(f, "  tp %u (%ux%u cores at (0,0), %s placement, collectives in segments of %u "
            "bytes), %u stage(s) of %u layers", p->tp, p->rect_rows, p->rect_cols,
            places[p->placement], p->comm_segment, p->stages, p->stage_layers);
    for (uint32_t st = 0; p->stages > 1 && st < p->stages; st++) {
        uint32_t r0, c0;
        npu_plan_stage_origin(p, st, &r0, &c0);
        fprintf(f, "%s(%u,%u)", st ? " " : ", stages at ", r0, c0);
    }
    if (p->micro_batches > 1)
        fprintf(f, ", %u micro-batches", p->micro_batches);
    if (p->instances > 1 && p->disagg)
        fprintf(f, ", disaggregated: %u attention replicas in bands of %u columns, the "
                "experts on the last band (%u columns)", p->instances - 1, p->instance_cols,
                p->instance_cols);
    else if (p->instances > 1)
        fprintf(f, ", %u instances in bands of %u columns", p->instances, p->instance_cols);
    fprintf(f, "\n");
    fprintf(f, "  partition:");
    for (uint32_t g = 0; g < NPU_GEMM_COUNT; g++)
        if (npu_gemm_used(pl->cfg, (enum npu_gemm)g))
            fprintf(f, " %s=%s", npu_gemm_name((enum npu_gemm)g),
                    npu_partition_name((enum npu_partition)p->partition[g]));
    fprintf(f, "\n  iteration: up to %u requests, %u tokens, tiles of %u rows, MoE groups of "
            "%u; %u positions per request, KV blocks of %u, attention steps of %u%s\n",
            p->max_batch, p->max_tokens, p->tile_rows, p->moe_rows, p->max_seq, p->kv_block,
            p->attn_block, p->kv_split ? "; KV cache and attention split over the ranks" : "");
    if (p->kv_split)
        fprintf(f, "  split attention: each rank keeps the last %u rows' keys and values "
                "(%.1f MiB) and runs attention over them query-parallel\n", p->kv_window,
                (double)p->kv_window * 2 * npu_kv_row_bytes(pl->cfg, p) / (1 << 20));
    if (p->attn_deep) {
        struct npu_act_layout a;
        npu_act_layout(pl->cfg, p, &a);
        const bool recv = a.yo >= a.ep_recv && a.yo < a.ep_out;
        fprintf(f, "  attention: two tiles in flight, the O and QKV GEMMs' chunks outside "
                "attention's scratch (%s)\n", recv ? "over the MoE dispatch's receive buffer"
                : a.yqkv == a.kblk ? "O's in a buffer of its own, QKV's over the step buffers"
                : "in buffers of their own");
    }
    npu_planner_auto_print(pl, req, f);
    fprintf(f, "  SRAM per core (MiB of %.2f): tile buffers %.2f, residual %.2f (%s), KV "
            "cache %.2f (%s), weights %.2f (%s)\n", MIB(pl->chip->sram_bytes),
            MIB(core0->sram_act_bytes), MIB(npu_moe_x_rows_bytes(pl->cfg, p)),
            p->x_in_sram ? "SRAM" : "HBM",
            MIB(core0->kv_bytes), p->kv_in_sram ? "SRAM" : "HBM",
            MIB(p->weights_resident ? core0->sram_weights_bytes : core0->sram_stage_bytes),
            p->weights_resident ? "resident"
            : p->stage_double == NPU_STAGE_DOUBLE
                ? "staging of one layer and the next's non-expert shares, streamed from HBM"
            : p->stage_double == NPU_STAGE_ONE && pl->cfg->arch == MODEL_MOE
                ? "staging of one layer, streamed from HBM; the next's non-expert shares "
                  "after its router"
            : p->stage_double == NPU_STAGE_ONE && npu_layout_xt3(pl->cfg, p)
                ? "staging of one layer, streamed from HBM; the next's shares after its "
                  "last tile's FFN GEMMs"
                : "staging of one layer, streamed from HBM");
    if (npu_plan_is_ep(p) && p->tp > 1)
        fprintf(f, "  experts: %s placement, %u unit(s) of %u columns per expert, up to %u "
                "slices per rank, a row's choices reach up to %u slices; expected MoE time of "
                "the busiest rank %.2fx a balanced one's (routing model, %u rows a slice "
                "serves at once, worst layer)%s\n",
                p->expert_placement ? "balanced" : "contiguous", p->expert_units,
                pl->cfg->moe_intermediate_size / p->expert_units, p->expert_rank_slices,
                p->expert_fanout, pl->x_imbalance, pl->x_rows,
                pl->contiguous ? "; contiguous because the balanced map did not fit" : "");
    if (npu_plan_is_ep(p) && p->tp > 1 && pl->x_copies)
        fprintf(f, "  expert copies: %u beyond the first over the layers, up to %u of one "
                "expert (hot experts' rows split over copies, each row's choice to one)\n",
                pl->x_copies, pl->x_copies_most);
    struct npu_moe_spill spill;
    npu_moe_spill_layout(pl->cfg, p, &spill);
    if (spill.bytes) {
        struct npu_act_layout a;
        npu_act_layout(pl->cfg, p, &a);
        const bool two = a.xg_attn != a.xt, three = a.xg_comb != a.xt;
        fprintf(f, "  MoE over the layer: up to %u groups of %u rows dispatched first, their "
                "rows kept in HBM (%llu rows, %.2f MiB per core%s), each expert slice served "
                "once a layer over all of them, then combined group by group; the next "
                "group's residual rows load beside this one's %s\n",
                spill.groups, npu_moe_group_rows(p), (unsigned long long)spill.cap,
                MIB(spill.bytes), pl->spill_halvings ? "; halved for HBM: a layer may take "
                "several waves, each loading the slices again" : p->moe_spill_parity ?
                "; a half per layer parity: a layer's combines run in the next layer's "
                "first pass" : "",
                two && three ? "in both passes" : two ? "in the first pass only"
                : three ? "in the combines only"
                        : "in neither pass (no idle buffer holds a group)");
    }
    if (p->moe_units_rows)
        fprintf(f, "  MoE by units: a MoE op of at most %u rows runs on every rank over all "
                "its rows, each touched expert in units of %u columns dealt round the ranks "
                "(from whichever rank's HBM holds them), partial outputs all-reduced\n",
                p->moe_units_rows,
                pl->cfg->moe_intermediate_size / (p->expert_units * p->moe_unit_split));
    if (!p->weights_resident && p->expert_slots)
        fprintf(f, "  experts: staged through a ring of %u slots of one expert matrix, loaded "
                "ahead of their GEMMs\n", p->expert_slots);
    if (p->kv_sram_blocks)
        fprintf(f, "  KV cache: %u SRAM blocks of %u positions per core (%.2f MiB), ring of "
                "%llu rows in %s\n", p->kv_sram_blocks, p->kv_block,
                MIB(core0->kv_pool_bytes), (unsigned long long)p->kv_ring_rows,
                p->kv_in_sram ? "SRAM" : "HBM");
    fprintf(f, "  HBM: weights %.2f MiB, image claims %.2f MiB of %.2f; file %.2f MiB\n",
            MIB(h->weights_bytes), MIB(h->hbm_end), MIB(pl->chip->hbm_bytes),
            MIB(h->file_bytes));
}

/* Tied embeddings: the LM head's shares are the embedding's values. */
static void plan_tied_head(struct planner *pl)
{
    if (!pl->cfg->tie_embeddings)
        return;
    struct model_tensor head = pl->sources[0]; /* the embedding, first in the order */
    head.kind = MT_LM_HEAD;
    head.layer = 0;
    plan_tensor(&head, pl);
}

/* HBM after the weights: each rank's KV segments and residual rows unless in SRAM. */
static uint64_t plan_hbm(struct planner *pl, struct npu_image_core *cores, uint32_t ncores)
{
    uint64_t at = align_up(pl->weights_end, NPU_IMAGE_ALIGN);
    for (uint32_t i = 0; i < ncores; i++) {
        if (cores[i].rank == NPU_IMAGE_IDLE)
            continue;
        if (!pl->plan.kv_in_sram)
            cores[i].kv_off = at, at = align_up(at + cores[i].kv_bytes, NPU_IMAGE_ALIGN);
        if (!pl->plan.x_in_sram)
            cores[i].x_off = at, at = align_up(at + cores[i].x_bytes, NPU_IMAGE_ALIGN);
    }
    return at;
}

/* The weights' image offsets moved by delta (their table is laid out from 0 until the
   header's size is known). */
static void shift_weights(struct planner *pl, int64_t delta)
{
    for (uint64_t i = 0; i < pl->ntensors; i++)
        pl->tensors[i].hbm_off += (uint64_t)delta;
    pl->weights_end += (uint64_t)delta;
}

/* Header, tables and (functional) weights into one buffer. */
static int write_image(struct planner *pl, const char *config_text, struct npu_image_core *cores,
                       const struct npu_prog_op *ops, uint32_t nops, struct npu_built_image *out)
{
    const uint32_t ncores = pl->chip->mesh_rows * pl->chip->mesh_cols;
    struct npu_image_header h = { .magic = NPU_IMAGE_MAGIC, .version = NPU_IMAGE_VERSION,
                                  .header_bytes = sizeof(h), .mesh_rows = pl->chip->mesh_rows,
                                  .mesh_cols = pl->chip->mesh_cols,
                                  .sram_bytes = pl->chip->sram_bytes,
                                  .hbm_bytes = pl->chip->hbm_bytes, .sa_rows = pl->chip->sa_rows,
                                  .sa_cols = pl->chip->sa_cols, .plan = pl->plan };
    snprintf(h.chip_name, sizeof(h.chip_name), "%s", pl->chip->name);
    snprintf(h.model_name, sizeof(h.model_name), "%s", pl->cfg->name);
    h.config_off = sizeof(h), h.config_bytes = strlen(config_text) + 1;
    h.tensors_off = align_up(h.config_off + h.config_bytes, 8), h.tensors_count = pl->ntensors;
    h.cores_off = align_up(h.tensors_off + pl->ntensors * sizeof(struct npu_image_tensor), 8);
    h.cores_count = ncores;
    h.prog_off = h.cores_off + ncores * sizeof(struct npu_image_core), h.prog_count = nops;
    h.experts_off = align_up(h.prog_off + nops * sizeof(struct npu_prog_op), 8);
    h.experts_count = pl->nxmap;
    h.weights_off = align_up(h.experts_off + pl->nxmap * sizeof(struct npu_image_expert_slice),
                             NPU_IMAGE_ALIGN);
    shift_weights(pl, (int64_t)h.weights_off);
    h.weights_bytes = pl->weights_end - h.weights_off;
    h.hbm_end = plan_hbm(pl, cores, ncores);
    h.file_bytes = pl->plan.mode == NPU_IMAGE_FUNCTIONAL ? pl->weights_end : h.weights_off;
    if (h.hbm_end > pl->chip->hbm_bytes) {
        shift_weights(pl, -(int64_t)h.weights_off); /* the caller may try again */
        return fail(pl->err, pl->errlen, NPU_ERR_NOMEM, "%s on %s: weights (%.1f MiB), KV "
                    "cache, spilled residuals and MoE rows need %.1f MiB of HBM, the chip has "
                    "%.1f", pl->cfg->name, pl->chip->name, MIB(h.weights_bytes),
                    MIB(h.hbm_end), MIB(pl->chip->hbm_bytes));
    }
    uint8_t *img = calloc(1, h.file_bytes);
    if (!img)
        return fail(pl->err, pl->errlen, NPU_ERR_NOMEM, "host: %" PRIu64 " bytes for the image",
                    h.file_bytes);
    memcpy(img + h.config_off, config_text, h.config_bytes);
    memcpy(img + h.tensors_off, pl->tensors, pl->ntensors * sizeof(struct npu_image_tensor));
    memcpy(img + h.cores_off, cores, ncores * sizeof(struct npu_image_core));
    memcpy(img + h.prog_off, ops, nops * sizeof(struct npu_prog_op));
    if (pl->nxmap)
        memcpy(img + h.experts_off, pl->xmap, pl->nxmap * sizeof(struct npu_image_expert_slice));
    if (pl->plan.mode == NPU_IMAGE_FUNCTIONAL)
        fill_weights(pl, img);
    memcpy(img, &h, sizeof(h));
    h.checksum = npu_image_checksum(img, h.file_bytes);
    memcpy(img, &h, sizeof(h));
    out->data = img, out->bytes = h.file_bytes;
    return NPU_OK;
}

/* The default expert ring, once the MoE groups are chosen: as many slots as the busiest
   rank's expert matrices (3 per slice, at most NPU_EXPERT_SLOTS_MAX) if that still fits, else
   the most that fit,
   so a rank's experts stay in the ring across the groups of a layer and each is loaded
   once per layer and iteration; else the three the groups were planned with. */
static int widen_ring(struct planner *pl, struct npu_image_core *cores,
                      struct npu_prog_op *ops, uint32_t *nops)
{
    struct npu_plan *p = &pl->plan;
    if (!p->expert_slots || p->weights_resident)
        return NPU_OK;
    const uint32_t most = p->expert_rank_slices;
    const uint32_t want = 3 * most < NPU_EXPERT_SLOTS_MAX ? 3 * most : NPU_EXPERT_SLOTS_MAX;
    if (want <= p->expert_slots)
        return NPU_OK;
    const struct npu_plan was = *p;
    for (uint32_t slots = want; slots > was.expert_slots; slots--) {
        *p = was;
        p->expert_slots = slots;
        int rc = npu_planner_cores(pl, cores, ops, nops);
        if (rc == NPU_OK && p->x_in_sram == was.x_in_sram && p->kv_in_sram == was.kv_in_sram)
            return NPU_OK;
    }
    *p = was; /* none fits, or each would push the residual or the KV cache to HBM */
    return npu_planner_cores(pl, cores, ops, nops);
}

/* Whether p keeps what `was` put in SRAM and how it runs the MoE: the residual, the KV
   cache and the weights in SRAM or not, the KV pool, the MoE over the layer (a widening
   that changes any of these is not taken). */
static bool keeps_choices(const struct npu_plan *p, const struct npu_plan *was)
{
    return p->x_in_sram == was->x_in_sram && p->kv_in_sram == was->kv_in_sram &&
           p->weights_resident == was->weights_resident &&
           p->kv_sram_blocks == was->kv_sram_blocks &&
           npu_moe_layer_wide(p) == npu_moe_layer_wide(was);
}

/* The default split-attention window widened, once the plan fits, to what max_tokens needs,
   at most NPU_KV_WINDOW_WIDE_BYTES of keys and values, the widest that keeps the plan's
   other choices (residual, KV cache and weights in SRAM or not, the KV pool, MoE groups,
   the MoE over the layer; short of max_tokens, the second staged layer too); the expert
   ring widens after it, with the SRAM left. The window
   makes attention over an op's latest rows query-parallel: prefill-2048 of Qwen3-30B-A3B
   took 83.9 ms with 2048 rows against 101.3 with 512, whose older
   positions ran on the 16 owners of their blocks; taken before the plan fits, its SRAM
   pushed the chunked reference plan's residual rows to HBM. */
static int widen_window(struct planner *pl, struct npu_image_core *cores,
                        struct npu_prog_op *ops, uint32_t *nops)
{
    struct npu_plan *p = &pl->plan;
    if (!npu_kv_is_split(p) || !p->kv_window)
        return NPU_OK;
    const uint64_t t = p->tile_rows, row = 2 * npu_kv_row_bytes(pl->cfg, p);
    const uint64_t need = (p->max_tokens + t - 1) / t * t;
    const uint64_t most = NPU_KV_WINDOW_WIDE_BYTES / row / t * t;
    const uint64_t want = need < most ? need : most;
    const struct npu_plan was = *p;
    /* A window of all the iteration's rows leaves no attention to the owners of older
       blocks: it may cost the second staged layer (Qwen3-8B prefill-2048: 46.6 ms with 2048
       rows and one staged layer, 53.1 with 1024 and two). A narrower one only moves that
       boundary, and keeps it, halving from the widest (the layered reference run's first
       20 requests: mean TTFT 1.070 s with 2048 rows, 1.078 with the widest that fits,
       2432). */
    *p = was;
    p->kv_window = (uint32_t)want;
    const bool whole = want == need && want > was.kv_window;
    if (whole && npu_planner_cores(pl, cores, ops, nops) == NPU_OK && keeps_choices(p, &was))
        return NPU_OK;
    /* (a whole window that failed the laxer test fails this one too) */
    for (uint64_t w = whole ? want / 2 / t * t : want; w > was.kv_window; w = w / 2 / t * t) {
        *p = was;
        p->kv_window = (uint32_t)w;
        if (npu_planner_cores(pl, cores, ops, nops) == NPU_OK && keeps_choices(p, &was) &&
            p->stage_double == was.stage_double)
            return NPU_OK;
    }
    *p = was;
    return npu_planner_cores(pl, cores, ops, nops);
}

/* Where the plan fitted only once the KV block had halved (fit_and_write halves it before
   the tile), the block (and its step) doubled back towards `block0` while the plan fits
   with nothing else it chose changed: the tile's halving may have been enough alone
   (Qwen3-32B on large-64 fitted with tiles of 64 and blocks of 64, not 32). */
static int widen_kv_block(struct planner *pl, const struct npu_plan_request *req,
                          uint32_t block0, struct npu_image_core *cores,
                          struct npu_prog_op *ops, uint32_t *nops)
{
    struct npu_plan *p = &pl->plan;
    if (req->kv_block)
        return NPU_OK;
    const struct npu_plan was = *p;
    while (p->kv_block * 2 <= block0) {
        const struct npu_plan before = *p;
        p->kv_block *= 2;
        if (!req->attn_block)
            p->attn_block *= 2;
        if (!req->kv_window)
            p->kv_window = npu_kv_window_default(pl->cfg, p);
        int rc = npu_planner_cores(pl, cores, ops, nops);
        if (rc != NPU_OK || !keeps_choices(p, &was)) {
            *p = before;
            return npu_planner_cores(pl, cores, ops, nops);
        }
    }
    return NPU_OK;
}

/* Two tiles' attention in flight by default (attn_deep, npu_planner_deep_able), last of the
   widenings: only if nothing else the plan chose changes (what SRAM keeps, the KV pool,
   the window, the ring, the groups): Qwen3-30B-A3B lays its buffers over the MoE
   dispatch's receive buffer at no cost; Qwen3-8B prefill-512 pays 1 MiB of SRAM it has
   left (in buffers of their own it lost the second staging copy, worth more). */
static int widen_deep(struct planner *pl, struct npu_image_core *cores,
                      struct npu_prog_op *ops, uint32_t *nops)
{
    struct npu_plan *p = &pl->plan;
    if (pl->deep_request != -1 || p->attn_deep || !npu_planner_deep_able(p))
        return NPU_OK;
    const struct npu_plan was = *p;
    p->attn_deep = 1;
    int rc = npu_planner_cores(pl, cores, ops, nops);
    struct npu_plan same = *p;
    same.attn_deep = was.attn_deep;
    if (rc == NPU_OK && memcmp(&same, &was, sizeof(was)) == 0)
        return NPU_OK;
    *p = was;
    return npu_planner_cores(pl, cores, ops, nops);
}

/* The expert map placed again (for the plan's MoE group) and the tensor table with it. */
static int place_experts(struct planner *pl, const struct npu_plan_request *req)
{
    int rc = npu_planner_experts(pl, req);
    pl->ntensors = 0, pl->weights_end = 0;
    if (rc == NPU_OK) {
        model_tensors_each(pl->cfg, plan_tensor, pl);
        plan_tied_head(pl);
    }
    return rc;
}

/* Cores planned, and again with the expert map placed again if the cores' plan changed
   what it was placed for: the rows (the MoE over the layer, npu_moe_layer_wide, serves the
   whole iteration's rows) or whether the layer can run it (the residual rows moved to HBM:
   the default placement depends on it). */
static int cores_placed(struct planner *pl, const struct npu_plan_request *req,
                        struct npu_image_core *cores, struct npu_prog_op *ops, uint32_t *nops)
{
    int rc = npu_planner_cores(pl, cores, ops, nops);
    const struct npu_plan *p = &pl->plan;
    const uint32_t rows = npu_moe_layer_wide(p) ? p->max_tokens : p->moe_rows;
    if (rc != NPU_OK || !npu_plan_is_ep(p) || p->tp == 1 ||
        (rows == pl->x_rows && npu_moe_wide_able(p) == pl->x_wide_able))
        return rc;
    rc = place_experts(pl, req);
    return rc == NPU_OK ? npu_planner_cores(pl, cores, ops, nops) : rc;
}

/* Cores planned; a default MoE group halves down to the tile until the buffers fit. But a
   group of the whole iteration's rows first tries a default expert ring of 2 slots (then 1,
   disaggregated) instead of 3: two groups a layer load a rank's experts twice when the ring cannot hold them
   (prefill-512 of Qwen3-30B-A3B on large-64 in tiles of 128: one group of 512 and 2 slots,
   20.5 ms; 3 slots and two groups of 256, contiguous placement, 33.6 ms;
   docs/results.md). Once the layer takes several groups anyway, 3 slots, so that
   widen_ring may keep a rank's experts across them where they fit. The expert map is placed
   again for each halved group (several groups a layer place contiguously,
   npu_planner_experts): a balanced map's wider fan-out would otherwise size the dispatch
   buffers of every smaller group (Qwen3-30B-A3B's plan for 33,280 rows fell to groups of
   260 rows where 520 fit), and the summary's imbalance is the group's. */
static int fit_cores(struct planner *pl, const struct npu_plan_request *req,
                     struct npu_image_core *cores, struct npu_prog_op *ops, uint32_t *nops)
{
    int rc = cores_placed(pl, req, cores, ops, nops);
    if (rc == NPU_ERR_NOMEM && !req->expert_slots && pl->plan.expert_slots > 2 &&
        pl->plan.moe_rows >= pl->plan.max_tokens) {
        /* 2 slots; disaggregated, whose groups are never halved, then 1 (a matrix loads
           while none is read: GPT-OSS-20B's whole experts of 16 MiB a matrix on 32 expert
           cores fit no other way) */
        const uint32_t slots = pl->plan.expert_slots, least = pl->plan.disagg ? 1 : 2;
        for (uint32_t n = 2; rc == NPU_ERR_NOMEM && n >= least; n--) {
            pl->plan.expert_slots = n;
            rc = npu_planner_cores(pl, cores, ops, nops);
        }
        if (rc == NPU_ERR_NOMEM)
            pl->plan.expert_slots = slots;
    }
    /* (disaggregated: a replica's micro-batch is one group, so groups are not halved) */
    while (rc == NPU_ERR_NOMEM && !req->moe_rows && !pl->plan.disagg &&
           pl->plan.moe_rows > pl->plan.tile_rows) {
        pl->plan.moe_rows = pl->plan.moe_rows / 2 > pl->plan.tile_rows ? pl->plan.moe_rows / 2
                                                                        : pl->plan.tile_rows;
        rc = npu_plan_is_ep(&pl->plan) ? place_experts(pl, req) : NPU_OK;
        if (rc == NPU_OK)
            rc = cores_placed(pl, req, cores, ops, nops);
    }
    return rc;
}

/* Cores fitted (fit_cores, then the tile and KV blocks halved while SRAM is short), the
   expert ring and the split-attention window widened, and the image written. */
static int fit_and_write(struct planner *pl, const struct npu_plan_request *req,
                         struct npu_image_core *cores, struct npu_prog_op *ops, uint32_t *nops,
                         const char *config_text, struct npu_built_image *out)
{
    int rc = fit_cores(pl, req, cores, ops, nops); /* places the experts for the group kept */
    const uint32_t block0 = pl->plan.kv_block;
    while (rc == NPU_ERR_NOMEM) {
        /* the KV block (and step) first: a tile of fewer rows than the matrix array leaves
           it idle for the rest and doubles the tiles' collectives (small-256's Qwen3-30B-A3B
           plan: tiles of 64 and blocks of 32 fit where both halved to 32 and 64 before) */
        uint32_t t = pl->plan.tile_rows, b = pl->plan.kv_block;
        if (!req->kv_block && b / 2 >= 32) {
            pl->plan.kv_block = b / 2;
            if (!req->attn_block) /* the same blocks a step (a multiple of b / 2) */
                pl->plan.attn_block /= 2;
        } else if (!req->tile_rows && t / 2 >= 8 && t / 2 >= pl->plan.max_batch) {
            pl->plan.tile_rows = t / 2;
        }
        if (pl->plan.tile_rows == t && pl->plan.kv_block == b)
            break; /* nothing left to shrink: the refusal stands */
        if (!req->kv_window)
            pl->plan.kv_window = npu_kv_window_default(pl->cfg, &pl->plan);
        if ((!req->moe_rows && !pl->plan.disagg) || !npu_plan_is_ep(&pl->plan) ||
            pl->plan.tp == 1)
            pl->plan.moe_rows = pl->plan.tile_rows; /* the default group was halved to it */
        rc = npu_planner_cores(pl, cores, ops, nops);
    }
    if (rc == NPU_OK && pl->plan.kv_block < block0)
        rc = widen_kv_block(pl, req, block0, cores, ops, nops);
    if (rc == NPU_OK && !req->kv_window) /* first: it paid more than ring slots */
        rc = widen_window(pl, cores, ops, nops);
    if (rc == NPU_OK && !req->expert_slots)
        rc = widen_ring(pl, cores, ops, nops);
    if (rc == NPU_OK)
        rc = widen_deep(pl, cores, ops, nops);
    if (rc != NPU_OK)
        return rc;
    rc = write_image(pl, config_text, cores, ops, *nops, out);
    /* HBM short (write_image's NOMEM): first one spill half instead of one per layer
       parity, then the MoE spill halved while more than a group's worth (the layer then
       serves and combines in waves); a smaller spill needs no more SRAM */
    while (rc == NPU_ERR_NOMEM &&
           (pl->plan.moe_spill_parity ||
            (!pl->spill_request && pl->spill_halvings < 32 &&
             pl->plan.moe_spill_rows > npu_moe_spill_group_rows(pl->cfg, &pl->plan,
                                                                 npu_moe_group_rows(&pl->plan))))) {
        if (pl->plan.moe_spill_parity)
            pl->spill_single = true;
        else
            pl->spill_halvings++;
        rc = npu_planner_cores(pl, cores, ops, nops);
        if (rc != NPU_OK)
            return rc;
        rc = write_image(pl, config_text, cores, ops, *nops, out);
    }
    return rc;
}

/* What the interpreter takes (npu_limits.h): refused here, with the figures, rather than by
   every core after the release. The MoE group's slice only once the cores are fitted (they
   halve a default group that does not fit). */
static int check_firmware_limits(const struct planner *pl, bool fitted)
{
    const struct model_config *c = pl->cfg;
    const struct npu_plan *p = &pl->plan;
    const uint64_t k = c->experts_per_token ? c->experts_per_token : 1;
    if (c->num_layers > NPU_MODEL_LAYERS_MAX || c->num_experts > NPU_MODEL_EXPERTS_MAX)
        return fail(pl->err, pl->errlen, NPU_ERR_RANGE, "%s: %u layers and %u experts; the "
                    "interpreter takes at most %u and %u (NPU_MODEL_LAYERS_MAX, "
                    "NPU_MODEL_EXPERTS_MAX)", c->name, c->num_layers, c->num_experts,
                    NPU_MODEL_LAYERS_MAX, NPU_MODEL_EXPERTS_MAX);
    const uint64_t tile = (uint64_t)p->tile_rows * k;
    /* a rank's rows of a group each become a pair per slice their choices reach (under a
       balanced map up to expert_fanout, more than k): the sort holds them all */
    const uint64_t kx = p->expert_fanout > k ? p->expert_fanout : k;
    const uint64_t slice = ((uint64_t)p->moe_rows + p->tp - 1) / p->tp * kx;
    if (tile > NPU_ROUTED_PAIRS_MAX)
        return fail(pl->err, pl->errlen, NPU_ERR_RANGE, "%s: tile_rows %u times top-k %llu "
                    "passes the %u choices the interpreter routes at once "
                    "(NPU_ROUTED_PAIRS_MAX): use fewer tile rows", c->name, p->tile_rows,
                    (unsigned long long)k, NPU_ROUTED_PAIRS_MAX);
    if (fitted && slice > NPU_ROUTED_PAIRS_MAX)
        return fail(pl->err, pl->errlen, NPU_ERR_RANGE, "%s: a rank's slice of a MoE group of "
                    "%u rows over tp %u, times the %llu expert slices a row's choices reach, "
                    "passes the %u pairs the interpreter routes at once "
                    "(NPU_ROUTED_PAIRS_MAX): use smaller --moe-rows", c->name, p->moe_rows,
                    p->tp, (unsigned long long)kx, NPU_ROUTED_PAIRS_MAX);
    return NPU_OK;
}

/* The plan from `before` again, its experts placed as the planner's flags now say (a
   default placement that did not fit: without copies, or contiguous). */
static int replan_experts(struct planner *pl, const struct npu_plan_request *req,
                          const struct npu_plan *before, struct npu_image_core *cores,
                          struct npu_prog_op *ops, uint32_t *nops, const char *config_text,
                          struct npu_built_image *out)
{
    pl->plan = *before, pl->spill_halvings = 0, pl->spill_single = false;
    int rc = place_experts(pl, req);
    return rc == NPU_OK ? fit_and_write(pl, req, cores, ops, nops, config_text, out) : rc;
}

/* One attempt at the plan, with the automatic choices (conservative: the simpler ones). */
static int plan_build(const struct model_config *cfg, const char *config_text,
                      const struct npu_plan_chip *chip, const struct npu_plan_request *req,
                      bool conservative, const char *why, struct npu_built_image *out,
                      FILE *summary, char *err, size_t errlen)
{
    struct planner pl = { .cfg = cfg, .chip = chip, .err = err, .errlen = errlen,
                          .stream = req->stream_weights != 0,
                          .kv_pool = req->kv_sram_blocks, .conservative = conservative,
                          .spill_request = req->moe_spill_rows,
                          .units_request = req->moe_units_rows,
                          .single_stage = req->stage_single != 0,
                          .deep_request = req->attn_deep, .fallback_why = why };
    *out = (struct npu_built_image){ 0 };
    int rc = plan_group(&pl, req);
    if (rc == NPU_OK)
        rc = plan_shape(&pl, req);
    if (rc == NPU_OK)
        rc = plan_micro_batches(&pl, req);
    if (rc == NPU_OK)
        rc = plan_partitions(&pl, req);
    if (rc == NPU_OK)
        rc = plan_moe_rows(&pl, req);
    if (rc == NPU_OK)
        rc = check_firmware_limits(&pl, false);
    if (rc == NPU_OK)
        rc = npu_planner_experts(&pl, req);
    if (rc != NPU_OK) {
        free(pl.xmap);
        return rc;
    }
    model_tensors_each(cfg, plan_tensor, &pl);
    plan_tied_head(&pl);
    const uint32_t ncores = chip->mesh_rows * chip->mesh_cols;
    struct npu_image_core *cores = calloc(ncores, sizeof(*cores));
    struct npu_prog_op *ops = calloc(3u * cfg->num_layers + 2u * cfg->num_layers + 4,
                                     sizeof(*ops)); /* stages <= layers: 2 ends each */
    uint32_t nops = 0;
    if (!cores || !ops)
        abort();
    const struct npu_plan before = pl.plan;
    rc = fit_and_write(&pl, req, cores, ops, &nops, config_text, out);
    if (rc == NPU_ERR_NOMEM && req->expert_replicas < 0 && pl.x_copies) {
        /* the default's expert copies hold more weights (and wider blocks): none */
        pl.no_copies = true;
        rc = replan_experts(&pl, req, &before, cores, ops, &nops, config_text, out);
    }
    if (rc == NPU_ERR_NOMEM && req->expert_placement < 0 &&
        pl.plan.expert_placement == NPU_EXPERTS_BALANCED) {
        /* a balanced map's blocks are as wide as a rank's widest slice, so it can need more
           HBM (and SRAM) than contiguous whole experts: place those instead */
        pl.contiguous = true;
        rc = replan_experts(&pl, req, &before, cores, ops, &nops, config_text, out);
    }
    if (rc == NPU_OK && (rc = check_firmware_limits(&pl, true)) != NPU_OK)
        npu_built_image_free(out);
    if (rc == NPU_OK && req->moe_units_rows > 0 && !pl.plan.moe_units_rows) {
        rc = fail(err, errlen, NPU_ERR_INVAL, "moe_units_rows %d: the MoE by units needs "
                  "expert parallelism over tp > 1, experts staged from HBM (not resident), "
                  "an expert ring of at least 3 slots and a slice of every layer on every "
                  "rank", req->moe_units_rows);
        npu_built_image_free(out);
    }
    if (rc == NPU_OK && req->moe_spill_rows && !pl.plan.moe_spill_rows) {
        rc = fail(err, errlen, NPU_ERR_INVAL, "moe_spill_rows %u: the plan has no MoE over "
                  "the layer (it needs expert parallelism, the residual rows in HBM and more "
                  "rows than a MoE group of more than a tile)", req->moe_spill_rows);
        npu_built_image_free(out);
    }
    if (rc == NPU_OK && summary) {
        uint32_t c0 = pl.plan.rect_row0 * chip->mesh_cols + pl.plan.rect_col0;
        print_summary(&pl, req, &cores[c0], (const struct npu_image_header *)out->data,
                      summary);
    }
    free(cores), free(ops), free(pl.tensors), free(pl.sources), free(pl.xmap);
    return rc;
}

/* The plan with the planner's choices for what the request leaves unset; if that plan
   cannot be built, again with the simpler choices (npu_plan_auto.c), whose refusal is the
   one reported when both fail (the refusals of the plan without automatic choices). */
int npu_plan_build(const struct model_config *cfg, const char *config_text,
                   const struct npu_plan_chip *chip, const struct npu_plan_request *req,
                   struct npu_built_image *out, FILE *summary, char *err, size_t errlen)
{
    int rc = plan_build(cfg, config_text, chip, req, false, NULL, out, summary, err, errlen);
    if (rc == NPU_OK || !npu_planner_auto_any(req))
        return rc;
    char why[512];
    snprintf(why, sizeof(why), "%s", err);
    rc = plan_build(cfg, config_text, chip, req, true, why, out, summary, err, errlen);
    if (rc != NPU_OK && strcmp(err, why)) { /* both refused: the simpler plan's reason,
                                               then the first's (when it differs) */
        const size_t n = strlen(err);
        snprintf(err + n, errlen > n ? errlen - n : 0, " (with the planner's own choices: %s)",
                 why);
    }
    return rc;
}

void npu_built_image_free(struct npu_built_image *img)
{
    free(img->data);
    *img = (struct npu_built_image){ 0 };
}
