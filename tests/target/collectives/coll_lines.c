/* SPDX-License-Identifier: MIT */
/*
 * Collectives image, NPU core: the line collectives of a MESH2D grid (noc_allgather_line,
 * noc_allreduce_line), which the 2-D tensor partition uses (docs/images.md). Every grid row
 * (or column) of each group gathers or reduces its own buffer at the same time; each rank
 * checks the whole line buffer bit for bit against its own ring sum. Counts of 1, 3 x line
 * + 1 (does not divide) and 4103 (receive slots reused), bf16 and fp32; a line collective
 * on a ring group is refused on every rank.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "coll_checks.h"
#include "coll_data.h"
#include "noc/collective.h"

#define expect(ok, check, ...) checks_expect((ok), (check), ccheck_names[check], __VA_ARGS__)

/* The expected element e of the line buffer after the call (labels: the line's ranks). */
static float line_want(const struct coll_case *cs, const uint32_t *labels, uint32_t len,
                       uint64_t e)
{
    uint32_t owner = coll_owner(cs->count, len, e);
    if (cs->variant & COLL_LINE_REDUCE)
        return coll_ring_sum(labels, len, owner, e, cs->dtype);
    return coll_val(labels[owner], e);
}

static uint64_t line_mismatches(const struct coll_case *cs, uint64_t buf,
                                const uint32_t *labels, uint32_t len)
{
    uint64_t bad = 0;
    for (uint64_t e = 0; e < cs->count; e++) {
        float got = coll_load(buf, e, cs->dtype), want = line_want(cs, labels, len, e);
        if (memcmp(&got, &want, sizeof(got)) != 0 && bad++ == 0)
            printf("# line %s of %ux%u count %" PRIu64 ": element %" PRIu64 " = %g, want %g\n",
                   cs->variant & COLL_LINE_COLS ? "column" : "row", cs->rows, cs->cols,
                   cs->count, e, (double)got, (double)want);
    }
    return bad;
}

void coll_lines_run(const struct coll_case *cs, struct noc_comm *comm, uint64_t buf)
{
    static uint32_t labels[NOC_GROUP_MAX];
    const struct noc_group *g = &comm->group;
    const bool cols = cs->variant & COLL_LINE_COLS, reduce = cs->variant & COLL_LINE_REDUCE;
    const uint32_t gc = g->grid_cols, i = comm->rank / gc, j = comm->rank % gc;
    const uint32_t len = cols ? g->grid_rows : gc, pos = cols ? i : j;
    for (uint32_t k = 0; k < len; k++)
        labels[k] = cols ? k * gc + j : i * gc + k;
    const uint64_t lo = cs->count * pos / len, hi = cs->count * (pos + 1) / len;
    for (uint64_t e = 0; e < cs->count; e++) /* all-gather: only our chunk is meaningful */
        coll_store(buf, e, reduce || (e >= lo && e < hi) ? coll_val(comm->rank, e) : -1.0f,
                   cs->dtype);
    struct noc_coll_args a = { .buf = buf, .count = cs->count, .dtype = cs->dtype };
    enum noc_line line = cols ? NOC_LINE_COLS : NOC_LINE_ROWS;
    const bool quiet = comm->cfg.quiet;
    comm->cfg.quiet = g->placement != NOC_PLACE_MESH2D; /* refused on purpose: no line */
    int rc = reduce ? noc_allreduce_line(comm, &a, line) : noc_allgather_line(comm, &a, line);
    comm->cfg.quiet = quiet;
    if (g->placement != NOC_PLACE_MESH2D) {
        expect(rc == NPU_ERR_INVAL, CCHECK_LINES, "a line collective on a %s group: rc %d, "
               "want NPU_ERR_INVAL", noc_placement_name(g->placement), rc);
        return;
    }
    uint64_t bad = rc == NPU_OK ? line_mismatches(cs, buf, labels, len) : 0;
    expect(rc == NPU_OK && bad == 0, CCHECK_LINES, "%s along the %s of %ux%u count %" PRIu64
           ": rc %d, %" PRIu64 " wrong elements", reduce ? "allreduce" : "allgather",
           cols ? "columns" : "rows", cs->rows, cs->cols, cs->count, rc, bad);
    if (cs->rows == 4 && cs->cols == 4 && cs->count == 1) {
        /* a rank set to the ring where its line multicasts: refused on every rank, as the
           group all-gather is (the line's members would otherwise wait for each other) */
        const enum noc_gather_algo was = comm->cfg.gather;
        comm->cfg.gather = comm->rank == 1 ? NOC_GATHER_RING : was;
        comm->cfg.quiet = true;
        rc = reduce ? noc_allreduce_line(comm, &a, line) : noc_allgather_line(comm, &a, line);
        comm->cfg.gather = was, comm->cfg.quiet = quiet;
        expect(rc == NPU_ERR_INVAL, CCHECK_LINES, "a line %s with another all-gather algorithm "
               "on rank 1: rc %d, want NPU_ERR_INVAL", reduce ? "allreduce" : "allgather", rc);
    }
}

void coll_lines_cases(uint64_t data)
{
    static const uint16_t shapes[][2] = { { 1, 3 }, { 2, 4 }, { 4, 2 }, { 4, 4 }, { 8, 8 } };
    for (uint32_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
        for (uint32_t v = 0; v < 4; v++)
            for (uint32_t ci = 0; ci < 3; ci++) {
                uint32_t len = v & COLL_LINE_COLS ? shapes[s][0] : shapes[s][1];
                struct coll_case cs = {
                    .placement = NOC_PLACE_MESH2D, .rows = shapes[s][0], .cols = shapes[s][1],
                    .kind = CCHECK_LINES, .variant = v,
                    .count = ci == 0 ? 1 : ci == 1 ? 3 * len + 1 : 4103,
                    .dtype = (v + ci) % 2 ? NPU_DTYPE_BF16 : NPU_DTYPE_FP32,
                };
                coll_case_run(&cs, data, 0);
            }
    struct coll_case ring = { .placement = NOC_PLACE_RING, .rows = 2, .cols = 2,
                              .kind = CCHECK_LINES, .variant = COLL_LINE_REDUCE, .count = 8,
                              .dtype = NPU_DTYPE_FP32 };
    coll_case_run(&ring, data, 0);
}
