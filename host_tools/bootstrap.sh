#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Bootstrap of a fresh Debian 12 machine, and the fast path of every later `./npuctl` call:
#   1. installs the Debian packages the project needs (apt-get, as root or through sudo),
#      and a deb-src entry so QEMU's source package can be fetched;
#   2. configures build/ with CMake + Ninja (once);
#   3. builds: newlib and QEMU come from caches keyed by what they are built from
#      (hal/newlib/build-newlib.sh, emulator/qemu/build-qemu.sh), the rest incrementally.
# Progress goes to stderr; the build's own output to build/bootstrap.log.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build="${NPU_BUILD_DIR:-$root/build}"
packages=(cmake ninja-build make gcc pkg-config python3 xz-utils dpkg-dev patch
          gcc-riscv64-unknown-elf newlib-source
          meson libglib2.0-dev libpixman-1-dev libfdt-dev zlib1g-dev
          libcmocka-dev gdb-multiarch libjansson-dev gnuplot-nox parallel perl)

say() { echo "npuctl: $*" >&2; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"
  elif command -v sudo >/dev/null; then sudo "$@"
  else say "need root to run: $*"; exit 1; fi
}

missing_packages() {
  local p
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed' \
      || echo "$p"
  done
}

ensure_deb_src() {
  grep -rqs '^Types:.*deb-src\|^deb-src ' /etc/apt/sources.list /etc/apt/sources.list.d/ \
    && return 0
  say "adding deb-src entries (QEMU's source comes from Debian's source package)"
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources \
      | as_root tee /etc/apt/sources.list.d/npu-mesh-src.sources >/dev/null
  else
    grep '^deb ' /etc/apt/sources.list | sed 's/^deb /deb-src /' \
      | as_root tee /etc/apt/sources.list.d/npu-mesh-src.list >/dev/null
  fi
  touch "$build/.apt-update-needed"
}

install_packages() {
  mkdir -p "$build"
  ensure_deb_src
  local missing
  missing=$(missing_packages)
  if [ -n "$missing" ] || [ -f "$build/.apt-update-needed" ]; then
    say "installing Debian packages:" $missing
    as_root apt-get update -q >"$build/apt.log" 2>&1 || { cat "$build/apt.log" >&2; exit 1; }
    if [ -n "$missing" ]; then
      # shellcheck disable=SC2086
      as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        $missing >>"$build/apt.log" 2>&1 || { tail -n 30 "$build/apt.log" >&2; exit 1; }
    fi
    rm -f "$build/.apt-update-needed"
  fi
}

install_packages
if [ ! -f "$build/build.ninja" ]; then
  say "configuring $build"
  cmake -S "$root" -B "$build" -G Ninja >"$build/bootstrap.log" 2>&1 \
    || { cat "$build/bootstrap.log" >&2; exit 1; }
fi
if ! cmake --build "$build" >"$build/bootstrap.log" 2>&1; then
  grep -E -B2 -A8 'error|FAILED|failed' "$build/bootstrap.log" | head -n 60 >&2
  say "build failed; full log: $build/bootstrap.log"
  exit 1
fi
