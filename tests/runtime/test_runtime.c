/*
 * Runtime semantics tests: small generated programs (tests/runtime/gen_programs.py, run at
 * build time) that exercise every instruction kind, every value kind, dynamic shapes, mutable
 * state, multiple methods, delegates and external data, plus negative programs that must fail
 * with an exact status; then the real ExecuTorch fixtures through the C API with the portable
 * kernels.
 *
 * usage: test_runtime GENERATED_DIR FIXTURES_DIR
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <etch/bundled.h>
#include <etch/etch.h>
#include <etch/kernels.h>

#include "etch_test.h"
#include "runtime/error.h" /* etch_err, etch_err_prefix: formatting over the current message */

enum { STAGE_OPEN = 1, STAGE_LOAD, STAGE_EXECUTE, STAGE_NONE };
#include "expected.h"

static const char *gen_dir;
static const char *fixture_dir;

/* ---- test kernels (float32, contiguous; see gen_programs.py for their schemas) ---------- */

static float *fdata(const etch_value *v) { return (float *)v->u.tensor->data; }

static void set_result(etch_value *r, int64_t i) {
    if (r->tag == ETCH_VALUE_BOOL)
        r->u.b = i != 0;
    else if (r->tag == ETCH_VALUE_DOUBLE)
        r->u.d = (double)i;
    else
        r->u.i = i;
}

static void k_add(etch_kernel_context *ctx, etch_value **a, size_t n) {
    (void)n;
    etch_tensor *self = a[0]->u.tensor, *other = a[1]->u.tensor, *out = a[3]->u.tensor;
    double alpha;
    etch_value_scalar_to_double(a[2], &alpha);
    if (etch_kernel_resize_like(ctx, out, self) != ETCH_OK)
        return;
    int64_t ne = etch_tensor_numel(self), no = etch_tensor_numel(other);
    if (no != ne && no != 1) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "shapes differ");
        return;
    }
    const float *x = self->data, *y = other->data;
    float *o = out->data;
    for (int64_t i = 0; i < ne; i++)
        o[i] = x[i] + (float)alpha * y[no == 1 ? 0 : i];
}

static void k_mul(etch_kernel_context *ctx, etch_value **a, size_t n) {
    (void)n;
    etch_tensor *self = a[0]->u.tensor, *other = a[1]->u.tensor, *out = a[2]->u.tensor;
    if (etch_kernel_resize_like(ctx, out, self) != ETCH_OK)
        return;
    int64_t ne = etch_tensor_numel(self), no = etch_tensor_numel(other);
    const float *x = self->data, *y = other->data;
    float *o = out->data;
    for (int64_t i = 0; i < ne; i++)
        o[i] = x[i] * y[no == 1 ? 0 : i];
}

static void k_add_int(etch_kernel_context *ctx, etch_value **a, size_t n) {
    (void)ctx, (void)n;
    set_result(a[2], a[0]->u.i + a[1]->u.i);
}

static void k_ge(etch_kernel_context *ctx, etch_value **a, size_t n) {
    (void)ctx, (void)n;
    set_result(a[2], a[0]->u.i >= a[1]->u.i);
}

static void k_gt_scalar(etch_kernel_context *ctx, etch_value **a, size_t n) {
    (void)n;
    etch_tensor *self = a[0]->u.tensor, *out = a[2]->u.tensor;
    double s;
    etch_value_scalar_to_double(a[1], &s);
    if (out->dtype != ETCH_DTYPE_BOOL) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "out must be Bool");
        return;
    }
    if (etch_kernel_resize_like(ctx, out, self) != ETCH_OK)
        return;
    for (int64_t i = 0; i < etch_tensor_numel(self); i++)
        ((uint8_t *)out->data)[i] = ((const float *)self->data)[i] > s;
}

static void k_full(etch_kernel_context *ctx, etch_value **a, size_t n) {
    (void)n;
    size_t len;
    const int64_t *sizes = etch_value_int_list(a[0], &len);
    double v;
    etch_value_scalar_to_double(a[1], &v);
    etch_tensor *out = a[2]->u.tensor;
    if (etch_kernel_resize(ctx, out, len, sizes) != ETCH_OK)
        return;
    for (int64_t i = 0; i < etch_tensor_numel(out); i++)
        ((float *)out->data)[i] = (float)v;
}

static void k_sum_list(etch_kernel_context *ctx, etch_value **a, size_t n) {
    (void)n;
    etch_value *list = a[0];
    etch_tensor *out = a[1]->u.tensor;
    if (list->u.list.len == 0 ||
        etch_kernel_resize_like(ctx, out, list->u.list.items[0]->u.tensor) != ETCH_OK)
        return;
    int64_t ne = etch_tensor_numel(out);
    float *o = out->data;
    for (int64_t i = 0; i < ne; i++)
        o[i] = 0;
    for (size_t k = 0; k < list->u.list.len; k++)
        for (int64_t i = 0; i < ne; i++)
            o[i] += fdata(list->u.list.items[k])[i];
}

static void k_opt_sum(etch_kernel_context *ctx, etch_value **a, size_t n) {
    (void)ctx, (void)n;
    etch_value *list = a[0];
    etch_tensor *out = a[1]->u.tensor;
    int64_t ne = etch_tensor_numel(out);
    float *o = out->data;
    for (int64_t i = 0; i < ne; i++)
        o[i] = 0;
    for (size_t k = 0; k < list->u.list.len; k++)
        for (int64_t i = 0; i < ne; i++)
            o[i] += list->u.list.items[k] ? fdata(list->u.list.items[k])[i] : 100.0f;
}

static void k_scalars(etch_kernel_context *ctx, etch_value **a, size_t n) {
    (void)n;
    etch_tensor *out = a[6]->u.tensor;
    if (etch_tensor_numel(out) != 6) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "out must have 6 elements");
        return;
    }
    float *o = out->data;
    double d;
    etch_value_scalar_to_double(a[0], &d);
    o[0] = (float)d;
    o[1] = a[1]->u.b ? 1.0f : 0.0f;
    o[2] = (float)a[2]->u.str.len;
    if (a[2]->u.str.ptr[a[2]->u.str.len] != 0)
        etch_kernel_fail(ctx, ETCH_ERR_INTERNAL, "string not NUL-terminated");
    double sum = 0;
    for (size_t i = 0; i < a[3]->u.doubles.len; i++)
        sum += a[3]->u.doubles.ptr[i];
    o[3] = (float)sum;
    int cnt = 0;
    for (size_t i = 0; i < a[4]->u.bools.len; i++)
        cnt += a[4]->u.bools.ptr[i] != 0;
    o[4] = (float)cnt;
    o[5] = a[5]->tag == ETCH_VALUE_NONE ? 1.0f : 2.0f;
}

static void k_accumulate(etch_kernel_context *ctx, etch_value **a, size_t n) {
    (void)ctx, (void)n;
    float *s = fdata(a[0]);
    const float *x = fdata(a[1]);
    for (int64_t i = 0; i < etch_tensor_numel(a[0]->u.tensor); i++)
        s[i] += x[i];
}

static void k_alias(etch_kernel_context *ctx, etch_value **a, size_t n) {
    (void)n;
    etch_tensor *self = a[0]->u.tensor, *out = a[1]->u.tensor;
    if (etch_kernel_resize_like(ctx, out, self) != ETCH_OK)
        return;
    out->data = self->data;
}

static void k_sym_size(etch_kernel_context *ctx, etch_value **a, size_t n) {
    (void)n;
    int64_t d = a[1]->u.i;
    etch_tensor *t = a[0]->u.tensor;
    if (d < 0 || d >= t->dim) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "dim %lld out of range", (long long)d);
        return;
    }
    set_result(a[2], t->sizes[d]);
}

static void k_assert_positive(etch_kernel_context *ctx, etch_value **a, size_t n) {
    (void)n;
    etch_tensor *self = a[0]->u.tensor, *out = a[1]->u.tensor;
    for (int64_t i = 0; i < etch_tensor_numel(self); i++)
        if (((const float *)self->data)[i] < 0) {
            etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "negative value at %lld",
                             (long long)i);
            return;
        }
    if (etch_kernel_resize_like(ctx, out, self) == ETCH_OK)
        memmove(out->data, self->data, etch_tensor_nbytes(self));
}

static void k_scratch(etch_kernel_context *ctx, etch_value **a, size_t n) {
    (void)n;
    etch_tensor *self = a[0]->u.tensor, *out = a[2]->u.tensor;
    uint8_t *tmp = etch_kernel_temp_alloc(ctx, (size_t)a[1]->u.i, 16);
    if (!tmp)
        return; /* failure recorded by the allocator */
    if ((uintptr_t)tmp & 15) {
        etch_kernel_fail(ctx, ETCH_ERR_INTERNAL, "temp memory not aligned");
        return;
    }
    memset(tmp, 0x5A, (size_t)a[1]->u.i);
    if (etch_kernel_resize_like(ctx, out, self) == ETCH_OK)
        memmove(out->data, self->data, etch_tensor_nbytes(self));
}

static void k_variadic(etch_kernel_context *ctx, etch_value **a, size_t n) {
    (void)ctx;
    float *o = fdata(a[0]);
    o[0] = (float)n;
    o[1] = (float)a[1]->tag;
}

static void k_unchecked(etch_kernel_context *ctx, etch_value **a, size_t n) {
    if (n != 2 || a[0]->tag != ETCH_VALUE_TENSOR || a[1]->tag != ETCH_VALUE_INT) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT, "bad arguments");
        return;
    }
    for (int64_t i = 0; i < etch_tensor_numel(a[0]->u.tensor); i++)
        fdata(a[0])[i] += (float)a[1]->u.i;
}

static const etch_kernel test_kernel_table[] = {
    {"test::variadic.out", "W?*", k_variadic},
    {"test::unchecked", NULL, k_unchecked},
    {"test::assert_positive.out", "TWW", k_assert_positive},
    {"test::scratch.out", "TIWW", k_scratch},
    {"test::add.out", "TTSWW", k_add},
    {"test::mul.out", "TTWW", k_mul},
    {"test::add_int.Scalar", "IIR", k_add_int},
    {"test::ge.Scalar", "IIR", k_ge},
    {"test::gt.Tensor_Scalar_out", "TSWW", k_gt_scalar},
    {"test::full.out", "LSWW", k_full},
    {"test::sum_list.out", "XWW", k_sum_list},
    {"test::opt_sum.out", "OWW", k_opt_sum},
    {"test::scalars.out", "DBNFQnWW", k_scalars},
    {"test::accumulate_", "WTW", k_accumulate},
    {"test::alias.default", "TVV", k_alias},
    {"test::sym_size.int", "TIR", k_sym_size},
};

/* ---- test backends --------------------------------------------------------------------- */

typedef struct tb_state {
    float scale, bias;
} tb_state;

static int tb_inits, tb_destroys, tb_executes, tb_misaligned;

static etch_status tb_init(void *user_data, const etch_backend_init_context *ctx,
                           const void *processed, size_t size, const etch_compile_spec *specs,
                           size_t num_specs, void **handle) {
    (void)user_data;
    const char *blob = processed;
    if (size == 3 && memcmp(blob, "bad", 3) == 0)
        return ETCH_ERR_DELEGATE_INVALID_COMPATIBILITY;
    if (size < 7 || size > 32 || memcmp(blob, "scale:", 6) != 0)
        return ETCH_ERR_INVALID_ARGUMENT;
    if ((uintptr_t)processed & 15)
        tb_misaligned++;
    char num[40];
    memcpy(num, blob + 6, size - 6);
    num[size - 6] = 0;
    tb_state *s = ctx->alloc(ctx->alloc_self, sizeof *s, 16);
    if (!s)
        return ETCH_ERR_MEMORY_ALLOCATION_FAILED;
    s->scale = (float)atof(num);
    s->bias = 0;
    for (size_t i = 0; i < num_specs; i++)
        if (strcmp(specs[i].key, "bias") == 0 && specs[i].value_size == 4)
            memcpy(&s->bias, specs[i].value, 4);
    tb_inits++;
    *handle = s;
    return ETCH_OK;
}

static etch_status tb_execute(void *user_data, void *handle, etch_kernel_context *ctx,
                              etch_value **args, size_t nargs) {
    (void)user_data;
    const tb_state *s = handle;
    if (nargs != 2 || args[0]->tag != ETCH_VALUE_TENSOR || args[1]->tag != ETCH_VALUE_TENSOR)
        return ETCH_ERR_INVALID_ARGUMENT;
    etch_tensor *in = args[0]->u.tensor, *out = args[1]->u.tensor;
    if (s->scale == -999.0f)
        return ETCH_ERR_INVALID_ARGUMENT;
    etch_status st = etch_kernel_resize_like(ctx, out, in);
    if (st)
        return st;
    for (int64_t i = 0; i < etch_tensor_numel(in); i++)
        ((float *)out->data)[i] = ((const float *)in->data)[i] * s->scale + s->bias;
    tb_executes++;
    return ETCH_OK;
}

static void tb_destroy(void *user_data, void *handle) {
    (void)user_data, (void)handle;
    tb_destroys++;
}

static bool never_available(void *user_data) {
    (void)user_data;
    return false;
}

static const etch_backend test_backend = {"TestBackend", NULL, tb_init, tb_execute, tb_destroy,
                                          NULL, NULL};
static const etch_backend unavailable_backend = {"UnavailableBackend", never_available, tb_init,
                                                 tb_execute, NULL, NULL, NULL};

/* ---- loading helpers ------------------------------------------------------------------- */

#define MAX_ARENAS 4

typedef struct loaded {
    etch_program *prog;
    etch_data_map *map;
    etch_method *m;
    void *pool;
    void *arenas[MAX_ARENAS];
    size_t arena_sizes[MAX_ARENAS];
    void *temp;
} loaded;

static void path_of(char *buf, size_t n, const char *dir, const char *file) {
    snprintf(buf, n, "%s/%s", dir, file);
}

static void *alloc16(size_t n) {
    n = (n + 15) / 16 * 16;
    return aligned_alloc(16, n ? n : 16);
}

static void unload(loaded *L) {
    etch_method_free(L->m);
    free(L->pool);
    for (int j = 0; j < MAX_ARENAS; j++)
        free(L->arenas[j]);
    free(L->temp);
    etch_program_close(L->prog);
    etch_data_map_close(L->map);
    memset(L, 0, sizeof *L);
}

/* Load `method` of an open program into fresh memory. Arenas are filled with garbage so that
 * nothing relies on zeroed planned memory. */
static etch_status load_method(loaded *L, const char *method) {
    etch_method_meta meta;
    etch_status st = etch_program_method_meta(L->prog, method, &meta);
    if (st)
        return st;
    size_t n = etch_method_meta_num_arenas(&meta);
    if (n > MAX_ARENAS)
        return ETCH_ERR_NOT_SUPPORTED;
    for (size_t j = 0; j < n; j++) {
        L->arena_sizes[j] = etch_method_meta_arena_size(&meta, j);
        L->arenas[j] = alloc16(L->arena_sizes[j]);
        memset(L->arenas[j], 0xA5, (L->arena_sizes[j] + 15) / 16 * 16);
    }
    size_t pool_size = etch_method_meta_pool_size(&meta);
    L->pool = alloc16(pool_size);
    L->temp = alloc16(4096);
    etch_method_memory mem = {L->pool, pool_size, L->arenas, L->arena_sizes, n, L->temp, 4096};
    etch_method_options opts = {L->map, NULL, false, false, false};
    return etch_method_load(L->prog, method, &mem, &opts, &L->m);
}

/* Open a generated program (and optional .ptd) and load a method; checks success. */
static bool open_gen(loaded *L, const char *file, const char *ptd, const char *method) {
    char path[1024];
    memset(L, 0, sizeof *L);
    path_of(path, sizeof path, gen_dir, file);
    etch_status st = etch_program_open_file(path, NULL, &L->prog);
    CHECK_MSG(st == ETCH_OK, "open %s: %s: %s", file, etch_status_str(st), etch_last_error());
    if (st)
        return false;
    if (ptd) {
        path_of(path, sizeof path, gen_dir, ptd);
        st = etch_data_map_open_file(path, NULL, &L->map);
        CHECK_MSG(st == ETCH_OK, "open %s: %s", ptd, etch_last_error());
        if (st)
            return false;
    }
    st = load_method(L, method);
    CHECK_MSG(st == ETCH_OK, "load %s:%s: %s: %s", file, method, etch_status_str(st),
              etch_last_error());
    return st == ETCH_OK;
}

static etch_status set_floats(etch_method *m, size_t i, const float *data, size_t dim,
                              const int64_t *sizes) {
    etch_tensor t;
    etch_tensor_init(&t, ETCH_DTYPE_FLOAT, dim, sizes, (void *)(uintptr_t)data);
    return etch_method_set_input_tensor(m, i, &t);
}

static etch_status set_floats1(etch_method *m, size_t i, const float *data, int64_t n) {
    return set_floats(m, i, data, 1, &n);
}

/* Output i is a float tensor of n elements equal to `want` (and of the given shape). */
static void check_output(const etch_method *m, size_t i, const float *want, size_t n,
                         size_t dim, const int64_t *sizes, const char *what) {
    const etch_value *v = etch_method_output(m, i);
    CHECK_MSG(v && v->tag == ETCH_VALUE_TENSOR, "%s: output %zu is not a tensor", what, i);
    if (!v || v->tag != ETCH_VALUE_TENSOR)
        return;
    const etch_tensor *t = v->u.tensor;
    CHECK_MSG(t->dtype == ETCH_DTYPE_FLOAT && (size_t)etch_tensor_numel(t) == n && t->data,
              "%s: output %zu has %lld elements (want %zu)", what, i,
              (long long)etch_tensor_numel(t), n);
    if (dim) {
        bool same = t->dim == dim;
        for (size_t k = 0; same && k < dim; k++)
            same = t->sizes[k] == sizes[k];
        CHECK_MSG(same, "%s: output %zu has the wrong shape", what, i);
    }
    if ((size_t)etch_tensor_numel(t) != n || !t->data)
        return;
    for (size_t k = 0; k < n; k++)
        CHECK_MSG(((const float *)t->data)[k] == want[k], "%s: output %zu[%zu] = %g, want %g",
                  what, i, k, ((const float *)t->data)[k], want[k]);
}

#define RETURN_UNLOADED(l) \
    do {                   \
        unload(l);         \
        return;            \
    } while (0)

static bool contains(const char *hay, const char *needle) { return strstr(hay, needle) != NULL; }

/* ---- generated programs ------------------------------------------------------------------ */

static void test_kernels(void) {
    /* the same program with its constants in a segment, in the legacy constant_buffer, and
     * behind an older 24-byte extended header */
    static const char *files[] = {"kernels.pte", "kernels_legacy.pte", "kernels_hdr24.pte"};
    for (int f = 0; f < 3; f++) {
        loaded L;
        if (!open_gen(&L, files[f], NULL, "forward")) {
            unload(&L);
            continue;
        }
        etch_program_header h;
        etch_program_get_header(L.prog, &h);
        CHECK(strcmp(h.identifier, "ET12") == 0 && !h.bundled);
        CHECK(h.has_extended_header == (f != 1));
        CHECK(h.header_length == (f == 0 ? 32u : f == 2 ? 24u : 0u));
        CHECK(h.legacy_constant_buffer == (f == 1));
        CHECK(h.constant_bytes >= 16);
        if (f != 1)
            CHECK(h.segment_base_offset % 128 == 0 && h.segment_base_offset >= h.program_size);
        int64_t sz[2] = {2, 2};
        CHECK_STATUS(etch_method_execute(L.m), ETCH_ERR_INVALID_STATE); /* inputs not set */
        CHECK(contains(etch_last_error(), "input 0"));
        CHECK_OK(set_floats(L.m, 0, KERNELS_X, 2, sz));
        CHECK_OK(set_floats(L.m, 1, KERNELS_Y, 2, sz));
        CHECK_OK(etch_method_execute(L.m));
        check_output(L.m, 0, KERNELS_OUT, 4, 2, sz, files[f]);
        CHECK_OK(etch_method_execute(L.m)); /* again, same inputs */
        check_output(L.m, 0, KERNELS_OUT, 4, 2, sz, files[f]);
        /* wrong dtype / wrong kind of input / out of range / planned output */
        int32_t ints[4] = {0};
        etch_tensor it;
        etch_tensor_init(&it, ETCH_DTYPE_INT, 2, sz, ints);
        CHECK_STATUS(etch_method_set_input_tensor(L.m, 0, &it), ETCH_ERR_INVALID_ARGUMENT);
        etch_value iv = {.tag = ETCH_VALUE_INT, .u.i = 3};
        CHECK_STATUS(etch_method_set_input(L.m, 1, &iv), ETCH_ERR_INVALID_ARGUMENT);
        CHECK_STATUS(etch_method_set_input_tensor(L.m, 2, &it), ETCH_ERR_INVALID_ARGUMENT);
        float buf[4];
        CHECK_STATUS(etch_method_set_output_data(L.m, 0, buf, sizeof buf),
                     ETCH_ERR_INVALID_STATE);
        unload(&L);
    }
}

static void test_bundled(void) {
    char path[1024];
    path_of(path, sizeof path, gen_dir, "kernels.bpte");
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    if (!f)
        return;
    fseek(f, 0, SEEK_END);
    size_t size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = alloc16(size);
    CHECK(fread(buf, 1, size, f) == size);
    fclose(f);
    etch_bundled *b = NULL;
    CHECK_OK(etch_bundled_open_buffer(buf, size, &b));
    if (b) {
        CHECK(etch_bundled_num_suites(b) == 1);
        CHECK(strcmp(etch_bundled_suite_method(b, 0), "forward") == 0);
        CHECK(etch_bundled_num_cases(b, "forward") == 2);
        size_t psize = 0;
        const void *image = etch_bundled_program(b, &psize);
        CHECK(((uintptr_t)image & 31) == 0); /* force_align: 32 */
        loaded L;
        memset(&L, 0, sizeof L);
        CHECK_OK(etch_program_open_buffer(image, psize, NULL, &L.prog));
        if (L.prog && load_method(&L, "forward") == ETCH_OK) {
            etch_bundled_report r;
            CHECK_OK(etch_bundled_load_inputs(b, L.m, 0));
            CHECK_OK(etch_method_execute(L.m));
            CHECK_OK(etch_bundled_verify_outputs(b, L.m, 0, 1e-5, 1e-8, &r));
            CHECK_OK(etch_bundled_load_inputs(b, L.m, 1));
            CHECK_OK(etch_method_execute(L.m));
            CHECK_STATUS(etch_bundled_verify_outputs(b, L.m, 1, 1e-5, 1e-8, &r),
                         ETCH_ERR_INVALID_ARGUMENT); /* case 1 expects a wrong value */
            CHECK(r.mismatches == 1);
        }
        unload(&L);
        etch_bundled_close(b);
    }
    /* the program API opens a bundled program's embedded image */
    etch_program *p = NULL;
    CHECK_OK(etch_program_open_file(path, NULL, &p));
    if (p) {
        etch_program_header h;
        etch_program_get_header(p, &h);
        CHECK(h.bundled && h.has_extended_header);
        etch_program_close(p);
    }
    free(buf);
}

static void test_unbound_io(void) {
    loaded L;
    if (!open_gen(&L, "kernels.pte", NULL, "unbound"))
        RETURN_UNLOADED(&L);
    etch_method_meta meta;
    etch_value_info info;
    CHECK_OK(etch_program_method_meta(L.prog, "unbound", &meta));
    CHECK_OK(etch_method_meta_input(&meta, 0, &info));
    CHECK(!info.planned && !info.constant);
    int64_t sz[2] = {2, 2};
    float x[4];
    memcpy(x, KERNELS_X, sizeof x);
    /* borrowed data must be aligned to its elements (kernels read it in place) */
    static float wide[5];
    CHECK_STATUS(set_floats(L.m, 0, (float *)(void *)((char *)wide + 2), 2, sz),
                 ETCH_ERR_INVALID_ARGUMENT);
    CHECK(contains(etch_last_error(), "not aligned to its 4-byte elements"));
    CHECK_OK(set_floats(L.m, 0, x, 2, sz));
    CHECK(etch_method_input(L.m, 0)->u.tensor->data == x); /* borrowed, not copied */
    CHECK_STATUS(etch_method_execute(L.m), ETCH_ERR_INVALID_STATE); /* output has no memory */
    CHECK(contains(etch_last_error(), "no data"));
    float out[4] = {0};
    CHECK_STATUS(etch_method_set_output_data(L.m, 0, out, sizeof out - 1),
                 ETCH_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(etch_method_set_output_data(L.m, 1, out, sizeof out),
                 ETCH_ERR_INVALID_ARGUMENT);
    CHECK_OK(etch_method_set_output_data(L.m, 0, out, sizeof out));
    CHECK_OK(etch_method_execute(L.m));
    check_output(L.m, 0, UNBOUND_OUT, 4, 2, sz, "unbound");
    for (int i = 0; i < 4; i++)
        CHECK(out[i] == UNBOUND_OUT[i]); /* written into the caller's buffer */
    x[0] += 100; /* the borrowed input is read again by the next run */
    CHECK_OK(etch_method_execute(L.m));
    CHECK(out[0] == UNBOUND_OUT[0] + 100);
    unload(&L);
}

static void test_kernel_failure(void) {
    loaded L;
    if (!open_gen(&L, "kernels.pte", NULL, "checked"))
        RETURN_UNLOADED(&L);
    float good[2] = {1, 2}, bad[2] = {1, -2};
    CHECK_OK(set_floats1(L.m, 0, good, 2));
    CHECK_OK(etch_method_execute(L.m)); /* two 3000-byte scratch uses in a 4096 arena */
    check_output(L.m, 0, good, 2, 0, NULL, "checked");
    CHECK_OK(set_floats1(L.m, 0, bad, 2));
    CHECK_STATUS(etch_method_execute(L.m), ETCH_ERR_INVALID_ARGUMENT);
    const char *msg = etch_last_error();
    CHECK_MSG(contains(msg, "test::assert_positive.out") && contains(msg, "negative value at 1") &&
                  contains(msg, "instruction 0") && contains(msg, "checked"),
              "message: %s", msg);
    CHECK_OK(set_floats1(L.m, 0, good, 2)); /* the method runs again from the start */
    CHECK_OK(etch_method_execute(L.m));
    check_output(L.m, 0, good, 2, 0, NULL, "checked after a failure");
    unload(&L);
}

static void test_scalar_inputs(void) {
    loaded L;
    if (!open_gen(&L, "kernels.pte", NULL, "scalar_inputs"))
        RETURN_UNLOADED(&L);
    CHECK(etch_method_num_inputs(L.m) == 6);
    const etch_method_meta *meta = etch_method_get_meta(L.m);
    etch_value_info info;
    CHECK_OK(etch_method_meta_input(meta, 0, &info));
    CHECK(info.tag == ETCH_VALUE_INT && info.int_val == 3);
    CHECK_OK(etch_method_meta_input(meta, 1, &info));
    CHECK(info.tag == ETCH_VALUE_DOUBLE && info.double_val == 0.5);
    CHECK_OK(etch_method_meta_input(meta, 2, &info));
    CHECK(info.tag == ETCH_VALUE_BOOL && info.int_val == 1);
    CHECK_OK(etch_method_meta_input(meta, 3, &info));
    CHECK(info.tag == ETCH_VALUE_STRING);
    CHECK_OK(etch_method_meta_input(meta, 4, &info));
    CHECK(info.tag == ETCH_VALUE_NONE);
    CHECK_STATUS(etch_method_meta_input(meta, 6, &info), ETCH_ERR_INVALID_ARGUMENT);
    etch_value v;
    memset(&v, 0, sizeof v);
    CHECK_STATUS(etch_method_execute(L.m), ETCH_ERR_INVALID_STATE);
    v.tag = ETCH_VALUE_INT, v.u.i = 4;
    CHECK_STATUS(etch_method_set_input(L.m, 0, &v), ETCH_ERR_INVALID_ARGUMENT);
    CHECK(contains(etch_last_error(), "exported with 3"));
    v.u.i = 3;
    CHECK_OK(etch_method_set_input(L.m, 0, &v));
    v.tag = ETCH_VALUE_DOUBLE, v.u.d = 0.6;
    CHECK_STATUS(etch_method_set_input(L.m, 1, &v), ETCH_ERR_INVALID_ARGUMENT);
    v.u.d = 0.50005; /* within atol 1e-4 */
    CHECK_OK(etch_method_set_input(L.m, 1, &v));
    v.tag = ETCH_VALUE_BOOL, v.u.b = false;
    CHECK_STATUS(etch_method_set_input(L.m, 2, &v), ETCH_ERR_INVALID_ARGUMENT);
    v.u.b = true;
    CHECK_OK(etch_method_set_input(L.m, 2, &v));
    v.tag = ETCH_VALUE_STRING, v.u.str.ptr = "abd", v.u.str.len = 3;
    CHECK_STATUS(etch_method_set_input(L.m, 3, &v), ETCH_ERR_INVALID_ARGUMENT);
    v.u.str.ptr = "abc";
    CHECK_OK(etch_method_set_input(L.m, 3, &v));
    v.tag = ETCH_VALUE_INT; /* an Int where a String is expected */
    CHECK_STATUS(etch_method_set_input(L.m, 3, &v), ETCH_ERR_INVALID_ARGUMENT);
    /* input 4 is None: it needs no set_input */
    CHECK_OK(set_floats1(L.m, 5, SCALAR_INPUTS_X, 2));
    CHECK_OK(etch_method_execute(L.m));
    check_output(L.m, 0, SCALAR_INPUTS_OUT, 2, 0, NULL, "scalar inputs");
    unload(&L);
}

static void test_memory_errors(void) {
    loaded L;
    char path[1024];
    memset(&L, 0, sizeof L);
    path_of(path, sizeof path, gen_dir, "kernels.pte");
    CHECK_OK(etch_program_open_file(path, NULL, &L.prog));
    if (!L.prog)
        return;
    etch_method_meta meta;
    CHECK_OK(etch_program_method_meta(L.prog, "forward", &meta));
    CHECK(etch_method_meta_num_arenas(&meta) == 1);
    size_t need = etch_method_meta_arena_size(&meta, 0), pool_size =
        etch_method_meta_pool_size(&meta);
    CHECK(need == 4 * 16);
    uint8_t *arena = alloc16(need + 16), *pool = alloc16(pool_size);
    void *arenas[1] = {arena};
    size_t sizes[1] = {need - 1};
    etch_method *m = NULL;
    etch_method_memory mem = {pool, pool_size, arenas, sizes, 1, NULL, 0};
    CHECK_STATUS(etch_method_load(L.prog, "forward", &mem, NULL, &m),
                 ETCH_ERR_MEMORY_ALLOCATION_FAILED);
    CHECK(contains(etch_last_error(), "needs 64"));
    sizes[0] = need;
    mem.pool_size = pool_size / 2;
    CHECK_STATUS(etch_method_load(L.prog, "forward", &mem, NULL, &m),
                 ETCH_ERR_MEMORY_ALLOCATION_FAILED);
    CHECK(contains(etch_last_error(), "too small"));
    mem.pool_size = pool_size;
    mem.num_arenas = 0;
    CHECK_STATUS(etch_method_load(L.prog, "forward", &mem, NULL, &m), ETCH_ERR_INVALID_ARGUMENT);
    mem.num_arenas = 1;
    arenas[0] = arena + 8;
    CHECK_STATUS(etch_method_load(L.prog, "forward", &mem, NULL, &m), ETCH_ERR_INVALID_ARGUMENT);
    CHECK(m == NULL);
    CHECK_STATUS(etch_method_load(L.prog, "backward", &mem, NULL, &m), ETCH_ERR_NOT_FOUND);
    arenas[0] = arena;
    CHECK_OK(etch_method_load(L.prog, "forward", &mem, NULL, &m)); /* exact sizes suffice */
    etch_method_free(m);
    free(arena);
    free(pool);
    unload(&L);
}

static void test_many_missing_ops(void) {
    loaded L;
    char path[1024];
    memset(&L, 0, sizeof L);
    path_of(path, sizeof path, gen_dir, "neg_many_missing_ops.pte");
    CHECK_OK(etch_program_open_file(path, NULL, &L.prog));
    if (L.prog) {
        CHECK_STATUS(load_method(&L, "forward"), ETCH_ERR_OPERATOR_MISSING);
        const char *msg = etch_last_error();
        size_t n = sizeof MANY_MISSING_OPS / sizeof MANY_MISSING_OPS[0];
        char count[64];
        snprintf(count, sizeof count, "%zu operators", n);
        CHECK_MSG(contains(msg, count), "%s", msg);
        for (size_t i = 0; i < n; i++) {
            const char *at = strstr(msg, MANY_MISSING_OPS[i]);
            CHECK_MSG(at != NULL, "error lacks %s: %s", MANY_MISSING_OPS[i], msg);
            if (at) /* named once, though called twice */
                CHECK(strstr(at + strlen(MANY_MISSING_OPS[i]), MANY_MISSING_OPS[i]) == NULL);
        }
        CHECK(!contains(msg, "test::add.out"));
    }
    unload(&L);
}

static void test_operator_meta(void) {
    char path[1024];
    etch_program *p = NULL;
    path_of(path, sizeof path, gen_dir, "neg_missing_ops.pte");
    CHECK_OK(etch_program_open_file(path, NULL, &p));
    if (!p)
        return;
    etch_method_meta meta;
    CHECK_OK(etch_program_method_meta(p, "forward", &meta));
    CHECK(etch_method_meta_num_operators(&meta) == 3);
    const char *names[3] = {"test::add.out", "test::missing_first.out", "test::missing_second"};
    bool avail[3] = {true, false, false};
    size_t calls[3] = {1, 2, 1};
    for (size_t i = 0; i < 3; i++) {
        etch_operator_info oi;
        CHECK_OK(etch_method_meta_operator(&meta, i, &oi));
        CHECK_MSG(strcmp(oi.name, names[i]) == 0 && oi.available == avail[i] &&
                      oi.num_calls == calls[i],
                  "operator %zu: %s available=%d calls=%zu", i, oi.name, oi.available,
                  oi.num_calls);
    }
    etch_program_close(p);
}

static void test_delegate(void) {
    loaded L;
    int inits = tb_inits, destroys = tb_destroys;
    tb_misaligned = 0;
    if (!open_gen(&L, "delegate.pte", NULL, "forward"))
        RETURN_UNLOADED(&L);
    CHECK(tb_inits == inits + 2);
    CHECK(tb_misaligned == 0); /* inline and segment blobs are 16-byte aligned */
    etch_method_meta meta;
    CHECK_OK(etch_program_method_meta(L.prog, "forward", &meta));
    CHECK(etch_method_meta_num_delegates(&meta) == 2);
    etch_delegate_info di;
    CHECK_OK(etch_method_meta_delegate(&meta, 0, &di));
    CHECK(strcmp(di.id, "TestBackend") == 0 && !di.inline_blob && di.blob_size == 7 &&
          di.num_compile_specs == 1 && di.available);
    CHECK_OK(etch_method_meta_delegate(&meta, 1, &di));
    CHECK(di.inline_blob && di.blob_size == 7 && di.num_compile_specs == 2);
    etch_program_header h;
    etch_program_get_header(L.prog, &h);
    CHECK(h.num_named_data == 1 && h.num_segments == 3 && h.has_extended_header);
    for (size_t s = 0; s < h.num_segments; s++) {
        uint64_t off = 0, size = 0;
        CHECK_OK(etch_program_segment(L.prog, s, &off, &size));
        CHECK(off % (s == 2 ? 256 : 128) == 0);
        CHECK(size == (s == 0 ? 0 : s == 1 ? 7 : 40));
    }
    uint64_t off, size;
    CHECK_STATUS(etch_program_segment(L.prog, 3, &off, &size), ETCH_ERR_INVALID_ARGUMENT);
    CHECK_OK(set_floats1(L.m, 0, DELEGATE_X, 4));
    int execs = tb_executes;
    CHECK_OK(etch_method_execute(L.m));
    CHECK(tb_executes == execs + 2);
    check_output(L.m, 0, DELEGATE_OUT, 4, 0, NULL, "delegate");
    unload(&L);
    CHECK(tb_destroys == destroys + 2);
}

static void test_loop(void) {
    loaded L;
    if (!open_gen(&L, "control.pte", NULL, "loop"))
        RETURN_UNLOADED(&L);
    for (int run = 0; run < 2; run++) { /* the counter is re-initialised by the program */
        CHECK_OK(set_floats1(L.m, 0, LOOP_X, 3));
        CHECK_OK(set_floats1(L.m, 1, LOOP_ACC, 3));
        CHECK_OK(etch_method_execute(L.m));
        check_output(L.m, 0, LOOP_OUT, 3, 0, NULL, "loop");
        const etch_value *i = etch_method_output(L.m, 1);
        CHECK(i->tag == ETCH_VALUE_INT && i->u.i == LOOP_TRIPS);
    }
    unload(&L);
}

static int observed;
static void count_instructions(void *ud, size_t chain, size_t pc, const char *op) {
    (void)ud, (void)chain, (void)pc, (void)op;
    observed++;
}

static void test_cond(void) {
    loaded L;
    if (!open_gen(&L, "control.pte", NULL, "cond"))
        RETURN_UNLOADED(&L);
    etch_method_set_observer(L.m, count_instructions, NULL);
    int64_t two = 2;
    uint8_t preds[3][2] = {{1, 1}, {0, 0}, {1, 0}};
    const float *want[3] = {COND_TRUE, COND_FALSE, COND_FALSE};
    int ninstr[3] = {4, 3, 3}; /* true: jf, add, move, jf; false: jf, mul, move */
    for (int k = 0; k < 3; k++) {
        etch_tensor p;
        etch_tensor_init(&p, ETCH_DTYPE_BOOL, 1, &two, preds[k]);
        CHECK_OK(etch_method_set_input_tensor(L.m, 0, &p));
        CHECK_OK(set_floats1(L.m, 1, COND_X, 2));
        observed = 0;
        CHECK_OK(etch_method_execute(L.m));
        CHECK_MSG(observed == ninstr[k], "cond case %d ran %d instructions", k, observed);
        check_output(L.m, 0, want[k], 2, 0, NULL, k == 0 ? "cond true" : "cond false");
    }
    unload(&L);
}

static void test_free(void) {
    loaded L;
    if (!open_gen(&L, "control.pte", NULL, "free"))
        RETURN_UNLOADED(&L);
    for (int run = 0; run < 2; run++) { /* the view is bound again by the kernel each run */
        CHECK_OK(set_floats1(L.m, 0, FREE_X, 3));
        CHECK_OK(etch_method_execute(L.m));
        check_output(L.m, 0, FREE_OUT, 3, 0, NULL, "free");
        const etch_value *tmp = etch_method_output(L.m, 1);
        CHECK(tmp->tag == ETCH_VALUE_TENSOR && tmp->u.tensor->data == NULL);
    }
    unload(&L);

    /* a freed planned input: set_input must not copy through the cleared pointer */
    if (!open_gen(&L, "control.pte", NULL, "free_input"))
        RETURN_UNLOADED(&L);
    CHECK_OK(set_floats1(L.m, 0, FREE_X, 3));
    CHECK_OK(etch_method_execute(L.m));
    check_output(L.m, 0, FREE_OUT, 3, 0, NULL, "free_input");
    CHECK_STATUS(set_floats1(L.m, 0, FREE_X, 3), ETCH_ERR_INVALID_STATE);
    CHECK(contains(etch_last_error(), "input 0"));
    CHECK_OK(etch_method_reset(L.m)); /* gives the input its planned memory back */
    CHECK_OK(set_floats1(L.m, 0, FREE_X, 3));
    CHECK_OK(etch_method_execute(L.m));
    check_output(L.m, 0, FREE_OUT, 3, 0, NULL, "free_input after reset");
    unload(&L);

    if (!open_gen(&L, "control.pte", NULL, "skip"))
        RETURN_UNLOADED(&L);
    CHECK_OK(set_floats1(L.m, 0, SKIP_X, 2));
    observed = 0;
    etch_method_set_observer(L.m, count_instructions, NULL);
    CHECK_OK(etch_method_execute(L.m));
    CHECK(observed == 2);
    check_output(L.m, 0, SKIP_OUT, 2, 0, NULL, "skip");
    unload(&L);
}

static void test_chains(void) {
    loaded L;
    if (!open_gen(&L, "control.pte", NULL, "chains"))
        RETURN_UNLOADED(&L);
    etch_method_meta meta;
    CHECK_OK(etch_program_method_meta(L.prog, "chains", &meta));
    CHECK(etch_method_meta_num_instructions(&meta) == 3);
    CHECK_OK(set_floats1(L.m, 0, CHAINS_X, 2));
    CHECK_OK(etch_method_execute(L.m));
    check_output(L.m, 0, CHAINS_OUT, 2, 0, NULL, "two chains");
    unload(&L);
}

static void test_values(void) {
    loaded L;
    if (!open_gen(&L, "values.pte", NULL, "forward"))
        RETURN_UNLOADED(&L);
    CHECK_OK(set_floats1(L.m, 0, VALUES_A, 2));
    CHECK_OK(set_floats1(L.m, 1, VALUES_B, 2));
    CHECK_OK(etch_method_execute(L.m));
    check_output(L.m, 0, VALUES_SCALARS, 6, 0, NULL, "scalars");
    check_output(L.m, 1, VALUES_SUM, 2, 0, NULL, "tensor list");
    check_output(L.m, 2, VALUES_OPT, 2, 0, NULL, "optional tensor list");
    int64_t full_sz[2] = {2, VALUES_K};
    check_output(L.m, 3, VALUES_FULL, 6, 2, full_sz, "int list / resize");
    etch_value *lst = (etch_value *)(uintptr_t)etch_method_output(L.m, 4);
    size_t n = 0;
    const int64_t *items = etch_value_int_list(lst, &n);
    CHECK(lst->tag == ETCH_VALUE_INT_LIST && n == 2 && items[0] == 2 && items[1] == VALUES_K);
    const etch_value *v = etch_method_output(L.m, 5);
    CHECK(v->tag == ETCH_VALUE_INT && v->u.i == VALUES_K);
    v = etch_method_output(L.m, 6);
    CHECK(v->tag == ETCH_VALUE_DOUBLE && v->u.d == 2.5);
    v = etch_method_output(L.m, 7);
    CHECK(v->tag == ETCH_VALUE_BOOL && v->u.b);
    v = etch_method_output(L.m, 8);
    CHECK(v->tag == ETCH_VALUE_STRING && v->u.str.len == 5 && strcmp(v->u.str.ptr, "hello") == 0);
    v = etch_method_output(L.m, 9);
    CHECK(v->tag == ETCH_VALUE_NONE);
    CHECK(etch_method_output(L.m, 10) == NULL);
    unload(&L);
}

static void test_dynamic(void) {
    loaded L;
    if (!open_gen(&L, "dynamic.pte", NULL, "forward"))
        RETURN_UNLOADED(&L);
    etch_method_meta meta;
    etch_value_info info;
    CHECK_OK(etch_program_method_meta(L.prog, "forward", &meta));
    CHECK_OK(etch_method_meta_input(&meta, 0, &info));
    CHECK(info.dynamism == ETCH_SHAPE_DYNAMIC_BOUND && info.sizes[0] == 4 && info.planned);
    float x[20], want[20], y[2] = {3, -4}, y2[2] = {9, 16};
    for (int i = 0; i < 20; i++)
        x[i] = (float)i - 5.5f;
    CHECK_OK(set_floats1(L.m, 1, y, 2));

    /* within the bound: [2, 3] */
    int64_t s23[2] = {2, 3};
    CHECK_OK(set_floats(L.m, 0, x, 2, s23));
    CHECK_OK(etch_method_execute(L.m));
    for (int i = 0; i < 6; i++)
        want[i] = 2 * x[i];
    check_output(L.m, 0, want, 6, 2, s23, "dynamic [2,3]");
    CHECK(etch_method_output(L.m, 1)->u.i == 2);
    check_output(L.m, 2, y2, 2, 0, NULL, "static y");

    /* exactly the bound */
    int64_t s44[2] = {4, 4};
    CHECK_OK(set_floats(L.m, 0, x, 2, s44));
    CHECK_OK(etch_method_execute(L.m));
    for (int i = 0; i < 16; i++)
        want[i] = 2 * x[i];
    check_output(L.m, 0, want, 16, 2, s44, "dynamic [4,4]");
    CHECK(etch_method_output(L.m, 1)->u.i == 4);

    /* beyond the bound, other rank, static input resized: refused, nothing changes */
    int64_t s54[2] = {5, 4}, s29[2] = {2, 9}, s16 = 16, s3 = 3;
    float big[20];
    for (int i = 0; i < 20; i++)
        big[i] = 1000.0f + (float)i;
    /* each refusal names the input, the shape given and the shape the program takes (with
     * the upper bound of a dynamic one) */
    CHECK_STATUS(set_floats(L.m, 0, big, 2, s54), ETCH_ERR_NOT_SUPPORTED);
    CHECK_MSG(contains(etch_last_error(), "input 0: ") &&
                  contains(etch_last_error(), "takes Float [4, 4] (dynamic shape, upper bound "
                                              "[4, 4]: at most 16 elements), given Float [5, 4]"),
              "%s", etch_last_error());
    CHECK_STATUS(set_floats(L.m, 0, big, 2, s29), ETCH_ERR_NOT_SUPPORTED);
    CHECK_MSG(contains(etch_last_error(), "given Float [2, 9]"), "%s", etch_last_error());
    CHECK_STATUS(set_floats(L.m, 0, big, 1, &s16), ETCH_ERR_INVALID_ARGUMENT);
    CHECK_MSG(contains(etch_last_error(), "input 0: rank 1, expected 2: the method takes Float "
                                          "[4, 4] (dynamic shape, upper bound [4, 4]: at most "
                                          "16 elements), given Float [16]"),
              "%s", etch_last_error());
    CHECK_STATUS(set_floats(L.m, 1, big, 1, &s3), ETCH_ERR_NOT_SUPPORTED);
    CHECK_MSG(contains(etch_last_error(), "input 1: ") &&
                  contains(etch_last_error(), "takes Float [2] (static shape), given Float [3]"),
              "%s", etch_last_error());
    int32_t ints[2] = {1, 2};
    etch_tensor ti;
    int64_t s2 = 2;
    CHECK_OK(etch_tensor_init(&ti, ETCH_DTYPE_INT, 1, &s2, ints));
    CHECK_STATUS(etch_method_set_input_tensor(L.m, 1, &ti), ETCH_ERR_INVALID_ARGUMENT);
    CHECK_MSG(contains(etch_last_error(), "input 1: dtype Int, expected Float: the method takes "
                                          "Float [2] (static shape), given Int [2]"),
              "%s", etch_last_error());
    const etch_tensor *xin = etch_method_input(L.m, 0)->u.tensor;
    CHECK(xin->sizes[0] == 4 && xin->sizes[1] == 4 && ((float *)xin->data)[0] == x[0]);
    check_output(L.m, 3, DYNAMIC_GUARD, 4, 0, NULL, "guard after refused inputs");
    CHECK_OK(etch_method_execute(L.m));
    check_output(L.m, 0, want, 16, 2, s44, "dynamic after refused inputs");
    check_output(L.m, 2, y2, 2, 0, NULL, "static y after refused input");
    check_output(L.m, 3, DYNAMIC_GUARD, 4, 0, NULL, "guard");

    /* shrink again, and an empty tensor */
    int64_t s13[2] = {1, 3}, s04[2] = {0, 4};
    CHECK_OK(set_floats(L.m, 0, x, 2, s13));
    CHECK_OK(etch_method_execute(L.m));
    check_output(L.m, 0, want, 3, 2, s13, "dynamic [1,3]");
    CHECK_OK(set_floats(L.m, 0, NULL, 2, s04));
    CHECK_OK(etch_method_execute(L.m));
    check_output(L.m, 0, want, 0, 2, s04, "dynamic [0,4]");
    CHECK(etch_method_output(L.m, 1)->u.i == 0);

    /* reset restores the serialized (bound) shape */
    CHECK_OK(etch_method_reset(L.m));
    CHECK(xin->sizes[0] == 4 && xin->sizes[1] == 4);
    unload(&L);

    /* an input in dim order [1, 0]: strides follow it, a contiguous tensor is refused */
    if (!open_gen(&L, "dynamic.pte", NULL, "transposed"))
        RETURN_UNLOADED(&L);
    CHECK_OK(etch_program_method_meta(L.prog, "transposed", &meta));
    CHECK_OK(etch_method_meta_input(&meta, 0, &info));
    CHECK(info.dim_order[0] == 1 && info.dim_order[1] == 0);
    xin = etch_method_input(L.m, 0)->u.tensor;
    CHECK(xin->strides[0] == 1 && xin->strides[1] == 2 && !etch_tensor_is_contiguous(xin));
    CHECK_STATUS(set_floats(L.m, 0, x, 2, s23), ETCH_ERR_NOT_SUPPORTED);
    CHECK(contains(etch_last_error(), "dim order"));
    etch_tensor tt;
    etch_tensor_init(&tt, ETCH_DTYPE_FLOAT, 2, s23, x);
    tt.dim_order[0] = 1, tt.dim_order[1] = 0;
    etch_tensor_update_strides(&tt);
    CHECK_OK(etch_method_set_input_tensor(L.m, 0, &tt));
    CHECK_OK(etch_method_execute(L.m));
    for (int i = 0; i < 6; i++)
        want[i] = 2 * x[i];
    check_output(L.m, 0, want, 6, 2, s23, "transposed");
    CHECK(etch_method_output(L.m, 0)->u.tensor->strides[0] == 1);
    unload(&L);

    /* variadic signature, and a kernel that checks its own arguments */
    if (!open_gen(&L, "dynamic.pte", NULL, "variadic"))
        RETURN_UNLOADED(&L);
    CHECK_OK(etch_method_execute(L.m));
    float vwant[2] = {6 + 3, ETCH_VALUE_STRING + 3};
    check_output(L.m, 0, vwant, 2, 0, NULL, "variadic");
    unload(&L);
}

static void test_mutable(void) {
    loaded L;
    if (!open_gen(&L, "mutable.pte", NULL, "forward"))
        RETURN_UNLOADED(&L);
    check_output(L.m, 0, MUTABLE_INIT, 4, 0, NULL, "initial state"); /* copied at load */
    CHECK_OK(set_floats1(L.m, 0, MUTABLE_X, 4));
    CHECK_OK(etch_method_execute(L.m));
    check_output(L.m, 0, MUTABLE_ONCE, 4, 0, NULL, "state after one run");
    CHECK_OK(etch_method_execute(L.m));
    check_output(L.m, 0, MUTABLE_TWICE, 4, 0, NULL, "state after two runs");
    CHECK_OK(etch_method_reset(L.m));
    check_output(L.m, 0, MUTABLE_INIT, 4, 0, NULL, "state after reset");
    CHECK_STATUS(etch_method_execute(L.m), ETCH_ERR_INVALID_STATE); /* inputs forgotten */
    CHECK_OK(set_floats1(L.m, 0, MUTABLE_X, 4));
    CHECK_OK(etch_method_execute(L.m));
    check_output(L.m, 0, MUTABLE_ONCE, 4, 0, NULL, "state after reset and one run");
    unload(&L);

    /* a freed state gets its memory back at reset */
    if (!open_gen(&L, "mutable.pte", NULL, "free_state"))
        RETURN_UNLOADED(&L);
    CHECK_OK(set_floats1(L.m, 0, MUTABLE_X, 4));
    CHECK_OK(etch_method_execute(L.m));
    check_output(L.m, 0, MUTABLE_ONCE, 4, 0, NULL, "freed state, first run");
    CHECK_STATUS(etch_method_execute(L.m), ETCH_ERR_INVALID_STATE); /* its data is gone */
    CHECK_OK(etch_method_reset(L.m));
    CHECK_OK(set_floats1(L.m, 0, MUTABLE_X, 4));
    CHECK_OK(etch_method_execute(L.m));
    check_output(L.m, 0, MUTABLE_ONCE, 4, 0, NULL, "freed state, after reset");
    unload(&L);

    /* reset after a Move replaced the state by a smaller tensor */
    if (!open_gen(&L, "mutable.pte", NULL, "moved_state"))
        RETURN_UNLOADED(&L);
    float one = 1.5f, three = 3.0f;
    CHECK_OK(set_floats1(L.m, 0, &one, 1));
    CHECK_OK(etch_method_execute(L.m));
    check_output(L.m, 0, &three, 1, 0, NULL, "moved state aliases the small tensor");
    CHECK_OK(etch_method_reset(L.m));
    int64_t eight = 8, single = 1;
    check_output(L.m, 0, MOVED_STATE_INIT, 8, 1, &eight, "state after reset");
    check_output(L.m, 1, &three, 1, 1, &single, "small tensor after reset");
    unload(&L);

    /* a second load of the same program starts from the initial value again */
    if (!open_gen(&L, "mutable.pte", NULL, "forward"))
        RETURN_UNLOADED(&L);
    check_output(L.m, 0, MUTABLE_INIT, 4, 0, NULL, "initial state, second load");
    unload(&L);
}

static void test_multi(void) {
    loaded L;
    char path[1024];
    memset(&L, 0, sizeof L);
    path_of(path, sizeof path, gen_dir, "multi.pte");
    CHECK_OK(etch_program_open_file(path, NULL, &L.prog));
    if (!L.prog)
        return;
    const char *names[] = {"forward", "get_int", "get_double", "get_bool", "get_string",
                           "get_mixed"};
    CHECK(etch_program_num_methods(L.prog) == 6);
    for (size_t i = 0; i < 6; i++) {
        const char *n = etch_program_method_name(L.prog, i);
        CHECK(n && strcmp(n, names[i]) == 0);
    }
    CHECK(etch_program_method_name(L.prog, 6) == NULL);
    etch_method_meta meta;
    CHECK_STATUS(etch_program_method_meta(L.prog, "nope", &meta), ETCH_ERR_NOT_FOUND);
    for (size_t i = 1; i < 6; i++) {
        CHECK_OK(etch_program_method_meta(L.prog, names[i], &meta));
        CHECK(etch_method_meta_num_instructions(&meta) == 0);
        CHECK(etch_method_meta_num_inputs(&meta) == 0);
        CHECK_OK(load_method(&L, names[i]));
        if (!L.m)
            continue;
        CHECK_OK(etch_method_execute(L.m)); /* nothing to run, no inputs needed */
        const etch_value *v = etch_method_output(L.m, 0);
        switch (i) {
        case 1: CHECK(v->tag == ETCH_VALUE_INT && v->u.i == 42); break;
        case 2: CHECK(v->tag == ETCH_VALUE_DOUBLE && v->u.d == 0.125); break;
        case 3: CHECK(v->tag == ETCH_VALUE_BOOL && v->u.b); break;
        case 4:
            CHECK(v->tag == ETCH_VALUE_STRING && strcmp(v->u.str.ptr, "torch.uint8") == 0);
            break;
        case 5:
            CHECK(etch_method_num_outputs(L.m) == 4);
            CHECK(v->tag == ETCH_VALUE_INT && v->u.i == -7);
            CHECK(etch_method_output(L.m, 1)->u.d == -0.5);
            CHECK(etch_method_output(L.m, 2)->tag == ETCH_VALUE_BOOL &&
                  !etch_method_output(L.m, 2)->u.b);
            CHECK(etch_method_output(L.m, 3)->tag == ETCH_VALUE_STRING &&
                  etch_method_output(L.m, 3)->u.str.len == 0);
            break;
        }
        etch_method_free(L.m);
        L.m = NULL;
        free(L.pool);
        L.pool = NULL;
        free(L.temp);
        L.temp = NULL;
    }
    /* forward, loaded while another method of the same program is loaded too */
    loaded L2 = {0};
    L2.prog = L.prog;
    CHECK_OK(load_method(&L2, "forward"));
    CHECK_OK(load_method(&L, "get_int"));
    float x[2] = {1.5f, 2}, want[2] = {3, 4};
    if (L2.m) {
        CHECK_OK(set_floats1(L2.m, 0, x, 2));
        CHECK_OK(etch_method_execute(L2.m));
        check_output(L2.m, 0, want, 2, 0, NULL, "multi forward");
    }
    L2.prog = NULL;
    unload(&L2);
    unload(&L);
}

static void test_external(void) {
    loaded L;
    if (!open_gen(&L, "external.pte", "external.ptd", "forward"))
        RETURN_UNLOADED(&L);
    etch_method_meta meta;
    CHECK_OK(etch_program_method_meta(L.prog, "forward", &meta));
    CHECK(etch_method_meta_needs_external_data(&meta));
    int64_t sz[2] = {2, 2};
    CHECK_OK(set_floats(L.m, 0, EXTERNAL_X, 2, sz));
    CHECK_OK(etch_method_execute(L.m));
    check_output(L.m, 0, EXTERNAL_OUT, 4, 2, sz, "external");
    CHECK(etch_data_map_count(L.map) == 2);
    unload(&L);

    if (!open_gen(&L, "external.pte", "external.ptd", "accumulate"))
        RETURN_UNLOADED(&L);
    check_output(L.m, 0, EXTERNAL_BIAS, 4, 2, sz, "external mutable, loaded");
    CHECK_OK(set_floats(L.m, 0, EXTERNAL_X, 2, sz));
    CHECK_OK(etch_method_execute(L.m));
    check_output(L.m, 0, EXTERNAL_BIAS_PLUS_X, 4, 2, sz, "external mutable, one run");
    etch_data_entry e;
    CHECK_OK(etch_data_map_find(L.map, "linear.bias", &e));
    CHECK(memcmp(e.data, EXTERNAL_BIAS, sizeof EXTERNAL_BIAS) == 0); /* the map is untouched */
    CHECK_OK(etch_method_reset(L.m));
    check_output(L.m, 0, EXTERNAL_BIAS, 4, 2, sz, "external mutable after reset");
    unload(&L);
}

static void zero_inputs(etch_method *m) {
    static float zeros[256];
    const etch_method_meta *meta = etch_method_get_meta(m);
    for (size_t i = 0; i < etch_method_num_inputs(m); i++) {
        etch_value_info info;
        if (etch_method_meta_input(meta, i, &info) != ETCH_OK || info.tag != ETCH_VALUE_TENSOR)
            continue;
        etch_tensor t;
        etch_tensor_init(&t, (etch_dtype)info.dtype, info.dim, info.sizes, zeros);
        etch_method_set_input_tensor(m, i, &t);
    }
}

static void test_negative(void) {
    static const char *stage_names[] = {"", "open", "load", "execute", "nothing"};
    for (size_t c = 0; c < sizeof NEGATIVE_CASES / sizeof NEGATIVE_CASES[0]; c++) {
        const negative_case *nc = &NEGATIVE_CASES[c];
        loaded L;
        char path[1024];
        memset(&L, 0, sizeof L);
        int stage = STAGE_OPEN;
        path_of(path, sizeof path, gen_dir, nc->file);
        etch_status st = etch_program_open_file(path, NULL, &L.prog);
        if (st == ETCH_OK && nc->ptd) {
            path_of(path, sizeof path, gen_dir, nc->ptd);
            st = etch_data_map_open_file(path, NULL, &L.map);
            CHECK_MSG(st == ETCH_OK, "%s: cannot open %s", nc->file, nc->ptd);
        }
        if (st == ETCH_OK) {
            stage = STAGE_LOAD;
            st = load_method(&L, "forward");
        }
        if (st == ETCH_OK) {
            stage = STAGE_EXECUTE;
            zero_inputs(L.m);
            st = etch_method_execute(L.m);
        }
        if (st == ETCH_OK)
            stage = STAGE_NONE;
        const char *msg = etch_last_error();
        CHECK_MSG(stage == nc->stage && st == nc->status,
                  "%s%s%s: failed at %s with %s (%s), want %s with %s", nc->file,
                  nc->ptd ? " + " : "", nc->ptd ? nc->ptd : "", stage_names[stage],
                  etch_status_str(st), msg, stage_names[nc->stage],
                  etch_status_str(nc->status));
        for (int k = 0; k < 4 && nc->needles[k]; k++)
            CHECK_MSG(contains(msg, nc->needles[k]), "%s: error \"%s\" lacks \"%s\"", nc->file,
                      msg, nc->needles[k]);
        unload(&L);
    }
}

/* ---- the real fixtures ------------------------------------------------------------------- */

static bool have_portable;

/* Run `file` (optionally with a .ptd) through the C API with every load mode and check
 * output 0 against `want`. Inputs are float tensors of the method's input shapes, filled from
 * `in` (the same data for every input). */
static void run_fixture(const char *file, const char *ptd, const float *in, const float *want,
                        size_t n) {
    char path[1024];
    path_of(path, sizeof path, fixture_dir, file);
    for (int mode = 0; mode < 3; mode++) {
        loaded L;
        memset(&L, 0, sizeof L);
        etch_status st;
        void *raw = NULL;
        if (mode < 2) {
            etch_program_options o = etch_program_default_options();
            o.load_mode = mode == 0 ? ETCH_LOAD_MMAP : ETCH_LOAD_READ;
            st = etch_program_open_file(path, &o, &L.prog);
        } else {
            /* open_buffer over a deliberately misaligned copy: the runtime copies it */
            FILE *f = fopen(path, "rb");
            CHECK_MSG(f != NULL, "cannot read %s", path);
            if (!f)
                return;
            fseek(f, 0, SEEK_END);
            long size = ftell(f);
            fseek(f, 0, SEEK_SET);
            raw = malloc((size_t)size + 17);
            uint8_t *mis = (uint8_t *)raw + (16 - ((uintptr_t)raw & 15)) + 1;
            CHECK(fread(mis, 1, (size_t)size, f) == (size_t)size);
            fclose(f);
            CHECK(((uintptr_t)mis & 15) == 1);
            st = etch_program_open_buffer(mis, (size_t)size, NULL, &L.prog);
            memset(mis, 0, (size_t)size); /* must not be borrowed after a copy */
        }
        CHECK_MSG(st == ETCH_OK, "%s (mode %d): %s", file, mode, etch_last_error());
        if (st == ETCH_OK && ptd) {
            char dpath[1024];
            path_of(dpath, sizeof dpath, fixture_dir, ptd);
            etch_program_options o = etch_program_default_options();
            o.load_mode = mode == 1 ? ETCH_LOAD_READ : ETCH_LOAD_MMAP;
            st = etch_data_map_open_file(dpath, &o, &L.map);
            CHECK_MSG(st == ETCH_OK, "%s: %s", ptd, etch_last_error());
        }
        if (st == ETCH_OK) {
            st = load_method(&L, "forward");
            CHECK_MSG(st == ETCH_OK, "%s (mode %d): load: %s: %s%s", file, mode,
                      etch_status_str(st), etch_last_error(),
                      have_portable ? "" : " (portable kernels not linked yet)");
        }
        if (st == ETCH_OK) {
            const etch_method_meta *meta = etch_method_get_meta(L.m);
            for (size_t i = 0; i < etch_method_num_inputs(L.m); i++) {
                etch_value_info info;
                CHECK_OK(etch_method_meta_input(meta, i, &info));
                CHECK_OK(set_floats(L.m, i, in + i, info.dim, info.sizes));
            }
            CHECK_OK(etch_method_execute(L.m));
            const etch_value *o = etch_method_output(L.m, 0);
            size_t dim = o->u.tensor->dim;
            int64_t sizes[ETCH_MAX_DIMS];
            memcpy(sizes, o->u.tensor->sizes, sizeof sizes);
            check_output(L.m, 0, want, n, dim, sizes, file);
        }
        unload(&L);
        free(raw);
    }
}

static void test_fixtures(void) {
    have_portable = etch_kernels_register_portable() == ETCH_OK;
    CHECK(have_portable);
    /* add.pte: two [1] inputs: 1 + 2 = 3 (the input data pointer is offset per input) */
    static const float one_two[2] = {1, 2}, three[1] = {3};
    run_fixture("pte/add.pte", NULL, one_two, three, 1);
    static const float x3[3] = {1, 2, 3}, x3p1[3] = {2, 3, 4};
    run_fixture("pte/add_constant_segment.pte", NULL, x3, x3p1, 3);
    static const float x22[4] = {1, 2, 3, 4}, lin[4] = {5, 8, 11, 14};
    run_fixture("pte/linear_constant_buffer.pte", NULL, x22, lin, 4);
    run_fixture("pte/addmul_external.pte", "pte/addmul_external.ptd", x22, lin, 4);

    char path[1024];
    etch_program *p = NULL;
    path_of(path, sizeof path, fixture_dir, "pte/legacy_et02.pte");
    CHECK_STATUS(etch_program_open_file(path, NULL, &p), ETCH_ERR_INCOMPATIBLE_VERSION);
    CHECK(contains(etch_last_error(), "ET02"));
    CHECK(p == NULL);
    path_of(path, sizeof path, fixture_dir, "pte/not_a_program.pte");
    CHECK_STATUS(etch_program_open_file(path, NULL, &p), ETCH_ERR_NOT_A_PROGRAM);
    CHECK(p == NULL);
    etch_program_options o = etch_program_default_options();
    o.load_mode = ETCH_LOAD_READ;
    CHECK_STATUS(etch_program_open_file(path, &o, &p), ETCH_ERR_NOT_A_PROGRAM);
    path_of(path, sizeof path, fixture_dir, "pte/does_not_exist.pte");
    CHECK_STATUS(etch_program_open_file(path, NULL, &p), ETCH_ERR_ACCESS_FAILED);

    /* the external-data fixture without its .ptd */
    loaded L;
    memset(&L, 0, sizeof L);
    path_of(path, sizeof path, fixture_dir, "pte/addmul_external.pte");
    CHECK_OK(etch_program_open_file(path, NULL, &L.prog));
    if (L.prog)
        CHECK_STATUS(load_method(&L, "forward"), ETCH_ERR_INVALID_STATE);
    unload(&L);
}

/* etch_err may be given the current message (or a pointer into it) as an argument: it is
 * read before it is overwritten (ETCH_ISA=bogus once printed a garbled message). */
static void test_error_aliasing(void) {
    etch_err(ETCH_ERR_INVALID_ARGUMENT, "unknown instruction set '%s'", "bogus");
    CHECK_STATUS(etch_err(ETCH_ERR_NOT_SUPPORTED, "ETCH_ISA=%s: %s", "bogus", etch_last_error()),
                 ETCH_ERR_NOT_SUPPORTED);
    CHECK_MSG(strcmp(etch_last_error(), "ETCH_ISA=bogus: unknown instruction set 'bogus'") == 0,
              "%s", etch_last_error());
    /* a pointer into the middle of the buffer, and a message that fills it */
    etch_err(ETCH_ERR_INTERNAL, "head:tail");
    etch_err(ETCH_ERR_INTERNAL, "[%s|%s]", etch_last_error() + 5, etch_last_error());
    CHECK_MSG(strcmp(etch_last_error(), "[tail|head:tail]") == 0, "%s", etch_last_error());
    char big[1500];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    etch_err(ETCH_ERR_INTERNAL, "%s", big);
    etch_err(ETCH_ERR_INTERNAL, "a%s", etch_last_error());
    size_t n = strlen(etch_last_error());
    CHECK_MSG(n > 1000 && n < sizeof big && etch_last_error()[0] == 'a' &&
                  etch_last_error()[n - 1] == 'x',
              "%zu", n);
    etch_err(ETCH_ERR_INTERNAL, "inner");
    etch_err_prefix("outer %s", etch_last_error());
    CHECK_MSG(strcmp(etch_last_error(), "outer inner: inner") == 0, "%s", etch_last_error());
    etch_err_clear();
}

/* A zero dimension beside huge ones holds no bytes but its strides would pass int64: every
 * shape check counts zeros as one (etch_shape_extent), whatever the order of the sizes. */
static void test_shape_extent(void) {
    const int64_t big = (int64_t)1 << 31;
    const int64_t zero_first[4] = {0, big, big, big}, zero_last[4] = {big, big, big, 0};
    const int64_t ok[4] = {0, 4, 1 << 20, 3}, neg[2] = {2, -1};
    CHECK(etch_shape_extent(4, zero_first) == -1);
    CHECK(etch_shape_extent(4, zero_last) == -1);
    CHECK(etch_shape_extent(4, ok) == 4 * (1 << 20) * 3);
    CHECK(etch_shape_extent(2, neg) == -1);
    CHECK(etch_shape_extent(0, NULL) == 1);
    etch_tensor t;
    CHECK_STATUS(etch_tensor_init(&t, ETCH_DTYPE_FLOAT, 4, zero_first, NULL),
                 ETCH_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(etch_tensor_init(&t, ETCH_DTYPE_FLOAT, 4, zero_last, NULL),
                 ETCH_ERR_INVALID_ARGUMENT);
    CHECK_OK(etch_tensor_init(&t, ETCH_DTYPE_FLOAT, 4, ok, NULL));
    t.dynamism = ETCH_SHAPE_DYNAMIC_BOUND;
    CHECK_STATUS(etch_tensor_resize(&t, 4, zero_last), ETCH_ERR_INVALID_ARGUMENT);
    CHECK(t.sizes[0] == 0 && t.sizes[2] == (1 << 20)); /* unchanged */
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s GENERATED_DIR FIXTURES_DIR\n", argv[0]);
        return 2;
    }
    gen_dir = argv[1];
    fixture_dir = argv[2];
    test_error_aliasing();
    test_shape_extent();
    CHECK_OK(etch_kernels_register(test_kernel_table,
                                   sizeof test_kernel_table / sizeof test_kernel_table[0]));
    CHECK_OK(etch_backends_register(&test_backend));
    CHECK_OK(etch_backends_register(&unavailable_backend));

    test_kernels();
    test_bundled();
    test_unbound_io();
    test_kernel_failure();
    test_scalar_inputs();
    test_memory_errors();
    test_operator_meta();
    test_many_missing_ops();
    test_delegate();
    test_loop();
    test_cond();
    test_free();
    test_chains();
    test_values();
    test_dynamic();
    test_mutable();
    test_multi();
    test_external();
    test_negative();
    test_fixtures();
    return etch_test_finish();
}
