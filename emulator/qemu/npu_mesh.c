/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The npu-mesh machine: R x C NPU-core harts plus one control-core hart on a flat global
 * address map (hal/regspec/npu_regs.toml, `memmap`), the chip control block, one register
 * block per hart, the exit device, a generated devicetree, and the images:
 *   -kernel CTRL.elf         control-core image, linked into DRAM;
 *   core-image=CORE.elf      NPU-core image, position independent, linked at 0 and copied
 *                            to the start of every core's SRAM (the firmware relocates
 *                            itself at start-up, see hal/src/start.S); its code is mapped
 *                            once for all cores (npu_mesh_image.c, its header).
 *
 * Properties: config=FILE (chip config, required), rows=, cols= (override the config's
 * mesh), core-image=, watchdog-ms= (0: off), mode=functional|performance, stats=FILE (JSON
 * report at the end), engine-log=FILE (every descriptor run, a Perfetto trace) and
 * engine-log-core=N (only core N's). -smp must equal rows * cols + 1.
 *
 * Modelled: the map, the harts, the clock, console and engines through the chip model (see
 * model/chip_engines.h for what the engines do and do not model yet). Not enforced: that a hart touches only
 * its own SRAM (plain RAM, for speed); the firmware's rule is to move data with engines only.
 */
#include "qemu/osdep.h"
#include "qemu/error-report.h"
#include "qemu/units.h"
#include "qapi/error.h"
#include "qapi/visitor.h"
#include "qemu/log.h"
#include "hw/boards.h"
#include "hw/loader.h"
#include "hw/qdev-properties.h"
#include "hw/qdev-properties-system.h"
#include "sysemu/reset.h"
#include "sysemu/sysemu.h"
#include "exec/address-spaces.h"
#include "elf.h"

#include "npu_mesh.h"

/* ---- accesses outside every backed region: a guest error and an access fault */

static const char *region_of(NpuMeshState *s, hwaddr addr)
{
    for (int r = 0; r < NPU_MAP__COUNT; r++) {
        const struct npu_map_entry *e = &npu_memmap[r];
        uint64_t span = e->stride ? e->stride * e->count : e->size;
        if (addr >= e->base && addr - e->base < span) {
            return e->name;
        }
    }
    return NULL;
}

/* A runaway hart can hit unmapped memory millions of times: log the first few per hart. */
#define UNMAPPED_LOG_MAX 8

static void unmapped_log(NpuMeshState *s, hwaddr addr, unsigned size, const char *what)
{
    const char *region = region_of(s, addr);
    int hart = npu_chip_current_hart(s->chipctl);
    uint32_t *count = hart >= 0 ? &s->unmapped_logged[hart] : NULL;

    if (count && *count > UNMAPPED_LOG_MAX) {
        return;
    }
    if (count && ++*count > UNMAPPED_LOG_MAX) {
        qemu_log_mask(LOG_GUEST_ERROR, "npu-mesh: hart %d: further unmapped accesses are "
                      "not logged\n", hart);
        return;
    }
    qemu_log_mask(LOG_GUEST_ERROR, "npu-mesh: hart %d %s of %u bytes at unmapped address 0x%"
                  HWADDR_PRIx " (%s%s)\n", hart, what, size,
                  addr, region ? "beyond what is backed in window " : "outside every window",
                  region ? region : "");
}

static MemTxResult unmapped_read(void *opaque, hwaddr addr, uint64_t *data, unsigned size,
                                 MemTxAttrs attrs)
{
    unmapped_log(opaque, addr, size, "read");
    *data = 0;
    return MEMTX_DECODE_ERROR;
}

static MemTxResult unmapped_write(void *opaque, hwaddr addr, uint64_t data, unsigned size,
                                  MemTxAttrs attrs)
{
    unmapped_log(opaque, addr, size, "write");
    return MEMTX_DECODE_ERROR;
}

static const MemoryRegionOps unmapped_ops = {
    .read_with_attrs = unmapped_read,
    .write_with_attrs = unmapped_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
    .valid = { .min_access_size = 1, .max_access_size = 8, .unaligned = true },
};

/* ---- configuration */

static void load_config(NpuMeshState *s)
{
    char err[512];

    if (!s->config_path) {
        error_report("npu-mesh: property 'config' is required: a chip config file such as "
                     "models/chips/mesh-4x4.toml");
        exit(1);
    }
    if (chip_config_load(&s->cfg, s->config_path, err, sizeof(err)) != NPU_OK) {
        error_report("npu-mesh: property 'config': %s", err);
        exit(1);
    }
    if (s->rows) {
        s->cfg.mesh_rows = s->rows;
    }
    if (s->cols) {
        s->cfg.mesh_cols = s->cols;
    }
    if (s->engine_log_core != CHIP_ENGINE_LOG_ALL &&
        s->engine_log_core >= s->cfg.mesh_rows * s->cfg.mesh_cols) {
        error_report("npu-mesh: property 'engine-log-core': core %u, the %ux%u mesh has "
                     "cores 0..%u", s->engine_log_core, s->cfg.mesh_rows, s->cfg.mesh_cols,
                     s->cfg.mesh_rows * s->cfg.mesh_cols - 1);
        exit(1);
    }
}

static void check_smp(MachineState *ms, uint32_t nharts)
{
    NpuMeshState *s = NPU_MESH_MACHINE(ms);

    if (ms->smp.cpus != nharts) {
        error_report("npu-mesh: a %ux%u mesh has %u harts (the cores and the control core): "
                     "start QEMU with -smp %u, not %u", s->cfg.mesh_rows, s->cfg.mesh_cols,
                     nharts, nharts, ms->smp.cpus);
        exit(1);
    }
}

/* ---- memory */

/* Host pages (docs/build.md, "Simulator speed: host pages and the
   planner's start-up"). QEMU asks for transparent huge pages on all
   guest RAM, and the first touch of one zeroes 2 MiB: a run touches the chip's memories
   sparsely (the HBM hardly at all in performance mode), so plain pages there, from byte
   `from` of the block on. The first huge page of a core's SRAM, which holds its image
   (data, stacks, descriptors: what its hart touches all the time), and the control core's
   DRAM keep them, one host TLB entry each (plain pages everywhere measured no faster on
   long runs: docs/results.md (#11)). */
static void no_huge_pages(MemoryRegion *mr, uint64_t from, uint64_t size)
{
#ifdef MADV_NOHUGEPAGE
    if (from < size) {
        madvise((uint8_t *)memory_region_get_ram_ptr(mr) + from, size - from,
                MADV_NOHUGEPAGE);
    }
#endif
}

static void map_ram(MemoryRegion *mr, const char *name, uint64_t base, uint64_t size)
{
    memory_region_init_ram_flags_nomigrate(mr, NULL, name, size, RAM_NORESERVE,
                                           &error_fatal);
    memory_region_add_subregion(get_system_memory(), base, mr);
}

static void create_memory(NpuMeshState *s, uint32_t ncores)
{
    MemoryRegion *sysmem = get_system_memory();

    memory_region_init_io(&s->unmapped, OBJECT(s), &unmapped_ops, s, "npu.unmapped",
                          UINT64_MAX);
    memory_region_add_subregion_overlap(sysmem, 0, &s->unmapped, -1000);
    map_ram(&s->dram, "npu.dram", npu_memmap[NPU_MAP_DRAM].base, s->cfg.dram_bytes);
    map_ram(&s->hbm, "npu.hbm", npu_memmap[NPU_MAP_HBM].base, s->cfg.hbm_bytes);
    no_huge_pages(&s->hbm, 0, s->cfg.hbm_bytes);
    s->unmapped_logged = g_new0(uint32_t, ncores + 1);
    s->sram = g_new0(MemoryRegion, ncores);
    s->code_alias = g_new0(MemoryRegion, ncores);
    /* the core image's code, once; every core's SRAM window starts with a read-only alias
       of it, over the SRAM's own first pages (npu_mesh_image.c, its header) */
    if (s->code_bytes) {
        memory_region_init_ram_flags_nomigrate(&s->core_code, NULL, "npu.core-code",
                                               s->code_bytes, RAM_NORESERVE, &error_fatal);
        /* read-only itself, not only through the aliases: no write reaches every core's
           code (the image loader's ROM writes still do) */
        memory_region_set_readonly(&s->core_code, true);
    }
    for (uint32_t i = 0; i < ncores; i++) {
        g_autofree char *name = g_strdup_printf("npu.sram%u", i);
        g_autofree char *code = g_strdup_printf("npu.sram%u.code", i);
        uint64_t base = npu_map_instance_base(NPU_MAP_SRAM, i);
        map_ram(&s->sram[i], name, base, s->cfg.sram_bytes);
        no_huge_pages(&s->sram[i], 2 * MiB, s->cfg.sram_bytes);
        if (s->code_bytes) {
            memory_region_init_alias(&s->code_alias[i], NULL, code, &s->core_code, 0,
                                     s->code_bytes);
            memory_region_set_readonly(&s->code_alias[i], true);
            memory_region_add_subregion_overlap(sysmem, base, &s->code_alias[i], 1);
        }
    }
    memory_region_init_rom(&s->fdt_rom, NULL, "npu.fdt", npu_memmap[NPU_MAP_FDT].size,
                           &error_fatal);
    memory_region_add_subregion(sysmem, npu_memmap[NPU_MAP_FDT].base, &s->fdt_rom);
}

/* ---- devices */

static void create_devices(NpuMeshState *s, uint32_t nharts)
{
    DeviceState *dev = qdev_new(TYPE_NPU_CHIPCTL);
    uint32_t ncores = nharts - 1;
    uint8_t **sram = g_new0(uint8_t *, ncores);

    for (uint32_t i = 0; i < ncores; i++) {
        sram[i] = memory_region_get_ram_ptr(&s->sram[i]);
    }
    s->chipctl = NPU_CHIPCTL(dev);
    s->chipctl->cfg = s->cfg;
    s->chipctl->performance = s->mode && strcmp(s->mode, "performance") == 0;
    s->chipctl->mem = (struct chip_mem){
        .ncores = ncores, .sram_bytes = s->cfg.sram_bytes, .sram = sram,
        .sram_code_bytes = s->code_bytes,
        .hbm_bytes = s->cfg.hbm_bytes, .hbm = memory_region_get_ram_ptr(&s->hbm),
        .dram_bytes = s->cfg.dram_bytes, .dram = memory_region_get_ram_ptr(&s->dram),
    };
    qdev_prop_set_chr(dev, "chardev", serial_hd(0));
    qdev_prop_set_uint32(dev, "watchdog-ms", s->watchdog_ms);
    qdev_prop_set_uint64(dev, "fdt-addr", npu_memmap[NPU_MAP_FDT].base);
    if (s->stats) {
        qdev_prop_set_string(dev, "stats", s->stats);
    }
    if (s->engine_log) {
        qdev_prop_set_string(dev, "engine-log", s->engine_log);
    }
    qdev_prop_set_uint32(dev, "engine-log-core", s->engine_log_core);
    qdev_prop_set_bit(dev, "console-stamps", s->console_stamps);
    sysbus_realize_and_unref(SYS_BUS_DEVICE(dev), &error_fatal);
    sysbus_mmio_map(SYS_BUS_DEVICE(dev), 0, npu_memmap[NPU_MAP_CHIPCTL].base);

    s->cores = g_new0(NpuCoreState *, nharts);
    for (uint32_t h = 0; h < nharts; h++) {
        bool ctrl = h == nharts - 1;
        dev = qdev_new(TYPE_NPU_CORE);
        qdev_prop_set_uint32(dev, "hart", h);
        object_property_set_link(OBJECT(dev), "chip", OBJECT(s->chipctl), &error_fatal);
        sysbus_realize_and_unref(SYS_BUS_DEVICE(dev), &error_fatal);
        sysbus_mmio_map(SYS_BUS_DEVICE(dev), 0,
                        ctrl ? npu_memmap[NPU_MAP_CTRL_REGS].base
                             : npu_map_instance_base(NPU_MAP_CORE_REGS, h));
        s->cores[h] = NPU_CORE(dev);
    }
    s->chipctl->cores = s->cores;

    dev = qdev_new(TYPE_NPU_EXIT);
    object_property_set_link(OBJECT(dev), "chip", OBJECT(s->chipctl), &error_fatal);
    sysbus_realize_and_unref(SYS_BUS_DEVICE(dev), &error_fatal);
    sysbus_mmio_map(SYS_BUS_DEVICE(dev), 0, npu_memmap[NPU_MAP_EXIT].base);
    s->exit_dev = NPU_EXIT(dev);
}

/* ---- harts */

static void hart_reset(void *opaque)
{
    cpu_reset(CPU(opaque));
}

static void create_harts(NpuMeshState *s, uint32_t nharts, const uint64_t *entries)
{
    s->cpus = g_new0(RISCVCPU, nharts);
    for (uint32_t h = 0; h < nharts; h++) {
        RISCVCPU *cpu = &s->cpus[h];
        object_initialize_child(OBJECT(s), "hart[*]", cpu, TYPE_RISCV_CPU_BASE64);
        qdev_prop_set_uint64(DEVICE(cpu), "resetvec", entries[h]);
        qdev_prop_set_bit(DEVICE(cpu), "h", false);
        cpu->env.mhartid = h;
        qemu_register_reset(hart_reset, cpu);
        qdev_realize(DEVICE(cpu), NULL, &error_fatal);
        sysbus_connect_irq(SYS_BUS_DEVICE(s->cores[h]), 0,
                           qdev_get_gpio_in(DEVICE(cpu), IRQ_M_EXT));
    }
}

static void npu_mesh_init(MachineState *ms)
{
    NpuMeshState *s = NPU_MESH_MACHINE(ms);
    char err[256];
    int fdt_size;

    load_config(s);
    if (chip_config_check_mesh(s->cfg.mesh_rows, s->cfg.mesh_cols, err, sizeof(err))) {
        error_report("npu-mesh: properties 'rows'/'cols': %s", err);
        exit(1);
    }
    uint32_t ncores = s->cfg.mesh_rows * s->cfg.mesh_cols, nharts = ncores + 1;
    check_smp(ms, nharts);
    if (!s->core_image) {
        error_report("npu-mesh: property 'core-image' is required: the NPU-core image");
        exit(1);
    }
    s->code_bytes = ncores <= NPU_SHARED_CODE_CORES_MAX ? npu_mesh_core_code_bytes(s) : 0;
    create_memory(s, ncores);
    create_devices(s, nharts);

    g_autofree uint64_t *entries = g_new0(uint64_t, nharts);
    for (uint32_t i = 0; i < ncores; i++) {
        entries[i] = npu_mesh_load_core_image(s, i);
    }
    entries[ncores] = npu_mesh_load_ctrl_image(ms, s);
    create_harts(s, nharts, entries);

    void *fdt = npu_mesh_build_fdt(s, &fdt_size);
    if ((uint64_t)fdt_size > npu_memmap[NPU_MAP_FDT].size) {
        error_report("npu-mesh: the devicetree (%d bytes) exceeds its window", fdt_size);
        exit(1);
    }
    rom_add_blob_fixed("npu.fdt", fdt, fdt_size, npu_memmap[NPU_MAP_FDT].base);
    ms->fdt = fdt;
}

/* ---- properties */

static void prop_get_u32(Object *obj, Visitor *v, const char *name, void *opaque,
                         Error **errp)
{
    uint32_t value = *(uint32_t *)((char *)obj + (uintptr_t)opaque);
    visit_type_uint32(v, name, &value, errp);
}

static void prop_set_dim(Object *obj, Visitor *v, const char *name, void *opaque,
                         Error **errp)
{
    uint32_t value;

    if (!visit_type_uint32(v, name, &value, errp)) {
        return;
    }
    if (value < 1 || value > CHIP_MESH_DIM_MAX) {
        error_setg(errp, "npu-mesh: property '%s' must be 1..%u, got %u", name,
                   CHIP_MESH_DIM_MAX, value);
        return;
    }
    *(uint32_t *)((char *)obj + (uintptr_t)opaque) = value;
}

static void prop_set_u32(Object *obj, Visitor *v, const char *name, void *opaque,
                         Error **errp)
{
    uint32_t value;

    if (visit_type_uint32(v, name, &value, errp)) {
        *(uint32_t *)((char *)obj + (uintptr_t)opaque) = value;
    }
}

#define STR_PROP(field)                                                              \
    static char *get_##field(Object *obj, Error **errp)                              \
    {                                                                                \
        return g_strdup(NPU_MESH_MACHINE(obj)->field);                               \
    }                                                                                \
    static void set_##field(Object *obj, const char *value, Error **errp)           \
    {                                                                                \
        g_free(NPU_MESH_MACHINE(obj)->field);                                        \
        NPU_MESH_MACHINE(obj)->field = g_strdup(value);                              \
    }
STR_PROP(config_path)
STR_PROP(core_image)
STR_PROP(stats)
STR_PROP(engine_log)

static char *get_mode(Object *obj, Error **errp)
{
    const char *mode = NPU_MESH_MACHINE(obj)->mode;
    return g_strdup(mode ? mode : "functional");
}

static void set_mode(Object *obj, const char *value, Error **errp)
{
    if (strcmp(value, "functional") != 0 && strcmp(value, "performance") != 0) {
        error_setg(errp, "npu-mesh: property 'mode' must be functional or performance, "
                   "got '%s'", value);
        return;
    }
    g_free(NPU_MESH_MACHINE(obj)->mode);
    NPU_MESH_MACHINE(obj)->mode = g_strdup(value);
}

static void npu_mesh_instance_init(Object *obj)
{
    NPU_MESH_MACHINE(obj)->watchdog_ms = 30000;
    NPU_MESH_MACHINE(obj)->engine_log_core = CHIP_ENGINE_LOG_ALL;
    NPU_MESH_MACHINE(obj)->console_stamps = true;
}

static bool get_console_stamps(Object *obj, Error **errp)
{
    return NPU_MESH_MACHINE(obj)->console_stamps;
}

static void set_console_stamps(Object *obj, bool value, Error **errp)
{
    NPU_MESH_MACHINE(obj)->console_stamps = value;
}

static void npu_mesh_class_init(ObjectClass *oc, void *data)
{
    MachineClass *mc = MACHINE_CLASS(oc);

    mc->desc = "npu-mesh: R x C NPU-core mesh with a control core (chip clock model)";
    mc->init = npu_mesh_init;
    mc->max_cpus = CHIP_CORES_MAX + 1;
    object_class_property_add(oc, "rows", "uint32", prop_get_u32, prop_set_dim, NULL,
                              (void *)offsetof(NpuMeshState, rows));
    object_class_property_set_description(oc, "rows", "mesh rows (overrides the config)");
    object_class_property_add(oc, "cols", "uint32", prop_get_u32, prop_set_dim, NULL,
                              (void *)offsetof(NpuMeshState, cols));
    object_class_property_set_description(oc, "cols", "mesh columns (overrides the config)");
    object_class_property_add(oc, "watchdog-ms", "uint32", prop_get_u32, prop_set_u32, NULL,
                              (void *)offsetof(NpuMeshState, watchdog_ms));
    object_class_property_set_description(oc, "watchdog-ms",
        "stop if chip time does not advance for this long in wall time (0: never)");
    object_class_property_add_str(oc, "config", get_config_path, set_config_path);
    object_class_property_set_description(oc, "config", "chip config file (.toml)");
    object_class_property_add_str(oc, "stats", get_stats, set_stats);
    object_class_property_set_description(oc, "stats",
        "write the run's counters and energy as JSON to this file at the end");
    object_class_property_add_str(oc, "engine-log", get_engine_log, set_engine_log);
    object_class_property_set_description(oc, "engine-log",
        "log every descriptor the engines run to this file (Chrome / Perfetto JSON)");
    object_class_property_add(oc, "engine-log-core", "uint32", prop_get_u32, prop_set_u32,
                              NULL, (void *)offsetof(NpuMeshState, engine_log_core));
    object_class_property_set_description(oc, "engine-log-core",
        "log only this core's descriptors (default: every core's)");
    object_class_property_add_str(oc, "mode", get_mode, set_mode);
    object_class_property_set_description(oc, "mode",
        "functional (engines compute on real data, default) or performance (timing only)");
    object_class_property_add_bool(oc, "console-stamps", get_console_stamps,
                                   set_console_stamps);
    object_class_property_set_description(oc, "console-stamps",
        "stamp each console line with its chip time and hart (default on; off: the harts' "
        "text alone, as TAP consumers read it)");
    object_class_property_add_str(oc, "core-image", get_core_image, set_core_image);
    object_class_property_set_description(oc, "core-image", "NPU-core firmware ELF");
}

static const TypeInfo npu_mesh_info = {
    .name = TYPE_NPU_MESH_MACHINE,
    .parent = TYPE_MACHINE,
    .instance_size = sizeof(NpuMeshState),
    .instance_init = npu_mesh_instance_init,
    .class_init = npu_mesh_class_init,
};

static void npu_mesh_register_types(void)
{
    type_register_static(&npu_mesh_info);
}

type_init(npu_mesh_register_types)
