/* SPDX-License-Identifier: MIT */
/*
 * npuctl dispatch: the command table and npuctl_main(). `npuctl`, `npuctl help`, `-h` and
 * `--help` list the commands with one line each; `npuctl help CMD [SUB]` and
 * `npuctl CMD [SUB] --help` print one command's usage with every option and its default,
 * made from the option tables its parser uses (opts.h); `help bench gemm` prints bench's
 * (the benchmark is bench's argument) and `help serve --help` serve's. An unknown command
 * names the closest ones and exits 2.
 */
#include "npuctl.h"

#include <stdio.h>
#include <string.h>

#include "opts.h"

#define SUBS_MAX 4u

struct npuctl_command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const struct npuctl_cmd_spec *specs[SUBS_MAX]; /* its usages; NULL-terminated */
    /* a word after the name that the first usage covers (bench's benchmarks), so that
       `help bench gemm` prints it; NULL: none */
    bool (*first_takes)(const char *word);
};

static const struct npuctl_command commands[] = {
    { "run", npuctl_cmd_run, { &npuctl_spec_run }, NULL },
    { "selftest", npuctl_cmd_selftest, { &npuctl_spec_selftest }, NULL },
    { "debug", npuctl_cmd_debug, { &npuctl_spec_debug }, NULL },
    { "bench", npuctl_cmd_bench, { &npuctl_spec_bench, &npuctl_spec_bench_model },
      npuctl_bench_is_kind },
    { "plan", npuctl_cmd_plan, { &npuctl_spec_plan }, NULL },
    { "build-image", npuctl_cmd_build_image, { &npuctl_spec_build_image }, NULL },
    { "flash", npuctl_cmd_flash, { &npuctl_spec_flash }, NULL },
    { "serve", npuctl_cmd_serve, { &npuctl_spec_serve }, NULL },
    { "trace", npuctl_cmd_trace,
      { &npuctl_spec_trace_gen, &npuctl_spec_trace_import, &npuctl_spec_trace_show }, NULL },
    { "sweep", npuctl_cmd_sweep, { &npuctl_spec_sweep }, NULL },
    { "compare", npuctl_cmd_compare, { &npuctl_spec_compare }, NULL },
    { "plot", npuctl_cmd_plot, { &npuctl_spec_plot }, NULL },
    { "test", npuctl_cmd_test, { &npuctl_spec_test }, NULL },
    { "chips", npuctl_cmd_chips, { &npuctl_spec_chips }, NULL },
    { "models", npuctl_cmd_models, { &npuctl_spec_models }, NULL },
    { "help", npuctl_cmd_help, { &npuctl_spec_help }, NULL },
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

const struct npuctl_cmd_spec npuctl_spec_help = {
    "help", NPUCTL_CMD_HELP, "npuctl help [COMMAND [SUBCOMMAND]]\n",
    "list the commands, or print one command's usage and options",
    "  The list of commands, or one command's usage with every option and its default\n"
    "  (also: npuctl COMMAND --help, npuctl COMMAND -h).\n",
    { NULL }, false, 2, NULL,
};

size_t npuctl_specs(const struct npuctl_cmd_spec *const **out)
{
    static const struct npuctl_cmd_spec *all[NCOMMANDS * SUBS_MAX];
    size_t n = 0;
    for (size_t i = 0; i < NCOMMANDS; i++)
        for (size_t k = 0; k < SUBS_MAX && commands[i].specs[k]; k++)
            all[n++] = commands[i].specs[k];
    *out = all;
    return n;
}

static const struct npuctl_command *find_command(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

/* "npuctl: unknown command 'X'; did you mean Y? (npuctl help)" */
static void print_unknown_command(const char *what, const char *name)
{
    const char *names[NCOMMANDS];
    char hint[160];
    for (size_t i = 0; i < NCOMMANDS; i++)
        names[i] = commands[i].name;
    npuctl_format_suggestion(name, names, NCOMMANDS, hint, sizeof(hint));
    npuctl_print_error("%sunknown command '%s'%s (npuctl help lists them)", what, name, hint);
}

static void print_environment(FILE *f)
{
    static const enum npuctl_dir which[] = { NPUCTL_DIR_SOURCE, NPUCTL_DIR_BUILD,
                                             NPUCTL_DIR_FIRMWARE, NPUCTL_PATH_QEMU };
    fprintf(f, "\nenvironment (current value):\n");
    for (size_t i = 0; i < sizeof(which) / sizeof(which[0]); i++)
        fprintf(f, "  %-17s %s\n", npuctl_dir_env_name(which[i]), npuctl_get_dir(which[i]));
}

void npuctl_print_usage(FILE *f, const char *name)
{
    const struct npuctl_command *c = name ? find_command(name) : NULL;
    if (c) {
        for (size_t k = 0; k < SUBS_MAX && c->specs[k]; k++) {
            fputs(k ? "\n" : "", f);
            npuctl_opts_print_help(f, c->specs[k]);
        }
        return;
    }
    fprintf(f, "usage: npuctl COMMAND [ARGS...]\n"
               "The front door of the npu-mesh project: runs firmware on the emulated chip.\n"
               "Errors print 'npuctl: ...' and exit 2. `npuctl help COMMAND` (or `npuctl "
               "COMMAND --help`)\nlists a command's options with their defaults.\n\n"
               "commands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        for (size_t k = 0; k < SUBS_MAX && commands[i].specs[k]; k++)
            npuctl_opts_print_brief(f, commands[i].specs[k]);
    print_environment(f);
}

/* `help CMD SUB`: the subcommand's usage ("bench model", "trace gen"), or the command's
   own for a word of it (`help bench gemm`: bench's), else NULL. */
static const struct npuctl_cmd_spec *find_sub(const struct npuctl_command *c, const char *sub)
{
    char name[64];
    snprintf(name, sizeof(name), "%s %s", c->name, sub);
    for (size_t k = 0; k < SUBS_MAX && c->specs[k]; k++)
        if (strcmp(c->specs[k]->name, name) == 0)
            return c->specs[k];
    return c->first_takes && c->first_takes(sub) ? c->specs[0] : NULL;
}

static bool is_help_word(const char *s)
{
    return !strcmp(s, "-h") || !strcmp(s, "--help");
}

int npuctl_cmd_help(int argc, char **argv)
{
    if (argc > 0 && is_help_word(argv[0])) {
        npuctl_opts_print_help(stdout, &npuctl_spec_help);
        return 0;
    }
    if (argc > 1 && is_help_word(argv[argc - 1]))
        argc--; /* `help serve --help` asks for what `help serve` prints */
    const struct npuctl_command *c = argc > 0 ? find_command(argv[0]) : NULL;
    if (argc > 0 && !c) {
        print_unknown_command("help: ", argv[0]);
        return NPUCTL_EXIT_USAGE;
    }
    if (argc > 1) {
        const struct npuctl_cmd_spec *sub = find_sub(c, argv[1]);
        if (!sub || argc > 2)
            return npuctl_usage_error("help: %s has no subcommand '%s' (npuctl help %s)",
                                      argv[0], argv[argc > 2 && sub ? 2 : 1], argv[0]);
        npuctl_opts_print_help(stdout, sub);
        return 0;
    }
    npuctl_print_usage(stdout, argc > 0 ? argv[0] : NULL);
    return 0;
}

int npuctl_main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        npuctl_print_usage(stdout, NULL);
        return 0;
    }
    const struct npuctl_command *c = find_command(argv[1]);
    if (!c) {
        print_unknown_command("", argv[1]);
        return NPUCTL_EXIT_USAGE;
    }
    return c->fn(argc - 2, argv + 2);
}
