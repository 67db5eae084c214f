/* SPDX-License-Identifier: MIT */
/*
 * Replays inputs through a harness (fuzz.h) without libFuzzer: each argument is a file or a
 * folder of files (read in name order), each file one input. Prints how many it ran; the
 * sanitizers end the process on a finding, so a zero exit means none.
 */
#define _DEFAULT_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *data = malloc(n > 0 ? (size_t)n : 1);
    size_t got = data ? fread(data, 1, (size_t)(n > 0 ? n : 0), f) : 0;
    fclose(f);
    if (!data || got != (size_t)(n > 0 ? n : 0)) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        free(data);
        return 1;
    }
    LLVMFuzzerTestOneInput(data, got);
    free(data);
    return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv)
{
    size_t inputs = 0;
    int rc = 0;
    for (int i = 1; i < argc && rc == 0; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: %s: no such file or folder\n", argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            rc = run_file(argv[i]);
            inputs += rc == 0;
            continue;
        }
        struct dirent **names;
        int n = scandir(argv[i], &names, NULL, by_name);
        for (int k = 0; k < n; k++) {
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s", argv[i], names[k]->d_name);
            if (rc == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
                rc = run_file(path);
                inputs += rc == 0;
            }
            free(names[k]);
        }
        free(names);
    }
    if (rc == 0)
        printf("replay: %zu inputs, no finding\n", inputs);
    else
        printf("replay: stopped after %zu inputs\n", inputs);
    return rc;
}
