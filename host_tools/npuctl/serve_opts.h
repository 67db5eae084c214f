/* SPDX-License-Identifier: MIT */
/* npuctl serve: its options, and the run on the chip (cmd_serve.c, serve_opts.c,
   serve_run.c). */
#ifndef NPUCTL_SERVE_OPTS_H
#define NPUCTL_SERVE_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "npuctl.h"
#include "npu_image.h"
#include "rt/metrics.h"
#include "rt/sched.h"
#include "rt/sched_pd.h"
#include "rt/trace.h"

/* --decode-cores SPEC (serve_hetero.c): the decode cores' engine sizes; 0 = the chip's. */
struct serve_hetero {
    bool set;
    const char *spec;
    uint32_t sa_rows, sa_cols, sram_bytes_per_cycle, vector_lanes, hbm_gbps;
    double cost;                  /* cost=X: alt_core_cost (0: a base core's) */
    uint32_t static_mw;           /* power=MW: alt_static_mw_per_core (0: a base core's) */
};

/* --layer-reuse (docs/images.md, "Layer reuse"): off, on (keys by request and position),
   shapes (keys by shape, reused across iterations), tiles (shapes, and tiles of a layer
   that runs replay recorded tiles: "Tile reuse"). */
enum serve_reuse { SERVE_REUSE_OFF, SERVE_REUSE_ON, SERVE_REUSE_SHAPES, SERVE_REUSE_TILES,
                   SERVE_REUSE_COUNT };
extern const char *const serve_reuse_names[SERVE_REUSE_COUNT];

/* --label KEY=VALUE: the user's labels, written beside serve's own in summary.json and
   trace.json (`run` titles the run in compare, plot and sweep tables). */
#define SERVE_LABELS_MAX 16u
#define SERVE_LABEL_KEY_MAX 32u
struct serve_label {
    char key[SERVE_LABEL_KEY_MAX + 1];
    const char *value; /* points into argv */
};

struct serve_opts {
    struct npuctl_image_opts image;   /* --model, --chip and the plan options */
    struct rt_sched_params sched;     /* --sched and its parameters */
    struct rt_slo slo;
    const char *trace, *out, *threads;
    uint64_t seed;                    /* prompt ids where the trace has none; arrivals */
    struct rt_trace_load load;        /* --num-prompts, --request-rate, --burstiness */
    uint32_t max_concurrency;         /* --max-concurrency (0: no limit) */
    uint32_t timeout_s;
    uint32_t watchdog_ms;             /* --watchdog-ms (0: the machine's default) */
    char fault[80];                   /* --inject-fault's bootargs, "" without it */
    uint32_t prefill_instances;       /* pd-disagg: 0 = half the plan's instances */
    bool engine_trace, help;
    bool force;                       /* --force: replace an earlier run's outputs */
    enum serve_reuse layer_reuse;     /* --layer-reuse (performance mode) */
    bool prefix_cache;                /* --prefix-cache on */
    uint32_t hash_block;              /* --hash-block: prompt tokens per trace hash id */
    enum rt_dispatch dispatch;        /* --dispatch (--roles disagg) */
    struct serve_hetero decode_cores; /* --decode-cores (pd-disagg) */
    struct serve_label labels[SERVE_LABELS_MAX]; /* --label, in the order given */
    uint32_t nlabels;
    char run_chip[NPUCTL_PATH_MAX];   /* the chip file of the run if not --chip's: DIR/chip.toml */
    size_t requests;                  /* filled once the trace is read */
    double rate;                      /* the request rate as served, req/s (INFINITY:
                                         all at once; NAN: one request) */
    time_t started;                   /* the run's start (summary.json's date) */
};

/* 0, or NPUCTL_EXIT_USAGE after printing what is wrong (the option named). */
int serve_opts_parse(int argc, char **argv, struct serve_opts *o);
/* "chunk=512" / "groups=adaptive group_tokens=512" ...: the chosen policy's parameters. */
void serve_opts_describe(const struct serve_opts *o, char *buf, size_t len);
/* pd-disagg's prefill instances of a plan of `instances`: --prefill-instances, or half. */
uint32_t serve_opts_prefill_instances(const struct serve_opts *o, uint32_t instances);
/* --decode-cores' value: 0, or NPUCTL_EXIT_USAGE after printing what is wrong. */
int serve_hetero_parse(const char *v, struct serve_hetero *h);
/* The same SPEC for option `opt` (--decode-cores, --expert-cores). */
int hetero_parse(const char *opt, const char *v, struct serve_hetero *h);
/* Writes `path`: chip `chip`'s config (a preset name or a file) with alt_cores = list and
   h's alt_* sizes and cost, checked by loading it back; `opt` names the option in
   messages. 0 or a usage error (printed). */
int hetero_write_chip(const char *opt, const char *chip, const char *path, const char *list,
                      const struct serve_hetero *h);
/* DIR/chip.toml for --decode-cores from the built image (its instances and cores); sets
   o->run_chip. 0 or NPUCTL_EXIT_USAGE (printed). */
int serve_hetero_write_chip(struct serve_opts *o, const void *image);
/* Runs the serve firmware with DIR/model.img and DIR/trace.bin; QEMU's exit status, 124 on
   timeout. *ran false: it could not start (NPUCTL_EXIT_USAGE, printed). */
int serve_launch(const struct serve_opts *o, const struct npu_image_header *h, bool *ran,
                 uint64_t image_bytes, uint64_t blob_bytes);

#endif
