/* The tokenizer object: open (format detection), the encode driver (special tokens,
 * normalization, cutting text into runs that fit the work buffer), decode and the streaming
 * detokenizer. The format readers live in tok_<format>.c, the merge engines in tok_bpe.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/tok_internal.h"
#include "runtime/error.h"

int tok_llama2c_plausible(const uint8_t *d, size_t size);
int tok_looks_like_tiktoken(const uint8_t *d, size_t size);

etch_tokenizer_params etch_tokenizer_default_params(void) {
    etch_tokenizer_params p;
    memset(&p, 0, sizeof p);
    p.format = ETCH_TOKENIZER_AUTO;
    p.split = ETCH_TOKENIZER_SPLIT_AUTO;
    p.bos_id = -1;
    p.eos_id = -1;
    p.max_run_bytes = 16384;
    return p;
}

etch_status tok_check_id_span(const char *what, long long max_id, size_t n_entries) {
    size_t gaps = n_entries > TOK_MAX_GAPS ? n_entries : TOK_MAX_GAPS;
    if (max_id < 0 || (unsigned long long)max_id < (unsigned long long)n_entries + gaps)
        return ETCH_OK;
    return etch_err(ETCH_ERR_INVALID_PROGRAM,
                    "%s: id %lld is far beyond the %zu entries (at most %zu ids may be unused); "
                    "the id table would need %lld slots",
                    what, max_id, n_entries, gaps, max_id + 1);
}

etch_status tok_alloc_tokens(etch_tokenizer *t, int32_t n, size_t string_bytes) {
    t->tokens = tok_arena_alloc(&t->arena, (size_t)n * sizeof(tok_token));
    t->strings = tok_arena_alloc(&t->arena, string_bytes + 1);
    if (!t->tokens || !t->strings)
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "tokenizer: out of memory for %d tokens",
                        (int)n);
    t->n_tokens = n;
    return ETCH_OK;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The automaton over the pieces of `pieces` (each string once, under the id the map holds),
 * or only its user-defined ones. */
static etch_status build_piece_ac(etch_tokenizer *t, tok_ac *ac, int user_defined_only) {
    int32_t *ids = malloc(((size_t)t->n_tokens + 1) * sizeof *ids);
    if (!ids) return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "tokenizer: out of memory");
    int32_t n = 0;
    for (uint32_t i = 0; i <= t->pieces.mask && t->pieces.slots; i++) {
        uint32_t v = t->pieces.slots[i];
        if (!v || t->tokens[v - 1].len == 0) continue;
        if (user_defined_only && t->tokens[v - 1].type != TT_USER_DEFINED) continue;
        ids[n++] = (int32_t)v - 1;
    }
    /* in id order, so that the automaton does not depend on the hash layout */
    for (int32_t i = 1; i < n; i++) {
        int32_t x = ids[i], j = i;
        while (j > 0 && ids[j - 1] > x) {
            ids[j] = ids[j - 1];
            j--;
        }
        ids[j] = x;
    }
    etch_status st = tok_ac_build(t, ac, ids, n); /* none: just the root */
    free(ids);
    return st;
}

etch_status tok_finish(etch_tokenizer *t, const etch_tokenizer_params *p) {
    t->max_token_len = 1;
    for (int32_t i = 0; i < t->n_tokens; i++)
        if (t->tokens[i].len > t->max_token_len) t->max_token_len = t->tokens[i].len;
    if (t->unk_surface_len > t->max_token_len) t->max_token_len = t->unk_surface_len;

    /* the lengths the pieces have, and the automata that find the pieces in a run */
    t->len_present = tok_arena_alloc(&t->arena, t->max_token_len / 8 + 1);
    if (!t->len_present) return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "tokenizer: out of memory");
    for (uint32_t i = 0; i <= t->pieces.mask && t->pieces.slots; i++) {
        uint32_t v = t->pieces.slots[i];
        if (v) {
            uint32_t l = t->tokens[v - 1].len;
            t->len_present[l >> 3] |= (uint8_t)(1u << (l & 7));
        }
    }
    etch_status st = ETCH_OK;
    if (t->model == TOK_MODEL_UNIGRAM) st = build_piece_ac(t, &t->match, 0);
    else if (t->model == TOK_MODEL_BPE_SCORE && t->has_user_defined) st = build_piece_ac(t, &t->match, 1);
    if (st != ETCH_OK) return st;

    /* specials matched in raw text: HF added tokens / tiktoken specials (TT_SPECIAL) and
     * sentencepiece control pieces (only with ETCH_TOKENIZER_PARSE_SPECIAL) */
    int32_t ns = 0;
    for (int32_t i = 0; i < t->n_tokens; i++) {
        const tok_token *tk = &t->tokens[i];
        if ((tk->type == TT_SPECIAL || (tk->type == TT_CONTROL && t->format != ETCH_TOKENIZER_LLAMA2C)) &&
            tk->len > 0)
            ns++;
    }
    if (ns > 0) {
        t->specials = tok_arena_alloc(&t->arena, (size_t)ns * sizeof(int32_t));
        if (!t->specials) return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "tokenizer: out of memory");
        ns = 0;
        for (int32_t i = 0; i < t->n_tokens; i++) {
            const tok_token *tk = &t->tokens[i];
            if ((tk->type == TT_SPECIAL ||
                 (tk->type == TT_CONTROL && t->format != ETCH_TOKENIZER_LLAMA2C)) &&
                tk->len > 0) {
                t->specials[ns++] = i;
            }
        }
        /* longest first, then by id: the order the automaton is built in (the lowest id
         * keeps a text given twice); qsort, as added tokens may be many */
        uint64_t *key = malloc((size_t)ns * sizeof *key);
        if (!key) return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "tokenizer: out of memory");
        for (int32_t k = 0; k < ns; k++)
            key[k] = (uint64_t)(UINT32_MAX - t->tokens[t->specials[k]].len) << 32 |
                     (uint32_t)t->specials[k];
        qsort(key, (size_t)ns, sizeof *key, cmp_u64);
        for (int32_t k = 0; k < ns; k++) t->specials[k] = (int32_t)(key[k] & UINT32_MAX);
        free(key);
    }
    t->n_specials = ns;
    /* their automata (all of them, and those matched without PARSE_SPECIAL) and the window of
     * recent match starts that the scan keeps */
    if (ns > 0) {
        int32_t *always = malloc((size_t)ns * sizeof *always);
        if (!always) return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "tokenizer: out of memory");
        int32_t na = 0;
        for (int32_t k = 0; k < ns; k++) {
            const tok_token *tk = &t->tokens[t->specials[k]];
            if (tk->type == TT_SPECIAL && tk->always) always[na++] = t->specials[k];
            if (tk->len > t->max_special_len) t->max_special_len = tk->len;
        }
        etch_status st2 = tok_ac_build(t, &t->spec_all, t->specials, ns);
        if (st2 == ETCH_OK && na > 0) st2 = tok_ac_build(t, &t->spec_always, always, na);
        free(always);
        if (st2 != ETCH_OK) return st2;
        t->spec_ring_len = tok_arena_alloc(&t->arena, ((size_t)t->max_special_len + 1) * sizeof(uint32_t));
        t->spec_ring_id = tok_arena_alloc(&t->arena, ((size_t)t->max_special_len + 1) * sizeof(int32_t));
        if (!t->spec_ring_len || !t->spec_ring_id)
            return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "tokenizer: out of memory");
    }

    /* May the text be cut before a space mark that follows something else? Only if no piece
     * holds a space mark after another character. */
    if (t->model != TOK_MODEL_BPE_RANK) {
        const uint8_t *mark = (const uint8_t *)(t->escape_ws ? "\xE2\x96\x81" : " ");
        size_t ml = t->escape_ws ? 3 : 1;
        t->can_cut = 1;
        for (int32_t i = 0; i < t->n_tokens && t->can_cut; i++) {
            const tok_token *tk = &t->tokens[i];
            if (tk->type != TT_NORMAL && tk->type != TT_USER_DEFINED && tk->type != TT_UNUSED)
                if (t->format != ETCH_TOKENIZER_LLAMA2C) continue;
            const uint8_t *s = tok_text(t, i);
            int prev_mark = 1;
            for (uint32_t k = 0; k < tk->len;) {
                int is_mark = tk->len - k >= ml && memcmp(s + k, mark, ml) == 0;
                if (is_mark && !prev_mark) {
                    t->can_cut = 0;
                    break;
                }
                prev_mark = is_mark;
                k += is_mark ? (uint32_t)ml : 1;
            }
        }
    }

    if (p->bos_id >= 0) t->bos_id = p->bos_id < t->n_tokens ? p->bos_id : -1;
    if (p->eos_id >= 0) t->eos_id = p->eos_id < t->n_tokens ? p->eos_id : -1;

    t->chunk_cap = p->max_run_bytes ? p->max_run_bytes : 16384;
    if (t->chunk_cap < 64) t->chunk_cap = 64;
    t->norm = tok_arena_alloc(&t->arena, t->chunk_cap + 16);
    t->work = tok_arena_alloc(&t->arena, tok_work_bytes(t->chunk_cap));
    if (!t->norm || !t->work)
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "tokenizer: out of memory for the work buffer");
    return ETCH_OK;
}

static etch_tokenizer_format detect(const uint8_t *d, size_t size) {
    size_t i = 0;
    if (size >= 3 && d[0] == 0xEF && d[1] == 0xBB && d[2] == 0xBF) i = 3;
    while (i < size && (d[i] == ' ' || d[i] == '\t' || d[i] == '\r' || d[i] == '\n')) i++;
    if (i < size && d[i] == '{') return ETCH_TOKENIZER_HF_JSON;
    if (tok_looks_like_tiktoken(d, size)) return ETCH_TOKENIZER_TIKTOKEN;
    if (tok_looks_like_spm(d, size)) return ETCH_TOKENIZER_SENTENCEPIECE;
    if (tok_llama2c_plausible(d, size)) return ETCH_TOKENIZER_LLAMA2C;
    return ETCH_TOKENIZER_AUTO;
}

etch_status etch_tokenizer_open_buffer(const void *data, size_t size,
                                       const etch_tokenizer_params *params, etch_tokenizer **out) {
    if (!data || !out) return etch_err(ETCH_ERR_INVALID_ARGUMENT, "tokenizer: NULL argument");
    etch_tokenizer_params p = params ? *params : etch_tokenizer_default_params();
    const uint8_t *d = data;
    etch_tokenizer_format fmt = p.format;
    if (fmt == ETCH_TOKENIZER_AUTO) fmt = detect(d, size);
    if (fmt == ETCH_TOKENIZER_AUTO)
        return etch_err(ETCH_ERR_INVALID_PROGRAM,
                        "tokenizer: %zu bytes are no known tokenizer format (llama2.c .bin, "
                        "sentencepiece .model, tokenizer.json, tiktoken ranks)", size);
    etch_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "tokenizer: out of memory");
    t->format = fmt;
    t->unk_id = t->bos_id = t->eos_id = t->pad_id = -1;
    for (int i = 0; i < 256; i++) t->byte_ids[i] = -1;
    etch_status st;
    switch (fmt) {
    case ETCH_TOKENIZER_LLAMA2C: st = tok_load_llama2c(t, d, size); break;
    case ETCH_TOKENIZER_SENTENCEPIECE: st = tok_load_spm(t, d, size); break;
    case ETCH_TOKENIZER_HF_JSON: st = tok_load_hf(t, d, size); break;
    case ETCH_TOKENIZER_TIKTOKEN: st = tok_load_tiktoken(t, d, size, &p); break;
    default: st = etch_err(ETCH_ERR_INVALID_ARGUMENT, "tokenizer: bad format %d", (int)fmt);
    }
    if (st == ETCH_OK) st = tok_finish(t, &p);
    if (st != ETCH_OK) {
        etch_tokenizer_close(t);
        return st;
    }
    *out = t;
    return ETCH_OK;
}

etch_status etch_tokenizer_open_file(const char *path, const etch_tokenizer_params *params,
                                     etch_tokenizer **out) {
    if (!path || !out) return etch_err(ETCH_ERR_INVALID_ARGUMENT, "tokenizer: NULL argument");
    FILE *f = fopen(path, "rb");
    if (!f) return etch_err(ETCH_ERR_ACCESS_FAILED, "tokenizer: cannot open %s", path);
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (size < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return etch_err(ETCH_ERR_ACCESS_FAILED, "tokenizer: cannot size %s", path);
    }
    uint8_t *buf = malloc((size_t)size + 1);
    if (!buf) {
        fclose(f);
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "tokenizer: %ld bytes for %s", size, path);
    }
    size_t got = fread(buf, 1, (size_t)size, f);
    fclose(f);
    if (got != (size_t)size) {
        free(buf);
        return etch_err(ETCH_ERR_ACCESS_FAILED, "tokenizer: short read of %s", path);
    }
    etch_status st = etch_tokenizer_open_buffer(buf, (size_t)size, params, out);
    free(buf);
    if (st != ETCH_OK) etch_err_prefix("%s", path);
    return st;
}

void etch_tokenizer_close(etch_tokenizer *t) {
    if (!t) return;
    tok_arena_free(&t->arena);
    free(t);
}

etch_tokenizer_format etch_tokenizer_get_format(const etch_tokenizer *t) { return t->format; }
int32_t etch_tokenizer_vocab_size(const etch_tokenizer *t) { return t->n_tokens; }
int32_t etch_tokenizer_bos_id(const etch_tokenizer *t) { return t->bos_id; }
int32_t etch_tokenizer_eos_id(const etch_tokenizer *t) { return t->eos_id; }
size_t etch_tokenizer_max_token_bytes(const etch_tokenizer *t) { return t->max_token_len; }
uint64_t etch_tokenizer_encode_work(const etch_tokenizer *t) { return t->work_done; }

int32_t etch_tokenizer_token_to_id(const etch_tokenizer *t, const char *s, size_t len) {
    if (!t || !s) return -1;
    int32_t id = tok_map_get(t, &t->pieces, s, len);
    if (id >= 0) return id;
    for (int32_t i = 0; i < t->n_tokens; i++)
        if (t->tokens[i].len == len && memcmp(tok_text(t, i), s, len) == 0) return i;
    return -1;
}

const char *etch_tokenizer_token_text(const etch_tokenizer *t, int32_t id, size_t *len) {
    if (!t || id < 0 || id >= t->n_tokens) return NULL;
    if (len) *len = t->tokens[id].len;
    return (const char *)tok_text(t, id);
}

/* ------------------------------------------------------------------ encode */

size_t tok_pretok_encode(etch_tokenizer *t, const uint8_t *s, size_t n, tok_out *out,
                         etch_status *st);

/* sentencepiece / llama2.c: normalize into t->norm, cut into runs before a space mark that
 * follows another character, and run the model on each run. */
static etch_status spm_segment(etch_tokenizer *t, const uint8_t *s, size_t n, int at_start,
                               tok_out *out) {
    const uint8_t *mark = (const uint8_t *)(t->escape_ws ? "\xE2\x96\x81" : " ");
    const size_t ml = t->escape_ws ? 3 : 1;
    uint8_t *buf = t->norm;
    size_t cap = t->chunk_cap, len = 0, cut = 0;
    int pending_space = 0, emitted = 0, content = 0, prev_mark = 1;
    void (*run)(etch_tokenizer *, const uint8_t *, size_t, tok_out *) =
        t->model == TOK_MODEL_UNIGRAM ? tok_unigram_chunk : tok_bpe_chunk;

    for (size_t i = 0; i < n;) {
        /* next output unit: bytes in u[0..ul) */
        uint8_t u[8];
        size_t ul = 0;
        int is_mark = 0;
        if (s[i] == ' ') {
            i++;
            if (t->remove_extra_ws) {
                pending_space = 1;
                continue;
            }
            memcpy(u, mark, ml);
            ul = ml;
            is_mark = 1;
        } else if (t->llama2c_chars) {
            u[0] = s[i++];
            ul = 1;
        } else {
            uint32_t cp;
            int l = tok_utf8_next(s + i, n - i, &cp);
            ul = (size_t)tok_utf8_put(cp, u); /* invalid bytes become U+FFFD */
            i += (size_t)l;
        }
        /* units to write: [dummy prefix] [one collapsed space] unit */
        for (int pass = 0; pass < 3; pass++) {
            const uint8_t *w;
            size_t wl;
            int wm;
            if (pass == 0) {
                if (emitted || !at_start || !t->add_dummy_prefix) continue;
                w = mark, wl = ml, wm = 1;
            } else if (pass == 1) {
                if (!pending_space) continue;
                pending_space = 0;
                if (!content && t->remove_extra_ws) continue; /* leading spaces vanish */
                w = mark, wl = ml, wm = 1;
            } else {
                w = u, wl = ul, wm = is_mark;
            }
            if (wm && !prev_mark && t->can_cut) cut = len;
            if (len + wl > cap) {
                if (cut == 0)
                    return etch_err(ETCH_ERR_NOT_SUPPORTED,
                                    "tokenizer: a run of more than %zu bytes without a break "
                                    "(raise etch_tokenizer_params.max_run_bytes)",
                                    cap);
                run(t, buf, cut, out);
                memmove(buf, buf + cut, len - cut);
                len -= cut;
                cut = 0;
            }
            memcpy(buf + len, w, wl);
            len += wl;
            prev_mark = wm;
            emitted = 1;
            if (pass) content = 1;
        }
    }
    /* remove_extra_whitespaces also strips trailing marks, a U+2581 of the text included
     * (sentencepiece strips the normalized text). A run of marks is never cut, so all of it
     * is still in the buffer. */
    if (t->remove_extra_ws)
        while (len >= ml && memcmp(buf + len - ml, mark, ml) == 0) len -= ml;
    if (len) run(t, buf, len, out);
    return ETCH_OK;
}

static etch_status encode_segment(etch_tokenizer *t, const uint8_t *s, size_t n, int at_start,
                                  tok_out *out) {
    if (t->model == TOK_MODEL_BPE_RANK) {
        etch_status st = ETCH_OK;
        tok_pretok_encode(t, s, n, out, &st);
        return st;
    }
    return spm_segment(t, s, n, at_start, out);
}

/* The special tokens in the raw text, found in one pass of their automaton: the leftmost
 * match, the longest one there (the lowest id for the same text), then the next one from
 * where the caller resumes. A start is decided once no match still being read can start
 * there; the starts not yet decided (at most the longest special's length of them) keep
 * their longest match in a ring of that size. */
typedef struct spec_scan {
    etch_tokenizer *t;
    const tok_ac *ac;
    const uint8_t *s;
    size_t n, e;  /* e: bytes fed to the automaton */
    size_t from;  /* the first undecided start */
    int32_t state;
} spec_scan;

static void ring_clear(spec_scan *sc, size_t q) {
    size_t r = q % ((size_t)sc->t->max_special_len + 1);
    sc->t->spec_ring_len[r] = 0;
}

/* The next special starting at or after min_start (>= where the last one ended): its id, or -1
 * when there is none; *at and *len. */
static int32_t next_special(spec_scan *sc, size_t min_start, size_t *at, size_t *len) {
    etch_tokenizer *t = sc->t;
    const tok_ac *ac = sc->ac;
    const size_t R = (size_t)t->max_special_len + 1;
    for (; sc->from < min_start; sc->from++)
        if (sc->from < sc->e) ring_clear(sc, sc->from);
    for (;;) {
        while (sc->from < sc->e &&
               (sc->e == sc->n || sc->e - ac->depth[sc->state] > sc->from)) {
            size_t r = sc->from % R;
            if (t->spec_ring_len[r]) {
                *at = sc->from;
                *len = t->spec_ring_len[r];
                return t->spec_ring_id[r];
            }
            sc->from++;
        }
        if (sc->e == sc->n) return -1;
        sc->state = tok_ac_step(ac, sc->state, sc->s[sc->e++], &t->work_done);
        for (int32_t v = ac->out[sc->state] >= 0 ? sc->state : ac->dict[sc->state]; v >= 0;
             v = ac->dict[v]) {
            t->work_done++;
            uint32_t l = ac->depth[v];
            size_t q = sc->e - l;
            if (q < sc->from) continue; /* inside the last special, or before where we resume */
            size_t r = q % R;
            if (l > t->spec_ring_len[r]) {
                t->spec_ring_len[r] = l;
                t->spec_ring_id[r] = ac->out[v];
            }
        }
    }
}

/* Leave the ring empty for the next encode. */
static void spec_done(spec_scan *sc) {
    for (size_t q = sc->from; q < sc->e; q++) ring_clear(sc, q);
}

static int is_ws_at(const uint8_t *s, size_t n, size_t *l) {
    uint32_t cp;
    *l = (size_t)tok_utf8_next(s, n, &cp);
    return tok_uc_is_space(cp) && cp != 0xFEFF;
}

etch_status etch_tokenizer_encode(etch_tokenizer *t, const char *text, size_t len, uint32_t flags,
                                  int32_t *ids, size_t cap, size_t *n_ids) {
    if (!t || (!text && len) || (!ids && cap) || !n_ids)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "tokenizer encode: NULL argument");
    tok_out out = {ids, cap, 0};
    const uint8_t *s = (const uint8_t *)text;
    if ((flags & ETCH_TOKENIZER_ADD_BOS) && t->bos_id >= 0) tok_emit(&out, t->bos_id);
    size_t pos = 0;
    etch_status st = ETCH_OK;
    spec_scan sc = {t, (flags & ETCH_TOKENIZER_PARSE_SPECIAL) ? &t->spec_all : &t->spec_always,
                    s, len, 0, 0, 0};
    int scan = t->n_specials > 0 && sc.ac->n_nodes > 1;
    while (pos < len && st == ETCH_OK) {
        size_t at = 0, sl = 0;
        int32_t sid = scan ? next_special(&sc, pos, &at, &sl) : -1;
        size_t seg_end = sid >= 0 ? at : len;
        size_t next = sid >= 0 ? at + sl : len;
        if (sid >= 0) {
            const tok_token *tk = &t->tokens[sid];
            /* HF lstrip/rstrip: the added token swallows the whitespace beside it */
            if (tk->lstrip) {
                while (seg_end > pos) {
                    size_t b = seg_end - 1, l;
                    while (b > pos && (s[b] & 0xC0) == 0x80) b--;
                    if (!is_ws_at(s + b, len - b, &l) || b + l != seg_end) break;
                    seg_end = b;
                }
            }
            if (tk->rstrip) {
                size_t l;
                while (next < len && is_ws_at(s + next, len - next, &l)) next += l;
            }
        }
        if (seg_end > pos) st = encode_segment(t, s + pos, seg_end - pos, pos == 0, &out);
        if (sid >= 0) tok_emit(&out, sid);
        pos = next;
    }
    if (scan) spec_done(&sc);
    if (st != ETCH_OK) return st;
    if ((flags & ETCH_TOKENIZER_ADD_EOS) && t->eos_id >= 0) tok_emit(&out, t->eos_id);
    *n_ids = out.n;
    if (out.n > cap)
        return etch_err(ETCH_ERR_OUT_OF_RESOURCES, "tokenizer encode: %zu ids do not fit in %zu",
                        out.n, cap);
    return ETCH_OK;
}

/* ------------------------------------------------------------------ decode */

typedef struct sink {
    uint8_t *buf;
    size_t cap, n;
} sink;

static void put(sink *k, const void *p, size_t n) {
    if (k->n < k->cap) {
        size_t m = k->cap - k->n < n ? k->cap - k->n : n;
        memcpy(k->buf + k->n, p, m);
    }
    k->n += n;
}

static const uint8_t FFFD[3] = {0xEF, 0xBF, 0xBD};

/* Might s[0..n) (n < full length) still become a valid sequence? */
static int utf8_valid_prefix(const uint8_t *s, size_t n) {
    uint8_t c = s[0];
    int need;
    uint8_t lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) need = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else
        return 0;
    if (n >= (size_t)need) return 0;
    if (n >= 2 && (s[1] < lo || s[1] > hi)) return 0;
    for (size_t i = 2; i < n; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    return 1;
}

/* Push bytes through the UTF-8 assembler: whole code points go to the sink, an unfinished
 * tail stays in d->pending. */
static void utf8_push(etch_detokenizer *d, const uint8_t *p, size_t n, sink *k) {
    int whatwg = d->tok->utf8_policy == 1;
    size_t i = 0;
    while (i < n || d->n_pending) {
        if (d->n_pending) {
            if (i >= n) return; /* wait for more */
            d->pending[d->n_pending++] = p[i++];
            uint8_t *q = d->pending;
            int l = tok_utf8_valid_len(q, d->n_pending);
            if (l > 0) {
                put(k, q, (size_t)l);
                d->n_pending = 0;
                continue;
            }
            if (utf8_valid_prefix(q, d->n_pending)) continue;
            /* broken: the last byte did not fit */
            uint32_t np = d->n_pending - 1;
            if (whatwg) {
                put(k, FFFD, 3); /* one for the maximal subpart */
                d->n_pending = 0;
                i--; /* re-read the breaking byte */
            } else {
                /* one U+FFFD for the lead byte, then re-read the rest */
                put(k, FFFD, 3);
                uint8_t rest[4];
                memcpy(rest, q + 1, np); /* the bytes after the lead, `last` included */
                d->n_pending = 0;
                utf8_push(d, rest, np, k);
            }
            continue;
        }
        /* fast path: no pending bytes */
        int l = tok_utf8_valid_len(p + i, n - i);
        if (l > 0) {
            put(k, p + i, (size_t)l);
            i += (size_t)l;
            continue;
        }
        if (utf8_valid_prefix(p + i, n - i)) {
            memcpy(d->pending, p + i, n - i);
            d->n_pending = (uint32_t)(n - i);
            return;
        }
        put(k, FFFD, 3);
        if (whatwg) {
            /* maximal subpart: a valid prefix broken by p[i+j] counts as one */
            size_t j = 1;
            while (i + j < n && utf8_valid_prefix(p + i, j + 1)) j++;
            i += j;
        } else {
            i += 1;
        }
    }
}

void etch_detokenizer_init(etch_detokenizer *d, const etch_tokenizer *tok) {
    memset(d, 0, sizeof *d);
    d->tok = tok;
}

size_t etch_detokenizer_max_output(const etch_tokenizer *tok) {
    return 3 * ((size_t)tok->max_token_len + 4);
}

/* Piece bytes to the sink through the assembler, with sentencepiece's mark -> space. */
static void push_piece(etch_detokenizer *d, const uint8_t *s, size_t n, sink *k) {
    if (d->tok->format != ETCH_TOKENIZER_SENTENCEPIECE) {
        utf8_push(d, s, n, k);
        return;
    }
    size_t a = 0;
    for (size_t i = 0; i + 3 <= n;) {
        if (s[i] == 0xE2 && s[i + 1] == 0x96 && s[i + 2] == 0x81) {
            utf8_push(d, s + a, i - a, k);
            utf8_push(d, (const uint8_t *)" ", 1, k);
            i += 3;
            a = i;
        } else {
            i++;
        }
    }
    utf8_push(d, s + a, n - a, k);
}

static void flush(etch_detokenizer *d, sink *k);

static etch_status feed(etch_detokenizer *d, int32_t id, sink *k) {
    const etch_tokenizer *t = d->tok;
    if (id < 0 || id >= t->n_tokens)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "detokenize: id %d outside [0, %d)", (int)id,
                        (int)t->n_tokens);
    const tok_token *tk = &t->tokens[id];
    const uint8_t *s = tok_text(t, id);
    size_t n = tk->len;
    switch (tk->type) {
    case TT_CONTROL:
        flush(d, k); /* sentencepiece decodes each run of byte pieces on its own */
        return ETCH_OK;
    case TT_UNKNOWN:
        if (t->unk_surface) {
            s = (const uint8_t *)t->unk_surface;
            n = t->unk_surface_len;
        }
        d->started = 1;
        utf8_push(d, s, n, k);
        return ETCH_OK;
    case TT_BYTE:
        d->started = 1;
        utf8_push(d, &tk->byte, 1, k);
        return ETCH_OK;
    case TT_SPECIAL:
        if (t->format == ETCH_TOKENIZER_HF_JSON) flush(d, k); /* HF decodes added tokens apart */
        utf8_push(d, s, n, k);
        return ETCH_OK;
    default:
        break;
    }
    if (!d->started && t->strip_first_space) {
        if (t->escape_ws && n >= 3 && memcmp(s, "\xE2\x96\x81", 3) == 0) s += 3, n -= 3;
        else if (!t->escape_ws && n >= 1 && s[0] == ' ') s += 1, n -= 1;
    }
    /* sentencepiece: with remove_extra_whitespaces every piece drops its leading space while
     * the text is still empty; otherwise only the first piece does */
    d->started = !t->remove_extra_ws || n > 0;
    push_piece(d, s, n, k);
    return ETCH_OK;
}

static void flush(etch_detokenizer *d, sink *k) {
    if (!d->n_pending) return;
    if (d->tok->utf8_policy == 1) {
        put(k, FFFD, 3);
    } else {
        for (uint32_t i = 0; i < d->n_pending; i++) put(k, FFFD, 3);
    }
    d->n_pending = 0;
}

etch_status etch_detokenizer_feed(etch_detokenizer *d, int32_t id, char *buf, size_t cap,
                                  size_t *len) {
    if (!d || !d->tok || (!buf && cap) || !len)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "detokenizer: NULL argument");
    sink k = {(uint8_t *)buf, cap, 0};
    etch_detokenizer save = *d;
    etch_status st = feed(d, id, &k);
    if (st != ETCH_OK) return st;
    if (k.n > cap) {
        *d = save; /* nothing consumed: the caller may retry with a bigger buffer */
        *len = k.n;
        return etch_err(ETCH_ERR_OUT_OF_RESOURCES, "detokenizer: %zu bytes do not fit in %zu",
                        k.n, cap);
    }
    *len = k.n;
    return ETCH_OK;
}

etch_status etch_detokenizer_flush(etch_detokenizer *d, char *buf, size_t cap, size_t *len) {
    if (!d || !d->tok || (!buf && cap) || !len)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "detokenizer: NULL argument");
    sink k = {(uint8_t *)buf, cap, 0};
    etch_detokenizer save = *d;
    flush(d, &k);
    *len = k.n;
    if (k.n > cap) {
        *d = save;
        return etch_err(ETCH_ERR_OUT_OF_RESOURCES, "detokenizer: %zu bytes do not fit in %zu",
                        k.n, cap);
    }
    return ETCH_OK;
}

etch_status etch_tokenizer_decode(const etch_tokenizer *t, const int32_t *ids, size_t n, char *buf,
                                  size_t cap, size_t *len) {
    if (!t || (!ids && n) || (!buf && cap) || !len)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "tokenizer decode: NULL argument");
    etch_detokenizer d;
    etch_detokenizer_init(&d, t);
    sink k = {(uint8_t *)buf, cap, 0};
    for (size_t i = 0; i < n; i++) {
        etch_status st = feed(&d, ids[i], &k);
        if (st != ETCH_OK) return st;
    }
    flush(&d, &k);
    *len = k.n;
    if (k.n > cap)
        return etch_err(ETCH_ERR_OUT_OF_RESOURCES, "tokenizer decode: %zu bytes do not fit in %zu",
                        k.n, cap);
    return ETCH_OK;
}

etch_status etch_tokenizer_decode_token(const etch_tokenizer *t, int32_t prev_id, int32_t id,
                                        char *buf, size_t cap, size_t *len) {
    if (!t || (!buf && cap) || !len)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "tokenizer decode_token: NULL argument");
    if (id < 0 || id >= t->n_tokens)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "tokenizer decode_token: id %d outside [0, %d)",
                        (int)id, (int)t->n_tokens);
    const tok_token *tk = &t->tokens[id];
    sink k = {(uint8_t *)buf, cap, 0};
    const uint8_t *s = tok_text(t, id);
    size_t n = tk->len;
    if (tk->type == TT_CONTROL) {
        n = 0;
    } else if (tk->type == TT_BYTE) {
        put(&k, &tk->byte, 1);
        n = 0;
    } else if (tk->type == TT_UNKNOWN && t->unk_surface) {
        s = (const uint8_t *)t->unk_surface;
        n = t->unk_surface_len;
    } else if (t->strip_first_space &&
               (prev_id < 0 || (prev_id < t->n_tokens && t->tokens[prev_id].type == TT_CONTROL))) {
        if (t->escape_ws && n >= 3 && memcmp(s, "\xE2\x96\x81", 3) == 0) s += 3, n -= 3;
        else if (!t->escape_ws && n >= 1 && s[0] == ' ') s += 1, n -= 1;
    }
    if (n) {
        if (t->format == ETCH_TOKENIZER_SENTENCEPIECE && tk->type != TT_UNKNOWN) {
            for (size_t i = 0; i < n;) {
                if (n - i >= 3 && s[i] == 0xE2 && s[i + 1] == 0x96 && s[i + 2] == 0x81) {
                    put(&k, " ", 1);
                    i += 3;
                } else {
                    put(&k, s + i, 1);
                    i++;
                }
            }
        } else {
            put(&k, s, n);
        }
    }
    *len = k.n;
    if (k.n > cap)
        return etch_err(ETCH_ERR_OUT_OF_RESOURCES, "tokenizer decode_token: %zu bytes do not fit in %zu",
                        k.n, cap);
    return ETCH_OK;
}
