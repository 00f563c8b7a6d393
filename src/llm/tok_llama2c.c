/* llama2.c's tokenizer.bin: int32 max_token_length, then for each token: float32 score,
 * int32 byte length, the bytes (spaces as ' ', not U+2581). The token count is not stored:
 * it is whatever fills the file. ids 0, 1, 2 are <unk>, BOS, EOS by llama2.c's convention. */
#include <string.h>

#include "llm/tok_internal.h"
#include "runtime/error.h"

static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Walk the records; returns the token count or -1 with *bad_off set. */
static int32_t scan(const uint8_t *d, size_t size, size_t *bad_off, size_t *bytes) {
    size_t off = 4;
    int32_t n = 0;
    *bytes = 0;
    while (off < size) {
        if (size - off < 8) {
            *bad_off = off;
            return -1;
        }
        uint32_t len = rd32(d + off + 4);
        if (len > size - off - 8 || len > (1u << 20)) {
            *bad_off = off + 4;
            return -1;
        }
        off += 8 + len;
        *bytes += len;
        if (++n > TOK_MAX_IDS) {
            *bad_off = off;
            return -1;
        }
    }
    return n;
}

int tok_llama2c_plausible(const uint8_t *d, size_t size);
int tok_llama2c_plausible(const uint8_t *d, size_t size) {
    size_t bad, bytes;
    if (size < 12) return 0;
    uint32_t maxlen = rd32(d);
    if (maxlen == 0 || maxlen > (1u << 16)) return 0;
    return scan(d, size, &bad, &bytes) > 0;
}

etch_status tok_load_llama2c(etch_tokenizer *t, const uint8_t *d, size_t size) {
    if (size < 4) return etch_err(ETCH_ERR_INVALID_PROGRAM, "llama2.c tokenizer: %zu bytes", size);
    size_t bad = 0, bytes;
    int32_t n = scan(d, size, &bad, &bytes);
    if (n <= 0)
        return etch_err(ETCH_ERR_INVALID_PROGRAM,
                        "llama2.c tokenizer: truncated or bad token record at byte %zu", bad);
    etch_status st = tok_alloc_tokens(t, n, bytes);
    if (st != ETCH_OK) return st;
    size_t off = 4, so = 0;
    for (int32_t i = 0; i < n; i++) {
        float score;
        uint32_t bits = rd32(d + off), len = rd32(d + off + 4);
        memcpy(&score, &bits, 4);
        tok_token *tk = &t->tokens[i];
        tk->off = (uint32_t)so;
        tk->len = len;
        tk->score = score;
        memcpy(t->strings + so, d + off + 8, len);
        so += len;
        off += 8 + len;
        unsigned hex;
        const char *s = (const char *)(t->strings + tk->off);
        tk->type = TT_NORMAL;
        /* Some exports store byte piece i (ids 3..258) as the byte's Latin-1 character,
         * UTF-8 encoded, instead of "<0xNN>". */
        if (i >= 3 && i < 259 && score == 0.0f) {
            uint8_t enc[2];
            unsigned b = (unsigned)(i - 3);
            size_t el = (size_t)tok_utf8_put(b, enc);
            if (el == len && memcmp(enc, s, len) == 0) {
                tk->type = TT_BYTE;
                tk->byte = (uint8_t)b;
                if (t->byte_ids[b] < 0) t->byte_ids[b] = i;
                continue;
            }
        }
        if (len == 6 && s[0] == '<' && s[1] == '0' && s[2] == 'x' && s[5] == '>') {
            hex = 0;
            int ok = 1;
            for (int k = 3; k < 5; k++) {
                char c = s[k];
                hex <<= 4;
                if (c >= '0' && c <= '9') hex |= (unsigned)(c - '0');
                else if (c >= 'A' && c <= 'F') hex |= (unsigned)(c - 'A' + 10);
                else ok = 0;
            }
            if (ok) {
                tk->type = TT_BYTE;
                tk->byte = (uint8_t)hex;
                if (t->byte_ids[hex] < 0) t->byte_ids[hex] = i;
            }
        }
    }
    if (n > 0) t->tokens[0].type = TT_UNKNOWN;
    if (n > 1) t->tokens[1].type = TT_CONTROL;
    if (n > 2) t->tokens[2].type = TT_CONTROL;
    t->unk_id = n > 0 ? 0 : -1;
    t->bos_id = n > 1 ? 1 : -1;
    t->eos_id = n > 2 ? 2 : -1;
    t->model = TOK_MODEL_BPE_SCORE;
    t->add_dummy_prefix = 1;
    t->strip_first_space = 1;
    t->escape_ws = 0;
    t->remove_extra_ws = 0;
    t->byte_fallback = 1;
    t->llama2c_chars = 1;
    t->spm_identity = 1;
    t->utf8_policy = 0;
    if (!tok_map_init(t, &t->pieces, (uint32_t)n))
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "llama2.c tokenizer: out of memory");
    /* llama2.c looks strings up in the whole vocabulary, control pieces too; byte pieces
     * serve only the byte fallback (ids 3 + byte), so that a character that is also a
     * normal piece finds that piece, as in sentencepiece */
    for (int32_t i = 0; i < n; i++)
        if (t->tokens[i].type != TT_BYTE) tok_map_put(t, &t->pieces, i);
    return ETCH_OK;
}
