/* SPDX-License-Identifier: MIT */
/*
 * npuctl bench gemm|dma|noc|collectives|m2n|host: runs a benchmark image (firmware/bench/) on the emulated
 * chip with its console captured, decodes the `BENCH kind key=value ...` lines the firmware
 * prints (rt/lines.h: a BENCH line that does not decode fails the run), and hands them to
 * the report of that benchmark (cmd_bench_report.c,
 * cmd_bench_host.c). The measuring and the analytical bounds are in the firmware; npuctl
 * only formats them and judges the targets. See docs/benchmarks.md.
 *
 * The console is captured by pointing npuctl's own stdout at a temporary file while QEMU
 * runs (QEMU inherits it); --raw copies it to stdout afterwards. Exit status: 0 when every
 * run succeeded (whether the targets are met or not), 2 for a bad argument or a failed
 * run (its console then goes to stderr), 124 when --timeout killed QEMU.
 */
#define _POSIX_C_SOURCE 200809L
#include "cmd_bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "npu_enums.h"
#include "rt/lines.h"

struct bench_kind {
    const char *name;
    const char *image;
    int (*report)(const struct bench_output *out);
};

static const struct bench_kind kinds[] = {
    { "gemm", "bench_gemm", bench_report_gemm },
    { "dma", "bench_dma", bench_report_dma },
    { "noc", "bench_noc", bench_report_noc },
    { "collectives", "bench_collectives", bench_report_coll },
    { "m2n", "bench_m2n", bench_report_m2n },
    { "host", "bench_host", NULL },
};

/* ---- records */

const char *bench_get(const struct bench_rec *r, const char *key)
{
    for (uint32_t i = 0; r && i < r->nkv; i++)
        if (strcmp(r->kv[i].key, key) == 0)
            return r->kv[i].val;
    return NULL;
}

const char *bench_str(const struct bench_rec *r, const char *key)
{
    const char *v = bench_get(r, key);
    return v ? v : "";
}

double bench_get_d(const struct bench_rec *r, const char *key)
{
    const char *v = bench_get(r, key);
    return v ? strtod(v, NULL) : 0.0;
}

uint64_t bench_get_u64(const struct bench_rec *r, const char *key)
{
    const char *v = bench_get(r, key);
    return v ? strtoull(v, NULL, 10) : 0;
}

bool bench_is(const struct bench_rec *r, const char *kind, const char *key, const char *val)
{
    if (strcmp(r->kind, kind) != 0)
        return false;
    const char *v = key ? bench_get(r, key) : NULL;
    return !key || (v && strcmp(v, val) == 0);
}

const struct bench_rec *bench_first(const struct bench_output *out, const char *kind)
{
    for (size_t i = 0; i < out->n; i++)
        if (strcmp(out->recs[i].kind, kind) == 0)
            return &out->recs[i];
    return NULL;
}

/* Copies at most size - 1 bytes of src and terminates dst. */
static void copy_text(char *dst, size_t size, const char *src)
{
    size_t n = strnlen(src, size - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* A decoded BENCH line (text: from BENCH on, with its newline) as a record. */
static void make_rec(const char *text, const struct lines_line *ln, struct bench_rec *r)
{
    memset(r, 0, sizeof(*r));
    copy_text(r->text, sizeof(r->text), text);
    copy_text(r->kind, sizeof(r->kind), lines_describe_kind(ln->kind)->event);
    for (uint32_t i = 0; i < ln->nwords && r->nkv < BENCH_KV_MAX; i++, r->nkv++) {
        copy_text(r->kv[r->nkv].key, sizeof(r->kv[0].key), ln->words[i].key);
        copy_text(r->kv[r->nkv].val, sizeof(r->kv[0].val), ln->words[i].val);
    }
}

static int push_rec(struct bench_output *out, const char *text, const struct lines_line *ln)
{
    if (out->n == out->cap) {
        size_t cap = out->cap ? 2 * out->cap : 64;
        struct bench_rec *recs = realloc(out->recs, cap * sizeof(*recs));
        if (!recs)
            return NPU_ERR_NOMEM;
        out->recs = recs;
        out->cap = cap;
    }
    make_rec(text, ln, &out->recs[out->n++]);
    return NPU_OK;
}

/* One console line: a BENCH line of a known kind into out (other lines and kinds are
   skipped). 0, or npuctl's exit status after printing why. */
static int take_line(struct bench_output *out, const char *line, size_t lineno,
                     struct lines_line *ln)
{
    const char *text = lines_find(line);
    enum lines_kind kind;
    char err[200];
    if (!text || lines_identify(text, &kind, NULL, 0) != NPU_OK ||
        strcmp(lines_describe_kind(kind)->prefix, "BENCH") != 0)
        return 0;
    if (lines_parse(text, ln, err, sizeof(err)) != NPU_OK) {
        npuctl_print_error("bench: console line %zu: %s", lineno, err);
        return NPUCTL_EXIT_USAGE;
    }
    if (push_rec(out, text, ln) != NPU_OK) {
        npuctl_print_error("out of memory");
        return NPUCTL_EXIT_USAGE;
    }
    return 0;
}

void bench_output_free(struct bench_output *out)
{
    free(out->recs);
    memset(out, 0, sizeof(*out));
}

/* Reads the captured console: BENCH lines into out (until one fails), everything to
   `echo` if not NULL. */
static int parse_console(FILE *f, struct bench_output *out, FILE *echo)
{
    char line[1024];
    size_t lineno = 0;
    int rc = 0;
    struct lines_line *ln = malloc(sizeof(*ln));
    if (!ln) {
        npuctl_print_error("out of memory");
        return NPUCTL_EXIT_USAGE;
    }
    rewind(f);
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        if (echo)
            fputs(line, echo);
        if (rc == 0)
            rc = take_line(out, line, lineno, ln);
    }
    free(ln);
    return rc;
}

/* ---- running an image */

/* Chip config, mesh check, image pair and QEMU: what run's prepare_launch does. */
static int bench_prepare(const struct npuctl_run_opts *o, struct chip_config *cfg,
                         struct npuctl_files *files)
{
    char err[NPUCTL_ERR_MAX];
    uint32_t rows, cols;
    if (npuctl_load_chip(o->chip, cfg, files->chip_path, sizeof(files->chip_path), err,
                         sizeof(err))) {
        npuctl_print_error("%s", err);
        return NPUCTL_EXIT_USAGE;
    }
    npuctl_get_mesh(o, cfg, &rows, &cols);
    if (chip_config_check_mesh(rows, cols, err, sizeof(err)) ||
        npuctl_resolve_images(o, npuctl_get_dir(NPUCTL_DIR_FIRMWARE), files, err,
                              sizeof(err))) {
        npuctl_print_error("%s (build the firmware: cmake --build build)", err);
        return NPUCTL_EXIT_USAGE;
    }
    snprintf(files->qemu, sizeof(files->qemu), "%s", npuctl_get_dir(NPUCTL_PATH_QEMU));
    return 0;
}

/* Runs argv with npuctl's stdout pointed at `capture`; measures the wall-clock time. 0 and
 * the run's exit status in *status, or npuctl's exit status after printing why. */
static int spawn_captured(const struct npuctl_run_opts *o, char **argv, FILE *capture,
                          double *wall_s, int *status)
{
    struct npuctl_spawn sp = { .argv = argv, .own_group = true, .stdin_null = true,
                               .timeout_s = o->timeout_s };
    struct npuctl_child_exit ex = { 0, 0 };
    char err[NPUCTL_ERR_MAX];
    struct timespec t0, t1;
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    if (saved < 0 || dup2(fileno(capture), STDOUT_FILENO) < 0) {
        npuctl_print_error("bench: cannot redirect the console to a temporary file");
        return NPUCTL_EXIT_USAGE;
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = npuctl_spawn_wait(&sp, &ex, err, sizeof(err));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    *wall_s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    if (rc == NPU_ERR_TIMEOUT) {
        npuctl_print_error("bench: the run exceeded --timeout %u s; QEMU killed", o->timeout_s);
        return NPUCTL_EXIT_TIMEOUT;
    }
    if (rc) {
        npuctl_print_error("%s (set %s, or build the 'qemu' target)", err,
                           npuctl_dir_env_name(NPUCTL_PATH_QEMU));
        return NPUCTL_EXIT_USAGE;
    }
    *status = ex.status;
    return 0;
}

/* The options of one launch: the image, the mesh, the mode and -append BOOTARGS. */
static char **launch_opts(const struct npuctl_run_opts *o, const struct bench_launch *l,
                          struct npuctl_run_opts *run)
{
    char **extra = calloc((size_t)o->extra_argc + 3, sizeof(*extra));
    if (!extra)
        return NULL;
    *run = *o;
    run->mode = NPUCTL_MODE_RUN;
    run->image = l->image;
    run->machine_mode = l->mode;
    if (l->mesh_set) {
        run->mesh_set = true;
        run->mesh_rows = l->rows;
        run->mesh_cols = l->cols;
    }
    int n = 0;
    if (l->bootargs && *l->bootargs) {
        extra[n++] = "-append";
        extra[n++] = (char *)l->bootargs;
    }
    for (int i = 0; i < o->extra_argc; i++)
        extra[n++] = o->extra_argv[i];
    run->extra_argc = n;
    run->extra_argv = extra;
    return extra;
}

/* After a failed run: why, and its console on stderr. */
static int report_failed_run(const struct bench_launch *l, int status, FILE *capture)
{
    struct bench_output ignored = { 0 };
    fflush(stdout);
    fprintf(stderr, "---- console of the failed run ----\n");
    parse_console(capture, &ignored, stderr);
    bench_output_free(&ignored);
    npuctl_print_error("bench: image %s (bootargs '%s') ended with status %d", l->image,
                       l->bootargs ? l->bootargs : "", status);
    return NPUCTL_EXIT_USAGE;
}

static int run_prepared(const struct npuctl_run_opts *run, const struct bench_launch *l,
                        char **qemu, struct bench_output *out)
{
    FILE *capture = tmpfile();
    if (!capture) {
        npuctl_print_error("bench: cannot create a temporary file for the console");
        return NPUCTL_EXIT_USAGE;
    }
    int status = 0;
    int rc = spawn_captured(run, qemu, capture, &out->wall_s, &status);
    if (rc == 0 && status != 0)
        rc = report_failed_run(l, status, capture);
    else if (rc == 0)
        rc = parse_console(capture, out, run->bench_raw ? stdout : NULL);
    fclose(capture);
    return rc;
}

static int print_cmd(char **qemu, struct bench_output *out)
{
    char *line = NULL;
    if (npuctl_quote_argv(qemu, &line)) {
        npuctl_print_error("out of memory");
        return NPUCTL_EXIT_USAGE;
    }
    printf("%s\n", line);
    free(line);
    out->printed = true;
    return 0;
}

int bench_run_image(const struct npuctl_run_opts *o, const struct bench_launch *l,
                    struct bench_output *out)
{
    struct npuctl_run_opts run;
    struct chip_config cfg;
    struct npuctl_files files;
    char **qemu = NULL;
    memset(out, 0, sizeof(*out));
    char **extra = launch_opts(o, l, &run);
    if (!extra) {
        npuctl_print_error("out of memory");
        return NPUCTL_EXIT_USAGE;
    }
    int rc = bench_prepare(&run, &cfg, &files);
    if (rc == 0 && npuctl_build_qemu_argv(&run, &cfg, &files, &qemu)) {
        npuctl_print_error("out of memory");
        rc = NPUCTL_EXIT_USAGE;
    }
    if (rc == 0)
        rc = o->print_cmd ? print_cmd(qemu, out) : run_prepared(&run, l, qemu, out);
    npuctl_free_argv(qemu);
    free(extra);
    return rc;
}

/* ---- shared report pieces */

const char *bench_verdict(bool met)
{
    return met ? "met" : "NOT met";
}

void bench_print_chip(const struct bench_output *out, const char *what)
{
    const struct bench_rec *c = bench_first(out, "chip");
    printf("npuctl bench %s: chip %s, %sx%s mesh, %s MHz (%s ps per cycle), %s mode, "
           "command %s cycles\n", what, bench_str(c, "name"), bench_str(c, "rows"),
           bench_str(c, "cols"), bench_str(c, "freq_mhz"), bench_str(c, "cycle_ps"),
           bench_str(c, "mode"), bench_str(c, "cmd_cycles"));
}

size_t bench_print_notes(const struct bench_output *out)
{
    size_t n = 0;
    for (size_t i = 0; i < out->n; i++) {
        const char *k = out->recs[i].kind;
        if (strcmp(k, "skip") == 0 || strcmp(k, "warn") == 0 || strcmp(k, "error") == 0) {
            printf("note: %s", out->recs[i].text + strlen("BENCH "));
            n++;
        }
    }
    return n;
}

/* ---- the command */

static const struct bench_kind *find_kind(const char *name)
{
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        if (strcmp(kinds[i].name, name) == 0)
            return &kinds[i];
    return NULL;
}

bool npuctl_bench_is_kind(const char *name)
{
    return find_kind(name) != NULL;
}

static int bench_one_image(const struct npuctl_run_opts *o, const struct bench_kind *k)
{
    struct bench_launch l = {
        .image = k->image, .bootargs = o->bench_quick ? "quick" : NULL,
        .mode = o->machine_mode == NPUCTL_MACHINE_DEFAULT ? NPUCTL_MACHINE_PERFORMANCE
                                                          : o->machine_mode,
    };
    struct bench_output out;
    int rc = bench_run_image(o, &l, &out);
    if (rc == 0 && !out.printed)
        rc = k->report(&out);
    bench_output_free(&out);
    return rc;
}

int npuctl_cmd_bench(int argc, char **argv)
{
    if (argc > 0 && !strcmp(argv[0], "model"))
        return bench_model(argc - 1, argv + 1);
    struct npuctl_run_opts o;
    char err[NPUCTL_ERR_MAX];
    if (npuctl_parse_run_args(NPUCTL_MODE_BENCH, argc, argv, &o, err, sizeof(err))) {
        npuctl_print_error("%s", err);
        return NPUCTL_EXIT_USAGE;
    }
    if (o.help) {
        npuctl_print_usage(stdout, "bench");
        return 0;
    }
    if (strcmp(o.image, "model") == 0) /* bench model has options of its own */
        return npuctl_usage_error("bench: 'model' must come right after bench: npuctl bench "
                                  "model --model NAME|PATH [OPTIONS] (npuctl bench model "
                                  "--help)");
    const struct bench_kind *k = find_kind(o.image);
    if (!k) {
        static const char *const names[] = { "gemm", "dma", "noc", "collectives", "m2n",
                                             "host", "model" };
        char hint[160];
        npuctl_format_suggestion(o.image, names, sizeof(names) / sizeof(names[0]), hint,
                                 sizeof(hint));
        npuctl_print_error("bench: unknown benchmark '%s'%s (gemm, dma, noc, collectives, "
                           "m2n or host; model right after bench)", o.image, hint);
        return NPUCTL_EXIT_USAGE;
    }
    if (o.bench_repeat && k->report) {
        npuctl_print_error("bench %s: --repeat applies to bench host only (chip time is "
                           "deterministic)", k->name);
        return NPUCTL_EXIT_USAGE;
    }
    return k->report ? bench_one_image(&o, k) : bench_host(&o);
}
