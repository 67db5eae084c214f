#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Layer reuse against full simulation (docs/images.md, "Layer reuse"):
#   serve_reuse.sh NPUCTL TOL_PCT[/TIME_PCT] MODE SERVE-ARGS...
# serves a performance-mode run twice, with --layer-reuse off and MODE (on, shapes or
# tiles), and requires: both complete; the reuse run executed at most 80% of the
# descriptors (it did replay); chip time, the median TTFT, the mean TBT, HBM bytes,
# expert-load bytes, FLOPs and energy per token within TOL_PCT percent of the full run's
# (the first three within TIME_PCT where given);
# the summary labelled with the mode; with tiles, some tile replayed (the MODEL reuse line).
# The median, not the mean TTFT: a request that arrives while an iteration runs waits for
# the next one, so an iteration ending a few microseconds later can cost one request a
# whole iteration and the next ones behind it (burst-16 under tile reuse: request 9 waited
# 51 us more, the mean of 16 TTFTs moved 6.5 %, the median 1.9 %).
set -uo pipefail
npuctl="$1" tol="$2" mode="$3"; shift 3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in off "$mode"; do
    o=$([ "$r" = off ] && echo off || echo on) # the reuse run's outputs go to $tmp/on
    if ! "$npuctl" serve "$@" --layer-reuse "$r" --out "$tmp/$o" >"$tmp/$o.txt" 2>&1; then
        echo "serve_reuse: the run with --layer-reuse $r failed:"; tail -n 20 "$tmp/$o.txt"
        exit 1
    fi
done
python3 - "$tmp" "$tol" "$mode" <<'PY'
import json, sys
tmp, tols, mode = sys.argv[1], sys.argv[2].split("/"), sys.argv[3]
tol, time_tol = float(tols[0]), float(tols[-1])
times = ("duration", "median_ttft_ms", "mean_tpot_ms")
s = {r: json.load(open(f"{tmp}/{r}/summary.json")) for r in ("off", "on")}
c = {r: json.load(open(f"{tmp}/{r}/chip_stats.json"))["total"] for r in ("off", "on")}
bad = []
if s["on"]["labels"].get("layer_reuse") != mode or s["off"]["labels"].get("layer_reuse") != "off":
    bad.append(f"summary labels do not say layer_reuse {mode} / off")
if not (s["on"]["complete"] and s["off"]["complete"]):
    bad.append("a run is incomplete")
if c["on"]["descs"] > 0.8 * c["off"]["descs"]:
    bad.append(f"descriptors {c['on']['descs']} of {c['off']['descs']}: nothing was replayed")
pairs = [(k, s["off"][k], s["on"][k]) for k in
         ("duration", "median_ttft_ms", "mean_tpot_ms", "hbm_bytes", "expert_load_bytes",
          "energy_per_token_j")] + [("flops", c["off"]["flops"], c["on"]["flops"])]
for k, a, b in pairs:
    dev = abs(b - a) / a * 100 if a else (0.0 if b == 0 else 100.0)
    print(f"serve_reuse: {k:20s} full {a:<14.6g} reuse {b:<14.6g} {dev:6.2f}%")
    t = time_tol if k in times else tol
    if dev > t:
        bad.append(f"{k} deviates {dev:.2f}% > {t}%")
print(f"serve_reuse: descriptors run {c['on']['descs']} of {c['off']['descs']}")
if mode == "tiles":
    import re
    log = open(f"{tmp}/on/console.log").read()
    n = [int(x) for x in re.findall(r"MODEL reuse .* tiles_replayed=(\d+)", log)]
    print(f"serve_reuse: tiles replayed {n}")
    if not n or max(n) == 0:
        bad.append("no tile was replayed (MODEL reuse ... tiles_replayed)")
for b in bad:
    print("serve_reuse: FAIL:", b)
sys.exit(1 if bad else 0)
PY
