/*
 * The body shared by the quantized embeddings (op_embedding_byte.c, op_embedding_4bit.c,
 * op_embedding_2bit.c), ExecuTorch's kernels/quantized/cpu/op_embedding*.cpp:
 *
 *   (Tensor weight, Tensor weight_scales, Tensor? weight_zero_points, int weight_quant_min,
 *    int weight_quant_max, Tensor indices, [ScalarType? dtype,] Tensor(a!) out)
 *
 * weight [V, P]: Byte or Char values (nbit 8, D = P), or Byte holding packed signed values
 * (nbit 4: two per byte, the even column in the high nibble, value = nibble - 8, D = 2 P;
 * nbit 2: four per byte, column j in bits 2 (j % 4), value = bits - 2, D = 4 P).
 * weight_scales [V] (one group per row) or [V, G] with G dividing D (groups of D / G
 * columns); Float, Half, BFloat16 or Double, finite. weight_zero_points: None, or the shape
 * of weight_scales, of a floating or integer dtype. out = indices.shape + [D], of a floating
 * dtype (equal to `dtype` when given): (float(w) - float(zp)) * float(scale), rounded once
 * to out's dtype. Every index (Long or Int) must be in [0, V); quant_min <= quant_max within
 * weight's dtype range for nbit 8, within [-8, 7] / [-2, 1] for nbit 4 / 2 (what ExecuTorch's
 * reference asserts). Any dim order.
 */
#include <math.h>

#include "kernels/portable/portable_quant.h"

static int64_t weight_value(const etch_tensor *w, int nbit, int64_t row, int64_t col) {
    if (nbit == 8)
        return etch_q_int_at(w, row * w->sizes[1] + col);
    int per = 8 / nbit;
    int64_t b = etch_q_int_at(w, row * w->sizes[1] + col / per);
    if (nbit == 4)
        return (col % 2 ? (b & 0x0F) : ((b >> 4) & 0x0F)) - 8;
    return ((b >> (2 * (col % 4))) & 3) - 2;
}

void etch_q_embedding(etch_kernel_context *ctx, etch_value **args, size_t nargs, int nbit,
                      const etch_value *dtype_arg, size_t out_index) {
    if (!etch_pk_nargs(ctx, nargs, out_index + 2))
        return;
    bool has_z;
    etch_tensor *w = etch_pk_tensor(ctx, args[0], "weight");
    etch_tensor *s = w ? etch_pk_tensor(ctx, args[1], "weight_scales") : NULL;
    etch_tensor *z = s ? etch_pk_opt_tensor(ctx, args[2], "weight_zero_points", &has_z) : NULL;
    if (!s || etch_kernel_failed(ctx))
        return;
    etch_tensor *ix = etch_pk_tensor(ctx, args[5], "indices");
    etch_tensor *out = ix ? etch_pk_tensor(ctx, args[out_index], "out") : NULL;
    int64_t qmin, qmax;
    int dtype = 0;
    bool given = false;
    if (!out || !etch_pk_int(ctx, args[3], "weight_quant_min", &qmin) ||
        !etch_pk_int(ctx, args[4], "weight_quant_max", &qmax) ||
        (dtype_arg && !etch_q_opt_dtype_arg(ctx, dtype_arg, "dtype", &dtype, &given)) ||
        !etch_q_check_float_out(ctx, out, given, dtype, "dtype") ||
        etch_q_check_stop(ctx, w, s, has_z ? z : NULL))
        return;
    if (w->dim != 2) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "weight must be 2-D, got rank %u",
                         (unsigned)w->dim);
        return;
    }
    if (nbit == 8 ? (w->dtype != ETCH_DTYPE_BYTE && w->dtype != ETCH_DTYPE_CHAR)
                  : w->dtype != ETCH_DTYPE_BYTE) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "weight has dtype %s; it must be %s",
                         etch_dtype_name(w->dtype), nbit == 8 ? "Byte or Char" : "Byte (packed)");
        return;
    }
    if (qmin > qmax) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "weight_quant_min %lld is greater than weight_quant_max %lld",
                         (long long)qmin, (long long)qmax);
        return;
    }
    if (nbit == 8 && !etch_q_check_qrange(ctx, w->dtype, qmin, qmax))
        return;
    if (nbit != 8 && (qmin < -(1 << (nbit - 1)) || qmax > (1 << (nbit - 1)) - 1)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "[weight_quant_min, weight_quant_max] = [%lld, %lld] is outside the "
                         "%d-bit range [%d, %d]",
                         (long long)qmin, (long long)qmax, nbit, -(1 << (nbit - 1)),
                         (1 << (nbit - 1)) - 1);
        return;
    }
    if (w->sizes[1] > INT32_MAX) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "weight has %lld columns, too many",
                         (long long)w->sizes[1]);
        return;
    }
    int64_t V = w->sizes[0], D = w->sizes[1] * (8 / nbit);
    if (s->dim != 1 && s->dim != 2) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "weight_scales must be 1-D or 2-D, got rank %u", (unsigned)s->dim);
        return;
    }
    if (s->sizes[0] != V) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "weight_scales has %lld rows, weight has %lld", (long long)s->sizes[0],
                         (long long)V);
        return;
    }
    int64_t G = s->dim == 2 ? s->sizes[1] : 1;
    if (G <= 0 || D % G != 0) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "weight_scales has %lld groups per row, which do not divide the %lld "
                         "columns of weight (%lld bytes of %d-bit values)",
                         (long long)G, (long long)D, (long long)w->sizes[1], nbit);
        return;
    }
    if (!etch_pk_is_float(s->dtype)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE,
                         "weight_scales has dtype %s; it must be Float, Half, BFloat16 or Double",
                         etch_dtype_name(s->dtype));
        return;
    }
    int64_t ns = etch_tensor_numel(s);
    for (int64_t i = 0; i < ns; i++)
        if (!isfinite(etch_q_f64_at(s, i))) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "weight_scales[%lld] is not finite",
                             (long long)i);
            return;
        }
    if (has_z) {
        if (z->dim != s->dim || z->sizes[0] != s->sizes[0] || (s->dim == 2 && z->sizes[1] != G)) {
            char a[ETCH_PK_SHAPE_BUF], b[ETCH_PK_SHAPE_BUF];
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "weight_zero_points has shape %s, weight_scales %s",
                             etch_pk_shape_str(a, sizeof a, z->dim, z->sizes),
                             etch_pk_shape_str(b, sizeof b, s->dim, s->sizes));
            return;
        }
        if (!etch_pk_dtype_is_real(z->dtype) || z->dtype == ETCH_DTYPE_BOOL) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE,
                             "weight_zero_points has dtype %s; it must be floating or integer",
                             etch_dtype_name(z->dtype));
            return;
        }
        for (int64_t i = 0; i < ns; i++)
            if (!isfinite(etch_q_f64_at(z, i))) {
                etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                                 "weight_zero_points[%lld] is not finite", (long long)i);
                return;
            }
    }
    if (ix->dtype != ETCH_DTYPE_LONG && ix->dtype != ETCH_DTYPE_INT) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "indices must be Long or Int, got %s",
                         etch_dtype_name(ix->dtype));
        return;
    }
    if (ix->dim + 1 > ETCH_MAX_DIMS) {
        etch_kernel_fail(ctx, ETCH_ERR_NOT_SUPPORTED, "indices of rank %u give an out of rank %u",
                         (unsigned)ix->dim, (unsigned)ix->dim + 1);
        return;
    }
    if (etch_kernel_checking(ctx))
        return; /* the indices' count and values are the call's: they come at run time */
    int64_t ni = etch_tensor_numel(ix);
    if (ni > 0 && D > INT64_MAX / ni) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "out would have more than INT64_MAX elements (%lld indices x %lld)",
                         (long long)ni, (long long)D);
        return;
    }
    for (int64_t i = 0; i < ni; i++) {
        int64_t v = etch_q_int_at(ix, i);
        if (v < 0 || v >= V) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "index %lld is out of range for a weight of %lld rows", (long long)v,
                             (long long)V);
            return;
        }
    }
    int64_t osz[ETCH_MAX_DIMS];
    for (unsigned d = 0; d < ix->dim; d++)
        osz[d] = ix->sizes[d];
    osz[ix->dim] = D;
    if (etch_pk_resize(ctx, out, ix->dim + 1u, osz) != ETCH_OK)
        return;
    int64_t gs = D / G;
    bool oc = etch_tensor_is_contiguous(out);
    for (int64_t i = 0; i < ni; i++) {
        int64_t row = etch_q_int_at(ix, i);
        if (row < 0 || row >= V) { /* out shares bytes with indices and overwrote them */
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "indices changed while out was written (they share memory)");
            return;
        }
        float scale = 0, zp = 0;
        for (int64_t j = 0; j < D; j++) {
            if (j % gs == 0) {
                int64_t g = row * G + j / gs;
                scale = (float)etch_q_f64_at(s, g);
                zp = has_z ? (float)etch_q_f64_at(z, g) : 0.0f;
            }
            float v = ((float)weight_value(w, nbit, row, j) - zp) * scale;
            etch_pk_store_f64((char *)out->data + etch_q_offset_c(out, oc, i * D + j),
                              out->dtype, (double)v);
        }
    }
}
