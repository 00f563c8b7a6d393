/* One robustness case (see rob_case.h). */
#if !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef ROB_NO_ASYNC
#include "etch/async.h"
#endif
#include "etch/bundled.h"
#include "etch/etch.h"
#include "rob_case.h"
#include "runtime/error.h" /* etch_err_clear: to tell "failed without a message" apart */

#define ROB_MAX_IO 4096      /* inputs/outputs per method beyond this: refused as absurd */
#define ROB_MAX_ARENAS 4096
#define ROB_MAX_BUNDLED_CASES 16

const char *rob_stage_name(rob_stage s) {
    static const char *names[ROB_NUM_STAGES] = {"open_ptd", "open",    "refused",
                                                "load",     "input",   "execute1",
                                                "execute2", "bundled", "same",
                                                "done"};
    return (unsigned)s < ROB_NUM_STAGES ? names[s] : "?";
}

rob_options rob_default_options(void) {
    rob_options o;
    memset(&o, 0, sizeof o);
    o.max_memory = (size_t)64 << 20;
    o.temp_size = (size_t)64 << 10;
    o.bundled_checks = 1;
    return o;
}

typedef struct rcase {
    const rob_options *o;
    rob_stats *stats;
    int violations;
    char *why;
    size_t why_size;
    const char *method; /* for messages */
} rcase;

static void violation(rcase *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void violation(rcase *c, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->violations++ == 0 && c->why && c->why_size)
        snprintf(c->why, c->why_size, "%s%s%s", c->method ? c->method : "",
                 c->method ? ": " : "", msg);
    if (c->stats)
        c->stats->violations++;
    if (!c->o->quiet)
        fprintf(stderr, "  violation: %s%s%s\n", c->method ? c->method : "",
                c->method ? ": " : "", msg);
}

static void outcome(rcase *c, rob_stage s, etch_status st) {
    if (c->stats)
        c->stats->count[s][(unsigned)st & 255]++;
}

/* True when `st` is a failure; checks that it is a known status with a message. */
static int failed(rcase *c, const char *call, etch_status st) {
    if (st == ETCH_OK)
        return 0;
    if (strcmp(etch_status_str(st), "Unknown") == 0)
        violation(c, "%s returned an unknown status %d", call, (int)st);
    else if (etch_last_error()[0] == 0)
        violation(c, "%s failed (%s) without a message", call, etch_status_str(st));
    return 1;
}

/* Exact-size, 16-byte aligned, zeroed: an access one byte past `n` is a sanitizer report. */
static void *alloc_exact(size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, 16, n ? n : 1) != 0)
        return NULL;
    memset(p, 0, n ? n : 1);
    return p;
}

static void fill_ones(void *data, int dtype, int64_t numel) {
    size_t es = etch_dtype_size(dtype);
    uint8_t one[8] = {0};
    switch (dtype) {
    case ETCH_DTYPE_FLOAT: {
        float f = 1.0f;
        memcpy(one, &f, 4);
        break;
    }
    case ETCH_DTYPE_DOUBLE: {
        double d = 1.0;
        memcpy(one, &d, 8);
        break;
    }
    case ETCH_DTYPE_HALF: one[0] = 0x00; one[1] = 0x3c; break;
    case ETCH_DTYPE_BFLOAT16: one[0] = 0x80; one[1] = 0x3f; break;
    default: one[0] = 1; break; /* integers, bool, quantized: 1 (little endian) */
    }
    for (int64_t i = 0; i < numel; i++)
        memcpy((uint8_t *)data + (size_t)i * es, one, es);
}

/* Sizes of a tensor's elements; -1 when negative or overflowing. */
static int64_t checked_numel(const int64_t *sizes, unsigned dim) {
    int64_t n = 1;
    for (unsigned k = 0; k < dim; k++) {
        if (sizes[k] < 0)
            return -1;
        if (sizes[k] && n > INT64_MAX / sizes[k])
            return -1;
        n *= sizes[k];
    }
    return n;
}

static volatile uint64_t rob_sink;

/* After a successful execute every output must be a well-formed value; each byte of a
 * tensor's data is read so the sanitizer sees dangling or out-of-bounds data pointers. */
static void check_outputs(rcase *c, const etch_method *m, int run) {
    size_t n = etch_method_num_outputs(m);
    for (size_t i = 0; i < n; i++) {
        const etch_value *v = etch_method_output(m, i);
        if (!v) {
            violation(c, "execute %d: output %zu is NULL", run, i);
            continue;
        }
        if (v->tag != ETCH_VALUE_TENSOR)
            continue;
        const etch_tensor *t = v->u.tensor;
        if (!t) {
            violation(c, "execute %d: output %zu is a tensor value without a tensor", run, i);
            continue;
        }
        if (t->dim > ETCH_MAX_DIMS) {
            violation(c, "execute %d: output %zu has rank %u", run, i, (unsigned)t->dim);
            continue;
        }
        size_t es = etch_dtype_size(t->dtype);
        int64_t numel = checked_numel(t->sizes, t->dim);
        if (!es || numel < 0) {
            violation(c, "execute %d: output %zu has dtype %d / a negative or overflowing shape",
                      run, i, (int)t->dtype);
            continue;
        }
        if (numel == 0 || !t->data)
            continue; /* an output the program never bound: nothing to read */
        if (numel > t->capacity)
            violation(c, "execute %d: output %zu has %lld elements but capacity %lld", run, i,
                      (long long)numel, (long long)t->capacity);
        const uint8_t *d = t->data;
        uint64_t sum = 0;
        for (size_t b = 0; b < (size_t)numel * es; b++)
            sum += d[b];
        rob_sink += sum;
    }
}

typedef struct method_mem {
    void *pool;
    void **arenas;
    size_t *arena_sizes;
    size_t num_arenas;
    void *temp;
    void **inputs; /* caller data for tensor inputs (borrowed by unplanned inputs) */
    size_t num_inputs;
    void **outputs; /* buffers given to unplanned outputs */
    size_t num_outputs;
} method_mem;

static void free_mem(method_mem *mm) {
    free(mm->pool);
    for (size_t j = 0; j < mm->num_arenas; j++)
        free(mm->arenas ? mm->arenas[j] : NULL);
    free(mm->arenas);
    free(mm->arena_sizes);
    free(mm->temp);
    for (size_t j = 0; j < mm->num_inputs; j++)
        free(mm->inputs[j]);
    free(mm->inputs);
    for (size_t j = 0; j < mm->num_outputs; j++)
        free(mm->outputs[j]);
    free(mm->outputs);
    memset(mm, 0, sizeof *mm);
}

/* Metadata-driven sizing; false when the request is absurd (or the test's malloc fails). */
static int size_method(const etch_method_meta *meta, const rob_options *o, method_mem *mm,
                       size_t *pool_size) {
    size_t cap = o->max_memory, total;
    *pool_size = etch_method_meta_pool_size(meta);
    size_t narenas = etch_method_meta_num_arenas(meta);
    size_t nin = etch_method_meta_num_inputs(meta), nout = etch_method_meta_num_outputs(meta);
    if (*pool_size > cap || narenas > ROB_MAX_ARENAS || nin > ROB_MAX_IO || nout > ROB_MAX_IO)
        return 0;
    total = *pool_size;
    for (size_t j = 0; j < narenas; j++) {
        size_t a = etch_method_meta_arena_size(meta, j);
        if (a > cap - total)
            return 0;
        total += a;
    }
    for (size_t i = 0; i < nin; i++) {
        etch_value_info info;
        if (etch_method_meta_input(meta, i, &info) == ETCH_OK &&
            info.tag == ETCH_VALUE_TENSOR) {
            if (info.nbytes > cap - total)
                return 0;
            total += info.nbytes;
        }
    }
    if (o->temp_size > cap - total)
        return 0;
    mm->pool = alloc_exact(*pool_size);
    mm->arenas = calloc(narenas ? narenas : 1, sizeof(void *));
    mm->arena_sizes = calloc(narenas ? narenas : 1, sizeof(size_t));
    mm->inputs = calloc(nin ? nin : 1, sizeof(void *));
    mm->outputs = calloc(nout ? nout : 1, sizeof(void *));
    mm->temp = o->temp_size ? alloc_exact(o->temp_size) : NULL;
    if (!mm->pool || !mm->arenas || !mm->arena_sizes || !mm->inputs || !mm->outputs ||
        (o->temp_size && !mm->temp))
        return 0;
    mm->num_arenas = narenas;
    mm->num_inputs = nin;
    mm->num_outputs = nout;
    for (size_t j = 0; j < narenas; j++) {
        mm->arena_sizes[j] = etch_method_meta_arena_size(meta, j);
        if (!(mm->arenas[j] = alloc_exact(mm->arena_sizes[j])))
            return 0;
    }
    return 1;
}

/* Bind every input: tensors of ones at their stored shape, other kinds at the value the
 * program holds (the only value set_input accepts for them). */
static etch_status set_inputs(rcase *c, etch_method *m, const etch_method_meta *meta,
                              method_mem *mm) {
    size_t n = etch_method_num_inputs(m);
    for (size_t i = 0; i < n && i < mm->num_inputs; i++) {
        etch_value_info info;
        etch_value v;
        etch_tensor t;
        etch_status st;
        memset(&v, 0, sizeof v);
        etch_err_clear();
        if ((st = etch_method_meta_input(meta, i, &info)) != ETCH_OK) {
            failed(c, "method_meta_input", st);
            return st;
        }
        if (info.tag == ETCH_VALUE_TENSOR) {
            memset(&t, 0, sizeof t);
            t.dtype = (uint8_t)info.dtype;
            t.dim = info.dim;
            for (unsigned k = 0; k < info.dim && k < ETCH_MAX_DIMS; k++) {
                t.sizes[k] = info.sizes[k];
                t.dim_order[k] = info.dim_order[k];
            }
            etch_tensor_update_strides(&t);
            int64_t numel = checked_numel(t.sizes, t.dim);
            if (numel < 0 || (size_t)numel * etch_dtype_size(info.dtype) != info.nbytes)
                violation(c, "input %zu: metadata nbytes %zu does not match its shape", i,
                          info.nbytes);
            t.capacity = numel < 0 ? 0 : numel;
            if (!mm->inputs[i] && !(mm->inputs[i] = alloc_exact(info.nbytes)))
                return ETCH_ERR_MEMORY_ALLOCATION_FAILED;
            if (numel > 0 && (size_t)numel * etch_dtype_size(info.dtype) == info.nbytes)
                fill_ones(mm->inputs[i], info.dtype, numel);
            t.data = mm->inputs[i];
            v.tag = ETCH_VALUE_TENSOR;
            v.u.tensor = &t;
        } else {
            const etch_value *cur = etch_method_input(m, i);
            if (!cur) {
                violation(c, "etch_method_input(%zu) is NULL for an existing input", i);
                return ETCH_ERR_INTERNAL;
            }
            v = *cur;
        }
        etch_err_clear();
        st = etch_method_set_input(m, i, &v);
        if (failed(c, "set_input", st))
            return st;
    }
    return ETCH_OK;
}

/* Give unplanned, unbound tensor outputs a buffer of their capacity (what a caller does). */
static etch_status bind_outputs(rcase *c, etch_method *m, method_mem *mm, size_t budget) {
    size_t n = etch_method_num_outputs(m);
    for (size_t i = 0; i < n && i < mm->num_outputs; i++) {
        const etch_value *v = etch_method_output(m, i);
        if (!v || v->tag != ETCH_VALUE_TENSOR || !v->u.tensor)
            continue;
        const etch_tensor *t = v->u.tensor;
        if (t->data || (t->flags & (ETCH_TENSOR_PLANNED | ETCH_TENSOR_CONSTANT)))
            continue;
        size_t es = etch_dtype_size(t->dtype);
        if (t->capacity <= 0 || !es || (uint64_t)t->capacity > budget / es)
            continue;
        size_t need = (size_t)t->capacity * es;
        budget -= need;
        if (!mm->outputs[i] && !(mm->outputs[i] = alloc_exact(need)))
            return ETCH_ERR_MEMORY_ALLOCATION_FAILED;
        etch_err_clear();
        etch_status st = etch_method_set_output_data(m, i, mm->outputs[i], need);
        if (failed(c, "set_output_data", st))
            return st;
    }
    return ETCH_OK;
}

static void run_bundled_cases(rcase *c, etch_method *m, const etch_bundled *b,
                              const char *name) {
    size_t n = etch_bundled_num_cases(b, name);
    for (size_t i = 0; i < n && i < ROB_MAX_BUNDLED_CASES; i++) {
        etch_err_clear();
        etch_status st = etch_bundled_load_inputs(b, m, i);
        if (!failed(c, "bundled_load_inputs", st)) {
            etch_err_clear();
            st = etch_method_execute(m);
            if (!failed(c, "execute (bundled inputs)", st)) {
                check_outputs(c, m, 3);
                etch_bundled_report rep;
                etch_err_clear();
                st = etch_bundled_verify_outputs(b, m, i, 1e-5, 1e-8, &rep);
                failed(c, "bundled_verify_outputs", st);
            }
        }
        outcome(c, ROB_BUNDLED, st);
    }
}

/* The debug information of every instruction (Chain.stacktrace, verified at open): each
 * accessor succeeds on a program that opened, and every string it gives is read to its end
 * (a read past the buffer is the sanitizers' to report). */
static size_t touch(const char *s) { return s ? strlen(s) : 0; }
static volatile size_t debug_sink; /* keeps the reads */

static void read_debug(rcase *c, const etch_method_meta *meta) {
    size_t nc = etch_method_meta_num_chains(meta), sum = 0;
    for (size_t ch = 0; ch < nc; ch++) {
        size_t n = etch_method_meta_chain_length(meta, ch);
        for (size_t pc = 0; pc < n; pc++) {
            etch_instruction_debug d;
            etch_status st = etch_method_meta_instruction_debug(meta, ch, pc, &d);
            if (st != ETCH_OK) {
                violation(c, "instruction_debug fails for instruction %zu of chain %zu", pc, ch);
                return;
            }
            sum += touch(d.node) + touch(d.module_path) + touch(d.filename) +
                   touch(d.function) + touch(d.source) + strlen(d.op_name);
            for (size_t i = 0; i < d.num_frames; i++) {
                etch_source_frame f;
                if (etch_method_meta_instruction_frame(meta, ch, pc, i, &f) != ETCH_OK) {
                    violation(c, "instruction_frame %zu fails (it has %zu)", i, d.num_frames);
                    return;
                }
                sum += touch(f.filename) + touch(f.function) + touch(f.source);
            }
        }
    }
    debug_sink = sum;
}

static void run_method(rcase *c, const etch_program *prog, const char *name,
                       const etch_data_map *map, const etch_bundled *bundled) {
    etch_method_meta meta;
    method_mem mm;
    memset(&mm, 0, sizeof mm);
    c->method = name;
    etch_err_clear();
    etch_status st = etch_program_method_meta(prog, name, &meta);
    if (failed(c, "method_meta", st)) {
        violation(c, "method_meta fails for a name the program lists");
        outcome(c, ROB_LOAD, st);
        return;
    }
    read_debug(c, &meta);
    size_t pool_size = 0;
    if (!size_method(&meta, c->o, &mm, &pool_size)) {
        outcome(c, ROB_REFUSED, ETCH_OK);
        free_mem(&mm);
        return;
    }
    etch_method_memory mem = {mm.pool,        pool_size,     mm.arenas, mm.arena_sizes,
                              mm.num_arenas, mm.temp, mm.temp ? c->o->temp_size : 0};
    etch_method_options mo;
    memset(&mo, 0, sizeof mo);
    mo.external_data = map;
    etch_method *const sentinel = (etch_method *)(void *)&mm;
    etch_method *m = sentinel;
    etch_err_clear();
    st = etch_method_load(prog, name, &mem, &mo, &m);
    if (failed(c, "method_load", st)) {
        if (m != sentinel)
            violation(c, "method_load failed but wrote its out-parameter");
        outcome(c, ROB_LOAD, st);
        free_mem(&mm);
        return;
    }
    if (etch_method_num_inputs(m) != mm.num_inputs ||
        etch_method_num_outputs(m) != mm.num_outputs)
        violation(c, "loaded method's input/output counts differ from its metadata");
    const etch_method_meta *lmeta = etch_method_get_meta(m);
    rob_stage stage = ROB_INPUT;
    if ((st = set_inputs(c, m, lmeta, &mm)) == ETCH_OK &&
        (st = bind_outputs(c, m, &mm, c->o->max_memory)) == ETCH_OK) {
        for (int run = 1; run <= 2 && !c->o->skip_plain_exec; run++) {
            stage = run == 1 ? ROB_EXEC1 : ROB_EXEC2;
            etch_err_clear();
#ifndef ROB_NO_ASYNC /* the fuzzer links the loader alone (no extension layer) */
            if (run == 2 && c->o->async_exec) {
                etch_job *job = NULL;
                st = etch_job_start_execute(m, NULL, &job);
                if (st == ETCH_OK) {
                    etch_job_wait(job, -1);
                    st = etch_job_status(job);
                    if (st != ETCH_OK && !etch_job_error(job)[0])
                        violation(c, "background execute failed (%s) without a message",
                                  etch_status_str(st));
                    etch_job_free(job);
                }
                if (st != ETCH_OK)
                    break;
            } else
#endif
            {
                st = etch_method_execute(m);
                if (failed(c, "execute", st))
                    break;
            }
            check_outputs(c, m, run);
        }
    }
    outcome(c, st == ETCH_OK ? ROB_DONE : stage, st);
    if (bundled)
        run_bundled_cases(c, m, bundled, name);
    etch_method_free(m);
    free_mem(&mm);
    c->method = NULL;
}

int rob_run(const uint8_t *pte, size_t pte_size, const uint8_t *ptd, size_t ptd_size,
            const rob_options *opts, rob_stats *stats, char *why, size_t why_size) {
    rob_options def = rob_default_options();
    rcase c;
    memset(&c, 0, sizeof c);
    c.o = opts ? opts : &def;
    c.stats = stats;
    c.why = why;
    c.why_size = why_size;
    if (why && why_size)
        why[0] = 0;
    if (stats)
        stats->cases++;

    etch_data_map *map = NULL;
    if (ptd) {
        etch_data_map *const sentinel = (etch_data_map *)(void *)&c;
        map = sentinel;
        etch_err_clear();
        etch_status st = etch_data_map_open_buffer(ptd, ptd_size, NULL, &map);
        if (failed(&c, "data_map_open_buffer", st)) {
            if (map != sentinel)
                violation(&c, "data_map_open_buffer failed but wrote its out-parameter");
            outcome(&c, ROB_OPEN_PTD, st);
            map = NULL; /* go on: the program must then refuse its external tensors */
        } else {
            /* every entry must be readable where the map says it is */
            size_t n = etch_data_map_count(map);
            for (size_t i = 0; i < n; i++) {
                etch_data_entry e;
                if (etch_data_map_entry(map, i, &e) != ETCH_OK) {
                    violation(&c, "data map entry %zu of %zu cannot be read", i, n);
                    continue;
                }
                uint64_t sum = 0;
                for (size_t b = 0; b < e.size; b++)
                    sum += ((const uint8_t *)e.data)[b];
                rob_sink += sum + strlen(e.key);
            }
        }
    }

    etch_program *const psentinel = (etch_program *)(void *)&c;
    etch_program *prog = psentinel;
    etch_err_clear();
    etch_status st = etch_program_open_buffer(pte, pte_size, NULL, &prog);
    if (failed(&c, "program_open_buffer", st)) {
        if (prog != psentinel)
            violation(&c, "program_open_buffer failed but wrote its out-parameter");
        outcome(&c, ROB_OPEN, st);
        etch_data_map_close(map);
        return c.violations;
    }
    etch_program_header h;
    etch_program_get_header(prog, &h);
    etch_bundled *bundled = NULL;
    if (c.o->bundled_checks && h.bundled) {
        etch_err_clear();
        st = etch_bundled_open_buffer(pte, pte_size, &bundled);
        if (failed(&c, "bundled_open_buffer", st)) {
            outcome(&c, ROB_BUNDLED, st);
            bundled = NULL;
        }
    }
    size_t nm = etch_program_num_methods(prog);
    if (c.o->skip_plain_exec && !bundled) {
        outcome(&c, ROB_SAME, ETCH_OK);
        nm = 0;
    }
    for (size_t i = 0; i < nm; i++) {
        const char *name = etch_program_method_name(prog, i);
        if (!name) {
            violation(&c, "method %zu of %zu has no name", i, nm);
            continue;
        }
        run_method(&c, prog, name, map, bundled);
    }
    etch_bundled_close(bundled);
    etch_program_close(prog);
    etch_data_map_close(map);
    return c.violations;
}

void rob_stats_add(rob_stats *into, const rob_stats *from) {
    for (int s = 0; s < ROB_NUM_STAGES; s++)
        for (int k = 0; k < 256; k++)
            into->count[s][k] += from->count[s][k];
    into->cases += from->cases;
    into->violations += from->violations;
}

void rob_stats_print(const rob_stats *st, const char *indent) {
    for (int s = 0; s < ROB_NUM_STAGES; s++)
        for (int k = 0; k < 256; k++)
            if (st->count[s][k])
                printf("%s%-9s %-26s %10lu\n", indent, rob_stage_name((rob_stage)s),
                       s == ROB_REFUSED ? "(memory cap)"
                       : s == ROB_SAME  ? "(as the baseline)"
                                        : etch_status_str((etch_status)k),
                       st->count[s][k]);
}
