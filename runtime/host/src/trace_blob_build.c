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
#include "rt/mix.h"
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


/* Hash blocks of e's prompt of len tokens that have a hash id and that it fills. */
static uint32_t blob_filled_hashes(const struct rt_trace_entry *e, uint32_t hash_block,
                                   uint32_t len)
{
    if (!e || !e->hash_ids || hash_block == 0)
        return 0;
    uint32_t filled = len / hash_block;
    return filled < e->nhash ? filled : e->nhash;
}

void trace_synth_ids(uint64_t seed, size_t i, const struct rt_trace_entry *e,
                     uint32_t hash_block, uint32_t len, uint32_t vocab, uint32_t *ids)
{
    const uint64_t golden = 0x9e3779b97f4a7c15ull;
    const uint64_t base = rt_mix64(seed ^ rt_mix64((uint64_t)i + golden));
    const uint32_t filled = blob_filled_hashes(e, hash_block, len);
    for (uint32_t k = 0; k < len; k++) {
        uint64_t z = base + (uint64_t)k * golden;
        if (filled && k / hash_block < filled) /* the hash block's tokens, wherever it is */
            z = rt_mix64(seed ^ rt_mix64(e->hash_ids[k / hash_block] ^ ~golden)) +
                (uint64_t)(k % hash_block) * golden;
        ids[k] = vocab ? (uint32_t)(rt_mix64(z) % vocab) : 0;
    }
}

/* One filled hash block of the trace: hash id, request, block. */
struct blob_hblock {
    uint64_t hash;
    size_t req;
    uint32_t block;
};

static int blob_hblock_cmp(const void *a, const void *b)
{
    const struct blob_hblock *x = a, *y = b;
    if (x->hash != y->hash)
        return x->hash < y->hash ? -1 : 1;
    return x->req < y->req ? -1 : x->req > y->req ? 1 : (int)x->block - (int)y->block;
}

/* Whether two filled hash blocks named alike hold the same tokens (none of either: the
   same synthetic ones). */
static bool blob_hblock_same(const struct rt_trace *t, const struct blob_hblock *a,
                             const struct blob_hblock *b, uint32_t hash_block)
{
    const uint32_t *x = t->e[a->req].input_ids, *y = t->e[b->req].input_ids;
    if (!x || !y)
        return !x && !y;
    return !memcmp(x + (size_t)a->block * hash_block, y + (size_t)b->block * hash_block,
                   hash_block * sizeof(uint32_t));
}

int trace_check_hash_ids(const struct rt_trace *t, uint32_t hash_block, char *err,
                         size_t errlen)
{
    size_t n = 0;
    for (size_t i = 0; i < t->n; i++)
        n += blob_filled_hashes(&t->e[i], hash_block, t->e[i].input_length);
    struct blob_hblock *hb = malloc((n ? n : 1) * sizeof(*hb));
    if (!hb) {
        snprintf(err, errlen, "checking hash_ids: out of memory");
        return NPU_ERR_NOMEM;
    }
    n = 0;
    for (size_t i = 0; i < t->n; i++)
        for (uint32_t b = 0; b < blob_filled_hashes(&t->e[i], hash_block,
                                                     t->e[i].input_length); b++)
            hb[n++] = (struct blob_hblock){ .hash = t->e[i].hash_ids[b], .req = i, .block = b };
    qsort(hb, n, sizeof(*hb), blob_hblock_cmp);
    int rc = 0;
    for (size_t k = 1; k < n && rc == 0; k++)
        if (hb[k].hash == hb[k - 1].hash && !blob_hblock_same(t, &hb[k - 1], &hb[k], hash_block)) {
            snprintf(err, errlen, "request %zu: hash_ids[%" PRIu32 "] = %" PRIu64 " also names "
                     "request %zu's hash_ids[%" PRIu32 "], but their %" PRIu32 " input_ids "
                     "there differ (or one has none): prefix caching would reuse the wrong KV "
                     "(fix the trace, or serve without --prefix-cache)", hb[k].req, hb[k].block,
                     hb[k].hash, hb[k - 1].req, hb[k - 1].block, hash_block);
            rc = NPU_ERR_FORMAT;
        }
    free(hb);
    return rc;
}

/* Hash ids of e the blob carries: as many as its prompt has hash blocks. */
static uint32_t blob_hash_count(const struct rt_trace_entry *e, uint32_t hash_block)
{
    if (!e->hash_ids || hash_block == 0)
        return 0;
    uint64_t blocks = ((uint64_t)e->input_length + hash_block - 1) / hash_block;
    return blocks < e->nhash ? (uint32_t)blocks : e->nhash;
}

/* Count and sizes first, so that the blob is allocated once and a refusal allocates none:
   the blob must fit the `room` the chip has for it (0: no limit). */
static int blob_size(const struct rt_trace *t, const struct rt_blob_opts *o,
                     uint64_t *ids_count, uint64_t *hash_count, uint64_t *bytes, char *err,
                     size_t errlen)
{
    const bool with_ids = o->with_ids;
    const uint64_t room = o->room;
    if (t->n > RT_BLOB_REQUESTS_MAX) {
        snprintf(err, errlen, "%zu requests: a blob holds at most %u (cut the trace)", t->n,
                 RT_BLOB_REQUESTS_MAX);
        return NPU_ERR_RANGE;
    }
    uint64_t ids = 0;
    for (size_t i = 0; with_ids && i < t->n; i++)
        ids += t->e[i].input_length; /* at most 2^16 * 2^32: no overflow */
    uint64_t hashes = 0;
    for (size_t i = 0; i < t->n; i++)
        hashes += blob_hash_count(&t->e[i], o->hash_block);
    *ids_count = ids;
    *hash_count = hashes;
    *bytes = sizeof(struct rt_blob_header) + t->n * sizeof(struct rt_blob_req) +
             hashes * sizeof(uint64_t) + ids * sizeof(uint32_t);
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

static int blob_fill(const struct rt_trace *t, const struct rt_blob_opts *o,
                     uint64_t hash_count, uint8_t *blob, char *err, size_t errlen)
{
    const bool with_ids = o->with_ids;
    struct rt_blob_req *r = (struct rt_blob_req *)(blob + sizeof(struct rt_blob_header));
    uint64_t *hashes = (uint64_t *)(r + t->n);
    uint32_t *ids = (uint32_t *)(hashes + hash_count);
    uint64_t next = 0, next_hash = 0;
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
        r[i].nhash = blob_hash_count(e, o->hash_block);
        r[i].hash_first = r[i].nhash ? next_hash : 0;
        if (r[i].nhash)
            memcpy(hashes + next_hash, e->hash_ids, r[i].nhash * sizeof(uint64_t));
        next_hash += r[i].nhash;
        if (!with_ids)
            continue;
        if (e->input_ids)
            memcpy(ids + next, e->input_ids, e->input_length * sizeof(uint32_t));
        else
            trace_synth_ids(o->seed, i, e, o->hash_block, e->input_length, o->vocab,
                            ids + next);
        next += e->input_length;
    }
    return 0;
}

int trace_blob_build(const struct rt_trace *t, const struct rt_blob_opts *o, void **blob,
                     size_t *bytes, char *err, size_t errlen)
{
    *blob = NULL;
    *bytes = 0;
    uint64_t ids_count, hash_count, size;
    int rc = blob_size(t, o, &ids_count, &hash_count, &size, err, errlen);
    if (rc == 0 && o->with_ids && o->vocab == 0) {
        snprintf(err, errlen, "prompt ids need a vocabulary of at least 1 token");
        rc = NPU_ERR_RANGE;
    }
    if (rc == 0 && o->with_ids)
        rc = trace_check_ids(t, o->vocab, err, errlen);
    if (rc)
        return rc;
    uint8_t *b = calloc(1, (size_t)size);
    if (!b) {
        snprintf(err, errlen, "trace blob of %" PRIu64 " bytes: out of memory", size);
        return NPU_ERR_NOMEM;
    }
    rc = blob_fill(t, o, hash_count, b, err, errlen);
    if (rc) {
        free(b);
        return rc;
    }
    uint64_t sum = FNV_OFFSET_BASIS;
    for (uint64_t k = sizeof(struct rt_blob_header); k < size; k++)
        sum = (sum ^ b[k]) * FNV_PRIME;
    struct rt_blob_header h = { .magic = RT_BLOB_MAGIC, .version = RT_BLOB_VERSION,
                                .count = (uint32_t)t->n, .ids_count = ids_count,
                                .hash_block = hash_count ? o->hash_block : 0,
                                .hash_count = hash_count,
                                .bytes = size, .checksum = sum };
    memcpy(b, &h, sizeof(h));
    *blob = b;
    *bytes = (size_t)size;
    return 0;
}
