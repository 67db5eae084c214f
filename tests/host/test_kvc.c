/* SPDX-License-Identifier: MIT */
/*
 * Host unit tests of the KV-cache manager (runtime/core/src/kvc.c).
 * Covers: bad configurations refused; admit/grow/free round trips with block ids in position
 * order; exact accounting (blocks == min(reserved, ceil(len / B)) after every grow); spill
 * of what SRAM cannot reserve into an HBM ring segment; ring wrap-around and FIFO
 * reclamation with frees out of order; NOMEM taking nothing and succeeding after a free;
 * never-fits refused with RANGE; kvc_check catching hand-made corruptions; a fixed-seed
 * LCG stress of admit/grow/free with kvc_check after every step and nothing leaked.
 * Prefix caching is test_kvc_prefix.c.
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

static void test_init_refuses(void **state)
{
    (void)state;
    struct rt_kvc_config c = { .block_tokens = 0, .sram_blocks = 4, .ring_rows = 0 };
    assert_int_equal(kvc_init(&kv, &c), NPU_ERR_RANGE);
    c.block_tokens = 16;
    c.sram_blocks = RT_KVC_BLOCKS_MAX + 1;
    assert_int_equal(kvc_init(&kv, &c), NPU_ERR_RANGE);
    c.sram_blocks = RT_KVC_BLOCKS_MAX;
    assert_int_equal(kvc_init(&kv, &c), NPU_OK);
    assert_empty();
    setup_kvc(16, 0, 0);  /* no SRAM, no ring: nothing fits but an empty sequence */
    assert_false(kvc_seq_fits_ever(&kv, 1));
    assert_true(kvc_seq_fits_ever(&kv, 0));
}

static void test_round_trip(void **state)
{
    (void)state;
    struct rt_kv_seq a, b;
    uint32_t ids[8];
    setup_kvc(4, 16, 0);
    assert_int_equal(kvc_seq_admit(&kv, &a, 7, 10), NPU_OK);
    assert_true(a.admitted);
    assert_int_equal(a.reserved, 3);
    assert_int_equal(a.blocks, 0);
    assert_int_equal(a.ring_row, RT_KVC_NO_RING);
    assert_int_equal(kv.unreserved, 13);
    assert_int_equal(kvc_blocks_used(&kv), 0);
    kvc_seq_grow(&kv, &a, 5);
    assert_int_equal(a.blocks, 2);
    assert_int_equal(kvc_seq_admit(&kv, &b, 3, 8), NPU_OK);
    kvc_seq_grow(&kv, &b, 8);
    kvc_seq_grow(&kv, &a, 10);
    assert_int_equal(a.blocks, 3);
    assert_int_equal(kvc_blocks_used(&kv), 5);
    assert_ok(&a, &b, NULL, NULL);
    /* a took 0, 1, then b took 2, 3, then a took 4: lists keep position order. */
    assert_int_equal(kvc_seq_block_ids(&kv, &a, ids, 8), 3);
    assert_int_equal(ids[0], 0);
    assert_int_equal(ids[1], 1);
    assert_int_equal(ids[2], 4);
    assert_int_equal(kvc_seq_block_ids(&kv, &b, ids, 1), 1);  /* max respected */
    assert_int_equal(ids[0], 2);
    assert_int_equal(kv.owner[0], 8);
    assert_int_equal(kv.owner[4], 8);
    assert_int_equal(kv.owner[2], 4);
    kvc_seq_free(&kv, &a);
    assert_false(a.admitted);
    assert_int_equal(a.blocks, 0);
    assert_int_equal(a.head, RT_KVC_NONE);
    assert_ok(&b, NULL, NULL, NULL);
    kvc_seq_free(&kv, &b);
    assert_empty();
    /* Admitting again after a full round trip works the same. */
    assert_int_equal(kvc_seq_admit(&kv, &a, 7, 64), NPU_OK);
    kvc_seq_grow(&kv, &a, 64);
    assert_int_equal(a.blocks, 16);
    assert_int_equal(kvc_blocks_used(&kv), 16);
    assert_ok(&a, NULL, NULL, NULL);
    kvc_seq_free(&kv, &a);
    assert_empty();
}

static void test_exact_accounting(void **state)
{
    (void)state;
    struct rt_kv_seq a, b;
    setup_kvc(8, 10, 1000);
    assert_int_equal(kvc_seq_admit(&kv, &a, 0, 37), NPU_OK);  /* 5 blocks, all in SRAM */
    assert_int_equal(kvc_seq_admit(&kv, &b, 1, 70), NPU_OK);  /* 9 needed, 5 left: spills */
    assert_int_equal(a.reserved, 5);
    assert_int_equal(b.reserved, 5);
    assert_int_not_equal(b.ring_row, RT_KVC_NO_RING);
    for (uint32_t len = 0; len <= 70; len++) {
        if (len <= 37)
            kvc_seq_grow(&kv, &a, len);
        kvc_seq_grow(&kv, &b, len);
        uint32_t wa = ((len < 37 ? len : 37) + 7) / 8, wb = (len + 7) / 8;
        assert_int_equal(a.blocks, wa);
        assert_int_equal(b.blocks, wb < 5 ? wb : 5);  /* capped by its reservation */
        assert_int_equal(kv.free_count, 10 - a.blocks - b.blocks);
        assert_int_equal(kv.unreserved, 0);
        assert_ok(&a, &b, NULL, NULL);
    }
    kvc_seq_grow(&kv, &b, 3);  /* never shrinks */
    assert_int_equal(b.len, 70);
    assert_int_equal(b.blocks, 5);
    kvc_seq_free(&kv, &b);
    kvc_seq_free(&kv, &a);
    assert_empty();
}

static void test_spill_to_ring(void **state)
{
    (void)state;
    struct rt_kv_seq a, b, c;
    setup_kvc(4, 4, 100);
    assert_int_equal(kvc_seq_admit(&kv, &a, 0, 12), NPU_OK);
    assert_int_equal(a.reserved, 3);
    assert_int_equal(a.ring_row, RT_KVC_NO_RING);
    /* Needs 3 blocks, 1 unreserved: keeps that one, the rest goes to a 10-row segment. */
    assert_int_equal(kvc_seq_admit(&kv, &b, 1, 10), NPU_OK);
    assert_int_equal(b.reserved, 1);
    assert_int_equal(b.ring_row, 0);
    assert_int_equal(b.ring_rows, 10);
    assert_int_equal(kv.unreserved, 0);
    assert_int_equal(kvc_ring_rows_used(&kv), 10);
    /* Nothing left in SRAM: reserves 0 blocks, all in the ring. */
    assert_int_equal(kvc_seq_admit(&kv, &c, 2, 8), NPU_OK);
    assert_int_equal(c.reserved, 0);
    assert_int_equal(c.ring_row, 10);
    assert_int_equal(kvc_ring_rows_used(&kv), 18);
    kvc_seq_grow(&kv, &a, 12);
    kvc_seq_grow(&kv, &b, 10);
    kvc_seq_grow(&kv, &c, 8);
    assert_int_equal(b.blocks, 1);
    assert_int_equal(c.blocks, 0);
    assert_int_equal(kvc_blocks_used(&kv), 4);
    assert_ok(&a, &b, &c, NULL);
    kvc_seq_free(&kv, &b);
    assert_int_equal(kvc_ring_rows_used(&kv), 8);
    assert_ok(&a, &c, NULL, NULL);
    kvc_seq_free(&kv, &c);
    kvc_seq_free(&kv, &a);
    assert_empty();
}

static void admit_at(struct rt_kv_seq *s, uint32_t id, uint32_t len, uint64_t row)
{
    assert_int_equal(kvc_seq_admit(&kv, s, id, len), NPU_OK);
    assert_int_equal(s->ring_row, row);
}

static void test_ring_wrap_fifo(void **state)
{
    (void)state;
    struct rt_kv_seq a, b, c, d, e, f;
    setup_kvc(4, 0, 100);  /* no SRAM: everything goes to the ring */
    admit_at(&a, 0, 40, 0);
    admit_at(&b, 1, 30, 40);
    admit_at(&c, 2, 20, 70);
    assert_int_equal(kv.ring_head, 90);
    assert_int_equal(kvc_seq_admit(&kv, &d, 3, 20), NPU_ERR_NOMEM);  /* 10 at the end */
    kvc_seq_free(&kv, &b);  /* out of order: dead but not reclaimed behind a */
    assert_int_equal(kv.nsegs, 3);
    assert_int_equal(kvc_ring_rows_used(&kv), 60);
    assert_ok(&a, &c, NULL, NULL);
    assert_int_equal(kvc_seq_admit(&kv, &d, 3, 20), NPU_ERR_NOMEM);
    assert_ok(&a, &c, NULL, NULL);
    kvc_seq_free(&kv, &a);  /* reclaims a and the dead b */
    assert_int_equal(kv.nsegs, 1);
    admit_at(&d, 3, 20, 0);  /* wraps */
    admit_at(&e, 4, 50, 20); /* exactly up to the oldest (c at 70) */
    assert_ok(&c, &d, &e, NULL);
    assert_int_equal(kvc_seq_admit(&kv, &f, 5, 1), NPU_ERR_NOMEM);  /* full */
    kvc_seq_free(&kv, &c);
    admit_at(&f, 5, 30, 70);  /* oldest is d at 0 again: not wrapped, fits to the end */
    assert_ok(&d, &e, &f, NULL);
    kvc_seq_free(&kv, &e);
    kvc_seq_free(&kv, &f);
    assert_int_equal(kv.nsegs, 3);  /* d still holds the front */
    assert_ok(&d, NULL, NULL, NULL);
    kvc_seq_free(&kv, &d);
    assert_empty();
}

static void test_nomem_then_succeeds(void **state)
{
    (void)state;
    struct rt_kv_seq a, b;
    setup_kvc(4, 4, 6);
    assert_int_equal(kvc_seq_admit(&kv, &a, 0, 16), NPU_OK);
    memset(&b, 0, sizeof(b));
    /* 8 positions: 2 blocks fit an empty pool, so it waits; the ring (6 rows) is too small. */
    assert_true(kvc_seq_fits_ever(&kv, 8));
    assert_int_equal(kvc_seq_admit(&kv, &b, 1, 8), NPU_ERR_NOMEM);
    assert_false(b.admitted);
    assert_int_equal(kv.unreserved, 0);
    assert_int_equal(kvc_ring_rows_used(&kv), 0);
    assert_ok(&a, NULL, NULL, NULL);
    /* 6 positions fit the ring now. */
    assert_int_equal(kvc_seq_admit(&kv, &b, 1, 6), NPU_OK);
    assert_int_equal(b.ring_row, 0);
    kvc_seq_free(&kv, &b);
    assert_int_equal(kvc_seq_admit(&kv, &b, 1, 8), NPU_ERR_NOMEM);
    kvc_seq_grow(&kv, &a, 16);
    kvc_seq_free(&kv, &a);
    assert_int_equal(kvc_seq_admit(&kv, &b, 1, 8), NPU_OK);
    assert_int_equal(b.reserved, 2);
    assert_ok(&b, NULL, NULL, NULL);
    kvc_seq_free(&kv, &b);
    assert_empty();
}

static void test_never_fits(void **state)
{
    (void)state;
    struct rt_kv_seq a;
    setup_kvc(4, 4, 10);
    assert_true(kvc_seq_fits_ever(&kv, 16));   /* 4 blocks */
    assert_false(kvc_seq_fits_ever(&kv, 17));  /* 5 blocks and more than the ring */
    assert_int_equal(kvc_seq_admit(&kv, &a, 0, 17), NPU_ERR_RANGE);
    assert_int_equal(kvc_ring_rows_used(&kv), 0);
    assert_empty();
    setup_kvc(4, 4, 17);
    assert_true(kvc_seq_fits_ever(&kv, 17));   /* the ring alone holds it */
    assert_int_equal(kvc_seq_admit(&kv, &a, 0, 17), NPU_OK);
    assert_int_equal(a.reserved, 4);
    kvc_seq_free(&kv, &a);
    assert_empty();
}


/* Split attention: blocks are stripes of 32 positions dealt over 8 cores (4 each); a
   segment holds a core's own rows, ceil(len / 32) x 4, and the ring's size is in those. */
static void test_split_ranks(void **state)
{
    (void)state;
    struct rt_kv_seq a, b;
    struct rt_kvc_config c = { .block_tokens = 32, .sram_blocks = 2, .ring_rows = 12,
                               .ranks = 5 };
    assert_int_equal(kvc_init(&kv, &c), NPU_ERR_RANGE); /* 32 positions over 5 cores */
    c.ranks = 8;
    assert_int_equal(kvc_init(&kv, &c), NPU_OK);
    assert_int_equal(kvc_ring_rows_for(&kv, 1), 4);
    assert_int_equal(kvc_ring_rows_for(&kv, 33), 8);
    assert_true(kvc_seq_fits_ever(&kv, 96));   /* 3 stripes: 12 rows of the ring */
    assert_false(kvc_seq_fits_ever(&kv, 97));  /* 4 stripes: 16 rows, and only 2 blocks */
    assert_int_equal(kvc_seq_admit(&kv, &a, 0, 40), NPU_OK);
    assert_int_equal(a.reserved, 2);
    assert_int_equal(a.ring_row, RT_KVC_NO_RING);
    assert_int_equal(kvc_seq_admit(&kv, &b, 1, 70), NPU_OK); /* no block left: 3 stripes */
    assert_int_equal(b.ring_row, 0);
    assert_int_equal(b.ring_rows, 12);
    kvc_seq_grow(&kv, &a, 40);
    kvc_seq_grow(&kv, &b, 70);
    assert_ok(&a, &b, NULL, NULL);
    b.ring_rows = 70; /* a segment sized in positions, not rows, is caught */
    expect_corrupt(&a, &b);
    b.ring_rows = 12;
    kvc_seq_free(&kv, &b);
    kvc_seq_free(&kv, &a);
    assert_empty();
}


/* a: 2 of 3 reserved blocks; b: 5 blocks and a 40-row segment; 1 block free. */
static void setup_two(struct rt_kv_seq *a, struct rt_kv_seq *b)
{
    setup_kvc(4, 8, 100);
    assert_int_equal(kvc_seq_admit(&kv, a, 0, 12), NPU_OK);
    assert_int_equal(kvc_seq_admit(&kv, b, 1, 40), NPU_OK);
    kvc_seq_grow(&kv, a, 8);
    kvc_seq_grow(&kv, b, 30);
    assert_ok(a, b, NULL, NULL);
}

static void test_check_catches_links(void **state)
{
    (void)state;
    struct rt_kv_seq a, b;
    setup_two(&a, &b);
    /* A free block double-linked onto a's list. */
    uint32_t saved = kv.next[a.tail];
    kv.next[a.tail] = kv.free_head;
    expect_corrupt(&a, &b);
    kv.next[a.tail] = saved;
    /* One of b's blocks also linked after a's tail. */
    kv.next[a.tail] = b.head;
    expect_corrupt(&a, &b);
    kv.next[a.tail] = saved;
    /* A loop in the free list. */
    uint32_t last = kv.free_head;
    while (kv.next[last] != RT_KVC_NONE)
        last = kv.next[last];
    kv.next[last] = kv.free_head;
    expect_corrupt(&a, &b);
    kv.next[last] = RT_KVC_NONE;
    assert_ok(&a, &b, NULL, NULL);
    kv.owner[a.head] = 2;  /* a block of a's list owned by b */
    expect_corrupt(&a, &b);
    kv.owner[a.head] = 1;
    /* A sequence left out: its blocks are on no list. */
    expect_corrupt(&a, NULL);
    kvc_seq_free(&kv, &a);
    kvc_seq_free(&kv, &b);
    assert_empty();
}

static void test_check_catches_counts(void **state)
{
    (void)state;
    struct rt_kv_seq a, b;
    setup_two(&a, &b);
    kv.free_count++;
    expect_corrupt(&a, &b);
    kv.free_count--;
    a.blocks--;
    expect_corrupt(&a, &b);
    a.blocks++;
    kv.unreserved++;
    expect_corrupt(&a, &b);
    kv.unreserved--;
    kv.ring_used--;
    expect_corrupt(&a, &b);
    kv.ring_used++;
    kv.segs[kv.seg_first].row = 80;  /* runs past the ring's end */
    expect_corrupt(&a, &b);
    kv.segs[kv.seg_first].row = 0;
    b.ring_row = 5;
    expect_corrupt(&a, &b);
    b.ring_row = 0;
    /* One left out that holds only a ring segment: a live segment nobody owns. */
    struct rt_kv_seq c;
    assert_int_equal(kvc_seq_admit(&kv, &c, 2, 10), NPU_OK);
    assert_int_equal(c.reserved, 0);
    assert_ok(&a, &b, &c, NULL);
    expect_corrupt(&a, &b);
    /* c's segment [40, 50) moved to overlap b's [0, 40). */
    struct rt_kvc_seg *g = &kv.segs[(kv.seg_first + 1) % RT_KVC_SEGS_MAX];
    assert_int_equal(g->row, 40);
    g->row = c.ring_row = 35;
    kv.ring_head = 45;
    assert_int_equal(check_seqs(&a, &b, &c, NULL), NPU_ERR_STATE);
    g->row = c.ring_row = 40;
    kv.ring_head = 50;
    assert_ok(&a, &b, &c, NULL);
    kvc_seq_free(&kv, &c);
    assert_ok(&a, &b, NULL, NULL);
    kvc_seq_free(&kv, &a);
    kvc_seq_free(&kv, &b);
    assert_empty();
}

/* ---- stress ------------------------------------------------------------------------------ */

#define STRESS_SEQS 24u


static void stress_check(struct rt_kv_seq *seqs)
{
    const struct rt_kv_seq *list[STRESS_SEQS];
    uint32_t n = 0, ids[RT_KVC_BLOCKS_MAX];
    for (uint32_t i = 0; i < STRESS_SEQS; i++)
        if (seqs[i].admitted) {
            list[n++] = &seqs[i];
            assert_int_equal(kvc_seq_block_ids(&kv, &seqs[i], ids, RT_KVC_BLOCKS_MAX),
                             seqs[i].blocks);
        }
    if (kvc_check(&kv, list, n, err, sizeof(err)) != NPU_OK)
        fail_msg("kvc_check: %s", err);
}

static void stress_admit(struct rt_kv_seq *s, uint32_t id, uint32_t *nomem, uint32_t *spills)
{
    uint32_t max_len = 1 + lcg_next() % 150;
    uint32_t free_before = kv.free_count, unres_before = kv.unreserved;
    uint64_t ring_before = kv.ring_used;
    int rc = kvc_seq_admit(&kv, s, id, max_len);
    if (!kvc_seq_fits_ever(&kv, max_len)) {
        assert_int_equal(rc, NPU_ERR_RANGE);
    } else if (rc == NPU_ERR_NOMEM) {
        (*nomem)++;
        assert_false(s->admitted);
        assert_int_equal(kv.unreserved, unres_before);
        assert_int_equal(kv.ring_used, ring_before);
    } else {
        assert_int_equal(rc, NPU_OK);
        *spills += s->ring_row != RT_KVC_NO_RING;
        assert_int_equal(s->capacity, max_len);
    }
    assert_int_equal(kv.free_count, free_before);
}

static void run_stress(uint32_t seed, uint32_t block_tokens, uint32_t blocks, uint64_t ring)
{
    static struct rt_kv_seq seqs[STRESS_SEQS];
    uint32_t nomem = 0, spills = 0, grows = 0;
    lcg_state = seed;
    memset(seqs, 0, sizeof(seqs));
    setup_kvc(block_tokens, blocks, ring);
    for (uint32_t step = 0; step < 20000; step++) {
        struct rt_kv_seq *s = &seqs[lcg_next() % STRESS_SEQS];
        uint32_t op = lcg_next() % 8;
        if (!s->admitted) {
            stress_admit(s, (uint32_t)(s - seqs), &nomem, &spills);
        } else if (op < 5 && s->len < s->capacity) {
            uint32_t len = s->len + 1 + lcg_next() % (s->capacity - s->len);
            kvc_seq_grow(&kv, s, len);
            uint32_t want = (len + block_tokens - 1) / block_tokens;
            assert_int_equal(s->blocks, want < s->reserved ? want : s->reserved);
            grows++;
        } else {
            kvc_seq_free(&kv, s);
        }
        stress_check(seqs);
    }
    for (uint32_t i = 0; i < STRESS_SEQS; i++)
        if (seqs[i].admitted)
            kvc_seq_free(&kv, &seqs[i]);
    assert_empty();
    /* The stress must have reached the interesting paths. */
    assert_true(nomem > 50);
    assert_true(spills > 50);
    assert_true(grows > 1000);
}

static void test_stress(void **state)
{
    (void)state;
    run_stress(12345u, 4, 64, 400);
    run_stress(777u, 16, 20, 1000);
    run_stress(2024u, 1, 100, 300);
}

/* ---- prefix caching (kvc_prefix.c) ------------------------------------------------------ */

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_refuses),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_exact_accounting),
        cmocka_unit_test(test_spill_to_ring),
        cmocka_unit_test(test_ring_wrap_fifo),
        cmocka_unit_test(test_nomem_then_succeeds),
        cmocka_unit_test(test_never_fits),
        cmocka_unit_test(test_split_ranks),
        cmocka_unit_test(test_check_catches_links),
        cmocka_unit_test(test_check_catches_counts),
        cmocka_unit_test(test_stress),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
