/* SPDX-License-Identifier: MIT */
/*
 * Flat config files: the TOML subset every config of the project uses (chip configs,
 * model configs). `key = value` lines, `#` comments; integers in decimal (no leading zeros)
 * or 0x hex, `_` separators allowed; strings in double quotes; reals (KV_F64 fields only) in
 * decimal with an optional fraction and exponent. A table of fields says where each value
 * goes and its range; every field is required unless the table marks it optional (then
 * it stays zero when absent), and an unknown, repeated, missing, malformed or out-of-range
 * field is an error naming the file, the line and the field.
 */
#ifndef KV_CONFIG_H
#define KV_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum kv_type { KV_U32, KV_U64, KV_STRING, KV_F64 };

struct kv_field {
    const char *key;
    enum kv_type type;
    size_t offset;        /* in the destination struct */
    uint64_t min, max;    /* integers: the range; strings: length (max < the buffer) */
    double fmin, fmax;    /* reals: the range */
    bool optional;        /* may be absent (the destination keeps zero) */
};

/* Parses text into obj (the caller zeroes it first). NPU_OK or NPU_ERR_FORMAT with err
   set. */
int kv_config_parse(void *obj, const struct kv_field *fields, size_t nfields,
                    const char *text, const char *filename, char *err, size_t errlen);

/* Formats a config error into err; returns NPU_ERR_FORMAT (for the callers' own checks of
   fields that contradict each other). */
int kv_config_error(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Reads a whole text file of at most 16 KiB into buf (NUL-terminated). NPU_OK, NPU_ERR_IO
   or NPU_ERR_FORMAT (too large, not text), with err set. */
int kv_config_read(const char *path, char *buf, size_t size, char *err, size_t errlen);

#endif
