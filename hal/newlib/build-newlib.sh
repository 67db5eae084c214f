#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds newlib 3.3 for riscv64-unknown-elf from Debian's newlib-source package, cached
# outside the clone.
#
#   build-newlib.sh --cache DIR --out PATH
#
# The install prefix is DIR/newlib-<K>, K hashing the source tarball and this script's
# configure line; when it exists nothing is built. PATH becomes a symlink to it.
set -euo pipefail

cache="" out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --cache) cache="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "build-newlib.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ -n "$cache" ] && [ -n "$out" ] || { echo "build-newlib.sh: --cache and --out are required" >&2; exit 2; }

tarball=$(ls /usr/src/newlib/newlib-3.3*.tar.* 2>/dev/null | head -n1 || true)
[ -n "$tarball" ] || { echo "build-newlib: /usr/src/newlib/newlib-3.3*.tar.* not found: install Debian's newlib-source (tools/bootstrap.sh does)" >&2; exit 1; }

configure_newlib() {
  ../newlib-salsa/configure --target=riscv64-unknown-elf --prefix="$1" \
    --disable-multilib --disable-newlib-supplied-syscalls --enable-newlib-nano-malloc \
    --disable-nls \
    CFLAGS_FOR_TARGET="-O2 -g -march=rv64imafdc -mabi=lp64d -mcmodel=medany"
}

mkdir -p "$cache"
exec 9>"$cache/newlib.lock"
flock 9
key=$( (basename "$tarball"; sha256sum <"$tarball"; sed -n '/^configure_newlib()/,/^}/p' "$0") | sha256sum | cut -c1-16)
prefix="$cache/newlib-$key"
if [ ! -f "$prefix/riscv64-unknown-elf/lib/libc.a" ]; then
  work=$(mktemp -d "$cache/newlib-build.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  echo "build-newlib: building newlib from $(basename "$tarball") into $prefix" >&2
  tar -xf "$tarball" -C "$work"
  mkdir -p "$work/build"
  (cd "$work/build" && configure_newlib "$prefix" >configure.log 2>&1 \
     && make -j"$(nproc)" >build.log 2>&1 && make install >install.log 2>&1) || {
    tail -n 30 "$work"/build/*.log >&2
    echo "build-newlib: failed" >&2
    exit 1; }
fi
mkdir -p "$(dirname "$out")"
ln -sfn "$prefix/riscv64-unknown-elf" "$out"
