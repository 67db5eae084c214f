/* SPDX-License-Identifier: MIT */
/*
 * Bounds-checked flattened devicetree reader (DTB v16/v17) for freestanding firmware.
 *
 * Supported: header and structure-block validation, path lookup, child iteration, node
 * names, property reads (raw, u32, u64, n cells, string, compatible stringlist).
 * Not supported: overlays, aliases, phandle resolution, address/size-cell interpretation,
 * the memory reservation map (placement checked only), any writing. See npu/fdt_read.h.
 *
 * Bounds: the header is read only within max_size (then totalsize); every structure-block
 * read goes through read_token(), which checks the token, its name or value, and its
 * padding against the structure block; strings are scanned by str_len_in(), bounded by the
 * block it searches. Each walk advances by at least one 4-byte token per
 * step, so every loop ends within size_struct / 4 steps. Multi-byte values are assembled
 * byte by byte (big-endian), so no access depends on the host's endianness or alignment.
 * No string.h: newlib may not be built when the firmware is, so the few helpers are local.
 */
#include "npu/fdt_read.h"

/* ---- format constants (devicetree specification v0.4, chapter 5) */
#define FDTR_MAGIC 0xd00dfeedu
#define FDTR_TOK_BEGIN_NODE 1u
#define FDTR_TOK_END_NODE 2u
#define FDTR_TOK_PROP 3u
#define FDTR_TOK_NOP 4u
#define FDTR_TOK_END 9u
#define FDTR_HDR_V16 36u /* header bytes up to and including size_dt_strings */
#define FDTR_HDR_V17 40u /* plus size_dt_struct */
#define FDTR_RSV_ENTRY 16u
#define FDTR_MAX_TOTAL 0x7fffffffu /* node offsets must fit an int */

/* Header field offsets. */
enum {
    HDR_MAGIC = 0, HDR_TOTALSIZE = 4, HDR_OFF_STRUCT = 8, HDR_OFF_STRINGS = 12,
    HDR_OFF_RSVMAP = 16, HDR_VERSION = 20, HDR_LAST_COMP = 24, HDR_SIZE_STRINGS = 32,
    HDR_SIZE_STRUCT = 36,
};

/* One decoded structure-block token. */
struct fdtr_tok {
    uint32_t tag;  /* FDTR_TOK_* */
    uint32_t off;  /* offset of the token in the structure block */
    uint32_t next; /* offset of the following token */
    uint32_t data; /* BEGIN_NODE: offset of the name; PROP: offset of the value */
    uint32_t len;  /* BEGIN_NODE: name length with its NUL; PROP: value length */
    uint32_t nameoff; /* PROP: name offset in the strings block */
};

/* ---- small helpers */

static uint32_t be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* Length of the NUL-terminated string at p, or max if no NUL in the first max bytes. */
static uint32_t str_len_in(const uint8_t *p, uint32_t max)
{
    uint32_t i = 0;

    while (i < max && p[i] != 0)
        i++;
    return i;
}

/* Length of a caller-supplied (trusted) C string. */
static size_t cstr_len(const char *s)
{
    size_t n = 0;

    while (s[n] != '\0')
        n++;
    return n;
}

/* True if the n bytes at a equal the n bytes at s. */
static bool bytes_eq(const uint8_t *a, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != (uint8_t)s[i])
            return false;
    return true;
}

static const uint8_t *sblock(const struct fdt_blob *b)
{
    return b->base + b->off_struct;
}

/* True if [off, off + size) lies inside [0, total); no overflow for any inputs. */
static bool inside(uint32_t off, uint32_t size, uint32_t total)
{
    return off <= total && size <= total - off;
}

/* ---- tokens */

/* Decodes the token at off, checking it and everything it covers against the block. */
static int read_token(const struct fdt_blob *b, uint32_t off, struct fdtr_tok *t)
{
    const uint8_t *s = sblock(b);
    uint32_t room, n;

    if ((off & 3u) != 0 || !inside(off, 4, b->size_struct))
        return NPU_ERR_FORMAT;
    t->tag = be32(s + off);
    t->off = off;
    t->data = off + 4;
    room = b->size_struct - t->data;
    switch (t->tag) {
    case FDTR_TOK_BEGIN_NODE:
        n = str_len_in(s + t->data, room);
        if (n == room) /* unterminated name */
            return NPU_ERR_FORMAT;
        t->len = n + 1;
        break;
    case FDTR_TOK_PROP:
        if (room < 8)
            return NPU_ERR_FORMAT;
        t->len = be32(s + t->data);
        t->nameoff = be32(s + t->data + 4);
        t->data += 8;
        if (t->len > room - 8 || t->nameoff >= b->size_strings)
            return NPU_ERR_FORMAT;
        break;
    case FDTR_TOK_END_NODE: case FDTR_TOK_NOP: case FDTR_TOK_END:
        t->len = 0;
        break;
    default:
        return NPU_ERR_FORMAT;
    }
    t->next = (t->data + t->len + 3u) & ~3u; /* < 2^31 + 4: no overflow */
    return t->next <= b->size_struct ? NPU_OK : NPU_ERR_FORMAT;
}

/* Reads the first token at or after off that is not an FDT_NOP. */
static int read_token_skip_nop(const struct fdt_blob *b, uint32_t off, struct fdtr_tok *t)
{
    int rc;

    for (;;) {
        rc = read_token(b, off, t);
        if (rc != NPU_OK || t->tag != FDTR_TOK_NOP)
            return rc;
        off = t->next;
    }
}

/* The property's name, checked to be NUL-terminated inside the strings block. */
static int prop_name(const struct fdt_blob *b, const struct fdtr_tok *t, const uint8_t **name,
                     uint32_t *len)
{
    const uint8_t *p = b->base + b->off_strings + t->nameoff;
    uint32_t room = b->size_strings - t->nameoff; /* nameoff < size_strings: room >= 1 */
    uint32_t n = str_len_in(p, room);

    if (n == room)
        return NPU_ERR_FORMAT;
    *name = p;
    *len = n;
    return NPU_OK;
}

/* Checks that node is a valid node offset; *t receives its FDT_BEGIN_NODE token. */
static int node_token(const struct fdt_blob *b, int node, struct fdtr_tok *t)
{
    if (b == NULL || b->base == NULL)
        return NPU_ERR_INVAL;
    if (node < 0 || ((uint32_t)node & 3u) != 0 || !inside((uint32_t)node, 4, b->size_struct))
        return NPU_ERR_RANGE;
    if (be32(sblock(b) + node) != FDTR_TOK_BEGIN_NODE)
        return NPU_ERR_INVAL;
    return read_token(b, (uint32_t)node, t);
}

/*
 * *after receives the offset just past the FDT_END_NODE that closes the node whose
 * FDT_BEGIN_NODE token is t. (Tokens are re-read, not struct-copied: a struct copy may
 * compile to a memcpy call, which a freestanding build need not have.)
 */
static int skip_subtree(const struct fdt_blob *b, const struct fdtr_tok *t, uint32_t *after)
{
    struct fdtr_tok cur;
    uint32_t depth = 1;
    int rc;

    cur.next = t->next;
    while (depth > 0) {
        rc = read_token(b, cur.next, &cur);
        if (rc != NPU_OK)
            return rc;
        if (cur.tag == FDTR_TOK_BEGIN_NODE && ++depth > FDT_READ_MAX_DEPTH)
            return NPU_ERR_FORMAT;
        if (cur.tag == FDTR_TOK_END_NODE)
            depth--;
        if (cur.tag == FDTR_TOK_END)
            return NPU_ERR_FORMAT;
    }
    *after = cur.next;
    return NPU_OK;
}

/* ---- opening */

/* Header checks; fills b from the header at p (max bytes readable). */
static int check_header(struct fdt_blob *b, const uint8_t *p, size_t max)
{
    uint32_t total, version, hdr, rsv;

    if (max < FDTR_HDR_V16 || be32(p + HDR_MAGIC) != FDTR_MAGIC)
        return NPU_ERR_FORMAT;
    total = be32(p + HDR_TOTALSIZE);
    version = be32(p + HDR_VERSION);
    if (version < 16 || be32(p + HDR_LAST_COMP) > 17)
        return NPU_ERR_FORMAT;
    hdr = version >= 17 ? FDTR_HDR_V17 : FDTR_HDR_V16;
    if (total > max || total > FDTR_MAX_TOTAL || total < hdr)
        return NPU_ERR_FORMAT;
    b->base = p;
    b->totalsize = total;
    b->off_struct = be32(p + HDR_OFF_STRUCT);
    b->off_strings = be32(p + HDR_OFF_STRINGS);
    b->size_strings = be32(p + HDR_SIZE_STRINGS);
    if (b->off_struct > total)
        return NPU_ERR_FORMAT;
    /* v16 has no size_dt_struct: the walk is bounded by the rest of the blob instead. */
    b->size_struct = version >= 17 ? be32(p + HDR_SIZE_STRUCT) : (total - b->off_struct) & ~3u;
    rsv = be32(p + HDR_OFF_RSVMAP);
    if (b->off_struct < hdr || b->off_strings < hdr || rsv < hdr)
        return NPU_ERR_FORMAT;
    if ((b->off_struct & 3u) != 0 || (b->size_struct & 3u) != 0 || (rsv & 7u) != 0)
        return NPU_ERR_FORMAT;
    if (!inside(b->off_struct, b->size_struct, total) ||
        !inside(b->off_strings, b->size_strings, total) || !inside(rsv, FDTR_RSV_ENTRY, total))
        return NPU_ERR_FORMAT;
    return NPU_OK;
}

/*
 * One pass over the structure block: NOPs, then one root node, then NOPs, then FDT_END.
 * Properties must precede a node's children and have terminated names; depth is capped.
 */
static int check_struct(const struct fdt_blob *b)
{
    struct fdtr_tok t;
    uint32_t off = 0, depth = 0, prev = FDTR_TOK_NOP, nlen;
    bool seen_root = false;
    const uint8_t *name;
    int rc;

    for (;; off = t.next) {
        rc = read_token(b, off, &t);
        if (rc != NPU_OK)
            return rc; /* includes running off the block without FDT_END */
        if (t.tag == FDTR_TOK_END)
            return depth == 0 && seen_root ? NPU_OK : NPU_ERR_FORMAT;
        if (t.tag == FDTR_TOK_BEGIN_NODE) {
            if ((depth == 0 && seen_root) || ++depth > FDT_READ_MAX_DEPTH)
                return NPU_ERR_FORMAT;
            seen_root = true;
        } else if (t.tag == FDTR_TOK_END_NODE) {
            if (depth == 0)
                return NPU_ERR_FORMAT;
            depth--;
        } else if (t.tag == FDTR_TOK_PROP) {
            if (prev != FDTR_TOK_BEGIN_NODE && prev != FDTR_TOK_PROP)
                return NPU_ERR_FORMAT; /* outside a node, or after a child node */
            if (prop_name(b, &t, &name, &nlen) != NPU_OK)
                return NPU_ERR_FORMAT;
        }
        if (t.tag != FDTR_TOK_NOP)
            prev = t.tag;
    }
}

int fdt_blob_open(struct fdt_blob *b, const void *addr, size_t max_size)
{
    struct fdt_blob tmp;
    int rc;

    if (b == NULL || addr == NULL || ((uintptr_t)addr & 3u) != 0)
        return NPU_ERR_INVAL;
    rc = check_header(&tmp, addr, max_size);
    if (rc == NPU_OK)
        rc = check_struct(&tmp);
    if (rc != NPU_OK)
        return rc;
    b->base = tmp.base; /* field by field: no memcpy call */
    b->totalsize = tmp.totalsize;
    b->off_struct = tmp.off_struct;
    b->size_struct = tmp.size_struct;
    b->off_strings = tmp.off_strings;
    b->size_strings = tmp.size_strings;
    return NPU_OK;
}

/* ---- nodes */

int fdt_node_first_child(const struct fdt_blob *b, int node, int *child)
{
    struct fdtr_tok t;
    int rc = node_token(b, node, &t);

    if (rc != NPU_OK)
        return rc;
    if (child == NULL)
        return NPU_ERR_INVAL;
    do { /* skip the node's properties (and NOPs) */
        rc = read_token_skip_nop(b, t.next, &t);
        if (rc != NPU_OK)
            return rc;
    } while (t.tag == FDTR_TOK_PROP);
    if (t.tag == FDTR_TOK_END_NODE)
        return NPU_ERR_NOTFOUND;
    if (t.tag != FDTR_TOK_BEGIN_NODE)
        return NPU_ERR_FORMAT;
    *child = (int)t.off;
    return NPU_OK;
}

int fdt_node_next_sibling(const struct fdt_blob *b, int node, int *next)
{
    struct fdtr_tok t;
    uint32_t after;
    int rc = node_token(b, node, &t);

    if (rc != NPU_OK)
        return rc;
    if (next == NULL)
        return NPU_ERR_INVAL;
    rc = skip_subtree(b, &t, &after);
    if (rc == NPU_OK)
        rc = read_token_skip_nop(b, after, &t);
    if (rc != NPU_OK)
        return rc;
    if (t.tag == FDTR_TOK_END_NODE || t.tag == FDTR_TOK_END) /* parent closes / root */
        return NPU_ERR_NOTFOUND;
    if (t.tag != FDTR_TOK_BEGIN_NODE)
        return NPU_ERR_FORMAT;
    *next = (int)t.off;
    return NPU_OK;
}

int fdt_node_name(const struct fdt_blob *b, int node, const char **name)
{
    struct fdtr_tok t;
    int rc = node_token(b, node, &t);

    if (rc != NPU_OK)
        return rc;
    if (name == NULL)
        return NPU_ERR_INVAL;
    *name = (const char *)(sblock(b) + t.data);
    return NPU_OK;
}

/* *child receives the child of parent whose name is exactly the len bytes at comp. */
static int child_by_name(const struct fdt_blob *b, int parent, const char *comp, size_t len,
                         int *child)
{
    struct fdtr_tok t;
    int cur, rc = fdt_node_first_child(b, parent, &cur);

    while (rc == NPU_OK) {
        rc = node_token(b, cur, &t);
        if (rc != NPU_OK)
            return rc;
        /* t.len counts the name's NUL: equal lengths and bytes mean an exact match */
        if (t.len == len + 1 && bytes_eq(sblock(b) + t.data, comp, len)) {
            *child = cur;
            return NPU_OK;
        }
        rc = fdt_node_next_sibling(b, cur, &cur); /* strictly increasing offsets */
    }
    return rc;
}

int fdt_node_find(const struct fdt_blob *b, const char *path, int *node)
{
    struct fdtr_tok t;
    size_t len;
    int cur, rc;

    if (b == NULL || path == NULL || node == NULL || path[0] != '/')
        return NPU_ERR_INVAL;
    rc = read_token_skip_nop(b, 0, &t); /* the root */
    if (rc != NPU_OK)
        return rc;
    if (t.tag != FDTR_TOK_BEGIN_NODE)
        return NPU_ERR_FORMAT;
    cur = (int)t.off;
    for (;;) {
        while (*path == '/')
            path++;
        if (*path == '\0')
            break;
        for (len = 0; path[len] != '\0' && path[len] != '/'; len++)
            ;
        rc = child_by_name(b, cur, path, len, &cur);
        if (rc != NPU_OK)
            return rc;
        path += len;
    }
    *node = cur;
    return NPU_OK;
}

/* ---- properties */

int fdt_prop_get(const struct fdt_blob *b, int node, const char *prop, const void **val,
                 uint32_t *len)
{
    struct fdtr_tok t;
    const uint8_t *name;
    uint32_t nlen;
    size_t want;
    int rc = node_token(b, node, &t);

    if (rc != NPU_OK)
        return rc;
    if (prop == NULL)
        return NPU_ERR_INVAL;
    want = cstr_len(prop);
    for (;;) { /* properties come first, before any child node */
        rc = read_token_skip_nop(b, t.next, &t);
        if (rc != NPU_OK)
            return rc;
        if (t.tag != FDTR_TOK_PROP)
            return t.tag == FDTR_TOK_END ? NPU_ERR_FORMAT : NPU_ERR_NOTFOUND;
        rc = prop_name(b, &t, &name, &nlen);
        if (rc != NPU_OK)
            return rc;
        if (nlen == want && bytes_eq(name, prop, want))
            break;
    }
    if (val != NULL)
        *val = sblock(b) + t.data;
    if (len != NULL)
        *len = t.len;
    return NPU_OK;
}

int fdt_prop_cells(const struct fdt_blob *b, int node, const char *prop, uint32_t *out,
                   uint32_t n)
{
    const void *val;
    uint32_t len;
    int rc;

    if (out == NULL && n != 0)
        return NPU_ERR_INVAL;
    rc = fdt_prop_get(b, node, prop, &val, &len);
    if (rc != NPU_OK)
        return rc;
    if ((len & 3u) != 0 || len / 4u != n)
        return NPU_ERR_FORMAT;
    for (uint32_t i = 0; i < n; i++)
        out[i] = be32((const uint8_t *)val + 4u * i);
    return NPU_OK;
}

int fdt_prop_u32(const struct fdt_blob *b, int node, const char *prop, uint32_t *out)
{
    if (out == NULL)
        return NPU_ERR_INVAL;
    return fdt_prop_cells(b, node, prop, out, 1);
}

int fdt_prop_u64(const struct fdt_blob *b, int node, const char *prop, uint64_t *out)
{
    uint32_t cells[2];
    int rc;

    if (out == NULL)
        return NPU_ERR_INVAL;
    rc = fdt_prop_cells(b, node, prop, cells, 2);
    if (rc == NPU_OK)
        *out = ((uint64_t)cells[0] << 32) | cells[1];
    return rc;
}

int fdt_prop_string(const struct fdt_blob *b, int node, const char *prop, const char **out)
{
    const void *val;
    uint32_t len;
    int rc;

    if (out == NULL)
        return NPU_ERR_INVAL;
    rc = fdt_prop_get(b, node, prop, &val, &len);
    if (rc != NPU_OK)
        return rc;
    if (str_len_in(val, len) == len) /* no NUL inside the property (or empty) */
        return NPU_ERR_FORMAT;
    *out = val;
    return NPU_OK;
}

bool fdt_node_is_compatible(const struct fdt_blob *b, int node, const char *compat)
{
    const uint8_t *p;
    const void *val;
    uint32_t len, n;
    size_t want;

    if (compat == NULL || fdt_prop_get(b, node, "compatible", &val, &len) != NPU_OK)
        return false;
    want = cstr_len(compat);
    for (p = val; len > 0; p += n + 1, len -= n + 1) {
        n = str_len_in(p, len);
        if (n == len) /* trailing fragment without a NUL: not a string */
            return false;
        if (n == want && bytes_eq(p, compat, want))
            return true;
    }
    return false;
}
