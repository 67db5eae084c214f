#!/bin/sh
# SPDX-License-Identifier: MIT
# Bad serving input (docs/serving.md, "Bad input"):  serve_refusals.sh NPUCTL CASE
# A malformed trace line, timestamps out of order, an unknown scheduler parameter and
# instances that do not suit the scheduler, layer reuse in a functional run, decode-core
# sizes outside pd-disagg or malformed are refused before the run (exit 2, naming the line or the option, no console written); a
# request longer than the image's context is rejected on its own, with its reason, in the
# outputs, while the others are served (exit 0); a run whose every request is rejected
# exits 1, and a CSV trace is refused with how to convert it; an --out holding an earlier
# run is refused without --force, and compare refuses an incomplete run. Issue 26's edges, each refused by the host
# before the chip starts: values past npu_limits.h (a 4294967295-token prompt, an arrival at
# day 54, a NUL byte), an empty trace, a functional trace whose prompt ids pass the control
# core's DRAM, and option values that are not strict numbers or are 0 where 0 means nothing.
set -eu
npuctl=$1 case=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
t=$tmp/t.jsonl
printf '%s\n' '{"timestamp": 0.5, "input_length": 8, "output_length": 4}' \
    '{"timestamp": 1.0, "input_length": 5, "output_length": 3}' > "$t"

. "$(dirname "$0")/lib/expect.sh"

not_run() {
    if [ -e "$tmp/out/console.log" ]; then
        echo "serve_refusals $case: the chip ran" >&2
        exit 1
    fi
}

case $case in
malformed-line)
    echo '{"timestamp": 2.0, "input_length": 4 "output_length": 2}' >> "$t"
    expect 2 "t.jsonl:3" "$npuctl" serve --trace "$t" --out "$tmp/out"
    not_run ;;
out-of-order)
    echo '{"timestamp": 0.25, "input_length": 4, "output_length": 2}' >> "$t"
    expect 2 "t.jsonl:3: .*timestamp" "$npuctl" serve --trace "$t" --out "$tmp/out"
    not_run ;;
unknown-parameter)
    expect 2 "unknown option '--chunk-size'" "$npuctl" serve --trace "$t" --chunk-size 64 \
        --out "$tmp/out"
    not_run ;;
bad-parameter)
    expect 2 "--sched chunked: .*chunk" "$npuctl" serve --trace "$t" --sched chunked \
        --chunk 2 --out "$tmp/out"
    not_run ;;
pd-instances)
    # pd-disagg needs two instances at least; other policies serve exactly one
    expect 2 "--sched pd-disagg: pd-disagg: instances .*1 must be in \\[2, 8\\]" \
        "$npuctl" serve --trace "$t" --sched pd-disagg --out "$tmp/out"
    not_run
    expect 2 "--instances 2: only --sched pd-disagg \\(or --roles disagg\\) serves more than one" \
        "$npuctl" serve --trace "$t" --instances 2 --out "$tmp/out"
    not_run
    # a disaggregated plan's replicas run the other schedulers
    expect 2 "--roles disagg: its replicas run one of the other schedulers, not pd-disagg" \
        "$npuctl" serve --trace "$t" --sched pd-disagg --instances 2 --roles disagg \
        --out "$tmp/out"
    not_run
    # only replicas are dealt requests
    expect 2 "--dispatch load: only --roles disagg has replicas" \
        "$npuctl" serve --trace "$t" --dispatch load --out "$tmp/out"
    not_run
    expect 2 "pd-disagg: prefill instances 2 must be in \\[1, 1\\]" "$npuctl" serve \
        --trace "$t" --sched pd-disagg --instances 2 --prefill-instances 2 --out "$tmp/out"
    not_run ;;
decode-cores)
    # heterogeneous decode cores: pd-disagg only, and a well-formed SPEC
    expect 2 "--decode-cores: only --sched pd-disagg has decode cores" "$npuctl" serve \
        --trace "$t" --decode-cores sa=8x8 --out "$tmp/out"
    not_run
    expect 2 "--decode-cores sa=8: a value out of range or malformed" "$npuctl" serve \
        --trace "$t" --sched pd-disagg --instances 2 --decode-cores sa=8 --out "$tmp/out"
    not_run
    expect 2 "--decode-cores hbm=9: unknown key" "$npuctl" serve --trace "$t" \
        --sched pd-disagg --instances 2 --decode-cores hbm=9 --out "$tmp/out"
    not_run
    expect 2 "--decode-cores sa=4x4,: an empty item" "$npuctl" serve --trace "$t" \
        --sched pd-disagg --instances 2 --decode-cores sa=4x4, --out "$tmp/out"
    not_run
    expect 2 "--decode-cores vector_lanes=0: a value out of range" "$npuctl" serve \
        --trace "$t" --sched pd-disagg --instances 2 --decode-cores vector_lanes=0 \
        --out "$tmp/out"
    not_run ;;
layer-reuse)
    # layer reuse repeats recorded timing: a functional run must compute every layer
    expect 2 "--layer-reuse on needs --mode performance" "$npuctl" serve --trace "$t" \
        --layer-reuse on --out "$tmp/out"
    not_run
    expect 2 "--layer-reuse shapes needs --mode performance" "$npuctl" serve --trace "$t" \
        --layer-reuse shapes --out "$tmp/out"
    expect 2 "--layer-reuse tiles needs --mode performance" "$npuctl" serve --trace "$t" \
        --layer-reuse tiles --out "$tmp/out"
    not_run
    expect 2 "--layer-reuse yes: off, on, shapes or tiles" "$npuctl" serve --trace "$t" \
        --mode performance --layer-reuse yes --out "$tmp/out"
    not_run ;;
limits)
    echo '{"timestamp": 2.0, "input_length": 4294967295, "output_length": 2}' >> "$t"
    expect 2 "t.jsonl:3: field 'input_length': 4294967295 is more than 16777216" \
        "$npuctl" serve --trace "$t" --out "$tmp/out"
    not_run
    sed -i '$d' "$t"
    echo '{"timestamp": 4665600000.0, "input_length": 4, "output_length": 2}' >> "$t"
    expect 2 "t.jsonl:3: field 'timestamp': .* past the latest arrival" \
        "$npuctl" serve --trace "$t" --out "$tmp/out"
    not_run
    sed -i '$d' "$t"
    printf '\000{"timestamp": 2.0, "input_length": 4, "output_length": 2}\n' >> "$t"
    expect 2 "t.jsonl:3: a NUL byte at column 1" "$npuctl" serve --trace "$t" --out "$tmp/out"
    not_run ;;
empty)
    : > "$t"
    expect 2 "t.jsonl: no requests in the trace" "$npuctl" serve --trace "$t" --out "$tmp/out"
    not_run ;;
dram)
    # 200 prompts of 100,000 ids (80 MB) on mesh-2x2's 64 MiB DRAM (48 MiB for the trace):
    # refused with the sizes before any id is made; in performance mode (no ids) it fits
    awk 'BEGIN { for (i = 0; i < 200; i++)
        printf "{\"timestamp\": %d.0, \"input_length\": 100000, \"output_length\": 1}\n", i }' \
        > "$t"
    expect 2 "the trace needs [0-9]+ bytes on the chip \\(200 requests and their prompt ids\\), the control core's DRAM has 50331648" \
        "$npuctl" serve --trace "$t" --chip mesh-2x2 --out "$tmp/out"
    not_run ;;
numbers)
    # strict numbers: decimal digits for counts, no hex, fraction, nan or inf; 0 refused
    # where leaving the option out is how to ask for the default
    expect 2 "--chunk '0x200': expected a whole number" "$npuctl" serve --trace "$t" \
        --chunk 0x200 --out "$tmp/out"
    expect 2 "--seed '1.5': expected a whole number" "$npuctl" serve --trace "$t" \
        --seed 1.5 --out "$tmp/out"
    expect 2 "--tp '0': out of range 1\\.\\.4294967295" "$npuctl" serve --trace "$t" --tp 0 \
        --out "$tmp/out"
    expect 2 "--max-batch '0': out of range" "$npuctl" serve --trace "$t" --max-batch 0 \
        --out "$tmp/out"
    expect 2 "--max-seq '010x': expected a whole number" "$npuctl" serve --trace "$t" \
        --max-seq 010x --out "$tmp/out"
    expect 2 "--routing skewed:ALPHA 'nan': expected a decimal number" "$npuctl" serve \
        --trace "$t" --mode performance --routing skewed:nan --out "$tmp/out"
    expect 2 "--slo-tbt-ms 'inf': expected a decimal number" "$npuctl" serve --trace "$t" \
        --slo-tbt-ms inf --out "$tmp/out"
    expect 2 "--chunk needs a value" "$npuctl" serve --trace "$t" --chunk --out "$tmp/out"
    not_run ;;
too-long)
    # max_seq 64: the 100 + 8 request is rejected as too_long, the others are served
    echo '{"timestamp": 1.5, "input_length": 100, "output_length": 8}' >> "$t"
    expect 0 "2 of 3 requests completed, 1 rejected" "$npuctl" serve --trace "$t" \
        --max-seq 64 --out "$tmp/out"
    grep -q '^2,.*,rejected,too_long,' "$tmp/out/requests.csv" || {
        echo "serve_refusals $case: request 2 is not rejected as too_long" >&2
        cat "$tmp/out/requests.csv" >&2
        exit 1
    }
    grep "^2," "$tmp/out/requests.csv" ;;
all-rejected)
    # every request too long: the run ends cleanly but serves nothing, which is no success
    expect 1 "every one of the 2 requests was rejected: nothing was served" "$npuctl" serve \
        --trace "$t" --max-seq 7 --out "$tmp/out"
    grep -q "energy/token   (no tokens served)" "$tmp/out.txt" || {
        echo "serve_refusals $case: no 'no tokens served' energy line" >&2
        exit 1
    } ;;
csv-trace)
    # a CSV file given as a trace: the refusal says how to convert it
    printf 'TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,374,44\n' > "$tmp/t.csv"
    expect 2 "t.csv:1: not JSON: .*a CSV trace\\? npuctl trace import --format" "$npuctl" \
        serve --trace "$tmp/t.csv" --out "$tmp/out"
    not_run ;;
out-reuse)
    # a second run into the same directory is refused, --force replaces the outputs, and
    # compare refuses a run that did not complete
    expect 0 "2 of 2 requests completed" "$npuctl" serve --trace "$t" --out "$tmp/out"
    expect 2 "--out .*/out holds an earlier run's outputs: give another directory, or --force" \
        "$npuctl" serve --trace "$t" --out "$tmp/out"
    echo keep > "$tmp/out/notes.txt"
    expect 0 "2 of 2 requests completed" "$npuctl" serve --trace "$t" --out "$tmp/out" --force
    [ -f "$tmp/out/notes.txt" ] || { echo "serve_refusals $case: --force removed notes.txt" >&2; exit 1; }
    mkdir "$tmp/cut"
    sed 's/"complete": true/"complete": false/' "$tmp/out/summary.json" > "$tmp/cut/summary.json"
    grep -q '"complete": false' "$tmp/cut/summary.json" || { echo "no complete key" >&2; exit 1; }
    expect 2 "cut/summary.json: the run is incomplete" "$npuctl" compare "$tmp/out" "$tmp/cut" ;;
*) echo "serve_refusals: unknown case $case" >&2; exit 2 ;;
esac
