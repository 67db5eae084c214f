/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The npu-mesh machine's images: the control-core image (-kernel, linked into DRAM) and the
 * NPU-core image (core-image=, linked at 0, copied to the start of every core's SRAM).
 *
 * Shared code. Every core runs the same image, and QEMU keys translated code by the
 * physical page it came from (riscv TARGET_TB_PCREL: build-qemu.sh's patches), so the
 * image's code, its first segment, lives once in "npu.core-code" and the first pages of
 * every core's SRAM window are a read-only alias of it (npu_mesh.c, create_memory): QEMU
 * translates the code once for all cores instead of once per core, which keeps the host's
 * caches warm (docs/build.md, "Simulator speed: one translation of the cores' code"). The
 * image's data, stack and heap stay in each core's own SRAM. The linker script (hal/ld/common.ld) puts the code alone
 * in its segment, ending on a page boundary, and hal/tools/npu_reloc.py refuses an
 * absolute address in it (the firmware relocates its data at start-up, never its code).
 * Meshes of more than NPU_SHARED_CODE_CORES_MAX cores keep a copy per core (npu_mesh.h).
 */
#include "qemu/osdep.h"
#include "qemu/error-report.h"
#include "hw/loader.h"
#include "elf.h"

#include "npu_mesh.h"

#define NPU_PAGE 4096u

static G_NORETURN void image_refused(const char *path, const char *why)
{
    error_report("npu-mesh: property 'core-image': '%s': %s", path, why);
    exit(1);
}

/* Whether `data` (`len` bytes) is a little-endian ELF64 RISC-V file whose program headers
   lie inside it; their count and offset in *count, *off. */
static bool image_phdrs(const uint8_t *data, size_t len, unsigned *count, uint64_t *off)
{
    Elf64_Ehdr eh;
    if (len < sizeof(eh)) {
        return false;
    }
    memcpy(&eh, data, sizeof(eh)); /* the file's bytes need not be aligned */
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_machine != EM_RISCV ||
        eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phoff > len ||
        (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr) > len - eh.e_phoff) {
        return false;
    }
    *count = eh.e_phnum, *off = eh.e_phoff;
    return true;
}

uint64_t npu_mesh_core_code_bytes(const NpuMeshState *s)
{
    g_autofree gchar *data = NULL;
    gsize len = 0;
    unsigned n = 0;

    if (!g_file_get_contents(s->core_image, &data, &len, NULL)) {
        image_refused(s->core_image, "cannot be read");
    }
    uint64_t off = 0;
    if (!image_phdrs((const uint8_t *)data, len, &n, &off)) {
        image_refused(s->core_image, "not a little-endian ELF64 RISC-V file");
    }
    Elf64_Phdr code = { .p_type = PT_NULL };
    uint64_t next = UINT64_MAX; /* the lowest address of any other loaded segment */
    for (unsigned i = 0; i < n; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, data + off + i * sizeof(ph), sizeof(ph));
        if (ph.p_type != PT_LOAD || ph.p_memsz == 0) {
            continue;
        }
        if (ph.p_paddr != ph.p_vaddr) { /* load_elf places segments by p_paddr */
            image_refused(s->core_image, "a segment's load and link addresses differ: link "
                          "it with hal/ld/core.ld");
        }
        if (code.p_type == PT_NULL && ph.p_vaddr == 0) {
            code = ph;
        } else if (ph.p_vaddr < next) {
            next = ph.p_vaddr;
        }
    }
    if (code.p_type == PT_NULL || !(code.p_flags & PF_X) || (code.p_flags & PF_W) ||
        code.p_filesz != code.p_memsz) {
        image_refused(s->core_image, "its segment at 0 must be its code alone (read and "
                      "execute, not written): link it with hal/ld/core.ld");
    }
    if (code.p_memsz > s->cfg.sram_bytes - NPU_PAGE) { /* before the rounding can wrap */
        image_refused(s->core_image, "its code does not fit a core's SRAM");
    }
    uint64_t bytes = ROUND_UP(code.p_memsz, NPU_PAGE);
    if (next < bytes) {
        image_refused(s->core_image, "another segment shares its code's last page: link "
                      "it with hal/ld/core.ld");
    }
    return bytes;
}

static uint64_t sram_translate(void *opaque, uint64_t addr)
{
    return *(uint64_t *)opaque + addr;
}

uint64_t npu_mesh_load_core_image(NpuMeshState *s, uint32_t core)
{
    uint64_t base = npu_map_instance_base(NPU_MAP_SRAM, core);
    uint64_t entry, low, high;
    /* every core's copy of the code lands in npu.core-code, the same bytes each time */
    ssize_t size = load_elf(s->core_image, NULL, sram_translate, &base, &entry, &low, &high,
                            NULL, 0, EM_RISCV, 1, 0);

    if (size < 0) {
        error_report("npu-mesh: property 'core-image': '%s': %s", s->core_image,
                     load_elf_strerror(size));
        exit(1);
    }
    if (low != base) {
        error_report("npu-mesh: property 'core-image': '%s' is linked at 0x%" PRIx64
                     "; an NPU-core image must be position independent and linked at 0 "
                     "(hal/ld/core.ld)", s->core_image, low - base);
        exit(1);
    }
    if (high - base > s->cfg.sram_bytes) {
        error_report("npu-mesh: property 'core-image': '%s' needs %" PRIu64 " bytes of SRAM; "
                     "the chip config gives %" PRIu64, s->core_image, high - base,
                     s->cfg.sram_bytes);
        exit(1);
    }
    return base + entry;
}

uint64_t npu_mesh_load_ctrl_image(MachineState *ms, NpuMeshState *s)
{
    uint64_t entry, low, high, base = npu_memmap[NPU_MAP_DRAM].base;
    ssize_t size;

    if (!ms->kernel_filename) {
        error_report("npu-mesh: no control-core image: pass -kernel CTRL.elf");
        exit(1);
    }
    size = load_elf(ms->kernel_filename, NULL, NULL, NULL, &entry, &low, &high, NULL, 0,
                    EM_RISCV, 1, 0);
    if (size < 0) {
        error_report("npu-mesh: -kernel '%s': %s", ms->kernel_filename,
                     load_elf_strerror(size));
        exit(1);
    }
    if (low < base || high > base + s->cfg.dram_bytes) {
        error_report("npu-mesh: -kernel '%s' occupies [0x%" PRIx64 ", 0x%" PRIx64 "), outside "
                     "the control core's DRAM [0x%" PRIx64 ", 0x%" PRIx64 ")",
                     ms->kernel_filename, low, high, base, base + s->cfg.dram_bytes);
        exit(1);
    }
    return entry;
}
