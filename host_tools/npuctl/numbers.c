/* SPDX-License-Identifier: MIT */
/*
 * Strict numbers for every npuctl option (issue 26): a whole number is decimal digits only
 * (no sign, space, hex or octal prefix, fraction or exponent), a real number is a plain
 * decimal with an optional exponent (no hex float, inf or nan), and both are checked
 * against the option's range. Each refusal names the option, the text and what was
 * expected. Pure functions: no file is read.
 */
#include "npuctl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu_enums.h"

int npuctl_parse_decimal(const char *s, uint64_t max, uint64_t *out)
{
    if (!s || *s == '\0')
        return NPU_ERR_FORMAT;
    uint64_t v = 0;
    bool overflow = false;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return NPU_ERR_FORMAT;
        if (v > (UINT64_MAX - 9) / 10)
            overflow = true;
        else
            v = v * 10 + (uint64_t)(*s - '0');
    }
    if (overflow || v > max)
        return NPU_ERR_RANGE;
    *out = v;
    return NPU_OK;
}

int npuctl_parse_uint(const char *opt, const char *v, uint64_t min, uint64_t max,
                      uint64_t *out)
{
    uint64_t x = 0;
    int rc = npuctl_parse_decimal(v, max, &x);
    if (rc == NPU_OK && x >= min) {
        *out = x;
        return 0;
    }
    if (!v)
        return npuctl_usage_error("%s needs a value", opt);
    return npuctl_usage_error("%s '%s': %s %llu..%llu%s", opt, v,
                              rc == NPU_ERR_FORMAT ? "expected a whole number (decimal digits)"
                                                   : "out of range",
                              (unsigned long long)min, (unsigned long long)max,
                              rc == NPU_OK && x == 0 ? " (leave the option out for its default)"
                                                     : "");
}

int npuctl_parse_u32(const char *opt, const char *v, uint32_t min, uint32_t max, uint32_t *out)
{
    uint64_t x = 0;
    int rc = npuctl_parse_uint(opt, v, min, max, &x);
    if (rc == 0)
        *out = (uint32_t)x;
    return rc;
}

/* [+-]digits[.digits][e[+-]digits], or [+-].digits[...]: what strtod reads, less its hex
   floats, inf, nan and leading spaces. */
static bool plain_real(const char *s)
{
    size_t digits = 0;
    s += *s == '+' || *s == '-';
    for (; *s >= '0' && *s <= '9'; s++)
        digits++;
    if (*s == '.')
        for (s++; *s >= '0' && *s <= '9'; s++)
            digits++;
    if (!digits)
        return false;
    if (*s == 'e' || *s == 'E') {
        s++;
        s += *s == '+' || *s == '-';
        if (*s < '0' || *s > '9')
            return false;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    return *s == '\0';
}

int npuctl_parse_real(const char *opt, const char *v, double lo, double hi, double *out)
{
    if (!v)
        return npuctl_usage_error("%s needs a value", opt);
    double x = plain_real(v) ? strtod(v, NULL) : NAN;
    if (isfinite(x) && x >= lo && x <= hi) {
        *out = x;
        return 0;
    }
    return npuctl_usage_error("%s '%s': %s %g..%g", opt, v,
                              isfinite(x) ? "out of range" : "expected a decimal number", lo,
                              hi);
}
