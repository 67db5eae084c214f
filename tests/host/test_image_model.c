/* SPDX-License-Identifier: MIT */
/*
 * Crafted images (issue 26): a good image changed and resealed with a valid checksum, so
 * that the structure check (npu_image_check) passes, and refused by the check against the
 * model (npu_image_check_model, models/image/src/npu_image_model.c) that the control core
 * runs before it releases the cores. Covers: unknown op kinds, an op's layer past the model,
 * a sliding flag on a layer without a window, a missing op, a tensor of an unknown kind or
 * past the model's layers, a share other than the planner's (outside its tensor, of the
 * wrong bytes, an unequal split), a share given twice, an expert map naming an expert the
 * model lacks, a model config that disagrees with the tensor table (narrower, more experts)
 * or the plan (more layers), buffers smaller than the layout; and every image the planner
 * builds (partitions, EP, stages, both modes) passing.
 */
#include "image_fixture.h"

#include "npu_layout.h"

static void reseal(uint8_t *data, uint64_t bytes)
{
    struct npu_image_header *h = (struct npu_image_header *)data;
    h->checksum = npu_image_checksum(data, bytes);
}

/* The structure check passes, the model check refuses with `needle`. */
static void expect_model_refusal(uint8_t *b, uint64_t n, const char *needle)
{
    reseal(b, n);
    const struct npu_image_header *h = (const void *)b;
    if (npu_image_check(b, n, err, sizeof(err)) != NPU_OK)
        fail_msg("the structure check refused it first: %s", err);
    struct model_config cfg;
    int rc = model_config_parse(&cfg, (const char *)b + h->config_off, "image:config", err,
                                sizeof(err));
    if (rc == NPU_OK)
        rc = npu_image_check_model(b, &cfg, err, sizeof(err));
    if (rc == NPU_OK || !strstr(err, needle))
        fail_msg("model check: rc %d, message '%s', wanted '%s'", rc, err, needle);
}

static void expect_model_ok(const struct npu_built_image *img)
{
    const struct npu_image_header *h = (const void *)img->data;
    struct model_config cfg;
    assert_int_equal(npu_image_check(img->data, img->bytes, err, sizeof(err)), NPU_OK);
    assert_int_equal(model_config_parse(&cfg, (const char *)img->data + h->config_off,
                                        "image:config", err, sizeof(err)), NPU_OK);
    if (npu_image_check_model(img->data, &cfg, err, sizeof(err)) != NPU_OK)
        fail_msg("a planned image refused: %s", err);
}

/* Every plan of the other tests' kinds passes: partitions, EP, stages, both modes. */
static void test_planned_images_pass(void **state)
{
    (void)state;
    const uint32_t parts[] = { NPU_PART_MN, NPU_PART_K, NPU_PLAN_AUTO };
    for (size_t i = 0; i < 3; i++)
        for (uint32_t mode = 0; mode < 2; mode++) {
            struct npu_plan_request req = request(4, parts[i], mode);
            struct npu_built_image img = build(&moe, &mesh2x2, &req);
            expect_model_ok(&img);
            npu_built_image_free(&img);
            img = build(&dense, &mesh4x4, &req);
            expect_model_ok(&img);
            npu_built_image_free(&img);
        }
    struct npu_plan_request req = request(4, NPU_PART_MN, NPU_IMAGE_PERFORMANCE);
    req.partition[NPU_GEMM_EXP_UP] = req.partition[NPU_GEMM_EXP_DOWN] = NPU_PART_EP;
    struct npu_built_image img = build(&moe, &mesh4x4, &req);
    expect_model_ok(&img);
    npu_built_image_free(&img);
    req.expert_placement = NPU_EXPERTS_BALANCED; /* slices padded to the widest */
    img = build(&moe, &mesh4x4, &req);
    expect_model_ok(&img);
    npu_built_image_free(&img);
    req = request(2, NPU_PART_MN, NPU_IMAGE_FUNCTIONAL);
    req.stages = 2;
    img = build(&dense, &mesh2x2, &req);
    expect_model_ok(&img);
    npu_built_image_free(&img);
}

struct crafted {
    struct npu_built_image img;
    uint8_t *b;
    uint64_t n;
    struct npu_image_header *h;
    struct npu_prog_op *ops;
    struct npu_image_tensor *ts;
    struct npu_image_core *cores;
};

static void fresh(struct crafted *c)
{
    memcpy(c->b, c->img.data, c->n);
}

static void craft_open(struct crafted *c)
{
    struct npu_plan_request req = request(4, NPU_PART_MN, NPU_IMAGE_FUNCTIONAL);
    c->img = build(&moe, &mesh2x2, &req);
    c->n = c->img.bytes;
    c->b = malloc(c->n);
    assert_non_null(c->b);
    fresh(c);
    c->h = (struct npu_image_header *)c->b;
    c->ops = (struct npu_prog_op *)(c->b + c->h->prog_off);
    c->ts = (struct npu_image_tensor *)(c->b + c->h->tensors_off);
    c->cores = (struct npu_image_core *)(c->b + c->h->cores_off);
}

static void test_crafted_programs(void **state)
{
    (void)state;
    struct crafted c;
    craft_open(&c);
    const uint32_t first = c.cores[0].prog_first;
    fresh(&c);
    c.ops[first + 1].kind = 99; /* an op the interpreter does not know */
    expect_model_refusal(c.b, c.n, "core 0: its program of");
    fresh(&c);
    c.ops[first + 2].layer = 40; /* a layer past the model's 4 */
    expect_model_refusal(c.b, c.n, "is not stage 0's");
    fresh(&c);
    for (uint32_t k = 0; k < c.cores[0].prog_count; k++) /* layer 1 has no window */
        if (c.ops[first + k].kind == NPU_OP_ATTENTION && c.ops[first + k].layer == 1)
            c.ops[first + k].flags = NPU_OP_SLIDING;
    expect_model_refusal(c.b, c.n, "is not stage 0's");
    fresh(&c);
    c.cores[1].prog_count--; /* the head dropped from core 1's program */
    expect_model_refusal(c.b, c.n, "core 1: its program of");
    free(c.b);
    npu_built_image_free(&c.img);
}

static void test_crafted_tensors(void **state)
{
    (void)state;
    struct crafted c;
    craft_open(&c);
    const uint64_t last = c.h->tensors_count - 1;
    fresh(&c);
    c.ts[last].kind = 40;
    expect_model_refusal(c.b, c.n, "is not a tensor of tiny-moe");
    uint64_t i = 0;
    while (c.ts[i].kind != MT_WQ || c.ts[i].rank != 0)
        i++;
    fresh(&c);
    c.ts[i].layer = 7; /* past the model's layers */
    expect_model_refusal(c.b, c.n, "is not a tensor of tiny-moe");
    fresh(&c);
    c.ts[i].row0 += 1000; /* a share past the end of its tensor */
    expect_model_refusal(c.b, c.n, "tiny-moe's plan gives");
    fresh(&c);
    c.ts[i].block_bytes /= 2; /* bytes that are not its rows x cols */
    expect_model_refusal(c.b, c.n, "tiny-moe's plan gives");
    fresh(&c);
    /* an unequal split that still covers the tensor: rank 0 takes rank 1's rows too, rank 1
       keeps none of its own (the interpreter's buffers are laid out for equal shares) */
    struct npu_image_tensor *r1 = &c.ts[i + 1];
    assert_int_equal(r1->kind, MT_WQ), assert_int_equal(r1->rank, 1);
    c.ts[i].rows += r1->rows;
    expect_model_refusal(c.b, c.n, "tiny-moe's plan gives");
    fresh(&c);
    *r1 = c.ts[i]; /* rank 0's share twice, rank 1's missing */
    expect_model_refusal(c.b, c.n, "is given twice");
    free(c.b);
    npu_built_image_free(&c.img);
}

/* An expert map that names an expert the model does not have (the cores index per-expert
   tables by it): the structure check cannot know the model's count. */
static void test_crafted_expert_map(void **state)
{
    (void)state;
    struct npu_plan_request req = request(4, NPU_PART_MN, NPU_IMAGE_PERFORMANCE);
    req.partition[NPU_GEMM_EXP_UP] = req.partition[NPU_GEMM_EXP_DOWN] = NPU_PART_EP;
    struct npu_built_image img = build(&moe, &mesh2x2, &req);
    expect_model_ok(&img);
    uint8_t *b = malloc(img.bytes);
    assert_non_null(b);
    memcpy(b, img.data, img.bytes);
    const struct npu_image_header *h = (const void *)b;
    struct npu_image_expert_slice *x = (struct npu_image_expert_slice *)(b + h->experts_off);
    x[0].expert = 9; /* tiny-moe has 8; expert 0 of layer 0 is left without a slice */
    expect_model_refusal(b, img.bytes, "expert map: slice 0 names layer 0, expert 9; tiny-moe "
                                       "has 4 layers of 8 experts");
    free(b);
    npu_built_image_free(&img);
}

/* Replaces `from` by `to` (the same length) in the image's config text. */
static void edit_config(struct crafted *c, const char *from, const char *to)
{
    assert_int_equal(strlen(from), strlen(to));
    char *text = (char *)c->b + c->h->config_off;
    char *at = strstr(text, from);
    if (!at)
        fail_msg("'%s' is not in the config", from);
    memcpy(at, to, strlen(to));
}

static void test_crafted_config(void **state)
{
    (void)state;
    struct crafted c;
    craft_open(&c);
    fresh(&c);
    edit_config(&c, "hidden_size = 128", "hidden_size =  64"); /* the tensors are 128 wide */
    expect_model_refusal(c.b, c.n, "tiny-moe's plan gives");
    fresh(&c);
    edit_config(&c, "num_layers = 4", "num_layers = 6"); /* the plan's stages hold 4 */
    expect_model_refusal(c.b, c.n, "plan: 1 stages of 4 layers for tiny-moe's 6");
    fresh(&c);
    edit_config(&c, "num_experts = 8", "num_experts = 9"); /* the router has 8 rows */
    expect_model_refusal(c.b, c.n, "[8][128] at (0,0), 4096 bytes a block; tiny-moe's plan "
                                   "gives blocks 0+1 of [9][128]");
    fresh(&c);
    c.cores[0].sram_act_bytes /= 2; /* tile buffers smaller than the layout */
    expect_model_refusal(c.b, c.n, "core 0: tile buffers");
    fresh(&c);
    c.cores[2].kv_bytes = 64; /* a KV ring smaller than the layout */
    expect_model_refusal(c.b, c.n, "core 2: tile buffers");
    free(c.b);
    npu_built_image_free(&c.img);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_planned_images_pass),
        cmocka_unit_test(test_crafted_programs),
        cmocka_unit_test(test_crafted_tensors),
        cmocka_unit_test(test_crafted_expert_map),
        cmocka_unit_test(test_crafted_config),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
