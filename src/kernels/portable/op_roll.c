/* aten::roll.out(Tensor self, int[1] shifts, int[1] dims=[], *, Tensor(a!) out)
 *
 * out[i] = self[i - shift] along each dim of dims (cyclic; a dim named twice rolls twice), or,
 * with dims empty, along self's row-major order (one shift). Converts to out's dtype (copy_).
 * Any dim orders. */
#include "kernels/portable/portable_shape.h"

/* Flat (row-major) element position -> element offset in t. */
static int64_t flat_offset(const etch_tensor *t, int64_t q, int64_t *idx) {
    int64_t off = 0;
    for (int d = (int)t->dim - 1; d >= 0; d--) {
        idx[d] = q % t->sizes[d];
        q /= t->sizes[d];
        off += idx[d] * t->strides[d];
    }
    return off;
}

static void next_offset(const etch_tensor *t, int64_t *idx, int64_t *off) {
    for (int d = (int)t->dim - 1; d >= 0; d--) {
        *off += t->strides[d];
        if (++idx[d] < t->sizes[d])
            return;
        *off -= t->strides[d] * t->sizes[d];
        idx[d] = 0;
    }
}

/* n elements from self's flat position s to out's flat position o. */
static void flat_copy(etch_tensor *out, int64_t o, const etch_tensor *self, int64_t s, int64_t n) {
    if (n <= 0)
        return;
    int64_t oi[ETCH_MAX_DIMS], si[ETCH_MAX_DIMS];
    int64_t ooff = flat_offset(out, o, oi), soff = flat_offset(self, s, si);
    int64_t oes = (int64_t)etch_dtype_size(out->dtype), ses = (int64_t)etch_dtype_size(self->dtype);
    etch_pk_convert c = {self->dtype, out->dtype};
    for (int64_t i = 0; i < n; i++) {
        char *p[2] = {(char *)out->data + ooff * oes, (char *)self->data + soff * ses};
        int64_t st[2] = {0, 0};
        etch_pk_convert_inner(&c, p, st, 1);
        if (i + 1 < n) {
            next_offset(out, oi, &ooff);
            next_offset(self, si, &soff);
        }
    }
}

static int64_t norm_shift(int64_t shift, int64_t n) {
    int64_t r = shift % n;
    return r < 0 ? r + n : r;
}

ETCH_PK_KERNEL(roll_out) {
    if (!etch_pk_nargs(ctx, nargs, 4))
        return;
    size_t ns, nd;
    etch_tensor *self = etch_pk_tensor(ctx, args[0], "self");
    etch_tensor *out = self ? etch_pk_tensor(ctx, args[3], "out") : NULL;
    const int64_t *shifts = out ? etch_pk_int_list(ctx, args[1], "shifts", &ns) : NULL;
    const int64_t *dims = shifts ? etch_pk_int_list(ctx, args[2], "dims", &nd) : NULL;
    if (!dims || !etch_shape_check_convert(ctx, self->dtype, out->dtype, "out"))
        return;
    if (ns == 0 || (nd == 0 ? ns != 1 : ns != nd)) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "shifts (%zu entries) and dims (%zu) must align (or dims be empty "
                         "with one shift)",
                         ns, nd);
        return;
    }
    int64_t total[ETCH_MAX_DIMS] = {0};
    uint32_t rolled = 0;
    for (size_t i = 0; i < nd; i++) {
        int64_t d;
        if (self->dim == 0) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                             "dim %lld given, but self has no dims", (long long)dims[i]);
            return;
        }
        if (!etch_shape_dim(ctx, dims[i], self->dim, "dim", &d))
            return;
        if (self->sizes[d] > 0) {
            total[d] = norm_shift(total[d] + norm_shift(shifts[i], self->sizes[d]), self->sizes[d]);
            if (total[d])
                rolled |= 1u << d;
            else
                rolled &= ~(1u << d);
        }
    }
    if (etch_pk_resize(ctx, out, self->dim, self->sizes) != ETCH_OK)
        return;
    int64_t n = etch_tensor_numel(self);
    if (n == 0)
        return;
    if (nd == 0) {
        int64_t s = norm_shift(shifts[0], n);
        flat_copy(out, s, self, 0, n - s);
        flat_copy(out, 0, self, n - s, s);
        return;
    }
    /* every combination of the two pieces of each rolled dim */
    int rd[ETCH_MAX_DIMS], m = 0;
    for (unsigned d = 0; d < self->dim; d++)
        if (rolled & (1u << d))
            rd[m++] = (int)d;
    for (uint32_t combo = 0; combo < (1u << m); combo++) {
        etch_sv src, dst;
        etch_sv_of(&src, self);
        etch_sv_of(&dst, out);
        for (int j = 0; j < m; j++) {
            int d = rd[j];
            int64_t size = self->sizes[d], s = total[d];
            if (combo & (1u << j)) { /* out[0, s) = self[size - s, size) */
                etch_sv_slice(&dst, d, 0, s, 1);
                etch_sv_slice(&src, d, size - s, s, 1);
            } else { /* out[s, size) = self[0, size - s) */
                etch_sv_slice(&dst, d, s, size - s, 1);
                etch_sv_slice(&src, d, 0, size - s, 1);
            }
        }
        etch_sv_copy(&dst, &src, -1);
    }
}
