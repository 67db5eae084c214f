/* SPDX-License-Identifier: MIT */
/* What the model image prints at the end of a run (docs/images.md, "Output"). */
#ifndef MODEL_REPORT_H
#define MODEL_REPORT_H

#include <stdint.h>

#include "model_exec.h"
#include "rt/lines.h"

/* Rank 0: expert routing counts (functional MoE), the per-layer breakdown with roofline
   bounds, the totals and the `MODEL done` line; then every rank, in rank order, its weight
   traffic (`MODEL rank=... hbm_bytes=... expert_load_bytes=...`). `done` gives what the run
   did (requests and new, or iterations; the others absent); model and chip_us are filled
   in. */
void report_run(struct exec_model *m, struct noc_comm *comm, const struct lines_model_done *done,
                uint64_t chip_ps);

#endif
