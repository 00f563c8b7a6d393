/*
 * etch/status.h — result codes.
 *
 * Basic usage:
 *
 *   etch_status st = etch_program_open_file("model.pte", NULL, &prog);
 *   if (st != ETCH_OK)
 *       fprintf(stderr, "%s: %s\n", etch_status_str(st), etch_last_error());
 *
 * Every fallible function returns an etch_status. Out-parameters are left untouched on
 * failure. The numbering follows ExecuTorch's runtime Error enum wherever the meaning is the
 * same, so a number seen in one stack can be searched in the other; codes from 0x80 on are
 * etch's own.
 */
#ifndef ETCH_STATUS_H
#define ETCH_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum etch_status {
    ETCH_OK = 0x00,
    ETCH_ERR_INTERNAL = 0x01,
    ETCH_ERR_INVALID_STATE = 0x02,
    ETCH_END_OF_METHOD = 0x03,
    ETCH_ERR_NOT_SUPPORTED = 0x10,
    ETCH_ERR_NOT_IMPLEMENTED = 0x11,
    ETCH_ERR_INVALID_ARGUMENT = 0x12,
    ETCH_ERR_INVALID_TYPE = 0x13,
    ETCH_ERR_OPERATOR_MISSING = 0x14,
    ETCH_ERR_REGISTRATION_EXCEEDING_MAX_KERNELS = 0x15,
    ETCH_ERR_NOT_FOUND = 0x20,
    ETCH_ERR_MEMORY_ALLOCATION_FAILED = 0x21,
    ETCH_ERR_ACCESS_FAILED = 0x22,
    ETCH_ERR_INVALID_PROGRAM = 0x23,
    ETCH_ERR_INVALID_EXTERNAL_DATA = 0x24,
    ETCH_ERR_OUT_OF_RESOURCES = 0x25,
    ETCH_ERR_DELEGATE_INVALID_COMPATIBILITY = 0x30,
    ETCH_ERR_DELEGATE_MEMORY_ALLOCATION_FAILED = 0x31,
    ETCH_ERR_DELEGATE_INVALID_HANDLE = 0x32,
    /* etch's own codes */
    ETCH_ERR_INCOMPATIBLE_VERSION = 0x80, /* "ET" identifier with a version other than 12 */
    ETCH_ERR_NOT_A_PROGRAM = 0x81,        /* no recognisable identifier at all */
    ETCH_ERR_CANCELLED = 0x82,            /* stopped by a caller's callback */
    ETCH_ERR_INTEGRITY = 0x83             /* bytes differ from their recorded size or SHA-256
                                             (etch/store.h) */
} etch_status;

/* The enumerator's name without prefix, e.g. "InvalidProgram"; "Unknown" for other values. */
const char *etch_status_str(etch_status status);

/* The message of the last failure on this thread, with its specifics (operator name, value
 * index, byte offset). Empty string when none. The pointer stays valid until the next etch
 * call on this thread that fails. */
const char *etch_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
