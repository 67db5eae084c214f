#!/bin/sh
# SPDX-License-Identifier: MIT
# Prefix caching (docs/serving.md, "Prefix caching"): one trace of prompts sharing their
# first hash blocks (data/prefix-16.jsonl: half of them a 48-token prefix, a quarter a
# 32-token one), served with --prefix-cache off and on, under chunked and layered prefill
# and PD disaggregation (two prefill instances: the cache-aware choice of instance); and
# under attention/expert disaggregation, dealt to replicas round robin and by prefix.
# With it on: the sharers' admissions find their shared blocks (cached_tokens in
# requests.csv, prefix_cache_hit_rate in summary.json), the others find none, the mean TTFT
# is lower, and every token is the one the run without the cache gave (the host reference
# is serve_match.sh's business). Also refused before a run: a functional trace whose own
# input_ids differ under one hash id.
#   serve_prefix.sh NPUCTL TRACE
set -eu
npuctl=$1 trace=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common="--model tiny-moe --trace $trace --hash-block 16 --kv-block 16 --kv-split off"
for sched in chunked layered pd-disagg; do
    extra=""
    [ "$sched" = pd-disagg ] && extra="--instances 4 --prefill-instances 2 --chunk 24"
    for pc in off on; do
        # shellcheck disable=SC2086
        "$npuctl" serve $common --sched "$sched" $extra --prefix-cache "$pc" \
            --out "$tmp/$sched-$pc" >"$tmp/$sched-$pc.log" 2>&1 ||
            { tail -n 30 "$tmp/$sched-$pc.log"; echo "FAIL: $sched, prefix cache $pc"; exit 1; }
    done
done
# Attention/expert disaggregation, three replicas: requests dealt round robin, then to the
# replica holding their prefix.
for d in rr prefix; do
    "$npuctl" serve --model tiny-moe --trace "$trace" --hash-block 16 --kv-block 16 \
        --kv-split off --chip mesh-4x4 --tp 4 --instances 4 --roles disagg --micro-batches 2 \
        --max-tokens 32 --max-seq 256 --kv-sram-blocks 3 --chunk 24 --prefix-cache on \
        --dispatch "$d" --out "$tmp/disagg-$d" >"$tmp/disagg-$d.log" 2>&1 ||
        { tail -n 30 "$tmp/disagg-$d.log"; echo "FAIL: disagg, dispatch $d"; exit 1; }
done
python3 - "$tmp" "$trace" <<'PY'
import csv, json, sys
tmp, trace = sys.argv[1:3]
entries = [json.loads(l) for l in open(trace)]
# a request shares a prefix when an earlier one has its first hash id (the trace's
# prompts are spaced so that each earlier one has finished its prefill)
seen, sharers = set(), set()
for i, e in enumerate(entries):
    if e["hash_ids"][0] in seen:
        sharers.add(i)
    seen.add(e["hash_ids"][0])
problems = []
for sched in ("chunked", "layered", "pd-disagg"):
    off = json.load(open(f"{tmp}/{sched}-off/summary.json"))
    on = json.load(open(f"{tmp}/{sched}-on/summary.json"))
    rows = {int(r["id"]): r for r in csv.DictReader(open(f"{tmp}/{sched}-on/requests.csv"))}
    toks = lambda run: [(r["id"], r["n"], r["token"])
                        for r in csv.DictReader(open(f"{tmp}/{sched}-{run}/tokens.csv"))]
    if toks("on") != toks("off"):
        problems.append(f"{sched}: tokens differ with the prefix cache on")
    hit = {i for i, r in rows.items() if int(r["cached_tokens"]) > 0}
    if hit != sharers:
        problems.append(f"{sched}: hits {sorted(hit)}, sharers {sorted(sharers)}")
    if off["prefix_cache_hit_rate"] is not None or not on["prefix_cache_hit_rate"] > 0:
        problems.append(f"{sched}: hit rate off {off['prefix_cache_hit_rate']}, "
                        f"on {on['prefix_cache_hit_rate']}")
    if on["labels"]["prefix_cache"] != "on":
        problems.append(f"{sched}: label prefix_cache {on['labels']['prefix_cache']}")
    if not on["mean_ttft_ms"] < off["mean_ttft_ms"]:
        problems.append(f"{sched}: mean TTFT {on['mean_ttft_ms']} ms with the cache, "
                        f"{off['mean_ttft_ms']} without")
    print(f"{sched}: hit rate {on['prefix_cache_hit_rate']:.3f}, mean TTFT "
          f"{on['mean_ttft_ms']:.4f} ms against {off['mean_ttft_ms']:.4f}")
# Dealt to the replica holding its prefix, every sharer finds it; dealt round robin, fewer do.
rr, px = (json.load(open(f"{tmp}/disagg-{d}/summary.json")) for d in ("rr", "prefix"))
rows = {int(r["id"]): r for r in csv.DictReader(open(f"{tmp}/disagg-prefix/requests.csv"))}
hit = {i for i, r in rows.items() if int(r["cached_tokens"]) > 0}
if hit != sharers or not px["prefix_cache_hit_rate"] > rr["prefix_cache_hit_rate"]:
    problems.append(f"disagg: dispatch prefix hits {sorted(hit)} (rate "
                    f"{px['prefix_cache_hit_rate']}), round robin rate "
                    f"{rr['prefix_cache_hit_rate']}")
print(f"disagg: hit rate {px['prefix_cache_hit_rate']:.3f} dealt by prefix, "
      f"{rr['prefix_cache_hit_rate']:.3f} round robin")
for p in problems:
    print("FAIL", p)
sys.exit(1 if problems else 0)
PY
refused() { # refused WHAT EXPECTED-TEXT ARGS...
    what=$1 want=$2
    shift 2
    if "$npuctl" serve "$@" --out "$tmp/refused" >"$tmp/refused.log" 2>&1; then
        echo "FAIL: $what was served"; exit 1
    fi
    grep -q "$want" "$tmp/refused.log" ||
        { cat "$tmp/refused.log"; echo "FAIL: $what: no '$want'"; exit 1; }
    rm -rf "$tmp/refused"
}
printf '%s\n' \
    '{"timestamp": 0, "input_length": 4, "output_length": 2, "hash_ids": [5], "input_ids": [1, 2, 3, 4]}' \
    '{"timestamp": 1, "input_length": 4, "output_length": 2, "hash_ids": [5], "input_ids": [1, 2, 3, 9]}' \
    >"$tmp/clash.jsonl"
refused "ids that differ under one hash id" "request 1: hash_ids\[0\] = 5 also names request 0" \
    --trace "$tmp/clash.jsonl" --hash-block 4 --prefix-cache on
echo "prefix caching: hits, lower TTFT, same tokens; the refusal named"
