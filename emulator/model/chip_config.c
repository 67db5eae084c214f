/* SPDX-License-Identifier: MIT */
/* Chip config parser: see chip_config.h for the format and the fields. */
#include "chip_config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kv_config.h"
#include "npu_enums.h"

#define KIB 1024ull
#define MIB (1024ull * KIB)
#define GIB (1024ull * MIB)

static const struct kv_field fields[] = {
    { "name", KV_STRING, offsetof(struct chip_config, name), 1, CHIP_NAME_MAX - 1, 0, 0 },
    { "mesh_rows", KV_U32, offsetof(struct chip_config, mesh_rows), 1, CHIP_MESH_DIM_MAX, 0, 0 },
    { "mesh_cols", KV_U32, offsetof(struct chip_config, mesh_cols), 1, CHIP_MESH_DIM_MAX, 0, 0 },
    { "freq_mhz", KV_U32, offsetof(struct chip_config, freq_mhz), 1, 10000, 0, 0 },
    { "sram_bytes", KV_U64, offsetof(struct chip_config, sram_bytes), 64 * KIB, 256 * MIB, 0, 0 },
    { "hbm_bytes", KV_U64, offsetof(struct chip_config, hbm_bytes), MIB, 1024 * GIB, 0, 0 },
    { "dram_bytes", KV_U64, offsetof(struct chip_config, dram_bytes), MIB, 2 * GIB, 0, 0 },
    { "cmd_cost_cycles", KV_U32, offsetof(struct chip_config, cmd_cost_cycles), 0, 1000000, 0, 0 },
    { "noc_hop_cycles", KV_U32, offsetof(struct chip_config, noc_hop_cycles), 0, 1000000, 0, 0 },
    { "sa_rows", KV_U32, offsetof(struct chip_config, sa_rows), 1, 512, 0, 0 },
    { "sa_cols", KV_U32, offsetof(struct chip_config, sa_cols), 1, 512, 0, 0 },
    { "sram_bytes_per_cycle", KV_U32, offsetof(struct chip_config, sram_bytes_per_cycle),
      1, 65536, 0, 0 },
    { "vector_lanes", KV_U32, offsetof(struct chip_config, vector_lanes), 1, 1024, 0, 0 },
    { "vector_alus_per_lane", KV_U32, offsetof(struct chip_config, vector_alus_per_lane),
      1, 256, 0, 0 },
    { "vector_pipeline_cycles", KV_U32,
      offsetof(struct chip_config, vector_pipeline_cycles), 0, 1024, 0, 0 },
    { "hbm_gbps", KV_U32, offsetof(struct chip_config, hbm_gbps), 1, 100000, 0, 0 },
    { "hbm_latency_cycles", KV_U32, offsetof(struct chip_config, hbm_latency_cycles), 0,
      1000000, 0, 0 },
    { "noc_link_gbps", KV_U32, offsetof(struct chip_config, noc_link_gbps), 1, 100000, 0, 0 },
    { "hbm_stacks", KV_U32, offsetof(struct chip_config, hbm_stacks), 0, 32, 0, 0 },
    { "hbm_stack_gbps", KV_U32, offsetof(struct chip_config, hbm_stack_gbps), 0, 1000000, 0, 0 },
    { "congestion_free", KV_U32, offsetof(struct chip_config, congestion_free), 0, 1, 0, 0 },
    { "energy_mac_fj", KV_U32, offsetof(struct chip_config, energy_mac_fj), 0, 1000000, 0, 0 },
    { "energy_vector_fj", KV_U32, offsetof(struct chip_config, energy_vector_fj), 0,
      1000000, 0, 0 },
    { "energy_sram_fj_per_byte", KV_U32,
      offsetof(struct chip_config, energy_sram_fj_per_byte), 0, 1000000, 0, 0 },
    { "energy_hbm_fj_per_byte", KV_U32,
      offsetof(struct chip_config, energy_hbm_fj_per_byte), 0, 1000000, 0, 0 },
    { "energy_noc_fj_per_byte_hop", KV_U32,
      offsetof(struct chip_config, energy_noc_fj_per_byte_hop), 0, 1000000, 0, 0 },
    { "static_mw_per_core", KV_U32, offsetof(struct chip_config, static_mw_per_core), 0,
      1000000, 0, 0 },
};
#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

int chip_config_parse(struct chip_config *cfg, const char *text, const char *filename,
                      char *err, size_t errlen)
{
    memset(cfg, 0, sizeof(*cfg));
    int rc = kv_config_parse(cfg, fields, NFIELDS, text, filename, err, errlen);
    if (rc)
        return rc;
    if (cfg->hbm_stacks > cfg->mesh_rows)
        return kv_config_error(err, errlen,
                               "%s: field 'hbm_stacks' = %u: at most one stack per mesh "
                               "row (%u)", filename, cfg->hbm_stacks, cfg->mesh_rows);
    if (cfg->hbm_stacks && !cfg->hbm_stack_gbps)
        return kv_config_error(err, errlen,
                               "%s: field 'hbm_stack_gbps' must be set when hbm_stacks "
                               "is not 0", filename);
    return chip_config_check_mesh(cfg->mesh_rows, cfg->mesh_cols, err, errlen);
}

int chip_config_load(struct chip_config *cfg, const char *path, char *err, size_t errlen)
{
    char text[16384];
    int rc = kv_config_read(path, text, sizeof(text), err, errlen);
    return rc ? rc : chip_config_parse(cfg, text, path, err, errlen);
}

int chip_config_check_mesh(uint32_t rows, uint32_t cols, char *err, size_t errlen)
{
    if (rows < 1 || rows > CHIP_MESH_DIM_MAX || cols < 1 || cols > CHIP_MESH_DIM_MAX) {
        snprintf(err, errlen, "mesh %ux%u: rows and columns must each be 1..%u", rows, cols,
                 CHIP_MESH_DIM_MAX);
        return NPU_ERR_RANGE;
    }
    return NPU_OK;
}

uint64_t chip_config_cycle_ps(const struct chip_config *cfg)
{
    return (1000000ull + cfg->freq_mhz / 2) / cfg->freq_mhz;
}
