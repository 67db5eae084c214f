/* SPDX-License-Identifier: MIT */
/*
 * Reset entry of every hart (NPU cores and the control core).
 *
 * An NPU-core image is linked at 0 and copied by the machine to the start of each core's
 * SRAM, so before anything touches data it relocates its absolute pointers (newlib's tables,
 * function pointers in initialised data), listed by hal/tools/npu_reloc.py. medany code
 * reaches everything else PC-relative. The control image is linked where it runs; its table
 * is empty.
 */
#define MSTATUS_FS_INITIAL 0x2000
#define MIE_MEIE 0x800
#define NPU_MAP_EXIT_BASE 0x100000   /* checked against npu_memmap.h in hal/src/trap.c */
#define NPU_EXIT_TRAP 2              /* likewise */

    .section .text.start, "ax"
    .globl _start
_start:
    /* No gp: the linker scripts define no __global_pointer$, so no gp-relative relaxation. */
    csrw mie, zero
    csrw mstatus, zero
    /* Until the full handler is set up, a trap ends the hart through the exit device with
       NPU_EXIT_TRAP; the chip reports which hart it was. */
    lla t0, early_trap
    csrw mtvec, t0

    /* Relocate: add the load address (runtime address of the link base, 0 for NPU-core
       images) to every absolute word listed in .npu_reloc (count, then addresses). */
    lla t0, __npu_reloc_start
    ld t1, 0(t0)
    addi t0, t0, 8
    lla t2, __image_base
1:  beqz t1, 3f
    ld t3, 0(t0)
    add t3, t3, t2
    ld t4, 0(t3)
    add t4, t4, t2
    sd t4, 0(t3)
    addi t0, t0, 8
    addi t1, t1, -1
    j 1b
3:
    /* Zero .bss (the machine's loader zero-fills it too). A reset of the machine is not
       supported: relocation is not idempotent and the chip model is not reset. */
    lla t0, __bss_start
    lla t1, __bss_end
4:  bgeu t0, t1, 5f
    sd zero, 0(t0)
    addi t0, t0, 8
    j 4b
5:
    lla sp, __stack_top
    lla t0, __trap_stack_top
    csrw mscratch, t0
    lla t0, hal_trap_entry
    csrw mtvec, t0

    /* Floating point on (newlib's printf uses FP registers). */
    li t0, MSTATUS_FS_INITIAL
    csrs mstatus, t0
    fscsr zero

    /* The wake interrupt must be enabled in mie for WFI to return; mstatus.MIE stays 0, so
       no trap is taken unless an image installs a handler (hal_irq_enable). */
    li t0, MIE_MEIE
    csrs mie, t0

    call hal_start
    unimp

    .align 2
early_trap:
    li t0, NPU_MAP_EXIT_BASE
    li t1, (NPU_EXIT_TRAP << 16) | 0x3333
    sw t1, 0(t0)
1:  wfi
    j 1b
