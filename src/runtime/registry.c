/* Kernel and backend registries: fixed-size static tables, no allocation. */
#include <stdio.h>
#include <string.h>

#include "etch/backend.h"
#include "runtime/context.h"
#include "runtime/error.h"
#include "runtime/passes.h"

#ifndef ETCH_MAX_KERNELS
#define ETCH_MAX_KERNELS 2048 /* kernels in all (the tables themselves are the caller's) */
#endif
#ifndef ETCH_MAX_KERNEL_TABLES
#define ETCH_MAX_KERNEL_TABLES 32 /* etch_kernels_register calls */
#endif
#ifndef ETCH_MAX_KERNEL_CHECKS
#define ETCH_MAX_KERNEL_CHECKS 64 /* kernels with a load-time check */
#endif
#ifndef ETCH_MAX_BACKENDS
#define ETCH_MAX_BACKENDS 16
#endif

/* One registration: the caller's table (kept by pointer) and what it was registered with. */
typedef struct kernel_entry {
    const etch_kernel *k;
    size_t count;
    const char *impl;
    uint32_t flags;
} kernel_entry;

static kernel_entry tables[ETCH_MAX_KERNEL_TABLES];
static size_t num_tables, num_kernels;
/* What else is registered for a kernel function: its load-time check (the prepare, layout
 * and chain functions live with the passes that call them: src/optimize/hooks.c). */
typedef struct kernel_hooks {
    etch_kernel_fn kernel;
    etch_kernel_fn check;
} kernel_hooks;
static kernel_hooks hooks[ETCH_MAX_KERNEL_CHECKS];
static size_t num_hooks;
static const etch_backend *backends[ETCH_MAX_BACKENDS];
static size_t num_backends;
static const etch_load_passes *load_passes;

void etch_runtime_set_load_passes(const etch_load_passes *passes) { load_passes = passes; }
const etch_load_passes *etch_runtime_load_passes(void) { return load_passes; }

etch_status etch_kernels_register(const etch_kernel *k, size_t count) {
    return etch_kernels_register_ex(k, count, "custom", 0);
}

etch_status etch_kernels_register_ex(const etch_kernel *k, size_t count, const char *impl,
                                     uint32_t flags) {
    if (count && !k)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "kernels_register: NULL table");
    for (size_t i = 0; i < count; i++)
        if (!k[i].name || !k[i].fn)
            return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                            "kernels_register: entry %zu has no name or function", i);
    if (count > ETCH_MAX_KERNELS - num_kernels)
        return etch_err(ETCH_ERR_REGISTRATION_EXCEEDING_MAX_KERNELS,
                        "kernel registry full (%d entries)", ETCH_MAX_KERNELS);
    if (!count)
        return ETCH_OK;
    if (num_tables == ETCH_MAX_KERNEL_TABLES)
        return etch_err(ETCH_ERR_REGISTRATION_EXCEEDING_MAX_KERNELS,
                        "kernel registry full (%d registrations; build with a larger "
                        "ETCH_MAX_KERNEL_TABLES)",
                        ETCH_MAX_KERNEL_TABLES);
    tables[num_tables++] = (kernel_entry){k, count, impl ? impl : "custom", flags};
    num_kernels += count;
    return ETCH_OK;
}

const etch_kernel *etch_kernels_find(const char *name, size_t len) {
    /* newest first: later registrations (and later entries of one) replace earlier ones */
    for (size_t t = num_tables; t-- > 0;)
        for (size_t i = tables[t].count; i-- > 0;) {
            const char *n = tables[t].k[i].name;
            if (strncmp(n, name, len) == 0 && n[len] == 0)
                return &tables[t].k[i];
        }
    return NULL;
}

/* The newest registration whose table holds `k`. */
static const kernel_entry *entry_of(const etch_kernel *k) {
    const uintptr_t p = (uintptr_t)k;
    for (size_t t = num_tables; k && t-- > 0;) {
        const uintptr_t lo = (uintptr_t)tables[t].k;
        if (p >= lo && p - lo < tables[t].count * sizeof *k && (p - lo) % sizeof *k == 0)
            return &tables[t];
    }
    return NULL;
}

const char *etch_kernels_impl_of(const etch_kernel *k) {
    const kernel_entry *e = entry_of(k);
    return e ? e->impl : NULL;
}

uint32_t etch_kernels_flags_of(const etch_kernel *k) {
    const kernel_entry *e = entry_of(k);
    return e ? e->flags : 0;
}

size_t etch_kernels_count(void) { return num_kernels; }
const etch_kernel *etch_kernels_at(size_t i) {
    for (size_t t = 0; t < num_tables; t++) {
        if (i < tables[t].count)
            return &tables[t].k[i];
        i -= tables[t].count;
    }
    return NULL;
}
void etch_kernels_reset(void) {
    num_tables = num_kernels = 0;
    num_hooks = 0;
    if (load_passes && load_passes->reset)
        load_passes->reset();
}

/* The hooks of `kernel`, added (all NULL) when `add` and absent; NULL when the table is full
 * (error set) or, without `add`, when absent. */
static kernel_hooks *hooks_of(etch_kernel_fn kernel, bool add, const char *what) {
    for (size_t i = 0; kernel && i < num_hooks; i++)
        if (hooks[i].kernel == kernel)
            return &hooks[i];
    if (!add || !kernel)
        return NULL;
    if (num_hooks == ETCH_MAX_KERNEL_CHECKS) {
        etch_err(ETCH_ERR_OUT_OF_RESOURCES, "%s: registry of kernel hooks full (%d kernels)",
                 what, ETCH_MAX_KERNEL_CHECKS);
        return NULL;
    }
    hooks[num_hooks] = (kernel_hooks){kernel, NULL};
    return &hooks[num_hooks++];
}

etch_status etch_kernels_register_check(etch_kernel_fn kernel, etch_kernel_fn check) {
    if (!kernel)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "kernels_register_check: NULL kernel");
    kernel_hooks *h = hooks_of(kernel, true, "kernels_register_check");
    if (!h)
        return ETCH_ERR_OUT_OF_RESOURCES;
    h->check = check;
    return ETCH_OK;
}

etch_kernel_fn etch_kernels_check_of(etch_kernel_fn kernel) {
    const kernel_hooks *h = hooks_of(kernel, false, NULL);
    return h ? h->check : NULL;
}

etch_status etch_backends_register(const etch_backend *b) {
    if (!b || !b->name || !b->init || !b->execute)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "backends_register: a backend needs a name, init and execute");
    for (size_t i = 0; i < num_backends; i++)
        if (strcmp(backends[i]->name, b->name) == 0) {
            backends[i] = b;
            return ETCH_OK;
        }
    if (num_backends == ETCH_MAX_BACKENDS)
        return etch_err(ETCH_ERR_OUT_OF_RESOURCES, "backend registry full (%d entries)",
                        ETCH_MAX_BACKENDS);
    backends[num_backends++] = b;
    return ETCH_OK;
}

const etch_backend *etch_backends_find(const char *name, size_t len) {
    for (size_t i = 0; i < num_backends; i++) {
        const char *n = backends[i]->name;
        if (strlen(n) == len && memcmp(n, name, len) == 0)
            return backends[i];
    }
    return NULL;
}

void etch_backends_reset(void) { num_backends = 0; }

/* ---- kernel context ------------------------------------------------------------------- */

void etch_kernel_context_init(etch_kernel_context *ctx, const char *op_name, void *temp,
                              size_t temp_size, const etch_threadpool_iface *threadpool) {
    ctx->status = ETCH_OK;
    ctx->op_name = op_name ? op_name : "";
    ctx->temp = (uint8_t *)temp;
    ctx->temp_size = temp ? temp_size : 0;
    ctx->temp_used = 0;
    ctx->threadpool = threadpool;
    ctx->epilogue = NULL;
    ctx->prepared = NULL;
    ctx->prepared_size = 0;
    ctx->blocked = 0;
    ctx->replaces = 0;
    ctx->checking = false;
    ctx->chain_instrs = NULL;
    ctx->chain_ops = NULL;
    ctx->chain_pc = ctx->chain_len = 0;
}

void etch_kernel_prepared_replaces(etch_kernel_context *ctx, uint64_t args) {
    if (ctx)
        ctx->replaces |= args;
}

uint64_t etch_kernel_blocked_args(const etch_kernel_context *ctx) { return ctx->blocked; }

bool etch_kernel_checking(const etch_kernel_context *ctx) { return ctx && ctx->checking; }

const void *etch_kernel_prepared(const etch_kernel_context *ctx, size_t *size) {
    if (size)
        *size = ctx->prepared ? ctx->prepared_size : 0;
    return ctx->prepared;
}

const etch_epilogue *etch_kernel_epilogue(const etch_kernel_context *ctx) {
    return ctx->epilogue && ctx->epilogue->act != ETCH_ACT_NONE ? ctx->epilogue : NULL;
}

int etch_kernel_num_threads(const etch_kernel_context *ctx) {
    return ctx->threadpool && ctx->threadpool->num_threads > 1 ? ctx->threadpool->num_threads
                                                               : 1;
}

void etch_kernel_fail(etch_kernel_context *ctx, etch_status status, const char *fmt, ...) {
    if (ctx->status != ETCH_OK)
        return; /* keep the first failure */
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ctx->status = status == ETCH_OK ? ETCH_ERR_INTERNAL : status;
    (etch_err)(ctx->status, "%s: %s", ctx->op_name, msg); /* the kernel's text, even terse */
}

bool etch_kernel_failed(const etch_kernel_context *ctx) { return ctx->status != ETCH_OK; }
const char *etch_kernel_op_name(const etch_kernel_context *ctx) { return ctx->op_name; }

etch_status etch_kernel_resize(etch_kernel_context *ctx, etch_tensor *t, size_t dim,
                               const int64_t *sizes) {
    etch_status st = etch_tensor_resize(t, dim, sizes);
    if (st != ETCH_OK) {
        char shape[160];
        size_t o = 0;
        shape[0] = 0;
        for (size_t i = 0; i < dim && o < sizeof shape - 24; i++)
            o += (size_t)snprintf(shape + o, sizeof shape - o, i ? ", %lld" : "%lld",
                                  (long long)sizes[i]);
        etch_kernel_fail(ctx, st, "cannot resize output to [%s]: %s", shape, etch_last_error());
    }
    return st;
}

etch_status etch_kernel_resize_like(etch_kernel_context *ctx, etch_tensor *t,
                                    const etch_tensor *like) {
    return etch_kernel_resize(ctx, t, like->dim, like->sizes);
}

void *etch_kernel_temp_try(etch_kernel_context *ctx, size_t size, size_t align) {
    if (align == 0 || (align & (align - 1)))
        align = 16;
    uintptr_t base = (uintptr_t)ctx->temp + ctx->temp_used;
    size_t pad = (size_t)((align - (base & (align - 1))) & (align - 1));
    if (!ctx->temp || pad > ctx->temp_size - ctx->temp_used ||
        size > ctx->temp_size - ctx->temp_used - pad)
        return NULL;
    ctx->temp_used += pad + size;
    return (void *)(base + pad);
}

void *etch_kernel_temp_alloc(etch_kernel_context *ctx, size_t size, size_t align) {
    void *p = etch_kernel_temp_try(ctx, size, align);
    if (!p)
        etch_kernel_fail(ctx, ETCH_ERR_MEMORY_ALLOCATION_FAILED,
                         "needs %zu bytes of temp memory, %zu of %zu available", size,
                         ctx->temp ? ctx->temp_size - ctx->temp_used : 0, ctx->temp_size);
    return p;
}

/* The pool a parallel loop over n items in grains of `grain` goes to, or NULL when it runs
 * inline (no pool, one thread, no more than one grain). */
static const etch_threadpool_iface *loop_pool(const etch_kernel_context *ctx, int64_t n,
                                              int64_t grain) {
    const etch_threadpool_iface *tp = ctx->threadpool;
    return tp && tp->num_threads > 1 && n > (grain > 0 ? grain : 1) ? tp : NULL;
}

void etch_kernel_parallel_for(etch_kernel_context *ctx, int64_t n, int64_t grain,
                              etch_parallel_fn fn, void *arg) {
    if (n <= 0)
        return;
    const etch_threadpool_iface *tp = loop_pool(ctx, n, grain);
    if (tp && tp->parallel_for)
        tp->parallel_for(tp->self, n, grain, fn, arg);
    else
        fn(arg, 0, n);
}

void etch_kernel_parallel_for_thread(etch_kernel_context *ctx, int64_t n, int64_t grain,
                                     etch_parallel_thread_fn fn, void *arg) {
    if (n <= 0)
        return;
    const etch_threadpool_iface *tp = loop_pool(ctx, n, grain);
    if (tp && tp->parallel_for_thread)
        tp->parallel_for_thread(tp->self, n, grain, fn, arg);
    else
        fn(arg, 0, 0, n);
}
