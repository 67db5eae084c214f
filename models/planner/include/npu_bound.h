/* SPDX-License-Identifier: MIT */
/*
 * The whole-chip lower bound of one model step (docs/benchmarks.md, "npuctl bench model"):
 * the least time any firmware could take for the step on this chip, computed from the model
 * and chip configs and the step's shape alone, never from what the firmware executed.
 *
 * A step: R requests, each with n new rows at positions [c, c + n) (c: the context it
 * already holds; a decode step is n = 1), each wanting a token from its last row.
 *
 *   matrix time = the step's matrix FLOPs / (cores x 2 x sa_rows x sa_cols x freq)
 *     FLOPs: QKV, attention scores and values over the visible positions (causal; the
 *     sliding window where a layer slides), O, the FFN (MoE: router, and the k experts of
 *     every row), the LM head on the R token rows. Norms, softmax and activations are left
 *     out (vector work is smaller and may overlap).
 *   HBM time    = max(0, bytes the step reads - the chip's SRAM) / the chip's HBM bandwidth
 *     bytes: every weight the step touches (MoE: the experts its rows route to, drawn from
 *     the plan's routing model exactly as the cores draw them), the LM head, the rows'
 *     embeddings, and the K and V of every context position some row sees (the new rows'
 *     own K and V are made in the step). At best the whole SRAM of the
 *     chip already holds part of it; the rest must cross HBM at least once.
 *   bound       = max(matrix time, HBM time)
 *
 * The array floor: the same FLOPs, each GEMM's divided by the share of the array it can use
 * when each of its weights meets at most M rows, min(1, M / min(sa_rows, sa_cols)) (the
 * chip's matrix formula: a fold lasts max(M, R) cycles however the operands are laid out).
 * M is the most rows any plan could give the weight: every row of the step for QKV, O, the
 * dense FFN and the router; the rows routed to an expert for that expert (the same draws);
 * a request's rows times the query heads of a KV head for its attention; the token rows
 * for the LM head. floor = max(array time, HBM time) is still plan-independent and still a
 * lower bound on this chip; bound <= floor, and where they part, no firmware can reach the
 * bound (a 512-token prefill of Qwen3-30B-A3B gives an expert 32 rows: a quarter of a
 * 128-wide array).
 *
 * Not counted: the NoC (a plan that keeps whole layers per core moves only the rows between
 * them, so no plan-independent NoC floor is larger than zero; `bench model` reports the
 * NoC's busy share beside the bound), writes of the new K and V, vector work.
 */
#ifndef NPU_BOUND_H
#define NPU_BOUND_H

#include <stdint.h>

#include "chip_config.h"
#include "model_config.h"

struct npu_bound_shape {
    uint32_t requests;         /* R, 1..ROUTING limit of the plan */
    uint32_t rows;             /* n new rows per request, >= 1 */
    uint32_t context;          /* c positions already held per request */
};

struct npu_bound_opts {
    uint32_t elem_bytes;       /* weights, activations and KV: 2 (bf16) or 4 (fp32) */
    uint32_t skew_milli;       /* the routing model: 0 uniform, else Zipf alpha x 1000 */
    uint64_t seed;             /* the routing model's seed */
};

struct npu_bound {
    double flops;              /* matrix FLOPs of the step */
    double peak_flops;         /* the chip's, per second */
    double matrix_s;
    double weight_bytes;       /* weights touched (experts: those routed to) */
    double kv_bytes;           /* K and V of the visible positions */
    double other_bytes;        /* embeddings of the rows */
    double sram_bytes;         /* the chip's SRAM, all cores */
    double hbm_bytes;          /* what must cross HBM: max(0, read - SRAM) */
    double hbm_bw;             /* bytes per second */
    double hbm_s;
    double experts_touched;    /* distinct (layer, expert) pairs routed to */
    double bound_s;            /* max(matrix_s, hbm_s) */
    double array_flops;        /* flops, each GEMM's over the share of the array its rows use */
    double array_s;            /* array_flops at the chip's peak */
    double floor_s;            /* max(array_s, hbm_s): the bound with the array's shape */
};

/* 0, or NPU_ERR_INVAL for a shape of no rows, too many experts or an element size other
   than 2 or 4. */
int npu_bound_step(const struct model_config *m, const struct chip_config *chip,
                   const struct npu_bound_shape *s, const struct npu_bound_opts *o,
                   struct npu_bound *out);

#endif
