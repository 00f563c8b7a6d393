/*
 * The channel-blocked layout chosen at method load (src/optimize/layout.c).
 *
 * Programs from gen_layout.py (small CNNs exported from PyTorch) run with the optimized
 * kernels, where convolution, max pooling and mean are replaced by test kernels that wrap the
 * portable ones: they convert a blocked input to NCHW, run the portable kernel, and convert a
 * blocked output back, so they are correct for whatever the pass chooses and the test checks
 * the pass alone (the optimized blocked kernels have tests of their own). Their layout
 * functions are those the optimized kernels register (convolution: etch_opt_convolution_layout)
 * or the same rules (pooling: input, values and indices tied; mean over H, W: input only).
 *
 * Checked per program: outputs equal PyTorch's (tolerance 1e-4) with the pass and without it
 * (no_blocked_layout), and equal each other; how many convolution calls read / write blocked
 * tensors (the generator's expectation); for every value, every call naming it agrees on its
 * layout; blocked tensors are 4-D with C % 8 == 0, never constants, method inputs or outputs;
 * tied arguments of a call agree; nothing is blocked with no_blocked_layout.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etch/etch.h"
#include "etch/kernels.h"
#include "etch_test.h"
#include "kernel_test_util.h"
#include "kernels/optimized/opt_conv.h"
#include "kernels/portable/portable.h"
#include "kernels/portable/portable_nn.h"
#include "layout_cases.h"
#include "runtime/program_impl.h"
#include "test_file.h"
#include "test_method.h"

#define TEMP_SIZE (8u << 20)

static const char *g_dir;

/* ---- test kernels: the portable ones behind NCHW <-> blocked copies ----------------------- */

static void to_blocked_i64(const int64_t *src, int64_t *dst, const int64_t *s) {
    const int64_t C = s[1], H = s[2], W = s[3];
    for (int64_t n = 0; n < s[0]; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < H * W; i++)
                dst[((n * (C / 8) + c / 8) * H * W + i) * 8 + c % 8] = src[(n * C + c) * H * W + i];
}

/* A copy of tensor value v whose data is an NCHW scratch copy (converted from blocked when
 * `convert`); NULL on failure (recorded). */
static etch_value *nchw_copy(etch_kernel_context *ctx, const etch_value *v, etch_tensor *t,
                             etch_value *slot, bool convert) {
    *t = *v->u.tensor;
    t->data = etch_kernel_temp_alloc(ctx, etch_tensor_nbytes(t), 64);
    if (!t->data)
        return NULL;
    if (convert)
        kt_from_blocked((const float *)v->u.tensor->data, (float *)t->data, t->sizes[0],
                        t->sizes[1], t->sizes[2], t->sizes[3]);
    *slot = kt_vtensor(t);
    return slot;
}

static void conv_wrap(etch_kernel_context *ctx, etch_value **args, size_t nargs) {
    const uint64_t b = etch_kernel_blocked_args(ctx);
    CHECK(nargs == 11);
    CHECK(((b >> 9) & 1) == ((b >> 10) & 1));
    etch_value *a[11], vin, vout;
    etch_tensor tin, tout;
    memcpy(a, args, sizeof a);
    if ((b & 1) && !(a[0] = nchw_copy(ctx, args[0], &tin, &vin, true)))
        return;
    if ((b >> 9) & 1) {
        if (!(a[9] = nchw_copy(ctx, args[9], &tout, &vout, false)))
            return;
        a[10] = a[9];
    }
    etch_portable_convolution_out(ctx, a, nargs);
    if (!etch_kernel_failed(ctx) && ((b >> 9) & 1)) {
        const etch_tensor *o = args[9]->u.tensor;
        kt_to_blocked((const float *)tout.data, (float *)o->data, o->sizes[0], o->sizes[1],
                      o->sizes[2], o->sizes[3]);
    }
}

static void maxpool_wrap(etch_kernel_context *ctx, etch_value **args, size_t nargs) {
    const uint64_t b = etch_kernel_blocked_args(ctx);
    CHECK(nargs == 9);
    CHECK(b == 0 || b == 0xc1u); /* self, out, indices: all or none (the list has no bit) */
    if (!b) {
        etch_portable_max_pool2d_with_indices_out(ctx, args, nargs);
        return;
    }
    etch_value *a[9], vin, vout, vidx;
    etch_tensor tin, tout, tidx;
    memcpy(a, args, sizeof a);
    if (!(a[0] = nchw_copy(ctx, args[0], &tin, &vin, true)) ||
        !(a[6] = nchw_copy(ctx, args[6], &tout, &vout, false)) ||
        !(a[7] = nchw_copy(ctx, args[7], &tidx, &vidx, false)))
        return;
    /* the result list names the blocked tensors; the portable kernel only checks it */
    etch_portable_max_pool2d_with_indices_out(ctx, a, nargs);
    if (etch_kernel_failed(ctx))
        return;
    const etch_tensor *o = args[6]->u.tensor, *ix = args[7]->u.tensor;
    kt_to_blocked((const float *)tout.data, (float *)o->data, o->sizes[0], o->sizes[1],
                  o->sizes[2], o->sizes[3]);
    to_blocked_i64((const int64_t *)tidx.data, (int64_t *)ix->data, ix->sizes);
}

static void mean_wrap(etch_kernel_context *ctx, etch_value **args, size_t nargs) {
    const uint64_t b = etch_kernel_blocked_args(ctx);
    CHECK(b == 0 || b == 1);
    etch_value *a[6], vin;
    etch_tensor tin;
    CHECK(nargs == 6);
    memcpy(a, args, sizeof a);
    if (b && !(a[0] = nchw_copy(ctx, args[0], &tin, &vin, true)))
        return;
    etch_portable_mean_out(ctx, a, nargs);
}

static void maxpool_layout(etch_kernel_context *ctx, etch_value **args, size_t nargs,
                           uint64_t *may, uint64_t *tied) {
    (void)ctx;
    (void)args;
    *may = *tied = 0;
    if (nargs == 9) {
        *may = 0x1c1u;
        *tied = 0x0c1u;
    }
}

static void mean_layout(etch_kernel_context *ctx, etch_value **args, size_t nargs,
                        uint64_t *may, uint64_t *tied) {
    (void)ctx;
    *may = *tied = 0;
    size_t n = 0;
    const int64_t *d = nargs == 6 && args[1]->tag == ETCH_VALUE_INT_LIST
                           ? etch_value_int_list(args[1], &n)
                           : NULL;
    if (d && n == 2 && args[3]->tag == ETCH_VALUE_NONE &&
        ((d[0] == 2 && d[1] == 3) || (d[0] == -2 && d[1] == -1) || (d[0] == 3 && d[1] == 2) ||
         (d[0] == -1 && d[1] == -2)))
        *may = 1;
}

static const etch_kernel wraps[] = {
    {"aten::convolution.out", "TTtLLLBLIWW", conv_wrap},
    {"aten::max_pool2d_with_indices.out", "TLLLLBWWY", maxpool_wrap},
    {"aten::mean.out", "TlBiWW", mean_wrap},
};

/* ---- checks on what the pass chose --------------------------------------------------------- */

static bool is_io(const etch_method *m, uint32_t v) {
    for (uint32_t i = 0; i < m->ninputs; i++)
        if ((uint32_t)m->inputs[i] == v)
            return true;
    for (uint32_t i = 0; i < m->noutputs; i++)
        if ((uint32_t)m->outputs[i] == v)
            return true;
    return false;
}

/* -1: never named by a kernel call, 0 / 1: NCHW / blocked at every call, 2: disagreement */
static int value_layout(const etch_method *m, uint32_t v) {
    int seen = -1;
    for (uint32_t c = 0; c < m->nchains; c++)
        for (uint32_t pc = 0; pc < m->chains[c].n; pc++) {
            const etch_instr *in = &m->chains[c].instrs[pc];
            if (in->kind != IA_KERNEL_CALL || in->skipped)
                continue;
            for (uint32_t k = 0; k < in->nargs; k++) {
                if ((uint32_t)(in->args[k] - m->values) != v)
                    continue;
                int b = k < 64 ? (int)((in->blocked >> k) & 1) : 0;
                if (seen >= 0 && seen != b)
                    return 2;
                seen = b;
            }
        }
    return seen;
}

static void check_choice(const etch_method *m, const layout_case *lc, bool expect_none) {
    int conv_in = 0, conv_out = 0;
    uint32_t nblocked = 0;
    for (uint32_t v = 0; v < m->nvalues; v++) {
        int l = value_layout(m, v);
        if (l == 2)
            CHECK_MSG(false, "%s: value %u blocked at some calls, not at others", lc->name, v);
        if (l != 1)
            continue;
        nblocked++;
        const etch_value *x = &m->values[v];
        CHECK(x->tag == ETCH_VALUE_TENSOR);
        if (x->tag != ETCH_VALUE_TENSOR)
            continue;
        const etch_tensor *t = x->u.tensor;
        CHECK_MSG(t->dim == 4 && t->sizes[1] % 8 == 0, "%s: value %u blocked with shape rank %u",
                  lc->name, v, t->dim);
        CHECK(!(t->flags & ETCH_TENSOR_CONSTANT));
        CHECK_MSG(!is_io(m, v), "%s: method input/output %u blocked", lc->name, v);
    }
    for (uint32_t c = 0; c < m->nchains; c++)
        for (uint32_t pc = 0; pc < m->chains[c].n; pc++) {
            const etch_instr *in = &m->chains[c].instrs[pc];
            if (in->kind != IA_KERNEL_CALL || in->skipped)
                continue;
            const char *op = m->ops[in->a].name;
            if (strcmp(op, "aten::convolution.out") == 0) {
                conv_in += (int)(in->blocked & 1);
                conv_out += (int)((in->blocked >> 9) & 1);
            }
            /* tied element-wise arguments agree */
            if (strcmp(op, "aten::add.out") == 0 || strcmp(op, "aten::relu.out") == 0 ||
                strcmp(op, "aten::clamp.out") == 0 || strcmp(op, "aten::mul.Scalar_out") == 0) {
                uint64_t tensors = 0;
                for (uint32_t k = 0; k < in->nargs; k++)
                    if (in->args[k]->tag == ETCH_VALUE_TENSOR)
                        tensors |= (uint64_t)1 << k;
                CHECK_MSG(in->blocked == 0 || in->blocked == tensors,
                          "%s: %s with blocked args %#llx of %#llx", lc->name, op,
                          (unsigned long long)in->blocked, (unsigned long long)tensors);
            }
            etch_instruction_info info;
            CHECK_OK(etch_method_instruction_info(m, c, pc, &info));
            CHECK(info.blocked_args == in->blocked);
        }
    if (expect_none) {
        CHECK_MSG(nblocked == 0, "%s: %u values blocked with no_blocked_layout", lc->name,
                  nblocked);
        return;
    }
    CHECK_MSG(conv_in == lc->conv_in_blocked && conv_out == lc->conv_out_blocked,
              "%s: convolutions reading / writing blocked tensors: %d / %d, expected %d / %d",
              lc->name, conv_in, conv_out, lc->conv_in_blocked, lc->conv_out_blocked);
}

/* ---- running ------------------------------------------------------------------------------- */

static float *run_case(const layout_case *lc, bool no_blocked) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.pte", g_dir, lc->name);
    etch_method_options mo;
    memset(&mo, 0, sizeof mo);
    mo.no_blocked_layout = no_blocked;
    etch_test_method L;
    if (etch_test_method_load(&L, path, NULL, &mo, TEMP_SIZE) != 0) {
        CHECK_MSG(false, "%s: load failed", lc->name);
        etch_test_method_unload(&L);
        return NULL;
    }
    check_choice(L.m, lc, no_blocked);

    snprintf(path, sizeof path, "%s/%s.in.bin", g_dir, lc->name);
    size_t in_bytes = 0;
    float *in = (float *)etch_test_read_file(path, 0, &in_bytes);
    const int64_t numel = lc->in_sizes[0] * lc->in_sizes[1] * lc->in_sizes[2] * lc->in_sizes[3];
    CHECK(in && in_bytes == (size_t)numel * sizeof(float));
    float *got = calloc((size_t)lc->out_numel, sizeof(float));
    if (in && got) {
        etch_tensor t;
        CHECK_OK(etch_tensor_init(&t, ETCH_DTYPE_FLOAT, 4, lc->in_sizes, in));
        etch_value v = kt_vtensor(&t);
        CHECK_OK(etch_method_set_input(L.m, 0, &v));
        CHECK_OK(etch_method_execute(L.m));
        int64_t off = 0;
        for (size_t i = 0; i < etch_method_num_outputs(L.m); i++) {
            const etch_value *o = etch_method_output(L.m, i);
            CHECK(o && o->tag == ETCH_VALUE_TENSOR);
            if (!o || o->tag != ETCH_VALUE_TENSOR)
                break;
            int64_t n = etch_tensor_numel(o->u.tensor);
            CHECK(off + n <= lc->out_numel);
            if (off + n > lc->out_numel)
                break;
            memcpy(got + off, o->u.tensor->data, (size_t)n * sizeof(float));
            off += n;
        }
        CHECK(off == lc->out_numel);
    }
    free(in);
    etch_test_method_unload(&L);
    return got;
}

static void compare(const char *name, const char *what, const float *got, const float *want,
                    int64_t n, double tol) {
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        if (!(d <= worst))
            worst = d; /* NaN too */
    }
    CHECK_MSG(worst <= tol, "%s: %s differ by %g (tolerance %g)", name, what, worst, tol);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s PROGRAM_DIR\n", argv[0]);
        return 2;
    }
    g_dir = argv[1];
    CHECK_OK(etch_kernels_register_optimized());
    CHECK_OK(etch_kernels_register(wraps, sizeof wraps / sizeof wraps[0]));
    CHECK_OK(etch_kernels_register_layout(conv_wrap, etch_opt_convolution_layout));
    CHECK_OK(etch_kernels_register_layout(maxpool_wrap, maxpool_layout));
    CHECK_OK(etch_kernels_register_layout(mean_wrap, mean_layout));
    CHECK(etch_kernels_layout_of(conv_wrap) == etch_opt_convolution_layout);

    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        const layout_case *lc = &CASES[i];
        char path[1024];
        snprintf(path, sizeof path, "%s/%s.out.bin", g_dir, lc->name);
        size_t bytes = 0;
        float *want = (float *)etch_test_read_file(path, 0, &bytes);
        CHECK(want && bytes == (size_t)lc->out_numel * sizeof(float));
        float *blocked = run_case(lc, false), *plain = run_case(lc, true);
        if (want && blocked && plain) {
            compare(lc->name, "blocked run vs PyTorch", blocked, want, lc->out_numel, 1e-4);
            compare(lc->name, "NCHW run vs PyTorch", plain, want, lc->out_numel, 1e-4);
            compare(lc->name, "blocked vs NCHW run", blocked, plain, lc->out_numel, 1e-5);
        }
        free(want);
        free(blocked);
        free(plain);
    }
    etch_kernels_reset();
    return etch_test_finish();
}
