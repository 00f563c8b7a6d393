/*
 * What newlib-nano and the board lack for tests/size/minimal.c on a bare Cortex-M4 (linked,
 * never run):
 * its aligned_alloc calls posix_memalign, which newlib provides only on hosted targets.
 * Not part of the core: the size measured counts the core's objects alone.
 */
#include <errno.h>
#include <malloc.h>
#include <stddef.h>

int posix_memalign(void **p, size_t align, size_t size);

int posix_memalign(void **p, size_t align, size_t size) {
    *p = memalign(align, size);
    return *p ? 0 : ENOMEM;
}

/* The platform layer (etch/platform.h) a board implements: here only what the core's default
 * allocator calls (image.c), on newlib's heap. */
#include <stdlib.h>

void *etch_platform_alloc(size_t size, size_t align);
void etch_platform_free(void *ptr);

void *etch_platform_alloc(size_t size, size_t align) { return memalign(align, size); }
void etch_platform_free(void *ptr) { free(ptr); }
