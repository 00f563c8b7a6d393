/* The model store (etch/store.h): installs from files, buffers and streams; the fast and full
 * checks; the fallback chain (current -> previous -> embedded) with its reasons; lying
 * manifests, corrupted, truncated, foreign and half-written files; names; symlinks; locks
 * and two processes installing at once; rollback, removal, pruning.
 *
 * usage: test_store FIXTURES */
#include "store_test_util.h"

#include <sys/file.h>
#include <sys/wait.h>
#include <time.h>

#include "etch/etch.h"
#include "etch/module.h"
#include "etch/store.h"
#include "etch_test.h"

static const char *fx; /* fixtures */
static char pte_add[512], pte_seg[512], pte_cnn[512], pte_ext[512], ptd_ext[512], tok512[512];
static char pte_bad[512], pte_legacy[512];

static etch_store *open_store(const char *dir) {
    etch_store *s = NULL;
    etch_store_options o = etch_store_default_options();
    o.lock_timeout_ms = 5000;
    CHECK_OK(etch_store_open(dir, &o, &s));
    return s;
}

/* DIR/NAME/versions/V/FILE */
static const char *vpath(char *buf, size_t cap, const char *dir, const char *name,
                         const char *v, const char *file) {
    snprintf(buf, cap, "%s/%s/versions/%s/%s", dir, name, v, file);
    return buf;
}

static etch_store_served serve(etch_store *s, const char *name, etch_store_check check,
                               const etch_store_embedded *emb, etch_status *st_out) {
    etch_store_open_options oo = etch_store_default_open_options();
    oo.check = check;
    oo.embedded = emb;
    etch_store_served m;
    etch_status st = etch_store_open_model(s, name, &oo, &m);
    if (st_out)
        *st_out = st;
    return m;
}

static void test_names(void) {
    const char *good[] = {"a", "chat", "llama-3.2_1B", "v1.0", "1", "x+y", "A.b-c_d"};
    const char *bad[] = {"", ".", "..", "../x", "a/b", "/abs", ".hidden", "-opt", "a b",
                         "tab\tname", "nl\n", "a\\b", "caf\xc3\xa9", "x\x01", "a:b", "*"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        CHECK_MSG(etch_store_name_valid(good[i]), "%s", good[i]);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK_MSG(!etch_store_name_valid(bad[i]), "'%s'", bad[i]);
    char longname[ETCH_STORE_NAME_MAX + 2];
    memset(longname, 'a', sizeof longname);
    longname[ETCH_STORE_NAME_MAX] = 0;
    CHECK(etch_store_name_valid(longname));
    longname[ETCH_STORE_NAME_MAX] = 'a';
    longname[ETCH_STORE_NAME_MAX + 1] = 0;
    CHECK(!etch_store_name_valid(longname));
    CHECK(!etch_store_name_valid(NULL));

    char dir[256];
    st_mkdtemp(dir, sizeof dir, "names");
    etch_store *s = open_store(dir);
    etch_store_install_options io = etch_store_default_install_options();
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK_STATUS(etch_store_install_file(s, bad[i], pte_add, &io, NULL),
                     ETCH_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(etch_store_install_file(s, longname, pte_add, &io, NULL),
                 ETCH_ERR_INVALID_ARGUMENT);
    io.version = "../../escape";
    CHECK_STATUS(etch_store_install_file(s, "m", pte_add, &io, NULL), ETCH_ERR_INVALID_ARGUMENT);
    io.version = "";
    CHECK_STATUS(etch_store_install_file(s, "m", pte_add, &io, NULL), ETCH_ERR_INVALID_ARGUMENT);
    etch_store_served m;
    CHECK_STATUS(etch_store_open_model(s, "../m", NULL, &m), ETCH_ERR_INVALID_ARGUMENT);
    CHECK(m.origin == ETCH_STORE_SERVED_NONE);
    CHECK_STATUS(etch_store_remove(s, "a/b", NULL), ETCH_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(etch_store_rollback(s, "..", NULL), ETCH_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(etch_store_verify(s, "m", "../x", ETCH_STORE_CHECK_FAST, NULL),
                 ETCH_ERR_INVALID_ARGUMENT);
    /* nothing was written but the store's own files */
    CHECK(st_count_prefix(dir, "") == 4); /* . .. .etch-store .lock */
    char outside[300];
    snprintf(outside, sizeof outside, "%s/../escape", dir);
    CHECK(!st_exists(outside));
    etch_store_close(s);
    st_rm_rf(dir);
}

static void test_open_store(void) {
    char dir[256], p[512];
    st_mkdtemp(dir, sizeof dir, "open");
    /* a directory with other files in it is not taken over */
    snprintf(p, sizeof p, "%s/notes.txt", dir);
    st_write(p, "hello", 5);
    etch_store *s = NULL;
    CHECK_STATUS(etch_store_open(dir, NULL, &s), ETCH_ERR_INVALID_STATE);
    CHECK(s == NULL);
    CHECK(strstr(etch_last_error(), "neither empty nor a model store") != NULL);
    /* created, with parents */
    snprintf(p, sizeof p, "%s/a/b/store", dir);
    etch_store_options o = etch_store_default_options();
    CHECK_OK(etch_store_open(p, &o, &s));
    CHECK(s && strcmp(etch_store_path(s), p) == 0);
    etch_store_close(s);
    s = NULL;
    /* not created without create */
    snprintf(p, sizeof p, "%s/nope", dir);
    o.create = false;
    CHECK_STATUS(etch_store_open(p, &o, &s), ETCH_ERR_ACCESS_FAILED);
    o = etch_store_default_options();
    o.keep_versions = 1;
    CHECK_STATUS(etch_store_open(p, &o, &s), ETCH_ERR_INVALID_ARGUMENT);
    etch_store_close(NULL);
    st_rm_rf(dir);
}

static void test_install_serve_rollback(void) {
    char dir[256], p[600];
    st_mkdtemp(dir, sizeof dir, "basic");
    etch_store *s = open_store(dir);
    etch_store_install_options io = etch_store_default_install_options();
    char v[ETCH_STORE_NAME_MAX + 1];

    /* nothing installed: not found, or the embedded default with the reason */
    etch_status st;
    etch_store_served m = serve(s, "add", ETCH_STORE_CHECK_FAST, NULL, &st);
    CHECK(st == ETCH_ERR_NOT_FOUND && m.origin == ETCH_STORE_SERVED_NONE);
    CHECK(m.reason == ETCH_STORE_REASON_NOT_INSTALLED);
    size_t esz;
    unsigned char *emb_bytes = st_read(pte_seg, &esz);
    etch_store_embedded emb = {emb_bytes, esz, NULL, 0, "built-in"};
    m = serve(s, "add", ETCH_STORE_CHECK_FAST, &emb, &st);
    CHECK_OK(st);
    CHECK(m.origin == ETCH_STORE_SERVED_EMBEDDED && m.pte_data == emb_bytes &&
          m.pte_size == esz && m.pte_path[0] == 0);
    CHECK(m.reason == ETCH_STORE_REASON_NOT_INSTALLED);
    CHECK(strstr(m.message, "built-in") != NULL);

    CHECK_OK(etch_store_install_file(s, "add", pte_add, &io, v));
    CHECK(strcmp(v, "1") == 0);
    m = serve(s, "add", ETCH_STORE_CHECK_FULL, &emb, &st);
    CHECK_OK(st);
    CHECK(m.origin == ETCH_STORE_SERVED_CURRENT && m.reason == ETCH_STORE_REASON_OK);
    CHECK(strcmp(m.version, "1") == 0 && m.message[0] == 0);
    CHECK(strcmp(m.pte_path, vpath(p, sizeof p, dir, "add", "1", "model.pte")) == 0);
    CHECK(m.ptd_path[0] == 0 && m.tokenizer_path[0] == 0);
    /* the served file is the installed one, and runs */
    etch_module *mod = NULL;
    CHECK_OK(etch_module_open(m.pte_path, NULL, &mod));
    etch_module_close(mod);

    etch_store_manifest *man = NULL;
    CHECK_OK(etch_store_manifest_get(s, "add", NULL, &man));
    if (man) {
        CHECK(strcmp(man->name, "add") == 0 && strcmp(man->version, "1") == 0);
        CHECK(man->num_operators == 1 && !strcmp(man->operators[0], "aten::add.out"));
        CHECK(man->num_backends == 0);
        CHECK(man->files[ETCH_STORE_PTE].present && man->files[ETCH_STORE_PTE].size == 728);
        size_t n;
        unsigned char *b = st_read(pte_add, &n);
        char hex[ETCH_SHA256_HEX_SIZE];
        st_hex_of(b, n, hex);
        CHECK(strcmp(man->files[ETCH_STORE_PTE].sha256, hex) == 0);
        free(b);
        CHECK(strcmp(man->min_etch_version, ETCH_VERSION_STRING) == 0);
        CHECK(!man->files[ETCH_STORE_PTD].present && !man->files[ETCH_STORE_TOKENIZER].present);
    }
    etch_store_manifest_free(man);

    /* a second version: the first is kept as previous */
    CHECK_OK(etch_store_install_file(s, "add", pte_seg, &io, v));
    CHECK(strcmp(v, "2") == 0);
    etch_store_entry *e = NULL;
    size_t n = 0;
    CHECK_OK(etch_store_list(s, &e, &n));
    CHECK(n == 1 && e && !strcmp(e[0].name, "add") && !strcmp(e[0].current, "2") &&
          !strcmp(e[0].previous, "1") && e[0].num_versions == 2);
    free(e);
    CHECK_OK(etch_store_rollback(s, "add", v));
    CHECK(strcmp(v, "1") == 0);
    m = serve(s, "add", ETCH_STORE_CHECK_FAST, NULL, &st);
    CHECK(st == ETCH_OK && !strcmp(m.version, "1") && m.origin == ETCH_STORE_SERVED_CURRENT);
    CHECK_OK(etch_store_rollback(s, "add", v)); /* undoes it */
    CHECK(strcmp(v, "2") == 0);

    /* explicit versions; an existing one is refused, nothing changes */
    io.version = "2";
    CHECK_STATUS(etch_store_install_file(s, "add", pte_add, &io, v), ETCH_ERR_INVALID_STATE);
    io.version = "v1.0";
    CHECK_OK(etch_store_install_file(s, "add", pte_add, &io, v));
    CHECK(strcmp(v, "v1.0") == 0);
    io.version = NULL;
    CHECK_OK(etch_store_install_file(s, "add", pte_add, &io, v));
    CHECK(strcmp(v, "4") == 0); /* the counter counts every install */
    CHECK_OK(etch_store_list(s, &e, &n));
    CHECK(n == 1 && !strcmp(e[0].current, "4") && !strcmp(e[0].previous, "v1.0") &&
          e[0].num_versions == 2); /* pruned to keep_versions = 2 */
    free(e);

    /* expected SHA-256: match, mismatch (refused, store unchanged), malformed */
    size_t an;
    unsigned char *ab = st_read(pte_add, &an);
    char hex[ETCH_SHA256_HEX_SIZE], wrong[ETCH_SHA256_HEX_SIZE];
    st_hex_of(ab, an, hex);
    free(ab);
    io.sha256[ETCH_STORE_PTE] = hex;
    CHECK_OK(etch_store_install_file(s, "add", pte_add, &io, v));
    CHECK(strcmp(v, "5") == 0);
    memcpy(wrong, hex, sizeof wrong);
    wrong[10] = wrong[10] == '0' ? '1' : '0';
    io.sha256[ETCH_STORE_PTE] = wrong;
    CHECK_STATUS(etch_store_install_file(s, "add", pte_add, &io, v), ETCH_ERR_INTEGRITY);
    CHECK(strstr(etch_last_error(), wrong) != NULL && strstr(etch_last_error(), hex) != NULL);
    io.sha256[ETCH_STORE_PTE] = "abc";
    CHECK_STATUS(etch_store_install_file(s, "add", pte_add, &io, v), ETCH_ERR_INVALID_ARGUMENT);
    io.sha256[ETCH_STORE_PTE] = NULL;
    CHECK_OK(etch_store_list(s, &e, &n));
    CHECK(n == 1 && !strcmp(e[0].current, "5") && !strcmp(e[0].previous, "4"));
    free(e);
    CHECK(st_count_prefix(dir, ".tmp-") == 0);

    /* programs this build cannot load are refused at install */
    CHECK_STATUS(etch_store_install_file(s, "add", pte_bad, &io, v), ETCH_ERR_NOT_A_PROGRAM);
    CHECK_STATUS(etch_store_install_file(s, "add", pte_legacy, &io, v),
                 ETCH_ERR_INCOMPATIBLE_VERSION);
    CHECK_STATUS(etch_store_install_file(s, "add", "/nonexistent.pte", &io, v),
                 ETCH_ERR_ACCESS_FAILED);
    /* a program that needs a .ptd is refused without one */
    CHECK_STATUS(etch_store_install_file(s, "ext", pte_ext, &io, v),
                 ETCH_ERR_INVALID_EXTERNAL_DATA);
    /* a tokenizer that is not one */
    io.tokenizer_path = pte_bad;
    CHECK(etch_store_install_file(s, "add", pte_add, &io, v) != ETCH_OK);
    CHECK(strstr(etch_last_error(), "tokenizer") != NULL);
    io.tokenizer_path = NULL;
    io.min_etch_version = "1.2";
    CHECK_STATUS(etch_store_install_file(s, "add", pte_add, &io, v), ETCH_ERR_INVALID_ARGUMENT);
    io.min_etch_version = NULL;
    CHECK_OK(etch_store_list(s, &e, &n));
    CHECK(n == 1 && !strcmp(e[0].current, "5"));
    free(e);
    CHECK(st_count_prefix(dir, ".tmp-") == 0);
    CHECK(st_count_prefix(dir, "ext") == 0);

    /* removal: a version (the current one: the previous takes its place), then the name */
    CHECK_OK(etch_store_remove(s, "add", "5"));
    m = serve(s, "add", ETCH_STORE_CHECK_FULL, NULL, &st);
    CHECK(st == ETCH_OK && !strcmp(m.version, "4"));
    CHECK_STATUS(etch_store_rollback(s, "add", v), ETCH_ERR_NOT_FOUND);
    CHECK_STATUS(etch_store_remove(s, "add", "77"), ETCH_ERR_NOT_FOUND);
    CHECK_OK(etch_store_remove(s, "add", NULL));
    CHECK_STATUS(etch_store_remove(s, "add", NULL), ETCH_ERR_NOT_FOUND);
    CHECK_OK(etch_store_list(s, &e, &n));
    CHECK(n == 0 && e == NULL);
    m = serve(s, "add", ETCH_STORE_CHECK_FAST, &emb, &st);
    CHECK(st == ETCH_OK && m.origin == ETCH_STORE_SERVED_EMBEDDED);
    free(emb_bytes);
    etch_store_close(s);
    st_rm_rf(dir);
}

/* Buffers, streams (with a .ptd and a tokenizer, in interleaved pieces), abort. */
static void test_buffer_stream(void) {
    char dir[256], p[600];
    st_mkdtemp(dir, sizeof dir, "stream");
    etch_store *s = open_store(dir);
    char v[ETCH_STORE_NAME_MAX + 1];
    size_t n[3];
    unsigned char *b[3] = {st_read(pte_ext, &n[0]), st_read(ptd_ext, &n[1]),
                           st_read(tok512, &n[2])};
    CHECK(b[0] && b[1] && b[2]);
    etch_store_buffers bufs;
    memset(&bufs, 0, sizeof bufs);
    for (int i = 0; i < 3; i++) {
        bufs.data[i] = b[i];
        bufs.size[i] = n[i];
    }
    CHECK_OK(etch_store_install_buffer(s, "ext", &bufs, NULL, v));
    etch_status st;
    etch_store_served m = serve(s, "ext", ETCH_STORE_CHECK_FULL, NULL, &st);
    CHECK_OK(st);
    CHECK(m.ptd_path[0] && m.tokenizer_path[0]);
    CHECK(strcmp(m.tokenizer_path, vpath(p, sizeof p, dir, "ext", "1", "tokenizer")) == 0);
    etch_module_options mo = etch_module_default_options();
    mo.data_path = m.ptd_path;
    etch_module *mod = NULL;
    etch_method *meth = NULL;
    CHECK_OK(etch_module_open(m.pte_path, &mo, &mod));
    if (mod)
        CHECK_OK(etch_module_load_method(mod, "forward", &meth));
    etch_module_close(mod);

    /* streamed: three bytes at a time, the files interleaved, with expected digests */
    char hex[3][ETCH_SHA256_HEX_SIZE];
    etch_store_install_options io = etch_store_default_install_options();
    for (int i = 0; i < 3; i++) {
        st_hex_of(b[i], n[i], hex[i]);
        io.sha256[i] = hex[i];
    }
    io.version = "streamed";
    etch_store_writer *w = NULL;
    CHECK_OK(etch_store_install_begin(s, "ext", &io, &w));
    CHECK(st_count_prefix(dir, ".tmp-") == 1);
    size_t off[3] = {0, 0, 0};
    for (bool more = true; more && w;) {
        more = false;
        for (int i = 0; i < 3; i++) {
            size_t k = n[i] - off[i] < 3 ? n[i] - off[i] : 3;
            if (k) {
                CHECK_OK(etch_store_writer_write(w, (etch_store_role)i, b[i] + off[i], k));
                off[i] += k;
                more = true;
            }
        }
    }
    /* nothing is served from the temporary while it is written */
    m = serve(s, "ext", ETCH_STORE_CHECK_FAST, NULL, &st);
    CHECK(st == ETCH_OK && !strcmp(m.version, "1"));
    /* a second store handle (another process would be the same) does not clean a live one */
    etch_store *s2 = open_store(dir);
    CHECK(st_count_prefix(dir, ".tmp-") == 1);
    etch_store_close(s2);
    CHECK_OK(etch_store_writer_commit(w, v));
    CHECK(strcmp(v, "streamed") == 0);
    CHECK(st_count_prefix(dir, ".tmp-") == 0);
    m = serve(s, "ext", ETCH_STORE_CHECK_FULL, NULL, &st);
    CHECK(st == ETCH_OK && !strcmp(m.version, "streamed"));

    /* a stream with a wrong byte: refused at commit, store unchanged */
    io.version = NULL;
    CHECK_OK(etch_store_install_begin(s, "ext", &io, &w));
    unsigned char *copy = malloc(n[0]);
    memcpy(copy, b[0], n[0]);
    copy[n[0] - 1] ^= 1;
    CHECK_OK(etch_store_writer_write(w, ETCH_STORE_PTE, copy, n[0]));
    CHECK_OK(etch_store_writer_write(w, ETCH_STORE_PTD, b[1], n[1]));
    CHECK_STATUS(etch_store_writer_commit(w, v), ETCH_ERR_INTEGRITY);
    free(copy);
    /* aborted: nothing left */
    CHECK_OK(etch_store_install_begin(s, "ext", NULL, &w));
    CHECK_OK(etch_store_writer_write(w, ETCH_STORE_PTE, b[0], 100));
    etch_store_writer_abort(w);
    etch_store_writer_abort(NULL);
    /* no program written */
    CHECK_OK(etch_store_install_begin(s, "ext", NULL, &w));
    CHECK_STATUS(etch_store_writer_commit(w, v), ETCH_ERR_INVALID_ARGUMENT);
    /* a truncated download */
    io.sha256[ETCH_STORE_PTD] = NULL;
    io.sha256[ETCH_STORE_TOKENIZER] = NULL;
    io.sha256[ETCH_STORE_PTE] = NULL;
    CHECK_OK(etch_store_install_begin(s, "ext", &io, &w));
    CHECK_OK(etch_store_writer_write(w, ETCH_STORE_PTE, b[0], n[0] / 2));
    CHECK_OK(etch_store_writer_write(w, ETCH_STORE_PTD, b[1], n[1]));
    CHECK(etch_store_writer_commit(w, v) != ETCH_OK);
    CHECK(st_count_prefix(dir, ".tmp-") == 0);
    m = serve(s, "ext", ETCH_STORE_CHECK_FULL, NULL, &st);
    CHECK(st == ETCH_OK && !strcmp(m.version, "streamed") && !strcmp(m.name, "ext"));
    for (int i = 0; i < 3; i++)
        free(b[i]);
    etch_store_close(s);
    st_rm_rf(dir);
}

/* A program whose hash matches what the caller expects but that calls an operator this
 * build lacks: made here by renaming the operator in a copy of add.pte. */
static void test_missing_operator(void) {
    char dir[256], tmp[256], p[600];
    st_mkdtemp(dir, sizeof dir, "missing-op");
    st_mkdtemp(tmp, sizeof tmp, "missing-op-src");
    size_t n;
    unsigned char *b = st_read(pte_add, &n);
    unsigned char *at = b ? memmem(b, n, "aten::add", 9) : NULL;
    CHECK(at != NULL);
    if (!at) {
        free(b);
        return;
    }
    at[8] = 'X'; /* aten::adX */
    snprintf(p, sizeof p, "%s/adX.pte", tmp);
    st_write(p, b, n);
    char hex[ETCH_SHA256_HEX_SIZE];
    st_hex_of(b, n, hex);
    etch_store *s = open_store(dir);
    etch_store_install_options io = etch_store_default_install_options();
    io.sha256[ETCH_STORE_PTE] = hex;
    CHECK_STATUS(etch_store_install_file(s, "m", p, &io, NULL), ETCH_ERR_OPERATOR_MISSING);
    CHECK_MSG(strstr(etch_last_error(), "aten::adX.out") != NULL, "%s", etch_last_error());
    etch_store_buffers bufs;
    memset(&bufs, 0, sizeof bufs);
    bufs.data[0] = b;
    bufs.size[0] = n;
    CHECK_STATUS(etch_store_install_buffer(s, "m", &bufs, &io, NULL), ETCH_ERR_OPERATOR_MISSING);
    etch_store_entry *e = NULL;
    size_t ne = 9;
    CHECK_OK(etch_store_list(s, &e, &ne));
    CHECK(ne == 0);
    CHECK(st_count_prefix(dir, ".tmp-") == 0);
    free(b);
    etch_store_close(s);
    st_rm_rf(dir);
    st_rm_rf(tmp);
}

/* One scenario of damage: install v1 = add, v2 = the CNN (10 KB, XnnpackBackend), damage v2
 * with `damage`, and expect what serving says. */
typedef void (*damage_fn)(const char *dir);

static char g_dir[256];

static void expect_after(const char *what, damage_fn damage, etch_store_check check,
                         etch_store_origin origin, etch_store_reason reason,
                         const char *msg_part) {
    st_mkdtemp(g_dir, sizeof g_dir, "damage");
    etch_store *s = open_store(g_dir);
    etch_store_install_options io = etch_store_default_install_options();
    CHECK_OK(etch_store_install_file(s, "m", pte_add, &io, NULL));
    CHECK_OK(etch_store_install_file(s, "m", pte_cnn, &io, NULL));
    damage(g_dir);
    size_t esz;
    unsigned char *eb = st_read(pte_seg, &esz);
    etch_store_embedded emb = {eb, esz, NULL, 0, NULL};
    etch_status st;
    etch_store_served m = serve(s, "m", check, &emb, &st);
    CHECK_MSG(st == ETCH_OK, "%s: %s", what, etch_status_str(st));
    CHECK_MSG(m.origin == origin, "%s: served %d, want %d (%s)", what, (int)m.origin,
              (int)origin, m.message);
    CHECK_MSG(m.reason == reason, "%s: reason %s, want %s (%s)", what,
              etch_store_reason_str(m.reason), etch_store_reason_str(reason), m.message);
    CHECK_MSG(!msg_part || strstr(m.message, msg_part), "%s: message '%s' lacks '%s'", what,
              m.message, msg_part);
    if (origin == ETCH_STORE_SERVED_PREVIOUS)
        CHECK_MSG(!strcmp(m.version, "1") && strstr(m.message, "served previous version 1"),
                  "%s: %s", what, m.message);
    if (origin == ETCH_STORE_SERVED_EMBEDDED)
        CHECK_MSG(m.pte_data == eb && m.version[0] == 0 &&
                      strstr(m.message, "embedded default"),
                  "%s: %s", what, m.message);
    /* without an embedded default the failure is an error, with the same reason */
    if (origin == ETCH_STORE_SERVED_EMBEDDED) {
        m = serve(s, "m", check, NULL, &st);
        CHECK_MSG(st != ETCH_OK && m.origin == ETCH_STORE_SERVED_NONE && m.reason == reason,
                  "%s: %s", what, etch_status_str(st));
    }
    /* verify says the same about the current version */
    if (origin != ETCH_STORE_SERVED_CURRENT && reason != ETCH_STORE_REASON_BAD_STATE &&
        reason != ETCH_STORE_REASON_NOT_INSTALLED) {
        etch_store_reason r = ETCH_STORE_REASON_OK;
        CHECK_MSG(etch_store_verify(s, "m", "2", check, &r) != ETCH_OK && r == reason,
                  "%s: verify said %s", what, etch_store_reason_str(r));
    }
    /* nothing the store holds was deleted by serving */
    char p[600];
    CHECK_MSG(st_exists(vpath(p, sizeof p, g_dir, "m", "1", "manifest")), "%s", what);
    free(eb);
    etch_store_close(s);
    st_rm_rf(g_dir);
}

static char *v2(const char *dir, const char *file) {
    static char p[600];
    return (char *)vpath(p, sizeof p, dir, "m", "2", file);
}
static char *v1(const char *dir, const char *file) {
    static char p[600];
    return (char *)vpath(p, sizeof p, dir, "m", "1", file);
}

static void dmg_none(const char *d) { (void)d; }
static void dmg_truncate(const char *d) { CHECK(truncate(v2(d, "model.pte"), 5000) == 0); }
static void dmg_empty(const char *d) { CHECK(truncate(v2(d, "model.pte"), 0) == 0); }
static void dmg_head_flip(const char *d) { st_flip(v2(d, "model.pte"), 100); }
static void dmg_tail_flip(const char *d) { st_flip(v2(d, "model.pte"), 9000); }
static void dmg_delete_pte(const char *d) { unlink(v2(d, "model.pte")); }
static void dmg_delete_manifest(const char *d) { unlink(v2(d, "manifest")); }
static void dmg_manifest_truncated(const char *d) { CHECK(truncate(v2(d, "manifest"), 60) == 0); }
static void dmg_manifest_edited(const char *d) {
    /* a lie without resealing: the end checksum catches it */
    st_edit_manifest(v2(d, "manifest"), "seq", "99", false);
}
static void dmg_lie_size(const char *d) {
    size_t n;
    unsigned char *t = st_read(v2(d, "manifest"), &n);
    char *line = t ? strstr((char *)t, "file pte model.pte ") : NULL;
    char rest[200] = "";
    if (line) {
        char hex[80];
        unsigned long long sz;
        sscanf(line, "file pte model.pte %llu %79s", &sz, hex);
        snprintf(rest, sizeof rest, "model.pte %llu %s", sz + 1, hex);
    }
    free(t);
    /* key "file" matches the first file line, the pte's */
    char val[220];
    snprintf(val, sizeof val, "pte %s", rest);
    st_edit_manifest(v2(d, "manifest"), "file", val, true);
}
static void dmg_lie_version(const char *d) { st_edit_manifest(v2(d, "manifest"), "version", "7", true); }
static void dmg_lie_name(const char *d) { st_edit_manifest(v2(d, "manifest"), "name", "other", true); }
static void dmg_lie_op_extra(const char *d) {
    st_edit_manifest(v2(d, "manifest"), "operator", "aten::not_here.out", true);
}
static void dmg_lie_backend(const char *d) {
    st_edit_manifest(v2(d, "manifest"), "backend", NULL, true); /* drops XnnpackBackend */
}
static void dmg_too_new(const char *d) {
    st_edit_manifest(v2(d, "manifest"), "etch_min_version", "99.0.0", true);
}
static void dmg_head_hash(const char *d) {
    st_edit_manifest(v2(d, "manifest"), "head_sha256",
                     "0000000000000000000000000000000000000000000000000000000000000000", true);
}
static void dmg_symlink(const char *d) {
    unlink(v2(d, "model.pte"));
    CHECK(symlink(pte_cnn, v2(d, "model.pte")) == 0); /* the right bytes, through a link */
}
static void dmg_foreign_file(const char *d) {
    /* a file the manifest does not list, in a role's name */
    st_write(v2(d, "tokenizer"), "x", 1);
}
static void dmg_both(const char *d) {
    st_flip(v2(d, "model.pte"), 100);
    CHECK(truncate(v1(d, "model.pte"), 10) == 0);
}
static void dmg_state_gone(const char *d) {
    char p[600];
    snprintf(p, sizeof p, "%s/m/state", d);
    unlink(p);
}
static void dmg_state_garbage(const char *d) {
    char p[600];
    snprintf(p, sizeof p, "%s/m/state", d);
    st_write(p, "etch-store-state 1\ncurrent ../../x\nnext 3\n", 42);
}
static void dmg_state_dangling(const char *d) {
    char p[600];
    snprintf(p, sizeof p, "%s/m/state", d);
    st_write(p, "etch-store-state 1\ncurrent 9\nprevious 1\nnext 10\n", 47);
}
static void dmg_half_written(const char *d) {
    /* a crash mid-install: a temporary with a partial program, never served */
    char p[600];
    snprintf(p, sizeof p, "%s/.tmp-install-crashed", d);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/.tmp-install-crashed/model.pte", d);
    st_write(p, "ET12", 4);
    /* and junk beside the names */
    snprintf(p, sizeof p, "%s/README.txt", d);
    st_write(p, "mine", 4);
}

static void test_damage(void) {
    const etch_store_check F = ETCH_STORE_CHECK_FAST, U = ETCH_STORE_CHECK_FULL;
    const etch_store_origin CUR = ETCH_STORE_SERVED_CURRENT, PREV = ETCH_STORE_SERVED_PREVIOUS,
                            EMB = ETCH_STORE_SERVED_EMBEDDED;
    expect_after("intact fast", dmg_none, F, CUR, ETCH_STORE_REASON_OK, NULL);
    expect_after("intact full", dmg_none, U, CUR, ETCH_STORE_REASON_OK, NULL);
    expect_after("truncated", dmg_truncate, F, PREV, ETCH_STORE_REASON_SIZE_MISMATCH,
                 "5000 bytes");
    expect_after("emptied", dmg_empty, F, PREV, ETCH_STORE_REASON_SIZE_MISMATCH, NULL);
    expect_after("head flipped", dmg_head_flip, F, PREV, ETCH_STORE_REASON_HASH_MISMATCH,
                 "first 4096 bytes");
    /* a flip after the first 4 KiB: the fast check cannot see it, the full one does */
    expect_after("tail flipped fast", dmg_tail_flip, F, CUR, ETCH_STORE_REASON_OK, NULL);
    expect_after("tail flipped full", dmg_tail_flip, U, PREV, ETCH_STORE_REASON_HASH_MISMATCH,
                 "model.pte: SHA-256");
    expect_after("pte deleted", dmg_delete_pte, F, PREV, ETCH_STORE_REASON_FILE_MISSING, NULL);
    expect_after("manifest deleted", dmg_delete_manifest, F, PREV,
                 ETCH_STORE_REASON_BAD_MANIFEST, "missing");
    expect_after("manifest truncated", dmg_manifest_truncated, F, PREV,
                 ETCH_STORE_REASON_BAD_MANIFEST, "truncated");
    expect_after("manifest edited", dmg_manifest_edited, F, PREV, ETCH_STORE_REASON_BAD_MANIFEST,
                 "checksum");
    expect_after("lies: size", dmg_lie_size, F, PREV, ETCH_STORE_REASON_SIZE_MISMATCH, NULL);
    expect_after("lies: version", dmg_lie_version, F, PREV, ETCH_STORE_REASON_BAD_MANIFEST,
                 "says it is m 7");
    expect_after("lies: name", dmg_lie_name, F, PREV, ETCH_STORE_REASON_BAD_MANIFEST, NULL);
    expect_after("lies: operator", dmg_lie_op_extra, F, PREV,
                 ETCH_STORE_REASON_OPERATOR_MISSING, "aten::not_here.out");
    /* a manifest that hides a need: only the full check opens the program */
    expect_after("lies: backend fast", dmg_lie_backend, F, CUR, ETCH_STORE_REASON_OK, NULL);
    expect_after("lies: backend full", dmg_lie_backend, U, PREV,
                 ETCH_STORE_REASON_NEEDS_MISMATCH, NULL);
    expect_after("lies: head hash", dmg_head_hash, F, PREV, ETCH_STORE_REASON_HASH_MISMATCH,
                 NULL);
    expect_after("too new", dmg_too_new, F, PREV, ETCH_STORE_REASON_TOO_NEW, "99.0.0");
    expect_after("symlink", dmg_symlink, F, PREV, ETCH_STORE_REASON_FILE_MISSING,
                 "symbolic link");
    expect_after("unlisted file", dmg_foreign_file, F, PREV, ETCH_STORE_REASON_BAD_MANIFEST,
                 "does not list");
    expect_after("both damaged", dmg_both, F, EMB, ETCH_STORE_REASON_HASH_MISMATCH,
                 "previous 1 (size-mismatch)");
    expect_after("state deleted", dmg_state_gone, F, EMB, ETCH_STORE_REASON_NOT_INSTALLED, NULL);
    expect_after("state garbage", dmg_state_garbage, F, EMB, ETCH_STORE_REASON_BAD_STATE, NULL);
    expect_after("state dangling", dmg_state_dangling, F, PREV,
                 ETCH_STORE_REASON_NOT_INSTALLED, "current 9");
    expect_after("half-written temporary", dmg_half_written, F, CUR, ETCH_STORE_REASON_OK, NULL);
}

/* Foreign files are ignored, reported, never deleted; temporaries are cleaned; links are not
 * followed out of the store. */
static void test_foreign(void) {
    char dir[256], out[256], p[600];
    st_mkdtemp(dir, sizeof dir, "foreign");
    st_mkdtemp(out, sizeof out, "outside");
    etch_store *s = open_store(dir);
    CHECK_OK(etch_store_install_file(s, "m", pte_add, NULL, NULL));
    snprintf(p, sizeof p, "%s/notes.txt", dir);
    st_write(p, "keep me", 7);
    snprintf(p, sizeof p, "%s/m/mine.txt", dir);
    st_write(p, "keep me", 7);
    snprintf(p, sizeof p, "%s/emptydir", dir);
    mkdir(p, 0755);
    /* a stale temporary (a crashed install): removed at the next open */
    snprintf(p, sizeof p, "%s/.tmp-install-1-2-3", dir);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/.tmp-install-1-2-3/model.pte", dir);
    st_write(p, "ET12 half", 9);
    snprintf(p, sizeof p, "%s/m/.tmp-state-4242", dir);
    st_write(p, "etch-store-state 1\n", 19);
    etch_store_close(s);
    s = open_store(dir);
    CHECK(st_count_prefix(dir, ".tmp-") == 0);
    snprintf(p, sizeof p, "%s/m", dir);
    CHECK(st_count_prefix(p, ".tmp-") == 0);
    etch_store_entry *e = NULL;
    size_t n = 0;
    CHECK_OK(etch_store_list(s, &e, &n));
    CHECK(n == 1 && !strcmp(e[0].name, "m")); /* notes.txt, emptydir: not models */
    free(e);
    /* removing a name that holds foreign files is refused, and nothing is lost */
    CHECK_STATUS(etch_store_remove(s, "m", NULL), ETCH_ERR_INVALID_STATE);
    CHECK(strstr(etch_last_error(), "mine.txt") != NULL);
    etch_status st;
    etch_store_served m = serve(s, "m", ETCH_STORE_CHECK_FULL, NULL, &st);
    CHECK(st == ETCH_OK && m.origin == ETCH_STORE_SERVED_CURRENT);
    snprintf(p, sizeof p, "%s/m/versions/1/extra.bin", dir);
    st_write(p, "x", 1);
    CHECK_STATUS(etch_store_remove(s, "m", "1"), ETCH_ERR_INVALID_STATE);
    CHECK(st_exists(p));
    unlink(p);
    snprintf(p, sizeof p, "%s/m/mine.txt", dir);
    unlink(p);
    CHECK_OK(etch_store_remove(s, "m", NULL));
    snprintf(p, sizeof p, "%s/notes.txt", dir);
    CHECK(st_exists(p));

    /* a name that is a symbolic link out of the store: not followed, nothing written there */
    snprintf(p, sizeof p, "%s/evil", dir);
    CHECK(symlink(out, p) == 0);
    CHECK(etch_store_install_file(s, "evil", pte_add, NULL, NULL) != ETCH_OK);
    CHECK(strstr(etch_last_error(), "symbolic link") != NULL);
    CHECK(st_count_prefix(out, "") == 2); /* . and .. */
    m = serve(s, "evil", ETCH_STORE_CHECK_FAST, NULL, &st);
    CHECK(st != ETCH_OK && m.origin == ETCH_STORE_SERVED_NONE);
    CHECK(etch_store_remove(s, "evil", NULL) != ETCH_OK);
    CHECK(st_exists(p) && st_count_prefix(out, "") == 2);
    /* a versions directory that is a link */
    unlink(p);
    CHECK_OK(etch_store_install_file(s, "v", pte_add, NULL, NULL));
    char vs[600], moved[600];
    snprintf(vs, sizeof vs, "%s/v/versions", dir);
    snprintf(moved, sizeof moved, "%s/real", out);
    CHECK(rename(vs, moved) == 0 && symlink(moved, vs) == 0);
    m = serve(s, "v", ETCH_STORE_CHECK_FAST, NULL, &st);
    CHECK(st != ETCH_OK && m.origin == ETCH_STORE_SERVED_NONE);
    CHECK(etch_store_install_file(s, "v", pte_add, NULL, NULL) != ETCH_OK);
    snprintf(p, sizeof p, "%s/real/1/model.pte", out);
    CHECK(st_exists(p));
    CHECK(st_count_prefix(moved, "") == 3); /* ., .., 1: nothing added outside */
    etch_store_close(s);
    st_rm_rf(dir);
    st_rm_rf(out);
}

/* A store that checks for a caller who runs without backends (CPU twins) does not require
 * the backends a manifest lists; the registry is process-wide, so only what is not
 * registered is missing — here nothing, as the default store registered them. */
static void test_no_backends(void) {
    char dir[256];
    st_mkdtemp(dir, sizeof dir, "nobk");
    etch_store *s = open_store(dir);
    CHECK_OK(etch_store_install_file(s, "cnn", pte_cnn, NULL, NULL));
    etch_store_manifest *m = NULL;
    CHECK_OK(etch_store_manifest_get(s, "cnn", NULL, &m));
    CHECK(m && m->num_backends == 1 && !strcmp(m->backends[0], "XnnpackBackend"));
    etch_store_manifest_free(m);
    etch_store_close(s);
    etch_store_options o = etch_store_default_options();
    o.no_backends = true;
    o.kernels = ETCH_MODULE_KERNELS_REGISTERED;
    CHECK_OK(etch_store_open(dir, &o, &s));
    etch_status st;
    etch_store_served sv = serve(s, "cnn", ETCH_STORE_CHECK_FULL, NULL, &st);
    CHECK(st == ETCH_OK && sv.origin == ETCH_STORE_SERVED_CURRENT);
    etch_store_close(s);
    st_rm_rf(dir);
}

/* keep_versions */
static void test_prune(void) {
    char dir[256];
    st_mkdtemp(dir, sizeof dir, "prune");
    etch_store_options o = etch_store_default_options();
    o.keep_versions = 0;
    etch_store *s = NULL;
    CHECK_OK(etch_store_open(dir, &o, &s));
    for (int i = 0; i < 4; i++)
        CHECK_OK(etch_store_install_file(s, "m", pte_add, NULL, NULL));
    etch_store_entry *e = NULL;
    size_t n = 0;
    CHECK_OK(etch_store_list(s, &e, &n));
    CHECK(n == 1 && e[0].num_versions == 4);
    free(e);
    etch_store_close(s);
    o.keep_versions = 3;
    CHECK_OK(etch_store_open(dir, &o, &s));
    CHECK_OK(etch_store_install_file(s, "m", pte_add, NULL, NULL));
    CHECK_OK(etch_store_list(s, &e, &n));
    CHECK(n == 1 && e[0].num_versions == 3 && !strcmp(e[0].current, "5") &&
          !strcmp(e[0].previous, "4"));
    free(e);
    char p[600];
    CHECK(st_exists(vpath(p, sizeof p, dir, "m", "3", "manifest"))); /* the newest other */
    CHECK(!st_exists(vpath(p, sizeof p, dir, "m", "1", "manifest")));
    etch_store_close(s);
    st_rm_rf(dir);
}

/* The lock: a held lock makes an installer wait, then fail clearly; two processes installing
 * at once both succeed, one after the other. */
static void test_concurrency(void) {
    char dir[256], p[600];
    st_mkdtemp(dir, sizeof dir, "lock");
    etch_store *s = open_store(dir);
    snprintf(p, sizeof p, "%s/.lock", dir);
    int fd = open(p, O_RDWR);
    CHECK(fd >= 0 && flock(fd, LOCK_EX) == 0);
    etch_store_options o = etch_store_default_options();
    o.lock_timeout_ms = 100;
    etch_store *t = NULL;
    CHECK_OK(etch_store_open(dir, &o, &t));
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    CHECK_STATUS(etch_store_install_file(t, "m", pte_add, NULL, NULL), ETCH_ERR_INVALID_STATE);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
    CHECK_MSG(ms >= 90 && ms < 3000, "waited %.0f ms", ms);
    CHECK(strstr(etch_last_error(), "locked") != NULL);
    CHECK(st_count_prefix(dir, ".tmp-") == 0);
    etch_store_close(t);
    /* o.lock_timeout_ms = 0: at once */
    o.lock_timeout_ms = 0;
    CHECK_OK(etch_store_open(dir, &o, &t));
    CHECK_STATUS(etch_store_install_file(t, "m", pte_add, NULL, NULL), ETCH_ERR_INVALID_STATE);
    etch_store_close(t);
    /* an installer waiting for the lock goes on once it is released */
    pid_t waiter = fork();
    if (waiter == 0) {
        close(fd); /* the parent's descriptor still holds the lock */
        etch_store *c = NULL;
        etch_store_options co = etch_store_default_options();
        co.lock_timeout_ms = 10000;
        int bad = etch_store_open(dir, &co, &c) != ETCH_OK ||
                  etch_store_install_file(c, "m", pte_add, NULL, NULL) != ETCH_OK;
        etch_store_close(c);
        _exit(bad);
    }
    usleep(300 * 1000);
    CHECK(!st_exists(vpath(p, sizeof p, dir, "m", "1", "manifest"))); /* still waiting */
    flock(fd, LOCK_UN);
    close(fd);
    int wst = 0;
    waitpid(waiter, &wst, 0);
    CHECK(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
    CHECK(st_exists(vpath(p, sizeof p, dir, "m", "1", "manifest")));

    /* two processes, three installs each, at once */
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        if (kids[k] == 0) {
            etch_store *c = NULL;
            etch_store_options co = etch_store_default_options();
            co.lock_timeout_ms = 10000;
            int bad = etch_store_open(dir, &co, &c) != ETCH_OK;
            for (int i = 0; i < 3 && !bad; i++)
                bad |= etch_store_install_file(c, "m", k ? pte_seg : pte_add, NULL, NULL) !=
                       ETCH_OK;
            etch_store_close(c);
            _exit(bad);
        }
    }
    for (int k = 0; k < 2; k++) {
        int status = 0;
        waitpid(kids[k], &status, 0);
        CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "installer %d failed", k);
    }
    etch_store_entry *e = NULL;
    size_t n = 0;
    CHECK_OK(etch_store_list(s, &e, &n));
    CHECK(n == 1 && e && !strcmp(e[0].current, "7") && !strcmp(e[0].previous, "6"));
    free(e);
    CHECK_OK(etch_store_verify(s, "m", NULL, ETCH_STORE_CHECK_FULL, NULL));
    CHECK_OK(etch_store_verify(s, "m", "6", ETCH_STORE_CHECK_FULL, NULL));
    CHECK(st_count_prefix(dir, ".tmp-") == 0);
    etch_store_close(s);
    st_rm_rf(dir);
}

int main(int argc, char **argv) {
    fx = argc > 1 ? argv[1] : "../shared/fixtures";
    snprintf(pte_add, sizeof pte_add, "%s/pte/add.pte", fx);
    snprintf(pte_seg, sizeof pte_seg, "%s/pte/add_constant_segment.pte", fx);
    snprintf(pte_cnn, sizeof pte_cnn, "%s/pte/xnnpack_simple_cnn.pte", fx);
    snprintf(pte_ext, sizeof pte_ext, "%s/pte/addmul_external.pte", fx);
    snprintf(ptd_ext, sizeof ptd_ext, "%s/pte/addmul_external.ptd", fx);
    snprintf(tok512, sizeof tok512, "%s/llm/tok512.model", fx);
    snprintf(pte_bad, sizeof pte_bad, "%s/pte/not_a_program.pte", fx);
    snprintf(pte_legacy, sizeof pte_legacy, "%s/pte/legacy_et02.pte", fx);
    test_names();
    test_open_store();
    test_install_serve_rollback();
    test_buffer_stream();
    test_missing_operator();
    test_damage();
    test_foreign();
    test_no_backends();
    test_prune();
    test_concurrency();
    return etch_test_finish();
}
