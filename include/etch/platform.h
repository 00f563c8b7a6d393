/*
 * etch/platform.h — the few services etch takes from the machine it runs on: a log line, a
 * monotonic clock, a way to stop, and (optionally) memory at start-up.
 *
 * Basic usage (a board: implement these five functions in one file and link it with the core;
 * a host build links src/platform/platform_libc.c, which implements them with libc, and needs
 * nothing):
 *
 *   #include <etch/platform.h>
 *   void etch_platform_log(etch_log_level level, const char *msg) {
 *       uart_puts(msg); uart_puts("\n");
 *   }
 *   uint64_t etch_platform_time_ns(void) { return systick_count() * 1000000000ull / CPU_HZ; }
 *   void etch_platform_abort(const char *why) { uart_puts(why); for (;;) __asm__("bkpt 0"); }
 *   static _Alignas(16) unsigned char heap[4096]; static size_t used;   // start-up memory
 *   void *etch_platform_alloc(size_t size, size_t align) {
 *       size_t at = (used + align - 1) / align * align;
 *       if (at > sizeof heap || size > sizeof heap - at) return NULL;
 *       used = at + size; return heap + at;
 *   }
 *   void etch_platform_free(void *ptr) { (void)ptr; }                    // a bump: never freed
 *
 * Who calls what:
 *   - etch_platform_alloc / etch_platform_free back etch_allocator_libc(), the allocator that
 *     etch_program_open_* and etch_data_map_open_* use when their options name none. The core
 *     allocates only there (the program handle, and a copy of the file in READ mode); method
 *     load and execute never allocate. A board without a heap returns NULL (the open then fails
 *     with ETCH_ERR_MEMORY_ALLOCATION_FAILED) or passes its own etch_allocator in the options.
 *   - etch_platform_log, etch_platform_time_ns and etch_platform_abort are for the code above
 *     the core that must run on a board as well as a host (the firmware harness in firmware/
 *     prints its results and times its inferences with them) and for the core's own fatal
 *     paths: the core never prints or reads a clock on its own; errors are returned as
 *     etch_status with etch_last_error().
 *
 * With -DETCH_FREESTANDING=ON nothing in this list is built in: the firmware provides all five
 * (firmware/boards/<board>/ has an example over semihosting). All five may be called before
 * main's first etch call returns; none is called from a kernel's hot loop.
 */
#ifndef ETCH_PLATFORM_H
#define ETCH_PLATFORM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum etch_log_level {
    ETCH_LOG_DEBUG = 0,
    ETCH_LOG_INFO = 1,
    ETCH_LOG_WARNING = 2,
    ETCH_LOG_ERROR = 3,
    ETCH_LOG_FATAL = 4
} etch_log_level;

/* One line of text (no trailing newline in msg; the implementation ends the line). */
void etch_platform_log(etch_log_level level, const char *msg);
/* Nanoseconds from an arbitrary fixed start; never goes backwards. A board without a clock
 * returns 0. */
uint64_t etch_platform_time_ns(void);
/* Stop for good after a fatal error; `why` is a short reason (may be NULL). */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((noreturn))
#endif
void etch_platform_abort(const char *why);
/* `size` bytes aligned to `align` (a power of two), or NULL. Called at open time only. */
void *etch_platform_alloc(size_t size, size_t align);
/* Gives back what etch_platform_alloc returned; accepts NULL. */
void etch_platform_free(void *ptr);

/* printf-style etch_platform_log (the message is cut at 255 bytes). */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 2, 3)))
#endif
void etch_logf(etch_log_level level, const char *fmt, ...);

#ifdef __cplusplus
}
#endif

#endif
