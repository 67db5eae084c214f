/* SPDX-License-Identifier: MIT */
/* The planner's state and helpers, shared by its two files (npu_plan.c: group, shapes,
   partitions, tensors, the image; npu_plan_cores.c: each core's SRAM, programs, KV pool). */
#ifndef NPU_PLAN_INTERNAL_H
#define NPU_PLAN_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "model_weights.h"
#include "npu_plan.h"

#define MIB(x) ((double)(x) / (1024.0 * 1024.0))

static inline int fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return code;
}

static inline uint64_t align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}


/* Planner state while building. */
struct planner {
    const struct model_config *cfg;
    const struct npu_plan_chip *chip;
    struct npu_plan plan;
    struct npu_image_tensor *tensors;
    struct model_tensor *sources;   /* the generator's tensor of each entry */
    uint64_t ntensors, cap;
    uint64_t weights_off, weights_end;
    uint32_t eb;
    bool stream;
    int64_t kv_pool;                /* the request's kv_sram_blocks: -1 auto, 0 none, N */
    struct npu_image_expert_slice *xmap; /* the expert map (EP), npu_plan_experts.c */
    uint64_t nxmap, xcap;
    double x_imbalance;             /* expected MoE time, busiest rank / balanced, worst layer */
    uint32_t x_rows;                /* the rows a slice serves at once that the map was
                                       placed for: a MoE group's, or the iteration's under
                                       the MoE over the layer */
    bool x_wide_able;               /* npu_moe_wide_able when the map was placed */
    bool x_wide;                    /* the map was placed for the MoE over the layer */
    uint32_t x_replicas;            /* the most copies of one expert the map may hold */
    uint32_t x_copies;              /* copies beyond the first, over every layer */
    uint32_t x_copies_most;         /* the most copies of one expert in one layer */
    bool conservative;              /* the simpler automatic choices (npu_plan_auto.c) */
    bool contiguous;                /* a default balanced map did not fit: place contiguously */
    bool no_copies;                 /* the default's expert copies did not fit: none */
    uint32_t spill_request;         /* the request's moe_spill_rows (0: the default) */
    int32_t units_request;          /* the request's moe_units_rows (-1: the default) */
    bool single_stage;              /* the request's stage_single: no double buffer */
    int deep_request;               /* the request's attn_deep (-1: the default, widen_deep) */
    uint32_t spill_halvings;        /* the MoE spill halved this often for HBM (at least a
                                       group's worth stays) */
    bool spill_single;              /* HBM short: one spill half, not one per layer parity */
    const char *fallback_why;       /* conservative: why the planner's choices failed */
    char *err;
    size_t errlen;
};

/* Every core's entry (rank, stage, SRAM map, program) and the stages' programs into ops;
   0 or a negative npu_status with the message in pl->err. */
/* Whether the plan can run two tiles' attention in flight (npu_plan.attn_deep): a 2D O
   GEMM over tp > 1 ranks. */
bool npu_planner_deep_able(const struct npu_plan *p);
int npu_planner_cores(struct planner *pl, struct npu_image_core *cores,
                      struct npu_prog_op *ops, uint32_t *nops);

/* EP: the expert map (pl->xmap) and the plan's expert fields, from the request's placement
   and the routing model (npu_plan_experts.c); 0 or a negative npu_status. */
int npu_planner_experts(struct planner *pl, const struct npu_plan_request *req);
/* Units per expert of contiguous placement: 1 with at least as many experts as ranks; with
   more ranks, tp / E when that splits every expert's width evenly over its ranks (each
   rank one slice), else 1 (ranks beyond the experts hold none). */
uint32_t npu_planner_contiguous_units(const struct model_config *c, uint32_t tp);
/* Slice `index` of layer l in the map. */
const struct npu_image_expert_slice *npu_planner_expert_slice(const struct planner *pl,
                                                              uint32_t layer, uint32_t index);

/* The automatic choices for unset request fields (npu_plan_auto.c): a GEMM's 2-D
   partition (qkv and o on a grid of at least 2 x 2 whose blocks divide), the placement
   (mesh2d where a GEMM is 2-D, else ring), expert parallelism (at least one expert per rank
   and the dispatch's counts within the NoC driver's limit), and the shape's split
   attention, tile rows, KV block and attention step. */
bool npu_planner_auto_2d(const struct planner *pl, const struct npu_plan_request *req,
                         enum npu_gemm g);
uint32_t npu_planner_auto_placement(const struct planner *pl,
                                    const struct npu_plan_request *req);
bool npu_planner_auto_ep(const struct planner *pl, const struct npu_plan_request *req);
void npu_planner_auto_shape(struct planner *pl, const struct npu_plan_request *req);
/* Whether the request leaves any of those choices to the planner. */
bool npu_planner_auto_any(const struct npu_plan_request *req);
/* Prints the fields the request left unset and what the planner chose for them. */
void npu_planner_auto_print(const struct planner *pl, const struct npu_plan_request *req,
                            FILE *f);

#endif
