/* SPDX-License-Identifier: MIT */
/*
 * npuctl test: the project's test suite through CTest,
 *   ctest --test-dir BUILD --output-on-failure [ARGS...]
 * ARGS go to ctest as they are (a leading `--` is dropped); e.g. `npuctl test -L host`.
 * Only -h / --help first is npuctl's own (this usage).
 * The exit status is ctest's.
 */
#define _POSIX_C_SOURCE 200809L
#include "npuctl.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "npu_enums.h"
#include "opts.h"

const struct npuctl_cmd_spec npuctl_spec_test = {
    "test", NPUCTL_CMD_TEST, "npuctl test [CTEST ARGS...]\n", "run the test suite through CTest",
    "  Run the test suite: ctest --test-dir $NPU_BUILD_DIR --output-on-failure ARGS\n"
    "  (e.g. npuctl test -L host; npuctl test -L smoke for the quick ones). The arguments\n"
    "  go to ctest as they are (npuctl test -- --help: ctest's help). Exit status: ctest's.\n",
    { NULL }, false, -1, NULL,
};

int npuctl_cmd_test(int argc, char **argv)
{
    if (argc > 0 && (!strcmp(argv[0], "-h") || !strcmp(argv[0], "--help"))) {
        npuctl_opts_print_help(stdout, &npuctl_spec_test);
        return 0;
    }
    struct npuctl_argv a = { 0 };
    char **ctest, testfile[NPUCTL_PATH_MAX];
    const char *build = npuctl_get_dir(NPUCTL_DIR_BUILD);
    snprintf(testfile, sizeof(testfile), "%s/CTestTestfile.cmake", build);
    if (access(testfile, R_OK) != 0) {
        npuctl_print_error("test: %s is not a configured build (no CTestTestfile.cmake); "
                           "set %s", build, npuctl_dir_env_name(NPUCTL_DIR_BUILD));
        return NPUCTL_EXIT_USAGE;
    }
    if (argc > 0 && strcmp(argv[0], "--") == 0) {
        argc--;
        argv++;
    }
    npuctl_argv_push(&a, "ctest");
    npuctl_argv_push(&a, "--test-dir");
    npuctl_argv_push(&a, build);
    npuctl_argv_push(&a, "--output-on-failure");
    for (int i = 0; i < argc; i++)
        npuctl_argv_push(&a, argv[i]);
    if (npuctl_argv_finish(&a, &ctest)) {
        npuctl_print_error("out of memory");
        return NPUCTL_EXIT_USAGE;
    }
    /* Same process group: Ctrl-C reaches ctest directly; no timeout (ctest has its own). */
    struct npuctl_spawn sp = { .argv = ctest, .search_path = true };
    char err[NPUCTL_ERR_MAX];
    struct npuctl_child_exit ex;
    int rc = npuctl_spawn_wait(&sp, &ex, err, sizeof(err));
    npuctl_free_argv(ctest);
    if (rc) {
        npuctl_print_error("%s", err);
        return NPUCTL_EXIT_USAGE;
    }
    return ex.status;
}
