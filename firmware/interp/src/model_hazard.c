/* SPDX-License-Identifier: MIT */
/* Dataflow ordering of the chain by data hazards (model_hazard.h). */
#include "model_hazard.h"

#include <assert.h>

#include "npu/hal.h"
#include "npu/wait.h"
#include "npu_enums.h"

#define HZ_WINDOW 128u
/* Application semaphores of the engines' counts (0..11 are the application's; 2..7 are the
   runtime's and the interpreter's others). */
static const uint8_t engine_sem[HZ_ENGINES] = { 8u, 9u, 10u, 11u };

/* Engine state: scratch of this core's chain, not model state. issued: descriptors given a
   number; done: a count known complete (no wait needed up to it); last_main: one past the
   last non-side descriptor's number (flush completes up to it: queues run in order). */
static uint32_t issued[HZ_ENGINES], done[HZ_ENGINES], last_main[HZ_ENGINES];
/* The window: the last HZ_WINDOW descriptors, and per engine the highest number that left
   it (+1; 0 none) while possibly incomplete. */
static struct {
    struct hz_access a;
    struct hz_range all, wr; /* bounds of every range, of the writes: a quick first test */
    uint8_t engine;
    uint32_t seq;
} window[HZ_WINDOW];
static uint32_t wlen, whead, evicted[HZ_ENGINES];
static uint32_t wcount[HZ_ENGINES]; /* the window's entries per engine */
/* The second DMA queue's loads (the expert ring's slots, the next layer's shares) stay out
   of the window: they run far ahead of the chain, and a load that left the window would
   make every later descriptor wait for it. Only the latest load into each destination
   matters (a load into a slot waited for the readers of the one before, which waited for
   it); the ring has at most NPU_EXPERT_SLOTS_MAX slots and the staged shares two copies of
   a layer's few kinds: HZ_LOADS entries keyed by destination, the oldest replaced (its
   number then counts as left the window). The residual tiles' copies (rows_copy) come here
   too, each copy back with its own destination in HBM: a layer of many tiles replaces
   entries, whose (long complete) loads then only raise the floor a descriptor waits for. */
#define HZ_LOADS 32u
static struct hz_load {
    struct hz_access a;
    struct hz_range all, wr; /* bounds (as the window's) */
    uint32_t seq;
} loads[HZ_LOADS];
static uint32_t nloads; /* loads[0, nloads) are in use */

static void flushed(void);
static void (*submit_built)(void);

void hz_set_submit(void (*submit)(void))
{
    submit_built = submit;
}

struct hz_range hz_span(uint64_t base, uint64_t rows, uint64_t stride, uint64_t row)
{
    if (!base || !rows || !row)
        return (struct hz_range){ 0, 0 };
    return (struct hz_range){ base, base + (rows - 1) * stride + row };
}

static bool overlaps(struct hz_range x, struct hz_range y)
{
    return x.lo < x.hi && y.lo < y.hi && x.lo < y.hi && y.lo < x.hi;
}

/* Whether b (later) must wait for a (earlier): b reads what a writes, or writes what a
   reads or writes. */
static bool conflicts(const struct hz_access *a, const struct hz_access *b)
{
    for (uint32_t w = 0; w < HZ_WRITES; w++) {
        for (uint32_t r = 0; r < HZ_READS; r++)
            if (overlaps(a->wr[w], b->rd[r]) || overlaps(a->rd[r], b->wr[w]))
                return true;
        for (uint32_t v = 0; v < HZ_WRITES; v++)
            if (overlaps(a->wr[w], b->wr[v]))
                return true;
    }
    return false;
}

static struct hz_range widen(struct hz_range b, struct hz_range r)
{
    if (r.lo >= r.hi)
        return b;
    if (b.lo >= b.hi)
        return r;
    return (struct hz_range){ r.lo < b.lo ? r.lo : b.lo, r.hi > b.hi ? r.hi : b.hi };
}

/* The bounds of a's ranges: all of them, and the writes. */
static void bounds(const struct hz_access *a, struct hz_range *all, struct hz_range *wr)
{
    *wr = (struct hz_range){ 0, 0 };
    for (uint32_t w = 0; w < HZ_WRITES; w++)
        *wr = widen(*wr, a->wr[w]);
    *all = *wr;
    for (uint32_t r = 0; r < HZ_READS; r++)
        *all = widen(*all, a->rd[r]);
}

/* need[x]: the count of engine x's descriptors that must be done before one on engine e
   with accesses a (bounds all, wr) may start. */
static void find_needs(enum hz_engine e, const struct hz_access *a, struct hz_range all,
                       struct hz_range wr, uint32_t *need)
{
    uint32_t left[HZ_ENGINES], open = 0; /* window entries not yet looked at; engines whose
                                             need may still rise */
    for (uint32_t x = 0; x < HZ_ENGINES; x++) {
        need[x] = evicted[x], left[x] = x == (uint32_t)e ? 0 : wcount[x];
        open += left[x] > 0;
    }
    for (uint32_t i = 0; e != HZ_DMA2 && i < nloads; i++) /* the loads' table */
        if (loads[i].seq + 1 > need[HZ_DMA2] &&
            (overlaps(loads[i].wr, all) || overlaps(loads[i].all, wr)) &&
            conflicts(&loads[i].a, a))
            need[HZ_DMA2] = loads[i].seq + 1;
    /* newest first; an engine is settled once one of its descriptors is needed (its earlier
       ones are implied) or none of its entries is left, and the scan ends when every
       other engine is */
    for (uint32_t i = 0; i < wlen && open; i++) {
        const uint32_t at = (whead + HZ_WINDOW - 1 - i) % HZ_WINDOW;
        const uint32_t x = window[at].engine;
        if (x == e || !left[x])
            continue;
        if (overlaps(window[at].wr, all) || overlaps(window[at].all, wr)) {
            if (conflicts(&window[at].a, a)) {
                need[x] = window[at].seq + 1 > need[x] ? window[at].seq + 1 : need[x];
                left[x] = 1; /* settled: counted down below */
            }
        }
        open -= --left[x] == 0;
    }
}

/* A load of the second queue into the table: the entry of its destination, or a free
   one, or the oldest (which then counts as left the window). */
static void remember_load(const struct hz_access *a, struct hz_range all, struct hz_range wr,
                          uint32_t seq)
{
    uint32_t at = HZ_LOADS;
    for (uint32_t i = 0; i < nloads && at == HZ_LOADS; i++)
        if (loads[i].wr.lo == a->wr[0].lo)
            at = i;
    if (at == HZ_LOADS && nloads < HZ_LOADS)
        at = nloads++;
    if (at == HZ_LOADS) {
        at = 0;
        for (uint32_t i = 1; i < HZ_LOADS; i++)
            at = loads[i].seq < loads[at].seq ? i : at;
        evicted[HZ_DMA2] = loads[at].seq + 1 > evicted[HZ_DMA2] ? loads[at].seq + 1
                                                                 : evicted[HZ_DMA2];
    }
    loads[at] = (struct hz_load){ .a = *a, .all = all, .wr = wr, .seq = seq };
}

static void remember(enum hz_engine e, const struct hz_access *a, struct hz_range all,
                     struct hz_range wr, uint32_t seq)
{
    if (e == HZ_DMA2) {
        remember_load(a, all, wr, seq);
        return;
    }
    if (wlen == HZ_WINDOW) { /* the oldest leaves: wait for it from now on */
        const uint32_t x = window[whead].engine;
        evicted[x] = window[whead].seq + 1 > evicted[x] ? window[whead].seq + 1 : evicted[x];
        wcount[x]--;
    } else {
        wlen++;
    }
    wcount[e]++;
    window[whead].a = *a, window[whead].engine = (uint8_t)e, window[whead].seq = seq;
    window[whead].all = all, window[whead].wr = wr;
    whead = (whead + 1) % HZ_WINDOW;
}

struct engine_sync hz_sync(enum hz_engine e, const struct hz_access *a, bool side)
{
    uint32_t need[HZ_ENGINES];
    struct hz_range all, wr;
    bounds(a, &all, &wr);
    find_needs(e, a, all, wr, need);
    const uint16_t self = (uint16_t)hal_self()->core_id;
    struct engine_sync s = { .signal = true, .signal_core = self, .signal_sem = engine_sem[e],
                             .signal_value = 1 };
    /* a descriptor waits for two engines at most: the second DMA queue first (its loads
       run long ahead), then the others; the hart itself waits out a third */
    static const uint8_t order[HZ_ENGINES] = { HZ_DMA2, HZ_MATRIX, HZ_VECTOR, HZ_DMA };
    if (e != HZ_DMA2 && need[HZ_DMA2] > done[HZ_DMA2]) /* loads done by now need no wait */
        done[HZ_DMA2] = hal_sem_read(engine_sem[HZ_DMA2]);
    for (uint32_t i = 0; i < HZ_ENGINES; i++) {
        const uint32_t x = order[i];
        if (x == (uint32_t)e || need[x] <= done[x])
            continue;
        if (!s.wait) {
            s.wait = true, s.wait_sem = engine_sem[x], s.wait_value = need[x];
        } else if (!s.wait2) {
            s.wait2 = true, s.wait2_sem = engine_sem[x], s.wait2_value = need[x];
        } else {
            /* without a deadline the wait ends only when the semaphore reaches need[x]
               (the chip's watchdog ends a run whose engines stall) */
            assert(submit_built && "a third wait needs the built descriptors submitted");
            submit_built();
            int rc = hal_sem_wait(engine_sem[x], need[x]);
            assert(rc == NPU_OK && "a wait without a deadline");
            (void)rc;
            done[x] = need[x];
        }
    }
    const uint32_t seq = issued[e]++;
    if (!side)
        last_main[e] = seq + 1;
    remember(e, a, all, wr, seq);
    return s;
}

int hz_wait_flush(void)
{
    int rc = NPU_OK;
    for (uint32_t x = 0; rc == NPU_OK && x < HZ_ENGINES; x++)
        if (last_main[x] > done[x])
            rc = hal_sem_wait(engine_sem[x], last_main[x]);
    if (rc == NPU_OK)
        flushed();
    return rc;
}

int hz_wait_range(struct hz_range r)
{
    const struct hz_access a = { .rd = { r }, .wr = { r } };
    struct hz_range all, wr;
    uint32_t need[HZ_ENGINES];
    bounds(&a, &all, &wr);
    find_needs(HZ_ENGINES, &a, all, wr, need); /* no engine of its own: all are looked at */
    int rc = NPU_OK;
    for (uint32_t x = 0; rc == NPU_OK && x < HZ_ENGINES; x++)
        if (need[x] > done[x] && (rc = hal_sem_wait(engine_sem[x], need[x])) == NPU_OK)
            done[x] = need[x];
    return rc;
}

int hz_make_room(uint32_t most)
{
    int rc = NPU_OK;
    for (uint32_t x = 0; rc == NPU_OK && x < HZ_ENGINES; x++)
        rc = hz_make_room_on((enum hz_engine)x, most);
    return rc;
}

int hz_make_room_on(enum hz_engine x, uint32_t most)
{
    int rc = NPU_OK;
    const uint32_t floor = issued[x] > most ? issued[x] - most : 0;
    if (floor <= done[x])
        return NPU_OK;
    const uint32_t now = hal_sem_read(engine_sem[x]); /* done by now: no wait */
    done[x] = now > done[x] ? now : done[x];
    if (floor > done[x] && (rc = hal_sem_wait(engine_sem[x], floor)) == NPU_OK)
        done[x] = floor;
    return rc;
}

bool hz_idle(enum hz_engine e)
{
    if (issued[e] > done[e]) {
        const uint32_t now = hal_sem_read(engine_sem[e]);
        done[e] = now > done[e] ? now : done[e];
    }
    return issued[e] <= done[e];
}

int hz_wait_all(void)
{
    int rc = NPU_OK;
    for (uint32_t x = 0; rc == NPU_OK && x < HZ_ENGINES; x++)
        if (issued[x] > done[x])
            rc = hal_sem_wait(engine_sem[x], issued[x]);
    if (rc != NPU_OK)
        return rc;
    for (uint32_t x = 0; x < HZ_ENGINES; x++)
        done[x] = last_main[x] = issued[x], evicted[x] = 0, wcount[x] = 0;
    wlen = 0;
    nloads = 0;
    return NPU_OK;
}

static void flushed(void)
{
    for (uint32_t x = 0; x < HZ_ENGINES; x++) {
        done[x] = last_main[x] > done[x] ? last_main[x] : done[x];
        evicted[x] = evicted[x] > done[x] ? evicted[x] : 0; /* a side one may still run */
    }
    /* the window keeps only descriptors that may still run: side ones after the last main
       descriptor of their engine */
    uint32_t kept = 0, n = wlen, start = (whead + HZ_WINDOW - wlen) % HZ_WINDOW;
    for (uint32_t x = 0; x < HZ_ENGINES; x++)
        wcount[x] = 0;
    for (uint32_t i = 0; i < n; i++) {
        const uint32_t at = (start + i) % HZ_WINDOW;
        if (window[at].seq + 1 > done[window[at].engine]) {
            wcount[window[at].engine]++;
            window[(start + kept++) % HZ_WINDOW] = window[at];
        }
    }
    wlen = kept, whead = (start + kept) % HZ_WINDOW;
}
