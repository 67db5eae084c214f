/* SPDX-License-Identifier: MIT */
/* npuctl sweep's runs (sweep_run.c) and table (sweep_table.c): what cmd_sweep.c calls. Each
   function prints what went wrong and returns 0 or an exit status. */
#ifndef NPUCTL_SWEEP_RUN_H
#define NPUCTL_SWEEP_RUN_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "npuctl.h"
#include "sweep.h"

/* One run of the plan. */
struct sweep_job {
    char name[SWEEP_NAME_MAX + 1], series[SWEEP_NAME_MAX + 1];
    char **argv;   /* serve's arguments, NULL-terminated (npuctl_free_argv) */
    int argc;
    char *line;    /* "serve ARGS", shell-quoted: the run's command.txt */
    char *dir;     /* OUT/runs/NAME, absolute */
    bool done;     /* complete, of these arguments, kept (not --force) */
    double wall_s; /* this sweep's wall time of the run */
};

struct sweep_plan {
    struct sweep_grid *grid;
    const char *out;  /* --out as given */
    unsigned jobs;    /* runs at a time */
    bool force;
    char out_abs[NPUCTL_PATH_MAX], runs_dir[NPUCTL_PATH_MAX], cwd[NPUCTL_PATH_MAX];
    char npuctl[NPUCTL_PATH_MAX]; /* this npuctl, by its absolute path */
    struct sweep_job *job;
    size_t n;
};

/* The runs of p->grid: names, serve arguments, each checked by serve's parser. */
int sweep_plan_make(struct sweep_plan *p);
void sweep_plan_free(struct sweep_plan *p);
/* --dry-run: each run's command line. */
int sweep_plan_print(const struct sweep_plan *p);
/* OUT, OUT/runs/NAME/command.txt and OUT/sweep.json; which runs are done. */
int sweep_plan_prepare(struct sweep_plan *p);
/* Runs what is not done, p->jobs at a time, then collects. */
int sweep_execute(struct sweep_plan *p);
/* --emit parallel|slurm: OUT/jobs.txt and OUT/parallel.sh or OUT/sweep.sbatch. */
int sweep_emit(const struct sweep_plan *p, const char *kind);
/* The table and plots of OUT from OUT/sweep.json: 0 when every run is whole, 1 when one is
   not (or is missing), NPUCTL_EXIT_USAGE when OUT has no sweep. */
int sweep_collect(const char *out);
/* A run's state from its summary.json, by serve's own test of a whole run (cmd_serve.c,
   report()): "ok" (it ran, every request ended finished or rejected, not every one
   rejected), "all-rejected", or "incomplete" (it stopped early, or requests failed). */
const char *sweep_run_status(json_t *summary);
/* The NAMEs of SRC/models/sweeps/NAME.sweep, comma-separated, into buf. */
void sweep_list_grids(char *buf, size_t len);

#endif
