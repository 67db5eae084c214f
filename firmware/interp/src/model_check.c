/* SPDX-License-Identifier: MIT */
/* The control core's check of the image, shared by the model and serve images. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "model_config.h"
#include "model_setup.h"
#include "npu/hal.h"
#include "npu_image.h"
#include "rt/lines.h"

int model_image_check(void)
{
    const struct hal_chip_info *c = hal_chip();
    const uint8_t *image = (const uint8_t *)(uintptr_t)c->hbm_base;
    const struct npu_image_header *h = (const void *)image;
    const char *arg = hal_bootarg_value("image_bytes");
    uint64_t bytes = arg ? strtoull(arg, NULL, 10) : sizeof(*h);
    char err[256];
    if (!arg) {
        printf("MODEL image refused: no image_bytes= bootarg (run images with npuctl flash)\n");
        return NPU_ERR_INVAL;
    }
    if (bytes > c->hbm_size) {
        printf("MODEL image refused: %" PRIu64 " bytes do not fit this chip's HBM (%" PRIu64
               ")\n", bytes, c->hbm_size);
        return NPU_ERR_RANGE;
    }
    int rc = npu_image_check(image, bytes, err, sizeof(err));
    if (rc == NPU_OK) {
        struct npu_image_chip chip = {
            .name = c->config_name, .mesh_rows = c->rows, .mesh_cols = c->cols,
            .sram_bytes = c->sram_bytes, .hbm_bytes = c->hbm_size, .sa_rows = c->sa_rows,
            .sa_cols = c->sa_cols, .performance = c->performance };
        rc = npu_image_check_chip(h, &chip, err, sizeof(err));
    }
    struct model_config cfg; /* the image's own model, and the image against it */
    if (rc == NPU_OK)
        rc = model_config_parse(&cfg, (const char *)image + h->config_off, "image:config", err,
                                sizeof(err));
    if (rc == NPU_OK)
        rc = npu_image_check_model(image, &cfg, err, sizeof(err));
    if (rc != NPU_OK) {
        printf("MODEL image refused: %s\n", err);
        return rc;
    }
    lines_print_model_image_ok(&(struct lines_model_image_ok){
        .model = h->model_name, .chip = h->chip_name, .tp = h->plan.tp, .bytes = bytes,
        .checksum = h->checksum });
    return NPU_OK;
}
