/* SPDX-License-Identifier: MIT */
/* The KV-cache manager tests' shared fixture (kvc_fixture.h). */
#include "kvc_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "npu_enums.h"

struct rt_kvc kv;
char err[160];

void setup_kvc(uint32_t block_tokens, uint32_t sram_blocks, uint64_t ring_rows)
{
    struct rt_kvc_config c = { .block_tokens = block_tokens, .sram_blocks = sram_blocks,
                               .ring_rows = ring_rows };
    assert_int_equal(kvc_init(&kv, &c), NPU_OK);
}

int check_seqs(struct rt_kv_seq *a, struct rt_kv_seq *b, struct rt_kv_seq *c,
                      struct rt_kv_seq *d)
{
    const struct rt_kv_seq *list[4];
    uint32_t n = 0;
    struct rt_kv_seq *all[4] = { a, b, c, d };
    for (uint32_t i = 0; i < 4; i++)
        if (all[i])
            list[n++] = all[i];
    err[0] = '\0';
    return kvc_check(&kv, list, n, err, sizeof(err));
}

void assert_ok(struct rt_kv_seq *a, struct rt_kv_seq *b, struct rt_kv_seq *c,
                      struct rt_kv_seq *d)
{
    int rc = check_seqs(a, b, c, d);
    if (rc != NPU_OK)
        fail_msg("kvc_check: %s", err);
}

void assert_empty(void)
{
    assert_ok(NULL, NULL, NULL, NULL);
    assert_int_equal(kvc_blocks_used(&kv), 0);
    assert_int_equal(kvc_ring_rows_used(&kv), 0);
    assert_int_equal(kv.free_count, kv.cfg.sram_blocks);
    assert_int_equal(kv.unreserved, kv.cfg.sram_blocks);
    assert_int_equal(kv.nsegs, 0);
    assert_int_equal(kv.ring_head, 0);
}


void expect_corrupt(struct rt_kv_seq *a, struct rt_kv_seq *b)
{
    assert_int_equal(check_seqs(a, b, NULL, NULL), NPU_ERR_STATE);
    assert_true(strlen(err) > 0);
}

uint32_t lcg_state;

uint32_t lcg_next(void)
{
    lcg_state = lcg_state * 1664525u + 1013904223u;
    return lcg_state >> 8;
}
