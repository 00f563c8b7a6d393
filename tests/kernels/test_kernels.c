/*
 * Portable kernel tests.
 *
 *   test_kernels                 hand-written checks (prim ops, aliasing views, registration,
 *                                malformed arguments, threading)
 *   test_kernels GOLDEN_FILE     the cases gen_golden.py computed with PyTorch (format described
 *                                there), each run through the registered kernel by name
 *
 * Tolerances for floating outputs, relative to max(1, |expected|): Float 1e-5, Double 1e-12,
 * Half 2e-3, BFloat16 1.6e-2 (about two units in the last place of the 16-bit types), unless
 * a case sets its own (gen_golden.py marks elementwise arithmetic, conversions, copies and
 * pooling as exact: any difference from torch fails). NaN must match NaN, infinities must match exactly; integral and Bool
 * outputs must match exactly. Each case also checks that inputs were not modified and that
 * nothing was written past an output's capacity.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etch/kernels.h"
#include "etch/status.h"
#include "runtime/context.h"
#include "etch_test.h"
#include "kernel_test_util.h"

#define GUARD 64
#define GUARD_BYTE 0xA5

/* ---- small helpers -------------------------------------------------------------------------- */

static void *xcalloc(size_t n) {
    void *p = calloc(1, n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

static etch_status call(const char *op, etch_value **args, size_t nargs) {
    const etch_kernel *k = etch_kernels_find(op, strlen(op));
    if (!k) {
        fprintf(stderr, "kernel %s not registered\n", op);
        return ETCH_ERR_OPERATOR_MISSING;
    }
    etch_kernel_context ctx;
    etch_kernel_context_init(&ctx, op, NULL, 0, NULL);
    k->fn(&ctx, args, nargs);
    return ctx.status;
}

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    uint32_t bits;
    float f;
    if (e == 0) {
        f = (float)m * 0x1p-24f;
        return sign ? -f : f;
    }
    bits = e == 31 ? (sign | 0x7f800000u | (m << 13)) : (sign | ((e + 112u) << 23) | (m << 13));
    memcpy(&f, &bits, 4);
    return f;
}

static double load_float(const uint8_t *p, int dtype) {
    switch (dtype) {
    case ETCH_DTYPE_FLOAT: { float f; memcpy(&f, p, 4); return f; }
    case ETCH_DTYPE_DOUBLE: { double d; memcpy(&d, p, 8); return d; }
    case ETCH_DTYPE_HALF: { uint16_t h; memcpy(&h, p, 2); return half_to_float(h); }
    case ETCH_DTYPE_BFLOAT16: {
        uint16_t h;
        memcpy(&h, p, 2);
        uint32_t b = (uint32_t)h << 16;
        float f;
        memcpy(&f, &b, 4);
        return f;
    }
    default: return 0;
    }
}

static bool is_float(int dt) {
    return dt == ETCH_DTYPE_FLOAT || dt == ETCH_DTYPE_DOUBLE || dt == ETCH_DTYPE_HALF ||
           dt == ETCH_DTYPE_BFLOAT16;
}

static double default_rtol(int dt) {
    switch (dt) {
    case ETCH_DTYPE_FLOAT: return 1e-5;
    case ETCH_DTYPE_DOUBLE: return 1e-12;
    case ETCH_DTYPE_HALF: return 2e-3;
    case ETCH_DTYPE_BFLOAT16: return 1.6e-2;
    default: return 0;
    }
}

/* ---- golden file reader --------------------------------------------------------------------- */

typedef struct rd {
    const uint8_t *p, *end;
    bool bad;
} rd;

static const uint8_t *take(rd *r, size_t n) {
    if (r->bad || (size_t)(r->end - r->p) < n) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *q = r->p;
    r->p += n;
    return q;
}
#define RD_FN(name, T)                                                                       \
    static T name(rd *r) {                                                                   \
        T v = 0;                                                                             \
        const uint8_t *q = take(r, sizeof v);                                                \
        if (q)                                                                               \
            memcpy(&v, q, sizeof v);                                                         \
        return v;                                                                            \
    }
RD_FN(rd_u8, uint8_t)
RD_FN(rd_u16, uint16_t)
RD_FN(rd_u32, uint32_t)
RD_FN(rd_u64, uint64_t)
RD_FN(rd_i64, int64_t)
RD_FN(rd_f64, double)

enum {
    K_NONE, K_TIN, K_TOUT, K_INT, K_DOUBLE, K_BOOL, K_INTLIST, K_STRING, K_REF, K_TLIST, K_RESULT,
    K_DOUBLELIST, K_BOOLLIST, K_OPTTLIST, K_HIDDEN, K_TINOUT
};

typedef struct slot {
    int kind;
    etch_value val;
    etch_value *ptr; /* what args[i] points at */
    etch_tensor t;
    uint8_t *data;
    size_t bytes; /* data bytes excluding the guard */
    uint8_t *orig;
    bool has_expected;
    int64_t exp_sizes[ETCH_MAX_DIMS];
    const uint8_t *exp_data;
    size_t exp_bytes;
    etch_value *items;
    etch_value **item_ptrs;
    int64_t *scratch;
    char *str;
    double *dbls;
    uint8_t *bools;
    int res_tag;
    int64_t res_i;
    double res_d;
} slot;

static void free_slots(slot *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(s[i].data);
        free(s[i].orig);
        free(s[i].items);
        free(s[i].item_ptrs);
        free(s[i].scratch);
        free(s[i].str);
        free(s[i].dbls);
        free(s[i].bools);
    }
    free(s);
}

static bool read_tensor_head(rd *r, etch_tensor *t, int kind, slot *s) {
    uint8_t dtype = rd_u8(r), dim = rd_u8(r);
    int64_t sizes[ETCH_MAX_DIMS];
    if (dim > ETCH_MAX_DIMS)
        return false;
    for (unsigned i = 0; i < dim; i++)
        sizes[i] = rd_i64(r);
    const uint8_t *order = take(r, dim);
    if (r->bad || etch_tensor_init(t, (etch_dtype)dtype, dim, sizes, NULL) != ETCH_OK)
        return false;
    for (unsigned i = 0; i < dim; i++)
        t->dim_order[i] = order[i];
    etch_tensor_update_strides(t);
    if (kind == K_TIN) {
        uint64_t n = rd_u64(r);
        const uint8_t *bytes = take(r, (size_t)n);
        if (r->bad || n != etch_tensor_nbytes(t))
            return false;
        s->bytes = (size_t)n;
        if (n) {
            s->data = xcalloc((size_t)n);
            memcpy(s->data, bytes, (size_t)n);
            s->orig = xcalloc((size_t)n);
            memcpy(s->orig, bytes, (size_t)n);
        }
        t->data = s->data; /* NULL for empty tensors, as the runtime allows */
        return true;
    }
    t->dynamism = rd_u8(r) ? ETCH_SHAPE_DYNAMIC_BOUND : ETCH_SHAPE_STATIC;
    t->capacity = rd_i64(r);
    s->has_expected = rd_u8(r) != 0;
    if (s->has_expected) {
        for (unsigned i = 0; i < dim; i++)
            s->exp_sizes[i] = rd_i64(r);
        s->exp_bytes = (size_t)rd_u64(r);
        s->exp_data = take(r, s->exp_bytes);
    }
    if (r->bad || t->capacity < 0)
        return false;
    s->bytes = (size_t)t->capacity * etch_dtype_size(dtype);
    s->data = xcalloc(s->bytes + GUARD);
    memset(s->data, GUARD_BYTE, s->bytes + GUARD);
    t->data = s->bytes ? s->data : NULL;
    return true;
}

/* A minimal version of the load-time signature check, so the golden layout and the
 * registered signature strings are known to agree. */
static bool sig_accepts(char c, const etch_value *v) {
    uint32_t tag = v->tag;
    switch (c) {
    case 'T': case 'W': case 'V': return tag == ETCH_VALUE_TENSOR;
    case 't': return tag == ETCH_VALUE_TENSOR || tag == ETCH_VALUE_NONE;
    case 'S': return tag == ETCH_VALUE_INT || tag == ETCH_VALUE_DOUBLE || tag == ETCH_VALUE_BOOL;
    case 's': return tag == ETCH_VALUE_NONE || sig_accepts('S', v);
    case 'I': return tag == ETCH_VALUE_INT;
    case 'i': return tag == ETCH_VALUE_INT || tag == ETCH_VALUE_NONE;
    case 'B': return tag == ETCH_VALUE_BOOL;
    case 'b': return tag == ETCH_VALUE_BOOL || tag == ETCH_VALUE_NONE;
    case 'D': return tag == ETCH_VALUE_DOUBLE || tag == ETCH_VALUE_INT;
    case 'd': return tag == ETCH_VALUE_DOUBLE || tag == ETCH_VALUE_INT || tag == ETCH_VALUE_NONE;
    case 'L': return tag == ETCH_VALUE_INT_LIST;
    case 'l': return tag == ETCH_VALUE_INT_LIST || tag == ETCH_VALUE_NONE;
    case 'X': case 'Y': return tag == ETCH_VALUE_TENSOR_LIST;
    case 'O': return tag == ETCH_VALUE_OPTIONAL_TENSOR_LIST;
    case 'F': return tag == ETCH_VALUE_DOUBLE_LIST;
    case 'Q': return tag == ETCH_VALUE_BOOL_LIST;
    case 'N': return tag == ETCH_VALUE_STRING;
    case 'n': return tag == ETCH_VALUE_STRING || tag == ETCH_VALUE_NONE;
    case 'R': case '?': return true;
    default: return false;
    }
}

static bool sig_matches(const char *sig, etch_value **args, size_t nargs) {
    if (!sig)
        return true;
    size_t i = 0;
    for (; sig[i] && sig[i] != '*'; i++)
        if (i >= nargs || !sig_accepts(sig[i], args[i]))
            return false;
    return sig[i] == '*' ? nargs >= i : nargs == i;
}

static int verbose_failures = 40;

static bool compare_out(const char *label, const slot *s, double rtol_case) {
    const etch_tensor *t = &s->t;
    for (unsigned i = 0; i < t->dim; i++)
        if (t->sizes[i] != s->exp_sizes[i]) {
            if (verbose_failures-- > 0)
                fprintf(stderr, "[%s] out size %u is %lld, want %lld\n", label, i,
                        (long long)t->sizes[i], (long long)s->exp_sizes[i]);
            return false;
        }
    if (etch_tensor_nbytes(t) != s->exp_bytes) {
        if (verbose_failures-- > 0)
            fprintf(stderr, "[%s] out has %zu bytes, want %zu\n", label, etch_tensor_nbytes(t),
                    s->exp_bytes);
        return false;
    }
    size_t es = etch_dtype_size(t->dtype);
    size_t n = s->exp_bytes / es;
    if (!is_float(t->dtype)) {
        if (n && memcmp(t->data, s->exp_data, s->exp_bytes) != 0) {
            for (size_t i = 0; i < n; i++)
                if (memcmp((const uint8_t *)t->data + i * es, s->exp_data + i * es, es)) {
                    if (verbose_failures-- > 0) {
                        int64_t g = 0, w = 0;
                        memcpy(&g, (const uint8_t *)t->data + i * es, es);
                        memcpy(&w, s->exp_data + i * es, es);
                        fprintf(stderr, "[%s] element %zu: got bits %llx, want %llx\n", label, i,
                                (unsigned long long)g, (unsigned long long)w);
                    }
                    break;
                }
            return false;
        }
        return true;
    }
    double rtol = rtol_case > 0 ? rtol_case : default_rtol(t->dtype);
    for (size_t i = 0; i < n; i++) {
        double g = load_float((const uint8_t *)t->data + i * es, t->dtype);
        double w = load_float(s->exp_data + i * es, t->dtype);
        bool ok;
        if (isnan(w))
            ok = isnan(g);
        else if (isinf(w))
            ok = g == w;
        else
            ok = fabs(g - w) <= rtol * fmax(1.0, fabs(w));
        if (!ok) {
            if (verbose_failures-- > 0)
                fprintf(stderr, "[%s] element %zu of %zu: got %.9g, want %.9g\n", label, i, n, g,
                        w);
            return false;
        }
    }
    return true;
}

static void run_case(rd *r, int *ncase) {
    uint16_t oplen = rd_u16(r);
    const uint8_t *opb = take(r, oplen);
    uint16_t lablen = rd_u16(r);
    const uint8_t *labb = take(r, lablen);
    uint8_t expect_fail = rd_u8(r);
    double rtol = rd_f64(r);
    uint32_t nargs = rd_u32(r);
    if (r->bad || nargs > 64) {
        r->bad = true;
        return;
    }
    char op[128], label[256];
    snprintf(op, sizeof op, "%.*s", (int)oplen, (const char *)opb);
    snprintf(label, sizeof label, "%s: %.*s", op, (int)lablen, (const char *)labb);
    (*ncase)++;

    slot *s = xcalloc(sizeof *s * (nargs ? nargs : 1));
    etch_value *args[64];
    uint32_t nk = 0; /* arguments passed to the kernel (hidden slots are not) */
    for (uint32_t i = 0; i < nargs && !r->bad; i++) {
        slot *a = &s[i];
        a->kind = rd_u8(r);
        bool hidden = a->kind == K_HIDDEN;
        if (hidden)
            a->kind = rd_u8(r);
        a->ptr = &a->val;
        switch (a->kind) {
        case K_NONE: a->val.tag = ETCH_VALUE_NONE; break;
        case K_TIN:
        case K_TOUT:
            if (!read_tensor_head(r, &a->t, a->kind, a))
                r->bad = true;
            a->val.tag = ETCH_VALUE_TENSOR;
            a->val.u.tensor = &a->t;
            break;
        case K_TINOUT: { /* an out tensor with initial contents (in-place kernels) */
            if (!read_tensor_head(r, &a->t, K_TOUT, a))
                r->bad = true;
            uint64_t n = rd_u64(r);
            const uint8_t *b = take(r, (size_t)n);
            if (r->bad || n > a->bytes)
                r->bad = true;
            else if (n)
                memcpy(a->data, b, (size_t)n);
            a->kind = K_TOUT;
            a->val.tag = ETCH_VALUE_TENSOR;
            a->val.u.tensor = &a->t;
            break;
        }
        case K_INT: a->val.tag = ETCH_VALUE_INT; a->val.u.i = rd_i64(r); break;
        case K_DOUBLE: a->val.tag = ETCH_VALUE_DOUBLE; a->val.u.d = rd_f64(r); break;
        case K_BOOL: a->val.tag = ETCH_VALUE_BOOL; a->val.u.b = rd_u8(r) != 0; break;
        case K_INTLIST: {
            uint32_t n = rd_u32(r);
            if (n > 64) {
                r->bad = true;
                break;
            }
            a->items = xcalloc(sizeof(etch_value) * n);
            a->item_ptrs = xcalloc(sizeof(etch_value *) * n);
            a->scratch = xcalloc(sizeof(int64_t) * n);
            for (uint32_t k = 0; k < n; k++) {
                a->items[k].tag = ETCH_VALUE_INT;
                a->items[k].u.i = rd_i64(r);
                a->item_ptrs[k] = &a->items[k];
            }
            a->val.tag = ETCH_VALUE_INT_LIST;
            a->val.u.list.items = a->item_ptrs;
            a->val.u.list.scratch = a->scratch;
            a->val.u.list.len = n;
            break;
        }
        case K_STRING: {
            uint16_t n = rd_u16(r);
            const uint8_t *b = take(r, n);
            a->str = xcalloc((size_t)n + 1);
            if (b)
                memcpy(a->str, b, n);
            a->val.tag = ETCH_VALUE_STRING;
            a->val.u.str.ptr = a->str;
            a->val.u.str.len = n;
            break;
        }
        case K_REF: {
            uint32_t k = rd_u32(r);
            if (k >= i)
                r->bad = true;
            else
                a->ptr = s[k].ptr;
            break;
        }
        case K_TLIST: {
            uint32_t n = rd_u32(r);
            if (n > 64) {
                r->bad = true;
                break;
            }
            a->item_ptrs = xcalloc(sizeof(etch_value *) * n);
            for (uint32_t k = 0; k < n; k++) {
                uint32_t idx = rd_u32(r);
                if (idx >= i)
                    r->bad = true;
                else
                    a->item_ptrs[k] = s[idx].ptr;
            }
            a->val.tag = ETCH_VALUE_TENSOR_LIST;
            a->val.u.list.items = a->item_ptrs;
            a->val.u.list.len = n;
            break;
        }
        case K_DOUBLELIST:
        case K_BOOLLIST: {
            uint32_t n = rd_u32(r);
            if (n > 64) {
                r->bad = true;
                break;
            }
            if (a->kind == K_DOUBLELIST) {
                a->dbls = xcalloc(sizeof(double) * (n ? n : 1));
                for (uint32_t k = 0; k < n; k++)
                    a->dbls[k] = rd_f64(r);
                a->val.tag = ETCH_VALUE_DOUBLE_LIST;
                a->val.u.doubles.ptr = a->dbls;
                a->val.u.doubles.len = n;
            } else {
                a->bools = xcalloc(n ? n : 1);
                for (uint32_t k = 0; k < n; k++)
                    a->bools[k] = rd_u8(r) != 0;
                a->val.tag = ETCH_VALUE_BOOL_LIST;
                a->val.u.bools.ptr = a->bools;
                a->val.u.bools.len = n;
            }
            break;
        }
        case K_OPTTLIST: {
            uint32_t n = rd_u32(r);
            if (n > 64) {
                r->bad = true;
                break;
            }
            a->item_ptrs = xcalloc(sizeof(etch_value *) * (n ? n : 1));
            for (uint32_t k = 0; k < n; k++) {
                int32_t idx = (int32_t)rd_u32(r);
                if (idx < -1 || idx >= (int32_t)i)
                    r->bad = true;
                else
                    a->item_ptrs[k] = idx < 0 ? NULL : s[idx].ptr;
            }
            a->val.tag = ETCH_VALUE_OPTIONAL_TENSOR_LIST;
            a->val.u.list.items = a->item_ptrs;
            a->val.u.list.len = n;
            break;
        }
        case K_RESULT:
            a->val.tag = ETCH_VALUE_NONE;
            a->res_tag = rd_u8(r);
            if (a->res_tag == ETCH_VALUE_INT)
                a->res_i = rd_i64(r);
            else if (a->res_tag == ETCH_VALUE_DOUBLE)
                a->res_d = rd_f64(r);
            else if (a->res_tag == ETCH_VALUE_BOOL)
                a->res_i = rd_u8(r);
            break;
        default: r->bad = true; break;
        }
        if (!hidden)
            args[nk++] = a->ptr;
    }
    if (r->bad) {
        fprintf(stderr, "[%s] malformed golden case\n", label);
        free_slots(s, nargs);
        return;
    }

    const etch_kernel *k = etch_kernels_find(op, strlen(op));
    CHECK_MSG(k != NULL, "[%s] kernel not registered", label);
    if (!k) {
        free_slots(s, nargs);
        return;
    }
    CHECK_MSG(sig_matches(k->signature, args, nk), "[%s] arguments do not match signature %s",
              label, k->signature);
    etch_kernel_context ctx;
    etch_kernel_context_init(&ctx, op, NULL, 0, NULL);
    k->fn(&ctx, args, nk);

    if (expect_fail) {
        CHECK_MSG(ctx.status != ETCH_OK, "[%s] succeeded but must fail", label);
        CHECK_MSG(ctx.status == ETCH_OK || etch_last_error()[0] != 0,
                  "[%s] failed without a message", label);
    } else {
        CHECK_MSG(ctx.status == ETCH_OK, "[%s] failed: %s (%s)", label, etch_status_str(ctx.status),
                  etch_last_error());
        if (ctx.status == ETCH_OK) {
            for (uint32_t i = 0; i < nargs; i++) {
                slot *a = &s[i];
                if (a->kind == K_TOUT && a->has_expected)
                    CHECK_MSG(compare_out(label, a, rtol), "[%s] output %u differs", label, i);
                if (a->kind == K_RESULT && a->res_tag) {
                    const etch_value *v = &a->val;
                    bool ok = v->tag == (uint32_t)a->res_tag;
                    if (ok && v->tag == ETCH_VALUE_INT)
                        ok = v->u.i == a->res_i;
                    else if (ok && v->tag == ETCH_VALUE_BOOL)
                        ok = v->u.b == (a->res_i != 0);
                    else if (ok && v->tag == ETCH_VALUE_DOUBLE)
                        ok = isnan(a->res_d) ? isnan(v->u.d)
                                             : (v->u.d == a->res_d &&
                                                signbit(v->u.d) == signbit(a->res_d));
                    CHECK_MSG(ok, "[%s] result is %s %lld / %.17g, want tag %d %lld / %.17g", label,
                              etch_value_tag_name(v->tag), (long long)v->u.i, v->u.d, a->res_tag,
                              (long long)a->res_i, a->res_d);
                }
            }
        }
    }
    for (uint32_t i = 0; i < nargs; i++) {
        slot *a = &s[i];
        if (a->kind == K_TIN && a->bytes)
            CHECK_MSG(memcmp(a->data, a->orig, a->bytes) == 0, "[%s] input %u was modified", label,
                      i);
        if (a->kind == K_TOUT) {
            bool intact = true;
            for (size_t g = 0; g < GUARD; g++)
                intact &= a->data[a->bytes + g] == GUARD_BYTE;
            CHECK_MSG(intact, "[%s] wrote past the capacity of output %u", label, i);
        }
    }
    free_slots(s, nargs);
}

static void run_golden(const char *path) {
    FILE *f = fopen(path, "rb");
    CHECK_MSG(f != NULL, "cannot open %s", path);
    if (!f)
        return;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = xcalloc((size_t)size);
    size_t got = fread(buf, 1, (size_t)size, f);
    fclose(f);
    rd r = {buf, buf + got, false};
    const uint8_t *magic = take(&r, 4);
    uint32_t ncases = rd_u32(&r);
    CHECK(magic && memcmp(magic, "EKG1", 4) == 0);
    int done = 0;
    for (uint32_t i = 0; i < ncases && !r.bad; i++)
        run_case(&r, &done);
    CHECK_MSG(!r.bad && done == (int)ncases, "golden file truncated after %d of %u cases", done,
              ncases);
    printf("%d golden cases\n", done);
    free(buf);
}

/* ---- hand-written tests --------------------------------------------------------------------- */

static void test_registration(void) {
    etch_kernels_reset();
    CHECK_OK(etch_kernels_register_portable());
    size_t n0 = etch_kernels_count(), tn;
    CHECK_OK(etch_kernels_register_portable());
    CHECK(etch_kernels_count() == n0);
    const etch_kernel *t = etch_kernels_portable_table(&tn);
    CHECK(tn == n0 && t != NULL);
    for (size_t i = 0; i < tn; i++) {
        const etch_kernel *k = etch_kernels_find(t[i].name, strlen(t[i].name));
        CHECK_MSG(k == &t[i], "%s not found", t[i].name);
        CHECK_MSG(t[i].signature != NULL && t[i].signature[0], "%s has no signature", t[i].name);
        for (size_t j = 0; j < i; j++)
            CHECK_MSG(strcmp(t[i].name, t[j].name) != 0, "%s registered twice", t[i].name);
    }
    static const char *required[] = {
        "aten::add.out", "aten::add.Scalar_out", "aten::sub.out", "aten::sub.Scalar_out",
        "aten::mul.out", "aten::mul.Scalar_out", "aten::div.out", "aten::addmm.out",
        "aten::mm.out", "aten::bmm.out", "aten::convolution.out",
        "aten::max_pool2d_with_indices.out", "aten::relu.out", "aten::permute_copy.out",
        "aten::view_copy.out", "aten::clone.out", "aten::_to_copy.out", "aten::sum.IntList_out",
        "aten::sym_size.int", "aten::sym_numel", "aten::_local_scalar_dense",
        "executorch_prim::add.Scalar", "executorch_prim::floordiv.int",
        "executorch_prim::mod.int", "executorch_prim::et_copy_index.tensor",
        "executorch_prim::et_view.default", "executorch_prim::sym_not.Scalar",
        "executorch_prim::round.Scalar"};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        CHECK_MSG(etch_kernels_find(required[i], strlen(required[i])) != NULL, "%s missing",
                  required[i]);
    /* a reset registry gets the table again */
    etch_kernels_reset();
    CHECK(etch_kernels_count() == 0);
    CHECK_OK(etch_kernels_register_portable());
    CHECK(etch_kernels_count() == n0);
}

static void test_et_view(void) {
    float data[12];
    for (int i = 0; i < 12; i++)
        data[i] = (float)i;
    int64_t s34[2] = {3, 4}, s3[3] = {1, 1, 1};
    etch_tensor self, out;
    etch_tensor_init(&self, ETCH_DTYPE_FLOAT, 2, s34, data);
    etch_tensor_init(&out, ETCH_DTYPE_FLOAT, 3, s3, NULL);
    out.dynamism = ETCH_SHAPE_DYNAMIC_BOUND;
    etch_value vs = kt_vtensor(&self), vo = kt_vtensor(&out);
    kt_ilist l;
    int64_t size[3] = {2, -1, 3};
    etch_value *args[3] = {&vs, kt_mklist(&l, size, 3), &vo};
    CHECK_OK(call("executorch_prim::et_view.default", args, 3));
    CHECK(out.data == (void *)data);
    CHECK(out.sizes[0] == 2 && out.sizes[1] == 2 && out.sizes[2] == 3);
    CHECK(out.strides[0] == 6 && out.strides[1] == 3 && out.strides[2] == 1);

    int64_t bad1[3] = {5, -1, 1}, bad2[3] = {-1, -1, 3}, bad3[2] = {3, 4}, bad4[3] = {2, 2, 2};
    args[1] = kt_mklist(&l, bad1, 3);
    CHECK_STATUS(call("executorch_prim::et_view.default", args, 3), ETCH_ERR_INVALID_ARGUMENT);
    args[1] = kt_mklist(&l, bad2, 3);
    CHECK_STATUS(call("executorch_prim::et_view.default", args, 3), ETCH_ERR_INVALID_ARGUMENT);
    args[1] = kt_mklist(&l, bad3, 2); /* rank of out is 3 */
    CHECK_STATUS(call("executorch_prim::et_view.default", args, 3), ETCH_ERR_INVALID_ARGUMENT);
    args[1] = kt_mklist(&l, bad4, 3); /* 8 != 12 elements */
    CHECK_STATUS(call("executorch_prim::et_view.default", args, 3), ETCH_ERR_INVALID_ARGUMENT);
    /* dtype mismatch, non-contiguous self */
    args[1] = kt_mklist(&l, size, 3);
    out.dtype = ETCH_DTYPE_INT;
    CHECK_STATUS(call("executorch_prim::et_view.default", args, 3), ETCH_ERR_INVALID_TYPE);
    out.dtype = ETCH_DTYPE_FLOAT;
    self.dim_order[0] = 1;
    self.dim_order[1] = 0;
    etch_tensor_update_strides(&self);
    CHECK_STATUS(call("executorch_prim::et_view.default", args, 3), ETCH_ERR_NOT_SUPPORTED);
    /* not a tensor */
    etch_value iv = kt_vint(3);
    etch_value *args2[3] = {&iv, args[1], &vo};
    CHECK(call("executorch_prim::et_view.default", args2, 3) != ETCH_OK);
}

static void test_et_copy_index(void) {
    int32_t buf[4 * 3];
    memset(buf, 0, sizeof buf);
    int64_t s43[2] = {4, 3}, s3[1] = {3};
    etch_tensor to, from;
    etch_tensor_init(&to, ETCH_DTYPE_INT, 2, s43, buf);
    to.dynamism = ETCH_SHAPE_DYNAMIC_BOUND; /* capacity 12 = 4 rows */
    int32_t row[3];
    etch_tensor_init(&from, ETCH_DTYPE_INT, 1, s3, row);
    etch_value vt = kt_vtensor(&to), vf = kt_vtensor(&from), vi;
    etch_value *args[3] = {&vt, &vf, &vi};
    for (int it = 0; it < 4; it++) {
        for (int j = 0; j < 3; j++)
            row[j] = it * 10 + j;
        vi = kt_vint(it);
        CHECK_OK(call("executorch_prim::et_copy_index.tensor", args, 3));
        CHECK(to.sizes[0] == it + 1 && to.sizes[1] == 3);
    }
    for (int i = 0; i < 12; i++)
        CHECK(buf[i] == (i / 3) * 10 + i % 3);
    vi = kt_vint(4); /* a fifth row does not fit */
    CHECK_STATUS(call("executorch_prim::et_copy_index.tensor", args, 3), ETCH_ERR_NOT_SUPPORTED);
    vi = kt_vint(-1);
    CHECK_STATUS(call("executorch_prim::et_copy_index.tensor", args, 3), ETCH_ERR_INVALID_ARGUMENT);
    vi = kt_vint(INT64_MAX);
    CHECK(call("executorch_prim::et_copy_index.tensor", args, 3) != ETCH_OK);
    /* static copy_to: slices must already exist */
    etch_tensor_init(&to, ETCH_DTYPE_INT, 2, s43, buf);
    vi = kt_vint(2);
    row[0] = 7;
    CHECK_OK(call("executorch_prim::et_copy_index.tensor", args, 3));
    CHECK(buf[6] == 7 && to.sizes[0] == 4);
    vi = kt_vint(4);
    CHECK_STATUS(call("executorch_prim::et_copy_index.tensor", args, 3), ETCH_ERR_INVALID_ARGUMENT);
    /* shape and dtype mismatches */
    int64_t s2[1] = {2};
    etch_tensor_init(&from, ETCH_DTYPE_INT, 1, s2, row);
    vi = kt_vint(0);
    CHECK_STATUS(call("executorch_prim::et_copy_index.tensor", args, 3), ETCH_ERR_INVALID_ARGUMENT);
    etch_tensor_init(&from, ETCH_DTYPE_FLOAT, 1, s3, row);
    CHECK_STATUS(call("executorch_prim::et_copy_index.tensor", args, 3), ETCH_ERR_INVALID_TYPE);
    etch_tensor_init(&from, ETCH_DTYPE_INT, 2, s43, buf);
    CHECK_STATUS(call("executorch_prim::et_copy_index.tensor", args, 3), ETCH_ERR_INVALID_ARGUMENT);
}

static void test_int_edge_cases(void) {
    /* INT_MIN / -1 wraps instead of trapping */
    int64_t a64[2] = {INT64_MIN, 7}, b64[2] = {-1, -2}, o64[2];
    int64_t s2[1] = {2};
    etch_tensor a, b, o;
    etch_tensor_init(&a, ETCH_DTYPE_LONG, 1, s2, a64);
    etch_tensor_init(&b, ETCH_DTYPE_LONG, 1, s2, b64);
    etch_tensor_init(&o, ETCH_DTYPE_LONG, 1, s2, o64);
    etch_value va = kt_vtensor(&a), vb = kt_vtensor(&b), vo = kt_vtensor(&o), mode;
    mode.tag = ETCH_VALUE_STRING;
    mode.u.str.ptr = "floor";
    mode.u.str.len = 5;
    etch_value *args[5] = {&va, &vb, &mode, &vo, &vo};
    CHECK_OK(call("aten::div.out_mode", args, 5));
    CHECK(o64[0] == INT64_MIN && o64[1] == -4);
    mode.u.str.ptr = "trunc";
    CHECK_OK(call("aten::div.out_mode", args, 5));
    CHECK(o64[0] == INT64_MIN && o64[1] == -3);
    /* int32 overflow in add/mul wraps */
    int32_t x[2] = {INT32_MAX, INT32_MIN}, y[2] = {1, -1}, z[2];
    etch_tensor_init(&a, ETCH_DTYPE_INT, 1, s2, x);
    etch_tensor_init(&b, ETCH_DTYPE_INT, 1, s2, y);
    etch_tensor_init(&o, ETCH_DTYPE_INT, 1, s2, z);
    etch_value one = kt_vint(1);
    etch_value *add_args[5] = {&va, &vb, &one, &vo, &vo};
    CHECK_OK(call("aten::add.out", add_args, 5));
    CHECK(z[0] == INT32_MIN && z[1] == INT32_MAX);
    /* alpha overflow and int64 wrap */
    etch_tensor_init(&a, ETCH_DTYPE_LONG, 1, s2, a64);
    etch_tensor_init(&b, ETCH_DTYPE_LONG, 1, s2, b64);
    etch_tensor_init(&o, ETCH_DTYPE_LONG, 1, s2, o64);
    etch_value big = kt_vint(INT64_MAX);
    add_args[2] = &big;
    CHECK_OK(call("aten::sub.out", add_args, 5));
    CHECK(o64[0] == (int64_t)((uint64_t)INT64_MIN + (uint64_t)INT64_MAX));
    /* prim ops at the edges */
    etch_value p = kt_vint(INT64_MIN), q = kt_vint(-1), res = kt_vnone();
    etch_value *pargs[3] = {&p, &q, &res};
    CHECK_OK(call("executorch_prim::floordiv.int", pargs, 3));
    CHECK(res.tag == ETCH_VALUE_INT && res.u.i == INT64_MIN);
    CHECK_OK(call("executorch_prim::mod.int", pargs, 3));
    CHECK(res.tag == ETCH_VALUE_INT && res.u.i == 0);
    CHECK_OK(call("executorch_prim::mul.Scalar", pargs, 3));
    CHECK(res.tag == ETCH_VALUE_INT && res.u.i == INT64_MIN);
    etch_value *nargs1[2] = {&p, &res};
    CHECK_OK(call("executorch_prim::neg.Scalar", nargs1, 2));
    CHECK(res.tag == ETCH_VALUE_INT && res.u.i == INT64_MIN);
    q = kt_vint(0);
    CHECK_STATUS(call("executorch_prim::floordiv.Scalar", pargs, 3), ETCH_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(call("executorch_prim::mod.int", pargs, 3), ETCH_ERR_INVALID_ARGUMENT);
    q = kt_vdouble(0.0);
    CHECK_STATUS(call("executorch_prim::truediv.Scalar", pargs, 3), ETCH_ERR_INVALID_ARGUMENT);
    /* the result slot may be the same value as an input */
    p = kt_vint(5);
    q = kt_vint(3);
    etch_value *inplace[3] = {&p, &q, &p};
    CHECK_OK(call("executorch_prim::add.Scalar", inplace, 3));
    CHECK(p.tag == ETCH_VALUE_INT && p.u.i == 8);
}

static void test_malformed_args(void) {
    float d[6] = {1, 2, 3, 4, 5, 6}, o[6];
    int64_t s23[2] = {2, 3};
    etch_tensor a, out;
    etch_tensor_init(&a, ETCH_DTYPE_FLOAT, 2, s23, d);
    etch_tensor_init(&out, ETCH_DTYPE_FLOAT, 2, s23, o);
    etch_value va = kt_vtensor(&a), vo = kt_vtensor(&out), vi = kt_vint(1), vn = kt_vnone();
    /* wrong kinds where tensors belong */
    etch_value *args[5] = {&vi, &va, &vi, &vo, &vo};
    CHECK_STATUS(call("aten::add.out", args, 5), ETCH_ERR_INVALID_TYPE);
    args[0] = &va;
    args[1] = &vn;
    CHECK_STATUS(call("aten::add.out", args, 5), ETCH_ERR_INVALID_TYPE);
    /* too few arguments */
    args[1] = &va;
    CHECK(call("aten::add.out", args, 2) != ETCH_OK);
    CHECK(call("aten::convolution.out", args, 3) != ETCH_OK);
    CHECK(call("executorch_prim::add.Scalar", args, 1) != ETCH_OK);
    /* a tensor with elements but no data */
    a.data = NULL;
    CHECK_STATUS(call("aten::add.out", args, 5), ETCH_ERR_INVALID_STATE);
    a.data = d;
    /* a broken dim order */
    a.dim_order[0] = 1;
    a.dim_order[1] = 1;
    CHECK_STATUS(call("aten::add.out", args, 5), ETCH_ERR_INVALID_ARGUMENT);
    etch_tensor_init(&a, ETCH_DTYPE_FLOAT, 2, s23, d);
    /* unsupported dtype */
    a.dtype = ETCH_DTYPE_UINT32;
    CHECK_STATUS(call("aten::add.out", args, 5), ETCH_ERR_INVALID_TYPE);
    a.dtype = 200;
    CHECK_STATUS(call("aten::relu.out", args, 2), ETCH_ERR_INVALID_TYPE);
    a.dtype = ETCH_DTYPE_FLOAT;
    /* an output without data after resize */
    etch_tensor empty_out;
    int64_t s0[2] = {0, 3};
    etch_tensor_init(&empty_out, ETCH_DTYPE_FLOAT, 2, s0, NULL);
    empty_out.dynamism = ETCH_SHAPE_DYNAMIC_BOUND;
    empty_out.capacity = 6;
    etch_value ve = kt_vtensor(&empty_out);
    etch_value *rargs[2] = {&va, &ve};
    CHECK_STATUS(call("aten::relu.out", rargs, 2), ETCH_ERR_INVALID_STATE);
    /* int list items that are not Ints */
    kt_ilist l;
    int64_t dims[2] = {1, 0};
    etch_value *lv = kt_mklist(&l, dims, 2);
    l.items[1] = kt_vdouble(1.0);
    etch_value *pargs[4] = {&va, lv, &vo, &vo};
    CHECK_STATUS(call("aten::permute_copy.out", pargs, 4), ETCH_ERR_INVALID_TYPE);
    l.ptrs[1] = NULL;
    CHECK_STATUS(call("aten::permute_copy.out", pargs, 4), ETCH_ERR_INVALID_TYPE);
    /* the failure message names the operator */
    CHECK(strstr(etch_last_error(), "permute_copy") != NULL);
}

static void test_in_place(void) {
    /* out aliasing self (add_) and broadcasting over itself */
    float d[6] = {1, 2, 3, 4, 5, 6}, r[3] = {10, 20, 30};
    int64_t s23[2] = {2, 3}, s3[1] = {3};
    etch_tensor a, b;
    etch_tensor_init(&a, ETCH_DTYPE_FLOAT, 2, s23, d);
    etch_tensor_init(&b, ETCH_DTYPE_FLOAT, 1, s3, r);
    etch_value va = kt_vtensor(&a), vb = kt_vtensor(&b), two = kt_vint(2);
    etch_value *args[5] = {&va, &vb, &two, &va, &va};
    CHECK_OK(call("aten::add.out", args, 5));
    CHECK(d[0] == 21 && d[5] == 66);
}

/* A "thread pool" that runs the chunks in reverse order, in small pieces: results must not
 * depend on how parallel_for splits the work. */
static void fake_parallel_for(void *self, int64_t n, int64_t grain, etch_parallel_fn fn,
                              void *arg) {
    (void)self;
    int64_t step = grain > 0 ? grain : 1;
    for (int64_t end = n; end > 0; end -= step)
        fn(arg, end - step > 0 ? end - step : 0, end);
}

static void test_threadpool_split(void) {
    enum { N = 2, C = 3, H = 9, W = 8, CO = 4 };
    static float x[N * C * H * W], w[CO * C * 9], b[CO], o1[N * CO * H * W], o2[N * CO * H * W];
    for (int i = 0; i < N * C * H * W; i++)
        x[i] = (float)((i * 37) % 17) - 8.0f;
    for (int i = 0; i < CO * C * 9; i++)
        w[i] = (float)((i * 13) % 7) - 3.0f;
    for (int i = 0; i < CO; i++)
        b[i] = (float)i;
    int64_t xs[4] = {N, C, H, W}, ws[4] = {CO, C, 3, 3}, bs[1] = {CO}, os[4] = {N, CO, H, W};
    etch_tensor tx, tw, tb, to1, to2;
    etch_tensor_init(&tx, ETCH_DTYPE_FLOAT, 4, xs, x);
    etch_tensor_init(&tw, ETCH_DTYPE_FLOAT, 4, ws, w);
    etch_tensor_init(&tb, ETCH_DTYPE_FLOAT, 1, bs, b);
    etch_tensor_init(&to1, ETCH_DTYPE_FLOAT, 4, os, o1);
    etch_tensor_init(&to2, ETCH_DTYPE_FLOAT, 4, os, o2);
    kt_ilist ls, lp, ld, lo;
    int64_t one[1] = {1}, zero[1] = {0};
    etch_value vx = kt_vtensor(&tx), vw = kt_vtensor(&tw), vb = kt_vtensor(&tb), vo1 = kt_vtensor(&to1),
               vo2 = kt_vtensor(&to2), tr, g = kt_vint(1);
    tr.tag = ETCH_VALUE_BOOL;
    tr.u.b = false;
    etch_value *args[11] = {&vx, &vw, &vb, kt_mklist(&ls, one, 1), kt_mklist(&lp, one, 1),
                            kt_mklist(&ld, one, 1), &tr, kt_mklist(&lo, zero, 1), &g, &vo1, &vo1};
    CHECK_OK(call("aten::convolution.out", args, 11));
    etch_threadpool_iface pool = {NULL, 4, fake_parallel_for, NULL};
    const etch_kernel *k = etch_kernels_find("aten::convolution.out", 21);
    etch_kernel_context ctx;
    etch_kernel_context_init(&ctx, "aten::convolution.out", NULL, 0, &pool);
    args[9] = args[10] = &vo2;
    k->fn(&ctx, args, 11);
    CHECK_OK(ctx.status);
    CHECK(memcmp(o1, o2, sizeof o1) == 0);

    /* mm over the same data */
    int64_t ms[2] = {N * C * H, W}, m2[2] = {W, 5}, mo[2] = {N * C * H, 5};
    static float mo1[N * C * H * 5], mo2[N * C * H * 5];
    etch_tensor ta, tb2, tmo1, tmo2;
    etch_tensor_init(&ta, ETCH_DTYPE_FLOAT, 2, ms, x);
    etch_tensor_init(&tb2, ETCH_DTYPE_FLOAT, 2, m2, w);
    etch_tensor_init(&tmo1, ETCH_DTYPE_FLOAT, 2, mo, mo1);
    etch_tensor_init(&tmo2, ETCH_DTYPE_FLOAT, 2, mo, mo2);
    etch_value va = kt_vtensor(&ta), vb2 = kt_vtensor(&tb2), vm1 = kt_vtensor(&tmo1), vm2 = kt_vtensor(&tmo2);
    etch_value *margs[4] = {&va, &vb2, &vm1, &vm1};
    CHECK_OK(call("aten::mm.out", margs, 4));
    margs[2] = margs[3] = &vm2;
    k = etch_kernels_find("aten::mm.out", 12);
    etch_kernel_context_init(&ctx, "aten::mm.out", NULL, 0, &pool);
    k->fn(&ctx, margs, 4);
    CHECK_OK(ctx.status);
    CHECK(memcmp(mo1, mo2, sizeof mo1) == 0);
}

/* etch_kernel_parallel_for_thread through the kernel context: a pool without
 * parallel_for_thread (or none, or one thread) runs fn once, as thread 0 over [0, n); a pool with
 * it gets the call as made. */
typedef struct thread_calls {
    int calls;
    int thread;
    int64_t begin, end, covered;
} thread_calls;

static void note_thread_chunk(void *arg, int thread, int64_t begin, int64_t end) {
    thread_calls *t = (thread_calls *)arg;
    t->calls++;
    t->thread = thread;
    t->begin = begin;
    t->end = end;
    t->covered += end - begin;
}

static int forwarded; /* calls that reached the test pool's parallel_for_thread */

static void reverse_parallel_for_thread(void *self, int64_t n, int64_t grain,
                                        etch_parallel_thread_fn fn, void *arg) {
    (void)self;
    forwarded++;
    int64_t step = grain > 0 ? grain : 1;
    for (int64_t end = n, k = 0; end > 0; end -= step, k++) /* thread indices 3, 2, 1, 0, ... */
        fn(arg, (int)(3 - k % 4), end - step > 0 ? end - step : 0, end);
}

static void test_parallel_for_thread(void) {
    etch_threadpool_iface without = {NULL, 4, fake_parallel_for, NULL};
    etch_threadpool_iface single = {NULL, 1, fake_parallel_for, reverse_parallel_for_thread};
    etch_threadpool_iface with = {NULL, 4, fake_parallel_for, reverse_parallel_for_thread};
    const etch_threadpool_iface *serial[3] = {NULL, &without, &single};
    for (int i = 0; i < 3; i++) {
        etch_kernel_context ctx;
        etch_kernel_context_init(&ctx, "test", NULL, 0, serial[i]);
        thread_calls t = {0, -1, -1, -1, 0};
        etch_kernel_parallel_for_thread(&ctx, 37, 4, note_thread_chunk, &t);
        CHECK_MSG(t.calls == 1 && t.thread == 0 && t.begin == 0 && t.end == 37,
                  "serial parallel_for_thread (%d): %d calls, last thread %d [%lld, %lld)", i,
                  t.calls, t.thread, (long long)t.begin, (long long)t.end);
        t = (thread_calls){0, -1, -1, -1, 0};
        etch_kernel_parallel_for_thread(&ctx, 0, 1, note_thread_chunk, &t);
        CHECK(t.calls == 0);
    }
    etch_kernel_context ctx;
    etch_kernel_context_init(&ctx, "test", NULL, 0, &with);
    thread_calls t = {0, -1, -1, -1, 0};
    forwarded = 0;
    etch_kernel_parallel_for_thread(&ctx, 37, 4, note_thread_chunk, &t);
    CHECK_MSG(forwarded == 1 && t.calls == 10 && t.covered == 37 && t.begin == 0 && t.end == 1,
              "parallel_for_thread through the pool: %d forwarded, %d chunks covering %lld",
              forwarded, t.calls, (long long)t.covered);
    /* no more than a grain: inline, as thread 0 */
    t = (thread_calls){0, -1, -1, -1, 0};
    etch_kernel_parallel_for_thread(&ctx, 4, 4, note_thread_chunk, &t);
    CHECK(forwarded == 1 && t.calls == 1 && t.thread == 0 && t.end == 4);
}

int main(int argc, char **argv) {
    test_registration();
    test_et_view();
    test_et_copy_index();
    test_int_edge_cases();
    test_malformed_args();
    test_in_place();
    test_threadpool_split();
    test_parallel_for_thread();
    if (argc > 1)
        run_golden(argv[1]);
    return etch_test_finish();
}
