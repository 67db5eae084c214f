/* SPDX-License-Identifier: MIT */
/* The control core's check of the trace blob (rt_blob_check): each input as it is, and with
   its checksum recomputed so that the checks of the requests see the mutations. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "rt/trace_blob.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *blob = malloc(size ? size : 1);
    if (!blob)
        return 0;
    memcpy(blob, data, size);
    char err[512];
    (void)rt_blob_check(blob, size, err, sizeof(err));
    if (size >= sizeof(struct rt_blob_header)) {
        struct rt_blob_header *h = (struct rt_blob_header *)blob;
        uint64_t sum = 0xcbf29ce484222325ull; /* FNV-1a 64 after the header */
        for (size_t k = sizeof(*h); k < size; k++)
            sum = (sum ^ blob[k]) * 0x100000001b3ull;
        h->checksum = sum;
        (void)rt_blob_check(blob, size, err, sizeof(err));
    }
    free(blob);
    return 0;
}
