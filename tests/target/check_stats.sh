#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs `NPUCTL run IMAGE ARGS` with the machine's stats=FILE report and checks the JSON: the
# keys exist, the chip totals are the sums over cores and engines, the energy total is the
# sum of its parts, and the run did some work (non-zero FLOPs, HBM and NoC traffic).
set -uo pipefail
npuctl="$1"; shift
out=$(mktemp) json=$(mktemp)
trap 'rm -f "$out" "$json"' EXIT
"$npuctl" "$@" -- -machine stats="$json" >"$out" 2>/dev/null </dev/null || {
  echo "check_stats: the run failed"; cat "$out"; exit 1; }
/usr/bin/python3 - "$json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
keys = ["descs", "busy_ps", "flops", "bytes", "vector_elements", "sram_bytes", "hbm_bytes",
        "noc_byte_hops", "errors"]
for k in keys:
    per_core = sum(c["total"][k] for c in d["cores"])
    per_engine = sum(c[e][k] for c in d["cores"] for e in ("matrix", "vector", "dma", "noc"))
    assert d["total"][k] == per_core == per_engine, (k, d["total"][k], per_core, per_engine)
en = d["energy_j"]
parts = sum(en[p] for p in ("mac", "vector", "sram", "hbm", "noc", "static"))
assert abs(en["total"] - parts) <= 1e-5 * max(parts, 1e-30), (en["total"], parts)  # 6 digits printed
assert d["total"]["flops"] > 0 and d["total"]["hbm_bytes"] > 0 and d["total"]["noc_byte_hops"] > 0
assert d["total"]["errors"] == 0 and d["chip_time_ps"] > 0
print("check_stats: %d cores, %d descriptors, %.3g J, totals consistent"
      % (len(d["cores"]), d["total"]["descs"], en["total"]))
PY
