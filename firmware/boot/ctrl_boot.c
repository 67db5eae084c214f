/* SPDX-License-Identifier: MIT */
/*
 * Boot image, control core: describe the chip from the devicetree on one screen, release the
 * NPU cores, wait until every core has reported in (each increments semaphore BOOT_SEM of
 * the control core), and end the run.
 */
#include <inttypes.h>
#include <stdio.h>

#include "npu/hal.h"
#include "npu/wait.h"

#define BOOT_SEM 0

static void print_size(const char *what, uint64_t bytes)
{
    if (bytes >= (1ull << 30) && bytes % (1ull << 30) == 0)
        printf("%s %" PRIu64 " GiB", what, bytes >> 30);
    else
        printf("%s %" PRIu64 " MiB", what, bytes >> 20);
}

static void print_summary(void)
{
    const struct hal_chip_info *c = hal_chip();
    struct hal_core_info first, last;
    hal_core_info_get(0, &first);
    hal_core_info_get(c->ncores - 1, &last);

    printf("npu-mesh chip '%s': %u x %u mesh, %u NPU cores + 1 control core\n",
           c->config_name, c->rows, c->cols, c->ncores);
    printf("  clock %u MHz (%" PRIu64 " ps per cycle); hart command %u cycles; NoC hop %u "
           "cycles\n", c->freq_mhz, hal_cycle_ps(), c->cmd_cost_cycles, c->noc_hop_cycles);
    print_size("  SRAM", c->sram_bytes);
    printf(" per core: core 0 at 0x%" PRIx64 ", core %u at 0x%" PRIx64 "\n", first.sram_base,
           c->ncores - 1, last.sram_base);
    printf("  registers: core 0 at 0x%" PRIx64 ", core %u at 0x%" PRIx64 ", control at 0x%"
           PRIx64 "\n", first.regs_base, c->ncores - 1, last.regs_base,
           hal_self()->regs_base);
    print_size("  HBM", c->hbm_size);
    printf(" at 0x%" PRIx64 "; ", c->hbm_base);
    print_size("control DRAM", c->dram_size);
    printf(" at 0x%" PRIx64 "\n", c->dram_base);
    printf("  chip control at 0x%" PRIx64 ", exit device at 0x%" PRIx64 ", devicetree at 0x%"
           PRIx64 " (%u bytes), register spec v%u, %u semaphores per core\n", c->chipctl_base,
           c->exit_base, c->fdt_base, c->fdt_size, c->regspec_version, c->sems_per_core);
}

int main(void)
{
    const struct hal_chip_info *c = hal_chip();

    print_summary();
    printf("releasing %u cores\n", c->ncores);
    hal_release_cores();
    /* A core that never reports in turns into a timeout here, not a hang. */
    int rc = hal_sem_wait_until(BOOT_SEM, c->ncores, hal_time_ps() + HAL_PS_PER_S);
    uint32_t seen = hal_sem_read(BOOT_SEM);
    if (rc != NPU_OK) {
        printf("boot FAILED: %u of %u cores reported in within 1 s of chip time\n", seen,
               c->ncores);
        return NPU_EXIT_FAIL;
    }
    printf("all %u cores reported in; chip time %" PRIu64 " ps\n", seen, hal_time_ps());
    return NPU_EXIT_OK;
}
