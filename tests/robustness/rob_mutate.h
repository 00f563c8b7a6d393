/*
 * Mutation sites of a file: the positions of every offset-like field, found by walking the
 * flatbuffer with a description of its schema (.pte Program, .ptd FlatTensor, .bpte
 * BundledProgram), plus the container headers. The robustness test overwrites each site with
 * boundary values; a deterministic PRNG drives the random choices.
 */
#ifndef ETCH_ROB_MUTATE_H
#define ETCH_ROB_MUTATE_H

#include <stddef.h>
#include <stdint.h>

typedef enum rob_site_kind {
    SITE_ROOT = 0,   /* the root uoffset at byte 0 */
    SITE_HEADER,     /* eh00 / FH01 header fields (lengths, sizes, offsets) */
    SITE_UOFFSET,    /* a table/vector/string reference (field or vector element) */
    SITE_SOFFSET,    /* a table's signed offset to its vtable */
    SITE_VTABLE,     /* vtable size, table size, or a field's entry */
    SITE_LENGTH,     /* vector or string length */
    SITE_UNION_TAG,  /* a union's type tag */
    SITE_SCALAR,     /* a scalar field (indices, sizes, ids, offsets, dtype, ...) */
    SITE_ELEMENT,    /* an element of an int/long vector (value indices, sizes, offsets) */
    SITE_NUM_KINDS
} rob_site_kind;

typedef struct rob_site {
    uint32_t pos;
    uint8_t width; /* 1, 2, 4 or 8 bytes, little endian */
    uint8_t kind;  /* rob_site_kind */
} rob_site;

typedef struct rob_range {
    size_t lo, hi; /* [lo, hi) */
} rob_range;

typedef struct rob_sites {
    rob_site *v;
    size_t n, cap;
    /* Byte-vector payloads longer than 16 bytes (constant storage, delegate blobs, bundled
     * tensor data, a .bpte's embedded program): data rather than structure. */
    rob_range *blobs;
    size_t nblobs, blobs_cap;
} rob_sites;

typedef enum rob_schema { ROB_SCHEMA_PTE, ROB_SCHEMA_PTD, ROB_SCHEMA_BPTE } rob_schema;

/* Collect the sites of `d` (sorted, unique). Returns 0 on allocation failure. */
int rob_find_sites(const uint8_t *d, size_t size, rob_schema schema, rob_sites *out);
void rob_sites_free(rob_sites *s);
const char *rob_site_kind_name(int kind);

/* splitmix64: a tiny, well-mixed, deterministic generator. */
static inline uint64_t rob_rand(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Boundary values for a site of `width` bytes holding `orig` in a file of `size` bytes:
 * 0, 1, -1, INT_MAX of the width, INT_MIN, size, size-1, size+1, orig+1, orig-1, one random.
 * Returns the count written into vals (at most 16). */
size_t rob_site_values(unsigned width, uint64_t orig, uint64_t size, uint64_t *rng,
                       uint64_t vals[16]);

uint64_t rob_read_le(const uint8_t *p, unsigned width);
void rob_write_le(uint8_t *p, unsigned width, uint64_t v);

#endif
