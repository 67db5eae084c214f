/* SPDX-License-Identifier: MIT */
/* The planner, per core (npu_plan.h, docs/images.md): the stages' NoC groups, each rank's
   SRAM map (scratch, tile buffers, residual rows, KV ring, weights resident or staged, KV
   block pool), resident weights' offsets, and the stages' layer programs. */
#include <stdlib.h>
#include <string.h>

#include "noc/coll_sizes.h"
#include "noc/placement.h"
#include "npu_layout.h"
#include "npu_plan_internal.h"
#include "npu_regs.h"

/* Bytes of the shares of rank r of stage st in all of the stage's layers (every rank has
   the replicated tensors too), for resident plans. */
static uint64_t stage_bytes_all(const struct planner *pl, uint32_t st, uint32_t rank)
{
    uint64_t sum = 0;
    for (uint64_t i = 0; i < pl->ntensors; i++) {
        const struct npu_image_tensor *t = &pl->tensors[i];
        if (t->kind == MT_EMBED || (t->rank != NPU_IMAGE_IDLE && t->rank != rank) ||
            npu_plan_tensor_stage(&pl->plan, t) != st)
            continue; /* embeddings stay in HBM: rows are read as tokens need them */
        sum += align_up(t->block_bytes, 64) * t->blocks;
    }
    return sum;
}

/* The tensors' indices grouped by layer, in their order within a layer (a counting sort):
   plan_sram reads every layer's shares for every rank, and a walk over all tensors each
   time was most of the planning time of Qwen3-30B-A3B on large-64 (seconds a plan). */
struct layer_tensors {
    uint64_t *at;    /* tensor indices, layer by layer */
    uint64_t *first; /* [num_layers + 1]: layer l's are at[first[l] .. first[l + 1]) */
};

static void layer_tensors_build(const struct planner *pl, struct layer_tensors *lt)
{
    const uint32_t n = pl->cfg->num_layers;
    lt->first = calloc((size_t)n + 2, sizeof(*lt->first));
    lt->at = malloc((pl->ntensors ? pl->ntensors : 1) * sizeof(*lt->at));
    if (!lt->first || !lt->at)
        abort();
    for (uint64_t i = 0; i < pl->ntensors; i++)
        if (pl->tensors[i].layer < n)
            lt->first[pl->tensors[i].layer + 2]++;
    for (uint32_t l = 2; l <= n + 1; l++)
        lt->first[l] += lt->first[l - 1];
    for (uint64_t i = 0; i < pl->ntensors; i++) /* first[l + 1] is layer l's next slot */
        if (pl->tensors[i].layer < n)
            lt->at[lt->first[pl->tensors[i].layer + 1]++] = i;
}

static void layer_tensors_free(struct layer_tensors *lt)
{
    free(lt->at), free(lt->first);
}

/* The staging map of layer l's shares of rank r: the cores lay them out with the same
   function (npu_stage_map_layer); its bytes, and those of its non-expert shares (before
   map.experts) in *nonexp. */
static uint64_t layer_stage_bytes(const struct planner *pl, const struct layer_tensors *lt,
                                  uint32_t rank, uint32_t layer, uint64_t *nonexp)
{
    const struct npu_image_tensor *t[NPU_STAGE_KINDS] = { 0 };
    for (uint64_t j = lt->first[layer]; j < lt->first[layer + 1]; j++) {
        const struct npu_image_tensor *x = &pl->tensors[lt->at[j]];
        if (x->kind < NPU_STAGE_KINDS && (x->rank == NPU_IMAGE_IDLE || x->rank == rank))
            t[x->kind] = x;
    }
    struct npu_stage_map map;
    npu_stage_map_layer(t, pl->plan.expert_slots, &map);
    *nonexp = map.experts;
    return map.bytes;
}

/* Whether every rank holds a slice of every layer's experts (the MoE by units loads through
   every rank's ring, which a rank without slices lacks). */
static bool every_rank_holds(const struct planner *pl)
{
    uint32_t layer = UINT32_MAX, ranks = 0, layers = 0;
    for (uint64_t i = 0; i < pl->nxmap; i++) { /* a layer's slices are in rank order */
        const struct npu_image_expert_slice *s = &pl->xmap[i];
        if (s->layer != layer) {
            if (layer != UINT32_MAX && ranks != pl->plan.tp)
                return false;
            layer = s->layer, ranks = 0, layers++;
        }
        ranks += i == 0 || s->layer != pl->xmap[i - 1].layer || s->rank != pl->xmap[i - 1].rank;
    }
    return layers == pl->cfg->num_layers && ranks == pl->plan.tp;
}

/* The MoE by units (npu_plan.moe_units_rows, moe_unit_split; docs/images.md, "MoE by
   units"): up to the request's rows, or by default the plan's decode batch (max_batch),
   capped at a tile; each unit of the expert map cut into the most pieces (at most 64) that
   keep a piece at least the matrix array wide. 0 when the plan cannot run it. */
static void choose_units(struct planner *pl)
{
    struct npu_plan *p = &pl->plan;
    p->moe_units_rows = p->moe_unit_split = 0;
    if (!npu_plan_is_ep(p) || p->tp == 1 || p->weights_resident || p->expert_slots < 3 ||
        p->disagg ||
        pl->units_request == 0 || !every_rank_holds(pl))
        return;
    uint32_t rows = pl->units_request > 0 ? (uint32_t)pl->units_request : p->max_batch;
    rows = rows < p->tile_rows ? rows : p->tile_rows;
    rows = rows < p->max_tokens ? rows : p->max_tokens;
    const uint32_t w = pl->cfg->moe_intermediate_size / p->expert_units;
    uint32_t split = 1;
    for (uint32_t s = 64; s > 1; s--)
        if (w % s == 0 && w / s >= pl->chip->sa_cols) {
            split = s;
            break;
        }
    p->moe_units_rows = rows, p->moe_unit_split = split;
}

/* Rows of the MoE spill (npu_plan.moe_spill_rows): every row of the iteration's worst case
   unless halved for HBM, never less than one group's. 0 without the MoE over the layer. */
static uint32_t spill_rows(const struct planner *pl)
{
    const struct npu_plan *p = &pl->plan;
    if (!npu_moe_layer_wide(p))
        return 0;
    if (pl->spill_request)
        return pl->spill_request;
    const uint64_t full = npu_moe_spill_group_rows(pl->cfg, p, p->max_tokens);
    const uint64_t least = npu_moe_spill_group_rows(pl->cfg, p, npu_moe_group_rows(p));
    const uint64_t r = pl->spill_halvings < 32 ? full >> pl->spill_halvings : 0;
    const uint64_t rows = r > least ? r : least;
    return rows > UINT32_MAX ? UINT32_MAX : (uint32_t)rows;
}

/* The SRAM a core has for the plan: all of it but the NoC driver's mailboxes; 0 when the
   mailboxes do not even fit (a small SRAM on a large mesh: the subtraction would wrap). */
static uint64_t sram_avail(const struct planner *pl)
{
    const uint64_t reserve =
        NPU_IMAGE_NOC_RESERVE((uint64_t)pl->chip->mesh_rows * pl->chip->mesh_cols);
    return pl->chip->sram_bytes > reserve ? pl->chip->sram_bytes - reserve : 0;
}

/* SRAM of one core: scratch, tile buffers, residual, KV cache, then weights (all of its
   shares when they fit, else a staging buffer for the largest layer), the NPU paper's
   section 4.2 order. */
static int plan_sram(struct planner *pl, const struct layer_tensors *lt, uint32_t st,
                     uint32_t rank, struct npu_image_core *core,
                     const struct npu_act_layout *act, bool stream)
{
    const struct model_config *c = pl->cfg;
    const struct npu_plan *p = &pl->plan;
    const uint64_t avail = sram_avail(pl);
    uint64_t at = NPU_IMAGE_APP_BASE;
    core->comm_scratch = at, at += align_up(NOC_COMM_SCRATCH_BYTES(p->comm_segment), 64);
    core->sram_act = at, core->sram_act_bytes = act->bytes, at += align_up(act->bytes, 64);
    if (at > avail)
        return fail(pl->err, pl->errlen, NPU_ERR_NOMEM, "%s on %s: the tile buffers (tile_rows "
                    "%u) need %.2f MiB of SRAM per core, %.2f MiB are free", c->name,
                    pl->chip->name, p->tile_rows, MIB(at), MIB(avail));
    const uint64_t xb = align_up((uint64_t)p->max_tokens * c->hidden_size * pl->eb, 64);
    const uint64_t kvb = align_up(npu_kv_ring_bytes(c, p), 64);
    uint64_t stage = 0, nonexp = 0, all = stage_bytes_all(pl, st, rank);
    for (uint32_t l = st * p->stage_layers; l < (st + 1) * p->stage_layers; l++) {
        uint64_t ne, b = layer_stage_bytes(pl, lt, rank, l, &ne);
        stage = b > stage ? b : stage;
        nonexp = ne > nonexp ? ne : nonexp;
    }
    stage = align_up(stage, 64), nonexp = align_up(nonexp, 64);
    core->x_bytes = xb, core->kv_bytes = kvb;
    /* the three choices hold for every rank: a rank can only move things to HBM (the
       caller repeats the ranks until no rank changes them) */
    pl->plan.x_in_sram = pl->plan.x_in_sram && at + xb + stage <= avail;
    core->x_off = pl->plan.x_in_sram ? at : NPU_IMAGE_NOWHERE;
    at += pl->plan.x_in_sram ? xb : 0;
    pl->plan.moe_spill_rows = spill_rows(pl);
    /* a half per layer parity where the firmware may defer a layer's combines (not under
       skewed routing in performance mode) and HBM allows */
    pl->plan.moe_spill_parity = pl->plan.moe_spill_rows && !pl->spill_single &&
                                !(p->mode && p->routing == NPU_ROUTING_SKEWED);
    struct npu_moe_spill spill; /* in HBM after the residual rows (the MoE over the layer) */
    npu_moe_spill_layout(c, p, &spill);
    const uint64_t least = npu_moe_spill_group_rows(c, p, npu_moe_group_rows(p));
    if (spill.bytes && spill.cap < least)
        return fail(pl->err, pl->errlen, NPU_ERR_INVAL, "moe_spill_rows %llu: the MoE spill "
                    "must hold one group's worst case, %llu rows (%u rows x %llu slices)",
                    (unsigned long long)spill.cap, (unsigned long long)least,
                    npu_moe_group_rows(p), (unsigned long long)(least / npu_moe_group_rows(p)));
    core->x_bytes += pl->plan.x_in_sram ? 0 : spill.bytes;
    /* with a block pool in SRAM, the ring is the spill space in HBM (section 4.2) */
    pl->plan.kv_in_sram = pl->plan.kv_in_sram && pl->kv_pool == 0 &&
                          at + kvb + stage <= avail;
    core->kv_off = pl->plan.kv_in_sram ? at : NPU_IMAGE_NOWHERE;
    at += pl->plan.kv_in_sram ? kvb : 0;
    pl->plan.weights_resident = pl->plan.weights_resident && !stream && at + all <= avail;
    /* last in importance: the next layer's non-expert shares beside this one's */
    if (pl->plan.stage_double == NPU_STAGE_DOUBLE)
        pl->plan.stage_double = !pl->plan.weights_resident && p->stage_layers > 1 &&
                                        at + stage + nonexp <= avail
                                    ? NPU_STAGE_DOUBLE
                                    : NPU_STAGE_ONE;
    core->sram_weights = core->sram_stage = at;
    if (pl->plan.weights_resident)
        core->sram_weights_bytes = all, at += align_up(all, 64);
    else
        core->sram_stage_bytes =
            stage + (pl->plan.stage_double == NPU_STAGE_DOUBLE ? nonexp : 0),
        at += core->sram_stage_bytes;
    core->sram_end = at;
    if (at > avail)
        return fail(pl->err, pl->errlen, NPU_ERR_NOMEM, "%s on %s (tp %u): rank %u needs %.2f "
                    "MiB of SRAM: tile buffers %.2f, staging of one layer's weights %.2f (the "
                    "residual and the KV cache already moved to HBM); the core has %.2f MiB "
                    "free. Use a larger tp or smaller tile_rows", c->name, pl->chip->name,
                    p->tp, rank, MIB(at - NPU_IMAGE_APP_BASE), MIB(act->bytes), MIB(stage),
                    MIB(avail - NPU_IMAGE_APP_BASE));
    return NPU_OK;
}

/* Resident plans: each rank's shares (and replicated tensors) get SRAM offsets in order,
   per stage. The same offsets serve every rank, since a rank only reads its own entries. */
static void place_resident(struct planner *pl, const struct npu_image_core *core0)
{
    const uint32_t tp = pl->plan.tp;
    uint64_t *next = calloc((size_t)tp * pl->plan.stages, sizeof(*next)); /* [stage][rank] */
    if (!next)
        abort();
    for (uint32_t r = 0; r < tp * pl->plan.stages; r++)
        next[r] = core0->sram_weights;
    for (uint64_t i = 0; i < pl->ntensors; i++) {
        struct npu_image_tensor *t = &pl->tensors[i];
        uint64_t bytes = align_up(t->block_bytes * t->blocks, 64);
        uint64_t *row = next + (size_t)npu_plan_tensor_stage(&pl->plan, t) * tp;
        if (t->kind == MT_EMBED)
            continue;
        if (t->rank == NPU_IMAGE_IDLE) { /* replicated: the same offset on every rank */
            uint64_t at = 0;
            for (uint32_t r = 0; r < tp; r++)
                at = row[r] > at ? row[r] : at;
            t->sram_off = at;
            for (uint32_t r = 0; r < tp; r++)
                row[r] = at + bytes;
        } else {
            t->sram_off = row[t->rank];
            row[t->rank] += bytes;
        }
    }
    free(next);
}

/* Resident plans: each core's weights end where its last share (or replicated tensor,
   placed at the same offset on every rank, after the largest rank's shares) ends. */
static int resident_ends(struct planner *pl, struct npu_image_core *cores, uint32_t ncores)
{
    const uint64_t avail = sram_avail(pl);
    for (uint32_t i = 0; i < ncores; i++) {
        struct npu_image_core *c = &cores[i];
        if (c->rank == NPU_IMAGE_IDLE)
            continue;
        uint64_t end = c->sram_weights;
        for (uint64_t j = 0; j < pl->ntensors; j++) {
            const struct npu_image_tensor *t = &pl->tensors[j];
            if (t->sram_off != NPU_IMAGE_NOWHERE &&
                (t->rank == NPU_IMAGE_IDLE || t->rank == c->rank) &&
                npu_plan_tensor_stage(&pl->plan, t) == c->stage) {
                uint64_t e = align_up(t->sram_off + t->block_bytes * t->blocks, 64);
                end = e > end ? e : end;
            }
        }
        c->sram_weights_bytes = end - c->sram_weights;
        c->sram_end = end;
        if (end > avail)
            return fail(pl->err, pl->errlen, NPU_ERR_NOMEM, "%s on %s (tp %u): rank %u's "
                        "resident weights end at %.2f MiB of SRAM, %.2f MiB are usable",
                        pl->cfg->name, pl->chip->name, pl->plan.tp, c->rank, MIB(end),
                        MIB(avail));
    }
    return NPU_OK;
}

/* The KV block pool: after everything else in SRAM (the NPU paper's section 4.2 gives KV
   blocks and weights what the buffers leave; weights come first here, since a streamed
   layer costs every iteration and a spilled KV position only its attention reads). The
   same number of blocks on every rank: auto takes what the fullest rank has left, capped
   at what max_batch requests of max_seq positions can use. */
static int plan_kv_pool(struct planner *pl, struct npu_image_core *cores, uint32_t ncores)
{
    const struct model_config *c = pl->cfg;
    struct npu_plan *p = &pl->plan;
    const uint64_t avail = sram_avail(pl);
    const uint64_t block = 2ull * p->stage_layers * p->kv_block * npu_kv_row_bytes(c, p);
    const uint64_t w = npu_kv_stripe(p); /* positions per block id */
    const uint64_t cap = (uint64_t)p->max_batch * ((p->max_seq + w - 1) / w);
    uint64_t room = UINT64_MAX;
    p->kv_sram_blocks = 0;
    if (pl->kv_pool == 0)
        return NPU_OK;
    for (uint32_t i = 0; i < ncores; i++)
        if (cores[i].rank != NPU_IMAGE_IDLE) {
            uint64_t end = align_up(cores[i].sram_end, 64);
            uint64_t r = end < avail ? (avail - end) / block : 0;
            room = r < room ? r : room;
        }
    uint64_t want = pl->kv_pool < 0 ? (room < cap ? room : cap) : (uint64_t)pl->kv_pool;
    if (pl->kv_pool < 0 && want > NPU_KV_BLOCKS_MAX)
        want = NPU_KV_BLOCKS_MAX; /* what the control core's KV manager tracks */
    if (want > room || want > NPU_KV_BLOCKS_MAX)
        return fail(pl->err, pl->errlen, NPU_ERR_NOMEM, "%s on %s: %llu KV blocks of %u "
                    "positions (%.2f MiB each) do not fit: SRAM has room for %llu per core "
                    "(at most %u, NPU_KV_BLOCKS_MAX)", c->name, pl->chip->name,
                    (unsigned long long)want, p->kv_block, MIB(block),
                    (unsigned long long)room, NPU_KV_BLOCKS_MAX);
    p->kv_sram_blocks = (uint32_t)want;
    for (uint32_t i = 0; i < ncores; i++)
        if (cores[i].rank != NPU_IMAGE_IDLE) {
            cores[i].kv_pool_off = align_up(cores[i].sram_end, 64);
            cores[i].kv_pool_bytes = want * block;
            cores[i].sram_end = cores[i].kv_pool_off + cores[i].kv_pool_bytes;
        }
    return NPU_OK;
}

/* Every rank's SRAM plan. Where the residual rows, the KV ring and the weights go is one
   choice for all ranks (the firmware reads it from the plan), and ranks' shares may differ
   (EP: some ranks hold no experts), so the ranks are planned again until no rank had to
   move anything more to HBM. */
static int plan_ranks_sram_once(struct planner *pl, const struct noc_group *groups,
                                struct npu_image_core *cores, struct npu_act_layout *act)
{
    struct npu_plan *p = &pl->plan;
    p->x_in_sram = p->kv_in_sram = p->weights_resident = 1;
    p->stage_double = pl->single_stage ? NPU_STAGE_OWN : NPU_STAGE_DOUBLE;
    struct layer_tensors lt;
    layer_tensors_build(pl, &lt);
    int rc = NPU_OK;
    for (;;) {
        const uint32_t was = p->stage_double << 3 | p->x_in_sram << 2 | p->kv_in_sram << 1 |
                             p->weights_resident;
        choose_units(pl); /* staged experts only: its buffers come with it */
        npu_act_layout(pl->cfg, p, act); /* the residual's place sizes xt */
        for (uint32_t st = 0; st < p->stages; st++)
            for (uint32_t r = 0; r < p->tp; r++) {
                uint32_t core = groups[st].core[r];
                cores[core].rank = r, cores[core].stage = st;
                rc = plan_sram(pl, &lt, st, r, &cores[core], act, pl->stream);
                if (rc != NPU_OK)
                    goto out;
            }
        if ((p->stage_double << 3 | p->x_in_sram << 2 | p->kv_in_sram << 1 |
             p->weights_resident) == was)
            break;
    }
out:
    layer_tensors_free(&lt);
    return rc;
}

/* plan_ranks_sram_once with two tiles' attention in flight only where asked for
   (npu_planner_deep_able; the default is decided last, widen_deep in npu_plan.c). */
static int plan_ranks_sram(struct planner *pl, const struct noc_group *groups,
                           struct npu_image_core *cores, struct npu_act_layout *act)
{
    struct npu_plan *p = &pl->plan;
    if (pl->deep_request == 1 && !npu_planner_deep_able(p))
        return fail(pl->err, pl->errlen, NPU_ERR_INVAL, "attn_deep 1: two tiles' attention "
                    "in flight needs a 2D O GEMM over tp > 1 ranks (tp %u, O %s)", p->tp,
                    npu_partition_name((enum npu_partition)p->partition[NPU_GEMM_O]));
    p->attn_deep = pl->deep_request == 1 || (p->attn_deep && npu_planner_deep_able(p));
    return plan_ranks_sram_once(pl, groups, cores, act);
}

bool npu_planner_deep_able(const struct npu_plan *p)
{
    return p->tp > 1 && p->partition[NPU_GEMM_O] == NPU_PART_2D && !p->disagg;
}

/* The NoC groups of the stages: the same placement in each stage's rectangle. */
static int plan_stage_groups(struct planner *pl, struct noc_group *groups)
{
    const struct npu_plan *p = &pl->plan;
    for (uint32_t st = 0; st < p->stages; st++) {
        uint32_t row0, col0;
        npu_plan_stage_origin(p, st, &row0, &col0);
        struct noc_group_args ga = {
            .placement = (enum noc_placement)p->placement,
            .rect = { (uint16_t)row0, (uint16_t)col0, (uint16_t)p->rect_rows,
                      (uint16_t)p->rect_cols },
            .mesh_rows = pl->chip->mesh_rows, .mesh_cols = pl->chip->mesh_cols };
        int rc = noc_group_init(&groups[st], &ga);
        if (rc != NPU_OK)
            return fail(pl->err, pl->errlen, rc, "placement %u of a %ux%u group at (%u,%u) on "
                        "the %ux%u mesh", p->placement, p->rect_rows, p->rect_cols, row0, col0,
                        pl->chip->mesh_rows, pl->chip->mesh_cols);
    }
    return NPU_OK;
}

/* Instances 1.. are instance 0's cores shifted by whole bands: the same ranks, SRAM maps
   and programs (write_image gives each core its own HBM segments). */
static void replicate_instances(const struct npu_plan *p, struct npu_image_core *cores,
                                uint32_t rows, uint32_t cols)
{
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t c = 0; c < p->instance_cols; c++) {
            const struct npu_image_core *src = &cores[r * cols + c];
            for (uint32_t inst = 1; src->rank != NPU_IMAGE_IDLE && inst < p->instances; inst++) {
                struct npu_image_core *dst = &cores[r * cols + c + inst * p->instance_cols];
                *dst = *src;
                dst->instance = inst;
            }
        }
}

int npu_planner_cores(struct planner *pl, struct npu_image_core *cores,
                      struct npu_prog_op *ops, uint32_t *nops)
{
    const struct npu_plan *p = &pl->plan;
    const uint32_t cols = pl->chip->mesh_cols, ncores = pl->chip->mesh_rows * cols;
    struct npu_act_layout act; /* plan_ranks_sram lays it out (xt follows the residual) */
    for (uint32_t i = 0; i < ncores; i++)
        cores[i] = (struct npu_image_core){ .rank = NPU_IMAGE_IDLE };
    /* Rank r of a stage is the core the NoC driver's placement makes rank r, so a rank's
       share is where the collectives expect its chunk. */
    static struct noc_group groups[NOC_GROUP_MAX];
    int rc = plan_stage_groups(pl, groups);
    if (rc == NPU_OK)
        rc = plan_ranks_sram(pl, groups, cores, &act);
    if (rc == NPU_OK && p->disagg && !p->x_in_sram) /* model_disagg.c adds in place */
        rc = fail(pl->err, pl->errlen, NPU_ERR_NOMEM, "--roles disagg: a replica's residual "
                  "rows (max_tokens %u x hidden %u) must stay in SRAM beside the tile "
                  "buffers (%.2f MiB, with every replica's MoE rows) and the weights' staging",
                  p->max_tokens, pl->cfg->hidden_size, MIB(act.bytes));
    if (rc != NPU_OK)
        return rc;
    if (p->weights_resident) {
        place_resident(pl, &cores[groups[0].core[0]]);
        rc = resident_ends(pl, cores, ncores);
        if (rc != NPU_OK)
            return rc;
    }
    rc = plan_kv_pool(pl, cores, ncores);
    if (rc != NPU_OK)
        return rc;
    uint32_t first[NOC_GROUP_MAX + 1];
    *nops = 0;
    for (uint32_t st = 0; st < p->stages; st++) {
        first[st] = *nops;
        *nops += npu_prog_stage(pl->cfg, &pl->plan, st, ops + *nops);
    }
    first[p->stages] = *nops;
    for (uint32_t i = 0; i < ncores; i++)
        if (cores[i].rank != NPU_IMAGE_IDLE) {
            cores[i].prog_first = first[cores[i].stage];
            cores[i].prog_count = first[cores[i].stage + 1] - first[cores[i].stage];
        }
    replicate_instances(p, cores, pl->chip->mesh_rows, cols);
    return NPU_OK;
}
