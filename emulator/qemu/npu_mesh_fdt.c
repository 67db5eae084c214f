/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The npu-mesh devicetree. Firmware discovers the chip from it (hal/src/chip_info.c): mesh
 * shape, clock, per-hart core id, coordinates, register block and SRAM, the control core's
 * DRAM, HBM, the exit device and the chip control block. Layout (docs/devicetree.md):
 *
 *   / { compatible = "npu-mesh"; #address-cells = <2>; #size-cells = <2>;
 *     chip@2000000 { compatible = "npu-mesh,chip"; reg; npu,mesh = <rows cols>; ... };
 *     cpus { cpu@N { device_type = "cpu"; reg = <N>; npu,role = "core" | "control";
 *                    npu,core-id; npu,coord = <row col>; npu,regs = <reg block>;
 *                    npu,sram = <SRAM, cores only> }; };
 *     memory@80000000 (control DRAM), hbm@..., exit@100000,
 *     chosen { bootargs = QEMU's -append string } };
 */
#include "qemu/osdep.h"
#include "qemu/error-report.h"
#include "sysemu/device_tree.h"
#include <libfdt.h>

#include "npu_mesh.h"

static void set_reg(void *fdt, const char *node, const char *prop, uint64_t base,
                    uint64_t size)
{
    qemu_fdt_setprop_sized_cells(fdt, node, prop, 2, base, 2, size);
}

static void add_chip_node(NpuMeshState *s, void *fdt)
{
    g_autofree char *node = g_strdup_printf("/chip@%" PRIx64,
                                            npu_memmap[NPU_MAP_CHIPCTL].base);
    const struct chip_config *c = &s->cfg;

    qemu_fdt_add_subnode(fdt, node);
    qemu_fdt_setprop_string(fdt, node, "compatible", "npu-mesh,chip");
    set_reg(fdt, node, "reg", npu_memmap[NPU_MAP_CHIPCTL].base,
            npu_memmap[NPU_MAP_CHIPCTL].size);
    qemu_fdt_setprop_string(fdt, node, "npu,config-name", c->name);
    qemu_fdt_setprop_cells(fdt, node, "npu,mesh", c->mesh_rows, c->mesh_cols);
    qemu_fdt_setprop_cell(fdt, node, "npu,num-cores", c->mesh_rows * c->mesh_cols);
    qemu_fdt_setprop_cell(fdt, node, "npu,freq-mhz", c->freq_mhz);
    qemu_fdt_setprop_cell(fdt, node, "npu,cycle-ps", chip_config_cycle_ps(c));
    qemu_fdt_setprop_cell(fdt, node, "npu,cmd-cost-cycles", c->cmd_cost_cycles);
    qemu_fdt_setprop_cell(fdt, node, "npu,noc-hop-cycles", c->noc_hop_cycles);
    qemu_fdt_setprop_cell(fdt, node, "npu,sems-per-core", CHIP_SEMS_PER_CORE);
    qemu_fdt_setprop_u64(fdt, node, "npu,sram-size", c->sram_bytes);
    qemu_fdt_setprop_cells(fdt, node, "npu,systolic-array", c->sa_rows, c->sa_cols);
    qemu_fdt_setprop_cell(fdt, node, "npu,sram-bytes-per-cycle", c->sram_bytes_per_cycle);
    qemu_fdt_setprop_cells(fdt, node, "npu,vector", c->vector_lanes, c->vector_alus_per_lane);
    qemu_fdt_setprop_cell(fdt, node, "npu,hbm-gbps", c->hbm_gbps);
    qemu_fdt_setprop_cell(fdt, node, "npu,hbm-latency-cycles", c->hbm_latency_cycles);
    qemu_fdt_setprop_cell(fdt, node, "npu,noc-link-gbps", c->noc_link_gbps);
    qemu_fdt_setprop_cells(fdt, node, "npu,hbm-stacks", c->hbm_stacks, c->hbm_stack_gbps);
    qemu_fdt_setprop_cell(fdt, node, "npu,congestion-free", c->congestion_free);
    qemu_fdt_setprop_string(fdt, node, "npu,mode", s->chipctl->performance ? "performance"
                                                                            : "functional");
    qemu_fdt_setprop_cell(fdt, node, "npu,regspec-version", NPU_REGSPEC_VERSION);
}

static void add_cpu_node(NpuMeshState *s, void *fdt, uint32_t hart, uint32_t ncores)
{
    g_autofree char *node = g_strdup_printf("/cpus/cpu@%u", hart);
    bool ctrl = hart == ncores;
    uint32_t cols = s->cfg.mesh_cols;

    qemu_fdt_add_subnode(fdt, node);
    qemu_fdt_setprop_string(fdt, node, "device_type", "cpu");
    qemu_fdt_setprop_cell(fdt, node, "reg", hart);
    qemu_fdt_setprop_string(fdt, node, "compatible", "riscv");
    qemu_fdt_setprop_string(fdt, node, "riscv,isa", "rv64imafdc");
    qemu_fdt_setprop_string(fdt, node, "npu,role", ctrl ? "control" : "core");
    qemu_fdt_setprop_cell(fdt, node, "npu,core-id", hart);
    /* The control core attaches to the mesh at router (0,0). */
    qemu_fdt_setprop_cells(fdt, node, "npu,coord", ctrl ? 0 : hart / cols,
                           ctrl ? 0 : hart % cols);
    set_reg(fdt, node, "npu,regs",
            ctrl ? npu_memmap[NPU_MAP_CTRL_REGS].base
                 : npu_map_instance_base(NPU_MAP_CORE_REGS, hart),
            npu_memmap[NPU_MAP_CORE_REGS].size);
    if (!ctrl) {
        set_reg(fdt, node, "npu,sram", npu_map_instance_base(NPU_MAP_SRAM, hart),
                s->cfg.sram_bytes);
    }
}

static void add_memory_nodes(NpuMeshState *s, void *fdt)
{
    g_autofree char *dram = g_strdup_printf("/memory@%" PRIx64, npu_memmap[NPU_MAP_DRAM].base);
    g_autofree char *hbm = g_strdup_printf("/hbm@%" PRIx64, npu_memmap[NPU_MAP_HBM].base);
    g_autofree char *exit_node = g_strdup_printf("/exit@%" PRIx64,
                                                 npu_memmap[NPU_MAP_EXIT].base);
    const char exit_compat[] = "npu-mesh,exit\0sifive,test0";

    qemu_fdt_add_subnode(fdt, dram);
    qemu_fdt_setprop_string(fdt, dram, "device_type", "memory");
    set_reg(fdt, dram, "reg", npu_memmap[NPU_MAP_DRAM].base, s->cfg.dram_bytes);
    qemu_fdt_add_subnode(fdt, hbm);
    qemu_fdt_setprop_string(fdt, hbm, "compatible", "npu-mesh,hbm");
    set_reg(fdt, hbm, "reg", npu_memmap[NPU_MAP_HBM].base, s->cfg.hbm_bytes);
    qemu_fdt_add_subnode(fdt, exit_node);
    qemu_fdt_setprop(fdt, exit_node, "compatible", exit_compat, sizeof(exit_compat));
    set_reg(fdt, exit_node, "reg", npu_memmap[NPU_MAP_EXIT].base,
            npu_memmap[NPU_MAP_EXIT].size);
}

void *npu_mesh_build_fdt(NpuMeshState *s, int *size)
{
    uint32_t ncores = s->cfg.mesh_rows * s->cfg.mesh_cols;
    void *fdt = create_device_tree(size);

    if (!fdt) {
        error_report("npu-mesh: cannot create the devicetree");
        exit(1);
    }
    qemu_fdt_setprop_string(fdt, "/", "compatible", "npu-mesh");
    qemu_fdt_setprop_string(fdt, "/", "model", "npu-mesh");
    qemu_fdt_setprop_cell(fdt, "/", "#address-cells", 2);
    qemu_fdt_setprop_cell(fdt, "/", "#size-cells", 2);
    add_chip_node(s, fdt);
    qemu_fdt_add_subnode(fdt, "/cpus");
    qemu_fdt_setprop_cell(fdt, "/cpus", "#address-cells", 1);
    qemu_fdt_setprop_cell(fdt, "/cpus", "#size-cells", 0);
    /* Added in reverse so that libfdt, which prepends subnodes, lists cpu@0 first. */
    for (uint32_t h = ncores + 1; h-- > 0;) {
        add_cpu_node(s, fdt, h, ncores);
    }
    add_memory_nodes(s, fdt);
    qemu_fdt_add_subnode(fdt, "/chosen");
    qemu_fdt_setprop_string(fdt, "/chosen", "bootargs",
                            MACHINE(s)->kernel_cmdline ? MACHINE(s)->kernel_cmdline : "");
    if (fdt_pack(fdt) != 0) {
        error_report("npu-mesh: cannot pack the devicetree");
        exit(1);
    }
    *size = fdt_totalsize(fdt);
    return fdt;
}
