/* A program built against an installed etch (tests/install): runs add.pte's forward on
 * 1 + 2 through the module layer with two threads (the pthread pool, so a static link needs
 * its libraries) and the optimized kernels (libm), and prints the library version and the
 * result:
 *   etch 0.1.0
 *   3
 * Usage: consumer ADD.pte */
#include <etch/etch.h>
#include <etch/module.h>
#include <stdio.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s ADD.pte\n", argv[0]);
        return 2;
    }
    etch_module_options o = etch_module_default_options();
    o.num_threads = 2;
    etch_module *mod = NULL;
    etch_method *m = NULL;
    float a = 1.0f, b = 2.0f;
    int64_t sizes[1] = {1};
    etch_tensor ta, tb;
    etch_status st = etch_module_open(argv[1], &o, &mod);
    if (st == ETCH_OK) st = etch_module_load_method(mod, "forward", &m);
    if (st == ETCH_OK) st = etch_tensor_init(&ta, ETCH_DTYPE_FLOAT, 1, sizes, &a);
    if (st == ETCH_OK) st = etch_tensor_init(&tb, ETCH_DTYPE_FLOAT, 1, sizes, &b);
    if (st == ETCH_OK) st = etch_method_set_input_tensor(m, 0, &ta);
    if (st == ETCH_OK) st = etch_method_set_input_tensor(m, 1, &tb);
    if (st == ETCH_OK) st = etch_method_execute(m);
    if (st != ETCH_OK) {
        fprintf(stderr, "consumer: %s: %s\n", etch_status_str(st), etch_last_error());
        etch_module_close(mod);
        return 1;
    }
    const etch_value *y = etch_method_output(m, 0);
    if (!y || y->tag != ETCH_VALUE_TENSOR || y->u.tensor->dtype != ETCH_DTYPE_FLOAT ||
        etch_tensor_numel(y->u.tensor) != 1) {
        fprintf(stderr, "consumer: output 0 is not a float tensor of one element\n");
        etch_module_close(mod);
        return 1;
    }
    printf("etch %s\n%g\n", ETCH_VERSION_STRING, *(const float *)y->u.tensor->data);
    etch_module_close(mod);
    return 0;
}
