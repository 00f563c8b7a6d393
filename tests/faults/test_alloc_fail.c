/*
 * Allocation-failure testing, SQLite style. Every allocation function the library calls
 * (malloc, calloc, realloc, aligned_alloc, posix_memalign, mmap) is wrapped at link time
 * (harness/alloc_wrap.h); for each operation below and for k = 1, 2, ... the k-th allocation
 * attempt of the operation fails (NULL / ENOMEM / MAP_FAILED), until a run makes fewer than k
 * attempts and so succeeds with no failure injected. For each k the operation must
 *   - fail with ETCH_ERR_MEMORY_ALLOCATION_FAILED (DELEGATE_MEMORY_ALLOCATION_FAILED inside a
 *     backend) and a new error message, or succeed with the result of a clean run (a
 *     failure the library may absorb, e.g. an optional cache); never crash;
 *   - leave every out-parameter NULL/empty when it fails;
 *   - leak nothing: the wrappers count live blocks and mappings (any build), and the sanitizer
 *     build runs with LeakSanitizer;
 *   - succeed when retried at once with no failure injected, with the clean run's result.
 * An operation is a whole sequence (open, load, execute, read the outputs, close; or open a
 * tokenizer, encode, decode, close; or open the LLM runner, generate, close); its result is a
 * 64-bit FNV-1a hash of every output byte, shape, id and stop reason it produced.
 *
 * Usage: test_alloc_fail FIXTURES TMPDIR [LLM_PTE LLM_TOKENIZER]...
 *   FIXTURES: ../shared/fixtures; TMPDIR: for the .npy files; then language models and their
 *   tokenizers: the first (the build exports stories260K) runs from the file's mapping on 1
 *   and 2 threads, the others (models/default, a chat-template model) read into memory, on 1.
 *   Environment: ETCH_FAULTS_ONLY=TEXT runs the operations whose name contains TEXT;
 *   ETCH_FAULTS_K_LIMIT caps k; ETCH_FAULTS_VERBOSE=1 prints each k's status and message.
 * Prints one line per operation (k values tried, failures injected, how many were absorbed)
 * and a closing table in Markdown (tests/faults/REPORT.md; tests/faults/gen_report.sh).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <etch/bundled.h>
#include <etch/etch.h>
#include <etch/llm.h>
#include <etch/llm_runner.h>
#include <etch/module.h>
#include <etch/npy.h>
#include <etch/store.h>

#include "alloc_wrap.h"
#include "etch_test.h"
#include "test_file.h"

/* ------------------------------------------------------------------ results ----------- */

typedef struct result {
    uint64_t h;     /* FNV-1a over everything the operation produced */
    uint64_t bytes; /* bytes hashed */
} result;

static void res_init(result *r) {
    r->h = 1469598103934665603ull;
    r->bytes = 0;
}
static void res_add(result *r, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        r->h ^= b[i];
        r->h *= 1099511628211ull;
    }
    r->bytes += n;
}
static void res_u64(result *r, uint64_t v) { res_add(r, &v, sizeof v); }

/* ------------------------------------------------------------------ files ------------- */

static const char *fixtures, *tmpdir = "/tmp";

/* The whole file, read with the wrappers disarmed (test memory, freed by the caller). */
static unsigned char *slurp(const char *path, size_t *size) {
    return (unsigned char *)etch_test_read_file(path, 0, size);
}

static char *fixture(char *buf, size_t cap, const char *rel) {
    snprintf(buf, cap, "%s/%s", fixtures, rel);
    return buf;
}

/* ------------------------------------------------------------------ methods ----------- */

/* Test-owned input memory: a method's inputs are bound to these (no test allocation happens
 * while the failure injection window is open). */
static unsigned char input_mem[8][1 << 18];

/* Deterministic input values by dtype. */
static void fill(void *data, int dtype, int64_t n, unsigned seed) {
    for (int64_t j = 0; j < n; j++) {
        int v = (int)((j * 7 + seed * 3) % 13) - 6;
        switch (dtype) {
        case ETCH_DTYPE_FLOAT: ((float *)data)[j] = (float)v * 0.25f; break;
        case ETCH_DTYPE_DOUBLE: ((double *)data)[j] = v * 0.25; break;
        case ETCH_DTYPE_LONG: ((int64_t *)data)[j] = v + 7; break;
        case ETCH_DTYPE_INT: ((int32_t *)data)[j] = v + 7; break;
        case ETCH_DTYPE_SHORT: ((int16_t *)data)[j] = (int16_t)(v + 7); break;
        case ETCH_DTYPE_CHAR: ((int8_t *)data)[j] = (int8_t)v; break;
        case ETCH_DTYPE_BYTE: ((uint8_t *)data)[j] = (uint8_t)(v + 7); break;
        case ETCH_DTYPE_BOOL: ((uint8_t *)data)[j] = (uint8_t)(j & 1); break;
        default: memset(data, 0, (size_t)n * etch_dtype_size(dtype)); return;
        }
    }
}

/* Inputs of `m`: tensors get the pattern above (a dynamic tensor the shape `dyn`, when
 * given, else its bound), Int/Bool/Double the value they were exported with. */
static etch_status set_inputs(etch_method *m, const int64_t *dyn, size_t dyn_dim) {
    const etch_method_meta *meta = etch_method_get_meta(m);
    size_t n = etch_method_num_inputs(m);
    for (size_t i = 0; i < n; i++) {
        etch_value_info info;
        etch_status st = etch_method_meta_input(meta, i, &info);
        if (st != ETCH_OK)
            return st;
        if (info.tag == ETCH_VALUE_TENSOR) {
            etch_tensor t;
            const int64_t *sizes = info.sizes;
            size_t dim = info.dim;
            if (info.dynamism != ETCH_SHAPE_STATIC && dyn && dyn_dim == info.dim)
                sizes = dyn;
            if (i >= 8)
                return ETCH_ERR_OUT_OF_RESOURCES;
            if ((st = etch_tensor_init(&t, (etch_dtype)info.dtype, dim, sizes, input_mem[i])) !=
                ETCH_OK)
                return st;
            if (etch_tensor_nbytes(&t) > sizeof input_mem[i]) {
                fprintf(stderr, "input %zu: %zu bytes do not fit the test's buffer\n", i,
                        etch_tensor_nbytes(&t));
                return ETCH_ERR_OUT_OF_RESOURCES;
            }
            fill(t.data, info.dtype, etch_tensor_numel(&t), (unsigned)i);
            st = etch_method_set_input_tensor(m, i, &t);
        } else if (info.tag == ETCH_VALUE_INT || info.tag == ETCH_VALUE_BOOL ||
                   info.tag == ETCH_VALUE_DOUBLE) {
            etch_value v;
            memset(&v, 0, sizeof v);
            v.tag = info.tag;
            if (info.tag == ETCH_VALUE_INT)
                v.u.i = info.int_val;
            else if (info.tag == ETCH_VALUE_BOOL)
                v.u.b = info.int_val != 0;
            else
                v.u.d = info.double_val;
            st = etch_method_set_input(m, i, &v);
        } else {
            etch_value v;
            memset(&v, 0, sizeof v);
            st = etch_method_set_input(m, i, &v); /* None */
        }
        if (st != ETCH_OK)
            return st;
    }
    return ETCH_OK;
}

/* Hash every output: tag, dtype, shape and the elements in logical order. */
static void hash_outputs(const etch_method *m, result *r) {
    size_t n = etch_method_num_outputs(m);
    res_u64(r, n);
    for (size_t i = 0; i < n; i++) {
        const etch_value *v = etch_method_output(m, i);
        res_u64(r, v ? v->tag : 99);
        if (!v)
            continue;
        if (v->tag == ETCH_VALUE_TENSOR) {
            const etch_tensor *t = v->u.tensor;
            res_u64(r, t->dtype);
            res_u64(r, t->dim);
            for (size_t d = 0; d < t->dim; d++)
                res_u64(r, (uint64_t)t->sizes[d]);
            /* elements in logical (C) order, whatever the dim order */
            size_t es = etch_dtype_size(t->dtype);
            int64_t numel = etch_tensor_numel(t);
            for (int64_t e = 0; e < numel; e++) {
                int64_t rem = e, off = 0;
                for (size_t d = t->dim; d-- > 0;) {
                    off += (rem % t->sizes[d]) * t->strides[d];
                    rem /= t->sizes[d];
                }
                res_add(r, (const unsigned char *)t->data + (size_t)off * es, es);
            }
        } else if (v->tag == ETCH_VALUE_INT) {
            res_u64(r, (uint64_t)v->u.i);
        } else if (v->tag == ETCH_VALUE_DOUBLE) {
            res_add(r, &v->u.d, sizeof v->u.d);
        }
    }
}

/* ------------------------------------------------------------------ operations -------- */

/* The operation running and its k, for messages; failures a step absorbed by retrying at once
 * on the same object (no failure is injected twice in a run); problems found by the steps. */
static const char *cur_name;
static long cur_k, in_place_retries, step_problems;

/* A status for an allocation failure: MemoryAllocationFailed (a backend's own variant too), and
 * a message set by the call (not the sentinel the driver leaves before each run). */
static const char *sentinel_msg = "module_open: NULL argument";
static void check_failure(const char *what, etch_status st) {
    if (st != ETCH_ERR_MEMORY_ALLOCATION_FAILED && st != ETCH_ERR_DELEGATE_MEMORY_ALLOCATION_FAILED) {
        step_problems++;
        CHECK_MSG(0, "%s, k=%ld: %s: status %s for an allocation failure (%s)", cur_name, cur_k,
                  what, etch_status_str(st), etch_last_error());
    }
    if (etch_last_error()[0] == 0 || strcmp(etch_last_error(), sentinel_msg) == 0) {
        step_problems++;
        CHECK_MSG(0, "%s, k=%ld: %s: %s without a message", cur_name, cur_k, what,
                  etch_status_str(st));
    }
}

/* A check inside an operation: counted as a problem of the operation. */
#define STEP_CHECK(cond, ...)            \
    do {                                 \
        if (!(cond))                     \
            step_problems++;             \
        CHECK_MSG(cond, __VA_ARGS__);    \
    } while (0)

/* Retry a step that just failed for the injected failure, on the same object: the failure must
 * have left it as it was (the rest of the operation then gives the clean result). */
#define RETRY_IN_PLACE(enabled, what, st, call)                 \
    do {                                                        \
        if ((enabled) && (st) != ETCH_OK && etch_alloc_injected) { \
            check_failure(what, st);                            \
            (st) = (call);                                      \
            in_place_retries += (st) == ETCH_OK;                \
        }                                                       \
    } while (0)

/* A problem of the test itself (a fixture too large for its buffers). */
static etch_status test_fail(const char *what) {
    fprintf(stderr, "test: %s\n", what);
    return ETCH_ERR_INTERNAL;
}

typedef etch_status (*op_fn)(const void *ctx, result *r);

/* (a) the module API: open (file or buffer), load a method, set inputs, execute (twice),
 * read the outputs, close. */
typedef struct module_case {
    const char *file;    /* fixture, relative to FIXTURES */
    const char *ptd;     /* optional .ptd */
    etch_load_mode mode;
    int threads;
    bool from_buffer;    /* etch_module_open_buffer over a copy at an odd address */
    bool in_place;       /* a failed load_method is retried at once on the same module */
    int64_t dyn[4];      /* the dynamic input's shape, when dyn_dim */
    size_t dyn_dim;
    unsigned char *buf;  /* from_buffer: the file's bytes (test memory) */
    size_t size;
} module_case;

static etch_status op_module(const void *vctx, result *r) {
    const module_case *c = vctx;
    char path[4096], ptd[4096];
    etch_module_options o = etch_module_default_options();
    o.load_mode = c->mode;
    o.num_threads = c->threads;
    o.temp_size = (size_t)1 << 20;
    if (c->ptd)
        o.data_path = fixture(ptd, sizeof ptd, c->ptd);
    etch_module *mod = NULL;
    etch_status st;
    if (c->from_buffer)
        st = etch_module_open_buffer(c->buf + 1, c->size, &o, &mod);
    else
        st = etch_module_open(fixture(path, sizeof path, c->file), &o, &mod);
    if (st != ETCH_OK) {
        STEP_CHECK(mod == NULL, "%s: module handle set on failure", c->file);
        return st;
    }
    const char *name = NULL;
    etch_method *m = NULL;
    if ((st = etch_module_default_method(mod, &name)) != ETCH_OK)
        goto out;
    st = etch_module_load_method(mod, name, &m);
    if (st != ETCH_OK)
        STEP_CHECK(m == NULL, "%s: method handle set on failure", c->file);
    RETRY_IN_PLACE(c->in_place, "etch_module_load_method", st,
                   etch_module_load_method(mod, name, &m));
    if (st == ETCH_OK && (st = set_inputs(m, c->dyn, c->dyn_dim)) == ETCH_OK &&
        (st = etch_method_execute(m)) == ETCH_OK && (st = etch_method_execute(m)) == ETCH_OK) {
        res_u64(r, etch_module_num_threads(mod));
        hash_outputs(m, r);
    }
out:
    etch_module_close(mod);
    return st;
}

/* (a) the core API: etch_program_open_file + etch_method_load on test-owned memory. */
static unsigned char core_pool[1 << 20] __attribute__((aligned(64)));
static unsigned char core_arena[4][1 << 20] __attribute__((aligned(64)));
static unsigned char core_temp[1 << 20] __attribute__((aligned(64)));

static etch_status op_core(const void *vctx, result *r) {
    const module_case *c = vctx;
    char path[4096];
    etch_program_options po = etch_program_default_options();
    po.load_mode = c->mode;
    etch_program *p = NULL;
    etch_status st = c->from_buffer
                         ? etch_program_open_buffer(c->buf + 1, c->size, &po, &p)
                         : etch_program_open_file(fixture(path, sizeof path, c->file), &po, &p);
    if (st != ETCH_OK) {
        STEP_CHECK(p == NULL, "%s: program handle set on failure", c->file);
        return st;
    }
    etch_method_meta meta;
    etch_method *m = NULL;
    if ((st = etch_program_method_meta(p, "forward", &meta)) != ETCH_OK)
        goto out;
    size_t na = etch_method_meta_num_arenas(&meta);
    void *arenas[4];
    size_t sizes[4];
    if (na > 4 || etch_method_meta_pool_size(&meta) > sizeof core_pool) {
        st = test_fail("the method's pool or arenas do not fit the test's buffers");
        goto out;
    }
    for (size_t j = 0; j < na; j++) {
        arenas[j] = core_arena[j];
        sizes[j] = etch_method_meta_arena_size(&meta, j);
        if (sizes[j] > sizeof core_arena[j]) {
            st = test_fail("an arena does not fit the test's buffer");
            goto out;
        }
    }
    etch_method_memory mem;
    memset(&mem, 0, sizeof mem);
    mem.pool = core_pool;
    mem.pool_size = etch_method_meta_pool_size(&meta);
    mem.arenas = arenas;
    mem.arena_sizes = sizes;
    mem.num_arenas = na;
    mem.temp = core_temp;
    mem.temp_size = sizeof core_temp;
    if ((st = etch_method_load(p, "forward", &mem, NULL, &m)) != ETCH_OK) {
        STEP_CHECK(m == NULL, "%s: method handle set on failure", c->file);
        goto out;
    }
    if ((st = set_inputs(m, c->dyn, c->dyn_dim)) == ETCH_OK &&
        (st = etch_method_execute(m)) == ETCH_OK)
        hash_outputs(m, r);
out:
    etch_method_free(m);
    etch_program_close(p);
    return st;
}

/* (a) a bundled program: parse the BP08 wrapper, open its program through the module API,
 * run every test case and verify its outputs. */
typedef struct bundled_case {
    const char *file;
    unsigned char *buf;
    size_t size;
} bundled_case;

static etch_status op_bundled(const void *vctx, result *r) {
    const bundled_case *c = vctx;
    etch_bundled *b = NULL;
    etch_module *mod = NULL;
    etch_status st = etch_bundled_open_buffer(c->buf, c->size, &b);
    if (st != ETCH_OK) {
        STEP_CHECK(b == NULL, "%s: bundled handle set on failure", c->file);
        return st;
    }
    size_t psize = 0;
    const void *prog = etch_bundled_program(b, &psize);
    etch_module_options o = etch_module_default_options();
    o.temp_size = (size_t)1 << 20;
    etch_method *m = NULL;
    const char *method = etch_bundled_suite_method(b, 0);
    if ((st = etch_module_open_buffer(prog, psize, &o, &mod)) != ETCH_OK ||
        (st = etch_module_load_method(mod, method, &m)) != ETCH_OK)
        goto out;
    size_t n = etch_bundled_num_cases(b, method);
    res_u64(r, n);
    for (size_t i = 0; i < n; i++) {
        etch_bundled_report rep;
        if ((st = etch_bundled_load_inputs(b, m, i)) != ETCH_OK ||
            (st = etch_method_execute(m)) != ETCH_OK ||
            (st = etch_bundled_verify_outputs(b, m, i, 1e-3, 1e-5, &rep)) != ETCH_OK)
            goto out;
        hash_outputs(m, r);
    }
out:
    etch_module_close(mod);
    etch_bundled_close(b);
    return st;
}

/* (a) .npy: write a tensor, read it back from the file and from a buffer. */
typedef struct npy_case {
    int dtype;
    size_t dim;
    int64_t sizes[4];
    unsigned char *file_bytes; /* a .npy written at setup (test memory) */
    size_t file_size;
    char path[4096];     /* read by the operation */
    char out_path[4096]; /* written by the operation */
} npy_case;

static etch_status op_npy(const void *vctx, result *r) {
    const npy_case *c = vctx;
    etch_npy a, b, w;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    memset(&w, 0, sizeof w);
    etch_status st = etch_npy_read_file(c->path, &a);
    if (st != ETCH_OK) {
        STEP_CHECK(a.tensor.data == NULL, "npy: data set on failure");
        return st;
    }
    if ((st = etch_npy_read_buffer(c->file_bytes, c->file_size, &b)) != ETCH_OK) {
        STEP_CHECK(b.tensor.data == NULL, "npy: data set on failure");
        goto out;
    }
    STEP_CHECK(etch_tensor_nbytes(&a.tensor) == etch_tensor_nbytes(&b.tensor) &&
                   memcmp(a.tensor.data, b.tensor.data, etch_tensor_nbytes(&a.tensor)) == 0,
               "npy: the file and the buffer read differently");
    res_u64(r, a.tensor.dtype);
    for (size_t d = 0; d < a.tensor.dim; d++)
        res_u64(r, (uint64_t)a.tensor.sizes[d]);
    res_add(r, a.tensor.data, etch_tensor_nbytes(&a.tensor));
    /* a failed write removes the file: none is left behind */
    if ((st = etch_npy_write_file(c->out_path, &a.tensor)) != ETCH_OK) {
        STEP_CHECK(access(c->out_path, F_OK) != 0, "npy: '%s' left behind by a failed write",
                  c->out_path);
        goto out;
    }
    etch_value s;
    memset(&s, 0, sizeof s);
    s.tag = ETCH_VALUE_STRING;
    s.u.str.ptr = "caf\xc3\xa9 \xe2\x82\xac";
    s.u.str.len = strlen(s.u.str.ptr);
    char spath[4200];
    snprintf(spath, sizeof spath, "%s.str.npy", c->out_path);
    st = etch_npy_write_value(spath, &s);
    if (st != ETCH_OK) {
        STEP_CHECK(access(spath, F_OK) != 0, "npy: '%s' left behind by a failed write", spath);
        goto out;
    }
    remove(spath);
    if ((st = etch_npy_read_file(c->out_path, &w)) != ETCH_OK)
        goto out;
    res_add(r, w.tensor.data, etch_tensor_nbytes(&w.tensor));
out:
    remove(c->out_path);
    etch_npy_free(&a);
    etch_npy_free(&b);
    etch_npy_free(&w);
    return st;
}

/* the model store: open a new store, install a file with its tokenizer and then a buffer
 * (the previous version kept), serve the current version with the full check, list */
typedef struct store_case {
    char dir[4200];
    char pte[4200], tok[4200];
    unsigned char *bytes;
    size_t size;
} store_case;

static etch_status op_store(const void *vctx, result *r) {
    const store_case *c = vctx;
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", c->dir);
    if (system(cmd) != 0)
        return test_fail("cannot clear the store directory");
    etch_store *s = NULL;
    etch_status st = etch_store_open(c->dir, NULL, &s);
    if (st != ETCH_OK) {
        STEP_CHECK(s == NULL, "store: handle set on failure");
        return st;
    }
    etch_store_install_options io = etch_store_default_install_options();
    io.tokenizer_path = c->tok;
    char v1[ETCH_STORE_NAME_MAX + 1], v2[ETCH_STORE_NAME_MAX + 1];
    etch_store_served sv;
    etch_store_entry *e = NULL;
    size_t n = 0;
    if ((st = etch_store_install_file(s, "m", c->pte, &io, v1)) != ETCH_OK)
        goto out;
    etch_store_buffers b;
    memset(&b, 0, sizeof b);
    b.data[ETCH_STORE_PTE] = c->bytes;
    b.size[ETCH_STORE_PTE] = c->size;
    if ((st = etch_store_install_buffer(s, "m", &b, NULL, v2)) != ETCH_OK)
        goto out;
    etch_store_open_options oo = etch_store_default_open_options();
    oo.check = ETCH_STORE_CHECK_FULL;
    if ((st = etch_store_open_model(s, "m", &oo, &sv)) != ETCH_OK)
        goto out;
    STEP_CHECK(sv.origin == ETCH_STORE_SERVED_CURRENT && !strcmp(sv.version, v2),
               "store: served %s (%s)", sv.version, sv.message);
    res_add(r, sv.version, strlen(sv.version));
    if ((st = etch_store_list(s, &e, &n)) != ETCH_OK)
        goto out;
    res_u64(r, n);
    if (n)
        res_add(r, e[0].previous, strlen(e[0].previous));
    free(e);
out:
    etch_store_close(s);
    return st;
}

/* (b) tokenizers: open (file or buffer), encode a few texts, decode them whole and token by
 * token through a detokenizer, close. */
typedef struct tok_case {
    const char *label;
    const char *file;          /* a fixture (relative to FIXTURES), or NULL: `bytes` */
    const char *bytes;         /* an inline tokenizer */
    size_t size;
    etch_tokenizer_params params;
} tok_case;

static const char *const texts[] = {
    "Once upon a time, there was a little girl named Lily.",
    "  leading spaces, caf\xc3\xa9, na\xc3\xafve \xe2\x82\xac 12345 \xf0\x9f\x98\x80!\n\ttabs",
    "ab abc ab [NAME] the end<|endoftext|>",
    "",
};

static etch_status encode_decode(etch_tokenizer *t, result *r) {
    static int32_t ids[512];
    static char text[4096];
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        size_t n = 0, len = 0;
        etch_status st = etch_tokenizer_encode(t, texts[i], strlen(texts[i]),
                                               ETCH_TOKENIZER_ADD_BOS | ETCH_TOKENIZER_PARSE_SPECIAL,
                                               ids, 512, &n);
        if (st != ETCH_OK)
            return st;
        res_u64(r, n);
        res_add(r, ids, n * sizeof *ids);
        if ((st = etch_tokenizer_decode(t, ids, n, text, sizeof text, &len)) != ETCH_OK)
            return st;
        res_add(r, text, len);
        etch_detokenizer d;
        etch_detokenizer_init(&d, t);
        for (size_t j = 0; j < n; j++) {
            if ((st = etch_detokenizer_feed(&d, ids[j], text, sizeof text, &len)) != ETCH_OK)
                return st;
            res_add(r, text, len);
        }
        if ((st = etch_detokenizer_flush(&d, text, sizeof text, &len)) != ETCH_OK)
            return st;
        res_add(r, text, len);
    }
    res_u64(r, (uint64_t)etch_tokenizer_vocab_size(t));
    res_u64(r, (uint64_t)(int64_t)etch_tokenizer_bos_id(t));
    res_u64(r, (uint64_t)(int64_t)etch_tokenizer_eos_id(t));
    return ETCH_OK;
}

static etch_status op_tokenizer(const void *vctx, result *r) {
    const tok_case *c = vctx;
    char path[4096];
    etch_tokenizer *t = NULL;
    etch_status st =
        c->file ? etch_tokenizer_open_file(fixture(path, sizeof path, c->file), &c->params, &t)
                : etch_tokenizer_open_buffer(c->bytes, c->size, &c->params, &t);
    if (st != ETCH_OK) {
        STEP_CHECK(t == NULL, "%s: tokenizer handle set on failure", c->label);
        return st;
    }
    res_u64(r, etch_tokenizer_get_format(t));
    st = encode_decode(t, r);
    etch_tokenizer_close(t);
    return st;
}

/* (c) the LLM runner: open on the model with its tokenizer (opened beforehand, outside the
 * failure window), generate greedily, then with a new sampler, then with a chat turn. */
typedef struct llm_case {
    const char *pte;
    etch_tokenizer *tok;
    int threads;
    etch_load_mode mode;
} llm_case;

typedef struct llm_stream {
    result *r;
} llm_stream;

static int on_token(void *ud, int32_t id, const char *text, size_t len) {
    llm_stream *s = ud;
    res_u64(s->r, (uint64_t)(int64_t)id);
    res_add(s->r, text, len);
    return 0;
}

static etch_status op_llm(const void *vctx, result *r) {
    const llm_case *c = vctx;
    etch_llm_runner_options o = etch_llm_runner_default_options();
    o.sampler.temperature = 0;
    o.num_threads = c->threads;
    o.load_mode = c->mode;
    o.temp_size = (size_t)1 << 20;
    etch_llm_runner *run = NULL;
    etch_status st = etch_llm_runner_open(c->pte, c->tok, &o, &run);
    if (st != ETCH_OK) {
        STEP_CHECK(run == NULL, "llm: runner handle set on failure");
        return st;
    }
    const etch_llm_chat_template *tmpl = etch_llm_runner_chat_template(run);
    if (tmpl) {
        const char *parts[] = {tmpl->conversation_prefix, tmpl->system_prefix,
                               tmpl->system_suffix,       tmpl->user_prefix,
                               tmpl->user_suffix,         tmpl->assistant_prefix,
                               tmpl->assistant_suffix,    tmpl->default_system};
        for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
            res_add(r, parts[i], strlen(parts[i]) + 1);
    }
    llm_stream s = {r};
    etch_llm_generate_params gp = etch_llm_generate_default_params();
    gp.max_new_tokens = 6;
    gp.on_token = on_token;
    gp.user_data = &s;
    etch_llm_result res;
    const char *prompt = "Once upon a time";
    if ((st = etch_llm_runner_generate(run, prompt, strlen(prompt), &gp, &res)) != ETCH_OK)
        goto out;
    res_u64(r, res.stop_reason);
    res_u64(r, (uint64_t)res.position);
    /* a second turn on the kept cache */
    if ((st = etch_llm_runner_generate(run, " Lily", 5, &gp, &res)) != ETCH_OK)
        goto out;
    res_u64(r, res.stop_reason);
    res_u64(r, (uint64_t)res.position);
    /* a new sampler (it allocates), a new conversation */
    etch_sampler_params sp = etch_sampler_default_params();
    sp.temperature = 0.8f;
    sp.top_p = 0.9f;
    sp.seed = 42;
    /* a failed set_sampler keeps the old sampler: setting it again works */
    st = etch_llm_runner_set_sampler(run, &sp);
    RETRY_IN_PLACE(true, "etch_llm_runner_set_sampler", st, etch_llm_runner_set_sampler(run, &sp));
    if (st != ETCH_OK)
        goto out;
    etch_llm_runner_reset(run);
    gp.max_new_tokens = 4;
    if ((st = etch_llm_runner_generate(run, prompt, strlen(prompt), &gp, &res)) != ETCH_OK)
        goto out;
    res_u64(r, res.stop_reason);
    res_u64(r, (uint64_t)res.generated_tokens);
out:
    etch_llm_runner_close(run);
    return st;
}

/* ------------------------------------------------------------------ the driver -------- */

typedef struct op_stats {
    const char *name;
    bool persistent;     /* every attempt from k on failed */
    long clean_attempts; /* allocation attempts of a clean run */
    long k_tried;        /* k values run (the last one injects nothing) */
    long injected;       /* runs in which a failure was injected */
    long absorbed;       /* of those, runs that still succeeded (with the clean result) */
    long in_place;       /* of those, runs whose failed step was retried on the same object */
    long problems;
    double seconds;
} op_stats;

#define MAX_OPS 160 /* runs of the loop: operations x 2 passes */
static op_stats stats[MAX_OPS];
static size_t n_stats;
static long k_limit = 200000;
static bool verbose; /* ETCH_FAULTS_VERBOSE: each k's status and message */
static bool persistent; /* the pass running: every attempt from k on fails */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A message that no operation writes, set before each run: a failure must replace it. */
static void set_sentinel(void) {
    etch_module *m = NULL;
    (void)etch_module_open(NULL, NULL, &m); /* sentinel_msg */
    CHECK(strcmp(etch_last_error(), sentinel_msg) == 0);
}

/* One run with failure number k injected (0: none). Checks that nothing leaked. */
static etch_status run_once(const char *name, op_fn fn, const void *ctx, long k, result *r,
                            long *attempts, long *injected, op_stats *s) {
    res_init(r);
    set_sentinel();
    cur_name = name;
    cur_k = k;
    in_place_retries = step_problems = 0;
    long live0 = etch_alloc_live;
    if (persistent)
        etch_alloc_fault_arm_persistent(k);
    else
        etch_alloc_fault_arm(k);
    etch_status st = fn(ctx, r);
    etch_alloc_fault_disarm();
    *attempts = etch_alloc_attempts;
    *injected = etch_alloc_injected;
    s->problems += step_problems;
    s->in_place += in_place_retries;
    if (etch_alloc_live != live0) {
        s->problems++;
        CHECK_MSG(etch_alloc_live == live0, "%s, k=%ld: %ld blocks leaked (status %s: %s)", name,
                  k, etch_alloc_live - live0, etch_status_str(st), etch_last_error());
    }
    return st;
}

static void run_op(const char *name, op_fn fn, const void *ctx) {
    if (n_stats == MAX_OPS) {
        CHECK_MSG(0, "more than %d operation runs: raise MAX_OPS", MAX_OPS);
        return;
    }
    op_stats *s = &stats[n_stats++];
    memset(s, 0, sizeof *s);
    s->name = name;
    s->persistent = persistent;
    double t0 = now_s();
    result ref, r;
    long attempts, injected;
    /* warm-up (process-wide state set up once: kernel and backend registration) */
    etch_status st = run_once(name, fn, ctx, 0, &ref, &attempts, &injected, s);
    CHECK_MSG(st == ETCH_OK, "%s: the clean run fails: %s: %s", name, etch_status_str(st),
              etch_last_error());
    if (st != ETCH_OK) {
        s->problems++;
        return;
    }
    st = run_once(name, fn, ctx, 0, &ref, &attempts, &injected, s);
    CHECK_MSG(st == ETCH_OK, "%s: the second clean run fails: %s", name, etch_last_error());
    s->clean_attempts = attempts;
    for (long k = 1; k <= k_limit; k++) {
        s->k_tried = k;
        st = run_once(name, fn, ctx, k, &r, &attempts, &injected, s);
        if (!injected) {
            /* fewer than k attempts: the run is a clean one */
            if (st != ETCH_OK || r.h != ref.h || r.bytes != ref.bytes) {
                s->problems++;
                CHECK_MSG(0, "%s, k=%ld (nothing injected): %s (%s), result %s", name, k,
                          etch_status_str(st), etch_last_error(),
                          r.h == ref.h ? "same" : "DIFFERENT");
            }
            break;
        }
        s->injected++;
        if (st == ETCH_OK) {
            s->absorbed++;
            if (r.h != ref.h || r.bytes != ref.bytes) {
                s->problems++;
                CHECK_MSG(0, "%s, k=%ld: allocation failure ignored: success with a different "
                             "result", name, k);
            }
        } else {
            step_problems = 0;
            check_failure("the operation", st);
            s->problems += step_problems;
        }
        if (verbose)
            printf("  k=%ld: %s: %s\n", k, etch_status_str(st),
                   st == ETCH_OK ? "(absorbed)" : etch_last_error());
        /* the same call again, nothing injected */
        st = run_once(name, fn, ctx, 0, &r, &attempts, &injected, s);
        if (st != ETCH_OK || r.h != ref.h || r.bytes != ref.bytes) {
            s->problems++;
            CHECK_MSG(0, "%s: retry after k=%ld: %s (%s), result %s", name, k,
                      etch_status_str(st), etch_last_error(),
                      r.h == ref.h ? "same" : "DIFFERENT");
        }
        if (s->problems > 20)
            break;
    }
    s->seconds = now_s() - t0;
    printf("%-44s %-10s %5ld k tried, %5ld runs with failures injected, %3ld absorbed (%ld "
           "retried in place), %ld problems (%.1f s)\n",
           name, persistent ? "persistent" : "transient", s->k_tried, s->injected, s->absorbed,
           s->in_place, s->problems, s->seconds);
    fflush(stdout);
}

/* ------------------------------------------------------------------ inline tokenizers - */

/* GPT-2's byte-to-character map: printable Latin-1 bytes stand for themselves, the others
 * for U+0100 onwards, in byte order. */
static unsigned byte_char(unsigned b) {
    if ((b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff))
        return b;
    unsigned n = 0;
    for (unsigned x = 0; x < b; x++)
        if (!((x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || (x >= 0xae && x <= 0xff)))
            n++;
    return 0x100 + n;
}

/* A JSON string of the byte-level characters of s. */
static size_t json_bytes(char *out, size_t cap, const char *s) {
    size_t len = 0;
    for (; *s; s++)
        len += (size_t)snprintf(out + len, cap - len, "\\u%04x", byte_char((unsigned char)*s));
    return len;
}

static const char *const merges[][2] = {{" ", "t"}, {"h", "e"}, {" t", "he"}, {"i", "n"},
                                        {" ", "a"}, {"a", "n"}, {" a", "n"}, {"e", "r"},
                                        {"o", "n"}, {" ", "w"}, {"r", "e"}, {"l", "l"}};
#define N_MERGES (sizeof merges / sizeof *merges)

static char hf_json[65536];
static char tiktoken_ranks[16384];

static void make_hf_json(void) {
    size_t len = 0, cap = sizeof hf_json;
    char a[64], b[64], ab[64];
    len += (size_t)snprintf(
        hf_json + len, cap - len,
        "{\"version\":\"1.0\",\"added_tokens\":["
        "{\"id\":%zu,\"content\":\"<|endoftext|>\",\"special\":true,\"lstrip\":false,"
        "\"rstrip\":false,\"normalized\":false,\"single_word\":false},"
        "{\"id\":%zu,\"content\":\"[NAME]\",\"special\":false,\"lstrip\":false,"
        "\"rstrip\":false,\"normalized\":false,\"single_word\":false}],"
        "\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":"
        "false,\"trim_offsets\":true,\"use_regex\":true},\"post_processor\":null,"
        "\"decoder\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\",\"vocab\":{",
        256 + N_MERGES, 257 + N_MERGES);
    for (unsigned i = 0; i < 256; i++) {
        char s[2] = {(char)i, 0};
        if (i == 0) {
            len += (size_t)snprintf(hf_json + len, cap - len, "\"\\u%04x\":0", byte_char(0));
            continue;
        }
        hf_json[len++] = ',';
        hf_json[len++] = '"';
        len += json_bytes(hf_json + len, cap - len, s);
        len += (size_t)snprintf(hf_json + len, cap - len, "\":%u", i);
    }
    for (size_t m = 0; m < N_MERGES; m++) {
        char cat[16];
        snprintf(cat, sizeof cat, "%s%s", merges[m][0], merges[m][1]);
        json_bytes(ab, sizeof ab, cat);
        len += (size_t)snprintf(hf_json + len, cap - len, ",\"%s\":%zu", ab, 256 + m);
    }
    len += (size_t)snprintf(hf_json + len, cap - len, "},\"merges\":[");
    for (size_t m = 0; m < N_MERGES; m++) {
        json_bytes(a, sizeof a, merges[m][0]);
        json_bytes(b, sizeof b, merges[m][1]);
        len += (size_t)snprintf(hf_json + len, cap - len, "%s\"%s %s\"", m ? "," : "", a, b);
    }
    snprintf(hf_json + len, cap - len, "]}}");
}

static size_t base64(char *out, const unsigned char *in, size_t n) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0) |
                     (i + 2 < n ? in[i + 2] : 0);
        out[o++] = tab[v >> 18 & 63];
        out[o++] = tab[v >> 12 & 63];
        out[o++] = i + 1 < n ? tab[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? tab[v & 63] : '=';
    }
    out[o] = 0;
    return o;
}

static void make_tiktoken(void) {
    size_t len = 0;
    char b64[64];
    for (unsigned i = 0; i < 256; i++) {
        unsigned char c = (unsigned char)i;
        base64(b64, &c, 1);
        len += (size_t)snprintf(tiktoken_ranks + len, sizeof tiktoken_ranks - len, "%s %u\n",
                                b64, i);
    }
    for (size_t m = 0; m < N_MERGES; m++) {
        char cat[16];
        snprintf(cat, sizeof cat, "%s%s", merges[m][0], merges[m][1]);
        base64(b64, (const unsigned char *)cat, strlen(cat));
        len += (size_t)snprintf(tiktoken_ranks + len, sizeof tiktoken_ranks - len, "%s %zu\n",
                                b64, 256 + m);
    }
}

/* A .npy file (format 1.0) of a float32 [3, 5] tensor, written by hand. */
static void write_npy(const char *path, unsigned char **bytes, size_t *size) {
    char hdr[128];
    int n = snprintf(hdr, sizeof hdr, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 5), }");
    size_t total = 10 + (size_t)n + 1;
    size_t pad = (64 - total % 64) % 64;
    size_t hlen = (size_t)n + pad + 1;
    size_t fsize = 10 + hlen + 15 * 4;
    unsigned char *b = malloc(fsize);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (unsigned char)(hlen & 0xff);
    b[9] = (unsigned char)(hlen >> 8);
    memcpy(b + 10, hdr, (size_t)n);
    memset(b + 10 + n, ' ', pad);
    b[10 + hlen - 1] = '\n';
    float v[15];
    for (int i = 0; i < 15; i++)
        v[i] = (float)i * 0.5f - 3.0f;
    memcpy(b + 10 + hlen, v, sizeof v);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(b, 1, fsize, f);
        fclose(f);
    }
    *bytes = b;
    *size = fsize;
}

/* ------------------------------------------------------------------ main -------------- */

/* The table of tests/faults/REPORT.md. */
static void report(void) {
    long k = 0, inj = 0, lib = 0, inpl = 0, prob = 0, att = 0;
    double sec = 0;
    printf("\n| operation | failures | allocations (clean run) | k tried | runs with failures "
           "injected | failed cleanly | retried in place | absorbed by the library | problems |\n"
           "|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (size_t i = 0; i < n_stats; i++) {
        const op_stats *s = &stats[i];
        long absorbed_lib = s->absorbed - s->in_place;
        printf("| %s | %s | %ld | %ld | %ld | %ld | %ld | %ld | %ld |\n", s->name,
               s->persistent ? "k on" : "k-th", s->clean_attempts,
               s->k_tried, s->injected, s->injected - s->absorbed, s->in_place, absorbed_lib,
               s->problems);
        att += s->clean_attempts;
        k += s->k_tried;
        inj += s->injected;
        lib += absorbed_lib;
        inpl += s->in_place;
        prob += s->problems;
        sec += s->seconds;
    }
    printf("| **total (%zu runs of the loop)** | | %ld | %ld | %ld | %ld | %ld | %ld | %ld |\n\n",
           n_stats,
           att, k, inj, inj - lib - inpl, inpl, lib, prob);
    printf("(%.1f s)\n", sec);
}

int main(int argc, char **argv) {
    if (argc < 3 || argc % 2 != 1) {
        fprintf(stderr, "usage: %s FIXTURES TMPDIR [LLM_PTE LLM_TOKENIZER]...\n", argv[0]);
        return 2;
    }
    fixtures = argv[1];
    tmpdir = argv[2];
    if (getenv("ETCH_FAULTS_K_LIMIT"))
        k_limit = atol(getenv("ETCH_FAULTS_K_LIMIT"));
    verbose = getenv("ETCH_FAULTS_VERBOSE") != NULL;
    const char *only = getenv("ETCH_FAULTS_ONLY"); /* run the operations whose name has it */
    char path[4096];
#define OP(name, fn, ctx)                                   \
    do {                                                    \
        if (!only || strstr(name, only))                    \
            for (int pass = 0; pass < 2; pass++) {          \
                persistent = pass == 1;                     \
                run_op(name, fn, ctx);                      \
            }                                               \
    } while (0)

    /* (a) programs through the module API */
    static module_case mods[] = {
        {.file = "pte/add.pte", .mode = ETCH_LOAD_MMAP, .threads = 1},
        {.file = "pte/add.pte", .mode = ETCH_LOAD_READ, .threads = 1},
        {.file = "pte/add.pte", .mode = ETCH_LOAD_MMAP, .threads = 2},
        {.file = "pte/add.pte", .mode = ETCH_LOAD_MMAP, .threads = 1, .from_buffer = true},
        {.file = "pte/add_constant_segment.pte", .mode = ETCH_LOAD_MMAP, .threads = 1},
        {.file = "pte/linear_constant_buffer.pte", .mode = ETCH_LOAD_READ, .threads = 1},
        {.file = "pte/addmul_external.pte", .ptd = "pte/addmul_external.ptd",
         .mode = ETCH_LOAD_MMAP, .threads = 1},
        {.file = "pte/addmul_external.pte", .ptd = "pte/addmul_external.ptd",
         .mode = ETCH_LOAD_READ, .threads = 1},
        {.file = "pte/xnnpack_add_2023.pte", .mode = ETCH_LOAD_MMAP, .threads = 1},
        {.file = "pte/xnnpack_clamp5.pte", .mode = ETCH_LOAD_MMAP, .threads = 1},
        {.file = "pte/xnnpack_quantized.pte", .mode = ETCH_LOAD_READ, .threads = 1},
        {.file = "pte/xnnpack_simple_cnn.pte", .mode = ETCH_LOAD_MMAP, .threads = 2,
         .dyn = {1, 1, 28, 28}, .dyn_dim = 4},
        {.file = "pte/bundled_add_mul.bpte", .mode = ETCH_LOAD_MMAP, .threads = 1},
        {.file = "pte/add.pte", .mode = ETCH_LOAD_MMAP, .threads = 2, .in_place = true},
        {.file = "pte/addmul_external.pte", .ptd = "pte/addmul_external.ptd",
         .mode = ETCH_LOAD_MMAP, .threads = 1, .in_place = true},
        {.file = "pte/xnnpack_simple_cnn.pte", .mode = ETCH_LOAD_READ, .threads = 1,
         .dyn = {1, 1, 32, 32}, .dyn_dim = 4, .in_place = true},
    };
    static char names[64][160];
    size_t nn = 0;
    for (size_t i = 0; i < sizeof mods / sizeof *mods; i++) {
        module_case *c = &mods[i];
        if (c->from_buffer) {
            unsigned char *b = slurp(fixture(path, sizeof path, c->file), &c->size);
            CHECK_MSG(b != NULL, "cannot read %s", path);
            if (!b)
                continue;
            c->buf = malloc(c->size + 1); /* at an odd address: the program copies it */
            memcpy(c->buf + 1, b, c->size);
            free(b);
        }
        snprintf(names[nn], sizeof names[nn], "module %s%s%s%s (%s%s%s)", c->file + 4,
                 c->ptd ? " + " : "", c->ptd ? c->ptd + 4 : "",
                 c->from_buffer ? " from a buffer" : "",
                 c->mode == ETCH_LOAD_MMAP ? "mmap" : "read", c->threads > 1 ? ", 2 threads" : "",
                 c->in_place ? ", load retried in place" : "");
        OP(names[nn], op_module, c);
        nn++;
    }
    /* the core API on test-owned memory */
    static module_case cores[] = {
        {.file = "pte/add.pte", .mode = ETCH_LOAD_READ},
        {.file = "pte/linear_constant_buffer.pte", .mode = ETCH_LOAD_MMAP},
        {.file = "pte/xnnpack_clamp5.pte", .mode = ETCH_LOAD_READ, .from_buffer = true},
    };
    for (size_t i = 0; i < sizeof cores / sizeof *cores; i++) {
        module_case *c = &cores[i];
        if (c->from_buffer) {
            unsigned char *b = slurp(fixture(path, sizeof path, c->file), &c->size);
            CHECK_MSG(b != NULL, "cannot read %s", path);
            if (!b)
                continue;
            c->buf = malloc(c->size + 1);
            memcpy(c->buf + 1, b, c->size);
            free(b);
        }
        snprintf(names[nn], sizeof names[nn], "program + method_load %s%s (%s)", c->file + 4,
                 c->from_buffer ? " from a buffer" : "",
                 c->mode == ETCH_LOAD_MMAP ? "mmap" : "read");
        OP(names[nn], op_core, c);
        nn++;
    }
    /* bundled programs */
    static bundled_case bundles[] = {{.file = "pte/bundled_add_mul.bpte"},
                                     {.file = "pte/lenet_bundled.bpte"}};
    for (size_t i = 0; i < sizeof bundles / sizeof *bundles; i++) {
        bundled_case *c = &bundles[i];
        c->buf = slurp(fixture(path, sizeof path, c->file), &c->size);
        CHECK_MSG(c->buf != NULL, "cannot read %s", path);
        if (!c->buf)
            continue;
        snprintf(names[nn], sizeof names[nn], "bundled %s (cases run and verified)",
                 c->file + 4);
        OP(names[nn], op_bundled, c);
        nn++;
    }
    /* .npy */
    static npy_case npy;
    snprintf(npy.path, sizeof npy.path, "%s/faults_in_%ld.npy", tmpdir, (long)getpid());
    snprintf(npy.out_path, sizeof npy.out_path, "%s/faults_out_%ld.npy", tmpdir, (long)getpid());
    write_npy(npy.path, &npy.file_bytes, &npy.file_size);
    OP("npy read (file, buffer), write, read back", op_npy, &npy);
    /* the model store */
    static store_case sc;
    snprintf(sc.dir, sizeof sc.dir, "%s/faults_store_%ld", tmpdir, (long)getpid());
    fixture(sc.pte, sizeof sc.pte, "pte/add_constant_segment.pte");
    fixture(sc.tok, sizeof sc.tok, "llm/tok512.model");
    char addp[4200];
    sc.bytes = slurp(fixture(addp, sizeof addp, "pte/add.pte"), &sc.size);
    if (sc.bytes)
        OP("store open, install file + tokenizer, install buffer, serve (full), list", op_store,
           &sc);

    /* (b) tokenizers */
    make_hf_json();
    make_tiktoken();
    static etch_tokenizer_special tt_special[] = {{"<|endoftext|>", (int32_t)(256 + N_MERGES)}};
    static tok_case toks[] = {
        {.label = "tokenizer sentencepiece tok512.model", .file = "llm/tok512.model"},
        {.label = "tokenizer llama2.c tok512.bin", .file = "llm/tok512.bin"},
        {.label = "tokenizer sentencepiece llama2 32000 .model",
         .file = "llm/llama2_tokenizer_32000.model"},
        {.label = "tokenizer llama2.c llama2 32000 .bin", .file = "llm/llama2_tokenizer_32000.bin"},
        {.label = "tokenizer tokenizer.json (byte-level BPE, inline)"},
        {.label = "tokenizer tiktoken (inline ranks + a special)"},
    };
    for (size_t i = 0; i < sizeof toks / sizeof *toks; i++)
        toks[i].params = etch_tokenizer_default_params();
    toks[4].bytes = hf_json;
    toks[4].size = strlen(hf_json);
    toks[5].bytes = tiktoken_ranks;
    toks[5].size = strlen(tiktoken_ranks);
    toks[5].params.specials = tt_special;
    toks[5].params.n_specials = 1;
    toks[5].params.split = ETCH_TOKENIZER_SPLIT_CL100K;
    for (size_t i = 0; i < sizeof toks / sizeof *toks; i++)
        OP(toks[i].label, op_tokenizer, &toks[i]);

    /* (c) the LLM runner: the fixture's llama (and optionally a second model) */
    static llm_case llm[16];
    size_t nl = 0;
    for (int a = 3; a + 1 < argc && nl + 2 <= 16; a += 2) {
        etch_tokenizer *tok = NULL;
        etch_status st = etch_tokenizer_open_file(argv[a + 1], NULL, &tok);
        CHECK_MSG(st == ETCH_OK, "cannot open the tokenizer %s: %s", argv[a + 1],
                  etch_last_error());
        if (st != ETCH_OK)
            continue;
        const char *base = strrchr(argv[a], '/') ? strrchr(argv[a], '/') + 1 : argv[a];
        for (int v = 0; v < (a == 3 ? 2 : 1); v++) {
            llm_case *c = &llm[nl++];
            c->pte = argv[a];
            c->tok = tok;
            c->threads = v ? 2 : 1;
            c->mode = a == 3 ? ETCH_LOAD_MMAP : ETCH_LOAD_READ;
            snprintf(names[nn], sizeof names[nn],
                     "llm runner %s open + generate x3 (%s, %d thread%s)", base,
                     c->mode == ETCH_LOAD_MMAP ? "mmap" : "read", c->threads,
                     c->threads > 1 ? "s" : "");
            OP(names[nn], op_llm, c);
            nn++;
        }
        etch_tokenizer_close(tok);
    }

    report();
    for (size_t i = 0; i < sizeof mods / sizeof *mods; i++)
        free(mods[i].buf);
    for (size_t i = 0; i < sizeof cores / sizeof *cores; i++)
        free(cores[i].buf);
    for (size_t i = 0; i < sizeof bundles / sizeof *bundles; i++)
        free(bundles[i].buf);
    free(npy.file_bytes);
    remove(npy.path);
    return etch_test_finish();
}
