/*
 * etch/bundled.h — bundled programs (.bpte, identifier BP08): a program plus test cases.
 *
 * Basic usage:
 *
 *   etch_bundled *b;
 *   etch_bundled_open_buffer(bytes, size, &b);          // borrows bytes
 *   size_t n = etch_bundled_num_cases(b, "forward");
 *   for (size_t i = 0; i < n; i++) {
 *       etch_bundled_load_inputs(b, method, i);
 *       etch_method_execute(method);
 *       etch_bundled_report r;
 *       st = etch_bundled_verify_outputs(b, method, i, 1e-5, 1e-8, &r);
 *   }
 *
 * Comparison follows ExecuTorch's: dtype and sizes must match; float, double and half
 * elements pass when |actual - expected| <= atol + rtol * |expected| (NaN equals NaN);
 * other dtypes compare bytewise.
 */
#ifndef ETCH_BUNDLED_H
#define ETCH_BUNDLED_H

#include "etch/program.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct etch_bundled etch_bundled;

/* Parses and verifies the BP08 wrapper; the program image inside is not opened. */
etch_status etch_bundled_open_buffer(const void *data, size_t size, etch_bundled **out);
void etch_bundled_close(etch_bundled *b);
/* The embedded .pte image (borrowed from the bundled buffer). */
const void *etch_bundled_program(const etch_bundled *b, size_t *size);
size_t etch_bundled_num_suites(const etch_bundled *b);
const char *etch_bundled_suite_method(const etch_bundled *b, size_t suite);
/* 0 when no suite names the method. */
size_t etch_bundled_num_cases(const etch_bundled *b, const char *method);

etch_status etch_bundled_load_inputs(const etch_bundled *b, etch_method *method, size_t test);

typedef struct etch_bundled_report {
    size_t num_outputs;
    double max_abs_error; /* over all float outputs */
    double max_rel_error;
    size_t mismatches;    /* elements outside tolerance (or 1 for a dtype/shape mismatch) */
    char message[256];    /* the first problem, empty when the case passes */
} etch_bundled_report;

/* ETCH_OK when every output matches; ETCH_ERR_INVALID_ARGUMENT (with the report filled)
 * when one does not, or for a bad case index / negative tolerance; ETCH_ERR_NOT_FOUND when no
 * suite names the method; ETCH_ERR_NOT_SUPPORTED for a case without expected outputs. */
etch_status etch_bundled_verify_outputs(const etch_bundled *b, const etch_method *method,
                                        size_t test, double rtol, double atol,
                                        etch_bundled_report *report);

#ifdef __cplusplus
}
#endif
#endif
