/* SPDX-License-Identifier: MIT */
/*
 * The HAL's view of the chip and of the hart running it, discovered at start-up from the
 * devicetree the machine generates (the one fixed address used is the chip control block's,
 * which holds the devicetree's address).
 */
#ifndef NPU_HAL_H
#define NPU_HAL_H

#include <stdbool.h>
#include <stdint.h>

#include "npu_enums.h"
#include "npu_memmap.h"
#include "npu_regs.h"

struct hal_chip_info {
    char config_name[64];
    uint32_t rows, cols;        /* mesh */
    uint32_t ncores;            /* NPU cores; the control core is hart/core id ncores */
    uint32_t freq_mhz;
    uint32_t cycle_ps;          /* picoseconds per core cycle, as the chip model counts */
    uint32_t cmd_cost_cycles;
    uint32_t noc_hop_cycles;
    uint32_t sems_per_core;
    uint32_t regspec_version;
    uint64_t sram_bytes;        /* per core */
    uint32_t sa_rows, sa_cols;  /* matrix engine */
    uint32_t sram_bytes_per_cycle;
    uint32_t vector_lanes, vector_alus_per_lane;
    uint32_t hbm_gbps;          /* per core, 10^9 bytes/s */
    uint32_t hbm_latency_cycles;
    uint32_t noc_link_gbps;     /* per link and direction */
    uint32_t hbm_stacks;        /* 0: an HBM channel per core; else stacks on the west edge */
    uint32_t hbm_stack_gbps;    /* per stack */
    bool congestion_free;       /* transfers never share bandwidth */
    bool performance;           /* engines time but do not compute (performance mode) */
    uint64_t chipctl_base, chipctl_size;
    uint64_t dram_base, dram_size;
    uint64_t hbm_base, hbm_size;
    uint64_t exit_base, exit_size;
    uint64_t fdt_base;
    uint32_t fdt_size;
};

struct hal_core_info {
    uint32_t core_id;           /* equals the hart id */
    uint32_t row, col;
    bool is_ctrl;
    uint64_t regs_base, regs_size;
    uint64_t sram_base, sram_size; /* 0 for the control core */
};

/* The chip, and the hart running this code. Valid after start-up. Inline: the collectives
   and kernels read them in their inner loops, and a call per read showed in profiles. */
extern struct hal_chip_info hal_chip_data;
extern struct hal_core_info hal_self_data;

static inline const struct hal_chip_info *hal_chip(void)
{
    return &hal_chip_data;
}

static inline const struct hal_core_info *hal_self(void)
{
    return &hal_self_data;
}

/* Reads any hart's description from the devicetree. */
int hal_core_info_get(uint32_t core_id, struct hal_core_info *out);

/* The devicetree's chosen/bootargs string, "" if none (set with QEMU's -append). */
const char *hal_bootargs(void);
/* Bootargs are space-separated words: the text after `key=` (up to the next space or the
   end), or NULL if no word starts with it; whether the bare word `word` is there. */
const char *hal_bootarg_value(const char *key);
bool hal_bootarg_has(const char *word);

/* Picoseconds per core cycle, as the chip model counts them (from the devicetree). */
uint64_t hal_cycle_ps(void);

/* Ends this hart with `status` (NPU cores: the EXIT register; control core: exit device). */
void hal_exit(int status) __attribute__((noreturn));

/* Writes bytes to this hart's console register (the chip prints whole lines). */
void hal_console_write(const char *buf, uint32_t len);
void hal_console_puts(const char *s);
void hal_console_put_hex(uint64_t value);
void hal_console_put_dec(uint64_t value);
/* "core 3 (0,3)" or "control core": how fatal reports name this hart. */
void hal_console_put_self(void);

/* Start-up entry of the application: each image defines main(). */
int main(void);

#endif
