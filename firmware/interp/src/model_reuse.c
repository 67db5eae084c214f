/* SPDX-License-Identifier: MIT */
/*
 * Layer reuse (performance mode, bootarg layer_reuse; docs/images.md "Layer reuse").
 *
 * Within an iteration, consecutive layers whose ops are the same (kinds and flags) over
 * the same rows form a run. One layer of the run goes through the engines in full between
 * the replay slot's BEGIN and END (chip_replay.h), which records this core's engine
 * counters over it, and its chip time (span) and per-layer statistics are kept in its class
 * (m->lreuse.classes, class i in replay slot i); every other layer of the run, and of any
 * later run of the same class, is a replay: the chip adds the recorded counters once per
 * layer and the hart sleeps the spans. Which layer runs rotates with the iteration, so that
 * over a run the routing (experts staged, rows per expert) of every layer gets its turn.
 *
 * Keys. A class is the layer's ops and its rows: per prefill run taking part, its row count,
 * KV pool blocks and its request and first position; the decode runs taking part as one
 * summary (how many, the sum of the stripes, npu_kv_stripe, their contexts end in, and the
 * sum of their pool blocks: their attention reads that many stripes, and decode rows that
 * moved by a few tokens, or swapped requests of alike contexts, share it). Within an
 * iteration every layer of a class has the very same rows. Across iterations a class is
 * reused only if it has prefill rows: layered prefill runs the same prompt through one layer
 * group per iteration. Decode-only classes are recorded afresh every iteration.
 *
 * Shape keys (bootarg reuse_shapes, `--layer-reuse shapes`): a prefill run is keyed by its
 * row count, pool blocks and where its context ends, not by request and position, the decode
 * summary by the sum of where their contexts end, and every class, decode-only ones too, is
 * reused across iterations. A class serves a key whose context ends are each within half a
 * stripe of its own and a quarter of the context (the nearest such class; key_distance): a
 * rank's share of a context (KV blocks dealt round-robin) then differs by at most one block,
 * a short context's by at most a quarter. A batch of more than EXEC_REUSE_ROWS - 1 prefill
 * runs is not keyed: its layers run in full. An iteration with prefill rows takes a looser
 * key (mixed_distance): the same rows in all, each run's rows within EXEC_REUSE_ROW_SLACK
 * (a chunk shrinks by the decode rows beside it: one token budget), and the decode summary
 * within that slack and EXEC_REUSE_DECODE_STRIPES stripes; the stage's last layer, one of
 * many, looser still. So chunked prefill's chunks of alike contexts share one recorded layer
 * whichever requests decode beside them; what the replay does not follow is the routing
 * draws, that block and the decode rows' contexts (docs/images.md, "Layer reuse", measured
 * against full simulation).
 *
 * Every rank of a group decides the same way (the decision depends only on the program,
 * the batch and the iteration count), so collectives stay matched. Modelled: the chip time,
 * energy, traffic and per-layer statistics of a layer like the one recorded. Not modelled:
 * each replayed layer's own routing (its experts and rows are the recorded layer's), the
 * data (refused in functional mode), and contention between a replayed layer and other
 * cores' work (the ranks of a group replay together; other groups' traffic does not meet
 * a replayed layer's).
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "model_exec.h"
#include "noc/collective.h"
#include "npu_layout.h"
#include "npu/engine.h"
#include "npu/hal.h"
#include "npu/wait.h"

int exec_reuse_init(struct exec_model *m)
{
    m->treuse.enabled = hal_bootarg_has("reuse_tiles"); /* shape keys, and tiles inside */
    m->lreuse.shapes = m->treuse.enabled || hal_bootarg_has("reuse_shapes");
    m->lreuse.enabled = m->lreuse.shapes || hal_bootarg_has("layer_reuse");
    m->lreuse.tol = npu_kv_stripe(m->plan) / 2;
    if (m->lreuse.enabled && !m->plan->mode) {
        if (hal_self()->core_id == 0) /* every core refuses; one says why */
            printf("MODEL error: core %u: layer_reuse needs a performance-mode image (a "
                   "functional run computes every layer)\n", hal_self()->core_id);
        return NPU_ERR_STATE;
    }
    return NPU_OK;
}

static bool is_layer_op(const struct npu_prog_op *op)
{
    return op->kind == NPU_OP_STAGE || op->kind == NPU_OP_ATTENTION ||
           op->kind == NPU_OP_FFN || op->kind == NPU_OP_MOE;
}

/* The number of ops of the layer ops[0] starts (0: ops[0] is no layer op). */
static uint32_t layer_ops(const struct npu_prog_op *ops, uint32_t nops)
{
    uint32_t n = 0;
    while (n < nops && is_layer_op(&ops[n]) && ops[n].layer == ops[0].layer)
        n++;
    return n;
}

static bool same_ops(const struct npu_prog_op *a, const struct npu_prog_op *b, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (a[i].kind != b[i].kind || a[i].flags != b[i].flags)
            return false;
    return true;
}

/* Layers of `per` ops alike (kinds and flags) in consecutive layers from ops[0] on, as the
   program has them. The program stays put in the image for the boot, so the answers are
   kept by where they start (the walk over every layer's ops, twice an iteration, was 3 %
   of a serving run's guest instructions). */
#define RUN_MEMO 8u
static struct {
    const struct npu_prog_op *ops;
    uint32_t nops, per, n;
} run_memo[RUN_MEMO];
static uint32_t run_memo_next;

static uint32_t program_run(const struct npu_prog_op *ops, uint32_t nops, uint32_t per)
{
    for (uint32_t i = 0; i < RUN_MEMO; i++)
        if (run_memo[i].ops == ops && run_memo[i].nops == nops && run_memo[i].per == per)
            return run_memo[i].n;
    uint32_t n = 1;
    while ((n + 1) * per <= nops) {
        const struct npu_prog_op *next = ops + n * per;
        if (layer_ops(next, nops - n * per) != per || !same_ops(ops, next, per) ||
            next->layer != ops[0].layer + n)
            break;
        n++;
    }
    const uint32_t at = run_memo_next++ % RUN_MEMO;
    run_memo[at].ops = ops, run_memo[at].nops = nops, run_memo[at].per = per, run_memo[at].n = n;
    return n;
}

/* Layers in the run ops[0] (a layer op) starts, each of `per` ops: the program's run, up
   to where batch b's prefill runs join or leave (exec_op_runs_all changes at layer0 and
   at layer1). */
static uint32_t run_layers(const struct npu_prog_op *ops, uint32_t nops, uint32_t per,
                           const struct exec_batch *b)
{
    const uint32_t n = program_run(ops, nops, per), l = ops[0].layer;
    if (b->layer0 >= b->layer1)
        return n; /* no layer runs the prefill runs: nothing changes along the run */
    const uint32_t edge = l < b->layer0 ? b->layer0 : l < b->layer1 ? b->layer1 : UINT32_MAX;
    return edge - l < n ? edge - l : n;
}

/* The key of the layer ops[0..per) in batch b (its rows: every run when exec_op_runs_all,
   else the decode runs); false if the layer has too many ops or prefill runs to key. */
static bool make_key(const struct exec_model *m, const struct npu_prog_op *ops, uint32_t per,
                     const struct exec_batch *b, struct exec_reuse_class *k)
{
    if (per > EXEC_REUSE_OPS)
        return false;
    memset(k, 0, offsetof(struct exec_reuse_class, span_ps));
    for (uint32_t i = 0; i < per; i++)
        k->kinds[i] = ops[i].kind, k->flags[i] = ops[i].flags;
    k->nops = per, k->all = exec_op_runs_all(&ops[0], b);
    const uint32_t stripe = npu_kv_stripe(m->plan);
    struct exec_reuse_row dec = { .req = EXEC_REUSE_DECODES };
    for (uint32_t i = k->all ? 0 : b->nprefill; i < b->nruns; i++) {
        const struct exec_run *r = &b->runs[i];
        if (i >= b->nprefill) { /* a decode run: into the summary */
            dec.count++, dec.nblocks += r->nblocks;
            dec.pos += m->lreuse.shapes ? r->pos + r->count
                                       : (r->pos + r->count + stripe - 1) / stripe;
            continue;
        }
        if (k->nrows + 1 >= EXEC_REUSE_ROWS) /* keep a row for the decode summary */
            return false;
        k->rows[k->nrows++] = m->lreuse.shapes
            ? (struct exec_reuse_row){ .count = r->count, .nblocks = r->nblocks,
                                       .pos = r->pos + r->count }
            : (struct exec_reuse_row){ .req = r->req, .count = r->count, .nblocks = r->nblocks,
                                       .pos = r->pos };
        k->prefill = true;
    }
    if (dec.count)
        k->rows[k->nrows++] = dec;
    return true;
}

uint64_t exec_reuse_end_gap(const struct exec_model *m, uint32_t recorded, uint32_t end,
                           uint64_t runs)
{
    const uint32_t d = recorded > end ? recorded - end : end - recorded;
    uint64_t tol = m->lreuse.shapes ? m->lreuse.tol * runs : 0;
    tol = tol < end / 4 ? tol : end / 4; /* and a quarter of the context */
    return d <= tol ? d : UINT64_MAX;
}

static uint32_t absdiff(uint32_t a, uint32_t b)
{
    return a > b ? a - b : b - a;
}

/* A key's prefill runs (its rows before the decode summary) and all its rows. */
static uint32_t key_prefill_runs(const struct exec_reuse_class *k)
{
    return k->nrows && k->rows[k->nrows - 1].req == EXEC_REUSE_DECODES ? k->nrows - 1 : k->nrows;
}

static uint32_t key_total_rows(const struct exec_reuse_class *k)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < k->nrows; i++)
        n += k->rows[i].count; /* a decode run is one row */
    return n;
}

/* Shape keys, an iteration with prefill rows (docs/images.md, "Iterations with prefill
   rows"): the same prefill runs and the same rows in all (so the same MoE and GEMM work),
   each run's rows within EXEC_REUSE_ROW_SLACK (a decode row more is a chunk row less: the
   token budget) and its context end within the tolerance; the decode summary's runs within
   the slack and the sum of their context ends within EXEC_REUSE_DECODE_STRIPES stripes
   (their attention is a few percent of a chunk's layer), but for a prompt's first chunk
   (no context before it: its attention is short, and each decode row's shows on the
   critical path, about 5 % of a 512-row chunk's layer on Qwen3-30B-A3B, none from the
   second chunk on). The stage's last layer (k->last: one layer of many in the iteration)
   takes 4 times the tolerance and any decode rows. */
static uint64_t mixed_distance(const struct exec_model *m, const struct exec_reuse_class *c,
                               const struct exec_reuse_class *k)
{
    const uint32_t np = key_prefill_runs(k), slack = k->last ? 4 * EXEC_REUSE_ROW_SLACK
                                                             : EXEC_REUSE_ROW_SLACK;
    if (key_prefill_runs(c) != np || key_total_rows(c) != key_total_rows(k))
        return UINT64_MAX;
    uint64_t dist = 0;
    uint32_t dec_slack = slack;
    for (uint32_t i = 0; i < np; i++) {
        const struct exec_reuse_row *a = &c->rows[i], *b = &k->rows[i];
        const uint32_t d = absdiff(a->pos, b->pos);
        if (b->pos <= b->count && !k->last)
            dec_slack = 0; /* a prompt's first chunk: each decode row's attention shows */
        const uint64_t gap = !k->last ? exec_reuse_end_gap(m, a->pos, b->pos, 1)
                             : d <= 4ull * m->lreuse.tol ? d : UINT64_MAX;
        if (a->nblocks != b->nblocks || absdiff(a->count, b->count) > slack || gap == UINT64_MAX)
            return UINT64_MAX;
        dist += gap + absdiff(a->count, b->count);
    }
    const struct exec_reuse_row none = { .req = EXEC_REUSE_DECODES };
    const struct exec_reuse_row *a = np < c->nrows ? &c->rows[np] : &none;
    const struct exec_reuse_row *b = np < k->nrows ? &k->rows[np] : &none;
    const uint32_t stripes = EXEC_REUSE_DECODE_STRIPES, d = absdiff(a->pos, b->pos);
    if (!k->last && (absdiff(a->count, b->count) > dec_slack || d > stripes * 2 * m->lreuse.tol ||
                     absdiff(a->nblocks, b->nblocks) > stripes + slack))
        return UINT64_MAX;
    return dist + d / 8 + absdiff(a->count, b->count);
}

/* How far class c's rows are from key k's: 0 if equal, UINT64_MAX if c cannot serve k.
   Shape keys take context ends within the tolerance (m->lreuse.tol positions per run). */
static uint64_t key_distance(const struct exec_model *m, const struct exec_reuse_class *c,
                             const struct exec_reuse_class *k)
{
    if (c->nops != k->nops || c->all != k->all || c->ahead != k->ahead || c->head != k->head ||
        c->sample != k->sample || c->last != k->last || c->prefill != k->prefill ||
        memcmp(c->kinds, k->kinds, sizeof(c->kinds)) ||
        memcmp(c->flags, k->flags, sizeof(c->flags)))
        return UINT64_MAX;
    if (m->lreuse.shapes && k->prefill)
        return mixed_distance(m, c, k);
    if (c->nrows != k->nrows)
        return UINT64_MAX;
    uint64_t dist = 0;
    for (uint32_t i = 0; i < k->nrows; i++) {
        const struct exec_reuse_row *a = &c->rows[i], *b = &k->rows[i];
        if (a->req != b->req || a->count != b->count || a->nblocks != b->nblocks)
            return UINT64_MAX;
        const uint64_t d = exec_reuse_end_gap(m, a->pos, b->pos,
                                               b->req == EXEC_REUSE_DECODES ? b->count : 1);
        if (d == UINT64_MAX)
            return UINT64_MAX;
        dist += d;
    }
    return dist;
}

static uint64_t sig_mix(uint64_t h, uint64_t v)
{
    return (h ^ v) * 0x100000001b3ull; /* FNV-1a's prime, a word at a time */
}

/* A hash of k's fields that key_distance compares exactly (not the context ends; under
   shape keys with prefill rows, not the rows of each run either: mixed_distance): classes
   whose hash differs from a key's cannot serve it, so the search over the slots tests the
   hash alone for most of them (the walk over the slots cost 4 % of a chunked serving run's
   guest instructions). */
static uint64_t class_sig(const struct exec_model *m, const struct exec_reuse_class *k)
{
    const bool mixed = m->lreuse.shapes && k->prefill;
    uint64_t h = sig_mix(0xcbf29ce484222325ull, k->nops);
    h = sig_mix(h, (uint64_t)k->all | (uint64_t)k->ahead << 1 | (uint64_t)k->head << 2 |
                       (uint64_t)k->last << 3 | (uint64_t)k->prefill << 4 |
                       (uint64_t)k->sample << 8 |
                       (uint64_t)(mixed ? key_prefill_runs(k) : k->nrows) << 32);
    for (uint32_t i = 0; i < k->nops && i < EXEC_REUSE_OPS; i++)
        h = sig_mix(h, (uint64_t)k->kinds[i] | (uint64_t)k->flags[i] << 16);
    if (mixed) {
        h = sig_mix(h, key_total_rows(k));
        for (uint32_t i = 0; i < key_prefill_runs(k); i++)
            h = sig_mix(h, (uint64_t)k->rows[i].req ^ (uint64_t)k->rows[i].nblocks << 32);
        return h;
    }
    for (uint32_t i = 0; i < k->nrows; i++)
        h = sig_mix(h, (uint64_t)k->rows[i].req ^ (uint64_t)k->rows[i].count << 32 ^
                           (uint64_t)k->rows[i].nblocks << 48);
    return h;
}

/* The bucket of a hash: its top bits (sig_mix's product mixes the high bits best). */
_Static_assert(EXEC_REUSE_LAYER_SLOTS <= 64, "a bucket's slots in one word");
_Static_assert(EXEC_REUSE_SIG_BUCKETS == 16, "sig_bucket takes the top 4 bits");
static uint32_t sig_bucket(uint64_t sig)
{
    return (uint32_t)(sig >> 60);
}

/* The index of x's lowest set bit (x != 0), by a de Bruijn sequence: the cores have no
   count-trailing-zeros instruction, and libgcc's loop cost a quarter of the search. */
static uint32_t lowest_bit(uint64_t x)
{
    static const uint8_t at[64] = {
        0,  1,  2,  53, 3,  7,  54, 27, 4,  38, 41, 8,  34, 55, 48, 28,
        62, 5,  39, 46, 44, 42, 22, 9,  24, 35, 59, 56, 49, 18, 29, 11,
        63, 52, 6,  26, 37, 40, 33, 47, 61, 45, 43, 21, 23, 58, 17, 10,
        51, 25, 36, 32, 60, 20, 57, 16, 50, 31, 19, 15, 30, 14, 13, 12,
    };
    return at[((x & -x) * 0x022fdd63cc95386dull) >> 58];
}

/* Slot i's class has hash sig from now on. */
static void set_sig(struct exec_model *m, uint32_t i, uint64_t sig)
{
    m->lreuse.bucket[sig_bucket(m->lreuse.sig[i])] &= ~(1ull << i);
    m->lreuse.sig[i] = sig;
    m->lreuse.bucket[sig_bucket(sig)] |= 1ull << i;
}

/* The recorded class nearest key k that may serve this iteration, or NULL. The slots of
   the key's bucket in ascending order: the same first nearest a walk over every slot finds
   (a walk over the 64 was 9 % of the cores' guest instructions and a fifth of their
   translated blocks in a decode iteration). */
static struct exec_reuse_class *find_class(struct exec_model *m,
                                           const struct exec_reuse_class *k)
{
    struct exec_reuse_class *best = NULL;
    uint64_t best_dist = UINT64_MAX;
    const uint64_t sig = class_sig(m, k);
    for (uint64_t left = m->lreuse.bucket[sig_bucket(sig)]; left; left &= left - 1) {
        const uint32_t i = lowest_bit(left);
        struct exec_reuse_class *c = &m->lreuse.classes[i];
        if (m->lreuse.sig[i] != sig || !c->last_used ||
            !(c->iteration == m->acct.iterations || c->prefill || m->lreuse.shapes))
            continue;
        const uint64_t d = key_distance(m, c, k);
        if (d < best_dist)
            best = c, best_dist = d;
        if (d == 0)
            break; /* the nearest: the first at distance 0, as the whole scan would find */
    }
    return best;
}

/* A slot for a new class: a free one, else the least recently used unless this iteration
   uses it; NULL if none. */
static struct exec_reuse_class *new_class(struct exec_model *m)
{
    struct exec_reuse_class *lru = NULL;
    for (uint32_t i = 0; i < EXEC_REUSE_LAYER_SLOTS; i++) {
        struct exec_reuse_class *c = &m->lreuse.classes[i];
        if (!c->last_used)
            return c;
        if (c->last_used != m->acct.iterations + 1 && (!lru || c->last_used < lru->last_used))
            lru = c;
    }
    return lru;
}

static int refused(int rc, const char *what, uint32_t slot)
{
    printf("MODEL error: core %u: the chip refused replay %s on slot %u (%d)\n",
           hal_self()->core_id, what, slot, rc);
    return rc;
}

int exec_record_begin(struct exec_model *m, uint32_t slot, struct exec_recording *r)
{
    exec_attention_kept_drop(); /* a recording starts from no kept steps, as its replays */
    exec_charge(m);
    int rc = exec_drain(m); /* the engines are idle from here, the second DMA queue too */
    if (rc != NPU_OK)
        return rc;
    /* The group starts together: a rank that began early would wait for the others in the
       first collective, record a longer span and replay that difference every time (and
       consecutive replays, sleeps with no collective between them, would add up the
       ranks' differences until a collective timed out). */
    rc = m->comm ? noc_barrier(m->comm) : NPU_OK;
    if (rc != NPU_OK)
        return rc;
    r->slot = slot, r->before = m->acct.stats[m->acct.layer];
    rc = engine_replay(NPU_REPLAY_OP_BEGIN, slot, 0);
    if (rc != NPU_OK)
        return refused(rc, "BEGIN", slot);
    r->t0 = hal_time_ps();
    return NPU_OK;
}

int exec_record_end(struct exec_model *m, const struct exec_recording *r, uint64_t *span_ps,
                    struct exec_stats *delta)
{
    exec_charge(m); /* runs what is queued, charges it to this layer */
    int rc = exec_drain(m); /* loads ahead (the next layer's shares) count in the recording */
    if (rc == NPU_OK)
        rc = engine_replay(NPU_REPLAY_OP_END, r->slot, 0);
    if (rc != NPU_OK)
        return refused(rc, "END", r->slot);
    *span_ps = hal_time_ps() - r->t0;
    *delta = m->acct.stats[m->acct.layer];
    exec_stats_sub(delta, &r->before);
    memset(delta->descs, 0, sizeof(delta->descs)); /* descs: what the emulator ran */
    return NPU_OK;
}

int exec_replay_slot(struct exec_model *m, uint32_t slot, uint32_t count, uint64_t span_ps)
{
    exec_attention_kept_drop(); /* what it stands for would have moved the step ring */
    exec_charge(m);
    int rc = exec_drain(m); /* REPEAT wants this core's engines idle */
    if (rc == NPU_OK)
        rc = engine_replay(NPU_REPLAY_OP_REPEAT, slot, count);
    if (rc != NPU_OK)
        return refused(rc, "REPEAT", slot);
    rc = hal_sleep_ps(span_ps * count);
    exec_rebase_cat(m); /* the replay charged the layers itself */
    return rc;
}

/* The layer's MoE or dense FFN op among ops[0..per), or NULL. */
static const struct npu_prog_op *ffn_op(const struct npu_prog_op *ops, uint32_t per)
{
    for (uint32_t i = 0; i < per; i++)
        if (ops[i].kind == NPU_OP_MOE || ops[i].kind == NPU_OP_FFN)
            return &ops[i];
    return NULL;
}

/* Whether layer ops[0..per)'s MoE or FFN op loads the next layer's first attention steps
   as it runs where that layer follows over the same rows (exec_op_prefetches_attention). */
static bool kv_path(const struct exec_model *m, const struct npu_prog_op *ops, uint32_t per,
                    const struct exec_batch *b)
{
    const struct npu_prog_op *f = ffn_op(ops, per);
    return f && exec_op_prefetches_attention(m, f, exec_op_rows(f, b));
}

/* Whether it does so here (run_ops's attn_next): the next layer's attention runs over the
   same rows on this stage. */
static bool kv_steady(const struct exec_model *m, const struct npu_prog_op *ops, uint32_t per,
                      const struct exec_batch *b)
{
    const struct npu_prog_op attn = { .kind = NPU_OP_ATTENTION, .layer = ops[0].layer + 1 };
    return exec_next_on_stage(m, ops[0].layer, b) && kv_path(m, ops, per, b) &&
           exec_op_runs_all(&attn, b) == exec_op_runs_all(ffn_op(ops, per), b);
}

/* Whether the layer before l loaded l's shares while it ran (exec_stage_ahead). */
static bool stage_before(const struct exec_model *m, uint32_t l, const struct exec_batch *b)
{
    return l > 0 && exec_stage_ahead(m, l - 1, b);
}

/* Runs layer ops[0..per) in full, recording it in class c (slot c - m->lreuse.classes),
   in the steady state of a run of layers: its shares and its attention's first steps
   taken as loaded by the layer before (run_preload loaded them where none did), the next
   layer's loaded while it runs (exec_stage_ahead, kv_steady), so that the recording holds
   one layer's loads as each replay stands for. */
static int record_layer(struct exec_model *m, const struct npu_prog_op *ops, uint32_t per,
                        const struct exec_batch *b, struct exec_reuse_class *c)
{
    static struct exec_recording r; /* exec_stats: not on the hart's small stack */
    const uint32_t l = ops[0].layer;
    const bool kv = kv_steady(m, ops, per, b);
    if (ops[0].kind == NPU_OP_STAGE)
        exec_stage_steady(m, l, stage_before(m, l, b) || m->w.staged_next == l + 1, false);
    exec_set_layer(m, l);
    int rc = exec_record_begin(m, (uint32_t)(c - m->lreuse.classes), &r);
    m->lreuse.kv_steady = kv_path(m, ops, per, b);
    for (uint32_t i = 0; rc == NPU_OK && i < per; i++) {
        m->attn_next = kv && &ops[i] == ffn_op(ops, per);
        rc = exec_op(m, &ops[i], b, NULL, NULL);
        m->attn_next = false;
    }
    m->lreuse.kv_steady = false;
    rc = rc == NPU_OK ? exec_record_end(m, &r, &c->span_ps, &c->delta) : rc;
    c->head_loaded = m->w.head_ahead, c->head_half = m->w.stream_half;
    /* the next layer's steps were loaded for the replays' sake: no attention takes them */
    exec_attention_prefetch_drop();
    return rc;
}

/* The replays' statistics per layer, added lazily: per layer, the class last replayed on
   it and how many of its replays are not added yet. A decode step replays each layer with
   the class it replayed in the step before, so a replay mostly counts one word where it
   added a struct exec_stats (5 % of the cores' guest instructions in a layered serving run:
   docs/results.md). Settled before the class's slot takes another class (its delta
   changes: run_classes) and before the statistics are read (exec_reuse_settle); a layer's
   recording reads only the difference its own work makes. */
static uint8_t pend_class[EXEC_LAYERS_MAX];
static uint16_t pend_n[EXEC_LAYERS_MAX];

static void settle_layer(struct exec_model *m, uint32_t l)
{
    if (pend_n[l])
        exec_stats_add_times(&m->acct.stats[l], &m->lreuse.classes[pend_class[l]].delta,
                             pend_n[l]);
    pend_n[l] = 0;
}

/* Settles the layers whose pending replays are of slot c's class. */
static void settle_class(struct exec_model *m, const struct exec_reuse_class *c)
{
    const uint32_t slot = (uint32_t)(c - m->lreuse.classes);
    for (uint32_t l = 0; l < m->cfg->num_layers; l++)
        if (pend_n[l] && pend_class[l] == slot)
            settle_layer(m, l);
}

void exec_reuse_settle(struct exec_model *m)
{
    for (uint32_t l = 0; l < m->cfg->num_layers; l++)
        settle_layer(m, l);
}

/* Layers first + j stride, j < count, but `skip` replay class c. */
static int replay_layers(struct exec_model *m, const struct exec_reuse_class *c, uint32_t first,
                         uint32_t count, uint32_t stride, uint32_t skip)
{
    const uint32_t slot = (uint32_t)(c - m->lreuse.classes);
    _Static_assert(EXEC_REUSE_LAYER_SLOTS <= 256, "a layer class's slot in a byte");
    uint32_t reps = 0;
    for (uint32_t j = 0; j < count; j++) {
        const uint32_t l = first + j * stride;
        if (l == skip)
            continue;
        if (pend_n[l] && (pend_class[l] != slot || pend_n[l] == UINT16_MAX))
            settle_layer(m, l);
        pend_class[l] = (uint8_t)slot, pend_n[l]++, reps++;
    }
    if (reps == 0)
        return NPU_OK;
    m->lreuse.counts[EXEC_REUSE_REPLAYED] += reps;
    return exec_replay_slot(m, (uint32_t)(c - m->lreuse.classes), reps, c->span_ps);
}

/* The steady state's start (record_layer): layer l0 of a run loads what the layer before
   loaded for it in the full run (its shares, its attention's first steps) now, before any
   recording or replay, as the full run does where no layer before it did so. */
static void run_preload(struct exec_model *m, const struct npu_prog_op *ops, uint32_t per,
                        const struct exec_batch *b)
{
    const uint32_t l0 = ops[0].layer;
    if (ops[0].kind == NPU_OP_STAGE && exec_stage_ahead(m, l0, b) && !stage_before(m, l0, b) &&
        m->w.staged_next != l0 + 1)
        exec_stage_steady(m, l0, true, true);
    if (kv_path(m, ops, per, b) && m->lreuse.kv_next != l0 + 1)
        for (uint32_t i = 0; i < per; i++)
            if (ops[i].kind == NPU_OP_ATTENTION)
                exec_attention_preload(m, &ops[i], b);
    m->lreuse.kv_next = 0;
}

/* Shape keys: the run is the stage's last layer alone, and the batch's prefill runs take
   part in it and in at least EXEC_REUSE_LAST_MIN - 1 layers of the stage before it (not a
   short layer group of layered prefill): its class stands for one layer of many in the
   iteration, and takes the looser key (mixed_distance). */
static bool is_last_of_many(const struct exec_model *m, const struct exec_batch *b,
                            uint32_t l0, uint32_t n, bool ahead)
{
    const uint32_t per = m->plan->stage_layers, s0 = l0 - l0 % per;
    const uint32_t from = b->layer0 > s0 ? b->layer0 : s0; /* the runs' first layer here */
    return m->lreuse.shapes && n == 1 && !ahead && l0 - s0 == per - 1 && b->layer1 > l0 &&
           from <= l0 && l0 + 1 - from >= EXEC_REUSE_LAST_MIN;
}

/* How many of the run's n layers record (key k): EXEC_REUSE_SAMPLES for decode rows alone,
   so that the replays stand for every S-th layer's routing draw rather than one's: a
   decode step of few rows touches few experts, and whether two of its slices meet on one
   rank changes a layer's time by half (Qwen3-30B-A3B, one row: about 134 against 213 us);
   else one. Few rows: the extra recordings cost little. */
static uint32_t run_samples(const struct exec_reuse_class *k, uint32_t n)
{
    return !k->prefill && n >= 2 * EXEC_REUSE_SAMPLES ? EXEC_REUSE_SAMPLES : 1;
}

/* The run's S classes (key k, sample s) into cs[], found or new; skips[s]: the layer a new
   class records (else none: l0 + n). False, with none kept, if a slot is short. */
static bool run_classes(struct exec_model *m, struct exec_reuse_class *k, uint32_t l0,
                        uint32_t n, uint32_t S, struct exec_reuse_class **cs, uint32_t *skips)
{
    const uint32_t it = m->acct.iterations;
    bool fresh[EXEC_REUSE_SAMPLES] = { false };
    for (uint32_t s = 0; s < S; s++) {
        k->sample = s, skips[s] = l0 + n;
        struct exec_reuse_class *c = find_class(m, k);
        if (!c && (c = new_class(m)) != NULL) {
            settle_class(m, c); /* its delta is about to change */
            *c = *k, c->iteration = it, fresh[s] = true;
            set_sig(m, (uint32_t)(c - m->lreuse.classes), class_sig(m, c));
            skips[s] = l0 + s + S * (it % ((n - s + S - 1) / S)); /* rotates */
        }
        if (!c) {
            for (uint32_t i = 0; i < s; i++)
                if (fresh[i])
                    cs[i]->last_used = 0; /* free again */
            return false;
        }
        c->last_used = it + 1; /* taken: new_class passes it over */
        cs[s] = c;
    }
    return true;
}

int exec_reuse_layers(struct exec_model *m, const struct npu_prog_op *ops, uint32_t nops,
                      const struct exec_batch *b, uint32_t *used)
{
    static struct exec_reuse_class key; /* 1.2 KiB: not on the hart's small stack */
    const uint32_t per = layer_ops(ops, nops);
    *used = 0;
    if (per == 0 || !exec_op_has_rows(&ops[0], b) || !make_key(m, ops, per, b, &key))
        return NPU_OK; /* not a layer, or nothing to run: the caller runs it as it is */
    const uint32_t l0 = ops[0].layer;
    uint32_t n = run_layers(ops, nops, per, b);
    if (n > 1 && !exec_next_on_stage(m, l0 + n - 1, b))
        n--; /* the stage's last layer loads nothing ahead: a class of its own */
    key.ahead = exec_next_on_stage(m, l0 + n - 1, b);
    key.head = m->head_due && l0 + n == m->cfg->num_layers;
    key.last = is_last_of_many(m, b, l0, n, key.ahead);
    const bool kv = kv_steady(m, ops, per, b);
    const uint32_t S = run_samples(&key, n);
    struct exec_reuse_class *cs[EXEC_REUSE_SAMPLES];
    uint32_t skips[EXEC_REUSE_SAMPLES];
    *used = n * per;
    if (!run_classes(m, &key, l0, n, S, cs, skips)) { /* every slot serves this iteration */
        int rc = NPU_OK;
        for (uint32_t i = 0; rc == NPU_OK && i < n * per; i++)
            rc = exec_op(m, &ops[i], b, NULL, NULL);
        m->lreuse.counts[EXEC_REUSE_FULL] += n;
        m->lreuse.kv_next = 0;
        return rc;
    }
    run_preload(m, ops, per, b);
    int rc = NPU_OK;
    for (uint32_t s = 0; rc == NPU_OK && s < S; s++)
        if (skips[s] < l0 + n) {
            rc = record_layer(m, ops + (skips[s] - l0) * per, per, b, cs[s]);
            m->lreuse.counts[EXEC_REUSE_RECORDED] += rc == NPU_OK;
        }
    for (uint32_t s = 0; rc == NPU_OK && s < S; s++)
        rc = replay_layers(m, cs[s], l0 + s, (n - s + S - 1) / S, S, skips[s]);
    if (key.head && skips[0] >= l0 + n) /* replayed: the LM head's first piece loaded in it */
        m->w.head_ahead = cs[0]->head_loaded, m->w.stream_half = cs[0]->head_half;
    /* the run's last layer loaded the next one's shares and steps (a replay stood for it) */
    if (ops[0].kind == NPU_OP_STAGE && exec_stage_ahead(m, l0 + n - 1, b))
        m->w.staged_next = l0 + n + 1;
    m->lreuse.kv_next = kv ? l0 + n + 1 : 0;
    return rc;
}
