/* SPDX-License-Identifier: MIT */
/*
 * The bundled configs by name: chip presets (SRC/models/chips/NAME.toml) and models
 * (SRC/models/configs/NAME.toml, else SRC/models/tiny/NAME.toml). A name that is neither
 * is answered with the closest known names and the command that lists them, rather than
 * with the file that could not be opened; a value with '/' or ending in .toml is a path,
 * and its reader names what is wrong with it.
 */
#define _POSIX_C_SOURCE 200809L
#include "npuctl.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "npu_enums.h"

/* The model directories under SRC/models, in the order a NAME is looked up. */
static const char *const model_dirs[] = { "configs", "tiny" };
#define NMODEL_DIRS (sizeof(model_dirs) / sizeof(model_dirs[0]))

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int npuctl_list_configs(const char *dir, char **names, int max)
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

void npuctl_free_names(char **names, int n)
{
    for (int i = 0; i < n; i++)
        free(names[i]);
}

/* "unknown KIND 'NAME'; did you mean X? (npuctl LIST)" over the names in the dirs. */
static int unknown_name(const char *kind, const char *name, const char *const *dirs,
                        size_t ndirs, const char *list, char *err, size_t errlen)
{
    char *names[NPUCTL_CONFIGS_MAX], dir[NPUCTL_PATH_MAX], hint[256];
    int n = 0;
    for (size_t i = 0; i < ndirs; i++) {
        snprintf(dir, sizeof(dir), "%s/models/%s", npuctl_get_dir(NPUCTL_DIR_SOURCE), dirs[i]);
        int k = npuctl_list_configs(dir, names + n, (int)NPUCTL_CONFIGS_MAX - n);
        n += k > 0 ? k : 0;
    }
    npuctl_format_suggestion(name, (const char *const *)names, (size_t)n, hint, sizeof(hint));
    snprintf(err, errlen, "unknown %s '%s'%s (npuctl %s)", kind, name, hint, list);
    npuctl_free_names(names, n);
    return NPU_ERR_NOTFOUND;
}

int npuctl_find_model(const char *model, char *path, size_t len, char *err, size_t errlen)
{
    const char *src = npuctl_get_dir(NPUCTL_DIR_SOURCE);
    if (strchr(model, '/') || strstr(model, ".toml")) {
        snprintf(path, len, "%s", model);
        return NPU_OK;
    }
    for (size_t i = 0; i < NMODEL_DIRS; i++) {
        snprintf(path, len, "%s/models/%s/%s.toml", src, model_dirs[i], model);
        if (access(path, F_OK) == 0)
            return NPU_OK;
    }
    return unknown_name("model", model, model_dirs, NMODEL_DIRS, "models", err, errlen);
}

int npuctl_load_chip(const char *chip, struct chip_config *cfg, char *path, size_t pathlen,
                     char *err, size_t errlen)
{
    static const char *const chip_dirs[] = { "chips" };
    int rc = npuctl_resolve_chip_path(chip, npuctl_get_dir(NPUCTL_DIR_SOURCE), path, pathlen,
                                      err, errlen);
    if (rc)
        return rc;
    if (!npuctl_chip_is_path(chip) && access(path, F_OK) != 0)
        return unknown_name("chip", chip, chip_dirs, 1, "chips", err, errlen);
    return chip_config_load(cfg, path, err, errlen);
}

int npuctl_list_models(char **names, const char **dirs, int max)
{
    int n = 0;
    for (size_t i = 0; i < NMODEL_DIRS; i++) {
        char dir[NPUCTL_PATH_MAX];
        snprintf(dir, sizeof(dir), "%s/models/%s", npuctl_get_dir(NPUCTL_DIR_SOURCE),
                 model_dirs[i]);
        int k = npuctl_list_configs(dir, names + n, max - n);
        for (int j = 0; j < k; j++)
            dirs[n + j] = model_dirs[i];
        n += k > 0 ? k : 0;
    }
    return n;
}
