/* A tiny .npy helper for the CLI tests (no numpy needed), built on etch's npy writer/reader.
 *
 *   npy_tool write FILE DTYPE SHAPE VALUES
 *   npy_tool check FILE DTYPE SHAPE VALUES [TOL]
 *
 * DTYPE: bool int8 uint8 int16 int32 int64 float16 float32 float64. SHAPE: "2x3", "4", or
 * "scalar" for a 0-d array. VALUES: comma-separated, in C order. `check` exits 0 when the
 * file has that dtype, shape and values (floats within TOL, default 1e-6), 1 otherwise. */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etch/npy.h"

static const struct {
    const char *name;
    etch_dtype dtype;
} dtypes[] = {
    {"bool", ETCH_DTYPE_BOOL},   {"int8", ETCH_DTYPE_CHAR},       {"uint8", ETCH_DTYPE_BYTE},
    {"int16", ETCH_DTYPE_SHORT}, {"int32", ETCH_DTYPE_INT},       {"int64", ETCH_DTYPE_LONG},
    {"float16", ETCH_DTYPE_HALF}, {"float32", ETCH_DTYPE_FLOAT}, {"float64", ETCH_DTYPE_DOUBLE},
};

static int usage(void) {
    fprintf(stderr, "usage: npy_tool write|check FILE DTYPE SHAPE VALUES [TOL]\n");
    return 2;
}

static int parse_shape(const char *s, int64_t *sizes) {
    if (strcmp(s, "scalar") == 0)
        return 0;
    int dim = 0;
    while (*s) {
        char *end;
        long long v = strtoll(s, &end, 10);
        if (end == s || v < 0 || dim == ETCH_MAX_DIMS)
            return -1;
        sizes[dim++] = v;
        if (*end == 'x')
            end++;
        else if (*end)
            return -1;
        s = end;
    }
    return dim;
}

static uint16_t f32_to_half(float f) {
    /* Round to nearest even; enough for the small test values used here. */
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, exp = (x >> 23) & 0xff, man = x & 0x7fffff;
    if (exp == 0xff)
        return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00);
    if (e <= 0)
        return (uint16_t)sign;
    uint32_t h = sign | ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
        h++;
    return (uint16_t)h;
}

static void store(void *data, etch_dtype dtype, size_t k, double v) {
    uint8_t *p = (uint8_t *)data + k * etch_dtype_size(dtype);
    switch (dtype) {
    case ETCH_DTYPE_BOOL: p[0] = v != 0; break;
    case ETCH_DTYPE_CHAR: { int8_t x = (int8_t)v; memcpy(p, &x, 1); break; }
    case ETCH_DTYPE_BYTE: p[0] = (uint8_t)v; break;
    case ETCH_DTYPE_SHORT: { int16_t x = (int16_t)v; memcpy(p, &x, 2); break; }
    case ETCH_DTYPE_INT: { int32_t x = (int32_t)v; memcpy(p, &x, 4); break; }
    case ETCH_DTYPE_LONG: { int64_t x = (int64_t)v; memcpy(p, &x, 8); break; }
    case ETCH_DTYPE_HALF: { uint16_t x = f32_to_half((float)v); memcpy(p, &x, 2); break; }
    case ETCH_DTYPE_FLOAT: { float x = (float)v; memcpy(p, &x, 4); break; }
    default: memcpy(p, &v, 8); break;
    }
}

static double load(const void *data, etch_dtype dtype, size_t k) {
    const uint8_t *p = (const uint8_t *)data + k * etch_dtype_size(dtype);
    switch (dtype) {
    case ETCH_DTYPE_BOOL: return p[0];
    case ETCH_DTYPE_CHAR: return (int8_t)p[0];
    case ETCH_DTYPE_BYTE: return p[0];
    case ETCH_DTYPE_SHORT: { int16_t x; memcpy(&x, p, 2); return x; }
    case ETCH_DTYPE_INT: { int32_t x; memcpy(&x, p, 4); return x; }
    case ETCH_DTYPE_LONG: { int64_t x; memcpy(&x, p, 8); return (double)x; }
    case ETCH_DTYPE_HALF: {
        uint16_t h;
        memcpy(&h, p, 2);
        int e = (h >> 10) & 0x1f, m = h & 0x3ff;
        double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m | 0x400, e - 25);
        return (h >> 15) ? -v : v;
    }
    case ETCH_DTYPE_FLOAT: { float x; memcpy(&x, p, 4); return x; }
    default: { double x; memcpy(&x, p, 8); return x; }
    }
}

int main(int argc, char **argv) {
    if (argc < 6 || argc > 7)
        return usage();
    bool write = strcmp(argv[1], "write") == 0;
    if (!write && strcmp(argv[1], "check") != 0)
        return usage();
    int dt = -1;
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (strcmp(argv[3], dtypes[i].name) == 0)
            dt = (int)dtypes[i].dtype;
    int64_t sizes[ETCH_MAX_DIMS];
    int dim = parse_shape(argv[4], sizes);
    if (dt < 0 || dim < 0)
        return usage();
    int64_t numel = 1;
    for (int d = 0; d < dim; d++)
        numel *= sizes[d];
    double *vals = calloc((size_t)numel + 1, sizeof *vals);
    size_t nv = 0;
    for (char *s = argv[5]; *s && nv < (size_t)numel + 1;) {
        char *end;
        vals[nv++] = strtod(s, &end);
        if (end == s)
            return usage();
        s = *end == ',' ? end + 1 : end;
    }
    if ((int64_t)nv != numel) {
        fprintf(stderr, "npy_tool: shape needs %lld values, got %zu\n", (long long)numel, nv);
        return 2;
    }
    if (write) {
        void *data = calloc((size_t)numel + 1, 8);
        for (int64_t k = 0; k < numel; k++)
            store(data, (etch_dtype)dt, (size_t)k, vals[k]);
        etch_tensor t;
        etch_status st = etch_tensor_init(&t, (etch_dtype)dt, (size_t)dim, sizes, data);
        if (st == ETCH_OK)
            st = etch_npy_write_file(argv[2], &t);
        free(data);
        free(vals);
        if (st != ETCH_OK) {
            fprintf(stderr, "npy_tool: %s: %s\n", etch_status_str(st), etch_last_error());
            return 1;
        }
        return 0;
    }
    double tol = argc == 7 ? strtod(argv[6], NULL) : 1e-6;
    etch_npy a;
    etch_status st = etch_npy_read_file(argv[2], &a);
    if (st != ETCH_OK) {
        fprintf(stderr, "npy_tool: %s: %s\n", etch_status_str(st), etch_last_error());
        free(vals);
        return 1;
    }
    int rc = 0;
    if (a.tensor.dtype != dt) {
        fprintf(stderr, "npy_tool: %s: dtype %s, expected %s\n", argv[2],
                etch_dtype_name(a.tensor.dtype), etch_dtype_name(dt));
        rc = 1;
    } else if (a.tensor.dim != dim || memcmp(a.tensor.sizes, sizes, (size_t)dim * 8) != 0) {
        fprintf(stderr, "npy_tool: %s: shape differs from %s\n", argv[2], argv[4]);
        rc = 1;
    } else {
        for (int64_t k = 0; k < numel; k++) {
            double got = load(a.tensor.data, (etch_dtype)dt, (size_t)k);
            if (!(fabs(got - vals[k]) <= tol)) {
                fprintf(stderr, "npy_tool: %s: element %lld is %g, expected %g\n", argv[2],
                        (long long)k, got, vals[k]);
                rc = 1;
            }
        }
    }
    etch_npy_free(&a);
    free(vals);
    return rc;
}
