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
 *
 * Memory: each delegate gets ETCH_DELEGATE_POOL_RESERVE bytes of the method pool for what
 * init() allocates, unless the backend has a pool_size() function, which says (from the
 * blob alone, before any init) how many bytes the delegate will allocate: its weights packed
 * once, its intermediates. etch_method_meta_pool_size counts them, so a caller sizing the
 * pool from the metadata never sees init fail for lack of pool.
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
    /* Look up data the payload names by key: the program's named_data first, then the
     * method's external data map (.ptd). ETCH_OK with the bytes (borrowed: valid while the
     * program / data map is open), ETCH_ERR_NOT_FOUND when no entry has that key. */
    etch_status (*named_data)(void *named_self, const char *key, size_t key_len,
                              const void **data, size_t *size);
    void *named_self;
} etch_backend_init_context;

/* Pool bytes a delegate gets when its backend has no pool_size() function. */
#define ETCH_DELEGATE_POOL_RESERVE 16384

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
    /* May be NULL (then ETCH_DELEGATE_POOL_RESERVE). The pool bytes init() of this blob will
     * allocate at most, alignment padding included; 0 when the blob is unusable (init then
     * fails with the reason). Must not read named data. */
    size_t (*pool_size)(void *user_data, const void *processed, size_t processed_size);
} etch_backend;

/* Only the pointer is kept; a later registration of the same name replaces the earlier. */
etch_status etch_backends_register(const etch_backend *backend);
const etch_backend *etch_backends_find(const char *name, size_t name_len);
void etch_backends_reset(void);

#ifdef __cplusplus
}
#endif
#endif
