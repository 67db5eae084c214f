/* SPDX-License-Identifier: MIT */
/* npuctl sweep's table and plots (sweep_run.h): OUT/sweep.json names the runs and their axis
   values; each run's summary.json gives a row of OUT/results.csv and OUT/results.md, and the
   whole runs go to `npuctl plot` into OUT/plots. Only chip-time figures are tabulated (the
   wall time of a run is in the sweep's terminal output), so a rerun gives the same table. */
#define _POSIX_C_SOURCE 200809L
#include "sweep_run.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A column of the table: the summary's key ("a.b" inside an object) times scale. */
static const struct column {
    const char *csv, *md, *key;
    double scale;
    const char *fmt; /* the markdown cell's */
} columns[] = {
    { "completed", "done", "completed", 1, "%.0f" },
    { "rejected", "rej", "rejected", 1, "%.0f" },
    { "request_throughput", "req/s", "request_throughput", 1, "%.3f" },
    { "output_throughput", "tok/s", "output_throughput", 1, "%.1f" },
    { "mean_ttft_ms", "TTFT mean ms", "mean_ttft_ms", 1, "%.2f" },
    { "p99_ttft_ms", "TTFT p99 ms", "p99_ttft_ms", 1, "%.2f" },
    { "mean_tbt_ms", "TBT mean ms", "tbt.mean", 1, "%.2f" },
    { "p99_tbt_ms", "TBT p99 ms", "tbt.p99", 1, "%.2f" },
    { "slo_attainment_pct", "SLO %", "slo_attainment", 100, "%.1f" },
    { "request_goodput", "goodput req/s", "request_goodput", 1, "%.3f" },
    { "energy_per_token_mj", "mJ/token", "energy_per_token_j", 1e3, "%.3f" },
    { "expert_load_gb", "expert GB", "expert_load_bytes", 1e-9, "%.3f" },
    { "duration_s", "chip s", "duration", 1, "%.4f" },
    { "iterations", "iters", "iterations", 1, "%.0f" },
    /* empty without a prefix cache (the summary's null) */
    { "prefix_hit_pct", "prefix hit %", "prefix_cache_hit_rate", 100, "%.1f" },
};
#define NCOLUMNS (sizeof(columns) / sizeof(columns[0]))


static double num(json_t *sum, const char *key)
{
    return json_number_value(json_object_get(sum, key));
}

const char *sweep_run_status(json_t *sum)
{
    const double total = num(sum, "num_prompts"), rejected = num(sum, "rejected");
    if (!json_is_true(json_object_get(sum, "complete")) || num(sum, "failed") > 0 ||
        num(sum, "completed") + rejected != total)
        return "incomplete";
    return total > 0 && rejected == total ? "all-rejected" : "ok";
}

/* One run's state: its summary (NULL if none) and a word for the table. */
struct row {
    json_t *sum;
    const char *status; /* ok, incomplete, failed, not-run */
    char dir[NPUCTL_PATH_MAX + SWEEP_NAME_MAX + 16];
};

static void row_load(struct row *r, const char *out, const char *name)
{
    char path[sizeof(r->dir) + 32];
    snprintf(r->dir, sizeof(r->dir), "%s/runs/%s", out, name);
    snprintf(path, sizeof(path), "%s/summary.json", r->dir);
    r->sum = json_load_file(path, 0, NULL);
    if (r->sum) {
        r->status = sweep_run_status(r->sum);
        return;
    }
    snprintf(path, sizeof(path), "%s/serve.log", r->dir);
    r->status = access(path, F_OK) == 0 ? "failed" : "not-run";
}

static void cell(FILE *f, const struct column *c, json_t *sum, bool md)
{
    json_t *v = sum ? npuctl_summary_get(sum, c->key) : NULL;
    if (!json_is_number(v)) {
        fputs(md ? " - |" : ",", f);
        return;
    }
    const double x = json_number_value(v) * c->scale;
    if (md) {
        fputc(' ', f);
        fprintf(f, c->fmt, x);
        fputs(" |", f);
    } else {
        fprintf(f, ",%.9g", x);
    }
}

/* The header lines of both tables. */
static void headers(FILE *csv, FILE *md, json_t *axes)
{
    size_t a;
    json_t *ax;
    fputs("run", csv);
    fputs("| run |", md);
    json_array_foreach(axes, a, ax) {
        fprintf(csv, ",%s", json_string_value(json_object_get(ax, "key")));
        fprintf(md, " %s |", json_string_value(json_object_get(ax, "key")));
    }
    fputs(",status", csv);
    fputs(" status |", md);
    for (size_t c = 0; c < NCOLUMNS; c++) {
        fprintf(csv, ",%s", columns[c].csv);
        fprintf(md, " %s |", columns[c].md);
    }
    fputs("\n", csv);
    fputs("\n|", md);
    for (size_t c = 0; c < NCOLUMNS + json_array_size(axes) + 2; c++)
        fputs(" --- |", md);
    fputs("\n", md);
}

static void table_row(FILE *csv, FILE *md, json_t *run, const struct row *r)
{
    size_t a;
    json_t *v;
    fprintf(csv, "%s", json_string_value(json_object_get(run, "name")));
    fprintf(md, "| %s |", json_string_value(json_object_get(run, "name")));
    json_array_foreach(json_object_get(run, "values"), a, v) {
        fprintf(csv, ",%s", json_string_value(v));
        fprintf(md, " %s |", json_string_value(v));
    }
    fprintf(csv, ",%s", r->status);
    fprintf(md, " %s |", r->status);
    for (size_t c = 0; c < NCOLUMNS; c++) {
        cell(csv, &columns[c], r->sum, false);
        cell(md, &columns[c], r->sum, true);
    }
    fputs("\n", csv);
    fputs("\n", md);
}

/* sweep.json's shape: the keys the table reads. */
static bool sweep_json_ok(json_t *s)
{
    size_t i;
    json_t *r;
    if (!json_is_array(json_object_get(s, "runs")) || !json_is_array(json_object_get(s, "axes")))
        return false;
    json_array_foreach(json_object_get(s, "runs"), i, r) {
        const char *name = json_string_value(json_object_get(r, "name"));
        if (!name || !*name || strchr(name, '/') || !strcmp(name, "..") ||
            json_array_size(json_object_get(r, "values")) !=
                json_array_size(json_object_get(s, "axes")))
            return false;
    }
    return true;
}

/* results.csv, results.md and the dirs of the whole runs (for the plots). */
static int write_tables(const char *out, json_t *s, struct row *rows, char **whole,
                        int *nwhole, size_t *bad)
{
    char pcsv[NPUCTL_PATH_MAX + 16], pmd[NPUCTL_PATH_MAX + 16];
    snprintf(pcsv, sizeof(pcsv), "%s/results.csv", out);
    snprintf(pmd, sizeof(pmd), "%s/results.md", out);
    FILE *csv = fopen(pcsv, "w"), *md = fopen(pmd, "w");
    if (csv && md) {
        fprintf(md, "# sweep %s\n\ncommit %s; %zu runs; chip-time figures (docs/sweeps.md)\n\n",
                json_string_value(json_object_get(s, "sweep")),
                json_string_value(json_object_get(s, "commit")),
                json_array_size(json_object_get(s, "runs")));
        headers(csv, md, json_object_get(s, "axes"));
    }
    size_t i;
    json_t *run;
    json_array_foreach(json_object_get(s, "runs"), i, run) {
        struct row *r = &rows[i];
        row_load(r, out, json_string_value(json_object_get(run, "name")));
        if (csv && md)
            table_row(csv, md, run, r);
        if (!strcmp(r->status, "ok"))
            whole[(*nwhole)++] = r->dir;
        else
            ++*bad;
    }
    const bool failed = !csv || !md || ferror(csv) || ferror(md);
    const bool c1 = csv && fclose(csv), c2 = md && fclose(md); /* both closed */
    return failed || c1 || c2 ? npuctl_usage_error("sweep: cannot write %s or %s", pcsv, pmd)
                           : 0;
}

/* No whole run: an earlier grid's figures must not stand beside this table. */
static void remove_plots(const char *dir)
{
    static const char *const names[] = { "slo_rate", "goodput_rate", "ttft_cdf", "tbt_cdf" };
    static const char *const exts[] = { "png", "svg", "dat", "gp" };
    char path[NPUCTL_PATH_MAX + 64];
    for (size_t i = 0; i < 4; i++)
        for (size_t k = 0; k < 4; k++) {
            snprintf(path, sizeof(path), "%s/%s.%s", dir, names[i], exts[k]);
            remove(path);
        }
}

int sweep_collect(const char *out)
{
    char path[NPUCTL_PATH_MAX + 32];
    json_error_t je;
    snprintf(path, sizeof(path), "%s/sweep.json", out);
    if (access(path, F_OK) != 0)
        return npuctl_usage_error("sweep: %s: no sweep here (npuctl sweep writes it)", path);
    json_t *s = json_load_file(path, 0, &je);
    if (!s || !sweep_json_ok(s)) {
        json_decref(s);
        return npuctl_usage_error("sweep: %s: %s", path, s ? "not a sweep's file (runs, "
                                  "axes)" : je.text);
    }
    const size_t n = json_array_size(json_object_get(s, "runs"));
    struct row *rows = calloc(n + 1, sizeof(*rows));
    char **whole = calloc(n + 1, sizeof(*whole));
    int nwhole = 0, rc = rows && whole ? 0 : npuctl_usage_error("sweep: out of memory");
    size_t bad = 0;
    if (rc == 0)
        rc = write_tables(out, s, rows, whole, &nwhole, &bad);
    if (rc == 0) {
        printf("sweep: %s/results.csv, %s/results.md: %zu runs, %zu not whole\n", out, out, n,
               bad);
        snprintf(path, sizeof(path), "%s/plots", out);
        if (nwhole > 0)
            rc = npuctl_plot_dirs(path, whole, nwhole);
        else
            remove_plots(path);
    }
    for (size_t i = 0; rows && i < n; i++)
        json_decref(rows[i].sum);
    free(rows);
    free(whole);
    json_decref(s);
    return rc ? rc : bad ? 1 : 0;
}
