/* SPDX-License-Identifier: MIT */
/* Chip config parser: see chip_config.h for the format and the fields. */
#include "chip_config.h"

#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "kv_config.h"
#include "npu_enums.h"
#include "npu_limits.h"

#define KIB 1024ull
#define MIB (1024ull * KIB)
#define GIB (1024ull * MIB)

static const struct kv_field fields[] = {
    { "name", KV_STRING, offsetof(struct chip_config, name), 1, CHIP_NAME_MAX - 1, 0, 0, false },
    { "mesh_rows", KV_U32, offsetof(struct chip_config, mesh_rows), 1, CHIP_MESH_DIM_MAX, 0, 0, false },
    { "mesh_cols", KV_U32, offsetof(struct chip_config, mesh_cols), 1, CHIP_MESH_DIM_MAX, 0, 0, false },
    { "freq_mhz", KV_U32, offsetof(struct chip_config, freq_mhz), 1, 10000, 0, 0, false },
    { "sram_bytes", KV_U64, offsetof(struct chip_config, sram_bytes), 64 * KIB, 256 * MIB, 0, 0, false },
    { "hbm_bytes", KV_U64, offsetof(struct chip_config, hbm_bytes), MIB, 1024 * GIB, 0, 0, false },
    { "dram_bytes", KV_U64, offsetof(struct chip_config, dram_bytes), NPU_DRAM_MIN_BYTES, 2 * GIB, 0, 0, false },
    { "cmd_cost_cycles", KV_U32, offsetof(struct chip_config, cmd_cost_cycles), 0, 1000000, 0, 0, false },
    { "noc_hop_cycles", KV_U32, offsetof(struct chip_config, noc_hop_cycles), 0, 1000000, 0, 0, false },
    { "sa_rows", KV_U32, offsetof(struct chip_config, sa_rows), 1, 512, 0, 0, false },
    { "sa_cols", KV_U32, offsetof(struct chip_config, sa_cols), 1, 512, 0, 0, false },
    { "sram_bytes_per_cycle", KV_U32, offsetof(struct chip_config, sram_bytes_per_cycle),
      1, 65536, 0, 0, false },
    { "vector_lanes", KV_U32, offsetof(struct chip_config, vector_lanes), 1, 1024, 0, 0, false },
    { "vector_alus_per_lane", KV_U32, offsetof(struct chip_config, vector_alus_per_lane),
      1, 256, 0, 0, false },
    { "vector_pipeline_cycles", KV_U32,
      offsetof(struct chip_config, vector_pipeline_cycles), 0, 1024, 0, 0, false },
    { "hbm_gbps", KV_U32, offsetof(struct chip_config, hbm_gbps), 1, 100000, 0, 0, false },
    { "hbm_latency_cycles", KV_U32, offsetof(struct chip_config, hbm_latency_cycles), 0,
      1000000, 0, 0, false },
    { "noc_link_gbps", KV_U32, offsetof(struct chip_config, noc_link_gbps), 1, 100000, 0, 0, false },
    { "hbm_stacks", KV_U32, offsetof(struct chip_config, hbm_stacks), 0, 32, 0, 0, false },
    { "hbm_stack_gbps", KV_U32, offsetof(struct chip_config, hbm_stack_gbps), 0, 1000000, 0, 0, false },
    { "congestion_free", KV_U32, offsetof(struct chip_config, congestion_free), 0, 1, 0, 0, false },
    { "energy_mac_fj", KV_U32, offsetof(struct chip_config, energy_mac_fj), 0, 1000000, 0, 0, false },
    { "energy_vector_fj", KV_U32, offsetof(struct chip_config, energy_vector_fj), 0,
      1000000, 0, 0, false },
    { "energy_sram_fj_per_byte", KV_U32,
      offsetof(struct chip_config, energy_sram_fj_per_byte), 0, 1000000, 0, 0, false },
    { "energy_hbm_fj_per_byte", KV_U32,
      offsetof(struct chip_config, energy_hbm_fj_per_byte), 0, 1000000, 0, 0, false },
    { "energy_noc_fj_per_byte_hop", KV_U32,
      offsetof(struct chip_config, energy_noc_fj_per_byte_hop), 0, 1000000, 0, 0, false },
    { "static_mw_per_core", KV_U32, offsetof(struct chip_config, static_mw_per_core), 0,
      1000000, 0, 0, false },
    { "alt_cores", KV_STRING, offsetof(struct chip_config, alt_cores), 1,
      CHIP_ALT_CORES_MAX - 1, 0, 0, true },
    { "alt_sa_rows", KV_U32, offsetof(struct chip_config, alt_sa_rows), 1, 512, 0, 0, true },
    { "alt_sa_cols", KV_U32, offsetof(struct chip_config, alt_sa_cols), 1, 512, 0, 0, true },
    { "alt_sram_bytes_per_cycle", KV_U32, offsetof(struct chip_config, alt_sram_bytes_per_cycle),
      1, 65536, 0, 0, true },
    { "alt_vector_lanes", KV_U32, offsetof(struct chip_config, alt_vector_lanes), 1, 1024, 0, 0,
      true },
    { "alt_hbm_gbps", KV_U32, offsetof(struct chip_config, alt_hbm_gbps), 1, 100000, 0, 0,
      true },
    { "alt_static_mw_per_core", KV_U32, offsetof(struct chip_config, alt_static_mw_per_core),
      1, 1000000, 0, 0, true },
    { "core_cost", KV_F64, offsetof(struct chip_config, core_cost), 0, 0, 1e-6, 1e9, true },
    { "alt_core_cost", KV_F64, offsetof(struct chip_config, alt_core_cost), 0, 0, 1e-6, 1e9,
      true },
};
#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

static bool any_alt_param(const struct chip_config *c)
{
    return c->alt_sa_rows || c->alt_sa_cols || c->alt_sram_bytes_per_cycle ||
           c->alt_vector_lanes || c->alt_hbm_gbps || c->alt_core_cost > 0 ||
           c->alt_static_mw_per_core;
}

/* The alt fields against each other and the mesh of the file. */
static int check_alt(const struct chip_config *cfg, const char *filename, char *err,
                     size_t errlen)
{
    if (!cfg->alt_cores[0] && any_alt_param(cfg))
        return kv_config_error(err, errlen, "%s: alt_* engine fields need field 'alt_cores' "
                               "(the cores they apply to)", filename);
    if (cfg->alt_cores[0] && !any_alt_param(cfg))
        return kv_config_error(err, errlen, "%s: field 'alt_cores' given without any alt_* "
                               "engine field", filename);
    if (cfg->alt_hbm_gbps && cfg->hbm_stacks)
        return kv_config_error(err, errlen, "%s: field 'alt_hbm_gbps' needs a channel per "
                               "core (hbm_stacks = 0)", filename);
    bool scratch[CHIP_CORES_MAX];
    char why[CHIP_ALT_CORES_MAX + 128];
    if (chip_config_alt_cores(cfg, cfg->mesh_rows, cfg->mesh_cols, scratch, why, sizeof(why)))
        return kv_config_error(err, errlen, "%s: %s", filename, why);
    return NPU_OK;
}

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
    rc = chip_config_check_mesh(cfg->mesh_rows, cfg->mesh_cols, err, errlen);
    return rc ? rc : check_alt(cfg, filename, err, errlen);
}

/* base for every core of the mesh, other for its alt cores. */
static double sum_by_type(const struct chip_config *cfg, uint32_t rows, uint32_t cols,
                          double base, double other)
{
    static bool alt[CHIP_CORES_MAX];
    char why[CHIP_ALT_CORES_MAX + 128];
    const bool any = cfg->alt_cores[0] &&
                     chip_config_alt_cores(cfg, rows, cols, alt, why, sizeof(why)) == NPU_OK;
    double sum = 0;
    for (uint32_t i = 0; i < rows * cols && i < CHIP_CORES_MAX; i++)
        sum += any && alt[i] ? other : base;
    return sum;
}

double chip_config_cost(const struct chip_config *cfg, uint32_t rows, uint32_t cols)
{
    const double base = cfg->core_cost > 0 ? cfg->core_cost : 1.0;
    return sum_by_type(cfg, rows, cols, base, cfg->alt_core_cost > 0 ? cfg->alt_core_cost
                                                                     : base);
}

double chip_config_static_mw(const struct chip_config *cfg, uint32_t rows, uint32_t cols)
{
    const double base = cfg->static_mw_per_core;
    return sum_by_type(cfg, rows, cols, base, cfg->alt_static_mw_per_core
                                                  ? cfg->alt_static_mw_per_core : base);
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

/* One "a" or "a-b" item of the list at *p; advances past it. */
static int parse_range(const char **p, uint32_t *lo, uint32_t *hi)
{
    char *end;
    errno = 0;
    unsigned long a = strtoul(*p, &end, 10), b;
    if (end == *p || errno || a > UINT32_MAX)
        return NPU_ERR_FORMAT;
    b = a;
    if (*end == '-') {
        const char *q = end + 1;
        if (*q < '0' || *q > '9') /* strtoul would take spaces and a sign */
            return NPU_ERR_FORMAT;
        b = strtoul(q, &end, 10);
        if (end == q || errno || b > UINT32_MAX || b < a)
            return NPU_ERR_FORMAT;
    }
    *lo = (uint32_t)a, *hi = (uint32_t)b, *p = end;
    return NPU_OK;
}

int chip_config_alt_cores(const struct chip_config *cfg, uint32_t rows, uint32_t cols,
                          bool *is_alt, char *err, size_t errlen)
{
    const uint32_t n = rows * cols;
    memset(is_alt, 0, n * sizeof(*is_alt));
    for (const char *p = cfg->alt_cores; *p;) {
        uint32_t lo, hi;
        if (*p < '0' || *p > '9' || parse_range(&p, &lo, &hi) || (*p && *p != ',') ||
            (*p == ',' && !p[1])) {
            snprintf(err, errlen, "field 'alt_cores' = \"%s\": expected core ids and ranges "
                     "like \"0-3,8\"", cfg->alt_cores);
            return NPU_ERR_FORMAT;
        }
        if (hi >= n) {
            snprintf(err, errlen, "field 'alt_cores': core %u is outside the %ux%u mesh "
                     "(cores 0..%u)", hi, rows, cols, n - 1);
            return NPU_ERR_RANGE;
        }
        for (uint32_t c = lo; c <= hi; c++)
            is_alt[c] = true;
        p += *p == ',';
    }
    return NPU_OK;
}

struct chip_core_params chip_config_core_params(const struct chip_config *cfg, bool alt)
{
    struct chip_core_params b = {
        .sa_rows = cfg->sa_rows, .sa_cols = cfg->sa_cols,
        .sram_bytes_per_cycle = cfg->sram_bytes_per_cycle,
        .vector_lanes = cfg->vector_lanes, .hbm_gbps = cfg->hbm_gbps,
    };
    if (!alt)
        return b;
    return (struct chip_core_params){
        .sa_rows = cfg->alt_sa_rows ? cfg->alt_sa_rows : b.sa_rows,
        .sa_cols = cfg->alt_sa_cols ? cfg->alt_sa_cols : b.sa_cols,
        .sram_bytes_per_cycle = cfg->alt_sram_bytes_per_cycle ? cfg->alt_sram_bytes_per_cycle
                                                              : b.sram_bytes_per_cycle,
        .vector_lanes = cfg->alt_vector_lanes ? cfg->alt_vector_lanes : b.vector_lanes,
        .hbm_gbps = cfg->alt_hbm_gbps ? cfg->alt_hbm_gbps : b.hbm_gbps,
    };
}
