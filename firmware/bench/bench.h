/* SPDX-License-Identifier: MIT */
/*
 * Shared pieces of the benchmark images (docs/benchmarks.md).
 *
 * Every benchmark image has the same control core (bench_ctrl.c): it prints the chip's
 * parameters as one `BENCH chip ...` line, releases the NPU cores, waits until each has
 * posted BENCH_DONE_SEM and prints `BENCH end ...`. The cores run the cases and print one
 * `BENCH <kind> key=value ...` line per measurement (the BENCH kinds of rt/lines.h);
 * `npuctl bench` turns those lines into tables. Measurements are chip time read with hal_time_ps(): a case's time runs from the
 * moment the hart issues its first command to the moment it (or the observing core) wakes
 * on the completion semaphore.
 *
 * Cases that involve several cores start at absolute chip times ("slots") that every core
 * computes the same way from the same case list, so no barrier traffic disturbs them.
 *
 * Options come from the devicetree's bootargs (QEMU -append), as `key=value` words or bare
 * words (`quick`).
 */
#ifndef BENCH_H
#define BENCH_H

#include <stdbool.h>
#include <stdint.h>

#include "npu/engine.h"
#include "rt/lines.h"

#define BENCH_DONE_SEM 0u        /* on the control core: one increment per NPU core */
#define BENCH_SLOT_BASE_PS 10000000ull /* 10 us: first slot, after the release */

/* Start of this core's free SRAM (past the image, 64 KiB aligned) and its size. */
uint64_t bench_data_base(void);
uint64_t bench_data_bytes(void);
/* This core's share of HBM: hbm_size / ncores bytes. */
uint64_t bench_hbm_base(void);

/* Whether bootargs hold the bare word `word`; the value of `key=` (default if absent). */
bool bench_has_flag(const char *word);
uint64_t bench_arg_u64(const char *key, uint64_t def);

/* A sync that adds 1 to semaphore `sem` of core `core` on completion. */
struct engine_sync bench_signal(uint32_t core, uint32_t sem);

/* Picosecond figures of the chip: one command, and `bytes` at `gbps` (10^9 B/s). */
uint64_t bench_cmd_ps(void);
double bench_xfer_ps(uint64_t bytes, uint32_t gbps);

/*
 * Submits descs[0..n) (in chunks of NPU_SUBMIT_MAX) and waits until local semaphore `sem`
 * reaches `value`. Returns 0 or the chip's refusal (printed as a BENCH error line).
 */
int bench_submit_wait(const struct npu_desc *descs, uint32_t n, uint32_t sem, uint32_t value);

/* Sleeps until absolute chip time t; returns how late the hart already was (0 if on time). */
uint64_t bench_sleep_until(uint64_t t);

/* A note for the reader: `BENCH skip|warn|error TEXT` (kind LINES_BENCH_SKIP, _WARN or
   _ERROR), TEXT printf-formatted. */
void bench_print_note(enum lines_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Tells the control core this core is done; returns the core's exit status. */
int bench_done(int status);

#endif
