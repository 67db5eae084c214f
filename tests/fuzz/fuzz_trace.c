/* SPDX-License-Identifier: MIT */
/* The trace readers: the native JSON lines (first byte 0) or an importer's CSV (first byte
   1, 2, 3: Azure, BurstGPT, Vidur); a trace that reads is built into the chip's blob, which
   must pass the chip's check. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "rt/trace.h"
#include "rt/trace_blob.h"

static void blob_round(const struct rt_trace *t)
{
    void *blob = NULL;
    size_t bytes = 0;
    char err[512];
    const struct rt_blob_opts o = { .with_ids = true, .vocab = 1000, .seed = 7,
                                    .room = 64u << 20, .hash_block = 16 };
    if (trace_blob_build(t, &o, &blob, &bytes, err, sizeof(err)) == 0 &&
        rt_blob_check(blob, bytes, err, sizeof(err)) != 0)
        abort(); /* a blob the builder made must pass the chip's check */
    free(blob);
    (void)trace_check_hash_ids(t, 16, err, sizeof(err));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    /* fmemopen refuses a size of 0: an empty file is /dev/null */
    FILE *f = size > 1 ? fmemopen((void *)(data + 1), size - 1, "r") : fopen("/dev/null", "r");
    if (!f)
        return 0;
    struct rt_trace t;
    char err[512];
    const int kind = data[0] % 4;
    int rc = kind == 0 ? trace_read_jsonl_stream(f, "fuzz.jsonl", &t, err, sizeof(err))
                       : trace_import_stream(f, "fuzz.csv", (enum rt_trace_format)(kind - 1),
                                             0, &t, err, sizeof(err));
    fclose(f);
    if (rc != 0)
        return 0;
    blob_round(&t);
    trace_free(&t);
    return 0;
}
