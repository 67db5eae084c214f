/* SPDX-License-Identifier: MIT */
/*
 * The interpreter's hazard tracker (firmware/interp/hazard/src/model_hazard.c), built for
 * the host with the HAL's semaphore functions stubbed, against a brute-force reference: the
 * window and the second DMA queue's load table kept as plain lists, every pair of ranges
 * tested. The tracker has a ring with a free slot, masks of the granules a descriptor
 * touches and per-engine scans that stop early; none of these is in the reference.
 *
 * Contract, per descriptor of engine e and every other engine x (w: the count of x's
 * descriptors it waits for, in the descriptor's two waits or the hart's):
 * - w covers every earlier descriptor of x that conflicts with it and is not complete (the
 *   engine's semaphore tells), from the whole history: the chip's correctness;
 * - w is never more than the reference's need (the newest conflicting descriptor in the
 *   window or the load table, or the newest that left them, + 1), unless x has completed
 *   w anyway: no overlap lost;
 * - with engines that complete nothing on their own and no flushes, w is that need exactly.
 * Loads of the second queue read weights no descriptor writes, into 40 slots: the table
 * keeps the latest load into each destination (the one before is covered by it).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "model_hazard.h"
#include "npu/hal.h"
#include "npu/wait.h"

#define WINDOW 128u
#define LOADS 32u
#define MAXD 6000u

struct hal_core_info hal_self_data;
static const uint32_t sem_of[HZ_ENGINES] = { 8, 9, 10, 11 };
static uint32_t sem_value[HZ_ENGINES]; /* what each engine has completed */
static uint32_t hart_wait[HZ_ENGINES]; /* the hart's last wait per engine (0: none) */
static uint32_t submits;

static int engine_of_sem(uint32_t sem)
{
    for (int x = 0; x < HZ_ENGINES; x++)
        if (sem_of[x] == sem)
            return x;
    fail_msg("semaphore %u is no engine's", sem);
    return 0;
}

uint32_t hal_sem_read(uint32_t sem)
{
    return sem_value[engine_of_sem(sem)];
}

int hal_sem_wait(uint32_t sem, uint32_t value)
{
    const int x = engine_of_sem(sem);
    hart_wait[x] = value;
    sem_value[x] = value > sem_value[x] ? value : sem_value[x]; /* the engine got there */
    return NPU_OK;
}

static void submit_stub(void)
{
    submits++;
}

/* The reference: every descriptor's engine, access and number; the window as a plain list
   of the descriptors (not of the second DMA queue) that may still matter, oldest first. */
static struct ref {
    enum hz_engine e;
    struct hz_access a;
    uint32_t seq;
} refs[MAXD];
static uint32_t nrefs, issued[HZ_ENGINES], last_main[HZ_ENGINES];
static uint32_t win[MAXD], nwin, evicted[HZ_ENGINES];

/* A descriptor of the window's engines enters; past WINDOW the oldest leaves, and every
   later descriptor of its engine waits for it. */
static void ref_window_add(uint32_t i)
{
    win[nwin++] = i;
    if (nwin > WINDOW) {
        const struct ref *old = &refs[win[0]];
        evicted[old->e] = old->seq + 1 > evicted[old->e] ? old->seq + 1 : evicted[old->e];
        memmove(win, win + 1, --nwin * sizeof(win[0]));
    }
}

/* A flush completes each engine's descriptors up to its last main one: those leave the
   window (side ones after them stay), and so does what left it before. */
static void ref_flush(void)
{
    uint32_t kept = 0;
    for (uint32_t i = 0; i < nwin; i++)
        if (refs[win[i]].seq + 1 > last_main[refs[win[i]].e])
            win[kept++] = win[i];
    nwin = kept;
    for (uint32_t x = 0; x < HZ_ENGINES; x++)
        evicted[x] = evicted[x] > last_main[x] ? evicted[x] : 0;
}

static bool overlap(struct hz_range a, struct hz_range b)
{
    return a.lo < a.hi && b.lo < b.hi && a.lo < b.hi && b.lo < a.hi;
}

/* b (later) must wait for a: b reads what a writes, or writes what a reads or writes. */
static bool ref_conflict(const struct hz_access *a, const struct hz_access *b)
{
    for (uint32_t i = 0; i < HZ_WRITES; i++) {
        for (uint32_t j = 0; j < HZ_READS; j++)
            if (overlap(a->wr[i], b->rd[j]) || overlap(a->rd[j], b->wr[i]))
                return true;
        for (uint32_t j = 0; j < HZ_WRITES; j++)
            if (overlap(a->wr[i], b->wr[j]))
                return true;
    }
    return false;
}

static uint64_t writes_lo(const struct hz_access *a)
{
    uint64_t lo = UINT64_MAX;
    for (uint32_t i = 0; i < HZ_WRITES; i++)
        lo = a->wr[i].lo < a->wr[i].hi && a->wr[i].lo < lo ? a->wr[i].lo : lo;
    return lo == UINT64_MAX ? 0 : lo;
}

/* need[x] for engine x's descriptors (x != DMA2): the newest conflicting one in the window,
   or the newest that left it. */
static uint32_t ref_need_window(uint32_t x, const struct hz_access *a)
{
    uint32_t need = evicted[x];
    for (uint32_t i = 0; i < nwin; i++) {
        const struct ref *r = &refs[win[i]];
        if (r->e == (enum hz_engine)x && ref_conflict(&r->a, a) && r->seq + 1 > need)
            need = r->seq + 1;
    }
    return need;
}

/* need[DMA2]: the latest load into each destination, the LOADS most recent destinations
   kept; a load replaced by one into another destination counts as left the table. */
static uint32_t ref_need_loads(const struct hz_access *a)
{
    uint64_t dst[MAXD];
    uint32_t ndst = 0, need = 0, gone = 0;
    uint32_t latest[MAXD];
    for (uint32_t i = 0; i < nrefs; i++) { /* replay the table in issue order */
        if (refs[i].e != HZ_DMA2)
            continue;
        const uint64_t d = writes_lo(&refs[i].a);
        uint32_t k = 0;
        while (k < ndst && dst[k] != d)
            k++;
        if (k == ndst && ndst == LOADS) { /* the oldest latest load leaves */
            uint32_t old = 0;
            for (uint32_t j = 1; j < ndst; j++)
                old = refs[latest[j]].seq < refs[latest[old]].seq ? j : old;
            gone = refs[latest[old]].seq + 1 > gone ? refs[latest[old]].seq + 1 : gone;
            k = old;
        } else if (k == ndst) {
            ndst++;
        }
        dst[k] = d, latest[k] = i;
    }
    need = gone;
    for (uint32_t k = 0; k < ndst; k++)
        if (ref_conflict(&refs[latest[k]].a, a) && refs[latest[k]].seq + 1 > need)
            need = refs[latest[k]].seq + 1;
    return need;
}

/* The wait engine x gets in sync s (or the hart's), 0 if none. */
static uint32_t wait_for_engine(const struct engine_sync *s, uint32_t x)
{
    if (s->wait && s->wait_sem == sem_of[x])
        return s->wait_value;
    if (s->wait2 && s->wait2_sem == sem_of[x])
        return s->wait2_value;
    return hart_wait[x];
}

static uint64_t rnd_state;
static uint32_t rnd(uint32_t n)
{
    rnd_state = rnd_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rnd_state >> 33) % n;
}

/* A range in a 16 MiB region (16 KiB granules alias every 1 MiB), a quarter of them in
   "HBM"; one in eight up to 8 MiB long (the 512 KiB masks' long runs). */
static struct hz_range rnd_range(void)
{
    if (rnd(3) == 0)
        return (struct hz_range){ 0, 0 };
    const uint64_t base = rnd(4) == 0 ? 0x400000000ull : 0x100000ull;
    const uint64_t lo = base + (uint64_t)rnd(16u << 20) / 64 * 64;
    const uint64_t len = rnd(8) == 0 ? rnd(8u << 20) + 1 : rnd(96u << 10) + 1;
    return (struct hz_range){ lo, lo + len };
}

/* One descriptor: the tracker's sync against the reference; `side` for a descriptor of
   the window's engines that a flush does not wait for (it stays in the window after it). */
static void one_side(enum hz_engine e, bool advance, bool side)
{
    struct hz_access a;
    memset(&a, 0, sizeof(a));
    for (uint32_t i = 0; i < HZ_READS; i++)
        a.rd[i] = i < 2 ? rnd_range() : (struct hz_range){ 0, 0 };
    a.wr[0] = rnd_range();
    if (e == HZ_DMA2) { /* a load of weights, which no descriptor writes, into one of 40
                           slots of 32 KiB: the table keeps the latest load into each (the
                           next into a slot covers the one before: model_hazard.c) */
        const uint64_t slot = 0x100000ull + rnd(40) * 0x10000, w = 0xc00000000ull + rnd(64) * 0x8000;
        a.wr[0] = (struct hz_range){ slot, slot + 0x8000 };
        a.rd[0] = (struct hz_range){ w, w + 0x8000 }, a.rd[1] = (struct hz_range){ 0, 0 };
    }
    uint32_t need[HZ_ENGINES], safe[HZ_ENGINES];
    for (uint32_t x = 0; x < HZ_ENGINES; x++) {
        need[x] = x == (uint32_t)e ? 0 : x == HZ_DMA2 ? ref_need_loads(&a) : ref_need_window(x, &a);
        safe[x] = 0; /* the newest conflicting descriptor of x not complete, + 1 */
        for (uint32_t i = 0; x != (uint32_t)e && i < nrefs; i++)
            if (refs[i].e == (enum hz_engine)x && refs[i].seq + 1 > sem_value[x] &&
                refs[i].seq + 1 > safe[x] && ref_conflict(&refs[i].a, &a))
                safe[x] = refs[i].seq + 1;
    }
    memset(hart_wait, 0, sizeof(hart_wait));
    const struct engine_sync s = hz_sync(e, &a, side || e == HZ_DMA2);
    assert_true(nrefs < MAXD); /* the reference follows before any check can fail */
    refs[nrefs] = (struct ref){ .e = e, .a = a, .seq = issued[e]++ };
    if (!side && e != HZ_DMA2)
        last_main[e] = issued[e];
    if (e != HZ_DMA2)
        ref_window_add(nrefs);
    nrefs++;
    assert_true(s.signal && s.signal_sem == sem_of[e] && s.signal_value == 1);
    for (uint32_t x = 0; x < HZ_ENGINES; x++) {
        if (x == (uint32_t)e)
            continue;
        const uint32_t w = wait_for_engine(&s, x);
        assert_true(w >= safe[x]); /* every conflict not yet complete waited for */
        if (!advance && need[x] > 0 && (w || need[x] > sem_value[x]))
            assert_int_equal(w, need[x]); /* the window's as the reference's: exactly */
        assert_true(w <= need[x] || w <= sem_value[x]); /* never for more, unless done */
    }
}

static void one(enum hz_engine e, bool advance)
{
    one_side(e, advance, false);
}

/* The tracker emptied (every descriptor complete: hz_wait_all); descriptor numbers go on
   from where the last test left them, in the tracker as in issued[]. */
static void reset(void)
{
    nrefs = nwin = 0;
    memset(evicted, 0, sizeof(evicted));
    memcpy(last_main, issued, sizeof(last_main));
    hz_set_submit(submit_stub);
    assert_int_equal(hz_wait_all(), NPU_OK);
    memset(hart_wait, 0, sizeof(hart_wait));
}

/* Engines that never complete on their own: every conflict in the window is waited for. */
static void test_random_against_reference(void **state)
{
    (void)state;
    static const enum hz_engine engines[8] = { HZ_VECTOR, HZ_VECTOR, HZ_VECTOR, HZ_MATRIX,
                                                HZ_MATRIX, HZ_DMA, HZ_DMA, HZ_DMA2 };
    for (uint64_t seed = 1; seed <= 3; seed++) {
        rnd_state = seed;
        reset();
        for (uint32_t i = 0; i < 1500; i++)
            one(engines[rnd(8)], false);
    }
}

/* Engines that complete some of their descriptors between two, flushes, and side copies
   that a flush keeps in the window (the ring compacted around them): a wait is still given
   for every conflicting descriptor not yet complete, never for more than the reference's
   window asks unless that is done (the tracker may hold fewer entries than the reference:
   a flush also drops those it has seen complete). */
static void test_random_with_progress_and_flushes(void **state)
{
    (void)state;
    static const enum hz_engine engines[8] = { HZ_VECTOR, HZ_VECTOR, HZ_VECTOR, HZ_MATRIX,
                                                HZ_MATRIX, HZ_DMA, HZ_DMA, HZ_DMA2 };
    for (uint64_t seed = 11; seed <= 13; seed++) {
        rnd_state = seed;
        reset();
        for (uint32_t i = 0; i < 1500; i++) {
            const uint32_t x = rnd(HZ_ENGINES);
            if (rnd(3) == 0 && sem_value[x] < issued[x])
                sem_value[x] += 1 + rnd(rnd(4) ? 2 : issued[x] - sem_value[x]);
            if (rnd(40) == 0) { /* the chain flushed: the hart waits for the main ones */
                assert_int_equal(hz_wait_flush(), NPU_OK);
                for (uint32_t y = 0; y < HZ_DMA2; y++)
                    assert_true(sem_value[y] >= last_main[y]);
                ref_flush();
            }
            const enum hz_engine e = engines[rnd(8)];
            one_side(e, true, e != HZ_DMA2 && rnd(2) == 0); /* kept by a flush */
        }
    }
}

/* hz_sync, counted in issued[] (no reference kept). */
static struct engine_sync sync_one(enum hz_engine e, struct hz_access a)
{
    issued[e]++;
    return hz_sync(e, &a, false);
}

/* A read after a write on another engine waits for it; disjoint ranges do not; a write
   after a read waits for the reader; the window's oldest entries leaving make later
   descriptors wait for them whatever they touch. */
static void test_basic_orders(void **state)
{
    (void)state;
    reset();
    uint32_t b[HZ_ENGINES];
    memcpy(b, issued, sizeof(b));
    const struct hz_range A = { 0x100000, 0x101000 }, B = { 0x900000, 0x901000 };
    struct engine_sync s = sync_one(HZ_DMA, (struct hz_access){ .wr = { A } });
    assert_false(s.wait);
    s = sync_one(HZ_MATRIX, (struct hz_access){ .rd = { A }, .wr = { B } });
    assert_true(s.wait && s.wait_sem == sem_of[HZ_DMA] && s.wait_value == b[HZ_DMA] + 1);
    assert_false(s.wait2);
    s = sync_one(HZ_VECTOR, (struct hz_access){ .rd = { { 0x200000, 0x201000 } } });
    assert_false(s.wait); /* touches nothing written */
    s = sync_one(HZ_DMA, (struct hz_access){ .wr = { B } });
    assert_true(s.wait && s.wait_sem == sem_of[HZ_MATRIX] && s.wait_value == b[HZ_MATRIX] + 1);
    for (uint32_t i = 0; i < WINDOW; i++) /* the first four leave the window */
        sync_one(HZ_VECTOR, (struct hz_access){ .wr = { { 0x300000 + i * 64, 0x300040 + i * 64 } } });
    memset(hart_wait, 0, sizeof(hart_wait));
    s = sync_one(HZ_MATRIX, (struct hz_access){ .rd = { { 0x700000, 0x700040 } } });
    assert_int_equal(wait_for_engine(&s, HZ_DMA), b[HZ_DMA] + 2);       /* both copies */
    assert_int_equal(wait_for_engine(&s, HZ_VECTOR), b[HZ_VECTOR] + 1); /* the first op */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic_orders),
        cmocka_unit_test(test_random_against_reference),
        cmocka_unit_test(test_random_with_progress_and_flushes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
