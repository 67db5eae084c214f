/* SPDX-License-Identifier: MIT */
/*
 * What the model and serve images share (docs/images.md): the control core's image check,
 * and an NPU core's set-up from the image (its entry, the config, the tensor-parallel group,
 * the interpreter's buffers and the resident weights).
 */
#ifndef MODEL_SETUP_H
#define MODEL_SETUP_H

#include <stdint.h>

#include "model_config.h"
#include "model_exec.h"

/* Control core: checks the image at the base of HBM against bootarg image_bytes and this
   chip; prints `MODEL image ok ...` or `MODEL image refused: ...`. 0 or the error. */
int model_image_check(void);

/* One NPU core's state, the interpreter's with it (tens of KiB: the image's static, never
   on the hart's small stack). */
struct model_core {
    struct exec_model m;
    struct model_config cfg;
    struct noc_group group;
    struct noc_comm comm;
    struct noc_group pair_group;   /* disaggregated plans: attention and expert ranks */
    struct noc_comm pair_comm;
    const struct npu_image_core *core;
    const struct npu_prog_op *ops;
    uint32_t nops;
    struct exec_stats stats[EXEC_LAYERS_MAX + 1];
    uint64_t expert_tokens[EXEC_LAYERS_MAX * 128];
};

/* NPU core, after its release: finds its entry; NPU_ERR_NOTFOUND if the plan leaves it
   idle. Else parses the config, joins the group, sets up the interpreter; 0 or the error
   (printed). Weights are not loaded yet (model_core_load). */
int model_core_setup(struct model_core *mc);
int model_core_load(struct model_core *mc);

/* Posts this core's completion to the control core's semaphore `sem`. */
void model_core_post_done(uint32_t sem);

#endif
