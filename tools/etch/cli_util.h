/* Shared helpers of the etch CLI: argument parsing, error reporting, printing. */
#ifndef ETCH_CLI_UTIL_H
#define ETCH_CLI_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "etch/etch.h"
#include "etch/module.h"

/* Exit codes: 0 success, 1 runtime failure (or a failed check), 2 bad usage. */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

/* A subcommand: `run` gets argv with argv[0] = the subcommand name. */
typedef struct cli_command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
    void (*usage)(FILE *out);
} cli_command;

/* Print "etch CMD: error: ..." plus a hint to stderr; returns CLI_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Print "error: <StatusName>: <etch_last_error()>" to stderr; returns CLI_FAIL. */
int cli_fail(etch_status st);
/* Same with a context prefix: "error: <StatusName>: <context>: <message>". */
int cli_fail_ctx(etch_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---- options ---------------------------------------------------------------------------- */

/* True when argv holds -h or --help (before a "--" separator). */
bool cli_wants_help(int argc, char **argv);

/* Option matching for argv[*i]:
 *   cli_opt_value: `--name VALUE` or `--name=VALUE`; returns 1 and stores the value (advancing
 *   *i past it), 0 when argv[*i] is not this option, -1 (error printed) when the value is
 *   missing or empty, or the option was already given (*value non-NULL on entry).
 *   cli_opt_flag: `--name`; returns 1 and sets *flag, 0 if not this option, -1 on
 *   `--name=...` or a repeat. */
int cli_opt_value(const char *cmd, int argc, char **argv, int *i, const char *name,
                  const char **value);
int cli_opt_flag(const char *cmd, char **argv, int i, const char *name, bool *flag);
/* The one positional FILE, for an argv[*i] that no option took: stores it in *path and
 * returns 0; on "--" exactly one FILE must follow (taken, *i moved to it): returns 1, stop
 * parsing; -1 (error printed) for an unknown option, a second FILE or a bad "--". */
int cli_opt_file(const char *cmd, int argc, char **argv, int *i, const char **path);

/* Strict numbers: the whole string must be consumed, no overflow, within [min, max].
 * Print a usage error naming the option and return false otherwise. */
bool cli_parse_long(const char *cmd, const char *opt, const char *s, long long min,
                    long long max, long long *out);
bool cli_parse_double(const char *cmd, const char *opt, const char *s, double min, double max,
                      double *out);

/* --cpu-threads N (1..ETCH_THREADPOOL_MAX_THREADS) and --kernels optimized|portable, shared
 * by run, bench and llm; false after printing a usage error. */
bool cli_parse_threads(const char *cmd, const char *s, int *out);
/* The default of --cpu-threads (run, bench, llm): the CPUs this process may run on
 * (sched_getaffinity; else the online CPUs), 1 .. ETCH_THREADPOOL_MAX_THREADS. */
int cli_default_threads(void);
bool cli_parse_kernels(const char *cmd, const char *s, etch_module_kernels *out);
/* The help lines of those two options. */
#define CLI_HELP_THREADS_KERNELS                                                           \
    "  --cpu-threads N        threads for kernels that split their work, the calling one\n" \
    "                         included (default: the CPUs this process may run on; at\n"  \
    "                         most 256): a thread pool started once, at load\n"            \
    "  --kernels SET          optimized (default: SIMD, multi-threaded, fused activations;\n" \
    "                         the instruction set follows the CPU or ETCH_ISA) or portable\n" \
    "                         (the reference kernels only)\n"
#define CLI_HELP_NO_FUSION \
    "  --no-fusion            do not fuse activations into the preceding kernel at load,\n" \
    "                         nor run chained calls as one (convolution blocks 1x1 ->\n" \
    "                         depthwise -> 1x1; 4w linears from their int4 weights)\n" \
    "  --no-prepack           do not prepack constant weights at load\n" \
    "  --no-blocked-layout    keep every tensor NCHW (no channel-blocked layers between\n" \
    "                         convolutions)\n" \
    "  --no-backends          do not register the built-in backends (XnnpackBackend): a\n" \
    "                         delegated method runs its CPU twin NAME__cpu if the file\n" \
    "                         has one, else fails to load naming the backend\n"

/* ---- files, time -------------------------------------------------------------------------- */

/* Read a whole file into a 32-byte aligned buffer (free with free()). Returns CLI_OK, or
 * CLI_FAIL after printing "error: AccessFailed: ..." . */
int cli_read_file(const char *path, void **data, size_t *size);
/* mkdir -p; CLI_OK or CLI_FAIL (error printed). */
int cli_mkdirs(const char *path);
/* Monotonic milliseconds. */
double cli_now_ms(void);

/* ---- printing ----------------------------------------------------------------------------- */

/* "[2, 3]" into buf (truncated to cap). */
const char *cli_shape_str(char *buf, size_t cap, size_t dim, const int64_t *sizes);
/* Print up to `max_items` elements of t in logical C order, flattened: "[1, 2, ..., 9]". */
void cli_print_tensor_values(FILE *out, const etch_tensor *t, size_t max_items);
/* One line describing a value: "Tensor Float [1, 3]" or "Int 4". */
/* Untrusted text (names and strings from a file, error messages that quote them) made safe
 * for a terminal: control bytes (C0 but newline and tab, DEL, C1) and bytes that are not
 * UTF-8 are shown as \xNN. The result lives in one of 8 rotating static buffers (the CLI is
 * single-threaded), valid until 8 more calls; past ~1000 bytes it ends in "...". */
const char *cli_safe(const char *s);
const char *cli_safe_n(const char *s, size_t n);
void cli_print_value_summary(FILE *out, const etch_value *v);
/* Element k (memory order, k < numel) as double, for any numeric dtype. */
double cli_elem_as_double(const void *data, int dtype, size_t k);

/* ---- JSON (bench --json, info --json, run --json, llm --json) ----------------------------- */

/* A JSON string: s[0..n) with '"', '\\' and control characters escaped (the bytes are
 * written as they are otherwise: UTF-8 stays UTF-8); NULL prints null. */
void cli_json_string_n(FILE *out, const char *s, size_t n);
void cli_json_string(FILE *out, const char *s); /* NUL-terminated */
/* A number, "%.17g"; null for NaN and infinities (JSON has neither). */
void cli_json_double(FILE *out, double v);
/* [2, 3] */
void cli_json_shape(FILE *out, size_t dim, const int64_t *sizes);
/* Every element in logical C order, flattened: floats as cli_json_double, integers exact,
 * Bool true/false. */
void cli_json_tensor_values(FILE *out, const etch_tensor *t);
/* The members of a value's object, without the braces: "kind": "Tensor", "dtype": "Float",
 * "shape": [1, 3], "values": [...] (with `values`); scalars and Strings "kind": "Int",
 * "value": 4; lists "kind": ..., "items": n. */
void cli_json_value_fields(FILE *out, const etch_value *v, bool values);

#endif
