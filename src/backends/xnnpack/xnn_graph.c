/* Reading and verifying an XNNPACK payload (see xnn_graph.h), and planning its memory. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backends/xnnpack/xnn_graph.h"
#include "backends/xnnpack/xnn_ops.h"
#include "format/flatbuf.h"
#include "runtime/error.h"

/* Field slots (vtable order) of the schema's tables. */
enum { G_VERSION = 0, G_XNODES, G_XVALUES, G_NUM_EXTERNS, G_INPUT_IDS, G_OUTPUT_IDS,
       G_CONSTANT_BUFFER, G_MEM_BUFFER_SIZES, G_CONSTANT_DATA };
enum { XNODE_TYPE = 0, XNODE_UNION, XNODE_DEBUG, XNODE_MINMAX };
enum { XVALUE_TYPE = 0, XVALUE_UNION };
enum { TV_DATATYPE = 0, TV_NUM_DIMS, TV_DIMS, TV_CONSTANT_IDX, TV_EXTERNAL_ID, TV_FLAGS,
       TV_ID_OUT, TV_DQ_DATATYPE };
enum { QTV_TENSOR = 0, QTV_PARAMS_TYPE, QTV_PARAMS };
enum { CDO_OFFSET = 0, CDO_SIZE, CDO_NAMED_KEY };

static const char *const kind_names[XN_KIND_COUNT] = {
    "invalid", "Add", "FullyConnected", "Softmax", "Sigmoid", "StaticTranspose", "Clamp",
    "Conv2d", "Div", "StaticResizeBilinear2D", "StaticConstantPad", "AvgPooling2d", "Minimum",
    "DepthwiseConv2d", "MaxPooling2d", "Multiply", "Subtract", "Floor", "Convert",
    "GlobalAvgPooling2d", "StaticReshape", "ArgMaxPooling2d", "SquareRoot", "Ceiling",
    "Hardswish", "LeakyReLU", "Maximum", "Negate", "Square", "ELU", "Abs", "PReLU",
    "Concatenate2", "Concatenate3", "Concatenate4", "StaticSlice", "ScaledDotProductAttention",
    "BatchMatrixMultiply", "Concatenate5", "ConvTranspose2d", "ReciprocalSquareRoot", "Log",
    "Gelu", "Tanh", "Exp", "Sin"};

const char *xnn_node_kind_name(int kind) {
    return kind > 0 && kind < XN_KIND_COUNT ? kind_names[kind] : "unknown";
}

const char *xnn_datatype_name(int dt) {
    static const char *const n[] = {"invalid", "fp32",   "fp16",    "qint8",  "quint8", "qint32",
                                    "qcint8",  "qcint32", "qcint4", "qdint8", "qbint4"};
    return dt >= 0 && dt <= XDT_QBINT4 ? n[dt] : "unknown";
}

size_t xnn_dtype_bytes(int dt, int64_t n) {
    switch (dt) {
    case XDT_FP32: case XDT_QINT32: case XDT_QCINT32: return (size_t)n * 4;
    case XDT_FP16: return (size_t)n * 2;
    case XDT_QINT8: case XDT_QUINT8: case XDT_QCINT8: case XDT_QDINT8: return (size_t)n;
    case XDT_QCINT4: case XDT_QBINT4: return (size_t)(n + 1) / 2;
    default: return 0;
    }
}

void *xnn_alloc_bytes(xnn_alloc *a, size_t size, size_t align) {
    size_t pad = align - 1;
    void *p = a->ctx->alloc(a->ctx->alloc_self, size ? size : 1, align);
    if (p)
        a->used += size + pad;
    return p;
}

void *xnn_alloc_bulk(xnn_alloc *a, size_t size, size_t align) {
    if (a->measure) {
        a->used = size > SIZE_MAX / 2 - a->used ? SIZE_MAX / 2 : a->used + size + align - 1;
        return (void *)(uintptr_t)align;
    }
    return xnn_alloc_bytes(a, size, align);
}

void *xnn_alloc_zeroed(xnn_alloc *a, size_t size, size_t align) {
    void *p = xnn_alloc_bytes(a, size, align);
    if (p)
        memset(p, 0, size);
    return p;
}

#define BAD(...) etch_err(ETCH_ERR_INVALID_PROGRAM, "XnnpackBackend payload: " __VA_ARGS__)
#define FB_OK(fb, what)                                                                   \
    do {                                                                                  \
        if ((fb)->failed)                                                                 \
            return BAD("%s: %s at flatbuffer byte %zu", what, (fb)->err_what,             \
                       (fb)->err_offset);                                                 \
    } while (0)

typedef struct reader {
    const uint8_t *blob;
    size_t size;
    fb_buf fb;
    fb_table root;
    bool has_header;
    uint64_t const_off, const_size; /* the constant data section, in blob bytes */
    uint32_t *id_map;               /* id_out -> value index */
    uint32_t nids;
    /* dq_datatype (the 2023 dynamic-quantization form): an fp32 external input whose readers
     * see its per-token int8 quantization; dq[value] is that internal qdint8 value
     * (XNN_INVALID_ID: none), made by a Convert node placed first (ndq of them) */
    uint32_t *dq;
    uint32_t ndq;
    const etch_backend_init_context *ctx;
    xnn_alloc *a;
} reader;

static bool mul_ok(int64_t a, int64_t b, int64_t *out) {
    if (a < 0 || b < 0 || (b && a > INT64_MAX / b))
        return false;
    *out = a * b;
    return true;
}

bool xnn_same_dims(const xnn_value *a, const xnn_value *b) {
    if (a->rank != b->rank)
        return false;
    for (uint32_t d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d])
            return false;
    return true;
}

int64_t xnn_numel(const int64_t *dims, uint32_t rank) {
    int64_t n = 1;
    for (uint32_t i = 0; i < rank; i++)
        n *= dims[i];
    return n;
}

static etch_status read_header(reader *r) {
    if (r->size >= 8 && memcmp(r->blob + 4, "XH00", 4) == 0) {
        if (r->size < 30)
            return BAD("header truncated (%zu bytes)", r->size);
        uint32_t hlen = fb_rd_u16(r->blob + 8);
        if (hlen < 30 || hlen > r->size)
            return BAD("header length %u is not in [30, %zu]", hlen, r->size);
        uint64_t fo = fb_rd_u32(r->blob + 10), fs = fb_rd_u32(r->blob + 14);
        uint64_t co = fb_rd_u32(r->blob + 18), cs = fb_rd_u64(r->blob + 22);
        if (fo < hlen || fo > r->size || fs > r->size - fo || fs < 8)
            return BAD("flatbuffer range [%llu, +%llu) is outside the %zu-byte payload",
                       (unsigned long long)fo, (unsigned long long)fs, r->size);
        if (co > r->size || cs > r->size - co)
            return BAD("constant data range [%llu, +%llu) is outside the %zu-byte payload",
                       (unsigned long long)co, (unsigned long long)cs, r->size);
        if ((fo & 3) != 0)
            return BAD("flatbuffer offset %llu is not 4-byte aligned", (unsigned long long)fo);
        r->has_header = true;
        r->const_off = co;
        r->const_size = cs;
        fb_init(&r->fb, r->blob + fo, (size_t)fs);
    } else {
        if (r->size < 8)
            return BAD("%zu bytes: too short for a header or a flatbuffer", r->size);
        fb_init(&r->fb, r->blob, r->size);
    }
    const uint8_t *id = r->fb.data + 4;
    if (memcmp(id, "XN00", 4) != 0 && memcmp(id, "XN01", 4) != 0) {
        char s[5];
        for (int i = 0; i < 4; i++)
            s[i] = id[i] >= 32 && id[i] < 127 ? (char)id[i] : '?';
        s[4] = 0;
        return etch_err(ETCH_ERR_INCOMPATIBLE_VERSION,
                        "XnnpackBackend payload: flatbuffer identifier '%s' is not XN00 or XN01 "
                        "(not an XNNPACK graph, or a schema version this build does not know)",
                        s);
    }
    if (!fb_root(&r->fb, &r->root))
        FB_OK(&r->fb, "XNNGraph root");
    return ETCH_OK;
}

static etch_status read_constant(reader *r, uint32_t vi, xnn_value *v, uint32_t idx) {
    const uint8_t *data = NULL;
    uint64_t size = 0;
    fb_vec cd, cb;
    if (fb_vec_field(&r->root, G_CONSTANT_DATA, 4, 4, &cd) && cd.len) {
        if (idx >= cd.len)
            return BAD("value %u: constant index %u is past the %u constant_data entries", vi,
                       idx, cd.len);
        fb_table e;
        fb_vec_table(&cd, idx, &e);
        const char *key = NULL;
        uint32_t klen = 0;
        uint64_t off = fb_u(&e, CDO_OFFSET, 8, 0);
        size = fb_u(&e, CDO_SIZE, 8, 0);
        fb_str_field(&e, CDO_NAMED_KEY, &key, &klen);
        FB_OK(&r->fb, "constant_data");
        if (key && klen) {
            if (!r->ctx->named_data) {
                v->is_constant = true; /* measuring (pool_size): named data is not read */
                return ETCH_OK;
            }
            const void *nd = NULL;
            size_t nsize = 0;
            if (r->ctx->named_data(r->ctx->named_self, key, klen, &nd, &nsize) != ETCH_OK)
                return etch_err(ETCH_ERR_NOT_FOUND,
                                "XnnpackBackend payload: value %u: named data '%.*s' is in "
                                "neither the program nor its external data",
                                vi, (int)klen, key);
            data = (const uint8_t *)nd;
            if (size == 0 || size > nsize)
                size = nsize;
        } else {
            if (!r->has_header)
                return BAD("value %u: constant_data offsets need the XH00 header", vi);
            if (off > r->const_size || size > r->const_size - off)
                return BAD("value %u: constant %u [%llu, +%llu) is outside the %llu-byte "
                           "constant data",
                           vi, idx, (unsigned long long)off, (unsigned long long)size,
                           (unsigned long long)r->const_size);
            data = r->blob + r->const_off + off;
        }
    } else if (fb_vec_field(&r->root, G_CONSTANT_BUFFER, 4, 4, &cb) && cb.len) {
        if (idx >= cb.len)
            return BAD("value %u: constant index %u is past the %u constant buffers", vi, idx,
                       cb.len);
        fb_table b;
        fb_vec st;
        fb_vec_table(&cb, idx, &b);
        fb_vec_field(&b, 0, 1, 1, &st);
        FB_OK(&r->fb, "constant_buffer");
        data = st.pos ? fb_vec_ptr(&st) : NULL;
        size = st.len;
    } else {
        return BAD("value %u names constant %u but the graph has no constant data", vi, idx);
    }
    int64_t n = xnn_numel(v->bound, v->rank);
    size_t need = xnn_dtype_bytes(v->dtype, n);
    if (v->dtype == XDT_QCINT4 || v->dtype == XDT_QBINT4) {
        /* packed along the last dim, each row padded to whole bytes */
        int64_t last = v->rank ? v->bound[v->rank - 1] : 1;
        need = (size_t)(last ? n / last : 0) * (size_t)((last + 1) / 2);
    }
    if (!data || size < need)
        return BAD("value %u: constant %u holds %llu bytes, its %s shape needs %zu", vi, idx,
                   (unsigned long long)size, xnn_datatype_name(v->dtype), need);
    v->constant = data;
    v->constant_size = (size_t)size;
    v->is_constant = true;
    return ETCH_OK;
}

static etch_status read_quant(reader *r, uint32_t vi, xnn_value *v, const fb_table *qt) {
    unsigned type = (unsigned)fb_u(qt, QTV_PARAMS_TYPE, 1, 0);
    fb_table p;
    if (!fb_table_field(qt, QTV_PARAMS, &p) && type != 0)
        return BAD("value %u: quantization parameters missing", vi);
    xnn_quant *q = &v->q;
    fb_vec sc = {0};
    switch (type) {
    case XQ_PER_TENSOR:
        q->kind = XQ_PER_TENSOR;
        {
            uint32_t bits = (uint32_t)fb_u(&p, 0, 4, 0);
            memcpy(&q->scale, &bits, 4);
        }
        q->zero_point = (int32_t)fb_i(&p, 1, 4, 0);
        if (!(q->scale > 0) || !isfinite(q->scale))
            return BAD("value %u: per-tensor scale %g is not a positive finite number", vi,
                       (double)q->scale);
        break;
    case XQ_PER_CHANNEL:
    case XQ_BLOCKWISE:
        q->kind = (int)type;
        q->channel_dim = (int32_t)fb_i(&p, 1, 4, 0);
        fb_vec_field(&p, 0, 4, 4, &sc);
        if (type == XQ_BLOCKWISE)
            q->group_size = (int32_t)fb_i(&p, 2, 4, 0);
        break;
    case XQ_PER_TOKEN:
        q->kind = XQ_PER_TOKEN;
        q->num_nonbatch_dims = (int32_t)fb_i(&p, 0, 4, 0);
        break;
    default:
        return BAD("value %u: unknown quantization kind %u", vi, type);
    }
    FB_OK(&r->fb, "quantization parameters");
    if (type == XQ_PER_CHANNEL || type == XQ_BLOCKWISE) {
        if (q->channel_dim < 0 || (uint32_t)q->channel_dim >= v->rank)
            return BAD("value %u: channel_dim %d is not a dim of its rank-%u shape", vi,
                       q->channel_dim, v->rank);
        int64_t ch = v->bound[q->channel_dim], need = ch;
        if (type == XQ_BLOCKWISE) {
            int64_t k = v->rank >= 2 ? v->bound[q->channel_dim == 0 ? 1 : 0] : 1;
            if (v->rank != 2 || q->group_size <= 0 || k % q->group_size != 0)
                return BAD("value %u: blockwise group size %d does not divide its input "
                           "channels (rank %u)",
                           vi, q->group_size, v->rank);
            need = ch * (k / q->group_size);
        }
        fb_vec bf = {0};
        bool have_f = sc.pos && sc.len, have_bf = false;
        if (!have_f && type == XQ_BLOCKWISE)
            have_bf = fb_vec_field(&p, 3, 2, 2, &bf) && bf.len;
        FB_OK(&r->fb, "scales");
        uint32_t len = have_f ? sc.len : have_bf ? bf.len : 0;
        if ((int64_t)len != need)
            return BAD("value %u: %u scales for %lld channels x groups", vi, len,
                       (long long)need);
        float *s = (float *)xnn_alloc_bytes(r->a, (size_t)len * 4, 16);
        if (!s)
            return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED,
                            "XnnpackBackend: method pool too small for value %u's scales", vi);
        for (uint32_t i = 0; i < len; i++) {
                uint32_t bits = have_f ? fb_vec_u32(&sc, i)
                                       : (uint32_t)fb_rd_u16(fb_vec_ptr(&bf) + 2 * (size_t)i)
                                             << 16;
                memcpy(&s[i], &bits, 4);
                if (!(s[i] > 0) || !isfinite(s[i]))
                    return BAD("value %u: scale %u is %g, not a positive finite number", vi, i,
                               (double)s[i]);
            }
        q->scales = s;
        q->num_scales = len;
    }
    return ETCH_OK;
}

static bool dtype_quantized(int dt) { return dt >= XDT_QINT8 && dt <= XDT_QBINT4; }

static etch_status read_values(reader *r, xnn_graph *g) {
    fb_vec xv;
    if (!fb_vec_field(&r->root, G_XVALUES, 4, 4, &xv)) {
        FB_OK(&r->fb, "xvalues");
        return BAD("graph has no xvalues");
    }
    xnn_alloc *a = r->a;
    uint32_t ndq = 0;
    for (uint32_t i = 0; i < xv.len; i++) {
        fb_table x, u, tv;
        fb_vec_table(&xv, i, &x);
        if (fb_u(&x, XVALUE_TYPE, 1, 0) == 1 && fb_table_field(&x, XVALUE_UNION, &u)) {
            tv = u;
            if (fb_i(&tv, TV_DQ_DATATYPE, 2, 0) != XDT_INVALID)
                ndq++;
        }
    }
    FB_OK(&r->fb, "xvalues");
    g->nvalues = xv.len + ndq;
    g->values =
        (xnn_value *)xnn_alloc_zeroed(a, sizeof(xnn_value) * (g->nvalues ? g->nvalues : 1), 16);
    r->id_map = (uint32_t *)xnn_alloc_bytes(a, sizeof(uint32_t) * (xv.len ? xv.len : 1), 4);
    r->dq = (uint32_t *)xnn_alloc_bytes(a, sizeof(uint32_t) * (xv.len ? xv.len : 1), 4);
    r->nids = xv.len;
    if (!g->values || !r->id_map || !r->dq)
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED,
                        "XnnpackBackend: method pool too small for %u values", xv.len);
    for (uint32_t i = 0; i < xv.len; i++)
        r->id_map[i] = r->dq[i] = XNN_INVALID_ID;
    for (uint32_t i = 0; i < xv.len; i++) {
        xnn_value *v = &g->values[i];
        fb_table x, u, tv;
        fb_vec_table(&xv, i, &x);
        unsigned type = (unsigned)fb_u(&x, XVALUE_TYPE, 1, 0);
        if (!fb_table_field(&x, XVALUE_UNION, &u)) {
            FB_OK(&r->fb, "xvalue");
            return BAD("value %u is empty", i);
        }
        if (type == 1) {
            tv = u;
        } else if (type == 2) {
            if (!fb_table_field(&u, QTV_TENSOR, &tv)) {
                FB_OK(&r->fb, "quantized value");
                return BAD("value %u: quantized value without a tensor", i);
            }
        } else {
            return BAD("value %u: unknown value kind %u", i, type);
        }
        v->dtype = (int)fb_i(&tv, TV_DATATYPE, 2, 0);
        fb_vec dims;
        bool has_dims = fb_vec_field(&tv, TV_DIMS, 4, 4, &dims);
        uint32_t num_dims = (uint32_t)fb_u(&tv, TV_NUM_DIMS, 4, 0);
        uint32_t cidx = (uint32_t)fb_u(&tv, TV_CONSTANT_IDX, 4, 0);
        v->external_id = (uint32_t)fb_u(&tv, TV_EXTERNAL_ID, 4, XNN_INVALID_ID);
        v->flags = (uint32_t)fb_u(&tv, TV_FLAGS, 4, 0);
        uint32_t id = (uint32_t)fb_u(&tv, TV_ID_OUT, 4, 0);
        int dq_dtype = type == 1 ? (int)fb_i(&tv, TV_DQ_DATATYPE, 2, 0) : XDT_INVALID;
        FB_OK(&r->fb, "tensor value");
        if (v->dtype <= XDT_INVALID || v->dtype > XDT_QBINT4)
            return etch_err(ETCH_ERR_NOT_SUPPORTED,
                            "XnnpackBackend payload: value %u: datatype %d is not one this "
                            "backend knows",
                            i, v->dtype);
        uint32_t rank = has_dims ? dims.len : 0;
        if (rank != num_dims)
            return BAD("value %u: num_dims %u but %u dims", i, num_dims, rank);
        if (rank > XNN_MAX_DIMS)
            return BAD("value %u: rank %u is above XNNPACK's %d", i, rank, XNN_MAX_DIMS);
        v->rank = rank;
        int64_t n = 1;
        for (uint32_t d = 0; d < rank; d++) {
            v->bound[d] = v->dims[d] = fb_vec_u32(&dims, d);
            if (!mul_ok(n, v->bound[d], &n) || n > ((int64_t)1 << 40))
                return BAD("value %u: shape too large", i);
        }
        if (id >= r->nids || r->id_map[id] != XNN_INVALID_ID)
            return BAD("value %u: id %u is out of range or used twice", i, id);
        r->id_map[id] = i;
        v->offset = -1;
        v->producer = v->last_use = -1;
        v->alias_of = -1;
        if (type == 2) {
            etch_status st = read_quant(r, i, v, &u);
            if (st)
                return st;
        } else if (dtype_quantized(v->dtype)) {
            return BAD("value %u: %s without quantization parameters", i,
                       xnn_datatype_name(v->dtype));
        }
        if (v->dtype == XDT_QDINT8 && v->q.kind != XQ_PER_TOKEN)
            return BAD("value %u: qdint8 needs per-token dynamic parameters", i);
        if ((v->dtype == XDT_QCINT8 || v->dtype == XDT_QCINT32 || v->dtype == XDT_QCINT4) &&
            v->q.kind != XQ_PER_CHANNEL)
            return BAD("value %u: %s needs per-channel parameters", i,
                       xnn_datatype_name(v->dtype));
        if (v->dtype == XDT_QBINT4 && v->q.kind != XQ_BLOCKWISE)
            return BAD("value %u: qbint4 needs blockwise parameters", i);
        if ((v->dtype == XDT_QINT8 || v->dtype == XDT_QUINT8 || v->dtype == XDT_QINT32) &&
            v->q.kind != XQ_PER_TENSOR)
            return BAD("value %u: %s needs per-tensor parameters", i,
                       xnn_datatype_name(v->dtype));
        if (v->q.kind == XQ_PER_TOKEN &&
            (v->q.num_nonbatch_dims < 0 || (uint32_t)v->q.num_nonbatch_dims > rank))
            return BAD("value %u: num_nonbatch_dims %d for rank %u", i, v->q.num_nonbatch_dims,
                       rank);
        if ((v->dtype == XDT_QCINT4 || v->dtype == XDT_QBINT4) && rank != 2 &&
            cidx != 0)
            return BAD("value %u: 4-bit constants must be 2-D", i);
        if (cidx != 0) {
            if (v->flags & (XNN_FLAG_EXTERNAL_INPUT | XNN_FLAG_EXTERNAL_OUTPUT))
                return BAD("value %u is both a constant and external", i);
            etch_status st = read_constant(r, i, v, cidx);
            if (st)
                return st;
        }
        if (dq_dtype != XDT_INVALID) { /* as ExecuTorch's runtime defines it */
            if (dq_dtype != XDT_QINT8)
                return etch_err(ETCH_ERR_NOT_SUPPORTED, "XnnpackBackend payload: value %u: "
                                "dynamic quantization to %s (only qint8 is)", i,
                                xnn_datatype_name(dq_dtype));
            if (!(v->flags & XNN_FLAG_EXTERNAL_INPUT) || cidx != 0 ||
                (v->dtype != XDT_FP32 && v->dtype != XDT_FP16) || rank < 1)
                return BAD("value %u: dynamic quantization of anything but a float external "
                           "input", i);
            if (ndq == r->ndq)
                return BAD("value %u: more dynamically quantized values than counted", i);
            uint32_t j = xv.len + r->ndq++;
            xnn_value *d = &g->values[j];
            d->dtype = XDT_QDINT8;
            d->rank = rank;
            memcpy(d->bound, v->bound, sizeof d->bound);
            memcpy(d->dims, v->dims, sizeof d->dims);
            d->external_id = XNN_INVALID_ID;
            d->q.kind = XQ_PER_TOKEN;
            d->q.num_nonbatch_dims = 1;
            d->offset = -1;
            d->producer = d->last_use = d->alias_of = -1;
            r->dq[i] = j;
        }
    }
    return ETCH_OK;
}

static etch_status map_id(reader *r, uint32_t node, const char *what, uint32_t id,
                          uint32_t *out) {
    if (id >= r->nids || r->id_map[id] == XNN_INVALID_ID)
        return BAD("node %u: %s id %u names no value", node, what, id);
    *out = r->id_map[id];
    if (strcmp(what, "output") != 0 && r->dq[*out] != XNN_INVALID_ID)
        *out = r->dq[*out]; /* readers of a dq_datatype input see its quantization */
    return ETCH_OK;
}

static float f32_field(const fb_table *t, unsigned slot, float def) {
    if (!fb_has(t, slot))
        return def;
    uint32_t bits = (uint32_t)fb_u(t, slot, 4, 0);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static etch_status u32_list(reader *r, const fb_table *t, unsigned slot, uint32_t node,
                            const char *what, uint32_t *out, uint32_t *len) {
    fb_vec v;
    if (!fb_vec_field(t, slot, 4, 4, &v)) {
        FB_OK(&r->fb, what);
        *len = 0;
        return ETCH_OK;
    }
    if (v.len > XNN_MAX_DIMS)
        return BAD("node %u: %s has %u entries (at most %d)", node, what, v.len, XNN_MAX_DIMS);
    for (uint32_t i = 0; i < v.len; i++)
        out[i] = fb_vec_u32(&v, i);
    *len = v.len;
    return ETCH_OK;
}

#define U(slot) ((uint32_t)fb_u(&t, (slot), 4, 0))

static etch_status read_node(reader *r, uint32_t i, const fb_table *x, xnn_node *n) {
    int kind = (int)fb_u(x, XNODE_TYPE, 1, 0);
    fb_table t, mm;
    n->index = i;
    n->kind = kind;
    if (kind <= 0 || kind >= XN_KIND_COUNT)
        return etch_err(ETCH_ERR_NOT_SUPPORTED,
                        "XnnpackBackend payload: node %u: node kind %d is not one this backend "
                        "knows (it knows 1..%d, up to Sin)",
                        i, kind, XN_KIND_COUNT - 1);
    if (!fb_table_field(x, XNODE_UNION, &t)) {
        FB_OK(&r->fb, "xnode");
        return BAD("node %u (%s) has no parameters", i, kind_names[kind]);
    }
    n->out_min = -INFINITY;
    n->out_max = INFINITY;
    if (fb_table_field(x, XNODE_MINMAX, &mm)) {
        n->out_min = f32_field(&mm, 0, -INFINITY);
        n->out_max = f32_field(&mm, 1, INFINITY);
        if (isnan(n->out_min) || isnan(n->out_max) || n->out_min > n->out_max)
            return BAD("node %u (%s): output range [%g, %g] is empty", i, kind_names[kind],
                       (double)n->out_min, (double)n->out_max);
    }
    uint32_t ids[5] = {0}, oids[2] = {0};
    uint32_t nin = 1, nout = 1;
    etch_status st = ETCH_OK;
    switch (kind) {
    case XN_ADD: case XN_DIV: case XN_MINIMUM: case XN_MULTIPLY: case XN_SUBTRACT:
    case XN_MAXIMUM: case XN_PRELU: case XN_BMM:
        ids[0] = U(0); ids[1] = U(1); oids[0] = U(2); n->flags = U(3); nin = 2;
        break;
    case XN_SOFTMAX: case XN_SIGMOID: case XN_CLAMP: case XN_FLOOR: case XN_CONVERT:
    case XN_GLOBAL_AVG_POOL: case XN_SQRT: case XN_CEILING: case XN_HARDSWISH: case XN_NEGATE:
    case XN_SQUARE: case XN_ABS: case XN_RSQRT: case XN_LOG: case XN_GELU: case XN_TANH:
    case XN_EXP: case XN_SIN:
        ids[0] = U(0); oids[0] = U(1); n->flags = U(2);
        break;
    case XN_FULLY_CONNECTED:
        ids[0] = U(0); ids[1] = U(1); ids[2] = U(2); oids[0] = U(3); n->flags = U(4); nin = 3;
        break;
    case XN_STATIC_TRANSPOSE: {
        uint32_t len;
        if ((st = u32_list(r, &t, 1, i, "perm", n->perm, &len)))
            return st;
        n->num_dims = len;
        ids[0] = U(2); oids[0] = U(3); n->flags = U(4);
        break;
    }
    case XN_RESIZE_BILINEAR:
        n->new_h = U(0); n->new_w = U(1); ids[0] = U(2); oids[0] = U(3); n->flags = U(4);
        break;
    case XN_CONSTANT_PAD: {
        uint32_t l1, l2;
        if ((st = u32_list(r, &t, 0, i, "pre_paddings", n->pre, &l1)) ||
            (st = u32_list(r, &t, 1, i, "post_paddings", n->post, &l2)))
            return st;
        if (l1 != l2)
            return BAD("node %u (StaticConstantPad): %u pre and %u post paddings", i, l1, l2);
        n->num_dims = l1;
        n->alpha = f32_field(&t, 2, 0.0f);
        ids[0] = U(3); oids[0] = U(4); n->flags = U(5);
        break;
    }
    case XN_AVG_POOL: case XN_MAX_POOL:
        n->pad[0] = U(0); n->pad[1] = U(1); n->pad[2] = U(2); n->pad[3] = U(3);
        n->kh = U(4); n->kw = U(5); n->sh = U(6); n->sw = U(7); n->dh = U(8); n->dw = U(9);
        ids[0] = U(10); oids[0] = U(11); n->flags = U(12);
        if (n->dh == 0) n->dh = 1;
        if (n->dw == 0) n->dw = 1;
        break;
    case XN_ARGMAX_POOL:
        n->pad[0] = U(0); n->pad[1] = U(1); n->pad[2] = U(2); n->pad[3] = U(3);
        n->kh = U(4); n->kw = U(5); n->sh = n->kh; n->sw = n->kw; n->dh = n->dw = 1;
        ids[0] = U(6); oids[0] = U(7); oids[1] = U(8); n->flags = U(9); nout = 2;
        break;
    case XN_CONV2D: case XN_DEPTHWISE_CONV2D: case XN_CONV_TRANSPOSE2D:
        n->pad[0] = U(0); n->pad[1] = U(1); n->pad[2] = U(2); n->pad[3] = U(3);
        n->kh = U(4); n->kw = U(5); n->sh = U(6); n->sw = U(7); n->dh = U(8); n->dw = U(9);
        n->gic = U(10); n->goc = U(11); n->groups = U(12); n->adj_h = U(13); n->adj_w = U(14);
        ids[0] = U(15); ids[1] = U(16); ids[2] = U(17); oids[0] = U(18); n->flags = U(19);
        nin = 3;
        break;
    case XN_STATIC_RESHAPE: {
        uint32_t tmp[XNN_MAX_DIMS], len;
        if ((st = u32_list(r, &t, 1, i, "new_shape", tmp, &len)))
            return st;
        n->num_dims = len;
        for (uint32_t d = 0; d < len; d++)
            n->shape[d] = tmp[d];
        ids[0] = U(2); oids[0] = U(3); n->flags = U(4);
        break;
    }
    case XN_STATIC_SLICE: {
        uint32_t o[XNN_MAX_DIMS], s[XNN_MAX_DIMS], l1, l2;
        if ((st = u32_list(r, &t, 1, i, "offsets", o, &l1)) ||
            (st = u32_list(r, &t, 2, i, "sizes", s, &l2)))
            return st;
        if (l1 != l2)
            return BAD("node %u (StaticSlice): %u offsets and %u sizes", i, l1, l2);
        n->num_dims = l1;
        for (uint32_t d = 0; d < l1; d++) {
            n->offsets[d] = o[d];
            n->shape[d] = s[d];
        }
        ids[0] = U(3); oids[0] = U(4); n->flags = U(5);
        break;
    }
    case XN_LEAKY_RELU:
        n->alpha = f32_field(&t, 0, 0.01f);
        ids[0] = U(1); oids[0] = U(2); n->flags = U(3);
        break;
    case XN_ELU:
        n->alpha = f32_field(&t, 0, 1.0f);
        ids[0] = U(1); oids[0] = U(2); n->flags = U(3);
        break;
    case XN_CONCAT2: case XN_CONCAT3: case XN_CONCAT4: case XN_CONCAT5:
        n->axis = U(0);
        nin = kind == XN_CONCAT5 ? 5 : (uint32_t)(kind - XN_CONCAT2 + 2);
        for (uint32_t k = 0; k < nin && k < 4; k++)
            ids[k] = U(1 + k);
        if (nin == 5)
            ids[4] = U(7);
        oids[0] = U(5); n->flags = U(6);
        break;
    case XN_SDPA:
        ids[0] = U(0); ids[1] = U(1); ids[2] = U(2); ids[3] = U(3); ids[4] = U(4);
        oids[0] = U(5); n->flags = U(6); nin = 5;
        break;
    default:
        break;
    }
    FB_OK(&r->fb, kind_names[kind]);
    n->nin = nin;
    n->nout = nout;
    for (uint32_t k = 0; k < nin; k++) {
        /* an absent optional input (bias) is XNN_INVALID_VALUE_ID */
        bool optional = ((kind == XN_FULLY_CONNECTED || kind == XN_CONV2D ||
                          kind == XN_DEPTHWISE_CONV2D || kind == XN_CONV_TRANSPOSE2D) &&
                         k == 2);
        if (optional && ids[k] == XNN_INVALID_ID) {
            n->in[k] = XNN_INVALID_ID;
            continue;
        }
        static const char *const names[5] = {"input 1", "input 2", "input 3", "input 4",
                                             "input 5"};
        if ((st = map_id(r, i, names[k], ids[k], &n->in[k])))
            return st;
    }
    for (uint32_t k = 0; k < nout; k++)
        if ((st = map_id(r, i, "output", oids[k], &n->out[k])))
            return st;
    return ETCH_OK;
}

static int cmp_ext(const xnn_graph *g, uint32_t a, uint32_t b) {
    uint32_t x = g->values[a].external_id, y = g->values[b].external_id;
    return x < y ? -1 : x > y;
}

static etch_status read_externals(reader *r, xnn_graph *g, unsigned slot, bool input) {
    fb_vec ids;
    const char *what = input ? "input_ids" : "output_ids";
    if (!fb_vec_field(&r->root, slot, 4, 4, &ids))
        FB_OK(&r->fb, what);
    uint32_t n = ids.pos ? ids.len : 0;
    uint32_t *list = (uint32_t *)xnn_alloc_bytes(r->a, sizeof(uint32_t) * (n ? n : 1), 4);
    if (!list)
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "XnnpackBackend: pool too small");
    for (uint32_t k = 0; k < n; k++) {
        uint32_t vi;
        uint32_t id = fb_vec_u32(&ids, k);
        if (id >= r->nids || r->id_map[id] == XNN_INVALID_ID)
            return BAD("%s[%u] = %u names no value", what, k, id);
        vi = r->id_map[id];
        xnn_value *v = &g->values[vi];
        if (!(v->flags & (input ? XNN_FLAG_EXTERNAL_INPUT : XNN_FLAG_EXTERNAL_OUTPUT)))
            return BAD("%s[%u]: value %u is not flagged external %s", what, k, vi,
                       input ? "input" : "output");
        if (v->is_constant)
            return BAD("%s[%u]: value %u is a constant", what, k, vi);
        for (uint32_t j = 0; j < k; j++)
            if (list[j] == vi)
                return BAD("%s lists value %u twice", what, vi);
        /* insertion by external id: the DelegateCall's arguments come in that order */
        uint32_t j = k;
        while (j > 0 && cmp_ext(g, list[j - 1], vi) > 0) {
            list[j] = list[j - 1];
            j--;
        }
        list[j] = vi;
    }
    if (input) {
        g->inputs = list;
        g->ninputs = n;
    } else {
        g->outputs = list;
        g->noutputs = n;
    }
    return ETCH_OK;
}

/* Every value read is a constant, an external input or written by an earlier node; every
 * value is written at most once and never when it is a constant or an input. */
static etch_status check_order(xnn_graph *g) {
    for (uint32_t i = 0; i < g->nnodes; i++) {
        xnn_node *n = &g->nodes[i];
        for (uint32_t k = 0; k < n->nin; k++) {
            if (n->in[k] == XNN_INVALID_ID)
                continue;
            xnn_value *v = &g->values[n->in[k]];
            if (!v->is_constant && !(v->flags & XNN_FLAG_EXTERNAL_INPUT) && v->producer < 0)
                return BAD("node %u (%s) reads value %u before any node writes it (graph not "
                           "in order, or cyclic)",
                           n->index, kind_names[n->kind], n->in[k]);
            v->last_use = (int32_t)i;
        }
        for (uint32_t k = 0; k < n->nout; k++) {
            xnn_value *v = &g->values[n->out[k]];
            if (v->is_constant || (v->flags & XNN_FLAG_EXTERNAL_INPUT))
                return BAD("node %u (%s) writes value %u, a constant or graph input",
                           n->index, kind_names[n->kind], n->out[k]);
            if (v->producer >= 0)
                return BAD("node %u (%s) writes value %u, already written by node %d",
                           n->index, kind_names[n->kind], n->out[k], v->producer);
            for (uint32_t j = 0; j < n->nin; j++)
                if (n->in[j] == n->out[k])
                    return BAD("node %u (%s) reads the value it writes", n->index,
                               kind_names[n->kind]);
            v->producer = (int32_t)i;
        }
    }
    for (uint32_t k = 0; k < g->noutputs; k++)
        if (g->values[g->outputs[k]].producer < 0 &&
            !(g->values[g->outputs[k]].flags & XNN_FLAG_EXTERNAL_INPUT))
            return BAD("graph output value %u is never written", g->outputs[k]);
    return ETCH_OK;
}

/* Offsets for the intermediates: largest first, each at the lowest offset that overlaps no
 * placed value whose lifetime [producer, last_use] meets its own. */
static size_t plan_arena(xnn_graph *g, uint32_t *order) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < g->nvalues; i++) {
        xnn_value *v = &g->values[i];
        if (v->last_use < v->producer)
            v->last_use = v->producer;
    }
    /* an alias's lifetime and size go to the value whose storage it shares (aliases point to
     * values written before them: resolved in node order) */
    for (uint32_t i = 0; i < g->nnodes; i++) {
        xnn_value *v = &g->values[g->nodes[i].out[0]];
        if (v->alias_of < 0)
            continue;
        xnn_value *r = &g->values[v->alias_of];
        while (r->alias_of >= 0)
            r = &g->values[r->alias_of];
        if (v->last_use > r->last_use)
            r->last_use = v->last_use;
        if (v->capacity > r->capacity)
            r->capacity = v->capacity;
    }
    for (uint32_t i = 0; i < g->nvalues; i++) {
        xnn_value *v = &g->values[i];
        if (v->producer >= 0 && !(v->flags & XNN_FLAG_EXTERNAL_OUTPUT) && v->capacity &&
            v->alias_of < 0)
            order[n++] = i;
    }
    for (uint32_t i = 1; i < n; i++) { /* insertion sort, largest first */
        uint32_t x = order[i], j = i;
        while (j > 0 && g->values[order[j - 1]].capacity < g->values[x].capacity) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = x;
    }
    size_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        xnn_value *v = &g->values[order[i]];
        size_t size = (v->capacity + 63) & ~(size_t)63, off = 0;
        bool moved = true;
        while (moved) {
            moved = false;
            for (uint32_t j = 0; j < i; j++) {
                xnn_value *w = &g->values[order[j]];
                size_t wsize = (w->capacity + 63) & ~(size_t)63;
                if (w->last_use < v->producer || v->last_use < w->producer)
                    continue;
                if (off < (size_t)w->offset + wsize && (size_t)w->offset < off + size) {
                    off = (size_t)w->offset + wsize;
                    moved = true;
                }
            }
        }
        v->offset = (int64_t)off;
        if (off + size > total)
            total = off + size;
    }
    for (uint32_t i = 0; i < g->nvalues; i++) {
        xnn_value *v = &g->values[i];
        if (v->alias_of < 0)
            continue;
        const xnn_value *r = &g->values[v->alias_of];
        while (r->alias_of >= 0)
            r = &g->values[r->alias_of];
        v->offset = r->offset;
    }
    return total;
}

etch_status xnn_graph_load(const uint8_t *blob, size_t size, const etch_backend_init_context *ctx,
                           xnn_alloc *a, xnn_graph *g) {
    memset(g, 0, sizeof *g);
    reader r;
    memset(&r, 0, sizeof r);
    r.blob = blob;
    r.size = blob ? size : 0;
    r.ctx = ctx;
    r.a = a;
    etch_status st;
    if ((st = read_header(&r)))
        return st;
    if ((st = read_values(&r, g)))
        return st;
    fb_vec xn;
    if (!fb_vec_field(&r.root, G_XNODES, 4, 4, &xn))
        FB_OK(&r.fb, "xnodes");
    const uint32_t npayload = xn.pos ? xn.len : 0;
    g->nnodes = npayload + r.ndq;
    g->nodes = (xnn_node *)xnn_alloc_zeroed(a, sizeof(xnn_node) * (g->nnodes ? g->nnodes : 1), 16);
    if ((st = read_externals(&r, g, G_INPUT_IDS, true)) ||
        (st = read_externals(&r, g, G_OUTPUT_IDS, false)))
        return st;
    uint32_t *order = (uint32_t *)xnn_alloc_bytes(a, sizeof(uint32_t) * (g->nvalues + 1), 4);
    if (!g->nodes || !order)
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "XnnpackBackend: pool too small");
    /* the Convert nodes of dq_datatype inputs first, numbered after the payload's nodes */
    for (uint32_t i = 0, k = 0; i < r.nids && k < r.ndq; i++) {
        if (r.dq[i] == XNN_INVALID_ID)
            continue;
        xnn_node *n = &g->nodes[k];
        n->kind = XN_CONVERT;
        n->index = npayload + k++;
        n->in[0] = i;
        n->out[0] = r.dq[i];
        n->nin = n->nout = 1;
        n->out_min = -INFINITY;
        n->out_max = INFINITY;
    }
    for (uint32_t i = 0; i < npayload; i++) {
        fb_table x;
        fb_vec_table(&xn, i, &x);
        if ((st = read_node(&r, i, &x, &g->nodes[r.ndq + i])))
            return st;
    }
    if ((st = check_order(g)))
        return st;
    /* shapes at the bounds: checks every node and sizes every intermediate */
    if ((st = xnn_ops_prepare(g, a)))
        return st;
    g->arena_size = plan_arena(g, order);
    g->arena = (uint8_t *)xnn_alloc_bulk(a, g->arena_size, 64);
    g->scratch = (uint8_t *)xnn_alloc_bulk(a, g->scratch_size, 64);
    g->shaped_dims = (int64_t *)xnn_alloc_zeroed(
        a, sizeof(int64_t) * XNN_MAX_DIMS * (g->ninputs ? g->ninputs : 1), 8);
    g->shaped = false;
    if (!g->shaped_dims)
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "XnnpackBackend: pool too small");
    if (!g->arena || !g->scratch)
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED,
                        "XnnpackBackend: method pool too small for the graph's %zu bytes of "
                        "intermediates and %zu of scratch",
                        g->arena_size, g->scratch_size);
    for (uint32_t i = 0; i < g->nvalues && !a->measure; i++) {
        xnn_value *v = &g->values[i];
        if (v->offset >= 0)
            v->data = g->arena + v->offset;
        else if (v->constant)
            v->data = (uint8_t *)(uintptr_t)v->constant;
    }
    return ETCH_OK;
}
