#!/bin/sh
# SPDX-License-Identifier: MIT
# Faults during a serving run (docs/serving.md, "Faults"):  serve_faults.sh NPUCTL KIND STATUS
# Core 1 of the bundled trace's run traps, deadlocks, stalls past its collectives' timeout
# or spins without waiting at its 40th round (npuctl serve --inject-fault), mid-run: some
# requests have finished by then, others run or wait. The run must end with exit STATUS,
# its summary written and marked incomplete, and every request accounted for: finished,
# rejected, or failed with the run's cause as its reason.
set -eu
npuctl=$1 kind=$2 want=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
set +e
"$npuctl" serve --inject-fault "$kind:1:40" --watchdog-ms 2000 --out "$tmp/out" \
    > "$tmp/out.txt" 2>&1
got=$?
set -e
cat "$tmp/out.txt"
if [ "$got" -ne "$want" ]; then
    echo "serve_faults $kind: exit $got, wanted $want" >&2
    exit 1
fi
python3 - "$tmp/out" "$kind" <<'EOF'
import csv, json, sys
out, kind = sys.argv[1], sys.argv[2]
cause = {"trap": "trap (core 1)", "deadlock": "deadlock", "timeout": "core_timeout (core ",
         "spin": "watchdog"}[kind]
s = json.load(open(f"{out}/summary.json"))
rows = list(csv.DictReader(open(f"{out}/requests.csv")))
problems = []
if s["complete"]:
    problems.append("summary.json says complete")
if not s["failure"] or not s["failure"].startswith(cause):
    problems.append(f"failure {s['failure']!r}, wanted {cause!r}...")
if s["completed"] + s["rejected"] + s["failed"] != s["num_prompts"] or s["unfinished"]:
    problems.append(f"not every request accounted for: {s}")
if s["failed"] == 0 or s["completed"] == 0 or len(rows) != s["num_prompts"]:
    problems.append(f"{s['completed']} finished, {s['failed']} failed, {len(rows)} rows")
for r in rows:
    if r["state"] not in ("finished", "rejected", "failed"):
        problems.append(f"request {r['id']}: state {r['state']}")
    if r["state"] == "failed" and not r["reason"].startswith(cause):
        problems.append(f"request {r['id']}: reason {r['reason']!r}")
if problems:
    sys.exit("serve_faults %s: %s" % (kind, "; ".join(problems)))
print(f"serve_faults {kind}: {s['completed']} finished, {s['failed']} failed ({s['failure']})")
EOF
