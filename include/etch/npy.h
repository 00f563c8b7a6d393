/*
 * etch/npy.h — NumPy .npy files (format versions 1.0, 2.0, 3.0; C order; little endian).
 *
 * Basic usage:
 *
 *   etch_npy a;
 *   if (etch_npy_read_file("x.npy", &a) != ETCH_OK) { ...etch_last_error()... }
 *   etch_method_set_input_tensor(m, 0, &a.tensor);
 *   etch_npy_free(&a);
 *   etch_npy_write_file("out.npy", etch_method_output(m, 0)->u.tensor);
 *
 * Supported dtypes: bool, int8, uint8, int16, uint16, int32, uint32, int64, uint64, float16,
 * float32, float64 (and bfloat16 written as a 2-byte void type is refused on read). Anything
 * else — Fortran order, big endian, object arrays, truncated data — is refused with a
 * message naming the problem. This is part of the extension layer: it allocates.
 */
#ifndef ETCH_NPY_H
#define ETCH_NPY_H

#include "etch/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct etch_npy {
    etch_tensor tensor; /* contiguous; data owned by this struct */
} etch_npy;

etch_status etch_npy_read_file(const char *path, etch_npy *out);
etch_status etch_npy_read_buffer(const void *data, size_t size, etch_npy *out);
void etch_npy_free(etch_npy *npy); /* accepts a zeroed struct */

/* Write a tensor (any dim order: elements are written in logical C order). */
etch_status etch_npy_write_file(const char *path, const etch_tensor *t);
/* Write a non-tensor value (Int → int64, Double → float64, Bool → bool) as a 0-d array;
 * tensors as above. Other kinds are refused. */
etch_status etch_npy_write_value(const char *path, const etch_value *v);

#ifdef __cplusplus
}
#endif
#endif
