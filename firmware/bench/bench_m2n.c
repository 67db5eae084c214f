/* SPDX-License-Identifier: MIT */
/*
 * M2N benchmark, NPU cores (docs/benchmarks.md "npuctl bench m2n"): token dispatch between
 * two core sets, as MegaScale-Infer's M2N library moves it from attention to expert devices
 * (its section 7.3). M senders, the rows of an M-core rectangle at (0,0) (C columns, or one
 * row of M), and N receivers, the same shape right below, form a pair group
 * (noc_group_pair); every sender has `bytes` for every receiver. Cases:
 *   sizes   M = N = 8 (the paper's Figure 11): 4 KiB .. 1 MiB per sender-receiver pair
 *   groups  256 KiB per pair (Figure 12): M = N = 4, 8, 16, 32, where the mesh holds them
 * Three operations move the same bytes:
 *   m2n        noc_m2n_dispatch: the counts multicast once, then every sender's direct writes
 *   n2m        noc_m2n_combine: every block back to its sender
 *   alltoallv  noc_alltoallv_dispatch over the same pair group (receiver j owns bucket j,
 *              the senders none): the exchange MoE dispatch runs today, whose counts go in
 *              two rounds of writes before the data
 * Each case runs once after a barrier of the pair (chip time is deterministic and the NoC
 * model has no jitter, so the paper's median and P99 latencies are one figure here); its
 * span runs from the first member's start to the last member's end, and rank 0 prints it
 * beside the bounds:
 *   bandwidth  the larger of a sender's N blocks through its one endpoint, N x bytes / B
 *              (the endpoint runs one transfer at a time, docs/engines.md), and the blocks
 *              the busiest link carries over the XY routes, x bytes / B; n2m backwards
 *   latency    one write's hops between the farthest pair, x noc_hop_cycles
 * In functional mode every receiver checks every element (and every sender what n2m
 * brought back); a wrong element is a BENCH error line and a failed exit.
 * `quick` runs 16 KiB and 256 KiB at M = N = 4 and 8.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "bench_comm.h"
#include "noc/collective.h"
#include "noc/noc.h"
#include "npu/hal.h"
#include "npu/wait.h"

#define SEM_RESULT 1u
#define KIB 1024ull
#define SIDE_MAX 32u /* M and N */

enum op { OP_M2N, OP_N2M, OP_A2AV, OP__COUNT };
static const char *const op_names[OP__COUNT] = { "m2n", "n2m", "alltoallv" };

static struct noc_group mesh_group, senders, receivers, pair;
static struct noc_comm mesh_comm, comm;
static uint64_t span[2];                      /* this rank's start and end */
static uint64_t spans[2 * SIDE_MAX][2];      /* rank 0: every rank's */
static uint32_t results_seen;
static uint32_t counts[SIDE_MAX];             /* elements for each receiver (or bucket) */
static uint32_t m2n_store[SIDE_MAX * SIDE_MAX];
static uint32_t a2av_first[2 * SIDE_MAX + 1];
static uint32_t a2av_words[4 + 4 * SIDE_MAX + 4 * 2 * SIDE_MAX];
static bool failed;

/* The M senders' rectangle, or the N receivers' right below it. */
static struct noc_rect set_rect(uint32_t count, uint32_t row0)
{
    const uint32_t cols = hal_chip()->cols < count ? hal_chip()->cols : count;
    return (struct noc_rect){ (uint16_t)row0, 0, (uint16_t)(count / cols), (uint16_t)cols };
}

/* The pair of M senders and N receivers; false if the mesh cannot hold it. */
static bool make_pair(uint32_t m, uint32_t n)
{
    const struct noc_rect a = set_rect(m, 0), b = set_rect(n, a.rows);
    struct noc_group_args ga = { .placement = NOC_PLACE_LINEAR, .rect = a,
                                 .mesh_rows = hal_chip()->rows, .mesh_cols = hal_chip()->cols };
    if (a.rows * a.cols != m || b.rows * b.cols != n || noc_group_init(&senders, &ga) != NPU_OK)
        return false;
    ga.rect = b;
    return noc_group_init(&receivers, &ga) == NPU_OK &&
           noc_group_pair(&pair, &senders, &receivers) == NPU_OK;
}

/* Element e of sender i's block for receiver j: distinct per (i, j, e), exact in bf16. */
static float value_of(uint32_t i, uint32_t j, uint64_t e)
{
    return (float)((i * 37 + j * 11 + e) % 251) - 125.0f;
}

static uint16_t bf16_of(float v)
{
    uint32_t bits;
    memcpy(&bits, &v, 4);
    return (uint16_t)(bits >> 16);
}

/* Sender i's send buffer (N blocks of `elems`), in functional mode. */
static void fill_send(uint64_t send, uint32_t i, uint32_t n, uint64_t elems)
{
    uint16_t *p = (uint16_t *)(uintptr_t)send;
    for (uint32_t j = 0; j < n; j++)
        for (uint64_t e = 0; e < elems; e++)
            p[j * elems + e] = bf16_of(value_of(i, j, e));
}

/* Elements of `buf` (blocks of sender s for receiver j at block index k, for k < blocks)
   that differ from what the sender wrote. */
static uint64_t check_blocks(uint64_t buf, uint32_t blocks, bool as_receiver, uint32_t me,
                             uint64_t elems)
{
    const uint16_t *p = (const uint16_t *)(uintptr_t)buf;
    uint64_t bad = 0;
    for (uint32_t k = 0; k < blocks; k++)
        for (uint64_t e = 0; e < elems; e++)
            bad += p[k * elems + e] != bf16_of(as_receiver ? value_of(k, me, e)
                                                           : value_of(me, k, e));
    return bad;
}

static int run_op(enum op op, uint32_t m, uint32_t n, uint64_t send, uint64_t recv,
                  uint64_t elems)
{
    const bool sender = comm.rank < m;
    for (uint32_t j = 0; j < n; j++)
        counts[j] = sender ? (uint32_t)elems : 0;
    if (op == OP_A2AV) {
        for (uint32_t q = 0; q <= m + n; q++)
            a2av_first[q] = q <= m ? 0 : q - m;
        struct noc_alltoallv_plan p = { .buckets = n, .bucket_first = a2av_first,
                                        .words = a2av_words,
                                        .capacity = sizeof(a2av_words) / 4 };
        struct noc_alltoallv_args a = { .counts = counts, .send = send, .recv = recv,
                                        .recv_capacity = (uint64_t)m * elems,
                                        .dtype = NPU_DTYPE_BF16 };
        return noc_alltoallv_dispatch(&comm, &a, &p);
    }
    struct noc_m2n_plan p = { .counts = m2n_store, .capacity = SIDE_MAX * SIDE_MAX };
    struct noc_m2n_args a = { .senders = m, .counts = counts, .send = send, .recv = recv,
                              .recv_capacity = (uint64_t)m * elems, .dtype = NPU_DTYPE_BF16 };
    int rc = noc_m2n_dispatch(&comm, &a, &p);
    if (rc == NPU_OK && op == OP_N2M) { /* only the combine is timed: restart the clock */
        rc = noc_barrier(&comm);
        span[0] = hal_time_ps();
        if (rc == NPU_OK)
            rc = noc_m2n_combine(&comm, &a, &p);
    }
    return rc;
}

/* This rank's span into rank 0's table. */
static void post_span(void)
{
    struct noc_write_async_args w = {
        .src = (uint64_t)(uintptr_t)span,
        .dst = noc_sram_addr(pair.core[0], (uint64_t)(uintptr_t)spans[comm.rank] -
                                               hal_self()->sram_base),
        .bytes = sizeof(span),
        .on_arrival = { .enable = true, .core = pair.core[0], .sem = SEM_RESULT, .value = 1 },
        .control = true, /* the figures must land in performance mode too */
    };
    noc_write_async(&w);
    noc_write_barrier();
}

/* The case on this member: the members start after a barrier; in functional mode the
   bytes are written before and checked after. */
static void run_member(enum op op, uint32_t m, uint32_t n, uint64_t bytes)
{
    const uint64_t elems = bytes / 2, send = bench_data_base();
    const uint64_t recv = send + (m > n ? m : n) * bytes;
    const bool check = !hal_chip()->performance, sender = comm.rank < m;
    if (check && sender)
        fill_send(send, comm.rank, n, elems);
    int rc = noc_barrier(&comm);
    span[0] = hal_time_ps();
    if (rc == NPU_OK)
        rc = run_op(op, m, n, send, recv, elems);
    span[1] = hal_time_ps();
    uint64_t bad = 0;
    if (rc == NPU_OK && check && op != OP_N2M && !sender)
        bad = check_blocks(recv, m, true, comm.rank - m, elems);
    if (rc == NPU_OK && check && op == OP_N2M && sender)
        bad = check_blocks(recv, n, false, comm.rank, elems);
    if (rc != NPU_OK || bad) {
        bench_print_note(LINES_BENCH_ERROR, "core=%u op=%s m=%u n=%u bytes=%" PRIu64
                         " rc=%d wrong_elements=%" PRIu64, hal_self()->core_id, op_names[op],
                         m, n, bytes, rc, bad);
        failed = true;
    }
    post_span();
}

/* The most sender-receiver blocks one link carries in one direction (N2M: receiver to
   sender), over XY routes (along the row, then the column: docs/engines.md). */
static uint32_t busiest_link(uint32_t m, uint32_t n, bool back)
{
    static uint16_t load[4][NOC_GROUP_MAX]; /* out of a router: east, west, south, north */
    const uint32_t cols = hal_chip()->cols;
    uint32_t most = 0;
    memset(load, 0, sizeof(load));
    for (uint32_t i = 0; i < m; i++)
        for (uint32_t j = m; j < m + n; j++) {
            const uint32_t a = back ? pair.core[j] : pair.core[i];
            const uint32_t b = back ? pair.core[i] : pair.core[j];
            uint32_t r = a / cols, col = a % cols;
            while (col != b % cols) { /* along the row */
                const uint32_t d = col < b % cols ? 0 : 1;
                uint16_t *l = &load[d][r * cols + col];
                most = ++*l > most ? *l : most;
                col = d == 0 ? col + 1 : col - 1;
            }
            while (r != b / cols) { /* then the column */
                const uint32_t d = r < b / cols ? 2 : 3;
                uint16_t *l = &load[d][r * cols + col];
                most = ++*l > most ? *l : most;
                r = d == 2 ? r + 1 : r - 1;
            }
        }
    return most;
}

/* Rank 0: the span (first start to last end) beside the bounds. */
static void report(enum op op, uint32_t m, uint32_t n, uint64_t bytes)
{
    const struct hal_chip_info *c = hal_chip();
    results_seen += m + n;
    hal_sem_wait(SEM_RESULT, results_seen);
    uint64_t first = UINT64_MAX, last = 0;
    for (uint32_t k = 0; k < m + n; k++) {
        first = spans[k][0] < first ? spans[k][0] : first;
        last = spans[k][1] > last ? spans[k][1] : last;
    }
    const uint32_t to = op == OP_N2M ? m : n;
    const double endpoint = (double)to * bench_xfer_ps(bytes, c->noc_link_gbps);
    const double links = (double)busiest_link(m, n, op == OP_N2M) *
                         bench_xfer_ps(bytes, c->noc_link_gbps);
    const double bw = endpoint > links ? endpoint : links;
    uint32_t hops = 0;
    for (uint32_t i = 0; i < m; i++)
        for (uint32_t j = m; j < m + n; j++)
            hops = noc_group_hops(&pair, i, j) > hops ? noc_group_hops(&pair, i, j) : hops;
    lines_print_bench_m2n(&(struct lines_bench_m2n){
        .op = op_names[op], .m = m, .n = n, .bytes = bytes, .ps = last - first, .bw_ps = bw,
        .lat_ps = (uint64_t)hops * c->noc_hop_cycles * hal_cycle_ps(),
        .eff = bw / (double)(last - first) });
}

/* One case on the pair's members; every core takes the closing barrier. */
static void run_case(enum op op, uint32_t m, uint32_t n, uint64_t bytes)
{
    struct noc_comm_config cc = { .group = &pair, .slot = 0, .scratch = bench_comm_scratch() };
    bool member = make_pair(m, n) && noc_group_rank_of(&pair, hal_self()->core_id) >= 0 &&
                  noc_comm_init(&comm, &cc) == NPU_OK;
    if (member)
        run_member(op, m, n, bytes);
    if (member && comm.rank == 0)
        report(op, m, n, bytes);
    noc_barrier(&mesh_comm);
}

/* Whether the pair fits the mesh and its buffers this core's free SRAM (the same on every
   core: checked alike everywhere); a skip line from core 0 when not. */
static bool case_fits(uint32_t m, uint32_t n, uint64_t bytes)
{
    const uint32_t cols = hal_chip()->cols;
    const uint32_t rows = (m + cols - 1) / cols + (n + cols - 1) / cols;
    const uint64_t need = 2 * (m > n ? m : n) * bytes;
    const bool ok = rows <= hal_chip()->rows && (m <= cols || m % cols == 0) &&
                    bench_data_base() + need <= bench_comm_scratch();
    if (!ok && hal_self()->core_id == 0)
        bench_print_note(LINES_BENCH_SKIP, "m=%u n=%u bytes=%" PRIu64 " reason=%s", m, n,
                         bytes, rows > hal_chip()->rows ? "exceeds_mesh" : "exceeds_free_sram");
    return ok;
}

static void run_all(bool quick)
{
    for (uint32_t op = 0; op < OP__COUNT; op++) {
        for (uint64_t bytes = quick ? 16 * KIB : 4 * KIB; bytes <= (quick ? 256 : 1024) * KIB;
             bytes *= quick ? 16 : 4)
            if (case_fits(8, 8, bytes))
                run_case((enum op)op, 8, 8, bytes);
        for (uint32_t side = 4; side <= (quick ? 4u : SIDE_MAX); side *= 2)
            if (side != 8 && case_fits(side, side, 256 * KIB))
                run_case((enum op)op, side, side, 256 * KIB);
    }
}

int main(void)
{
    hal_wait_release();
    if (bench_comm_mesh(&mesh_group, &mesh_comm) != NPU_OK)
        return bench_done(NPU_EXIT_FAIL);
    run_all(bench_has_flag("quick"));
    return bench_done(failed ? NPU_EXIT_FAIL : NPU_EXIT_OK);
}
