/*
 * Internal to the portable kernels: element access for every dtype, torch's type promotion,
 * argument checks, and a broadcasting strided iterator. Kernels are declared at the end; each
 * lives in op_<name>.c and is registered in register.c.
 *
 * Conventions shared by all kernels here:
 *  - Every check happens before the first write to an output; on failure the kernel calls
 *    etch_kernel_fail with a specific message and returns (outputs may have been resized).
 *  - Element loads/stores go through memcpy, so data pointers need no particular alignment.
 *  - Floating values are computed in double, integral values in int64 with wrap-around
 *    (unsigned arithmetic), and rounded to the operation's dtype exactly where torch rounds.
 */
#ifndef ETCH_KERNELS_PORTABLE_H
#define ETCH_KERNELS_PORTABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "etch/kernel.h"
#include "etch/kernels.h"

/* ---- dtypes ------------------------------------------------------------------------- */

/* The ten dtypes arithmetic kernels accept: Bool, Byte, Char, Short, Int, Long, Half,
 * BFloat16, Float, Double. */
bool etch_pk_dtype_is_real(int dtype);
/* Float domain (Half, BFloat16, Float, Double) vs integral domain (the rest, Bool included). */
static inline bool etch_pk_is_float(int dtype) {
    return dtype == ETCH_DTYPE_FLOAT || dtype == ETCH_DTYPE_DOUBLE || dtype == ETCH_DTYPE_HALF ||
           dtype == ETCH_DTYPE_BFLOAT16;
}
/* torch.promote_types over the real dtypes. */
int etch_pk_promote(int a, int b);
/* torch's can_cast: no float -> integral, no non-bool -> bool. */
bool etch_pk_can_cast(int from, int to);

/* Result-type state for torch's rule: dimensioned tensors > zero-dim tensors > wrapped
 * Python scalars, and a lower-priority operand only matters when its category is higher. */
typedef struct etch_pk_result_type {
    int dim_result, zero_result, wrapped_result; /* -1 = none yet */
} etch_pk_result_type;
void etch_pk_rt_init(etch_pk_result_type *rt);
void etch_pk_rt_tensor(etch_pk_result_type *rt, const etch_tensor *t);
/* A Scalar argument: Int -> Long, Double -> the default dtype (Float), Bool -> Bool. */
void etch_pk_rt_scalar(etch_pk_result_type *rt, const etch_value *v);
int etch_pk_rt_result(const etch_pk_result_type *rt);

/* ---- conversions ------------------------------------------------------------------------ */

uint16_t etch_pk_f32_to_half(float f);
float etch_pk_half_to_f32(uint16_t h);
uint16_t etch_pk_f32_to_bf16(float f);
float etch_pk_bf16_to_f32(uint16_t h);
/* double -> int64 without undefined behaviour: truncates, NaN -> 0, saturates. */
int64_t etch_pk_f64_to_i64(double d);

/* One element at p (any alignment) of a real dtype. Integral values read as floats convert
 * exactly as C does (int64 -> double may round); Bool is 0/1. */
double etch_pk_load_f64(const void *p, int dtype);
int64_t etch_pk_load_i64(const void *p, int dtype); /* floats truncate (etch_pk_f64_to_i64) */
/* Store with torch's conversions: to Bool = (v != 0); float -> integral truncates to int64
 * then wraps to the width; double -> Half/BFloat16 goes through float. */
void etch_pk_store_f64(void *p, int dtype, double v);
void etch_pk_store_i64(void *p, int dtype, int64_t v);

/* Row versions: n elements, `stride` in bytes between them. */
void etch_pk_load_row_f64(double *dst, const char *src, int64_t stride, int64_t n, int dtype);
void etch_pk_load_row_i64(int64_t *dst, const char *src, int64_t stride, int64_t n, int dtype);
void etch_pk_store_row_f64(char *dst, int64_t stride, const double *src, int64_t n, int dtype);
void etch_pk_store_row_i64(char *dst, int64_t stride, const int64_t *src, int64_t n, int dtype);
/* Round values in place to what `dtype` can hold (float domain: Float/Half/BFloat16 round,
 * Double is a no-op; integral domain: wrap to the width, Bool -> 0/1). */
void etch_pk_round_row_f64(double *v, int64_t n, int dtype);
void etch_pk_round_row_i64(int64_t *v, int64_t n, int dtype);
static inline int64_t etch_pk_wrap_add(int64_t a, int64_t b) {
    return (int64_t)((uint64_t)a + (uint64_t)b);
}
static inline int64_t etch_pk_wrap_sub(int64_t a, int64_t b) {
    return (int64_t)((uint64_t)a - (uint64_t)b);
}
static inline int64_t etch_pk_wrap_mul(int64_t a, int64_t b) {
    return (int64_t)((uint64_t)a * (uint64_t)b);
}

/* ---- argument access ---------------------------------------------------------------------- */

/* Fails (and returns false) when fewer than n arguments were passed. */
bool etch_pk_nargs(etch_kernel_context *ctx, size_t nargs, size_t n);
/* The tensor in args[i]: NULL and a recorded failure if it is not a consistent tensor (rank
 * <= 16, known dtype, non-negative sizes, data present when it has elements). */
etch_tensor *etch_pk_tensor(etch_kernel_context *ctx, etch_value *v, const char *name);
/* As above, but None gives NULL without failing (`*present` tells which). */
etch_tensor *etch_pk_opt_tensor(etch_kernel_context *ctx, etch_value *v, const char *name,
                                bool *present);
bool etch_pk_int(etch_kernel_context *ctx, const etch_value *v, const char *name, int64_t *out);
bool etch_pk_bool(etch_kernel_context *ctx, const etch_value *v, const char *name, bool *out);
/* Int list; NULL + failure if not a list. `len` gets its length. */
const int64_t *etch_pk_int_list(etch_kernel_context *ctx, etch_value *v, const char *name,
                                size_t *len);
bool etch_pk_is_scalar(const etch_value *v);
/* A dtype of the ten real ones, else fail ("<name> has dtype X, which <op> does not support"). */
bool etch_pk_check_real(etch_kernel_context *ctx, const etch_tensor *t, const char *name);
bool etch_pk_check_same_dtype(etch_kernel_context *ctx, const etch_tensor *a, const char *an,
                              const etch_tensor *b, const char *bn);
/* Normalise dim into [0, rank) (rank 0 accepts -1 and 0, as torch); fails when out of range. */
bool etch_pk_wrap_dim(etch_kernel_context *ctx, int64_t dim, size_t rank, int64_t *out);
/* Broadcast two shapes; fails with both shapes in the message when incompatible. */
bool etch_pk_broadcast_shape(etch_kernel_context *ctx, const etch_tensor *a, const etch_tensor *b,
                             size_t *dim, int64_t *sizes);
/* etch_kernel_resize, plus a check that the resized tensor has data when it has elements. */
etch_status etch_pk_resize(etch_kernel_context *ctx, etch_tensor *t, size_t dim,
                           const int64_t *sizes);
/* Format "[2, 3]" into buf. */
const char *etch_pk_shape_str(char *buf, size_t cap, size_t dim, const int64_t *sizes);
#define ETCH_PK_SHAPE_BUF 200
/* Read "memory_format" (None or an Int): 0 contiguous requires out contiguous, 1 preserve,
 * 2 channels-last requires a 4-D out with dim order [0,2,3,1]; anything else fails. */
bool etch_pk_check_memory_format(etch_kernel_context *ctx, const etch_value *v,
                                 const etch_tensor *out);
/* Resolve a view size list (one -1 allowed) against numel; fails on mismatch. */
bool etch_pk_view_shape(etch_kernel_context *ctx, const int64_t *size, size_t len, int64_t numel,
                        int64_t *out_sizes);

/* ---- broadcasting strided iterator ------------------------------------------------------- */

#define ETCH_PK_MAX_OPS 4

typedef struct etch_pk_iter {
    int nops;
    int ndim;
    int64_t sizes[ETCH_MAX_DIMS];                    /* outermost first */
    int64_t strides[ETCH_PK_MAX_OPS][ETCH_MAX_DIMS]; /* bytes */
    char *base[ETCH_PK_MAX_OPS];
} etch_pk_iter;

/* Iterate over a shape (normally the output's). Operand 0 should be the output. */
void etch_pk_iter_init(etch_pk_iter *it, size_t dim, const int64_t *sizes);
/* Add an operand whose shape broadcasts to the iteration shape (right-aligned). */
void etch_pk_iter_add(etch_pk_iter *it, const etch_tensor *t);
/* Add an operand with explicit element strides, one per iteration dim. */
void etch_pk_iter_add_strided(etch_pk_iter *it, void *data, size_t elem_size,
                              const int64_t *elem_strides);
/* fn gets one pointer per operand and their byte strides for a run of n innermost elements. */
typedef void (*etch_pk_inner_fn)(void *arg, char **ptrs, const int64_t *strides, int64_t n);
/* Reorders dims by operand 0's strides, merges contiguous ones, and runs fn over everything. */
void etch_pk_iter_run(etch_pk_iter *it, etch_pk_inner_fn fn, void *arg);

/* Iterator callback converting operand 1 (src_dtype) into operand 0 (dst_dtype). */
typedef struct etch_pk_convert {
    int src_dtype, dst_dtype;
} etch_pk_convert;
void etch_pk_convert_inner(void *arg, char **ptrs, const int64_t *strides, int64_t n);
/* The dtype pair a copy kernel accepts: equal (any dtype), or both real. */
bool etch_pk_check_copy_dtypes(etch_kernel_context *ctx, const etch_tensor *src,
                               const etch_tensor *dst);
/* dst (already resized to src's shape) = src, element by element through the iterator. */
void etch_pk_copy_same_shape(etch_tensor *dst, const etch_tensor *src);

/* Check dtypes, resize out to in's shape, copy (converting). */
void etch_pk_copy_into(etch_kernel_context *ctx, etch_tensor *in, etch_tensor *out);
/* A dim_order argument (None or a list) must equal out's dim order. */
bool etch_pk_check_dim_order_arg(etch_kernel_context *ctx, etch_value *v, const etch_tensor *out);

/* Copy src into dst element by element in logical (row-major) order: the shapes may differ,
 * only the element counts must match; dtypes convert as etch_pk_store_*. */
void etch_pk_copy_logical(etch_tensor *dst, const etch_tensor *src);

/* ---- elementwise arithmetic engine (binary.c) ------------------------------------------- */

typedef enum etch_pk_binop {
    ETCH_PK_ADD,       /* a + alpha * b */
    ETCH_PK_SUB,       /* a - alpha * b */
    ETCH_PK_MUL,       /* a * b */
    ETCH_PK_DIV,       /* true division */
    ETCH_PK_DIV_TRUNC, /* rounding_mode="trunc" */
    ETCH_PK_DIV_FLOOR  /* rounding_mode="floor" */
} etch_pk_binop;

/* out = a (op) b. `b` is either a tensor or (b_tensor == NULL) the Scalar value b_scalar;
 * alpha may be NULL (= 1). Does every check, promotion, broadcast, resize. */
void etch_pk_binary(etch_kernel_context *ctx, etch_pk_binop op, etch_tensor *a,
                    etch_tensor *b_tensor, const etch_value *b_scalar, const etch_value *alpha,
                    etch_tensor *out);

/* ---- matrix multiply core (op_mm.c) ------------------------------------------------------ */

typedef struct etch_pk_matrix {
    const char *data;
    int64_t rs, cs; /* element strides of rows and columns */
} etch_pk_matrix;

/* out[M,N] = beta * bias + alpha * (a[M,K] @ b[K,N]) for one batch; bias may have data NULL
 * (ignored, as when beta == 0). All in `dtype`; float accumulates in double, integral in int64
 * with wrap-around. */
void etch_pk_gemm(etch_kernel_context *ctx, int dtype, int64_t M, int64_t N, int64_t K,
                  etch_pk_matrix a, etch_pk_matrix b, etch_pk_matrix bias, char *out,
                  int64_t out_rs, int64_t out_cs, const etch_value *alpha,
                  const etch_value *beta);

/* ---- kernels -------------------------------------------------------------------------------- */

#define ETCH_PK_KERNEL(name) \
    void etch_portable_##name(etch_kernel_context *ctx, etch_value **args, size_t nargs)

ETCH_PK_KERNEL(add_out);
ETCH_PK_KERNEL(add_scalar_out);
ETCH_PK_KERNEL(sub_out);
ETCH_PK_KERNEL(sub_scalar_out);
ETCH_PK_KERNEL(mul_out);
ETCH_PK_KERNEL(mul_scalar_out);
ETCH_PK_KERNEL(div_out);
ETCH_PK_KERNEL(div_out_mode);
ETCH_PK_KERNEL(div_scalar_out);
ETCH_PK_KERNEL(div_scalar_mode_out);
ETCH_PK_KERNEL(addmm_out);
ETCH_PK_KERNEL(mm_out);
ETCH_PK_KERNEL(bmm_out);
ETCH_PK_KERNEL(convolution_out);
ETCH_PK_KERNEL(max_pool2d_with_indices_out);
ETCH_PK_KERNEL(relu_out);
ETCH_PK_KERNEL(permute_copy_out);
ETCH_PK_KERNEL(view_copy_out);
ETCH_PK_KERNEL(clone_out);
ETCH_PK_KERNEL(clone_dim_order_out);
ETCH_PK_KERNEL(to_copy_out);
ETCH_PK_KERNEL(to_dim_order_copy_out);
ETCH_PK_KERNEL(sum_intlist_out);

/* prim_ops.c */
ETCH_PK_KERNEL(sym_size_int);
ETCH_PK_KERNEL(sym_numel);
ETCH_PK_KERNEL(local_scalar_dense);
ETCH_PK_KERNEL(prim_add);
ETCH_PK_KERNEL(prim_sub);
ETCH_PK_KERNEL(prim_mul);
ETCH_PK_KERNEL(prim_floordiv);
ETCH_PK_KERNEL(prim_truediv);
ETCH_PK_KERNEL(prim_mod);
ETCH_PK_KERNEL(prim_eq);
ETCH_PK_KERNEL(prim_gt);
ETCH_PK_KERNEL(prim_lt);
ETCH_PK_KERNEL(prim_ge);
ETCH_PK_KERNEL(prim_le);
ETCH_PK_KERNEL(prim_neg);
ETCH_PK_KERNEL(prim_sym_max);
ETCH_PK_KERNEL(prim_sym_min);
ETCH_PK_KERNEL(prim_sym_float);
ETCH_PK_KERNEL(prim_sym_int);
ETCH_PK_KERNEL(prim_sym_not);
ETCH_PK_KERNEL(prim_ceil);
ETCH_PK_KERNEL(prim_round);
ETCH_PK_KERNEL(prim_trunc);
ETCH_PK_KERNEL(prim_floordiv_int);
ETCH_PK_KERNEL(prim_mod_int);
ETCH_PK_KERNEL(prim_et_copy_index);
ETCH_PK_KERNEL(prim_et_view);

#endif
