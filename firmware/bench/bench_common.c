/* SPDX-License-Identifier: MIT */
/* Core-side helpers of the benchmark images: memory areas, options, submit-and-wait (bench.h). */
#include "bench.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu/hal.h"
#include "npu/wait.h"

extern char __image_end[];

uint64_t bench_data_base(void)
{
    /* The same offset on every core: the image is the same everywhere. */
    return ((uint64_t)(uintptr_t)__image_end + 0xffff) & ~0xffffull;
}

uint64_t bench_data_bytes(void)
{
    const struct hal_core_info *self = hal_self();
    return self->sram_base + self->sram_size - bench_data_base();
}

uint64_t bench_hbm_base(void)
{
    const struct hal_chip_info *c = hal_chip();
    return c->hbm_base + hal_self()->core_id * (c->hbm_size / c->ncores);
}

bool bench_has_flag(const char *word)
{
    return hal_bootarg_has(word);
}

uint64_t bench_arg_u64(const char *key, uint64_t def)
{
    const char *v = hal_bootarg_value(key);
    return v ? strtoull(v, NULL, 10) : def;
}

struct engine_sync bench_signal(uint32_t core, uint32_t sem)
{
    return (struct engine_sync){ .signal = true, .signal_core = (uint16_t)core,
                                 .signal_sem = (uint8_t)sem, .signal_value = 1 };
}

uint64_t bench_cmd_ps(void)
{
    return (uint64_t)hal_chip()->cmd_cost_cycles * hal_cycle_ps();
}

double bench_xfer_ps(uint64_t bytes, uint32_t gbps)
{
    return (double)bytes * 1000.0 / (double)gbps;
}

int bench_submit_wait(const struct npu_desc *descs, uint32_t n, uint32_t sem, uint32_t value)
{
    for (uint32_t done = 0; done < n;) {
        uint32_t chunk = n - done < NPU_SUBMIT_MAX ? n - done : NPU_SUBMIT_MAX;
        int rc = engine_submit(descs + done, chunk);
        if (rc != NPU_OK) {
            bench_print_note(LINES_BENCH_ERROR, "core=%u submit=%d descs=%u",
                             hal_self()->core_id, rc, n);
            return rc;
        }
        done += chunk;
    }
    return hal_sem_wait(sem, value);
}

uint64_t bench_sleep_until(uint64_t t)
{
    uint64_t now = hal_time_ps();
    if (now >= t)
        return now - t;
    hal_sleep_until_ps(t);
    return 0;
}

void bench_print_note(enum lines_kind kind, const char *fmt, ...)
{
    char text[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (kind == LINES_BENCH_SKIP)
        lines_print_bench_skip(&(struct lines_bench_skip){ .text = text });
    else if (kind == LINES_BENCH_WARN)
        lines_print_bench_warn(&(struct lines_bench_warn){ .text = text });
    else
        lines_print_bench_error(&(struct lines_bench_error){ .text = text });
}

int bench_done(int status)
{
    struct hal_sem_post_args done = { .core = hal_chip()->ncores, .sem = BENCH_DONE_SEM,
                                      .op = NPU_SEM_OP_INC, .value = 1 };
    int rc = hal_sem_post(&done);
    return rc == NPU_OK ? status : NPU_EXIT_FAIL;
}
