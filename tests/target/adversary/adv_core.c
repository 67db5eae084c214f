/* SPDX-License-Identifier: MIT */
/*
 * Adversary image, NPU core: `trials` rounds (bootarg, default 400) of one of
 *   - a SUBMIT of 1..4 random descriptors: an engine and op at random or valid, addresses
 *     at random, at the edges of memory, wrapping, or valid (this core's or another core's
 *     application SRAM, HBM), sizes at random or small, semaphore ids and cores in or out of
 *     range, flags at random; valid ones include WAIT chains that can never start (a loop
 *     across the two DMA queues) and copies that do run;
 *   - a SUBMIT with a bad array address or count (0, past NPU_SUBMIT_MAX, unaligned,
 *     outside SRAM);
 *   - a SUBMIT of 1..8 valid copies that run (HBM to SRAM, SRAM to another core's SRAM over
 *     the NoC), so that the engines work while the garbage is refused, until a queue is
 *     full (then NPU_ERR_NOMEM, a refusal too);
 *   - a write of a random value to a command register (semaphore posts to NPU cores or to
 *     cores that do not exist, replay, route, perf select), to a read-only register, or to
 *     an offset no register has.
 * It never writes EXIT or WAIT_KIND, never posts to the control core, and never aims an
 * engine write below NPU_IMAGE_APP_BASE (where every core's firmware lives): the point is
 * that the chip refuses or runs every command and keeps running, not that one core can
 * overwrite another's code. Prints how many commands were refused and accepted, then posts
 * to the control core and exits 0.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adv.h"
#include "npu/engine.h"
#include "npu/hal.h"
#include "npu/mmio.h"
#include "npu/wait.h"
#include "npu_image.h"
#include "npu_regs.h"

static struct npu_desc descs[NPU_SUBMIT_MAX + 8] __attribute__((aligned(128)));
static uint64_t rng;

static uint64_t next(void) /* splitmix64 */
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t below(uint64_t n)
{
    return n ? next() % n : 0;
}

/* An application-SRAM address of core c (room for `bytes`). */
static uint64_t app_addr(uint32_t c, uint64_t bytes)
{
    const struct hal_chip_info *chip = hal_chip();
    const uint64_t lo = NPU_IMAGE_APP_BASE;
    const uint64_t hi = chip->sram_bytes - NPU_IMAGE_NOC_RESERVE((uint64_t)chip->ncores);
    const uint64_t span = hi > lo + bytes ? hi - lo - bytes : 0;
    return npu_map_instance_base(NPU_MAP_SRAM, c) + lo + (below(span) & ~63ull);
}

/* A source may be anywhere, its own firmware too; a destination (!src) never below the
   application base of a core's SRAM. */
static uint64_t any_addr(uint64_t bytes, bool src)
{
    const struct hal_chip_info *chip = hal_chip();
    uint64_t pick = below(8);
    if (!src && pick == 4)
        pick = 5;
    switch (pick) {
    case 0: return next();                                            /* anywhere */
    case 1: return chip->hbm_base + chip->hbm_size - below(64);       /* HBM's edge */
    case 2: return UINT64_MAX - below(4096);                          /* wraps */
    case 3: return chip->hbm_base + below(chip->hbm_size - bytes);    /* HBM */
    case 4: return hal_self()->sram_base + below(NPU_IMAGE_APP_BASE); /* own firmware */
    default: return app_addr((uint32_t)below(chip->ncores), bytes);
    }
}

static uint32_t any_size(void)
{
    const uint32_t sizes[] = { 0, 1, 64, 4096, UINT32_MAX, 1u << 31 };
    return below(4) ? (uint32_t)below(256) + 1 : sizes[below(6)];
}

static void random_desc(struct npu_desc *d)
{
    const uint32_t ncores = hal_chip()->ncores;
    memset(d, 0, sizeof(*d));
    for (uint8_t *p = (uint8_t *)d; p < (uint8_t *)(d + 1) && !below(4); p++)
        *p = (uint8_t)next(); /* sometimes random bytes everywhere, then fields on top */
    d->engine = (uint8_t)(below(4) ? below(NPU_ENGINE_COUNT) : next());
    d->op = (uint8_t)(below(4) ? 1 + below(3) : next());
    d->flags = (uint16_t)(below(2) ? next() : below(4));
    d->m = below(2) ? 1 + (uint32_t)below(8) : any_size();
    d->n = below(2) ? 64 : any_size();
    d->k = below(2) ? 16 : any_size();
    d->lda = d->ldb = d->ldc = below(2) ? d->n : any_size();
    const uint64_t bytes = (uint64_t)d->m * d->n;
    d->a = any_addr(bytes, true), d->b = any_addr(bytes, true), d->c = any_addr(bytes, false);
    d->wait_sem = (uint8_t)(below(2) ? below(16) : next());
    d->signal_sem = (uint8_t)(below(2) ? below(16) : next());
    d->signal_core = (uint16_t)(below(2) ? below(ncores) : ncores + 1 + below(1000));
    d->wait_value = (uint32_t)below(3), d->signal_value = (uint32_t)below(3);
    d->batch = below(4) ? 0 : (uint32_t)next();
    if (d->signal2_core == ncores) /* never the control core */
        d->signal2_core = (uint16_t)(ncores + 1);
}

/* A valid copy that runs: HBM to this core's SRAM, this core's SRAM to another's over the
   NoC, or within this core's SRAM; sometimes signalling an NPU core's semaphore 8. */
static void valid_copy(struct npu_desc *d)
{
    const struct hal_chip_info *chip = hal_chip();
    const uint32_t me = hal_self()->core_id, bytes = 64u << below(6);
    memset(d, 0, sizeof(*d));
    const uint64_t how = below(3);
    d->engine = how == 1 ? NPU_ENGINE_NOC : below(2) ? NPU_ENGINE_DMA : NPU_ENGINE_DMA2;
    d->op = how == 1 ? NPU_NOC_OP_WRITE : NPU_DMA_OP_COPY;
    d->m = 1, d->n = bytes, d->lda = d->ldc = bytes;
    d->a = how == 0 ? chip->hbm_base + (below(chip->hbm_size - bytes) & ~63ull)
                    : app_addr(me, bytes);
    d->c = app_addr(how == 1 ? (uint32_t)below(chip->ncores) : me, bytes);
    if (below(2)) {
        d->flags = NPU_DESC_SIGNAL, d->signal_sem = 8, d->signal_value = 1;
        d->signal_core = (uint16_t)below(chip->ncores);
    }
}

/* Two copies that wait for each other's signal: a chain that can never start. */
static void loop_chain(struct npu_desc d[2])
{
    for (int i = 0; i < 2; i++) {
        memset(&d[i], 0, sizeof(d[i]));
        d[i].engine = i ? NPU_ENGINE_DMA2 : NPU_ENGINE_DMA;
        d[i].op = NPU_DMA_OP_COPY, d[i].m = 1, d[i].n = 64, d[i].lda = d[i].ldc = 64;
        d[i].a = app_addr(hal_self()->core_id, 64), d[i].c = app_addr(hal_self()->core_id, 64);
        d[i].flags = NPU_DESC_WAIT | NPU_DESC_SIGNAL;
        d[i].wait_sem = (uint8_t)(12 + i), d[i].wait_value = 1;
        d[i].signal_sem = (uint8_t)(13 - i), d[i].signal_core = (uint16_t)hal_self()->core_id;
        d[i].signal_value = 1;
    }
}

static int bad_submit(void)
{
    const uintptr_t r = (uintptr_t)hal_self()->regs_base;
    const uint64_t addrs[] = { (uint64_t)(uintptr_t)descs + 4, 0, next(),
                               hal_self()->sram_base + hal_self()->sram_size - 64 };
    const uint32_t counts[] = { 0, NPU_SUBMIT_MAX + 1, UINT32_MAX, 1 };
    mmio_write64(r + CORE_SUBMIT_ADDR_OFFSET, addrs[below(4)]);
    mmio_write32(r + CORE_SUBMIT_COUNT_OFFSET, counts[below(4)]);
    mmio_write32(r + CORE_SUBMIT_OFFSET, (uint32_t)(below(2) ? CORE_SUBMIT_GO_MASK : next()));
    return (int32_t)mmio_read32(r + CORE_CMD_STATUS_OFFSET);
}

/* A random value to a register that takes commands or none at all (never EXIT, WAIT_KIND,
   CON_TX or IRQ_ENABLE; a semaphore post never to the control core). */
static void register_write(void)
{
    const uintptr_t r = (uintptr_t)hal_self()->regs_base;
    const uint32_t ncores = hal_chip()->ncores;
    const uint32_t offs[] = { CORE_ID_OFFSET, CORE_TIME_OFFSET, CORE_REPLAY_SLOT_OFFSET,
                              CORE_REPLAY_COUNT_OFFSET, CORE_REPLAY_OP_OFFSET,
                              CORE_ROUTE_ADDR_OFFSET, CORE_ROUTE_OFFSET, CORE_PERF_SEL_OFFSET,
                              CORE_WAIT_SEM_OFFSET, 0x0f0, 0x0fc, 0x200 };
    if (below(3) == 0) { /* a semaphore post: a core in range or beyond, any sem and op */
        const uint32_t core = below(2) ? (uint32_t)below(ncores) : ncores + 1 + (uint32_t)below(9);
        mmio_write32(r + CORE_SEM_TARGET_OFFSET, (uint32_t)below(64) | core << 16);
        mmio_write32(r + CORE_SEM_VALUE_OFFSET, (uint32_t)below(4));
        mmio_write32(r + CORE_SEM_OP_OFFSET, (uint32_t)next());
        return;
    }
    const uint32_t off = offs[below(sizeof(offs) / sizeof(offs[0]))];
    if (off == CORE_ROUTE_ADDR_OFFSET)
        mmio_write64(r + off, below(2) ? next() : app_addr(hal_self()->core_id, 64));
    else
        mmio_write32(r + off, (uint32_t)next());
}

int main(void)
{
    hal_wait_release();
    const char *seed = hal_bootarg_value("seed"), *trials = hal_bootarg_value("trials");
    rng = (seed ? strtoull(seed, NULL, 10) : 1) * 1000003u + hal_self()->core_id;
    const uint32_t n = trials ? (uint32_t)strtoul(trials, NULL, 10) : 400;
    uint32_t refused = 0, accepted = 0, writes = 0;
    for (uint32_t t = 0; t < n; t++) {
        const uint64_t kind = below(9);
        int rc = NPU_OK;
        if (kind < 4) {
            const uint32_t count = 1 + (uint32_t)below(4);
            for (uint32_t i = 0; i < count; i++)
                random_desc(&descs[i]);
            rc = engine_submit(descs, count);
        } else if (kind == 4) {
            loop_chain(descs);
            rc = engine_submit(descs, 2);
        } else if (kind == 5) {
            rc = bad_submit();
        } else if (kind == 6) {
            const uint32_t count = 1 + (uint32_t)below(8);
            for (uint32_t i = 0; i < count; i++)
                valid_copy(&descs[i]);
            rc = engine_submit(descs, count);
        } else {
            register_write();
            writes++;
            continue;
        }
        refused += rc != NPU_OK, accepted += rc == NPU_OK;
    }
    printf("adversary: core %" PRIu32 ": %" PRIu32 " submits refused, %" PRIu32
           " accepted, %" PRIu32 " register writes\n", hal_self()->core_id, refused,
           accepted, writes);
    struct hal_sem_post_args done = { .core = hal_chip()->ncores, .sem = ADV_SEM_DONE,
                                      .op = NPU_SEM_OP_INC, .value = 1 };
    hal_sem_post(&done);
    return NPU_EXIT_OK;
}
