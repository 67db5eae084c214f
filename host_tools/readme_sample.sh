#!/bin/sh
# SPDX-License-Identifier: MIT
# The README's sample output of `./npuctl serve`, made by running it: the lines between the
# README's markers are replaced with what the command prints now (its report, from the
# `serve:` line to the `outputs:` line; the source tree's path shown as `...`).
#   host_tools/readme_sample.sh [--check] [NPUCTL]
# --check changes nothing and exits 1 (with the difference) when the README is out of date;
# CTest's readme.sample runs it so. Chip time is deterministic, so the sample is exact.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
check=0
[ "${1:-}" = --check ] && { check=1; shift; }
npuctl=${1:-$root/npuctl}
case $npuctl in /*) ;; *) npuctl=$(pwd)/$npuctl ;; esac
readme=$root/README.md
begin='<!-- sample: ./npuctl serve (host_tools/readme_sample.sh writes what follows) -->'
end='<!-- end of sample -->'
grep -qxF "$begin" "$readme" && grep -qxF "$end" "$readme" ||
    { echo "readme_sample: $readme lacks the sample's markers" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && "$npuctl" serve >out.txt 2>&1) ||
    { tail -n 20 "$tmp/out.txt" >&2; echo "readme_sample: npuctl serve failed" >&2; exit 2; }
{
    echo '```'
    sed -n '/^serve: tiny-moe/,/^outputs:/p' "$tmp/out.txt" | sed "s|$root/|.../|g"
    echo '```'
} >"$tmp/sample.txt"
[ "$(wc -l <"$tmp/sample.txt")" -gt 5 ] || { echo "readme_sample: no report" >&2; exit 2; }
awk -v b="$begin" -v e="$end" -v f="$tmp/sample.txt" '
    $0 == b { print; while ((getline l < f) > 0) print l; skip = 1; next }
    $0 == e { skip = 0 }
    !skip { print }' "$readme" >"$tmp/README.md"
if [ "$check" = 1 ]; then
    diff -u "$readme" "$tmp/README.md" && echo "readme_sample: the README's sample is current"
    exit $?
fi
cp "$tmp/README.md" "$readme"
echo "readme_sample: $readme's sample written"
