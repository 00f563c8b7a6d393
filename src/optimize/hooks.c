/* The kernel hooks the load-time passes ask (prepare, layout and chain functions), and the
 * pass table the core calls at method load (runtime/passes.h). */
#include "etch/optimize.h"
#include "optimize/optimize.h"
#include "runtime/error.h"
#include "runtime/passes.h"

#ifndef ETCH_MAX_KERNEL_HOOKS
#define ETCH_MAX_KERNEL_HOOKS 128
#endif

/* What is registered for a kernel function: its prepare, layout and chain functions. */
typedef struct kernel_hooks {
    etch_kernel_fn kernel;
    etch_kernel_prepare_fn prepare;
    etch_kernel_layout_fn layout;
    etch_kernel_chain_fn chain;
} kernel_hooks;
static kernel_hooks hooks[ETCH_MAX_KERNEL_HOOKS];
static size_t num_hooks;

/* The hooks of `kernel`, added (all NULL) when `add` and absent; NULL when the table is full
 * (error set) or, without `add`, when absent. */
static kernel_hooks *hooks_of(etch_kernel_fn kernel, bool add, const char *what) {
    for (size_t i = 0; kernel && i < num_hooks; i++)
        if (hooks[i].kernel == kernel)
            return &hooks[i];
    if (!add || !kernel)
        return NULL;
    if (num_hooks == ETCH_MAX_KERNEL_HOOKS) {
        etch_err(ETCH_ERR_OUT_OF_RESOURCES, "%s: registry of kernel hooks full (%d kernels)",
                 what, ETCH_MAX_KERNEL_HOOKS);
        return NULL;
    }
    hooks[num_hooks] = (kernel_hooks){kernel, NULL, NULL, NULL};
    return &hooks[num_hooks++];
}

etch_status etch_kernels_register_prepare(etch_kernel_fn kernel, etch_kernel_prepare_fn prepare) {
    etch_optimize_install();
    if (!kernel)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "kernels_register_prepare: NULL kernel");
    kernel_hooks *h = hooks_of(kernel, true, "kernels_register_prepare");
    if (!h)
        return ETCH_ERR_OUT_OF_RESOURCES;
    h->prepare = prepare;
    return ETCH_OK;
}

etch_kernel_prepare_fn etch_kernels_prepare_of(etch_kernel_fn kernel) {
    const kernel_hooks *h = hooks_of(kernel, false, NULL);
    return h ? h->prepare : NULL;
}

etch_status etch_kernels_register_layout(etch_kernel_fn kernel, etch_kernel_layout_fn layout) {
    etch_optimize_install();
    if (!kernel)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "kernels_register_layout: NULL kernel");
    kernel_hooks *h = hooks_of(kernel, true, "kernels_register_layout");
    if (!h)
        return ETCH_ERR_OUT_OF_RESOURCES;
    h->layout = layout;
    return ETCH_OK;
}

etch_kernel_layout_fn etch_kernels_layout_of(etch_kernel_fn kernel) {
    const kernel_hooks *h = hooks_of(kernel, false, NULL);
    return h ? h->layout : NULL;
}

etch_status etch_kernels_register_chain(etch_kernel_fn kernel, etch_kernel_chain_fn chain) {
    etch_optimize_install();
    if (!kernel)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "kernels_register_chain: NULL kernel");
    kernel_hooks *h = hooks_of(kernel, true, "kernels_register_chain");
    if (!h)
        return ETCH_ERR_OUT_OF_RESOURCES;
    h->chain = chain;
    return ETCH_OK;
}

etch_kernel_chain_fn etch_kernels_chain_of(etch_kernel_fn kernel) {
    const kernel_hooks *h = hooks_of(kernel, false, NULL);
    return h ? h->chain : NULL;
}

/* ---- the pass table ------------------------------------------------------------------- */

static size_t passes_pool_size(const etch_method_meta *meta, size_t *scratch) {
    fb_table plan;
    fb_vec values;
    etch_program_plan(meta->program, meta->index, &plan);
    fb_vec_field(&plan, PLAN_VALUES, 4, 4, &values);
    /* one pass runs at a time, each on a copy of the pool: the largest scratch counts */
    const size_t fuse = etch_method_fuse_scratch(values.len),
                 layout = etch_method_layout_scratch(values.len);
    *scratch = fuse > layout ? fuse : layout;
    return etch_method_prepare_measure(meta);
}

static void passes_run(etch_method *m, const etch_method_options *opts, size_t reserve) {
    if (!(opts && opts->no_fusion)) {
        etch_pool scratch = m->pool; /* a copy: the pass's scratch is not kept */
        etch_method_fuse(m, &scratch);
    }
    if (!(opts && opts->no_blocked_layout)) {
        etch_pool scratch = m->pool;
        etch_method_choose_layout(m, &scratch);
    }
    if (!(opts && opts->no_prepack))
        etch_method_prepare_calls(m, reserve);
    if (!(opts && opts->no_fusion)) {
        etch_pool scratch = m->pool;
        etch_method_chain_calls(m, &scratch);
    }
}

static void passes_reset(void) { num_hooks = 0; }

static const etch_load_passes passes = {passes_pool_size, passes_run, passes_reset};

void etch_optimize_install(void) {
    if (etch_runtime_load_passes() != &passes)
        etch_runtime_set_load_passes(&passes);
}

#if defined(__GNUC__)
/* Linked in, on from the start (the shared library, and a static link that pulls this file
 * in: CMake's etch_static asks for it), as it was when the passes lived in the core. */
__attribute__((constructor)) static void optimize_autoinstall(void) { etch_optimize_install(); }
#endif
