/* SHA-256 against the FIPS 180-4 example vectors (NIST's "Examples with intermediate values":
 * "abc", the empty message, the 448- and 896-bit messages, one million 'a'), split across
 * update calls in every way that matters (byte by byte, around the block and padding edges).
 *
 * With --files F...: print "HEX  F" per file (sha256sum's format) for run_sha256sum.sh. */
#include <stdlib.h>
#include <string.h>

#include "etch/sha256.h"
#include "etch/status.h"
#include "etch_test.h"

static const char *M448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
static const char *M896 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn"
                          "hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";

static void hex_of(const void *data, size_t n, char out[ETCH_SHA256_HEX_SIZE]) {
    uint8_t d[ETCH_SHA256_SIZE];
    etch_sha256_digest(data, n, d);
    etch_sha256_hex(d, out);
}

/* The same message fed in pieces of `step` bytes. */
static void hex_steps(const char *data, size_t n, size_t step, char out[ETCH_SHA256_HEX_SIZE]) {
    etch_sha256 h;
    uint8_t d[ETCH_SHA256_SIZE];
    etch_sha256_init(&h);
    for (size_t i = 0; i < n; i += step)
        etch_sha256_update(&h, data + i, n - i < step ? n - i : step);
    etch_sha256_final(&h, d);
    etch_sha256_hex(d, out);
}

static void test_vectors(void) {
    static const struct {
        const char *msg;
        const char *hex;
    } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {NULL, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {NULL, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        const char *m = v[i].msg ? v[i].msg : i == 2 ? M448 : M896;
        size_t n = strlen(m);
        char got[ETCH_SHA256_HEX_SIZE];
        hex_of(m, n, got);
        CHECK_MSG(strcmp(got, v[i].hex) == 0, "vector %zu: %s", i, got);
        for (size_t step = 1; step <= 65; step++) {
            hex_steps(m, n, step, got);
            CHECK_MSG(strcmp(got, v[i].hex) == 0, "vector %zu step %zu: %s", i, step, got);
        }
    }
    /* one million 'a' */
    size_t n = 1000000;
    char *a = malloc(n);
    CHECK(a != NULL);
    if (!a)
        return;
    memset(a, 'a', n);
    const char *want = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
    char got[ETCH_SHA256_HEX_SIZE];
    hex_of(a, n, got);
    CHECK_MSG(strcmp(got, want) == 0, "1M a: %s", got);
    size_t steps[] = {1, 63, 64, 65, 4096, 999999};
    for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
        hex_steps(a, n, steps[k], got);
        CHECK_MSG(strcmp(got, want) == 0, "1M a step %zu: %s", steps[k], got);
    }
    free(a);
}

/* Every length up to 200 (the padding edges 55/56/63/64 among them) hashes the same one-shot
 * and byte by byte; one block of 64 'a's against its published digest. */
static void test_padding_edges(void) {
    char buf[200];
    memset(buf, 'a', sizeof buf);
    for (size_t n = 0; n < sizeof buf; n++) {
        char one[ETCH_SHA256_HEX_SIZE], bytes[ETCH_SHA256_HEX_SIZE];
        hex_of(buf, n, one);
        hex_steps(buf, n, 1, bytes);
        CHECK_MSG(strcmp(one, bytes) == 0, "length %zu", n);
    }
    char got[ETCH_SHA256_HEX_SIZE];
    hex_of(buf, 64, got);
    CHECK(strcmp(got, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb") == 0);
}

static void test_hex(void) {
    uint8_t d[ETCH_SHA256_SIZE], e[ETCH_SHA256_SIZE];
    char hex[ETCH_SHA256_HEX_SIZE];
    etch_sha256_digest("abc", 3, d);
    etch_sha256_hex(d, hex);
    CHECK(etch_sha256_parse_hex(hex, e) && memcmp(d, e, sizeof d) == 0);
    CHECK(etch_sha256_parse_hex(
        "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD", e));
    CHECK(memcmp(d, e, sizeof d) == 0);
    memset(e, 0x5a, sizeof e);
    CHECK(!etch_sha256_parse_hex("", e));
    CHECK(!etch_sha256_parse_hex(NULL, e));
    CHECK(!etch_sha256_parse_hex("ba7816bf", e));
    /* 63 digits, 65 digits, a non-hex digit, a space */
    CHECK(!etch_sha256_parse_hex(
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015a", e));
    CHECK(!etch_sha256_parse_hex(
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad0", e));
    CHECK(!etch_sha256_parse_hex(
        "ga7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", e));
    CHECK(!etch_sha256_parse_hex(
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015a ", e));
    for (size_t i = 0; i < sizeof e; i++) /* untouched on failure */
        CHECK(e[i] == 0x5a);
}

static int hash_files(int argc, char **argv) {
    int rc = 0;
    for (int i = 0; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) {
            fprintf(stderr, "cannot open %s\n", argv[i]);
            rc = 1;
            continue;
        }
        etch_sha256 h;
        etch_sha256_init(&h);
        unsigned char buf[7919]; /* a prime: reads straddle block edges */
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0)
            etch_sha256_update(&h, buf, n);
        fclose(f);
        uint8_t d[ETCH_SHA256_SIZE];
        char hex[ETCH_SHA256_HEX_SIZE];
        etch_sha256_final(&h, d);
        printf("%s  %s\n", etch_sha256_hex(d, hex), argv[i]);
    }
    return rc;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--files") == 0)
        return hash_files(argc - 2, argv + 2);
    test_vectors();
    test_padding_edges();
    test_hex();
    return etch_test_finish();
}
