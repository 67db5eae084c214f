#!/bin/sh
# SPDX-License-Identifier: MIT
# npuctl sweep end to end (docs/sweeps.md), on the checked-in grid tiny-moe-rates (three
# request rates by two schedulers, tiny MoE):
#  a) one command runs the 6 runs 2 at a time and writes results.csv / results.md and the
#     four plots; each run's summary.json carries its labels (run, series, sweep, sched) and
#     its rate; the rows' axis columns are the grid's;
#  b) the same command again runs nothing (6 done already) and writes the same table;
#  c) --emit parallel: jobs.txt has one line a run, `parallel --dry-run` reads back the same
#     lines; --emit slurm: the array script passes bash -n, and run as array task 3 (as Slurm
#     runs it) it remakes run 3, whose figures are the same as before; task 7 is refused;
#  d) the grid with one more fixed argument (--seed 2): every run's old summary and log are
#     removed when the job files are written (collect: 6 not run, exit 1); parallel.sh then
#     runs them all through GNU parallel and collects (exit 0, 6 whole).
#   sweep_runs.sh NPUCTL
set -eu
npuctl=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$tmp/s
fail() { echo "FAIL: $*"; exit 1; }

"$npuctl" sweep tiny-moe-rates --out "$out" --jobs 2 >"$tmp/a.log" 2>&1 ||
    { tail -n 30 "$tmp/a.log"; fail "a) the sweep did not end whole"; }
for p in slo_rate goodput_rate ttft_cdf tbt_cdf; do
    [ -s "$out/plots/$p.png" ] || [ -s "$out/plots/$p.svg" ] || fail "a) no plot $p"
done
cp "$out/results.csv" "$tmp/first.csv"
python3 - "$out" <<'PY' || exit 1
import csv, json, sys
out = sys.argv[1]
rows = list(csv.DictReader(open(f"{out}/results.csv")))
problems = []
want = [(s, r) for s in ("chunked-16", "layered-2") for r in ("2000", "8000", "32000")]
got = [(r["sched"], r["request-rate"]) for r in rows]
if got != want:
    problems.append(f"rows {got}")
for r in rows:
    name = f"sched={r['sched']}_request-rate={r['request-rate']}"
    s = json.load(open(f"{out}/runs/{name}/summary.json"))
    lab = s["labels"]
    if r["run"] != name or r["status"] != "ok" or int(r["completed"]) != 16:
        problems.append(f"row {r['run']}: {r['status']}, {r['completed']} completed")
    if (lab.get("run"), lab.get("series"), lab.get("sweep")) != \
            (name, f"sched={r['sched']}", "tiny-moe-rates"):
        problems.append(f"{name}: labels {lab}")
    if lab["sched"] != r["sched"].split("-")[0] or s["request_rate"] != float(r["request-rate"]):
        problems.append(f"{name}: sched {lab['sched']}, rate {s['request_rate']}")
    if abs(float(r["slo_attainment_pct"]) - 100 * s["slo_attainment"]) > 1e-6:
        problems.append(f"{name}: SLO column {r['slo_attainment_pct']}")
md = open(f"{out}/results.md").read()
if md.count("\n| sched=") != 6:
    problems.append("results.md does not have 6 rows")
grid = json.load(open(f"{out}/sweep.json"))
if [a["key"] for a in grid["axes"]] != ["sched", "request-rate"] or len(grid["runs"]) != 6:
    problems.append("sweep.json's axes or runs")
if problems:
    print("FAIL: a) " + "; ".join(problems))
    sys.exit(1)
PY

"$npuctl" sweep tiny-moe-rates --out "$out" >"$tmp/b.log" 2>&1 || fail "b) the second sweep"
grep -q "6 runs (6 done already)" "$tmp/b.log" || fail "b) ran again: $(head -n 1 "$tmp/b.log")"
cmp -s "$out/results.csv" "$tmp/first.csv" || fail "b) the table changed"

"$npuctl" sweep tiny-moe-rates --out "$out" --emit parallel >"$tmp/c.log" 2>&1 || fail "c) emit"
[ "$(wc -l <"$out/jobs.txt")" -eq 6 ] || fail "c) jobs.txt has not 6 lines"
parallel --dry-run <"$out/jobs.txt" >"$tmp/dry.txt" 2>/dev/null || fail "c) parallel --dry-run"
cmp -s "$tmp/dry.txt" "$out/jobs.txt" || fail "c) parallel reads other commands"
"$npuctl" sweep tiny-moe-rates --out "$out" --emit slurm >"$tmp/c2.log" 2>&1 || fail "c) slurm"
bash -n "$out/sweep.sbatch" || fail "c) sweep.sbatch does not parse"
grep -q '^#SBATCH --array=1-6$' "$out/sweep.sbatch" || fail "c) no array of 6"
run3=$out/runs/sched=chunked-16_request-rate=32000
rm -f "$run3/summary.json" "$run3/requests.csv"
SLURM_ARRAY_TASK_ID=3 bash "$out/sweep.sbatch" || fail "c) array task 3"
"$npuctl" sweep --collect --out "$out" >"$tmp/c3.log" 2>&1 || fail "c) collect"
cmp -s "$out/results.csv" "$tmp/first.csv" || fail "c) task 3 gave other figures"
if SLURM_ARRAY_TASK_ID=7 bash "$out/sweep.sbatch" 2>"$tmp/c4.log"; then
    fail "c) array task 7 ran"
fi
grep -q "no run 7" "$tmp/c4.log" || fail "c) task 7: $(cat "$tmp/c4.log")"

"$npuctl" sweep tiny-moe-rates --out "$out" --emit parallel -- --seed 2 >"$tmp/d.log" 2>&1 ||
    fail "d) emit with --seed 2"
if "$npuctl" sweep --collect --out "$out" >"$tmp/d2.log" 2>&1; then
    fail "d) collect passed with every run stale"
fi
[ "$(grep -c ',not-run,' "$out/results.csv")" -eq 6 ] || fail "d) stale runs kept their figures"
JOBS=2 sh "$out/parallel.sh" >"$tmp/d3.log" 2>&1 ||
    { tail -n 20 "$tmp/d3.log"; fail "d) parallel.sh"; }
[ "$(grep -c ',ok,' "$out/results.csv")" -eq 6 ] || fail "d) not 6 whole runs after parallel"
grep -q -- '--seed 2' "$out/runs/sched=layered-2_request-rate=8000/command.txt" ||
    fail "d) command.txt is not the new grid's"
echo "PASS: sweep, rerun, parallel and Slurm job files, stale runs"
