/*
 * No allocation per generated token, and no memory growth over 10,000 generated tokens:
 *   test_llm_alloc MODEL.pte TOKENIZER [TOKENS]
 *
 * malloc, calloc, realloc, free, aligned_alloc, posix_memalign and mmap are wrapped at link
 * time (-Wl,--wrap=...) and counted while a window is armed around whole generate calls
 * (prefill, decode loop, sampling, detokenizing, statistics). The runner is warmed up first
 * (a full-length prefill and a run to the end of the context touch every page of its
 * buffers); then generation loops — greedy and sampled (temperature, top-k, top-p), chat
 * turns on a kept cache, resets when the context is full — until TOKENS tokens were produced,
 * with the allocation count at zero and the anonymous resident set (/proc/self/statm) flat.
 */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <etch/llm.h>

#include "etch_test.h"

#include "alloc_wrap.h"

/* Anonymous resident memory (statm's resident minus shared, in bytes): the heap, arenas and
 * stacks. File-backed pages (the mmap'd program) are left out: the kernel may drop and refault
 * them at will. */
static uint64_t anon_rss(void) {
    char buf[256];
    int fd = open("/proc/self/statm", O_RDONLY); /* no stdio: nothing allocates here */
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    unsigned long long v[3] = {0, 0, 0};
    const char *p = buf;
    for (int k = 0; k < 3; k++) {
        while (*p == ' ')
            p++;
        while (*p >= '0' && *p <= '9')
            v[k] = v[k] * 10 + (unsigned long long)(*p++ - '0');
    }
    return v[1] >= v[2] ? (v[1] - v[2]) * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}

typedef struct counter {
    long tokens;
    size_t bytes;
} counter;

static int on_token(void *ud, int32_t id, const char *text, size_t len) {
    counter *c = (counter *)ud;
    (void)id;
    (void)text;
    c->tokens++;
    c->bytes += len;
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.pte TOKENIZER [TOKENS]\n", argv[0]);
        return 2;
    }
    long target = argc > 3 ? atol(argv[3]) : 10000;
    etch_tokenizer *tok = NULL;
    CHECK_OK(etch_tokenizer_open_file(argv[2], NULL, &tok));
    etch_llm_runner_options o = etch_llm_runner_default_options();
    o.sampler.temperature = 0;
    etch_llm_runner *r = NULL;
    CHECK_OK(etch_llm_runner_open(argv[1], tok, &o, &r));
    if (!r)
        return etch_test_finish() | 1;
    const etch_llm_metadata *md = etch_llm_runner_metadata(r);
    int64_t ctx = md->max_context_len;

    counter c = {0, 0};
    etch_llm_generate_params gp = etch_llm_generate_default_params();
    gp.on_token = on_token;
    gp.user_data = &c;
    gp.ignore_eos = true;
    etch_llm_result res;
    char json[1024];

    /* warm-up: the longest prefill, then decode to the end of the context */
    int32_t *ids = malloc((size_t)ctx * sizeof *ids);
    for (int64_t i = 0; i < ctx; i++)
        ids[i] = (int32_t)(3 + i % 200);
    gp.max_new_tokens = 0;
    CHECK_OK(etch_llm_runner_generate_ids(r, ids, (size_t)ctx - 1, &gp, &res));
    etch_llm_runner_reset(r);
    gp.max_new_tokens = -1;
    CHECK_OK(etch_llm_runner_generate(r, NULL, 0, &gp, &res));
    CHECK(res.stop_reason == ETCH_LLM_STOP_CONTEXT_FULL);
    etch_llm_stats_json(etch_llm_runner_stats(r), json, sizeof json);
    etch_llm_runner_reset(r);

    uint64_t rss0 = anon_rss();
    uint64_t rss_max = rss0;
    CHECK(rss0 > 0);
    etch_sampler_params sampled = etch_sampler_default_params();
    sampled.temperature = 0.9f;
    sampled.top_k = 40;
    sampled.top_p = 0.9f;
    sampled.seed = 7;
    etch_sampler_params greedy = etch_sampler_default_params();
    greedy.temperature = 0;

    long produced = 0, resets = 0, turns = 0, window_calls = 0;
    int phase = 0;
    const char *turn = " and then the dog ran to the park.";
    while (produced < target) {
        /* a quarter of the way and three quarters: switch sampler (allocates: not armed) */
        if (phase == 0 && produced >= target / 4) {
            CHECK_OK(etch_llm_runner_set_sampler(r, &sampled));
            phase = 1;
        } else if (phase == 1 && produced >= 3 * target / 4) {
            CHECK_OK(etch_llm_runner_set_sampler(r, &greedy));
            phase = 2;
        }
        long before = c.tokens;
        gp.max_new_tokens = (int32_t)(turns % 3 == 0 ? -1 : 50 + turns % 7);
        etch_alloc_calls = 0;
        etch_alloc_armed = 1;
        etch_status st = turns % 2 ? etch_llm_runner_generate(r, turn, strlen(turn), &gp, &res)
                                   : etch_llm_runner_generate(r, NULL, 0, &gp, &res);
        if (st == ETCH_ERR_OUT_OF_RESOURCES) {
            etch_llm_runner_reset(r); /* context full: a new conversation */
            resets++;
            st = etch_llm_runner_generate(r, NULL, 0, &gp, &res);
        }
        etch_llm_stats_json(etch_llm_runner_stats(r), json, sizeof json);
        etch_alloc_armed = 0;
        window_calls += etch_alloc_calls;
        CHECK_MSG(st == ETCH_OK, "%s: %s", etch_status_str(st), etch_last_error());
        if (st != ETCH_OK)
            break;
        CHECK(res.generated_tokens >= 1);
        CHECK(c.tokens - before == res.generated_tokens);
        produced += (long)res.generated_tokens;
        turns++;
        if (res.stop_reason == ETCH_LLM_STOP_CONTEXT_FULL) {
            etch_llm_runner_reset(r);
            resets++;
        }
        uint64_t rss = anon_rss();
        if (rss > rss_max)
            rss_max = rss;
    }
    CHECK_MSG(window_calls == 0, "%ld allocation calls while generating", window_calls);
    CHECK(produced >= target);
    uint64_t rss1 = anon_rss();
    /* nothing allocates, so the resident set may only move by a few pages (stack, libc) */
    CHECK_MSG(rss_max <= rss0 + 64 * 1024,
              "anonymous RSS grew from %llu to %llu (max %llu) bytes", (unsigned long long)rss0,
              (unsigned long long)rss1, (unsigned long long)rss_max);
    printf("%ld tokens in %ld calls (%ld context resets), %zu bytes of text; anonymous RSS "
           "%llu -> %llu bytes (max %llu); %ld allocation calls while generating\n",
           produced, turns, resets, c.bytes, (unsigned long long)rss0,
           (unsigned long long)rss1, (unsigned long long)rss_max, window_calls);
    printf("%s\n", json);
    free(ids);
    etch_llm_runner_close(r);
    etch_tokenizer_close(tok);
    return etch_test_finish();
}
