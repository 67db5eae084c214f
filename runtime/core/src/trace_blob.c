/* SPDX-License-Identifier: MIT */
/*
 * rt_blob_check (rt/trace_blob.h): the control core's check of the trace blob before a run.
 * Built for the host tests and cross-compiled for the control core, so: plain C, no malloc,
 * nothing from the host's libraries; snprintf only for the message.
 */
#include "rt/trace_blob.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>

#include "npu_enums.h"

#define FNV_OFFSET_BASIS 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

static uint64_t blob_fnv1a(const uint8_t *p, uint64_t n)
{
    uint64_t h = FNV_OFFSET_BASIS;
    for (uint64_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= FNV_PRIME;
    }
    return h;
}

/* The header's own fields: what the sizes of the rest are derived from. */
static int blob_check_header(const struct rt_blob_header *h, uint64_t bytes, char *err,
                             size_t errlen)
{
    const uint64_t hdr = sizeof(struct rt_blob_header);
    if (h->magic != RT_BLOB_MAGIC) {
        snprintf(err, errlen, "trace blob: magic %#010" PRIx32 ", expected %#010" PRIx32,
                 h->magic, (uint32_t)RT_BLOB_MAGIC);
        return NPU_ERR_FORMAT;
    }
    if (h->version != RT_BLOB_VERSION) {
        snprintf(err, errlen, "trace blob: version %" PRIu32 ", this runtime reads %" PRIu32,
                 h->version, (uint32_t)RT_BLOB_VERSION);
        return NPU_ERR_FORMAT;
    }
    if (h->bytes != bytes) {
        snprintf(err, errlen, "trace blob: header says %" PRIu64 " bytes, %" PRIu64
                 " were loaded (truncated or padded)", h->bytes, bytes);
        return NPU_ERR_FORMAT;
    }
    if (h->count > RT_BLOB_REQUESTS_MAX) {
        snprintf(err, errlen, "trace blob: %" PRIu32 " requests, at most %" PRIu32,
                 h->count, (uint32_t)RT_BLOB_REQUESTS_MAX);
        return NPU_ERR_FORMAT;
    }
    if (h->hash_block == 0 && h->hash_count) {
        snprintf(err, errlen, "trace blob: %" PRIu64 " hash ids without a hash block size",
                 h->hash_count);
        return NPU_ERR_FORMAT;
    }
    /* count is bounded above, so only the two counts can overflow the sum. */
    uint64_t fixed = hdr + (uint64_t)h->count * sizeof(struct rt_blob_req);
    uint64_t left = fixed <= bytes ? bytes - fixed : 0;
    if (fixed > bytes || h->hash_count > left / sizeof(uint64_t) ||
        h->ids_count > (left - h->hash_count * sizeof(uint64_t)) / sizeof(uint32_t) ||
        fixed + h->hash_count * sizeof(uint64_t) + h->ids_count * sizeof(uint32_t) != bytes) {
        snprintf(err, errlen, "trace blob: %" PRIu64 " bytes do not hold a %" PRIu64
                 "-byte header, %" PRIu32 " requests, %" PRIu64 " hash ids and %" PRIu64
                 " ids exactly", bytes, hdr, h->count, h->hash_count, h->ids_count);
        return NPU_ERR_FORMAT;
    }
    return NPU_OK;
}

/* Request i's hash ids: inside the blob's, and no more than its prompt has hash blocks. */
static int blob_check_hashes(const struct rt_blob_header *h, const struct rt_blob_req *r,
                             uint32_t i, char *err, size_t errlen)
{
    if (r->reserved || (r->nhash == 0 && r->hash_first)) {
        snprintf(err, errlen, "trace blob: request %" PRIu32 ": reserved field or hash_first "
                 "set without hash ids", i);
        return NPU_ERR_FORMAT;
    }
    if (r->nhash == 0)
        return NPU_OK;
    uint64_t blocks = h->hash_block ? ((uint64_t)r->input_len + h->hash_block - 1) /
                                      h->hash_block : 0;
    if (r->nhash > blocks || r->hash_first > h->hash_count ||
        r->nhash > h->hash_count - r->hash_first) {
        snprintf(err, errlen, "trace blob: request %" PRIu32 ": hash ids [%" PRIu64 ", %"
                 PRIu64 ") outside the blob's %" PRIu64 ", or more than its %" PRIu64
                 " hash blocks of %" PRIu32 " tokens", i, r->hash_first,
                 r->hash_first + r->nhash, h->hash_count, blocks, h->hash_block);
        return NPU_ERR_FORMAT;
    }
    return NPU_OK;
}

static int blob_check_requests(const void *blob, char *err, size_t errlen)
{
    const struct rt_blob_header *h = blob;
    const struct rt_blob_req *r = rt_blob_reqs(blob);
    for (uint32_t i = 0; i < h->count; i++) {
        if (r[i].arrival_ps > NPU_ARRIVAL_MAX_PS || r[i].input_len > NPU_REQUEST_TOKENS_MAX ||
            r[i].output_len > NPU_REQUEST_TOKENS_MAX) {
            snprintf(err, errlen, "trace blob: request %" PRIu32 " arrives at %" PRIu64
                     " ps with %" PRIu32 " input and %" PRIu32 " output tokens, past "
                     "npu_limits.h's %" PRIu64 " ps or %" PRIu32 " tokens", i, r[i].arrival_ps,
                     r[i].input_len, r[i].output_len, (uint64_t)NPU_ARRIVAL_MAX_PS,
                     (uint32_t)NPU_REQUEST_TOKENS_MAX);
            return NPU_ERR_FORMAT;
        }
        if (i > 0 && r[i].arrival_ps < r[i - 1].arrival_ps) {
            snprintf(err, errlen, "trace blob: request %" PRIu32 " arrives at %" PRIu64
                     " ps, before request %" PRIu32 " (%" PRIu64 " ps)", i, r[i].arrival_ps,
                     i - 1, r[i - 1].arrival_ps);
            return NPU_ERR_FORMAT;
        }
        uint64_t first = r[i].ids_first;
        if (first != RT_BLOB_NO_IDS &&
            (first > h->ids_count || r[i].input_len > h->ids_count - first)) {
            snprintf(err, errlen, "trace blob: request %" PRIu32 ": ids [%" PRIu64 ", %" PRIu64
                     ") outside the blob's %" PRIu64 " ids", i, first,
                     first + r[i].input_len, h->ids_count);
            return NPU_ERR_FORMAT;
        }
        int rc = blob_check_hashes(h, &r[i], i, err, errlen);
        if (rc)
            return rc;
    }
    return NPU_OK;
}

int rt_blob_check(const void *blob, uint64_t bytes, char *err, size_t errlen)
{
    const uint64_t hdr = sizeof(struct rt_blob_header);
    if (!blob || bytes < hdr) {
        snprintf(err, errlen, "trace blob: %" PRIu64 " bytes, shorter than its %" PRIu64
                 "-byte header", blob ? bytes : 0, hdr);
        return NPU_ERR_FORMAT;
    }
    const struct rt_blob_header *h = blob;
    int rc = blob_check_header(h, bytes, err, errlen);
    if (rc)
        return rc;
    /* The checksum before the contents: a flipped byte anywhere is named as such rather
       than as whatever field it happened to land in. */
    uint64_t sum = blob_fnv1a((const uint8_t *)blob + hdr, bytes - hdr);
    if (sum != h->checksum) {
        snprintf(err, errlen, "trace blob: checksum %#018" PRIx64 ", header says %#018" PRIx64,
                 sum, h->checksum);
        return NPU_ERR_FORMAT;
    }
    return blob_check_requests(blob, err, errlen);
}
