#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "runtime/error.h"

#if defined(ETCH_NO_THREAD_LOCAL) || defined(ETCH_FREESTANDING)
#define ETCH_TLS
#else
#define ETCH_TLS _Thread_local
#endif

#ifndef ETCH_ERR_MAX
#if defined(ETCH_TERSE_ERRORS)
#define ETCH_ERR_MAX 256 /* "file:line", or a kernel's "op: message" */
#else
#define ETCH_ERR_MAX 1024
#endif
#endif
static ETCH_TLS char err_msg[ETCH_ERR_MAX];

/* The names in the order of `status_codes`, one after the other: a table of the codes in use
 * and one string, rather than a switch over every code up to the largest. */
static const uint8_t status_codes[] = {
    ETCH_OK, ETCH_ERR_INTERNAL, ETCH_ERR_INVALID_STATE, ETCH_END_OF_METHOD, ETCH_ERR_NOT_SUPPORTED,
    ETCH_ERR_NOT_IMPLEMENTED, ETCH_ERR_INVALID_ARGUMENT, ETCH_ERR_INVALID_TYPE,
    ETCH_ERR_OPERATOR_MISSING, ETCH_ERR_REGISTRATION_EXCEEDING_MAX_KERNELS, ETCH_ERR_NOT_FOUND,
    ETCH_ERR_MEMORY_ALLOCATION_FAILED, ETCH_ERR_ACCESS_FAILED, ETCH_ERR_INVALID_PROGRAM,
    ETCH_ERR_INVALID_EXTERNAL_DATA, ETCH_ERR_OUT_OF_RESOURCES,
    ETCH_ERR_DELEGATE_INVALID_COMPATIBILITY, ETCH_ERR_DELEGATE_MEMORY_ALLOCATION_FAILED,
    ETCH_ERR_DELEGATE_INVALID_HANDLE, ETCH_ERR_INCOMPATIBLE_VERSION, ETCH_ERR_NOT_A_PROGRAM,
    ETCH_ERR_CANCELLED, ETCH_ERR_INTEGRITY,
};
static const char status_names[] =
    "Ok\0"
    "Internal\0"
    "InvalidState\0"
    "EndOfMethod\0"
    "NotSupported\0"
    "NotImplemented\0"
    "InvalidArgument\0"
    "InvalidType\0"
    "OperatorMissing\0"
    "RegistrationExceedingMaxKernels\0"
    "NotFound\0"
    "MemoryAllocationFailed\0"
    "AccessFailed\0"
    "InvalidProgram\0"
    "InvalidExternalData\0"
    "OutOfResources\0"
    "DelegateInvalidCompatibility\0"
    "DelegateMemoryAllocationFailed\0"
    "DelegateInvalidHandle\0"
    "IncompatibleVersion\0"
    "NotAProgram\0"
    "Cancelled\0"
    "Integrity\0";

const char *etch_status_str(etch_status s) {
    const char *name = status_names;
    for (size_t i = 0; i < sizeof status_codes; i++, name += strlen(name) + 1)
        if ((etch_status)status_codes[i] == s)
            return name;
    return "Unknown";
}

const char *etch_last_error(void) { return err_msg; }

/* The arguments may point into err_msg itself (etch_err(st, "...: %s", etch_last_error())):
 * format into a scratch buffer first, so the old message is read before it is overwritten. */
etch_status etch_verr(etch_status status, const char *fmt, va_list ap) {
    char msg[ETCH_ERR_MAX];
    vsnprintf(msg, sizeof msg, fmt, ap);
    memcpy(err_msg, msg, sizeof err_msg);
    return status;
}

etch_status (etch_err)(etch_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    etch_verr(status, fmt, ap);
    va_end(ap);
    return status;
}

void (etch_err_prefix)(const char *fmt, ...) {
    char old[ETCH_ERR_MAX], pre[256];
    memcpy(old, err_msg, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    size_t n = strlen(pre);
    if (n + 2 < sizeof err_msg) {
        memcpy(err_msg, pre, n);
        memcpy(err_msg + n, ": ", 2);
        size_t rest = sizeof err_msg - n - 3;
        size_t olen = strlen(old);
        if (olen > rest)
            olen = rest;
        memcpy(err_msg + n + 2, old, olen);
        err_msg[n + 2 + olen] = 0;
    }
}

void etch_err_clear(void) { err_msg[0] = 0; }
#if defined(ETCH_TERSE_ERRORS)
/* The call sites' (etch_err, a macro then) format and arguments are dropped: the functions
 * above are named in parentheses so that they are still defined, for etch_kernel_fail. */
etch_status etch_err_site(etch_status status, const char *file, int line) {
    snprintf(err_msg, sizeof err_msg, "%s:%d", file, line);
    return status;
}
#endif
