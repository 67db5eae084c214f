/* SPDX-License-Identifier: MIT */
/*
 * npuctl bench model --search disagg (docs/benchmarks.md, "bench model --search disagg"):
 * MegaScale-Infer's Algorithm 1 (section 4.2) with the simulator in SIMULATE's place, over
 * the disaggregated plans the firmware runs (docs/images.md, "Disaggregated execution"):
 * for a step shape, the colocated plan the options give, then every split of the mesh's
 * columns into I >= 2 equal bands (I - 1 attention replicas of tp = the band's cores and
 * the expert band) with m = 1..4 ping-pong micro-batches (the paper's N_m), each planned,
 * built and run as one iteration. Each row prints the measured chip time, the latency
 * model's estimate of the same plan (npu_disagg.h with the expert band last, as it runs),
 * their ratio, and the tokens per second per core of the chip; the best plan is the one
 * with the most tokens per second whose iteration meets the TBT SLO.
 * With --expert-cores SPEC (the heterogeneous deployment of the paper's section 4.3): every
 * disaggregated plan runs again with its expert band's cores of the kind SPEC gives (a chip
 * file DIR/chip-mixed.toml naming them alt_cores), and the colocated plan on a mesh of that
 * kind only (DIR/chip-alt.toml); each row then also prints tokens per second per unit of
 * the chip's cost (chip_config_cost: core_cost a base core, alt_core_cost an alt one), and
 * the best plan of each mesh is named. The plan is made for the base chip: only the
 * engines' timing differs on the alt cores (serve --decode-cores does the same).
 * Decode shapes only (a prefill step's time is no TBT). A candidate whose run fails is
 * printed as such and the search goes on; with --out, a shape's files are its last
 * candidate's. What it cannot search:
 * the batch (the shape fixes it: the model image takes at most 64 requests) and plans the
 * firmware does not run (an expert band of another width, tp_a != tp_e).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include "chip_config.h"
#include "cmd_bench.h"
#include "npu_disagg.h"
#include "npu_enums.h"
#include "npu_layout.h"
#include "npuctl.h"
#include "serve_opts.h"

#define M_MAX 4u /* the paper's N_m */

/* The meshes a search runs on: the chip's, and with --expert-cores every core of the alt
   kind (colocated) or the expert band alone (disaggregated). */
enum mesh { MESH_BASE, MESH_ALT, MESH_MIXED, MESH_COUNT };
static const char *const mesh_names[MESH_COUNT] = { "base", "alt", "mixed" };

/* One candidate's result. */
struct row {
    uint32_t instances, tp, m; /* instances 1: the colocated plan */
    enum mesh mesh;
    double chip_ms, model_ms;  /* model_ms 0: no estimate */
    double cost;               /* the chip's (its mesh's core costs) */
};

/* The search's state: the options, the shape, the chips of the meshes, the best rows. */
struct search {
    const struct bench_model_opts *o;
    const struct shape *sh;
    const char *dir;
    bool hetero;
    struct serve_hetero spec;
    char chip[MESH_COUNT][NPUCTL_PATH_MAX]; /* "" : the options' chip */
    struct row best[MESH_COUNT];            /* by tokens/s per cost within the SLO */
    struct row best_disagg;                 /* the base mesh's fastest disaggregated plan */
    double colocated_ms;
    bool failed;                            /* a candidate's run failed: exit status 2 */
};

/* The latency model's estimate of the executed plan (0 if it refuses it). */
static double model_ms(const struct search *s, const struct npu_image_header *h,
                       const struct row *r)
{
    const struct npu_disagg_request q = {
        .replicas = r->instances - 1, .tp_a = r->tp, .expert_cores = r->tp,
        .micro_batches = r->m, .batch = s->sh->s.requests,
        .context = s->sh->s.context + s->sh->s.rows,
        .elem_bytes = npu_dtype_bytes(h->plan.dtype), .band_last = 1 };
    static struct npu_disagg_plan p; /* large: not on the stack */
    char err[256];
    return npu_disagg_plan(&s->o->model, &s->o->chip, &q, &p, err, sizeof(err)) == NPU_OK
               ? p.t.t_iter * 1e3 : 0.0;
}

static double tokens_per_s(const struct search *s, const struct row *r)
{
    return s->sh->s.requests / (r->chip_ms / 1e3);
}

static void print_row(const struct search *s, const struct row *r)
{
    const double tps = tokens_per_s(s, r);
    const uint32_t cores = s->o->chip.mesh_rows * s->o->chip.mesh_cols;
    char plan[48], est[32] = "-", ratio[16] = "-";
    if (r->instances == 1)
        snprintf(plan, sizeof(plan), "colocated, tp %u", r->tp);
    else
        snprintf(plan, sizeof(plan), "%u x %u + %u experts", r->instances - 1, r->tp, r->tp);
    if (r->model_ms > 0) {
        snprintf(est, sizeof(est), "%.3f", r->model_ms);
        snprintf(ratio, sizeof(ratio), "%.2f", r->chip_ms / r->model_ms);
    }
    printf("%-18s %-26s %2u %10.3f %10s %7s %10.1f %9.2f", s->sh->name, plan, r->m, r->chip_ms,
           est, ratio, tps, tps / cores);
    if (s->hetero)
        printf("  %-5s %9.1f %10.2f", mesh_names[r->mesh], r->cost, tps / r->cost);
    printf("  %s\n", r->chip_ms <= s->o->slo_ms ? "yes" : "no");
    fflush(stdout);
}

/* Plans, builds and runs one candidate (io) on its mesh; *ran false if the planner refused
   it (it said why, and a line says it was skipped). */
static int measure(struct search *s, const struct npuctl_image_opts *io, struct row *r,
                   bool *ran)
{
    struct npu_image_header h;
    struct measured m;
    const char *chip = s->chip[r->mesh][0] ? s->chip[r->mesh] : NULL;
    int rc = bench_model_measure(s->o, io, s->sh, s->dir, chip, &h, &m, ran);
    if (rc || !*ran) {
        if (!rc && r->instances == 1)
            printf("%-18s colocated: not planned (the reason is above)\n", s->sh->name);
        else if (!rc)
            printf("%-18s %u x %u + %u experts, m %u: not planned (the reason is above)\n",
                   s->sh->name, r->instances - 1, r->tp, r->tp, r->m);
        return rc;
    }
    r->tp = h.plan.tp, r->chip_ms = m.chip_us / 1e3;
    /* the latency model knows the base chip's cores only */
    r->model_ms = r->instances > 1 && r->mesh == MESH_BASE ? model_ms(s, &h, r) : 0;
    return 0;
}

/* The cost of a mesh's chip file (or the options' chip). */
static double mesh_cost(const struct search *s, enum mesh k)
{
    const struct chip_config *c = &s->o->chip;
    struct chip_config alt;
    char err[NPUCTL_ERR_MAX];
    if (s->chip[k][0] && chip_config_load(&alt, s->chip[k], err, sizeof(err)) == NPU_OK)
        c = &alt;
    return chip_config_cost(c, s->o->chip.mesh_rows, s->o->chip.mesh_cols);
}

/* Runs and prints one candidate, and keeps the best of its mesh within the SLO. */
static int try_row(struct search *s, const struct npuctl_image_opts *io, struct row r)
{
    bool ran;
    r.cost = mesh_cost(s, r.mesh);
    int rc = measure(s, io, &r, &ran);
    if (rc) { /* a run that failed (its message is above): the others still run */
        printf("%-18s %u instance(s), m %u: the run failed (keep its console with --out: "
               "DIR/%s.console.log, until the next candidate)\n", s->sh->name, r.instances,
               r.m, s->sh->name);
        s->failed = true;
        return 0;
    }
    if (!ran)
        return 0;
    print_row(s, &r);
    if (r.instances == 1 && r.mesh == MESH_BASE)
        s->colocated_ms = r.chip_ms;
    if (r.chip_ms > s->o->slo_ms)
        return 0;
    struct row *b = &s->best[r.mesh];
    if (!b->m || tokens_per_s(s, &r) / r.cost > tokens_per_s(s, b) / b->cost)
        *b = r;
    if (r.instances > 1 && r.mesh == MESH_BASE &&
        (!s->best_disagg.m || r.chip_ms < s->best_disagg.chip_ms))
        s->best_disagg = r;
    return 0;
}

/* --expert-cores: the chip files of the alt mesh (every core) and of each split's mixed mesh
   (its expert band: the last C / I columns). */
static int write_alt_chip(struct search *s)
{
    const uint32_t n = s->o->chip.mesh_rows * s->o->chip.mesh_cols;
    char list[32];
    snprintf(list, sizeof(list), "0-%u", n - 1);
    snprintf(s->chip[MESH_ALT], sizeof(s->chip[MESH_ALT]), "%s/chip-alt.toml", s->dir);
    return hetero_write_chip("--expert-cores", s->o->image.chip ? s->o->image.chip
                                                               : NPUCTL_DEFAULT_CHIP,
                             s->chip[MESH_ALT], list, &s->spec);
}

static int write_mixed_chip(struct search *s, uint32_t instances)
{
    const uint32_t R = s->o->chip.mesh_rows, C = s->o->chip.mesh_cols, w = C / instances;
    char list[CHIP_ALT_CORES_MAX];
    size_t used = 0;
    list[0] = '\0';
    for (uint32_t r = 0; r < R && used < sizeof(list); r++) {
        const uint32_t c0 = r * C + C - w;
        int k = snprintf(list + used, sizeof(list) - used, w > 1 ? "%s%u-%u" : "%s%u",
                         used ? "," : "", c0, c0 + w - 1);
        if (k < 0 || (size_t)k >= sizeof(list) - used)
            return npuctl_usage_error("--expert-cores: the band's cores pass %zu characters",
                                      sizeof(list) - 1);
        used += (size_t)k;
    }
    snprintf(s->chip[MESH_MIXED], sizeof(s->chip[MESH_MIXED]), "%s/chip-mixed.toml", s->dir);
    return hetero_write_chip("--expert-cores", s->o->image.chip ? s->o->image.chip
                                                               : NPUCTL_DEFAULT_CHIP,
                             s->chip[MESH_MIXED], list, &s->spec);
}

static void print_header(const struct search *s)
{
    printf("bench model --search disagg: %s on %s, %s (%u requests), TBT SLO %u ms%s%s\n",
           s->o->model.name, s->o->chip.name, s->sh->name, s->sh->s.requests, s->o->slo_ms,
           s->hetero ? ", alt cores: " : "", s->hetero ? s->spec.spec : "");
    printf("%-18s %-26s %2s %10s %10s %7s %10s %9s", "shape", "plan", "m", "chip ms",
           "model ms", "x model", "tokens/s", "per core");
    if (s->hetero)
        printf("  %-5s %9s %10s", "mesh", "cost", "tok/s/cost");
    printf("  SLO\n");
}

/* The disaggregated plans of one split of the columns (I bands), m = 1..M_MAX, on the base
   mesh and, heterogeneous, on the mixed one. */
static int try_split(struct search *s, uint32_t I)
{
    const uint32_t R = s->o->chip.mesh_rows, C = s->o->chip.mesh_cols;
    int rc = s->hetero ? write_mixed_chip(s, I) : 0;
    for (uint32_t mb = 1; rc == 0 && mb <= M_MAX; mb++)
        for (int k = MESH_BASE; rc == 0 && k < MESH_COUNT; k++) {
            if (k == MESH_ALT || (k == MESH_MIXED && !s->hetero))
                continue;
            struct npuctl_image_opts io = s->o->image;
            io.req.instances = I, io.req.tp = R * (C / I), io.req.disagg = 1;
            io.req.micro_batches = mb;
            rc = try_row(s, &io, (struct row){ .instances = I, .tp = io.req.tp, .m = mb,
                                               .mesh = (enum mesh)k });
        }
    return rc;
}

static void print_best(const struct search *s)
{
    const struct row *b = &s->best_disagg;
    const uint32_t cores = s->o->chip.mesh_rows * s->o->chip.mesh_cols;
    if (!b->m) {
        printf("%-18s searched: no disaggregated plan ran within the SLO\n", s->sh->name);
    } else {
        printf("%-18s searched: %u replica(s) of %u + %u expert cores, m %u: %.1f tokens/s "
               "per core", s->sh->name, b->instances - 1, b->tp, b->tp, b->m,
               tokens_per_s(s, b) / cores);
        if (s->colocated_ms > 0)
            printf(", %.2fx the colocated plan's", s->colocated_ms / b->chip_ms);
        printf("\n");
    }
    for (int k = 0; s->hetero && k < MESH_COUNT; k++) {
        const struct row *r = &s->best[k];
        char plan[48];
        if (!r->m)
            continue;
        if (r->instances == 1)
            snprintf(plan, sizeof(plan), "colocated, tp %u", r->tp);
        else
            snprintf(plan, sizeof(plan), "%u x %u + %u experts, m %u", r->instances - 1, r->tp,
                     r->tp, r->m);
        printf("%-18s best on the %s mesh: %s: %.2f tokens/s per unit cost\n", s->sh->name,
               mesh_names[k], plan, tokens_per_s(s, r) / r->cost);
    }
}

int bench_model_search_disagg(const struct bench_model_opts *o, const struct shape *sh,
                              const char *dir)
{
    static struct search s; /* large: not on the stack */
    s = (struct search){ .o = o, .sh = sh, .dir = dir, .hetero = o->expert_cores != NULL };
    if (!bench_model_shape_fits(o, sh))
        return 0;
    if (sh->s.rows != 1) { /* the paper's search is over decoding: tokens, a TBT SLO */
        printf("%-18s skipped: --search disagg searches decode steps\n", sh->name);
        return 0;
    }
    int rc = s.hetero ? hetero_parse("--expert-cores", o->expert_cores, &s.spec) : 0;
    rc = rc ? rc : s.hetero ? write_alt_chip(&s) : 0;
    if (rc)
        return rc;
    print_header(&s);
    rc = try_row(&s, &o->image, (struct row){ .instances = 1, .m = 1, .mesh = MESH_BASE });
    if (rc == 0 && s.hetero)
        rc = try_row(&s, &o->image, (struct row){ .instances = 1, .m = 1, .mesh = MESH_ALT });
    for (uint32_t I = 2; rc == 0 && I <= o->chip.mesh_cols; I++)
        if (o->chip.mesh_cols % I == 0)
            rc = try_split(&s, I);
    if (rc == 0)
        print_best(&s);
    return rc ? rc : s.failed ? NPUCTL_EXIT_USAGE : 0;
}
