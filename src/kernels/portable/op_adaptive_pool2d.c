/*
 * aten::_adaptive_avg_pool2d.out(Tensor self, SymInt[2] output_size, *, Tensor(a!) out)
 * aten::adaptive_max_pool2d.out(Tensor self, int[2] output_size, *, Tensor(a!) out,
 *                               Tensor(b!) indices) -> (Tensor(a!), Tensor(b!))
 *
 * Input [C, H, W] or [N, C, H, W] with non-empty H and W (and C when batched), Float, Double,
 * Half or BFloat16; out has self's dtype. output_size has two values >= 0. Output cell
 * (oh, ow) covers rows [floor(oh * H / OH), ceil((oh + 1) * H / OH)) and likewise columns.
 * The average accumulates in double. The max keeps the first maximum and the last NaN (as
 * torch); `indices` (Long) holds h * W + w within the input plane. Any dim order.
 */
#include <math.h>

#include "kernels/portable/portable_nn.h"

#define LIMIT 0x3fffffffLL

typedef struct ada_job {
    int dtype;
    bool is_max;
    int64_t C, H, W, OH, OW;
    const char *in;
    char *out, *idx;
    int64_t es;
    int64_t is[4], os[4], xs[4]; /* byte strides n/c/h/w */
} ada_job;

static void ada_planes(void *arg, int64_t p0, int64_t p1) {
    const ada_job *j = (const ada_job *)arg;
    for (int64_t p = p0; p < p1; p++) {
        int64_t n = p / j->C, c = p % j->C;
        const char *plane = j->in + n * j->is[0] + c * j->is[1];
        for (int64_t oh = 0; oh < j->OH; oh++) {
            int64_t h0 = oh * j->H / j->OH, h1 = ((oh + 1) * j->H + j->OH - 1) / j->OH;
            for (int64_t ow = 0; ow < j->OW; ow++) {
                int64_t w0 = ow * j->W / j->OW, w1 = ((ow + 1) * j->W + j->OW - 1) / j->OW;
                char *o = j->out + n * j->os[0] + c * j->os[1] + oh * j->os[2] + ow * j->os[3];
                double v[ETCH_NN_CHUNK];
                if (!j->is_max) {
                    double sum = 0;
                    for (int64_t ih = h0; ih < h1; ih++) {
                        for (int64_t x = w0; x < w1; x += ETCH_NN_CHUNK) {
                            int64_t m = w1 - x < ETCH_NN_CHUNK ? w1 - x : ETCH_NN_CHUNK;
                            etch_pk_load_row_f64(v, plane + ih * j->is[2] + x * j->is[3], j->is[3],
                                                 m, j->dtype);
                            for (int64_t k = 0; k < m; k++)
                                sum += v[k];
                        }
                    }
                    etch_pk_store_f64(o, j->dtype, sum / (double)((h1 - h0) * (w1 - w0)));
                    continue;
                }
                double best = -INFINITY;
                int64_t bi = h0 * j->W + w0;
                const char *bp = plane + h0 * j->is[2] + w0 * j->is[3];
                for (int64_t ih = h0; ih < h1; ih++) {
                    for (int64_t x = w0; x < w1; x += ETCH_NN_CHUNK) {
                        int64_t m = w1 - x < ETCH_NN_CHUNK ? w1 - x : ETCH_NN_CHUNK;
                        const char *row = plane + ih * j->is[2] + x * j->is[3];
                        etch_pk_load_row_f64(v, row, j->is[3], m, j->dtype);
                        for (int64_t k = 0; k < m; k++) {
                            if (v[k] > best || isnan(v[k])) {
                                best = v[k];
                                bi = ih * j->W + x + k;
                                bp = row + k * j->is[3];
                            }
                        }
                    }
                }
                memcpy(o, bp, (size_t)j->es);
                memcpy(j->idx + n * j->xs[0] + c * j->xs[1] + oh * j->xs[2] + ow * j->xs[3], &bi,
                       8);
            }
        }
    }
}

static void adaptive_common(etch_kernel_context *ctx, etch_value *self_v, etch_value *size_v,
                            etch_value *out_v, etch_value *idx_v) {
    bool is_max = idx_v != NULL;
    etch_tensor *in = etch_pk_tensor(ctx, self_v, "self");
    etch_tensor *out = in ? etch_pk_tensor(ctx, out_v, "out") : NULL;
    etch_tensor *idx = out && is_max ? etch_pk_tensor(ctx, idx_v, "indices") : NULL;
    if (!out || (is_max && !idx))
        return;
    size_t len;
    const int64_t *os = etch_pk_int_list(ctx, size_v, "output_size", &len);
    if (!os)
        return;
    if (len != 2) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "output_size must have 2 values, got %zu",
                         len);
        return;
    }
    for (int i = 0; i < 2; i++) {
        if (os[i] < 0 || os[i] > LIMIT) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "output_size[%d] = %lld is out of range", i, (long long)os[i]);
            return;
        }
    }
    char is[ETCH_PK_SHAPE_BUF];
    etch_pk_shape_str(is, sizeof is, in->dim, in->sizes);
    bool batched = in->dim == 4;
    if ((in->dim != 3 && in->dim != 4) || in->sizes[in->dim - 1] == 0 ||
        in->sizes[in->dim - 2] == 0 || (batched && in->sizes[1] == 0)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "expected a 3-D [C, H, W] or 4-D [N, C, H, W] input with non-empty "
                         "non-batch dims, got %s",
                         is);
        return;
    }
    if (!etch_nn_check_float(ctx, in, "self") ||
        !etch_pk_check_same_dtype(ctx, in, "self", out, "out") ||
        (is_max && !etch_nn_check_dtype(ctx, idx, "indices", ETCH_DTYPE_LONG)))
        return;
    int64_t N = batched ? in->sizes[0] : 1;
    int64_t C = in->sizes[in->dim - 3], H = in->sizes[in->dim - 2], W = in->sizes[in->dim - 1];
    if (H > LIMIT || W > LIMIT) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "input %s is too large", is);
        return;
    }
    int64_t osz[4];
    size_t od = 0;
    if (batched)
        osz[od++] = N;
    osz[od++] = C;
    osz[od++] = os[0];
    osz[od++] = os[1];
    if (etch_pk_resize(ctx, out, od, osz) != ETCH_OK ||
        (is_max && etch_pk_resize(ctx, idx, od, osz) != ETCH_OK))
        return;
    if (etch_tensor_numel(out) == 0)
        return;
    ada_job j;
    j.dtype = in->dtype;
    j.is_max = is_max;
    j.C = C;
    j.H = H;
    j.W = W;
    j.OH = os[0];
    j.OW = os[1];
    j.in = (const char *)in->data;
    j.out = (char *)out->data;
    j.idx = is_max ? (char *)idx->data : NULL;
    j.es = (int64_t)etch_dtype_size(in->dtype);
    for (int i = 0; i < 4; i++) {
        int src = batched ? i : i - 1;
        j.is[i] = src < 0 ? 0 : in->strides[src] * j.es;
        j.os[i] = src < 0 ? 0 : out->strides[src] * j.es;
        j.xs[i] = src < 0 || !is_max ? 0 : idx->strides[src] * 8;
    }
    double per = (double)H * (double)W + (double)j.OH * (double)j.OW;
    etch_kernel_parallel_for(ctx, N * C, per >= 65536 ? 1 : (int64_t)(65536 / per), ada_planes, &j);
}

ETCH_PK_KERNEL(adaptive_avg_pool2d_out) {
    if (!etch_pk_nargs(ctx, nargs, 3))
        return;
    adaptive_common(ctx, args[0], args[1], args[2], NULL);
}

ETCH_PK_KERNEL(adaptive_max_pool2d_out) {
    if (!etch_pk_nargs(ctx, nargs, 4))
        return;
    adaptive_common(ctx, args[0], args[1], args[2], args[3]);
}
