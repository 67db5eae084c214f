/* SPDX-License-Identifier: MIT */
/*
 * npuctl compare / plot (docs/outputs.md): read the output directories of serving runs
 * (summary.json, requests.csv, tokens.csv) back. compare prints one row per metric and one
 * column per run; plot writes gnuplot data and scripts into OUT and runs gnuplot on them,
 * so a figure can be restyled later by editing its script. A missing or broken input file
 * is an error naming it (exit 2), never a silently empty column.
 */
#define _POSIX_C_SOURCE 200809L
#include "npuctl.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "opts.h"
#include "rt/metrics.h"

struct run {
    const char *dir;
    json_t *sum;        /* DIR/summary.json */
    char label[208];    /* the column / curve title: labels.run, else sched (a label
                           value is at most 200 characters: nothing is cut) */
    char sched[208];    /* labels.sched, else the directory's name */
    char series[208];   /* the rate plots' line: labels.series, else sched */
    char base[208];     /* the directory's name: "runs/a/" -> "a" */
};

static const char *path_in(const char *dir, const char *name)
{
    static char p[4][NPUCTL_PATH_MAX];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof(p[k]), "%s/%s", dir, name);
    return p[k];
}

static const char *label_of(json_t *sum, const char *key)
{
    return json_string_value(json_object_get(json_object_get(sum, "labels"), key));
}

static int run_load(struct run *r, const char *dir)
{
    json_error_t je;
    const char *p = path_in(dir, "summary.json");
    r->dir = dir;
    r->sum = json_load_file(p, 0, &je);
    if (!r->sum) {
        npuctl_print_error("%s: %s%s", p, je.line > 0 ? "does not parse: " : "", je.text);
        return NPUCTL_EXIT_USAGE;
    }
    if (!json_is_number(json_object_get(r->sum, "completed"))) {
        npuctl_print_error("%s: not a serving summary (no \"completed\")", p);
        return NPUCTL_EXIT_USAGE;
    }
    if (!json_is_true(json_object_get(r->sum, "complete"))) { /* a failed or cut run */
        npuctl_print_error("%s: the run is incomplete (\"complete\": false): its figures "
                           "are a partial run's; serve it again", p);
        return NPUCTL_EXIT_USAGE;
    }
    char base[NPUCTL_PATH_MAX];
    snprintf(base, sizeof(base), "%s", dir);
    for (size_t n = strlen(base); n > 1 && base[n - 1] == '/'; n--)
        base[n - 1] = '\0';
    const char *slash = strrchr(base, '/'), *sched = label_of(r->sum, "sched");
    const char *run = label_of(r->sum, "run"), *series = label_of(r->sum, "series");
    snprintf(r->base, sizeof(r->base), "%.*s", (int)sizeof(r->base) - 1,
             slash && slash[1] ? slash + 1 : base);
    snprintf(r->sched, sizeof(r->sched), "%s", sched && *sched ? sched : r->base);
    snprintf(r->label, sizeof(r->label), "%s", run && *run ? run : r->sched);
    snprintf(r->series, sizeof(r->series), "%s", series && *series ? series : r->sched);
    return 0;
}

/* Loads every DIR; columns whose titles clash are titled by their directory. */
static int runs_load(struct run *runs, int n, char **dirs)
{
    for (int i = 0; i < n; i++)
        if (run_load(&runs[i], dirs[i]))
            return NPUCTL_EXIT_USAGE;
    bool *clash = calloc((size_t)n + 1, sizeof(*clash));
    if (!clash)
        return NPUCTL_EXIT_USAGE;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            clash[i] = clash[i] || (i != j && strcmp(runs[i].label, runs[j].label) == 0);
    for (int i = 0; i < n; i++)
        if (clash[i])
            snprintf(runs[i].label, sizeof(runs[i].label), "%s", runs[i].base);
    free(clash);
    return 0;
}

static void runs_free(struct run *runs, int n)
{
    for (int i = 0; i < n; i++)
        json_decref(runs[i].sum);
    free(runs);
}

json_t *npuctl_summary_get(json_t *sum, const char *key)
{
    const char *dot = strchr(key, '.');
    if (!dot)
        return json_object_get(sum, key);
    char obj[64];
    snprintf(obj, sizeof(obj), "%.*s", (int)(dot - key), key);
    return json_object_get(json_object_get(sum, obj), dot + 1);
}

static const struct compare_row {
    const char *title, *key;
    double scale;
    const char *fmt;
} compare_rows[] = {
    { "complete run", "complete", 1, "" },
    { "completed", "completed", 1, "%.0f" },
    { "rejected", "rejected", 1, "%.0f" },
    { "duration (s)", "duration", 1, "%.4f" },
    { "request throughput (req/s)", "request_throughput", 1, "%.3f" },
    { "output throughput (tok/s)", "output_throughput", 1, "%.2f" },
    { "TTFT mean (ms)", "mean_ttft_ms", 1, "%.3f" },
    { "TTFT p99 (ms)", "p99_ttft_ms", 1, "%.3f" },
    { "TBT mean (ms)", "tbt.mean", 1, "%.3f" },
    { "TBT p99 (ms)", "tbt.p99", 1, "%.3f" },
    { "TBT std (ms)", "tbt.std", 1, "%.3f" },
    { "SLO attainment (%)", "slo_attainment", 100, "%.1f" },
    { "Jain fairness", "jain_fairness", 1, "%.4f" },
    { "expert load (GB)", "expert_load_bytes", 1e-9, "%.4f" },
    { "HBM traffic (GB)", "hbm_bytes", 1e-9, "%.4f" },
    { "energy/token (mJ)", "energy_per_token_j", 1e3, "%.4f" },
    { "iterations", "iterations", 1, "%.0f" },
    { "prefix-cache hits (%)", "prefix_cache_hit_rate", 100, "%.1f" }, /* - without one */
};

static void compare_cell(const struct compare_row *row, json_t *v, int width)
{
    char cell[64] = "-";
    if (json_is_boolean(v))
        snprintf(cell, sizeof(cell), "%s", json_is_true(v) ? "yes" : "NO");
    else if (json_is_number(v))
        snprintf(cell, sizeof(cell), row->fmt, json_number_value(v) * row->scale);
    printf("  %*s", width, cell);
}

int npuctl_cmd_compare(int argc, char **argv)
{
    struct npuctl_args args;
    bool done;
    int rc = npuctl_opts_run(&npuctl_spec_compare, NULL, argc, argv, &args, &done);
    if (done)
        return rc;
    argc = args.npos, argv = args.pos; /* the directories */
    if (argc < 1) {
        npuctl_args_free(&args);
        npuctl_print_error("compare: give one or more serving output directories");
        return NPUCTL_EXIT_USAGE;
    }
    struct run *runs = calloc((size_t)argc, sizeof(*runs));
    if (!runs || runs_load(runs, argc, argv)) {
        runs_free(runs, runs ? argc : 0);
        npuctl_args_free(&args);
        return NPUCTL_EXIT_USAGE;
    }
    int width = 10;
    for (int i = 0; i < argc; i++)
        width = (int)strlen(runs[i].label) > width ? (int)strlen(runs[i].label) : width;
    printf("%-28s", "metric");
    for (int i = 0; i < argc; i++)
        printf("  %*s", width, runs[i].label);
    printf("\n");
    for (size_t r = 0; r < sizeof(compare_rows) / sizeof(compare_rows[0]); r++) {
        printf("%-28s", compare_rows[r].title);
        for (int i = 0; i < argc; i++)
            compare_cell(&compare_rows[r], npuctl_summary_get(runs[i].sum, compare_rows[r].key),
                         width);
        printf("\n");
    }
    runs_free(runs, argc);
    npuctl_args_free(&args);
    return 0;
}

/* ---- plot: data files and gnuplot scripts */

/* A title inside a gnuplot double-quoted string. */
static void gp_title(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++)
        fputc(*s == '"' || *s == '\\' ? '\'' : *s, f);
    fputc('"', f);
}

/* Starts a script: move to the script's directory (so it runs from anywhere), then
   pngcairo if gnuplot has it, else the gd png terminal, else SVG. */
static void gp_preamble(FILE *f, const char *name, const char *title, const char *xl,
                        const char *yl)
{
    fprintf(f, "# Written by npuctl plot: gnuplot %s.gp\n"
               "d = ARG0; i = strlen(d)\n"
               "while (i > 0 && d[i:i] ne \"/\") { i = i - 1 }\n"
               "if (i > 0) { cd d[1:i] }\n"
               "if (strstrt(GPVAL_TERMINALS, \" pngcairo \") > 0) {\n"
               "  set terminal pngcairo size 960,600 noenhanced; set output \"%s.png\"\n"
               "} else { if (strstrt(GPVAL_TERMINALS, \" png \") > 0) {\n"
               "  set terminal png size 960,600 noenhanced; set output \"%s.png\"\n"
               "} else {\n"
               "  set terminal svg size 960,600 noenhanced; set output \"%s.svg\"\n"
               "} }\n"
               "set title \"%s\"\nset xlabel \"%s\"\nset ylabel \"%s\"\nset grid\n",
            name, name, name, name, title, xl, yl);
}

/* The x of a run in the SLO plot: its request_rate label, else (no label, or 0 for a
   replayed trace's own timing) the measured rate. */
static double run_rate(const struct run *r)
{
    const char *lab = label_of(r->sum, "request_rate");
    char *end;
    double x = lab ? strtod(lab, &end) : 0.0;
    if (lab && end != lab && x > 0.0 && x < 1e300)
        return x;
    json_t *v = json_object_get(r->sum, "arrival_rate");
    return json_is_number(v) ? json_number_value(v) : 0.0;
}

struct rate_point {
    double x, y;
};

static int cmp_point(const void *a, const void *b)
{
    double x = ((const struct rate_point *)a)->x, y = ((const struct rate_point *)b)->x;
    return x < y ? -1 : x > y;
}

/* The x axis of the rate plots: logarithmic when the rates span a decade or more (a
   linear axis squeezes the low rates into its first tick). */
static bool gp_rate_axis(FILE *gp, const struct run *runs, int n)
{
    double lo = INFINITY, hi = 0;
    for (int i = 0; i < n; i++) {
        const double x = run_rate(&runs[i]);
        lo = x > 0 && x < lo ? x : lo;
        hi = x > hi ? x : hi;
    }
    const bool logx = hi > 0 && hi >= 10 * lo;
    if (logx)
        fprintf(gp, "set logscale x\nset offsets 0, 0, 0, 0\n"
                    "set xrange [%.9g:%.9g]\n", lo / 1.25, hi * 1.25);
    else
        fprintf(gp, "set offsets graph 0.03, graph 0.03, 0, 0\n");
    return logx;
}

/* One of the plots against request rate: the summary's `key` times `scale`. */
struct rate_plot {
    const char *name, *title, *ylabel, *key;
    double scale;
    bool from_zero; /* y from 0 (else gnuplot's own range) */
};

/* One block (gnuplot index) per series, points sorted by rate; a run whose value is not a
   number (no duration: no goodput) is left out. */
static void plot_rate(FILE *dat, FILE *gp, const struct rate_plot *p, const struct run *runs,
                      int n)
{
    struct rate_point *pts = calloc((size_t)n, sizeof(*pts));
    int block = 0;
    gp_preamble(gp, p->name, p->title, "request rate (req/s)", p->ylabel);
    const bool logx = gp_rate_axis(gp, runs, n);
    fprintf(gp, "%sset key bottom left\nplot", p->from_zero ? "set yrange [0:*]\n" : "");
    for (int i = 0; pts && i < n; i++) {
        bool first = true;
        for (int j = 0; j < i; j++)
            first = first && strcmp(runs[j].series, runs[i].series) != 0;
        if (!first)
            continue;
        int np = 0;
        for (int j = i; j < n; j++) {
            json_t *v = npuctl_summary_get(runs[j].sum, p->key);
            if (strcmp(runs[j].series, runs[i].series) == 0 && json_is_number(v))
                pts[np++] = (struct rate_point){ run_rate(&runs[j]),
                                                 p->scale * json_number_value(v) };
        }
        if (np == 0)
            continue; /* gnuplot refuses an empty index */
        qsort(pts, (size_t)np, sizeof(*pts), cmp_point);
        fprintf(dat, "%s# %s\n", block ? "\n\n" : "", runs[i].series);
        for (int k = 0; k < np; k++)
            fprintf(dat, "%.9g %.9g\n", pts[k].x, pts[k].y);
        fprintf(gp, "%s \"%s.dat\" index %d with linespoints title ", block ? "," : "",
                p->name, block);
        gp_title(gp, runs[i].series);
        block++;
    }
    if (block == 0) /* an empty frame (a log axis keeps its own range: 0 is not on it) */
        fprintf(gp, "%s NaN notitle", logx ? "" : " [0:1]");
    fprintf(gp, "\n");
    free(pts);
}

static const struct rate_plot rate_plots[] = {
    { "slo_rate", "SLO attainment against request rate", "SLO attainment (%)",
      "slo_attainment", 100, true },
    { "goodput_rate", "Goodput against request rate", "goodput (requests within the SLO / s)",
      "request_goodput", 1, true },
};

/* One block per run with samples: x = value, y = fraction of values <= x. */
static void plot_cdf(FILE *dat, FILE *gp, const char *name, const char *what,
                     const struct run *runs, const struct rt_samples *v, int n)
{
    char title[64], xl[64];
    snprintf(title, sizeof(title), "%s CDF", what);
    snprintf(xl, sizeof(xl), "%s (ms)", what);
    gp_preamble(gp, name, title, xl, "fraction");
    fprintf(gp, "set yrange [0:1.02]\nset offsets graph 0.03, graph 0.03, 0, 0\n"
                "set key bottom right\nplot");
    int block = 0;
    for (int i = 0; i < n; i++) {
        if (v[i].n == 0)
            continue; /* gnuplot refuses an empty index */
        fprintf(dat, "%s# %s\n%.9g 0\n", block ? "\n\n" : "", runs[i].label, v[i].v[0]);
        for (size_t k = 0; k < v[i].n; k++)
            fprintf(dat, "%.9g %.9g\n", v[i].v[k], (double)(k + 1) / (double)v[i].n);
        fprintf(gp, "%s \"%s.dat\" index %d with steps title ", block ? "," : "", name, block);
        gp_title(gp, runs[i].label);
        block++;
    }
    if (block == 0) /* keep the script valid: an empty frame says there was nothing */
        fprintf(gp, " [0:1] NaN notitle");
    fprintf(gp, "\n");
}

static FILE *open_out(const char *dir, const char *name)
{
    const char *p = path_in(dir, name);
    FILE *f = fopen(p, "w");
    if (!f)
        npuctl_print_error("%s: cannot create: %s", p, strerror(errno));
    return f;
}

static int close_out(const char *dir, const char *name, FILE *f)
{
    int bad = ferror(f);
    if (fclose(f) || bad) {
        npuctl_print_error("%s: write error", path_in(dir, name));
        return NPUCTL_EXIT_USAGE;
    }
    return 0;
}

/* NAME.dat and NAME.gp in out, filled by the plot (kind 0, 1: rate_plots[kind], 2: TTFT,
   3: TBT). */
static int plot_write(const char *out, const char *name, int kind, const struct run *runs,
                      const struct rt_samples *samples, int n)
{
    char dname[64], gname[64];
    snprintf(dname, sizeof(dname), "%s.dat", name);
    snprintf(gname, sizeof(gname), "%s.gp", name);
    FILE *dat = open_out(out, dname), *gp = dat ? open_out(out, gname) : NULL;
    if (!gp) {
        if (dat)
            fclose(dat);
        return NPUCTL_EXIT_USAGE;
    }
    if (kind < 2)
        plot_rate(dat, gp, &rate_plots[kind], runs, n);
    else
        plot_cdf(dat, gp, name, kind == 2 ? "TTFT" : "TBT", runs, samples, n);
    int rc = close_out(out, dname, dat);
    return close_out(out, gname, gp) || rc ? NPUCTL_EXIT_USAGE : 0;
}

static bool gnuplot_found(void)
{
    const char *path = getenv("PATH");
    char file[NPUCTL_PATH_MAX + 16];
    while (path && *path) {
        int len = (int)strcspn(path, ":");
        snprintf(file, sizeof(file), "%.*s/gnuplot", len ? len : 1, len ? path : ".");
        if (access(file, X_OK) == 0)
            return true;
        path += len + (path[len] == ':');
    }
    return false;
}

/* The script moves to its own directory, so the path is all gnuplot needs. */
static int plot_render(const char *out, const char *name)
{
    char script[NPUCTL_PATH_MAX + 80], file[80];
    snprintf(script, sizeof(script), "%s/%s.gp", out, name);
    for (int k = 0; k < 2; k++) { /* an old figure must not pass for the new one */
        snprintf(file, sizeof(file), "%s.%s", name, k ? "svg" : "png");
        unlink(path_in(out, file));
    }
    char *argv[] = { "gnuplot", script, NULL };
    struct npuctl_spawn sp = { .argv = argv, .search_path = true, .stdin_null = true };
    struct npuctl_child_exit ex;
    char err[NPUCTL_ERR_MAX];
    if (npuctl_spawn_wait(&sp, &ex, err, sizeof(err)) != 0 || ex.status != 0) {
        npuctl_print_error("plot: gnuplot failed on %s", script);
        return NPUCTL_EXIT_USAGE;
    }
    for (int k = 0; k < 2; k++) {
        snprintf(file, sizeof(file), "%s.%s", name, k ? "svg" : "png");
        if (access(path_in(out, file), R_OK) == 0)
            printf("plot: %s\n", path_in(out, file));
    }
    return 0;
}

static int plot_samples(const struct run *runs, int n, struct rt_samples *s)
{
    char err[NPUCTL_ERR_MAX];
    for (int i = 0; i < n; i++)
        if (metrics_read_latency_samples(path_in(runs[i].dir, "requests.csv"),
                                         path_in(runs[i].dir, "tokens.csv"), &s[2 * i],
                                         &s[2 * i + 1], err, sizeof(err))) {
            npuctl_print_error("plot: %s", err);
            return NPUCTL_EXIT_USAGE;
        }
    return 0;
}

#define NPLOTS 4
static int plot_all(const char *out, const struct run *runs, int n, struct rt_samples *s)
{
    static const char *const names[NPLOTS] = { "slo_rate", "goodput_rate", "ttft_cdf",
                                               "tbt_cdf" };
    struct rt_samples *per = calloc((size_t)n, sizeof(*per));
    int rc = per ? 0 : NPUCTL_EXIT_USAGE;
    if (mkdir(out, 0777) != 0 && errno != EEXIST) {
        npuctl_print_error("plot: cannot create %s: %s", out, strerror(errno));
        rc = NPUCTL_EXIT_USAGE;
    }
    for (int k = 0; rc == 0 && k < NPLOTS; k++) {
        for (int i = 0; k >= 2 && i < n; i++)
            per[i] = s[2 * i + (k - 2)];
        rc = plot_write(out, names[k], k, runs, per, n);
    }
    free(per);
    if (rc == 0 && !gnuplot_found()) {
        npuctl_print_error("plot: gnuplot is not in PATH (install gnuplot-nox); the data and "
                           "scripts are in %s", out);
        rc = NPUCTL_EXIT_USAGE;
    }
    for (int k = 0; rc == 0 && k < NPLOTS; k++)
        rc = plot_render(out, names[k]);
    return rc;
}

int npuctl_plot_dirs(const char *out, char **dirs, int n)
{
    struct run *runs = calloc((size_t)n + 1, sizeof(*runs));
    struct rt_samples *s = calloc(2 * (size_t)n + 1, sizeof(*s));
    int rc = runs && s ? runs_load(runs, n, dirs) : NPUCTL_EXIT_USAGE;
    rc = rc ? rc : plot_samples(runs, n, s);
    rc = rc ? rc : plot_all(out, runs, n, s);
    for (int i = 0; s && i < 2 * n; i++)
        metrics_samples_free(&s[i]);
    free(s);
    runs_free(runs, runs ? n : 0);
    return rc;
}

int npuctl_cmd_plot(int argc, char **argv)
{
    char **dirs = calloc((size_t)argc + 1, sizeof(*dirs));
    const char *out;
    bool done = false;
    int n = 0, rc = dirs ? npuctl_plot_args(argc, argv, dirs, &n, &out, &done) : 2;
    if (rc == 0 && !done)
        rc = npuctl_plot_dirs(out, dirs, n);
    free(dirs);
    return rc;
}
