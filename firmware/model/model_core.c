/* SPDX-License-Identifier: MIT */
/*
 * Model image, NPU core 0 (docs/models.md, "first on-chip slice"): reads the model config
 * that `npuctl run model -- -device loader,...` placed at the base of HBM, generates the
 * model's weights from its seed into its SRAM (model_weights.h: the same values as the host
 * reference), then feeds the prompt token by token and decodes greedily, each token one
 * descriptor chain on its engines (model_exec.h). Prints one `MODEL step=...` line per
 * generated token: the token and its logit, which tests compare with the host reference.
 * The other cores only report in. Bootargs: prompt=T1,T2,... new=N (default 16).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_config.h"
#include "model_exec.h"
#include "model_weights.h"
#include "npu/dma.h"
#include "npu/hal.h"
#include "npu/wait.h"

#define DONE_SEM 0u          /* on the control core */
#define SEM_DMA 2u
#define CONFIG_MAX 16384u
#define PROMPT_MAX 1024u

extern char __image_end[];

static char config_text[CONFIG_MAX];
static uint32_t prompt[PROMPT_MAX];
static struct exec_layer layers[256];

static int report_done(int status)
{
    struct hal_sem_post_args done = { .core = hal_chip()->ncores, .sem = DONE_SEM,
                                      .op = NPU_SEM_OP_INC, .value = 1 };
    hal_sem_post(&done);
    return status;
}

/* The value of `key=` in bootargs, or NULL. */
static const char *bootarg(const char *key)
{
    size_t len = strlen(key);
    for (const char *p = hal_bootargs(); *p; p += strcspn(p, " ")) {
        p += strspn(p, " ");
        if (strncmp(p, key, len) == 0 && p[len] == '=')
            return p + len + 1;
    }
    return NULL;
}

static uint32_t parse_prompt(void)
{
    const char *p = bootarg("prompt");
    uint32_t n = 0;
    while (p && *p && *p != ' ' && n < PROMPT_MAX) {
        prompt[n++] = (uint32_t)strtoul(p, (char **)&p, 10);
        if (*p == ',')
            p++;
    }
    return n;
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

static void place_tensor(const struct model_tensor *t, void *ctx)
{
    struct exec_model *m = ctx;
    uint64_t at = take(t->elems * 4);
    if (sram_next > sram_end)
        return; /* reported by the caller */
    model_tensor_fill((float *)(uintptr_t)at, t, m->cfg->seed, 0, t->elems);
    struct exec_layer *l = &m->layers[t->layer];
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

/* Lays out weights, activations and caches in this core's SRAM; NPU_ERR_NOMEM if short. */
static int layout(struct exec_model *m, const struct model_config *c, uint32_t max_seq)
{
    const uint64_t d = c->hidden_size, qd = (uint64_t)c->num_heads * c->head_dim;
    const uint64_t kvd = (uint64_t)c->num_kv_heads * c->head_dim;
    const uint64_t group = c->num_heads / c->num_kv_heads;
    const struct hal_core_info *self = hal_self();
    sram_next = ((uint64_t)(uintptr_t)__image_end + 0xffff) & ~0xffffull;
    sram_end = self->sram_base + self->sram_size;
    if (c->num_layers > sizeof(layers) / sizeof(layers[0]))
        return NPU_ERR_RANGE;
    *m = (struct exec_model){ .cfg = c, .max_seq = max_seq, .layers = layers };
    model_tensors_each(c, place_tensor, m);
    if (c->tie_embeddings)
        m->lm_head = m->embed;
    m->x = take(d * 4), m->xb = take(d * 4), m->xb2 = take(d * 4);
    m->q = take(qd * 4), m->attn = take(qd * 4);
    m->scores = take(group * max_seq * 4);
    const uint64_t hidden = c->intermediate_size > c->moe_intermediate_size
                                ? c->intermediate_size : c->moe_intermediate_size;
    const uint64_t experts = c->num_experts ? c->num_experts : 1;
    m->hb = take(hidden * 4), m->hb2 = take(hidden * 4);
    m->moe_out = take(d * 4);
    m->probs = take(experts * 4);
    m->topk_val = take(64 * 4), m->topk_idx = take(64 * 4);
    m->expert_tokens = (uint64_t *)(uintptr_t)take((uint64_t)c->num_layers * experts * 8);
    m->logits = take((uint64_t)c->vocab_size * 4);
    m->argmax = take(4);
    m->kcache = take((uint64_t)c->num_layers * max_seq * kvd * 4);
    m->vcache = take((uint64_t)c->num_layers * max_seq * kvd * 4);
    if (sram_next <= sram_end) /* the counts start at 0 */
        memset(m->expert_tokens, 0, (size_t)c->num_layers * experts * 8);
    if (sram_next > sram_end) {
        printf("MODEL error: %s needs %" PRIu64 " KiB of SRAM for %u positions, the core has "
               "%" PRIu64 " KiB free\n", c->name,
               (sram_next - ((uint64_t)(uintptr_t)__image_end)) >> 10, max_seq,
               (sram_end - (uint64_t)(uintptr_t)__image_end) >> 10);
        return NPU_ERR_NOMEM;
    }
    return NPU_OK;
}

static int run(struct exec_model *m, uint32_t n_prompt, uint32_t n_new)
{
    int tok = 0;
    for (uint32_t p = 0; p < n_prompt; p++) {
        tok = exec_forward(m, prompt[p], p);
        if (tok < 0)
            return tok;
    }
    const float *logits = (const float *)(uintptr_t)m->logits;
    for (uint32_t i = 0; i < n_new; i++) {
        printf("MODEL step=%" PRIu32 " token=%d logit=%.7g\n", i, tok, (double)logits[tok]);
        if (i + 1 < n_new && (tok = exec_forward(m, (uint32_t)tok, n_prompt + i)) < 0)
            return tok;
    }
    return NPU_OK;
}

int main(void)
{
    hal_wait_release();
    if (hal_self()->core_id != 0)
        return report_done(NPU_EXIT_OK);
    static struct model_config cfg;
    static struct exec_model m;
    const char *new_arg = bootarg("new");
    uint32_t n_prompt = parse_prompt(), n_new = new_arg ? (uint32_t)atoi(new_arg) : 16;
    int rc = read_config(&cfg);
    if (rc == NPU_OK && cfg.experts_per_token > 64) {
        printf("MODEL error: %s: top-%u routing; the vector engine's top-k takes at most 64\n",
               cfg.name, cfg.experts_per_token);
        rc = NPU_ERR_INVAL;
    }
    if (rc == NPU_OK && (n_prompt == 0 || n_prompt + n_new > cfg.max_position)) {
        printf("MODEL error: prompt of %" PRIu32 " tokens plus %" PRIu32 " new: need 1.."
               "max_position (%" PRIu32 ") in all\n", n_prompt, n_new, cfg.max_position);
        rc = NPU_ERR_RANGE;
    }
    if (rc == NPU_OK)
        rc = layout(&m, &cfg, n_prompt + n_new);
    uint64_t t0 = hal_time_ps();
    if (rc == NPU_OK)
        rc = run(&m, n_prompt, n_new);
    for (uint32_t l = 0; rc == NPU_OK && cfg.arch == MODEL_MOE && l < cfg.num_layers; l++) {
        printf("MODEL routed layer=%" PRIu32 " tokens=", l); /* per expert, over all steps */
        for (uint32_t e = 0; e < cfg.num_experts; e++)
            printf("%s%" PRIu64, e ? "," : "", m.expert_tokens[l * cfg.num_experts + e]);
        printf("\n");
    }
    if (rc == NPU_OK)
        printf("MODEL done model=%s prompt=%" PRIu32 " new=%" PRIu32 " chip_us=%.3f\n",
               cfg.name, n_prompt, n_new, (double)(hal_time_ps() - t0) / 1e6);
    else
        printf("MODEL failed rc=%d\n", rc);
    return report_done(rc == NPU_OK ? NPU_EXIT_OK : NPU_EXIT_FAIL);
}
