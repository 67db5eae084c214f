#!/bin/sh
# SPDX-License-Identifier: MIT
# Runs the model image on the chip and the host reference (npu-ref) on the same model and
# prompts, and compares, request by request: the greedy tokens must be identical, and each
# chosen token's logit within 1e-4 x max(1, |logit|) (fp32 activations on both sides, in
# other summation orders); for a MoE model the tokens each expert of each layer received
# (summed over the requests) must be the same. docs/models.md, docs/images.md.
#   model_match.sh NPUCTL NPU_REF MODEL.toml LENS NEW [npuctl build-image options...]
# LENS: prompt lengths, one per request, comma-separated, each optionally @ the iteration it
# joins at (e.g. 7 or 7,1@3,64,23@10): the requests run together as one batch. The image is
# built with the options given (--chip, --tp, --partition, --placement, ...) and, unless
# they say otherwise, a plan just large enough: max_batch = requests, max_seq = longest
# prompt + NEW, max_tokens = all prompts. EXPERT_CHECK=1 (one request, MoE) also checks that
# the expert-weight bytes the ranks loaded equal what the reference's routing implies.
set -eu
npuctl=$1 ref=$2 model=$3 lens=$4 new=$5
shift 5
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Request r's prompt: `len` deterministic token ids below 509 (the tiny vocabularies: 512).
prompt_of() {
    awk -v n="$1" -v r="$2" 'BEGIN { for (i = 0; i < n; i++)
        printf "%s%d", (i ? "," : ""), (i * 7919 + 17 + r * 101) % 509 }'
}
args="" r=0
for spec in $(echo "$lens" | tr ',' ' '); do
    len=${spec%@*}
    p=$(prompt_of "$len" "$r")
    args="$args prompt$r=$p"
    case $spec in *@*) args="$args start$r=${spec#*@}" ;; esac
    "$ref" "$model" "$p" "$new" ${EXPERT_EB:-4} > "$tmp/ref$r.txt"
    sed -n "s/^REF step=\([0-9]*\) token=\([0-9]*\) logit=\([^ ]*\).*/$r \1 \2 \3/p" \
        "$tmp/ref$r.txt" >> "$tmp/ref.rows"
    sed -n 's/^REF routed \(.*\)/\1/p' "$tmp/ref$r.txt" >> "$tmp/ref.routed.all"
    r=$((r + 1))
done
nreq=$r
longest=0 total=0
for spec in $(echo "$lens" | tr ',' ' '); do
    len=${spec%@*}; total=$((total + len))
    [ "$len" -gt "$longest" ] && longest=$len
done
defaults="--max-batch $nreq --max-seq $((longest + new)) --max-tokens $total"
case " $* " in *" --max-tokens "*) defaults="--max-batch $nreq --max-seq $((longest + new))" ;; esac
# shellcheck disable=SC2086
"$npuctl" build-image --model "$model" $defaults "$@" -o "$tmp/model.img" > "$tmp/plan.txt" 2>&1 || {
    echo "model_match: build-image failed:" >&2; cat "$tmp/plan.txt" >&2; exit 1; }
# a chip given as a config file: flash needs it too (the image names its chip only)
chip=""
prev=""
for a in "$@"; do
    [ "$prev" = --chip ] && case $a in */*) chip="--chip $a" ;; esac
    prev=$a
done
# shellcheck disable=SC2086
"$npuctl" flash "$tmp/model.img" $chip --timeout 600 -- -append "$args new=$new" > "$tmp/chip.txt" 2>&1 || {
    echo "model_match: the chip run failed:" >&2; cat "$tmp/plan.txt" "$tmp/chip.txt" >&2; exit 1; }
sed -n 's/.*MODEL req=\([0-9]*\) step=\([0-9]*\) token=\([0-9]*\) logit=\([^ ]*\).*/\1 \2 \3 \4/p' \
    "$tmp/chip.txt" | sort -n -k1,1 -k2,2 > "$tmp/chip.rows"
if [ "$(wc -l < "$tmp/chip.rows")" -ne $((nreq * new)) ]; then
    echo "model_match: the chip printed $(wc -l < "$tmp/chip.rows") of $((nreq * new)) tokens" >&2
    cat "$tmp/chip.txt" >&2; exit 1
fi
# MoE: the reference's routing counts summed over the requests, against the chip's.
if [ -s "$tmp/ref.routed.all" ]; then
    awk '{ split($2, a, "="); n = split(a[2], c, ","); for (e = 1; e <= n; e++) s[$1, e] += c[e]
           layers[$1] = n }
         END { for (l in layers) { printf "%s tokens=", l
               for (e = 1; e <= layers[l]; e++) printf "%s%d", (e > 1 ? "," : ""), s[l, e]
               printf "\n" } }' "$tmp/ref.routed.all" | sort > "$tmp/ref.routed"
    sed -n 's/.*MODEL routed \(.*\)/\1/p' "$tmp/chip.txt" | sort > "$tmp/chip.routed"
    if ! cmp -s "$tmp/ref.routed" "$tmp/chip.routed"; then
        echo "model_match: expert routing differs (reference, then chip):" >&2
        cat "$tmp/ref.routed" "$tmp/chip.routed" >&2; exit 1
    fi
fi
if [ "${EXPERT_CHECK:-0}" = 1 ]; then
    want=$(sed -n 's/^REF expert_load_bytes=\([0-9]*\).*/\1/p' "$tmp/ref0.txt")
    got=$(sed -n 's/.*MODEL rank=.* expert_load_bytes=\([0-9]*\) .*/\1/p' "$tmp/chip.txt" |
          awk '{ s += $1 } END { print s + 0 }')
    if [ -z "$want" ] || [ "$want" != "$got" ]; then
        echo "model_match: expert-weight bytes: the routing implies ${want:-?}, the ranks loaded $got" >&2
        exit 1
    fi
    echo "expert-weight bytes loaded: $got, as the reference's routing implies"
fi
paste -d' ' "$tmp/ref.rows" "$tmp/chip.rows" | awk -v model="$model" -v lens="$lens" -v extra="$*" '
  { d = $4 - $8; if (d < 0) d = -d; s = ($4 < 0 ? -$4 : $4); if (s < 1) s = 1
    if ($1 != $5 || $2 != $6) { printf "row %d: reference req %d step %d, chip req %d step %d\n", NR, $1, $2, $5, $6; bad = 1 }
    else if ($3 != $7) { printf "request %d step %d: reference token %d, chip %d\n", $1, $2, $3, $7; bad = 1 }
    else if (d > 1e-4 * s) { printf "request %d step %d: logit %s vs %s\n", $1, $2, $4, $8; bad = 1 }
    if (d / s > worst) worst = d / s }
  END { printf "%s %s, prompts %s, %d tokens: %s (worst logit difference %.2g)\n", model,
               extra, lens, NR, bad ? "MISMATCH" : "match", worst; exit bad }'
