/* SPDX-License-Identifier: MIT */
/*
 * Collectives image, NPU core: every collective on every placement and group size (2, 3, 4,
 * 8, 16, 64 where the mesh has room), with counts of 1, 3 * size + 1 (does not divide) and
 * 4103 (several 1 KiB segments per part, so the receive slots are reused), in bf16 and fp32,
 * each checked against the hart's reference. Groups of a case are tiled over the mesh and
 * run side by side; a whole-mesh barrier (slot 1) separates the cases.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "coll_checks.h"
#include "coll_data.h"
#include "noc/collective.h"
#include "noc/noc.h"
#include "npu/hal.h"
#include "npu/vector.h"
#include "npu/wait.h"

extern char __image_end[];
#define SEGMENT 1024u
#define SCRATCH_BYTES (64u << 10)

#define expect(ok, check, ...) checks_expect((ok), (check), ccheck_names[check], __VA_ARGS__)

static struct noc_group case_group, mesh_group;
static struct noc_comm case_comm, mesh_comm;
static uint32_t m2n_counts[NOC_GROUP_MAX];
static uint32_t plan_store[NOC_M2N_PAIRS_MAX];
static uint32_t a2av_counts[2 * NOC_GROUP_MAX]; /* in SRAM, as the image is */
static uint32_t a2av_first[NOC_GROUP_MAX + 1];

/* This core's free SRAM (the same layout on every core): buf, buf2 (3/8 of it each), then
   the scratch of the case communicators and of the whole-mesh one. */
static uint64_t data_base(void)
{
    return ((uint64_t)(uintptr_t)__image_end + 0xffff) & ~0xffffull;
}

static uint64_t region_bytes(void)
{
    const struct hal_core_info *self = hal_self();
    uint64_t free = self->sram_base + self->sram_size - noc_reserved_bytes() - data_base();
    return (free - 2 * SCRATCH_BYTES) / 2 & ~0xffffull;
}

static uint64_t buf2_of(uint64_t data)
{
    return data + region_bytes();
}

static uint64_t scratch_of(uint64_t data)
{
    return data + 2 * region_bytes();
}

static const char *kind_name(uint32_t kind)
{
    static const char *const names[] = { "placement", "barrier", "broadcast", "allgather",
                                         "reduce_scatter", "allreduce", "alltoall", "m2n",
                                         "alltoallv" };
    return kind < sizeof(names) / sizeof(names[0]) ? names[kind] : "?";
}

/* Joins the group of case cs that holds this core; false if the core is in none. */
static bool join_case_group(const struct coll_case *cs)
{
    const uint32_t mr = hal_chip()->rows, mc = hal_chip()->cols;
    const uint32_t row = hal_self()->row, col = hal_self()->col;
    if (cs->rows > mr || cs->cols > mc || row >= mr / cs->rows * cs->rows ||
        col >= mc / cs->cols * cs->cols)
        return false;
    struct noc_group_args a = {
        .placement = cs->placement, .mesh_rows = mr, .mesh_cols = mc,
        .rect = { .row0 = (uint16_t)(row / cs->rows * cs->rows),
                  .col0 = (uint16_t)(col / cs->cols * cs->cols), .rows = (uint16_t)cs->rows,
                  .cols = (uint16_t)cs->cols },
    };
    struct noc_comm_config cfg = { .group = &case_group, .slot = 0,
                                   .scratch = scratch_of(data_base()),
                                   .segment_bytes = SEGMENT, .gather = cs->gather };
    int rc = noc_group_init(&case_group, &a);
    if (rc == NPU_OK)
        rc = noc_comm_init(&case_comm, &cfg);
    return expect(rc == NPU_OK, cs->kind, "%s %ux%u: joining the group: rc %d",
                  noc_placement_name(cs->placement), cs->rows, cs->cols, rc);
}

/* Counts the elements of buf that differ from want(e); reports the first. */
static uint64_t mismatches(const struct coll_case *cs, uint64_t buf, uint64_t lo, uint64_t hi,
                           float (*want)(const struct coll_case *, uint64_t))
{
    uint64_t bad = 0;
    for (uint64_t e = lo; e < hi; e++) {
        float got = coll_load(buf, e, cs->dtype), exp = want(cs, e);
        if (memcmp(&got, &exp, sizeof(got)) != 0 && bad++ == 0)
            printf("# core %" PRIu32 ": %s %s %ux%u count %" PRIu64 " %s: element %" PRIu64
                   " = %g, want %g\n", hal_self()->core_id, kind_name(cs->kind),
                   noc_placement_name(cs->placement), cs->rows, cs->cols, cs->count,
                   cs->dtype == NPU_DTYPE_BF16 ? "bf16" : "fp32", e, (double)got,
                   (double)exp);
    }
    return bad;
}

static float want_own(const struct coll_case *cs, uint64_t e)
{
    return coll_val(coll_owner(cs->count, case_group.size, e), e);
}

static float want_root(const struct coll_case *cs, uint64_t e)
{
    (void)cs;
    return coll_val(case_group.size - 1, e);
}

static float want_sum(const struct coll_case *cs, uint64_t e)
{
    return coll_reduced(&case_group, coll_owner(cs->count, case_group.size, e), e, cs->dtype);
}

/* The maximum over every rank's element e: exact whatever the order (the values are exact
   in bf16). */
static float want_max(const struct coll_case *cs, uint64_t e)
{
    (void)cs;
    float best = coll_val(0, e);
    for (uint32_t r = 1; r < case_group.size; r++)
        best = coll_val(r, e) > best ? coll_val(r, e) : best;
    return best;
}

static void fill(uint64_t buf, uint32_t label, uint64_t count, enum npu_dtype dt)
{
    for (uint64_t e = 0; e < count; e++)
        coll_store(buf, e, coll_val(label, e), dt);
}

/*
 * Leaves this core's vector engine busy for a while (a softmax of 4096 short rows in buf2,
 * whatever it holds), as a rank still computing would: its reductions start late, so its
 * neighbours run ahead into the collective's next phases (2-D: the next rows' or columns'
 * data lands here early). The agreement lets the caller keep a few descriptors queued.
 */
static void keep_vector_busy(uint64_t region)
{
    static struct npu_desc d;
    struct vector_op_args v = { .op = NPU_VECTOR_OP_SOFTMAX, .x = region, .out = region,
                                .rows = 4096, .cols = 16, .ldx = 16, .ldout = 16,
                                .x_type = NPU_DTYPE_FP32, .out_type = NPU_DTYPE_FP32 };
    vector_op_desc(&d, &v);
    int rc = engine_submit(&d, 1);
    expect(rc == NPU_OK, CCHECK_REDUCE_SCATTER, "a busy vector op: rc %d", rc);
}

/* Broadcast, all-gather, reduce-scatter, all-reduce: in place on buf. */
static void run_ring_kind(const struct coll_case *cs, uint64_t buf)
{
    const uint32_t rank = case_comm.rank, size = case_group.size;
    buf += cs->stagger ? 64ull * rank : 0;
    struct noc_coll_args a = { .buf = buf, .count = cs->count, .dtype = cs->dtype,
                               .op = cs->op };
    uint64_t lo = cs->count * rank / size, hi = cs->count * (rank + 1) / size, bad = 0;
    int rc;
    fill(buf, rank, cs->count, cs->dtype);
    if (rank % 3 == 0 && cs->kind != CCHECK_BROADCAST && cs->kind != CCHECK_ALLGATHER)
        keep_vector_busy(buf2_of(buf));
    switch (cs->kind) {
    case CCHECK_BROADCAST:
        a.root = size - 1;
        rc = noc_broadcast(&case_comm, &a);
        bad = mismatches(cs, buf, 0, cs->count, want_root);
        break;
    case CCHECK_ALLGATHER:
        for (uint64_t e = 0; e < cs->count; e++) /* only our chunk is meaningful */
            if (e < lo || e >= hi)
                coll_store(buf, e, -1.0f, cs->dtype);
        rc = noc_allgather(&case_comm, &a);
        bad = mismatches(cs, buf, 0, cs->count, want_own);
        break;
    case CCHECK_REDUCE_SCATTER:
        rc = noc_reduce_scatter(&case_comm, &a);
        bad = mismatches(cs, buf, lo, hi, want_sum);
        break;
    default:
        rc = noc_allreduce(&case_comm, &a);
        bad = mismatches(cs, buf, 0, cs->count,
                         cs->op == NOC_REDUCE_MAX ? want_max : want_sum);
        break;
    }
    expect(rc == NPU_OK && bad == 0, cs->kind, "%s%s %s %ux%u count %" PRIu64 " (%s%s): rc %d, %"
           PRIu64 " wrong elements", kind_name(cs->kind), cs->op == NOC_REDUCE_MAX ? " max" : "",
           noc_placement_name(cs->placement), cs->rows, cs->cols, cs->count,
           cs->gather == NOC_GATHER_RING ? "ring" : "auto",
           cs->stagger ? ", staggered buffers" : "", rc, bad);
}

/*
 * Block all-gather: dst is [3][count + 5]; rank r owns columns [count r / size, count (r+1)
 * / size) of each row. Even ranks send in place, odd ranks from a buffer of their own with
 * a wider row stride. Afterwards every gathered element is its owner's value, and the 5
 * columns past count are untouched. With the ring algorithm every rank is refused.
 */
static void run_blocks(const struct coll_case *cs, uint64_t dst)
{
    const uint32_t rank = case_comm.rank, size = case_group.size, rows = 3;
    const uint32_t cols = (uint32_t)cs->count, ld = cols + 5;
    const uint32_t lo = (uint32_t)coll_bound(cols, size, rank);
    const uint32_t w = (uint32_t)coll_bound(cols, size, rank + 1) - lo;
    const bool own = rank % 2 == 1;
    const uint64_t eb = cs->dtype == NPU_DTYPE_BF16 ? 2 : 4;
    const uint64_t src = own ? buf2_of(dst) : dst + lo * eb;
    const uint32_t src_ld = own ? w + 3 : ld;
    for (uint64_t e = 0; e < (uint64_t)rows * ld; e++)
        coll_store(dst, e, -1.0f, cs->dtype);
    for (uint32_t r = 0; r < rows; r++) /* this rank's block, where it sends it from */
        for (uint32_t j = 0; j < w; j++)
            coll_store(src, (uint64_t)r * src_ld + j, coll_val(rank, (uint64_t)r * ld + lo + j),
                       cs->dtype);
    struct noc_gather_blocks_args a = { .dst = dst, .src = src, .rows = rows, .cols = cols,
                                        .ld = ld, .src_ld = src_ld, .dtype = cs->dtype };
    const bool ring = cs->gather == NOC_GATHER_RING;
    const bool quiet = case_comm.cfg.quiet;
    case_comm.cfg.quiet = ring; /* refused on purpose: no console line */
    int rc = noc_allgather_blocks(&case_comm, &a);
    case_comm.cfg.quiet = quiet;
    uint64_t bad = 0;
    for (uint32_t r = 0; r < rows && !ring; r++)
        for (uint32_t c = 0; c < ld; c++) {
            const uint64_t e = (uint64_t)r * ld + c;
            const float want = c < cols ? coll_val(coll_owner(cols, size, c), e) : -1.0f;
            const float got = coll_load(dst, e, cs->dtype);
            if (memcmp(&got, &want, sizeof(got)) != 0 && bad++ == 0)
                printf("# core %" PRIu32 ": allgather_blocks %ux%u cols %u: [%u][%u] = %g, "
                       "want %g\n", hal_self()->core_id, cs->rows, cs->cols, cols, r, c,
                       (double)got, (double)want);
        }
    expect(ring ? rc == NPU_ERR_INVAL : rc == NPU_OK && bad == 0, cs->kind,
           "allgather_blocks %s %ux%u cols %u (%s): rc %d, %" PRIu64 " wrong elements",
           noc_placement_name(cs->placement), cs->rows, cs->cols, cols,
           ring ? "ring: must refuse" : "multicast", rc, bad);
}

static void run_alltoall(const struct coll_case *cs, uint64_t buf, uint64_t recv)
{
    const uint32_t rank = case_comm.rank, size = case_group.size;
    const uint64_t n = cs->count;
    for (uint32_t q = 0; q < size; q++)
        for (uint64_t e = 0; e < n; e++)
            coll_store(buf, q * n + e, coll_val(rank * size + q, e), cs->dtype);
    struct noc_alltoall_args a = { .buf = buf, .recv = recv, .count = n, .dtype = cs->dtype };
    int rc = noc_alltoall(&case_comm, &a);
    uint64_t bad = 0;
    for (uint32_t q = 0; q < size; q++)
        for (uint64_t e = 0; e < n; e++)
            bad += coll_load(recv, q * n + e, cs->dtype) != coll_val(q * size + rank, e);
    expect(rc == NPU_OK && bad == 0, cs->kind, "alltoall %s %ux%u count %" PRIu64 ": rc %d, %"
           PRIu64 " wrong elements", noc_placement_name(cs->placement), cs->rows, cs->cols, n,
           rc, bad);
}

/* Elements sender i sends receiver j: 0 to 3 times the case count (zeros included). */
static uint32_t m2n_count(const struct coll_case *cs, uint32_t i, uint32_t j)
{
    return (uint32_t)(((i * 5 + j * 3) % 4) * cs->count);
}

/* Dispatch from ranks 0..M-1 to the others, then combine back; checks both ends. */
static void run_m2n(const struct coll_case *cs, uint64_t buf, uint64_t recv)
{
    const uint32_t rank = case_comm.rank, m = case_group.size / 2, n = case_group.size - m;
    struct noc_m2n_plan plan = { .counts = plan_store, .capacity = NOC_M2N_PAIRS_MAX };
    struct noc_m2n_args a = { .senders = m, .counts = m2n_counts, .send = buf, .recv = recv,
                              .recv_capacity = region_bytes() / 4, .dtype = cs->dtype };
    uint64_t at = 0, bad = 0, sent = 0;
    for (uint32_t j = 0; rank < m && j < n; j++) {
        m2n_counts[j] = m2n_count(cs, rank, j);
        for (uint64_t e = 0; e < m2n_counts[j]; e++)
            coll_store(buf, sent + e, coll_val(rank * 1000 + j, e), cs->dtype);
        sent += m2n_counts[j];
    }
    for (uint64_t e = 0; rank < m && e < sent; e++) /* combine must overwrite all of it */
        coll_store(recv, e, -1.0f, cs->dtype);
    int rc = noc_m2n_dispatch(&case_comm, &a, &plan);
    for (uint32_t i = 0; rc == NPU_OK && rank >= m && i < m; i++) {
        uint32_t cnt = m2n_count(cs, i, rank - m);
        for (uint64_t e = 0; e < cnt; e++)
            bad += coll_load(recv, at + e, cs->dtype) != coll_val(i * 1000 + rank - m, e);
        at += cnt;
    }
    if (rc == NPU_OK)
        rc = noc_m2n_combine(&case_comm, &a, &plan);
    for (uint64_t e = 0; rc == NPU_OK && rank < m && e < sent; e++)
        bad += coll_load(recv, e, cs->dtype) != coll_load(buf, e, cs->dtype);
    expect(rc == NPU_OK && bad == 0, cs->kind, "m2n %s %ux%u count %" PRIu64 ": rc %d, %"
           PRIu64 " wrong elements", noc_placement_name(cs->placement), cs->rows, cs->cols,
           cs->count, rc, bad);
}

/* Elements sender i has for bucket b: 0 to 3 times a base (zeros included); the base is the
   case count, shrunk on big groups so that every receiver's blocks fit its buffer. */
static uint32_t a2av_count(const struct coll_case *cs, uint32_t i, uint32_t b)
{
    const uint64_t size = case_group.size;
    const uint64_t base = size <= 4 ? cs->count : (cs->count * 4 + size - 1) / size;
    return (uint32_t)(((i * 5 + b * 3 + 1) % 4) * base);
}

/* Receivers check every block, negate it; the combine must bring the negation back. */
static uint64_t a2av_receive(const struct coll_case *cs, const struct noc_alltoallv_plan *p,
                             uint64_t recv)
{
    const uint32_t size = case_group.size, q = case_comm.rank;
    uint64_t bad = 0;
    for (uint32_t i = 0; i < size; i++)
        for (uint32_t b = p->bucket_first[q]; b < p->bucket_first[q + 1]; b++) {
            uint64_t at = noc_alltoallv_recv_offset(p, i, b);
            bad += noc_alltoallv_count(p, i, b) != a2av_count(cs, i, b);
            for (uint64_t e = 0; e < a2av_count(cs, i, b); e++) {
                float v = coll_load(recv, at + e, cs->dtype);
                bad += v != coll_val(i * 1000 + b, e);
                coll_store(recv, at + e, -v, cs->dtype);
            }
        }
    return bad;
}

/* Every bucket's total, the ones this rank does not own included, as the senders sent. */
static uint64_t a2av_totals(const struct coll_case *cs, const struct noc_alltoallv_plan *p)
{
    uint64_t bad = 0;
    for (uint32_t b = 0; b < p->buckets; b++) {
        uint64_t want = 0;
        for (uint32_t i = 0; i < case_group.size; i++)
            want += a2av_count(cs, i, b);
        bad += noc_alltoallv_total(p, b) != want;
    }
    return bad;
}

/* By bucket, each of q's buckets must be one run: sender i + 1's elements right after i's. */
static uint64_t a2av_bucket_runs(const struct noc_alltoallv_plan *p)
{
    const uint32_t size = case_group.size, q = case_comm.rank;
    uint64_t bad = 0, at = 0;
    for (uint32_t b = p->bucket_first[q]; b < p->bucket_first[q + 1]; b++)
        for (uint32_t i = 0; i < size; i++) {
            bad += noc_alltoallv_recv_offset(p, i, b) != at;
            at += noc_alltoallv_count(p, i, b);
        }
    return bad;
}

/* Buckets over the ranks unevenly (count 1: fewer buckets than ranks, so some own none);
   the receive layout by sender, then by bucket. */
static void run_alltoallv_layout(const struct coll_case *cs, uint64_t buf, uint64_t recv,
                                 bool by_bucket)
{
    const uint32_t size = case_group.size, rank = case_comm.rank;
    const uint32_t buckets = cs->count == 1 ? (size + 1) / 2 : size + size / 2 + 1;
    for (uint32_t q = 0; q <= size; q++)
        a2av_first[q] = q * buckets / size;
    struct noc_alltoallv_plan plan = { .buckets = buckets, .bucket_first = a2av_first,
                                       .words = plan_store, .capacity = NOC_M2N_PAIRS_MAX,
                                       .by_bucket = by_bucket };
    struct noc_alltoallv_args a = { .counts = a2av_counts, .send = buf, .recv = recv,
                                    .recv_capacity = region_bytes() / 4, .dtype = cs->dtype };
    uint64_t sent = 0, bad = 0;
    for (uint32_t b = 0; b < buckets; b++) {
        a2av_counts[b] = a2av_count(cs, rank, b);
        for (uint64_t e = 0; e < a2av_counts[b]; e++)
            coll_store(buf, sent + e, coll_val(rank * 1000 + b, e), cs->dtype);
        sent += a2av_counts[b];
    }
    int rc = noc_alltoallv_dispatch(&case_comm, &a, &plan);
    if (rc == NPU_OK)
        bad += a2av_receive(cs, &plan, recv) + a2av_totals(cs, &plan) +
               (by_bucket ? a2av_bucket_runs(&plan) : 0);
    if (rc == NPU_OK)
        rc = noc_alltoallv_combine(&case_comm, &a, &plan);
    for (uint32_t b = 0, at = 0; rc == NPU_OK && b < buckets; at += a2av_count(cs, rank, b++))
        for (uint64_t e = 0; e < a2av_count(cs, rank, b); e++)
            bad += coll_load(buf, at + e, cs->dtype) != -coll_val(rank * 1000 + b, e);
    expect(rc == NPU_OK && bad == 0, cs->kind, "alltoallv %s %ux%u count %" PRIu64 ", %u "
           "buckets, by %s: rc %d, %" PRIu64 " wrong elements",
           noc_placement_name(cs->placement), cs->rows, cs->cols, cs->count, buckets,
           by_bucket ? "bucket" : "sender", rc, bad);
}

static void run_alltoallv(const struct coll_case *cs, uint64_t buf, uint64_t recv)
{
    run_alltoallv_layout(cs, buf, recv, false);
    run_alltoallv_layout(cs, buf, recv, true);
}

void coll_case_run(const struct coll_case *cs, uint64_t data, uint64_t scratch)
{
    (void)scratch;
    if (join_case_group(cs)) {
        if (cs->kind == CCHECK_BARRIER) {
            int rc = noc_barrier(&case_comm);
            expect(rc == NPU_OK, cs->kind, "barrier %s %ux%u: rc %d",
                   noc_placement_name(cs->placement), cs->rows, cs->cols, rc);
        } else if (cs->kind == CCHECK_ALLTOALL) {
            run_alltoall(cs, data, buf2_of(data));
        } else if (cs->kind == CCHECK_M2N) {
            run_m2n(cs, data, buf2_of(data));
        } else if (cs->kind == CCHECK_ALLTOALLV) {
            run_alltoallv(cs, data, buf2_of(data));
        } else if (cs->kind == CCHECK_LINES) {
            coll_lines_run(cs, &case_comm, data);
        } else if (cs->kind == CCHECK_EXCHANGE) {
            coll_exchange_run(cs, &case_comm, data);
        } else if (cs->blocks) {
            run_blocks(cs, data);
        } else {
            run_ring_kind(cs, data);
        }
    }
    int rc = noc_barrier(&mesh_comm);
    expect(rc == NPU_OK, CCHECK_BARRIER, "whole-mesh barrier after a case: rc %d", rc);
}

/* Every rank on a distinct core of the rectangle; steps within the placement's hop bound. */
static void check_placements(void)
{
    static const uint16_t shapes[][2] = { { 1, 2 }, { 1, 3 }, { 2, 2 }, { 2, 4 }, { 4, 4 },
                                          { 3, 3 }, { 2, 3 }, { 8, 8 }, { 1, 8 } };
    struct noc_group g;
    for (uint32_t p = 0; p < NOC_PLACE_COUNT; p++)
        for (uint32_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
            struct noc_group_args a = { .placement = (enum noc_placement)p,
                                        .rect = { 0, 0, shapes[s][0], shapes[s][1] },
                                        .mesh_rows = hal_chip()->rows,
                                        .mesh_cols = hal_chip()->cols };
            if (a.rect.rows > a.mesh_rows || a.rect.cols > a.mesh_cols)
                continue;
            int rc = noc_group_init(&g, &a);
            uint32_t worst = 0, dup = 0;
            for (uint32_t k = 0; rc == NPU_OK && k < g.size; k++) {
                uint32_t h = noc_group_hops(&g, k, (k + 1) % g.size);
                worst = h > worst ? h : worst;
                dup += noc_group_rank_of(&g, g.core[k]) != (int)k;
            }
            bool closes = shapes[s][0] >= 2 && shapes[s][1] >= 2 &&
                          (shapes[s][0] % 2 == 0 || shapes[s][1] % 2 == 0);
            uint32_t bound = p == NOC_PLACE_LINEAR ? UINT32_MAX
                             : p == NOC_PLACE_RING && closes ? 1 : 2;
            if (p == NOC_PLACE_MESH2D)
                worst = 0; /* its rings are rows and columns: checked by the collectives */
            expect(rc == NPU_OK && dup == 0 && worst <= bound, CCHECK_PLACEMENT,
                   "%s %ux%u: rc %d, %u duplicate cores, worst step %u hops (bound %u)",
                   noc_placement_name(a.placement), shapes[s][0], shapes[s][1], rc, dup, worst,
                   bound);
        }
}

static void run_all_cases(uint64_t data)
{
    static const uint16_t shapes[][2] = { { 1, 2 }, { 1, 3 }, { 2, 2 }, { 2, 4 }, { 4, 4 },
                                          { 8, 8 } };
    for (uint32_t p = 0; p < NOC_PLACE_COUNT; p++)
        for (uint32_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
            for (uint32_t kind = CCHECK_BARRIER; kind <= CCHECK_ALLTOALLV; kind++)
                for (uint32_t ci = 0; ci < 3; ci++) {
                    uint32_t size = shapes[s][0] * shapes[s][1];
                    struct coll_case cs = {
                        .placement = (enum noc_placement)p, .rows = shapes[s][0],
                        .cols = shapes[s][1], .kind = kind,
                        .count = ci == 0 ? 1 : ci == 1 ? 3 * size + 1 : 4103,
                        /* every count in both types, over the placements */
                        .dtype = (p + ci) % 2 ? NPU_DTYPE_BF16 : NPU_DTYPE_FP32,
                    };
                    if (kind == CCHECK_BARRIER && ci > 0)
                        continue;
                    coll_case_run(&cs, data, 0); /* auto: multicast all-gathers */
                    if (kind != CCHECK_ALLGATHER && kind != CCHECK_ALLREDUCE)
                        continue;
                    if (kind == CCHECK_ALLREDUCE) { /* the maximum, as split attention's */
                        cs.op = NOC_REDUCE_MAX;
                        coll_case_run(&cs, data, 0);
                        cs.op = NOC_REDUCE_SUM;
                    } else { /* column blocks into place: multicast, then refused on rings */
                        cs.blocks = true;
                        coll_case_run(&cs, data, 0);
                        cs.gather = NOC_GATHER_RING;
                        coll_case_run(&cs, data, 0);
                        cs.gather = NOC_GATHER_AUTO, cs.blocks = false;
                    }
                    cs.gather = NOC_GATHER_RING;
                    coll_case_run(&cs, data, 0);
                    cs.gather = NOC_GATHER_AUTO, cs.stagger = true; /* falls back to rings */
                    coll_case_run(&cs, data, 0);
                }
}

int main(void)
{
    hal_wait_release();
    const uint64_t data = data_base();
    struct noc_group_args mesh = { .placement = NOC_PLACE_LINEAR,
                                   .rect = { 0, 0, (uint16_t)hal_chip()->rows,
                                             (uint16_t)hal_chip()->cols },
                                   .mesh_rows = hal_chip()->rows,
                                   .mesh_cols = hal_chip()->cols };
    struct noc_comm_config mc = { .group = &mesh_group, .slot = 1,
                                  .scratch = scratch_of(data) + SCRATCH_BYTES,
                                  .segment_bytes = SEGMENT };
    int rc = noc_group_init(&mesh_group, &mesh);
    if (rc == NPU_OK)
        rc = noc_comm_init(&mesh_comm, &mc);
    expect(rc == NPU_OK, CCHECK_PLACEMENT, "whole-mesh communicator: rc %d", rc);
    check_placements();
    coll_api_check(data);
    noc_barrier(&mesh_comm);
    run_all_cases(data);
    coll_lines_cases(data);
    coll_exchange_cases(data);
    coll_error_checks(data, scratch_of(data));
    return checks_done();
}
