#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs a command and checks its exit status and output.
#   run_expect.sh --exit N [--expect REGEX]... [--stderr REGEX]... -- COMMAND ARGS...
# --expect patterns must match stdout (the chip console), --stderr patterns stderr
# (guest errors, start-up errors). Extended regular expressions, one line each.
set -uo pipefail
want_exit="" expects=() errs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --exit) want_exit="$2"; shift 2 ;;
    --expect) expects+=("$2"); shift 2 ;;
    --stderr) errs+=("$2"); shift 2 ;;
    --) shift; break ;;
    *) echo "run_expect.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
"$@" >"$out" 2>"$err" </dev/null
rc=$?
cat "$out"
sed 's/^/stderr: /' "$err" | head -n 200
fail=0
if [ "$rc" != "$want_exit" ]; then
  echo "run_expect: exit status $rc, expected $want_exit"; fail=1
fi
for re in "${expects[@]}"; do
  grep -Eq -- "$re" "$out" || { echo "run_expect: stdout lacks /$re/"; fail=1; }
done
for re in "${errs[@]}"; do
  grep -Eq -- "$re" "$err" || { echo "run_expect: stderr lacks /$re/"; fail=1; }
done
exit $fail
