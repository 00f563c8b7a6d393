/* A tiny test harness: CHECK-style assertions that count, and a closing line
 * "N passed, N failed" that CI reads. Each test binary returns non-zero on any failure. */
#ifndef ETCH_TEST_H
#define ETCH_TEST_H

#include <math.h>
#include <stdio.h>
#include <string.h>

static int etch_test_passed_;
static int etch_test_failed_;

#define CHECK(cond)                                                                     \
    do {                                                                                \
        if (cond) {                                                                     \
            etch_test_passed_++;                                                        \
        } else {                                                                        \
            etch_test_failed_++;                                                        \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);    \
        }                                                                               \
    } while (0)

#define CHECK_MSG(cond, ...)                                                            \
    do {                                                                                \
        if (cond) {                                                                     \
            etch_test_passed_++;                                                        \
        } else {                                                                        \
            etch_test_failed_++;                                                        \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);    \
            fprintf(stderr, __VA_ARGS__);                                               \
            fputc('\n', stderr);                                                        \
        }                                                                               \
    } while (0)

/* Status equality, printing both names and the last error message on mismatch. */
#define CHECK_STATUS(expr, expected)                                                    \
    do {                                                                                \
        etch_status st_ = (expr);                                                       \
        CHECK_MSG(st_ == (expected), "got %s (%s), want %s", etch_status_str(st_),      \
                  etch_last_error(), etch_status_str(expected));                        \
    } while (0)

#define CHECK_OK(expr) CHECK_STATUS(expr, ETCH_OK)

#define CHECK_NEAR(a, b, tol)                                                           \
    do {                                                                                \
        double a_ = (double)(a), b_ = (double)(b);                                      \
        CHECK_MSG(fabs(a_ - b_) <= (tol), "%g vs %g (tol %g)", a_, b_, (double)(tol));  \
    } while (0)

static inline int etch_test_finish(void) {
    printf("%d passed, %d failed\n", etch_test_passed_, etch_test_failed_);
    return etch_test_failed_ ? 1 : 0;
}

#endif
