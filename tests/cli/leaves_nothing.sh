#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A refusal that must leave nothing behind: runs run_expect.sh (its exit status and message
# checks) in a fresh temporary directory, then checks that PATH, relative to that directory,
# was not made.
#   leaves_nothing.sh PATH RUN_EXPECT_ARGS... -- COMMAND ARGS...
set -uo pipefail
run_expect=$(cd "$(dirname "$0")/../target" && pwd)/run_expect.sh
path=$1
shift
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
"$run_expect" "$@"
rc=$?
if [ -e "$path" ]; then
  echo "leaves_nothing: the refused command made $path"
  rc=1
fi
exit $rc
