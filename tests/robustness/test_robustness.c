/*
 * Robustness corpus, generated in memory from every fixture and replayed in process:
 *
 *   for each target (every file in fixtures/pte, the program embedded in each .bpte, and the
 *   .ptd of a .pte/.ptd pair, mutated while its partner stays intact):
 *     - the original bytes (baseline: must load and run, or fail as the fixture intends)
 *     - a truncation at every byte length (the cut-off tail is poisoned under ASan, so a
 *       read past the end of the shortened buffer is a sanitizer report)
 *     - 2,000 single-bit flips in the structural bytes (flatbuffer and headers, without
 *       payload blobs such as weights or bundled tensor data) plus 50 over the whole file,
 *       from a seeded PRNG (deterministic)
 *     - every offset-like site found by walking the flatbuffer with its schema (root offset,
 *       uoffsets, soffsets, vtable entries, vector/string lengths, union tags, index and size
 *       scalars, header fields) overwritten with boundary values (0, 1, -1, INT_MAX, INT_MIN,
 *       size, size-1, size+1, orig±1, orig+4, random)
 *   plus every file in tests/robustness/regressions (inputs that once broke something).
 *
 * Each case runs rob_run (rob_case.h): open, verify, load every method with memory sized
 * from its metadata, set inputs, execute twice (the second time on a background job), read
 * the outputs. Every 53rd case (across all mutation classes, the baseline first) is also
 * installed into a model store (etch/store.h): a program that does not open must be refused,
 * an installed one served by the full check with the very bytes given, and a refused one
 * must leave the version served before. A case passes when every
 * call ends in ETCH_OK or a known error with a message; memory errors and leaks are the
 * sanitizers' to report (this test installs no signal handlers).
 *
 * Usage: test_robustness FIXTURES_PTE_DIR REGRESSIONS_DIR [--only WHAT] [--flips N]
 * WHAT: FILE (every target made from one fixture), FILE@file (the file itself),
 * FILE@embedded (a .bpte's program), FILE@ptd (its .ptd partner), or "regressions". ctest runs
 * one test per target so that they spread over the cores.
 */
#if !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etch/backends.h"
#include "etch/bundled.h"
#include "etch/sha256.h"
#include "etch/store.h"
#include "runtime/error.h" /* etch_err_clear */
#include "etch/etch.h"
#include "etch/kernels.h"
#include "etch_test.h"
#include "format/pte.h" /* etch_bpte_program: where a .bpte keeps its program */
#include "rob_case.h"
#include "rob_mutate.h"

#if defined(__SANITIZE_ADDRESS__)
#define ROB_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ROB_ASAN 1
#endif
#endif
#ifdef ROB_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define STRUCT_FLIPS 2000
#define ANY_FLIPS 50

typedef struct buf {
    uint8_t *data; /* exact size, 16-byte aligned */
    size_t size;
} buf;

/* A mutation target: `mut` is mutated; `prog`/`ptd` name the buffers passed to rob_run, one
 * of which is `mut`. */
typedef struct target {
    char name[160];
    buf *mut;
    rob_schema schema;
    const buf *prog;
    const buf *ptd;
    /* Where the focused bit flips go, before the payload blobs are cut out: [lo, hi) */
    rob_range include[2];
    int ninclude;
    /* structure inside a blob, mutated like the program's own: an XNNPACK payload's header
     * and XNNGraph flatbuffer */
    rob_range keep[2];
    int nkeep;
    /* memory cap of the baseline run when above the cases' (0: the same). xnnpack_simple_cnn
     * needs 110 MB at its 1024x1024 input bound: its mutations (most refused by the cap) still
     * go through the verifier and the backend's payload reader in pool_size */
    size_t baseline_cap;
    int expect_open; /* expected status of the baseline's open, ETCH_OK: must run fully */
    int expect_load; /* ETCH_OK, or the status every method's load must fail with (below) */
    /* .bpte: the embedded program as the original wrapper yields it */
    const uint8_t *embedded;
    size_t embedded_size;
} target;

static rob_options g_opts;
static rob_stats g_total;

/* Fixtures that open and verify but cannot load in this build yet, each with the status its
 * load must give (the mutated corpus still runs through the parser and verifier). None today:
 * the Cortex-M keyword spotter loads since the cortex_m:: operators exist (issue 22). Once one
 * loads, its baseline check fails until it is taken off this list. */
static int expected_load_status(const char *name) {
    (void)name;
    return ETCH_OK;
}

/* The case being run, for the sanitizer's death callback: a report names the case, and with
 * ROB_CRASH_DIR set its bytes are saved there (ready for regressions/). */
static struct {
    char what[400];
    const uint8_t *prog, *ptd;
    size_t prog_size, ptd_size;
} g_current;

#ifdef ROB_ASAN
static void save(const char *dir, const char *suffix, const uint8_t *d, size_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/crash%s", dir, suffix);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(d, 1, n, f);
        fclose(f);
        fprintf(stderr, "robustness: case bytes written to %s\n", path);
    }
}

static void on_sanitizer_death(void) {
    fprintf(stderr, "robustness: the report above happened in case: %s\n", g_current.what);
    const char *dir = getenv("ROB_CRASH_DIR");
    if (dir && g_current.prog) {
        save(dir, ".pte", g_current.prog, g_current.prog_size);
        if (g_current.ptd)
            save(dir, ".ptd", g_current.ptd, g_current.ptd_size);
    }
}
#endif

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int read_file(const char *path, buf *out) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = NULL;
    if (n < 0 || posix_memalign(&p, 16, n ? (size_t)n : 1) != 0) {
        fclose(f);
        return 0;
    }
    if (n && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        fclose(f);
        return 0;
    }
    fclose(f);
    out->data = p;
    out->size = (size_t)n;
    return 1;
}

static int copy_buf(const void *data, size_t size, buf *out) {
    void *p = NULL;
    if (posix_memalign(&p, 16, size ? size : 1) != 0)
        return 0;
    memcpy(p, data, size);
    out->data = p;
    out->size = size;
    return 1;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static int name_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted regular file names of a directory (NULL-terminated; free with free_names). */
static char **list_dir(const char *dir, size_t *count) {
    DIR *d = opendir(dir);
    *count = 0;
    if (!d)
        return NULL;
    size_t cap = 16, n = 0;
    char **names = malloc(cap * sizeof *names);
    struct dirent *e;
    while (names && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (n + 1 >= cap) {
            char **nn = realloc(names, (cap *= 2) * sizeof *names);
            if (!nn)
                break;
            names = nn;
        }
        names[n] = malloc(strlen(e->d_name) + 1);
        if (names[n])
            strcpy(names[n++], e->d_name);
    }
    closedir(d);
    if (!names)
        return NULL;
    qsort(names, n, sizeof *names, name_cmp);
    names[n] = NULL;
    *count = n;
    return names;
}

static void free_names(char **names) {
    for (size_t i = 0; names && names[i]; i++)
        free(names[i]);
    free(names);
}

static uint64_t seed_of(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

/* ---- the same bytes through the model store ------------------------------------------- */

#define STORE_EVERY 53
static etch_store *g_store;
static char g_store_dir[256];
static unsigned long g_store_seen, g_store_tried, g_store_installed;

static bool file_sha256(const char *path, char hex[ETCH_SHA256_HEX_SIZE]) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    etch_sha256 h;
    etch_sha256_init(&h);
    static uint8_t b[65536];
    size_t n;
    while ((n = fread(b, 1, sizeof b, f)) > 0)
        etch_sha256_update(&h, b, n);
    fclose(f);
    uint8_t d[ETCH_SHA256_SIZE];
    etch_sha256_final(&h, d);
    etch_sha256_hex(d, hex);
    return true;
}

static void store_case(const uint8_t *prog, size_t size, const uint8_t *ptd, size_t ptd_size) {
    if (!g_store || g_store_seen++ % STORE_EVERY)
        return;
    g_store_tried++;
    etch_program *pp = NULL;
    bool opens = etch_program_open_buffer(prog, size, NULL, &pp) == ETCH_OK;
    etch_program_close(pp);
    etch_store_open_options oo = etch_store_default_open_options();
    etch_store_served before, after;
    bool had = etch_store_open_model(g_store, "m", &oo, &before) == ETCH_OK;
    etch_store_buffers files;
    memset(&files, 0, sizeof files);
    files.data[ETCH_STORE_PTE] = prog;
    files.size[ETCH_STORE_PTE] = size;
    files.data[ETCH_STORE_PTD] = ptd;
    files.size[ETCH_STORE_PTD] = ptd ? ptd_size : 0;
    char version[ETCH_STORE_NAME_MAX + 1];
    etch_err_clear();
    etch_status st = etch_store_install_buffer(g_store, "m", &files, NULL, version);
    if (st != ETCH_OK) {
        CHECK_MSG(etch_last_error()[0], "%s: store refused it without a message",
                  g_current.what);
        if (had) /* nothing changed: what was served before still is */
            CHECK_MSG(etch_store_open_model(g_store, "m", &oo, &after) == ETCH_OK &&
                          after.origin == before.origin &&
                          strcmp(after.version, before.version) == 0,
                      "%s: a refused install changed what the store serves", g_current.what);
        return;
    }
    g_store_installed++;
    CHECK_MSG(opens, "%s: the store installed a program that does not open", g_current.what);
    oo.check = ETCH_STORE_CHECK_FULL;
    CHECK_MSG(etch_store_open_model(g_store, "m", &oo, &after) == ETCH_OK &&
                  after.origin == ETCH_STORE_SERVED_CURRENT && !strcmp(after.version, version),
              "%s: installed version %s not served by the full check: %s", g_current.what,
              version, after.message);
    uint8_t d[ETCH_SHA256_SIZE];
    char want[ETCH_SHA256_HEX_SIZE], got[ETCH_SHA256_HEX_SIZE];
    etch_sha256_digest(prog, size, d);
    etch_sha256_hex(d, want);
    CHECK_MSG(file_sha256(after.pte_path, got) && strcmp(got, want) == 0,
              "%s: the store serves other bytes than were installed", g_current.what);
}

/* One case on the target's current bytes: `mut` shortened to `mut_size`, or with the
 * `mut_width` bytes at `mut_pos` changed. */
static void run_case(const target *t, size_t mut_size, size_t mut_pos, size_t mut_width,
                     rob_stats *st, const char *what, unsigned long arg) {
    const buf *p = t->prog, *d = t->ptd;
    size_t psize = p->size, dsize = d ? d->size : 0;
    if (t->mut == p)
        psize = mut_size;
    else
        dsize = mut_size;
    /* A .bpte whose mutation left the embedded program as it was (same bytes, same place):
     * the plain executes would repeat the baseline's exactly, so only the wrapper, the load
     * and the bundled checks run. */
    rob_options o = g_opts;
    if (t->embedded) {
        const uint8_t *prog = NULL;
        size_t prog_size = 0, err_off = 0;
        const char *err_what = NULL;
        if (etch_bpte_program(t->mut->data, mut_size, &prog, &prog_size, &err_off, &err_what) &&
            prog == t->embedded && prog_size == t->embedded_size &&
            (mut_width == 0 || mut_pos + mut_width <= (size_t)(prog - t->mut->data) ||
             mut_pos >= (size_t)(prog - t->mut->data) + prog_size))
            o.skip_plain_exec = 1;
        /* the bundled API is for the wrapper's mutations; a mutated program is exercised by
         * the plain executes already */
        o.bundled_checks = o.skip_plain_exec;
    }
    snprintf(g_current.what, sizeof g_current.what, "%s, %s %lu", t->name, what, arg);
    g_current.prog = p->data;
    g_current.prog_size = psize;
    g_current.ptd = d ? d->data : NULL;
    g_current.ptd_size = dsize;
    char why[512];
    int v = rob_run(p->data, psize, d ? d->data : NULL, dsize, &o, st, why, sizeof why);
    CHECK_MSG(v == 0, "%s: %s", g_current.what, why);
    if (!o.skip_plain_exec)
        store_case(p->data, psize, d ? d->data : NULL, dsize);
    g_current.prog = NULL;
}

/* Structure bytes of a .pte image: [0, program_size) (the whole image without eh00). */
static size_t pte_struct_end(const uint8_t *d, size_t size) {
    if (size >= 24 && memcmp(d + 8, "eh00", 4) == 0) {
        uint64_t ps = rob_read_le(d + 16, 8);
        return ps < size ? (size_t)ps : size;
    }
    return size;
}

/* The XH00 payloads' header + flatbuffer ranges (up to two) into t->keep. */
static void xnnpack_payloads(target *t, const uint8_t *d, size_t size) {
    for (size_t i = 4; i + 30 <= size && t->nkeep < 2; i++) {
        if (memcmp(d + i, "XH00", 4) != 0)
            continue;
        size_t h = i - 4;
        uint64_t fo = rob_read_le(d + h + 10, 4), fs = rob_read_le(d + h + 14, 4);
        if (h + fo + fs <= size)
            t->keep[t->nkeep++] = (rob_range){h, (size_t)(h + fo + fs)};
        i = h + 30;
    }
}

static int range_cmp(const void *a, const void *b) {
    const rob_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* `in` minus the (possibly overlapping) `cut` ranges, into out[max]; returns the count. */
static size_t subtract(rob_range in, rob_range *cut, size_t ncut, rob_range *out, size_t max) {
    size_t n = 0, at = in.lo;
    qsort(cut, ncut, sizeof *cut, range_cmp);
    for (size_t i = 0; i < ncut && at < in.hi; i++) {
        if (cut[i].hi <= at || cut[i].lo >= in.hi)
            continue;
        if (cut[i].lo > at && n < max)
            out[n++] = (rob_range){at, cut[i].lo};
        at = cut[i].hi;
    }
    if (at < in.hi && n < max)
        out[n++] = (rob_range){at, in.hi};
    return n;
}

static void run_target(target *t, int flips) {
    rob_stats st;
    memset(&st, 0, sizeof st);
    double t0 = now_s();
    buf *m = t->mut;
    uint64_t rng = seed_of(t->name);

    /* baseline */
    {
        rob_stats b;
        memset(&b, 0, sizeof b);
        char why[512];
        rob_options bo = g_opts;
        if (t->baseline_cap > bo.max_memory)
            bo.max_memory = t->baseline_cap;
        int v = rob_run(t->prog->data, t->prog->size, t->ptd ? t->ptd->data : NULL,
                        t->ptd ? t->ptd->size : 0, &bo, &b, why, sizeof why);
        CHECK_MSG(v == 0, "%s baseline: %s", t->name, why);
        if (t->expect_open != ETCH_OK) {
            CHECK_MSG(b.count[ROB_OPEN][t->expect_open] == 1, "%s baseline: expected %s at open",
                      t->name, etch_status_str((etch_status)t->expect_open));
        } else if (t->expect_load != ETCH_OK) {
            unsigned long other = 0;
            for (int s = 0; s < ROB_NUM_STAGES; s++)
                for (int k = 0; k < 256; k++)
                    if (!(s == ROB_LOAD && k == t->expect_load))
                        other += b.count[s][k];
            CHECK_MSG(b.count[ROB_LOAD][t->expect_load] > 0 && other == 0,
                      "%s baseline: expected every method's load to fail with %s (a feature "
                      "this build lacks: see the list in main); if it now runs, drop it from "
                      "that list", t->name, etch_status_str((etch_status)t->expect_load));
            if (other)
                rob_stats_print(&b, "      ");
        } else {
            unsigned long bad = 0;
            for (int s = 0; s < ROB_NUM_STAGES; s++)
                for (int k = 0; k < 256; k++)
                    if ((s != ROB_DONE && !(s == ROB_BUNDLED && k == 0)) && b.count[s][k])
                        bad += b.count[s][k];
            CHECK_MSG(bad == 0 && b.count[ROB_DONE][0] > 0,
                      "%s baseline: the original must load and run every method", t->name);
            if (bad)
                rob_stats_print(&b, "      ");
        }
        rob_stats_add(&st, &b);
    }

    /* truncations */
    double t_trunc = now_s();
    unsigned long ntrunc = 0;
    for (size_t len = 0; len < m->size; len++) {
        POISON(m->data + len, m->size - len);
#ifdef ROB_ASAN
        if (len == m->size / 2) /* the cut-off tail really is unreadable */
            CHECK(__asan_address_is_poisoned(m->data + len) &&
                  __asan_address_is_poisoned(m->data + m->size - 1) &&
                  (len == 0 || !__asan_address_is_poisoned(m->data + len - 1)));
#endif
        run_case(t, len, 0, 0, &st, "truncation to", (unsigned long)len);
        UNPOISON(m->data + len, m->size - len);
        ntrunc++;
    }

    /* the sites, and the structure bytes: the include ranges minus payload blobs */
    rob_sites sites;
    if (!rob_find_sites(m->data, m->size, t->schema, &sites)) {
        CHECK_MSG(0, "%s: out of memory collecting sites", t->name);
        return;
    }
    rob_range regions[64];
    size_t nregions = 0, struct_bytes = 0;
    for (int r = 0; r < t->ninclude; r++) {
        /* include[1] of a .bpte is its embedded program (one blob of the wrapper): cut that
         * program's own blobs instead */
        rob_sites inner;
        const rob_sites *from = &sites;
        size_t shift = 0;
        memset(&inner, 0, sizeof inner);
        if (r == 1 && t->embedded) {
            shift = (size_t)(t->embedded - m->data);
            if (rob_find_sites(t->embedded, t->embedded_size, ROB_SCHEMA_PTE, &inner))
                from = &inner;
        }
        rob_range cut[64];
        size_t ncut = 0;
        for (size_t b = 0; b < from->nblobs && ncut < 64; b++)
            cut[ncut++] = (rob_range){from->blobs[b].lo + shift, from->blobs[b].hi + shift};
        nregions += subtract(t->include[r], cut, ncut, regions + nregions, 64 - nregions);
        rob_sites_free(&inner);
    }
    for (int r = 0; r < t->nkeep && nregions < 64; r++)
        regions[nregions++] = t->keep[r];
    for (size_t r = 0; r < nregions; r++)
        struct_bytes += regions[r].hi - regions[r].lo;

    /* bit flips: focused on the structure, plus a few anywhere (mostly payload) */
    double t_flips = now_s();
    unsigned long nflips = 0;
    for (int i = 0; i < flips + ANY_FLIPS && m->size; i++) {
        size_t pos;
        if (i < flips && struct_bytes) {
            size_t k = (size_t)(rob_rand(&rng) % struct_bytes), r = 0;
            while (k >= regions[r].hi - regions[r].lo) {
                k -= regions[r].hi - regions[r].lo;
                r++;
            }
            pos = regions[r].lo + k;
        } else {
            pos = (size_t)(rob_rand(&rng) % m->size);
        }
        uint8_t bit = (uint8_t)(1u << (rob_rand(&rng) % 8));
        m->data[pos] ^= bit;
        run_case(t, m->size, pos, 1, &st, "bit flip at byte", (unsigned long)pos);
        m->data[pos] ^= bit;
        nflips++;
    }

    /* boundary values at every offset-like site */
    double t_over = now_s();
    unsigned long nover = 0, per_kind[SITE_NUM_KINDS] = {0};
    {
        for (size_t i = 0; i < sites.n; i++) {
            const rob_site *s = &sites.v[i];
            uint8_t saved[8];
            memcpy(saved, m->data + s->pos, s->width);
            uint64_t orig = rob_read_le(saved, s->width), vals[16];
            size_t nv = rob_site_values(s->width, orig, m->size, &rng, vals);
            for (size_t k = 0; k < nv; k++) {
                rob_write_le(m->data + s->pos, s->width, vals[k]);
                char what[96];
                snprintf(what, sizeof what, "%s site (%u bytes) := 0x%llx at byte",
                         rob_site_kind_name(s->kind), (unsigned)s->width,
                         (unsigned long long)vals[k]);
                run_case(t, m->size, s->pos, s->width, &st, what, (unsigned long)s->pos);
                nover++;
                per_kind[s->kind]++;
            }
            memcpy(m->data + s->pos, saved, s->width);
        }
    }
    double t_end = now_s();
    printf("%s: %zu bytes (%zu structural), %zu sites; %lu cases = 1 baseline + %lu "
           "truncations + %lu bit flips + %lu overwrites; %.1f s (%.1f + %.1f + %.1f)\n",
           t->name, m->size, struct_bytes, sites.n, st.cases, ntrunc, nflips, nover,
           t_end - t0, t_flips - t_trunc, t_over - t_flips, t_end - t_over);
    printf("    overwrites by site kind:");
    for (int k = 0; k < SITE_NUM_KINDS; k++)
        if (per_kind[k])
            printf(" %s %lu", rob_site_kind_name(k), per_kind[k]);
    printf("\n");
    rob_stats_print(&st, "    ");
    rob_sites_free(&sites);
    rob_stats_add(&g_total, &st);
}

/* A recipe (*.mut): a mutation of a fixture, so that a regression found in a large file
 * needs no copy of it. Lines: "target FILE[@embedded|@ptd]", then any of "truncate N",
 * "write OFFSET WIDTH VALUE" (little endian), "xor OFFSET BYTE"; '#' starts a comment.
 * Fills *p (and *d for a .pte/.ptd pair); returns 0 with a message on a malformed recipe. */
static int load_recipe(const char *path, const char *fixtures, buf *p, buf *d, char *err,
                       size_t err_size) {
    FILE *f = fopen(path, "r");
    char line[512], file[256] = "", fpath[4096];
    buf *mut = NULL;
    int ok = 1;
    if (!f) {
        snprintf(err, err_size, "cannot open");
        return 0;
    }
    while (ok && fgets(line, sizeof line, f)) {
        char *hash = strchr(line, '#');
        if (hash)
            *hash = 0;
        unsigned long long a, b, c;
        char word[32];
        if (sscanf(line, "%31s", word) != 1)
            continue;
        if (strcmp(word, "target") == 0 && !mut && sscanf(line, "%*s %255s", file) == 1) {
            char *at = strchr(file, '@');
            const char *part = at ? at + 1 : "file";
            if (at)
                *at = 0;
            snprintf(fpath, sizeof fpath, "%s/%s", fixtures, file);
            if (!read_file(fpath, p)) {
                snprintf(err, err_size, "fixture %.200s not found", fpath);
                ok = 0;
            } else if (strcmp(part, "embedded") == 0) {
                const uint8_t *prog;
                size_t psize, eo;
                const char *ew;
                buf e = {NULL, 0};
                ok = etch_bpte_program(p->data, p->size, &prog, &psize, &eo, &ew) &&
                     copy_buf(prog, psize, &e);
                free(p->data);
                *p = e;
                mut = p;
            } else if (strcmp(part, "ptd") == 0) {
                char *dot = strrchr(fpath, '.');
                if (dot && strlen(dot) >= 4)
                    strcpy(dot, ".ptd");
                ok = read_file(fpath, d);
                mut = d;
            } else {
                mut = p;
            }
            if (!ok && !err[0])
                snprintf(err, err_size, "cannot make target %s@%s", file, part);
        } else if (!mut) {
            snprintf(err, err_size, "'%s' before a target line", word);
            ok = 0;
        } else if (strcmp(word, "truncate") == 0 && sscanf(line, "%*s %lli", &a) == 1 &&
                   a <= mut->size) {
            buf cut; /* an exact-size copy, so a read past the new end is a report */
            if (!copy_buf(mut->data, (size_t)a, &cut)) {
                snprintf(err, err_size, "out of memory");
                ok = 0;
            } else {
                free(mut->data);
                *mut = cut;
            }
        } else if (strcmp(word, "write") == 0 &&
                   sscanf(line, "%*s %lli %lli %lli", &a, &b, &c) == 3 &&
                   (b == 1 || b == 2 || b == 4 || b == 8) && a + b <= mut->size) {
            rob_write_le(mut->data + a, (unsigned)b, c);
        } else if (strcmp(word, "xor") == 0 && sscanf(line, "%*s %lli %lli", &a, &b) == 2 &&
                   a < mut->size) {
            mut->data[a] ^= (uint8_t)b;
        } else {
            snprintf(err, err_size, "bad line: %.200s", line);
            ok = 0;
        }
    }
    fclose(f);
    if (ok && !mut) {
        snprintf(err, err_size, "no target line");
        ok = 0;
    }
    return ok;
}

/* Every file in regressions/: raw inputs (any name, with an optional "<stem>.ptd" partner)
 * and recipes (*.mut). Each must end cleanly, like any corpus case. */
static void replay_regressions(const char *dir, const char *fixtures) {
    size_t n = 0;
    char **names = list_dir(dir, &n);
    unsigned long replayed = 0;
    rob_stats st;
    memset(&st, 0, sizeof st);
    for (size_t i = 0; i < n; i++) {
        const char *name = names[i];
        if (ends_with(name, ".ptd") || ends_with(name, ".md") || ends_with(name, ".txt"))
            continue;
        char path[4096], err[256] = "";
        snprintf(path, sizeof path, "%s/%s", dir, name);
        buf p = {NULL, 0}, d = {NULL, 0};
        if (ends_with(name, ".mut")) {
            if (!load_recipe(path, fixtures, &p, &d, err, sizeof err)) {
                CHECK_MSG(0, "regression %s: %s", name, err);
                free(p.data);
                free(d.data);
                continue;
            }
        } else {
            if (!read_file(path, &p)) {
                CHECK_MSG(0, "cannot read regression %s", path);
                continue;
            }
            /* a companion "<stem>.ptd" is passed as external data */
            char ptd_path[4096];
            snprintf(ptd_path, sizeof ptd_path, "%s", path);
            char *dot = strrchr(ptd_path, '.');
            if (dot && (size_t)(dot - ptd_path) + 5 < sizeof ptd_path) {
                strcpy(dot, ".ptd");
                if (!read_file(ptd_path, &d))
                    d.data = NULL;
            }
        }
        snprintf(g_current.what, sizeof g_current.what, "regression %s", name);
        g_current.prog = p.data;
        g_current.prog_size = p.size;
        g_current.ptd = d.data;
        g_current.ptd_size = d.size;
        char why[512];
        int v = rob_run(p.data, p.size, d.data, d.size, &g_opts, &st, why, sizeof why);
        CHECK_MSG(v == 0, "regression %s: %s", name, why);
        g_current.prog = NULL;
        replayed++;
        free(p.data);
        free(d.data);
    }
    printf("regressions: %lu replayed from %s\n", replayed, dir);
    rob_stats_print(&st, "    ");
    rob_stats_add(&g_total, &st);
    free_names(names);
}

int main(int argc, char **argv) {
    const char *only = NULL;
    int flips = STRUCT_FLIPS;
    for (int i = 3; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--only") == 0)
            only = argv[i + 1];
        else if (strcmp(argv[i], "--flips") == 0)
            flips = atoi(argv[i + 1]);
    }
    if (argc < 3 || argc % 2 == 0) {
        fprintf(stderr, "usage: %s FIXTURES_PTE_DIR REGRESSIONS_DIR [--only WHAT] [--flips N]\n",
                argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0); /* interleave with sanitizer reports on stderr */
    snprintf(g_store_dir, sizeof g_store_dir, "%s/etch_rob_store_XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (mkdtemp(g_store_dir)) {
        etch_store_options so = etch_store_default_options();
        so.kernels = ETCH_MODULE_KERNELS_PORTABLE;
        CHECK_OK(etch_store_open(g_store_dir, &so, &g_store));
    }
    const char *dir = argv[1];
    /* --only FILE[@file|@embedded|@ptd] */
    const char *part = only ? strchr(only, '@') : NULL;
    size_t only_len = only ? (part ? (size_t)(part - only) : strlen(only)) : 0;
    if (part)
        part++;
    g_opts = rob_default_options();
    g_opts.async_exec = 1;
    g_opts.quiet = 1; /* CHECK_MSG reports the first violation of each case */
    CHECK_OK(etch_kernels_register_portable());
    CHECK_OK(etch_backends_register_builtin());
#ifdef ROB_ASAN
    __sanitizer_set_death_callback(on_sanitizer_death);
#endif
    double t0 = now_s();

    size_t n = 0;
    char **names = list_dir(dir, &n);
    CHECK_MSG(names && n > 0, "no fixtures in %s", dir);
    buf *files = calloc(n ? n : 1, sizeof *files);
    buf *embedded = calloc(n ? n : 1, sizeof *embedded);
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        CHECK_MSG(read_file(path, &files[i]), "cannot read %s", path);
    }

    for (size_t i = 0; i < n; i++) {
        const char *name = names[i];
        if (!files[i].data || ends_with(name, ".ptd") ||
            (only && (strncmp(only, name, only_len) != 0 || name[only_len] != 0)))
            continue;
        /* the .ptd partner "<stem>.ptd", if any */
        const buf *ptd = NULL;
        size_t ptd_index = 0;
        const char *dot = strrchr(name, '.');
        size_t stem = dot ? (size_t)(dot - name) : strlen(name);
        for (size_t k = 0; k < n; k++) {
            if (k != i && ends_with(names[k], ".ptd") && strlen(names[k]) == stem + 4 &&
                strncmp(names[k], name, stem) == 0 && files[k].data) {
                ptd = &files[k];
                ptd_index = k;
            }
        }
        target t;
        memset(&t, 0, sizeof t);
        snprintf(t.name, sizeof t.name, "%s", name);
        t.mut = &files[i];
        t.prog = &files[i];
        t.ptd = ptd;
        t.schema = ROB_SCHEMA_PTE;
        t.expect_open = ETCH_OK;
        if (strcmp(name, "not_a_program.pte") == 0)
            t.expect_open = ETCH_ERR_NOT_A_PROGRAM;
        if (strcmp(name, "legacy_et02.pte") == 0)
            t.expect_open = ETCH_ERR_INCOMPATIBLE_VERSION;
        t.expect_load = expected_load_status(name);
        t.ninclude = 1;
        t.include[0] = (rob_range){0, pte_struct_end(files[i].data, files[i].size)};
        xnnpack_payloads(&t, files[i].data, files[i].size);
        if (strcmp(name, "xnnpack_simple_cnn.pte") == 0)
            t.baseline_cap = (size_t)256 << 20;

        etch_bundled *b = NULL;
        int is_bundled = files[i].size >= 8 && memcmp(files[i].data + 4, "BP08", 4) == 0;
        if (is_bundled) {
            t.schema = ROB_SCHEMA_BPTE;
            CHECK_OK(etch_bundled_open_buffer(files[i].data, files[i].size, &b));
            if (b) {
                size_t psize = 0;
                const uint8_t *prog = etch_bundled_program(b, &psize);
                size_t off = (size_t)(prog - files[i].data);
                /* structure: the wrapper (without its payloads, the program included) plus
                 * the embedded program's flatbuffer */
                t.include[0] = (rob_range){0, files[i].size};
                t.include[1] = (rob_range){off, off + pte_struct_end(prog, psize)};
                t.ninclude = 2;
                CHECK(copy_buf(prog, psize, &embedded[i]));
                t.embedded = prog;
                t.embedded_size = psize;
            }
        }
        if (!part || strcmp(part, "file") == 0)
            run_target(&t, flips);

        if (b && embedded[i].data && (!part || strcmp(part, "embedded") == 0)) {
            target e;
            memset(&e, 0, sizeof e);
            snprintf(e.name, sizeof e.name, "%s (embedded program)", name);
            e.mut = &embedded[i];
            e.prog = &embedded[i];
            e.schema = ROB_SCHEMA_PTE;
            e.expect_open = ETCH_OK;
            e.ninclude = 1;
            e.include[0] = (rob_range){0, pte_struct_end(embedded[i].data, embedded[i].size)};
            run_target(&e, flips);
        }
        etch_bundled_close(b);

        if (ptd && (!part || strcmp(part, "ptd") == 0)) {
            target d;
            memset(&d, 0, sizeof d);
            snprintf(d.name, sizeof d.name, "%s (with %s mutated)", name, names[ptd_index]);
            d.mut = &files[ptd_index];
            d.prog = &files[i];
            d.ptd = &files[ptd_index];
            d.schema = ROB_SCHEMA_PTD;
            d.expect_open = ETCH_OK;
            d.ninclude = 1;
            d.include[0] = (rob_range){0, files[ptd_index].size};
            run_target(&d, flips);
        }
    }

    if (!only || strcmp(only, "regressions") == 0)
        replay_regressions(argv[2], dir);

    printf("total: %lu cases, %lu violations, %.1f s\n", g_total.cases, g_total.violations,
           now_s() - t0);
    printf("through the store: %lu cases tried, %lu installed, the rest refused\n",
           g_store_tried, g_store_installed);
    etch_store_close(g_store);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_store_dir);
    if (g_store_dir[0] && system(cmd) != 0)
        fprintf(stderr, "warning: could not remove %s\n", g_store_dir);
    rob_stats_print(&g_total, "    ");
    for (size_t i = 0; i < n; i++) {
        free(files[i].data);
        free(embedded[i].data);
    }
    free(files);
    free(embedded);
    free_names(names);
    return etch_test_finish();
}
