/* SPDX-License-Identifier: MIT */
/*
 * npuctl sweep (docs/sweeps.md): a grid of serving runs (sweep.h) run on this machine, a
 * bounded number at a time, or written out as a GNU parallel job list and a Slurm array
 * script; then one table and the plots over the grid (sweep_table.c).
 *
 * OUT/sweep.json holds the grid and every run's serve arguments; OUT/runs/NAME/ is one
 * run's --out, with command.txt (its serve arguments, shell-quoted) and serve.log (its
 * terminal output). A run is done when its summary.json is complete and its command.txt is
 * the grid's: a sweep run again runs only what is not done (--force: everything), and a run
 * whose arguments changed loses its old summary before anything else happens, so a table
 * never shows figures of other arguments.
 */
#define _POSIX_C_SOURCE 200809L
#include "sweep_run.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "npu_enums.h"
#include "opts.h"

enum sweep_opt { SW_OUT, SW_VARY, SW_JOBS, SW_EMIT, SW_COLLECT, SW_DRY_RUN, SW_FORCE };

struct sweep_cli {
    const char *out, *emit;
    unsigned jobs;
    bool collect, dry_run, force;
    const char *vary[SWEEP_AXES_MAX];
    int nvary;
};

static int apply_sweep_opt(void *ctx, const struct npuctl_opt *opt, const char *v, char *err,
                           size_t errlen)
{
    struct sweep_cli *c = ctx;
    uint32_t n = 0;
    switch ((enum sweep_opt)opt->id) {
    case SW_OUT: c->out = v; return 0;
    case SW_VARY:
        if (c->nvary == (int)SWEEP_AXES_MAX) {
            snprintf(err, errlen, "--vary: at most %u axes", SWEEP_AXES_MAX);
            return NPU_ERR_RANGE;
        }
        c->vary[c->nvary++] = v;
        return 0;
    case SW_JOBS:
        if (npuctl_parse_u32(opt->name, v, 1, 256, &n))
            return NPUCTL_EXIT_USAGE;
        c->jobs = n;
        return 0;
    case SW_EMIT:
        if (npuctl_opt_word_index(opt, v) < 0) {
            snprintf(err, errlen, "--emit %s: parallel or slurm", v);
            return NPU_ERR_INVAL;
        }
        c->emit = v;
        return 0;
    case SW_COLLECT: c->collect = true; return 0;
    case SW_DRY_RUN: c->dry_run = true; return 0;
    case SW_FORCE: c->force = true; return 0;
    }
    return NPU_ERR_INVAL;
}

#define C_SWEEP NPUCTL_CMD_BIT(NPUCTL_CMD_SWEEP)

static const struct npuctl_opt sweep_table[] = {
    { "-o", "--out", "DIR", "sweep-out",
      "the sweep's directory: sweep.json, runs/NAME/ (each run's serve outputs), "
      "results.csv, results.md, plots/", SW_OUT, C_SWEEP },
    { "--vary", NULL, "'OPT: V | V ...'", NULL,
      "an axis of the grid, as a grid file's `vary` line: a serve option without its dashes "
      "and its values (repeatable; after the file's axes)",
      SW_VARY, C_SWEEP },
    { "-j", "--jobs", "N", NULL,
      "runs at a time on this machine (default: the CPUs this process may use; each run "
      "single-threaded unless the grid sets --threads)", SW_JOBS, C_SWEEP },
    { "--emit", NULL, "parallel|slurm", NULL,
      "run nothing: write OUT/jobs.txt (one shell line a run) and OUT/parallel.sh (GNU "
      "parallel) or OUT/sweep.sbatch (a Slurm array), then collect with --collect",
      SW_EMIT, C_SWEEP },
    { "--collect", NULL, NULL, NULL,
      "run nothing: make the table and plots from OUT/sweep.json and the runs present",
      SW_COLLECT, C_SWEEP },
    { "-n", "--dry-run", NULL, NULL,
      "print each run's serve command, check it, run and write nothing", SW_DRY_RUN, C_SWEEP },
    { "--force", NULL, NULL, NULL,
      "run again the runs that are already done", SW_FORCE, C_SWEEP },
};

static const struct npuctl_opt_group sweep_group = {
    "sweep options", sweep_table, sizeof(sweep_table) / sizeof(sweep_table[0]),
    apply_sweep_opt,
};

static int parse_only_sweep(int argc, char **argv, char *err, size_t errlen)
{
    struct sweep_cli c = { .out = "sweep-out" };
    void *const ctx[NPUCTL_GROUPS_MAX] = { &c };
    struct npuctl_args args;
    int rc = npuctl_opts_parse(&npuctl_spec_sweep, ctx, argc, argv, &args, err, errlen);
    npuctl_args_free(&args);
    return rc;
}

const struct npuctl_cmd_spec npuctl_spec_sweep = {
    "sweep", NPUCTL_CMD_SWEEP,
    "npuctl sweep [GRID] [OPTIONS] [-- SERVE-OPTIONS...]\n",
    "serve a grid of runs (rates, schedulers, chips, models, seeds) and tabulate them",
    "  Serve every point of a grid (docs/sweeps.md): GRID is a grid file, or the NAME of\n"
    "  models/sweeps/NAME.sweep; --vary adds axes and the words after -- are serve options\n"
    "  of every run. Each run is `npuctl serve` into OUT/runs/NAME (NAME from the axes'\n"
    "  values), at most --jobs at once; runs already done are kept. Then OUT/results.csv,\n"
    "  OUT/results.md and OUT/plots/ (SLO attainment and goodput against rate, TTFT and TBT\n"
    "  CDFs). --emit writes the same runs as a GNU parallel job list or a Slurm array.\n"
    "  Exit status: 0 when every run ended whole, 1 when one did not (the table says\n"
    "  which), 2 for a bad grid (its file and line named), a serve option refused or no\n"
    "  gnuplot for the plots, 128+N when signal N stopped it (the runs that ended kept).\n",
    { &sweep_group }, true, 1, parse_only_sweep,
};

/* GRID: a path (with '/' or ending in .sweep), else SRC/models/sweeps/NAME.sweep. */
static int find_grid(const char *grid, char *path, size_t len)
{
    const size_t n = strlen(grid);
    if (strchr(grid, '/') || (n > 6 && !strcmp(grid + n - 6, ".sweep"))) {
        snprintf(path, len, "%s", grid);
        return 0;
    }
    snprintf(path, len, "%s/models/sweeps/%s.sweep", npuctl_get_dir(NPUCTL_DIR_SOURCE), grid);
    if (access(path, F_OK) == 0)
        return 0;
    char names[1024] = "";
    sweep_list_grids(names, sizeof(names));
    return npuctl_usage_error("sweep: no grid '%s' (a file path, or one of: %s)", grid,
                              names[0] ? names : "none in models/sweeps");
}

/* The grid from GRID, --vary and the words after --. */
static int build_grid(const struct sweep_cli *c, const struct npuctl_args *args,
                      struct sweep_grid *g)
{
    char err[NPUCTL_ERR_MAX], path[NPUCTL_PATH_MAX];
    int rc = 0;
    if (args->npos == 1 && (rc = find_grid(args->pos[0], path, sizeof(path))))
        return rc;
    if (args->npos == 1)
        rc = sweep_grid_load(g, path, err, sizeof(err));
    if (!g->name[0])
        snprintf(g->name, sizeof(g->name), "sweep");
    for (int i = 0; rc == 0 && i < c->nvary; i++)
        rc = sweep_grid_add_axis(g, c->vary[i], "--vary", err, sizeof(err));
    if (rc == 0 && args->extra_argc)
        rc = sweep_grid_add_base(g, args->extra_argv, args->extra_argc, err, sizeof(err));
    if (rc)
        return npuctl_usage_error("sweep: %s", err);
    if (args->npos == 0 && g->naxes == 0)
        return npuctl_usage_error("sweep: give a GRID file or name, or --vary axes "
                                  "(npuctl sweep --help)");
    return 0;
}

int npuctl_cmd_sweep(int argc, char **argv)
{
    struct sweep_cli c = { .out = "sweep-out" };
    void *const ctx[NPUCTL_GROUPS_MAX] = { &c };
    struct npuctl_args args;
    bool done;
    int rc = npuctl_opts_run(&npuctl_spec_sweep, ctx, argc, argv, &args, &done);
    if (done)
        return rc;
    if (c.collect && (args.npos || c.nvary || args.extra_argc || c.emit || c.dry_run)) {
        npuctl_args_free(&args);
        return npuctl_usage_error("sweep --collect reads the grid from OUT/sweep.json: give "
                                  "only --out");
    }
    if (c.collect) {
        npuctl_args_free(&args);
        return sweep_collect(c.out);
    }
    if (!c.jobs) { /* one single-threaded run a CPU this process may use */
        const long cpus = npuctl_host_cpus();
        c.jobs = cpus < 1 ? 1 : cpus > 256 ? 256 : (unsigned)cpus;
    }
    static struct sweep_grid g; /* large: not on the stack */
    memset(&g, 0, sizeof(g));
    rc = build_grid(&c, &args, &g);
    struct sweep_plan p = { .grid = &g, .out = c.out, .jobs = c.jobs, .force = c.force };
    rc = rc ? rc : sweep_plan_make(&p);
    if (rc == 0 && c.dry_run)
        rc = sweep_plan_print(&p);
    else if (rc == 0)
        rc = sweep_plan_prepare(&p);
    if (rc == 0 && !c.dry_run)
        rc = c.emit ? sweep_emit(&p, c.emit) : sweep_execute(&p);
    sweep_plan_free(&p);
    sweep_grid_free(&g);
    npuctl_args_free(&args);
    return rc;
}
