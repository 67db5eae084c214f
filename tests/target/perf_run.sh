#!/bin/sh
# SPDX-License-Identifier: MIT
# A performance-mode run of a real model on large-64 (docs/images.md): builds the image for
# one request of LEN prompt tokens and runs it with NEW decode steps, printing the chip's
# console (the per-layer breakdown and rooflines).   perf_run.sh NPUCTL MODEL LEN NEW
set -eu
npuctl=$1 model=$2 len=$3 new=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$npuctl" build-image --model "$model" --chip large-64 --mode performance --max-batch 1 \
    --max-tokens "$len" --max-seq $((len + new)) -o "$tmp/perf.img"
"$npuctl" flash "$tmp/perf.img" --timeout 600 -- -append "prompt_len=$len new=$new"
