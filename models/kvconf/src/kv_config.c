/* SPDX-License-Identifier: MIT */
/* The flat config parser (kv_config.h), shared by the chip and model configs. */
#include "kv_config.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu_enums.h"

int kv_config_error(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return NPU_ERR_FORMAT;
}

/* Parses an unsigned integer (decimal or 0x hex, `_` separators allowed). */
static bool parse_uint(const char *s, uint64_t *out)
{
    char digits[64];
    size_t n = 0;
    for (; *s; s++) {
        if (*s == '_')
            continue;
        if (n + 1 >= sizeof(digits))
            return false;
        digits[n++] = *s;
    }
    digits[n] = '\0';
    /* Decimal without leading zeros or 0x hex, as in TOML: never C's octal, no sign. */
    const char *d = digits;
    bool hex = digits[0] == '0' && digits[1] == 'x';
    if (hex)
        d += 2;
    else if (digits[0] == '0' && digits[1] != '\0')
        return false;
    if (*d == '\0')
        return false;
    for (const char *q = d; *q; q++)
        if (hex ? !isxdigit((unsigned char)*q) : !isdigit((unsigned char)*q))
            return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(d, &end, hex ? 16 : 10);
    if (errno || *end != '\0')
        return false;
    *out = v;
    return true;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

/* Cuts a trailing `# comment` that is not inside a string. */
static void strip_comment(char *s)
{
    bool in_string = false;
    for (; *s; s++) {
        if (*s == '"')
            in_string = !in_string;
        else if (*s == '#' && !in_string) {
            *s = '\0';
            return;
        }
    }
}

/* Parses a real: decimal digits, an optional fraction and exponent (no hex, inf or nan). */
static bool parse_real(const char *s, double *out)
{
    const char *p = s;
    if (*p == '-' || *p == '+')
        p++;
    if (!isdigit((unsigned char)*p))
        return false;
    for (const char *q = p; *q; q++)
        if (!isdigit((unsigned char)*q) && !strchr(".eE+-_", *q))
            return false;
    char digits[64];
    size_t n = 0;
    for (const char *q = s; *q; q++) {
        if (*q == '_')
            continue;
        if (n + 1 >= sizeof(digits))
            return false;
        digits[n++] = *q;
    }
    digits[n] = '\0';
    char *end;
    errno = 0;
    double v = strtod(digits, &end);
    if (errno || *end != '\0')
        return false;
    *out = v;
    return true;
}

static int set_real(char *base, const struct kv_field *f, const char *value,
                    const char *where, char *err, size_t errlen)
{
    double v;
    if (!parse_real(value, &v))
        return kv_config_error(err, errlen,
                               "%s: field '%s' must be a number, got '%s'", where,
                               f->key, value);
    if (!(v >= f->fmin && v <= f->fmax))
        return kv_config_error(err, errlen,
                               "%s: field '%s' = %g is out of range [%g, %g]", where,
                               f->key, v, f->fmin, f->fmax);
    memcpy(base, &v, sizeof(v));
    return NPU_OK;
}

static int set_field(void *obj, const struct kv_field *f, const char *value,
                     const char *where, char *err, size_t errlen)
{
    char *base = (char *)obj + f->offset;
    if (f->type == KV_F64)
        return set_real(base, f, value, where, err, errlen);
    if (f->type == KV_STRING) {
        size_t len = strlen(value);
        if (len < 2 || value[0] != '"' || value[len - 1] != '"')
            return kv_config_error(err, errlen,
                                   "%s: field '%s' must be a quoted string", where, f->key);
        if (len - 2 < f->min || len - 2 > f->max)
            return kv_config_error(err, errlen,
                                   "%s: field '%s' must be 1..%llu characters", where,
                                   f->key, (unsigned long long)f->max);
        memcpy(base, value + 1, len - 2);
        base[len - 2] = '\0';
        return NPU_OK;
    }
    uint64_t v;
    if (!parse_uint(value, &v))
        return kv_config_error(err, errlen,
                               "%s: field '%s' must be an unsigned integer, got '%s'",
                               where, f->key, value);
    if (v < f->min || v > f->max)
        return kv_config_error(err, errlen,
                               "%s: field '%s' = %llu is out of range [%llu, %llu]", where,
                               f->key, (unsigned long long)v, (unsigned long long)f->min,
                               (unsigned long long)f->max);
    if (f->type == KV_U32)
        *(uint32_t *)base = (uint32_t)v;
    else
        *(uint64_t *)base = v;
    return NPU_OK;
}

static int parse_line(void *obj, const struct kv_field *fields, size_t nfields, char *line,
                      const char *where, bool *seen, char *err, size_t errlen)
{
    strip_comment(line);
    char *s = trim(line);
    if (*s == '\0')
        return NPU_OK;
    char *eq = strchr(s, '=');
    if (!eq)
        return kv_config_error(err, errlen, "%s: expected 'key = value', got '%s'", where, s);
    *eq = '\0';
    char *key = trim(s), *value = trim(eq + 1);
    for (size_t i = 0; i < nfields; i++) {
        if (strcmp(fields[i].key, key) != 0)
            continue;
        if (seen[i])
            return kv_config_error(err, errlen, "%s: field '%s' given twice", where, key);
        seen[i] = true;
        return set_field(obj, &fields[i], value, where, err, errlen);
    }
    return kv_config_error(err, errlen, "%s: unknown field '%s'", where, key);
}

int kv_config_parse(void *obj, const struct kv_field *fields, size_t nfields,
                    const char *text, const char *filename, char *err, size_t errlen)
{
    bool seen[64] = { false };
    if (nfields > sizeof(seen) / sizeof(seen[0]))
        return kv_config_error(err, errlen, "%s: too many fields in the table", filename);
    unsigned lineno = 0;
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char line[512], where[320];
        lineno++;
        snprintf(where, sizeof(where), "%s:%u", filename, lineno);
        if (len >= sizeof(line))
            return kv_config_error(err, errlen,
                                   "%s: line longer than %lu characters", where,
                                   (unsigned long)(sizeof(line) - 1));
        memcpy(line, p, len);
        line[len] = '\0';
        int rc = parse_line(obj, fields, nfields, line, where, seen, err, errlen);
        if (rc)
            return rc;
        p += len + (nl ? 1 : 0);
    }
    for (size_t i = 0; i < nfields; i++)
        if (!seen[i] && !fields[i].optional)
            return kv_config_error(err, errlen, "%s: missing field '%s'", filename, fields[i].key);
    return NPU_OK;
}

int kv_config_read(const char *path, char *text, size_t size, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NPU_ERR_IO;
    }
    size_t n = fread(text, 1, size - 1, f);
    /* At exactly the limit feof is not set yet: try one more byte. */
    bool too_long = n == size - 1 && fgetc(f) != EOF;
    int read_errno = ferror(f) ? errno : 0;
    fclose(f);
    if (read_errno) {
        snprintf(err, errlen, "%s: cannot read: %s", path, strerror(read_errno));
        return NPU_ERR_IO;
    }
    if (too_long) {
        snprintf(err, errlen, "%s: larger than %lu bytes", path, (unsigned long)(size - 1));
        return NPU_ERR_FORMAT;
    }
    text[n] = '\0';
    if (memchr(text, '\0', n)) {
        snprintf(err, errlen, "%s: not a text file", path);
        return NPU_ERR_FORMAT;
    }
    return NPU_OK;
}
