/*
 * Load-time optimization: the optional unit beside the core runtime. It rewrites a loaded
 * method's instructions where it proves the result unchanged (fusion.c: activations folded
 * into the calls before them, runs of chained calls; layout.c: channel-blocked tensors;
 * prepare.c: kernels' prepared constants) and keeps the kernel hooks those passes ask
 * (hooks.c: etch_kernels_register_prepare / _layout / _chain). The core reaches it only
 * through the table of runtime/passes.h, which etch_optimize_install (etch/optimize.h)
 * registers.
 */
#ifndef ETCH_OPTIMIZE_OPTIMIZE_H
#define ETCH_OPTIMIZE_OPTIMIZE_H

#include "runtime/program_impl.h"

/* ---- operator fusion (fusion.c) ---- */

/* Pool bytes etch_method_fuse needs while it runs (released afterwards). */
size_t etch_method_fuse_scratch(uint32_t nvalues);
/* Fold activations into the kernel calls before them (see etch_method_options.no_fusion);
 * runs once chains are built, with `pool` having room for etch_method_fuse_scratch. Only
 * ever changes instructions it proves equivalent; returns the number of fusions. */
uint32_t etch_method_fuse(etch_method *m, etch_pool *pool);

/* Mark the runs of kernel calls that a chain function runs as one (etch/kernel.h, "chained
 * calls"); runs after fusion, layout and preparation, with `pool` having room for
 * etch_method_fuse_scratch. Returns the number of runs. */
uint32_t etch_method_chain_calls(etch_method *m, etch_pool *pool);

/* Do two bound tensors' storages (their capacity) overlap? (fusion.c) */
bool etch_tensor_bytes_overlap(const etch_tensor *a, const etch_tensor *b);
/* Does kernel call `in` write all of `x`'s bytes (a statically shaped out tensor covering
 * them; not an in-place operator)? (fusion.c) */
bool etch_instr_overwrites(const etch_method *m, const etch_instr *in, const etch_tensor *x);

/* ---- channel-blocked layout (layout.c) ---- */

/* Pool bytes etch_method_choose_layout needs while it runs (released afterwards). */
size_t etch_method_layout_scratch(uint32_t nvalues);
/* Choose the tensors stored channel-blocked (see etch_method_options.no_blocked_layout) and
 * set each call's `blocked`; runs after fusion, with `pool` having room for
 * etch_method_layout_scratch. Returns the number of blocked values. */
uint32_t etch_method_choose_layout(etch_method *m, etch_pool *pool);

/* ---- load-time preparation (prepare.c) ---- */

/* Pool bytes the prepare functions registered now ask for over every call site of the
 * method of `meta` (what etch_method_meta_pool_size counts for them). */
size_t etch_method_prepare_measure(const etch_method_meta *meta);
/* Call each call site's prepare function into the pool, keeping `reserve` bytes free; a call
 * site that does not fit (or whose prepare fails) runs unprepared. */
void etch_method_prepare_calls(etch_method *m, size_t reserve);

#endif
