/*
 * etch/optimize.h — load-time optimization, the optional unit beside the core runtime.
 *
 * Basic usage (nothing to do with libetch: the unit is part of it and on from the start):
 *
 *   etch_kernels_register_optimized();       // installs it too, as do the portable kernels
 *   etch_method_load(program, "forward", &mem, NULL, &method);   // fused, blocked, prepared
 *
 * When a method loads, the unit folds activations into the calls before them, stores
 * intermediate tensors channel-blocked, fills the kernels' prepared buffers and marks runs
 * of chained calls (etch_method_options.no_fusion, no_blocked_layout, no_prepack; the hooks
 * of etch/kernel.h: etch_kernels_register_prepare, _layout, _chain). It lives in its own
 * library (src/optimize/) that the core reaches through one registered table, so a build
 * for a microcontroller may leave it out: methods then load and run as with no_fusion,
 * no_blocked_layout and no_prepack (the same results), and their pool needs none of its
 * bytes (etch_method_meta_pool_size).
 */
#ifndef ETCH_OPTIMIZE_H
#define ETCH_OPTIMIZE_H

#ifdef __cplusplus
extern "C" {
#endif

/* Register the load-time passes with the runtime (idempotent). Registering the built-in
 * kernels or any prepare, layout or chain function does it too; a program that links the
 * unit statically and registers only kernels of its own calls it before loading methods.
 * Not thread-safe against concurrent loads: call it at start-up. */
void etch_optimize_install(void);

#ifdef __cplusplus
}
#endif
#endif
