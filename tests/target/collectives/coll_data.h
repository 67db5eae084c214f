/* SPDX-License-Identifier: MIT */
/* Test data and the host-side (hart) reference of the collectives test. */
#ifndef COLL_DATA_H
#define COLL_DATA_H

#include <stdint.h>

#include "noc/placement.h"
#include "npu_enums.h"

/* Value `e` of the data labelled `label` (a rank, or a block label): k / 32 with |k| <= 127,
   exact in bf16 (8 significant bits), while most sums of two already round: the order of a
   bf16 reduction shows in its result. */
float coll_val(uint32_t label, uint64_t e);

void coll_store(uint64_t addr, uint64_t e, float v, enum npu_dtype dt);
float coll_load(uint64_t addr, uint64_t e, enum npu_dtype dt);
/* a + b as the vector engine's ADD computes it (fp32, then rounded to dt). */
float coll_add(float a, float b, enum npu_dtype dt);

/* The sum a 1-D ring over members labels[0..len) leaves in element e of the chunk of the
   member at position pos: labels[pos + 1] + labels[pos + 2] + ... + labels[pos]. */
float coll_ring_sum(const uint32_t *labels, uint32_t len, uint32_t pos, uint64_t e,
                    enum npu_dtype dt);

/* The sum the ring reduction leaves in element e of the chunk of `owner`. */
float coll_reduced(const struct noc_group *g, uint32_t owner, uint64_t e, enum npu_dtype dt);

/* The rank whose chunk holds element e of `count` over `size` ranks. */
uint32_t coll_owner(uint64_t count, uint32_t size, uint64_t e);

#endif
