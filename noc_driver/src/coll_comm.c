/* SPDX-License-Identifier: MIT */
/*
 * Communicators, the agreement before every collective, and the descriptor stream that
 * feeds the engines with flow control (noc/collective.h, docs/noc-driver.md).
 */
#include <assert.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "coll_internal.h"
#include "noc/noc.h"
#include "npu/engine.h"
#include "npu/noc_endpoint.h"
#include "npu/hal.h"
#include "npu/wait.h"

/* Per core: what each slot's semaphores should read (they only grow). */
static struct coll_expect expect[NOC_COMM_SLOTS];

/* The header multicast's descriptor (the engine reads it from SRAM at the submit). */
static struct npu_desc header_desc[2]; /* a pair group's two rectangles */

struct coll_expect *coll_expect_of(const struct noc_comm *c)
{
    return &expect[c->cfg.slot];
}

uint32_t coll_sem(const struct noc_comm *c, enum coll_sem s)
{
    _Static_assert(NOC_SEM_USER_END + NOC_COMM_SLOTS * COLL_SEM_PER_SLOT <= NOC_SEM_WRITE_ACK,
                   "the slots' semaphores fit below the barriers'");
    return NOC_SEM_USER_END + c->cfg.slot * COLL_SEM_PER_SLOT + (uint32_t)s;
}

uint32_t coll_arrive_sem(const struct noc_comm *c)
{
    assert(c->phase < COLL_PHASES_MAX);
    return coll_sem(c, (enum coll_sem)(COLL_SEM_ARRIVE0 + c->phase));
}

uint32_t *coll_arrive_expect(const struct noc_comm *c)
{
    assert(c->phase < COLL_PHASES_MAX);
    return &expect[c->cfg.slot].arrive[c->phase];
}

uint64_t coll_slot_addr(const struct noc_comm *c, uint64_t scratch, uint32_t q)
{
    uint32_t slot = (c->phase % 2) * NOC_COMM_RECV_SLOTS + q % NOC_COMM_RECV_SLOTS;
    return scratch + COLL_SCRATCH_SLOTS + (uint64_t)slot * c->cfg.segment_bytes;
}

uint32_t coll_elem_bytes(enum npu_dtype dt)
{
    return dt == NPU_DTYPE_BF16 ? 2u : 4u;
}

/* Mailbox layout at the top of SRAM: per slot, per parity: headers, then the M2N
   and all-to-all-v counts. */
static uint64_t parity_bytes(void)
{
    return (uint64_t)hal_chip()->ncores * sizeof(struct coll_header) +
           noc_m2n_pairs(hal_chip()->ncores) * sizeof(uint32_t);
}

uint64_t noc_reserved_bytes(void)
{
    return NOC_COMM_SLOTS * 2 * parity_bytes();
}

static uint64_t mailbox_offset(const struct noc_comm *c)
{
    return hal_chip()->sram_bytes - noc_reserved_bytes() +
           (c->cfg.slot * 2 + c->seq % 2) * parity_bytes();
}

const struct coll_header *coll_headers(const struct noc_comm *c)
{
    return (const struct coll_header *)(uintptr_t)(hal_self()->sram_base + mailbox_offset(c));
}

uint64_t coll_counts_offset(const struct noc_comm *c)
{
    return mailbox_offset(c) + (uint64_t)hal_chip()->ncores * sizeof(struct coll_header);
}

uint32_t *coll_counts_area(const struct noc_comm *c)
{
    return (uint32_t *)(uintptr_t)(hal_self()->sram_base + coll_counts_offset(c));
}

/* [addr, addr + bytes) inside this core's SRAM below the driver's mailboxes? */
static bool in_app_sram(uint64_t addr, uint64_t bytes)
{
    const struct hal_core_info *self = hal_self();
    uint64_t end = self->sram_base + self->sram_size - noc_reserved_bytes();
    return addr >= self->sram_base && addr <= end && bytes <= end - addr;
}

enum coll_fault coll_check_buffer(const struct noc_comm *c, uint64_t addr, uint64_t count,
                                  uint64_t elem_bytes)
{
    uint64_t end = hal_self()->sram_base + hal_self()->sram_size;
    if (elem_bytes == 0 || addr > end || count > (end - addr) / elem_bytes ||
        !in_app_sram(addr, count * elem_bytes))
        return COLL_BAD_BUFFER;
    uint64_t s0 = c->cfg.scratch, s1 = s0 + NOC_COMM_SCRATCH_BYTES(c->cfg.segment_bytes);
    if (count > 0 && addr < s1 && addr + count * elem_bytes > s0)
        return COLL_BAD_BUFFER; /* overlaps the communicator's scratch */
    return COLL_OK;
}

uint64_t noc_comm_timeout_default_ps(void)
{
    const struct hal_chip_info *chip = hal_chip();
    return (NOC_COMM_TIMEOUT_CYCLES + NOC_COMM_TIMEOUT_HOPS * chip->noc_hop_cycles) *
           chip->cycle_ps;
}

int noc_comm_init(struct noc_comm *c, const struct noc_comm_config *cfg)
{
    assert(c && cfg && cfg->group);
    uint32_t seg = cfg->segment_bytes ? cfg->segment_bytes : NOC_COMM_SEGMENT_DEFAULT;
    if (cfg->slot >= NOC_COMM_SLOTS || cfg->gather > NOC_GATHER_RING || seg % 4 || seg < 64 || seg > NOC_COMM_SEGMENT_MAX ||
        !in_app_sram(cfg->scratch, NOC_COMM_SCRATCH_BYTES(seg)))
        return NPU_ERR_INVAL;
    if (expect[cfg->slot].broken)
        return NPU_ERR_STATE;
    int rank = noc_group_rank_of(cfg->group, hal_self()->core_id);
    if (rank < 0)
        return NPU_ERR_RANGE;
    memset(c, 0, sizeof(*c));
    c->cfg = *cfg;
    c->cfg.segment_bytes = seg;
    c->cfg.timeout_ps = cfg->timeout_ps ? cfg->timeout_ps : noc_comm_timeout_default_ps();
    c->group = *cfg->group;
    c->cfg.group = &c->group;
    c->rank = (uint32_t)rank;
    return NPU_OK;
}

void coll_header_init(const struct noc_comm *c, struct coll_header *h, enum coll_kind kind)
{
    memset(h, 0, sizeof(*h));
    h->magic = COLL_MAGIC;
    h->seq = c->seq;
    h->kind = (uint8_t)kind;
    h->placement = (uint8_t)(c->group.placement | (noc_group_is_pair(&c->group) ? 0x80 : 0));
    h->rank = (uint16_t)c->rank;
    h->size = (uint16_t)c->group.size;
    h->rect = c->group.rect;
}

static const char *kind_name(uint32_t kind)
{
    static const char *const names[] = { "?", "barrier", "broadcast", "allgather",
                                         "reduce_scatter", "allreduce", "alltoall",
                                         "m2n_dispatch", "m2n_combine", "allgather_rows",
                                         "allgather_cols", "allreduce_rows",
                                         "allreduce_cols", "alltoallv_dispatch",
                                         "alltoallv_combine", "allgather_blocks",
                                         "exchange_blocks" };
    return kind < sizeof(names) / sizeof(names[0]) ? names[kind] : "?";
}

/* One console line from this rank about the collective being refused. */
static void refuse(const struct noc_comm *c, const struct coll_header *mine, const char *msg)
{
    if (c->cfg.quiet)
        return;
    printf("noc: rank %" PRIu32 " (core %" PRIu32 "): %s #%" PRIu32 " on a %s group of %" PRIu32
           " at (%u,%u) refused: %s\n", c->rank, hal_self()->core_id, kind_name(mine->kind),
           mine->seq, noc_placement_name(c->group.placement), c->group.size,
           c->group.rect.row0, c->group.rect.col0, msg);
}

static bool same_call(const struct coll_header *a, const struct coll_header *b)
{
    /* Field by field, not memcmp: every rank runs this once per member per collective. */
    return a->magic == COLL_MAGIC && a->seq == b->seq && a->kind == b->kind &&
           a->size == b->size && a->placement == b->placement &&
           a->rect.row0 == b->rect.row0 && a->rect.col0 == b->rect.col0 &&
           a->rect.rows == b->rect.rows && a->rect.cols == b->rect.cols;
}

/* An exchange of blocks: the blocks the ranks send (capacity) and those they expect (buf2)
   add up to the same number, else some rank would wait for a block that never comes, or a
   block would land on a rank that has moved on. */
static int judge_exchange(const struct noc_comm *c, const struct coll_header *mine)
{
    const struct coll_header *h = coll_headers(c);
    uint64_t sent = 0, expected = 0;
    char msg[160];
    const uint64_t off0 = h[0].buf - npu_map_instance_base(NPU_MAP_SRAM, c->group.core[0]);
    for (uint32_t k = 0; k < c->group.size; k++) {
        sent += h[k].capacity, expected += h[k].buf2;
        const uint64_t off = h[k].buf - npu_map_instance_base(NPU_MAP_SRAM, c->group.core[k]);
        if (mine->root && off != off0) {
            snprintf(msg, sizeof(msg), "rank %" PRIu32 ": a multicasting exchange needs every "
                     "buffer at one offset, and its differs from rank 0's", k);
            refuse(c, mine, msg);
            return NPU_ERR_INVAL;
        }
    }
    if (sent == expected)
        return NPU_OK;
    snprintf(msg, sizeof(msg), "the ranks send %" PRIu64 " deliveries and expect %" PRIu64,
             sent, expected);
    refuse(c, mine, msg);
    return NPU_ERR_INVAL;
}

/* Word i of a header (its 64 bytes as eight words, little-endian as RISC-V is); the
   header is 8-byte aligned (it holds uint64_t fields): told so, the copy is one load, not
   eight byte loads. */
static inline uint64_t header_word(const struct coll_header *h, uint32_t i)
{
    _Static_assert(_Alignof(struct coll_header) == 8, "a header's words are aligned");
    uint64_t w;
    memcpy(&w, __builtin_assume_aligned((const char *)h + 8u * i, 8), sizeof(w));
    return w;
}

/* Whether every rank's header is mine but for its rank, with no fault: what judge's checks
   pass, tested as words (judge's field by field cost 7 % of a serving run's guest
   instructions: every rank reads every member's header per collective). The words:
   0 magic and seq, 1 kind, dtype, placement, fault, rank and size, 2 the rectangle, 3 root
   and capacity, 4 count, 6 buf2; capacity and buf2 only where judge compares them. */
static bool all_agree(const struct noc_comm *c, const struct coll_header *mine)
{
    _Static_assert(offsetof(struct coll_header, fault) == 11 &&
                   offsetof(struct coll_header, rank) == 12 &&
                   offsetof(struct coll_header, rect) == 16 &&
                   offsetof(struct coll_header, root) == 24 &&
                   offsetof(struct coll_header, capacity) == 28 &&
                   offsetof(struct coll_header, count) == 32 &&
                   offsetof(struct coll_header, buf2) == 48, "the words all_agree reads");
    const struct coll_header *h = coll_headers(c);
    const bool cap = mine->kind == COLL_ALLGATHER || mine->kind == COLL_ALLREDUCE ||
                     mine->kind == COLL_ALLGATHER_BLOCKS || coll_kind_is_line(mine->kind);
    const bool buf2 = mine->kind == COLL_ALLGATHER_BLOCKS;
    const uint64_t fault_rank = 0xffull << 24 | 0xffffull << 32;
    const uint64_t w0 = header_word(mine, 0), w1 = header_word(mine, 1) & ~fault_rank;
    const uint64_t w2 = header_word(mine, 2), w4 = header_word(mine, 4);
    const uint64_t m3 = cap ? ~0ull : 0xffffffffull, w3 = header_word(mine, 3) & m3;
    const uint64_t w6 = buf2 ? header_word(mine, 6) : 0, m6 = buf2 ? ~0ull : 0;
    if (mine->magic != COLL_MAGIC)
        return false;
    for (uint32_t k = 0; k < c->group.size; k++) {
        const struct coll_header *x = &h[k];
        if (header_word(x, 0) != w0 || header_word(x, 1) != (w1 | (uint64_t)k << 32) ||
            header_word(x, 2) != w2 || (header_word(x, 3) & m3) != w3 ||
            header_word(x, 4) != w4 || (header_word(x, 6) & m6) != w6)
            return false;
    }
    return true;
}

/* Judges every rank's header in rank order; the first fault decides (the same everywhere). */
static int judge(const struct noc_comm *c, const struct coll_header *mine)
{
    if (all_agree(c, mine))
        return mine->kind == COLL_EXCHANGE_BLOCKS ? judge_exchange(c, mine) : NPU_OK;
    static const char *const faults[] = {
        "", "a buffer outside its SRAM (or over the communicator's scratch)",
        "bad arguments (count, dtype, root, senders, counts or reduce op)",
        "M2N or all-to-all-v counts beyond the driver's limits, or a plan too small for them",
        "too many of its own descriptors queued on the NoC or vector engine",
        "it gave up waiting for the others' headers" };
    const struct coll_header *h = coll_headers(c);
    char msg[160];
    for (uint32_t k = 0; k < c->group.size; k++) {
        if (!same_call(&h[k], mine) || h[k].rank != k) {
            snprintf(msg, sizeof(msg), "rank %" PRIu32 " called %s #%" PRIu32 " on another "
                     "group (size %u at (%u,%u))", k, kind_name(h[k].kind), h[k].seq,
                     h[k].size, h[k].rect.row0, h[k].rect.col0);
            refuse(c, mine, msg);
            return NPU_ERR_INVAL;
        }
        if (h[k].fault != COLL_OK) {
            snprintf(msg, sizeof(msg), "rank %" PRIu32 ": %s", k,
                     h[k].fault <= COLL_ABORT ? faults[h[k].fault] : "?");
            refuse(c, mine, msg);
            return h[k].fault == COLL_BAD_BUFFER ? NPU_ERR_RANGE : NPU_ERR_INVAL;
        }
        if ((mine->kind == COLL_ALLGATHER || mine->kind == COLL_ALLREDUCE ||
             mine->kind == COLL_ALLGATHER_BLOCKS || coll_kind_is_line(mine->kind)) &&
            h[k].capacity != h[0].capacity) {
            snprintf(msg, sizeof(msg), "rank %" PRIu32 ": all-gather algorithm %" PRIu32
                     " differs from rank 0's %" PRIu32, k, h[k].capacity, h[0].capacity);
            refuse(c, mine, msg);
            return NPU_ERR_INVAL;
        }
        if (h[k].count != h[0].count || h[k].dtype != h[0].dtype || h[k].root != h[0].root ||
            (mine->kind == COLL_ALLGATHER_BLOCKS && h[k].buf2 != h[0].buf2)) {
            snprintf(msg, sizeof(msg), "rank %" PRIu32 ": count %" PRIu64 ", dtype %u, "
                     "root/senders/op/columns %" PRIu32 " (or row stride) differ from rank 0's %" PRIu64
                     ", %u, %" PRIu32,
                     k, h[k].count, h[k].dtype, h[k].root, h[0].count, h[0].dtype, h[0].root);
            refuse(c, mine, msg);
            return NPU_ERR_INVAL;
        }
    }
    return mine->kind == COLL_EXCHANGE_BLOCKS ? judge_exchange(c, mine) : NPU_OK;
}

/* The ranks whose header has not come, on the console. */
static void report_missing(const struct noc_comm *c, const struct coll_header *mine)
{
    const struct coll_header *h = coll_headers(c);
    char msg[160];
    int len = snprintf(msg, sizeof(msg), "no header within %" PRIu64 " ns from rank(s)",
                       c->cfg.timeout_ps / 1000);
    for (uint32_t k = 0; k < c->group.size && len < (int)sizeof(msg) - 8; k++)
        if (!same_call(&h[k], mine))
            len += snprintf(msg + len, sizeof(msg) - (size_t)len, " %" PRIu32, k);
    refuse(c, mine, msg);
}

static bool in_rect(const struct noc_rect *r)
{
    const struct hal_core_info *self = hal_self();
    return self->row >= r->row0 && self->row < (uint32_t)r->row0 + r->rows &&
           self->col >= r->col0 && self->col < (uint32_t)r->col0 + r->cols;
}

int coll_multicast_group(const struct noc_comm *c, struct noc_multicast_args *m,
                         struct npu_desc d[2])
{
    /* HAZARD: the callers reuse the source once their own copy has landed (the header's
       staging, the counts row). The NoC engine runs one transfer at a time, in order, so
       the rectangle holding this core goes last: its loopback landing means the other
       rectangle's copy has been read too. */
    const bool pair = noc_group_is_pair(&c->group);
    const bool mine_first = pair && in_rect(&c->group.rect);
    const struct noc_rect *rects[2] = { mine_first ? &c->group.rect2 : &c->group.rect,
                                        mine_first ? &c->group.rect : &c->group.rect2 };
    const uint32_t n = pair ? 2 : 1;
    for (uint32_t i = 0; i < n; i++) {
        const struct noc_rect *r = rects[i];
        m->row0 = r->row0, m->col0 = r->col0;
        m->row1 = (uint16_t)(r->row0 + r->rows - 1), m->col1 = (uint16_t)(r->col0 + r->cols - 1);
        noc_multicast_desc(&d[i], m);
    }
    return engine_submit(d, n);
}

/* Multicasts the staged header to the group's mailboxes (the same offset everywhere). */
static int send_header(struct noc_comm *c, const struct coll_header *h)
{
    struct coll_header *staged = (struct coll_header *)(uintptr_t)(c->cfg.scratch +
                                                                   COLL_SCRATCH_HEADER);
    *staged = *h;
    struct noc_multicast_args m = {
        .src = (uint64_t)(uintptr_t)staged,
        .dst_offset = mailbox_offset(c) + c->rank * sizeof(struct coll_header),
        .rows = 1, .row_bytes = sizeof(*staged), .src_stride = sizeof(*staged),
        .dst_stride = sizeof(*staged),
        .sync = { .signal = true, .signal_sem = (uint8_t)coll_sem(c, COLL_SEM_HDR),
                  .signal_value = 1, .keep_data = true }, /* performance mode too */
    };
    return coll_multicast_group(c, &m, header_desc);
}

/* The slot is out of step on this core: refuse everything on it until the next boot. */
void coll_break(struct noc_comm *c)
{
    coll_expect_of(c)->broken = true;
}

int coll_agree(struct noc_comm *c, struct coll_header *mine)
{
    assert(c->cfg.group == &c->group && "communicator not initialised (noc_comm_init)");
    if (coll_expect_of(c)->broken)
        return NPU_ERR_STATE;
    c->phase = 0;
    mine->scratch = c->cfg.scratch;
    if (mine->fault == COLL_OK && (engine_pending(NPU_ENGINE_NOC) > NOC_COMM_QUEUED_MAX ||
                                   engine_pending(NPU_ENGINE_VECTOR) > NOC_COMM_QUEUED_MAX))
        mine->fault = COLL_BUSY;
    int rc = send_header(c, mine);
    if (rc != NPU_OK) {
        refuse(c, mine, "the NoC engine refused the header");
        coll_break(c);
        return rc;
    }
    struct coll_expect *ex = coll_expect_of(c);
    ex->hdr += c->group.size;
    rc = hal_sem_wait_until(coll_sem(c, COLL_SEM_HDR), ex->hdr,
                            hal_time_ps() + c->cfg.timeout_ps);
    if (rc != NPU_OK) {
        report_missing(c, mine);
        mine->fault = COLL_ABORT; /* tell the late ones, so they refuse too */
        send_header(c, mine);
        coll_break(c);
        return rc;
    }
    rc = judge(c, mine);
    if (rc != NPU_OK)
        c->seq++; /* every rank refused this call alike: the next one goes on */
    return rc;
}
