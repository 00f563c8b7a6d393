/* XnnpackBackend on ExecuTorch's real XNNPACK-delegated files: outputs against the torch
 * reference (gen_golden.py / xnn_ref.py), bitwise equality across thread counts, and payloads
 * that lie (each refused by name, never a crash).
 *
 *   test_xnnpack GOLDEN_DIR FIXTURES_PTE_DIR NODES_DIR
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etch/backends.h"
#include "etch/etch.h"
#include "etch/kernels.h"
#include "etch/threadpool.h"
#include "etch_test.h"
#include "test_method.h"

#define TEMP (1 << 20)

static float *read_f32(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *d = malloc((size_t)size + 4);
    *n = fread(d, 1, (size_t)size, f) / 4;
    fclose(f);
    return d;
}

static unsigned char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *d = aligned_alloc(64, ((size_t)size + 64) / 64 * 64);
    *n = fread(d, 1, (size_t)size, f);
    fclose(f);
    return d;
}

#define MAX_IN 5
typedef struct input {
    float *x;
    int64_t dims[8];
    size_t rank;
} input;

/* kernel scratch per method: TEMP, or less to take the paths scratch cannot hold */
static size_t temp_bytes = TEMP;

/* Run `path` on the inputs with `threads` threads; output 0 copied to out. */
static int run_inputs(const char *path, const input *in, size_t nin, int threads, float *out,
                      size_t *nout) {
    etch_threadpool *pool = NULL;
    etch_method_options mo;
    memset(&mo, 0, sizeof mo);
    if (threads > 1) {
        if (etch_threadpool_create(threads, &pool) != ETCH_OK)
            return -1;
        mo.threadpool = etch_threadpool_get_iface(pool);
    }
    etch_test_method L;
    int rc = -1;
    if (etch_test_method_load(&L, path, NULL, &mo, temp_bytes) == 0) {
        etch_status st = ETCH_OK;
        for (size_t k = 0; k < nin && st == ETCH_OK; k++) {
            etch_tensor t;
            etch_tensor_init(&t, ETCH_DTYPE_FLOAT, in[k].rank, in[k].dims, in[k].x);
            st = etch_method_set_input_tensor(L.m, k, &t);
        }
        if (st == ETCH_OK)
            st = etch_method_execute(L.m);
        if (st == ETCH_OK) {
            const etch_value *o = etch_method_output(L.m, 0);
            size_t n = (size_t)etch_tensor_numel(o->u.tensor);
            memcpy(out, o->u.tensor->data, n * 4);
            *nout = n;
            rc = 0;
        } else {
            fprintf(stderr, "%s: %s\n", path, etch_last_error());
        }
    }
    etch_test_method_unload(&L);
    etch_threadpool_destroy(pool);
    return rc;
}

static int run_once(const char *path, const float *x, const int64_t *dims, size_t rank, int threads,
                    float *out, size_t *nout) {
    input in;
    in.x = (float *)(uintptr_t)x;
    in.rank = rank;
    memcpy(in.dims, dims, rank * sizeof *dims);
    return run_inputs(path, &in, 1, threads, out, nout);
}

/* Generated single-node graphs (gen_nodes.py) against the torch reference. */
static void node_cases(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/cases.txt", dir);
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "cannot read %s", path);
    if (!f)
        return;
    char line[1024];
    int cases = 0;
    while (fgets(line, sizeof line, f)) {
        char name[64];
        double tol;
        int nin = 0, used = 0;
        if (sscanf(line, "%63s %lf %d%n", name, &tol, &nin, &used) != 3 || nin < 1 ||
            nin > MAX_IN)
            continue;
        input in[MAX_IN];
        memset(in, 0, sizeof in);
        char *p = line + used, *end;
        bool ok = true;
        for (int k = 0; k < nin && ok; k++) {
            in[k].rank = (size_t)strtol(p, &end, 10);
            ok = end != p && in[k].rank <= 8;
            p = end;
            for (size_t d = 0; ok && d < in[k].rank; d++, p = end)
                in[k].dims[d] = strtol(p, &end, 10);
            size_t n = 0;
            snprintf(path, sizeof path, "%s/%s.in%d.f32", dir, name, k);
            in[k].x = read_f32(path, &n);
            ok = ok && in[k].x;
        }
        size_t ny = 0, no = 0, no2 = 0;
        snprintf(path, sizeof path, "%s/%s.out.f32", dir, name);
        float *y = read_f32(path, &ny);
        CHECK_MSG(ok && y, "%s: case data missing", name);
        if (ok && y) {
            float *o1 = calloc(ny + 16, 4), *o2 = calloc(ny + 16, 4);
            snprintf(path, sizeof path, "%s/%s.pte", dir, name);
            int rc = run_inputs(path, in, (size_t)nin, 1, o1, &no);
            CHECK_MSG(rc == 0 && no == ny, "%s: did not run (%zu of %zu outputs)", name, no, ny);
            double worst = 0;
            size_t at = 0;
            for (size_t i = 0; rc == 0 && i < ny && i < no; i++) {
                double d = fabs((double)o1[i] - y[i]);
                if (!(d <= worst)) {
                    worst = d;
                    at = i;
                }
            }
            CHECK_MSG(worst <= tol, "%s: max |etch - torch| = %g > %g at %zu (%g vs %g)", name,
                      worst, tol, at, (double)o1[at], (double)y[at]);
            CHECK_MSG(run_inputs(path, in, (size_t)nin, 2, o2, &no2) == 0 && no2 == no &&
                          memcmp(o1, o2, no * 4) == 0,
                      "%s: 2 threads differ from 1", name);
            if (strncmp(name, "net_", 4) == 0) {
                /* 4 KiB of kernel scratch: too little for the Winograd transforms or the
                 * padded input copies; the backend's own paths must give the same result */
                temp_bytes = 4096;
                double w2 = 0;
                rc = run_inputs(path, in, (size_t)nin, 1, o2, &no2);
                temp_bytes = TEMP;
                CHECK_MSG(rc == 0 && no2 == ny, "%s: did not run with 4 KiB of scratch", name);
                for (size_t i = 0; rc == 0 && i < ny; i++)
                    if (!(fabs((double)o2[i] - y[i]) <= w2))
                        w2 = fabs((double)o2[i] - y[i]);
                CHECK_MSG(w2 <= tol, "%s, 4 KiB of scratch: max error %g > %g", name, w2, tol);
                printf("node %-22s with 4 KiB of scratch: max error %.3g\n", name, w2);
            }
            printf("node %-22s max error %.3g (tol %g)\n", name, worst, tol);
            cases++;
            free(o1), free(o2);
        }
        free(y);
        for (int k = 0; k < nin; k++)
            free(in[k].x);
    }
    fclose(f);
    CHECK_MSG(cases >= 40, "only %d node cases", cases);
}

static void golden_cases(const char *golden, const char *fixtures) {
    char path[4096];
    snprintf(path, sizeof path, "%s/cases.txt", golden);
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "cannot read %s", path);
    if (!f)
        return;
    char line[512];
    int cases = 0;
    while (fgets(line, sizeof line, f)) {
        char name[64], fixture[128];
        double tol;
        int used = 0;
        if (sscanf(line, "%63s %127s %lf%n", name, fixture, &tol, &used) != 3)
            continue;
        int64_t dims[8];
        size_t rank = 0;
        char *p = line + used, *end;
        for (long v; rank < 8 && (v = strtol(p, &end, 10), end != p); p = end)
            dims[rank++] = v;
        size_t nx = 0, ny = 0, no = 0, no2 = 0;
        snprintf(path, sizeof path, "%s/%s.in.f32", golden, name);
        float *x = read_f32(path, &nx);
        snprintf(path, sizeof path, "%s/%s.out.f32", golden, name);
        float *y = read_f32(path, &ny);
        CHECK_MSG(x && y, "golden data of %s missing", name);
        if (!x || !y)
            continue;
        float *o1 = calloc(ny + 16, 4), *o2 = calloc(ny + 16, 4);
        snprintf(path, sizeof path, "%s/%s", fixtures, fixture);
        CHECK_MSG(run_once(path, x, dims, rank, 1, o1, &no) == 0, "%s did not run", name);
        CHECK_MSG(no == ny, "%s: %zu outputs, want %zu", name, no, ny);
        double worst = 0;
        for (size_t i = 0; i < ny && i < no; i++) {
            double d = fabs((double)o1[i] - y[i]);
            worst = d > worst ? d : worst;
        }
        CHECK_MSG(worst <= tol, "%s: max |etch - torch reference| = %g > %g", name, worst, tol);
        /* two threads: the same bits */
        CHECK_MSG(run_once(path, x, dims, rank, 2, o2, &no2) == 0 && no2 == no &&
                      memcmp(o1, o2, no * 4) == 0,
                  "%s: 2 threads differ from 1", name);
        printf("%-10s %-26s max error %.3g (tol %g)\n", name, fixture, worst, tol);
        cases++;
        free(x), free(y), free(o1), free(o2);
    }
    fclose(f);
    CHECK_MSG(cases >= 6, "only %d golden cases", cases);
}

/* The payload of clamp5 with one change; its load must fail with `want`, the message
 * containing `needle`. */
static void lying_payload(const unsigned char *orig, size_t size, size_t at, const void *bytes,
                          size_t nbytes, etch_status want, const char *needle) {
    unsigned char *d = aligned_alloc(64, (size + 64) / 64 * 64);
    memcpy(d, orig, size);
    memcpy(d + at, bytes, nbytes);
    etch_program *p = NULL;
    etch_method_meta meta;
    etch_status st = etch_program_open_buffer(d, size, NULL, &p);
    if (st == ETCH_OK)
        st = etch_program_method_meta(p, "forward", &meta);
    if (st == ETCH_OK) {
        size_t ps = etch_method_meta_pool_size(&meta), as = etch_method_meta_arena_size(&meta, 0);
        void *pool = aligned_alloc(64, (ps + 64) / 64 * 64), *arena = aligned_alloc(64, (as + 64) / 64 * 64);
        void *arenas[1] = {arena};
        size_t sizes[1] = {as};
        etch_method_memory mem = {pool, ps, arenas, sizes, etch_method_meta_num_arenas(&meta),
                                  NULL, 0};
        etch_method *m = NULL;
        st = etch_method_load(p, "forward", &mem, NULL, &m);
        etch_method_free(m);
        free(pool);
        free(arena);
    }
    CHECK_MSG(st == want && strstr(etch_last_error(), needle) != NULL,
              "got %s '%s', want %s with '%s'", etch_status_str(st), etch_last_error(),
              etch_status_str(want), needle);
    etch_program_close(p);
    free(d);
}

static void bad_payloads(const char *fixtures) {
    char path[4096];
    snprintf(path, sizeof path, "%s/xnnpack_clamp5.pte", fixtures);
    size_t n = 0;
    unsigned char *d = read_all(path, &n);
    CHECK(d != NULL);
    if (!d)
        return;
    size_t h = 0;
    for (size_t i = 0; i + 4 <= n; i++)
        if (memcmp(d + i, "XH00", 4) == 0) {
            h = i - 4;
            break;
        }
    CHECK(h > 0);
    uint32_t fo = (uint32_t)(d[h + 10] | d[h + 11] << 8 | d[h + 12] << 16 | (uint32_t)d[h + 13] << 24);
    lying_payload(d, n, h + fo + 4, "XN99", 4, ETCH_ERR_INCOMPATIBLE_VERSION, "'XN99'");
    uint32_t huge = 0x7fffffffu;
    lying_payload(d, n, h + 14, &huge, 4, ETCH_ERR_INVALID_PROGRAM, "flatbuffer range");
    lying_payload(d, n, h + 18, &huge, 4, ETCH_ERR_INVALID_PROGRAM, "constant data range");
    uint16_t hl = 7;
    lying_payload(d, n, h + 8, &hl, 2, ETCH_ERR_INVALID_PROGRAM, "header length 7");
    /* the magic gone: read as a header-less graph, whose identifier then is wrong */
    lying_payload(d, n, h + 4, "XX00", 4, ETCH_ERR_INCOMPATIBLE_VERSION, "not XN00 or XN01");
    free(d);
}

static void unregistered(const char *fixtures) {
    char path[4096];
    snprintf(path, sizeof path, "%s/xnnpack_clamp5.pte", fixtures);
    etch_backends_reset();
    etch_test_method L;
    CHECK(etch_test_method_load(&L, path, NULL, NULL, 0) != 0);
    CHECK_MSG(strstr(etch_last_error(), "XnnpackBackend") != NULL, "%s", etch_last_error());
    etch_test_method_unload(&L);
    CHECK_OK(etch_backends_register_builtin());
}

/* forward delegates to XnnpackBackend; fallback.pte also carries forward__cpu. */
static void fallback(const char *nodes) {
    char path[4096];
    float a[12], b[12], out[16];
    for (int i = 0; i < 12; i++)
        a[i] = (float)i * 0.5f, b[i] = 3.0f - (float)i;
    input in[2] = {{a, {3, 4}, 2}, {b, {3, 4}, 2}};
    size_t n = 0;
    snprintf(path, sizeof path, "%s/fallback.pte", nodes);
    for (int round = 0; round < 2; round++) {
        if (round == 1)
            etch_backends_reset();
        etch_program *p = NULL;
        etch_method_meta meta;
        CHECK_OK(etch_program_open_file(path, NULL, &p));
        CHECK_OK(etch_program_method_meta(p, "forward", &meta));
        if (round == 0)
            CHECK(meta.fallback_from == NULL && strcmp(etch_method_meta_name(&meta), "forward") == 0);
        else
            CHECK(meta.fallback_from && strcmp(meta.fallback_from, "forward") == 0 &&
                  strcmp(etch_method_meta_name(&meta), "forward__cpu") == 0);
        CHECK(etch_method_meta_backends_available(&meta));
        etch_program_close(p);
        memset(out, 0, sizeof out);
        CHECK_MSG(run_inputs(path, in, 2, 1, out, &n) == 0 && n == 12, "round %d", round);
        bool same = true;
        for (int i = 0; i < 12; i++)
            same = same && out[i] == a[i] + b[i];
        CHECK_MSG(same, "round %d: forward(a, b) != a + b", round);
    }
    /* no twin: the load names the backend */
    snprintf(path, sizeof path, "%s/no_fallback.pte", nodes);
    etch_test_method L;
    CHECK(etch_test_method_load(&L, path, NULL, NULL, 0) != 0);
    CHECK_MSG(strstr(etch_last_error(), "backend 'XnnpackBackend' (delegate 0) is not registered"),
              "%s", etch_last_error());
    etch_test_method_unload(&L);
    CHECK_OK(etch_backends_register_builtin());
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s GOLDEN_DIR FIXTURES_PTE_DIR NODES_DIR\n", argv[0]);
        return 2;
    }
    CHECK_OK(etch_kernels_register_optimized());
    CHECK_OK(etch_backends_register_builtin());
    golden_cases(argv[1], argv[2]);
    node_cases(argv[3]);
    fallback(argv[3]);
    bad_payloads(argv[2]);
    unregistered(argv[2]);
    return etch_test_finish();
}
