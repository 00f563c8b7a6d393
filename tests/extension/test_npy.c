/* .npy reader/writer: round trips for every dtype, layouts numpy produces, and one check per
 * malformed-file error (the files are generated here). */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "etch/npy.h"
#include "etch_test.h"

static char tmpdir[256];

static const char *tmp_path(const char *name) {
    static char buf[512];
    snprintf(buf, sizeof buf, "%s/%s", tmpdir, name);
    return buf;
}

/* Build an .npy image: magic, version, header length, the dict padded with spaces to a
 * multiple of 64 bytes (as numpy does), then `data`. Returns the size. */
static size_t build_npy(uint8_t *out, size_t cap, int major, const char *dict, const void *data,
                        size_t data_size) {
    size_t prefix = major == 1 ? 10 : 12;
    size_t dl = strlen(dict);
    size_t total = (prefix + dl + 1 + 63) / 64 * 64;
    size_t hlen = total - prefix;
    if (total + data_size > cap)
        abort();
    memcpy(out, "\x93NUMPY", 6);
    out[6] = (uint8_t)major;
    out[7] = 0;
    for (size_t i = 0; i < prefix - 8; i++)
        out[8 + i] = (uint8_t)(hlen >> (8 * i));
    memcpy(out + prefix, dict, dl);
    memset(out + prefix + dl, ' ', hlen - dl - 1);
    out[total - 1] = '\n';
    if (data_size)
        memcpy(out + total, data, data_size);
    return total + data_size;
}

static uint8_t img[1 << 16];

static bool contains(const uint8_t *hay, size_t n, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(hay + i, needle, k) == 0)
            return true;
    return false;
}

static const char *tmp_path(const char *name);

static void expect_bad_one(bool from_file, const void *data, size_t size, etch_status want,
                           const char *needle, int line) {
    etch_npy a;
    memset(&a, 0, sizeof a);
    etch_status st;
    if (from_file) {
        const char *p = tmp_path("bad.npy");
        FILE *f = fopen(p, "wb");
        if (f) {
            if (size)
                fwrite(data, 1, size, f);
            fclose(f);
        }
        st = etch_npy_read_file(p, &a);
        CHECK_MSG(st == ETCH_OK || strstr(etch_last_error(), "bad.npy") != NULL,
                  "line %d: message '%s' does not name the file", line, etch_last_error());
    } else {
        st = etch_npy_read_buffer(data, size, &a);
    }
    CHECK_MSG(st == want, "line %d (%s): got %s (%s), want %s", line,
              from_file ? "file" : "buffer", etch_status_str(st), etch_last_error(),
              etch_status_str(want));
    CHECK_MSG(strstr(etch_last_error(), needle) != NULL, "line %d (%s): message '%s' lacks '%s'",
              line, from_file ? "file" : "buffer", etch_last_error(), needle);
    CHECK_MSG(a.tensor.data == NULL, "line %d: out touched on failure", line);
    if (st == ETCH_OK)
        etch_npy_free(&a);
}

/* Expect reading the bytes (from memory, and from a file) to fail with `want` and a message
 * containing `needle`. */
static void expect_bad(const void *data, size_t size, etch_status want, const char *needle,
                       int line) {
    expect_bad_one(false, data, size, want, needle, line);
    expect_bad_one(true, data, size, want, needle, line);
}

static void expect_bad_dict(int major, const char *dict, size_t data_size, etch_status want,
                            const char *needle, int line) {
    static uint8_t zeros[4096];
    size_t n = build_npy(img, sizeof img, major, dict, zeros, data_size);
    expect_bad(img, n, want, needle, line);
}

#define BAD_DICT(dict, nbytes, st, needle) expect_bad_dict(1, dict, nbytes, st, needle, __LINE__)

static void test_roundtrip_all_dtypes(void) {
    static const struct {
        etch_dtype dtype;
        const char *descr;
    } cases[] = {
        {ETCH_DTYPE_BOOL, "|b1"},    {ETCH_DTYPE_CHAR, "|i1"},   {ETCH_DTYPE_BYTE, "|u1"},
        {ETCH_DTYPE_SHORT, "<i2"},   {ETCH_DTYPE_UINT16, "<u2"}, {ETCH_DTYPE_INT, "<i4"},
        {ETCH_DTYPE_UINT32, "<u4"},  {ETCH_DTYPE_LONG, "<i8"},   {ETCH_DTYPE_UINT64, "<u8"},
        {ETCH_DTYPE_HALF, "<f2"},    {ETCH_DTYPE_FLOAT, "<f4"},  {ETCH_DTYPE_DOUBLE, "<f8"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint8_t data[2 * 3 * 8];
        size_t es = etch_dtype_size(cases[c].dtype);
        for (size_t i = 0; i < sizeof data; i++)
            data[i] = cases[c].dtype == ETCH_DTYPE_BOOL ? (uint8_t)(i & 1) : (uint8_t)(i * 7 + 1);
        etch_tensor t;
        CHECK_OK(etch_tensor_init(&t, cases[c].dtype, 2, (int64_t[]){2, 3}, data));
        const char *p = tmp_path("rt.npy");
        CHECK_OK(etch_npy_write_file(p, &t));

        /* Header text and alignment. */
        FILE *f = fopen(p, "rb");
        size_t n = f ? fread(img, 1, sizeof img, f) : 0;
        if (f)
            fclose(f);
        CHECK(n == 128 + 6 * es);
        CHECK(img[6] == 1 && img[7] == 0);
        char want[128];
        snprintf(want, sizeof want, "{'descr': '%s', 'fortran_order': False, 'shape': (2, 3), }",
                 cases[c].descr);
        CHECK_MSG(memcmp(img + 10, want, strlen(want)) == 0, "header for %s", cases[c].descr);
        CHECK(img[127] == '\n');

        etch_npy a;
        memset(&a, 0, sizeof a);
        CHECK_OK(etch_npy_read_file(p, &a));
        CHECK(a.tensor.dtype == cases[c].dtype);
        CHECK(a.tensor.dim == 2 && a.tensor.sizes[0] == 2 && a.tensor.sizes[1] == 3);
        CHECK(((uintptr_t)a.tensor.data & 15) == 0);
        CHECK(a.tensor.data && memcmp(a.tensor.data, data, 6 * es) == 0);
        etch_npy_free(&a);
        CHECK(a.tensor.data == NULL);
    }
}

static void test_shapes(void) {
    /* 0-d, 1-d (the "(3,)" tuple), zero-size, rank 16. */
    float x = 42.5f;
    etch_tensor t;
    etch_npy a;
    CHECK_OK(etch_tensor_init(&t, ETCH_DTYPE_FLOAT, 0, NULL, &x));
    CHECK_OK(etch_npy_write_file(tmp_path("s0.npy"), &t));
    CHECK_OK(etch_npy_read_file(tmp_path("s0.npy"), &a));
    CHECK(a.tensor.dim == 0 && etch_tensor_numel(&a.tensor) == 1);
    CHECK(a.tensor.data && *(float *)a.tensor.data == 42.5f);
    etch_npy_free(&a);

    int32_t v[3] = {1, -2, 3};
    CHECK_OK(etch_tensor_init(&t, ETCH_DTYPE_INT, 1, (int64_t[]){3}, v));
    CHECK_OK(etch_npy_write_file(tmp_path("s1.npy"), &t));
    FILE *f = fopen(tmp_path("s1.npy"), "rb");
    size_t n = f ? fread(img, 1, sizeof img, f) : 0;
    if (f)
        fclose(f);
    CHECK(n == 128 + 12);
    CHECK(contains(img, 128, "'shape': (3,), }"));
    CHECK_OK(etch_npy_read_buffer(img, n, &a));
    CHECK(a.tensor.dim == 1 && a.tensor.sizes[0] == 3);
    CHECK(memcmp(a.tensor.data, v, sizeof v) == 0);
    etch_npy_free(&a);

    CHECK_OK(etch_tensor_init(&t, ETCH_DTYPE_DOUBLE, 2, (int64_t[]){0, 5}, NULL));
    CHECK_OK(etch_npy_write_file(tmp_path("empty.npy"), &t));
    CHECK_OK(etch_npy_read_file(tmp_path("empty.npy"), &a));
    CHECK(a.tensor.dim == 2 && a.tensor.sizes[0] == 0 && a.tensor.sizes[1] == 5);
    CHECK(a.tensor.data != NULL); /* never NULL, even for zero elements */
    etch_npy_free(&a);

    int64_t sizes[ETCH_MAX_DIMS];
    for (int i = 0; i < ETCH_MAX_DIMS; i++)
        sizes[i] = 1;
    sizes[3] = 2;
    uint8_t two[2] = {5, 6};
    CHECK_OK(etch_tensor_init(&t, ETCH_DTYPE_BYTE, ETCH_MAX_DIMS, sizes, two));
    CHECK_OK(etch_npy_write_file(tmp_path("r16.npy"), &t));
    CHECK_OK(etch_npy_read_file(tmp_path("r16.npy"), &a));
    CHECK(a.tensor.dim == ETCH_MAX_DIMS && a.tensor.sizes[3] == 2);
    CHECK(((uint8_t *)a.tensor.data)[1] == 6);
    etch_npy_free(&a);

    etch_npy_free(NULL);
    etch_npy zero;
    memset(&zero, 0, sizeof zero);
    etch_npy_free(&zero);
}

static void test_dim_order(void) {
    /* Logical [[1,2,3],[4,5,6]] stored channels-last style: dim_order (1, 0), i.e. column
     * major. The file must hold the logical C order. */
    float mem[6] = {1, 4, 2, 5, 3, 6};
    etch_tensor t;
    CHECK_OK(etch_tensor_init(&t, ETCH_DTYPE_FLOAT, 2, (int64_t[]){2, 3}, mem));
    t.dim_order[0] = 1;
    t.dim_order[1] = 0;
    etch_tensor_update_strides(&t);
    CHECK(t.strides[0] == 1 && t.strides[1] == 2);
    CHECK_OK(etch_npy_write_file(tmp_path("do.npy"), &t));
    etch_npy a;
    CHECK_OK(etch_npy_read_file(tmp_path("do.npy"), &a));
    const float *d = a.tensor.data;
    for (int i = 0; i < 6; i++)
        CHECK_MSG(d[i] == (float)(i + 1), "element %d is %g", i, d[i]);
    etch_npy_free(&a);

    /* A bad dim order is refused rather than read out of bounds. */
    t.dim_order[1] = 1;
    CHECK_STATUS(etch_npy_write_file(tmp_path("bad_do.npy"), &t), ETCH_ERR_INVALID_ARGUMENT);
    CHECK(access(tmp_path("bad_do.npy"), F_OK) != 0);
}

static void test_special_dtypes(void) {
    /* BFloat16 is widened to float32. */
    uint16_t bf[3] = {0x3f80, 0xc040, 0x7f80}; /* 1, -3, +inf */
    etch_tensor t;
    CHECK_OK(etch_tensor_init(&t, ETCH_DTYPE_BFLOAT16, 1, (int64_t[]){3}, bf));
    CHECK_OK(etch_npy_write_file(tmp_path("bf.npy"), &t));
    etch_npy a;
    CHECK_OK(etch_npy_read_file(tmp_path("bf.npy"), &a));
    CHECK(a.tensor.dtype == ETCH_DTYPE_FLOAT);
    const float *f = a.tensor.data;
    CHECK(f[0] == 1.0f && f[1] == -3.0f && isinf(f[2]) && f[2] > 0);
    etch_npy_free(&a);

    /* Types without a numpy equivalent are refused. */
    int8_t q[2] = {1, 2};
    CHECK_OK(etch_tensor_init(&t, ETCH_DTYPE_QINT8, 1, (int64_t[]){2}, q));
    CHECK_STATUS(etch_npy_write_file(tmp_path("q.npy"), &t), ETCH_ERR_NOT_SUPPORTED);
    CHECK(strstr(etch_last_error(), "QInt8") != NULL);
}

static void test_write_value(void) {
    etch_value v;
    etch_npy a;
    memset(&v, 0, sizeof v);
    v.tag = ETCH_VALUE_INT;
    v.u.i = -1234567890123LL;
    CHECK_OK(etch_npy_write_value(tmp_path("vi.npy"), &v));
    CHECK_OK(etch_npy_read_file(tmp_path("vi.npy"), &a));
    CHECK(a.tensor.dtype == ETCH_DTYPE_LONG && a.tensor.dim == 0);
    CHECK(*(int64_t *)a.tensor.data == -1234567890123LL);
    etch_npy_free(&a);

    v.tag = ETCH_VALUE_DOUBLE;
    v.u.d = 0.125;
    CHECK_OK(etch_npy_write_value(tmp_path("vd.npy"), &v));
    CHECK_OK(etch_npy_read_file(tmp_path("vd.npy"), &a));
    CHECK(a.tensor.dtype == ETCH_DTYPE_DOUBLE && a.tensor.dim == 0);
    CHECK(*(double *)a.tensor.data == 0.125);
    etch_npy_free(&a);

    v.tag = ETCH_VALUE_BOOL;
    v.u.b = true;
    CHECK_OK(etch_npy_write_value(tmp_path("vb.npy"), &v));
    CHECK_OK(etch_npy_read_file(tmp_path("vb.npy"), &a));
    CHECK(a.tensor.dtype == ETCH_DTYPE_BOOL && a.tensor.dim == 0);
    CHECK(*(uint8_t *)a.tensor.data == 1);
    etch_npy_free(&a);

    float x[2] = {1.5f, 2.5f};
    etch_tensor t;
    CHECK_OK(etch_tensor_init(&t, ETCH_DTYPE_FLOAT, 1, (int64_t[]){2}, x));
    v.tag = ETCH_VALUE_TENSOR;
    v.u.tensor = &t;
    CHECK_OK(etch_npy_write_value(tmp_path("vt.npy"), &v));
    CHECK_OK(etch_npy_read_file(tmp_path("vt.npy"), &a));
    CHECK(a.tensor.sizes[0] == 2 && ((float *)a.tensor.data)[1] == 2.5f);
    etch_npy_free(&a);

    /* Strings: byte for byte what numpy 1.24 np.save(np.array(s)) writes: '<U<n>' UTF-32LE
     * code points for UTF-8 text ("hi", "é✓"), '|S<n>' bytes for anything else */
    static const struct {
        const char *s, *descr, *payload;
        size_t len, payload_len;
    } strs[] = {
        {"hi", "<U2", "h\0\0\0i\0\0\0", 2, 8},
        {"\xc3\xa9\xe2\x9c\x93", "<U2", "\xe9\0\0\0\x13\x27\0\0", 5, 8},
        {"", "<U1", "\0\0\0\0", 0, 4},
        {"\xff\x01", "|S2", "\xff\x01", 2, 2},
        {"a\xc3", "|S2", "a\xc3", 2, 2},            /* cut short */
        {"\xed\xa0\x80", "|S3", "\xed\xa0\x80", 3, 3}, /* a surrogate */
    };
    for (size_t k = 0; k < sizeof strs / sizeof strs[0]; k++) {
        v.tag = ETCH_VALUE_STRING;
        v.u.str.ptr = strs[k].s;
        v.u.str.len = strs[k].len;
        CHECK_OK(etch_npy_write_value(tmp_path("vs.npy"), &v));
        uint8_t want[256];
        int h = snprintf((char *)want, sizeof want,
                         "\x93NUMPY\x01%c\x76%c{'descr': '%s', 'fortran_order': False, "
                         "'shape': (), }",
                         0, 0, strs[k].descr);
        memset(want + h, ' ', 127 - (size_t)h);
        want[127] = '\n';
        memcpy(want + 128, strs[k].payload, strs[k].payload_len);
        FILE *f = fopen(tmp_path("vs.npy"), "rb");
        uint8_t got[256];
        size_t n = f ? fread(got, 1, sizeof got, f) : 0;
        if (f)
            fclose(f);
        CHECK_MSG(n == 128 + strs[k].payload_len && memcmp(got, want, n) == 0,
                  "string %zu: %zu bytes", k, n);
    }
    v.tag = ETCH_VALUE_NONE;
    CHECK_STATUS(etch_npy_write_value(tmp_path("vn.npy"), &v), ETCH_ERR_NOT_SUPPORTED);
}

static void test_numpy_files(void) {
    /* Byte-for-byte what numpy 1.24 np.save writes (its padding leaves room to grow). */
    static const float f6[6] = {0, 1, 2, 3, 4, 5};
    size_t n = build_npy(img, sizeof img, 1,
                         "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
                         "                                                          ",
                         f6, sizeof f6);
    CHECK(n == 152);
    etch_npy a;
    CHECK_OK(etch_npy_read_buffer(img, n, &a));
    CHECK(a.tensor.dtype == ETCH_DTYPE_FLOAT && a.tensor.sizes[1] == 3);
    CHECK(memcmp(a.tensor.data, f6, sizeof f6) == 0);
    etch_npy_free(&a);

    /* Versions 2.0 and 3.0 (4-byte header length; 3.0 allows UTF-8), keys in another order,
     * double quotes, no trailing comma, extra whitespace, a Fortran-order 1-d array (same
     * bytes as C order). */
    static const int64_t l3[3] = {-1, 0, 1LL << 40};
    n = build_npy(img, sizeof img, 2,
                  "{ \"shape\" : ( 3 , ) , \"fortran_order\": True, \"descr\": \"<i8\" }", l3,
                  sizeof l3);
    CHECK_OK(etch_npy_read_buffer(img, n, &a));
    CHECK(a.tensor.dtype == ETCH_DTYPE_LONG && a.tensor.dim == 1 && a.tensor.sizes[0] == 3);
    CHECK(((int64_t *)a.tensor.data)[2] == (1LL << 40));
    etch_npy_free(&a);

    static const uint8_t b3[3] = {1, 0, 1};
    n = build_npy(img, sizeof img, 3,
                  "{'descr': '|b1', 'fortran_order': False, 'shape': (3,)}", b3, 3);
    CHECK_OK(etch_npy_read_buffer(img, n, &a));
    CHECK(a.tensor.dtype == ETCH_DTYPE_BOOL && a.tensor.sizes[0] == 3);
    etch_npy_free(&a);

    /* '>u1' is a valid (if odd) spelling of uint8: byte order does not apply. */
    n = build_npy(img, sizeof img, 1, "{'descr': '>u1', 'fortran_order': False, 'shape': (3,)}",
                  b3, 3);
    CHECK_OK(etch_npy_read_buffer(img, n, &a));
    CHECK(a.tensor.dtype == ETCH_DTYPE_BYTE);
    etch_npy_free(&a);
}

static void test_malformed(void) {
    static const char good[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
    size_t n = build_npy(img, sizeof img, 1, good, "\0\0\0\0\0\0\0\0", 8);

    /* Magic, version, lengths. */
    expect_bad(img, 0, ETCH_ERR_INVALID_ARGUMENT, "bad magic", __LINE__);
    expect_bad("\x93NUMP", 5, ETCH_ERR_INVALID_ARGUMENT, "bad magic", __LINE__);
    expect_bad("\x93NUMPX\x01\x00", 8, ETCH_ERR_INVALID_ARGUMENT, "bad magic", __LINE__);
    expect_bad("PK\x03\x04....", 8, ETCH_ERR_INVALID_ARGUMENT, "bad magic", __LINE__);
    expect_bad(img, 9, ETCH_ERR_INVALID_ARGUMENT, "truncated header", __LINE__);
    expect_bad(img, 40, ETCH_ERR_INVALID_ARGUMENT, "truncated header", __LINE__);
    img[6] = 4;
    expect_bad(img, n, ETCH_ERR_NOT_SUPPORTED, "version 4.0", __LINE__);
    img[6] = 1;
    img[7] = 1;
    expect_bad(img, n, ETCH_ERR_NOT_SUPPORTED, "version 1.1", __LINE__);
    img[7] = 0;
    img[8] = 0xff; /* header length past the end */
    expect_bad(img, n, ETCH_ERR_INVALID_ARGUMENT, "truncated header", __LINE__);
    img[8] = 54;
    expect_bad(img, n, ETCH_ERR_INVALID_ARGUMENT, "malformed header", __LINE__);
    n = build_npy(img, sizeof img, 2, good, "\0\0\0\0\0\0\0\0", 8);
    img[11] = 0x80; /* 2 GiB header: a file is refused before reading it */
    expect_bad_one(false, img, n, ETCH_ERR_INVALID_ARGUMENT, "truncated header", __LINE__);
    expect_bad_one(true, img, n, ETCH_ERR_NOT_SUPPORTED, "too large", __LINE__);

    /* Data size. */
    n = build_npy(img, sizeof img, 1, good, "\0\0\0\0\0\0\0\0", 8);
    expect_bad(img, n - 1, ETCH_ERR_INVALID_ARGUMENT, "truncated data", __LINE__);
    expect_bad(img, n - 8, ETCH_ERR_INVALID_ARGUMENT, "truncated data", __LINE__);
    n = build_npy(img, sizeof img, 1, good, "\0\0\0\0\0\0\0\0\0", 9);
    expect_bad(img, n, ETCH_ERR_INVALID_ARGUMENT, "data size mismatch", __LINE__);

    /* Header dict. */
    BAD_DICT("", 0, ETCH_ERR_INVALID_ARGUMENT, "does not start with '{'");
    BAD_DICT("descr: '<f4'", 0, ETCH_ERR_INVALID_ARGUMENT, "does not start with '{'");
    BAD_DICT("{'descr': '<f4', 'fortran_order': False}", 4, ETCH_ERR_INVALID_ARGUMENT,
             "missing 'shape'");
    BAD_DICT("{'fortran_order': False, 'shape': ()}", 4, ETCH_ERR_INVALID_ARGUMENT,
             "missing 'descr'");
    BAD_DICT("{'descr': '<f4', 'shape': ()}", 4, ETCH_ERR_INVALID_ARGUMENT,
             "missing 'fortran_order'");
    BAD_DICT("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': ()}", 4,
             ETCH_ERR_INVALID_ARGUMENT, "duplicate 'descr'");
    BAD_DICT("{'descr': '<f4', 'fortran_order': False, 'shape': (), 'extra': 1}", 4,
             ETCH_ERR_INVALID_ARGUMENT, "unknown key 'extra'");
    BAD_DICT("{'descr': '<f4', 'fortran_order': 0, 'shape': ()}", 4, ETCH_ERR_INVALID_ARGUMENT,
             "neither True nor False");
    BAD_DICT("{'descr': '<f4', 'fortran_order': False, 'shape': [2]}", 8,
             ETCH_ERR_INVALID_ARGUMENT, "not a tuple");
    BAD_DICT("{'descr': '<f4', 'fortran_order': False, 'shape': (2,}", 8,
             ETCH_ERR_INVALID_ARGUMENT, "malformed header");
    BAD_DICT("{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}", 24,
             ETCH_ERR_INVALID_ARGUMENT, "expected ',' or ')'");
    BAD_DICT("{'descr': '<f4', 'fortran_order': False, 'shape': (2.5,)}", 8,
             ETCH_ERR_INVALID_ARGUMENT, "expected ',' or ')'");
    BAD_DICT("{'descr': '<f4', 'fortran_order': False, 'shape': (x,)}", 8,
             ETCH_ERR_INVALID_ARGUMENT, "non-negative integers");
    BAD_DICT("{'descr': '<f4', 'fortran_order': False, 'shape': ()} junk", 4,
             ETCH_ERR_INVALID_ARGUMENT, "trailing characters");
    BAD_DICT("{'descr': '<f4', 'fortran_order': False, 'shape': ()", 4,
             ETCH_ERR_INVALID_ARGUMENT, "expected ',' or '}'");
    BAD_DICT("{'descr: '<f4', 'fortran_order': False, 'shape': ()}", 4,
             ETCH_ERR_INVALID_ARGUMENT, "malformed header");
    BAD_DICT("{descr: '<f4'}", 4, ETCH_ERR_INVALID_ARGUMENT, "quoted key");
    BAD_DICT("{'descr' '<f4'}", 4, ETCH_ERR_INVALID_ARGUMENT, "expected ':'");
    BAD_DICT("{'descr': '<\\x66\\x34', 'fortran_order': False, 'shape': ()}", 4,
             ETCH_ERR_INVALID_ARGUMENT, "'descr' is not a short quoted string");

    /* Shapes. */
    BAD_DICT("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", 4,
             ETCH_ERR_INVALID_ARGUMENT, "negative dimension");
    BAD_DICT("{'descr': '<f4', 'fortran_order': False, "
             "'shape': (1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1)}",
             4, ETCH_ERR_NOT_SUPPORTED, "more than 16 dimensions");
    BAD_DICT("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", 4,
             ETCH_ERR_INVALID_ARGUMENT, "overflows int64");
    BAD_DICT("{'descr': '<f4', 'fortran_order': False, "
             "'shape': (4294967296, 4294967296, 4294967296)}",
             4, ETCH_ERR_INVALID_ARGUMENT, "overflows");
    BAD_DICT("{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904,)}", 8,
             ETCH_ERR_INVALID_ARGUMENT, "overflows");
    /* a zero dimension does not make huge ones safe: strides would pass int64 */
    BAD_DICT("{'descr': '<f4', 'fortran_order': False, "
             "'shape': (0, 4294967296, 4294967296)}",
             0, ETCH_ERR_INVALID_ARGUMENT, "overflows");
    BAD_DICT("{'descr': '<f4', 'fortran_order': False, "
             "'shape': (4294967296, 4294967296, 0)}",
             0, ETCH_ERR_INVALID_ARGUMENT, "overflows");
    BAD_DICT("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000, 1000)}", 8,
             ETCH_ERR_INVALID_ARGUMENT, "truncated data");

    /* Layout and dtypes. */
    BAD_DICT("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2)}", 16,
             ETCH_ERR_NOT_SUPPORTED, "Fortran-order");
    BAD_DICT("{'descr': '>f4', 'fortran_order': False, 'shape': (2,)}", 8,
             ETCH_ERR_NOT_SUPPORTED, "big-endian");
    BAD_DICT("{'descr': '>i8', 'fortran_order': False, 'shape': (1,)}", 8,
             ETCH_ERR_NOT_SUPPORTED, "big-endian");
    BAD_DICT("{'descr': '|f4', 'fortran_order': False, 'shape': (2,)}", 8,
             ETCH_ERR_NOT_SUPPORTED, "byte order '|'");
    BAD_DICT("{'descr': '=f4', 'fortran_order': False, 'shape': (2,)}", 8,
             ETCH_ERR_NOT_SUPPORTED, "byte order '='");
    BAD_DICT("{'descr': '<c8', 'fortran_order': False, 'shape': (1,)}", 8,
             ETCH_ERR_NOT_SUPPORTED, "unsupported dtype '<c8'");
    BAD_DICT("{'descr': '<f16', 'fortran_order': False, 'shape': (1,)}", 16,
             ETCH_ERR_NOT_SUPPORTED, "unsupported dtype '<f16'");
    BAD_DICT("{'descr': '<U3', 'fortran_order': False, 'shape': (1,)}", 12,
             ETCH_ERR_NOT_SUPPORTED, "unsupported dtype '<U3'");
    BAD_DICT("{'descr': '|O', 'fortran_order': False, 'shape': (1,)}", 8,
             ETCH_ERR_NOT_SUPPORTED, "unsupported dtype '|O'");
    BAD_DICT("{'descr': '|V2', 'fortran_order': False, 'shape': (1,)}", 2,
             ETCH_ERR_NOT_SUPPORTED, "unsupported dtype '|V2'");
    BAD_DICT("{'descr': '<f', 'fortran_order': False, 'shape': (1,)}", 4,
             ETCH_ERR_NOT_SUPPORTED, "unsupported dtype");
    BAD_DICT("{'descr': '<f4x', 'fortran_order': False, 'shape': (1,)}", 4,
             ETCH_ERR_NOT_SUPPORTED, "unsupported dtype");
    BAD_DICT("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}", 4,
             ETCH_ERR_NOT_SUPPORTED, "structured");

    /* A NUL or a non-ASCII byte inside a 1.0 header. */
    n = build_npy(img, sizeof img, 1, good, "\0\0\0\0\0\0\0\0", 8);
    img[20] = 0;
    expect_bad(img, n, ETCH_ERR_INVALID_ARGUMENT, "NUL", __LINE__);
    n = build_npy(img, sizeof img, 1, good, "\0\0\0\0\0\0\0\0", 8);
    img[12] = (uint8_t)0xc3;
    expect_bad(img, n, ETCH_ERR_INVALID_ARGUMENT, "non-ASCII", __LINE__);

    /* Files. */
    etch_npy a;
    memset(&a, 0, sizeof a);
    CHECK_STATUS(etch_npy_read_file(tmp_path("does_not_exist.npy"), &a), ETCH_ERR_ACCESS_FAILED);
    CHECK(strstr(etch_last_error(), "does_not_exist.npy") != NULL);
    FILE *f = fopen(tmp_path("trunc.npy"), "wb");
    n = build_npy(img, sizeof img, 1, good, "\0\0\0\0\0\0\0\0", 8);
    if (f) {
        fwrite(img, 1, n - 3, f);
        fclose(f);
    }
    CHECK_STATUS(etch_npy_read_file(tmp_path("trunc.npy"), &a), ETCH_ERR_INVALID_ARGUMENT);
    CHECK(strstr(etch_last_error(), "trunc.npy") && strstr(etch_last_error(), "truncated data"));
    CHECK_STATUS(etch_npy_read_file(tmpdir, &a), ETCH_ERR_ACCESS_FAILED); /* a directory */

    float x = 1;
    etch_tensor t;
    CHECK_OK(etch_tensor_init(&t, ETCH_DTYPE_FLOAT, 0, NULL, &x));
    CHECK_STATUS(etch_npy_write_file(tmp_path("no/such/dir/x.npy"), &t), ETCH_ERR_ACCESS_FAILED);
    CHECK_STATUS(etch_npy_read_buffer(NULL, 4, &a), ETCH_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(etch_npy_write_file(NULL, &t), ETCH_ERR_INVALID_ARGUMENT);
}

/* Writes replace the file atomically: a symbolic link at the path is replaced, not written
 * through; a failed write leaves the old file; no temporary is left behind. */
static void test_atomic_write(void) {
    float x[2] = {1, 2};
    int64_t two = 2;
    etch_tensor t;
    CHECK_OK(etch_tensor_init(&t, ETCH_DTYPE_FLOAT, 1, &two, x));
    char target[600], link[600];
    snprintf(target, sizeof target, "%s", tmp_path("victim.txt"));
    FILE *f = fopen(target, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("keep me", f);
        fclose(f);
    }
    snprintf(link, sizeof link, "%s", tmp_path("out_link.npy"));
    CHECK(symlink(target, link) == 0);
    CHECK_OK(etch_npy_write_file(link, &t));
    char buf[16] = {0};
    f = fopen(target, "r");
    CHECK(f && fread(buf, 1, sizeof buf - 1, f) == 7 && strcmp(buf, "keep me") == 0);
    if (f)
        fclose(f);
    etch_npy a;
    CHECK_OK(etch_npy_read_file(link, &a)); /* now a regular file of its own */
    CHECK(a.tensor.sizes[0] == 2 && ((float *)a.tensor.data)[1] == 2.0f);
    etch_npy_free(&a);
    /* a path that is a directory cannot be replaced: an error, the directory stays */
    char dir[600];
    snprintf(dir, sizeof dir, "%s", tmp_path("a_dir.npy"));
    CHECK(mkdir(dir, 0755) == 0);
    CHECK_STATUS(etch_npy_write_file(dir, &t), ETCH_ERR_ACCESS_FAILED);
    struct stat st;
    CHECK(stat(dir, &st) == 0 && S_ISDIR(st.st_mode));
    /* nothing but what was written: no temporaries beside them */
    char cmd[700];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -c '\\.tmp$' >/dev/null", tmpdir);
    CHECK(system(cmd) != 0);
}

/* Every truncation and many single-byte changes of a valid file: refused cleanly or read,
 * never a crash or an out-of-bounds access (the sanitizer build checks that). */
static void test_mutations(void) {
    static const float f6[6] = {1, 2, 3, 4, 5, 6};
    uint8_t orig[256], buf[256];
    size_t n = build_npy(orig, sizeof orig, 1,
                         "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", f6,
                         sizeof f6);
    static const uint8_t subst[] = {0x00, 0xff, '(', ')', ',', '\'', '0', '9', ' ', '}', 'x'};
    size_t odd = 0, ok = 0;
    for (size_t len = 0; len <= n; len++) {
        for (size_t pos = 0; pos < (len == n ? n : 1); pos++) {
            for (size_t k = 0; k < (len == n ? sizeof subst : 1); k++) {
                memcpy(buf, orig, n);
                if (len == n)
                    buf[pos] = subst[k];
                etch_npy a;
                memset(&a, 0, sizeof a);
                etch_status st = etch_npy_read_buffer(buf, len, &a);
                if (st == ETCH_OK) {
                    ok++;
                    CHECK(a.tensor.data != NULL);
                    etch_npy_free(&a);
                } else if (st != ETCH_ERR_INVALID_ARGUMENT && st != ETCH_ERR_NOT_SUPPORTED) {
                    odd++;
                }
            }
        }
    }
    CHECK_MSG(odd == 0, "%zu mutations gave an unexpected status", odd);
    CHECK(ok > 0); /* e.g. changes inside the data or the padding */
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "%s/etch_npy_XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_roundtrip_all_dtypes();
    test_shapes();
    test_dim_order();
    test_special_dtypes();
    test_write_value();
    test_numpy_files();
    test_malformed();
    test_mutations();
    test_atomic_write();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "warning: could not remove %s\n", tmpdir);
    return etch_test_finish();
}
