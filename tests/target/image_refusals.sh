#!/bin/sh
# SPDX-License-Identifier: MIT
# Bad plans, images and requests are refused with a message naming what is wrong
# (docs/images.md, "Refusals"):  image_refusals.sh NPUCTL CASE
# Plan refusals exit 2 from npuctl build-image; image refusals come from the control core
# (exit 1) before any core is released, so no core prints anything; request refusals come
# from the cores (exit 1).
set -eu
npuctl=$1 case=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dense=$root/models/tiny/tiny-dense.toml

# expect STATUS REGEX CMD...: CMD exits STATUS and prints a line matching REGEX.
. "$(dirname "$0")/lib/expect.sh"

# A good image of tiny-dense on mesh-2x2, one core, room for 2 requests of 16 positions.
good() {
    "$npuctl" build-image --model "$dense" --chip mesh-2x2 --tp 1 --max-batch 2 --max-seq 16 \
        --max-tokens 32 -o "$tmp/good.img" > /dev/null
}

# The control core refused the image: no core may have run.
never_released() {
    if grep -q "MODEL req=\|MODEL error\|c0(0,0)" "$tmp/out.txt"; then
        echo "image_refusals $case: a core ran after the image was refused" >&2
        cat "$tmp/out.txt" >&2
        exit 1
    fi
}

case $case in
no-stages)
    expect 2 "tiny-dense: 4 layers do not split into 3 pipeline stages" \
        "$npuctl" build-image --model "$dense" --chip mesh-2x2 --stages 3 -o "$tmp/x.img" ;;
stages-cores)
    expect 2 "tp 4 x 2 stage\(s\) needs more cores than mesh-2x2 has \(4\)" \
        "$npuctl" build-image --model "$dense" --chip mesh-2x2 --tp 4 --stages 2 -o "$tmp/x.img" ;;
ep-half)
    expect 2 "partition: expert_up and expert_down must both be ep" \
        "$npuctl" build-image --model "$root/models/tiny/tiny-moe.toml" --chip mesh-2x2 \
        --partition expert_up=ep -o "$tmp/x.img" ;;
ep-dense)
    expect 2 "partition ep: tiny-dense has no experts" \
        "$npuctl" build-image --model "$dense" --chip mesh-2x2 --partition ep -o "$tmp/x.img" ;;
ep-not-expert)
    expect 2 "partition of qkv: ep applies to the expert GEMMs only" \
        "$npuctl" build-image --model "$dense" --chip mesh-2x2 --partition qkv=ep \
        -o "$tmp/x.img" ;;
tp-not-rectangle)
    expect 2 "tp 3 is not a rectangle of the 2x2 mesh" \
        "$npuctl" build-image --model "$dense" --chip mesh-2x2 --tp 3 -o "$tmp/x.img" ;;
mn-unequal)
    expect 2 "the qkv GEMM's N dimension \(128\) is not a multiple of tp 12" \
        "$npuctl" build-image --model "$dense" --chip mesh-4x4 --tp 12 --partition mn \
        -o "$tmp/x.img" ;;
2d-not-mesh2d)
    expect 2 "tiny-dense: the qkv GEMM's 2-D partition needs --placement mesh2d \(its 2x2 grid of ranks is a mesh2d group's, whose rows and columns the collectives run along\); the placement is ring" \
        "$npuctl" build-image --model "$dense" --chip mesh-2x2 --partition 2d --placement ring \
        -o "$tmp/x.img" ;;
2d-rows-unequal)
    expect 2 "tiny-dense: the qkv GEMM's N dimension \(64\) is not a multiple of the grid's 3 rows \(tp 12 as 3x4\)" \
        "$npuctl" build-image --model "$dense" --chip mesh-4x4 --tp 12 --partition 2d \
        --placement mesh2d -o "$tmp/x.img" ;;
2d-cols-unequal)
    sed 's/^intermediate_size = .*/intermediate_size = 250/' "$dense" > "$tmp/ffn250.toml"
    expect 2 "tiny-dense: the ffn_down GEMM's K dimension \(250\) is not a multiple of the grid's 4 columns \(tp 8 as 2x4\)" \
        "$npuctl" build-image --model "$tmp/ffn250.toml" --chip mesh-4x4 --tp 8 --partition 2d \
        --placement mesh2d -o "$tmp/x.img" ;;
too-large)
    expect 2 "qwen3-4b on mesh-2x2: the tile buffers \(tile_rows 8\) need [0-9.]+ MiB of SRAM per core, [0-9.]+ MiB are free" \
        "$npuctl" build-image --model qwen3-4b --chip mesh-2x2 --max-seq 64 -o "$tmp/x.img" ;;
hbm-too-small)
    expect 2 "tiny-moe on mesh-2x2: weights \([0-9.]+ MiB\), KV cache, spilled residuals and MoE rows need [0-9.]+ MiB of HBM, the chip has 64.0" \
        "$npuctl" build-image --model tiny-moe --chip mesh-2x2 --max-seq 1024 --max-batch 32 -o "$tmp/x.img" ;;
small-sram)
    # 64 KiB of SRAM (the config's least) is less than the NoC driver's mailboxes of a 2x2
    # mesh: the free SRAM is 0, not a wrapped subtraction that let an impossible plan through
    sed 's/^sram_bytes *=.*/sram_bytes = 0x1_0000/' "$root/models/chips/mesh-2x2.toml" \
        > "$tmp/small.toml"
    expect 2 "tiny-moe on mesh-2x2: the tile buffers \(tile_rows [0-9]+\) need [0-9.]+ MiB of SRAM per core, 0.00 MiB are free" \
        "$npuctl" build-image --model tiny-moe --chip "$tmp/small.toml" -o "$tmp/x.img" ;;
too-deep)
    # past npu_limits.h's layers and experts: the planner refuses (the cores would after
    # the release)
    sed 's/^num_layers *=.*/num_layers = 200/' "$dense" > "$tmp/deep.toml"
    expect 2 "200 layers and 0 experts; the interpreter takes at most 128 and 128" \
        "$npuctl" build-image --model "$tmp/deep.toml" --chip large-64 -o "$tmp/x.img"
    sed 's/^num_experts *=.*/num_experts = 200/' "$root/models/tiny/tiny-moe.toml" \
        > "$tmp/wide.toml"
    expect 2 "4 layers and 200 experts; the interpreter takes at most 128 and 128" \
        "$npuctl" build-image --model "$tmp/wide.toml" --chip large-64 -o "$tmp/x.img" ;;
small-dram)
    # a control-core DRAM below NPU_DRAM_MIN_BYTES is refused with the file, line and field
    sed 's/^dram_bytes *=.*/dram_bytes = 0x10_0000/' "$root/models/chips/mesh-2x2.toml" \
        > "$tmp/small.toml"
    expect 2 "small.toml:[0-9]+: field 'dram_bytes' = 1048576 is out of range \[33554432, " \
        "$npuctl" build-image --model tiny-moe --chip "$tmp/small.toml" -o "$tmp/x.img" ;;
missing-field)
    grep -v '^hidden_size' "$dense" > "$tmp/broken.toml"
    expect 2 "broken.toml.*hidden_size" \
        "$npuctl" build-image --model "$tmp/broken.toml" --chip mesh-2x2 -o "$tmp/x.img" ;;
truncated)
    good
    head -c 100000 "$tmp/good.img" > "$tmp/cut.img"
    expect 1 "MODEL image refused: truncated: 100000 bytes, the header says [0-9]+" \
        "$npuctl" flash "$tmp/cut.img" -- -append "prompt=1,2 new=2"
    never_released ;;
corrupt)
    good
    cp "$tmp/good.img" "$tmp/bad.img"
    printf '\377' | dd of="$tmp/bad.img" bs=1 seek=70000 conv=notrunc 2> /dev/null
    expect 1 "MODEL image refused: checksum 0x[0-9a-f]+, the header says 0x[0-9a-f]+ \(the image is corrupt\)" \
        "$npuctl" flash "$tmp/bad.img" -- -append "prompt=1,2 new=2"
    never_released ;;
crafted)
    # a valid checksum over wrong contents (issue 26): the config says 64 wide, the tensors
    # are 128; the structure check passes, the control core's check against the model
    # refuses before any core is released (tests/host/test_image_model.c has the full set)
    good
    python3 - "$tmp/good.img" "$tmp/bad.img" <<'EOF'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
at = b.find(b"hidden_size = 128")
assert at > 0
b[at:at + 17] = b"hidden_size =  64"
b[24:32] = bytes(8)                       # npu_image_header.checksum, counted as 0
h = 0xcbf29ce484222325
for x in b:                               # FNV-1a 64 (npu_image_checksum)
    h = ((h ^ x) * 0x100000001b3) & 0xffffffffffffffff
b[24:32] = struct.pack("<Q", h)
open(sys.argv[2], "wb").write(b)
EOF
    expect 1 "MODEL image refused: tensor [0-9]+ \\(kind [0-9]+, layer [0-9]+, rank [0-9]+\\): .* tiny-dense's plan gives" \
        "$npuctl" flash "$tmp/bad.img" -- -append "prompt=1,2 new=2"
    never_released ;;
other-chip)
    good
    expect 1 "MODEL image refused: image built for chip mesh-2x2, this chip is mesh-4x4: mesh_rows 2 != 4" \
        "$npuctl" flash "$tmp/good.img" --chip mesh-4x4 -- -append "prompt=1,2 new=2"
    never_released ;;
other-mode)
    good
    expect 1 "MODEL image refused: a functional image on a machine in performance mode" \
        "$npuctl" flash "$tmp/good.img" --mode performance -- -append "prompt=1,2 new=2"
    never_released ;;
instances)
    "$npuctl" build-image --model "$dense" --chip mesh-2x2 --tp 2 --instances 2 --max-batch 2 \
        --max-seq 16 -o "$tmp/two.img" > /dev/null
    expect 1 "MODEL image refused: 2 instances: the model image runs one" \
        "$npuctl" flash "$tmp/two.img" -- -append "prompt=1,2 new=2"
    never_released ;;
instances-bands)
    expect 2 "3 instances: the 2 columns of mesh-2x2 do not split into that many bands" \
        "$npuctl" build-image --model "$dense" --chip mesh-2x2 --instances 3 -o "$tmp/x.img" ;;
attn-block)
    expect 2 "attn_block 40 is not a multiple of kv_block 16" \
        "$npuctl" build-image --model "$dense" --chip mesh-2x2 --kv-block 16 --attn-block 40 \
        -o "$tmp/x.img" ;;
bad-token)
    good
    expect 1 "MODEL error: request 0: prompt token 1 = 600 is not below vocab_size 512" \
        "$npuctl" flash "$tmp/good.img" -- -append "prompt=1,600 new=2" ;;
too-long)
    good
    expect 1 "MODEL error: request 0: prompt of 10 tokens plus 10 new passes the plan's max_seq \(16\)" \
        "$npuctl" flash "$tmp/good.img" -- -append "prompt=1,2,3,4,5,6,7,8,9,10 new=10" ;;
too-many)
    good
    expect 1 "MODEL error: 3 requests; the image's plan takes max_batch 2" \
        "$npuctl" flash "$tmp/good.img" -- -append "prompt0=1 prompt1=2 prompt2=3 new=2" ;;
*)
    echo "image_refusals: unknown case $case" >&2
    exit 2 ;;
esac
