/* SPDX-License-Identifier: MIT */
/*
 * Host unit tests of PD disaggregation (runtime/core/src/sched_pd.c).
 *
 * A small simulator runs the instances concurrently with a fake clock (an iteration takes
 * 1 ms + 10 us per row, each instance on its own) through pd_arrive / pd_next /
 * pd_complete, completing the earliest busy instance first, and checks after every step:
 * kvc_check on every instance's cache over the requests that hold space there; prefill
 * iterations hold only prompt runs, at most `chunk` rows, oldest admission first; decode
 * iterations hold one decode run for every request the instance runs (stall-free); a
 * request is pulled exactly once, by its decode instance's first run for it, while its
 * prompt is whole and its prefill blocks still held; those blocks are freed when that
 * iteration completes, not before. At the end every request is FINISHED with all its
 * tokens or REJECTED for its reason, and every cache is empty.
 * Exact scenarios pin the roles by placement, a two-instance plan sequence, and
 * pd_init's refusals.
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
#include "rt/sched_pd.h"

#define REQS_MAX 160u
#define MS 1000000000ull
#define US 1000000ull

static struct rt_request reqs[REQS_MAX];
static uint32_t nreqs;
static struct rt_kvc kvcs[RT_PD_INSTANCES_MAX];
static struct rt_kvc *kvp[RT_PD_INSTANCES_MAX];
static struct rt_kv_seq pkv[REQS_MAX];
static uint8_t pinst[REQS_MAX], dinst[REQS_MAX];
static uint32_t ready[REQS_MAX];
static struct rt_pd pd;
static char err[200];

static void add_req(uint64_t t, uint32_t in, uint32_t out)
{
    assert_true(nreqs < REQS_MAX);
    reqs[nreqs] = (struct rt_request){ .id = nreqs, .arrival_ps = t, .input_len = in,
                                       .output_len = out };
    nreqs++;
}

static struct rt_pd_params params(uint32_t instances, uint32_t prefill)
{
    return (struct rt_pd_params){ .num_layers = 8, .max_batch = 8, .max_tokens = 512,
                                  .chunk = 256, .instances = instances,
                                  .prefill_instances = prefill };
}

static int start(const struct rt_pd_params *p, uint32_t blocks, uint64_t ring)
{
    for (uint32_t i = 0; i < RT_PD_INSTANCES_MAX; i++) {
        struct rt_kvc_config c = { .block_tokens = 16, .sram_blocks = blocks, .ring_rows = ring };
        assert_int_equal(kvc_init(&kvcs[i], &c), NPU_OK);
        kvp[i] = &kvcs[i];
    }
    return pd_init(&pd, p, reqs, nreqs, kvp, pkv, pinst, dinst, ready, err, sizeof(err));
}

/* ---- exact scenarios --------------------------------------------------------------------- */

static void test_roles(void **state)
{
    (void)state;
    enum rt_pd_role r[8];
    const char *want[] = { "PD", "PDDP", "PDDD", "PPDP", "PPDDDDDP" };
    const uint32_t n[] = { 2, 4, 4, 4, 8 }, p[] = { 1, 2, 1, 3, 3 };
    for (uint32_t k = 0; k < 5; k++) {
        char got[9] = { 0 };
        rt_pd_roles(n[k], p[k], r);
        for (uint32_t i = 0; i < n[k]; i++)
            got[i] = r[i] == RT_PD_PREFILL ? 'P' : 'D';
        assert_string_equal(got, want[k]);
    }
}

static void expect_refused(struct rt_pd_params p, const char *what)
{
    nreqs = 0;
    assert_int_equal(start(&p, 64, 0), NPU_ERR_INVAL);
    assert_non_null(strstr(err, what));
}

static void test_init_refuses(void **state)
{
    (void)state;
    struct rt_pd_params p = params(1, 1);
    expect_refused(p, "instances (npuctl --instances) 1 must be in [2, 8]");
    p = params(4, 4);
    expect_refused(p, "prefill instances 4 must be in [1, 3]");
    p = params(4, 0);
    expect_refused(p, "prefill instances 0 must be in [1, 3]");
    p = params(2, 1), p.chunk = 600;
    expect_refused(p, "chunk 600 must be in [1, 512]");
    p = params(2, 1), p.max_batch = 0;
    expect_refused(p, "max_batch 0");
}

/* One prefill and one decode instance: prompts of 6 and 3 tokens in chunks of 4. */
static void test_exact_two_instances(void **state)
{
    (void)state;
    nreqs = 0;
    add_req(0, 6, 3);
    add_req(0, 3, 1);
    struct rt_pd_params p = params(2, 1);
    p.chunk = 4;
    assert_int_equal(start(&p, 64, 0), NPU_OK);
    struct rt_iter_plan pi, di;
    assert_int_equal(pd_arrive(&pd, 0, 4096), 2);
    assert_false(pd_next(&pd, 1, &di)); /* nothing prefilled yet */
    assert_true(pd_next(&pd, 0, &pi));
    assert_int_equal(pi.nruns, 1); /* 4 rows of request 0: the budget is spent */
    assert_true(pi.runs[0].prefill && pi.runs[0].count == 4 && !pi.runs[0].wants_token);
    assert_false(pd_next(&pd, 0, &pi)); /* busy */
    pd_complete(&pd, 0, &pi);
    assert_true(pd_next(&pd, 0, &pi));
    assert_int_equal(pi.nruns, 2); /* the rest of 0 (2 rows), then 2 rows of 1 */
    assert_true(pi.runs[0].wants_token && pi.runs[0].pos == 4 && pi.runs[0].count == 2);
    assert_true(pi.runs[1].req == 1 && pi.runs[1].count == 2 && !pi.runs[1].wants_token);
    pd_complete(&pd, 0, &pi);
    assert_int_equal(reqs[0].generated, 1);
    assert_true(pkv[0].admitted); /* held until the decode side pulls it */
    assert_true(pd_next(&pd, 1, &di));
    assert_int_equal(di.nruns, 1);
    assert_true(di.runs[0].pull && di.runs[0].pos == 6 && di.runs[0].count == 1);
    assert_true(pd_next(&pd, 0, &pi)); /* request 1's last row, concurrently */
    pd_complete(&pd, 0, &pi);
    assert_int_equal(reqs[1].state, RT_REQ_FINISHED); /* one output token: no decode */
    assert_true(pkv[0].admitted);
    pd_complete(&pd, 1, &di);
    assert_false(pkv[0].admitted);
    assert_true(pd_next(&pd, 1, &di));
    assert_true(!di.runs[0].pull && di.runs[0].pos == 7);
    pd_complete(&pd, 1, &di);
    assert_true(pd_done(&pd));
    assert_int_equal(kvc_blocks_used(&kvcs[0]) + kvc_blocks_used(&kvcs[1]), 0);
}

/* ---- prefix caching ---------------------------------------------------------------------- */

static const uint64_t pd_hashes[] = { 1, 2, 3 };
static struct rt_kvc_index pdx[2]; /* the two prefill instances' indexes (~270 KiB each) */

/* Requests 1 and 2 share three hash blocks of 16 tokens; request 0 has none. */
static void pd_prefix_of(const void *ctx, uint32_t req, struct rt_kv_prefix *p)
{
    (void)ctx;
    *p = (struct rt_kv_prefix){ .hash = req ? pd_hashes : NULL, .nhash = req ? 3 : 0,
                                .hash_block = 16, .input_len = reqs[req].input_len };
}

/* Instances P D D P, one request a batch, prefix indexes on both prefill instances
   (instance 3's cache of holder_blocks, 0: as the others'), hashes from pd_prefix_of if
   `source`: requests 0 and 1 arrive, prefill on instances 0 and 3 and complete, and
   request 2 arrives. */
static void pd_prefix_start(bool source, uint32_t holder_blocks, struct rt_iter_plan *it)
{
    nreqs = 0;
    add_req(0, 40, 2);
    add_req(0, 40, 2);
    add_req(1, 40, 2);
    struct rt_pd_params p = params(4, 2);
    p.max_batch = 1;
    assert_int_equal(start(&p, 64, 0), NPU_OK);
    const struct rt_kvc_config small = { .block_tokens = 16, .sram_blocks = holder_blocks };
    if (holder_blocks)
        assert_int_equal(kvc_init(&kvcs[3], &small), NPU_OK);
    kvc_prefix_attach(&kvcs[0], &pdx[0]);
    kvc_prefix_attach(&kvcs[3], &pdx[1]);
    if (source)
        pd_prefix_source(&pd, pd_prefix_of, NULL);
    assert_int_equal(pd_arrive(&pd, 0, 4096), 2);
    assert_true(pd_next(&pd, 0, &it[0]) && pd_next(&pd, 3, &it[3]));
    assert_true(pinst[0] == 0 && pinst[1] == 3 && reqs[1].cached == 0);
    pd_complete(&pd, 0, &it[0]);
    pd_complete(&pd, 3, &it[3]);
    assert_int_equal(pdx[1].cached, source ? 2 : 0);
    assert_int_equal(pd_arrive(&pd, 1, 4096), 1);
}

/* Request 0 takes prefill instance 0, request 1 instance 3, which publishes its prompt;
   request 2 then shares it: instance 0, asked first, leaves it to instance 3, where 2
   blocks of 16 are found (39 / 16) and its prefill starts at position 32. Without the
   source, instance 0 takes it and finds none. */
static void pd_prefix_run(bool source)
{
    struct rt_iter_plan it[4];
    pd_prefix_start(source, 0, it);
    const bool zero_takes = pd_next(&pd, 0, &it[0]);
    assert_int_equal(zero_takes, !source);
    if (source)
        assert_true(pd_next(&pd, 3, &it[3]));
    const struct rt_iter_plan *pl = &it[source ? 3 : 0];
    assert_int_equal(pinst[2], source ? 3 : 0);
    assert_int_equal(reqs[2].cached, source ? 32 : 0);
    assert_int_equal(reqs[2].prefilled, reqs[2].cached);
    assert_true(pl->nruns == 1 && pl->runs[0].req == 2);
    assert_int_equal(pl->runs[0].pos, reqs[2].cached);
    assert_int_equal(pl->runs[0].count, 40 - reqs[2].cached);
    assert_int_equal(kvc_seq_nblocks(&pkv[2]), 3); /* 2 shared + its own last one */
}

static void test_prefix_affinity(void **state)
{
    (void)state;
    pd_prefix_run(true);
    pd_prefix_run(false);
}

/* The instance holding the prefix has no KV room left (3 blocks, all request 1's: two
   published, one its own, held until a decode instance pulls it): instance 0 takes the
   queue's head itself rather than leave it to an instance that cannot admit it. */
static void test_prefix_affinity_full(void **state)
{
    (void)state;
    struct rt_iter_plan it[4];
    pd_prefix_start(true, 3, it);
    assert_int_equal(kvcs[3].unreserved, 0);
    assert_true(pd_next(&pd, 0, &it[0]));
    assert_int_equal(pinst[2], 0);
    assert_int_equal(reqs[2].cached, 0);
}

/* ---- the simulator ----------------------------------------------------------------------- */

struct sim {
    uint64_t now, until[RT_PD_INSTANCES_MAX];
    struct rt_iter_plan it[RT_PD_INSTANCES_MAX];
    uint32_t pulls[REQS_MAX];
    uint64_t iterations, pull_iters, concurrent;
};

static struct sim sim;

static void check_caches(void)
{
    for (uint32_t i = 0; i < pd.p.instances; i++) {
        const struct rt_kv_seq *seqs[REQS_MAX];
        uint32_t n = 0;
        for (uint32_t r = 0; r < nreqs; r++) {
            if (pkv[r].admitted && pinst[r] == i)
                seqs[n++] = &pkv[r];
            if (reqs[r].kv.admitted && dinst[r] == i)
                seqs[n++] = &reqs[r].kv;
        }
        if (kvc_check(&kvcs[i], seqs, n, err, sizeof(err)) != NPU_OK)
            fail_msg("instance %u: kvc_check: %s", i, err);
        assert_true(pd.inst[i].nrunning <= pd.p.max_batch);
    }
}

static void check_plan(uint32_t i, const struct rt_iter_plan *it)
{
    const struct rt_pd_inst *in = &pd.inst[i];
    if (in->role == RT_PD_PREFILL) {
        assert_int_equal(it->nprefill, it->nruns);
        assert_true(it->prefill_tokens <= pd.p.chunk && it->decode_tokens == 0);
        for (uint32_t k = 0; k < it->nruns; k++) {
            const struct rt_run *run = &it->runs[k];
            assert_int_equal(run->req, in->running[k]); /* oldest first */
            assert_true(run->prefill && !run->pull && run->pos == reqs[run->req].prefilled);
            assert_int_equal(run->wants_token,
                             run->pos + run->count == reqs[run->req].input_len);
        }
        return;
    }
    assert_int_equal(it->nprefill, 0);
    assert_int_equal(it->nruns, in->nrunning); /* every running request decodes */
    for (uint32_t k = 0; k < it->nruns; k++) {
        const struct rt_run *run = &it->runs[k];
        const struct rt_request *r = &reqs[run->req];
        assert_true(!run->prefill && run->count == 1 && run->wants_token);
        assert_int_equal(run->pos, r->input_len + r->generated - 1);
        assert_int_equal(dinst[run->req], i);
        if (run->pull) { /* the prompt is whole and its prefill blocks still held */
            assert_int_equal(r->prefilled, r->input_len);
            assert_true(pkv[run->req].admitted && pkv[run->req].len == r->input_len);
            sim.pulls[run->req]++;
        } else {
            assert_int_equal(sim.pulls[run->req], 1);
            assert_false(pkv[run->req].admitted);
        }
    }
}

static void plan_idle(void)
{
    uint32_t busy = 0;
    for (uint32_t i = 0; i < pd.p.instances; i++) {
        if (!pd.inst[i].busy && pd_next(&pd, i, &sim.it[i])) {
            check_plan(i, &sim.it[i]);
            sim.until[i] = sim.now + 1 * MS + 10 * US * (sim.it[i].prefill_tokens +
                                                         sim.it[i].decode_tokens);
            bool pulls = false;
            for (uint32_t k = 0; k < sim.it[i].nruns; k++)
                pulls |= sim.it[i].runs[k].pull;
            sim.pull_iters += pulls;
        }
        busy += pd.inst[i].busy;
    }
    sim.concurrent += busy > 1;
    check_caches();
}

/* Completes the busy instance that ends first (lowest index on ties). */
static bool complete_first(void)
{
    uint32_t best = UINT32_MAX;
    for (uint32_t i = 0; i < pd.p.instances; i++)
        if (pd.inst[i].busy && (best == UINT32_MAX || sim.until[i] < sim.until[best]))
            best = i;
    if (best == UINT32_MAX)
        return false;
    sim.now = sim.until[best];
    pd_complete(&pd, best, &sim.it[best]);
    sim.iterations++;
    check_caches();
    return true;
}

static void run_sim(uint32_t seed, uint32_t instances, uint32_t prefill, uint32_t blocks,
                    uint64_t ring)
{
    uint32_t s = seed;
    nreqs = 0;
    uint64_t t = 0;
    for (uint32_t i = 0; i < 120; i++) {
        s = s * 1664525u + 1013904223u;
        t += ((s >> 8) % 3000) * US;
        uint32_t in = 1 + (s >> 4) % 400, out = 1 + (s >> 12) % 20;
        if (i % 23 == 7)
            in = 0; /* empty */
        if (i % 31 == 13)
            in = 4000; /* too long */
        add_req(t, in, out);
    }
    struct rt_pd_params p = params(instances, prefill);
    p.chunk = 96;
    assert_int_equal(start(&p, blocks, ring), NPU_OK);
    memset(&sim, 0, sizeof(sim));
    for (;;) {
        pd_arrive(&pd, sim.now, 4096);
        if (pd_done(&pd))
            break;
        plan_idle();
        if (!complete_first()) {
            uint64_t next = pd_next_arrival_ps(&pd);
            assert_true(next != UINT64_MAX); /* nothing runs, nothing comes: stuck */
            sim.now = next;
        }
    }
    for (uint32_t r = 0; r < nreqs; r++) {
        const struct rt_request *q = &reqs[r];
        if (q->state == RT_REQ_REJECTED) {
            assert_int_equal(q->reject, q->input_len == 0 ? RT_REJECT_EMPTY : RT_REJECT_TOO_LONG);
            continue;
        }
        assert_int_equal(q->state, RT_REQ_FINISHED);
        assert_int_equal(q->generated, q->output_len);
        assert_int_equal(sim.pulls[r], q->output_len > 1 ? 1 : 0);
        assert_false(q->kv.admitted || pkv[r].admitted);
    }
    for (uint32_t i = 0; i < instances; i++)
        assert_int_equal(kvc_blocks_used(&kvcs[i]) + kvc_ring_rows_used(&kvcs[i]), 0);
    assert_true(sim.concurrent > 0 && sim.pull_iters > 0);
}

static void test_sim_1p1d(void **state)
{
    (void)state;
    run_sim(1, 2, 1, 256, 0);
}

static void test_sim_2p2d_spill(void **state)
{
    (void)state;
    run_sim(7, 4, 2, 12, 8192); /* 12 blocks of 16: most requests spill into the ring */
}

static void test_sim_3p1d(void **state)
{
    (void)state;
    run_sim(3, 4, 3, 64, 4096);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roles),
        cmocka_unit_test(test_init_refuses),
        cmocka_unit_test(test_exact_two_instances),
        cmocka_unit_test(test_prefix_affinity),
        cmocka_unit_test(test_prefix_affinity_full),
        cmocka_unit_test(test_sim_1p1d),
        cmocka_unit_test(test_sim_2p2d_spill),
        cmocka_unit_test(test_sim_3p1d),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
