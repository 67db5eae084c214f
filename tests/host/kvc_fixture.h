/* SPDX-License-Identifier: MIT */
/* The KV-cache manager tests' shared fixture (test_kvc.c, test_kvc_prefix.c): one manager,
   set up per test, and kvc_check over the sequences a test holds. */
#ifndef KVC_FIXTURE_H
#define KVC_FIXTURE_H

#include <stdint.h>

#include "rt/kvc.h"

extern struct rt_kvc kv;  /* ~90 KiB: not on the stack */
extern char err[160];

void setup_kvc(uint32_t block_tokens, uint32_t sram_blocks, uint64_t ring_rows);
/* kvc_check over up to 4 sequences given inline (NULL: none). */
int check_seqs(struct rt_kv_seq *a, struct rt_kv_seq *b, struct rt_kv_seq *c,
               struct rt_kv_seq *d);
void assert_ok(struct rt_kv_seq *a, struct rt_kv_seq *b, struct rt_kv_seq *c,
               struct rt_kv_seq *d);
/* Nothing held, nothing reserved, no ring segment. */
void assert_empty(void);
/* kvc_check must refuse the state (with a message). */
void expect_corrupt(struct rt_kv_seq *a, struct rt_kv_seq *b);
/* The stress tests' fixed-seed LCG: set lcg_state, then draw. */
extern uint32_t lcg_state;
uint32_t lcg_next(void);

#endif
