/* SPDX-License-Identifier: MIT */
/*
 * Selftest image, NPU core: after the release, run every check of checks.h, report each
 * failure to the control core (semaphore FAIL_SEM(check)) with a "# core N:" diagnostic,
 * then signal DONE.
 */
#include <inttypes.h>
#include <stdio.h>

#include "checks.h"
#include "npu/hal.h"
#include "npu/mmio.h"
#include "npu/wait.h"

extern char __image_end[];

static int post(uint32_t core, uint32_t sem, uint32_t value)
{
    struct hal_sem_post_args a = { .core = core, .sem = sem, .op = NPU_SEM_OP_INC,
                                   .value = value };
    return hal_sem_post(&a);
}

#define expect(ok, check, ...) checks_expect((ok), (check), check_names[check], __VA_ARGS__)

static void check_identity(void)
{
    const struct hal_core_info *s = hal_self();
    const struct hal_chip_info *c = hal_chip();
    uint32_t id = mmio_read32(s->regs_base + CORE_ID_OFFSET);
    uint32_t coord = mmio_read32(s->regs_base + CORE_COORD_OFFSET);
    uint32_t row = mmio_field_get(coord, CORE_COORD_ROW_MASK, CORE_COORD_ROW_LSB);
    uint32_t col = mmio_field_get(coord, CORE_COORD_COL_MASK, CORE_COORD_COL_LSB);
    uint64_t hart;
    __asm__ volatile("csrr %0, mhartid" : "=r"(hart));

    expect(id == s->core_id && hart == id, CHECK_IDENTITY, "ID %u, mhartid %" PRIu64
           ", devicetree %u", id, hart, s->core_id);
    expect(row == s->row && col == s->col && row == id / c->cols && col == id % c->cols,
           CHECK_IDENTITY, "COORD (%u,%u), devicetree (%u,%u)", row, col, s->row, s->col);
    expect(s->regs_base == npu_map_instance_base(NPU_MAP_CORE_REGS, id) && !s->is_ctrl,
           CHECK_IDENTITY, "register block at 0x%" PRIx64, s->regs_base);
}

static void check_sram(void)
{
    const struct hal_core_info *s = hal_self();
    uintptr_t code = (uintptr_t)&check_sram, end = (uintptr_t)__image_end;
    expect(s->sram_base == npu_map_instance_base(NPU_MAP_SRAM, s->core_id) &&
           s->sram_size == hal_chip()->sram_bytes, CHECK_SRAM, "SRAM 0x%" PRIx64 "+0x%"
           PRIx64, s->sram_base, s->sram_size);
    expect(code >= s->sram_base && end <= s->sram_base + s->sram_size, CHECK_SRAM,
           "code at 0x%" PRIxPTR ", image end 0x%" PRIxPTR, code, end);
    volatile uint64_t *tail = (volatile uint64_t *)(uintptr_t)(s->sram_base + s->sram_size -
                                                               4096);
    for (unsigned i = 0; i < 512; i++)
        tail[i] = (uint64_t)s->core_id << 32 | i;
    unsigned bad = 0;
    for (unsigned i = 0; i < 512; i++)
        bad += tail[i] != ((uint64_t)s->core_id << 32 | i);
    expect(bad == 0, CHECK_SRAM, "%u of 512 words in the last 4 KiB read back wrong", bad);
}

static void check_timer(void)
{
    uint32_t id = hal_self()->core_id;
    /* Core 0 sleeps 10 s of chip time: the run must still take well under a second. */
    uint64_t t0 = hal_time_ps(), step = id == 0 ? 10 * HAL_PS_PER_S : (id + 1) * HAL_PS_PER_US;
    int steps = id == 0 ? 1 : 3;
    for (int i = 1; i <= steps; i++) {
        uint64_t deadline = t0 + (uint64_t)i * step;
        hal_sleep_until_ps(deadline);
        uint64_t now = hal_time_ps();
        if (!expect(now == deadline, CHECK_TIMER, "woke at %" PRIu64 " ps, deadline %" PRIu64,
                    now, deadline))
            return;
    }
}

static void check_past(void)
{
    uint64_t t0 = hal_time_ps();
    uint32_t cause = 0;
    struct hal_wait_args w = { .kind = NPU_WAIT_TIMER, .deadline_ps = t0 > 0 ? t0 - 1 : 0 };
    int rc = hal_wait(&w, &cause);
    expect(rc == NPU_OK && cause == NPU_WAIT_TIMER && hal_time_ps() == t0, CHECK_PAST,
           "rc %d cause %u time %" PRIu64 " -> %" PRIu64, rc, cause, t0, hal_time_ps());
}

static void check_cmd_cost(void)
{
    uint64_t t0 = hal_time_ps();
    post(hal_self()->core_id, SEM_RING + 1, 1); /* a command on this core's own semaphore */
    uint64_t cost = (uint64_t)hal_chip()->cmd_cost_cycles * hal_cycle_ps();
    expect(hal_time_ps() == t0 + cost, CHECK_CMD_COST, "%" PRIu64 " ps for one command, "
           "expected %" PRIu64, hal_time_ps() - t0, cost);
}

static void check_ring(void)
{
    uint32_t n = hal_chip()->ncores, id = hal_self()->core_id;
    post((id + 1) % n, SEM_RING, 1);
    /* Core 0 posts after its 10 s sleep: wait long enough, but not forever. */
    int rc = hal_sem_wait_until(SEM_RING, 1, hal_time_ps() + 20 * HAL_PS_PER_S);
    expect(rc == NPU_OK && hal_sem_read(SEM_RING) == 1, CHECK_RING, "rc %d, semaphore %u",
           rc, hal_sem_read(SEM_RING));
}

int main(void)
{
    hal_wait_release();
    check_identity();
    check_sram();
    check_timer();
    check_past();
    check_cmd_cost();
    check_ring();
    return checks_done();
}
