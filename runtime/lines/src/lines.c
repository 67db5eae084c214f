/* SPDX-License-Identifier: MIT */
/*
 * The console-line protocol (rt/lines.h): the table made from the kinds' field lists, the
 * encoder the firmware prints with and the decoder the host reads with. Both walk the same
 * table, field by field; each type's print format is written once, in put_value.
 */
#include "rt/lines.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npu_enums.h"

/* ---- the table */

#define FIELD_(S, member, key, type, req) \
    { key, LINES_TYPE_##type, LINES_##req, offsetof(struct lines_##S, member), \
      offsetof(struct lines_##S, absent.member) },
#define FIELDS_(ID, name, prefix, event) \
    static const struct lines_field fields_##name[] = { LINES_FIELDS_##name(FIELD_, name) };
LINES_KINDS(FIELDS_)

#define DEF_(ID, name, prefix, event) \
    static const struct lines_kind_def def_##name = { \
        #name, prefix, event, fields_##name, \
        (uint32_t)(sizeof(fields_##name) / sizeof(fields_##name[0])) };
LINES_KINDS(DEF_)

/* Every kind. The firmware's lines_print_<name> use their kind's definition alone, so that
   an image carries only the definitions of the lines it prints (-fdata-sections,
   --gc-sections). */
#define KIND_(ID, name, prefix, event) [LINES_##ID] = &def_##name,
static const struct lines_kind_def *const kinds[LINES_KIND_COUNT] = { LINES_KINDS(KIND_) };

/* The prefix whose unknown events are errors: the control core's serving events, which
   the host turns into metrics (an event dropped silently would make them wrong). */
#define STRICT_PREFIX "SERVE"

const struct lines_kind_def *lines_describe_kind(enum lines_kind kind)
{
    return (unsigned)kind < LINES_KIND_COUNT ? kinds[kind] : NULL;
}

/* A field's value and absent flag in the struct at base. */
#define AT(base, off, type) (*(const type *)((const char *)(base) + (off)))
#define SET(base, off, type) (*(type *)((char *)(base) + (off)))

/* ---- encoding */

/* Where encoded text goes: buf[0..len) (pos counts what would have been written), or
   stdout. */
struct sink {
    char *buf;
    size_t len, pos;
    bool out;
};

static void put(struct sink *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct sink *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (s->out) {
        vprintf(fmt, ap);
    } else {
        size_t room = s->pos < s->len ? s->len - s->pos : 0;
        int n = vsnprintf(room ? s->buf + s->pos : NULL, room, fmt, ap);
        s->pos += n > 0 ? (size_t)n : 0;
    }
    va_end(ap);
}

/* Whether s[0..max) (max 0: all of it, to its end) holds a blank. */
static bool has_blank(const char *s, size_t max)
{
    for (size_t i = 0; s[i] && (max == 0 || i < max); i++)
        if (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')
            return true;
    return false;
}

/* Whether the values at v can be printed as a line that reads back. */
static bool values_ok(const struct lines_kind_def *d, const void *v)
{
    for (uint32_t i = 0; i < d->nfields; i++) {
        const struct lines_field *f = &d->fields[i];
        if (AT(v, f->absent_offset, bool)) {
            if (f->need == LINES_REQ)
                return false;
            continue;
        }
        const char *str = NULL;
        const struct lines_pair *pair = NULL;
        switch (f->type) {
        case LINES_T_WORD:
            str = AT(v, f->offset, const char *);
            if (!str || has_blank(str, f->prec))
                return false;
            break;
        case LINES_T_TEXT:
            str = AT(v, f->offset, const char *);
            if (!str || strpbrk(str, "\r\n"))
                return false;
            break;
        case LINES_T_PAIR32:
            pair = &AT(v, f->offset, struct lines_pair);
            if (pair->used > UINT32_MAX || pair->total > UINT32_MAX)
                return false;
            break;
        case LINES_T_LIST:
            if (AT(v, f->offset, struct lines_list).n && !AT(v, f->offset, struct lines_list).v)
                return false;
            break;
        default:
            break;
        }
    }
    return true;
}

/* The value of field f at p, in its one print format. */
static void put_value(struct sink *s, const struct lines_field *f, const char *p)
{
    switch (f->type) {
    case LINES_T_U32:
        put(s, "%" PRIu32, AT(p, 0, uint32_t));
        break;
    case LINES_T_U64:
        put(s, "%" PRIu64, AT(p, 0, uint64_t));
        break;
    case LINES_T_I32:
        put(s, "%" PRId32, AT(p, 0, int32_t));
        break;
    case LINES_T_X64:
        put(s, "%#0*" PRIx64, (int)f->prec, AT(p, 0, uint64_t));
        break;
    case LINES_T_FIX:
        put(s, "%.*f", (int)f->prec, AT(p, 0, double));
        break;
    case LINES_T_G:
        put(s, "%.*g", (int)f->prec, AT(p, 0, double));
        break;
    case LINES_T_WORD:
        if (f->prec)
            put(s, "%.*s", (int)f->prec, AT(p, 0, const char *));
        else
            put(s, "%s", AT(p, 0, const char *));
        break;
    case LINES_T_PAIR32:
    case LINES_T_PAIR64:
        put(s, "%" PRIu64 "/%" PRIu64, AT(p, 0, struct lines_pair).used,
            AT(p, 0, struct lines_pair).total);
        break;
    case LINES_T_LIST:
        for (uint32_t i = 0; i < AT(p, 0, struct lines_list).n; i++)
            put(s, "%s%" PRIu64, i ? "," : "", AT(p, 0, struct lines_list).v[i]);
        break;
    case LINES_T_TEXT:
        put(s, "%s", AT(p, 0, const char *));
        break;
    }
}

/* PREFIX [EVENT], then " key=value" for every field present (a text: " text"). */
static void encode(struct sink *s, const struct lines_kind_def *d, const void *v)
{
    put(s, "%s", d->prefix);
    if (d->event)
        put(s, " %s", d->event);
    for (uint32_t i = 0; i < d->nfields; i++) {
        const struct lines_field *f = &d->fields[i];
        if (AT(v, f->absent_offset, bool))
            continue;
        if (f->type == LINES_T_TEXT)
            put(s, " ");
        else
            put(s, " %s=", f->key);
        put_value(s, f, (const char *)v + f->offset);
    }
}

int lines_format(char *buf, size_t len, enum lines_kind kind, const struct lines_value *v)
{
    const struct lines_kind_def *d = lines_describe_kind(kind);
    if (!d || !v || !values_ok(d, v))
        return NPU_ERR_INVAL;
    struct sink s = { .buf = buf, .len = buf ? len : 0 };
    encode(&s, d, v);
    return s.pos < s.len ? NPU_OK : NPU_ERR_RANGE;
}

static int print_def(const struct lines_kind_def *d, const void *v)
{
    if (!d || !v || !values_ok(d, v))
        return NPU_ERR_INVAL;
    struct sink s = { .out = true };
    encode(&s, d, v);
    put(&s, "\n");
    return NPU_OK;
}

int lines_print(enum lines_kind kind, const struct lines_value *v)
{
    return print_def(lines_describe_kind(kind), v);
}

#define PRINT_DEF_(ID, name, prefix, event) \
    int lines_print_##name(const struct lines_##name *v) \
    { \
        return print_def(&def_##name, v); \
    }
LINES_KINDS(PRINT_DEF_)

/* ---- decoding */

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* The prefix word text starts with (followed by a blank), or NULL. */
static const char *prefix_of(const char *text)
{
    for (uint32_t k = 0; k < LINES_KIND_COUNT; k++) {
        size_t n = strlen(kinds[k]->prefix);
        if (strncmp(text, kinds[k]->prefix, n) == 0 && is_blank(text[n]))
            return kinds[k]->prefix;
    }
    return NULL;
}

const char *lines_find(const char *line)
{
    for (const char *p = line; p && *p; p++)
        if ((p == line || is_blank(p[-1]) || p[-1] == ']') && prefix_of(p))
            return p;
    return NULL;
}

/* Whether key[0..n) names one of d's fields (but its text), up to `upto` fields. */
static bool is_key_of(const struct lines_kind_def *d, const char *key, size_t n, uint32_t upto)
{
    for (uint32_t i = 0; i < d->nfields && i < upto; i++)
        if (d->fields[i].type != LINES_T_TEXT && strlen(d->fields[i].key) == n &&
            strncmp(d->fields[i].key, key, n) == 0)
            return true;
    return false;
}

/* The fields a line of an event-less kind may start with: up to its first required one. */
static uint32_t lead_fields(const struct lines_kind_def *d)
{
    uint32_t i = 0;
    while (i < d->nfields && d->fields[i].need != LINES_REQ)
        i++;
    return i + 1;
}

/* lines_identify; *fields: where the fields start in text. */
static int identify(const char *text, enum lines_kind *kind, const char **fields, char *err,
                    size_t errlen)
{
    const char *prefix = text ? prefix_of(text) : NULL;
    if (!prefix)
        return fail(err, errlen, NPU_ERR_NOTFOUND, "not a SERVE, MODEL or BENCH line");
    const char *rest = text + strlen(prefix);
    while (is_blank(*rest))
        rest++;
    size_t wlen = strcspn(rest, " \t\r\n");
    const char *eq = memchr(rest, '=', wlen);
    for (uint32_t k = 0; k < LINES_KIND_COUNT; k++) {
        const struct lines_kind_def *d = kinds[k];
        const bool eventless = d->event == NULL;
        if (strcmp(d->prefix, prefix) != 0 || eventless != (eq != NULL))
            continue;
        size_t n = d->event ? strlen(d->event) : 0;
        if (eq ? is_key_of(d, rest, (size_t)(eq - rest), lead_fields(d))
               : strncmp(rest, d->event, n) == 0 && strchr(" \t\r\n", rest[n])) {
            *kind = (enum lines_kind)k;
            *fields = eq ? rest : rest + n;
            return NPU_OK;
        }
    }
    if (strcmp(prefix, STRICT_PREFIX) == 0)
        return fail(err, errlen, NPU_ERR_FORMAT, "unknown %s event '%.*s'", prefix, (int)wlen,
                    rest);
    return fail(err, errlen, NPU_ERR_NOTFOUND, "unknown %s line '%.*s'", prefix, (int)wlen,
                rest);
}

int lines_identify(const char *text, enum lines_kind *kind, char *err, size_t errlen)
{
    const char *fields;
    return identify(text, kind, &fields, err, errlen);
}

/* A decimal whole number that is all of s. */
static bool read_u64(const char *s, uint64_t *out, bool *range)
{
    char *end;
    if (!is_digit(*s))
        return false;
    errno = 0;
    *out = strtoull(s, &end, 10);
    *range = errno == ERANGE;
    return *end == '\0';
}

/* Decoding state: the line, its storage, where errors go. */
struct decode {
    struct lines_line *line;
    uint32_t nlist;          /* entries of line->list in use */
    char *err;
    size_t errlen;
};

static int bad(struct decode *c, const struct lines_field *f, const char *val, const char *what)
{
    return fail(c->err, c->errlen, NPU_ERR_FORMAT, "%s='%s' %s", f->key, val, what);
}

static int out_of_range(struct decode *c, const struct lines_field *f, const char *val)
{
    return fail(c->err, c->errlen, NPU_ERR_FORMAT, "%s=%s is out of range", f->key, val);
}

static int read_list(struct decode *c, const struct lines_field *f, const char *val,
                     struct lines_list *out)
{
    struct lines_line *ln = c->line;
    const uint32_t cap = (uint32_t)(sizeof(ln->list) / sizeof(ln->list[0]));
    out->v = &ln->list[c->nlist];
    out->n = 0;
    for (const char *p = val; *p;) {
        char *end;
        if (!is_digit(*p) || c->nlist == cap)
            return bad(c, f, val, "is not a list of whole numbers");
        errno = 0;
        ln->list[c->nlist++] = strtoull(p, &end, 10);
        out->n++;
        if (errno == ERANGE)
            return out_of_range(c, f, val);
        if (*end != ',' && *end != '\0')
            return bad(c, f, val, "is not a list of whole numbers");
        if (*end == ',' && !is_digit(end[1]))
            return bad(c, f, val, "is not a list of whole numbers");
        p = *end ? end + 1 : end;
    }
    return NPU_OK;
}

static int read_pair(struct decode *c, const struct lines_field *f, char *val,
                     struct lines_pair *out)
{
    char *slash = strchr(val, '/');
    bool r1 = false, r2 = false;
    if (!slash)
        return bad(c, f, val, "is not USED/TOTAL");
    *slash = '\0';
    bool ok = read_u64(val, &out->used, &r1) && read_u64(slash + 1, &out->total, &r2);
    *slash = '/';
    if (!ok)
        return bad(c, f, val, "is not USED/TOTAL");
    if (r1 || r2 ||
        (f->type == LINES_T_PAIR32 && (out->used > UINT32_MAX || out->total > UINT32_MAX)))
        return out_of_range(c, f, val);
    return NPU_OK;
}

/* The value of field f from its text into the struct at p. */
static int read_value(struct decode *c, const struct lines_field *f, char *val, char *p)
{
    uint64_t u = 0;
    bool range = false;
    char *end;
    switch (f->type) {
    case LINES_T_U32:
    case LINES_T_U64:
        if (!read_u64(val, &u, &range))
            return bad(c, f, val, "is not a whole number");
        if (range || (f->type == LINES_T_U32 && u > UINT32_MAX))
            return out_of_range(c, f, val);
        if (f->type == LINES_T_U32)
            SET(p, 0, uint32_t) = (uint32_t)u;
        else
            SET(p, 0, uint64_t) = u;
        return NPU_OK;
    case LINES_T_I32: {
        if (!is_digit(val[val[0] == '-']))
            return bad(c, f, val, "is not a whole number");
        errno = 0;
        long long i = strtoll(val, &end, 10);
        if (*end)
            return bad(c, f, val, "is not a whole number");
        if (errno == ERANGE || i < INT32_MIN || i > INT32_MAX)
            return out_of_range(c, f, val);
        SET(p, 0, int32_t) = (int32_t)i;
        return NPU_OK;
    }
    case LINES_T_X64:
        if (!is_digit(*val))
            return bad(c, f, val, "is not a hex number");
        errno = 0;
        u = strtoull(val, &end, 16);
        if (*end)
            return bad(c, f, val, "is not a hex number");
        if (errno == ERANGE)
            return out_of_range(c, f, val);
        SET(p, 0, uint64_t) = u;
        return NPU_OK;
    case LINES_T_FIX:
    case LINES_T_G:
        if (!*val)
            return bad(c, f, val, "is not a number");
        SET(p, 0, double) = strtod(val, &end);
        return *end ? bad(c, f, val, "is not a number") : NPU_OK;
    case LINES_T_WORD:
        SET(p, 0, const char *) = val;
        return NPU_OK;
    case LINES_T_PAIR32:
    case LINES_T_PAIR64:
        return read_pair(c, f, val, &SET(p, 0, struct lines_pair));
    case LINES_T_LIST:
        return read_list(c, f, val, &SET(p, 0, struct lines_list));
    case LINES_T_TEXT:
        break;
    }
    return NPU_OK;
}

/* Splits the words from `p` on into line->words (in place); a kind with a text ends the
   words at the first that is not one of its key=value fields: *tail. */
static void split_words(struct decode *c, const struct lines_kind_def *d, char *p, char **tail)
{
    struct lines_line *ln = c->line;
    const bool text = d->fields[d->nfields - 1].type == LINES_T_TEXT;
    *tail = NULL;
    for (;;) {
        while (is_blank(*p))
            p++;
        if (!*p)
            return;
        char *w = p, *e = w + strcspn(w, " \t");
        char *eq = memchr(w, '=', (size_t)(e - w));
        if (text && !(eq && is_key_of(d, w, (size_t)(eq - w), d->nfields))) {
            *tail = w;
            return;
        }
        p = *e ? e + 1 : e;
        *e = '\0';
        if (!eq || ln->nwords == LINES_WORDS_MAX)
            continue;
        *eq = '\0';
        ln->words[ln->nwords].key = w;
        ln->words[ln->nwords++].val = eq + 1;
    }
}

/* lines_parse, but for errno. */
static int parse(const char *text, struct lines_line *line, char *err, size_t errlen)
{
    struct decode c = { .line = line, .err = err, .errlen = errlen };
    size_t len = text ? strcspn(text, "\r\n") : 0;
    const char *fields;
    enum lines_kind kind;
    line->nwords = 0;
    memset(&line->v, 0, sizeof(line->v));
    if (len >= sizeof(line->buf))
        return fail(err, errlen, NPU_ERR_FORMAT, "a line of %lu characters (at most %lu)",
                    (unsigned long)len, (unsigned long)(sizeof(line->buf) - 1));
    memcpy(line->buf, text ? text : "", len);
    line->buf[len] = '\0';
    int rc = identify(line->buf, &kind, &fields, err, errlen);
    if (rc != NPU_OK)
        return rc;
    line->kind = kind;
    const struct lines_kind_def *d = kinds[kind];
    char *tail;
    split_words(&c, d, line->buf + (fields - line->buf), &tail);
    for (uint32_t i = 0; i < d->nfields; i++) {
        const struct lines_field *f = &d->fields[i];
        char *val = NULL;
        if (f->type == LINES_T_TEXT)
            val = tail;
        for (uint32_t w = 0; f->type != LINES_T_TEXT && w < line->nwords && !val; w++)
            if (strcmp(line->words[w].key, f->key) == 0)
                val = (char *)line->words[w].val;
        if (!val) {
            SET(&line->v, f->absent_offset, bool) = true;
            if (f->need == LINES_REQ)
                return fail(err, errlen, NPU_ERR_FORMAT, f->type == LINES_T_TEXT
                            ? "missing the %s" : "missing %s=", f->key);
            continue;
        }
        if (f->type == LINES_T_TEXT)
            SET(&line->v, f->offset, const char *) = val;
        else if ((rc = read_value(&c, f, val, (char *)&line->v + f->offset)) != NPU_OK)
            return rc;
    }
    return NPU_OK;
}

int lines_parse(const char *text, struct lines_line *line, char *err, size_t errlen)
{
    const int saved = errno; /* the number readers use it; the caller's value stays */
    int rc = parse(text, line, err, errlen);
    errno = saved;
    return rc;
}
