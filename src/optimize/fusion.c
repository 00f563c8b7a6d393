/*
 * Operator fusion at method load.
 *
 * A kernel call P whose kernel was registered with ETCH_KERNEL_FUSES_ACTIVATION, followed in
 * the same chain by an activation A (aten::relu.out, clamp.out, hardtanh.out, gelu.out,
 * silu.out, sigmoid.out) that reads P's Float result v, becomes one call: P writes A's output
 * directly and applies A as its epilogue (etch_kernel_epilogue), and A turns into a no-op
 * that execute skips. The program file is not touched, so it stays a portable .pte.
 *
 * The rewrite is made only where it provably computes what the two calls compute:
 *   - v is a Float tensor written by P alone (every occurrence of v in P's arguments is a
 *     written tensor: its out slot and return slot; P writes no other tensor) and read by A
 *     alone: no other instruction, tensor list, Move, Free, jump condition, delegate, method
 *     input or output refers to it;
 *   - A is a portable or optimized kernel (their math is the epilogue's), reads exactly v,
 *     writes a distinct Float tensor `out` with v's layout (rank, sizes, dim order, dynamism,
 *     capacity: any resize that succeeds on v succeeds on out and vice versa), and is not a
 *     jump target; `out` is never rebound at run time (Move target, view output, delegate
 *     argument, Free);
 *   - A's scalar arguments are fixed program values (nothing may overwrite them) that the
 *     activation accepts as is: clamp/hardtanh bounds are Int or Double, not NaN, within
 *     Float's range; gelu's approximate is "none" or "tanh". Anything the activation
 *     kernel would reject at run time is left to it.
 * Then one of two rewrites:
 *   direct    P writes `out` in place of v. Needs P's inputs not to alias `out`: not the same
 *             value, not in a tensor list, not rebound at run time, and not overlapping its
 *             storage. (A memory planner may well give `out` the bytes of an input of P that
 *             dies at P: P would read what it has begun to overwrite.)
 *   redirect  P keeps writing v, and the instructions after A that read `out` read v
 *             instead. Needs a method without jumps (so instruction order is execution
 *             order), `out` referenced by nothing before A and by no list, Move, method input
 *             or output, and v's storage left alone until `out`'s last reader: no tensor
 *             that overlaps it is referenced in between (nor one rebound at run time).
 *             This is what makes fusion work with tight memory plans.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "optimize/optimize.h"

enum { ACT_OP_NONE = 0, ACT_OP_RELU, ACT_OP_CLAMP, ACT_OP_HARDTANH, ACT_OP_GELU, ACT_OP_SILU,
       ACT_OP_SIGMOID };

static const struct act_op {
    const char *name;
    uint8_t kind;
    uint32_t nargs; /* with the out tensor and the return slot */
} act_ops[] = {
    {"aten::relu.out", ACT_OP_RELU, 3},         {"aten::clamp.out", ACT_OP_CLAMP, 5},
    {"aten::hardtanh.out", ACT_OP_HARDTANH, 5}, {"aten::gelu.out", ACT_OP_GELU, 4},
    {"aten::silu.out", ACT_OP_SILU, 3},         {"aten::sigmoid.out", ACT_OP_SIGMOID, 3},
};

/* What the whole method does with a value. */
typedef struct vinfo {
    uint32_t uses; /* references by instructions, tensor lists, inputs and outputs */
    uint8_t flags;
} vinfo;

enum {
    V_IO = 1u << 0,      /* a method input or output */
    V_WRITTEN = 1u << 1, /* something may overwrite this (non-tensor) value at run time */
    V_REBOUND = 1u << 2, /* its slot or data pointer may change at run time */
    V_LISTED = 1u << 3,  /* an item of a tensor list */
    V_MOVED = 1u << 4,   /* a Move's source */
    V_FUSED = 1u << 5,   /* v or out of a fusion made: its references (counted before) moved */
    V_WRITES = 1u << 6,  /* a tensor some instruction writes (or binds), or a method input */
};

typedef struct fuse_ctx {
    vinfo *info;
    bool has_jumps;
} fuse_ctx;

size_t etch_method_fuse_scratch(uint32_t nvalues) {
    return (size_t)nvalues * sizeof(vinfo) + _Alignof(vinfo);
}

static const struct act_op *act_op_of(const etch_op_rt *op) {
    const char *impl = etch_kernels_impl_of(op->kernel);
    /* a custom kernel registered under an activation's name may compute something else */
    if (!impl || (strcmp(impl, "portable") != 0 && strcmp(impl, "optimized") != 0))
        return NULL;
    for (size_t i = 0; i < sizeof act_ops / sizeof act_ops[0]; i++)
        if (strcmp(op->name, act_ops[i].name) == 0)
            return &act_ops[i];
    return NULL;
}

static uint32_t index_of(const etch_method *m, const etch_value *v) {
    return (uint32_t)(v - m->values);
}

static void use(vinfo *info, uint32_t i, uint8_t flags) {
    if (info[i].uses < UINT32_MAX)
        info[i].uses++;
    info[i].flags |= flags;
}

/* Signature letters whose argument the kernel only reads. */
static bool sig_read_only(char c) {
    return c && strchr("TtSsIiDdBbLlFQXON", c) != NULL;
}

static void scan_method(const etch_method *m, fuse_ctx *f) {
    vinfo *info = f->info;
    memset(info, 0, sizeof(vinfo) * m->nvalues);
    f->has_jumps = false;
    for (uint32_t i = 0; i < m->ninputs; i++)
        use(info, (uint32_t)m->inputs[i], V_IO | V_WRITES);
    for (uint32_t i = 0; i < m->noutputs; i++)
        use(info, (uint32_t)m->outputs[i], V_IO);
    for (uint32_t i = 0; i < m->nvalues; i++) {
        const etch_value *v = &m->values[i];
        if (v->tag != ETCH_VALUE_TENSOR_LIST && v->tag != ETCH_VALUE_OPTIONAL_TENSOR_LIST)
            continue;
        for (size_t k = 0; k < v->u.list.len; k++)
            if (v->u.list.items[k])
                use(info, index_of(m, v->u.list.items[k]), V_LISTED);
    }
    for (uint32_t c = 0; c < m->nchains; c++) {
        etch_chain *ch = &m->chains[c];
        for (uint32_t pc = 0; pc < ch->n; pc++) {
            etch_instr *in = &ch->instrs[pc];
            if (in->skipped)
                continue; /* fused away (a rescan after fusion): its references moved */
            switch (in->kind) {
            case IA_KERNEL_CALL: {
                const char *sig = in->kernel ? in->kernel->signature : NULL;
                size_t fixed = sig ? strcspn(sig, "*") : 0;
                for (uint32_t k = 0; k < in->nargs; k++) {
                    uint8_t fl = 0;
                    if (!sig || k >= fixed || !sig_read_only(sig[k]))
                        fl |= V_WRITTEN;
                    uint8_t mode = in->arg_modes[k];
                    const etch_value *x = in->args[k];
                    if (mode == ARG_VIEW)
                        fl |= V_REBOUND;
                    if (mode == ARG_WRITE || mode == ARG_VIEW)
                        fl |= V_WRITES;
                    if (mode == ARG_LIST_WRITE)
                        for (size_t j = 0; j < x->u.list.len; j++)
                            if (x->u.list.items[j])
                                info[index_of(m, x->u.list.items[j])].flags |= V_WRITES;
                    use(info, index_of(m, x), fl);
                }
                break;
            }
            case IA_DELEGATE_CALL:
                for (uint32_t k = 0; k < in->nargs; k++)
                    use(info, index_of(m, in->args[k]), V_WRITTEN | V_REBOUND);
                break;
            case IA_MOVE_CALL:
                use(info, in->a, V_MOVED);
                use(info, in->b, V_WRITTEN | V_REBOUND);
                break;
            case IA_JUMP_FALSE_CALL:
                f->has_jumps = true;
                use(info, in->a, 0);
                if (in->b < ch->n)
                    ch->instrs[in->b].jump_target = true;
                break;
            case IA_FREE_CALL:
                use(info, in->a, V_REBOUND);
                break;
            default:
                break;
            }
        }
    }
}

static bool same_layout(const etch_tensor *a, const etch_tensor *b) {
    if (a->dim != b->dim || a->dtype != b->dtype || a->dynamism != b->dynamism ||
        a->capacity != b->capacity)
        return false;
    for (unsigned i = 0; i < a->dim; i++)
        if (a->sizes[i] != b->sizes[i] || a->dim_order[i] != b->dim_order[i])
            return false;
    return true;
}

bool etch_tensor_bytes_overlap(const etch_tensor *a, const etch_tensor *b) {
    uintptr_t a0 = (uintptr_t)a->data, b0 = (uintptr_t)b->data;
    uintptr_t a1 = a0 + (uintptr_t)a->capacity * etch_dtype_size(a->dtype);
    uintptr_t b1 = b0 + (uintptr_t)b->capacity * etch_dtype_size(b->dtype);
    return a0 < b1 && b0 < a1;
}

/* Could `in` (read by P) share storage with `out` (written by P after fusion)? */
static bool may_overlap(const etch_tensor *in, const etch_tensor *out) {
    if (in->flags & ETCH_TENSOR_CONSTANT)
        return false; /* out is never a constant (checked), so never the same bytes */
    if (!in->data || !out->data)
        /* unbound at load: caller buffers (borrowed inputs, set_output_data); two of them
         * may be the same buffer, a caller buffer is not one of the planned arenas */
        return !in->data && !out->data;
    return etch_tensor_bytes_overlap(in, out);
}

/* A tensor P reads: acceptable next to `out`? */
static bool input_ok(const etch_method *m, const vinfo *info, const etch_value *x,
                     const etch_value *v, const etch_value *out) {
    if (x == v || x == out)
        return false;
    if (x->tag != ETCH_VALUE_TENSOR)
        return true;
    if (info[index_of(m, x)].flags & V_REBOUND)
        return false;
    return !may_overlap(x->u.tensor, out->u.tensor);
}

/* P writes v (and no other tensor), never reads it. */
static bool producer_shape_ok(const etch_instr *p, const etch_value *v) {
    uint32_t nv = 0;
    for (uint32_t k = 0; k < p->nargs; k++) {
        uint8_t mode = p->arg_modes[k];
        if (p->args[k] == v) {
            if (mode != ARG_WRITE)
                return false; /* P also reads v */
            nv++;
        } else if (mode != ARG_SKIP && mode != ARG_READ && mode != ARG_LIST_READ) {
            return false; /* another written tensor, a view, a written list */
        }
    }
    return nv > 0;
}

/* Direct rewrite: P's inputs (v excluded) do not alias `out`. */
static bool direct_ok(const etch_method *m, const vinfo *info, const etch_instr *p,
                      const etch_value *v, const etch_value *out) {
    for (uint32_t k = 0; k < p->nargs; k++) {
        const etch_value *x = p->args[k];
        if (x == v || p->arg_modes[k] == ARG_SKIP)
            continue;
        if (x->tag == ETCH_VALUE_TENSOR_LIST || x->tag == ETCH_VALUE_OPTIONAL_TENSOR_LIST) {
            for (size_t j = 0; j < x->u.list.len; j++)
                if (x->u.list.items[j] && !input_ok(m, info, x->u.list.items[j], v, out))
                    return false;
        } else if (!input_ok(m, info, x, v, out)) {
            return false;
        }
    }
    return true;
}

/* Instruction after (c, pc) in execution order of a method without jumps; false at the end. */
static bool next_instr(const etch_method *m, uint32_t *c, uint32_t *pc) {
    if (++*pc < m->chains[*c].n)
        return true;
    while (++*c < m->nchains)
        if (m->chains[*c].n) {
            *pc = 0;
            return true;
        }
    return false;
}

/* Does kernel call `in` write all of `x`'s bytes (a statically shaped out tensor that covers
 * them; in-place operators, named "..._", may write only part)? */
bool etch_instr_overwrites(const etch_method *m, const etch_instr *in, const etch_tensor *x) {
    const char *name = m->ops[in->a].name;
    size_t base = strcspn(name, ".");
    if (base && name[base - 1] == '_')
        return false;
    uintptr_t x0 = (uintptr_t)x->data;
    uintptr_t x1 = x0 + (uintptr_t)x->capacity * etch_dtype_size(x->dtype);
    for (uint32_t j = 0; j < in->nargs; j++) {
        const etch_value *w = in->args[j];
        if (in->arg_modes[j] != ARG_WRITE || w->tag != ETCH_VALUE_TENSOR)
            continue;
        const etch_tensor *t = w->u.tensor;
        uintptr_t t0 = (uintptr_t)t->data;
        uintptr_t t1 = t0 + (uintptr_t)t->capacity * etch_dtype_size(t->dtype);
        if (t->data && t->dynamism == ETCH_SHAPE_STATIC && t0 <= x0 && x1 <= t1)
            return true;
    }
    return false;
}

/* In a method without jumps: is `x` read after instruction (c, pc) before an instruction
 * overwrites all of its bytes (or after the method, as an output)? */
static bool read_before_overwritten(const etch_method *m, const vinfo *info, uint32_t c,
                                    uint32_t pc, const etch_value *x) {
    const etch_tensor *xt = x->u.tensor;
    while (next_instr(m, &c, &pc)) {
        const etch_instr *in = &m->chains[c].instrs[pc];
        if (in->skipped)
            continue;
        switch (in->kind) {
        case IA_KERNEL_CALL:
        case IA_DELEGATE_CALL:
            for (uint32_t j = 0; j < in->nargs; j++) {
                const etch_value *a = in->args[j];
                if (a == x)
                    return true;
                if (a->tag == ETCH_VALUE_TENSOR_LIST || a->tag == ETCH_VALUE_OPTIONAL_TENSOR_LIST)
                    for (size_t i = 0; i < a->u.list.len; i++)
                        if (a->u.list.items[i] == x)
                            return true;
            }
            if (in->kind == IA_KERNEL_CALL && etch_instr_overwrites(m, in, xt))
                return false;
            break;
        case IA_MOVE_CALL:
        case IA_FREE_CALL:
            if (&m->values[in->a] == x || (in->kind == IA_MOVE_CALL && &m->values[in->b] == x))
                return true;
            break;
        default:
            break;
        }
    }
    return (info[index_of(m, x)].flags & V_IO) != 0; /* outputs are read by the caller */
}

/*
 * After instruction (c, pc), is `t`'s storage read through a value that no instruction
 * writes? An exporter may give a view the bytes of its source instead of an instruction (a
 * "planned alias"): its readers read whatever the source left there. Tensors that some
 * instruction writes, and method inputs, bring their own bytes; a tensor only ever read (or
 * handed to a delegate or to a kernel without a signature) might be such an alias, unless
 * something overwrites its bytes before it is read. `a` and `b`: the pair's own values.
 */
static bool read_through_alias(const etch_method *m, const fuse_ctx *f, uint32_t c,
                               uint32_t pc, const etch_value *a, const etch_value *b,
                               const etch_tensor *t) {
    for (uint32_t i = 0; i < m->nvalues; i++) {
        const etch_value *x = &m->values[i];
        if (x == a || x == b || x->tag != ETCH_VALUE_TENSOR || !f->info[i].uses ||
            (f->info[i].flags & V_WRITES))
            continue;
        const etch_tensor *xt = x->u.tensor;
        if (!xt->data || (xt->flags & ETCH_TENSOR_CONSTANT) || !etch_tensor_bytes_overlap(xt, t))
            continue;
        if (f->has_jumps || read_before_overwritten(m, f->info, c, pc, x))
            return true;
    }
    return false;
}

/* A tensor referenced while `out`'s readers are redirected to v: must leave v's bytes alone. */
static bool clear_of(const etch_method *m, const vinfo *info, const etch_value *x,
                     const etch_tensor *vt) {
    if (x->tag != ETCH_VALUE_TENSOR)
        return true;
    if (info[index_of(m, x)].flags & V_REBOUND)
        return false;
    const etch_tensor *t = x->u.tensor;
    return !t->data || (t->flags & ETCH_TENSOR_CONSTANT) || !etch_tensor_bytes_overlap(t, vt);
}

/* Redirect rewrite (A is instruction k + 1 of chain c); with `apply`, make it. */
static bool redirect(etch_method *m, const fuse_ctx *f, uint32_t c, uint32_t k,
                     etch_value *v, etch_value *out, bool apply) {
    const vinfo *oi = &f->info[index_of(m, out)];
    const etch_tensor *vt = v->u.tensor;
    if (f->has_jumps || (oi->flags & (V_IO | V_REBOUND | V_LISTED | V_MOVED)) ||
        !(vt->flags & ETCH_TENSOR_PLANNED) || !vt->data ||
        ((uintptr_t)vt->data % _Alignof(float)) != 0)
        return false;
    /* out's bytes are no longer written: nothing may read them through an alias */
    if (!apply && read_through_alias(m, f, c, k + 1, v, out, out->u.tensor))
        return false;
    uint32_t seen = 2; /* A's out and return slots */
    uint32_t cc = c, pc = k + 1;
    while (seen < oi->uses && next_instr(m, &cc, &pc)) {
        etch_instr *in = &m->chains[cc].instrs[pc];
        if (in->kind != IA_KERNEL_CALL && in->kind != IA_DELEGATE_CALL)
            continue; /* Moves and Frees do not involve out (flags above) nor write data */
        for (uint32_t j = 0; j < in->nargs; j++) {
            etch_value *x = in->args[j];
            if (x == out) {
                if (in->kind != IA_KERNEL_CALL || in->arg_modes[j] == ARG_VIEW)
                    return false;
                seen++;
                if (apply)
                    in->args[j] = v;
            } else if (x->tag == ETCH_VALUE_TENSOR_LIST ||
                       x->tag == ETCH_VALUE_OPTIONAL_TENSOR_LIST) {
                for (size_t i = 0; i < x->u.list.len; i++)
                    if (x->u.list.items[i] && !clear_of(m, f->info, x->u.list.items[i], vt))
                        return false;
            } else if (x == v || !clear_of(m, f->info, x, vt)) {
                return false;
            }
        }
    }
    /* every reference of out is A's or after it */
    return seen == oi->uses;
}

/* A Float bound of clamp/hardtanh as the portable kernel converts it; false when the value
 * is absent where required, may change at run time, or is one the kernel handles otherwise
 * (NaN, beyond Float's range, Bool). */
static bool float_bound(const etch_method *m, const vinfo *info, const etch_value *b,
                        bool allow_none, double none_value, double *out) {
    if (b->tag == ETCH_VALUE_NONE && allow_none) {
        *out = none_value;
        return true;
    }
    if (info[index_of(m, b)].flags & V_WRITTEN)
        return false;
    if (b->tag == ETCH_VALUE_INT) {
        *out = (double)(float)b->u.i;
        return true;
    }
    if (b->tag != ETCH_VALUE_DOUBLE || isnan(b->u.d) ||
        (isfinite(b->u.d) && fabs(b->u.d) > FLT_MAX))
        return false;
    *out = (double)(float)b->u.d;
    return true;
}

static bool epilogue_of(const etch_method *m, const vinfo *info, const struct act_op *op,
                        const etch_instr *a, etch_epilogue *e) {
    memset(e, 0, sizeof *e);
    switch (op->kind) {
    case ACT_OP_RELU: e->act = ETCH_ACT_RELU; return true;
    case ACT_OP_SILU: e->act = ETCH_ACT_SILU; return true;
    case ACT_OP_SIGMOID: e->act = ETCH_ACT_SIGMOID; return true;
    case ACT_OP_GELU: {
        const etch_value *s = a->args[1];
        if (s->tag != ETCH_VALUE_STRING || !s->u.str.ptr ||
            (info[index_of(m, s)].flags & V_WRITTEN) || s->u.str.len != 4)
            return false;
        if (memcmp(s->u.str.ptr, "none", 4) == 0)
            e->act = ETCH_ACT_GELU;
        else if (memcmp(s->u.str.ptr, "tanh", 4) == 0)
            e->act = ETCH_ACT_GELU_TANH;
        else
            return false;
        return true;
    }
    case ACT_OP_CLAMP:
    case ACT_OP_HARDTANH: {
        bool none_ok = op->kind == ACT_OP_CLAMP;
        if (none_ok && a->args[1]->tag == ETCH_VALUE_NONE && a->args[2]->tag == ETCH_VALUE_NONE)
            return false; /* clamp fails without bounds */
        e->act = ETCH_ACT_CLAMP;
        return float_bound(m, info, a->args[1], none_ok, -INFINITY, &e->lo) &&
               float_bound(m, info, a->args[2], none_ok, INFINITY, &e->hi);
    }
    default:
        return false;
    }
}

/* Fuse instruction k + 1 of chain c into instruction k when allowed. */
static bool try_fuse(etch_method *m, const fuse_ctx *f, uint32_t c, uint32_t k) {
    vinfo *info = f->info;
    etch_chain *ch = &m->chains[c];
    etch_instr *p = &ch->instrs[k], *a = &ch->instrs[k + 1];
    if (p->kind != IA_KERNEL_CALL || a->kind != IA_KERNEL_CALL || p->skipped || p->fused ||
        a->fused || a->jump_target)
        return false;
    if (!(m->ops[p->a].flags & ETCH_KERNEL_FUSES_ACTIVATION))
        return false;
    const struct act_op *op = act_op_of(&m->ops[a->a]);
    if (!op || a->nargs != op->nargs)
        return false;
    etch_value *v = a->args[0], *out = a->args[a->nargs - 2];
    if (a->args[a->nargs - 1] != out || out == v || v->tag != ETCH_VALUE_TENSOR ||
        out->tag != ETCH_VALUE_TENSOR)
        return false;
    const etch_tensor *vt = v->u.tensor, *ot = out->u.tensor;
    if (vt->dtype != ETCH_DTYPE_FLOAT || !same_layout(vt, ot) ||
        ((vt->flags | ot->flags) & ETCH_TENSOR_CONSTANT))
        return false;
    vinfo *vi = &info[index_of(m, v)], *oi = &info[index_of(m, out)];
    if ((vi->flags & (V_IO | V_REBOUND | V_FUSED)) || (oi->flags & (V_REBOUND | V_FUSED)))
        return false;
    /* v is referenced by P (written) and by A's input, nowhere else */
    uint32_t in_p = 0;
    for (uint32_t j = 0; j < p->nargs; j++)
        in_p += p->args[j] == v;
    if (vi->uses != in_p + 1 || !producer_shape_ok(p, v))
        return false;
    /* v's bytes, no longer written (direct) or now activated (redirect), read by no alias */
    if (read_through_alias(m, f, c, k + 1, v, out, vt))
        return false;
    etch_epilogue e;
    if (!epilogue_of(m, info, op, a, &e))
        return false;
    /* the tensor P ends up writing: bound at load and Float-aligned (a program may plan a
     * tensor at any offset; a fused kernel applies its epilogue to it as float data) */
    bool direct = ot->data && ((uintptr_t)ot->data % _Alignof(float)) == 0 &&
                  direct_ok(m, info, p, v, out);
    if (direct) {
        for (uint32_t j = 0; j < p->nargs; j++)
            if (p->args[j] == v)
                p->args[j] = out;
    } else if (redirect(m, f, c, k, v, out, false)) {
        redirect(m, f, c, k, v, out, true);
    } else {
        return false;
    }
    vi->flags |= V_FUSED;
    oi->flags |= V_FUSED;
    p->fused = true;
    p->fused_op = a->a;
    p->epilogue = e;
    a->skipped = true;
    return true;
}

uint32_t etch_method_fuse(etch_method *m, etch_pool *pool) {
    bool producers = false, activations = false;
    for (uint32_t i = 0; i < m->nops; i++) {
        if (!m->ops[i].kernel)
            continue;
        producers |= (m->ops[i].flags & ETCH_KERNEL_FUSES_ACTIVATION) != 0;
        activations |= act_op_of(&m->ops[i]) != NULL;
    }
    if (!producers || !activations || !m->nvalues)
        return 0;
    vinfo *info = (vinfo *)etch_pool_alloc(pool, sizeof(vinfo) * m->nvalues, _Alignof(vinfo));
    if (!info)
        return 0; /* no room: run unfused */
    fuse_ctx f = {info, false};
    scan_method(m, &f);
    uint32_t fused = 0;
    for (uint32_t c = 0; c < m->nchains; c++) {
        etch_chain *ch = &m->chains[c];
        for (uint32_t k = 0; k + 1 < ch->n; k++)
            if (try_fuse(m, &f, c, k)) {
                fused++;
                k++; /* the skipped activation cannot start another pair */
            }
    }
    return fused;
}

/* ---- chained calls (etch/kernel.h) ----------------------------------------------------------
 * At a kernel call whose kernel has a chain function, the run of calls c[0..n) that follow it:
 * each c[i+1] is the next call that is not fused away (only activations fused into calls of
 * the run lie between), no instruction from c[1] on is a jump target, and every tensor a call
 * before the last writes (its intermediates: at most CHAIN_WRITES per call, written at out or
 * return slots only, no view, nothing else written) is storage of its own that no method
 * input or output, list, Move, Free, run-time rebinding or constant involves, referred to
 * only by its writer and by later calls of the run (reading it), with no other value read on
 * its bytes after its last reader (read_through_alias). The last call writes one tensor y,
 * which must share no bytes with anything the calls read besides the intermediates (the
 * chained kernel writes y while it still reads them): the same test as the direct fusion's,
 * except that a run may read an et_view's result (rebound at run time) when the view's base
 * can be checked instead (view_base: every rebinding of it an et_view of that one base).
 * Which call reads which intermediate is the chain function's to check: the runtime offers
 * the longest such run and the function decides how many of its calls (c[0] first) it runs
 * as one; that prefix must satisfy the same rule. */

#define CHAIN_WRITES 4 /* tensors one call of a run may write */

static void kernel_call_of(const etch_instr *in, etch_kernel_call *c) {
    c->kernel = in->kernel;
    c->args = in->args;
    c->nargs = in->nargs;
    c->prepared = in->prepared;
    c->prepared_size = in->prepared ? in->prepared_size : 0;
    c->epilogue = in->fused && in->epilogue.act != ETCH_ACT_NONE ? &in->epilogue : NULL;
    c->blocked = in->blocked;
}

/* The distinct tensors kernel call `in` writes (at ARG_WRITE slots, and the items of one
 * returned tensor list, *ret, which must be tensors written at those slots too: the out and
 * return slots of an operator with several results), at most `cap`, in w[]; their count, or
 * -1 when it writes anything else (a view, a list of other tensors) or more than cap. */
static int written_tensors(const etch_instr *in, const etch_value **w, int cap,
                           const etch_value **ret) {
    int n = 0;
    *ret = NULL;
    for (uint32_t k = 0; k < in->nargs; k++) {
        uint8_t mode = in->arg_modes[k];
        const etch_value *v = in->args[k];
        if (mode == ARG_SKIP || mode == ARG_READ || mode == ARG_LIST_READ)
            continue;
        if (mode == ARG_LIST_WRITE && v->tag == ETCH_VALUE_TENSOR_LIST && !*ret) {
            *ret = v;
            continue;
        }
        if (mode != ARG_WRITE || v->tag != ETCH_VALUE_TENSOR)
            return -1;
        bool seen = false;
        for (int j = 0; j < n; j++)
            seen |= w[j] == v;
        if (seen)
            continue;
        if (n == cap)
            return -1;
        w[n++] = v;
    }
    for (size_t j = 0; *ret && j < (*ret)->u.list.len; j++) {
        bool seen = false;
        for (int q = 0; q < n; q++)
            seen |= w[q] == (*ret)->u.list.items[j];
        if (!seen)
            return -1;
    }
    return n;
}

/* The one tensor kernel call `in` writes (no list), or NULL. */
static const etch_value *only_written(const etch_instr *in) {
    const etch_value *w[1], *ret;
    return written_tensors(in, w, 1, &ret) == 1 && !ret ? w[0] : NULL;
}

/* The call after (c, pc) that is not fused away, with no jump target up to it; UINT32_MAX when
 * there is none (or something else comes first). */
static uint32_t next_call(const etch_chain *ch, uint32_t pc) {
    for (uint32_t q = pc + 1; q < ch->n; q++) {
        const etch_instr *in = &ch->instrs[q];
        if (in->kind != IA_KERNEL_CALL || in->jump_target)
            return UINT32_MAX;
        if (!in->skipped)
            return in->kernel ? q : UINT32_MAX;
    }
    return UINT32_MAX;
}

/* The candidate run at chain c: calls run[0..n) and what each writes. */
typedef struct chain_cand {
    uint32_t run[ETCH_CHAIN_MAX];
    uint32_t n;
    const etch_value *w[ETCH_CHAIN_MAX][CHAIN_WRITES];
    const etch_value *ret[ETCH_CHAIN_MAX]; /* a returned list of some of w (or NULL) */
    int nw[ETCH_CHAIN_MAX];
    uint32_t need[ETCH_CHAIN_MAX]; /* the shortest run in which call i's intermediates are
                                      read by the run alone (UINT32_MAX: in none) */
} chain_cand;

/* The shortest run length in which v, written by call i of the candidate, may be an
 * intermediate; UINT32_MAX when none. A tensor nothing reads after its writer may be one
 * too (the chained kernel may leave it unwritten: no one looks). */
static uint32_t intermediate_need(const etch_method *m, const fuse_ctx *f, uint32_t c,
                                  const chain_cand *r, uint32_t i, const etch_value *v) {
    const vinfo *vi = &f->info[index_of(m, v)];
    const etch_tensor *vt = v->u.tensor;
    const etch_value *ret = r->ret[i];
    uint32_t refs = 0, last = UINT32_MAX;
    if (ret) { /* the writer's returned list: referred to by the writer alone */
        const vinfo *li = &f->info[index_of(m, ret)];
        if (li->uses != 1 || (li->flags & (V_IO | V_REBOUND | V_MOVED)))
            return UINT32_MAX;
        for (size_t j = 0; j < ret->u.list.len; j++)
            refs += ret->u.list.items[j] == v; /* its membership counts as a use */
    }
    if ((vi->flags & (V_IO | V_REBOUND | V_MOVED)) || ((vi->flags & V_LISTED) && !refs) ||
        (vt->flags & ETCH_TENSOR_CONSTANT))
        return UINT32_MAX;
    const etch_chain *ch = &m->chains[c];
    for (uint32_t j = i; j < r->n; j++) {
        const etch_instr *in = &ch->instrs[r->run[j]];
        for (uint32_t k = 0; k < in->nargs; k++) {
            if (in->args[k] != v)
                continue;
            if (j > i && in->arg_modes[k] != ARG_READ)
                return UINT32_MAX; /* written again, or handed over otherwise */
            refs++;
            if (j > i)
                last = j;
        }
    }
    if (last == UINT32_MAX)
        last = i; /* read by none */
    /* referred to by the run alone; no alias reading its bytes after its last reader */
    if (vi->uses != refs || read_through_alias(m, f, c, r->run[last], v, v, vt))
        return UINT32_MAX;
    return (last > i ? last : i + 1) + 1;
}

/* Are the intermediates of the run's first n calls read by those calls alone? */
static bool chain_prefix_ok(const chain_cand *r, uint32_t n) {
    if (n < 2 || n > r->n)
        return false;
    for (uint32_t i = 0; i + 1 < n; i++)
        if (r->nw[i] < 1 || r->need[i] > n)
            return false;
    return true;
}

/* x, a value some instruction rebinds (V_REBOUND): when every rebinding is an et_view call
 * with x at its view slot and one same base (a tensor not rebound itself), that base, whose
 * bytes x's are at run time (et_view points its out at its input's data); else NULL. */
static const etch_value *view_base(const etch_method *m, const vinfo *info,
                                   const etch_value *x) {
    const uint32_t xi = index_of(m, x);
    const etch_value *base = NULL;
    for (uint32_t c = 0; c < m->nchains; c++)
        for (uint32_t pc = 0; pc < m->chains[c].n; pc++) {
            const etch_instr *in = &m->chains[c].instrs[pc];
            if (in->skipped)
                continue;
            if (in->kind == IA_MOVE_CALL && (in->a == xi || in->b == xi))
                return NULL;
            if (in->kind == IA_FREE_CALL && in->a == xi)
                return NULL;
            if (in->kind != IA_KERNEL_CALL && in->kind != IA_DELEGATE_CALL)
                continue;
            for (uint32_t k = 0; k < in->nargs; k++) {
                if (in->args[k] != x)
                    continue;
                if (in->kind == IA_DELEGATE_CALL)
                    return NULL;
                if (in->arg_modes[k] != ARG_VIEW)
                    continue;
                const etch_value *b = in->nargs > 0 ? in->args[0] : NULL;
                if (strcmp(m->ops[in->a].name, "executorch_prim::et_view.default") != 0 ||
                    !b || b == x || (base && base != b))
                    return NULL;
                base = b;
            }
        }
    if (!base || base->tag != ETCH_VALUE_TENSOR || (info[index_of(m, base)].flags & V_REBOUND))
        return NULL;
    return base;
}

/* A tensor a run reads, beside the y its last call writes: input_ok, and a view's result
 * when its base (view_base) shares no bytes with y. */
static bool chain_input_ok(const etch_method *m, const vinfo *info, const etch_value *x,
                           const etch_value *y) {
    if (x->tag == ETCH_VALUE_TENSOR && x != y && (info[index_of(m, x)].flags & V_REBOUND)) {
        const etch_value *b = view_base(m, info, x);
        return b && b != y && !may_overlap(b->u.tensor, y->u.tensor);
    }
    return input_ok(m, info, x, NULL, y);
}

/* May the last call of the run's first n write y while the run still reads its inputs? */
static bool chain_result_ok(const etch_method *m, const fuse_ctx *f, const etch_chain *ch,
                            const chain_cand *r, uint32_t n) {
    const etch_value *y = only_written(&ch->instrs[r->run[n - 1]]);
    if (!y)
        return false;
    const etch_tensor *yt = y->u.tensor;
    if ((f->info[index_of(m, y)].flags & V_REBOUND) || (yt->flags & ETCH_TENSOR_CONSTANT))
        return false;
    for (uint32_t i = 0; i < n; i++) {
        const etch_instr *in = &ch->instrs[r->run[i]];
        for (uint32_t k = 0; k < in->nargs; k++) {
            const etch_value *x = in->args[k];
            uint8_t mode = in->arg_modes[k];
            if (mode == ARG_SKIP || mode == ARG_WRITE || mode == ARG_LIST_WRITE)
                continue; /* the intermediates and y (written_tensors) */
            bool intermediate = false;
            for (uint32_t j = 0; j + 1 < n && !intermediate; j++)
                for (int q = 0; q < r->nw[j]; q++)
                    intermediate |= x == r->w[j][q];
            if (intermediate)
                continue;
            if (x->tag == ETCH_VALUE_TENSOR_LIST || x->tag == ETCH_VALUE_OPTIONAL_TENSOR_LIST) {
                for (size_t j = 0; j < x->u.list.len; j++)
                    if (x->u.list.items[j] &&
                        !chain_input_ok(m, f->info, x->u.list.items[j], y))
                        return false;
            } else if (!chain_input_ok(m, f->info, x, y)) {
                return false;
            }
        }
    }
    return true;
}

/* The candidate run from call k of chain c (the calls after it, each one's writes and the
 * run length its intermediates need). */
static void chain_candidate(const etch_method *m, const fuse_ctx *f, uint32_t c, uint32_t k,
                            chain_cand *r) {
    const etch_chain *ch = &m->chains[c];
    r->run[0] = k;
    r->n = 1;
    while (r->n < ETCH_CHAIN_MAX) {
        uint32_t q = next_call(ch, r->run[r->n - 1]);
        if (q == UINT32_MAX)
            break;
        r->run[r->n++] = q;
    }
    for (uint32_t i = 0; i < r->n; i++) {
        r->nw[i] = written_tensors(&ch->instrs[r->run[i]], r->w[i], CHAIN_WRITES, &r->ret[i]);
        r->need[i] = r->nw[i] < 1 ? UINT32_MAX : i + 2;
        for (int q = 0; q < r->nw[i] && r->need[i] != UINT32_MAX; q++) {
            uint32_t need = intermediate_need(m, f, c, r, i, r->w[i][q]);
            r->need[i] = need > r->need[i] ? need : r->need[i];
        }
    }
}

/* A run length the rule allows for the candidate: its first n calls chained. */
static bool chain_ok(const etch_method *m, const fuse_ctx *f, const etch_chain *ch,
                     const chain_cand *r, uint32_t n) {
    return chain_prefix_ok(r, n) && chain_result_ok(m, f, ch, r, n);
}

uint32_t etch_method_chain_calls(etch_method *m, etch_pool *pool) {
    bool any = false;
    for (uint32_t i = 0; i < m->nops; i++)
        any |= m->ops[i].kernel && etch_kernels_chain_of(m->ops[i].kernel->fn);
    if (!any || !m->nvalues)
        return 0;
    vinfo *info = (vinfo *)etch_pool_alloc(pool, sizeof(vinfo) * m->nvalues, _Alignof(vinfo));
    if (!info)
        return 0; /* no room: run each call alone */
    fuse_ctx f = {info, false};
    scan_method(m, &f); /* after fusion: what the remaining calls refer to */
    uint32_t runs = 0;
    for (uint32_t c = 0; c < m->nchains; c++) {
        etch_chain *ch = &m->chains[c];
        for (uint32_t k = 0; k < ch->n; k++) {
            etch_instr *in = &ch->instrs[k];
            etch_kernel_chain_fn fn =
                in->kind == IA_KERNEL_CALL && !in->skipped && in->kernel
                    ? etch_kernels_chain_of(in->kernel->fn)
                    : NULL;
            if (!fn)
                continue;
            chain_cand r;
            chain_candidate(m, &f, c, k, &r);
            uint32_t n = r.n; /* the longest run the rule allows */
            while (n >= 2 && !chain_ok(m, &f, ch, &r, n))
                n--;
            if (n < 2)
                continue;
            etch_kernel_call calls[ETCH_CHAIN_MAX];
            for (uint32_t i = 0; i < n; i++)
                kernel_call_of(&ch->instrs[r.run[i]], &calls[i]);
            etch_kernel_context_init(&m->ctx, m->ops[in->a].name, NULL, 0, m->threadpool);
            size_t got = fn(&m->ctx, calls, n);
            if (m->ctx.status != ETCH_OK || got < 2 || got > n)
                continue;
            if (got < n && !chain_ok(m, &f, ch, &r, (uint32_t)got))
                continue; /* a shorter run: it must pass too */
            in->chain_len = (uint32_t)got;
            for (uint32_t i = 0; i < got; i++) {
                etch_instr *x = &ch->instrs[r.run[i]];
                x->chain_next = i + 1 < got ? r.run[i + 1] : 0;
                if (i > 0)
                    x->skipped = x->chained = true;
            }
            runs++;
            k = r.run[got - 1];
        }
    }
    etch_kernel_context_init(&m->ctx, "", NULL, 0, m->threadpool);
    return runs;
}

/* ---- inside a chained kernel ---- */

static const etch_instr *chain_instr(const etch_kernel_context *ctx, size_t i) {
    if (!ctx->chain_instrs || !ctx->chain_len || i >= ctx->chain_len)
        return NULL;
    const etch_instr *in = &ctx->chain_instrs[ctx->chain_pc];
    while (i--)
        in = &ctx->chain_instrs[in->chain_next];
    return in;
}

size_t etch_kernel_chain_length(const etch_kernel_context *ctx) {
    return ctx && ctx->chain_len ? ctx->chain_len : 1;
}

bool etch_kernel_chain_call(const etch_kernel_context *ctx, size_t i, etch_kernel_call *out) {
    const etch_instr *in = ctx ? chain_instr(ctx, i) : NULL;
    if (!in || !out)
        return false;
    kernel_call_of(in, out);
    return true;
}

etch_status etch_kernel_chain_run(etch_kernel_context *ctx, size_t i) {
    const etch_instr *in = ctx ? chain_instr(ctx, i) : NULL;
    if (!in)
        return ctx ? (etch_kernel_fail(ctx, ETCH_ERR_INVALID_ARGUMENT,
                                       "chain_run: no call %zu in the chain", i),
                      ctx->status)
                   : ETCH_ERR_INVALID_ARGUMENT;
    etch_kernel_context head = *ctx;
    ctx->op_name = ctx->chain_ops[in->a].name;
    ctx->temp_used = 0;
    etch_instr_bind_context(ctx, in);
    ctx->chain_instrs = NULL;
    ctx->chain_len = 0;
    in->kernel->fn(ctx, in->args, in->nargs);
    etch_status st = ctx->status;
    const char *failed_op = ctx->op_name;
    *ctx = head;
    ctx->status = st;
    if (st)
        ctx->op_name = failed_op; /* the message names the call that failed */
    return st;
}
