/* SPDX-License-Identifier: MIT */
/* Chip config parser: see chip_config.h for the format and the fields. */
#include "chip_config.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu_enums.h"

enum field_type { FIELD_U32, FIELD_U64, FIELD_STRING };

struct field_desc {
    const char *key;
    enum field_type type;
    size_t offset;
    uint64_t min, max;
};

#define KIB 1024ull
#define MIB (1024ull * KIB)
#define GIB (1024ull * MIB)

static const struct field_desc fields[] = {
    { "name", FIELD_STRING, offsetof(struct chip_config, name), 1, CHIP_NAME_MAX - 1 },
    { "mesh_rows", FIELD_U32, offsetof(struct chip_config, mesh_rows), 1, CHIP_MESH_DIM_MAX },
    { "mesh_cols", FIELD_U32, offsetof(struct chip_config, mesh_cols), 1, CHIP_MESH_DIM_MAX },
    { "freq_mhz", FIELD_U32, offsetof(struct chip_config, freq_mhz), 1, 10000 },
    { "sram_bytes", FIELD_U64, offsetof(struct chip_config, sram_bytes), 64 * KIB, 256 * MIB },
    { "hbm_bytes", FIELD_U64, offsetof(struct chip_config, hbm_bytes), MIB, 1024 * GIB },
    { "dram_bytes", FIELD_U64, offsetof(struct chip_config, dram_bytes), MIB, 2 * GIB },
    { "cmd_cost_cycles", FIELD_U32, offsetof(struct chip_config, cmd_cost_cycles), 0, 1000000 },
    { "noc_hop_cycles", FIELD_U32, offsetof(struct chip_config, noc_hop_cycles), 0, 1000000 },
    { "sa_rows", FIELD_U32, offsetof(struct chip_config, sa_rows), 1, 512 },
    { "sa_cols", FIELD_U32, offsetof(struct chip_config, sa_cols), 1, 512 },
    { "sram_bytes_per_cycle", FIELD_U32, offsetof(struct chip_config, sram_bytes_per_cycle),
      1, 65536 },
    { "vector_lanes", FIELD_U32, offsetof(struct chip_config, vector_lanes), 1, 1024 },
    { "vector_alus_per_lane", FIELD_U32, offsetof(struct chip_config, vector_alus_per_lane),
      1, 256 },
    { "vector_pipeline_cycles", FIELD_U32,
      offsetof(struct chip_config, vector_pipeline_cycles), 0, 1024 },
    { "hbm_gbps", FIELD_U32, offsetof(struct chip_config, hbm_gbps), 1, 100000 },
    { "hbm_latency_cycles", FIELD_U32, offsetof(struct chip_config, hbm_latency_cycles), 0,
      1000000 },
    { "noc_link_gbps", FIELD_U32, offsetof(struct chip_config, noc_link_gbps), 1, 100000 },
    { "hbm_stacks", FIELD_U32, offsetof(struct chip_config, hbm_stacks), 0, 32 },
    { "hbm_stack_gbps", FIELD_U32, offsetof(struct chip_config, hbm_stack_gbps), 0, 1000000 },
    { "congestion_free", FIELD_U32, offsetof(struct chip_config, congestion_free), 0, 1 },
    { "energy_mac_fj", FIELD_U32, offsetof(struct chip_config, energy_mac_fj), 0, 1000000 },
    { "energy_vector_fj", FIELD_U32, offsetof(struct chip_config, energy_vector_fj), 0,
      1000000 },
    { "energy_sram_fj_per_byte", FIELD_U32,
      offsetof(struct chip_config, energy_sram_fj_per_byte), 0, 1000000 },
    { "energy_hbm_fj_per_byte", FIELD_U32,
      offsetof(struct chip_config, energy_hbm_fj_per_byte), 0, 1000000 },
    { "energy_noc_fj_per_byte_hop", FIELD_U32,
      offsetof(struct chip_config, energy_noc_fj_per_byte_hop), 0, 1000000 },
    { "static_mw_per_core", FIELD_U32, offsetof(struct chip_config, static_mw_per_core), 0,
      1000000 },
};
#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

static int report(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return NPU_ERR_FORMAT;
}

/* Parses an unsigned integer (decimal or 0x hex, `_` separators allowed). */
static bool parse_uint(const char *s, uint64_t *out)
{
    char digits[64];
    size_t n = 0;
    for (; *s; s++) {
        if (*s == '_')
            continue;
        if (n + 1 >= sizeof(digits))
            return false;
        digits[n++] = *s;
    }
    digits[n] = '\0';
    /* Decimal without leading zeros or 0x hex, as in TOML: never C's octal, no sign. */
    const char *d = digits;
    bool hex = digits[0] == '0' && digits[1] == 'x';
    if (hex)
        d += 2;
    else if (digits[0] == '0' && digits[1] != '\0')
        return false;
    if (*d == '\0')
        return false;
    for (const char *q = d; *q; q++)
        if (hex ? !isxdigit((unsigned char)*q) : !isdigit((unsigned char)*q))
            return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(d, &end, hex ? 16 : 10);
    if (errno || *end != '\0')
        return false;
    *out = v;
    return true;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

/* Cuts a trailing `# comment` that is not inside a string. */
static void strip_comment(char *s)
{
    bool in_string = false;
    for (; *s; s++) {
        if (*s == '"')
            in_string = !in_string;
        else if (*s == '#' && !in_string) {
            *s = '\0';
            return;
        }
    }
}

static int set_field(struct chip_config *cfg, const struct field_desc *f, const char *value,
                     const char *where, char *err, size_t errlen)
{
    char *base = (char *)cfg + f->offset;
    if (f->type == FIELD_STRING) {
        size_t len = strlen(value);
        if (len < 2 || value[0] != '"' || value[len - 1] != '"')
            return report(err, errlen, "%s: field '%s' must be a quoted string", where, f->key);
        if (len - 2 < f->min || len - 2 > f->max)
            return report(err, errlen, "%s: field '%s' must be 1..%llu characters", where,
                          f->key, (unsigned long long)f->max);
        memcpy(base, value + 1, len - 2);
        base[len - 2] = '\0';
        return NPU_OK;
    }
    uint64_t v;
    if (!parse_uint(value, &v))
        return report(err, errlen, "%s: field '%s' must be an unsigned integer, got '%s'",
                      where, f->key, value);
    if (v < f->min || v > f->max)
        return report(err, errlen, "%s: field '%s' = %llu is out of range [%llu, %llu]", where,
                      f->key, (unsigned long long)v, (unsigned long long)f->min,
                      (unsigned long long)f->max);
    if (f->type == FIELD_U32)
        *(uint32_t *)base = (uint32_t)v;
    else
        *(uint64_t *)base = v;
    return NPU_OK;
}

static int parse_line(struct chip_config *cfg, char *line, const char *where, bool *seen,
                      char *err, size_t errlen)
{
    strip_comment(line);
    char *s = trim(line);
    if (*s == '\0')
        return NPU_OK;
    char *eq = strchr(s, '=');
    if (!eq)
        return report(err, errlen, "%s: expected 'key = value', got '%s'", where, s);
    *eq = '\0';
    char *key = trim(s), *value = trim(eq + 1);
    for (size_t i = 0; i < NFIELDS; i++) {
        if (strcmp(fields[i].key, key) != 0)
            continue;
        if (seen[i])
            return report(err, errlen, "%s: field '%s' given twice", where, key);
        seen[i] = true;
        return set_field(cfg, &fields[i], value, where, err, errlen);
    }
    return report(err, errlen, "%s: unknown field '%s'", where, key);
}

int chip_config_parse(struct chip_config *cfg, const char *text, const char *filename,
                      char *err, size_t errlen)
{
    bool seen[NFIELDS] = { false };
    memset(cfg, 0, sizeof(*cfg));
    unsigned lineno = 0;
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char line[512], where[320];
        lineno++;
        snprintf(where, sizeof(where), "%s:%u", filename, lineno);
        if (len >= sizeof(line))
            return report(err, errlen, "%s: line longer than %zu characters", where,
                          sizeof(line) - 1);
        memcpy(line, p, len);
        line[len] = '\0';
        int rc = parse_line(cfg, line, where, seen, err, errlen);
        if (rc)
            return rc;
        p += len + (nl ? 1 : 0);
    }
    for (size_t i = 0; i < NFIELDS; i++)
        if (!seen[i])
            return report(err, errlen, "%s: missing field '%s'", filename, fields[i].key);
    if (cfg->hbm_stacks > cfg->mesh_rows)
        return report(err, errlen, "%s: field 'hbm_stacks' = %u: at most one stack per mesh "
                      "row (%u)", filename, cfg->hbm_stacks, cfg->mesh_rows);
    if (cfg->hbm_stacks && !cfg->hbm_stack_gbps)
        return report(err, errlen, "%s: field 'hbm_stack_gbps' must be set when hbm_stacks "
                      "is not 0", filename);
    return chip_config_check_mesh(cfg->mesh_rows, cfg->mesh_cols, err, errlen);
}

int chip_config_load(struct chip_config *cfg, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NPU_ERR_IO;
    }
    char text[16384];
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    /* At exactly the limit feof is not set yet: try one more byte. */
    bool too_long = n == sizeof(text) - 1 && fgetc(f) != EOF;
    int read_errno = ferror(f) ? errno : 0;
    fclose(f);
    if (read_errno) {
        snprintf(err, errlen, "%s: cannot read: %s", path, strerror(read_errno));
        return NPU_ERR_IO;
    }
    if (too_long) {
        snprintf(err, errlen, "%s: larger than %zu bytes", path, sizeof(text) - 1);
        return NPU_ERR_FORMAT;
    }
    text[n] = '\0';
    if (memchr(text, '\0', n)) {
        snprintf(err, errlen, "%s: not a text file", path);
        return NPU_ERR_FORMAT;
    }
    return chip_config_parse(cfg, text, path, err, errlen);
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
