#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Heterogeneous PD disaggregation (docs/serving.md, "Heterogeneous decode cores"; the NPU
# paper, section 4.3.1): `serve_hetero.sh NPUCTL` serves the bundled trace (tiny-moe,
# functional, large-64, tp 4, four instances P D D P) with homogeneous cores, then with the
# decode instances' cores given a 4x4 systolic array and 4 vector lanes. Checks:
# - DIR/chip.toml lists exactly the decode instances' cores: instances are bands of two
#   columns and a tp-4 instance is a 2x2 block at rows 0-1, so instances 1 and 2 are
#   columns 2-5 of rows 0 and 1 of the 8x8 mesh: cores 2-5 and 10-13;
# - every request's tokens are the same (the engines' sizes change time, not results);
# - every TTFT is the same (prefill runs on base cores, and in this light trace no prefill
#   waits for a decode core);
# - every request's mean TBT is larger (decode runs on the smaller engines).
set -uo pipefail
npuctl="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args=(--sched pd-disagg --instances 4 --prefill-instances 2 --chunk 128)
"$npuctl" serve "${args[@]}" --out "$tmp/base" >"$tmp/base.txt" 2>&1 || {
    echo "serve_hetero: the base run failed"; tail -n 20 "$tmp/base.txt"; exit 1; }
"$npuctl" serve "${args[@]}" --decode-cores sa=4x4,vector_lanes=4 --out "$tmp/het" \
    >"$tmp/het.txt" 2>&1 || {
    echo "serve_hetero: the heterogeneous run failed"; tail -n 20 "$tmp/het.txt"; exit 1; }
fail=0
if ! grep -qx 'alt_cores = "2-5,10-13"' "$tmp/het/chip.toml"; then
    echo "serve_hetero: chip.toml does not name cores 2-5,10-13:"; grep alt_ "$tmp/het/chip.toml"
    fail=1
fi
if ! cmp -s <(cut -d, -f1,2,4 "$tmp/base/tokens.csv") <(cut -d, -f1,2,4 "$tmp/het/tokens.csv")
then
    echo "serve_hetero: the tokens differ"; fail=1
fi
# requests.csv: id, ..., ttft_ms (6), mean_tbt_ms (7), ..., generated (12)
awk -F, 'NR == FNR { if (FNR > 1) { ttft[$1] = $6; tbt[$1] = $7 }; next }
         FNR > 1 {
             n++
             if ($6 != ttft[$1]) { printf "request %s: TTFT %s ms, base %s ms\n", $1, $6, ttft[$1]; bad = 1 }
             if ($12 > 1 && !($7 > tbt[$1])) { printf "request %s: mean TBT %s ms, not above base %s ms\n", $1, $7, tbt[$1]; bad = 1 }
         }
         END { if (n != 16) { printf "%d requests, expected 16\n", n; bad = 1 }; exit bad }' \
    "$tmp/base/requests.csv" "$tmp/het/requests.csv" || fail=1
if [ "$fail" = 0 ]; then
    grep "TBT" "$tmp/base.txt" "$tmp/het.txt" | sed 's/^/serve_hetero: /'
fi
exit $fail
