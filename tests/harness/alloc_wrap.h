/*
 * Allocation counting for "nothing allocates here" tests. Link the test with the
 * etch_test_alloc_wrap library (tests/CMakeLists.txt): it wraps malloc, calloc, realloc, free,
 * aligned_alloc, posix_memalign and mmap at link time (-Wl,--wrap=...), and every call made
 * while etch_alloc_armed is non-zero adds one to etch_alloc_calls. Calls made inside libc
 * itself cannot be seen this way.
 */
#ifndef ETCH_TEST_ALLOC_WRAP_H
#define ETCH_TEST_ALLOC_WRAP_H

extern int etch_alloc_armed;
extern long etch_alloc_calls;

/* Start a counting window (resets the count) / end it. */
static inline void etch_alloc_arm(void) {
    etch_alloc_calls = 0;
    etch_alloc_armed = 1;
}
static inline void etch_alloc_disarm(void) { etch_alloc_armed = 0; }

#endif
