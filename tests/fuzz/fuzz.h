/* SPDX-License-Identifier: MIT */
/*
 * The fuzz harnesses' entry point (libFuzzer's): one input, any bytes. Each harness feeds
 * one reader of outside input and returns 0; a crash, a leak or undefined behaviour is the
 * finding (the sanitizers report it). Built twice (tests/fuzz/CMakeLists.txt): with
 * replay_main.c under gcc's AddressSanitizer and UBSan, to replay the corpora in the test
 * suite, and with clang's libFuzzer for campaigns (tests/fuzz/campaign.sh).
 */
#ifndef NPU_FUZZ_H
#define NPU_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
