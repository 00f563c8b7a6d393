/*
 * etch/backend.h — delegates (backends) behind one small interface.
 *
 * Basic usage:
 *
 *   static const etch_backend my_backend = {
 *       .name = "XnnpackBackend", .is_available = avail, .init = init,
 *       .execute = exec, .destroy = destroy, .user_data = NULL};
 *   etch_backends_register(&my_backend);
 *
 * When a method loads, every BackendDelegate entry of the program is looked up by its id;
 * a missing or unavailable backend fails the load with ETCH_ERR_NOT_FOUND naming the id.
 * init() receives the processed blob (borrowed from the program: valid while the program is
 * open), the compile specs, and an allocator over the method pool for its own state; it
 * returns an opaque handle. execute() receives the DelegateCall's values: the delegated
 * subgraph's inputs, then its outputs. destroy() runs when the method is freed.
 */
#ifndef ETCH_BACKEND_H
#define ETCH_BACKEND_H

#include "etch/kernel.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct etch_compile_spec {
    const char *key;   /* NUL-terminated, borrowed from the program */
    const void *value; /* opaque bytes, borrowed from the program */
    size_t value_size;
} etch_compile_spec;

typedef struct etch_backend_init_context {
    const char *method_name;
    /* Allocate from the method pool (lives as long as the method); NULL when exhausted. */
    void *(*alloc)(void *alloc_self, size_t size, size_t align);
    void *alloc_self;
} etch_backend_init_context;

typedef struct etch_backend {
    const char *name;
    bool (*is_available)(void *user_data);
    etch_status (*init)(void *user_data, const etch_backend_init_context *ctx,
                        const void *processed, size_t processed_size,
                        const etch_compile_spec *specs, size_t num_specs, void **handle);
    etch_status (*execute)(void *user_data, void *handle, etch_kernel_context *ctx,
                           etch_value **args, size_t nargs);
    void (*destroy)(void *user_data, void *handle); /* may be NULL */
    void *user_data;
} etch_backend;

/* Only the pointer is kept; a later registration of the same name replaces the earlier. */
etch_status etch_backends_register(const etch_backend *backend);
const etch_backend *etch_backends_find(const char *name, size_t name_len);
void etch_backends_reset(void);

#ifdef __cplusplus
}
#endif
#endif
