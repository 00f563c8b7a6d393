/* LLM runner statistics: clocks, memory, and the PyTorchObserver line of ExecuTorch's runner. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "etch/llm_runner.h"

int64_t etch_llm_time_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* VmHWM of /proc/self/status in bytes; 0 when unavailable. Read with a plain fd and no
 * stdio (no allocation). Preferred to getrusage: Linux keeps ru_maxrss across execve, so a
 * process started by a large parent would report the parent's peak. */
static uint64_t proc_vmhwm_bytes(void) {
    char buf[4096];
    int fd = open("/proc/self/status", O_RDONLY);
    if (fd < 0)
        return 0;
    size_t len = 0;
    ssize_t n;
    while (len < sizeof buf - 1 && (n = read(fd, buf + len, sizeof buf - 1 - len)) > 0)
        len += (size_t)n;
    close(fd);
    buf[len] = 0;
    const char *p = strstr(buf, "\nVmHWM:");
    if (!p)
        return 0;
    p += 8;
    while (*p == ' ' || *p == '\t')
        p++;
    uint64_t kb = 0;
    bool digits = false;
    for (; *p >= '0' && *p <= '9'; p++, digits = true)
        kb = kb * 10 + (uint64_t)(*p - '0');
    return digits ? kb * 1024u : 0;
}

uint64_t etch_llm_peak_rss_bytes(void) {
    uint64_t hwm = proc_vmhwm_bytes();
    if (hwm)
        return hwm;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0 || ru.ru_maxrss < 0)
        return 0;
#if defined(__APPLE__)
    return (uint64_t)ru.ru_maxrss; /* bytes there */
#else
    return (uint64_t)ru.ru_maxrss * 1024u; /* kilobytes on Linux */
#endif
}

uint64_t etch_llm_current_rss_bytes(void) {
    /* statm: size resident shared text lib data dt, in pages. Read with a plain fd and no
     * stdio, so that the call allocates nothing. */
    char buf[128];
    int fd = open("/proc/self/statm", O_RDONLY);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    const char *p = buf;
    while (*p && *p != ' ')
        p++;
    uint64_t pages = 0;
    while (*p == ' ')
        p++;
    while (*p >= '0' && *p <= '9')
        pages = pages * 10 + (uint64_t)(*p++ - '0');
    long page = sysconf(_SC_PAGESIZE);
    return pages * (uint64_t)(page > 0 ? page : 4096);
}

static int64_t ms(int64_t us) { return us >= 0 ? us / 1000 : -((-us + 999) / 1000); }

size_t etch_llm_stats_json(const etch_llm_stats *s, char *buf, size_t cap) {
    int n = snprintf(buf, cap,
                     "PyTorchObserver {\"prompt_tokens\":%" PRId64 ",\"generated_tokens\":%" PRId64
                     ",\"model_load_start_ms\":%" PRId64 ",\"model_load_end_ms\":%" PRId64
                     ",\"inference_start_ms\":%" PRId64 ",\"inference_end_ms\":%" PRId64
                     ",\"prompt_eval_end_ms\":%" PRId64 ",\"first_token_ms\":%" PRId64
                     ",\"aggregate_sampling_time_ms\":%" PRId64
                     ",\"SCALING_FACTOR_UNITS_PER_SECOND\":1000,\"peak_rss_bytes\":%" PRIu64 "}",
                     s->prompt_tokens, s->generated_tokens, ms(s->model_load_start_us),
                     ms(s->model_load_end_us), ms(s->inference_start_us),
                     ms(s->inference_end_us), ms(s->prompt_eval_end_us), ms(s->first_token_us),
                     ms(s->aggregate_sampling_time_us), s->peak_rss_bytes);
    return n < 0 ? 0 : (size_t)n;
}

static double rate(int64_t tokens, int64_t us) {
    return us > 0 ? (double)tokens * 1e6 / (double)us : 0.0;
}

size_t etch_llm_stats_report(const etch_llm_stats *s, char *buf, size_t cap) {
    int64_t prefill = s->prompt_eval_end_us - s->inference_start_us;
    int64_t decode = s->inference_end_us - s->prompt_eval_end_us;
    int64_t total = s->inference_end_us - s->inference_start_us;
    int n = snprintf(
        buf, cap,
        "prompt tokens: %" PRId64 ", generated tokens: %" PRId64 "\n"
        "model load: %.3f s\n"
        "prefill: %.3f s, %.1f tokens/s\n"
        "decode: %.3f s, %.1f tokens/s\n"
        "time to first token: %.3f s\n"
        "total inference: %.3f s, %.1f tokens/s; sampling %.3f s\n"
        "peak RSS: %.1f MiB; threads: %d\n",
        s->prompt_tokens, s->generated_tokens,
        (double)(s->model_load_end_us - s->model_load_start_us) / 1e6, (double)prefill / 1e6,
        rate(s->prompt_tokens, prefill), (double)decode / 1e6,
        rate(s->generated_tokens, decode),
        (double)(s->first_token_us - s->inference_start_us) / 1e6, (double)total / 1e6,
        rate(s->generated_tokens, total), (double)s->aggregate_sampling_time_us / 1e6,
        (double)s->peak_rss_bytes / (1024.0 * 1024.0), s->num_threads);
    return n < 0 ? 0 : (size_t)n;
}
