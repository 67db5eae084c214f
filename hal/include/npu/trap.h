/* SPDX-License-Identifier: MIT */
/*
 * Traps and interrupts. Exceptions are fatal: the handler prints core, cause, PC and
 * faulting address on the console and ends the hart with NPU_EXIT_TRAP. The machine external
 * interrupt (the core's IRQ_STATUS & IRQ_ENABLE) goes to a handler the image may install.
 */
#ifndef NPU_TRAP_H
#define NPU_TRAP_H

#include <stdbool.h>
#include <stdint.h>

/* Registers saved on trap entry, in this order (hal/src/trap_entry.S). */
struct hal_trap_frame {
    uint64_t x[32];  /* x[0] holds mepc */
    uint64_t mcause, mtval, mstatus;
    uint64_t f[32];  /* floating-point registers, raw */
    uint64_t fcsr;
};

typedef void (*hal_irq_handler_fn)(void);

/* Installs the external-interrupt handler (NULL: none) and enables or masks interrupts. */
void hal_irq_set_handler(hal_irq_handler_fn fn);
void hal_irq_enable(bool on);

/* Name of an exception cause ("illegal instruction", ...). */
const char *hal_trap_cause_name(uint64_t mcause);

#endif
