/* SPDX-License-Identifier: MIT */
/* The TOML-like config readers: a chip config (first byte even) or a model config (odd). */
#include <stdlib.h>
#include <string.h>

#include "chip_config.h"
#include "fuzz.h"
#include "model_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    char *text = malloc(size); /* the rest, NUL-terminated as the readers get it */
    if (!text)
        return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    char err[512];
    if (data[0] % 2) {
        struct model_config m;
        if (model_config_parse(&m, text, "fuzz.toml", err, sizeof(err)) == 0)
            (void)model_count_params(&m);
    } else {
        struct chip_config c;
        (void)chip_config_parse(&c, text, "fuzz.toml", err, sizeof(err));
    }
    free(text);
    return 0;
}
