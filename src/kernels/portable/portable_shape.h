/* Declarations of the shape kernels listed in table_shape.inc, and the helpers they share
 * (shape_util.c): strided views over tensor data, copies between views with torch's dtype
 * conversions, Scalar -> element conversion with torch's overflow checks, and index reading. */
#ifndef ETCH_KERNELS_PORTABLE_SHAPE_H
#define ETCH_KERNELS_PORTABLE_SHAPE_H

#include "kernels/portable/portable.h"

/* ---- strided views ---------------------------------------------------------------------- */

/* Enough dims for a rank-16 tensor with every dim split in two (repeat, pixel_shuffle). */
#define ETCH_SV_MAX_DIMS (2 * ETCH_MAX_DIMS + 2)

/* A view of a tensor's memory: element (i_0, ..) lives at base + (off + sum i_k * strides[k])
 * elements. Strides may be zero (broadcast) or negative (flip). `base` may be NULL when the view
 * (or the tensor under it) has no elements; nothing dereferences it then. */
typedef struct etch_sv {
    char *base;
    int64_t off;
    int dtype;
    int ndim;
    int64_t sizes[ETCH_SV_MAX_DIMS];
    int64_t strides[ETCH_SV_MAX_DIMS];
} etch_sv;

/* The whole tensor, with its own (dim order derived) strides. */
void etch_sv_of(etch_sv *v, const etch_tensor *t);
/* One element (a rank-0 view) of `dtype` stored at p. */
void etch_sv_scalar(etch_sv *v, const void *p, int dtype);
int64_t etch_sv_numel(const etch_sv *v);
/* Remove dim d, keeping index i of it (0 <= i < size). */
void etch_sv_select(etch_sv *v, int d, int64_t i);
/* Keep `len` entries of dim d starting at `start`, every `step`-th (start, len, step valid). */
void etch_sv_slice(etch_sv *v, int d, int64_t start, int64_t len, int64_t step);
/* Insert a dim at position d with the given size and stride. */
void etch_sv_insert(etch_sv *v, int d, int64_t size, int64_t stride);
/* Split dim d (size a*b) into (a, b), outer first. */
void etch_sv_split(etch_sv *v, int d, int64_t a, int64_t b);
/* Reverse dim d. */
void etch_sv_flip(etch_sv *v, int d);
/* Give dim d stride 0 and size n (broadcasting a size-1 dim). */
void etch_sv_broadcast(etch_sv *v, int d, int64_t n);

/* dst[i] = src[i] for every index (the sizes must match), converting src's dtype to dst's with
 * torch's rules; when `via` is a dtype other than both, each value is first converted to `via`
 * (a copy into a tensor of that dtype, then into dst). Pass via = -1 for a direct copy. Same
 * dtypes move bytes, so any dtype works; conversions need real dtypes (checked by callers). */
void etch_sv_copy(etch_sv *dst, const etch_sv *src, int via);
/* Every element of dst = the element at elem (of dst's dtype). */
void etch_sv_fill(etch_sv *dst, const void *elem);
/* Copy a whole tensor into a view of the same shape (dtypes as etch_sv_copy). */
void etch_sv_copy_from_tensor(etch_sv *dst, const etch_tensor *src, int via);

/* ---- argument checks ---------------------------------------------------------------------- */

/* Copy-like kernels write any real dtype into any real dtype (torch's copy_), and move any
 * other dtype only into itself. */
bool etch_shape_check_convert(etch_kernel_context *ctx, int from, int to, const char *what);
/* A size list argument (entries >= 0, at most ETCH_MAX_DIMS): NULL + failure otherwise. */
const int64_t *etch_shape_size_list(etch_kernel_context *ctx, etch_value *v, const char *name,
                                    size_t *len);
/* Fail unless the dtypes are equal. */
bool etch_shape_check_same(etch_kernel_context *ctx, const etch_tensor *a, const char *an,
                           const etch_tensor *b, const char *bn);
/* Normalise dim into [0, rank) (rank 0 accepts -1 and 0). */
bool etch_shape_dim(etch_kernel_context *ctx, int64_t dim, int64_t rank, const char *name,
                    int64_t *out);
/* The tensors of a TensorList argument (into `out`, at most `cap`; fails when longer). */
bool etch_shape_tensor_list(etch_kernel_context *ctx, etch_value *v, const char *name,
                            etch_tensor **out, size_t cap, size_t *len);

/* A Scalar (Int/Double/Bool value) as one element of `dtype`, written to `elem` (8 bytes),
 * with c10's checked conversion: fails when the value does not fit the dtype (an integral
 * dtype rejects NaN/inf and out-of-range values, Byte also accepts negative Ints down to -255 by
 * wrapping; floating dtypes reject finite values beyond their largest; Bool takes v != 0). */
bool etch_shape_scalar_elem(etch_kernel_context *ctx, const etch_value *v, int dtype, void *elem,
                            const char *name);

/* Index element i (in logical row-major order is the caller's business) of an integral
 * tensor at byte address p: Long, Int (and Short/Char/Byte) read as int64. */
static inline int64_t etch_shape_load_index(const char *p, int dtype) {
    return etch_pk_load_i64(p, dtype);
}

/* ---- advanced indexing (index.Tensor, index_put) ---------------------------------------- */

/* Up to one index tensor per self dim; a Bool/Byte mask of rank k stands for k dims. */
typedef struct etch_adv_index {
    const etch_tensor *self;
    size_t n;                             /* list length (entries, None included) */
    const etch_tensor *t[ETCH_MAX_DIMS];  /* per list entry; NULL = None */
    int first_dim[ETCH_MAX_DIMS];         /* self dim the entry starts at */
    bool mask[ETCH_MAX_DIMS];             /* a Bool/Byte entry */
    int64_t nnz[ETCH_MAX_DIMS];           /* set elements of a mask entry */
    /* broadcast shape of the index tensors (masks count as 1-D of nnz) */
    size_t bdim;
    int64_t bsizes[ETCH_MAX_DIMS];
    /* result: rank, sizes; for every result dim either a self dim (>= 0) or -1 - k for
     * broadcast dim k */
    size_t rdim;
    int64_t rsizes[ETCH_MAX_DIMS];
    int rmap[ETCH_MAX_DIMS];
    int nindexed;                         /* self dims consumed by index entries */
    bool consumed[ETCH_MAX_DIMS];         /* self dim taken by an index entry */
} etch_adv_index;

/* Read and check an OptionalTensorList against self (dtypes, mask shapes, index values in
 * range, broadcasting) and compute the result shape. */
bool etch_adv_index_init(etch_kernel_context *ctx, etch_adv_index *ai, const etch_tensor *self,
                         etch_value *list);
/* Call fn for every element of the result, in row-major order, with its index in the result
 * (rdim entries) and the offset (in elements) of the self element it reads. */
typedef void (*etch_adv_visit_fn)(void *arg, const int64_t *ridx, int64_t self_off);
void etch_adv_index_visit(etch_adv_index *ai, etch_adv_visit_fn fn, void *arg);

/* ---- kernels -------------------------------------------------------------------------------- */

ETCH_PK_KERNEL(cat_out);
ETCH_PK_KERNEL(stack_out);
ETCH_PK_KERNEL(split_copy_tensor_out);
ETCH_PK_KERNEL(split_with_sizes_copy_out);
ETCH_PK_KERNEL(unbind_copy_int_out);
ETCH_PK_KERNEL(slice_copy_tensor_out);
ETCH_PK_KERNEL(select_copy_int_out);
ETCH_PK_KERNEL(narrow_copy_out);
ETCH_PK_KERNEL(slice_scatter_out);
ETCH_PK_KERNEL(select_scatter_out);
ETCH_PK_KERNEL(index_select_out);
ETCH_PK_KERNEL(index_tensor_out);
ETCH_PK_KERNEL(index_put_out);
ETCH_PK_KERNEL(index_put_);
ETCH_PK_KERNEL(gather_out);
ETCH_PK_KERNEL(scatter_src_out);
ETCH_PK_KERNEL(scatter_value_out);
ETCH_PK_KERNEL(scatter_add_out);
ETCH_PK_KERNEL(masked_fill_scalar_out);
ETCH_PK_KERNEL(expand_copy_out);
ETCH_PK_KERNEL(unsqueeze_copy_out);
ETCH_PK_KERNEL(squeeze_copy_dim_out);
ETCH_PK_KERNEL(squeeze_copy_dims_out);
ETCH_PK_KERNEL(squeeze_copy_out);
ETCH_PK_KERNEL(transpose_copy_int_out);
ETCH_PK_KERNEL(t_copy_out);
ETCH_PK_KERNEL(alias_copy_out);
ETCH_PK_KERNEL(detach_copy_out);
ETCH_PK_KERNEL(lift_fresh_copy_out);
ETCH_PK_KERNEL(repeat_out);
ETCH_PK_KERNEL(flip_out);
ETCH_PK_KERNEL(roll_out);
ETCH_PK_KERNEL(pixel_shuffle_out);
ETCH_PK_KERNEL(full_out);
ETCH_PK_KERNEL(full_like_out);
ETCH_PK_KERNEL(zeros_out);
ETCH_PK_KERNEL(ones_out);
ETCH_PK_KERNEL(scalar_tensor_out);
ETCH_PK_KERNEL(arange_out);
ETCH_PK_KERNEL(arange_start_out);
ETCH_PK_KERNEL(fill_scalar_out);
ETCH_PK_KERNEL(fill_tensor_out);
ETCH_PK_KERNEL(empty_out);
ETCH_PK_KERNEL(empty_dim_order_out);
ETCH_PK_KERNEL(triu_out);
ETCH_PK_KERNEL(tril_out);
ETCH_PK_KERNEL(copy_out);
ETCH_PK_KERNEL(copy_);

#endif
