#include <stdio.h>

#include "etch/tensor.h"
#include "format/ptd.h"
#include "runtime/error.h"

/* Slots of the current schema (flat_tensor.fbs). */
enum { FT_VERSION = 0, FT_SEGMENTS, FT_NAMED_DATA };
enum { FTND_KEY = 0, FTND_SEGMENT_INDEX, FTND_TENSOR_LAYOUT };
enum { LAYOUT_SCALAR_TYPE = 0, LAYOUT_SIZES, LAYOUT_DIM_ORDER };
/* Slots of the legacy schema (ptd.h): FlatTensor, TensorMetadata, NamedData. */
enum { FTL_VERSION = 0, FTL_TENSOR_ALIGNMENT, FTL_TENSORS, FTL_SEGMENTS, FTL_NAMED_DATA };
enum { TM_FQN = 0, TM_SCALAR_TYPE, TM_SIZES, TM_DIM_ORDER, TM_SEGMENT_INDEX, TM_OFFSET };

static etch_status ptd_bad(const etch_ptd *p, const char *what) {
    return etch_err(ETCH_ERR_INVALID_EXTERNAL_DATA, "malformed .ptd: %s (%s at byte offset %zu)",
                    what, p->fb.err_what ? p->fb.err_what : "bad value", p->fb.err_offset);
}

/* A tensor layout from slots (scalar_type, sizes, dim_order): TensorLayout's 0, 1, 2 or the
 * legacy TensorMetadata's 1, 2, 3. */
static void read_layout_at(const fb_table *lt, unsigned slot0, etch_tensor_desc *d) {
    memset(d, 0, sizeof *d);
    fb_vec sizes, order;
    d->dtype = (int)fb_i(lt, slot0, 1, 0);
    fb_vec_field(lt, slot0 + 1, 4, 4, &sizes);
    fb_vec_field(lt, slot0 + 2, 1, 1, &order);
    d->rank = sizes.len <= ETCH_PTE_MAX_RANK ? (int)sizes.len : -1;
    d->numel = 1;
    for (int i = 0; i < d->rank; i++) {
        d->sizes[i] = fb_vec_i32(&sizes, (uint32_t)i);
        d->dim_order[i] = i < (int)order.len ? fb_vec_u8(&order, (uint32_t)i) : (uint8_t)i;
        if (d->sizes[i] < 0 || (d->sizes[i] && d->numel > (UINT64_C(1) << 40) / (uint64_t)d->sizes[i]))
            d->numel = UINT64_MAX;
        else if (d->numel != UINT64_MAX)
            d->numel *= (uint64_t)d->sizes[i];
    }
    d->nbytes = d->numel == UINT64_MAX ? UINT64_MAX : d->numel * etch_dtype_size(d->dtype);
}

static void read_layout(const fb_table *lt, etch_tensor_desc *d) {
    read_layout_at(lt, LAYOUT_SCALAR_TYPE, d);
}

/* Entry i (tensors first in the legacy schema): its table and where its fields are. */
typedef struct ptd_slot {
    fb_table t;
    bool tensor;          /* a legacy TensorMetadata */
    unsigned key_slot, segment_slot;
} ptd_slot;

static bool entry_table(const etch_ptd *p, uint32_t i, ptd_slot *e) {
    if (p->legacy && i < p->tensors.len) {
        *e = (ptd_slot){{0}, true, TM_FQN, TM_SEGMENT_INDEX};
        return fb_vec_table(&p->tensors, i, &e->t);
    }
    *e = (ptd_slot){{0}, false, FTND_KEY, FTND_SEGMENT_INDEX};
    return fb_vec_table(&p->named_data, p->legacy ? i - p->tensors.len : i, &e->t);
}

etch_status etch_ptd_open(const uint8_t *data, size_t size, etch_ptd *p) {
    memset(p, 0, sizeof *p);
    if (size < 48 || memcmp(data + 4, "FT01", 4) != 0)
        return etch_err(ETCH_ERR_INVALID_EXTERNAL_DATA,
                        "not a .ptd file: no \"FT01\" identifier at byte 4");
    if (memcmp(data + 8, "FH01", 4) != 0)
        return etch_err(ETCH_ERR_INVALID_EXTERNAL_DATA, ".ptd: no \"FH01\" header at byte 8");
    uint32_t hlen = fb_rd_u32(data + 12);
    uint64_t fb_off = fb_rd_u64(data + 16), fb_size = fb_rd_u64(data + 24);
    p->segment_base_offset = fb_rd_u64(data + 32);
    p->segment_data_size = fb_rd_u64(data + 40);
    if (hlen < 40)
        return etch_err(ETCH_ERR_INVALID_EXTERNAL_DATA, ".ptd: header length %u below 40", hlen);
    if (fb_off > size || fb_size > size - fb_off)
        return etch_err(ETCH_ERR_INVALID_EXTERNAL_DATA,
                        ".ptd: flatbuffer [%llu, +%llu) outside the %zu-byte file",
                        (unsigned long long)fb_off, (unsigned long long)fb_size, size);
    if (p->segment_base_offset > size || p->segment_data_size > size - p->segment_base_offset)
        return etch_err(ETCH_ERR_INVALID_EXTERNAL_DATA,
                        ".ptd: segment data [%llu, +%llu) outside the %zu-byte file (truncated?)",
                        (unsigned long long)p->segment_base_offset,
                        (unsigned long long)p->segment_data_size, size);
    if ((uintptr_t)data & 15)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, ".ptd data must be 16-byte aligned");
    p->image = data;
    p->image_size = size;
    fb_init(&p->fb, data, (size_t)(fb_off + fb_size));
    if (!fb_root(&p->fb, &p->root))
        return ptd_bad(p, "root");
    /* only the legacy schema has a slot 3 (its segments; the current one has 3 fields) */
    p->legacy = fb_has(&p->root, FTL_SEGMENTS);
    if (p->legacy) {
        if (!fb_vec_field(&p->root, FTL_SEGMENTS, 4, 4, &p->segments) ||
            !fb_vec_field(&p->root, FTL_TENSORS, 4, 4, &p->tensors))
            return ptd_bad(p, "legacy layout: tensors and segments are required");
        if (fb_has(&p->root, FTL_NAMED_DATA) &&
            !fb_vec_field(&p->root, FTL_NAMED_DATA, 4, 4, &p->named_data))
            return ptd_bad(p, "legacy layout: named_data");
        if (p->tensors.len > UINT32_MAX - p->named_data.len)
            return ptd_bad(p, "legacy layout: entry count");
        p->num_entries = p->tensors.len + p->named_data.len;
    } else {
        if (!fb_vec_field(&p->root, FT_SEGMENTS, 4, 4, &p->segments) ||
            !fb_vec_field(&p->root, FT_NAMED_DATA, 4, 4, &p->named_data))
            return ptd_bad(p, "segments and named_data are required");
        p->num_entries = p->named_data.len;
    }
    for (uint32_t i = 0; i < p->segments.len; i++) {
        fb_table s;
        if (!fb_vec_table(&p->segments, i, &s))
            return ptd_bad(p, "segment");
        uint64_t off = fb_u(&s, 0, 8, 0), sz = fb_u(&s, 1, 8, 0);
        if (off > p->segment_data_size || sz > p->segment_data_size - off)
            return etch_err(ETCH_ERR_INVALID_EXTERNAL_DATA,
                            ".ptd: segment %u [%llu, +%llu) outside the data area of %llu bytes",
                            i, (unsigned long long)off, (unsigned long long)sz,
                            (unsigned long long)p->segment_data_size);
    }
    for (uint32_t i = 0; i < p->num_entries; i++) {
        fb_table lt;
        ptd_slot nd;
        const char *key;
        uint32_t len;
        if (!entry_table(p, i, &nd) || !fb_str_field(&nd.t, nd.key_slot, &key, &len))
            return ptd_bad(p, nd.tensor ? "legacy tensor without a fully_qualified_name"
                                        : "named data entry without a key");
        uint64_t si = fb_u(&nd.t, nd.segment_slot, 4, 0);
        if (si >= p->segments.len)
            return etch_err(ETCH_ERR_INVALID_EXTERNAL_DATA,
                            ".ptd: entry '%s' refers to segment %llu of %u", key,
                            (unsigned long long)si, p->segments.len);
        if (nd.tensor) {
            /* legacy: the tensor lies at its offset inside its segment */
            etch_tensor_desc d;
            read_layout_at(&nd.t, TM_SCALAR_TYPE, &d);
            if (p->fb.failed)
                return ptd_bad(p, "legacy tensor metadata");
            if (!etch_dtype_is_valid(d.dtype) || d.rank < 0 || d.nbytes == UINT64_MAX)
                return etch_err(ETCH_ERR_INVALID_EXTERNAL_DATA,
                                ".ptd (legacy layout): tensor '%s' has an invalid layout", key);
            fb_table s;
            fb_vec_table(&p->segments, (uint32_t)si, &s);
            uint64_t off = fb_u(&nd.t, TM_OFFSET, 8, 0), ssz = fb_u(&s, 1, 8, 0);
            if (off > ssz || d.nbytes > ssz - off)
                return etch_err(ETCH_ERR_INVALID_EXTERNAL_DATA,
                                ".ptd (legacy layout): tensor '%s' [%llu, +%llu) lies outside "
                                "its segment %llu of %llu bytes",
                                key, (unsigned long long)off, (unsigned long long)d.nbytes,
                                (unsigned long long)si, (unsigned long long)ssz);
        } else if (fb_table_field(&nd.t, FTND_TENSOR_LAYOUT, &lt) && !p->legacy) {
            etch_tensor_desc d;
            read_layout(&lt, &d);
            if (p->fb.failed)
                return ptd_bad(p, "tensor layout");
            if (!etch_dtype_is_valid(d.dtype) || d.rank < 0 || d.nbytes == UINT64_MAX)
                return etch_err(ETCH_ERR_INVALID_EXTERNAL_DATA,
                                ".ptd: entry '%s' has an invalid tensor layout", key);
            etch_ptd_entry e;
            etch_ptd_entry_at(p, i, &e);
            if (d.nbytes > e.size)
                return etch_err(ETCH_ERR_INVALID_EXTERNAL_DATA,
                                ".ptd: entry '%s' needs %llu bytes, its segment has %llu", key,
                                (unsigned long long)d.nbytes, (unsigned long long)e.size);
        }
        if (p->fb.failed)
            return ptd_bad(p, "named data");
    }
    return ETCH_OK;
}

void etch_ptd_entry_at(const etch_ptd *p, uint32_t i, etch_ptd_entry *e) {
    memset(e, 0, sizeof *e);
    fb_table s, lt;
    ptd_slot nd;
    uint32_t len;
    entry_table(p, i, &nd);
    fb_str_field(&nd.t, nd.key_slot, &e->key, &len);
    fb_vec_table(&p->segments, (uint32_t)fb_u(&nd.t, nd.segment_slot, 4, 0), &s);
    e->data = p->image + p->segment_base_offset + fb_u(&s, 0, 8, 0);
    e->size = fb_u(&s, 1, 8, 0);
    if (nd.tensor) { /* checked at open: offset + nbytes within the segment */
        e->has_layout = true;
        read_layout_at(&nd.t, TM_SCALAR_TYPE, &e->layout);
        uint64_t off = fb_u(&nd.t, TM_OFFSET, 8, 0);
        e->data += off;
        e->size = e->layout.nbytes;
    } else if (!p->legacy && fb_table_field(&nd.t, FTND_TENSOR_LAYOUT, &lt)) {
        e->has_layout = true;
        read_layout(&lt, &e->layout);
    }
}
