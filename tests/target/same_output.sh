#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Determinism check: runs `NPUCTL ARGS` with single-threaded and with multi-threaded TCG and
# requires byte-identical console output (chip times included) and the same exit status.
set -uo pipefail
npuctl="$1"; shift
a=$(mktemp) b=$(mktemp)
trap 'rm -f "$a" "$b"' EXIT
"$npuctl" "$@" --threads single >"$a" 2>/dev/null </dev/null; ra=$?
"$npuctl" "$@" --threads multi >"$b" 2>/dev/null </dev/null; rb=$?
cat "$b"
if [ "$ra" != "$rb" ] || ! cmp -s "$a" "$b"; then
  echo "same_output: single-threaded (exit $ra) and multi-threaded (exit $rb) runs differ:"
  diff "$a" "$b" | head -n 40
  exit 1
fi
[ -s "$b" ] || { echo "same_output: no output"; exit 1; }
echo "same_output: identical output ($(wc -l <"$b") lines), exit $ra"
exit 0
