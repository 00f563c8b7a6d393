/* A minimal JSON reader for tokenizer.json: a cursor over the text that skips and walks
 * values in place (no tree, no allocation). Strings are unescaped on request. */
#ifndef ETCH_LLM_TOK_JSON_H
#define ETCH_LLM_TOK_JSON_H

#include <stddef.h>
#include <stdint.h>

typedef struct jv {
    const char *p, *end; /* p: first byte of the value (after whitespace); end: end of text */
} jv;

typedef enum { J_BAD = 0, J_OBJ, J_ARR, J_STR, J_NUM, J_TRUE, J_FALSE, J_NULL } jtype;

jtype j_type(jv v);
/* Pointer just past the value, NULL if malformed. */
const char *j_skip(const char *p, const char *end, int depth);
/* Member of an object by key; 0 if absent or malformed. */
int j_get(jv obj, const char *key, jv *out);

/* Iterate an object's members or an array's elements. */
typedef struct jit {
    const char *p, *end;
    int first, obj, bad;
} jit;
jit j_iter(jv v);
/* Next element (arrays: key untouched) or member; 0 at the end or on error (it->bad). */
int j_next(jit *it, jv *key, jv *val);

/* Unescape a string value into out (UTF-8; lone surrogates become U+FFFD). Returns the
 * length, or -1 if malformed or longer than cap. */
long j_str(jv v, char *out, size_t cap);
/* Raw length of a string value's contents (an upper bound of its unescaped length). */
size_t j_str_raw_len(jv v);
int j_str_eq(jv v, const char *s); /* the unescaped string equals s (short strings) */
int j_bool(jv v, int dflt);
int j_int(jv v, long long *out);
size_t j_offset(jv v, const char *base);

#endif
