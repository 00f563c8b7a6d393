/* The default model's tokenizer (models/default/tokenizer.model) read by etch's sentencepiece
 * reader agrees with Debian's python3-sentencepiece (ref_tokenizer.py) on generated stories
 * and edge cases: identical ids; etch's decode of the reference ids equals the reference's
 * decode; decode(encode(s)) == s wherever the reference gives s back.
 *
 *   test_default_tokenizer TOKENIZER.model STORIES.txt IDS.txt     (DEC.txt beside IDS.txt as
 *                                                                   stories_dec.txt) */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etch/llm.h"
#include "etch_test.h"

#define MAX_IDS 65536

static int read_line(FILE *f, char **buf, size_t *cap, size_t *len) {
    ssize_t n = getline(buf, cap, f);
    if (n < 0) return 0;
    if (n > 0 && (*buf)[n - 1] == '\n') (*buf)[--n] = '\0';
    *len = (size_t)n;
    return 1;
}

static size_t parse_ids(const char *s, int32_t *ids, size_t cap) {
    size_t n = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s) break;
        if (n < cap) ids[n] = (int32_t)v;
        n++;
        s = end;
    }
    return n;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s TOKENIZER.model STORIES.txt IDS.txt\n", argv[0]);
        return 2;
    }
    char dec_path[4096];
    const char *slash = strrchr(argv[3], '/');
    size_t dir = slash ? (size_t)(slash - argv[3] + 1) : 0;
    if (dir + 32 > sizeof dec_path) {
        fprintf(stderr, "path too long: %s\n", argv[3]);
        return 2;
    }
    memcpy(dec_path, argv[3], dir);
    strcpy(dec_path + dir, "stories_dec.txt");

    etch_tokenizer *tok = NULL;
    CHECK_OK(etch_tokenizer_open_file(argv[1], NULL, &tok));
    if (!tok) {
        fprintf(stderr, "%s: %s\n", argv[1], etch_last_error());
        return etch_test_finish();
    }
    CHECK(etch_tokenizer_get_format(tok) == ETCH_TOKENIZER_SENTENCEPIECE);
    CHECK(etch_tokenizer_vocab_size(tok) == 1024);
    CHECK(etch_tokenizer_bos_id(tok) == 1);
    CHECK(etch_tokenizer_eos_id(tok) == 2);

    FILE *fs = fopen(argv[2], "rb"), *fi = fopen(argv[3], "rb"), *fd = fopen(dec_path, "rb");
    CHECK_MSG(fs && fi && fd, "cannot open %s / %s / %s", argv[2], argv[3], dec_path);
    if (!fs || !fi || !fd) return etch_test_finish();

    int32_t *ref = malloc(MAX_IDS * sizeof *ref), *got = malloc(MAX_IDS * sizeof *got);
    char *dec = malloc(1 << 20);
    char *ls = NULL, *li = NULL, *ld = NULL;
    size_t cs = 0, ci = 0, cd = 0, ns = 0, ni = 0, nd = 0;
    size_t count = 0, same_ids = 0, same_dec = 0, round = 0, round_checked = 0;
    CHECK(ref && got && dec);
    while (ref && got && dec && read_line(fs, &ls, &cs, &ns)) {
        CHECK(read_line(fi, &li, &ci, &ni));
        CHECK(read_line(fd, &ld, &cd, &nd));
        count++;
        size_t n_ref = parse_ids(li, ref, MAX_IDS), n_got = 0;
        CHECK(n_ref <= MAX_IDS);
        CHECK_OK(etch_tokenizer_encode(tok, ls, ns, 0, got, MAX_IDS, &n_got));
        if (n_got == n_ref && memcmp(got, ref, n_ref * sizeof *ref) == 0) {
            same_ids++;
        } else if (count - same_ids <= 5) {
            fprintf(stderr, "ids differ on line %zu: '%.80s' (%zu vs %zu ids)\n", count, ls,
                    n_got, n_ref);
        }
        size_t n_dec = 0;
        CHECK_OK(etch_tokenizer_decode(tok, ref, n_ref, dec, 1 << 20, &n_dec));
        if (n_dec == nd && memcmp(dec, ld, nd) == 0) {
            same_dec++;
        } else {
            fprintf(stderr, "decode differs on line %zu: '%.80s'\n", count, ld);
        }
        if (nd == ns && memcmp(ld, ls, ns) == 0) { /* the reference round-trips */
            round_checked++;
            size_t n2 = 0;
            CHECK_OK(etch_tokenizer_decode(tok, got, n_got, dec, 1 << 20, &n2));
            if (n2 == ns && memcmp(dec, ls, ns) == 0) round++;
        }
    }
    printf("default tokenizer: %zu strings, ids identical %zu, decode identical %zu, "
           "round trip %zu of %zu\n", count, same_ids, same_dec, round, round_checked);
    CHECK(count >= 2000);
    CHECK(same_ids == count);
    CHECK(same_dec == count);
    CHECK(round == round_checked);
    CHECK(round_checked >= 2000);
    free(ls);
    free(li);
    free(ld);
    free(ref);
    free(got);
    free(dec);
    fclose(fs);
    fclose(fi);
    fclose(fd);
    etch_tokenizer_close(tok);
    return etch_test_finish();
}
