/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * npu-mesh per-hart register block (block `core` of hal/regspec/npu_regs.toml): identity,
 * the hart's chip time, the WAIT registers, the wake interrupt, semaphores, the console byte
 * register and EXIT. One instance per hart; the control core's sits at CTRL_REGS.
 *
 * Only the owning hart may access its block: any other hart's access would happen in QEMU's
 * host order rather than chip order, so it is refused as a guest error (reads return 0).
 * Debugger accesses (no current hart) may read but not write.
 */
#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qemu/log.h"
#include "qemu/module.h"
#include "hw/irq.h"
#include "hw/qdev-properties.h"

#include "npu_mesh.h"
#include "npu_regs_qemu.h"

void npu_core_update_irq(NpuCoreState *core)
{
    qemu_set_irq(core->irq, (core->irq_status & core->irq_enable) != 0);
}

void npu_core_woken(NpuCoreState *core)
{
    core->irq_status |= R_CORE_IRQ_STATUS_WAKE_MASK;
    npu_core_update_irq(core);
}

static struct chip_clock *clock_of(NpuCoreState *core)
{
    return &core->chip->clock;
}

static uint64_t reg64_merge(uint64_t old, uint64_t value, hwaddr off, unsigned size)
{
    if (size == 8) {
        return value;
    }
    return off ? deposit64(old, 32, 32, value) : deposit64(old, 0, 32, value);
}

static uint32_t wait_status(NpuCoreState *core)
{
    const struct chip_hart *h = &clock_of(core)->harts[core->hart];
    uint32_t v = FIELD_DP32(0, CORE_WAIT_STATUS, WAITING, h->state == CHIP_HART_WAITING);
    return FIELD_DP32(v, CORE_WAIT_STATUS, CAUSE, h->cause);
}

static uint64_t core_read(void *opaque, hwaddr addr, unsigned size)
{
    NpuCoreState *core = opaque;
    struct chip_clock *c = clock_of(core);
    const struct chip_hart *h = &c->harts[core->hart];
    int hart = npu_chip_current_hart(core->chip);

    if (hart >= 0 && (uint32_t)hart != core->hart) {
        qemu_log_mask(LOG_GUEST_ERROR, "npu-mesh: hart %d read register 0x%" HWADDR_PRIx
                      " of hart %u's block; a hart may only access its own\n", hart, addr,
                      core->hart);
        return 0;
    }
    if (addr >= A_CORE_SEM && addr < A_CORE_SEM + CORE_SEM_COUNT * CORE_SEM_STRIDE) {
        return h->sems[(addr - A_CORE_SEM) / CORE_SEM_STRIDE];
    }
    switch (addr & ~7ull) {
    case A_CORE_ID:
        return addr == A_CORE_ID ? core->hart
                                 : FIELD_DP32(FIELD_DP32(0, CORE_COORD, ROW, h->row),
                                              CORE_COORD, COL, h->col);
    case A_CORE_TIME:
        return npu_reg64_read(h->now_ps, addr & 4, size);
    case A_CORE_WAIT_DEADLINE:
        return npu_reg64_read(core->wait.deadline_ps, addr & 4, size);
    case A_CORE_WAIT_SEM:
        return addr == A_CORE_WAIT_SEM ? core->wait.sem : core->wait.value;
    case A_CORE_WAIT_KIND:
        return addr == A_CORE_WAIT_KIND ? core->wait_kind : wait_status(core);
    case A_CORE_IRQ_STATUS:
        return addr == A_CORE_IRQ_STATUS ? core->irq_status : core->irq_enable;
    case A_CORE_CON_TX:
        return 0; /* CON_TX and EXIT are write-only */
    case A_CORE_SEM_TARGET:
        return addr == A_CORE_SEM_TARGET ? core->sem_target : core->sem_value;
    case A_CORE_SEM_OP:
        return addr == A_CORE_SEM_OP ? 0 : (uint32_t)core->cmd_status;
    default:
        qemu_log_mask(LOG_GUEST_ERROR, "npu-mesh: hart %u read of unknown register 0x%"
                      HWADDR_PRIx "\n", core->hart, addr);
        return 0;
    }
}

static void core_start_wait(NpuCoreState *core, uint32_t kind)
{
    struct chip_wait w = core->wait;
    int rc;

    w.kind = kind;
    core->wait_kind = kind;
    npu_chip_note_activity(core->chip);
    core->irq_status &= ~R_CORE_IRQ_STATUS_WAKE_MASK; /* a new wait forgets the last wake */
    npu_core_update_irq(core);
    rc = chip_hart_wait(clock_of(core), core->hart, &w);
    core->cmd_status = rc < 0 ? rc : 0;
    if (rc < 0) {
        qemu_log_mask(LOG_GUEST_ERROR, "npu-mesh: hart %u: invalid wait (kind 0x%x, "
                      "semaphore %u); see npu_wait_kind\n", core->hart, kind, w.sem);
    } else if (rc == 0) {
        npu_chip_step_if_quiescent(core->chip);
    }
}

static void core_sem_op(NpuCoreState *core, uint32_t op)
{
    uint32_t target = FIELD_EX32(core->sem_target, CORE_SEM_TARGET, CORE);
    uint32_t sem = FIELD_EX32(core->sem_target, CORE_SEM_TARGET, SEM);
    int rc = chip_sem_post(clock_of(core), core->hart, target, sem, op, core->sem_value);

    core->cmd_status = rc;
    if (rc != NPU_OK) {
        qemu_log_mask(LOG_GUEST_ERROR, "npu-mesh: hart %u: SEM_OP %u on core %u semaphore "
                      "%u refused (%d): no such core, semaphore or operation\n", core->hart,
                      op, target, sem, rc);
    }
}

static void core_exit(NpuCoreState *core, uint32_t status)
{
    struct chip_clock *c = clock_of(core);

    npu_chip_note_activity(core->chip);
    chip_console_end_line(&core->chip->console, core->hart, chip_hart_time(c, core->hart));
    chip_hart_exit(c, core->hart, (int)status);
    npu_chip_step_if_quiescent(core->chip);
}

/* Only the owning hart, while it runs, may write its block (acknowledging a wake excepted). */
static bool core_write_allowed(NpuCoreState *core, hwaddr addr)
{
    int hart = npu_chip_current_hart(core->chip);

    if (core->chip->stopped) {
        return false;
    }
    if (hart < 0 || (uint32_t)hart != core->hart) {
        qemu_log_mask(LOG_GUEST_ERROR, "npu-mesh: hart %d wrote register 0x%" HWADDR_PRIx
                      " of hart %u's block; a hart may only access its own\n", hart, addr,
                      core->hart);
        return false;
    }
    if (clock_of(core)->harts[core->hart].state != CHIP_HART_RUNNING &&
        addr != A_CORE_IRQ_STATUS) {
        qemu_log_mask(LOG_GUEST_ERROR, "npu-mesh: hart %u wrote register 0x%" HWADDR_PRIx
                      " while waiting or finished; ignored\n", core->hart, addr);
        return false;
    }
    return true;
}

static void core_write(void *opaque, hwaddr addr, uint64_t value, unsigned size)
{
    NpuCoreState *core = opaque;

    if (!core_write_allowed(core, addr)) {
        return;
    }
    switch (addr & ~3ull) {
    case A_CORE_WAIT_DEADLINE:
    case A_CORE_WAIT_DEADLINE + 4:
        core->wait.deadline_ps = reg64_merge(core->wait.deadline_ps, value, addr & 4, size);
        break;
    case A_CORE_WAIT_SEM:
        core->wait.sem = FIELD_EX32(value, CORE_WAIT_SEM, ID);
        break;
    case A_CORE_WAIT_VALUE:
        core->wait.value = value;
        break;
    case A_CORE_WAIT_KIND:
        core_start_wait(core, value);
        break;
    case A_CORE_IRQ_STATUS:
        core->irq_status &= ~(uint32_t)value;
        npu_core_update_irq(core);
        break;
    case A_CORE_IRQ_ENABLE:
        core->irq_enable = value & R_CORE_IRQ_ENABLE_WAKE_MASK;
        npu_core_update_irq(core);
        break;
    case A_CORE_CON_TX:
        chip_console_putc(&core->chip->console, core->hart,
                          chip_hart_time(clock_of(core), core->hart),
                          FIELD_EX32(value, CORE_CON_TX, DATA));
        break;
    case A_CORE_EXIT:
        core_exit(core, FIELD_EX32(value, CORE_EXIT, STATUS));
        break;
    case A_CORE_SEM_TARGET:
        core->sem_target = value;
        break;
    case A_CORE_SEM_VALUE:
        core->sem_value = value;
        break;
    case A_CORE_SEM_OP:
        core_sem_op(core, FIELD_EX32(value, CORE_SEM_OP, OP));
        break;
    default:
        qemu_log_mask(LOG_GUEST_ERROR, "npu-mesh: hart %u wrote read-only or unknown "
                      "register 0x%" HWADDR_PRIx "\n", core->hart, addr);
        break;
    }
}

static const MemoryRegionOps core_ops = {
    .read = core_read,
    .write = core_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
    .valid = { .min_access_size = 4, .max_access_size = 8 },
    .impl = { .min_access_size = 4, .max_access_size = 8 },
};

static void core_realize(DeviceState *dev, Error **errp)
{
    NpuCoreState *core = NPU_CORE(dev);

    if (!core->chip) {
        error_setg(errp, "npu-mesh core %u: property 'chip' not set", core->hart);
        return;
    }
    if (core->hart >= core->chip->clock.nharts) {
        error_setg(errp, "npu-mesh core: property 'hart' = %u out of range (%u harts)",
                   core->hart, core->chip->clock.nharts);
        return;
    }
    core->irq_enable = R_CORE_IRQ_ENABLE_WAKE_MASK; /* waits work out of reset */
    memory_region_init_io(&core->mmio, OBJECT(dev), &core_ops, core, TYPE_NPU_CORE,
                          CORE_BLOCK_SIZE);
    sysbus_init_mmio(SYS_BUS_DEVICE(dev), &core->mmio);
    sysbus_init_irq(SYS_BUS_DEVICE(dev), &core->irq);
}

static Property core_props[] = {
    DEFINE_PROP_UINT32("hart", NpuCoreState, hart, 0),
    DEFINE_PROP_LINK("chip", NpuCoreState, chip, TYPE_NPU_CHIPCTL, NpuChipctlState *),
    DEFINE_PROP_END_OF_LIST(),
};

static void core_class_init(ObjectClass *klass, void *data)
{
    DeviceClass *dc = DEVICE_CLASS(klass);

    dc->realize = core_realize;
    dc->user_creatable = false;
    device_class_set_props(dc, core_props);
}

static const TypeInfo core_info = {
    .name = TYPE_NPU_CORE,
    .parent = TYPE_SYS_BUS_DEVICE,
    .instance_size = sizeof(NpuCoreState),
    .class_init = core_class_init,
};

static void core_register_types(void)
{
    type_register_static(&core_info);
}

type_init(core_register_types)
