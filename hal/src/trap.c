/* SPDX-License-Identifier: MIT */
/*
 * Trap dispatch. Exceptions are fatal: the report names the core, the cause, the PC (also as
 * an offset into the image, for addr2line on core.elf) and the faulting address, printed with
 * the raw console writer (never printf: the trap may have hit inside it), then the hart ends
 * with NPU_EXIT_TRAP and the chip stops the run.
 */
#include "npu/trap.h"

#include <assert.h>
#include <stddef.h>

#include "npu/hal.h"
#include "npu/mmio.h"

#define MCAUSE_INTERRUPT (1ull << 63)
#define IRQ_M_EXT 11
#define MSTATUS_MIE 0x8

extern char __image_base[];

/* start.S cannot include the generated C headers; keep its copies of two constants honest. */
static_assert(NPU_MAP_EXIT_BASE == 0x100000ull, "start.S early_trap exit address");
static_assert(NPU_EXIT_TRAP == 2, "start.S early_trap exit code");
/* HAZARD: read by the trap handler, which runs between any two instructions: volatile, so
   that a store is not dropped when the compiler sees it overwritten before any call it
   knows reads it (link-time optimisation inlines hal_irq_set_handler into its callers). */
static hal_irq_handler_fn volatile irq_handler;

void hal_trap_dispatch(struct hal_trap_frame *frame);

static const char *const cause_names[] = {
    [0] = "instruction address misaligned", [1] = "instruction access fault",
    [2] = "illegal instruction", [3] = "breakpoint",
    [4] = "load address misaligned", [5] = "load access fault",
    [6] = "store address misaligned", [7] = "store access fault",
    [8] = "environment call from U-mode", [9] = "environment call from S-mode",
    [11] = "environment call from M-mode", [12] = "instruction page fault",
    [13] = "load page fault", [15] = "store page fault",
};

const char *hal_trap_cause_name(uint64_t mcause)
{
    if (mcause < sizeof(cause_names) / sizeof(cause_names[0]) && cause_names[mcause])
        return cause_names[mcause];
    return "unknown exception";
}

void hal_irq_set_handler(hal_irq_handler_fn fn)
{
    irq_handler = fn;
}

void hal_irq_enable(bool on)
{
    /* "memory": a compiler barrier, so no store moves across the enable or disable */
    if (on)
        __asm__ volatile("csrs mstatus, %0" ::"r"(MSTATUS_MIE) : "memory");
    else
        __asm__ volatile("csrc mstatus, %0" ::"r"(MSTATUS_MIE) : "memory");
}

static void report_fatal(const struct hal_trap_frame *f)
{
    uint64_t pc = f->x[0];

    hal_console_puts("\nFATAL: ");
    hal_console_put_self();
    hal_console_puts(" trap: ");
    hal_console_puts(hal_trap_cause_name(f->mcause));
    hal_console_puts(" (mcause ");
    hal_console_put_dec(f->mcause);
    hal_console_puts(") at pc ");
    hal_console_put_hex(pc);
    hal_console_puts(" (image+");
    hal_console_put_hex(pc - (uint64_t)(uintptr_t)__image_base);
    hal_console_puts("), mtval ");
    hal_console_put_hex(f->mtval);
    hal_console_puts(", ra ");
    hal_console_put_hex(f->x[1]);
    hal_console_puts(", sp ");
    hal_console_put_hex(f->x[2]);
    hal_console_puts("\n");
}

void hal_trap_dispatch(struct hal_trap_frame *frame)
{
    if (frame->mcause & MCAUSE_INTERRUPT) {
        if ((frame->mcause & 0xff) == IRQ_M_EXT && irq_handler) {
            irq_handler();
            return;
        }
        /* An interrupt nobody handles: acknowledge every source so it does not repeat. */
        mmio_write32(hal_self()->regs_base + CORE_IRQ_STATUS_OFFSET,
                     CORE_IRQ_STATUS_WAKE_MASK | CORE_IRQ_STATUS_ENGINE_MASK);
        return;
    }
    report_fatal(frame);
    hal_exit(NPU_EXIT_TRAP);
}
