/* Load-time arena, hashes, UTF-8 and Unicode class helpers for the tokenizers. */
#include <stdlib.h>
#include <string.h>

#include "llm/tok_internal.h"

int etch_llm_api_version(void) { return 2; }

/* ---------------------------------------------------------------- arena */

struct tok_block {
    tok_block *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
};

void *tok_arena_alloc(tok_arena *a, size_t size) {
    size = (size + 15) & ~(size_t)15;
    tok_block *b = a->head;
    if (!b || b->size - b->used < size) {
        size_t cap = size > (1u << 20) ? size : (1u << 20);
        b = malloc(sizeof(tok_block) + cap);
        if (!b) return NULL;
        b->next = a->head;
        b->size = cap;
        b->used = 0;
        a->head = b;
    }
    void *p = b->data + b->used;
    b->used += size;
    memset(p, 0, size);
    return p;
}

void tok_arena_free(tok_arena *a) {
    tok_block *b = a->head;
    while (b) {
        tok_block *n = b->next;
        free(b);
        b = n;
    }
    a->head = NULL;
}

/* ---------------------------------------------------------------- hashing */

/* FNV-1a over 64 bits with a final avalanche (splitmix64's finalizer). */
static uint64_t fnv_step(uint64_t h, const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001B3ull;
    }
    return h;
}
static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
uint64_t tok_hash(const void *data, size_t len) {
    return mix64(fnv_step(0xCBF29CE484222325ull, data, len));
}
uint64_t tok_hash2(const void *a, size_t alen, const void *b, size_t blen) {
    return mix64(fnv_step(fnv_step(0xCBF29CE484222325ull, a, alen), b, blen));
}

/* A power of two >= 2 n + 1 (at least 16), or 0 when n is beyond any table we build (the
 * loaders cap their ids at TOK_MAX_IDS; this only keeps the loop finite). */
static uint32_t table_cap(uint32_t n) {
    uint64_t need = 2 * (uint64_t)n + 1, c = 16;
    if (n > 2u * TOK_MAX_IDS) return 0;
    while (c < need) c <<= 1;
    return (uint32_t)c;
}

int tok_map_init(etch_tokenizer *t, tok_map *m, uint32_t n_items) {
    uint32_t cap = table_cap(n_items);
    if (!cap) return 0;
    m->slots = tok_arena_alloc(&t->arena, (size_t)cap * sizeof(uint32_t));
    m->mask = cap - 1;
    return m->slots != NULL;
}

void tok_map_put(const etch_tokenizer *t, tok_map *m, int32_t id) {
    const uint8_t *s = tok_text(t, id);
    uint32_t len = t->tokens[id].len;
    uint32_t i = (uint32_t)tok_hash(s, len) & m->mask;
    for (;;) {
        uint32_t v = m->slots[i];
        if (v == 0) {
            m->slots[i] = (uint32_t)id + 1;
            return;
        }
        const tok_token *o = &t->tokens[v - 1];
        if (o->len == len && memcmp(t->strings + o->off, s, len) == 0) return;
        i = (i + 1) & m->mask;
    }
}

static int32_t map_probe(const etch_tokenizer *t, const tok_map *m, uint64_t h,
                         const uint8_t *a, size_t alen, const uint8_t *b, size_t blen) {
    if (!m->slots) return -1;
    uint32_t i = (uint32_t)h & m->mask;
    size_t len = alen + blen;
    for (;;) {
        uint32_t v = m->slots[i];
        if (v == 0) return -1;
        const tok_token *o = &t->tokens[v - 1];
        if (o->len == len) {
            const uint8_t *s = t->strings + o->off;
            if (memcmp(s, a, alen) == 0 && (blen == 0 || memcmp(s + alen, b, blen) == 0))
                return (int32_t)v - 1;
        }
        i = (i + 1) & m->mask;
    }
}

int32_t tok_map_get(const etch_tokenizer *t, const tok_map *m, const void *s, size_t len) {
    return map_probe(t, m, tok_hash(s, len), s, len, NULL, 0);
}

int32_t tok_map_get2(const etch_tokenizer *t, const tok_map *m, const void *a, size_t alen,
                     const void *b, size_t blen) {
    return map_probe(t, m, tok_hash2(a, alen, b, blen), a, alen, b, blen);
}

int tok_pairs_init(etch_tokenizer *t, uint32_t n_items) {
    uint32_t cap = table_cap(n_items);
    if (!cap) return 0;
    t->pairs.slots = tok_arena_alloc(&t->arena, (size_t)cap * sizeof(tok_pair_slot));
    if (!t->pairs.slots) return 0;
    t->pairs.mask = cap - 1;
    for (uint32_t i = 0; i < cap; i++) t->pairs.slots[i].rank = UINT32_MAX;
    return 1;
}

static uint32_t pair_hash(int32_t l, int32_t r) {
    return (uint32_t)mix64(((uint64_t)(uint32_t)l << 32) | (uint32_t)r);
}

void tok_pairs_put(etch_tokenizer *t, int32_t left, int32_t right, uint32_t rank, int32_t merged) {
    uint32_t i = pair_hash(left, right) & t->pairs.mask;
    for (;;) {
        tok_pair_slot *s = &t->pairs.slots[i];
        if (s->rank == UINT32_MAX) {
            s->left = left;
            s->right = right;
            s->rank = rank;
            s->merged = merged;
            return;
        }
        if (s->left == left && s->right == right) return; /* first rank wins */
        i = (i + 1) & t->pairs.mask;
    }
}

const tok_pair_slot *tok_pairs_get(const etch_tokenizer *t, int32_t left, int32_t right) {
    uint32_t i = pair_hash(left, right) & t->pairs.mask;
    for (;;) {
        const tok_pair_slot *s = &t->pairs.slots[i];
        if (s->rank == UINT32_MAX) return NULL;
        if (s->left == left && s->right == right) return s;
        i = (i + 1) & t->pairs.mask;
    }
}

/* ---------------------------------------------------------------- UTF-8 */

int tok_utf8_valid_len(const uint8_t *s, size_t n) {
    uint8_t c = s[0];
    if (c < 0x80) return 1;
    int len;
    uint8_t lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else
        return 0;
    if (n < (size_t)len) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (int i = 2; i < len; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    return len;
}

int tok_utf8_next(const uint8_t *s, size_t n, uint32_t *cp) {
    int len = tok_utf8_valid_len(s, n);
    switch (len) {
    case 1: *cp = s[0]; return 1;
    case 2: *cp = ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F); return 2;
    case 3:
        *cp = ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
        return 3;
    case 4:
        *cp = ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
              ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
        return 4;
    default: *cp = 0xFFFD; return 1;
    }
}

int tok_utf8_put(uint32_t cp, uint8_t *o) {
    if (cp < 0x80) {
        o[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (uint8_t)(0xC0 | (cp >> 6));
        o[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | (cp >> 12));
        o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | (cp >> 18));
    o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---------------------------------------------------------------- Unicode classes */

typedef struct uc_range {
    uint32_t lo, hi;
    uint8_t cls;
} uc_range;

#include "llm/unicode_tables.inc"

int tok_uc_class(uint32_t cp) {
    if (cp < 0x80) {
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return cp >= 'a' ? UC_LL : UC_LU;
        if (cp >= '0' && cp <= '9') return UC_N;
        return UC_OTHER;
    }
    size_t lo = 0, hi = sizeof uc_ranges / sizeof uc_ranges[0];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < uc_ranges[mid].lo) hi = mid;
        else if (cp > uc_ranges[mid].hi) lo = mid + 1;
        else return uc_ranges[mid].cls;
    }
    return UC_OTHER;
}

int tok_uc_is_space(uint32_t cp) {
    /* ECMAScript WhiteSpace + LineTerminator: what \s means in the reference regexes. */
    if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return 1;
    if (cp < 0xA0) return 0;
    return cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000 || cp == 0xFEFF;
}

/* ---------------------------------------------------------------- GPT-2 byte map */

/* Printable bytes map to themselves; the others, in order, to U+0100 + k. */
static int byte_printable(unsigned b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
}

uint32_t tok_byte_to_unicode(uint8_t b) {
    if (byte_printable(b)) return b;
    uint32_t k = 0;
    for (unsigned i = 0; i < b; i++)
        if (!byte_printable(i)) k++;
    return 0x100 + k;
}

int tok_unicode_to_byte(uint32_t cp) {
    if (cp < 0x100) return byte_printable(cp) ? (int)cp : -1;
    if (cp >= 0x100 + 68) return -1;
    uint32_t k = cp - 0x100;
    for (unsigned i = 0; i < 256; i++)
        if (!byte_printable(i) && k-- == 0) return (int)i;
    return -1;
}
