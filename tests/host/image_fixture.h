/* SPDX-License-Identifier: MIT */
/* What the planner's host tests share: the tiny models and meshes, and building images. */
#ifndef IMAGE_FIXTURE_H
#define IMAGE_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "model_config.h"
#include "npu_enums.h"
#include "npu_image.h"
#include "npu_plan.h"

static char err[1024];

/* models/chips/mesh-2x2.toml and mesh-4x4.toml. */
static const struct npu_plan_chip mesh2x2 = { .name = "mesh-2x2", .mesh_rows = 2,
                                              .mesh_cols = 2, .sram_bytes = 0x400000,
                                              .hbm_bytes = 0x4000000, .sa_rows = 16,
                                              .sa_cols = 16 };
static const struct npu_plan_chip mesh4x4 = { .name = "mesh-4x4", .mesh_rows = 4,
                                              .mesh_cols = 4, .sram_bytes = 0x200000,
                                              .hbm_bytes = 0x10000000, .sa_rows = 16,
                                              .sa_cols = 16 };

struct model {
    struct model_config cfg;
    char *text;
};
static struct model dense, moe;

static inline char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    assert_non_null(text);
    assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
    text[n] = '\0';
    fclose(f);
    return text;
}

static inline void load(struct model *m, const char *rel)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/models/%s", NPU_SOURCE_DIR, rel);
    if (model_config_load(&m->cfg, path, err, sizeof(err)) != NPU_OK)
        fail_msg("%s: %s", rel, err);
    m->text = read_text(path);
}

static inline int setup(void **state)
{
    (void)state;
    load(&dense, "tiny/tiny-dense.toml");
    load(&moe, "tiny/tiny-moe.toml");
    return 0;
}

static inline int teardown(void **state)
{
    (void)state;
    free(dense.text), free(moe.text);
    return 0;
}

/* A request with short sequences, so that every tiny plan fits both meshes' HBM (2D: on the
   mesh2d placement it needs), and unsplit attention (the tests that want the planner's
   choice, test_auto_plan, set kv_split -1). */
static inline struct npu_plan_request request(uint32_t tp, uint32_t partition,
                                              uint32_t mode)
{
    struct npu_plan_request r;
    npu_plan_request_init(&r);
    r.tp = tp;
    r.mode = mode;
    r.max_seq = 64;
    r.kv_split = 0;
    for (uint32_t g = 0; g < NPU_GEMM_COUNT; g++)
        r.partition[g] = partition;
    if (partition == NPU_PART_2D)
        r.placement = 3;
    return r;
}

static inline struct npu_built_image build(const struct model *m,
                                           const struct npu_plan_chip *chip,
                                           const struct npu_plan_request *req)
{
    struct npu_built_image img;
    int rc = npu_plan_build(&m->cfg, m->text, chip, req, &img, NULL, err, sizeof(err));
    if (rc != NPU_OK)
        fail_msg("%s on %s (tp %u): rc %d: %s", m->cfg.name, chip->name, req->tp, rc, err);
    assert_non_null(img.data);
    return img;
}

/* build(), with the plan's summary in text[len]. */
static inline struct npu_built_image build_summary(const struct model *m,
                                                   const struct npu_plan_chip *chip,
                                                   const struct npu_plan_request *req,
                                                   char *text, size_t len)
{
    struct npu_built_image img;
    memset(text, 0, len);
    FILE *f = fmemopen(text, len - 1, "w");
    assert_non_null(f);
    int rc = npu_plan_build(&m->cfg, m->text, chip, req, &img, f, err, sizeof(err));
    fclose(f);
    if (rc != NPU_OK)
        fail_msg("%s on %s (tp %u): rc %d: %s", m->cfg.name, chip->name, req->tp, rc, err);
    return img;
}

static inline void expect_plan_refusal(const struct model *m,
                                       const struct npu_plan_chip *chip,
                                       const struct npu_plan_request *req,
                                       const char *needle)
{
    struct npu_built_image img = { (uint8_t *)1, 1 };
    err[0] = '\0';
    int rc = npu_plan_build(&m->cfg, m->text, chip, req, &img, NULL, err, sizeof(err));
    if (rc >= 0 || !strstr(err, needle))
        fail_msg("%s on %s: rc %d, message '%s', wanted '%s'", m->cfg.name, chip->name, rc,
                 err, needle);
    assert_null(img.data);
}

static inline const struct npu_image_header *hdr(const struct npu_built_image *img)
{
    return (const struct npu_image_header *)img->data;
}

static inline struct npu_image_tensor *tensors(const struct npu_built_image *img)
{
    return (struct npu_image_tensor *)(img->data + hdr(img)->tensors_off);
}

static inline struct npu_image_core *cores(const struct npu_built_image *img)
{
    return (struct npu_image_core *)(img->data + hdr(img)->cores_off);
}

static inline const struct npu_prog_op *prog(const struct npu_built_image *img)
{
    return (const struct npu_prog_op *)(img->data + hdr(img)->prog_off);
}

#endif
