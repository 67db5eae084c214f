/* SPDX-License-Identifier: MIT */
/* npuctl sweep's runs (sweep_run.h): the plan from the grid, the run directories and
   sweep.json, the runs on this machine, and the GNU parallel / Slurm job files. */
#define _POSIX_C_SOURCE 200809L
#include "sweep_run.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "npu_enums.h"
#include "opts.h"

void sweep_list_grids(char *buf, size_t len)
{
    char dir[NPUCTL_PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/models/sweeps", npuctl_get_dir(NPUCTL_DIR_SOURCE));
    DIR *d = opendir(dir);
    size_t k = 0;
    buf[0] = '\0';
    for (struct dirent *e; d && (e = readdir(d));) {
        const size_t n = strlen(e->d_name);
        if (n > 6 && !strcmp(e->d_name + n - 6, ".sweep") && k < len)
            k += (size_t)snprintf(buf + k, len - k, "%s%.*s", k ? ", " : "", (int)(n - 6),
                                  e->d_name);
    }
    if (d)
        closedir(d);
}

/* mkdir -p */
static int make_dirs(const char *path)
{
    char p[NPUCTL_PATH_MAX];
    struct stat st;
    snprintf(p, sizeof(p), "%s", path);
    for (char *s = p + 1;; s++) {
        const char c = *s;
        if (c != '/' && c != '\0')
            continue;
        *s = '\0';
        if (mkdir(p, 0777) && (errno != EEXIST || stat(p, &st) || !S_ISDIR(st.st_mode)))
            return npuctl_usage_error("sweep: cannot make the directory %s: %s", p,
                                      strerror(errno == EEXIST ? ENOTDIR : errno));
        if (!c)
            return 0;
        *s = '/';
    }
}

/* One run's names and arguments, checked by serve's own parser. */
static int plan_job(struct sweep_plan *p, size_t i)
{
    struct sweep_job *j = &p->job[i];
    struct sweep_point pt;
    sweep_grid_point(p->grid, i, &pt);
    sweep_run_name(p->grid, &pt, j->name, sizeof(j->name));
    sweep_series_name(p->grid, &pt, j->series, sizeof(j->series));
    if (strlen(j->name) >= SWEEP_NAME_MAX)
        return npuctl_usage_error("sweep: run %.60s...: the name passes %u characters "
                                  "(shorter value labels: [LABEL])", j->name,
                                  SWEEP_NAME_MAX - 1);
    j->argv = sweep_run_args(p->grid, i, p->runs_dir, &j->argc);
    j->dir = malloc(strlen(p->runs_dir) + strlen(j->name) + 2);
    if (j->dir)
        sprintf(j->dir, "%s/%s", p->runs_dir, j->name);
    char **line = NULL;
    struct npuctl_argv a = { 0 };
    npuctl_argv_push(&a, "serve");
    for (int k = 0; j->argv && k < j->argc; k++)
        npuctl_argv_push(&a, j->argv[k]);
    if (!j->argv || !j->dir || npuctl_argv_finish(&a, &line) ||
        npuctl_quote_argv(line, &j->line)) {
        npuctl_free_argv(line);
        return npuctl_usage_error("sweep: out of memory");
    }
    npuctl_free_argv(line);
    char err[NPUCTL_ERR_MAX] = "";
    if (npuctl_spec_serve.parse_only(j->argc, j->argv, err, sizeof(err)))
        return npuctl_usage_error("sweep: run %s: %s%s", j->name,
                                  err[0] ? err : "serve refused its options (above)",
                                  err[0] ? " (npuctl serve --help)" : "");
    return 0;
}

/* A path made absolute and lexically normal (no "." or ".." parts, no repeated or trailing
   '/'), so that `--out d`, `--out d/` and `--out ./d` name the same runs: the path is part of
   each run's arguments, and other arguments make a run stale. 0, or -1 when too long. */
static int normal_path(const char *cwd, const char *path, char *out, size_t len)
{
    char buf[2 * NPUCTL_PATH_MAX + 2];
    const int n = path[0] == '/' ? snprintf(buf, sizeof(buf), "%s", path)
                                 : snprintf(buf, sizeof(buf), "%s/%s", cwd, path);
    if (n < 0 || (size_t)n >= sizeof(buf))
        return -1;
    size_t k = 0;
    for (char *save = NULL, *part = strtok_r(buf, "/", &save); part;
         part = strtok_r(NULL, "/", &save)) {
        if (!strcmp(part, "."))
            continue;
        if (!strcmp(part, "..")) {
            while (k > 0 && out[--k] != '/')
                ;
            continue;
        }
        const size_t pl = strlen(part);
        if (k + 1 + pl + 1 > len)
            return -1;
        out[k++] = '/';
        memcpy(out + k, part, pl);
        k += pl;
    }
    if (k == 0)
        out[k++] = '/';
    out[k] = '\0';
    return 0;
}

int sweep_plan_make(struct sweep_plan *p)
{
    const size_t n = sweep_grid_runs(p->grid);
    size_t prod = 1;
    for (int a = 0; a < p->grid->naxes && prod <= SWEEP_RUNS_MAX; a++)
        prod *= (size_t)p->grid->axes[a].nvalues;
    if (prod > SWEEP_RUNS_MAX)
        return npuctl_usage_error("sweep: the grid has more than %u runs", SWEEP_RUNS_MAX);
    if (!getcwd(p->cwd, sizeof(p->cwd)))
        return npuctl_usage_error("sweep: cannot read the working directory: %s",
                                  strerror(errno));
    if (normal_path(p->cwd, p->out, p->out_abs, sizeof(p->out_abs)) ||
        strlen(p->out_abs) + 8 + SWEEP_NAME_MAX + 32 >= sizeof(p->out_abs))
        return npuctl_usage_error("sweep: --out %s: the path is too long", p->out);
    snprintf(p->runs_dir, sizeof(p->runs_dir), "%.*s/runs", (int)(sizeof(p->runs_dir) - 8),
             p->out_abs);
    const ssize_t len = readlink("/proc/self/exe", p->npuctl, sizeof(p->npuctl) - 1);
    p->npuctl[len > 0 ? len : 0] = '\0';
    if (len <= 0)
        return npuctl_usage_error("sweep: cannot find this npuctl (/proc/self/exe)");
    if (!(p->job = calloc(n, sizeof(*p->job))))
        return npuctl_usage_error("sweep: out of memory");
    p->n = n;
    for (size_t i = 0; i < n; i++) {
        int rc = plan_job(p, i);
        if (rc)
            return rc;
    }
    return 0;
}

void sweep_plan_free(struct sweep_plan *p)
{
    for (size_t i = 0; p->job && i < p->n; i++) {
        npuctl_free_argv(p->job[i].argv);
        free(p->job[i].line);
        free(p->job[i].dir);
    }
    free(p->job);
    p->job = NULL;
}

int sweep_plan_print(const struct sweep_plan *p)
{
    printf("sweep %s: %zu runs into %s\n", p->grid->name, p->n, p->out);
    for (size_t i = 0; i < p->n; i++)
        printf("%s\n", p->job[i].line);
    return 0;
}

/* DIR/FILE (the plan's paths leave room for the file names) */
static const char *path_of(const char *dir, const char *file)
{
    static char buf[NPUCTL_PATH_MAX + SWEEP_NAME_MAX + 64];
    snprintf(buf, sizeof(buf), "%s/%s", dir, file);
    return buf;
}

/* Whether the text of the file is exactly text followed by a newline. */
static bool file_holds(const char *path, const char *text)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    const size_t n = strlen(text);
    char *buf = malloc(n + 2);
    const size_t got = buf ? fread(buf, 1, n + 2, f) : 0;
    const bool same = buf && got == n + 1 && !memcmp(buf, text, n) && buf[n] == '\n';
    free(buf);
    fclose(f);
    return same;
}

/* Whether DIR/summary.json is of a run that ended whole (sweep_run_status). */
static bool run_complete(const char *dir)
{
    json_t *s = json_load_file(path_of(dir, "summary.json"), 0, NULL);
    const bool whole = s && !strcmp(sweep_run_status(s), "ok");
    json_decref(s);
    return whole;
}

/* The run's directory and command.txt; the summary and log of a run that is not done (of
   other arguments, incomplete, or run again by --force) are removed first, so that no table
   shows them. */
static int prepare_job(const struct sweep_plan *p, struct sweep_job *j)
{
    int rc = make_dirs(j->dir);
    if (rc)
        return rc;
    char cmd[NPUCTL_PATH_MAX + SWEEP_NAME_MAX + 64];
    snprintf(cmd, sizeof(cmd), "%.*s/command.txt", (int)(sizeof(cmd) - 16), j->dir);
    const bool same = file_holds(cmd, j->line);
    j->done = same && !p->force && run_complete(j->dir);
    if (j->done)
        return 0;
    /* not done: its old figures go now, whatever becomes of the new run (serve --force
       removes the rest of its outputs when it starts) */
    for (int k = 0; k < 2; k++) {
        const char *old = path_of(j->dir, k ? "serve.log" : "summary.json");
        if (remove(old) && errno != ENOENT)
            return npuctl_usage_error("sweep: cannot remove %s: %s", old, strerror(errno));
    }
    if (same)
        return 0;
    FILE *f = fopen(cmd, "w");
    const bool bad = !f || fprintf(f, "%s\n", j->line) < 0;
    if ((f && fclose(f)) || bad)
        return npuctl_usage_error("sweep: cannot write %s", cmd);
    return 0;
}

/* The source tree's commit (and whether it had changes), or "unknown". */
static void source_commit(char *buf, size_t len)
{
    char *q = NULL, cmd[NPUCTL_PATH_MAX + 160];
    char *argv[] = { (char *)npuctl_get_dir(NPUCTL_DIR_SOURCE), NULL };
    snprintf(buf, len, "unknown");
    if (npuctl_quote_argv(argv, &q))
        return;
    snprintf(cmd, sizeof(cmd), "git -C %s rev-parse HEAD 2>/dev/null && git -C %s status "
             "--porcelain --untracked-files=no 2>/dev/null | head -n 1", q, q);
    free(q);
    FILE *f = popen(cmd, "r");
    char head[64] = "", dirty[8] = "";
    if (f && fgets(head, sizeof(head), f) && strlen(head) >= 41) {
        const bool changed = fgets(dirty, sizeof(dirty), f) != NULL;
        snprintf(buf, len, "%.40s%s", head, changed ? " (with uncommitted changes)" : "");
    }
    if (f)
        pclose(f);
}

static json_t *words_json(char *const *w, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_string(w[i]));
    return a;
}

static json_t *axes_json(const struct sweep_grid *g)
{
    json_t *axes = json_array();
    for (int a = 0; a < g->naxes; a++) {
        json_t *vals = json_array();
        for (int v = 0; v < g->axes[a].nvalues; v++)
            json_array_append_new(vals, json_pack("{s:s, s:o}", "label",
                g->axes[a].values[v].label, "words",
                words_json(g->axes[a].values[v].words, g->axes[a].values[v].nwords)));
        json_array_append_new(axes, json_pack("{s:s, s:s, s:o}", "option", g->axes[a].opt,
                                              "key", g->axes[a].key, "values", vals));
    }
    return axes;
}

/* OUT/sweep.json: the grid, the runs and where they come from. */
static int write_sweep_json(const struct sweep_plan *p)
{
    char commit[128], date[32];
    const time_t now = time(NULL);
    strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    source_commit(commit, sizeof(commit));
    json_t *runs = json_array();
    for (size_t i = 0; i < p->n; i++) {
        struct sweep_point pt;
        json_t *vals = json_array();
        sweep_grid_point(p->grid, i, &pt);
        for (int a = 0; a < p->grid->naxes; a++)
            json_array_append_new(vals, json_string(p->grid->axes[a].values[pt.idx[a]].label));
        json_array_append_new(runs, json_pack("{s:s, s:s, s:o, s:o}", "name", p->job[i].name,
            "series", p->job[i].series, "values", vals,
            "serve_args", words_json(p->job[i].argv, p->job[i].argc)));
    }
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:o, s:o}", "sweep", p->grid->name,
        "date", date, "commit", commit, "npuctl", p->npuctl, "cwd", p->cwd,
        "base", words_json(p->grid->base, p->grid->nbase), "axes", axes_json(p->grid),
        "runs", runs);
    const char *path = path_of(p->out_abs, "sweep.json");
    const int rc = o ? json_dump_file(o, path, JSON_INDENT(1) | JSON_PRESERVE_ORDER) : -1;
    json_decref(o);
    return rc ? npuctl_usage_error("sweep: cannot write %s", path) : 0;
}

int sweep_plan_prepare(struct sweep_plan *p)
{
    int rc = make_dirs(p->runs_dir);
    for (size_t i = 0; rc == 0 && i < p->n; i++)
        rc = prepare_job(p, &p->job[i]);
    return rc ? rc : write_sweep_json(p);
}

/* ---- the runs on this machine */

struct exec_ctx {
    struct sweep_plan *p;
    size_t ended, to_run;
    struct timespec t0[SWEEP_RUNS_MAX];
    char **argv[SWEEP_RUNS_MAX]; /* a running child's argv and log path, freed as it ends */
    char *log[SWEEP_RUNS_MAX];
};

static double since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + 1e-9 * (double)(t.tv_nsec - t0->tv_nsec);
}

static bool exec_start(void *ctx, size_t i, struct npuctl_spawn *sp)
{
    struct exec_ctx *x = ctx;
    struct sweep_job *j = &x->p->job[i];
    if (j->done)
        return false;
    struct npuctl_argv a = { 0 };
    npuctl_argv_push(&a, x->p->npuctl);
    npuctl_argv_push(&a, "serve");
    for (int k = 0; k < j->argc; k++)
        npuctl_argv_push(&a, j->argv[k]);
    x->log[i] = strdup(path_of(j->dir, "serve.log"));
    if (npuctl_argv_finish(&a, &x->argv[i]) || !x->log[i]) {
        npuctl_print_error("sweep: run %s: out of memory", j->name);
        free(x->log[i]);
        x->log[i] = NULL;
        return false;
    }
    *sp = (struct npuctl_spawn){ .argv = x->argv[i], .stdout_path = x->log[i],
                                 .stderr_too = true, .stdin_null = true };
    clock_gettime(CLOCK_MONOTONIC, &x->t0[i]);
    return true;
}

static void exec_ended(void *ctx, size_t i, const struct npuctl_child_exit *ex)
{
    struct exec_ctx *x = ctx;
    struct sweep_job *j = &x->p->job[i];
    j->wall_s = since(&x->t0[i]);
    x->ended++;
    if (ex->status == 0)
        printf("sweep: [%zu/%zu] %s: ended whole, %.1f s\n", x->ended, x->to_run, j->name,
               j->wall_s);
    else
        printf("sweep: [%zu/%zu] %s: exit %d after %.1f s (%s)\n", x->ended, x->to_run, j->name,
               ex->status, j->wall_s, x->log[i] ? x->log[i] : "no log");
    fflush(stdout);
    npuctl_free_argv(x->argv[i]);
    free(x->log[i]);
    x->argv[i] = NULL;
    x->log[i] = NULL;
}

int sweep_execute(struct sweep_plan *p)
{
    struct exec_ctx *x = calloc(1, sizeof(*x));
    if (!x)
        return npuctl_usage_error("sweep: out of memory");
    x->p = p;
    for (size_t i = 0; i < p->n; i++)
        x->to_run += !p->job[i].done;
    printf("sweep %s: %zu runs (%zu done already), %u at a time, into %s\n", p->grid->name,
           p->n, p->n - x->to_run, p->jobs, p->out);
    fflush(stdout);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const int sig = npuctl_spawn_pool(p->n, p->jobs, exec_start, exec_ended, x);
    free(x);
    if (sig) {
        npuctl_print_error("sweep: stopped by signal %d; the runs that ended are kept (run "
                           "the sweep again to go on)", sig);
        return 128 + sig;
    }
    printf("sweep %s: the runs took %.1f s of wall time\n", p->grid->name, since(&t0));
    return sweep_collect(p->out);
}

/* ---- job files for GNU parallel and Slurm */

static char *quote1(const char *s)
{
    char *argv[] = { (char *)s, NULL }, *q = NULL;
    return npuctl_quote_argv(argv, &q) ? NULL : q;
}

/* OUT/jobs.txt: one shell line a run, from the directory the sweep was given in. */
static int write_jobs(const struct sweep_plan *p, const char *path)
{
    FILE *f = fopen(path, "w");
    char *cwd = quote1(p->cwd), *bin = quote1(p->npuctl);
    int rc = f && cwd && bin ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < p->n; i++) {
        char *log = quote1(path_of(p->job[i].dir, "serve.log"));
        rc = log && fprintf(f, "cd %s && %s %s >%s 2>&1\n", cwd, bin, p->job[i].line, log) > 0
                 ? 0 : -1;
        free(log);
    }
    if (f && fclose(f))
        rc = -1;
    free(cwd);
    free(bin);
    return rc ? npuctl_usage_error("sweep: cannot write %s", path) : 0;
}

/* Whether the job files can hold the plan: 0, or a refusal (printed). */
static int emit_check(const struct sweep_plan *p, bool slurm)
{
    if (slurm && (strpbrk(p->out_abs, " \t\n'\"\\$`") || strpbrk(p->npuctl, "'\"\\$`")))
        return npuctl_usage_error("sweep --emit slurm: %s: #SBATCH lines and the collect "
                                  "hint cannot quote blanks, quotes or $; give a plain path",
                                  p->out_abs);
    for (size_t i = 0; i < p->n; i++) /* a job is one line of jobs.txt */
        if (strpbrk(p->job[i].line, "\n\r") || strpbrk(p->cwd, "\n\r"))
            return npuctl_usage_error("sweep --emit: run %s: a newline in its arguments or "
                                      "the working directory would split its job line",
                                      p->job[i].name);
    return 0;
}

/* The Slurm array script: task i runs line i of jobs.txt. */
static void write_sbatch(FILE *f, const struct sweep_plan *p, const char *script,
                         const char *jobs, const char *qjobs, const char *qbin)
{
    fprintf(f, "#!/bin/bash\n"
        "# Written by npuctl sweep --emit slurm: sweep %s, %zu runs, one a task of a job\n"
        "# array. Add your site's --partition, --account and --time lines below, submit,\n"
        "# and collect once the array has ended:\n"
        "#   jid=$(sbatch --parsable %s)\n"
        "#   sbatch --dependency=afterany:$jid --output=%s/slurm-collect-%%j.out \\\n"
        "#          --wrap \"%s sweep --collect --out %s\"\n"
        "# On a cluster, --out must be on storage every node shares.\n"
        "#SBATCH --job-name=sweep-%s\n#SBATCH --array=1-%zu\n#SBATCH --cpus-per-task=1\n"
        "#SBATCH --output=%s/slurm-%%A_%%a.out\n"
        "set -eu\n"
        "line=$(sed -n \"${SLURM_ARRAY_TASK_ID:?not a Slurm array task}p\" %s)\n"
        "[ -n \"$line\" ] || { echo \"sweep: no run $SLURM_ARRAY_TASK_ID in %s\" >&2; "
        "exit 2; }\n"
        "eval \"$line\"\n",
        p->grid->name, p->n, script, p->out_abs, qbin, p->out_abs, p->grid->name, p->n,
        p->out_abs, qjobs, jobs);
}

/* GNU parallel over jobs.txt, then the table. */
static void write_parallel(FILE *f, const struct sweep_plan *p, const char *qjobs,
                           const char *qbin, const char *qout)
{
    fprintf(f, "#!/bin/sh\n"
        "# Written by npuctl sweep --emit parallel: sweep %s, %zu runs through GNU\n"
        "# parallel (JOBS=N to bound them; default: one a CPU), then its table and plots.\n"
        "# On several machines: parallel's --sshloginfile, with this tree at the same path.\n"
        "parallel --jobs \"${JOBS:-100%%}\" --joblog %s/parallel.joblog < %s\n"
        "exec %s sweep --collect --out %s\n",
        p->grid->name, p->n, qout, qjobs, qbin, qout);
}

int sweep_emit(const struct sweep_plan *p, const char *kind)
{
    const bool slurm = !strcmp(kind, "slurm");
    int rc = emit_check(p, slurm);
    if (rc)
        return rc;
    char jobs[NPUCTL_PATH_MAX + 16], script[NPUCTL_PATH_MAX + 16];
    snprintf(jobs, sizeof(jobs), "%.*s/jobs.txt", NPUCTL_PATH_MAX, p->out_abs);
    snprintf(script, sizeof(script), "%.*s/%s", NPUCTL_PATH_MAX, p->out_abs,
             slurm ? "sweep.sbatch" : "parallel.sh");
    rc = write_jobs(p, jobs);
    char *qjobs = quote1(jobs), *qbin = quote1(p->npuctl), *qout = quote1(p->out_abs);
    FILE *f = rc == 0 && qjobs && qbin && qout ? fopen(script, "w") : NULL;
    if (f && slurm)
        write_sbatch(f, p, script, jobs, qjobs, qbin);
    else if (f)
        write_parallel(f, p, qjobs, qbin, qout);
    const bool bad = !f || ferror(f);
    if (rc == 0 && ((f && fclose(f)) || bad || chmod(script, 0755)))
        rc = npuctl_usage_error("sweep: cannot write %s", script);
    else if (f && rc)
        fclose(f);
    if (rc == 0)
        printf("sweep %s: %zu runs written to %s\n", p->grid->name, p->n, jobs);
    if (rc == 0 && slurm)
        printf("run them:\n  jid=$(sbatch --parsable %s)\n  sbatch --dependency=afterany:$jid "
               "--output=%s/slurm-collect-%%j.out --wrap \"%s sweep --collect --out %s\"\n",
               script, p->out_abs, qbin, p->out_abs);
    else if (rc == 0)
        printf("run them: %s\n", script);
    free(qjobs);
    free(qbin);
    free(qout);
    return rc;
}
