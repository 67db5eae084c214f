/* SPDX-License-Identifier: MIT */
/*
 * The NoC dataflow API for NPU-core firmware (docs/noc-driver.md), in the spirit of
 * tt-metal's dataflow API: asynchronous writes and reads between the cores' SRAMs, barriers
 * on the counts of issued and acknowledged transfers, remote semaphore increment and set,
 * local semaphore waits (through the chip clock: the hart sleeps, never spins) and multicast
 * to a rectangle. Every call queues one descriptor on this core's NoC engine (in order) and
 * returns; the engine moves the data while the hart goes on.
 *
 * Semaphores of a core (32): 0..NOC_SEM_USER_END-1 are the application's; the driver owns
 * the rest (the collectives' and the acknowledgement counters below). Counters are 32-bit
 * and only grow: a core that issues 2^32 transfers wraps them (not handled).
 */
#ifndef NOC_NOC_H
#define NOC_NOC_H

#include <stdbool.h>
#include <stdint.h>

#define NOC_SEM_USER_END 12u /* semaphores 0..11 are free for applications */
#define NOC_SEM_WRITE_ACK 30u /* +1 per write (per destination of a multicast) landed */
#define NOC_SEM_READ_DONE 31u /* +1 per read landed here */

/* Global SRAM address of `offset` in core `core`'s SRAM. */
uint64_t noc_sram_addr(uint32_t core, uint64_t offset);

/* An optional semaphore increment, made when the data has landed at its destination. */
struct noc_sem_inc {
    bool enable;
    uint16_t core;   /* write: ignored for multicast (each destination's own semaphore) */
    uint8_t sem;
    uint32_t value;
};

/* An optional gate: the transfer starts only when local semaphore `sem` >= value. */
struct noc_gate {
    bool enable;
    uint8_t sem;
    uint32_t value;
};

struct noc_write_async_args {
    uint64_t src;         /* this core's SRAM (global address) */
    uint64_t dst;         /* any core's SRAM (global address: noc_sram_addr) */
    uint32_t bytes;       /* >= 1 */
    struct noc_sem_inc on_arrival;
    struct noc_gate after;
    bool control;         /* a control message: its bytes move in performance mode too
                             (at most NPU_KEEP_DATA_MAX) */
};

struct noc_read_async_args {
    uint64_t src;         /* any core's SRAM */
    uint64_t dst;         /* this core's SRAM */
    uint32_t bytes;
    struct noc_gate after;
};

struct noc_multicast_async_args {
    uint64_t src;         /* this core's SRAM */
    uint64_t dst_offset;  /* the same offset in every destination's SRAM */
    uint32_t bytes;
    uint16_t row0, col0, row1, col1; /* the rectangle of destinations, inclusive */
    struct noc_sem_inc on_arrival;   /* .core is ignored */
    struct noc_gate after;
};

struct noc_sem_args {
    uint32_t core;        /* target core (hal_chip()->ncores: the control core) */
    uint32_t sem;
    uint32_t value;
};

/* Commands: queue a transfer. 0, or the engine's refusal (NPU_ERR_RANGE for an address
   outside SRAM or zero bytes, NPU_ERR_NOMEM when the queue is full). */
int noc_write_async(const struct noc_write_async_args *args);
int noc_read_async(const struct noc_read_async_args *args);
int noc_multicast_async(const struct noc_multicast_async_args *args);

/* Transfers this core has issued (multicast: one per destination), and those landed. */
uint32_t noc_writes_issued(void);
uint32_t noc_writes_acked(void);
uint32_t noc_reads_issued(void);

/* Wait until every write issued so far has landed (its acknowledgement came back). */
int noc_write_barrier(void);
/* Wait until every read issued so far has landed here. */
int noc_read_barrier(void);

/* Commands: add `value` to, or set, semaphore `sem` of any core (lands after the hops). */
int noc_sem_inc(const struct noc_sem_args *args);
int noc_sem_set(const struct noc_sem_args *args);

/* Wait (sleeping, through the chip clock) until local semaphore sem >= value. */
int noc_sem_wait(uint32_t sem, uint32_t value);
/* Same, giving up at chip time deadline_ps with NPU_ERR_TIMEOUT. */
int noc_sem_wait_until(uint32_t sem, uint32_t value, uint64_t deadline_ps);

#endif
