/* SPDX-License-Identifier: MIT */
/*
 * Flow-level bandwidth sharing (design brief, section 4: NoC and HBM contention).
 *
 * A resource is anything with a bandwidth: one NoC link per direction between neighbouring
 * routers, an HBM channel, ... Each has a capacity in bytes per second. A flow is a data
 * transfer: a path (a list of distinct resource indices), a number of bytes and a
 * deterministic key (unique among active flows; the caller builds it from chip time order).
 *
 * Rates are the max-min fair allocation by progressive filling (water-filling): repeatedly
 * take the most constrained resource, the one whose remaining capacity divided by its number
 * of unfrozen flows is smallest (ties: lowest resource index), give each of its unfrozen flows
 * that share, freeze them and subtract their rate from the other resources on their paths.
 * The allocation is re-solved at every time at which a flow that uses bandwidth starts or
 * ends (once for all the calls at that time: see "Deferred re-solves"); in between each flow
 * progresses linearly at its rate. In congestion-free mode a flow simply gets the smallest
 * capacity along its path, whatever the other flows do, and nothing is re-solved.
 *
 * A flow with no bytes or an empty path (a local copy) is instant: it completes at its start
 * time, takes no bandwidth and triggers no re-solve. Its rate reads FLOW_NET_UNLIMITED.
 *
 * Usage: after every add or remove, ask flow_net_next_completion() and schedule an event at
 * that time; when it fires, remove every flow whose completion time has been reached (in the
 * order next_completion gives them). Removing a flow before its completion cancels it.
 *
 * Numeric choices (no floating point anywhere: results are bit-identical on every host,
 * compiler and optimisation level, and depend only on the sequence of calls):
 * - Time is integer picoseconds, rates are integer bytes per second. Progress is counted in
 *   picobytes (1e-12 byte) in 128-bit integers, so rate [B/s] x time [ps] = picobytes exactly.
 *   A re-solve rebases each flow of its component to the current time without any rounding,
 *   so a flow whose rate does not change keeps exactly the same completion time however many
 *   re-solves happen, and at whatever times (and whether or not they rebase it).
 * - Shares are floored to whole bytes per second: a flow frozen at resource r gets
 *   floor(remaining capacity of r / unfrozen flows on r). The error is below 1 B/s per flow
 *   (1e-9 relative at 1 GB/s); the sum of rates on a resource never exceeds its capacity, and
 *   a saturated resource is left with fewer unused bytes per second than it has flows.
 *   Example: three equal flows on a 1 GB/s link get 333333333 B/s each.
 * - Completion time = last update + ceil(remaining picobytes / rate), the first picosecond at
 *   which every byte has moved: flow_net_remaining() is exactly 0 from that time on and
 *   positive before it. A flow with bytes left always completes strictly after the last
 *   update. Completion times saturate at FLOW_NET_NEVER (UINT64_MAX; a transfer of over
 *   200 days of chip time).
 * - Every sharing flow gets at least 1 B/s, so every flow completes: with floored shares the
 *   smallest rate is min over resources of floor(capacity / flows on it), so the model needs
 *   capacity >= number of active flows on each resource. An add that would break that fails
 *   with NPU_ERR_RANGE (never the case for real bandwidths: 1 GB/s allows 1e9 flows).
 *
 * Locality: starting or ending a flow can only change the rates of the flows of its
 * component, the flows linked to it through shared resources, transitively (progressive
 * filling never links two components: freezing a flow only touches the resources of its
 * path, and resource ties are broken by index within each component as in a solve of all
 * flows). So a re-solve searches only the components of the resources whose flows changed
 * (breadth-first over per-resource flow lists), rebases only their flows, re-solves only
 * them and recomputes only their completion times; every other flow keeps its state
 * untouched, and since rebasing is exact its rate and completion time are exactly the ones a
 * solve of all flows would give. A query of the remaining bytes at a time before the latest
 * re-solve counts as that re-solve's time, as if every flow had been rebased there
 * (flow_net_remaining()).
 *
 * Deferred re-solves: many flows start and end at the same picosecond (cores issue their
 * transfers in lockstep), so an add or remove only records the resources of its path, and one
 * re-solve at that time covers the components of all of them. It runs when a result needs it:
 * a query of a rate, remaining amount or end time, a next_completion whose answer is later
 * than that time, or an add or remove at a later time (before anything else is done). This
 * gives bit-identical results to a re-solve after every call: all the calls it covers are at
 * one time t, so no flow makes progress between them and the rates they would have set in
 * between are never used; the solve depends only on the flows active after the last of them
 * (rates from paths and capacities, ties by resource index; no order of calls enters), and
 * every flow is rebased exactly to t as the per-call re-solves would have. The checks of
 * add and remove (the time, the number of flows on a resource) use counts kept per call,
 * never the rates. next_completion answers without the re-solve when the earliest
 * completion is at or before t: a flow whose completion time is <= t had nothing left at t
 * at the rate it had up to t, so no re-solve at t moves it, and every flow a re-solve at t
 * could move (a new one, or one with bytes left at t) completes after t.
 *
 * Complexity, with F active flows (instant ones included), L the path length of the flow
 * added or removed, and M the most flows on one resource of its path:
 * - add / remove: O(L (M + log M)) for the key-ordered flow lists of its resources (congested
 *   mode), O(L) to record them for the re-solve, plus O(log F) for the lowest free id and
 *   the key lookup and a memmove of at most F 32-bit ids (the key-ordered list of active
 *   flows); and the pending re-solve first when the time moves on.
 * - a re-solve, with C the sharing flows of the components it covers, P_C their total path
 *   length and B_C the resources they cross (B_C <= P_C): O(B_C + P_C) for the search,
 *   O(B_C + P_C log B_C) for progressive filling (a binary heap holding each resource once,
 *   keyed by (share, index), updated once per bottleneck for each resource its flows cross),
 *   one 128-by-64-bit division per flow for its completion time (one native 64-bit division
 *   while less than 18 MB are left) and O(C log F) to reorder the completion heap. With
 *   flows on separate resources (C = 1) this is O(L + log F).
 * - next_completion, rate, remaining, end time: O(1) plus the pending re-solve if they need
 *   it; counters: O(1).
 * Memory: O(resources + id slots + total path length of the sharing flows).
 *
 * Not thread-safe; no global state. Returns 0 (NPU_OK) or a negative enum npu_status.
 */
#ifndef FLOW_NET_H
#define FLOW_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FLOW_NET_PS_PER_S 1000000000000ull
/* Completion time of a flow that never completes (or is not active). */
#define FLOW_NET_NEVER UINT64_MAX
/* Rate of an instant flow (no bytes or empty path). */
#define FLOW_NET_UNLIMITED UINT64_MAX

struct flow_net_res;       /* private to flow_net.c */
struct flow_net_flow;      /* private to flow_net.c */
struct flow_net_heap_ent;  /* private to flow_net.c */
struct flow_net_due;       /* private to flow_net.c */

/* The whole model. Callers allocate it; fields are private to flow_net.c (tests and reports
 * may read `solves` and `solved_flows`). The queries that may run the pending re-solve take
 * it non-const. */
struct flow_net {
    uint32_t nres;
    bool congestion_free;
    struct flow_net_res *res;     /* [nres] */
    struct flow_net_flow *flows;  /* [nslots] id slots */
    uint32_t nslots;
    uint32_t *order;              /* [nslots] ids of the active flows by ascending key */
    uint32_t nactive;
    struct flow_net_due *due;     /* [nslots] active flows: binary min-heap by (end, key) */
    uint32_t ndue;
    uint32_t *free_ids;           /* [nslots] free ids: binary min-heap */
    uint32_t nfree;
    uint64_t now_ps;              /* latest time given to add or remove */
    uint64_t solved_ps;           /* time of the latest re-solve */
    uint32_t mark_gen;            /* path duplicate check, component search */
    uint32_t *dirty;              /* [nres] resources whose components await a re-solve */
    uint32_t ndirty;
    uint32_t *comp;               /* [nslots] solver: flows of the components */
    uint32_t ncomp;
    uint32_t *comp_res;           /* [nres] solver: resources of the components */
    uint32_t ncomp_res;
    uint32_t *touched;            /* [nres] solver: resources a bottleneck's flows cross */
    struct flow_net_heap_ent *heap; /* [nres] solver: resources by (share, index) */
    uint32_t heap_len;
    uint64_t solves;              /* re-solves so far */
    uint64_t solved_flows;        /* flows re-solved so far, summed over the re-solves */
};

/*
 * Sets up a model of `nresources` resources with the given capacities (bytes per second,
 * each >= 1; `capacity_bytes_per_s` may be NULL when nresources is 0). NPU_ERR_INVAL for a
 * bad argument, NPU_ERR_NOMEM. On failure *n is left destroyed (safe to destroy again).
 */
int flow_net_init(struct flow_net *n, uint32_t nresources, const uint64_t *capacity_bytes_per_s,
                  bool congestion_free);

/* Frees everything; *n may then be initialised again. */
void flow_net_destroy(struct flow_net *n);

/*
 * Changes the capacity of a resource that no active flow crosses. NPU_ERR_RANGE for a bad
 * index, NPU_ERR_INVAL for 0, NPU_ERR_STATE while a flow crosses it.
 */
int flow_net_set_capacity(struct flow_net *n, uint32_t resource, uint64_t bytes_per_s);

/*
 * Starts a flow at now_ps (its component is re-solved when a result needs it, see above);
 * *id receives its id, the lowest free one (ids are small integers, reused once a flow is
 * removed). Errors leave the model unchanged: NPU_ERR_INVAL for a NULL argument, a key
 * already active or a resource repeated in the path; NPU_ERR_RANGE for now_ps before the
 * latest time used, a resource index out of range, or (congested mode, flows with bytes only)
 * a resource whose capacity in B/s would be below its number of flows; NPU_ERR_NOMEM.
 */
int flow_net_add(struct flow_net *n, uint64_t now_ps, uint64_t key, const uint32_t *path,
                 uint32_t path_len, uint64_t bytes, uint32_t *id);

/*
 * The earliest completion among the active flows (ties: lowest key): its time and id (either
 * pointer may be NULL). False if no flow is active. The time may be earlier than the latest
 * time used when a completed flow has not been removed yet. Runs the pending re-solve only
 * when the answer is later than the latest time used.
 */
bool flow_net_next_completion(struct flow_net *n, uint64_t *time_ps, uint32_t *id);

/*
 * Ends flow `id` at now_ps (the re-solve is deferred as for an add). Normally now_ps is its
 * completion time; earlier cancels it (the bytes moved so far are counted), later keeps its
 * bandwidth allocated until now_ps. NPU_ERR_INVAL for an id that is not active,
 * NPU_ERR_RANGE for now_ps before the latest time used.
 */
int flow_net_remove(struct flow_net *n, uint64_t now_ps, uint32_t id);

/* Current rate of an active flow in bytes/s: FLOW_NET_UNLIMITED if instant, 0 if not active. */
uint64_t flow_net_rate(struct flow_net *n, uint32_t id);

/*
 * Bytes an active flow still has to move at now_ps (rounded up; now_ps before the flow's
 * start, or in congested mode before the latest re-solve, counts as that time), 0 if not
 * active.
 */
uint64_t flow_net_remaining(struct flow_net *n, uint64_t now_ps, uint32_t id);

/* Completion time of an active flow at its current rate, FLOW_NET_NEVER if not active. */
uint64_t flow_net_end_ps(struct flow_net *n, uint32_t id);

/* Number of active flows (instant ones included, until removed). */
uint32_t flow_net_active_count(const struct flow_net *n);

/* Number of active sharing flows crossing a resource (0 for a bad index). */
uint32_t flow_net_resource_flows(const struct flow_net *n, uint32_t resource);

/*
 * Bytes carried by a resource: the bytes of every flow that crossed it, counted when the flow
 * is removed (whole bytes moved so far for a cancelled flow). 0 for a bad index.
 */
uint64_t flow_net_resource_bytes(const struct flow_net *n, uint32_t resource);

/*
 * Time during which at least one sharing flow crossed the resource (not necessarily at full
 * capacity), up to now_ps. 0 for a bad index.
 */
uint64_t flow_net_resource_busy_ps(const struct flow_net *n, uint32_t resource, uint64_t now_ps);

#endif
