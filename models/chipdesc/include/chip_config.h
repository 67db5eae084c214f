/* SPDX-License-Identifier: MIT */
/*
 * Chip configuration: what a chip config file (models/chips/NAME.toml) describes.
 *
 * The file is a flat subset of TOML: `key = value` lines, `#` comments, integers in decimal or
 * 0x hex with optional `_` separators, strings in double quotes. Every field below is
 * required; an unknown, repeated, missing or out-of-range field is an error naming the file,
 * the line and the field. The chip model, the QEMU machine and the host tools share this
 * parser, so a config means the same thing everywhere.
 *
 * Modelled here: mesh shape, clock, memory sizes, the hart command cost and NoC hop latency
 * used by the chip clock, the engines' sizes and bandwidths (docs/engines.md) and the energy
 * constants (docs/energy.md).
 *
 * Heterogeneous cores (optional; the NPU paper, section 4.3.1): the cores listed in
 * `alt_cores` ("0-3,8,12-15": core ids, row-major) get their own systolic array, SRAM
 * bandwidth, vector lanes and HBM channel (`alt_*`; an absent one is the base value).
 * Everything else (SRAM size, clock, energy per operation, NoC) stays chip-wide.
 */
#ifndef CHIP_CONFIG_H
#define CHIP_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "npu_limits.h"

#define CHIP_MESH_DIM_MAX NPU_MESH_DIM_MAX /* rows and columns: 1..32 (npu_limits.h) */
#define CHIP_CORES_MAX (CHIP_MESH_DIM_MAX * CHIP_MESH_DIM_MAX)
#define CHIP_NAME_MAX 64u
#define CHIP_ALT_CORES_MAX 400u /* the alt_cores string, with its NUL */

struct chip_config {
    char name[CHIP_NAME_MAX];  /* "name": preset name, printed in summaries */
    uint32_t mesh_rows;        /* "mesh_rows": 1..32 */
    uint32_t mesh_cols;        /* "mesh_cols": 1..32 */
    uint32_t freq_mhz;         /* "freq_mhz": core clock, 1..10000 */
    uint64_t sram_bytes;       /* "sram_bytes": local SRAM per core, 64 KiB..256 MiB */
    uint64_t hbm_bytes;        /* "hbm_bytes": HBM shared by the chip, 1 MiB..1 TiB */
    uint64_t dram_bytes;       /* "dram_bytes": control-core DRAM, 32 MiB (NPU_DRAM_MIN_BYTES)..2 GiB */
    uint32_t cmd_cost_cycles;  /* "cmd_cost_cycles": chip time charged per hart command */
    uint32_t noc_hop_cycles;   /* "noc_hop_cycles": NoC latency per router hop */
    uint32_t sa_rows, sa_cols; /* "sa_rows", "sa_cols": systolic array, 1..512 */
    uint32_t sram_bytes_per_cycle; /* "sram_bytes_per_cycle": SRAM bandwidth per core */
    uint32_t vector_lanes;     /* "vector_lanes": 1..1024 */
    uint32_t vector_alus_per_lane; /* "vector_alus_per_lane": 1..256 */
    uint32_t vector_pipeline_cycles; /* "vector_pipeline_cycles": pipeline depth, 0..1024 */
    uint32_t hbm_gbps;         /* "hbm_gbps": HBM bandwidth per core, GB/s (10^9 B/s) */
    uint32_t hbm_latency_cycles; /* "hbm_latency_cycles": added to every HBM transfer */
    uint32_t noc_link_gbps;    /* "noc_link_gbps": per link and direction, GB/s */
    uint32_t hbm_stacks;       /* "hbm_stacks": 0 = a channel per core; else stacks on the
                                  west edge of the mesh, reached over the NoC (0..32) */
    uint32_t hbm_stack_gbps;   /* "hbm_stack_gbps": bandwidth of one stack (unused if 0 stacks) */
    uint32_t congestion_free;  /* "congestion_free": 1 = transfers never share bandwidth */
    /* Energy (docs/energy.md): femtojoules per operation, static power per core. */
    uint32_t energy_mac_fj;            /* "energy_mac_fj": one multiply-accumulate */
    uint32_t energy_vector_fj;         /* "energy_vector_fj": one vector ALU operation */
    uint32_t energy_sram_fj_per_byte;  /* "energy_sram_fj_per_byte" */
    uint32_t energy_hbm_fj_per_byte;   /* "energy_hbm_fj_per_byte" */
    uint32_t energy_noc_fj_per_byte_hop; /* "energy_noc_fj_per_byte_hop" */
    uint32_t static_mw_per_core;       /* "static_mw_per_core": leakage and clock, mW */
    /* Heterogeneous cores: all optional, 0 / "" when absent. */
    char alt_cores[CHIP_ALT_CORES_MAX]; /* "alt_cores": core id ranges, "a-b,c" */
    uint32_t alt_sa_rows, alt_sa_cols;  /* "alt_sa_rows", "alt_sa_cols" */
    uint32_t alt_sram_bytes_per_cycle;  /* "alt_sram_bytes_per_cycle" */
    uint32_t alt_vector_lanes;          /* "alt_vector_lanes" */
    uint32_t alt_hbm_gbps;              /* "alt_hbm_gbps": its HBM channel (no stacks) */
    uint32_t alt_static_mw_per_core;    /* "alt_static_mw_per_core": an alt core's static
                                           power, mW (absent: static_mw_per_core) */
    /* Cost of a core, in units the user chooses (a part's price, its area), for throughput
       per unit cost (npuctl bench model --search disagg --expert-cores): optional, 0 when
       absent, which reads as 1 (every core alike: the presets state no price). */
    double core_cost;                   /* "core_cost": a base core's */
    double alt_core_cost;               /* "alt_core_cost": an alt core's (absent: core_cost) */
};

/* One class of cores' engine sizes: the base cores' or the alt cores'. */
struct chip_core_params {
    uint32_t sa_rows, sa_cols, sram_bytes_per_cycle, vector_lanes, hbm_gbps;
};

/* Errors are written to err (a NUL-terminated message naming file, line and field). */
int chip_config_parse(struct chip_config *cfg, const char *text, const char *filename,
                      char *err, size_t errlen);
int chip_config_load(struct chip_config *cfg, const char *path, char *err, size_t errlen);

/* Checks a mesh shape against the limits; used after command-line overrides too. */
int chip_config_check_mesh(uint32_t rows, uint32_t cols, char *err, size_t errlen);

/* Marks in is_alt[0..rows*cols) the cores alt_cores lists (all false without alt cores).
   NPU_ERR_FORMAT / NPU_ERR_RANGE with err naming the field and the core for a malformed
   list or a core outside a rows x cols mesh. */
int chip_config_alt_cores(const struct chip_config *cfg, uint32_t rows, uint32_t cols,
                          bool *is_alt, char *err, size_t errlen);

/* The engine sizes of the base cores (alt = false) or of the alt cores. */
struct chip_core_params chip_config_core_params(const struct chip_config *cfg, bool alt);
/* The cost of the mesh's rows x cols cores (core_cost, alt_core_cost: chip_config); the
   alt cores are those of alt_cores. */
double chip_config_cost(const struct chip_config *cfg, uint32_t rows, uint32_t cols);

/* The static power of the mesh's rows x cols cores, mW (static_mw_per_core, and
   alt_static_mw_per_core for the alt cores). */
double chip_config_static_mw(const struct chip_config *cfg, uint32_t rows, uint32_t cols);

/* Picoseconds per core cycle, rounded to the nearest picosecond. */
uint64_t chip_config_cycle_ps(const struct chip_config *cfg);

#endif
