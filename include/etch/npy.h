/*
 * etch/npy.h — NumPy .npy files (format versions 1.0, 2.0, 3.0; C order; little endian).
 *
 * Basic usage:
 *
 *   etch_npy a;
 *   if (etch_npy_read_file("x.npy", &a) != ETCH_OK) { ...etch_last_error()... }
 *   etch_method_set_input_tensor(m, 0, &a.tensor);  // may borrow a's data: keep it alive
 *   etch_method_execute(m);
 *   etch_npy_write_file("out.npy", etch_method_output(m, 0)->u.tensor);
 *   etch_npy_free(&a);
 *
 * Supported dtypes: bool, int8, uint8, int16, uint16, int32, uint32, int64, uint64, float16,
 * float32, float64 ('<' byte order, or '|' for one-byte types). Anything else — Fortran order
 * (rank > 1), big endian, structured/object/string/void dtypes, a malformed header dict, more
 * than ETCH_MAX_DIMS dims, an element count that overflows, truncated or surplus data — is
 * refused with a message naming the problem (ETCH_ERR_INVALID_ARGUMENT for malformed files,
 * ETCH_ERR_NOT_SUPPORTED for valid files etch cannot represent, ETCH_ERR_ACCESS_FAILED for
 * I/O). This is part of the extension layer: it allocates.
 *
 * The writer produces format 1.0 (2.0 if the header would not fit 64 KiB), C order, little
 * endian, with the header padded to 64 bytes. Half is written as '<f2'. BFloat16 has no
 * NumPy dtype, so it is widened (exactly) to float32 '<f4'; reading such a file back gives a
 * Float tensor. Quantized, float8 and Bits16 tensors are refused.
 */
#ifndef ETCH_NPY_H
#define ETCH_NPY_H

#include "etch/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct etch_npy {
    etch_tensor tensor; /* contiguous, static; data owned by this struct (16-byte aligned,
                           never NULL, even for zero elements) */
} etch_npy;

etch_status etch_npy_read_file(const char *path, etch_npy *out);
etch_status etch_npy_read_buffer(const void *data, size_t size, etch_npy *out);
void etch_npy_free(etch_npy *npy); /* accepts a zeroed struct */

/* Write a tensor (any dim order: elements are written in logical C order). The file is
 * removed again when writing fails. */
etch_status etch_npy_write_file(const char *path, const etch_tensor *t);
/* Write a non-tensor value (Int → int64, Double → float64, Bool → bool, String → a NumPy
 * string '<U<n>' of its UTF-8 text, or '|S<n>' bytes when it is not UTF-8) as a 0-d array;
 * tensors as above. Other kinds (lists, None) are refused. */
etch_status etch_npy_write_value(const char *path, const etch_value *v);

#ifdef __cplusplus
}
#endif
#endif
