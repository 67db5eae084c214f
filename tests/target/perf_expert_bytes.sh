#!/bin/sh
# SPDX-License-Identifier: MIT
# Performance mode (docs/images.md): a MoE model at bf16 with its weights streamed from HBM
# and experts drawn by the skewed routing model; the expert-weight bytes the ranks loaded
# must equal what the routing implies, computed on the host by npu-ref --routing (the same
# routing model, an independent count), and the per-layer breakdown must be printed.
#   perf_expert_bytes.sh NPUCTL NPU_REF MODEL.toml CHIP LEN NEW SKEW_MILLI [build-image options]
set -eu
npuctl=$1 ref=$2 model=$3 chip=$4 len=$5 new=$6 skew=$7
shift 7
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
alpha=$(awk -v s="$skew" 'BEGIN { printf "%.3f", s / 1000 }')
"$npuctl" build-image --model "$model" --chip "$chip" --mode performance --weights stream \
    --max-batch 1 --max-tokens "$len" --max-seq $((len + new)) --routing "skewed:$alpha" \
    --routing-seed 7 "$@" -o "$tmp/perf.img" > "$tmp/plan.txt" 2>&1 || {
    cat "$tmp/plan.txt" >&2; exit 1; }
"$npuctl" flash "$tmp/perf.img" -- -append "prompt_len=$len new=$new" > "$tmp/chip.txt" 2>&1 || {
    echo "perf_expert_bytes: the chip run failed:" >&2; cat "$tmp/chip.txt" >&2; exit 1; }
want=$("$ref" --routing "$model" "$len" "$new" 7 "$skew" 2 | sed -n 's/^REF expert_load_bytes=//p')
got=$(sed -n 's/.*MODEL rank=.* expert_load_bytes=\([0-9]*\) .*/\1/p' "$tmp/chip.txt" |
      awk '{ s += $1 } END { print s + 0 }')
for what in "MODEL layer=0 attn_us=" "MODEL roofline op=ffn" "MODEL done"; do
    grep -q "$what" "$tmp/chip.txt" || { echo "perf_expert_bytes: no '$what'" >&2; exit 1; }
done
if [ "$want" != "$got" ]; then
    echo "perf_expert_bytes: the routing implies $want bytes of expert weights, the ranks loaded $got" >&2
    exit 1
fi
echo "expert-weight bytes loaded: $got, as the routing model implies ($len + $new tokens, skew $alpha)"
