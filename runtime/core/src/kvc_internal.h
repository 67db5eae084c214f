/* SPDX-License-Identifier: MIT */
/* The KV-cache manager's own interface between kvc.c (pool, reservations, ring) and
   kvc_prefix.c (the prefix index): not for the manager's users (rt/kvc.h). */
#ifndef RT_KVC_INTERNAL_H
#define RT_KVC_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "rt/kvc.h"

/* What a prompt would take from the prefix index: `blocks` blocks ending at `tail`, `idle`
   of which no sequence holds (taking those uses up as many unreserved blocks). */
struct kvc_hit {
    uint32_t blocks, tail, idle;
};

/* Blocks of B positions that len positions need. */
uint32_t kvc_blocks_for(const struct rt_kvc *k, uint32_t len);
/* Block ids the manager has: the SRAM pool's, then a paged ring's. */
uint32_t kvc_ids(const struct rt_kvc *k);
/* Puts free block b (owner cleared) on its memory's free list. */
void kvc_push_free(struct rt_kvc *k, uint32_t b);

/* The longest chain of index blocks p's keys match, cut so that its idle blocks fit the
   unreserved ones. k->px must be set. */
void kvc_prefix_find(const struct rt_kvc *k, const struct rt_kv_prefix *p, struct kvc_hit *h);
/* s (being admitted) takes h's chain as its shared prefix: references, unreserved space. */
void kvc_prefix_take(struct rt_kvc *k, struct rt_kv_seq *s, const struct kvc_hit *h);
/* s (being freed) lets go of its shared prefix. */
void kvc_prefix_release(struct rt_kvc *k, struct rt_kv_seq *s);
/* Evicts the least recently used cached block that no sequence holds and none succeeds,
   onto the free list. There must be one (k->px->evictable > 0). */
void kvc_prefix_evict(struct rt_kvc *k);
/* s's shared prefix ids in position order into ids[max]; how many were written. */
uint32_t kvc_prefix_ids(const struct rt_kvc *k, const struct rt_kv_seq *s, uint32_t *ids,
                        uint32_t max);
/* The index's invariants over the admitted seqs; its block counts into *cached and
   *evictable. 0, or NPU_ERR_STATE with what is wrong in err. */
int kvc_prefix_check(const struct rt_kvc *k, const struct rt_kv_seq *const *seqs,
                     uint32_t nseqs, uint32_t *cached, uint32_t *evictable, char *err,
                     size_t errlen);
/* NPU_ERR_STATE with "kvc: what (a, b)" in err. */
int kvc_fail(char *err, size_t errlen, const char *what, uint64_t a, uint64_t b);

#endif
