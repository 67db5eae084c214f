/* SPDX-License-Identifier: MIT */
/*
 * Single-core execution of a model (docs/models.md, "first on-chip slice"): the forward
 * pass of one token as chains of engine descriptors on this core, in fp32 (GEMMs on the
 * matrix engine, norms, RoPE, softmax, SwiGLU, top-k, residual adds and argmax on the vector
 * engine), each descriptor waiting for the one before. A MoE layer splits the chain at its
 * router: the hart reads the top-k experts and their weights, then chains those experts.
 * Weights, activations and the KV cache live in this core's SRAM. With tensor parallelism
 * (below) every weight GEMM is split over a group of cores. Not yet: attention and the KV
 * cache split over the ranks, experts on other cores, weights in HBM, batching, bf16.
 */
#ifndef MODEL_EXEC_H
#define MODEL_EXEC_H

#include <stdint.h>

#include "model_config.h"
#include "noc/collective.h"

/*
 * Tensor parallelism over a group of cores (the NPU paper's Table 2, per weight GEMM
 * y[N] = W[N][K] x[K]): with MN-partition rank r holds rows [r N / p, (r + 1) N / p) of W,
 * computes that part of y in place and an all-gather completes y; with K-partition it holds
 * columns [r K / p, (r + 1) K / p), computes a partial y and an all-reduce sums it. Every
 * other op (norms, RoPE, attention, the router) runs on every rank on full, replicated
 * activations. Expert weights are split the same way, expert by expert.
 */
enum exec_partition { EXEC_SINGLE = 0, EXEC_MN, EXEC_K };

struct exec_tp {
    enum exec_partition partition;
    uint32_t rank, size;
    struct noc_comm *comm;
};

/* This rank's share [*lo, *hi) of a dimension of n. */
void exec_compute_share(const struct exec_tp *tp, uint32_t n, uint32_t *lo, uint32_t *hi);

/* One layer's weights in SRAM (global addresses), fp32, row-major [out][in]; split weights
   hold this rank's share only (experts: one share per expert, one after another). */
struct exec_layer {
    uint64_t attn_norm, wq, wk, wv, wo, q_norm, k_norm, ffn_norm, w_gate, w_up, w_down;
    uint64_t router, e_gate, e_up, e_down; /* MoE: [E][d], [E][mff][d] x 2, [E][d][mff] */
    uint64_t e_up_stride, e_down_stride;   /* bytes from one expert's share to the next */
};

/* Everything one sequence needs on this core. */
struct exec_model {
    const struct model_config *cfg;
    uint32_t max_seq;                     /* positions per request */
    uint32_t batch_max;                   /* requests (rows) a step may carry, <= EXEC_BATCH_MAX */
    uint64_t embed, final_norm, lm_head;  /* [V][d], [d], [V][d] */
    struct exec_layer *layers;            /* [num_layers] */
    uint64_t x, xb, xb2;                  /* [B][d] */
    uint64_t q, attn;                     /* [B][n_heads * hd] */
    uint64_t knew, vnew;                  /* [B][n_kv * hd]: this step's keys and values */
    uint64_t positions;                   /* uint32 [B] */
    uint64_t scores;                      /* [group][max_seq] */
    uint64_t hb, hb2;                     /* [max(ff, mff)] */
    uint64_t moe_out;                     /* [d]: one expert's output */
    uint64_t probs, topk_val, topk_idx;   /* [B][E]; [B][k], uint32 [B][k] */
    uint64_t *expert_tokens;              /* [layers][E]: tokens routed to each expert */
    uint64_t logits;                      /* [B][V] */
    uint64_t argmax;                      /* uint32 [B] */
    uint64_t kcache, vcache;              /* [requests][layers][max_seq][n_kv * hd] */
    uint32_t steps;                       /* descriptors completed so far */
    struct exec_tp tp;
};

#define EXEC_BATCH_MAX 8u

/* One row of a step: request `req` feeds `token` at position `pos`. */
struct exec_row {
    uint32_t req, token, pos;
};

/* Runs one step of n rows (1..batch_max; each request at most once) and writes the argmax of
   each row's logits to out[n] (logits at m->logits, row by row). 0 or a negative npu_status
   if the engines refused a chain or a collective failed. */
int exec_run_step(struct exec_model *m, const struct exec_row *rows, uint32_t n,
                  uint32_t *out);

#endif
