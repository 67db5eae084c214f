/* SPDX-License-Identifier: MIT */
/*
 * npuctl bench, internal interface between cmd_bench.c (the command: runs a benchmark image
 * with its console captured and parses its `BENCH kind key=value ...` lines),
 * cmd_bench_report.c (the gemm, dma and noc tables and target lines) and cmd_bench_host.c
 * (host wall-clock time per command). See docs/benchmarks.md.
 */
#ifndef NPUCTL_CMD_BENCH_H
#define NPUCTL_CMD_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chip_config.h"
#include "model_config.h"
#include "npu_bound.h"
#include "npu_image.h"
#include "npuctl.h"
#include "rt/metrics.h"

#define BENCH_KV_MAX 24u
#define BENCH_TEXT_MAX 256u

/* One BENCH line of the chip console. */
struct bench_rec {
    char kind[16];                 /* the word after BENCH: chip, engines, gemm, ... */
    char text[BENCH_TEXT_MAX];     /* the line from BENCH on, for notes and warnings */
    uint32_t nkv;
    struct { char key[24]; char val[64]; } kv[BENCH_KV_MAX];
};

/* What one run produced. */
struct bench_output {
    struct bench_rec *recs;
    size_t n, cap;
    double wall_s;                 /* host wall-clock time of the QEMU process */
    bool printed;                  /* --print-cmd: only the command line was printed */
};

/* One run of a benchmark image. */
struct bench_launch {
    const char *image;             /* bench_gemm, ... */
    const char *bootargs;          /* QEMU -append; NULL or "" for none */
    enum npuctl_machine_mode mode;
    bool mesh_set;                 /* else the chip's (or --mesh's) mesh */
    uint32_t rows, cols;
};

/*
 * Runs the image with the options of `o` (chip, threads, timeout, extra QEMU arguments),
 * captures its console and parses it into *out. 0, or the exit status npuctl should return
 * after the message it printed (2, or 124 on --timeout).
 */
int bench_run_image(const struct npuctl_run_opts *o, const struct bench_launch *l,
                    struct bench_output *out);
void bench_output_free(struct bench_output *out);

/* Field access; missing fields read as NULL (bench_get), "" (bench_str) or 0. */
const char *bench_get(const struct bench_rec *r, const char *key);
const char *bench_str(const struct bench_rec *r, const char *key);
double bench_get_d(const struct bench_rec *r, const char *key);
uint64_t bench_get_u64(const struct bench_rec *r, const char *key);
bool bench_is(const struct bench_rec *r, const char *kind, const char *key, const char *val);
/* The first record of `kind`, or NULL. */
const struct bench_rec *bench_first(const struct bench_output *out, const char *kind);

/* "met" or "NOT met". */
const char *bench_verdict(bool met);
/* The first header line: what ran on which chip, in which mode. */
void bench_print_chip(const struct bench_output *out, const char *what);
/* Prints the skip / warn / error lines of a run as notes; returns how many. */
size_t bench_print_notes(const struct bench_output *out);

/* The reports; each returns 0, or 2 if the run printed no measurement. */
int bench_report_gemm(const struct bench_output *out);
int bench_report_dma(const struct bench_output *out);
int bench_report_noc(const struct bench_output *out);
int bench_report_coll(const struct bench_output *out);
int bench_report_m2n(const struct bench_output *out);

/* npuctl bench host: runs everything itself; returns the exit status. */
int bench_host(const struct npuctl_run_opts *o);

/* npuctl bench model (cmd_bench_model.c): argv after the word "model". */
int bench_model(int argc, char **argv);

/* bench model's options (bench_model_opts.c). */
struct bench_model_opts {
    struct npuctl_image_opts image;
    struct model_config model;  /* the model and the chip, loaded once (load_configs) */
    struct chip_config chip;
    const char *out;            /* --out DIR: keep images, consoles, stats (else a temp dir) */
    const char *only;           /* --shapes a,b */
    uint32_t timeout_s;
    uint32_t slo_ms;            /* --search disagg: the TBT SLO */
    const char *expert_cores;   /* --search disagg --expert-cores SPEC (serve_opts.h's) */
    bool engine_log;            /* --engine-log: DIR/SHAPE.engines.json ... */
    uint32_t engine_log_core;   /* ... of this core, or CHIP_ENGINE_LOG_ALL */
};

/* 0 to go on, else the exit status (0 after the help) with *done set. */
int bench_model_parse(int argc, char **argv, struct bench_model_opts *o, bool *done);

/* A named step shape (cmd_bench_model.c), and what one run of it measured. */
struct shape {
    const char *name;
    struct npu_bound_shape s;
};
struct measured {
    double chip_us;             /* the iteration (rank 0's `MODEL done`) */
    double cat_us[5];           /* attn, ffn, coll, weights, other (rank 0) */
    double run_ps;              /* the whole run (stats file) */
    double busy_ps[RT_ENGINE_KINDS]; /* matrix, vector, dma, noc, dma2: summed over the
                                        cores */
    double hbm_bytes;
    uint32_t cores;
    /* EP MoE load (`MODEL routed`): rows served by the busiest rank over the mean rank's,
       averaged over the layers and the worst layer (0: no EP MoE) */
    double moe_imbalance, moe_worst;
};
const struct shape *bench_model_shapes(size_t *n);
/* Whether the shape's positions fit the model (else a line says why it is skipped). */
bool bench_model_shape_fits(const struct bench_model_opts *o, const struct shape *sh);
bool bench_model_shape_selected(const struct bench_model_opts *o, const char *name);
/* Plans the shape with the plan options io, builds its image into dir and runs it on
   run_chip (a chip file of the same mesh and SRAM: other engines on some cores; NULL: the
   options' chip): *m, *h (its header). *planned false (0 returned): the planner refused it
   and said why. */
int bench_model_measure(const struct bench_model_opts *o, const struct npuctl_image_opts *io,
                        const struct shape *sh, const char *dir, const char *run_chip,
                        struct npu_image_header *h, struct measured *m, bool *planned);
/* --search disagg (bench_disagg.c): the shape on the colocated plan and on every
   disaggregated plan the firmware runs, measured; the best under the TBT SLO. */
int bench_model_search_disagg(const struct bench_model_opts *o, const struct shape *sh,
                              const char *dir);

#endif
