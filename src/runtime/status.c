#include <stdio.h>
#include <string.h>

#include "runtime/error.h"

#if defined(ETCH_NO_THREAD_LOCAL) || defined(ETCH_FREESTANDING)
#define ETCH_TLS
#else
#define ETCH_TLS _Thread_local
#endif

#define ETCH_ERR_MAX 1024
static ETCH_TLS char err_msg[ETCH_ERR_MAX];

const char *etch_status_str(etch_status s) {
    switch (s) {
    case ETCH_OK: return "Ok";
    case ETCH_ERR_INTERNAL: return "Internal";
    case ETCH_ERR_INVALID_STATE: return "InvalidState";
    case ETCH_END_OF_METHOD: return "EndOfMethod";
    case ETCH_ERR_NOT_SUPPORTED: return "NotSupported";
    case ETCH_ERR_NOT_IMPLEMENTED: return "NotImplemented";
    case ETCH_ERR_INVALID_ARGUMENT: return "InvalidArgument";
    case ETCH_ERR_INVALID_TYPE: return "InvalidType";
    case ETCH_ERR_OPERATOR_MISSING: return "OperatorMissing";
    case ETCH_ERR_REGISTRATION_EXCEEDING_MAX_KERNELS: return "RegistrationExceedingMaxKernels";
    case ETCH_ERR_NOT_FOUND: return "NotFound";
    case ETCH_ERR_MEMORY_ALLOCATION_FAILED: return "MemoryAllocationFailed";
    case ETCH_ERR_ACCESS_FAILED: return "AccessFailed";
    case ETCH_ERR_INVALID_PROGRAM: return "InvalidProgram";
    case ETCH_ERR_INVALID_EXTERNAL_DATA: return "InvalidExternalData";
    case ETCH_ERR_OUT_OF_RESOURCES: return "OutOfResources";
    case ETCH_ERR_DELEGATE_INVALID_COMPATIBILITY: return "DelegateInvalidCompatibility";
    case ETCH_ERR_DELEGATE_MEMORY_ALLOCATION_FAILED: return "DelegateMemoryAllocationFailed";
    case ETCH_ERR_DELEGATE_INVALID_HANDLE: return "DelegateInvalidHandle";
    case ETCH_ERR_INCOMPATIBLE_VERSION: return "IncompatibleVersion";
    case ETCH_ERR_NOT_A_PROGRAM: return "NotAProgram";
    case ETCH_ERR_CANCELLED: return "Cancelled";
    case ETCH_ERR_INTEGRITY: return "Integrity";
    }
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

etch_status etch_err(etch_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    etch_verr(status, fmt, ap);
    va_end(ap);
    return status;
}

void etch_err_prefix(const char *fmt, ...) {
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
