/* SPDX-License-Identifier: MIT */
/*
 * Serve image, control core (docs/serving.md): checks the model image and the trace blob,
 * then serves: requests join at their arrival times in chip time, the scheduler chosen by
 * the bootargs plans each iteration (runtime/), the cores run it (serve_iter.c), and every
 * event is printed as a `SERVE ...` line (rt/lines.h) for npuctl serve to turn into
 * metrics. When nothing can run the control core sleeps until the next arrival; the chip
 * clock jumps there. Bootargs: image_bytes=, trace_bytes=, sched=NAME, chunk=, groups=,
 * group_tokens=, budget=, prefill_units=, engine_trace, prefix_cache.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_config.h"
#include "model_setup.h"
#include "npu/hal.h"
#include "npu/wait.h"
#include "npu_layout.h"
#include "rt/kvc_plan.h"
#include "rt/lines.h"
#include "serve_ctrl.h"

static struct serve sv;

void serve_print_abort(const char *reason, const char *fmt, ...)
{
    char detail[240];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    serve_abort(&(struct lines_serve_abort){
        .reason = reason, .detail = detail, .absent = { .queue = true, .n = true } });
}

void serve_abort(const struct lines_serve_abort *a)
{
    if (!sv.abort_reason)
        sv.abort_reason = a->reason; /* a string constant: the first abort is the cause */
    lines_print_serve_abort(a);
}

/* After a failed run every request that has not ended ends failed, with the abort's
   reason (docs/serving.md, "Faults"): nothing is lost. Only once the begin line is out: a
   set-up that fails before it is a refusal of the whole run (the host reads no requests
   without it). */
static void fail_unended(void)
{
    if (!sv.begun)
        return;
    const uint64_t t = hal_time_ps();
    for (uint32_t i = 0; i < sv.nreqs; i++)
        if (sv.reqs[i].state != RT_REQ_FINISHED && sv.reqs[i].state != RT_REQ_REJECTED)
            lines_print_serve_fail(&(struct lines_serve_fail){
                .id = i, .t = t, .reason = sv.abort_reason ? sv.abort_reason : "aborted" });
}

static uint32_t bootarg_u32(const char *key, uint32_t dflt)
{
    const char *v = hal_bootarg_value(key);
    return v ? (uint32_t)strtoul(v, NULL, 10) : dflt;
}

/* The trace blob QEMU's loader put in DRAM; 0 or the error (printed). */
static int load_trace(void)
{
    const char *arg = hal_bootarg_value("trace_bytes");
    uint64_t room = hal_chip()->dram_size - RT_TRACE_DRAM_OFFSET;
    uint64_t bytes = arg ? strtoull(arg, NULL, 10) : 0;
    char err[200];
    if (!arg || bytes > room) {
        serve_print_abort("bad_trace", "no trace_bytes= bootarg, or more than %" PRIu64
                          " bytes (run with npuctl serve)", room);
        return NPU_ERR_INVAL;
    }
    sv.blob = (const void *)(uintptr_t)(hal_chip()->dram_base + RT_TRACE_DRAM_OFFSET);
    int rc = rt_blob_check(sv.blob, bytes, err, sizeof(err));
    if (rc != NPU_OK)
        serve_print_abort("bad_trace", "%s", err);
    return rc;
}

/* Requests from the blob; ids are checked against the vocabulary. */
static int make_requests(void)
{
    const struct rt_blob_header *h = sv.blob;
    const struct rt_blob_req *b = rt_blob_reqs(sv.blob);
    sv.nreqs = h->count;
    sv.reqs = calloc(sv.nreqs ? sv.nreqs : 1, sizeof(*sv.reqs));
    sv.last_token = calloc(sv.nreqs ? sv.nreqs : 1, sizeof(*sv.last_token));
    sv.announced = calloc(sv.nreqs ? sv.nreqs : 1, sizeof(*sv.announced));
    if (!sv.reqs || !sv.last_token || !sv.announced) {
        serve_print_abort("no_memory", "%" PRIu32 " requests", sv.nreqs);
        return NPU_ERR_NOMEM;
    }
    const uint32_t *ids = rt_blob_ids(sv.blob);
    for (uint32_t i = 0; i < sv.nreqs; i++) {
        sv.reqs[i] = (struct rt_request){ .id = i, .arrival_ps = b[i].arrival_ps,
                                          .input_len = b[i].input_len,
                                          .output_len = b[i].output_len };
        for (uint32_t j = 0; b[i].ids_first != RT_BLOB_NO_IDS && j < b[i].input_len; j++)
            if (ids[b[i].ids_first + j] >= sv.vocab) {
                serve_print_abort("bad_trace", "request %" PRIu32 ": token %" PRIu32 " = %"
                                  PRIu32 " is not below vocab_size %" PRIu32, i, j,
                                  ids[b[i].ids_first + j], sv.vocab);
                return NPU_ERR_RANGE;
            }
    }
    return NPU_OK;
}

/* Request req's prompt hashes from the trace blob (rt_sched_prefix_fn). */
static void blob_prefix(const void *blob, uint32_t req, struct rt_kv_prefix *p)
{
    const struct rt_blob_header *h = blob;
    const struct rt_blob_req *b = &rt_blob_reqs(blob)[req];
    *p = (struct rt_kv_prefix){ .hash = b->nhash ? rt_blob_hashes(blob) + b->hash_first : NULL,
                                .nhash = b->nhash, .hash_block = h->hash_block,
                                .input_len = b->input_len };
}

/* --prefix-cache: a prefix index for each scheduler's KV cache, and the blob's hashes as
   the schedulers' source (serving.md, "Prefix caching"). */
static int attach_prefix_caches(char *err, size_t errlen)
{
    if (!hal_bootarg_has("prefix_cache"))
        return NPU_OK;
    /* pd-disagg: the prefill instances' caches (a decode instance takes whole prompts) */
    const uint32_t n = sv.pd_mode ? sv.ninst : sv.disagg ? sv.nrep : 1;
    sv.prefix_cache = true;
    for (uint32_t i = 0; i < n; i++) {
        if (sv.pd_mode && sv.pd.inst[i].role != RT_PD_PREFILL)
            continue;
        struct rt_kvc_index *px = malloc(sizeof(*px)); /* kvc_prefix_attach clears it */
        if (!px) {
            snprintf(err, errlen, "no memory for the prefix index of instance %" PRIu32, i);
            return NPU_ERR_NOMEM;
        }
        kvc_prefix_attach(&sv.inst[i].kvc, px);
        if (!sv.pd_mode)
            sched_prefix_source(sv.disagg ? &sv.dsched[i] : &sv.sched, blob_prefix, sv.blob);
    }
    if (sv.pd_mode)
        pd_prefix_source(&sv.pd, blob_prefix, sv.blob);
    return NPU_OK;
}

/* Every instance's KV manager, then the scheduler from the image's plan and the bootargs. */
static int make_scheduler(uint32_t layers)
{
    const struct npu_plan *p = &sv.image->plan;
    struct rt_kvc_config kc = rt_kvc_config_of_plan(p);
    kc.ring_paged = hal_bootarg_has("prefix_cache"); /* its ring blocks are shared too */
    const char *name = hal_bootarg_value("sched");
    char kind[24] = "chunked", err[160] = "";
    if (name)
        snprintf(kind, sizeof(kind), "%.*s", (int)strcspn(name, " "), name);
    int k = rt_sched_kind_parse(kind), rc = k < 0 ? NPU_ERR_INVAL : NPU_OK;

    for (uint32_t i = 0; rc == NPU_OK && i < sv.ninst; i++)
        rc = kvc_init(&sv.inst[i].kvc, &kc);
    if (rc != NPU_OK)
        snprintf(err, sizeof(err), "scheduler '%s' or KV cache (%u blocks) refused", kind,
                 p->kv_sram_blocks);
    sv.pd_mode = k == RT_SCHED_PD_DISAGG;
    struct rt_sched_params sp = {
        .kind = (enum rt_sched_kind)k, .num_layers = layers,
        .max_batch = p->max_batch, .max_tokens = p->max_tokens,
        .chunk = bootarg_u32("chunk", 512), .groups = bootarg_u32("groups", 0),
        .group_tokens = bootarg_u32("group_tokens", 512), .budget = bootarg_u32("budget", 0),
        .prefill_units = bootarg_u32("prefill_units", 0) };
    if (rc == NPU_OK && p->disagg && sv.pd_mode) {
        snprintf(err, sizeof(err), "a disaggregated plan (--roles disagg) runs its replicas "
                 "with one of the other schedulers, not pd-disagg");
        rc = NPU_ERR_INVAL;
    } else if (rc == NPU_OK && p->disagg)
        rc = serve_disagg_init(&sv, &sp, err, sizeof(err));
    else if (rc == NPU_OK && sv.pd_mode)
        rc = serve_pd_init(&sv, layers, err, sizeof(err));
    else if (rc == NPU_OK && sv.ninst > 1) {
        snprintf(err, sizeof(err), "the image has %u instances: only --sched pd-disagg runs "
                 "more than one", sv.ninst);
        rc = NPU_ERR_INVAL;
    } else if (rc == NPU_OK)
        rc = sched_init(&sv.sched, &sp, sv.reqs, sv.nreqs, &sv.inst[0].kvc, err, sizeof(err));
    if (rc == NPU_OK)
        rc = attach_prefix_caches(err, sizeof(err));
    if (rc != NPU_OK)
        serve_print_abort("bad_sched", "%s", err);
    else
        lines_print_serve_begin(&(struct lines_serve_begin){
            .requests = sv.nreqs, .sched = kind, .layers = layers, .blocks = kc.sram_blocks,
            .ring = kc.ring_rows, .instances = sv.ninst });
    sv.begun = rc == NPU_OK;
    return rc;
}

/* The plan's cores by instance, and each instance's mailbox. */
static int find_cores(void)
{
    const struct npu_image_core *cores = (const void *)((const uint8_t *)sv.image +
                                                        sv.image->cores_off);
    sv.ninst = sv.image->plan.instances;
    if (sv.ninst > RT_MB_INSTANCES_MAX) {
        serve_print_abort("bad_image", "%" PRIu32 " instances: the control core serves at "
                          "most %u", sv.ninst, RT_MB_INSTANCES_MAX);
        return NPU_ERR_RANGE;
    }
    for (uint32_t i = 0; i < sv.ninst; i++) {
        sv.inst[i].mb = rt_mailbox_at(hal_chip()->dram_base, i);
        memset(sv.inst[i].mb, 0, sizeof(*sv.inst[i].mb));
    }
    for (uint32_t c = 0; c < sv.image->cores_count; c++)
        if (cores[c].rank != NPU_IMAGE_IDLE) {
            if (c >= RT_MB_CORES_MAX) {
                serve_print_abort("bad_image", "core %" PRIu32 " is beyond the mailbox's "
                                  "%u cores", c, RT_MB_CORES_MAX);
                return NPU_ERR_RANGE;
            }
            struct serve_inst *in = &sv.inst[cores[c].instance];
            in->cores[in->ncores++] = c;
        }
    return NPU_OK;
}

static int setup(void)
{
    int rc = model_image_check();
    if (rc != NPU_OK)
        return rc;
    sv.image = (const void *)(uintptr_t)hal_chip()->hbm_base;
    struct model_config cfg;
    char err[200];
    rc = model_config_parse(&cfg, (const char *)sv.image + sv.image->config_off,
                            "image:config", err, sizeof(err));
    if (rc != NPU_OK) {
        serve_print_abort("bad_image", "%s", err);
        return rc;
    }
    sv.vocab = cfg.vocab_size, sv.max_seq = sv.image->plan.max_seq;
    sv.engine_trace = hal_bootarg_has("engine_trace");
    sv.max_concurrency = bootarg_u32("max_concurrency", 0);
    extern char __image_end[];
    if ((uint64_t)(uintptr_t)__image_end > hal_chip()->dram_base + RT_MAILBOX_DRAM_OFFSET ||
        hal_chip()->dram_size < RT_TRACE_DRAM_OFFSET) {
        serve_print_abort("bad_image", "the control image or the DRAM size leaves no room "
                          "for the mailboxes at DRAM + %u MiB", RT_MAILBOX_DRAM_OFFSET >> 20);
        return NPU_ERR_NOMEM;
    }
    rc = find_cores();
    if (rc != NPU_OK)
        return rc;
    rc = load_trace();
    if (rc == NPU_OK)
        rc = make_requests();
    if (rc == NPU_OK)
        rc = make_scheduler(cfg.num_layers);
    return rc;
}

/* --max-concurrency (vLLM's benchmark client): at most that many requests in flight
   (arrived and not ended); the next one due beyond them is held by its client, with every
   later one (a client sends in order), and sent when one ends: it arrives then, and its
   TTFT counts from then. A held request's arrival is UINT64_MAX until released, so the
   schedulers' scans stop at it and their next arrival is "none": the control core waits
   for an answer, which is when a request can end. The callers run this right after
   requests ended (after an iteration, and under PD disaggregation after each round of
   answers), so "now" is when the slot freed. */
static void hold_arrivals(struct serve *v, uint32_t first, uint64_t now)
{
    uint32_t in_flight = 0;
    for (uint32_t i = 0; i < first; i++)
        in_flight += v->reqs[i].state == RT_REQ_QUEUED || v->reqs[i].state == RT_REQ_RUNNING;
    for (uint32_t i = first; i < v->nreqs; i++) {
        struct rt_request *q = &v->reqs[i];
        if (!q->held && q->arrival_ps > now)
            break; /* not due yet, nor any later one */
        if (q->state != RT_REQ_FUTURE) /* refused by the loader: never in flight */
            continue;
        if (in_flight < v->max_concurrency) {
            in_flight++;
            q->arrival_ps = q->held ? now : q->arrival_ps, q->held = false;
        } else {
            q->held = true, q->arrival_ps = UINT64_MAX;
        }
    }
}

/* The requests due by now arrive: their arrive lines, and reject lines for those refused.
   Returns whether one was refused at arrival. */
static bool arrive(struct serve *v, uint64_t now)
{
    const uint32_t first = v->disagg    ? v->arrived
                           : v->pd_mode ? v->pd.next_arrival
                                        : v->sched.next_arrival;
    if (v->max_concurrency)
        hold_arrivals(v, first, now);
    const uint32_t n = v->disagg    ? serve_disagg_arrive(v, now)
                       : v->pd_mode ? pd_arrive(&v->pd, now, v->max_seq)
                                    : sched_arrive(&v->sched, now, v->max_seq);
    bool refused = false;
    for (uint32_t i = first; i < first + n; i++) {
        const struct rt_request *q = &v->reqs[i];
        lines_print_serve_arrive(&(struct lines_serve_arrive){
            .id = i, .t = q->arrival_ps, .input = q->input_len, .output = q->output_len });
        if (q->state == RT_REQ_REJECTED)
            lines_print_serve_reject(&(struct lines_serve_reject){
                .id = i, .t = now, .reason = rt_reject_reason_name(q->reject) });
        refused |= q->state == RT_REQ_REJECTED;
    }
    return refused;
}

void serve_take_arrivals(struct serve *v)
{
    const uint64_t now = hal_time_ps();
    bool refused;
    do /* under a limit, one refused at arrival was never in flight: its slot goes on */
        refused = arrive(v, now);
    while (refused && v->max_concurrency);
}

static void announce(struct serve *v, uint32_t r, const struct rt_kv_seq *kv)
{
    if (v->announced[r])
        return;
    v->announced[r] = true;
    lines_print_serve_admit(&(struct lines_serve_admit){
        .id = r, .t = hal_time_ps(), .blocks = kv->reserved, .ring = kv->ring_rows,
        .cached = v->reqs[r].cached, .absent = { .cached = !v->prefix_cache } });
}

/* Admit lines of the requests just admitted (pd-disagg: to a prefill instance). */
void serve_announce_admissions(struct serve *v, const struct rt_iter_plan *it)
{
    if (v->pd_mode) {
        for (uint32_t i = 0; i < it->nruns; i++)
            if (it->runs[i].prefill)
                announce(v, it->runs[i].req, &v->pd.pkv[it->runs[i].req]);
        return;
    }
    serve_announce_running(v, &v->sched);
}

void serve_announce_running(struct serve *v, const struct rt_sched *s)
{
    for (uint32_t i = 0; i < s->nrunning; i++)
        announce(v, s->running[i], &v->reqs[s->running[i]].kv);
}

/* Finish lines of the iteration's requests that are done. */
void serve_announce_finishes(struct serve *v, const struct rt_iter_plan *it)
{
    for (uint32_t i = 0; i < it->nruns; i++) {
        const struct rt_request *q = &v->reqs[it->runs[i].req];
        if (q->state == RT_REQ_FINISHED && it->runs[i].wants_token)
            lines_print_serve_finish(&(struct lines_serve_finish){ .id = it->runs[i].req,
                                                                   .t = hal_time_ps() });
    }
}

/* Serves until every request is finished or rejected; 0 or the error (printed). */
static int serve_all(void)
{
    static struct rt_iter_plan it;
    for (;;) {
        serve_take_arrivals(&sv);
        if (sched_done(&sv.sched))
            return NPU_OK;
        if (sched_next(&sv.sched, &it)) {
            serve_announce_admissions(&sv, &it);
            int rc = serve_run_iteration(&sv, &it);
            if (rc != NPU_OK)
                return rc;
            sched_complete(&sv.sched, &it);
            serve_announce_finishes(&sv, &it);
            continue;
        }
        uint64_t next = sched_next_arrival_ps(&sv.sched);
        if (next == UINT64_MAX) { /* nothing runs, nothing comes, yet not done */
            serve_abort(&(struct lines_serve_abort){
                .reason = "stuck", .queue = sched_queue_len(&sv.sched),
                .absent = { .n = true, .detail = true } });
            return NPU_ERR_STATE;
        }
        if (hal_sleep_until_ps(next) != NPU_OK) { /* the chip clock jumps to the arrival */
            serve_print_abort("clock", "the next arrival at %" PRIu64 " ps is past the chip "
                              "clock's range", next); /* never spin on a refused wait */
            return NPU_ERR_STATE;
        }
    }
}

int main(void)
{
    if (setup() != NPU_OK)
        return NPU_EXIT_FAIL; /* the cores are never released: the run is refused whole */
    hal_release_cores();
    int rc = sv.pd_mode ? serve_pd_all(&sv) : sv.disagg ? serve_disagg_all(&sv) : serve_all();
    uint64_t end = hal_time_ps();
    if (rc != NPU_OK)
        fail_unended();
    serve_stop_cores(&sv);
    if (rc == NPU_OK)
        lines_print_serve_done(&(struct lines_serve_done){
            .t = end,
            .finished = sv.pd_mode ? sv.pd.finished
                        : sv.disagg ? serve_disagg_finished(&sv) : sv.sched.finished,
            .rejected = sv.pd_mode ? sv.pd.rejected
                        : sv.disagg ? serve_disagg_rejected(&sv) : sv.sched.rejected,
            .iterations = sv.iterations });
    return rc == NPU_OK ? NPU_EXIT_OK : NPU_EXIT_FAIL;
}
