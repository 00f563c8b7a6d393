/*
 * etch/kernels.h — the built-in kernels: the portable ones (the reference implementation of
 * every operator etch runs, plus the runtime's primitive scalar operators) and the optimized
 * CPU ones (SIMD, multi-threaded; float32 fast paths that fall back to the portable code for
 * anything they do not cover).
 *
 * Basic usage:
 *
 *   etch_kernels_register_optimized();  // once, before loading methods (portable included)
 *   // or etch_kernels_register_portable() for the reference kernels only
 *   // or, in a firmware, etch_kernels_register_selected(): only its models' operators
 *
 * Registration is idempotent. Kernels registered later (custom ones) with the same name take
 * precedence.
 */
#ifndef ETCH_KERNELS_H
#define ETCH_KERNELS_H

#include "etch/kernel.h"

#ifdef __cplusplus
extern "C" {
#endif

etch_status etch_kernels_register_portable(void);
/* The table behind it (for listings and the exporter's operator check). */
const etch_kernel *etch_kernels_portable_table(size_t *count);
/* The dtypes (bit 1u << etch_dtype) of the first input tensor — the out tensor for creation
 * operators — that the portable kernel `name` is tested with against PyTorch (generated from
 * the golden cases: tests/kernels/OP_DTYPES.md); 0 when the name is not a portable kernel. */
uint32_t etch_kernels_portable_dtypes(const char *name);

/* Selective build: the portable kernels of the operators some programs call, and nothing
 * else. Not in libetch: tools/etch_select_kernels.py writes its definition from the .pte
 * files (`-o selected_kernels.c a.pte b.pte`) and the firmware compiles that file (with
 * -ffunction-sections and --gc-sections the other kernels stay out of the image). A method
 * calling an operator it lacks fails to load with ETCH_ERR_OPERATOR_MISSING and the name. */
etch_status etch_kernels_register_selected(void);

/* ---- optimized kernels and the instruction set they use ------------------------------- */

typedef enum etch_isa {
    ETCH_ISA_SCALAR = 0, /* portable C, always available */
    ETCH_ISA_AVX2 = 1,   /* x86-64 AVX2 + FMA */
    ETCH_ISA_AVX512 = 2, /* x86-64 AVX-512 F/BW/DQ/VL */
    ETCH_ISA_NEON = 3,   /* arm64 Advanced SIMD */
} etch_isa;

/* Register the portable kernels, then the optimized ones over them. Selects the instruction
 * set: the environment variable ETCH_ISA=scalar|avx2|avx512|neon when set (fails with
 * ETCH_ERR_NOT_SUPPORTED naming the value when it is unknown, not compiled in or not
 * supported by this CPU), else the best one this CPU supports. */
etch_status etch_kernels_register_optimized(void);
/* The optimized table (for listings). */
const etch_kernel *etch_kernels_optimized_table(size_t *count);

/* Compiled into this build and supported by this CPU (and its OS). */
bool etch_isa_supported(etch_isa isa);
/* The best supported instruction set. */
etch_isa etch_isa_best(void);
/* The one optimized kernels use now (etch_isa_best() until set). */
etch_isa etch_isa_active(void);
/* Choose the instruction set (tests, benchmarks); fails with ETCH_ERR_NOT_SUPPORTED. */
etch_status etch_isa_set(etch_isa isa);
const char *etch_isa_name(etch_isa isa);
/* "scalar" | "avx2" | "avx512" | "neon" -> isa; ETCH_ERR_INVALID_ARGUMENT when unknown. */
etch_status etch_isa_parse(const char *name, etch_isa *out);

#ifdef __cplusplus
}
#endif
#endif
