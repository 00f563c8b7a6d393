/* The module layer over the fixtures: open (file, buffer, misaligned buffer, .ptd), method
 * choice, loading once, running, and its errors. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etch/module.h"
#include "etch_test.h"
#include "test_file.h"

static const char *fixtures;

static const char *fixture(const char *name) {
    static char path[4][1024];
    static int next;
    char *p = path[next++ & 3];
    snprintf(p, sizeof path[0], "%s/pte/%s", fixtures, name);
    return p;
}

/* Set float inputs, execute, compare output 0. */
static void run_floats(etch_method *m, const float *const *inputs, const int64_t *sizes,
                       size_t dim, const float *want, size_t n) {
    size_t ni = etch_method_num_inputs(m);
    for (size_t i = 0; i < ni; i++) {
        etch_tensor t;
        CHECK_OK(etch_tensor_init(&t, ETCH_DTYPE_FLOAT, dim, sizes, (void *)inputs[i]));
        CHECK_OK(etch_method_set_input_tensor(m, i, &t));
    }
    CHECK_OK(etch_method_execute(m));
    const etch_value *out = etch_method_output(m, 0);
    CHECK(out && out->tag == ETCH_VALUE_TENSOR);
    if (!out || out->tag != ETCH_VALUE_TENSOR)
        return;
    CHECK(etch_tensor_numel(out->u.tensor) == (int64_t)n);
    const float *got = out->u.tensor->data;
    for (size_t k = 0; k < n && got; k++)
        CHECK_MSG(got[k] == want[k], "element %zu: %g, want %g", k, got[k], want[k]);
}

static void test_defaults(void) {
    etch_module_options o = etch_module_default_options();
    CHECK(o.load_mode == ETCH_LOAD_MMAP);
    CHECK(o.data_path == NULL);
    CHECK(o.temp_size > 0);
    CHECK(o.num_threads <= 1);
    etch_module_close(NULL);
    CHECK(etch_module_program(NULL) == NULL);
}

static void test_add(void) {
    etch_module *mod = NULL;
    CHECK_OK(etch_module_open(fixture("add.pte"), NULL, &mod));
    if (!mod)
        return;
    CHECK(etch_module_program(mod) != NULL);
    CHECK(etch_module_data_map(mod) == NULL);
    const char *name = NULL;
    CHECK_OK(etch_module_default_method(mod, &name));
    CHECK(name && strcmp(name, "forward") == 0);
    etch_method *m = NULL, *again = NULL;
    CHECK_OK(etch_module_load_method(mod, "forward", &m));
    CHECK_OK(etch_module_load_method(mod, "forward", &again));
    CHECK(m && m == again);
    if (m) {
        static const float one = 1, two = 2, three = 3;
        run_floats(m, (const float *const[]){&one, &two}, (int64_t[]){1}, 1, &three, 1);
        static const float big = 40, want = 42;
        run_floats(m, (const float *const[]){&big, &two}, (int64_t[]){1}, 1, &want, 1);
    }
    etch_method *none = (etch_method *)&none;
    CHECK_STATUS(etch_module_load_method(mod, "backward", &none), ETCH_ERR_NOT_FOUND);
    CHECK(none == (etch_method *)&none); /* untouched on failure */
    etch_module_close(mod);
}

static void test_load_modes_and_buffers(void) {
    static const float x[3] = {1, 2, 3}, want[3] = {2, 3, 4};
    etch_module_options o = etch_module_default_options();
    o.load_mode = ETCH_LOAD_READ;
    o.temp_size = 0; /* no kernel scratch at all */
    etch_module *mod = NULL;
    etch_method *m = NULL;
    CHECK_OK(etch_module_open(fixture("add_constant_segment.pte"), &o, &mod));
    if (mod)
        CHECK_OK(etch_module_load_method(mod, "forward", &m));
    if (m)
        run_floats(m, (const float *const[]){x}, (int64_t[]){3}, 1, want, 3);
    etch_module_close(mod);

    size_t size = 0;
    /* the data at buf + 1: deliberately misaligned */
    uint8_t *buf = (uint8_t *)etch_test_read_file(fixture("add_constant_segment.pte"), 1, &size);
    CHECK(buf != NULL);
    mod = NULL;
    m = NULL;
    CHECK_OK(etch_module_open_buffer(buf + 1, size, NULL, &mod));
    if (mod)
        CHECK_OK(etch_module_load_method(mod, "forward", &m));
    if (m)
        run_floats(m, (const float *const[]){x}, (int64_t[]){3}, 1, want, 3);
    etch_module_close(mod);
    free(buf);

    /* The program inside a bundled program opens directly. */
    mod = NULL;
    CHECK_OK(etch_module_open(fixture("bundled_add_mul.bpte"), NULL, &mod));
    const char *name = NULL;
    if (mod)
        CHECK_OK(etch_module_default_method(mod, &name));
    etch_module_close(mod);
}

static void test_linear_and_external(void) {
    static const float x[4] = {1, 2, 3, 4}, want[4] = {5, 8, 11, 14};
    etch_module *mod = NULL;
    etch_method *m = NULL;
    CHECK_OK(etch_module_open(fixture("linear_constant_buffer.pte"), NULL, &mod));
    if (mod)
        CHECK_OK(etch_module_load_method(mod, "forward", &m));
    if (m)
        run_floats(m, (const float *const[]){x}, (int64_t[]){2, 2}, 2, want, 4);
    etch_module_close(mod);

    /* Without its .ptd the method cannot load; the message says what is missing. */
    mod = NULL;
    m = NULL;
    CHECK_OK(etch_module_open(fixture("addmul_external.pte"), NULL, &mod));
    if (mod) {
        CHECK_STATUS(etch_module_load_method(mod, "forward", &m), ETCH_ERR_NOT_FOUND);
        CHECK(strstr(etch_last_error(), ".ptd") != NULL);
    }
    etch_module_close(mod);

    etch_module_options o = etch_module_default_options();
    o.data_path = fixture("addmul_external.ptd");
    mod = NULL;
    m = NULL;
    CHECK_OK(etch_module_open(fixture("addmul_external.pte"), &o, &mod));
    if (mod) {
        CHECK(etch_module_data_map(mod) != NULL);
        CHECK_OK(etch_module_load_method(mod, "forward", &m));
    }
    if (m)
        run_floats(m, (const float *const[]){x}, (int64_t[]){2, 2}, 2, want, 4);
    etch_module_close(mod);
}

static void test_errors(void) {
    etch_module *mod = (etch_module *)&mod;
    CHECK_STATUS(etch_module_open(fixture("no_such_file.pte"), NULL, &mod),
                 ETCH_ERR_ACCESS_FAILED);
    CHECK(mod == (etch_module *)&mod);
    CHECK_STATUS(etch_module_open(fixture("legacy_et02.pte"), NULL, &mod),
                 ETCH_ERR_INCOMPATIBLE_VERSION);
    CHECK_STATUS(etch_module_open(fixture("not_a_program.pte"), NULL, &mod),
                 ETCH_ERR_NOT_A_PROGRAM);
    etch_module_options o = etch_module_default_options();
    o.data_path = fixture("no_such_file.ptd");
    CHECK_STATUS(etch_module_open(fixture("addmul_external.pte"), &o, &mod),
                 ETCH_ERR_ACCESS_FAILED);
    CHECK(mod == (etch_module *)&mod);
    CHECK_STATUS(etch_module_open(NULL, NULL, &mod), ETCH_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(etch_module_open_buffer(NULL, 0, NULL, &mod), ETCH_ERR_INVALID_ARGUMENT);
    static const uint8_t junk[64] = {1, 2, 3};
    CHECK(etch_module_open_buffer(junk, sizeof junk, NULL, &mod) != ETCH_OK);
    CHECK(mod == (etch_module *)&mod);
}

int main(int argc, char **argv) {
    fixtures = argc > 1 ? argv[1] : "../shared/fixtures";
    test_defaults();
    test_add();
    test_load_modes_and_buffers();
    test_linear_and_external();
    test_errors();
    return etch_test_finish();
}
