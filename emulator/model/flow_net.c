/* SPDX-License-Identifier: MIT */
/* Flow-level max-min bandwidth sharing; see flow_net.h for the model and numeric choices. */
#include "flow_net.h"

#include <stdlib.h>
#include <string.h>

#include "npu_enums.h"

/* Unsigned 128-bit integer: picobytes of a flow (bytes x 1e12 needs up to 104 bits). */
struct u128 {
    uint64_t hi, lo;
};

struct flow_net_res {
    uint64_t capacity;   /* bytes per second, >= 1 */
    uint64_t bytes;      /* carried by removed flows */
    uint64_t busy_ps;    /* accumulated while nflows > 0, up to busy_since */
    uint64_t busy_since; /* when nflows last became non-zero */
    uint32_t nflows;     /* active sharing flows crossing it */
    uint32_t mark;       /* == flow_net.mark_gen: seen by the path check or the search */
    uint32_t *flows;     /* congested mode: ids of its nflows flows by ascending key */
    uint32_t flows_cap;
    uint32_t unfrozen;   /* solver: flows not frozen yet */
    uint64_t avail;      /* solver: capacity not yet given to frozen flows */
    uint32_t heap_pos;   /* solver: index in flow_net.heap while unfrozen != 0 */
    bool touched;        /* solver: in flow_net.touched */
    bool dirty;          /* in flow_net.dirty: its component awaits a re-solve */
};

struct flow_net_flow {
    bool active;
    bool shares;       /* bytes > 0 and a non-empty path: takes bandwidth */
    bool frozen;       /* solver */
    uint32_t mark;     /* == flow_net.mark_gen: already in the component being searched */
    uint32_t due_pos;  /* index in flow_net.due while active */
    uint64_t key;
    uint64_t bytes;
    uint64_t rate;     /* bytes per second (FLOW_NET_UNLIMITED if instant) */
    uint64_t last_ps;  /* time `rem` refers to */
    uint64_t end_ps;   /* completion time */
    struct u128 rem;   /* picobytes left at last_ps */
    uint32_t *path;
    uint32_t path_len, path_cap;
};

struct flow_net_heap_ent {
    uint64_t share;
    uint32_t res;
};

struct flow_net_due {
    uint64_t end_ps, key; /* copies of the flow's, compared without touching the flow */
    uint32_t id;
};

/* ---- 128-bit helpers ---- */

static struct u128 mul64(uint64_t a, uint64_t b)
{
    uint64_t al = a & 0xffffffffu, ah = a >> 32, bl = b & 0xffffffffu, bh = b >> 32;
    uint64_t ll = al * bl, lh = al * bh, hl = ah * bl, hh = ah * bh;
    uint64_t mid = (ll >> 32) + (lh & 0xffffffffu) + (hl & 0xffffffffu);
    struct u128 r;
    r.hi = hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
    r.lo = (mid << 32) | (ll & 0xffffffffu);
    return r;
}

static bool u128_le(struct u128 a, struct u128 b)
{
    return a.hi != b.hi ? a.hi < b.hi : a.lo <= b.lo;
}

static bool u128_is_zero(struct u128 a)
{
    return (a.hi | a.lo) == 0;
}

/* a - b, for a >= b. */
static struct u128 u128_sub(struct u128 a, struct u128 b)
{
    struct u128 r = { a.hi - b.hi - (a.lo < b.lo), a.lo - b.lo };
    return r;
}

/* ceil(a / d) for d > 0, saturating at UINT64_MAX. */
static uint64_t u128_div_ceil(struct u128 a, uint64_t d)
{
    if (a.hi == 0) /* below 2^64 picobytes (18 MB): one native division, same result */
        return a.lo / d + (a.lo % d != 0);
    if (a.hi >= d)
        return UINT64_MAX; /* quotient >= 2^64 */
    uint64_t r = a.hi, q = 0; /* restoring division; r < d throughout */
    for (int i = 63; i >= 0; i--) {
        bool carry = r >> 63;
        r = (r << 1) | ((a.lo >> i) & 1u);
        q <<= 1;
        if (carry || r >= d) {
            r -= d;
            q |= 1;
        }
    }
    if (r == 0)
        return q;
    return q == UINT64_MAX ? UINT64_MAX : q + 1;
}

/* ---- flow progress ---- */

/* Picobytes a flow still has to move at time t (t before last_ps counts as last_ps). */
static struct u128 rem_at(const struct flow_net_flow *f, uint64_t t)
{
    if (!f->shares || t <= f->last_ps)
        return f->rem;
    struct u128 moved = mul64(f->rate, t - f->last_ps);
    if (u128_le(f->rem, moved)) {
        struct u128 zero = { 0, 0 };
        return zero;
    }
    return u128_sub(f->rem, moved);
}

/* Brings a flow's remaining amount to time t (exact: see flow_net.h). */
static void rebase(struct flow_net_flow *f, uint64_t t)
{
    f->rem = rem_at(f, t);
    if (t > f->last_ps)
        f->last_ps = t;
}

/*
 * Completion time at the current rate. A flow with nothing left keeps the end time it had:
 * its remaining amount reached zero exactly at that time, which is <= last_ps.
 */
static uint64_t end_time(const struct flow_net_flow *f)
{
    if (u128_is_zero(f->rem))
        return f->end_ps;
    if (f->rate == 0)
        return FLOW_NET_NEVER;
    uint64_t dt = u128_div_ceil(f->rem, f->rate);
    return dt > FLOW_NET_NEVER - f->last_ps ? FLOW_NET_NEVER : f->last_ps + dt;
}

/* ---- completion order: binary min-heap of the active flows by (end_ps, key) ---- */

static bool due_before(const struct flow_net_due *a, const struct flow_net_due *b)
{
    return a->end_ps != b->end_ps ? a->end_ps < b->end_ps : a->key < b->key;
}

static void due_put(struct flow_net *n, uint32_t pos, struct flow_net_due e)
{
    n->due[pos] = e;
    n->flows[e.id].due_pos = pos;
}

/* Moves the entry at pos up or down to its place. */
static void due_fix(struct flow_net *n, uint32_t pos)
{
    struct flow_net_due e = n->due[pos];
    for (; pos > 0 && due_before(&e, &n->due[(pos - 1) / 2]); pos = (pos - 1) / 2)
        due_put(n, pos, n->due[(pos - 1) / 2]);
    for (;;) {
        uint32_t c = 2 * pos + 1;
        if (c >= n->ndue)
            break;
        if (c + 1 < n->ndue && due_before(&n->due[c + 1], &n->due[c]))
            c++;
        if (!due_before(&n->due[c], &e))
            break;
        due_put(n, pos, n->due[c]);
        pos = c;
    }
    due_put(n, pos, e);
}

static void due_insert(struct flow_net *n, uint32_t id)
{
    struct flow_net_due e = { n->flows[id].end_ps, n->flows[id].key, id };
    due_put(n, n->ndue++, e);
    due_fix(n, n->ndue - 1);
}

static void due_erase(struct flow_net *n, uint32_t id)
{
    uint32_t pos = n->flows[id].due_pos;
    struct flow_net_due last = n->due[--n->ndue];
    if (pos == n->ndue)
        return;
    due_put(n, pos, last);
    due_fix(n, pos);
}

/* Sets a flow's completion time and keeps the heap in order. */
static void set_end(struct flow_net *n, uint32_t id, uint64_t end_ps)
{
    struct flow_net_flow *f = &n->flows[id];
    if (f->end_ps == end_ps)
        return;
    f->end_ps = n->due[f->due_pos].end_ps = end_ps;
    due_fix(n, f->due_pos);
}

/* ---- free ids: binary min-heap, so that an add takes the lowest one ---- */

static void free_push(struct flow_net *n, uint32_t id)
{
    uint32_t i = n->nfree++;
    for (; i > 0 && n->free_ids[(i - 1) / 2] > id; i = (i - 1) / 2)
        n->free_ids[i] = n->free_ids[(i - 1) / 2];
    n->free_ids[i] = id;
}

/* Drops the lowest free id (free_ids[0]). */
static void free_pop(struct flow_net *n)
{
    uint32_t last = n->free_ids[--n->nfree], i = 0;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= n->nfree)
            break;
        if (c + 1 < n->nfree && n->free_ids[c + 1] < n->free_ids[c])
            c++;
        if (n->free_ids[c] >= last)
            break;
        n->free_ids[i] = n->free_ids[c];
        i = c;
    }
    n->free_ids[i] = last;
}

/* ---- key-ordered id lists (active flows; flows of a resource) ---- */

/* Position of the first id in ids[0 .. len) whose flow's key is >= key. */
static uint32_t key_pos(const struct flow_net *n, const uint32_t *ids, uint32_t len,
                        uint64_t key)
{
    uint32_t lo = 0, hi = len;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (n->flows[ids[mid]].key < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Inserts id into ids[0 .. len) (room for one more is there); the caller counts it. */
static void ids_insert(const struct flow_net *n, uint32_t *ids, uint32_t len, uint32_t id)
{
    uint32_t pos = key_pos(n, ids, len, n->flows[id].key);
    memmove(&ids[pos + 1], &ids[pos], (len - pos) * sizeof(*ids));
    ids[pos] = id;
}

/* Erases id from ids[0 .. len); the caller uncounts it. */
static void ids_erase(const struct flow_net *n, uint32_t *ids, uint32_t len, uint32_t id)
{
    uint32_t pos = key_pos(n, ids, len, n->flows[id].key);
    memmove(&ids[pos], &ids[pos + 1], (len - pos - 1) * sizeof(*ids));
}

static bool key_is_active(const struct flow_net *n, uint64_t key)
{
    uint32_t pos = key_pos(n, n->order, n->nactive, key);
    return pos < n->nactive && n->flows[n->order[pos]].key == key;
}

/* A fresh stamp for resource and flow marks (all cleared when the counter wraps). */
static uint32_t next_mark(struct flow_net *n)
{
    if (++n->mark_gen == 0) {
        for (uint32_t r = 0; r < n->nres; r++)
            n->res[r].mark = 0;
        for (uint32_t s = 0; s < n->nslots; s++)
            n->flows[s].mark = 0;
        n->mark_gen = 1;
    }
    return n->mark_gen;
}

/* ---- solver: progressive filling over components, with an indexed heap of resources ---- */

/*
 * The heap holds each resource of the component that still has unfrozen flows, once, at its
 * current share; heap_pos is its index there. Shares only grow during a solve (a flow frozen
 * at the smallest share leaves at least the same share to the others), so an update moves an
 * entry down. Popping the least (share, index) each time gives the same bottleneck sequence
 * as any exact argmin over the resources.
 */
static bool ent_before(const struct flow_net_heap_ent *a, const struct flow_net_heap_ent *b)
{
    return a->share != b->share ? a->share < b->share : a->res < b->res;
}

static void heap_put(struct flow_net *n, uint32_t pos, struct flow_net_heap_ent e)
{
    n->heap[pos] = e;
    n->res[e.res].heap_pos = pos;
}

/* Moves the entry at pos down to its place (below it the heap is in order). */
static void heap_down(struct flow_net *n, uint32_t pos)
{
    struct flow_net_heap_ent e = n->heap[pos];
    for (;;) {
        uint32_t c = 2 * pos + 1;
        if (c >= n->heap_len)
            break;
        if (c + 1 < n->heap_len && ent_before(&n->heap[c + 1], &n->heap[c]))
            c++;
        if (!ent_before(&n->heap[c], &e))
            break;
        heap_put(n, pos, n->heap[c]);
        pos = c;
    }
    heap_put(n, pos, e);
}

/* Removes the entry at pos: the last entry takes its place and moves up or down. */
static void heap_erase(struct flow_net *n, uint32_t pos)
{
    struct flow_net_heap_ent e = n->heap[--n->heap_len];
    if (pos == n->heap_len)
        return;
    for (; pos > 0 && ent_before(&e, &n->heap[(pos - 1) / 2]); pos = (pos - 1) / 2)
        heap_put(n, pos, n->heap[(pos - 1) / 2]);
    heap_put(n, pos, e);
    heap_down(n, pos);
}

/* Adds a resource crossed by a flow to the component being searched. */
static void visit_res(struct flow_net *n, uint32_t res, uint32_t mark)
{
    struct flow_net_res *r = &n->res[res];
    if (r->mark != mark && r->nflows != 0) {
        r->mark = mark;
        n->comp_res[n->ncomp_res++] = res;
    }
}

/*
 * Breadth-first search from the seed resources: the flows linked to them through shared
 * resources (transitively) go to comp, the resources those flows cross to comp_res. Only
 * these flows' rates can change when a flow on a seed starts or ends.
 */
static void collect(struct flow_net *n, const uint32_t *seeds, uint32_t nseeds)
{
    uint32_t mark = next_mark(n);
    n->ncomp = n->ncomp_res = 0;
    for (uint32_t k = 0; k < nseeds; k++)
        visit_res(n, seeds[k], mark);
    for (uint32_t i = 0; i < n->ncomp_res; i++) { /* comp_res is the queue */
        const struct flow_net_res *r = &n->res[n->comp_res[i]];
        for (uint32_t j = 0; j < r->nflows; j++) {
            struct flow_net_flow *f = &n->flows[r->flows[j]];
            if (f->mark == mark)
                continue;
            f->mark = mark;
            n->comp[n->ncomp++] = r->flows[j];
            for (uint32_t k = 0; k < f->path_len; k++)
                visit_res(n, f->path[k], mark);
        }
    }
}

/* Rebases the component's flows to now and builds the heap of its resources. */
static void solve_setup(struct flow_net *n)
{
    n->heap_len = n->ncomp_res;
    for (uint32_t i = 0; i < n->ncomp_res; i++) {
        struct flow_net_res *r = &n->res[n->comp_res[i]];
        r->avail = r->capacity;
        r->unfrozen = r->nflows;
        struct flow_net_heap_ent e = { r->avail / r->unfrozen, n->comp_res[i] };
        heap_put(n, i, e);
    }
    for (uint32_t i = n->heap_len / 2; i-- > 0;) /* bottom-up heap construction */
        heap_down(n, i);
    for (uint32_t i = 0; i < n->ncomp; i++) {
        struct flow_net_flow *f = &n->flows[n->comp[i]];
        rebase(f, n->now_ps);
        f->frozen = false;
    }
}

/*
 * Freezes every unfrozen flow of bottleneck `res` (just popped) at `share` and takes their
 * rates off the other resources of their paths, then updates each touched resource once:
 * out of the heap when it has no unfrozen flow left, else at its new share. Doing the
 * updates per bottleneck rather than per flow gives the same state, since all these flows
 * freeze at the same share whatever the heap says in between.
 */
static void solve_freeze(struct flow_net *n, uint32_t res, uint64_t share)
{
    const struct flow_net_res *bottleneck = &n->res[res];
    uint32_t ntouched = 0;
    for (uint32_t m = 0; m < bottleneck->nflows; m++) {
        struct flow_net_flow *f = &n->flows[bottleneck->flows[m]];
        if (f->frozen)
            continue;
        f->frozen = true;
        f->rate = share;
        for (uint32_t k = 0; k < f->path_len; k++) {
            struct flow_net_res *q = &n->res[f->path[k]];
            q->avail -= share;
            q->unfrozen--;
            if (!q->touched && f->path[k] != res) {
                q->touched = true;
                n->touched[ntouched++] = f->path[k];
            }
        }
    }
    for (uint32_t i = 0; i < ntouched; i++) {
        struct flow_net_res *q = &n->res[n->touched[i]];
        q->touched = false;
        if (q->unfrozen == 0) {
            heap_erase(n, q->heap_pos);
        } else if (q->avail / q->unfrozen != n->heap[q->heap_pos].share) {
            n->heap[q->heap_pos].share = q->avail / q->unfrozen;
            heap_down(n, q->heap_pos); /* shares only grow */
        }
    }
}

/*
 * Max-min fair rates for the components of the seed resources, then their flows' completion
 * times. Progressive filling never links two components (a freeze only touches resources of
 * the frozen flow's path), so this gives each flow the rate a solve of every flow would.
 */
static void solve(struct flow_net *n, const uint32_t *seeds, uint32_t nseeds)
{
    collect(n, seeds, nseeds);
    solve_setup(n);
    while (n->heap_len != 0) {
        struct flow_net_heap_ent top = n->heap[0];
        heap_erase(n, 0);
        solve_freeze(n, top.res, top.share);
    }
    for (uint32_t i = 0; i < n->ncomp; i++)
        set_end(n, n->comp[i], end_time(&n->flows[n->comp[i]]));
    n->solved_ps = n->now_ps;
    n->solves++;
    n->solved_flows += n->ncomp;
}

/* ---- deferred re-solves ---- */

/* Queues the resources of a path whose flows' rates an add or remove at now_ps may change. */
static void mark_dirty(struct flow_net *n, const uint32_t *path, uint32_t path_len)
{
    for (uint32_t k = 0; k < path_len; k++) {
        struct flow_net_res *r = &n->res[path[k]];
        if (!r->dirty) {
            r->dirty = true;
            n->dirty[n->ndirty++] = path[k];
        }
    }
}

/*
 * Re-solves, at now_ps, the components of every resource an add or remove touched since the
 * last re-solve, all in one solve. All those calls were at now_ps (time cannot advance while
 * some are pending), so the rates are the ones the last of them would have left with a
 * re-solve after each (see flow_net.h).
 */
static void flush(struct flow_net *n)
{
    if (n->ndirty == 0)
        return;
    solve(n, n->dirty, n->ndirty);
    for (uint32_t i = 0; i < n->ndirty; i++)
        n->res[n->dirty[i]].dirty = false;
    n->ndirty = 0;
}

/* ---- bookkeeping ---- */

/* Counts a sharing flow on its resources (at n->now_ps). */
static void attach(struct flow_net *n, uint32_t id)
{
    const struct flow_net_flow *f = &n->flows[id];
    for (uint32_t k = 0; k < f->path_len; k++) {
        struct flow_net_res *r = &n->res[f->path[k]];
        if (!n->congestion_free)
            ids_insert(n, r->flows, r->nflows, id);
        if (r->nflows++ == 0)
            r->busy_since = n->now_ps;
    }
}

/* Takes a sharing flow off its resources (at n->now_ps). */
static void detach(struct flow_net *n, uint32_t id)
{
    const struct flow_net_flow *f = &n->flows[id];
    for (uint32_t k = 0; k < f->path_len; k++) {
        struct flow_net_res *r = &n->res[f->path[k]];
        if (!n->congestion_free)
            ids_erase(n, r->flows, r->nflows, id);
        if (--r->nflows == 0)
            r->busy_ps += n->now_ps - r->busy_since;
    }
}

/* Whole bytes a flow has moved (total minus the remaining amount rounded up). */
static uint64_t bytes_done(const struct flow_net_flow *f)
{
    return f->bytes - u128_div_ceil(f->rem, FLOW_NET_PS_PER_S);
}

/* Smallest capacity along a non-empty path. */
static uint64_t path_min_capacity(const struct flow_net *n, const struct flow_net_flow *f)
{
    uint64_t c = UINT64_MAX;
    for (uint32_t k = 0; k < f->path_len; k++)
        if (n->res[f->path[k]].capacity < c)
            c = n->res[f->path[k]].capacity;
    return c;
}

/* ---- allocation ---- */

static size_t grown(size_t cap, size_t need)
{
    size_t c = cap ? cap : 16;
    while (c < need)
        c *= 2;
    return c;
}

/* Room for one more flow in the lists of a path's resources. */
static int reserve_lists(struct flow_net *n, const uint32_t *path, uint32_t path_len)
{
    for (uint32_t k = 0; k < path_len; k++) {
        struct flow_net_res *r = &n->res[path[k]];
        if (r->nflows < r->flows_cap)
            continue;
        size_t cap = grown(r->flows_cap, (size_t)r->nflows + 1);
        uint32_t *l = realloc(r->flows, cap * sizeof(*l));
        if (!l)
            return NPU_ERR_NOMEM;
        r->flows = l;
        r->flows_cap = (uint32_t)cap;
    }
    return NPU_OK;
}

/* Reallocates an id array to cap entries. */
static int grow_ids(uint32_t **ids, uint32_t cap)
{
    uint32_t *p = realloc(*ids, cap * sizeof(*p));
    if (!p)
        return NPU_ERR_NOMEM;
    *ids = p;
    return NPU_OK;
}

/* Doubles the id slots (and the per-flow id arrays with them); the new ids become free. */
static int grow_slots(struct flow_net *n)
{
    if (n->nslots > UINT32_MAX / 2)
        return NPU_ERR_NOMEM;
    uint32_t cap = n->nslots ? 2 * n->nslots : 8;
    struct flow_net_flow *flows = realloc(n->flows, cap * sizeof(*flows));
    if (!flows)
        return NPU_ERR_NOMEM;
    n->flows = flows;
    memset(&flows[n->nslots], 0, (cap - n->nslots) * sizeof(*flows));
    /* on failure the larger arrays stay, unused until a later grow */
    if (grow_ids(&n->order, cap) || grow_ids(&n->free_ids, cap) || grow_ids(&n->comp, cap))
        return NPU_ERR_NOMEM;
    struct flow_net_due *due = realloc(n->due, cap * sizeof(*due));
    if (!due)
        return NPU_ERR_NOMEM;
    n->due = due;
    for (uint32_t s = n->nslots; s < cap; s++)
        free_push(n, s);
    n->nslots = cap;
    return NPU_OK;
}

/* Lowest free id (left free until the add commits), with the path copied into its slot. */
static int take_slot(struct flow_net *n, const uint32_t *path, uint32_t path_len, uint32_t *id)
{
    if (n->nfree == 0) {
        int rc = grow_slots(n);
        if (rc)
            return rc;
    }
    uint32_t s = n->free_ids[0];
    struct flow_net_flow *f = &n->flows[s];
    if (path_len > f->path_cap) {
        uint32_t *p = realloc(f->path, path_len * sizeof(*p));
        if (!p)
            return NPU_ERR_NOMEM;
        f->path = p;
        f->path_cap = path_len;
    }
    if (path_len)
        memcpy(f->path, path, path_len * sizeof(*path));
    f->path_len = path_len;
    *id = s;
    return NPU_OK;
}

/* Path in range and without repeats; room on every resource when the flow shares. */
static int check_path(struct flow_net *n, const uint32_t *path, uint32_t path_len, bool shares)
{
    uint32_t mark = next_mark(n);
    for (uint32_t k = 0; k < path_len; k++) {
        if (path[k] >= n->nres)
            return NPU_ERR_RANGE;
        struct flow_net_res *r = &n->res[path[k]];
        if (r->mark == mark)
            return NPU_ERR_INVAL;
        r->mark = mark;
        if (shares && !n->congestion_free && r->nflows >= r->capacity)
            return NPU_ERR_RANGE;
    }
    return NPU_OK;
}

/* ---- API ---- */

int flow_net_init(struct flow_net *n, uint32_t nresources, const uint64_t *capacity_bytes_per_s,
                  bool congestion_free)
{
    if (!n)
        return NPU_ERR_INVAL;
    memset(n, 0, sizeof(*n));
    if (nresources && !capacity_bytes_per_s)
        return NPU_ERR_INVAL;
    for (uint32_t r = 0; r < nresources; r++)
        if (capacity_bytes_per_s[r] == 0)
            return NPU_ERR_INVAL;
    size_t count = nresources ? nresources : 1;
    n->res = calloc(count, sizeof(*n->res));
    n->comp_res = calloc(count, sizeof(*n->comp_res));
    n->touched = calloc(count, sizeof(*n->touched));
    n->dirty = calloc(count, sizeof(*n->dirty));
    n->heap = calloc(count, sizeof(*n->heap));
    if (!n->res || !n->comp_res || !n->touched || !n->dirty || !n->heap) {
        flow_net_destroy(n);
        return NPU_ERR_NOMEM;
    }
    n->nres = nresources;
    n->congestion_free = congestion_free;
    for (uint32_t r = 0; r < nresources; r++)
        n->res[r].capacity = capacity_bytes_per_s[r];
    return NPU_OK;
}

void flow_net_destroy(struct flow_net *n)
{
    if (!n)
        return;
    for (uint32_t s = 0; s < n->nslots; s++)
        free(n->flows[s].path);
    for (uint32_t r = 0; n->res && r < n->nres; r++)
        free(n->res[r].flows);
    free(n->flows);
    free(n->order);
    free(n->due);
    free(n->free_ids);
    free(n->comp);
    free(n->res);
    free(n->comp_res);
    free(n->touched);
    free(n->dirty);
    free(n->heap);
    memset(n, 0, sizeof(*n));
}

int flow_net_set_capacity(struct flow_net *n, uint32_t resource, uint64_t bytes_per_s)
{
    if (!n)
        return NPU_ERR_INVAL;
    if (resource >= n->nres)
        return NPU_ERR_RANGE;
    if (bytes_per_s == 0)
        return NPU_ERR_INVAL;
    if (n->res[resource].nflows != 0)
        return NPU_ERR_STATE;
    n->res[resource].capacity = bytes_per_s;
    return NPU_OK;
}

/* Makes free slot s an active flow started at n->now_ps (path already copied in). */
static void start_flow(struct flow_net *n, uint32_t s, uint64_t key, uint64_t bytes, bool shares)
{
    struct flow_net_flow *f = &n->flows[s];
    free_pop(n); /* s, the lowest free id */
    f->active = true;
    f->shares = shares;
    f->key = key;
    f->bytes = bytes;
    f->last_ps = f->end_ps = n->now_ps;
    f->rem = mul64(shares ? bytes : 0, FLOW_NET_PS_PER_S);
    f->rate = shares ? path_min_capacity(n, f) : FLOW_NET_UNLIMITED;
    ids_insert(n, n->order, n->nactive++, s);
    if (shares) {
        attach(n, s);
        /* congested: the pending re-solve sets it; NEVER keeps the flow low in the heap (and
         * out of next_completion's answers without a re-solve) till then */
        f->end_ps = n->congestion_free ? end_time(f) : FLOW_NET_NEVER;
    }
    due_insert(n, s);
}

int flow_net_add(struct flow_net *n, uint64_t now_ps, uint64_t key, const uint32_t *path,
                 uint32_t path_len, uint64_t bytes, uint32_t *id)
{
    if (!n || !id || (path_len && !path))
        return NPU_ERR_INVAL;
    if (now_ps < n->now_ps)
        return NPU_ERR_RANGE;
    bool shares = bytes != 0 && path_len != 0;
    bool resolve = shares && !n->congestion_free;
    int rc = check_path(n, path, path_len, shares);
    if (rc)
        return rc;
    if (key_is_active(n, key))
        return NPU_ERR_INVAL;
    uint32_t s;
    rc = take_slot(n, path, path_len, &s);
    if (!rc && resolve)
        rc = reserve_lists(n, path, path_len);
    if (rc)
        return rc;
    if (now_ps != n->now_ps)
        flush(n); /* the pending re-solve belongs to the earlier time */
    n->now_ps = now_ps;
    start_flow(n, s, key, bytes, shares);
    if (resolve)
        mark_dirty(n, path, path_len);
    *id = s;
    return NPU_OK;
}

bool flow_net_next_completion(struct flow_net *n, uint64_t *time_ps, uint32_t *id)
{
    if (!n || n->ndue == 0)
        return false;
    /* An earliest completion at or before now_ps is final without the pending re-solve: that
     * flow had nothing left at now_ps, and any flow the re-solve could move completes after
     * now_ps (see flow_net.h). Only a later one needs the re-solve first. */
    if (n->due[0].end_ps > n->now_ps)
        flush(n);
    uint32_t best = n->due[0].id; /* lowest (end_ps, key) */
    if (time_ps)
        *time_ps = n->flows[best].end_ps;
    if (id)
        *id = best;
    return true;
}

int flow_net_remove(struct flow_net *n, uint64_t now_ps, uint32_t id)
{
    if (!n || id >= n->nslots || !n->flows[id].active)
        return NPU_ERR_INVAL;
    if (now_ps < n->now_ps)
        return NPU_ERR_RANGE;
    struct flow_net_flow *f = &n->flows[id];
    bool resolve = f->shares && !n->congestion_free;
    if (now_ps != n->now_ps)
        flush(n); /* the rate of f up to now_ps may be pending */
    rebase(f, now_ps);
    n->now_ps = now_ps;
    uint64_t done = bytes_done(f);
    for (uint32_t k = 0; k < f->path_len; k++)
        n->res[f->path[k]].bytes += done;
    due_erase(n, id);
    ids_erase(n, n->order, n->nactive--, id);
    if (f->shares)
        detach(n, id);
    f->active = false;
    free_push(n, id);
    if (resolve)
        mark_dirty(n, f->path, f->path_len); /* the resources it left */
    return NPU_OK;
}

/* An active flow, with the pending re-solve done so that its rate and end time are current. */
static const struct flow_net_flow *active_flow(struct flow_net *n, uint32_t id)
{
    if (!n || id >= n->nslots || !n->flows[id].active)
        return NULL;
    flush(n);
    return &n->flows[id];
}

uint64_t flow_net_rate(struct flow_net *n, uint32_t id)
{
    const struct flow_net_flow *f = active_flow(n, id);
    return f ? f->rate : 0;
}

uint64_t flow_net_remaining(struct flow_net *n, uint64_t now_ps, uint32_t id)
{
    const struct flow_net_flow *f = active_flow(n, id);
    if (!f)
        return 0;
    /* A time before the latest re-solve counts as it (see flow_net.h): flows outside its
     * component were not rebased, but their amount at that time is the same. */
    uint64_t t = now_ps < n->solved_ps ? n->solved_ps : now_ps;
    return u128_div_ceil(rem_at(f, t), FLOW_NET_PS_PER_S);
}

uint64_t flow_net_end_ps(struct flow_net *n, uint32_t id)
{
    const struct flow_net_flow *f = active_flow(n, id);
    return f ? f->end_ps : FLOW_NET_NEVER;
}

uint32_t flow_net_active_count(const struct flow_net *n)
{
    return n ? n->nactive : 0;
}

uint32_t flow_net_resource_flows(const struct flow_net *n, uint32_t resource)
{
    return n && resource < n->nres ? n->res[resource].nflows : 0;
}

uint64_t flow_net_resource_bytes(const struct flow_net *n, uint32_t resource)
{
    return n && resource < n->nres ? n->res[resource].bytes : 0;
}

uint64_t flow_net_resource_busy_ps(const struct flow_net *n, uint32_t resource, uint64_t now_ps)
{
    if (!n || resource >= n->nres)
        return 0;
    const struct flow_net_res *r = &n->res[resource];
    uint64_t busy = r->busy_ps;
    if (r->nflows != 0 && now_ps > r->busy_since)
        busy += now_ps - r->busy_since;
    return busy;
}
