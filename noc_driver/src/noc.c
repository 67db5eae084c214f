/* SPDX-License-Identifier: MIT */
/* The NoC dataflow API (noc/noc.h): one NoC-engine descriptor per call. */
#include "noc/noc.h"

#include "npu/engine.h"
#include "npu/hal.h"
#include "npu/noc_endpoint.h"
#include "npu/wait.h"

/* This core's transfer counts (each core runs its own copy of the image). */
static uint32_t writes_issued, reads_issued;

/* The engine reads descriptors from SRAM at the submit; one is enough per call. */
static struct npu_desc desc;

uint64_t noc_sram_addr(uint32_t core, uint64_t offset)
{
    return npu_map_instance_base(NPU_MAP_SRAM, core) + offset;
}

/* SIGNAL: the caller's increment; SIGNAL2: the acknowledgement back to this core. */
static struct engine_sync transfer_sync(const struct noc_sem_inc *inc,
                                        const struct noc_gate *g, uint8_t ack_sem)
{
    struct engine_sync s = {
        .wait = g->enable, .wait_sem = g->sem, .wait_value = g->value,
        .signal2 = true, .signal2_core = (uint16_t)hal_self()->core_id,
        .signal2_sem = ack_sem, .signal2_value = 1,
    };
    if (inc && inc->enable) {
        s.signal = true;
        s.signal_core = inc->core;
        s.signal_sem = inc->sem;
        s.signal_value = inc->value;
    }
    return s;
}

int noc_write_async(const struct noc_write_async_args *a)
{
    struct noc_write_args w = {
        .src = a->src, .dst = a->dst, .rows = 1, .row_bytes = a->bytes,
        .src_stride = a->bytes, .dst_stride = a->bytes,
        .sync = transfer_sync(&a->on_arrival, &a->after, NOC_SEM_WRITE_ACK),
    };
    w.sync.keep_data = a->control;
    noc_write_desc(&desc, &w);
    int rc = engine_submit(&desc, 1);
    if (rc == NPU_OK)
        writes_issued++;
    return rc;
}

int noc_read_async(const struct noc_read_async_args *a)
{
    struct noc_read_args r = {
        .src = a->src, .dst = a->dst, .rows = 1, .row_bytes = a->bytes,
        .src_stride = a->bytes, .dst_stride = a->bytes,
        .sync = transfer_sync(NULL, &a->after, NOC_SEM_READ_DONE),
    };
    noc_read_desc(&desc, &r);
    int rc = engine_submit(&desc, 1);
    if (rc == NPU_OK)
        reads_issued++;
    return rc;
}

int noc_multicast_async(const struct noc_multicast_async_args *a)
{
    struct noc_multicast_args m = {
        .src = a->src, .dst_offset = a->dst_offset, .rows = 1, .row_bytes = a->bytes,
        .src_stride = a->bytes, .dst_stride = a->bytes, .row0 = a->row0, .col0 = a->col0,
        .row1 = a->row1, .col1 = a->col1,
        .sync = transfer_sync(&a->on_arrival, &a->after, NOC_SEM_WRITE_ACK),
    };
    noc_multicast_desc(&desc, &m);
    int rc = engine_submit(&desc, 1);
    if (rc == NPU_OK)
        writes_issued += (uint32_t)(a->row1 - a->row0 + 1) * (uint32_t)(a->col1 - a->col0 + 1);
    return rc;
}

uint32_t noc_writes_issued(void)
{
    return writes_issued;
}

uint32_t noc_writes_acked(void)
{
    return hal_sem_read(NOC_SEM_WRITE_ACK);
}

uint32_t noc_reads_issued(void)
{
    return reads_issued;
}

int noc_write_barrier(void)
{
    return hal_sem_wait(NOC_SEM_WRITE_ACK, writes_issued);
}

int noc_read_barrier(void)
{
    return hal_sem_wait(NOC_SEM_READ_DONE, reads_issued);
}

static int sem_post(const struct noc_sem_args *a, uint32_t op)
{
    struct hal_sem_post_args p = { .core = a->core, .sem = a->sem, .op = op,
                                   .value = a->value };
    return hal_sem_post(&p);
}

int noc_sem_inc(const struct noc_sem_args *a)
{
    return sem_post(a, NPU_SEM_OP_INC);
}

int noc_sem_set(const struct noc_sem_args *a)
{
    return sem_post(a, NPU_SEM_OP_SET);
}

int noc_sem_wait(uint32_t sem, uint32_t value)
{
    return hal_sem_wait(sem, value);
}

int noc_sem_wait_until(uint32_t sem, uint32_t value, uint64_t deadline_ps)
{
    return hal_sem_wait_until(sem, value, deadline_ps);
}
