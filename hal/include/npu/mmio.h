/* SPDX-License-Identifier: MIT */
/*
 * MMIO accessors. Register addresses come from the devicetree (hal_self()) plus offsets from
 * the generated npu_regs.h; nothing writes through a macro used as an assignment target.
 * HAZARD: a register write starts an engine on memory the hart wrote with plain stores (a
 * descriptor, a buffer), and a register read reports memory an engine wrote. A volatile
 * access alone orders only volatile accesses, so each accessor is also a compiler barrier:
 * no plain store sinks below a write and no plain load rises above a read (link-time
 * optimisation removes the calls that used to hide this). A hart's own accesses reach the
 * emulated chip in program order, so no fence instruction is needed.
 */
#ifndef NPU_MMIO_H
#define NPU_MMIO_H

#include <stdint.h>

static inline void mmio_barrier(void)
{
    __asm__ volatile("" ::: "memory");
}

static inline void mmio_write32(uintptr_t addr, uint32_t value)
{
    mmio_barrier();
    *(volatile uint32_t *)addr = value;
}

static inline uint32_t mmio_read32(uintptr_t addr)
{
    uint32_t v = *(volatile const uint32_t *)addr;
    mmio_barrier();
    return v;
}

static inline void mmio_write64(uintptr_t addr, uint64_t value)
{
    mmio_barrier();
    *(volatile uint64_t *)addr = value;
}

static inline uint64_t mmio_read64(uintptr_t addr)
{
    uint64_t v = *(volatile const uint64_t *)addr;
    mmio_barrier();
    return v;
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
