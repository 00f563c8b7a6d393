/*
 * etch/kernels.h — the built-in portable kernels (the reference implementation of every
 * operator etch runs) and the runtime's primitive scalar operators.
 *
 * Basic usage:
 *
 *   etch_kernels_register_portable();   // once, before loading methods
 *
 * Registration is idempotent. Kernels registered later (custom or optimized ones) with the
 * same name take precedence.
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

#ifdef __cplusplus
}
#endif
#endif
