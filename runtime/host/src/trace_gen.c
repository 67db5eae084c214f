/* SPDX-License-Identifier: MIT */
/*
 * The trace generator (docs/traces.md, "Generator"): Poisson or gamma arrivals and
 * log-normal lengths fitted to published means and standard deviations; and the load knobs
 * that re-time any trace with the same arrivals ("Load knobs").
 *
 * Reproducible by construction: an own PRNG (xoshiro256**, seeded through splitmix64), no
 * rand(), and only log, exp, pow and sqrt from libm, so that a seed gives the same trace on
 * every machine with the same libm. Arrivals, input lengths and output lengths each draw
 * from their own stream, so changing the rate leaves the lengths of a seed unchanged.
 */
#include "rt/trace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu_enums.h"
#include "npu_limits.h"

/* A fused multiply-add rounds differently from a multiply and an add; forbid the compiler
   from fusing (it would on targets with FMA) so that every machine draws the same values. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

struct gen_rng {
    uint64_t s[4];
};

static uint64_t gen_splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void gen_rng_seed(struct gen_rng *r, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed ^ (stream * 0xd1b54a32d192ed03ull);
    for (int i = 0; i < 4; i++)
        r->s[i] = gen_splitmix64(&x);
}

static uint64_t gen_rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t gen_next(struct gen_rng *r)
{
    uint64_t *s = r->s;
    uint64_t out = gen_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = gen_rotl(s[3], 45);
    return out;
}

/* Uniform in (0, 1): never 0 (log) and never 1. */
static double gen_uniform(struct gen_rng *r)
{
    return ((double)(gen_next(r) >> 11) + 0.5) * 0x1p-53;
}

/* Standard normal by Marsaglia's polar method (log and sqrt only; no sin/cos). The second
   value of each pair is dropped: simpler state, and speed does not matter here. */
static double gen_normal(struct gen_rng *r)
{
    double u, v, s;
    do {
        u = 2.0 * gen_uniform(r) - 1.0;
        v = 2.0 * gen_uniform(r) - 1.0;
        s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    return u * sqrt(-2.0 * log(s) / s);
}

/* Gamma(k, 1) by Marsaglia and Tsang; k < 1 through Gamma(k + 1) * U^(1/k). */
static double gen_gamma(struct gen_rng *r, double k)
{
    if (k < 1.0) {
        double g = gen_gamma(r, k + 1.0);
        return g * pow(gen_uniform(r), 1.0 / k);
    }
    double d = k - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x, v;
        do {
            x = gen_normal(r);
            v = 1.0 + c * x;
        } while (v <= 0.0);
        v = v * v * v;
        double u = gen_uniform(r);
        if (u < 1.0 - 0.0331 * (x * x) * (x * x) ||
            log(u) < 0.5 * x * x + d * (1.0 - v + log(v)))
            return d * v;
    }
}

/* Seconds to the next arrival: mean 1/rate either way. */
static double gen_gap(struct gen_rng *r, const struct rt_trace_gen_params *p)
{
    if (p->arrival == RT_ARRIVAL_POISSON)
        return -log(gen_uniform(r)) / p->rate;
    double k = 1.0 / (p->cv * p->cv);
    return gen_gamma(r, k) / (p->rate * k);
}

/* Log-normal with the distribution's mean and std, rounded and clamped to [min, max]. */
static uint32_t gen_length(struct gen_rng *r, const struct rt_len_dist *d)
{
    double x = d->mean;
    if (d->std > 0) {
        double cv = d->std / d->mean, s2 = log(1.0 + cv * cv);
        double mu = log(d->mean) - s2 / 2.0;
        x = exp(mu + sqrt(s2) * gen_normal(r));
    }
    x = round(x);
    if (x < d->min)
        return d->min;
    return x > d->max ? d->max : (uint32_t)x;
}

/* min and max (tokens) are ours: ShareGPT and arXiv up to the 32768-token context of the
   paper's Qwen3-30B-A3B; tiny fits the tiny models' short contexts. p90 0: not given. */
static const struct gen_preset {
    const char *name;
    struct rt_len_dist input, output;
} gen_presets[] = {
    { "sharegpt", { 2340, 2088, 5696, 1, 32768 }, { 438, 265, 834, 1, 4096 } },
    { "arxiv", { 9194, 5754, 17152, 1, 32768 }, { 231, 104, 386, 1, 2048 } },
    { "tiny", { 24, 16, 0, 1, 96 }, { 8, 4, 0, 1, 16 } },
};

int trace_len_preset(const char *name, struct rt_len_dist *input, struct rt_len_dist *output)
{
    for (size_t i = 0; name && i < sizeof(gen_presets) / sizeof(gen_presets[0]); i++)
        if (strcmp(name, gen_presets[i].name) == 0) {
            *input = gen_presets[i].input;
            *output = gen_presets[i].output;
            return 0;
        }
    return NPU_ERR_NOTFOUND;
}

static int gen_check_dist(const char *which, const struct rt_len_dist *d, char *err,
                          size_t errlen)
{
    if (!(d->mean > 0) || !isfinite(d->mean) || !(d->std >= 0) || !isfinite(d->std))
        snprintf(err, errlen, "%s lengths: mean %g and std %g (need mean > 0, std >= 0)",
                 which, d->mean, d->std);
    else if (d->min > d->max)
        snprintf(err, errlen, "%s lengths: min %u above max %u", which, d->min, d->max);
    else
        return 0;
    return NPU_ERR_INVAL;
}

static int gen_check_params(const struct rt_trace_gen_params *p, char *err, size_t errlen)
{
    if (p->count == 0)
        snprintf(err, errlen, "count 0: a trace needs at least one request");
    else if (!(p->rate > 0) || !isfinite(p->rate))
        snprintf(err, errlen, "rate %g req/s: must be positive", p->rate);
    else if (p->arrival != RT_ARRIVAL_POISSON && p->arrival != RT_ARRIVAL_GAMMA)
        snprintf(err, errlen, "unknown arrival process %d", (int)p->arrival);
    else if (p->arrival == RT_ARRIVAL_GAMMA && (!(p->cv > 0) || !isfinite(p->cv)))
        snprintf(err, errlen, "gamma arrivals: cv %g must be positive", p->cv);
    else if (p->prefixes && (p->prefix_tokens == 0 || p->hash_block == 0 ||
                             !(p->prefix_share >= 0 && p->prefix_share <= 1)))
        snprintf(err, errlen, "%u shared prefixes need prefix_tokens and hash_block of at "
                 "least 1 and a share in [0, 1] (%u, %u, %g)", p->prefixes, p->prefix_tokens,
                 p->hash_block, p->prefix_share);
    else
        return gen_check_dist("input", &p->input, err, errlen) ||
                       gen_check_dist("output", &p->output, err, errlen)
                   ? NPU_ERR_INVAL
                   : 0;
    return NPU_ERR_INVAL;
}

/* Arrivals from 0: one drawn gap after 0, each later one a gap after its predecessor, in
   whole microseconds (short files, far finer than any scheduling step). 0, or
   NPU_ERR_RANGE past the latest arrival a run may have. */
static int gen_arrivals(const struct rt_trace_gen_params *p, struct rt_trace *t, char *err,
                        size_t errlen)
{
    struct gen_rng arrivals;
    gen_rng_seed(&arrivals, p->seed, 1);
    double now_s = 0.0;
    for (size_t i = 0; i < t->n; i++) {
        /* The first request too: a Poisson trace then looks like one cut from a longer one
           at any instant, and no request is special. */
        now_s += gen_gap(&arrivals, p);
        t->e[i].timestamp_ms = round(now_s * 1e6) / 1e3;
        if (t->e[i].timestamp_ms > NPU_ARRIVAL_MAX_PS / 1e9) { /* what serve would refuse */
            snprintf(err, errlen, "request %zu arrives at %.0f ms, past the latest arrival a "
                     "run may have (%.0f ms, NPU_ARRIVAL_MAX_PS): a higher rate or fewer "
                     "requests", i, t->e[i].timestamp_ms, NPU_ARRIVAL_MAX_PS / 1e9);
            return NPU_ERR_RANGE;
        }
    }
    return 0;
}

int trace_apply_load(struct rt_trace *t, const struct rt_trace_load *l, char *err,
                     size_t errlen)
{
    if (l->num_prompts > t->n) {
        snprintf(err, errlen, "--num-prompts %u: the trace has %zu requests", l->num_prompts,
                 t->n);
        return NPU_ERR_RANGE;
    }
    if (!(l->burstiness > 0) || !isfinite(l->burstiness) || (l->rate == 0 && l->burstiness != 1)) {
        snprintf(err, errlen, "--burstiness %g: positive, and only with --request-rate",
                 l->burstiness);
        return NPU_ERR_INVAL;
    }
    if (!(l->rate >= 0)) {
        snprintf(err, errlen, "--request-rate %g: positive, or inf", l->rate);
        return NPU_ERR_INVAL;
    }
    for (size_t i = l->num_prompts; l->num_prompts && i < t->n; i++) {
        free(t->e[i].input_ids);
        free(t->e[i].hash_ids);
    }
    t->n = l->num_prompts ? l->num_prompts : t->n;
    if (isinf(l->rate)) { /* vLLM's inf: every request sent at once */
        for (size_t i = 0; i < t->n; i++)
            t->e[i].timestamp_ms = 0.0;
        return 0;
    }
    if (l->rate == 0)
        return 0;
    const struct rt_trace_gen_params p = {
        .rate = l->rate, .arrival = l->burstiness == 1 ? RT_ARRIVAL_POISSON : RT_ARRIVAL_GAMMA,
        .cv = 1.0 / sqrt(l->burstiness), .seed = l->seed };
    return gen_arrivals(&p, t, err, errlen);
}

/* Request i's shared prefix (if its draw says so) and hash ids: the prefix's hash blocks
   are numbered 1 + g * per + b for prefix g; every other hash block gets the next id from
   *next (which starts past all of the prefixes'). */
static int gen_prefix(const struct rt_trace_gen_params *p, struct gen_rng *r,
                      struct rt_trace_entry *e, uint64_t *next)
{
    const uint32_t per = p->prefix_tokens / p->hash_block; /* hash blocks it fills */
    bool shared = gen_uniform(r) < p->prefix_share;
    uint32_t g = (uint32_t)(gen_next(r) % p->prefixes);
    if (shared) {
        uint64_t len = (uint64_t)e->input_length + p->prefix_tokens;
        e->input_length = len < NPU_REQUEST_TOKENS_MAX ? (uint32_t)len : NPU_REQUEST_TOKENS_MAX;
    }
    e->nhash = (uint32_t)(((uint64_t)e->input_length + p->hash_block - 1) / p->hash_block);
    e->hash_ids = malloc((e->nhash ? e->nhash : 1) * sizeof(uint64_t));
    if (!e->hash_ids)
        return NPU_ERR_NOMEM;
    for (uint32_t b = 0; b < e->nhash; b++)
        e->hash_ids[b] = shared && b < per ? 1 + (uint64_t)g * per + b : (*next)++;
    return 0;
}

int trace_gen(const struct rt_trace_gen_params *p, struct rt_trace *t, char *err,
              size_t errlen)
{
    *t = (struct rt_trace){ 0 };
    int rc = gen_check_params(p, err, errlen);
    if (rc)
        return rc;
    t->e = calloc(p->count, sizeof(*t->e));
    if (!t->e) {
        snprintf(err, errlen, "%u requests: out of memory", p->count);
        return NPU_ERR_NOMEM;
    }
    struct gen_rng inputs, outputs;
    gen_rng_seed(&inputs, p->seed, 2);
    gen_rng_seed(&outputs, p->seed, 3);
    t->n = p->count;
    for (uint32_t i = 0; i < p->count; i++) {
        t->e[i].input_length = gen_length(&inputs, &p->input);
        t->e[i].output_length = gen_length(&outputs, &p->output);
    }
    struct gen_rng prefix; /* a stream of its own: lengths and arrivals stay as without */
    gen_rng_seed(&prefix, p->seed, 4);
    const uint32_t per = p->prefix_tokens / (p->hash_block ? p->hash_block : 1);
    uint64_t next = 1 + (uint64_t)p->prefixes * per; /* past every prefix's ids */
    for (uint32_t i = 0; p->prefixes && i < p->count && rc == 0; i++)
        if (gen_prefix(p, &prefix, &t->e[i], &next)) {
            snprintf(err, errlen, "%u requests' hash ids: out of memory", p->count);
            rc = NPU_ERR_NOMEM;
        }
    if (rc == 0)
        rc = gen_arrivals(p, t, err, errlen);
    if (rc)
        trace_free(t);
    return rc;
}
