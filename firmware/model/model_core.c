/* SPDX-License-Identifier: MIT */
/*
 * Model image, NPU cores (docs/models.md, "first on-chip slice"): reads the model config
 * that `npuctl run model -- -device loader,...` placed at the base of HBM, generates the
 * model's weights from its seed into its SRAM (model_weights.h: the same values as the host
 * reference), then feeds the prompts token by token and decodes greedily, each step chains
 * of descriptors on its engines (model_exec.h). Core 0 prints one `MODEL req=... step=...`
 * line per generated token of each request: the token and its logit, which tests compare
 * with the host reference.
 * Alone, core 0 runs the model and the others only report in; with partition=mn|k every core
 * is a rank of a tensor-parallel group over the whole mesh (placement=...).
 * Several requests (prompt1=, prompt2=, ...) run as one batch: every step carries one row per
 * request running, at its own position; a request joins at step startR= (default 0) and
 * drops out when done.
 * Bootargs: prompt=T1,T2,... [prompt1=...] new=N (default 16) [partition=mn|k
 * placement=NAME].
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_config.h"
#include "model_exec.h"
#include "model_weights.h"
#include "noc/collective.h"
#include "noc/placement.h"
#include "npu/dma.h"
#include "npu/hal.h"
#include "npu/wait.h"

#define DONE_SEM 0u          /* on the control core */
#define SEM_DMA 2u
#define CONFIG_MAX 16384u
#define PROMPT_MAX 1024u
#define TP_SEGMENT 4096u     /* the collectives' pipelining unit: activations are small */

extern char __image_end[];

static char config_text[CONFIG_MAX];
/* The requests: prompt (request 0, also prompt0=), prompt1=, ... prompt7=. */
static uint32_t prompts[EXEC_BATCH_MAX][PROMPT_MAX];
static uint32_t lens[EXEC_BATCH_MAX];
static uint32_t starts[EXEC_BATCH_MAX]; /* the step each request joins at (startR=) */
static uint32_t generated[EXEC_BATCH_MAX][PROMPT_MAX];
static struct exec_layer layers[256];

static int report_done(int status)
{
    struct hal_sem_post_args done = { .core = hal_chip()->ncores, .sem = DONE_SEM,
                                      .op = NPU_SEM_OP_INC, .value = 1 };
    hal_sem_post(&done);
    return status;
}

/* key=T1,T2,... into dst[]; the count (0 if absent), or -1 (with a message) if malformed. */
static int parse_tokens(const char *key, uint32_t *dst)
{
    const char *p = hal_bootarg_value(key);
    int n = 0;
    while (p && *p && *p != ' ') {
        char *end;
        unsigned long v = strtoul(p, &end, 10);
        if (end == p || n == (int)PROMPT_MAX || (*end != ',' && *end != ' ' && *end)) {
            printf("MODEL error: bootarg %s: token %d is not a number, or more than %u "
                   "tokens\n", key, n, PROMPT_MAX);
            return -1;
        }
        dst[n++] = (uint32_t)v;
        p = *end == ',' ? end + 1 : end;
    }
    return n;
}

/* The requests' prompts; their count (0 with a message if none or one is malformed). */
static uint32_t parse_prompts(void)
{
    uint32_t n = 0;
    for (uint32_t r = 0; r < EXEC_BATCH_MAX; r++) {
        char key[16];
        snprintf(key, sizeof(key), "prompt%u", r);
        bool alias = r == 0 && hal_bootarg_value("prompt"); /* prompt= is prompt0= */
        int len = parse_tokens(alias ? "prompt" : key, prompts[r]);
        if (len < 0)
            return 0;
        if (len == 0)
            break;
        snprintf(key, sizeof(key), "start%u", r);
        const char *start = hal_bootarg_value(key);
        starts[n] = start ? (uint32_t)strtoul(start, NULL, 10) : 0;
        lens[n++] = (uint32_t)len;
    }
    if (n == 0)
        printf("MODEL error: no prompt (bootargs prompt=T1,T2,... [prompt1=...])\n");
    return n;
}

/* The prompts' tokens and the requested length against the model; *max_seq: positions. */
static int check_requests(const struct model_config *c, uint32_t nreq, const char *new_arg,
                          uint32_t *n_new, uint32_t *max_seq)
{
    char *end = NULL;
    unsigned long v = new_arg ? strtoul(new_arg, &end, 10) : 16;
    if (new_arg && (end == new_arg || (*end && *end != ' ') || v == 0 || v > PROMPT_MAX)) {
        printf("MODEL error: bootarg new: 1..%u tokens\n", PROMPT_MAX);
        return NPU_ERR_RANGE;
    }
    *n_new = (uint32_t)v;
    *max_seq = 0;
    for (uint32_t r = 0; r < nreq; r++) {
        for (uint32_t i = 0; i < lens[r]; i++)
            if (prompts[r][i] >= c->vocab_size) {
                printf("MODEL error: request %" PRIu32 ": prompt token %" PRIu32 " = %" PRIu32
                       " is not below vocab_size %" PRIu32 "\n", r, i, prompts[r][i],
                       c->vocab_size);
                return NPU_ERR_RANGE;
            }
        if ((uint64_t)lens[r] + *n_new > c->max_position) {
            printf("MODEL error: request %" PRIu32 ": prompt of %" PRIu32 " tokens plus %"
                   PRIu32 " new passes max_position (%" PRIu32 ")\n", r, lens[r], *n_new,
                   c->max_position);
            return NPU_ERR_RANGE;
        }
        if (lens[r] + *n_new - 1 > *max_seq)
            *max_seq = lens[r] + *n_new - 1;
    }
    return NPU_OK;
}

/* The config text from the base of HBM, through the DMA engine. */
static int read_config(struct model_config *cfg)
{
    static struct npu_desc d;
    struct dma_copy_args a = {
        .src = hal_chip()->hbm_base, .dst = (uint64_t)(uintptr_t)config_text, .rows = 1,
        .row_bytes = CONFIG_MAX - 1, .src_stride = CONFIG_MAX, .dst_stride = CONFIG_MAX,
        .sync = { .signal = true, .signal_core = (uint16_t)hal_self()->core_id,
                  .signal_sem = SEM_DMA, .signal_value = 1, .keep_data = true },
    };
    dma_copy_desc(&d, &a);
    int rc = engine_submit(&d, 1);
    if (rc == NPU_OK)
        rc = hal_sem_wait(SEM_DMA, 1);
    if (rc != NPU_OK)
        return rc;
    char err[256];
    rc = model_config_parse(cfg, config_text, "hbm:model.toml", err, sizeof(err));
    if (rc != NPU_OK)
        printf("MODEL error: %s\n", err);
    return rc;
}

/* Bump allocator over this core's free SRAM. */
static uint64_t sram_next, sram_end;

static uint64_t take(uint64_t bytes)
{
    uint64_t at = sram_next;
    sram_next += (bytes + 63) & ~63ull;
    return at;
}

/* Whether a tensor is split over the ranks (weight GEMMs), and in how many blocks (experts). */
static uint32_t split_blocks(const struct model_tensor *t, const struct model_config *c)
{
    switch (t->kind) {
    case MT_WQ: case MT_WK: case MT_WV: case MT_WO: case MT_W_GATE: case MT_W_UP:
    case MT_W_DOWN: case MT_LM_HEAD:
        return 1;
    case MT_E_GATE: case MT_E_UP: case MT_E_DOWN:
        return c->num_experts;
    default:
        return 0;
    }
}

/* Places this rank's share of tensor t (all of it if not split); returns its address, or 0
   when SRAM is short. *stride: bytes from one block's share to the next. */
static uint64_t place_share(struct exec_model *m, const struct model_tensor *t,
                            uint64_t *stride)
{
    uint32_t blocks = split_blocks(t, m->cfg);
    if (blocks == 0 || m->tp.partition == EXEC_SINGLE) { /* the whole tensor */
        uint64_t at = take(t->elems * 4);
        if (sram_next <= sram_end)
            model_tensor_fill((float *)(uintptr_t)at, t, m->cfg->seed, 0, t->elems);
        *stride = blocks ? t->elems / blocks * 4 : 0;
        return sram_next <= sram_end ? at : 0;
    }
    const uint32_t out = t->rows / blocks, in = t->cols;
    const bool by_rows = m->tp.partition == EXEC_MN;
    uint32_t lo, hi;
    exec_compute_share(&m->tp, by_rows ? out : in, &lo, &hi);
    const uint64_t rows = by_rows ? hi - lo : out, cols = by_rows ? in : hi - lo;
    uint64_t at = take((uint64_t)blocks * rows * cols * 4);
    *stride = rows * cols * 4;
    if (sram_next > sram_end)
        return 0;
    float *dst = (float *)(uintptr_t)at;
    for (uint64_t b = 0; b < blocks; b++)
        for (uint64_t r = 0; r < (by_rows ? 1 : rows); r++, dst += by_rows ? 0 : cols) {
            uint64_t first = by_rows ? (b * out + lo) * in : (b * out + r) * in + lo;
            model_tensor_fill(dst, t, m->cfg->seed, first, by_rows ? rows * cols : cols);
            if (by_rows)
                dst += rows * cols;
        }
    return at;
}

static void place_tensor(const struct model_tensor *t, void *ctx)
{
    struct exec_model *m = ctx;
    uint64_t stride;
    uint64_t at = place_share(m, t, &stride);
    if (at == 0)
        return; /* SRAM is short: reported by the caller */
    struct exec_layer *l = &m->layers[t->layer];
    if (t->kind == MT_E_UP)
        l->e_up_stride = stride;
    if (t->kind == MT_E_DOWN)
        l->e_down_stride = stride;
    uint64_t *slots[] = {
        [MT_EMBED] = &m->embed, [MT_ATTN_NORM] = &l->attn_norm, [MT_WQ] = &l->wq,
        [MT_WK] = &l->wk, [MT_WV] = &l->wv, [MT_WO] = &l->wo, [MT_Q_NORM] = &l->q_norm,
        [MT_K_NORM] = &l->k_norm, [MT_FFN_NORM] = &l->ffn_norm, [MT_W_GATE] = &l->w_gate,
        [MT_W_UP] = &l->w_up, [MT_W_DOWN] = &l->w_down, [MT_ROUTER] = &l->router,
        [MT_E_GATE] = &l->e_gate, [MT_E_UP] = &l->e_up, [MT_E_DOWN] = &l->e_down,
        [MT_FINAL_NORM] = &m->final_norm, [MT_LM_HEAD] = &m->lm_head,
    };
    if (t->kind < sizeof(slots) / sizeof(slots[0]) && slots[t->kind])
        *slots[t->kind] = at;
}

/* Tensor parallelism over the whole mesh (bootargs partition=mn|k, placement=...). */
static struct noc_group tp_group;
static struct noc_comm tp_comm;

static int setup_tp(struct exec_tp *tp)
{
    const char *part = hal_bootarg_value("partition"), *place = hal_bootarg_value("placement");
    *tp = (struct exec_tp){ .partition = EXEC_SINGLE, .size = 1 };
    if (!part)
        return NPU_OK;
    char name[16] = "ring";
    if (place)
        snprintf(name, sizeof(name), "%.*s", (int)strcspn(place, " "), place);
    int pl = noc_placement_parse(name);
    size_t plen = strcspn(part, " ");
    tp->partition = plen == 2 && strncmp(part, "mn", 2) == 0 ? EXEC_MN
                    : plen == 1 && part[0] == 'k'          ? EXEC_K : EXEC_SINGLE;
    if (pl < 0 || tp->partition == EXEC_SINGLE) {
        printf("MODEL error: partition=mn|k and placement=linear|interleaved|ring|mesh2d\n");
        return NPU_ERR_INVAL;
    }
    struct noc_group_args ga = { .placement = (enum noc_placement)pl,
                                 .rect = { 0, 0, (uint16_t)hal_chip()->rows,
                                           (uint16_t)hal_chip()->cols },
                                 .mesh_rows = hal_chip()->rows, .mesh_cols = hal_chip()->cols };
    struct noc_comm_config cc = { .group = &tp_group, .slot = 0,
                                  .scratch = take(NOC_COMM_SCRATCH_BYTES(TP_SEGMENT)),
                                  .segment_bytes = TP_SEGMENT };
    int rc = noc_group_init(&tp_group, &ga);
    if (rc == NPU_OK)
        rc = noc_comm_init(&tp_comm, &cc);
    tp->comm = &tp_comm;
    tp->rank = tp_comm.rank;
    tp->size = tp_group.size;
    return rc;
}

/* Activations, routing state and the KV cache, after the weights. */
static void take_activations(struct exec_model *m, const struct model_config *c,
                             uint32_t max_seq, uint32_t nreq)
{
    const uint64_t b = m->batch_max;
    const uint64_t d = c->hidden_size, qd = (uint64_t)c->num_heads * c->head_dim;
    const uint64_t kvd = (uint64_t)c->num_kv_heads * c->head_dim;
    const uint64_t group = c->num_heads / c->num_kv_heads;
    const uint64_t hidden = c->intermediate_size > c->moe_intermediate_size
                                ? c->intermediate_size : c->moe_intermediate_size;
    const uint64_t experts = c->num_experts ? c->num_experts : 1;
    m->x = take(b * d * 4), m->xb = take(b * d * 4), m->xb2 = take(b * d * 4);
    m->q = take(b * qd * 4), m->attn = take(b * qd * 4);
    m->knew = take(b * kvd * 4), m->vnew = take(b * kvd * 4);
    m->positions = take(b * 4);
    m->scores = take(group * max_seq * 4);
    m->hb = take(b * hidden * 4), m->hb2 = take(b * hidden * 4);
    m->moe_out = take(d * 4);
    m->probs = take(b * experts * 4);
    m->topk_val = take(b * 64 * 4), m->topk_idx = take(b * 64 * 4);
    m->expert_tokens = (uint64_t *)(uintptr_t)take((uint64_t)c->num_layers * experts * 8);
    m->logits = take(b * c->vocab_size * 4);
    m->argmax = take(b * 4);
    m->kcache = take((uint64_t)nreq * c->num_layers * max_seq * kvd * 4);
    m->vcache = take((uint64_t)nreq * c->num_layers * max_seq * kvd * 4);
    if (sram_next <= sram_end) /* the counts start at 0 */
        memset(m->expert_tokens, 0, (size_t)c->num_layers * experts * 8);
}

/* Every split dimension must give each rank at least one row or column. */
static int check_shares(const struct exec_tp *tp, const struct model_config *c)
{
    const uint32_t ff = c->arch == MODEL_MOE ? c->moe_intermediate_size : c->intermediate_size;
    const uint32_t dims[] = { c->hidden_size, c->num_heads * c->head_dim,
                              c->num_kv_heads * c->head_dim, ff, c->vocab_size };
    for (uint32_t i = 0; tp->partition != EXEC_SINGLE && i < 5; i++)
        if (dims[i] < tp->size) {
            printf("MODEL error: %s: a dimension of %u cannot be split %u ways\n", c->name,
                   dims[i], tp->size);
            return NPU_ERR_RANGE;
        }
    return NPU_OK;
}

/* Lays out weights, activations and caches in this core's SRAM; NPU_ERR_NOMEM if short. */
static int layout(struct exec_model *m, const struct model_config *c, uint32_t max_seq,
                  uint32_t nreq)
{
    const struct hal_core_info *self = hal_self();
    sram_next = ((uint64_t)(uintptr_t)__image_end + 0xffff) & ~0xffffull;
    sram_end = self->sram_base + self->sram_size - noc_reserved_bytes();
    if (c->num_layers > sizeof(layers) / sizeof(layers[0])) {
        printf("MODEL error: %s has %u layers; this image holds %u\n", c->name,
               c->num_layers, (unsigned)(sizeof(layers) / sizeof(layers[0])));
        return NPU_ERR_RANGE;
    }
    *m = (struct exec_model){ .cfg = c, .max_seq = max_seq, .batch_max = nreq,
                              .layers = layers };
    int rc = setup_tp(&m->tp);
    if (rc == NPU_OK)
        rc = check_shares(&m->tp, c);
    if (rc != NPU_OK)
        return rc;
    model_tensors_each(c, place_tensor, m);
    m->lm_head = c->tie_embeddings ? m->embed : m->lm_head;
    if (c->tie_embeddings && m->tp.partition != EXEC_SINGLE) {
        /* The LM head GEMM is split: a share of the embedding's values (stream 1). */
        struct model_tensor head = { .kind = MT_LM_HEAD, .rows = c->vocab_size,
                                     .cols = c->hidden_size,
                                     .elems = (uint64_t)c->vocab_size * c->hidden_size,
                                     .stream = 1, .centre = 0.0f, .scale = 1.0f };
        uint64_t stride;
        m->lm_head = place_share(m, &head, &stride);
    }
    take_activations(m, c, max_seq, nreq);
    if (sram_next > sram_end) {
        printf("MODEL error: %s needs %" PRIu64 " KiB of SRAM for %u positions, the core has "
               "%" PRIu64 " KiB free\n", c->name,
               (sram_next - ((uint64_t)(uintptr_t)__image_end)) >> 10, max_seq,
               (sram_end - (uint64_t)(uintptr_t)__image_end) >> 10);
        return NPU_ERR_NOMEM;
    }
    return NPU_OK;
}

/* Core 0: the routing counts (MoE) and the summary line. */
static void report_result(const struct exec_model *m, uint32_t nreq, uint32_t n_new,
                          uint64_t chip_ps)
{
    const struct model_config *c = m->cfg;
    for (uint32_t l = 0; c->arch == MODEL_MOE && l < c->num_layers; l++) {
        printf("MODEL routed layer=%" PRIu32 " tokens=", l); /* per expert, over all steps */
        for (uint32_t e = 0; e < c->num_experts; e++)
            printf("%s%" PRIu64, e ? "," : "", m->expert_tokens[l * c->num_experts + e]);
        printf("\n");
    }
    printf("MODEL done model=%s requests=%" PRIu32 " new=%" PRIu32 " chip_us=%.3f\n",
           c->name, nreq, n_new, (double)chip_ps / 1e6);
}

/* Step t's rows: every request that has joined and not ended feeds its next token. */
static uint32_t step_rows(uint32_t t, uint32_t nreq, uint32_t n_new, struct exec_row *rows)
{
    uint32_t n = 0;
    for (uint32_t r = 0; r < nreq; r++) {
        if (t < starts[r] || t - starts[r] + 1 >= lens[r] + n_new)
            continue; /* not yet, or done (the last new token is not fed back) */
        uint32_t pos = t - starts[r];
        rows[n++] = (struct exec_row){
            .req = r, .pos = pos,
            .token = pos < lens[r] ? prompts[r][pos] : generated[r][pos - lens[r]] };
    }
    return n;
}

/* Whether any request has steps left after step t. */
static bool pending_after(uint32_t t, uint32_t nreq, uint32_t n_new)
{
    for (uint32_t r = 0; r < nreq; r++)
        if (t < starts[r] + lens[r] + n_new - 2)
            return true;
    return false;
}

/* All requests as one batch, one step at a time: each joins at its start step and drops out
   when done (greedy decoding). */
static int run(struct exec_model *m, uint32_t nreq, uint32_t n_new)
{
    struct exec_row rows[EXEC_BATCH_MAX];
    uint32_t out[EXEC_BATCH_MAX];
    const uint32_t vocab = m->cfg->vocab_size;
    for (uint32_t t = 0;; t++) {
        uint32_t n = step_rows(t, nreq, n_new, rows);
        int rc = n ? exec_run_step(m, rows, n, out) : NPU_OK;
        if (rc != NPU_OK)
            return rc;
        const float *logits = (const float *)(uintptr_t)m->logits;
        for (uint32_t i = 0; i < n; i++) {
            uint32_t r = rows[i].req, pos = rows[i].pos;
            if (pos + 1 < lens[r])
                continue; /* still in the prompt */
            generated[r][pos + 1 - lens[r]] = out[i];
            if (hal_self()->core_id == 0) /* every rank has the same logits */
                printf("MODEL req=%" PRIu32 " step=%" PRIu32 " token=%" PRIu32 " logit=%.7g\n",
                       r, pos + 1 - lens[r], out[i],
                       (double)logits[(uint64_t)i * vocab + out[i]]);
        }
        if (!pending_after(t, nreq, n_new))
            return NPU_OK;
    }
}

int main(void)
{
    hal_wait_release();
    if (hal_self()->core_id != 0 && !hal_bootarg_value("partition"))
        return report_done(NPU_EXIT_OK); /* one core runs the model unless it is split */
    static struct model_config cfg;
    static struct exec_model m;
    uint32_t nreq = parse_prompts(), n_new = 0, max_seq = 0;
    int rc = read_config(&cfg);
    if (rc == NPU_OK && cfg.experts_per_token > 64) {
        printf("MODEL error: %s: top-%u routing; the vector engine's top-k takes at most 64\n",
               cfg.name, cfg.experts_per_token);
        rc = NPU_ERR_INVAL;
    }
    if (rc == NPU_OK && nreq == 0)
        rc = NPU_ERR_INVAL;
    if (rc == NPU_OK)
        rc = check_requests(&cfg, nreq, hal_bootarg_value("new"), &n_new, &max_seq);
    if (rc == NPU_OK)
        rc = layout(&m, &cfg, max_seq, nreq);
    uint64_t t0 = hal_time_ps();
    if (rc == NPU_OK)
        rc = run(&m, nreq, n_new);
    if (rc == NPU_OK && hal_self()->core_id == 0)
        report_result(&m, nreq, n_new, hal_time_ps() - t0);
    else if (rc != NPU_OK)
        printf("MODEL failed rc=%d\n", rc);
    return report_done(rc == NPU_OK ? NPU_EXIT_OK : NPU_EXIT_FAIL);
}
