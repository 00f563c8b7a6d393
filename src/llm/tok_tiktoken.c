/* tiktoken rank files: one "<base64 bytes> <rank>" per line; the rank is the token id and
 * the merge priority (a pair merges into the token of the lowest rank). Special tokens are
 * not in the file: the caller gives them (etch_tokenizer_params.specials). */
#include <stdlib.h>
#include <string.h>

#include "llm/tok_internal.h"
#include "runtime/error.h"

static int b64v(uint8_t c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Decode base64 s[0..n) into out (may be NULL to count); -1 if malformed. */
static long b64(const uint8_t *s, size_t n, uint8_t *out) {
    uint32_t acc = 0;
    int bits = 0;
    long o = 0;
    size_t i = 0;
    for (; i < n && s[i] != '='; i++) {
        int v = b64v(s[i]);
        if (v < 0) return -1;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (out) out[o] = (uint8_t)(acc >> bits);
            o++;
        }
    }
    for (; i < n; i++)
        if (s[i] != '=') return -1;
    return o;
}

typedef struct line {
    const uint8_t *tok;
    size_t tok_len;
    long long rank;
} line;

/* Parse the line at *p; 1 ok, 0 end, -1 malformed. Blank lines are skipped. */
static int next_line(const uint8_t **p, const uint8_t *end, line *l) {
    const uint8_t *s = *p;
    while (s < end && (*s == '\n' || *s == '\r')) s++;
    if (s >= end) {
        *p = s;
        return 0;
    }
    const uint8_t *e = memchr(s, '\n', (size_t)(end - s));
    if (!e) e = end;
    const uint8_t *sp = memchr(s, ' ', (size_t)(e - s));
    *p = e;
    if (!sp || sp == s) return -1;
    l->tok = s;
    l->tok_len = (size_t)(sp - s);
    long long r = 0;
    const uint8_t *q = sp + 1;
    if (q >= e || *q < '0' || *q > '9') return -1;
    while (q < e && *q >= '0' && *q <= '9') {
        r = r * 10 + (*q - '0');
        if (r >= TOK_MAX_IDS) return -1;
        q++;
    }
    while (q < e && (*q == '\r' || *q == ' ')) q++;
    if (q != e) return -1;
    l->rank = r;
    return 1;
}

int tok_looks_like_tiktoken(const uint8_t *d, size_t size);
int tok_looks_like_tiktoken(const uint8_t *d, size_t size) {
    const uint8_t *p = d, *end = d + (size < 4096 ? size : 4096);
    line l;
    int ok = 0;
    for (int k = 0; k < 3; k++) {
        const uint8_t *before = p;
        int r = next_line(&p, end, &l);
        if (r == 0) break;
        if (r < 0) return ok && p == end && before != d ? ok : 0; /* a line cut by the window */
        if (b64(l.tok, l.tok_len, NULL) <= 0) return 0;
        ok = 1;
    }
    return ok;
}

etch_status tok_load_tiktoken(etch_tokenizer *t, const uint8_t *d, size_t size,
                              const etch_tokenizer_params *p) {
    const uint8_t *q = d, *end = d + size;
    line l;
    int r;
    long long maxr = -1;
    size_t bytes = 0, n_lines = 0;
    while ((r = next_line(&q, end, &l)) == 1) {
        long bl = b64(l.tok, l.tok_len, NULL);
        if (bl <= 0)
            return etch_err(ETCH_ERR_INVALID_PROGRAM, "tiktoken: bad base64 at byte %zu",
                            (size_t)(l.tok - d));
        bytes += (size_t)bl;
        if (l.rank > maxr) maxr = l.rank;
        n_lines++;
    }
    if (r < 0) return etch_err(ETCH_ERR_INVALID_PROGRAM, "tiktoken: malformed line before byte %zu", (size_t)(q - d));
    if (n_lines == 0) return etch_err(ETCH_ERR_INVALID_PROGRAM, "tiktoken: no ranks");
    long long n_ranks = maxr + 1;
    long long n = n_ranks;
    for (size_t i = 0; i < p->n_specials; i++) {
        if (!p->specials[i].text || p->specials[i].id < 0 || p->specials[i].id >= TOK_MAX_IDS)
            return etch_err(ETCH_ERR_INVALID_ARGUMENT, "tiktoken: special token %zu is invalid", i);
        bytes += strlen(p->specials[i].text);
        if (p->specials[i].id >= n) n = p->specials[i].id + 1;
    }
    /* ranks are dense (0 .. lines-1 in every published file), specials follow them */
    etch_status st = tok_check_id_span("tiktoken", n - 1, n_lines + p->n_specials);
    if (st != ETCH_OK) return st;
    st = tok_alloc_tokens(t, (int32_t)n, bytes);
    if (st != ETCH_OK) return st;
    for (int32_t i = 0; i < t->n_tokens; i++) t->tokens[i].type = TT_UNUSED;
    size_t so = 0;
    q = d;
    while (next_line(&q, end, &l) == 1) {
        tok_token *tk = &t->tokens[l.rank];
        long bl = b64(l.tok, l.tok_len, t->strings + so);
        tk->off = (uint32_t)so;
        tk->len = (uint32_t)bl;
        tk->score = (float)l.rank;
        tk->type = TT_NORMAL;
        so += (size_t)bl;
    }
    for (size_t i = 0; i < p->n_specials; i++) {
        tok_token *tk = &t->tokens[p->specials[i].id];
        size_t sl = strlen(p->specials[i].text);
        memcpy(t->strings + so, p->specials[i].text, sl);
        tk->off = (uint32_t)so;
        tk->len = (uint32_t)sl;
        tk->type = TT_SPECIAL;
        so += sl;
    }
    if (!tok_map_init(t, &t->pieces, (uint32_t)t->n_tokens))
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "tiktoken: out of memory");
    for (int32_t i = 0; i < t->n_tokens; i++)
        if (t->tokens[i].type == TT_NORMAL) tok_map_put(t, &t->pieces, i);
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        t->byte_ids[b] = tok_map_get(t, &t->pieces, &c, 1);
    }
    switch (p->split) {
    case ETCH_TOKENIZER_SPLIT_GPT2: t->split = TOK_SPLIT_GPT2; break;
    case ETCH_TOKENIZER_SPLIT_CL100K: t->split = TOK_SPLIT_CL100K; break;
    case ETCH_TOKENIZER_SPLIT_QWEN2: t->split = TOK_SPLIT_QWEN2; break;
    case ETCH_TOKENIZER_SPLIT_O200K: t->split = TOK_SPLIT_O200K; break;
    default:
        t->split = n_ranks < 60000 ? TOK_SPLIT_GPT2 : n_ranks < 150000 ? TOK_SPLIT_CL100K : TOK_SPLIT_O200K;
    }
    static const char *const bos_names[] = {"<|begin_of_text|>", "<|startoftext|>", NULL};
    static const char *const eos_names[] = {"<|end_of_text|>", "<|endoftext|>", NULL};
    for (int k = 0; bos_names[k] && t->bos_id < 0; k++)
        for (size_t i = 0; i < p->n_specials; i++)
            if (strcmp(p->specials[i].text, bos_names[k]) == 0) t->bos_id = p->specials[i].id;
    for (int k = 0; eos_names[k] && t->eos_id < 0; k++)
        for (size_t i = 0; i < p->n_specials; i++)
            if (strcmp(p->specials[i].text, eos_names[k]) == 0) t->eos_id = p->specials[i].id;
    t->model = TOK_MODEL_BPE_RANK;
    t->use_pairs = 0;
    t->whole_word = 1;
    t->utf8_policy = 1;
    return ETCH_OK;
}
