/* SPDX-License-Identifier: MIT */
/*
 * The planner and model images (models/planner/src/npu_plan.c, models/image/src/npu_image.c, npu_layout.c;
 * docs/images.md): images of the tiny models for mesh-2x2 and mesh-4x4 in both modes pass
 * the checks and carry their checksum; corrupt, truncated and inconsistent images are
 * refused with the reason; an image is refused on another chip or mode; plans that do not
 * divide or fit are refused with the numbers; the tensor shares of every split tensor cover
 * it exactly once (MN rows, K columns); functional weights are the generator's values of
 * the right elements; every rank has one core, with an SRAM map inside the core and (resident)
 * every share placed, or (streamed) a staging buffer for each layer; `auto` pairs the FFN's
 * up (MN) and down (K) GEMMs and picks K for the others below the hidden size, MN from it on.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "model_config.h"
#include "model_weights.h"
#include "noc/coll_sizes.h"
#include "noc/placement.h"
#include "npu_enums.h"
#include "npu_image.h"
#include "npu_layout.h"
#include "npu_plan.h"

#include "image_fixture.h"

static struct npu_image_chip check_chip_of(const struct npu_plan_chip *c, bool performance)
{
    return (struct npu_image_chip){ .name = c->name, .mesh_rows = c->mesh_rows,
                                    .mesh_cols = c->mesh_cols, .sram_bytes = c->sram_bytes,
                                    .hbm_bytes = c->hbm_bytes, .sa_rows = c->sa_rows,
                                    .sa_cols = c->sa_cols, .performance = performance };
}

/* The generator's tensors of a model, to find the whole tensor of an entry. */
struct tensor_list {
    struct model_tensor t[128];
    uint32_t n;
};

static void collect(const struct model_tensor *t, void *ctx)
{
    struct tensor_list *l = ctx;
    assert_true(l->n < 128);
    l->t[l->n++] = *t;
}

static const struct model_tensor *source_of(const struct tensor_list *l,
                                            const struct npu_image_tensor *e)
{
    for (uint32_t i = 0; i < l->n; i++)
        if ((uint32_t)l->t[i].kind == e->kind && l->t[i].layer == e->layer)
            return &l->t[i];
    fail_msg("entry kind %u layer %u is no tensor of the model", e->kind, e->layer);
    return NULL;
}

/* Rewrites the header's checksum after an edit, so the check gets past it. */
static void reseal(uint8_t *data, uint64_t bytes)
{
    struct npu_image_header *h = (struct npu_image_header *)data;
    h->checksum = npu_image_checksum(data, bytes);
}

static void expect_image_refusal(const uint8_t *data, uint64_t bytes, const char *needle)
{
    err[0] = '\0';
    int rc = npu_image_check(data, bytes, err, sizeof(err));
    if (rc != NPU_ERR_FORMAT || !strstr(err, needle))
        fail_msg("image check: rc %d, message '%s', wanted '%s'", rc, err, needle);
}

/* ---- building and checking ---- */

static void check_built(const struct model *m, const struct npu_plan_chip *chip, uint32_t mode)
{
    struct npu_plan_request req = request(0, NPU_PLAN_AUTO, mode);
    struct npu_built_image img = build(m, chip, &req);
    const struct npu_image_header *h = hdr(&img);
    if (npu_image_check(img.data, img.bytes, err, sizeof(err)) != NPU_OK)
        fail_msg("%s on %s mode %u: %s", m->cfg.name, chip->name, mode, err);
    assert_int_equal(h->checksum, npu_image_checksum(img.data, img.bytes));
    assert_int_equal(h->magic, NPU_IMAGE_MAGIC);
    assert_int_equal(h->version, NPU_IMAGE_VERSION);
    assert_int_equal(h->file_bytes, img.bytes);
    assert_string_equal(h->chip_name, chip->name);
    assert_string_equal(h->model_name, m->cfg.name);
    assert_int_equal(h->mesh_rows, chip->mesh_rows);
    assert_int_equal(h->mesh_cols, chip->mesh_cols);
    assert_int_equal(h->sram_bytes, chip->sram_bytes);
    assert_int_equal(h->plan.tp, chip->mesh_rows * chip->mesh_cols);
    assert_int_equal(h->plan.mode, mode);
    assert_int_equal(h->plan.dtype, mode == NPU_IMAGE_PERFORMANCE ? NPU_IMAGE_BF16
                                                                  : NPU_IMAGE_FP32);
    assert_int_equal(h->cores_count, chip->mesh_rows * chip->mesh_cols);
    /* The config text rides along verbatim. */
    assert_int_equal(h->config_bytes, strlen(m->text) + 1);
    assert_string_equal((const char *)img.data + h->config_off, m->text);
    /* Functional images carry the weights; performance images stop before them but claim
       their HBM. */
    assert_true(h->weights_off % NPU_IMAGE_ALIGN == 0);
    assert_true(h->hbm_end >= h->weights_off + h->weights_bytes);
    assert_true(h->hbm_end <= chip->hbm_bytes);
    assert_true(h->weights_bytes > 0);
    if (mode == NPU_IMAGE_FUNCTIONAL)
        assert_int_equal(img.bytes, h->weights_off + h->weights_bytes);
    else
        assert_int_equal(img.bytes, h->weights_off);
    struct npu_image_chip c = check_chip_of(chip, mode == NPU_IMAGE_PERFORMANCE);
    if (npu_image_check_chip(h, &c, err, sizeof(err)) != NPU_OK)
        fail_msg("%s on %s: check_chip: %s", m->cfg.name, chip->name, err);
    npu_built_image_free(&img);
    assert_null(img.data);
}

static void test_build_and_check(void **state)
{
    (void)state;
    const struct model *models[] = { &dense, &moe };
    const struct npu_plan_chip *chips[] = { &mesh2x2, &mesh4x4 };
    for (int i = 0; i < 2; i++)
        for (int c = 0; c < 2; c++) {
            check_built(models[i], chips[c], NPU_IMAGE_FUNCTIONAL);
            check_built(models[i], chips[c], NPU_IMAGE_PERFORMANCE);
        }
}

/* ---- refused images ---- */

static void test_image_refusals(void **state)
{
    (void)state;
    struct npu_plan_request req = request(4, NPU_PART_MN, NPU_IMAGE_FUNCTIONAL);
    struct npu_built_image img = build(&moe, &mesh2x2, &req);
    const uint64_t n = img.bytes;
    uint8_t *b = malloc(n);
    assert_non_null(b);
    struct npu_image_header *h = (struct npu_image_header *)b;

    memcpy(b, img.data, n);
    assert_int_equal(npu_image_check(b, n, err, sizeof(err)), NPU_OK);
    reseal(b, n); /* resealing an intact image changes nothing */
    assert_memory_equal(b, img.data, n);

    /* Truncated: one byte short, and shorter than the header. */
    expect_image_refusal(b, n - 1, "truncated");
    expect_image_refusal(b, sizeof(struct npu_image_header) - 1, "truncated");
    expect_image_refusal(b, 16, "truncated");

    /* A flipped byte anywhere after the header: the checksum, in the config text, the
       tables and the weights. */
    const uint64_t spots[] = { h->config_off + 3, h->tensors_off + 9, h->cores_off + 1,
                               h->weights_off + 1000, n - 1 };
    for (size_t i = 0; i < sizeof(spots) / sizeof(spots[0]); i++) {
        memcpy(b, img.data, n);
        b[spots[i]] ^= 0x10;
        expect_image_refusal(b, n, "checksum");
    }
    /* ... and in the header's own fields (the chip's name). */
    memcpy(b, img.data, n);
    h->chip_name[0] ^= 1;
    expect_image_refusal(b, n, "checksum");

    /* Bad magic. */
    memcpy(b, img.data, n);
    h->magic ^= 0xff00;
    expect_image_refusal(b, n, "not a model image");

    /* A later format version, even with a valid checksum. */
    memcpy(b, img.data, n);
    h->version = NPU_IMAGE_VERSION + 1;
    reseal(b, n);
    expect_image_refusal(b, n, "format version");

    /* A share outside the weights: past their end, and before their start. */
    const uint64_t mid = h->tensors_count / 2;
    struct npu_image_tensor *ts = (struct npu_image_tensor *)(b + h->tensors_off);
    memcpy(b, img.data, n);
    ts[mid].hbm_off = h->weights_off + h->weights_bytes - ts[mid].block_bytes / 2;
    reseal(b, n);
    expect_image_refusal(b, n, "outside the weights");
    memcpy(b, img.data, n);
    ts[mid].hbm_off = h->weights_off - 64;
    reseal(b, n);
    expect_image_refusal(b, n, "outside the weights");
    memcpy(b, img.data, n);
    ts[0].hbm_off = UINT64_MAX - 8; /* no wrap-around past the check */
    reseal(b, n);
    expect_image_refusal(b, n, "outside the weights");

    /* A core whose rank is not in the group. */
    struct npu_image_core *cs = (struct npu_image_core *)(b + h->cores_off);
    memcpy(b, img.data, n);
    cs[2].rank = h->plan.tp;
    reseal(b, n);
    expect_image_refusal(b, n, "rank 4 of 4");
    memcpy(b, img.data, n);
    cs[1].rank = h->plan.tp + 7;
    reseal(b, n);
    expect_image_refusal(b, n, "core 1: rank");

    /* A partition the firmware does not know, and 2D on a group that is not mesh2d (its
       line collectives need the grid). */
    memcpy(b, img.data, n);
    h->plan.partition[NPU_GEMM_O] = 99;
    reseal(b, n);
    expect_image_refusal(b, n, "plan: partition of o is 99");
    memcpy(b, img.data, n);
    h->plan.partition[NPU_GEMM_QKV] = NPU_PART_2D; /* the image is ring-placed */
    reseal(b, n);
    expect_image_refusal(b, n, "plan: partition of qkv is 3 (placement 2)");
    memcpy(b, img.data, n);
    h->plan.partition[NPU_GEMM_QKV] = NPU_PART_2D;
    h->plan.placement = 3;
    reseal(b, n);
    assert_int_equal(npu_image_check(b, n, err, sizeof(err)), NPU_OK);

    /* A collectives' segment the NoC driver would refuse. */
    memcpy(b, img.data, n);
    h->plan.comm_segment = 66;
    reseal(b, n);
    expect_image_refusal(b, n, "comm_segment 66 is not a multiple of 4");
    memcpy(b, img.data, n); /* a valid segment whose scratch the plan did not reserve */
    h->plan.comm_segment = NOC_COMM_SEGMENT_MAX;
    reseal(b, n);
    expect_image_refusal(b, n, "the collectives' scratch");

    /* Micro-batches: 0 (an image from before the field) or 1 pass; more need stages (this
       image has one). */
    memcpy(b, img.data, n);
    h->plan.micro_batches = 0;
    reseal(b, n);
    assert_int_equal(npu_image_check(b, n, err, sizeof(err)), NPU_OK);
    memcpy(b, img.data, n);
    h->plan.micro_batches = 2;
    reseal(b, n);
    expect_image_refusal(b, n, "plan: 2 micro-batches");

    /* Split attention is 0 or 1. */
    memcpy(b, img.data, n);
    h->plan.kv_split = 2;
    reseal(b, n);
    expect_image_refusal(b, n, "kv_split 2 is not 0 or 1");

    /* A double buffer for staged weights on a plan whose weights are resident. */
    memcpy(b, img.data, n);
    h->plan.stage_double = 1, h->plan.weights_resident = 1;
    reseal(b, n);
    expect_image_refusal(b, n, "stage_double 1");

    /* The MoE by units without expert parallelism, or with no unit split. */
    memcpy(b, img.data, n);
    h->plan.moe_units_rows = 4, h->plan.moe_unit_split = 1;
    reseal(b, n);
    expect_image_refusal(b, n, "the MoE by units over 4 rows");
    memcpy(b, img.data, n);
    h->plan.moe_units_rows = 4;
    reseal(b, n);
    expect_image_refusal(b, n, "units split 0");

    /* Trailing bytes are refused too. */
    uint8_t *longer = calloc(1, n + 8);
    assert_non_null(longer);
    memcpy(longer, img.data, n);
    expect_image_refusal(longer, n + 8, "trailing bytes");
    free(longer);

    free(b);
    npu_built_image_free(&img);
}

/* The expert map (EP): a slice out of order, overlapping another, beyond the expert's
   units or naming a rank outside the group is refused, so is a layer of more slices than
   the plan's expert_map_slices (the dispatch's SRAM is sized by it), and a map without EP. */
static void test_expert_map_refusals(void **state)
{
    (void)state;
    struct npu_plan_request req = request(4, NPU_PART_K, NPU_IMAGE_PERFORMANCE);
    req.partition[NPU_GEMM_EXP_UP] = req.partition[NPU_GEMM_EXP_DOWN] = NPU_PART_EP;
    req.routing = NPU_ROUTING_SKEWED, req.routing_skew_milli = 1500;
    struct npu_built_image img = build(&moe, &mesh2x2, &req);
    const uint64_t n = img.bytes;
    uint8_t *b = malloc(n);
    assert_non_null(b);
    const struct npu_image_header *h = hdr(&img);
    struct npu_image_expert_slice *x = (void *)(b + h->experts_off);
    assert_true(h->experts_count > 2);
    for (uint32_t c = 0; c < 7; c++) {
        memcpy(b, img.data, n);
        if (c == 0)
            x[0].rank = 4; /* of 4 ranks */
        else if (c == 1)
            x[1] = x[0]; /* overlaps slice 0 */
        else if (c == 2)
            x[0].units = 200; /* past the expert's units */
        else if (c == 3)
            x[1].layer = 0x7fff; /* layers out of order */
        else if (c == 4)
            x[0].rep = x[0].reps; /* a copy past the expert's copies */
        else if (c == 5)
            x[0].reps = NPU_EXPERT_REPLICAS_MAX + 1; /* more copies than the dispatch keys */
        else
            x[0].reps = 0; /* no copy at all */
        reseal(b, n);
        expect_image_refusal(b, n, "expert map");
    }
    /* slice 0 says its expert has one more copy than the others say (or, held once, that it
       has two: then copy 1 holds only slice 0's units) */
    memcpy(b, img.data, n);
    x[0].reps++;
    reseal(b, n);
    expect_image_refusal(b, n, "expert map");
    memcpy(b, img.data, n);
    x[0].units = (uint8_t)(x[0].units - 1); /* a unit of expert x[0] held by nobody */
    reseal(b, n);
    expect_image_refusal(b, n, x[0].units ? "holds only part" : "expert map");
    memcpy(b, img.data, n);
    ((struct npu_image_header *)b)->plan.expert_map_slices--; /* a layer has more */
    reseal(b, n);
    expect_image_refusal(b, n, "expert map: layer");
    memcpy(b, img.data, n);
    ((struct npu_image_header *)b)->experts_count = 0;
    reseal(b, n);
    expect_image_refusal(b, n, "none with expert parallelism");
    free(b);
    npu_built_image_free(&img);
}

static void test_check_chip(void **state)
{
    (void)state;
    struct npu_plan_request req = request(0, NPU_PLAN_AUTO, NPU_IMAGE_FUNCTIONAL);
    struct npu_built_image img = build(&dense, &mesh2x2, &req);
    const struct npu_image_header *h = hdr(&img);
    struct npu_image_chip c = check_chip_of(&mesh2x2, false);
    assert_int_equal(npu_image_check_chip(h, &c, err, sizeof(err)), NPU_OK);

    c = check_chip_of(&mesh4x4, false);
    assert_int_equal(npu_image_check_chip(h, &c, err, sizeof(err)), NPU_ERR_INVAL);
    assert_non_null(strstr(err, "mesh_rows"));
    assert_non_null(strstr(err, "mesh-4x4"));

    c = check_chip_of(&mesh2x2, false);
    c.mesh_cols = 4;
    assert_int_equal(npu_image_check_chip(h, &c, err, sizeof(err)), NPU_ERR_INVAL);
    assert_non_null(strstr(err, "mesh_cols"));

    c = check_chip_of(&mesh2x2, false);
    c.sram_bytes = 0x800000;
    assert_int_equal(npu_image_check_chip(h, &c, err, sizeof(err)), NPU_ERR_INVAL);
    assert_non_null(strstr(err, "sram_bytes"));

    c = check_chip_of(&mesh2x2, false);
    c.sa_cols = 32;
    assert_int_equal(npu_image_check_chip(h, &c, err, sizeof(err)), NPU_ERR_INVAL);
    assert_non_null(strstr(err, "sa_rows"));

    /* HBM: exactly what the image claims is enough, a byte less is not; more is fine. */
    c = check_chip_of(&mesh2x2, false);
    c.hbm_bytes = h->hbm_end;
    assert_int_equal(npu_image_check_chip(h, &c, err, sizeof(err)), NPU_OK);
    c.hbm_bytes = h->hbm_end - 1;
    assert_int_equal(npu_image_check_chip(h, &c, err, sizeof(err)), NPU_ERR_INVAL);
    assert_non_null(strstr(err, "hbm_bytes"));
    c.hbm_bytes = 4 * mesh2x2.hbm_bytes;
    assert_int_equal(npu_image_check_chip(h, &c, err, sizeof(err)), NPU_OK);

    /* Mode: a functional image on a performance machine and the reverse. */
    c = check_chip_of(&mesh2x2, true);
    assert_int_equal(npu_image_check_chip(h, &c, err, sizeof(err)), NPU_ERR_INVAL);
    assert_non_null(strstr(err, "mode"));
    npu_built_image_free(&img);

    req = request(0, NPU_PLAN_AUTO, NPU_IMAGE_PERFORMANCE);
    img = build(&dense, &mesh2x2, &req);
    c = check_chip_of(&mesh2x2, false);
    assert_int_equal(npu_image_check_chip(hdr(&img), &c, err, sizeof(err)), NPU_ERR_INVAL);
    assert_non_null(strstr(err, "mode"));
    c.performance = true;
    assert_int_equal(npu_image_check_chip(hdr(&img), &c, err, sizeof(err)), NPU_OK);
    npu_built_image_free(&img);
}

/* ---- refused plans ---- */

static void test_plan_refusals(void **state)
{
    (void)state;
    struct npu_plan_request req = request(0, NPU_PLAN_AUTO, NPU_IMAGE_FUNCTIONAL);
    req.stages = 3;
    expect_plan_refusal(&dense, &mesh2x2, &req, "4 layers do not split into 3 pipeline");
    req.stages = 2, req.tp = 4; /* 2 x 4 cores on a 2x2 mesh */
    expect_plan_refusal(&dense, &mesh2x2, &req, "tp 4 x 2 stage(s) needs more cores");

    req = request(3, NPU_PLAN_AUTO, NPU_IMAGE_FUNCTIONAL);
    expect_plan_refusal(&dense, &mesh2x2, &req, "tp 3 is not a rectangle of the 2x2 mesh");
    req = request(5, NPU_PLAN_AUTO, NPU_IMAGE_FUNCTIONAL);
    expect_plan_refusal(&dense, &mesh2x2, &req, "more cores");

    req = request(12, NPU_PART_MN, NPU_IMAGE_FUNCTIONAL);
    expect_plan_refusal(&dense, &mesh4x4, &req, "not a multiple of tp 12");
    expect_plan_refusal(&moe, &mesh4x4, &req, "not a multiple of tp 12");

    /* 2D: the grid is a mesh2d group's; its blocks must be equal. */
    req = request(0, NPU_PART_2D, NPU_IMAGE_FUNCTIONAL);
    req.placement = NOC_PLACE_RING; /* unset, the planner picks mesh2d for a 2-D GEMM */
    expect_plan_refusal(&dense, &mesh4x4, &req, "the qkv GEMM's 2-D partition needs "
                        "--placement mesh2d (its 4x4 grid of ranks is a mesh2d group's, whose "
                        "rows and columns the collectives run along); the placement is ring");
    req.placement = 3;
    req.tp = 12; /* a 3x4 grid: 64 kv columns (and 128 q) do not split in 3 row blocks */
    expect_plan_refusal(&dense, &mesh4x4, &req, "tiny-dense: the qkv GEMM's N dimension (64) "
                        "is not a multiple of the grid's 3 rows (tp 12 as 3x4)");
    req.tp = 8;
    req.partition[NPU_GEMM_QKV] = NPU_PART_K;
    struct model odd = dense; /* an FFN of 250: 2x4 blocks of ffn_down's K do not divide */
    odd.cfg.intermediate_size = 250;
    expect_plan_refusal(&odd, &mesh4x4, &req, "tiny-dense: the ffn_down GEMM's K dimension "
                        "(250) is not a multiple of the grid's 4 columns (tp 8 as 2x4)");

    /* HBM too small for the weights and KV cache. */
    struct npu_plan_chip small_hbm = mesh2x2;
    small_hbm.hbm_bytes = 0x100000;
    req = request(0, NPU_PLAN_AUTO, NPU_IMAGE_FUNCTIONAL);
    expect_plan_refusal(&moe, &small_hbm, &req, "of HBM");
    req.mode = NPU_IMAGE_PERFORMANCE; /* performance images claim the same HBM */
    expect_plan_refusal(&moe, &small_hbm, &req, "of HBM");
    /* The defaults' KV cache (8 requests x 1024 positions) does not fit mesh-2x2's HBM. */
    req = request(0, NPU_PLAN_AUTO, NPU_IMAGE_FUNCTIONAL);
    req.max_seq = 0;
    expect_plan_refusal(&moe, &mesh2x2, &req, "of HBM");

    /* SRAM without room for the tile buffers: shrinking tiles does not help when the
       firmware, the scratch and the mailboxes leave nothing, nor when tile_rows is fixed. */
    struct npu_plan_chip small_sram = mesh2x2;
    small_sram.sram_bytes = 0x140000;
    req = request(0, NPU_PLAN_AUTO, NPU_IMAGE_FUNCTIONAL);
    expect_plan_refusal(&dense, &small_sram, &req, "tile buffers");
    req.tile_rows = 512;
    expect_plan_refusal(&dense, &mesh4x4, &req, "the tile buffers (tile_rows 512)");
}

/* ---- shares ---- */

/* The block of W[out][in] rank r must hold: MN rows, K columns, 2D the block (r / C, r % C)
   of the R x C grid of the group's rectangle (equal blocks), as rows x cols at (row0, col0). */
static void expected_share(const struct npu_plan *p, uint32_t part, uint32_t r, uint32_t out,
                           uint32_t in, uint32_t want[4])
{
    const uint32_t R = part == NPU_PART_MN ? p->tp : part == NPU_PART_K ? 1 : p->rect_rows;
    const uint32_t C = p->tp / R, i = r / C, j = r % C;
    if (part == NPU_PART_2D) {
        assert_int_equal(R * C, p->rect_rows * p->rect_cols);
        assert_int_equal(out % R, 0);
        assert_int_equal(in % C, 0);
    }
    want[0] = (uint32_t)((uint64_t)out * i / R); /* row0, rows, col0, cols */
    want[1] = (uint32_t)((uint64_t)out * (i + 1) / R) - want[0];
    want[2] = (uint32_t)((uint64_t)in * j / C);
    want[3] = (uint32_t)((uint64_t)in * (j + 1) / C) - want[2];
}

/* Every split tensor's shares over the ranks cover it exactly once, each rank its block of
   the partition; replicated tensors are one whole entry. */
static void check_shares(const struct model *m, const struct npu_plan_chip *chip, uint32_t tp,
                         uint32_t part)
{
    struct npu_plan_request req = request(tp, part, NPU_IMAGE_FUNCTIONAL);
    struct npu_built_image img = build(m, chip, &req);
    const struct npu_image_header *h = hdr(&img);
    const struct npu_image_tensor *ts = tensors(&img);
    struct tensor_list list = { .n = 0 };
    model_tensors_each(&m->cfg, collect, &list);
    for (uint32_t g = 0; g < NPU_GEMM_COUNT; g++)
        assert_int_equal(h->plan.partition[g], part);
    for (uint32_t i = 0; i < list.n; i++) {
        const struct model_tensor *t = &list.t[i];
        const uint32_t blocks = model_tensor_is_expert(t->kind) ? m->cfg.num_experts : 1;
        const uint32_t out = t->rows / blocks, in = t->cols;
        const bool split = t->kind != MT_EMBED && t->kind != MT_ATTN_NORM &&
                           t->kind != MT_Q_NORM && t->kind != MT_K_NORM &&
                           t->kind != MT_FFN_NORM && t->kind != MT_ROUTER &&
                           t->kind != MT_FINAL_NORM;
        uint8_t *seen = calloc((size_t)out * in, 1), ranks[64] = { 0 };
        assert_non_null(seen);
        uint32_t entries = 0;
        for (uint64_t e = 0; e < h->tensors_count; e++) {
            const struct npu_image_tensor *s = &ts[e];
            if (s->kind != (uint32_t)t->kind || s->layer != t->layer)
                continue;
            entries++;
            assert_int_equal(s->blocks, blocks);
            assert_int_equal(s->block_bytes, (uint64_t)s->rows * s->cols * 4);
            if (!split) {
                assert_int_equal(s->rank, NPU_IMAGE_IDLE);
                assert_int_equal(s->rows, out);
                assert_int_equal(s->cols, in);
                assert_int_equal(s->row0, 0);
                assert_int_equal(s->col0, 0);
                continue;
            }
            assert_true(s->rank < tp);
            assert_int_equal(ranks[s->rank]++, 0);
            uint32_t want[4];
            expected_share(&h->plan, part, s->rank, out, in, want);
            if (part == NPU_PART_MN)
                assert_int_equal(want[1], out / tp); /* equal shares for the all-gather */
            assert_int_equal(s->row0, want[0]);
            assert_int_equal(s->rows, want[1]);
            assert_int_equal(s->col0, want[2]);
            assert_int_equal(s->cols, want[3]);
            assert_true(s->rows >= 1 && s->cols >= 1);
            for (uint32_t y = s->row0; y < s->row0 + s->rows; y++)
                for (uint32_t x = s->col0; x < s->col0 + s->cols; x++)
                    seen[(size_t)y * in + x]++;
        }
        assert_int_equal(entries, split ? tp : 1);
        for (size_t x = 0; split && x < (size_t)out * in; x++)
            if (seen[x] != 1)
                fail_msg("%s tp %u %s: tensor kind %u layer %u: element [%zu][%zu] covered %u "
                         "times", m->cfg.name, tp, npu_partition_name((enum npu_partition)part),
                         t->kind, t->layer, x / in, x % in, seen[x]);
        free(seen);
    }
    /* Entries that are no tensor of the model: none. */
    for (uint64_t e = 0; e < h->tensors_count; e++)
        source_of(&list, &ts[e]);
    npu_built_image_free(&img);
}

static void test_shares_cover(void **state)
{
    (void)state;
    check_shares(&dense, &mesh2x2, 4, NPU_PART_MN);
    check_shares(&dense, &mesh2x2, 4, NPU_PART_K);
    check_shares(&moe, &mesh2x2, 4, NPU_PART_MN);
    check_shares(&moe, &mesh2x2, 4, NPU_PART_K);
    check_shares(&moe, &mesh4x4, 16, NPU_PART_K);
    check_shares(&dense, &mesh4x4, 3, NPU_PART_K); /* uneven columns: 42, 43, 43 */
    check_shares(&dense, &mesh2x2, 2, NPU_PART_MN);
    /* 2D: blocks of the 2x2, 4x4 and 2x4 grids (tp 8 on 4x4 is two rows of 4), and 1x2 */
    check_shares(&dense, &mesh2x2, 4, NPU_PART_2D);
    check_shares(&moe, &mesh2x2, 4, NPU_PART_2D);
    check_shares(&dense, &mesh4x4, 16, NPU_PART_2D);
    check_shares(&moe, &mesh4x4, 16, NPU_PART_2D);
    check_shares(&moe, &mesh4x4, 8, NPU_PART_2D);
    check_shares(&dense, &mesh2x2, 2, NPU_PART_2D);
}

/* ---- weights ---- */

/* Under EP a block is a slice of the layer's expert map: expert x.expert's units [unit0,
   unit0 + units) of its intermediate width (gate and up: rows; down: columns). Element
   [r][c] of block b as an index of the whole tensor in *at; false for a block's padding
   past a slice narrower than the rank's widest. Other shares: *at as given. */
static bool share_element(const struct npu_image_header *h, const struct npu_image_tensor *s,
                          uint64_t b, uint64_t r, uint64_t c, uint64_t out, uint64_t in,
                          uint64_t *at)
{
    if (!model_tensor_is_expert(s->kind) || !npu_plan_is_ep(&h->plan) || h->plan.tp < 2)
        return true;
    uint32_t n;
    const struct npu_image_expert_slice *x = npu_image_expert_layer(h, s->layer, &n);
    assert_true(s->block0 + b < n);
    const struct npu_image_expert_slice *sl = &x[s->block0 + b];
    const bool down = s->kind == MT_E_DOWN;
    const uint64_t w = (down ? in : out) / h->plan.expert_units; /* a unit's width */
    const uint64_t along = down ? c : r; /* the intermediate index inside the slice */
    if (along >= (uint64_t)sl->units * w)
        return false;
    const uint64_t rr = down ? r : sl->unit0 * w + r, cc = down ? sl->unit0 * w + c : c;
    *at = ((uint64_t)sl->expert * out + rr) * in + cc;
    return true;
}

/* Every share's bytes at hbm_off are the generator's values of its elements. */
static void check_weights(const struct model *m, const struct npu_plan_chip *chip, uint32_t tp,
                          uint32_t part, uint32_t dtype)
{
    struct npu_plan_request req = request(tp, part == NPU_PART_EP ? NPU_PART_MN : part,
                                          NPU_IMAGE_FUNCTIONAL);
    if (part == NPU_PART_EP) /* experts (or their units) per rank, the rest MN */
        req.partition[NPU_GEMM_EXP_UP] = req.partition[NPU_GEMM_EXP_DOWN] = NPU_PART_EP;
    req.dtype = (int)dtype;
    struct npu_built_image img = build(m, chip, &req);
    const struct npu_image_header *h = hdr(&img);
    const struct npu_image_tensor *ts = tensors(&img);
    const uint32_t eb = npu_dtype_bytes(dtype);
    assert_int_equal(h->plan.dtype, dtype);
    struct tensor_list list = { .n = 0 };
    model_tensors_each(&m->cfg, collect, &list);
    uint64_t compared = 0;
    for (uint64_t e = 0; e < h->tensors_count; e++) {
        const struct npu_image_tensor *s = &ts[e];
        const struct model_tensor *t = source_of(&list, s);
        float *whole = malloc(t->elems * sizeof(float));
        assert_non_null(whole);
        model_tensor_fill(whole, t, m->cfg.seed, 0, t->elems);
        const uint64_t out =
            t->rows / (model_tensor_is_expert(t->kind) ? m->cfg.num_experts : 1);
        const uint64_t in = t->cols;
        assert_int_equal(s->block_bytes, (uint64_t)s->rows * s->cols * eb);
        const uint8_t *p = img.data + s->hbm_off;
        for (uint64_t b = 0; b < s->blocks; b++)
            for (uint64_t r = 0; r < s->rows; r++)
                for (uint64_t c = 0; c < s->cols; c++, p += eb) {
                    uint64_t at = ((s->block0 + b) * out + s->row0 + r) * in + s->col0 + c;
                    if (!share_element(h, s, b, r, c, out, in, &at)) {
                        continue; /* a narrower slice's padding in its block */
                    }
                    float want = whole[at], got;
                    if (eb == 4) {
                        memcpy(&got, p, 4);
                    } else { /* bf16: the top half of the fp32 value */
                        uint16_t half;
                        memcpy(&half, p, 2);
                        uint32_t bits = (uint32_t)half << 16;
                        memcpy(&got, &bits, 4);
                    }
                    if (memcmp(&got, &want, 4) != 0)
                        fail_msg("%s tp %u: tensor %llu (kind %u layer %u rank %u) block "
                                 "%llu [%llu][%llu]: %.9g, the generator says %.9g",
                                 m->cfg.name, tp, (unsigned long long)e, s->kind, s->layer,
                                 s->rank, (unsigned long long)b, (unsigned long long)r,
                                 (unsigned long long)c, (double)got, (double)want);
                    compared++;
                }
        assert_int_equal(p - (img.data + s->hbm_off), s->block_bytes * s->blocks);
        free(whole);
    }
    /* Every parameter once per rank that holds a share of it, replicated ones once. */
    assert_true(compared >= model_count_params(&m->cfg));
    npu_built_image_free(&img);
}

static void test_functional_weights(void **state)
{
    (void)state;
    check_weights(&dense, &mesh2x2, 4, NPU_PART_MN, NPU_IMAGE_FP32);
    check_weights(&moe, &mesh2x2, 4, NPU_PART_K, NPU_IMAGE_FP32);
    check_weights(&moe, &mesh2x2, 2, NPU_PART_MN, NPU_IMAGE_BF16);
    check_weights(&dense, &mesh4x4, 3, NPU_PART_K, NPU_IMAGE_FP32);
    check_weights(&moe, &mesh2x2, 4, NPU_PART_EP, NPU_IMAGE_FP32);   /* 2 experts a rank */
    check_weights(&moe, &mesh4x4, 16, NPU_PART_EP, NPU_IMAGE_BF16);  /* half an expert a rank */
    check_weights(&moe, &mesh4x4, 8, NPU_PART_2D, NPU_IMAGE_BF16);
}

/* ---- per core ---- */

struct range {
    uint64_t lo, hi;
    uint64_t entry; /* the tensor entry (weights) */
};

/* Whether [off, off + len) lies inside [lo, hi), without wrapping. */
static bool within(uint64_t off, uint64_t len, uint64_t lo, uint64_t hi)
{
    return off >= lo && off <= hi && len <= hi - off;
}

static int by_lo(const void *a, const void *b)
{
    const struct range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Bytes of rank r's shares of layer l (its own shares and the replicated tensors). */
static uint64_t rank_layer_bytes(const struct npu_built_image *img, uint32_t r, uint32_t l)
{
    const struct npu_image_tensor *ts = tensors(img);
    uint64_t sum = 0;
    for (uint64_t e = 0; e < hdr(img)->tensors_count; e++) {
        const struct npu_image_tensor *s = &ts[e];
        if (s->kind == MT_EMBED || s->kind == MT_FINAL_NORM || s->kind == MT_LM_HEAD ||
            s->layer != l || (s->rank != NPU_IMAGE_IDLE && s->rank != r))
            continue;
        sum += s->block_bytes * s->blocks;
    }
    return sum;
}

/* Checks the core table of a plan; `want_resident` 0 or 1 asserts the plan's choice, -1
   accepts either. */
static void check_cores(const struct model *m, const struct npu_plan_chip *chip,
                        struct npu_plan_request req, int want_resident)
{
    struct npu_built_image img = build(m, chip, &req);
    const struct npu_image_header *h = hdr(&img);
    const struct npu_image_core *cs = cores(&img);
    const struct npu_image_tensor *ts = tensors(&img);
    const struct npu_prog_op *ops = prog(&img);
    const uint32_t ncores = chip->mesh_rows * chip->mesh_cols, tp = h->plan.tp;
    const bool resident = h->plan.weights_resident != 0;
    const char *what = m->cfg.name;
    assert_int_equal(tp, req.tp ? req.tp : ncores);
    if (npu_image_check(img.data, img.bytes, err, sizeof(err)) != NPU_OK)
        fail_msg("%s tp %u: %s", what, tp, err);
    if (req.stream_weights)
        assert_false(resident);
    if (want_resident >= 0 && resident != (want_resident == 1))
        fail_msg("%s on %s tp %u: weights_resident %u, wanted %d", what, chip->name, tp,
                 h->plan.weights_resident, want_resident);

    uint32_t seen[64] = { 0 }, busy = 0;
    const uint32_t per_layer = resident ? 2 : 3, nops = 2 + per_layer * m->cfg.num_layers;
    const uint64_t top = chip->sram_bytes - NPU_IMAGE_NOC_RESERVE((uint64_t)ncores);
    for (uint32_t i = 0; i < ncores; i++) {
        const struct npu_image_core *c = &cs[i];
        if (c->rank == NPU_IMAGE_IDLE) {
            assert_int_equal(c->prog_count, 0);
            continue;
        }
        busy++;
        assert_true(c->rank < tp);
        seen[c->rank]++;
        /* The core is in the group's rectangle at (0, 0). */
        assert_true(i / chip->mesh_cols < h->plan.rect_rows);
        assert_true(i % chip->mesh_cols < h->plan.rect_cols);
        /* SRAM: above the firmware, below the mailboxes; the regions in SRAM (scratch,
           tile buffers, residual and KV cache when there, weights or staging) are disjoint.
           The residual and KV cache, when not in SRAM, are in HBM after the weights. */
        assert_true(c->comm_scratch >= NPU_IMAGE_APP_BASE);
        assert_true(c->sram_end <= chip->sram_bytes);
        assert_true(c->sram_end <= top);
        struct range regions[5];
        uint32_t nreg = 0;
        regions[nreg++] = (struct range){ .lo = c->comm_scratch,
                                          .hi = c->comm_scratch + NOC_COMM_SCRATCH_BYTES(
                                                    h->plan.comm_segment) };
        regions[nreg++] = (struct range){ .lo = c->sram_act,
                                          .hi = c->sram_act + c->sram_act_bytes };
        const uint64_t w_at = resident ? c->sram_weights : c->sram_stage;
        const uint64_t w_len = resident ? c->sram_weights_bytes : c->sram_stage_bytes;
        regions[nreg++] = (struct range){ .lo = w_at, .hi = w_at + w_len };
        if (h->plan.kv_in_sram)
            regions[nreg++] = (struct range){ .lo = c->kv_off,
                                              .hi = c->kv_off + c->kv_bytes };
        else
            assert_true(within(c->kv_off, c->kv_bytes, h->weights_off + h->weights_bytes,
                               h->hbm_end));
        if (h->plan.x_in_sram)
            regions[nreg++] = (struct range){ .lo = c->x_off, .hi = c->x_off + c->x_bytes };
        else
            assert_true(within(c->x_off, c->x_bytes, h->weights_off + h->weights_bytes,
                               h->hbm_end));
        assert_true(c->sram_act_bytes > 0);
        assert_true(c->kv_bytes > 0 && c->x_bytes > 0);
        qsort(regions, nreg, sizeof(regions[0]), by_lo);
        for (uint32_t k = 0; k < nreg; k++) {
            if (!within(regions[k].lo, regions[k].hi - regions[k].lo, NPU_IMAGE_APP_BASE,
                        c->sram_end) || regions[k].hi < regions[k].lo)
                fail_msg("%s tp %u rank %u: SRAM region [%#llx, %#llx) outside [%#x, %#llx)",
                         what, tp, c->rank, (unsigned long long)regions[k].lo,
                         (unsigned long long)regions[k].hi, NPU_IMAGE_APP_BASE,
                         (unsigned long long)c->sram_end);
            if (k && regions[k].lo < regions[k - 1].hi)
                fail_msg("%s tp %u rank %u: SRAM regions at %#llx and %#llx overlap", what, tp,
                         c->rank, (unsigned long long)regions[k - 1].lo,
                         (unsigned long long)regions[k].lo);
        }
        /* Its program: EMBED, per layer (STAGE) ATTENTION FFN|MOE, HEAD. */
        assert_int_equal(c->prog_count, nops);
        const struct npu_prog_op *p = ops + c->prog_first;
        assert_int_equal(p[0].kind, NPU_OP_EMBED);
        assert_int_equal(p[nops - 1].kind, NPU_OP_HEAD);
        for (uint32_t l = 0; l < m->cfg.num_layers; l++) {
            const struct npu_prog_op *lp = p + 1 + l * per_layer;
            if (!resident) {
                assert_int_equal(lp->kind, NPU_OP_STAGE);
                assert_int_equal(lp->layer, l);
                lp++;
            }
            assert_int_equal(lp[0].kind, NPU_OP_ATTENTION);
            assert_int_equal(lp[0].layer, l);
            assert_int_equal(lp[0].flags, model_is_sliding_layer(&m->cfg, l) ? NPU_OP_SLIDING
                                                                            : 0);
            assert_int_equal(lp[1].kind, m->cfg.arch == MODEL_MOE ? NPU_OP_MOE : NPU_OP_FFN);
            assert_int_equal(lp[1].layer, l);
        }

        /* The rank's weights: resident, each of its shares at an SRAM offset inside the
           core's weights, none overlapping; streamed, a staging buffer for each layer. */
        struct range *rs = calloc(h->tensors_count, sizeof(*rs));
        assert_non_null(rs);
        uint32_t nr = 0;
        for (uint64_t e = 0; e < h->tensors_count; e++) {
            const struct npu_image_tensor *s = &ts[e];
            if (s->rank != NPU_IMAGE_IDLE && s->rank != c->rank)
                continue;
            if (!resident || s->kind == MT_EMBED) { /* embeddings are read from HBM */
                if (s->sram_off != NPU_IMAGE_NOWHERE)
                    fail_msg("%s tp %u: tensor %llu (kind %u) has SRAM offset %#llx in a "
                             "%s plan", what, tp, (unsigned long long)e, s->kind,
                             (unsigned long long)s->sram_off,
                             resident ? "resident" : "streamed");
                continue;
            }
            if (s->sram_off == NPU_IMAGE_NOWHERE)
                fail_msg("%s tp %u: tensor %llu (kind %u layer %u rank %u) has no SRAM offset "
                         "in a resident plan", what, tp, (unsigned long long)e, s->kind,
                         s->layer, s->rank);
            rs[nr++] = (struct range){ s->sram_off, s->sram_off + s->block_bytes * s->blocks,
                                       e };
        }
        if (resident) {
            assert_int_equal(c->sram_stage_bytes, 0);
            qsort(rs, nr, sizeof(*rs), by_lo);
            for (uint32_t k = 0; k < nr; k++) {
                const struct npu_image_tensor *s = &ts[rs[k].entry];
                if (rs[k].lo < c->sram_weights || rs[k].hi > c->sram_end ||
                    rs[k].hi > c->sram_weights + c->sram_weights_bytes)
                    fail_msg("%s on %s tp %u rank %u: tensor %llu (kind %u layer %u rank %u, "
                             "%ux%u) at SRAM [%#llx, %#llx) is outside the core's resident weights "
                             "[%#llx, +%#llx), sram_end %#llx", what, chip->name, tp, c->rank,
                             (unsigned long long)rs[k].entry, s->kind, s->layer, s->rank,
                             s->rows, s->cols, (unsigned long long)rs[k].lo,
                             (unsigned long long)rs[k].hi, (unsigned long long)c->sram_weights,
                             (unsigned long long)c->sram_weights_bytes,
                             (unsigned long long)c->sram_end);
                if (k && rs[k].lo < rs[k - 1].hi)
                    fail_msg("%s tp %u rank %u: shares at %#llx and %#llx overlap", what, tp,
                             c->rank, (unsigned long long)rs[k - 1].lo,
                             (unsigned long long)rs[k].lo);
            }
        } else {
            assert_true(c->sram_stage >= c->sram_act + c->sram_act_bytes);
            assert_true(c->sram_stage + c->sram_stage_bytes <= c->sram_end);
            for (uint32_t l = 0; l < m->cfg.num_layers; l++) {
                uint64_t need = rank_layer_bytes(&img, c->rank, l);
                if (c->sram_stage_bytes < need)
                    fail_msg("%s tp %u rank %u: staging buffer %llu bytes, layer %u's shares "
                             "need %llu", what, tp, c->rank,
                             (unsigned long long)c->sram_stage_bytes, l,
                             (unsigned long long)need);
            }
        }
        free(rs);
    }
    assert_int_equal(busy, tp);
    for (uint32_t r = 0; r < tp; r++)
        if (seen[r] != 1)
            fail_msg("%s: rank %u on %u cores", what, r, seen[r]);
    npu_built_image_free(&img);
}

static void test_per_core(void **state)
{
    (void)state;
    const struct model *models[] = { &dense, &moe };
    for (int i = 0; i < 2; i++) {
        const struct model *m = models[i];
        const bool is_dense = m == &dense;
        /* Default shapes: the residual and the KV cache take SRAM first, the weights are
           staged where nothing is left. */
        struct npu_plan_request req = request(0, NPU_PART_MN, NPU_IMAGE_FUNCTIONAL);
        check_cores(m, &mesh2x2, req, -1);           /* 4 ranks */
        req.placement = 0;                           /* linear */
        check_cores(m, &mesh4x4, req, -1);           /* 16 ranks */
        req = request(8, NPU_PART_K, NPU_IMAGE_PERFORMANCE);
        req.placement = 3;                           /* mesh2d */
        check_cores(m, &mesh4x4, req, -1);           /* 2x4 of 16 cores, 8 idle */
        req = request(is_dense ? 2 : 4, NPU_PART_K, NPU_IMAGE_FUNCTIONAL);
        check_cores(m, &mesh4x4, req, -1);           /* 1x2 or 1x4 (tiny-moe needs 4) */
        const uint32_t uneven = is_dense ? 3 : 6;    /* 1x3 or 2x3: K shares 42/43 or 21/22 */
        req = request(uneven, NPU_PART_K, NPU_IMAGE_FUNCTIONAL);
        check_cores(m, &mesh4x4, req, -1);
        req = request(1, NPU_PART_MN, NPU_IMAGE_FUNCTIONAL);
        check_cores(m, &mesh2x2, req, -1);           /* one core */

        /* Small iterations (one request of 64 positions, 64 rows, tiles of 8): the weights
           are resident on mesh-2x2, and with uneven shares on a 4x4 mesh of 8 MiB cores. */
        req = request(4, NPU_PART_MN, NPU_IMAGE_FUNCTIONAL);
        req.max_batch = 1, req.max_tokens = 64, req.tile_rows = 8;
        check_cores(m, &mesh2x2, req, 1);
        req.partition[NPU_GEMM_O] = NPU_PART_K;      /* mixed partitions */
        req.partition[NPU_GEMM_LM_HEAD] = NPU_PART_K;
        check_cores(m, &mesh2x2, req, 1);
        struct npu_plan_chip big = mesh4x4;
        big.sram_bytes = 0x800000;
        snprintf(big.name, sizeof(big.name), "mesh-4x4 with 8 MiB cores");
        req = request(16, NPU_PART_MN, NPU_IMAGE_FUNCTIONAL);
        req.partition[NPU_GEMM_QKV] = NPU_PART_K;
        req.max_batch = 1, req.max_tokens = 64, req.tile_rows = 8;
        check_cores(m, &big, req, 1);

        /* Streamed weights: nothing resident, staged per layer, even where they fit. */
        req = request(4, NPU_PART_MN, NPU_IMAGE_FUNCTIONAL);
        req.max_batch = 1, req.max_tokens = 64, req.stream_weights = 1;
        check_cores(m, &mesh2x2, req, 0);
        req = request(uneven, NPU_PART_K, NPU_IMAGE_PERFORMANCE);
        req.stream_weights = 1;
        check_cores(m, &mesh4x4, req, 0);
        req = request(16, NPU_PART_MN, NPU_IMAGE_FUNCTIONAL);
        req.stream_weights = 1;
        check_cores(m, &mesh4x4, req, 0);
    }
}

/* Resident weights with uneven K shares (128 columns over 3, 6 or 12 ranks): each rank's
   shares lie inside its own core's weights and below its sram_end. */
static void test_per_core_uneven_resident(void **state)
{
    (void)state;
    struct npu_plan_chip big = mesh4x4;
    big.sram_bytes = 0x800000;
    snprintf(big.name, sizeof(big.name), "mesh-4x4 with 8 MiB cores");
    const struct model *models[] = { &dense, &moe };
    for (int i = 0; i < 2; i++) {
        struct npu_plan_request req = request(models[i] == &dense ? 3 : 6, NPU_PART_K,
                                              NPU_IMAGE_FUNCTIONAL);
        req.max_batch = 1, req.max_tokens = 64, req.tile_rows = 8;
        check_cores(models[i], &big, req, 1);
        req = request(12, NPU_PART_K, NPU_IMAGE_PERFORMANCE);
        req.max_batch = 1, req.max_tokens = 64, req.tile_rows = 8;
        check_cores(models[i], &big, req, 1);
    }
}

/* ---- auto partition ---- */

/* `auto`: the FFN's and the experts' up GEMMs MN and down GEMMs K (the column-then-row
   pairing, docs/images.md), the LM head MN (vocab-parallel: tiny models' 512 tokens split
   over 4 ranks), every other GEMM K below the hidden size and MN from it on. */
static uint32_t auto_part(uint32_t g, uint32_t others)
{
    if (g == NPU_GEMM_LM_HEAD)
        return NPU_PART_MN;
    if (g == NPU_GEMM_FFN_UP || g == NPU_GEMM_EXP_UP)
        return NPU_PART_MN;
    if (g == NPU_GEMM_FFN_DOWN || g == NPU_GEMM_EXP_DOWN)
        return NPU_PART_K;
    return others;
}

static void expect_auto(const struct model *m, uint32_t max_tokens, uint32_t want)
{
    struct npu_plan_request req = request(4, NPU_PLAN_AUTO, NPU_IMAGE_FUNCTIONAL);
    req.max_tokens = max_tokens;
    req.placement = NOC_PLACE_RING; /* on mesh2d, qkv and o would be 2-D (test_auto_plan) */
    req.partition[NPU_GEMM_EXP_UP] = NPU_PART_MN, req.partition[NPU_GEMM_EXP_DOWN] = NPU_PART_K;
    struct npu_built_image img = build(m, &mesh2x2, &req);
    const struct npu_image_header *h = hdr(&img);
    assert_int_equal(h->plan.max_tokens, max_tokens);
    for (uint32_t g = 0; g < NPU_GEMM_COUNT; g++)
        if (h->plan.partition[g] != auto_part(g, want))
            fail_msg("%s max_tokens %u: %s is %s, wanted %s", m->cfg.name, max_tokens,
                     npu_gemm_name((enum npu_gemm)g),
                     npu_partition_name((enum npu_partition)h->plan.partition[g]),
                     npu_partition_name((enum npu_partition)auto_part(g, want)));
    /* The shares follow: the query projection split by rows (MN) or columns (K). */
    const struct npu_image_tensor *ts = tensors(&img);
    bool found = false;
    for (uint64_t e = 0; e < h->tensors_count; e++)
        if (ts[e].kind == MT_WQ && ts[e].layer == 0 && ts[e].rank == 1) {
            found = true;
            if (want == NPU_PART_MN)
                assert_true(ts[e].row0 > 0 && ts[e].col0 == 0);
            else
                assert_true(ts[e].col0 > 0 && ts[e].row0 == 0);
        }
    assert_true(found);
    npu_built_image_free(&img);
}

static void test_auto_partition(void **state)
{
    (void)state;
    const uint32_t d = dense.cfg.hidden_size; /* 128, as tiny-moe's */
    assert_int_equal(moe.cfg.hidden_size, d);
    expect_auto(&dense, 8, NPU_PART_K);
    expect_auto(&dense, d - 1, NPU_PART_K);
    expect_auto(&dense, d, NPU_PART_MN);
    expect_auto(&dense, 512, NPU_PART_MN);
    expect_auto(&moe, 64, NPU_PART_K);
    expect_auto(&moe, d, NPU_PART_MN);
    /* a vocabulary that does not split evenly (512 over 12 ranks) keeps the head K */
    struct npu_plan_request req = request(12, NPU_PART_K, NPU_IMAGE_FUNCTIONAL);
    req.max_tokens = 8, req.partition[NPU_GEMM_LM_HEAD] = NPU_PLAN_AUTO;
    struct npu_built_image img = build(&dense, &mesh4x4, &req);
    assert_int_equal(hdr(&img)->plan.partition[NPU_GEMM_LM_HEAD], NPU_PART_K);
    npu_built_image_free(&img);
}

/* The automatic plan (npu_plan_auto.c): fields left unset follow the model, the chip and
   the shape; a field the request sets is kept. */
static struct npu_plan auto_plan(const struct model *m, const struct npu_plan_chip *chip,
                                 const struct npu_plan_request *req)
{
    struct npu_built_image img = build(m, chip, req);
    const struct npu_plan p = hdr(&img)->plan;
    npu_built_image_free(&img);
    return p;
}

static void test_auto_plan(void **state)
{
    (void)state;
    /* tp 16 as 4 x 4: 2-D projections on mesh2d; 8 experts over 16 ranks EP, each expert's
       two units on two ranks; split attention in blocks of 128 and steps of 3 blocks; tiles
       of 64 (16 x 16 array) */
    struct npu_plan_chip roomy = mesh4x4; /* 8 MiB cores: nothing shrinks to fit */
    roomy.sram_bytes = 0x800000;
    struct npu_plan_request req = request(0, NPU_PLAN_AUTO, NPU_IMAGE_FUNCTIONAL);
    req.kv_split = -1;
    struct npu_plan p = auto_plan(&moe, &roomy, &req);
    assert_int_equal(p.placement, NOC_PLACE_MESH2D);
    assert_int_equal(p.partition[NPU_GEMM_QKV], NPU_PART_2D);
    assert_int_equal(p.partition[NPU_GEMM_O], NPU_PART_2D);
    assert_int_equal(p.partition[NPU_GEMM_EXP_UP], NPU_PART_EP);
    assert_int_equal(p.partition[NPU_GEMM_EXP_DOWN], NPU_PART_EP);
    assert_int_equal(p.expert_units, 2);
    assert_int_equal(p.kv_split, 1);
    assert_int_equal(p.kv_block, 128);
    assert_int_equal(p.attn_block, 384);
    assert_int_equal(p.tile_rows, 64);
    /* 12 experts over 16 ranks do not split evenly (4 ranks would hold none): MN/K */
    struct model twelve = moe;
    twelve.cfg.num_experts = 12;
    p = auto_plan(&twelve, &roomy, &req);
    assert_int_equal(p.partition[NPU_GEMM_EXP_UP], NPU_PART_MN);
    assert_int_equal(p.partition[NPU_GEMM_EXP_DOWN], NPU_PART_K);
    /* tp 4: 8 experts, two a rank: expert parallelism */
    p = auto_plan(&moe, &mesh2x2, &req);
    assert_int_equal(p.partition[NPU_GEMM_EXP_UP], NPU_PART_EP);
    assert_int_equal(p.partition[NPU_GEMM_EXP_DOWN], NPU_PART_EP);
    /* the user's placement stands, and the projections follow section 5.6 on it */
    req.placement = NOC_PLACE_RING;
    p = auto_plan(&moe, &roomy, &req);
    assert_int_equal(p.placement, NOC_PLACE_RING);
    assert_int_equal(p.partition[NPU_GEMM_QKV], NPU_PART_MN); /* 512 tokens >= hidden */
    /* unsplit when asked: blocks of 256, steps of one block */
    req = request(0, NPU_PLAN_AUTO, NPU_IMAGE_FUNCTIONAL);
    req.kv_split = 0;
    p = auto_plan(&dense, &roomy, &req);
    assert_int_equal(p.kv_split, 0);
    assert_int_equal(p.kv_block, 256);
    assert_int_equal(p.attn_block, 256);
    /* one rank: nothing to split, no grid, ring */
    req = request(1, NPU_PLAN_AUTO, NPU_IMAGE_FUNCTIONAL);
    req.kv_split = -1;
    p = auto_plan(&moe, &mesh2x2, &req);
    assert_int_equal(p.kv_split, 0);
    assert_int_equal(p.placement, NOC_PLACE_RING);
    assert_int_not_equal(p.partition[NPU_GEMM_EXP_UP], NPU_PART_EP);
    /* a 128 x 128 array: tiles of 128 */
    struct npu_plan_chip big = mesh2x2;
    big.sa_rows = big.sa_cols = 128;
    req = request(0, NPU_PLAN_AUTO, NPU_IMAGE_PERFORMANCE);
    req.kv_split = -1;
    p = auto_plan(&dense, &big, &req);
    assert_int_equal(p.tile_rows, 128);
    /* tiles of at most a requested MoE group (EP: tp 4 with 8 experts) */
    req = request(0, NPU_PLAN_AUTO, NPU_IMAGE_PERFORMANCE);
    req.kv_split = -1, req.moe_rows = 32;
    p = auto_plan(&moe, &big, &req);
    assert_int_equal(p.partition[NPU_GEMM_EXP_UP], NPU_PART_EP);
    assert_int_equal(p.tile_rows, 32);
    assert_int_equal(p.moe_rows, 32);
}

/* Choices that do not fit fall back to the simpler ones, and the summary says why: tiny-moe
   over 4 of mesh-4x4's 2 MiB cores does not fit split attention's buffers. */
static void test_auto_plan_fallback(void **state)
{
    (void)state;
    struct npu_plan_request req = request(4, NPU_PART_K, NPU_IMAGE_FUNCTIONAL);
    req.kv_split = -1;
    char text[4096];
    struct npu_built_image img = build_summary(&moe, &mesh4x4, &req, text, sizeof(text));
    assert_int_equal(hdr(&img)->plan.kv_split, 0);
    npu_built_image_free(&img);
    if (!strstr(text, "the simpler choices: placement ring, kv split off") ||
        !strstr(text, "the planner's own choices were refused: "))
        fail_msg("fallback not reported:\n%s", text);
}

/* ---- split attention ---- */

/* The cache sizes follow the stripes: a rank holds ceil(max_seq / (tp x B)) blocks of a
   request, so the ring defaults to max_batch of those and the pool is capped at them. */
/* The staging map (npu_stage_map_layer) both the planner and the cores use: for every rank
   of a streamed plan, every layer of its stage fits the staging buffer the planner gave it,
   the largest one fills it, and the pieces are 64-byte aligned and do not overlap. */
static void check_stage_maps(const struct model *m, const struct npu_plan_chip *chip,
                             struct npu_plan_request req)
{
    struct npu_built_image img = build(m, chip, &req);
    const struct npu_image_header *h = hdr(&img);
    const struct npu_image_tensor *ts = tensors(&img);
    for (uint32_t c = 0; c < h->cores_count; c++) {
        const struct npu_image_core *core = &cores(&img)[c];
        if (core->rank == NPU_IMAGE_IDLE)
            continue;
        assert_int_not_equal(core->sram_stage_bytes, 0);
        uint64_t largest = 0, nonexp = 0; /* a layer's map, its shares before the experts */
        const uint32_t l0 = core->stage * h->plan.stage_layers;
        for (uint32_t l = l0; l < l0 + h->plan.stage_layers; l++) {
            const struct npu_image_tensor *t[NPU_STAGE_KINDS] = { 0 };
            for (uint64_t i = 0; i < h->tensors_count; i++)
                if (ts[i].layer == l && ts[i].kind < NPU_STAGE_KINDS &&
                    (ts[i].rank == NPU_IMAGE_IDLE || ts[i].rank == core->rank))
                    t[ts[i].kind] = &ts[i];
            struct npu_stage_map map;
            npu_stage_map_layer(t, h->plan.expert_slots, &map);
            assert_true(map.bytes <= core->sram_stage_bytes);
            largest = map.bytes > largest ? map.bytes : largest;
            nonexp = map.experts > nonexp ? map.experts : nonexp;
            uint64_t end = 0; /* shares in kind order, each after the one before */
            for (uint32_t k = MT_ATTN_NORM; k < MT_FINAL_NORM; k++) {
                if (!t[k] || model_tensor_is_expert(k))
                    continue;
                assert_int_equal(map.off[k] % 64, 0);
                assert_true(map.off[k] >= end);
                end = map.off[k] + t[k]->blocks * t[k]->block_bytes;
            }
            assert_true(end <= map.experts && map.experts % 64 == 0);
            if (t[MT_E_GATE] && h->plan.expert_slots) { /* the ring: slots of a matrix */
                assert_int_equal(map.expert_slots, 0);
                assert_int_equal(map.ring_slots, t[MT_E_GATE]->blocks ? h->plan.expert_slots : 0);
                for (uint32_t k = MT_E_GATE; k <= MT_E_DOWN; k++)
                    assert_true(map.ring_span >= t[k]->block_bytes);
                assert_int_equal(map.ring_span % 64, 0);
                assert_int_equal(map.bytes, map.experts + map.ring_span * map.ring_slots);
            } else if (t[MT_E_GATE]) {
                assert_int_equal(map.expert_slots, t[MT_E_GATE]->blocks);
                assert_true(map.off[MT_E_UP] >= t[MT_E_GATE]->block_bytes);
                assert_true(map.off[MT_E_DOWN] >= map.off[MT_E_UP] + t[MT_E_UP]->block_bytes);
                assert_true(map.expert_span >= map.off[MT_E_DOWN] + t[MT_E_DOWN]->block_bytes);
                assert_int_equal(map.expert_span % 64, 0);
            }
        }
        /* the double buffer (plan.stage_double): a second copy of the largest non-expert
           part after the largest map */
        assert_int_equal(((largest + 63) & ~63ull) +
                             (h->plan.stage_double == NPU_STAGE_DOUBLE ? (nonexp + 63) & ~63ull
                                                                        : 0),
                         core->sram_stage_bytes);
    }
    free(img.data);
}

static void test_stage_map(void **state)
{
    (void)state;
    struct npu_plan_request req = request(4, NPU_PART_MN, NPU_IMAGE_FUNCTIONAL);
    req.max_batch = 1, req.max_tokens = 64, req.stream_weights = 1;
    check_stage_maps(&moe, &mesh2x2, req);
    check_stage_maps(&dense, &mesh2x2, req);
    req = request(16, NPU_PART_MN, NPU_IMAGE_PERFORMANCE); /* experts whole, per rank */
    req.partition[NPU_GEMM_EXP_UP] = req.partition[NPU_GEMM_EXP_DOWN] = NPU_PART_EP;
    req.stream_weights = 1;
    check_stage_maps(&moe, &mesh4x4, req); /* the default expert ring */
    req.expert_slots = 1;
    check_stage_maps(&moe, &mesh4x4, req);
    req = request(8, NPU_PART_K, NPU_IMAGE_PERFORMANCE);
    req.stream_weights = 1, req.stages = 2;
    check_stage_maps(&moe, &mesh4x4, req);
    /* staged weights are double-buffered where SRAM holds the second copy; not when asked
       for one buffer, nor with resident weights */
    req = request(4, NPU_PART_MN, NPU_IMAGE_FUNCTIONAL);
    req.max_batch = 1, req.max_tokens = 64, req.tile_rows = 8, req.stream_weights = 1;
    struct npu_built_image img = build(&moe, &mesh2x2, &req);
    assert_int_equal(hdr(&img)->plan.stage_double, 1);
    free(img.data);
    req.stage_single = 1;
    check_stage_maps(&moe, &mesh2x2, req);
    img = build(&moe, &mesh2x2, &req);
    assert_int_equal(hdr(&img)->plan.stage_double, NPU_STAGE_OWN);
    free(img.data);
    req.stage_single = 0, req.stream_weights = 0;
    img = build(&moe, &mesh2x2, &req);
    assert_true(hdr(&img)->plan.weights_resident);
    assert_int_equal(hdr(&img)->plan.stage_double, 0);
    free(img.data);
}

static void test_kv_split_sizes(void **state)
{
    (void)state;
    struct npu_plan_request req = request(4, NPU_PART_MN, NPU_IMAGE_FUNCTIONAL);
    req.max_batch = 2, req.max_seq = 100, req.kv_block = 16, req.tile_rows = 16;
    req.kv_sram_blocks = -1; /* auto: as many as SRAM takes, capped at what can be used */
    req.kv_split = 0;
    struct npu_built_image img = build(&dense, &mesh2x2, &req);
    const struct npu_plan *p = &hdr(&img)->plan;
    assert_int_equal(p->kv_split, 0);
    assert_int_equal(p->comm_segment, NPU_IMAGE_COMM_SEGMENT_SMALL); /* 4 MiB cores */
    assert_int_equal(p->kv_ring_rows, 2 * 100);
    assert_int_equal(p->kv_sram_blocks, 2 * 7); /* ceil(100 / 16) blocks a request */
    npu_built_image_free(&img);
    req.kv_split = 1;
    img = build(&dense, &mesh2x2, &req);
    p = &hdr(&img)->plan;
    assert_int_equal(p->kv_split, 1);
    assert_int_equal(npu_kv_stripe(p), 64);
    assert_int_equal(npu_kv_local_rows(p, 100), 32); /* 2 stripes of 16 rows */
    assert_int_equal(npu_kv_local_rows(p, 64), 16);
    assert_int_equal(p->kv_ring_rows, 2 * 32);
    assert_int_equal(p->kv_sram_blocks, 2 * 2);
    if (npu_image_check(img.data, img.bytes, err, sizeof(err)) != NPU_OK)
        fail_msg("split image: %s", err);
    npu_built_image_free(&img);
    req.kv_split = 2;
    expect_plan_refusal(&dense, &mesh2x2, &req, "kv_split 2 is not 0 or 1");
    req.kv_split = 1, req.tp = 1;
    expect_plan_refusal(&dense, &mesh2x2, &req, "tp 1, nothing to split over");
}

/* Each request's first stripe block: 2^j consecutive requests start evenly spaced, so a
   batch of equal contexts puts equal blocks on every rank (npu_kv_rank_shift). */
static void test_kv_rank_shift(void **state)
{
    (void)state;
    struct npu_plan p = { .kv_split = 1, .tp = 64 };
    const uint32_t want[8] = { 0, 32, 16, 48, 8, 40, 24, 56 };
    for (uint32_t q = 0; q < 8; q++)
        assert_int_equal(npu_kv_rank_shift(&p, q), want[q]);
    assert_int_equal(npu_kv_rank_shift(&p, 64 + 3), 48); /* the order repeats every tp ids */
    /* 8 requests of 32 blocks: every rank holds 4 of them */
    uint32_t held[64] = { 0 };
    for (uint32_t q = 0; q < 8; q++)
        for (uint32_t b = 0; b < 32; b++)
            held[(b + npu_kv_rank_shift(&p, q)) % 64]++;
    for (uint32_t r = 0; r < 64; r++)
        assert_int_equal(held[r], 4);
    /* not a power of two: the bit-reversed order of [0, 16) without 12..15, so any 12
       consecutive ids start on 12 distinct ranks */
    p.tp = 12;
    const uint32_t want12[12] = { 0, 8, 4, 2, 10, 6, 1, 9, 5, 3, 11, 7 };
    for (uint32_t q = 0; q < 40; q++)
        assert_int_equal(npu_kv_rank_shift(&p, q), want12[q % 12]);
    p.tp = 3; /* 0, 2, 1 */
    assert_int_equal(npu_kv_rank_shift(&p, 1), 2);
    assert_int_equal(npu_kv_rank_shift(&p, 2), 1);
    p.kv_split = 0;
    assert_int_equal(npu_kv_rank_shift(&p, 5), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_build_and_check),
        cmocka_unit_test(test_kv_rank_shift),
        cmocka_unit_test(test_image_refusals),
        cmocka_unit_test(test_expert_map_refusals),
        cmocka_unit_test(test_check_chip),
        cmocka_unit_test(test_plan_refusals),
        cmocka_unit_test(test_shares_cover),
        cmocka_unit_test(test_functional_weights),
        cmocka_unit_test(test_per_core),
        cmocka_unit_test(test_per_core_uneven_resident),
        cmocka_unit_test(test_auto_partition),
        cmocka_unit_test(test_auto_plan),
        cmocka_unit_test(test_auto_plan_fallback),
        cmocka_unit_test(test_kv_split_sizes),
        cmocka_unit_test(test_stage_map),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
