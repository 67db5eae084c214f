/* SPDX-License-Identifier: MIT */
/* The scheduler tests' shared fixture (sched_fixture.h). */
#include "sched_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "npu_enums.h"

struct rt_request reqs[SIM_REQS_MAX];
uint32_t nreqs;
struct rt_kvc kvc;
struct rt_sched sch;
struct rt_iter_plan plan;
char err[200];

uint32_t lcg_state;

uint32_t lcg_next(void)
{
    lcg_state = lcg_state * 1664525u + 1013904223u;
    return lcg_state >> 8;
}

/* ---- setup ------------------------------------------------------------------------------- */

struct rt_sched_params params(enum rt_sched_kind kind)
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

void add_req(uint64_t arrival_ps, uint32_t input, uint32_t output)
{
    assert_true(nreqs < SIM_REQS_MAX);
    struct rt_request *r = &reqs[nreqs];
    memset(r, 0, sizeof(*r));
    r->id = nreqs++;
    r->arrival_ps = arrival_ps;
    r->input_len = input;
    r->output_len = output;
}

void start(const struct rt_sched_params *p, uint32_t block_tokens, uint32_t blocks,
                  uint64_t ring)
{
    struct rt_kvc_config c = { .block_tokens = block_tokens, .sram_blocks = blocks,
                               .ring_rows = ring };
    assert_int_equal(kvc_init(&kvc, &c), NPU_OK);
    int rc = sched_init(&sch, p, reqs, nreqs, &kvc, err, sizeof(err));
    if (rc != NPU_OK)
        fail_msg("sched_init: %s", err);
}

void make_trace(uint32_t seed, uint32_t n)
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

void expect_run(uint32_t i, uint32_t req, uint32_t pos, uint32_t count, bool wants)
{
    assert_true(i < plan.nruns);
    const struct rt_run *run = &plan.runs[i];
    assert_int_equal(run->req, req);
    assert_int_equal(run->pos, pos);
    assert_int_equal(run->count, count);
    assert_int_equal(run->prefill, i < plan.nprefill);
    assert_int_equal(run->wants_token, wants);
}

void next_plan(uint32_t nruns, uint32_t nprefill)
{
    assert_true(sched_next(&sch, &plan));
    assert_int_equal(plan.nruns, nruns);
    assert_int_equal(plan.nprefill, nprefill);
}
