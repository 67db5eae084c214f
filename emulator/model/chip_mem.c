/* SPDX-License-Identifier: MIT */
/* Address ranges of engine commands against the chip's memories; see chip_mem.h. */
#include "chip_mem.h"

#include <stddef.h>

#include "npu_memmap.h"

static bool inside(uint64_t addr, uint64_t len, uint64_t base, uint64_t size,
                   uint64_t *offset)
{
    if (addr < base || addr - base >= size || len > size - (addr - base))
        return false;
    *offset = addr - base;
    return true;
}

static bool locate_sram(const struct chip_mem *m, uint64_t addr, uint64_t len,
                        struct chip_mem_range *out)
{
    const struct npu_map_entry *e = &npu_memmap[NPU_MAP_SRAM];
    if (addr < e->base)
        return false;
    uint64_t core = (addr - e->base) / e->stride;
    if (core >= m->ncores)
        return false;
    if (!inside(addr, len, npu_map_instance_base(NPU_MAP_SRAM, (uint32_t)core), m->sram_bytes,
                &out->offset) ||
        out->offset < m->sram_code_bytes) /* behind the code's alias, not what a hart sees */
        return false;
    out->kind = CHIP_MEM_SRAM;
    out->core = (uint32_t)core;
    out->host = m->sram && m->sram[core] ? m->sram[core] + out->offset : NULL;
    return true;
}

bool chip_mem_locate(const struct chip_mem *m, uint64_t addr, uint64_t len,
                     struct chip_mem_range *out)
{
    out->kind = CHIP_MEM_NONE;
    out->core = 0;
    out->host = NULL;
    if (len == 0 || addr + len < addr)
        return false;
    if (locate_sram(m, addr, len, out))
        return true;
    if (inside(addr, len, npu_memmap[NPU_MAP_HBM].base, m->hbm_bytes, &out->offset)) {
        out->kind = CHIP_MEM_HBM;
        out->host = m->hbm ? m->hbm + out->offset : NULL;
        return true;
    }
    if (inside(addr, len, npu_memmap[NPU_MAP_DRAM].base, m->dram_bytes, &out->offset)) {
        out->kind = CHIP_MEM_DRAM;
        out->host = m->dram ? m->dram + out->offset : NULL;
        return true;
    }
    return false;
}

bool chip_mem_extent(uint64_t rows, uint64_t row_bytes, uint64_t stride, uint64_t *extent)
{
    if (rows == 0 || row_bytes == 0 || (rows > 1 && stride < row_bytes))
        return false;
    /* (rows - 1) * stride + row_bytes, without overflow */
    if (rows > 1 && stride > (UINT64_MAX - row_bytes) / (rows - 1))
        return false;
    *extent = (rows - 1) * stride + row_bytes;
    return true;
}
