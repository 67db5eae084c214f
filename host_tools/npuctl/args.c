/* SPDX-License-Identifier: MIT */
/*
 * npuctl argument parsing for run, selftest, debug and bench: a pure function of argv (no
 * file is read, nothing is started), so the host unit tests can cover every form.
 *
 * Options are accepted as `--opt VALUE` and `--opt=VALUE`; `--` ends the options and passes
 * everything after it to QEMU. Each error message names the option and the value.
 */
#include "npuctl.h"

#include <stdio.h>
#include <string.h>

#include "npu_enums.h"

enum opt_id {
    OPT_CHIP, OPT_MESH, OPT_THREADS, OPT_TIMEOUT, OPT_WATCHDOG, OPT_QUIET,
    OPT_PRINT_CMD, OPT_PORT, OPT_CORE, OPT_HELP, OPT_MODE, OPT_QUICK, OPT_RAW, OPT_REPEAT,
};

#define M_RUN (1u << NPUCTL_MODE_RUN)
#define M_SELFTEST (1u << NPUCTL_MODE_SELFTEST)
#define M_DEBUG (1u << NPUCTL_MODE_DEBUG)
#define M_BENCH (1u << NPUCTL_MODE_BENCH)
#define M_ALL (M_RUN | M_SELFTEST | M_DEBUG | M_BENCH)
#define BENCH_REPEAT_MAX 100u

struct opt_desc {
    const char *name;
    enum opt_id id;
    bool takes_value;
    unsigned modes; /* the commands that accept it */
};

static const struct opt_desc opt_table[] = {
    { "--chip", OPT_CHIP, true, M_ALL },
    { "--mesh", OPT_MESH, true, M_ALL },
    { "--threads", OPT_THREADS, true, M_ALL },
    { "--timeout", OPT_TIMEOUT, true, M_RUN | M_SELFTEST | M_BENCH },
    { "--watchdog-ms", OPT_WATCHDOG, true, M_ALL },
    { "--quiet-guest-errors", OPT_QUIET, false, M_ALL },
    { "--print-cmd", OPT_PRINT_CMD, false, M_ALL },
    { "--port", OPT_PORT, true, M_DEBUG },
    { "--core", OPT_CORE, true, M_DEBUG },
    { "--mode", OPT_MODE, true, M_ALL },
    { "--quick", OPT_QUICK, false, M_BENCH },
    { "--raw", OPT_RAW, false, M_BENCH },
    { "--repeat", OPT_REPEAT, true, M_BENCH },
    { "--help", OPT_HELP, false, M_ALL },
    { "-h", OPT_HELP, false, M_ALL },
};
#define NOPTS (sizeof(opt_table) / sizeof(opt_table[0]))

static const char *const mode_names[] = { "run", "selftest", "debug", "bench" };

const char *npuctl_mode_name(enum npuctl_mode mode)
{
    return mode_names[mode];
}

const char *npuctl_machine_mode_name(enum npuctl_machine_mode mode)
{
    return mode == NPUCTL_MACHINE_FUNCTIONAL    ? "functional"
           : mode == NPUCTL_MACHINE_PERFORMANCE ? "performance"
                                                : NULL;
}

int npuctl_parse_mesh(const char *text, uint32_t *rows, uint32_t *cols, char *err,
                      size_t errlen)
{
    char part[32];
    const char *x = strpbrk(text, "xX");
    size_t len = x ? (size_t)(x - text) : 0;
    uint64_t r = 0, c = 0;
    int rc_r = NPU_ERR_FORMAT, rc_c = NPU_ERR_FORMAT;
    if (x && len < sizeof(part)) {
        memcpy(part, text, len);
        part[len] = '\0';
        rc_r = npuctl_parse_decimal(part, UINT32_MAX, &r);
        rc_c = npuctl_parse_decimal(x + 1, UINT32_MAX, &c);
    }
    if (rc_r == NPU_ERR_FORMAT || rc_c == NPU_ERR_FORMAT) {
        snprintf(err, errlen, "--mesh '%s': expected ROWSxCOLS, e.g. 4x4", text);
        return NPU_ERR_FORMAT;
    }
    /* A number too large for 32 bits is out of range like any other too-large value. */
    uint32_t r32 = rc_r ? UINT32_MAX : (uint32_t)r, c32 = rc_c ? UINT32_MAX : (uint32_t)c;
    char why[256];
    int rc = chip_config_check_mesh(r32, c32, why, sizeof(why));
    if (rc) {
        const char *reason = strstr(why, ": "); /* drop the checker's "mesh RxC: " */
        snprintf(err, errlen, "--mesh '%s': %s", text, reason ? reason + 2 : why);
        return rc;
    }
    *rows = r32;
    *cols = c32;
    return NPU_OK;
}

static int parse_number_opt(const char *opt, const char *value, uint32_t min, uint32_t max,
                            uint32_t *out, char *err, size_t errlen)
{
    uint64_t v;
    int rc = npuctl_parse_decimal(value, max, &v);
    if (rc == NPU_OK && v < min)
        rc = NPU_ERR_RANGE;
    if (rc == NPU_ERR_FORMAT) {
        snprintf(err, errlen, "%s '%s': expected a whole number %u..%u", opt, value, min, max);
        return rc;
    }
    if (rc) {
        snprintf(err, errlen, "%s '%s': out of range %u..%u", opt, value, min, max);
        return rc;
    }
    *out = (uint32_t)v;
    return NPU_OK;
}

static int parse_threads(const char *value, enum npuctl_threads *out, char *err, size_t errlen)
{
    if (strcmp(value, "multi") == 0)
        *out = NPUCTL_THREADS_MULTI;
    else if (strcmp(value, "single") == 0)
        *out = NPUCTL_THREADS_SINGLE;
    else if (strcmp(value, "auto") == 0)
        *out = NPUCTL_THREADS_AUTO;
    else {
        snprintf(err, errlen, "--threads '%s': expected single, multi or auto", value);
        return NPU_ERR_INVAL;
    }
    return NPU_OK;
}

static int parse_machine_mode(const char *value, enum npuctl_machine_mode *out, char *err,
                              size_t errlen)
{
    if (strcmp(value, "functional") == 0)
        *out = NPUCTL_MACHINE_FUNCTIONAL;
    else if (strcmp(value, "performance") == 0)
        *out = NPUCTL_MACHINE_PERFORMANCE;
    else {
        snprintf(err, errlen, "--mode '%s': expected functional or performance", value);
        return NPU_ERR_INVAL;
    }
    return NPU_OK;
}

/* The options of bench alone. */
static int apply_bench_opt(enum opt_id id, const char *name, const char *value,
                           struct npuctl_run_opts *o, char *err, size_t errlen)
{
    switch (id) {
    case OPT_QUICK:
        o->bench_quick = true;
        return NPU_OK;
    case OPT_RAW:
        o->bench_raw = true;
        return NPU_OK;
    case OPT_REPEAT:
        return parse_number_opt(name, value, 1, BENCH_REPEAT_MAX, &o->bench_repeat, err,
                                errlen);
    default:
        return NPU_ERR_INVAL;
    }
}

static int apply_opt(enum opt_id id, const char *name, const char *value,
                     struct npuctl_run_opts *o, char *err, size_t errlen)
{
    switch (id) {
    case OPT_CHIP:
        if (*value == '\0') {
            snprintf(err, errlen, "--chip: expected a chip NAME or a PATH, got ''");
            return NPU_ERR_INVAL;
        }
        o->chip = value;
        return NPU_OK;
    case OPT_MESH:
        o->mesh_set = true;
        return npuctl_parse_mesh(value, &o->mesh_rows, &o->mesh_cols, err, errlen);
    case OPT_THREADS:
        o->threads_set = true;
        return parse_threads(value, &o->threads, err, errlen);
    case OPT_TIMEOUT:
        return parse_number_opt(name, value, 0, NPUCTL_TIMEOUT_MAX_S, &o->timeout_s, err,
                                errlen);
    case OPT_WATCHDOG:
        o->watchdog_set = true;
        return parse_number_opt(name, value, 1, NPUCTL_WATCHDOG_MAX_MS, &o->watchdog_ms, err,
                                errlen);
    case OPT_PORT:
        return parse_number_opt(name, value, 1, 65535, &o->gdb_port, err, errlen);
    case OPT_CORE:
        return parse_number_opt(name, value, 0, CHIP_CORES_MAX - 1, &o->gdb_core, err,
                                errlen);
    case OPT_QUIET:
        o->quiet_guest_errors = true;
        return NPU_OK;
    case OPT_PRINT_CMD:
        o->print_cmd = true;
        return NPU_OK;
    case OPT_HELP:
        o->help = true;
        return NPU_OK;
    case OPT_MODE:
        return parse_machine_mode(value, &o->machine_mode, err, errlen);
    default:
        return apply_bench_opt(id, name, value, o, err, errlen);
    }
}

static const struct opt_desc *find_opt(const char *name, size_t len)
{
    for (size_t i = 0; i < NOPTS; i++)
        if (strlen(opt_table[i].name) == len && strncmp(opt_table[i].name, name, len) == 0)
            return &opt_table[i];
    return NULL;
}

/* Handles argv[*i], an option; advances *i past a separate value. */
static int parse_one_opt(int argc, char **argv, int *i, struct npuctl_run_opts *o, char *err,
                         size_t errlen)
{
    const char *arg = argv[*i];
    const char *eq = strchr(arg, '=');
    size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
    const struct opt_desc *d = find_opt(arg, len);
    if (!d) {
        snprintf(err, errlen, "%s: unknown option '%.*s' (see npuctl help %s)",
                 mode_names[o->mode], (int)len, arg, mode_names[o->mode]);
        return NPU_ERR_INVAL;
    }
    if (!(d->modes & (1u << o->mode))) {
        snprintf(err, errlen, "%s: option '%s' is not used by this command", mode_names[o->mode],
                 d->name);
        return NPU_ERR_INVAL;
    }
    const char *value = eq ? eq + 1 : NULL;
    if (!d->takes_value && value) {
        snprintf(err, errlen, "option '%s' takes no value, got '%s'", d->name, arg);
        return NPU_ERR_INVAL;
    }
    if (d->takes_value && !value) {
        if (*i + 1 >= argc) {
            snprintf(err, errlen, "option '%s' needs a value", d->name);
            return NPU_ERR_INVAL;
        }
        value = argv[++*i];
        if (strncmp(value, "--", 2) == 0) {
            snprintf(err, errlen, "option '%s' needs a value, got the option '%s'", d->name,
                     value);
            return NPU_ERR_INVAL;
        }
    }
    return apply_opt(d->id, d->name, value, o, err, errlen);
}

static void set_defaults(enum npuctl_mode mode, struct npuctl_run_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->mode = mode;
    o->chip = NPUCTL_DEFAULT_CHIP;
    o->threads = NPUCTL_THREADS_MULTI;
    o->timeout_s = mode == NPUCTL_MODE_DEBUG ? 0 : NPUCTL_DEFAULT_TIMEOUT_S;
    o->gdb_port = NPUCTL_DEFAULT_GDB_PORT;
    o->gdb_core = 0;
}

/* bench: the one positional argument is the benchmark (checked by cmd_bench.c). */
static int set_bench_name(struct npuctl_run_opts *o, int npos, char **pos, char *err,
                          size_t errlen)
{
    if (npos > 1) {
        snprintf(err, errlen, "bench: unexpected argument '%s' (expected one benchmark: "
                 "gemm, dma, noc, collectives or host)", pos[1]);
        return NPU_ERR_INVAL;
    }
    if (npos == 0 || *pos[0] == '\0') {
        snprintf(err, errlen, "bench: which benchmark? gemm, dma, noc, collectives or host");
        return NPU_ERR_INVAL;
    }
    o->image = pos[0];
    return NPU_OK;
}

/* Turns the positional arguments into an image NAME or a CTRL/CORE pair. */
static int set_images(struct npuctl_run_opts *o, int npos, char **pos, char *err,
                      size_t errlen)
{
    if (o->mode == NPUCTL_MODE_BENCH)
        return set_bench_name(o, npos, pos, err, errlen);
    if (o->mode == NPUCTL_MODE_SELFTEST && npos > 0) {
        snprintf(err, errlen, "selftest: takes no image argument, got '%s' (use npuctl run)",
                 pos[0]);
        return NPU_ERR_INVAL;
    }
    if (npos > 2) {
        snprintf(err, errlen, "%s: unexpected argument '%s' (expected NAME or CTRL.elf "
                 "CORE.elf)", mode_names[o->mode], pos[2]);
        return NPU_ERR_INVAL;
    }
    for (int k = 0; k < npos; k++)
        if (*pos[k] == '\0') {
            snprintf(err, errlen, "%s: empty image argument", mode_names[o->mode]);
            return NPU_ERR_INVAL;
        }
    if (npos == 2) {
        o->ctrl_elf = pos[0];
        o->core_elf = pos[1];
    } else {
        o->image = npos == 1 ? pos[0]
                   : o->mode == NPUCTL_MODE_SELFTEST ? NPUCTL_SELFTEST_IMAGE
                                                     : NPUCTL_DEFAULT_IMAGE;
    }
    return NPU_OK;
}

int npuctl_parse_run_args(enum npuctl_mode mode, int argc, char **argv,
                          struct npuctl_run_opts *out, char *err, size_t errlen)
{
    char *pos[3];
    int npos = 0;
    set_defaults(mode, out);
    err[0] = '\0';
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--") == 0) {
            out->extra_argc = argc - i - 1;
            out->extra_argv = argv + i + 1;
            break;
        }
        if (arg[0] == '-' && arg[1] != '\0') {
            int rc = parse_one_opt(argc, argv, &i, out, err, errlen);
            if (rc)
                return rc;
        } else if (npos < 3) {
            pos[npos++] = argv[i];
        }
    }
    if (out->help)
        return NPU_OK;
    return set_images(out, npos, pos, err, errlen);
}
