/* SPDX-License-Identifier: MIT */
/* npuctl compare / plot: their usages and plot's option (docs/outputs.md). */
#include "npuctl.h"

#include <stdio.h>

#include "opts.h"

static int parse_only_compare(int argc, char **argv, char *err, size_t errlen)
{
    struct npuctl_args args;
    int rc = npuctl_opts_parse(&npuctl_spec_compare, NULL, argc, argv, &args, err, errlen);
    npuctl_args_free(&args);
    return rc;
}

const struct npuctl_cmd_spec npuctl_spec_compare = {
    "compare", NPUCTL_CMD_COMPARE, "npuctl compare DIR...\n",
    "print the summaries of serving runs side by side",
    "  Print the summaries (DIR/summary.json) of serving runs side by side, one column a\n"
    "  run (docs/outputs.md).\n",
    { NULL }, false, -1, parse_only_compare,
};

static int apply_plot_out(void *ctx, const struct npuctl_opt *opt, const char *v, char *err,
                          size_t errlen)
{
    (void)opt, (void)err, (void)errlen;
    *(const char **)ctx = v;
    return 0;
}

static const struct npuctl_opt plot_table[] = {
    { "-o", "--out", "OUT", NULL,
      "the directory of the figures, data files and gnuplot scripts (default: the first "
      "DIR; created if missing)", 0, NPUCTL_CMD_BIT(NPUCTL_CMD_PLOT) },
};
static const struct npuctl_opt_group plot_group = {
    "plot options", plot_table, 1, apply_plot_out,
};

static int parse_only_plot(int argc, char **argv, char *err, size_t errlen)
{
    const char *out = NULL;
    void *const ctx[NPUCTL_GROUPS_MAX] = { &out };
    struct npuctl_args args;
    int rc = npuctl_opts_parse(&npuctl_spec_plot, ctx, argc, argv, &args, err, errlen);
    npuctl_args_free(&args);
    return rc;
}

const struct npuctl_cmd_spec npuctl_spec_plot = {
    "plot", NPUCTL_CMD_PLOT, "npuctl plot DIR... [-o OUT]\n",
    "draw SLO attainment against rate and TTFT/TBT CDFs with gnuplot",
    "  Draw SLO attainment against request rate and TTFT/TBT CDFs of serving runs with\n"
    "  gnuplot: a data file, a script and a figure each (docs/outputs.md).\n",
    { &plot_group }, false, -1, parse_only_plot,
};

int npuctl_plot_args(int argc, char **argv, char **dirs, int *ndirs, const char **out,
                     bool *done)
{
    void *const ctx[NPUCTL_GROUPS_MAX] = { out };
    struct npuctl_args args;
    *ndirs = 0;
    *out = NULL;
    int rc = npuctl_opts_run(&npuctl_spec_plot, ctx, argc, argv, &args, done);
    if (*done)
        return rc;
    for (int i = 0; i < args.npos; i++)
        dirs[(*ndirs)++] = args.pos[i];
    npuctl_args_free(&args);
    if (*ndirs == 0) {
        *done = true;
        npuctl_print_error("plot: give one or more serving output directories");
        return NPUCTL_EXIT_USAGE;
    }
    *out = *out ? *out : dirs[0];
    return 0;
}
