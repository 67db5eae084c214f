/* SPDX-License-Identifier: MIT */
/* Test data and the reference sums of the collectives test (coll_data.h). */
#include "coll_data.h"

#include "npu_numeric.h"

float coll_val(uint32_t label, uint64_t e)
{
    int32_t k = (int32_t)((label * 131u + (uint32_t)e * 31u + 7u) % 255u) - 127;
    return (float)k / 32.0f;
}

void coll_store(uint64_t addr, uint64_t e, float v, enum npu_dtype dt)
{
    if (dt == NPU_DTYPE_BF16)
        ((uint16_t *)(uintptr_t)addr)[e] = num_fp32_to_bf16(v);
    else
        ((float *)(uintptr_t)addr)[e] = v;
}

float coll_load(uint64_t addr, uint64_t e, enum npu_dtype dt)
{
    if (dt == NPU_DTYPE_BF16)
        return num_bf16_to_fp32(((const uint16_t *)(uintptr_t)addr)[e]);
    return ((const float *)(uintptr_t)addr)[e];
}

float coll_add(float a, float b, enum npu_dtype dt)
{
    volatile float s = a + b; /* one fp32 rounding, no fused or wider arithmetic */
    return dt == NPU_DTYPE_BF16 ? num_round_bf16(s) : s;
}

/* Ring order over `len` members starting after position `pos`: member(pos + 1), ... */
float coll_ring_sum(const uint32_t *labels, uint32_t len, uint32_t pos, uint64_t e,
                      enum npu_dtype dt)
{
    float acc = coll_val(labels[(pos + 1) % len], e);
    for (uint32_t k = 2; k <= len; k++)
        acc = coll_add(acc, coll_val(labels[(pos + k) % len], e), dt);
    return acc;
}

float coll_reduced(const struct noc_group *g, uint32_t owner, uint64_t e, enum npu_dtype dt)
{
    static uint32_t labels[NOC_GROUP_MAX];
    if (g->placement != NOC_PLACE_MESH2D) {
        for (uint32_t k = 0; k < g->size; k++)
            labels[k] = k;
        return coll_ring_sum(labels, g->size, owner, e, dt);
    }
    /* Columns first (row blocks, ring over the rows), then along the owner's row. */
    const uint32_t rows = g->grid_rows, cols = g->grid_cols;
    const uint32_t i = owner / cols, j = owner % cols;
    float acc = 0.0f;
    for (uint32_t k = 1; k <= cols; k++) {
        uint32_t col = (j + k) % cols;
        for (uint32_t r = 0; r < rows; r++)
            labels[r] = r * cols + col;
        float col_sum = coll_ring_sum(labels, rows, i, e, dt);
        acc = k == 1 ? col_sum : coll_add(acc, col_sum, dt);
    }
    return acc;
}

uint32_t coll_owner(uint64_t count, uint32_t size, uint64_t e)
{
    /* bound(r) = count * r / size <= e: r = floor(((e + 1) * size - 1) / count) at most. */
    uint32_t r = (uint32_t)(((e + 1) * size - 1) / count);
    while (r > 0 && count * r / size > e)
        r--;
    while (r + 1 < size && count * (r + 1) / size <= e)
        r++;
    return r;
}
