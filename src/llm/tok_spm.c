/* sentencepiece ModelProto, read with a minimal protobuf walker (varints, fixed32/64,
 * length-delimited; unknown fields skipped). Field numbers from sentencepiece_model.proto:
 *   ModelProto      1 pieces (SentencePiece)  2 trainer_spec  3 normalizer_spec
 *   SentencePiece   1 piece (string)  2 score (float)  3 type (enum, default NORMAL=1)
 *   TrainerSpec     3 model_type (UNIGRAM=1 default, BPE=2, WORD=3, CHAR=4)
 *                   24 treat_whitespace_as_suffix  35 byte_fallback
 *                   40 unk_id (0)  41 bos_id (1)  42 eos_id (2)  43 pad_id (-1)  44 unk_surface
 *   NormalizerSpec  1 name  2 precompiled_charsmap  3 add_dummy_prefix (true)
 *                   4 remove_extra_whitespaces (true)  5 escape_whitespaces (true) */
#include <string.h>

#include "llm/tok_internal.h"
#include "runtime/error.h"

typedef struct pb {
    const uint8_t *p, *end, *base;
} pb;

static int pb_varint(pb *r, uint64_t *v) {
    uint64_t x = 0;
    for (int s = 0; s < 70; s += 7) {
        if (r->p >= r->end) return 0;
        uint8_t b = *r->p++;
        x |= (uint64_t)(b & 0x7F) << s;
        if (!(b & 0x80)) {
            *v = x;
            return 1;
        }
    }
    return 0;
}

/* Next field: number, wire type, and for wire type 2 the payload; scalar value in *v. */
typedef struct pb_field {
    uint32_t num, wire;
    uint64_t v;
    const uint8_t *data;
    size_t len;
} pb_field;

static int pb_next(pb *r, pb_field *f, size_t *bad) {
    uint64_t key;
    if (!pb_varint(r, &key)) goto fail;
    f->num = (uint32_t)(key >> 3);
    f->wire = (uint32_t)(key & 7);
    switch (f->wire) {
    case 0:
        if (!pb_varint(r, &f->v)) goto fail;
        return 1;
    case 1:
        if (r->end - r->p < 8) goto fail;
        f->v = 0;
        for (int i = 7; i >= 0; i--) f->v = f->v << 8 | r->p[i];
        r->p += 8;
        return 1;
    case 5:
        if (r->end - r->p < 4) goto fail;
        f->v = (uint64_t)r->p[0] | (uint64_t)r->p[1] << 8 | (uint64_t)r->p[2] << 16 |
               (uint64_t)r->p[3] << 24;
        r->p += 4;
        return 1;
    case 2: {
        uint64_t len;
        if (!pb_varint(r, &len) || len > (uint64_t)(r->end - r->p)) goto fail;
        f->data = r->p;
        f->len = (size_t)len;
        r->p += len;
        return 1;
    }
    default: goto fail;
    }
fail:
    *bad = (size_t)(r->p - r->base);
    return 0;
}

static float pb_float(uint64_t v) {
    uint32_t b = (uint32_t)v;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* Cheap check for detection: the first field is a length-delimited field 1 (a piece)
 * whose own first field is a string field 1. */
int tok_looks_like_spm(const uint8_t *d, size_t size) {
    pb r = {d, d + size, d};
    pb_field f = {0};
    size_t bad;
    if (!pb_next(&r, &f, &bad) || f.num != 1 || f.wire != 2) return 0;
    pb q = {f.data, f.data + f.len, d};
    pb_field g = {0};
    if (!pb_next(&q, &g, &bad) || g.num != 1 || g.wire != 2) return 0;
    return 1;
}

static const uint8_t SPACE_MARK[3] = {0xE2, 0x96, 0x81}; /* U+2581 */

etch_status tok_load_spm(etch_tokenizer *t, const uint8_t *d, size_t size) {
    pb r = {d, d + size, d};
    pb_field f = {0};
    size_t bad = 0;
    int32_t n = 0;
    size_t bytes = 0;
    /* pass 1: count pieces and read the specs */
    int model_type = 1, byte_fallback = 0, ws_suffix = 0;
    int64_t unk = 0, bos = 1, eos = 2, pad = -1;
    const uint8_t *surf = (const uint8_t *)" \xE2\x81\x87 ";
    size_t surf_len = 5;
    int add_dummy = 1, rm_extra = 1, escape = 1;
    size_t charsmap_len = 0;
    const uint8_t *name = NULL;
    size_t name_len = 0;
    while (r.p < r.end) {
        if (!pb_next(&r, &f, &bad)) goto malformed;
        if (f.num == 1 && f.wire == 2) {
            pb q = {f.data, f.data + f.len, d};
            pb_field g = {0};
            while (q.p < q.end) {
                if (!pb_next(&q, &g, &bad)) goto malformed;
                if (g.num == 1 && g.wire == 2) bytes += g.len;
            }
            if (n == TOK_MAX_IDS)
                return etch_err(ETCH_ERR_INVALID_PROGRAM,
                                "sentencepiece model: more than %d pieces", TOK_MAX_IDS);
            n++;
        } else if (f.num == 2 && f.wire == 2) {
            pb q = {f.data, f.data + f.len, d};
            pb_field g = {0};
            while (q.p < q.end) {
                if (!pb_next(&q, &g, &bad)) goto malformed;
                if (g.wire == 0) {
                    switch (g.num) {
                    case 3: model_type = (int)g.v; break;
                    case 24: ws_suffix = g.v != 0; break;
                    case 35: byte_fallback = g.v != 0; break;
                    case 40: unk = (int32_t)g.v; break;
                    case 41: bos = (int32_t)g.v; break;
                    case 42: eos = (int32_t)g.v; break;
                    case 43: pad = (int32_t)g.v; break;
                    default: break;
                    }
                } else if (g.wire == 2 && g.num == 44) {
                    surf = g.data;
                    surf_len = g.len;
                }
            }
        } else if (f.num == 3 && f.wire == 2) {
            pb q = {f.data, f.data + f.len, d};
            pb_field g = {0};
            while (q.p < q.end) {
                if (!pb_next(&q, &g, &bad)) goto malformed;
                if (g.wire == 0) {
                    if (g.num == 3) add_dummy = g.v != 0;
                    if (g.num == 4) rm_extra = g.v != 0;
                    if (g.num == 5) escape = g.v != 0;
                } else if (g.wire == 2) {
                    if (g.num == 1) {
                        name = g.data;
                        name_len = g.len;
                    }
                    if (g.num == 2) charsmap_len = g.len;
                }
            }
        }
    }
    if (n == 0) return etch_err(ETCH_ERR_INVALID_PROGRAM, "sentencepiece model: no pieces");
    if (model_type != 1 && model_type != 2)
        return etch_err(ETCH_ERR_NOT_SUPPORTED,
                        "sentencepiece model: model_type %d (only UNIGRAM=1 and BPE=2)",
                        model_type);
    if (ws_suffix)
        return etch_err(ETCH_ERR_NOT_SUPPORTED,
                        "sentencepiece model: treat_whitespace_as_suffix is not supported");
    if (charsmap_len > 0)
        return etch_err(ETCH_ERR_NOT_SUPPORTED,
                        "sentencepiece model: normalization rule '%.*s' (a precompiled "
                        "charsmap) is not supported; only 'identity'",
                        (int)(name_len > 64 ? 64 : name_len), name ? (const char *)name : "");

    etch_status st = tok_alloc_tokens(t, n, bytes + surf_len + 1);
    if (st != ETCH_OK) return st;
    /* pass 2: pieces */
    r.p = d;
    int32_t i = 0;
    size_t so = 0;
    int has_user = 0;
    while (r.p < r.end) {
        pb_next(&r, &f, &bad);
        if (!(f.num == 1 && f.wire == 2)) continue;
        pb q = {f.data, f.data + f.len, d};
        pb_field g = {0};
        tok_token *tk = &t->tokens[i];
        tk->type = TT_NORMAL;
        tk->off = (uint32_t)so;
        while (q.p < q.end) {
            pb_next(&q, &g, &bad);
            if (g.num == 1 && g.wire == 2) {
                memcpy(t->strings + so, g.data, g.len);
                so += g.len;
                tk->len += (uint32_t)g.len;
            } else if (g.num == 2 && g.wire == 5) {
                tk->score = pb_float(g.v);
            } else if (g.num == 3 && g.wire == 0) {
                tk->type = (uint8_t)(g.v >= 1 && g.v <= 6 ? g.v : TT_NORMAL);
            }
        }
        if (tk->type == TT_BYTE) {
            const char *s = (const char *)(t->strings + tk->off);
            unsigned hex = 0;
            int ok = tk->len == 6 && s[0] == '<' && s[1] == '0' && s[2] == 'x' && s[5] == '>';
            for (int k = 3; ok && k < 5; k++) {
                char c = s[k];
                hex <<= 4;
                if (c >= '0' && c <= '9') hex |= (unsigned)(c - '0');
                else if (c >= 'A' && c <= 'F') hex |= (unsigned)(c - 'A' + 10);
                else ok = 0;
            }
            if (!ok)
                return etch_err(ETCH_ERR_INVALID_PROGRAM,
                                "sentencepiece model: byte piece %d is not <0xNN>", (int)i);
            tk->byte = (uint8_t)hex;
            t->byte_ids[hex] = i;
        }
        if (tk->type == TT_USER_DEFINED) has_user = 1;
        i++;
    }
    memcpy(t->strings + so, surf, surf_len);
    t->unk_surface = (const char *)(t->strings + so);
    t->unk_surface_len = (uint32_t)surf_len;

    t->model = model_type == 2 ? TOK_MODEL_BPE_SCORE : TOK_MODEL_UNIGRAM;
    t->unk_id = unk >= 0 && unk < n ? (int32_t)unk : -1;
    t->bos_id = bos >= 0 && bos < n ? (int32_t)bos : -1;
    t->eos_id = eos >= 0 && eos < n ? (int32_t)eos : -1;
    t->pad_id = pad >= 0 && pad < n ? (int32_t)pad : -1;
    t->add_dummy_prefix = add_dummy;
    t->remove_extra_ws = rm_extra;
    t->escape_ws = escape;
    t->strip_first_space = add_dummy || rm_extra;
    t->byte_fallback = byte_fallback;
    t->has_user_defined = has_user;
    t->spm_identity = 1;
    t->utf8_policy = 0;

    if (!tok_map_init(t, &t->pieces, (uint32_t)n))
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "sentencepiece model: out of memory");
    int first = 1;
    for (int32_t k = 0; k < n; k++) {
        const tok_token *tk = &t->tokens[k];
        if (tk->type == TT_NORMAL || tk->type == TT_USER_DEFINED) {
            tok_map_put(t, &t->pieces, k);
            if (tk->type == TT_NORMAL) {
                if (first || tk->score < t->min_score) t->min_score = tk->score;
                if (first || tk->score > t->max_score) t->max_score = tk->score;
                first = 0;
            }
        }
    }
    (void)SPACE_MARK;
    return ETCH_OK;
malformed:
    return etch_err(ETCH_ERR_INVALID_PROGRAM, "sentencepiece model: malformed protobuf at byte %zu",
                    bad);
}
