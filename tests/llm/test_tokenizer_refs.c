/* Tokenizers against reference implementations, on the strings written by gen_strings.py:
 *
 *   test_tokenizer_refs spm DATA FIXTURES   sentencepiece (.model: tok512, llama2 32000, and
 *                                           models trained by ref_spm.py) and llama2.c .bin
 *   test_tokenizer_refs hf DATA JSON        Hugging Face tokenizer.json (ref_hf.bin)
 *   test_tokenizer_refs tiktoken DATA       tiktoken rank files written by ref_node.mjs
 *
 * For every string: identical ids; our decode of the reference ids equals the reference's
 * decode; the streaming detokenizer equals the whole decode; decode(encode(s)) == s wherever
 * the reference's own decode gives s back. Prints one agreement line per tokenizer. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etch/llm.h"
#include "etch_test.h"

typedef struct blob {
    uint8_t *d;
    size_t n;
} blob;

static blob slurp(const char *path) {
    blob b = {NULL, 0};
    FILE *f = fopen(path, "rb");
    if (!f) return b;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    b.d = malloc((size_t)n + 1);
    if (b.d && fread(b.d, 1, (size_t)n, f) == (size_t)n) b.n = (size_t)n;
    fclose(f);
    return b;
}

static uint32_t rd(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

typedef struct str {
    const char *s;
    uint32_t n;
} str;

typedef struct ref {
    const int32_t *ids; /* unaligned-safe copy */
    uint32_t n_ids;
    const char *dec;
    uint32_t n_dec;
} ref;

static str *load_strings(blob b, uint32_t *count) {
    if (b.n < 8 || memcmp(b.d, "ETS1", 4) != 0) return NULL;
    uint32_t n = rd(b.d + 4);
    str *v = calloc(n ? n : 1, sizeof *v);
    size_t off = 8;
    for (uint32_t i = 0; i < n; i++) {
        v[i].n = rd(b.d + off);
        v[i].s = (const char *)b.d + off + 4;
        off += 4 + v[i].n;
    }
    *count = n;
    return v;
}

static ref *load_refs(blob b, uint32_t *count) {
    if (b.n < 8 || memcmp(b.d, "ETR1", 4) != 0) return NULL;
    uint32_t n = rd(b.d + 4);
    ref *v = calloc(n ? n : 1, sizeof *v);
    size_t off = 8;
    for (uint32_t i = 0; i < n; i++) {
        v[i].n_ids = rd(b.d + off);
        int32_t *ids = malloc((v[i].n_ids ? v[i].n_ids : 1) * sizeof(int32_t));
        memcpy(ids, b.d + off + 4, (size_t)v[i].n_ids * 4);
        v[i].ids = ids;
        off += 4 + (size_t)v[i].n_ids * 4;
        v[i].n_dec = rd(b.d + off);
        v[i].dec = (const char *)b.d + off + 4;
        off += 4 + v[i].n_dec;
    }
    *count = n;
    return v;
}

static void free_refs(ref *r, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) free((void *)r[i].ids);
    free(r);
}

static int32_t *g_ids;
static char *g_buf, *g_buf2;
enum { MAX_IDS = 1 << 16, MAX_TEXT = 1 << 20 };

static void print_escaped(const char *s, size_t n) {
    for (size_t i = 0; i < n && i < 160; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7F && c != '\\') fputc(c, stderr);
        else fprintf(stderr, "\\x%02X", c);
    }
    if (n > 160) fprintf(stderr, "...");
}

static void print_ids(const int32_t *ids, size_t n) {
    for (size_t i = 0; i < n && i < 40; i++) fprintf(stderr, "%s%d", i ? " " : "", ids[i]);
    if (n > 40) fprintf(stderr, " ...");
}

/* Streaming decode of ids into g_buf2; returns its length. */
static size_t stream_decode(const etch_tokenizer *tok, const int32_t *ids, size_t n) {
    etch_detokenizer d;
    etch_detokenizer_init(&d, tok);
    size_t total = 0, len;
    for (size_t i = 0; i < n; i++) {
        if (etch_detokenizer_feed(&d, ids[i], g_buf2 + total, MAX_TEXT - total, &len) != ETCH_OK)
            return (size_t)-1;
        total += len;
    }
    if (etch_detokenizer_flush(&d, g_buf2 + total, MAX_TEXT - total, &len) != ETCH_OK)
        return (size_t)-1;
    return total + len;
}

typedef struct stats {
    uint32_t strings, ids_equal, dec_equal, stream_equal, roundtrip_ok, roundtrip_cases;
    uint32_t reported;
} stats;

/* Compare one tokenizer with a reference file. flags: encode flags. */
static void compare(const char *name, etch_tokenizer *tok, const str *strs, uint32_t ns,
                    const ref *refs, uint32_t nr, uint32_t flags) {
    stats st = {0};
    CHECK_MSG(ns == nr, "%s: %u strings, %u references", name, ns, nr);
    for (uint32_t i = 0; i < ns && i < nr; i++) {
        size_t n = 0;
        etch_status s = etch_tokenizer_encode(tok, strs[i].s, strs[i].n, flags, g_ids, MAX_IDS, &n);
        st.strings++;
        int ok = s == ETCH_OK && n == refs[i].n_ids &&
                 memcmp(g_ids, refs[i].ids, n * sizeof(int32_t)) == 0;
        if (ok) st.ids_equal++;
        else if (st.reported++ < 8) {
            fprintf(stderr, "%s: string %u \"", name, i);
            print_escaped(strs[i].s, strs[i].n);
            fprintf(stderr, "\"\n  ours (%s): ", etch_status_str(s));
            print_ids(g_ids, s == ETCH_OK ? n : 0);
            fprintf(stderr, "\n  ref:  ");
            print_ids(refs[i].ids, refs[i].n_ids);
            size_t k = 0;
            while (k < n && k < refs[i].n_ids && g_ids[k] == refs[i].ids[k]) k++;
            fprintf(stderr, "\n  first difference at id %zu: ours", k);
            for (size_t j = k; j < n && j < k + 8; j++) fprintf(stderr, " %d", g_ids[j]);
            fprintf(stderr, " ref");
            for (size_t j = k; j < refs[i].n_ids && j < k + 8; j++) fprintf(stderr, " %d", refs[i].ids[j]);
            fprintf(stderr, "\n");
        }
        /* decode of the reference ids */
        size_t dl = 0;
        s = etch_tokenizer_decode(tok, refs[i].ids, refs[i].n_ids, g_buf, MAX_TEXT, &dl);
        int dok = s == ETCH_OK && dl == refs[i].n_dec && memcmp(g_buf, refs[i].dec, dl) == 0;
        if (dok) st.dec_equal++;
        else if (st.reported++ < 8) {
            fprintf(stderr, "%s: decode of string %u's ids: ours \"", name, i);
            print_escaped(g_buf, dl);
            fprintf(stderr, "\"\n  ref \"");
            print_escaped(refs[i].dec, refs[i].n_dec);
            fprintf(stderr, "\"\n");
        }
        size_t sl = stream_decode(tok, refs[i].ids, refs[i].n_ids);
        if (s == ETCH_OK && sl == dl && memcmp(g_buf2, g_buf, dl) == 0) st.stream_equal++;
        /* round trip where the reference round-trips */
        if (refs[i].n_dec == strs[i].n && memcmp(refs[i].dec, strs[i].s, strs[i].n) == 0) {
            st.roundtrip_cases++;
            if (ok && dok) st.roundtrip_ok++;
        }
    }
    printf("%-10s %u strings: ids identical %u (%.2f%%), decode identical %u, streaming == "
           "decode %u, decode(encode(s)) == s %u of the %u the reference round-trips\n",
           name, st.strings, st.ids_equal, 100.0 * st.ids_equal / (st.strings ? st.strings : 1),
           st.dec_equal, st.stream_equal, st.roundtrip_ok, st.roundtrip_cases);
    CHECK_MSG(st.ids_equal == st.strings, "%s: %u of %u strings differ", name,
              st.strings - st.ids_equal, st.strings);
    CHECK_MSG(st.dec_equal == st.strings, "%s: %u decodes differ", name, st.strings - st.dec_equal);
    CHECK_MSG(st.stream_equal == st.strings, "%s: %u streamed decodes differ", name,
              st.strings - st.stream_equal);
    CHECK_MSG(st.roundtrip_ok == st.roundtrip_cases, "%s: %u round trips fail", name,
              st.roundtrip_cases - st.roundtrip_ok);
    CHECK(st.strings >= 10000);
}

/* Decode-only references (random id sequences). */
static void compare_decode(const char *name, etch_tokenizer *tok, const ref *refs, uint32_t nr) {
    uint32_t eq = 0, seq = 0, rep = 0;
    for (uint32_t i = 0; i < nr; i++) {
        size_t dl = 0;
        etch_status s = etch_tokenizer_decode(tok, refs[i].ids, refs[i].n_ids, g_buf, MAX_TEXT, &dl);
        if (s == ETCH_OK && dl == refs[i].n_dec && memcmp(g_buf, refs[i].dec, dl) == 0) eq++;
        else if (rep++ < 5) {
            fprintf(stderr, "%s: decode of [", name);
            print_ids(refs[i].ids, refs[i].n_ids);
            fprintf(stderr, "]: ours \"");
            print_escaped(g_buf, dl);
            fprintf(stderr, "\" ref \"");
            print_escaped(refs[i].dec, refs[i].n_dec);
            fprintf(stderr, "\"\n");
        }
        size_t sl = stream_decode(tok, refs[i].ids, refs[i].n_ids);
        if (s == ETCH_OK && sl == dl && memcmp(g_buf2, g_buf, dl) == 0) seq++;
    }
    printf("%-10s %u random id sequences: decode identical %u, streaming == decode %u\n", name, nr,
           eq, seq);
    CHECK_MSG(eq == nr, "%s: %u random decodes differ", name, nr - eq);
    CHECK_MSG(seq == nr, "%s: %u streamed random decodes differ", name, nr - seq);
}

static etch_tokenizer *open_tok(const char *path, const etch_tokenizer_params *p) {
    etch_tokenizer *t = NULL;
    etch_status s = etch_tokenizer_open_file(path, p, &t);
    CHECK_MSG(s == ETCH_OK, "open %s: %s %s", path, etch_status_str(s), etch_last_error());
    return s == ETCH_OK ? t : NULL;
}

static void run_ref(const char *name, const char *tok_path, const char *data, const char *ref_name,
                    const char *dec_name, const str *strs, uint32_t ns, uint32_t flags,
                    const etch_tokenizer_params *p) {
    char path[4096];
    etch_tokenizer *tok = open_tok(tok_path, p);
    if (!tok) return;
    snprintf(path, sizeof path, "%s/%s", data, ref_name);
    blob rb = slurp(path);
    uint32_t nr = 0;
    ref *refs = load_refs(rb, &nr);
    CHECK_MSG(refs != NULL, "cannot read %s", path);
    if (refs) compare(name, tok, strs, ns, refs, nr, flags);
    free_refs(refs, nr);
    free(rb.d);
    if (dec_name) {
        snprintf(path, sizeof path, "%s/%s", data, dec_name);
        rb = slurp(path);
        refs = load_refs(rb, &nr);
        CHECK_MSG(refs != NULL, "cannot read %s", path);
        if (refs) compare_decode(name, tok, refs, nr);
        free_refs(refs, nr);
        free(rb.d);
    }
    etch_tokenizer_close(tok);
}

/* llama2.c's .bin against sentencepiece on the same vocabulary. llama2.c's algorithm is meant
 * to agree except by design on: (ws) text that sentencepiece's remove_extra_whitespaces would
 * change (leading, trailing or repeated spaces; tok512 only), (mark) text holding U+2581, which
 * sentencepiece reads as a space, and (spell) text spelling a control or byte piece such as
 * "<s>" or "<0x0A>", which llama2.c may merge into that piece. */
static void run_llama2c_vs_spm(const char *name, const char *bin_path, const char *data,
                               const char *ref_name, const str *strs, uint32_t ns, int rm_ws) {
    char path[4096];
    etch_tokenizer *tok = open_tok(bin_path, NULL);
    if (!tok) return;
    snprintf(path, sizeof path, "%s/%s", data, ref_name);
    blob rb = slurp(path);
    uint32_t nr = 0;
    ref *refs = load_refs(rb, &nr);
    CHECK_MSG(refs != NULL && nr == ns, "cannot read %s", path);
    uint32_t eq = 0, cls[3] = {0}, cls_eq[3] = {0}, other_diff = 0, rep = 0, rt = 0, rt_ok = 0;
    for (uint32_t i = 0; refs && i < ns; i++) {
        const char *s = strs[i].s;
        uint32_t n = strs[i].n;
        int ws = 0, mark = 0, spell = 0;
        if (rm_ws && n && (s[0] == ' ' || s[n - 1] == ' ')) ws = 1;
        for (uint32_t k = 0; k + 1 < n; k++)
            if (rm_ws && s[k] == ' ' && s[k + 1] == ' ') ws = 1;
        for (uint32_t k = 0; k + 2 < n; k++)
            if ((uint8_t)s[k] == 0xE2 && (uint8_t)s[k + 1] == 0x96 && (uint8_t)s[k + 2] == 0x81) mark = 1;
        const char *lt = memchr(s, '<', n);
        if (lt && memchr(lt, '>', n - (size_t)(lt - s))) spell = 1;
        size_t m = 0;
        etch_status st = etch_tokenizer_encode(tok, s, n, 0, g_ids, MAX_IDS, &m);
        int same = st == ETCH_OK && m == refs[i].n_ids && memcmp(g_ids, refs[i].ids, m * 4) == 0;
        eq += same;
        int c = ws ? 0 : mark ? 1 : spell ? 2 : -1;
        if (c >= 0) {
            cls[c]++;
            cls_eq[c] += same;
        } else if (!same) {
            other_diff++;
            if (rep++ < 5) {
                fprintf(stderr, "%s: string %u \"", name, i);
                print_escaped(s, n);
                fprintf(stderr, "\"\n  llama2.c: ");
                print_ids(g_ids, m);
                fprintf(stderr, "\n  spm:      ");
                print_ids(refs[i].ids, refs[i].n_ids);
                fprintf(stderr, "\n");
            }
        }
        /* decode(encode(s)) == s with llama2.c's rules, where the text has no by-design class */
        if (st == ETCH_OK && c < 0) {
            size_t dl;
            rt++;
            if (etch_tokenizer_decode(tok, g_ids, m, g_buf, MAX_TEXT, &dl) == ETCH_OK && dl == n &&
                memcmp(g_buf, s, n) == 0)
                rt_ok++;
        }
    }
    printf("%-10s %u strings vs sentencepiece: ids identical %u (%.2f%%); outside the by-design "
           "classes %u differ; by design: ws %u (%u agree), U+2581 %u (%u agree), spelled "
           "pieces %u (%u agree); decode(encode(s)) == s %u of %u\n",
           name, ns, eq, 100.0 * eq / (ns ? ns : 1), other_diff, cls[0], cls_eq[0], cls[1],
           cls_eq[1], cls[2], cls_eq[2], rt_ok, rt);
    CHECK_MSG(other_diff == 0, "%s: %u strings differ outside the documented classes", name,
              other_diff);
    CHECK(rt_ok == rt);
    free_refs(refs, nr);
    free(rb.d);
    etch_tokenizer_close(tok);
}

int main(int argc, char **argv) {
    if (argc < 3 || (argc < 4 && strcmp(argv[1], "tiktoken") != 0)) {
        fprintf(stderr, "usage: %s spm DATA FIXTURES | hf DATA JSON | tiktoken DATA\n", argv[0]);
        return 2;
    }
    const char *mode = argv[1], *data = argv[2];
    char path[4096], path2[4096];
    snprintf(path, sizeof path, "%s/strings.bin", data);
    blob sb = slurp(path);
    uint32_t ns = 0;
    str *strs = load_strings(sb, &ns);
    if (!strs) {
        fprintf(stderr, "cannot read %s (run gen_strings.py)\n", path);
        return 1;
    }
    g_ids = malloc(MAX_IDS * sizeof(int32_t));
    g_buf = malloc(MAX_TEXT);
    g_buf2 = malloc(MAX_TEXT);
    if (strcmp(mode, "spm") == 0) {
        const char *fx = argv[3];
        static const char *const trained[] = {"uni", "uni_bf", "bpe_nobf"};
        snprintf(path, sizeof path, "%s/tok512.model", fx);
        run_ref("tok512", path, data, "ref_tok512.bin", "dec_tok512.bin", strs, ns, 0, NULL);
        snprintf(path, sizeof path, "%s/llama2_tokenizer_32000.model", fx);
        run_ref("llama2", path, data, "ref_llama2.bin", "dec_llama2.bin", strs, ns, 0, NULL);
        for (int k = 0; k < 3; k++) {
            char rn[64], dn[64];
            snprintf(path, sizeof path, "%s/%s.model", data, trained[k]);
            snprintf(rn, sizeof rn, "ref_%s.bin", trained[k]);
            snprintf(dn, sizeof dn, "dec_%s.bin", trained[k]);
            run_ref(trained[k], path, data, rn, dn, strs, ns, 0, NULL);
        }
        snprintf(path2, sizeof path2, "%s/tok512.bin", fx);
        run_llama2c_vs_spm("tok512.bin", path2, data, "ref_tok512.bin", strs, ns, 1);
        snprintf(path2, sizeof path2, "%s/llama2_tokenizer_32000.bin", fx);
        run_llama2c_vs_spm("llama2.bin", path2, data, "ref_llama2.bin", strs, ns, 0);
    } else if (strcmp(mode, "hf") == 0) {
        run_ref("hf-llama3", argv[3], data, "ref_hf_llama3.bin", NULL, strs, ns,
                ETCH_TOKENIZER_PARSE_SPECIAL, NULL);
    } else if (strcmp(mode, "tiktoken") == 0) {
        static const char *const names[] = {"cl100k", "o200k"};
        for (int k = 0; k < 2; k++) {
            /* specials from <name>.specials ("<id> <text>" lines) */
            etch_tokenizer_special sp[64];
            char texts[64][64];
            size_t nsp = 0;
            snprintf(path, sizeof path, "%s/%s_base.specials", data, names[k]);
            FILE *f = fopen(path, "r");
            CHECK_MSG(f != NULL, "cannot read %s", path);
            while (f && nsp < 64 && fscanf(f, "%d %63s", &sp[nsp].id, texts[nsp]) == 2) {
                sp[nsp].text = texts[nsp];
                nsp++;
            }
            if (f) fclose(f);
            etch_tokenizer_params p = etch_tokenizer_default_params();
            p.specials = sp;
            p.n_specials = nsp;
            char label[32], rn[64];
            snprintf(path, sizeof path, "%s/%s_base.tiktoken", data, names[k]);
            snprintf(label, sizeof label, "%s", names[k]);
            snprintf(rn, sizeof rn, "ref_%s.bin", names[k]);
            run_ref(label, path, data, rn, NULL, strs, ns, 0, &p); /* split from the size */
            snprintf(label, sizeof label, "%s+sp", names[k]);
            snprintf(rn, sizeof rn, "ref_%s_sp.bin", names[k]);
            run_ref(label, path, data, rn, NULL, strs, ns, ETCH_TOKENIZER_PARSE_SPECIAL, &p);
        }
        /* the other split families: gpt2's ranks (split from the size), cl100k's under qwen2 */
        etch_tokenizer_params p = etch_tokenizer_default_params();
        snprintf(path, sizeof path, "%s/gpt2.tiktoken", data);
        run_ref("gpt2", path, data, "ref_gpt2.bin", NULL, strs, ns, 0, &p);
        p.split = ETCH_TOKENIZER_SPLIT_QWEN2;
        snprintf(path, sizeof path, "%s/cl100k_base.tiktoken", data);
        run_ref("qwen2-split", path, data, "ref_cl100k_qwen2.bin", NULL, strs, ns, 0, &p);
    }
    free(strs);
    free(sb.d);
    free(g_ids);
    free(g_buf);
    free(g_buf2);
    return etch_test_finish();
}
