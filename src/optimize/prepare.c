/*
 * Load-time preparation (etch_kernels_register_prepare): each call site's prepare function
 * fills a buffer of the method pool once, at load, that the kernel reads at execute in place
 * of its constant (say, a weight packed into the order its inner loop reads).
 */
#include <string.h>

#include "optimize/optimize.h"

#define PREP_MAX_ARGS 16 /* call sites with more arguments are not prepared */
#define PREP_ALIGN 64

/* The parts of a method's ExecutionPlan the measuring reads. */
typedef struct plan_view {
    fb_vec values, chains, ops;
} plan_view;

static void instr_args(const fb_table *in, uint8_t *kind, fb_table *a, fb_vec *args) {
    *kind = (uint8_t)fb_u(in, INSTR_TYPE, 1, 0);
    fb_table_field(in, INSTR_ARGS, a);
    memset(args, 0, sizeof *args);
    if (*kind == IA_KERNEL_CALL)
        fb_vec_field(a, KERNEL_CALL_ARGS, 4, 4, args);
}

/* Value idx as a prepare function sees it at measuring time: scalars as they are, tensors
 * with their stored shape and flags but no data, anything else None. */
static void measure_value(const plan_view *v, int32_t idx, etch_value *out, etch_tensor *t) {
    memset(out, 0, sizeof *out);
    out->tag = ETCH_VALUE_NONE;
    if (idx < 0 || (uint32_t)idx >= v->values.len)
        return;
    fb_table ev, val;
    fb_vec_table(&v->values, (uint32_t)idx, &ev);
    uint8_t kind = (uint8_t)fb_u(&ev, EVALUE_TYPE, 1, 0);
    fb_table_field(&ev, EVALUE_VAL, &val);
    switch (kind) {
    case KT_INT:
        out->tag = ETCH_VALUE_INT;
        out->u.i = fb_i(&val, SCALAR_VAL, 8, 0);
        break;
    case KT_BOOL:
        out->tag = ETCH_VALUE_BOOL;
        out->u.b = fb_u(&val, SCALAR_VAL, 1, 0) != 0;
        break;
    case KT_DOUBLE:
        out->tag = ETCH_VALUE_DOUBLE;
        out->u.d = fb_f64(&val, SCALAR_VAL, 0);
        break;
    case KT_TENSOR: {
        etch_tensor_desc d;
        etch_pte_tensor_desc(&val, &d);
        etch_tensor_from_desc(t, &d);
        if (d.planned)
            t->flags |= ETCH_TENSOR_PLANNED;
        else if (d.external || d.data_buffer_idx > 0)
            t->flags |= ETCH_TENSOR_CONSTANT;
        out->tag = ETCH_VALUE_TENSOR;
        out->u.tensor = t;
        break;
    }
    default:
        break;
    }
}

/* Pool bytes the prepare functions registered now ask for, over every call site. */
size_t etch_method_prepare_measure(const etch_method_meta *meta) {
    fb_table plan;
    plan_view pv, *v = &pv;
    etch_program_plan(meta->program, meta->index, &plan);
    fb_vec_field(&plan, PLAN_VALUES, 4, 4, &pv.values);
    fb_vec_field(&plan, PLAN_CHAINS, 4, 4, &pv.chains);
    fb_vec_field(&plan, PLAN_OPERATORS, 4, 4, &pv.ops);
    size_t total = 0;
    for (uint32_t o = 0; o < v->ops.len; o++) {
        fb_table op;
        char name[128];
        fb_vec_table(&v->ops, o, &op);
        etch_operator_full_name(&op, name, sizeof name);
        const etch_kernel *kern = etch_kernels_find(name, strlen(name));
        etch_kernel_prepare_fn fn = kern ? etch_kernels_prepare_of(kern->fn) : NULL;
        if (!fn)
            continue;
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
                if (kind != IA_KERNEL_CALL || args.len > PREP_MAX_ARGS ||
                    (uint32_t)fb_i(&a, KERNEL_CALL_OP_INDEX, 4, 0) != o)
                    continue;
                etch_value vals[PREP_MAX_ARGS], *ptrs[PREP_MAX_ARGS];
                etch_tensor ts[PREP_MAX_ARGS];
                for (uint32_t j = 0; j < args.len; j++) {
                    measure_value(v, fb_vec_i32(&args, j), &vals[j], &ts[j]);
                    ptrs[j] = &vals[j];
                }
                etch_kernel_context ctx;
                etch_kernel_context_init(&ctx, name, NULL, 0, NULL);
                size_t want = fn(&ctx, ptrs, args.len, NULL, 0);
                if (want)
                    total += want + PREP_ALIGN;
            }
        }
    }
    return total;
}

/* The pages of a constant a prepared buffer stands in for (etch_kernel_prepared_replaces),
 * given back when they lie in the program's or the external data's mapped file. */
static void release_constant(const etch_method *m, const etch_value *v) {
    if (!v || v->tag != ETCH_VALUE_TENSOR || !v->u.tensor)
        return;
    const etch_tensor *t = v->u.tensor;
    if (!(t->flags & ETCH_TENSOR_CONSTANT) || !t->data)
        return;
    const size_t n = etch_tensor_nbytes(t);
    if (!etch_image_release(&m->program->image, t->data, n) && m->external_data)
        etch_image_release(&m->external_data->image, t->data, n);
}

/* Call each call site's prepare function into the pool, keeping `reserve` bytes free; a call
 * site that does not fit (or whose prepare fails) runs unprepared. Constants a prepared
 * buffer stands in for have their mapped pages given back right away, so that loading does
 * not hold both copies at once. */
void etch_method_prepare_calls(etch_method *m, size_t reserve) {
    for (uint32_t c = 0; c < m->nchains; c++) {
        for (uint32_t k = 0; k < m->chains[c].n; k++) {
            etch_instr *in = &m->chains[c].instrs[k];
            if (in->kind != IA_KERNEL_CALL || in->skipped || !in->kernel ||
                in->nargs > PREP_MAX_ARGS)
                continue;
            etch_kernel_prepare_fn fn = etch_kernels_prepare_of(in->kernel->fn);
            if (!fn)
                continue;
            etch_kernel_context_init(&m->ctx, m->ops[in->a].name, NULL, 0, m->threadpool);
            m->ctx.blocked = in->blocked;
            size_t want = fn(&m->ctx, in->args, in->nargs, NULL, 0);
            if (!want || m->ctx.status != ETCH_OK)
                continue;
            const size_t mark = m->pool.used;
            void *buf = etch_pool_alloc(&m->pool, want, PREP_ALIGN);
            if (!buf || m->pool.size - m->pool.used < reserve) {
                m->pool.used = mark;
                continue;
            }
            m->ctx.blocked = in->blocked;
            m->ctx.replaces = 0;
            size_t got = fn(&m->ctx, in->args, in->nargs, buf, want);
            if (!got || got > want || m->ctx.status != ETCH_OK) {
                m->pool.used = mark;
                continue;
            }
            for (uint32_t a = 0; a < in->nargs && a < 64; a++)
                if ((m->ctx.replaces >> a) & 1u)
                    release_constant(m, in->args[a]);
            in->prepared = buf;
            in->prepared_size = got;
            /* call sites sharing a weight (repeated layers) share one copy */
            for (uint32_t c2 = 0; c2 <= c && in->prepared == buf; c2++)
                for (uint32_t k2 = 0; k2 < (c2 == c ? k : m->chains[c2].n); k2++) {
                    const etch_instr *o = &m->chains[c2].instrs[k2];
                    if (o->prepared && o->prepared_size == got && o->kernel->fn == in->kernel->fn &&
                        memcmp(o->prepared, buf, got) == 0) {
                        in->prepared = o->prepared;
                        m->pool.used = mark;
                        break;
                    }
                }
        }
    }
    etch_kernel_context_init(&m->ctx, "", NULL, 0, m->threadpool);
}
