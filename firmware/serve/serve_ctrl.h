/* SPDX-License-Identifier: MIT */
/* Serve image, control core: the run's state shared by its files (serve_ctrl.c). */
#ifndef SERVE_CTRL_H
#define SERVE_CTRL_H

#include <stdbool.h>
#include <stdint.h>

#include "npu_image.h"
#include "rt/kvc.h"
#include "rt/mailbox.h"
#include "rt/sched.h"
#include "rt/trace_blob.h"

struct serve {
    const struct npu_image_header *image;
    const void *blob;                 /* the trace, checked */
    struct rt_request *reqs;          /* [nreqs] */
    uint32_t nreqs, vocab, max_seq;
    uint32_t *last_token;             /* [nreqs]: each request's newest token */
    bool *announced;                  /* [nreqs]: its admit line is printed */
    struct rt_kvc kvc;
    struct rt_sched sched;
    struct rt_mailbox *mb;
    uint32_t cores[RT_MB_CORES_MAX];  /* the plan's cores */
    uint32_t ncores;
    uint32_t seq;                     /* iterations posted */
    bool engine_trace;
};

/* serve_iter.c: runs one planned iteration on the cores and records its outputs. */
int serve_run_iteration(struct serve *sv, struct rt_iter_plan *it);
/* Posts STOP and waits for every core's report. */
void serve_stop_cores(struct serve *sv);

#endif
