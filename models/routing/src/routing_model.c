/* SPDX-License-Identifier: MIT */
/* Seeded expert choice for performance mode (routing_model.h). */
#include "routing_model.h"

#include <assert.h>

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* ln(x) for x >= 1 by x = m 2^e, m in [1, 2): ln m = 2 atanh((m - 1) / (m + 1)). Plain
   double arithmetic, so host and chip compute the same bits. */
static double ln_pos(double x)
{
    int e = 0;
    while (x >= 2.0)
        x *= 0.5, e++;
    double t = (x - 1.0) / (x + 1.0), t2 = t * t, term = t, sum = 0.0;
    for (int i = 1; i < 60; i += 2) {
        sum += term / i;
        term *= t2;
    }
    return 2.0 * sum + e * 0.69314718055994530942;
}

/* exp(x) for x <= 0: halve until small, Taylor, square back. */
static double exp_neg(double x)
{
    int halvings = 0;
    while (x < -0.5)
        x *= 0.5, halvings++;
    double term = 1.0, sum = 1.0;
    for (int i = 1; i < 20; i++) {
        term *= x / i;
        sum += term;
    }
    while (halvings--)
        sum *= sum;
    return sum;
}

/* Layer l's rotation of the popularity order. */
static uint32_t layer_rotation(const struct routing_model *rm, uint32_t layer)
{
    uint64_t s = rm->seed * 0x100000001b3ull + layer;
    return (uint32_t)(splitmix64(&s) % rm->experts);
}

void routing_layer_table(const struct routing_model *rm, uint32_t layer, uint64_t *cum)
{
    assert(rm->experts >= 1 && rm->experts <= ROUTING_EXPERTS_MAX);
    const uint32_t rot = layer_rotation(rm, layer);
    const double alpha = rm->skew_milli / 1000.0;
    uint64_t total = 0;
    for (uint32_t e = 0; e < rm->experts; e++) {
        uint32_t rank = (e + rot) % rm->experts; /* 0: the most popular */
        double w = alpha == 0.0 ? 1.0 : exp_neg(-alpha * ln_pos(rank + 1.0));
        total += 1 + (uint64_t)(w * 1099511627776.0); /* 2^40, at least 1 */
        cum[e] = total;
    }
}

void routing_layer_table_rotate(const struct routing_model *rm, uint32_t from_layer,
                                uint32_t layer, uint64_t *cum)
{
    assert(rm->experts >= 1 && rm->experts <= ROUTING_EXPERTS_MAX);
    const uint32_t n = rm->experts;
    const uint32_t shift = (layer_rotation(rm, layer) + n - layer_rotation(rm, from_layer)) % n;
    uint64_t w[ROUTING_EXPERTS_MAX]; /* from_layer's weight of each expert */
    for (uint32_t e = 0; e < n; e++)
        w[e] = cum[e] - (e ? cum[e - 1] : 0);
    /* Expert e of `layer` has popularity rank (e + rot) % n, which expert
       (e + rot - from_rot) % n has in from_layer: the same integer weight. */
    uint64_t total = 0;
    for (uint32_t e = 0; e < n; e++) {
        total += w[(e + shift) % n];
        cum[e] = total;
    }
}

/* First expert whose cumulative weight exceeds x (x < cum[experts - 1]). */
static uint32_t upper_bound(const uint64_t *cum, uint32_t experts, uint64_t x)
{
    uint32_t lo = 0, hi = experts - 1;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (cum[mid] > x)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* Why not a walk over the experts: this runs for every row of every tile on every core of
   the chip (k x experts steps each), which made it a large part of a performance run's
   host time. The draw is the same: u is an offset into the weight of the experts not yet
   taken, laid end to end in expert order; mapped back into the full table by stepping over
   the taken experts' intervals in ascending order, it lands in the same expert. */
void routing_draw(const struct routing_model *rm, const uint64_t *cum, uint32_t layer,
                  uint32_t req, uint32_t pos, uint32_t *experts)
{
    assert(rm->k >= 1 && rm->k <= rm->experts);
    uint64_t s = ((rm->seed * 0x9e3779b97f4a7c15ull + layer) * 0x100000001b3ull + req) *
                     0x100000001b3ull + pos;
    uint32_t taken[ROUTING_EXPERTS_MAX]; /* ascending */
    uint64_t left = cum[rm->experts - 1]; /* weight of the experts not yet taken */
    for (uint32_t j = 0; j < rm->k; j++) {
        uint64_t x = splitmix64(&s) % left;
        for (uint32_t i = 0; i < j; i++) {
            uint32_t t = taken[i];
            uint64_t start = t ? cum[t - 1] : 0;
            if (x >= start)
                x += cum[t] - start;
        }
        uint32_t e = upper_bound(cum, rm->experts, x);
        uint32_t at = j;
        while (at > 0 && taken[at - 1] > e) {
            taken[at] = taken[at - 1];
            at--;
        }
        taken[at] = e;
        left -= cum[e] - (e ? cum[e - 1] : 0);
        experts[j] = e;
    }
}
