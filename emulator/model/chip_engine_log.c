/* SPDX-License-Identifier: MIT */
/* The engine log: every executed descriptor as a Chrome / Perfetto event; see
   chip_engine_log.h. */
#include "chip_engine_log.h"

#include <inttypes.h>

#include "npu_enums.h"

static const char *const engine_names[NPU_ENGINE_COUNT] = {
    [NPU_ENGINE_MATRIX] = "matrix", [NPU_ENGINE_VECTOR] = "vector", [NPU_ENGINE_DMA] = "dma",
    [NPU_ENGINE_NOC] = "noc",       [NPU_ENGINE_DMA2] = "dma2",
};
_Static_assert(NPU_ENGINE_COUNT == 5, "every engine has a name above");

static const char *const vector_names[] = {
    [NPU_VECTOR_OP_ADD] = "add",         [NPU_VECTOR_OP_MUL] = "mul",
    [NPU_VECTOR_OP_MAX] = "max",         [NPU_VECTOR_OP_SCALE] = "scale",
    [NPU_VECTOR_OP_EXP] = "exp",         [NPU_VECTOR_OP_SILU] = "silu",
    [NPU_VECTOR_OP_SWIGLU] = "swiglu",   [NPU_VECTOR_OP_CAST] = "cast",
    [NPU_VECTOR_OP_RMSNORM] = "rmsnorm", [NPU_VECTOR_OP_ROW_MAX] = "row_max",
    [NPU_VECTOR_OP_EXP_SUM] = "exp_sum", [NPU_VECTOR_OP_RESCALE] = "rescale",
    [NPU_VECTOR_OP_ROW_DIV] = "row_div", [NPU_VECTOR_OP_SOFTMAX] = "softmax",
    [NPU_VECTOR_OP_ROPE] = "rope",       [NPU_VECTOR_OP_TOPK] = "topk",
    [NPU_VECTOR_OP_ARGMAX] = "argmax",   [NPU_VECTOR_OP_MASK] = "mask",
    [NPU_VECTOR_OP_FILL] = "fill",
};

int chip_engine_log_open(struct chip_engine_log *log, const char *path, uint32_t core)
{
    *log = (struct chip_engine_log){ .core = core };
    log->f = fopen(path, "w");
    if (!log->f)
        return NPU_ERR_IO;
    if (fprintf(log->f, "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n") < 0)
        log->failed = true;
    return NPU_OK;
}

/* What the descriptor did, in a few words: the event's name. */
static void desc_name(const struct npu_desc *d, char *buf, size_t len)
{
    switch (d->engine) {
    case NPU_ENGINE_MATRIX:
        snprintf(buf, len, "gemm %" PRIu32 "x%" PRIu32 "x%" PRIu32 "%s", d->m, d->n, d->k,
                 d->batch > 1 ? " batch" : "");
        break;
    case NPU_ENGINE_VECTOR: {
        const char *op = d->op < sizeof(vector_names) / sizeof(vector_names[0]) &&
                                 vector_names[d->op] ? vector_names[d->op] : "op";
        snprintf(buf, len, "%s %" PRIu32 "x%" PRIu32, op, d->m, d->n);
        break;
    }
    default: /* DMA, DMA2, NoC: rows of bytes */
        snprintf(buf, len, "%s %" PRIu32 "x%" PRIu32 " B", engine_names[d->engine], d->m, d->n);
        break;
    }
}

void chip_engine_log_desc(struct chip_engine_log *log, uint32_t core, const struct npu_desc *d,
                          uint64_t ready_ps, uint64_t start_ps, uint64_t end_ps)
{
    if (!log->f || (log->core != CHIP_ENGINE_LOG_ALL && log->core != core) ||
        d->engine >= NPU_ENGINE_COUNT)
        return;
    char name[64];
    desc_name(d, name, sizeof(name));
    /* Microseconds with picosecond digits: the trace format's unit, exact. */
    int rc = fprintf(log->f,
                     "%s{\"name\": \"%s\", \"ph\": \"X\", \"pid\": %" PRIu32 ", \"tid\": \"%s\", "
                     "\"ts\": %" PRIu64 ".%06" PRIu64 ", \"dur\": %" PRIu64 ".%06" PRIu64 ", "
                     "\"args\": {\"queued_us\": %" PRIu64 ".%06" PRIu64 ", \"batch\": %" PRIu32
                     "}}",
                     log->events ? ",\n" : "", name, core, engine_names[d->engine],
                     start_ps / 1000000, start_ps % 1000000, (end_ps - start_ps) / 1000000,
                     (end_ps - start_ps) % 1000000, (start_ps - ready_ps) / 1000000,
                     (start_ps - ready_ps) % 1000000, d->batch);
    log->failed |= rc < 0;
    log->events++;
}

int chip_engine_log_close(struct chip_engine_log *log)
{
    if (!log->f)
        return NPU_OK;
    log->failed |= fprintf(log->f, "\n]}\n") < 0;
    log->failed |= fclose(log->f) != 0;
    log->f = NULL;
    return log->failed ? NPU_ERR_IO : NPU_OK;
}
