/* SPDX-License-Identifier: MIT */
/*
 * The plan's automatic choices (docs/images.md, "Automatic plan"): what the planner picks
 * for each field a request leaves unset, from the model, the chip and the iteration's
 * shape alone. Each rule states the cost it follows; `npuctl plan` prints what was picked.
 * When the plan with these choices cannot be built, the planner builds it again with the
 * simpler ones (`conservative`: MN/K partitions by section 5.6 on a ring, no expert
 * parallelism, unsplit attention, tiles of 64 and KV blocks of 256), so a request that
 * fitted before these rules existed still does.
 * Not modelled: the workload's mix of prefill and decode (one plan serves both), and no
 * search over plans by simulation (issue 24 builds that for disaggregation).
 */
#include "npu_plan_internal.h"

#include "noc/coll_sizes.h"
#include "noc/placement.h"
#include "npu_layout.h"

/* Split attention's KV blocks and steps. A decode step costs each rank one attention step
   per request it holds a block of, so small blocks (which spread a context over more
   ranks) multiply those steps, and large ones leave a long prompt's earlier context on few
   owners: Qwen3-30B-A3B on large-64 measured best at 128 and steps of three blocks
   (docs/results.md, "The automatic plan"). */
#define AUTO_SPLIT_KV_BLOCK 128u
#define AUTO_SPLIT_STEP_BLOCKS 3u
/* Tiles of at least this many rows: below it the per-tile collectives dominate. */
#define AUTO_TILE_ROWS_MIN 64u

bool npu_planner_auto_2d(const struct planner *pl, const struct npu_plan_request *req,
                         enum npu_gemm g)
{
    const struct model_config *c = pl->cfg;
    const struct npu_plan *p = &pl->plan;
    if (pl->conservative || (g != NPU_GEMM_QKV && g != NPU_GEMM_O) ||
        req->partition[g] != NPU_PLAN_AUTO)
        return false;
    if (p->tp < 2 || p->rect_rows < 2 || p->rect_cols < 2)
        return false; /* a grid of one row or column is K or MN: nothing to gain */
    if (req->placement >= 0 && req->placement != NOC_PLACE_MESH2D)
        return false; /* the user's placement stands; 2-D needs mesh2d */
    const uint32_t R = p->rect_rows, C = p->rect_cols, q = c->num_heads * c->head_dim;
    uint32_t n, k; /* the tests of check_2d (npu_plan.c), which would refuse the plan */
    npu_gemm_dims(c, g, &n, &k);
    return n % R == 0 && (g != NPU_GEMM_QKV || q % R == 0) && k % C == 0;
}

uint32_t npu_planner_auto_placement(const struct planner *pl,
                                    const struct npu_plan_request *req)
{
    for (uint32_t g = 0; g < NPU_GEMM_COUNT; g++)
        if (req->partition[g] == NPU_PART_2D ||
            npu_planner_auto_2d(pl, req, (enum npu_gemm)g))
            return NOC_PLACE_MESH2D;
    return NOC_PLACE_RING;
}

bool npu_planner_auto_ep(const struct planner *pl, const struct npu_plan_request *req)
{
    const struct model_config *c = pl->cfg;
    const struct npu_plan *p = &pl->plan;
    if (pl->conservative || c->arch != MODEL_MOE || p->tp < 2 ||
        (c->num_experts < p->tp && npu_planner_contiguous_units(c, p->tp) == 1))
        return false; /* fewer experts than ranks, not split evenly: some would hold none */
    if (req->partition[NPU_GEMM_EXP_UP] != NPU_PLAN_AUTO ||
        req->partition[NPU_GEMM_EXP_DOWN] != NPU_PLAN_AUTO)
        return false;
    const uint32_t most = (c->num_experts + p->tp - 1) / p->tp;
    return noc_a2av_mailbox_words(npu_plan_ep_ranks(p), c->num_experts, most) <=
           NPU_IMAGE_A2A_COUNTS((uint64_t)pl->chip->mesh_rows * pl->chip->mesh_cols);
}

void npu_planner_auto_shape(struct planner *pl, const struct npu_plan_request *req)
{
    struct npu_plan *p = &pl->plan;
    /* Split unless asked not to: unsplit, every rank holds the whole cache and runs the
       whole attention, so its cost does not shrink with tp. */
    p->kv_split = req->kv_split >= 0 ? (uint32_t)req->kv_split
                  : p->tp > 1 && !pl->conservative;
    /* A fold of the weight-stationary array lasts max(rows, sa_rows) cycles: tiles of fewer
       rows than the array leave it idle for the rest (docs/engines.md). */
    const uint32_t sa = pl->chip->sa_rows;
    p->tile_rows = req->tile_rows ? req->tile_rows
                   : sa > AUTO_TILE_ROWS_MIN && !pl->conservative ? sa : AUTO_TILE_ROWS_MIN;
    /* and no more than a requested MoE group, a divisor of a requested window */
    while (!req->tile_rows && p->tile_rows > 1 &&
           ((req->moe_rows && p->tile_rows > req->moe_rows) ||
            (req->kv_window && req->kv_window % p->tile_rows)))
        p->tile_rows /= 2;
    const bool split = p->kv_split && p->tp > 1 && !pl->conservative;
    p->kv_block = req->kv_block ? req->kv_block : split ? AUTO_SPLIT_KV_BLOCK : 256;
    p->attn_block = req->attn_block ? req->attn_block
                    : split && !req->kv_block ? AUTO_SPLIT_STEP_BLOCKS * p->kv_block
                                              : p->kv_block;
}

bool npu_planner_auto_any(const struct npu_plan_request *req)
{
    bool any = req->placement < 0 || req->kv_split < 0 || !req->tile_rows || !req->kv_block;
    for (uint32_t g = 0; g < NPU_GEMM_COUNT; g++)
        any |= req->partition[g] == NPU_PLAN_AUTO;
    return any;
}

/* Appends to line[len] at *n (truncating, never past its end). */
static void auto_add(char *line, size_t len, size_t *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (*n < len)
        *n += (size_t)vsnprintf(line + *n, len - *n, fmt, ap);
    va_end(ap);
}

void npu_planner_auto_print(const struct planner *pl, const struct npu_plan_request *req,
                            FILE *f)
{
    static const char *const places[] = { "linear", "interleaved", "ring", "mesh2d" };
    const struct npu_plan *p = &pl->plan;
    char line[512];
    const size_t len = sizeof(line);
    size_t n = 0;
    line[0] = '\0';
    if (req->placement < 0)
        auto_add(line, len, &n, " placement %s,", places[p->placement]);
    for (uint32_t g = 0; g < NPU_GEMM_COUNT; g++)
        if (req->partition[g] == NPU_PLAN_AUTO &&
            (npu_planner_auto_2d(pl, req, (enum npu_gemm)g) ||
             (npu_plan_is_ep(p) && (g == NPU_GEMM_EXP_UP || g == NPU_GEMM_EXP_DOWN))))
            auto_add(line, len, &n, " %s=%s,", npu_gemm_name((enum npu_gemm)g),
                     npu_partition_name((enum npu_partition)p->partition[g]));
    if (req->kv_split < 0)
        auto_add(line, len, &n, " kv split %s,", p->kv_split ? "on" : "off");
    if (!req->tile_rows)
        auto_add(line, len, &n, " tiles of %u,", p->tile_rows);
    if (!req->kv_block)
        auto_add(line, len, &n, " KV blocks of %u,", p->kv_block);
    if (!req->attn_block)
        auto_add(line, len, &n, " steps of %u,", p->attn_block);
    if (n > 0 && n < len)
        fprintf(f, "  chosen by the planner (docs/images.md, \"Automatic plan\")%s:%.*s\n",
                pl->conservative ? ", the simpler choices" : "", (int)n - 1, line);
    if (pl->conservative && pl->fallback_why)
        fprintf(f, "  (the planner's own choices were refused: %s)\n", pl->fallback_why);
}
