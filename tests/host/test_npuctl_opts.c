/* SPDX-License-Identifier: MIT */
/*
 * npuctl's option tables (host_tools/npuctl/opts.h) against what the commands parse:
 * - the edit distance and the "did you mean" suggestions;
 * - for every command's usage: its help lists every option its own parser accepts (and
 *   each default), every option line of the help is accepted by that parser, an unknown
 *   option is refused naming the closest one, a value-taking option without its value (at
 *   the end, or followed by another option) is refused, and a flag given a value is;
 * - each default the help prints is the parser's default: parsing `--opt DEFAULT` gives
 *   what parsing nothing gives (serve, plan, build-image, bench model,
 *   run/selftest/debug/bench/flash, trace gen);
 * - unknown model and chip names name the closest known ones.
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ctype.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd_bench.h"
#include "npu_enums.h"
#include "npuctl.h"
#include "opts.h"
#include "serve_opts.h"
#include "trace_opts.h"

#define OPTS_MAX 128u

static char err[NPUCTL_ERR_MAX];

/* ---- edit distance and suggestions */

static void test_edit_distance(void **state)
{
    (void)state;
    assert_int_equal(npuctl_edit_distance("", ""), 0);
    assert_int_equal(npuctl_edit_distance("abc", ""), 3);
    assert_int_equal(npuctl_edit_distance("", "abcd"), 4);
    assert_int_equal(npuctl_edit_distance("serve", "serve"), 0);
    assert_int_equal(npuctl_edit_distance("kitten", "sitting"), 3);
    assert_int_equal(npuctl_edit_distance("sreve", "serve"), 1); /* a transposition */
    assert_int_equal(npuctl_edit_distance("ca", "abc"), 3);      /* OSA, not full Damerau */
    assert_int_equal(npuctl_edit_distance("tiny-mo", "tiny-moe"), 1);
    assert_int_equal(npuctl_edit_distance("Large-64", "large-64"), 0); /* case-insensitive */
    assert_int_equal(npuctl_edit_distance("qwen3-30b", "qwen3-32b"), 1);
    /* beyond 64 characters only the first 64 count */
    char a[200], b[200];
    memset(a, 'x', sizeof(a) - 1), a[sizeof(a) - 1] = '\0';
    memset(b, 'x', sizeof(b) - 1), b[sizeof(b) - 1] = '\0';
    b[150] = 'y';
    assert_int_equal(npuctl_edit_distance(a, b), 0);
    b[10] = 'y';
    assert_int_equal(npuctl_edit_distance(a, b), 1);
}

static void test_suggest(void **state)
{
    (void)state;
    static const char *const models[] = { "dbrx", "qwen3-30b-a3b", "qwen3-32b", "qwen3-8b",
                                          "tiny-dense", "tiny-moe" };
    const char *out[4];
    size_t n = npuctl_suggest("tiny-mo", models, 6, out, 4);
    assert_int_equal(n, 1);
    assert_string_equal(out[0], "tiny-moe");
    /* a prefix is one edit away: the name the user began, beside the one-letter slip */
    n = npuctl_suggest("qwen3-30b", models, 6, out, 4);
    assert_int_equal(n, 2);
    assert_string_equal(out[0], "qwen3-30b-a3b");
    assert_string_equal(out[1], "qwen3-32b");
    assert_int_equal(npuctl_suggest("mixtral", models, 6, out, 4), 0);
    assert_int_equal(npuctl_suggest("tiny-moe", models, 6, out, 4), 0); /* itself: none */
    assert_int_equal(npuctl_suggest("qwen3-30b", models, 6, out, 1), 1); /* at most max */
    static const char *const opts[] = { "--chip", "--chunk", "--sched", "--timeout",
                                        "--chunk" };
    assert_int_equal(npuctl_suggest("--chunk-size", opts, 5, out, 4), 1); /* once */
    assert_string_equal(out[0], "--chunk");
    assert_int_equal(npuctl_suggest("--tmeout", opts, 5, out, 4), 1);
    assert_string_equal(out[0], "--timeout");
    assert_int_equal(npuctl_suggest("--x", opts, 5, out, 4), 0);
    char buf[128];
    npuctl_format_suggestion("tiny-mo", models, 6, buf, sizeof(buf));
    assert_string_equal(buf, "; did you mean tiny-moe?");
    npuctl_format_suggestion("qwen3-30b", models, 6, buf, sizeof(buf));
    assert_string_equal(buf, "; did you mean qwen3-30b-a3b or qwen3-32b?");
    static const char *const three[] = { "gemm", "gems", "dma", "gemo" };
    npuctl_format_suggestion("gemx", three, 4, buf, sizeof(buf));
    assert_string_equal(buf, "; did you mean gemm, gems or gemo?");
    npuctl_format_suggestion("zzzz", three, 4, buf, sizeof(buf));
    assert_string_equal(buf, "");
}

/* A word longer than the distance reads (64 characters) names nothing: compared by its
   first 64 against a limit of its whole length, it found every short name. */
static void test_suggest_long_word(void **state)
{
    (void)state;
    static const char *const commands[] = { "run", "selftest", "debug", "bench", "serve" };
    const char *out[4];
    char word[201];
    memset(word, 'x', sizeof(word) - 1), word[sizeof(word) - 1] = '\0';
    assert_int_equal(npuctl_suggest(word, commands, 5, out, 4), 0);
    memcpy(word, "serve", 5); /* nor by beginning with a name */
    assert_int_equal(npuctl_suggest(word, commands, 5, out, 4), 0);
    word[64] = '\0'; /* 64 characters are read whole */
    assert_int_equal(npuctl_suggest(word, commands, 5, out, 4), 1);
    assert_string_equal(out[0], "serve");
}

/* One letter is one edit from every one-letter name (-h above all): no suggestion. */
static void test_suggest_one_letter(void **state)
{
    (void)state;
    static const char *const opts[] = { "-o", "--out", "--tp", "-h", "--help" };
    const char *out[4];
    assert_int_equal(npuctl_suggest("-x", opts, 5, out, 4), 0);
    assert_int_equal(npuctl_suggest("--x", opts, 5, out, 4), 0);
    assert_int_equal(npuctl_suggest("-H", opts, 5, out, 4), 0);
    assert_int_equal(npuctl_suggest("--hepl", opts, 5, out, 4), 1); /* --help from a word */
    assert_string_equal(out[0], "--help");
    assert_int_equal(npuctl_suggest("--tq", opts, 5, out, 4), 1);
    assert_string_equal(out[0], "--tp");
}

/* ---- every usage against its parser */

/* The help of spec as a string (malloc'd). */
static char *help_text(const struct npuctl_cmd_spec *spec)
{
    FILE *f = tmpfile();
    assert_non_null(f);
    npuctl_opts_print_help(f, spec);
    long len = ftell(f);
    assert_true(len > 0);
    char *text = malloc((size_t)len + 1);
    assert_non_null(text);
    rewind(f);
    assert_int_equal(fread(text, 1, (size_t)len, f), (size_t)len);
    text[len] = '\0';
    fclose(f);
    return text;
}

/* Whether the help has an option line naming `name` (at its start or after ", "). */
static bool help_lists(const char *help, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = strstr(help, name); p; p = strstr(p + 1, name)) {
        bool starts = (p - help >= 3 && !strncmp(p - 3, "\n  ", 3)) ||
                      (p - help >= 2 && !strncmp(p - 2, ", ", 2));
        if (starts && (p[n] == ' ' || p[n] == ',' || p[n] == '\n'))
            return true;
    }
    return false;
}

/* stderr to /dev/null while the parsers print their refusals of made-up values. */
static int quiet_stderr(void)
{
    fflush(stderr);
    int saved = dup(STDERR_FILENO), null = open("/dev/null", O_WRONLY);
    assert_true(saved >= 0 && null >= 0);
    dup2(null, STDERR_FILENO);
    close(null);
    return saved;
}

static void restore_stderr(int saved)
{
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
}

/* The command's parser over argv, with stderr quiet (the parsers print their refusals of
   the made-up values); err holds what it wrote there. */
static int quiet_parse(const struct npuctl_cmd_spec *spec, int argc, char **argv)
{
    int saved = quiet_stderr();
    err[0] = '\0';
    int rc = spec->parse_only(argc, argv, err, sizeof(err));
    restore_stderr(saved);
    return rc;
}

/* The parser took the option (it may still refuse the value). */
static bool parser_knows(const struct npuctl_cmd_spec *spec, char *name, char *value)
{
    char *argv[] = { name, value };
    int rc = quiet_parse(spec, value ? 2 : 1, argv);
    return rc != NPU_ERR_NOTFOUND && !strstr(err, "unknown option") &&
           !strstr(err, "not used by");
}

/* help with every run of white space made one space (the printer wraps lines). */
static char *flatten(const char *help)
{
    char *flat = malloc(strlen(help) + 1), *q = flat;
    assert_non_null(flat);
    for (const char *p = help; *p; p++)
        if (!isspace((unsigned char)*p))
            *q++ = *p;
        else if (q > flat && q[-1] != ' ')
            *q++ = ' ';
    *q = '\0';
    return flat;
}

/* Each option the table gives the command: listed in its help with its default, and
   taken by its parser under each spelling; the default is a value the parser accepts. */
static void check_listed_and_parsed(const struct npuctl_cmd_spec *spec, const char *help)
{
    const struct npuctl_opt *opts[OPTS_MAX];
    size_t n = npuctl_opts_list(spec, opts, OPTS_MAX);
    char *flat = flatten(help);
    assert_true(n <= OPTS_MAX);
    for (size_t i = 0; i < n; i++) {
        const struct npuctl_opt *o = opts[i];
        char want[256], *value = (char *)(o->def ? o->def : o->metavar ? "1" : NULL);
        if (!help_lists(help, o->name) || (o->alias && !help_lists(help, o->alias)))
            fail_msg("%s: --help does not list %s", spec->name, o->name);
        snprintf(want, sizeof(want), "(default %s)", o->def ? o->def : "");
        if (o->def && !strstr(flat, want))
            fail_msg("%s: --help does not give %s's default %s", spec->name, o->name, want);
        if (!parser_knows(spec, (char *)o->name, value) ||
            (o->alias && !parser_knows(spec, (char *)o->alias, value)))
            fail_msg("%s: the parser refuses %s: %s", spec->name, o->name, err);
        char *with_def[] = { (char *)o->name, value };
        if (o->def && quiet_parse(spec, 2, with_def) != 0)
            fail_msg("%s: %s's default '%s' is refused: %s", spec->name, o->name, o->def,
                     err);
    }
    free(flat);
}

/* Every option line of the help ("  NAMES [METAVAR]  text", after the first heading of
   options) names options the parser takes. */
static void check_help_lines_parse(const struct npuctl_cmd_spec *spec, const char *help)
{
    size_t lines = 0;
    const char *start = strstr(help, "options:\n");
    assert_non_null(start);
    for (const char *p = strstr(start, "\n  -"); p; p = strstr(p + 1, "\n  -")) {
        const char *line = p + 3, *gap = strstr(line, "  ");
        size_t len = strcspn(line, "\n");
        char head[256], *save = NULL, *names[2] = { NULL, NULL }, *metavar = NULL;
        if (gap && (size_t)(gap - line) < len)
            len = (size_t)(gap - line);
        snprintf(head, sizeof(head), "%.*s", (int)len, line);
        for (char *t = strtok_r(head, " ,", &save); t; t = strtok_r(NULL, " ,", &save))
            if (t[0] == '-' && !names[1])
                names[names[0] ? 1 : 0] = t;
            else
                metavar = t;
        for (int k = 0; k < 2; k++)
            if (names[k] && !parser_knows(spec, names[k], metavar ? "1" : NULL))
                fail_msg("%s: help line '%.*s': the parser refuses %s: %s", spec->name,
                         (int)len, line, names[k], err);
        lines++;
    }
    assert_true(lines >= 1); /* -h, --help at least */
}

/* The parse of argv is refused as a missing or unwanted value, with want in the message. */
static void check_refused(const struct npuctl_cmd_spec *spec, int argc, char **argv,
                          const char *want)
{
    if (quiet_parse(spec, argc, argv) != NPU_ERR_INVAL || !strstr(err, want))
        fail_msg("%s: '%s %s': expected a refusal with \"%s\", got \"%s\"", spec->name,
                 argv[0], argc > 1 ? argv[1] : "", want, err);
}

/* One spelling of a value-taking option without its value: at the end, before --help, and
   before an option of one dash (-h, and the command's own such as -o), which is an option,
   not a value. */
static void check_needs_value(const struct npuctl_cmd_spec *spec, char *spelling,
                              char *dash_opt)
{
    char want[128], *alone[] = { spelling }, *before[] = { spelling, "--help", "x" };
    char *dashes[] = { "-h", dash_opt };
    snprintf(want, sizeof(want), "%s needs a value", spelling);
    check_refused(spec, 1, alone, want);
    check_refused(spec, 3, before, "not the option '--help'");
    for (size_t k = 0; k < 2 && dashes[k]; k++) {
        char *before_dash[] = { spelling, dashes[k], "x" };
        snprintf(want, sizeof(want), "not the option '%s'", dashes[k]);
        check_refused(spec, 3, before_dash, want);
    }
}

/* Refusals: an unknown option, a value missing (under each spelling), and a value given to
   a flag. */
static void check_refusals(const struct npuctl_cmd_spec *spec)
{
    char *unknown[] = { "--no-such-option" }, *dash_opt = NULL;
    assert_int_equal(quiet_parse(spec, 1, unknown), NPU_ERR_NOTFOUND);
    assert_non_null(strstr(err, "unknown option '--no-such-option'"));
    const struct npuctl_opt *opts[OPTS_MAX];
    size_t n = npuctl_opts_list(spec, opts, OPTS_MAX);
    for (size_t i = 0; i < n; i++) /* the command's own option of one dash, if any */
        if (strncmp(opts[i]->name, "--", 2) != 0 && strcmp(opts[i]->name, "-h") != 0)
            dash_opt = (char *)opts[i]->name;
    for (size_t i = 0; i < n; i++) {
        char *spellings[] = { (char *)opts[i]->name, (char *)opts[i]->alias };
        for (size_t k = 0; k < 2 && spellings[k]; k++) {
            if (opts[i]->metavar) {
                check_needs_value(spec, spellings[k], dash_opt);
            } else if (strcmp(opts[i]->name, "-h") != 0) { /* --help=1 is the help */
                char with_value[96], *argv[] = { with_value };
                snprintf(with_value, sizeof(with_value), "%s=1", spellings[k]);
                check_refused(spec, 1, argv, "takes no value");
            }
        }
    }
}

static void test_every_usage(void **state)
{
    (void)state;
    const struct npuctl_cmd_spec *const *specs;
    size_t n = npuctl_specs(&specs), parsed = 0;
    assert_true(n >= 18);
    for (size_t i = 0; i < n; i++) {
        char *help = help_text(specs[i]), want[64];
        snprintf(want, sizeof(want), "usage: npuctl %s", specs[i]->name);
        assert_true(strncmp(help, want, strlen(want)) == 0);
        assert_non_null(strstr(help, "  -h, --help"));
        if (specs[i]->parse_only) {
            check_listed_and_parsed(specs[i], help);
            check_help_lines_parse(specs[i], help);
            check_refusals(specs[i]);
            parsed++;
        }
        free(help);
    }
    assert_int_equal(parsed, n - 2); /* all but test and help, which npuctl does not parse */
}

/* The refusal of an unknown option: its hint compares the whole option, and not with -h. */
static void test_unknown_option_hints(void **state)
{
    (void)state;
    char *one[] = { "-o", "x" }, word[120], *lng[] = { word };
    assert_int_equal(quiet_parse(&npuctl_spec_serve, 2, one), NPU_ERR_NOTFOUND);
    assert_string_equal(err, "serve: unknown option '-o' (npuctl serve --help)");
    snprintf(word, sizeof(word), "--chunk%0100d", 0); /* was cut to 64, then "--chunk?" */
    assert_int_equal(quiet_parse(&npuctl_spec_serve, 1, lng), NPU_ERR_NOTFOUND);
    assert_null(strstr(err, "did you mean"));
    assert_non_null(strstr(err, "unknown option '--chunk0000"));
    assert_non_null(strstr(err, "0...' (npuctl serve --help)"));
}

/* ---- the defaults the help prints are the parsers' defaults */

/* What a serve parse decided, less the plan request (compared as bytes). */
static void serve_fingerprint(const struct serve_opts *o, char *buf, size_t len)
{
    const struct rt_sched_params *s = &o->sched;
    snprintf(buf, len, "%d %u %u %u %u %u %u | %g %g | %s %s %s %s %s | %u %u %llu %s %d %d",
             (int)s->kind, s->chunk, s->groups, s->group_tokens, s->budget, s->prefill_units,
             o->prefill_instances, o->slo.ttft_ms, o->slo.tbt_ms, o->trace, o->out,
             o->threads, o->image.model, o->image.chip, o->timeout_s, o->watchdog_ms,
             (unsigned long long)o->seed, o->fault, (int)o->layer_reuse, o->engine_trace);
}

/* For each option of spec with a default: parsing nothing and parsing `OPT DEFAULT` (after
   the arguments `base`) decide the same. parse fills *fp (a fingerprint) and *bytes. */
typedef void (*parse_fn)(const struct npuctl_cmd_spec *spec, int argc, char **argv, char *fp,
                         void **bytes, size_t *nbytes);

static void check_defaults(const struct npuctl_cmd_spec *spec, parse_fn parse, int nbase,
                           char **base)
{
    const struct npuctl_opt *opts[OPTS_MAX];
    size_t n = npuctl_opts_list(spec, opts, OPTS_MAX), checked = 0;
    char fp0[1024], fp1[1024], *argv[16];
    void *b0 = NULL, *b1 = NULL;
    size_t n0 = 0, n1 = 0;
    memcpy(argv, base, (size_t)nbase * sizeof(char *));
    parse(spec, nbase, argv, fp0, &b0, &n0);
    for (size_t i = 0; i < n; i++) {
        if (!opts[i]->def)
            continue;
        argv[nbase] = (char *)opts[i]->name, argv[nbase + 1] = (char *)opts[i]->def;
        parse(spec, nbase + 2, argv, fp1, &b1, &n1);
        if (strcmp(fp0, fp1) != 0 || n0 != n1 || memcmp(b0, b1, n0) != 0)
            fail_msg("%s: %s %s is not the default:\n  %s\n  %s", spec->name,
                     opts[i]->name, opts[i]->def, fp0, fp1);
        free(b1);
        checked++;
    }
    free(b0);
    assert_true(checked > 0);
}

static void parse_serve(const struct npuctl_cmd_spec *spec, int argc, char **argv, char *fp,
                        void **bytes, size_t *nbytes)
{
    static struct serve_opts o;
    (void)spec;
    assert_int_equal(serve_opts_parse(argc, argv, &o), 0);
    serve_fingerprint(&o, fp, 1024);
    *nbytes = sizeof(o.image.req);
    *bytes = malloc(*nbytes);
    memcpy(*bytes, &o.image.req, *nbytes);
}

static void parse_plan(const struct npuctl_cmd_spec *spec, int argc, char **argv, char *fp,
                       void **bytes, size_t *nbytes)
{
    struct npuctl_image_opts o;
    void *const ctx[NPUCTL_GROUPS_MAX] = { &o, &o };
    struct npuctl_args args;
    npuctl_image_opts_init(&o);
    assert_int_equal(npuctl_opts_parse(spec, ctx, argc, argv, &args, err, sizeof(err)), 0);
    npuctl_args_free(&args);
    snprintf(fp, 1024, "%s %s %s", o.model ? o.model : "-", o.chip, o.out ? o.out : "-");
    *nbytes = sizeof(o.req);
    *bytes = malloc(*nbytes);
    memcpy(*bytes, &o.req, *nbytes);
}

/* bench model's options and the plan options it takes (the plan request as bytes). */
static void parse_bench_model(const struct npuctl_cmd_spec *spec, int argc, char **argv,
                              char *fp, void **bytes, size_t *nbytes)
{
    static struct bench_model_opts o; /* large: not on the stack */
    bool done;
    (void)spec;
    assert_int_equal(bench_model_parse(argc, argv, &o, &done), 0);
    assert_false(done);
    snprintf(fp, 1024, "%s %s %s %s %u %d %u", o.image.model, o.image.chip,
             o.out ? o.out : "-", o.only ? o.only : "-", o.timeout_s, o.engine_log,
             o.engine_log_core);
    *nbytes = sizeof(o.image.req);
    *bytes = malloc(*nbytes);
    memcpy(*bytes, &o.image.req, *nbytes);
}

/* run's options; the *_set flags say that an option was given, not what it set. */
static void parse_launch(const struct npuctl_cmd_spec *spec, int argc, char **argv, char *fp,
                         void **bytes, size_t *nbytes)
{
    static const enum npuctl_mode modes[] = {
        [NPUCTL_CMD_RUN] = NPUCTL_MODE_RUN, [NPUCTL_CMD_SELFTEST] = NPUCTL_MODE_SELFTEST,
        [NPUCTL_CMD_DEBUG] = NPUCTL_MODE_DEBUG, [NPUCTL_CMD_BENCH] = NPUCTL_MODE_BENCH,
    };
    struct npuctl_run_opts o;
    const char *image = "-";
    if (spec->id == NPUCTL_CMD_FLASH)
        assert_int_equal(npuctl_parse_flash_args(argc, argv, &o, &image, err, sizeof(err)), 0);
    else
        assert_int_equal(npuctl_parse_run_args(modes[spec->id], argc, argv, &o, err,
                                               sizeof(err)), 0);
    snprintf(fp, 1024, "%s %s %s %d %u %u %u %d %d %d %d %d %u %u %u %u %u", image,
             o.image ? o.image : "-", o.chip, (int)o.threads, o.mesh_rows, o.mesh_cols,
             o.timeout_s, (int)o.watchdog_ms, o.quiet_guest_errors, o.print_cmd,
             (int)o.machine_mode, o.bench_quick, o.bench_raw, o.bench_repeat, o.gdb_port,
             o.gdb_core, (unsigned)o.extra_argc);
    *bytes = NULL, *nbytes = 0;
}

static void parse_gen(const struct npuctl_cmd_spec *spec, int argc, char **argv, char *fp,
                      void **bytes, size_t *nbytes)
{
    struct trace_gen_opts o;
    bool done;
    (void)spec;
    assert_int_equal(trace_gen_parse(argc, argv, &o, &done), 0);
    assert_false(done);
    snprintf(fp, 1024, "%u %g %d %g %llu %s %s", o.p.count, o.p.rate, (int)o.p.arrival,
             o.p.cv, (unsigned long long)o.p.seed, o.lengths, o.out);
    *nbytes = 2 * sizeof(o.p.input);
    *bytes = malloc(*nbytes);
    memcpy(*bytes, &o.p.input, sizeof(o.p.input));
    memcpy((char *)*bytes + sizeof(o.p.input), &o.p.output, sizeof(o.p.output));
}

static void test_defaults_are_the_parsers(void **state)
{
    (void)state;
    char *none[1] = { NULL }, *plan[] = { "--model", "tiny-moe" }, *bench[] = { "gemm" };
    char *flash[] = { "x.img" }, *gen[] = { "--count", "3", "--rate", "2", "-o", "-" };
    check_defaults(&npuctl_spec_serve, parse_serve, 0, none);
    check_defaults(&npuctl_spec_plan, parse_plan, 2, plan);
    check_defaults(&npuctl_spec_build_image, parse_plan, 2, plan);
    check_defaults(&npuctl_spec_bench_model, parse_bench_model, 2, plan);
    check_defaults(&npuctl_spec_run, parse_launch, 0, none);
    check_defaults(&npuctl_spec_selftest, parse_launch, 0, none);
    check_defaults(&npuctl_spec_debug, parse_launch, 0, none);
    check_defaults(&npuctl_spec_bench, parse_launch, 1, bench);
    check_defaults(&npuctl_spec_flash, parse_launch, 1, flash);
    check_defaults(&npuctl_spec_trace_gen, parse_gen, 6, gen);
}

/* serve's parser, rewritten onto the tables: what each kind of value sets. */
static void test_serve_values(void **state)
{
    (void)state;
    static struct serve_opts o;
    char *argv[] = { "--sched", "pd-disagg", "--instances=2", "--decode-cores", "sa=4x4",
                     "--groups", "3", "--slo-tbt-ms", "0", "--inject-fault", "trap:1:40",
                     "--mode", "performance", "--layer-reuse", "tiles", "--engine-trace",
                     "--threads", "single", "--kv-sram-blocks", "6", "--routing",
                     "skewed:1.5" };
    assert_int_equal(serve_opts_parse((int)(sizeof(argv) / sizeof(argv[0])), argv, &o), 0);
    assert_int_equal(o.sched.kind, RT_SCHED_PD_DISAGG);
    assert_int_equal(o.image.req.instances, 2);
    assert_true(o.decode_cores.set);
    assert_string_equal(o.decode_cores.spec, "sa=4x4");
    assert_int_equal(o.decode_cores.sa_rows, 4);
    assert_int_equal(o.sched.groups, 3);
    assert_true(o.slo.tbt_ms == 0.0 && o.slo.ttft_ms == 10000.0);
    assert_string_equal(o.fault, "fault=trap fault_core=1 fault_round=40");
    assert_int_equal(o.image.req.mode, 1);
    assert_int_equal(o.layer_reuse, SERVE_REUSE_TILES);
    assert_true(o.engine_trace);
    assert_string_equal(o.threads, "single");
    assert_int_equal(o.image.req.kv_sram_blocks, 6);
    assert_int_equal(o.image.req.routing_skew_milli, 1500);
    char *pdf[] = { "--sched", "pd-fusion" }, *bad[] = { "--threads", "dual" };
    assert_int_equal(serve_opts_parse(2, pdf, &o), 0);
    assert_int_equal(o.sched.budget, 256); /* pd-fusion's defaults, set after the parse */
    assert_int_equal(o.sched.prefill_units, 64);
    int saved = quiet_stderr();
    assert_int_equal(serve_opts_parse(2, bad, &o), NPUCTL_EXIT_USAGE);
    restore_stderr(saved);
}

/* ---- names: models, chips, commands */

static void test_unknown_names(void **state)
{
    (void)state;
    char path[NPUCTL_PATH_MAX];
    struct chip_config chip;
    assert_int_equal(npuctl_find_model("tiny-mo", path, sizeof(path), err, sizeof(err)),
                     NPU_ERR_NOTFOUND);
    assert_string_equal(err, "unknown model 'tiny-mo'; did you mean tiny-moe? (npuctl models)");
    assert_int_equal(npuctl_find_model("qwen3-30b", path, sizeof(path), err, sizeof(err)),
                     NPU_ERR_NOTFOUND);
    assert_non_null(strstr(err, "did you mean qwen3-30b-a3b or qwen3-32b?"));
    assert_int_equal(npuctl_find_model("tiny-moe", path, sizeof(path), err, sizeof(err)), 0);
    assert_non_null(strstr(path, "/models/tiny/tiny-moe.toml"));
    assert_int_equal(npuctl_find_model("qwen3-8b", path, sizeof(path), err, sizeof(err)), 0);
    assert_non_null(strstr(path, "/models/configs/qwen3-8b.toml"));
    assert_int_equal(npuctl_find_model("no/such.toml", path, sizeof(path), err, sizeof(err)),
                     0); /* a path: its reader says what is wrong */
    assert_string_equal(path, "no/such.toml");
    assert_int_equal(npuctl_load_chip("large-6", &chip, path, sizeof(path), err, sizeof(err)),
                     NPU_ERR_NOTFOUND);
    assert_non_null(strstr(err, "unknown chip 'large-6'; did you mean large-64"));
    assert_non_null(strstr(err, "(npuctl chips)"));
    assert_int_equal(npuctl_load_chip("mesh-2x2", &chip, path, sizeof(path), err, sizeof(err)),
                     0);
    assert_int_equal(chip.mesh_rows, 2);
    char *names[NPUCTL_CONFIGS_MAX];
    const char *dirs[NPUCTL_CONFIGS_MAX];
    int n = npuctl_list_models(names, dirs, (int)NPUCTL_CONFIGS_MAX), seen = 0;
    for (int i = 0; i < n; i++)
        seen |= (!strcmp(names[i], "tiny-moe") && !strcmp(dirs[i], "tiny")) |
                (!strcmp(names[i], "qwen3-30b-a3b") && !strcmp(dirs[i], "configs")) << 1;
    npuctl_free_names(names, n);
    assert_int_equal(seen, 3);
}

/* Through npuctl_main: help forms exit 0, refusals 2, before anything runs. */
static void test_main(void **state)
{
    (void)state;
    char *ok[][5] = {
        { "npuctl", "serve", "--help" }, { "npuctl", "help", "serve" },
        { "npuctl", "plan", "-h" }, { "npuctl", "help", "bench", "model" },
        { "npuctl", "bench", "model", "--help" }, { "npuctl", "trace", "gen", "--help" },
        { "npuctl", "models", "--help" }, { "npuctl", "test", "--help" },
        { "npuctl", "flash", "--help" },
        { "npuctl", "help", "bench", "gemm" }, /* a benchmark: bench's own usage */
        { "npuctl", "help", "serve", "--help" }, { "npuctl", "help", "bench", "model", "-h" },
    };
    char *bad[][6] = {
        { "npuctl", "serve", "--sched", "--out", "x" }, { "npuctl", "sreve" },
        { "npuctl", "help", "bench", "nope" }, { "npuctl", "plan", "--model", "tiny-mo" },
        { "npuctl", "serve", "--chunk-size", "64" }, { "npuctl", "chips", "extra" },
        { "npuctl", "trace", "show", "--limit", "3" },
        { "npuctl", "help", "bench", "gemm", "x" }, { "npuctl", "help", "serve", "-x" },
    };
    int saved = quiet_stderr();
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        int argc = 0;
        while (argc < 5 && ok[i][argc])
            argc++;
        assert_int_equal(npuctl_main(argc, ok[i]), 0);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int argc = 0;
        while (argc < 6 && bad[i][argc])
            argc++;
        assert_int_equal(npuctl_main(argc, bad[i]), NPUCTL_EXIT_USAGE);
    }
    restore_stderr(saved);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_edit_distance),
        cmocka_unit_test(test_suggest),
        cmocka_unit_test(test_suggest_long_word),
        cmocka_unit_test(test_suggest_one_letter),
        cmocka_unit_test(test_unknown_option_hints),
        cmocka_unit_test(test_every_usage),
        cmocka_unit_test(test_defaults_are_the_parsers),
        cmocka_unit_test(test_serve_values),
        cmocka_unit_test(test_unknown_names),
        cmocka_unit_test(test_main),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
