#!/bin/sh
# SPDX-License-Identifier: MIT
# A fuzzing campaign (docs/testing.md, "Fuzzing"):  tests/fuzz/campaign.sh HARNESS SECONDS
# HARNESS is trace, config, image, blob or args. Builds the harnesses with clang's libFuzzer,
# AddressSanitizer and UBSan in build-fuzz/ (beside build/), runs HARNESS for SECONDS on
# its corpus (tests/fuzz/corpus/HARNESS, read only; new inputs go to
# build-fuzz/corpus-HARNESS) and prints libFuzzer's final statistics. A finding is written
# to build-fuzz/crash-*, leak-* or timeout-* and ends the run with a non-zero status; to keep
# it as a regression input, copy it into the corpus.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
harness=${1:?usage: campaign.sh HARNESS SECONDS} secs=${2:?usage: campaign.sh HARNESS SECONDS}
out=${NPU_FUZZ_DIR:-$root/build-fuzz}
command -v clang > /dev/null || { echo "campaign.sh: clang is not installed (apt-get install clang)" >&2; exit 2; }
mkdir -p "$out/generated" "$out/corpus-$harness"
python3 "$root/hal/regspec/gen_regs.py" --spec "$root/hal/regspec/npu_regs.toml" \
    --out "$out/generated" --only firmware
cmake -S "$root/tests/fuzz" -B "$out" -G Ninja -DCMAKE_C_COMPILER=clang \
    -DNPU_ROOT="$root" -DNPU_GEN_DIR="$out/generated" -DNPU_FUZZ_ENGINE=libfuzzer > /dev/null
ninja -C "$out" "fuzz_$harness" > /dev/null
cd "$out"
exec "./fuzz_$harness" -max_total_time="$secs" -print_final_stats=1 -timeout=10 \
    -rss_limit_mb=2048 "corpus-$harness" "$root/tests/fuzz/corpus/$harness"
