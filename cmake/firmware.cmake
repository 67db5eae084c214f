# SPDX-License-Identifier: MIT
# newlib (cached build) and the cross-compiled firmware sub-build (firmware/CMakeLists.txt).
include(ExternalProject)

set(NPU_NEWLIB ${CMAKE_BINARY_DIR}/newlib-sysroot)
add_custom_target(newlib
  COMMAND ${CMAKE_SOURCE_DIR}/hal/newlib/build-newlib.sh --cache ${NPU_CACHE_DIR}
          --out ${NPU_NEWLIB}
  BYPRODUCTS ${NPU_NEWLIB}
  USES_TERMINAL
  COMMENT "newlib 3.3 for riscv64-unknown-elf (cached)")

set(NPU_FIRMWARE_BUILD ${CMAKE_BINARY_DIR}/firmware)
set(NPU_IMAGES_DIR ${NPU_FIRMWARE_BUILD}/images)
ExternalProject_Add(firmware
  SOURCE_DIR ${CMAKE_SOURCE_DIR}/firmware
  BINARY_DIR ${NPU_FIRMWARE_BUILD}
  CMAKE_GENERATOR Ninja
  CMAKE_ARGS
    -DCMAKE_TOOLCHAIN_FILE=${CMAKE_SOURCE_DIR}/cmake/riscv64-npu.cmake
    -DCMAKE_BUILD_TYPE=RelWithDebInfo
    -DNPU_ROOT=${CMAKE_SOURCE_DIR}
    -DNPU_NEWLIB=${NPU_NEWLIB}
    -DNPU_GEN_DIR=${NPU_GEN_DIR}
    -DNPU_IMAGES_DIR=${NPU_IMAGES_DIR}
    -DNPU_PYTHON=${Python3_EXECUTABLE}
  INSTALL_COMMAND ""
  BUILD_ALWAYS ON
  USES_TERMINAL_BUILD ON
  DEPENDS newlib npu_regs_gen)
