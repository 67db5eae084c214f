/* SPDX-License-Identifier: MIT */
#include "core_checks.h"

#include <stdarg.h>
#include <stdio.h>

#include "npu/hal.h"
#include "npu/wait.h"
#include "tap.h"

static int post_ctrl(uint32_t sem)
{
    struct hal_sem_post_args a = { .core = hal_chip()->ncores, .sem = sem,
                                   .op = NPU_SEM_OP_INC, .value = 1 };
    return hal_sem_post(&a);
}

bool checks_expect(bool ok, uint32_t check, const char *name, const char *fmt, ...)
{
    if (ok)
        return true;
    va_list ap;
    printf("# core %u: %s: ", hal_self()->core_id, name);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    post_ctrl(CHECKS_FAIL_SEM(check));
    return false;
}

int checks_done(void)
{
    return post_ctrl(CHECKS_DONE_SEM) == NPU_OK ? NPU_EXIT_OK : NPU_EXIT_FAIL;
}

bool checks_collect(uint32_t ncheck, const char *const *names, uint64_t limit_ps)
{
    uint32_t n = hal_chip()->ncores;
    bool all = true;
    hal_release_cores();
    int rc = hal_sem_wait_until(CHECKS_DONE_SEM, n, hal_time_ps() + limit_ps);
    all &= tap_ok(rc == NPU_OK, "boot: all %u cores released, ran their checks and reported "
                  "in (%u did)", n, hal_sem_read(CHECKS_DONE_SEM));
    for (uint32_t k = 0; k < ncheck; k++) {
        uint32_t failed = hal_sem_read(CHECKS_FAIL_SEM(k));
        all &= tap_ok(rc == NPU_OK && failed == 0, "cores: %s (%u of %u failed)", names[k],
                      failed, n);
    }
    return all;
}
