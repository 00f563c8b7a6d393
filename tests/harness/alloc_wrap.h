/*
 * Allocation counting for "nothing allocates here" tests, and allocation-failure injection.
 * Link the test with the etch_test_alloc_wrap library (tests/CMakeLists.txt): it wraps malloc,
 * calloc, realloc, free, aligned_alloc, posix_memalign, mmap and munmap at link time
 * (-Wl,--wrap=...). Calls made inside libc itself cannot be seen this way.
 *
 * Counting: every call made while etch_alloc_armed is non-zero adds one to etch_alloc_calls.
 *
 * Failure injection (SQLite-style): etch_alloc_fault_arm(k) starts a window in which the
 * allocation attempts (malloc, calloc, realloc, aligned_alloc, posix_memalign, mmap; not free
 * or munmap) are numbered from 1, and attempt number k fails as the real function would when
 * out of memory (NULL / ENOMEM / MAP_FAILED, errno ENOMEM); k = 0 injects nothing.
 * etch_alloc_fault_disarm() ends the window. etch_alloc_attempts counts the window's
 * attempts, etch_alloc_injected the failures injected (0 or 1). etch_alloc_fault_arm_persistent(k)
 * makes attempt k and every later one fail (SQLite's "persistent" mode: the error paths run
 * with no memory left).
 *
 * Live blocks: etch_alloc_live is the number of heap blocks and mappings obtained through
 * the wrappers and not yet given back (at any time, armed or not): a test that reads it
 * before and after an operation sees what the operation leaked, in any build.
 */
#ifndef ETCH_TEST_ALLOC_WRAP_H
#define ETCH_TEST_ALLOC_WRAP_H

extern int etch_alloc_armed;
extern long etch_alloc_calls;

extern long etch_alloc_fail_at;   /* attempt number that fails; 0: none */
extern int etch_alloc_fault_armed;
extern int etch_alloc_fault_persistent;
extern long etch_alloc_attempts;
extern long etch_alloc_injected;
extern long etch_alloc_live;

/* Start a counting window (resets the count) / end it. */
static inline void etch_alloc_arm(void) {
    etch_alloc_calls = 0;
    etch_alloc_armed = 1;
}
static inline void etch_alloc_disarm(void) { etch_alloc_armed = 0; }

/* Start a failure-injection window in which allocation attempt number k fails (k = 0: none)
 * / end it. */
static inline void etch_alloc_fault_arm(long k) {
    etch_alloc_attempts = 0;
    etch_alloc_injected = 0;
    etch_alloc_fail_at = k;
    etch_alloc_fault_persistent = 0;
    etch_alloc_fault_armed = 1;
}
static inline void etch_alloc_fault_arm_persistent(long k) {
    etch_alloc_fault_arm(k);
    etch_alloc_fault_persistent = k > 0;
}
static inline void etch_alloc_fault_disarm(void) {
    etch_alloc_fault_armed = 0;
    etch_alloc_fault_persistent = 0;
    etch_alloc_fail_at = 0;
}

#endif
