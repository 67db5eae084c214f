/* SPDX-License-Identifier: MIT */
/*
 * What the engine-level host tests share: a 2x2 mesh of 1 MiB SRAMs and 4 MiB of HBM on the
 * chip clock, 2000 ps cycles, a 16x16 systolic array, HBM and NoC links at 64 GB/s (1 byte
 * per 15.625 ps), 100 cycles of HBM latency.
 */
#ifndef CHIP_FIXTURE_H
#define CHIP_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "chip_engines.h"
#include "npu_enums.h"
#include "npu_memmap.h"

#define NCORES 4u
#define SRAM_BYTES (1u << 20)
#define HBM_BYTES (4u << 20)
#define CYCLE 2000ull

struct fix {
    struct chip_clock c;
    struct chip_engines e;
    uint8_t *sram[NCORES];
    uint8_t *hbm;
};

/* A new fixture: functional or performance mode, HBM per core or in `stacks` stacks, the
   cores alt_core marks (NULL: none) with the engine sizes alt. */
static inline struct fix *fix_new_alt(bool functional, uint32_t stacks, const bool *alt_core,
                                      struct chip_engine_sizes alt)
{
    struct fix *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    const struct chip_clock_params p = {
        .rows = 2, .cols = 2, .cycle_ps = CYCLE, .cmd_cost_cycles = 4, .hop_cycles = 2,
        .on_unit_event = chip_engines_on_event, .on_sem_change = chip_engines_on_sem_change,
        .unit = &f->e,
    };
    const struct chip_engine_cfg cfg = {
        .sa_rows = 16, .sa_cols = 16, .sram_bytes_per_cycle = 256,
        .vec_lanes = 16, .vec_alus_per_lane = 4, .vec_pipeline_cycles = 8,
        .hbm_bytes_per_s = 64000000000ull, .hbm_latency_cycles = 100,
        .noc_link_bytes_per_s = 64000000000ull, .functional = functional,
        .hbm_stacks = stacks, .hbm_stack_bytes_per_s = 64000000000ull,
        .alt_core = alt_core, .alt = alt,
    };
    for (uint32_t i = 0; i < NCORES; i++)
        f->sram[i] = calloc(1, SRAM_BYTES);
    f->hbm = calloc(1, HBM_BYTES);
    const struct chip_mem mem = { .ncores = NCORES, .sram_bytes = SRAM_BYTES, .sram = f->sram,
                                  .hbm_bytes = HBM_BYTES, .hbm = f->hbm };
    assert_int_equal(chip_clock_init(&f->c, &p), NPU_OK);
    assert_int_equal(chip_engines_init(&f->e, &f->c, &cfg, &mem), NPU_OK);
    return f;
}

static inline struct fix *fix_new(bool functional, uint32_t stacks)
{
    return fix_new_alt(functional, stacks, NULL, (struct chip_engine_sizes){ 0 });
}

static inline void fix_free(struct fix *f)
{
    chip_engines_destroy(&f->e);
    chip_clock_destroy(&f->c);
    for (uint32_t i = 0; i < NCORES; i++)
        free(f->sram[i]);
    free(f->hbm);
    free(f);
}

#endif
