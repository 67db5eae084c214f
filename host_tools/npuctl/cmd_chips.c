/* SPDX-License-Identifier: MIT */
/*
 * npuctl chips: the chip presets, SRC/models/chips/NAME.toml, parsed with the same
 * chip_config_load the chip model and the QEMU machine use. A file that does not parse is
 * listed with its error and makes the exit status 1; no preset directory is an error (2).
 */
#define _POSIX_C_SOURCE 200809L
#include "npuctl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "npu_enums.h"
#include "opts.h"

static void format_bytes(uint64_t bytes, char *out, size_t outlen)
{
    static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    unsigned u = 0;
    while (u + 1 < sizeof(units) / sizeof(units[0]) && bytes >= 1024 && bytes % 1024 == 0) {
        bytes /= 1024;
        u++;
    }
    snprintf(out, outlen, "%" PRIu64 " %s", bytes, units[u]);
}

/* Prints one row; returns false if the file does not parse. */
static bool print_chip_row(const char *dir, const char *name)
{
    char path[NPUCTL_PATH_MAX], err[NPUCTL_ERR_MAX], mesh[32], sram[32];
    struct chip_config cfg;
    int len = snprintf(path, sizeof(path), "%s/%s.toml", dir, name);
    if (len < 0 || (size_t)len >= sizeof(path)) {
        printf("%-20s error: path too long\n", name);
        return false;
    }
    const char *mark = strcmp(name, NPUCTL_DEFAULT_CHIP) == 0 ? " (default)" : "";
    if (chip_config_load(&cfg, path, err, sizeof(err))) {
        printf("%-20s error: %s\n", name, err);
        return false;
    }
    snprintf(mesh, sizeof(mesh), "%" PRIu32 "x%" PRIu32, cfg.mesh_rows, cfg.mesh_cols);
    format_bytes(cfg.sram_bytes, sram, sizeof(sram));
    printf("%-20s %-7s %5" PRIu32 " %6" PRIu32 " MHz  %-*s%s\n", name, mesh,
           cfg.mesh_rows * cfg.mesh_cols, cfg.freq_mhz, *mark ? 10 : 0, sram, mark);
    return true;
}

int npuctl_cmd_chips(int argc, char **argv)
{
    struct npuctl_args args;
    bool done;
    int rc = npuctl_opts_run(&npuctl_spec_chips, NULL, argc, argv, &args, &done);
    if (done)
        return rc;
    npuctl_args_free(&args);
    char dir[NPUCTL_PATH_MAX], *names[NPUCTL_CONFIGS_MAX];
    snprintf(dir, sizeof(dir), "%s/models/chips", npuctl_get_dir(NPUCTL_DIR_SOURCE));
    int n = npuctl_list_configs(dir, names, (int)NPUCTL_CONFIGS_MAX);
    if (n < 0) {
        npuctl_print_error("chips: cannot list %s: %s (set %s)", dir, strerror(errno),
                           npuctl_dir_env_name(NPUCTL_DIR_SOURCE));
        return NPUCTL_EXIT_USAGE;
    }
    if (n == 0)
        printf("no chip configs (*.toml) in %s\n", dir);
    else
        printf("%-20s %-7s %5s %10s  %s\n", "CHIP", "MESH", "CORES", "FREQ", "SRAM/CORE");
    bool all_ok = true;
    for (int i = 0; i < n; i++)
        all_ok &= print_chip_row(dir, names[i]);
    npuctl_free_names(names, n);
    return all_ok ? 0 : 1;
}

static int parse_only_chips(int argc, char **argv, char *err, size_t errlen)
{
    struct npuctl_args args;
    int rc = npuctl_opts_parse(&npuctl_spec_chips, NULL, argc, argv, &args, err, errlen);
    npuctl_args_free(&args);
    return rc;
}

const struct npuctl_cmd_spec npuctl_spec_chips = {
    "chips", NPUCTL_CMD_CHIPS, "npuctl chips\n", "list the chip presets --chip NAME takes",
    "  List the chip presets (models/chips/*.toml): mesh, cores, clock, SRAM per core.\n"
    "  Exit status 1 if a preset does not parse (it is listed with its error).\n",
    { NULL }, false, 0, parse_only_chips,
};
