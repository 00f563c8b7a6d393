#include <stdio.h>
#include <string.h>

#include "runtime/error.h"
#include "runtime/program_impl.h"

etch_program_options etch_program_default_options(void) {
    etch_program_options o;
    memset(&o, 0, sizeof o);
    o.load_mode = ETCH_LOAD_MMAP;
    return o;
}

static etch_status open_image(etch_image *img, const etch_allocator *a, etch_program **out) {
    etch_program *p = a->alloc(a->self, sizeof *p, 16);
    if (!p) {
        etch_image_close(img);
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "cannot allocate the program handle");
    }
    memset(p, 0, sizeof *p);
    p->alloc = a;
    p->image = *img;
    const uint8_t *data = img->data;
    size_t size = img->size;
    if (size >= 8 && memcmp(data + 4, "BP08", 4) == 0) {
        size_t off = 0;
        const char *what = NULL;
        if (!etch_bpte_program(data, size, &data, &size, &off, &what)) {
            etch_program_close(p);
            return etch_err(ETCH_ERR_INVALID_PROGRAM,
                            "malformed bundled program: %s at byte offset %zu", what, off);
        }
        p->bundled = true;
    }
    etch_status st = etch_pte_open(data, size, &p->pte);
    if (st != ETCH_OK) {
        if (p->bundled)
            etch_err_prefix("bundled program");
        etch_program_close(p);
        return st;
    }
    *out = p;
    return ETCH_OK;
}

etch_status etch_program_open_file(const char *path, const etch_program_options *opts,
                                   etch_program **out) {
    etch_program_options o = opts ? *opts : etch_program_default_options();
    const etch_allocator *a = o.allocator ? o.allocator : etch_allocator_libc();
    if (!out)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "program_open_file: NULL out");
    etch_image img;
    etch_status st = etch_image_open_file(path, o.load_mode, a, &img);
    if (st != ETCH_OK)
        return st;
    st = open_image(&img, a, out);
    if (st != ETCH_OK)
        etch_err_prefix("%s", path);
    return st;
}

etch_status etch_program_open_buffer(const void *data, size_t size,
                                     const etch_program_options *opts, etch_program **out) {
    etch_program_options o = opts ? *opts : etch_program_default_options();
    const etch_allocator *a = o.allocator ? o.allocator : etch_allocator_libc();
    if (!out)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "program_open_buffer: NULL out");
    etch_image img;
    etch_status st = etch_image_from_buffer(data, size, a, &img);
    if (st != ETCH_OK)
        return st;
    return open_image(&img, a, out);
}

void etch_program_close(etch_program *p) {
    if (!p)
        return;
    etch_image_close(&p->image);
    p->alloc->free(p->alloc->self, p);
}

void etch_program_get_header(const etch_program *p, etch_program_header *h) {
    memset(h, 0, sizeof *h);
    memcpy(h->identifier, p->pte.image + 4, 4);
    h->bundled = p->bundled;
    h->has_extended_header = p->pte.header.present;
    h->header_length = p->pte.header.length;
    h->file_size = p->pte.image_size;
    h->program_size = p->pte.fb.size;
    h->segment_base_offset = p->pte.header.segment_base_offset;
    h->segment_data_size = p->pte.header.segment_data_size;
    h->num_segments = p->pte.segments.len;
    h->legacy_constant_buffer = p->pte.legacy_constants;
    h->num_named_data = p->pte.named_data.len;
    if (p->pte.legacy_constants) {
        for (uint32_t i = 0; i < p->pte.constant_buffer.len; i++) {
            etch_range r;
            if (etch_pte_constant(&p->pte, i, &r))
                h->constant_bytes += r.size;
        }
    } else {
        h->constant_bytes = p->pte.constant_segment.size;
    }
}

etch_status etch_program_segment(const etch_program *p, size_t i, uint64_t *offset,
                                 uint64_t *size) {
    if (i >= p->pte.segments.len)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "segment %zu out of range (%u segments)", i,
                        p->pte.segments.len);
    etch_range r = etch_pte_segment(&p->pte, (uint32_t)i);
    *offset = (uint64_t)(r.data - p->pte.image);
    *size = r.size;
    return ETCH_OK;
}

size_t etch_program_num_methods(const etch_program *p) { return p->pte.plans.len; }

void etch_program_plan(const etch_program *p, uint32_t index, fb_table *plan) {
    fb_vec_table(&p->pte.plans, index, plan);
}

const char *etch_program_method_name(const etch_program *p, size_t i) {
    if (i >= p->pte.plans.len)
        return NULL;
    fb_table plan;
    const char *name;
    uint32_t len;
    etch_program_plan(p, (uint32_t)i, &plan);
    fb_str_field(&plan, PLAN_NAME, &name, &len);
    return name;
}

/* ---- external data ------------------------------------------------------------------- */

static etch_status open_map(etch_image *img, const etch_allocator *a, etch_data_map **out) {
    etch_data_map *m = a->alloc(a->self, sizeof *m, 16);
    if (!m) {
        etch_image_close(img);
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "cannot allocate the data map");
    }
    memset(m, 0, sizeof *m);
    m->alloc = a;
    m->image = *img;
    etch_status st = etch_ptd_open(img->data, img->size, &m->ptd);
    if (st != ETCH_OK) {
        etch_data_map_close(m);
        return st;
    }
    *out = m;
    return ETCH_OK;
}

etch_status etch_data_map_open_file(const char *path, const etch_program_options *opts,
                                    etch_data_map **out) {
    etch_program_options o = opts ? *opts : etch_program_default_options();
    const etch_allocator *a = o.allocator ? o.allocator : etch_allocator_libc();
    if (!out)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "data_map_open_file: NULL out");
    etch_image img;
    etch_status st = etch_image_open_file(path, o.load_mode, a, &img);
    if (st != ETCH_OK)
        return st;
    st = open_map(&img, a, out);
    if (st != ETCH_OK)
        etch_err_prefix("%s", path);
    return st;
}

etch_status etch_data_map_open_buffer(const void *data, size_t size,
                                      const etch_program_options *opts, etch_data_map **out) {
    etch_program_options o = opts ? *opts : etch_program_default_options();
    const etch_allocator *a = o.allocator ? o.allocator : etch_allocator_libc();
    if (!out)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "data_map_open_buffer: NULL out");
    etch_image img;
    etch_status st = etch_image_from_buffer(data, size, a, &img);
    if (st != ETCH_OK)
        return st;
    return open_map(&img, a, out);
}

void etch_data_map_close(etch_data_map *m) {
    if (!m)
        return;
    etch_image_close(&m->image);
    m->alloc->free(m->alloc->self, m);
}

size_t etch_data_map_count(const etch_data_map *m) { return m->ptd.num_entries; }

static void fill_entry(const etch_ptd_entry *e, etch_data_entry *out) {
    memset(out, 0, sizeof *out);
    out->key = e->key;
    out->data = e->data;
    out->size = (size_t)e->size;
    out->rank = -1;
    if (e->has_layout) {
        out->dtype = e->layout.dtype;
        out->rank = e->layout.rank;
        for (int i = 0; i < e->layout.rank; i++) {
            out->sizes[i] = e->layout.sizes[i];
            out->dim_order[i] = e->layout.dim_order[i];
        }
    }
}

etch_status etch_data_map_entry(const etch_data_map *m, size_t i, etch_data_entry *out) {
    if (i >= m->ptd.num_entries)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "data map entry %zu out of range", i);
    etch_ptd_entry e;
    etch_ptd_entry_at(&m->ptd, (uint32_t)i, &e);
    fill_entry(&e, out);
    return ETCH_OK;
}

etch_status etch_data_map_find(const etch_data_map *m, const char *key, etch_data_entry *out) {
    for (uint32_t i = 0; i < m->ptd.num_entries; i++) {
        etch_ptd_entry e;
        etch_ptd_entry_at(&m->ptd, i, &e);
        if (strcmp(e.key, key) == 0) {
            fill_entry(&e, out);
            return ETCH_OK;
        }
    }
    return etch_err(ETCH_ERR_NOT_FOUND, "no entry '%s' in the external data", key);
}
