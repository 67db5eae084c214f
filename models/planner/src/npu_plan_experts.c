/* SPDX-License-Identifier: MIT */
/*
 * Expert placement under expert parallelism (docs/images.md, "Expert placement"): the
 * image's expert map, which slices of which experts each rank holds in each layer.
 *
 * Contiguous: rank r holds whole experts [r E / p, (r + 1) E / p) in every layer; with more
 * ranks than experts (p = U E), U ranks in order hold one unit each of every expert.
 * Balanced: every expert is cut into U units of its intermediate width (U as large as keeps
 * a unit at least the matrix array's width, at most NPU_EXPERT_UNITS_MAX), every rank gets
 * the same number of units (so the same weight bytes: the HBM bound is met by every rank
 * reading its own share), and the units go, most popular expert first, to the rank with the
 * least expected load, as many at a time as keep it under the mean. A popular expert thus
 * ends up in slices on several ranks, each running all the expert's rows over its slice
 * (the rows are dispatched to every slice; the combine adds the partial outputs), and a
 * cold one whole on one rank. The expected load is the routing model's: each layer's
 * popularity sampled over NPU_PLACEMENT_SAMPLES rows with the draws the chip makes
 * (routing_model.h). Under uniform routing, or in functional mode, where the routing
 * model does not apply, contiguous is the default.
 */
#include <stdlib.h>
#include <string.h>

#include "noc/coll_sizes.h"
#include "noc/placement.h"
#include "npu_layout.h"
#include "npu_plan_internal.h"
#include "npu_regs.h"
#include "routing_model.h"

#define NPU_PLACEMENT_SAMPLES 4096u
/* The default's balanced placement: for one MoE group (skewed routing) on at most this many
   ranks, for several groups served group by group on more (see npu_planner_experts) */
#define NPU_BALANCED_DEFAULT_RANKS 64u

/* Units per expert: the most, up to NPU_EXPERT_UNITS_MAX, that divide ff and keep a unit at
   least sa_cols wide (1 if none). */
static uint32_t choose_units(uint32_t ff, uint32_t sa_cols)
{
    for (uint32_t u = NPU_EXPERT_UNITS_MAX; u > 1; u--)
        if (ff % u == 0 && ff / u >= sa_cols)
            return u;
    return 1;
}

uint32_t npu_planner_contiguous_units(const struct model_config *c, uint32_t tp)
{
    const uint32_t E = c->num_experts, u = E ? tp / E : 1;
    return E && tp > E && tp % E == 0 && u <= NPU_EXPERT_UNITS_MAX &&
                   c->moe_intermediate_size % u == 0
               ? u
               : 1;
}

/* expected_load's results for the routing model last asked about, kept for the process: the
   automatic plan and the planner's fallbacks place the experts several times over with one
   routing model, and drawing its samples anew each time was most of the planning time
   (Qwen3-30B-A3B on large-64: about 1.5 s of 1.9). Layers past the table are drawn every
   time. The planner runs on one thread. */
#define NPU_LOAD_MEMO_LAYERS 128u
static struct {
    struct routing_model rm;
    bool have[NPU_LOAD_MEMO_LAYERS];
    double load[NPU_LOAD_MEMO_LAYERS][ROUTING_EXPERTS_MAX];
} load_memo;

static bool same_model(const struct routing_model *a, const struct routing_model *b)
{
    return a->experts == b->experts && a->k == b->k && a->skew_milli == b->skew_milli &&
           a->seed == b->seed;
}

/* load[e]: layer l's expected choices of expert e per row (they sum to k). */
static void expected_load(const struct npu_plan *p, const struct model_config *c, uint32_t l,
                          double *load)
{
    const struct routing_model rm = { .experts = c->num_experts, .k = c->experts_per_token,
                                      .skew_milli = p->routing == NPU_ROUTING_SKEWED
                                                        ? p->routing_skew_milli : 0,
                                      .seed = p->routing_seed };
    const size_t bytes = c->num_experts * sizeof(double);
    if (!same_model(&rm, &load_memo.rm)) {
        memset(load_memo.have, 0, sizeof(load_memo.have));
        load_memo.rm = rm;
    }
    if (l < NPU_LOAD_MEMO_LAYERS && load_memo.have[l]) {
        memcpy(load, load_memo.load[l], bytes);
        return;
    }
    uint64_t cum[ROUTING_EXPERTS_MAX];
    uint32_t idx[ROUTING_EXPERTS_MAX];
    routing_layer_table(&rm, l, cum);
    memset(load, 0, bytes);
    for (uint32_t i = 0; i < NPU_PLACEMENT_SAMPLES; i++) {
        routing_draw(&rm, cum, l, i, 0, idx);
        for (uint32_t j = 0; j < rm.k; j++)
            load[idx[j]] += 1.0 / NPU_PLACEMENT_SAMPLES;
    }
    if (l < NPU_LOAD_MEMO_LAYERS) {
        memcpy(load_memo.load[l], load, bytes);
        load_memo.have[l] = true;
    }
}

static void add_slice(struct planner *pl, uint32_t l, uint32_t r, uint32_t e, uint32_t u0,
                      uint32_t n, uint32_t rep, uint32_t reps)
{
    if (pl->nxmap == pl->xcap) {
        pl->xcap = pl->xcap ? pl->xcap * 2 : 1024;
        pl->xmap = realloc(pl->xmap, pl->xcap * sizeof(*pl->xmap));
        if (!pl->xmap)
            abort(); /* host out of memory */
    }
    pl->xmap[pl->nxmap++] = (struct npu_image_expert_slice){
        .layer = (uint16_t)l, .rank = (uint16_t)r, .expert = (uint16_t)e,
        .unit0 = (uint8_t)u0, .units = (uint8_t)n, .rep = (uint8_t)rep, .reps = (uint8_t)reps };
}

/* Orders a layer's slices by rank, then expert and unit (the map's order). */
static int slice_cmp(const void *a, const void *b)
{
    const struct npu_image_expert_slice *x = a, *y = b;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    if (x->expert != y->expert)
        return x->expert < y->expert ? -1 : 1;
    if (x->rep != y->rep)
        return x->rep < y->rep ? -1 : 1;
    return x->unit0 < y->unit0 ? -1 : x->unit0 > y->unit0;
}

/* The time model of a slice (docs/images.md, "Expert placement"): its HBM bytes over the
   core's HBM bandwidth (b), and its GEMMs' matrix time (c) for the rows routed to its copy
   of its expert: every slice of a copy serves all of them. The bytes are the slice's
   weights and, under the MoE over the layer, its rows: each goes through the rank's HBM
   four times (received into the spill, gathered for the GEMMs, outputs written over it,
   read back for the combine), which cutting the expert into more slices multiplies and
   copies of it divide. The array is weight-stationary: a fold of R x C weights lasts
   max(rows, R) cycles (matrix_engine.h), so an expert with fewer rows than R costs as much
   as one with R: its weights pass the array at R elements a cycle per column whatever the
   rows. The ring stages weights ahead of the GEMMs (the engines overlap), so a rank's MoE
   time is taken as the larger of its bytes time and its matrix time. Without the chip's
   clock and bandwidth, rows alone (b = 0, c = rows). */
struct unit_cost {
    double tb;          /* seconds of HBM per unit */
    double tr;          /* seconds of HBM per row a slice serves */
    double g;           /* rows of a group */
    bool clocked;       /* the chip's clock and array are known */
};

static struct unit_cost unit_costs(const struct planner *pl)
{
    const struct model_config *c = pl->cfg;
    const double w = (double)c->moe_intermediate_size / pl->plan.expert_units;
    const struct npu_plan_chip *ch = pl->chip;
    struct unit_cost u = { .tb = 0, .tr = 0, .g = pl->x_rows, .clocked = false };
    if (ch->freq_mhz && ch->hbm_gbps > 0 && ch->sa_rows && ch->sa_cols) {
        u.tb = 3.0 * c->hidden_size * w * pl->eb / (ch->hbm_gbps * 1e9);
        u.tr = pl->x_wide ? 4.0 * c->hidden_size * pl->eb / (ch->hbm_gbps * 1e9) : 0;
        u.clocked = true;
    }
    return u;
}

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
    return (a + b - 1) / b;
}

/* Matrix time of a slice of n units over `rows` expected rows: gate and up [w][d], down
   [d][w] (w = n units' columns), each fold max(rows, R) cycles. */
static double slice_matrix(const struct planner *pl, const struct unit_cost *u, uint32_t n,
                           double rows)
{
    if (!u->clocked)
        return n * rows;
    const struct npu_plan_chip *ch = pl->chip;
    const uint64_t d = pl->cfg->hidden_size;
    const uint64_t w = (uint64_t)pl->cfg->moe_intermediate_size / pl->plan.expert_units * n;
    const uint64_t folds = 2 * ceil_div(d, ch->sa_rows) * ceil_div(w, ch->sa_cols) +
                           ceil_div(w, ch->sa_rows) * ceil_div(d, ch->sa_cols);
    const double per_fold = rows > ch->sa_rows ? rows : (double)ch->sa_rows;
    return (double)folds * per_fold / (ch->freq_mhz * 1e6);
}

/* A rank's MoE time from its bytes time b and matrix time c. */
static double rank_time(double b, double c)
{
    return b > c ? b : c;
}

/* A slice of n units serving `rows` rows: its bytes time and matrix time. */
static double slice_bytes(const struct unit_cost *u, uint32_t n, double rows)
{
    return n * u->tb + rows * u->tr;
}

static double slice_time(const struct planner *pl, const struct unit_cost *u, uint32_t n,
                         double rows)
{
    return rank_time(slice_bytes(u, n, rows), slice_matrix(pl, u, n, rows));
}

/* A balanced rank's expected MoE time in a layer: every expert's weights and rows once
   (whole, not cut or copied), spread evenly over the ranks. */
static double balanced_time(const struct planner *pl, const struct unit_cost *u,
                            const double *load)
{
    const uint32_t E = pl->cfg->num_experts, U = pl->plan.expert_units, tp = pl->plan.tp;
    double mean_c = 0, mean_b = 0;
    for (uint32_t e = 0; e < E; e++) {
        mean_c += slice_matrix(pl, u, U, u->g * load[e]) / tp;
        mean_b += slice_bytes(u, U, u->g * load[e]) / tp;
    }
    return rank_time(mean_b, mean_c);
}

/* Where slices of the layer stand while they are placed: per rank, its bytes time and
   matrix time, and which experts it already holds a slice of. */
struct ranks {
    double b[NOC_GROUP_MAX], c[NOC_GROUP_MAX];
    uint32_t units[NOC_GROUP_MAX];
};

/* The rank a slice of expert e (bytes time b, matrix time c) lengthens least (fewest units,
   then lowest index, on ties), among those holding no slice of e yet (slices [first, end)). */
static uint32_t best_rank(const struct planner *pl, const struct ranks *rk, uint64_t first,
                          uint32_t e, double b, double c)
{
    static uint8_t holds[NOC_GROUP_MAX];
    memset(holds, 0, pl->plan.tp);
    for (uint64_t i = first; i < pl->nxmap; i++)
        if (pl->xmap[i].expert == e)
            holds[pl->xmap[i].rank] = 1;
    uint32_t best = pl->plan.tp;
    double best_t = 0;
    for (uint32_t r = 0; r < pl->plan.tp; r++) {
        if (holds[r])
            continue;
        const double t = rank_time(rk->b[r] + b, rk->c[r] + c);
        if (best == pl->plan.tp || t < best_t ||
            (t == best_t && rk->units[r] < rk->units[best]))
            best = r, best_t = t;
    }
    return best;
}

/* How expert e (rows expected in a group) is cut: c slices (a divisor of U) of each of r
   copies (r_lo <= r <= r_hi), every copy serving 1/r of the rows. The fewest pieces (c r,
   at most tp) whose time each stays under t_piece, then the shorter; else the shortest
   pieces, then the fewer. Slicing divides a piece's weights and matrix time but not its
   rows; copies divide its rows and matrix time but not its weights. */
struct cut {
    uint32_t c, r;
};

static struct cut cut_of(const struct planner *pl, const struct unit_cost *u, double rows,
                         double t_piece, uint32_t r_lo, uint32_t r_hi)
{
    const uint32_t U = pl->plan.expert_units, tp = pl->plan.tp;
    struct cut fit = { 0, 0 }, best = { 0, 0 };
    double fit_t = 0, best_t = 0;
    for (uint32_t r = r_lo; r <= r_hi; r++)
        for (uint32_t c = 1; c <= U && c * r <= tp; c++) {
            if (U % c)
                continue;
            const double t = slice_time(pl, u, U / c, rows / r);
            const uint32_t n = c * r;
            if (t <= t_piece && (!fit.c || n < fit.c * fit.r ||
                                 (n == fit.c * fit.r && t < fit_t * (1 - 1e-9))))
                fit = (struct cut){ c, r }, fit_t = t;
            if (!best.c || t < best_t * (1 - 1e-9) || (t <= best_t && n < best.c * best.r))
                best = (struct cut){ c, r }, best_t = t;
        }
    return fit.c ? fit : best;
}

/* Expert e's cut (rows expected in a group; t_slices, t_rank: a balanced rank's time by the
   weights alone and by the whole model). Its slices without copies, by weights and matrix
   time alone, as before copies were built; with copies allowed, and where those slices
   exceed half a balanced rank by the whole model (the rows' bytes too), the copies'
   fewest pieces under it instead, if shorter. An expert without copies keeps its slices:
   measured, whole experts (which the rows' bytes alone favour) ran a 2048-token prefill
   under uniform routing 1.47x slower than halves (the ring loads and computes in coarser
   steps; docs/results.md (#9)). */
static struct cut expert_cut(const struct planner *pl, const struct unit_cost *weights,
                             const struct unit_cost *all, double rows, double t_slices,
                             double t_rank, uint32_t copies)
{
    const uint32_t U = pl->plan.expert_units;
    /* pieces of at most half a balanced rank: with whole pieces of about half a rank
       (Qwen3-30B-A3B's cold experts on 64 ranks) LPT must give some rank three, 1.5x the
       mean's bytes, once hot slices have taken ranks' matrix time */
    const struct cut k0 = cut_of(pl, weights, rows, t_slices / 2, 1, 1);
    const double t0 = slice_time(pl, all, U / k0.c, rows);
    if (copies < 2 || t0 <= t_rank / 2)
        return k0;
    const struct cut k = cut_of(pl, all, rows, t_rank / 2, 2, copies);
    return slice_time(pl, all, U / k.c, rows / k.r) < t0 * (1 - 1e-9) ? k : k0;
}

/* Layer l, balanced: each expert cut (expert_cut), then the pieces, longest first, each to
   the rank it lengthens least (LPT); weighed by the weights and matrix time alone without
   copies (copies 1), as before copies were built, by the whole model with them. */
static void place_balanced(struct planner *pl, uint32_t l, const double *load, uint32_t copies)
{
    const uint32_t E = pl->cfg->num_experts, U = pl->plan.expert_units;
    const struct unit_cost all = unit_costs(pl);
    struct unit_cost weights = all;
    weights.tr = 0;
    const struct unit_cost *u = copies > 1 ? &all : &weights;
    static struct ranks rk;
    memset(&rk, 0, sizeof(rk));
    const double t_slices = balanced_time(pl, &weights, load);
    const double t_rank = balanced_time(pl, &all, load);
    /* the pieces: (expert, unit0, units, copy, copies), longest first; at most one a unit
       of a copy */
    enum { PIECES_MAX = NPU_MODEL_EXPERTS_MAX * NPU_EXPERT_UNITS_MAX * NPU_EXPERT_REPLICAS_MAX };
    static uint32_t pe[PIECES_MAX];
    static uint8_t pu0[PIECES_MAX], pn[PIECES_MAX], prep[PIECES_MAX], preps[PIECES_MAX];
    static double pt[PIECES_MAX];
    uint32_t np = 0;
    for (uint32_t e = 0; e < E; e++) {
        const double rows = u->g * load[e];
        const struct cut k = expert_cut(pl, &weights, &all, rows, t_slices, t_rank, copies);
        const uint32_t n = U / k.c;
        const double t = slice_time(pl, u, n, rows / k.r);
        for (uint32_t j = 0; j < k.c * k.r; j++) {
            uint32_t at = np++; /* insertion sort, longest first, stable */
            while (at > 0 && pt[at - 1] < t) {
                pe[at] = pe[at - 1], pu0[at] = pu0[at - 1], pn[at] = pn[at - 1];
                prep[at] = prep[at - 1], preps[at] = preps[at - 1], pt[at] = pt[at - 1], at--;
            }
            pe[at] = e, pu0[at] = (uint8_t)(j % k.c * n), pn[at] = (uint8_t)n;
            prep[at] = (uint8_t)(j / k.c), preps[at] = (uint8_t)k.r, pt[at] = t;
        }
    }
    const uint64_t first = pl->nxmap;
    for (uint32_t i = 0; i < np; i++) {
        const double rows = u->g * load[pe[i]] / preps[i];
        const double b = slice_bytes(u, pn[i], rows), c = slice_matrix(pl, u, pn[i], rows);
        const uint32_t r = best_rank(pl, &rk, first, pe[i], b, c);
        add_slice(pl, l, r, pe[i], pu0[i], pn[i], prep[i], preps[i]);
        rk.b[r] += b, rk.c[r] += c, rk.units[r] += pn[i];
    }
    qsort(pl->xmap + first, pl->nxmap - first, sizeof(*pl->xmap), slice_cmp);
}

/* The expected MoE time of the busiest rank over layer slices [first, end) (load: the
   layer's expected choices per expert; unit_costs' model). */
static double busiest_time(const struct planner *pl, uint64_t first, const double *load)
{
    const struct unit_cost u = unit_costs(pl);
    static struct ranks rk;
    memset(&rk, 0, sizeof(rk));
    double most = 0;
    for (uint64_t i = first; i < pl->nxmap; i++) {
        const struct npu_image_expert_slice *s = &pl->xmap[i];
        const double rows = u.g * load[s->expert] / s->reps;
        rk.b[s->rank] += slice_bytes(&u, s->units, rows);
        rk.c[s->rank] += slice_matrix(pl, &u, s->units, rows);
    }
    for (uint32_t r = 0; r < pl->plan.tp; r++) {
        const double t = rank_time(rk.b[r], rk.c[r]);
        most = t > most ? t : most;
    }
    return most;
}

/* Layer l, balanced: placed without copies and with (the packing is greedy, so copies do
   not always shorten the busiest rank), keeping the placement whose busiest rank is
   expected to finish first (without copies on a tie). */
static void place_best(struct planner *pl, uint32_t l, const double *load)
{
    const uint64_t first = pl->nxmap;
    place_balanced(pl, l, load, 1);
    if (pl->x_replicas < 2)
        return;
    const uint64_t mid = pl->nxmap; /* the placement with copies follows the one without */
    const double t1 = busiest_time(pl, first, load);
    place_balanced(pl, l, load, pl->x_replicas);
    if (busiest_time(pl, mid, load) < t1 * (1 - 1e-9)) {
        memmove(pl->xmap + first, pl->xmap + mid, (pl->nxmap - mid) * sizeof(*pl->xmap));
        pl->nxmap = first + (pl->nxmap - mid);
    } else {
        pl->nxmap = mid;
    }
}

/* The busiest rank's expected MoE time over a balanced rank's in layer slices [first, end),
   into the worst so far, and their copies into the plan's counts. */
static void note_imbalance(struct planner *pl, uint64_t first, const double *load)
{
    const struct unit_cost u = unit_costs(pl);
    const double bal = balanced_time(pl, &u, load);
    const double ratio = bal > 0 ? busiest_time(pl, first, load) / bal : 1.0;
    pl->x_imbalance = ratio > pl->x_imbalance ? ratio : pl->x_imbalance;
    for (uint64_t i = first; i < pl->nxmap; i++) {
        const struct npu_image_expert_slice *s = &pl->xmap[i];
        pl->x_copies += s->rep > 0 && s->unit0 == 0; /* a copy beyond the first, once */
        pl->x_copies_most = s->reps > pl->x_copies_most ? s->reps : pl->x_copies_most;
    }
}

/* The most slices one rank holds in the layer whose slices start at map index `first`. */
static uint32_t layer_most(const struct planner *pl, uint64_t first)
{
    uint32_t per_rank[NOC_GROUP_MAX] = { 0 }, most = 0;
    for (uint64_t i = first; i < pl->nxmap; i++)
        per_rank[pl->xmap[i].rank]++;
    for (uint32_t r = 0; r < pl->plan.tp; r++)
        most = per_rank[r] > most ? per_rank[r] : most;
    return most;
}

/* The fan-out of layer slices [first, end): the k most split experts' slices summed (of one
   copy: a row's choice goes to one), the most slices on one rank and the layer's slices,
   into the plan's maxima. */
static void note_layer(struct planner *pl, uint64_t first)
{
    const uint32_t E = pl->cfg->num_experts, k = pl->cfg->experts_per_token;
    uint32_t per_expert[ROUTING_EXPERTS_MAX] = { 0 }, per_rank[NOC_GROUP_MAX] = { 0 };
    for (uint64_t i = first; i < pl->nxmap; i++)
        per_expert[pl->xmap[i].expert] += pl->xmap[i].rep == 0, per_rank[pl->xmap[i].rank]++;
    uint32_t fan = 0;
    for (uint32_t j = 0; j < k; j++) { /* the k largest counts, one at a time */
        uint32_t best = 0;
        for (uint32_t e = 1; e < E; e++)
            best = per_expert[e] > per_expert[best] ? e : best;
        fan += per_expert[best], per_expert[best] = 0;
    }
    struct npu_plan *p = &pl->plan;
    p->expert_fanout = fan > p->expert_fanout ? fan : p->expert_fanout;
    for (uint32_t r = 0; r < p->tp; r++)
        p->expert_rank_slices = per_rank[r] > p->expert_rank_slices ? per_rank[r]
                                                                    : p->expert_rank_slices;
    const uint32_t n = (uint32_t)(pl->nxmap - first);
    p->expert_map_slices = n > p->expert_map_slices ? n : p->expert_map_slices;
}

int npu_planner_experts(struct planner *pl, const struct npu_plan_request *req)
{
    struct npu_plan *p = &pl->plan;
    const struct model_config *c = pl->cfg;
    if (!npu_plan_is_ep(p) || p->tp == 1)
        return NPU_OK;
    const bool skewed = p->routing == NPU_ROUTING_SKEWED && p->routing_skew_milli > 0;
    /* By default, not with several MoE groups a layer served group by group (the
       iteration's rows do not fit one): every group walks a rank's slices through the
       ring, and a rank with a hot slice has rows in every group, so it loads in every group
       what the ring no longer holds. Measured on prefill-2048 (8 groups of 256 rows),
       balanced placement moved 269 GB of HBM against contiguous placement's 153 GB and was
       slower; so contiguous there. With balanced placement, a fused layer of several groups
       runs the MoE over the layer (npu_moe_layer_wide), which serves each slice once a
       layer over all the iteration's rows: balanced there by default however many groups,
       under uniform routing as well, for the MoE over the layer rather than the balance
       (prefill-2048 of Qwen3-30B-A3B, 8 groups of 256: skewed 101.3 ms against contiguous
       group by group's 135.8, uniform 46.6 against 79.6; the layered reference run, 130
       groups of 256 a layer: TTFT 0.51 s against 1.59 at 1 req/s, every request within the
       SLO at 2 req/s against 55 %, half the expert-load bytes; docs/serving.md section 6).
       Its price is simulation time: each group's dispatch sends a hot expert's rows to all
       its slices and runs in full under tile reuse (the layered reference run about 4x
       the wall time: docs/results.md (#7)). For the balance alone (one group under skewed
       routing), not over more than NPU_BALANCED_DEFAULT_RANKS ranks: on small-256 (256
       ranks) an older balanced map of Qwen3-30B-A3B (532 slices, a row's choices reaching
       up to 56 of them) was slower than contiguous placement under skewed routing,
       decode-b8 6.97 ms against 5.63 (docs/results.md): a hot expert's rows go to each of
       its slices, and every dispatch and combine spans 256 ranks. But over more ranks than
       that, for a plan of several groups (group by group: small-256's groups are its tiles
       of 64 rows) it is faster, its experts cut into 8 units of 96 columns against
       contiguous placement's 2 of 384: Qwen3-30B-A3B prefill-512 28.648 ms against 44.976
       uniform, 46.789 against 55.532 under skewed:1.0 (docs/results.md, 2026-12-05 (#8)).
       The choice is the plan's: a serving plan's decode iterations run on the same map
       (not measured on small-256). */
    const bool several = p->max_tokens > p->moe_rows;
    const bool balanced = req->expert_placement >= 0
                              ? req->expert_placement == NPU_EXPERTS_BALANCED
                              : p->mode == NPU_IMAGE_PERFORMANCE && !pl->contiguous &&
                                    ((p->tp <= NPU_BALANCED_DEFAULT_RANKS && skewed &&
                                      !several) ||
                                     (p->tp > NPU_BALANCED_DEFAULT_RANKS && several) ||
                                     npu_moe_wide_able(p));
    p->expert_placement = balanced ? NPU_EXPERTS_BALANCED : NPU_EXPERTS_CONTIGUOUS;
    const bool wide = npu_moe_layer_wide(p);
    pl->nxmap = 0, pl->x_imbalance = 0, pl->x_rows = wide ? p->max_tokens : p->moe_rows;
    pl->x_wide = wide, pl->x_copies = 0, pl->x_copies_most = 1;
    /* copies by default only for the MoE over the layer of several groups, where a hot
       expert's rows cross its ranks' HBM four times. One-group plans gained too (an earlier
       form of the placement: the chunked arXiv pair's mean TTFT -5.5 % in full simulation)
       but tile reuse then misjudged their decode steps (mean TBT +5.3 % against full
       simulation, past issue 23's 2 %; docs/results.md (#9)), so there they are asked for
       (--expert-replicas). `several`,
       not `wide` alone: the cores' plan may yet move the residual rows to SRAM, and with
       them the MoE over the layer, after the map is placed */
    pl->x_replicas = pl->no_copies               ? 1
                     : req->expert_replicas > 0 ? (uint32_t)req->expert_replicas
                     : wide && several          ? NPU_EXPERT_REPLICAS_MAX
                                                : 1;
    pl->x_wide_able = npu_moe_wide_able(p);
    p->expert_fanout = p->expert_rank_slices = p->expert_map_slices = 0;
    if (p->tp > NOC_GROUP_MAX || c->num_experts > ROUTING_EXPERTS_MAX)
        return fail(pl->err, pl->errlen, NPU_ERR_INVAL, "expert placement: %u ranks and %u "
                    "experts (at most %u and %u)", p->tp, c->num_experts, NOC_GROUP_MAX,
                    ROUTING_EXPERTS_MAX);
    p->expert_units = balanced ? choose_units(c->moe_intermediate_size, pl->chip->sa_cols)
                               : npu_planner_contiguous_units(c, p->tp);
    const uint64_t limit = NPU_IMAGE_A2A_COUNTS((uint64_t)pl->chip->mesh_rows *
                                                pl->chip->mesh_cols);
    double load[ROUTING_EXPERTS_MAX];
    for (uint32_t l = 0; l < c->num_layers; l++) {
        const uint64_t first = pl->nxmap;
        expected_load(p, c, l, load);
        if (balanced) {
            place_best(pl, l, load);
        } else if (p->expert_units > 1) {
            for (uint32_t r = 0; r < p->tp; r++)
                add_slice(pl, l, r, r / p->expert_units, r % p->expert_units, 1, 0, 1);
        } else {
            for (uint32_t r = 0; r < p->tp; r++)
                for (uint32_t e = npu_plan_expert_first(p, c->num_experts, r);
                     e < npu_plan_expert_first(p, c->num_experts, r + 1); e++)
                    add_slice(pl, l, r, e, 0, 1, 0, 1);
        }
        const uint64_t n = pl->nxmap - first;
        const uint32_t most = layer_most(pl, first);
        const bool fits = n <= NPU_EXPERT_MAP_MAX &&
                          noc_a2av_mailbox_words(npu_plan_ep_ranks(p), (uint32_t)n, most) <=
                              limit;
        if (!fits && balanced && pl->x_replicas > 1 && req->expert_replicas < 0) {
            pl->no_copies = true; /* the default's copies do not fit: none */
            return npu_planner_experts(pl, req);
        }
        if (!fits && balanced && req->expert_placement < 0) {
            pl->contiguous = true; /* the default's balanced map does not fit: whole experts */
            return npu_planner_experts(pl, req);
        }
        if (!fits)
            return fail(pl->err, pl->errlen, NPU_ERR_INVAL, "expert placement: layer %u needs "
                        "%llu expert slices over %u ranks, %u on one; the dispatch holds at "
                        "most %u slices, and its count exchange %llu words (try "
                        "--expert-placement contiguous or fewer ranks)", l,
                        (unsigned long long)n, p->tp, most, NPU_EXPERT_MAP_MAX,
                        (unsigned long long)limit);
        note_layer(pl, first);
        note_imbalance(pl, first, load);
    }
    return NPU_OK;
}

const struct npu_image_expert_slice *npu_planner_expert_slice(const struct planner *pl,
                                                              uint32_t layer, uint32_t index)
{
    uint64_t i = 0;
    while (i < pl->nxmap && pl->xmap[i].layer < layer)
        i++;
    return &pl->xmap[i + index];
}
