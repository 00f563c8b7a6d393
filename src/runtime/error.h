/* Thread-local error message behind etch_last_error(). */
#ifndef ETCH_RUNTIME_ERROR_H
#define ETCH_RUNTIME_ERROR_H

#include <stdarg.h>

#include "etch/status.h"

/* Format the message for the current failure and return `status` (for `return etch_err(...)`). */
etch_status etch_err(etch_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
etch_status etch_verr(etch_status status, const char *fmt, va_list ap);
/* Prefix the current message: "<prefix>: <old message>". */
void etch_err_prefix(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
void etch_err_clear(void);

/*
 * ETCH_TERSE_ERRORS (a build option for microcontrollers, off by default): the core's own
 * messages become the place of the check that failed, "pte.c:187" (the status is unchanged,
 * and every check still runs: only the text goes), which takes the message strings and their
 * formatting out of the core (11 KB of 33 on a Cortex-M4: tests/size/REPORT.md). Kernels' messages
 * (etch_kernel_fail) keep their text.
 */
#if defined(ETCH_TERSE_ERRORS)
#if defined(__FILE_NAME__)
#define ETCH_ERR_FILE __FILE_NAME__
#else
#define ETCH_ERR_FILE __FILE__
#endif
/* Record "file:line" and return `status`. */
etch_status etch_err_site(etch_status status, const char *file, int line);
/* Never defined: the format and arguments sit in sizeof (not evaluated, so they compile to
 * nothing; each call site's arguments are free of side effects) and still count as used. */
int etch_err_unused_(int zero, ...);
#define ETCH_ERR_UNUSED(...) ((void)sizeof(etch_err_unused_(0, __VA_ARGS__)))
#define etch_err(status, ...) \
    (ETCH_ERR_UNUSED(__VA_ARGS__), etch_err_site((status), ETCH_ERR_FILE, __LINE__))
#define etch_err_prefix(...) ETCH_ERR_UNUSED(__VA_ARGS__)
#if defined(__clang__)
/* a static helper that only formats messages (method.c's sig_expect) is then named only in
 * sizeof: not emitted, as intended */
#pragma clang diagnostic ignored "-Wunneeded-internal-declaration"
#endif
#endif

#endif
