/* SPDX-License-Identifier: MIT */
/*
 * Host unit tests of the iteration-level schedulers (runtime/core/src/sched.c, sched_policy.c).
 *
 * A small simulator drives a policy over a synthetic trace with a fake clock (an iteration
 * takes 1 ms + 10 us per row) through sched_arrive / sched_next / sched_complete and checks
 * after every iteration: kvc_check over the running requests; rows <= max_tokens; runs <=
 * max_batch; each run well formed (positions, wants_token, one run per request, prefill
 * runs first); FCFS admission; stall-free decoding under chunked, layered, layered-chunked
 * and pd-fusion; the chunked token budget and the pd-fusion units; static never admitting
 * while a batch runs; continuous admitting into prefill-only iterations; under layered one
 * group per iteration, contiguous groups covering every layer once per cycle with sizes
 * differing by at most one, and identical prefill runs through a cycle. At the end every
 * request is FINISHED (all its tokens, its whole prompt) or REJECTED for the expected
 * reason, and the KV cache is empty.
 * Exact small scenarios are test_sched_exact.c.
 * Prefix caching (sched_prefix_source, kvc_prefix_attach): under every policy a second
 * request sharing a finished prompt's prefix starts prefilled at its cached blocks and
 * prefills only the rest, and nothing is cached without an index or before the prompt is
 * written in every layer; whole-prompt and layered-chunked admission count only the
 * uncached rest against the rows; the simulator over traces with shared hash ids.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "npu_enums.h"
#include "rt/kvc.h"
#include "rt/request.h"
#include "rt/sched.h"
#include "sched_fixture.h"

struct sim {
    uint32_t max_seq;
    uint64_t now;
    enum rt_req_state before[SIM_REQS_MAX];  /* states before sched_next */
    bool decoding[SIM_REQS_MAX];             /* decoding before sched_next */
    uint32_t prefilled[SIM_REQS_MAX], generated[SIM_REQS_MAX];  /* before sched_complete */
    uint32_t running_before, admitted, last_admitted;
    /* the layered cycle as seen from outside */
    bool cycle_open, cycle_was_open;
    struct rt_run cycle_runs[RT_SCHED_RUNS_MAX];
    uint32_t cycle_nruns, cycle_groups, next_group, next_layer, min_size, max_size;
    /* coverage */
    uint64_t iterations, admit_iters, mixed_iters, cycles, multi_group_cycles, max_ring;
    uint32_t cached_reqs;                    /* admitted with a cached prefix */
    uint32_t finished, rejected[RT_REJECT_COUNT];
};

static struct sim sim;

static bool whole_prompts(void)
{
    return sch.p.kind == RT_SCHED_STATIC || sch.p.kind == RT_SCHED_CONTINUOUS ||
           sch.p.kind == RT_SCHED_LAYERED;
}

static bool is_layered(void)
{
    return sch.p.kind == RT_SCHED_LAYERED || sch.p.kind == RT_SCHED_LAYERED_CHUNKED;
}

static enum rt_reject_reason expected_reason(const struct rt_request *r)
{
    uint32_t max_len = r->input_len + r->output_len - 1, b = kvc.cfg.block_tokens;
    if (r->input_len == 0 || r->output_len == 0)
        return RT_REJECT_EMPTY;
    if (r->input_len + r->output_len > sim.max_seq)
        return RT_REJECT_TOO_LONG;
    if ((max_len + b - 1) / b > kvc.cfg.sram_blocks && max_len > kvc.cfg.ring_rows)
        return RT_REJECT_KV_NEVER;
    if (whole_prompts() && r->input_len > sch.p.max_tokens)
        return RT_REJECT_PROMPT_ROWS;
    return RT_REJECT_NONE;
}

static void check_kvc(void)
{
    const struct rt_kv_seq *seqs[SIM_REQS_MAX];
    uint32_t n = 0;
    for (uint32_t i = 0; i < nreqs; i++) {
        if (reqs[i].state == RT_REQ_RUNNING)
            seqs[n++] = &reqs[i].kv;
        else
            assert_false(reqs[i].kv.admitted);
    }
    if (kvc_check(&kvc, seqs, n, err, sizeof(err)) != NPU_OK)
        fail_msg("kvc_check: %s", err);
    assert_int_equal(n, sch.nrunning);
    assert_true(sch.nrunning <= sch.p.max_batch);
}

/* Arrived requests are QUEUED, or REJECTED at once for the reason the rules give. */
static void check_arrivals(void)
{
    for (uint32_t i = 0; i < nreqs; i++) {
        const struct rt_request *r = &reqs[i];
        if (r->arrival_ps > sim.now) {
            assert_int_equal(r->state, RT_REQ_FUTURE);
            continue;
        }
        assert_int_not_equal(r->state, RT_REQ_FUTURE);
        if (sim.before[i] != RT_REQ_FUTURE)
            continue;
        enum rt_reject_reason want = expected_reason(r);
        assert_int_equal(r->reject, want);
        assert_int_equal(r->state, want == RT_REJECT_NONE ? RT_REQ_QUEUED : RT_REQ_REJECTED);
        sim.rejected[want]++;
        sim.before[i] = r->state;
    }
}

static void snapshot(void)
{
    sim.running_before = 0;
    for (uint32_t i = 0; i < nreqs; i++) {
        sim.before[i] = reqs[i].state;
        sim.decoding[i] = rt_request_decoding(&reqs[i]);
        sim.running_before += reqs[i].state == RT_REQ_RUNNING;
    }
}

/* A request just admitted starts prefilled where its shared prefix ends: whole blocks
   short of its last position, none without a prefix index. */
static void check_cached(const struct rt_request *r)
{
    const uint32_t b = kvc.cfg.block_tokens;
    assert_int_equal(r->prefilled, r->cached);
    assert_int_equal(r->cached, r->kv.shared * b);
    assert_true(r->cached < r->input_len);
    if (!kvc.px)
        assert_int_equal(r->cached, 0);
    sim.cached_reqs += r->cached > 0;
}

/* Admissions happen in index order, never past a request still queued. */
static void check_admissions(void)
{
    sim.admitted = 0;
    for (uint32_t i = 0; i < nreqs; i++) {
        if (sim.before[i] == RT_REQ_RUNNING)
            assert_int_equal(reqs[i].state, RT_REQ_RUNNING);
        if (sim.before[i] != RT_REQ_QUEUED || reqs[i].state == RT_REQ_QUEUED)
            continue;
        assert_int_equal(reqs[i].state, RT_REQ_RUNNING);
        check_cached(&reqs[i]);
        assert_true(sim.last_admitted == UINT32_MAX || i > sim.last_admitted);
        for (uint32_t j = 0; j < i; j++)
            assert_int_not_equal(reqs[j].state, RT_REQ_QUEUED);
        sim.last_admitted = i;
        sim.admitted++;
    }
    uint32_t queued = 0;
    for (uint32_t i = 0; i < nreqs; i++)
        queued += reqs[i].state == RT_REQ_QUEUED;
    assert_int_equal(sched_queue_len(&sch), queued);
}

/* Each run well formed, prefill runs first, one run per request, rows within the plan. */
static void check_runs(void)
{
    uint32_t rows = 0, seen[SIM_REQS_MAX] = { 0 }, prefill = 0, decode = 0;
    assert_true(plan.nruns >= 1 && plan.nruns <= sch.p.max_batch);
    assert_true(plan.nruns <= RT_SCHED_RUNS_MAX && plan.nprefill <= plan.nruns);
    for (uint32_t i = 0; i < plan.nruns; i++) {
        const struct rt_run *run = &plan.runs[i];
        const struct rt_request *r = &reqs[run->req];
        assert_true(run->req < nreqs && r->state == RT_REQ_RUNNING);
        assert_int_equal(seen[run->req]++, 0);
        assert_int_equal(run->prefill, i < plan.nprefill);
        if (run->prefill) {
            assert_int_equal(run->pos, r->prefilled);
            assert_true(run->count >= 1 && run->pos + run->count <= r->input_len);
            assert_int_equal(run->wants_token, run->pos + run->count == r->input_len &&
                                                   plan.layer1 == sch.p.num_layers);
            prefill += run->count;
        } else {
            assert_true(sim.decoding[run->req]);
            assert_int_equal(run->pos, r->input_len + r->generated - 1);
            assert_int_equal(run->count, 1);
            assert_true(run->wants_token);
            decode++;
        }
        assert_true(r->kv.len >= run->pos + run->count);  /* grown before returning */
        rows += run->count;
    }
    assert_int_equal(plan.prefill_tokens, prefill);
    assert_int_equal(plan.decode_tokens, decode);
    assert_true(rows <= sch.p.max_tokens);
    assert_true(plan.layer0 < plan.layer1 && plan.layer1 <= sch.p.num_layers);
    assert_true(plan.group < plan.groups);
}

/* Every request that was decoding has its decode run. */
static void check_stall_free(void)
{
    uint32_t decoding = 0;
    for (uint32_t i = 0; i < nreqs; i++)
        decoding += sim.decoding[i];
    assert_int_equal(plan.decode_tokens, decoding);
}

/* New prompts run whole: all that the prefix cache left of them. */
static void check_whole_new_prompts(void)
{
    assert_int_equal(plan.nprefill, sim.admitted);
    for (uint32_t i = 0; i < plan.nprefill; i++) {
        const struct rt_request *r = &reqs[plan.runs[i].req];
        assert_int_equal(sim.before[plan.runs[i].req], RT_REQ_QUEUED);
        assert_int_equal(plan.runs[i].pos, r->cached);
        assert_int_equal(plan.runs[i].count, r->input_len - r->cached);
    }
}

static uint32_t expected_groups(uint32_t tokens)
{
    uint32_t g = sch.p.groups;
    if (g == 0)
        g = tokens <= sch.p.group_tokens ? 1 : (tokens + sch.p.group_tokens - 1) /
                                                   sch.p.group_tokens;
    return g < sch.p.num_layers ? g : sch.p.num_layers;
}

static void open_cycle(void)
{
    assert_int_equal(plan.group, 0);
    assert_int_equal(plan.groups, expected_groups(plan.prefill_tokens));
    if (sch.p.kind == RT_SCHED_LAYERED)
        check_whole_new_prompts();
    else
        assert_true(plan.prefill_tokens <= sch.p.chunk);
    sim.cycle_open = true;
    sim.cycle_nruns = plan.nprefill;
    memcpy(sim.cycle_runs, plan.runs, plan.nprefill * sizeof(plan.runs[0]));
    sim.cycle_groups = plan.groups;
    sim.next_group = sim.next_layer = sim.max_size = 0;
    sim.min_size = UINT32_MAX;
    sim.cycles++;
    sim.multi_group_cycles += plan.groups > 1;
}

/* One group per iteration; groups contiguous, in order, covering every layer once per
   cycle, sizes differing by at most one; the same prefill runs throughout. */
static void check_layers(void)
{
    if (plan.nprefill == 0) {
        assert_false(sim.cycle_open);
        assert_true(plan.layer0 == 0 && plan.layer1 == sch.p.num_layers);
        assert_true(plan.group == 0 && plan.groups == 1);
        return;
    }
    sim.cycle_was_open = sim.cycle_open;
    if (!sim.cycle_open) {
        open_cycle();
    } else {
        assert_int_equal(sim.admitted, 0);
        assert_int_equal(plan.nprefill, sim.cycle_nruns);
        assert_int_equal(plan.groups, sim.cycle_groups);
        for (uint32_t i = 0; i < plan.nprefill; i++) {
            assert_int_equal(plan.runs[i].req, sim.cycle_runs[i].req);
            assert_int_equal(plan.runs[i].pos, sim.cycle_runs[i].pos);
            assert_int_equal(plan.runs[i].count, sim.cycle_runs[i].count);
        }
    }
    uint32_t size = plan.layer1 - plan.layer0;
    assert_int_equal(plan.group, sim.next_group);
    assert_int_equal(plan.layer0, sim.next_layer);
    sim.min_size = size < sim.min_size ? size : sim.min_size;
    sim.max_size = size > sim.max_size ? size : sim.max_size;
    sim.next_layer = plan.layer1;
    if (++sim.next_group == sim.cycle_groups) {
        assert_int_equal(plan.layer1, sch.p.num_layers);
        assert_true(sim.max_size - sim.min_size <= 1);
        sim.cycle_open = false;
    }
}

static void check_policy(void)
{
    bool admits = sim.admitted > 0;
    if (!is_layered()) {
        assert_true(plan.layer0 == 0 && plan.layer1 == sch.p.num_layers);
        assert_true(plan.group == 0 && plan.groups == 1);
    }
    switch (sch.p.kind) {
    case RT_SCHED_STATIC:
        if (admits)
            assert_int_equal(sim.running_before, 0);  /* never while a batch runs */
        /* fallthrough */
    case RT_SCHED_CONTINUOUS:
        if (admits)
            check_whole_new_prompts();  /* prompts only: an iteration of their own */
        if (admits)
            assert_int_equal(plan.nruns, plan.nprefill);
        else
            assert_int_equal(plan.nprefill, 0);
        break;
    case RT_SCHED_CHUNKED: {
        uint32_t budget = sch.p.chunk < sch.p.max_tokens ? sch.p.chunk : sch.p.max_tokens;
        assert_true(plan.prefill_tokens + plan.decode_tokens <= budget);
        break;
    }
    case RT_SCHED_PD_FUSION:
        assert_true(plan.decode_tokens + plan.nprefill * sch.p.prefill_units <= sch.p.budget);
        for (uint32_t i = 0; i < plan.nprefill; i++)
            assert_true(plan.runs[i].count <= sch.p.chunk);
        break;
    default:
        assert_true(is_layered());
        check_layers();
        break;
    }
    if (!(admits && whole_prompts() && !is_layered()))
        check_stall_free();
}

static void check_iteration(void)
{
    check_admissions();
    check_runs();
    check_policy();
    check_kvc();
    sim.iterations++;
    sim.admit_iters += sim.admitted > 0;
    sim.mixed_iters += plan.nprefill > 0 && plan.nprefill < plan.nruns;
    uint64_t ring = kvc_ring_rows_used(&kvc);
    sim.max_ring = ring > sim.max_ring ? ring : sim.max_ring;
    for (uint32_t i = 0; i < nreqs; i++) {
        sim.prefilled[i] = reqs[i].prefilled;
        sim.generated[i] = reqs[i].generated;
    }
}

/* Prompts advance after the last layer, tokens come from wants_token runs, finished
   requests give their KV space back. */
static void check_completed(void)
{
    for (uint32_t i = 0; i < plan.nruns; i++) {
        const struct rt_run *run = &plan.runs[i];
        const struct rt_request *r = &reqs[run->req];
        uint32_t adv = run->prefill && plan.layer1 == sch.p.num_layers ? run->count : 0;
        assert_int_equal(r->prefilled, sim.prefilled[run->req] + adv);
        assert_int_equal(r->generated, sim.generated[run->req] + run->wants_token);
        assert_int_equal(r->state, r->generated == r->output_len ? RT_REQ_FINISHED
                                                                 : RT_REQ_RUNNING);
        sim.finished += r->state == RT_REQ_FINISHED;
    }
    assert_int_equal(sch.iterations, sim.iterations);
    check_kvc();
}

static void check_end(void)
{
    uint32_t finished = 0, rejected = 0;
    for (uint32_t i = 0; i < nreqs; i++) {
        const struct rt_request *r = &reqs[i];
        if (r->state == RT_REQ_FINISHED) {
            assert_int_equal(r->generated, r->output_len);
            assert_int_equal(r->prefilled, r->input_len);
            assert_int_equal(r->reject, RT_REJECT_NONE);
            finished++;
        } else {
            assert_int_equal(r->state, RT_REQ_REJECTED);
            assert_int_not_equal(r->reject, RT_REJECT_NONE);
            assert_int_equal(r->generated, 0);
            rejected++;
        }
        assert_false(r->kv.admitted);
    }
    assert_int_equal(finished, sim.finished);
    assert_int_equal(finished, sch.finished);
    assert_int_equal(rejected, sch.rejected);
    assert_int_equal(sch.nrunning, 0);
    assert_int_equal(sched_queue_len(&sch), 0);
    /* Only the prefix index's idle blocks remain, and they are unreserved. */
    assert_int_equal(kvc_blocks_used(&kvc), kvc.px ? kvc.px->cached : 0);
    assert_true(!kvc.px || kvc.px->evictable == kvc.px->cached);
    assert_int_equal(kvc_ring_rows_used(&kvc), 0);
    assert_int_equal(kvc.nsegs, 0);
    assert_int_equal(kvc.unreserved, kvc.cfg.sram_blocks);
}

/* Drives the scheduler with a fake clock until every request is done. */
static void simulate(uint32_t max_seq)
{
    memset(&sim, 0, sizeof(sim));
    sim.max_seq = max_seq;
    sim.last_admitted = UINT32_MAX;
    for (uint32_t i = 0; i < nreqs; i++)
        sim.before[i] = reqs[i].state;
    for (uint32_t guard = 0; !sched_done(&sch); guard++) {
        assert_true(guard < 200000);
        sched_arrive(&sch, sim.now, max_seq);
        check_arrivals();
        snapshot();
        if (!sched_next(&sch, &plan)) {
            /* Nothing runs only when nothing is running or admissible. */
            assert_int_equal(sch.nrunning, 0);
            assert_int_equal(sched_queue_len(&sch), 0);
            uint64_t t = sched_next_arrival_ps(&sch);
            assert_true(t != UINT64_MAX && t > sim.now);
            sim.now = t;
            continue;
        }
        check_iteration();
        sim.now += MS + 10 * US * (plan.prefill_tokens + plan.decode_tokens);
        sched_complete(&sch, &plan);
        check_completed();
    }
    check_end();
}

/* ---- policies over synthetic traces ------------------------------------------------------ */

static void run_policy(struct rt_sched_params p, uint32_t seed, uint32_t blocks, uint64_t ring)
{
    make_trace(seed, 120);
    start(&p, 16, blocks, ring);
    simulate(4096);
    /* The trace must have exercised what it is meant to. */
    assert_true(sim.finished > 60);
    assert_true(sim.admit_iters > 10);
    assert_true(sim.rejected[RT_REJECT_EMPTY] > 0 && sim.rejected[RT_REJECT_TOO_LONG] > 0);
    assert_true(sim.rejected[RT_REJECT_KV_NEVER] > 0);
    assert_int_equal(sim.rejected[RT_REJECT_PROMPT_ROWS] > 0, whole_prompts());
    if (ring >= 2048 && p.kind != RT_SCHED_STATIC)
        assert_true(sim.max_ring > 0);  /* SRAM ran short: sequences spilled */
    if (p.kind != RT_SCHED_STATIC && p.kind != RT_SCHED_CONTINUOUS)
        assert_true(sim.mixed_iters > 10);
    if (is_layered())
        assert_true(sim.multi_group_cycles > 5);
}

static void run_policy_all(struct rt_sched_params p)
{
    run_policy(p, 1u, 64, 2048);
    run_policy(p, 99u, 64, 2048);
    run_policy(p, 4242u, 24, 700);  /* KV short: admissions wait */
}

static void test_sim_static(void **state)
{
    (void)state;
    run_policy_all(params(RT_SCHED_STATIC));
}

static void test_sim_continuous(void **state)
{
    (void)state;
    run_policy_all(params(RT_SCHED_CONTINUOUS));
}

static void test_sim_chunked(void **state)
{
    (void)state;
    run_policy_all(params(RT_SCHED_CHUNKED));
    struct rt_sched_params p = params(RT_SCHED_CHUNKED);
    p.chunk = 8;  /* the budget at its minimum: decodes of a full batch fill it */
    run_policy(p, 7u, 64, 2048);
}

static void test_sim_layered(void **state)
{
    (void)state;
    struct rt_sched_params p = params(RT_SCHED_LAYERED);
    run_policy_all(p);
    p.groups = 3;  /* fixed N_lg, 8 layers: 3, 3, 2 */
    run_policy_all(p);
}

static void test_sim_layered_chunked(void **state)
{
    (void)state;
    struct rt_sched_params p = params(RT_SCHED_LAYERED_CHUNKED);
    run_policy_all(p);
    p.groups = 2;
    p.chunk = 100;
    run_policy_all(p);
}

static void test_sim_pd_fusion(void **state)
{
    (void)state;
    run_policy_all(params(RT_SCHED_PD_FUSION));
    struct rt_sched_params p = params(RT_SCHED_PD_FUSION);
    p.budget = 9;  /* a full batch leaves no unit for prefill */
    p.prefill_units = 3;
    p.chunk = 300;
    run_policy(p, 5u, 64, 2048);
}

/* ---- exact scenarios ------------------------------------------------------------------- */

/* ---- prefix caching ---------------------------------------------------------------------- */

#define PX_HASHES 32u

/* The requests' prompt hashes, handed to the scheduler as its prefix source's context. */
struct px_table {
    uint64_t hash[SIM_REQS_MAX][PX_HASHES];
    uint32_t nhash[SIM_REQS_MAX];
    uint32_t hash_block;
};

static struct px_table pxt;
static struct rt_kvc_index pxi;  /* ~270 KiB: not on the stack */

/* rt_sched_prefix_fn over the table given as ctx. */
static void px_source(const void *ctx, uint32_t req, struct rt_kv_prefix *p)
{
    const struct px_table *t = ctx;
    assert_true(req < nreqs);
    *p = (struct rt_kv_prefix){ .hash = t->hash[req], .nhash = t->nhash[req],
                                .hash_block = t->hash_block, .input_len = reqs[req].input_len };
}

/* Request req's hash ids: family fam's (fam * 1000 + block) for its first `shared`, then
   its own. */
static void px_hashes(uint32_t req, uint32_t fam, uint32_t shared, uint32_t nhash)
{
    assert_true(req < SIM_REQS_MAX && nhash <= PX_HASHES);
    for (uint32_t i = 0; i < nhash; i++)
        pxt.hash[req][i] = i < shared ? fam * 1000u + i : 1000000u + req * PX_HASHES + i;
    pxt.nhash[req] = nhash;
}

/* Starts policy `kind` (2 layers, max_tokens rows, blocks and hash blocks of 4 tokens)
   with the hash table as its prefix source, and a prefix index only if `attach`. */
static void px_start(enum rt_sched_kind kind, uint32_t max_tokens, bool attach)
{
    struct rt_sched_params p = params(kind);
    p.num_layers = 2;
    p.max_batch = 4;
    p.max_tokens = max_tokens;
    p.groups = kind == RT_SCHED_LAYERED || kind == RT_SCHED_LAYERED_CHUNKED ? 2 : 0;
    p.chunk = kind == RT_SCHED_LAYERED_CHUNKED ? 16 : kind == RT_SCHED_PD_FUSION ? 8 : 64;
    pxt.hash_block = 4;
    start(&p, 4, 256, 0);
    if (attach)
        kvc_prefix_attach(&kvc, &pxi);
    sched_prefix_source(&sch, px_source, &pxt);
}

/* Plans and completes iterations (checking the KV cache after each) until one has a run of
   request `req`; that plan is left in `plan`, not completed. The index of the run. */
static uint32_t px_until_run_of(uint32_t req)
{
    for (uint32_t guard = 0; guard < 100; guard++) {
        assert_true(sched_next(&sch, &plan));
        check_kvc();
        for (uint32_t i = 0; i < plan.nruns; i++)
            if (plan.runs[i].req == req)
                return i;
        sched_complete(&sch, &plan);
        check_kvc();
    }
    fail_msg("request %u never ran", req);
    return 0;
}

/* Runs what is left to the end: every request finished, only idle cached blocks left. */
static void px_finish(void)
{
    do {
        sched_complete(&sch, &plan);
        check_kvc();
    } while (sched_next(&sch, &plan));
    assert_true(sched_done(&sch));
    for (uint32_t i = 0; i < nreqs; i++)
        assert_int_equal(reqs[i].state, RT_REQ_FINISHED);
    assert_int_equal(kvc_blocks_used(&kvc), kvc.px ? kvc.px->cached : 0);
    assert_int_equal(kvc.unreserved, kvc.cfg.sram_blocks);
}

/* r0 (30 tokens, 7 hash ids) finishes its prefill, publishing each chunk's whole blocks,
   then r1 (26 tokens) arrives sharing its first 5 hash blocks: 5 blocks (20 tokens) cached,
   6 left to prefill, from position 20.
   Without an index (or for pd-fusion's and layered-chunked's chunks) nothing else moves. */
static void px_second_request(enum rt_sched_kind kind, bool attach)
{
    nreqs = 0;
    add_req(0, 30, 3);
    add_req(MS, 26, 2);
    px_hashes(0, 1, 7, 7);
    px_hashes(1, 1, 5, 7);
    px_start(kind, 64, attach);
    assert_int_equal(sched_arrive(&sch, 0, 4096), 1);
    while (reqs[0].prefilled < 30) {
        px_until_run_of(0);
        sched_complete(&sch, &plan);
        check_kvc();
        /* A chunk's whole blocks are published once written in every layer (layered:
           after the last group, when prefilled moves). */
        const uint32_t done = reqs[0].prefilled / 4;
        assert_int_equal(kvc.px ? kvc.px->cached : 0, attach ? (done < 7 ? done : 7) : 0);
    }
    assert_int_equal(kvc.px ? kvc.px->cached : 0, attach ? 7 : 0);  /* 28 of 29 positions */
    assert_int_equal(sched_arrive(&sch, MS, 4096), 1);
    const uint32_t i = px_until_run_of(1), cached = attach ? 20 : 0;
    const uint32_t chunk = kind == RT_SCHED_LAYERED_CHUNKED ? 16
                           : kind == RT_SCHED_PD_FUSION      ? 8
                                                             : 26;
    const uint32_t count = 26 - cached < chunk ? 26 - cached : chunk;
    assert_int_equal(reqs[1].cached, cached);
    assert_int_equal(reqs[1].prefilled, cached);
    assert_int_equal(reqs[1].kv.shared, cached / 4);
    assert_true(plan.runs[i].prefill);
    assert_int_equal(plan.runs[i].pos, cached);
    assert_int_equal(plan.runs[i].count, count);
    assert_int_equal(plan.prefill_tokens, count);
    px_finish();
    assert_int_equal(reqs[1].cached, cached);  /* kept for the metrics */
    /* r1's sixth block (its own hash id) joins the index under r0's fifth. */
    assert_int_equal(kvc.px ? kvc.px->cached : 0, attach ? 8 : 0);
}

static void test_prefix_second_request(void **state)
{
    (void)state;
    static const enum rt_sched_kind kinds[] = { RT_SCHED_CHUNKED, RT_SCHED_CONTINUOUS,
                                                RT_SCHED_LAYERED, RT_SCHED_LAYERED_CHUNKED,
                                                RT_SCHED_STATIC, RT_SCHED_PD_FUSION };
    for (uint32_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        px_second_request(kinds[k], true);
        px_second_request(kinds[k], false);
    }
}

/* r2 (30 tokens) shares r0's 7 blocks, so 2 tokens are left: after r1's 10 it fits what
   is left of the iteration's 32 rows (whole prompts) or of a 16-token chunk (layered-
   chunked), which its full length would not. */
static void px_rest_fits(enum rt_sched_kind kind, bool attach)
{
    nreqs = 0;
    add_req(0, 30, 2);
    add_req(MS, 10, 2);
    add_req(MS, 30, 2);
    px_hashes(0, 1, 7, 7);
    px_hashes(1, 2, 0, 0);
    px_hashes(2, 1, 7, 7);
    px_start(kind, 32, attach);
    assert_int_equal(sched_arrive(&sch, 0, 4096), 1);
    while (reqs[0].prefilled < 30) {
        px_until_run_of(0);
        sched_complete(&sch, &plan);
    }
    assert_int_equal(sched_arrive(&sch, MS, 4096), 2);
    const bool decodes = kind != RT_SCHED_CONTINUOUS;  /* r0 decodes beside the prompts */
    next_plan((attach ? 2 : 1) + decodes, attach ? 2 : 1);
    assert_true(plan.runs[0].req == 1 && plan.runs[0].pos == 0 && plan.runs[0].count == 10);
    if (attach)
        assert_true(plan.runs[1].req == 2 && plan.runs[1].pos == 28 &&
                    plan.runs[1].count == 2);
    assert_int_equal(reqs[2].state, attach ? RT_REQ_RUNNING : RT_REQ_QUEUED);
    assert_int_equal(plan.prefill_tokens, attach ? 12 : 10);
    check_kvc();
    px_finish();
}

static void test_prefix_rest_fits_rows(void **state)
{
    (void)state;
    static const enum rt_sched_kind kinds[] = { RT_SCHED_CONTINUOUS, RT_SCHED_LAYERED,
                                                RT_SCHED_LAYERED_CHUNKED };
    for (uint32_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        px_rest_fits(kinds[k], true);
        px_rest_fits(kinds[k], false);
    }
}

/* Prompts of 4 families sharing their first hash blocks, the rest their own. */
static void px_make_hashes(uint32_t seed)
{
    lcg_state = seed;
    pxt.hash_block = 16;
    for (uint32_t i = 0; i < nreqs; i++) {
        uint32_t n = (reqs[i].input_len + 15) / 16;
        n = n < PX_HASHES ? n : PX_HASHES;
        px_hashes(i, lcg_next() % 4, lcg_next() % (PX_HASHES + 1), n);
    }
}

/* The simulator over a synthetic trace, with the hashes as the prefix source and a prefix
   index if `attach`: every check of run_policy holds, admitted prompts start at their
   cached blocks (check_cached), and with an index many do. */
static void run_policy_px(struct rt_sched_params p, uint32_t seed, uint32_t blocks,
                          uint64_t ring, bool attach)
{
    make_trace(seed, 120);
    px_make_hashes(seed + 1);
    start(&p, 16, blocks, ring);
    if (attach)
        kvc_prefix_attach(&kvc, &pxi);
    sched_prefix_source(&sch, px_source, &pxt);
    simulate(4096);
    assert_true(sim.finished > 60);
    assert_int_equal(sim.cached_reqs > 10, attach);
    if (attach && blocks < 64)
        assert_true(pxi.evictions > 0);  /* a short pool reuses idle cached blocks */
}

static void test_prefix_sim(void **state)
{
    (void)state;
    for (int k = RT_SCHED_STATIC; k <= RT_SCHED_PD_FUSION; k++) {
        struct rt_sched_params p = params((enum rt_sched_kind)k);
        run_policy_px(p, 11u, 64, 2048, true);
        run_policy_px(p, 12u, 24, 700, true);
        run_policy_px(p, 11u, 64, 2048, false);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sim_static),
        cmocka_unit_test(test_sim_continuous),
        cmocka_unit_test(test_sim_chunked),
        cmocka_unit_test(test_sim_layered),
        cmocka_unit_test(test_sim_layered_chunked),
        cmocka_unit_test(test_sim_pd_fusion),
        cmocka_unit_test(test_prefix_second_request),
        cmocka_unit_test(test_prefix_rest_fits_rows),
        cmocka_unit_test(test_prefix_sim),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
