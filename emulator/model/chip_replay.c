/* SPDX-License-Identifier: MIT */
/* Replay slots and their commands (chip_replay.h). */
#include "chip_replay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int chip_replay_init(struct chip_replay *r, uint32_t ncores)
{
    memset(r, 0, sizeof(*r));
    r->slots = calloc((size_t)ncores * NPU_REPLAY_SLOTS, sizeof(*r->slots));
    if (!r->slots)
        return NPU_ERR_NOMEM;
    r->ncores = ncores;
    return NPU_OK;
}

void chip_replay_destroy(struct chip_replay *r)
{
    free(r->slots);
    memset(r, 0, sizeof(*r));
}

static void snapshot(const struct chip_engines *e, uint32_t core,
                     struct chip_engine_counters *out)
{
    for (uint32_t g = 0; g < NPU_ENGINE_COUNT; g++)
        out[g] = *chip_engines_counters(e, core, (enum npu_engine)g);
}

_Static_assert(sizeof(struct chip_engine_counters) % sizeof(uint64_t) == 0,
               "engine counters are uint64_t words");

/* What one repeat adds: end - begin of every counter but descs and errors. */
static struct chip_engine_counters repeat_delta(const struct chip_engine_counters *b,
                                                const struct chip_engine_counters *e)
{
    struct chip_engine_counters d;
    uint64_t *w = (uint64_t *)&d;
    const uint64_t *bw = (const uint64_t *)b, *ew = (const uint64_t *)e;
    for (size_t i = 0; i < sizeof(d) / sizeof(uint64_t); i++)
        w[i] = ew[i] - bw[i];
    d.descs = 0, d.errors = 0; /* the emulator's own work, not the modelled chip's */
    return d;
}

/* Whether n x d fits 64 bits with room left to add it. */
static bool repeat_fits(const struct chip_engine_counters *d, uint64_t n)
{
    const uint64_t *w = (const uint64_t *)d;
    for (size_t i = 0; i < sizeof(*d) / sizeof(uint64_t); i++)
        if (w[i] > UINT64_MAX / n / 2)
            return false;
    return true;
}

static void add_repeated(struct chip_engine_counters *c, const struct chip_engine_counters *d,
                         uint64_t n)
{
    uint64_t *w = (uint64_t *)c;
    const uint64_t *dw = (const uint64_t *)d;
    for (size_t i = 0; i < sizeof(*c) / sizeof(uint64_t); i++)
        w[i] += n * dw[i];
}

static int refuse(int rc, char *err, size_t errlen, const char *what)
{
    snprintf(err, errlen, "%s", what);
    return rc;
}

/* A slot being recorded meanwhile (nested: a tile inside a layer) counts the repeat as its
   own work, as it would the work repeated. The slot itself cannot be open: it would not be
   ended. */
static int repeat_slot(struct chip_engines *e, uint32_t core,
                       const struct chip_replay_slot *s, uint32_t count, char *err,
                       size_t errlen)
{
    if (!s->ended)
        return refuse(NPU_ERR_STATE, err, errlen, "REPEAT of a slot not recorded");
    if (count == 0 || count > NPU_REPLAY_COUNT_MAX)
        return refuse(NPU_ERR_RANGE, err, errlen, "REPLAY_COUNT out of range");
    struct chip_engine_counters d[NPU_ENGINE_COUNT];
    for (uint32_t g = 0; g < NPU_ENGINE_COUNT; g++) {
        d[g] = repeat_delta(&s->begin[g], &s->end[g]);
        if (!repeat_fits(&d[g], count))
            return refuse(NPU_ERR_RANGE, err, errlen, "the repeated counters overflow");
    }
    for (uint32_t g = 0; g < NPU_ENGINE_COUNT; g++)
        add_repeated(&e->queues[core * NPU_ENGINE_COUNT + g].count, &d[g], count);
    return NPU_OK;
}

int chip_replay_apply_op(struct chip_replay *r, struct chip_engines *e, uint32_t core,
                         uint32_t op, uint32_t slot, uint32_t count, char *err, size_t errlen)
{
    if (core >= r->ncores || core >= e->ncores)
        return refuse(NPU_ERR_RANGE, err, errlen, "no such core");
    if (e->cfg.functional)
        return refuse(NPU_ERR_STATE, err, errlen,
                      "replay is for performance mode (functional runs compute data)");
    if (slot >= NPU_REPLAY_SLOTS)
        return refuse(NPU_ERR_RANGE, err, errlen, "no such replay slot");
    for (uint32_t g = 0; g < NPU_ENGINE_COUNT; g++)
        if (chip_engines_pending(e, core, (enum npu_engine)g))
            return refuse(NPU_ERR_STATE, err, errlen,
                          "descriptors are still pending on this core");
    struct chip_replay_slot *s = &r->slots[(size_t)core * NPU_REPLAY_SLOTS + slot];
    switch (op) {
    case NPU_REPLAY_OP_BEGIN:
        snapshot(e, core, s->begin);
        s->begun = true, s->ended = false;
        return NPU_OK;
    case NPU_REPLAY_OP_END:
        if (!s->begun)
            return refuse(NPU_ERR_STATE, err, errlen, "END of a slot without BEGIN");
        snapshot(e, core, s->end);
        s->begun = false, s->ended = true;
        return NPU_OK;
    case NPU_REPLAY_OP_REPEAT:
        return repeat_slot(e, core, s, count, err, errlen);
    default:
        return refuse(NPU_ERR_INVAL, err, errlen, "unknown REPLAY_OP");
    }
}
