/* SPDX-License-Identifier: MIT */
/*
 * npuctl run / selftest / debug: load the chip config, apply --mesh, find the image pair,
 * then start QEMU (or only print its command line with --print-cmd).
 *
 * Exit status: QEMU's own (128+N if a signal N ended it), 124 if --timeout expired and QEMU
 * was killed, 2 for a bad argument, a broken chip config, a missing image or a QEMU that could
 * not be started.
 */
#define _POSIX_C_SOURCE 200809L
#include "npuctl.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu_enums.h"

static int load_chip(const struct npuctl_run_opts *o, struct chip_config *cfg,
                     struct npuctl_files *files)
{
    char err[NPUCTL_ERR_MAX];
    if (npuctl_load_chip(o->chip, cfg, files->chip_path, sizeof(files->chip_path), err,
                         sizeof(err))) {
        npuctl_print_error("%s", err);
        return NPUCTL_EXIT_USAGE;
    }
    return 0;
}

/* Resolves every file of the launch; 0 or an exit status after printing why. */
static int prepare_launch(const struct npuctl_run_opts *o, struct chip_config *cfg,
                          struct npuctl_files *files)
{
    char err[NPUCTL_ERR_MAX];
    uint32_t rows, cols;
    int rc = load_chip(o, cfg, files);
    if (rc)
        return rc;
    npuctl_get_mesh(o, cfg, &rows, &cols);
    if (chip_config_check_mesh(rows, cols, err, sizeof(err))) {
        npuctl_print_error("%s", err);
        return NPUCTL_EXIT_USAGE;
    }
    if (o->mode == NPUCTL_MODE_DEBUG && o->gdb_core >= rows * cols) {
        npuctl_print_error("--core %" PRIu32 ": the %" PRIu32 "x%" PRIu32
                           " mesh has cores 0..%" PRIu32, o->gdb_core, rows, cols,
                           rows * cols - 1);
        return NPUCTL_EXIT_USAGE;
    }
    if (npuctl_resolve_images(o, npuctl_get_dir(NPUCTL_DIR_FIRMWARE), files, err,
                              sizeof(err))) {
        npuctl_print_error("%s", err);
        return NPUCTL_EXIT_USAGE;
    }
    snprintf(files->qemu, sizeof(files->qemu), "%s", npuctl_get_dir(NPUCTL_PATH_QEMU));
    return 0;
}

static int print_argv_line(FILE *f, char **argv)
{
    char *line;
    if (npuctl_quote_argv(argv, &line)) {
        npuctl_print_error("out of memory");
        return NPUCTL_EXIT_USAGE;
    }
    fprintf(f, "%s\n", line);
    free(line);
    return 0;
}

/* What a debug run prints before QEMU starts: how to attach and what gdb will see. */
static int print_gdb_help(const struct npuctl_run_opts *o, const struct npuctl_files *files,
                          uint32_t ncores)
{
    char **gdb;
    if (npuctl_build_gdb_argv(o, files, &gdb)) {
        npuctl_print_error("out of memory");
        return NPUCTL_EXIT_USAGE;
    }
    printf("# QEMU halts at reset and waits for gdb on localhost:%" PRIu32
           ". Attach from another terminal with:\n", o->gdb_port);
    int rc = print_argv_line(stdout, gdb);
    npuctl_free_argv(gdb);
    printf("# gdb threads are the harts: thread N+1 is NPU core N (threads 1..%" PRIu32
           "), thread %" PRIu32 " is the control core.\n", ncores, ncores + 1);
    printf("# Symbols: the control image, plus the core image at core %" PRIu32
           "'s SRAM 0x%" PRIx64 " (--core K for another core).\n", o->gdb_core,
           npuctl_core_sram_base(o->gdb_core));
    fflush(stdout);
    return rc;
}

struct capture {
    const char *stdout_path;
    void (*tick)(void *);
    void *ctx;
    bool *ran;                  /* set once QEMU ran (its exit status is the result) */
};

static int launch_qemu(const struct npuctl_run_opts *o, char **argv, const struct capture *cap)
{
    struct npuctl_spawn sp = {
        .argv = argv, .search_path = false, .own_group = true, .stdin_null = true,
        .timeout_s = o->mode == NPUCTL_MODE_DEBUG ? 0 : o->timeout_s,
        .stdout_path = cap ? cap->stdout_path : NULL, .tick = cap ? cap->tick : NULL,
        .tick_ctx = cap ? cap->ctx : NULL,
    };
    char err[NPUCTL_ERR_MAX];
    struct npuctl_child_exit ex;
    int rc = npuctl_spawn_wait(&sp, &ex, err, sizeof(err));
    if (cap && cap->ran)
        *cap->ran = rc == NPU_OK || rc == NPU_ERR_TIMEOUT;
    if (rc == NPU_ERR_TIMEOUT) {
        npuctl_print_error("%s exceeded --timeout %" PRIu32 " s; QEMU killed",
                           npuctl_mode_name(o->mode), o->timeout_s);
        return NPUCTL_EXIT_TIMEOUT;
    }
    if (rc) {
        npuctl_print_error("%s (set %s, or build the 'qemu' target)", err,
                           npuctl_dir_env_name(NPUCTL_PATH_QEMU));
        return NPUCTL_EXIT_USAGE;
    }
    if (ex.signal)
        npuctl_print_error("QEMU ended by signal %d (%s)", ex.signal, strsignal(ex.signal));
    return ex.status;
}

static int run_mode(enum npuctl_mode mode, int argc, char **argv, const struct capture *cap)
{
    struct npuctl_run_opts o;
    char err[NPUCTL_ERR_MAX];
    if (npuctl_parse_run_args(mode, argc, argv, &o, err, sizeof(err))) {
        npuctl_print_error("%s", err);
        return NPUCTL_EXIT_USAGE;
    }
    if (o.help) {
        npuctl_print_usage(stdout, npuctl_mode_name(mode));
        return 0;
    }
    struct chip_config cfg;
    struct npuctl_files files;
    int rc = prepare_launch(&o, &cfg, &files);
    if (rc)
        return rc;
    char **qemu;
    if (npuctl_build_qemu_argv(&o, &cfg, &files, &qemu)) {
        npuctl_print_error("out of memory");
        return NPUCTL_EXIT_USAGE;
    }
    uint32_t rows, cols;
    npuctl_get_mesh(&o, &cfg, &rows, &cols);
    if (mode == NPUCTL_MODE_DEBUG)
        rc = print_gdb_help(&o, &files, rows * cols);
    if (rc == 0)
        rc = o.print_cmd ? print_argv_line(stdout, qemu) : launch_qemu(&o, qemu, cap);
    npuctl_free_argv(qemu);
    return rc;
}

int npuctl_cmd_run(int argc, char **argv)
{
    return run_mode(NPUCTL_MODE_RUN, argc, argv, NULL);
}

int npuctl_cmd_selftest(int argc, char **argv)
{
    return run_mode(NPUCTL_MODE_SELFTEST, argc, argv, NULL);
}

int npuctl_cmd_debug(int argc, char **argv)
{
    return run_mode(NPUCTL_MODE_DEBUG, argc, argv, NULL);
}

int npuctl_run_captured(int argc, char **argv, const char *stdout_path, void (*tick)(void *),
                        void *ctx, bool *ran)
{
    *ran = false;
    const struct capture cap = { .stdout_path = stdout_path, .tick = tick, .ctx = ctx,
                                 .ran = ran };
    return run_mode(NPUCTL_MODE_RUN, argc, argv, &cap);
}
