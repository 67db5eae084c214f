/* SPDX-License-Identifier: MIT */
/*
 * SRAM circular buffers between a producer core and a consumer core (docs/noc-driver.md),
 * after tt-metal's circular buffers: a ring of `pages` pages of `page_bytes` in the
 * consumer's SRAM. The producer reserves free pages (waiting while the ring is full) and
 * pushes data into them over the NoC; the consumer waits for filled pages, uses them in
 * place, and pops them, which frees them for the producer.
 *
 * Flow control is two monotonic semaphores: `filled_sem` on the consumer (the NoC write of a
 * push increments it when its data has landed) and `freed_sem` on the producer (a pop
 * increments it). Both cores call noc_cb_init with the same config; both semaphores must be
 * 0 then, and used by nothing else while the buffer lives.
 *
 * A push or wait of n pages that runs past the end of the ring wraps: the push is split in
 * two writes, and the consumer's pages are then not contiguous (noc_cb_read_ptr gives the
 * first). Using n that divides `pages` avoids it.
 */
#ifndef NOC_CB_H
#define NOC_CB_H

#include <stdint.h>

struct noc_cb_config {
    uint32_t producer_core, consumer_core;
    uint64_t ring_offset;  /* the ring's offset in the consumer's SRAM */
    uint32_t page_bytes, pages;
    uint8_t filled_sem;    /* on the consumer */
    uint8_t freed_sem;     /* on the producer */
};

struct noc_cb {
    struct noc_cb_config cfg;
    uint32_t reserved;     /* producer: pages reserved so far */
    uint32_t pushed;       /* producer: pages pushed so far */
    uint32_t received;     /* consumer: pages waited for so far */
    uint32_t popped;       /* consumer: pages popped so far */
};

/* NPU_ERR_INVAL for zero pages or page bytes, a semaphore outside the application's, or
   the same core at both ends; NPU_ERR_RANGE if the ring runs into the driver's mailboxes at
   the top of SRAM (noc_reserved_bytes()) or past it. */
int noc_cb_init(struct noc_cb *cb, const struct noc_cb_config *cfg);

/* Producer: wait until n more pages are free (n <= pages). */
int noc_cb_reserve_back(struct noc_cb *cb, uint32_t n);
/* Producer: global address, in the consumer's SRAM, of the first reserved page not pushed. */
uint64_t noc_cb_write_ptr(const struct noc_cb *cb);
/* Producer: write n reserved pages from local SRAM `src` (n * page_bytes contiguous bytes)
   into the ring; the consumer sees them when the data has landed. */
int noc_cb_push_back(struct noc_cb *cb, uint64_t src, uint32_t n);

/* Consumer: wait until n more pages have landed. */
int noc_cb_wait_front(struct noc_cb *cb, uint32_t n);
/* Consumer: local address of the first page not popped. */
uint64_t noc_cb_read_ptr(const struct noc_cb *cb);
/* Consumer: release n pages to the producer. */
int noc_cb_pop_front(struct noc_cb *cb, uint32_t n);

#endif
