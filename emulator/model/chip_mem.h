/* SPDX-License-Identifier: MIT */
/*
 * The chip's memories as the engines see them: where an address range lies (which core's
 * SRAM, HBM, control DRAM) and its host pointer. Every range an engine touches comes from a
 * guest descriptor and is checked here first: a range that is not entirely inside one backed
 * memory is refused, so a buggy or hostile firmware cannot make the emulator read or write
 * outside the guest's RAM.
 *
 * Host pointers may be NULL (performance mode, or host unit tests that only time things):
 * ranges are still checked, data is then not touched.
 */
#ifndef CHIP_MEM_H
#define CHIP_MEM_H

#include <stdbool.h>
#include <stdint.h>

enum chip_mem_kind {
    CHIP_MEM_NONE,
    CHIP_MEM_SRAM,  /* `core` tells whose */
    CHIP_MEM_HBM,
    CHIP_MEM_DRAM,
};

struct chip_mem {
    uint32_t ncores;
    uint64_t sram_bytes;   /* per core */
    uint8_t **sram;        /* per core host pointer, or NULL */
    uint64_t sram_code_bytes; /* [0, this) of every core's SRAM is the shared code
                                 (emulator/qemu/npu_mesh_image.c): no engine's */
    uint64_t hbm_bytes;
    uint8_t *hbm;          /* or NULL */
    uint64_t dram_bytes;
    uint8_t *dram;         /* or NULL */
};

struct chip_mem_range {
    enum chip_mem_kind kind;
    uint32_t core;         /* CHIP_MEM_SRAM: the owner */
    uint64_t offset;       /* from the start of that memory */
    uint8_t *host;         /* host pointer of the first byte, or NULL */
};

/*
 * Where [addr, addr + len) lies. Returns false (kind CHIP_MEM_NONE) if the range is empty,
 * wraps, or is not entirely inside one backed memory.
 */
bool chip_mem_locate(const struct chip_mem *m, uint64_t addr, uint64_t len,
                     struct chip_mem_range *out);

/*
 * Extent in bytes of a 2-D region: `rows` rows of `row_bytes` bytes, `stride` bytes apart.
 * Returns false on overflow, zero sizes, or a stride shorter than a row (rows > 1).
 */
bool chip_mem_extent(uint64_t rows, uint64_t row_bytes, uint64_t stride, uint64_t *extent);

#endif
