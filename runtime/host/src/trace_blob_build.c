/* SPDX-License-Identifier: MIT */
/*
 * From a trace to the chip's blob (rt/trace_blob.h, docs/traces.md "The blob"), and the
 * checks and synthetic prompt ids that go with it.
 */
#include "rt/trace.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu_enums.h"
#include "npu_limits.h"
#include "rt/trace_blob.h"

#define FNV_OFFSET_BASIS 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

int trace_check_ids(const struct rt_trace *t, uint32_t vocab, char *err, size_t errlen)
{
    for (size_t i = 0; i < t->n; i++) {
        const struct rt_trace_entry *e = &t->e[i];
        for (uint32_t k = 0; e->input_ids && k < e->input_length; k++)
            if (e->input_ids[k] >= vocab) {
                snprintf(err, errlen, "request %zu: input_ids[%" PRIu32 "] = %" PRIu32
                         " is not below the model's vocabulary of %" PRIu32, i, k,
                         e->input_ids[k], vocab);
                return NPU_ERR_RANGE;
            }
    }
    return 0;
}

/* splitmix64's finaliser: every input bit moves every output bit. */
static uint64_t blob_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void trace_synth_ids(uint64_t seed, size_t i, uint32_t len, uint32_t vocab, uint32_t *ids)
{
    uint64_t base = blob_mix(seed ^ blob_mix((uint64_t)i + 0x9e3779b97f4a7c15ull));
    for (uint32_t k = 0; k < len; k++)
        ids[k] = vocab ? (uint32_t)(blob_mix(base + (uint64_t)k * 0x9e3779b97f4a7c15ull) %
                                    vocab)
                       : 0;
}

/* Count and sizes first, so that the blob is allocated once and a refusal allocates none:
   the blob must fit the `room` the chip has for it (0: no limit). */
static int blob_size(const struct rt_trace *t, bool with_ids, uint64_t room,
                     uint64_t *ids_count, uint64_t *bytes, char *err, size_t errlen)
{
    if (t->n > RT_BLOB_REQUESTS_MAX) {
        snprintf(err, errlen, "%zu requests: a blob holds at most %u (cut the trace)", t->n,
                 RT_BLOB_REQUESTS_MAX);
        return NPU_ERR_RANGE;
    }
    uint64_t ids = 0;
    for (size_t i = 0; with_ids && i < t->n; i++)
        ids += t->e[i].input_length; /* at most 2^16 * 2^32: no overflow */
    *ids_count = ids;
    *bytes = sizeof(struct rt_blob_header) + t->n * sizeof(struct rt_blob_req) +
             ids * sizeof(uint32_t);
    if (room && *bytes > room) {
        snprintf(err, errlen, "the trace needs %" PRIu64 " bytes on the chip (%zu requests%s"
                 "), the control core's DRAM has %" PRIu64 " for it (dram_bytes less "
                 "NPU_TRACE_DRAM_OFFSET): cut the trace%s", *bytes, t->n,
                 with_ids ? " and their prompt ids" : "", room,
                 with_ids ? ", shorten its prompts or run in performance mode (no ids)" : "");
        return NPU_ERR_RANGE;
    }
    return 0;
}

/* arrival_ps from milliseconds, at most NPU_ARRIVAL_MAX_PS (about 26.7 days). */
static int blob_arrival(const struct rt_trace_entry *e, size_t i, uint64_t *ps, char *err,
                        size_t errlen)
{
    double v = e->timestamp_ms * 1e9;
    if (!(v >= 0) || v > (double)NPU_ARRIVAL_MAX_PS) {
        snprintf(err, errlen, "request %zu: timestamp %g ms is not in [0, %.0f] ms "
                 "(NPU_ARRIVAL_MAX_PS)", i, e->timestamp_ms, NPU_ARRIVAL_MAX_PS / 1e9);
        return NPU_ERR_RANGE;
    }
    if (e->input_length > NPU_REQUEST_TOKENS_MAX || e->output_length > NPU_REQUEST_TOKENS_MAX) {
        snprintf(err, errlen, "request %zu: %" PRIu32 " input and %" PRIu32 " output tokens, "
                 "at most %u each (NPU_REQUEST_TOKENS_MAX)", i, e->input_length,
                 e->output_length, NPU_REQUEST_TOKENS_MAX);
        return NPU_ERR_RANGE;
    }
    *ps = (uint64_t)llround(v);
    return 0;
}

static int blob_fill(const struct rt_trace *t, bool with_ids, uint32_t vocab, uint64_t seed,
                     uint8_t *blob, char *err, size_t errlen)
{
    struct rt_blob_req *r = (struct rt_blob_req *)(blob + sizeof(struct rt_blob_header));
    uint32_t *ids = (uint32_t *)(r + t->n);
    uint64_t next = 0;
    for (size_t i = 0; i < t->n; i++) {
        const struct rt_trace_entry *e = &t->e[i];
        int rc = blob_arrival(e, i, &r[i].arrival_ps, err, errlen);
        if (rc)
            return rc;
        if (i > 0 && r[i].arrival_ps < r[i - 1].arrival_ps) {
            snprintf(err, errlen, "request %zu: timestamp %.17g ms is before request %zu's",
                     i, e->timestamp_ms, i - 1);
            return NPU_ERR_FORMAT;
        }
        r[i].input_len = e->input_length;
        r[i].output_len = e->output_length;
        r[i].ids_first = with_ids ? next : RT_BLOB_NO_IDS;
        if (!with_ids)
            continue;
        if (e->input_ids)
            memcpy(ids + next, e->input_ids, e->input_length * sizeof(uint32_t));
        else
            trace_synth_ids(seed, i, e->input_length, vocab, ids + next);
        next += e->input_length;
    }
    return 0;
}

int trace_blob_build(const struct rt_trace *t, bool with_ids, uint32_t vocab, uint64_t seed,
                     uint64_t room, void **blob, size_t *bytes, char *err, size_t errlen)
{
    *blob = NULL;
    *bytes = 0;
    uint64_t ids_count, size;
    int rc = blob_size(t, with_ids, room, &ids_count, &size, err, errlen);
    if (rc == 0 && with_ids && vocab == 0) {
        snprintf(err, errlen, "prompt ids need a vocabulary of at least 1 token");
        rc = NPU_ERR_RANGE;
    }
    if (rc == 0 && with_ids)
        rc = trace_check_ids(t, vocab, err, errlen);
    if (rc)
        return rc;
    uint8_t *b = calloc(1, (size_t)size);
    if (!b) {
        snprintf(err, errlen, "trace blob of %" PRIu64 " bytes: out of memory", size);
        return NPU_ERR_NOMEM;
    }
    rc = blob_fill(t, with_ids, vocab, seed, b, err, errlen);
    if (rc) {
        free(b);
        return rc;
    }
    uint64_t sum = FNV_OFFSET_BASIS;
    for (uint64_t k = sizeof(struct rt_blob_header); k < size; k++)
        sum = (sum ^ b[k]) * FNV_PRIME;
    struct rt_blob_header h = { .magic = RT_BLOB_MAGIC, .version = RT_BLOB_VERSION,
                                .count = (uint32_t)t->n, .ids_count = ids_count,
                                .bytes = size, .checksum = sum };
    memcpy(b, &h, sizeof(h));
    *blob = b;
    *bytes = (size_t)size;
    return 0;
}
