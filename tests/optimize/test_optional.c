/*
 * The load-time optimization unit (src/optimize) is optional: the core reaches it only through
 * the table it registers (src/runtime/passes.h).
 *
 *   unit_off PROGRAM_DIR  the CNNs of tests/layout (fusion, blocked layouts, prepacked and
 *                         chained convolutions with the optimized kernels) loaded with the
 *                         passes unregistered, as a core built without the unit loads them:
 *                         outputs bit for bit those of the unit with no_fusion,
 *                         no_blocked_layout and no_prepack, no call fused, blocked or chained,
 *                         a pool no larger; registered again, the passes are back (and do
 *                         change the calls), and every run is within 1e-4 of PyTorch.
 *   registry              the kernel registry keeps registrations (tables), not entries: the
 *                         precedence of later tables and later entries, count/at across
 *                         tables, impl and flags per table, the limit on registrations, and
 *                         etch_kernels_reset forgetting the unit's hooks too.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etch/etch.h"
#include "etch/kernels.h"
#include "etch/optimize.h"
#include "etch_test.h"
#include "kernel_test_util.h"
#include "layout_cases.h"
#include "runtime/passes.h"
#include "test_file.h"
#include "test_method.h"

#define TEMP_SIZE (8u << 20)

typedef struct run_result {
    float *out;
    size_t pool_size;
    unsigned fused, blocked, chained, skipped;
} run_result;

static const char *g_dir;

static void run_case(const layout_case *lc, const etch_method_options *mo, run_result *r) {
    memset(r, 0, sizeof *r);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.pte", g_dir, lc->name);
    etch_test_method L;
    if (etch_test_method_load(&L, path, NULL, mo, TEMP_SIZE) != 0) {
        CHECK_MSG(false, "%s: load failed", lc->name);
        etch_test_method_unload(&L);
        return;
    }
    r->pool_size = etch_method_meta_pool_size(etch_method_get_meta(L.m));
    for (size_t c = 0; c < etch_method_num_chains(L.m); c++)
        for (size_t pc = 0; pc < etch_method_chain_length(L.m, c); pc++) {
            etch_instruction_info info;
            CHECK_OK(etch_method_instruction_info(L.m, c, pc, &info));
            r->fused += info.fused != NULL;
            r->blocked += info.blocked_args != 0;
            r->chained += info.chain > 1;
            r->skipped += info.skipped;
        }
    snprintf(path, sizeof path, "%s/%s.in.bin", g_dir, lc->name);
    size_t in_bytes = 0;
    float *in = (float *)etch_test_read_file(path, 0, &in_bytes);
    const int64_t numel = lc->in_sizes[0] * lc->in_sizes[1] * lc->in_sizes[2] * lc->in_sizes[3];
    CHECK(in && in_bytes == (size_t)numel * sizeof(float));
    r->out = calloc((size_t)lc->out_numel, sizeof(float));
    if (in && r->out) {
        etch_tensor t;
        CHECK_OK(etch_tensor_init(&t, ETCH_DTYPE_FLOAT, 4, lc->in_sizes, in));
        CHECK_OK(etch_method_set_input_tensor(L.m, 0, &t));
        CHECK_OK(etch_method_execute(L.m));
        int64_t off = 0;
        for (size_t i = 0; i < etch_method_num_outputs(L.m); i++) {
            const etch_value *o = etch_method_output(L.m, i);
            CHECK(o && o->tag == ETCH_VALUE_TENSOR);
            if (!o || o->tag != ETCH_VALUE_TENSOR)
                break;
            int64_t n = etch_tensor_numel(o->u.tensor);
            CHECK(off + n <= lc->out_numel);
            if (off + n > lc->out_numel)
                break;
            memcpy(r->out + off, o->u.tensor->data, (size_t)n * sizeof(float));
            off += n;
        }
        CHECK(off == lc->out_numel);
    }
    free(in);
    etch_test_method_unload(&L);
}

static double worst_diff(const float *a, const float *b, int64_t n) {
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= worst))
            worst = d; /* NaN too */
    }
    return worst;
}

static void test_unit_off(void) {
    CHECK_OK(etch_kernels_register_optimized());
    const etch_load_passes *passes = etch_runtime_load_passes();
    CHECK_MSG(passes != NULL, "libetch starts with the load-time passes registered");
    etch_method_options all_off;
    memset(&all_off, 0, sizeof all_off);
    all_off.no_fusion = all_off.no_blocked_layout = all_off.no_prepack = true;
    unsigned changed = 0;
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        const layout_case *lc = &CASES[i];
        char path[1024];
        snprintf(path, sizeof path, "%s/%s.out.bin", g_dir, lc->name);
        size_t bytes = 0;
        float *want = (float *)etch_test_read_file(path, 0, &bytes);
        CHECK(want && bytes == (size_t)lc->out_numel * sizeof(float));

        run_result on, off, none, again;
        run_case(lc, NULL, &on);        /* the unit, every pass */
        run_case(lc, &all_off, &off);   /* the unit, every pass turned off */
        etch_runtime_set_load_passes(NULL);
        CHECK(etch_runtime_load_passes() == NULL);
        run_case(lc, NULL, &none);      /* no unit: default options */
        etch_optimize_install();
        CHECK(etch_runtime_load_passes() == passes);
        run_case(lc, NULL, &again);

        changed += on.fused + on.blocked + on.chained;
        CHECK_MSG(none.fused == 0 && none.blocked == 0 && none.chained == 0 && none.skipped == 0,
                  "%s: without the unit %u fused, %u blocked, %u chained, %u skipped calls",
                  lc->name, none.fused, none.blocked, none.chained, none.skipped);
        CHECK_MSG(none.pool_size <= off.pool_size, "%s: pool %zu without the unit, %zu with",
                  lc->name, none.pool_size, off.pool_size);
        CHECK_MSG(again.pool_size == on.pool_size && again.fused == on.fused &&
                      again.blocked == on.blocked && again.chained == on.chained,
                  "%s: registered again, the passes do what they did", lc->name);
        if (want && on.out && off.out && none.out && again.out) {
            CHECK_MSG(memcmp(none.out, off.out, (size_t)lc->out_numel * sizeof(float)) == 0,
                      "%s: without the unit the outputs differ from the passes-off run by %g",
                      lc->name, worst_diff(none.out, off.out, lc->out_numel));
            CHECK_MSG(memcmp(again.out, on.out, (size_t)lc->out_numel * sizeof(float)) == 0,
                      "%s: registered again, outputs differ by %g", lc->name,
                      worst_diff(again.out, on.out, lc->out_numel));
            double d_on = worst_diff(on.out, want, lc->out_numel),
                   d_none = worst_diff(none.out, want, lc->out_numel);
            CHECK_MSG(d_on <= 1e-4 && d_none <= 1e-4, "%s: vs PyTorch %g (unit), %g (none)",
                      lc->name, d_on, d_none);
        }
        free(want);
        free(on.out);
        free(off.out);
        free(none.out);
        free(again.out);
    }
    CHECK_MSG(changed > 0, "the passes changed no call of the test programs: nothing compared");
    etch_kernels_reset();
}

/* ---- registry ---------------------------------------------------------------------------- */

static void k_a(etch_kernel_context *ctx, etch_value **args, size_t nargs) {
    (void)ctx, (void)args, (void)nargs;
}
static void k_b(etch_kernel_context *ctx, etch_value **args, size_t nargs) {
    (void)ctx, (void)args, (void)nargs;
}
static void k_layout(etch_kernel_context *ctx, etch_value **args, size_t nargs, uint64_t *may,
                     uint64_t *tied) {
    (void)ctx, (void)args, (void)nargs;
    *may = *tied = 0;
}

static void test_registry(void) {
    static const etch_kernel t1[] = {{"t::x", NULL, k_a}, {"t::y", NULL, k_a}, {"t::x", NULL, k_b}};
    static const etch_kernel t2[] = {{"t::y", NULL, k_b}, {"t::z", NULL, k_b}};
    etch_kernels_reset();
    CHECK(etch_kernels_count() == 0 && etch_kernels_at(0) == NULL);
    CHECK_OK(etch_kernels_register_ex(t1, 3, "one", 0));
    CHECK_OK(etch_kernels_register_ex(t2, 0, "empty", 0)); /* nothing registered */
    CHECK_OK(etch_kernels_register_ex(t2, 2, "two", ETCH_KERNEL_FUSES_ACTIVATION));
    CHECK(etch_kernels_count() == 5);
    const etch_kernel *order[] = {&t1[0], &t1[1], &t1[2], &t2[0], &t2[1]};
    for (size_t i = 0; i < 5; i++)
        CHECK_MSG(etch_kernels_at(i) == order[i], "kernels_at(%zu)", i);
    CHECK(etch_kernels_at(5) == NULL);
    CHECK(etch_kernels_find("t::x", 4) == &t1[2]); /* the later entry of one table */
    CHECK(etch_kernels_find("t::y", 4) == &t2[0]); /* the later table */
    CHECK(etch_kernels_find("t::z", 4) == &t2[1]);
    CHECK(etch_kernels_find("t::zz", 5) == NULL && etch_kernels_find("t::", 3) == NULL);
    CHECK(strcmp(etch_kernels_impl_of(&t1[1]), "one") == 0 && etch_kernels_flags_of(&t1[1]) == 0);
    CHECK(strcmp(etch_kernels_impl_of(&t2[1]), "two") == 0 &&
          etch_kernels_flags_of(&t2[1]) == ETCH_KERNEL_FUSES_ACTIVATION);
    const etch_kernel stray = {"t::x", NULL, k_a};
    CHECK(etch_kernels_impl_of(&stray) == NULL && etch_kernels_flags_of(&stray) == 0);
    CHECK(etch_kernels_impl_of(NULL) == NULL);
    /* the same table again: newest first, so its entries report the newer impl */
    CHECK_OK(etch_kernels_register_ex(t1, 3, "again", 0));
    CHECK(etch_kernels_count() == 8 && strcmp(etch_kernels_impl_of(&t1[0]), "again") == 0);
    CHECK(etch_kernels_find("t::y", 4) == &t1[1]);

    /* a limit on registrations: the one past it fails, naming the build setting */
    etch_kernels_reset();
    etch_status st = ETCH_OK;
    size_t n = 0;
    for (; n < 1000 && st == ETCH_OK; n++)
        st = etch_kernels_register(t2, 1);
    CHECK_MSG(st == ETCH_ERR_REGISTRATION_EXCEEDING_MAX_KERNELS && n > 8,
              "registration %zu: %s", n, etch_status_str(st));
    CHECK(strstr(etch_last_error(), "ETCH_MAX_KERNEL_TABLES") != NULL);
    CHECK(etch_kernels_count() == n - 1);

    /* the unit's hooks are forgotten with the rest */
    etch_kernels_reset();
    CHECK_OK(etch_kernels_register_layout(k_a, k_layout));
    CHECK(etch_kernels_layout_of(k_a) == k_layout);
    etch_kernels_reset();
    CHECK(etch_kernels_layout_of(k_a) == NULL);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "unit_off") == 0) {
        g_dir = argv[2];
        test_unit_off();
    } else if (argc == 2 && strcmp(argv[1], "registry") == 0) {
        test_registry();
    } else {
        fprintf(stderr, "usage: %s unit_off PROGRAM_DIR | registry\n", argv[0]);
        return 2;
    }
    return etch_test_finish();
}
