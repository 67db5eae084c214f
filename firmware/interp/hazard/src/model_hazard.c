/* SPDX-License-Identifier: MIT */
/* Dataflow ordering of the chain by data hazards (model_hazard.h). */
#include "model_hazard.h"

#include <assert.h>

#include "npu/hal.h"
#include "npu/wait.h"
#include "npu_enums.h"

#define HZ_WINDOW 128u
#define HZ_SCAN_FRESH 4u /* entries a scan passes before it reads the count (find_needs) */
/* Application semaphores of the engines' counts (0..11 are the application's; 2..7 are the
   runtime's and the interpreter's others). */
static const uint8_t engine_sem[HZ_ENGINES] = { 8u, 9u, 10u, 11u };

/* Engine state: scratch of this core's chain, not model state. issued: descriptors given a
   number; done: a count known complete (no wait needed up to it); last_main: one past the
   last non-side descriptor's number (flush completes up to it: queues run in order). */
static uint32_t issued[HZ_ENGINES], done[HZ_ENGINES], last_main[HZ_ENGINES];
/* An access as the window keeps it: the non-empty ranges only, the writes first, so that
   a test looks at the ranges a descriptor has (one or two reads and a write, mostly) and
   not at every slot of struct hz_access; and masks of the granules its writes and all its
   ranges touch, at two sizes (granule g is bit g mod 64): 512 KiB granules, which tell
   apart large ranges anywhere in a core's 32 MiB of SRAM, and 16 KiB ones, which tell
   apart the tile buffers packed into one of them. Two masks that do not meet reject a
   pair in a few instructions, and do for about 88 % of the pairs a scan tests that do not
   conflict (bounds of the ranges, the test before, rejected 7 % of all pairs: a descriptor
   reading a tile and weights far apart spans most of SRAM). The hazard tests are a large
   part of what the harts execute (37 % of the guest instructions of a chunked serving run
   of Qwen3-30B-A3B, 46 to 57 % before the masks and the embedding's gathers, counted per
   function with a QEMU TCG plugin; docs/results.md). */
#define HZ_COARSE 19u
#define HZ_FINE 14u
struct hz_compact {
    struct hz_range r[HZ_READS + HZ_WRITES]; /* writes [0, nwr), reads [nwr, nwr + nrd) */
    uint64_t wmask, amask;                   /* coarse granules: writes, every range */
    uint64_t fwmask, famask;                 /* fine granules: writes, every range */
    uint8_t nwr, nrd;
};
/* The window: the last HZ_WINDOW descriptors in a ring of HZ_SLOTS, and per engine the
   highest number that left it (+1; 0 none) while possibly incomplete. Slot whead is always
   free: a new descriptor's accesses are compacted into it and tested against the window
   (whose oldest entry may still conflict) before the oldest leaves, with no copy. */
#define HZ_SLOTS (HZ_WINDOW + 1u)
static struct {
    struct hz_compact a;
    uint8_t engine;
    uint32_t seq;
} window[HZ_SLOTS];
static uint32_t wlen, whead, evicted[HZ_ENGINES];
static uint32_t wcount[HZ_ENGINES]; /* the window's entries per engine */
/* Per engine, the window slots of its entries in order (the last wcount[x] before
   ehead[x], mod HZ_WINDOW): a descriptor looks at the other engines' entries only, most of
   a window being the vector engine's. */
_Static_assert(HZ_SLOTS <= 256, "a window slot in a byte");
static uint8_t eslot[HZ_ENGINES][HZ_WINDOW];
static uint32_t ehead[HZ_ENGINES];
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
    struct hz_compact a;
    uint32_t seq;
} loads[HZ_LOADS];
static uint32_t nloads; /* loads[0, nloads) are in use */
/* The masks of every load in the table, or-ed: a descriptor whose masks do not meet them
   conflicts with none, and skips the table (most descriptors: loads go to the staging
   buffers; the scan of the table was a third of find_needs's instructions). */
static struct hz_compact loads_masks;

/* No descriptor was numbered since hz_wait_all last completed: every count is done, the
   window and the loads table are empty, so waits and flushes have nothing to do (a decode
   step's layer replays each drain the engines, mostly already drained). */
static bool drained;

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

static uint32_t slot_next(uint32_t at)
{
    return at + 1 == HZ_SLOTS ? 0 : at + 1;
}

/* The granules of 2^grain bytes that r (non-empty) touches, as a mask: bit g mod 64 for
   each granule g. */
static uint64_t granules(struct hz_range r, uint32_t grain)
{
    const uint64_t g0 = r.lo >> grain, n = ((r.hi - 1) >> grain) - g0 + 1;
    if (n >= 64)
        return ~0ull;
    const uint64_t run = (1ull << n) - 1;
    const uint32_t s = (uint32_t)(g0 & 63);
    return s ? run << s | run >> (64 - s) : run;
}

/* a's non-empty ranges and their granules into c. */
static void compact(const struct hz_access *a, struct hz_compact *c)
{
    uint32_t n = 0;
    uint64_t wm = 0, fwm = 0;
    for (uint32_t w = 0; w < HZ_WRITES; w++)
        if (a->wr[w].lo < a->wr[w].hi) {
            c->r[n++] = a->wr[w];
            wm |= granules(a->wr[w], HZ_COARSE), fwm |= granules(a->wr[w], HZ_FINE);
        }
    c->nwr = (uint8_t)n;
    uint64_t am = wm, fam = fwm;
    for (uint32_t r = 0; r < HZ_READS; r++)
        if (a->rd[r].lo < a->rd[r].hi) {
            c->r[n++] = a->rd[r];
            am |= granules(a->rd[r], HZ_COARSE), fam |= granules(a->rd[r], HZ_FINE);
        }
    c->nrd = (uint8_t)(n - c->nwr);
    c->wmask = wm, c->amask = am, c->fwmask = fwm, c->famask = fam;
}

/* Whether b (later) must wait for a (earlier): b reads what a writes, or writes what a
   reads or writes. Only non-empty ranges are kept, so an overlap is two comparisons. */
static bool exact_conflict(const struct hz_compact *a, const struct hz_compact *b)
{
    const uint32_t na = a->nwr + a->nrd, nb = b->nwr + b->nrd;
    for (uint32_t i = 0; i < a->nwr; i++) /* a's writes against all of b's */
        for (uint32_t j = 0; j < nb; j++)
            if (a->r[i].lo < b->r[j].hi && b->r[j].lo < a->r[i].hi)
                return true;
    for (uint32_t i = a->nwr; i < na; i++) /* a's reads against b's writes */
        for (uint32_t j = 0; j < b->nwr; j++)
            if (a->r[i].lo < b->r[j].hi && b->r[j].lo < a->r[i].hi)
                return true;
    return false;
}

/* Whether a's and b's granule masks allow a conflict (false also when neither writes). */
static inline bool masks_meet(const struct hz_compact *a, const struct hz_compact *b)
{
    return ((a->wmask & b->amask) | (a->amask & b->wmask)) &&
           ((a->fwmask & b->famask) | (a->famask & b->fwmask));
}

static inline bool conflicts(const struct hz_compact *a, const struct hz_compact *b)
{
    return masks_meet(a, b) && exact_conflict(a, b);
}

/* done[x] from engine x's semaphore: how many of its descriptors are complete by now. */
static void refresh(uint32_t x)
{
    const uint32_t now = hal_sem_read(engine_sem[x]);
    done[x] = now > done[x] ? now : done[x];
}

/* need[x]: the count of engine x's descriptors that must be done before one on engine e
   with accesses a may start, where it is more than done[x] (entries known complete are
   not looked at: they could raise need[x] to done[x] at most, which asks no wait). */
static void find_needs(enum hz_engine e, const struct hz_compact *a, uint32_t *need)
{
    uint32_t left[HZ_ENGINES]; /* the entries of each engine to look at */
    for (uint32_t x = 0; x < HZ_ENGINES; x++)
        need[x] = evicted[x], left[x] = x == (uint32_t)e ? 0 : wcount[x];
    const bool table = e != HZ_DMA2 && nloads && masks_meet(&loads_masks, a);
    for (uint32_t i = 0, live = 0; table && i < nloads; i++) { /* the loads' table */
        if (loads[i].seq + 1 <= need[HZ_DMA2] || loads[i].seq + 1 <= done[HZ_DMA2])
            continue;
        if (live++ == HZ_SCAN_FRESH) {
            refresh(HZ_DMA2);
            if (loads[i].seq + 1 <= done[HZ_DMA2])
                continue;
        }
        if (conflicts(&loads[i].a, a))
            need[HZ_DMA2] = loads[i].seq + 1;
    }
    /* per engine, newest first, up to the first conflict (its earlier entries are
       implied: the queue runs in order) or the first entry known complete; a scan that
       passes HZ_SCAN_FRESH entries reads the engine's count once (most of a long scan is
       descriptors long complete that no wait since has told of) */
    for (uint32_t x = 0; x < HZ_ENGINES; x++)
        for (uint32_t k = 0; k < left[x]; k++) {
            const uint32_t at = eslot[x][(ehead[x] - 1 - k) % HZ_WINDOW];
            if (k == HZ_SCAN_FRESH)
                refresh(x);
            if (window[at].seq + 1 <= done[x])
                break;
            if (conflicts(&window[at].a, a)) {
                need[x] = window[at].seq + 1 > need[x] ? window[at].seq + 1 : need[x];
                break;
            }
        }
}

/* Where c's writes start (0: none): the key of a load's destination. */
static uint64_t writes_lo(const struct hz_compact *c)
{
    uint64_t lo = c->nwr ? c->r[0].lo : 0;
    for (uint32_t i = 1; i < c->nwr; i++)
        lo = c->r[i].lo < lo ? c->r[i].lo : lo;
    return lo;
}

/* A load of the second queue into the table: the entry of its destination, or a free
   one, or the oldest (which then counts as left the window). */
static void remember_load(const struct hz_compact *c, uint32_t seq)
{
    uint32_t at = HZ_LOADS;
    for (uint32_t i = 0; i < nloads && at == HZ_LOADS; i++)
        if (writes_lo(&loads[i].a) == writes_lo(c))
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
    loads[at].a = *c, loads[at].seq = seq;
    struct hz_compact *u = &loads_masks; /* again over the table: an entry was replaced */
    u->wmask = u->amask = u->fwmask = u->famask = 0;
    for (uint32_t i = 0; i < nloads; i++) {
        u->wmask |= loads[i].a.wmask, u->amask |= loads[i].a.amask;
        u->fwmask |= loads[i].a.fwmask, u->famask |= loads[i].a.famask;
    }
}

/* Descriptor seq of engine e into the window: its accesses are in the free slot whead. */
static void remember(enum hz_engine e, uint32_t seq)
{
    if (e == HZ_DMA2) {
        remember_load(&window[whead].a, seq);
        return;
    }
    if (wlen == HZ_WINDOW) { /* the oldest leaves: wait for it from now on */
        const uint32_t old = slot_next(whead); /* whead - HZ_WINDOW, mod HZ_SLOTS */
        const uint32_t x = window[old].engine;
        evicted[x] = window[old].seq + 1 > evicted[x] ? window[old].seq + 1 : evicted[x];
        wcount[x]--;
    } else {
        wlen++;
    }
    wcount[e]++;
    eslot[e][ehead[e]++ % HZ_WINDOW] = (uint8_t)whead;
    window[whead].engine = (uint8_t)e, window[whead].seq = seq;
    whead = slot_next(whead);
}

struct engine_sync hz_sync(enum hz_engine e, const struct hz_access *a, bool side)
{
    uint32_t need[HZ_ENGINES];
    struct hz_compact *c = &window[whead].a; /* the free slot */
    compact(a, c);
    find_needs(e, c, need);
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
            /* HAZARD: c is the free slot's until remember(); submit_built() puts the chain
               on the engines (hz_make_room: done[] only), never flushes or moves whead */
            const uint32_t slot = whead;
            submit_built();
            assert(whead == slot && "the free slot still holds this descriptor's accesses");
            (void)slot;
            int rc = hal_sem_wait(engine_sem[x], need[x]);
            assert(rc == NPU_OK && "a wait without a deadline");
            (void)rc;
            done[x] = need[x];
        }
    }
    const uint32_t seq = issued[e]++;
    drained = false;
    if (!side)
        last_main[e] = seq + 1;
    remember(e, seq);
    return s;
}

int hz_wait_flush(void)
{
    if (drained)
        return NPU_OK;
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
    struct hz_compact c;
    uint32_t need[HZ_ENGINES];
    compact(&a, &c);
    find_needs(HZ_ENGINES, &c, need); /* no engine of its own: all are looked at */
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

uint32_t hz_need_of(enum hz_engine x, struct hz_range r)
{
    const struct hz_access a = { .wr = { r } };
    struct hz_compact c;
    uint32_t need[HZ_ENGINES];
    compact(&a, &c);
    find_needs(HZ_ENGINES, &c, need);
    return need[x];
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
    if (drained)
        return NPU_OK;
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
    drained = true;
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
    uint32_t kept = 0, n = wlen, start = (whead + HZ_SLOTS - wlen) % HZ_SLOTS;
    for (uint32_t x = 0; x < HZ_ENGINES; x++)
        wcount[x] = 0;
    for (uint32_t i = 0, at = start, to = start; i < n; i++, at = slot_next(at)) {
        const uint32_t x = window[at].engine;
        if (window[at].seq + 1 > done[x]) {
            wcount[x]++;
            eslot[x][ehead[x]++ % HZ_WINDOW] = (uint8_t)to;
            window[to] = window[at];
            to = slot_next(to), kept++;
        }
    }
    wlen = kept, whead = (start + kept) % HZ_SLOTS;
}
