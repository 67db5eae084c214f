/* SPDX-License-Identifier: MIT */
/* Attention/expert disaggregation's plan and latency model (npu_disagg.h). */
#include "npu_disagg.h"

#include <math.h>
#include <string.h>

#include "npu_bound.h"
#include "npu_enums.h"
#include "npu_plan_internal.h"

/* Per-core roofline of this chip: FLOP/s and HBM bytes/s. */
struct core_rate {
    double flops, hbm, noc;
};

static struct core_rate core_rate(const struct chip_config *c)
{
    const double cores = (double)c->mesh_rows * c->mesh_cols;
    struct core_rate r = { 2.0 * c->sa_rows * c->sa_cols * c->freq_mhz * 1e6,
                           c->hbm_gbps * 1e9, c->noc_link_gbps * 1e9 };
    if (c->hbm_stacks) /* edge stacks: the chip's bandwidth shared evenly */
        r.hbm = c->hbm_stacks * (double)c->hbm_stack_gbps * 1e9 / cores;
    return r;
}

/* One layer's attention weights (QKV, O, the two norms, the router), elements. */
static double attn_layer_elems(const struct model_config *m)
{
    const double d = m->hidden_size, hd = m->head_dim;
    return d * hd * (m->num_heads + 2.0 * m->num_kv_heads) + hd * m->num_heads * d + 2 * d +
           d * m->num_experts;
}

static double expert_elems(const struct model_config *m)
{
    return 3.0 * m->hidden_size * m->moe_intermediate_size;
}

static double kv_position_bytes(const struct model_config *m, uint32_t eb)
{
    return 2.0 * m->num_kv_heads * m->head_dim * eb * m->num_layers;
}

/* Positions a request's row sees in a layer, averaged over the layers: s, or the sliding
   window on the layers that slide. */
static double mean_positions(const struct model_config *m, uint32_t s)
{
    double sum = 0;
    for (uint32_t l = 0; l < m->num_layers; l++)
        sum += model_is_sliding_layer(m, l) && m->sliding_window && m->sliding_window < s
                   ? m->sliding_window
                   : s;
    return sum / m->num_layers;
}

/* The request's shape against the model and the mesh. */
static int check_request(const struct model_config *m, const struct chip_config *c,
                         const struct npu_disagg_request *r, char *err, size_t errlen)
{
    const uint32_t R = c->mesh_rows, cores = c->mesh_rows * c->mesh_cols;
    if (m->arch != MODEL_MOE)
        return fail(err, errlen, NPU_ERR_INVAL, "disaggregation: %s has no experts", m->name);
    if (!r->replicas || r->replicas > NPU_DISAGG_REPLICAS_MAX || !r->tp_a ||
        !r->expert_cores || !r->micro_batches || !r->context ||
        (r->elem_bytes != 2 && r->elem_bytes != 4))
        return fail(err, errlen, NPU_ERR_INVAL, "disaggregation: replicas %u (1..%u), tp_a "
                    "%u, expert cores %u, micro-batches %u and context %u must be at least 1",
                    r->replicas, NPU_DISAGG_REPLICAS_MAX, r->tp_a, r->expert_cores,
                    r->micro_batches, r->context);
    if ((uint64_t)r->replicas * r->tp_a + r->expert_cores > cores)
        return fail(err, errlen, NPU_ERR_INVAL, "disaggregation: %u replicas x %u cores + %u "
                    "expert cores = %llu, the chip has %u", r->replicas, r->tp_a,
                    r->expert_cores, (unsigned long long)r->replicas * r->tp_a +
                    r->expert_cores, cores);
    if (R % r->tp_a && r->tp_a % R)
        return fail(err, errlen, NPU_ERR_INVAL, "disaggregation: tp_a %u neither divides the "
                    "mesh's %u rows nor is a multiple of them", r->tp_a, R);
    if (m->num_heads % r->tp_a)
        return fail(err, errlen, NPU_ERR_INVAL, "disaggregation: tp_a %u does not divide "
                    "%s's %u heads", r->tp_a, m->name, m->num_heads);
    if (r->expert_cores % R)
        return fail(err, errlen, NPU_ERR_INVAL, "disaggregation: %u expert cores are not "
                    "whole columns of %u rows", r->expert_cores, R);
    if (r->batch < (uint64_t)r->replicas * r->micro_batches)
        return fail(err, errlen, NPU_ERR_INVAL, "disaggregation: batch %u leaves a micro-"
                    "batch empty (%u replicas x %u micro-batches)", r->batch, r->replicas,
                    r->micro_batches);
    return NPU_OK;
}

bool npu_disagg_experts_fit(const struct model_config *m, uint32_t n)
{
    const uint32_t E = m->num_experts;
    /* the units rule is expert parallelism's (npu_planner_contiguous_units) */
    return E && n && ((n <= E && E % n == 0) || npu_planner_contiguous_units(m, n) > 1);
}

/* The experts over N_e cores: E / N_e whole experts a core, or U = N_e / E units of one. */
static int place_experts(const struct model_config *m, const struct npu_disagg_request *r,
                         struct npu_disagg_plan *p, char *err, size_t errlen)
{
    const uint32_t E = m->num_experts, N = r->expert_cores;
    if (npu_disagg_experts_fit(m, N)) {
        p->units = N > E ? N / E : 1;
        p->experts_per_core = N > E ? 0 : E / N;
        return NPU_OK;
    }
    return fail(err, errlen, NPU_ERR_INVAL, "disaggregation: %u expert cores neither divide "
                "%s's %u experts nor cut each into at most %u units of its %u columns", N,
                m->name, E, NPU_EXPERT_UNITS_MAX, m->moe_intermediate_size);
}

/* `width` columns beside the band hold replicas of ra x ca cores, from column `start`
   (nearest the experts) outward (`toward`: +1 rightward, -1 leftward); returns how many
   replicas are placed so far. */
static uint32_t fill_side(struct npu_disagg_plan *p, uint32_t placed, uint32_t want,
                          uint32_t R, int start, int toward, uint32_t width, uint32_t ra,
                          uint32_t ca)
{
    for (uint32_t k = 0; k + ca <= width && placed < want; k += ca)
        for (uint32_t row = 0; row + ra <= R && placed < want; row += ra) {
            const int near = start + toward * (int)k;
            const int c0 = toward > 0 ? near : near - (int)ca + 1;
            p->replica[placed++] = (struct noc_rect){ (uint16_t)row, (uint16_t)c0,
                                                      (uint16_t)ra, (uint16_t)ca };
        }
    return placed;
}

/* The expert band in the middle columns; replicas alternately on its left and right. */
static int place_roles(const struct chip_config *c, const struct npu_disagg_request *r,
                       struct npu_disagg_plan *p, char *err, size_t errlen)
{
    const uint32_t R = c->mesh_rows, C = c->mesh_cols, we = r->expert_cores / R;
    const uint32_t e0 = r->band_last ? C - we : (C - we) / 2, left = e0, right = C - we - e0;
    p->experts = (struct noc_rect){ 0, (uint16_t)e0, (uint16_t)R, (uint16_t)we };
    const uint32_t ra = r->tp_a < R ? r->tp_a : R, ca = r->tp_a < R ? 1 : r->tp_a / R;
    const uint32_t cap_l = (left / ca) * (R / ra), cap_r = (right / ca) * (R / ra);
    if (cap_l + cap_r < r->replicas)
        return fail(err, errlen, NPU_ERR_INVAL, "disaggregation: %u replicas of %u x %u cores "
                    "do not fit beside the %u expert columns (%u columns left, %u right: %u "
                    "replicas)", r->replicas, ra, ca, we, left, right,
                    cap_l + cap_r);
    /* alternate sides so that both sit near the experts: half (rounded up) on the left */
    uint32_t want_l = (r->replicas + 1) / 2;
    want_l = want_l > cap_l ? cap_l : want_l;
    want_l = r->replicas - want_l > cap_r ? r->replicas - cap_r : want_l;
    uint32_t n = fill_side(p, 0, want_l, R, (int)e0 - 1, -1, left, ra, ca);
    n = fill_side(p, n, r->replicas, R, (int)(e0 + we), +1, right, ra, ca);
    p->idle_cores = R * C - r->replicas * r->tp_a - r->expert_cores;
    return n == r->replicas ? NPU_OK
                            : fail(err, errlen, NPU_ERR_INVAL, "disaggregation: placed %u of "
                                   "%u replicas", n, r->replicas);
}

/* Bytes each role's core holds and what the chip's HBM must hold. */
static int size_roles(const struct model_config *m, const struct chip_config *c,
                      const struct npu_disagg_request *r, struct npu_disagg_plan *p,
                      char *err, size_t errlen)
{
    const double eb = r->elem_bytes, L = m->num_layers, d = m->hidden_size;
    const double attn = (L * attn_layer_elems(m) + 2.0 * m->vocab_size * d + d) * eb;
    const double experts = L * m->num_experts * expert_elems(m) * eb;
    const double per_request = mean_positions(m, r->context) *
                               kv_position_bytes(m, r->elem_bytes);
    const double kv = (double)r->batch * per_request;
    const uint32_t most = (r->batch + r->replicas - 1) / r->replicas; /* a replica's */
    p->attn_core_weight_bytes = (uint64_t)(attn / r->tp_a);
    p->attn_core_kv_bytes = (uint64_t)ceil(most * per_request / r->tp_a);
    p->expert_core_bytes = (uint64_t)(experts / r->expert_cores);
    p->hbm_weight_bytes = (uint64_t)(attn + experts), p->hbm_kv_bytes = (uint64_t)kv;
    if (attn + experts + kv > (double)c->hbm_bytes)
        return fail(err, errlen, NPU_ERR_NOMEM, "disaggregation: weights %.1f MiB and the KV "
                    "cache of %u requests x %u positions %.1f MiB need more than the chip's "
                    "%.1f MiB of HBM", (attn + experts) / 1048576.0, r->batch, r->context,
                    kv / 1048576.0, c->hbm_bytes / 1048576.0);
    return NPU_OK;
}

/* The attention cores on one row on one side of the band, at most (the row link into the
   band carries all their M2N blocks: XY routes go along the row first). */
static uint32_t busiest_row_link(const struct chip_config *c, const struct npu_disagg_plan *p,
                                 uint32_t replicas)
{
    uint32_t most = 0;
    for (uint32_t row = 0; row < c->mesh_rows; row++)
        for (int right = 0; right < 2; right++) {
            uint32_t n = 0;
            for (uint32_t i = 0; i < replicas; i++) {
                const struct noc_rect *q = &p->replica[i];
                n += row >= q->row0 && row < q->row0 + q->rows &&
                             (q->col0 > p->experts.col0) == (right == 1)
                         ? q->cols
                         : 0;
            }
            most = n > most ? n : most;
        }
    return most;
}

/* T_a and the LM head's time on a replica (per micro-batch): its GEMMs, its rows' scores and
   values over the mean positions; weights once a layer where half the SRAM holds them. */
static void time_attention(const struct model_config *m, const struct chip_config *c,
                           const struct npu_disagg_request *r, struct npu_disagg_times *t)
{
    const struct core_rate cr = core_rate(c);
    const double eb = r->elem_bytes, d = m->hidden_size, hd = m->head_dim, tp = r->tp_a;
    const double pos = mean_positions(m, r->context), mb = r->micro_batches;
    const double wa = attn_layer_elems(m) * eb / tp;
    t->attn_weights_once = wa <= c->sram_bytes / 2.0;
    const double fa = (2 * t->rows_a * attn_layer_elems(m) +
                       4.0 * m->num_heads * hd * t->rows_a * pos) / tp;
    const double ba = (t->attn_weights_once ? wa / mb : wa) +
                      t->rows_a * pos * 2.0 * m->num_kv_heads * hd * eb / tp;
    t->t_a = fmax(fa / cr.flops, ba / cr.hbm);
    const double head = (double)m->vocab_size * d;
    t->t_head = fmax(2 * t->rows_a * head / tp / cr.flops, head * eb / tp / cr.hbm);
}

/* T_e on an expert core (its experts, or its unit, over their mean rows) and T_c. */
static void time_experts(const struct model_config *m, const struct chip_config *c,
                         const struct npu_disagg_request *r, struct npu_disagg_plan *p)
{
    const struct core_rate cr = core_rate(c);
    struct npu_disagg_times *t = &p->t;
    const double eb = r->elem_bytes, d = m->hidden_size, K = m->experts_per_token;
    const double share = p->units > 1 ? 1.0 / p->units : p->experts_per_core;
    const double we = share * expert_elems(m) * eb;
    t->expert_weights_once = we <= c->sram_bytes / 2.0;
    const double fe = 2 * t->rows_e * share * expert_elems(m);
    t->t_e = fmax(fe / cr.flops, (t->expert_weights_once ? we / r->micro_batches : we) /
                                     cr.hbm);
    /* one M2N: a row's k choices go to every unit of their experts, out of the replica's
       tp_a cores; an expert core receives its experts' rows; the larger of an endpoint's
       bytes and the busiest row link's into the band, plus the mesh's hops */
    const double send = t->rows_a * K * p->units * d * eb / r->tp_a;
    const double recv = (p->units > 1 ? t->rows_e : t->rows_e * p->experts_per_core) * d * eb;
    const double link = busiest_row_link(c, p, r->replicas) * send;
    const double hops = c->mesh_rows + c->mesh_cols;
    t->t_c = fmax(fmax(send, recv), link) / cr.noc +
             hops * c->noc_hop_cycles / (c->freq_mhz * 1e6);
}

/* Section 4.1's times, and the iteration: with m micro-batches a layer's cycle is the longer
   of m T_f and a micro-batch's round trip (equation 5 where m T_f covers the trip, which
   constraint 3 ensures); the LM head adds m of its times (not overlapped: an estimate on
   the safe side). */
static void model_times(const struct model_config *m, const struct chip_config *c,
                        const struct npu_disagg_request *r, struct npu_disagg_plan *p)
{
    struct npu_disagg_times *t = &p->t;
    const double mb = r->micro_batches, cores = (double)c->mesh_rows * c->mesh_cols;
    t->rows_a = ceil((double)r->batch / (r->replicas * mb));
    t->rows_e = (double)r->batch * m->experts_per_token / (mb * m->num_experts);
    time_attention(m, c, r, t);
    time_experts(m, c, r, p);
    t->t_f = fmax(t->t_a, t->t_e);
    t->m_min = (uint32_t)ceil(2 * (1 + t->t_c / t->t_f));
    const double trip = t->t_a + t->t_e + 2 * t->t_c;
    t->overlapped = mb * t->t_f >= trip;
    t->t_iter = trip + (mb - 1) * t->t_f + (m->num_layers - 1.0) * fmax(mb * t->t_f, trip) +
                mb * t->t_head;
    t->tokens_per_s = r->batch / t->t_iter;
    t->per_core = t->tokens_per_s / ((double)r->replicas * r->tp_a + r->expert_cores);
    t->per_chip_core = t->tokens_per_s / cores;
}

int npu_disagg_plan(const struct model_config *m, const struct chip_config *c,
                    const struct npu_disagg_request *r, struct npu_disagg_plan *out,
                    char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    int rc = check_request(m, c, r, err, errlen);
    if (rc == NPU_OK)
        rc = place_experts(m, r, out, err, errlen);
    if (rc == NPU_OK)
        rc = place_roles(c, r, out, err, errlen);
    if (rc == NPU_OK)
        rc = size_roles(m, c, r, out, err, errlen);
    if (rc == NPU_OK)
        model_times(m, c, r, out);
    return rc;
}

/* The latency model's lines. */
static void print_times(FILE *f, const struct model_config *m, const struct chip_config *c,
                        const struct npu_disagg_request *r, const struct npu_disagg_plan *p)
{
    const struct npu_disagg_times *t = &p->t;
    fprintf(f, "  latency model (MegaScale-Infer section 4.1, per-core rooflines; an estimate, "
            "not a measurement):\n");
    fprintf(f, "    a micro-batch: %.0f rows a replica, %.2f rows an expert (uniform routing); "
            "layer weights read once a %s (attention), once a %s (experts)\n", t->rows_a,
            t->rows_e, t->attn_weights_once ? "layer" : "micro-batch",
            t->expert_weights_once ? "layer" : "micro-batch");
    fprintf(f, "    T_a %.2f us, T_e %.2f us, T_c %.2f us, LM head %.2f us; T_c < T_f "
            "(constraint 2): %s; m >= 2(1 + T_c/T_f) = %u (constraint 3; asked %u)\n",
            t->t_a * 1e6, t->t_e * 1e6, t->t_c * 1e6, t->t_head * 1e6,
            t->t_c < t->t_f ? "yes" : "no", t->m_min, r->micro_batches);
    fprintf(f, "    iteration (%s, %u layers, %u micro-batches): %.3f ms for %u tokens: %.0f "
            "tokens/s, %.1f per core of the two roles, %.1f per core of the chip\n",
            t->overlapped ? "equation 5" : "m T_f below a round trip: layers wait for it",
            m->num_layers, r->micro_batches, t->t_iter * 1e3, r->batch, t->tokens_per_s,
            t->per_core, t->per_chip_core);
    /* for scale, a bound (not a plan): the same step colocated on every core */
    struct npu_bound b;
    const struct npu_bound_shape s = { .requests = r->batch, .rows = 1, .context = r->context };
    const struct npu_bound_opts o = { .elem_bytes = r->elem_bytes };
    const double cores = (double)c->mesh_rows * c->mesh_cols;
    if (npu_bound_step(m, c, &s, &o, &b) == NPU_OK)
        fprintf(f, "  for scale: the whole chip's lower bound of this decode step colocated "
                "(npuctl bench model's bound, uniform routing): %.3f ms, %.1f tokens/s per "
                "core\n", b.bound_s * 1e3, r->batch / b.bound_s / cores);
}

void npu_disagg_print(FILE *f, const struct model_config *m, const struct chip_config *c,
                      const struct npu_disagg_request *r, const struct npu_disagg_plan *p)
{
    const double MiB = 1048576.0;
    fprintf(f, "disaggregated plan: %s on %s (%ux%u), decoding, %s; the latency model's plan "
            "(--roles disagg builds the executed form)\n", m->name, c->name, c->mesh_rows,
            c->mesh_cols, r->elem_bytes == 2 ? "bf16" : "fp32");
    fprintf(f, "  attention: %u replica(s) of %u cores, each with up to %u requests' KV "
            "cache:", r->replicas, r->tp_a, (r->batch + r->replicas - 1) / r->replicas);
    for (uint32_t i = 0; i < r->replicas; i++)
        fprintf(f, "%s (%u,%u) %ux%u", i ? "," : "", p->replica[i].row0, p->replica[i].col0,
                p->replica[i].rows, p->replica[i].cols);
    fprintf(f, "\n    a core holds 1/%u of the attention, router, embedding and LM head "
            "weights (%.1f MiB) and of its replica's KV cache (%.1f MiB at %u positions)\n",
            r->tp_a, p->attn_core_weight_bytes / MiB, p->attn_core_kv_bytes / MiB, r->context);
    fprintf(f, "  experts: %u cores, columns %u-%u; ", r->expert_cores, p->experts.col0,
            p->experts.col0 + p->experts.cols - 1);
    if (p->units > 1)
        fprintf(f, "each expert in %u units of %u columns, a core holds one unit",
                p->units, m->moe_intermediate_size / p->units);
    else
        fprintf(f, "a core holds %u whole expert(s)", p->experts_per_core);
    fprintf(f, " of every layer (%.1f MiB)\n", p->expert_core_bytes / MiB);
    fprintf(f, "  idle cores: %u; HBM: weights %.1f MiB + KV cache %.1f MiB of %.1f MiB\n",
            p->idle_cores, p->hbm_weight_bytes / MiB, p->hbm_kv_bytes / MiB,
            c->hbm_bytes / MiB);
    print_times(f, m, c, r, p);
}
