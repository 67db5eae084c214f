/* SPDX-License-Identifier: MIT */
/*
 * The planner's expert parallelism and pipeline stages (docs/images.md): which rank holds
 * which experts, which core runs which stage and program, and the refusals.
 */
#include "image_fixture.h"

#include "model_weights.h"
#include "npu_layout.h"
#include "routing_model.h"

/* EP over more ranks than experts, tp a multiple of E: every rank one slice, unit r mod U
   of expert r / U (U = tp / E units an expert), in every layer; the image check passes. */
static void check_ep_units(struct npu_built_image *img, uint32_t tp)
{
    const struct npu_image_header *h = hdr(img);
    const uint32_t E = moe.cfg.num_experts, U = tp / E;
    assert_int_equal(tp % E, 0);
    assert_int_equal(h->plan.expert_units, U);
    assert_int_equal(h->plan.expert_rank_slices, 1);
    for (uint32_t l = 0; l < moe.cfg.num_layers; l++) {
        uint32_t n;
        const struct npu_image_expert_slice *x = npu_image_expert_layer(h, l, &n);
        assert_int_equal(n, tp);
        for (uint32_t i = 0; i < n; i++) {
            assert_int_equal(x[i].rank, i);
            assert_int_equal(x[i].expert, i / U);
            assert_int_equal(x[i].unit0, i % U);
            assert_int_equal(x[i].units, 1);
        }
    }
    char text[4096];
    assert_int_equal(npu_image_check(img->data, img->bytes, text, sizeof(text)), NPU_OK);
    npu_built_image_free(img);
}

/* EP over tp ranks: every expert tensor of every layer has one entry per rank, holding the
   whole experts [r E / tp, (r + 1) E / tp) (possibly none), so each expert is on exactly
   one rank; the other tensors are split as the rest of the plan says. */
static void check_ep(const struct npu_plan_chip *chip, uint32_t tp)
{
    struct npu_plan_request req = request(tp, NPU_PART_K, NPU_IMAGE_FUNCTIONAL);
    req.partition[NPU_GEMM_EXP_UP] = req.partition[NPU_GEMM_EXP_DOWN] = NPU_PART_EP;
    struct npu_built_image img = build(&moe, chip, &req);
    const struct npu_image_header *h = hdr(&img);
    const struct npu_image_tensor *ts = tensors(&img);
    const uint32_t E = moe.cfg.num_experts, L = moe.cfg.num_layers;
    assert_true(npu_plan_is_ep(&h->plan));
    if (tp > E) { /* U = tp / E ranks an expert, rank r unit r mod U of expert r / U */
        check_ep_units(&img, tp);
        return;
    }
    uint32_t owner[3][8][64]; /* [kind][layer][expert]: owning rank + 1 */
    memset(owner, 0, sizeof(owner));
    assert_true(E <= 64 && L <= 8);
    for (uint64_t i = 0; i < h->tensors_count; i++) {
        const struct npu_image_tensor *t = &ts[i];
        if (!model_tensor_is_expert(t->kind))
            continue;
        assert_true(t->rank < tp);
        assert_int_equal(t->block0, (uint64_t)E * t->rank / tp);
        assert_int_equal(t->block0 + t->blocks, (uint64_t)E * (t->rank + 1) / tp);
        assert_int_equal(t->row0, 0);
        assert_int_equal(t->col0, 0);
        assert_int_equal(t->rows * t->cols, t->kind == MT_E_DOWN
                         ? moe.cfg.hidden_size * moe.cfg.moe_intermediate_size
                         : moe.cfg.moe_intermediate_size * moe.cfg.hidden_size);
        for (uint32_t e = t->block0; e < t->block0 + t->blocks; e++) {
            assert_int_equal(owner[t->kind - MT_E_GATE][t->layer][e], 0);
            owner[t->kind - MT_E_GATE][t->layer][e] = t->rank + 1;
        }
    }
    for (uint32_t k = 0; k < 3; k++)
        for (uint32_t l = 0; l < L; l++)
            for (uint32_t e = 0; e < E; e++)
                assert_int_not_equal(owner[k][l][e], 0);
    char text[4096];
    assert_int_equal(npu_image_check(img.data, img.bytes, text, sizeof(text)), NPU_OK);
    npu_built_image_free(&img);
}

static void test_ep_shares(void **state)
{
    (void)state;
    check_ep(&mesh2x2, 4);  /* 8 experts: 2 a rank */
    check_ep(&mesh4x4, 6);  /* 1, 1, 2, 1, 1, 2 */
    check_ep(&mesh4x4, 16); /* 2 ranks an expert, half of it each */
}

/* Layer l's copies (x[0..n)): every slice of an expert says the same number of copies,
   each copy holds each of the expert's U units once, and no rank holds two slices of one
   expert (copies or not). Returns the most copies of an expert in the layer. */
static uint32_t check_copies(const struct npu_image_expert_slice *x, uint32_t n, uint32_t U)
{
    uint32_t most = 1;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t units[NPU_EXPERT_REPLICAS_MAX] = { 0 };
        assert_true(x[i].reps >= 1 && x[i].reps <= NPU_EXPERT_REPLICAS_MAX);
        assert_true(x[i].rep < x[i].reps);
        most = x[i].reps > most ? x[i].reps : most;
        for (uint32_t j = 0; j < n; j++) {
            if (x[j].expert != x[i].expert)
                continue;
            assert_int_equal(x[j].reps, x[i].reps);
            assert_true(j == i || x[j].rank != x[i].rank);
            units[x[j].rep] += x[j].units;
        }
        for (uint32_t c = 0; c < x[i].reps; c++)
            assert_int_equal(units[c], U);
    }
    return most;
}

/* Balanced expert placement under skewed routing (docs/images.md, "Expert placement"):
   every expert's units held once (the image check), each rank's tensors are its slices of
   the map, the layer's most popular expert (the routing model's heaviest weight) is cut
   into slices on several ranks, and contiguous placement keeps whole experts in order (or,
   with U times as many ranks as experts, each expert's U units on U ranks in order). */
static void check_balanced(const struct npu_plan_chip *chip, uint32_t tp)
{
    struct npu_plan_request req = request(tp, NPU_PART_K, NPU_IMAGE_PERFORMANCE);
    req.partition[NPU_GEMM_EXP_UP] = req.partition[NPU_GEMM_EXP_DOWN] = NPU_PART_EP;
    req.routing = NPU_ROUTING_SKEWED, req.routing_skew_milli = 1500;
    req.max_tokens = 64; /* one MoE group a layer: hot experts are split */
    struct npu_built_image img = build(&moe, chip, &req);
    const struct npu_image_header *h = hdr(&img);
    char text[4096];
    assert_int_equal(npu_image_check(img.data, img.bytes, text, sizeof(text)), NPU_OK);
    assert_int_equal(h->plan.expert_placement, NPU_EXPERTS_BALANCED);
    assert_true(h->plan.expert_units > 1);
    const struct routing_model rm = { .experts = moe.cfg.num_experts,
                                      .k = moe.cfg.experts_per_token, .skew_milli = 1500,
                                      .seed = req.routing_seed };
    for (uint32_t l = 0; l < moe.cfg.num_layers; l++) {
        uint32_t n, hot = 0, hot_slices = 0;
        const struct npu_image_expert_slice *x = npu_image_expert_layer(h, l, &n);
        uint64_t cum[ROUTING_EXPERTS_MAX], best = 0;
        routing_layer_table(&rm, l, cum);
        for (uint32_t e = 0; e < rm.experts; e++)
            if (cum[e] - (e ? cum[e - 1] : 0) > best)
                best = cum[e] - (e ? cum[e - 1] : 0), hot = e;
        for (uint32_t i = 0; i < n; i++)
            hot_slices += x[i].expert == hot;
        assert_true(hot_slices > 1);
        check_copies(x, n, h->plan.expert_units);
        const struct npu_image_tensor *ts = tensors(&img);
        for (uint64_t i = 0; i < h->tensors_count; i++) {
            if (!model_tensor_is_expert(ts[i].kind) || ts[i].layer != l)
                continue;
            uint32_t first = 0, count = 0;
            for (uint32_t j = 0; j < n; j++)
                first += x[j].rank < ts[i].rank, count += x[j].rank == ts[i].rank;
            assert_int_equal(ts[i].block0, first);
            assert_int_equal(ts[i].blocks, count);
        }
    }
    npu_built_image_free(&img);
    req.expert_placement = NPU_EXPERTS_CONTIGUOUS;
    img = build(&moe, chip, &req);
    h = hdr(&img);
    const uint32_t E = moe.cfg.num_experts, U = tp > E ? tp / E : 1; /* units over U ranks */
    assert_int_equal(h->plan.expert_units, U);
    uint32_t n;
    const struct npu_image_expert_slice *x = npu_image_expert_layer(h, 0, &n);
    assert_int_equal(n, E * U);
    for (uint32_t i = 0; i < n; i++)
        assert_int_equal(x[i].expert, i / U);
    npu_built_image_free(&img);
}

static void test_ep_balanced(void **state)
{
    (void)state;
    check_balanced(&mesh2x2, 4);
    check_balanced(&mesh4x4, 16);
}

/* tiny-moe over 16 ranks in performance mode, experts EP, routing skewed with alpha
   skew_milli / 1000, max_tokens rows of up to max_batch requests of 1024 positions. */
static struct npu_plan_request ep_request(uint32_t skew_milli, uint32_t max_tokens,
                                          uint32_t max_batch)
{
    struct npu_plan_request req = request(16, NPU_PART_K, NPU_IMAGE_PERFORMANCE);
    req.partition[NPU_GEMM_EXP_UP] = req.partition[NPU_GEMM_EXP_DOWN] = NPU_PART_EP;
    req.routing = skew_milli ? NPU_ROUTING_SKEWED : req.routing;
    req.routing_skew_milli = skew_milli;
    req.max_tokens = max_tokens, req.max_seq = 1024, req.max_batch = max_batch;
    return req;
}

/* Copies of hot experts (docs/images.md, "Expert copies"): in the MoE over the layer of
   several groups (tiny-moe, 16 ranks of a clocked 4x4 chip, groups of 64 rows over 512)
   under skewed routing, some layers' hottest expert gets copies that split its rows, each
   copy cut into slices that hold its units once; --expert-replicas 1 places none. */
static void test_ep_copies(void **state)
{
    (void)state;
    struct npu_plan_chip chip = mesh4x4;
    chip.freq_mhz = 500, chip.hbm_gbps = 64; /* the time model weighs bytes and cycles */
    for (int most = 1; most <= 4; most += 3) {
        struct npu_plan_request req = ep_request(3000, 512, 2);
        req.partition[NPU_GEMM_QKV] = req.partition[NPU_GEMM_O] = NPU_PART_2D;
        req.placement = 3, req.tile_rows = 16, req.moe_rows = 64, req.max_seq = 400;
        req.mode = NPU_IMAGE_FUNCTIONAL, req.attn_deep = 1;
        req.expert_placement = NPU_EXPERTS_BALANCED, req.expert_replicas = most;
        struct npu_built_image img = build(&moe, &chip, &req);
        const struct npu_image_header *h = hdr(&img);
        char text[4096];
        assert_int_equal(npu_image_check(img.data, img.bytes, text, sizeof(text)), NPU_OK);
        uint32_t layers_copied = 0;
        for (uint32_t l = 0; l < moe.cfg.num_layers; l++) {
            uint32_t n;
            const struct npu_image_expert_slice *x = npu_image_expert_layer(h, l, &n);
            const uint32_t copies = check_copies(x, n, h->plan.expert_units);
            assert_true(copies <= (uint32_t)most);
            layers_copied += copies > 1;
        }
        if (most == 1)
            assert_int_equal(layers_copied, 0);
        else
            assert_true(layers_copied > 0);
        npu_built_image_free(&img);
    }
}

/* A default MoE group that the SRAM halves: the map is placed again for the group that
   fits (the summary's placement line names the rows the map was placed for), and with
   several groups a layer that placement is contiguous. */
static void test_ep_balanced_replaced(void **state)
{
    (void)state;
    struct npu_plan_request req = ep_request(1500, 1024, 1);
    char text[8192];
    struct npu_built_image img = build_summary(&moe, &mesh4x4, &req, text, sizeof(text));
    const struct npu_image_header *h = hdr(&img);
    assert_true(h->plan.moe_rows < req.max_tokens); /* the request's group did not fit */
    assert_int_equal(h->plan.expert_placement, NPU_EXPERTS_CONTIGUOUS);
    char want[64];
    snprintf(want, sizeof(want), "%u rows a slice serves at once", h->plan.moe_rows);
    if (!strstr(text, want))
        fail_msg("placed for another group than the plan's %u rows:\n%s", h->plan.moe_rows,
                 text);
    npu_built_image_free(&img);
}

/* Groups larger than a tile with the residual rows in HBM and more rows than a group: the
   MoE over the layer (npu_moe_layer_wide) under balanced placement. Its slices serve the
   whole iteration's rows, so the map is placed for them, and the spill is in the core's HBM
   segment. Balanced by default however many groups a layer takes. */
static void test_ep_layer_wide(void **state)
{
    (void)state;
    struct npu_plan_request req = ep_request(1000, 4096, 4);
    req.tile_rows = 16, req.moe_rows = 64;
    char text[8192];
    struct npu_built_image img = build_summary(&moe, &mesh4x4, &req, text, sizeof(text));
    assert_int_equal(npu_moe_layer_groups(&hdr(&img)->plan), 64);
    assert_int_equal(hdr(&img)->plan.expert_placement, NPU_EXPERTS_BALANCED);
    assert_true(npu_moe_layer_wide(&hdr(&img)->plan));
    npu_built_image_free(&img);
    req.expert_placement = NPU_EXPERTS_CONTIGUOUS; /* asked for: group by group */
    img = build_summary(&moe, &mesh4x4, &req, text, sizeof(text));
    assert_false(npu_moe_layer_wide(&hdr(&img)->plan));
    assert_null(strstr(text, "MoE over the layer"));
    npu_built_image_free(&img);
    req.expert_placement = -1;
    /* 8 groups a layer, the residual in HBM: balanced by default */
    req.max_tokens = 2048, req.moe_rows = 256;
    img = build_summary(&moe, &mesh4x4, &req, text, sizeof(text));
    assert_int_equal(npu_moe_layer_groups(&hdr(&img)->plan), 8);
    assert_int_equal(hdr(&img)->plan.expert_placement, NPU_EXPERTS_BALANCED);
    assert_true(npu_moe_layer_wide(&hdr(&img)->plan));
    npu_built_image_free(&img);
    req.max_tokens = 4096, req.moe_rows = 64, req.expert_placement = NPU_EXPERTS_BALANCED;
    img = build_summary(&moe, &mesh4x4, &req, text, sizeof(text));
    const struct npu_image_header *h = hdr(&img);
    assert_false(h->plan.x_in_sram);
    assert_true(npu_moe_layer_wide(&h->plan));
    assert_int_equal(h->plan.expert_placement, NPU_EXPERTS_BALANCED);
    if (!strstr(text, "4096 rows a slice serves at once") || !strstr(text, "MoE over the layer"))
        fail_msg("not placed for the iteration's rows, or no MoE over the layer:\n%s", text);
    struct npu_moe_spill s;
    npu_moe_spill_layout(&moe.cfg, &h->plan, &s);
    assert_int_equal(s.groups, 4096 / 64);
    assert_true(s.cap >= 4096u && s.stride > s.counts);
    const struct npu_image_core *cores = (const void *)((const uint8_t *)h + h->cores_off);
    for (uint32_t i = 0; i < h->cores_count; i++)
        if (cores[i].rank != NPU_IMAGE_IDLE)
            assert_true(cores[i].x_bytes >= npu_moe_x_rows_bytes(&moe.cfg, &h->plan) + s.bytes);
    npu_built_image_free(&img);
    req.max_tokens = 64; /* one group: group by group */
    img = build_summary(&moe, &mesh4x4, &req, text, sizeof(text));
    assert_false(npu_moe_layer_wide(&hdr(&img)->plan));
    assert_null(strstr(text, "MoE over the layer"));
    npu_built_image_free(&img);
    req.moe_spill_rows = 1000; /* asked for, but no MoE over the layer */
    expect_plan_refusal(&moe, &mesh4x4, &req, "the plan has no MoE over the layer");
}

/* The spill's rows: the iteration's worst case by default, halved while HBM is short (the
   layer then serves in waves), never below one group's worst case; a request below that
   is refused with both numbers. */
static void test_ep_spill_rows(void **state)
{
    (void)state;
    struct npu_plan_request req = ep_request(0, 4096, 4);
    req.tile_rows = 16, req.moe_rows = 64, req.expert_placement = NPU_EXPERTS_BALANCED;
    char text[8192];
    struct npu_built_image img = build_summary(&moe, &mesh4x4, &req, text, sizeof(text));
    const struct npu_plan full = hdr(&img)->plan;
    const uint64_t end = hdr(&img)->hbm_end;
    struct npu_moe_spill s;
    npu_moe_spill_layout(&moe.cfg, &full, &s);
    assert_int_equal(full.moe_spill_rows, npu_moe_spill_group_rows(&moe.cfg, &full, 4096));
    npu_built_image_free(&img);
    assert_int_equal(full.moe_spill_parity, 1); /* a half per layer parity where HBM allows */
    assert_int_equal(s.bytes, 2 * s.half);
    /* room for one half of about half of every core's rows: the planner drops the second
       half before it halves the spill */
    struct npu_plan_chip small = mesh4x4;
    small.hbm_bytes = end - s.half * 16 - s.stash * 16 / 2; /* the records do not shrink */
    img = build_summary(&moe, &small, &req, text, sizeof(text));
    const struct npu_plan *p = &hdr(&img)->plan;
    assert_int_equal(p->moe_spill_parity, 0);
    const uint64_t least = npu_moe_spill_group_rows(&moe.cfg, p, npu_moe_group_rows(p));
    assert_true(p->moe_spill_rows < full.moe_spill_rows && p->moe_spill_rows >= least);
    if (!strstr(text, "halved for HBM"))
        fail_msg("no halving in the summary:\n%s", text);
    npu_built_image_free(&img);
    req.moe_spill_rows = (uint32_t)least - 1;
    expect_plan_refusal(&moe, &mesh4x4, &req, "the MoE spill must hold one group's worst case");
}

/* The MoE by units (docs/images.md, "MoE by units"): with experts staged from HBM and a
   slice on every rank, a decode-sized op runs by units: by default up to max_batch rows,
   capped at a tile, in units of the map's (16 columns here, the array's width); never when
   asked not to, nor with resident experts (asked for there: refused), nor when a rank holds
   no slice (12 whole experts over 16 ranks: refused when asked for). */
static void test_ep_units(void **state)
{
    (void)state;
    struct npu_plan_request req = ep_request(1000, 64, 4);
    req.stream_weights = 1, req.expert_placement = NPU_EXPERTS_BALANCED, req.tile_rows = 16;
    char text[8192];
    struct npu_built_image img = build_summary(&moe, &mesh4x4, &req, text, sizeof(text));
    const struct npu_plan *p = &hdr(&img)->plan;
    assert_int_equal(p->moe_units_rows, 4);
    assert_int_equal(p->expert_units * p->moe_unit_split, 8); /* 8 units of 16 columns */
    if (!strstr(text, "MoE by units: a MoE op of at most 4 rows") ||
        !strstr(text, "units of 16 columns"))
        fail_msg("no MoE by units in the summary:\n%s", text);
    npu_built_image_free(&img);
    req.moe_units_rows = 100; /* past a tile: a tile */
    img = build_summary(&moe, &mesh4x4, &req, text, sizeof(text));
    assert_int_equal(hdr(&img)->plan.moe_units_rows, 16);
    npu_built_image_free(&img);
    req.moe_units_rows = 0;
    img = build_summary(&moe, &mesh4x4, &req, text, sizeof(text));
    assert_int_equal(hdr(&img)->plan.moe_units_rows, 0);
    assert_int_equal(hdr(&img)->plan.moe_unit_split, 0);
    assert_null(strstr(text, "MoE by units"));
    npu_built_image_free(&img);
    struct npu_plan_chip roomy = mesh4x4; /* 8 MiB cores: the weights stay resident */
    roomy.sram_bytes = 0x800000;
    req.moe_units_rows = -1, req.stream_weights = 0; /* resident experts: none by default */
    img = build_summary(&moe, &roomy, &req, text, sizeof(text));
    assert_true(hdr(&img)->plan.weights_resident);
    assert_int_equal(hdr(&img)->plan.moe_units_rows, 0);
    npu_built_image_free(&img);
    req.moe_units_rows = 4;
    expect_plan_refusal(&moe, &roomy, &req, "the MoE by units needs");
    req.stream_weights = 1, req.expert_placement = NPU_EXPERTS_CONTIGUOUS;
    struct model twelve = moe; /* 12 whole experts over 16 ranks: 4 ranks hold none */
    twelve.cfg.num_experts = 12;
    expect_plan_refusal(&twelve, &mesh4x4, &req, "a slice of every layer on every rank");
}

static void test_ep_refusals(void **state)
{
    (void)state;
    struct npu_plan_request req = request(4, NPU_PLAN_AUTO, NPU_IMAGE_FUNCTIONAL);
    req.partition[NPU_GEMM_EXP_UP] = NPU_PART_EP;
    expect_plan_refusal(&moe, &mesh2x2, &req, "must both be ep");
    req.partition[NPU_GEMM_EXP_DOWN] = NPU_PART_EP;
    req.partition[NPU_GEMM_O] = NPU_PART_EP;
    expect_plan_refusal(&moe, &mesh2x2, &req, "partition of o: ep applies to the expert");
    req = request(4, NPU_PLAN_AUTO, NPU_IMAGE_FUNCTIONAL);
    req.partition[NPU_GEMM_EXP_UP] = req.partition[NPU_GEMM_EXP_DOWN] = NPU_PART_EP;
    expect_plan_refusal(&dense, &mesh2x2, &req, "has no experts");
}

/* Two tiles' attention in flight (npu_plan.attn_deep): the O GEMM's chunks (T x d) and the
   QKV GEMM's (T x (qd + 2 kvd)) lie outside attention's scratch, scores .. up to hb, which
   ytmp overlays; under EP (over_recv) over ep_recv when it holds both. */
static void check_deep_layout(const struct model *m, const struct npu_plan *p, bool over_recv)
{
    struct npu_act_layout a;
    npu_act_layout(&m->cfg, p, &a);
    const struct model_config *c = &m->cfg;
    const uint64_t eb = npu_dtype_bytes(p->dtype), t = p->tile_rows;
    const uint64_t od = t * c->hidden_size * eb;
    const uint64_t qkvd = t * (c->num_heads + 2ull * c->num_kv_heads) * c->head_dim * eb;
    const uint64_t bufs[2][2] = { { a.yo, od }, { a.yqkv, qkvd } };
    for (int i = 0; i < 2; i++) {
        assert_true(bufs[i][0] >= a.hb || bufs[i][0] + bufs[i][1] <= a.scores);
        assert_true(bufs[i][0] + bufs[i][1] <= a.bytes);
    }
    assert_true(a.yo + od <= a.yqkv || a.yqkv + qkvd <= a.yo);
    if (a.yqkv == a.kblk) /* over the step buffers, not into the window */
        assert_true(a.yqkv + qkvd <= a.kwin);
    if (over_recv && a.ep_out - a.ep_recv >= ((od + 63) & ~63ull) + qkvd)
        assert_true(a.yo >= a.ep_recv && a.yqkv + qkvd <= a.ep_out);
    else
        assert_true(a.yo != a.ytmp);
}

static void test_attn_deep(void **state)
{
    (void)state;
    struct npu_plan_request req = request(4, NPU_PART_2D, NPU_IMAGE_FUNCTIONAL);
    req.max_tokens = 372, req.max_batch = 4, req.max_seq = 316, req.attn_deep = 1;
    struct npu_built_image img = build(&dense, &mesh2x2, &req);
    assert_int_equal(hdr(&img)->plan.attn_deep, 1);
    check_deep_layout(&dense, &hdr(&img)->plan, false);
    npu_built_image_free(&img);
    req.partition[NPU_GEMM_EXP_UP] = req.partition[NPU_GEMM_EXP_DOWN] = NPU_PART_EP;
    img = build(&moe, &mesh2x2, &req);
    assert_int_equal(hdr(&img)->plan.attn_deep, 1);
    check_deep_layout(&moe, &hdr(&img)->plan, true);
    npu_built_image_free(&img);
    /* the default: deep only where nothing else the planner chose changes (off for
       comparison), a KV block pool taking what SRAM has left included */
    for (int i = 0; i < 4; i++) {
        req.kv_sram_blocks = i >= 2 ? -1 : 0;
        const struct model *m = i % 2 ? &moe : &dense;
        req.partition[NPU_GEMM_EXP_UP] = req.partition[NPU_GEMM_EXP_DOWN] =
            i % 2 ? NPU_PART_EP : NPU_PART_2D;
        req.attn_deep = -1;
        img = build(m, &mesh4x4, &req);
        const struct npu_plan dflt = hdr(&img)->plan;
        npu_built_image_free(&img);
        req.attn_deep = 0;
        img = build(m, &mesh4x4, &req);
        struct npu_plan flat = hdr(&img)->plan;
        assert_int_equal(flat.attn_deep, 0);
        flat.attn_deep = dflt.attn_deep; /* every other field the same */
        assert_memory_equal(&flat, &dflt, sizeof(flat));
        if (dflt.attn_deep)
            check_deep_layout(m, &dflt, i % 2 == 1);
        npu_built_image_free(&img);
    }
    req = request(4, NPU_PART_K, NPU_IMAGE_FUNCTIONAL);
    req.attn_deep = 1;
    expect_plan_refusal(&dense, &mesh2x2, &req, "attn_deep 1: two tiles' attention in flight "
                                                "needs a 2D O GEMM over tp > 1 ranks");
}

/* Stage s of S runs layers [s L / S, (s + 1) L / S) on tp ranks: every (stage, rank) is
   one core; its program starts with the embedding (stage 0) or RECV of the previous
   stage's last layer, runs its layers in order, and ends with SEND of its last layer or
   the head (last stage); consecutive stages are mesh neighbours. */
static void check_stages(const struct model *m, const struct npu_plan_chip *chip, uint32_t tp,
                         uint32_t stages)
{
    struct npu_plan_request req = request(tp, NPU_PLAN_AUTO, NPU_IMAGE_FUNCTIONAL);
    req.stages = stages;
    struct npu_built_image img = build(m, chip, &req);
    const struct npu_image_header *h = hdr(&img);
    const struct npu_image_core *cs = cores(&img);
    const struct npu_prog_op *ops = prog(&img);
    const uint32_t per = m->cfg.num_layers / stages;
    uint8_t seen[16][16] = { { 0 } };
    assert_int_equal(h->plan.stages, stages);
    assert_int_equal(h->plan.stage_layers, per);
    for (uint32_t i = 0; i < h->cores_count; i++) {
        const struct npu_image_core *c = &cs[i];
        if (c->rank == NPU_IMAGE_IDLE)
            continue;
        assert_true(c->rank < tp && c->stage < stages);
        assert_int_equal(seen[c->stage][c->rank]++, 0);
        uint32_t r0, c0;
        npu_plan_stage_origin(&h->plan, c->stage, &r0, &c0);
        const uint32_t row = i / chip->mesh_cols, col = i % chip->mesh_cols;
        assert_true(row >= r0 && row < r0 + h->plan.rect_rows);
        assert_true(col >= c0 && col < c0 + h->plan.rect_cols);
        const struct npu_prog_op *p = ops + c->prog_first;
        const uint32_t n = c->prog_count, l0 = c->stage * per;
        assert_int_equal(p[0].kind, c->stage ? NPU_OP_RECV : NPU_OP_EMBED);
        if (c->stage)
            assert_int_equal(p[0].layer, l0 - 1);
        assert_int_equal(p[n - 1].kind, c->stage + 1 < stages ? NPU_OP_SEND : NPU_OP_HEAD);
        if (c->stage + 1 < stages)
            assert_int_equal(p[n - 1].layer, l0 + per - 1);
        for (uint32_t k = 1; k + 1 < n; k++)
            assert_true(p[k].layer >= l0 && p[k].layer < l0 + per);
    }
    for (uint32_t s = 0; s + 1 < stages; s++) { /* neighbours: one rectangle apart */
        uint32_t ra, ca, rb, cb;
        npu_plan_stage_origin(&h->plan, s, &ra, &ca);
        npu_plan_stage_origin(&h->plan, s + 1, &rb, &cb);
        assert_int_equal((ra != rb) + (ca != cb), 1);
    }
    for (uint32_t s = 0; s < stages; s++)
        for (uint32_t r = 0; r < tp; r++)
            assert_int_equal(seen[s][r], 1);
    char text[4096];
    assert_int_equal(npu_image_check(img.data, img.bytes, text, sizeof(text)), NPU_OK);
    npu_built_image_free(&img);
}

static void test_stages(void **state)
{
    (void)state;
    check_stages(&dense, &mesh2x2, 2, 2);
    check_stages(&dense, &mesh2x2, 1, 4); /* around the 2x2 mesh */
    check_stages(&moe, &mesh4x4, 4, 4);
    check_stages(&moe, &mesh4x4, 8, 2);
    check_stages(&dense, &mesh4x4, 2, 4);
}

static void test_stage_refusals(void **state)
{
    (void)state;
    struct npu_plan_request req = request(0, NPU_PLAN_AUTO, NPU_IMAGE_FUNCTIONAL);
    req.stages = 3;
    expect_plan_refusal(&dense, &mesh2x2, &req, "4 layers do not split into 3 pipeline");
    req.stages = 2, req.tp = 4;
    expect_plan_refusal(&dense, &mesh2x2, &req, "tp 4 x 2 stage(s) needs more cores");
    req = request(7, NPU_PART_K, NPU_IMAGE_FUNCTIONAL);
    req.stages = 2; /* 14 cores, but 7 is only a 7 x 1 rectangle */
    expect_plan_refusal(&dense, &mesh4x4, &req, "that its stages can stack into");
    /* micro-batches: parts of an iteration's rows over stages, so not without them, and
       at most one a row */
    req = request(0, NPU_PLAN_AUTO, NPU_IMAGE_FUNCTIONAL);
    req.micro_batches = 2;
    expect_plan_refusal(&dense, &mesh2x2, &req, "2 micro-batches: at most max-tokens");
    req.stages = 2, req.tp = 2, req.max_batch = 4, req.max_tokens = 4, req.micro_batches = 5;
    expect_plan_refusal(&dense, &mesh2x2, &req, "only over pipeline stages");
}

/* The plan keeps the micro-batches asked for (1 when not asked) and the image passes. */
static void test_micro_batches(void **state)
{
    (void)state;
    struct npu_plan_request req = request(2, NPU_PLAN_AUTO, NPU_IMAGE_FUNCTIONAL);
    req.stages = 2;
    for (uint32_t mb = 0; mb <= 3; mb++) {
        req.micro_batches = mb;
        struct npu_built_image img = build(&dense, &mesh2x2, &req);
        assert_int_equal(hdr(&img)->plan.micro_batches, mb ? mb : 1);
        char text[4096];
        assert_int_equal(npu_image_check(img.data, img.bytes, text, sizeof(text)), NPU_OK);
        npu_built_image_free(&img);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ep_shares),
        cmocka_unit_test(test_ep_balanced),
        cmocka_unit_test(test_ep_balanced_replaced),
        cmocka_unit_test(test_ep_copies),
        cmocka_unit_test(test_ep_layer_wide),
        cmocka_unit_test(test_ep_spill_rows),
        cmocka_unit_test(test_ep_units),
        cmocka_unit_test(test_ep_refusals),
        cmocka_unit_test(test_attn_deep),
        cmocka_unit_test(test_stages),
        cmocka_unit_test(test_stage_refusals),
        cmocka_unit_test(test_micro_batches),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
