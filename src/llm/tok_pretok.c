/* Pre-tokenizer splits for byte-level BPE, written by hand for the regex families real
 * tokenizers use (see tok_split in tok_internal.h). Each function returns the byte length of
 * the piece that the regex would match at the start of s, following the regex engine's rules:
 * alternatives in order, greedy quantifiers that give back one character at a time.
 * \s is ECMAScript's (the reference implementations are JavaScript), \p{L}, \p{N}, \p{M}
 * come from unicode_tables.inc. */
#include <string.h>

#include "llm/tok_internal.h"
#include "runtime/error.h"

typedef struct cur {
    const uint8_t *s;
    size_t n;
} cur;

/* code point at byte offset i; *l its length (0 at the end) */
static uint32_t at(const cur *c, size_t i, size_t *l) {
    if (i >= c->n) {
        *l = 0;
        return 0xFFFFFFFFu;
    }
    uint32_t cp;
    *l = (size_t)tok_utf8_next(c->s + i, c->n - i, &cp);
    if (cp == 0xFFFD && c->s[i] != 0xEF) cp = 0xFFFFFFFEu; /* a bad byte: punctuation-like */
    return cp;
}

static int is_L(uint32_t cp) {
    if (cp >= 0x110000) return 0;
    int k = tok_uc_class(cp);
    return k >= UC_LU && k <= UC_LO;
}
static int is_N(uint32_t cp) { return cp < 0x110000 && tok_uc_class(cp) == UC_N; }
static int is_S(uint32_t cp) { return cp < 0x110000 && tok_uc_is_space(cp); }
static int is_P(uint32_t cp) { return cp != 0xFFFFFFFFu && !is_S(cp) && !is_L(cp) && !is_N(cp); }
static int is_nl(uint32_t cp) { return cp == '\r' || cp == '\n'; }

/* o200k's classes: A = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], B = [\p{Ll}\p{Lm}\p{Lo}\p{M}] */
static int is_A(uint32_t cp) {
    if (cp >= 0x110000) return 0;
    int k = tok_uc_class(cp);
    return k == UC_LU || k == UC_LT || k == UC_LM || k == UC_LO || k == UC_M;
}
static int is_B(uint32_t cp) {
    if (cp >= 0x110000) return 0;
    int k = tok_uc_class(cp);
    return k == UC_LL || k == UC_LM || k == UC_LO || k == UC_M;
}

static size_t run(const cur *c, size_t i, int (*pred)(uint32_t)) {
    size_t l;
    while (pred(at(c, i, &l))) i += l;
    return i;
}

/* 's 't 're 've 'm 'll 'd at i (i points at the apostrophe); returns the end or 0 */
static size_t contraction(const cur *c, size_t i, int any_case) {
    if (i >= c->n || c->s[i] != '\'') return 0;
    static const char *const forms[] = {"s", "t", "re", "ve", "m", "ll", "d"};
    for (int f = 0; f < 7; f++) {
        size_t k = 0, j = i + 1;
        const char *w = forms[f];
        for (; w[k]; k++, j++) {
            if (j >= c->n) break;
            uint8_t b = c->s[j];
            if (any_case ? (b | 0x20) != (uint8_t)w[k] || !((b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z'))
                         : b != (uint8_t)w[k])
                break;
        }
        if (!w[k]) return j;
    }
    return 0;
}

/* \s*[\r\n]+ | \s+(?!\S) | \s+ at i where s[i] is whitespace (with_nl: the first rule) */
static size_t spaces(const cur *c, size_t i, int with_nl) {
    size_t l, j = i, last_nl_end = 0, last_start = i;
    uint32_t cp;
    while (is_S(cp = at(c, j, &l))) {
        last_start = j;
        j += l;
        if (is_nl(cp)) last_nl_end = j;
    }
    if (with_nl && last_nl_end) return last_nl_end;
    if (j >= c->n) return j;       /* \s+ up to the end */
    if (last_start > i) return last_start; /* give back one so that (?!\S) holds */
    return j;                      /* \s+ : the single whitespace */
}

static size_t split_gpt2(const cur *c) {
    size_t l0, l1;
    uint32_t c0 = at(c, 0, &l0), c1 = at(c, l0, &l1);
    size_t e = contraction(c, 0, 0);
    if (e) return e;
    if (is_L(c0)) return run(c, 0, is_L);
    if (c0 == ' ' && is_L(c1)) return run(c, l0, is_L);
    if (is_N(c0)) return run(c, 0, is_N);
    if (c0 == ' ' && is_N(c1)) return run(c, l0, is_N);
    if (is_P(c0)) return run(c, 0, is_P);
    if (c0 == ' ' && is_P(c1)) return run(c, l0, is_P);
    return spaces(c, 0, 0);
}

static size_t split_cl100k(const cur *c, int max_digits) {
    size_t l0, l1, l;
    uint32_t c0 = at(c, 0, &l0), c1 = at(c, l0, &l1);
    size_t e = contraction(c, 0, 1);
    if (e) return e;
    if (is_L(c0)) return run(c, 0, is_L);
    if (!is_nl(c0) && !is_N(c0) && is_L(c1)) return run(c, l0, is_L);
    if (is_N(c0)) {
        size_t j = 0;
        for (int k = 0; k < max_digits && is_N(at(c, j, &l)); k++) j += l;
        return j;
    }
    size_t p = (c0 == ' ' && is_P(c1)) ? l0 : 0;
    if (is_P(at(c, p, &l))) {
        size_t j = run(c, p, is_P);
        return run(c, j, is_nl);
    }
    return spaces(c, 0, 1);
}

static int is_nl_or_slash(uint32_t cp) { return cp == '\r' || cp == '\n' || cp == '/'; }

static size_t split_o200k(const cur *c) {
    size_t l0, l1, l;
    uint32_t c0 = at(c, 0, &l0), c1 = at(c, l0, &l1);
    (void)c1;
    int prefix_ok = c0 != 0xFFFFFFFFu && !is_nl(c0) && !is_L(c0) && !is_N(c0);
    /* alternative 1: prefix? A* B+ contraction? */
    for (int p = prefix_ok ? 1 : 0; p >= 0; p--) {
        size_t st = p ? l0 : 0, j = st, best = (size_t)-1;
        uint32_t cp;
        while (is_A(cp = at(c, j, &l))) {
            if (is_B(cp)) best = j; /* A and B: a place B+ may start when A* gives back */
            j += l;
        }
        if (is_B(at(c, j, &l))) best = j; /* A* took everything, B+ starts after it */
        if (best == (size_t)-1) continue;
        size_t e = run(c, best, is_B);
        size_t k = contraction(c, e, 1);
        return k ? k : e;
    }
    /* alternative 2: prefix? A+ B* contraction? */
    for (int p = prefix_ok ? 1 : 0; p >= 0; p--) {
        size_t st = p ? l0 : 0;
        size_t j = run(c, st, is_A);
        if (j == st) continue;
        size_t e = run(c, j, is_B);
        size_t k = contraction(c, e, 1);
        return k ? k : e;
    }
    if (is_N(c0)) {
        size_t j = 0;
        for (int k = 0; k < 3 && is_N(at(c, j, &l)); k++) j += l;
        return j;
    }
    size_t p = (c0 == ' ' && is_P(at(c, l0, &l))) ? l0 : 0;
    if (is_P(at(c, p, &l))) {
        size_t j = run(c, p, is_P);
        return run(c, j, is_nl_or_slash);
    }
    return spaces(c, 0, 1);
}

size_t tok_split_next(tok_split mode, const uint8_t *s, size_t n) {
    cur c = {s, n};
    size_t r;
    switch (mode) {
    case TOK_SPLIT_GPT2: r = split_gpt2(&c); break;
    case TOK_SPLIT_CL100K: r = split_cl100k(&c, 3); break;
    case TOK_SPLIT_QWEN2: r = split_cl100k(&c, 1); break;
    case TOK_SPLIT_O200K: r = split_o200k(&c); break;
    default: r = n; break;
    }
    if (r == 0) { /* cannot happen by the rules above; never loop */
        size_t l;
        at(&c, 0, &l);
        r = l ? l : 1;
    }
    return r;
}

/* The regexes as tokenizer.json and tiktoken write them. */
static const struct {
    const char *re;
    tok_split mode;
} known[] = {
    {"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
     TOK_SPLIT_GPT2},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     TOK_SPLIT_CL100K},
    {"('s|'S|'t|'T|'re|'rE|'Re|'RE|'ve|'vE|'Ve|'VE|'m|'M|'ll|'lL|'Ll|'LL|'d|'D)|[^\\r\\n\\p{L}"
     "\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     TOK_SPLIT_CL100K},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     TOK_SPLIT_QWEN2},
    {"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+("
     "?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+["
     "\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| "
     "?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     TOK_SPLIT_O200K},
};

tok_split tok_split_from_regex(const char *re, size_t len) {
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strlen(known[i].re) == len && memcmp(known[i].re, re, len) == 0) return known[i].mode;
    return TOK_SPLIT_NONE;
}

size_t tok_pretok_encode(etch_tokenizer *t, const uint8_t *s, size_t n, tok_out *out,
                         etch_status *st);
size_t tok_pretok_encode(etch_tokenizer *t, const uint8_t *s, size_t n, tok_out *out,
                         etch_status *st) {
    size_t pos = 0;
    while (pos < n) {
        size_t l = t->split == TOK_SPLIT_NONE ? n - pos : tok_split_next(t->split, s + pos, n - pos);
        if (l > t->chunk_cap) {
            *st = etch_err(ETCH_ERR_NOT_SUPPORTED,
                           "tokenizer: a pre-token of %zu bytes exceeds the work buffer (%zu; "
                           "raise etch_tokenizer_params.max_run_bytes)",
                           l, t->chunk_cap);
            return pos;
        }
        tok_bpe_chunk(t, s + pos, l, out);
        pos += l;
    }
    return pos;
}
