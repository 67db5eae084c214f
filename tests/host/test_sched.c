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
 * Exact small scenarios pin static, continuous, chunked and pd-fusion plans, the adaptive
 * layer-group count (a 2048-token prompt: 4 groups of 512; capped at num_layers), the
 * rejection reasons and names, and sched_init's refusals and messages.
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

#define SIM_REQS_MAX 160u
#define MS 1000000000ull  /* picoseconds */
#define US 1000000ull

static struct rt_request reqs[SIM_REQS_MAX];
static uint32_t nreqs;
static struct rt_kvc kvc;
static struct rt_sched sch;
static struct rt_iter_plan plan;
static char err[200];

static uint32_t lcg_state;

static uint32_t lcg_next(void)
{
    lcg_state = lcg_state * 1664525u + 1013904223u;
    return lcg_state >> 8;
}

/* ---- setup ------------------------------------------------------------------------------- */

static struct rt_sched_params params(enum rt_sched_kind kind)
{
    struct rt_sched_params p = { .kind = kind, .num_layers = 8, .max_batch = 8,
                                 .max_tokens = 512, .chunk = 256, .groups = 0,
                                 .group_tokens = 128, .budget = 24, .prefill_units = 8 };
    if (kind == RT_SCHED_PD_FUSION)
        p.chunk = 64;
    if (kind == RT_SCHED_LAYERED_CHUNKED)
        p.chunk = 200;
    return p;
}

static void add_req(uint64_t arrival_ps, uint32_t input, uint32_t output)
{
    assert_true(nreqs < SIM_REQS_MAX);
    struct rt_request *r = &reqs[nreqs];
    memset(r, 0, sizeof(*r));
    r->id = nreqs++;
    r->arrival_ps = arrival_ps;
    r->input_len = input;
    r->output_len = output;
}

static void start(const struct rt_sched_params *p, uint32_t block_tokens, uint32_t blocks,
                  uint64_t ring)
{
    struct rt_kvc_config c = { .block_tokens = block_tokens, .sram_blocks = blocks,
                               .ring_rows = ring };
    assert_int_equal(kvc_init(&kvc, &c), NPU_OK);
    int rc = sched_init(&sch, p, reqs, nreqs, &kvc, err, sizeof(err));
    if (rc != NPU_OK)
        fail_msg("sched_init: %s", err);
}

/* Requests at random times (0..4 ms apart) with mostly ordinary lengths, and every so often
   one that is empty, too long, can never fit the KV cache, or has a long prompt. */
static void make_trace(uint32_t seed, uint32_t n)
{
    uint64_t t = 0;
    nreqs = 0;
    lcg_state = seed;
    for (uint32_t i = 0; i < n; i++) {
        t += (lcg_next() % 4000) * US;
        uint32_t in = 1 + lcg_next() % 480, out = 1 + lcg_next() % 24;
        if (i % 17 == 5)
            in = 600 + lcg_next() % 300;  /* past max_tokens */
        if (i % 23 == 7)
            in = 0;
        if (i % 29 == 11)
            out = 0;
        if (i % 31 == 13) {
            in = 3000;
            out = 2000;  /* past max_seq 4096 */
        }
        if (i % 37 == 17) {
            in = 1500;
            out = 700;  /* 2199 positions: past the SRAM and the ring */
        }
        add_req(t, in, out);
    }
}

/* ---- the simulator's checks -------------------------------------------------------------- */

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

static void check_whole_new_prompts(void)
{
    assert_int_equal(plan.nprefill, sim.admitted);
    for (uint32_t i = 0; i < plan.nprefill; i++) {
        assert_int_equal(sim.before[plan.runs[i].req], RT_REQ_QUEUED);
        assert_int_equal(plan.runs[i].pos, 0);
        assert_int_equal(plan.runs[i].count, reqs[plan.runs[i].req].input_len);
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
    assert_int_equal(kvc_blocks_used(&kvc), 0);
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

static void expect_run(uint32_t i, uint32_t req, uint32_t pos, uint32_t count, bool wants)
{
    assert_true(i < plan.nruns);
    const struct rt_run *run = &plan.runs[i];
    assert_int_equal(run->req, req);
    assert_int_equal(run->pos, pos);
    assert_int_equal(run->count, count);
    assert_int_equal(run->prefill, i < plan.nprefill);
    assert_int_equal(run->wants_token, wants);
}

/* sched_next must plan nruns runs of which nprefill are prefill runs. */
static void next_plan(uint32_t nruns, uint32_t nprefill)
{
    assert_true(sched_next(&sch, &plan));
    assert_int_equal(plan.nruns, nruns);
    assert_int_equal(plan.nprefill, nprefill);
}

/* Two layers, 64 rows, a roomy KV cache, every request arrived at 0. chunk, budget and
   prefill_units: 0 keeps params()'s. */
static void small_start(enum rt_sched_kind kind, uint32_t max_batch, uint32_t chunk,
                        uint32_t budget, uint32_t prefill_units)
{
    struct rt_sched_params p = params(kind);
    p.num_layers = 2;
    p.max_batch = max_batch;
    p.max_tokens = 64;
    p.chunk = chunk ? chunk : p.chunk;
    p.budget = budget ? budget : p.budget;
    p.prefill_units = prefill_units ? prefill_units : p.prefill_units;
    start(&p, 4, 256, 0);
    assert_int_equal(sched_arrive(&sch, 0, 4096), nreqs);
}

static void test_static_exact(void **state)
{
    (void)state;
    nreqs = 0;
    add_req(0, 10, 3);
    add_req(0, 20, 1);
    add_req(0, 5, 2);
    small_start(RT_SCHED_STATIC, 2, 0, 0, 0);
    next_plan(2, 2);  /* the batch: both prompts, whole */
    expect_run(0, 0, 0, 10, true);
    expect_run(1, 1, 0, 20, true);
    sched_complete(&sch, &plan);
    assert_int_equal(reqs[1].state, RT_REQ_FINISHED);
    next_plan(1, 0);  /* a slot is free, but the batch has not drained */
    expect_run(0, 0, 10, 1, true);
    assert_int_equal(reqs[2].state, RT_REQ_QUEUED);
    sched_complete(&sch, &plan);
    next_plan(1, 0);
    expect_run(0, 0, 11, 1, true);
    sched_complete(&sch, &plan);
    assert_int_equal(reqs[0].state, RT_REQ_FINISHED);
    next_plan(1, 1);
    expect_run(0, 2, 0, 5, true);
    sched_complete(&sch, &plan);
    next_plan(1, 0);
    expect_run(0, 2, 5, 1, true);
    sched_complete(&sch, &plan);
    assert_true(sched_done(&sch));
    assert_false(sched_next(&sch, &plan));
    assert_int_equal(kvc_blocks_used(&kvc), 0);
}

static void test_continuous_exact(void **state)
{
    (void)state;
    nreqs = 0;
    add_req(0, 10, 3);
    add_req(0, 30, 2);
    add_req(MS, 4, 2);
    struct rt_sched_params p = params(RT_SCHED_CONTINUOUS);
    p.num_layers = 2;
    p.max_batch = 4;
    p.max_tokens = 32;
    start(&p, 4, 256, 0);
    assert_int_equal(sched_arrive(&sch, 0, 4096), 2);
    next_plan(1, 1);  /* 10 + 30 rows do not fit 32: r1 waits for the next iteration */
    expect_run(0, 0, 0, 10, true);
    sched_complete(&sch, &plan);
    next_plan(1, 1);  /* prefill first: r0 does not decode beside the new prompt */
    expect_run(0, 1, 0, 30, true);
    sched_complete(&sch, &plan);
    assert_int_equal(sched_arrive(&sch, MS, 4096), 1);
    next_plan(1, 1);
    expect_run(0, 2, 0, 4, true);
    sched_complete(&sch, &plan);
    next_plan(3, 0);
    expect_run(0, 0, 10, 1, true);
    expect_run(1, 1, 30, 1, true);
    expect_run(2, 2, 4, 1, true);
    sched_complete(&sch, &plan);
    next_plan(1, 0);
    expect_run(0, 0, 11, 1, true);
    sched_complete(&sch, &plan);
    assert_true(sched_done(&sch));
}

static void test_chunked_exact(void **state)
{
    (void)state;
    nreqs = 0;
    add_req(0, 20, 3);
    add_req(0, 5, 2);
    small_start(RT_SCHED_CHUNKED, 2, 8, 0, 0);
    next_plan(1, 1);  /* r0's first chunk takes the whole budget: r1 is not admitted */
    expect_run(0, 0, 0, 8, false);
    assert_int_equal(reqs[1].state, RT_REQ_QUEUED);
    sched_complete(&sch, &plan);
    next_plan(1, 1);
    expect_run(0, 0, 8, 8, false);
    sched_complete(&sch, &plan);
    next_plan(2, 2);  /* the rest of r0's prompt, then r1's first chunk */
    expect_run(0, 0, 16, 4, true);
    expect_run(1, 1, 0, 4, false);
    sched_complete(&sch, &plan);
    next_plan(2, 1);  /* r0 decodes first in the budget; prefill runs still come first */
    expect_run(0, 1, 4, 1, true);
    expect_run(1, 0, 20, 1, true);
    sched_complete(&sch, &plan);
    next_plan(2, 0);
    expect_run(0, 0, 21, 1, true);
    expect_run(1, 1, 5, 1, true);
    sched_complete(&sch, &plan);
    assert_true(sched_done(&sch));
    /* The budget's last token still admits a request. */
    nreqs = 0;
    add_req(0, 1, 2);
    add_req(0, 5, 1);
    small_start(RT_SCHED_CHUNKED, 2, 2, 0, 0);
    next_plan(2, 2);
    expect_run(0, 0, 0, 1, true);
    expect_run(1, 1, 0, 1, false);
    sched_complete(&sch, &plan);
    next_plan(2, 1);  /* r0's decode leaves r1 one token */
    expect_run(0, 1, 1, 1, false);
    expect_run(1, 0, 1, 1, true);
}

static void test_pd_fusion_exact(void **state)
{
    (void)state;
    nreqs = 0;
    add_req(0, 10, 3);
    add_req(0, 3, 2);
    add_req(0, 6, 2);
    small_start(RT_SCHED_PD_FUSION, 3, 4, 4, 2);
    next_plan(2, 2);  /* 4 units: two chunks */
    expect_run(0, 0, 0, 4, false);
    expect_run(1, 1, 0, 3, true);
    sched_complete(&sch, &plan);
    next_plan(2, 1);  /* one decode: 3 units left, one chunk */
    expect_run(0, 0, 4, 4, false);
    expect_run(1, 1, 3, 1, true);
    sched_complete(&sch, &plan);
    assert_int_equal(reqs[1].state, RT_REQ_FINISHED);
    next_plan(2, 2);
    expect_run(0, 0, 8, 2, true);
    expect_run(1, 2, 0, 4, false);
    sched_complete(&sch, &plan);
    next_plan(2, 1);
    expect_run(0, 2, 4, 2, true);
    expect_run(1, 0, 10, 1, true);
    sched_complete(&sch, &plan);
    next_plan(2, 0);
    expect_run(0, 0, 11, 1, true);
    expect_run(1, 2, 6, 1, true);
    sched_complete(&sch, &plan);
    assert_true(sched_done(&sch));
}

/* One layered cycle over `layers` layers; checks each group's range against the expected
   starts (bounds[g] .. bounds[g + 1]). */
static void expect_cycle(const uint32_t *bounds, uint32_t groups, uint32_t prompt)
{
    for (uint32_t g = 0; g < groups; g++) {
        next_plan(1, 1);
        assert_int_equal(plan.group, g);
        assert_int_equal(plan.groups, groups);
        assert_int_equal(plan.layer0, bounds[g]);
        assert_int_equal(plan.layer1, bounds[g + 1]);
        expect_run(0, 0, 0, prompt, g + 1 == groups);
        sched_complete(&sch, &plan);
        assert_int_equal(reqs[0].prefilled, g + 1 == groups ? prompt : 0);
    }
}

static void layered_one(uint32_t layers, uint32_t groups_param, uint32_t prompt)
{
    nreqs = 0;
    add_req(0, prompt, 2);
    struct rt_sched_params p = params(RT_SCHED_LAYERED);
    p.num_layers = layers;
    p.max_tokens = 4096;
    p.group_tokens = 512;
    p.groups = groups_param;
    start(&p, 16, 512, 0);
    assert_int_equal(sched_arrive(&sch, 0, 8192), 1);
}

static void test_layered_groups(void **state)
{
    (void)state;
    static const uint32_t four[] = { 0, 8, 16, 24, 32 };
    layered_one(32, 0, 2048);  /* adaptive: ceil(2048 / 512) = 4 groups of 8 layers */
    expect_cycle(four, 4, 2048);
    next_plan(1, 0);  /* after the cycle: a decode over every layer */
    assert_true(plan.layer0 == 0 && plan.layer1 == 32 && plan.group == 0 && plan.groups == 1);
    expect_run(0, 0, 2048, 1, true);
    sched_complete(&sch, &plan);
    assert_true(sched_done(&sch));
    static const uint32_t five[] = { 0, 7, 14, 20, 26, 32 };
    layered_one(32, 0, 2049);  /* 5 groups: 7, 7, 6, 6, 6 */
    expect_cycle(five, 5, 2049);
    static const uint32_t capped[] = { 0, 1, 2, 3 };
    layered_one(3, 0, 2048);  /* capped at num_layers */
    expect_cycle(capped, 3, 2048);
    static const uint32_t one[] = { 0, 3 };
    layered_one(3, 0, 100);  /* a short prompt: one group */
    expect_cycle(one, 1, 100);
    static const uint32_t fixed[] = { 0, 3, 6, 8, 10 };
    layered_one(10, 4, 100);  /* fixed N_lg = 4 over 10 layers: 3, 3, 2, 2 */
    expect_cycle(fixed, 4, 100);
}

/* Concurrent prompts merge into one cycle while they fit the rows; the running decodes
   count against the rows too. */
static void test_layered_merge(void **state)
{
    (void)state;
    nreqs = 0;
    add_req(0, 40, 3);
    add_req(0, 50, 5);
    add_req(0, 99, 2);
    struct rt_sched_params p = params(RT_SCHED_LAYERED);
    p.num_layers = 4;
    p.groups = 2;
    p.max_batch = 4;
    p.max_tokens = 100;
    start(&p, 4, 256, 0);
    sched_arrive(&sch, 0, 4096);
    for (uint32_t g = 0; g < 2; g++) {
        next_plan(2, 2);  /* 40 + 50 fit 100 rows, + 99 does not */
        assert_int_equal(plan.layer0, 2 * g);
        expect_run(0, 0, 0, 40, g == 1);
        expect_run(1, 1, 0, 50, g == 1);
        sched_complete(&sch, &plan);
    }
    for (uint32_t i = 0; i < 2; i++) {
        next_plan(2, 0);  /* 99 rows + 2 decodes pass 100: r2 waits, no cycle */
        assert_true(plan.layer0 == 0 && plan.layer1 == 4 && plan.groups == 1);
        expect_run(0, 0, 40 + i, 1, true);
        expect_run(1, 1, 50 + i, 1, true);
        sched_complete(&sch, &plan);
    }
    assert_int_equal(reqs[0].state, RT_REQ_FINISHED);
    for (uint32_t g = 0; g < 2; g++) {
        next_plan(2, 1);  /* 99 + r1's decode fit: r2's cycle, r1 decoding in each group */
        expect_run(0, 2, 0, 99, g == 1);
        expect_run(1, 1, 52 + g, 1, true);
        sched_complete(&sch, &plan);
    }
}

static void test_layered_chunked_exact(void **state)
{
    (void)state;
    nreqs = 0;
    add_req(0, 40, 3);
    add_req(0, 6, 2);
    add_req(0, 8, 2);
    struct rt_sched_params p = params(RT_SCHED_LAYERED_CHUNKED);
    p.num_layers = 4;
    p.groups = 2;
    p.chunk = 16;
    p.max_batch = 4;
    p.max_tokens = 64;
    start(&p, 4, 256, 0);
    sched_arrive(&sch, 0, 4096);
    static const uint32_t pos[] = { 0, 16, 32 }, cnt[] = { 16, 16, 8 };
    for (uint32_t c = 0; c < 3; c++) {
        for (uint32_t g = 0; g < 2; g++) {
            next_plan(1, 1);  /* r0's chunks; r1 does not merge (6 more passes 16) */
            expect_run(0, 0, pos[c], cnt[c], c == 2 && g == 1);
            sched_complete(&sch, &plan);
        }
    }
    for (uint32_t g = 0; g < 2; g++) {
        next_plan(3, 2);  /* r1 and r2 merged: 6 + 8 fit one chunk */
        expect_run(0, 1, 0, 6, g == 1);
        expect_run(1, 2, 0, 8, g == 1);
        expect_run(2, 0, 40 + g, 1, true);
        sched_complete(&sch, &plan);
    }
}

/* The decodes of running requests shrink a chunk so the rows fit max_tokens. */
static void test_layered_chunked_rows(void **state)
{
    (void)state;
    nreqs = 0;
    add_req(0, 2, 5);
    add_req(0, 20, 1);
    struct rt_sched_params p = params(RT_SCHED_LAYERED_CHUNKED);
    p.num_layers = 1;
    p.groups = 1;
    p.chunk = 10;
    p.max_batch = 2;
    p.max_tokens = 10;
    start(&p, 4, 256, 0);
    sched_arrive(&sch, 0, 4096);
    next_plan(1, 1);  /* r1's first chunk (10) does not fit beside r0's 2 tokens */
    expect_run(0, 0, 0, 2, true);
    sched_complete(&sch, &plan);
    static const uint32_t pos[] = { 0, 9, 18 }, cnt[] = { 9, 9, 2 };
    for (uint32_t c = 0; c < 3; c++) {
        next_plan(2, 1);  /* chunks of 9: r0's decode takes a row */
        expect_run(0, 1, pos[c], cnt[c], c == 2);
        expect_run(1, 0, 2 + c, 1, true);
        sched_complete(&sch, &plan);
    }
    assert_int_equal(reqs[1].state, RT_REQ_FINISHED);
}

static void test_rejections(void **state)
{
    (void)state;
    for (int chunked = 0; chunked < 2; chunked++) {
        nreqs = 0;
        add_req(0, 0, 5);   /* empty */
        add_req(0, 5, 0);   /* empty */
        add_req(0, 60, 50); /* 110 > max_seq 100 */
        add_req(0, 40, 20); /* 59 positions: 15 blocks of 8, and past the 50-row ring */
        add_req(0, 30, 5);  /* prompt 30 > max_tokens 20 (fits the ring) */
        add_req(0, 5, 3);
        add_req(0, 5, 3);
        reqs[6].state = RT_REQ_REJECTED;  /* the loader found a bad token */
        reqs[6].reject = RT_REJECT_BAD_TOKEN;
        struct rt_sched_params p = params(chunked ? RT_SCHED_CHUNKED : RT_SCHED_CONTINUOUS);
        p.max_batch = 2;
        p.max_tokens = 20;
        p.chunk = 8;
        start(&p, 4, 8, 50);
        assert_int_equal(sched_arrive(&sch, 0, 100), 7);
        static const enum rt_reject_reason want[] = {
            RT_REJECT_EMPTY, RT_REJECT_EMPTY, RT_REJECT_TOO_LONG, RT_REJECT_KV_NEVER,
            RT_REJECT_PROMPT_ROWS, RT_REJECT_NONE, RT_REJECT_BAD_TOKEN,
        };
        for (uint32_t i = 0; i < 7; i++) {
            enum rt_reject_reason w = want[i];
            if (chunked && w == RT_REJECT_PROMPT_ROWS)
                w = RT_REJECT_NONE;  /* chunks need no whole prompt in one iteration */
            assert_int_equal(reqs[i].reject, w);
            assert_int_equal(reqs[i].state, w == RT_REJECT_NONE ? RT_REQ_QUEUED
                                                                : RT_REQ_REJECTED);
        }
        assert_int_equal(sched_queue_len(&sch), chunked ? 2 : 1);
        while (sched_next(&sch, &plan))
            sched_complete(&sch, &plan);
        assert_true(sched_done(&sch));
        assert_int_equal(sch.finished, chunked ? 2 : 1);
        assert_int_equal(sch.rejected, chunked ? 5 : 6);
    }
    assert_string_equal(rt_reject_reason_name(RT_REJECT_EMPTY), "empty");
    assert_string_equal(rt_reject_reason_name(RT_REJECT_TOO_LONG), "too_long");
    assert_string_equal(rt_reject_reason_name(RT_REJECT_KV_NEVER), "kv_never_fits");
    assert_string_equal(rt_reject_reason_name(RT_REJECT_PROMPT_ROWS), "prompt_rows");
    assert_string_equal(rt_reject_reason_name(RT_REJECT_BAD_TOKEN), "bad_token");
}

/* Nothing to run before the first arrival; the clock jumps to it. */
static void test_idle_until_arrival(void **state)
{
    (void)state;
    nreqs = 0;
    add_req(5 * MS, 4, 1);
    add_req(9 * MS, 4, 1);
    struct rt_sched_params p = params(RT_SCHED_CONTINUOUS);
    start(&p, 4, 64, 0);
    assert_int_equal(sched_arrive(&sch, 0, 4096), 0);
    assert_false(sched_next(&sch, &plan));
    assert_int_equal(sched_next_arrival_ps(&sch), 5 * MS);
    assert_int_equal(sched_arrive(&sch, 5 * MS, 4096), 1);
    assert_int_equal(sched_next_arrival_ps(&sch), 9 * MS);
    next_plan(1, 1);
    sched_complete(&sch, &plan);
    assert_int_equal(reqs[0].state, RT_REQ_FINISHED);
    assert_false(sched_done(&sch));
    assert_false(sched_next(&sch, &plan));
    assert_int_equal(sched_arrive(&sch, UINT64_MAX, 4096), 1);
    assert_int_equal(sched_next_arrival_ps(&sch), UINT64_MAX);
    next_plan(1, 1);
    sched_complete(&sch, &plan);
    assert_true(sched_done(&sch));
}

static void expect_refused(struct rt_sched_params p, int rc, const char *words)
{
    err[0] = '\0';
    assert_int_equal(sched_init(&sch, &p, reqs, 0, &kvc, err, sizeof(err)), rc);
    if (!strstr(err, words))
        fail_msg("message \"%s\" lacks \"%s\"", err, words);
}

static void test_init_refuses(void **state)
{
    (void)state;
    struct rt_sched_params p = params(RT_SCHED_CHUNKED);
    p.chunk = 0;
    expect_refused(p, NPU_ERR_INVAL, "chunked: chunk 0 must be >= max_batch 8");
    p.chunk = 7;
    expect_refused(p, NPU_ERR_INVAL, "chunk 7");
    expect_refused(params(RT_SCHED_PD_DISAGG), NPU_ERR_STATE, "pd-disagg: planned by pd_init");
    p = params(RT_SCHED_STATIC);
    p.max_batch = RT_SCHED_RUNNING_MAX + 1;
    p.max_tokens = 4096;
    expect_refused(p, NPU_ERR_INVAL, "max_batch 65");
    p.max_batch = 0;
    expect_refused(p, NPU_ERR_INVAL, "max_batch 0");
    p = params(RT_SCHED_CONTINUOUS);
    p.max_tokens = 4;
    expect_refused(p, NPU_ERR_INVAL, "max_batch 8 must be <= max_tokens 4");
    p.max_tokens = 0;
    expect_refused(p, NPU_ERR_INVAL, "max_tokens 0");
    p = params(RT_SCHED_LAYERED);
    p.num_layers = 0;
    expect_refused(p, NPU_ERR_INVAL, "num_layers 0");
    p = params(RT_SCHED_LAYERED);
    p.group_tokens = 0;
    expect_refused(p, NPU_ERR_INVAL, "layered: group_tokens");
    p.groups = 4;  /* fixed groups need no group_tokens */
    start(&p, 4, 8, 0);
    p = params(RT_SCHED_LAYERED_CHUNKED);
    p.chunk = 0;
    expect_refused(p, NPU_ERR_INVAL, "layered-chunked: chunk 0");
    p = params(RT_SCHED_PD_FUSION);
    p.budget = 7;
    expect_refused(p, NPU_ERR_INVAL, "pd-fusion: budget 7 must be >= max_batch 8");
    p.budget = 8;
    p.prefill_units = 9;
    expect_refused(p, NPU_ERR_INVAL, "budget 8 must be >= prefill_units 9");
    p.prefill_units = 0;
    expect_refused(p, NPU_ERR_INVAL, "prefill_units 0");
    p.prefill_units = 8;
    p.chunk = 0;
    expect_refused(p, NPU_ERR_INVAL, "pd-fusion: chunk 0");
}

static void test_kind_names(void **state)
{
    (void)state;
    static const char *const names[] = { "static", "continuous", "chunked", "layered",
                                         "layered-chunked", "pd-fusion", "pd-disagg" };
    for (int k = 0; k < (int)RT_SCHED_KIND_COUNT; k++) {
        assert_string_equal(rt_sched_kind_name((enum rt_sched_kind)k), names[k]);
        assert_int_equal(rt_sched_kind_parse(names[k]), k);
    }
    assert_int_equal(rt_sched_kind_parse("layered_chunked"), -1);
    assert_int_equal(rt_sched_kind_parse(""), -1);
    assert_int_equal(rt_sched_kind_parse(NULL), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kind_names),
        cmocka_unit_test(test_init_refuses),
        cmocka_unit_test(test_rejections),
        cmocka_unit_test(test_idle_until_arrival),
        cmocka_unit_test(test_static_exact),
        cmocka_unit_test(test_continuous_exact),
        cmocka_unit_test(test_chunked_exact),
        cmocka_unit_test(test_pd_fusion_exact),
        cmocka_unit_test(test_layered_groups),
        cmocka_unit_test(test_layered_merge),
        cmocka_unit_test(test_layered_chunked_exact),
        cmocka_unit_test(test_layered_chunked_rows),
        cmocka_unit_test(test_sim_static),
        cmocka_unit_test(test_sim_continuous),
        cmocka_unit_test(test_sim_chunked),
        cmocka_unit_test(test_sim_layered),
        cmocka_unit_test(test_sim_layered_chunked),
        cmocka_unit_test(test_sim_pd_fusion),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
