/*
 * What newlib-nano lacks for tests/size/minimal.c on a bare Cortex-M4 (linked, never run):
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
