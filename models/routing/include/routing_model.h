/* SPDX-License-Identifier: MIT */
/*
 * The routing model of performance mode (docs/images.md, "Routing without activations"):
 * where the router has no real activations to score, each row's top-k experts are drawn
 * from a seeded distribution, the same on the host and the chip (integer draws over a table
 * built with this file's own exp/log, no libm, no fused multiply-adds).
 *
 * Uniform: every expert equally likely. Skewed: expert popularity follows a Zipf law with
 * exponent alpha (weight of the i-th most popular expert proportional to 1 / i^alpha), the
 * popularity order rotated per layer, so some experts are hot in each layer as the
 * layered-prefill paper's Table 1 measures on real traces. A row's k experts are distinct,
 * drawn without replacement; the draw depends only on (seed, layer, request, position), not
 * on how the rows are batched.
 */
#ifndef ROUTING_MODEL_H
#define ROUTING_MODEL_H

#include <stdint.h>

#define ROUTING_EXPERTS_MAX 256u

struct routing_model {
    uint32_t experts, k;
    uint32_t skew_milli;   /* 0: uniform */
    uint64_t seed;
};

/* Cumulative popularity of layer l's experts: cum[e] = sum of weights of experts 0..e. */
void routing_layer_table(const struct routing_model *rm, uint32_t layer, uint64_t *cum);

/* Turns cum, the table of from_layer, into the table of `layer`: the same table as
   routing_layer_table gives, in O(experts) integer steps (the layers' tables hold the same
   weights, rotated). Why: the table's exp/log cost a chip core thousands of emulated
   floating-point operations per layer it routes. */
void routing_layer_table_rotate(const struct routing_model *rm, uint32_t from_layer,
                                uint32_t layer, uint64_t *cum);

/* The k distinct experts of the row of request `req` at position `pos` in layer l. */
void routing_draw(const struct routing_model *rm, const uint64_t *cum, uint32_t layer,
                  uint32_t req, uint32_t pos, uint32_t *experts);

#endif
