#!/bin/sh
# SPDX-License-Identifier: MIT
# Functional serving against the host reference (docs/serving.md, "Testing"): serves one
# trace under each scheduler given and checks, request by request, that the tokens the chip
# generated (DIR/tokens.csv) are exactly the host reference's greedy tokens for the same
# prompt (DIR/trace.jsonl holds the prompt ids the chip was given), and that every request
# ended (finished). Whatever the policy, the tokens must not change.
#   serve_match.sh NPUCTL NPU_REF MODEL TRACE "SCHED[:OPT=V,...]"... [-- serve options]
# e.g. "layered:--groups=2" runs npuctl serve --sched layered --groups 2.
set -eu
npuctl=$1 ref=$2 model=$3 trace=$4
shift 4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
scheds=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do scheds="$scheds $1"; shift; done
[ $# -gt 0 ] && shift
reference_done=""
for spec in $scheds; do
    sched=${spec%%:*} opts=""
    case $spec in *:*) opts=$(echo "${spec#*:}" | tr ',=' '  ') ;; esac
    out="$tmp/$(echo "$spec" | tr ':,=' '___')"
    # shellcheck disable=SC2086
    if ! "$npuctl" serve --model "$model" --trace "$trace" --sched "$sched" $opts --out "$out" \
            "$@" >"$out.log" 2>&1; then
        cat "$out.log" "$out/console.log" 2>/dev/null | tail -n 30
        echo "FAIL: npuctl serve --sched $sched $opts"
        exit 1
    fi
    if [ -z "$reference_done" ]; then # the prompts are the same for every policy
        python3 - "$out/trace.jsonl" "$ref" "$model" >"$tmp/ref.csv" <<'PY'
import json, subprocess, sys
path, ref, model = sys.argv[1:4]
print("id,n,token")
for i, line in enumerate(open(path)):
    e = json.loads(line)
    prompt = ",".join(str(t) for t in e["input_ids"])
    r = subprocess.run([ref, model, prompt, str(e["output_length"])], check=True,
                       capture_output=True, text=True).stdout
    n = 0
    for w in r.split("\n"):
        if w.startswith("REF step="):
            print(f"{i},{n},{w.split()[2].split('=')[1]}")
            n += 1
PY
        reference_done=1
    fi
    python3 - "$tmp/ref.csv" "$out/tokens.csv" "$out/requests.csv" "$spec" <<'PY'
import csv, sys
ref, got, reqs, spec = sys.argv[1:5]
want = {(int(r["id"]), int(r["n"])): int(r["token"]) for r in csv.DictReader(open(ref))}
have = {(int(r["id"]), int(r["n"])): int(r["token"]) for r in csv.DictReader(open(got))}
states = [r["state"] for r in csv.DictReader(open(reqs))]
bad = [k for k in want if have.get(k) != want[k]] + [k for k in have if k not in want]
if bad or any(s != "finished" for s in states):
    print(f"FAIL {spec}: {len(bad)} tokens differ (first {sorted(bad)[:5]}), states "
          f"{sorted(set(states))}")
    sys.exit(1)
print(f"{spec}: {len(want)} tokens of {len(states)} requests equal the reference")
PY
done
