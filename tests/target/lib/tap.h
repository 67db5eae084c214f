/* SPDX-License-Identifier: MIT */
/*
 * A small TAP producer for on-target tests (TAP version 13). The control core owns the TAP
 * stream; NPU cores report to it through semaphores and may print "# " diagnostics, which
 * the chip console keeps in chip-time order.
 */
#ifndef TAP_H
#define TAP_H

#include <stdbool.h>

void tap_plan(int count);
/* Records one test point; returns `ok`. */
bool tap_ok(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tap_diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Exit status for main(): NPU_EXIT_OK when every planned point ran and passed. */
int tap_done(void);

#endif
