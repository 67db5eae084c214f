/* SPDX-License-Identifier: MIT */
/*
 * npuctl plan / build-image / flash (docs/images.md): the planner's front door. `plan`
 * prints what an image would be, `build-image` writes it, `flash` runs the `model` firmware
 * with the image placed at the base of HBM, where the control core checks it before any core
 * loads anything. Exit status 2 for a plan that is refused, a bad argument or file; flash
 * exits with the run's status (1 when the chip refuses the image).
 */
#define _POSIX_C_SOURCE 200809L
#include "npuctl.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_config.h"
#include "model_config.h"
#include "npu_plan.h"
#include "npu_enums.h"
#include "npu_memmap.h"

/* A size or count the planner otherwise chooses: at least 1 (leaving the option out is how
   to ask for the planner's default; 0 is refused rather than read as it). */
static int parse_u32(const char *opt, const char *v, uint32_t *out)
{
    return npuctl_parse_u32(opt, v, 1, UINT32_MAX, out);
}

/* "mn", "k", "2d", "auto" for every GEMM, "ep" for both expert GEMMs, or a list
   "qkv=mn,o=2d,expert_up=ep,...". */
static int parse_partition(const char *v, uint32_t *part)
{
    static const struct { const char *word; uint32_t value; } words[] = {
        { "auto", NPU_PLAN_AUTO }, { "mn", NPU_PART_MN }, { "k", NPU_PART_K },
        { "2d", NPU_PART_2D }, { "ep", NPU_PART_EP },
    };
    const int nwords = (int)(sizeof(words) / sizeof(words[0]));
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", v);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        const char *val = eq ? eq + 1 : tok;
        int which = -1, g = -1;
        for (int i = 0; i < nwords; i++)
            which = strcmp(val, words[i].word) == 0 ? i : which;
        if (eq) {
            *eq = '\0';
            for (int i = 0; i < NPU_GEMM_COUNT; i++)
                g = strcmp(tok, npu_gemm_name((enum npu_gemm)i)) == 0 ? i : g;
        }
        if (which < 0 || (eq && g < 0))
            return npuctl_usage_error(
                "--partition: '%s' (%s)", v,
                "mn|k|2d|auto|ep, or GEMM=mn|k|2d|auto|ep,... with "
                "GEMM one of qkv, o, ffn_up, ffn_down, expert_up, expert_down, lm_head");
        const bool ep_all = !eq && words[which].value == NPU_PART_EP;
        for (int i = 0; i < NPU_GEMM_COUNT; i++)
            if (ep_all ? i == NPU_GEMM_EXP_UP || i == NPU_GEMM_EXP_DOWN : g < 0 || g == i)
                part[i] = words[which].value;
    }
    return 0;
}

static int parse_enum(const char *opt, const char *v, const char *const *names, int n,
                      int *out)
{
    for (int i = 0; v && i < n; i++)
        if (strcmp(v, names[i]) == 0) {
            *out = i;
            return 0;
        }
    return npuctl_usage_error("%s: unknown value '%s'", opt, v ? v : "(missing)");
}

static int parse_routing(const char *v, struct npu_plan_request *req)
{
    if (v && strcmp(v, "uniform") == 0) {
        req->routing = NPU_ROUTING_UNIFORM;
        return 0;
    }
    double a = 0;
    if (!v || strncmp(v, "skewed:", 7) != 0)
        return npuctl_usage_error("--routing: '%s' (%s)", v ? v : "(missing)",
                                  "uniform, or skewed:ALPHA with a Zipf exponent 0..4");
    if (npuctl_parse_real("--routing skewed:ALPHA", v + 7, 0.0, 4.0, &a))
        return NPUCTL_EXIT_USAGE;
    req->routing = NPU_ROUTING_SKEWED;
    req->routing_skew_milli = (uint32_t)(a * 1000.0 + 0.5);
    return 0;
}

static int parse_option(struct npuctl_image_opts *o, const char *opt, const char *v)
{
    static const char *const places[] = { "linear", "interleaved", "ring", "mesh2d" };
    static const char *const modes[] = { "functional", "performance" };
    static const char *const dtypes[] = { "fp32", "bf16" };
    struct npu_plan_request *r = &o->req;
    int e = 0;
    if (!strcmp(opt, "--model")) o->model = v;
    else if (!strcmp(opt, "--chip")) o->chip = v;
    else if (!strcmp(opt, "-o") || !strcmp(opt, "--out")) o->out = v;
    else if (!strcmp(opt, "--tp")) return parse_u32(opt, v, &r->tp);
    else if (!strcmp(opt, "--stages")) return parse_u32(opt, v, &r->stages);
    else if (!strcmp(opt, "--instances")) return parse_u32(opt, v, &r->instances);
    else if (!strcmp(opt, "--max-batch")) return parse_u32(opt, v, &r->max_batch);
    else if (!strcmp(opt, "--max-tokens")) return parse_u32(opt, v, &r->max_tokens);
    else if (!strcmp(opt, "--max-seq")) return parse_u32(opt, v, &r->max_seq);
    else if (!strcmp(opt, "--tile-rows")) return parse_u32(opt, v, &r->tile_rows);
    else if (!strcmp(opt, "--moe-rows")) return parse_u32(opt, v, &r->moe_rows);
    else if (!strcmp(opt, "--moe-spill-rows")) return parse_u32(opt, v, &r->moe_spill_rows);
    else if (!strcmp(opt, "--moe-units-rows")) {
        uint32_t n = 0; /* 0: never */
        int rc = npuctl_parse_u32(opt, v, 0, INT32_MAX, &n);
        r->moe_units_rows = rc ? r->moe_units_rows : (int32_t)n;
        return rc;
    }
    else if (!strcmp(opt, "--expert-slots")) return parse_u32(opt, v, &r->expert_slots);
    else if (!strcmp(opt, "--kv-block")) return parse_u32(opt, v, &r->kv_block);
    else if (!strcmp(opt, "--attn-block")) return parse_u32(opt, v, &r->attn_block);
    else if (!strcmp(opt, "--kv-window")) return parse_u32(opt, v, &r->kv_window);
    else if (!strcmp(opt, "--comm-segment")) return parse_u32(opt, v, &r->comm_segment);
    else if (!strcmp(opt, "--kv-sram-blocks")) {
        uint32_t n = 0; /* 0: no pool */
        int rc = v && !strcmp(v, "auto") ? 0 : npuctl_parse_u32(opt, v, 0, UINT32_MAX, &n);
        r->kv_sram_blocks = v && !strcmp(v, "auto") ? -1 : (int64_t)n;
        return rc;
    } else if (!strcmp(opt, "--kv-ring-rows")) {
        uint32_t n = 0;
        int rc = parse_u32(opt, v, &n);
        r->kv_ring_rows = rc ? r->kv_ring_rows : n;
        return rc;
    }
    else if (!strcmp(opt, "--partition")) return v ? parse_partition(v, r->partition)
                                                   : npuctl_usage_error("%s needs a value", opt);
    else if (!strcmp(opt, "--routing")) return parse_routing(v, r);
    else if (!strcmp(opt, "--kv-split")) {
        static const char *const onoff[] = { "off", "on" };
        int rc = parse_enum(opt, v, onoff, 2, &e);
        r->kv_split = e;
        return rc;
    }
    else if (!strcmp(opt, "--weights")) {
        static const char *const ws[] = { "auto", "stream" };
        int rc = parse_enum(opt, v, ws, 2, &e);
        r->stream_weights = (uint32_t)e;
        return rc;
    }
    else if (!strcmp(opt, "--stage-buffers")) {
        static const char *const nb[] = { "1", "2" };
        int rc = parse_enum(opt, v, nb, 2, &e);
        r->stage_single = e == 0;
        return rc;
    }
    else if (!strcmp(opt, "--routing-seed")) {
        uint64_t s = 0;
        int rc = npuctl_parse_uint(opt, v, 0, UINT64_MAX, &s);
        r->routing_seed = rc ? r->routing_seed : s;
        return rc;
    } else if (!strcmp(opt, "--expert-placement")) {
        static const char *const xs[] = { "contiguous", "balanced" };
        int rc = parse_enum(opt, v, xs, 2, &e);
        r->expert_placement = e;
        return rc;
    } else if (!strcmp(opt, "--placement")) {
        int rc = parse_enum(opt, v, places, 4, &e);
        r->placement = e;
        return rc;
    } else if (!strcmp(opt, "--mode")) {
        int rc = parse_enum(opt, v, modes, 2, &e);
        r->mode = (uint32_t)e;
        return rc;
    } else if (!strcmp(opt, "--dtype")) {
        int rc = parse_enum(opt, v, dtypes, 2, &e);
        r->dtype = e;
        return rc;
    } else
        return NPUCTL_IMAGE_UNKNOWN;
    return v ? 0 : npuctl_usage_error("%s needs a value", opt);
}

int npuctl_image_option(struct npuctl_image_opts *o, const char *opt, const char *v)
{
    return parse_option(o, opt, v);
}

void npuctl_image_opts_init(struct npuctl_image_opts *o)
{
    *o = (struct npuctl_image_opts){ .chip = NPUCTL_DEFAULT_CHIP };
    npu_plan_request_init(&o->req);
}

static int parse_image_args(int argc, char **argv, struct npuctl_image_opts *o, bool need_out)
{
    npuctl_image_opts_init(o);
    for (int i = 0; i < argc; i += 2) {
        int rc = parse_option(o, argv[i], i + 1 < argc ? argv[i + 1] : NULL);
        if (rc == NPUCTL_IMAGE_UNKNOWN)
            return npuctl_usage_error("unknown option '%s' (npuctl help plan)", argv[i]);
        if (rc)
            return rc;
    }
    if (!o->model)
        return npuctl_usage_error("--model NAME|PATH is required");
    if (need_out && !o->out)
        return npuctl_usage_error("-o FILE is required");
    return 0;
}

/* NAME -> models/configs/NAME.toml or models/tiny/NAME.toml; a path is used as it is. */
void npuctl_resolve_model_path(const char *model, char *path, size_t len)
{
    const char *src = npuctl_get_dir(NPUCTL_DIR_SOURCE);
    if (strchr(model, '/') || strstr(model, ".toml")) {
        snprintf(path, len, "%s", model);
        return;
    }
    snprintf(path, len, "%s/models/configs/%s.toml", src, model);
    FILE *f = fopen(path, "r");
    if (f) {
        fclose(f);
        return;
    }
    snprintf(path, len, "%s/models/tiny/%s.toml", src, model);
}

static int plan_and_build(const struct npuctl_image_opts *o, struct npu_built_image *img)
{
    struct model_config cfg;
    return npuctl_image_build(o, img, &cfg, stdout);
}

int npuctl_image_build(const struct npuctl_image_opts *o, struct npu_built_image *img,
                       struct model_config *model, FILE *summary)
{
    char err[NPUCTL_ERR_MAX], mpath[NPUCTL_PATH_MAX], cpath[NPUCTL_PATH_MAX];
    struct model_config cfg;
    struct chip_config chip;
    static char text[MODEL_CONFIG_TEXT_MAX];
    npuctl_resolve_model_path(o->model, mpath, sizeof(mpath));
    if (kv_config_read(mpath, text, sizeof(text), err, sizeof(err)) ||
        model_config_parse(&cfg, text, mpath, err, sizeof(err)) ||
        npuctl_resolve_chip_path(o->chip, npuctl_get_dir(NPUCTL_DIR_SOURCE), cpath,
                                 sizeof(cpath), err, sizeof(err)) ||
        chip_config_load(&chip, cpath, err, sizeof(err)))
        return npuctl_usage_error("%s", err);
    struct npu_plan_chip pc = { .mesh_rows = chip.mesh_rows, .mesh_cols = chip.mesh_cols,
                                .sram_bytes = chip.sram_bytes, .hbm_bytes = chip.hbm_bytes,
                                .sa_rows = chip.sa_rows, .sa_cols = chip.sa_cols,
                                .freq_mhz = chip.freq_mhz, .hbm_gbps = chip.hbm_gbps };
    snprintf(pc.name, sizeof(pc.name), "%s", chip.name);
    struct npu_plan_request req = o->req;
    if (!req.tp && o->narrow_tp && cfg.hidden_size < NPUCTL_NARROW_HIDDEN)
        req.tp = o->narrow_tp;
    int rc = npu_plan_build(&cfg, text, &pc, &req, img, summary, err, sizeof(err));
    if (rc != NPU_OK) {
        fprintf(stderr, "npuctl: plan refused: %s\n", err);
        return NPUCTL_EXIT_USAGE;
    }
    *model = cfg;
    return 0;
}

int npuctl_cmd_plan(int argc, char **argv)
{
    struct npuctl_image_opts o;
    struct npu_built_image img;
    int rc = parse_image_args(argc, argv, &o, false);
    if (rc == 0)
        rc = plan_and_build(&o, &img);
    if (rc == 0)
        npu_built_image_free(&img);
    return rc;
}

int npuctl_cmd_build_image(int argc, char **argv)
{
    struct npuctl_image_opts o;
    struct npu_built_image img;
    int rc = parse_image_args(argc, argv, &o, true);
    if (rc == 0)
        rc = plan_and_build(&o, &img);
    if (rc)
        return rc;
    FILE *f = fopen(o.out, "wb");
    bool ok = f && fwrite(img.data, 1, img.bytes, f) == img.bytes;
    ok = f && fclose(f) == 0 && ok;
    if (ok)
        printf("image: %s, %" PRIu64 " bytes, checksum %#018" PRIx64 "\n", o.out, img.bytes,
               ((const struct npu_image_header *)img.data)->checksum);
    npu_built_image_free(&img);
    return ok ? 0 : npuctl_usage_error("-o %s: cannot write the image", o.out);
}

/*
 * flash IMAGE [run options] [-- QEMU args]: `npuctl run model` with the image loaded at
 * the base of HBM and, unless given, --chip and --mode taken from the image's header (only
 * to pick defaults; the control core does the checking).
 */
int npuctl_cmd_flash(int argc, char **argv)
{
    if (argc < 1 || argv[0][0] == '-')
        return npuctl_usage_error("flash: IMAGE is required");
    const char *image = argv[0];
    struct npu_image_header h = { 0 };
    FILE *f = fopen(image, "rb");
    if (!f)
        return npuctl_usage_error("flash: cannot open %s", image);
    size_t got = fread(&h, 1, sizeof(h), f);
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    fclose(f);
    if (size < 0)
        return npuctl_usage_error("flash: cannot read %s", image);
    bool header_ok = got == sizeof(h) && h.magic == NPU_IMAGE_MAGIC;
    bool chip_given = false, mode_given = false;
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        chip_given |= !strcmp(argv[i], "--chip"), mode_given |= !strcmp(argv[i], "--mode");
    char loader[NPUCTL_PATH_MAX + 96], chip[72], append[8192];
    snprintf(loader, sizeof(loader), "loader,file=%s,addr=%#" PRIx64 ",force-raw=on", image,
             (uint64_t)NPU_MAP_HBM_BASE);
    snprintf(chip, sizeof(chip), "%.64s", h.chip_name);
    char **args = calloc((size_t)argc + 12, sizeof(char *));
    int n = 0;
    args[n++] = "model";
    if (header_ok && !chip_given)
        args[n++] = "--chip", args[n++] = chip;
    if (header_ok && !mode_given)
        args[n++] = "--mode", args[n++] = h.plan.mode ? "performance" : "functional";
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++)
        args[n++] = argv[i];
    args[n++] = "--";
    args[n++] = "-device", args[n++] = loader;
    /* The file's size goes to the control core with the bootargs (one -append). */
    const char *user_append = "";
    for (int j = i + 1; j < argc; j++)
        if (!strcmp(argv[j], "-append") && j + 1 < argc)
            user_append = argv[j + 1];
    snprintf(append, sizeof(append), "%s%simage_bytes=%ld", user_append,
             *user_append ? " " : "", size);
    for (i++; i < argc; i++) {
        if (!strcmp(argv[i], "-append") && i + 1 < argc) {
            i++;
            continue;
        }
        args[n++] = argv[i];
    }
    args[n++] = "-append", args[n++] = append;
    int rc = npuctl_cmd_run(n, args);
    free(args);
    return rc;
}
