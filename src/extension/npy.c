/* NumPy .npy reader and writer (format versions 1.0, 2.0, 3.0).
 *
 * File layout: "\x93NUMPY", major, minor, header length (uint16 for 1.0, uint32 for 2.0/3.0),
 * then a Python dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...)} padded with
 * spaces and ending in '\n', then the raw element bytes. The reader parses that literal
 * strictly (only the three keys, only the value forms numpy writes) because the file is
 * untrusted input. */
#define _POSIX_C_SOURCE 200809L /* open, fsync, getpid: the writer replaces files atomically */

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "etch/npy.h"
#include "runtime/error.h"

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_ALIGN 64

/* ---- dtype mapping ------------------------------------------------------------------ */

typedef struct npy_type {
    char kind;   /* numpy kind character: b, i, u, f */
    unsigned size;
    int dtype;
} npy_type;

static const npy_type npy_types[] = {
    {'b', 1, ETCH_DTYPE_BOOL},   {'i', 1, ETCH_DTYPE_CHAR},   {'u', 1, ETCH_DTYPE_BYTE},
    {'i', 2, ETCH_DTYPE_SHORT},  {'u', 2, ETCH_DTYPE_UINT16}, {'i', 4, ETCH_DTYPE_INT},
    {'u', 4, ETCH_DTYPE_UINT32}, {'i', 8, ETCH_DTYPE_LONG},   {'u', 8, ETCH_DTYPE_UINT64},
    {'f', 2, ETCH_DTYPE_HALF},   {'f', 4, ETCH_DTYPE_FLOAT},  {'f', 8, ETCH_DTYPE_DOUBLE},
};

static const npy_type *npy_type_for_dtype(int dtype) {
    for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++)
        if (npy_types[i].dtype == dtype)
            return &npy_types[i];
    return NULL;
}

/* ---- header parsing ------------------------------------------------------------------ */

typedef struct hdr_parser {
    const char *p, *end;
} hdr_parser;

static void skip_ws(hdr_parser *h) {
    while (h->p < h->end && (*h->p == ' ' || *h->p == '\t' || *h->p == '\n' || *h->p == '\r'))
        h->p++;
}

static bool accept(hdr_parser *h, char c) {
    skip_ws(h);
    if (h->p < h->end && *h->p == c) {
        h->p++;
        return true;
    }
    return false;
}

/* A quoted Python string literal without escapes; copies at most cap-1 bytes. */
static bool parse_str(hdr_parser *h, char *out, size_t cap) {
    skip_ws(h);
    if (h->p >= h->end || (*h->p != '\'' && *h->p != '"'))
        return false;
    char q = *h->p++;
    size_t n = 0;
    while (h->p < h->end && *h->p != q) {
        if (*h->p == '\\' || n + 1 >= cap)
            return false;
        out[n++] = *h->p++;
    }
    if (h->p >= h->end)
        return false;
    h->p++;
    out[n] = 0;
    return true;
}

static bool accept_word(hdr_parser *h, const char *w) {
    skip_ws(h);
    size_t n = strlen(w);
    if ((size_t)(h->end - h->p) >= n && memcmp(h->p, w, n) == 0) {
        h->p += n;
        return true;
    }
    return false;
}

typedef struct npy_header {
    char descr[32];
    bool fortran;
    size_t dim;
    int64_t sizes[ETCH_MAX_DIMS];
} npy_header;

static etch_status bad_header(const char *what) {
    return etch_err(ETCH_ERR_INVALID_ARGUMENT, "npy: malformed header: %s", what);
}

static etch_status parse_shape(hdr_parser *h, npy_header *out) {
    if (!accept(h, '('))
        return bad_header("'shape' is not a tuple");
    out->dim = 0;
    for (;;) {
        if (accept(h, ')'))
            return ETCH_OK;
        skip_ws(h);
        if (h->p >= h->end || *h->p < '0' || *h->p > '9') {
            if (h->p < h->end && *h->p == '-')
                return etch_err(ETCH_ERR_INVALID_ARGUMENT, "npy: negative dimension in shape");
            return bad_header("shape entries must be non-negative integers");
        }
        int64_t v = 0;
        while (h->p < h->end && *h->p >= '0' && *h->p <= '9') {
            int digit = *h->p++ - '0';
            if (v > (INT64_MAX - digit) / 10)
                return etch_err(ETCH_ERR_INVALID_ARGUMENT, "npy: dimension overflows int64");
            v = v * 10 + digit;
        }
        if (out->dim >= ETCH_MAX_DIMS)
            return etch_err(ETCH_ERR_NOT_SUPPORTED, "npy: more than %d dimensions",
                            ETCH_MAX_DIMS);
        out->sizes[out->dim++] = v;
        if (accept(h, ')'))
            return ETCH_OK;
        if (!accept(h, ','))
            return bad_header("expected ',' or ')' in shape");
    }
}

static etch_status parse_header(const char *text, size_t len, npy_header *out) {
    hdr_parser h = {text, text + len};
    bool seen_descr = false, seen_fortran = false, seen_shape = false;
    if (!accept(&h, '{'))
        return bad_header("does not start with '{'");
    for (;;) {
        if (accept(&h, '}'))
            break;
        char key[32];
        if (!parse_str(&h, key, sizeof key))
            return bad_header("expected a quoted key");
        if (!accept(&h, ':'))
            return bad_header("expected ':' after a key");
        if (strcmp(key, "descr") == 0) {
            if (seen_descr)
                return bad_header("duplicate 'descr'");
            seen_descr = true;
            skip_ws(&h);
            if (h.p < h.end && *h.p == '[')
                return etch_err(ETCH_ERR_NOT_SUPPORTED,
                                "npy: structured dtypes (record arrays) are not supported");
            if (!parse_str(&h, out->descr, sizeof out->descr))
                return bad_header("'descr' is not a short quoted string");
        } else if (strcmp(key, "fortran_order") == 0) {
            if (seen_fortran)
                return bad_header("duplicate 'fortran_order'");
            seen_fortran = true;
            if (accept_word(&h, "True"))
                out->fortran = true;
            else if (accept_word(&h, "False"))
                out->fortran = false;
            else
                return bad_header("'fortran_order' is neither True nor False");
        } else if (strcmp(key, "shape") == 0) {
            if (seen_shape)
                return bad_header("duplicate 'shape'");
            seen_shape = true;
            etch_status st = parse_shape(&h, out);
            if (st != ETCH_OK)
                return st;
        } else {
            return etch_err(ETCH_ERR_INVALID_ARGUMENT, "npy: malformed header: unknown key '%s'",
                            key);
        }
        if (accept(&h, '}'))
            break;
        if (!accept(&h, ','))
            return bad_header("expected ',' or '}' after a value");
    }
    skip_ws(&h);
    if (h.p != h.end)
        return bad_header("trailing characters after the dict");
    if (!seen_descr || !seen_fortran || !seen_shape)
        return bad_header(!seen_descr     ? "missing 'descr'"
                          : !seen_fortran ? "missing 'fortran_order'"
                                          : "missing 'shape'");
    return ETCH_OK;
}

/* '<f4' → dtype. */
static etch_status descr_to_dtype(const char *descr, int *dtype) {
    size_t n = strlen(descr);
    if (n < 3)
        return etch_err(ETCH_ERR_NOT_SUPPORTED, "npy: unsupported dtype '%s'", descr);
    char order = descr[0], kind = descr[1];
    char *end = NULL;
    errno = 0;
    long size = strtol(descr + 2, &end, 10);
    if (*end != 0 || errno || size <= 0 || descr[2] < '0' || descr[2] > '9')
        return etch_err(ETCH_ERR_NOT_SUPPORTED, "npy: unsupported dtype '%s'", descr);
    const npy_type *t = NULL;
    for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++)
        if (npy_types[i].kind == kind && npy_types[i].size == (unsigned)size)
            t = &npy_types[i];
    if (!t)
        return etch_err(ETCH_ERR_NOT_SUPPORTED,
                        "npy: unsupported dtype '%s' (supported: bool, int8..64, uint8..64, "
                        "float16, float32, float64)",
                        descr);
    if (order == '>' && size > 1)
        return etch_err(ETCH_ERR_NOT_SUPPORTED,
                        "npy: big-endian data ('%s') is not supported; convert with "
                        "a.astype(a.dtype.newbyteorder('<'))",
                        descr);
    if (order == '|' && size > 1)
        return etch_err(ETCH_ERR_NOT_SUPPORTED,
                        "npy: byte order '|' is invalid for a %ld-byte dtype ('%s')", size,
                        descr);
    if (order != '<' && order != '|' && !(order == '>' && size == 1))
        return etch_err(ETCH_ERR_NOT_SUPPORTED, "npy: unsupported byte order '%c' in '%s'",
                        order, descr);
    *dtype = t->dtype;
    return ETCH_OK;
}

static void *alloc_data(size_t nbytes) {
    size_t n = (nbytes + 15) & ~(size_t)15;
    void *p = aligned_alloc(16, n ? n : 16);
    return p;
}

/* Largest header accepted: numpy's own reader refuses more than 10000 bytes by default. */
#define NPY_MAX_HEADER (1u << 20)

/* The fixed prefix: magic, version, header length. `b` holds `size` >= 8 bytes (or fewer, to
 * report truncation); on success *prefix is 10 or 12 and *hlen the dict's length. */
static etch_status parse_prefix(const uint8_t *b, size_t size, unsigned *major, size_t *prefix,
                                size_t *hlen) {
    if (size < NPY_MAGIC_LEN + 2 || memcmp(b, NPY_MAGIC, NPY_MAGIC_LEN) != 0)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "npy: not a .npy file (bad magic)");
    unsigned minor = b[7];
    *major = b[6];
    if (*major == 1 && minor == 0) {
        *prefix = 10;
    } else if ((*major == 2 || *major == 3) && minor == 0) {
        *prefix = 12;
    } else {
        return etch_err(ETCH_ERR_NOT_SUPPORTED, "npy: unsupported format version %u.%u", *major,
                        minor);
    }
    if (size < *prefix)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "npy: truncated header");
    *hlen = (size_t)b[8] | ((size_t)b[9] << 8);
    if (*prefix == 12)
        *hlen |= ((size_t)b[10] << 16) | ((size_t)b[11] << 24);
    return ETCH_OK;
}

/* The header dict → dtype, shape and data size. */
static etch_status parse_text(const char *text, size_t hlen, unsigned major, npy_header *h,
                              int *dtype, uint64_t *nbytes) {
    for (size_t i = 0; i < hlen; i++)
        if (text[i] == 0 || ((unsigned char)text[i] >= 0x80 && major < 3))
            return bad_header("non-ASCII or NUL byte");
    memset(h, 0, sizeof *h);
    etch_status st = parse_header(text, hlen, h);
    if (st != ETCH_OK)
        return st;
    if ((st = descr_to_dtype(h->descr, dtype)) != ETCH_OK)
        return st;
    if (h->fortran && h->dim > 1) {
        /* A 0-d or 1-d array has the same bytes in either order. */
        return etch_err(ETCH_ERR_NOT_SUPPORTED,
                        "npy: Fortran-order arrays are not supported; save with "
                        "np.ascontiguousarray(a)");
    }
    size_t elem = etch_dtype_size(*dtype);
    if (etch_shape_extent(h->dim, h->sizes) < 0)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "npy: shape element count overflows");
    uint64_t numel = 1; /* bounded by the extent */
    for (size_t i = 0; i < h->dim; i++)
        numel *= (uint64_t)h->sizes[i];
    *nbytes = numel * elem;
    return ETCH_OK;
}

static etch_status check_data_size(uint64_t nbytes, uint64_t avail) {
    if (nbytes > avail)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "npy: truncated data: shape needs %llu bytes, file has %llu",
                        (unsigned long long)nbytes, (unsigned long long)avail);
    if (nbytes < avail)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "npy: data size mismatch: shape needs %llu bytes, file has %llu",
                        (unsigned long long)nbytes, (unsigned long long)avail);
    if (nbytes > SIZE_MAX - 16)
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "npy: %llu bytes do not fit in memory",
                        (unsigned long long)nbytes);
    return ETCH_OK;
}

/* Wrap the (already filled) buffer; frees it on failure. */
static etch_status finish(const npy_header *h, int dtype, void *buf, etch_npy *out) {
    etch_tensor t;
    etch_status st = etch_tensor_init(&t, (etch_dtype)dtype, h->dim, h->sizes, buf);
    if (st != ETCH_OK) {
        free(buf);
        etch_err_prefix("npy");
        return st;
    }
    out->tensor = t;
    return ETCH_OK;
}

etch_status etch_npy_read_buffer(const void *data, size_t size, etch_npy *out) {
    const uint8_t *b = (const uint8_t *)data;
    if (!out || (!data && size))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "npy: NULL argument");
    unsigned major = 0;
    size_t prefix = 0, hlen = 0;
    etch_status st = parse_prefix(b, size, &major, &prefix, &hlen);
    if (st != ETCH_OK)
        return st;
    if (hlen > size - prefix)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "npy: truncated header (%zu header bytes declared, %zu available)", hlen,
                        size - prefix);
    npy_header h;
    int dtype = 0;
    uint64_t nbytes = 0;
    if ((st = parse_text((const char *)b + prefix, hlen, major, &h, &dtype, &nbytes)) != ETCH_OK ||
        (st = check_data_size(nbytes, size - prefix - hlen)) != ETCH_OK)
        return st;
    void *buf = alloc_data((size_t)nbytes);
    if (!buf)
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "npy: cannot allocate %llu bytes",
                        (unsigned long long)nbytes);
    memcpy(buf, b + prefix + hlen, (size_t)nbytes);
    return finish(&h, dtype, buf, out);
}

/* Reads the file's parts straight into their final buffers: the data is never copied twice,
 * and nothing is allocated for it before the header and the file size agree. */
static etch_status read_stream(FILE *f, etch_npy *out) {
    uint8_t pre[12];
    size_t got = fread(pre, 1, 8, f);
    unsigned major;
    size_t prefix = 8, hlen = 0;
    etch_status st = parse_prefix(pre, got, &major, &prefix, &hlen);
    if (st == ETCH_ERR_INVALID_ARGUMENT && got == 8 && prefix > 8) /* need the length bytes */
        st = ETCH_OK;
    if (st != ETCH_OK)
        return st;
    got += fread(pre + 8, 1, prefix - 8, f);
    if ((st = parse_prefix(pre, got, &major, &prefix, &hlen)) != ETCH_OK)
        return st;
    if (hlen > NPY_MAX_HEADER)
        return etch_err(ETCH_ERR_NOT_SUPPORTED, "npy: header of %zu bytes is too large (max %u)",
                        hlen, NPY_MAX_HEADER);
    char *text = malloc(hlen ? hlen : 1);
    if (!text)
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "npy: out of memory");
    size_t tgot = fread(text, 1, hlen, f);
    npy_header h;
    int dtype = 0;
    uint64_t nbytes = 0;
    if (tgot != hlen)
        st = etch_err(ETCH_ERR_INVALID_ARGUMENT,
                      "npy: truncated header (%zu header bytes declared, %zu available)", hlen,
                      tgot);
    else
        st = parse_text(text, hlen, major, &h, &dtype, &nbytes);
    free(text);
    if (st != ETCH_OK)
        return st;

    /* Regular files: compare sizes before allocating (an absurd shape must not allocate). */
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode)) {
        uint64_t used = (uint64_t)prefix + hlen;
        uint64_t avail = (uint64_t)sb.st_size > used ? (uint64_t)sb.st_size - used : 0;
        if ((st = check_data_size(nbytes, avail)) != ETCH_OK)
            return st;
    } else if (nbytes > SIZE_MAX - 16) {
        return check_data_size(nbytes, 0);
    }
    void *buf = alloc_data((size_t)nbytes);
    if (!buf)
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "npy: cannot allocate %llu bytes",
                        (unsigned long long)nbytes);
    size_t dgot = nbytes ? fread(buf, 1, (size_t)nbytes, f) : 0;
    if (ferror(f)) {
        free(buf);
        return etch_err(ETCH_ERR_ACCESS_FAILED, "read error: %s", strerror(errno));
    }
    uint64_t extra = 0;
    if (dgot == nbytes) {
        uint8_t tail[256];
        size_t n;
        while ((n = fread(tail, 1, sizeof tail, f)) > 0)
            extra += n;
    }
    if ((st = check_data_size(nbytes, dgot + extra)) != ETCH_OK) {
        free(buf);
        return st;
    }
    return finish(&h, dtype, buf, out);
}

etch_status etch_npy_read_file(const char *path, etch_npy *out) {
    if (!path || !out)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "npy: NULL argument");
    FILE *f = fopen(path, "rb");
    if (!f)
        return etch_err(ETCH_ERR_ACCESS_FAILED, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    etch_status st;
    if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode))
        st = etch_err(ETCH_ERR_ACCESS_FAILED, "is a directory");
    else
        st = read_stream(f, out);
    fclose(f);
    if (st != ETCH_OK)
        etch_err_prefix("%s", path);
    return st;
}

void etch_npy_free(etch_npy *npy) {
    if (!npy)
        return;
    free(npy->tensor.data);
    memset(npy, 0, sizeof *npy);
}

/* ---- writer ------------------------------------------------------------------------- */

static etch_status write_all(FILE *f, const char *path, const void *p, size_t n) {
    if (n && fwrite(p, 1, n, f) != n)
        return etch_err(ETCH_ERR_ACCESS_FAILED, "cannot write '%s': %s", path, strerror(errno));
    return ETCH_OK;
}

/* The header: version 1.0 when its length fits 16 bits, else 2.0; the whole prefix is padded
 * with spaces to a multiple of 64 bytes (ending in '\n') so the data that follows is
 * aligned, as numpy does. */
static etch_status write_header(FILE *f, const char *path, const char *descr, size_t dim,
                                const int64_t *sizes) {
    char dict[64 + ETCH_MAX_DIMS * 24];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     descr);
    for (size_t i = 0; i < dim; i++)
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%s%lld", i ? ", " : "",
                      (long long)sizes[i]);
    n += snprintf(dict + n, sizeof dict - (size_t)n, "%s), }", dim == 1 ? "," : "");
    size_t body = (size_t)n + 1; /* + '\n' */
    size_t prefix = 10;
    unsigned major = 1;
    size_t total = (prefix + body + NPY_ALIGN - 1) / NPY_ALIGN * NPY_ALIGN;
    if (total - prefix > 0xffff) {
        major = 2;
        prefix = 12;
        total = (prefix + body + NPY_ALIGN - 1) / NPY_ALIGN * NPY_ALIGN;
    }
    size_t hlen = total - prefix;
    char out[sizeof dict + 2 * NPY_ALIGN];
    memcpy(out, NPY_MAGIC, NPY_MAGIC_LEN);
    out[6] = (char)major;
    out[7] = 0;
    for (size_t i = 0; i < prefix - 8; i++)
        out[8 + i] = (char)(uint8_t)(hlen >> (8 * i));
    memcpy(out + prefix, dict, (size_t)n);
    memset(out + prefix + (size_t)n, ' ', hlen - (size_t)n - 1);
    out[total - 1] = '\n';
    return write_all(f, path, out, total);
}

/* Write one element, converting BFloat16 to float32. */
static etch_status write_elem(FILE *f, const char *path, const uint8_t *src, int dtype,
                              size_t elem) {
    if (dtype == ETCH_DTYPE_BFLOAT16) {
        uint16_t bits;
        memcpy(&bits, src, 2);
        uint32_t fbits = (uint32_t)bits << 16;
        uint8_t le[4] = {(uint8_t)fbits, (uint8_t)(fbits >> 8), (uint8_t)(fbits >> 16),
                         (uint8_t)(fbits >> 24)};
        return write_all(f, path, le, 4);
    }
    return write_all(f, path, src, elem);
}

static etch_status write_tensor_data(FILE *f, const char *path, const etch_tensor *t) {
    size_t elem = etch_dtype_size(t->dtype);
    int64_t numel = etch_tensor_numel(t);
    if (numel == 0)
        return ETCH_OK;
    if (t->dtype != ETCH_DTYPE_BFLOAT16 && etch_tensor_is_contiguous(t))
        return write_all(f, path, t->data, (size_t)numel * elem);
    /* Walk the logical C-order index and address memory through the strides. */
    int64_t idx[ETCH_MAX_DIMS] = {0};
    const uint8_t *base = (const uint8_t *)t->data;
    for (int64_t k = 0; k < numel; k++) {
        int64_t off = 0;
        for (unsigned d = 0; d < t->dim; d++)
            off += idx[d] * t->strides[d];
        etch_status st = write_elem(f, path, base + (size_t)off * elem, t->dtype, elem);
        if (st != ETCH_OK)
            return st;
        for (int d = (int)t->dim - 1; d >= 0; d--) {
            if (++idx[d] < t->sizes[d])
                break;
            idx[d] = 0;
        }
    }
    return ETCH_OK;
}

static etch_status check_tensor(const etch_tensor *t) {
    if (t->dim > ETCH_MAX_DIMS)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "npy: tensor rank %u exceeds %d",
                        (unsigned)t->dim, ETCH_MAX_DIMS);
    bool seen[ETCH_MAX_DIMS] = {false};
    for (unsigned d = 0; d < t->dim; d++) {
        if (t->sizes[d] < 0)
            return etch_err(ETCH_ERR_INVALID_ARGUMENT, "npy: negative size at dim %u", d);
        if (t->dim_order[d] >= t->dim || seen[t->dim_order[d]])
            return etch_err(ETCH_ERR_INVALID_ARGUMENT, "npy: dim_order is not a permutation");
        seen[t->dim_order[d]] = true;
    }
    if (etch_tensor_numel(t) && !t->data)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "npy: tensor has no data");
    return ETCH_OK;
}

/* Written atomically: into a new file beside `path` (created exclusively, so no link is
 * followed), flushed to disk, then renamed over `path`, which replaces a symbolic link there
 * instead of writing through it. A reader sees the old file or the whole new one, never a
 * part; on any failure `path` is as it was. */
static etch_status write_file(const char *path, const char *descr, const etch_tensor *t,
                              const void *scalar, size_t scalar_size) {
    static atomic_uint counter;
    const size_t len = strlen(path);
    char *tmp = (char *)malloc(len + 40);
    if (!tmp)
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "npy: out of memory");
    int fd = -1;
    for (unsigned tries = 0; fd < 0 && tries < 64; tries++) {
        snprintf(tmp, len + 40, "%s.%ld.%u.tmp", path, (long)getpid(),
                 atomic_fetch_add(&counter, 1u));
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        etch_status e = etch_err(ETCH_ERR_ACCESS_FAILED, "cannot create '%s': %s", path,
                                 strerror(errno));
        if (fd >= 0) {
            close(fd);
            remove(tmp);
        }
        free(tmp);
        return e;
    }
    etch_status st = t ? write_header(f, path, descr, t->dim, t->sizes)
                       : write_header(f, path, descr, 0, NULL);
    if (st == ETCH_OK)
        st = t ? write_tensor_data(f, path, t) : write_all(f, path, scalar, scalar_size);
    if (st == ETCH_OK && (fflush(f) != 0 || fsync(fileno(f)) != 0))
        st = etch_err(ETCH_ERR_ACCESS_FAILED, "cannot write '%s': %s", path, strerror(errno));
    if (fclose(f) != 0 && st == ETCH_OK)
        st = etch_err(ETCH_ERR_ACCESS_FAILED, "cannot write '%s': %s", path, strerror(errno));
    if (st == ETCH_OK && rename(tmp, path) != 0)
        st = etch_err(ETCH_ERR_ACCESS_FAILED, "cannot replace '%s': %s", path, strerror(errno));
    if (st != ETCH_OK)
        remove(tmp);
    free(tmp);
    return st;
}

etch_status etch_npy_write_file(const char *path, const etch_tensor *t) {
    if (!path || !t)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "npy: NULL argument");
    etch_status st = check_tensor(t);
    if (st != ETCH_OK)
        return st;
    const char *descr;
    char buf[8];
    if (t->dtype == ETCH_DTYPE_BFLOAT16) {
        descr = "<f4";
    } else {
        const npy_type *nt = npy_type_for_dtype(t->dtype);
        if (!nt)
            return etch_err(ETCH_ERR_NOT_SUPPORTED, "npy: dtype %s has no NumPy equivalent",
                            etch_dtype_name(t->dtype));
        snprintf(buf, sizeof buf, "%c%c%u", nt->size == 1 ? '|' : '<', nt->kind, nt->size);
        descr = buf;
    }
    return write_file(path, descr, t, NULL, 0);
}

/* Decode UTF-8 s[0..n) into code points (out: n entries at most); false when it is not
 * valid UTF-8 (overlong forms, surrogates and values past U+10FFFF included). */
static bool utf8_decode(const unsigned char *s, size_t n, uint32_t *out, size_t *count) {
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t c = s[i];
        unsigned extra = c < 0x80              ? 0
                         : (c & 0xe0u) == 0xc0u ? 1
                         : (c & 0xf0u) == 0xe0u ? 2
                         : (c & 0xf8u) == 0xf0u ? 3
                                                : 4;
        if (extra == 4 || extra >= n - i) /* a stray continuation byte, or cut short */
            return false;
        if (extra)
            c &= 0x3fu >> extra;
        for (unsigned e = 1; e <= extra; e++) {
            if ((s[i + e] & 0xc0) != 0x80)
                return false;
            c = (c << 6) | (s[i + e] & 0x3fu);
        }
        static const uint32_t min_of[4] = {0, 0x80, 0x800, 0x10000};
        if (c < min_of[extra] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
            return false;
        out[k++] = c;
        i += extra + 1;
    }
    *count = k;
    return true;
}

/* A String as a 0-d NumPy string, as np.save(np.array(s)) writes it: '<U<n>' (UTF-32LE code
 * points) when it is valid UTF-8, else its bytes as '|S<n>'; an empty one as one NUL. */
static etch_status write_string(const char *path, const char *s, size_t n) {
    uint32_t *cp = malloc((n ? n : 1) * sizeof *cp);
    if (!cp)
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "npy: %zu-byte string", n);
    char descr[32];
    size_t count;
    etch_status st;
    if (utf8_decode((const unsigned char *)s, n, cp, &count)) {
        if (count == 0)
            cp[count++] = 0;
        for (size_t i = 0; i < count; i++) { /* little endian on any host */
            uint8_t *b = (uint8_t *)&cp[i];
            uint32_t c = cp[i];
            b[0] = (uint8_t)c, b[1] = (uint8_t)(c >> 8), b[2] = (uint8_t)(c >> 16), b[3] = 0;
        }
        snprintf(descr, sizeof descr, "<U%zu", count);
        st = write_file(path, descr, NULL, cp, count * sizeof *cp);
    } else {
        snprintf(descr, sizeof descr, "|S%zu", n);
        st = write_file(path, descr, NULL, s, n);
    }
    free(cp);
    return st;
}

etch_status etch_npy_write_value(const char *path, const etch_value *v) {
    if (!path || !v)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "npy: NULL argument");
    switch (v->tag) {
    case ETCH_VALUE_TENSOR:
        if (!v->u.tensor)
            return etch_err(ETCH_ERR_INVALID_ARGUMENT, "npy: tensor value without a tensor");
        return etch_npy_write_file(path, v->u.tensor);
    case ETCH_VALUE_INT: {
        int64_t x = v->u.i;
        return write_file(path, "<i8", NULL, &x, sizeof x);
    }
    case ETCH_VALUE_DOUBLE: {
        double x = v->u.d;
        return write_file(path, "<f8", NULL, &x, sizeof x);
    }
    case ETCH_VALUE_BOOL: {
        uint8_t x = v->u.b ? 1 : 0;
        return write_file(path, "|b1", NULL, &x, 1);
    }
    case ETCH_VALUE_STRING:
        if (!v->u.str.ptr && v->u.str.len)
            return etch_err(ETCH_ERR_INVALID_ARGUMENT, "npy: string value without data");
        return write_string(path, v->u.str.ptr ? v->u.str.ptr : "", v->u.str.len);
    default:
        return etch_err(ETCH_ERR_NOT_SUPPORTED, "npy: cannot write a %s value",
                        etch_value_tag_name(v->tag));
    }
}
