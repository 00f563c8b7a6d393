/* Tokenizer internals shared by the format readers (llama2.c .bin, sentencepiece .model,
 * Hugging Face tokenizer.json, tiktoken ranks) and the common encode/decode code.
 *
 * Every format is loaded into one representation: a token table (bytes + score + type), a
 * hash from bytes to token id for the pieces that text may merge into, an optional pair table
 * (HF merges), special/added tokens matched in raw text, Aho-Corasick automata that find
 * pieces and specials in a text in one pass (tok_match.c), and a work buffer sized at open
 * that encode uses so that it never allocates. Tables are sized by the entries: ids far past
 * the entry count are refused (tok_check_id_span), and no format holds more than TOK_MAX_IDS. */
#ifndef ETCH_LLM_TOK_INTERNAL_H
#define ETCH_LLM_TOK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "etch/llm.h"

/* Every format holds at most this many ids (a table of 2^24 tokens is about 500 MB). */
#define TOK_MAX_IDS (1 << 24)

/* Tables are sized by the largest id, so ids must be about as many as the entries that use
 * them: a vocabulary may leave gaps (HF added tokens above the base vocabulary, a few unused
 * ids), at most max(entries, TOK_MAX_GAPS) unused ids. ETCH_OK, or an error that names the
 * file kind (what), the id and the entry count. */
#define TOK_MAX_GAPS 1024
etch_status tok_check_id_span(const char *what, long long max_id, size_t n_entries);

/* ---- load-time arena: a chain of malloc'd blocks, freed together at close ---- */
typedef struct tok_block tok_block;
typedef struct tok_arena {
    tok_block *head;
} tok_arena;
void *tok_arena_alloc(tok_arena *a, size_t size); /* zeroed, 16-byte aligned; NULL on OOM */
void tok_arena_free(tok_arena *a);

/* ---- bytes -> id hash (open addressing, power-of-two capacity, built once) ---- */
typedef struct tok_map {
    uint32_t *slots; /* id + 1, 0 = empty */
    uint32_t mask;
} tok_map;
uint64_t tok_hash(const void *data, size_t len);
uint64_t tok_hash2(const void *a, size_t alen, const void *b, size_t blen); /* hash of a||b */

/* (left id, right id) -> (rank, merged id) for HF merges. */
typedef struct tok_pair_slot {
    int32_t left, right, merged;
    uint32_t rank; /* UINT32_MAX = empty */
} tok_pair_slot;
typedef struct tok_pairs {
    tok_pair_slot *slots;
    uint32_t mask;
} tok_pairs;

/* Aho-Corasick automaton over a set of token strings (tok_match.c). */
typedef struct tok_ac {
    int32_t *parent, *fail;
    int32_t *dict;  /* the nearest node on the fail chain (self excluded) that ends a piece; -1 */
    int32_t *out;   /* the id of the piece ending at the node; -1 */
    uint32_t *depth;
    uint8_t *byte;  /* the edge byte from the parent */
    uint32_t *slots, mask; /* (parent, byte) -> child + 1; 0 empty */
    int32_t root[256];
    int32_t n_nodes; /* 0: not built */
} tok_ac;
/* Build over ids[0..n_ids) (texts of length >= 1; a text given twice keeps the first id). */
etch_status tok_ac_build(etch_tokenizer *t, tok_ac *ac, const int32_t *ids, int32_t n_ids);
/* The state after byte b; *work counts the transitions tried. */
int32_t tok_ac_step(const tok_ac *ac, int32_t state, uint8_t b, uint64_t *work);

/* ---- Unicode ---- */
enum { UC_OTHER = 0, UC_LU, UC_LL, UC_LT, UC_LM, UC_LO, UC_M, UC_N };
int tok_uc_class(uint32_t cp);
int tok_uc_is_space(uint32_t cp); /* JavaScript's \s (the reference pre-tokenizers' regex) */
/* Decode one code point at s[0..n) (n >= 1). Returns its byte length (1..4); invalid or
 * truncated sequences give *cp = 0xFFFD and length 1. */
int tok_utf8_next(const uint8_t *s, size_t n, uint32_t *cp);
/* Length of the valid sequence starting at s (1..4), or 0 when s[0..n) does not start with
 * a complete valid sequence. */
int tok_utf8_valid_len(const uint8_t *s, size_t n);
int tok_utf8_put(uint32_t cp, uint8_t *out);

/* ---- token table ---- */
enum {
    TT_NORMAL = 1,
    TT_UNKNOWN = 2,
    TT_CONTROL = 3,
    TT_USER_DEFINED = 4,
    TT_UNUSED = 5,
    TT_BYTE = 6,
    TT_SPECIAL = 7 /* HF added token or tiktoken special: matched in raw text, decoded as is */
};

typedef struct tok_token {
    uint32_t off, len; /* bytes in tok->strings; for sentencepiece the piece text (with U+2581) */
    float score;       /* sentencepiece/llama2.c score; rank for byte-level BPE */
    uint8_t type;      /* TT_* */
    uint8_t byte;      /* TT_BYTE: the byte value */
    uint8_t lstrip, rstrip; /* HF added tokens: swallow the whitespace beside a match */
    uint8_t always;         /* HF added token that is not special: matched without the flag */
} tok_token;

typedef enum tok_model {
    TOK_MODEL_BPE_SCORE, /* sentencepiece / llama2.c: merge the pair whose piece scores highest */
    TOK_MODEL_UNIGRAM,   /* sentencepiece unigram: Viterbi over piece scores */
    TOK_MODEL_BPE_RANK   /* byte-level BPE: HF merges (pair rank) or tiktoken (token rank) */
} tok_model;

/* The pre-tokenizer split rules, by the regex families that real tokenizers use. */
typedef enum tok_split {
    TOK_SPLIT_NONE = 0,
    TOK_SPLIT_GPT2,   /* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
    TOK_SPLIT_CL100K, /* llama3 / cl100k: contractions (ASCII case-insensitive), [^\r\n\p{L}\p{N}]?\p{L}+,
                         \p{N}{1,3}, punctuation + [\r\n]*, \s*[\r\n]+, \s+(?!\S), \s+ */
    TOK_SPLIT_QWEN2,  /* the cl100k family with single digits: \p{N} */
    TOK_SPLIT_O200K   /* o200k: case-aware words with contraction suffixes, [\r\n/]* after punctuation */
} tok_split;

struct etch_tokenizer {
    etch_tokenizer_format format;
    tok_model model;
    tok_arena arena;

    tok_token *tokens;
    int32_t n_tokens;
    uint8_t *strings; /* token bytes */
    uint32_t max_token_len;

    tok_map pieces;   /* bytes -> id for what text may become (normal/user-defined/unknown...) */
    tok_pairs pairs;  /* HF merges; empty for the others */
    int use_pairs;    /* BPE_RANK: 1 = pair table (HF), 0 = rank of the concatenation (tiktoken) */
    int whole_word;   /* BPE_RANK: a pre-token that is itself a token is emitted whole */

    int32_t byte_ids[256]; /* sentencepiece <0xNN> pieces, or byte-level single-byte tokens; -1 */
    int32_t unk_id, bos_id, eos_id, pad_id;
    float min_score, max_score; /* unigram: unknown penalty and user-defined scores */

    /* sentencepiece / llama2.c normalization */
    int add_dummy_prefix, remove_extra_ws, escape_ws, byte_fallback, strip_first_space;
    int spm_identity;      /* 0 if the model needs a normalizer we do not implement */
    int llama2c_chars;     /* split chars the llama2.c way (no U+FFFD replacement) */
    int can_cut;           /* no piece holds a space after a non-space: text can be cut there */
    int has_user_defined;
    const char *unk_surface;
    uint32_t unk_surface_len;

    /* specials matched in raw text (HF added tokens, tiktoken specials, spm control/user) */
    int32_t *specials; /* ids, longest first */
    int32_t n_specials;

    tok_split split;
    int utf8_policy; /* 0: sentencepiece (each bad byte -> U+FFFD), 1: WHATWG maximal subpart */

    /* piece automata: unigram, every piece of `pieces`; sentencepiece BPE, the user-defined
     * ones; specials: all of them (PARSE_SPECIAL) and those matched without the flag */
    tok_ac match;
    tok_ac spec_all, spec_always;
    uint8_t *len_present; /* bitmap: a piece of `pieces` has this many bytes (0..max_token_len) */
    uint32_t max_special_len;
    uint32_t *spec_ring_len; /* [max_special_len + 1] encode's window of special match starts */
    int32_t *spec_ring_id;
    /* work counter: automaton transitions, matches visited and hash lookups made by encode
     * (etch_tokenizer_encode_work) */
    uint64_t work_done;

    /* encode work buffer, sized at open */
    size_t chunk_cap; /* max bytes of one unbroken run (after normalization) */
    uint8_t *norm;    /* chunk_cap + 16 bytes */
    void *work;       /* symbols, heap, lattice */
};

static inline const uint8_t *tok_text(const etch_tokenizer *t, int32_t id) {
    return t->strings + t->tokens[id].off;
}

/* Might a piece of `pieces` have len bytes? (no when no piece has that length) */
static inline int tok_len_present(const etch_tokenizer *t, size_t len) {
    return len <= t->max_token_len && (t->len_present[len >> 3] >> (len & 7) & 1);
}

/* map helpers */
int tok_map_init(etch_tokenizer *t, tok_map *m, uint32_t n_items);
/* Insert id under its token bytes (keeps the first id for duplicate strings). */
void tok_map_put(const etch_tokenizer *t, tok_map *m, int32_t id);
int32_t tok_map_get(const etch_tokenizer *t, const tok_map *m, const void *s, size_t len);
int32_t tok_map_get2(const etch_tokenizer *t, const tok_map *m, const void *a, size_t alen,
                     const void *b, size_t blen); /* lookup of a||b */
int tok_pairs_init(etch_tokenizer *t, uint32_t n_items);
void tok_pairs_put(etch_tokenizer *t, int32_t left, int32_t right, uint32_t rank, int32_t merged);
const tok_pair_slot *tok_pairs_get(const etch_tokenizer *t, int32_t left, int32_t right);

/* Allocate token table and string storage in the arena. */
etch_status tok_alloc_tokens(etch_tokenizer *t, int32_t n, size_t string_bytes);
/* After the table is filled: work buffers, specials order, max_token_len. */
etch_status tok_finish(etch_tokenizer *t, const etch_tokenizer_params *p);

/* format readers: fill t from the bytes (which stay owned by the caller). */
etch_status tok_load_llama2c(etch_tokenizer *t, const uint8_t *data, size_t size);
etch_status tok_load_spm(etch_tokenizer *t, const uint8_t *data, size_t size);
etch_status tok_load_hf(etch_tokenizer *t, const uint8_t *data, size_t size);
etch_status tok_load_tiktoken(etch_tokenizer *t, const uint8_t *data, size_t size,
                              const etch_tokenizer_params *p);
int tok_looks_like_spm(const uint8_t *data, size_t size);

/* Identify a split regex; TOK_SPLIT_NONE when it is not one of the known families. */
tok_split tok_split_from_regex(const char *re, size_t len);
/* Length in bytes of the pre-token starting at s[0..n) (n >= 1; result >= 1). */
size_t tok_split_next(tok_split mode, const uint8_t *s, size_t n);

/* GPT-2 byte <-> unicode map (byte-level BPE). */
uint32_t tok_byte_to_unicode(uint8_t b);
int tok_unicode_to_byte(uint32_t cp); /* -1 if not in the map */

/* encoders (chunk = normalized bytes, at most chunk_cap) */
typedef struct tok_out {
    int32_t *ids;
    size_t cap, n;
} tok_out;
static inline void tok_emit(tok_out *o, int32_t id) {
    if (o->n < o->cap) o->ids[o->n] = id;
    o->n++;
}
void tok_bpe_chunk(etch_tokenizer *t, const uint8_t *s, size_t n, tok_out *out);
void tok_unigram_chunk(etch_tokenizer *t, const uint8_t *s, size_t n, tok_out *out);
size_t tok_work_bytes(size_t chunk_cap);

#endif
