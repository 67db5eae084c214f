/* SPDX-License-Identifier: MIT */
/*
 * npuctl chips: the chip presets, SRC/models/chips/NAME.toml, parsed with the same
 * chip_config_load the chip model and the QEMU machine use. A file that does not parse is
 * listed with its error and makes the exit status 1; no preset directory is an error (2).
 */
#define _POSIX_C_SOURCE 200809L
#include "npuctl.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "npu_enums.h"

#define CHIPS_MAX 256

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Collects the NAME of every NAME.toml in dir, sorted; returns the count or -1. */
static int collect_chip_names(const char *dir, char **names, int max)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < max) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || len <= 5 || strcmp(e->d_name + len - 5, ".toml") != 0)
            continue;
        names[n] = strndup(e->d_name, len - 5);
        if (names[n])
            n++;
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof(*names), compare_names);
    return n;
}

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
    if (argc > 0) {
        bool help = strcmp(argv[0], "-h") == 0 || strcmp(argv[0], "--help") == 0;
        if (!help)
            npuctl_print_error("chips: unexpected argument '%s'", argv[0]);
        npuctl_print_usage(help ? stdout : stderr, "chips");
        return help ? 0 : NPUCTL_EXIT_USAGE;
    }
    char dir[NPUCTL_PATH_MAX], *names[CHIPS_MAX];
    snprintf(dir, sizeof(dir), "%s/models/chips", npuctl_get_dir(NPUCTL_DIR_SOURCE));
    int n = collect_chip_names(dir, names, CHIPS_MAX);
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
    for (int i = 0; i < n; i++) {
        all_ok &= print_chip_row(dir, names[i]);
        free(names[i]);
    }
    return all_ok ? 0 : 1;
}
