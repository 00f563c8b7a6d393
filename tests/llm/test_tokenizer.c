/* Tokenizer unit tests on the shared fixtures and small inline files: format detection,
 * known ids, the caller-buffer contract, decode_token and the streaming detokenizer, cutting
 * long text into runs, malformed files (truncations, flipped bytes), and no allocation in
 * encode/decode (allocation functions wrapped at link time, which also count the bytes open
 * asks for). Hostile files: ids far beyond the entries and too many pieces are refused before
 * big tables are allocated; very long pieces and specials keep encode's work (its counter,
 * etch_tokenizer_encode_work) a few steps a byte.
 *   test_tokenizer FIXTURES_LLM_DIR */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etch/llm.h"
#include "etch_test.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t a, size_t b);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);
static int armed, allocs;
static size_t alloc_bytes; /* bytes asked for, always counted */
void *__wrap_malloc(size_t n) { allocs += armed; alloc_bytes += n; return __real_malloc(n); }
void *__wrap_calloc(size_t a, size_t b) {
    allocs += armed;
    alloc_bytes += a * b;
    return __real_calloc(a, b);
}
void *__wrap_realloc(void *p, size_t n) {
    allocs += armed;
    alloc_bytes += n;
    return __real_realloc(p, n);
}
void __wrap_free(void *p) { allocs += armed && p; __real_free(p); }

static char dir[2048];

static etch_tokenizer *open_fx(const char *name, const etch_tokenizer_params *p) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    etch_tokenizer *t = NULL;
    CHECK_OK(etch_tokenizer_open_file(path, p, &t));
    return t;
}

static unsigned char *slurp(const char *name, size_t *n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n);
    if (fread(b, 1, *n, f) != *n) *n = 0;
    fclose(f);
    return b;
}

static int ids_eq(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    return na == nb && memcmp(a, b, na * sizeof(int32_t)) == 0;
}

static void test_fixtures(void) {
    etch_tokenizer *l2 = open_fx("llama2_tokenizer_32000.model", NULL);
    etch_tokenizer *l2b = open_fx("llama2_tokenizer_32000.bin", NULL);
    etch_tokenizer *t5 = open_fx("tok512.model", NULL);
    etch_tokenizer *t5b = open_fx("tok512.bin", NULL);
    if (!l2 || !l2b || !t5 || !t5b) return;
    CHECK(etch_tokenizer_get_format(l2) == ETCH_TOKENIZER_SENTENCEPIECE);
    CHECK(etch_tokenizer_get_format(l2b) == ETCH_TOKENIZER_LLAMA2C);
    CHECK(etch_tokenizer_vocab_size(l2) == 32000 && etch_tokenizer_vocab_size(l2b) == 32000);
    CHECK(etch_tokenizer_vocab_size(t5) == 512 && etch_tokenizer_vocab_size(t5b) == 512);
    CHECK(etch_tokenizer_bos_id(l2) == 1 && etch_tokenizer_eos_id(l2) == 2);
    CHECK(etch_tokenizer_bos_id(t5b) == 1 && etch_tokenizer_eos_id(t5b) == 2);

    int32_t ids[64];
    size_t n = 0;
    const int32_t hello[] = {1, 15043, 3186, 2};
    CHECK_OK(etch_tokenizer_encode(l2, "Hello world", 11,
                                   ETCH_TOKENIZER_ADD_BOS | ETCH_TOKENIZER_ADD_EOS, ids, 64, &n));
    CHECK(ids_eq(ids, n, hello, 4));
    CHECK_OK(etch_tokenizer_encode(l2b, "Hello world", 11, ETCH_TOKENIZER_ADD_BOS, ids, 64, &n));
    CHECK(ids_eq(ids, n, hello, 3));
    const char *story = "Once upon a time, there was a little girl.";
    const int32_t s512[] = {403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 426};
    CHECK_OK(etch_tokenizer_encode(t5, story, strlen(story), 0, ids, 64, &n));
    CHECK(ids_eq(ids, n, s512, 13));
    CHECK_OK(etch_tokenizer_encode(t5b, story, strlen(story), 0, ids, 64, &n));
    CHECK(ids_eq(ids, n, s512, 13));

    /* caller buffer too small: the count needed, the first cap ids written */
    int32_t small[3] = {-7, -7, -7};
    n = 0;
    CHECK_STATUS(etch_tokenizer_encode(t5, story, strlen(story), 0, small, 2, &n),
                 ETCH_ERR_OUT_OF_RESOURCES);
    CHECK(n == 13 && small[0] == 403 && small[1] == 407 && small[2] == -7);
    CHECK_STATUS(etch_tokenizer_encode(t5, story, strlen(story), 0, NULL, 0, &n),
                 ETCH_ERR_OUT_OF_RESOURCES);
    CHECK(n == 13);
    CHECK_OK(etch_tokenizer_encode(t5, "", 0, 0, NULL, 0, &n));
    CHECK(n == 0);
    CHECK_STATUS(etch_tokenizer_encode(t5, NULL, 3, 0, ids, 64, &n), ETCH_ERR_INVALID_ARGUMENT);

    /* decode_token: llama2.c's rule */
    char buf[64];
    size_t len;
    CHECK_OK(etch_tokenizer_decode_token(l2, 1, 15043, buf, sizeof buf, &len));
    CHECK(len == 5 && memcmp(buf, "Hello", 5) == 0);
    CHECK_OK(etch_tokenizer_decode_token(l2, 15043, 3186, buf, sizeof buf, &len));
    CHECK(len == 6 && memcmp(buf, " world", 6) == 0);
    CHECK_OK(etch_tokenizer_decode_token(l2b, 15043, 3186, buf, sizeof buf, &len));
    CHECK(len == 6 && memcmp(buf, " world", 6) == 0);
    CHECK_OK(etch_tokenizer_decode_token(l2, 3186, 3 + 0x0A, buf, sizeof buf, &len));
    CHECK(len == 1 && buf[0] == '\n');
    CHECK_OK(etch_tokenizer_decode_token(t5b, 5, 3 + 0xF0, buf, sizeof buf, &len));
    CHECK(len == 1 && (unsigned char)buf[0] == 0xF0); /* raw byte, not its Latin-1 text */
    CHECK_OK(etch_tokenizer_decode_token(l2, 5, 1, buf, sizeof buf, &len));
    CHECK(len == 0);
    CHECK_STATUS(etch_tokenizer_decode_token(l2, 5, 32000, buf, sizeof buf, &len),
                 ETCH_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(etch_tokenizer_decode_token(l2, 1, 15043, buf, 2, &len), ETCH_ERR_OUT_OF_RESOURCES);
    CHECK(len == 5);

    /* token lookups */
    CHECK(etch_tokenizer_token_to_id(l2, "\xE2\x96\x81Hello", 8) == 15043);
    CHECK(etch_tokenizer_token_to_id(l2b, " Hello", 6) == 15043);
    CHECK(etch_tokenizer_token_to_id(l2, "<s>", 3) == 1);
    CHECK(etch_tokenizer_token_to_id(l2, "no such piece at all", 20) == -1);
    const char *tx = etch_tokenizer_token_text(l2, 15043, &len);
    CHECK(tx && len == 8);
    CHECK(etch_tokenizer_token_text(l2, -1, &len) == NULL);

    /* streaming: an emoji as four byte pieces comes out whole, at the fourth */
    etch_detokenizer d;
    etch_detokenizer_init(&d, l2);
    const unsigned char emoji[4] = {0xF0, 0x9F, 0x98, 0x80};
    size_t outs[4];
    for (int i = 0; i < 4; i++) CHECK_OK(etch_detokenizer_feed(&d, 3 + emoji[i], buf, sizeof buf, &outs[i]));
    CHECK(outs[0] == 0 && outs[1] == 0 && outs[2] == 0 && outs[3] == 4 && memcmp(buf, emoji, 4) == 0);
    /* an unfinished sequence, then the end: U+FFFD per byte (sentencepiece) */
    CHECK_OK(etch_detokenizer_feed(&d, 3 + 0xE4, buf, sizeof buf, &len));
    CHECK(len == 0);
    CHECK_OK(etch_detokenizer_flush(&d, buf, sizeof buf, &len));
    CHECK(len == 3 && memcmp(buf, "\xEF\xBF\xBD", 3) == 0);
    /* too small a buffer: nothing consumed, the size needed reported */
    etch_detokenizer_init(&d, l2);
    CHECK_STATUS(etch_detokenizer_feed(&d, 3186, buf, 2, &len), ETCH_ERR_OUT_OF_RESOURCES);
    CHECK(len == 5); /* "world": the first piece loses its space */
    CHECK_OK(etch_detokenizer_feed(&d, 3186, buf, sizeof buf, &len));
    CHECK(len == 5 && memcmp(buf, "world", 5) == 0);
    CHECK(etch_detokenizer_max_output(l2) >= 3 * etch_tokenizer_max_token_bytes(l2));

    /* whole decode */
    CHECK_OK(etch_tokenizer_decode(l2, hello, 4, buf, sizeof buf, &len));
    CHECK(len == 11 && memcmp(buf, "Hello world", 11) == 0);
    CHECK_STATUS(etch_tokenizer_decode(l2, hello, 4, buf, 3, &len), ETCH_ERR_OUT_OF_RESOURCES);
    CHECK(len == 11);

    /* no allocation in encode, decode, detokenize */
    static char text[20000];
    size_t tl = 0;
    while (tl + 60 < sizeof text) {
        memcpy(text + tl, "The quick brown \xF0\x9F\xA6\x8A jumps over 12345 lazy dogs.\n", 48);
        tl += 48;
    }
    static int32_t many[20000];
    armed = 1;
    allocs = 0;
    etch_tokenizer *all[4] = {l2, l2b, t5, t5b};
    for (int k = 0; k < 4; k++) {
        CHECK_OK(etch_tokenizer_encode(all[k], text, tl, ETCH_TOKENIZER_ADD_BOS, many, 20000, &n));
        static char back[40000];
        CHECK_OK(etch_tokenizer_decode(all[k], many, n, back, sizeof back, &len));
        etch_detokenizer_init(&d, all[k]);
        for (size_t i = 0; i < n; i++) etch_detokenizer_feed(&d, many[i], buf, sizeof buf, &len);
    }
    armed = 0;
    CHECK_MSG(allocs == 0, "%d allocations in encode/decode", allocs);

    etch_tokenizer_close(l2);
    etch_tokenizer_close(l2b);
    etch_tokenizer_close(t5);
    etch_tokenizer_close(t5b);
}

/* Long text is cut into runs at spaces: a small work buffer gives the same ids; a run
 * longer than the buffer is refused. */
static void test_runs(void) {
    etch_tokenizer_params p = etch_tokenizer_default_params();
    p.max_run_bytes = 64;
    static const char *const names[] = {"tok512.model", "llama2_tokenizer_32000.model", "tok512.bin"};
    static char text[30000];
    size_t tl = 0;
    unsigned x = 1;
    while (tl + 40 < sizeof text) {
        x = x * 1103515245u + 12345u;
        int w = 1 + (int)((x >> 16) % 12);
        for (int i = 0; i < w; i++) text[tl++] = (char)('a' + (x >> (i % 16)) % 26);
        int sp = (x >> 8) % 7 == 0 ? 3 : 1;
        for (int i = 0; i < sp; i++) text[tl++] = ' ';
    }
    static int32_t a[30000], b[30000];
    for (int k = 0; k < 3; k++) {
        etch_tokenizer *big = open_fx(names[k], NULL), *small = open_fx(names[k], &p);
        if (!big || !small) return;
        size_t na = 0, nb = 0;
        CHECK_OK(etch_tokenizer_encode(big, text, tl, 0, a, 30000, &na));
        CHECK_OK(etch_tokenizer_encode(small, text, tl, 0, b, 30000, &nb));
        CHECK_MSG(ids_eq(a, na, b, nb), "%s: runs of 64 bytes change the ids", names[k]);
        char word[200];
        memset(word, 'q', sizeof word);
        CHECK_STATUS(etch_tokenizer_encode(small, word, sizeof word, 0, a, 30000, &na),
                     ETCH_ERR_NOT_SUPPORTED);
        etch_tokenizer_close(big);
        etch_tokenizer_close(small);
    }
}

/* A tiny byte-level tokenizer.json: merges, added tokens (special or not, lstrip/rstrip). */
static const char *tiny_json =
    "{\"version\":\"1.0\",\"added_tokens\":["
    "{\"id\":9,\"content\":\"<|eot|>\",\"special\":true,\"lstrip\":false,\"rstrip\":false},"
    "{\"id\":10,\"content\":\"[X]\",\"special\":false,\"lstrip\":true,\"rstrip\":true}],"
    "\"normalizer\":null,"
    "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true},"
    "\"post_processor\":null,\"decoder\":{\"type\":\"ByteLevel\"},"
    "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"\\u0120\":2,\"ab\":3,\"\\u0120ab\":4,"
    "\"c\":5,\"abc\":6,\"\\u010a\":7,\"\\u0120a\":8},"
    "\"merges\":[\"a b\",\"\\u0120 ab\",[\"ab\",\"c\"],\"\\u0120 a\"]}}";

static void test_hf_tiny(void) {
    etch_tokenizer *t = NULL;
    CHECK_OK(etch_tokenizer_open_buffer(tiny_json, strlen(tiny_json), NULL, &t));
    if (!t) return;
    CHECK(etch_tokenizer_get_format(t) == ETCH_TOKENIZER_HF_JSON);
    CHECK(etch_tokenizer_vocab_size(t) == 11);
    int32_t ids[32];
    size_t n;
    /* "ab abc ab": ab | Ġab | Ġ abc? the split gives " abc" whose merges are Ġ+ab first */
    CHECK_OK(etch_tokenizer_encode(t, "ab abc\n", 7, 0, ids, 32, &n));
    const int32_t e1[] = {3, 4, 5, 7};
    CHECK(ids_eq(ids, n, e1, 4));
    /* special only with the flag; the non-special added token always, taking its spaces */
    CHECK_OK(etch_tokenizer_encode(t, "a<|eot|>", 8, ETCH_TOKENIZER_PARSE_SPECIAL, ids, 32, &n));
    const int32_t e2[] = {0, 9};
    CHECK(ids_eq(ids, n, e2, 2));
    CHECK_OK(etch_tokenizer_encode(t, "ab  [X]  ab", 11, 0, ids, 32, &n));
    const int32_t e3[] = {3, 10, 3};
    CHECK(ids_eq(ids, n, e3, 3));
    char buf[64];
    size_t len;
    CHECK_OK(etch_tokenizer_decode(t, e1, 4, buf, sizeof buf, &len));
    CHECK(len == 7 && memcmp(buf, "ab abc\n", 7) == 0);
    CHECK(etch_tokenizer_token_to_id(t, " ab", 3) == 4); /* stored as raw bytes */
    etch_tokenizer_close(t);

    /* refused: a normalizer, an unknown regex, add_prefix_space */
    const char *bad[] = {
        "{\"normalizer\":{\"type\":\"NFC\"},\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}}",
        "{\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\w+\"},\"behavior\":\"Isolated\"},"
        "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}}",
        "{\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true},"
        "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}}",
        "{\"model\":{\"type\":\"WordPiece\",\"vocab\":{\"a\":0}}}",
    };
    for (int i = 0; i < 4; i++) {
        t = NULL;
        CHECK_STATUS(etch_tokenizer_open_buffer(bad[i], strlen(bad[i]), NULL, &t), ETCH_ERR_NOT_SUPPORTED);
        CHECK(t == NULL);
    }
    const char *broken[] = {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[}}", "{",
                            "{\"model\":{\"vocab\":{\"a\":-1},\"merges\":[]}}"};
    for (int i = 0; i < 3; i++)
        CHECK_STATUS(etch_tokenizer_open_buffer(broken[i], strlen(broken[i]), NULL, &t),
                     ETCH_ERR_INVALID_PROGRAM);
}

static void test_tiktoken_tiny(void) {
    /* bytes a, b, c, space; merges by rank: "ab" 4, " a" 5, "abc" 6 */
    const char *ranks = "YQ== 0\nYg== 1\nYw== 2\nIA== 3\nYWI= 4\nIGE= 5\nYWJj 6\n";
    etch_tokenizer_special sp[] = {{"<|endoftext|>", 7}};
    etch_tokenizer_params p = etch_tokenizer_default_params();
    p.specials = sp;
    p.n_specials = 1;
    p.split = ETCH_TOKENIZER_SPLIT_CL100K;
    etch_tokenizer *t = NULL;
    CHECK_OK(etch_tokenizer_open_buffer(ranks, strlen(ranks), &p, &t));
    if (!t) return;
    CHECK(etch_tokenizer_get_format(t) == ETCH_TOKENIZER_TIKTOKEN);
    CHECK(etch_tokenizer_vocab_size(t) == 8 && etch_tokenizer_eos_id(t) == 7);
    int32_t ids[32];
    size_t n;
    CHECK_OK(etch_tokenizer_encode(t, "abc abc<|endoftext|>", 20, ETCH_TOKENIZER_PARSE_SPECIAL, ids, 32, &n));
    /* " abc": "ab" (rank 4) merges before " a" (5), then "abc" (6) */
    const int32_t e[] = {6, 3, 6, 7};
    CHECK(ids_eq(ids, n, e, 4));
    CHECK_OK(etch_tokenizer_encode(t, "<|", 2, ETCH_TOKENIZER_PARSE_SPECIAL, ids, 32, &n));
    CHECK(n == 0 || ids[0] >= 0); /* bytes outside the vocabulary are dropped, never a crash */
    etch_tokenizer_close(t);
    const char *bad = "YQ== 0\nnot base64! 1\n";
    CHECK(etch_tokenizer_open_buffer(bad, strlen(bad), &p, &t) != ETCH_OK);
}

/* Truncated and corrupted files: a status, never a crash (run under ASan in CI). */
static void test_malformed(void) {
    etch_tokenizer *t = NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/does-not-exist.model", dir);
    CHECK_STATUS(etch_tokenizer_open_file(path, NULL, &t), ETCH_ERR_ACCESS_FAILED);
    CHECK_STATUS(etch_tokenizer_open_buffer("", 0, NULL, &t), ETCH_ERR_INVALID_PROGRAM);
    CHECK_STATUS(etch_tokenizer_open_buffer("\x01\x02\x03", 3, NULL, &t), ETCH_ERR_INVALID_PROGRAM);
    static const char *const names[] = {"tok512.model", "tok512.bin"};
    for (int k = 0; k < 2; k++) {
        size_t n = 0;
        unsigned char *b = slurp(names[k], &n), *c = malloc(n);
        if (!b) continue;
        int ok_cnt = 0, err_cnt = 0;
        for (size_t cut = 0; cut < n; cut += 1 + cut / 9) {
            etch_status st = etch_tokenizer_open_buffer(b, cut, NULL, &t);
            if (st == ETCH_OK) {
                int32_t ids[256];
                size_t m;
                etch_tokenizer_encode(t, "a test, \xF0\x9F\x98\x80!", 13, 1, ids, 256, &m);
                etch_tokenizer_close(t);
                ok_cnt++;
            } else {
                err_cnt++;
            }
        }
        unsigned x = 12345;
        for (int i = 0; i < 300; i++) {
            memcpy(c, b, n);
            for (int f = 0; f < 4; f++) {
                x = x * 1103515245u + 12345u;
                c[(x >> 8) % n] ^= (unsigned char)(1u << ((x >> 4) & 7));
            }
            if (etch_tokenizer_open_buffer(c, n, NULL, &t) == ETCH_OK) {
                int32_t ids[256];
                size_t m;
                char out[1024];
                size_t len;
                etch_tokenizer_encode(t, "flipped bits \xE4\xB8\xAD", 16, 3, ids, 256, &m);
                if (m > 256) m = 256;
                etch_tokenizer_decode(t, ids, m, out, sizeof out, &len);
                etch_tokenizer_close(t);
            }
        }
        /* the complete file opens; a header cut short does not */
        CHECK_OK(etch_tokenizer_open_buffer(b, n, NULL, &t));
        etch_tokenizer_close(t);
        CHECK(err_cnt > 0);
        printf("%s: %d truncations refused, %d opened (a prefix can be a valid smaller file)\n",
               names[k], err_cnt, ok_cnt);
        free(b);
        free(c);
    }
}

/* Open bytes with params; the status, the bytes allocated meanwhile in *bytes. */
static etch_status open_counted(const void *d, size_t n, const etch_tokenizer_params *p,
                                size_t *bytes, etch_tokenizer **t) {
    *t = NULL;
    size_t before = alloc_bytes;
    etch_status st = etch_tokenizer_open_buffer(d, n, p, t);
    *bytes = alloc_bytes - before;
    return st;
}

/* Tables are sized by the largest id: an id far beyond the entries is refused before any
 * big allocation, a vocabulary with a few gaps loads in small memory. */
static void test_id_span(void) {
    etch_tokenizer *t;
    size_t bytes;
    const size_t small = 8u << 20; /* the arena's blocks are 1 MiB */
    /* one tiktoken rank at the id limit, and one just below it */
    const char *tk[] = {"QQ== 16777216", "QQ== 16777215", "QQ== 0\nQg== 5000\n"};
    for (int i = 0; i < 3; i++) {
        CHECK_STATUS(open_counted(tk[i], strlen(tk[i]), NULL, &bytes, &t), ETCH_ERR_INVALID_PROGRAM);
        CHECK_MSG(bytes < small, "tiktoken '%s': %zu bytes allocated to refuse it", tk[i], bytes);
        CHECK(t == NULL);
    }
    CHECK_MSG(strstr(etch_last_error(), "far beyond the 2 entries") != NULL, "%s", etch_last_error());
    /* a 59-byte tokenizer.json with a huge id */
    const char *hj = "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":16000000},\"merges\":[]}}";
    CHECK_STATUS(open_counted(hj, strlen(hj), NULL, &bytes, &t), ETCH_ERR_INVALID_PROGRAM);
    CHECK_MSG(bytes < small, "tokenizer.json: %zu bytes allocated to refuse it", bytes);
    CHECK_MSG(strstr(etch_last_error(), "id 16000000 is far beyond the 1 entries") != NULL, "%s",
              etch_last_error());
    /* an added token above the vocabulary, past a gap of unused ids: loads, small */
    const char *gap =
        "{\"added_tokens\":[{\"id\":900,\"content\":\"<|end|>\",\"special\":true}],"
        "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[]}}";
    CHECK_OK(open_counted(gap, strlen(gap), NULL, &bytes, &t));
    CHECK_MSG(bytes < small, "tokenizer.json with a gap: %zu bytes", bytes);
    if (t) {
        CHECK(etch_tokenizer_vocab_size(t) == 901);
        int32_t ids[8];
        size_t n;
        CHECK_OK(etch_tokenizer_encode(t, "ab<|end|>", 9, ETCH_TOKENIZER_PARSE_SPECIAL, ids, 8, &n));
        const int32_t e[] = {0, 1, 900};
        CHECK(ids_eq(ids, n, e, 3));
        char buf[16];
        size_t len;
        /* an unused id decodes to nothing, never garbage */
        const int32_t hole[] = {0, 500, 1};
        CHECK_OK(etch_tokenizer_decode(t, hole, 3, buf, sizeof buf, &len));
        CHECK(len == 2 && memcmp(buf, "ab", 2) == 0);
        etch_tokenizer_close(t);
    }
    /* tiktoken specials given far beyond the ranks */
    etch_tokenizer_special sp[] = {{"<|endoftext|>", 9000000}};
    etch_tokenizer_params p = etch_tokenizer_default_params();
    p.specials = sp;
    p.n_specials = 1;
    const char *ranks = "YQ== 0\nYg== 1\n";
    CHECK_STATUS(open_counted(ranks, strlen(ranks), &p, &bytes, &t), ETCH_ERR_INVALID_PROGRAM);
    CHECK_MSG(bytes < small, "tiktoken with a far special: %zu bytes", bytes);
    sp[0].id = 2;
    CHECK_OK(open_counted(ranks, strlen(ranks), &p, &bytes, &t));
    etch_tokenizer_close(t);
}

/* sentencepiece: the piece count is capped like the other formats' ids (2^24): a file of
 * 2^24 + 1 empty pieces (2 bytes each) is refused before its tables are allocated. */
static void test_spm_piece_cap(void) {
    const size_t n = (1u << 24) + 1;
    unsigned char *b = malloc(2 * n);
    if (!b) return;
    for (size_t i = 0; i < n; i++) {
        b[2 * i] = 0x0A; /* field 1, length-delimited: a SentencePiece */
        b[2 * i + 1] = 0x00;
    }
    etch_tokenizer_params p = etch_tokenizer_default_params();
    p.format = ETCH_TOKENIZER_SENTENCEPIECE;
    etch_tokenizer *t;
    size_t bytes;
    CHECK_STATUS(open_counted(b, 2 * n, &p, &bytes, &t), ETCH_ERR_INVALID_PROGRAM);
    CHECK_MSG(bytes < (64u << 20), "%zu bytes allocated to refuse 2^24 + 1 pieces", bytes);
    CHECK_MSG(strstr(etch_last_error(), "more than 16777216 pieces") != NULL, "%s",
              etch_last_error());
    CHECK(t == NULL);
    free(b);
}

/* ---- a sentencepiece ModelProto written here: pieces (text, score, type), model type */
typedef struct pbuf {
    unsigned char *p;
    size_t n, cap;
} pbuf;
static void pb_byte(pbuf *b, unsigned c) {
    if (b->n == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 1024;
        b->p = realloc(b->p, b->cap);
    }
    b->p[b->n++] = (unsigned char)c;
}
static void pb_varint(pbuf *b, uint64_t v) {
    while (v >= 0x80) {
        pb_byte(b, (unsigned)(v & 0x7F) | 0x80);
        v >>= 7;
    }
    pb_byte(b, (unsigned)v);
}
static void pb_piece(pbuf *b, const char *s, size_t len, float score, int type) {
    pbuf m = {0};
    pb_byte(&m, 0x0A); /* 1: piece */
    pb_varint(&m, len);
    for (size_t i = 0; i < len; i++) pb_byte(&m, (unsigned char)s[i]);
    unsigned char f[4];
    memcpy(f, &score, 4);
    pb_byte(&m, 0x15); /* 2: score */
    for (int i = 0; i < 4; i++) pb_byte(&m, f[i]);
    pb_byte(&m, 0x18); /* 3: type */
    pb_varint(&m, (uint64_t)type);
    pb_byte(b, 0x0A); /* ModelProto 1: pieces */
    pb_varint(b, m.n);
    for (size_t i = 0; i < m.n; i++) pb_byte(b, m.p[i]);
    free(m.p);
}
static void pb_model_type(pbuf *b, int type) {
    pb_byte(b, 0x12); /* 2: trainer_spec */
    pb_byte(b, 2);
    pb_byte(b, 0x18); /* 3: model_type */
    pb_byte(b, (unsigned)type);
}

/* The encoders' work is linear in the text whatever the pieces' lengths: a 20,000-byte piece
 * (unigram, and sentencepiece BPE with it user-defined) used to make every position try every
 * length up to it, each lookup hashing that many bytes (a 4 KB prompt took 18 s). The work
 * counter (automaton steps, matches, hash lookups) must stay a small multiple of the bytes. */
static void test_long_piece_work(void) {
    enum { LONG = 20000 };
    static char text[LONG + 8];
    memset(text, 'a', sizeof text);
    for (int model = 1; model <= 2; model++) { /* 1 unigram, 2 BPE */
        pbuf b = {0};
        pb_piece(&b, "<unk>", 5, 0, 2);
        pb_piece(&b, "<s>", 3, 0, 3);
        pb_piece(&b, "</s>", 4, 0, 3);
        pb_piece(&b, "\xE2\x96\x81", 3, -1, 1);
        pb_piece(&b, "a", 1, -1, 1);
        pb_piece(&b, "b", 1, -2, 1);
        pb_piece(&b, text, LONG, -3, model == 1 ? 1 : 4); /* BPE: user-defined */
        pb_model_type(&b, model);
        etch_tokenizer_params p = etch_tokenizer_default_params();
        p.max_run_bytes = 2 * LONG;
        etch_tokenizer *t = NULL;
        CHECK_OK(etch_tokenizer_open_buffer(b.p, b.n, &p, &t));
        free(b.p);
        if (!t) continue;
        static int32_t ids[LONG + 8];
        size_t n = 0;
        /* 4000 bytes: the long piece does not fit, every char is "a" */
        uint64_t w0 = etch_tokenizer_encode_work(t);
        allocs = 0;
        armed = 1;
        CHECK_OK(etch_tokenizer_encode(t, text, 4000, 0, ids, LONG + 8, &n));
        armed = 0;
        CHECK(allocs == 0);
        uint64_t work = etch_tokenizer_encode_work(t) - w0;
        CHECK_MSG(work <= 16 * 4003, "%s: %llu steps of work for 4000 bytes",
                  model == 1 ? "unigram" : "BPE", (unsigned long long)work);
        CHECK(n == 4001 && ids[0] == 3 && ids[1] == 4 && ids[4000] == 4);
        printf("%s with a %d-byte piece: %llu steps of work for 4000 bytes\n",
               model == 1 ? "unigram" : "BPE", LONG, (unsigned long long)work);
        if (work > 16 * 4003) { /* the quadratic encoder: the long text would take minutes */
            etch_tokenizer_close(t);
            continue;
        }
        /* the long piece itself, inside a longer text: found, still linear */
        w0 = etch_tokenizer_encode_work(t);
        CHECK_OK(etch_tokenizer_encode(t, text, LONG + 1, 0, ids, LONG + 8, &n));
        work = etch_tokenizer_encode_work(t) - w0;
        CHECK_MSG(work <= 16 * (LONG + 4), "%s: %llu steps of work for %d bytes",
                  model == 1 ? "unigram" : "BPE", (unsigned long long)work, LONG + 1);
        CHECK_MSG(n == 3 && ids[0] == 3 && ids[1] == 6 && ids[2] == 4, "%s: %zu ids, %d %d",
                  model == 1 ? "unigram" : "BPE", n, (int)ids[0], (int)ids[1]);
        etch_tokenizer_close(t);
    }
}

/* Special tokens are found in the raw text in one pass as well: a 20,001-byte special used to
 * be compared at every position of a text of 'a's, and thousands of specials that share a
 * first byte were each compared wherever that byte occurs. */
static void test_special_work(void) {
    enum { LONG = 20000, N = 40000, MANY = 3000 };
    size_t cap = 2 * LONG + 64 * MANY + 1024, len = 0;
    char *j = malloc(cap);
    static char text[N];
    memset(text, 'a', sizeof text);
    len += (size_t)snprintf(j + len, cap - len, "{\"added_tokens\":[{\"id\":2,\"content\":\"");
    memset(j + len, 'a', LONG);
    len += LONG;
    len += (size_t)snprintf(j + len, cap - len, "b\",\"special\":true},"
                                                "{\"id\":3,\"content\":\"a\",\"special\":true}");
    for (int k = 0; k < MANY; k++)
        len += (size_t)snprintf(j + len, cap - len, ",{\"id\":%d,\"content\":\"<%d>\",\"special\":true}",
                                4 + k, k);
    len += (size_t)snprintf(j + len, cap - len,
                            "],\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"<\":1},\"merges\":[]}}");
    etch_tokenizer_params p = etch_tokenizer_default_params();
    p.max_run_bytes = N; /* no pre-tokenizer: the text between specials is one run */
    etch_tokenizer *t = NULL;
    CHECK_OK(etch_tokenizer_open_buffer(j, len, &p, &t));
    free(j);
    if (!t) return;
    static int32_t ids[N + 8];
    size_t n = 0;
    uint64_t w0 = etch_tokenizer_encode_work(t);
    allocs = 0;
    armed = 1;
    CHECK_OK(etch_tokenizer_encode(t, text, N, ETCH_TOKENIZER_PARSE_SPECIAL, ids, N + 8, &n));
    armed = 0;
    CHECK(allocs == 0);
    uint64_t work = etch_tokenizer_encode_work(t) - w0;
    CHECK_MSG(work <= 8 * N, "%llu steps of work for %d bytes", (unsigned long long)work, N);
    CHECK(n == N && ids[0] == 3 && ids[N - 1] == 3);
    printf("a %d-byte special: %llu steps of work for %d bytes\n", LONG + 1,
           (unsigned long long)work, N);
    /* the long one where it is, the others around it; without the flag, plain text */
    text[LONG] = 'b';
    CHECK_OK(etch_tokenizer_encode(t, text, LONG + 3, ETCH_TOKENIZER_PARSE_SPECIAL, ids, N + 8, &n));
    CHECK(n == 3 && ids[0] == 2 && ids[1] == 3 && ids[2] == 3);
    CHECK_OK(etch_tokenizer_encode(t, text, 4, 0, ids, N + 8, &n));
    CHECK(n == 4 && ids[0] == 0);
    /* 3000 specials behind '<': the text is '<' after '<' */
    memset(text, '<', N);
    memcpy(text + N - 6, "<2999>", 6);
    w0 = etch_tokenizer_encode_work(t);
    CHECK_OK(etch_tokenizer_encode(t, text, N, ETCH_TOKENIZER_PARSE_SPECIAL, ids, N + 8, &n));
    work = etch_tokenizer_encode_work(t) - w0;
    CHECK_MSG(work <= 8 * N, "%llu steps of work for %d bytes", (unsigned long long)work, N);
    CHECK(n == N - 5 && ids[0] == 1 && ids[N - 6] == 4 + 2999);
    printf("%d specials: %llu steps of work for %d bytes\n", MANY + 2, (unsigned long long)work, N);
    etch_tokenizer_close(t);
}

int main(int argc, char **argv) {
    snprintf(dir, sizeof dir, "%s", argc > 1 ? argv[1] : "../shared/fixtures/llm");
    test_fixtures();
    test_runs();
    test_hf_tiny();
    test_tiktoken_tiny();
    test_malformed();
    test_id_span();
    test_spm_piece_cap();
    test_long_piece_work();
    test_special_work();
    return etch_test_finish();
}
