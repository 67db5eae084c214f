/* SPDX-License-Identifier: MIT */
/* npuctl trace gen / import: their options (trace_opts.c) for the commands (cmd_trace.c). */
#ifndef NPUCTL_TRACE_OPTS_H
#define NPUCTL_TRACE_OPTS_H

#include <stdbool.h>
#include <stdint.h>

#include "rt/trace.h"

enum { TRACE_OV_MEAN, TRACE_OV_STD, TRACE_OV_P90, TRACE_OV_MIN, TRACE_OV_MAX, TRACE_OV_COUNT };

struct trace_gen_opts {
    struct rt_trace_gen_params p;
    const char *lengths, *out;
    bool count_set, rate_set, cv_set;
    double ov[2][TRACE_OV_COUNT]; /* --input-* / --output-* overrides; NAN: not given */
};

struct trace_import_opts {
    const char *in, *out, *format;
    uint64_t limit; /* 0: every row */
    struct rt_import_filter flt; /* --where, --window, --time-scale (and the limit) */
};

/* Each: 0 to go on, else the exit status (0 after the help) with *done set; what is
   required is checked, and gen's overrides applied to its preset. */
int trace_gen_parse(int argc, char **argv, struct trace_gen_opts *o, bool *done);
int trace_import_parse(int argc, char **argv, struct trace_import_opts *o, bool *done);

#endif
