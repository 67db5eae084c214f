#!/bin/sh
# SPDX-License-Identifier: MIT
# Runs the model image on the chip and the host reference (npu-ref) on the same model and
# prompt, and compares: the greedy tokens must be identical, and each chosen token's logit
# within 1e-4 x max(1, |logit|) (the chip computes in fp32 like the reference, in another
# summation order). docs/models.md.
#   model_match.sh NPUCTL NPU_REF MODEL.toml PROMPT_LEN NEW [npuctl run options...]
# MODEL_ARGS adds bootargs for the image (e.g. "partition=mn placement=ring").
set -eu
npuctl=$1 ref=$2 model=$3 len=$4 new=$5
shift 5
# A deterministic prompt of `len` token ids below 512 (the tiny models' vocabulary).
prompt=$(awk -v n="$len" 'BEGIN { for (i = 0; i < n; i++) printf "%s%d", (i ? "," : ""), (i * 7919 + 17) % 509 }')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$ref" "$model" "$prompt" "$new" > "$tmp/ref.txt"
"$npuctl" run model "$@" -- -device "loader,file=$model,addr=0x100000000000,force-raw=on" \
    -append "prompt=$prompt new=$new ${MODEL_ARGS:-}" > "$tmp/chip.txt" 2>&1 || {
    echo "model_match: the chip run failed:" >&2; cat "$tmp/chip.txt" >&2; exit 1; }
sed -n 's/.*MODEL step=\([0-9]*\) token=\([0-9]*\) logit=\([^ ]*\).*/\1 \2 \3/p' "$tmp/chip.txt" > "$tmp/chip.rows"
sed -n 's/^REF step=\([0-9]*\) token=\([0-9]*\) logit=\([^ ]*\).*/\1 \2 \3/p' "$tmp/ref.txt" > "$tmp/ref.rows"
if [ "$(wc -l < "$tmp/chip.rows")" -ne "$new" ]; then
    echo "model_match: the chip printed $(wc -l < "$tmp/chip.rows") of $new tokens" >&2
    cat "$tmp/chip.txt" >&2; exit 1
fi
# MoE: every expert of every layer received the same number of tokens on both sides.
sed -n 's/^REF routed \(.*\)/\1/p' "$tmp/ref.txt" > "$tmp/ref.routed"
sed -n 's/.*MODEL routed \(.*\)/\1/p' "$tmp/chip.txt" > "$tmp/chip.routed"
if ! cmp -s "$tmp/ref.routed" "$tmp/chip.routed"; then
    echo "model_match: expert routing differs (reference, then chip):" >&2
    cat "$tmp/ref.routed" "$tmp/chip.routed" >&2; exit 1
fi
paste -d' ' "$tmp/ref.rows" "$tmp/chip.rows" | awk -v model="$model" -v len="$len" -v extra="${MODEL_ARGS:-}" '
  { d = $3 - $6; if (d < 0) d = -d; s = ($3 < 0 ? -$3 : $3); if (s < 1) s = 1
    if ($2 != $5) { printf "step %d: reference token %d, chip %d\n", $1, $2, $5; bad = 1 }
    else if (d > 1e-4 * s) { printf "step %d: logit %s vs %s\n", $1, $3, $6; bad = 1 }
    if (d / s > worst) worst = d / s }
  END { printf "%s %s, prompt %d, %d tokens: %s (worst logit difference %.2g)\n", model,
               extra, len, NR, bad ? "MISMATCH" : "match", worst; exit bad }'
