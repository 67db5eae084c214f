/* SPDX-License-Identifier: MIT */
/*
 * Host unit tests of the KV-cache manager's prefix caching (runtime/core/src/kvc_prefix.c).
 * Covers: without an index the prefix calls are the plain ones (a twin manager ends
 * byte-identical); publish then hit with shared block ids; keyable blocks short of the last
 * position and inside filled hash blocks; mismatches inside a block and non-chained hash
 * ids (also under hundreds of parents); reference counts, evictable blocks counted
 * unreserved, LRU eviction of leaves only; hits cut to what is unreserved; duplicate
 * publication; kvc_check catching index corruptions; a fixed-seed stress checked against a
 * model of the tokens (every hit holds the prompt's tokens and is as long as the cache
 * allows, every publication stops where it must).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "npu_enums.h"
#include "rt/kvc.h"
#include "kvc_fixture.h"

static struct rt_kvc_index pxi;  /* ~270 KiB: not on the stack */

/* A manager whose prefix index is pxi. */
static void setup_px(uint32_t block_tokens, uint32_t sram_blocks, uint64_t ring_rows)
{
    setup_kvc(block_tokens, sram_blocks, ring_rows);
    kvc_prefix_attach(&kv, &pxi);
    assert_ptr_equal(kv.px, &pxi);
}

static struct rt_kv_prefix prompt(const uint64_t *hash, uint32_t nhash, uint32_t hash_block,
                                  uint32_t input_len)
{
    return (struct rt_kv_prefix){ .hash = hash, .nhash = nhash, .hash_block = hash_block,
                                  .input_len = input_len };
}

/* Admits s for p expecting `hit` cached blocks, which kvc_prefix_hit must have announced:
   the schedulers size a prompt's rows by it before admitting. */
static void admit_hit(struct rt_kv_seq *s, uint32_t id, uint32_t max_len,
                      const struct rt_kv_prefix *p, uint32_t hit)
{
    uint32_t got = UINT32_MAX;
    assert_int_equal(kvc_prefix_hit(&kv, p), hit);
    assert_int_equal(kvc_seq_admit_prefix(&kv, s, id, max_len, p, &got), NPU_OK);
    assert_int_equal(got, hit);
    assert_int_equal(s->shared, hit);
}

/* Admits s, grows it over its whole prompt (as a finished prefill does) and publishes it:
   how many blocks the index took. */
static uint32_t prefill_publish(struct rt_kv_seq *s, uint32_t id, uint32_t max_len,
                                const struct rt_kv_prefix *p, uint32_t hit)
{
    admit_hit(s, id, max_len, p, hit);
    kvc_seq_grow(&kv, s, p->input_len);
    return kvc_seq_publish(&kv, s, p);
}

/* Without kvc_prefix_attach the prefix calls are the plain ones: a twin manager driven by
   kvc_seq_admit ends in the very same state, NOMEM and RANGE included. */
static void test_prefix_off_is_admit(void **state)
{
    (void)state;
    static struct rt_kvc twin;
    static const uint64_t h[] = { 1, 2, 3, 9 };
    const struct rt_kv_prefix p = prompt(h, 4, 16, 50);
    struct rt_kv_seq a, b, c, ta, tb;
    uint32_t hit = 7;
    setup_kvc(16, 6, 64);
    memcpy(&twin, &kv, sizeof(kv));
    assert_int_equal(kvc_seq_admit_prefix(&kv, &a, 0, 60, &p, &hit), NPU_OK);
    assert_int_equal(hit, 0);
    assert_int_equal(kvc_seq_admit(&twin, &ta, 0, 60), NPU_OK);
    kvc_seq_grow(&kv, &a, 50);
    kvc_seq_grow(&twin, &ta, 50);
    assert_int_equal(kvc_seq_publish(&kv, &a, &p), 0);
    assert_int_equal(kvc_prefix_hit(&kv, &p), 0);
    hit = 7;  /* 4 blocks, 2 unreserved: spills into a 60-row segment */
    assert_int_equal(kvc_seq_admit_prefix(&kv, &b, 1, 60, &p, &hit), NPU_OK);
    assert_int_equal(hit, 0);
    assert_int_equal(kvc_seq_admit(&twin, &tb, 1, 60), NPU_OK);
    hit = 7;  /* the ring is full: waits, and says no hit */
    assert_int_equal(kvc_seq_admit_prefix(&kv, &c, 2, 60, &p, &hit), NPU_ERR_NOMEM);
    assert_int_equal(hit, 0);
    hit = 7;
    assert_int_equal(kvc_seq_admit_prefix(&kv, &c, 2, 200, &p, &hit), NPU_ERR_RANGE);
    assert_int_equal(hit, 0);
    assert_memory_equal(&kv, &twin, sizeof(kv));
    assert_memory_equal(&a, &ta, sizeof(a));
    assert_memory_equal(&b, &tb, sizeof(b));
    assert_int_equal(a.shared, 0);
    assert_ok(&a, &b, NULL, NULL);
    kvc_seq_free(&kv, &a);
    kvc_seq_free(&kv, &b);
    assert_empty();
}

/* B (1 2 7 8, 50 tokens) next to A (published, ids ida): its first two blocks are A's,
   ids and all, it reserves only the other two, and publishes its third under A's second. */
static void share_two(struct rt_kv_seq *a, const uint32_t *ida)
{
    static const uint64_t hb[] = { 1, 2, 7, 8 };
    const struct rt_kv_prefix pb = prompt(hb, 4, 16, 50);
    struct rt_kv_seq b;
    uint32_t idb[8];
    admit_hit(&b, 1, 60, &pb, 2);
    assert_int_equal(b.reserved, 2);       /* only what is not shared */
    assert_int_equal(kv.unreserved, 10);   /* the shared blocks were held already */
    assert_ok(a, &b, NULL, NULL);
    kvc_seq_grow(&kv, &b, 50);
    assert_ok(a, &b, NULL, NULL);
    assert_int_equal(b.blocks, 2);
    assert_int_equal(kvc_seq_nblocks(&b), 4);
    assert_int_equal(kvc_seq_block_ids(&kv, &b, idb, 8), 4);
    assert_memory_equal(idb, ida, sizeof(ida[0]) * 2);
    for (uint32_t j = 2; j < 4; j++)
        for (uint32_t i = 0; i < 4; i++)
            assert_int_not_equal(idb[j], ida[i]);
    assert_int_equal(pxi.ref[ida[0]], 2);
    assert_int_equal(pxi.ref[ida[2]], 1);
    assert_int_equal(kvc_seq_publish(&kv, &b, &pb), 1);
    assert_int_equal(pxi.children[ida[1]], 2);
    assert_ok(a, &b, NULL, NULL);
    kvc_seq_free(&kv, &b);
}

/* A (hashes 1 2 3 9, 50 tokens): 3 keyable blocks, positions 0..47 (block 3 would pass the
   last position, 49); they keep their place in A, now shared and cached. */
static void test_prefix_publish_then_hit(void **state)
{
    (void)state;
    static const uint64_t ha[] = { 1, 2, 3, 9 };
    const struct rt_kv_prefix pa = prompt(ha, 4, 16, 50);
    struct rt_kv_seq a;
    uint32_t ida[8], before[8];
    setup_px(16, 16, 0);
    assert_int_equal(kvc_prefix_blocks(&kv, &pa), 3);
    admit_hit(&a, 0, 60, &pa, 0);
    assert_ok(&a, NULL, NULL, NULL);
    kvc_seq_grow(&kv, &a, 50);
    assert_ok(&a, NULL, NULL, NULL);
    assert_int_equal(kvc_seq_block_ids(&kv, &a, before, 8), 4);
    assert_int_equal(kvc_seq_publish(&kv, &a, &pa), 3);
    assert_ok(&a, NULL, NULL, NULL);
    assert_int_equal(a.shared, 3);
    assert_int_equal(a.blocks, 1);
    assert_int_equal(a.reserved, 1);
    assert_int_equal(kvc_seq_nblocks(&a), 4);
    assert_int_equal(kvc_seq_block_ids(&kv, &a, ida, 8), 4);
    assert_memory_equal(ida, before, sizeof(before[0]) * 4);
    for (uint32_t j = 0; j < 3; j++)
        assert_int_equal(kv.owner[ida[j]], RT_KVC_CACHED);
    assert_int_equal(pxi.cached, 3);
    assert_int_equal(pxi.evictable, 0);
    assert_int_equal(kv.unreserved, 12);
    share_two(&a, ida);
    kvc_seq_free(&kv, &a);
    assert_ok(NULL, NULL, NULL, NULL);
    assert_int_equal(pxi.cached, 4);
    assert_int_equal(pxi.evictable, 4);
    assert_int_equal(kv.unreserved, 16);  /* idle cached blocks are unreserved */
    assert_int_equal(kv.free_count, 12);
}

/* Keyable blocks end short of the prompt's last position (its KV gives the first token)
   and inside the hash blocks the prompt fills and has ids for. */
static void test_prefix_last_position(void **state)
{
    (void)state;
    static const uint64_t h[] = { 1, 2, 3 };
    struct rt_kv_seq a, b;
    setup_px(16, 16, 0);
    struct rt_kv_prefix p = prompt(h, 3, 16, 48);
    assert_int_equal(kvc_prefix_blocks(&kv, &p), 2);  /* 47 / 16 */
    p.input_len = 49;
    assert_int_equal(kvc_prefix_blocks(&kv, &p), 3);  /* 48 <= 48 */
    p.input_len = 47;
    assert_int_equal(kvc_prefix_blocks(&kv, &p), 2);  /* hash block 2 not filled */
    p.input_len = 200;
    assert_int_equal(kvc_prefix_blocks(&kv, &p), 3);  /* only 3 ids */
    p.nhash = 1;
    assert_int_equal(kvc_prefix_blocks(&kv, &p), 1);
    p.hash_block = 0;
    assert_int_equal(kvc_prefix_blocks(&kv, &p), 0);
    p = prompt(NULL, 3, 16, 48);
    assert_int_equal(kvc_prefix_blocks(&kv, &p), 0);
    p = prompt(h, 3, 16, 0);
    assert_int_equal(kvc_prefix_blocks(&kv, &p), 0);
    /* A whole-prompt match: the second prompt still computes positions 32..47. */
    p = prompt(h, 3, 16, 48);
    assert_int_equal(prefill_publish(&a, 0, 50, &p, 0), 2);
    assert_int_equal(a.blocks, 1);  /* block 2 holds the last position: A's own */
    admit_hit(&b, 1, 50, &p, 2);
    assert_int_equal(b.reserved, 2);
    assert_ok(&a, &b, NULL, NULL);
    kvc_seq_free(&kv, &a);
    kvc_seq_free(&kv, &b);
    assert_ok(NULL, NULL, NULL, NULL);
    /* Blocks smaller than hash blocks: 40 tokens, 2 filled hash blocks, 4 blocks of 8. */
    setup_px(8, 16, 0);
    p = prompt(h, 3, 16, 40);
    assert_int_equal(kvc_prefix_blocks(&kv, &p), 4);
}

/* Blocks of 32 over hash blocks of 16: one differing id inside a block stops the match
   there. */
static void test_prefix_mismatch_in_block(void **state)
{
    (void)state;
    static const uint64_t ha[] = { 1, 2, 3, 4 }, hb[] = { 1, 9, 3, 4 }, hc[] = { 1, 2, 3, 5 };
    const struct rt_kv_prefix pa = prompt(ha, 4, 16, 70), pb = prompt(hb, 4, 16, 70),
                              pc = prompt(hc, 4, 16, 70);
    struct rt_kv_seq a, b, c;
    setup_px(32, 16, 0);
    assert_int_equal(kvc_prefix_blocks(&kv, &pa), 2);  /* 64 positions of 69 */
    assert_int_equal(prefill_publish(&a, 0, 70, &pa, 0), 2);
    admit_hit(&b, 1, 70, &pb, 0);  /* hash 1 is the second half of block 0 */
    admit_hit(&c, 2, 70, &pc, 1);  /* hash 5 is the second half of block 1 */
    assert_ok(&a, &b, &c, NULL);
    kvc_seq_free(&kv, &a);
    kvc_seq_free(&kv, &b);
    kvc_seq_free(&kv, &c);
    assert_ok(NULL, NULL, NULL, NULL);
}

/* Hash ids that are not chained: C's id at index 1 is A's, its id at index 0 is not. The
   index keys blocks under their parent, so C matches nothing of A and publishes a chain of
   its own, block 1 included; D, C's twin, then finds C's chain, not A's block 1. */
static void test_prefix_parent_chain(void **state)
{
    (void)state;
    static const uint64_t ha[] = { 1, 2, 3 }, hc[] = { 5, 2, 3 };
    const struct rt_kv_prefix pa = prompt(ha, 3, 16, 64), pc = prompt(hc, 3, 16, 64);
    struct rt_kv_seq a, c, d;
    uint32_t ida[4], idc[4], idd[4];
    setup_px(16, 16, 0);
    assert_int_equal(prefill_publish(&a, 0, 64, &pa, 0), 3);
    assert_int_equal(prefill_publish(&c, 1, 64, &pc, 0), 3);
    assert_int_equal(pxi.cached, 6);
    kvc_seq_block_ids(&kv, &a, ida, 4);
    kvc_seq_block_ids(&kv, &c, idc, 4);
    assert_int_equal(pxi.parent[idc[1]], idc[0]);
    assert_int_equal(pxi.children[ida[0]], 1);
    admit_hit(&d, 2, 64, &pc, 3);
    assert_int_equal(kvc_seq_block_ids(&kv, &d, idd, 4), 3);
    assert_memory_equal(idd, idc, 3 * sizeof(idd[0]));
    assert_ok(&a, &c, &d, NULL);
    kvc_seq_free(&kv, &d);
    kvc_seq_free(&kv, &c);
    kvc_seq_free(&kv, &a);
    assert_ok(NULL, NULL, NULL, NULL);
}

/* Many prompts whose second hash id is the same under different first ones: each second
   block is new (its parent differs), however the index files them. */
static void test_prefix_many_parents(void **state)
{
    (void)state;
    uint64_t h[2] = { 0, 7 };
    const struct rt_kv_prefix p = prompt(h, 2, 16, 40);
    struct rt_kv_seq s;
    setup_px(16, 1024, 0);
    for (uint32_t i = 0; i < 400; i++) {
        h[0] = 1000 + i;
        assert_int_equal(prefill_publish(&s, i, 40, &p, 0), 2);
        kvc_seq_free(&kv, &s);
    }
    assert_int_equal(pxi.cached, 800);
    assert_ok(NULL, NULL, NULL, NULL);
    h[0] = 1000 + 123;
    admit_hit(&s, 0, 40, &p, 2);
    kvc_seq_free(&kv, &s);
}

/* Two sharers: the block stays cached and held while either lives; idle (and unreserved)
   once both are gone; a later admission takes idle blocks out of unreserved again. */
static void test_prefix_refcounts(void **state)
{
    (void)state;
    static const uint64_t h[] = { 1, 2, 3, 9 };
    const struct rt_kv_prefix p = prompt(h, 4, 16, 50);
    struct rt_kv_seq a, b, c;
    uint32_t ids[4];
    setup_px(16, 8, 0);
    assert_int_equal(prefill_publish(&a, 0, 50, &p, 0), 3);
    kvc_seq_block_ids(&kv, &a, ids, 4);
    admit_hit(&b, 1, 50, &p, 3);
    assert_int_equal(b.reserved, 1);
    assert_int_equal(pxi.ref[ids[0]], 2);
    kvc_seq_free(&kv, &a);
    assert_ok(&b, NULL, NULL, NULL);
    for (uint32_t j = 0; j < 3; j++) {
        assert_int_equal(kv.owner[ids[j]], RT_KVC_CACHED);
        assert_int_equal(pxi.ref[ids[j]], 1);
    }
    assert_int_equal(pxi.evictable, 0);
    assert_int_equal(kv.unreserved, 4);  /* 8 - 3 held by b - b's own 1 */
    kvc_seq_free(&kv, &b);
    assert_ok(NULL, NULL, NULL, NULL);
    assert_int_equal(pxi.evictable, 3);
    assert_int_equal(pxi.ref[ids[2]], 0);
    assert_int_equal(kv.unreserved, 8);
    admit_hit(&c, 2, 50, &p, 3);  /* takes the 3 idle blocks and reserves 1 */
    assert_int_equal(pxi.evictable, 0);
    assert_int_equal(kv.unreserved, 4);
    assert_ok(&c, NULL, NULL, NULL);
    kvc_seq_free(&kv, &c);
    assert_ok(NULL, NULL, NULL, NULL);
    assert_int_equal(pxi.evictions, 0);
}

/* Grows z by one block and expects block `evicted` to have been evicted into it. */
static void grow_evicting(struct rt_kv_seq *z, uint32_t evicted, uint64_t evictions)
{
    uint32_t ids[16];
    kvc_seq_grow(&kv, z, z->len + 16);
    assert_int_equal(pxi.evictions, evictions);
    assert_int_equal(kvc_seq_block_ids(&kv, z, ids, 16), z->blocks);
    assert_int_equal(ids[z->blocks - 1], evicted);
    assert_int_equal(kv.owner[evicted], z->id + 1);
    assert_ok(z, NULL, NULL, NULL);
}

/* X's chain (blocks 0, 1) is published before Y's (3, 4) but released after it; the pool
   (8) is all Z needs. Z is admitted (idle blocks are unreserved) and its growth evicts
   least recently released first, leaves only: y1 before y0, though both were released
   together and y0 has the lower id, then x1, x0. */
static void test_prefix_evict_lru(void **state)
{
    (void)state;
    static const uint64_t hx[] = { 1, 2 }, hy[] = { 5, 6 };
    const struct rt_kv_prefix px = prompt(hx, 2, 16, 40), py = prompt(hy, 2, 16, 40),
                              none = prompt(NULL, 0, 0, 128);
    struct rt_kv_seq x, y, z;
    setup_px(16, 8, 0);
    assert_int_equal(prefill_publish(&x, 0, 40, &px, 0), 2);
    assert_int_equal(prefill_publish(&y, 1, 40, &py, 0), 2);
    kvc_seq_free(&kv, &y);
    kvc_seq_free(&kv, &x);
    assert_int_equal(pxi.parent[1], 0);  /* x0 x1 = 0 1, y0 y1 = 3 4 */
    assert_int_equal(pxi.parent[4], 3);
    assert_int_equal(kv.unreserved, 8);
    admit_hit(&z, 2, 128, &none, 0);
    assert_int_equal(z.reserved, 8);
    assert_int_equal(z.ring_row, RT_KVC_NO_RING);
    assert_int_equal(kvc_prefix_hit(&kv, &px), 0);  /* Z was promised the idle blocks */
    kvc_seq_grow(&kv, &z, 64);  /* the 4 free blocks first */
    assert_int_equal(pxi.evictions, 0);
    assert_int_equal(pxi.cached, 4);
    grow_evicting(&z, 4, 1);
    assert_int_equal(kv.owner[3], RT_KVC_CACHED);
    assert_int_equal(pxi.children[3], 0);
    grow_evicting(&z, 3, 2);
    assert_int_equal(kv.owner[0], RT_KVC_CACHED);
    assert_int_equal(kv.owner[1], RT_KVC_CACHED);
    grow_evicting(&z, 1, 3);
    grow_evicting(&z, 0, 4);
    assert_int_equal(pxi.cached, 0);
    assert_int_equal(pxi.evictable, 0);
    kvc_seq_free(&kv, &z);
    assert_empty();
}

/* X's 3 idle blocks, but F's reservation leaves 2 unreserved: taking all 3 would take a
   block F was promised, so the hit is cut to 2, and F's growth evicts the third. */
static void test_prefix_hit_cut(void **state)
{
    (void)state;
    static const uint64_t h[] = { 1, 2, 3, 9 };
    const struct rt_kv_prefix p = prompt(h, 4, 16, 50), none = prompt(NULL, 0, 0, 96);
    struct rt_kv_seq x, f, x2;
    uint32_t ids[4], idf[8];
    setup_px(16, 8, 200);
    assert_int_equal(prefill_publish(&x, 0, 50, &p, 0), 3);
    kvc_seq_block_ids(&kv, &x, ids, 4);
    kvc_seq_free(&kv, &x);
    assert_int_equal(kvc_prefix_hit(&kv, &p), 3);
    admit_hit(&f, 1, 96, &none, 0);
    assert_int_equal(f.reserved, 6);
    assert_int_equal(kv.unreserved, 2);
    admit_hit(&x2, 2, 50, &p, 2);  /* kvc_prefix_hit says 2 as well */
    assert_int_equal(x2.reserved, 0);  /* nothing unreserved left: the rest in the ring */
    assert_int_not_equal(x2.ring_row, RT_KVC_NO_RING);
    assert_int_equal(kv.unreserved, 0);
    assert_ok(&f, &x2, NULL, NULL);
    kvc_seq_grow(&kv, &f, 96);
    assert_int_equal(pxi.evictions, 1);
    assert_int_equal(kvc_seq_block_ids(&kv, &f, idf, 8), 6);
    assert_int_equal(idf[5], ids[2]);
    kvc_seq_grow(&kv, &x2, 50);
    assert_int_equal(x2.blocks, 0);
    assert_ok(&f, &x2, NULL, NULL);
    kvc_seq_free(&kv, &x2);
    kvc_seq_free(&kv, &f);
    assert_ok(NULL, NULL, NULL, NULL);
    assert_int_equal(kv.unreserved, 8);
}

/* Two copies of one prompt prefilled at once: the first publication wins, the second
   publishes nothing and keeps its blocks as its own; they go back to the free list with
   it while the first's stay cached. */
static void test_prefix_duplicate_publish(void **state)
{
    (void)state;
    static const uint64_t h[] = { 1, 2, 3, 9 };
    const struct rt_kv_prefix p = prompt(h, 4, 16, 50);
    struct rt_kv_seq s1, s2, s3;
    uint32_t id1[4], id2[4], id3[4];
    setup_px(16, 16, 0);
    admit_hit(&s1, 0, 50, &p, 0);
    admit_hit(&s2, 1, 50, &p, 0);
    kvc_seq_grow(&kv, &s1, 50);
    kvc_seq_grow(&kv, &s2, 50);
    assert_int_equal(kvc_seq_publish(&kv, &s1, &p), 3);
    assert_int_equal(kvc_seq_publish(&kv, &s2, &p), 0);
    assert_int_equal(kvc_seq_publish(&kv, &s2, &p), 0);  /* and again */
    assert_int_equal(s2.shared, 0);
    assert_int_equal(s2.blocks, 4);
    assert_int_equal(s2.reserved, 4);
    assert_int_equal(pxi.cached, 3);
    assert_ok(&s1, &s2, NULL, NULL);
    kvc_seq_block_ids(&kv, &s1, id1, 4);
    kvc_seq_block_ids(&kv, &s2, id2, 4);
    for (uint32_t j = 0; j < 4; j++)
        assert_int_equal(kv.owner[id2[j]], 2);
    kvc_seq_free(&kv, &s1);
    kvc_seq_free(&kv, &s2);
    assert_ok(NULL, NULL, NULL, NULL);
    assert_int_equal(pxi.cached, 3);
    assert_int_equal(pxi.evictable, 3);
    assert_int_equal(kv.free_count, 13);
    admit_hit(&s3, 2, 50, &p, 3);
    assert_int_equal(kvc_seq_block_ids(&kv, &s3, id3, 4), 3);
    assert_memory_equal(id3, id1, 3 * sizeof(id1[0]));
    kvc_seq_free(&kv, &s3);
    assert_ok(NULL, NULL, NULL, NULL);
}

/* kvc_check sees each kind of damage to the index. */
static void test_prefix_check_catches(void **state)
{
    (void)state;
    static const uint64_t ha[] = { 1, 2, 3, 9 }, hb[] = { 1, 2, 7, 8 };
    const struct rt_kv_prefix pa = prompt(ha, 4, 16, 50), pb = prompt(hb, 4, 16, 50);
    struct rt_kv_seq a, b;
    uint32_t ida[4];
    setup_px(16, 16, 0);
    assert_int_equal(prefill_publish(&a, 0, 50, &pa, 0), 3);
    admit_hit(&b, 1, 50, &pb, 2);
    kvc_seq_block_ids(&kv, &a, ida, 4);
    assert_ok(&a, &b, NULL, NULL);
    uint32_t *fields[] = { &pxi.ref[ida[0]], &pxi.children[ida[1]], &pxi.cached,
                           &pxi.evictable, &kv.unreserved };
    for (uint32_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        ++*fields[i];
        expect_corrupt(&a, &b);
        --*fields[i];
        assert_ok(&a, &b, NULL, NULL);
    }
    pxi.key[ida[2]] ^= 1;  /* filed under another key */
    expect_corrupt(&a, &b);
    pxi.key[ida[2]] ^= 1;
    kv.owner[ida[2]] = 0;  /* a cached block lost: on no list */
    expect_corrupt(&a, &b);
    kv.owner[ida[2]] = RT_KVC_CACHED;
    b.prefix_tail = ida[2];  /* a prefix that does not reach back to a prompt's start */
    expect_corrupt(&a, &b);
    b.prefix_tail = ida[1];
    assert_int_equal(check_seqs(&a, NULL, NULL, NULL), NPU_ERR_STATE);  /* b's refs */
    assert_ok(&a, &b, NULL, NULL);
    kvc_seq_free(&kv, &a);
    kvc_seq_free(&kv, &b);
    assert_ok(NULL, NULL, NULL, NULL);
}

/* ---- prefix caching under stress --------------------------------------------------------
   A model of the tokens checks the index from outside: token x of a prompt is named by its
   hash id and its place in the hash block, and a cached block remembers the fold of the
   tokens of its prompt up to its end. Every hit must hold exactly the admitted prompt's
   tokens, be as long as the cached folds allow (less what unreserved space cuts), and every
   publication must stop exactly at the first block whose tokens are cached already. */

#define PXS_SEQS 8u
#define PXS_HASHES 12u
#define PXS_IDS 64u

struct pxs_seq {
    struct rt_kv_seq kv;
    uint64_t hash[PXS_HASHES];
    struct rt_kv_prefix p;
    bool published;
};

struct pxs_stats {
    uint32_t admits, hits, hit_blocks, cuts, nomem, publishes, dups, grows;
};

static struct pxs_seq pxs[PXS_SEQS];
static uint64_t pxs_content[RT_KVC_BLOCKS_MAX];
static uint64_t pxs_unique;

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* p's tokens over positions [0, (j + 1) B), folded (block j is keyable: all named). */
static uint64_t pxs_fold(const struct rt_kv_prefix *p, uint32_t j)
{
    uint64_t c = 0;
    for (uint32_t x = 0; x < (j + 1) * kv.cfg.block_tokens; x++)
        c = mix64(c ^ mix64(p->hash[x / p->hash_block] * 131u + x % p->hash_block + 1));
    return c;
}

/* The cached block holding p's tokens up to the end of its block j, RT_KVC_NONE if none. */
static uint32_t pxs_cached(const struct rt_kv_prefix *p, uint32_t j)
{
    const uint64_t c = pxs_fold(p, j);
    for (uint32_t b = 0; b < kv.cfg.sram_blocks + kv.ring_blocks; b++)
        if (kv.owner[b] == RT_KVC_CACHED && pxs_content[b] == c)
            return b;
    return RT_KVC_NONE;
}

/* The hit the model expects: p's leading blocks that are cached, cut from the end while
   those no sequence holds are more than the unreserved blocks. */
static uint32_t pxs_expected_hit(const struct rt_kv_prefix *p, bool *cut)
{
    uint32_t chain[PXS_IDS], n = 0, idle = 0;
    const uint32_t max = kvc_prefix_blocks(&kv, p);
    while (n < max && (chain[n] = pxs_cached(p, n)) != RT_KVC_NONE)
        idle += pxi.ref[chain[n++]] == 0;
    *cut = false;
    while (idle > kv.unreserved) {
        idle -= pxi.ref[chain[--n]] == 0;
        *cut = true;
    }
    return n;
}

/* Three families of chained ids; past a random point, ids of another family at the same
   index (not chained: must not match) or fresh ones. */
static void pxs_prompt(struct pxs_seq *q, uint32_t hash_block)
{
    const uint32_t fam = lcg_next() % 3, other = (fam + 1) % 3;
    const uint32_t diverge = lcg_next() % (PXS_HASHES + 1);
    for (uint32_t i = 0; i < PXS_HASHES; i++) {
        if (i < diverge)
            q->hash[i] = fam * 100u + i + 1;
        else if (lcg_next() % 2)
            q->hash[i] = other * 100u + i + 1;
        else
            q->hash[i] = 1000000u + pxs_unique++;
    }
    uint32_t nhash = lcg_next() % 2 ? PXS_HASHES : lcg_next() % (PXS_HASHES + 1);
    q->p = prompt(q->hash, nhash, hash_block, 1 + lcg_next() % 36);
    q->published = false;
}

static void pxs_admit(struct pxs_seq *q, uint32_t id, uint32_t hash_block,
                      struct pxs_stats *st)
{
    uint32_t hit = UINT32_MAX, ids[PXS_IDS];
    bool cut;
    pxs_prompt(q, hash_block);
    const uint32_t max_len = q->p.input_len + lcg_next() % 8, unres = kv.unreserved;
    const uint32_t want = pxs_expected_hit(&q->p, &cut);
    assert_int_equal(kvc_prefix_hit(&kv, &q->p), want);
    int rc = kvc_seq_admit_prefix(&kv, &q->kv, id, max_len, &q->p, &hit);
    if (rc == NPU_ERR_NOMEM) {
        st->nomem++;
        assert_int_equal(hit, 0);
        assert_int_equal(kv.unreserved, unres);
        assert_false(q->kv.admitted);
        return;
    }
    assert_int_equal(rc, NPU_OK);
    assert_int_equal(hit, want);
    st->admits++, st->hits += hit > 0, st->hit_blocks += hit, st->cuts += cut;
    assert_int_equal(kvc_seq_block_ids(&kv, &q->kv, ids, PXS_IDS), hit);
    for (uint32_t j = 0; j < hit; j++)
        assert_true(pxs_content[ids[j]] == pxs_fold(&q->p, j));
}

/* Grows q past what it holds (the shared prefix counts as written): a prefill chunk up to
   its prompt's end, or decodes past it. */
static void pxs_grow(struct pxs_seq *q, struct pxs_stats *st)
{
    struct rt_kv_seq *s = &q->kv;
    const uint32_t b = kv.cfg.block_tokens, cached = s->shared * b;
    const uint32_t from = s->len > cached ? s->len : cached;
    const uint32_t end = from < q->p.input_len ? q->p.input_len : s->capacity;
    const uint32_t to = from + 1 + lcg_next() % (end - from);
    kvc_seq_grow(&kv, s, to);
    uint32_t want = (to + b - 1) / b - s->shared;
    assert_int_equal(s->blocks, want < s->reserved ? want : s->reserved);
    st->grows++;
}

/* Publication moves q's own blocks from block `shared` on, up to the first whose tokens
   are cached already (a twin prefilled at the same time) or the end of its own blocks. */
static void pxs_publish(struct pxs_seq *q, struct pxs_stats *st)
{
    struct rt_kv_seq *s = &q->kv;
    uint32_t ids[PXS_IDS], want = 0;
    const uint32_t n = kvc_prefix_blocks(&kv, &q->p), first = s->shared;
    kvc_seq_block_ids(&kv, s, ids, PXS_IDS);
    while (first + want < n && want < s->blocks && pxs_cached(&q->p, first + want) ==
                                                       RT_KVC_NONE)
        want++;
    st->dups += first + want < n && want < s->blocks;
    assert_int_equal(kvc_seq_publish(&kv, s, &q->p), want);
    assert_int_equal(s->shared, first + want);
    for (uint32_t j = first; j < first + want; j++) {
        assert_int_equal(kv.owner[ids[j]], RT_KVC_CACHED);
        pxs_content[ids[j]] = pxs_fold(&q->p, j);
    }
    st->publishes += want > 0;
    q->published = true;
}

static void pxs_check(void)
{
    const struct rt_kv_seq *list[PXS_SEQS];
    uint32_t n = 0, ids[PXS_IDS];
    for (uint32_t i = 0; i < PXS_SEQS; i++)
        if (pxs[i].kv.admitted) {
            list[n++] = &pxs[i].kv;
            assert_int_equal(kvc_seq_block_ids(&kv, &pxs[i].kv, ids, PXS_IDS),
                             kvc_seq_nblocks(&pxs[i].kv));
        }
    if (kvc_check(&kv, list, n, err, sizeof(err)) != NPU_OK)
        fail_msg("kvc_check: %s", err);
}

static void pxs_step(struct pxs_seq *q, uint32_t id, uint32_t hash_block, struct pxs_stats *st)
{
    const uint32_t op = lcg_next() % 8;
    struct rt_kv_seq *s = &q->kv;
    if (!s->admitted)
        pxs_admit(q, id, hash_block, st);
    else if (s->len >= q->p.input_len && !q->published && op < 3)
        pxs_publish(q, st);
    else if (op < 7 && s->len < s->capacity)
        pxs_grow(q, st);
    else
        kvc_seq_free(&kv, s);
}

/* Chunk by chunk: only blocks that end by the written positions are published, in order,
   and a later call carries on from there; a sharer admitted in between finds what is
   published so far. */
static void test_prefix_publish_upto(void **state)
{
    (void)state;
    static const uint64_t h[] = { 1, 2, 3, 4 };
    const struct rt_kv_prefix p = prompt(h, 4, 16, 64);
    struct rt_kv_seq a, b;
    setup_px(16, 16, 0);
    admit_hit(&a, 0, 70, &p, 0);
    kvc_seq_grow(&kv, &a, 24);
    assert_int_equal(kvc_seq_publish_upto(&kv, &a, &p, 24), 1);  /* block 0 only */
    assert_int_equal(kvc_seq_publish_upto(&kv, &a, &p, 24), 0);
    assert_ok(&a, NULL, NULL, NULL);
    admit_hit(&b, 1, 70, &p, 1);                                /* what there is so far */
    kvc_seq_grow(&kv, &a, 64);
    assert_int_equal(kvc_seq_publish_upto(&kv, &a, &p, 64), 2);  /* 63 / 16 = 3 in all */
    assert_ok(&a, &b, NULL, NULL);
    assert_int_equal(a.shared, 3);
    kvc_seq_free(&kv, &b);
    kvc_seq_free(&kv, &a);
    assert_ok(NULL, NULL, NULL, NULL);
    assert_int_equal(pxi.cached, 3);
}

/* The index over a paged ring too (rt_kvc_config.ring_paged): ring blocks are ids after
   the pool's and are shared and evicted like them. */
static void setup_px_paged(uint32_t block_tokens, uint32_t sram_blocks, uint64_t ring_rows)
{
    struct rt_kvc_config c = { .block_tokens = block_tokens, .sram_blocks = sram_blocks,
                               .ring_rows = ring_rows, .ring_paged = true };
    assert_int_equal(kvc_init(&kv, &c), NPU_OK);
    kvc_prefix_attach(&kv, &pxi);
}

static void run_px_stress(uint32_t seed, uint32_t block_tokens, uint32_t hash_block,
                          bool paged)
{
    struct pxs_stats st = { 0 };
    lcg_state = seed;
    memset(pxs, 0, sizeof(pxs));
    if (paged) /* 4 SRAM blocks and 8 of the ring: the same 12 in all */
        setup_px_paged(block_tokens, 4, 8 * block_tokens + block_tokens / 2);
    else
        setup_px(block_tokens, 12, 120);
    for (uint32_t step = 0; step < 4000; step++) {
        const uint32_t i = lcg_next() % PXS_SEQS;
        pxs_step(&pxs[i], i, hash_block, &st);
        pxs_check();
    }
    for (uint32_t i = 0; i < PXS_SEQS; i++)
        if (pxs[i].kv.admitted)
            kvc_seq_free(&kv, &pxs[i].kv);
    pxs_check();
    /* Only idle cached blocks are left, and they are all unreserved. */
    assert_int_equal(kvc_blocks_used(&kv) + kvc_ring_rows_used(&kv) / block_tokens,
                     pxi.cached);
    assert_int_equal(pxi.evictable, pxi.cached);
    assert_int_equal(kv.unreserved, 12);
    /* The stress must have reached the interesting paths. */
    /* (Without segments every reservation is of blocks, so cut hits are rare when paged.) */
    if (!(st.hits > 150 && st.publishes > 30 && st.nomem > 100 && (paged || st.cuts > 10) &&
          st.dups > 2 && pxi.evictions > 50))
        fail_msg("seed %u: hits %u publishes %u nomem %u cuts %u dups %u evictions %llu",
                 seed, (unsigned)st.hits, (unsigned)st.publishes, (unsigned)st.nomem,
                 (unsigned)st.cuts, (unsigned)st.dups, (unsigned long long)pxi.evictions);
}

static void test_prefix_stress(void **state)
{
    (void)state;
    run_px_stress(31u, 4, 4, false);
    run_px_stress(32u, 4, 8, false);   /* blocks inside hash blocks */
    run_px_stress(33u, 8, 4, false);   /* blocks over two hash blocks */
    run_px_stress(34u, 4, 4, true);    /* the same over SRAM and ring blocks */
    run_px_stress(35u, 8, 4, true);
}

/* A paged ring: a sequence's positions run through SRAM blocks, then ring blocks (ids from
   sram_blocks on); a prompt's ring blocks are published and shared; freed blocks return
   to their own memory's free list, so SRAM blocks are still handed out first. */
static void test_prefix_paged_ring(void **state)
{
    (void)state;
    static const uint64_t h[] = { 1, 2, 3, 4, 5 };
    const struct rt_kv_prefix p = prompt(h, 5, 16, 80);
    struct rt_kv_seq a, b;
    uint32_t ids[8];
    setup_px_paged(16, 2, 64 + 8);           /* 2 SRAM blocks, 4 of the ring (8 rows spare) */
    assert_int_equal(kv.ring_blocks, 4);
    assert_true(kvc_seq_fits_ever(&kv, 96) && !kvc_seq_fits_ever(&kv, 97));
    assert_int_equal(prefill_publish(&a, 0, 81, &p, 0), 4);  /* 79 / 16 */
    assert_int_equal(kvc_seq_block_ids(&kv, &a, ids, 8), 5);  /* 80 positions */
    const uint32_t want[] = { 0, 1, 2, 3, 4, 5 };
    assert_memory_equal(ids, want, 5 * sizeof(uint32_t));
    assert_int_equal(a.ring_row, RT_KVC_NO_RING);
    assert_int_equal(kvc_blocks_used(&kv), 2);
    assert_int_equal(kvc_ring_rows_used(&kv), 48);
    assert_ok(&a, NULL, NULL, NULL);
    kvc_seq_free(&kv, &a);                   /* block 4 back, 0..3 cached and idle */
    assert_ok(NULL, NULL, NULL, NULL);
    admit_hit(&b, 1, 81, &p, 4);             /* SRAM and ring blocks shared */
    kvc_seq_grow(&kv, &b, 81);
    assert_int_equal(kvc_seq_block_ids(&kv, &b, ids, 8), 6);
    assert_memory_equal(ids, want, sizeof(want)); /* its own: the ring's free 4 and 5 */
    assert_int_equal(kvc_ring_rows_used(&kv), 64);
    assert_ok(&b, NULL, NULL, NULL);
    kvc_seq_free(&kv, &b);
    assert_ok(NULL, NULL, NULL, NULL);
    assert_int_equal(kv.unreserved, 6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefix_off_is_admit),
        cmocka_unit_test(test_prefix_publish_then_hit),
        cmocka_unit_test(test_prefix_last_position),
        cmocka_unit_test(test_prefix_mismatch_in_block),
        cmocka_unit_test(test_prefix_parent_chain),
        cmocka_unit_test(test_prefix_many_parents),
        cmocka_unit_test(test_prefix_refcounts),
        cmocka_unit_test(test_prefix_evict_lru),
        cmocka_unit_test(test_prefix_hit_cut),
        cmocka_unit_test(test_prefix_duplicate_publish),
        cmocka_unit_test(test_prefix_check_catches),
        cmocka_unit_test(test_prefix_stress),
        cmocka_unit_test(test_prefix_paged_ring),
        cmocka_unit_test(test_prefix_publish_upto),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
