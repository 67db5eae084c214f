/* SPDX-License-Identifier: MIT */
/* SRAM circular buffers over the NoC (noc/cb.h). */
#include "noc/cb.h"

#include <assert.h>
#include <string.h>

#include "noc/collective.h"
#include "noc/noc.h"
#include "npu/hal.h"

int noc_cb_init(struct noc_cb *cb, const struct noc_cb_config *cfg)
{
    if (cfg->pages == 0 || cfg->page_bytes == 0 || cfg->filled_sem >= NOC_SEM_USER_END ||
        cfg->freed_sem >= NOC_SEM_USER_END || cfg->producer_core == cfg->consumer_core ||
        cfg->producer_core >= hal_chip()->ncores || cfg->consumer_core >= hal_chip()->ncores)
        return NPU_ERR_INVAL;
    /* The ring stays below the driver's mailboxes at the top of SRAM. */
    uint64_t bytes = (uint64_t)cfg->pages * cfg->page_bytes;
    uint64_t end = hal_chip()->sram_bytes - noc_reserved_bytes();
    if (cfg->ring_offset > end || bytes > end - cfg->ring_offset)
        return NPU_ERR_RANGE;
    memset(cb, 0, sizeof(*cb));
    cb->cfg = *cfg;
    return NPU_OK;
}

int noc_cb_reserve_back(struct noc_cb *cb, uint32_t n)
{
    assert(n >= 1 && n <= cb->cfg.pages && cb->reserved == cb->pushed);
    /* Pages pushed + n must not pass the pages freed + the ring's size. */
    uint32_t need = cb->pushed + n - cb->cfg.pages;
    int rc = cb->pushed + n <= cb->cfg.pages ? NPU_OK : noc_sem_wait(cb->cfg.freed_sem, need);
    if (rc == NPU_OK)
        cb->reserved = cb->pushed + n;
    return rc;
}

static uint64_t page_addr(const struct noc_cb *cb, uint32_t index)
{
    return noc_sram_addr(cb->cfg.consumer_core, cb->cfg.ring_offset) +
           (uint64_t)(index % cb->cfg.pages) * cb->cfg.page_bytes;
}

uint64_t noc_cb_write_ptr(const struct noc_cb *cb)
{
    return page_addr(cb, cb->pushed);
}

/* One write of n pages, counted on the consumer when it has landed. */
static int push_part(struct noc_cb *cb, uint64_t src, uint32_t n)
{
    struct noc_write_async_args w = {
        .src = src, .dst = page_addr(cb, cb->pushed), .bytes = n * cb->cfg.page_bytes,
        .on_arrival = { .enable = true, .core = (uint16_t)cb->cfg.consumer_core,
                        .sem = cb->cfg.filled_sem, .value = n },
    };
    int rc = noc_write_async(&w);
    if (rc == NPU_OK)
        cb->pushed += n;
    return rc;
}

int noc_cb_push_back(struct noc_cb *cb, uint64_t src, uint32_t n)
{
    assert(n >= 1 && cb->pushed + n <= cb->reserved);
    uint32_t to_end = cb->cfg.pages - cb->pushed % cb->cfg.pages;
    if (n <= to_end)
        return push_part(cb, src, n);
    int rc = push_part(cb, src, to_end); /* wraps: the rest goes to the ring's start */
    return rc != NPU_OK ? rc : push_part(cb, src + (uint64_t)to_end * cb->cfg.page_bytes,
                                         n - to_end);
}

int noc_cb_wait_front(struct noc_cb *cb, uint32_t n)
{
    assert(n >= 1 && n <= cb->cfg.pages && cb->received == cb->popped);
    int rc = noc_sem_wait(cb->cfg.filled_sem, cb->popped + n);
    if (rc == NPU_OK)
        cb->received = cb->popped + n;
    return rc;
}

uint64_t noc_cb_read_ptr(const struct noc_cb *cb)
{
    return page_addr(cb, cb->popped);
}

int noc_cb_pop_front(struct noc_cb *cb, uint32_t n)
{
    assert(n >= 1 && cb->popped + n <= cb->received);
    struct noc_sem_args s = { .core = cb->cfg.producer_core, .sem = cb->cfg.freed_sem,
                              .value = n };
    int rc = noc_sem_inc(&s);
    if (rc == NPU_OK)
        cb->popped += n;
    return rc;
}
