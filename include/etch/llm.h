/*
 * etch/llm.h — language-model helpers: tokenizers and sampling.
 *
 * Basic usage:
 *
 *   etch_tokenizer *tok;
 *   if (etch_tokenizer_open_file("tokenizer.model", NULL, &tok) != ETCH_OK)
 *       fprintf(stderr, "%s\n", etch_last_error());
 *
 *   int32_t ids[512];
 *   size_t n;
 *   etch_status st = etch_tokenizer_encode(tok, text, strlen(text), ETCH_TOKENIZER_ADD_BOS,
 *                                          ids, 512, &n);
 *   // st == ETCH_ERR_OUT_OF_RESOURCES: n is the count needed; ids holds the first 512
 *
 *   etch_sampler_params sp = etch_sampler_default_params();
 *   sp.temperature = 0.8f; sp.top_p = 0.9f; sp.seed = 42;
 *   etch_sampler *smp;
 *   etch_sampler_open(&sp, etch_tokenizer_vocab_size(tok), &smp);
 *
 *   etch_detokenizer dt;
 *   etch_detokenizer_init(&dt, tok);
 *   for (;;) {
 *       float *logits = ...;                              // one row of the model's output
 *       int32_t id = etch_sampler_sample(smp, logits, vocab);  // overwrites logits
 *       if (id == etch_tokenizer_eos_id(tok)) break;
 *       char text[ETCH_DETOKENIZER_MAX_OUT];              // or etch_detokenizer_max_output()
 *       size_t len;
 *       etch_detokenizer_feed(&dt, id, text, sizeof text, &len);  // whole code points only
 *       fwrite(text, 1, len, stdout);
 *   }
 *   // etch_detokenizer_flush(&dt, ...) writes what an unfinished byte sequence leaves
 *   etch_sampler_close(smp);
 *   etch_tokenizer_close(tok);
 *
 * Memory: a tokenizer allocates once, at open (its tables and an encode work buffer sized by
 * etch_tokenizer_params.max_run_bytes). Encode and decode write into the caller's buffers and
 * never allocate. A tokenizer may be shared by threads for decoding; encoding uses its work
 * buffer, so encode with one tokenizer on one thread at a time. The sampler allocates once at
 * open and never per token.
 */
#ifndef ETCH_LLM_H
#define ETCH_LLM_H

#include <stddef.h>
#include <stdint.h>

#include "etch/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Version of the llm API section; bumped when the tokenizer/sampler API changes (2: added
 * etch_tokenizer_encode_work). */
int etch_llm_api_version(void);

/* ================================ tokenizers ================================ */

typedef struct etch_tokenizer etch_tokenizer;

typedef enum etch_tokenizer_format {
    ETCH_TOKENIZER_AUTO = 0,     /* detect from the bytes */
    ETCH_TOKENIZER_LLAMA2C,      /* llama2.c tokenizer.bin: max_token_length, then per token
                                    float score, int32 len, bytes; BOS 1, EOS 2 */
    ETCH_TOKENIZER_SENTENCEPIECE, /* sentencepiece ModelProto (.model): BPE or unigram */
    ETCH_TOKENIZER_HF_JSON,      /* Hugging Face tokenizer.json, byte-level BPE */
    ETCH_TOKENIZER_TIKTOKEN      /* tiktoken ranks: "<base64 token> <rank>" per line */
} etch_tokenizer_format;

/* The split regex of a byte-level tokenizer (HF's is read from tokenizer.json). */
typedef enum etch_tokenizer_split {
    ETCH_TOKENIZER_SPLIT_AUTO = 0, /* tiktoken: from the vocabulary size (50k: gpt2,
                                      100k and 128k: cl100k/llama3, 200k: o200k) */
    ETCH_TOKENIZER_SPLIT_GPT2,
    ETCH_TOKENIZER_SPLIT_CL100K, /* also llama3 */
    ETCH_TOKENIZER_SPLIT_QWEN2,  /* cl100k with single digits */
    ETCH_TOKENIZER_SPLIT_O200K
} etch_tokenizer_split;

/* A special token given by the caller (tiktoken files carry none). */
typedef struct etch_tokenizer_special {
    const char *text; /* NUL-terminated, copied at open */
    int32_t id;
} etch_tokenizer_special;

typedef struct etch_tokenizer_params {
    etch_tokenizer_format format;    /* ETCH_TOKENIZER_AUTO */
    etch_tokenizer_split split;      /* tiktoken only; ETCH_TOKENIZER_SPLIT_AUTO */
    const etch_tokenizer_special *specials; /* tiktoken: its special tokens; NULL */
    size_t n_specials;
    int32_t bos_id, eos_id;          /* -1: from the file (or the format's convention) */
    /* Longest unbroken run encode handles at once: a word (byte-level BPE) or the text
     * between two spaces (sentencepiece); longer runs fail with ETCH_ERR_NOT_SUPPORTED.
     * The work buffer is about 56 bytes per byte of this. Default 16384. */
    size_t max_run_bytes;
} etch_tokenizer_params;

etch_tokenizer_params etch_tokenizer_default_params(void);

/* Open from a file or from bytes (copied; the buffer may be freed after the call). params
 * may be NULL for the defaults. Formats: see etch_tokenizer_format; detection: a JSON object
 * is tokenizer.json, base64 lines with ranks are tiktoken, a protobuf whose first field is a
 * piece is sentencepiece, anything else that parses as llama2.c's layout is llama2.c.
 * Errors: ETCH_ERR_ACCESS_FAILED (file), ETCH_ERR_INVALID_PROGRAM (malformed bytes, with the
 * byte offset in etch_last_error), ETCH_ERR_NOT_SUPPORTED (a valid file that uses a feature
 * not implemented, e.g. a sentencepiece normalization rule other than identity). */
etch_status etch_tokenizer_open_file(const char *path, const etch_tokenizer_params *params,
                                     etch_tokenizer **out);
etch_status etch_tokenizer_open_buffer(const void *data, size_t size,
                                       const etch_tokenizer_params *params,
                                       etch_tokenizer **out);
void etch_tokenizer_close(etch_tokenizer *tok); /* NULL is fine */

etch_tokenizer_format etch_tokenizer_get_format(const etch_tokenizer *tok);
int32_t etch_tokenizer_vocab_size(const etch_tokenizer *tok); /* ids are 0 .. size-1 */
int32_t etch_tokenizer_bos_id(const etch_tokenizer *tok);     /* -1 if none */
int32_t etch_tokenizer_eos_id(const etch_tokenizer *tok);     /* -1 if none */
/* The id whose text (as stored: sentencepiece pieces keep U+2581, byte-level tokens are raw
 * bytes, specials their text) equals s[0..len), or -1. */
int32_t etch_tokenizer_token_to_id(const etch_tokenizer *tok, const char *s, size_t len);
/* The stored text of a token (see token_to_id), not NUL-terminated; NULL for a bad id. */
const char *etch_tokenizer_token_text(const etch_tokenizer *tok, int32_t id, size_t *len);

enum {
    ETCH_TOKENIZER_ADD_BOS = 1u << 0,
    ETCH_TOKENIZER_ADD_EOS = 1u << 1,
    /* Match special tokens (HF special added tokens, tiktoken specials, sentencepiece control
     * pieces) where they appear in the text. Without it they are plain text. HF added tokens
     * that are not special are always matched, as in Hugging Face. */
    ETCH_TOKENIZER_PARSE_SPECIAL = 1u << 2
};

/* Encode text[0..len) (UTF-8; invalid bytes are handled like the reference: U+FFFD for
 * sentencepiece, raw bytes for byte-level BPE). Writes at most cap ids and sets *n_ids to
 * the full count; returns ETCH_ERR_OUT_OF_RESOURCES when that count exceeds cap.
 * ETCH_ERR_NOT_SUPPORTED when an unbroken run exceeds params.max_run_bytes. */
etch_status etch_tokenizer_encode(etch_tokenizer *tok, const char *text, size_t len,
                                  uint32_t flags, int32_t *ids, size_t cap, size_t *n_ids);

/* Decode a whole sequence as the reference implementation does: sentencepiece skips control
 * pieces, writes unk as its surface, drops the first piece's leading space when the model adds
 * a dummy prefix, and replaces each byte of a bad UTF-8 sequence with U+FFFD; byte-level
 * tokenizers join the token bytes and replace bad sequences WHATWG-style (one U+FFFD per
 * maximal subpart). Writes at most cap bytes (no NUL), *len is the full length;
 * ETCH_ERR_OUT_OF_RESOURCES when it exceeds cap. */
etch_status etch_tokenizer_decode(const etch_tokenizer *tok, const int32_t *ids, size_t n,
                                  char *buf, size_t cap, size_t *len);

/* The raw bytes one token adds after prev_id (-1 at the start), llama2.c's rule: a piece's
 * leading space is dropped after BOS or at the start when the model adds a dummy prefix;
 * byte pieces give their single byte (possibly part of a UTF-8 sequence); control pieces
 * give nothing. Use etch_detokenizer for text that is safe to print. */
etch_status etch_tokenizer_decode_token(const etch_tokenizer *tok, int32_t prev_id, int32_t id,
                                        char *buf, size_t cap, size_t *len);

/* Longest token in bytes. */
size_t etch_tokenizer_max_token_bytes(const etch_tokenizer *tok);
/* Diagnostics: the work encode has done since open, in steps of constant cost (automaton
 * transitions, matched pieces visited, hash lookups). It grows linearly with the text: at
 * most a small multiple of its bytes plus the lattice edges (pieces that occur in the text),
 * whatever the lengths of the tokenizer's pieces. Tests use it to check that bound. */
uint64_t etch_tokenizer_encode_work(const etch_tokenizer *tok);

/* Streaming decode that only ever writes whole UTF-8 code points: bytes of an unfinished
 * sequence wait for the next token; the concatenated output equals etch_tokenizer_decode of
 * all ids fed. Caller-allocated; the fields are private. */
typedef struct etch_detokenizer {
    const etch_tokenizer *tok;
    uint8_t pending[4];
    uint32_t n_pending;
    int started; /* a non-control piece has been written (sentencepiece's first-space rule) */
} etch_detokenizer;

/* A buffer of this size always holds one feed's output for tokens up to 256 bytes; in
 * general use etch_detokenizer_max_output(). */
#define ETCH_DETOKENIZER_MAX_OUT 1024

void etch_detokenizer_init(etch_detokenizer *d, const etch_tokenizer *tok);
size_t etch_detokenizer_max_output(const etch_tokenizer *tok); /* bound for one feed/flush */
etch_status etch_detokenizer_feed(etch_detokenizer *d, int32_t id, char *buf, size_t cap,
                                  size_t *len);
/* End of stream: the bytes of an unfinished sequence become U+FFFD. */
etch_status etch_detokenizer_flush(etch_detokenizer *d, char *buf, size_t cap, size_t *len);

/* ================================= sampling ================================= */

/*
 * Sampling on one row of logits:
 *   temperature == 0 (or top_k == 1): argmax, ties to the lowest id (NaN never wins); no
 *   random number is drawn.
 *   otherwise: p = softmax(logits / temperature) (float, written over the logits; NaN -> 0);
 *   candidates in order of p descending, ties to the lower id; keep the top_k first (0: all);
 *   then keep the shortest prefix whose mass (a double sum in that order) reaches top_p times
 *   the mass of the candidates (1: all); draw u in [0, 1) once and return the first candidate
 *   whose running mass exceeds u times the kept mass. Without top_k and top_p nothing is
 *   sorted: the running mass goes over the ids in order.
 * The generator is xorshift64* (Vigna 2016: x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
 * out = x * 0x2545F4914F6CDD1D), its state seeded from `seed` through splitmix64; a uniform
 * u in [0, 1) is the top 53 bits of the output times 2^-53. Same seed, same logits, same ids.
 */
typedef struct etch_sampler etch_sampler;

typedef struct etch_sampler_params {
    float temperature; /* 0: greedy. Default 1 */
    int32_t top_k;     /* 0: no limit. Default 0 */
    float top_p;       /* in (0, 1]; 1: no limit. Default 1 */
    uint64_t seed;     /* default 0 */
} etch_sampler_params;

etch_sampler_params etch_sampler_default_params(void);

/* Allocates the scratch for vocab_size candidates once. ETCH_ERR_INVALID_ARGUMENT for a
 * negative temperature, top_p outside (0, 1] or vocab_size < 1. */
etch_status etch_sampler_open(const etch_sampler_params *params, int32_t vocab_size,
                              etch_sampler **out);
void etch_sampler_close(etch_sampler *s); /* NULL is fine */

/* Pick an id from logits[0..n) (n <= vocab_size). Overwrites logits with the probabilities
 * (after temperature and softmax; untouched when greedy). Never allocates. Returns -1 only if
 * n < 1 or n > vocab_size, or if every logit is NaN. */
int32_t etch_sampler_sample(etch_sampler *s, float *logits, int32_t n);

/* Restart the generator's sequence from a seed. */
void etch_sampler_reseed(etch_sampler *s, uint64_t seed);
/* One uniform draw in [0, 1) from the sampler's generator (what sample consumes per call). */
double etch_sampler_next_uniform(etch_sampler *s);

/* The candidate set the last non-greedy sample drew from: ids by probability descending
 * (ties: lower id first) and its size; for tests and inspection. The pointer lives until the
 * next sample or close. */
const int32_t *etch_sampler_last_candidates(const etch_sampler *s, int32_t *n);

#ifdef __cplusplus
}
#endif
#endif
#include "etch/llm_runner.h"
