/* SPDX-License-Identifier: MIT */
/*
 * Attention/expert disaggregation (plan.disagg; docs/images.md, "Disaggregated execution";
 * MegaScale-Infer, ../shared/papers, sections 3 and 4.1). The plan's instances but the last
 * are attention replicas, each with its own requests and KV cache; the last instance holds
 * every expert and runs only the MoE ops. A MoE layer's rows go from every replica to the
 * expert instance and back over the pair group of both roles (model_setup.c, join_pair),
 * with the all-to-all-v by buckets: a replica's ranks own no bucket, and the expert slices
 * arrive at their owner one run each, as its grouped expert GEMMs read them.
 *
 * Ping-pong (section 4.1): a replica runs its iteration's rows in m = plan.micro_batches
 * parts. For each layer it runs part i's attention, then finishes part i - 1's MoE (the
 * combine, which waits for the experts), then routes and sends part i's rows; so the expert
 * instance serves part i - 1 while the replica computes part i's attention. With m = 1 the
 * two roles take turns. Every replica and the expert instance run the same rounds (layers
 * x m), a replica without rows in a part sending none: the dispatch is a collective of the
 * whole pair group.
 *
 * Modelled: the two roles' engines, the NoC traffic of both directions, the expert ring
 * keeping what it holds from one micro-batch to the next (weights read once a layer where
 * the ring holds them). Not modelled: M2N as its own operation here (the all-to-all-v's
 * count rounds are paid; `npuctl bench m2n` compares the two), the expert instance in the
 * middle of the mesh (it is the last band), different core sizes for the two roles, and
 * tensor-parallel degrees that differ between them (both are the plan's tp).
 */
#include <stdio.h>

#include "model_exec.h"
#include "model_moe.h"
#include "npu/hal.h"

#define PARTS_MAX NPU_DISAGG_PARTS_MAX /* npu_limits.h: the planner refuses more */

/* A replica's parts, their runs one part after another (a part's runs are the batch's, a
   run cut at each part boundary: at most runs + parts - 1 in all), and its two MoE tiles
   (one pending, one beginning): scratch too large for the hart's stack, not model state. */
static struct exec_run part_runs[NPU_BATCH_MAX + PARTS_MAX];
static uint32_t part_orig[NPU_BATCH_MAX + PARTS_MAX];
static struct exec_batch parts[PARTS_MAX];
static struct exec_tile moe_tiles[2];

/* A part's MoE between its dispatch and its combine. */
struct pending {
    bool on;
    uint32_t layer;
    struct exec_tile *tile;
    struct noc_alltoallv_plan plan;
};

static uint32_t batch_rows(const struct exec_batch *b)
{
    uint32_t rows = 0;
    for (uint32_t i = 0; i < b->nruns; i++)
        rows += b->runs[i].count;
    return rows;
}

static uint32_t parts_of(const struct exec_model *m)
{
    return m->plan->micro_batches > 1 ? m->plan->micro_batches : 1;
}

/* Part p's MoE of layer l begun: its residual rows (in SRAM) routed and sent. */
static int moe_begin(struct exec_model *m, uint32_t l, const struct exec_batch *p,
                     struct pending *q, struct exec_tile *t)
{
    const uint64_t row = (uint64_t)m->cfg->hidden_size * m->buf.eb;
    const uint32_t n = batch_rows(p);
    if (n > m->plan->moe_rows) { /* the expert instance's buffers take moe_rows a replica */
        printf("MODEL error: core %u: a micro-batch of %u rows passes the plan's MoE group "
               "of %u rows (use more --micro-batches or fewer --max-tokens)\n",
               hal_self()->core_id, n, m->plan->moe_rows);
        return NPU_ERR_RANGE;
    }
    exec_attention_kept_drop(); /* its peers' writes declare no local range */
    exec_make_tile(p->runs, p->nruns, n, t);
    t->xt = m->buf.x_all + (uint64_t)p->row_base * row, t->in_xt = false;
    exec_set_layer(m, l);
    const struct moe_ep_map *x = moe_ep_map(m, l);
    q->plan = moe_ep_plan(m, x);
    q->on = true, q->layer = l, q->tile = t;
    return moe_ep_route_dispatch(m, l, t, x, &q->plan, false);
}

/* The pending part's combine (its outputs added to its residual rows). */
static int moe_finish(struct exec_model *m, struct pending *q)
{
    if (!q->on)
        return NPU_OK;
    q->on = false;
    exec_set_layer(m, q->layer);
    return moe_ep_combine_add(m, q->tile, moe_ep_map(m, q->layer), &q->plan);
}

/* Part p's rows in the MoE op `moe`: all of them, or under layered prefill in a layer
   outside the iteration's group only the decode runs' (after the prefill runs). */
static struct exec_batch moe_part(const struct npu_prog_op *moe, const struct exec_batch *p)
{
    if (exec_op_runs_all(moe, p))
        return *p;
    struct exec_batch d = *p;
    for (uint32_t i = 0; i < p->nprefill; i++)
        d.row_base += p->runs[i].count;
    d.runs = p->runs + p->nprefill, d.nruns = p->nruns - p->nprefill, d.nprefill = 0;
    return d;
}

/* A MoE layer (its attention op att, then its MoE op) over the parts, ping-pong. */
static int layer_pingpong(struct exec_model *m, const struct npu_prog_op *att,
                          const struct npu_prog_op *moe, struct pending *q, uint32_t *next)
{
    const uint32_t P = parts_of(m);
    int rc = NPU_OK;
    for (uint32_t j = 0; rc == NPU_OK && j < P; j++) {
        if (P == 1) /* the part's rows need the layer before's MoE output first */
            rc = moe_finish(m, q);
        if (rc == NPU_OK && parts[j].nruns)
            rc = exec_op(m, att, &parts[j], NULL, NULL);
        if (rc == NPU_OK) /* the part before's, served while this attention ran */
            rc = moe_finish(m, q);
        const struct exec_batch mp = moe_part(moe, &parts[j]);
        if (rc == NPU_OK)
            rc = moe_begin(m, moe->layer, &mp, q, &moe_tiles[*next]);
        *next ^= 1;
    }
    return rc;
}

int exec_iteration_disagg(struct exec_model *m, const struct npu_prog_op *ops, uint32_t nops,
                          const struct exec_batch *b, uint32_t *out, float *logit)
{
    const uint32_t P = parts_of(m), rows = batch_rows(b);
    if (P > PARTS_MAX) {
        printf("MODEL error: core %u: %u micro-batches; this firmware runs at most %u\n",
               hal_self()->core_id, P, PARTS_MAX);
        return NPU_ERR_RANGE;
    }
    for (uint32_t j = 0, used = 0; j < P; used += parts[j].nruns, j++)
        parts[j] = b->nruns ? exec_batch_part(b, rows, j, P, part_runs + used, part_orig + used)
                            : (struct exec_batch){ .runs = part_runs,
                                                   .layer1 = m->cfg->num_layers };
    exec_pass_start(m);
    struct pending q = { 0 };
    uint32_t next = 0;
    int rc = NPU_OK;
    for (uint32_t i = 0; rc == NPU_OK && i < nops; i++) {
        const struct npu_prog_op *op = &ops[i];
        if (op->kind == NPU_OP_ATTENTION && i + 1 < nops && ops[i + 1].kind == NPU_OP_MOE) {
            rc = layer_pingpong(m, op, &ops[++i], &q, &next);
            continue;
        }
        rc = moe_finish(m, &q); /* a dense layer, the head: after the MoE before them */
        if (rc == NPU_OK && b->nruns)
            rc = exec_op(m, op, b, out, logit);
    }
    if (rc == NPU_OK)
        rc = moe_finish(m, &q);
    exec_pass_end(m);
    return rc;
}

int exec_iteration_experts(struct exec_model *m, const struct npu_prog_op *ops, uint32_t nops)
{
    exec_pass_start(m);
    int rc = NPU_OK;
    for (uint32_t i = 0; rc == NPU_OK && i < nops; i++) {
        const uint32_t l = ops[i].layer;
        if (ops[i].kind != NPU_OP_MOE)
            continue;
        exec_set_layer(m, l);
        /* where the ring's slots are (the map of this core's shares: its experts only) */
        npu_stage_map_layer(m->w.t[l], m->plan->expert_slots, &m->w.map);
        for (uint32_t j = 0; rc == NPU_OK && j < parts_of(m); j++)
            rc = exec_moe_ep_serve_round(m, l);
    }
    exec_pass_end(m);
    return rc;
}
