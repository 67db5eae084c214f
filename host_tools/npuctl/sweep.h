/* SPDX-License-Identifier: MIT */
/*
 * npuctl sweep (docs/sweeps.md): a grid of serving runs. A grid is fixed serve arguments and
 * axes; an axis is one serve option with a list of values, a value being the option's value
 * and, optionally, further serve arguments that go with it ("layered --groups 2"). The runs
 * are the cartesian product of the axes, the first axis outermost.
 *
 * The grid file, line by line (`#` starts a comment):
 *
 *   name: tiny-moe-rates                        the sweep's name (default: the file's)
 *   serve: --model tiny-moe --num-prompts 16    fixed serve arguments (may repeat)
 *   vary request-rate: 50 | 100 | 200           an axis (the option's dashes optional)
 *   vary sched: chunked | [layered-2] layered --groups 2
 *
 * `[LABEL]` names a value in the run's name; without it the label is the value's words
 * joined by '-' (option dashes dropped). Words split at blanks; '...' and "..." group.
 * This file is pure (no process started, no file written) so the host tests check it.
 */
#ifndef NPUCTL_SWEEP_H
#define NPUCTL_SWEEP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define SWEEP_AXES_MAX 8u
#define SWEEP_VALUES_MAX 64u
#define SWEEP_RUNS_MAX 4096u
#define SWEEP_WORDS_MAX 256u    /* words of the fixed arguments, and of one value */
#define SWEEP_LABEL_MAX 48u     /* a value's label */
#define SWEEP_NAME_MAX 200u     /* a run's name: axis=label joined by '_' */

struct sweep_value {
    char label[SWEEP_LABEL_MAX + 1];
    char **words; /* the option's value, then further serve arguments (malloc'd) */
    int nwords;
};

struct sweep_axis {
    char opt[48]; /* "--request-rate" */
    const char *key; /* opt without its dashes: the run name's key and the table's column */
    struct sweep_value values[SWEEP_VALUES_MAX];
    int nvalues;
};

struct sweep_grid {
    char name[SWEEP_LABEL_MAX + 1];
    char **base; /* the fixed serve arguments (malloc'd) */
    int nbase;
    struct sweep_axis axes[SWEEP_AXES_MAX];
    int naxes;
};

/* A run of the grid: the value index on each axis. */
struct sweep_point {
    int idx[SWEEP_AXES_MAX];
};

/* Splits text into words (blanks separate; '...' and "..." group, \ escapes in "...").
   words is filled with malloc'd strings; 0, NPU_ERR_FORMAT (an open quote; err says so),
   NPU_ERR_RANGE (more than max words) or NPU_ERR_NOMEM. */
int sweep_split_words(const char *text, char **words, int max, int *n, char *err,
                      size_t errlen);
void sweep_free_words(char **words, int n);

/* One line of a grid file (without its newline); where ("FILE:LINE") prefixes a refusal.
   0 or a negative status with err. */
int sweep_grid_line(struct sweep_grid *g, const char *line, const char *where, char *err,
                    size_t errlen);
/* An axis as given on the command line ("OPT: V | V", no comment): as a `vary` line. */
int sweep_grid_add_axis(struct sweep_grid *g, const char *text, const char *where, char *err,
                        size_t errlen);
/* The grid file at path, line by line; its name defaults to the file's base name. */
int sweep_grid_load(struct sweep_grid *g, const char *path, char *err, size_t errlen);
/* Fixed serve arguments given on the command line (after `--`). */
int sweep_grid_add_base(struct sweep_grid *g, char *const *argv, int argc, char *err,
                        size_t errlen);
void sweep_grid_free(struct sweep_grid *g);

/* The number of runs (the product of the axes' lengths; 1 without axes). */
size_t sweep_grid_runs(const struct sweep_grid *g);
/* Run i's point (i < sweep_grid_runs). */
void sweep_grid_point(const struct sweep_grid *g, size_t i, struct sweep_point *p);
/* "sched=chunked_request-rate=50"; the grid's name without axes. */
void sweep_run_name(const struct sweep_grid *g, const struct sweep_point *p, char *buf,
                    size_t len);
/* The run's name without its --request-rate axis: the line it belongs to in the plots
   against rate (the grid's name if that leaves nothing). */
void sweep_series_name(const struct sweep_grid *g, const struct sweep_point *p, char *buf,
                       size_t len);
/* serve's arguments for run i (without the word "serve"): the fixed arguments, each axis's
   words, `--threads single` unless they set --threads (a sweep runs one QEMU a CPU), then
   --out DIR --force and the labels run, series and sweep. NULL-terminated,
   malloc'd (npuctl_free_argv); *argc set. NULL when out of memory. */
char **sweep_run_args(const struct sweep_grid *g, size_t i, const char *runs_dir, int *argc);

#endif
