/* SPDX-License-Identifier: MIT */
/* npuctl's option parsers: the input is argv, arguments separated by NUL bytes; the first
   byte picks the parser (npuctl run/selftest/debug/bench, or serve with the plan options).
   Their refusals and usage texts go to /dev/null while they run (file descriptors 1 and 2
   point there during each input and are swapped back after it); the sanitizers report to
   the saved standard error throughout, so a finding inside a parser is still told (with
   libFuzzer's own crash lines lost; its crash-* file is written all the same). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sanitizer/common_interface_defs.h>
#include <unistd.h>

#include "fuzz.h"
#include "npuctl.h"
#include "serve_opts.h"

#define ARGS_MAX 64

static int saved[2] = { -1, -1 }, devnull = -1;
static bool set_up;

static void quiet(bool on)
{
    fflush(stdout), fflush(stderr);
    if (!set_up) { /* once, whether it works or not */
        set_up = true;
        devnull = open("/dev/null", O_WRONLY);
        saved[0] = dup(1), saved[1] = dup(2);
        if (saved[1] >= 0)
            __sanitizer_set_report_fd((void *)(intptr_t)saved[1]);
    }
    if (devnull < 0 || saved[0] < 0 || saved[1] < 0)
        return;
    dup2(on ? devnull : saved[0], 1);
    dup2(on ? devnull : saved[1], 2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    char *text = malloc(size);
    if (!text)
        return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    char *argv[ARGS_MAX + 1];
    int argc = 0;
    for (char *p = text; p < text + size - 1 && argc < ARGS_MAX; p += strlen(p) + 1)
        argv[argc++] = p;
    argv[argc] = NULL;
    const unsigned which = data[0] % 5;
    quiet(true);
    if (which < 4) {
        struct npuctl_run_opts o;
        char err[512];
        (void)npuctl_parse_run_args((enum npuctl_mode)which, argc, argv, &o, err, sizeof(err));
    } else {
        struct serve_opts o;
        (void)serve_opts_parse(argc, argv, &o);
    }
    quiet(false);
    free(text);
    return 0;
}
