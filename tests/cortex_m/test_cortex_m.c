/* ExecuTorch's Cortex-M keyword spotter (kws_dscnn_cortexm.pte: DS-CNN, int8, cortex_m::
 * operators) through the C API.
 *
 *   test_cortex_m kws PROGRAM.pte GEN_DIR NAME=CLASS ...
 *       runs GEN_DIR/NAME.npy's MFCC features (written by kws_reference.py with the numpy
 *       scores in GEN_DIR/NAME.expected.f32), compares all 12 scores bit for bit and checks
 *       the winning class
 *   test_cortex_m set_input PROGRAM.pte
 *       the input is Float [1, 1, 49, 10] in dim order (0, 2, 1, 3): set_input takes it in
 *       that order and in the contiguous one (they differ only in where a size-1 dim goes),
 *       and refuses an order that really differs
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "etch/etch.h"
#include "etch/kernels.h"
#include "etch/npy.h"
#include "etch_test.h"
#include "test_file.h"
#include "test_method.h"

static const int64_t kws_sizes[4] = {1, 1, 49, 10};

static void set_features(etch_method *m, const float *x, const uint8_t *order, etch_status want) {
    etch_tensor t;
    CHECK_OK(etch_tensor_init(&t, ETCH_DTYPE_FLOAT, 4, kws_sizes, (void *)x));
    memcpy(t.dim_order, order, 4);
    etch_tensor_update_strides(&t);
    CHECK_STATUS(etch_method_set_input_tensor(m, 0, &t), want);
}

static int run_kws(const char *pte, const char *gen, int nspec, char **spec) {
    CHECK_OK(etch_kernels_register_portable());
    etch_test_method L;
    if (etch_test_method_load(&L, pte, NULL, NULL, 1 << 16) != 0) {
        CHECK(!"the KWS program loads");
        etch_test_method_unload(&L);
        return etch_test_finish();
    }
    static const uint8_t program_order[4] = {0, 2, 1, 3}, contiguous[4] = {0, 1, 2, 3};
    for (int s = 0; s < nspec; s++) {
        char name[256], path[1024];
        const char *eq = strchr(spec[s], '=');
        if (!eq || (size_t)(eq - spec[s]) >= sizeof name) {
            CHECK_MSG(0, "bad spec %s (NAME=CLASS)", spec[s]);
            continue;
        }
        memcpy(name, spec[s], (size_t)(eq - spec[s]));
        name[eq - spec[s]] = 0;
        int want_class = atoi(eq + 1);
        snprintf(path, sizeof path, "%s/%s.npy", gen, name);
        etch_npy a;
        CHECK_OK(etch_npy_read_file(path, &a));
        CHECK(a.tensor.dtype == ETCH_DTYPE_FLOAT && etch_tensor_numel(&a.tensor) == 490);
        snprintf(path, sizeof path, "%s/%s.expected.f32", gen, name);
        size_t n = 0;
        float *want = etch_test_read_file(path, 0, &n);
        CHECK_MSG(want && n == 12 * sizeof(float), "%s: %zu bytes", path, n);
        if (!want || n != 12 * sizeof(float) || etch_tensor_numel(&a.tensor) != 490) {
            free(want);
            etch_npy_free(&a);
            continue;
        }
        const float *x = a.tensor.data;
        for (int layout = 0; layout < 2; layout++) {
            set_features(L.m, x, layout ? contiguous : program_order, ETCH_OK);
            CHECK_OK(etch_method_execute(L.m));
            const etch_value *out = etch_method_output(L.m, 0);
            CHECK(out && out->tag == ETCH_VALUE_TENSOR);
            if (!out || out->tag != ETCH_VALUE_TENSOR)
                continue;
            const etch_tensor *y = out->u.tensor;
            CHECK(y->dtype == ETCH_DTYPE_FLOAT && y->dim == 2 && y->sizes[0] == 1 &&
                  y->sizes[1] == 12);
            const float *got = y->data;
            int best = 0;
            for (int k = 0; k < 12; k++) {
                CHECK_MSG(memcmp(&got[k], &want[k], sizeof(float)) == 0,
                          "%s score %d: etch %.9g, numpy %.9g", name, k, got[k], want[k]);
                if (got[k] > got[best])
                    best = k;
            }
            CHECK_MSG(best == want_class, "%s: class %d, expected %d", name, best, want_class);
            printf("%s (%s input order): class %d, scores", name,
                   layout ? "contiguous" : "program's", best);
            for (int k = 0; k < 12; k++)
                printf(" %.6g", got[k]);
            printf("\n");
        }
        free(want);
        etch_npy_free(&a);
    }
    etch_test_method_unload(&L);
    return etch_test_finish();
}

static int run_set_input(const char *pte) {
    CHECK_OK(etch_kernels_register_portable());
    etch_test_method L;
    if (etch_test_method_load(&L, pte, NULL, NULL, 1 << 16) != 0) {
        CHECK(!"the KWS program loads");
        etch_test_method_unload(&L);
        return etch_test_finish();
    }
    float *x = calloc(490, sizeof *x);
    CHECK(x != NULL);
    if (x) {
        for (int i = 0; i < 490; i++)
            x[i] = (float)(i % 37) - 18.0f;
        /* orders that lay [1, 1, 49, 10] out alike: size-1 dims anywhere */
        static const uint8_t same[][4] = {{0, 2, 1, 3}, {0, 1, 2, 3}, {1, 0, 2, 3}, {2, 0, 1, 3}};
        for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
            set_features(L.m, x, same[i], ETCH_OK);
        /* the planned input holds the bytes as given */
        const etch_tensor *in = etch_method_input(L.m, 0)->u.tensor;
        CHECK(in->dim_order[1] == 2 && in->dim_order[2] == 1);
        CHECK(memcmp(in->data, x, 490 * sizeof(float)) == 0);
        /* H and W swapped in memory: a real difference, refused with the reason */
        static const uint8_t swapped[4] = {0, 1, 3, 2}, swapped2[4] = {0, 3, 2, 1};
        set_features(L.m, x, swapped, ETCH_ERR_NOT_SUPPORTED);
        CHECK_MSG(strstr(etch_last_error(), "dim order") != NULL, "%s", etch_last_error());
        set_features(L.m, x, swapped2, ETCH_ERR_NOT_SUPPORTED);
        CHECK_MSG(strstr(etch_last_error(), "dim order") != NULL, "%s", etch_last_error());
        /* a caller's dim order that is no permutation is refused, not read past */
        etch_tensor g;
        CHECK_OK(etch_tensor_init(&g, ETCH_DTYPE_FLOAT, 4, kws_sizes, x));
        g.dim_order[1] = 200; /* after the strides: update_strides would index by it */
        CHECK_STATUS(etch_method_set_input_tensor(L.m, 0, &g), ETCH_ERR_NOT_SUPPORTED);
        free(x);
    }
    etch_test_method_unload(&L);
    return etch_test_finish();
}

int main(int argc, char **argv) {
    if (argc >= 4 && strcmp(argv[1], "kws") == 0)
        return run_kws(argv[2], argv[3], argc - 4, argv + 4);
    if (argc == 3 && strcmp(argv[1], "set_input") == 0)
        return run_set_input(argv[2]);
    fprintf(stderr, "usage: test_cortex_m kws PROGRAM.pte GEN_DIR NAME=CLASS ... | set_input "
                    "PROGRAM.pte\n");
    return 2;
}
