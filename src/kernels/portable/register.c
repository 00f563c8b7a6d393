#include <string.h>

/* The portable kernel table: one line per operator (name, signature, function). */
#include "kernels/portable/portable.h"
#include "kernels/portable/portable_cortex_m.h"
#include "kernels/portable/portable_math.h"
#include "kernels/portable/portable_nn.h"
#include "kernels/portable/portable_quant.h"
#include "kernels/portable/portable_shape.h"

#define K(name, sig, fn) {name, sig, etch_portable_##fn}

/* Signature letters: see include/etch/kernel.h. Every entry ends with the return slot: the out
 * tensor again ("W") for single-out ops, a TensorList ("Y") for several outs, "R" for
 * functional scalar ops. */
static const etch_kernel portable_kernels[] = {
    /* elementwise arithmetic */
    K("aten::add.out", "TTSWW", add_out),
    K("aten::add.Scalar_out", "TSSWW", add_scalar_out),
    K("aten::sub.out", "TTSWW", sub_out),
    K("aten::sub.Scalar_out", "TSSWW", sub_scalar_out),
    K("aten::mul.out", "TTWW", mul_out),
    K("aten::mul.Scalar_out", "TSWW", mul_scalar_out),
    K("aten::div.out", "TTWW", div_out),
    K("aten::div.out_mode", "TTnWW", div_out_mode),
    K("aten::div.Scalar_out", "TSWW", div_scalar_out),
    K("aten::div.Scalar_mode_out", "TSnWW", div_scalar_mode_out),
    K("aten::relu.out", "TWW", relu_out),
    /* linear algebra, convolution, pooling */
    K("aten::mm.out", "TTWW", mm_out),
    K("aten::bmm.out", "TTWW", bmm_out),
    K("aten::addmm.out", "TTTSSWW", addmm_out),
    K("aten::convolution.out", "TTtLLLBLIWW", convolution_out),
    K("aten::max_pool2d_with_indices.out", "TLLLLBWWY", max_pool2d_with_indices_out),
    /* reductions */
    K("aten::sum.IntList_out", "TlBiWW", sum_intlist_out),
    /* copies, views, conversions */
    K("aten::permute_copy.out", "TLWW", permute_copy_out),
    K("aten::view_copy.out", "TLWW", view_copy_out),
    K("aten::clone.out", "TiWW", clone_out),
    K("aten::_to_copy.out", "TBiWW", to_copy_out),
    K("dim_order_ops::_clone_dim_order.out", "TBlWW", clone_dim_order_out),
    K("dim_order_ops::_to_dim_order_copy.out", "TBlWW", to_dim_order_copy_out),
    /* primitive operators */
    K("aten::sym_size.int", "TIR", sym_size_int),
    K("aten::sym_numel", "TR", sym_numel),
    K("aten::_local_scalar_dense", "TR", local_scalar_dense),
    K("executorch_prim::add.Scalar", "SSR", prim_add),
    K("executorch_prim::sub.Scalar", "SSR", prim_sub),
    K("executorch_prim::mul.Scalar", "SSR", prim_mul),
    K("executorch_prim::floordiv.Scalar", "SSR", prim_floordiv),
    K("executorch_prim::truediv.Scalar", "SSR", prim_truediv),
    K("executorch_prim::mod.Scalar", "SSR", prim_mod),
    K("executorch_prim::eq.Scalar", "SSR", prim_eq),
    K("executorch_prim::gt.Scalar", "SSR", prim_gt),
    K("executorch_prim::lt.Scalar", "SSR", prim_lt),
    K("executorch_prim::ge.Scalar", "SSR", prim_ge),
    K("executorch_prim::le.Scalar", "SSR", prim_le),
    K("executorch_prim::neg.Scalar", "SR", prim_neg),
    K("executorch_prim::sym_max.Scalar", "SSR", prim_sym_max),
    K("executorch_prim::sym_min.Scalar", "SSR", prim_sym_min),
    K("executorch_prim::sym_float.Scalar", "SR", prim_sym_float),
    K("executorch_prim::sym_int.Scalar", "SR", prim_sym_int),
    K("executorch_prim::sym_not.Scalar", "SR", prim_sym_not),
    K("executorch_prim::ceil.Scalar", "SR", prim_ceil),
    K("executorch_prim::round.Scalar", "SR", prim_round),
    K("executorch_prim::trunc.Scalar", "SR", prim_trunc),
    K("executorch_prim::floordiv.int", "IIR", prim_floordiv_int),
    K("executorch_prim::mod.int", "IIR", prim_mod_int),
    /* copy_to, copy_from, index (ExecuTorch passes exactly these three) */
    K("executorch_prim::et_copy_index.tensor", "WTI*", prim_et_copy_index),
    /* self, size, out: out becomes a view of self's data, so it may arrive unbound */
    K("executorch_prim::et_view.default", "TLV*", prim_et_view),
    /* the operator families, one table file each */
#include "kernels/portable/table_math.inc"
#include "kernels/portable/table_nn.inc"
#include "kernels/portable/table_shape.inc"
#include "kernels/portable/table_quant.inc"
#include "kernels/portable/table_cortex_m.inc"
};

/* dtypes each operator is tested with, generated from the golden cases */
static const struct {
    const char *name;
    uint32_t dtypes;
} portable_dtypes[] = {
#include "kernels/portable/op_dtypes.inc"
};

uint32_t etch_kernels_portable_dtypes(const char *name) {
    for (size_t i = 0; name && i < sizeof portable_dtypes / sizeof portable_dtypes[0]; i++)
        if (strcmp(portable_dtypes[i].name, name) == 0)
            return portable_dtypes[i].dtypes;
    return 0;
}

const etch_kernel *etch_kernels_portable_table(size_t *count) {
    if (count)
        *count = sizeof portable_kernels / sizeof portable_kernels[0];
    return portable_kernels;
}

/* Idempotent: does nothing while the table is in the registry. Looking for it (rather than
 * only keeping a flag) lets tests that call etch_kernels_reset() register it again. */
etch_status etch_kernels_register_portable(void) {
    static bool registered;
    size_t n;
    const etch_kernel *k = etch_kernels_portable_table(&n);
    if (registered) {
        for (size_t i = etch_kernels_count(); i-- > 0;)
            if (etch_kernels_at(i) == &k[0])
                return ETCH_OK;
    }
    etch_status st = etch_kernels_register_ex(k, n, "portable", 0);
    if (st == ETCH_OK)
        st = etch_q_register_checks(); /* verification of quantized constants at load */
    if (st == ETCH_OK)
        st = etch_cm_register_checks(); /* and of the cortex_m:: ones */
    if (st == ETCH_OK)
        registered = true;
    return st;
}
