/*
 * etch/kernel.h — the kernel ABI and the kernel registry (custom operators).
 *
 * Basic usage (register a custom operator before loading a method that uses it):
 *
 *   static void my_relu(etch_kernel_context *ctx, etch_value **args, size_t nargs) {
 *       etch_tensor *in = args[0]->u.tensor, *out = args[1]->u.tensor;
 *       if (etch_kernel_resize_like(ctx, out, in) != ETCH_OK) return;   // failure recorded
 *       ...compute into out->data...
 *   }
 *   static const etch_kernel k[] = {{"my_ns::my_relu.out", "TWW", my_relu}};
 *   etch_kernels_register(k, 1);
 *
 * Calling convention (as ExecuTorch's): args[k] points at the value named by the
 * instruction's k-th argument, in the operator schema's order including keyword-only and
 * `out` arguments, followed by one slot for the return value (for out-variants it repeats
 * the out tensor). Kernels may overwrite values in place (functional scalar ops write their
 * result into the last slot).
 *
 * The signature string is checked once, when a method loads, against every call site, so
 * a kernel can rely on the number of arguments and on their kinds:
 *   T tensor            t tensor or None        W tensor written (never a constant)
 *   V tensor the kernel binds to other data (a view output; may be unbound before the call)
 *   S Int/Double/Bool   s scalar or None        I Int            i Int or None
 *   D Double            d Double or None        B Bool           b Bool or None
 *   L Int list          l Int list or None      F Double list    Q Bool list
 *   X Tensor list       Y Tensor list written   O optional-Tensor list
 *   N String            n String or None        R result slot overwritten (any scalar)
 *   ? any value         * any number of further values (must be last)
 * Tensors passed to a kernel have non-NULL data unless their element count is 0 (except V).
 *
 * Kernels never allocate: scratch comes from etch_kernel_temp_alloc (a per-method arena that
 * is reset after every instruction), and parallel work goes through etch_kernel_parallel_for
 * (serial unless the method was loaded with a thread pool).
 */
#ifndef ETCH_KERNEL_H
#define ETCH_KERNEL_H

#include <stdarg.h>

#include "etch/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct etch_kernel_context etch_kernel_context;

typedef void (*etch_kernel_fn)(etch_kernel_context *ctx, etch_value **args, size_t nargs);

typedef struct etch_kernel {
    const char *name;      /* "namespace::op.overload", or "namespace::op" when the overload is
                              empty; must outlive every method that uses it */
    const char *signature; /* see above; NULL = not checked (the kernel checks its own args) */
    etch_kernel_fn fn;
} etch_kernel;

/* Register kernels (the array must stay valid: only the pointer is kept). A later
 * registration of the same name takes precedence over an earlier one, so custom kernels can
 * replace built-in ones. Not thread-safe against concurrent loads: register at start-up. */
etch_status etch_kernels_register(const etch_kernel *kernels, size_t count);

/* Kernel flags (etch_kernels_register_ex). */
enum {
    /* The kernel applies etch_kernel_epilogue(ctx) to its Float output, so the runtime may
     * fuse a following relu/clamp/hardtanh/gelu/silu/sigmoid into it at method load. */
    ETCH_KERNEL_FUSES_ACTIVATION = 1u << 0,
};
/* As etch_kernels_register, naming who provides the kernels ("portable", "optimized", ...;
 * a static string) and their flags. etch_kernels_register uses impl "custom", flags 0. */
etch_status etch_kernels_register_ex(const etch_kernel *kernels, size_t count,
                                     const char *impl, uint32_t flags);
/* The impl name and flags `k` (as returned by etch_kernels_find/at) was registered with;
 * NULL / 0 for a kernel that is not registered. */
const char *etch_kernels_impl_of(const etch_kernel *k);
uint32_t etch_kernels_flags_of(const etch_kernel *k);
/* Look up a kernel by full name; NULL when absent. */
const etch_kernel *etch_kernels_find(const char *name, size_t name_len);
/* Number of registered names and the i-th one (for listing; order of registration). */
size_t etch_kernels_count(void);
const etch_kernel *etch_kernels_at(size_t i);
/* Forget every registration (tests). */
void etch_kernels_reset(void);

/* ---- load-time preparation (optional) -------------------------------------------------
 * A kernel may have a prepare function, called once per call site when a method loads, with
 * the call's arguments as they are then (constants bound: tensors flagged
 * ETCH_TENSOR_CONSTANT hold the program's read-only data; other tensors may be unbound).
 * With buf == NULL it returns the bytes it wants (0: nothing to prepare, e.g. the weight is
 * not a constant); with buf (64-byte aligned, cap bytes) it fills it and returns the bytes
 * used (0: failed, nothing kept). Call sites of one kernel whose prepared bytes are equal
 * share one buffer (keep pointers into the buffer out of it). At execute the kernel finds
 * the buffer with etch_kernel_prepared and must check that it still fits the call (say, a
 * header recording the constant's data pointer and shape), else take its ordinary path.
 * The runtime also calls it with buf == NULL while computing etch_method_meta_pool_size, with
 * every tensor unbound (data NULL, flags and the stored shape set), Int/Double/Bool values
 * set and every other value None: the size it returns then must be at least the size it
 * asks for at load. The buffers come from the method pool; when the pool is too small
 * preparation is skipped (see etch_method_options.no_prepack). Prepare, layout and chain
 * functions are the load-time optimization unit's (etch/optimize.h): a core built without it
 * calls none of them, and registering one needs it linked. */
typedef size_t (*etch_kernel_prepare_fn)(etch_kernel_context *ctx, etch_value **args,
                                         size_t nargs, void *buf, size_t cap);
/* For a prepare function filling its buffer: at execute the kernel reads the buffer in place
 * of the constant tensors `args` (bit k: args[k]; e.g. a weight it packed), so the runtime
 * may give back the memory of those constants' pages when the program is a mapped file
 * (ETCH_LOAD_MMAP): nothing else changes, and a later read of them (a fallback path, another
 * operator using the same constant) reads them back from the file. A hint about memory only. */
void etch_kernel_prepared_replaces(etch_kernel_context *ctx, uint64_t args);
/* Give call sites of kernels whose function is `kernel` (any registered name) the prepare
 * function `prepare` (a later registration for the same kernel replaces it; NULL removes
 * it). Register at start-up. */
etch_status etch_kernels_register_prepare(etch_kernel_fn kernel, etch_kernel_prepare_fn prepare);
/* The prepare function registered for `kernel`; NULL when none. */
etch_kernel_prepare_fn etch_kernels_prepare_of(etch_kernel_fn kernel);

/* ---- load-time checks (optional) -------------------------------------------------------
 * Verification before trust: a kernel may have a check function (often the kernel itself),
 * called once per call site when a method loads (always: also with no_fusion / no_prepack),
 * with etch_kernel_checking(ctx) true. It validates what is known at load and records with
 * etch_kernel_fail anything that makes the call unable to ever run (say, a constant weight
 * whose scales are not finite, or packed bytes that do not match its groups); the load then
 * fails (ETCH_ERR_INVALID_PROGRAM) with that message, naming the instruction and operator.
 * It must compute and write nothing. What it may rely on: constants (tensors flagged
 * ETCH_TENSOR_CONSTANT: dtype, shape and data), every tensor's dtype, and the call's
 * non-tensor arguments (the runtime calls it only where no instruction may write one of
 * them). Other tensors' shapes may change at run time and their data is not yet there: what
 * depends on them is for the call itself. */
etch_status etch_kernels_register_check(etch_kernel_fn kernel, etch_kernel_fn check);
etch_kernel_fn etch_kernels_check_of(etch_kernel_fn kernel);
/* Is this a load-time check (see above) rather than a call? */
bool etch_kernel_checking(const etch_kernel_context *ctx);

/* ---- blocked channel layout (optional) -----------------------------------------------
 * Inside a method, a 4-D tensor [N, C, H, W] with C a multiple of ETCH_BLOCK_C may be stored
 * channel-blocked ("NCHW8c", the layout fast convolution kernels read): element (n, c, h, w)
 * at offset ((n * C/8 + c/8) * H * W + h * W + w) * 8 + c % 8. Its size, shape and dim order
 * stay those of the NCHW tensor; only the order of the elements in memory differs. The
 * runtime chooses it at method load (etch_method_options.no_blocked_layout) for a tensor that
 * is neither a method input nor output nor a constant, is never rebound (Move, views, lists,
 * delegates) and every one of whose readers and writers is a kernel whose layout function
 * allows it at that argument, so values the program sees are unchanged.
 *
 * A layout function, called at load with the call's arguments as the prepare functions see
 * them when measuring (constants bound; other tensors with their stored shape, data NULL;
 * Int/Double/Bool values set; anything else None), returns in *may the arguments (bit k:
 * args[k]) the kernel can take blocked, and in *tied those of them that must all be blocked
 * or all not (e.g. an element-wise op's inputs and output). Arguments past 63 are never
 * blocked. A kernel given a blocked tensor (etch_kernel_blocked_args) must handle it: no
 * fallback that reads it as NCHW. */
#define ETCH_BLOCK_C 8
typedef void (*etch_kernel_layout_fn)(etch_kernel_context *ctx, etch_value **args,
                                      size_t nargs, uint64_t *may, uint64_t *tied);
/* Give call sites of kernels whose function is `kernel` the layout function `layout` (NULL
 * removes it). Register at start-up. */
etch_status etch_kernels_register_layout(etch_kernel_fn kernel, etch_kernel_layout_fn layout);
etch_kernel_layout_fn etch_kernels_layout_of(etch_kernel_fn kernel);

/* ---- chained calls (optional) -----------------------------------------------------------
 * A chain function lets a kernel run a call together with the kernel calls after it, as one:
 * e.g. a 1x1 convolution, a depthwise one on its result and a 1x1 on that, computed a band of
 * rows at a time so that the two intermediate tensors never leave the cache.
 *
 * At load (after activation fusion, the blocked layout and preparation; not with
 * etch_method_options.no_fusion) the runtime offers, at a kernel call whose kernel has a chain
 * function, the calls c[0], c[1], ..., c[n-1] (2 <= n <= ETCH_CHAIN_MAX) that follow it in its
 * chain (none of them a jump target) where every tensor a call before the last writes (its
 * intermediates: up to 4 per call, of any dtype) is referred to by nothing but its writer
 * and later calls of the run, which read it (no other instruction, list, method input or
 * output, nor another value on its bytes), and the one tensor c[n-1] writes shares no bytes
 * with anything the calls read but those intermediates. The run need not be a line: c[2] may
 * read what c[0] and c[1] write, or a call may read none of them (say, two dequantizations,
 * then the operation reading both). Which call reads which intermediate at which argument is
 * for the chain function to check. It returns how many of the calls (c[0] first) it runs as
 * one (a prefix that must meet the same rule): 0 or 1 for none. The calls it takes after
 * the first then do nothing at execute (like fused activations); the first one's kernel
 * finds them all with etch_kernel_chain_call. It
 * must write what running them one by one writes to the last call's result (within float
 * rounding), and may leave the intermediates unwritten; or, when it cannot (say, too little
 * scratch), run them one by one with etch_kernel_chain_run. Arguments are seen as by the
 * layout functions, plus the calls' prepared data, epilogues and blocked arguments. */
#define ETCH_CHAIN_MAX 8
typedef struct etch_kernel_call {
    const etch_kernel *kernel;
    etch_value **args;
    size_t nargs;
    const void *prepared; /* etch_kernel_prepared's answer for the call */
    size_t prepared_size;
    const struct etch_epilogue *epilogue; /* etch_kernel_epilogue's answer (NULL: none) */
    uint64_t blocked;              /* etch_kernel_blocked_args' answer */
} etch_kernel_call;
typedef size_t (*etch_kernel_chain_fn)(etch_kernel_context *ctx, const etch_kernel_call *calls,
                                       size_t n);
/* Give call sites of kernels whose function is `kernel` the chain function `chain` (NULL
 * removes it). Register at start-up. */
etch_status etch_kernels_register_chain(etch_kernel_fn kernel, etch_kernel_chain_fn chain);
etch_kernel_chain_fn etch_kernels_chain_of(etch_kernel_fn kernel);

/* ---- inside a kernel ------------------------------------------------------------------ */

/* The data the kernel's prepare function made for this call site at load; NULL (size 0)
 * when none. */
const void *etch_kernel_prepared(const etch_kernel_context *ctx, size_t *size);

/* Bit k set: args[k] is stored channel-blocked (see above); 0 for every call of a kernel
 * without a layout function. */
uint64_t etch_kernel_blocked_args(const etch_kernel_context *ctx);

/* Record a failure; the method stops after this instruction and returns `status`, and
 * etch_last_error() carries the operator name plus the formatted message. */
void etch_kernel_fail(etch_kernel_context *ctx, etch_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
bool etch_kernel_failed(const etch_kernel_context *ctx);
/* The operator's name, for messages. */
const char *etch_kernel_op_name(const etch_kernel_context *ctx);

/* Resize `t`; on failure records it (naming the tensor's role) and returns the status. */
etch_status etch_kernel_resize(etch_kernel_context *ctx, etch_tensor *t, size_t dim,
                               const int64_t *sizes);
etch_status etch_kernel_resize_like(etch_kernel_context *ctx, etch_tensor *t,
                                    const etch_tensor *like);

/* Scratch memory valid until the kernel returns; NULL (and a recorded failure) when the
 * method's temp arena is too small. */
void *etch_kernel_temp_alloc(etch_kernel_context *ctx, size_t size, size_t align);
/* The same, but NULL without recording a failure (for kernels with a slower path that
 * needs no scratch). */
void *etch_kernel_temp_try(etch_kernel_context *ctx, size_t size, size_t align);
/* Threads etch_kernel_parallel_for may use (1 without a thread pool). */
int etch_kernel_num_threads(const etch_kernel_context *ctx);

/* An activation fused into the kernel by the runtime (see ETCH_KERNEL_FUSES_ACTIVATION):
 * after computing its Float output the kernel applies it elementwise. */
typedef enum etch_activation {
    ETCH_ACT_NONE = 0,
    ETCH_ACT_RELU,      /* max(x, 0) */
    ETCH_ACT_CLAMP,     /* min(max(x, lo), hi); lo/hi are -inf/+inf when absent
                           (clamp, hardtanh, relu6) */
    ETCH_ACT_GELU,      /* x * Phi(x) (erf) */
    ETCH_ACT_GELU_TANH, /* gelu, approximate='tanh' */
    ETCH_ACT_SILU,      /* x * sigmoid(x) */
    ETCH_ACT_SIGMOID,
} etch_activation;
typedef struct etch_epilogue {
    etch_activation act;
    double lo, hi; /* ETCH_ACT_CLAMP only */
} etch_epilogue;
/* The activation to apply to the output; NULL when none. */
const etch_epilogue *etch_kernel_epilogue(const etch_kernel_context *ctx);

/* Calls this one runs as one with the ones after it (see "chained calls"): how many (1 when
 * it runs alone), and call i of them (0: this one) in *out; false when i is out of range. */
size_t etch_kernel_chain_length(const etch_kernel_context *ctx);
bool etch_kernel_chain_call(const etch_kernel_context *ctx, size_t i, etch_kernel_call *out);
/* Run call i of the chain on its own, as its instruction would run unchained (its prepared
 * data, epilogue, blocked arguments and the whole scratch: what the caller took of it is
 * given back); returns its status (which also becomes ctx's on failure). */
etch_status etch_kernel_chain_run(etch_kernel_context *ctx, size_t i);

/* Run fn(arg, begin, end) over [0, n) in chunks of at least `grain` items, possibly on
 * several threads; returns when all chunks are done. */
typedef void (*etch_parallel_fn)(void *arg, int64_t begin, int64_t end);
void etch_kernel_parallel_for(etch_kernel_context *ctx, int64_t n, int64_t grain,
                              etch_parallel_fn fn, void *arg);
/* The same, fn also told which thread runs the chunk: an index in
 * [0, etch_kernel_num_threads(ctx)), 0 for the calling thread. Two chunks of one call never run
 * at the same time with the same index, so a kernel can give each index its own scratch, and
 * keep state there from one chunk to the next that index runs (a thread of etch's pool runs its
 * own chunks in ascending order, then takes others' from the back: see etch/threadpool.h). */
typedef void (*etch_parallel_thread_fn)(void *arg, int thread, int64_t begin, int64_t end);
void etch_kernel_parallel_for_thread(etch_kernel_context *ctx, int64_t n, int64_t grain,
                                     etch_parallel_thread_fn fn, void *arg);

/* A thread pool as the runtime sees it (the extension layer provides a pthreads one). */
typedef struct etch_threadpool_iface {
    void *self;
    int num_threads;
    void (*parallel_for)(void *self, int64_t n, int64_t grain, etch_parallel_fn fn, void *arg);
    /* may be NULL: etch_kernel_parallel_for_thread then runs serially, as thread 0 */
    void (*parallel_for_thread)(void *self, int64_t n, int64_t grain, etch_parallel_thread_fn fn,
                                void *arg);
} etch_threadpool_iface;

#ifdef __cplusplus
}
#endif
#endif
