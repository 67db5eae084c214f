#!/bin/sh
# SPDX-License-Identifier: MIT
# vLLM's load knobs on a trace (docs/traces.md, "Load knobs") and its run keys in
# summary.json (docs/outputs.md), read as vLLM's result readers read them:
#  a) --num-prompts 8 --request-rate inf --max-concurrency 2: 8 requests, all due at 0,
#     never more than 2 in flight (arrival to finish), so 6 were held and arrive later;
#  b) --request-rate 40 --burstiness 0.5: re-timed arrivals, the keys say so;
#  c) --max-concurrency 1 with a request refused at arrival among those held, under chunked
#     and under pd-disagg (answers from two instances): every request still ends.
#   serve_load.sh NPUCTL
set -eu
npuctl=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$npuctl" serve --num-prompts 8 --request-rate inf --max-concurrency 2 --out "$tmp/a" \
    >"$tmp/a.log" 2>&1 || { tail -n 30 "$tmp/a.log"; echo "FAIL: run a"; exit 1; }
"$npuctl" serve --request-rate 40 --burstiness 0.5 --seed 3 --out "$tmp/b" \
    >"$tmp/b.log" 2>&1 || { tail -n 30 "$tmp/b.log"; echo "FAIL: run b"; exit 1; }
printf '%s\n' '{"timestamp": 0, "input_length": 12, "output_length": 3}' \
    '{"timestamp": 0, "input_length": 100000, "output_length": 3}' \
    '{"timestamp": 0, "input_length": 20, "output_length": 4}' \
    '{"timestamp": 0, "input_length": 9, "output_length": 2}' >"$tmp/c.jsonl"
for s in chunked pd-disagg; do
    extra=""; [ "$s" = pd-disagg ] && extra="--instances 2 --chunk 8"
    # shellcheck disable=SC2086
    "$npuctl" serve --trace "$tmp/c.jsonl" --sched "$s" $extra --max-concurrency 1 \
        --timeout 120 --out "$tmp/c-$s" >"$tmp/c-$s.log" 2>&1 ||
        { tail -n 30 "$tmp/c-$s.log"; echo "FAIL: run c ($s) did not end whole"; exit 1; }
done
python3 - "$tmp" <<'PY'
import csv, json, sys
tmp = sys.argv[1]
problems = []
def check(cond, what):
    if not cond:
        problems.append(what)
a = json.load(open(f"{tmp}/a/summary.json"))
rows = list(csv.DictReader(open(f"{tmp}/a/requests.csv")))
check(len(rows) == 8 and a["num_prompts"] == 8, f"a: {len(rows)} requests, not 8")
check(all(r["state"] == "finished" for r in rows), "a: not every request finished")
events = sorted([(float(r["arrival_ms"]), 1) for r in rows] +
                [(float(r["finish_ms"]), -1) for r in rows])
most = now = 0
for _, d in events:  # a finish at the same time as an arrival counts first
    now += d
    most = max(most, now)
check(most <= 2, f"a: {most} requests in flight, the limit is 2")
held = sum(float(r["arrival_ms"]) > 0 for r in rows)
check(held == 6, f"a: {held} requests arrived after 0, expected the 6 held")
check(a["request_rate"] == "inf" and a["max_concurrency"] == 2 and a["burstiness"] == 1,
      f"a: run keys {a['request_rate']}, {a['max_concurrency']}, {a['burstiness']}")
for key in ("input_lens", "output_lens", "ttfts", "itls", "errors"):
    check(len(a[key]) == 8, f"a: {key} has {len(a[key])} entries")
check(a["errors"] == [""] * 8, f"a: errors {a['errors']}")
check(all(len(g) == n - 1 for g, n in zip(a["itls"], a["output_lens"])), "a: itls lengths")
ttft_ms = sorted(1e3 * t for t in a["ttfts"])
check(abs(sum(ttft_ms) / 8 - a["mean_ttft_ms"]) < 1e-6, "a: ttfts do not give mean_ttft_ms")
check(a["request_goodput"] >= 0 and a["backend"] == "npu-mesh" and a["model_id"] and
      len(a["date"]) == 15, "a: goodput, backend, model_id or date")
b = json.load(open(f"{tmp}/b/summary.json"))
check(b["request_rate"] == 40 and b["burstiness"] == 0.5 and b["max_concurrency"] is None,
      f"b: run keys {b['request_rate']}, {b['burstiness']}, {b['max_concurrency']}")
check(b["labels"]["request_rate"] == "40", f"b: label {b['labels']['request_rate']}")
served = [json.loads(l)["timestamp"] for l in open(f"{tmp}/b/trace.jsonl")]
check(len(served) == 16 and served == sorted(served) and served[0] > 0,
      "b: the served trace's timestamps")
for s in ("chunked", "pd-disagg"):
    c = json.load(open(f"{tmp}/c-{s}/summary.json"))
    check(c["completed"] == 3 and c["rejected"] == 1 and c["errors"][1] == "too_long",
          f"c ({s}): {c['completed']} finished, {c['rejected']} rejected, {c['errors']}")
    rows = list(csv.DictReader(open(f"{tmp}/c-{s}/requests.csv")))
    done = [r for r in rows if r["state"] == "finished"]
    ends = sorted((float(r["arrival_ms"]), float(r["finish_ms"])) for r in done)
    check(all(b[0] >= a[1] for a, b in zip(ends, ends[1:])),
          f"c ({s}): a request arrived before the one in flight ended")
if problems:
    print("FAIL: " + "; ".join(problems))
    sys.exit(1)
print("PASS: at most 2 in flight, 6 held; run keys and arrays present")
PY
