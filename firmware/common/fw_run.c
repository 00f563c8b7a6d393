/* The firmware harness (fw_run.h): open, check, load with static memory, execute, print. */
#include <string.h>

#include "etch/platform.h"
#include "fw_run.h"

#define MAX_ARENAS 16

typedef struct out_buf {
    char s[320];
    size_t n;
} out_buf;

static void put(out_buf *b, const char *s) {
    while (*s && b->n + 1 < sizeof b->s)
        b->s[b->n++] = *s++;
    b->s[b->n] = 0;
}

/* Own integer formatting: newlib-nano's printf has no %ll. */
static void put_u64(out_buf *b, uint64_t v) {
    char t[24];
    size_t n = 0;
    do {
        t[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n && b->n + 1 < sizeof b->s)
        b->s[b->n++] = t[--n];
    b->s[b->n] = 0;
}

static void put_i64(out_buf *b, int64_t v) {
    if (v < 0) {
        put(b, "-");
        put_u64(b, (uint64_t)0 - (uint64_t)v);
    } else {
        put_u64(b, (uint64_t)v);
    }
}

static void put_hex(out_buf *b, uint64_t v, unsigned digits) {
    static const char hex[] = "0123456789abcdef";
    for (unsigned k = digits; k-- > 0;)
        if (b->n + 1 < sizeof b->s)
            b->s[b->n++] = hex[(v >> (4 * k)) & 15];
    b->s[b->n] = 0;
}

static void reset(out_buf *b) {
    b->n = 0;
    b->s[0] = 0;
}

static int fail(void (*emit)(const char *), const char *what, etch_status st) {
    out_buf b;
    reset(&b);
    put(&b, "error ");
    put(&b, what);
    put(&b, ": ");
    put(&b, etch_status_str(st));
    put(&b, ": ");
    put(&b, etch_last_error());
    emit(b.s);
    return 1;
}

/* A check passes when the runtime refused with the status it must give for that fault. */
static int refused(void (*emit)(const char *), const char *check, etch_status st,
                   etch_status want) {
    out_buf b;
    reset(&b);
    put(&b, "check ");
    put(&b, check);
    put(&b, st == want ? " refused: " : " refused for another reason: ");
    put(&b, etch_status_str(st));
    put(&b, ": ");
    put(&b, etch_last_error());
    emit(b.s);
    return st == want ? 0 : 2;
}

/* Arenas laid out in arena_mem as the method's metadata asks; false when it is too small. */
static bool lay_out(const fw_case *c, const etch_method_meta *meta, void **arenas, size_t *sizes,
                    size_t *n, size_t *total) {
    *n = etch_method_meta_num_arenas(meta);
    if (*n > MAX_ARENAS)
        return false;
    size_t at = 0;
    for (size_t j = 0; j < *n; j++) {
        sizes[j] = etch_method_meta_arena_size(meta, j);
        if (sizes[j] > c->arena_mem_size || at > c->arena_mem_size - sizes[j])
            return false;
        arenas[j] = c->arena_mem + at;
        at += (sizes[j] + 15) / 16 * 16;
    }
    *total = at;
    return true;
}

static int self_checks(const fw_case *c, etch_program *prog, const etch_method_memory *mem,
                       void (*emit)(const char *)) {
    etch_program *p2 = NULL;
    /* 1. an image that is not 16-byte aligned */
    etch_status st = etch_program_open_buffer(c->pte + 1, c->pte_size - 1, NULL, &p2);
    if (st == ETCH_OK) {
        etch_program_close(p2);
        emit("check misaligned-image NOT refused");
        return 2;
    }
    if (refused(emit, "misaligned-image", st, ETCH_ERR_INVALID_ARGUMENT))
        return 2;
    /* 2. each arena one byte short */
    size_t short_sizes[MAX_ARENAS];
    for (size_t j = 0; j < mem->num_arenas; j++) {
        if (!mem->arena_sizes[j])
            continue;
        memcpy(short_sizes, mem->arena_sizes, mem->num_arenas * sizeof *short_sizes);
        short_sizes[j]--;
        etch_method_memory m2 = *mem;
        m2.arena_sizes = short_sizes;
        etch_method *m = NULL;
        st = etch_method_load(prog, c->method, &m2, NULL, &m);
        if (st == ETCH_OK) {
            etch_method_free(m);
            emit("check short-arena NOT refused");
            return 2;
        }
        if (refused(emit, "short-arena", st, ETCH_ERR_MEMORY_ALLOCATION_FAILED))
            return 2;
    }
    /* 3. a pool of half what this target needs (etch_method_meta_pool_size is an upper
     * bound with slack: a byte less may still fit; half never does) */
    etch_method_meta meta;
    if ((st = etch_program_method_meta(prog, c->method, &meta)))
        return fail(emit, "meta", st);
    etch_method_memory m3 = *mem;
    m3.pool_size = etch_method_meta_pool_size(&meta) / 2;
    etch_method *m = NULL;
    st = etch_method_load(prog, c->method, &m3, NULL, &m);
    if (st == ETCH_OK) {
        etch_method_free(m);
        emit("check short-pool NOT refused");
        return 2;
    }
    return refused(emit, "short-pool", st, ETCH_ERR_MEMORY_ALLOCATION_FAILED);
}

static void print_tensor(size_t i, const etch_tensor *t, void (*emit)(const char *)) {
    out_buf b;
    reset(&b);
    put(&b, "out ");
    put_u64(&b, i);
    put(&b, " ");
    put(&b, etch_dtype_name(t->dtype));
    put(&b, " [");
    for (unsigned d = 0; d < t->dim; d++) {
        if (d)
            put(&b, ", ");
        put_i64(&b, t->sizes[d]);
    }
    put(&b, "]");
    emit(b.s);
    const size_t es = etch_dtype_size(t->dtype);
    const int64_t n = etch_tensor_numel(t);
    const uint8_t *p = t->data;
    for (int64_t k = 0; p && es && es <= 8 && k < n; k += 8) {
        reset(&b);
        put(&b, "out ");
        put_u64(&b, i);
        put(&b, " +");
        put_u64(&b, (uint64_t)k);
        put(&b, ":");
        for (int64_t e = k; e < n && e < k + 8; e++) {
            /* the element at its place in memory (outputs are contiguous or printed in
             * storage order alike on both machines) */
            uint64_t v = 0;
            for (size_t byte = es; byte-- > 0;)
                v = v << 8 | p[(size_t)e * es + byte];
            put(&b, " ");
            put_hex(&b, v, (unsigned)(2 * es));
        }
        emit(b.s);
    }
}

static void print_value(size_t i, const etch_value *v, void (*emit)(const char *)) {
    out_buf b;
    reset(&b);
    put(&b, "out ");
    put_u64(&b, i);
    if (!v) {
        put(&b, " missing");
    } else if (v->tag == ETCH_VALUE_TENSOR && v->u.tensor) {
        print_tensor(i, v->u.tensor, emit);
        return;
    } else if (v->tag == ETCH_VALUE_INT) {
        put(&b, " Int ");
        put_i64(&b, v->u.i);
    } else if (v->tag == ETCH_VALUE_BOOL) {
        put(&b, v->u.b ? " Bool 1" : " Bool 0");
    } else if (v->tag == ETCH_VALUE_DOUBLE) {
        uint64_t bits;
        memcpy(&bits, &v->u.d, sizeof bits);
        put(&b, " Double ");
        put_hex(&b, bits, 16);
    } else {
        put(&b, " ");
        put(&b, etch_value_tag_name(v->tag));
    }
    emit(b.s);
}

int fw_run(const fw_case *c, void (*emit)(const char *line)) {
    etch_status st = c->register_kernels();
    if (st)
        return fail(emit, "register", st);
    etch_program *prog = NULL;
    if ((st = etch_program_open_buffer(c->pte, c->pte_size, NULL, &prog)))
        return fail(emit, "open", st);
    int rc = 1;
    etch_method *m = NULL;
    etch_method_meta meta;
    void *arenas[MAX_ARENAS];
    size_t sizes[MAX_ARENAS], n = 0, total = 0;
    if ((st = etch_program_method_meta(prog, c->method, &meta))) {
        rc = fail(emit, "meta", st);
        goto done;
    }
    const size_t need_pool = etch_method_meta_pool_size(&meta);
    if (!lay_out(c, &meta, arenas, sizes, &n, &total)) {
        emit("error arenas: the method's planned arenas do not fit the firmware's buffer");
        goto done;
    }
    out_buf b;
    reset(&b);
    put(&b, "model ");
    put(&b, c->name);
    put(&b, ": pte ");
    put_u64(&b, c->pte_size);
    put(&b, ", pool ");
    put_u64(&b, need_pool);
    put(&b, " of ");
    put_u64(&b, c->pool_size);
    put(&b, ", arenas ");
    put_u64(&b, n);
    put(&b, " (");
    put_u64(&b, total);
    put(&b, " bytes), inputs ");
    put_u64(&b, etch_method_meta_num_inputs(&meta));
    emit(b.s);
    etch_method_memory mem = {c->pool, c->pool_size, arenas, sizes, n, NULL, 0};
    if (c->self_checks && (rc = self_checks(c, prog, &mem, emit)) != 0)
        goto done;
    rc = 1;
    if ((st = etch_method_load(prog, c->method, &mem, NULL, &m))) {
        rc = fail(emit, "load", st);
        goto done;
    }
    size_t at = 0, end = 0;
    for (size_t i = 0; i < etch_method_meta_num_inputs(&meta); i++) {
        etch_value_info v;
        if ((st = etch_method_meta_input(&meta, i, &v))) {
            rc = fail(emit, "input", st);
            goto done;
        }
        if (v.tag != ETCH_VALUE_TENSOR) {
            emit("error input: only tensor inputs are embedded");
            goto done;
        }
        if (v.nbytes > c->input_size || at > c->input_size - v.nbytes) {
            emit("error input: the embedded input is shorter than the method's inputs");
            goto done;
        }
        memcpy(c->input_ram + at, c->input + at, v.nbytes);
        /* the input's bytes are in the memory order the program stores it in (its dim
         * order: a channels-last input is given channels-last) */
        etch_tensor t;
        if ((st = etch_tensor_init(&t, (etch_dtype)v.dtype, v.dim, v.sizes, c->input_ram + at))) {
            rc = fail(emit, "set input", st);
            goto done;
        }
        memcpy(t.dim_order, v.dim_order, sizeof t.dim_order);
        etch_tensor_update_strides(&t);
        if ((st = etch_method_set_input_tensor(m, i, &t))) {
            rc = fail(emit, "set input", st);
            goto done;
        }
        end = at + v.nbytes;
        at += (v.nbytes + 15) / 16 * 16;
    }
    if (c->input_size != end && c->input_size != at) {
        emit("error input: the embedded input is longer than the method's inputs");
        goto done;
    }
    const uint64_t t0 = etch_platform_time_ns();
    st = etch_method_execute(m);
    const uint64_t t1 = etch_platform_time_ns();
    if (st) {
        rc = fail(emit, "execute", st);
        goto done;
    }
    for (size_t i = 0; i < etch_method_num_outputs(m); i++)
        print_value(i, etch_method_output(m, i), emit);
    reset(&b);
    put(&b, "time execute_ns ");
    put_u64(&b, t1 - t0);
    emit(b.s);
    rc = 0;
done:
    etch_method_free(m);
    etch_program_close(prog);
    return rc;
}
