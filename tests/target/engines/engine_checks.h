/* SPDX-License-Identifier: MIT */
/* The engine checks every NPU core runs in the `engines` test image. */
#ifndef ENGINE_CHECKS_H
#define ENGINE_CHECKS_H

#include "core_checks.h"

enum engine_check {
    ECHECK_DMA_DATA,   /* SRAM -> HBM -> SRAM round trip, contiguous and 2-D strided */
    ECHECK_DMA_TIME,   /* a lone transfer takes command cost + bytes / bandwidth + latency */
    ECHECK_GEMM_DATA,  /* bf16 and fp32 GEMMs with odd shapes match the hart's reference */
    ECHECK_VECTOR,     /* RMSNorm, softmax, SwiGLU, top-k match the hart's reference */
    ECHECK_OVERLAP,    /* a GEMM and a DMA submitted together end at the later of the two */
    ECHECK_NOC,        /* a NoC write lands in the next core's SRAM and signals it */
    ECHECK_NOC_RM,     /* NoC read of the next core's SRAM; multicast from core 0 to all */
    ECHECK_WAIT,       /* a descriptor waits for its semaphore before it starts */
    ECHECK_BAD,        /* a descriptor outside SRAM/HBM is refused and nothing is queued */
    ECHECK__COUNT
};

static const char *const echeck_names[ECHECK__COUNT] = {
    [ECHECK_DMA_DATA] = "DMA SRAM -> HBM -> SRAM round trip, contiguous and 2-D strided",
    [ECHECK_DMA_TIME] = "a lone DMA takes command cost + bytes / HBM bandwidth + latency",
    [ECHECK_GEMM_DATA] = "GEMMs (bf16->fp32, bf16->bf16, fp32, transposes, accumulate) match "
                         "the reference exactly",
    [ECHECK_VECTOR] = "vector RMSNorm, softmax, SwiGLU (bf16 out) and top-k match the hart's "
                      "reference (relative 1e-6; top-k exact)",
    [ECHECK_OVERLAP] = "a GEMM and a DMA submitted together end when the longer one ends; "
                       "FLOPS and MATRIX_BUSY_PS counters account for a GEMM",
    [ECHECK_NOC] = "a NoC write lands in the next core's SRAM and increments its semaphore",
    [ECHECK_NOC_RM] = "a NoC read fetches the next core's SRAM; core 0's multicast reaches "
                      "every core and increments each one's semaphore",
    [ECHECK_WAIT] = "a descriptor waits for its semaphore before starting and raises "
                    "IRQ_STATUS.ENGINE when done",
    [ECHECK_BAD] = "a descriptor outside SRAM and HBM is refused; nothing is queued",
};

/* Start of this core's data area in SRAM, past the image, 64 KiB aligned. */
uint64_t engines_data_base(void);
int check_gemm_data(void);
int check_vector_data(void);

#endif
