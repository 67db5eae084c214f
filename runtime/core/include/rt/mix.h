/* SPDX-License-Identifier: MIT */
/* A 64-bit mixer for the runtime's keys and synthetic ids (the prefix index's block keys,
   trace_synth_ids): splitmix64's finaliser, whose every input bit moves every output bit.
   Not a random generator (trace_gen.c has its own). */
#ifndef RT_MIX_H
#define RT_MIX_H

#include <stdint.h>

static inline uint64_t rt_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#endif
