/* SPDX-License-Identifier: MIT */
/* The scheduler tests' shared fixture (test_sched.c, test_sched_exact.c): the requests, the
   KV cache and the scheduler under test, and how they are set up. */
#ifndef SCHED_FIXTURE_H
#define SCHED_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "rt/kvc.h"
#include "rt/request.h"
#include "rt/sched.h"

#define SIM_REQS_MAX 160u
#define MS 1000000000ull  /* picoseconds */
#define US 1000000ull

extern struct rt_request reqs[SIM_REQS_MAX];
extern uint32_t nreqs;
extern struct rt_kvc kvc;
extern struct rt_sched sch;
extern struct rt_iter_plan plan;
extern char err[200];

/* A fixed-seed LCG: set lcg_state, then draw. */
extern uint32_t lcg_state;
uint32_t lcg_next(void);

/* The tests' parameters of a policy (8 layers, batch 8, 512 rows, ...). */
struct rt_sched_params params(enum rt_sched_kind kind);
/* Appends a request (ids in order). */
void add_req(uint64_t arrival_ps, uint32_t input, uint32_t output);
/* A fresh KV cache and the scheduler over reqs[0, nreqs). */
void start(const struct rt_sched_params *p, uint32_t block_tokens, uint32_t blocks,
           uint64_t ring);
/* Requests at random times (0..4 ms apart) with mostly ordinary lengths, and every so often
   one that is empty, too long, can never fit the KV cache, or has a long prompt. */
void make_trace(uint32_t seed, uint32_t n);
/* Run i of the plan must be (req, pos, count, wants_token), a prefill run iff i < nprefill. */
void expect_run(uint32_t i, uint32_t req, uint32_t pos, uint32_t count, bool wants);
/* sched_next must plan nruns runs of which nprefill are prefill runs. */
void next_plan(uint32_t nruns, uint32_t nprefill);

#endif
