/* SPDX-License-Identifier: MIT */
/*
 * Selftest image, control core: the TAP stream of the on-target self-test. Checks the
 * devicetree against the generated memory map, boots every core, collects the NPU cores'
 * own checks (checks.h), then tests the chip clock, interrupts and command errors on the
 * control core itself.
 */
#include <inttypes.h>
#include <stdio.h>

#include "checks.h"
#include "npu/hal.h"
#include "npu/mmio.h"
#include "npu/trap.h"
#include "npu/wait.h"
#include "tap.h"

#define CTRL_TESTS 9 /* tap_ok calls in this file and the boot point of checks_collect */

static bool region_is(uint64_t base, uint64_t size, enum npu_map_region r, uint64_t backed)
{
    return base == npu_memmap[r].base && size == backed && size <= npu_memmap[r].size;
}

static void test_memmap(void)
{
    const struct hal_chip_info *c = hal_chip();
    bool ok = region_is(c->chipctl_base, c->chipctl_size, NPU_MAP_CHIPCTL,
                        npu_memmap[NPU_MAP_CHIPCTL].size) &&
              region_is(c->exit_base, c->exit_size, NPU_MAP_EXIT,
                        npu_memmap[NPU_MAP_EXIT].size) &&
              region_is(c->dram_base, c->dram_size, NPU_MAP_DRAM, c->dram_size) &&
              region_is(c->hbm_base, c->hbm_size, NPU_MAP_HBM, c->hbm_size) &&
              c->fdt_base == npu_memmap[NPU_MAP_FDT].base &&
              c->fdt_size <= npu_memmap[NPU_MAP_FDT].size;
    tap_ok(ok, "devicetree: chip control, exit device, DRAM, HBM and devicetree windows "
           "match the generated memory map");
}

static void test_harts(void)
{
    const struct hal_chip_info *c = hal_chip();
    uint32_t bad = 0;
    for (uint32_t id = 0; id < c->ncores; id++) {
        struct hal_core_info h;
        if (hal_core_info_get(id, &h) != NPU_OK || h.core_id != id || h.is_ctrl ||
            h.row != id / c->cols || h.col != id % c->cols ||
            h.regs_base != npu_map_instance_base(NPU_MAP_CORE_REGS, id) ||
            h.sram_base != npu_map_instance_base(NPU_MAP_SRAM, id) ||
            h.sram_size != c->sram_bytes) {
            if (bad++ < 4)
                tap_diag("core %u: devicetree entry does not match the map", id);
        }
    }
    const struct hal_core_info *self = hal_self();
    bool ctrl_ok = self->is_ctrl && self->core_id == c->ncores &&
                   self->regs_base == npu_memmap[NPU_MAP_CTRL_REGS].base;
    tap_ok(bad == 0 && ctrl_ok, "devicetree: all %u harts have the id, coordinates, register "
           "block and SRAM the memory map gives", c->ncores + 1);
}

static void test_registers(void)
{
    const struct hal_chip_info *c = hal_chip();
    uint64_t regs = hal_self()->regs_base;
    bool ok = mmio_read32(c->chipctl_base + CHIPCTL_MAGIC_OFFSET) == NPU_CHIP_MAGIC &&
              mmio_read32(c->chipctl_base + CHIPCTL_VERSION_OFFSET) == NPU_REGSPEC_VERSION &&
              mmio_read32(regs + CORE_ID_OFFSET) == c->ncores &&
              mmio_read64(c->chipctl_base + CHIPCTL_FDT_ADDR_OFFSET) == c->fdt_base;
    tap_ok(ok, "registers: chip magic, register spec version, FDT_ADDR and the control "
           "core's ID read as specified");
}

static void test_boot_and_core_checks(void)
{
    checks_collect(CHECK__COUNT, check_names, 60 * HAL_PS_PER_S);
}

static void test_long_sleep(void)
{
    uint64_t t0 = hal_time_ps();
    hal_sleep_ps(10 * HAL_PS_PER_S);
    uint64_t t1 = hal_time_ps();
    uint64_t global = mmio_read64(hal_chip()->chipctl_base + CHIPCTL_CHIP_TIME_OFFSET);
    tap_ok(t1 == t0 + 10 * HAL_PS_PER_S && global == t1, "chip time: the control core "
           "sleeps 10 s and wakes at exactly t0 + 10 s, the chip's time (%" PRIu64 " ps)", t1);
}

static volatile uint32_t irq_count;

static void on_wake_irq(void)
{
    irq_count++;
    mmio_write32(hal_self()->regs_base + CORE_IRQ_STATUS_OFFSET, CORE_IRQ_STATUS_WAKE_MASK);
}

static void test_interrupt(void)
{
    hal_irq_set_handler(on_wake_irq);
    hal_irq_enable(true);
    hal_sleep_ps(HAL_PS_PER_US);
    hal_irq_enable(false);
    hal_irq_set_handler(NULL);
    tap_ok(irq_count == 1, "interrupts: with a handler installed, one wake-up runs it once "
           "(%u)", irq_count);
}

static void test_errors(void)
{
    /* The machine logs each refused command on stderr at once, while the console prints
       its lines in chip order later: the note goes out first (a microsecond of chip time
       flushes it), so the two log lines after it read as what they are. */
    tap_diag("expected below: the machine logs the two commands these checks make it refuse");
    hal_sleep_ps(HAL_PS_PER_US);
    struct hal_wait_args none = { .kind = 0 };
    uint64_t t0 = hal_time_ps();
    tap_ok(hal_wait(&none, NULL) == NPU_ERR_INVAL && hal_time_ps() == t0,
           "errors: a wait with no condition fails with NPU_ERR_INVAL and does not wait");
    struct hal_sem_post_args bad = { .core = hal_chip()->ncores + 1, .sem = 0,
                                     .op = NPU_SEM_OP_INC, .value = 1 };
    tap_ok(hal_sem_post(&bad) == NPU_ERR_RANGE,
           "errors: a semaphore operation on a core that does not exist fails with "
           "NPU_ERR_RANGE");
}

static void test_self_semaphore(void)
{
    uint32_t me = hal_chip()->ncores, sem = 8;
    uint64_t t0 = hal_time_ps(), cost = hal_chip()->cmd_cost_cycles * hal_cycle_ps();
    struct hal_sem_post_args set = { .core = me, .sem = sem, .op = NPU_SEM_OP_SET, .value = 5 };
    struct hal_sem_post_args inc = { .core = me, .sem = sem, .op = NPU_SEM_OP_INC, .value = 2 };
    hal_sem_post(&set);
    hal_sem_post(&inc);
    hal_sem_wait(sem, 7);
    tap_ok(hal_sem_read(sem) == 7 && hal_time_ps() == t0 + 2 * cost,
           "semaphores: SET 5 then INC 2 on the control core's own semaphore reads 7 after "
           "two command costs (%" PRIu64 " ps)", hal_time_ps() - t0);
}

int main(void)
{
    tap_plan(CTRL_TESTS + CHECK__COUNT);
    tap_diag("chip '%s', %u x %u mesh, %u cores", hal_chip()->config_name, hal_chip()->rows,
             hal_chip()->cols, hal_chip()->ncores);
    test_memmap();
    test_harts();
    test_registers();
    test_boot_and_core_checks();
    test_long_sleep();
    test_interrupt();
    test_errors();
    test_self_semaphore();
    return tap_done();
}
