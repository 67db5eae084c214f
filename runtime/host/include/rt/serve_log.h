/* SPDX-License-Identifier: MIT */
/*
 * What a serving run prints, and its parsed form (docs/serving.md, "Outputs").
 *
 * The lines are defined in rt/lines.h (runtime/lines): the kinds, their keys and types,
 * required or optional, in one table that the firmware prints with and this parser reads
 * with. The control core prints one line per event on the chip console (each console line
 * is "[ T us WHO ] TEXT"; the parser finds the protocol word in TEXT and ignores the rest).
 * Times are chip picoseconds. In short:
 *   SERVE begin requests=N sched=NAME layers=L blocks=B ring=R instances=I
 *   SERVE instance id=I role=prefill|decode cores=N   (pd-disagg: one per instance)
 *   SERVE arrive id=I t=PS input=IN output=OUT  (one per request at its arrival, before
 *         its admit or reject)
 *   SERVE reject id=I t=PS reason=WORD
 *   SERVE admit id=I t=PS blocks=B ring=R [cached=C]  (reserved SRAM blocks, ring rows,
 *                                               prompt tokens found in the prefix cache)
 *   SERVE token id=I n=K t=PS token=T          (K-th output token of request I, from 0)
 *   SERVE finish id=I t=PS
 *   SERVE iter n=N t0=PS t1=PS runs=R prefill=P decode=D group=G groups=NG queue=Q
 *         running=U blocks=USED/TOTAL ring=USED/TOTAL inst=I pulls=K   (one line; the
 *         cache figures are instance I's; pulls: runs whose prompt KV came from a prefill
 *         instance first; pd-disagg runs instances' iterations concurrently)
 *   SERVE engines core=C n=N matrix=PS vector=PS dma=PS noc=PS  (busy time of core C's
 *         engines during iteration N; only with the serve option engine_trace)
 *   SERVE done t=PS finished=F rejected=J iterations=N
 *   SERVE abort reason=WORD ... / SERVE core-failed core=C n=N rc=RC  (a failed run)
 *   SERVE fail id=I t=PS reason=WORD          (a request ended by a failed run)
 * The cores add, at the end (model_report.c):
 *   MODEL rank=R ... expert_load_bytes=B ...
 */
#ifndef RT_SERVE_LOG_H
#define RT_SERVE_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rt_req_record {
    uint32_t id;
    uint32_t input_len, output_len;
    uint64_t arrival_ps;
    bool rejected, finished, admitted;
    bool failed;                 /* ended by a failed run (fail line, or the host's account) */
    bool arrived;                /* its arrive line was seen (arrival_ps, lengths valid) */
    char reason[32];             /* rejected: the reason word; failed: the run's cause */
    uint64_t admit_ps, finish_ps; /* finish_ps of a rejected request: its reject line's t */
    uint32_t cached;             /* prompt tokens its admission found in the prefix cache */
    bool cache_known;            /* its admit line said (the run had --prefix-cache on) */
    uint32_t ntokens;
    uint64_t *token_ps;          /* [ntokens] chip time of each output token */
    uint32_t *tokens;            /* [ntokens] token ids */
};

struct rt_iter_record {
    uint64_t n, t0_ps, t1_ps;
    uint32_t runs, prefill_tokens, decode_tokens, group, groups, queue, running;
    uint32_t blocks_used, blocks_total;
    uint64_t ring_used, ring_total;
    uint32_t inst, pulls;        /* the instance that ran it; KV pulls it made */
    bool cache_known;            /* the instance has a prefix index (iter cached=) */
    uint32_t cached_blocks;      /* blocks in it */
    uint64_t evicted;            /* blocks evicted from it so far */
};

struct rt_engine_record {
    uint32_t core;
    uint64_t n;                  /* iteration */
    uint64_t busy_ps[4];         /* matrix, vector, dma, noc */
};

struct rt_serve_log {
    struct rt_req_record *reqs;  /* [nreqs], indexed by id */
    size_t nreqs;
    struct rt_iter_record *iters;
    size_t niters;
    struct rt_engine_record *engines;
    size_t nengines;
    char sched[32];
    uint32_t layers, blocks_total;
    uint64_t ring_total;
    bool done;                   /* the SERVE done line was seen */
    uint64_t end_ps;
    uint64_t expert_load_bytes;  /* summed over the cores' MODEL rank= lines */
    uint64_t iterations;         /* the done line's iterations= (niters without it) */
    uint32_t prefill_instances, decode_instances; /* pd-disagg's instance lines */
    /* How a run that did not finish ended (docs/serving.md, "Faults"): */
    char stop[160];              /* the machine's "[npu-mesh] stop:" line, "" if none */
    char fatal[160];             /* the first "FATAL:" line (a trap or assertion), "" if none */
    char abort_reason[32];       /* the control core's abort reason, "" if none */
    int32_t failed_core;         /* the first core named by a FATAL, core-failed or stop
                                    line, -1 */
    int32_t failed_rc;           /* the first core-failed line's rc, 0 if none */
    char cause[64];              /* after serve_log_fail_unended: the cause, "" if none */
};

/* Parses a run's console output. Requests are sized from the begin line and get their
   input/output lengths and arrivals from the arrive lines. Unknown keys are ignored; an
   unknown SERVE event, a missing or malformed value (rt/lines.h's decoder), an id out of
   range or a token out of sequence is an error. A log without the done line parses (done = false, end_ps = the
   last time seen): the run did not finish. 0, or NPU_ERR_FORMAT / NPU_ERR_IO /
   NPU_ERR_NOMEM with "PATH:LINE: ..." in err. *log is zeroed first; free it with
   serve_log_free even after an error. */
int serve_log_parse(const char *path, struct rt_serve_log *log, char *err, size_t errlen);
void serve_log_free(struct rt_serve_log *log);

/* After a run without its done line: the cause (log->cause: "trap (core 1)", "assert (core
   1)", "deadlock", "watchdog", "timeout" when the host's --timeout killed the run,
   "core_timeout (core 0)" when a core's collective gave up waiting, "core_failed (core 0)"
   for another error of a core, the control core's abort reason, or "exit") and every request that has not ended (finished, rejected
   or failed by the control core) marked failed with it as its reason, so that every
   request is accounted for. Returns the number it marked. */
size_t serve_log_fail_unended(struct rt_serve_log *log, bool timed_out);

#endif
