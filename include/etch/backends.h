/*
 * etch/backends.h — the delegates (backends) built into etch.
 *
 * Basic usage (once, before loading programs whose methods delegate):
 *
 *   etch_backends_register_builtin();     // XnnpackBackend
 *   etch_program_open_file("mobilenet_xnnpack.pte", NULL, &program);
 *   ... load and execute methods as usual ...
 *
 * XnnpackBackend runs the payloads ExecuTorch's XNNPACK partitioner writes (every XNNGraph
 * schema since 0.2, and the 2023 layout before the payload header) with etch's own kernels:
 * no XNNPACK library. Its graph's intermediates, scratch and converted weights come from the
 * method pool (etch_method_meta_pool_size counts them); execute allocates nothing. Floating
 * point nodes compute in float32; quantized ones (qint8/quint8 activations, per-channel and
 * blockwise int8/int4 weights, dynamic per-token int8) compute on dequantized values and round
 * the output back, as XNNPACK's fp32 requantization does.
 */
#ifndef ETCH_BACKENDS_H
#define ETCH_BACKENDS_H

#include "etch/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The XNNPACK-compatible backend ("XnnpackBackend"). */
const etch_backend *etch_backend_xnnpack(void);
/* Register every built-in backend (idempotent). */
etch_status etch_backends_register_builtin(void);

#ifdef __cplusplus
}
#endif
#endif
