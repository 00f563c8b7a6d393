/* The firmware harness: run one embedded program on one embedded input and print its outputs
 * bit for bit. Board-agnostic (only the core's public API and etch/platform.h); the same file
 * runs on the host (tests/mcu/host_run.c) so both print the same lines for the same bytes.
 *
 * Printed lines (emit, one call per line, no newline):
 *   model NAME: pte BYTES, pool NEED of GIVEN, arenas N (BYTES), inputs N     (information)
 *   check CHECK refused: Status: message        (self checks, freestanding builds)
 *   out I DTYPE [SIZES]                          (one per output tensor; compared)
 *   out I +OFFSET: HEX HEX ...                   (its elements' bits, 8 per line; compared)
 *   out I Int VALUE / Double HEX / Bool V / None (other outputs; compared)
 *   time execute_ns NS                           (etch_platform_time_ns around execute)
 * Elements are printed as their bytes read as one little-endian integer of the element's
 * size (a float32 1.0 is 3f800000), so equal lines mean equal bits. */
#ifndef ETCH_FW_RUN_H
#define ETCH_FW_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "etch/etch.h"

typedef struct fw_case {
    const char *name;
    const uint8_t *pte;         /* the program, 16-byte aligned */
    size_t pte_size;
    const char *method;
    /* the inputs' bytes in order, each starting at a multiple of 16 bytes (the last one may
     * end the file unpadded: a one-input file is the tensor's raw bytes); copied into
     * input_ram (the memory a sensor would fill). Each tensor's bytes are in its stored dim
     * order (a channels-last input is given channels-last). */
    const uint8_t *input;
    size_t input_size;
    uint8_t *input_ram;         /* input_size bytes, 16-byte aligned */
    uint8_t *pool;              /* method pool, 16-byte aligned */
    size_t pool_size;
    uint8_t *arena_mem;         /* all planned arenas back to back, each 16-aligned */
    size_t arena_mem_size;
    etch_status (*register_kernels)(void);
    int self_checks;            /* refuse a misaligned image, a short arena, a short pool */
} fw_case;

/* 0 when the outputs were printed, 1 on a failure (printed as "error ..."), 2 when a self
 * check was not refused. */
int fw_run(const fw_case *c, void (*emit)(const char *line));

#endif
