/*
 * etch/tensor.h — tensors and values, as kernels and callers see them.
 *
 * Basic usage (a caller-owned input tensor):
 *
 *   float x[6] = {1, 2, 3, 4, 5, 6};
 *   int64_t sizes[2] = {2, 3};
 *   etch_tensor t;
 *   etch_tensor_init(&t, ETCH_DTYPE_FLOAT, 2, sizes, x);   // contiguous, borrows x
 *   etch_method_set_input_tensor(method, 0, &t);            // copied into planned memory
 *
 * A tensor never owns its data. Tensors inside a loaded method live in the method pool and
 * point into the program's constants (read only), the caller's planned arenas, or a caller
 * buffer that was handed in by set_input (borrowed).
 */
#ifndef ETCH_TENSOR_H
#define ETCH_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etch/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ETCH_MAX_DIMS 16

/* Element types, numbered as c10::ScalarType and the .pte schema's ScalarType. */
typedef enum etch_dtype {
    ETCH_DTYPE_BYTE = 0,   /* uint8 */
    ETCH_DTYPE_CHAR = 1,   /* int8 */
    ETCH_DTYPE_SHORT = 2,  /* int16 */
    ETCH_DTYPE_INT = 3,    /* int32 */
    ETCH_DTYPE_LONG = 4,   /* int64 */
    ETCH_DTYPE_HALF = 5,   /* IEEE binary16 */
    ETCH_DTYPE_FLOAT = 6,  /* float32 */
    ETCH_DTYPE_DOUBLE = 7, /* float64 */
    ETCH_DTYPE_BOOL = 11,  /* one byte, 0 or 1 */
    ETCH_DTYPE_QINT8 = 12,
    ETCH_DTYPE_QUINT8 = 13,
    ETCH_DTYPE_QINT32 = 14,
    ETCH_DTYPE_BFLOAT16 = 15,
    ETCH_DTYPE_QUINT4X2 = 16,
    ETCH_DTYPE_QUINT2X4 = 17,
    ETCH_DTYPE_BITS16 = 22,
    ETCH_DTYPE_FLOAT8E5M2 = 23,
    ETCH_DTYPE_FLOAT8E4M3FN = 24,
    ETCH_DTYPE_FLOAT8E5M2FNUZ = 25,
    ETCH_DTYPE_FLOAT8E4M3FNUZ = 26,
    ETCH_DTYPE_UINT16 = 27,
    ETCH_DTYPE_UINT32 = 28,
    ETCH_DTYPE_UINT64 = 29
} etch_dtype;

/* Bytes per element; 0 for a number that is not a known dtype. */
size_t etch_dtype_size(int dtype);
/* "Float", "Long", ... (c10 names); "Unknown" for a number that is not a known dtype. */
const char *etch_dtype_name(int dtype);
bool etch_dtype_is_valid(int dtype);
bool etch_dtype_is_floating(int dtype); /* Half, Float, Double, BFloat16 */
bool etch_dtype_is_integral(int dtype, bool include_bool);

typedef enum etch_dynamism {
    ETCH_SHAPE_STATIC = 0,        /* shape fixed at export */
    ETCH_SHAPE_DYNAMIC_BOUND = 1, /* stored sizes are an upper bound (same rank, numel <= bound) */
    ETCH_SHAPE_DYNAMIC_UNBOUND = 2
} etch_dynamism;

enum {
    ETCH_TENSOR_CONSTANT = 1u << 0, /* data is the program's read-only constant memory */
    ETCH_TENSOR_PLANNED = 1u << 1   /* data lives in a planned arena */
};

typedef struct etch_tensor {
    void *data;                        /* element 0; NULL while unbound */
    int64_t sizes[ETCH_MAX_DIMS];      /* current shape, elements per dim */
    int64_t strides[ETCH_MAX_DIMS];    /* elements, derived from sizes + dim_order */
    uint8_t dim_order[ETCH_MAX_DIMS];  /* outermost dim first; identity = contiguous */
    int64_t capacity;                  /* element count the data can hold (the bound) */
    uint8_t dim;                       /* rank, 0..ETCH_MAX_DIMS */
    uint8_t dtype;                     /* etch_dtype */
    uint8_t dynamism;                  /* etch_dynamism */
    uint8_t flags;                     /* ETCH_TENSOR_* */
} etch_tensor;

/* A contiguous, statically shaped tensor over caller memory (borrowed, not copied). */
etch_status etch_tensor_init(etch_tensor *t, etch_dtype dtype, size_t dim, const int64_t *sizes,
                             void *data);
int64_t etch_tensor_numel(const etch_tensor *t);
size_t etch_tensor_nbytes(const etch_tensor *t);
/* True when dim_order is the identity (row-major, C order). */
bool etch_tensor_is_contiguous(const etch_tensor *t);
/* Change the shape within the rules of the tensor's dynamism: a static tensor accepts only
 * its own shape; a bounded one any shape of the same rank whose element count fits the
 * capacity. Strides are recomputed. Fails with ETCH_ERR_NOT_SUPPORTED / INVALID_ARGUMENT and
 * leaves the tensor unchanged. */
etch_status etch_tensor_resize(etch_tensor *t, size_t dim, const int64_t *sizes);
/* Recompute strides from sizes + dim_order. */
void etch_tensor_update_strides(etch_tensor *t);
/* What a shape's strides span: the product of its sizes with every zero counted as one.
 * -1 when a size is negative or that product times 16 (the largest element) overflows
 * int64. Every shape the runtime accepts (from a program, an input, a .npy or .bpte file or
 * a kernel) passes this check, so a zero dimension next to huge ones cannot make stride or
 * offset arithmetic overflow although the tensor holds no bytes. */
int64_t etch_shape_extent(size_t dim, const int64_t *sizes);

/* Value kinds, numbered as ExecuTorch's runtime EValue tags. */
typedef enum etch_value_tag {
    ETCH_VALUE_NONE = 0,
    ETCH_VALUE_TENSOR = 1,
    ETCH_VALUE_STRING = 2,
    ETCH_VALUE_DOUBLE = 3,
    ETCH_VALUE_INT = 4,
    ETCH_VALUE_BOOL = 5,
    ETCH_VALUE_BOOL_LIST = 6,
    ETCH_VALUE_DOUBLE_LIST = 7,
    ETCH_VALUE_INT_LIST = 8,
    ETCH_VALUE_TENSOR_LIST = 9,
    ETCH_VALUE_OPTIONAL_TENSOR_LIST = 11
} etch_value_tag;

typedef struct etch_value etch_value;
struct etch_value {
    uint32_t tag; /* etch_value_tag */
    union {
        int64_t i;
        double d;
        bool b;
        etch_tensor *tensor;
        struct { const char *ptr; size_t len; } str;      /* NUL-terminated, len excludes it */
        struct { const double *ptr; size_t len; } doubles; /* literal, read only */
        struct { const uint8_t *ptr; size_t len; } bools;  /* literal, one byte each */
        /* Int, Tensor and optional-Tensor lists refer to other values (NULL item = None).
         * For Int lists, `scratch` receives the unboxed integers when a kernel reads it. */
        struct { etch_value **items; int64_t *scratch; size_t len; } list;
    } u;
};

/* Name of a tag: "Tensor", "Int", ... */
const char *etch_value_tag_name(uint32_t tag);
/* Reads an Int list's current values (they may have been computed earlier in the same
 * execution). The pointer stays valid until the list is read again. */
const int64_t *etch_value_int_list(etch_value *v, size_t *len);
/* Int, Double or Bool as double / int64 (a Bool is 0 or 1). False for other kinds. */
bool etch_value_scalar_to_double(const etch_value *v, double *out);
bool etch_value_scalar_to_int(const etch_value *v, int64_t *out);

#ifdef __cplusplus
}
#endif
#endif
