/* SPDX-License-Identifier: MIT */
/*
 * npuctl models: the models --model NAME finds (SRC/models/configs/NAME.toml, then
 * SRC/models/tiny/NAME.toml), one line each from the same model_config_load the planner's
 * callers use: architecture, layers, hidden size, attention heads and experts. As npuctl
 * chips does for the chips, a file that does not parse is listed with its error and makes the
 * exit status 1; no model directory at all is an error (2).
 */
#define _POSIX_C_SOURCE 200809L
#include "npuctl.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "model_config.h"
#include "opts.h"

/* Prints one row; returns false if the file does not parse. */
static bool print_model_row(const char *name, const char *dir)
{
    char path[NPUCTL_PATH_MAX], err[NPUCTL_ERR_MAX], heads[24], experts[32];
    struct model_config m;
    snprintf(path, sizeof(path), "%s/models/%s/%s.toml", npuctl_get_dir(NPUCTL_DIR_SOURCE),
             dir, name);
    if (model_config_load(&m, path, err, sizeof(err))) {
        printf("%-16s error: %s\n", name, err);
        return false;
    }
    snprintf(heads, sizeof(heads), "%" PRIu32 "/%" PRIu32, m.num_heads, m.num_kv_heads);
    if (m.arch == MODEL_MOE)
        snprintf(experts, sizeof(experts), "%" PRIu32 " top %" PRIu32, m.num_experts,
                 m.experts_per_token);
    else
        snprintf(experts, sizeof(experts), "-");
    printf("%-16s %-5s %6" PRIu32 " %6" PRIu32 " %-7s %-10s %s%s\n", name, m.arch_name,
           m.num_layers, m.hidden_size, heads, experts, dir,
           strcmp(name, NPUCTL_SERVE_DEFAULT_MODEL) == 0 ? " (serve's default)" : "");
    return true;
}

int npuctl_cmd_models(int argc, char **argv)
{
    struct npuctl_args args;
    bool done;
    int rc = npuctl_opts_run(&npuctl_spec_models, NULL, argc, argv, &args, &done);
    if (done)
        return rc;
    npuctl_args_free(&args);
    char *names[NPUCTL_CONFIGS_MAX];
    const char *dirs[NPUCTL_CONFIGS_MAX];
    int n = npuctl_list_models(names, dirs, (int)NPUCTL_CONFIGS_MAX);
    if (n <= 0) {
        npuctl_print_error("models: no model configs in %s/models/{configs,tiny} (set %s)",
                           npuctl_get_dir(NPUCTL_DIR_SOURCE),
                           npuctl_dir_env_name(NPUCTL_DIR_SOURCE));
        return NPUCTL_EXIT_USAGE;
    }
    printf("%-16s %-5s %6s %6s %-7s %-10s %s\n", "MODEL", "ARCH", "LAYERS", "HIDDEN", "HEADS",
           "EXPERTS", "IN");
    bool all_ok = true;
    for (int i = 0; i < n; i++)
        all_ok &= print_model_row(names[i], dirs[i]);
    npuctl_free_names(names, n);
    return all_ok ? 0 : 1;
}

static int parse_only_models(int argc, char **argv, char *err, size_t errlen)
{
    struct npuctl_args args;
    int rc = npuctl_opts_parse(&npuctl_spec_models, NULL, argc, argv, &args, err, errlen);
    npuctl_args_free(&args);
    return rc;
}

const struct npuctl_cmd_spec npuctl_spec_models = {
    "models", NPUCTL_CMD_MODELS, "npuctl models\n",
    "list the models --model NAME takes",
    "  List the models --model NAME finds (models/configs/*.toml, then models/tiny/*.toml):\n"
    "  architecture, layers, hidden size, query/KV heads, experts (and how many a token\n"
    "  takes). Exit status 1 if a config does not parse (it is listed with its error).\n",
    { NULL }, false, 0, parse_only_models,
};
