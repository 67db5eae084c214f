/* SPDX-License-Identifier: MIT */
/* An NPU core's set-up from the image, shared by the model and serve images. */
#include "model_setup.h"

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
    struct noc_group_args ga = {
        .placement = (enum noc_placement)p->placement,
        .rect = { (uint16_t)p->rect_row0, (uint16_t)p->rect_col0, (uint16_t)p->rect_rows,
                  (uint16_t)p->rect_cols },
        .mesh_rows = hal_chip()->rows, .mesh_cols = hal_chip()->cols };
    struct noc_comm_config cc = { .group = &mc->group, .slot = 0,
                                  .scratch = hal_self()->sram_base + mc->core->comm_scratch,
                                  .segment_bytes = NPU_IMAGE_COMM_SEGMENT };
    int rc = noc_group_init(&mc->group, &ga);
    if (rc == NPU_OK)
        rc = noc_comm_init(&mc->comm, &cc);
    mc->m.comm = &mc->comm;
    return rc;
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
                                 .rank = mc->core->rank, .tp = h->plan.tp, .stats = mc->stats,
                                 .expert_tokens = mc->expert_tokens };
    if (h->plan.tp > 1)
        rc = join_group(mc, &h->plan);
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
