/* SPDX-License-Identifier: MIT */
/*
 * Which part of a weight tensor each rank holds (npu_image.h): the one rule that the planner
 * writes the tensor table with and the control core's image check holds the table to
 * (npu_image_model.c), so that an image cannot give a rank a share the interpreter's
 * buffers were not laid out for.
 */
#include "npu_image.h"

#include <stdio.h>

#include "model_config.h"
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
    if (part == NPU_PART_EP && p->tp > 1 && model_tensor_is_expert(kind)) {
        /* the rank's slices of the layer's expert map, each in a block as wide as its
           widest (gate, up: rows; down: cols); over one rank (tp 1) the whole tensor, as
           the interpreter runs it */
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
    const uint32_t rows_p = part == NPU_PART_MN   ? p->tp
                            : part == NPU_PART_2D ? p->rect_rows
                                                  : 1; /* K; EP over tp 1 */
    const uint32_t cols_p = p->tp / rows_p;
    struct npu_share s = { .rank = r, .block0 = 0, .blocks = blocks };
    split(out, rows_p, r / cols_p, &s.row0, &s.rows);
    split(in, cols_p, r % cols_p, &s.col0, &s.cols);
    return s;
}

void npu_gemm_dims(const struct model_config *c, enum npu_gemm g, uint32_t *n, uint32_t *k)
{
    const uint32_t d = c->hidden_size, qd = c->num_heads * c->head_dim;
    const uint32_t kvd = c->num_kv_heads * c->head_dim;
    switch (g) {
    case NPU_GEMM_QKV: *n = kvd, *k = d; break; /* kvd <= qd: the narrowest of q, k, v */
    case NPU_GEMM_O: *n = d, *k = qd; break;
    case NPU_GEMM_FFN_UP: *n = c->intermediate_size, *k = d; break;
    case NPU_GEMM_FFN_DOWN: *n = d, *k = c->intermediate_size; break;
    case NPU_GEMM_EXP_UP: *n = c->moe_intermediate_size, *k = d; break;
    case NPU_GEMM_EXP_DOWN: *n = d, *k = c->moe_intermediate_size; break;
    default: *n = c->vocab_size, *k = d; break;
    }
}

bool npu_gemm_used(const struct model_config *c, enum npu_gemm g)
{
    if (g == NPU_GEMM_FFN_UP || g == NPU_GEMM_FFN_DOWN)
        return c->arch == MODEL_DENSE;
    if (g == NPU_GEMM_EXP_UP || g == NPU_GEMM_EXP_DOWN)
        return c->arch == MODEL_MOE;
    return true;
}

int npu_partition_fits(const struct model_config *c, const struct npu_plan *p, enum npu_gemm g,
                       char *err, size_t errlen)
{
    const uint32_t part = p->partition[g], q = c->num_heads * c->head_dim;
    if (!npu_gemm_used(c, g) || part == NPU_PART_EP)
        return NPU_OK; /* EP: whole experts per rank, nothing split */
    uint32_t n, k;
    npu_gemm_dims(c, g, &n, &k);
    if (part == NPU_PART_2D) {
        const uint32_t R = p->rect_rows, C = p->rect_cols;
        if (n % R || (g == NPU_GEMM_QKV && q % R)) {
            snprintf(err, errlen, "%s: the %s GEMM's N dimension (%u) is not a multiple of "
                     "the grid's %u rows (tp %u as %ux%u): 2-D row blocks must be equal for "
                     "the column all-gather", c->name, npu_gemm_name(g), n % R ? n : q, R,
                     p->tp, R, C);
            return NPU_ERR_RANGE;
        }
        if (k % C) {
            snprintf(err, errlen, "%s: the %s GEMM's K dimension (%u) is not a multiple of "
                     "the grid's %u columns (tp %u as %ux%u): 2-D column blocks must be equal",
                     c->name, npu_gemm_name(g), k, C, p->tp, R, C);
            return NPU_ERR_RANGE;
        }
        return NPU_OK;
    }
    if (part == NPU_PART_MN && p->tp > 1 && (n % p->tp || (g == NPU_GEMM_QKV && q % p->tp))) {
        snprintf(err, errlen, "%s: the %s GEMM's N dimension (%u) is not a multiple of tp %u: "
                 "MN shares must be equal for the all-gather (use --partition %s=k)", c->name,
                 npu_gemm_name(g), g == NPU_GEMM_QKV && q % p->tp ? q : n, p->tp,
                 npu_gemm_name(g));
        return NPU_ERR_RANGE;
    }
    const uint32_t dim = part == NPU_PART_MN ? n : k;
    if (dim < p->tp) {
        snprintf(err, errlen, "%s: the %s GEMM's %s dimension (%u) cannot be split %u ways "
                 "(tp)", c->name, npu_gemm_name(g), part == NPU_PART_MN ? "N" : "K", dim,
                 p->tp);
        return NPU_ERR_RANGE;
    }
    return NPU_OK;
}
