/* The platform layer on a hosted C library (etch/platform.h): stderr, CLOCK_MONOTONIC,
 * abort() and aligned_alloc(). A board links its own implementation instead
 * (ETCH_FREESTANDING builds leave this file out). */
#if !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "etch/platform.h"

void etch_platform_log(etch_log_level level, const char *msg) {
    static const char *const names[] = {"debug", "info", "warning", "error", "fatal"};
    const char *name = (unsigned)level <= ETCH_LOG_FATAL ? names[level] : "log";
    fprintf(stderr, "etch %s: %s\n", name, msg ? msg : "");
}

uint64_t etch_platform_time_ns(void) {
#if defined(CLOCK_MONOTONIC)
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) == 0)
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#endif
    return (uint64_t)clock() * (1000000000u / CLOCKS_PER_SEC);
}

void etch_platform_abort(const char *why) {
    if (why)
        etch_platform_log(ETCH_LOG_FATAL, why);
    abort();
}

void *etch_platform_alloc(size_t size, size_t align) {
    if (align < sizeof(void *))
        align = sizeof(void *);
    size_t rounded = (size + align - 1) / align * align;
    if (rounded < size)
        return NULL;
    return aligned_alloc(align, rounded ? rounded : align);
}

void etch_platform_free(void *ptr) { free(ptr); }
