/* SPDX-License-Identifier: MIT */
/*
 * npuctl serve: the run on the chip, and the progress line. The serve firmware runs with
 * the image at the base of HBM and the trace blob in the control core's DRAM (both placed
 * by QEMU's loader device); the bootargs carry their sizes and the scheduler's parameters.
 * While QEMU runs, the console it writes is read once a second for the progress line:
 * requests ended (finish and reject lines), chip time (iter and done lines; rt/lines.h),
 * wall time and chip seconds per wall second (on a terminal it rewrites one line; otherwise
 * it prints a line every 30 s).
 */
#define _POSIX_C_SOURCE 200809L
#include "serve_opts.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "npu_enums.h"
#include "npu_memmap.h"
#include "rt/lines.h"
#include "rt/mailbox.h"

struct progress {
    char path[NPUCTL_PATH_MAX];
    long offset;
    size_t ended, total;
    uint64_t chip_ps;
    struct timespec start;
    bool tty;
    double last_print;
    struct lines_line line;  /* the line being read */
};

static double wall_s(const struct progress *p)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - p->start.tv_sec) + (now.tv_nsec - p->start.tv_nsec) / 1e9;
}

static void progress_line(struct progress *p, const char *line)
{
    const char *text = lines_find(line);
    enum lines_kind kind;
    if (!text || lines_identify(text, &kind, NULL, 0) != NPU_OK)
        return;
    if (kind == LINES_SERVE_FINISH || kind == LINES_SERVE_REJECT)
        p->ended++;
    else if ((kind == LINES_SERVE_ITER || kind == LINES_SERVE_DONE) &&
             lines_parse(text, &p->line, NULL, 0) == NPU_OK)
        p->chip_ps = kind == LINES_SERVE_ITER ? p->line.v.serve_iter.t1 : p->line.v.serve_done.t;
}

static void progress_print(struct progress *p, bool final)
{
    double w = wall_s(p), chip = (double)p->chip_ps / 1e12;
    if (!p->tty && !final && w - p->last_print < 30.0)
        return;
    p->last_print = w;
    fprintf(stderr, "%sserve: %zu/%zu requests ended, chip %.3f s, wall %.0f s, %.3g chip s "
            "per wall s%s", p->tty ? "\r" : "", p->ended, p->total, chip, w,
            w > 0 ? chip / w : 0.0, p->tty && !final ? "   " : "\n");
    fflush(stderr);
}

static void progress_tick(void *ctx)
{
    struct progress *p = ctx;
    FILE *f = fopen(p->path, "r");
    if (!f)
        return;
    char *buf = NULL;
    size_t cap = 0;
    ssize_t n;
    fseek(f, p->offset, SEEK_SET);
    while ((n = getline(&buf, &cap, f)) > 0) {
        if (buf[n - 1] != '\n')
            break; /* QEMU is mid-line: read it whole at the next tick */
        p->offset += (long)n;
        progress_line(p, buf);
    }
    free(buf);
    fclose(f);
    progress_print(p, false);
}

int serve_launch(const struct serve_opts *o, const struct npu_image_header *h, bool *ran,
                 uint64_t image_bytes, uint64_t blob_bytes)
{
    char img[NPUCTL_PATH_MAX + 96], blob[NPUCTL_PATH_MAX + 96], stats[NPUCTL_PATH_MAX + 16];
    char chip[NPUCTL_PATH_MAX], timeout[16], watchdog[16], append[640], params[320];
    snprintf(img, sizeof(img), "loader,file=%s/model.img,addr=%#" PRIx64 ",force-raw=on",
             o->out, (uint64_t)NPU_MAP_HBM_BASE);
    snprintf(blob, sizeof(blob), "loader,file=%s/trace.bin,addr=%#" PRIx64 ",force-raw=on",
             o->out, (uint64_t)NPU_MAP_DRAM_BASE + RT_TRACE_DRAM_OFFSET);
    snprintf(stats, sizeof(stats), "stats=%s/chip_stats.json", o->out);
    /* The run's chip file: --decode-cores' DIR/chip.toml, or --chip's name or path. */
    snprintf(chip, sizeof(chip), "%s",
             o->run_chip[0] ? o->run_chip : o->image.chip ? o->image.chip : h->chip_name);
    snprintf(timeout, sizeof(timeout), "%" PRIu32, o->timeout_s);
    const struct rt_sched_params *s = &o->sched;
    snprintf(params, sizeof(params), "sched=%s chunk=%u groups=%u group_tokens=%u budget=%u "
             "prefill_units=%u prefill_instances=%u max_concurrency=%u dispatch=%s%s%s%s",
             rt_sched_kind_name(s->kind), s->chunk, s->groups, s->group_tokens, s->budget,
             s->prefill_units, serve_opts_prefill_instances(o, h->plan.instances),
             o->max_concurrency, rt_dispatch_name(o->dispatch),
             o->prefix_cache ? " prefix_cache" : "",
             o->engine_trace ? " engine_trace" : "",
             (const char *const[]){ "", " layer_reuse", " reuse_shapes",
                                    " reuse_tiles" }[o->layer_reuse]);
    snprintf(append, sizeof(append), "image_bytes=%" PRIu64 " trace_bytes=%" PRIu64 " %s%s%s",
             image_bytes, blob_bytes, params, o->fault[0] ? " " : "", o->fault);
    snprintf(watchdog, sizeof(watchdog), "%" PRIu32, o->watchdog_ms);
    char *args[24] = { "serve", "--chip", chip, "--mode",
                       h->plan.mode ? "performance" : "functional", "--timeout", timeout,
                       "--threads", (char *)(o->threads ? o->threads : "auto") };
    int n = 9;
    if (o->watchdog_ms)
        args[n++] = "--watchdog-ms", args[n++] = watchdog;
    char *qemu[] = { "--", "-device", img, "-device", blob, "-machine", stats, "-append",
                     append };
    for (size_t k = 0; k < sizeof(qemu) / sizeof(qemu[0]); k++)
        args[n++] = qemu[k];
    struct progress *p = calloc(1, sizeof(*p));
    *ran = false;
    if (!p)
        return NPUCTL_EXIT_USAGE;
    snprintf(p->path, sizeof(p->path), "%s/console.log", o->out);
    p->total = o->requests, p->tty = isatty(2);
    clock_gettime(CLOCK_MONOTONIC, &p->start);
    int rc = npuctl_run_captured(n, args, p->path, progress_tick, p, ran);
    progress_tick(p);
    progress_print(p, true);
    free(p);
    return rc;
}
