/* SPDX-License-Identifier: MIT */
/*
 * Start-up in C and chip discovery. The only address taken from the memory map is the chip
 * control block's, whose FDT_ADDR register tells where the devicetree is; everything else
 * (mesh, clock, this hart's id, coordinates, register block and SRAM, memories) comes from
 * the devicetree (docs/devicetree.md).
 */
#include <string.h>

#include "npu/fdt_read.h"
#include "npu/hal.h"
#include "npu/mmio.h"

/* Filled once at start-up; read through hal_chip() and hal_self() (npu/hal.h). */
struct hal_chip_info hal_chip_data;
struct hal_core_info hal_self_data;
static struct fdt_blob blob;
static const char *bootargs = "";

extern void __libc_init_array(void);
void hal_start(void) __attribute__((noreturn));

const char *hal_bootargs(void)
{
    return bootargs;
}

/* Finds word `name` in bootargs, followed by '=' if want_value; returns what follows it. */
static const char *find_word(const char *name, bool want_value)
{
    size_t len = strlen(name);
    for (const char *p = bootargs; *p;) {
        while (*p == ' ')
            p++;
        size_t wlen = strcspn(p, " ");
        if (wlen >= len && strncmp(p, name, len) == 0) {
            if (!want_value && wlen == len)
                return p + len;
            if (want_value && p[len] == '=')
                return p + len + 1;
        }
        p += wlen;
    }
    return NULL;
}

const char *hal_bootarg_value(const char *key)
{
    return find_word(key, true);
}

bool hal_bootarg_has(const char *word)
{
    return find_word(word, false) != NULL;
}

uint64_t hal_cycle_ps(void)
{
    return hal_chip_data.cycle_ps;
}

/* A child of the root whose compatible (or device_type) matches. */
static int find_root_child(const char *compat, const char *device_type, int *out)
{
    int root, node;
    int rc = fdt_node_find(&blob, "/", &root);
    for (rc = rc ? rc : fdt_node_first_child(&blob, root, &node); rc == NPU_OK;
         rc = fdt_node_next_sibling(&blob, node, &node)) {
        const char *type;
        if (compat && fdt_node_is_compatible(&blob, node, compat))
            break;
        if (device_type && fdt_prop_string(&blob, node, "device_type", &type) == NPU_OK &&
            strcmp(type, device_type) == 0)
            break;
    }
    if (rc == NPU_OK)
        *out = node;
    return rc;
}

static int read_reg(int node, const char *prop, uint64_t *base, uint64_t *size)
{
    uint32_t cells[4];
    int rc = fdt_prop_cells(&blob, node, prop, cells, 4);
    if (rc == NPU_OK) {
        *base = (uint64_t)cells[0] << 32 | cells[1];
        *size = (uint64_t)cells[2] << 32 | cells[3];
    }
    return rc;
}

/* The engines' parameters (the chip node). */
static int load_engine_props(int node)
{
    uint32_t sa[2], vec[2], stacks[2], congestion_free;
    const char *mode;
    int rc = fdt_prop_cells(&blob, node, "npu,systolic-array", sa, 2);
    if (rc == NPU_OK)
        rc = fdt_prop_cells(&blob, node, "npu,vector", vec, 2);
    if (rc == NPU_OK)
        rc = fdt_prop_u32(&blob, node, "npu,sram-bytes-per-cycle",
                          &hal_chip_data.sram_bytes_per_cycle);
    if (rc == NPU_OK)
        rc = fdt_prop_u32(&blob, node, "npu,hbm-gbps", &hal_chip_data.hbm_gbps);
    if (rc == NPU_OK)
        rc = fdt_prop_u32(&blob, node, "npu,hbm-latency-cycles", &hal_chip_data.hbm_latency_cycles);
    if (rc == NPU_OK)
        rc = fdt_prop_u32(&blob, node, "npu,noc-link-gbps", &hal_chip_data.noc_link_gbps);
    if (rc == NPU_OK)
        rc = fdt_prop_cells(&blob, node, "npu,hbm-stacks", stacks, 2);
    if (rc == NPU_OK)
        rc = fdt_prop_u32(&blob, node, "npu,congestion-free", &congestion_free);
    if (rc == NPU_OK)
        rc = fdt_prop_string(&blob, node, "npu,mode", &mode);
    if (rc != NPU_OK)
        return rc;
    hal_chip_data.hbm_stacks = stacks[0], hal_chip_data.hbm_stack_gbps = stacks[1];
    hal_chip_data.congestion_free = congestion_free != 0;
    hal_chip_data.sa_rows = sa[0], hal_chip_data.sa_cols = sa[1];
    hal_chip_data.vector_lanes = vec[0], hal_chip_data.vector_alus_per_lane = vec[1];
    hal_chip_data.performance = strcmp(mode, "performance") == 0;
    return NPU_OK;
}

static int load_chip_node(void)
{
    int node, rc = find_root_child("npu-mesh,chip", NULL, &node);
    uint32_t mesh[2];
    const char *name;
    if (rc == NPU_OK)
        rc = fdt_prop_cells(&blob, node, "npu,mesh", mesh, 2);
    if (rc == NPU_OK)
        rc = fdt_prop_u32(&blob, node, "npu,num-cores", &hal_chip_data.ncores);
    if (rc == NPU_OK)
        rc = fdt_prop_u32(&blob, node, "npu,freq-mhz", &hal_chip_data.freq_mhz);
    if (rc == NPU_OK)
        rc = fdt_prop_u32(&blob, node, "npu,cycle-ps", &hal_chip_data.cycle_ps);
    if (rc == NPU_OK)
        rc = fdt_prop_u32(&blob, node, "npu,cmd-cost-cycles", &hal_chip_data.cmd_cost_cycles);
    if (rc == NPU_OK)
        rc = fdt_prop_u32(&blob, node, "npu,noc-hop-cycles", &hal_chip_data.noc_hop_cycles);
    if (rc == NPU_OK)
        rc = fdt_prop_u32(&blob, node, "npu,sems-per-core", &hal_chip_data.sems_per_core);
    if (rc == NPU_OK)
        rc = fdt_prop_u32(&blob, node, "npu,regspec-version", &hal_chip_data.regspec_version);
    if (rc == NPU_OK)
        rc = fdt_prop_u64(&blob, node, "npu,sram-size", &hal_chip_data.sram_bytes);
    if (rc == NPU_OK)
        rc = read_reg(node, "reg", &hal_chip_data.chipctl_base, &hal_chip_data.chipctl_size);
    if (rc == NPU_OK)
        rc = fdt_prop_string(&blob, node, "npu,config-name", &name);
    if (rc == NPU_OK)
        rc = load_engine_props(node);
    if (rc != NPU_OK)
        return rc;
    hal_chip_data.rows = mesh[0];
    hal_chip_data.cols = mesh[1];
    strncpy(hal_chip_data.config_name, name, sizeof(hal_chip_data.config_name) - 1);
    const struct hal_chip_info *c = &hal_chip_data;
    return c->cycle_ps && c->ncores == c->rows * c->cols ? NPU_OK : NPU_ERR_FORMAT;
}

static int load_memory_nodes(void)
{
    int node, rc = find_root_child(NULL, "memory", &node);
    if (rc == NPU_OK)
        rc = read_reg(node, "reg", &hal_chip_data.dram_base, &hal_chip_data.dram_size);
    if (rc == NPU_OK)
        rc = find_root_child("npu-mesh,hbm", NULL, &node);
    if (rc == NPU_OK)
        rc = read_reg(node, "reg", &hal_chip_data.hbm_base, &hal_chip_data.hbm_size);
    if (rc == NPU_OK)
        rc = find_root_child("npu-mesh,exit", NULL, &node);
    if (rc == NPU_OK)
        rc = read_reg(node, "reg", &hal_chip_data.exit_base, &hal_chip_data.exit_size);
    if (rc == NPU_OK && fdt_node_find(&blob, "/chosen", &node) == NPU_OK &&
        fdt_prop_string(&blob, node, "bootargs", &bootargs) != NPU_OK)
        bootargs = "";
    return rc;
}

static int read_cpu_node(int node, struct hal_core_info *out)
{
    uint32_t coord[2];
    const char *role;
    int rc = fdt_prop_u32(&blob, node, "npu,core-id", &out->core_id);
    if (rc == NPU_OK)
        rc = fdt_prop_cells(&blob, node, "npu,coord", coord, 2);
    if (rc == NPU_OK)
        rc = fdt_prop_string(&blob, node, "npu,role", &role);
    if (rc == NPU_OK)
        rc = read_reg(node, "npu,regs", &out->regs_base, &out->regs_size);
    if (rc != NPU_OK)
        return rc;
    out->row = coord[0];
    out->col = coord[1];
    out->is_ctrl = strcmp(role, "control") == 0;
    out->sram_base = out->sram_size = 0;
    if (!out->is_ctrl)
        rc = read_reg(node, "npu,sram", &out->sram_base, &out->sram_size);
    return rc;
}

int hal_core_info_get(uint32_t core_id, struct hal_core_info *out)
{
    int cpus, node;
    int rc = fdt_node_find(&blob, "/cpus", &cpus);
    for (rc = rc ? rc : fdt_node_first_child(&blob, cpus, &node); rc == NPU_OK;
         rc = fdt_node_next_sibling(&blob, node, &node)) {
        uint32_t reg;
        if (fdt_prop_u32(&blob, node, "reg", &reg) == NPU_OK && reg == core_id)
            return read_cpu_node(node, out);
    }
    return rc;
}

static int chip_info_load(uint64_t fdt_addr)
{
    uint64_t hart;
    __asm__ volatile("csrr %0, mhartid" : "=r"(hart));
    int rc = fdt_blob_open(&blob, (const void *)(uintptr_t)fdt_addr,
                           npu_memmap[NPU_MAP_FDT].size);
    if (rc == NPU_OK)
        rc = load_chip_node();
    if (rc == NPU_OK)
        rc = load_memory_nodes();
    if (rc == NPU_OK)
        rc = hal_core_info_get((uint32_t)hart, &hal_self_data);
    hal_chip_data.fdt_base = fdt_addr;
    hal_chip_data.fdt_size = blob.totalsize;
    return rc;
}

void hal_start(void)
{
    uint64_t chipctl = npu_memmap[NPU_MAP_CHIPCTL].base;
    int rc = NPU_ERR_FORMAT;

    if (mmio_read32(chipctl + CHIPCTL_MAGIC_OFFSET) == NPU_CHIP_MAGIC)
        rc = chip_info_load(mmio_read64(chipctl + CHIPCTL_FDT_ADDR_OFFSET));
    if (rc != NPU_OK || hal_chip_data.regspec_version != NPU_REGSPEC_VERSION) {
        /* Without the devicetree this hart cannot find its console: end through the exit
           device, which the chip reports with the hart's name. */
        mmio_write32(npu_memmap[NPU_MAP_EXIT].base, (NPU_EXIT_BOOT << 16) | 0x3333);
        for (;;)
            __asm__ volatile("wfi" ::: "memory");
    }
    __libc_init_array();
    hal_exit(main());
}
