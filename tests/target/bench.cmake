# SPDX-License-Identifier: MIT
# Smoke tests of `npuctl bench` (docs/benchmarks.md), included by tests/target/CMakeLists.txt
# on the host side (it uses npu_target_test and NPUCTL from there). Each runs the reduced
# variant (--quick) and checks that the table and the summary lines are printed, not the
# values of the figures: how fast or efficient the chip is belongs to the benchmarks, not
# to the tests.

npu_target_test(bench.gemm EXIT 0 TIMEOUT 120
  EXPECT "^npuctl bench gemm: chip large-64, 8x8 mesh, .* performance mode"
         "^ +M +N +K +tiles +measured us +bound us +formula us +util$"
         "^ +4096 +4096 +4096 +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+$"
         "^large GEMMs, M, N, K >= 1024 \\([0-9]+ shapes\\): min utilisation [0-9.]+ at [0-9x]+ \\(target >= 0.90\\): (met|NOT met)$"
         "^measured = formula: [0-9]+ of [0-9]+ shapes$"
  CMD ${NPUCTL} bench gemm --quick --timeout 100)

npu_target_test(bench.dma EXIT 0 TIMEOUT 120
  EXPECT "^npuctl bench dma: chip large-64, .* performance mode"
         "^case +cores +direction +bytes +rows +measured us +transfer us +latency us +eff"
         "^single +1 +hbm>sram +1048576 "
         "^multi +64 +"
         "^transfers >= 1 MiB: min efficiency [0-9.]+ at [0-9]+ bytes \\(target >= 0.95 of hbm_gbps\\): (met|NOT met)$"
         "^64 cores at once, [0-9]+ bytes each: .* per-core bandwidth (holds|does NOT hold)$"
  CMD ${NPUCTL} bench dma --quick --timeout 100)

npu_target_test(bench.noc EXIT 0 TIMEOUT 120
  EXPECT "^npuctl bench noc: chip large-64, .* performance mode"
         "^case +flows +src>dst +hops +bytes +measured ns +bound ns +share +ratio"
         "^latency   per hop \\(slope from 1 to 14 hops\\): [0-9.]+ ns measured, noc_hop_cycles x cycle = [0-9.]+ ns: (matches|DIFFERS)$"
         "^bandwidth [0-9]+ bytes to a neighbour: [0-9.]+ GB/s end to end"
         "^shared2 +\\(two writes share a link\\): .*: (matches|DIFFERS)$"
         "^separate +\\(two writes on disjoint links\\): .*: (matches|DIFFERS)$"
  CMD ${NPUCTL} bench noc --quick --timeout 100)

# --quick: 4 and 16 cores, 1 KiB, 64 KiB and 4 MiB.
npu_target_test(bench.collectives EXIT 0 TIMEOUT 180
  EXPECT "^npuctl bench collectives: chip large-64, 8x8 mesh, .* performance mode"
         "^op +placement +p +bytes +measured us +bw bound us +lat bound us +eff$"
         "^allreduce +ring +16 +4194304 "
         "^allgather +p=16 +4194304 bytes: "
         "^ring placement, messages >= 4 MiB \\([0-9]+ cases\\): min eff [0-9.]+ .*: (met|NOT met)$"
  CMD ${NPUCTL} bench collectives --quick --timeout 150)

# --quick in functional mode: every receiver checks every element it got (and every sender
# what N2M brought back), so a wrong block fails the run: M = N = 8 at 16 and 256 KiB a
# pair, M = N = 4 at 256 KiB, between two core sets (a pair group).
npu_target_test(bench.m2n EXIT 0 TIMEOUT 240
  EXPECT "^npuctl bench m2n: chip large-64, 8x8 mesh, .* functional mode"
         "^op +M +N +bytes +measured us +bw bound us +lat bound us +GB/s +eff$"
         "^m2n +8 +8 +262144 "
         "^n2m +4 +4 +262144 "
         "^alltoallv +8 +8 +16384 "
         "^  M=8 N=8 +262144 bytes: [0-9.]+ "
  CMD ${NPUCTL} bench m2n --quick --mode functional --timeout 200)

# --quick: the 4x4 mesh only, one run per point, a few thousand commands.
npu_target_test(bench.host EXIT 0 TIMEOUT 180
  EXPECT "^npuctl bench host: host wall-clock time per engine command"
         "^mesh +mode +tcg +k +submits +commands +run s +base s +spread s +us/submit +us/command$"
         "^4x4 +functional +multi +16 +[0-9]+ +[0-9]+ "
         "^4x4 +performance +multi +16 +[0-9]+ +[0-9]+ "
         "^target \\(<= 2.0 us per command, performance mode, 16x16, chains\\): not measured in this run$"
  CMD ${NPUCTL} bench host --quick --timeout 150)

# The same image on another chip: the benchmarks adapt to its mesh and SRAM.
npu_target_test(bench.noc.mesh-4x4 EXIT 0 TIMEOUT 120
  EXPECT "^npuctl bench noc: chip mesh-4x4, 4x4 mesh"
         "^latency   per hop \\(slope from 1 to 6 hops\\)"
  CMD ${NPUCTL} bench noc --quick --chip mesh-4x4 --timeout 100)

npu_target_test(bench.unknown EXIT 2
  STDERR "npuctl: bench: unknown benchmark 'frob' \\(gemm, dma, noc, collectives, m2n or host[;] model right after bench\\)"
  CMD ${NPUCTL} bench frob)


# bench model on the tiny MoE model over a 4x4 mesh: the table, a measured row beside its
# bound, and the shapes the model cannot hold skipped with the reason.
npu_target_test(bench.model EXIT 0 TIMEOUT 120
  EXPECT "^bench model: tiny-moe on mesh-4x4 \\(performance\\), tp 16, 1 stage\\(s\\), routing uniform$"
         "^shape +chip ms +bound ms +matrix +hbm +x bound +floor ms +x floor +mat% +vec% +dma% +dma2% +noc%"
         "^prefill-512 +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+x +[0-9.]+ +[0-9.]+x +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ "
         "^decode-b8-ctx4k +skipped: 4098 positions pass tiny-moe's max_position 1024$"
  CMD ${NPUCTL} bench model --model tiny-moe --chip mesh-4x4 --tp 16 --timeout 100)
# under expert parallelism the row reports the MoE load: busiest rank over the mean rank,
# averaged over the layers (worst layer); skewed routing makes it more than 1
npu_target_test(bench.model.ep EXIT 0 TIMEOUT 120
  EXPECT "^shape +chip ms .* +MoE max/mean +attn/ffn"
         "^prefill-512 +[0-9.]+ .* ([1-9]|[1-9][0-9])[.][0-9][0-9] \\(([1-9]|[1-9][0-9])[.][0-9][0-9]\\) +[0-9.]+/"
  CMD ${NPUCTL} bench model --model tiny-moe --chip mesh-4x4 --tp 16 --partition ep
      --routing skewed:1.0 --shapes prefill-512 --timeout 100)
foreach(t gemm dma noc collectives host noc.mesh-4x4 model model.ep)
  set_tests_properties(target.bench.${t} PROPERTIES LABELS "target;bench")
endforeach()

# The model image's context= holds positions it never computed: refused in functional mode.
npu_target_test(model.context-functional EXIT 1
  EXPECT "MODEL error: context=8 needs a performance-mode image"
  CMD ${CMAKE_CURRENT_SOURCE_DIR}/model_context.sh ${NPUCTL})
