/* SPDX-License-Identifier: MIT */
/*
 * npuctl serve --decode-cores SPEC: heterogeneous PD disaggregation (the NPU paper, section
 * 4.3.1 and Figure 12; docs/serving.md, "Heterogeneous decode cores"). The decode
 * instances' cores get other engine sizes than the prefill instances' cores: npuctl writes
 * DIR/chip.toml, the chip's config with alt_cores naming the cores of the plan's decode
 * instances (rt_pd_roles) and the alt_* sizes of SPEC, and the run uses that file. The plan
 * is made for the base chip (SRAM, placement and tiling do not change); only the engines'
 * timing on the decode cores does.
 */
#define _POSIX_C_SOURCE 200809L
#include "serve_opts.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chip_config.h"
#include "kv_config.h"
#include "npu_enums.h"

static int bad_spec(const char *opt, const char *v, const char *what)
{
    npuctl_print_error("%s %s: %s (expected KEY=VALUE,... with keys sa=RxC, "
                       "sram_bytes_per_cycle, vector_lanes, hbm_gbps, cost, power)", opt, v,
                       what);
    return NPUCTL_EXIT_USAGE;
}

/* cost=X: a decimal real in [1e-6, 1e9] (chip_config's alt_core_cost range). */
static bool parse_cost(const char *s, const char **end, double *out)
{
    char *e;
    errno = 0;
    double x = strtod(s, &e);
    for (const char *c = s; c < e; c++) /* no hex, inf or nan: what the chip file reads */
        if (!strchr("0123456789.eE+-", *c))
            return false;
    if (e == s || errno || *s < '0' || *s > '9' || !(x >= 1e-6) || x > 1e9)
        return false;
    *out = x, *end = e;
    return true;
}

static bool parse_u32(const char *s, const char **end, uint32_t lo, uint32_t hi, uint32_t *out)
{
    char *e;
    errno = 0;
    unsigned long x = strtoul(s, &e, 10);
    if (e == s || errno || *s < '0' || *s > '9' || x < lo || x > hi)
        return false;
    *out = (uint32_t)x, *end = e;
    return true;
}

int serve_hetero_parse(const char *v, struct serve_hetero *h)
{
    return hetero_parse("--decode-cores", v, h);
}

int hetero_parse(const char *opt, const char *v, struct serve_hetero *h)
{
    *h = (struct serve_hetero){ .set = true, .spec = v };
    if (!v || !*v)
        return bad_spec(opt, v ? v : "(missing)", "empty");
    for (const char *p = v; *p;) {
        const char *eq = strchr(p, '='), *end = NULL;
        if (*p == ',')
            return bad_spec(opt, v, "an empty item");
        if (!eq)
            return bad_spec(opt, v, "an item without '='");
        size_t klen = (size_t)(eq - p);
        bool ok;
        if (klen == 2 && !strncmp(p, "sa", 2))
            ok = parse_u32(eq + 1, &end, 1, 512, &h->sa_rows) && *end == 'x' &&
                 parse_u32(end + 1, &end, 1, 512, &h->sa_cols);
        else if (klen == 20 && !strncmp(p, "sram_bytes_per_cycle", 20))
            ok = parse_u32(eq + 1, &end, 1, 65536, &h->sram_bytes_per_cycle);
        else if (klen == 12 && !strncmp(p, "vector_lanes", 12))
            ok = parse_u32(eq + 1, &end, 1, 1024, &h->vector_lanes);
        else if (klen == 8 && !strncmp(p, "hbm_gbps", 8))
            ok = parse_u32(eq + 1, &end, 1, 100000, &h->hbm_gbps);
        else if (klen == 4 && !strncmp(p, "cost", 4))
            ok = parse_cost(eq + 1, &end, &h->cost);
        else if (klen == 5 && !strncmp(p, "power", 5))
            ok = parse_u32(eq + 1, &end, 1, 1000000, &h->static_mw);
        else
            return bad_spec(opt, v, "unknown key");
        if (!ok || (*end && *end != ','))
            return bad_spec(opt, v, "a value out of range or malformed (sa 1..512 x 1..512, "
                               "sram_bytes_per_cycle 1..65536, vector_lanes 1..1024, "
                               "hbm_gbps 1..100000, cost 1e-6..1e9, power 1..1000000 mW)");
        if (*end == ',' && !end[1])
            return bad_spec(opt, v, "an empty item");
        p = *end ? end + 1 : end;
    }
    return 0;
}

static bool is_decode_core(const struct npu_image_core *core, const enum rt_pd_role *roles)
{
    return core->rank != NPU_IMAGE_IDLE && roles[core->instance] == RT_PD_DECODE;
}

/* "a-b,c" of the cores of the plan's decode instances, in core order. */
static int decode_core_list(const struct serve_opts *o, const void *image, char *out,
                            size_t len)
{
    const struct npu_image_header *h = image;
    const struct npu_image_core *cores =
        (const struct npu_image_core *)((const uint8_t *)image + h->cores_off);
    enum rt_pd_role roles[RT_PD_INSTANCES_MAX];
    rt_pd_roles(h->plan.instances, serve_opts_prefill_instances(o, h->plan.instances), roles);
    size_t used = 0;
    out[0] = '\0';
    for (uint32_t c = 0; c < h->cores_count;) {
        uint32_t e = c + 1;
        if (!is_decode_core(&cores[c], roles)) {
            c = e;
            continue;
        }
        while (e < h->cores_count && is_decode_core(&cores[e], roles))
            e++;
        int n = e - c > 1 ? snprintf(out + used, len - used, "%s%u-%u", used ? "," : "", c, e - 1)
                          : snprintf(out + used, len - used, "%s%u", used ? "," : "", c);
        if (n < 0 || (size_t)n >= len - used)
            return npuctl_usage_error("--decode-cores: the decode cores' list is longer than "
                                      "%zu characters", len - 1);
        used += (size_t)n;
        c = e;
    }
    return 0;
}

int serve_hetero_write_chip(struct serve_opts *o, const void *image)
{
    char list[CHIP_ALT_CORES_MAX];
    int rc = decode_core_list(o, image, list, sizeof(list));
    if (rc)
        return rc;
    int n = snprintf(o->run_chip, sizeof(o->run_chip), "%s/chip.toml", o->out);
    if (n < 0 || (size_t)n >= sizeof(o->run_chip))
        return npuctl_usage_error("--out %s: path too long for DIR/chip.toml", o->out);
    return hetero_write_chip("--decode-cores", o->image.chip, o->run_chip, list,
                             &o->decode_cores);
}

int hetero_write_chip(const char *opt, const char *chip, const char *path, const char *list,
                      const struct serve_hetero *d)
{
    char err[NPUCTL_ERR_MAX], base[NPUCTL_PATH_MAX];
    static char text[16384];
    struct chip_config check;
    if (npuctl_resolve_chip_path(chip, npuctl_get_dir(NPUCTL_DIR_SOURCE), base, sizeof(base),
                                 err, sizeof(err)) ||
        kv_config_read(base, text, sizeof(text), err, sizeof(err)) ||
        chip_config_parse(&check, text, base, err, sizeof(err)))
        return npuctl_usage_error("%s", err);
    if (check.alt_cores[0])
        return npuctl_usage_error("%s: chip %s already has alt_cores", opt, base);
    FILE *f = fopen(path, "w");
    if (!f)
        return npuctl_usage_error("cannot write %s: %s", path, strerror(errno));
    fprintf(f, "%s\n# npuctl %s: the cores it names\nalt_cores = \"%s\"\n", text, opt, list);
    if (d->sa_rows)
        fprintf(f, "alt_sa_rows = %u\nalt_sa_cols = %u\n", d->sa_rows, d->sa_cols);
    if (d->sram_bytes_per_cycle)
        fprintf(f, "alt_sram_bytes_per_cycle = %u\n", d->sram_bytes_per_cycle);
    if (d->vector_lanes)
        fprintf(f, "alt_vector_lanes = %u\n", d->vector_lanes);
    if (d->hbm_gbps)
        fprintf(f, "alt_hbm_gbps = %u\n", d->hbm_gbps);
    if (d->cost > 0)
        fprintf(f, "alt_core_cost = %.9g\n", d->cost);
    if (d->static_mw)
        fprintf(f, "alt_static_mw_per_core = %u\n", d->static_mw);
    if (fclose(f))
        return npuctl_usage_error("cannot write %s", path);
    if (chip_config_load(&check, path, err, sizeof(err)))
        return npuctl_usage_error("%s: %s", opt, err);
    return 0;
}
