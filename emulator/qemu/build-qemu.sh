#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds qemu-system-riscv64 with the npu-mesh machine, cached outside the clone.
#
#   build-qemu.sh --cache DIR --python PYTHON3 --out PATH
#
# 1. QEMU 7.2 source comes from Debian's source package (apt-get source), downloaded once
#    into DIR/dl. It is unpacked into DIR/qemu-src-<K1>, where K1 hashes the tarball and the
#    glue below, and configured there.
# 2. The machine's files (emulator/qemu, emulator/model, the portable libraries the chip
#    model uses: models/kvconf, models/numeric, models/chipdesc, and the generated register
#    headers) are copied into hw/riscv/npu_mesh/ of that tree, only where their content
#    changed.
# 3. The binary is kept as DIR/qemu-bin-<K2>/qemu-system-riscv64, K2 hashing K1 and every
#    copied file: when it exists nothing is built. PATH becomes a symlink to it.
# The project commits only its own files, the few glue lines below and patches/*.patch (the
# riscv translator's PC-relative code, so that cores running one image share it:
# emulator/qemu/npu_mesh_image.c), applied at unpacking and hashed into K1.
set -euo pipefail

cache="" python="/usr/bin/python3" out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --cache) cache="$2"; shift 2 ;;
    --python) python="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "build-qemu.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ -n "$cache" ] && [ -n "$out" ] || { echo "build-qemu.sh: --cache and --out are required" >&2; exit 2; }

# Debian's python3 and meson, whatever else (pyenv, venvs) is first on PATH.
export PATH="/usr/bin:/bin:$PATH"
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mkdir -p "$cache/dl"
exec 9>"$cache/qemu.lock"
flock 9

log() { echo "build-qemu: $*" >&2; }

fetch_source() {
  local tarball
  tarball=$(ls "$cache"/dl/qemu_7.2*.orig.tar.xz 2>/dev/null | head -n1 || true)
  if [ -z "$tarball" ]; then
    log "fetching QEMU 7.2 from Debian's source package"
    (cd "$cache/dl" && apt-get source --download-only qemu >/dev/null 2>&1) || {
      echo "build-qemu: 'apt-get source qemu' failed: deb-src entries are needed (tools/bootstrap.sh adds them)" >&2
      exit 1; }
    tarball=$(ls "$cache"/dl/qemu_7.2*.orig.tar.xz 2>/dev/null | head -n1 || true)
    [ -n "$tarball" ] || { echo "build-qemu: Debian's qemu source is not version 7.2" >&2; exit 1; }
  fi
  echo "$tarball"
}

# The glue: the only edits made to QEMU's own files.
apply_glue() {
  local src="$1"
  for p in "$here"/patches/*.patch; do
    patch -s -p1 -d "$src" <"$p" || { echo "build-qemu: $p does not apply" >&2; exit 1; }
  done
  echo "subdir('npu_mesh')" > "$src/hw/riscv/meson.build.npu"
  sed -i "/^hw_arch += /e cat $src/hw/riscv/meson.build.npu" "$src/hw/riscv/meson.build"
  printf '\nconfig NPU_MESH\n    bool\n' >> "$src/hw/riscv/Kconfig"
  printf '\nCONFIG_NPU_MESH=y\n' >> "$src/configs/devices/riscv64-softmmu/default.mak"
  mkdir -p "$src/hw/riscv/npu_mesh/model"
}

configure_qemu() {
  local src="$1"
  log "configuring QEMU in $src (once)"
  (cd "$src" && mkdir -p build && cd build && ../configure \
     --target-list=riscv64-softmmu --meson=meson \
     --without-default-features --enable-fdt=system --enable-tcg \
     --disable-docs --disable-install-blobs --disable-werror >configure.log 2>&1) || {
    echo "build-qemu: QEMU configure failed; see $src/build/configure.log" >&2
    rm -f "$src/build/build.ninja"; exit 1; }
}

tarball=$(fetch_source)
glue_hash=$(sed -n '/^apply_glue()/,/^}/p;/^configure_qemu()/,/^}/p' "$0" | sha256sum | cut -c1-16)
k1=$( (basename "$tarball"; sha256sum <"$tarball"; echo "$glue_hash"; cat "$here"/patches/*.patch) |
     sha256sum | cut -c1-16)
src="$cache/qemu-src-$k1/qemu-7.2.0"

# Stage the machine's files, then hash them.
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/model" "$stage/desc"
cp "$here"/*.c "$here"/*.h "$here/meson.build" "$stage/"
cp "$root"/emulator/model/*.c "$root"/emulator/model/*.h "$stage/model/"
# The portable libraries the chip model links (emulator/CMakeLists.txt): headers and sources.
for lib in kvconf numeric chipdesc routing; do
  cp "$root"/models/$lib/include/*.h "$stage/desc/"
  [ ! -d "$root/models/$lib/src" ] || cp "$root"/models/$lib/src/*.c "$stage/desc/"
done
"$python" "$root/hal/regspec/gen_regs.py" --spec "$root/hal/regspec/npu_regs.toml" \
  --out "$stage" --only qemu
k2=$( (echo "$k1"; cd "$stage" && find . -type f | LC_ALL=C sort | xargs sha256sum) | sha256sum | cut -c1-16)
bin="$cache/qemu-bin-$k2/qemu-system-riscv64"

if [ ! -x "$bin" ]; then
  if [ ! -f "$src/build/build.ninja" ]; then
    rm -rf "$cache/qemu-src-$k1"
    mkdir -p "$cache/qemu-src-$k1"
    log "unpacking $(basename "$tarball")"
    tar -xf "$tarball" -C "$cache/qemu-src-$k1"
    apply_glue "$src"
    fresh=1
  fi
  dst="$src/hw/riscv/npu_mesh"
  (cd "$stage" && find . -type f) | while read -r f; do
    mkdir -p "$(dirname "$dst/$f")"
    cmp -s "$stage/$f" "$dst/$f" || cp "$stage/$f" "$dst/$f"
  done
  [ -z "${fresh:-}" ] || configure_qemu "$src"
  log "building qemu-system-riscv64 (npu-mesh $k2)"
  if ! ninja -C "$src/build" qemu-system-riscv64 >"$src/build/npu-build.log" 2>&1; then
    grep -E "error|Error" "$src/build/npu-build.log" | head -n 40 >&2
    echo "build-qemu: build failed; full log: $src/build/npu-build.log" >&2
    exit 1
  fi
  mkdir -p "$(dirname "$bin")"
  cp "$src/build/qemu-system-riscv64" "$bin.tmp" && mv "$bin.tmp" "$bin"
  # Keep the three newest binaries, and any a build linked in the last two days: another
  # checkout's build directory may still run it (a clean clone's CI beside a working tree).
  ls -dt "$cache"/qemu-bin-* 2>/dev/null | tail -n +4 | while read -r old; do
    if [ -z "$(find "$old" -maxdepth 0 -mmin -2880)" ]; then rm -rf "$old"; fi
  done
fi
touch "$(dirname "$bin")" # its last use, for the eviction above
mkdir -p "$(dirname "$out")"
ln -sfn "$bin" "$out"
