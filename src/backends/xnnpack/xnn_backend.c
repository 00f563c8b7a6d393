/* XnnpackBackend: the etch_backend vtable over xnn_graph / xnn_ops. */
#include <stdlib.h>
#include <string.h>

#include "backends/xnnpack/xnn_graph.h"
#include "backends/xnnpack/xnn_ops.h"
#include "etch/backends.h"
#include "runtime/error.h"

static bool xnn_available(void *user_data) {
    (void)user_data;
    return true;
}

static etch_status xnn_init(void *user_data, const etch_backend_init_context *ctx,
                            const void *processed, size_t processed_size,
                            const etch_compile_spec *specs, size_t num_specs, void **handle) {
    (void)user_data, (void)specs, (void)num_specs;
    xnn_alloc a = {ctx, 0, false};
    xnn_graph *g = (xnn_graph *)xnn_alloc_zeroed(&a, sizeof(xnn_graph), 16);
    if (!g)
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "XnnpackBackend: method pool full");
    etch_status st = xnn_graph_load((const uint8_t *)processed, processed_size, ctx, &a, g);
    if (st)
        return st;
    *handle = g;
    return ETCH_OK;
}

/* Measuring: the same load over the heap, freed at once (the pool is not there yet). */
typedef struct heap_block {
    struct heap_block *next;
} heap_block;

static void *heap_alloc(void *self, size_t size, size_t align) {
    heap_block **head = (heap_block **)self;
    if (align < 16)
        align = 16;
    if (size > SIZE_MAX / 2)
        return NULL;
    size_t hdr = (sizeof(heap_block) + align - 1) / align * align;
    uint8_t *raw = (uint8_t *)malloc(size + hdr + align);
    if (!raw)
        return NULL;
    heap_block *b = (heap_block *)raw;
    b->next = *head;
    *head = b;
    uintptr_t p = ((uintptr_t)(raw + sizeof(heap_block)) + align - 1) & ~(uintptr_t)(align - 1);
    return (void *)p;
}

static size_t xnn_pool_size(void *user_data, const void *processed, size_t processed_size) {
    (void)user_data;
    heap_block *head = NULL;
    etch_backend_init_context ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.method_name = "";
    ctx.alloc = heap_alloc;
    ctx.alloc_self = &head;
    xnn_alloc a = {&ctx, 0, true};
    xnn_graph g;
    etch_status st = xnn_graph_load((const uint8_t *)processed, processed_size, &ctx, &a, &g);
    while (head) {
        heap_block *next = head->next;
        free(head);
        head = next;
    }
    if (st) {
        etch_err_clear();
        return 0;
    }
    /* + the handle, and room for weights held in named data that may need a float copy */
    return a.used + a.used / 16 + sizeof(xnn_graph) + 4096;
}

static int etch_dtype_of(int xdt) {
    switch (xdt) {
    case XDT_FP32: return ETCH_DTYPE_FLOAT;
    case XDT_FP16: return ETCH_DTYPE_HALF;
    case XDT_QINT8: return ETCH_DTYPE_CHAR;
    case XDT_QUINT8: return ETCH_DTYPE_BYTE;
    case XDT_QINT32: return ETCH_DTYPE_INT;
    default: return -1;
    }
}

static etch_status bind_arg(xnn_value *v, etch_value *arg, size_t i, bool input) {
    if (!arg || arg->tag != ETCH_VALUE_TENSOR || !arg->u.tensor)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "XnnpackBackend: argument %zu is not a tensor", i);
    etch_tensor *t = arg->u.tensor;
    int want = etch_dtype_of(v->dtype);
    bool qmatch = (v->dtype == XDT_QINT8 && t->dtype == ETCH_DTYPE_QINT8) ||
                  (v->dtype == XDT_QUINT8 && t->dtype == ETCH_DTYPE_QUINT8);
    if (want < 0 || (t->dtype != want && !qmatch))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "XnnpackBackend: argument %zu is %s, the graph's %s %s", i,
                        etch_dtype_name(t->dtype), input ? "input" : "output",
                        xnn_datatype_name(v->dtype));
    if (!etch_tensor_is_contiguous(t))
        return etch_err(ETCH_ERR_NOT_SUPPORTED,
                        "XnnpackBackend: argument %zu is not contiguous", i);
    size_t align = etch_dtype_size(t->dtype);
    if (align > 1 && ((uintptr_t)t->data & (align - 1)))
        return etch_err(ETCH_ERR_NOT_SUPPORTED,
                        "XnnpackBackend: argument %zu's data is not aligned to its %zu-byte "
                        "elements (its memory plan places it at an odd offset)",
                        i, align);
    if (input) {
        if (t->dim != v->rank)
            return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                            "XnnpackBackend: input %zu has rank %u, the graph's %u", i, t->dim,
                            v->rank);
        int64_t n = 1, bound = xnn_numel(v->bound, v->rank);
        for (uint32_t d = 0; d < v->rank; d++) {
            v->dims[d] = t->sizes[d];
            n *= t->sizes[d];
        }
        if (n > bound)
            return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                            "XnnpackBackend: input %zu has %lld elements, above the graph's "
                            "bound of %lld",
                            i, (long long)n, (long long)bound);
        if (n && !t->data)
            return etch_err(ETCH_ERR_INVALID_ARGUMENT, "XnnpackBackend: input %zu has no data",
                            i);
    }
    v->data = (uint8_t *)t->data;
    return ETCH_OK;
}

static etch_status xnn_execute(void *user_data, void *handle, etch_kernel_context *ctx,
                               etch_value **args, size_t nargs) {
    (void)user_data;
    xnn_graph *g = (xnn_graph *)handle;
    if (nargs != (size_t)g->ninputs + g->noutputs)
        return etch_err(ETCH_ERR_INVALID_PROGRAM,
                        "XnnpackBackend: the call passes %zu values, the graph takes %u inputs "
                        "and %u outputs",
                        nargs, g->ninputs, g->noutputs);
    etch_status st;
    bool same = g->shaped;
    for (uint32_t i = 0; i < g->ninputs; i++) {
        xnn_value *v = &g->values[g->inputs[i]];
        if ((st = bind_arg(v, args[i], i, true)))
            return st;
        int64_t *was = g->shaped_dims + (size_t)i * XNN_MAX_DIMS;
        same = same && memcmp(was, v->dims, sizeof(int64_t) * v->rank) == 0;
        memcpy(was, v->dims, sizeof(int64_t) * v->rank);
    }
    /* every other shape follows from the inputs': derived again only when they changed */
    if (!same) {
        g->shaped = false;
        if ((st = xnn_ops_reshape(g)))
            return st;
        g->shaped = true;
    }
    for (uint32_t i = 0; i < g->noutputs; i++) {
        size_t ai = g->ninputs + i;
        xnn_value *v = &g->values[g->outputs[i]];
        if ((st = bind_arg(v, args[ai], ai, false)))
            return st;
        etch_tensor *t = args[ai]->u.tensor;
        if (etch_tensor_resize(t, v->rank, v->dims) != ETCH_OK)
            return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                            "XnnpackBackend: output %u cannot take the graph's rank-%u shape "
                            "(its capacity is %lld elements)",
                            i, v->rank, (long long)t->capacity);
        v->data = (uint8_t *)t->data;
        if (etch_dtype_size(t->dtype) > 1 && ((uintptr_t)t->data & (etch_dtype_size(t->dtype) - 1)))
            return etch_err(ETCH_ERR_NOT_SUPPORTED,
                            "XnnpackBackend: output %u's data is not aligned to its elements", i);
        if (xnn_numel(v->dims, v->rank) && !v->data)
            return etch_err(ETCH_ERR_INVALID_ARGUMENT, "XnnpackBackend: output %u has no data",
                            i);
    }
    /* the graph reads its inputs while writing its outputs: their bytes must not meet */
    for (uint32_t i = 0; i < g->noutputs; i++) {
        const xnn_value *o = &g->values[g->outputs[i]];
        size_t on = xnn_dtype_bytes(o->dtype, xnn_numel(o->dims, o->rank));
        for (uint32_t j = 0; j < g->ninputs + g->noutputs; j++) {
            const xnn_value *x = &g->values[j < g->ninputs ? g->inputs[j] : g->outputs[j - g->ninputs]];
            if (x == o)
                continue;
            size_t xn = xnn_dtype_bytes(x->dtype, xnn_numel(x->dims, x->rank));
            if (on && xn && o->data < x->data + xn && x->data < o->data + on)
                return etch_err(ETCH_ERR_INVALID_PROGRAM,
                                "XnnpackBackend: output %u shares bytes with %s %u (the memory "
                                "plan overlaps them)",
                                i, j < g->ninputs ? "input" : "output",
                                j < g->ninputs ? j : j - g->ninputs);
        }
    }
    return xnn_ops_execute(g, ctx);
}

static const etch_backend xnnpack_backend = {
    "XnnpackBackend", xnn_available, xnn_init, xnn_execute, NULL, NULL, xnn_pool_size};

const etch_backend *etch_backend_xnnpack(void) { return &xnnpack_backend; }

etch_status etch_backends_register_builtin(void) {
    return etch_backends_register(&xnnpack_backend);
}
