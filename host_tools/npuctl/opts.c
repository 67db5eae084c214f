/* SPDX-License-Identifier: MIT */
/*
 * npuctl's option parser and help printer over the option tables of opts.h: both walk the
 * same entries, so a command's help lists what its parser takes (tests/host/test_npuctl_opts.c
 * checks it for every command).
 */
#define _POSIX_C_SOURCE 200809L
#include "opts.h"

#include <stdlib.h>
#include <string.h>

#include "npu_enums.h"
#include "npuctl.h"

#define HELP_WIDTH 92u  /* the help's lines, as the hand-written usages had them */
#define HELP_COLUMN 24u /* where an option's text starts */
#define NAMES_MAX 256u  /* option spellings of one command, for suggestions */
#define WORD_SHOWN 64u  /* characters of an unknown option its refusal quotes */

/* Not in any group: every command takes it, the parser checks it first. */
static const struct npuctl_opt help_opt = {
    "-h", "--help", NULL, NULL, "print this help and exit", -1, ~0u,
};

bool npuctl_opt_taken_by(const struct npuctl_opt *opt, enum npuctl_cmd_id cmd)
{
    return (opt->cmds & NPUCTL_CMD_BIT(cmd)) != 0;
}

int npuctl_opt_word_index(const struct npuctl_opt *opt, const char *value)
{
    const char *p = opt->metavar ? opt->metavar : "";
    size_t n = strlen(value);
    for (int i = 0; *p; i++) {
        size_t len = strcspn(p, "|");
        if (len == n && strncmp(p, value, n) == 0)
            return i;
        p += len + (p[len] == '|');
    }
    return -1;
}

static bool spelled(const char *name, const char *s, size_t len)
{
    return name && strlen(name) == len && strncmp(name, s, len) == 0;
}

static bool opt_is(const struct npuctl_opt *o, const char *s, size_t len)
{
    return spelled(o->name, s, len) || spelled(o->alias, s, len);
}

/* The entry spec's command takes under the spelling s[0, len), and its group; else NULL,
   with *elsewhere set if the spec's groups have it for other commands only. */
static const struct npuctl_opt *find_opt(const struct npuctl_cmd_spec *spec, const char *s,
                                         size_t len, size_t *group, bool *elsewhere)
{
    *elsewhere = false;
    for (size_t g = 0; g < NPUCTL_GROUPS_MAX && spec->groups[g]; g++)
        for (size_t k = 0; k < spec->groups[g]->n; k++) {
            const struct npuctl_opt *o = &spec->groups[g]->opts[k];
            if (!opt_is(o, s, len))
                continue;
            if (npuctl_opt_taken_by(o, spec->id)) {
                *group = g;
                return o;
            }
            *elsewhere = true;
        }
    return NULL;
}

size_t npuctl_opts_list(const struct npuctl_cmd_spec *spec, const struct npuctl_opt **out,
                        size_t max)
{
    size_t n = 0;
    for (size_t g = 0; g < NPUCTL_GROUPS_MAX && spec->groups[g]; g++)
        for (size_t k = 0; k < spec->groups[g]->n; k++) {
            const struct npuctl_opt *o = &spec->groups[g]->opts[k];
            if (!npuctl_opt_taken_by(o, spec->id))
                continue;
            if (n < max)
                out[n] = o;
            n++;
        }
    if (n < max)
        out[n] = &help_opt;
    return n + 1;
}

static int unknown_option(const struct npuctl_cmd_spec *spec, const char *s, size_t len,
                          char *err, size_t errlen)
{
    const struct npuctl_opt *opts[NAMES_MAX / 2];
    const char *names[NAMES_MAX];
    char word[WORD_SHOWN * 2], hint[256] = "";
    size_t n = npuctl_opts_list(spec, opts, NAMES_MAX / 2), k = 0;
    for (size_t i = 0; i < n && i < NAMES_MAX / 2; i++) {
        names[k++] = opts[i]->name;
        if (opts[i]->alias)
            names[k++] = opts[i]->alias;
    }
    /* the hint compares the whole word (a cut one would find the name it begins with);
       npuctl_suggest gives none for a word longer than this buffer anyway */
    if (len < sizeof(word)) {
        snprintf(word, sizeof(word), "%.*s", (int)len, s);
        npuctl_format_suggestion(word, names, k, hint, sizeof(hint));
    }
    snprintf(err, errlen, "%s: unknown option '%.*s%s'%s (npuctl %s --help)", spec->name,
             (int)(len < WORD_SHOWN ? len : WORD_SHOWN), s, len > WORD_SHOWN ? "..." : "",
             hint, spec->name);
    return NPU_ERR_NOTFOUND;
}

/* A separate value that is an option of the command: the option before it got none. */
static bool is_option_word(const struct npuctl_cmd_spec *spec, const char *s)
{
    size_t group;
    bool elsewhere;
    if (strncmp(s, "--", 2) == 0)
        return true;
    return s[0] == '-' && s[1] != '\0' &&
           (find_opt(spec, s, strlen(s), &group, &elsewhere) || opt_is(&help_opt, s, strlen(s)));
}

/* The value of option o spelled argv[*i] (len characters, then eq: "=VALUE" or NULL);
   advances *i past a separate value. */
static int take_value(const struct npuctl_cmd_spec *spec, const struct npuctl_opt *o, int argc,
                      char **argv, int *i, size_t len, const char *eq, const char **value,
                      char *err, size_t errlen)
{
    const char *arg = argv[*i];
    *value = NULL;
    if (!o->metavar) {
        if (!eq)
            return NPU_OK;
        snprintf(err, errlen, "%s: %.*s takes no value, got '%s'", spec->name, (int)len, arg,
                 arg);
        return NPU_ERR_INVAL;
    }
    if (eq) {
        *value = eq + 1;
        return NPU_OK;
    }
    if (*i + 1 >= argc || is_option_word(spec, argv[*i + 1])) {
        snprintf(err, errlen, "%s: %.*s needs a value (%s)%s%s%s", spec->name, (int)len, arg,
                 o->metavar, *i + 1 < argc ? ", not the option '" : "",
                 *i + 1 < argc ? argv[*i + 1] : "", *i + 1 < argc ? "'" : "");
        return NPU_ERR_INVAL;
    }
    *value = argv[++*i];
    return NPU_OK;
}

/* argv[*i], an option. */
static int parse_option(const struct npuctl_cmd_spec *spec, void *const *ctx, int argc,
                        char **argv, int *i, struct npuctl_args *args, char *err,
                        size_t errlen)
{
    const char *arg = argv[*i], *eq = strchr(arg, '=');
    size_t len = eq ? (size_t)(eq - arg) : strlen(arg), group = 0;
    bool elsewhere;
    if (opt_is(&help_opt, arg, len)) {
        args->help = true;
        return NPU_OK;
    }
    const struct npuctl_opt *o = find_opt(spec, arg, len, &group, &elsewhere);
    if (!o && elsewhere) {
        snprintf(err, errlen, "%s: option '%.*s' is not used by this command (npuctl %s "
                 "--help)", spec->name, (int)len, arg, spec->name);
        return NPU_ERR_NOTFOUND;
    }
    if (!o)
        return unknown_option(spec, arg, len, err, errlen);
    const char *value;
    int rc = take_value(spec, o, argc, argv, i, len, eq, &value, err, errlen);
    if (rc)
        return rc;
    return spec->groups[group]->apply(ctx[group], o, value, err, errlen);
}

static int check_positional(const struct npuctl_cmd_spec *spec, const struct npuctl_args *a,
                            char *err, size_t errlen)
{
    if (spec->max_pos < 0 || a->npos <= spec->max_pos)
        return NPU_OK;
    snprintf(err, errlen, "%s: unexpected argument '%s' (npuctl %s --help)", spec->name,
             a->pos[spec->max_pos], spec->name);
    return NPU_ERR_INVAL;
}

int npuctl_opts_parse(const struct npuctl_cmd_spec *spec, void *const *ctx, int argc,
                      char **argv, struct npuctl_args *args, char *err, size_t errlen)
{
    *args = (struct npuctl_args){ 0 };
    err[0] = '\0';
    args->pos = malloc(((size_t)(argc > 0 ? argc : 0) + 1) * sizeof(char *));
    if (!args->pos) {
        snprintf(err, errlen, "out of memory");
        return NPU_ERR_NOMEM;
    }
    bool options = true;
    for (int i = 0; i < argc && !args->help; i++) {
        const char *arg = argv[i];
        if (options && strcmp(arg, "--") == 0 && spec->passthrough) {
            args->extra_argc = argc - i - 1;
            args->extra_argv = argv + i + 1;
            break;
        }
        if (options && strcmp(arg, "--") == 0) {
            options = false;
            continue;
        }
        if (!options || arg[0] != '-' || arg[1] == '\0') {
            args->pos[args->npos++] = argv[i];
            continue;
        }
        int rc = parse_option(spec, ctx, argc, argv, &i, args, err, errlen);
        if (rc)
            return rc;
    }
    return args->help ? NPU_OK : check_positional(spec, args, err, errlen);
}

void npuctl_args_free(struct npuctl_args *args)
{
    free(args->pos);
    args->pos = NULL;
    args->npos = 0;
}

int npuctl_opts_run(const struct npuctl_cmd_spec *spec, void *const *ctx, int argc,
                    char **argv, struct npuctl_args *args, bool *done)
{
    char err[NPUCTL_ERR_MAX];
    int rc = npuctl_opts_parse(spec, ctx, argc, argv, args, err, sizeof(err));
    *done = true;
    if (rc) {
        if (err[0])
            npuctl_print_error("%s", err);
        npuctl_args_free(args);
        return NPUCTL_EXIT_USAGE;
    }
    if (args->help) {
        npuctl_opts_print_help(stdout, spec);
        npuctl_args_free(args);
        return 0;
    }
    *done = false;
    return 0;
}

/* ---- help */

/* Prints text word by word from column col, wrapping at HELP_WIDTH to column indent. */
static void print_wrapped(FILE *f, const char *text, size_t col, size_t indent)
{
    const char *p = text;
    bool first = true;
    while (*p) {
        p += strspn(p, " ");
        size_t n = strcspn(p, " ");
        if (n == 0)
            break;
        if (!first && col + 1 + n > HELP_WIDTH) {
            fprintf(f, "\n%*s", (int)indent, "");
            col = indent;
        } else if (!first) {
            fputc(' ', f);
            col++;
        }
        fprintf(f, "%.*s", (int)n, p);
        col += n;
        p += n;
        first = false;
    }
    fputc('\n', f);
}

static void print_opt(FILE *f, const struct npuctl_opt *o)
{
    char head[160], text[2048];
    int len = snprintf(head, sizeof(head), "  %s%s%s%s%s", o->name, o->alias ? ", " : "",
                       o->alias ? o->alias : "", o->metavar ? " " : "",
                       o->metavar ? o->metavar : "");
    snprintf(text, sizeof(text), "%s%s%s%s", o->help, o->def ? " (default " : "",
             o->def ? o->def : "", o->def ? ")" : "");
    fputs(head, f);
    if (len > 0 && (size_t)len + 2 <= HELP_COLUMN)
        fprintf(f, "%*s", (int)(HELP_COLUMN - (size_t)len), "");
    else
        fprintf(f, "\n%*s", (int)HELP_COLUMN, "");
    print_wrapped(f, text, HELP_COLUMN, HELP_COLUMN);
}

void npuctl_opts_print_help(FILE *f, const struct npuctl_cmd_spec *spec)
{
    fprintf(f, "usage: %s", spec->synopsis);
    if (spec->about)
        fputs(spec->about, f);
    bool any = false;
    for (size_t g = 0; g < NPUCTL_GROUPS_MAX && spec->groups[g]; g++) {
        const struct npuctl_opt_group *grp = spec->groups[g];
        bool heading = false;
        for (size_t k = 0; k < grp->n; k++) {
            if (!npuctl_opt_taken_by(&grp->opts[k], spec->id))
                continue;
            if (!heading)
                fprintf(f, "\n%s:\n", grp->title);
            heading = any = true;
            print_opt(f, &grp->opts[k]);
        }
    }
    if (!any)
        fprintf(f, "\noptions:\n");
    print_opt(f, &help_opt);
}

void npuctl_opts_print_brief(FILE *f, const struct npuctl_cmd_spec *spec)
{
    const char *p = spec->synopsis;
    while (*p) {
        size_t n = strcspn(p, "\n");
        fprintf(f, "  %.*s\n", (int)n, p);
        p += n + (p[n] == '\n');
    }
    fprintf(f, "      %s\n", spec->summary);
}
