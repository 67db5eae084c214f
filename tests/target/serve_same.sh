#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Serving determinism: `serve_same.sh NPUCTL SERVE-ARGS...` serves twice, with single- and
# with multi-threaded TCG, and requires byte-identical consoles (every SERVE line with its
# chip times, tokens included) and tokens.csv. Under pd-disagg the instances run
# concurrently, so this checks that what the control core reads is fixed by the chip clock.
set -uo pipefail
npuctl="$1"; shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$npuctl" serve "$@" --threads single --out "$tmp/a" >"$tmp/a.txt" 2>&1; ra=$?
"$npuctl" serve "$@" --threads multi --out "$tmp/b" >"$tmp/b.txt" 2>&1; rb=$?
if [ "$ra" != 0 ] || [ "$rb" != 0 ]; then
    echo "serve_same: runs failed (exit $ra, $rb):"; tail -n 20 "$tmp/a.txt" "$tmp/b.txt"; exit 1
fi
for f in console.log tokens.csv; do
    if ! cmp -s "$tmp/a/$f" "$tmp/b/$f"; then
        echo "serve_same: $f differs between single- and multi-threaded TCG:"
        diff "$tmp/a/$f" "$tmp/b/$f" | head -n 40
        exit 1
    fi
done
grep -c "SERVE iter" "$tmp/b/console.log" | sed 's/^/serve_same: identical consoles, iterations: /'
