#include "format/flatbuf.h"

void fb_init(fb_buf *b, const void *data, size_t size) {
    b->data = (const uint8_t *)data;
    b->size = size;
    b->failed = false;
    b->err_offset = 0;
    b->err_what = NULL;
}

bool fb_fail(const fb_buf *cb, size_t offset, const char *what) {
    fb_buf *b = (fb_buf *)cb; /* the error record is the only mutable part */
    if (!b->failed) {
        b->failed = true;
        b->err_offset = offset;
        b->err_what = what;
    }
    return false;
}

static bool in_range(const fb_buf *b, size_t pos, size_t len) {
    return pos <= b->size && len <= b->size - pos;
}

static bool load_table(const fb_buf *b, size_t pos, fb_table *out, const char *what) {
    memset(out, 0, sizeof *out);
    out->buf = b;
    if (pos == 0 || (pos & 3) || !in_range(b, pos, 4))
        return fb_fail(b, pos, what ? what : "table offset out of bounds");
    int32_t soff = (int32_t)fb_rd_u32(b->data + pos);
    int64_t vt = (int64_t)pos - (int64_t)soff;
    if (vt < 0 || (vt & 1) || !in_range(b, (size_t)vt, 4))
        return fb_fail(b, pos, "vtable out of bounds");
    uint16_t vts = fb_rd_u16(b->data + vt);
    uint16_t ts = fb_rd_u16(b->data + vt + 2);
    if (vts < 4 || (vts & 1) || !in_range(b, (size_t)vt, vts))
        return fb_fail(b, (size_t)vt, "bad vtable size");
    if (ts < 4 || !in_range(b, pos, ts))
        return fb_fail(b, pos, "table extends past the buffer");
    out->pos = pos;
    out->vtable = (size_t)vt;
    out->vtable_size = vts;
    out->table_size = ts;
    return true;
}

bool fb_root(const fb_buf *b, fb_table *out) {
    if (b->size < 8) {
        memset(out, 0, sizeof *out);
        out->buf = b;
        return fb_fail(b, 0, "buffer shorter than 8 bytes");
    }
    return load_table(b, fb_rd_u32(b->data), out, "root offset out of bounds");
}

/* Position of a present field, 0 when absent. Checks that `width` bytes fit in the table. */
static size_t field_pos(const fb_table *t, unsigned slot, size_t width) {
    if (t->pos == 0)
        return 0;
    size_t e = 4 + 2 * (size_t)slot;
    if (e + 2 > t->vtable_size)
        return 0;
    uint16_t off = fb_rd_u16(t->buf->data + t->vtable + e);
    if (off == 0)
        return 0;
    /* like FlatBuffers' own verifier, require the field inside the buffer (writers do not
     * always count trailing 8-byte fields in the vtable's table size) */
    if ((size_t)off + width > t->buf->size - t->pos) {
        fb_fail(t->buf, t->pos, "field outside the buffer");
        return 0;
    }
    return t->pos + off;
}

bool fb_has(const fb_table *t, unsigned slot) { return field_pos(t, slot, 1) != 0; }

uint64_t fb_u(const fb_table *t, unsigned slot, unsigned width, uint64_t def) {
    size_t p = field_pos(t, slot, width);
    if (!p)
        return def;
    const uint8_t *d = t->buf->data + p;
    switch (width) {
    case 1: return d[0];
    case 2: return fb_rd_u16(d);
    case 4: return fb_rd_u32(d);
    default: return fb_rd_u64(d);
    }
}

int64_t fb_i(const fb_table *t, unsigned slot, unsigned width, int64_t def) {
    size_t p = field_pos(t, slot, width);
    if (!p)
        return def;
    uint64_t u = fb_u(t, slot, width, 0);
    switch (width) {
    case 1: return (int8_t)u;
    case 2: return (int16_t)u;
    case 4: return (int32_t)u;
    default: return (int64_t)u;
    }
}

double fb_f64(const fb_table *t, unsigned slot, double def) {
    size_t p = field_pos(t, slot, 8);
    if (!p)
        return def;
    uint64_t u = fb_rd_u64(t->buf->data + p);
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* Follow the uoffset stored at `at`. */
static bool follow(const fb_buf *b, size_t at, size_t *target) {
    if (!in_range(b, at, 4))
        return fb_fail(b, at, "offset field out of bounds");
    uint32_t rel = fb_rd_u32(b->data + at);
    if (rel == 0 || rel > b->size - at)
        return fb_fail(b, at, "reference out of bounds");
    *target = at + rel;
    return true;
}

bool fb_table_field(const fb_table *t, unsigned slot, fb_table *out) {
    memset(out, 0, sizeof *out);
    out->buf = t->buf;
    size_t p = field_pos(t, slot, 4);
    size_t target = 0;
    if (!p || !follow(t->buf, p, &target))
        return false;
    return load_table(t->buf, target, out, "sub-table out of bounds");
}

static bool load_vec(const fb_buf *b, size_t at, size_t elem_size, size_t elem_align,
                     fb_vec *out) {
    size_t target = 0;
    if (!follow(b, at, &target))
        return false;
    if ((target & 3) || !in_range(b, target, 4))
        return fb_fail(b, target, "vector header out of bounds");
    uint32_t len = fb_rd_u32(b->data + target);
    size_t start = target + 4;
    if (elem_size && (uint64_t)len > (uint64_t)(b->size - start) / elem_size)
        return fb_fail(b, target, "vector extends past the buffer");
    if (elem_align > 1 && (start % elem_align))
        return fb_fail(b, start, "misaligned vector");
    out->pos = start;
    out->len = len;
    return true;
}

bool fb_vec_field(const fb_table *t, unsigned slot, size_t elem_size, size_t elem_align,
                  fb_vec *out) {
    memset(out, 0, sizeof *out);
    out->buf = t->buf;
    size_t p = field_pos(t, slot, 4);
    if (!p)
        return false;
    return load_vec(t->buf, p, elem_size, elem_align, out);
}

static bool load_str(const fb_buf *b, size_t at, const char **s, uint32_t *len) {
    fb_vec v = {b, 0, 0};
    if (!load_vec(b, at, 1, 1, &v))
        return false;
    if (v.pos + v.len >= b->size || b->data[v.pos + v.len] != 0)
        return fb_fail(b, v.pos, "string without NUL terminator");
    *s = (const char *)(b->data + v.pos);
    *len = v.len;
    return true;
}

bool fb_str_field(const fb_table *t, unsigned slot, const char **s, uint32_t *len) {
    *s = NULL;
    *len = 0;
    size_t p = field_pos(t, slot, 4);
    if (!p)
        return false;
    return load_str(t->buf, p, s, len);
}

bool fb_vec_table(const fb_vec *v, uint32_t i, fb_table *out) {
    memset(out, 0, sizeof *out);
    out->buf = v->buf;
    if (i >= v->len)
        return fb_fail(v->buf, v->pos, "vector index out of range");
    size_t at = v->pos + 4 * (size_t)i, target = 0;
    if (!follow(v->buf, at, &target))
        return false;
    return load_table(v->buf, target, out, "vector element out of bounds");
}

bool fb_vec_str(const fb_vec *v, uint32_t i, const char **s, uint32_t *len) {
    *s = NULL;
    *len = 0;
    if (i >= v->len)
        return fb_fail(v->buf, v->pos, "vector index out of range");
    return load_str(v->buf, v->pos + 4 * (size_t)i, s, len);
}
