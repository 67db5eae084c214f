/* SPDX-License-Identifier: MIT */
/*
 * npuctl's options as tables (docs/cli.md): each group of options is one table, read both by
 * the parser (npuctl_opts_parse) and by the help printer (npuctl_opts_print_help), so what
 * `npuctl COMMAND --help` lists is exactly what COMMAND accepts, with its defaults. A group
 * shared by several commands (the plan options of plan, build-image, bench model and
 * serve; run's options of run, selftest, debug, bench and flash) is one table; an entry's
 * `cmds` mask says which of them take it, and an option that differs between commands (a
 * default, a help text) is one entry per variant.
 *
 * Forms: `--opt VALUE` and `--opt=VALUE`; `-h` / `--help` everywhere; `--` ends the options
 * (the rest goes to QEMU for the commands that start it, else it is positional). A value
 * that is itself an option of the command (`--sched --out DIR`) is refused: the option
 * needs a value.
 */
#ifndef NPUCTL_OPTS_H
#define NPUCTL_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Every command and subcommand that has a usage, as bits of an option's `cmds` mask. */
enum npuctl_cmd_id {
    NPUCTL_CMD_RUN, NPUCTL_CMD_SELFTEST, NPUCTL_CMD_DEBUG, NPUCTL_CMD_BENCH,
    NPUCTL_CMD_BENCH_MODEL, NPUCTL_CMD_PLAN, NPUCTL_CMD_BUILD_IMAGE, NPUCTL_CMD_FLASH,
    NPUCTL_CMD_SERVE, NPUCTL_CMD_TRACE_GEN, NPUCTL_CMD_TRACE_IMPORT, NPUCTL_CMD_TRACE_SHOW,
    NPUCTL_CMD_COMPARE, NPUCTL_CMD_PLOT, NPUCTL_CMD_TEST, NPUCTL_CMD_CHIPS, NPUCTL_CMD_MODELS,
    NPUCTL_CMD_HELP, NPUCTL_CMD_SWEEP, NPUCTL_CMD_COUNT
};
#define NPUCTL_CMD_BIT(id) (1u << (id))

struct npuctl_opt {
    const char *name;    /* "--chip", "-o" */
    const char *alias;   /* a second spelling ("--out" beside "-o"), or NULL */
    const char *metavar; /* the value's form ("NAME|PATH"); NULL: a flag, no value */
    const char *def;     /* the default as a value the parser accepts, or NULL (the help
                            text then says what happens without the option) */
    const char *help;    /* one paragraph; the printer wraps it */
    int id;              /* what the group's apply function switches on */
    uint32_t cmds;       /* NPUCTL_CMD_BIT()s of the commands that take it */
};

/* Applies one option to the group's context: 0, or non-zero after writing why into err, or
   after printing why itself (err then left empty). value is NULL for a flag. */
typedef int (*npuctl_opt_apply_fn)(void *ctx, const struct npuctl_opt *opt, const char *value,
                                   char *err, size_t errlen);

struct npuctl_opt_group {
    const char *title; /* the help's heading: "plan options" */
    const struct npuctl_opt *opts;
    size_t n;
    npuctl_opt_apply_fn apply;
};

#define NPUCTL_GROUPS_MAX 4u

/* The usage of one command (or subcommand: "bench model", "trace gen"). */
struct npuctl_cmd_spec {
    const char *name;     /* as typed after npuctl: "serve", "bench model" */
    enum npuctl_cmd_id id;
    const char *synopsis; /* "npuctl serve [OPTIONS]"; more lines each end in \n */
    const char *summary;  /* one line for the command list of `npuctl help` */
    const char *about;    /* the description: lines of text, each indented by 2, or NULL */
    const struct npuctl_opt_group *groups[NPUCTL_GROUPS_MAX]; /* NULL-terminated */
    bool passthrough;     /* `--` passes the rest to QEMU (extra_argc / extra_argv) */
    int max_pos;          /* positional arguments it takes; -1: any number */
    /* The command's own parser over argv (defaults, then npuctl_opts_parse into its own
       context; no file is read, nothing is started): 0, or the parser's status with err
       (negative), or a group's refusal. NULL: npuctl does not parse the arguments. */
    int (*parse_only)(int argc, char **argv, char *err, size_t errlen);
};

/* What remains of argv once the options are applied. */
struct npuctl_args {
    char **pos;        /* the positional arguments in order (malloc'd; npuctl_args_free) */
    int npos;
    int extra_argc;    /* passthrough: the arguments after `--` */
    char **extra_argv;
    bool help;         /* -h / --help: the parse stopped there */
};

/* Parses argv (the arguments after the command word) against spec, applying each option
 * to ctx[g] of the group g that holds it. 0; NPU_ERR_NOTFOUND for an unknown option (err
 * names the closest ones) or one that this command does not take; NPU_ERR_INVAL for a
 * missing or unwanted value or too many positional arguments; NPU_ERR_NOMEM; or the apply
 * function's status. Stops at -h / --help (args->help). */
int npuctl_opts_parse(const struct npuctl_cmd_spec *spec, void *const *ctx, int argc,
                      char **argv, struct npuctl_args *args, char *err, size_t errlen);
void npuctl_args_free(struct npuctl_args *args);
/* npuctl_opts_parse for the commands: prints a refusal ('npuctl: ...') and returns 0 to go
   on, or the exit status (0 after printing the help, 2 after a refusal) with *done set. */
int npuctl_opts_run(const struct npuctl_cmd_spec *spec, void *const *ctx, int argc,
                    char **argv, struct npuctl_args *args, bool *done);

/* The index of value among the words of opt's metavar "a|b|c", or -1: the options whose
   value is one of a few words keep the words in one place, the table. */
int npuctl_opt_word_index(const struct npuctl_opt *opt, const char *value);
/* Whether cmd takes opt. */
bool npuctl_opt_taken_by(const struct npuctl_opt *opt, enum npuctl_cmd_id cmd);
/* The options spec's command takes, in help order (-h/--help last); returns how many
   there are (at most max are stored). */
size_t npuctl_opts_list(const struct npuctl_cmd_spec *spec, const struct npuctl_opt **out,
                        size_t max);

/* The full usage: synopsis, description and every option with its default. */
void npuctl_opts_print_help(FILE *f, const struct npuctl_cmd_spec *spec);
/* The synopsis and the summary line (the command list of `npuctl help`). */
void npuctl_opts_print_brief(FILE *f, const struct npuctl_cmd_spec *spec);

/* ---- the usages (each defined beside its command's parser) */

extern const struct npuctl_cmd_spec npuctl_spec_run, npuctl_spec_selftest, npuctl_spec_debug,
    npuctl_spec_bench, npuctl_spec_bench_model, npuctl_spec_plan, npuctl_spec_build_image,
    npuctl_spec_flash, npuctl_spec_serve, npuctl_spec_trace_gen, npuctl_spec_trace_import,
    npuctl_spec_trace_show, npuctl_spec_compare, npuctl_spec_plot, npuctl_spec_test,
    npuctl_spec_chips, npuctl_spec_models, npuctl_spec_help, npuctl_spec_sweep;

/* The plan options (image_opts.c; context: struct npuctl_image_opts). */
extern const struct npuctl_opt_group npuctl_plan_group;

/* Every usage, in the order `npuctl help` lists them; returns the count. */
size_t npuctl_specs(const struct npuctl_cmd_spec *const **out);

#endif
