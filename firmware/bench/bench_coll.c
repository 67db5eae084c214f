/* SPDX-License-Identifier: MIT */
/*
 * Collectives benchmark, NPU cores (docs/benchmarks.md, docs/noc-driver.md): all-gather,
 * reduce-scatter and all-reduce of bf16 buffers of 1 KiB .. 64 MiB on groups of 4, 16 and
 * 64 cores (2x2, 4x4 and 8x8 rectangles at (0,0)) under each placement. The members start
 * together after a barrier of their group; each takes its chip time before and after the
 * collective and writes the pair to rank 0, which prints the span (first start to last end)
 * beside the bounds:
 *   bandwidth bound   (p-1)/p * N / B for all-gather and reduce-scatter, twice that for
 *                     all-reduce, B = noc_link_gbps (one link per rank and step)
 *   latency bound     the hops every step must cross: over the rings the collective runs
 *                     (one, or a row and a column for mesh2d), (ring length - 1) x the
 *                     longest step of the ring in hops x noc_hop_cycles (twice for
 *                     all-reduce)
 * Every placement runs the ring algorithms (NOC_GATHER_RING). One more row per case,
 * "multicast", runs the multicast all-gather (NOC_GATHER_AUTO: the buffers sit at the same
 * offset everywhere) alone or after the ring reduce-scatter of an all-reduce; its gather
 * half's bounds are those of XY multicast trees over an R x C rectangle: the busiest link
 * carries max((R-1) C, C-1) of the p chunks, and the farthest destination is R-1 + C-1 hops
 * away.
 * A whole-mesh barrier separates the cases. Buffers that do not fit in a core's free SRAM
 * are skipped (a BENCH skip line). `quick` runs 1 KiB, 64 KiB and 4 MiB on 4 and 16 cores.
 */
#include <inttypes.h>
#include <stdio.h>

#include "bench.h"
#include "bench_comm.h"
#include "noc/collective.h"
#include "noc/noc.h"
#include "npu/hal.h"
#include "npu/wait.h"

#define SEM_RESULT 1u
#define KIB 1024ull

enum op { OP_ALLGATHER, OP_REDUCE_SCATTER, OP_ALLREDUCE, OP__COUNT };
static const char *const op_names[OP__COUNT] = { "allgather", "reduce_scatter", "allreduce" };

/* Placements, then the multicast all-gather (on the ring placement). */
#define ALGO_MULTICAST NOC_PLACE_COUNT

static struct noc_group mesh_group, group;
static struct noc_comm mesh_comm, comm;
static uint64_t span[2];                 /* this rank's start and end */
static uint64_t spans[NOC_GROUP_MAX][2]; /* rank 0: everyone's */
static uint32_t results_seen;

/* Longest step, in hops, of ring `ranks[0..len)` of the group (closing step included). */
static uint32_t ring_hops(const uint16_t *ranks, uint32_t len)
{
    uint32_t worst = 0;
    for (uint32_t k = 0; len > 1 && k < len; k++) {
        uint32_t h = noc_group_hops(&group, ranks[k], ranks[(k + 1) % len]);
        worst = h > worst ? h : worst;
    }
    return worst;
}

/* Hop-steps of one pass: (len - 1) x longest step, over the rings the collective uses. */
static uint64_t pass_hop_steps(void)
{
    static uint16_t line[NOC_GROUP_MAX];
    const uint32_t rows = group.grid_rows, cols = group.grid_cols;
    uint64_t worst_row = 0, worst_col = 0;
    for (uint32_t i = 0; i < rows; i++) {
        for (uint32_t j = 0; j < cols; j++)
            line[j] = (uint16_t)(i * cols + j);
        uint64_t h = ring_hops(line, cols);
        worst_row = h > worst_row ? h : worst_row;
    }
    for (uint32_t j = 0; j < cols; j++) {
        for (uint32_t i = 0; i < rows; i++)
            line[i] = (uint16_t)(i * cols + j);
        uint64_t h = ring_hops(line, rows);
        worst_col = h > worst_col ? h : worst_col;
    }
    return (uint64_t)(cols - 1) * worst_row + (uint64_t)(rows - 1) * worst_col;
}

static int run_op(enum op op, uint64_t bytes)
{
    struct noc_coll_args a = { .buf = bench_data_base(), .count = bytes / 2,
                               .dtype = NPU_DTYPE_BF16 };
    switch (op) {
    case OP_ALLGATHER:
        return noc_allgather(&comm, &a);
    case OP_REDUCE_SCATTER:
        return noc_reduce_scatter(&comm, &a);
    default:
        return noc_allreduce(&comm, &a);
    }
}

/* The multicast all-gather's bounds: bandwidth (ps) and hops of its one pass. */
static double mcast_bw_ps(uint64_t bytes, double gbps)
{
    const uint32_t r = group.rect.rows, c = group.rect.cols;
    const uint32_t busiest = (r - 1) * c > c - 1 ? (r - 1) * c : c - 1;
    return (double)busiest / group.size * bench_xfer_ps(bytes, gbps);
}

/* Rank 0: waits for every rank's span and prints the case. */
static void report(enum op op, uint64_t bytes, bool mcast)
{
    const struct hal_chip_info *c = hal_chip();
    const uint32_t p = group.size;
    results_seen += p;
    hal_sem_wait(SEM_RESULT, results_seen);
    uint64_t first = UINT64_MAX, last = 0;
    for (uint32_t k = 0; k < p; k++) {
        first = spans[k][0] < first ? spans[k][0] : first;
        last = spans[k][1] > last ? spans[k][1] : last;
    }
    double ring_bw = (double)(p - 1) / p * bench_xfer_ps(bytes, c->noc_link_gbps);
    uint64_t ring_hops = pass_hop_steps();
    double bw_ps = op == OP_ALLREDUCE ? 2.0 * ring_bw : ring_bw;
    uint64_t hops = op == OP_ALLREDUCE ? 2 * ring_hops : ring_hops;
    if (mcast) { /* the gather half is one multicast pass */
        bw_ps = (op == OP_ALLREDUCE ? ring_bw : 0.0) + mcast_bw_ps(bytes, c->noc_link_gbps);
        hops = (op == OP_ALLREDUCE ? ring_hops : 0) + group.rect.rows + group.rect.cols - 2;
    }
    uint64_t lat_ps = hops * c->noc_hop_cycles * hal_cycle_ps();
    lines_print_bench_coll(&(struct lines_bench_coll){
        .op = op_names[op],
        .placement = mcast ? "multicast" : noc_placement_name(group.placement), .p = p,
        .rows = group.rect.rows, .cols = group.rect.cols, .bytes = bytes, .ps = last - first,
        .bw_ps = bw_ps, .lat_ps = lat_ps, .eff = bw_ps / (double)(last - first) });
}

/* One case on the members of the group; the others only take the closing barrier. */
static void run_case(uint32_t algo, uint32_t side, enum op op, uint64_t bytes)
{
    const bool mcast = algo == ALGO_MULTICAST;
    const enum noc_placement pl = mcast ? NOC_PLACE_RING : (enum noc_placement)algo;
    struct noc_group_args ga = { .placement = pl, .rect = { 0, 0, (uint16_t)side,
                                                             (uint16_t)side },
                                 .mesh_rows = hal_chip()->rows, .mesh_cols = hal_chip()->cols };
    struct noc_comm_config cc = { .group = &group, .slot = 0, .scratch = bench_comm_scratch(),
                                  .gather = mcast ? NOC_GATHER_AUTO : NOC_GATHER_RING };
    bool member = noc_group_init(&group, &ga) == NPU_OK &&
                  noc_group_rank_of(&group, hal_self()->core_id) >= 0 &&
                  noc_comm_init(&comm, &cc) == NPU_OK;
    if (member && noc_barrier(&comm) == NPU_OK) {
        span[0] = hal_time_ps();
        int rc = run_op(op, bytes);
        span[1] = hal_time_ps();
        if (rc != NPU_OK)
            bench_print_note(LINES_BENCH_ERROR, "core=%u op=%s rc=%d", hal_self()->core_id,
                             op_names[op], rc);
        struct noc_write_async_args w = {
            .src = (uint64_t)(uintptr_t)span,
            .dst = noc_sram_addr(group.core[0], (uint64_t)(uintptr_t)spans[comm.rank] -
                                                    hal_self()->sram_base),
            .bytes = sizeof(span),
            .on_arrival = { .enable = true, .core = group.core[0], .sem = SEM_RESULT,
                            .value = 1 },
            .control = true, /* the figures must land in performance mode too */
        };
        noc_write_async(&w);
        noc_write_barrier();
        if (comm.rank == 0)
            report(op, bytes, mcast);
    }
    noc_barrier(&mesh_comm);
}

/* Whether a buffer of `bytes` fits below the scratch areas (the same on every core). */
static bool fits(uint64_t bytes)
{
    return bench_data_base() + bytes <= bench_comm_scratch();
}

static void run_all(bool quick)
{
    static const uint32_t sides[] = { 2, 4, 8 };
    for (uint32_t si = 0; si < (quick ? 2u : 3u); si++) {
        uint32_t side = sides[si];
        if (side > hal_chip()->rows || side > hal_chip()->cols)
            continue;
        for (uint32_t op = 0; op < OP__COUNT; op++)
            for (uint32_t pl = 0; pl <= ALGO_MULTICAST; pl++) {
                if (pl == ALGO_MULTICAST && op == OP_REDUCE_SCATTER)
                    continue; /* nothing to gather */
                for (uint64_t bytes = KIB; bytes <= 64 * KIB * KIB; bytes *= quick ? 64 : 4) {
                    if (!fits(bytes)) {
                        if (hal_self()->core_id == 0 && pl == 0 && op == 0)
                            bench_print_note(LINES_BENCH_SKIP, "p=%u bytes=%" PRIu64
                                             " reason=exceeds_free_sram free=%" PRIu64,
                                             side * side, bytes,
                                             bench_comm_scratch() - bench_data_base());
                        continue;
                    }
                    run_case(pl, side, (enum op)op, bytes);
                }
            }
    }
}

int main(void)
{
    hal_wait_release();
    if (bench_comm_mesh(&mesh_group, &mesh_comm) != NPU_OK)
        return bench_done(NPU_EXIT_FAIL);
    run_all(bench_has_flag("quick"));
    return bench_done(NPU_EXIT_OK);
}
