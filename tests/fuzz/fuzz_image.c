/* SPDX-License-Identifier: MIT */
/* The control core's image checks (npu_image_check, then the check against the image's own
   model config): each input as it is, and resealed (its checksum recomputed, as a crafted
   image would be) so that the checks past the checksum see the mutations. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "model_config.h"
#include "npu_image.h"

static void check(const uint8_t *image, size_t size)
{
    char err[512];
    if (npu_image_check(image, size, err, sizeof(err)) != 0)
        return;
    const struct npu_image_header *h = (const void *)image;
    struct model_config c;
    if (model_config_parse(&c, (const char *)image + h->config_off, "image:config", err,
                           sizeof(err)) == 0)
        (void)npu_image_check_model(image, &c, err, sizeof(err));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *image = malloc(size ? size : 1); /* 8-byte aligned, as in HBM */
    if (!image)
        return 0;
    memcpy(image, data, size);
    check(image, size);
    if (size >= sizeof(struct npu_image_header)) {
        struct npu_image_header *h = (struct npu_image_header *)image;
        h->checksum = npu_image_checksum(image, size);
        check(image, size);
    }
    free(image);
    return 0;
}
