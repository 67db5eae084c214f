/* SPDX-License-Identifier: MIT */
/*
 * The KV-cache manager's prefix index (rt/kvc.h, docs/serving.md "Prefix caching").
 *
 * Modelled: published prompt blocks as a forest (each block's parent is the block before
 * it in its prompt), found by a hash of (parent, key) with chaining through hnext[];
 * reference counts (a sequence holds every block of its shared prefix, so a block's count
 * is never above its parent's); eviction of the least recently used block that no sequence
 * holds and no cached block succeeds (a leaf), on demand when a reserved block is taken and
 * the free list is empty. A block's key folds the hash ids of the hash blocks over its
 * positions with its end position; its parent covers everything before it, so equal
 * (parent, key) means equal tokens at every position up to its end, whether or not the
 * trace's hash ids are themselves chained over the prefix (Mooncake's are).
 * Blocks of a paged ring (rt_kvc_config.ring_paged) are shared like SRAM's; positions in
 * a ring segment are not (without paging nothing past a sequence's SRAM blocks is shared).
 * Not modelled: partial blocks (a block is shared only when every position in it is
 * named by a hash block the prompt fills), the cost of the index's own bookkeeping.
 * Deterministic: no clock but the index's own counter.
 */
#include <assert.h>
#include <string.h>

#include "kvc_internal.h"
#include "npu_enums.h"
#include "rt/kvc.h"
#include "rt/mix.h"


void kvc_prefix_attach(struct rt_kvc *k, struct rt_kvc_index *px)
{
    assert(k && px && !k->px && k->free_count == kvc_ids(k)); /* a fresh manager */
    memset(px, 0, sizeof(*px));
    for (uint32_t h = 0; h < RT_KVC_BUCKETS; h++)
        px->bucket[h] = RT_KVC_NONE;
    k->px = px;
}

uint32_t kvc_prefix_blocks(const struct rt_kvc *k, const struct rt_kv_prefix *p)
{
    assert(k && p);
    if (!p->hash || p->hash_block == 0 || p->input_len == 0)
        return 0;
    uint64_t filled = p->input_len / p->hash_block;
    if (filled > p->nhash)
        filled = p->nhash;
    uint64_t end = filled * p->hash_block;
    if (end > p->input_len - 1u)
        end = p->input_len - 1u; /* the last prompt position gives the first token */
    return (uint32_t)(end / k->cfg.block_tokens);
}

/* Key of block j of p: its end position and the hash ids over positions [jB, (j+1)B). */
static uint64_t px_key(const struct rt_kvc *k, const struct rt_kv_prefix *p, uint32_t j)
{
    const uint64_t b = k->cfg.block_tokens, lo = j * b, hi = lo + b;
    uint64_t key = rt_mix64(hi);
    for (uint64_t i = lo / p->hash_block; i <= (hi - 1) / p->hash_block; i++)
        key = rt_mix64(key ^ p->hash[i]);
    return key;
}

static uint32_t px_bucket(uint32_t parent, uint64_t key)
{
    return (uint32_t)(rt_mix64(key ^ ((uint64_t)parent * 0x9e3779b97f4a7c15ull + 1)) &
                      (RT_KVC_BUCKETS - 1));
}

static uint32_t px_lookup(const struct rt_kvc *k, uint32_t parent, uint64_t key)
{
    const struct rt_kvc_index *px = k->px;
    for (uint32_t b = px->bucket[px_bucket(parent, key)]; b != RT_KVC_NONE; b = px->hnext[b])
        if (px->key[b] == key && px->parent[b] == parent)
            return b;
    return RT_KVC_NONE;
}

void kvc_prefix_find(const struct rt_kvc *k, const struct rt_kv_prefix *p, struct kvc_hit *h)
{
    const struct rt_kvc_index *px = k->px;
    const uint32_t n = kvc_prefix_blocks(k, p);
    *h = (struct kvc_hit){ .tail = RT_KVC_NONE };
    for (uint32_t j = 0; j < n; j++) {
        uint32_t b = px_lookup(k, h->tail, px_key(k, p, j));
        if (b == RT_KVC_NONE)
            break;
        h->tail = b, h->blocks++, h->idle += px->ref[b] == 0;
    }
    /* Counts never grow along a chain, so the idle blocks are its end: drop them from there
       until the rest fit what no sequence has reserved. */
    while (h->idle > k->unreserved) {
        h->idle -= px->ref[h->tail] == 0;
        h->tail = px->parent[h->tail], h->blocks--;
    }
}

uint32_t kvc_prefix_hit(const struct rt_kvc *k, const struct rt_kv_prefix *p)
{
    assert(k && p);
    if (!k->px)
        return 0;
    struct kvc_hit h;
    kvc_prefix_find(k, p, &h);
    return h.blocks;
}

void kvc_prefix_take(struct rt_kvc *k, struct rt_kv_seq *s, const struct kvc_hit *h)
{
    struct rt_kvc_index *px = k->px;
    assert(px && h->idle <= k->unreserved);
    px->clock++;
    uint32_t b = h->tail;
    for (uint32_t n = 0; n < h->blocks; n++, b = px->parent[b]) {
        assert(b != RT_KVC_NONE && k->owner[b] == RT_KVC_CACHED);
        if (px->ref[b]++ == 0)
            px->evictable--, k->unreserved--;
        px->used[b] = px->clock;
    }
    s->shared = h->blocks;
    s->prefix_tail = h->tail;
}

void kvc_prefix_release(struct rt_kvc *k, struct rt_kv_seq *s)
{
    struct rt_kvc_index *px = k->px;
    assert(px);
    px->clock++;
    uint32_t b = s->prefix_tail;
    for (uint32_t n = 0; n < s->shared; n++, b = px->parent[b]) {
        assert(b != RT_KVC_NONE && k->owner[b] == RT_KVC_CACHED && px->ref[b] > 0);
        if (--px->ref[b] == 0)
            px->evictable++, k->unreserved++;
        px->used[b] = px->clock;
    }
    s->shared = 0;
    s->prefix_tail = RT_KVC_NONE;
}

static void px_unlink(struct rt_kvc_index *px, uint32_t b)
{
    uint32_t *at = &px->bucket[px_bucket(px->parent[b], px->key[b])];
    while (*at != b) {
        assert(*at != RT_KVC_NONE);
        at = &px->hnext[*at];
    }
    *at = px->hnext[b];
}

void kvc_prefix_evict(struct rt_kvc *k)
{
    struct rt_kvc_index *px = k->px;
    assert(px && px->evictable > 0);
    /* A scan of the pool: eviction happens only when the free list is empty, and an idle
       block's successors are idle too, so an idle leaf exists. */
    uint32_t best = RT_KVC_NONE;
    for (uint32_t b = 0; b < kvc_ids(k); b++)
        if (k->owner[b] == RT_KVC_CACHED && px->ref[b] == 0 && px->children[b] == 0 &&
            (best == RT_KVC_NONE || px->used[b] < px->used[best]))
            best = b;
    assert(best != RT_KVC_NONE);
    px_unlink(px, best);
    if (px->parent[best] != RT_KVC_NONE)
        px->children[px->parent[best]]--;
    px->cached--, px->evictable--, px->evictions++;
    k->owner[best] = 0;
    kvc_push_free(k, best);
}

uint32_t kvc_seq_publish(struct rt_kvc *k, struct rt_kv_seq *s, const struct rt_kv_prefix *p)
{
    return kvc_seq_publish_upto(k, s, p, p->input_len);
}

uint32_t kvc_seq_publish_upto(struct rt_kvc *k, struct rt_kv_seq *s,
                              const struct rt_kv_prefix *p, uint32_t written)
{
    assert(k && s && p && s->admitted && written <= s->len && written <= p->input_len);
    struct rt_kvc_index *px = k->px;
    if (!px)
        return 0;
    const uint32_t keyable = kvc_prefix_blocks(k, p), done = written / k->cfg.block_tokens;
    const uint32_t n = keyable < done ? keyable : done;
    uint32_t published = 0;
    if (s->shared < n && s->head != RT_KVC_NONE)
        px->clock++; /* not for a chunk that completes no block */
    /* s's own list starts at position block `shared`: publishing its head moves it. */
    while (s->shared < n && s->head != RT_KVC_NONE) {
        const uint32_t prev = s->shared ? s->prefix_tail : RT_KVC_NONE, b = s->head;
        const uint64_t key = px_key(k, p, s->shared);
        if (px_lookup(k, prev, key) != RT_KVC_NONE)
            break; /* computed twice (both prefilled at once): the index keeps the first */
        s->head = k->next[b];
        if (s->head == RT_KVC_NONE)
            s->tail = RT_KVC_NONE;
        k->next[b] = RT_KVC_NONE;
        s->blocks--, s->reserved--;
        k->owner[b] = RT_KVC_CACHED;
        px->parent[b] = prev, px->key[b] = key, px->ref[b] = 1, px->children[b] = 0;
        px->used[b] = px->clock;
        if (prev != RT_KVC_NONE)
            px->children[prev]++;
        const uint32_t h = px_bucket(prev, key);
        px->hnext[b] = px->bucket[h];
        px->bucket[h] = b;
        px->cached++;
        s->shared++, s->prefix_tail = b, published++;
    }
    return published;
}

uint32_t kvc_prefix_ids(const struct rt_kvc *k, const struct rt_kv_seq *s, uint32_t *ids,
                        uint32_t max)
{
    const struct rt_kvc_index *px = k->px;
    assert(px);
    uint32_t b = s->prefix_tail;
    for (uint32_t i = s->shared; i-- > 0; b = px->parent[b]) {
        assert(b != RT_KVC_NONE);
        if (i < max)
            ids[i] = b;
    }
    return s->shared < max ? s->shared : max;
}

/* ---- invariant checks ------------------------------------------------------------------ */

/* Every bucket's chain holds cached blocks filed under their own (parent, key), none twice
   (a loop would pass the pool), and together exactly the index's blocks. */
static int px_check_buckets(const struct rt_kvc *k, uint32_t cached, char *err, size_t errlen)
{
    const struct rt_kvc_index *px = k->px;
    uint32_t filed = 0;
    for (uint32_t h = 0; h < RT_KVC_BUCKETS; h++)
        for (uint32_t b = px->bucket[h]; b != RT_KVC_NONE; b = px->hnext[b]) {
            if (b >= kvc_ids(k) || k->owner[b] != RT_KVC_CACHED)
                return kvc_fail(err, errlen, "index bucket holds a block not cached (bucket, "
                                "block)", h, b);
            if (px_bucket(px->parent[b], px->key[b]) != h)
                return kvc_fail(err, errlen, "index block in the wrong bucket (bucket, block)",
                                h, b);
            if (++filed > cached)
                return kvc_fail(err, errlen, "index buckets hold more than the cached blocks "
                                "(filed, cached)", filed, cached);
        }
    if (filed != cached)
        return kvc_fail(err, errlen, "cached blocks missing from the index (filed, cached)",
                        filed, cached);
    return NPU_OK;
}

/* How many of the sequences' shared prefixes pass through block b; NPU_ERR_STATE if one
   of them leaves the index. */
static int px_holders(const struct rt_kvc *k, const struct rt_kv_seq *const *seqs,
                      uint32_t nseqs, uint32_t b, uint32_t *holders, char *err, size_t errlen)
{
    *holders = 0;
    for (uint32_t i = 0; i < nseqs; i++) {
        uint32_t c = seqs[i]->prefix_tail;
        for (uint32_t n = 0; n < seqs[i]->shared; n++, c = k->px->parent[c]) {
            if (c >= kvc_ids(k) || k->owner[c] != RT_KVC_CACHED)
                return kvc_fail(err, errlen, "shared prefix through a block not cached (id, "
                                "block)", seqs[i]->id, c);
            *holders += c == b;
        }
        if (seqs[i]->shared && c != RT_KVC_NONE)
            return kvc_fail(err, errlen, "shared prefix does not start a prompt (id, block)",
                            seqs[i]->id, c);
    }
    return NPU_OK;
}

/* One cached block: its parent cached, its count of successors and of holders right. */
static int px_check_block(const struct rt_kvc *k, const struct rt_kv_seq *const *seqs,
                          uint32_t nseqs, uint32_t b, char *err, size_t errlen)
{
    const struct rt_kvc_index *px = k->px;
    uint32_t p = px->parent[b], kids = 0, holders;
    if (p != RT_KVC_NONE && (p >= kvc_ids(k) || k->owner[p] != RT_KVC_CACHED))
        return kvc_fail(err, errlen, "cached block's parent is not cached (block, parent)", b,
                        p);
    for (uint32_t c = 0; c < kvc_ids(k); c++)
        kids += k->owner[c] == RT_KVC_CACHED && px->parent[c] == b;
    if (kids != px->children[b])
        return kvc_fail(err, errlen, "cached block's successor count is wrong (block, count)",
                        b, px->children[b]);
    int rc = px_holders(k, seqs, nseqs, b, &holders, err, errlen);
    if (rc == NPU_OK && holders != px->ref[b])
        return kvc_fail(err, errlen, "cached block's reference count is wrong (block, count)",
                        b, px->ref[b]);
    return rc;
}

int kvc_prefix_check(const struct rt_kvc *k, const struct rt_kv_seq *const *seqs,
                     uint32_t nseqs, uint32_t *cached, uint32_t *evictable, char *err,
                     size_t errlen)
{
    const struct rt_kvc_index *px = k->px;
    *cached = *evictable = 0;
    for (uint32_t b = 0; b < kvc_ids(k); b++) {
        if (k->owner[b] != RT_KVC_CACHED)
            continue;
        int rc = px_check_block(k, seqs, nseqs, b, err, errlen);
        if (rc)
            return rc;
        ++*cached;
        *evictable += px->ref[b] == 0;
    }
    if (*cached != px->cached || *evictable != px->evictable)
        return kvc_fail(err, errlen, "index counts are wrong (cached, evictable)", px->cached,
                        px->evictable);
    return px_check_buckets(k, *cached, err, errlen);
}
