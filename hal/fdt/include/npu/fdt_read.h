/* SPDX-License-Identifier: MIT */
/*
 * A small, bounds-checked reader for flattened devicetree blobs (DTB version 16 and 17), for
 * freestanding firmware. It needs no allocator and no C library beyond <stdint.h>, <stddef.h>
 * and <stdbool.h>; it never writes to the blob.
 *
 * Supported: opening and validating a blob, finding a node by absolute path, iterating the
 * children of a node, node names, and reading properties as raw bytes, one u32, one u64,
 * exactly n cells, a string, or testing a "compatible" stringlist.
 * Not supported: overlays, aliases, phandle resolution, #address-cells/#size-cells
 * interpretation, the memory reservation map (only its placement is checked), writing.
 *
 * Safety: fdt_blob_open() validates the header and walks the whole structure block once
 * (tokens, node names, property lengths and names, nesting depth at most
 * FDT_READ_MAX_DEPTH, exactly one root, FDT_END present). Every later call bounds-checks
 * each read again, so no call reads outside [addr, addr + totalsize) or loops forever, even
 * for a hostile blob or a bogus node offset. Malformed data gives NPU_ERR_FORMAT.
 *
 * Nodes are identified by the offset, from the start of the structure block, of their
 * FDT_BEGIN_NODE token (the same offsets as libfdt uses). Returned pointers (names,
 * property values) point into the blob; property values have no alignment guarantee.
 *
 * Return codes (enum npu_status): NPU_OK; NPU_ERR_INVAL for a NULL argument, a relative
 * path, a misaligned blob address, or a node offset that is not an FDT_BEGIN_NODE token;
 * NPU_ERR_RANGE for a node offset outside the structure block (negative, unaligned, too
 * large); NPU_ERR_FORMAT for a malformed blob or a property of the wrong length or shape;
 * NPU_ERR_NOTFOUND for a missing node or property, or the end of an iteration.
 * Output parameters are written only on success.
 */
#ifndef NPU_FDT_READ_H
#define NPU_FDT_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "npu_enums.h"

/* Deepest node nesting accepted (the root counts as depth 1). */
#define FDT_READ_MAX_DEPTH 32

/* An opened blob. Fill it with fdt_blob_open() only; the other calls trust these fields. */
struct fdt_blob {
    const uint8_t *base;   /* start of the blob (the header) */
    uint32_t totalsize;    /* header totalsize, <= the max_size given to fdt_blob_open() */
    uint32_t off_struct;   /* structure block: offset from base ... */
    uint32_t size_struct;  /* ... and size in bytes */
    uint32_t off_strings;  /* strings block: offset from base ... */
    uint32_t size_strings; /* ... and size in bytes */
};

/*
 * Opens the blob at addr (4-byte aligned), of which at most max_size bytes may be read.
 * Checks the magic 0xd00dfeed, version >= 16 and last_comp_version <= 17,
 * totalsize <= max_size, the blocks inside totalsize and aligned, then validates the
 * structure block (see above).
 */
int fdt_blob_open(struct fdt_blob *b, const void *addr, size_t max_size);

/*
 * Finds a node by absolute path: "/", "/chip", "/cpus/cpu@3". Each component must equal a
 * node name exactly (so "/cpus" does not match a node "cpus@1"); repeated or trailing '/'
 * are ignored. NPU_ERR_NOTFOUND if there is no such node.
 */
int fdt_node_find(const struct fdt_blob *b, const char *path, int *node);

/* The first child of node; NPU_ERR_NOTFOUND if it has none. */
int fdt_node_first_child(const struct fdt_blob *b, int node, int *child);

/* The next sibling of node; NPU_ERR_NOTFOUND after the last child (and for the root). */
int fdt_node_next_sibling(const struct fdt_blob *b, int node, int *next);

/* The node's name including any unit address ("cpu@3"); the root's name is "". */
int fdt_node_name(const struct fdt_blob *b, int node, const char **name);

/*
 * The value and length of property prop of node. val and len may be NULL (to test for
 * presence). A zero-length property gives a non-NULL val that must not be dereferenced.
 */
int fdt_prop_get(const struct fdt_blob *b, int node, const char *prop, const void **val,
                 uint32_t *len);

/* A property of exactly 4 bytes, big-endian; NPU_ERR_FORMAT for any other length. */
int fdt_prop_u32(const struct fdt_blob *b, int node, const char *prop, uint32_t *out);

/* A property of exactly 8 bytes (two cells, high cell first); NPU_ERR_FORMAT otherwise. */
int fdt_prop_u64(const struct fdt_blob *b, int node, const char *prop, uint64_t *out);

/* A property of exactly n cells, stored into out[0..n-1]; NPU_ERR_FORMAT otherwise. */
int fdt_prop_cells(const struct fdt_blob *b, int node, const char *prop, uint32_t *out,
                   uint32_t n);

/*
 * A string property: *out points at its first string, which must be NUL-terminated within
 * the property (NPU_ERR_FORMAT otherwise, including for an empty property). For a
 * stringlist this is the first entry.
 */
int fdt_prop_string(const struct fdt_blob *b, int node, const char *prop, const char **out);

/*
 * True if any NUL-terminated string of the node's "compatible" stringlist equals compat.
 * False for a missing or malformed property, a bad node or NULL arguments.
 */
bool fdt_node_is_compatible(const struct fdt_blob *b, int node, const char *compat);

#endif /* NPU_FDT_READ_H */
