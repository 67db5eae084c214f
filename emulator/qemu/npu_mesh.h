/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * npu-mesh: QEMU glue for the project's mesh NPU. The chip itself (clock, console, config)
 * lives in the plain-C chip model under model/; these files only connect it to QEMU:
 * CPUs, memory regions, MMIO register blocks, image loading and the devicetree.
 */
#ifndef HW_RISCV_NPU_MESH_H
#define HW_RISCV_NPU_MESH_H

#include "hw/boards.h"
#include "hw/sysbus.h"
#include "chardev/char-fe.h"
#include "qom/object.h"
#include "target/riscv/cpu.h"

#include "model/chip_clock.h"
#include "chip_config.h"
#include "model/chip_console.h"
#include "model/chip_engine_log.h"
#include "model/chip_engines.h"
#include "model/chip_replay.h"
#include "model/chip_route.h"
#include "npu_memmap.h"

#define TYPE_NPU_MESH_MACHINE MACHINE_TYPE_NAME("npu-mesh")
#define TYPE_NPU_CHIPCTL "npu-mesh.chipctl"
#define TYPE_NPU_CORE "npu-mesh.core"
#define TYPE_NPU_EXIT "npu-mesh.exit"

OBJECT_DECLARE_SIMPLE_TYPE(NpuChipctlState, NPU_CHIPCTL)
OBJECT_DECLARE_SIMPLE_TYPE(NpuCoreState, NPU_CORE)
OBJECT_DECLARE_SIMPLE_TYPE(NpuExitState, NPU_EXIT)
OBJECT_DECLARE_SIMPLE_TYPE(NpuMeshState, NPU_MESH_MACHINE)

/* Chip control block; owns the chip model (clock + console) every other device uses. */
struct NpuChipctlState {
    SysBusDevice parent_obj;
    MemoryRegion mmio;
    CharBackend chr;
    struct chip_config cfg;   /* set by the machine before realize */
    struct chip_mem mem;      /* likewise: the backed memories and their host pointers */
    bool performance;         /* likewise: performance mode (engines leave data untouched) */
    struct chip_clock clock;
    struct chip_console console;
    struct chip_engines engines;
    struct chip_replay replay; /* performance mode: replay slots (chip_replay.h) */
    struct NpuCoreState **cores; /* per hart, set by the machine */
    uint32_t watchdog_ms;
    QEMUTimer *watchdog;
    uint64_t activity;        /* clock steps, waits started and exits, for the watchdog */
    uint64_t activity_seen;   /* ... as counted when the watchdog last looked */
    uint64_t fdt_addr;
    char *stats_path;         /* where to write the JSON report at the end, or NULL */
    char *engine_log_path;    /* where to log every descriptor (chip_engine_log.h), or NULL */
    uint32_t engine_log_core; /* the one core it logs, or CHIP_ENGINE_LOG_ALL */
    bool console_stamps;      /* each console line's chip-time and hart stamp */
    struct chip_engine_log engine_log;
    bool stopped;             /* a final report was printed; ignore further guest writes */
};

/* One hart's register block (block `core` of the register specification). */
struct NpuCoreState {
    SysBusDevice parent_obj;
    MemoryRegion mmio;
    qemu_irq irq;             /* the hart's machine external interrupt */
    NpuChipctlState *chip;
    uint32_t hart;            /* hart index: core id, or ncores for the control core */
    struct chip_wait wait;    /* WAIT_* registers being assembled */
    uint32_t wait_kind;
    uint32_t irq_status, irq_enable;
    uint32_t sem_target, sem_value;
    uint64_t submit_addr;
    uint32_t submit_count;
    uint64_t route_addr;      /* ROUTE_ADDR */
    struct chip_route route;  /* ROUTE's cached layer table (chip_route.h) */
    uint32_t perf_sel;
    uint32_t replay_slot, replay_count; /* REPLAY_* registers */
    int32_t cmd_status;
};

struct NpuExitState {
    SysBusDevice parent_obj;
    MemoryRegion mmio;
    NpuChipctlState *chip;
};

struct NpuMeshState {
    MachineState parent_obj;
    uint32_t rows, cols;      /* 0: take the config's mesh */
    char *config_path;
    char *core_image;
    char *mode;               /* "functional" (default) or "performance" */
    char *stats;              /* JSON report of the run (counters, energy), or NULL */
    char *engine_log;         /* descriptor log (Perfetto JSON), or NULL */
    uint32_t engine_log_core;
    uint32_t watchdog_ms;
    bool console_stamps;      /* "console-stamps": off prints the harts' text alone (TAP) */
    struct chip_config cfg;
    RISCVCPU *cpus;           /* harts 0..N-1 NPU cores, hart N the control core */
    MemoryRegion *sram;
    MemoryRegion *code_alias; /* per core: its SRAM's first code_bytes, read-only */
    MemoryRegion core_code;   /* the core image's code, shared (npu_mesh_image.c) */
    uint64_t code_bytes;
    MemoryRegion dram, hbm, fdt_rom, unmapped;
    NpuChipctlState *chipctl;
    NpuCoreState **cores;     /* per hart */
    NpuExitState *exit_dev;
    uint32_t *unmapped_logged; /* per hart, to rate-limit the guest-error log */
};

/*
 * The most cores that share the image's code (npu_mesh_image.c). A shared core's SRAM window
 * takes one more section of QEMU's dispatch map (the alias), which holds at most 4096:
 * 1024 cores with their register blocks and the unmapped gaps between windows pass it, so
 * larger meshes keep a copy of the code per core, as before.
 */
#define NPU_SHARED_CODE_CORES_MAX 512u

/* Images (npu_mesh_image.c); each refuses a bad image and exits, naming it. */
/* The size of the core image's code segment, page-aligned: what every core shares. */
uint64_t npu_mesh_core_code_bytes(const NpuMeshState *s);
/* Loads the core image into core `core`'s SRAM; returns its entry address. */
uint64_t npu_mesh_load_core_image(NpuMeshState *s, uint32_t core);
/* Loads -kernel into the control core's DRAM; returns its entry address. */
uint64_t npu_mesh_load_ctrl_image(MachineState *ms, NpuMeshState *s);

/* 64-bit registers may be read whole or as two 32-bit halves (off: 0 low, 4 high). */
static inline uint64_t npu_reg64_read(uint64_t value, hwaddr off, unsigned size)
{
    return size == 8 ? value : (uint32_t)(value >> (off ? 32 : 0));
}

/* The clock stepped, or a hart started a wait or finished: the chip makes progress. */
static inline void npu_chip_note_activity(NpuChipctlState *s)
{
    s->activity++;
}

/* Chip-level services the devices share (npu_chipctl.c). */
void npu_chip_step_if_quiescent(NpuChipctlState *s);
void npu_chip_stop(NpuChipctlState *s, int exit_code, const char *fmt, ...)
    G_GNUC_PRINTF(3, 4) G_GNUC_NORETURN;
void npu_chip_print(NpuChipctlState *s, const char *text);
/* A hart has finished (EXIT register or exit device): end its line, record, maybe step. */
void npu_chip_hart_exit(NpuChipctlState *s, uint32_t hart, int status);
/* The hart executing the current MMIO access, or -1 if none (e.g. gdb). */
int npu_chip_current_hart(NpuChipctlState *s);
/* Raises or lowers a core's interrupt line from its IRQ_STATUS & IRQ_ENABLE. */
void npu_core_update_irq(NpuCoreState *core);
/* Sets interrupt sources (IRQ_STATUS bits) of a core and updates its line. */
void npu_core_raise(NpuCoreState *core, uint32_t sources);
/* Called by the clock for every hart that wakes. */
void npu_core_woken(NpuCoreState *core);

/* The devicetree of the machine (npu_mesh_fdt.c). */
void *npu_mesh_build_fdt(NpuMeshState *s, int *size);

#endif
