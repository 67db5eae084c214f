#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Make an NPU-core image relocatable: fill its .npu_reloc table.

Debian's riscv64-unknown-elf linker cannot produce PIE, so a core image is linked at 0 with
--emit-relocs, and this post-link step lists every R_RISCV_64 (absolute 64-bit address) that
lands in a loaded section. hal/src/start.S adds the load address to each listed word at
start-up. None may lie in code (an executable section): the machine maps the code once for
every core (emulator/qemu/npu_mesh_image.c). Everything else in medany code is PC-relative;
any other absolute relocation (R_RISCV_32, HI20, LO12) against a defined symbol would break
when loaded elsewhere, so it is an error naming the section and offset.

Table layout (section .npu_reloc, reserved in hal/ld/core.ld): u64 count, then count u64
link addresses (= offsets from the image base), ascending.
"""
import struct
import sys

SHT_SYMTAB, SHT_RELA, SHF_ALLOC, SHF_EXECINSTR = 2, 4, 2, 4
SHN_UNDEF, SHN_ABS = 0, 0xFFF1
R_RISCV_32, R_RISCV_64 = 1, 2
ABSOLUTE_UNSUPPORTED = {R_RISCV_32: "R_RISCV_32", 26: "R_RISCV_HI20", 27: "R_RISCV_LO12_I",
                        28: "R_RISCV_LO12_S"}
# GOT entries are filled by the linker with no relocation of their own, and TLS would need
# a thread pointer: neither can be relocated from this table.
GOT_OR_TLS = {20: "R_RISCV_GOT_HI20", 21: "R_RISCV_TLS_GOT_HI20", 22: "R_RISCV_TLS_GD_HI20",
              29: "R_RISCV_TPREL_HI20", 30: "R_RISCV_TPREL_LO12_I",
              31: "R_RISCV_TPREL_LO12_S", 32: "R_RISCV_TPREL_ADD"}


def fail(path, msg):
    sys.stderr.write(f"npu_reloc: {path}: {msg}\n")
    sys.exit(1)


def sections(data):
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a little-endian ELF64 file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    out = []
    for i in range(shnum):
        f = struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
        out.append(dict(name=f[0], type=f[1], flags=f[2], addr=f[3], offset=f[4], size=f[5],
                        link=f[6], info=f[7], entsize=f[9]))
    strtab = out[shstrndx]
    for s in out:
        end = data.index(b"\0", strtab["offset"] + s["name"])
        s["name"] = data[strtab["offset"] + s["name"]:end].decode()
    return out


def collect(path, data, secs):
    words = []
    # the code segment, [0, the end of the last executable section): one copy for all cores
    code_end = max((s["addr"] + s["size"] for s in secs
                    if s["flags"] & SHF_ALLOC and s["flags"] & SHF_EXECINSTR), default=0)
    for rela in (s for s in secs if s["type"] == SHT_RELA):
        target = secs[rela["info"]]
        if not target["flags"] & SHF_ALLOC:
            continue
        symtab = secs[rela["link"]]
        for off in range(rela["offset"], rela["offset"] + rela["size"], 24):
            r_offset, r_info, _addend = struct.unpack_from("<QQq", data, off)
            rtype, sym = r_info & 0xFFFFFFFF, r_info >> 32
            if rtype in GOT_OR_TLS:
                fail(path, f"{GOT_OR_TLS[rtype]} at {target['name']}+0x"
                     f"{r_offset - target['addr']:x}: GOT and TLS accesses cannot be "
                     "relocated (build without -fPIC/-fPIE and without thread-local data)")
            shndx, = struct.unpack_from("<H", data, symtab["offset"] + sym * 24 + 6)
            if shndx in (SHN_UNDEF, SHN_ABS):
                continue  # weak undefined (stays 0) or a plain number: nothing to move
            if rtype == R_RISCV_64 and r_offset < code_end:
                fail(path, f"an absolute address at {target['name']}+0x"
                     f"{r_offset - target['addr']:x}: the code segment is shared by every "
                     "core and cannot be relocated (hal/ld/common.ld)")
            if rtype == R_RISCV_64:
                words.append(r_offset)
            elif rtype in ABSOLUTE_UNSUPPORTED:
                fail(path, f"{ABSOLUTE_UNSUPPORTED[rtype]} at {target['name']}+0x"
                     f"{r_offset - target['addr']:x}: not position independent "
                     "(build with -mcmodel=medany)")
    return sorted(set(words))


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: npu_reloc.py CORE.elf\n")
        sys.exit(2)
    path = sys.argv[1]
    with open(path, "rb") as f:
        data = bytearray(f.read())
    try:
        secs = sections(data)
    except (ValueError, struct.error) as e:
        fail(path, str(e))
    got = next((s for s in secs if s["name"] == ".got" and s["size"]), None)
    if got is not None:
        fail(path, "the image has a .got section: its entries cannot be relocated "
             "(build without -fPIC/-fPIE)")
    table = next((s for s in secs if s["name"] == ".npu_reloc"), None)
    if table is None:
        fail(path, "no .npu_reloc section: link with hal/ld/core.ld")
    if not any(s["type"] == SHT_RELA for s in secs):
        fail(path, "no relocation sections: link with -Wl,--emit-relocs")
    words = collect(path, data, secs)
    capacity = table["size"] // 8 - 1
    if len(words) > capacity:
        fail(path, f"{len(words)} relocations do not fit .npu_reloc ({capacity}); raise "
             "__npu_reloc_capacity in hal/ld/core.ld")
    struct.pack_into(f"<Q{len(words)}Q", data, table["offset"], len(words), *words)
    with open(path, "wb") as f:
        f.write(data)


if __name__ == "__main__":
    main()
