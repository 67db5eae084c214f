#!/bin/sh
# SPDX-License-Identifier: MIT
# A functional-mode model image asked to start its requests at a held context (bootarg
# context=, performance mode only): the cores refuse it.   model_context.sh NPUCTL
set -eu
npuctl=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$npuctl" build-image --model tiny-dense --chip mesh-2x2 --tp 1 --max-seq 64 -o "$tmp/f.img" >/dev/null
exec "$npuctl" flash "$tmp/f.img" --timeout 60 -- -append "prompt_len=4 context=8 new=1"
