/*
 * The runner against tokenizers smaller than the model's vocabulary, through the C API, on a
 * real model (models/default: vocabulary 1024):
 *   test_llm_vocab MODEL.pte
 *
 * - a byte-level tokenizer far smaller than the vocabulary (256 tiktoken ranks) is refused at
 *   etch_llm_runner_open with a message that says so: its ids would be garbage;
 * - one a few ids short (1000 ranks: a padded embedding) opens, and generation never samples
 *   the 24 padded ids, even at a temperature that makes every id about equally likely.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <etch/llm.h>
#include <etch/llm_runner.h>

#include "etch_test.h"

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* base64 of s[0..n) (n <= 3) into out, NUL-terminated */
static void b64(const unsigned char *s, size_t n, char *out) {
    unsigned v = (unsigned)s[0] << 16 | (n > 1 ? (unsigned)s[1] << 8 : 0u) | (n > 2 ? s[2] : 0u);
    out[0] = B64[v >> 18 & 63];
    out[1] = B64[v >> 12 & 63];
    out[2] = n > 1 ? B64[v >> 6 & 63] : '=';
    out[3] = n > 2 ? B64[v & 63] : '=';
    out[4] = 0;
}

/* tiktoken ranks: the 256 bytes, then two-byte tokens "ab", "ac", ... up to n ranks */
static etch_tokenizer *ranks(int n) {
    size_t cap = (size_t)n * 16 + 1, len = 0;
    char *text = malloc(cap);
    if (!text)
        return NULL;
    for (int r = 0; r < n; r++) {
        unsigned char s[2];
        size_t sl = 1;
        if (r < 256) {
            s[0] = (unsigned char)r;
        } else {
            s[0] = (unsigned char)('a' + (r - 256) / 26);
            s[1] = (unsigned char)('a' + (r - 256) % 26);
            sl = 2;
        }
        char e[8];
        b64(s, sl, e);
        len += (size_t)snprintf(text + len, cap - len, "%s %d\n", e, r);
    }
    etch_tokenizer_params p = etch_tokenizer_default_params();
    p.format = ETCH_TOKENIZER_TIKTOKEN;
    etch_tokenizer *t = NULL;
    CHECK_OK(etch_tokenizer_open_buffer(text, len, &p, &t));
    free(text);
    CHECK(t && etch_tokenizer_vocab_size(t) == n);
    return t;
}

typedef struct seen {
    int32_t max_id;
    long n;
} seen;

static int on_token(void *ud, int32_t id, const char *text, size_t len) {
    seen *s = (seen *)ud;
    (void)text;
    (void)len;
    if (id >= 0) {
        s->n++;
        if (id > s->max_id)
            s->max_id = id;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.pte\n", argv[0]);
        return 2;
    }
    /* far smaller: refused, the message names both sizes */
    etch_tokenizer *small = ranks(256);
    etch_llm_runner *r = (etch_llm_runner *)1;
    CHECK_STATUS(etch_llm_runner_open(argv[1], small, NULL, &r), ETCH_ERR_INVALID_ARGUMENT);
    CHECK(r == (etch_llm_runner *)1);
    CHECK_MSG(strstr(etch_last_error(), "the tokenizer has 256 ids but the model's vocabulary "
                                        "has 1024: 768 ids without text") != NULL,
              "%s", etch_last_error());
    etch_tokenizer_close(small);

    /* a padded embedding: 24 ids past the tokenizer's 1000, never sampled */
    etch_tokenizer *padded = ranks(1000);
    etch_llm_runner_options o = etch_llm_runner_default_options();
    o.sampler.temperature = 1e6f; /* about uniform over what the sampler sees */
    o.sampler.top_p = 1.0f;
    o.sampler.seed = 7;
    r = NULL;
    CHECK_OK(etch_llm_runner_open(argv[1], padded, &o, &r));
    if (r) {
        CHECK(etch_llm_runner_metadata(r)->vocab_size == 1024);
        etch_llm_generate_params gp = etch_llm_generate_default_params();
        seen s = {-1, 0};
        gp.max_new_tokens = 200;
        gp.ignore_eos = true;
        gp.on_token = on_token;
        gp.user_data = &s;
        etch_llm_result res;
        CHECK_OK(etch_llm_runner_generate(r, "ab", 2, &gp, &res));
        CHECK(s.n == 200);
        CHECK_MSG(s.max_id >= 0 && s.max_id < 1000,
                  "sampled id %d, past the tokenizer's 1000 ids", (int)s.max_id);
        printf("200 tokens sampled at temperature 1e6, largest id %d\n", (int)s.max_id);
        etch_llm_runner_close(r);
    }
    etch_tokenizer_close(padded);
    return etch_test_finish();
}
