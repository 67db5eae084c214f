/* SPDX-License-Identifier: MIT */
/*
 * Which part of a weight tensor each rank holds (npu_image.h): the one rule that the planner
 * writes the tensor table with and the control core's image check holds the table to
 * (npu_image_model.c), so that an image cannot give a rank a share the interpreter's
 * buffers were not laid out for.
 */
#include "npu_image.h"

#include "model_weights.h"
#include "npu_enums.h"

int npu_tensor_gemm(uint32_t kind)
{
    switch (kind) {
    case MT_WQ: case MT_WK: case MT_WV: return NPU_GEMM_QKV;
    case MT_WO: return NPU_GEMM_O;
    case MT_W_GATE: case MT_W_UP: return NPU_GEMM_FFN_UP;
    case MT_W_DOWN: return NPU_GEMM_FFN_DOWN;
    case MT_E_GATE: case MT_E_UP: return NPU_GEMM_EXP_UP;
    case MT_E_DOWN: return NPU_GEMM_EXP_DOWN;
    case MT_LM_HEAD: return NPU_GEMM_LM_HEAD;
    default: return -1;
    }
}

/* Part k of n split in p: [*lo, *lo + *len). */
static void split(uint32_t n, uint32_t p, uint32_t k, uint32_t *lo, uint32_t *len)
{
    *lo = (uint32_t)((uint64_t)n * k / p);
    *len = (uint32_t)((uint64_t)n * (k + 1) / p) - *lo;
}

struct npu_share npu_tensor_share(uint32_t kind, uint32_t rows, uint32_t cols, uint32_t blocks,
                                  const struct npu_plan *p,
                                  const struct npu_image_expert_slice *slices,
                                  uint32_t nslices, uint32_t r)
{
    const int g = npu_tensor_gemm(kind);
    if (g < 0)
        return (struct npu_share){ NPU_IMAGE_IDLE, 0, 1, rows, cols, 0, 0 };
    const uint32_t out = rows / blocks, in = cols, part = p->partition[g];
    if (part == NPU_PART_EP) { /* the rank's slices of the layer's expert map, each in a
                                  block as wide as its widest (gate, up: rows; down: cols) */
        uint32_t at = 0, n = 0, most = 0;
        for (uint32_t i = 0; i < nslices; i++) {
            if (slices[i].rank == r)
                n++, most = slices[i].units > most ? slices[i].units : most;
            else if (slices[i].rank < r)
                at++;
        }
        const uint32_t U = p->expert_units, units = most ? most : U;
        const bool down = kind == MT_E_DOWN;
        return (struct npu_share){ r, at, n, down ? out : out / U * units,
                                   down ? in / U * units : in, 0, 0 };
    }
    const uint32_t rows_p = part == NPU_PART_MN ? p->tp : part == NPU_PART_2D ? p->rect_rows
                                                                               : 1;
    const uint32_t cols_p = p->tp / rows_p;
    struct npu_share s = { .rank = r, .block0 = 0, .blocks = blocks };
    split(out, rows_p, r / cols_p, &s.row0, &s.rows);
    split(in, cols_p, r % cols_p, &s.col0, &s.cols);
    return s;
}
