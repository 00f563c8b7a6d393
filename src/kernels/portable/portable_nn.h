/*
 * Declarations of the nn kernels listed in table_nn.inc (pooling, normalization, softmax,
 * reductions, sorting, embedding, interpolation, padding), plus the helpers they share
 * (nn_util.c).
 */
#ifndef ETCH_KERNELS_PORTABLE_NN_H
#define ETCH_KERNELS_PORTABLE_NN_H

#include "kernels/portable/portable.h"

/* data + byte offset, without pointer arithmetic on NULL (an empty tensor's data may be NULL,
 * and even adding 0 to it is undefined) */
static inline char *etch_nn_at(const void *data, int64_t off) {
    return data ? (char *)data + off : NULL;
}

/* ---- argument helpers (nn_util.c) -------------------------------------------------------- */

/* Float, Double, Half or BFloat16, else fail ("<name> has dtype X; <op> needs a floating
 * dtype"). */
bool etch_nn_check_float(etch_kernel_context *ctx, const etch_tensor *t, const char *name);
/* A Double (or Int) argument. */
bool etch_nn_double(etch_kernel_context *ctx, const etch_value *v, const char *name, double *out);
/* An optional ScalarType argument (None or Int): when given it must be a known real dtype
 * equal to `out`'s dtype. *given tells whether it was. */
bool etch_nn_dtype_arg(etch_kernel_context *ctx, const etch_value *v, const etch_tensor *out,
                       bool *given);
/* Fail unless t has exactly `dtype`. */
bool etch_nn_check_dtype(etch_kernel_context *ctx, const etch_tensor *t, const char *name,
                         int dtype);
/* A dims argument (None or an Int list) as a bit mask over in's dims: None and [] mean every
 * dim (`none_all`: None means every dim; otherwise None is refused). Negative dims wrap;
 * repeated dims fail. A rank-0 input accepts 0 and -1 and gives an empty mask. */
bool etch_nn_dim_mask(etch_kernel_context *ctx, etch_value *v, const etch_tensor *in,
                      uint32_t *mask);
/* Shape of a reduction's result (reduced dims dropped, or kept as 1 with keepdim). */
void etch_nn_reduced_shape(const etch_tensor *in, uint32_t mask, bool keepdim, size_t *dim,
                           int64_t *sizes);
/* Fails unless every dim in mask has a non-zero size (max/min-like reductions). */
bool etch_nn_check_nonempty_dims(etch_kernel_context *ctx, const etch_tensor *in, uint32_t mask,
                                 const char *what);
/* A list of 1 or 2 Ints (or 0 when allow_empty) into v[2], each in [min, 2^30]. */
bool etch_nn_pair(etch_kernel_context *ctx, etch_value *val, const char *name, bool allow_empty,
                  int64_t min, int64_t *v, bool *empty);
/* A Scalar must fit `dtype` as torch's checked conversion requires (no overflow; NaN only into
 * floating dtypes; Bool takes anything); fails with a message otherwise. */
bool etch_nn_scalar_fits(etch_kernel_context *ctx, const etch_value *v, int dtype,
                         const char *name);
/* Store a Scalar value into one element of `dtype` (as torch converts it). */
void etch_nn_store_scalar(void *p, int dtype, const etch_value *v);

/* ---- reduction plans ----------------------------------------------------------------------- */

/* Splits a tensor's dims into kept dims (the "outer" elements: one result each) and reduced
 * dims (merged where the memory layout allows, so runs are as long as possible). Up to two
 * tensors of the same logical shape share the plan (e.g. an input and a same-shape output).
 * Reduced elements are visited in logical (row-major) order. */
typedef struct etch_nn_plan {
    int nk;                  /* kept dims, in logical order */
    int kdim[ETCH_MAX_DIMS]; /* the tensor dim of each kept dim */
    int64_t ksize[ETCH_MAX_DIMS];
    int nr; /* reduced dims after dropping size 1 and merging */
    int64_t rsize[ETCH_MAX_DIMS];
    int64_t rstride[2][ETCH_MAX_DIMS]; /* element strides in tensor 0 and tensor 1 */
    int64_t outer, inner;              /* element counts of the kept and reduced dims */
} etch_nn_plan;

void etch_nn_plan_init(etch_nn_plan *p, const etch_tensor *t0, const etch_tensor *t1,
                       uint32_t mask);
/* Kept-dim index (idx[0..nk)) of outer element e. */
void etch_nn_plan_index(const etch_nn_plan *p, int64_t e, int64_t *idx);
/* Element offset of a kept index in tensor t: full_rank when t has the planned tensor's rank
 * (keepdim results, same-shape outputs), else t's dims are the kept dims in order. */
int64_t etch_nn_plan_offset(const etch_nn_plan *p, const int64_t *idx, const etch_tensor *t,
                            bool full_rank);
/* fn(arg, p0, s0, p1, s1, n) for each run of reduced elements (byte pointers and strides)
 * starting at b0 / b1 (b1 may be NULL), in logical order. Nothing when inner == 0. */
typedef void (*etch_nn_run_fn)(void *arg, char *p0, int64_t s0, char *p1, int64_t s1, int64_t n);
void etch_nn_plan_runs(const etch_nn_plan *p, char *b0, int64_t es0, char *b1, int64_t es1,
                       etch_nn_run_fn fn, void *arg);

/* Runs of at most this many elements are converted through stack buffers. */
#define ETCH_NN_CHUNK 128

/* The maximum (is_max) or minimum of the reduced elements of one outer element, whose first
 * reduced element is at `base`: returns its logical index within the reduction and points
 * *elem at it. Ties keep the first; the first NaN wins over everything. inner must be > 0. */
int64_t etch_nn_extreme(const etch_nn_plan *p, const char *base, int dtype, bool is_max,
                        const char **elem);

/* Mean and biased variance (two passes, in double) of the reduced elements of one outer
 * element whose first reduced element is at `base`; with no elements: mean 0, variance NaN
 * (as torch's normalizations report them). */
void etch_nn_moments(const etch_nn_plan *p, const char *base, int dtype, double *mean, double *var);

/* A normalization parameter (weight, bias, running statistic): absent (None), or a tensor of
 * `numel` elements whose dims are `dim`/`sizes` (sizes NULL: 1-D) and whose dtype is self's,
 * or Float for a Half/BFloat16 self. */
bool etch_nn_norm_param(etch_kernel_context *ctx, etch_value *v, const char *name,
                        const etch_tensor *self, size_t dim, const int64_t *sizes, int64_t numel,
                        bool required, etch_tensor **out);
/* Statistics outputs (mean, rstd, ...) may have self's dtype, or Float for Half/BFloat16. */
bool etch_nn_check_stat_dtype(etch_kernel_context *ctx, const etch_tensor *self,
                              const etch_tensor *t, const char *name);
/* Element j (logical, row-major) of t. */
double etch_nn_load_logical(const etch_tensor *t, int64_t j);

/* ---- kernels ------------------------------------------------------------------------------- */

/* pooling */
ETCH_PK_KERNEL(avg_pool2d_out);
ETCH_PK_KERNEL(adaptive_avg_pool2d_out);
ETCH_PK_KERNEL(adaptive_max_pool2d_out);
/* normalization */
ETCH_PK_KERNEL(native_batch_norm_out);
ETCH_PK_KERNEL(batch_norm_no_training_out);
ETCH_PK_KERNEL(native_layer_norm_out);
ETCH_PK_KERNEL(native_group_norm_out);
/* softmax */
ETCH_PK_KERNEL(softmax_out);
ETCH_PK_KERNEL(sdpa_kv_out); /* op_sdpa_kv.c: etch-only fused attention of the LLM exporter */
ETCH_PK_KERNEL(sdpa_kv_q8_out); /* op_sdpa_kv_q8.c: the same over an int8 KV cache */
/* Shape, start_pos and out checks of both (op_sdpa_kv.c): -1 failed (recorded), 0 nothing to
 * compute, 1 compute; *start = start_pos. */
int etch_pk_sdpa_kv_prepare(etch_kernel_context *ctx, const etch_tensor *q, const etch_tensor *k,
                            const etch_tensor *v, const etch_tensor *sp, etch_tensor *out,
                            int64_t *start);
/* sdpa_kv_q8's scales and zero points: k/v scales Float, zero points Char, each [KV, S, 1]
 * like the caches' first two dims, and every scale of positions 0 .. n - 1 finite and >= 0
 * (op_sdpa_kv_q8.c). */
bool etch_pk_sdpa_q8_check_params(etch_kernel_context *ctx, const etch_tensor *c,
                                  const etch_tensor *s, const etch_tensor *z, const char *which,
                                  int64_t n);
ETCH_PK_KERNEL(log_softmax_out);
/* ExecuTorch's LLM operators (namespace llama): op_update_cache.c, op_custom_sdpa.c */
ETCH_PK_KERNEL(llama_update_cache_out);
ETCH_PK_KERNEL(llama_custom_sdpa_out);
ETCH_PK_KERNEL(llama_sdpa_with_kv_cache_out);
/* value [B, S, H, D] into cache [B, S_max, H, D] at start_pos, after every check (false:
 * failed, recorded, nothing written). */
bool etch_pk_update_cache(etch_kernel_context *ctx, const etch_tensor *value, const char *vname,
                          etch_tensor *cache, const char *cname, int64_t start_pos);
/* A checked custom_sdpa call (op_custom_sdpa.c). */
typedef struct etch_llama_sdpa {
    const etch_tensor *q, *k, *v, *mask; /* mask NULL: none */
    etch_tensor *out;
    int64_t start;
    bool causal;
    double scale;
} etch_llama_sdpa;
/* Checks q, k, v, start_pos, opt[0..3] (attn_mask, drpout_p, is_causal, scale) and out,
 * resizes out: -1 failed (recorded), 0 nothing to compute, 1 compute (a filled). */
int etch_pk_llama_sdpa_prepare(etch_kernel_context *ctx, etch_llama_sdpa *a, etch_tensor *q,
                               etch_tensor *k, etch_tensor *v, int64_t start_pos,
                               etch_value **opt, etch_tensor *out);
void etch_pk_llama_sdpa_run(const etch_llama_sdpa *a);
/* custom_sdpa.out's arguments (query, key, value, start_pos, the four options, out) read and
 * checked as etch_pk_llama_sdpa_prepare does: -1 failed, 0 nothing to compute, 1 attend. */
int etch_pk_llama_custom_sdpa_args(etch_kernel_context *ctx, etch_llama_sdpa *a,
                                   etch_value **args, size_t nargs);
/* sdpa_with_kv_cache's checks, then both cache writes (nothing written when a check fails):
 * -1 failed, 0 nothing more to compute, 1 attend (a filled). */
int etch_pk_llama_sdpa_kv_prepare(etch_kernel_context *ctx, etch_llama_sdpa *a,
                                  etch_value **args, size_t nargs);
/* reductions */
ETCH_PK_KERNEL(mean_out);
ETCH_PK_KERNEL(mean_dtype_out);
ETCH_PK_KERNEL(amax_out);
ETCH_PK_KERNEL(amin_out);
ETCH_PK_KERNEL(argmax_out);
ETCH_PK_KERNEL(argmin_out);
ETCH_PK_KERNEL(max_dim_max);
ETCH_PK_KERNEL(min_dim_min);
ETCH_PK_KERNEL(var_correction_out);
ETCH_PK_KERNEL(var_out);
ETCH_PK_KERNEL(prod_int_out);
ETCH_PK_KERNEL(prod_out);
ETCH_PK_KERNEL(any_all_out);
ETCH_PK_KERNEL(any_out);
ETCH_PK_KERNEL(any_dims_out);
ETCH_PK_KERNEL(cumsum_out);
/* sorting */
ETCH_PK_KERNEL(sort_values);
ETCH_PK_KERNEL(sort_values_stable);
ETCH_PK_KERNEL(topk_values);
ETCH_PK_KERNEL(argsort_stable_out);
/* linear */
ETCH_PK_KERNEL(linear_out);
/* embedding, interpolation, padding */
ETCH_PK_KERNEL(embedding_out);
ETCH_PK_KERNEL(upsample_nearest2d_vec_out);
ETCH_PK_KERNEL(upsample_nearest2d_out);
ETCH_PK_KERNEL(upsample_bilinear2d_vec_out);
ETCH_PK_KERNEL(upsample_bilinear2d_out);
ETCH_PK_KERNEL(constant_pad_nd_out);

#endif
