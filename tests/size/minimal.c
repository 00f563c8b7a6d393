/*
 * The smallest useful etch program: open a file, load a method, set an input, execute,
 * read an output. It registers its own one-line kernel so that no kernel library is linked:
 * what the size budget measures is the core (format + runtime) that such a program needs.
 *
 * usage: etch_minimal FILE.pte   (a program whose forward adds with aten::add.out; every
 *                                 input, float, is set to 1, 2, 3, ...)
 */
#include <stdio.h>
#include <stdlib.h>

#include <etch/etch.h>

static void add_f32(etch_kernel_context *ctx, etch_value **args, size_t nargs) {
    (void)nargs;
    etch_tensor *a = args[0]->u.tensor, *b = args[1]->u.tensor, *out = args[3]->u.tensor;
    if (etch_kernel_resize_like(ctx, out, a) != ETCH_OK)
        return;
    int64_t n = etch_tensor_numel(out), nb = etch_tensor_numel(b);
    if (a->dtype != ETCH_DTYPE_FLOAT || b->dtype != ETCH_DTYPE_FLOAT || nb < 1) {
        etch_kernel_fail(ctx, ETCH_ERR_INVALID_TYPE, "float only");
        return;
    }
    for (int64_t i = 0; i < n; i++)
        ((float *)out->data)[i] = ((float *)a->data)[i] + ((float *)b->data)[nb == 1 ? 0 : i % nb];
}

static const etch_kernel kernels[] = {{"aten::add.out", "TTSWW", add_f32}};

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: etch_minimal FILE.pte\n");
        return 2;
    }
    etch_kernels_register(kernels, 1);
    etch_program *prog;
    etch_method_meta meta;
    etch_method *m;
    etch_status st = etch_program_open_file(argv[1], NULL, &prog);
    if (st == ETCH_OK)
        st = etch_program_method_meta(prog, "forward", &meta);
    if (st != ETCH_OK) {
        fprintf(stderr, "error: %s: %s\n", etch_status_str(st), etch_last_error());
        return 1;
    }
    size_t pool_size = etch_method_meta_pool_size(&meta);
    size_t narenas = etch_method_meta_num_arenas(&meta);
    if (narenas > 4)
        return 1;
    void *arenas[4];
    size_t sizes[4];
    for (size_t j = 0; j < narenas; j++) {
        sizes[j] = etch_method_meta_arena_size(&meta, j);
        arenas[j] = aligned_alloc(16, (sizes[j] + 16) / 16 * 16);
    }
    void *pool = malloc(pool_size);
    etch_method_memory mem = {pool, pool_size, arenas, sizes, narenas, NULL, 0};
    st = etch_method_load(prog, "forward", &mem, NULL, &m);
    float x[64];
    for (int i = 0; i < 64; i++)
        x[i] = (float)(i + 1);
    size_t ninputs = st == ETCH_OK ? etch_method_meta_num_inputs(&meta) : 0;
    for (size_t k = 0; k < ninputs && st == ETCH_OK; k++) {
        etch_value_info in;
        st = etch_method_meta_input(&meta, k, &in);
        if (st != ETCH_OK)
            break;
        int64_t n = 1;
        for (int i = 0; i < in.dim; i++)
            n *= in.sizes[i];
        if (n > 64 || in.dtype != ETCH_DTYPE_FLOAT)
            return 1;
        etch_tensor t; /* the inputs share x: they are only read */
        st = etch_tensor_init(&t, ETCH_DTYPE_FLOAT, in.dim, in.sizes, x);
        if (st == ETCH_OK)
            st = etch_method_set_input_tensor(m, k, &t);
    }
    if (st == ETCH_OK)
        st = etch_method_execute(m);
    if (st != ETCH_OK) {
        fprintf(stderr, "error: %s: %s\n", etch_status_str(st), etch_last_error());
        return 1;
    }
    const etch_tensor *out = etch_method_output(m, 0)->u.tensor;
    for (int64_t i = 0; i < etch_tensor_numel(out); i++)
        printf("%s%g", i ? " " : "", ((const float *)out->data)[i]);
    printf("\n");
    etch_method_free(m);
    etch_program_close(prog);
    for (size_t j = 0; j < narenas; j++)
        free(arenas[j]);
    free(pool);
    return 0;
}
