/* SPDX-License-Identifier: MIT */
/* npuctl's option parsers: the input is argv, arguments separated by NUL bytes; the first
   byte picks the parser (npuctl run/selftest/debug/bench, or serve with the plan options).
   Their refusals go to stderr, which the harness sends to /dev/null. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "npuctl.h"
#include "serve_opts.h"

#define ARGS_MAX 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool quiet;
    if (!quiet) /* refusals print; a campaign's millions of them are noise */
        quiet = freopen("/dev/null", "w", stderr) != NULL;
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
    if (which < 4) {
        struct npuctl_run_opts o;
        char err[512];
        (void)npuctl_parse_run_args((enum npuctl_mode)which, argc, argv, &o, err, sizeof(err));
    } else {
        struct serve_opts o;
        (void)serve_opts_parse(argc, argv, &o);
    }
    free(text);
    return 0;
}
