/* SPDX-License-Identifier: MIT */
/*
 * The KV-cache manager's configuration of an image's plan (docs/serving.md, "KV cache"):
 * one place for what the control core (firmware/serve) and npuctl's pre-run check
 * (cmd_serve.c) both derive, so the host refuses exactly what the chip would. Blocks are
 * the plan's stripes (kv_block positions, or tp x kv_block under split attention).
 */
#ifndef RT_KVC_PLAN_H
#define RT_KVC_PLAN_H

#include "npu_layout.h"
#include "rt/kvc.h"

static inline struct rt_kvc_config rt_kvc_config_of_plan(const struct npu_plan *p)
{
    return (struct rt_kvc_config){ .block_tokens = npu_kv_stripe(p),
                                   .sram_blocks = p->kv_sram_blocks,
                                   .ring_rows = p->kv_ring_rows, .ranks = npu_kv_ranks(p) };
}

#endif
