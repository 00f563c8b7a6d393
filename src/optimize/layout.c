/*
 * Channel-blocked layout at method load (etch/kernel.h, "blocked channel layout").
 *
 * A tensor value is stored blocked when all of these hold:
 *   - it is a 4-D tensor with a static shape, contiguous dim order, every size > 0 and the
 *     channel size (dim 1) a multiple of ETCH_BLOCK_C; not a constant;
 *   - it is not a method input or output, not a Move's source or target, not freed, not an
 *     argument of a delegate or a jump condition; an item of a tensor list only when every
 *     call naming the list allows blocked tensors there (a call's list of results);
 *   - every kernel call that names it (calls fused away at load excepted: they do nothing)
 *     has a layout function that allows a blocked tensor at each argument where it appears;
 *   - it is not read through an alias (another value planned on its bytes, e.g. a flatten
 *     planned as a view) nor written through one while it lives (see "aliases" below);
 *   - for every call, the tensors of its `tied` arguments are all blocked or all not (a
 *     fixpoint: a value dropped from the set drops the others tied to it, call by call).
 * Each call then carries the set of its arguments that are blocked (ctx->blocked at execute).
 * The bytes a blocked tensor occupies are those of the NCHW tensor, so the memory plan does
 * not change; every writer and reader agrees on the order of its elements, so what the
 * program computes does not change either.
 */
#include <string.h>

#include "optimize/optimize.h"

#define MAX_BLOCKED_ARGS 64

typedef struct linfo {
    uint32_t refs;     /* references by kernel calls */
    uint32_t allowed;  /* of those, where the kernel allows a blocked tensor */
    uint8_t excluded;  /* referenced by anything that cannot take a blocked tensor */
    uint8_t blocked;   /* the decision */
} linfo;

size_t etch_method_layout_scratch(uint32_t nvalues) {
    return (size_t)nvalues * sizeof(linfo) + _Alignof(linfo);
}

static uint32_t index_of(const etch_method *m, const etch_value *v) {
    return (uint32_t)(v - m->values);
}

static void ref(linfo *info, uint32_t i, bool allowed) {
    if (info[i].refs < UINT32_MAX)
        info[i].refs++;
    if (allowed && info[i].allowed < UINT32_MAX)
        info[i].allowed++;
    if (!allowed)
        info[i].excluded = 1;
}

static void exclude(linfo *info, uint32_t i) { info[i].excluded = 1; }

/* A tensor whose shape the blocked layout can describe. */
static bool blockable(const etch_value *v) {
    if (v->tag != ETCH_VALUE_TENSOR || !v->u.tensor)
        return false;
    const etch_tensor *t = v->u.tensor;
    if (t->dim != 4 || t->dynamism != ETCH_SHAPE_STATIC || (t->flags & ETCH_TENSOR_CONSTANT) ||
        !etch_tensor_is_contiguous(t))
        return false;
    for (unsigned d = 0; d < 4; d++)
        if (t->sizes[d] <= 0)
            return false;
    return t->sizes[1] % ETCH_BLOCK_C == 0;
}

/* The layout function's answer for a call (0, 0 without one). */
static void call_masks(etch_method *m, const etch_instr *in, uint64_t *may, uint64_t *tied) {
    *may = 0;
    *tied = 0;
    etch_kernel_layout_fn fn = in->kernel ? etch_kernels_layout_of(in->kernel->fn) : NULL;
    if (!fn)
        return;
    etch_kernel_context_init(&m->ctx, m->ops[in->a].name, NULL, 0, m->threadpool);
    fn(&m->ctx, in->args, in->nargs, may, tied);
    if (m->ctx.status != ETCH_OK) {
        *may = 0;
        *tied = 0;
    }
    uint64_t valid = in->nargs >= MAX_BLOCKED_ARGS ? ~(uint64_t)0
                                                   : (((uint64_t)1 << in->nargs) - 1);
    *may &= valid;
    *tied &= *may;
}

static bool is_list(const etch_value *x) {
    return x->tag == ETCH_VALUE_TENSOR_LIST || x->tag == ETCH_VALUE_OPTIONAL_TENSOR_LIST;
}

static void exclude_items(const etch_method *m, linfo *info, const etch_value *x) {
    for (size_t j = 0; is_list(x) && j < x->u.list.len; j++)
        if (x->u.list.items[j])
            exclude(info, index_of(m, x->u.list.items[j]));
}

/* ---- aliases ---------------------------------------------------------------------------
 * The memory plan may give two values the same bytes: values whose lifetimes do not overlap
 * (the common case: nothing to worry about), or a view planned as an alias of its base (a
 * flatten or reshape costs no instruction). A blocked value x must not be read through an
 * alias. Walking the instructions in execution order from x's writer: nothing but x itself
 * may write into x's bytes until x's last reference; after it, a read of another value whose
 * bytes overlap x's must read bytes that some write (of a whole tensor) has replaced since;
 * the walk ends when one such write covers all of x's bytes. Needs the execution order, so a
 * method with jumps gets no blocked tensors at all. */

#define MAX_RANGES 64

typedef struct byte_range {
    uintptr_t lo, hi;
} byte_range;

static byte_range range_of(const etch_tensor *t) {
    uintptr_t lo = (uintptr_t)t->data;
    return (byte_range){lo, lo + (uintptr_t)t->capacity * etch_dtype_size(t->dtype)};
}

static bool overlapping_other(const etch_value *y, const etch_value *x) {
    if (y == x || y->tag != ETCH_VALUE_TENSOR || !y->u.tensor || !y->u.tensor->data ||
        (y->u.tensor->flags & ETCH_TENSOR_CONSTANT))
        return false;
    return etch_tensor_bytes_overlap(y->u.tensor, x->u.tensor);
}

static bool names(const etch_instr *in, const etch_value *x) {
    for (uint32_t k = 0; k < in->nargs; k++)
        if (in->args[k] == x)
            return true;
    return false;
}

/* Have the bytes y shares with x been replaced (some range in r[0, n) holds them all)? */
static bool replaced(const byte_range *r, int n, const etch_tensor *y, byte_range xr) {
    byte_range yr = range_of(y);
    uintptr_t lo = yr.lo > xr.lo ? yr.lo : xr.lo, hi = yr.hi < xr.hi ? yr.hi : xr.hi;
    for (int i = 0; i < n; i++)
        if (r[i].lo <= lo && hi <= r[i].hi)
            return true;
    return false;
}

/* Is value x (a candidate) read through an alias, or written through one while live? */
static bool aliased(const etch_method *m, const etch_value *x) {
    if (!x->u.tensor->data)
        return true;
    /* first writer and last reference, in execution order */
    int64_t first = -1, last = -1, idx = 0;
    for (uint32_t c = 0; c < m->nchains; c++)
        for (uint32_t pc = 0; pc < m->chains[c].n; pc++, idx++) {
            const etch_instr *in = &m->chains[c].instrs[pc];
            if (in->kind != IA_KERNEL_CALL || in->skipped || !names(in, x))
                continue;
            for (uint32_t k = 0; first < 0 && k < in->nargs; k++)
                if (in->args[k] == x && in->arg_modes[k] == ARG_WRITE)
                    first = idx;
            last = idx;
        }
    if (first < 0)
        return true; /* read but never written here: its bytes come from elsewhere */
    const byte_range xr = range_of(x->u.tensor);
    byte_range done[MAX_RANGES];
    int ndone = 0;
    idx = 0;
    for (uint32_t c = 0; c < m->nchains; c++)
        for (uint32_t pc = 0; pc < m->chains[c].n; pc++, idx++) {
            const etch_instr *in = &m->chains[c].instrs[pc];
            if (idx <= first || (in->kind == IA_KERNEL_CALL && in->skipped))
                continue;
            if (in->kind == IA_DELEGATE_CALL) {
                for (uint32_t k = 0; k < in->nargs; k++)
                    if (overlapping_other(in->args[k], x))
                        return true;
                continue;
            }
            if (in->kind != IA_KERNEL_CALL)
                continue;
            /* reads first (an instruction reads its inputs before it writes) */
            for (int pass = 0; pass < 2; pass++)
                for (uint32_t k = 0; k < in->nargs; k++) {
                    const etch_value *y = in->args[k];
                    const uint8_t mode = in->arg_modes[k];
                    const bool list = is_list(y);
                    const bool writes = mode == ARG_WRITE || mode == ARG_LIST_WRITE;
                    if ((pass == 0) == writes)
                        continue;
                    const size_t n = list ? y->u.list.len : 1;
                    for (size_t j = 0; j < n; j++) {
                        const etch_value *t = list ? y->u.list.items[j] : y;
                        if (!t || !overlapping_other(t, x))
                            continue;
                        if (!writes) {
                            if (idx <= last || (mode != ARG_READ && mode != ARG_LIST_READ) ||
                                !replaced(done, ndone, t->u.tensor, xr))
                                return true; /* an alias read, or a view bound onto x */
                            continue;
                        }
                        if (idx <= last || !etch_instr_overwrites(m, in, t->u.tensor))
                            return true; /* a write into x's bytes while x lives, or part */
                        byte_range tr = range_of(t->u.tensor);
                        /* kept as disjoint ranges: merged with those it overlaps or touches
                         * (a large x is often replaced by many smaller writes) */
                        for (int r = 0; r < ndone;) {
                            if (done[r].lo <= tr.hi && tr.lo <= done[r].hi) {
                                tr.lo = done[r].lo < tr.lo ? done[r].lo : tr.lo;
                                tr.hi = done[r].hi > tr.hi ? done[r].hi : tr.hi;
                                done[r] = done[--ndone];
                            } else {
                                r++;
                            }
                        }
                        if (tr.lo <= xr.lo && xr.hi <= tr.hi)
                            return false; /* all of x's bytes replaced: it is gone */
                        if (ndone == MAX_RANGES)
                            return true; /* too much to follow: keep x NCHW */
                        done[ndone++] = tr;
                    }
                }
        }
    return false;
}

static void alias_check(const etch_method *m, linfo *info) {
    for (uint32_t c = 0; c < m->nchains; c++)
        for (uint32_t pc = 0; pc < m->chains[c].n; pc++)
            if (m->chains[c].instrs[pc].kind == IA_JUMP_FALSE_CALL) {
                for (uint32_t i = 0; i < m->nvalues; i++)
                    info[i].blocked = 0;
                return;
            }
    for (uint32_t i = 0; i < m->nvalues; i++)
        if (info[i].blocked && aliased(m, &m->values[i]))
            info[i].blocked = 0;
}

uint32_t etch_method_choose_layout(etch_method *m, etch_pool *pool) {
    linfo *info = (linfo *)etch_pool_alloc(pool, sizeof(linfo) * (size_t)m->nvalues,
                                           _Alignof(linfo));
    if (!info || m->nvalues == 0)
        return 0;
    memset(info, 0, sizeof(linfo) * m->nvalues);
    for (uint32_t i = 0; i < m->ninputs; i++)
        exclude(info, (uint32_t)m->inputs[i]);
    for (uint32_t i = 0; i < m->noutputs; i++)
        exclude(info, (uint32_t)m->outputs[i]);

    /* references (the layout function is asked again in the fixpoint below) */
    for (uint32_t c = 0; c < m->nchains; c++) {
        etch_chain *ch = &m->chains[c];
        for (uint32_t pc = 0; pc < ch->n; pc++) {
            etch_instr *in = &ch->instrs[pc];
            switch (in->kind) {
            case IA_KERNEL_CALL: {
                if (in->skipped)
                    break;
                uint64_t may, tied;
                call_masks(m, in, &may, &tied);
                for (uint32_t k = 0; k < in->nargs; k++) {
                    const etch_value *x = in->args[k];
                    if (x->tag == ETCH_VALUE_TENSOR || is_list(x))
                        ref(info, index_of(m, x), k < MAX_BLOCKED_ARGS && ((may >> k) & 1));
                }
                break;
            }
            case IA_DELEGATE_CALL:
                for (uint32_t k = 0; k < in->nargs; k++) {
                    exclude(info, index_of(m, in->args[k]));
                    exclude_items(m, info, in->args[k]);
                }
                break;
            case IA_MOVE_CALL:
                exclude(info, in->a);
                exclude(info, in->b);
                break;
            case IA_JUMP_FALSE_CALL:
            case IA_FREE_CALL:
                exclude(info, in->a);
                break;
            default:
                break;
            }
        }
    }
    /* the items of a list may be blocked only where every use of the list allows it (e.g. the
     * (values, indices) result of max pooling, named by that call alone) */
    for (uint32_t i = 0; i < m->nvalues; i++)
        if (is_list(&m->values[i]) && (info[i].excluded || info[i].allowed != info[i].refs))
            exclude_items(m, info, &m->values[i]);
    for (uint32_t i = 0; i < m->nvalues; i++)
        info[i].blocked = !info[i].excluded && info[i].refs > 0 &&
                          info[i].allowed == info[i].refs && blockable(&m->values[i]);

    /* storage shared with other values (views planned as aliases, e.g. a flatten) */
    alias_check(m, info);

    /* tied arguments: all blocked or none, until nothing changes */
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t c = 0; c < m->nchains; c++) {
            etch_chain *ch = &m->chains[c];
            for (uint32_t pc = 0; pc < ch->n; pc++) {
                etch_instr *in = &ch->instrs[pc];
                if (in->kind != IA_KERNEL_CALL || in->skipped)
                    continue;
                uint64_t may, tied;
                call_masks(m, in, &may, &tied);
                bool all = true, any = false;
                for (uint32_t k = 0; k < in->nargs && k < MAX_BLOCKED_ARGS; k++) {
                    const etch_value *x = in->args[k];
                    if (!((tied >> k) & 1) || x->tag != ETCH_VALUE_TENSOR)
                        continue;
                    bool b = info[index_of(m, x)].blocked;
                    all = all && b;
                    any = any || b;
                }
                if (any && !all) {
                    for (uint32_t k = 0; k < in->nargs && k < MAX_BLOCKED_ARGS; k++)
                        if (((tied >> k) & 1) && in->args[k]->tag == ETCH_VALUE_TENSOR)
                            info[index_of(m, in->args[k])].blocked = 0;
                    changed = true;
                }
            }
        }
    }

    uint32_t nblocked = 0;
    for (uint32_t i = 0; i < m->nvalues; i++)
        nblocked += info[i].blocked;
    for (uint32_t c = 0; c < m->nchains; c++) {
        etch_chain *ch = &m->chains[c];
        for (uint32_t pc = 0; pc < ch->n; pc++) {
            etch_instr *in = &ch->instrs[pc];
            in->blocked = 0;
            if (in->kind != IA_KERNEL_CALL || in->skipped)
                continue;
            for (uint32_t k = 0; k < in->nargs && k < MAX_BLOCKED_ARGS; k++) {
                const etch_value *x = in->args[k];
                if (x->tag == ETCH_VALUE_TENSOR && info[index_of(m, x)].blocked)
                    in->blocked |= (uint64_t)1 << k;
            }
        }
    }
    etch_kernel_context_init(&m->ctx, "", NULL, 0, m->threadpool);
    return nblocked;
}
