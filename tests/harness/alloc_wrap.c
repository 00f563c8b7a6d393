/* Link-time wrappers behind alloc_wrap.h. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/types.h>

#include "alloc_wrap.h"

int etch_alloc_armed;
long etch_alloc_calls;
long etch_alloc_fail_at;
int etch_alloc_fault_armed;
int etch_alloc_fault_persistent;
long etch_alloc_attempts;
long etch_alloc_injected;
long etch_alloc_live;

void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
void *__real_aligned_alloc(size_t a, size_t n);
int __real_posix_memalign(void **p, size_t a, size_t n);
void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int __real_munmap(void *addr, size_t len);

void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t a, size_t b);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);
void *__wrap_aligned_alloc(size_t a, size_t n);
int __wrap_posix_memalign(void **p, size_t a, size_t n);
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int __wrap_munmap(void *addr, size_t len);

/* One allocation attempt: true when it is to fail (errno is then ENOMEM). */
static int inject(void) {
    if (!etch_alloc_fault_armed)
        return 0;
    ++etch_alloc_attempts;
    if (etch_alloc_fail_at <= 0)
        return 0;
    if (etch_alloc_attempts != etch_alloc_fail_at &&
        !(etch_alloc_fault_persistent && etch_alloc_attempts > etch_alloc_fail_at))
        return 0;
    etch_alloc_injected++;
    errno = ENOMEM;
    return 1;
}

void *__wrap_malloc(size_t n) {
    etch_alloc_calls += etch_alloc_armed;
    if (inject())
        return NULL;
    void *p = __real_malloc(n);
    etch_alloc_live += p != NULL;
    return p;
}
void *__wrap_calloc(size_t a, size_t b) {
    etch_alloc_calls += etch_alloc_armed;
    if (inject())
        return NULL;
    void *p = __real_calloc(a, b);
    etch_alloc_live += p != NULL;
    return p;
}
void *__wrap_realloc(void *p, size_t n) {
    etch_alloc_calls += etch_alloc_armed;
    if (inject())
        return NULL; /* as a failed realloc: p is still allocated */
    void *q = __real_realloc(p, n);
    if (!p && q)
        etch_alloc_live++;
    else if (p && !q && n == 0)
        etch_alloc_live--; /* glibc frees p for a zero size */
    return q;
}
void __wrap_free(void *p) {
    etch_alloc_calls += etch_alloc_armed && p != NULL;
    etch_alloc_live -= p != NULL;
    __real_free(p);
}
void *__wrap_aligned_alloc(size_t a, size_t n) {
    etch_alloc_calls += etch_alloc_armed;
    if (inject())
        return NULL;
    void *p = __real_aligned_alloc(a, n);
    etch_alloc_live += p != NULL;
    return p;
}
int __wrap_posix_memalign(void **p, size_t a, size_t n) {
    etch_alloc_calls += etch_alloc_armed;
    if (inject())
        return ENOMEM;
    int r = __real_posix_memalign(p, a, n);
    etch_alloc_live += r == 0;
    return r;
}
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    etch_alloc_calls += etch_alloc_armed;
    if (inject())
        return MAP_FAILED;
    void *p = __real_mmap(addr, len, prot, flags, fd, off);
    etch_alloc_live += p != MAP_FAILED;
    return p;
}
int __wrap_munmap(void *addr, size_t len) {
    int r = __real_munmap(addr, len);
    etch_alloc_live -= r == 0;
    return r;
}
