/* SPDX-License-Identifier: MIT */
/*
 * Host tests of the firmware devicetree reader (hal/fdt/src/fdt_read.c).
 *
 * Valid blobs are built with libfdt's sequential-write API and every node offset is checked
 * against libfdt's own lookups (both use offsets into the structure block). Malformed blobs
 * are made by patching a valid blob's header or by assembling the structure block by hand.
 * Robustness: every truncation of a valid blob, every shortened structure block, seeded
 * random byte and word corruptions, and every node offset (aligned or not) are fed to the
 * reader; each blob lives in a heap buffer of exactly the size given to fdt_blob_open(), so
 * an over-read shows up under valgrind or -fsanitize=address.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <libfdt.h>

#include "npu/fdt_read.h"

#define SW_BUF_SIZE 16384
#define NCPUS 17 /* cpu@0 (control core) .. cpu@16 */
#define SRAM_BASE(i) (0x200000000ull + (uint64_t)(i) * 0x100000ull)
#define SRAM_SIZE 0x100000ull
#define COORD_X(i) ((uint32_t)(i) % 4u)
#define COORD_Y(i) ((uint32_t)(i) / 4u)
#define FLIP_ROUNDS 6000
#define WALK_BUDGET 10000

/* The chip-like blob, built once for the whole group. */
static uint8_t *g_dtb;
static uint32_t g_size;

/* ---- helpers */

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static uint32_t get_be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* A heap copy of the first n bytes of src (at least one byte allocated). */
static uint8_t *dup_blob(const void *src, size_t n)
{
    uint8_t *p = malloc(n ? n : 1);

    assert_non_null(p);
    memcpy(p, src, n);
    return p;
}

static bool known_status(int rc)
{
    return rc == NPU_OK || rc == NPU_ERR_INVAL || rc == NPU_ERR_RANGE ||
           rc == NPU_ERR_FORMAT || rc == NPU_ERR_NOTFOUND;
}

/* Opens a heap copy of the first n bytes of src with max_size n; frees it; returns rc. */
static int open_copy(const void *src, size_t n)
{
    struct fdt_blob b;
    uint8_t *p = dup_blob(src, n);
    int rc = fdt_blob_open(&b, p, n);

    free(p);
    return rc;
}

/* A copy of the chip blob with header word at off replaced by v, opened. */
static int open_patched(uint32_t off, uint32_t v)
{
    uint8_t *p = dup_blob(g_dtb, g_size);
    struct fdt_blob b;
    int rc;

    put_be32(p + off, v);
    rc = fdt_blob_open(&b, p, g_size);
    free(p);
    return rc;
}

/* ---- the chip-like blob (libfdt sequential write) */

static void build_cpu(void *fdt, int i)
{
    static const char core_compat[] = "npu,mesh-core\0riscv";
    static const char ctrl_compat[] = "npu,control-core\0riscv";
    char name[16];
    fdt32_t coord[2] = {cpu_to_fdt32(COORD_X(i)), cpu_to_fdt32(COORD_Y(i))};

    snprintf(name, sizeof name, "cpu@%d", i);
    assert_int_equal(fdt_begin_node(fdt, name), 0);
    if (i == 0)
        assert_int_equal(fdt_property(fdt, "compatible", ctrl_compat, sizeof ctrl_compat), 0);
    else
        assert_int_equal(fdt_property(fdt, "compatible", core_compat, sizeof core_compat), 0);
    assert_int_equal(fdt_property_u32(fdt, "reg", (uint32_t)i), 0);
    assert_int_equal(fdt_property_u32(fdt, "npu,core-id", (uint32_t)i), 0);
    assert_int_equal(fdt_property(fdt, "npu,coord", coord, sizeof coord), 0);
    assert_int_equal(fdt_property_u64(fdt, "npu,sram-base", SRAM_BASE(i)), 0);
    assert_int_equal(fdt_property_u64(fdt, "npu,sram-size", SRAM_SIZE), 0);
    assert_int_equal(fdt_end_node(fdt), 0);
}

static void build_chip_node(void *fdt)
{
    static const char compat[] = "npu,chip-v1\0npu,chip";

    assert_int_equal(fdt_begin_node(fdt, "chip"), 0);
    assert_int_equal(fdt_property(fdt, "compatible", compat, sizeof compat), 0);
    assert_int_equal(fdt_property_u32(fdt, "mesh-cols", 4), 0);
    assert_int_equal(fdt_property_u32(fdt, "mesh-rows", 4), 0);
    assert_int_equal(fdt_property_u32(fdt, "num-cores", 16), 0);
    assert_int_equal(fdt_property_u32(fdt, "doomed", 7), 0); /* turned into NOPs later */
    assert_int_equal(fdt_property_u32(fdt, "clock-frequency", 1000000000u), 0);
    assert_int_equal(fdt_property_u64(fdt, "dram-base", 0x80000000ull), 0);
    assert_int_equal(fdt_property_u64(fdt, "dram-size", 0x100000000ull), 0);
    assert_int_equal(fdt_property(fdt, "empty", NULL, 0), 0);
    assert_int_equal(fdt_property(fdt, "raw", "abcd", 4), 0);     /* no NUL */
    assert_int_equal(fdt_property(fdt, "three", "\1\2\3", 3), 0); /* odd length */
    assert_int_equal(fdt_end_node(fdt), 0);
}

static void build_chip_dtb(void)
{
    void *fdt = calloc(1, SW_BUF_SIZE);

    assert_non_null(fdt);
    assert_int_equal(fdt_create(fdt, SW_BUF_SIZE), 0);
    assert_int_equal(fdt_finish_reservemap(fdt), 0);
    assert_int_equal(fdt_begin_node(fdt, ""), 0);
    assert_int_equal(fdt_property_string(fdt, "compatible", "npu-mesh"), 0);
    assert_int_equal(fdt_property_string(fdt, "model", "npu-mesh 4x4 (emulated)"), 0);
    build_chip_node(fdt);
    assert_int_equal(fdt_begin_node(fdt, "junk"), 0); /* turned into NOPs later */
    assert_int_equal(fdt_begin_node(fdt, "inner"), 0);
    assert_int_equal(fdt_end_node(fdt), 0);
    assert_int_equal(fdt_end_node(fdt), 0);
    assert_int_equal(fdt_begin_node(fdt, "cpus"), 0);
    assert_int_equal(fdt_property_u32(fdt, "#address-cells", 1), 0);
    assert_int_equal(fdt_property_u32(fdt, "#size-cells", 0), 0);
    for (int i = 0; i < NCPUS; i++)
        build_cpu(fdt, i);
    assert_int_equal(fdt_end_node(fdt), 0);
    assert_int_equal(fdt_begin_node(fdt, "memory@80000000"), 0);
    assert_int_equal(fdt_property_string(fdt, "device_type", "memory"), 0);
    assert_int_equal(fdt_end_node(fdt), 0);
    assert_int_equal(fdt_end_node(fdt), 0);
    assert_int_equal(fdt_finish(fdt), 0);
    assert_int_equal(fdt_nop_property(fdt, fdt_path_offset(fdt, "/chip"), "doomed"), 0);
    assert_int_equal(fdt_nop_node(fdt, fdt_path_offset(fdt, "/junk")), 0);
    g_size = fdt_totalsize(fdt);
    g_dtb = dup_blob(fdt, g_size);
    free(fdt);
}

static int group_setup(void **state)
{
    (void)state;
    build_chip_dtb();
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    free(g_dtb);
    return 0;
}

static void open_chip(struct fdt_blob *b)
{
    assert_int_equal(fdt_blob_open(b, g_dtb, g_size), NPU_OK);
}

static int find(const struct fdt_blob *b, const char *path)
{
    int node = -1;

    assert_int_equal(fdt_node_find(b, path, &node), NPU_OK);
    return node;
}

/* ---- valid blob: structure */

static void test_open_valid(void **state)
{
    struct fdt_blob b;

    (void)state;
    open_chip(&b);
    assert_ptr_equal(b.base, g_dtb);
    assert_int_equal(b.totalsize, fdt_totalsize(g_dtb));
    assert_int_equal(b.off_struct, fdt_off_dt_struct(g_dtb));
    assert_int_equal(b.size_struct, fdt_size_dt_struct(g_dtb));
    assert_int_equal(b.off_strings, fdt_off_dt_strings(g_dtb));
    assert_int_equal(b.size_strings, fdt_size_dt_strings(g_dtb));
    /* a larger window than the blob is fine */
    assert_int_equal(fdt_blob_open(&b, g_dtb, (size_t)g_size + 100), NPU_OK);
}

static void test_find_paths(void **state)
{
    static const char *const found[] = {
        "/", "/chip", "/cpus", "/cpus/cpu@0", "/cpus/cpu@3", "/cpus/cpu@16",
        "/memory@80000000",
    };
    struct fdt_blob b;

    (void)state;
    open_chip(&b);
    for (size_t i = 0; i < sizeof found / sizeof found[0]; i++)
        assert_int_equal(find(&b, found[i]), fdt_path_offset(g_dtb, found[i]));
    assert_int_equal(find(&b, "//cpus//cpu@3/"), find(&b, "/cpus/cpu@3"));
    assert_int_equal(find(&b, "/"), 0);
}

static void test_find_missing(void **state)
{
    static const char *const missing[] = {
        "/cpus@1", "/cpu", "/cpus/cpu", "/cpus/cpu@17", "/cpus/cpu@1x", "/memory",
        "/memory@8000000", "/junk", "/junk/inner", "/doomed", "/chip/x",
        "/cpus/cpu@3/deeper", "/chi", "/chipx",
    };
    struct fdt_blob b;
    int node = 1234;

    (void)state;
    open_chip(&b);
    for (size_t i = 0; i < sizeof missing / sizeof missing[0]; i++)
        assert_int_equal(fdt_node_find(&b, missing[i], &node), NPU_ERR_NOTFOUND);
    assert_int_equal(node, 1234); /* untouched on failure */
    assert_int_equal(fdt_node_find(&b, "cpus", &node), NPU_ERR_INVAL);
    assert_int_equal(fdt_node_find(&b, "", &node), NPU_ERR_INVAL);
    assert_int_equal(fdt_node_find(&b, NULL, &node), NPU_ERR_INVAL);
    assert_int_equal(fdt_node_find(&b, "/", NULL), NPU_ERR_INVAL);
    assert_int_equal(fdt_node_find(NULL, "/", &node), NPU_ERR_INVAL);
}

static void test_iterate_children(void **state)
{
    static const char *const root_kids[] = {"chip", "cpus", "memory@80000000"};
    struct fdt_blob b;
    const char *name;
    char want[16];
    int node, lib, n = 0;

    (void)state;
    open_chip(&b);
    assert_int_equal(fdt_node_name(&b, 0, &name), NPU_OK);
    assert_string_equal(name, "");
    assert_int_equal(fdt_node_first_child(&b, 0, &node), NPU_OK);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(fdt_node_name(&b, node, &name), NPU_OK);
        assert_string_equal(name, root_kids[i]);
        assert_int_equal(fdt_node_next_sibling(&b, node, &node), i < 2 ? NPU_OK : NPU_ERR_NOTFOUND);
    }
    lib = fdt_first_subnode(g_dtb, fdt_path_offset(g_dtb, "/cpus"));
    for (int rc = fdt_node_first_child(&b, find(&b, "/cpus"), &node); rc == NPU_OK;
         rc = fdt_node_next_sibling(&b, node, &node), n++) {
        snprintf(want, sizeof want, "cpu@%d", n);
        assert_int_equal(fdt_node_name(&b, node, &name), NPU_OK);
        assert_string_equal(name, want);
        assert_int_equal(node, lib);
        lib = fdt_next_subnode(g_dtb, lib);
    }
    assert_int_equal(n, NCPUS);
    assert_int_equal(fdt_node_first_child(&b, find(&b, "/cpus/cpu@3"), &node), NPU_ERR_NOTFOUND);
    assert_int_equal(fdt_node_next_sibling(&b, 0, &node), NPU_ERR_NOTFOUND);
}

/* ---- valid blob: properties */

static void test_props_chip(void **state)
{
    struct fdt_blob b;
    const void *val;
    const char *s;
    uint32_t u, len;
    uint64_t q;
    int chip;

    (void)state;
    open_chip(&b);
    chip = find(&b, "/chip");
    assert_int_equal(fdt_prop_u32(&b, chip, "mesh-cols", &u), NPU_OK);
    assert_int_equal(u, 4);
    assert_int_equal(fdt_prop_u32(&b, chip, "num-cores", &u), NPU_OK);
    assert_int_equal(u, 16);
    assert_int_equal(fdt_prop_u32(&b, chip, "clock-frequency", &u), NPU_OK);
    assert_int_equal(u, 1000000000u);
    assert_int_equal(fdt_prop_u64(&b, chip, "dram-size", &q), NPU_OK);
    assert_true(q == 0x100000000ull);
    assert_int_equal(fdt_prop_get(&b, chip, "raw", &val, &len), NPU_OK);
    assert_int_equal(len, 4);
    assert_memory_equal(val, "abcd", 4);
    assert_int_equal(fdt_prop_get(&b, chip, "empty", &val, &len), NPU_OK);
    assert_int_equal(len, 0);
    assert_int_equal(fdt_prop_cells(&b, chip, "empty", NULL, 0), NPU_OK);
    assert_int_equal(fdt_prop_get(&b, chip, "three", NULL, NULL), NPU_OK);
    assert_int_equal(fdt_prop_string(&b, 0, "compatible", &s), NPU_OK);
    assert_string_equal(s, "npu-mesh");
    assert_int_equal(fdt_prop_string(&b, 0, "model", &s), NPU_OK);
    assert_string_equal(s, "npu-mesh 4x4 (emulated)");
    assert_int_equal(fdt_prop_string(&b, chip, "compatible", &s), NPU_OK);
    assert_string_equal(s, "npu,chip-v1"); /* first entry of a stringlist */
}

static void test_props_cpus(void **state)
{
    struct fdt_blob b;
    char path[32];
    uint32_t u, coord[2];
    uint64_t q;
    int cpu;

    (void)state;
    open_chip(&b);
    for (int i = 0; i < NCPUS; i++) {
        snprintf(path, sizeof path, "/cpus/cpu@%d", i);
        cpu = find(&b, path);
        assert_int_equal(fdt_prop_u32(&b, cpu, "reg", &u), NPU_OK);
        assert_int_equal(u, (uint32_t)i);
        assert_int_equal(fdt_prop_u32(&b, cpu, "npu,core-id", &u), NPU_OK);
        assert_int_equal(u, (uint32_t)i);
        assert_int_equal(fdt_prop_cells(&b, cpu, "npu,coord", coord, 2), NPU_OK);
        assert_int_equal(coord[0], COORD_X(i));
        assert_int_equal(coord[1], COORD_Y(i));
        assert_int_equal(fdt_prop_u64(&b, cpu, "npu,sram-base", &q), NPU_OK);
        assert_true(q == SRAM_BASE(i));
        assert_int_equal(fdt_prop_u64(&b, cpu, "npu,sram-size", &q), NPU_OK);
        assert_true(q == SRAM_SIZE);
        assert_int_equal(fdt_prop_u64(&b, cpu, "npu,coord", &q), NPU_OK); /* 2 cells = 8 B */
        assert_true(q == (((uint64_t)COORD_X(i) << 32) | COORD_Y(i)));
    }
}

static void test_wrong_length(void **state)
{
    struct fdt_blob b;
    uint32_t u = 0xdeadbeef, cells[4] = {0};
    uint64_t q = 0x1234;
    const char *s = "untouched";
    int chip, cpu;

    (void)state;
    open_chip(&b);
    chip = find(&b, "/chip");
    cpu = find(&b, "/cpus/cpu@5");
    assert_int_equal(fdt_prop_u32(&b, chip, "dram-size", &u), NPU_ERR_FORMAT);   /* 8 B */
    assert_int_equal(fdt_prop_u32(&b, chip, "three", &u), NPU_ERR_FORMAT);       /* 3 B */
    assert_int_equal(fdt_prop_u32(&b, chip, "empty", &u), NPU_ERR_FORMAT);       /* 0 B */
    assert_int_equal(fdt_prop_u32(&b, 0, "model", &u), NPU_ERR_FORMAT);          /* string */
    assert_int_equal(u, 0xdeadbeef);
    assert_int_equal(fdt_prop_u64(&b, chip, "mesh-rows", &q), NPU_ERR_FORMAT);   /* 4 B */
    assert_int_equal(fdt_prop_u64(&b, chip, "empty", &q), NPU_ERR_FORMAT);
    assert_true(q == 0x1234);
    assert_int_equal(fdt_prop_cells(&b, cpu, "npu,coord", cells, 1), NPU_ERR_FORMAT);
    assert_int_equal(fdt_prop_cells(&b, cpu, "npu,coord", cells, 3), NPU_ERR_FORMAT);
    assert_int_equal(fdt_prop_cells(&b, cpu, "npu,coord", cells, 0), NPU_ERR_FORMAT);
    assert_int_equal(fdt_prop_cells(&b, chip, "three", cells, 1), NPU_ERR_FORMAT);
    assert_int_equal(fdt_prop_cells(&b, chip, "three", cells, 0), NPU_ERR_FORMAT);
    assert_int_equal(cells[0], 0);
    assert_int_equal(fdt_prop_string(&b, chip, "raw", &s), NPU_ERR_FORMAT);      /* no NUL */
    assert_int_equal(fdt_prop_string(&b, chip, "empty", &s), NPU_ERR_FORMAT);
    assert_string_equal(s, "untouched");
}

static void test_missing_props(void **state)
{
    struct fdt_blob b;
    const void *val = NULL;
    uint32_t u, len = 99;
    int chip, cpus;

    (void)state;
    open_chip(&b);
    chip = find(&b, "/chip");
    cpus = find(&b, "/cpus");
    assert_int_equal(fdt_prop_get(&b, chip, "nope", &val, &len), NPU_ERR_NOTFOUND);
    assert_null(val);
    assert_int_equal(len, 99);
    assert_int_equal(fdt_prop_get(&b, chip, "doomed", NULL, NULL), NPU_ERR_NOTFOUND); /* NOP */
    assert_int_equal(fdt_prop_u32(&b, chip, "mesh", &u), NPU_ERR_NOTFOUND);      /* prefix */
    assert_int_equal(fdt_prop_u32(&b, chip, "mesh-colsx", &u), NPU_ERR_NOTFOUND);
    assert_int_equal(fdt_prop_u32(&b, chip, "", &u), NPU_ERR_NOTFOUND);
    /* a child's property is not its parent's */
    assert_int_equal(fdt_prop_u32(&b, cpus, "reg", &u), NPU_ERR_NOTFOUND);
    assert_int_equal(fdt_prop_u32(&b, 0, "mesh-cols", &u), NPU_ERR_NOTFOUND);
    assert_int_equal(fdt_prop_u32(&b, cpus, "#size-cells", &u), NPU_OK);
    assert_int_equal(u, 0);
}

static void test_compatible(void **state)
{
    struct fdt_blob b;
    int chip, cpu0, cpu1, cpus;

    (void)state;
    open_chip(&b);
    chip = find(&b, "/chip");
    cpu0 = find(&b, "/cpus/cpu@0");
    cpu1 = find(&b, "/cpus/cpu@1");
    cpus = find(&b, "/cpus");
    assert_true(fdt_node_is_compatible(&b, 0, "npu-mesh"));
    assert_false(fdt_node_is_compatible(&b, 0, "npu-mes"));
    assert_false(fdt_node_is_compatible(&b, 0, "npu-mesh-x"));
    assert_false(fdt_node_is_compatible(&b, 0, ""));
    assert_true(fdt_node_is_compatible(&b, chip, "npu,chip-v1"));
    assert_true(fdt_node_is_compatible(&b, chip, "npu,chip"));
    assert_true(fdt_node_is_compatible(&b, cpu0, "npu,control-core"));
    assert_false(fdt_node_is_compatible(&b, cpu0, "npu,mesh-core"));
    assert_true(fdt_node_is_compatible(&b, cpu1, "npu,mesh-core"));
    assert_true(fdt_node_is_compatible(&b, cpu1, "riscv"));
    assert_false(fdt_node_is_compatible(&b, cpu1, "mesh-core")); /* a tail is no match */
    assert_false(fdt_node_is_compatible(&b, cpus, "npu,mesh-core")); /* no property */
    assert_false(fdt_node_is_compatible(&b, cpu1, NULL));
    assert_false(fdt_node_is_compatible(&b, -4, "npu-mesh"));
    assert_false(fdt_node_is_compatible(NULL, 0, "npu-mesh"));
}

/* Bad arguments and bad node offsets on a valid blob. */
static void test_bad_args(void **state)
{
    struct fdt_blob b;
    const char *name;
    uint32_t u;
    int node;
    uint8_t *odd;

    (void)state;
    open_chip(&b);
    assert_int_equal(fdt_blob_open(NULL, g_dtb, g_size), NPU_ERR_INVAL);
    assert_int_equal(fdt_blob_open(&b, NULL, g_size), NPU_ERR_INVAL);
    odd = malloc(g_size + 1);
    assert_non_null(odd);
    memcpy(odd + 1, g_dtb, g_size);
    assert_int_equal(fdt_blob_open(&b, odd + 1, g_size), NPU_ERR_INVAL); /* misaligned */
    free(odd);
    open_chip(&b);
    assert_int_equal(fdt_node_name(&b, -4, &name), NPU_ERR_RANGE);
    assert_int_equal(fdt_node_name(&b, 2, &name), NPU_ERR_RANGE);
    assert_int_equal(fdt_node_name(&b, (int)b.size_struct, &name), NPU_ERR_RANGE);
    assert_int_equal(fdt_node_name(&b, 0x7ffffffc, &name), NPU_ERR_RANGE);
    assert_int_equal(fdt_node_name(&b, 8, &name), NPU_ERR_INVAL); /* the root's first PROP */
    assert_int_equal(fdt_prop_u32(&b, -1, "reg", &u), NPU_ERR_RANGE);
    assert_int_equal(fdt_node_first_child(&b, 8, &node), NPU_ERR_INVAL);
    assert_int_equal(fdt_node_next_sibling(&b, 1 << 30, &node), NPU_ERR_RANGE);
    assert_int_equal(fdt_node_name(&b, 0, NULL), NPU_ERR_INVAL);
    assert_int_equal(fdt_node_first_child(&b, 0, NULL), NPU_ERR_INVAL);
    assert_int_equal(fdt_node_next_sibling(&b, 0, NULL), NPU_ERR_INVAL);
    assert_int_equal(fdt_prop_get(&b, 0, NULL, NULL, NULL), NPU_ERR_INVAL);
    assert_int_equal(fdt_prop_u32(&b, 0, "x", NULL), NPU_ERR_INVAL);
    assert_int_equal(fdt_prop_u64(&b, 0, "x", NULL), NPU_ERR_INVAL);
    assert_int_equal(fdt_prop_cells(&b, 0, "x", NULL, 2), NPU_ERR_INVAL);
    assert_int_equal(fdt_prop_string(&b, 0, "x", NULL), NPU_ERR_INVAL);
    assert_int_equal(fdt_node_name(NULL, 0, &name), NPU_ERR_INVAL);
}

/* ---- malformed headers (patched copies of the chip blob) */

static void test_bad_header(void **state)
{
    uint32_t st = fdt_off_dt_struct(g_dtb), ss = fdt_size_dt_struct(g_dtb);
    uint32_t so = fdt_off_dt_strings(g_dtb), sz = fdt_size_dt_strings(g_dtb);

    (void)state;
    assert_int_equal(open_patched(0, 0xd00dfeef), NPU_ERR_FORMAT);           /* magic */
    assert_int_equal(open_patched(0, 0xedfe0dd0), NPU_ERR_FORMAT);           /* swapped */
    assert_int_equal(open_patched(4, g_size + 4), NPU_ERR_FORMAT);           /* > max_size */
    assert_int_equal(open_patched(4, 39), NPU_ERR_FORMAT);                   /* < header */
    assert_int_equal(open_patched(4, 0xffffffff), NPU_ERR_FORMAT);
    assert_int_equal(open_patched(20, 15), NPU_ERR_FORMAT);                  /* version */
    assert_int_equal(open_patched(24, 18), NPU_ERR_FORMAT);                  /* last_comp */
    assert_int_equal(open_patched(8, st + 2), NPU_ERR_FORMAT);               /* misaligned */
    assert_int_equal(open_patched(8, 8), NPU_ERR_FORMAT);                    /* in header */
    assert_int_equal(open_patched(8, 0xfffffff0), NPU_ERR_FORMAT);           /* outside */
    assert_int_equal(open_patched(36, ss + 4096), NPU_ERR_FORMAT);           /* past total */
    assert_int_equal(open_patched(36, 0xfffffffc), NPU_ERR_FORMAT);          /* overflow */
    assert_int_equal(open_patched(36, ss - 2), NPU_ERR_FORMAT);              /* misaligned */
    assert_int_equal(open_patched(12, so + 1), NPU_ERR_FORMAT);              /* strings */
    assert_int_equal(open_patched(32, sz + 1), NPU_ERR_FORMAT);
    assert_int_equal(open_patched(32, 0xffffffff), NPU_ERR_FORMAT);
    assert_int_equal(open_patched(16, 44), NPU_ERR_FORMAT);                  /* rsvmap */
    assert_int_equal(open_patched(16, g_size - 8), NPU_ERR_FORMAT);
    assert_int_equal(open_patched(32, 0), NPU_ERR_FORMAT); /* prop names now outside */
    /* the reader's window is smaller than the blob */
    assert_int_equal(open_copy(g_dtb, g_size - 1), NPU_ERR_FORMAT);
    for (size_t n = 0; n < 48; n++)
        assert_int_equal(open_copy(g_dtb, n), NPU_ERR_FORMAT);
}

/* Every shorter size_dt_struct cuts off at least the FDT_END token. */
static void test_truncated_struct(void **state)
{
    uint32_t ss = fdt_size_dt_struct(g_dtb);

    (void)state;
    for (uint32_t s = 0; s < ss; s += 4)
        assert_int_equal(open_patched(36, s), NPU_ERR_FORMAT);
    assert_int_equal(open_patched(36, ss), NPU_OK);
}

/* Nesting at the limit opens and walks; one deeper is rejected. */
static void test_deep_nesting(void **state)
{
    char path[2 * FDT_READ_MAX_DEPTH + 2] = "";
    struct fdt_blob b;
    void *fdt = calloc(1, SW_BUF_SIZE);
    int node;

    (void)state;
    assert_non_null(fdt);
    for (int depth = FDT_READ_MAX_DEPTH; depth <= FDT_READ_MAX_DEPTH + 8; depth += 1) {
        assert_int_equal(fdt_create(fdt, SW_BUF_SIZE), 0);
        assert_int_equal(fdt_finish_reservemap(fdt), 0);
        assert_int_equal(fdt_begin_node(fdt, ""), 0);
        for (int i = 1; i < depth; i++)
            assert_int_equal(fdt_begin_node(fdt, "n"), 0);
        for (int i = 0; i < depth; i++)
            assert_int_equal(fdt_end_node(fdt), 0);
        assert_int_equal(fdt_finish(fdt), 0);
        if (depth > FDT_READ_MAX_DEPTH) {
            assert_int_equal(open_copy(fdt, fdt_totalsize(fdt)), NPU_ERR_FORMAT);
            continue;
        }
        assert_int_equal(fdt_blob_open(&b, fdt, fdt_totalsize(fdt)), NPU_OK);
        for (int i = 1; i < depth; i++)
            strcat(path, "/n");
        assert_int_equal(fdt_node_find(&b, path, &node), NPU_OK);
        assert_int_equal(node, fdt_path_offset(fdt, path));
        assert_int_equal(fdt_node_first_child(&b, node, &node), NPU_ERR_NOTFOUND);
        assert_int_equal(fdt_node_next_sibling(&b, 0, &node), NPU_ERR_NOTFOUND);
    }
    free(fdt);
}

/* ---- hand-assembled structure blocks */

#define TOK_BEGIN 1u
#define TOK_END_NODE 2u
#define TOK_PROP 3u
#define TOK_NOP 4u
#define TOK_END 9u

struct raw {
    uint8_t s[512]; /* structure block */
    uint32_t slen;
    uint32_t version;     /* 0 means 17 */
    bool strings_first;   /* put the structure block last, at the very end of the buffer */
};

/* Strings block used by every raw blob: offsets 0 "compatible", 11 "reg", 15 "bad" (no NUL,
 * last in the block). */
static const char raw_strings[] = "compatible\0reg\0bad";
#define RAW_STRINGS_LEN ((uint32_t)sizeof raw_strings - 1u)

static void raw_u32(struct raw *r, uint32_t v)
{
    assert_true(r->slen + 4 <= sizeof r->s);
    put_be32(r->s + r->slen, v);
    r->slen += 4;
}

static void raw_bytes(struct raw *r, const void *p, uint32_t n, bool pad)
{
    assert_true(r->slen + n + 3 <= sizeof r->s);
    memcpy(r->s + r->slen, p, n);
    r->slen += n;
    while (pad && (r->slen & 3u) != 0)
        r->s[r->slen++] = 0;
}

static void raw_begin(struct raw *r, const char *name)
{
    raw_u32(r, TOK_BEGIN);
    raw_bytes(r, name, (uint32_t)strlen(name) + 1, true);
}

static void raw_prop(struct raw *r, uint32_t len, uint32_t nameoff, const void *val, uint32_t n)
{
    raw_u32(r, TOK_PROP);
    raw_u32(r, len);
    raw_u32(r, nameoff);
    raw_bytes(r, val, n, true);
}

/* header (40) + rsvmap terminator (16) + structure block + strings block (or strings, then
 * structure), in a heap buffer of exactly totalsize bytes. */
static uint8_t *raw_assemble(const struct raw *r, uint32_t *size)
{
    uint32_t st = 56, so = st + r->slen, total = so + RAW_STRINGS_LEN;
    uint8_t *p;

    if (r->strings_first) {
        so = 56;
        st = (so + RAW_STRINGS_LEN + 3u) & ~3u;
        total = st + r->slen;
    }
    p = calloc(1, total);

    assert_non_null(p);
    put_be32(p + 0, 0xd00dfeed);
    put_be32(p + 4, total);
    put_be32(p + 8, st);
    put_be32(p + 12, so);
    put_be32(p + 16, 40);
    put_be32(p + 20, r->version ? r->version : 17);
    put_be32(p + 24, 16);
    put_be32(p + 32, RAW_STRINGS_LEN);
    put_be32(p + 36, r->slen);
    memcpy(p + st, r->s, r->slen);
    memcpy(p + so, raw_strings, RAW_STRINGS_LEN);
    *size = total;
    return p;
}

static int raw_open(const struct raw *r)
{
    struct fdt_blob b;
    uint32_t size;
    uint8_t *p = raw_assemble(r, &size);
    int rc = fdt_blob_open(&b, p, size);

    free(p);
    return rc;
}

/* Root with "compatible" and one child "n" with "reg"; close adds the closing tokens. */
static void raw_tree(struct raw *r, bool close)
{
    memset(r, 0, sizeof *r);
    raw_begin(r, "");
    raw_prop(r, 2, 0, "x", 2);
    raw_begin(r, "n");
    raw_prop(r, 4, 11, "\0\0\0\5", 4);
    if (!close)
        return;
    raw_u32(r, TOK_END_NODE);
    raw_u32(r, TOK_END_NODE);
    raw_u32(r, TOK_END);
}

static void test_raw_valid(void **state)
{
    struct raw r;
    struct fdt_blob b;
    uint32_t size, u;
    uint8_t *p;
    int root, n;

    (void)state;
    memset(&r, 0, sizeof r);
    raw_u32(&r, TOK_NOP);
    raw_u32(&r, TOK_NOP);
    raw_begin(&r, "");
    raw_u32(&r, TOK_NOP);
    raw_prop(&r, 2, 0, "x", 2);
    raw_begin(&r, "n");
    raw_prop(&r, 4, 11, "\0\0\0\5", 4);
    raw_u32(&r, TOK_END_NODE);
    raw_u32(&r, TOK_NOP);
    raw_u32(&r, TOK_END_NODE);
    raw_u32(&r, TOK_NOP);
    raw_u32(&r, TOK_END);
    for (uint32_t v = 16; v <= 18; v++) { /* 18: v17 with the strings block first */
        r.version = v == 18 ? 17 : v;
        r.strings_first = v == 18;
        p = raw_assemble(&r, &size);
        assert_int_equal(fdt_blob_open(&b, p, size), NPU_OK);
        root = find(&b, "/");
        assert_int_equal(root, 8); /* after two NOPs */
        assert_true(fdt_node_is_compatible(&b, root, "x"));
        n = find(&b, "/n");
        assert_int_equal(fdt_prop_u32(&b, n, "reg", &u), NPU_OK);
        assert_int_equal(u, 5);
        assert_int_equal(fdt_node_next_sibling(&b, n, &n), NPU_ERR_NOTFOUND);
        free(p);
    }
}

static void test_raw_malformed(void **state)
{
    static const uint32_t bad_lens[] = {17, 100, 0x7ffffffc, 0xfffffffc, 0xffffffff};
    struct raw r;

    (void)state;
    raw_tree(&r, true);
    assert_int_equal(raw_open(&r), NPU_OK); /* the baseline is valid */
    raw_tree(&r, true); /* missing FDT_END */
    r.slen -= 4;
    assert_int_equal(raw_open(&r), NPU_ERR_FORMAT);
    raw_u32(&r, TOK_NOP); /* FDT_END replaced by a NOP */
    assert_int_equal(raw_open(&r), NPU_ERR_FORMAT);
    raw_tree(&r, false); /* missing FDT_END_NODE before FDT_END */
    raw_u32(&r, TOK_END_NODE);
    raw_u32(&r, TOK_END);
    assert_int_equal(raw_open(&r), NPU_ERR_FORMAT);
    raw_tree(&r, true); /* an extra FDT_END_NODE */
    put_be32(r.s + r.slen - 4, TOK_END_NODE);
    raw_u32(&r, TOK_END);
    assert_int_equal(raw_open(&r), NPU_ERR_FORMAT);
    raw_tree(&r, true); /* a second root */
    r.slen -= 4;
    raw_begin(&r, "");
    raw_u32(&r, TOK_END_NODE);
    raw_u32(&r, TOK_END);
    assert_int_equal(raw_open(&r), NPU_ERR_FORMAT);
    raw_tree(&r, true); /* an unknown token */
    put_be32(r.s + r.slen - 4, 5);
    assert_int_equal(raw_open(&r), NPU_ERR_FORMAT);
    for (size_t i = 0; i < sizeof bad_lens / sizeof bad_lens[0]; i++) {
        raw_tree(&r, false); /* property length past the block */
        raw_prop(&r, bad_lens[i], 11, "\0\0\0\5", 4);
        raw_u32(&r, TOK_END_NODE);
        raw_u32(&r, TOK_END_NODE);
        raw_u32(&r, TOK_END);
        assert_int_equal(raw_open(&r), NPU_ERR_FORMAT);
    }
}

static void test_raw_bad_props(void **state)
{
    struct raw r;

    (void)state;
    raw_tree(&r, false); /* name offset past the strings block */
    raw_prop(&r, 0, RAW_STRINGS_LEN, "", 0);
    raw_u32(&r, TOK_END_NODE);
    raw_u32(&r, TOK_END_NODE);
    raw_u32(&r, TOK_END);
    assert_int_equal(raw_open(&r), NPU_ERR_FORMAT);
    raw_tree(&r, false); /* name runs off the end of the strings block */
    raw_prop(&r, 0, 15, "", 0);
    raw_u32(&r, TOK_END_NODE);
    raw_u32(&r, TOK_END_NODE);
    raw_u32(&r, TOK_END);
    assert_int_equal(raw_open(&r), NPU_ERR_FORMAT);
    raw_tree(&r, false); /* property after a child node */
    raw_begin(&r, "m");
    raw_u32(&r, TOK_END_NODE);
    raw_prop(&r, 0, 11, "", 0);
    raw_u32(&r, TOK_END_NODE);
    raw_u32(&r, TOK_END_NODE);
    raw_u32(&r, TOK_END);
    assert_int_equal(raw_open(&r), NPU_ERR_FORMAT);
    memset(&r, 0, sizeof r); /* property outside any node */
    raw_prop(&r, 0, 11, "", 0);
    raw_begin(&r, "");
    raw_u32(&r, TOK_END_NODE);
    raw_u32(&r, TOK_END);
    assert_int_equal(raw_open(&r), NPU_ERR_FORMAT);
    raw_tree(&r, false); /* a PROP token cut off before its length/name words */
    raw_u32(&r, TOK_PROP);
    raw_u32(&r, 0);
    assert_int_equal(raw_open(&r), NPU_ERR_FORMAT);
}

static void test_raw_unterminated_name(void **state)
{
    struct raw r;

    (void)state;
    raw_tree(&r, false); /* the name fills the rest of the block (the strings follow) */
    raw_u32(&r, TOK_BEGIN);
    raw_bytes(&r, "abcdefgh", 8, false);
    assert_int_equal(raw_open(&r), NPU_ERR_FORMAT);
    r.strings_first = true; /* ... and runs to the end of the blob */
    assert_int_equal(raw_open(&r), NPU_ERR_FORMAT);
    memset(&r, 0, sizeof r); /* the root's name, nothing else */
    raw_u32(&r, TOK_BEGIN);
    raw_bytes(&r, "root", 4, false);
    assert_int_equal(raw_open(&r), NPU_ERR_FORMAT);
    r.strings_first = true;
    assert_int_equal(raw_open(&r), NPU_ERR_FORMAT);
    memset(&r, 0, sizeof r); /* a bare FDT_BEGIN_NODE at the very end */
    raw_u32(&r, TOK_BEGIN);
    assert_int_equal(raw_open(&r), NPU_ERR_FORMAT);
    memset(&r, 0, sizeof r); /* empty structure block */
    assert_int_equal(raw_open(&r), NPU_ERR_FORMAT);
}

/* ---- robustness: whatever the blob, every call returns a known code and terminates */

static const char *const fuzz_props[] = {
    "compatible", "reg", "npu,core-id", "npu,coord", "npu,sram-base", "model", "empty",
    "raw", "three", "mesh-cols", "#address-cells",
};

static void poke_node(const struct fdt_blob *b, int node)
{
    const void *val;
    const char *s;
    uint32_t len = 0, u, cells[3];
    uint64_t q;

    assert_true(known_status(fdt_node_name(b, node, &s)));
    for (size_t i = 0; i < sizeof fuzz_props / sizeof fuzz_props[0]; i++) {
        const char *p = fuzz_props[i];

        assert_true(known_status(fdt_prop_get(b, node, p, &val, &len)));
        assert_true(known_status(fdt_prop_u32(b, node, p, &u)));
        assert_true(known_status(fdt_prop_u64(b, node, p, &q)));
        assert_true(known_status(fdt_prop_cells(b, node, p, cells, 2)));
        assert_true(known_status(fdt_prop_cells(b, node, p, cells, 3)));
        if (fdt_prop_string(b, node, p, &s) == NPU_OK)
            assert_true(strlen(s) < len + 1);
    }
    (void)fdt_node_is_compatible(b, node, "npu,mesh-core");
    (void)fdt_node_is_compatible(b, node, "riscv");
}

/* Depth-first walk; offsets must strictly increase, so it terminates. */
static void walk(const struct fdt_blob *b, int node, int depth, int *budget)
{
    int child, prev, rc;

    assert_true(depth <= FDT_READ_MAX_DEPTH);
    assert_true(--*budget > 0);
    poke_node(b, node);
    rc = fdt_node_first_child(b, node, &child);
    assert_true(known_status(rc));
    while (rc == NPU_OK) {
        assert_true(child > node);
        walk(b, child, depth + 1, budget);
        prev = child;
        rc = fdt_node_next_sibling(b, prev, &child);
        assert_true(known_status(rc));
        if (rc == NPU_OK)
            assert_true(child > prev);
    }
}

static void exercise(const struct fdt_blob *b)
{
    static const char *const paths[] = {"/", "/chip", "/cpus/cpu@3", "/cpus/cpu@16", "/x/y"};
    int budget = WALK_BUDGET, node;

    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        assert_true(known_status(fdt_node_find(b, paths[i], &node)));
    if (fdt_node_find(b, "/", &node) == NPU_OK)
        walk(b, node, 1, &budget);
}

/* Every node offset, aligned or not, in and around the structure block. */
static void test_every_offset(void **state)
{
    struct fdt_blob b;
    int node;

    (void)state;
    open_chip(&b);
    for (int off = -8; off < (int)b.size_struct + 8; off++) {
        poke_node(&b, off);
        assert_true(known_status(fdt_node_first_child(&b, off, &node)));
        assert_true(known_status(fdt_node_next_sibling(&b, off, &node)));
    }
}

/* Every prefix of the blob, with max_size = the prefix, and again with the header's
 * totalsize rewritten to match (so the blocks, not the window, are cut). */
static void test_truncate_everywhere(void **state)
{
    struct fdt_blob b;

    (void)state;
    for (uint32_t n = 0; n < g_size; n++) {
        uint8_t *p = dup_blob(g_dtb, n);

        assert_int_equal(fdt_blob_open(&b, p, n), NPU_ERR_FORMAT);
        if (n >= 8) /* libfdt puts the strings block last: it is always cut */
            put_be32(p + 4, n);
        assert_int_equal(fdt_blob_open(&b, p, n), NPU_ERR_FORMAT);
        free(p);
    }
}

static uint32_t lcg(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* Seeded corruption: 1-3 random bytes xored, or an aligned word set to a nasty value. */
static void test_flip_bytes(void **state)
{
    static const uint32_t nasty[] = {0, 1, 2, 3, 4, 9, 0xffffffff, 0x7fffffff, 0x80000000,
                                     0xfffffffc, 64, 4096};
    uint32_t seed = 0x5eed1234u, st = fdt_off_dt_struct(g_dtb);
    int opened = 0;

    (void)state;
    for (int round = 0; round < FLIP_ROUNDS; round++) {
        uint8_t *p = dup_blob(g_dtb, g_size);
        struct fdt_blob b;
        int rc;

        if (round % 2 == 0) {
            for (uint32_t k = lcg(&seed) % 3u + 1u; k > 0; k--)
                p[lcg(&seed) % g_size] ^= (uint8_t)(lcg(&seed) % 255u + 1u);
        } else {
            uint32_t w = st + 4u * (lcg(&seed) % (fdt_size_dt_struct(g_dtb) / 4u));

            put_be32(p + w, nasty[lcg(&seed) % (sizeof nasty / sizeof nasty[0])]);
        }
        rc = fdt_blob_open(&b, p, g_size);
        assert_true(known_status(rc));
        if (rc == NPU_OK) {
            opened++;
            exercise(&b);
        }
        free(p);
    }
    print_message("flip: %d of %d corrupted blobs still opened and were walked\n", opened,
                  FLIP_ROUNDS);
    assert_int_equal(get_be32(g_dtb), 0xd00dfeedu); /* the master copy is untouched */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_valid),
        cmocka_unit_test(test_find_paths),
        cmocka_unit_test(test_find_missing),
        cmocka_unit_test(test_iterate_children),
        cmocka_unit_test(test_props_chip),
        cmocka_unit_test(test_props_cpus),
        cmocka_unit_test(test_wrong_length),
        cmocka_unit_test(test_missing_props),
        cmocka_unit_test(test_compatible),
        cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_bad_header),
        cmocka_unit_test(test_truncated_struct),
        cmocka_unit_test(test_deep_nesting),
        cmocka_unit_test(test_raw_valid),
        cmocka_unit_test(test_raw_malformed),
        cmocka_unit_test(test_raw_bad_props),
        cmocka_unit_test(test_raw_unterminated_name),
        cmocka_unit_test(test_every_offset),
        cmocka_unit_test(test_truncate_everywhere),
        cmocka_unit_test(test_flip_bytes),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
