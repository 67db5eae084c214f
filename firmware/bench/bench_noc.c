/* SPDX-License-Identifier: MIT */
/*
 * NoC benchmark, NPU cores: writes from one core's SRAM into another's, each signalling a
 * semaphore of its destination, which observes the arrival. Cases:
 *   latency   64 bytes from core 0 to a core 1 .. 14 hops away (XY distance)
 *   bandwidth 64 KiB .. 8 MiB from core 0 to its east neighbour
 *   shared2 / shared4, separate, opposite, sink2: 2 or 4 writes started at the same chip
 *             time, whose XY routes share a link (each gets 1/flows of it), use disjoint
 *             links, the two directions of one link, or enter one core from both sides
 *             (each gets a whole link: the model has links, not ports, as resources)
 * The destination prints the measured chip time from the slot start (when the source issues
 * its submit) to the arrival, and the analytical figure: the command cost, plus
 * bytes / (noc_link_gbps x share), plus hops x noc_hop_cycles, share being 1 / the most
 * flows of the case on one link of the route (the max-min share for these symmetric cases).
 * Cases start in slots (bench.h); a source that reaches its slot late prints a warning.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "npu/hal.h"
#include "npu/noc_endpoint.h"
#include "npu/wait.h"

#define SEM_NOC 1u
#define MAX_CASES 32u
#define MAX_FLOWS 4u
#define MAX_HOPS 14u
#define KIB 1024ull
#define MIB (1024ull * 1024ull)

struct flow {
    uint32_t src, dst;
};

struct noc_case {
    const char *name;
    uint32_t nflows;
    struct flow flows[MAX_FLOWS];
    uint32_t bytes;
    uint64_t start_ps;
};

static struct noc_case cases[MAX_CASES];
static uint32_t ncases;

static uint32_t core_at(uint32_t row, uint32_t col)
{
    return row * hal_chip()->cols + col;
}

static uint32_t hops_between(uint32_t a, uint32_t b)
{
    uint32_t cols = hal_chip()->cols, ra = a / cols, ca = a % cols, rb = b / cols,
             cb = b % cols;
    return (ra > rb ? ra - rb : rb - ra) + (ca > cb ? ca - cb : cb - ca);
}

/*
 * Adds a case of up to 4 flows (pairs: src, dst, src, dst, ...) if the mesh has the cores:
 * any core for a latency case, row 0 (cores 0 .. cols-1) for the others, whose link sharing
 * flow_share() works out along row 0.
 */
static void add_case(const char *name, uint32_t bytes, uint32_t nflows, const uint32_t *pairs)
{
    uint32_t n = strcmp(name, "latency") == 0 ? hal_chip()->ncores : hal_chip()->cols;
    if (ncases >= MAX_CASES || bytes > bench_data_bytes() / 2)
        return;
    struct noc_case c = { .name = name, .nflows = nflows, .bytes = bytes };
    for (uint32_t f = 0; f < nflows; f++) {
        if (pairs[2 * f] >= n || pairs[2 * f + 1] >= n)
            return;
        c.flows[f] = (struct flow){ pairs[2 * f], pairs[2 * f + 1] };
    }
    cases[ncases++] = c;
}

/* The largest power of two that fits in half the free SRAM (sources below, sinks above). */
static uint32_t max_bytes(void)
{
    uint32_t b = 1u << 30;
    while (b > bench_data_bytes() / 2)
        b /= 2;
    return b;
}

static void build_cases(bool quick)
{
    const struct hal_chip_info *chip = hal_chip();
    uint32_t max_hops = chip->rows - 1 + chip->cols - 1;
    for (uint32_t h = 1; h <= max_hops && h <= MAX_HOPS; h++) {
        uint32_t col = h < chip->cols ? h : chip->cols - 1;
        uint32_t pair[2] = { 0, core_at(h - col, col) };
        if (!quick || h <= 2 || h == max_hops || h == MAX_HOPS)
            add_case("latency", 64, 1, pair);
    }
    static const uint32_t sizes[] = { 64 * KIB, MIB, 8 * MIB };
    uint32_t cap = max_bytes(), last = 0;
    for (uint32_t i = quick ? 1 : 0; i < (quick ? 2u : 3u); i++) {
        uint32_t b = sizes[i] < cap ? sizes[i] : cap;
        if (b != last)
            add_case("bandwidth", b, 1, (const uint32_t[]){ 0, 1 });
        last = b;
    }
    uint32_t b = quick ? (uint32_t)MIB : 4 * (uint32_t)MIB;
    b = b < cap ? b : cap;
    add_case("shared2", b, 2, (const uint32_t[]){ 0, 2, 1, 3 });
    add_case("separate", b, 2, (const uint32_t[]){ 0, 1, 2, 3 });
    add_case("opposite", b, 2, (const uint32_t[]){ 1, 2, 2, 1 });
    add_case("shared4", b, 4, (const uint32_t[]){ 0, 4, 1, 5, 2, 6, 3, 7 });
    add_case("sink2", b, 2, (const uint32_t[]){ 1, 2, 3, 2 });
}

/* Whether a flow along row 0 crosses a link: (0,c) -> (0,c+1) is link c, (0,c) -> (0,c-1)
 * is link cols + c. Flows that leave row 0 (latency cases) share nothing here. */
static bool flow_uses(const struct flow *f, uint32_t link)
{
    uint32_t cols = hal_chip()->cols, cs = f->src % cols, cd = f->dst % cols;
    if (f->src >= cols || f->dst >= cols)
        return false; /* only row-0 cases share links */
    if (link < cols)
        return cs <= link && link < cd;
    link -= cols;
    return cd < link && link <= cs;
}

/* 1 / the most flows of case c on one link of flow f's route. */
static double flow_share(const struct noc_case *c, const struct flow *f)
{
    uint32_t most = 1, cols = hal_chip()->cols;
    for (uint32_t link = 0; link < 2 * cols; link++) {
        uint32_t on = 0;
        if (!flow_uses(f, link))
            continue;
        for (uint32_t g = 0; g < c->nflows; g++)
            on += flow_uses(&c->flows[g], link);
        most = on > most ? on : most;
    }
    return 1.0 / most;
}

/* Slots: twice the slowest flow's figure (all flows on one link), plus 1 us. */
static void place_slots(void)
{
    const struct hal_chip_info *chip = hal_chip();
    uint64_t t = BENCH_SLOT_BASE_PS;
    for (uint32_t i = 0; i < ncases; i++) {
        uint64_t est = bench_cmd_ps() + (uint64_t)MAX_HOPS * chip->noc_hop_cycles *
                       hal_cycle_ps() + (uint64_t)bench_xfer_ps((uint64_t)cases[i].bytes *
                       cases[i].nflows, chip->noc_link_gbps);
        cases[i].start_ps = t;
        t += (2 * est + HAL_PS_PER_US) / HAL_PS_PER_US * HAL_PS_PER_US;
    }
}

static int send(const struct noc_case *c, const struct flow *f, struct npu_desc *d)
{
    struct hal_core_info dst;
    uint64_t half = bench_data_bytes() / 2 & ~0xffffull;
    hal_core_info_get(f->dst, &dst);
    struct noc_write_args w = {
        .src = bench_data_base(),
        .dst = dst.sram_base + (bench_data_base() - hal_self()->sram_base) + half,
        .rows = 1, .row_bytes = c->bytes, .src_stride = c->bytes, .dst_stride = c->bytes,
        .sync = bench_signal(f->dst, SEM_NOC),
    };
    noc_write_desc(d, &w);
    uint64_t late = bench_sleep_until(c->start_ps);
    if (late)
        bench_print_note(LINES_BENCH_WARN, "noc case=%s src=%u late_ps=%" PRIu64, c->name,
                         f->src, late);
    int rc = engine_submit(d, 1);
    if (rc != NPU_OK)
        bench_print_note(LINES_BENCH_ERROR, "core=%u submit=%d", f->src, rc);
    return rc;
}

static void observe(const struct noc_case *c, const struct flow *f, uint32_t count)
{
    const struct hal_chip_info *chip = hal_chip();
    hal_sem_wait(SEM_NOC, count);
    uint64_t ps = hal_time_ps() - c->start_ps, hops = hops_between(f->src, f->dst);
    uint64_t hop_ps = hops * chip->noc_hop_cycles * hal_cycle_ps();
    double share = flow_share(c, f), xfer = bench_xfer_ps(c->bytes, chip->noc_link_gbps);
    double bound = (double)bench_cmd_ps() + xfer / share + (double)hop_ps;
    lines_print_bench_noc(&(struct lines_bench_noc){
        .case_name = c->name, .flows = c->nflows, .src = f->src, .dst = f->dst, .hops = hops,
        .bytes = c->bytes, .ps = ps, .xfer_ps = xfer, .share = share, .hop_ps = hop_ps,
        .cmd_ps = bench_cmd_ps(), .bound_ps = bound, .ratio = bound / (double)ps });
}

/*
 * This core's part in case c: send its flow (if any), then observe the ones it receives, in
 * the order of the case (sink2: two equal flows that arrive together either way).
 */
static int run_case(const struct noc_case *c, uint32_t *received)
{
    static struct npu_desc d;
    uint32_t me = hal_self()->core_id;
    int rc = NPU_OK;
    for (uint32_t f = 0; f < c->nflows; f++)
        if (c->flows[f].src == me)
            rc |= send(c, &c->flows[f], &d);
    for (uint32_t f = 0; f < c->nflows && rc == NPU_OK; f++)
        if (c->flows[f].dst == me)
            observe(c, &c->flows[f], ++*received);
    return rc;
}

int main(void)
{
    hal_wait_release();
    build_cases(bench_has_flag("quick"));
    place_slots();
    uint32_t received = hal_sem_read(SEM_NOC);
    int failed = 0;
    for (uint32_t i = 0; i < ncases; i++)
        failed += run_case(&cases[i], &received) != NPU_OK;
    return bench_done(failed ? NPU_EXIT_FAIL : NPU_EXIT_OK);
}
