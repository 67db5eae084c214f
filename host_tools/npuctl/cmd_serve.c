/* SPDX-License-Identifier: MIT */
/*
 * npuctl serve (docs/serving.md): serves a request trace on the emulated chip and writes
 * the run's outputs into one directory. Steps: read and check the trace; plan and build the
 * model image (npuctl build-image's planner; the KV cache gets an SRAM block pool by
 * default); check the scheduler's parameters against the plan before anything runs; write
 * the trace blob; run the `serve` firmware with both placed by QEMU's loader, the console
 * going to DIR/console.log while a progress line shows on the terminal; then turn the
 * console into DIR/summary.json, requests.csv, tokens.csv and trace.json and print the
 * report. Exit status: 0 when every request ended finished or rejected, 1 when the run
 * failed on the chip, 2 for bad input (named before the run), 124 on --timeout.
 */
#define _POSIX_C_SOURCE 200809L
#include "npuctl.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "chip_config.h"
#include "model_config.h"
#include "npu_enums.h"
#include "npu_image.h"
#include "npu_layout.h"
#include "npu_memmap.h"
#include "rt/kvc_plan.h"
#include "rt/mailbox.h"
#include "rt/metrics.h"
#include "rt/sched.h"
#include "rt/sched_pd.h"
#include "rt/serve_log.h"
#include "rt/trace.h"
#include "serve_opts.h"

/* pd-disagg's parameters against the plan's instances, as serve_pd.c will check them. */
static int check_pd(const struct serve_opts *o, const struct npu_image_header *h,
                    const struct rt_sched_params *sp, struct rt_kvc *kvc)
{
    static struct rt_pd pd;
    struct rt_kvc *kvcs[RT_PD_INSTANCES_MAX];
    char err[NPUCTL_ERR_MAX];
    for (uint32_t i = 0; i < RT_PD_INSTANCES_MAX; i++)
        kvcs[i] = kvc;
    struct rt_pd_params pp = {
        .num_layers = sp->num_layers, .max_batch = sp->max_batch, .max_tokens = sp->max_tokens,
        .chunk = sp->chunk, .instances = h->plan.instances,
        .prefill_instances = serve_opts_prefill_instances(o, h->plan.instances) };
    if (pd_init(&pd, &pp, NULL, 0, kvcs, NULL, NULL, NULL, NULL, err, sizeof(err)) != NPU_OK)
        return npuctl_usage_error("--sched pd-disagg: %s", err);
    return 0;
}

/* The scheduler's parameters against the built plan, as the control core will check them:
   a bad one is reported now, before the run. */
static int check_sched(const struct serve_opts *o, const struct npu_image_header *h,
                       uint32_t layers)
{
    static struct rt_kvc kvc;
    static struct rt_sched sched;
    struct rt_request none = { 0 };
    struct rt_kvc_config kc = rt_kvc_config_of_plan(&h->plan);
    kc.ring_paged = o->prefix_cache; /* as the control core does (serve_ctrl.c) */
    struct rt_sched_params sp = o->sched;
    char err[NPUCTL_ERR_MAX];
    sp.num_layers = layers, sp.max_batch = h->plan.max_batch, sp.max_tokens = h->plan.max_tokens;
    if (h->plan.max_tokens > RT_MB_TOKENS_MAX)
        return npuctl_usage_error(
            "--max-tokens %u: the serve firmware's mailbox takes at most %u rows",
            h->plan.max_tokens, RT_MB_TOKENS_MAX);
    if (kvc_init(&kvc, &kc) != NPU_OK)
        return npuctl_usage_error(
            "the plan's KV cache (%u blocks of %u) is beyond the runtime's %u blocks",
            kc.sram_blocks, kc.block_tokens, RT_KVC_BLOCKS_MAX);
    /* A paged ring lists every position's block in the mailbox: a full batch of the
       longest sequences must fit its block list, twice under pd-disagg (a decode run that
       pulls lists the prompt's blocks on the prefill side too). */
    const uint64_t seq_blocks = (h->plan.max_seq + kc.block_tokens - 1) / kc.block_tokens;
    const uint64_t listed = (sp.kind == RT_SCHED_PD_DISAGG ? 2u : 1u) * h->plan.max_batch *
                            seq_blocks;
    if (kc.ring_paged && listed > RT_MB_BLOCKS_MAX)
        return npuctl_usage_error(
            "--prefix-cache on: %u requests of %u positions list %llu KV blocks of %u in "
            "one iteration%s, the mailbox lists at most %u (a larger --kv-block, --kv-split "
            "on, or a smaller --max-batch or --max-seq)", h->plan.max_batch, h->plan.max_seq,
            (unsigned long long)listed, kc.block_tokens,
            sp.kind == RT_SCHED_PD_DISAGG ? " with their pulls" : "", RT_MB_BLOCKS_MAX);
    if (o->dispatch != RT_DISPATCH_RR && !h->plan.disagg)
        return npuctl_usage_error("--dispatch %s: only --roles disagg has replicas to deal "
                                  "requests to", rt_dispatch_name(o->dispatch));
    if (sp.kind == RT_SCHED_PD_DISAGG && h->plan.disagg)
        return npuctl_usage_error("--roles disagg: its replicas run one of the other "
                                  "schedulers, not pd-disagg");
    if (sp.kind == RT_SCHED_PD_DISAGG)
        return check_pd(o, h, &sp, &kvc);
    if (h->plan.instances > 1 && !h->plan.disagg)
        return npuctl_usage_error("--instances %u: only --sched pd-disagg (or --roles disagg) "
                                  "serves more than one instance", h->plan.instances);
    if (sched_init(&sched, &sp, &none, 0, &kvc, err, sizeof(err)) != NPU_OK)
        return npuctl_usage_error("--sched %s: %s", rt_sched_kind_name(sp.kind), err);
    return 0;
}

static int write_file(const char *path, const void *data, size_t bytes)
{
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(data, 1, bytes, f) == bytes;
    ok = f && fclose(f) == 0 && ok;
    return ok ? 0 : npuctl_usage_error("cannot write %s: %s", path, strerror(errno));
}

/* DIR/trace.jsonl: the trace as served (after the load knobs), with the prompt ids the chip
   is given in a functional run (the trace's own, or those trace_synth_ids makes), so a run
   can be checked and repeated. */
static int write_served_trace(const struct serve_opts *o, struct rt_trace *t, uint32_t vocab,
                              bool ids)
{
    char err[NPUCTL_ERR_MAX], path[NPUCTL_PATH_MAX];
    for (size_t i = 0; i < t->n && ids; i++) {
        struct rt_trace_entry *e = &t->e[i];
        if (e->input_ids || !e->input_length)
            continue;
        e->input_ids = malloc(e->input_length * sizeof(*e->input_ids));
        if (!e->input_ids)
            return npuctl_usage_error("out of memory");
        trace_synth_ids(o->seed, i, e, o->hash_block, e->input_length, vocab, e->input_ids);
    }
    snprintf(path, sizeof(path), "%s/trace.jsonl", o->out);
    return trace_write_jsonl(path, t, err, sizeof(err)) ? npuctl_usage_error("%s", err) : 0;
}

/* The bytes the control core's DRAM of the image's chip has for the trace blob. */
static int trace_room(const struct serve_opts *o, const struct npu_image_header *h,
                      uint64_t *room)
{
    char err[NPUCTL_ERR_MAX], path[NPUCTL_PATH_MAX];
    struct chip_config chip;
    if (npuctl_load_chip(o->image.chip ? o->image.chip : h->chip_name, &chip, path,
                         sizeof(path), err, sizeof(err)))
        return npuctl_usage_error("%s", err);
    *room = chip.dram_bytes - RT_TRACE_DRAM_OFFSET; /* dram_bytes >= NPU_DRAM_MIN_BYTES */
    return 0;
}

/* The trace as served: read, checked non-empty, the load knobs applied; its requests and
   rate into o. 0, or the refusal (printed; nothing left to free). */
static int read_trace(struct serve_opts *o, struct rt_trace *t)
{
    char err[NPUCTL_ERR_MAX];
    if (trace_read_jsonl(o->trace, t, err, sizeof(err)) != NPU_OK)
        return npuctl_usage_error("%s", err);
    if (t->n == 0) /* nothing to serve: said here, not by a run that reports nothing */
        return npuctl_usage_error("%s: no requests in the trace", o->trace);
    o->load.seed = o->seed;
    if (trace_apply_load(t, &o->load, err, sizeof(err)) != NPU_OK) {
        trace_free(t);
        return npuctl_usage_error("%s: %s", o->trace, err);
    }
    o->requests = t->n;
    /* as served: --request-rate, else the trace's mean rate by the same rule as the
       summary's measured arrival_rate, (n - 1) / (last - first arrival) */
    const double span_s = (t->e[t->n - 1].timestamp_ms - t->e[0].timestamp_ms) / 1e3;
    o->rate = o->load.rate != 0 ? o->load.rate
              : t->n < 2        ? NAN
              : span_s > 0      ? (double)(t->n - 1) / span_s
                                : INFINITY;
    return 0;
}

/* DIR/trace.bin for the image's chip, and DIR/trace.jsonl as served (functional runs and
   traces the load knobs changed). */
static int write_blob(const struct serve_opts *o, const struct npu_image_header *h,
                      const struct model_config *cfg, struct rt_trace *t, uint64_t *blob_bytes)
{
    char err[NPUCTL_ERR_MAX], path[NPUCTL_PATH_MAX];
    uint64_t room = 0;
    int rc = trace_room(o, h, &room);
    if (rc)
        return rc;
    void *blob = NULL;
    size_t bytes = 0;
    const bool functional = h->plan.mode == NPU_IMAGE_FUNCTIONAL;
    const bool loaded = o->load.num_prompts || o->load.rate != 0;
    const struct rt_blob_opts bo = { .with_ids = functional, .vocab = cfg->vocab_size,
                                     .seed = o->seed, .room = room,
                                     .hash_block = o->hash_block };
    if (functional && o->prefix_cache &&
        trace_check_hash_ids(t, o->hash_block, err, sizeof(err)) != NPU_OK)
        return npuctl_usage_error("%s: %s", o->trace, err);
    rc = trace_blob_build(t, &bo, &blob, &bytes, err, sizeof(err))
             ? npuctl_usage_error("%s: %s", o->trace, err) : 0;
    if (rc == 0 && (functional || loaded))
        rc = write_served_trace(o, t, cfg->vocab_size, functional);
    snprintf(path, sizeof(path), "%s/trace.bin", o->out);
    if (rc == 0)
        rc = write_file(path, blob, bytes);
    *blob_bytes = bytes;
    free(blob);
    return rc;
}

/* Trace, image and blob into the output directory; the image's header and model back. */
static int prepare(struct serve_opts *o, struct npu_image_header *h, struct model_config *cfg,
                   uint64_t *image_bytes, uint64_t *blob_bytes)
{
    char err[NPUCTL_ERR_MAX], path[NPUCTL_PATH_MAX];
    struct rt_trace t;
    int rc = read_trace(o, &t);
    if (rc)
        return rc;
    struct npu_built_image img = { 0 };
    snprintf(path, sizeof(path), "%s/plan.txt", o->out);
    FILE *plan = fopen(path, "w");
    rc = plan ? npuctl_image_build(&o->image, &img, cfg, plan)
              : npuctl_usage_error("cannot write %s: %s", path, strerror(errno));
    if (plan && fclose(plan) && rc == 0)
        rc = npuctl_usage_error("cannot write %s", path);
    if (rc == 0 && trace_check_ids(&t, cfg->vocab_size, err, sizeof(err)))
        rc = npuctl_usage_error("%s", err);
    if (rc == 0) {
        memcpy(h, img.data, sizeof(*h));
        *image_bytes = img.bytes;
        rc = check_sched(o, h, cfg->num_layers);
    }
    if (rc == 0 && o->decode_cores.set)
        rc = serve_hetero_write_chip(o, img.data);
    if (rc == 0 && o->layer_reuse && h->plan.mode == NPU_IMAGE_FUNCTIONAL)
        rc = npuctl_usage_error("--layer-reuse %s needs --mode performance (a functional "
                                "run computes every layer)", serve_reuse_names[o->layer_reuse]);
    snprintf(path, sizeof(path), "%s/model.img", o->out);
    if (rc == 0)
        rc = write_file(path, img.data, img.bytes);
    if (rc == 0)
        rc = write_blob(o, h, cfg, &t, blob_bytes);
    if (img.data)
        npu_built_image_free(&img);
    trace_free(&t);
    return rc;
}

/* summary.json (labels, vLLM's run keys), requests.csv, tokens.csv and trace.json; 0 or
   the first error (printed). */
static int write_outputs(const struct serve_opts *o, const struct npu_image_header *h,
                         const struct rt_summary *s, const struct rt_serve_log *log,
                         const char *sched_params)
{
    char err[NPUCTL_ERR_MAX], path[NPUCTL_PATH_MAX], tokens[NPUCTL_PATH_MAX];
    char rate[32], date[32];
    snprintf(rate, sizeof(rate), isnan(o->rate) ? "-" : "%.6g", o->rate);
    strftime(date, sizeof(date), "%Y%m%d-%H%M%S", gmtime(&o->started));
    const struct rt_run_keys run = {
        .date = date, .backend = "npu-mesh", .model_id = h->model_name,
        .request_rate = o->rate, .burstiness = o->load.rate != 0 ? o->load.burstiness : NAN,
        .max_concurrency = o->max_concurrency };
    const struct rt_label own[] = {
        { "chip", h->chip_name }, { "model", h->model_name },
        { "sched", rt_sched_kind_name(o->sched.kind) }, { "sched_params", sched_params },
        { "mode", h->plan.mode ? "performance" : "functional" }, { "trace", o->trace },
        { "request_rate", rate }, { "layer_reuse", serve_reuse_names[o->layer_reuse] },
        { "decode_cores", o->decode_cores.set ? o->decode_cores.spec : "-" },
        { "prefix_cache", o->prefix_cache ? "on" : "off" } };
    struct rt_label labels[sizeof(own) / sizeof(own[0]) + SERVE_LABELS_MAX];
    size_t nlabels = sizeof(own) / sizeof(own[0]); /* serve's own, then --label's */
    memcpy(labels, own, sizeof(own));
    for (uint32_t i = 0; i < o->nlabels; i++)
        labels[nlabels++] = (struct rt_label){ o->labels[i].key, o->labels[i].value };
    snprintf(path, sizeof(path), "%s/summary.json", o->out);
    int rc[3]; /* each written whatever happened to the others */
    rc[0] = metrics_write_summary_json(path, s, &o->slo, labels, nlabels, &run, log, err,
                                       sizeof(err));
    if (rc[0])
        npuctl_print_error("%s", err);
    snprintf(path, sizeof(path), "%s/requests.csv", o->out);
    snprintf(tokens, sizeof(tokens), "%s/tokens.csv", o->out);
    char base[NPUCTL_PATH_MAX]; /* the run's name: its `run` label, else --out's last part */
    const char *name = NULL;
    for (uint32_t i = 0; i < o->nlabels; i++)
        name = !strcmp(o->labels[i].key, "run") ? o->labels[i].value : name;
    if (!name) {
        snprintf(base, sizeof(base), "%s", o->out);
        for (size_t n = strlen(base); n > 1 && base[n - 1] == '/'; n--)
            base[n - 1] = '\0';
        const char *slash = strrchr(base, '/');
        name = slash && slash[1] ? slash + 1 : base;
    }
    if ((rc[1] = metrics_write_requests_csv(path, tokens, log, &o->slo, name, err,
                                            sizeof(err))))
        npuctl_print_error("%s", err);
    snprintf(path, sizeof(path), "%s/trace.json", o->out);
    if ((rc[2] = metrics_write_perfetto_labelled(path, log, labels, nlabels, err, sizeof(err))))
        npuctl_print_error("%s", err);
    return rc[0] || rc[1] || rc[2];
}

/* Turns the console into the outputs and prints the report; 0 if the run was whole. After a
   failed run (exit_rc: QEMU's status, or NPUCTL_EXIT_TIMEOUT) every request that did not
   end is marked failed with the run's cause, and the summary says the run is incomplete. */
static int report(const struct serve_opts *o, const struct npu_image_header *h, int exit_rc)
{
    char err[NPUCTL_ERR_MAX], path[NPUCTL_PATH_MAX], sched_params[160];
    struct rt_serve_log log;
    snprintf(path, sizeof(path), "%s/console.log", o->out);
    if (serve_log_parse(path, &log, err, sizeof(err)) != NPU_OK) {
        serve_log_free(&log);
        return npuctl_usage_error("%s", err);
    }
    serve_log_fail_unended(&log, exit_rc == NPUCTL_EXIT_TIMEOUT);
    struct rt_summary s = { 0 };
    snprintf(path, sizeof(path), "%s/chip_stats.json", o->out);
    if (metrics_read_chip_stats(path, &s.energy, &s.hbm_bytes, &s.noc_byte_hops, err,
                                sizeof(err)) != NPU_OK)
        npuctl_print_error("%s (energy and traffic left out)", err);
    metrics_summarise(&log, &o->slo, &s); /* keeps what the chip stats gave */
    serve_opts_describe(o, sched_params, sizeof(sched_params));
    int rc = write_outputs(o, h, &s, &log, sched_params);
    printf("serve: %.64s on %.64s (%s), %s %s, trace %s\n", h->model_name, h->chip_name,
           h->plan.mode ? "performance" : "functional", rt_sched_kind_name(o->sched.kind),
           sched_params, o->trace);
    metrics_print_report(stdout, &s, &o->slo);
    printf("outputs: %s/{summary.json,requests.csv,tokens.csv,trace.json,console.log}\n",
           o->out);
    bool whole = log.done && s.completed + s.rejected == s.total && s.total == o->requests;
    if (!whole)
        npuctl_print_error("the run is incomplete: %zu of %zu requests finished or rejected, "
                           "%zu failed (%s; see %s/console.log)", s.completed + s.rejected,
                           o->requests, s.failed, s.failure[0] ? s.failure : "no cause",
                           o->out);
    /* a run that served nothing is no success, however cleanly it ended */
    const bool none = whole && s.total > 0 && s.rejected == s.total;
    if (none)
        npuctl_print_error("every one of the %zu requests was rejected: nothing was served "
                           "(the reasons: %s/requests.csv, column reason)", s.total, o->out);
    serve_log_free(&log);
    return whole && !none && !rc ? 0 : 1;
}

/* --out: a run's outputs are not mixed with an earlier run's (whose summary.json a reader
   would take for this run's): a directory holding a summary.json or a console.log is
   refused, or with --force those outputs are removed first (nothing else in it). */
static int claim_out(const struct serve_opts *o)
{
    static const char *const outputs[] = {
        "summary.json", "requests.csv", "tokens.csv", "trace.json", "console.log",
        "chip_stats.json", "plan.txt", "model.img", "trace.bin", "trace.jsonl", "chip.toml" };
    char path[NPUCTL_PATH_MAX];
    struct stat st;
    bool earlier = false;
    for (size_t i = 0; i < 5 && !earlier; i += 4) { /* summary.json, console.log */
        snprintf(path, sizeof(path), "%s/%s", o->out, outputs[i]);
        earlier = stat(path, &st) == 0;
    }
    if (earlier && !o->force)
        return npuctl_usage_error("--out %s holds an earlier run's outputs: give another "
                                  "directory, or --force to replace them", o->out);
    for (size_t i = 0; earlier && i < sizeof(outputs) / sizeof(outputs[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", o->out, outputs[i]);
        if (remove(path) && errno != ENOENT)
            return npuctl_usage_error("--force: cannot remove %s: %s", path, strerror(errno));
    }
    return 0;
}

/* The model and chip names, checked before --out is made: a typo names the closest known
   names and leaves nothing behind. */
static int check_names(const struct serve_opts *o)
{
    static struct chip_config chip;
    char err[NPUCTL_ERR_MAX], path[NPUCTL_PATH_MAX];
    if (npuctl_find_model(o->image.model, path, sizeof(path), err, sizeof(err)) ||
        npuctl_load_chip(o->image.chip, &chip, path, sizeof(path), err, sizeof(err)))
        return npuctl_usage_error("%s", err);
    return 0;
}

int npuctl_cmd_serve(int argc, char **argv)
{
    struct serve_opts o;
    int rc = serve_opts_parse(argc, argv, &o);
    if (rc || o.help)
        return rc;
    o.started = time(NULL);
    if ((rc = check_names(&o)))
        return rc;
    struct stat st;
    if (mkdir(o.out, 0755) && (errno != EEXIST || stat(o.out, &st) || !S_ISDIR(st.st_mode)))
        return npuctl_usage_error("--out %s: cannot make this directory", o.out);
    if ((rc = claim_out(&o)))
        return rc;
    struct npu_image_header h;
    struct model_config cfg;
    uint64_t image_bytes = 0, blob_bytes = 0;
    rc = prepare(&o, &h, &cfg, &image_bytes, &blob_bytes);
    if (rc)
        return rc;
    bool ran = false;
    rc = serve_launch(&o, &h, &ran, image_bytes, blob_bytes);
    if (!ran) /* refused before the chip started: nothing to report */
        return rc;
    int rep = report(&o, &h, rc); /* also after a fault: every request is accounted for */
    return rc ? rc : rep;
}
