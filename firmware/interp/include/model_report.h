/* SPDX-License-Identifier: MIT */
/* What the model image prints at the end of a run (docs/images.md, "Output"). */
#ifndef MODEL_REPORT_H
#define MODEL_REPORT_H

#include <stdint.h>

#include "model_exec.h"

/* Rank 0: expert routing counts (functional MoE), the per-layer breakdown with roofline
   bounds, the totals and the `MODEL done` line; then every rank, in rank order, its weight
   traffic (`MODEL rank=... hbm_bytes=... expert_load_bytes=...`). `what` goes into the done
   line ("requests=4 new=16"). */
void report_run(struct exec_model *m, struct noc_comm *comm, const char *what, uint64_t chip_ps);

#endif
