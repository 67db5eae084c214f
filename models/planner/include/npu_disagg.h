/* SPDX-License-Identifier: MIT */
/*
 * Attention/expert disaggregation's plan (MegaScale-Infer, ../shared/papers: sections 3 and
 * 4.1; docs/images.md "Attention/expert disaggregation: the latency model's plan"): a MoE
 * model's decoding on two roles of one mesh. Attention cores: n_a data-parallel replicas of tp_a cores, each
 * with the attention weights' shares and the KV cache of its B / n_a requests. Expert cores:
 * N_e cores holding the experts (E / N_e whole experts each, or with N_e = U x E, one of U
 * units of one expert). The expert cores take a band of whole columns in the middle of the
 * mesh and the replicas rectangles on both sides, nearest first, so that the M2N traffic
 * (every attention core to every expert core) crosses few columns.
 *
 * What this is: the placement, what each core holds, the refusals (with the numbers), and
 * the paper's latency model (section 4.1, constraints 1-3 and equation 5) evaluated with
 * per-core roofline times of this chip's cores: an estimate, never a measurement. The model
 * leaves out: the attention replica's tensor-parallel collectives (and with tp_a above the
 * KV heads, the combine of a split softmax: the KV cache is split by positions), the NoC
 * links inside the expert band (only the row links into it), norms, softmax and activations
 * (vector work), and any overlap of the LM head; a layer's attention uses the layers' mean
 * positions (sliding windows counted), and routing is uniform.
 * This plan builds no image: the firmware runs the narrower form of `--roles disagg`
 * (docs/images.md, "Disaggregated execution": the expert band last, every band one shape).
 * Host only.
 */
#ifndef NPU_DISAGG_H
#define NPU_DISAGG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "chip_config.h"
#include "model_config.h"
#include "noc/placement.h"

#define NPU_DISAGG_REPLICAS_MAX 64u
#define NPU_DISAGG_BATCH_MAX (1u << 20)   /* the search's largest batch */
#define NPU_DISAGG_SEARCH_M_MAX 16u       /* micro-batches the search tries at most */

struct npu_disagg_request {
    uint32_t replicas;      /* n_a, >= 1 */
    uint32_t tp_a;          /* cores per replica: divides mesh_rows, or a multiple of it */
    uint32_t expert_cores;  /* N_e: a multiple of mesh_rows (whole columns) */
    uint32_t micro_batches; /* m, >= 1 */
    uint32_t batch;         /* B: decoding requests over all replicas, >= n_a x m */
    uint32_t context;       /* s: positions each request's KV cache holds, >= 1 */
    uint32_t elem_bytes;    /* 2 (bf16) or 4 */
    uint32_t band_last;     /* 1: the expert band on the mesh's last columns, every replica
                               on its left (the form --roles disagg executes); 0: in the
                               middle, replicas on both sides */
};

/* The latency model of one layer and micro-batch (seconds) and the iteration's. */
struct npu_disagg_times {
    double rows_a;          /* b_a: a replica's rows in a micro-batch */
    double rows_e;          /* b_e: an expert's mean rows in a micro-batch (uniform) */
    double t_a, t_e, t_c;   /* attention on a replica, experts on a core, one M2N */
    double t_f;             /* max(t_a, t_e) */
    uint32_t m_min;         /* ceil(2 (1 + t_c / t_f)) (constraint 3) */
    double t_head;          /* the LM head on a replica, once a micro-batch */
    int overlapped;         /* 1: m t_f covers a micro-batch's round trip (equation 5) */
    double t_iter;          /* the iteration: trip + (m - 1) t_f + (L - 1) max(m t_f, trip)
                               + m t_head, trip = t_a + t_e + 2 t_c */
    double tokens_per_s;    /* B / t_iter */
    double per_core;        /* tokens_per_s / the cores of both roles (the paper's per GPU) */
    double per_chip_core;   /* tokens_per_s / every core of the chip (idle ones too) */
    int attn_weights_once;  /* 1: the replica's layer weights stay in SRAM over the m
                               micro-batches (read once a layer), 0: once a micro-batch */
    int expert_weights_once;
};

struct npu_disagg_plan {
    struct noc_rect replica[NPU_DISAGG_REPLICAS_MAX];
    struct noc_rect experts;
    uint32_t idle_cores;
    uint32_t experts_per_core;  /* whole experts a core holds (0 under units) */
    uint32_t units;             /* U: cores an expert is cut over (1 for whole experts) */
    uint64_t attn_core_weight_bytes, attn_core_kv_bytes, expert_core_bytes;
    uint64_t hbm_weight_bytes, hbm_kv_bytes;
    struct npu_disagg_times t;
};

/* Plans r for model m on chip c. NPU_OK, or a negative npu_status with err naming what
   does not divide or fit, with the numbers. */
int npu_disagg_plan(const struct model_config *m, const struct chip_config *c,
                    const struct npu_disagg_request *r, struct npu_disagg_plan *out,
                    char *err, size_t errlen);

/* Algorithm 1 of MegaScale-Infer (section 4.2) over the latency model above: every tp_a
   (a divisor of the mesh's rows or a multiple of them, dividing the heads), every count of
   expert cores (whole columns that divide or cut the experts), every number of replicas that
   fits beside them and m = 1..m_max; for each, the largest batch (binary search) whose
   iteration meets the TBT SLO and whose KV cache fits HBM (or the largest whole number of
   full micro-batches under it, where that does more). The best is the most tokens per
   second (the chip's idle cores serve nothing: the HBM that limits the batch is the whole
   chip's); ties: fewer cores. The model is an estimate, so the search is too, until the
   simulator runs its plans (issue 24). */
struct npu_disagg_search {
    double slo_s;           /* TBT SLO: an iteration at most this long (the paper: 0.150) */
    uint32_t context;       /* s of every request */
    uint32_t m_max;         /* micro-batches tried, 1..m_max <= NPU_DISAGG_SEARCH_M_MAX
                               (the paper: 4) */
    uint32_t elem_bytes;
    uint32_t tried;         /* out: candidates evaluated (with a batch that meets the SLO) */
};
int npu_disagg_search(const struct model_config *m, const struct chip_config *c,
                      struct npu_disagg_search *s, struct npu_disagg_request *best,
                      struct npu_disagg_plan *plan, char *err, size_t errlen);

/* Whether n expert cores divide model m's experts, or cut each into U = n / E units as
   expert parallelism does (at most NPU_EXPERT_UNITS_MAX, dividing the width). */
bool npu_disagg_experts_fit(const struct model_config *m, uint32_t n);

/* The plan as `npuctl plan --disagg` prints it. */
void npu_disagg_print(FILE *f, const struct model_config *m, const struct chip_config *c,
                      const struct npu_disagg_request *r, const struct npu_disagg_plan *p);

#endif
