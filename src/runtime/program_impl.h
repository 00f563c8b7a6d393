/* Internal layout of programs, data maps and methods. */
#ifndef ETCH_RUNTIME_PROGRAM_IMPL_H
#define ETCH_RUNTIME_PROGRAM_IMPL_H

#include "etch/program.h"
#include "format/ptd.h"
#include "format/pte.h"
#include "runtime/context.h"
#include "runtime/image.h"

struct etch_program {
    const etch_allocator *alloc;
    etch_image image; /* the whole file (for a .bpte, the bundled file) */
    etch_pte pte;     /* the verified program image (inside `image`) */
    bool bundled;
};

struct etch_data_map {
    const etch_allocator *alloc;
    etch_image image;
    etch_ptd ptd;
};

/* Read the ExecutionPlan of method `index` (verified at open). */
void etch_program_plan(const etch_program *p, uint32_t index, fb_table *plan);

/* "name.overload" (or "name") of an Operator table, as the kernel registry keys it. */
void etch_operator_full_name(const fb_table *op, char *buf, size_t cap);
/* The processed blob of a BackendDelegate table. */
void etch_delegate_blob(const etch_program *p, const fb_table *del, const uint8_t **data,
                        size_t *size, bool *is_inline);

/* Bump allocator over caller memory; with base == NULL it only measures. */
typedef struct etch_pool {
    uint8_t *base;
    size_t size;
    size_t used;
} etch_pool;

void *etch_pool_alloc(etch_pool *pool, size_t size, size_t align);

/* A tensor with the stored shape, dtype, dim order and capacity of `d` (no data yet): how a
 * method's tensor values start (method.c; the load-time passes build theirs the same way). */
void etch_tensor_from_desc(etch_tensor *t, const etch_tensor_desc *d);

/* Per-instruction argument checks derived from the kernel signature. */
enum { ARG_SKIP = 0, ARG_READ, ARG_WRITE, ARG_VIEW, ARG_LIST_READ, ARG_LIST_WRITE };

typedef struct etch_instr {
    uint8_t kind;          /* IA_* */
    bool skipped;          /* fused into the previous instruction at load: execute skips it */
    bool fused;            /* a kernel call that applies `epilogue` (optimize/fusion.c) */
    bool jump_target;      /* some JumpFalse of the chain lands here (set by optimize/fusion.c) */
    uint32_t a, b;         /* op/delegate index, move from/to, jump cond/dest, free value */
    uint32_t fused_op;     /* operator index of the instruction fused into this one */
    etch_value **args;
    uint8_t *arg_modes;    /* ARG_* per argument (kernel calls) */
    uint32_t nargs;
    const etch_kernel *kernel;
    etch_epilogue epilogue; /* fused activation (when `fused`) */
    const void *prepared;   /* the kernel's load-time prepared data (NULL: none) */
    size_t prepared_size;
    uint64_t blocked;       /* arguments stored channel-blocked (optimize/layout.c) */
    uint32_t chain_len;     /* calls this one runs as one (optimize/fusion.c: chained); 0: alone */
    uint32_t chain_next;    /* in such a run, the pc of the call after this one (0: the last) */
    bool chained;           /* run by an earlier call of its chain (and skipped) */
} etch_instr;

/* What a kernel call's own instruction gives its kernel context at execute: the fused
 * activation, the prepared data and the blocked arguments (run_chain, and a chained kernel
 * running one call of its chain). */
static inline void etch_instr_bind_context(etch_kernel_context *ctx, const etch_instr *in) {
    ctx->epilogue = in->fused ? &in->epilogue : NULL;
    ctx->prepared = in->prepared;
    ctx->prepared_size = in->prepared_size;
    ctx->blocked = in->blocked;
}

typedef struct etch_chain {
    etch_instr *instrs;
    uint32_t n;
} etch_chain;

typedef struct etch_delegate_rt {
    const etch_backend *backend;
    void *handle;
    bool initialized;
} etch_delegate_rt;

typedef struct etch_op_rt {
    char name[128];
    const etch_kernel *kernel;
    uint32_t flags; /* ETCH_KERNEL_* the kernel was registered with */
} etch_op_rt;

struct etch_method {
    const etch_program *program;
    etch_method_meta meta;
    const char *name;
    etch_value *values;
    etch_tensor **tensors; /* tensors[i]: value i's own tensor (a MoveCall may alias values[i]) */
    uint32_t nvalues;
    const int32_t *inputs; /* value indices (verified) */
    uint32_t ninputs;
    const int32_t *outputs;
    uint32_t noutputs;
    bool *input_set;
    etch_chain *chains;
    uint32_t nchains;
    etch_op_rt *ops;
    uint32_t nops;
    etch_delegate_rt *delegates;
    uint32_t ndelegates;
    void *const *arenas;
    const etch_data_map *external_data; /* for restoring external mutable tensors at reset */
    etch_kernel_context ctx;
    uint8_t *temp;
    size_t temp_size;
    const etch_threadpool_iface *threadpool;
    etch_instruction_fn observer;
    void *observer_data;
    etch_interrupt_fn interrupt;
    void *interrupt_data;
    etch_pool pool;
};

#endif
