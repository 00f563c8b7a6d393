/* Bundled programs (.bpte): parsing the fixtures, refusing malformed files (targeted
 * mutations found with the flatbuffer reader, every truncation, every byte flipped), and
 * running + verifying the test cases, including deliberately wrong expectations. */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etch/bundled.h"
#include "etch/module.h"
#include "etch_test.h"
#include "format/flatbuf.h"

static const char *fixtures;

static uint8_t *read_fixture(const char *name, size_t *size) {
    char path[1024];
    snprintf(path, sizeof path, "%s/pte/%s", fixtures, name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = aligned_alloc(32, ((size_t)n + 31) & ~(size_t)31);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    fclose(f);
    *size = (size_t)n;
    return buf;
}

static uint8_t *dup_buf(const uint8_t *src, size_t size) {
    uint8_t *p = aligned_alloc(32, (size + 31) & ~(size_t)31);
    memcpy(p, src, size);
    return p;
}

/* Absolute position of a present field (0 when absent). */
static size_t slot_pos(const fb_table *t, unsigned slot) {
    size_t e = 4 + 2 * (size_t)slot;
    if (e + 2 > t->vtable_size)
        return 0;
    uint16_t off = fb_rd_u16(t->buf->data + t->vtable + e);
    return off ? t->pos + off : 0;
}

/* The Value table `idx` of case `k` (which: 0 inputs, 1 expected outputs) of suite 0. */
static bool find_value(fb_buf *b, size_t k, unsigned which, uint32_t idx, fb_table *value) {
    fb_table root, suite, tc;
    fb_vec suites, cases, values;
    return fb_root(b, &root) && fb_vec_field(&root, 1, 4, 4, &suites) &&
           fb_vec_table(&suites, 0, &suite) && fb_vec_field(&suite, 1, 4, 4, &cases) &&
           fb_vec_table(&cases, (uint32_t)k, &tc) && fb_vec_field(&tc, which, 4, 4, &values) &&
           fb_vec_table(&values, idx, value);
}

static bool find_tensor(fb_buf *b, size_t k, unsigned which, uint32_t idx, fb_table *tensor) {
    fb_table value;
    return find_value(b, k, which, idx, &value) && fb_table_field(&value, 1, tensor);
}

static void test_open_fixtures(void) {
    size_t size;
    uint8_t *buf = read_fixture("bundled_add_mul.bpte", &size);
    etch_bundled *b = NULL;
    CHECK_OK(etch_bundled_open_buffer(buf, size, &b));
    if (b) {
        CHECK(etch_bundled_num_suites(b) == 1);
        CHECK(strcmp(etch_bundled_suite_method(b, 0), "forward") == 0);
        CHECK(etch_bundled_suite_method(b, 1) == NULL);
        CHECK(etch_bundled_num_cases(b, "forward") == 10);
        CHECK(etch_bundled_num_cases(b, "backward") == 0);
        CHECK(etch_bundled_num_cases(b, NULL) == 0);
        size_t psize = 0;
        const uint8_t *prog = etch_bundled_program(b, &psize);
        CHECK(psize == 1696);
        CHECK(prog == buf + 64);
        CHECK(prog && memcmp(prog + 4, "ET12", 4) == 0);
        etch_bundled_close(b);
    }

    /* A misaligned copy still opens (tensor data that is not 16-aligned gets copied). */
    uint8_t *odd = malloc(size + 1);
    memcpy(odd + 1, buf, size);
    b = NULL;
    CHECK_OK(etch_bundled_open_buffer(odd + 1, size, &b));
    CHECK(b && etch_bundled_num_cases(b, "forward") == 10);
    etch_bundled_close(b);
    free(odd);
    free(buf);

    buf = read_fixture("lenet_bundled.bpte", &size);
    b = NULL;
    CHECK_OK(etch_bundled_open_buffer(buf, size, &b));
    CHECK(b && etch_bundled_num_cases(b, "forward") == 2);
    etch_bundled_close(b);
    free(buf);

    etch_bundled_close(NULL);
    CHECK(etch_bundled_num_suites(NULL) == 0);
}

typedef void (*mutator)(uint8_t *buf, size_t size);

static void expect_invalid(const uint8_t *orig, size_t size, size_t new_size, mutator m,
                           const char *needle, int line) {
    uint8_t *buf = dup_buf(orig, size);
    if (m)
        m(buf, size);
    etch_bundled *b = NULL;
    etch_status st = etch_bundled_open_buffer(buf, new_size, &b);
    CHECK_MSG(st == ETCH_ERR_INVALID_PROGRAM, "line %d: got %s (%s)", line, etch_status_str(st),
              etch_last_error());
    CHECK_MSG(b == NULL, "line %d: out set on failure", line);
    CHECK_MSG(strstr(etch_last_error(), needle) != NULL, "line %d: message '%s' lacks '%s'",
              line, etch_last_error(), needle);
    CHECK_MSG(strstr(etch_last_error(), "offset") != NULL, "line %d: no offset in '%s'", line,
              etch_last_error());
    if (st == ETCH_OK)
        etch_bundled_close(b);
    free(buf);
}

static void mut_identifier(uint8_t *buf, size_t size) { buf[7] = '7'; }
static void mut_root(uint8_t *buf, size_t size) {
    buf[0] = 0x00; buf[1] = 0xff; buf[2] = 0xff; buf[3] = 0x7f;
}

static void put_i32(uint8_t *p, int32_t v) {
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}

/* Mutations of input tensor 0 of case 3. */
static fb_table tensor_of(uint8_t *buf, size_t size, fb_buf *fb) {
    fb_init(fb, buf, size);
    fb_table t;
    memset(&t, 0, sizeof t);
    if (!find_tensor(fb, 3, 0, 0, &t))
        fprintf(stderr, "fixture layout unexpected\n");
    return t;
}

static void mut_scalar_type(uint8_t *buf, size_t size) {
    fb_buf fb;
    fb_table t = tensor_of(buf, size, &fb);
    size_t p = slot_pos(&t, 0);
    if (p)
        buf[p] = 99;
}

static void mut_sizes(uint8_t *buf, size_t size, int32_t v) {
    fb_buf fb;
    fb_table t = tensor_of(buf, size, &fb);
    fb_vec sizes;
    if (fb_vec_field(&t, 1, 4, 4, &sizes) && sizes.len > 0)
        put_i32(buf + sizes.pos, v);
}
static void mut_sizes_bigger(uint8_t *buf, size_t size) { mut_sizes(buf, size, 3); }
static void mut_sizes_negative(uint8_t *buf, size_t size) { mut_sizes(buf, size, -1); }
static void mut_sizes_huge(uint8_t *buf, size_t size) { mut_sizes(buf, size, 0x7fffffff); }

static void mut_dim_order(uint8_t *buf, size_t size, uint8_t v) {
    fb_buf fb;
    fb_table t = tensor_of(buf, size, &fb);
    fb_vec order;
    if (fb_vec_field(&t, 3, 1, 1, &order) && order.len == 2)
        buf[order.pos + 1] = v;
}
static void mut_dim_order_dup(uint8_t *buf, size_t size) { mut_dim_order(buf, size, 0); }
static void mut_dim_order_range(uint8_t *buf, size_t size) { mut_dim_order(buf, size, 5); }

static void mut_dim_order_len(uint8_t *buf, size_t size) {
    fb_buf fb;
    fb_table t = tensor_of(buf, size, &fb);
    fb_vec order;
    if (fb_vec_field(&t, 3, 1, 1, &order) && order.len == 2)
        put_i32(buf + order.pos - 4, 1);
}

static void mut_union_tag(uint8_t *buf, size_t size) {
    fb_buf fb;
    fb_init(&fb, buf, size);
    fb_table v;
    if (find_value(&fb, 3, 0, 0, &v) && slot_pos(&v, 0))
        buf[slot_pos(&v, 0)] = 9;
}

static void mut_program_len(uint8_t *buf, size_t size) {
    fb_buf fb;
    fb_init(&fb, buf, size);
    fb_table root;
    fb_vec prog;
    if (fb_root(&fb, &root) && fb_vec_field(&root, 2, 1, 1, &prog))
        put_i32(buf + prog.pos - 4, (int32_t)size);
}

static void mut_program_absent(uint8_t *buf, size_t size) {
    fb_buf fb;
    fb_init(&fb, buf, size);
    fb_table root;
    if (fb_root(&fb, &root)) {
        size_t e = root.vtable + 4 + 2 * 2;
        if (e + 2 <= root.vtable + root.vtable_size)
            buf[e] = buf[e + 1] = 0;
    }
}

#define INVALID(m, needle) expect_invalid(orig, size, size, m, needle, __LINE__)

static void test_malformed(void) {
    size_t size;
    uint8_t *orig = read_fixture("bundled_add_mul.bpte", &size);

    expect_invalid(orig, size, 7, NULL, "too short", __LINE__);
    expect_invalid(orig, size, 0, NULL, "too short", __LINE__);
    INVALID(mut_identifier, "identifier 'BP07' at offset 4");
    INVALID(mut_root, "root offset out of bounds");
    INVALID(mut_scalar_type, "unknown scalar_type 99");
    INVALID(mut_sizes_bigger, "tensor data holds 16 bytes");
    INVALID(mut_sizes_negative, "negative");
    INVALID(mut_sizes_huge, "tensor data holds");
    INVALID(mut_dim_order_dup, "not a permutation");
    INVALID(mut_dim_order_range, "not a permutation");
    INVALID(mut_dim_order_len, "dim_order has 1 entries");
    INVALID(mut_union_tag, "unknown union type 9");
    INVALID(mut_program_len, "vector extends past the buffer");
    INVALID(mut_program_absent, "no embedded program");
    etch_bundled *b = NULL;
    CHECK_STATUS(etch_bundled_open_buffer(NULL, 8, &b), ETCH_ERR_INVALID_ARGUMENT);

    /* Every truncation and every flipped byte: refused cleanly or accepted, never a crash or
     * an out-of-bounds read (the sanitizer build checks the latter). */
    size_t bad_status = 0, accepted = 0;
    for (size_t n = 0; n < size; n++) {
        uint8_t *buf = dup_buf(orig, n ? n : 1);
        etch_status st = etch_bundled_open_buffer(buf, n, &b);
        if (st == ETCH_OK) {
            accepted++;
            etch_bundled_close(b);
        } else if (st != ETCH_ERR_INVALID_PROGRAM) {
            bad_status++;
        }
        free(buf);
    }
    CHECK_MSG(bad_status == 0, "%zu truncations gave a status other than InvalidProgram",
              bad_status);
    CHECK(accepted < size / 2); /* the tail is the program image: most cuts must fail */
    bad_status = 0;
    for (size_t i = 0; i < size; i++) {
        uint8_t *buf = dup_buf(orig, size);
        buf[i] ^= 0xff;
        etch_status st = etch_bundled_open_buffer(buf, size, &b);
        if (st == ETCH_OK) {
            size_t ns = etch_bundled_num_suites(b);
            for (size_t s = 0; s < ns; s++)
                (void)etch_bundled_num_cases(b, etch_bundled_suite_method(b, s));
            etch_bundled_close(b);
        } else if (st != ETCH_ERR_INVALID_PROGRAM) {
            bad_status++;
        }
        free(buf);
    }
    CHECK_MSG(bad_status == 0, "%zu byte flips gave a status other than InvalidProgram",
              bad_status);
    free(orig);
}

/* ---- running test cases --------------------------------------------------------------------- */

static etch_status run_case(const etch_bundled *b, etch_method *m, size_t k, double rtol,
                            double atol, etch_bundled_report *r) {
    etch_status st = etch_method_reset(m);
    if (st == ETCH_OK)
        st = etch_bundled_load_inputs(b, m, k);
    if (st == ETCH_OK)
        st = etch_method_execute(m);
    if (st == ETCH_OK)
        st = etch_bundled_verify_outputs(b, m, k, rtol, atol, r);
    return st;
}

static void test_run_add_mul(void) {
    size_t size;
    uint8_t *orig = read_fixture("bundled_add_mul.bpte", &size);
    etch_bundled *b = NULL;
    etch_module *mod = NULL;
    CHECK_OK(etch_bundled_open_buffer(orig, size, &b));
    if (!b)
        return;
    size_t psize;
    const void *prog = etch_bundled_program(b, &psize);
    CHECK_OK(etch_module_open_buffer(prog, psize, NULL, &mod));
    etch_method *m = NULL;
    if (mod)
        CHECK_OK(etch_module_load_method(mod, "forward", &m));
    if (!m) {
        etch_module_close(mod);
        etch_bundled_close(b);
        free(orig);
        return;
    }
    for (size_t k = 0; k < 10; k++) {
        etch_bundled_report r;
        CHECK_OK(run_case(b, m, k, 1e-5, 1e-8, &r));
        CHECK(r.num_outputs == 1 && r.mismatches == 0 && r.message[0] == 0);
        CHECK(r.max_abs_error == 0.0);
    }
    etch_bundled_report r;
    CHECK_STATUS(etch_bundled_load_inputs(b, m, 10), ETCH_ERR_INVALID_ARGUMENT);
    CHECK(strstr(etch_last_error(), "case 10 does not exist") != NULL);
    CHECK(etch_bundled_verify_outputs(b, m, 10, 1e-5, 1e-8, &r) != ETCH_OK);
    CHECK(r.message[0] != 0);
    CHECK_STATUS(etch_bundled_verify_outputs(b, m, 0, -1.0, 0.0, &r), ETCH_ERR_INVALID_ARGUMENT);

    /* Wrong expectations, each in its own copy (the program image is shared with `mod`). */
    struct {
        const char *what;
        int kind; /* 0 data, 1 dtype, 2 dim order */
        const char *needle;
    } cases[] = {{"data", 0, "element 1 is"}, {"dtype", 1, "dtype Int, expected UInt32"},
                 {"layout", 2, "memory layout"}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint8_t *buf = dup_buf(orig, size);
        fb_buf fb;
        fb_init(&fb, buf, size);
        fb_table t;
        CHECK(find_tensor(&fb, 0, 1, 0, &t));
        fb_vec v;
        if (cases[c].kind == 0 && fb_vec_field(&t, 2, 1, 1, &v))
            buf[v.pos + 4] ^= 1; /* int32 element 1 */
        if (cases[c].kind == 1 && slot_pos(&t, 0))
            buf[slot_pos(&t, 0)] = ETCH_DTYPE_UINT32;
        if (cases[c].kind == 2 && fb_vec_field(&t, 3, 1, 1, &v)) {
            buf[v.pos] = 1;
            buf[v.pos + 1] = 0;
        }
        etch_bundled *bad = NULL;
        CHECK_OK(etch_bundled_open_buffer(buf, size, &bad));
        if (bad) {
            CHECK_STATUS(run_case(bad, m, 0, 1e-5, 1e-8, &r), ETCH_ERR_INVALID_ARGUMENT);
            CHECK_MSG(r.mismatches == 1, "%s: %zu mismatches", cases[c].what, r.mismatches);
            CHECK_MSG(strstr(r.message, cases[c].needle) != NULL, "%s: message '%s'",
                      cases[c].what, r.message);
            /* The other cases still pass. */
            CHECK_OK(run_case(bad, m, 1, 1e-5, 1e-8, &r));
            etch_bundled_close(bad);
        }
        free(buf);
    }

    /* An input that the method refuses (wrong dtype) surfaces with the case and input. */
    uint8_t *buf = dup_buf(orig, size);
    fb_buf fb;
    fb_init(&fb, buf, size);
    fb_table t;
    if (find_tensor(&fb, 2, 0, 1, &t) && slot_pos(&t, 0))
        buf[slot_pos(&t, 0)] = ETCH_DTYPE_FLOAT;
    etch_bundled *bad = NULL;
    CHECK_OK(etch_bundled_open_buffer(buf, size, &bad));
    if (bad) {
        CHECK_OK(etch_method_reset(m));
        CHECK_STATUS(etch_bundled_load_inputs(bad, m, 2), ETCH_ERR_INVALID_ARGUMENT);
        CHECK(strstr(etch_last_error(), "bundled test case 2, input 1") != NULL);
        etch_bundled_close(bad);
    }
    free(buf);

    etch_module_close(mod);
    etch_bundled_close(b);
    free(orig);
}

static void set_f32(uint8_t *p, float f) { memcpy(p, &f, 4); }

static void test_run_lenet_tolerances(void) {
    size_t size;
    uint8_t *orig = read_fixture("lenet_bundled.bpte", &size);
    etch_bundled *b = NULL;
    etch_module *mod = NULL;
    etch_method *m = NULL;
    CHECK_OK(etch_bundled_open_buffer(orig, size, &b));
    size_t psize;
    const void *prog = b ? etch_bundled_program(b, &psize) : NULL;
    if (prog)
        CHECK_OK(etch_module_open_buffer(prog, psize, NULL, &mod));
    if (mod)
        CHECK_OK(etch_module_load_method(mod, "forward", &m));
    if (!m) {
        etch_module_close(mod);
        etch_bundled_close(b);
        free(orig);
        return;
    }
    etch_bundled_report r;
    for (size_t k = 0; k < 2; k++) {
        CHECK_OK(run_case(b, m, k, 1e-5, 1e-8, &r));
        CHECK(r.max_abs_error < 1e-5);
    }
    /* Case 0's actual output element 0, then expectations just outside / inside rtol. */
    CHECK_OK(run_case(b, m, 0, 1e-5, 1e-8, &r));
    const etch_value *out = etch_method_output(m, 0);
    float actual = out && out->tag == ETCH_VALUE_TENSOR ? ((const float *)out->u.tensor->data)[0]
                                                        : 0.0f;
    CHECK(actual != 0.0f);
    float expect_far = actual * (1.0f + 3e-5f);
    uint8_t *buf = dup_buf(orig, size);
    fb_buf fb;
    fb_init(&fb, buf, size);
    fb_table t;
    fb_vec data;
    CHECK(find_tensor(&fb, 0, 1, 0, &t) && fb_vec_field(&t, 2, 1, 1, &data));
    set_f32(buf + data.pos, expect_far);
    etch_bundled *bad = NULL;
    CHECK_OK(etch_bundled_open_buffer(buf, size, &bad));
    if (bad) {
        CHECK_STATUS(run_case(bad, m, 0, 1e-5, 0.0, &r), ETCH_ERR_INVALID_ARGUMENT);
        CHECK(r.mismatches == 1);
        CHECK_MSG(fabs(r.max_rel_error - 3e-5) < 3e-6, "max rel error %g", r.max_rel_error);
        CHECK_MSG(fabs(r.max_abs_error - fabs(actual) * 3e-5) < fabs(actual) * 3e-6,
                  "max abs error %g", r.max_abs_error);
        CHECK(strstr(r.message, "output 0: element 0") != NULL);
        CHECK_OK(run_case(bad, m, 0, 1e-4, 0.0, &r));       /* within rtol */
        CHECK_OK(run_case(bad, m, 0, 0.0, 1.0, &r));        /* within atol */
        CHECK(r.max_rel_error > 2e-5); /* errors are reported even when within tolerance */
        etch_bundled_close(bad);
    }
    /* NaN expected, number actual: always a mismatch. */
    set_f32(buf + data.pos, NAN);
    bad = NULL;
    CHECK_OK(etch_bundled_open_buffer(buf, size, &bad));
    if (bad) {
        CHECK_STATUS(run_case(bad, m, 0, 1.0, 1e30, &r), ETCH_ERR_INVALID_ARGUMENT);
        CHECK(isinf(r.max_abs_error));
        etch_bundled_close(bad);
    }
    free(buf);
    etch_module_close(mod);
    etch_bundled_close(b);
    free(orig);
}

int main(int argc, char **argv) {
    fixtures = argc > 1 ? argv[1] : "../shared/fixtures";
    test_open_fixtures();
    test_malformed();
    test_run_add_mul();
    test_run_lenet_tolerances();
    return etch_test_finish();
}
