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
 * Opening a module registers the portable kernels (idempotent).
 */
#ifndef ETCH_MODULE_H
#define ETCH_MODULE_H

#include "etch/program.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct etch_module_options {
    etch_load_mode load_mode;
    const char *data_path;   /* optional .ptd with external tensors */
    size_t temp_size;        /* kernel scratch per method, bytes */
    int num_threads;         /* <= 1: serial */
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
/* The method `etch run` would pick: "forward", else the only method; otherwise
 * ETCH_ERR_NOT_FOUND with the list of methods in the message. */
etch_status etch_module_default_method(const etch_module *mod, const char **name);

#ifdef __cplusplus
}
#endif
#endif
