/* Optimized data movement: memcpy-based paths for contiguous tensors of equal dtypes (any
 * dtype: bytes move unchanged), the portable kernel for everything else (conversions, other
 * dim orders, anything it would reject).
 *  - permute_copy: dims merged where the permutation keeps them adjacent; runs that stay
 *    contiguous are memcpy'd, a moved innermost dim is transposed in 16x16 tiles.
 *  - clone (memory_format None, out with self's layout), select_copy, slice_copy (any step),
 *    cat (same rank, no legacy empty inputs), stack: one memcpy per contiguous block.
 *  - index_put_ (accumulate false) with one 1-D Long/Int index tensor at dim p (None before
 *    it, None or nothing after), values of exactly self.shape[:p] + [len(index)] +
 *    self.shape[p+1:]: the KV-cache write. Indices are checked (and wrapped) first.
 *  - embedding: Long/Int indices all in [0, V); rows memcpy'd.
 * Out-of-range arguments always go to the portable kernel, which reports them. */
#include <string.h>

#include "kernels/optimized/eltwise_util.h"
#include "kernels/portable/portable.h"
#include "kernels/portable/portable_nn.h"
#include "kernels/portable/portable_shape.h"

#define COPY_GRAIN_BYTES (1 << 18)

static bool contig_pair(const etch_tensor *a, const etch_tensor *b) {
    return a->dtype == b->dtype && etch_tensor_is_contiguous(a) && etch_tensor_is_contiguous(b);
}

static bool wrap_dim(int64_t d, int64_t rank, int64_t *out) {
    if (d < -rank || d >= rank)
        return false;
    *out = d < 0 ? d + rank : d;
    return true;
}

/* ---- blocked copy: `outer` blocks of `chunk` bytes, src blocks `src_step` bytes apart ---- */

typedef struct blk_job {
    char *dst;
    const char *src;
    int64_t chunk, dst_step, src_step;
} blk_job;

static void blk_range(void *arg, int64_t b, int64_t e) {
    const blk_job *j = (const blk_job *)arg;
    /* small blocks (stack / cat along the last dims, strided slices) as typed moves */
    if (j->chunk == 4 && j->dst_step % 4 == 0 && j->src_step % 4 == 0) {
        uint32_t *d = (uint32_t *)(void *)j->dst;
        const uint32_t *s = (const uint32_t *)(const void *)j->src;
        const int64_t ds = j->dst_step / 4, ss = j->src_step / 4;
        if (((uintptr_t)d | (uintptr_t)s) % 4 == 0) {
            for (int64_t o = b; o < e; o++)
                d[o * ds] = s[o * ss];
            return;
        }
    }
    if (j->chunk == 8 && j->dst_step % 8 == 0 && j->src_step % 8 == 0) {
        uint64_t *d = (uint64_t *)(void *)j->dst;
        const uint64_t *s = (const uint64_t *)(const void *)j->src;
        const int64_t ds = j->dst_step / 8, ss = j->src_step / 8;
        if (((uintptr_t)d | (uintptr_t)s) % 8 == 0) {
            for (int64_t o = b; o < e; o++)
                d[o * ds] = s[o * ss];
            return;
        }
    }
    for (int64_t o = b; o < e; o++)
        memcpy(j->dst + o * j->dst_step, j->src + o * j->src_step, (size_t)j->chunk);
}

void etch_opt_copy_blocks(etch_kernel_context *ctx, char *dst, int64_t dst_step, const char *src,
                          int64_t src_step, int64_t chunk, int64_t outer) {
    if (chunk <= 0 || outer <= 0)
        return;
    if (outer == 1 || (dst_step == chunk && src_step == chunk)) {
        memmove(dst, src, (size_t)(chunk * outer)); /* one run */
        return;
    }
    blk_job j = {dst, src, chunk, dst_step, src_step};
    const int64_t grain = chunk >= COPY_GRAIN_BYTES ? 1 : COPY_GRAIN_BYTES / chunk + 1;
    etch_ew_parallel(ctx, outer, grain, blk_range, &j);
}

/* ---- permute_copy --------------------------------------------------------------------- */

typedef struct perm_job {
    int nd;
    int64_t sizes[ETCH_MAX_DIMS]; /* out dims after merging */
    int64_t ist[ETCH_MAX_DIMS];   /* input element stride of each out dim */
    int64_t es;
    const char *src;
    char *dst;
    int tdim; /* out dim with input stride 1 when the innermost is not (tiled), else -1 */
} perm_job;

#define TILE 16

static void transpose_tile(const perm_job *j, char *dst, const char *src, int64_t rows,
                           int64_t cols, int64_t dst_rs, int64_t src_cs) {
    /* dst[r * dst_rs + c] = src[r + c * src_cs] (elements), rows x cols */
    const int64_t es = j->es;
    for (int64_t r0 = 0; r0 < rows; r0 += TILE)
        for (int64_t c0 = 0; c0 < cols; c0 += TILE) {
            const int64_t r1 = r0 + TILE < rows ? r0 + TILE : rows;
            const int64_t c1 = c0 + TILE < cols ? c0 + TILE : cols;
            if (es == 4) {
                for (int64_t r = r0; r < r1; r++) {
                    uint32_t *d = (uint32_t *)(void *)(dst + r * dst_rs * 4);
                    const uint32_t *s = (const uint32_t *)(const void *)src + r;
                    for (int64_t c = c0; c < c1; c++)
                        d[c] = s[c * src_cs];
                }
            } else {
                for (int64_t r = r0; r < r1; r++)
                    for (int64_t c = c0; c < c1; c++)
                        memcpy(dst + (r * dst_rs + c) * es, src + (r + c * src_cs) * es,
                               (size_t)es);
            }
        }
}

/* Out blocks: every out dim but the innermost (and tdim when tiling) is iterated. */
/* Contiguous runs: out blocks follow each other, the input offset walks an odometer. */
static void perm_runs(const perm_job *j, int64_t b, int64_t e) {
    const int in_d = j->nd - 1;
    const int64_t run = j->sizes[in_d] * j->es;
    int64_t idx[ETCH_MAX_DIMS], ioff = 0, rem = b;
    for (int d = in_d - 1; d >= 0; d--) {
        idx[d] = rem % j->sizes[d];
        rem /= j->sizes[d];
        ioff += idx[d] * j->ist[d];
    }
    char *dst = j->dst + b * run;
    for (int64_t blk = b; blk < e; blk++, dst += run) {
        /* attention's head splits move runs of one head (32 or 64 floats): a constant size
         * makes the copy inline instead of a libc call per run */
        const char *src = j->src + ioff * j->es;
        if (run == 128)
            memcpy(dst, src, 128);
        else if (run == 256)
            memcpy(dst, src, 256);
        else
            memcpy(dst, src, (size_t)run);
        for (int d = in_d - 1; d >= 0; d--) {
            ioff += j->ist[d];
            if (++idx[d] < j->sizes[d])
                break;
            ioff -= idx[d] * j->ist[d];
            idx[d] = 0;
        }
    }
}

static void perm_range(void *arg, int64_t b, int64_t e) {
    const perm_job *j = (const perm_job *)arg;
    const int nd = j->nd, in_d = nd - 1;
    if (j->tdim < 0 && j->ist[in_d] == 1) {
        perm_runs(j, b, e);
        return;
    }
    int64_t ost[ETCH_MAX_DIMS];
    ost[in_d] = 1;
    for (int d = in_d - 1; d >= 0; d--)
        ost[d] = ost[d + 1] * j->sizes[d + 1];
    for (int64_t blk = b; blk < e; blk++) {
        int64_t rem = blk, ioff = 0, ooff = 0;
        for (int d = in_d - 1; d >= 0; d--) {
            if (d == j->tdim)
                continue;
            const int64_t i = rem % j->sizes[d];
            rem /= j->sizes[d];
            ioff += i * j->ist[d];
            ooff += i * ost[d];
        }
        char *dst = j->dst + ooff * j->es;
        const char *src = j->src + ioff * j->es;
        if (j->tdim >= 0) {
            transpose_tile(j, dst, src, j->sizes[j->tdim], j->sizes[in_d], ost[j->tdim],
                           j->ist[in_d]);
        } else if (j->ist[in_d] == 1) {
            memcpy(dst, src, (size_t)(j->sizes[in_d] * j->es));
        } else {
            for (int64_t c = 0; c < j->sizes[in_d]; c++)
                memcpy(dst + c * j->es, src + c * j->ist[in_d] * j->es, (size_t)j->es);
        }
    }
}

void etch_opt_gather(etch_kernel_context *ctx, void *dst, const void *src, int64_t es, int nd,
                     const int64_t *osz, const int64_t *ist) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= osz[i];
    if (n == 0)
        return;
    perm_job j;
    memset(&j, 0, sizeof j);
    j.es = es;
    j.src = (const char *)src;
    j.dst = (char *)dst;
    /* drop size-1 dims, merge out dims whose input strides chain */
    for (int i = 0; i < nd; i++) {
        if (osz[i] == 1)
            continue;
        const int64_t st = ist[i];
        if (j.nd > 0 && j.ist[j.nd - 1] == st * osz[i]) {
            j.sizes[j.nd - 1] *= osz[i];
            j.ist[j.nd - 1] = st;
        } else {
            j.sizes[j.nd] = osz[i];
            j.ist[j.nd] = st;
            j.nd++;
        }
    }
    if (j.nd == 0 || (j.nd == 1 && j.ist[0] == 1)) { /* one contiguous run */
        memmove(j.dst, j.src, (size_t)(n * j.es));
        return;
    }
    if (j.nd == 1) { /* one strided row: an out dim of its own to walk */
        j.sizes[1] = 1;
        j.ist[1] = 1;
        j.nd = 2;
    }
    j.tdim = -1;
    if (j.ist[j.nd - 1] != 1)
        for (int d = 0; d < j.nd - 1; d++)
            if (j.ist[d] == 1)
                j.tdim = d;
    int64_t blocks = 1;
    for (int d = 0; d < j.nd - 1; d++)
        if (d != j.tdim)
            blocks *= j.sizes[d];
    const int64_t per_block = n / blocks * j.es;
    const int64_t grain = per_block >= COPY_GRAIN_BYTES ? 1 : COPY_GRAIN_BYTES / per_block + 1;
    etch_ew_parallel(ctx, blocks, grain, perm_range, &j);
}

static bool permute_fast(etch_kernel_context *ctx, etch_value **args, size_t nargs) {
    if (nargs < 3 || args[1]->tag != ETCH_VALUE_INT_LIST)
        return false;
    etch_tensor *in = etch_ew_tensor(args[0]), *out = etch_ew_tensor(args[2]);
    if (!in || !out || !contig_pair(in, out))
        return false;
    size_t len = 0;
    const int64_t *dims = etch_value_int_list(args[1], &len);
    if (!dims || len != in->dim)
        return false;
    int64_t perm[ETCH_MAX_DIMS], osz[ETCH_MAX_DIMS];
    uint32_t seen = 0;
    for (size_t i = 0; i < len; i++) {
        if (!wrap_dim(dims[i], (int64_t)len, &perm[i]) || (seen & (1u << perm[i])))
            return false;
        seen |= 1u << perm[i];
        osz[i] = in->sizes[perm[i]];
    }
    if (!etch_ew_resize(out, len, osz))
        return false;
    int64_t ist[ETCH_MAX_DIMS];
    for (size_t i = 0; i < len; i++)
        ist[i] = in->strides[perm[i]];
    etch_opt_gather(ctx, out->data, in->data, (int64_t)etch_dtype_size(in->dtype), (int)len, osz,
                    ist);
    return true;
}

ETCH_OPT_KERNEL(permute_copy_out) {
    if (!permute_fast(ctx, args, nargs))
        etch_portable_permute_copy_out(ctx, args, nargs);
}

/* ---- clone ---------------------------------------------------------------------------- */

ETCH_OPT_KERNEL(clone_out) {
    if (nargs >= 3 && args[1]->tag == ETCH_VALUE_NONE) {
        etch_tensor *in = etch_ew_tensor(args[0]), *out = etch_ew_tensor(args[2]);
        if (in && out && in->dtype == out->dtype && etch_ew_resize(out, in->dim, in->sizes) &&
            etch_ew_same_layout(in, out)) {
            if (in->data != out->data)
                etch_opt_copy_blocks(ctx, (char *)out->data, 0, (const char *)in->data, 0,
                            (int64_t)etch_tensor_nbytes(in), 1);
            return;
        }
    }
    etch_portable_clone_out(ctx, args, nargs);
}

/* ---- select_copy / slice_copy --------------------------------------------------------- */

static void outer_inner(const etch_tensor *t, int64_t d, int64_t *outer, int64_t *inner) {
    *outer = 1;
    *inner = 1;
    for (int64_t i = 0; i < d; i++)
        *outer *= t->sizes[i];
    for (int64_t i = d + 1; i < (int64_t)t->dim; i++)
        *inner *= t->sizes[i];
}

ETCH_OPT_KERNEL(select_copy_int_out) {
    if (nargs >= 4 && args[1]->tag == ETCH_VALUE_INT && args[2]->tag == ETCH_VALUE_INT) {
        etch_tensor *in = etch_ew_tensor(args[0]), *out = etch_ew_tensor(args[3]);
        int64_t d = 0;
        if (in && out && in->dim > 0 && contig_pair(in, out) &&
            wrap_dim(args[1]->u.i, in->dim, &d)) {
            const int64_t size = in->sizes[d];
            int64_t idx = args[2]->u.i;
            idx = idx < 0 ? idx + size : idx;
            int64_t osz[ETCH_MAX_DIMS];
            for (int64_t i = 0, k = 0; i < (int64_t)in->dim; i++)
                if (i != d)
                    osz[k++] = in->sizes[i];
            if (idx >= 0 && idx < size && etch_ew_resize(out, in->dim - 1, osz)) {
                int64_t outer, inner;
                outer_inner(in, d, &outer, &inner);
                const int64_t es = (int64_t)etch_dtype_size(in->dtype);
                etch_opt_copy_blocks(ctx, (char *)out->data, inner * es,
                            (const char *)in->data + idx * inner * es, size * inner * es,
                            inner * es, outer);
                return;
            }
        }
    }
    etch_portable_select_copy_int_out(ctx, args, nargs);
}

ETCH_OPT_KERNEL(slice_copy_tensor_out) {
    if (nargs >= 6 && args[1]->tag == ETCH_VALUE_INT && args[4]->tag == ETCH_VALUE_INT &&
        (args[2]->tag == ETCH_VALUE_NONE || args[2]->tag == ETCH_VALUE_INT) &&
        (args[3]->tag == ETCH_VALUE_NONE || args[3]->tag == ETCH_VALUE_INT)) {
        etch_tensor *in = etch_ew_tensor(args[0]), *out = etch_ew_tensor(args[5]);
        int64_t d = 0;
        const int64_t step = args[4]->u.i;
        if (in && out && in->dim > 0 && step > 0 && contig_pair(in, out) &&
            wrap_dim(args[1]->u.i, in->dim, &d)) {
            const int64_t size = in->sizes[d];
            int64_t s = args[2]->tag == ETCH_VALUE_INT ? args[2]->u.i : 0;
            int64_t e = args[3]->tag == ETCH_VALUE_INT ? args[3]->u.i : INT64_MAX;
            s = s < 0 ? s + size : s;
            e = e < 0 ? e + size : e;
            s = s < 0 ? 0 : s > size ? size : s;
            e = e < s ? s : e > size ? size : e;
            const int64_t len = e == s ? 0 : 1 + (e - s - 1) / step;
            int64_t osz[ETCH_MAX_DIMS];
            memcpy(osz, in->sizes, in->dim * sizeof(int64_t));
            osz[d] = len;
            if (etch_ew_resize(out, in->dim, osz)) {
                int64_t outer, inner;
                outer_inner(in, d, &outer, &inner);
                const int64_t es = (int64_t)etch_dtype_size(in->dtype);
                const char *src = (const char *)in->data + s * inner * es;
                char *dst = (char *)out->data;
                if (len == 0 || outer * inner == 0)
                    return;
                if (step == 1) {
                    etch_opt_copy_blocks(ctx, dst, len * inner * es, src, size * inner * es,
                                len * inner * es, outer);
                } else {
                    for (int64_t o = 0; o < outer; o++)
                        etch_opt_copy_blocks(ctx, dst + o * len * inner * es, inner * es,
                                    src + o * size * inner * es, step * inner * es, inner * es,
                                    len);
                }
                return;
            }
        }
    }
    etch_portable_slice_copy_tensor_out(ctx, args, nargs);
}

/* ---- cat / stack ---------------------------------------------------------------------- */

/* The list's tensors when all are contiguous, of out's dtype, with equal rank and sizes
 * except at dim `except` (-1: none). */
static bool list_ok(etch_value *list, const etch_tensor *out, int64_t except, etch_tensor **ts,
                    size_t *count) {
    if (list->tag != ETCH_VALUE_TENSOR_LIST || list->u.list.len == 0 ||
        list->u.list.len > 1024)
        return false;
    const size_t n = list->u.list.len;
    for (size_t i = 0; i < n; i++) {
        etch_tensor *t = etch_ew_tensor(list->u.list.items[i]);
        if (!t || !contig_pair(t, out) || (i > 0 && t->dim != ts[0]->dim))
            return false;
        for (unsigned d = 0; i > 0 && d < t->dim; d++)
            if ((int64_t)d != except && t->sizes[d] != ts[0]->sizes[d])
                return false;
        ts[i] = t;
    }
    *count = n;
    return true;
}

static bool cat_fast(etch_kernel_context *ctx, etch_value **args, size_t nargs, bool stack) {
    if (nargs < 3 || args[1]->tag != ETCH_VALUE_INT)
        return false;
    etch_tensor *out = etch_ew_tensor(args[2]);
    if (!out)
        return false;
    etch_tensor *ts[1024];
    size_t n = 0;
    const etch_tensor *first =
        args[0]->tag == ETCH_VALUE_TENSOR_LIST && args[0]->u.list.len > 0
            ? etch_ew_tensor(args[0]->u.list.items[0])
            : NULL;
    if (!first)
        return false;
    int64_t d = 0;
    const int64_t rank = (int64_t)first->dim + (stack ? 1 : 0);
    if (rank == 0 || !wrap_dim(args[1]->u.i, rank, &d) ||
        !list_ok(args[0], out, stack ? -1 : d, ts, &n))
        return false;
    int64_t osz[ETCH_MAX_DIMS];
    if (stack) {
        if (rank > ETCH_MAX_DIMS)
            return false;
        for (int64_t i = 0, k = 0; i < rank; i++)
            osz[i] = i == d ? (int64_t)n : first->sizes[k++];
    } else {
        memcpy(osz, first->sizes, first->dim * sizeof(int64_t));
        osz[d] = 0;
        for (size_t i = 0; i < n; i++)
            osz[d] += ts[i]->sizes[d];
    }
    if (!etch_ew_resize(out, (size_t)rank, osz))
        return false;
    for (size_t i = 0; i < n; i++)
        if (ts[i]->data && ts[i]->data == out->data && etch_tensor_numel(ts[i]) > 0)
            return false; /* an input in out's memory: leave it to the portable kernel */
    /* outer blocks over the dims before d; each input adds a run of its dims d.. */
    int64_t outer = 1;
    for (int64_t i = 0; i < d; i++)
        outer *= osz[i];
    const int64_t es = (int64_t)etch_dtype_size(out->dtype);
    int64_t row = 1; /* out bytes per outer block */
    for (int64_t i = d; i < rank; i++)
        row *= osz[i];
    row *= es;
    int64_t chunks[1024], max_chunk = 0;
    for (size_t i = 0; i < n; i++) {
        chunks[i] = es;
        for (int64_t k = d; k < (int64_t)ts[i]->dim; k++)
            chunks[i] *= ts[i]->sizes[k];
        max_chunk = chunks[i] > max_chunk ? chunks[i] : max_chunk;
    }
    char *dst = (char *)out->data;
    if (n == 2 && chunks[0] == 4 && chunks[1] == 4 && ((uintptr_t)dst | (uintptr_t)ts[0]->data |
                                                       (uintptr_t)ts[1]->data) % 4 == 0) {
        /* two 4-byte elements interleaved (stack(..., -1) of a rotary embedding) */
        uint32_t *o = (uint32_t *)(void *)dst;
        const uint32_t *a = (const uint32_t *)ts[0]->data, *b = (const uint32_t *)ts[1]->data;
        for (int64_t k = 0; k < outer; k++) {
            o[2 * k] = a[k];
            o[2 * k + 1] = b[k];
        }
        return true;
    }
    if (max_chunk <= 64 && outer > 1) { /* small pieces: one pass over out */
        for (int64_t k = 0; k < outer; k++)
            for (size_t i = 0; i < n; i++) {
                if (chunks[i] == 0)
                    continue; /* an empty input may have no data */
                memcpy(dst, (const char *)ts[i]->data + k * chunks[i], (size_t)chunks[i]);
                dst += chunks[i];
            }
        return true;
    }
    int64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        etch_opt_copy_blocks(ctx, dst + off, row, (const char *)ts[i]->data, chunks[i], chunks[i], outer);
        off += chunks[i];
    }
    return true;
}

ETCH_OPT_KERNEL(cat_out) {
    if (!cat_fast(ctx, args, nargs, false))
        etch_portable_cat_out(ctx, args, nargs);
}

ETCH_OPT_KERNEL(stack_out) {
    if (!cat_fast(ctx, args, nargs, true))
        etch_portable_stack_out(ctx, args, nargs);
}

/* ---- index_put_ (cache write) --------------------------------------------------------- */

/* index[t] of a Long/Int index tensor, negative values counted from `size` */
static inline int64_t index_at(const etch_tensor *index, int64_t t, int64_t size) {
    const int64_t v = index->dtype == ETCH_DTYPE_LONG ? ((const int64_t *)index->data)[t]
                                                      : ((const int32_t *)index->data)[t];
    return v < 0 ? v + size : v;
}

static bool index_put_fast(etch_kernel_context *ctx, etch_value **args, size_t nargs) {
    if (nargs < 4 || args[1]->tag != ETCH_VALUE_OPTIONAL_TENSOR_LIST ||
        args[3]->tag != ETCH_VALUE_BOOL || args[3]->u.b)
        return false;
    etch_tensor *self = etch_ew_tensor(args[0]), *values = etch_ew_tensor(args[2]);
    if (!self || !values || !contig_pair(self, values) || self->dim == 0)
        return false;
    const size_t nidx = args[1]->u.list.len;
    if (nidx == 0 || nidx > self->dim)
        return false;
    int64_t p = -1;
    etch_tensor *index = NULL;
    for (size_t i = 0; i < nidx; i++) {
        etch_value *it = args[1]->u.list.items[i];
        if (!it || it->tag == ETCH_VALUE_NONE)
            continue;
        if (index || !(index = etch_ew_tensor(it)))
            return false; /* more than one index tensor, or a bad one */
        p = (int64_t)i;
    }
    if (!index || index->dim != 1 ||
        (index->dtype != ETCH_DTYPE_LONG && index->dtype != ETCH_DTYPE_INT))
        return false;
    const int64_t T = index->sizes[0], size = self->sizes[p];
    if (values->dim != self->dim)
        return false;
    for (int64_t d = 0; d < (int64_t)self->dim; d++)
        if (values->sizes[d] != (d == p ? T : self->sizes[d]))
            return false;
    /* indices: check them all before writing (read again, wrapped, while copying) */
    for (int64_t t = 0; t < T; t++) {
        const int64_t v = index_at(index, t, size);
        if (v < 0 || v >= size)
            return false;
    }
    int64_t outer, inner;
    outer_inner(self, p, &outer, &inner);
    const int64_t es = (int64_t)etch_dtype_size(self->dtype), row = inner * es;
    char *dst = (char *)self->data;
    const char *src = (const char *)values->data;
    if (row == 0 || T == 0)
        return true; /* nothing to write (and an empty tensor may have no data) */
    for (int64_t o = 0; o < outer; o++)
        for (int64_t t = 0; t < T; t++) {
            char *dp = dst + (o * size + index_at(index, t, size)) * row;
            const char *sp = src + (o * T + t) * row;
            if (es == 4 && inner == 1)
                memcpy(dp, sp, 4);
            else
                memcpy(dp, sp, (size_t)row);
        }
    (void)ctx;
    return true;
}

ETCH_OPT_KERNEL(index_put_) {
    if (!index_put_fast(ctx, args, nargs))
        etch_portable_index_put_(ctx, args, nargs);
}

/* ---- embedding ------------------------------------------------------------------------ */

static bool embedding_fast(etch_kernel_context *ctx, etch_value **args, size_t nargs) {
    if (nargs < 6)
        return false;
    etch_tensor *w = etch_ew_tensor(args[0]), *idx = etch_ew_tensor(args[1]),
                *out = etch_ew_tensor(args[5]);
    if (!w || !idx || !out || w->dim != 2 || !contig_pair(w, out) ||
        !etch_pk_dtype_is_real(w->dtype) || !etch_tensor_is_contiguous(idx) ||
        (idx->dtype != ETCH_DTYPE_LONG && idx->dtype != ETCH_DTYPE_INT) ||
        idx->dim + 1 > ETCH_MAX_DIMS || args[2]->tag != ETCH_VALUE_INT ||
        args[3]->tag != ETCH_VALUE_BOOL || args[4]->tag != ETCH_VALUE_BOOL)
        return false;
    const int64_t V = w->sizes[0], D = w->sizes[1], n = etch_tensor_numel(idx);
    for (int64_t i = 0; i < n; i++) {
        const int64_t v = idx->dtype == ETCH_DTYPE_LONG ? ((const int64_t *)idx->data)[i]
                                                        : ((const int32_t *)idx->data)[i];
        if (v < 0 || v >= V)
            return false;
    }
    int64_t osz[ETCH_MAX_DIMS];
    memcpy(osz, idx->sizes, idx->dim * sizeof(int64_t));
    osz[idx->dim] = D;
    if (!etch_ew_resize(out, idx->dim + 1, osz))
        return false;
    const int64_t row = D * (int64_t)etch_dtype_size(w->dtype);
    for (int64_t i = 0; i < n && row > 0; i++) {
        const int64_t v = idx->dtype == ETCH_DTYPE_LONG ? ((const int64_t *)idx->data)[i]
                                                        : ((const int32_t *)idx->data)[i];
        memcpy((char *)out->data + i * row, (const char *)w->data + v * row, (size_t)row);
    }
    (void)ctx;
    return true;
}

ETCH_OPT_KERNEL(embedding_out) {
    if (!embedding_fast(ctx, args, nargs))
        etch_portable_embedding_out(ctx, args, nargs);
}
