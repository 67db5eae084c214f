/* SPDX-License-Identifier: MIT */
/*
 * The plan options (docs/images.md): one table for npuctl plan, build-image, bench model and
 * serve, applied to a struct npuctl_image_opts. Where the commands differ (serve's default
 * model and KV pool; bench model's shapes set the mode and the iteration's shape) an entry
 * is given per variant, or left out of a command's mask.
 */
#define _POSIX_C_SOURCE 200809L
#include "npuctl.h"

#include <stdio.h>
#include <string.h>

#include "npu_enums.h"
#include "npu_plan.h"
#include "opts.h"

enum img_opt {
    IMG_MODEL, IMG_CHIP, IMG_TP, IMG_STAGES, IMG_MICRO_BATCHES, IMG_INSTANCES, IMG_MAX_BATCH,
    IMG_MAX_TOKENS, IMG_MAX_SEQ, IMG_TILE_ROWS, IMG_MOE_ROWS, IMG_MOE_SPILL_ROWS, IMG_EXPERT_SLOTS,
    IMG_KV_BLOCK, IMG_ATTN_BLOCK, IMG_KV_WINDOW, IMG_COMM_SEGMENT, IMG_MOE_UNITS_ROWS,
    IMG_KV_SRAM_BLOCKS, IMG_KV_RING_ROWS, IMG_PARTITION, IMG_ROUTING, IMG_ROUTING_SEED,
    IMG_KV_SPLIT, IMG_WEIGHTS, IMG_STAGE_BUFFERS, IMG_ATTN_DEEP, IMG_EXPERT_PLACEMENT,
    IMG_EXPERT_REPLICAS, IMG_PLACEMENT, IMG_MODE, IMG_DTYPE, IMG_ROLES, IMG_DISAGG, IMG_SEARCH,
};

/* A size or count the planner otherwise chooses: at least 1 (leaving the option out is how
   to ask for the planner's default; 0 is refused rather than read as it). */
static uint32_t *u32_field(struct npu_plan_request *r, enum img_opt id)
{
    switch (id) {
    case IMG_TP: return &r->tp;
    case IMG_STAGES: return &r->stages;
    case IMG_MICRO_BATCHES: return &r->micro_batches;
    case IMG_INSTANCES: return &r->instances;
    case IMG_MAX_BATCH: return &r->max_batch;
    case IMG_MAX_TOKENS: return &r->max_tokens;
    case IMG_MAX_SEQ: return &r->max_seq;
    case IMG_TILE_ROWS: return &r->tile_rows;
    case IMG_MOE_ROWS: return &r->moe_rows;
    case IMG_MOE_SPILL_ROWS: return &r->moe_spill_rows;
    case IMG_EXPERT_SLOTS: return &r->expert_slots;
    case IMG_KV_BLOCK: return &r->kv_block;
    case IMG_ATTN_BLOCK: return &r->attn_block;
    case IMG_KV_WINDOW: return &r->kv_window;
    case IMG_COMM_SEGMENT: return &r->comm_segment;
    default: return NULL;
    }
}

/* "mn", "k", "2d", "auto" for every GEMM, "ep" for both expert GEMMs, or a list
   "qkv=mn,o=2d,expert_up=ep,...". */
static int parse_partition(const char *v, uint32_t *part)
{
    static const struct { const char *word; uint32_t value; } words[] = {
        { "auto", NPU_PLAN_AUTO }, { "mn", NPU_PART_MN }, { "k", NPU_PART_K },
        { "2d", NPU_PART_2D }, { "ep", NPU_PART_EP },
    };
    const int nwords = (int)(sizeof(words) / sizeof(words[0]));
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", v);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        const char *val = eq ? eq + 1 : tok;
        int which = -1, g = -1;
        for (int i = 0; i < nwords; i++)
            which = strcmp(val, words[i].word) == 0 ? i : which;
        if (eq) {
            *eq = '\0';
            for (int i = 0; i < NPU_GEMM_COUNT; i++)
                g = strcmp(tok, npu_gemm_name((enum npu_gemm)i)) == 0 ? i : g;
        }
        if (which < 0 || (eq && g < 0))
            return npuctl_usage_error(
                "--partition: '%s' (%s)", v,
                "mn|k|2d|auto|ep, or GEMM=mn|k|2d|auto|ep,... with "
                "GEMM one of qkv, o, ffn_up, ffn_down, expert_up, expert_down, lm_head");
        const bool ep_all = !eq && words[which].value == NPU_PART_EP;
        for (int i = 0; i < NPU_GEMM_COUNT; i++)
            if (ep_all ? i == NPU_GEMM_EXP_UP || i == NPU_GEMM_EXP_DOWN : g < 0 || g == i)
                part[i] = words[which].value;
    }
    return 0;
}

static int parse_routing(const char *v, struct npu_plan_request *req)
{
    if (strcmp(v, "uniform") == 0) {
        req->routing = NPU_ROUTING_UNIFORM;
        return 0;
    }
    double a = 0;
    if (strncmp(v, "skewed:", 7) != 0)
        return npuctl_usage_error("--routing: '%s' (%s)", v,
                                  "uniform, or skewed:ALPHA with a Zipf exponent 0..4");
    if (npuctl_parse_real("--routing skewed:ALPHA", v + 7, 0.0, 4.0, &a))
        return NPUCTL_EXIT_USAGE;
    req->routing = NPU_ROUTING_SKEWED;
    req->routing_skew_milli = (uint32_t)(a * 1000.0 + 0.5);
    return 0;
}

/* The index of v in the option's metavar "a|b|c", or a usage error. */
static int parse_word(const struct npuctl_opt *opt, const char *v, int *out)
{
    *out = npuctl_opt_word_index(opt, v);
    if (*out >= 0)
        return 0;
    return npuctl_usage_error("%s: unknown value '%s' (%s)", opt->name, v, opt->metavar);
}

/* The options whose value is one word of the metavar. */
static int apply_word(struct npu_plan_request *r, const struct npuctl_opt *opt, const char *v)
{
    int e = 0, rc = parse_word(opt, v, &e);
    if (rc)
        return rc;
    switch ((enum img_opt)opt->id) {
    case IMG_KV_SPLIT: r->kv_split = e; break;
    case IMG_WEIGHTS: r->stream_weights = (uint32_t)e; break;
    case IMG_STAGE_BUFFERS: r->stage_single = e == 0; break;
    case IMG_ATTN_DEEP: r->attn_deep = e; break;
    case IMG_EXPERT_PLACEMENT: r->expert_placement = e; break;
    case IMG_PLACEMENT: r->placement = e; break;
    case IMG_MODE: r->mode = (uint32_t)e; break;
    case IMG_DTYPE: r->dtype = e; break;
    case IMG_ROLES: r->disagg = (uint32_t)e; break;
    default: return NPUCTL_EXIT_USAGE;
    }
    return 0;
}

/* The options with a value of their own form. */
static int apply_other(struct npu_plan_request *r, const struct npuctl_opt *opt, const char *v)
{
    uint32_t n = 0;
    uint64_t s = 0;
    int rc = 0;
    switch ((enum img_opt)opt->id) {
    case IMG_MOE_UNITS_ROWS: /* 0: never */
        rc = npuctl_parse_u32(opt->name, v, 0, INT32_MAX, &n);
        r->moe_units_rows = rc ? r->moe_units_rows : (int32_t)n;
        return rc;
    case IMG_EXPERT_REPLICAS:
        rc = npuctl_parse_u32(opt->name, v, 1, NPU_EXPERT_REPLICAS_MAX, &n);
        r->expert_replicas = rc ? r->expert_replicas : (int)n;
        return rc;
    case IMG_KV_SRAM_BLOCKS: /* 0: no pool */
        if (strcmp(v, "auto") == 0) {
            r->kv_sram_blocks = -1;
            return 0;
        }
        rc = npuctl_parse_u32(opt->name, v, 0, UINT32_MAX, &n);
        r->kv_sram_blocks = rc ? r->kv_sram_blocks : (int64_t)n;
        return rc;
    case IMG_KV_RING_ROWS:
        rc = npuctl_parse_u32(opt->name, v, 1, UINT32_MAX, &n);
        r->kv_ring_rows = rc ? r->kv_ring_rows : n;
        return rc;
    case IMG_ROUTING_SEED:
        rc = npuctl_parse_uint(opt->name, v, 0, UINT64_MAX, &s);
        r->routing_seed = rc ? r->routing_seed : s;
        return rc;
    case IMG_PARTITION: return parse_partition(v, r->partition);
    case IMG_ROUTING: return parse_routing(v, r);
    default: return apply_word(r, opt, v);
    }
}

static int apply_image_opt(void *ctx, const struct npuctl_opt *opt, const char *v, char *err,
                           size_t errlen)
{
    struct npuctl_image_opts *o = ctx;
    (void)err, (void)errlen; /* the number parsers print their refusals */
    uint32_t *field = u32_field(&o->req, (enum img_opt)opt->id);
    if (field)
        return npuctl_parse_u32(opt->name, v, 1, UINT32_MAX, field);
    if (opt->id == IMG_MODEL)
        o->model = v;
    else if (opt->id == IMG_CHIP)
        o->chip = v;
    else if (opt->id == IMG_DISAGG)
        o->disagg = v;
    else if (opt->id == IMG_SEARCH) {
        int word = 0, rc = parse_word(opt, v, &word); /* one word: disagg */
        o->search = rc == 0;
        return rc;
    } else
        return apply_other(&o->req, opt, v);
    return 0;
}

void npuctl_image_opts_init(struct npuctl_image_opts *o)
{
    *o = (struct npuctl_image_opts){ .chip = NPUCTL_DEFAULT_CHIP };
    npu_plan_request_init(&o->req);
}

#define C_PLAN NPUCTL_CMD_BIT(NPUCTL_CMD_PLAN)
#define C_IMAGE NPUCTL_CMD_BIT(NPUCTL_CMD_BUILD_IMAGE)
#define C_BMODEL NPUCTL_CMD_BIT(NPUCTL_CMD_BENCH_MODEL)
#define C_SERVE NPUCTL_CMD_BIT(NPUCTL_CMD_SERVE)
#define C_ALL (C_PLAN | C_IMAGE | C_BMODEL | C_SERVE)
#define C_SHAPE (C_PLAN | C_IMAGE | C_SERVE) /* bench model's shapes set these */

static const struct npuctl_opt image_opts[] = {
    { "--model", NULL, "NAME|PATH", NULL,
      "the model: models/configs/NAME.toml or models/tiny/NAME.toml (npuctl models lists "
      "them), or a config file; required", IMG_MODEL, C_ALL & ~C_SERVE },
    { "--model", NULL, "NAME|PATH", NPUCTL_SERVE_DEFAULT_MODEL,
      "the model: models/configs/NAME.toml or models/tiny/NAME.toml (npuctl models lists "
      "them), or a config file", IMG_MODEL, C_SERVE },
    { "--chip", NULL, "NAME|PATH", NPUCTL_DEFAULT_CHIP,
      "chip config: models/chips/NAME.toml (npuctl chips lists them), or a file", IMG_CHIP,
      C_ALL },
    { "--mode", NULL, "functional|performance", "functional",
      "engine mode the image is built for: performance keeps the timing and carries no "
      "weights", IMG_MODE, C_SHAPE },
    { "--dtype", NULL, "fp32|bf16", NULL,
      "element type of weights and activations (default: fp32 functional, bf16 "
      "performance)", IMG_DTYPE, C_ALL },
    { "--tp", NULL, "N", NULL,
      "ranks of the tensor-parallel group (default: every core; serve: 4 for a model "
      "narrower than 512, the tiny ones)", IMG_TP, C_ALL },
    { "--stages", NULL, "S", "1", "pipeline stages: S groups of tp cores, L/S layers each",
      IMG_STAGES, C_ALL },
    { "--micro-batches", NULL, "M", "1",
      "with --stages: each iteration's rows in M parts that follow each other through the "
      "stages, so the stages overlap (a prompt may be cut; at most --max-tokens); with "
      "--roles disagg: the parts that ping-pong between attention and experts (at most 16)",
      IMG_MICRO_BATCHES, C_ALL },
    { "--instances", NULL, "I", NULL,
      "I copies of the plan in bands of cols/I columns, each with its own KV cache "
      "(serving with --sched pd-disagg; default: one)", IMG_INSTANCES, C_ALL },
    { "--placement", NULL, "linear|interleaved|ring|mesh2d", NULL,
      "the ranks' places on the mesh (default: mesh2d where a GEMM is 2-D, else ring)",
      IMG_PLACEMENT, C_ALL },
    { "--partition", NULL, "P", NULL,
      "mn|k|2d|ep|auto for every GEMM, or GEMM=P,... with GEMM one of qkv, o, ffn_up, "
      "ffn_down, expert_up, expert_down, lm_head (default auto: qkv and o 2d on a grid of "
      "2 x 2 or more, experts ep with at least as many experts as ranks; else k below the "
      "hidden size per iteration, mn from it; 2d: the R x C grid of --placement mesh2d, "
      "docs/images.md)", IMG_PARTITION, C_ALL },
    { "--max-batch", NULL, "B", NULL, "requests per iteration (default: 8)", IMG_MAX_BATCH,
      C_SHAPE },
    { "--max-tokens", NULL, "T", NULL, "rows (tokens) per iteration (default: 512)",
      IMG_MAX_TOKENS, C_SHAPE },
    { "--max-seq", NULL, "S", NULL,
      "positions of a request's context (default: min(4096, the model's max_position))",
      IMG_MAX_SEQ, C_SHAPE },
    { "--tile-rows", NULL, "R", NULL,
      "rows of a GEMM tile (default: the matrix array's rows, at least 64)", IMG_TILE_ROWS,
      C_ALL },
    { "--kv-block", NULL, "K", NULL,
      "positions of a KV-cache block (default: 128 with split attention, else 256)",
      IMG_KV_BLOCK, C_ALL },
    { "--kv-sram-blocks", NULL, "N|auto", "0",
      "KV blocks per core in SRAM, the rest of the cache in the HBM ring; auto: what SRAM "
      "has left after the weights; 0: no pool", IMG_KV_SRAM_BLOCKS, C_ALL & ~C_SERVE },
    { "--kv-sram-blocks", NULL, "N|auto", "auto",
      "KV blocks per core in SRAM, the rest of the cache in the HBM ring; auto: what SRAM "
      "has left after the weights; 0: no pool", IMG_KV_SRAM_BLOCKS, C_SERVE },
    { "--kv-ring-rows", NULL, "N", NULL,
      "rows of the KV ring (default: max-batch x the rows of max-seq positions)",
      IMG_KV_RING_ROWS, C_ALL },
    { "--kv-split", NULL, "off|on", NULL,
      "on: the KV cache and attention are split over the tp ranks (cache block b of "
      "request q on rank (b + s_q) mod tp, s_q the ids in bit-reversed order; the ranks "
      "combine their softmax states), so each rank holds 1/tp of the cache (default: on "
      "over more than one rank)", IMG_KV_SPLIT, C_ALL },
    { "--kv-window", NULL, "N", NULL,
      "split attention: every rank keeps the keys and values of the last N rows of a step "
      "and runs attention over them query-parallel (a multiple of --tile-rows; default: "
      "the step's rows, at most 1 MiB of K and V, widened up to 8 MiB where SRAM is left "
      "once the plan fits)", IMG_KV_WINDOW, C_ALL },
    { "--attn-block", NULL, "A", NULL,
      "positions per attention step, a multiple of the KV block; larger steps mean fewer, "
      "larger GEMMs and vector ops over long contexts (default: 3 blocks with split "
      "attention and the default KV block, else one)", IMG_ATTN_BLOCK, C_ALL },
    { "--moe-rows", NULL, "G", NULL,
      "rows of one MoE group under expert parallelism: the experts run over every row of a "
      "group routed to them (default: max-tokens, halved until it fits)", IMG_MOE_ROWS,
      C_ALL },
    { "--moe-spill-rows", NULL, "N", NULL,
      "EP with the residual in HBM and several MoE groups: rows of the HBM spill the MoE "
      "over the layer keeps its groups' rows in; fewer serve a layer in waves (default: "
      "the iteration's worst case, halved while HBM is short)", IMG_MOE_SPILL_ROWS, C_ALL },
    { "--moe-units-rows", NULL, "N", NULL,
      "EP: a MoE op of at most N rows runs by units, every touched expert's units dealt "
      "over all ranks (0: never; default: max-batch, capped at a tile)", IMG_MOE_UNITS_ROWS,
      C_ALL },
    { "--expert-slots", NULL, "N", NULL,
      "EP: staged experts stream through N buffers of one expert matrix each, loaded ahead "
      "of their GEMMs (default: the busiest rank's expert matrices if they fit, else 3)",
      IMG_EXPERT_SLOTS, C_ALL },
    { "--expert-placement", NULL, "contiguous|balanced", NULL,
      "EP: whole experts in order (contiguous), or slices of the experts the routing model "
      "makes popular spread so that every rank serves about the mean (default: balanced in "
      "performance mode under skewed routing, else contiguous)", IMG_EXPERT_PLACEMENT,
      C_ALL },
    { "--expert-replicas", NULL, "N", NULL,
      "EP, balanced placement: at most N copies of one expert, each serving a share of its "
      "rows, where the routing model makes it hotter than slices alone can balance (1: "
      "none; default 4, the most)", IMG_EXPERT_REPLICAS, C_ALL },
    { "--routing", NULL, "uniform|skewed:ALPHA", "uniform",
      "performance mode's expert choice: uniform, or Zipf with exponent ALPHA (0..4)",
      IMG_ROUTING, C_ALL },
    { "--routing-seed", NULL, "N", "1", "seed of the routing model", IMG_ROUTING_SEED,
      C_ALL },
    { "--comm-segment", NULL, "BYTES", NULL,
      "pipelining segment of the collectives (default: 64 KiB on cores of 16 MiB SRAM or "
      "more, else 16 KiB)", IMG_COMM_SEGMENT, C_ALL },
    { "--weights", NULL, "auto|stream", "auto",
      "auto: resident in SRAM when they fit; stream: staged from HBM layer by layer even "
      "so", IMG_WEIGHTS, C_ALL },
    { "--stage-buffers", NULL, "1|2", "2",
      "staged weights: 2 loads the next layer's non-expert shares into a second copy "
      "while a layer runs, where SRAM holds it (else one copy, which a MoE layer refills "
      "after its last router); 1: each layer loads its own", IMG_STAGE_BUFFERS, C_ALL },
    { "--attn-deep", NULL, "off|on", NULL,
      "on: two tiles' attention in flight, the O and QKV GEMMs' chunks outside attention's "
      "scratch, so tile i's collectives run beside tile i + 1's GEMMs and softmax steps "
      "(a 2D O GEMM over tp > 1 ranks; default: on where nothing else the planner chose "
      "changes)", IMG_ATTN_DEEP, C_ALL },
    { "--roles", NULL, "colocated|disagg", "colocated",
      "disagg: attention/expert disaggregation, executed: with --instances I, the first "
      "I - 1 instances are attention replicas (requests dealt round them) and the last band "
      "serves every expert; each iteration in --micro-batches parts that ping-pong between the two "
      "(a MoE model, experts ep; serve: a scheduler a replica, requests dealt round them)",
      IMG_ROLES, C_ALL },
    { "--disagg", NULL, "KEY=VALUE,...", NULL,
      "attention/expert disaggregation of a MoE model's decoding, the latency model's plan "
      "(--roles disagg runs the executable form): keys replicas, tp-a, experts (expert cores, whole columns), m (micro-batches), "
      "batch, context, slo-ms; prints both roles, what each core holds and the "
      "MegaScale-Infer latency model's estimate; other plan options but --dtype are not "
      "used (defaults: tp-a the mesh's rows or the largest divisor dividing the heads, "
      "experts about half the columns, replicas on the rest, m 3, batch 64 a replica, "
      "context 2048, slo-ms 150)", IMG_DISAGG,
      C_PLAN },
    { "--search", NULL, "disagg", NULL,
      "search the disaggregated plans (MegaScale-Infer's Algorithm 1) for the most "
      "tokens/s within the TBT SLO: plan, over the latency model (--disagg's slo-ms, "
      "context and m, default 4); bench model, over the simulator (the plans the firmware "
      "runs, each measured; --slo-ms)", IMG_SEARCH, C_PLAN | C_BMODEL },
};

const struct npuctl_opt_group npuctl_plan_group = {
    "plan options", image_opts, sizeof(image_opts) / sizeof(image_opts[0]), apply_image_opt,
};
