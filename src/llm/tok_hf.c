/* Hugging Face tokenizer.json, byte-level BPE (GPT-2, llama3, qwen2 and the like):
 *   model: {type: "BPE", vocab: {token: id}, merges: ["a b", ...] or [["a","b"], ...],
 *           ignore_merges}
 *   added_tokens: [{id, content, special, lstrip, rstrip}]  matched in the raw text first
 *   pre_tokenizer: Split(Regex, Isolated) of a known family and/or ByteLevel
 *   normalizer: none (others are refused with ETCH_ERR_NOT_SUPPORTED)
 *   post_processor: TemplateProcessing gives BOS when it starts with a special token.
 * Vocabulary strings are stored as raw bytes (the GPT-2 byte<->unicode map undone), so the
 * merge engine works on bytes like tiktoken's. */
#include <stdlib.h>
#include <string.h>

#include "llm/tok_internal.h"
#include "llm/tok_json.h"
#include "runtime/error.h"

#define HF_ERR(st, v, ...) hf_err(st, base, v, __VA_ARGS__)

static etch_status hf_err(etch_status st, const char *base, jv at, const char *fmt, const char *what) {
    return etch_err(st, "tokenizer.json: %s%s (byte %zu)", fmt, what ? what : "",
                    at.p ? (size_t)(at.p - base) : (size_t)0);
}

/* UTF-8 text of the byte-level alphabet -> raw bytes, in place. 0 if a character is not in
 * the alphabet. */
static int unmap_bytes(uint8_t *s, size_t n, size_t *out_len) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int l = tok_utf8_next(s + i, n - i, &cp);
        int b = tok_unicode_to_byte(cp);
        if (b < 0 || (cp == 0xFFFD && s[i] != 0xEF)) return 0;
        s[o++] = (uint8_t)b;
        i += (size_t)l;
    }
    *out_len = o;
    return 1;
}

static etch_status parse_pretok(etch_tokenizer *t, const char *base, jv pt, char *tmp, size_t tmp_cap) {
    jv type;
    if (j_type(pt) == J_NULL) return ETCH_OK;
    if (!j_get(pt, "type", &type)) return HF_ERR(ETCH_ERR_INVALID_PROGRAM, pt, "pre_tokenizer without a type", NULL);
    if (j_str_eq(type, "Sequence")) {
        jv list, e;
        if (!j_get(pt, "pretokenizers", &list) || j_type(list) != J_ARR)
            return HF_ERR(ETCH_ERR_INVALID_PROGRAM, pt, "Sequence without pretokenizers", NULL);
        jit it = j_iter(list);
        while (j_next(&it, NULL, &e)) {
            etch_status st = parse_pretok(t, base, e, tmp, tmp_cap);
            if (st != ETCH_OK) return st;
        }
        return it.bad ? HF_ERR(ETCH_ERR_INVALID_PROGRAM, list, "malformed pretokenizers", NULL) : ETCH_OK;
    }
    if (j_str_eq(type, "Split")) {
        jv pat, re, beh, inv;
        if (!j_get(pt, "pattern", &pat) || !j_get(pat, "Regex", &re))
            return HF_ERR(ETCH_ERR_NOT_SUPPORTED, pt, "Split without a Regex pattern", NULL);
        if (j_get(pt, "behavior", &beh) && !j_str_eq(beh, "Isolated"))
            return HF_ERR(ETCH_ERR_NOT_SUPPORTED, beh, "Split behavior other than Isolated", NULL);
        if (j_get(pt, "invert", &inv) && j_bool(inv, 0))
            return HF_ERR(ETCH_ERR_NOT_SUPPORTED, inv, "inverted Split", NULL);
        long n = j_str(re, tmp, tmp_cap);
        tok_split m = n < 0 ? TOK_SPLIT_NONE : tok_split_from_regex(tmp, (size_t)n);
        if (m == TOK_SPLIT_NONE) {
            if (n >= 0) tmp[n < 200 ? n : 200] = 0;
            return HF_ERR(ETCH_ERR_NOT_SUPPORTED, re, "Split regex of an unknown family: ",
                          n >= 0 ? tmp : "?");
        }
        t->split = m;
        return ETCH_OK;
    }
    if (j_str_eq(type, "ByteLevel")) {
        jv v;
        if (j_get(pt, "add_prefix_space", &v) && j_bool(v, 0))
            return HF_ERR(ETCH_ERR_NOT_SUPPORTED, v, "ByteLevel add_prefix_space", NULL);
        if (!j_get(pt, "use_regex", &v) || j_bool(v, 1)) {
            if (t->split == TOK_SPLIT_NONE) t->split = TOK_SPLIT_GPT2;
        }
        return ETCH_OK;
    }
    long n = j_str(type, tmp, 100);
    if (n >= 0) tmp[n] = 0;
    return HF_ERR(ETCH_ERR_NOT_SUPPORTED, type, "pre_tokenizer type ", n >= 0 ? tmp : "?");
}

static int32_t added_by_name(const etch_tokenizer *t, const char *const *names) {
    for (int k = 0; names[k]; k++) {
        size_t l = strlen(names[k]);
        for (int32_t i = 0; i < t->n_tokens; i++)
            if (t->tokens[i].type == TT_SPECIAL && t->tokens[i].len == l &&
                memcmp(tok_text(t, i), names[k], l) == 0)
                return i;
    }
    return -1;
}

etch_status tok_load_hf(etch_tokenizer *t, const uint8_t *data, size_t size) {
    const char *base = (const char *)data;
    jv root = {base, base + size};
    while (root.p < root.end && (*root.p == ' ' || *root.p == '\n' || *root.p == '\r' ||
                                 *root.p == '\t' || (uint8_t)*root.p == 0xEF || (uint8_t)*root.p == 0xBB ||
                                 (uint8_t)*root.p == 0xBF))
        root.p++;
    if (!j_skip(root.p, root.end, 0)) return HF_ERR(ETCH_ERR_INVALID_PROGRAM, root, "malformed JSON", NULL);
    jv model, vocab, merges, added, v;
    if (!j_get(root, "model", &model) || j_type(model) != J_OBJ)
        return HF_ERR(ETCH_ERR_INVALID_PROGRAM, root, "no model", NULL);
    if (j_get(model, "type", &v) && !j_str_eq(v, "BPE"))
        return HF_ERR(ETCH_ERR_NOT_SUPPORTED, v, "model type other than BPE", NULL);
    if (!j_get(model, "vocab", &vocab) || j_type(vocab) != J_OBJ)
        return HF_ERR(ETCH_ERR_INVALID_PROGRAM, model, "model without a vocab object", NULL);
    if (!j_get(model, "merges", &merges) || j_type(merges) != J_ARR)
        return HF_ERR(ETCH_ERR_INVALID_PROGRAM, model, "model without merges", NULL);
    if (j_get(model, "continuing_subword_prefix", &v) && j_type(v) == J_STR && !j_str_eq(v, ""))
        return HF_ERR(ETCH_ERR_NOT_SUPPORTED, v, "continuing_subword_prefix", NULL);
    if (j_get(model, "end_of_word_suffix", &v) && j_type(v) == J_STR && !j_str_eq(v, ""))
        return HF_ERR(ETCH_ERR_NOT_SUPPORTED, v, "end_of_word_suffix", NULL);
    t->whole_word = j_get(model, "ignore_merges", &v) && j_bool(v, 0);
    if (j_get(root, "normalizer", &v) && j_type(v) != J_NULL)
        return HF_ERR(ETCH_ERR_NOT_SUPPORTED, v, "normalizers are not supported (only null)", NULL);

    /* pass 1: sizes */
    jit it = j_iter(vocab);
    jv key, val;
    long long maxid = -1, id;
    size_t bytes = 0, maxlen = 0;
    size_t n_entries = 0;
    while (j_next(&it, &key, &val)) {
        if (!j_int(val, &id) || id < 0 || id >= TOK_MAX_IDS)
            return HF_ERR(ETCH_ERR_INVALID_PROGRAM, val, "bad vocab id", NULL);
        size_t l = j_str_raw_len(key);
        bytes += l;
        if (l > maxlen) maxlen = l;
        if (id > maxid) maxid = id;
        n_entries++;
    }
    if (it.bad) return HF_ERR(ETCH_ERR_INVALID_PROGRAM, vocab, "malformed vocab", NULL);
    int has_added = j_get(root, "added_tokens", &added) && j_type(added) == J_ARR;
    if (has_added) {
        it = j_iter(added);
        while (j_next(&it, NULL, &val)) {
            jv c, i;
            if (!j_get(val, "content", &c) || !j_get(val, "id", &i) || !j_int(i, &id) || id < 0 ||
                id >= TOK_MAX_IDS)
                return HF_ERR(ETCH_ERR_INVALID_PROGRAM, val, "bad added token", NULL);
            size_t l = j_str_raw_len(c);
            bytes += l;
            if (l > maxlen) maxlen = l;
            if (id > maxid) maxid = id;
            n_entries++;
        }
        if (it.bad) return HF_ERR(ETCH_ERR_INVALID_PROGRAM, added, "malformed added_tokens", NULL);
    }
    if (maxid < 0) return HF_ERR(ETCH_ERR_INVALID_PROGRAM, vocab, "empty vocab", NULL);
    /* added tokens may sit above the vocabulary, with a gap; ids far beyond the entries are
     * refused, since the table is sized by the largest id */
    etch_status st = tok_check_id_span("tokenizer.json", maxid, n_entries);
    if (st != ETCH_OK) return st;
    st = tok_alloc_tokens(t, (int32_t)maxid + 1, bytes);
    if (st != ETCH_OK) return st;
    for (int32_t i = 0; i < t->n_tokens; i++) t->tokens[i].type = TT_UNUSED; /* holes */
    size_t tmp_cap = 2 * maxlen + 1024;
    char *tmp = malloc(tmp_cap);
    if (!tmp) return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "tokenizer.json: out of memory");

    /* pass 2: vocab strings as raw bytes */
    size_t so = 0;
    it = j_iter(vocab);
    while (j_next(&it, &key, &val)) {
        j_int(val, &id);
        long n = j_str(key, (char *)t->strings + so, bytes - so);
        size_t bl;
        if (n < 0) {
            free(tmp);
            return HF_ERR(ETCH_ERR_INVALID_PROGRAM, key, "bad vocab string", NULL);
        }
        if (!unmap_bytes(t->strings + so, (size_t)n, &bl)) {
            free(tmp);
            return HF_ERR(ETCH_ERR_NOT_SUPPORTED, key,
                          "vocab token outside the byte-level alphabet (not a byte-level BPE)", NULL);
        }
        tok_token *tk = &t->tokens[id];
        tk->off = (uint32_t)so;
        tk->len = (uint32_t)bl;
        tk->type = TT_NORMAL;
        so += bl;
    }
    if (has_added) {
        it = j_iter(added);
        while (j_next(&it, NULL, &val)) {
            jv c, i, f;
            j_get(val, "content", &c);
            j_get(val, "id", &i);
            j_int(i, &id);
            long n = j_str(c, (char *)t->strings + so, bytes - so);
            if (n <= 0) {
                free(tmp);
                return HF_ERR(ETCH_ERR_INVALID_PROGRAM, c, "bad added token content", NULL);
            }
            tok_token *tk = &t->tokens[id];
            tk->off = (uint32_t)so;
            tk->len = (uint32_t)n;
            tk->type = TT_SPECIAL;
            tk->always = !(j_get(val, "special", &f) && j_bool(f, 0));
            tk->lstrip = j_get(val, "lstrip", &f) && j_bool(f, 0);
            tk->rstrip = j_get(val, "rstrip", &f) && j_bool(f, 0);
            so += (size_t)n;
        }
    }

    if (!tok_map_init(t, &t->pieces, (uint32_t)t->n_tokens)) {
        free(tmp);
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "tokenizer.json: out of memory");
    }
    for (int32_t i = 0; i < t->n_tokens; i++)
        if (t->tokens[i].type == TT_NORMAL) tok_map_put(t, &t->pieces, i);
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        t->byte_ids[b] = tok_map_get(t, &t->pieces, &c, 1);
    }

    /* merges: "a b" or ["a", "b"], rank = position */
    uint32_t n_merges = 0;
    it = j_iter(merges);
    while (j_next(&it, NULL, &val)) n_merges++;
    if (n_merges > TOK_MAX_IDS) {
        free(tmp);
        return HF_ERR(ETCH_ERR_INVALID_PROGRAM, merges, "more merges than ids can hold", NULL);
    }
    if (!tok_pairs_init(t, n_merges)) {
        free(tmp);
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "tokenizer.json: out of memory");
    }
    it = j_iter(merges);
    uint32_t rank = 0;
    while (j_next(&it, NULL, &val)) {
        size_t al, bl;
        char *a = tmp, *b;
        if (j_type(val) == J_STR) {
            long n = j_str(val, tmp, tmp_cap);
            char *sp = n > 0 ? memchr(tmp, ' ', (size_t)n) : NULL;
            if (!sp) goto bad_merge;
            al = (size_t)(sp - tmp);
            b = sp + 1;
            bl = (size_t)n - al - 1;
        } else if (j_type(val) == J_ARR) {
            jit e = j_iter(val);
            jv x, y;
            if (!j_next(&e, NULL, &x) || !j_next(&e, NULL, &y)) goto bad_merge;
            long n1 = j_str(x, tmp, tmp_cap / 2);
            long n2 = j_str(y, tmp + tmp_cap / 2, tmp_cap / 2);
            if (n1 < 0 || n2 < 0) goto bad_merge;
            al = (size_t)n1;
            b = tmp + tmp_cap / 2;
            bl = (size_t)n2;
        } else {
            goto bad_merge;
        }
        if (!unmap_bytes((uint8_t *)a, al, &al) || !unmap_bytes((uint8_t *)b, bl, &bl)) {
            rank++;
            continue; /* a merge of tokens we cannot hold never fires */
        }
        int32_t ia = tok_map_get(t, &t->pieces, a, al), ib = tok_map_get(t, &t->pieces, b, bl);
        int32_t im = tok_map_get2(t, &t->pieces, a, al, b, bl);
        if (ia >= 0 && ib >= 0 && im >= 0) tok_pairs_put(t, ia, ib, rank, im);
        rank++;
        continue;
    bad_merge:
        free(tmp);
        return HF_ERR(ETCH_ERR_INVALID_PROGRAM, val, "bad merge", NULL);
    }
    if (it.bad) {
        free(tmp);
        return HF_ERR(ETCH_ERR_INVALID_PROGRAM, merges, "malformed merges", NULL);
    }

    t->split = TOK_SPLIT_NONE;
    if (j_get(root, "pre_tokenizer", &v)) {
        st = parse_pretok(t, base, v, tmp, tmp_cap);
        if (st != ETCH_OK) {
            free(tmp);
            return st;
        }
    }
    /* BOS: the special token a TemplateProcessing puts first */
    jv pp, single, first, sp, sid;
    if (j_get(root, "post_processor", &pp) && j_type(pp) == J_OBJ && j_get(pp, "single", &single) &&
        j_type(single) == J_ARR) {
        jit e = j_iter(single);
        if (j_next(&e, NULL, &first) && j_get(first, "SpecialToken", &sp) && j_get(sp, "id", &sid)) {
            long n = j_str(sid, tmp, tmp_cap);
            if (n > 0) t->bos_id = etch_tokenizer_token_to_id(t, tmp, (size_t)n);
        }
    }
    free(tmp);
    static const char *const bos_names[] = {"<|begin_of_text|>", "<s>", "<|startoftext|>", NULL};
    static const char *const eos_names[] = {"<|end_of_text|>", "<|endoftext|>", "</s>", "<|im_end|>",
                                            NULL};
    if (t->bos_id < 0) t->bos_id = added_by_name(t, bos_names);
    t->eos_id = added_by_name(t, eos_names);
    if (j_get(model, "unk_token", &v) && j_type(v) == J_STR) {
        char u[256];
        long n = j_str(v, u, sizeof u);
        if (n > 0) t->unk_id = etch_tokenizer_token_to_id(t, u, (size_t)n);
    }
    t->model = TOK_MODEL_BPE_RANK;
    t->use_pairs = 1;
    t->utf8_policy = 1;
    return ETCH_OK;
}
