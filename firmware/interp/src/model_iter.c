/* SPDX-License-Identifier: MIT */
/* Set-up, resident weights and the iteration loop of the interpreter (model_exec.h); the op
   loops over a layer's tiles are model_layer_ops.c. */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "model_exec.h"
#include "model_moe.h"
#include "npu/engine.h"
#include "npu/hal.h"
#include "npu/vector.h"
#include "npu/wait.h"

extern char __image_end[];

/* Layout offsets -> addresses in this core's SRAM. */
static void place_layout(struct exec_model *m, uint64_t base)
{
    uint64_t *f = (uint64_t *)&m->buf.a;
    for (size_t i = 0; i < offsetof(struct npu_act_layout, bytes) / 8; i++)
        f[i] += base;
}

/* The holdings of this core by tensor kind: everything of its rank, but under
   disaggregation the expert instance holds the experts only and a replica the rest. */
static bool holds_kind(const struct exec_model *m, uint32_t kind)
{
    return !m->plan->disagg || model_tensor_is_expert(kind) == m->serves_experts;
}

static void index_tensors(struct exec_model *m)
{
    const struct npu_image_header *h = (const void *)m->image;
    const struct npu_image_tensor *ts = (const void *)(m->image + h->tensors_off);
    for (uint64_t i = 0; i < h->tensors_count; i++) {
        const struct npu_image_tensor *t = &ts[i];
        if (t->rank != NPU_IMAGE_IDLE && t->rank != m->rank)
            continue;
        if (!holds_kind(m, t->kind))
            continue;
        if (t->kind == MT_EMBED)
            m->w.embed = t;
        else if (t->kind == MT_FINAL_NORM)
            m->w.final_norm = t;
        else if (t->kind == MT_LM_HEAD)
            m->w.lm_head = t;
        else
            m->w.t[t->layer][t->kind] = t;
    }
}

/* The double buffer's second copy (plan.stage_double): the last bytes of the staging
   buffer, as many as the largest non-expert part of this core's layers (the planner's
   sizing, npu_stage_map_layer). False, said on the console, if the buffer is too small. */
static bool stage_second(struct exec_model *m)
{
    const uint32_t L = m->plan->stage_layers, l0 = m->pipe.stage * L;
    uint64_t most = 0, whole = 0;
    for (uint32_t l = l0; l < l0 + L && l < m->cfg->num_layers; l++) {
        struct npu_stage_map map;
        npu_stage_map_layer(m->w.t[l], m->plan->expert_slots, &map);
        most = map.experts > most ? map.experts : most;
        whole = map.bytes > whole ? map.bytes : whole;
    }
    most = (most + 63) & ~63ull, whole = (whole + 63) & ~63ull;
    m->w.stage_b = m->w.stage + m->w.stage_bytes - most;
    if (whole + most <= m->w.stage_bytes)
        return true;
    printf("MODEL error: core %u: a staging buffer of %llu bytes holds no second copy of %llu "
           "bytes beside a layer's %llu\n", hal_self()->core_id,
           (unsigned long long)m->w.stage_bytes, (unsigned long long)most,
           (unsigned long long)whole);
    return false;
}

int exec_init(struct exec_model *m, const struct npu_image_core *core)
{
    const struct model_config *c = m->cfg;
    const struct npu_plan *p = m->plan;
    m->buf.sram = hal_self()->sram_base;
    if ((uint64_t)(uintptr_t)__image_end > m->buf.sram + NPU_IMAGE_APP_BASE ||
        noc_reserved_bytes() > NPU_IMAGE_NOC_RESERVE(hal_chip()->ncores)) {
        printf("MODEL error: core %u: firmware or NoC mailboxes overlap the plan's SRAM\n",
               hal_self()->core_id);
        return NPU_ERR_NOMEM;
    }
    if (c->num_layers > NPU_MODEL_LAYERS_MAX || c->num_experts > NPU_MODEL_EXPERTS_MAX ||
        (uint64_t)p->tile_rows * (c->experts_per_token ? c->experts_per_token : 1) >
            NPU_ROUTED_PAIRS_MAX ||
        ((uint64_t)p->moe_rows + p->tp - 1) / p->tp * c->experts_per_token >
            NPU_ROUTED_PAIRS_MAX) { /* the planner and the image check refuse these first */
        printf("MODEL error: %s: this firmware takes at most %u layers, %u experts and "
               "tile_rows (or an EP group's slice) x top-k %u\n", c->name,
               NPU_MODEL_LAYERS_MAX, NPU_MODEL_EXPERTS_MAX, NPU_ROUTED_PAIRS_MAX);
        return NPU_ERR_RANGE;
    }
    m->buf.eb = npu_dtype_bytes(p->dtype);
    m->buf.dt = p->dtype == NPU_IMAGE_BF16 ? NPU_DTYPE_BF16 : NPU_DTYPE_FP32;
    npu_act_layout(c, p, &m->buf.a);
    if (m->buf.a.bytes > core->sram_act_bytes) { /* an image planned by another layout */
        printf("MODEL error: core %u: the tile buffers need %llu bytes, the image planned "
               "%llu\n", hal_self()->core_id, (unsigned long long)m->buf.a.bytes,
               (unsigned long long)core->sram_act_bytes);
        return NPU_ERR_FORMAT;
    }
    place_layout(m, m->buf.sram + core->sram_act);
    const uint64_t hbm = (uint64_t)(uintptr_t)m->image;
    m->buf.x_in_sram = p->x_in_sram;
    m->buf.x_all = (p->x_in_sram ? m->buf.sram : hbm) + core->x_off;
    struct npu_moe_spill spill;
    npu_moe_spill_layout(c, p, &spill);
    if (spill.bytes && spill.cap < npu_moe_spill_group_rows(c, p, npu_moe_group_rows(p))) {
        printf("MODEL error: core %u: the MoE spill holds %llu rows, less than a group's\n",
               hal_self()->core_id, (unsigned long long)spill.cap);
        return NPU_ERR_FORMAT;
    }
    if (spill.bytes && core->x_bytes < npu_moe_x_rows_bytes(c, p) + spill.bytes) {
        printf("MODEL error: core %u: the residual rows and the MoE spill need %llu bytes of "
               "HBM, the image planned %llu\n", hal_self()->core_id,
               (unsigned long long)(npu_moe_x_rows_bytes(c, p) + spill.bytes),
               (unsigned long long)core->x_bytes);
        return NPU_ERR_FORMAT;
    }
    m->buf.kv_ring = (p->kv_in_sram ? m->buf.sram : hbm) + core->kv_off;
    m->buf.kv_pool = m->buf.sram + core->kv_pool_off;
    m->w.stage = m->buf.sram + core->sram_stage, m->w.stage_bytes = core->sram_stage_bytes;
    m->w.staged_next = 0, m->w.stage_deferred = 0, m->w.stage_late = 0;
    m->w.stage_own = true, m->w.route_last = false, m->w.stream_half = false;
    npu_kv_rank_shifts(p, m->kv_shift);
    m->kv_step_at = 0;
    index_tensors(m);
    exec_chain_init(m);
    if (p->stage_double == NPU_STAGE_DOUBLE && !stage_second(m))
        return NPU_ERR_FORMAT;
    if (m->tp > 1 && npu_plan_is_ep(p) && (!p->disagg || m->serves_experts) &&
        (!exec_moe_ep_owns(m) || !exec_moe_units_check(m)))
        return NPU_ERR_FORMAT;
    m->acct.layer = c->num_layers;
    m->acct.cat = EXEC_CAT_OTHER;
    exec_rebase_cat(m);
    return exec_reuse_init(m);
}

int exec_load_resident(struct exec_model *m)
{
    const struct npu_image_header *h = (const void *)m->image;
    const struct npu_image_tensor *ts = (const void *)(m->image + h->tensors_off);
    exec_set_cat(m, EXEC_CAT_WEIGHTS);
    for (uint64_t i = 0; i < h->tensors_count; i++) {
        const struct npu_image_tensor *t = &ts[i];
        if (t->sram_off == NPU_IMAGE_NOWHERE || t->blocks == 0 || /* EP: no experts here */
            (t->rank != NPU_IMAGE_IDLE && t->rank != m->rank) ||
            !holds_kind(m, t->kind) ||
            npu_plan_tensor_stage(m->plan, t) != m->pipe.stage)
            continue;
        uint64_t bytes = t->block_bytes * t->blocks;
        exec_copy(m, m->buf.sram + t->sram_off, (uint64_t)(uintptr_t)m->image + t->hbm_off, 1,
                  bytes, bytes, bytes);
        if (model_tensor_is_expert(t->kind))
            m->acct.stats[m->cfg->num_layers].expert_bytes += bytes; /* at load, once */
    }
    exec_set_cat(m, EXEC_CAT_OTHER);
    return exec_flush(m);
}

bool exec_op_runs_all(const struct npu_prog_op *op, const struct exec_batch *b)
{
    return op->kind == NPU_OP_EMBED ? b->layer0 == 0
                                    : op->layer >= b->layer0 && op->layer < b->layer1;
}

bool exec_op_has_rows(const struct npu_prog_op *op, const struct exec_batch *b)
{
    /* the prefill runs take part in their layers only (the embedding: before layer 0);
       the decode runs, after them, in every layer */
    return op->kind == NPU_OP_HEAD || exec_op_runs_all(op, b) || b->nprefill < b->nruns;
}

uint32_t exec_op_rows(const struct npu_prog_op *op, const struct exec_batch *b)
{
    const bool all = exec_op_runs_all(op, b);
    uint32_t rows = 0;
    for (uint32_t i = all ? 0 : b->nprefill; i < b->nruns; i++)
        rows += b->runs[i].count;
    return rows;
}

/* Whether tile reuse keys the tiles of an op over `rows` rows: only where they are more
   than EXEC_REUSE_TILE_OP_MIN tiles (a layered prompt's), as a recorded tile starts with
   the engines idle and loses the overlap the full run has between an op's tiles and with
   the ops around it: a chunked-prefill chunk of Qwen3-30B-A3B (4 tiles of 128 rows) came
   out 6-9 % slower under tile reuse than in full (docs/images.md, "Tile reuse"). */
static bool tiles_keyed(const struct exec_model *m, uint32_t rows)
{
    return m->treuse.enabled && rows > EXEC_REUSE_TILE_OP_MIN * m->plan->tile_rows;
}

bool exec_next_on_stage(const struct exec_model *m, uint32_t l, const struct exec_batch *b)
{
    const struct npu_prog_op next = { .kind = NPU_OP_STAGE, .layer = l + 1 };
    return l + 1 < m->cfg->num_layers && (l + 1) % m->plan->stage_layers != 0 &&
           exec_op_has_rows(&next, b);
}

bool exec_stage_ahead(const struct exec_model *m, uint32_t l, const struct exec_batch *b)
{
    const struct npu_prog_op op = { .kind = NPU_OP_STAGE, .layer = l };
    const uint32_t s = m->plan->stage_double;
    /* one copy: the next shares load after the layer's last MoE route (EP or units), or
       after a dense layer's last FFN GEMMs (exec_stage_after_ffn) */
    const bool loads = s == NPU_STAGE_DOUBLE ||
                       (s == NPU_STAGE_ONE && m->tp > 1 && npu_plan_is_ep(m->plan)) ||
                       (s == NPU_STAGE_ONE && exec_layer_dense_overlapped(m));
    return loads && !tiles_keyed(m, exec_op_rows(&op, b)) && exec_next_on_stage(m, l, b);
}

int exec_op(struct exec_model *m, const struct npu_prog_op *op, const struct exec_batch *b,
            uint32_t *out, float *logit)
{
    /* MoE outputs waiting for the next layer's attention (exec_layer_op decides for an
       attention op; staging reads no rows) */
    if (op->kind != NPU_OP_STAGE && op->kind != NPU_OP_ATTENTION) {
        const int rc = exec_layer_rows_settle(m);
        if (rc != NPU_OK)
            return rc;
    }
    /* a layer's waiting combines run first, unless this op keeps them waiting */
    if (!(exec_op_has_rows(op, b) && exec_op_keeps_combines(m, op))) {
        int rc = exec_layer_settle(m);
        if (rc != NPU_OK)
            return rc;
    }
    if (op->kind == NPU_OP_HEAD)
        return exec_head(m, b, out, logit);
    if (!exec_op_has_rows(op, b))
        return NPU_OK; /* no rows in this layer: nothing to stage or run */
    uint32_t rows = 0, prows = 0;
    for (uint32_t i = 0; i < b->nruns; i++)
        rows += b->runs[i].count, prows += i < b->nprefill ? b->runs[i].count : 0;
    const bool all = exec_op_runs_all(op, b);
    const uint32_t first = all ? 0 : b->nprefill, skip = all ? 0 : prows;
    const uint32_t row0 = b->row_base + skip; /* among the iteration's residual rows */
    m->treuse.on = tiles_keyed(m, rows - skip);
    if (op->kind == NPU_OP_STAGE) {
        /* the next layer's shares too where it runs in this iteration and on this core's
           stage; under layer reuse a recording holds them in place of its own
           (exec_reuse_layers) */
        exec_set_layer(m, op->layer);
        exec_stage_layer(m, op->layer, exec_stage_ahead(m, op->layer, b));
        return NPU_OK;
    }
    if (op->kind == NPU_OP_SEND || op->kind == NPU_OP_RECV) {
        /* the rows that ran the sending stage's last layer, on both sides */
        exec_set_layer(m, op->kind == NPU_OP_SEND ? op->layer : op->layer + 1);
        return op->kind == NPU_OP_SEND ? exec_pipe_send(m, row0, rows - skip)
                                       : exec_pipe_recv(m, row0, rows - skip);
    }
    return exec_layer_op(m, op, b->runs + first, b->nruns - first, row0, rows - skip);
}

/* exec_batch_part (model_exec.h): part i of `parts` of batch b (R rows): its rows [i R / parts, (i + 1) R / parts), a run
   cut where a boundary falls inside it. A prompt's rows may then run in two parts: the
   earlier part writes their KV cache before the later one reads it, as chunked prefill's
   chunks do across iterations. runs[] receives the part's runs, orig[j] the batch's index
   of runs[j]; only a run's last piece wants its token. */
struct exec_batch exec_batch_part(const struct exec_batch *b, uint32_t R, uint32_t i,
                                  uint32_t parts, struct exec_run *runs, uint32_t *orig)
{
    const uint32_t lo = (uint32_t)((uint64_t)R * i / parts);
    const uint32_t hi = (uint32_t)((uint64_t)R * (i + 1) / parts);
    struct exec_batch p = { .runs = runs, .layer0 = b->layer0, .layer1 = b->layer1,
                            .row_base = b->row_base + lo, .token_base = b->token_base };
    for (uint32_t j = 0, r0 = 0; j < b->nruns && r0 < hi; r0 += b->runs[j].count, j++) {
        const struct exec_run *s = &b->runs[j];
        const uint32_t a = r0 > lo ? r0 : lo, e = r0 + s->count < hi ? r0 + s->count : hi;
        if (e <= a) {
            p.token_base += s->wants_token; /* wholly before the part */
            continue;
        }
        struct exec_run *d = &runs[p.nruns];
        *d = *s;
        d->pos = s->pos + (a - r0), d->count = e - a;
        d->tokens = s->tokens ? s->tokens + (a - r0) : NULL;
        d->wants_token = s->wants_token && e == r0 + s->count;
        orig[p.nruns] = j;
        p.nprefill += j < b->nprefill;
        p.nruns++;
    }
    return p;
}

void exec_pass_start(struct exec_model *m)
{
    /* the head may have streamed through the staging buffer, the expert ring's slots
       too: the ring keeps what it holds within one pass over the ops only, so expert-load
       bytes count each routed expert once per layer and iteration (as the reference does),
       or per micro-batch, each of which loads it again */
    memset(m->w.ring.held, 0, sizeof(m->w.ring.held));
    m->w.ring.backward = false;
    m->w.staged_next = 0;
    m->w.stage_deferred = 0;
    m->w.stage_late = 0;
    m->w.stage_own = true;
    m->w.route_last = false, m->w.stream_half = false, m->w.head_ahead = false;
    m->lreuse.kv_next = 0;
}

void exec_pass_end(struct exec_model *m)
{
    assert(!exec_layer_pending() && "the last layer's combines ran (layer_defers)");
    assert(!exec_layer_rows_pending() && "the next layer's attention took what waited");
    /* the iteration's tokens, the gathers' index lists, may change once it is answered */
    int rc = exec_wait_gathers(m);
    assert(rc == NPU_OK && "a wait without a deadline");
    (void)rc;
    exec_set_layer(m, m->cfg->num_layers);
    exec_set_cat(m, EXEC_CAT_OTHER);
    m->acct.iterations++;
}

/* Whether ops[i] is a MoE or FFN op followed (past STAGE ops) by the next layer's attention over
   the same rows, with nothing recorded or replayed between them (layer and tile reuse
   replay a layer's ops as a unit, which would carry the load into the wrong layer). */
static bool attn_next(const struct exec_model *m, const struct npu_prog_op *ops, uint32_t nops,
                      uint32_t i, const struct exec_batch *b)
{
    if ((ops[i].kind != NPU_OP_MOE && ops[i].kind != NPU_OP_FFN) || m->lreuse.enabled ||
        m->treuse.enabled)
        return false;
    uint32_t j = i + 1;
    while (j < nops && ops[j].kind == NPU_OP_STAGE)
        j++;
    return j < nops && ops[j].kind == NPU_OP_ATTENTION && ops[j].layer == ops[i].layer + 1 &&
           exec_op_has_rows(&ops[j], b) && exec_op_runs_all(&ops[j], b) ==
                                                  exec_op_runs_all(&ops[i], b);
}

/* Whether the ops run the LM head over some of b's rows: the last layer may then load the
   head's first piece (exec_head_ahead; under layer reuse the last layer's class has it in
   its key, and a replay sets what the recording loaded). */
static bool head_due(const struct npu_prog_op *ops, uint32_t nops, const struct exec_batch *b)
{
    /* the program stays put in the image for the boot: look for its head once */
    static const struct npu_prog_op *seen;
    static uint32_t seen_n;
    static bool head;
    if (ops != seen || nops != seen_n) {
        head = false;
        for (uint32_t i = 0; i < nops; i++)
            head = head || ops[i].kind == NPU_OP_HEAD;
        seen = ops, seen_n = nops;
    }
    bool wanted = false;
    for (uint32_t i = 0; i < b->nruns; i++)
        wanted = wanted || b->runs[i].wants_token;
    return head && wanted;
}

/* The ops over batch b (a whole iteration, or one of its micro-batches). */
static int run_ops(struct exec_model *m, const struct npu_prog_op *ops, uint32_t nops,
                   const struct exec_batch *b, uint32_t *out, float *logit)
{
    exec_pass_start(m);
    m->head_due = head_due(ops, nops, b);
    int rc = NPU_OK;
    for (uint32_t i = 0, used = 0; rc == NPU_OK && i < nops; i += used) {
        used = 0;
        if (m->lreuse.enabled)
            rc = exec_reuse_layers(m, ops + i, nops - i, b, &used);
        if (rc == NPU_OK && used == 0) {
            m->lreuse.kv_next = 0; /* in full: loads nothing ahead under reuse */
            m->attn_next = attn_next(m, ops, nops, i, b);
            rc = exec_op(m, &ops[i], b, out, logit), used = 1;
            m->attn_next = false;
        }
    }
    return rc;
}

/* Micro-batches (plan.micro_batches over pipeline stages): the parts one after another on
   this stage, each handed on by its SEND as soon as it is through, so that the next stage
   works on part i while this one runs part i + 1. Returns the token messages the last
   stage sends (parts that want tokens). */
static int run_parts(struct exec_model *m, const struct npu_prog_op *ops, uint32_t nops,
                     const struct exec_batch *b, uint32_t rows, uint32_t parts,
                     uint32_t *out, float *logit, uint32_t *messages)
{
    static struct exec_run runs[NPU_BATCH_MAX];
    static uint32_t orig[NPU_BATCH_MAX], pout[NPU_BATCH_MAX];
    static float plogit[NPU_BATCH_MAX];
    int rc = NPU_OK;
    *messages = 0;
    for (uint32_t i = 0; rc == NPU_OK && i < parts; i++) {
        const struct exec_batch p = exec_batch_part(b, rows, i, parts, runs, orig);
        rc = run_ops(m, ops, nops, &p, pout, plogit);
        bool any = false;
        for (uint32_t j = 0; j < p.nruns; j++)
            if (runs[j].wants_token) /* on the last stage; the others' come after */
                out[orig[j]] = pout[j], logit[orig[j]] = plogit[j], any = true;
        *messages += any;
    }
    return rc;
}

int exec_iteration(struct exec_model *m, const struct npu_prog_op *ops, uint32_t nops,
                   const struct exec_batch *b, uint32_t *out, float *logit)
{
    uint32_t rows = 0, wanted = 0;
    for (uint32_t i = 0; i < b->nruns; i++)
        rows += b->runs[i].count, wanted += b->runs[i].wants_token;
    assert(b->nruns >= 1 && b->nruns <= m->plan->max_batch && rows <= m->plan->max_tokens);
    assert(b->nprefill <= b->nruns && b->layer0 <= b->layer1 &&
           b->layer1 <= m->cfg->num_layers);
    const uint32_t mb = m->plan->micro_batches, parts = mb < 2 ? 1 : mb < rows ? mb : rows;
    uint32_t messages = wanted > 0;
    int rc = parts == 1 ? run_ops(m, ops, nops, b, out, logit)
                        : run_parts(m, ops, nops, b, rows, parts, out, logit, &messages);
    if (rc == NPU_OK && m->pipe.stage + 1 < m->pipe.stages)
        rc = exec_head_tokens_from_last_stage(m, b->runs, b->nruns, messages, out, logit);
    if (rc != NPU_OK)
        exec_layer_forget(m); /* a failed pass leaves its combines */
    exec_pass_end(m);
    return rc;
}
