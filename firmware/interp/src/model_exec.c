/* SPDX-License-Identifier: MIT */
/* Chains, weight GEMMs, staging and the iteration loop of the interpreter (model_exec.h). */
#include "model_exec.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "model_hazard.h"
#include "npu/dma.h"
#include "npu/hal.h"
#include "npu/matrix.h"
#include "npu/vector.h"
#include "npu/wait.h"

#define CHAIN_MAX 256u

/* The chain being built: engine scratch of this core (run by exec_flush), not model state,
   so not in struct exec_model. Descriptors are ordered by their data, not one after
   another, and exec_flush does not wait for the side ones (expert-ring loads and the next
   layer's staged shares, on the second DMA queue; model_hazard.h). */
static struct npu_desc chain[CHAIN_MAX];
static uint32_t nchain;
static const struct exec_model *chain_model; /* for chain_submit's report (one a core) */

/* A refused chain is a firmware bug: name the descriptors next to the emulator's log. */
static void print_chain(const struct exec_model *m, int rc)
{
    printf("MODEL error: the engines refused a chain (%d), layer %u, category %d:\n", rc,
           m->acct.layer, (int)m->acct.cat);
    for (uint32_t i = 0; i < nchain; i++)
        printf("  desc %u: engine %u op %u a %#llx b %#llx c %#llx d %#llx m %u n %u k %u "
               "ld %u/%u/%u/%u\n", i, chain[i].engine, chain[i].op,
               (unsigned long long)chain[i].a, (unsigned long long)chain[i].b,
               (unsigned long long)chain[i].c, (unsigned long long)chain[i].d, chain[i].m,
               chain[i].n, chain[i].k, chain[i].lda, chain[i].ldb, chain[i].ldc, chain[i].ldd);
}

/* Outstanding descriptors a queue may hold after a put: room for the chain (CHAIN_MAX)
   and a collective's own (NOC_COMM_QUEUED_MAX and its chains) in the 1024 of a queue. */
#define PUT_MOST 512u
_Static_assert(PUT_MOST >= CHAIN_MAX, "hz_make_room never waits for unput descriptors");

/* Puts the descriptors built so far on the engines, without waiting for them (but for
   room in the queues). */
static int chain_put(const struct exec_model *m)
{
    if (nchain == 0)
        return NPU_OK;
    int rc = hz_make_room(PUT_MOST);
    if (rc == NPU_OK)
        rc = engine_submit(chain, nchain);
    if (rc != NPU_OK) {
        print_chain(m, rc);
        return rc;
    }
    nchain = 0;
    return NPU_OK;
}

int exec_flush(struct exec_model *m)
{
    /* HAZARD: an empty chain does not mean idle engines: what an earlier put (a category
       switch, exec_wait_for, a third wait) submitted may still run, so always wait */
    int rc = chain_put(m);
    return rc != NPU_OK ? rc : hz_wait_flush();
}

int exec_wait_for(struct exec_model *m, uint64_t addr, uint64_t bytes)
{
    int rc = chain_put(m); /* on the engines, so that what is waited for runs */
    return rc != NPU_OK ? rc : hz_wait_range(hz_span(addr, 1, 0, bytes));
}

int exec_wait_for_collective(struct exec_model *m, uint64_t addr, uint64_t bytes)
{
    /* HAZARD: the agreement refuses a collective (COLL_BUSY, on every rank) while more than
       NOC_COMM_QUEUED_MAX vector descriptors are queued: the next tile's softmax steps
       may be */
    int rc = exec_wait_for(m, addr, bytes);
    return rc != NPU_OK ? rc : hz_make_room_on(HZ_VECTOR, NOC_COMM_QUEUED_MAX);
}

/* chain_put for hz_set_submit: a refused chain is a firmware bug. */
static void chain_submit(void)
{
    int rc = chain_put(chain_model);
    assert(rc == NPU_OK && "the engines refused a model chain");
    (void)rc;
}

int exec_drain(struct exec_model *m)
{
    int rc = exec_flush(m);
    return rc == NPU_OK ? hz_wait_all() : rc;
}

void exec_chain_init(const struct exec_model *m)
{
    chain_model = m;
    hz_set_submit(chain_submit);
}

/* The next descriptor's slot and its sync on engine e (hz_sync): a full chain is run
   first (its order is kept; it must be flushed before this one counts), and the slot is
   taken after hz_sync, which may put the chain built so far on the engines (a third wait,
   hz_set_submit) and must not submit an unfilled slot. */
static struct npu_desc *push(struct exec_model *m, enum hz_engine e, const struct hz_access *h,
                             bool side, struct engine_sync *sync)
{
    if (nchain == CHAIN_MAX) {
        int rc = exec_flush(m);
        assert(rc == NPU_OK && "the engines refused a model chain");
        (void)rc;
    }
    *sync = hz_sync(e, h, side);
    exec_attention_kept_written(h);
    return &chain[nchain++];
}

/* Charges the hart's time and counters since the last charge to the running category and
   layer, then switches to cat (exec_set_cat, exec_charge, exec_charge_now). */
static void charge_to(struct exec_model *m, enum exec_cat cat)
{
    uint64_t now = hal_time_ps(), flops = engine_perf_read(NPU_PERF_FLOPS);
    uint64_t hbm = engine_perf_read(NPU_PERF_HBM_BYTES);
    uint64_t noc = engine_perf_read(NPU_PERF_NOC_BYTE_HOPS);
    uint64_t descs = engine_perf_read(NPU_PERF_DESCS);
    struct exec_stats *s = &m->acct.stats[m->acct.layer];
    s->ps[m->acct.cat] += now - m->acct.cat_t0;
    s->flops[m->acct.cat] += flops - m->acct.cat_flops0;
    s->hbm_bytes[m->acct.cat] += hbm - m->acct.cat_hbm0;
    s->noc_byte_hops[m->acct.cat] += noc - m->acct.cat_noc0;
    s->descs[m->acct.cat] += descs - m->acct.cat_descs0;
    m->acct.cat = cat, m->acct.cat_t0 = now, m->acct.cat_flops0 = flops, m->acct.cat_hbm0 = hbm;
    m->acct.cat_noc0 = noc, m->acct.cat_descs0 = descs;
}

/* Charges the hart's time, FLOPs and HBM bytes since the last switch to the category that
   was running, then switches, without waiting for the engines: descriptors queued in one
   category may still run (the engines overlapping) while the hart is in the next, so a
   category is the hart's time in it, and the layer's sum is exact (exec_charge). A switch
   to the collectives puts the chain on the engines: the hart is about to wait in a
   collective, and what was issued since the last flush (the expert ring's loads, as a MoE
   dispatch starts) must run meanwhile. Not at every switch: each put is a submit the
   emulator handles, and puts everywhere cost the reference serving run 13 % more wall
   time (7 min 9 s against 6 min 18 s) for the same chip time. */
void exec_set_cat(struct exec_model *m, enum exec_cat cat)
{
    int rc = cat == EXEC_CAT_COLL ? chain_put(m) : NPU_OK;
    assert(rc == NPU_OK && "the engines refused a model chain");
    (void)rc;
    /* the same category goes on: its sums come out the same charged at its end (each
       charge reads five of the chip's counters, an exit from the emulated hart each) */
    if (cat != m->acct.cat)
        charge_to(m, cat);
}

_Static_assert(sizeof(struct exec_stats) % sizeof(uint64_t) == 0,
               "exec_stats is counted in uint64_t words");

void exec_stats_add(struct exec_stats *to, const struct exec_stats *s)
{
    uint64_t *t = (uint64_t *)to;
    const uint64_t *w = (const uint64_t *)s;
    for (size_t i = 0; i < sizeof(*to) / sizeof(uint64_t); i++)
        t[i] += w[i];
}

void exec_stats_add_times(struct exec_stats *to, const struct exec_stats *s, uint32_t n)
{
    uint64_t *t = (uint64_t *)to;
    const uint64_t *w = (const uint64_t *)s;
    for (size_t i = 0; i < sizeof(*to) / sizeof(uint64_t); i++)
        t[i] += w[i] * n;
}

void exec_stats_sub(struct exec_stats *to, const struct exec_stats *s)
{
    uint64_t *t = (uint64_t *)to;
    const uint64_t *w = (const uint64_t *)s;
    for (size_t i = 0; i < sizeof(*to) / sizeof(uint64_t); i++)
        t[i] -= w[i];
}

void exec_rebase_cat(struct exec_model *m)
{
    m->acct.cat_t0 = hal_time_ps();
    m->acct.cat_flops0 = engine_perf_read(NPU_PERF_FLOPS);
    m->acct.cat_hbm0 = engine_perf_read(NPU_PERF_HBM_BYTES);
    m->acct.cat_noc0 = engine_perf_read(NPU_PERF_NOC_BYTE_HOPS);
    m->acct.cat_descs0 = engine_perf_read(NPU_PERF_DESCS);
}

void exec_charge_now(struct exec_model *m)
{
    charge_to(m, m->acct.cat);
}

void exec_charge(struct exec_model *m)
{
    int rc = exec_flush(m);
    assert(rc == NPU_OK && "the engines refused a model chain");
    (void)rc;
    charge_to(m, m->acct.cat);
}

void exec_set_layer(struct exec_model *m, uint32_t layer)
{
    exec_charge(m); /* what is queued belongs to the layer that queued it */
    m->acct.layer = layer;
}

/* Bytes per element of a GEMM's A and B, and of its C. */
static void gemm_sizes(enum npu_matrix_op op, uint64_t *eab, uint64_t *ec)
{
    *eab = op == NPU_MATRIX_OP_GEMM_F32 ? 4 : 2;
    *ec = op == NPU_MATRIX_OP_GEMM_BF16_BF16 ? 2 : 4;
}

/* [lo, hi) of a batch's operand: its first span, widened to the last (stride bytes on). */
static struct hz_range gemm_batch_span(struct hz_range r, uint32_t batch, uint64_t stride)
{
    if (r.hi > r.lo && batch > 1)
        r.hi += (uint64_t)(batch - 1) * stride;
    return r;
}

void exec_gemm_many(struct exec_model *m, const struct exec_gemm_args *g)
{
    enum npu_matrix_op op = m->buf.dt == NPU_DTYPE_FP32 ? NPU_MATRIX_OP_GEMM_F32
                            : g->f32_out ? NPU_MATRIX_OP_GEMM_BF16_F32
                                         : NPU_MATRIX_OP_GEMM_BF16_BF16;
    const uint32_t nb = g->batch > 1 ? g->batch : 1;
    assert(nb <= NPU_GEMM_BATCH_MAX);
    struct matrix_gemm_desc_args d = {
        .op = op, .a = g->a, .b = g->b, .c = g->c, .m = g->rows, .n = g->n, .k = g->k,
        .lda = g->lda, .ldb = g->ldb, .ldc = g->ldc, .trans_b = g->trans_b,
        .accumulate = g->accumulate, .batch = nb, .stride_a = nb > 1 ? g->stride_a : 0,
        .stride_b = nb > 1 ? g->stride_b : 0, .stride_c = nb > 1 ? g->stride_c : 0,
    };
    uint64_t e, ec;
    gemm_sizes(op, &e, &ec);
    const struct hz_range ra = hz_span(g->a, g->rows, g->lda * e, g->k * e);
    const struct hz_range rb = g->trans_b ? hz_span(g->b, g->n, g->ldb * e, g->k * e)
                                          : hz_span(g->b, g->k, g->ldb * e, g->n * e);
    const struct hz_range rc = gemm_batch_span(hz_span(g->c, g->rows, g->ldc * ec, g->n * ec),
                                               nb, d.stride_c);
    const struct hz_access h = {
        .rd = { gemm_batch_span(ra, nb, d.stride_a), gemm_batch_span(rb, nb, d.stride_b),
                g->accumulate ? rc : (struct hz_range){ 0, 0 } },
        .wr = { rc } };
    struct npu_desc *desc = push(m, HZ_MATRIX, &h, false, &d.sync);
    matrix_gemm_desc(desc, &d);
}

void exec_gemm(struct exec_model *m, uint64_t c, uint64_t a, uint64_t b, uint32_t rows,
               uint32_t n, uint32_t k, uint32_t lda, uint32_t ldb, uint32_t ldc, bool trans_b,
               bool f32_out, bool accumulate)
{
    exec_gemm_many(m, &(struct exec_gemm_args){
                          .c = c, .a = a, .b = b, .rows = rows, .n = n, .k = k, .lda = lda,
                          .ldb = ldb, .ldc = ldc, .trans_b = trans_b, .f32_out = f32_out,
                          .accumulate = accumulate });
}

/* A vector op; element types default to the activations' (callers set fp32 statistics). */
void exec_vec(struct exec_model *m, struct vector_op_args v)
{
    if (!v.ldx)
        v.ldx = v.cols;
    if (v.y && !v.ldy)
        v.ldy = v.cols;
    if (v.out && !v.ldout)
        v.ldout = v.cols;
    /* the operands' exact extents: a wider range would make a descriptor wait for loads
       into the bytes after its operand (a residual's fp32-sized range reached into the
       staging buffer, and the FFN's norm waited for the next layer's prefetch) */
    struct vector_op_extents x;
    vector_op_extents(&v, &x);
    const struct hz_range aux = hz_span(v.aux, 1, 0, x.aux);
    const struct hz_access h = {
        .rd = { hz_span(v.x, 1, 0, x.x), hz_span(v.y, 1, 0, x.y),
                x.aux_read ? aux : (struct hz_range){ 0, 0 } },
        .wr = { hz_span(v.out, 1, 0, x.out), x.aux_read ? (struct hz_range){ 0, 0 } : aux } };
    struct npu_desc *d = push(m, HZ_VECTOR, &h, false, &v.sync);
    vector_op_desc(d, &v);
}

/* A copy on the chain's DMA queue, or with `side` a load on the second queue that runs
   ahead of the chain (exec_flush does not wait for it; its readers wait by their data);
   keep: its bytes move in performance mode too (at most NPU_KEEP_DATA_MAX). */
static void copy_kept(struct exec_model *m, bool side, uint64_t dst, uint64_t src,
                      uint64_t rows, uint64_t row_bytes, uint64_t src_stride,
                      uint64_t dst_stride, bool keep)
{
    const struct hz_access h = { .rd = { hz_span(src, rows, src_stride, row_bytes) },
                                 .wr = { hz_span(dst, rows, dst_stride, row_bytes) } };
    struct dma_copy_args a = { .src = src, .dst = dst, .rows = (uint32_t)rows,
                               .row_bytes = (uint32_t)row_bytes,
                               .src_stride = (uint32_t)src_stride,
                               .dst_stride = (uint32_t)dst_stride, .second_queue = side };
    struct npu_desc *d = push(m, side ? HZ_DMA2 : HZ_DMA, &h, side, &a.sync);
    assert((!keep || rows * row_bytes <= NPU_KEEP_DATA_MAX) && "a kept copy's bytes");
    a.sync.keep_data = keep;
    dma_copy_desc(d, &a);
}

static void copy_on(struct exec_model *m, bool side, uint64_t dst, uint64_t src, uint64_t rows,
                    uint64_t row_bytes, uint64_t src_stride, uint64_t dst_stride)
{
    copy_kept(m, side, dst, src, rows, row_bytes, src_stride, dst_stride, false);
}

void exec_copy_kept(struct exec_model *m, uint64_t dst, uint64_t src, uint64_t bytes, bool side)
{
    for (uint64_t at = 0; at < bytes; at += NPU_KEEP_DATA_MAX) {
        const uint64_t piece = bytes - at < NPU_KEEP_DATA_MAX ? bytes - at : NPU_KEEP_DATA_MAX;
        copy_kept(m, side, dst + at, src + at, 1, piece, piece, piece, true);
    }
}

/* The index lists of the gathers issued since exec_wait_gathers: [gather_lo, gather_hi). */
static uint64_t gather_lo = UINT64_MAX, gather_hi;

/* Rows of a table by index, in gathers of at most NPU_GATHER_ROWS_MAX: the hazard ranges
   are the table's rows (given, or between the least and the greatest index: the others'
   bytes are never written by the engines here) and the index list, which the engine reads
   too. */
void exec_gather(struct exec_model *m, const struct exec_gather_args *g)
{
    assert(g->rows && "a gather of no rows");
    const uint64_t pitch = g->table_stride ? g->table_stride : g->row_bytes;
    for (uint32_t at = 0; at < g->rows; at += NPU_GATHER_ROWS_MAX) {
        const uint32_t n = g->rows - at < NPU_GATHER_ROWS_MAX ? g->rows - at
                                                               : NPU_GATHER_ROWS_MAX;
        const uint32_t *idx = g->index + at;
        uint32_t lo = 0, hi = g->table_rows - 1; /* the table's rows, or those indexed */
        if (!g->table_rows) {
            lo = hi = idx[0];
            for (uint32_t r = 1; r < n; r++) {
                lo = idx[r] < lo ? idx[r] : lo;
                hi = idx[r] > hi ? idx[r] : hi;
            }
        }
        const uint64_t list = (uint64_t)(uintptr_t)idx, list_end = list + (uint64_t)n * 4;
        gather_lo = list < gather_lo ? list : gather_lo;
        gather_hi = list_end > gather_hi ? list_end : gather_hi;
        const uint64_t out = g->dst + (uint64_t)at * g->row_bytes;
        const struct hz_access h = {
            .rd = { hz_span(g->table + lo * pitch, (uint64_t)hi - lo + 1, pitch, g->row_bytes),
                    hz_span(list, 1, 0, list_end - list) },
            .wr = { hz_span(out, n, g->row_bytes, g->row_bytes) } };
        struct dma_gather_args a = { .table = g->table, .dst = out, .index = list, .rows = n,
                                     .row_bytes = (uint32_t)g->row_bytes,
                                     .table_stride = (uint32_t)pitch,
                                     .dst_stride = (uint32_t)g->row_bytes };
        struct npu_desc *d = push(m, HZ_DMA, &h, false, &a.sync);
        dma_gather_desc(d, &a);
    }
}

int exec_wait_gathers(struct exec_model *m)
{
    if (gather_hi == 0)
        return NPU_OK;
    const uint64_t lo = gather_lo, hi = gather_hi;
    gather_lo = UINT64_MAX, gather_hi = 0;
    return exec_wait_for(m, lo, hi - lo);
}

void exec_copy(struct exec_model *m, uint64_t dst, uint64_t src, uint64_t rows,
               uint64_t row_bytes, uint64_t src_stride, uint64_t dst_stride)
{
    copy_on(m, false, dst, src, rows, row_bytes, src_stride, dst_stride);
}

uint64_t exec_act(const struct exec_model *m, uint64_t buf, uint64_t row, uint64_t width)
{
    return buf + row * width * m->buf.eb;
}

static uint64_t hbm(const struct exec_model *m, uint64_t off)
{
    return (uint64_t)(uintptr_t)m->image + off;
}

uint64_t exec_hbm_addr(const struct exec_model *m, uint64_t off)
{
    return hbm(m, off);
}

/* bytes from src to dst in pieces the DMA takes, on the queue copy_on's `side` names */
static void load_on(struct exec_model *m, bool side, uint64_t dst, uint64_t src, uint64_t bytes)
{
    for (uint64_t at = 0; at < bytes; at += 1u << 30) {
        uint64_t piece = bytes - at < (1u << 30) ? bytes - at : (1u << 30);
        copy_on(m, side, dst + at, src + at, 1, piece, piece, piece);
    }
}

void exec_load_rows(struct exec_model *m, uint64_t dst, uint64_t src, uint64_t bytes)
{
    load_on(m, false, dst, src, bytes);
}

bool exec_side_idle(struct exec_model *m)
{
    (void)m;
    return hz_idle(HZ_DMA2);
}

void exec_copy_side(struct exec_model *m, uint64_t dst, uint64_t src, uint64_t bytes)
{
    load_on(m, true, dst, src, bytes);
}

/* Copies a share (blocks [first_block, + blocks)) from HBM to SRAM. */
static void load_share(struct exec_model *m, uint64_t dst, const struct npu_image_tensor *t,
                       uint64_t first_block, uint64_t blocks)
{
    exec_load_rows(m, dst, hbm(m, t->hbm_off) + first_block * t->block_bytes,
              blocks * t->block_bytes);
}

/* Where layer l's non-expert shares are staged: the buffer's start, or with a double
   buffer (plan.stage_double) the second copy for odd layers. */
static uint64_t stage_base(const struct exec_model *m, uint32_t l)
{
    return m->plan->stage_double == NPU_STAGE_DOUBLE && (l & 1) ? m->w.stage_b : m->w.stage;
}

uint64_t exec_weight_addr(struct exec_model *m, uint32_t layer, enum model_tensor_kind kind)
{
    const struct npu_image_tensor *t = m->w.t[layer][kind];
    assert(t);
    if (t->sram_off != NPU_IMAGE_NOWHERE)
        return m->buf.sram + t->sram_off;
    return stage_base(m, layer) + m->w.map.off[kind];
}

/* Layer l's non-expert shares into its staging copy: on the chain's DMA queue, or as side
   loads on the second queue (a prefetch, which the layer's readers wait for by their data
   and exec_flush does not). */
static void stage_shares(struct exec_model *m, uint32_t l, bool side)
{
    struct npu_stage_map map;
    npu_stage_map_layer(m->w.t[l], m->plan->expert_slots, &map);
    assert(map.bytes <= m->w.stage_bytes && "the planner sized it with the same map");
    for (uint32_t kind = 0; kind < EXEC_KINDS; kind++) {
        const struct npu_image_tensor *t = m->w.t[l][kind];
        if (!t || model_tensor_is_expert(kind))
            continue;
        const uint64_t dst = stage_base(m, l) + map.off[kind], src = hbm(m, t->hbm_off);
        load_on(m, side, dst, src, (uint64_t)t->blocks * t->block_bytes);
    }
}

/* When the layer's next shares load: beside the layer (from its start), or from its dense
   FFN on. A dense layer's attention reads the KV cache from HBM, and a prefetch beside it
   halves the channel that attention waits on, while its FFN, whose weights are staged,
   leaves HBM idle: a decode step of Qwen3-8B on large-64 took 118 us a layer prefetching
   from the start (its attention's KV loads at half the channel; docs/images.md, "Weights").
   A MoE layer's expert loads take HBM after attention, so its prefetch starts with it. */
static bool stage_after_attention(const struct exec_model *m)
{
    return m->cfg->num_experts == 0;
}

/* Layer l + 1's shares, on the second queue, now: layer l + 1 will not load them again. */
static void stage_next_now(struct exec_model *m, uint32_t l)
{
    stage_shares(m, l + 1, true);
    m->w.staged_next = l + 2;
}

void exec_stage_layer(struct exec_model *m, uint32_t l, bool next)
{
    exec_set_cat(m, EXEC_CAT_WEIGHTS);
    npu_stage_map_layer(m->w.t[l], m->plan->expert_slots, &m->w.map);
    m->w.stage_own = m->w.staged_next != l + 1; /* not loaded while the layer before ran */
    if (m->w.stage_own)
        stage_shares(m, l, false);
    m->w.staged_next = 0;
    m->w.stage_deferred = 0;
    const bool twice = m->plan->stage_double == NPU_STAGE_DOUBLE;
    m->w.stage_late = next && m->plan->stage_double == NPU_STAGE_ONE ? l + 2 : 0;
    m->w.route_last = false;
    if (next && twice && stage_after_attention(m)) {
        m->w.stage_deferred = l + 2; /* exec_stage_next, at the FFN */
    } else if (next && twice) { /* the next layer's, beside this one's */
        stage_next_now(m, l);
    }
    memset(m->w.expert_staged, 0, sizeof(m->w.expert_staged));
    exec_reuse_tile_new_layer(m);
}

void exec_stage_steady(struct exec_model *m, uint32_t l, bool before, bool load)
{
    if (load) { /* now, outside any recording */
        exec_set_layer(m, l);
        exec_set_cat(m, EXEC_CAT_WEIGHTS);
        stage_shares(m, l, false);
    }
    if (before || load)
        m->w.staged_next = l + 1;
}

void exec_stage_copy(const struct exec_model *m, uint32_t l, uint64_t *lo, uint64_t *hi)
{
    *lo = *hi = stage_base(m, l);
    if (m->w.t[l][MT_WQ] && m->w.t[l][MT_WQ]->sram_off == NPU_IMAGE_NOWHERE)
        *hi += m->w.map.experts; /* the non-expert shares come first (npu_stage_map) */
}

void exec_stage_next(struct exec_model *m, uint32_t l)
{
    exec_head_ahead(m, l, false); /* the last layer's FFN: the head's first piece */
    if (m->w.stage_deferred != l + 2)
        return;
    m->w.stage_deferred = 0;
    stage_next_now(m, l);
}

/* One staging copy: the next layer's shares load once the layer's last reader of its own
   is issued (below), on the second queue, each share waiting by its data for the reads of
   the one it replaces. Not under tile reuse: a recorded tile would carry the load and
   every replay of its class add it again. */
static void stage_late_now(struct exec_model *m, uint32_t l)
{
    if (m->w.stage_late != l + 2 || m->treuse.on)
        return;
    m->w.stage_late = 0;
    const enum exec_cat was = m->acct.cat;
    exec_set_cat(m, EXEC_CAT_WEIGHTS);
    stage_next_now(m, l);
    exec_set_cat(m, was);
}

/* An expert layer's shares are read by its attention and router only, and its experts'
   GEMMs (over 100 us a layer of Qwen3-30B-A3B prefill-512 on large-64, with the ring's
   first slices loaded during attention) leave the channel idle half the time, while a
   layer that loads its own shares as it starts waits about 10 us for them. */
void exec_stage_after_route(struct exec_model *m, uint32_t l)
{
    const bool last = m->w.route_last;
    m->w.route_last = false;
    if (last)
        stage_late_now(m, l);
}

/* A dense layer's tiles overlapped (model_layer_ops.c, exec_layer_dense_overlapped): its
   last tile's FFN GEMMs are the last readers of its shares, so the next layer's load behind
   them: the attention's as soon as that tile's O GEMM is done, the FFN's during its down
   GEMM and all-reduce. Else the next layer loaded all its shares as it started, its first
   tile's rows behind them on the same queue: Qwen3-8B prefill-2048 on large-64, about 78 us
   at each of 35 layer boundaries. */
void exec_stage_after_ffn(struct exec_model *m, uint32_t l)
{
    stage_late_now(m, l);
}

/* Where expert slot `slot` puts the block of `kind` in the staging buffer. */
static uint64_t expert_slot_addr(const struct exec_model *m, uint32_t slot,
                                 enum model_tensor_kind kind)
{
    return m->w.stage + m->w.map.experts + slot * m->w.map.expert_span + m->w.map.off[kind];
}

/* Staged experts go through the ring (npu_plan.expert_slots)? */
static bool ring_on(const struct exec_model *m, const struct npu_image_tensor *t)
{
    return m->w.map.ring_slots && t->sram_off == NPU_IMAGE_NOWHERE;
}

/* Loads r's rows into the ring's next slot, packed, unless a slot still holds (t, block,
   part), as a side descriptor: it waits, by its data, only for the slot's last readers
   (model_hazard.h), and exec_flush does not wait for it, so it runs ahead of the chain while
   the ring has free slots; the GEMM that reads it waits for it by its data too. A matrix
   still in a slot is not loaded again within the iteration (a rank whose experts fit the
   ring loads each once per layer and iteration, however many MoE groups). Returns the
   slot's address. */
uint64_t exec_ring_load(struct exec_model *m, uint32_t l, const struct exec_ring_src *r)
{
    const uint64_t slots = m->w.stage + m->w.map.experts;
    for (uint32_t h = 0; h < m->w.map.ring_slots; h++)
        if (m->w.ring.held[h].t == r->t && m->w.ring.held[h].block == r->block &&
            m->w.ring.held[h].part == r->part) /* still there */
            return slots + h * m->w.map.ring_span;
    const uint32_t s = m->w.ring.next;
    const uint64_t dst = slots + s * m->w.map.ring_span, bytes = r->rows * r->row_bytes;
    /* a piece of another rank's share is no larger than a unit of the map, which every
       rank's slot holds (its widest slice is at least one) */
    assert(r->rows >= 1 && bytes <= r->t->block_bytes && bytes <= m->w.map.ring_span &&
           r->row_bytes <= (1u << 30) && r->src_stride >= r->row_bytes &&
           r->src_stride <= UINT32_MAX);
    /* on the second DMA queue: the loads run ahead without holding up the chain's copies */
    copy_on(m, true, dst, r->src, r->rows, r->row_bytes, r->src_stride, r->row_bytes);
    m->w.ring.held[s].t = r->t, m->w.ring.held[s].block = r->block;
    m->w.ring.held[s].part = r->part;
    m->w.ring.next = (s + 1) % m->w.map.ring_slots;
    m->acct.stats[l].expert_bytes += bytes;
    return dst;
}

void exec_ring_forget(struct exec_model *m, uint64_t lo, uint64_t hi)
{
    const uint64_t slots = m->w.stage + m->w.map.experts;
    for (uint32_t s = 0; s < m->w.map.ring_slots; s++) {
        const uint64_t a = slots + s * m->w.map.ring_span;
        if (a < hi && lo < a + m->w.map.ring_span)
            m->w.ring.held[s].t = NULL;
    }
}

uint64_t exec_ring_scratch(struct exec_model *m, uint64_t bytes)
{
    const uint32_t n = m->w.map.ring_slots;
    if (!n || m->w.map.ring_span < bytes)
        return 0;
    const uint32_t s = (m->w.ring.next + n - 1) % n; /* the last the next loads reach */
    m->w.ring.held[s].t = NULL;
    return m->w.stage + m->w.map.experts + s * m->w.map.ring_span;
}

/* The first `bytes` of block `block` (block0-based, as the map numbers it) of t: an expert
   slice at the start of its block. */
static uint64_t ring_load(struct exec_model *m, uint32_t l, const struct npu_image_tensor *t,
                          uint32_t block, uint64_t bytes)
{
    const struct exec_ring_src r = {
        .t = t, .block = block, .part = 0,
        .src = hbm(m, t->hbm_off) + (uint64_t)(block - t->block0) * t->block_bytes,
        .rows = 1, .row_bytes = bytes, .src_stride = bytes };
    return exec_ring_load(m, l, &r);
}

void exec_stage_expert(struct exec_model *m, uint32_t l, uint32_t e)
{
    const struct npu_image_tensor *g = m->w.t[l][MT_E_GATE];
    if (g->sram_off != NPU_IMAGE_NOWHERE || m->w.expert_staged[e] || ring_on(m, g))
        return; /* resident, already staged this iteration, or loaded by its GEMMs */
    enum exec_cat was = m->acct.cat;
    exec_set_cat(m, EXEC_CAT_WEIGHTS);
    assert(e >= g->block0 && e - g->block0 < g->blocks && "the expert is this rank's");
    const enum model_tensor_kind kinds[3] = { MT_E_GATE, MT_E_UP, MT_E_DOWN };
    for (int i = 0; i < 3; i++) {
        const struct npu_image_tensor *t = m->w.t[l][kinds[i]];
        load_share(m, expert_slot_addr(m, e - g->block0, kinds[i]), t, e - t->block0, 1);
        m->acct.stats[l].expert_bytes += t->block_bytes;
    }
    m->w.expert_staged[e] = 1;
    exec_set_cat(m, was);
}

uint64_t exec_share_addr(struct exec_model *m, const struct npu_image_tensor *t,
                           uint32_t layer, enum model_tensor_kind kind, uint32_t block)
{
    assert(block >= t->block0 && block - t->block0 < t->blocks && "a block this rank holds");
    block -= t->block0; /* EP: the rank's first expert is its block 0 */
    if (t->sram_off != NPU_IMAGE_NOWHERE)
        return m->buf.sram + t->sram_off + block * t->block_bytes;
    if (model_tensor_is_expert(kind) && ring_on(m, t))
        return ring_load(m, layer, t, block + t->block0, t->block_bytes);
    if (model_tensor_is_expert(kind))
        return expert_slot_addr(m, block, kind);
    return kind == MT_LM_HEAD ? 0 : stage_base(m, layer) + m->w.map.off[kind];
}

uint64_t exec_expert_slice_addr(struct exec_model *m, uint32_t layer, enum model_tensor_kind kind,
                                uint32_t block, uint64_t bytes)
{
    const struct npu_image_tensor *t = m->w.t[layer][kind];
    assert(t && block < t->blocks && bytes <= t->block_bytes && "a slice this rank holds");
    if (t->sram_off != NPU_IMAGE_NOWHERE)
        return m->buf.sram + t->sram_off + block * t->block_bytes;
    assert(ring_on(m, t) && "EP stages experts through the ring");
    return ring_load(m, layer, t, block + t->block0, bytes);
}
