/*
 * Nothing allocates during execute: malloc, calloc, realloc, free, aligned_alloc,
 * posix_memalign and mmap are wrapped at link time (-Wl,--wrap=...) and counted while a
 * window is armed around set_input + execute + reading outputs; the etch_allocator given to
 * the program counts too. Programs: LeNet (portable kernels) and a bounded-dynamic program
 * whose input is resized between executes (one of its kernels, registered here, uses kernel
 * scratch memory). In the sanitizer build the allocator's hooks also count every heap
 * allocation of the process, libc-internal ones (which --wrap cannot reach) included.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <etch/etch.h>
#include <etch/kernels.h>

#include "etch_test.h"
#include "test_method.h"

#include "alloc_wrap.h"

#if defined(__SANITIZE_ADDRESS__)
#define ALLOC_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ALLOC_ASAN 1
#endif
#endif
#ifdef ALLOC_ASAN
/* <sanitizer/allocator_interface.h> ships with clang only; the function is in gcc's libasan
 * too. Hooks run on every malloc/free the sanitizer's allocator serves. */
int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void *, size_t),
                                              void (*free_hook)(const volatile void *));
static long heap_hook_total;
static void heap_malloc_hook(const volatile void *p, size_t n) {
    (void)p;
    (void)n;
    etch_alloc_calls += etch_alloc_armed;
    heap_hook_total++;
}
static void heap_free_hook(const volatile void *p) { (void)p; }
#endif

/* the allocator interface, counted the same way */
static long iface_calls, iface_total;
static void *count_alloc(void *self, size_t size, size_t align) {
    (void)self;
    iface_calls += etch_alloc_armed;
    iface_total++;
    return aligned_alloc(align < 16 ? 16 : align, (size + 15) / 16 * 16);
}
static void count_free(void *self, void *p) {
    (void)self;
    iface_calls += etch_alloc_armed && p;
    free(p);
}
static const etch_allocator counting = {count_alloc, count_free, NULL};

/* alloc_test::copy_via_temp.out(T self, W out) -> W: out = self, through kernel scratch. */
static void copy_via_temp(etch_kernel_context *ctx, etch_value **args, size_t nargs) {
    (void)nargs;
    etch_tensor *in = args[0]->u.tensor, *out = args[1]->u.tensor;
    if (etch_kernel_resize_like(ctx, out, in) != ETCH_OK)
        return;
    size_t nbytes = etch_tensor_nbytes(in);
    void *scratch = etch_kernel_temp_alloc(ctx, nbytes ? nbytes : 1, 16);
    if (!scratch)
        return;
    memcpy(scratch, in->data, nbytes);
    memcpy(out->data, scratch, nbytes);
}
static const etch_kernel test_kernels[] = {
    {"alloc_test::copy_via_temp.out", "TWW", copy_via_temp}};

#define TEMP_SIZE 4096

/* "forward" of path, opened in `mode` with the counting allocator. */
static int load(const char *path, etch_load_mode mode, etch_test_method *L) {
    etch_program_options o = etch_program_default_options();
    o.load_mode = mode;
    o.allocator = &counting;
    return etch_test_method_load(L, path, &o, NULL, TEMP_SIZE);
}

static void arm(void) {
    etch_alloc_calls = iface_calls = 0;
    etch_alloc_armed = 1;
}
static void disarm(void) { etch_alloc_armed = 0; }

/* Opening a program allocates (its handle, and the mapping or a copy of the file): seen
 * through the wrappers, which proves they catch etch's calls. */
static void test_wrapper_counts(const char *fixtures) {
    char path[1024];
    snprintf(path, sizeof path, "%s/pte/add.pte", fixtures);
    for (int mode = ETCH_LOAD_MMAP; mode <= ETCH_LOAD_READ; mode++) {
        etch_program_options o = etch_program_default_options();
        o.load_mode = (etch_load_mode)mode;
        etch_program *p = NULL;
        arm();
        etch_status st = etch_program_open_file(path, &o, &p);
        etch_program_close(p);
        disarm();
        CHECK_OK(st);
        CHECK_MSG(etch_alloc_calls >= 2, "the wrappers saw %ld calls opening and closing %s: --wrap is "
                              "not in effect", etch_alloc_calls, path);
    }
}

static void test_lenet(const char *fixtures, etch_load_mode mode) {
    char path[1024];
    snprintf(path, sizeof path, "%s/pte/lenet_bundled.bpte", fixtures);
    long before = iface_total;
    etch_test_method L;
    CHECK(load(path, mode, &L) == 0);
    if (!L.m)
        return;
    CHECK_MSG(iface_total > before, "the program did not allocate through the given allocator");
    static float x[32 * 32];
    int64_t sizes[4] = {1, 1, 32, 32};
    etch_tensor t;
    etch_tensor_init(&t, ETCH_DTYPE_FLOAT, 4, sizes, x);
    float first = 0;
    for (int run = 0; run < 3; run++) {
        for (int i = 0; i < 32 * 32; i++)
            x[i] = (float)((i * 7 + run * 13) % 17) / 17.0f;
        arm();
        etch_status st = etch_method_set_input_tensor(L.m, 0, &t);
        if (st == ETCH_OK)
            st = etch_method_execute(L.m);
        const etch_value *out = etch_method_output(L.m, 0);
        float v = ((const float *)out->u.tensor->data)[0];
        disarm();
        CHECK_OK(st);
        CHECK_MSG(etch_alloc_calls == 0 && iface_calls == 0,
                  "LeNet execute %d allocated: %ld libc calls, %ld allocator calls", run, etch_alloc_calls,
                  iface_calls);
        if (run == 0)
            first = v;
        else
            CHECK_MSG(v != first || run == 0, "different inputs gave the same output");
    }
    etch_test_method_unload(&L);
}

static void test_dynamic(const char *path) {
    etch_test_method L;
    CHECK(load(path, ETCH_LOAD_MMAP, &L) == 0);
    if (!L.m)
        return;
    static float x[8 * 4];
    const int64_t rows[] = {8, 3, 5, 1};
    for (int run = 0; run < 4; run++) {
        int64_t sizes[2] = {rows[run], 4};
        for (int i = 0; i < 32; i++)
            x[i] = (float)(i % 5) - 2.0f;
        etch_tensor t;
        etch_tensor_init(&t, ETCH_DTYPE_FLOAT, 2, sizes, x);
        arm();
        etch_status st = etch_method_set_input_tensor(L.m, 0, &t);
        if (st == ETCH_OK)
            st = etch_method_execute(L.m);
        const etch_tensor *out = etch_method_output(L.m, 0)->u.tensor;
        int64_t n = etch_method_output(L.m, 1)->u.i;
        disarm();
        CHECK_OK(st);
        CHECK_MSG(etch_alloc_calls == 0 && iface_calls == 0,
                  "dynamic execute %d allocated: %ld libc calls, %ld allocator calls", run, etch_alloc_calls,
                  iface_calls);
        CHECK_MSG(out->sizes[0] == rows[run] && n == rows[run], "resize to %lld rows: got %lld/%lld",
                  (long long)rows[run], (long long)out->sizes[0], (long long)n);
        bool ok = true;
        for (int64_t i = 0; i < rows[run] * 4; i++) {
            float want = 2 * x[i] > 0 ? 2 * x[i] : 0;
            ok = ok && ((const float *)out->data)[i] == want;
        }
        CHECK_MSG(ok, "dynamic run %d: wrong values", run);
    }
    etch_test_method_unload(&L);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: test_alloc FIXTURES_DIR DYNAMIC.pte\n");
        return 2;
    }
#ifdef ALLOC_ASAN
    CHECK(__sanitizer_install_malloc_and_free_hooks(heap_malloc_hook, heap_free_hook) != 0);
#endif
    etch_kernels_register_portable();
    CHECK_OK(etch_kernels_register(test_kernels, 1));
    test_wrapper_counts(argv[1]);
    test_lenet(argv[1], ETCH_LOAD_MMAP);
    test_lenet(argv[1], ETCH_LOAD_READ);
    test_dynamic(argv[2]);
#ifdef ALLOC_ASAN
    CHECK_MSG(heap_hook_total > 0, "the sanitizer's malloc hook never fired");
#endif
    return etch_test_finish();
}
