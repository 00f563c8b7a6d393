/* .pte header parsing and full verification of the Program flatbuffer. */
#include <stdio.h>

#include "etch/tensor.h"
#include "format/pte.h"
#include "runtime/error.h"

etch_status etch_pte_identify(const uint8_t *d, size_t n) {
    if (n < 8)
        return etch_err(ETCH_ERR_NOT_A_PROGRAM, "not a program: %zu bytes is too short", n);
    if (d[4] == 'E' && d[5] == 'T') {
        if (d[6] == '1' && d[7] == '2')
            return ETCH_OK;
        char id[5] = {(char)d[4], (char)d[5], (char)d[6], (char)d[7], 0};
        for (int i = 0; i < 4; i++)
            if (id[i] < 32 || id[i] > 126)
                id[i] = '?';
        return etch_err(ETCH_ERR_INCOMPATIBLE_VERSION,
                        "incompatible version: identifier \"%s\", this runtime reads \"ET12\"",
                        id);
    }
    return etch_err(ETCH_ERR_NOT_A_PROGRAM,
                    "not a program: no \"ET12\" identifier at byte 4 (found %02x %02x %02x %02x)",
                    d[4], d[5], d[6], d[7]);
}

etch_status etch_pte_read_header(const uint8_t *d, size_t n, etch_pte_header *h) {
    memset(h, 0, sizeof *h);
    if (n < 16 || memcmp(d + 8, "eh00", 4) != 0)
        return ETCH_OK;
    h->present = true;
    h->length = fb_rd_u32(d + 12);
    if (h->length < 24)
        return etch_err(ETCH_ERR_INVALID_PROGRAM,
                        "extended header length %u is below the minimum 24 (byte 12)", h->length);
    if (n < 8 + (size_t)h->length || n < 32)
        return etch_err(ETCH_ERR_INVALID_PROGRAM,
                        "file of %zu bytes is shorter than its extended header", n);
    h->program_size = fb_rd_u64(d + 16);
    h->segment_base_offset = fb_rd_u64(d + 24);
    h->segment_data_size = h->length >= 32 && n >= 40 ? fb_rd_u64(d + 32) : 0;
    return ETCH_OK;
}

/* ---- verification ------------------------------------------------------------------- */

typedef struct vctx {
    etch_pte *p;
    const char *method;
    uint32_t nvalues;
    const uint8_t *tags; /* per value KernelTypes tag (scratch on the stack, chunked) */
} vctx;

static etch_status fb_error(const etch_pte *p, const char *where) {
    return etch_err(ETCH_ERR_INVALID_PROGRAM, "malformed program: %s%s%s at byte offset %zu",
                    where ? where : "", where ? ": " : "",
                    p->fb.err_what ? p->fb.err_what : "bad reference", p->fb.err_offset);
}

#define FB_CHECK(p, where)                                                                    \
    do {                                                                                      \
        if ((p)->fb.failed)                                                                   \
            return fb_error((p), (where));                                                    \
    } while (0)

#if defined(ETCH_TERSE_ERRORS)
#define bad(m, ...) ((void)(m), etch_err(ETCH_ERR_INVALID_PROGRAM, __VA_ARGS__))
#else
static etch_status bad(const char *method, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static etch_status bad(const char *method, const char *fmt, ...) {
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (method)
        return etch_err(ETCH_ERR_INVALID_PROGRAM, "method '%s': %s", method, msg);
    return etch_err(ETCH_ERR_INVALID_PROGRAM, "%s", msg);
}
#endif

/* Verification (and the method pool sized from it) does work per element of the vectors it
 * walks: list items, instruction arguments, debug frames, compile specs. In an honest file
 * each such element takes at least 4 bytes of its own, so their total is at most a quarter
 * of the flatbuffer; a file that reaches further shares one table among many slots (10,000
 * values all pointing at one 10,000-item list), which would make the work and the memory
 * quadratic in the file size. Every walk spends from p->work_left, set to that bound. */
static etch_status spend(etch_pte *p, const char *m, uint64_t n, const char *what) {
    if (n > p->work_left)
        return bad(m, "%s: the program's tables hold more elements in all than a %llu-byte "
                      "program can store (shared or repeated tables are not supported)",
                   what, (unsigned long long)p->fb.size);
    p->work_left -= n;
    return ETCH_OK;
}

etch_range etch_pte_segment(const etch_pte *p, uint32_t i) {
    etch_range r = {NULL, 0};
    fb_table seg;
    if (i >= p->segments.len || !fb_vec_table(&p->segments, i, &seg))
        return r;
    uint64_t off = fb_u(&seg, SEGMENT_OFFSET, 8, 0), size = fb_u(&seg, SEGMENT_SIZE, 8, 0);
    r.data = p->image + p->header.segment_base_offset + off;
    r.size = size;
    return r;
}

void etch_pte_tensor_desc(const fb_table *t, etch_tensor_desc *d) {
    memset(d, 0, sizeof *d);
    d->dtype = (int)fb_i(t, TENSOR_SCALAR_TYPE, 1, 0);
    fb_vec sizes, order;
    fb_vec_field(t, TENSOR_SIZES, 4, 4, &sizes);
    fb_vec_field(t, TENSOR_DIM_ORDER, 1, 1, &order);
    d->rank = (int)(sizes.len <= ETCH_PTE_MAX_RANK ? sizes.len : ETCH_PTE_MAX_RANK);
    /* The extent (zero sizes counted as one: what the strides span) must stay below 2^62
     * bytes even when the tensor holds none: a zero dimension does not make huge ones safe. */
    uint64_t extent = 1;
    bool zero = false, over = false;
    for (int i = 0; i < d->rank; i++) {
        d->sizes[i] = fb_vec_i32(&sizes, (uint32_t)i);
        d->dim_order[i] = i < (int)order.len ? fb_vec_u8(&order, (uint32_t)i) : (uint8_t)i;
        uint64_t f = d->sizes[i] > 0 ? (uint64_t)d->sizes[i] : 1;
        zero |= d->sizes[i] == 0;
        if (extent > (UINT64_C(1) << 62) / f)
            over = true;
        else
            extent *= f;
    }
    size_t es = etch_dtype_size(d->dtype);
    if (es && extent > (UINT64_C(1) << 62) / es)
        over = true;
    d->numel = over ? UINT64_MAX : zero ? 0 : extent;
    d->nbytes = over ? UINT64_MAX : d->numel * es;
    d->dynamism = (int)fb_i(t, TENSOR_SHAPE_DYNAMISM, 1, 0);
    d->data_buffer_idx = (uint32_t)fb_u(t, TENSOR_DATA_BUFFER_IDX, 4, 0);
    fb_table ai, extra;
    if (fb_table_field(t, TENSOR_ALLOCATION_INFO, &ai)) {
        d->planned = true;
        d->memory_id = (uint32_t)fb_u(&ai, ALLOC_MEMORY_ID, 4, 0);
        d->memory_offset = fb_u(&ai, ALLOC_OFFSET_LOW, 4, 0) |
                           (fb_u(&ai, ALLOC_OFFSET_HIGH, 4, 0) << 32);
    }
    if (fb_table_field(t, TENSOR_EXTRA_INFO, &extra)) {
        uint32_t len;
        d->external = fb_u(&extra, EXTRA_LOCATION, 1, 0) == TENSOR_LOCATION_EXTERNAL;
        fb_str_field(&extra, EXTRA_FQN, &d->fqn, &len);
    }
}

bool etch_pte_constant(const etch_pte *p, uint32_t idx, etch_range *out) {
    out->data = NULL;
    out->size = 0;
    if (p->legacy_constants) {
        fb_table buf;
        fb_vec storage;
        if (idx >= p->constant_buffer.len || !fb_vec_table(&p->constant_buffer, idx, &buf))
            return false;
        if (!fb_vec_field(&buf, BUFFER_STORAGE, 1, 1, &storage))
            return false;
        out->data = fb_vec_ptr(&storage);
        out->size = storage.len;
        return true;
    }
    if (idx >= p->constant_offsets.len)
        return false;
    uint64_t off = fb_vec_u64(&p->constant_offsets, idx);
    if (off > p->constant_segment.size)
        return false;
    out->data = p->constant_segment.data + off;
    out->size = p->constant_segment.size - off;
    return true;
}

static etch_status verify_tensor(etch_pte *p, const char *m, uint32_t vi, const fb_table *t,
                                 const fb_vec *arena_sizes) {
    fb_vec sizes, order;
    if (!fb_vec_field(t, TENSOR_SIZES, 4, 4, &sizes)) {
        FB_CHECK(p, "tensor sizes");
        return bad(m, "value %u: tensor has no sizes", vi);
    }
    if (!fb_vec_field(t, TENSOR_DIM_ORDER, 1, 1, &order)) {
        FB_CHECK(p, "tensor dim_order");
        return bad(m, "value %u: tensor has no dim_order", vi);
    }
    if (sizes.len > ETCH_PTE_MAX_RANK)
        return bad(m, "value %u: rank %u exceeds %d", vi, sizes.len, ETCH_PTE_MAX_RANK);
    if (order.len != sizes.len)
        return bad(m, "value %u: dim_order has %u entries for rank %u", vi, order.len, sizes.len);
    unsigned seen = 0;
    for (uint32_t i = 0; i < sizes.len; i++) {
        if (fb_vec_i32(&sizes, i) < 0)
            return bad(m, "value %u: negative size %d at dim %u", vi, fb_vec_i32(&sizes, i), i);
        uint8_t o = fb_vec_u8(&order, i);
        if (o >= sizes.len || (seen & (1u << o)))
            return bad(m, "value %u: dim_order is not a permutation of 0..%u", vi, sizes.len - 1);
        seen |= 1u << o;
    }
    etch_tensor_desc d;
    etch_pte_tensor_desc(t, &d);
    FB_CHECK(p, "tensor");
    if (!etch_dtype_is_valid(d.dtype))
        return bad(m, "value %u: unknown scalar type %d", vi, d.dtype);
    if (d.nbytes == UINT64_MAX)
        return bad(m, "value %u: element count overflows", vi);
    if (fb_i(t, TENSOR_STORAGE_OFFSET, 4, 0) != 0)
        return bad(m, "value %u: non-zero storage_offset is not supported", vi);
    if (fb_i(t, TENSOR_LAYOUT, 1, 0) != 0)
        return bad(m, "value %u: only strided layout is supported", vi);
    if (d.dynamism < 0 || d.dynamism > 1)
        return bad(m, "value %u: shape dynamism %d is not supported", vi, d.dynamism);
    if (fb_has(t, TENSOR_EXTRA_INFO)) {
        fb_table extra;
        fb_table_field(t, TENSOR_EXTRA_INFO, &extra);
        FB_CHECK(p, "extra_tensor_info");
        uint64_t loc = fb_u(&extra, EXTRA_LOCATION, 1, 0);
        const char *fqn;
        uint32_t len;
        fb_str_field(&extra, EXTRA_FQN, &fqn, &len);
        FB_CHECK(p, "tensor fully_qualified_name");
        if (loc > 1)
            return bad(m, "value %u: unknown tensor data location %u", vi, (unsigned)loc);
        if (loc == TENSOR_LOCATION_EXTERNAL && !fqn)
            return bad(m, "value %u: external tensor without a fully qualified name", vi);
    }
    if (d.planned) {
        if (d.memory_id == 0 || d.memory_id >= arena_sizes->len)
            return bad(m, "value %u: memory id %u out of range (method has %u arenas)", vi,
                       d.memory_id, arena_sizes->len ? arena_sizes->len - 1 : 0);
        int64_t arena = fb_vec_i64(arena_sizes, d.memory_id);
        if (d.memory_offset > (uint64_t)arena || d.nbytes > (uint64_t)arena - d.memory_offset)
            return bad(m,
                       "value %u: planned range [%llu, +%llu) exceeds arena %u of %lld bytes", vi,
                       (unsigned long long)d.memory_offset, (unsigned long long)d.nbytes,
                       d.memory_id, (long long)arena);
        const size_t es = etch_dtype_size(d.dtype);
        if (es > 1 && d.memory_offset % es)
            return bad(m, "value %u: planned offset %llu is not a multiple of its %zu-byte "
                          "element size", vi, (unsigned long long)d.memory_offset, es);
        if (d.data_buffer_idx > 0 && !d.external) {
            if (!p->mutable_offsets.pos || d.data_buffer_idx >= p->mutable_offsets.len)
                return bad(m, "value %u: initial value index %u has no mutable data entry", vi,
                           d.data_buffer_idx);
            uint64_t off = fb_vec_u64(&p->mutable_offsets, d.data_buffer_idx);
            if (off > p->mutable_segment.size || d.nbytes > p->mutable_segment.size - off)
                return bad(m, "value %u: initial value [%llu, +%llu) exceeds the mutable "
                              "segment of %llu bytes", vi, (unsigned long long)off,
                           (unsigned long long)d.nbytes,
                           (unsigned long long)p->mutable_segment.size);
        }
    } else if (d.data_buffer_idx > 0 && !d.external) {
        etch_range r;
        if (!etch_pte_constant(p, d.data_buffer_idx, &r))
            return bad(m, "value %u: constant buffer index %u out of range", vi,
                       d.data_buffer_idx);
        if (d.nbytes > r.size)
            return bad(m, "value %u: constant of %llu bytes exceeds its buffer (%llu bytes left)",
                       vi, (unsigned long long)d.nbytes, (unsigned long long)r.size);
        if (((uintptr_t)r.data & 15) && d.nbytes)
            return bad(m, "value %u: constant data is not 16-byte aligned", vi);
    }
    return ETCH_OK;
}

static etch_status value_tag(etch_pte *p, const fb_vec *values, uint32_t i, uint8_t *tag) {
    fb_table ev;
    fb_vec_table(values, i, &ev);
    FB_CHECK(p, "value");
    *tag = (uint8_t)fb_u(&ev, EVALUE_TYPE, 1, 0);
    return ETCH_OK;
}

static etch_status verify_list(etch_pte *p, const char *m, const fb_vec *values, uint32_t vi,
                               uint8_t kind, const fb_table *val) {
    fb_vec items;
    size_t es = kind == KT_INT_LIST ? 8 : 4;
    if (!fb_vec_field(val, SCALAR_VAL, es, 4, &items)) {
        FB_CHECK(p, "list");
        return bad(m, "value %u: list has no items", vi);
    }
    etch_status sp = spend(p, m, items.len, "list items");
    if (sp)
        return sp;
    for (uint32_t k = 0; k < items.len; k++) {
        int64_t idx = kind == KT_INT_LIST ? fb_vec_i64(&items, k) : fb_vec_i32(&items, k);
        if (kind == KT_OPTIONAL_TENSOR_LIST && idx == -1)
            continue;
        if (idx < 0 || idx >= (int64_t)values->len)
            return bad(m, "value %u: list item %u refers to value %lld, out of range", vi, k,
                       (long long)idx);
        if (kind != KT_INT_LIST && idx >= vi)
            return bad(m, "value %u: list item %u refers to later value %lld", vi, k,
                       (long long)idx);
        uint8_t t = 0;
        etch_status st = value_tag(p, values, (uint32_t)idx, &t);
        if (st)
            return st;
        bool ok = kind == KT_INT_LIST ? t == KT_INT
                  : kind == KT_TENSOR_LIST ? t == KT_TENSOR
                                           : (t == KT_TENSOR || t == KT_NULL);
        if (!ok)
            return bad(m, "value %u: list item %u (value %lld) has the wrong kind", vi, k,
                       (long long)idx);
    }
    return ETCH_OK;
}

static etch_status verify_values(etch_pte *p, const char *m, const fb_vec *values,
                                 const fb_vec *arena_sizes) {
    etch_status sp = spend(p, m, values->len, "values");
    if (sp)
        return sp;
    for (uint32_t i = 0; i < values->len; i++) {
        fb_table ev, val;
        fb_vec_table(values, i, &ev);
        FB_CHECK(p, "value");
        uint8_t kind = (uint8_t)fb_u(&ev, EVALUE_TYPE, 1, 0);
        if (kind < KT_NULL || kind > KT_OPTIONAL_TENSOR_LIST)
            return bad(m, "value %u: unknown value kind %u", i, kind);
        bool has_val = fb_table_field(&ev, EVALUE_VAL, &val);
        FB_CHECK(p, "value payload");
        if (!has_val && kind != KT_NULL)
            return bad(m, "value %u: missing payload", i);
        etch_status st = ETCH_OK;
        const char *s;
        uint32_t len;
        fb_vec v;
        switch (kind) {
        case KT_TENSOR:
            st = verify_tensor(p, m, i, &val, arena_sizes);
            break;
        case KT_STRING:
            fb_str_field(&val, SCALAR_VAL, &s, &len);
            break;
        case KT_DOUBLE_LIST:
            fb_vec_field(&val, SCALAR_VAL, 8, 8, &v);
            break;
        case KT_BOOL_LIST:
            fb_vec_field(&val, SCALAR_VAL, 1, 1, &v);
            break;
        case KT_INT_LIST:
        case KT_TENSOR_LIST:
        case KT_OPTIONAL_TENSOR_LIST:
            st = verify_list(p, m, values, i, kind, &val);
            break;
        default: /* Null, Int, Bool, Double: scalar reads are bounds-checked */
            fb_u(&val, SCALAR_VAL, kind == KT_BOOL ? 1 : 8, 0);
            break;
        }
        if (st)
            return st;
        FB_CHECK(p, "value payload");
    }
    return ETCH_OK;
}

static etch_status check_index_vec(etch_pte *p, const char *m, const fb_table *t,
                                   unsigned slot, const char *what, uint32_t limit, bool required,
                                   fb_vec *out) {
    if (!fb_vec_field(t, slot, 4, 4, out)) {
        FB_CHECK(p, what);
        if (required)
            return bad(m, "missing %s", what);
        return ETCH_OK;
    }
    etch_status sp = spend(p, m, out->len, what);
    if (sp)
        return sp;
    for (uint32_t k = 0; k < out->len; k++) {
        int32_t idx = fb_vec_i32(out, k);
        if (idx < 0 || (uint32_t)idx >= limit)
            return bad(m, "%s[%u] = %d is out of range (limit %u)", what, k, idx, limit);
    }
    return ETCH_OK;
}

/* Chain.stacktrace (debug information, [FrameList], one per instruction): every table, vector
 * and string must be readable, as everywhere else, so that the accessors that show it
 * (etch_method_meta_instruction_debug) cannot fail; a list whose length is not the number of
 * instructions is no error (ExecuTorch's runtime never reads it): the accessors then treat
 * the chain as having no debug information. A method name of up to ~100 bytes is shown. */
static etch_status verify_stacktrace(etch_pte *p, const char *m, uint32_t ci,
                                     const fb_table *ch) {
    fb_vec lists;
    if (!fb_vec_field(ch, CHAIN_STACKTRACE, 4, 4, &lists)) {
        FB_CHECK(p, "chain stacktrace");
        return ETCH_OK;
    }
    char what[200];
    etch_status sp = spend(p, m, lists.len, "debug information");
    if (sp)
        return sp;
    for (uint32_t k = 0; k < lists.len; k++) {
        fb_table fl, fr;
        fb_vec frames;
        fb_vec_table(&lists, k, &fl);
        fb_vec_field(&fl, FRAME_LIST_ITEMS, 4, 4, &frames);
        if (p->fb.failed) {
            snprintf(what, sizeof what, "method '%s' chain %u stacktrace %u", m, ci, k);
            return fb_error(p, what);
        }
        if ((sp = spend(p, m, frames.len, "debug frames")))
            return sp;
        for (uint32_t j = 0; j < frames.len; j++) {
            const char *s;
            uint32_t len;
            fb_vec_table(&frames, j, &fr);
            fb_str_field(&fr, FRAME_FILENAME, &s, &len);
            fb_str_field(&fr, FRAME_NAME, &s, &len);
            fb_str_field(&fr, FRAME_CONTEXT, &s, &len);
            (void)fb_i(&fr, FRAME_LINENO, 4, 0);
            if (p->fb.failed) {
                snprintf(what, sizeof what, "method '%s' chain %u stacktrace %u frame %u", m,
                         ci, k, j);
                return fb_error(p, what);
            }
        }
    }
    return ETCH_OK;
}

static etch_status verify_chain(etch_pte *p, const char *m, uint32_t ci, const fb_table *ch,
                                uint32_t nvalues, uint32_t nops, uint32_t ndelegates) {
    fb_vec instrs;
    if (!fb_vec_field(ch, CHAIN_INSTRUCTIONS, 4, 4, &instrs)) {
        FB_CHECK(p, "chain instructions");
        return bad(m, "chain %u has no instructions", ci);
    }
    etch_status sp = spend(p, m, instrs.len, "instructions");
    if (sp)
        return sp;
    for (uint32_t k = 0; k < instrs.len; k++) {
        fb_table in, a;
        fb_vec_table(&instrs, k, &in);
        FB_CHECK(p, "instruction");
        uint8_t kind = (uint8_t)fb_u(&in, INSTR_TYPE, 1, 0);
        if (kind < IA_KERNEL_CALL || kind > IA_FREE_CALL)
            return bad(m, "instruction %u: unknown kind %u", k, kind);
        if (!fb_table_field(&in, INSTR_ARGS, &a)) {
            FB_CHECK(p, "instruction arguments");
            return bad(m, "instruction %u: missing arguments", k);
        }
        fb_vec args;
        etch_status st = ETCH_OK;
        char what[64];
        snprintf(what, sizeof what, "instruction %u args", k);
        switch (kind) {
        case IA_KERNEL_CALL: {
            int64_t op = fb_i(&a, KERNEL_CALL_OP_INDEX, 4, 0);
            if (op < 0 || op >= nops)
                return bad(m, "instruction %u: operator index %lld out of range (%u operators)",
                           k, (long long)op, nops);
            st = check_index_vec(p, m, &a, KERNEL_CALL_ARGS, what, nvalues, true, &args);
            break;
        }
        case IA_DELEGATE_CALL: {
            int64_t di = fb_i(&a, DELEGATE_CALL_INDEX, 4, 0);
            if (di < 0 || di >= ndelegates)
                return bad(m, "instruction %u: delegate index %lld out of range (%u delegates)",
                           k, (long long)di, ndelegates);
            st = check_index_vec(p, m, &a, DELEGATE_CALL_ARGS, what, nvalues, true, &args);
            break;
        }
        case IA_MOVE_CALL: {
            int64_t f = fb_i(&a, MOVE_FROM, 4, 0), t = fb_i(&a, MOVE_TO, 4, 0);
            if (f < 0 || f >= nvalues || t < 0 || t >= nvalues)
                return bad(m, "instruction %u: move %lld -> %lld out of range", k, (long long)f,
                           (long long)t);
            break;
        }
        case IA_JUMP_FALSE_CALL: {
            int64_t c = fb_i(&a, JUMP_COND, 4, 0), d = fb_i(&a, JUMP_DEST, 4, 0);
            if (c < 0 || c >= nvalues)
                return bad(m, "instruction %u: condition value %lld out of range", k,
                           (long long)c);
            if (d < 0)
                return bad(m, "instruction %u: negative jump destination %lld", k, (long long)d);
            break;
        }
        case IA_FREE_CALL: {
            int64_t v = fb_i(&a, FREE_VALUE, 4, 0);
            if (v < 0 || v >= nvalues)
                return bad(m, "instruction %u: free of value %lld out of range", k, (long long)v);
            break;
        }
        }
        if (st)
            return st;
        FB_CHECK(p, "instruction");
    }
    return verify_stacktrace(p, m, ci, ch);
}

static etch_status verify_plan(etch_pte *p, uint32_t pi) {
    fb_table plan;
    fb_vec_table(&p->plans, pi, &plan);
    FB_CHECK(p, "execution plan");
    const char *m;
    uint32_t mlen;
    if (!fb_str_field(&plan, PLAN_NAME, &m, &mlen)) {
        FB_CHECK(p, "method name");
        return bad(NULL, "execution plan %u has no name", pi);
    }
    fb_vec values, arena_sizes, ops, delegates, chains, io;
    if (!fb_vec_field(&plan, PLAN_VALUES, 4, 4, &values)) {
        FB_CHECK(p, "values");
        return bad(m, "missing values");
    }
    if (!fb_vec_field(&plan, PLAN_NON_CONST_BUFFER_SIZES, 8, 4, &arena_sizes)) {
        FB_CHECK(p, "non_const_buffer_sizes");
        return bad(m, "missing non_const_buffer_sizes");
    }
    for (uint32_t k = 0; k < arena_sizes.len; k++) {
        int64_t sz = fb_vec_i64(&arena_sizes, k);
        if (sz < 0 || (uint64_t)sz > (uint64_t)SIZE_MAX / 2)
            return bad(m, "arena %u has invalid size %lld", k, (long long)sz);
    }
    fb_table container;
    fb_table_field(&plan, PLAN_CONTAINER_META, &container);
    FB_CHECK(p, "container metadata");
    etch_status st = verify_values(p, m, &values, &arena_sizes);
    if (st)
        return st;
    if ((st = check_index_vec(p, m, &plan, PLAN_INPUTS, "inputs", values.len, true, &io)))
        return st;
    if ((st = check_index_vec(p, m, &plan, PLAN_OUTPUTS, "outputs", values.len, true, &io)))
        return st;
    if (fb_vec_field(&plan, PLAN_OPERATORS, 4, 4, &ops)) {
        if ((st = spend(p, m, ops.len, "operators")))
            return st;
        for (uint32_t k = 0; k < ops.len; k++) {
            fb_table op;
            const char *s;
            uint32_t len;
            fb_vec_table(&ops, k, &op);
            FB_CHECK(p, "operator");
            if (!fb_str_field(&op, OPERATOR_NAME, &s, &len)) {
                FB_CHECK(p, "operator name");
                return bad(m, "operator %u has no name", k);
            }
            uint32_t olen = 0;
            fb_str_field(&op, OPERATOR_OVERLOAD, &s, &olen);
            FB_CHECK(p, "operator overload");
            if (len + olen + 2 > 127)
                return bad(m, "operator %u: name longer than 126 characters", k);
        }
    }
    FB_CHECK(p, "operators");
    if (!fb_vec_field(&plan, PLAN_DELEGATES, 4, 4, &delegates)) {
        FB_CHECK(p, "delegates");
        return bad(m, "missing delegates");
    }
    if ((st = spend(p, m, delegates.len, "delegates")))
        return st;
    for (uint32_t k = 0; k < delegates.len; k++) {
        fb_table del, ref;
        const char *id;
        uint32_t len;
        fb_vec_table(&delegates, k, &del);
        FB_CHECK(p, "delegate");
        if (!fb_str_field(&del, DELEGATE_ID, &id, &len)) {
            FB_CHECK(p, "delegate id");
            return bad(m, "delegate %u has no backend id", k);
        }
        if (!fb_table_field(&del, DELEGATE_PROCESSED, &ref)) {
            FB_CHECK(p, "delegate data reference");
            return bad(m, "delegate %u (%s) has no processed data", k, id);
        }
        uint64_t loc = fb_u(&ref, DATAREF_LOCATION, 1, 0), idx = fb_u(&ref, DATAREF_INDEX, 4, 0);
        if (loc == DATA_LOCATION_INLINE) {
            fb_table inl;
            fb_vec data;
            if (idx >= p->delegate_data.len)
                return bad(m, "delegate %u (%s): inline data index %llu out of range", k, id,
                           (unsigned long long)idx);
            fb_vec_table(&p->delegate_data, (uint32_t)idx, &inl);
            fb_vec_field(&inl, INLINE_DATA_DATA, 1, 1, &data);
        } else if (loc == DATA_LOCATION_SEGMENT) {
            if (idx >= p->segments.len)
                return bad(m, "delegate %u (%s): segment %llu out of range", k, id,
                           (unsigned long long)idx);
        } else {
            return bad(m, "delegate %u (%s): unknown data location %llu", k, id,
                       (unsigned long long)loc);
        }
        fb_vec specs;
        if (fb_vec_field(&del, DELEGATE_COMPILE_SPECS, 4, 4, &specs)) {
            if ((st = spend(p, m, specs.len, "compile specs")))
                return st;
            for (uint32_t s = 0; s < specs.len; s++) {
                fb_table spec;
                fb_vec val;
                const char *key;
                fb_vec_table(&specs, s, &spec);
                fb_str_field(&spec, COMPILE_SPEC_KEY, &key, &len);
                fb_vec_field(&spec, COMPILE_SPEC_VALUE, 1, 1, &val);
            }
        }
        FB_CHECK(p, "delegate");
    }
    if (!fb_vec_field(&plan, PLAN_CHAINS, 4, 4, &chains) || chains.len == 0) {
        FB_CHECK(p, "chains");
        return bad(m, "no instruction chain");
    }
    if ((st = spend(p, m, chains.len, "chains")))
        return st;
    for (uint32_t c = 0; c < chains.len; c++) {
        fb_table ch;
        fb_vec_table(&chains, c, &ch);
        FB_CHECK(p, "chain");
        if ((st = verify_chain(p, m, c, &ch, values.len, ops.len, delegates.len)))
            return st;
    }
    return ETCH_OK;
}

etch_status etch_pte_open(const uint8_t *data, size_t size, etch_pte *p) {
    memset(p, 0, sizeof *p);
    etch_status st = etch_pte_identify(data, size);
    if (st)
        return st;
    if ((st = etch_pte_read_header(data, size, &p->header)))
        return st;
    etch_pte_header *h = &p->header;
    size_t fb_size = size;
    if (h->present) {
        if (h->program_size < 8 || h->program_size > size)
            return etch_err(ETCH_ERR_INVALID_PROGRAM,
                            "extended header: program_size %llu outside the %zu-byte file",
                            (unsigned long long)h->program_size, size);
        fb_size = (size_t)h->program_size;
        if (h->segment_base_offset) {
            if (h->segment_base_offset < h->program_size || h->segment_base_offset > size)
                return etch_err(ETCH_ERR_INVALID_PROGRAM,
                                "extended header: segment_base_offset %llu outside [%llu, %zu]",
                                (unsigned long long)h->segment_base_offset,
                                (unsigned long long)h->program_size, size);
            if (h->segment_data_size > size - h->segment_base_offset)
                return etch_err(ETCH_ERR_INVALID_PROGRAM,
                                "truncated file: segment data of %llu bytes at %llu, file has "
                                "%zu bytes",
                                (unsigned long long)h->segment_data_size,
                                (unsigned long long)h->segment_base_offset, size);
        }
    }
    if ((uintptr_t)data & 15)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "program data must be 16-byte aligned");
    p->image = data;
    p->image_size = size;
    fb_init(&p->fb, data, fb_size);
    p->work_left = fb_size / 4;
    fb_root(&p->fb, &p->root);
    FB_CHECK(p, "program root");
    if (!fb_vec_field(&p->root, PROGRAM_EXECUTION_PLAN, 4, 4, &p->plans)) {
        FB_CHECK(p, "execution_plan");
        return bad(NULL, "program has no execution plans");
    }
    /* segments: each must lie inside the segment area of the file */
    if (fb_vec_field(&p->root, PROGRAM_SEGMENTS, 4, 4, &p->segments)) {
        uint64_t area = h->segment_data_size ? h->segment_data_size
                                             : (uint64_t)size - h->segment_base_offset;
        for (uint32_t i = 0; i < p->segments.len; i++) {
            fb_table seg;
            fb_vec_table(&p->segments, i, &seg);
            FB_CHECK(p, "segment");
            uint64_t off = fb_u(&seg, SEGMENT_OFFSET, 8, 0), sz = fb_u(&seg, SEGMENT_SIZE, 8, 0);
            /* even an empty segment's address is computed (etch_pte_segment): its offset
             * must stay inside the area, or image + base + off overflows the pointer */
            if (off > area)
                return bad(NULL, "segment %u offset %llu is beyond the segment area of %llu "
                                 "bytes", i, (unsigned long long)off, (unsigned long long)area);
            if (sz == 0)
                continue;
            if (!h->present || !h->segment_base_offset)
                return bad(NULL, "segment %u has data but the file has no segment area", i);
            if (off > area || sz > area - off)
                return bad(NULL,
                           "segment %u [%llu, +%llu) exceeds the segment area of %llu bytes "
                           "(truncated file?)",
                           i, (unsigned long long)off, (unsigned long long)sz,
                           (unsigned long long)area);
        }
    }
    FB_CHECK(p, "segments");
    /* constants */
    fb_table cseg;
    bool has_cseg = fb_table_field(&p->root, PROGRAM_CONSTANT_SEGMENT, &cseg);
    FB_CHECK(p, "constant_segment");
    if (has_cseg)
        fb_vec_field(&cseg, SUBSEG_OFFSETS, 8, 4, &p->constant_offsets);
    fb_vec_field(&p->root, PROGRAM_CONSTANT_BUFFER, 4, 4, &p->constant_buffer);
    FB_CHECK(p, "constants");
    if (p->constant_offsets.len > 1) {
        if (p->constant_buffer.len > 0)
            return bad(NULL, "both constant_segment and constant_buffer hold constants");
        uint64_t si = fb_u(&cseg, SUBSEG_SEGMENT_INDEX, 4, 0);
        if (si >= p->segments.len)
            return bad(NULL, "constant segment index %llu out of range (%u segments)",
                       (unsigned long long)si, p->segments.len);
        p->constant_segment = etch_pte_segment(p, (uint32_t)si);
        for (uint32_t i = 0; i < p->constant_offsets.len; i++)
            if (fb_vec_u64(&p->constant_offsets, i) > p->constant_segment.size)
                return bad(NULL, "constant %u offset %llu beyond the constant segment (%llu bytes)",
                           i, (unsigned long long)fb_vec_u64(&p->constant_offsets, i),
                           (unsigned long long)p->constant_segment.size);
    } else {
        p->legacy_constants = p->constant_buffer.len > 0;
        for (uint32_t i = 0; i < p->constant_buffer.len; i++) {
            fb_table b;
            fb_vec storage;
            fb_vec_table(&p->constant_buffer, i, &b);
            if (fb_vec_field(&b, BUFFER_STORAGE, 1, 1, &storage) && storage.len &&
                ((uintptr_t)fb_vec_ptr(&storage) & 15))
                return bad(NULL, "constant buffer %u is not 16-byte aligned", i);
            FB_CHECK(p, "constant buffer");
        }
    }
    fb_vec_field(&p->root, PROGRAM_BACKEND_DELEGATE_DATA, 4, 4, &p->delegate_data);
    FB_CHECK(p, "backend_delegate_data");
    fb_vec msegs;
    if (fb_vec_field(&p->root, PROGRAM_MUTABLE_DATA_SEGMENTS, 4, 4, &msegs)) {
        for (uint32_t i = 0; i < msegs.len; i++) {
            fb_table ms;
            fb_vec offs;
            fb_vec_table(&msegs, i, &ms);
            fb_vec_field(&ms, SUBSEG_OFFSETS, 8, 4, &offs);
            FB_CHECK(p, "mutable_data_segments");
            uint64_t si = fb_u(&ms, SUBSEG_SEGMENT_INDEX, 4, 0);
            if (si >= p->segments.len)
                return bad(NULL, "mutable data segment index %llu out of range",
                           (unsigned long long)si);
            if (i == 0) {
                p->mutable_offsets = offs;
                p->mutable_segment = etch_pte_segment(p, (uint32_t)si);
            }
        }
    }
    if (fb_vec_field(&p->root, PROGRAM_NAMED_DATA, 4, 4, &p->named_data)) {
        for (uint32_t i = 0; i < p->named_data.len; i++) {
            fb_table nd;
            const char *key;
            uint32_t len;
            fb_vec_table(&p->named_data, i, &nd);
            if (!fb_str_field(&nd, NAMED_DATA_KEY, &key, &len)) {
                FB_CHECK(p, "named data key");
                return bad(NULL, "named data %u has no key", i);
            }
            if (fb_u(&nd, NAMED_DATA_SEGMENT_INDEX, 4, 0) >= p->segments.len)
                return bad(NULL, "named data '%s': segment index out of range", key);
        }
    }
    FB_CHECK(p, "named_data");
    if ((st = spend(p, NULL, p->plans.len, "execution plans")))
        return st;
    for (uint32_t i = 0; i < p->plans.len; i++)
        if ((st = verify_plan(p, i)))
            return st;
    return ETCH_OK;
}

bool etch_bpte_program(const uint8_t *data, size_t size, const uint8_t **prog, size_t *prog_size,
                       size_t *err_offset, const char **err_what) {
    fb_buf b;
    fb_table root;
    fb_vec v;
    fb_init(&b, data, size);
    if (size < 8 || memcmp(data + 4, "BP08", 4) != 0) {
        *err_offset = 4;
        *err_what = "not a BP08 bundled program";
        return false;
    }
    if (fb_root(&b, &root) && fb_vec_field(&root, 2, 1, 1, &v) && v.len >= 8) {
        *prog = fb_vec_ptr(&v);
        *prog_size = v.len;
        return true;
    }
    *err_offset = b.failed ? b.err_offset : 0;
    *err_what = b.failed ? b.err_what : "bundled program holds no program";
    return false;
}
