#include <string.h>

#include "etch/tensor.h"
#include "runtime/error.h"

size_t etch_dtype_size(int d) {
    switch (d) {
    case ETCH_DTYPE_BYTE: case ETCH_DTYPE_CHAR: case ETCH_DTYPE_BOOL: case ETCH_DTYPE_QINT8:
    case ETCH_DTYPE_QUINT8: case ETCH_DTYPE_QUINT4X2: case ETCH_DTYPE_QUINT2X4:
    case ETCH_DTYPE_FLOAT8E5M2: case ETCH_DTYPE_FLOAT8E4M3FN: case ETCH_DTYPE_FLOAT8E5M2FNUZ:
    case ETCH_DTYPE_FLOAT8E4M3FNUZ:
        return 1;
    case ETCH_DTYPE_SHORT: case ETCH_DTYPE_HALF: case ETCH_DTYPE_BFLOAT16: case ETCH_DTYPE_BITS16:
    case ETCH_DTYPE_UINT16:
        return 2;
    case ETCH_DTYPE_INT: case ETCH_DTYPE_FLOAT: case ETCH_DTYPE_QINT32: case ETCH_DTYPE_UINT32:
        return 4;
    case ETCH_DTYPE_LONG: case ETCH_DTYPE_DOUBLE: case ETCH_DTYPE_UINT64:
        return 8;
    default:
        return 0;
    }
}

const char *etch_dtype_name(int d) {
    switch (d) {
    case ETCH_DTYPE_BYTE: return "Byte";
    case ETCH_DTYPE_CHAR: return "Char";
    case ETCH_DTYPE_SHORT: return "Short";
    case ETCH_DTYPE_INT: return "Int";
    case ETCH_DTYPE_LONG: return "Long";
    case ETCH_DTYPE_HALF: return "Half";
    case ETCH_DTYPE_FLOAT: return "Float";
    case ETCH_DTYPE_DOUBLE: return "Double";
    case ETCH_DTYPE_BOOL: return "Bool";
    case ETCH_DTYPE_QINT8: return "QInt8";
    case ETCH_DTYPE_QUINT8: return "QUInt8";
    case ETCH_DTYPE_QINT32: return "QInt32";
    case ETCH_DTYPE_BFLOAT16: return "BFloat16";
    case ETCH_DTYPE_QUINT4X2: return "QUInt4x2";
    case ETCH_DTYPE_QUINT2X4: return "QUInt2x4";
    case ETCH_DTYPE_BITS16: return "Bits16";
    case ETCH_DTYPE_FLOAT8E5M2: return "Float8_e5m2";
    case ETCH_DTYPE_FLOAT8E4M3FN: return "Float8_e4m3fn";
    case ETCH_DTYPE_FLOAT8E5M2FNUZ: return "Float8_e5m2fnuz";
    case ETCH_DTYPE_FLOAT8E4M3FNUZ: return "Float8_e4m3fnuz";
    case ETCH_DTYPE_UINT16: return "UInt16";
    case ETCH_DTYPE_UINT32: return "UInt32";
    case ETCH_DTYPE_UINT64: return "UInt64";
    default: return "Unknown";
    }
}

bool etch_dtype_is_valid(int d) { return etch_dtype_size(d) != 0; }

bool etch_dtype_is_floating(int d) {
    return d == ETCH_DTYPE_HALF || d == ETCH_DTYPE_FLOAT || d == ETCH_DTYPE_DOUBLE ||
           d == ETCH_DTYPE_BFLOAT16;
}

bool etch_dtype_is_integral(int d, bool include_bool) {
    switch (d) {
    case ETCH_DTYPE_BYTE: case ETCH_DTYPE_CHAR: case ETCH_DTYPE_SHORT: case ETCH_DTYPE_INT:
    case ETCH_DTYPE_LONG: case ETCH_DTYPE_UINT16: case ETCH_DTYPE_UINT32: case ETCH_DTYPE_UINT64:
        return true;
    case ETCH_DTYPE_BOOL:
        return include_bool;
    default:
        return false;
    }
}

int64_t etch_shape_extent(size_t dim, const int64_t *sizes) {
    int64_t n = 1;
    for (size_t i = 0; i < dim; i++) {
        if (sizes[i] < 0)
            return -1;
        int64_t f = sizes[i] ? sizes[i] : 1;
        if (n > INT64_MAX / 16 / f)
            return -1;
        n *= f;
    }
    return n;
}

void etch_tensor_update_strides(etch_tensor *t) {
    if (t->dim == 0)
        return;
    int64_t s = 1;
    for (int i = (int)t->dim - 1; i >= 0; i--) {
        uint8_t d = t->dim_order[i];
        t->strides[d] = s;
        s *= t->sizes[d] == 0 ? 1 : t->sizes[d];
    }
}

etch_status etch_tensor_init(etch_tensor *t, etch_dtype dtype, size_t dim, const int64_t *sizes,
                             void *data) {
    if (!t || dim > ETCH_MAX_DIMS || (dim && !sizes))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "tensor_init: rank %zu exceeds %d", dim,
                        ETCH_MAX_DIMS);
    if (!etch_dtype_is_valid(dtype))
        return etch_err(ETCH_ERR_INVALID_TYPE, "tensor_init: unknown dtype %d", (int)dtype);
    if (etch_shape_extent(dim, sizes) < 0) {
        for (size_t i = 0; i < dim; i++)
            if (sizes[i] < 0)
                return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                                "tensor_init: negative size %lld at dim %zu",
                                (long long)sizes[i], i);
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "tensor_init: the shape's extent overflows");
    }
    memset(t, 0, sizeof *t);
    t->data = data;
    t->dim = (uint8_t)dim;
    t->dtype = (uint8_t)dtype;
    t->dynamism = ETCH_SHAPE_STATIC;
    for (size_t i = 0; i < dim; i++) {
        t->sizes[i] = sizes[i];
        t->dim_order[i] = (uint8_t)i;
    }
    t->capacity = etch_tensor_numel(t); /* bounded by the extent checked above */
    etch_tensor_update_strides(t);
    return ETCH_OK;
}

int64_t etch_tensor_numel(const etch_tensor *t) {
    int64_t n = 1;
    for (unsigned i = 0; i < t->dim; i++)
        n *= t->sizes[i];
    return n;
}

size_t etch_tensor_nbytes(const etch_tensor *t) {
    return (size_t)etch_tensor_numel(t) * etch_dtype_size(t->dtype);
}

bool etch_tensor_is_contiguous(const etch_tensor *t) {
    for (unsigned i = 0; i < t->dim; i++)
        if (t->dim_order[i] != i)
            return false;
    return true;
}

etch_status etch_tensor_resize(etch_tensor *t, size_t dim, const int64_t *sizes) {
    if (dim != t->dim)
        return etch_err(ETCH_ERR_NOT_SUPPORTED, "cannot resize a rank-%u tensor to rank %zu",
                        (unsigned)t->dim, dim);
    bool same = true;
    for (size_t i = 0; i < dim; i++) {
        if (sizes[i] < 0)
            return etch_err(ETCH_ERR_INVALID_ARGUMENT, "negative size %lld at dim %zu",
                            (long long)sizes[i], i);
        if (sizes[i] != t->sizes[i])
            same = false;
    }
    if (etch_shape_extent(dim, sizes) < 0)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "element count overflows");
    int64_t n = 1; /* cannot overflow: bounded by the extent */
    for (size_t i = 0; i < dim; i++)
        n *= sizes[i];
    if (same)
        return ETCH_OK;
    if (t->dynamism == ETCH_SHAPE_STATIC)
        return etch_err(ETCH_ERR_NOT_SUPPORTED,
                        "cannot resize a static tensor (shape fixed at export)");
    if (n > t->capacity)
        return etch_err(ETCH_ERR_NOT_SUPPORTED,
                        "resize to %lld elements exceeds the planned capacity of %lld",
                        (long long)n, (long long)t->capacity);
    for (size_t i = 0; i < dim; i++)
        t->sizes[i] = sizes[i];
    etch_tensor_update_strides(t);
    return ETCH_OK;
}

const char *etch_value_tag_name(uint32_t tag) {
    switch (tag) {
    case ETCH_VALUE_NONE: return "None";
    case ETCH_VALUE_TENSOR: return "Tensor";
    case ETCH_VALUE_STRING: return "String";
    case ETCH_VALUE_DOUBLE: return "Double";
    case ETCH_VALUE_INT: return "Int";
    case ETCH_VALUE_BOOL: return "Bool";
    case ETCH_VALUE_BOOL_LIST: return "BoolList";
    case ETCH_VALUE_DOUBLE_LIST: return "DoubleList";
    case ETCH_VALUE_INT_LIST: return "IntList";
    case ETCH_VALUE_TENSOR_LIST: return "TensorList";
    case ETCH_VALUE_OPTIONAL_TENSOR_LIST: return "OptionalTensorList";
    default: return "Unknown";
    }
}

const int64_t *etch_value_int_list(etch_value *v, size_t *len) {
    if (v->tag != ETCH_VALUE_INT_LIST) {
        *len = 0;
        return NULL;
    }
    for (size_t i = 0; i < v->u.list.len; i++) {
        const etch_value *item = v->u.list.items[i];
        v->u.list.scratch[i] = item && item->tag == ETCH_VALUE_INT ? item->u.i : 0;
    }
    *len = v->u.list.len;
    return v->u.list.scratch;
}

bool etch_value_scalar_to_double(const etch_value *v, double *out) {
    switch (v->tag) {
    case ETCH_VALUE_INT: *out = (double)v->u.i; return true;
    case ETCH_VALUE_DOUBLE: *out = v->u.d; return true;
    case ETCH_VALUE_BOOL: *out = v->u.b ? 1.0 : 0.0; return true;
    default: return false;
    }
}

bool etch_value_scalar_to_int(const etch_value *v, int64_t *out) {
    switch (v->tag) {
    case ETCH_VALUE_INT: *out = v->u.i; return true;
    case ETCH_VALUE_DOUBLE:
        /* saturate: converting an out-of-range double is undefined behaviour */
        if (!(v->u.d == v->u.d))
            *out = 0;
        else if (v->u.d >= 9.2e18)
            *out = INT64_MAX;
        else if (v->u.d <= -9.2e18)
            *out = INT64_MIN;
        else
            *out = (int64_t)v->u.d;
        return true;
    case ETCH_VALUE_BOOL: *out = v->u.b ? 1 : 0; return true;
    default: return false;
    }
}
