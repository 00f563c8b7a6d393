/*
 * A bounds-checked FlatBuffers reader (no flatbuffers library).
 *
 * Every accessor checks the bytes it touches against the buffer: a table's soffset and
 * vtable, each field's position and width, vector lengths times element size, string NUL
 * terminators, scalar alignment relative to the buffer start. On any failure it records the
 * first problem (with its byte offset) in the fb_buf and returns false / an empty object, so
 * callers can chain reads and check once. Nothing here allocates.
 */
#ifndef ETCH_FORMAT_FLATBUF_H
#define ETCH_FORMAT_FLATBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct fb_buf {
    const uint8_t *data;
    size_t size;
    bool failed;      /* sticky: set by the first failing access */
    size_t err_offset;
    const char *err_what;
} fb_buf;

/* A table: byte position in the buffer (0 = absent) and its vtable. */
typedef struct fb_table {
    const fb_buf *buf;
    size_t pos;
    size_t vtable;
    uint16_t vtable_size;
    uint16_t table_size;
} fb_table;

/* A vector: element count and the byte position of element 0 (0 = absent). */
typedef struct fb_vec {
    const fb_buf *buf;
    size_t pos;
    uint32_t len;
} fb_vec;

static inline uint16_t fb_rd_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t fb_rd_u32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t fb_rd_u64(const uint8_t *p) {
    return (uint64_t)fb_rd_u32(p) | ((uint64_t)fb_rd_u32(p + 4) << 32);
}

void fb_init(fb_buf *b, const void *data, size_t size);
/* Mark failure (keeps the first). Always returns false. */
bool fb_fail(const fb_buf *b, size_t offset, const char *what);

/* The root table (uoffset at byte 0). */
bool fb_root(const fb_buf *b, fb_table *out);
/* Is the slot present (non-zero entry in the vtable)? */
bool fb_has(const fb_table *t, unsigned slot);
/* Scalars: absent -> default. Width 1, 2, 4 or 8 bytes, little endian, zero-extended. */
uint64_t fb_u(const fb_table *t, unsigned slot, unsigned width, uint64_t def);
int64_t fb_i(const fb_table *t, unsigned slot, unsigned width, int64_t def);
double fb_f64(const fb_table *t, unsigned slot, double def);
/* Sub-table / vector / string fields; absent gives pos 0 and returns false without failing
 * (use fb_has / check the result when a field is required). */
bool fb_table_field(const fb_table *t, unsigned slot, fb_table *out);
bool fb_vec_field(const fb_table *t, unsigned slot, size_t elem_size, size_t elem_align,
                  fb_vec *out);
bool fb_str_field(const fb_table *t, unsigned slot, const char **s, uint32_t *len);
/* Vector elements. */
bool fb_vec_table(const fb_vec *v, uint32_t i, fb_table *out);
bool fb_vec_str(const fb_vec *v, uint32_t i, const char **s, uint32_t *len);
static inline const uint8_t *fb_vec_ptr(const fb_vec *v) { return v->buf->data + v->pos; }
static inline uint8_t fb_vec_u8(const fb_vec *v, uint32_t i) { return fb_vec_ptr(v)[i]; }
static inline int32_t fb_vec_i32(const fb_vec *v, uint32_t i) {
    return (int32_t)fb_rd_u32(fb_vec_ptr(v) + 4 * (size_t)i);
}
static inline uint32_t fb_vec_u32(const fb_vec *v, uint32_t i) {
    return fb_rd_u32(fb_vec_ptr(v) + 4 * (size_t)i);
}
static inline int64_t fb_vec_i64(const fb_vec *v, uint32_t i) {
    return (int64_t)fb_rd_u64(fb_vec_ptr(v) + 8 * (size_t)i);
}
static inline uint64_t fb_vec_u64(const fb_vec *v, uint32_t i) {
    return fb_rd_u64(fb_vec_ptr(v) + 8 * (size_t)i);
}

#endif
