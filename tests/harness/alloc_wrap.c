/* Link-time wrappers behind alloc_wrap.h. */
#define _POSIX_C_SOURCE 200809L
#include <stddef.h>
#include <sys/types.h>

#include "alloc_wrap.h"

int etch_alloc_armed;
long etch_alloc_calls;

void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
void *__real_aligned_alloc(size_t a, size_t n);
int __real_posix_memalign(void **p, size_t a, size_t n);
void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);

void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t a, size_t b);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);
void *__wrap_aligned_alloc(size_t a, size_t n);
int __wrap_posix_memalign(void **p, size_t a, size_t n);
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);

void *__wrap_malloc(size_t n) {
    etch_alloc_calls += etch_alloc_armed;
    return __real_malloc(n);
}
void *__wrap_calloc(size_t a, size_t b) {
    etch_alloc_calls += etch_alloc_armed;
    return __real_calloc(a, b);
}
void *__wrap_realloc(void *p, size_t n) {
    etch_alloc_calls += etch_alloc_armed;
    return __real_realloc(p, n);
}
void __wrap_free(void *p) {
    etch_alloc_calls += etch_alloc_armed && p != NULL;
    __real_free(p);
}
void *__wrap_aligned_alloc(size_t a, size_t n) {
    etch_alloc_calls += etch_alloc_armed;
    return __real_aligned_alloc(a, n);
}
int __wrap_posix_memalign(void **p, size_t a, size_t n) {
    etch_alloc_calls += etch_alloc_armed;
    return __real_posix_memalign(p, a, n);
}
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    etch_alloc_calls += etch_alloc_armed;
    return __real_mmap(addr, len, prot, flags, fd, off);
}
