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
#include <unistd.h>

#include "kv_config.h"
#include "model_config.h"
#include "npu_plan.h"
#include "npu_enums.h"
#include "npu_memmap.h"
#include "opts.h"

enum { OUT_FILE };

static int apply_out(void *ctx, const struct npuctl_opt *opt, const char *v, char *err,
                     size_t errlen)
{
    (void)opt, (void)err, (void)errlen;
    ((struct npuctl_image_opts *)ctx)->out = v;
    return 0;
}

static const struct npuctl_opt out_opts[] = {
    { "-o", "--out", "FILE", NULL, "the image file to write; required", OUT_FILE,
      NPUCTL_CMD_BIT(NPUCTL_CMD_BUILD_IMAGE) },
};
static const struct npuctl_opt_group out_group = {
    "build-image options", out_opts, sizeof(out_opts) / sizeof(out_opts[0]), apply_out,
};

/* Defaults and the options of spec's command into *o (no check of what is required). */
static int parse_image_only(const struct npuctl_cmd_spec *spec, int argc, char **argv,
                            struct npuctl_image_opts *o, bool *help, char *err, size_t errlen)
{
    void *const ctx[NPUCTL_GROUPS_MAX] = { o, o };
    struct npuctl_args args;
    npuctl_image_opts_init(o);
    int rc = npuctl_opts_parse(spec, ctx, argc, argv, &args, err, errlen);
    *help = args.help;
    npuctl_args_free(&args);
    return rc;
}

/* plan / build-image: 0 to go on, else the exit status (0 after the help). */
static int parse_image_args(const struct npuctl_cmd_spec *spec, int argc, char **argv,
                            struct npuctl_image_opts *o, bool *done)
{
    char err[NPUCTL_ERR_MAX];
    bool help;
    int rc = parse_image_only(spec, argc, argv, o, &help, err, sizeof(err));
    *done = true;
    if (rc) {
        if (err[0])
            npuctl_print_error("%s", err);
        return NPUCTL_EXIT_USAGE;
    }
    if (help) {
        npuctl_opts_print_help(stdout, spec);
        return 0;
    }
    if (!o->model)
        return npuctl_usage_error("%s: --model NAME|PATH is required (npuctl models lists "
                                  "them)", spec->name);
    if (spec->id == NPUCTL_CMD_BUILD_IMAGE && !o->out)
        return npuctl_usage_error("build-image: -o FILE is required");
    *done = false;
    return 0;
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
    if (npuctl_find_model(o->model, mpath, sizeof(mpath), err, sizeof(err)) ||
        kv_config_read(mpath, text, sizeof(text), err, sizeof(err)) ||
        model_config_parse(&cfg, text, mpath, err, sizeof(err)) ||
        npuctl_load_chip(o->chip, &chip, cpath, sizeof(cpath), err, sizeof(err)))
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
    bool done;
    int rc = parse_image_args(&npuctl_spec_plan, argc, argv, &o, &done);
    if (done)
        return rc;
    if (o.disagg || o.search)
        return npuctl_plan_disagg(&o);
    rc = plan_and_build(&o, &img);
    if (rc == 0)
        npu_built_image_free(&img);
    return rc;
}

int npuctl_cmd_build_image(int argc, char **argv)
{
    struct npuctl_image_opts o;
    struct npu_built_image img;
    bool done;
    int rc = parse_image_args(&npuctl_spec_build_image, argc, argv, &o, &done);
    if (done)
        return rc;
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

/* Whether argv (up to `--`) gives the option spelled name, as `NAME V` or `NAME=V`. */
static bool option_given(int argc, char **argv, const char *name)
{
    size_t len = strlen(name);
    for (int i = 0; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (!strncmp(argv[i], name, len) && (argv[i][len] == '\0' || argv[i][len] == '='))
            return true;
    return false;
}

/* QEMU's arguments of flash: the user's, the loader, and one -append with the image's size
   added to the user's bootargs. */
static void add_qemu_args(const struct npuctl_run_opts *ro, const char *loader, long size,
                          char *append, size_t appendlen, char **args, int *n)
{
    const char *user_append = "";
    for (int j = 0; j + 1 < ro->extra_argc; j++)
        if (!strcmp(ro->extra_argv[j], "-append"))
            user_append = ro->extra_argv[j + 1];
    snprintf(append, appendlen, "%s%simage_bytes=%ld", user_append, *user_append ? " " : "",
             size);
    args[(*n)++] = "--";
    args[(*n)++] = "-device", args[(*n)++] = (char *)loader;
    for (int j = 0; j < ro->extra_argc; j++) {
        if (!strcmp(ro->extra_argv[j], "-append") && j + 1 < ro->extra_argc) {
            j++;
            continue;
        }
        args[(*n)++] = ro->extra_argv[j];
    }
    args[(*n)++] = "-append", args[(*n)++] = append;
}

/* The image's header (*header_ok: it has one) and the file's size. */
static int read_image_header(const char *image, struct npu_image_header *h, bool *header_ok,
                             long *size)
{
    FILE *f = fopen(image, "rb");
    if (!f)
        return npuctl_usage_error("flash: cannot open %s", image);
    size_t got = fread(h, 1, sizeof(*h), f);
    *size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    fclose(f);
    if (*size < 0)
        return npuctl_usage_error("flash: cannot read %s", image);
    *header_ok = got == sizeof(*h) && h->magic == NPU_IMAGE_MAGIC;
    return 0;
}

/*
 * flash IMAGE [run options] [-- QEMU args]: `npuctl run model` with the image loaded at
 * the base of HBM and, unless given, --chip and --mode taken from the image's header (only
 * to pick defaults; the control core does the checking).
 */
/* Whether models/chips/NAME.toml exists (an image records its chip by name only). */
static bool chip_is_preset(const char *name)
{
    char path[NPUCTL_PATH_MAX], err[NPUCTL_ERR_MAX];
    return npuctl_resolve_chip_path(name, npuctl_get_dir(NPUCTL_DIR_SOURCE), path, sizeof(path),
                                    err, sizeof(err)) == 0 &&
           access(path, F_OK) == 0;
}

int npuctl_cmd_flash(int argc, char **argv)
{
    struct npuctl_run_opts ro;
    struct npu_image_header h = { 0 };
    const char *image = NULL;
    char err[NPUCTL_ERR_MAX], loader[NPUCTL_PATH_MAX + 96], chip[72], append[8192];
    bool header_ok = false;
    long size = 0;
    if (npuctl_parse_flash_args(argc, argv, &ro, &image, err, sizeof(err)))
        return npuctl_usage_error("%s", err);
    if (ro.help) {
        npuctl_opts_print_help(stdout, &npuctl_spec_flash);
        return 0;
    }
    if (read_image_header(image, &h, &header_ok, &size))
        return NPUCTL_EXIT_USAGE;
    snprintf(loader, sizeof(loader), "loader,file=%s,addr=%#" PRIx64 ",force-raw=on", image,
             (uint64_t)NPU_MAP_HBM_BASE);
    snprintf(chip, sizeof(chip), "%.64s", h.chip_name);
    if (header_ok && !option_given(argc, argv, "--chip") && !chip_is_preset(chip))
        return npuctl_usage_error("flash: %s was built for chip '%s', which is not a preset "
                                  "(npuctl chips): give its config file with --chip PATH",
                                  image, chip);
    char **args = calloc((size_t)argc + 12, sizeof(char *));
    if (!args)
        return npuctl_usage_error("out of memory");
    int n = 0;
    args[n++] = "model";
    if (header_ok && !option_given(argc, argv, "--chip"))
        args[n++] = "--chip", args[n++] = chip;
    if (header_ok && !option_given(argc, argv, "--mode"))
        args[n++] = "--mode", args[n++] = h.plan.mode ? "performance" : "functional";
    for (int i = 0; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (argv[i] != image) /* the run options as given */
            args[n++] = argv[i];
    add_qemu_args(&ro, loader, size, append, sizeof(append), args, &n);
    int rc = npuctl_cmd_run(n, args);
    free(args);
    return rc;
}

static int parse_only_plan(int argc, char **argv, char *err, size_t errlen)
{
    struct npuctl_image_opts o;
    bool help;
    return parse_image_only(&npuctl_spec_plan, argc, argv, &o, &help, err, errlen);
}

static int parse_only_build_image(int argc, char **argv, char *err, size_t errlen)
{
    struct npuctl_image_opts o;
    bool help;
    return parse_image_only(&npuctl_spec_build_image, argc, argv, &o, &help, err, errlen);
}

const struct npuctl_cmd_spec npuctl_spec_plan = {
    "plan", NPUCTL_CMD_PLAN, "npuctl plan --model NAME|PATH [--chip NAME|PATH] [OPTIONS]\n",
    "plan a model on a chip and print the plan",
    "  Plan a model on a chip and print the plan: ranks, partition per GEMM, SRAM per core\n"
    "  (tile buffers, residual, KV cache, weights resident or staged), HBM. A plan that\n"
    "  does not divide the model or fit the chip is refused with the numbers (exit 2).\n"
    "  What the options leave unset the planner chooses from the model and the chip,\n"
    "  and prints as \"chosen by the planner\" (docs/images.md, \"Automatic plan\").\n",
    { &npuctl_plan_group, &out_group }, false, 0, parse_only_plan,
};

const struct npuctl_cmd_spec npuctl_spec_build_image = {
    "build-image", NPUCTL_CMD_BUILD_IMAGE,
    "npuctl build-image --model NAME|PATH [--chip NAME|PATH] [OPTIONS] -o FILE\n",
    "plan a model and write its image",
    "  Plan (as npuctl plan) and write the image: header with format version and\n"
    "  checksum, model config, tensor table, per-core SRAM map and layer program, and in\n"
    "  functional mode the weights (docs/images.md).\n",
    { &npuctl_plan_group, &out_group }, false, 0, parse_only_build_image,
};
