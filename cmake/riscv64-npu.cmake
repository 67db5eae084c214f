# SPDX-License-Identifier: MIT
# CMake toolchain file for the npu-mesh firmware: Debian's riscv64-unknown-elf-gcc with the
# newlib built by hal/newlib/build-newlib.sh (NPU_NEWLIB, passed by the top-level build).
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR riscv64)
set(CMAKE_C_COMPILER riscv64-unknown-elf-gcc)
set(CMAKE_ASM_COMPILER riscv64-unknown-elf-gcc)
set(CMAKE_OBJCOPY riscv64-unknown-elf-objcopy)
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)

# medany: code and data are reached PC-relative, which is what lets one NPU-core image run
# from any core's SRAM after it relocates its few absolute data words (hal/src/start.S).
set(NPU_TARGET_ARCH "-march=rv64imafdc -mabi=lp64d -mcmodel=medany")
set(CMAKE_C_FLAGS_INIT "${NPU_TARGET_ARCH} -ffunction-sections -fdata-sections -fno-common")
set(CMAKE_ASM_FLAGS_INIT "${NPU_TARGET_ARCH}")
set(CMAKE_EXE_LINKER_FLAGS_INIT
    "${NPU_TARGET_ARCH} -nostartfiles -nostdlib -Wl,--gc-sections -Wl,--no-warn-rwx-segments")

set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
