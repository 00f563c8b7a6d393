/* Optimized aten::mm.out, aten::bmm.out, aten::addmm.out and aten::linear.out on
 * etch_opt_sgemm. Fast path: float32 operands and out, out with unit column stride (any
 * strides for the inputs); anything else goes to the portable kernel, which also produces the
 * error messages (dtype mismatch, shapes, ranks...). All four apply the fused activation
 * (etch_kernel_epilogue) to their Float output, on the fast path inside the GEMM tiles. */
#include <string.h>

#include "kernels/optimized/epilogue.h"
#include "kernels/optimized/gemm_isa.h"
#include "kernels/optimized/opt_gemm.h"
#include "kernels/portable/portable.h"
#include "kernels/portable/portable_nn.h"

static etch_tensor *float_tensor(etch_value *v) { return etch_opt_float_arg(v); }

/* After a portable fallback: the fused activation over a Float out of any layout and
 * alignment (elements copied in and out). */
static void epilogue_after_portable(etch_kernel_context *ctx, etch_value *outv) {
    const etch_epilogue *e = etch_kernel_epilogue(ctx);
    etch_tensor *out = outv && outv->tag == ETCH_VALUE_TENSOR ? outv->u.tensor : NULL;
    if (!e || !out || out->dtype != ETCH_DTYPE_FLOAT || out->dim > ETCH_MAX_DIMS ||
        etch_kernel_failed(ctx) || etch_tensor_numel(out) == 0)
        return;
    int64_t idx[ETCH_MAX_DIMS];
    memset(idx, 0, sizeof idx);
    unsigned char *base = (unsigned char *)out->data;
    const int64_t n = etch_tensor_numel(out);
    for (int64_t i = 0; i < n; i++) {
        int64_t off = 0;
        for (unsigned dd = 0; dd < out->dim; dd++)
            off += idx[dd] * out->strides[dd];
        float x;
        memcpy(&x, base + off * (int64_t)sizeof x, sizeof x);
        etch_opt_apply_epilogue(e, &x, 1);
        memcpy(base + off * (int64_t)sizeof x, &x, sizeof x);
        for (int dd = (int)out->dim - 1; dd >= 0; dd--) {
            if (++idx[dd] < out->sizes[dd])
                break;
            idx[dd] = 0;
        }
    }
}

/* out's last dim has unit stride and its rows (dim `rd`) are `ld` apart, so the GEMM can
 * write it (size-1 dims have any stride). */
static bool rows_ok(const etch_tensor *out, unsigned rd, int64_t *ld) {
    const unsigned last = out->dim - 1;
    if (out->sizes[last] > 1 && out->strides[last] != 1)
        return false;
    *ld = out->strides[rd];
    return out->sizes[rd] <= 1 || out->strides[rd] >= out->sizes[last];
}

/* ---- load-time prepacking of a constant weight (B operand) --------------------------------
 * The prepared buffer: this header, then the packed panels at PREP_DATA. The kernel uses them
 * only while the weight is the very tensor they were packed from (data pointer, sizes,
 * strides); the GEMM further checks ISA, shape and depth blocking. */
#define PREP_MAGIC 0x65504257u /* "WBPe" */
#define PREP_DATA 128          /* bytes before the panels (the header fits; 64-aligned) */

typedef struct prep_b {
    uint32_t magic;
    const void *w;
    int64_t sizes[2], strides[2];
    etch_sgemm_packed pk;
} prep_b;
_Static_assert(sizeof(prep_b) <= PREP_DATA, "prep_b header larger than PREP_DATA");

/* a "leading" operand with at most one row (static or upper bound): the matrix-vector path */
static bool one_row(etch_value *xv, bool all_leading) {
    etch_tensor *x = float_tensor(xv);
    if (!x || x->dim < 1)
        return false;
    int64_t rows = 1;
    for (unsigned i = 0; i + 1 < x->dim; i++)
        rows *= x->sizes[i];
    return all_leading ? rows <= 1 : (x->dim == 2 && x->sizes[0] <= 1);
}

/* Single-row call sites (a CNN's classifier) are prepared only when the ISA has a
 * matrix-vector kernel over the packed panels (gemv_p, which streams them faster than the
 * weight as it is) and the weight is at most this large: packing holds both copies until the
 * weight's pages go, and a language model's 100 MB classifier would raise the peak by that
 * much for a decode speed-up within noise (measured on stories110M). */
#define ONE_ROW_PACK_MAX ((size_t)32 << 20)

/* Is the call site one to leave unprepared: at most one row (x), and packing its weight
 * (args[wi]) not worth it by the rule above? */
static bool skip_one_row(etch_value **args, int xi, bool all_leading, int wi) {
    if (!one_row(args[xi], all_leading))
        return false;
    const etch_tensor *w = float_tensor(args[wi]);
    return !etch_sgemm_isa_for((int)etch_isa_active())->gemv_p || !w ||
           etch_tensor_nbytes(w) > ONE_ROW_PACK_MAX;
}

/* B = the weight in wv (2-d, b(k,j) = w[k,j], or w[j,k] when `transposed`) */
static size_t prepare_b(etch_kernel_context *ctx, etch_value **args, int wi, bool transposed,
                        void *buf, size_t cap) {
    etch_tensor *w = float_tensor(args[wi]);
    if (!w || w->dim != 2 || !(w->flags & ETCH_TENSOR_CONSTANT) ||
        w->dynamism != ETCH_SHAPE_STATIC || (buf && !w->data))
        return 0;
    const int64_t K = w->sizes[transposed ? 1 : 0], N = w->sizes[transposed ? 0 : 1];
    const size_t bytes = etch_opt_sgemm_packed_size(NULL, false, N, K);
    if (bytes == 0)
        return 0;
    if (!buf)
        return PREP_DATA + bytes;
    if (cap < PREP_DATA + bytes || ((uintptr_t)buf & 63))
        return 0;
    prep_b *h = (prep_b *)buf;
    memset(buf, 0, PREP_DATA); /* header and the gap after it: buffers compare bytewise */
    h->magic = PREP_MAGIC;
    h->w = w->data;
    for (int i = 0; i < 2; i++) {
        h->sizes[i] = w->sizes[i];
        h->strides[i] = w->strides[i];
    }
    float *dst = (float *)(void *)((uint8_t *)buf + PREP_DATA);
    etch_opt_sgemm_pack_b(NULL, (const float *)w->data, w->strides[transposed ? 1 : 0],
                          w->strides[transposed ? 0 : 1], K, N, dst, &h->pk);
    h->pk.data = NULL; /* position-independent: equal buffers can be shared */
    /* every path of the call then reads the packed copy (single rows too, where the ISA has
     * a matrix-vector kernel over it): the weight's own pages may go */
    if (etch_sgemm_isa_for((int)etch_isa_active())->gemv_p)
        etch_kernel_prepared_replaces(ctx, 1u << wi);
    return PREP_DATA + bytes;
}

/* The packed weight prepared for this call site, when it still is `w`'s. */
static const etch_sgemm_packed *prepared_b(const etch_kernel_context *ctx, const etch_tensor *w,
                                           etch_sgemm_packed *pk) {
    size_t size = 0;
    const prep_b *h = (const prep_b *)etch_kernel_prepared(ctx, &size);
    if (!h || size < PREP_DATA || h->magic != PREP_MAGIC || h->w != w->data || w->dim != 2)
        return NULL;
    for (int i = 0; i < 2; i++)
        if (h->sizes[i] != w->sizes[i] || h->strides[i] != w->strides[i])
            return NULL;
    *pk = h->pk;
    pk->data = (const float *)(const void *)((const uint8_t *)h + PREP_DATA);
    return pk;
}

size_t etch_opt_mm_prepare(etch_kernel_context *ctx, etch_value **args, size_t nargs, void *buf,
                           size_t cap) {
    if (nargs < 3 || skip_one_row(args, 0, false, 1))
        return 0;
    return prepare_b(ctx, args, 1, false, buf, cap);
}

size_t etch_opt_addmm_prepare(etch_kernel_context *ctx, etch_value **args, size_t nargs,
                              void *buf, size_t cap) {
    if (nargs < 6 || skip_one_row(args, 1, false, 2))
        return 0;
    return prepare_b(ctx, args, 2, false, buf, cap);
}

size_t etch_opt_linear_prepare(etch_kernel_context *ctx, etch_value **args, size_t nargs,
                               void *buf, size_t cap) {
    if (nargs < 4 || skip_one_row(args, 0, true, 1))
        return 0;
    return prepare_b(ctx, args, 1, true, buf, cap);
}

static void desc_init(etch_sgemm_desc *d, etch_kernel_context *ctx) {
    memset(d, 0, sizeof *d);
    d->alpha = 1.0f;
    d->beta = 1.0f;
    d->epilogue = etch_kernel_epilogue(ctx);
}

/* ---- mm ---------------------------------------------------------------------------------- */

/* d's operands for out[M,N] = a[M,K] @ b[K,N] (2-d, already resized), with b's prepacked
 * panels when the call site has them (pk holds their description). */
static void mm_operands(etch_kernel_context *ctx, etch_sgemm_desc *d, const etch_tensor *a,
                        const etch_tensor *b, etch_tensor *out, etch_sgemm_packed *pk) {
    d->M = out->sizes[0];
    d->N = out->sizes[1];
    d->K = a->sizes[1];
    d->a = (const float *)a->data;
    d->a_rs = a->strides[0];
    d->a_cs = a->strides[1];
    d->b = (const float *)b->data;
    d->b_rs = b->strides[0];
    d->b_cs = b->strides[1];
    d->c = (float *)out->data;
    d->b_packed = prepared_b(ctx, b, pk);
}

ETCH_OPT_KERNEL(mm_out) {
    etch_tensor *a = nargs >= 3 ? float_tensor(args[0]) : NULL;
    etch_tensor *b = a ? float_tensor(args[1]) : NULL;
    etch_tensor *out = b ? float_tensor(args[2]) : NULL;
    if (!out || a->dim != 2 || b->dim != 2 || out->dim != 2 || a->sizes[1] != b->sizes[0]) {
        etch_portable_mm_out(ctx, args, nargs);
        epilogue_after_portable(ctx, nargs >= 3 ? args[2] : NULL);
        return;
    }
    const int64_t sizes[2] = {a->sizes[0], b->sizes[1]};
    if (etch_kernel_resize(ctx, out, 2, sizes) != ETCH_OK)
        return;
    etch_sgemm_desc d;
    desc_init(&d, ctx);
    if (!rows_ok(out, 0, &d.ldc)) {
        etch_portable_mm_out(ctx, args, nargs);
        epilogue_after_portable(ctx, args[2]);
        return;
    }
    etch_sgemm_packed pk;
    mm_operands(ctx, &d, a, b, out, &pk);
    etch_opt_sgemm(ctx, &d);
}

/* ---- addmm ------------------------------------------------------------------------------- */

ETCH_OPT_KERNEL(addmm_out) {
    etch_tensor *bias = nargs >= 6 ? float_tensor(args[0]) : NULL;
    etch_tensor *a = bias ? float_tensor(args[1]) : NULL;
    etch_tensor *b = a ? float_tensor(args[2]) : NULL;
    etch_tensor *out = b ? float_tensor(args[5]) : NULL;
    double beta = 1.0, alpha = 1.0;
    bool fast = out && a->dim == 2 && b->dim == 2 && out->dim == 2 &&
                a->sizes[1] == b->sizes[0] && bias->dim <= 2 &&
                etch_value_scalar_to_double(args[3], &beta) &&
                etch_value_scalar_to_double(args[4], &alpha);
    const int64_t sizes[2] = {a ? a->sizes[0] : 0, b ? b->sizes[1] : 0};
    int64_t brs = 0, bcs = 0;
    for (unsigned i = 0; fast && i < bias->dim; i++) {
        const unsigned od = 2 - bias->dim + i;
        fast = bias->sizes[i] == 1 || bias->sizes[i] == sizes[od];
        const int64_t st = bias->sizes[i] == 1 ? 0 : bias->strides[i];
        if (od == 0)
            brs = st;
        else
            bcs = st;
    }
    if (!fast) {
        etch_portable_addmm_out(ctx, args, nargs);
        epilogue_after_portable(ctx, nargs >= 6 ? args[5] : NULL);
        return;
    }
    if (etch_kernel_resize(ctx, out, 2, sizes) != ETCH_OK)
        return;
    etch_sgemm_desc d;
    desc_init(&d, ctx);
    if (!rows_ok(out, 0, &d.ldc)) {
        etch_portable_addmm_out(ctx, args, nargs);
        epilogue_after_portable(ctx, args[5]);
        return;
    }
    etch_sgemm_packed pk;
    mm_operands(ctx, &d, a, b, out, &pk);
    d.alpha = (float)alpha; /* rounded to float as torch's opmath */
    d.beta = (float)beta;
    /* beta == 0 ignores self (NaN/inf in it do not propagate), as torch */
    if (d.beta != 0.0f && etch_tensor_numel(bias) > 0) {
        d.bias = (const float *)bias->data;
        d.bias_rs = brs;
        d.bias_cs = bcs;
    }
    etch_opt_sgemm(ctx, &d);
}

/* ---- bmm --------------------------------------------------------------------------------- */

typedef struct bmm_job {
    etch_sgemm_desc d;
    int64_t a_bs, b_bs, c_bs;
} bmm_job;

static void bmm_range(void *arg, int64_t begin, int64_t end) {
    const bmm_job *j = (const bmm_job *)arg;
    for (int64_t i = begin; i < end; i++) {
        etch_sgemm_desc d = j->d;
        d.a += i * j->a_bs;
        d.b += i * j->b_bs;
        d.c += i * j->c_bs;
        etch_opt_sgemm(NULL, &d); /* one thread, no scratch: the direct path */
    }
}

ETCH_OPT_KERNEL(bmm_out) {
    etch_tensor *a = nargs >= 3 ? float_tensor(args[0]) : NULL;
    etch_tensor *b = a ? float_tensor(args[1]) : NULL;
    etch_tensor *out = b ? float_tensor(args[2]) : NULL;
    if (!out || a->dim != 3 || b->dim != 3 || out->dim != 3 || a->sizes[0] != b->sizes[0] ||
        a->sizes[2] != b->sizes[1]) {
        etch_portable_bmm_out(ctx, args, nargs);
        epilogue_after_portable(ctx, nargs >= 3 ? args[2] : NULL);
        return;
    }
    const int64_t sizes[3] = {a->sizes[0], a->sizes[1], b->sizes[2]};
    if (etch_kernel_resize(ctx, out, 3, sizes) != ETCH_OK)
        return;
    bmm_job j;
    desc_init(&j.d, ctx);
    if (!rows_ok(out, 1, &j.d.ldc)) {
        etch_portable_bmm_out(ctx, args, nargs);
        epilogue_after_portable(ctx, args[2]);
        return;
    }
    if (etch_tensor_numel(out) == 0)
        return;
    j.d.M = sizes[1];
    j.d.N = sizes[2];
    j.d.K = a->sizes[2];
    j.d.a = (const float *)a->data;
    j.d.a_rs = a->strides[1];
    j.d.a_cs = a->strides[2];
    j.d.b = (const float *)b->data;
    j.d.b_rs = b->strides[1];
    j.d.b_cs = b->strides[2];
    j.d.c = (float *)out->data;
    const bool k0 = j.d.K == 0; /* operands may have no data: never offset them */
    j.a_bs = k0 ? 0 : a->strides[0];
    j.b_bs = k0 ? 0 : b->strides[0];
    j.c_bs = out->strides[0];
    const int64_t batches = sizes[0];
    const double per = (double)j.d.M * (double)j.d.N * (double)(j.d.K > 0 ? j.d.K : 1);
    const int threads = etch_kernel_num_threads(ctx);
    if (batches > 1 && per < 4e6 &&
        (threads == 1 ||
         (batches >= threads && (batches % threads == 0 || batches >= 3 * threads)))) {
        /* many small products (attention: one per head): one parallel loop over the batch,
         * each product on one thread without scratch (the direct path, which packs A once
         * for up to 64 rows), so the threads get equal shares and there is one fork/join
         * per call instead of one per product; larger products (or too few for the
         * threads) go one by one through the packed, threaded GEMM */
        const int64_t grain = per >= 65536 ? 1 : (int64_t)(65536 / per) + 1;
        etch_kernel_parallel_for(ctx, batches, grain, bmm_range, &j);
        return;
    }
    for (int64_t i = 0; i < batches; i++) {
        etch_sgemm_desc d = j.d;
        d.a += i * j.a_bs;
        d.b += i * j.b_bs;
        d.c += i * j.c_bs;
        etch_opt_sgemm(ctx, &d);
    }
}

/* ---- linear ------------------------------------------------------------------------------ */

ETCH_OPT_KERNEL(linear_out) {
    etch_tensor *x = nargs >= 4 ? float_tensor(args[0]) : NULL;
    etch_tensor *w = x ? float_tensor(args[1]) : NULL;
    etch_value *bv = nargs >= 4 ? args[2] : NULL;
    const bool has_bias = bv && bv->tag != ETCH_VALUE_NONE;
    etch_tensor *bias = has_bias ? float_tensor(bv) : NULL;
    etch_tensor *out = w && (!has_bias || bias) ? float_tensor(args[3]) : NULL;
    bool fast = out && x->dim >= 1 && w->dim == 2 && w->sizes[1] == x->sizes[x->dim - 1] &&
                out->dim == x->dim;
    const int64_t N = w ? w->sizes[0] : 0;
    if (fast && has_bias)
        fast = bias->dim == 0 ||
               (bias->dim == 1 && (bias->sizes[0] == N || bias->sizes[0] == 1));
    /* the leading dims of input must flatten into one row dimension */
    const unsigned dim = x ? x->dim : 0;
    int64_t M = 1;
    for (unsigned i = 0; fast && i + 1 < dim; i++) {
        M *= x->sizes[i];
        if (i + 2 < dim && x->sizes[i] > 1 &&
            x->strides[i] != x->strides[i + 1] * x->sizes[i + 1])
            fast = false;
    }
    if (!fast) {
        etch_portable_linear_out(ctx, args, nargs);
        epilogue_after_portable(ctx, nargs >= 4 ? args[3] : NULL);
        return;
    }
    int64_t sizes[ETCH_MAX_DIMS];
    for (unsigned i = 0; i + 1 < dim; i++)
        sizes[i] = x->sizes[i];
    sizes[dim - 1] = N;
    if (etch_kernel_resize(ctx, out, dim, sizes) != ETCH_OK)
        return;
    /* out must flatten the same way, rows ldc apart */
    bool out_ok = out->sizes[dim - 1] <= 1 || out->strides[dim - 1] == 1;
    for (unsigned i = 0; out_ok && i + 2 < dim; i++)
        out_ok = out->sizes[i] <= 1 || out->strides[i] == out->strides[i + 1] * out->sizes[i + 1];
    etch_sgemm_desc d;
    desc_init(&d, ctx);
    d.ldc = dim >= 2 ? out->strides[dim - 2] : N;
    if (dim >= 2 && M > 1 && d.ldc < N)
        out_ok = false;
    if (!out_ok) {
        etch_portable_linear_out(ctx, args, nargs);
        epilogue_after_portable(ctx, args[3]);
        return;
    }
    if (etch_tensor_numel(out) == 0)
        return;
    d.M = M;
    d.N = N;
    d.K = x->sizes[dim - 1];
    d.a = (const float *)x->data;
    d.a_rs = dim >= 2 ? x->strides[dim - 2] : 0;
    d.a_cs = x->strides[dim - 1];
    d.b = (const float *)w->data; /* b(k, j) = weight[j, k] */
    d.b_rs = w->strides[1];
    d.b_cs = w->strides[0];
    d.c = (float *)out->data;
    etch_sgemm_packed pk;
    d.b_packed = prepared_b(ctx, w, &pk);
    if (has_bias && etch_tensor_numel(bias) > 0) {
        d.bias = (const float *)bias->data;
        d.bias_rs = 0;
        d.bias_cs = bias->dim == 1 && bias->sizes[0] == N && N > 1 ? bias->strides[0] : 0;
    }
    etch_opt_sgemm(ctx, &d);
}
