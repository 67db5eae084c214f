#!/bin/sh
# SPDX-License-Identifier: MIT
# hal/tools/npu_reloc.py on two tiny images linked with hal/ld/core.ld: an absolute address
# in the code segment, which every core shares (docs/build.md, "Simulator speed: one
# translation of the cores' code"), is refused, naming where it is; one in .data is listed
# in the image's relocation table. Usage: npu_reloc_check.sh SOURCE_DIR PYTHON
set -eu
src=$1 py=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
link() { # link NAME: $tmp/NAME.S -> $tmp/NAME.elf, as the firmware links a core image
  riscv64-unknown-elf-gcc -march=rv64imac -mabi=lp64 -mcmodel=medany -nostdlib \
    -nostartfiles -Wl,--emit-relocs -L "$src/hal/ld" -T "$src/hal/ld/core.ld" \
    "$tmp/$1.S" -o "$tmp/$1.elf"
}
printf '    .section .text.start, "ax"\n    .globl _start\n_start:\n    j _start\n' > "$tmp/code.S"
cp "$tmp/code.S" "$tmp/data.S"
printf '    .balign 8\n    .dword _start\n' >> "$tmp/code.S"
printf '    .section .data\n    .balign 8\n    .dword _start\n' >> "$tmp/data.S"
link code
link data
if "$py" "$src/hal/tools/npu_reloc.py" "$tmp/code.elf" 2> "$tmp/err"; then
  echo "not ok: an absolute address in the code was accepted"; exit 1
fi
grep -q "at .text+0x8: the code segment is shared by every core" "$tmp/err" || {
  echo "not ok: the refusal does not say where:"; cat "$tmp/err"; exit 1; }
"$py" "$src/hal/tools/npu_reloc.py" "$tmp/data.elf"
count=$(riscv64-unknown-elf-objcopy -O binary --only-section=.npu_reloc "$tmp/data.elf" \
          /dev/stdout | od -An -tu8 -N8 | tr -d ' ')
[ "$count" = 1 ] || { echo "not ok: .npu_reloc lists $count words, not 1"; exit 1; }
echo "ok: code relocation refused, data relocation listed"
