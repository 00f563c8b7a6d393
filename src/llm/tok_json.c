/* Minimal JSON cursor for tokenizer.json (see tok_json.h). */
#include <stdlib.h>
#include <string.h>

#include "llm/tok_internal.h"
#include "llm/tok_json.h"

static const char *ws(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    return p;
}

jtype j_type(jv v) {
    if (v.p >= v.end) return J_BAD;
    switch (*v.p) {
    case '{': return J_OBJ;
    case '[': return J_ARR;
    case '"': return J_STR;
    case 't': return J_TRUE;
    case 'f': return J_FALSE;
    case 'n': return J_NULL;
    default: return (*v.p == '-' || (*v.p >= '0' && *v.p <= '9')) ? J_NUM : J_BAD;
    }
}

static const char *skip_str(const char *p, const char *end) {
    p++; /* opening quote */
    while (p < end) {
        /* fast scan to the next quote or backslash */
        const char *q = p;
        while (q < end && *q != '"' && *q != '\\') q++;
        if (q >= end) return NULL;
        if (*q == '"') return q + 1;
        if (q + 1 >= end) return NULL;
        p = q + 2;
    }
    return NULL;
}

static int lit(const char *p, const char *end, const char *w) {
    size_t n = strlen(w);
    return (size_t)(end - p) >= n && memcmp(p, w, n) == 0;
}

const char *j_skip(const char *p, const char *end, int depth) {
    p = ws(p, end);
    if (p >= end || depth > 64) return NULL;
    switch (*p) {
    case '"': return skip_str(p, end);
    case 't': return lit(p, end, "true") ? p + 4 : NULL;
    case 'f': return lit(p, end, "false") ? p + 5 : NULL;
    case 'n': return lit(p, end, "null") ? p + 4 : NULL;
    case '{':
    case '[': {
        char close = *p == '{' ? '}' : ']';
        int obj = *p == '{';
        p = ws(p + 1, end);
        if (p < end && *p == close) return p + 1;
        for (;;) {
            if (obj) {
                p = ws(p, end);
                if (p >= end || *p != '"' || !(p = skip_str(p, end))) return NULL;
                p = ws(p, end);
                if (p >= end || *p != ':') return NULL;
                p++;
            }
            if (!(p = j_skip(p, end, depth + 1))) return NULL;
            p = ws(p, end);
            if (p >= end) return NULL;
            if (*p == ',') {
                p++;
                continue;
            }
            if (*p == close) return p + 1;
            return NULL;
        }
    }
    default: {
        const char *q = p;
        if (q < end && *q == '-') q++;
        while (q < end && ((*q >= '0' && *q <= '9') || *q == '.' || *q == 'e' || *q == 'E' ||
                           *q == '+' || *q == '-'))
            q++;
        return q > p ? q : NULL;
    }
    }
}

jit j_iter(jv v) {
    jit it;
    it.p = v.p + 1;
    it.end = v.end;
    it.first = 1;
    it.obj = v.p < v.end && *v.p == '{';
    it.bad = !(v.p < v.end && (*v.p == '{' || *v.p == '['));
    return it;
}

int j_next(jit *it, jv *key, jv *val) {
    if (it->bad) return 0;
    const char *p = ws(it->p, it->end);
    char close = it->obj ? '}' : ']';
    if (p >= it->end) goto bad;
    if (*p == close) return 0;
    if (!it->first) {
        if (*p != ',') goto bad;
        p = ws(p + 1, it->end);
    }
    it->first = 0;
    if (it->obj) {
        if (p >= it->end || *p != '"') goto bad;
        if (key) {
            key->p = p;
            key->end = it->end;
        }
        if (!(p = skip_str(p, it->end))) goto bad;
        p = ws(p, it->end);
        if (p >= it->end || *p != ':') goto bad;
        p = ws(p + 1, it->end);
    }
    val->p = p;
    val->end = it->end;
    if (!(p = j_skip(p, it->end, 1))) goto bad;
    it->p = p;
    return 1;
bad:
    it->bad = 1;
    return 0;
}

int j_get(jv obj, const char *key, jv *out) {
    if (j_type(obj) != J_OBJ) return 0;
    jit it = j_iter(obj);
    jv k, v;
    while (j_next(&it, &k, &v))
        if (j_str_eq(k, key)) {
            *out = v;
            return 1;
        }
    return 0;
}

static int hex4(const char *p, const char *end, uint32_t *v) {
    if (end - p < 4) return 0;
    uint32_t x = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        x <<= 4;
        if (c >= '0' && c <= '9') x |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') x |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') x |= (uint32_t)(c - 'A' + 10);
        else return 0;
    }
    *v = x;
    return 1;
}

long j_str(jv v, char *out, size_t cap) {
    if (j_type(v) != J_STR) return -1;
    const char *p = v.p + 1, *end = v.end;
    size_t n = 0;
    while (p < end && *p != '"') {
        uint8_t buf[4];
        size_t bl;
        if (*p != '\\') {
            const char *q = p;
            while (q < end && *q != '"' && *q != '\\') q++;
            if ((size_t)(q - p) > cap - n) return -1;
            memcpy(out + n, p, (size_t)(q - p));
            n += (size_t)(q - p);
            p = q;
            continue;
        }
        if (p + 1 >= end) return -1;
        char c = p[1];
        p += 2;
        switch (c) {
        case '"': buf[0] = '"'; bl = 1; break;
        case '\\': buf[0] = '\\'; bl = 1; break;
        case '/': buf[0] = '/'; bl = 1; break;
        case 'b': buf[0] = '\b'; bl = 1; break;
        case 'f': buf[0] = '\f'; bl = 1; break;
        case 'n': buf[0] = '\n'; bl = 1; break;
        case 'r': buf[0] = '\r'; bl = 1; break;
        case 't': buf[0] = '\t'; bl = 1; break;
        case 'u': {
            uint32_t cp, lo;
            if (!hex4(p, end, &cp)) return -1;
            p += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (end - p >= 6 && p[0] == '\\' && p[1] == 'u' && hex4(p + 2, end, &lo) &&
                    lo >= 0xDC00 && lo <= 0xDFFF) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    p += 6;
                } else {
                    cp = 0xFFFD;
                }
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                cp = 0xFFFD;
            }
            bl = (size_t)tok_utf8_put(cp, buf);
            break;
        }
        default: return -1;
        }
        if (bl > cap - n) return -1;
        memcpy(out + n, buf, bl);
        n += bl;
    }
    if (p >= end) return -1;
    return (long)n;
}

size_t j_str_raw_len(jv v) {
    const char *q = skip_str(v.p, v.end);
    return q ? (size_t)(q - v.p - 2) : 0;
}

int j_str_eq(jv v, const char *s) {
    char buf[256];
    long n = j_str(v, buf, sizeof buf);
    return n >= 0 && (size_t)n == strlen(s) && memcmp(buf, s, (size_t)n) == 0;
}

int j_bool(jv v, int dflt) {
    switch (j_type(v)) {
    case J_TRUE: return 1;
    case J_FALSE: return 0;
    default: return dflt;
    }
}

int j_int(jv v, long long *out) {
    if (j_type(v) != J_NUM) return 0;
    char *e;
    char buf[32];
    size_t n = 0;
    while (v.p + n < v.end && n < sizeof buf - 1 &&
           ((v.p[n] >= '0' && v.p[n] <= '9') || v.p[n] == '-'))
        n++;
    memcpy(buf, v.p, n);
    buf[n] = 0;
    long long x = strtoll(buf, &e, 10);
    if (e == buf) return 0;
    *out = x;
    return 1;
}

size_t j_offset(jv v, const char *base) { return (size_t)(v.p - base); }
