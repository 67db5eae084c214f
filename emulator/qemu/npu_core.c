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
#include "model/chip_stats.h"

void npu_core_update_irq(NpuCoreState *core)
{
    qemu_set_irq(core->irq, (core->irq_status & core->irq_enable) != 0);
}

void npu_core_raise(NpuCoreState *core, uint32_t sources)
{
    core->irq_status |= sources;
    npu_core_update_irq(core);
}

void npu_core_woken(NpuCoreState *core)
{
    npu_core_raise(core, R_CORE_IRQ_STATUS_WAKE_MASK);
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

/* ENGINE_PENDING (engines 0..3) and ENGINE_PENDING_HI (4..7): a saturating byte each. */
static uint32_t engine_pending(NpuCoreState *core, uint32_t first)
{
    uint32_t v = 0;
    if (core->hart >= core->chip->engines.ncores) {
        return 0; /* the control core has no engines */
    }
    for (uint32_t eng = first; eng < NPU_ENGINE_COUNT && eng < first + 4; eng++) {
        uint32_t n = chip_engines_pending(&core->chip->engines, core->hart, eng);
        v |= MIN(n, 255u) << (8 * (eng - first));
    }
    return v;
}

static uint64_t perf_value(NpuCoreState *core)
{
    if (core->hart >= core->chip->engines.ncores) {
        return 0; /* the control core has no engines */
    }
    return chip_stats_core_counter(&core->chip->engines, &core->chip->cfg, core->hart,
                                   core->perf_sel);
}

/* The engine registers (submit, pending, counters); false if addr is not one of them. */
static bool core_read_engine_reg(NpuCoreState *core, hwaddr addr, unsigned size, uint64_t *v)
{
    switch (addr) {
    case A_CORE_SUBMIT_ADDR:
    case A_CORE_SUBMIT_ADDR + 4:
        *v = npu_reg64_read(core->submit_addr, addr - A_CORE_SUBMIT_ADDR, size);
        return true;
    case A_CORE_SUBMIT_COUNT:
        *v = core->submit_count;
        return true;
    case A_CORE_SUBMIT:
        *v = 0;
        return true;
    case A_CORE_ENGINE_PENDING:
        *v = engine_pending(core, 0);
        return true;
    case A_CORE_ENGINE_PENDING_HI:
        *v = engine_pending(core, 4);
        return true;
    case A_CORE_PERF_SEL:
        *v = core->perf_sel;
        return true;
    case A_CORE_PERF_VALUE:
    case A_CORE_PERF_VALUE + 4:
        *v = npu_reg64_read(perf_value(core), addr - A_CORE_PERF_VALUE, size);
        return true;
    case A_CORE_REPLAY_SLOT:
        *v = core->replay_slot;
        return true;
    case A_CORE_REPLAY_COUNT:
        *v = core->replay_count;
        return true;
    case A_CORE_REPLAY_OP:
    case A_CORE_ROUTE:
        *v = 0;
        return true;
    case A_CORE_ROUTE_ADDR:
    case A_CORE_ROUTE_ADDR + 4:
        *v = npu_reg64_read(core->route_addr, addr - A_CORE_ROUTE_ADDR, size);
        return true;
    default:
        return false;
    }
}

/* One register of the block by its exact address; false if there is none. */
static bool core_read_reg(NpuCoreState *core, hwaddr addr, unsigned size, uint64_t *v)
{
    const struct chip_hart *h = &clock_of(core)->harts[core->hart];

    switch (addr) {
    case A_CORE_ID:
        *v = core->hart;
        return true;
    case A_CORE_COORD:
        *v = FIELD_DP32(FIELD_DP32(0, CORE_COORD, ROW, h->row), CORE_COORD, COL, h->col);
        return true;
    case A_CORE_TIME:
    case A_CORE_TIME + 4:
        *v = npu_reg64_read(h->now_ps, addr - A_CORE_TIME, size);
        return true;
    case A_CORE_WAIT_DEADLINE:
    case A_CORE_WAIT_DEADLINE + 4:
        *v = npu_reg64_read(core->wait.deadline_ps, addr - A_CORE_WAIT_DEADLINE, size);
        return true;
    case A_CORE_WAIT_SEM:
        *v = core->wait.sem;
        return true;
    case A_CORE_WAIT_VALUE:
        *v = core->wait.value;
        return true;
    case A_CORE_WAIT_KIND:
        *v = core->wait_kind;
        return true;
    case A_CORE_WAIT_STATUS:
        *v = FIELD_DP32(FIELD_DP32(0, CORE_WAIT_STATUS, WAITING,
                                   h->state == CHIP_HART_WAITING),
                        CORE_WAIT_STATUS, CAUSE, h->cause);
        return true;
    case A_CORE_IRQ_STATUS:
        *v = core->irq_status;
        return true;
    case A_CORE_IRQ_ENABLE:
        *v = core->irq_enable;
        return true;
    case A_CORE_CON_TX: /* write-only registers read 0 */
    case A_CORE_EXIT:
    case A_CORE_SEM_OP:
        *v = 0;
        return true;
    case A_CORE_SEM_TARGET:
        *v = core->sem_target;
        return true;
    case A_CORE_SEM_VALUE:
        *v = core->sem_value;
        return true;
    case A_CORE_CMD_STATUS:
        *v = (uint32_t)core->cmd_status;
        return true;
    }
    if (core_read_engine_reg(core, addr, size, v)) {
        return true;
    }
    if (addr >= A_CORE_SEM && addr < A_CORE_SEM + CORE_SEM_COUNT * CORE_SEM_STRIDE &&
        (addr - A_CORE_SEM) % CORE_SEM_STRIDE == 0) {
        *v = h->sems[(addr - A_CORE_SEM) / CORE_SEM_STRIDE];
        return true;
    }
    return false;
}

static uint64_t core_read(void *opaque, hwaddr addr, unsigned size)
{
    NpuCoreState *core = opaque;
    int hart = npu_chip_current_hart(core->chip);
    uint64_t v = 0;

    if (hart >= 0 && (uint32_t)hart != core->hart) {
        qemu_log_mask(LOG_GUEST_ERROR, "npu-mesh: hart %d read register 0x%" HWADDR_PRIx
                      " of hart %u's block; a hart may only access its own\n", hart, addr,
                      core->hart);
        return 0;
    }
    if (!core_read_reg(core, addr, size, &v)) {
        qemu_log_mask(LOG_GUEST_ERROR, "npu-mesh: hart %u read of unknown register 0x%"
                      HWADDR_PRIx "\n", core->hart, addr);
    }
    return v;
}

static void core_start_wait(NpuCoreState *core, uint32_t kind)
{
    struct chip_wait w = core->wait;
    uint32_t cause = 0;

    w.kind = kind;
    core->wait_kind = kind;
    core->irq_status &= ~R_CORE_IRQ_STATUS_WAKE_MASK; /* a new wait forgets the last wake */
    npu_core_update_irq(core);
    int rc = chip_hart_wait(clock_of(core), core->hart, &w, &cause);
    core->cmd_status = rc;
    if (rc != NPU_OK) {
        qemu_log_mask(LOG_GUEST_ERROR, "npu-mesh: hart %u: invalid wait (kind 0x%x, "
                      "semaphore %u, deadline %" PRIu64 " ps): %d\n", core->hart, kind,
                      w.sem, w.deadline_ps, rc);
    } else if (cause == 0) {
        /* Only a hart that really goes to sleep counts as progress for the watchdog. */
        npu_chip_note_activity(core->chip);
        npu_chip_step_if_quiescent(core->chip);
    }
}

/* Command: queue the descriptors at SUBMIT_ADDR on this core's engines (all or none). */
static void core_submit(NpuCoreState *core)
{
    char err[256] = "";
    int rc = NPU_ERR_STATE;

    if (core->hart < core->chip->engines.ncores) {
        chip_hart_charge(clock_of(core), core->hart, clock_of(core)->p.cmd_cost_cycles);
        rc = chip_engines_submit(&core->chip->engines, core->hart, core->submit_addr,
                                 core->submit_count, err, sizeof(err));
    } else {
        snprintf(err, sizeof(err), "the control core has no engines");
    }
    core->cmd_status = rc;
    if (rc != NPU_OK) {
        qemu_log_mask(LOG_GUEST_ERROR, "npu-mesh: hart %u: SUBMIT refused (%d): %s\n",
                      core->hart, rc, err);
    }
}

/* Command: replay op `op` on REPLAY_SLOT of this core's counters (chip_replay.h). */
static void core_replay_op(NpuCoreState *core, uint32_t op)
{
    char err[128] = "";
    int rc = NPU_ERR_STATE;

    if (core->hart < core->chip->engines.ncores) {
        chip_hart_charge(clock_of(core), core->hart, clock_of(core)->p.cmd_cost_cycles);
        rc = chip_replay_apply_op(&core->chip->replay, &core->chip->engines, core->hart, op,
                                 core->replay_slot, core->replay_count, err, sizeof(err));
    } else {
        snprintf(err, sizeof(err), "the control core has no engines");
    }
    core->cmd_status = rc;
    if (rc != NPU_OK) {
        qemu_log_mask(LOG_GUEST_ERROR, "npu-mesh: hart %u: REPLAY_OP %u on slot %u (count %u) "
                      "refused (%d): %s\n", core->hart, op, core->replay_slot,
                      core->replay_count, rc, err);
    }
}

/* Command: the routing model's draws at ROUTE_ADDR (chip_route.h); no chip time. */
static void core_route(NpuCoreState *core)
{
    char err[160] = "";
    int rc = NPU_ERR_STATE;

    if (core->hart < core->chip->engines.ncores) {
        rc = chip_route_draw(&core->route, &core->chip->engines.mem, core->hart,
                             core->route_addr, err, sizeof(err));
    } else {
        snprintf(err, sizeof(err), "the control core routes no rows");
    }
    core->cmd_status = rc;
    if (rc != NPU_OK) {
        qemu_log_mask(LOG_GUEST_ERROR, "npu-mesh: hart %u: ROUTE refused (%d): %s\n",
                      core->hart, rc, err);
    }
}

static void core_sem_op(NpuCoreState *core, uint32_t op)
{
    uint32_t target = FIELD_EX32(core->sem_target, CORE_SEM_TARGET, CORE);
    uint32_t sem = FIELD_EX32(core->sem_target, CORE_SEM_TARGET, SEM);
    uint32_t fields = R_CORE_SEM_TARGET_CORE_MASK | R_CORE_SEM_TARGET_SEM_MASK;
    int rc = NPU_ERR_RANGE;

    if (!(core->sem_target & ~fields)) {
        rc = chip_sem_post(clock_of(core), core->hart, target, sem, op, core->sem_value);
    }
    core->cmd_status = rc;
    if (rc != NPU_OK) {
        qemu_log_mask(LOG_GUEST_ERROR, "npu-mesh: hart %u: SEM_OP %u with SEM_TARGET 0x%x "
                      "refused (%d): no such core, semaphore or operation\n", core->hart,
                      op, core->sem_target, rc);
    }
}

/* The engine registers; false if addr is not one of them. */
static bool core_write_engine_reg(NpuCoreState *core, hwaddr addr, uint64_t value,
                                  unsigned size)
{
    switch (addr) {
    case A_CORE_SUBMIT_ADDR:
    case A_CORE_SUBMIT_ADDR + 4:
        core->submit_addr = reg64_merge(core->submit_addr, value, addr & 4, size);
        return true;
    case A_CORE_SUBMIT_COUNT:
        core->submit_count = value;
        return true;
    case A_CORE_PERF_SEL:
        core->perf_sel = value;
        return true;
    case A_CORE_REPLAY_SLOT:
        core->replay_slot = value;
        return true;
    case A_CORE_REPLAY_COUNT:
        core->replay_count = value;
        return true;
    case A_CORE_REPLAY_OP:
        core_replay_op(core, FIELD_EX32(value, CORE_REPLAY_OP, OP));
        return true;
    case A_CORE_ROUTE_ADDR:
    case A_CORE_ROUTE_ADDR + 4:
        core->route_addr = reg64_merge(core->route_addr, value, addr & 4, size);
        return true;
    case A_CORE_ROUTE:
        if (FIELD_EX32(value, CORE_ROUTE, GO)) {
            core_route(core);
        }
        return true;
    case A_CORE_SUBMIT:
        if (FIELD_EX32(value, CORE_SUBMIT, GO)) {
            core_submit(core);
        }
        return true;
    default:
        return false;
    }
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
        core->wait.sem = value; /* kept whole: a value outside ID fails the wait */
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
        core->irq_enable = value & (R_CORE_IRQ_ENABLE_WAKE_MASK | R_CORE_IRQ_ENABLE_ENGINE_MASK);
        npu_core_update_irq(core);
        break;
    case A_CORE_CON_TX:
        chip_console_putc(&core->chip->console, core->hart,
                          chip_hart_time(clock_of(core), core->hart),
                          FIELD_EX32(value, CORE_CON_TX, DATA));
        break;
    case A_CORE_EXIT:
        npu_chip_hart_exit(core->chip, core->hart, FIELD_EX32(value, CORE_EXIT, STATUS));
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
        if (core_write_engine_reg(core, addr, value, size)) {
            break;
        }
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
