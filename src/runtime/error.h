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

#endif
