/* SPDX-License-Identifier: MIT */
/*
 * MMIO accessors. Register addresses come from the devicetree (hal_self()) plus offsets from
 * the generated npu_regs.h; nothing writes through a macro used as an assignment target.
 */
#ifndef NPU_MMIO_H
#define NPU_MMIO_H

#include <stdint.h>

static inline void mmio_write32(uintptr_t addr, uint32_t value)
{
    *(volatile uint32_t *)addr = value;
}

static inline uint32_t mmio_read32(uintptr_t addr)
{
    return *(volatile const uint32_t *)addr;
}

static inline void mmio_write64(uintptr_t addr, uint64_t value)
{
    *(volatile uint64_t *)addr = value;
}

static inline uint64_t mmio_read64(uintptr_t addr)
{
    return *(volatile const uint64_t *)addr;
}

/* Field helpers for the generated <BLOCK>_<REG>_<FIELD>_LSB / _MASK constants. */
static inline uint32_t mmio_field_get(uint32_t reg, uint32_t mask, uint32_t lsb)
{
    return (reg & mask) >> lsb;
}

static inline uint32_t mmio_field_set(uint32_t reg, uint32_t mask, uint32_t lsb, uint32_t v)
{
    return (reg & ~mask) | ((v << lsb) & mask);
}

#endif
