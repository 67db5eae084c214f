/* SPDX-License-Identifier: MIT */
/* Chip time, waits and semaphores through the hart's register block (npu/wait.h). */
#include "npu/wait.h"

#include "npu/hal.h"
#include "npu/mmio.h"

static uintptr_t regs(void)
{
    return (uintptr_t)hal_self()->regs_base;
}

uint64_t hal_time_ps(void)
{
    return mmio_read64(regs() + CORE_TIME_OFFSET);
}

int hal_wait(const struct hal_wait_args *args, uint32_t *cause)
{
    uintptr_t r = regs();
    uint32_t status;

    if ((args->kind & NPU_WAIT_SEM) && args->sem >= CORE_SEM_COUNT)
        return NPU_ERR_RANGE;
    if (args->kind & NPU_WAIT_TIMER)
        mmio_write64(r + CORE_WAIT_DEADLINE_OFFSET, args->deadline_ps);
    if (args->kind & NPU_WAIT_SEM) {
        mmio_write32(r + CORE_WAIT_SEM_OFFSET, args->sem);
        mmio_write32(r + CORE_WAIT_VALUE_OFFSET, args->value);
    }
    mmio_write32(r + CORE_WAIT_KIND_OFFSET, args->kind);
    int32_t rc = (int32_t)mmio_read32(r + CORE_CMD_STATUS_OFFSET);
    if (rc != NPU_OK)
        return rc;
    /* Each pass sleeps until the wake interrupt is pending: this is not a spin. */
    while ((status = mmio_read32(r + CORE_WAIT_STATUS_OFFSET)) &
           CORE_WAIT_STATUS_WAITING_MASK)
        __asm__ volatile("wfi" ::: "memory");
    mmio_write32(r + CORE_IRQ_STATUS_OFFSET, CORE_IRQ_STATUS_WAKE_MASK);
    if (cause)
        *cause = mmio_field_get(status, CORE_WAIT_STATUS_CAUSE_MASK,
                                CORE_WAIT_STATUS_CAUSE_LSB);
    return NPU_OK;
}

int hal_sleep_until_ps(uint64_t deadline_ps)
{
    struct hal_wait_args w = { .kind = NPU_WAIT_TIMER, .deadline_ps = deadline_ps };
    return hal_wait(&w, NULL);
}

int hal_sleep_ps(uint64_t duration_ps)
{
    return hal_sleep_until_ps(hal_time_ps() + duration_ps);
}

int hal_sem_wait(uint32_t sem, uint32_t value)
{
    struct hal_wait_args w = { .kind = NPU_WAIT_SEM, .sem = sem, .value = value };
    return hal_wait(&w, NULL);
}

int hal_sem_wait_until(uint32_t sem, uint32_t value, uint64_t deadline_ps)
{
    struct hal_wait_args w = {
        .kind = NPU_WAIT_SEM | NPU_WAIT_TIMER, .sem = sem, .value = value,
        .deadline_ps = deadline_ps,
    };
    uint32_t cause = 0;
    int rc = hal_wait(&w, &cause);
    if (rc != NPU_OK)
        return rc;
    return cause == NPU_WAIT_SEM ? NPU_OK : NPU_ERR_TIMEOUT;
}

uint32_t hal_sem_read(uint32_t sem)
{
    if (sem >= CORE_SEM_COUNT)
        return 0;
    return mmio_read32(regs() + CORE_SEM_OFFSET + sem * CORE_SEM_STRIDE);
}

int hal_sem_post(const struct hal_sem_post_args *args)
{
    uintptr_t r = regs();
    uint32_t target = mmio_field_set(0, CORE_SEM_TARGET_SEM_MASK, CORE_SEM_TARGET_SEM_LSB,
                                     args->sem);
    target = mmio_field_set(target, CORE_SEM_TARGET_CORE_MASK, CORE_SEM_TARGET_CORE_LSB,
                            args->core);
    if (args->sem > 0xff || args->core > 0xffff)
        return NPU_ERR_RANGE;
    mmio_write32(r + CORE_SEM_TARGET_OFFSET, target);
    mmio_write32(r + CORE_SEM_VALUE_OFFSET, args->value);
    mmio_write32(r + CORE_SEM_OP_OFFSET, args->op);
    return (int32_t)mmio_read32(r + CORE_CMD_STATUS_OFFSET);
}

int hal_release_cores(void)
{
    if (!hal_self()->is_ctrl)
        return NPU_ERR_STATE;
    mmio_write32(hal_chip()->chipctl_base + CHIPCTL_RELEASE_OFFSET,
                 CHIPCTL_RELEASE_GO_MASK);
    return (int32_t)mmio_read32(regs() + CORE_CMD_STATUS_OFFSET);
}

int hal_wait_release(void)
{
    struct hal_wait_args w = { .kind = NPU_WAIT_RELEASE };
    return hal_wait(&w, NULL);
}
