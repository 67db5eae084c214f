/* SPDX-License-Identifier: MIT */
/*
 * npuctl sweep's grid (host_tools/npuctl/sweep.h), pure: words split with quotes, the grid
 * file's lines and their refusals (each naming the file and line), value labels, the runs'
 * order, names and series, and the serve arguments of a run.
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "npu_enums.h"
#include "npuctl.h"
#include "sweep.h"

static char err[NPUCTL_ERR_MAX];

static void test_split_words(void **state)
{
    (void)state;
    char *w[8];
    int n = 0;
    assert_int_equal(sweep_split_words("  a 'b c'\t\"d \\\"e\\\"\" f''g ", w, 8, &n, err,
                                       sizeof(err)), NPU_OK);
    assert_int_equal(n, 4);
    assert_string_equal(w[0], "a");
    assert_string_equal(w[1], "b c");
    assert_string_equal(w[2], "d \"e\"");
    assert_string_equal(w[3], "fg");
    sweep_free_words(w, n);
    assert_int_equal(sweep_split_words("a 'b", w, 8, &n, err, sizeof(err)), NPU_ERR_FORMAT);
    assert_non_null(strstr(err, "quote is not closed"));
    assert_int_equal(sweep_split_words("a b c", w, 2, &n, err, sizeof(err)), NPU_ERR_RANGE);
    assert_int_equal(sweep_split_words("   ", w, 8, &n, err, sizeof(err)), NPU_OK);
    assert_int_equal(n, 0);
}

/* A grid of two axes, fixed arguments over two lines, comments and blank lines. */
static void load_two_axes(struct sweep_grid *g)
{
    static const char *const lines[] = {
        "# a comment", "", "name: demo", "serve: --model tiny-moe --mode performance",
        "serve: --trace 'a b.jsonl'   # the trace",
        "vary --sched: chunked | [lay-2] layered --groups 2",
        "vary request-rate: 10 | 100 | 1000",
    };
    memset(g, 0, sizeof(*g));
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
        assert_int_equal(sweep_grid_line(g, lines[i], "g.sweep:1", err, sizeof(err)), NPU_OK);
}

static void test_grid_lines(void **state)
{
    (void)state;
    static struct sweep_grid g;
    load_two_axes(&g);
    assert_string_equal(g.name, "demo");
    assert_int_equal(g.nbase, 6);
    assert_string_equal(g.base[5], "a b.jsonl");
    assert_int_equal(g.naxes, 2);
    assert_string_equal(g.axes[0].opt, "--sched");
    assert_string_equal(g.axes[0].key, "sched");
    assert_string_equal(g.axes[1].opt, "--request-rate"); /* dashes added */
    assert_int_equal(g.axes[0].nvalues, 2);
    assert_string_equal(g.axes[0].values[0].label, "chunked");
    assert_string_equal(g.axes[0].values[1].label, "lay-2");
    assert_int_equal(g.axes[0].values[1].nwords, 3);
    assert_string_equal(g.axes[1].values[2].label, "1000");
    assert_int_equal(sweep_grid_runs(&g), 6);
    sweep_grid_free(&g);
}

static void test_default_labels(void **state)
{
    (void)state;
    static struct sweep_grid g;
    memset(&g, 0, sizeof(g));
    assert_int_equal(sweep_grid_line(&g, "vary sched: layered --groups 2 | chunked --chunk=64",
                                     "x:1", err, sizeof(err)), NPU_OK);
    assert_string_equal(g.axes[0].values[0].label, "layered-groups-2");
    assert_string_equal(g.axes[0].values[1].label, "chunked-chunk-64");
    sweep_grid_free(&g);
}

static void expect_refused(const char *line, const char *what)
{
    static struct sweep_grid g;
    memset(&g, 0, sizeof(g));
    assert_int_equal(sweep_grid_line(&g, "vary seed: 1 | 2", "f.sweep:3", err, sizeof(err)),
                     NPU_OK);
    assert_int_not_equal(sweep_grid_line(&g, line, "f.sweep:4", err, sizeof(err)), NPU_OK);
    assert_non_null(strstr(err, "f.sweep:4"));
    if (!strstr(err, what))
        fail_msg("'%s': '%s' does not say '%s'", line, err, what);
    sweep_grid_free(&g);
}

static void test_grid_refusals(void **state)
{
    (void)state;
    expect_refused("varry sched: a", "expected 'name: NAME'");
    expect_refused("vary sched chunked", "expected 'vary OPTION");
    expect_refused("vary seed: 3", "varied twice");
    expect_refused("vary out: a | b", "its own");
    expect_refused("serve: --model x --out d", "its own --out");
    expect_refused("serve: --force", "its own --out");
    expect_refused("serve: --label run=x", "--label run=x: the sweep gives each run");
    expect_refused("vary sched: chunked --label=series=y", "--label series=y: the sweep");
    expect_refused("vary label: run=a | run=b", "--label run=a: the sweep gives");
    expect_refused("vary sched: chunked | layered --out d", "its own --out");
    expect_refused("vary sched: chunked | chunked", "two values labelled 'chunked'");
    expect_refused("vary sched: chunked || layered", "an empty value");
    expect_refused("vary sched: [a b] chunked", "a label is of");
    expect_refused("vary sched: [chunked chunked", "not closed");
    expect_refused("vary sched: 'chunked", "quote is not closed");
    expect_refused("name: a/b", "name: 'a/b'");
}

static void test_grid_file(void **state)
{
    (void)state;
    char path[] = "/tmp/test_sweep_XXXXXX";
    const int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs("serve: --mode performance\n\nvary seed: 1 | 2\nvary bogus line\n", f);
    fclose(f);
    static struct sweep_grid g;
    memset(&g, 0, sizeof(g));
    assert_int_equal(sweep_grid_load(&g, path, err, sizeof(err)), NPU_ERR_FORMAT);
    char where[64];
    snprintf(where, sizeof(where), "%s:4:", path);
    assert_non_null(strstr(err, where));
    char base[32]; /* the file's base name, '_' made '-' */
    snprintf(base, sizeof(base), "test-sweep-%s", path + 16);
    assert_string_equal(g.name, base);
    sweep_grid_free(&g);
    unlink(path);
    memset(&g, 0, sizeof(g));
    assert_int_equal(sweep_grid_load(&g, "/nonexistent/x.sweep", err, sizeof(err)),
                     NPU_ERR_IO);
    assert_non_null(strstr(err, "/nonexistent/x.sweep: cannot open"));
    sweep_grid_free(&g);
}

/* The first axis outermost; names key=label joined by '_'; the series drops the rate. */
static void test_points_and_names(void **state)
{
    (void)state;
    static struct sweep_grid g;
    load_two_axes(&g);
    char name[SWEEP_NAME_MAX + 1];
    struct sweep_point p;
    static const char *const want[6] = {
        "sched=chunked_request-rate=10", "sched=chunked_request-rate=100",
        "sched=chunked_request-rate=1000", "sched=lay-2_request-rate=10",
        "sched=lay-2_request-rate=100", "sched=lay-2_request-rate=1000",
    };
    for (size_t i = 0; i < 6; i++) {
        sweep_grid_point(&g, i, &p);
        sweep_run_name(&g, &p, name, sizeof(name));
        assert_string_equal(name, want[i]);
    }
    sweep_grid_point(&g, 4, &p);
    sweep_series_name(&g, &p, name, sizeof(name));
    assert_string_equal(name, "sched=lay-2");
    sweep_grid_free(&g);
    /* no axis but the rate: the series is the sweep's name */
    memset(&g, 0, sizeof(g));
    snprintf(g.name, sizeof(g.name), "solo");
    assert_int_equal(sweep_grid_line(&g, "vary request-rate: 1 | 2", "x:1", err, sizeof(err)),
                     NPU_OK);
    sweep_grid_point(&g, 1, &p);
    sweep_series_name(&g, &p, name, sizeof(name));
    assert_string_equal(name, "solo");
    sweep_grid_free(&g);
}

static void test_run_args(void **state)
{
    (void)state;
    static struct sweep_grid g;
    load_two_axes(&g);
    int argc = 0;
    char **argv = sweep_run_args(&g, 4, "/o/runs", &argc); /* lay-2, rate 100 */
    assert_non_null(argv);
    static const char *const want[] = {
        "--model", "tiny-moe", "--mode", "performance", "--trace", "a b.jsonl",
        "--sched", "layered", "--groups", "2", "--request-rate", "100",
        "--threads", "single", "--out", "/o/runs/sched=lay-2_request-rate=100", "--force",
        "--label=run=sched=lay-2_request-rate=100", "--label=series=sched=lay-2",
        "--label=sweep=demo",
    };
    assert_int_equal(argc, (int)(sizeof(want) / sizeof(want[0])));
    for (int i = 0; i < argc; i++)
        assert_string_equal(argv[i], want[i]);
    assert_null(argv[argc]);
    npuctl_free_argv(argv);
    /* a grid that sets --threads keeps it: no --threads single of the sweep's */
    char *threads[] = { "--threads", "multi" };
    static struct sweep_grid g2;
    memset(&g2, 0, sizeof(g2));
    assert_int_equal(sweep_grid_add_axis(&g2, "seed: 1 | 2 # not a comment", "--vary", err,
                                         sizeof(err)), NPU_OK);
    assert_string_equal(g2.axes[0].values[1].label, "2---not-a-comment"); /* '#' kept */
    assert_int_equal(sweep_grid_add_base(&g2, threads, 2, err, sizeof(err)), NPU_OK);
    argv = sweep_run_args(&g2, 0, "/o/runs", &argc);
    int nthreads = 0;
    for (int i = 0; i < argc; i++)
        nthreads += !strcmp(argv[i], "--threads");
    assert_int_equal(nthreads, 1);
    npuctl_free_argv(argv);
    sweep_grid_free(&g2);
    /* fixed arguments from the command line after --; --out there is refused */
    char *extra[] = { "--seed", "3" }, *owned[] = { "-o", "x" };
    assert_int_equal(sweep_grid_add_base(&g, extra, 2, err, sizeof(err)), NPU_OK);
    assert_int_equal(g.nbase, 8);
    assert_int_not_equal(sweep_grid_add_base(&g, owned, 2, err, sizeof(err)), NPU_OK);
    assert_non_null(strstr(err, "after --: -o"));
    sweep_grid_free(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_words),
        cmocka_unit_test(test_grid_lines),
        cmocka_unit_test(test_default_labels),
        cmocka_unit_test(test_grid_refusals),
        cmocka_unit_test(test_grid_file),
        cmocka_unit_test(test_points_and_names),
        cmocka_unit_test(test_run_args),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
