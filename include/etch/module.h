/*
 * etch/module.h — the convenience layer: open a program and load methods without sizing
 * memory yourself. It allocates (once, at load), so it sits above the core.
 *
 * Basic usage:
 *
 *   etch_module *mod;
 *   etch_module_options o = etch_module_default_options();
 *   if (etch_module_open("model.pte", &o, &mod) != ETCH_OK) { ...etch_last_error()... }
 *   etch_method *m;
 *   etch_module_load_method(mod, "forward", &m);   // pool + arenas allocated for you
 *   etch_method_set_input_tensor(m, 0, &x);
 *   etch_method_execute(m);
 *   etch_module_close(mod);                        // frees its methods too
 *
 * Opening a module registers the kernels its options name (idempotent): by default the
 * optimized ones (with the portable ones beneath them). The kernel registry is process-wide,
 * so the choice holds for every method loaded afterwards: once the optimized kernels are
 * registered, a module asking for portable kernels only fails to open (ETCH_ERR_INVALID_STATE).
 *
 * With num_threads > 1 the module starts a thread pool (etch/threadpool.h) at open, shared by
 * all its methods, and stops it at close: kernels that split their work run on that many
 * threads (the calling one included); execute still never allocates or starts threads.
 */
#ifndef ETCH_MODULE_H
#define ETCH_MODULE_H

#include "etch/program.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Which kernels a module registers when it opens. */
typedef enum etch_module_kernels {
    ETCH_MODULE_KERNELS_OPTIMIZED = 0,  /* etch_kernels_register_optimized() (the default) */
    ETCH_MODULE_KERNELS_PORTABLE = 1,   /* etch_kernels_register_portable() only */
    ETCH_MODULE_KERNELS_REGISTERED = 2, /* none: use what the application registered */
} etch_module_kernels;

typedef struct etch_module_options {
    etch_load_mode load_mode;
    const char *data_path;   /* optional .ptd with external tensors */
    size_t temp_size;        /* kernel scratch per method, bytes (default 16 MiB: optimized
                                kernels pack operands there; untouched pages cost nothing) */
    int num_threads;         /* 0 or 1: serial (default 1); at most
                                ETCH_THREADPOOL_MAX_THREADS; < 0 is an error */
    etch_module_kernels kernels; /* default ETCH_MODULE_KERNELS_OPTIMIZED */
    bool no_fusion;              /* load methods without activation fusion (default false) */
    bool no_prepack;             /* load methods without prepacking constant weights */
    bool no_blocked_layout;      /* keep every tensor in its dim order (no channel blocking) */
    bool quiet_fallback;         /* no note on stderr when a method runs its CPU twin because
                                    a backend it delegates to is missing (etch_method_meta) */
    bool no_backends;            /* do not register etch's built-in backends (etch/backends.h)
                                    at open: a delegated method then loads its CPU twin, when
                                    the program has one. The backend registry is process-wide,
                                    as the kernels' is: backends registered before stay. */
} etch_module_options;

etch_module_options etch_module_default_options(void);

typedef struct etch_module etch_module;

etch_status etch_module_open(const char *path, const etch_module_options *opts,
                             etch_module **out);
etch_status etch_module_open_buffer(const void *data, size_t size,
                                    const etch_module_options *opts, etch_module **out);
void etch_module_close(etch_module *mod); /* accepts NULL */
const etch_program *etch_module_program(const etch_module *mod);
const etch_data_map *etch_module_data_map(const etch_module *mod);
/* Load (once; later calls return the same method) with memory sized from the metadata. */
etch_status etch_module_load_method(etch_module *mod, const char *name, etch_method **out);
/* Threads the module's kernels use (1 when serial). */
int etch_module_num_threads(const etch_module *mod);
/* "optimized", "portable", "registered"; "unknown" otherwise. */
const char *etch_module_kernels_name(etch_module_kernels kernels);
/* The method `etch run` would pick: "forward", else the only method; otherwise
 * ETCH_ERR_NOT_FOUND with the list of methods in the message. */
etch_status etch_module_default_method(const etch_module *mod, const char **name);

#ifdef __cplusplus
}
#endif
#endif
