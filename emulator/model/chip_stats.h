/* SPDX-License-Identifier: MIT */
/*
 * Counters and energy of a run, from the engines' counters and the chip config's energy
 * constants (docs/energy.md): the per-core counters firmware reads (npu_perf) and the JSON
 * report written at the end of a run.
 *
 * Energy = MACs x energy_mac_fj + vector ALU operations x energy_vector_fj + SRAM bytes x
 * energy_sram_fj_per_byte + HBM bytes x energy_hbm_fj_per_byte + NoC byte-hops x
 * energy_noc_fj_per_byte_hop + each core's static power (static_mw_per_core, or an alt core's
 * alt_static_mw_per_core) x chip time. Not modelled: the
 * harts' own energy, idle engines' clock power beyond the static term, DRAM of the control
 * core.
 */
#ifndef CHIP_STATS_H
#define CHIP_STATS_H

#include <stdio.h>

#include "chip_config.h"
#include "chip_engines.h"

struct chip_energy {
    double mac_j, vector_j, sram_j, hbm_j, noc_j, static_j;
};

/* Sum of one core's engine counters. */
void chip_stats_core_total(const struct chip_engines *e, uint32_t core,
                           struct chip_engine_counters *out);

/* Counter `id` (npu_perf) of a core; 0 for an unknown id. */
uint64_t chip_stats_core_counter(const struct chip_engines *e, const struct chip_config *cfg,
                                 uint32_t core, uint32_t id);

/* Energy of the whole chip over `time_ps` of chip time. */
void chip_stats_energy(const struct chip_engines *e, const struct chip_config *cfg,
                       uint64_t time_ps, struct chip_energy *out);

/* The report of a run as JSON (docs/engines.md shows its keys). */
int chip_stats_write_json(FILE *f, const struct chip_engines *e, const struct chip_config *cfg,
                          uint64_t time_ps, bool performance);

#endif
