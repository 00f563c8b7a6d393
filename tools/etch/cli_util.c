#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */

#include "cli_util.h"
#include "etch/threadpool.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Length of the UTF-8 sequence at s[0..n) that encodes a printable code point (1-4), or 0:
 * a control (C0, DEL, C1) or bytes that are not UTF-8. */
static size_t printable_utf8(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80)
        return c >= 0x20 && c != 0x7f ? 1 : 0;
    size_t len = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (!len || len > n)
        return 0;
    uint32_t cp = c & (0x7fu >> len);
    for (size_t k = 1; k < len; k++) {
        if ((s[k] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[k] & 0x3fu);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || cp <= 0x9f)
        return 0; /* overlong, out of range, a surrogate, or a C1 control */
    return len;
}

const char *cli_safe_n(const char *s, size_t n) {
    static char bufs[8][1024];
    static unsigned next;
    char *b = bufs[next++ % 8];
    const size_t cap = sizeof bufs[0];
    size_t o = 0;
    const unsigned char *u = (const unsigned char *)(s ? s : "");
    if (!s)
        n = 0;
    for (size_t i = 0; i < n;) {
        if (o + 8 >= cap) {
            memcpy(b + o, "...", 4);
            return b;
        }
        size_t len = u[i] == '\n' || u[i] == '\t' ? 1 : printable_utf8(u + i, n - i);
        if (len) {
            memcpy(b + o, u + i, len);
            o += len;
            i += len;
        } else {
            o += (size_t)snprintf(b + o, cap - o, "\\x%02x", u[i]);
            i++;
        }
    }
    b[o] = 0;
    return b;
}

const char *cli_safe(const char *s) { return cli_safe_n(s, s ? strlen(s) : 0); }

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    fflush(stdout); /* keep the report after what was already printed */
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "etch%s%s: error: ", cmd ? " " : "", cmd ? cmd : "");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(run 'etch %s%s--help' for usage)\n", cmd ? cmd : "", cmd ? " " : "");
    return CLI_USAGE;
}

/* Report a failure of the CLI's own (libc) work in the same format as library failures. */
static int cli_fail_msg(etch_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static int cli_fail_msg(etch_status st, const char *fmt, ...) {
    fflush(stdout); /* keep the report after what was already printed */
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "error: %s: ", etch_status_str(st));
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return CLI_FAIL;
}

int cli_fail(etch_status st) {
    fflush(stdout); /* keep the report after what was already printed */
    fprintf(stderr, "error: %s: %s\n", etch_status_str(st), cli_safe(etch_last_error()));
    return CLI_FAIL;
}

int cli_fail_ctx(etch_status st, const char *fmt, ...) {
    fflush(stdout); /* keep the report after what was already printed */
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "error: %s: ", etch_status_str(st));
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    const char *msg = etch_last_error();
    if (msg && *msg)
        fprintf(stderr, ": %s", cli_safe(msg));
    fputc('\n', stderr);
    return CLI_FAIL;
}

bool cli_wants_help(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            return false;
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return true;
    }
    return false;
}

int cli_opt_value(const char *cmd, int argc, char **argv, int *i, const char *name,
                  const char **value) {
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0 || (a[n] != 0 && a[n] != '='))
        return 0;
    const char *v;
    if (a[n] == '=') {
        v = a + n + 1;
    } else {
        if (*i + 1 >= argc || strncmp(argv[*i + 1], "--", 2) == 0) {
            cli_usage_error(cmd, "option %s needs a value", name);
            return -1;
        }
        v = argv[++*i];
    }
    if (!*v) {
        cli_usage_error(cmd, "option %s needs a non-empty value", name);
        return -1;
    }
    if (*value) {
        cli_usage_error(cmd, "option %s given more than once", name);
        return -1;
    }
    *value = v;
    return 1;
}

int cli_opt_flag(const char *cmd, char **argv, int i, const char *name, bool *flag) {
    const char *a = argv[i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0 || (a[n] != 0 && a[n] != '='))
        return 0;
    if (a[n] == '=') {
        cli_usage_error(cmd, "option %s does not take a value", name);
        return -1;
    }
    if (*flag) {
        cli_usage_error(cmd, "option %s given more than once", name);
        return -1;
    }
    *flag = true;
    return 1;
}

int cli_opt_file(const char *cmd, int argc, char **argv, int *i, const char **path) {
    const char *a = argv[*i];
    if (strcmp(a, "--") == 0) {
        if (*path || *i + 2 != argc) {
            cli_usage_error(cmd, "expected exactly one FILE after '--'");
            return -1;
        }
        *path = argv[++*i];
        return 1;
    }
    if (a[0] == '-' && a[1]) {
        cli_usage_error(cmd, "unknown option '%s'", a);
        return -1;
    }
    if (*path) {
        cli_usage_error(cmd, "expected one FILE, got '%s' and '%s'", *path, a);
        return -1;
    }
    *path = a;
    return 0;
}

bool cli_parse_long(const char *cmd, const char *opt, const char *s, long long min,
                    long long max, long long *out) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || end == s || *end != 0 || errno == ERANGE) {
        cli_usage_error(cmd, "%s: '%s' is not an integer", opt, s);
        return false;
    }
    if (v < min || v > max) {
        cli_usage_error(cmd, "%s: %lld is out of range [%lld, %lld]", opt, v, min, max);
        return false;
    }
    *out = v;
    return true;
}

bool cli_parse_double(const char *cmd, const char *opt, const char *s, double min, double max,
                      double *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || end == s || *end != 0 || errno == ERANGE || isnan(v)) {
        cli_usage_error(cmd, "%s: '%s' is not a number", opt, s);
        return false;
    }
    if (!(v >= min && v <= max)) {
        cli_usage_error(cmd, "%s: %g is out of range [%g, %g]", opt, v, min, max);
        return false;
    }
    *out = v;
    return true;
}

bool cli_parse_threads(const char *cmd, const char *s, int *out) {
    long long v = 0;
    if (!cli_parse_long(cmd, "--cpu-threads", s, 1, ETCH_THREADPOOL_MAX_THREADS, &v))
        return false;
    *out = (int)v;
    return true;
}

int cli_default_threads(void) {
    long n = 0;
#if defined(__linux__) && defined(CPU_COUNT)
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        n = CPU_COUNT(&set);
#endif
    if (n < 1)
        n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        n = 1;
    if (n > ETCH_THREADPOOL_MAX_THREADS)
        n = ETCH_THREADPOOL_MAX_THREADS;
    return (int)n;
}

bool cli_parse_kernels(const char *cmd, const char *s, etch_module_kernels *out) {
    if (strcmp(s, "optimized") == 0)
        *out = ETCH_MODULE_KERNELS_OPTIMIZED;
    else if (strcmp(s, "portable") == 0)
        *out = ETCH_MODULE_KERNELS_PORTABLE;
    else {
        cli_usage_error(cmd, "--kernels: '%s' is neither 'optimized' nor 'portable'", s);
        return false;
    }
    return true;
}

int cli_read_file(const char *path, void **data, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return cli_fail_msg(ETCH_ERR_ACCESS_FAILED, "cannot open '%s': %s", path,
                            strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return cli_fail_msg(ETCH_ERR_ACCESS_FAILED, "'%s' is not a regular file", path);
    }
    size_t n = (size_t)sb.st_size;
    size_t cap = (n + 31) & ~(size_t)31;
    uint8_t *buf = aligned_alloc(32, cap ? cap : 32);
    if (!buf) {
        fclose(f);
        return cli_fail_msg(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "cannot allocate %zu bytes for '%s'",
                            n, path);
    }
    size_t got = n ? fread(buf, 1, n, f) : 0;
    int err = ferror(f);
    fclose(f);
    if (got != n || err) {
        free(buf);
        return cli_fail_msg(ETCH_ERR_ACCESS_FAILED, "cannot read '%s'", path);
    }
    *data = buf;
    *size = n;
    return CLI_OK;
}

int cli_mkdirs(const char *path) {
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf)
        return cli_fail_msg(ETCH_ERR_INVALID_ARGUMENT, "bad directory name '%s'", path);
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != 0)
            continue;
        char c = buf[i];
        buf[i] = 0;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return cli_fail_msg(ETCH_ERR_ACCESS_FAILED, "cannot create directory '%s': %s", buf,
                                strerror(errno));
        buf[i] = c;
    }
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return cli_fail_msg(ETCH_ERR_ACCESS_FAILED, "'%s' is not a directory", path);
    return CLI_OK;
}

double cli_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

const char *cli_shape_str(char *buf, size_t cap, size_t dim, const int64_t *sizes) {
    size_t len = 0;
    int w = snprintf(buf, cap, "[");
    len = w > 0 ? (size_t)w : 0;
    for (size_t d = 0; d < dim && len < cap; d++) {
        w = snprintf(buf + len, cap - len, "%s%lld", d ? ", " : "", (long long)sizes[d]);
        if (w < 0)
            break;
        len += (size_t)w;
    }
    if (len < cap)
        snprintf(buf + len, cap - len, "]");
    return buf;
}

static double half_to_double(uint16_t h) {
    int sign = h >> 15, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    double v;
    if (exp == 0)
        v = ldexp((double)man, -24);
    else if (exp == 31)
        v = man ? NAN : INFINITY;
    else
        v = ldexp((double)(man | 0x400), exp - 25);
    return sign ? -v : v;
}

double cli_elem_as_double(const void *data, int dtype, size_t k) {
    const uint8_t *p = (const uint8_t *)data + k * etch_dtype_size(dtype);
    switch (dtype) {
    case ETCH_DTYPE_BYTE: case ETCH_DTYPE_QUINT8: return p[0];
    case ETCH_DTYPE_CHAR: case ETCH_DTYPE_QINT8: return (int8_t)p[0];
    case ETCH_DTYPE_BOOL: return p[0] ? 1.0 : 0.0;
    case ETCH_DTYPE_SHORT: { int16_t v; memcpy(&v, p, 2); return v; }
    case ETCH_DTYPE_UINT16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case ETCH_DTYPE_INT: case ETCH_DTYPE_QINT32: { int32_t v; memcpy(&v, p, 4); return v; }
    case ETCH_DTYPE_UINT32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case ETCH_DTYPE_LONG: { int64_t v; memcpy(&v, p, 8); return (double)v; }
    case ETCH_DTYPE_UINT64: { uint64_t v; memcpy(&v, p, 8); return (double)v; }
    case ETCH_DTYPE_HALF: { uint16_t v; memcpy(&v, p, 2); return half_to_double(v); }
    case ETCH_DTYPE_BFLOAT16: {
        uint16_t v;
        memcpy(&v, p, 2);
        uint32_t bits = (uint32_t)v << 16;
        float f;
        memcpy(&f, &bits, 4);
        return f;
    }
    case ETCH_DTYPE_FLOAT: { float v; memcpy(&v, p, 4); return v; }
    case ETCH_DTYPE_DOUBLE: { double v; memcpy(&v, p, 8); return v; }
    default: return NAN;
    }
}

/* One element, exact for integers. */
static void print_elem(FILE *out, const void *data, int dtype, size_t k) {
    const uint8_t *p = (const uint8_t *)data + k * etch_dtype_size(dtype);
    switch (dtype) {
    case ETCH_DTYPE_BOOL: fputs(p[0] ? "true" : "false", out); return;
    case ETCH_DTYPE_LONG: { int64_t v; memcpy(&v, p, 8); fprintf(out, "%lld", (long long)v); return; }
    case ETCH_DTYPE_UINT64: {
        uint64_t v;
        memcpy(&v, p, 8);
        fprintf(out, "%llu", (unsigned long long)v);
        return;
    }
    case ETCH_DTYPE_HALF: case ETCH_DTYPE_BFLOAT16: case ETCH_DTYPE_FLOAT:
        fprintf(out, "%.6g", cli_elem_as_double(data, dtype, k));
        return;
    case ETCH_DTYPE_DOUBLE: fprintf(out, "%.10g", cli_elem_as_double(data, dtype, k)); return;
    default:
        if (etch_dtype_size(dtype) == 0) {
            fputs("?", out);
            return;
        }
        fprintf(out, "%.0f", cli_elem_as_double(data, dtype, k));
        return;
    }
}

/* Memory index of the logical (C order) element number `k`. */
static size_t logical_to_memory(const etch_tensor *t, int64_t k) {
    int64_t off = 0;
    for (int d = (int)t->dim - 1; d >= 0; d--) {
        int64_t s = t->sizes[d] ? t->sizes[d] : 1;
        off += (k % s) * t->strides[d];
        k /= s;
    }
    return (size_t)off;
}

void cli_print_tensor_values(FILE *out, const etch_tensor *t, size_t max_items) {
    int64_t n = etch_tensor_numel(t);
    if (n > 0 && !t->data) {
        fputs("<no data>", out);
        return;
    }
    size_t head = (size_t)n, tail = 0;
    if ((size_t)n > max_items) {
        head = max_items - max_items / 4;
        tail = max_items / 4;
    }
    fputc('[', out);
    for (size_t k = 0; k < head; k++) {
        if (k)
            fputs(", ", out);
        print_elem(out, t->data, t->dtype, logical_to_memory(t, (int64_t)k));
    }
    if (tail) {
        fputs(", ...", out);
        for (size_t k = (size_t)n - tail; k < (size_t)n; k++) {
            fputs(", ", out);
            print_elem(out, t->data, t->dtype, logical_to_memory(t, (int64_t)k));
        }
    }
    fputc(']', out);
    if (tail)
        fprintf(out, " (%lld elements, %zu shown)", (long long)n, head + tail);
}

void cli_print_value_summary(FILE *out, const etch_value *v) {
    char shape[256];
    switch (v->tag) {
    case ETCH_VALUE_TENSOR:
        if (!v->u.tensor) {
            fputs("Tensor <unset>", out);
            return;
        }
        fprintf(out, "Tensor %s %s", etch_dtype_name(v->u.tensor->dtype),
                cli_shape_str(shape, sizeof shape, v->u.tensor->dim, v->u.tensor->sizes));
        return;
    case ETCH_VALUE_INT: fprintf(out, "Int %lld", (long long)v->u.i); return;
    case ETCH_VALUE_DOUBLE: fprintf(out, "Double %.10g", v->u.d); return;
    case ETCH_VALUE_BOOL: fprintf(out, "Bool %s", v->u.b ? "true" : "false"); return;
    case ETCH_VALUE_STRING:
        fprintf(out, "String \"%s\"",
                cli_safe_n(v->u.str.ptr, v->u.str.len > 200 ? 200 : v->u.str.len));
        return;
    case ETCH_VALUE_NONE: fputs("None", out); return;
    case ETCH_VALUE_DOUBLE_LIST: fprintf(out, "DoubleList (%zu items)", v->u.doubles.len); return;
    case ETCH_VALUE_BOOL_LIST: fprintf(out, "BoolList (%zu items)", v->u.bools.len); return;
    case ETCH_VALUE_INT_LIST: case ETCH_VALUE_TENSOR_LIST: case ETCH_VALUE_OPTIONAL_TENSOR_LIST:
        fprintf(out, "%s (%zu items)", etch_value_tag_name(v->tag), v->u.list.len);
        return;
    default: fprintf(out, "%s", etch_value_tag_name(v->tag)); return;
    }
}

/* ---- JSON --------------------------------------------------------------------------------- */

void cli_json_string_n(FILE *out, const char *s, size_t n) {
    if (!s) {
        fputs("null", out);
        return;
    }
    fputc('"', out);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", out);
        else if (c < 0x20 || c == 0x7f)
            fprintf(out, "\\u%04x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

void cli_json_string(FILE *out, const char *s) { cli_json_string_n(out, s, s ? strlen(s) : 0); }

void cli_json_double(FILE *out, double v) {
    if (isfinite(v))
        fprintf(out, "%.17g", v);
    else
        fputs("null", out); /* JSON has no NaN or infinity */
}

void cli_json_shape(FILE *out, size_t dim, const int64_t *sizes) {
    fputc('[', out);
    for (size_t d = 0; d < dim; d++)
        fprintf(out, d ? ", %lld" : "%lld", (long long)sizes[d]);
    fputc(']', out);
}

void cli_json_tensor_values(FILE *out, const etch_tensor *t) {
    int64_t n = etch_tensor_numel(t);
    if (n > 0 && !t->data) {
        fputs("null", out);
        return;
    }
    bool fp = t->dtype == ETCH_DTYPE_HALF || t->dtype == ETCH_DTYPE_BFLOAT16 ||
              t->dtype == ETCH_DTYPE_FLOAT || t->dtype == ETCH_DTYPE_DOUBLE;
    fputc('[', out);
    for (int64_t k = 0; k < n; k++) {
        if (k)
            fputs(", ", out);
        size_t m = logical_to_memory(t, k);
        if (fp)
            cli_json_double(out, cli_elem_as_double(t->data, t->dtype, m));
        else if (etch_dtype_size(t->dtype) == 0)
            fputs("null", out);
        else
            print_elem(out, t->data, t->dtype, m); /* exact integers, true / false */
    }
    fputc(']', out);
}

void cli_json_value_fields(FILE *out, const etch_value *v, bool values) {
    fputs("\"kind\": ", out);
    cli_json_string(out, etch_value_tag_name(v->tag));
    switch (v->tag) {
    case ETCH_VALUE_TENSOR:
        if (!v->u.tensor)
            break;
        fputs(", \"dtype\": ", out);
        cli_json_string(out, etch_dtype_name(v->u.tensor->dtype));
        fputs(", \"shape\": ", out);
        cli_json_shape(out, v->u.tensor->dim, v->u.tensor->sizes);
        if (values) {
            fputs(", \"values\": ", out);
            cli_json_tensor_values(out, v->u.tensor);
        }
        break;
    case ETCH_VALUE_INT: fprintf(out, ", \"value\": %lld", (long long)v->u.i); break;
    case ETCH_VALUE_DOUBLE:
        fputs(", \"value\": ", out);
        cli_json_double(out, v->u.d);
        break;
    case ETCH_VALUE_BOOL: fprintf(out, ", \"value\": %s", v->u.b ? "true" : "false"); break;
    case ETCH_VALUE_STRING:
        fputs(", \"value\": ", out);
        cli_json_string_n(out, v->u.str.ptr ? v->u.str.ptr : "", v->u.str.len);
        break;
    case ETCH_VALUE_DOUBLE_LIST: fprintf(out, ", \"items\": %zu", v->u.doubles.len); break;
    case ETCH_VALUE_BOOL_LIST: fprintf(out, ", \"items\": %zu", v->u.bools.len); break;
    case ETCH_VALUE_INT_LIST: case ETCH_VALUE_TENSOR_LIST: case ETCH_VALUE_OPTIONAL_TENSOR_LIST:
        fprintf(out, ", \"items\": %zu", v->u.list.len);
        break;
    default: break;
    }
}
