/* SPDX-License-Identifier: MIT */
/*
 * npuctl bench model (docs/benchmarks.md, "bench model"): named step shapes of a model, each
 * planned, built and run in performance mode as one iteration (the model image's
 * prompt_len / requests / context bootargs), measured against the whole-chip lower bound of
 * npu_bound.h, which comes from the model and chip configs and the shape alone.
 *
 * Per shape it prints the chip time of the iteration (rank 0's `MODEL done ... chip_us`,
 * which starts after the resident weights are loaded), the bound and its two terms, their
 * ratio, the array floor (the bound with each GEMM's share of the array) and the ratio to
 * it, each engine kind's busy time over the run summed over all cores as a share of
 * cores x run time (from the machine's stats file), HBM bytes moved against the least the
 * bound counts, the MoE load under expert parallelism (rows served by the busiest rank over
 * the mean rank's, from `MODEL routed`: averaged over the layers, and the worst layer), and
 * rank 0's categories (`MODEL layers=all`).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chip_config.h"
#include "chip_engine_log.h"
#include "cmd_bench.h"
#include "model_config.h"
#include "npu_bound.h"
#include "npu_image.h"
#include "npu_layout.h"
#include "npu_memmap.h"
#include "npuctl.h"
#include "rt/lines.h"
#include "rt/metrics.h"

/* The issue's named shapes: prefill chunks at two contexts, a long prefill, two decodes. */
static const struct shape shapes[] = {
    { "prefill-512", { 1, 512, 0 } },
    { "prefill-512-ctx8k", { 1, 512, 8192 } },
    { "prefill-2048", { 1, 2048, 0 } },
    { "decode-b8-ctx4k", { 8, 1, 4096 } },
    { "decode-b64-ctx1k", { 64, 1, 1024 } },
};
#define NSHAPES (sizeof(shapes) / sizeof(shapes[0]))

const struct shape *bench_model_shapes(size_t *n)
{
    *n = NSHAPES;
    return shapes;
}

bool bench_model_shape_selected(const struct bench_model_opts *o, const char *name)
{
    if (!o->only)
        return true;
    size_t n = strlen(name);
    for (const char *p = o->only; (p = strstr(p, name)); p += n)
        if ((p == o->only || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return true;
    return false;
}

/* --shapes names at least one shape: 0, else a usage error. */
static int check_shapes(const struct bench_model_opts *o)
{
    for (size_t i = 0; o->only && i < NSHAPES; i++)
        if (bench_model_shape_selected(o, shapes[i].name))
            return 0;
    if (o->only)
        return npuctl_usage_error("bench model: --shapes '%s' names none of prefill-512, "
                                  "prefill-512-ctx8k, prefill-2048, decode-b8-ctx4k, "
                                  "decode-b64-ctx1k", o->only);
    return 0;
}

/* The busiest rank's load over the mean rank's (rank_load[tp]) into m's sums. */
static void add_rank_loads(const struct npu_plan *p, const double *rank_load,
                           struct measured *m, uint32_t *layers)
{
    double total = 0, most = 0;
    for (uint32_t r = 0; r < p->tp && r < 1024; r++) {
        total += rank_load[r];
        most = rank_load[r] > most ? rank_load[r] : most;
    }
    if (total <= 0)
        return;
    const double ratio = most / (total / p->tp);
    m->moe_imbalance += ratio;
    m->moe_worst = ratio > m->moe_worst ? ratio : m->moe_worst;
    ++*layers;
}

/* A layer's routed rows per expert (`MODEL routed`, tokens[E]) as the load of each rank
   under EP: for each slice it holds (the image's expert map, x[0..n)), its copy's share of
   the expert's rows (rows alternate over the copies) times the slice's share of the expert's
   width (a whole expert: its rows). */
static void add_moe_load(const struct npu_plan *p, const struct npu_image_expert_slice *x,
                         uint32_t n, const uint64_t *tokens, struct measured *m,
                         uint32_t *layers)
{
    double rank_load[1024] = { 0 };
    for (uint32_t i = 0; i < n && p->tp <= 1024; i++)
        rank_load[x[i].rank] += (double)tokens[x[i].expert] / x[i].reps * x[i].units /
                                p->expert_units; /* reps >= 1: the image check */
    add_rank_loads(p, rank_load, m, layers);
}

/* The same under the MoE by units (model_moe_units.c): each routed expert's units dealt
   round the ranks from rank l mod tp, each carrying its rows times its share of the width. */
static void add_units_load(const struct npu_plan *p, uint32_t l, uint32_t E,
                           const uint64_t *tokens, struct measured *m, uint32_t *layers)
{
    double rank_load[1024] = { 0 };
    const uint32_t per = p->expert_units * p->moe_unit_split;
    uint32_t next = l % p->tp;
    for (uint32_t e = 0; e < E && p->tp <= 1024; e++)
        for (uint32_t j = 0; tokens[e] && j < per; j++, next = (next + 1) % p->tp)
            rank_load[next] += (double)tokens[e] / per;
    add_rank_loads(p, rank_load, m, layers);
}

/* The image's expert map (file img; NULL if none or unreadable), *n slices, with the header
   (for its layer lookup) in front: free() it. */
static struct npu_image_header *read_expert_map(const char *img)
{
    struct npu_image_header h;
    FILE *f = fopen(img, "rb");
    struct npu_image_header *all = NULL;
    if (f && fread(&h, sizeof(h), 1, f) == 1 && h.experts_count &&
        h.experts_count < (1u << 20) && h.experts_off >= sizeof(h)) {
        const size_t bytes = h.experts_count * sizeof(struct npu_image_expert_slice);
        all = malloc(h.experts_off + bytes);
        if (all && (fseek(f, (long)h.experts_off, SEEK_SET) ||
                    fread((uint8_t *)all + h.experts_off, bytes, 1, f) != 1))
            free(all), all = NULL;
        if (all)
            *all = h;
    }
    if (f)
        fclose(f);
    return all;
}

/* The routed lines' counts into tokens[L][E] (a layer's experts come in lines of up to
   LINES_ROUTED_PER_LINE, each naming its first); lines that do not fit are ignored. */
static void take_routed(const struct lines_model_routed *r, uint64_t *tokens, uint32_t L,
                        uint32_t E)
{
    const uint32_t first = r->absent.first ? 0 : r->first;
    if (r->layer >= L || first > E || r->tokens.n > E - first)
        return;
    memcpy(&tokens[(uint64_t)r->layer * E + first], r->tokens.v, r->tokens.n * sizeof(uint64_t));
}

/* Rank 0's MODEL done line, its first `layers=all` row and the routed rows of each layer
   (rank 0 prints them), read with the console-line protocol's decoder (rt/lines.h). */
static int read_console(const char *path, const struct npu_image_header *xh,
                        const struct npu_plan *p, const struct model_config *cfg, bool units,
                        struct measured *m)
{
    const bool ep = npu_plan_is_ep(p) && p->tp > 1 && cfg->num_experts && xh;
    const uint32_t L = cfg->num_layers, E = cfg->num_experts;
    uint64_t *tokens = ep ? calloc((size_t)L * E, sizeof(uint64_t)) : NULL;
    uint32_t moe_layers = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    static struct lines_line ln;
    char line[4096];
    bool done = false, layers = false;
    while (fgets(line, sizeof(line), f)) {
        const char *text = lines_find(line);
        if (!text || lines_parse(text, &ln, NULL, 0))
            continue;
        if (ln.kind == LINES_MODEL_DONE && !done) {
            m->chip_us = ln.v.model_done.chip_us;
            done = true;
        }
        else if (ln.kind == LINES_MODEL_ROW && !layers && !ln.v.model_row.absent.layers) {
            const struct lines_model_row *r = &ln.v.model_row;
            const double cats[5] = { r->attn_us, r->ffn_us, r->coll_us, r->weights_us,
                                     r->other_us };
            memcpy(m->cat_us, cats, sizeof(cats));
            layers = true;
        } else if (ln.kind == LINES_MODEL_ROUTED && tokens) {
            take_routed(&ln.v.model_routed, tokens, L, E);
        }
    }
    fclose(f);
    for (uint32_t l = 0; tokens && l < L; l++) {
        uint32_t n;
        const struct npu_image_expert_slice *x = npu_image_expert_layer(xh, l, &n);
        if (units)
            add_units_load(p, l, E, &tokens[(uint64_t)l * E], m, &moe_layers);
        else
            add_moe_load(p, x, n, &tokens[(uint64_t)l * E], m, &moe_layers);
    }
    free(tokens);
    if (moe_layers)
        m->moe_imbalance /= moe_layers;
    return done ? 0 : -1;
}

static int read_stats(const char *path, struct measured *m)
{
    struct rt_chip_stats s;
    char err[NPUCTL_PATH_MAX + 128];
    if (metrics_read_chip(path, &s, err, sizeof(err))) {
        npuctl_print_error("bench model: %s", err);
        return -1;
    }
    m->run_ps = s.chip_time_ps, m->hbm_bytes = (double)s.hbm_bytes, m->cores = s.cores;
    memcpy(m->busy_ps, s.busy_ps, sizeof(m->busy_ps));
    return m->run_ps > 0 ? 0 : -1;
}

static int write_image(const char *path, const struct npu_built_image *img)
{
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(img->data, 1, img->bytes, f) == img->bytes;
    if (f && fclose(f))
        ok = false;
    return ok ? 0 : -1;
}

/* Plans and builds the shape's image with the plan options io into DIR/NAME.img; *h gets
   its header. */
static int build_shape(const struct npuctl_image_opts *plan, const struct shape *sh,
                       const char *dir, struct model_config *cfg, struct npu_image_header *h)
{
    struct npuctl_image_opts io = *plan;
    io.req.max_batch = sh->s.requests;
    io.req.max_tokens = sh->s.requests * sh->s.rows;
    io.req.max_seq = sh->s.context + sh->s.rows + 1;
    struct npu_built_image img = { 0 };
    int rc = npuctl_image_build(&io, &img, cfg, NULL);
    if (rc)
        return rc;
    char path[NPUCTL_PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s.img", dir, sh->name);
    memcpy(h, img.data, sizeof(*h));
    rc = write_image(path, &img);
    free(img.data);
    if (rc)
        npuctl_print_error("bench model: cannot write %s: %s", path, strerror(errno));
    return rc ? NPUCTL_EXIT_USAGE : 0;
}

/* Runs DIR/NAME.img for one iteration of the shape; console and stats into DIR. */
static int run_shape(const struct bench_model_opts *o, const struct shape *sh,
                     const char *dir, const char *chip, const struct npu_plan *p,
                     const struct model_config *cfg, struct measured *m)
{
    char img[NPUCTL_PATH_MAX], loader[NPUCTL_PATH_MAX + 96], stats[NPUCTL_PATH_MAX + 16];
    char console[NPUCTL_PATH_MAX], append[200], timeout[16];
    char log[NPUCTL_PATH_MAX + 32], log_core[48];
    struct stat st;
    snprintf(img, sizeof(img), "%s/%s.img", dir, sh->name);
    if (stat(img, &st))
        return NPUCTL_EXIT_USAGE;
    snprintf(loader, sizeof(loader), "loader,file=%s,addr=%#" PRIx64 ",force-raw=on", img,
             (uint64_t)NPU_MAP_HBM_BASE);
    snprintf(stats, sizeof(stats), "stats=%s/%s.stats.json", dir, sh->name);
    snprintf(console, sizeof(console), "%s/%s.console.log", dir, sh->name);
    snprintf(append, sizeof(append), "prompt_len=%u requests=%u context=%u new=1 "
             "image_bytes=%lld", sh->s.rows, sh->s.requests, sh->s.context,
             (long long)st.st_size);
    snprintf(timeout, sizeof(timeout), "%u", o->timeout_s);
    snprintf(log, sizeof(log), "engine-log=%s/%s.engines.json", dir, sh->name);
    snprintf(log_core, sizeof(log_core), "engine-log-core=%" PRIu32, o->engine_log_core);
    char *args[] = { "model", "--chip", (char *)chip, "--mode", "performance", "--timeout",
                     timeout, "--", "-device", loader, "-machine", stats, "-append", append,
                     "-machine", log, "-machine", log_core };
    const int nargs = (int)(sizeof(args) / sizeof(args[0])) - (o->engine_log ? 0 : 4);
    bool ran;
    int rc = npuctl_run_captured(nargs, args, console, NULL, NULL, &ran);
    if (rc) {
        npuctl_print_error("bench model: %s: the run failed (exit %d); its console: %s",
                           sh->name, rc, console);
        return rc;
    }
    snprintf(stats, sizeof(stats), "%s/%s.stats.json", dir, sh->name);
    struct npu_image_header *xh = read_expert_map(img);
    const bool units = p->moe_units_rows &&
                       (uint64_t)sh->s.requests * sh->s.rows <= p->moe_units_rows;
    rc = read_console(console, xh, p, cfg, units, m) || read_stats(stats, m);
    free(xh);
    if (rc) {
        npuctl_print_error("bench model: %s: no MODEL done line or stats in %s", sh->name,
                           dir);
        return NPUCTL_EXIT_USAGE;
    }
    return 0;
}

static void print_header(const struct bench_model_opts *o, const struct npu_image_header *h)
{
    printf("bench model: %s on %s (performance), tp %u, %u stage(s), routing %s",
           h->model_name, h->chip_name, h->plan.tp, h->plan.stages,
           h->plan.routing == NPU_ROUTING_SKEWED ? "skewed" : "uniform");
    if (h->plan.routing == NPU_ROUTING_SKEWED)
        printf(":%.3f", h->plan.routing_skew_milli / 1000.0);
    printf("\n%-18s %10s %10s %9s %9s %8s %9s %8s  %6s %6s %6s %6s %6s  %9s %9s  %-14s %s\n",
           "shape", "chip ms", "bound ms", "matrix", "hbm", "x bound", "floor ms", "x floor",
           "mat%", "vec%", "dma%",
           "dma2%", "noc%", "HBM GB", "least GB", "MoE max/mean",
           "attn/ffn/coll/weights/other ms (rank 0)");
    (void)o;
}

static void print_row(const struct shape *sh, const struct measured *m,
                      const struct npu_bound *b)
{
    double chip_ms = m->chip_us / 1e3, share = m->cores * m->run_ps;
    char moe[32] = "-";
    if (m->moe_worst > 0)
        snprintf(moe, sizeof(moe), "%.2f (%.2f)", m->moe_imbalance, m->moe_worst);
    printf("%-18s %10.3f %10.3f %9.3f %9.3f %7.2fx %9.3f %7.2fx  %6.1f %6.1f %6.1f %6.1f %6.1f  "
           "%9.3f %9.3f  %-14s %.1f/%.1f/%.1f/%.1f/%.1f\n", sh->name, chip_ms, b->bound_s * 1e3,
           b->matrix_s * 1e3, b->hbm_s * 1e3, b->bound_s > 0 ? m->chip_us / 1e6 / b->bound_s : 0,
           b->floor_s * 1e3, b->floor_s > 0 ? m->chip_us / 1e6 / b->floor_s : 0,
           100 * m->busy_ps[0] / share, 100 * m->busy_ps[1] / share,
           100 * m->busy_ps[2] / share, 100 * m->busy_ps[4] / share,
           100 * m->busy_ps[3] / share, m->hbm_bytes / 1e9,
           b->hbm_bytes / 1e9, moe, m->cat_us[0] / 1e3, m->cat_us[1] / 1e3,
           m->cat_us[2] / 1e3, m->cat_us[3] / 1e3, m->cat_us[4] / 1e3);
}

/* The bound of the shape on the chip, with the built image's element size and routing. */
static int shape_bound(const struct bench_model_opts *o, const struct npu_image_header *h,
                       const struct shape *sh, struct npu_bound *b)
{
    const struct npu_bound_opts bo = {
        .elem_bytes = npu_dtype_bytes(h->plan.dtype),
        .skew_milli = h->plan.routing == NPU_ROUTING_SKEWED ? h->plan.routing_skew_milli : 0,
        .seed = h->plan.routing_seed };
    return npu_bound_step(&o->model, &o->chip, &sh->s, &bo, b) ? NPUCTL_EXIT_USAGE : 0;
}

bool bench_model_shape_fits(const struct bench_model_opts *o, const struct shape *sh)
{
    uint64_t need = (uint64_t)sh->s.context + sh->s.rows + 1;
    if (need <= o->model.max_position)
        return true;
    printf("%-18s skipped: %" PRIu64 " positions pass %s's max_position %u\n", sh->name, need,
           o->model.name, o->model.max_position);
    return false;
}

int bench_model_measure(const struct bench_model_opts *o, const struct npuctl_image_opts *io,
                        const struct shape *sh, const char *dir, const char *run_chip,
                        struct npu_image_header *h, struct measured *m, bool *planned)
{
    struct model_config cfg;
    const char *chip = run_chip           ? run_chip
                       : o->image.chip    ? o->image.chip
                                          : NPUCTL_DEFAULT_CHIP;
    *h = (struct npu_image_header){ 0 }, *m = (struct measured){ 0 };
    int rc = build_shape(io, sh, dir, &cfg, h);
    *planned = rc != NPUCTL_EXIT_USAGE || h->magic;
    if (!*planned)
        return 0;
    return rc ? rc : run_shape(o, sh, dir, chip, &h->plan, &cfg, m);
}

static int bench_one_shape(const struct bench_model_opts *o, const struct shape *sh,
                           const char *dir, bool *header)
{
    if (!bench_model_shape_fits(o, sh))
        return 0;
    struct npu_image_header h = { 0 };
    struct measured m = { 0 };
    struct npu_bound b;
    bool planned;
    int rc = bench_model_measure(o, &o->image, sh, dir, NULL, &h, &m, &planned);
    if (rc == 0 && !planned) { /* the planner refused it, and said why */
        printf("%-18s not planned: the planner's reason is above\n", sh->name);
        return 0;
    }
    rc = rc ? rc : shape_bound(o, &h, sh, &b);
    if (rc)
        return rc;
    if (!*header)
        print_header(o, &h), *header = true;
    print_row(sh, &m, &b);
    fflush(stdout);
    return 0;
}

/* The temp dir: the shapes' images, consoles and stats files, then the dir. */
static void remove_files(const char *dir)
{
    static const char *const ext[3] = { "img", "console.log", "stats.json" };
    char path[NPUCTL_PATH_MAX];
    for (size_t i = 0; i < NSHAPES; i++)
        for (int e = 0; e < 3; e++) {
            snprintf(path, sizeof(path), "%s/%s.%s", dir, shapes[i].name, ext[e]);
            remove(path);
        }
    for (int k = 0; k < 2; k++) { /* --search disagg --expert-cores's chip files */
        snprintf(path, sizeof(path), "%s/chip-%s.toml", dir, k ? "mixed" : "alt");
        remove(path);
    }
    if (rmdir(dir))
        npuctl_print_error("bench model: could not remove %s: %s", dir, strerror(errno));
}

/* Loads the model and chip configs once (so that a shape left unplanned is the planner's
   refusal, not a typo). */
static int load_configs(struct bench_model_opts *o)
{
    char path[NPUCTL_PATH_MAX], err[NPUCTL_ERR_MAX];
    const char *chip_name = o->image.chip ? o->image.chip : NPUCTL_DEFAULT_CHIP;
    if (npuctl_find_model(o->image.model, path, sizeof(path), err, sizeof(err)) ||
        model_config_load(&o->model, path, err, sizeof(err)) ||
        npuctl_load_chip(chip_name, &o->chip, path, sizeof(path), err, sizeof(err))) {
        npuctl_print_error("bench model: %s", err);
        return NPUCTL_EXIT_USAGE;
    }
    return 0;
}

int bench_model(int argc, char **argv)
{
    static struct bench_model_opts o; /* large: not on the stack */
    bool done;
    int rc = bench_model_parse(argc, argv, &o, &done);
    if (done)
        return rc;
    rc = check_shapes(&o);
    rc = rc ? rc : load_configs(&o);
    if (rc)
        return rc;
    char tmp[] = "/tmp/npuctl-bench-model-XXXXXX"; /* mkdtemp's template */
    const char *dir = o.out;
    if (dir && mkdir(dir, 0777) && errno != EEXIST) {
        npuctl_print_error("bench model: cannot create %s: %s", dir, strerror(errno));
        return NPUCTL_EXIT_USAGE;
    }
    if (!dir && !(dir = mkdtemp(tmp))) {
        npuctl_print_error("bench model: cannot create a directory in /tmp");
        return NPUCTL_EXIT_USAGE;
    }
    bool header = false;
    for (size_t i = 0; i < NSHAPES && rc == 0; i++)
        if (bench_model_shape_selected(&o, shapes[i].name))
            rc = o.image.search ? bench_model_search_disagg(&o, &shapes[i], dir)
                                : bench_one_shape(&o, &shapes[i], dir, &header);
    if (!o.out)
        remove_files(dir);
    return rc;
}
