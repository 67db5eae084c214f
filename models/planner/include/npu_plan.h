/* SPDX-License-Identifier: MIT */
/*
 * The planner (docs/images.md): from a model config, a chip config and a plan request, the
 * image `npuctl build-image` writes: which core is which rank, every tensor's share and
 * where it lives (HBM, and SRAM when it fits), each core's SRAM map, KV-cache segments and
 * layer program. Host only (it allocates). A plan that does not fit is refused with the
 * numbers that do not fit.
 */
#ifndef NPU_PLAN_H
#define NPU_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "model_config.h"
#include "npu_image.h"

#define NPU_PLAN_AUTO 0u /* partition: pick by iteration length against hidden size */

struct npu_plan_request {
    uint32_t tp;                        /* ranks (0: every core of the chip) */
    uint32_t stages;                    /* pipeline stages */
    uint32_t micro_batches;             /* parts of an iteration over the stages (0: 1;
                                           npu_plan.micro_batches) */
    uint32_t instances;                 /* data-parallel instances, each in a band of
                                           mesh_cols / instances columns (0: 1) */
    int placement;                      /* enum noc_placement; -1: mesh2d where a GEMM is
                                           2-D, else ring (npu_plan_auto.c) */
    uint32_t partition[NPU_GEMM_COUNT]; /* enum npu_partition or NPU_PLAN_AUTO */
    uint32_t mode;                      /* enum npu_image_mode */
    int dtype;                          /* enum npu_image_dtype; -1: fp32 functional,
                                           bf16 performance */
    uint32_t max_batch, max_tokens, max_seq; /* 0: defaults (8, 512, 4096 capped by the
                                                model's max_position) */
    uint32_t tile_rows, kv_block;       /* 0: defaults (the array's rows, at least 64; 128
                                           with split attention, else 256) */
    uint32_t moe_rows;                  /* rows of an EP MoE group (npu_plan.moe_rows); 0:
                                           the most that fit, up to max_tokens */
    uint32_t expert_slots;              /* EP expert ring slots (npu_plan.expert_slots); 0:
                                           3 with EP over tp > 1, else none */
    int expert_placement;               /* enum npu_expert_placement; -1: balanced in
                                           performance mode under skewed routing, else
                                           contiguous */
    int expert_replicas;                /* balanced placement: the most copies of one
                                           expert (1: none); -1: NPU_EXPERT_REPLICAS_MAX */
    uint32_t attn_block;                /* positions per attention step, a multiple of
                                           kv_block (0: 3 default blocks with split
                                           attention, else kv_block) */
    int kv_split;                       /* 1: KV cache and attention split over the ranks
                                           (npu_plan.kv_split), 0: not; -1: split over
                                           tp > 1 ranks */
    uint32_t kv_window;                 /* split attention's window rows
                                           (npu_plan.kv_window); 0: the default */
    uint32_t comm_segment;              /* collectives' segment bytes (0: by SRAM size,
                                           NPU_IMAGE_COMM_SEGMENT_*) */
    uint32_t stream_weights;            /* 1: stage weights from HBM even if they fit */
    uint32_t routing, routing_skew_milli;
    uint64_t routing_seed;
    int64_t kv_sram_blocks;             /* KV block pool per core: -1 auto (what SRAM has
                                           left after the weights), 0 none (default) */
    uint64_t kv_ring_rows;              /* KV ring rows; 0: max_batch x the rows of max_seq
                                           positions (npu_kv_local_rows) */
    uint32_t moe_spill_rows;            /* the MoE over the layer's spill rows
                                           (npu_plan.moe_spill_rows); 0: the default */
    uint32_t stage_single;              /* 1: staged weights in one buffer (no double
                                           buffer for the next layer's) */
    int32_t moe_units_rows;             /* the MoE by units up to this many rows
                                           (npu_plan.moe_units_rows); 0: never; -1: the
                                           default */
    uint32_t disagg;                    /* 1: attention/expert disaggregation
                                           (npu_plan.disagg): the last of the instances
                                           serves the experts */
    int attn_deep;                      /* 1: two tiles' attention in flight
                                           (npu_plan.attn_deep), 0: not; -1: where it
                                           costs nothing else kept in SRAM */
};

/* The chip the plan is for (a subset of chip_config, so this library needs no emulator). */
struct npu_plan_chip {
    char name[64];
    uint32_t mesh_rows, mesh_cols;
    uint64_t sram_bytes, hbm_bytes;
    uint32_t sa_rows, sa_cols;
    /* For placing experts by their expected time (0: unknown, placed by rows alone). */
    uint32_t freq_mhz;
    double hbm_gbps;                    /* per core */
};

/* A built image in memory. */
struct npu_built_image {
    uint8_t *data;
    uint64_t bytes;
};

/* Fills *req with the defaults. */
void npu_plan_request_init(struct npu_plan_request *req);

/*
 * Plans and builds the image of model `cfg` (its TOML text `config_text`) for `chip`.
 * NPU_OK, or a negative npu_status with err saying what does not divide or fit (with the
 * numbers). `summary` (may be NULL) receives a human-readable plan report.
 */
int npu_plan_build(const struct model_config *cfg, const char *config_text,
                   const struct npu_plan_chip *chip, const struct npu_plan_request *req,
                   struct npu_built_image *out, FILE *summary, char *err, size_t errlen);

void npu_built_image_free(struct npu_built_image *img);

#endif
