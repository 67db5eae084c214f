/* SPDX-License-Identifier: MIT */
/* An NPU core's set-up from the image, shared by the model and serve images. */
#include "model_setup.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "noc/placement.h"
#include "npu/hal.h"
#include "npu/wait.h"
#include "npu_image.h"

void model_core_post_done(uint32_t sem)
{
    struct hal_sem_post_args done = { .core = hal_chip()->ncores, .sem = sem,
                                      .op = NPU_SEM_OP_INC, .value = 1 };
    hal_sem_post(&done);
}

static int join_group(struct model_core *mc, const struct npu_plan *p)
{
    uint32_t row0, col0;
    npu_plan_instance_stage_origin(p, mc->core->instance, mc->core->stage, &row0, &col0);
    struct noc_group_args ga = {
        .placement = (enum noc_placement)p->placement,
        .rect = { (uint16_t)row0, (uint16_t)col0, (uint16_t)p->rect_rows,
                  (uint16_t)p->rect_cols },
        .mesh_rows = hal_chip()->rows, .mesh_cols = hal_chip()->cols };
    struct noc_comm_config cc = { .group = &mc->group, .slot = 0,
                                  .scratch = hal_self()->sram_base + mc->core->comm_scratch,
                                  .segment_bytes = p->comm_segment };
    int rc = noc_group_init(&mc->group, &ga);
    if (rc == NPU_OK)
        rc = noc_comm_init(&mc->comm, &cc);
    mc->m.comm = &mc->comm;
    return rc;
}

/* A disaggregated plan's pair group (noc_group_pair): the replicas' bands as one
   rectangle (linear placement: the order of their ranks matters to nobody), then the expert
   instance in the plan's placement, so that expert rank r is pair rank A + r (A attention
   cores), as the image's expert map numbers it. Its slot is the other one; it shares the
   replica's scratch. HAZARD: that is safe only because a core runs one collective at a time
   and a ring peer writes into a core's scratch only once both agreed on the same
   collective. */
static int join_pair(struct model_core *mc, const struct npu_plan *p)
{
    const uint32_t A = p->instances - 1;
    struct noc_group attn, experts;
    struct noc_group_args ga = {
        .placement = NOC_PLACE_LINEAR,
        .rect = { (uint16_t)p->rect_row0, (uint16_t)p->rect_col0, (uint16_t)p->rect_rows,
                  (uint16_t)(A * p->instance_cols) },
        .mesh_rows = hal_chip()->rows, .mesh_cols = hal_chip()->cols };
    int rc = noc_group_init(&attn, &ga);
    ga.placement = (enum noc_placement)p->placement;
    ga.rect = (struct noc_rect){ (uint16_t)p->rect_row0,
                                 (uint16_t)(p->rect_col0 + A * p->instance_cols),
                                 (uint16_t)p->rect_rows, (uint16_t)p->rect_cols };
    if (rc == NPU_OK)
        rc = noc_group_init(&experts, &ga);
    if (rc == NPU_OK)
        rc = noc_group_pair(&mc->pair_group, &attn, &experts);
    struct noc_comm_config cc = { .group = &mc->pair_group, .slot = 1,
                                  .scratch = hal_self()->sram_base + mc->core->comm_scratch,
                                  .segment_bytes = p->comm_segment };
    if (rc == NPU_OK)
        rc = noc_comm_init(&mc->pair_comm, &cc);
    if (rc != NPU_OK)
        printf("MODEL error: core %u: the pair group of %u replicas and the expert instance "
               "(rc=%d)\n", hal_self()->core_id, A, rc);
    mc->m.moe_comm = &mc->pair_comm;
    return rc;
}

/* The core of this core's rank in every stage (pipeline stages), and where the previous
   stage keeps its residual rows if they are in HBM. In SRAM, they and the tile buffers sit
   at the same offset on every core (the planner lays SRAM out alike), which model_pipe.c
   relies on. */
static void find_peers(struct model_core *mc, const struct npu_image_header *h)
{
    const struct npu_image_core *cores = (const void *)((const uint8_t *)h + h->cores_off);
    for (uint32_t i = 0; i < h->cores_count; i++) {
        if (cores[i].rank != mc->core->rank || cores[i].instance != mc->core->instance ||
            cores[i].stage >= EXEC_LAYERS_MAX)
            continue;
        mc->m.pipe.core[cores[i].stage] = (uint16_t)i;
        if (cores[i].stage + 1 == mc->core->stage)
            mc->m.pipe.prev_x = (uint64_t)(uintptr_t)h + cores[i].x_off;
        assert((!h->plan.x_in_sram || cores[i].x_off == mc->core->x_off) &&
               cores[i].sram_act == mc->core->sram_act);
    }
}

int model_core_setup(struct model_core *mc)
{
    const uint8_t *image = (const uint8_t *)(uintptr_t)hal_chip()->hbm_base;
    const struct npu_image_header *h = (const void *)image;
    mc->core = (const struct npu_image_core *)(image + h->cores_off) + hal_self()->core_id;
    if (mc->core->rank == NPU_IMAGE_IDLE)
        return NPU_ERR_NOTFOUND;
    char err[256];
    int rc = model_config_parse(&mc->cfg, (const char *)image + h->config_off, "image:config",
                                err, sizeof(err));
    if (rc != NPU_OK) {
        printf("MODEL error: %s\n", err);
        return rc;
    }
    mc->m = (struct exec_model){ .cfg = &mc->cfg, .plan = &h->plan, .image = image,
                                 .rank = mc->core->rank, .tp = h->plan.tp,
                                 .pipe = { .stage = mc->core->stage,
                                           .stages = h->plan.stages },
                                 .acct = { .stats = mc->stats,
                                           .expert_tokens = mc->expert_tokens } };
    mc->m.serves_experts = npu_plan_core_serves_experts(&h->plan, mc->core);
    mc->m.replicas = h->plan.disagg ? h->plan.instances - 1 : h->plan.instances;
    mc->m.replica = mc->core->instance;
    find_peers(mc, h);
    if (h->plan.tp > 1)
        rc = join_group(mc, &h->plan);
    if (rc == NPU_OK && h->plan.disagg)
        rc = join_pair(mc, &h->plan);
    if (rc == NPU_OK)
        rc = exec_init(&mc->m, mc->core);
    mc->ops = (const struct npu_prog_op *)(image + h->prog_off) + mc->core->prog_first;
    mc->nops = mc->core->prog_count;
    return rc;
}

int model_core_load(struct model_core *mc)
{
    return exec_load_resident(&mc->m);
}
