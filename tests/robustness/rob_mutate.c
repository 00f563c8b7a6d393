/* Schema-driven discovery of mutation sites (see rob_mutate.h). The walker trusts nothing:
 * it runs on the original fixtures but checks every access anyway. */
#include <stdlib.h>
#include <string.h>

#include "rob_mutate.h"

typedef struct tdesc tdesc;
typedef const tdesc *(*union_fn)(unsigned tag);

/* Field kinds: 's' scalar, 't' table, 'v' vector of scalars (width = element size),
 * 'V' vector of tables, 'z' string, 'u' union tag, 'U' union value (table chosen by `uni`
 * from the tag in the previous slot). */
typedef struct fdesc {
    uint8_t slot;
    char kind;
    uint8_t width;
    const tdesc *sub;
    union_fn uni;
} fdesc;

struct tdesc {
    const fdesc *f;
    uint8_t n;
};

#define T(name, ...)                                                                          \
    static const fdesc name##_f[] = {__VA_ARGS__};                                            \
    static const tdesc name = {name##_f, (uint8_t)(sizeof name##_f / sizeof name##_f[0])}
#define EMPTY(name) static const tdesc name = {NULL, 0}

/* ---- program.fbs (pte-format.md §3) ---------------------------------------------------- */
EMPTY(t_null);
T(t_int, {0, 's', 8, NULL, NULL});
T(t_bool, {0, 's', 1, NULL, NULL});
T(t_double, {0, 's', 8, NULL, NULL});
T(t_string, {0, 'z', 0, NULL, NULL});
T(t_int_list, {0, 'v', 8, NULL, NULL});
T(t_double_list, {0, 'v', 8, NULL, NULL});
T(t_bool_list, {0, 'v', 1, NULL, NULL});
T(t_tensor_list, {0, 'v', 4, NULL, NULL});
T(t_alloc, {0, 's', 4, NULL, NULL}, {1, 's', 4, NULL, NULL}, {2, 's', 4, NULL, NULL});
T(t_extra, {0, 's', 8, NULL, NULL}, {1, 'z', 0, NULL, NULL}, {2, 's', 1, NULL, NULL},
  {3, 's', 1, NULL, NULL}, {4, 's', 1, NULL, NULL});
T(t_tensor, {0, 's', 1, NULL, NULL}, {1, 's', 4, NULL, NULL}, {2, 'v', 4, NULL, NULL},
  {3, 'v', 1, NULL, NULL}, {4, 's', 1, NULL, NULL}, {5, 's', 4, NULL, NULL},
  {6, 't', 0, &t_alloc, NULL}, {7, 's', 1, NULL, NULL}, {8, 's', 1, NULL, NULL},
  {9, 't', 0, &t_extra, NULL});

static const tdesc *kernel_types(unsigned tag) {
    switch (tag) {
    case 1: return &t_null;
    case 2: return &t_int;
    case 3: return &t_bool;
    case 4: return &t_double;
    case 5: return &t_tensor;
    case 6: return &t_string;
    case 7: return &t_int_list;
    case 8: return &t_double_list;
    case 9: return &t_bool_list;
    case 10: case 11: return &t_tensor_list;
    default: return NULL;
    }
}

T(t_evalue, {0, 'u', 1, NULL, NULL}, {1, 'U', 0, NULL, kernel_types});
T(t_operator, {0, 'z', 0, NULL, NULL}, {1, 'z', 0, NULL, NULL});
T(t_call, {0, 's', 4, NULL, NULL}, {1, 'v', 4, NULL, NULL}); /* KernelCall, DelegateCall */
T(t_pair, {0, 's', 4, NULL, NULL}, {1, 's', 4, NULL, NULL}); /* MoveCall, JumpFalseCall */
T(t_free, {0, 's', 4, NULL, NULL});

static const tdesc *instruction_args(unsigned tag) {
    switch (tag) {
    case 1: case 2: return &t_call;
    case 3: case 4: return &t_pair;
    case 5: return &t_free;
    default: return NULL;
    }
}

T(t_instruction, {0, 'u', 1, NULL, NULL}, {1, 'U', 0, NULL, instruction_args});
T(t_frame, {0, 'z', 0, NULL, NULL}, {1, 's', 4, NULL, NULL}, {2, 'z', 0, NULL, NULL},
  {3, 'z', 0, NULL, NULL});
T(t_frame_list, {0, 'V', 0, &t_frame, NULL});
T(t_chain, {0, 'v', 4, NULL, NULL}, {1, 'v', 4, NULL, NULL}, {2, 'V', 0, &t_instruction, NULL},
  {3, 'V', 0, &t_frame_list, NULL});
T(t_container, {0, 'z', 0, NULL, NULL}, {1, 'z', 0, NULL, NULL});
T(t_dataref, {0, 's', 1, NULL, NULL}, {1, 's', 4, NULL, NULL});
T(t_compile_spec, {0, 'z', 0, NULL, NULL}, {1, 'v', 1, NULL, NULL});
T(t_delegate, {0, 'z', 0, NULL, NULL}, {1, 't', 0, &t_dataref, NULL},
  {2, 'V', 0, &t_compile_spec, NULL});
T(t_buffer_device, {0, 's', 4, NULL, NULL}, {1, 's', 1, NULL, NULL}, {2, 's', 1, NULL, NULL});
T(t_plan, {0, 'z', 0, NULL, NULL}, {1, 't', 0, &t_container, NULL},
  {2, 'V', 0, &t_evalue, NULL}, {3, 'v', 4, NULL, NULL}, {4, 'v', 4, NULL, NULL},
  {5, 'V', 0, &t_chain, NULL}, {6, 'V', 0, &t_operator, NULL}, {7, 'V', 0, &t_delegate, NULL},
  {8, 'v', 8, NULL, NULL}, {9, 'V', 0, &t_buffer_device, NULL});
T(t_buffer, {0, 'v', 1, NULL, NULL});
T(t_segment, {0, 's', 8, NULL, NULL}, {1, 's', 8, NULL, NULL});
T(t_subsegment, {0, 's', 4, NULL, NULL}, {1, 'v', 8, NULL, NULL});
T(t_named_data, {0, 'z', 0, NULL, NULL}, {1, 's', 4, NULL, NULL});
T(t_program, {0, 's', 4, NULL, NULL}, {1, 'V', 0, &t_plan, NULL}, {2, 'V', 0, &t_buffer, NULL},
  {3, 'V', 0, &t_buffer, NULL}, {4, 'V', 0, &t_segment, NULL}, {5, 't', 0, &t_subsegment, NULL},
  {6, 'V', 0, &t_subsegment, NULL}, {7, 'V', 0, &t_named_data, NULL});

/* ---- flat_tensor.fbs (.ptd) ------------------------------------------------------------ */
T(t_layout, {0, 's', 1, NULL, NULL}, {1, 'v', 4, NULL, NULL}, {2, 'v', 1, NULL, NULL});
T(t_ptd_named, {0, 'z', 0, NULL, NULL}, {1, 's', 4, NULL, NULL}, {2, 't', 0, &t_layout, NULL});
T(t_flat_tensor, {0, 's', 4, NULL, NULL}, {1, 'V', 0, &t_segment, NULL},
  {2, 'V', 0, &t_ptd_named, NULL});

/* ---- bundled_program_schema.fbs (.bpte) ------------------------------------------------ */
T(t_b_tensor, {0, 's', 1, NULL, NULL}, {1, 'v', 4, NULL, NULL}, {2, 'v', 1, NULL, NULL},
  {3, 'v', 1, NULL, NULL});

static const tdesc *bundled_value(unsigned tag) {
    switch (tag) {
    case 1: return &t_b_tensor;
    case 2: return &t_int;
    case 3: return &t_bool;
    case 4: return &t_double;
    default: return NULL;
    }
}

T(t_b_value, {0, 'u', 1, NULL, NULL}, {1, 'U', 0, NULL, bundled_value});
T(t_b_case, {0, 'V', 0, &t_b_value, NULL}, {1, 'V', 0, &t_b_value, NULL});
T(t_b_suite, {0, 'z', 0, NULL, NULL}, {1, 'V', 0, &t_b_case, NULL});
T(t_bundled, {0, 's', 4, NULL, NULL}, {1, 'V', 0, &t_b_suite, NULL}, {2, 'v', 1, NULL, NULL});

/* ---- the walk ---------------------------------------------------------------------------- */

#define MAX_ELEMENT_SITES 64 /* per scalar vector */
#define MAX_TABLE_ELEMENTS 65536

typedef struct walker {
    const uint8_t *d;
    size_t size;
    rob_sites *out;
    uint8_t *visited; /* one bit per 4-byte word: tables already walked */
    int oom;
} walker;

uint64_t rob_read_le(const uint8_t *p, unsigned width) {
    uint64_t v = 0;
    for (unsigned i = 0; i < width; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

void rob_write_le(uint8_t *p, unsigned width, uint64_t v) {
    for (unsigned i = 0; i < width; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static int fits(const walker *w, size_t pos, size_t len) {
    return pos <= w->size && len <= w->size - pos;
}

static void add(walker *w, size_t pos, unsigned width, int kind) {
    if (!fits(w, pos, width) || pos > UINT32_MAX)
        return;
    rob_sites *s = w->out;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        rob_site *v = realloc(s->v, cap * sizeof *v);
        if (!v) {
            w->oom = 1;
            return;
        }
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n].pos = (uint32_t)pos;
    s->v[s->n].width = (uint8_t)width;
    s->v[s->n].kind = (uint8_t)kind;
    s->n++;
}

static void add_blob(walker *w, size_t start, uint32_t len) {
    if (!fits(w, start, len))
        return;
    rob_sites *s = w->out;
    if (s->nblobs == s->blobs_cap) {
        size_t cap = s->blobs_cap ? s->blobs_cap * 2 : 16;
        rob_range *v = realloc(s->blobs, cap * sizeof *v);
        if (!v) {
            w->oom = 1;
            return;
        }
        s->blobs = v;
        s->blobs_cap = cap;
    }
    s->blobs[s->nblobs].lo = start;
    s->blobs[s->nblobs].hi = start + len;
    s->nblobs++;
}

/* Follow the uoffset at `at` (recorded as a site); 0 when it leads nowhere. */
static size_t follow(walker *w, size_t at) {
    if (!fits(w, at, 4))
        return 0;
    add(w, at, 4, SITE_UOFFSET);
    uint32_t rel = (uint32_t)rob_read_le(w->d + at, 4);
    if (rel == 0 || rel > w->size - at)
        return 0;
    return at + rel;
}

static void walk_table(walker *w, size_t pos, const tdesc *td, int depth);

static void walk_vector(walker *w, size_t at, const fdesc *f, int depth) {
    size_t v = follow(w, at);
    if (!v || !fits(w, v, 4))
        return;
    add(w, v, 4, SITE_LENGTH);
    uint32_t len = (uint32_t)rob_read_le(w->d + v, 4);
    size_t start = v + 4;
    if (f->kind == 'z')
        return;
    if (f->kind == 'v') {
        /* elements of int/long vectors are indices, sizes and offsets; byte vectors only
         * when short (dim orders), never blobs */
        if (f->width == 1 && len > 16) {
            add_blob(w, start, len);
            return;
        }
        for (uint32_t i = 0; i < len && i < MAX_ELEMENT_SITES; i++)
            add(w, start + (size_t)i * f->width, f->width, SITE_ELEMENT);
        return;
    }
    for (uint32_t i = 0; i < len && i < MAX_TABLE_ELEMENTS; i++) {
        size_t t = follow(w, start + 4 * (size_t)i);
        if (t)
            walk_table(w, t, f->sub, depth + 1);
    }
}

static void walk_table(walker *w, size_t pos, const tdesc *td, int depth) {
    if (!td || depth > 32 || (pos & 3) || !fits(w, pos, 4))
        return;
    size_t word = pos / 4;
    if (w->visited[word / 8] & (1u << (word % 8)))
        return;
    w->visited[word / 8] |= (uint8_t)(1u << (word % 8));
    add(w, pos, 4, SITE_SOFFSET);
    int64_t vt = (int64_t)pos - (int32_t)(uint32_t)rob_read_le(w->d + pos, 4);
    if (vt < 0 || !fits(w, (size_t)vt, 4))
        return;
    uint16_t vts = (uint16_t)rob_read_le(w->d + vt, 2);
    add(w, (size_t)vt, 2, SITE_VTABLE);
    add(w, (size_t)vt + 2, 2, SITE_VTABLE);
    if (!fits(w, (size_t)vt, vts))
        return;
    for (uint8_t i = 0; i < td->n; i++) {
        const fdesc *f = &td->f[i];
        size_t e = (size_t)vt + 4 + 2 * (size_t)f->slot;
        if (4 + 2 * (size_t)f->slot + 2 > vts)
            continue;
        add(w, e, 2, SITE_VTABLE);
        uint16_t off = (uint16_t)rob_read_le(w->d + e, 2);
        if (!off)
            continue;
        size_t fpos = pos + off;
        switch (f->kind) {
        case 's': add(w, fpos, f->width, SITE_SCALAR); break;
        case 'u': add(w, fpos, 1, SITE_UNION_TAG); break;
        case 't': {
            size_t t = follow(w, fpos);
            if (t)
                walk_table(w, t, f->sub, depth + 1);
            break;
        }
        case 'U': {
            /* the tag lives in the previous slot */
            size_t te = (size_t)vt + 4 + 2 * (size_t)(f->slot - 1);
            unsigned tag = 0;
            if (f->slot > 0 && te + 2 <= (size_t)vt + vts) {
                uint16_t toff = (uint16_t)rob_read_le(w->d + te, 2);
                if (toff && fits(w, pos + toff, 1))
                    tag = w->d[pos + toff];
            }
            size_t t = follow(w, fpos);
            if (t)
                walk_table(w, t, f->uni(tag), depth + 1);
            break;
        }
        default: walk_vector(w, fpos, f, depth); break;
        }
    }
}

static int site_cmp(const void *a, const void *b) {
    const rob_site *x = a, *y = b;
    if (x->pos != y->pos)
        return x->pos < y->pos ? -1 : 1;
    return (int)x->width - (int)y->width;
}

int rob_find_sites(const uint8_t *d, size_t size, rob_schema schema, rob_sites *out) {
    memset(out, 0, sizeof *out);
    walker w = {d, size, out, calloc(size / 32 + 1, 1), 0};
    if (!w.visited)
        return 0;
    const tdesc *root = &t_program;
    if (schema == ROB_SCHEMA_PTE) {
        if (size >= 16 && memcmp(d + 8, "eh00", 4) == 0) {
            uint32_t hlen = (uint32_t)rob_read_le(d + 12, 4);
            add(&w, 12, 4, SITE_HEADER); /* length */
            add(&w, 16, 8, SITE_HEADER); /* program_size */
            add(&w, 24, 8, SITE_HEADER); /* segment_base_offset */
            if (hlen >= 32)
                add(&w, 32, 8, SITE_HEADER); /* segment_data_size */
        }
    } else if (schema == ROB_SCHEMA_PTD) {
        root = &t_flat_tensor;
        add(&w, 12, 4, SITE_HEADER); /* header length */
        add(&w, 16, 8, SITE_HEADER); /* flatbuffer offset */
        add(&w, 24, 8, SITE_HEADER); /* flatbuffer size */
        add(&w, 32, 8, SITE_HEADER); /* segment_base_offset */
        add(&w, 40, 8, SITE_HEADER); /* segment_data_size */
    } else {
        root = &t_bundled;
    }
    if (size >= 8) {
        add(&w, 0, 4, SITE_ROOT);
        walk_table(&w, (size_t)rob_read_le(d, 4), root, 0);
    }
    free(w.visited);
    if (w.oom) {
        rob_sites_free(out);
        return 0;
    }
    /* sorted and unique: shared vtables and strings are reached more than once */
    if (out->n) {
        qsort(out->v, out->n, sizeof *out->v, site_cmp);
        size_t k = 1;
        for (size_t i = 1; i < out->n; i++)
            if (out->v[i].pos != out->v[k - 1].pos || out->v[i].width != out->v[k - 1].width)
                out->v[k++] = out->v[i];
        out->n = k;
    }
    return 1;
}

void rob_sites_free(rob_sites *s) {
    free(s->v);
    free(s->blobs);
    memset(s, 0, sizeof *s);
}

const char *rob_site_kind_name(int kind) {
    static const char *names[SITE_NUM_KINDS] = {"root",   "header",    "uoffset",
                                                "soffset", "vtable",   "length",
                                                "union_tag", "scalar", "element"};
    return kind >= 0 && kind < SITE_NUM_KINDS ? names[kind] : "?";
}

size_t rob_site_values(unsigned width, uint64_t orig, uint64_t size, uint64_t *rng,
                       uint64_t vals[16]) {
    uint64_t mask = width >= 8 ? ~0ull : ((1ull << (8 * width)) - 1);
    uint64_t smax = mask >> 1, smin = smax + 1;
    uint64_t cand[] = {0,        1,        mask,     smax,     smin,          size,
                       size - 1, size + 1, orig + 1, orig - 1, rob_rand(rng), orig + 4};
    size_t n = 0;
    for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++) {
        uint64_t v = cand[i] & mask;
        int dup = v == (orig & mask);
        for (size_t k = 0; k < n && !dup; k++)
            dup = vals[k] == v;
        if (!dup)
            vals[n++] = v;
    }
    return n;
}
