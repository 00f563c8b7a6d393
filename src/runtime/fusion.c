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
 *     written tensor: its out slot and return slot) and read by A alone: no other
 *     instruction, tensor list, Move, Free, jump condition, delegate, method input or
 *     output refers to it;
 *   - A is a portable or optimized kernel (their math is the epilogue's), reads exactly v,
 *     writes a distinct Float tensor `out` with v's layout (rank, sizes, dim order, dynamism,
 *     capacity: any resize that succeeds on v succeeds on out and vice versa), and is not a
 *     jump target;
 *   - P's inputs do not alias `out`: not the same value, not in a tensor list, and not
 *     overlapping storage (a memory planner may give out the memory of an input of P that
 *     dies at P, which would make P read what it has begun to overwrite); no input of P or
 *     `out` is rebound at run time (Move target, view output, delegate argument, Free);
 *   - A's scalar arguments are fixed program values (nothing may overwrite them) that the
 *     activation accepts as is: clamp/hardtanh bounds are Int or Double, not NaN, within
 *     Float's range; gelu's approximate is "none" or "tanh". Anything the activation
 *     kernel would reject at run time is left to it.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "runtime/program_impl.h"

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
};

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

static void scan_method(const etch_method *m, vinfo *info) {
    memset(info, 0, sizeof(vinfo) * m->nvalues);
    for (uint32_t i = 0; i < m->ninputs; i++)
        use(info, (uint32_t)m->inputs[i], V_IO);
    for (uint32_t i = 0; i < m->noutputs; i++)
        use(info, (uint32_t)m->outputs[i], V_IO);
    for (uint32_t i = 0; i < m->nvalues; i++) {
        const etch_value *v = &m->values[i];
        if (v->tag != ETCH_VALUE_TENSOR_LIST && v->tag != ETCH_VALUE_OPTIONAL_TENSOR_LIST)
            continue;
        for (size_t k = 0; k < v->u.list.len; k++)
            if (v->u.list.items[k])
                use(info, index_of(m, v->u.list.items[k]), 0);
    }
    for (uint32_t c = 0; c < m->nchains; c++) {
        etch_chain *ch = &m->chains[c];
        for (uint32_t pc = 0; pc < ch->n; pc++) {
            etch_instr *in = &ch->instrs[pc];
            switch (in->kind) {
            case IA_KERNEL_CALL: {
                const char *sig = in->kernel ? in->kernel->signature : NULL;
                size_t fixed = sig ? strcspn(sig, "*") : 0;
                for (uint32_t k = 0; k < in->nargs; k++) {
                    uint8_t f = 0;
                    if (!sig || k >= fixed || !sig_read_only(sig[k]))
                        f |= V_WRITTEN;
                    if (in->arg_modes[k] == ARG_VIEW)
                        f |= V_REBOUND;
                    use(info, index_of(m, in->args[k]), f);
                }
                break;
            }
            case IA_DELEGATE_CALL:
                for (uint32_t k = 0; k < in->nargs; k++)
                    use(info, index_of(m, in->args[k]), V_WRITTEN | V_REBOUND);
                break;
            case IA_MOVE_CALL:
                use(info, in->a, 0);
                use(info, in->b, V_WRITTEN | V_REBOUND);
                break;
            case IA_JUMP_FALSE_CALL:
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

/* Could `in` (read by P) share storage with `out` (written by P after fusion)? */
static bool may_overlap(const etch_tensor *in, const etch_tensor *out) {
    if (in->flags & ETCH_TENSOR_CONSTANT)
        return false; /* out is never a constant (checked), so never the same bytes */
    if (!in->data || !out->data)
        /* unbound at load: caller buffers (borrowed inputs, set_output_data); two of them
         * may be the same buffer, a caller buffer is not one of the planned arenas */
        return !in->data && !out->data;
    uintptr_t a0 = (uintptr_t)in->data, b0 = (uintptr_t)out->data;
    uintptr_t a1 = a0 + (uintptr_t)in->capacity * etch_dtype_size(in->dtype);
    uintptr_t b1 = b0 + (uintptr_t)out->capacity * etch_dtype_size(out->dtype);
    return a0 < b1 && b0 < a1;
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

/* P's arguments, with v its fused-away result and out A's output. */
static bool producer_ok(const etch_method *m, const vinfo *info, const etch_instr *p,
                        const etch_value *v, const etch_value *out) {
    uint32_t nv = 0;
    for (uint32_t k = 0; k < p->nargs; k++) {
        const etch_value *x = p->args[k];
        uint8_t mode = p->arg_modes[k];
        if (x == v) {
            if (mode != ARG_WRITE)
                return false; /* P also reads v */
            nv++;
            continue;
        }
        if (x == out)
            return false;
        switch (mode) {
        case ARG_SKIP:
            break;
        case ARG_READ:
        case ARG_LIST_READ:
            if (x->tag == ETCH_VALUE_TENSOR_LIST || x->tag == ETCH_VALUE_OPTIONAL_TENSOR_LIST) {
                for (size_t j = 0; j < x->u.list.len; j++)
                    if (x->u.list.items[j] && !input_ok(m, info, x->u.list.items[j], v, out))
                        return false;
            } else if (!input_ok(m, info, x, v, out)) {
                return false;
            }
            break;
        default: /* another written tensor, a view, a written list: not a one-output call */
            return false;
        }
    }
    return nv > 0;
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

/* Fuse instruction k + 1 of chain `ch` into instruction k when allowed. */
static bool try_fuse(etch_method *m, const vinfo *info, etch_chain *ch, uint32_t k) {
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
    const vinfo *vi = &info[index_of(m, v)], *oi = &info[index_of(m, out)];
    if ((vi->flags & (V_IO | V_REBOUND)) || (oi->flags & V_REBOUND))
        return false;
    /* v is referenced by P (written) and by A's input, nowhere else */
    uint32_t in_p = 0;
    for (uint32_t j = 0; j < p->nargs; j++)
        in_p += p->args[j] == v;
    if (vi->uses != in_p + 1 || !producer_ok(m, info, p, v, out))
        return false;
    etch_epilogue e;
    if (!epilogue_of(m, info, op, a, &e))
        return false;
    for (uint32_t j = 0; j < p->nargs; j++)
        if (p->args[j] == v)
            p->args[j] = out;
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
    scan_method(m, info);
    uint32_t fused = 0;
    for (uint32_t c = 0; c < m->nchains; c++) {
        etch_chain *ch = &m->chains[c];
        for (uint32_t k = 0; k + 1 < ch->n; k++)
            if (try_fuse(m, info, ch, k)) {
                fused++;
                k++; /* the skipped activation cannot start another pair */
            }
    }
    return fused;
}
