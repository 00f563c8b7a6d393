/* The hook through which the core reaches the optional load-time passes (src/optimize). */
#ifndef ETCH_RUNTIME_PASSES_H
#define ETCH_RUNTIME_PASSES_H

#include "etch/program.h"

/*
 * What an optimizer does at method load: fusion, blocked layouts, preparation, chained calls
 * (src/optimize registers one with etch_optimize_install). The core names none of those
 * symbols: without a registered table a method loads and runs as with no_fusion,
 * no_blocked_layout and no_prepack, and its pool needs none of the passes' bytes.
 */
typedef struct etch_load_passes {
    /* Pool bytes the passes need to load the method of `meta`: returns what they keep
     * (prepared buffers); *scratch is the most they take at once while running (given back
     * before load returns). */
    size_t (*pool_size)(const etch_method_meta *meta, size_t *scratch);
    /* Rewrite method `m` once its values, operators and chains are built and checked, before
     * its delegates are initialised, as `opts` (NULL: defaults) allows, leaving `reserve`
     * pool bytes free for the delegates. Only ever changes what it proves equivalent. */
    void (*run)(etch_method *m, const etch_method_options *opts, size_t reserve);
    /* etch_kernels_reset: forget the kernel hooks registered with the passes. */
    void (*reset)(void);
} etch_load_passes;

/* Register the passes (NULL: none); the table must outlive every load. Register at start-up. */
void etch_runtime_set_load_passes(const etch_load_passes *passes);
/* The registered table; NULL when none. */
const etch_load_passes *etch_runtime_load_passes(void);

#endif
