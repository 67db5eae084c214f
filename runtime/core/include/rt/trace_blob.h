/* SPDX-License-Identifier: MIT */
/*
 * The trace as the chip receives it (docs/serving.md, "Traces"): `npuctl serve` converts a
 * trace into this blob, QEMU's loader places it in the control core's DRAM, and the control
 * core checks it before the run. Little-endian, 8-byte aligned:
 *   header | requests[count] | token ids (uint32_t)[ids_count]
 * Arrival times are in chip picoseconds, non-decreasing. A request's prompt ids (functional
 * runs) are ids[ids_first .. ids_first + input_len), or absent (RT_BLOB_NO_IDS).
 */
#ifndef RT_TRACE_BLOB_H
#define RT_TRACE_BLOB_H

#include <stddef.h>
#include <stdint.h>

#include "npu_limits.h"

#define RT_BLOB_MAGIC 0x5254504eu /* "NPTR" */
#define RT_BLOB_VERSION 2u
#define RT_BLOB_NO_IDS UINT64_MAX
#define RT_BLOB_REQUESTS_MAX NPU_TRACE_REQUESTS_MAX

struct rt_blob_header {
    uint32_t magic, version;
    uint32_t count;
    uint32_t hash_block;       /* prompt tokens per hash id; 0: no hash ids */
    uint64_t hash_count;
    uint64_t ids_count;
    uint64_t bytes;            /* the whole blob */
    uint64_t checksum;         /* FNV-1a 64 of the bytes after the header */
};

struct rt_blob_req {
    uint64_t arrival_ps;
    uint32_t input_len, output_len;
    uint64_t ids_first;        /* RT_BLOB_NO_IDS: none */
    uint64_t hash_first;       /* 0 when nhash is 0 */
    uint32_t nhash;
    uint32_t reserved;         /* 0 */
};

_Static_assert(sizeof(struct rt_blob_header) == 48, "blob header layout");
_Static_assert(sizeof(struct rt_blob_req) == 40, "blob request layout");

/* Checks a blob of `bytes` bytes: magic, version, size, checksum, order of arrivals, id
   ranges. 0, or NPU_ERR_FORMAT with what is wrong (naming the request) in err. */
int rt_blob_check(const void *blob, uint64_t bytes, char *err, size_t errlen);

static inline const struct rt_blob_req *rt_blob_reqs(const void *blob)
{
    return (const struct rt_blob_req *)((const uint8_t *)blob + sizeof(struct rt_blob_header));
}

static inline const uint64_t *rt_blob_hashes(const void *blob)
{
    const struct rt_blob_header *h = blob;
    return (const uint64_t *)(rt_blob_reqs(blob) + h->count);
}

static inline const uint32_t *rt_blob_ids(const void *blob)
{
    const struct rt_blob_header *h = blob;
    return (const uint32_t *)(rt_blob_hashes(blob) + h->hash_count);
}

#endif
