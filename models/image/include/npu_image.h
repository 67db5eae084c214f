/* SPDX-License-Identifier: MIT */
/*
 * Model images (docs/images.md): what `npuctl build-image` writes and the `model` firmware
 * reads after `npuctl flash` placed it at the base of HBM. Plain C without allocation, shared
 * by the host planner and the firmware, so both check an image the same way.
 *
 * An image is one little-endian file:
 *   header (struct npu_image_header, fixed size)
 *   the model config text (TOML, as models/configs/ has it)
 *   the tensor table: one struct npu_image_tensor per (tensor, rank share)
 *   the core table: one struct npu_image_core per NPU core of the chip
 *   the layer programs: struct npu_prog_op, each core's run from its core entry
 *   functional images only: the weights, every share at its hbm_off (bf16-rounded fp32)
 * Every offset is from the image's first byte; so is every hbm_off (the image sits at the
 * base of HBM, and HBM beyond the file holds what the image reserves: in performance
 * images the weights, whose bytes are never written, and in both the KV cache segments and
 * spilled activations).
 */
#ifndef NPU_IMAGE_H
#define NPU_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "npu_limits.h"

#define NPU_IMAGE_MAGIC 0x31474d4955504e00ull /* "\0NPUIMG1" read little-endian */
#define NPU_IMAGE_VERSION 15u
#define NPU_IMAGE_ALIGN 4096u
/* Firmware (code, data, stack) owns the first NPU_IMAGE_APP_BASE bytes of every core's
   SRAM; the plan's SRAM offsets start there. */
#define NPU_IMAGE_APP_BASE 0x100000u
#define NPU_IMAGE_NOWHERE UINT64_MAX /* sram_off of a tensor that stays in HBM */
#define NPU_IMAGE_IDLE UINT32_MAX    /* rank of a core outside the plan */
/* Row runs (one request's rows each) one iteration carries: the limit of the plan's
   max_batch, of the schedulers (RT_SCHED_RUNS_MAX), of the mailbox (RT_MB_RUNS_MAX) and of
   the interpreter (EXEC_RUNS_MAX), which are all this constant. */
#define NPU_IMAGE_RUNS_MAX NPU_BATCH_MAX /* npu_limits.h */
/* The collectives of a model run: the pipelining segment (npu_plan.comm_segment; the plan
   reserves NOC_COMM_SCRATCH_BYTES of it), and the mailboxes the NoC driver keeps at the
   top of SRAM (it checks noc_reserved_bytes() fits). The planner's default segment: large
   where SRAM is (fewer, larger transfers: a collective's descriptors are the emulator's
   work), small on small cores. */
#define NPU_IMAGE_COMM_SEGMENT_SMALL 16384u
#define NPU_IMAGE_COMM_SEGMENT_LARGE 65536u
#define NPU_IMAGE_COMM_SEGMENT_LARGE_SRAM (16ull << 20) /* cores of 16 MiB or more */
/* Expert parallelism dispatches over the NoC with an all-to-all-v whose count exchange
   (noc_a2av_mailbox_words) must fit the driver's mailbox (noc_m2n_pairs in
   noc/coll_sizes.h): the words of it. */
#define NPU_IMAGE_A2A_COUNTS(ncores) \
    ((ncores) >= NPU_COUNTS_LARGE_CORES ? (uint64_t)NPU_COUNTS_MAX : (uint64_t)NPU_COUNTS_SMALL_MAX)
#define NPU_IMAGE_NOC_RESERVE(ncores) \
    (4ull * (64ull * (ncores) + 4ull * NPU_IMAGE_A2A_COUNTS(ncores)) + 0x10000ull)

/* The weight GEMMs whose partition a plan chooses (the NPU paper's Table 2). */
enum npu_gemm {
    NPU_GEMM_QKV,      /* q, k, v projections */
    NPU_GEMM_O,        /* attention output projection */
    NPU_GEMM_FFN_UP,   /* dense gate and up */
    NPU_GEMM_FFN_DOWN, /* dense down */
    NPU_GEMM_EXP_UP,   /* expert gate and up */
    NPU_GEMM_EXP_DOWN, /* expert down */
    NPU_GEMM_LM_HEAD,
    NPU_GEMM_COUNT,
};

/* MN: a rank holds rows [r N / p, (r + 1) N / p) of W[N][K] and an all-gather completes
   Y; K: columns [r K / p, ...) of W, and an all-reduce sums the partial Y. 2D: the ranks
   are the R x C grid of a mesh2d group (R, C = rect_rows, rect_cols; rank r = i C + j) and
   rank (i, j) holds the block [i N / R, ...) x [j K / C, ...) of W; an all-reduce along grid
   row i completes Y[:, N_i], an all-gather along grid column j completes Y. EP (expert
   GEMMs only, both of them): expert parallelism, rank r holds whole experts
   [r E / p, (r + 1) E / p) and runs the rows routed to them; one all-reduce of the partial
   MoE outputs is the combine (docs/images.md, "Expert parallelism"). */
enum npu_partition { NPU_PART_MN = 1, NPU_PART_K = 2, NPU_PART_2D = 3, NPU_PART_EP = 4 };

enum npu_image_mode { NPU_IMAGE_FUNCTIONAL = 0, NPU_IMAGE_PERFORMANCE = 1 };

/* Element types of weights and activations. */
enum npu_image_dtype { NPU_IMAGE_FP32 = 0, NPU_IMAGE_BF16 = 1 };

/* Performance mode: where the router's choices come from (there are no activations). */
enum npu_routing { NPU_ROUTING_UNIFORM = 0, NPU_ROUTING_SKEWED = 1 };

/* npu_plan.stage_double. */
enum npu_stage { NPU_STAGE_ONE = 0, NPU_STAGE_DOUBLE = 1, NPU_STAGE_OWN = 2 };

struct npu_plan {
    uint32_t tp;                 /* ranks of the tensor-parallel group */
    uint32_t stages;             /* pipeline stages (1: every layer on every rank) */
    uint32_t placement;          /* enum noc_placement of the group */
    uint32_t rect_row0, rect_col0, rect_rows, rect_cols; /* the group's cores */
    uint32_t partition[NPU_GEMM_COUNT]; /* enum npu_partition per GEMM */
    uint32_t mode;               /* enum npu_image_mode */
    uint32_t dtype;              /* enum npu_image_dtype of weights and activations */
    uint32_t max_batch;          /* requests in one iteration */
    uint32_t max_tokens;         /* rows (new tokens, all requests) in one iteration */
    uint32_t tile_rows;          /* rows computed at a time inside a layer */
    uint32_t max_seq;            /* positions per request (prompt + generated) */
    uint32_t kv_block;           /* positions per attention block (online softmax) */
    uint32_t routing;            /* enum npu_routing (performance mode) */
    uint32_t routing_skew_milli; /* skewed: Zipf exponent x 1000 of expert popularity */
    /* Pipeline micro-batches: each stage runs an iteration's runs in this many parts (the
       parts' rows in turn), handing a part on as soon as it is through, so that the stages
       work on different parts at once (GPipe-style, within an iteration); or, with disagg,
       the parts that ping-pong between attention and experts. 0 or 1: the iteration as
       one part; more needs stages > 1 or disagg. */
    uint32_t micro_batches;
    uint64_t routing_seed;
    uint32_t weights_resident;   /* 1: every share in SRAM; 0: staged per layer from HBM */
    uint32_t kv_in_sram;         /* 1: the KV ring in SRAM; 0: in HBM */
    uint32_t x_in_sram;          /* 1: the iteration's residual rows in SRAM; 0: in HBM */
    uint32_t kv_sram_blocks;     /* KV blocks of kv_block positions in each core's SRAM pool */
    uint64_t kv_ring_rows;       /* rows of the KV ring (SRAM or HBM, kv_in_sram): positions,
                                    or a rank's local rows when kv_split (npu_layout.h) */
    /* Pipeline stages: stage s runs layers [s x stage_layers, (s + 1) x stage_layers) on
       its own tp-rank group; the last stage also runs the head. The stages' rectangles
       fill a grid of stage_grid_cols rectangles per row from (rect_row0, rect_col0),
       row by row and back and forth, so that consecutive stages are neighbours
       (npu_plan_stage_origin). */
    uint32_t stage_layers;
    uint32_t stage_grid_cols;
    /* Instances (data-parallel replicas, for PD disaggregation: docs/serving.md): instance
       i is the plan above shifted i x instance_cols columns right, with its own KV cache and
       residual rows; every instance reads the same weight shares in HBM. */
    uint32_t instances;          /* >= 1 */
    uint32_t instance_cols;      /* columns of each instance's band */
    /* Positions per attention step (online softmax): a multiple of kv_block; a step gathers
       the K and V of up to attn_block / kv_block cache blocks into one tile, so long contexts
       take fewer, larger GEMMs and vector ops (docs/images.md, "Attention steps"). */
    uint32_t attn_block;
    /* 1: the KV cache and attention are split over the tp ranks, position-cyclic: cache
       block b (kv_block positions) is held by rank b % tp only, each rank attends over its
       own positions and the ranks combine their online-softmax states (docs/images.md,
       "Split attention"). The control core's blocks are then stripes of tp x kv_block
       positions, one pool block on every rank. 0: every rank holds every position. */
    uint32_t kv_split;
    uint32_t comm_segment;       /* bytes per pipelining segment of the collectives: a
                                    multiple of 4 in [64, NOC_COMM_SEGMENT_MAX] */
    /* Rows of one MoE group under expert parallelism: the MoE op routes, dispatches, runs
       each expert over every row routed to it and combines, over groups of up to moe_rows
       of the iteration's rows at once (docs/images.md, "MoE groups"), so an expert's
       weights pass its matrix engine once per group, not once per tile. tile_rows without
       EP (or with tp 1); with EP >= tile_rows (xt holds a group when the
       residual rows are in HBM). */
    uint32_t moe_rows;
    /* Staged experts under expert parallelism stream through a ring of expert_slots buffers
       of one expert matrix (gate, up or down) each, loaded ahead of the GEMMs that read them
       (docs/images.md, "Expert ring"); 0: every expert the rank holds has its own slot of
       all three (no EP, or tp 1). At most NPU_EXPERT_SLOTS_MAX. */
    uint32_t expert_slots;
    /* Expert placement under EP (docs/images.md, "Expert placement"): each expert's
       intermediate width is cut into expert_units units (rows of gate and up, columns of
       down), and the image's expert map gives every rank, per layer, slices of consecutive
       units of experts (a whole expert: all units), each rank the same number of units.
       Contiguous placement gives rank r whole experts [r E / p, (r + 1) E / p); balanced
       placement splits the experts the routing model makes popular over several ranks so
       that no rank serves much more than the mean. 0 without EP. */
    uint32_t expert_units;
    uint32_t expert_placement;   /* enum npu_expert_placement */
    uint32_t expert_fanout;      /* at most this many slices a row's k choices reach (k if
                                    every expert is whole) */
    uint32_t expert_rank_slices; /* at most this many slices on one rank in a layer */
    /* Split attention's window: every rank keeps the keys and values of the op's last
       kv_window rows and runs the attention over them query-parallel (docs/images.md,
       "Split attention"); a multiple of tile_rows. 0 unsplit. */
    uint32_t kv_window;
    /* The MoE over the layer (npu_layout.h, npu_moe_layer_wide): rows the spill in HBM
       holds; a layer whose groups would pass it serves and combines in waves. 0 otherwise. */
    uint32_t moe_spill_rows;
    /* The MoE by units (docs/images.md, "MoE by units"; model_moe_units.c): under expert
       parallelism a MoE op of at most moe_units_rows rows (a decode iteration's) runs on
       every rank over all its rows, each touched expert cut into units of
       moe_intermediate_size / (expert_units x moe_unit_split) columns, the units dealt
       round the ranks whoever holds them, and the partial outputs all-reduced; needs every
       rank to hold a slice in every layer and staged experts with a ring of at least 3
       slots. 0 and 0: never. */
    uint32_t moe_units_rows;
    uint32_t moe_unit_split;
    /* enum npu_stage, how staged weights are buffered (docs/images.md, "Weights"):
       NPU_STAGE_DOUBLE, the staging buffer holds a second copy of the largest layer's
       non-expert shares after the first layer's whole map, and a layer's STAGE loads the
       next layer's non-expert shares there (odd layers in the second copy) on the second
       DMA queue while the layer runs (only with staged weights, 2 or more layers a stage);
       NPU_STAGE_ONE, one copy, into which a MoE layer loads the next layer's shares once
       its last router GEMM has read its own; NPU_STAGE_OWN, one copy, each layer loads its
       own (`--stage-buffers 1`). */
    uint32_t stage_double;
    /* 1: two tiles' attention in flight (docs/images.md, "Two tiles' attention in flight"):
       the 2D O and the QKV GEMMs' chunks lie outside attention's scratch (npu_layout.h,
       yo), so tile i's collectives run beside tile i + 1's GEMMs and steps. Only with a
       2D O over tp > 1 ranks; by default the planner sets it where nothing else it chose
       changes. */
    uint32_t attn_deep;
    /* Under expert parallelism over tp > 1: the most slices in one layer's expert map (a
       dispatch's buckets; at most NPU_EXPERT_MAP_MAX), which sizes the dispatch's counts
       and plan in SRAM. 0 otherwise. */
    uint32_t expert_map_slices;
    /* Attention/expert disaggregation (docs/images.md, "Disaggregated execution"; the
       MegaScale-Infer paper): 1: instances 0 .. instances - 2 are attention replicas (each
       with its own requests and KV cache; its MoE ops route and send their rows to the
       experts), and the last instance, of the same shape, serves every expert: it holds the
       expert shares its ranks would hold under expert parallelism, runs only the MoE ops,
       and takes every replica's rows at once over the pair group of both roles. Each
       replica's iteration runs in micro_batches parts that ping-pong with the experts
       (model_disagg.c). 0: every core runs attention and its experts. */
    uint32_t disagg;
    /* The MoE over the layer: 1: the spill has a half per layer parity, so that a layer's
       combines may run inside the next layer's first pass (npu_layout.h,
       npu_moe_spill_layout); the planner sets it unless HBM is short (then one half) or
       routing is skewed (performance mode: the firmware does not defer there). 0: one. */
    uint32_t moe_spill_parity;
};
_Static_assert(offsetof(struct npu_plan, routing_seed) ==
                       offsetof(struct npu_plan, micro_batches) + 4 &&
                   sizeof(struct npu_plan) == offsetof(struct npu_plan, moe_spill_parity) + 4,
               "struct npu_plan has no padding (the planner compares plans with memcmp)");
#define NPU_EXPERT_SLOTS_MAX 8u
#define NPU_EXPERT_UNITS_MAX 8u
#define NPU_EXPERT_MAP_MAX 1024u /* slices of one layer (small-256's balanced map: 532) */
#define NPU_EXPERT_REPLICAS_MAX 4u /* copies of one expert in one layer */

enum npu_expert_placement { NPU_EXPERTS_CONTIGUOUS = 0, NPU_EXPERTS_BALANCED = 1 };

/* One slice of the expert map: units [unit0, unit0 + units) of copy `rep` of `expert` in
   `layer`, held by `rank`. A hot expert may be held in `reps` copies (replicas), each cut into
   slices that cover its units once; a row's choice of the expert goes to the slices of one
   copy only (npu_expert_replica: its row in the group modulo reps). The map lists the slices
   layer by layer, each layer's rank by rank (a rank's in the order its tensors hold them); a
   slice's index in its layer is its dispatch bucket. */
struct npu_image_expert_slice {
    uint16_t layer;
    uint16_t rank;
    uint16_t expert;
    uint8_t unit0, units;
    uint8_t rep, reps; /* this slice's copy of the expert, of reps (1: not replicated) */
};
_Static_assert(sizeof(struct npu_image_expert_slice) == 10, "the image's expert map entry");

/* The copy of a replicated expert (reps copies) that serves the choice of the group's row
   `row`: rows alternate over the copies, so each serves about 1/reps of the expert's rows
   (the dispatch, the combine and the routing model's replays all decide alike). */
static inline uint32_t npu_expert_replica(uint32_t row, uint32_t reps)
{
    return reps > 1 ? row % reps : 0;
}

/* One rank's share of one tensor (experts: `blocks` shares, block_bytes apart). */
struct npu_image_tensor {
    uint32_t kind;          /* enum model_tensor_kind */
    uint32_t layer;
    uint32_t rank;          /* NPU_IMAGE_IDLE: not split (every rank reads the same copy) */
    uint32_t blocks;        /* experts: E, or under EP the rank's slices of the expert map
                               (maybe 0), each a whole expert's block_bytes apart, the slice
                               at its start ([w][d] of gate and up, [d][w] of down, w its
                               width); else 1 */
    uint32_t rows, cols;    /* one block's share: [rows][cols] */
    uint32_t row0, col0;    /* where the share starts in the whole tensor's block */
    uint32_t block0;        /* the first block held: under EP the index of the rank's first
                               slice in its layer's expert map */
    uint32_t reserved;      /* 0 */
    uint64_t hbm_off;       /* image offset of the share (all blocks) */
    uint64_t sram_off;      /* offset from the core's SRAM base, or NPU_IMAGE_NOWHERE */
    uint64_t block_bytes;
};

/* One NPU core's part of the plan; SRAM offsets from the core's SRAM base. */
struct npu_image_core {
    uint32_t rank;          /* NPU_IMAGE_IDLE: outside the plan */
    uint32_t stage;
    uint32_t instance;      /* of plan.instances */
    uint32_t reserved;      /* 0 */
    uint32_t prog_first, prog_count; /* its ops in the program table */
    uint64_t sram_act, sram_act_bytes;     /* tile buffers and scratch */
    uint64_t sram_stage, sram_stage_bytes; /* staged layer weights (0 bytes if resident) */
    uint64_t sram_weights, sram_weights_bytes; /* resident weights */
    uint64_t kv_off, kv_bytes;  /* KV ring: SRAM offset or image (HBM) offset */
    uint64_t kv_pool_off, kv_pool_bytes; /* KV block pool: SRAM offset (0 bytes: none) */
    uint64_t x_off, x_bytes;    /* the iteration's residual rows: SRAM or HBM offset (in
                                   HBM followed by the MoE spill, npu_moe_spill_layout) */
    uint64_t comm_scratch;      /* SRAM offset of the collectives' scratch */
    uint64_t sram_end;          /* the first SRAM offset the plan does not use */
};

/* Layer-program operations: a core runs its ops in order for every iteration. */
enum npu_prog_kind {
    NPU_OP_EMBED = 1,     /* rows' token embeddings into the residual */
    NPU_OP_STAGE = 2,     /* stage layer l's weight shares (non-resident plans) */
    NPU_OP_ATTENTION = 3, /* norm, QKV, q/k norm, RoPE, KV store, attention, O, residual */
    NPU_OP_FFN = 4,       /* norm, dense SwiGLU, residual */
    NPU_OP_MOE = 5,       /* norm, router, top-k, grouped experts, combine, residual */
    NPU_OP_HEAD = 6,      /* final norm, LM head and argmax of each request's last row */
    NPU_OP_SEND = 7,      /* residual rows after layer `layer` to the next stage's rank */
    NPU_OP_RECV = 8,      /* residual rows after layer `layer` from the previous stage */
};

struct npu_prog_op {
    uint16_t kind;        /* enum npu_prog_kind */
    uint16_t flags;       /* NPU_OP_SLIDING: the layer attends over a window */
    uint32_t layer;
};
#define NPU_OP_SLIDING 1u

struct npu_image_header {
    uint64_t magic;
    uint32_t version;
    uint32_t header_bytes;       /* sizeof(struct npu_image_header) */
    uint64_t file_bytes;
    uint64_t checksum;           /* FNV-1a 64 of the file with this field zero */
    char chip_name[64];
    uint32_t mesh_rows, mesh_cols;
    uint64_t sram_bytes, hbm_bytes;
    uint32_t sa_rows, sa_cols;
    char model_name[64];
    struct npu_plan plan;
    uint64_t config_off, config_bytes;
    uint64_t tensors_off, tensors_count;
    uint64_t cores_off, cores_count;
    uint64_t prog_off, prog_count;
    uint64_t weights_off, weights_bytes; /* the weights' span (in the file if functional) */
    uint64_t hbm_end;            /* image offset: the end of everything the image claims */
    uint64_t experts_off, experts_count; /* the expert map (EP): npu_image_expert_slice */
};

/* The chip an image is checked against. */
struct npu_image_chip {
    const char *name;
    uint32_t mesh_rows, mesh_cols;
    uint64_t sram_bytes, hbm_bytes;
    uint32_t sa_rows, sa_cols;
    bool performance;            /* the machine runs in performance mode */
};

uint64_t npu_image_fnv1a(uint64_t hash, const void *data, size_t bytes);
#define NPU_IMAGE_FNV_INIT 0xcbf29ce484222325ull

/* The checksum of an image of `bytes` bytes (the header's checksum field counted as 0). */
uint64_t npu_image_checksum(const void *image, uint64_t bytes);

/*
 * Checks an image of `bytes` bytes (all of the file, or at least the header when
 * bytes < header): magic, version, sizes, tables inside the file, checksum, every tensor and
 * core entry within bounds. NPU_OK, or NPU_ERR_FORMAT with a message in err naming what is
 * wrong ("truncated: 1000 of 5000 bytes", "checksum ...", "tensor 12: ...").
 */
int npu_image_check(const void *image, uint64_t bytes, char *err, size_t errlen);

/* Whether the image was built for this chip: NPU_OK or NPU_ERR_INVAL naming the field. */
int npu_image_check_chip(const struct npu_image_header *h, const struct npu_image_chip *chip,
                         char *err, size_t errlen);

/* The GEMM (enum npu_gemm) a tensor kind belongs to, or -1 if no GEMM splits it (norms,
   the router, the embedding: one copy every rank reads). */
int npu_tensor_gemm(uint32_t kind);

/* One rank's share of a tensor: blocks [block0, block0 + blocks) of rows [row0, + rows) x
   cols [col0, + cols) of each block (struct npu_image_tensor's fields). */
struct npu_share {
    uint32_t rank, block0, blocks, rows, cols, row0, col0;
};
/* Rank r's share of a tensor of `kind`, rows x cols whole in `blocks` blocks (experts: E,
   rows = E x a block's), under plan p: the whole, shared (rank NPU_IMAGE_IDLE), for a kind
   no GEMM splits; else block (r / cols_p, r % cols_p) of the grid of rows_p x cols_p ranks
   (MN: tp x 1, K: 1 x tp, 2D: the group's rectangle); under EP the rank's slices of the
   layer's expert map `slices` (in a block as wide as its widest). The planner writes the
   tensor table with it and the image check holds the table to it. */
struct npu_share npu_tensor_share(uint32_t kind, uint32_t rows, uint32_t cols, uint32_t blocks,
                                  const struct npu_plan *p,
                                  const struct npu_image_expert_slice *slices,
                                  uint32_t nslices, uint32_t r);

struct model_config;
/* The GEMM dimensions each partition splits: N (MN) and K (K) of GEMM g (QKV: the
   narrowest of q, k and v), and whether the model has it (dense FFN or experts). */
void npu_gemm_dims(const struct model_config *c, enum npu_gemm g, uint32_t *n, uint32_t *k);
bool npu_gemm_used(const struct model_config *c, enum npu_gemm g);
/* Whether GEMM g's partition splits model c into equal, non-empty shares over plan p's
   ranks (MN: N a multiple of tp, and q for QKV; MN or K: the split dimension at least tp;
   2D: N a multiple of the grid's rows and K of its columns). NPU_OK, or NPU_ERR_RANGE with
   the figures in err. The planner refuses with it; the image check holds images to it. */
int npu_partition_fits(const struct model_config *c, const struct npu_plan *p, enum npu_gemm g,
                       char *err, size_t errlen);

/*
 * The image against its model `c` (parsed from the image's own config text), after
 * npu_image_check passed (npu_image_model.c): the model within npu_limits.h, every core's
 * program exactly its stage's (npu_prog_stage), every tensor entry a part of a tensor of the
 * model, every tensor of the model there for every rank, every core's buffers as large as
 * the interpreter lays them out. NPU_OK, NPU_ERR_FORMAT naming the core, tensor or figure,
 * or NPU_ERR_NOMEM.
 */
int npu_image_check_model(const void *image, const struct model_config *c, char *err,
                          size_t errlen);

/* Stage st's layer program (the same for every rank of the stage): its input (EMBED, or
   RECV of the previous stage's residual rows), per layer STAGE (unless resident), ATTENTION
   (SLIDING on a sliding-window layer) and MOE or FFN, then SEND or HEAD. Writes at most
   NPU_PROG_STAGE_OPS_MAX ops; returns their number. The planner writes programs with it. */
#define NPU_PROG_STAGE_OPS_MAX (3u * NPU_MODEL_LAYERS_MAX + 2u)
uint32_t npu_prog_stage(const struct model_config *c, const struct npu_plan *p, uint32_t st,
                        struct npu_prog_op *ops);

const char *npu_gemm_name(enum npu_gemm g);
const char *npu_partition_name(enum npu_partition p);
/* Whether the plan runs the experts expert-parallel (both expert GEMMs EP). */
bool npu_plan_is_ep(const struct npu_plan *p);
/* Attention/expert disaggregation (plan.disagg): whether core c serves the experts (the last
   instance), and the ranks of the dispatch's group: every replica's tp ranks, then the
   expert instance's (tp without disaggregation). */
bool npu_plan_core_serves_experts(const struct npu_plan *p, const struct npu_image_core *c);
uint32_t npu_plan_ep_ranks(const struct npu_plan *p);
/* EP, contiguous placement: the first of the experts rank r holds, r x E / tp (rank r holds
   [first(r), first(r + 1)); r = tp gives E). */
uint32_t npu_plan_expert_first(const struct npu_plan *p, uint32_t experts, uint32_t rank);
/* Layer l's slices in the expert map of image header h (*n of them; NULL if none). */
const struct npu_image_expert_slice *npu_image_expert_layer(const struct npu_image_header *h,
                                                            uint32_t layer, uint32_t *n);
/* The pipeline stage that holds tensor t (the embedding: 0; final norm, LM head: last). */
uint32_t npu_plan_tensor_stage(const struct npu_plan *p, const struct npu_image_tensor *t);
/* Stage s's rectangle origin in instance `inst`. */
void npu_plan_instance_stage_origin(const struct npu_plan *p, uint32_t inst, uint32_t s,
                                    uint32_t *row0, uint32_t *col0);
/* The mesh position of the first core of stage s's rectangle (instance 0). */
void npu_plan_stage_origin(const struct npu_plan *p, uint32_t s, uint32_t *row0,
                           uint32_t *col0);

#endif
