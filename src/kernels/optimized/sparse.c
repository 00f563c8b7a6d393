/* 2:4 sparse float32 linear: detection and compression of constant weights at load, the
 * scalar tile kernel, the threaded driver and the mm / addmm / linear entry points that use
 * it (sparse.h). Everything the sparse path does not cover goes to the dense kernels. */
#include <string.h>

#include "kernels/optimized/epilogue.h"
#include "kernels/optimized/opt_gemm.h"
#include "kernels/optimized/sparse.h"

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

bool etch_sp24_check(const float *w, int64_t rs, int64_t cs, int64_t K, int64_t N) {
    for (int64_t j = 0; j < N; j++)
        for (int64_t g = 0; g < K; g += 4) {
            int nz = 0;
            for (int64_t k = g; k < g + 4 && k < K; k++)
                nz += w[k * rs + j * cs] != 0.0f; /* -0.0 is a zero; NaN is not */
            if (nz > 2)
                return false;
        }
    return true;
}

size_t etch_sp24_size(int64_t K, int64_t N) {
    if (K <= 0 || N <= 0)
        return 0;
    const size_t G = (size_t)(K + 3) / 4, T = (size_t)(N + SP_NT - 1) / SP_NT;
    return align64(T * G * 2 * SP_NT * sizeof(float)) + align64(T * G * SP_NT);
}

void etch_sp24_compress(const float *w, int64_t rs, int64_t cs, int64_t K, int64_t N, void *dst,
                        etch_sp24 *out) {
    const int64_t G = (K + 3) / 4, T = (N + SP_NT - 1) / SP_NT;
    float *vals = (float *)dst;
    uint8_t *idx = (uint8_t *)dst + align64((size_t)(T * G * 2 * SP_NT) * sizeof(float));
    memset(dst, 0, etch_sp24_size(K, N));
    for (int64_t t = 0; t < T; t++)
        for (int64_t g = 0; g < G; g++)
            for (int c = 0; c < SP_NT && t * SP_NT + c < N; c++) {
                const int64_t j = t * SP_NT + c;
                float *v = vals + ((t * G + g) * 2) * SP_NT + c;
                int s = 0, ii[2] = {0, 0};
                for (int i = 0; i < 4 && 4 * g + i < K && s < 2; i++) {
                    const float x = w[(4 * g + i) * rs + j * cs];
                    if (x != 0.0f) {
                        v[s * SP_NT] = x;
                        ii[s++] = i;
                    }
                }
                idx[(t * G + g) * SP_NT + c] = (uint8_t)(ii[0] | ii[1] << 2);
            }
    out->K = K;
    out->N = N;
    out->G = G;
    out->T = T;
    out->vals = vals;
    out->idx = idx;
}

void etch_sp24_tiles_scalar(const etch_sp24 *w, const float *x, int64_t ldx, int64_t M,
                            float *c, int64_t ldc, int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; t++) {
        const int nc = (int)(w->N - t * SP_NT < SP_NT ? w->N - t * SP_NT : SP_NT);
        for (int64_t m = 0; m < M; m++) {
            const float *xr = x + m * ldx;
            float acc[SP_NT] = {0};
            for (int64_t g = 0; g < w->G; g++) {
                const float *v = w->vals + (t * w->G + g) * 2 * SP_NT;
                const uint8_t *ix = w->idx + (t * w->G + g) * SP_NT;
                const float *xg = xr + 4 * g;
                for (int cc = 0; cc < SP_NT; cc++)
                    acc[cc] += v[cc] * xg[ix[cc] & 3] + v[SP_NT + cc] * xg[ix[cc] >> 2];
            }
            memcpy(c + m * ldc + t * SP_NT, acc, (size_t)nc * sizeof(float));
        }
    }
}

etch_sp24_tiles_fn etch_sp24_tiles_active(void) {
#if ETCH_OPT_X86
    const etch_isa isa = etch_isa_active();
    if (isa == ETCH_ISA_AVX2 || isa == ETCH_ISA_AVX512)
        return etch_sp24_tiles_avx2;
#endif
#if ETCH_OPT_NEON
    if (etch_isa_active() == ETCH_ISA_NEON)
        return etch_sp24_tiles_neon;
#endif
    return etch_sp24_tiles_scalar;
}

typedef struct sp_job {
    const etch_sp24 *w;
    etch_sp24_tiles_fn fn;
    const float *x;
    int64_t ldx, M;
    float *c;
    int64_t ldc;
    float alpha, beta;
    const float *bias;
    int64_t bias_cs;
    const etch_epilogue *e;
} sp_job;

static void sp_range(void *arg, int64_t t0, int64_t t1) {
    const sp_job *j = (const sp_job *)arg;
    j->fn(j->w, j->x, j->ldx, j->M, j->c, j->ldc, t0, t1);
    const int64_t n0 = t0 * SP_NT, n1 = t1 * SP_NT < j->w->N ? t1 * SP_NT : j->w->N;
    const bool plain = j->alpha == 1.0f && (!j->bias || j->beta == 0.0f);
    for (int64_t m = 0; m < j->M; m++) {
        float *row = j->c + m * j->ldc;
        if (!plain)
            for (int64_t n = n0; n < n1; n++) {
                row[n] *= j->alpha;
                if (j->bias && j->beta != 0.0f)
                    row[n] += j->beta * j->bias[n * j->bias_cs];
            }
        etch_opt_apply_epilogue(j->e, row + n0, n1 - n0);
    }
}

void etch_sp24_linear(etch_kernel_context *ctx, const etch_sp24 *w, const float *x, int64_t ldx,
                      int64_t M, float *c, int64_t ldc, float alpha, float beta,
                      const float *bias, int64_t bias_cs, const etch_epilogue *e) {
    sp_job j = {w, etch_sp24_tiles_active(), x, ldx, M, c, ldc, alpha, beta, bias, bias_cs, e};
    if (M <= 0 || w->T <= 0)
        return;
    /* at least ~32k multiply-adds a chunk */
    const int64_t per = M * w->G * 2 * SP_NT;
    const int64_t grain = per >= 32768 ? 1 : 32768 / per + 1;
    if (ctx)
        etch_kernel_parallel_for(ctx, w->T, grain, sp_range, &j);
    else
        sp_range(&j, 0, w->T);
}

/* ---- load-time compression --------------------------------------------------------------- */

#define SP_MAGIC 0x34325053u /* "SP24" */
#define SP_DATA 128

typedef struct sp_prep {
    uint32_t magic;
    const void *w;
    int64_t sizes[2], strides[2];
    int64_t K, N;
} sp_prep;
_Static_assert(sizeof(sp_prep) <= SP_DATA, "sp_prep header larger than SP_DATA");

/* gemm_ops.c's test (else the dense path, which hands the tensor to the portable kernels) */
static etch_tensor *float_tensor(etch_value *v) { return etch_opt_float_arg(v); }

/* rows of x (all leading dims, or dim 0 of a 2-d x): the stored shape is an upper bound */
static int64_t rows_of(etch_value *xv, bool all_leading) {
    const etch_tensor *x = float_tensor(xv);
    if (!x || x->dim < 1 || (!all_leading && x->dim != 2))
        return -1;
    int64_t rows = 1;
    for (unsigned i = 0; i + 1 < x->dim; i++)
        rows *= x->sizes[i];
    return rows;
}

/* The compressed weight args[wi] (b(k,j) = w[k,j], or w[j,k] when `transposed`) when it is a
 * constant 2:4 weight and x (args[xi]) has few rows; else the dense prepare's answer. */
static size_t sp_prepare(etch_kernel_context *ctx, etch_value **args, size_t nargs, void *buf,
                         size_t cap, int xi, int wi, bool all_leading, bool transposed,
                         etch_kernel_prepare_fn dense) {
    const size_t dense_size = dense(ctx, args, nargs, NULL, 0);
    const etch_tensor *w = float_tensor(args[wi]);
    const int64_t rows = rows_of(args[xi], all_leading);
    if (!w || w->dim != 2 || !(w->flags & ETCH_TENSOR_CONSTANT) ||
        w->dynamism != ETCH_SHAPE_STATIC || rows < 0 || rows > ETCH_SP24_ROWS_MAX)
        return dense(ctx, args, nargs, buf, cap);
    const int64_t K = w->sizes[transposed ? 1 : 0], N = w->sizes[transposed ? 0 : 1];
    const int64_t rs = w->strides[transposed ? 1 : 0], cs = w->strides[transposed ? 0 : 1];
    const size_t bytes = etch_sp24_size(K, N);
    if (bytes == 0 || K > ETCH_OPT_SIZE_LIMIT || N > ETCH_OPT_SIZE_LIMIT)
        return dense(ctx, args, nargs, buf, cap);
    if (!w->data) /* measuring: either may be chosen at load */
        return !buf && SP_DATA + bytes > dense_size ? SP_DATA + bytes : dense_size;
    if (!etch_sp24_check((const float *)w->data, rs, cs, K, N))
        return dense(ctx, args, nargs, buf, cap);
    if (!buf)
        return SP_DATA + bytes;
    if (cap < SP_DATA + bytes || ((uintptr_t)buf & 63))
        return 0;
    sp_prep *h = (sp_prep *)buf;
    memset(buf, 0, SP_DATA);
    h->magic = SP_MAGIC;
    h->w = w->data;
    for (int i = 0; i < 2; i++) {
        h->sizes[i] = w->sizes[i];
        h->strides[i] = w->strides[i];
    }
    h->K = K;
    h->N = N;
    etch_sp24 sp;
    etch_sp24_compress((const float *)w->data, rs, cs, K, N, (uint8_t *)buf + SP_DATA, &sp);
    etch_kernel_prepared_replaces(ctx, 1u << wi); /* every call of the site reads it */
    return SP_DATA + bytes;
}

size_t etch_opt_sparse_mm_prepare(etch_kernel_context *ctx, etch_value **args, size_t nargs,
                                  void *buf, size_t cap) {
    if (nargs < 3)
        return 0;
    return sp_prepare(ctx, args, nargs, buf, cap, 0, 1, false, false, etch_opt_mm_prepare);
}

size_t etch_opt_sparse_addmm_prepare(etch_kernel_context *ctx, etch_value **args, size_t nargs,
                                     void *buf, size_t cap) {
    if (nargs < 6)
        return 0;
    return sp_prepare(ctx, args, nargs, buf, cap, 1, 2, false, false, etch_opt_addmm_prepare);
}

size_t etch_opt_sparse_linear_prepare(etch_kernel_context *ctx, etch_value **args, size_t nargs,
                                      void *buf, size_t cap) {
    if (nargs < 4)
        return 0;
    return sp_prepare(ctx, args, nargs, buf, cap, 0, 1, true, true, etch_opt_linear_prepare);
}

/* The compressed weight of this call site, when it still is w's. */
static bool prepared_sp(const etch_kernel_context *ctx, const etch_tensor *w, etch_sp24 *sp) {
    size_t size = 0;
    const sp_prep *h = (const sp_prep *)etch_kernel_prepared(ctx, &size);
    if (!h || size < SP_DATA || h->magic != SP_MAGIC || !w || h->w != w->data || w->dim != 2)
        return false;
    for (int i = 0; i < 2; i++)
        if (h->sizes[i] != w->sizes[i] || h->strides[i] != w->strides[i])
            return false;
    const int64_t G = (h->K + 3) / 4, T = (h->N + SP_NT - 1) / SP_NT;
    sp->K = h->K;
    sp->N = h->N;
    sp->G = G;
    sp->T = T;
    sp->vals = (const float *)(const void *)((const uint8_t *)h + SP_DATA);
    sp->idx = (const uint8_t *)h + SP_DATA + align64((size_t)(T * G * 2 * SP_NT) * sizeof(float));
    return true;
}

/* x [M, K] and out [M, N], both row-contiguous with rows ldx / ldc apart (2-d), resized */
static bool sp_operands(etch_kernel_context *ctx, etch_value *xv, etch_value *outv,
                        const etch_sp24 *sp, const float **x, int64_t *ldx, float **c,
                        int64_t *M) {
    etch_tensor *xt = etch_opt_fast_tensor(xv, ETCH_DTYPE_FLOAT, true);
    etch_tensor *out = etch_opt_fast_tensor(outv, ETCH_DTYPE_FLOAT, false);
    if (!xt || !out || xt->dim < 1 || xt->sizes[xt->dim - 1] != sp->K || out == xt)
        return false;
    int64_t rows = 1, sizes[ETCH_MAX_DIMS];
    for (unsigned i = 0; i + 1 < xt->dim; i++)
        rows *= (sizes[i] = xt->sizes[i]);
    sizes[xt->dim - 1] = sp->N;
    if (etch_kernel_resize(ctx, out, xt->dim, sizes) != ETCH_OK)
        return true; /* failure recorded: *c stays NULL */
    if (!etch_tensor_is_contiguous(out) || etch_tensor_numel(out) == 0)
        return false;
    *x = (const float *)xt->data;
    *ldx = sp->K;
    *c = (float *)out->data;
    *M = rows;
    return true;
}

ETCH_OPT_KERNEL(sparse_mm_out) {
    etch_sp24 sp;
    const float *x = NULL;
    float *c = NULL;
    int64_t ldx = 0, M = 0;
    etch_tensor *a = nargs >= 3 ? float_tensor(args[0]) : NULL;
    if (a && a->dim == 2 && prepared_sp(ctx, float_tensor(args[1]), &sp) &&
        sp_operands(ctx, args[0], args[2], &sp, &x, &ldx, &c, &M)) {
        if (c)
            etch_sp24_linear(ctx, &sp, x, ldx, M, c, sp.N, 1.0f, 0.0f, NULL, 0,
                             etch_kernel_epilogue(ctx));
        return;
    }
    etch_opt_mm_out(ctx, args, nargs);
}

ETCH_OPT_KERNEL(sparse_addmm_out) {
    etch_sp24 sp;
    const float *x = NULL;
    float *c = NULL;
    int64_t ldx = 0, M = 0;
    etch_tensor *bias = nargs >= 6 ? float_tensor(args[0]) : NULL;
    etch_tensor *a = bias ? float_tensor(args[1]) : NULL;
    double beta = 1.0, alpha = 1.0;
    /* a bias of [N], [1, N] or one element (broadcast along the rows) */
    if (a && a->dim == 2 && prepared_sp(ctx, float_tensor(args[2]), &sp) &&
        etch_value_scalar_to_double(args[3], &beta) &&
        etch_value_scalar_to_double(args[4], &alpha) && bias->data && bias->dim >= 1 &&
        bias->dim <= 2 && (bias->dim == 1 || bias->sizes[0] == 1) &&
        (bias->sizes[bias->dim - 1] == sp.N || bias->sizes[bias->dim - 1] == 1) &&
        sp_operands(ctx, args[1], args[5], &sp, &x, &ldx, &c, &M)) {
        const int64_t bcs = bias->sizes[bias->dim - 1] == 1 ? 0 : bias->strides[bias->dim - 1];
        if (c)
            etch_sp24_linear(ctx, &sp, x, ldx, M, c, sp.N, (float)alpha, (float)beta,
                             (const float *)bias->data, bcs, etch_kernel_epilogue(ctx));
        return;
    }
    etch_opt_addmm_out(ctx, args, nargs);
}

ETCH_OPT_KERNEL(sparse_linear_out) {
    etch_sp24 sp;
    const float *x = NULL;
    float *c = NULL;
    int64_t ldx = 0, M = 0;
    etch_value *bv = nargs >= 4 ? args[2] : NULL;
    const bool has_bias = bv && bv->tag != ETCH_VALUE_NONE;
    etch_tensor *bias = has_bias ? float_tensor(bv) : NULL;
    if (nargs >= 4 && (!has_bias || (bias && bias->data && bias->dim == 1)) &&
        prepared_sp(ctx, float_tensor(args[1]), &sp) &&
        (!bias || bias->sizes[0] == sp.N || bias->sizes[0] == 1) &&
        sp_operands(ctx, args[0], args[3], &sp, &x, &ldx, &c, &M)) {
        const int64_t bcs = bias && bias->sizes[0] != 1 ? bias->strides[0] : 0;
        if (c)
            etch_sp24_linear(ctx, &sp, x, ldx, M, c, sp.N, 1.0f, bias ? 1.0f : 0.0f,
                             bias ? (const float *)bias->data : NULL, bcs,
                             etch_kernel_epilogue(ctx));
        return;
    }
    etch_opt_linear_out(ctx, args, nargs);
}
