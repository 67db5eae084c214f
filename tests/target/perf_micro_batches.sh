#!/bin/sh
# SPDX-License-Identifier: MIT
# Micro-batches overlap pipeline stages (docs/images.md, "Micro-batches"): tiny-dense in
# performance mode on 2x2, four stages of one core, one 64-token prompt. With M parts a
# stage does the same work as with one, so without overlap M parts could not be faster;
# with it the iteration takes about (S + M - 1) / (S M) of the unsplit one's chip time
# (0.44 for S = M = 4). Asserts M = 4 under 0.6 of M = 1, and M = 2 between them.
#   perf_micro_batches.sh NPUCTL
set -eu
npuctl=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chip_us() { # the MODEL done line's chip_us of M micro-batches
    "$npuctl" build-image --model tiny-dense --chip mesh-2x2 --mode performance --tp 1 \
        --stages 4 --micro-batches "$1" --max-batch 1 --max-tokens 64 --max-seq 128 \
        -o "$tmp/mb$1.img" >/dev/null
    "$npuctl" flash "$tmp/mb$1.img" --timeout 120 -- -append "prompt_len=64 new=1" \
        >"$tmp/mb$1.log" 2>&1 || { cat "$tmp/mb$1.log"; exit 1; }
    sed -n 's/.*MODEL done .*chip_us=\([0-9.]*\).*/\1/p' "$tmp/mb$1.log"
}
one=$(chip_us 1) two=$(chip_us 2) four=$(chip_us 4)
echo "chip us: 1 part $one, 2 parts $two, 4 parts $four"
[ -n "$one" ] && [ -n "$two" ] && [ -n "$four" ] || { echo "FAIL: no MODEL done line"; exit 1; }
awk -v a="$one" -v b="$two" -v c="$four" 'BEGIN { exit !(c < 0.6 * a && c < b && b < a) }' ||
    { echo "FAIL: the stages do not overlap as the parts should"; exit 1; }
echo "PASS"
