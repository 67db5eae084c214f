/* SPDX-License-Identifier: MIT */
#include "tap.h"

#include <stdarg.h>
#include <stdio.h>

#include "npu_enums.h"

static int planned, ran, failed;

void tap_plan(int count)
{
    planned = count;
    printf("TAP version 13\n1..%d\n", count);
}

bool tap_ok(bool ok, const char *fmt, ...)
{
    va_list ap;
    ran++;
    if (!ok)
        failed++;
    printf("%s %d - ", ok ? "ok" : "not ok", ran);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    return ok;
}

void tap_diag(const char *fmt, ...)
{
    va_list ap;
    printf("# ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
}

int tap_done(void)
{
    if (ran != planned)
        tap_diag("planned %d tests but ran %d", planned, ran);
    printf("# %d passed, %d failed\n", ran - failed, failed);
    return failed == 0 && ran == planned ? NPU_EXIT_OK : NPU_EXIT_FAIL;
}
