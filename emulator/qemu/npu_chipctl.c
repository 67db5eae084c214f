/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * npu-mesh chip control block (block `chipctl` of hal/regspec/npu_regs.toml).
 *
 * This device owns the chip model: the chip clock and the console. It steps the clock when
 * no hart runs, prints the console in chip order, stops the run (exit status out of QEMU)
 * and reports deadlocks and harts that never wait (wall-clock watchdog).
 *
 * The watchdog fires when, for watchdog-ms of wall time, chip time did not advance and no
 * hart started a wait or finished: then some hart runs without ever waiting (a busy loop,
 * with or without register reads). Counting harts that reach a wait as progress keeps large
 * meshes, whose harts take long to reach their first wait under emulation, from tripping
 * it while they boot.
 *
 * Stopping is deferred to a quiescent point (no hart running) so that what is printed does
 * not depend on how QEMU happened to schedule the harts: a faulting core or the exiting
 * control core end the run once every other hart waits or has finished.
 */
#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qemu/log.h"
#include "qemu/module.h"
#include "qemu/timer.h"
#include "qemu/error-report.h"
#include "hw/qdev-properties.h"
#include "hw/qdev-properties-system.h"
#include "hw/core/cpu.h"

#include "npu_mesh.h"
#include "npu_regs_qemu.h"
#include "model/chip_engine_log.h"
#include "model/chip_stats.h"

/* The console's output: the chardev (-serial), or stdout when there is none. */
static void console_emit(void *opaque, const char *text, size_t len)
{
    NpuChipctlState *s = opaque;
    if (qemu_chr_fe_backend_connected(&s->chr)) {
        qemu_chr_fe_write_all(&s->chr, (const uint8_t *)text, len);
    } else {
        fwrite(text, 1, len, stdout);
        fflush(stdout);
    }
}

void npu_chip_print(NpuChipctlState *s, const char *text)
{
    console_emit(s, text, strlen(text));
}

static void hart_name(NpuChipctlState *s, uint32_t hart, char *buf, size_t len)
{
    const struct chip_hart *h = &s->clock.harts[hart];
    if (hart == s->clock.ncores) {
        snprintf(buf, len, "ctrl");
    } else {
        snprintf(buf, len, "core %u (%u,%u)", hart, h->row, h->col);
    }
}

/* The JSON report of the run (machine property stats=FILE). */
static void write_stats(NpuChipctlState *s)
{
    FILE *f;

    if (!s->stats_path) {
        return;
    }
    f = fopen(s->stats_path, "w");
    if (!f || chip_stats_write_json(f, &s->engines, &s->cfg, s->clock.time_ps,
                                    s->performance) != NPU_OK) {
        error_report("npu-mesh: property 'stats': cannot write '%s': %s", s->stats_path,
                     strerror(errno));
    }
    if (f) {
        fclose(f);
    }
}

void npu_chip_stop(NpuChipctlState *s, int exit_code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    s->stopped = true;
    write_stats(s);
    if (chip_engine_log_close(&s->engine_log) != NPU_OK) {
        error_report("npu-mesh: property 'engine-log': cannot write '%s'",
                     s->engine_log_path);
    }
    for (uint32_t h = 0; h < s->clock.nharts; h++) {
        chip_console_end_line(&s->console, h, chip_hart_time(&s->clock, h));
    }
    chip_console_flush(&s->console);
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    npu_chip_print(s, msg);
    fflush(stdout);
    exit(exit_code);
}

int npu_chip_current_hart(NpuChipctlState *s)
{
    if (!current_cpu || current_cpu->cpu_index >= (int)s->clock.nharts) {
        return -1;
    }
    return current_cpu->cpu_index;
}

static void report_harts(NpuChipctlState *s, bool running_only)
{
    for (uint32_t h = 0; h < s->clock.nharts; h++) {
        char who[48], what[256], line[400];
        if (running_only && s->clock.harts[h].state != CHIP_HART_RUNNING) {
            continue;
        }
        hart_name(s, h, who, sizeof(who));
        chip_hart_describe(&s->clock, h, what, sizeof(what));
        if (running_only) {
            CPUState *cs = qemu_get_cpu(h);
            snprintf(line, sizeof(line), "  %s: %s, pc 0x%" PRIx64 "%s\n", who, what,
                     cs ? (uint64_t)RISCV_CPU(cs)->env.pc : 0,
                     cs && cs->halted ? " (in WFI without a WAIT)" : "");
        } else {
            snprintf(line, sizeof(line), "  %s: %s\n", who, what);
        }
        npu_chip_print(s, line);
    }
}

/* Ends the run at a quiescent point if a core failed or the control core exited. */
static void stop_if_done(NpuChipctlState *s)
{
    uint32_t failed = chip_clock_first_failed(&s->clock);
    if (failed != UINT32_MAX) {
        const struct chip_hart *ch = &s->clock.harts[failed];
        char who[48];
        hart_name(s, failed, who, sizeof(who));
        npu_chip_stop(s, ch->exit_status, "[npu-mesh] stop: %s exited with status %d at "
                      "chip time %" PRIu64 " ps\n", who, ch->exit_status, ch->now_ps);
    }
    const struct chip_hart *ctrl = &s->clock.harts[s->clock.ncores];
    if (ctrl->state == CHIP_HART_FINISHED) {
        npu_chip_stop(s, ctrl->exit_status, "[npu-mesh] stop: control core exited with "
                      "status %d at chip time %" PRIu64 " ps\n", ctrl->exit_status,
                      MAX(s->clock.time_ps, ctrl->now_ps));
    }
}

static void deadlock_report(NpuChipctlState *s)
{
    char head[160];
    chip_console_flush(&s->console);
    snprintf(head, sizeof(head), "[npu-mesh] deadlock at chip time %" PRIu64
             " ps: every hart waits and no event is pending\n", s->clock.time_ps);
    npu_chip_print(s, head);
    report_harts(s, false);
    npu_chip_stop(s, NPU_EXIT_DEADLOCK, "[npu-mesh] stop: deadlock\n");
}

static void watchdog_rearm(NpuChipctlState *s)
{
    if (s->watchdog_ms) {
        timer_mod(s->watchdog,
                  qemu_clock_get_ms(QEMU_CLOCK_VIRTUAL_RT) + s->watchdog_ms);
    }
}

void npu_chip_step_if_quiescent(NpuChipctlState *s)
{
    if (s->stopped || chip_clock_any_running(&s->clock)) {
        return;
    }
    stop_if_done(s);
    if (chip_clock_advance(&s->clock) == NPU_ERR_DEADLOCK) {
        deadlock_report(s);
    }
    /* Harts run from the new chip time on: every line stamped before it is final. */
    chip_console_flush_before(&s->console, s->clock.time_ps);
    npu_chip_note_activity(s);
}

void npu_chip_hart_exit(NpuChipctlState *s, uint32_t hart, int status)
{
    npu_chip_note_activity(s);
    chip_console_end_line(&s->console, hart, chip_hart_time(&s->clock, hart));
    chip_hart_exit(&s->clock, hart, status);
    npu_chip_step_if_quiescent(s);
}

static void watchdog_expired(void *opaque)
{
    NpuChipctlState *s = opaque;
    char head[240];

    if (s->stopped) {
        return;
    }
    if (s->activity != s->activity_seen) {
        s->activity_seen = s->activity;
        watchdog_rearm(s);
        return;
    }
    chip_console_flush(&s->console);
    snprintf(head, sizeof(head), "[npu-mesh] watchdog: for %u ms of wall time chip time did "
             "not advance (at %" PRIu64 " ps) and no hart started a wait; harts still "
             "running:\n", s->watchdog_ms, s->clock.time_ps);
    npu_chip_print(s, head);
    report_harts(s, true);
    npu_chip_stop(s, NPU_EXIT_WATCHDOG, "[npu-mesh] stop: watchdog (firmware must wait, "
                  "not spin: see docs/clock.md)\n");
}

static void on_wake(void *opaque, uint32_t hart)
{
    NpuChipctlState *s = opaque;
    npu_core_woken(s->cores[hart]);
}

static void on_engine_irq(void *opaque, uint32_t core)
{
    NpuChipctlState *s = opaque;
    npu_core_raise(s->cores[core], R_CORE_IRQ_STATUS_ENGINE_MASK);
}

static uint64_t chipctl_read(void *opaque, hwaddr addr, unsigned size)
{
    NpuChipctlState *s = opaque;

    switch (addr) {
    case A_CHIPCTL_MAGIC:
        return NPU_CHIP_MAGIC;
    case A_CHIPCTL_VERSION:
        return NPU_REGSPEC_VERSION;
    case A_CHIPCTL_FDT_ADDR:
    case A_CHIPCTL_FDT_ADDR + 4:
        return npu_reg64_read(s->fdt_addr, addr - A_CHIPCTL_FDT_ADDR, size);
    case A_CHIPCTL_CHIP_TIME:
    case A_CHIPCTL_CHIP_TIME + 4:
        return npu_reg64_read(s->clock.time_ps, addr - A_CHIPCTL_CHIP_TIME, size);
    case A_CHIPCTL_RELEASE:
        return 0; /* write-only */
    default:
        qemu_log_mask(LOG_GUEST_ERROR, "npu-mesh chipctl: read of unknown register 0x%"
                      HWADDR_PRIx " by hart %d\n", addr, npu_chip_current_hart(s));
        return 0;
    }
}

static void chipctl_write(void *opaque, hwaddr addr, uint64_t value, unsigned size)
{
    NpuChipctlState *s = opaque;
    int hart = npu_chip_current_hart(s);

    if (s->stopped) {
        return;
    }
    if (addr != A_CHIPCTL_RELEASE) {
        qemu_log_mask(LOG_GUEST_ERROR, "npu-mesh chipctl: write to read-only or unknown "
                      "register 0x%" HWADDR_PRIx " by hart %d\n", addr, hart);
        return;
    }
    if (!FIELD_EX32(value, CHIPCTL_RELEASE, GO)) {
        return;
    }
    int rc = hart < 0 ? NPU_ERR_STATE : chip_release_cores(&s->clock, hart);
    if (rc != NPU_OK) {
        qemu_log_mask(LOG_GUEST_ERROR, "npu-mesh chipctl: RELEASE written by hart %d; only "
                      "the running control core (hart %u) may release the cores\n", hart,
                      s->clock.ncores);
    }
    if (hart >= 0) {
        s->cores[hart]->cmd_status = rc;
    }
}

static const MemoryRegionOps chipctl_ops = {
    .read = chipctl_read,
    .write = chipctl_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
    .valid = { .min_access_size = 4, .max_access_size = 8 },
    .impl = { .min_access_size = 4, .max_access_size = 8 },
};

/* The engine log (property engine-log), opened last in realize so that no earlier failure
   leaves it open; the engines write to it from now on. */
static bool open_engine_log(NpuChipctlState *s, Error **errp)
{
    if (!s->engine_log_path) {
        return true;
    }
    if (chip_engine_log_open(&s->engine_log, s->engine_log_path,
                             s->engine_log_core) != NPU_OK) {
        error_setg_errno(errp, errno, "npu-mesh: property 'engine-log': cannot write '%s'",
                         s->engine_log_path);
        return false;
    }
    s->engines.cfg.log = &s->engine_log;
    return true;
}

static void chipctl_realize(DeviceState *dev, Error **errp)
{
    NpuChipctlState *s = NPU_CHIPCTL(dev);
    struct chip_clock_params p = {
        .rows = s->cfg.mesh_rows,
        .cols = s->cfg.mesh_cols,
        .cycle_ps = chip_config_cycle_ps(&s->cfg),
        .cmd_cost_cycles = s->cfg.cmd_cost_cycles,
        .hop_cycles = s->cfg.noc_hop_cycles,
        .on_wake = on_wake,
        .opaque = s,
        .on_unit_event = chip_engines_on_event,
        .on_sem_change = chip_engines_on_sem_change,
        .unit = &s->engines,
    };
    struct chip_engine_cfg ecfg = {
        .sa_rows = s->cfg.sa_rows, .sa_cols = s->cfg.sa_cols,
        .sram_bytes_per_cycle = s->cfg.sram_bytes_per_cycle,
        .vec_lanes = s->cfg.vector_lanes, .vec_alus_per_lane = s->cfg.vector_alus_per_lane,
        .vec_pipeline_cycles = s->cfg.vector_pipeline_cycles,
        .hbm_bytes_per_s = (uint64_t)s->cfg.hbm_gbps * 1000000000ull,
        .hbm_latency_cycles = s->cfg.hbm_latency_cycles,
        .noc_link_bytes_per_s = (uint64_t)s->cfg.noc_link_gbps * 1000000000ull,
        .hbm_stacks = s->cfg.hbm_stacks,
        .hbm_stack_bytes_per_s = (uint64_t)s->cfg.hbm_stack_gbps * 1000000000ull,
        .congestion_free = s->cfg.congestion_free != 0,
        .functional = !s->performance,
        .on_irq = on_engine_irq,
        .opaque = s,
    };

    if (s->cfg.mesh_rows == 0 || s->cfg.mesh_cols == 0) {
        error_setg(errp, "npu-mesh chipctl: no chip configuration set");
        return;
    }
    /* The mesh may be the command line's, not the file's: check the alt cores against it. */
    bool alt_core[CHIP_CORES_MAX]; /* chip_engines_init copies it */
    char why[CHIP_ALT_CORES_MAX + 128];
    if (chip_config_alt_cores(&s->cfg, s->cfg.mesh_rows, s->cfg.mesh_cols, alt_core, why,
                              sizeof(why)) != NPU_OK) {
        error_setg(errp, "npu-mesh chipctl: chip %s: %s", s->cfg.name, why);
        return;
    }
    if (s->cfg.alt_cores[0]) {
        const struct chip_core_params alt = chip_config_core_params(&s->cfg, true);
        ecfg.alt_core = alt_core;
        ecfg.alt = (struct chip_engine_sizes){
            .sa_rows = alt.sa_rows, .sa_cols = alt.sa_cols,
            .sram_bytes_per_cycle = alt.sram_bytes_per_cycle, .vec_lanes = alt.vector_lanes,
            .hbm_bytes_per_s = (uint64_t)alt.hbm_gbps * 1000000000ull,
        };
    }
    if (chip_clock_init(&s->clock, &p) != NPU_OK ||
        chip_console_init(&s->console, s->clock.nharts, s->cfg.mesh_cols, console_emit,
                          s) != NPU_OK ||
        chip_engines_init(&s->engines, &s->clock, &ecfg, &s->mem) != NPU_OK ||
        chip_replay_init(&s->replay, s->engines.ncores) != NPU_OK) {
        error_setg(errp, "npu-mesh chipctl: out of memory for %u harts",
                   s->cfg.mesh_rows * s->cfg.mesh_cols + 1);
        return;
    }
    s->console.stamps = s->console_stamps;
    if (!open_engine_log(s, errp)) {
        return;
    }
    memory_region_init_io(&s->mmio, OBJECT(dev), &chipctl_ops, s, TYPE_NPU_CHIPCTL,
                          CHIPCTL_BLOCK_SIZE);
    sysbus_init_mmio(SYS_BUS_DEVICE(dev), &s->mmio);
    s->watchdog = timer_new_ms(QEMU_CLOCK_VIRTUAL_RT, watchdog_expired, s);
    watchdog_rearm(s);
}

static Property chipctl_props[] = {
    DEFINE_PROP_CHR("chardev", NpuChipctlState, chr),
    DEFINE_PROP_UINT32("watchdog-ms", NpuChipctlState, watchdog_ms, 30000),
    DEFINE_PROP_UINT64("fdt-addr", NpuChipctlState, fdt_addr, 0),
    DEFINE_PROP_STRING("stats", NpuChipctlState, stats_path),
    DEFINE_PROP_STRING("engine-log", NpuChipctlState, engine_log_path),
    DEFINE_PROP_UINT32("engine-log-core", NpuChipctlState, engine_log_core, CHIP_ENGINE_LOG_ALL),
    DEFINE_PROP_BOOL("console-stamps", NpuChipctlState, console_stamps, true),
    DEFINE_PROP_END_OF_LIST(),
};

static void chipctl_class_init(ObjectClass *klass, void *data)
{
    DeviceClass *dc = DEVICE_CLASS(klass);

    dc->realize = chipctl_realize;
    dc->user_creatable = false;
    device_class_set_props(dc, chipctl_props);
}

static const TypeInfo chipctl_info = {
    .name = TYPE_NPU_CHIPCTL,
    .parent = TYPE_SYS_BUS_DEVICE,
    .instance_size = sizeof(NpuChipctlState),
    .class_init = chipctl_class_init,
};

static void chipctl_register_types(void)
{
    type_register_static(&chipctl_info);
}

type_init(chipctl_register_types)
