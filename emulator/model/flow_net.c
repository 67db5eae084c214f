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
    uint32_t busy_pos;   /* index in flow_net.busy while nflows > 0 */
    uint32_t mark;       /* == flow_net.mark_gen: already seen in the path being checked */
    uint32_t unfrozen;   /* solver: flows not frozen yet */
    uint64_t avail;      /* solver: capacity not yet given to frozen flows */
    size_t first;        /* solver: its flows are members[first .. first + nflows) */
    size_t fill;         /* solver: next free member slot while building */
};

struct flow_net_flow {
    bool active;
    bool shares;       /* bytes > 0 and a non-empty path: takes bandwidth */
    bool frozen;       /* solver */
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

/* Rebases every sharing flow to time t. */
static void advance(struct flow_net *n, uint64_t t)
{
    for (uint32_t i = 0; i < n->nactive; i++) {
        struct flow_net_flow *f = &n->flows[n->order[i]];
        if (f->shares)
            rebase(f, t);
    }
}

/* ---- solver: progressive filling with a lazy heap of resources ---- */

static bool ent_before(const struct flow_net_heap_ent *a, const struct flow_net_heap_ent *b)
{
    return a->share != b->share ? a->share < b->share : a->res < b->res;
}

static void ent_swap(struct flow_net_heap_ent *a, struct flow_net_heap_ent *b)
{
    struct flow_net_heap_ent t = *a;
    *a = *b;
    *b = t;
}

/* Capacity is reserved by the caller: heap_cap >= nres + sum_len (see solve_freeze). */
static void heap_push(struct flow_net *n, uint64_t share, uint32_t res)
{
    size_t i = n->heap_len++;
    n->heap[i].share = share;
    n->heap[i].res = res;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!ent_before(&n->heap[i], &n->heap[parent]))
            break;
        ent_swap(&n->heap[i], &n->heap[parent]);
        i = parent;
    }
}

static bool heap_pop(struct flow_net *n, struct flow_net_heap_ent *out)
{
    if (n->heap_len == 0)
        return false;
    *out = n->heap[0];
    n->heap[0] = n->heap[--n->heap_len];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n->heap_len && ent_before(&n->heap[l], &n->heap[m]))
            m = l;
        if (r < n->heap_len && ent_before(&n->heap[r], &n->heap[m]))
            m = r;
        if (m == i)
            break;
        ent_swap(&n->heap[i], &n->heap[m]);
        i = m;
    }
    return true;
}

static uint64_t share_of(const struct flow_net_res *r)
{
    return r->avail / r->unfrozen;
}

/* Resets the busy resources, lists each one's flows (in key order) and fills the heap. */
static void solve_setup(struct flow_net *n)
{
    size_t first = 0;
    n->heap_len = 0;
    for (uint32_t b = 0; b < n->nbusy; b++) {
        struct flow_net_res *r = &n->res[n->busy[b]];
        r->avail = r->capacity;
        r->unfrozen = r->nflows;
        r->first = r->fill = first;
        first += r->nflows;
        heap_push(n, share_of(r), n->busy[b]);
    }
    for (uint32_t i = 0; i < n->nactive; i++) {
        struct flow_net_flow *f = &n->flows[n->order[i]];
        if (!f->shares)
            continue;
        f->frozen = false;
        for (uint32_t k = 0; k < f->path_len; k++)
            n->members[n->res[f->path[k]].fill++] = n->order[i];
    }
}

/*
 * Freezes every unfrozen flow of bottleneck `res` at `share` and takes it off the other
 * resources of its path. A resource whose share changes gets a fresh heap entry (shares only
 * grow, so the old entry becomes stale and is skipped when popped). Pushes are bounded by
 * busy resources + total path length.
 */
static void solve_freeze(struct flow_net *n, uint32_t res, uint64_t share)
{
    const struct flow_net_res *bottleneck = &n->res[res];
    for (size_t m = bottleneck->first; m < bottleneck->first + bottleneck->nflows; m++) {
        struct flow_net_flow *f = &n->flows[n->members[m]];
        if (f->frozen)
            continue;
        f->frozen = true;
        f->rate = share;
        for (uint32_t k = 0; k < f->path_len; k++) {
            struct flow_net_res *q = &n->res[f->path[k]];
            uint64_t old = share_of(q);
            q->avail -= share;
            if (--q->unfrozen != 0 && f->path[k] != res && share_of(q) != old)
                heap_push(n, share_of(q), f->path[k]);
        }
    }
}

/* Max-min fair rates for every sharing flow, then their completion times. */
static void solve(struct flow_net *n)
{
    struct flow_net_heap_ent e;
    solve_setup(n);
    while (heap_pop(n, &e)) {
        const struct flow_net_res *r = &n->res[e.res];
        if (r->unfrozen != 0 && share_of(r) == e.share)
            solve_freeze(n, e.res, e.share);
    }
    for (uint32_t i = 0; i < n->nactive; i++) {
        struct flow_net_flow *f = &n->flows[n->order[i]];
        if (f->shares)
            f->end_ps = end_time(f);
    }
    n->solves++;
}

/* ---- bookkeeping ---- */

/* Position of the first active flow whose key is >= key. */
static uint32_t order_pos(const struct flow_net *n, uint64_t key)
{
    uint32_t lo = 0, hi = n->nactive;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (n->flows[n->order[mid]].key < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static bool key_is_active(const struct flow_net *n, uint64_t key)
{
    uint32_t pos = order_pos(n, key);
    return pos < n->nactive && n->flows[n->order[pos]].key == key;
}

static void order_insert(struct flow_net *n, uint32_t id)
{
    uint32_t pos = order_pos(n, n->flows[id].key);
    memmove(&n->order[pos + 1], &n->order[pos], (n->nactive - pos) * sizeof(*n->order));
    n->order[pos] = id;
    n->nactive++;
}

static void order_erase(struct flow_net *n, uint32_t id)
{
    uint32_t pos = order_pos(n, n->flows[id].key);
    n->nactive--;
    memmove(&n->order[pos], &n->order[pos + 1], (n->nactive - pos) * sizeof(*n->order));
}

/* Counts a sharing flow on its resources (at n->now_ps). */
static void attach(struct flow_net *n, const struct flow_net_flow *f)
{
    for (uint32_t k = 0; k < f->path_len; k++) {
        struct flow_net_res *r = &n->res[f->path[k]];
        if (r->nflows++ == 0) {
            r->busy_since = n->now_ps;
            r->busy_pos = n->nbusy;
            n->busy[n->nbusy++] = f->path[k];
        }
    }
    n->sum_len += f->path_len;
}

/* Takes a sharing flow off its resources (at n->now_ps). */
static void detach(struct flow_net *n, const struct flow_net_flow *f)
{
    for (uint32_t k = 0; k < f->path_len; k++) {
        struct flow_net_res *r = &n->res[f->path[k]];
        if (--r->nflows == 0) {
            uint32_t moved = n->busy[--n->nbusy];
            r->busy_ps += n->now_ps - r->busy_since;
            n->busy[r->busy_pos] = moved;
            n->res[moved].busy_pos = r->busy_pos;
        }
    }
    n->sum_len -= f->path_len;
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

/* Makes the solver scratch large enough for `extra` more path entries. */
static int reserve_scratch(struct flow_net *n, size_t extra)
{
    size_t need = n->sum_len + extra;
    if (need > n->members_cap) {
        size_t cap = grown(n->members_cap, need);
        uint32_t *m = realloc(n->members, cap * sizeof(*m));
        if (!m)
            return NPU_ERR_NOMEM;
        n->members = m;
        n->members_cap = cap;
    }
    need += n->nres;
    if (need > n->heap_cap) {
        size_t cap = grown(n->heap_cap, need);
        struct flow_net_heap_ent *h = realloc(n->heap, cap * sizeof(*h));
        if (!h)
            return NPU_ERR_NOMEM;
        n->heap = h;
        n->heap_cap = cap;
    }
    return NPU_OK;
}

/* Doubles the id slots (and the key-ordered list with them). */
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
    uint32_t *order = realloc(n->order, cap * sizeof(*order));
    if (!order)
        return NPU_ERR_NOMEM; /* the larger flows array stays, unused until a later grow */
    n->order = order;
    n->nslots = cap;
    return NPU_OK;
}

/* Lowest free id, with room for the path copied into its slot. */
static int take_slot(struct flow_net *n, const uint32_t *path, uint32_t path_len, uint32_t *id)
{
    if (n->nactive == n->nslots) {
        int rc = grow_slots(n);
        if (rc)
            return rc;
    }
    uint32_t s = 0;
    while (n->flows[s].active)
        s++;
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
    if (++n->mark_gen == 0) {
        for (uint32_t r = 0; r < n->nres; r++)
            n->res[r].mark = 0;
        n->mark_gen = 1;
    }
    for (uint32_t k = 0; k < path_len; k++) {
        if (path[k] >= n->nres)
            return NPU_ERR_RANGE;
        struct flow_net_res *r = &n->res[path[k]];
        if (r->mark == n->mark_gen)
            return NPU_ERR_INVAL;
        r->mark = n->mark_gen;
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
    n->busy = calloc(count, sizeof(*n->busy));
    if (!n->res || !n->busy) {
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
    free(n->flows);
    free(n->order);
    free(n->res);
    free(n->busy);
    free(n->members);
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

int flow_net_add(struct flow_net *n, uint64_t now_ps, uint64_t key, const uint32_t *path,
                 uint32_t path_len, uint64_t bytes, uint32_t *id)
{
    if (!n || !id || (path_len && !path))
        return NPU_ERR_INVAL;
    if (now_ps < n->now_ps)
        return NPU_ERR_RANGE;
    bool shares = bytes != 0 && path_len != 0;
    int rc = check_path(n, path, path_len, shares);
    if (rc)
        return rc;
    if (key_is_active(n, key))
        return NPU_ERR_INVAL;
    uint32_t s;
    rc = take_slot(n, path, path_len, &s);
    if (!rc && shares && !n->congestion_free)
        rc = reserve_scratch(n, path_len);
    if (rc)
        return rc;
    if (shares && !n->congestion_free)
        advance(n, now_ps);
    n->now_ps = now_ps;
    struct flow_net_flow *f = &n->flows[s];
    f->active = true;
    f->shares = shares;
    f->key = key;
    f->bytes = bytes;
    f->last_ps = f->end_ps = now_ps;
    f->rem = mul64(shares ? bytes : 0, FLOW_NET_PS_PER_S);
    f->rate = shares ? path_min_capacity(n, f) : FLOW_NET_UNLIMITED;
    order_insert(n, s);
    if (shares) {
        attach(n, f);
        if (n->congestion_free)
            f->end_ps = end_time(f);
        else
            solve(n);
    }
    *id = s;
    return NPU_OK;
}

bool flow_net_next_completion(const struct flow_net *n, uint64_t *time_ps, uint32_t *id)
{
    if (!n || n->nactive == 0)
        return false;
    uint32_t best = n->order[0]; /* key order: the first of equal times wins */
    for (uint32_t i = 1; i < n->nactive; i++)
        if (n->flows[n->order[i]].end_ps < n->flows[best].end_ps)
            best = n->order[i];
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
    if (resolve)
        advance(n, now_ps);
    else
        rebase(f, now_ps);
    n->now_ps = now_ps;
    uint64_t done = bytes_done(f);
    for (uint32_t k = 0; k < f->path_len; k++)
        n->res[f->path[k]].bytes += done;
    order_erase(n, id);
    if (f->shares)
        detach(n, f);
    f->active = false;
    if (resolve)
        solve(n);
    return NPU_OK;
}

static const struct flow_net_flow *active_flow(const struct flow_net *n, uint32_t id)
{
    if (!n || id >= n->nslots || !n->flows[id].active)
        return NULL;
    return &n->flows[id];
}

uint64_t flow_net_rate(const struct flow_net *n, uint32_t id)
{
    const struct flow_net_flow *f = active_flow(n, id);
    return f ? f->rate : 0;
}

uint64_t flow_net_remaining(const struct flow_net *n, uint64_t now_ps, uint32_t id)
{
    const struct flow_net_flow *f = active_flow(n, id);
    return f ? u128_div_ceil(rem_at(f, now_ps), FLOW_NET_PS_PER_S) : 0;
}

uint64_t flow_net_end_ps(const struct flow_net *n, uint32_t id)
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
