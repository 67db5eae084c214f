/* SPDX-License-Identifier: MIT */
/* Counters, energy and the JSON report of a run; see chip_stats.h. */
#include "chip_stats.h"

#include <string.h>

static const char *const engine_names[NPU_ENGINE_COUNT] = { "matrix", "vector", "dma", "noc",
                                                             "dma2" };

void chip_stats_core_total(const struct chip_engines *e, uint32_t core,
                           struct chip_engine_counters *out)
{
    memset(out, 0, sizeof(*out));
    for (uint32_t eng = 0; eng < NPU_ENGINE_COUNT; eng++) {
        const struct chip_engine_counters *c = chip_engines_counters(e, core, eng);
        out->descs += c->descs;
        out->busy_ps += c->busy_ps;
        out->flops += c->flops;
        out->bytes += c->bytes;
        out->elements += c->elements;
        out->alu_ops += c->alu_ops;
        out->errors += c->errors;
        out->sram_bytes += c->sram_bytes;
        out->hbm_bytes += c->hbm_bytes;
        out->noc_byte_hops += c->noc_byte_hops;
    }
}

/* Dynamic energy of a set of counters, in femtojoules (as a double: no overflow). */
static double dynamic_fj(const struct chip_engine_counters *t, const struct chip_config *cfg,
                         struct chip_energy *parts)
{
    double mac = (double)(t->flops / 2) * cfg->energy_mac_fj;
    double vec = (double)t->alu_ops * cfg->energy_vector_fj;
    double sram = (double)t->sram_bytes * cfg->energy_sram_fj_per_byte;
    double hbm = (double)t->hbm_bytes * cfg->energy_hbm_fj_per_byte;
    double noc = (double)t->noc_byte_hops * cfg->energy_noc_fj_per_byte_hop;
    if (parts) {
        parts->mac_j += mac * 1e-15;
        parts->vector_j += vec * 1e-15;
        parts->sram_j += sram * 1e-15;
        parts->hbm_j += hbm * 1e-15;
        parts->noc_j += noc * 1e-15;
    }
    return mac + vec + sram + hbm + noc;
}

uint64_t chip_stats_core_counter(const struct chip_engines *e, const struct chip_config *cfg,
                                 uint32_t core, uint32_t id)
{
    struct chip_engine_counters t;
    if (id <= NPU_PERF_NOC_BUSY_PS)
        return chip_engines_counters(e, core, id)->busy_ps; /* engine order = counter order */
    chip_stats_core_total(e, core, &t);
    switch (id) {
    case NPU_PERF_DMA2_BUSY_PS: return chip_engines_counters(e, core, NPU_ENGINE_DMA2)->busy_ps;
    case NPU_PERF_DESCS: return t.descs;
    case NPU_PERF_FLOPS: return t.flops;
    case NPU_PERF_VECTOR_ELEMENTS: return t.elements;
    case NPU_PERF_SRAM_BYTES: return t.sram_bytes;
    case NPU_PERF_HBM_BYTES: return t.hbm_bytes;
    case NPU_PERF_NOC_BYTE_HOPS: return t.noc_byte_hops;
    case NPU_PERF_ENERGY_FJ: return (uint64_t)dynamic_fj(&t, cfg, NULL);
    default: return 0;
    }
}

void chip_stats_energy(const struct chip_engines *e, const struct chip_config *cfg,
                       uint64_t time_ps, struct chip_energy *out)
{
    memset(out, 0, sizeof(*out));
    for (uint32_t core = 0; core < e->ncores; core++) {
        struct chip_engine_counters t;
        chip_stats_core_total(e, core, &t);
        dynamic_fj(&t, cfg, out);
    }
    /* each core's static power by its type (an alt core's alt_static_mw_per_core, if set);
       mW x ps = 1e-3 W x 1e-12 s = 1e-15 J */
    double mw = 0;
    for (uint32_t core = 0; core < e->ncores; core++)
        mw += e->alt_core && e->alt_core[core] && cfg->alt_static_mw_per_core
                  ? cfg->alt_static_mw_per_core : cfg->static_mw_per_core;
    out->static_j = mw * (double)time_ps * 1e-15;
}

static void write_counters(FILE *f, const struct chip_engine_counters *c)
{
    fprintf(f, "{\"descs\": %llu, \"busy_ps\": %llu, \"flops\": %llu, \"bytes\": %llu, "
            "\"vector_elements\": %llu, \"sram_bytes\": %llu, \"hbm_bytes\": %llu, "
            "\"noc_byte_hops\": %llu, \"errors\": %llu}",
            (unsigned long long)c->descs, (unsigned long long)c->busy_ps,
            (unsigned long long)c->flops, (unsigned long long)c->bytes,
            (unsigned long long)c->elements, (unsigned long long)c->sram_bytes,
            (unsigned long long)c->hbm_bytes, (unsigned long long)c->noc_byte_hops,
            (unsigned long long)c->errors);
}

static void write_core(FILE *f, const struct chip_engines *e, uint32_t core)
{
    struct chip_engine_counters t;
    chip_stats_core_total(e, core, &t);
    fprintf(f, "    {\"core\": %u, \"total\": ", core);
    write_counters(f, &t);
    for (uint32_t eng = 0; eng < NPU_ENGINE_COUNT; eng++) {
        fprintf(f, ",\n     \"%s\": ", engine_names[eng]);
        write_counters(f, chip_engines_counters(e, core, eng));
    }
    fprintf(f, "}%s\n", core + 1 < e->ncores ? "," : "");
}

int chip_stats_write_json(FILE *f, const struct chip_engines *e, const struct chip_config *cfg,
                          uint64_t time_ps, bool performance)
{
    struct chip_engine_counters all, t;
    struct chip_energy en;
    memset(&all, 0, sizeof(all));
    for (uint32_t core = 0; core < e->ncores; core++) {
        chip_stats_core_total(e, core, &t);
        all.descs += t.descs, all.flops += t.flops, all.bytes += t.bytes;
        all.elements += t.elements, all.sram_bytes += t.sram_bytes;
        all.hbm_bytes += t.hbm_bytes, all.noc_byte_hops += t.noc_byte_hops;
        all.busy_ps += t.busy_ps, all.errors += t.errors;
    }
    chip_stats_energy(e, cfg, time_ps, &en);
    double total = en.mac_j + en.vector_j + en.sram_j + en.hbm_j + en.noc_j + en.static_j;
    fprintf(f, "{\n  \"chip\": \"%s\", \"mesh\": [%u, %u], \"mode\": \"%s\",\n"
            "  \"chip_time_ps\": %llu,\n  \"total\": ", cfg->name, cfg->mesh_rows,
            cfg->mesh_cols, performance ? "performance" : "functional",
            (unsigned long long)time_ps);
    write_counters(f, &all);
    fprintf(f, ",\n  \"energy_j\": {\"mac\": %.6g, \"vector\": %.6g, \"sram\": %.6g, "
            "\"hbm\": %.6g, \"noc\": %.6g, \"static\": %.6g, \"total\": %.6g},\n"
            "  \"cores\": [\n", en.mac_j, en.vector_j, en.sram_j, en.hbm_j, en.noc_j,
            en.static_j, total);
    for (uint32_t core = 0; core < e->ncores; core++)
        write_core(f, e, core);
    fprintf(f, "  ]\n}\n");
    return ferror(f) ? NPU_ERR_IO : NPU_OK;
}
