# SPDX-License-Identifier: MIT
# The fuzz harnesses' replay build (tests/fuzz/CMakeLists.txt): the host libraries that read
# outside input and the harnesses, under gcc's AddressSanitizer and UBSan, as a sub-build so
# that the rest of the host build stays uninstrumented. The test suite replays the corpora
# with it (tests/fuzz/corpus, docs/testing.md "Fuzzing"); campaigns build the same folder
# with clang's libFuzzer instead (tests/fuzz/campaign.sh).
option(NPU_FUZZ_REPLAY "build the fuzz harnesses under sanitizers and replay their corpora in the tests" ON)
if(NOT NPU_FUZZ_REPLAY)
  return()
endif()
set(NPU_FUZZ_BUILD_DIR ${CMAKE_BINARY_DIR}/fuzz)
ExternalProject_Add(fuzz
  SOURCE_DIR ${CMAKE_SOURCE_DIR}/tests/fuzz
  BINARY_DIR ${NPU_FUZZ_BUILD_DIR}
  CMAKE_GENERATOR Ninja
  CMAKE_ARGS
    -DCMAKE_C_COMPILER=${CMAKE_C_COMPILER}
    -DCMAKE_BUILD_TYPE=
    -DNPU_ROOT=${CMAKE_SOURCE_DIR}
    -DNPU_GEN_DIR=${NPU_GEN_DIR}
    -DNPU_FUZZ_ENGINE=replay
  INSTALL_COMMAND ""
  BUILD_ALWAYS ON
  USES_TERMINAL_BUILD ON
  DEPENDS npu_regs_gen)
