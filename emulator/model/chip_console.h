/* SPDX-License-Identifier: MIT */
/*
 * The chip console: every hart writes bytes to its own CON_TX register; the console prints
 * whole lines, each prefixed with the hart's chip time and name.
 *
 * Why lines are held back: harts run in QEMU's host order, which differs between runs and
 * between single- and multi-threaded TCG. A completed line is therefore queued with the key
 * (local chip time, hart, sequence) and printed only when the chip clock steps (no hart runs)
 * or the run ends, in key order. The console output is then a pure function of the inputs.
 * A line longer than CHIP_CONSOLE_LINE_MAX is cut into several lines.
 *
 * After a clock step to time T only lines stamped before T are printed: a hart that runs
 * from T on cannot print anything earlier, so the whole output is in key order.
 *
 * A hart that prints more than CHIP_CONSOLE_HART_LINES lines between two clock steps has
 * the rest dropped (with one line saying so) until the next step, so that firmware printing
 * in a loop cannot exhaust the host's memory.
 */
#ifndef CHIP_CONSOLE_H
#define CHIP_CONSOLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CHIP_CONSOLE_LINE_MAX 240u
#define CHIP_CONSOLE_HART_LINES 16384u

struct chip_console_line {
    uint64_t time_ps;
    uint32_t hart;
    uint32_t len;
    uint64_t seq;
    size_t off;             /* of the text in the console's arena */
};

struct chip_console_partial {
    char buf[CHIP_CONSOLE_LINE_MAX + 1];
    uint32_t len;
    uint32_t queued;        /* lines queued since the last clock step */
    uint64_t seq;
};

struct chip_console {
    uint32_t nharts;        /* the last hart is the control core */
    uint32_t cols;          /* mesh columns, for core coordinates in the prefix */
    struct chip_console_partial *partial; /* per hart */
    struct chip_console_line *pending;
    size_t npending, cap;
    char *arena;            /* text of the pending lines */
    size_t arena_len, arena_cap;
    /* Receives each finished, prefixed line including its '\n'. */
    void (*emit)(void *opaque, const char *text, size_t len);
    void *opaque;
    /* Each line's "[T us WHO] " stamp (chip_console_init sets it); without it the lines
       are the harts' text alone, as a TAP consumer reads the on-target tests. */
    bool stamps;
};

int chip_console_init(struct chip_console *con, uint32_t nharts, uint32_t cols,
                      void (*emit)(void *, const char *, size_t), void *opaque);
void chip_console_destroy(struct chip_console *con);

/* A byte from `hart` whose local time is time_ps. */
int chip_console_putc(struct chip_console *con, uint32_t hart, uint64_t time_ps, char ch);

/* Ends a hart's unfinished line (at exit or on a fault report). */
int chip_console_end_line(struct chip_console *con, uint32_t hart, uint64_t time_ps);

/* Prints every queued line in key order (at the end of a run). */
void chip_console_flush(struct chip_console *con);

/* After a clock step to time_ps: prints the queued lines stamped before it, in key order. */
void chip_console_flush_before(struct chip_console *con, uint64_t time_ps);

#endif
