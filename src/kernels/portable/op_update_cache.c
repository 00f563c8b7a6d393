/*
 * llama::update_cache.out(Tensor value, Tensor(a!) cache, SymInt start_pos, *,
 *                         Tensor(b!) out) -> Tensor(b!)
 *
 * ExecuTorch's KV-cache write (extension/llm/custom_ops/op_update_cache.cpp, the operator its
 * llama export emits with the custom KV cache): value [B, S, H, D] is copied into cache
 * [B, S_max, H, D] at sequence positions start_pos .. start_pos + S - 1 of every batch row
 * (the sequence is dim 1 of both). `out` is a placeholder that ExecuTorch never writes; it is
 * left untouched here too.
 *
 * Checks (each an ETCH_ERR_INVALID_ARGUMENT naming the shapes, before anything is written):
 * both 4-D, the same dtype (any dtype: the cache may hold int8 rows, scales or zero points),
 * equal batch, heads and head size, 0 <= start_pos < S_max and start_pos + S <= S_max
 * (ExecuTorch's two bounds). Any dim order through strides; contiguous rows are one memcpy.
 */
#include <string.h>

#include "kernels/portable/portable_nn.h"

bool etch_pk_update_cache(etch_kernel_context *ctx, const etch_tensor *value,
                          const char *vname, etch_tensor *cache, const char *cname,
                          int64_t start_pos) {
    char b1[ETCH_PK_SHAPE_BUF], b2[ETCH_PK_SHAPE_BUF];
    if (value->dim != 4 || cache->dim != 4 || value->sizes[0] != cache->sizes[0] ||
        value->sizes[2] != cache->sizes[2] || value->sizes[3] != cache->sizes[3]) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "%s %s, %s %s: expected [B, S, H, D] and [B, S_max, H, D] with the same "
                         "B, H and D",
                         vname, etch_pk_shape_str(b1, sizeof b1, value->dim, value->sizes), cname,
                         etch_pk_shape_str(b2, sizeof b2, cache->dim, cache->sizes));
        return false;
    }
    if (!etch_pk_check_same_dtype(ctx, cache, cname, value, vname))
        return false;
    const int64_t S = value->sizes[1], Smax = cache->sizes[1];
    if (start_pos < 0 || start_pos >= Smax || S > Smax - start_pos) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                         "start_pos %lld with %lld new positions does not fit %s's %lld "
                         "positions",
                         (long long)start_pos, (long long)S, cname, (long long)Smax);
        return false;
    }
    const int64_t B = value->sizes[0], H = value->sizes[2], D = value->sizes[3];
    const size_t esz = etch_dtype_size(value->dtype);
    if (B == 0 || S == 0 || H == 0 || D == 0)
        return true;
    const bool rows = value->strides[3] == 1 && cache->strides[3] == 1;
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < S; s++)
            for (int64_t h = 0; h < H; h++) {
                const int64_t vo = b * value->strides[0] + s * value->strides[1] +
                                   h * value->strides[2];
                const int64_t co = b * cache->strides[0] + (start_pos + s) * cache->strides[1] +
                                   h * cache->strides[2];
                char *dst = (char *)cache->data + co * (int64_t)esz;
                const char *src = (const char *)value->data + vo * (int64_t)esz;
                if (rows) {
                    memcpy(dst, src, (size_t)D * esz);
                    continue;
                }
                for (int64_t d = 0; d < D; d++)
                    memcpy(dst + d * cache->strides[3] * (int64_t)esz,
                           src + d * value->strides[3] * (int64_t)esz, esz);
            }
    return true;
}

ETCH_PK_KERNEL(llama_update_cache_out) {
    if (!etch_pk_nargs(ctx, nargs, 4))
        return;
    etch_tensor *value = etch_pk_tensor(ctx, args[0], "value");
    etch_tensor *cache = value ? etch_pk_tensor(ctx, args[1], "cache") : NULL;
    int64_t start_pos = 0;
    if (!cache || !etch_pk_int(ctx, args[2], "start_pos", &start_pos))
        return;
    etch_pk_update_cache(ctx, value, "value", cache, "cache", start_pos);
}
