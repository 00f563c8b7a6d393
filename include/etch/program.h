/*
 * etch/program.h — open a .pte program, inspect its methods, load one into caller memory,
 * run it.
 *
 * Basic usage (the whole lifecycle, no allocation by etch after open):
 *
 *   etch_program *prog;
 *   if (etch_program_open_file("add.pte", NULL, &prog) != ETCH_OK) { ...etch_last_error()... }
 *
 *   etch_method_meta meta;
 *   etch_program_method_meta(prog, "forward", &meta);
 *   size_t pool_size = etch_method_meta_pool_size(&meta);
 *   size_t n = etch_method_meta_num_arenas(&meta);          // planned memory ids 1..n
 *   // ...provide `pool` (pool_size bytes) and arena j of etch_method_meta_arena_size(&meta, j)
 *   //    bytes, 16-byte aligned...
 *   etch_method_memory mem = {pool, pool_size, arenas, arena_sizes, n, NULL, 0};
 *   etch_method *m;
 *   etch_method_load(prog, "forward", &mem, NULL, &m);
 *
 *   etch_tensor x; etch_tensor_init(&x, ETCH_DTYPE_FLOAT, 1, (int64_t[]){1}, &one);
 *   etch_method_set_input_tensor(m, 0, &x);
 *   etch_method_set_input_tensor(m, 1, &y);
 *   etch_method_execute(m);                          // may be called again with new inputs
 *   const etch_value *out = etch_method_output(m, 0);
 *
 *   etch_method_free(m);      // destroys delegate state; the memory stays the caller's
 *   etch_program_close(prog);
 *
 * Lifetimes: a program is immutable once open and may be shared by threads; a method belongs
 * to one thread at a time and must be freed before its program is closed. Constant tensors
 * point into the program (the mmap'd file by default: never copied).
 */
#ifndef ETCH_PROGRAM_H
#define ETCH_PROGRAM_H

#include "etch/backend.h"
#include "etch/kernel.h"
#include "etch/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- allocation at open time ---------------------------------------------------------- */

typedef struct etch_allocator {
    void *(*alloc)(void *self, size_t size, size_t align); /* NULL on failure */
    void (*free)(void *self, void *ptr);                   /* accepts NULL */
    void *self;
} etch_allocator;

/* The libc-backed allocator used when options name none. */
const etch_allocator *etch_allocator_libc(void);

/* ---- program ---------------------------------------------------------------------------- */

typedef enum etch_load_mode {
    ETCH_LOAD_MMAP = 0, /* map the file read-only; constants are borrowed from the mapping */
    ETCH_LOAD_READ = 1  /* read the whole file into one aligned buffer */
} etch_load_mode;

typedef struct etch_program_options {
    etch_load_mode load_mode;
    const etch_allocator *allocator; /* for the program handle and READ-mode buffer; NULL=libc */
} etch_program_options;

etch_program_options etch_program_default_options(void);

typedef struct etch_program etch_program;

/* Open and fully verify a program file (.pte, or a .bpte bundled program, whose embedded
 * program is used). Errors: ETCH_ERR_ACCESS_FAILED (file), ETCH_ERR_NOT_A_PROGRAM,
 * ETCH_ERR_INCOMPATIBLE_VERSION, ETCH_ERR_INVALID_PROGRAM (with the offending offset). */
etch_status etch_program_open_file(const char *path, const etch_program_options *opts,
                                   etch_program **out);
/* Same over caller memory, which is borrowed and must outlive the program. Memory that is
 * not 16-byte aligned is copied (through the allocator) so tensors stay aligned. */
etch_status etch_program_open_buffer(const void *data, size_t size,
                                     const etch_program_options *opts, etch_program **out);
void etch_program_close(etch_program *program); /* accepts NULL */

typedef struct etch_program_header {
    char identifier[5];          /* "ET12" (NUL-terminated) */
    bool bundled;                /* opened through a BP08 bundled program */
    bool has_extended_header;    /* "eh00" present */
    uint32_t header_length;      /* 24 or 32 (0 without header) */
    uint64_t file_size;          /* bytes of the program image */
    uint64_t program_size;       /* flatbuffer bytes */
    uint64_t segment_base_offset;
    uint64_t segment_data_size;
    size_t num_segments;
    uint64_t constant_bytes;     /* constant segment or legacy constant_buffer payload */
    bool legacy_constant_buffer; /* constants inline in the flatbuffer */
    size_t num_named_data;
} etch_program_header;

void etch_program_get_header(const etch_program *program, etch_program_header *out);
/* Segment i's range inside the program image (offset from the image start). */
etch_status etch_program_segment(const etch_program *program, size_t i, uint64_t *offset,
                                 uint64_t *size);
size_t etch_program_num_methods(const etch_program *program);
const char *etch_program_method_name(const etch_program *program, size_t i);

/* ---- external data (.ptd) ------------------------------------------------------------- */

typedef struct etch_data_map etch_data_map;
etch_status etch_data_map_open_file(const char *path, const etch_program_options *opts,
                                    etch_data_map **out);
etch_status etch_data_map_open_buffer(const void *data, size_t size,
                                      const etch_program_options *opts, etch_data_map **out);
void etch_data_map_close(etch_data_map *map);
size_t etch_data_map_count(const etch_data_map *map);
/* Entry i: its key and, for tensor entries, layout (rank < 0 when the entry has none). */
typedef struct etch_data_entry {
    const char *key;
    const void *data;
    size_t size;
    int dtype;
    int rank;
    int64_t sizes[ETCH_MAX_DIMS];
    uint8_t dim_order[ETCH_MAX_DIMS];
} etch_data_entry;
etch_status etch_data_map_entry(const etch_data_map *map, size_t i, etch_data_entry *out);
etch_status etch_data_map_find(const etch_data_map *map, const char *key, etch_data_entry *out);

/* ---- method metadata (before loading) ------------------------------------------------- */

typedef struct etch_method_meta {
    const etch_program *program;
    uint32_t index;
    /* CPU fallback: when the method asked for delegates to a backend this build lacks (or
     * whose is_available says no) and the program carries its CPU twin (a method named
     * NAME ETCH_CPU_TWIN_SUFFIX, "forward__cpu", whose own backends are all here), the meta
     * (and a load by NAME) is the twin's and this is the requested NAME (borrowed from the
     * program); NULL otherwise. Callers say so to the user (the CLI and module API do, once). */
    const char *fallback_from;
} etch_method_meta;

/* Suffix of a method's CPU twin (the same computation without delegate calls). To
 * ExecuTorch's runtime the twin is one more method. */
#define ETCH_CPU_TWIN_SUFFIX "__cpu"

typedef struct etch_value_info {
    uint32_t tag;    /* etch_value_tag */
    int dtype;       /* tensors */
    uint8_t dim;
    int64_t sizes[ETCH_MAX_DIMS]; /* stored sizes: the upper bound for dynamic tensors */
    uint8_t dim_order[ETCH_MAX_DIMS];
    uint8_t dynamism;
    bool planned;    /* lives in planned memory (else it is bound by set_input) */
    bool constant;
    size_t nbytes;   /* at the stored sizes */
    int64_t int_val; /* Int / Bool */
    double double_val;
    uint32_t value_index;
} etch_value_info;

typedef struct etch_operator_info {
    char name[128];   /* "aten::add.out" */
    bool available;   /* registered in this process */
    size_t num_calls; /* KernelCall instructions using it */
} etch_operator_info;

typedef struct etch_delegate_info {
    const char *id;   /* backend name, e.g. "XnnpackBackend" */
    bool available;
    bool inline_blob; /* blob inside the flatbuffer rather than a segment */
    size_t blob_size;
    size_t num_compile_specs;
} etch_delegate_info;

/* The method's metadata, or its CPU twin's (see fallback_from). */
etch_status etch_program_method_meta(const etch_program *program, const char *name,
                                     etch_method_meta *out);
/* Is every backend method `meta` delegates to registered and available? */
bool etch_method_meta_backends_available(const etch_method_meta *meta);
const char *etch_method_meta_name(const etch_method_meta *meta);
size_t etch_method_meta_num_inputs(const etch_method_meta *meta);
size_t etch_method_meta_num_outputs(const etch_method_meta *meta);
etch_status etch_method_meta_input(const etch_method_meta *meta, size_t i, etch_value_info *out);
etch_status etch_method_meta_output(const etch_method_meta *meta, size_t i,
                                    etch_value_info *out);
size_t etch_method_meta_num_values(const etch_method_meta *meta);
size_t etch_method_meta_num_instructions(const etch_method_meta *meta);
/* Planned arenas: memory ids 1..n map to indices 0..n-1. */
size_t etch_method_meta_num_arenas(const etch_method_meta *meta);
size_t etch_method_meta_arena_size(const etch_method_meta *meta, size_t i);
/* Bytes of method pool that etch_method_load needs for this method. */
size_t etch_method_meta_pool_size(const etch_method_meta *meta);
size_t etch_method_meta_num_operators(const etch_method_meta *meta);
etch_status etch_method_meta_operator(const etch_method_meta *meta, size_t i,
                                      etch_operator_info *out);
size_t etch_method_meta_num_delegates(const etch_method_meta *meta);
etch_status etch_method_meta_delegate(const etch_method_meta *meta, size_t i,
                                      etch_delegate_info *out);
/* Constant tensor bytes this method refers to (each distinct buffer counted once). */
uint64_t etch_method_meta_constant_bytes(const etch_method_meta *meta);
/* True when external (.ptd) data is needed to load the method. */
bool etch_method_meta_needs_external_data(const etch_method_meta *meta);

/* ---- debug information ------------------------------------------------------------------
 *
 * A program may carry, per instruction, the Python stack that produced it (Chain.stacktrace,
 * ExecuTorch's schema: one FrameList per instruction, each Frame {filename, lineno, name,
 * context}; the runtime never needs it). etch.export writes, for the node an instruction
 * computes, the model's source frames (outermost first; name = the function, context = the
 * source line) and then a closing frame with filename ETCH_DEBUG_FRAME_FILE, name = the node's
 * name in the captured graph and context = its module path ("features.3.conv.1"; absent for
 * the root module). Strings are borrowed from the program. A stack trace whose length is not the
 * chain's is ignored (no debug information); malformed bytes fail etch_program_open_*. */
#define ETCH_DEBUG_FRAME_FILE "<etch>"

typedef struct etch_instruction_debug {
    char op_name[128];       /* what it calls: "aten::convolution.out", a delegate's backend
                                id, "" for other instructions (the program's own names) */
    const char *node;        /* capture-time graph node the instruction computes (a delegate
                                call: its outputs' nodes, comma separated); NULL if unknown */
    const char *module_path; /* "features.3.conv.1", "" for the root module; NULL if unknown */
    const char *filename;    /* innermost source frame (the model's line); NULL when none */
    int32_t lineno;
    const char *function;    /* its function ("forward") */
    const char *source;      /* its source line, stripped */
    size_t num_frames;       /* source frames (etch's closing frame not counted) */
} etch_instruction_debug;

typedef struct etch_source_frame {
    const char *filename;
    int32_t lineno;
    const char *function;
    const char *source;
} etch_source_frame;

size_t etch_method_meta_num_chains(const etch_method_meta *meta);
size_t etch_method_meta_chain_length(const etch_method_meta *meta, size_t chain);
/* Debug information of instruction `pc` of chain `chain` (all NULL / 0 when the program has
 * none); ETCH_ERR_INVALID_ARGUMENT for an instruction that is not there. */
etch_status etch_method_meta_instruction_debug(const etch_method_meta *meta, size_t chain,
                                               size_t pc, etch_instruction_debug *out);
/* Source frame i (0: outermost) of that instruction, i < num_frames. */
etch_status etch_method_meta_instruction_frame(const etch_method_meta *meta, size_t chain,
                                               size_t pc, size_t i, etch_source_frame *out);

/* ---- loaded method ---------------------------------------------------------------------- */

typedef struct etch_method_memory {
    void *pool;                /* method structures: values, tensors, argument lists */
    size_t pool_size;
    void *const *arenas;       /* planned memory; arenas[j] holds memory id j + 1; 16-aligned */
    const size_t *arena_sizes;
    size_t num_arenas;
    void *temp;                /* kernel scratch, reset after every instruction (optional) */
    size_t temp_size;
} etch_method_memory;

typedef struct etch_method_options {
    const etch_data_map *external_data;      /* for tensors stored in a .ptd */
    const etch_threadpool_iface *threadpool; /* NULL: kernels run serially */
    /* Operator fusion at load, on unless set: a kernel call whose kernel was registered with
     * ETCH_KERNEL_FUSES_ACTIVATION, followed by aten::relu / clamp / hardtanh / gelu / silu /
     * sigmoid (.out) on its Float result that nothing else reads, runs as one call that
     * applies the activation (src/optimize/fusion.c lists every condition); the activation's
     * instruction then does nothing. Results are those of the unfused program.
     * etch_method_instruction_info reports what was fused. Also off with it: chained calls
     * (etch/kernel.h), runs of calls a kernel computes as one, such as the optimized
     * convolution's 1x1 -> depthwise 3x3 -> 1x1 blocks (their intermediates stay in the
     * cache) and 4w linears (embedding_4bit -> [slice_copy] -> permute_copy -> mm | addmm)
     * computed from the packed int4 weight. true: run every instruction as written. */
    bool no_fusion;
    /* Kernels with a load-time prepare function (etch_kernels_register_prepare; the
     * optimized GEMM and convolution pack constant weights into the layout their inner loops
     * read, so that no call repacks them; the channel-blocked 3x3 stride-1 convolutions
     * with enough output pixels get their Winograd transform instead, 4x the weight's size)
     * get it at load, in the method pool (etch_method_meta_pool_size counts it; a smaller
     * pool skips it). A constant a prepared buffer stands in for (etch_kernel_prepared_
     * replaces) has its pages of a mapped program given back right after packing, so with
     * ETCH_LOAD_MMAP the packed copy replaces the original in memory rather than adding to it.
     * Outputs equal the unprepared ones within float rounding (Winograd: within 3e-5 of the
     * sum of the products' magnitudes). true: prepare nothing. */
    bool no_prepack;
    /* Channel-blocked intermediate tensors (see etch/kernel.h, "blocked channel layout"),
     * chosen at load where every kernel that touches a tensor can read or write it so (the
     * optimized convolution, pooling, mean and element-wise kernels): convolutional networks
     * then run without re-laying out data between layers. Outputs equal those of the NCHW
     * run within float rounding. true: every tensor stays in its dim order. */
    bool no_blocked_layout;
} etch_method_options;

typedef struct etch_method etch_method;

/* Fails with ETCH_ERR_OPERATOR_MISSING naming every missing operator, ETCH_ERR_NOT_FOUND for
 * a missing method or backend, ETCH_ERR_MEMORY_ALLOCATION_FAILED when a buffer is too small
 * (saying how large it must be). */
etch_status etch_method_load(const etch_program *program, const char *name,
                             const etch_method_memory *memory, const etch_method_options *opts,
                             etch_method **out);
void etch_method_free(etch_method *method); /* accepts NULL */

const etch_method_meta *etch_method_get_meta(const etch_method *method);
size_t etch_method_num_inputs(const etch_method *method);
size_t etch_method_num_outputs(const etch_method *method);

/* Set input i. A tensor is resized to the given shape (within the input's dynamism) and
 * copied into planned memory; an input without planned memory borrows the caller's data,
 * which must stay valid through execute. Int/Bool/Double/String inputs must equal the value
 * the program was exported with; None is accepted for None. */
etch_status etch_method_set_input(etch_method *method, size_t i, const etch_value *value);
etch_status etch_method_set_input_tensor(etch_method *method, size_t i, const etch_tensor *t);
/* The input's value as the method holds it (e.g. to write into its planned memory). */
etch_value *etch_method_input(etch_method *method, size_t i);
/* Give an output that has no planned memory a caller buffer. */
etch_status etch_method_set_output_data(etch_method *method, size_t i, void *data,
                                        size_t size);

/* Run the instruction chain(s). Never allocates. Fails with ETCH_ERR_INVALID_STATE until
 * every input has been set. Can be called again; mutable state in planned memory carries
 * over between calls. */
etch_status etch_method_execute(etch_method *method);
/* Forget the inputs (they must be set again) and restore mutable tensors' initial values. */
etch_status etch_method_reset(etch_method *method);

const etch_value *etch_method_output(const etch_method *method, size_t i);

/* What runs at instruction `pc` of chain `chain` (profiling, listings). */
typedef struct etch_instruction_info {
    const char *op_name; /* operator of a kernel call, backend id of a delegate call, else NULL */
    const char *impl;    /* kernel provider ("portable", "optimized", "custom"), "delegate",
                            or NULL for other instructions */
    const char *fused;   /* operator fused into this call at load (e.g. "aten::relu.out"), or
                            NULL */
    bool skipped;        /* folded into the instruction before it at load: does nothing (it
                            still counts, and the observer is still called for it) */
    uint64_t blocked_args; /* bit k: argument k is stored channel-blocked (etch/kernel.h) */
    uint32_t chain;        /* kernel calls this one runs as one, itself included (etch/kernel.h,
                              "chained calls"); 0 for a call run by an earlier one (then
                              also skipped); 1 for every other instruction */
} etch_instruction_info;
size_t etch_method_num_chains(const etch_method *method);
size_t etch_method_chain_length(const etch_method *method, size_t chain);
etch_status etch_method_instruction_info(const etch_method *method, size_t chain, size_t pc,
                                         etch_instruction_info *out);

/* etch_method_meta_instruction_debug of the method's own metadata (what the instruction
 * computes, by module path and source line). */
etch_status etch_method_instruction_debug(const etch_method *method, size_t chain, size_t pc,
                                          etch_instruction_debug *out);

/* Observer called after every instruction (profiling); NULL to remove. */
typedef void (*etch_instruction_fn)(void *user_data, size_t chain, size_t pc,
                                    const char *op_name);
void etch_method_set_observer(etch_method *method, etch_instruction_fn fn, void *user_data);

/* Interrupt check (cancellation, etch/async.h): called before every instruction of execute;
 * a non-zero return stops execute there with ETCH_ERR_CANCELLED. The outputs of a stopped
 * execute are not defined, and mutable state (a KV cache) may hold part of the run:
 * etch_method_reset restores it. `fn` runs on the executing thread; NULL removes it. */
typedef int (*etch_interrupt_fn)(void *user_data);
void etch_method_set_interrupt(etch_method *method, etch_interrupt_fn fn, void *user_data);

#ifdef __cplusplus
}
#endif
#endif
