/* SPDX-License-Identifier: MIT */
/* chip_mem_locate: which memory an engine's address range lies in, and what it refuses
   (emulator/model/chip_mem.h): ranges across a boundary, past what is backed, and the
   shared code at the start of every core's SRAM (emulator/qemu/npu_mesh_image.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "chip_mem.h"
#include "npu_memmap.h"

#define SRAM (1u << 20)
#define CODE (16u << 10)

static uint8_t sram0[SRAM], sram1[SRAM], hbm[1u << 16];
static uint8_t *srams[2] = { sram0, sram1 };

static const struct chip_mem mem = {
    .ncores = 2, .sram_bytes = SRAM, .sram = srams, .sram_code_bytes = CODE,
    .hbm_bytes = sizeof(hbm), .hbm = hbm,
};

static uint64_t sram_base(uint32_t core)
{
    return npu_map_instance_base(NPU_MAP_SRAM, core);
}

static void test_sram_after_the_code(void **state)
{
    (void)state;
    struct chip_mem_range r;
    assert_true(chip_mem_locate(&mem, sram_base(1) + CODE, 64, &r));
    assert_int_equal(r.kind, CHIP_MEM_SRAM);
    assert_int_equal(r.core, 1);
    assert_int_equal(r.offset, CODE);
    assert_ptr_equal(r.host, sram1 + CODE);
    assert_true(chip_mem_locate(&mem, sram_base(0) + SRAM - 8, 8, &r));
    assert_ptr_equal(r.host, sram0 + SRAM - 8);
}

static void test_the_shared_code_is_no_engines(void **state)
{
    (void)state;
    struct chip_mem_range r;
    /* behind the code's alias lies the core's own RAM, which no hart sees */
    assert_false(chip_mem_locate(&mem, sram_base(0), 4, &r));
    assert_int_equal(r.kind, CHIP_MEM_NONE);
    assert_false(chip_mem_locate(&mem, sram_base(1) + CODE - 4, 4, &r));
    assert_false(chip_mem_locate(&mem, sram_base(1) + CODE - 4, 64, &r)); /* into it */
    struct chip_mem no_code = mem;
    no_code.sram_code_bytes = 0;
    assert_true(chip_mem_locate(&no_code, sram_base(1), 4, &r));
    assert_int_equal(r.offset, 0);
}

static void test_bad_ranges(void **state)
{
    (void)state;
    struct chip_mem_range r;
    assert_false(chip_mem_locate(&mem, sram_base(0) + SRAM - 4, 8, &r)); /* past the end */
    assert_false(chip_mem_locate(&mem, sram_base(2) + CODE, 4, &r));     /* no such core */
    assert_false(chip_mem_locate(&mem, sram_base(0) + CODE, 0, &r));     /* empty */
    assert_false(chip_mem_locate(&mem, UINT64_MAX - 2, 8, &r));          /* wraps */
    assert_true(chip_mem_locate(&mem, npu_memmap[NPU_MAP_HBM].base, sizeof(hbm), &r));
    assert_int_equal(r.kind, CHIP_MEM_HBM);
    assert_false(chip_mem_locate(&mem, npu_memmap[NPU_MAP_HBM].base + 1, sizeof(hbm), &r));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sram_after_the_code),
        cmocka_unit_test(test_the_shared_code_is_no_engines),
        cmocka_unit_test(test_bad_ranges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
