/* Loading a method into caller memory, and executing its instruction chains. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/error.h"
#include "runtime/passes.h"
#include "runtime/program_impl.h"

#ifndef ETCH_MAX_INSTRUCTIONS
#define ETCH_MAX_INSTRUCTIONS 10000000ull /* guard against malformed infinite loops */
#endif

void *etch_pool_alloc(etch_pool *pool, size_t size, size_t align) {
    uintptr_t cur = (uintptr_t)pool->base + pool->used;
    size_t pad = (size_t)((align - (cur & (align - 1))) & (align - 1));
    if (!pool->base) {
        /* measuring: assume an aligned base; etch_method_meta_pool_size adds slack */
        pad = (size_t)((align - (pool->used & (align - 1))) & (align - 1));
        pool->used += pad + size;
        return NULL;
    }
    if (pad > pool->size - pool->used || size > pool->size - pool->used - pad)
        return NULL;
    pool->used += pad + size;
    return (void *)(cur + pad);
}

#define POOL_ALLOC(pool, type, n) ((type *)etch_pool_alloc((pool), sizeof(type) * (size_t)(n), \
                                                          _Alignof(type)))

static const uint32_t tag_of_kind[] = {
    [KT_NONE] = ETCH_VALUE_NONE, [KT_NULL] = ETCH_VALUE_NONE, [KT_INT] = ETCH_VALUE_INT,
    [KT_BOOL] = ETCH_VALUE_BOOL, [KT_DOUBLE] = ETCH_VALUE_DOUBLE, [KT_TENSOR] = ETCH_VALUE_TENSOR,
    [KT_STRING] = ETCH_VALUE_STRING, [KT_INT_LIST] = ETCH_VALUE_INT_LIST,
    [KT_DOUBLE_LIST] = ETCH_VALUE_DOUBLE_LIST, [KT_BOOL_LIST] = ETCH_VALUE_BOOL_LIST,
    [KT_TENSOR_LIST] = ETCH_VALUE_TENSOR_LIST,
    [KT_OPTIONAL_TENSOR_LIST] = ETCH_VALUE_OPTIONAL_TENSOR_LIST};

typedef struct plan_view {
    fb_table plan;
    fb_vec values, inputs, outputs, chains, ops, delegates, arena_sizes;
} plan_view;

static void view_plan(const etch_program *p, uint32_t index, plan_view *v) {
    etch_program_plan(p, index, &v->plan);
    fb_vec_field(&v->plan, PLAN_VALUES, 4, 4, &v->values);
    fb_vec_field(&v->plan, PLAN_INPUTS, 4, 4, &v->inputs);
    fb_vec_field(&v->plan, PLAN_OUTPUTS, 4, 4, &v->outputs);
    fb_vec_field(&v->plan, PLAN_CHAINS, 4, 4, &v->chains);
    fb_vec_field(&v->plan, PLAN_OPERATORS, 4, 4, &v->ops);
    fb_vec_field(&v->plan, PLAN_DELEGATES, 4, 4, &v->delegates);
    fb_vec_field(&v->plan, PLAN_NON_CONST_BUFFER_SIZES, 8, 4, &v->arena_sizes);
}

static void instr_args(const fb_table *in, uint8_t *kind, fb_table *a, fb_vec *args) {
    *kind = (uint8_t)fb_u(in, INSTR_TYPE, 1, 0);
    fb_table_field(in, INSTR_ARGS, a);
    memset(args, 0, sizeof *args);
    if (*kind == IA_KERNEL_CALL)
        fb_vec_field(a, KERNEL_CALL_ARGS, 4, 4, args);
    else if (*kind == IA_DELEGATE_CALL)
        fb_vec_field(a, DELEGATE_CALL_ARGS, 4, 4, args);
}

/*
 * Allocate every structure of a method from the pool, following the plan. With m == NULL
 * it only measures (pool->base is NULL). Returns false when the pool is exhausted.
 */
static bool allocate(etch_pool *pool, const plan_view *v, etch_method *m) {
#define ALLOC_INTO(dst, type, n)                                                              \
    do {                                                                                      \
        type *p_ = POOL_ALLOC(pool, type, n);                                                 \
        if (m) {                                                                              \
            if (!p_ && (n))                                                                   \
                return false;                                                                 \
            dst = p_;                                                                         \
        }                                                                                     \
    } while (0)
    etch_value *values = NULL;
    ALLOC_INTO(values, etch_value, v->values.len);
    if (m) {
        m->values = values;
        m->nvalues = v->values.len;
        memset(values, 0, sizeof(etch_value) * v->values.len);
    }
    bool *input_set = NULL;
    ALLOC_INTO(input_set, bool, v->inputs.len);
    etch_tensor **tensors = NULL;
    ALLOC_INTO(tensors, etch_tensor *, v->values.len);
    etch_op_rt *ops = NULL;
    ALLOC_INTO(ops, etch_op_rt, v->ops.len);
    etch_delegate_rt *dels = NULL;
    ALLOC_INTO(dels, etch_delegate_rt, v->delegates.len);
    etch_chain *chains = NULL;
    ALLOC_INTO(chains, etch_chain, v->chains.len);
    if (m) {
        m->input_set = input_set;
        m->tensors = tensors;
        memset(tensors, 0, sizeof(etch_tensor *) * v->values.len); /* NULL: not a tensor */
        m->ops = ops;
        m->nops = v->ops.len;
        m->delegates = dels;
        m->ndelegates = v->delegates.len;
        memset(dels, 0, sizeof(etch_delegate_rt) * v->delegates.len);
        m->chains = chains;
        m->nchains = v->chains.len;
    }
    for (uint32_t c = 0; c < v->chains.len; c++) {
        fb_table ch;
        fb_vec ins;
        fb_vec_table(&v->chains, c, &ch);
        fb_vec_field(&ch, CHAIN_INSTRUCTIONS, 4, 4, &ins);
        etch_instr *instrs = NULL;
        ALLOC_INTO(instrs, etch_instr, ins.len);
        if (m) {
            chains[c].instrs = instrs;
            chains[c].n = ins.len;
            memset(instrs, 0, sizeof(etch_instr) * ins.len);
        }
        for (uint32_t k = 0; k < ins.len; k++) {
            fb_table in, a;
            fb_vec args;
            uint8_t kind;
            fb_vec_table(&ins, k, &in);
            instr_args(&in, &kind, &a, &args);
            etch_value **argp = NULL;
            uint8_t *modes = NULL;
            ALLOC_INTO(argp, etch_value *, args.len);
            ALLOC_INTO(modes, uint8_t, args.len);
            if (m) {
                instrs[k].args = argp;
                instrs[k].arg_modes = modes;
                instrs[k].nargs = args.len;
            }
        }
    }
    for (uint32_t i = 0; i < v->values.len; i++) {
        fb_table ev, val;
        fb_vec_table(&v->values, i, &ev);
        uint8_t kind = (uint8_t)fb_u(&ev, EVALUE_TYPE, 1, 0);
        if (kind == KT_TENSOR) {
            etch_tensor *t = NULL;
            ALLOC_INTO(t, etch_tensor, 1);
            if (m)
                values[i].u.tensor = tensors[i] = t;
        } else if (kind == KT_INT_LIST || kind == KT_TENSOR_LIST ||
                   kind == KT_OPTIONAL_TENSOR_LIST) {
            fb_vec items;
            size_t es = kind == KT_INT_LIST ? 8 : 4;
            fb_table_field(&ev, EVALUE_VAL, &val);
            fb_vec_field(&val, SCALAR_VAL, es, 4, &items);
            etch_value **ip = NULL;
            ALLOC_INTO(ip, etch_value *, items.len);
            int64_t *scratch = NULL;
            if (kind == KT_INT_LIST)
                ALLOC_INTO(scratch, int64_t, items.len);
            if (m) {
                values[i].u.list.items = ip;
                values[i].u.list.scratch = scratch;
                values[i].u.list.len = items.len;
            }
        }
    }
    return true;
#undef ALLOC_INTO
}

static size_t unwritten_scratch(uint32_t nvalues);

/* Delegate i of the plan: its table, id (not NUL-terminated: len bytes) and the registered
 * backend of that name (NULL when none). */
static const etch_backend *delegate_at(const plan_view *v, uint32_t i, fb_table *del,
                                       const char **id, uint32_t *len) {
    fb_vec_table(&v->delegates, i, del);
    fb_str_field(del, DELEGATE_ID, id, len);
    return etch_backends_find(*id, *len);
}

/* Pool bytes the delegates' init functions may take (etch_backend.pool_size); a backend that
 * is not registered counts the default reserve (its load fails anyway). */
static size_t delegates_reserve(const etch_program *p, const plan_view *v) {
    size_t total = 0;
    for (uint32_t i = 0; i < v->delegates.len; i++) {
        fb_table del;
        const char *id;
        uint32_t len;
        const etch_backend *b = delegate_at(v, i, &del, &id, &len);
        size_t need = ETCH_DELEGATE_POOL_RESERVE;
        if (b && b->pool_size) {
            const uint8_t *blob;
            size_t blob_size;
            bool is_inline;
            etch_delegate_blob(p, &del, &blob, &blob_size, &is_inline);
            need = b->pool_size(b->user_data, blob, blob_size);
            if (need < ETCH_DELEGATE_POOL_RESERVE)
                need = ETCH_DELEGATE_POOL_RESERVE;
        }
        total = total > SIZE_MAX - need ? SIZE_MAX : total + need;
    }
    return total;
}

size_t etch_method_meta_pool_size(const etch_method_meta *meta) {
    plan_view v;
    view_plan(meta->program, meta->index, &v);
    etch_pool pool = {NULL, 0, 0};
    POOL_ALLOC(&pool, etch_method, 1);
    allocate(&pool, &v, NULL);
    /* + the load-time checks' or passes' scratch (released), then what the passes keep and
     * the delegates' share */
    const etch_load_passes *passes = etch_runtime_load_passes();
    size_t scratch = 0, kept = passes ? passes->pool_size(meta, &scratch) : 0;
    const size_t check = unwritten_scratch(v.values.len);
    scratch = scratch > check ? scratch : check;
    size_t total = pool.used + 64 + scratch + kept,
           dels = delegates_reserve(meta->program, &v);
    return total > SIZE_MAX - dels ? SIZE_MAX : total + dels;
}

/* ---- values ----------------------------------------------------------------------------- */

static bool same_layout(const etch_tensor_desc *d, const etch_data_entry *e) {
    if (e->rank != d->rank || e->dtype != d->dtype)
        return false;
    for (int i = 0; i < d->rank; i++)
        if (e->sizes[i] != d->sizes[i] || e->dim_order[i] != d->dim_order[i])
            return false;
    return true;
}

/* Data pointer of a tensor per the rules of pte-format.md §4.1; copies initial values of
 * mutable tensors when `init_mutable`. */
static etch_status bind_tensor(etch_method *m, uint32_t vi, const etch_tensor_desc *d,
                               etch_tensor *t, const etch_method_memory *mem,
                               const etch_data_map *ext, bool init_mutable) {
    const etch_pte *pte = &m->program->pte;
    uint8_t *planned = NULL;
    if (d->planned) {
        uint32_t j = d->memory_id - 1; /* verified >= 1 */
        if (j >= mem->num_arenas || !mem->arenas || !mem->arenas[j])
            return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                            "value %u lives in memory id %u but only %zu arenas were given", vi,
                            d->memory_id, mem->num_arenas);
        planned = (uint8_t *)mem->arenas[j] + d->memory_offset;
        t->flags |= ETCH_TENSOR_PLANNED;
        t->data = planned;
    }
    if (d->external) {
        etch_data_entry e;
        if (!ext)
            return etch_err(ETCH_ERR_INVALID_STATE,
                            "value %u ('%s') is stored in external data: pass the .ptd file", vi,
                            d->fqn);
        if (etch_data_map_find(ext, d->fqn, &e) != ETCH_OK)
            return etch_err(ETCH_ERR_NOT_FOUND, "value %u: external data has no entry '%s'", vi,
                            d->fqn);
        if (!same_layout(d, &e) || e.size < d->nbytes)
            return etch_err(ETCH_ERR_INVALID_EXTERNAL_DATA,
                            "value %u: external entry '%s' does not match the tensor's dtype, "
                            "shape or dim order",
                            vi, d->fqn);
        if (planned) {
            if (init_mutable)
                memcpy(planned, e.data, (size_t)d->nbytes);
        } else {
            if ((uintptr_t)e.data & 15)
                return etch_err(ETCH_ERR_INVALID_EXTERNAL_DATA,
                                "value %u: external entry '%s' is not 16-byte aligned", vi,
                                d->fqn);
            t->data = (void *)(uintptr_t)e.data;
            t->flags |= ETCH_TENSOR_CONSTANT;
        }
        return ETCH_OK;
    }
    if (d->data_buffer_idx > 0) {
        if (planned) {
            if (init_mutable) {
                uint64_t off = fb_vec_u64(&pte->mutable_offsets, d->data_buffer_idx);
                memcpy(planned, pte->mutable_segment.data + off, (size_t)d->nbytes);
            }
        } else {
            etch_range r;
            etch_pte_constant(pte, d->data_buffer_idx, &r); /* verified at open */
            t->data = (void *)(uintptr_t)r.data;
            t->flags |= ETCH_TENSOR_CONSTANT;
        }
    }
    return ETCH_OK;
}

void etch_tensor_from_desc(etch_tensor *t, const etch_tensor_desc *d) {
    memset(t, 0, sizeof *t);
    t->dtype = (uint8_t)d->dtype;
    t->dim = (uint8_t)d->rank;
    t->dynamism = (uint8_t)d->dynamism;
    t->capacity = (int64_t)d->numel;
    for (int k = 0; k < d->rank; k++) {
        t->sizes[k] = d->sizes[k];
        t->dim_order[k] = d->dim_order[k];
    }
    etch_tensor_update_strides(t);
}

static etch_status parse_values(etch_method *m, const plan_view *v, const etch_method_memory *mem,
                                const etch_data_map *ext) {
    for (uint32_t i = 0; i < v->values.len; i++) {
        fb_table ev, val;
        fb_vec_table(&v->values, i, &ev);
        uint8_t kind = (uint8_t)fb_u(&ev, EVALUE_TYPE, 1, 0);
        fb_table_field(&ev, EVALUE_VAL, &val);
        etch_value *out = &m->values[i];
        out->tag = tag_of_kind[kind];
        fb_vec items;
        uint32_t len;
        switch (kind) {
        case KT_INT:
            out->u.i = fb_i(&val, SCALAR_VAL, 8, 0);
            break;
        case KT_BOOL:
            out->u.b = fb_u(&val, SCALAR_VAL, 1, 0) != 0;
            break;
        case KT_DOUBLE:
            out->u.d = fb_f64(&val, SCALAR_VAL, 0);
            break;
        case KT_STRING:
            if (!fb_str_field(&val, SCALAR_VAL, &out->u.str.ptr, &len)) {
                out->u.str.ptr = "";
                len = 0;
            }
            out->u.str.len = len;
            break;
        case KT_DOUBLE_LIST:
            fb_vec_field(&val, SCALAR_VAL, 8, 8, &items);
            out->u.doubles.ptr = (const double *)(const void *)fb_vec_ptr(&items);
            out->u.doubles.len = items.len;
            break;
        case KT_BOOL_LIST:
            fb_vec_field(&val, SCALAR_VAL, 1, 1, &items);
            out->u.bools.ptr = fb_vec_ptr(&items);
            out->u.bools.len = items.len;
            break;
        case KT_INT_LIST:
            fb_vec_field(&val, SCALAR_VAL, 8, 4, &items);
            for (uint32_t k = 0; k < items.len; k++)
                out->u.list.items[k] = &m->values[fb_vec_i64(&items, k)];
            break;
        case KT_TENSOR_LIST:
        case KT_OPTIONAL_TENSOR_LIST:
            fb_vec_field(&val, SCALAR_VAL, 4, 4, &items);
            for (uint32_t k = 0; k < items.len; k++) {
                int32_t idx = fb_vec_i32(&items, k);
                out->u.list.items[k] =
                    idx < 0 || m->values[idx].tag == ETCH_VALUE_NONE ? NULL : &m->values[idx];
            }
            break;
        case KT_TENSOR: {
            etch_tensor_desc d;
            etch_tensor *t = out->u.tensor;
            etch_pte_tensor_desc(&val, &d);
            etch_tensor_from_desc(t, &d);
            etch_status st = bind_tensor(m, i, &d, t, mem, ext, true);
            if (st)
                return st;
            break;
        }
        default:
            break;
        }
    }
    return ETCH_OK;
}

/* ---- kernels and signatures ----------------------------------------------------------- */

static bool sig_accepts(char c, uint32_t tag, uint8_t *mode) {
    *mode = ARG_SKIP;
    switch (c) {
    case 'T': *mode = ARG_READ; return tag == ETCH_VALUE_TENSOR;
    case 't': *mode = ARG_READ; return tag == ETCH_VALUE_TENSOR || tag == ETCH_VALUE_NONE;
    case 'W': *mode = ARG_WRITE; return tag == ETCH_VALUE_TENSOR;
    case 'V': *mode = ARG_VIEW; return tag == ETCH_VALUE_TENSOR;
    case 'S': return tag == ETCH_VALUE_INT || tag == ETCH_VALUE_DOUBLE || tag == ETCH_VALUE_BOOL;
    case 's':
        return tag == ETCH_VALUE_INT || tag == ETCH_VALUE_DOUBLE || tag == ETCH_VALUE_BOOL ||
               tag == ETCH_VALUE_NONE;
    case 'I': return tag == ETCH_VALUE_INT;
    case 'i': return tag == ETCH_VALUE_INT || tag == ETCH_VALUE_NONE;
    case 'D': return tag == ETCH_VALUE_DOUBLE || tag == ETCH_VALUE_INT;
    case 'd': return tag == ETCH_VALUE_DOUBLE || tag == ETCH_VALUE_INT || tag == ETCH_VALUE_NONE;
    case 'B': return tag == ETCH_VALUE_BOOL;
    case 'b': return tag == ETCH_VALUE_BOOL || tag == ETCH_VALUE_NONE;
    case 'L': return tag == ETCH_VALUE_INT_LIST;
    case 'l': return tag == ETCH_VALUE_INT_LIST || tag == ETCH_VALUE_NONE;
    case 'F': return tag == ETCH_VALUE_DOUBLE_LIST;
    case 'Q': return tag == ETCH_VALUE_BOOL_LIST;
    case 'X': *mode = ARG_LIST_READ; return tag == ETCH_VALUE_TENSOR_LIST;
    case 'Y': *mode = ARG_LIST_WRITE; return tag == ETCH_VALUE_TENSOR_LIST;
    case 'O': *mode = ARG_LIST_READ; return tag == ETCH_VALUE_OPTIONAL_TENSOR_LIST;
    case 'N': return tag == ETCH_VALUE_STRING;
    case 'n': return tag == ETCH_VALUE_STRING || tag == ETCH_VALUE_NONE;
    case 'R':
        return tag == ETCH_VALUE_INT || tag == ETCH_VALUE_DOUBLE || tag == ETCH_VALUE_BOOL;
    case '?': *mode = ARG_READ; return true;
    default: return false;
    }
}

static const char *sig_expect(char c) {
    switch (c) {
    case 'T': case 'W': case 'V': return "Tensor";
    case 't': return "Tensor or None";
    case 'S': case 'R': return "Int, Double or Bool";
    case 's': return "a scalar or None";
    case 'I': return "Int";
    case 'i': return "Int or None";
    case 'D': return "Double";
    case 'd': return "Double or None";
    case 'B': return "Bool";
    case 'b': return "Bool or None";
    case 'L': return "IntList";
    case 'l': return "IntList or None";
    case 'F': return "DoubleList";
    case 'Q': return "BoolList";
    case 'X': case 'Y': return "TensorList";
    case 'O': return "OptionalTensorList";
    case 'N': return "String";
    case 'n': return "String or None";
    default: return "a valid signature letter";
    }
}

static etch_status check_signature(const etch_method *m, const etch_op_rt *op, uint32_t pc,
                                   etch_instr *in, const int32_t *idx) {
    const char *sig = op->kernel->signature;
    if (!sig) {
        for (uint32_t k = 0; k < in->nargs; k++)
            in->arg_modes[k] = ARG_READ;
        return ETCH_OK;
    }
    size_t fixed = strcspn(sig, "*");
    bool variadic = sig[fixed] == '*';
    if (in->nargs < fixed || (!variadic && in->nargs != fixed))
        return etch_err(ETCH_ERR_INVALID_PROGRAM,
                        "method '%s', instruction %u: %s takes %zu%s arguments (with the return "
                        "slot), the program passes %u",
                        m->name, pc, op->name, fixed, variadic ? " or more" : "", in->nargs);
    for (uint32_t k = 0; k < in->nargs; k++) {
        char c = k < fixed ? sig[k] : '?';
        uint32_t tag = in->args[k]->tag;
        if (!sig_accepts(c, tag, &in->arg_modes[k]))
            return etch_err(ETCH_ERR_INVALID_PROGRAM,
                            "method '%s', instruction %u: %s argument %u (value %d) is %s, "
                            "expected %s",
                            m->name, pc, op->name, k, idx[k], etch_value_tag_name(tag),
                            sig_expect(c));
        if (in->arg_modes[k] == ARG_VIEW && (in->args[k]->u.tensor->flags & ETCH_TENSOR_CONSTANT))
            return etch_err(ETCH_ERR_INVALID_PROGRAM,
                            "method '%s', instruction %u: %s would rebind constant value %d",
                            m->name, pc, op->name, idx[k]);
    }
    return ETCH_OK;
}

/* "backend 'X' (delegate 0) is not registered in this build, backend 'Y' (delegate 2) is not
 * available here" for the
 * distinct backend ids the method names that are absent or unavailable; how many. */
static unsigned missing_backends(const plan_view *v, char *out, size_t size) {
    unsigned n = 0;
    size_t o = 0;
    out[0] = 0;
    for (uint32_t i = 0; i < v->delegates.len; i++) {
        fb_table del;
        const char *id;
        uint32_t len;
        const etch_backend *b = delegate_at(v, i, &del, &id, &len);
        if (b && (!b->is_available || b->is_available(b->user_data)))
            continue;
        bool seen = false; /* one mention per id */
        for (uint32_t j = 0; j < i && !seen; j++) {
            const char *id2;
            uint32_t len2;
            delegate_at(v, j, &del, &id2, &len2);
            seen = len2 == len && memcmp(id2, id, len) == 0;
        }
        if (seen)
            continue;
        n++;
        if (o < size)
            o += (size_t)snprintf(out + o, size - o, "%sbackend '%.*s' (delegate %u) %s",
                                  n > 1 ? ", " : "", (int)(len < 100 ? len : 100), id, i,
                                  b ? "is not available here" : "is not registered in this build");
    }
    return n;
}

static etch_status resolve_operators(etch_method *m, const plan_view *v) {
    char missing[720];
    size_t o = 0;
    unsigned nmissing = 0, nlisted = 0;
    missing[0] = 0;
    for (uint32_t i = 0; i < v->ops.len; i++) {
        fb_table op;
        fb_vec_table(&v->ops, i, &op);
        etch_operator_full_name(&op, m->ops[i].name, sizeof m->ops[i].name);
        m->ops[i].kernel = etch_kernels_find(m->ops[i].name, strlen(m->ops[i].name));
        m->ops[i].flags = etch_kernels_flags_of(m->ops[i].kernel);
        if (m->ops[i].kernel)
            continue;
        nmissing++;
        /* list whole names only; what does not fit is counted below */
        size_t len = strlen(m->ops[i].name) + 2;
        if (o + len < sizeof missing) {
            o += (size_t)snprintf(missing + o, sizeof missing - o, "%s%s", nlisted ? ", " : "",
                                  m->ops[i].name);
            nlisted++;
        }
    }
    /* backends too, so that one message names everything this build lacks */
    char backs[400];
    unsigned nback = missing_backends(v, backs, sizeof backs);
    char tail[440] = "";
    if (nback)
        snprintf(tail, sizeof tail, "; and %s", backs);
    if (nmissing > nlisted)
        return etch_err(ETCH_ERR_OPERATOR_MISSING,
                        "method '%s': %u operators are missing from this build: %s and %u more "
                        "('etch info' lists them all)%s",
                        m->name, nmissing, missing, nmissing - nlisted, tail);
    if (nmissing)
        return etch_err(ETCH_ERR_OPERATOR_MISSING,
                        "method '%s': %u operator%s missing from this build: %s%s", m->name,
                        nmissing, nmissing == 1 ? " is" : "s are", missing, tail);
    if (nback)
        return etch_err(ETCH_ERR_NOT_FOUND, "method '%s': %s", m->name, backs);
    return ETCH_OK;
}

static etch_status build_chains(etch_method *m, const plan_view *v) {
    for (uint32_t c = 0; c < v->chains.len; c++) {
        fb_table ch;
        fb_vec ins;
        fb_vec_table(&v->chains, c, &ch);
        fb_vec_field(&ch, CHAIN_INSTRUCTIONS, 4, 4, &ins);
        for (uint32_t k = 0; k < ins.len; k++) {
            fb_table in, a;
            fb_vec args;
            uint8_t kind;
            fb_vec_table(&ins, k, &in);
            instr_args(&in, &kind, &a, &args);
            etch_instr *ei = &m->chains[c].instrs[k];
            ei->kind = kind;
            for (uint32_t j = 0; j < args.len; j++)
                ei->args[j] = &m->values[fb_vec_i32(&args, j)];
            switch (kind) {
            case IA_KERNEL_CALL: {
                ei->a = (uint32_t)fb_i(&a, KERNEL_CALL_OP_INDEX, 4, 0);
                ei->kernel = m->ops[ei->a].kernel;
                const int32_t *idx = (const int32_t *)(const void *)fb_vec_ptr(&args);
                etch_status st = check_signature(m, &m->ops[ei->a], k, ei, idx);
                if (st)
                    return st;
                break;
            }
            case IA_DELEGATE_CALL:
                ei->a = (uint32_t)fb_i(&a, DELEGATE_CALL_INDEX, 4, 0);
                break;
            case IA_MOVE_CALL:
                ei->a = (uint32_t)fb_i(&a, MOVE_FROM, 4, 0);
                ei->b = (uint32_t)fb_i(&a, MOVE_TO, 4, 0);
                /* kinds never change at run time: a kernel can trust its argument kinds */
                if (m->values[ei->a].tag != m->values[ei->b].tag)
                    return etch_err(ETCH_ERR_INVALID_PROGRAM,
                                    "method '%s', instruction %u: move from %s value %u to %s "
                                    "value %u",
                                    m->name, k, etch_value_tag_name(m->values[ei->a].tag), ei->a,
                                    etch_value_tag_name(m->values[ei->b].tag), ei->b);
                break;
            case IA_JUMP_FALSE_CALL: {
                ei->a = (uint32_t)fb_i(&a, JUMP_COND, 4, 0);
                int64_t dest = fb_i(&a, JUMP_DEST, 4, 0);
                ei->b = dest > (int64_t)ins.len ? ins.len : (uint32_t)dest;
                uint32_t tag = m->values[ei->a].tag;
                if (tag != ETCH_VALUE_BOOL && tag != ETCH_VALUE_TENSOR)
                    return etch_err(ETCH_ERR_INVALID_PROGRAM,
                                    "method '%s', instruction %u: jump condition value %u is %s",
                                    m->name, k, ei->a, etch_value_tag_name(tag));
                break;
            }
            case IA_FREE_CALL:
                ei->a = (uint32_t)fb_i(&a, FREE_VALUE, 4, 0);
                if (m->values[ei->a].tag != ETCH_VALUE_TENSOR ||
                    (m->values[ei->a].u.tensor->flags & ETCH_TENSOR_CONSTANT))
                    return etch_err(ETCH_ERR_INVALID_PROGRAM,
                                    "method '%s', instruction %u: free of value %u, which is not "
                                    "a non-constant tensor",
                                    m->name, k, ei->a);
                break;
            }
        }
    }
    return ETCH_OK;
}

/* ---- delegates ------------------------------------------------------------------------- */

static void *pool_alloc_cb(void *self, size_t size, size_t align) {
    if (align == 0 || (align & (align - 1)))
        align = 16;
    return etch_pool_alloc((etch_pool *)self, size, align);
}

/* Named data for a backend: the program's named_data entries, then the external data map. */
static etch_status named_data_cb(void *self, const char *key, size_t key_len, const void **data,
                                 size_t *size) {
    const etch_method *m = (const etch_method *)self;
    const etch_pte *pte = &m->program->pte;
    for (uint32_t i = 0; i < pte->named_data.len; i++) {
        fb_table nd;
        const char *k;
        uint32_t len;
        fb_vec_table(&pte->named_data, i, &nd);
        if (!fb_str_field(&nd, NAMED_DATA_KEY, &k, &len) || len != key_len ||
            memcmp(k, key, key_len) != 0)
            continue;
        etch_range r = etch_pte_segment(pte, (uint32_t)fb_u(&nd, NAMED_DATA_SEGMENT_INDEX, 4, 0));
        *data = r.data;
        *size = (size_t)r.size;
        return ETCH_OK;
    }
    if (m->external_data && key_len < 1024) {
        char buf[1024];
        memcpy(buf, key, key_len);
        buf[key_len] = 0;
        etch_data_entry e;
        if (etch_data_map_find(m->external_data, buf, &e) == ETCH_OK) {
            *data = e.data;
            *size = e.size;
            return ETCH_OK;
        }
    }
    return ETCH_ERR_NOT_FOUND;
}

static void destroy_delegates(etch_method *m) {
    for (uint32_t i = 0; i < m->ndelegates; i++) {
        etch_delegate_rt *d = &m->delegates[i];
        if (d->initialized && d->backend->destroy)
            d->backend->destroy(d->backend->user_data, d->handle);
        d->initialized = false;
    }
}

static etch_status init_delegates(etch_method *m, const plan_view *v) {
    for (uint32_t i = 0; i < v->delegates.len; i++) {
        fb_table del;
        fb_vec specs;
        const char *id;
        uint32_t len;
        const etch_backend *b = delegate_at(v, i, &del, &id, &len);
        if (!b)
            return etch_err(ETCH_ERR_NOT_FOUND,
                            "method '%s': backend '%s' (delegate %u) is not registered in this "
                            "build",
                            m->name, id, i);
        if (b->is_available && !b->is_available(b->user_data))
            return etch_err(ETCH_ERR_NOT_FOUND,
                            "method '%s': backend '%s' (delegate %u) is not available here",
                            m->name, id, i);
        const uint8_t *blob;
        size_t blob_size;
        bool is_inline;
        etch_delegate_blob(m->program, &del, &blob, &blob_size, &is_inline);
        uint32_t nspecs = 0;
        if (fb_vec_field(&del, DELEGATE_COMPILE_SPECS, 4, 4, &specs))
            nspecs = specs.len;
        etch_compile_spec *cs = POOL_ALLOC(&m->pool, etch_compile_spec, nspecs);
        if (nspecs && !cs)
            return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED,
                            "method pool too small for delegate %u's compile specs", i);
        for (uint32_t s = 0; s < nspecs; s++) {
            fb_table spec;
            fb_vec val;
            fb_vec_table(&specs, s, &spec);
            if (!fb_str_field(&spec, COMPILE_SPEC_KEY, &cs[s].key, &len))
                cs[s].key = "";
            fb_vec_field(&spec, COMPILE_SPEC_VALUE, 1, 1, &val);
            cs[s].value = val.pos ? fb_vec_ptr(&val) : NULL;
            cs[s].value_size = val.len;
        }
        etch_backend_init_context ictx = {m->name, pool_alloc_cb, &m->pool, named_data_cb, m};
        void *handle = NULL;
        etch_status st = b->init(b->user_data, &ictx, blob, blob_size, cs, nspecs, &handle);
        if (st != ETCH_OK) {
            etch_err_prefix("method '%s': backend '%s' failed to initialise delegate %u (%s)",
                            m->name, id, i, etch_status_str(st));
            return st;
        }
        m->delegates[i].backend = b;
        m->delegates[i].handle = handle;
        m->delegates[i].initialized = true;
    }
    return ETCH_OK;
}

/* ---- load ------------------------------------------------------------------------------- */

/* ---- load-time checks (etch_kernels_register_check) ------------------------------------ */

/* Signature letters of arguments a kernel only reads (the scalars and lists among them are
 * fixed unless something else writes them). */
static bool sig_only_reads(char c) { return c && strchr("TtSsIiDdBbLlFQXONn", c) != NULL; }

/* written[i]: value i may be written at run time (an argument of a kernel at a position it
 * may write or without a signature, a Move target, a delegate argument); NULL: no room. */
static bool *values_written(const etch_method *m, etch_pool *pool) {
    bool *w = (bool *)etch_pool_alloc(pool, m->nvalues ? m->nvalues : 1, 1);
    if (!w)
        return NULL;
    memset(w, 0, m->nvalues ? m->nvalues : 1);
    for (uint32_t c = 0; c < m->nchains; c++)
        for (uint32_t k = 0; k < m->chains[c].n; k++) {
            const etch_instr *in = &m->chains[c].instrs[k];
            if (in->kind == IA_KERNEL_CALL || in->kind == IA_DELEGATE_CALL) {
                const char *sig = in->kind == IA_KERNEL_CALL && in->kernel
                                      ? in->kernel->signature
                                      : NULL;
                size_t fixed = sig ? strcspn(sig, "*") : 0;
                for (uint32_t a = 0; a < in->nargs; a++)
                    if (!sig || a >= fixed || !sig_only_reads(sig[a]))
                        w[in->args[a] - m->values] = true;
            } else if (in->kind == IA_MOVE_CALL && in->b < m->nvalues) {
                w[in->b] = true;
            }
        }
    return w;
}

/* Run the check function of every call site whose non-tensor arguments nothing writes; the
 * first refusal fails the load. */
static etch_status check_calls(etch_method *m) {
    bool any = false;
    for (uint32_t i = 0; i < m->nops; i++)
        any |= m->ops[i].kernel && etch_kernels_check_of(m->ops[i].kernel->fn);
    if (!any || !m->nvalues)
        return ETCH_OK;
    etch_pool scratch = m->pool; /* a copy: not kept */
    const bool *written = values_written(m, &scratch);
    if (!written)
        return ETCH_OK; /* no room: the calls check their arguments when they run */
    etch_status st = ETCH_OK;
    for (uint32_t c = 0; c < m->nchains && !st; c++)
        for (uint32_t k = 0; k < m->chains[c].n && !st; k++) {
            const etch_instr *in = &m->chains[c].instrs[k];
            etch_kernel_fn check = in->kind == IA_KERNEL_CALL && in->kernel
                                       ? etch_kernels_check_of(in->kernel->fn)
                                       : NULL;
            bool fixed = check != NULL;
            for (uint32_t a = 0; a < in->nargs && fixed; a++) {
                uint32_t tag = in->args[a]->tag;
                fixed = tag == ETCH_VALUE_TENSOR || tag == ETCH_VALUE_TENSOR_LIST ||
                        tag == ETCH_VALUE_OPTIONAL_TENSOR_LIST || !written[in->args[a] - m->values];
            }
            if (!fixed)
                continue;
            etch_kernel_context_init(&m->ctx, m->ops[in->a].name, NULL, 0, m->threadpool);
            m->ctx.checking = true;
            check(&m->ctx, in->args, in->nargs);
            if (m->ctx.status != ETCH_OK) {
                char msg[512];
                snprintf(msg, sizeof msg, "%s", etch_last_error());
                st = etch_err(ETCH_ERR_INVALID_PROGRAM,
                              "method '%s', instruction %u: refused at load: %s", m->name, k,
                              msg);
            }
        }
    etch_kernel_context_init(&m->ctx, "", NULL, 0, m->threadpool);
    return st;
}

/* A planned byte range: arena (memory id), [lo, hi). */
typedef struct span {
    uint64_t lo, hi;
    uint32_t arena;
} span;

static int span_cmp(const void *a, const void *b) {
    const span *x = (const span *)a, *y = (const span *)b;
    if (x->arena != y->arena)
        return x->arena < y->arena ? -1 : 1;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static size_t unwritten_scratch(uint32_t nvalues) {
    return (size_t)nvalues * (1 + 2 * sizeof(span)) + 2 * _Alignof(span);
}

/* Is [s.lo, s.hi) of its arena inside one of the merged, sorted spans u[0..n)? */
static bool covered(const span *u, size_t n, span s) {
    size_t lo = 0, hi = n;
    while (lo < hi) { /* the last span that starts at or before s */
        size_t mid = lo + (hi - lo) / 2;
        if (span_cmp(&u[mid], &s) <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > 0 && u[lo - 1].arena == s.arena && u[lo - 1].hi >= s.hi;
}

/* A planned tensor holds whatever its arena held before: every byte a method reads (through a
 * kernel argument that only reads, a move, or as an output) must belong to an input, an
 * initial value (mutable data, .ptd) or a tensor some instruction writes, possibly under
 * another value that shares the storage (the exporter plans a view over its base's bytes, with
 * no instruction of its own). Program order is not asked for: state such as a KV cache is read
 * before the instruction that updates it, by design. What fails is a read of bytes nothing can
 * ever write (a misnumbered input list, say), which would return leftover memory. */
static etch_status check_unwritten(etch_method *m, const plan_view *v) {
    if (!m->nvalues)
        return ETCH_OK;
    etch_pool scratch = m->pool; /* a copy: not kept */
    bool *w = values_written(m, &scratch);
    span *own = POOL_ALLOC(&scratch, span, m->nvalues), *u = POOL_ALLOC(&scratch, span, m->nvalues);
    if (!w || !own || !u)
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED,
                        "method '%s': pool too small for the load-time checks", m->name);
    /* the items of a list some instruction may write */
    for (uint32_t c = 0; c < m->nchains; c++)
        for (uint32_t k = 0; k < m->chains[c].n; k++) {
            const etch_instr *in = &m->chains[c].instrs[k];
            for (uint32_t a = 0; a < in->nargs; a++) {
                const etch_value *x = in->args[a];
                if ((x->tag == ETCH_VALUE_TENSOR_LIST ||
                     x->tag == ETCH_VALUE_OPTIONAL_TENSOR_LIST) && w[x - m->values])
                    for (size_t j = 0; j < x->u.list.len; j++)
                        if (x->u.list.items[j])
                            w[x->u.list.items[j] - m->values] = true;
            }
        }
    for (uint32_t i = 0; i < m->ninputs; i++)
        w[m->inputs[i]] = true;
    /* own[i]: value i's planned bytes (empty when it has none); u: the written ones */
    size_t nu = 0;
    for (uint32_t i = 0; i < m->nvalues; i++) {
        own[i] = (span){0, 0, 0};
        const etch_tensor *t = m->tensors[i];
        if (!t || !(t->flags & ETCH_TENSOR_PLANNED))
            continue;
        fb_table ev, val;
        fb_vec_table(&v->values, i, &ev);
        fb_table_field(&ev, EVALUE_VAL, &val);
        etch_tensor_desc d;
        etch_pte_tensor_desc(&val, &d);
        own[i] = (span){d.memory_offset, d.memory_offset + d.nbytes, d.memory_id};
        if (w[i] || d.external || d.data_buffer_idx > 0)
            u[nu++] = own[i];
    }
    qsort(u, nu, sizeof *u, span_cmp);
    size_t nm = 0;
    for (size_t k = 0; k < nu; k++) {
        if (nm && u[nm - 1].arena == u[k].arena && u[k].lo <= u[nm - 1].hi) {
            if (u[k].hi > u[nm - 1].hi)
                u[nm - 1].hi = u[k].hi;
        } else {
            u[nm++] = u[k];
        }
    }
#define UNWRITTEN(y) ((y) < m->nvalues && own[y].hi > own[y].lo && !covered(u, nm, own[y]))
    for (uint32_t c = 0; c < m->nchains; c++)
        for (uint32_t k = 0; k < m->chains[c].n; k++) {
            const etch_instr *in = &m->chains[c].instrs[k];
            uint32_t bad = UINT32_MAX;
            if (in->kind == IA_MOVE_CALL && UNWRITTEN(in->a))
                bad = in->a;
            for (uint32_t a = 0; in->kind == IA_KERNEL_CALL && a < in->nargs; a++) {
                const etch_value *x = in->args[a];
                const bool list = x->tag == ETCH_VALUE_TENSOR_LIST ||
                                  x->tag == ETCH_VALUE_OPTIONAL_TENSOR_LIST;
                if (in->arg_modes[a] == ARG_READ && x->tag == ETCH_VALUE_TENSOR &&
                    UNWRITTEN((uint32_t)(x - m->values)))
                    bad = (uint32_t)(x - m->values);
                for (size_t j = 0; in->arg_modes[a] == ARG_LIST_READ && list &&
                                   j < x->u.list.len; j++)
                    if (x->u.list.items[j] &&
                        UNWRITTEN((uint32_t)(x->u.list.items[j] - m->values)))
                        bad = (uint32_t)(x->u.list.items[j] - m->values);
            }
            if (bad != UINT32_MAX)
                return etch_err(ETCH_ERR_INVALID_PROGRAM,
                                "method '%s', instruction %u (%s): reads value %u, planned "
                                "memory that no input, initial value or instruction ever "
                                "writes",
                                m->name, k,
                                in->kind == IA_MOVE_CALL ? "move" : m->ops[in->a].name, bad);
        }
    for (uint32_t i = 0; i < m->noutputs; i++)
        if (UNWRITTEN((uint32_t)m->outputs[i]))
            return etch_err(ETCH_ERR_INVALID_PROGRAM,
                            "method '%s': output %u (value %d) is planned memory that no "
                            "input, initial value or instruction ever writes",
                            m->name, i, m->outputs[i]);
#undef UNWRITTEN
    return ETCH_OK;
}

etch_status etch_method_load(const etch_program *p, const char *name,
                             const etch_method_memory *mem, const etch_method_options *opts,
                             etch_method **out) {
    if (!p || !name || !mem || !out)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "method_load: NULL argument");
    etch_method_meta meta;
    etch_status st = etch_program_method_meta(p, name, &meta);
    if (st)
        return st;
    plan_view v;
    view_plan(p, meta.index, &v);
    size_t narenas = v.arena_sizes.len ? v.arena_sizes.len - 1 : 0;
    if (mem->num_arenas < narenas)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "method '%s' needs %zu planned arenas, %zu were given", name, narenas,
                        mem->num_arenas);
    for (size_t j = 0; j < narenas; j++) {
        size_t need = (size_t)fb_vec_i64(&v.arena_sizes, (uint32_t)(j + 1));
        if (need && (!mem->arenas || !mem->arenas[j] || !mem->arena_sizes))
            return etch_err(ETCH_ERR_INVALID_ARGUMENT, "method '%s': arena %zu missing", name, j);
        if (need && mem->arena_sizes[j] < need)
            return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED,
                            "method '%s': arena %zu has %zu bytes, needs %zu", name, j,
                            mem->arena_sizes[j], need);
        if (need && ((uintptr_t)mem->arenas[j] & 15))
            return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                            "method '%s': arena %zu is not 16-byte aligned", name, j);
    }
    size_t need_pool = etch_method_meta_pool_size(&meta);
    etch_pool pool = {(uint8_t *)mem->pool, mem->pool ? mem->pool_size : 0, 0};
    etch_method *m = POOL_ALLOC(&pool, etch_method, 1);
    if (!m)
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED,
                        "method '%s': pool of %zu bytes is too small, needs %zu", name,
                        mem->pool_size, need_pool);
    memset(m, 0, sizeof *m);
    m->program = p;
    m->meta = meta;
    m->name = etch_method_meta_name(&meta);
    if (!allocate(&pool, &v, m))
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED,
                        "method '%s': pool of %zu bytes is too small, needs %zu", name,
                        mem->pool_size, need_pool);
    m->pool = pool;
    m->inputs = (const int32_t *)(const void *)fb_vec_ptr(&v.inputs);
    m->ninputs = v.inputs.len;
    m->outputs = (const int32_t *)(const void *)fb_vec_ptr(&v.outputs);
    m->noutputs = v.outputs.len;
    memset(m->input_set, 0, m->ninputs * sizeof(bool));
    m->arenas = mem->arenas;
    m->temp = (uint8_t *)mem->temp;
    m->temp_size = mem->temp ? mem->temp_size : 0;
    m->threadpool = opts ? opts->threadpool : NULL;
    const etch_data_map *ext = opts ? opts->external_data : NULL;
    m->external_data = ext;
    if ((st = parse_values(m, &v, mem, ext)) || (st = resolve_operators(m, &v)) ||
        (st = build_chains(m, &v)) || (st = check_calls(m)) || (st = check_unwritten(m, &v)))
        return st;
    /* load-time optimization, when a unit registered it (src/optimize) */
    const etch_load_passes *passes = etch_runtime_load_passes();
    if (passes)
        passes->run(m, opts, delegates_reserve(m->program, &v));
    /* inputs of kind None need no set_input */
    for (uint32_t i = 0; i < m->ninputs; i++)
        m->input_set[i] = m->values[m->inputs[i]].tag == ETCH_VALUE_NONE;
    if ((st = init_delegates(m, &v))) {
        destroy_delegates(m);
        return st;
    }
    *out = m;
    return ETCH_OK;
}

void etch_method_free(etch_method *m) {
    if (m)
        destroy_delegates(m);
}

const etch_method_meta *etch_method_get_meta(const etch_method *m) { return &m->meta; }
size_t etch_method_num_inputs(const etch_method *m) { return m->ninputs; }
size_t etch_method_num_outputs(const etch_method *m) { return m->noutputs; }

/* ---- inputs / outputs ------------------------------------------------------------------ */

/* "[2, 3]" ("[]" for a 0-d tensor). */
static const char *shape_str(char *buf, size_t cap, size_t dim, const int64_t *sizes) {
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (size_t k = 0; k < dim && o < cap; k++)
        o += (size_t)snprintf(buf + o, cap - o, k ? ", %lld" : "%lld", (long long)sizes[k]);
    if (o < cap)
        snprintf(buf + o, cap - o, "]");
    return buf;
}

/* Refuse tensor `s` for input i: "input I: <why>: the method takes <dtype> <stored shape>
 * (<static | dynamic: upper bound, element limit>), given <dtype> <shape>". The expected side
 * comes from the program (the stored shape), not from the tensor's current (resized) one. */
static etch_status input_refused(const etch_method *m, size_t i, const etch_tensor *s,
                                 etch_status st, const char *why) {
    etch_value_info info;
    const etch_tensor *d = m->values[m->inputs[i]].u.tensor;
    if (etch_method_meta_input(&m->meta, i, &info) != ETCH_OK) { /* cannot fail once loaded */
        memset(&info, 0, sizeof info);
        info.dtype = d->dtype, info.dim = d->dim, info.dynamism = d->dynamism;
        memcpy(info.sizes, d->sizes, sizeof info.sizes);
    }
    char want[160], got[160], kind[256];
    shape_str(want, sizeof want, info.dim, info.sizes);
    shape_str(got, sizeof got, s->dim, s->sizes);
    if (info.dynamism == ETCH_SHAPE_STATIC)
        snprintf(kind, sizeof kind, "static shape");
    else if (info.dynamism == ETCH_SHAPE_DYNAMIC_BOUND)
        snprintf(kind, sizeof kind, "dynamic shape, upper bound %s: at most %lld elements", want,
                 (long long)d->capacity);
    else
        snprintf(kind, sizeof kind, "dynamic shape, unbounded: at most %lld elements",
                 (long long)d->capacity);
    return etch_err(st, "input %zu: %s: the method takes %s %s (%s), given %s %s", i, why,
                    etch_dtype_name(info.dtype), want, kind, etch_dtype_name(s->dtype), got);
}

/* The dim orders of s and d lay s's shape out alike in memory: they may differ only in
 * where dims of size 1 go (a [1, 1, 49, 10] input in order (0, 2, 1, 3) is contiguous).
 * Same rank assumed. */
static bool set_input_layout_ok(const etch_tensor *s, const etch_tensor *d) {
    unsigned a = 0, b = 0;
    for (unsigned k = 0; k < s->dim; k++)
        if (s->dim_order[k] >= s->dim) /* the caller's: not a permutation of its dims */
            return false;
    for (;;) {
        while (a < s->dim && s->sizes[s->dim_order[a]] == 1)
            a++;
        while (b < d->dim && s->sizes[d->dim_order[b]] == 1)
            b++;
        if (a == s->dim || b == d->dim)
            return a == s->dim && b == d->dim;
        if (s->dim_order[a++] != d->dim_order[b++])
            return false;
    }
}

etch_status etch_method_set_input(etch_method *m, size_t i, const etch_value *v) {
    if (!m || !v)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "set_input: NULL argument");
    if (i >= m->ninputs)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "input %zu out of range (method '%s' has %u)",
                        i, m->name, m->ninputs);
    etch_value *dst = &m->values[m->inputs[i]];
    if (dst->tag == ETCH_VALUE_NONE) {
        m->input_set[i] = true;
        return ETCH_OK;
    }
    if (v->tag != dst->tag)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "input %zu is %s, got %s", i,
                        etch_value_tag_name(dst->tag), etch_value_tag_name(v->tag));
    switch (dst->tag) {
    case ETCH_VALUE_TENSOR: {
        etch_tensor *d = dst->u.tensor;
        const etch_tensor *s = v->u.tensor;
        if (!s)
            return etch_err(ETCH_ERR_INVALID_ARGUMENT, "input %zu: NULL tensor", i);
        char why[192];
        if (s->dtype != d->dtype) {
            snprintf(why, sizeof why, "dtype %s, expected %s", etch_dtype_name(s->dtype),
                     etch_dtype_name(d->dtype));
            return input_refused(m, i, s, ETCH_ERR_INVALID_ARGUMENT, why);
        }
        if (d->flags & ETCH_TENSOR_CONSTANT)
            return etch_err(ETCH_ERR_INVALID_ARGUMENT, "input %zu is a constant tensor", i);
        if (s->dim != d->dim) {
            snprintf(why, sizeof why, "rank %u, expected %u", (unsigned)s->dim, (unsigned)d->dim);
            return input_refused(m, i, s, ETCH_ERR_INVALID_ARGUMENT, why);
        }
        if (!set_input_layout_ok(s, d))
            return etch_err(ETCH_ERR_NOT_SUPPORTED,
                            "input %zu: dim order differs from the program's", i);
        int64_t n = etch_tensor_numel(s);
        if (n > 0 && !s->data)
            return etch_err(ETCH_ERR_INVALID_ARGUMENT, "input %zu: tensor has no data", i);
        /* a FreeCall clears the pointer of a planned tensor too; copying would write to NULL */
        if ((d->flags & ETCH_TENSOR_PLANNED) && !d->data)
            return etch_err(ETCH_ERR_INVALID_STATE,
                            "input %zu: its planned memory was released by a FreeCall (reset "
                            "the method to restore it)",
                            i);
        /* borrowed data is read in place: kernels load whole elements */
        const size_t es = etch_dtype_size(s->dtype);
        if (!(d->flags & ETCH_TENSOR_PLANNED) && n > 0 && es > 1 &&
            (uintptr_t)s->data % es != 0)
            return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                            "input %zu: its data is not aligned to its %zu-byte elements", i, es);
        etch_status st = etch_tensor_resize(d, s->dim, s->sizes);
        if (st != ETCH_OK) {
            snprintf(why, sizeof why, "%s", etch_last_error()); /* the resize's reason */
            return input_refused(m, i, s, st, why);
        }
        if (d->flags & ETCH_TENSOR_PLANNED) {
            if (n > 0 && d->data != s->data)
                memmove(d->data, s->data, etch_tensor_nbytes(d));
        } else {
            d->data = s->data; /* borrowed: must outlive execute */
        }
        break;
    }
    case ETCH_VALUE_INT:
    case ETCH_VALUE_BOOL:
        if ((dst->tag == ETCH_VALUE_INT && v->u.i != dst->u.i) ||
            (dst->tag == ETCH_VALUE_BOOL && v->u.b != dst->u.b))
            return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                            "input %zu: the program was exported with %lld, got %lld", i,
                            (long long)(dst->tag == ETCH_VALUE_INT ? dst->u.i : dst->u.b),
                            (long long)(dst->tag == ETCH_VALUE_INT ? v->u.i : v->u.b));
        break;
    case ETCH_VALUE_DOUBLE:
        if (!(fabs(v->u.d - dst->u.d) <= 1e-4 + 1e-5 * fabs(dst->u.d)))
            return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                            "input %zu: the program was exported with %g, got %g", i, dst->u.d,
                            v->u.d);
        break;
    case ETCH_VALUE_STRING:
        if (v->u.str.len != dst->u.str.len || memcmp(v->u.str.ptr, dst->u.str.ptr, v->u.str.len))
            return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                            "input %zu: the program was exported with \"%s\"", i,
                            dst->u.str.ptr);
        break;
    default:
        return etch_err(ETCH_ERR_NOT_SUPPORTED, "input %zu: %s inputs are not supported", i,
                        etch_value_tag_name(dst->tag));
    }
    m->input_set[i] = true;
    return ETCH_OK;
}

etch_status etch_method_set_input_tensor(etch_method *m, size_t i, const etch_tensor *t) {
    etch_value v;
    memset(&v, 0, sizeof v);
    v.tag = ETCH_VALUE_TENSOR;
    v.u.tensor = (etch_tensor *)(uintptr_t)t;
    return etch_method_set_input(m, i, &v);
}

etch_value *etch_method_input(etch_method *m, size_t i) {
    return i < m->ninputs ? &m->values[m->inputs[i]] : NULL;
}

etch_status etch_method_set_output_data(etch_method *m, size_t i, void *data, size_t size) {
    if (i >= m->noutputs)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "output %zu out of range (method has %u)", i,
                        m->noutputs);
    etch_value *v = &m->values[m->outputs[i]];
    if (v->tag != ETCH_VALUE_TENSOR)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "output %zu is %s, not a tensor", i,
                        etch_value_tag_name(v->tag));
    etch_tensor *t = v->u.tensor;
    if (t->flags & (ETCH_TENSOR_PLANNED | ETCH_TENSOR_CONSTANT))
        return etch_err(ETCH_ERR_INVALID_STATE, "output %zu already has planned memory", i);
    size_t need = (size_t)t->capacity * etch_dtype_size(t->dtype);
    if (size < need || (!data && need))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "output %zu needs %zu bytes, got %zu", i, need,
                        size);
    t->data = data;
    return ETCH_OK;
}

const etch_value *etch_method_output(const etch_method *m, size_t i) {
    return i < m->noutputs ? &m->values[m->outputs[i]] : NULL;
}

size_t etch_method_num_chains(const etch_method *m) { return m ? m->nchains : 0; }

size_t etch_method_chain_length(const etch_method *m, size_t chain) {
    return m && chain < m->nchains ? m->chains[chain].n : 0;
}

etch_status etch_method_instruction_info(const etch_method *m, size_t chain, size_t pc,
                                         etch_instruction_info *out) {
    if (!m || !out)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "method_instruction_info: NULL argument");
    if (chain >= m->nchains || pc >= m->chains[chain].n)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "method '%s': no instruction %zu in chain %zu", m->name, pc, chain);
    const etch_instr *in = &m->chains[chain].instrs[pc];
    memset(out, 0, sizeof *out);
    out->chain = in->chained ? 0 : in->chain_len > 1 ? in->chain_len : 1;
    if (in->kind == IA_KERNEL_CALL) {
        out->op_name = m->ops[in->a].name;
        out->impl = etch_kernels_impl_of(in->kernel);
        if (!out->impl)
            out->impl = "custom";
        out->fused = in->fused ? m->ops[in->fused_op].name : NULL;
        out->skipped = in->skipped;
        out->blocked_args = in->blocked;
    } else if (in->kind == IA_DELEGATE_CALL) {
        out->op_name = m->delegates[in->a].backend->name;
        out->impl = "delegate";
    }
    return ETCH_OK;
}

void etch_method_set_interrupt(etch_method *m, etch_interrupt_fn fn, void *user_data) {
    m->interrupt = fn;
    m->interrupt_data = user_data;
}

void etch_method_set_observer(etch_method *m, etch_instruction_fn fn, void *user_data) {
    m->observer = fn;
    m->observer_data = user_data;
}

etch_status etch_method_reset(etch_method *m) {
    if (!m)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "method_reset: NULL method");
    for (uint32_t i = 0; i < m->ninputs; i++)
        m->input_set[i] = m->values[m->inputs[i]].tag == ETCH_VALUE_NONE;
    const etch_pte *pte = &m->program->pte;
    plan_view v;
    view_plan(m->program, m->meta.index, &v);
    for (uint32_t i = 0; i < v.values.len; i++) {
        fb_table ev, val;
        fb_vec_table(&v.values, i, &ev);
        if (fb_u(&ev, EVALUE_TYPE, 1, 0) != KT_TENSOR)
            continue;
        fb_table_field(&ev, EVALUE_VAL, &val);
        etch_tensor_desc d;
        etch_pte_tensor_desc(&val, &d);
        /* A MoveCall may have replaced this value by another value's tensor, and a FreeCall
         * may have cleared its data pointer: give the value its own tensor back, with its
         * serialized shape and (for planned tensors) its own planned storage, then restore
         * the initial value. Writing through the current value instead would copy the
         * initial bytes into whatever tensor was moved in (possibly smaller, or unbound). */
        etch_tensor *t = m->tensors[i];
        m->values[i].tag = ETCH_VALUE_TENSOR;
        m->values[i].u.tensor = t;
        for (int k = 0; k < d.rank; k++)
            t->sizes[k] = d.sizes[k];
        etch_tensor_update_strides(t);
        if (!d.planned)
            continue;
        /* memory id and range were checked when the method was loaded */
        t->data = (uint8_t *)m->arenas[d.memory_id - 1] + d.memory_offset;
        etch_data_entry e;
        if (d.external) {
            if (m->external_data && etch_data_map_find(m->external_data, d.fqn, &e) == ETCH_OK)
                memcpy(t->data, e.data, (size_t)d.nbytes);
        } else if (d.data_buffer_idx > 0) {
            uint64_t off = fb_vec_u64(&pte->mutable_offsets, d.data_buffer_idx);
            memcpy(t->data, pte->mutable_segment.data + off, (size_t)d.nbytes);
        }
    }
    return ETCH_OK;
}

/* ---- execute ---------------------------------------------------------------------------- */

static bool tensor_unbound(const etch_tensor *t) {
    return !t->data && etch_tensor_numel(t) > 0;
}

static etch_status check_tensor_arg(const etch_method *m, const etch_instr *in, uint32_t k,
                                    const etch_tensor *t, uint8_t mode) {
    if (mode != ARG_VIEW && tensor_unbound(t))
        return etch_err(ETCH_ERR_INVALID_STATE, "%s: argument %u is a tensor with no data",
                        m->ops[in->a].name, k);
    if ((mode == ARG_WRITE || mode == ARG_LIST_WRITE) && (t->flags & ETCH_TENSOR_CONSTANT))
        return etch_err(ETCH_ERR_INVALID_PROGRAM, "%s: argument %u writes into a constant",
                        m->ops[in->a].name, k);
    /* load time refuses a view output that is a constant, but a MoveCall can put a constant's
     * tensor into that value later: rebinding it would change the constant for every use */
    if (mode == ARG_VIEW && (t->flags & ETCH_TENSOR_CONSTANT))
        return etch_err(ETCH_ERR_INVALID_PROGRAM, "%s: argument %u would rebind a constant",
                        m->ops[in->a].name, k);
    return ETCH_OK;
}

static etch_status check_kernel_args(const etch_method *m, const etch_instr *in) {
    for (uint32_t k = 0; k < in->nargs; k++) {
        const etch_value *v = in->args[k];
        uint8_t mode = in->arg_modes[k];
        etch_status st = ETCH_OK;
        if (mode == ARG_SKIP)
            continue;
        if (v->tag == ETCH_VALUE_TENSOR) {
            st = check_tensor_arg(m, in, k, v->u.tensor, mode);
        } else if (v->tag == ETCH_VALUE_TENSOR_LIST || v->tag == ETCH_VALUE_OPTIONAL_TENSOR_LIST) {
            for (size_t j = 0; j < v->u.list.len && !st; j++)
                if (v->u.list.items[j])
                    st = check_tensor_arg(m, in, k, v->u.list.items[j]->u.tensor, mode);
        }
        if (st)
            return st;
    }
    return ETCH_OK;
}

static etch_status run_chain(etch_method *m, uint32_t c, uint64_t *budget) {
    const etch_chain *ch = &m->chains[c];
    uint32_t pc = 0;
    while (pc < ch->n) {
        if ((*budget)-- == 0)
            return etch_err(ETCH_ERR_INVALID_PROGRAM,
                            "method '%s': more than %llu instructions executed (a loop that "
                            "never ends?)",
                            m->name, (unsigned long long)ETCH_MAX_INSTRUCTIONS);
        const etch_instr *in = &ch->instrs[pc];
        uint32_t next = pc + 1;
        etch_status st = ETCH_OK;
        if (m->interrupt && m->interrupt(m->interrupt_data))
            return etch_err(ETCH_ERR_CANCELLED, "method '%s': stopped before instruction %u",
                            m->name, pc);
        switch (in->kind) {
        case IA_KERNEL_CALL:
            if (in->skipped) /* fused into the previous call */
                break;
            if ((st = check_kernel_args(m, in)))
                break;
            /* a chained run: every call's arguments as their own instructions would check */
            for (const etch_instr *x = in; x->chain_next && !st;)
                st = check_kernel_args(m, (x = &ch->instrs[x->chain_next]));
            if (st)
                break;
            etch_kernel_context_init(&m->ctx, m->ops[in->a].name, m->temp, m->temp_size,
                                     m->threadpool);
            if (in->chain_len > 1) {
                m->ctx.chain_instrs = ch->instrs;
                m->ctx.chain_ops = m->ops;
                m->ctx.chain_pc = pc;
                m->ctx.chain_len = in->chain_len;
            }
            etch_instr_bind_context(&m->ctx, in);
            in->kernel->fn(&m->ctx, in->args, in->nargs);
            st = m->ctx.status;
            break;
        case IA_DELEGATE_CALL: {
            const etch_delegate_rt *d = &m->delegates[in->a];
            etch_kernel_context_init(&m->ctx, d->backend->name, m->temp, m->temp_size,
                                     m->threadpool);
            st = d->backend->execute(d->backend->user_data, d->handle, &m->ctx, in->args,
                                     in->nargs);
            if (st && m->ctx.status == ETCH_OK)
                etch_err(st, "backend '%s' failed", d->backend->name);
            break;
        }
        case IA_MOVE_CALL:
            m->values[in->b] = m->values[in->a];
            break;
        case IA_JUMP_FALSE_CALL: {
            const etch_value *cv = &m->values[in->a];
            bool truth;
            if (cv->tag == ETCH_VALUE_BOOL) {
                truth = cv->u.b;
            } else {
                const etch_tensor *t = cv->u.tensor;
                if (t->dtype != ETCH_DTYPE_BOOL) {
                    st = etch_err(ETCH_ERR_INVALID_PROGRAM,
                                  "jump condition value %u is a %s tensor, not Bool", in->a,
                                  etch_dtype_name(t->dtype));
                    break;
                }
                if (tensor_unbound(t)) {
                    st = etch_err(ETCH_ERR_INVALID_STATE, "jump condition value %u has no data",
                                  in->a);
                    break;
                }
                truth = true;
                int64_t n = etch_tensor_numel(t);
                for (int64_t e = 0; e < n && truth; e++)
                    truth = ((const uint8_t *)t->data)[e] != 0;
            }
            if (!truth)
                next = in->b;
            break;
        }
        case IA_FREE_CALL:
            m->values[in->a].u.tensor->data = NULL;
            break;
        }
        if (st != ETCH_OK) {
            etch_err_prefix("method '%s', instruction %u", m->name, pc);
            return st;
        }
        if (m->observer)
            m->observer(m->observer_data, c, pc,
                        in->kind == IA_KERNEL_CALL ? m->ops[in->a].name : NULL);
        pc = next;
    }
    return ETCH_OK;
}

etch_status etch_method_execute(etch_method *m) {
    if (!m)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "method_execute: NULL method");
    for (uint32_t i = 0; i < m->ninputs; i++)
        if (!m->input_set[i])
            return etch_err(ETCH_ERR_INVALID_STATE, "method '%s': input %u has not been set",
                            m->name, i);
    uint64_t budget = ETCH_MAX_INSTRUCTIONS;
    for (uint32_t c = 0; c < m->nchains; c++) {
        etch_status st = run_chain(m, c, &budget);
        if (st)
            return st;
    }
    return ETCH_OK;
}

etch_status etch_method_instruction_debug(const etch_method *m, size_t chain, size_t pc,
                                          etch_instruction_debug *out) {
    if (!m)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "method_instruction_debug: NULL method");
    return etch_method_meta_instruction_debug(&m->meta, chain, pc, out);
}
