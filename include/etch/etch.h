/*
 * etch/etch.h — the whole public C API of the core (libc only).
 *
 *   #include <etch/etch.h>
 *
 * See etch/program.h for the lifecycle (open → meta → load → set inputs → execute → read
 * outputs → free → close), etch/kernel.h for custom operators, etch/backend.h for delegates.
 * The conveniences that allocate for you live in etch/module.h; .npy files in etch/npy.h;
 * bundled-program checks in etch/bundled.h; the built-in kernels in etch/kernels.h, the
 * built-in backends (XnnpackBackend) in etch/backends.h; what a board provides (log, clock,
 * abort, start-up memory) in etch/platform.h. Above the core: the model store (etch/store.h,
 * with SHA-256 in etch/sha256.h).
 */
#ifndef ETCH_ETCH_H
#define ETCH_ETCH_H

#include "etch/backend.h"
#include "etch/kernel.h"
#include "etch/platform.h"
#include "etch/program.h"
#include "etch/status.h"
#include "etch/tensor.h"

#define ETCH_VERSION_MAJOR 0
#define ETCH_VERSION_MINOR 1
#define ETCH_VERSION_PATCH 0
#define ETCH_VERSION_STRING "0.1.0"

#endif
