/* SPDX-License-Identifier: MIT */
/*
 * npuctl: the host front door of the project (in the manner of idf.py or west).
 *
 * This header is the interface of the npuctl_core library: everything of the tool except
 * main(). Command-line parsing and the QEMU command line are pure functions (no process is
 * started, no file is read) so the host unit tests can check them; the commands (npuctl_cmd_*)
 * print and return a process exit status.
 *
 * Return conventions: library functions return 0 (NPU_OK) or a negative enum npu_status and
 * write a message naming the offending argument or file into err; commands return the exit
 * status of the process (0..255).
 */
#ifndef NPUCTL_H
#define NPUCTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "chip_config.h"

#define NPUCTL_PATH_MAX 4096u
#define NPUCTL_ERR_MAX 1024u

#define NPUCTL_EXIT_USAGE 2     /* bad arguments, missing file, broken config */
#define NPUCTL_EXIT_TIMEOUT 124 /* --timeout expired; QEMU was killed (as timeout(1)) */

#define NPUCTL_DEFAULT_CHIP "large-64"
#define NPUCTL_DEFAULT_IMAGE "boot"
#define NPUCTL_SELFTEST_IMAGE "selftest"
/* serve's --model when none is given (its table, its parser and npuctl models' mark) */
#define NPUCTL_SERVE_DEFAULT_MODEL "tiny-moe"
#define NPUCTL_DEFAULT_TIMEOUT_S 600u
#define NPUCTL_TIMEOUT_MAX_S 604800u     /* one week; 0 means no limit */
#define NPUCTL_WATCHDOG_MAX_MS 3600000u  /* one hour */
#define NPUCTL_DEFAULT_GDB_PORT 1234u

/* The commands that start QEMU; they accept overlapping option sets. */
enum npuctl_mode {
    NPUCTL_MODE_RUN,      /* run [NAME | CTRL CORE] */
    NPUCTL_MODE_SELFTEST, /* run selftest; no image argument */
    NPUCTL_MODE_DEBUG,    /* gdb stub, halted at reset, no timeout */
    NPUCTL_MODE_BENCH,    /* bench KIND: runs benchmark images (cmd_bench.c) */
};

/* --mode: the machine's engine mode, appended to -machine as mode=... when given. */
enum npuctl_machine_mode {
    NPUCTL_MACHINE_DEFAULT,     /* not given: the machine's default (functional) */
    NPUCTL_MACHINE_FUNCTIONAL,  /* engines compute on the data */
    NPUCTL_MACHINE_PERFORMANCE, /* engines keep their timing, never touch data */
};

enum npuctl_threads {
    NPUCTL_THREADS_MULTI,  /* -accel tcg,thread=multi (default) */
    NPUCTL_THREADS_SINGLE, /* -accel tcg,thread=single */
    NPUCTL_THREADS_AUTO,   /* single on a host of at most 2 CPUs, else multi */
};

/* The threading `t` runs with on a host of `cpus` CPUs: AUTO resolved (docs/build.md, "TCG
   threading"), the others as they are. */
enum npuctl_threads npuctl_resolve_threads(enum npuctl_threads t, long cpus);
/* The same on this host (the CPUs of this process's affinity). */
enum npuctl_threads npuctl_threads_here(enum npuctl_threads t);

/* Options of run / selftest / debug. Strings point into the parsed argv. */
struct npuctl_run_opts {
    enum npuctl_mode mode;
    const char *image;     /* image NAME (or directory if it contains '/'); NULL if paths */
    const char *ctrl_elf;  /* CTRL.elf given explicitly (with core_elf), else NULL */
    const char *core_elf;  /* CORE.elf given explicitly (with ctrl_elf), else NULL */
    const char *chip;      /* --chip NAME|PATH, default NPUCTL_DEFAULT_CHIP */
    bool mesh_set;         /* --mesh RxC given */
    uint32_t mesh_rows, mesh_cols;
    enum npuctl_threads threads;
    bool threads_set;      /* --threads given */
    uint32_t timeout_s;    /* --timeout, 0 = no limit; always 0 in debug mode */
    bool watchdog_set;     /* --watchdog-ms given */
    uint32_t watchdog_ms;
    bool quiet_guest_errors; /* drop `-d guest_errors` */
    bool print_cmd;          /* print the QEMU command line instead of running it */
    bool tap;                /* --tap: console lines without their stamps */
    bool help;               /* -h / --help */
    enum npuctl_machine_mode machine_mode; /* --mode */
    bool bench_quick;        /* bench: --quick, the reduced variant */
    bool bench_raw;          /* bench: --raw, also print the chip console */
    uint32_t bench_repeat;   /* bench host: --repeat N runs per point (0: its default) */
    uint32_t gdb_port;       /* debug: --port, default 1234 */
    uint32_t gdb_core;       /* debug: --core, whose SRAM the core symbols are placed at */
    int extra_argc;          /* arguments after `--`, passed to QEMU as they are */
    char **extra_argv;
};

/* The files a launch needs, resolved from the options and the environment. */
struct npuctl_files {
    char qemu[NPUCTL_PATH_MAX];
    char chip_path[NPUCTL_PATH_MAX];
    char ctrl_elf[NPUCTL_PATH_MAX];
    char core_elf[NPUCTL_PATH_MAX];
};

/* ---- args.c: pure parsing */

/* "run", "selftest", "debug" or "bench". */
const char *npuctl_mode_name(enum npuctl_mode mode);
/* "functional" or "performance"; NULL for NPUCTL_MACHINE_DEFAULT. */
const char *npuctl_machine_mode_name(enum npuctl_machine_mode mode);
/* Parses "RxC" (decimal, 1..CHIP_MESH_DIM_MAX each). */
int npuctl_parse_mesh(const char *text, uint32_t *rows, uint32_t *cols, char *err,
                      size_t errlen);
/* Parses the arguments after the command word (argv[0] is the first argument, not the
 * command). Fills defaults first; strings in out point into argv. For bench, the one
 * positional argument (the benchmark's name) goes to out->image. */
int npuctl_parse_run_args(enum npuctl_mode mode, int argc, char **argv,
                          struct npuctl_run_opts *out, char *err, size_t errlen);
/* flash IMAGE [run's options]: *image is the one positional argument (NULL with help). */
int npuctl_parse_flash_args(int argc, char **argv, struct npuctl_run_opts *out,
                            const char **image, char *err, size_t errlen);

/* ---- paths.c: directories, chip configs and images */

enum npuctl_dir {
    NPUCTL_DIR_SOURCE,   /* NPU_SOURCE_DIR */
    NPUCTL_DIR_BUILD,    /* NPU_BUILD_DIR */
    NPUCTL_DIR_FIRMWARE, /* NPU_FIRMWARE_DIR */
    NPUCTL_PATH_QEMU,    /* NPU_QEMU (a file) */
};

/* The environment variable if set and non-empty, else the value compiled in. */
const char *npuctl_get_dir(enum npuctl_dir which);
const char *npuctl_dir_env_name(enum npuctl_dir which);
/* NAME -> SRC/models/chips/NAME.toml; a value with '/' or ending in .toml is a path. */
int npuctl_resolve_chip_path(const char *chip, const char *source_dir, char *path,
                             size_t pathlen, char *err, size_t errlen);
bool npuctl_chip_is_path(const char *chip);
/* ---- configs.c: the bundled chip presets and models by name */

#define NPUCTL_CONFIGS_MAX 256u /* configs listed from one directory, or suggested from */
/* The NAME of every NAME.toml in dir, sorted (malloc'd; npuctl_free_names); the count, or
   -1 if dir cannot be read. */
int npuctl_list_configs(const char *dir, char **names, int max);
void npuctl_free_names(char **names, int n);
/* The models a NAME finds, SRC/models/configs then SRC/models/tiny, each with its folder
   ("configs", "tiny") in dirs; the count. */
int npuctl_list_models(char **names, const char **dirs, int max);
/* --model NAME|PATH -> the config file: NAME -> SRC/models/configs/NAME.toml, else
   SRC/models/tiny/NAME.toml; a path as it is. NPU_ERR_NOTFOUND for a NAME in neither,
   err naming the closest models and `npuctl models`. */
int npuctl_find_model(const char *model, char *path, size_t len, char *err, size_t errlen);
/* --chip NAME|PATH resolved (path) and loaded; an unknown NAME is NPU_ERR_NOTFOUND with err
   naming the closest presets and `npuctl chips`; else chip_config_load's status. */
int npuctl_load_chip(const char *chip, struct chip_config *cfg, char *path, size_t pathlen,
                     char *err, size_t errlen);

/* Fills files->ctrl_elf and files->core_elf and checks that both are readable files. */
int npuctl_resolve_images(const struct npuctl_run_opts *opts, const char *firmware_dir,
                          struct npuctl_files *files, char *err, size_t errlen);

/* ---- qemu_cmd.c: the QEMU and gdb command lines (pure) */

/* The mesh of the run: --mesh if given, else the chip config's. */
void npuctl_get_mesh(const struct npuctl_run_opts *opts, const struct chip_config *cfg,
                     uint32_t *rows, uint32_t *cols);
/* The CPUs this process may run on (its affinity: a container's or taskset's share). */
long npuctl_host_cpus(void);
/* Builds the NULL-terminated QEMU argv (free with npuctl_free_argv). */
int npuctl_build_qemu_argv(const struct npuctl_run_opts *opts, const struct chip_config *cfg,
                           const struct npuctl_files *files, char ***argv_out);
/* SRAM base address of core `core` (from the generated memory map). */
uint64_t npuctl_core_sram_base(uint32_t core);
/* Builds the gdb-multiarch argv that attaches to a debug run. */
int npuctl_build_gdb_argv(const struct npuctl_run_opts *opts, const struct npuctl_files *files,
                          char ***argv_out);

/* ---- numbers.c: strict option values (decimal digits for whole numbers; no hex, inf,
   nan or trailing text). Each prints a usage error naming the option and returns
   NPUCTL_EXIT_USAGE on a refusal; v may be NULL (a missing value). */

/* Pure: 0, NPU_ERR_FORMAT (not digits only) or NPU_ERR_RANGE (above max); prints nothing. */
int npuctl_parse_decimal(const char *s, uint64_t max, uint64_t *out);
int npuctl_parse_uint(const char *opt, const char *v, uint64_t min, uint64_t max,
                      uint64_t *out);
int npuctl_parse_u32(const char *opt, const char *v, uint32_t min, uint32_t max, uint32_t *out);
/* A finite decimal number in [lo, hi]. */
int npuctl_parse_real(const char *opt, const char *v, double lo, double hi, double *out);

/* ---- suggest.c: "did you mean" */

/* Optimal-string-alignment distance (insertions, deletions, substitutions, transpositions of
   neighbours), case-insensitive, over the first 64 characters of each. */
size_t npuctl_edit_distance(const char *a, const char *b);
/* The names closest to word (leading dashes ignored; a name word begins, or that begins
   word, counts as one edit), within about one edit in three characters, all at the best
   distance, in the order given (at most max into out); returns how many. */
size_t npuctl_suggest(const char *word, const char *const *names, size_t n, const char **out,
                      size_t max);
/* "; did you mean A, B or C?" from npuctl_suggest (up to 3 names), or "" if none is close. */
void npuctl_format_suggestion(const char *word, const char *const *names, size_t n, char *buf,
                              size_t len);

/* ---- util.c: messages, argv vectors, shell quoting */

void npuctl_print_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints the message as npuctl_print_error does; returns NPUCTL_EXIT_USAGE. */
int npuctl_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void npuctl_free_argv(char **argv);
/* Joins argv into one shell-quoted line (malloc'd, free with free()). */
int npuctl_quote_argv(char *const *argv, char **line_out);

/* A growing NULL-terminated argv; after an allocation failure pushes are ignored and
 * npuctl_argv_finish reports NPU_ERR_NOMEM. */
struct npuctl_argv {
    char **v;
    size_t n, cap;
    bool failed;
};
void npuctl_argv_push(struct npuctl_argv *a, const char *s);
void npuctl_argv_pushf(struct npuctl_argv *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int npuctl_argv_finish(struct npuctl_argv *a, char ***argv_out);

/* ---- spawn.c: running a child and waiting for it */

struct npuctl_spawn {
    char *const *argv;  /* argv[0] is the program */
    bool search_path;   /* look argv[0] up in PATH */
    bool own_group;     /* new process group; SIGINT/TERM/HUP sent to npuctl go to it */
    bool stdin_null;    /* stdin from /dev/null */
    uint32_t timeout_s; /* 0: none; else SIGKILL to the whole group when it expires */
    const char *stdout_path; /* NULL: inherited; else the child's stdout goes to this file */
    bool stderr_too;         /* with stdout_path: stderr to the same file */
    void (*tick)(void *ctx); /* NULL, or called about once a second while the child runs */
    void *tick_ctx;
};

/* What ended the child. */
struct npuctl_child_exit {
    int status; /* exit code, or 128+signal like a shell */
    int signal; /* the signal that ended it, 0 if it exited */
};

/* Runs the child and waits. NPU_OK: *ex says how it ended. NPU_ERR_TIMEOUT: the group was
 * killed. NPU_ERR_IO: it could not be started (err says why). */
int npuctl_spawn_wait(const struct npuctl_spawn *sp, struct npuctl_child_exit *ex, char *err,
                      size_t errlen);

/* A pool of n children, at most jobs at a time, each in its own process group (npuctl
 * sweep). start(ctx, i, sp) fills sp for child i (argv, stdout_path; stderr_too is honoured,
 * own_group forced, timeout_s and tick ignored) and returns false to skip it; ended(ctx, i,
 * ex) is called as each ends (ex->status 127 when it could not be started). A SIGINT,
 * SIGTERM or SIGHUP to npuctl is passed to every running child's group (each time: a child
 * that is npuctl escalates its own children on the third) and no further child starts.
 * Returns once every started child has ended: the signal that stopped the pool early, or
 * 0 (SIGKILL when out of memory: nothing started). */
int npuctl_spawn_pool(size_t n, unsigned jobs,
                      bool (*start)(void *ctx, size_t i, struct npuctl_spawn *sp),
                      void (*ended)(void *ctx, size_t i, const struct npuctl_child_exit *ex),
                      void *ctx);

/* ---- cmd_image.c, image_opts.c: plan options and image building, shared with serve */
#include "npu_plan.h"
struct model_config;
struct npuctl_image_opts {
    const char *model, *chip, *out;
    const char *disagg; /* plan --disagg SPEC (cmd_plan_disagg.c), or NULL */
    bool search;        /* plan --search disagg */
    struct npu_plan_request req;
    uint32_t narrow_tp; /* without --tp, the ranks of a model narrower than
                           NPUCTL_NARROW_HIDDEN (serve: the tiny models on 4 cores, not the
                           chip's every core; 0: every core as for the others) */
};
#define NPUCTL_NARROW_HIDDEN 512u
/* Defaults of the plan options (image_opts.c, whose table npuctl_plan_group applies them to
   a struct npuctl_image_opts). */
void npuctl_image_opts_init(struct npuctl_image_opts *o);
/* Plans and builds; the plan report goes to summary (may be NULL); *model gets the config. */
int npuctl_image_build(const struct npuctl_image_opts *o, struct npu_built_image *img,
                       struct model_config *model, FILE *summary);

/* ---- commands: argv holds the arguments after the command word */

int npuctl_cmd_run(int argc, char **argv);
/* npuctl run with QEMU's output into stdout_path and tick(ctx) called about once a second
   while it runs (npuctl serve's progress line). *ran: whether QEMU ran (then the result is
   its exit status, or NPUCTL_EXIT_TIMEOUT), not a refusal before it started. */
int npuctl_run_captured(int argc, char **argv, const char *stdout_path, void (*tick)(void *),
                        void *ctx, bool *ran);
int npuctl_cmd_selftest(int argc, char **argv);
int npuctl_cmd_debug(int argc, char **argv);
int npuctl_cmd_test(int argc, char **argv);
int npuctl_cmd_chips(int argc, char **argv);
int npuctl_cmd_models(int argc, char **argv);
int npuctl_cmd_help(int argc, char **argv);
int npuctl_cmd_bench(int argc, char **argv);
/* Whether name is a benchmark of bench's own usage (gemm, ..., host; not model). */
bool npuctl_bench_is_kind(const char *name);
int npuctl_cmd_plan(int argc, char **argv);
/* npuctl plan --disagg SPEC: the disaggregated plan printed (npu_disagg.h). */
int npuctl_plan_disagg(const struct npuctl_image_opts *o);
int npuctl_cmd_build_image(int argc, char **argv);
int npuctl_cmd_flash(int argc, char **argv);
int npuctl_cmd_serve(int argc, char **argv);
int npuctl_cmd_trace(int argc, char **argv);
int npuctl_cmd_compare(int argc, char **argv);
int npuctl_cmd_plot(int argc, char **argv);
/* plot's DIR... [-o OUT] in any order (report_opts.c): 0 to go on, else the exit status (0
   after the help) with *done set; *out defaults to the first DIR. */
int npuctl_plot_args(int argc, char **argv, char **dirs, int *ndirs, const char **out,
                     bool *done);
/* plot's figures of the serving runs in dirs[0..n) written into out (made if missing); 0, or
   the exit status after printing what is wrong. */
int npuctl_plot_dirs(const char *out, char **dirs, int n);
int npuctl_cmd_sweep(int argc, char **argv);
/* A serving summary's value by "key" or "object.key" (cmd_report.c), or NULL. */
struct json_t;
struct json_t *npuctl_summary_get(struct json_t *sum, const char *key);

/* ---- dispatch.c */

/* Prints the usage of one command (or of all if name is NULL or unknown) to stream. */
void npuctl_print_usage(FILE *stream, const char *name);
/* The whole tool: argv[0] is the program name, argv[1] the command. */
int npuctl_main(int argc, char **argv);

#endif
