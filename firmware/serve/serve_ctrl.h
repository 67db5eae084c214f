/* SPDX-License-Identifier: MIT */
/* Serve image, control core: the run's state shared by its files (serve_ctrl.c). */
#ifndef SERVE_CTRL_H
#define SERVE_CTRL_H

#include <stdbool.h>
#include <stdint.h>

#include "npu_image.h"
#include "rt/kvc.h"
#include "rt/mailbox.h"
#include "rt/sched.h"
#include "rt/sched_pd.h"
#include "rt/trace_blob.h"

/* One instance of the plan: its cores, mailbox and KV cache. */
struct serve_inst {
    struct rt_mailbox *mb;
    uint32_t cores[RT_MB_CORES_MAX];
    uint32_t ncores;
    uint32_t seq;                     /* rounds posted to its cores */
    uint32_t n;                       /* the log's number of the iteration it runs */
    uint64_t t0;                      /* chip time that iteration was posted */
    struct rt_kvc kvc;
    struct rt_iter_plan it;           /* pd-disagg: the iteration it runs */
};

struct serve {
    const struct npu_image_header *image;
    const void *blob;                 /* the trace, checked */
    struct rt_request *reqs;          /* [nreqs] */
    uint32_t nreqs, vocab, max_seq;
    uint32_t max_concurrency;         /* requests in flight at most (0: no limit) */
    uint32_t *last_token;             /* [nreqs]: each request's newest token */
    bool *announced;                  /* [nreqs]: its admit line is printed */
    bool pd_mode;                     /* --sched pd-disagg: pd, else sched on instance 0 */
    struct rt_sched sched;
    /* plan.disagg (serve_disagg.c): replica k's scheduler dsched[k] over instance k, the
       expert instance the last; `arrived`: requests whose arrive line is out */
    bool disagg;
    uint32_t nrep, arrived;
    enum rt_dispatch dispatch;        /* how arrivals are dealt to the replicas */
    uint8_t *owner;                   /* [nreqs] with dispatch load or prefix, else NULL */
    struct rt_sched dsched[RT_MB_INSTANCES_MAX];
    struct rt_pd pd;
    struct serve_inst inst[RT_MB_INSTANCES_MAX];
    uint32_t ninst;
    uint32_t iterations;              /* iterations posted, over every instance */
    uint32_t answers;                 /* RT_SEM_DONE answers taken */
    bool engine_trace;
    bool prefix_cache;                /* --prefix-cache on: admit lines say what was cached */
    const char *abort_reason;         /* the first abort's reason, NULL if none */
    bool begun;                       /* the begin line is printed (requests are known) */
};

/* serve_iter.c: writes instance i's mailbox for `it` and starts its cores. 0, or
   NPU_ERR_NOMEM (printed) if the mailbox cannot hold the iteration. */
int serve_post(struct serve *sv, uint32_t i, const struct rt_iter_plan *it);
/* Whether instance i's cores all answered its last round. */
bool serve_answered(const struct serve *sv, uint32_t i);
/* Waits for one more answer from any instance, or until deadline_ps (UINT64_MAX: none).
   0 (an answer or the deadline), or the wait's error (a deadline past the chip clock). */
int serve_wait_answer(struct serve *sv, uint64_t deadline_ps);
/* Instance i's iteration `it` ran: its tokens and its line. 0, or the failure (printed). */
int serve_finish(struct serve *sv, uint32_t i, const struct rt_iter_plan *it);
/* Starts instance i's cores on a round with no runs (a disaggregated plan's idle replica,
   or its expert instance): not an iteration of the log. */
void serve_post_round(struct serve *sv, uint32_t i);
/* Instance 0: post, wait, finish. */
int serve_run_iteration(struct serve *sv, struct rt_iter_plan *it);
/* Posts STOP to each instance in turn and waits for its reports. */
void serve_stop_cores(struct serve *sv);

/* serve_ctrl.c: `SERVE abort reason=REASON DETAIL`, DETAIL printf-formatted (rt/lines.h). */
void serve_print_abort(const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prints the abort line; its reason (a string constant) becomes the run's cause if it is
   the first. */
void serve_abort(const struct lines_serve_abort *a);
/* serve_ctrl.c: the arrive / admit / finish lines. serve_take_arrivals: the requests due
   by now arrive, as many as --max-concurrency lets (call it again once requests ended). */
void serve_take_arrivals(struct serve *sv);
void serve_announce_admissions(struct serve *sv, const struct rt_iter_plan *it);
/* Admit lines of s's running requests not announced yet. */
void serve_announce_running(struct serve *sv, const struct rt_sched *s);
void serve_announce_finishes(struct serve *sv, const struct rt_iter_plan *it);

/* serve_disagg.c: attention/expert disaggregation (plan.disagg): one scheduler a replica
   (sp's policy over its requests), the arrivals of every replica (the count of requests
   that arrived, from sv->arrived on, which it advances), every request served, and the
   run's totals. */
int serve_disagg_init(struct serve *sv, const struct rt_sched_params *sp, char *err,
                      size_t errlen);
uint32_t serve_disagg_arrive(struct serve *sv, uint64_t now);
int serve_disagg_all(struct serve *sv);
uint32_t serve_disagg_finished(const struct serve *sv);
uint32_t serve_disagg_rejected(const struct serve *sv);

/* serve_pd.c: serves every request with PD disaggregation; 0 or the error (printed). */
int serve_pd_all(struct serve *sv);
int serve_pd_init(struct serve *sv, uint32_t layers, char *err, size_t errlen);

#endif
