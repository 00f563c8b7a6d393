/* The model store (etch/store.h): named, versioned models in a directory, installed
 * atomically (temporary directory, fsync, verify, rename, fsync, state switch) and served
 * through a verified fallback chain. Every path inside the store is reached from the store's
 * directory descriptor with O_NOFOLLOW, so nothing outside it is touched and no symbolic link
 * is followed. */
#define _GNU_SOURCE /* O_CLOEXEC / O_DIRECTORY / O_NOFOLLOW, flock, fdopendir on older libcs */
#include "etch/store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "deploy/store_fault.h"
#include "etch/backends.h"
#include "etch/etch.h"
#include "etch/kernels.h"
#include "etch/llm.h"
#include "runtime/error.h"

#define MARKER ".etch-store"
#define MARKER_TEXT "etch-store 1\n"
#define LOCK_FILE ".lock"
#define TMP_PREFIX ".tmp-"
#define STATE_FILE "state"
#define VERSIONS_DIR "versions"
#define MANIFEST_FILE "manifest"
#define MANIFEST_MAX (1 << 20)
#define STATE_MAX 4096
#define COPY_CHUNK (1 << 16)
#define MAX_NEEDS 4096

static const char *const ROLE_NAMES[ETCH_STORE_NUM_ROLES] = {"pte", "ptd", "tokenizer"};
static const char *const ROLE_FILES[ETCH_STORE_NUM_ROLES] = {"model.pte", "model.ptd",
                                                             "tokenizer"};

struct etch_store {
    char *path;
    int root;   /* the store directory */
    int lockfd; /* DIR/.lock */
    int locked; /* 0, LOCK_SH or LOCK_EX */
    etch_store_options o;
};

/* ---- the fault hook and the I/O steps that consult it ------------------------------------ */

static etch_store_fault_fn fault_fn;
static void *fault_user;

void etch_store_set_fault_hook(etch_store_fault_fn fn, void *user) {
    fault_fn = fn;
    fault_user = user;
}

static int faulted(const char *step, const char *what) {
    if (!fault_fn)
        return 0;
    int e = fault_fn(fault_user, step, what);
    if (e) {
        errno = e;
        return -1;
    }
    return 0;
}

/* A new file (O_EXCL: never an existing one, never through a link). */
static int io_create(int dfd, const char *name) {
    if (faulted("create", name))
        return -1;
    return openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
}

static int io_mkdir(int dfd, const char *name) {
    if (faulted("mkdir", name))
        return -1;
    return mkdirat(dfd, name, 0755);
}

static int io_write(int fd, const void *data, size_t size, const char *what) {
    size_t stop_at = 0; /* a short write injected: the bytes to write before failing */
    bool short_write = false;
    if (fault_fn) {
        int e = fault_fn(fault_user, "write", what);
        if (e == ETCH_STORE_FAULT_SHORT_WRITE) {
            short_write = true;
            stop_at = size / 2;
        } else if (e) {
            errno = e;
            return -1;
        }
    }
    const char *p = (const char *)data;
    if (short_write) {
        if (stop_at && write(fd, p, stop_at) < 0)
            return -1;
        errno = ENOSPC;
        return -1;
    }
    while (size) {
        ssize_t n = write(fd, p, size);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        size -= (size_t)n;
    }
    return 0;
}

static int io_fsync(int fd, const char *what) {
    if (faulted("fsync", what))
        return -1;
    while (fsync(fd) != 0)
        if (errno != EINTR)
            return -1;
    return 0;
}

static int io_rename(int from_dfd, const char *from, int to_dfd, const char *to) {
    if (faulted("rename", to))
        return -1;
    return renameat(from_dfd, from, to_dfd, to);
}

/* A directory entry, never through a link (errno ELOOP when it is one). */
static int open_dir_at(int dfd, const char *name) {
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOTDIR) {
        struct stat sb;
        if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(sb.st_mode))
            errno = ELOOP;
        else
            errno = ENOTDIR;
    }
    return fd;
}

static void close_fd(int *fd) {
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

static etch_status io_err(const char *what, const char *name) {
    int e = errno;
    if (e == ELOOP)
        return etch_err(ETCH_ERR_ACCESS_FAILED,
                        "store: %s %s: a symbolic link (the store does not follow links)",
                        what, name);
    return etch_err(ETCH_ERR_ACCESS_FAILED, "store: %s %s: %s", what, name, strerror(e));
}

/* ---- small helpers ------------------------------------------------------------------------ */

const char *etch_store_role_name(etch_store_role role) {
    return (unsigned)role < ETCH_STORE_NUM_ROLES ? ROLE_NAMES[role] : "unknown";
}

bool etch_store_name_valid(const char *s) {
    if (!s || !s[0] || s[0] == '.' || s[0] == '-')
        return false;
    size_t n = 0;
    for (const char *p = s; *p; p++, n++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-' || c == '+';
        if (!ok || n >= ETCH_STORE_NAME_MAX)
            return false;
    }
    return true;
}

static etch_status check_name(const char *what, const char *s) {
    if (etch_store_name_valid(s))
        return ETCH_OK;
    if (!s)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "store: no %s given", what);
    char shown[80];
    size_t k = 0;
    for (const char *p = s; *p && k + 5 < sizeof shown; p++) {
        unsigned char c = (unsigned char)*p;
        if (c < 0x20 || c >= 0x7f)
            k += (size_t)snprintf(shown + k, sizeof shown - k, "\\x%02x", c);
        else
            shown[k++] = (char)c;
    }
    shown[k] = 0;
    return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                    "store: invalid %s '%s': 1-%d characters of A-Z a-z 0-9 . _ + -, not "
                    "starting with '.' or '-'",
                    what, shown, ETCH_STORE_NAME_MAX);
}

static void copy_str(char *dst, size_t cap, const char *src) {
    size_t n = strlen(src);
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

/* "X.Y.Z" into three numbers; false when malformed. */
static bool parse_version3(const char *s, unsigned long v[3]) {
    const char *p = s;
    for (int i = 0; i < 3; i++) {
        if (*p < '0' || *p > '9')
            return false;
        char *end;
        v[i] = strtoul(p, &end, 10);
        if (end - p > 6)
            return false;
        p = end;
        if (i < 2) {
            if (*p != '.')
                return false;
            p++;
        }
    }
    return *p == 0;
}

/* Read a small regular file (at most `max` bytes) into a NUL-terminated malloc'd buffer. */
static etch_status read_small(int dfd, const char *name, size_t max, char **out, size_t *len) {
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? etch_err(ETCH_ERR_NOT_FOUND, "store: %s: missing", name)
                               : io_err("open", name);
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
        close(fd);
        return etch_err(ETCH_ERR_INVALID_PROGRAM, "store: %s: not a regular file of at most "
                        "%zu bytes", name, max);
    }
    char *buf = malloc((size_t)st.st_size + 1);
    if (!buf) {
        close(fd);
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "store: out of memory");
    }
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    if (got != (size_t)st.st_size) {
        free(buf);
        return etch_err(ETCH_ERR_ACCESS_FAILED, "store: %s: short read", name);
    }
    buf[got] = 0;
    *out = buf;
    *len = got;
    return ETCH_OK;
}

/* Write `name` in dfd through a temporary: create tmp, write, fsync, rename, fsync dir. */
static etch_status write_atomic(int dfd, const char *name, const char *data, size_t size) {
    char tmp[64];
    snprintf(tmp, sizeof tmp, TMP_PREFIX "%s-%ld", name, (long)getpid());
    unlinkat(dfd, tmp, 0); /* a stale one of ours (we hold the lock) */
    int fd = io_create(dfd, tmp);
    if (fd < 0)
        return io_err("create", tmp);
    if (io_write(fd, data, size, tmp) != 0 || io_fsync(fd, tmp) != 0) {
        etch_status st = io_err("write", tmp);
        close(fd);
        unlinkat(dfd, tmp, 0);
        return st;
    }
    close(fd);
    if (io_rename(dfd, tmp, dfd, name) != 0) {
        etch_status st = io_err("rename to", name);
        unlinkat(dfd, tmp, 0);
        return st;
    }
    if (io_fsync(dfd, "directory") != 0)
        return io_err("fsync the directory of", name);
    return ETCH_OK;
}

/* A DIR stream over a duplicate of `fd` (which is left open), read from the start: a
 * duplicate shares the offset, so a stream once read to its end must be rewound. */
static DIR *opendir_dup(int fd) {
    int d = dup(fd);
    if (d < 0)
        return NULL;
    DIR *dir = fdopendir(d);
    if (!dir) {
        close(d);
        return NULL;
    }
    rewinddir(dir);
    return dir;
}

/* Remove a directory tree that the store owns (a temporary or a version being removed),
 * without following links: links are unlinked, never entered. */
static void rm_tree_at(int dfd, const char *name, int depth) {
    int fd = depth < 8 ? open_dir_at(dfd, name) : -1;
    if (fd >= 0) {
        DIR *d = fdopendir(fd);
        if (d) {
            struct dirent *e;
            while ((e = readdir(d)) != NULL) {
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                    continue;
                struct stat st;
                if (fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
                    rm_tree_at(fd, e->d_name, depth + 1);
                else
                    unlinkat(fd, e->d_name, 0);
            }
            closedir(d); /* closes fd */
        } else {
            close(fd);
        }
    }
    if (unlinkat(dfd, name, AT_REMOVEDIR) != 0)
        unlinkat(dfd, name, 0);
}

/* A fresh directory DIR/.tmp-<what>-<pid>-<n>-<clock>; its name into `out`. */
static etch_status make_tmp_dir(etch_store *s, const char *what, char *out, size_t cap) {
    static unsigned counter;
    for (int tries = 0; tries < 100; tries++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(out, cap, TMP_PREFIX "%s-%ld-%u-%lx", what, (long)getpid(), counter++,
                 (unsigned long)ts.tv_nsec);
        if (io_mkdir(s->root, out) == 0)
            return ETCH_OK;
        if (errno != EEXIST)
            return io_err("mkdir", out);
    }
    return etch_err(ETCH_ERR_ACCESS_FAILED, "store: cannot make a temporary directory");
}

/* ---- locking ------------------------------------------------------------------------------ */

static etch_status store_lock(etch_store *s, int op) {
    if (s->locked)
        return etch_err(ETCH_ERR_INTERNAL, "store: lock taken twice");
    int waited = 0;
    for (;;) {
        int r = s->o.lock_timeout_ms < 0 ? flock(s->lockfd, op) : flock(s->lockfd, op | LOCK_NB);
        if (r == 0) {
            s->locked = op;
            return ETCH_OK;
        }
        if (errno == EINTR)
            continue;
        if (errno != EWOULDBLOCK)
            return io_err("lock", LOCK_FILE);
        if (waited >= s->o.lock_timeout_ms)
            return etch_err(ETCH_ERR_INVALID_STATE,
                            "store %s is locked by another process (an install or removal in "
                            "progress; waited %d ms)",
                            s->path, waited);
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
        waited += 5;
    }
}

static void store_unlock(etch_store *s) {
    if (s->locked)
        flock(s->lockfd, LOCK_UN);
    s->locked = 0;
}

/* ---- the state file ------------------------------------------------------------------------- */

typedef struct store_state {
    bool exists;
    char current[ETCH_STORE_NAME_MAX + 1];
    char previous[ETCH_STORE_NAME_MAX + 1];
    uint64_t next;
} store_state;

/* ETCH_OK with exists=false when there is no state file; ETCH_ERR_INVALID_PROGRAM when it is
 * malformed. */
static etch_status state_read(int namefd, store_state *st) {
    memset(st, 0, sizeof *st);
    st->next = 1;
    char *buf;
    size_t len;
    etch_status r = read_small(namefd, STATE_FILE, STATE_MAX, &buf, &len);
    if (r == ETCH_ERR_NOT_FOUND)
        return ETCH_OK;
    if (r != ETCH_OK)
        return r;
    bool header = false, has_next = false;
    char *save = NULL;
    r = ETCH_OK;
    if (strlen(buf) != len)
        r = etch_err(ETCH_ERR_INVALID_PROGRAM, "store: state: NUL byte");
    for (char *line = strtok_r(buf, "\n", &save); line && r == ETCH_OK;
         line = strtok_r(NULL, "\n", &save)) {
        char key[32], val[ETCH_STORE_NAME_MAX + 2];
        char extra;
        if (!header) {
            header = strcmp(line, "etch-store-state 1") == 0;
            if (!header)
                r = etch_err(ETCH_ERR_INVALID_PROGRAM, "store: state: bad first line");
            continue;
        }
        if (sscanf(line, "%31s %65s %c", key, val, &extra) != 2) {
            r = etch_err(ETCH_ERR_INVALID_PROGRAM, "store: state: bad line '%.60s'", line);
        } else if (!strcmp(key, "current") && !st->current[0] && etch_store_name_valid(val)) {
            copy_str(st->current, sizeof st->current, val);
        } else if (!strcmp(key, "previous") && !st->previous[0] && etch_store_name_valid(val)) {
            copy_str(st->previous, sizeof st->previous, val);
        } else if (!strcmp(key, "next") && !has_next && val[0] >= '0' && val[0] <= '9') {
            char *end;
            errno = 0;
            st->next = strtoull(val, &end, 10);
            has_next = *end == 0 && errno == 0;
            if (!has_next)
                r = etch_err(ETCH_ERR_INVALID_PROGRAM, "store: state: bad next '%s'", val);
        } else {
            r = etch_err(ETCH_ERR_INVALID_PROGRAM, "store: state: bad line '%.60s'", line);
        }
    }
    free(buf);
    if (r == ETCH_OK && (!header || !has_next))
        r = etch_err(ETCH_ERR_INVALID_PROGRAM, "store: state: incomplete");
    if (r == ETCH_OK && st->previous[0] && !strcmp(st->previous, st->current))
        r = etch_err(ETCH_ERR_INVALID_PROGRAM, "store: state: previous is current");
    if (r != ETCH_OK)
        return r;
    st->exists = true;
    return ETCH_OK;
}

static etch_status state_write(int namefd, const store_state *st) {
    char buf[512];
    int n = snprintf(buf, sizeof buf, "etch-store-state 1\n");
    if (st->current[0])
        n += snprintf(buf + n, sizeof buf - (size_t)n, "current %s\n", st->current);
    if (st->previous[0])
        n += snprintf(buf + n, sizeof buf - (size_t)n, "previous %s\n", st->previous);
    n += snprintf(buf + n, sizeof buf - (size_t)n, "next %" PRIu64 "\n", st->next);
    return write_atomic(namefd, STATE_FILE, buf, (size_t)n);
}

/* ---- the manifest ------------------------------------------------------------------------- */

/* The operators and backends a program needs (unique, in order of first use). */
typedef struct needs {
    char (*ops)[128];
    size_t nops, capops;
    char (*bks)[128];
    size_t nbks, capbks;
} needs;

static void needs_free(needs *n) {
    free(n->ops);
    free(n->bks);
    memset(n, 0, sizeof *n);
}

static etch_status needs_add(char (**v)[128], size_t *n, size_t *cap, const char *name) {
    for (size_t i = 0; i < *n; i++)
        if (!strcmp((*v)[i], name))
            return ETCH_OK;
    if (*n >= MAX_NEEDS)
        return etch_err(ETCH_ERR_INVALID_PROGRAM, "store: more than %d operators", MAX_NEEDS);
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        char(*p)[128] = realloc(*v, nc * sizeof *p);
        if (!p)
            return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "store: out of memory");
        *v = p;
        *cap = nc;
    }
    copy_str((*v)[(*n)++], 128, name);
    return ETCH_OK;
}

/* Names the manifest may carry: printable ASCII without spaces, 1..127 bytes. */
static bool need_name_ok(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 127)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
            return false;
    return true;
}

void etch_store_manifest_free(etch_store_manifest *m) {
    if (!m)
        return;
    free(m->operators);
    free(m->backends);
    free(m);
}

static bool is_hex64(const char *s) {
    uint8_t d[ETCH_SHA256_SIZE];
    if (!etch_sha256_parse_hex(s, d))
        return false;
    for (int i = 0; i < 64; i++)
        if (s[i] >= 'A' && s[i] <= 'F')
            return false;
    return true;
}

/* Parse and check a manifest's text (strict: see the format in etch/store.h). */
static etch_status manifest_parse(char *text, size_t len, etch_store_manifest **out) {
    if (strlen(text) != len)
        return etch_err(ETCH_ERR_INVALID_PROGRAM, "manifest: NUL byte");
    /* the end line: "end HEX\n" closes the file; the hash covers what precedes it */
    const char *endl = NULL;
    if (len >= 69 && text[len - 1] == '\n') {
        const char *p = text + len - 69;
        if ((p == text || p[-1] == '\n') && !memcmp(p, "end ", 4))
            endl = p;
    }
    if (!endl)
        return etch_err(ETCH_ERR_INVALID_PROGRAM, "manifest: no 'end' line (truncated?)");
    char want[ETCH_SHA256_HEX_SIZE];
    memcpy(want, endl + 4, 64);
    want[64] = 0;
    uint8_t d[ETCH_SHA256_SIZE];
    char got[ETCH_SHA256_HEX_SIZE];
    etch_sha256_digest(text, (size_t)(endl - text), d);
    etch_sha256_hex(d, got);
    if (strcmp(got, want) != 0)
        return etch_err(ETCH_ERR_INVALID_PROGRAM,
                        "manifest: its end checksum does not match its contents (edited or "
                        "corrupted)");
    etch_store_manifest *m = calloc(1, sizeof *m);
    if (!m)
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "store: out of memory");
    needs n;
    memset(&n, 0, sizeof n);
    text[endl - text] = 0;
    bool header = false, has_seq = false;
    char *save = NULL;
    etch_status r = ETCH_OK;
    for (char *line = strtok_r(text, "\n", &save); line && r == ETCH_OK;
         line = strtok_r(NULL, "\n", &save)) {
        if (!header) {
            header = !strcmp(line, "etch-model-manifest 1");
            if (!header)
                r = etch_err(ETCH_ERR_INVALID_PROGRAM, "manifest: bad first line");
            continue;
        }
        char key[32], a[160], b[160], sz[160], hx[160], extra;
        int k = sscanf(line, "%31s %159s %c", key, a, &extra);
        bool ok = false;
        if (k == 2 && !strcmp(key, "name") && !m->name[0]) {
            ok = etch_store_name_valid(a);
            copy_str(m->name, sizeof m->name, a);
        } else if (k == 2 && !strcmp(key, "version") && !m->version[0]) {
            ok = etch_store_name_valid(a);
            copy_str(m->version, sizeof m->version, a);
        } else if (k == 2 && !strcmp(key, "seq") && !has_seq) {
            char *end;
            m->seq = strtoull(a, &end, 10);
            ok = has_seq = a[0] >= '0' && a[0] <= '9' && *end == 0;
        } else if (k == 2 && !strcmp(key, "etch_min_version") && !m->min_etch_version[0]) {
            unsigned long v[3];
            ok = parse_version3(a, v);
            copy_str(m->min_etch_version, sizeof m->min_etch_version, a);
        } else if (k == 2 && !strcmp(key, "created") && !m->created[0]) {
            ok = strlen(a) < sizeof m->created;
            copy_str(m->created, sizeof m->created, a);
        } else if (k == 2 && !strcmp(key, "head_sha256") && !m->head_sha256[0]) {
            ok = is_hex64(a);
            copy_str(m->head_sha256, sizeof m->head_sha256, a);
        } else if (k == 2 && (!strcmp(key, "operator") || !strcmp(key, "backend")) &&
                   need_name_ok(a)) {
            etch_status e = key[0] == 'o' ? needs_add(&n.ops, &n.nops, &n.capops, a)
                                          : needs_add(&n.bks, &n.nbks, &n.capbks, a);
            ok = e == ETCH_OK;
            if (e == ETCH_ERR_MEMORY_ALLOCATION_FAILED) /* not the manifest's fault */
                r = e;
        } else if (k == 3 && !strcmp(key, "file")) {
            /* file ROLE FILENAME SIZE SHA256 */
            k = sscanf(line, "%31s %159s %159s %159s %159s %c", key, a, b, sz, hx, &extra);
            int role = -1;
            for (int i = 0; i < ETCH_STORE_NUM_ROLES; i++)
                if (!strcmp(a, ROLE_NAMES[i]))
                    role = i;
            char *end;
            errno = 0;
            uint64_t size = strtoull(sz, &end, 10);
            ok = k == 5 && role >= 0 && !m->files[role].present && !strcmp(b, ROLE_FILES[role]) &&
                 sz[0] >= '0' && sz[0] <= '9' && *end == 0 && errno == 0 && is_hex64(hx);
            if (ok) {
                m->files[role].present = true;
                m->files[role].size = size;
                copy_str(m->files[role].sha256, sizeof m->files[role].sha256, hx);
            }
        }
        if (!ok && r == ETCH_OK)
            r = etch_err(ETCH_ERR_INVALID_PROGRAM, "manifest: bad or repeated line '%.80s'",
                         line);
    }
    if (r == ETCH_OK && (!header || !m->name[0] || !m->version[0] || !has_seq ||
                         !m->min_etch_version[0] || !m->head_sha256[0] ||
                         !m->files[ETCH_STORE_PTE].present))
        r = etch_err(ETCH_ERR_INVALID_PROGRAM,
                     "manifest: incomplete (name, version, seq, etch_min_version, head_sha256 "
                     "and the pte file are required)");
    if (r != ETCH_OK) {
        needs_free(&n);
        etch_store_manifest_free(m);
        return r;
    }
    m->operators = n.ops;
    m->num_operators = n.nops;
    m->backends = n.bks;
    m->num_backends = n.nbks;
    *out = m;
    return ETCH_OK;
}

/* The manifest's text, its end line included (malloc'd). */
static char *manifest_text(const etch_store_manifest *m, const needs *n, size_t *len) {
    size_t cap = 1024 + (n->nops + n->nbks) * 140;
    char *t = malloc(cap);
    if (!t)
        return NULL;
    size_t o = 0;
#define PUT(...) o += (size_t)snprintf(t + o, cap - o, __VA_ARGS__)
    PUT("etch-model-manifest 1\nname %s\nversion %s\nseq %" PRIu64
        "\netch_min_version %s\ncreated %s\n",
        m->name, m->version, m->seq, m->min_etch_version, m->created);
    for (int i = 0; i < ETCH_STORE_NUM_ROLES; i++)
        if (m->files[i].present)
            PUT("file %s %s %" PRIu64 " %s\n", ROLE_NAMES[i], ROLE_FILES[i], m->files[i].size,
                m->files[i].sha256);
    PUT("head_sha256 %s\n", m->head_sha256);
    for (size_t i = 0; i < n->nops; i++)
        PUT("operator %s\n", n->ops[i]);
    for (size_t i = 0; i < n->nbks; i++)
        PUT("backend %s\n", n->bks[i]);
    uint8_t d[ETCH_SHA256_SIZE];
    char hex[ETCH_SHA256_HEX_SIZE];
    etch_sha256_digest(t, o, d);
    PUT("end %s\n", etch_sha256_hex(d, hex));
#undef PUT
    *len = o;
    return t;
}

/* ---- what a program needs, and whether this build has it ---------------------------------- */

static void ensure_registered(const etch_store *s) {
    if (s->o.kernels == ETCH_MODULE_KERNELS_OPTIMIZED)
        etch_kernels_register_optimized();
    else if (s->o.kernels == ETCH_MODULE_KERNELS_PORTABLE)
        etch_kernels_register_portable();
    if (!s->o.no_backends)
        etch_backends_register_builtin();
}

static bool backend_here(const char *name) {
    const etch_backend *b = etch_backends_find(name, strlen(name));
    return b && (!b->is_available || b->is_available(b->user_data));
}

/* Open the program as etch_module_open would and list every operator and backend of every
 * method (CPU twins included). Fails naming the first one this build lacks. */
static etch_status program_needs(const etch_store *s, const char *pte_path, const char *ptd_path,
                                 needs *out) {
    etch_module_options mo = etch_module_default_options();
    mo.data_path = ptd_path;
    mo.kernels = s->o.kernels;
    mo.no_backends = s->o.no_backends;
    mo.temp_size = 4096;
    etch_module *mod = NULL;
    etch_status st = etch_module_open(pte_path, &mo, &mod);
    if (st != ETCH_OK)
        return st;
    const etch_program *p = etch_module_program(mod);
    memset(out, 0, sizeof *out);
    const char *missing_op = NULL, *missing_bk = NULL, *in_method = NULL;
    for (size_t i = 0; i < etch_program_num_methods(p) && st == ETCH_OK; i++) {
        etch_method_meta meta;
        memset(&meta, 0, sizeof meta);
        meta.program = p;
        meta.index = (uint32_t)i;
        meta.fallback_from = NULL;
        if (etch_method_meta_needs_external_data(&meta) && !ptd_path) {
            st = etch_err(ETCH_ERR_INVALID_EXTERNAL_DATA,
                          "method '%s' needs external data (.ptd), and none was given",
                          etch_method_meta_name(&meta));
            break;
        }
        for (size_t j = 0; j < etch_method_meta_num_operators(&meta) && st == ETCH_OK; j++) {
            etch_operator_info oi;
            if ((st = etch_method_meta_operator(&meta, j, &oi)) != ETCH_OK)
                break;
            st = needs_add(&out->ops, &out->nops, &out->capops, oi.name);
            if (!oi.available && !missing_op) {
                missing_op = out->ops[out->nops - 1];
                in_method = etch_method_meta_name(&meta);
            }
        }
        for (size_t j = 0; j < etch_method_meta_num_delegates(&meta) && st == ETCH_OK; j++) {
            etch_delegate_info di;
            if ((st = etch_method_meta_delegate(&meta, j, &di)) != ETCH_OK)
                break;
            st = needs_add(&out->bks, &out->nbks, &out->capbks, di.id ? di.id : "");
            if (!s->o.no_backends && !backend_here(di.id ? di.id : "") && !missing_bk) {
                missing_bk = out->bks[out->nbks - 1];
                if (!in_method)
                    in_method = etch_method_meta_name(&meta);
            }
        }
    }
    if (st == ETCH_OK && missing_op)
        st = etch_err(ETCH_ERR_OPERATOR_MISSING,
                      "operator '%s' (method '%s') is not registered in this build", missing_op,
                      in_method);
    else if (st == ETCH_OK && missing_bk)
        st = etch_err(ETCH_ERR_NOT_FOUND,
                      "backend '%s' (method '%s') is not registered in this build", missing_bk,
                      in_method);
    for (size_t i = 0; i < out->nops && st == ETCH_OK; i++)
        if (!need_name_ok(out->ops[i]))
            st = etch_err(ETCH_ERR_INVALID_PROGRAM, "operator name '%s' cannot be recorded",
                          out->ops[i]);
    for (size_t i = 0; i < out->nbks && st == ETCH_OK; i++)
        if (!need_name_ok(out->bks[i]))
            st = etch_err(ETCH_ERR_INVALID_PROGRAM, "backend name '%s' cannot be recorded",
                          out->bks[i]);
    etch_module_close(mod);
    if (st != ETCH_OK)
        needs_free(out);
    return st;
}

static etch_status tokenizer_check(const char *path) {
    etch_tokenizer *tok = NULL;
    etch_status st = etch_tokenizer_open_file(path, NULL, &tok);
    etch_tokenizer_close(tok);
    return st;
}

/* ---- checking one version ------------------------------------------------------------------- */

/* dir fds of NAME, NAME/versions and NAME/versions/VERSION (any may be NULL). */
static etch_status open_version_dirs(etch_store *s, const char *name, const char *version,
                                     int *namefd, int *vfd) {
    int n = open_dir_at(s->root, name);
    if (n < 0)
        return errno == ENOENT ? etch_err(ETCH_ERR_NOT_FOUND, "'%s' is not installed", name)
                               : io_err("open", name);
    if (!version) {
        *namefd = n;
        return ETCH_OK;
    }
    int vs = open_dir_at(n, VERSIONS_DIR);
    int v = vs >= 0 ? open_dir_at(vs, version) : -1;
    int e = errno;
    if (vs >= 0)
        close(vs);
    if (v < 0) {
        close(n);
        errno = e;
        return e == ENOENT ? etch_err(ETCH_ERR_NOT_FOUND, "%s %s: no such version", name,
                                      version)
                           : io_err("open version", version);
    }
    if (namefd)
        *namefd = n;
    else
        close(n);
    *vfd = v;
    return ETCH_OK;
}

static bool version_newer_than_this(const char *min) {
    unsigned long a[3], b[3];
    if (!parse_version3(min, a) || !parse_version3(ETCH_VERSION_STRING, b))
        return true;
    for (int i = 0; i < 3; i++)
        if (a[i] != b[i])
            return a[i] > b[i];
    return false;
}

static etch_status hash_fd(int fd, uint64_t limit, char hex[ETCH_SHA256_HEX_SIZE],
                           uint64_t *count) {
    unsigned char *buf = malloc(COPY_CHUNK);
    if (!buf)
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "store: out of memory");
    etch_sha256 h;
    etch_sha256_init(&h);
    uint64_t done = 0;
    while (done < limit) {
        size_t want = limit - done < COPY_CHUNK ? (size_t)(limit - done) : COPY_CHUNK;
        ssize_t n = pread(fd, buf, want, (off_t)done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            free(buf);
            return etch_err(ETCH_ERR_ACCESS_FAILED, "store: read: %s", strerror(errno));
        }
        if (n == 0)
            break;
        etch_sha256_update(&h, buf, (size_t)n);
        done += (uint64_t)n;
    }
    free(buf);
    uint8_t d[ETCH_SHA256_SIZE];
    etch_sha256_final(&h, d);
    etch_sha256_hex(d, hex);
    *count = done;
    return ETCH_OK;
}

static etch_status fail_reason(etch_store_reason *reason, etch_store_reason r, etch_status st) {
    if (reason)
        *reason = r;
    return st;
}

/* Check NAME/versions/VERSION as `check` says. The manifest (on success, when mout is set)
 * goes to *mout. */
static etch_status check_version(etch_store *s, const char *name, const char *version,
                                 etch_store_check check, etch_store_reason *reason,
                                 etch_store_manifest **mout) {
    int vfd = -1;
    etch_status st = open_version_dirs(s, name, version, NULL, &vfd);
    if (st != ETCH_OK)
        return fail_reason(reason,
                           st == ETCH_ERR_NOT_FOUND ? ETCH_STORE_REASON_NOT_INSTALLED
                                                    : ETCH_STORE_REASON_IO_ERROR,
                           st == ETCH_ERR_NOT_FOUND ? ETCH_ERR_NOT_FOUND : st);
    char *text = NULL;
    size_t len = 0;
    etch_store_manifest *m = NULL;
    st = read_small(vfd, MANIFEST_FILE, MANIFEST_MAX, &text, &len);
    if (st == ETCH_OK)
        st = manifest_parse(text, len, &m);
    free(text);
    if (st != ETCH_OK) {
        close(vfd);
        etch_err_prefix("%s %s", name, version);
        return fail_reason(reason, ETCH_STORE_REASON_BAD_MANIFEST,
                           st == ETCH_ERR_MEMORY_ALLOCATION_FAILED ? st
                                                                   : ETCH_ERR_INVALID_PROGRAM);
    }
    etch_store_reason rs = ETCH_STORE_REASON_OK;
    if (strcmp(m->name, name) || strcmp(m->version, version)) {
        rs = ETCH_STORE_REASON_BAD_MANIFEST;
        st = etch_err(ETCH_ERR_INVALID_PROGRAM,
                      "%s %s: the manifest says it is %s %s (moved or copied by hand?)", name,
                      version, m->name, m->version);
    } else if (version_newer_than_this(m->min_etch_version)) {
        rs = ETCH_STORE_REASON_TOO_NEW;
        st = etch_err(ETCH_ERR_INCOMPATIBLE_VERSION,
                      "%s %s needs etch %s or newer; this is etch %s", name, version,
                      m->min_etch_version, ETCH_VERSION_STRING);
    }
    /* every file: a regular file (not a link), of the recorded size; hashes */
    for (int i = 0; i < ETCH_STORE_NUM_ROLES && st == ETCH_OK; i++) {
        /* a file the manifest does not list must not be there either */
        struct stat sb;
        bool there = fstatat(vfd, ROLE_FILES[i], &sb, AT_SYMLINK_NOFOLLOW) == 0;
        if (!m->files[i].present) {
            if (there) {
                rs = ETCH_STORE_REASON_BAD_MANIFEST;
                st = etch_err(ETCH_ERR_INVALID_PROGRAM,
                              "%s %s: %s is there but the manifest does not list it", name,
                              version, ROLE_FILES[i]);
            }
            continue;
        }
        int fd = openat(vfd, ROLE_FILES[i], O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
            rs = ETCH_STORE_REASON_FILE_MISSING;
            st = etch_err(ETCH_ERR_INTEGRITY, "%s %s: %s: %s", name, version, ROLE_FILES[i],
                          fd < 0 && errno == ELOOP ? "a symbolic link (not followed)"
                          : fd < 0               ? strerror(errno)
                                                 : "not a regular file");
            if (fd >= 0)
                close(fd);
            break;
        }
        if ((uint64_t)sb.st_size != m->files[i].size) {
            rs = ETCH_STORE_REASON_SIZE_MISMATCH;
            st = etch_err(ETCH_ERR_INTEGRITY, "%s %s: %s is %lld bytes; the manifest says %" PRIu64,
                          name, version, ROLE_FILES[i], (long long)sb.st_size,
                          m->files[i].size);
        }
        char hex[ETCH_SHA256_HEX_SIZE];
        uint64_t got = 0;
        if (st == ETCH_OK && i == ETCH_STORE_PTE) {
            st = hash_fd(fd, ETCH_STORE_HEAD_BYTES, hex, &got);
            if (st == ETCH_OK && strcmp(hex, m->head_sha256)) {
                rs = ETCH_STORE_REASON_HASH_MISMATCH;
                st = etch_err(ETCH_ERR_INTEGRITY,
                              "%s %s: model.pte: the SHA-256 of its first %" PRIu64
                              " bytes is %s; the manifest says %s",
                              name, version, got, hex, m->head_sha256);
            }
        }
        if (st == ETCH_OK && check == ETCH_STORE_CHECK_FULL) {
            st = hash_fd(fd, UINT64_MAX, hex, &got);
            if (st == ETCH_OK && strcmp(hex, m->files[i].sha256)) {
                rs = ETCH_STORE_REASON_HASH_MISMATCH;
                st = etch_err(ETCH_ERR_INTEGRITY, "%s %s: %s: SHA-256 %s; the manifest says %s",
                              name, version, ROLE_FILES[i], hex, m->files[i].sha256);
            }
        }
        if (st != ETCH_OK && rs == ETCH_STORE_REASON_OK)
            rs = ETCH_STORE_REASON_IO_ERROR;
        close(fd);
    }
    /* what the manifest says it needs is here */
    if (st == ETCH_OK)
        ensure_registered(s);
    for (size_t i = 0; i < m->num_operators && st == ETCH_OK; i++)
        if (!etch_kernels_find(m->operators[i], strlen(m->operators[i]))) {
            rs = ETCH_STORE_REASON_OPERATOR_MISSING;
            st = etch_err(ETCH_ERR_OPERATOR_MISSING,
                          "%s %s needs operator '%s', which this build does not register", name,
                          version, m->operators[i]);
        }
    /* with no_backends the caller runs delegated methods' CPU twins: loading decides */
    for (size_t i = 0; i < m->num_backends && st == ETCH_OK && !s->o.no_backends; i++)
        if (!backend_here(m->backends[i])) {
            rs = ETCH_STORE_REASON_OPERATOR_MISSING;
            st = etch_err(ETCH_ERR_NOT_FOUND,
                          "%s %s needs backend '%s', which this build does not register", name,
                          version, m->backends[i]);
        }
    /* FULL: the program opens, and needs what the manifest says, no more, no less */
    if (st == ETCH_OK && check == ETCH_STORE_CHECK_FULL) {
        char pte[ETCH_STORE_PATH_MAX], ptd[ETCH_STORE_PATH_MAX], tok[ETCH_STORE_PATH_MAX];
        snprintf(pte, sizeof pte, "%s/%s/" VERSIONS_DIR "/%s/%s", s->path, name, version,
                 ROLE_FILES[ETCH_STORE_PTE]);
        snprintf(ptd, sizeof ptd, "%s/%s/" VERSIONS_DIR "/%s/%s", s->path, name, version,
                 ROLE_FILES[ETCH_STORE_PTD]);
        snprintf(tok, sizeof tok, "%s/%s/" VERSIONS_DIR "/%s/%s", s->path, name, version,
                 ROLE_FILES[ETCH_STORE_TOKENIZER]);
        needs n;
        st = program_needs(s, pte, m->files[ETCH_STORE_PTD].present ? ptd : NULL, &n);
        if (st != ETCH_OK) {
            rs = st == ETCH_ERR_OPERATOR_MISSING || st == ETCH_ERR_NOT_FOUND
                     ? ETCH_STORE_REASON_OPERATOR_MISSING
                     : ETCH_STORE_REASON_BAD_PROGRAM;
            etch_err_prefix("%s %s", name, version);
        } else {
            bool same = n.nops == m->num_operators && n.nbks == m->num_backends;
            for (size_t i = 0; same && i < n.nops; i++) {
                bool f = false;
                for (size_t j = 0; j < m->num_operators && !f; j++)
                    f = !strcmp(n.ops[i], m->operators[j]);
                same = f;
            }
            for (size_t i = 0; same && i < n.nbks; i++) {
                bool f = false;
                for (size_t j = 0; j < m->num_backends && !f; j++)
                    f = !strcmp(n.bks[i], m->backends[j]);
                same = f;
            }
            if (!same) {
                rs = ETCH_STORE_REASON_NEEDS_MISMATCH;
                st = etch_err(ETCH_ERR_INVALID_PROGRAM,
                              "%s %s: the program needs %zu operators and %zu backends; the "
                              "manifest lists %zu and %zu (or other ones)",
                              name, version, n.nops, n.nbks, m->num_operators, m->num_backends);
            }
            needs_free(&n);
        }
        if (st == ETCH_OK && m->files[ETCH_STORE_TOKENIZER].present &&
            (st = tokenizer_check(tok)) != ETCH_OK) {
            rs = ETCH_STORE_REASON_BAD_PROGRAM;
            etch_err_prefix("%s %s: tokenizer", name, version);
        }
    }
    close(vfd);
    if (st != ETCH_OK) {
        etch_store_manifest_free(m);
        return fail_reason(reason, rs == ETCH_STORE_REASON_OK ? ETCH_STORE_REASON_IO_ERROR : rs,
                           st);
    }
    if (reason)
        *reason = ETCH_STORE_REASON_OK;
    if (mout)
        *mout = m;
    else
        etch_store_manifest_free(m);
    return ETCH_OK;
}

/* ---- opening the store -------------------------------------------------------------------- */

etch_store_options etch_store_default_options(void) {
    etch_store_options o;
    memset(&o, 0, sizeof o);
    o.create = true;
    o.lock_timeout_ms = 30000;
    o.keep_versions = 2;
    o.kernels = ETCH_MODULE_KERNELS_OPTIMIZED;
    return o;
}

etch_store_install_options etch_store_default_install_options(void) {
    etch_store_install_options o;
    memset(&o, 0, sizeof o);
    return o;
}

etch_store_open_options etch_store_default_open_options(void) {
    etch_store_open_options o;
    memset(&o, 0, sizeof o);
    o.check = ETCH_STORE_CHECK_FAST;
    return o;
}

const char *etch_store_path(const etch_store *s) { return s ? s->path : NULL; }

static int mkdirs(const char *path) {
    char buf[ETCH_STORE_PATH_MAX];
    size_t n = strlen(path);
    if (n >= sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == 0) {
            char c = buf[i];
            buf[i] = 0;
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return -1;
            buf[i] = c;
        }
    }
    return 0;
}

static bool dir_is_empty(int fd) {
    DIR *d = opendir_dup(fd);
    if (!d)
        return false;
    bool empty = true;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            empty = false;
    closedir(d);
    return empty;
}

/* Remove the temporaries no live writer holds (caller holds the exclusive lock). */
static void clean_temporaries(etch_store *s) {
    DIR *d = opendir_dup(s->root);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        struct stat st;
        if (fstatat(s->root, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        if (!strncmp(e->d_name, TMP_PREFIX, strlen(TMP_PREFIX))) {
            if (S_ISDIR(st.st_mode)) {
                int fd = open_dir_at(s->root, e->d_name);
                if (fd < 0)
                    continue;
                bool idle = flock(fd, LOCK_EX | LOCK_NB) == 0;
                if (idle)
                    rm_tree_at(s->root, e->d_name, 0);
                close(fd);
            } else {
                unlinkat(s->root, e->d_name, 0);
            }
        } else if (S_ISDIR(st.st_mode) && etch_store_name_valid(e->d_name)) {
            /* a state file's temporary left by a crash */
            int nfd = open_dir_at(s->root, e->d_name);
            DIR *dn = nfd >= 0 ? opendir_dup(nfd) : NULL;
            if (dn) {
                struct dirent *f;
                while ((f = readdir(dn)) != NULL) {
                    struct stat fs;
                    if (!strncmp(f->d_name, TMP_PREFIX STATE_FILE, strlen(TMP_PREFIX STATE_FILE)) &&
                        fstatat(nfd, f->d_name, &fs, AT_SYMLINK_NOFOLLOW) == 0 &&
                        S_ISREG(fs.st_mode))
                        unlinkat(nfd, f->d_name, 0);
                }
                closedir(dn);
            }
            if (nfd >= 0)
                close(nfd);
        }
    }
    closedir(d);
}

etch_status etch_store_open(const char *dir, const etch_store_options *opts, etch_store **out) {
    if (!dir || !dir[0] || !out)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "store_open: NULL argument");
    etch_store_options o = opts ? *opts : etch_store_default_options();
    if (o.keep_versions == 1 || o.keep_versions < 0)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "store_open: keep_versions is 0 (all) or at least 2, got %d",
                        o.keep_versions);
    if (strlen(dir) > ETCH_STORE_PATH_MAX - 3 * ETCH_STORE_NAME_MAX - 64)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "store_open: path too long");
    int root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0 && errno == ENOENT && o.create) {
        if (mkdirs(dir) != 0)
            return etch_err(ETCH_ERR_ACCESS_FAILED, "store: cannot create %s: %s", dir,
                            strerror(errno));
        root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    }
    if (root < 0)
        return etch_err(ETCH_ERR_ACCESS_FAILED, "store: cannot open %s: %s", dir,
                        strerror(errno));
    struct stat st;
    if (fstatat(root, MARKER, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
        bool empty = dir_is_empty(root);
        if (!o.create || !empty) {
            close(root);
            return etch_err(!o.create ? ETCH_ERR_NOT_FOUND : ETCH_ERR_INVALID_STATE,
                            "store: %s is %s", dir,
                            !o.create ? "not a model store"
                                      : "a directory that is neither empty nor a model store "
                                        "(no " MARKER "): refused");
        }
        int fd = openat(root, MARKER, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0) {
            bool ok = io_write(fd, MARKER_TEXT, strlen(MARKER_TEXT), MARKER) == 0 &&
                      io_fsync(fd, MARKER) == 0;
            close(fd);
            if (!ok || io_fsync(root, "store directory") != 0) {
                etch_status e = io_err("write", MARKER);
                unlinkat(root, MARKER, 0);
                close(root);
                return e;
            }
        } else if (errno != EEXIST) {
            etch_status e = io_err("create", MARKER);
            close(root);
            return e;
        }
    }
    int lockfd = openat(root, LOCK_FILE, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (lockfd < 0) {
        etch_status e = io_err("open", LOCK_FILE);
        close(root);
        return e;
    }
    etch_store *s = calloc(1, sizeof *s);
    /* not strdup: its allocation would bypass what the caller (and the tests) count */
    char *path = malloc(strlen(dir) + 1);
    if (path)
        memcpy(path, dir, strlen(dir) + 1);
    if (!s || !path) {
        free(s);
        free(path);
        close(lockfd);
        close(root);
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "store: out of memory");
    }
    /* no trailing slashes in the paths it hands out */
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        path[--n] = 0;
    s->path = path;
    s->root = root;
    s->lockfd = lockfd;
    s->o = o;
    if (flock(lockfd, LOCK_EX | LOCK_NB) == 0) {
        s->locked = LOCK_EX;
        clean_temporaries(s);
        store_unlock(s);
    }
    *out = s;
    return ETCH_OK;
}

void etch_store_close(etch_store *s) {
    if (!s)
        return;
    store_unlock(s);
    close(s->lockfd);
    close(s->root);
    free(s->path);
    free(s);
}

/* ---- installing ----------------------------------------------------------------------------- */

typedef struct writer_file {
    int fd;
    bool used;
    uint64_t size;
    etch_sha256 h, head;
} writer_file;

struct etch_store_writer {
    etch_store *s;
    char name[ETCH_STORE_NAME_MAX + 1];
    char version[ETCH_STORE_NAME_MAX + 1]; /* "" = auto */
    char min_version[32];
    bool has_sha[ETCH_STORE_NUM_ROLES];
    uint8_t sha[ETCH_STORE_NUM_ROLES][ETCH_SHA256_SIZE];
    char tmp[96]; /* DIR/<tmp> */
    int tmpfd;    /* flock'd while the writer lives */
    writer_file f[ETCH_STORE_NUM_ROLES];
    etch_status failed; /* sticky */
    char failed_msg[512];
};

etch_status etch_store_install_begin(etch_store *s, const char *name,
                                     const etch_store_install_options *opts,
                                     etch_store_writer **out) {
    if (!s || !out)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "store_install: NULL argument");
    etch_store_install_options o = opts ? *opts : etch_store_default_install_options();
    etch_status st = check_name("model name", name);
    if (st == ETCH_OK && o.version)
        st = check_name("version", o.version);
    if (st != ETCH_OK)
        return st;
    unsigned long v[3];
    if (o.min_etch_version && !parse_version3(o.min_etch_version, v))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "store: min_etch_version '%s' is not MAJOR.MINOR.PATCH",
                        o.min_etch_version);
    etch_store_writer *w = calloc(1, sizeof *w);
    if (!w)
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "store: out of memory");
    for (int i = 0; i < ETCH_STORE_NUM_ROLES; i++) {
        w->f[i].fd = -1;
        if (o.sha256[i]) {
            if (!etch_sha256_parse_hex(o.sha256[i], w->sha[i])) {
                free(w);
                return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                                "store: the expected SHA-256 of the %s is not 64 hex digits: "
                                "'%.70s'",
                                ROLE_NAMES[i], o.sha256[i]);
            }
            w->has_sha[i] = true;
        }
    }
    w->s = s;
    w->tmpfd = -1;
    copy_str(w->name, sizeof w->name, name);
    copy_str(w->version, sizeof w->version, o.version ? o.version : "");
    copy_str(w->min_version, sizeof w->min_version,
             o.min_etch_version ? o.min_etch_version : ETCH_VERSION_STRING);
    /* shared lock: a cleaner (exclusive) cannot take the directory before it is flock'd */
    st = store_lock(s, LOCK_SH);
    if (st == ETCH_OK) {
        st = make_tmp_dir(s, "install", w->tmp, sizeof w->tmp);
        if (st == ETCH_OK) {
            w->tmpfd = open_dir_at(s->root, w->tmp);
            if (w->tmpfd < 0 || flock(w->tmpfd, LOCK_EX | LOCK_NB) != 0) {
                st = io_err("open", w->tmp);
                close_fd(&w->tmpfd);
                unlinkat(s->root, w->tmp, AT_REMOVEDIR);
            }
        }
        store_unlock(s);
    }
    if (st != ETCH_OK) {
        free(w);
        return st;
    }
    *out = w;
    return ETCH_OK;
}

static etch_status writer_fail(etch_store_writer *w, etch_status st) {
    if (w->failed == ETCH_OK) {
        w->failed = st;
        copy_str(w->failed_msg, sizeof w->failed_msg, etch_last_error());
    }
    return st;
}

etch_status etch_store_writer_write(etch_store_writer *w, etch_store_role role,
                                    const void *data, size_t size) {
    if (!w || (unsigned)role >= ETCH_STORE_NUM_ROLES || (!data && size))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "store_writer_write: bad argument");
    if (w->failed != ETCH_OK)
        return etch_err(w->failed, "%s", w->failed_msg);
    writer_file *f = &w->f[role];
    if (!f->used) {
        f->fd = io_create(w->tmpfd, ROLE_FILES[role]);
        if (f->fd < 0)
            return writer_fail(w, io_err("create", ROLE_FILES[role]));
        f->used = true;
        etch_sha256_init(&f->h);
        etch_sha256_init(&f->head);
    }
    if (size && io_write(f->fd, data, size, ROLE_FILES[role]) != 0)
        return writer_fail(w, io_err("write", ROLE_FILES[role]));
    etch_sha256_update(&f->h, data, size);
    if (f->size < ETCH_STORE_HEAD_BYTES) {
        size_t take = ETCH_STORE_HEAD_BYTES - (size_t)f->size;
        etch_sha256_update(&f->head, data, take < size ? take : size);
    }
    f->size += size;
    return ETCH_OK;
}

void etch_store_writer_abort(etch_store_writer *w) {
    if (!w)
        return;
    for (int i = 0; i < ETCH_STORE_NUM_ROLES; i++)
        close_fd(&w->f[i].fd);
    if (w->tmp[0]) /* "" once committed: the directory is a version now */
        rm_tree_at(w->s->root, w->tmp, 0);
    close_fd(&w->tmpfd);
    free(w);
}

static void utc_now(char *buf, size_t cap) {
    time_t t = time(NULL);
    struct tm tm;
    if (gmtime_r(&t, &tm))
        strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
    else
        copy_str(buf, cap, "unknown");
}

/* Versions of `name` that exist as directories (names only; malloc'd). */
static etch_status list_versions(int namefd, char (**out)[ETCH_STORE_NAME_MAX + 1], size_t *n) {
    *out = NULL;
    *n = 0;
    int vs = open_dir_at(namefd, VERSIONS_DIR);
    if (vs < 0)
        return errno == ENOENT ? ETCH_OK : io_err("open", VERSIONS_DIR);
    DIR *d = fdopendir(vs);
    if (!d) {
        close(vs);
        return io_err("read", VERSIONS_DIR);
    }
    size_t cap = 0;
    struct dirent *e;
    etch_status st = ETCH_OK;
    while ((e = readdir(d)) != NULL && st == ETCH_OK) {
        struct stat sb;
        if (!etch_store_name_valid(e->d_name) ||
            fstatat(vs, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(sb.st_mode))
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 8;
            char(*p)[ETCH_STORE_NAME_MAX + 1] = realloc(*out, cap * sizeof *p);
            if (!p) {
                st = etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "store: out of memory");
                break;
            }
            *out = p;
        }
        copy_str((*out)[(*n)++], ETCH_STORE_NAME_MAX + 1, e->d_name);
    }
    closedir(d);
    if (st != ETCH_OK) {
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return st;
}

/* A version directory holds only what the store writes? The first foreign entry into
 * `foreign` otherwise. */
static bool version_dir_clean(int vsfd, const char *version, char *foreign, size_t cap) {
    int fd = open_dir_at(vsfd, version);
    if (fd < 0) {
        copy_str(foreign, cap, version);
        return false;
    }
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        copy_str(foreign, cap, version);
        return false;
    }
    bool clean = true;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && clean) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        bool known = !strcmp(e->d_name, MANIFEST_FILE);
        for (int i = 0; i < ETCH_STORE_NUM_ROLES; i++)
            known |= !strcmp(e->d_name, ROLE_FILES[i]);
        struct stat sb;
        if (!known || fstatat(fd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISREG(sb.st_mode)) {
            copy_str(foreign, cap, e->d_name);
            clean = false;
        }
    }
    closedir(d);
    return clean;
}

/* Move NAME/versions/VERSION out of sight (into a temporary) and delete it. Caller holds the
 * exclusive lock; the version must not be referenced by the state any more. */
static etch_status discard_version(etch_store *s, int namefd, const char *version) {
    int vs = open_dir_at(namefd, VERSIONS_DIR);
    if (vs < 0)
        return io_err("open", VERSIONS_DIR);
    char foreign[256];
    if (!version_dir_clean(vs, version, foreign, sizeof foreign)) {
        close(vs);
        return etch_err(ETCH_ERR_INVALID_STATE,
                        "store: version %s holds '%s', which the store did not write: not "
                        "removed (remove it by hand)",
                        version, foreign);
    }
    char tmp[96];
    etch_status st = make_tmp_dir(s, "remove", tmp, sizeof tmp);
    if (st == ETCH_OK && io_rename(vs, version, s->root, tmp) != 0) {
        st = io_err("rename", version);
        unlinkat(s->root, tmp, AT_REMOVEDIR);
    }
    if (st == ETCH_OK) {
        io_fsync(vs, VERSIONS_DIR); /* best effort: a crash leaves a temporary, cleaned later */
        rm_tree_at(s->root, tmp, 0);
    }
    close(vs);
    return st;
}

/* Keep current, previous and (keep_versions > 2) the newest others; discard the rest. Best
 * effort: the install has already succeeded. */
static void prune(etch_store *s, int namefd, const store_state *state) {
    if (s->o.keep_versions == 0)
        return;
    char(*vers)[ETCH_STORE_NAME_MAX + 1];
    size_t n;
    if (list_versions(namefd, &vers, &n) != ETCH_OK)
        return;
    uint64_t *seq = calloc(n ? n : 1, sizeof *seq);
    if (!seq) {
        free(vers);
        return;
    }
    size_t others = 0;
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(vers[i], state->current) || !strcmp(vers[i], state->previous)) {
            seq[i] = UINT64_MAX;
            continue;
        }
        others++;
    }
    /* read each other's seq from its manifest (0 when unreadable: oldest) */
    int vs = open_dir_at(namefd, VERSIONS_DIR);
    for (size_t i = 0; i < n && vs >= 0; i++) {
        if (seq[i] == UINT64_MAX)
            continue;
        int vfd = open_dir_at(vs, vers[i]);
        char *text = NULL;
        size_t len;
        etch_store_manifest *m = NULL;
        if (vfd >= 0 && read_small(vfd, MANIFEST_FILE, MANIFEST_MAX, &text, &len) == ETCH_OK &&
            manifest_parse(text, len, &m) == ETCH_OK)
            seq[i] = m->seq;
        etch_store_manifest_free(m);
        free(text);
        if (vfd >= 0)
            close(vfd);
    }
    if (vs >= 0)
        close(vs);
    size_t keep_others = (size_t)s->o.keep_versions - 2;
    while (others > keep_others) {
        size_t oldest = n;
        for (size_t i = 0; i < n; i++)
            if (seq[i] != UINT64_MAX && (oldest == n || seq[i] < seq[oldest]))
                oldest = i;
        if (oldest == n)
            break;
        discard_version(s, namefd, vers[oldest]);
        seq[oldest] = UINT64_MAX;
        others--;
    }
    free(seq);
    free(vers);
}

static bool dir_exists_at(int dfd, const char *name) {
    struct stat sb;
    return fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0;
}

/* Holding the exclusive lock: put the staged directory in place as the new current version. */
static etch_status commit_locked(etch_store_writer *w, etch_store_manifest *m, const needs *nd,
                                 char *version_out) {
    etch_store *s = w->s;
    int namefd = open_dir_at(s->root, w->name);
    if (namefd < 0 && errno == ENOENT) {
        if (io_mkdir(s->root, w->name) != 0)
            return io_err("mkdir", w->name);
        if (io_fsync(s->root, "store directory") != 0)
            return io_err("fsync", "store directory");
        namefd = open_dir_at(s->root, w->name);
    }
    if (namefd < 0)
        return io_err("open", w->name);
    int vs = -1;
    store_state state;
    etch_status st = state_read(namefd, &state);
    if (st != ETCH_OK) {
        etch_err_prefix("%s: cannot install over an unreadable state (remove the name first)",
                        w->name);
        close(namefd);
        return st;
    }
    vs = open_dir_at(namefd, VERSIONS_DIR);
    if (vs < 0 && errno == ENOENT) {
        if (io_mkdir(namefd, VERSIONS_DIR) != 0 || io_fsync(namefd, w->name) != 0)
            st = io_err("mkdir", VERSIONS_DIR);
        else
            vs = open_dir_at(namefd, VERSIONS_DIR);
    }
    if (st == ETCH_OK && vs < 0)
        st = io_err("open", VERSIONS_DIR);
    /* the version: given, or the counter's next free number */
    char version[ETCH_STORE_NAME_MAX + 1];
    if (st == ETCH_OK) {
        if (w->version[0]) {
            copy_str(version, sizeof version, w->version);
            if (!strcmp(version, state.current) || !strcmp(version, state.previous)) {
                st = etch_err(ETCH_ERR_INVALID_STATE,
                              "%s %s is already installed (%s): install another version, or "
                              "remove it first",
                              w->name, version,
                              !strcmp(version, state.current) ? "current" : "previous");
            } else if (dir_exists_at(vs, version)) {
                /* left by an install that failed before switching the state (or kept by
                 * keep_versions): not served, so replaced */
                st = discard_version(s, namefd, version);
            }
        } else {
            uint64_t k = state.next;
            for (;; k++) {
                snprintf(version, sizeof version, "%" PRIu64, k);
                if (strcmp(version, state.current) && strcmp(version, state.previous) &&
                    !dir_exists_at(vs, version))
                    break;
            }
        }
    }
    if (st == ETCH_OK) {
        copy_str(m->version, sizeof m->version, version);
        m->seq = state.next;
        size_t len = 0;
        char *text = manifest_text(m, nd, &len);
        if (!text)
            st = etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "store: out of memory");
        int fd = text ? io_create(w->tmpfd, MANIFEST_FILE) : -1;
        if (st == ETCH_OK && fd < 0)
            st = io_err("create", MANIFEST_FILE);
        if (st == ETCH_OK &&
            (io_write(fd, text, len, MANIFEST_FILE) != 0 || io_fsync(fd, MANIFEST_FILE) != 0))
            st = io_err("write", MANIFEST_FILE);
        if (fd >= 0)
            close(fd);
        free(text);
    }
    if (st == ETCH_OK && io_fsync(w->tmpfd, "staging directory") != 0)
        st = io_err("fsync", "staging directory");
    if (st == ETCH_OK && io_rename(s->root, w->tmp, vs, version) != 0)
        st = io_err("rename into place:", version);
    if (st == ETCH_OK) {
        w->tmp[0] = 0; /* in place: abort must not remove it */
        if (io_fsync(vs, VERSIONS_DIR) != 0 || io_fsync(s->root, "store directory") != 0)
            st = io_err("fsync", VERSIONS_DIR);
    }
    if (st == ETCH_OK) {
        store_state ns = state;
        copy_str(ns.current, sizeof ns.current, version);
        copy_str(ns.previous, sizeof ns.previous, state.current);
        ns.next = state.next + 1;
        if (!w->version[0]) {
            unsigned long long k = strtoull(version, NULL, 10);
            ns.next = (uint64_t)k + 1;
        }
        st = state_write(namefd, &ns);
        if (st == ETCH_OK) {
            prune(s, namefd, &ns);
            if (version_out)
                copy_str(version_out, ETCH_STORE_NAME_MAX + 1, version);
        } else {
            /* did the rename of the state land before the failure (its directory's fsync)? */
            store_state now;
            if (state_read(namefd, &now) == ETCH_OK && !strcmp(now.current, version)) {
                etch_err_prefix("%s %s is installed and current, but may not survive a power "
                                "loss",
                                w->name, version);
                if (version_out)
                    copy_str(version_out, ETCH_STORE_NAME_MAX + 1, version);
            }
        }
    }
    if (vs >= 0)
        close(vs);
    close(namefd);
    return st;
}

etch_status etch_store_writer_commit(etch_store_writer *w, char *version_out) {
    if (!w)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "store_writer_commit: NULL writer");
    etch_store *s = w->s;
    etch_status st = w->failed;
    if (st != ETCH_OK)
        etch_err(st, "%s", w->failed_msg);
    if (st == ETCH_OK && !w->f[ETCH_STORE_PTE].used)
        st = etch_err(ETCH_ERR_INVALID_ARGUMENT, "store: %s: no program (.pte) was written",
                      w->name);
    etch_store_manifest m;
    memset(&m, 0, sizeof m);
    /* durable, then checked against the expected digests */
    for (int i = 0; i < ETCH_STORE_NUM_ROLES && st == ETCH_OK; i++) {
        writer_file *f = &w->f[i];
        if (!f->used)
            continue;
        if (io_fsync(f->fd, ROLE_FILES[i]) != 0) {
            st = io_err("fsync", ROLE_FILES[i]);
            break;
        }
        close_fd(&f->fd);
        uint8_t d[ETCH_SHA256_SIZE], head[ETCH_SHA256_SIZE];
        etch_sha256_final(&f->h, d);
        etch_sha256_final(&f->head, head);
        m.files[i].present = true;
        m.files[i].size = f->size;
        etch_sha256_hex(d, m.files[i].sha256);
        if (i == ETCH_STORE_PTE)
            etch_sha256_hex(head, m.head_sha256);
        if (w->has_sha[i] && memcmp(d, w->sha[i], sizeof d) != 0) {
            char want[ETCH_SHA256_HEX_SIZE];
            st = etch_err(ETCH_ERR_INTEGRITY,
                          "store: %s: the %s's SHA-256 is %s; expected %s (a corrupted "
                          "download or the wrong file): not installed",
                          w->name, ROLE_NAMES[i], m.files[i].sha256,
                          etch_sha256_hex(w->sha[i], want));
        }
    }
    /* this build can load it */
    needs nd;
    memset(&nd, 0, sizeof nd);
    if (st == ETCH_OK) {
        char pte[ETCH_STORE_PATH_MAX], ptd[ETCH_STORE_PATH_MAX];
        snprintf(pte, sizeof pte, "%s/%s/%s", s->path, w->tmp, ROLE_FILES[ETCH_STORE_PTE]);
        snprintf(ptd, sizeof ptd, "%s/%s/%s", s->path, w->tmp, ROLE_FILES[ETCH_STORE_PTD]);
        st = program_needs(s, pte, w->f[ETCH_STORE_PTD].used ? ptd : NULL, &nd);
        if (st == ETCH_OK && w->f[ETCH_STORE_TOKENIZER].used) {
            snprintf(pte, sizeof pte, "%s/%s/%s", s->path, w->tmp,
                     ROLE_FILES[ETCH_STORE_TOKENIZER]);
            st = tokenizer_check(pte);
            if (st != ETCH_OK)
                etch_err_prefix("tokenizer");
        }
        if (st != ETCH_OK) {
            /* name the file, not the staging directory it was checked in */
            char msg[1024], dirp[ETCH_STORE_PATH_MAX];
            snprintf(dirp, sizeof dirp, "%s/%s/", s->path, w->tmp);
            copy_str(msg, sizeof msg, etch_last_error());
            for (char *at; (at = strstr(msg, dirp)) != NULL;)
                memmove(at, at + strlen(dirp), strlen(at + strlen(dirp)) + 1);
            etch_err(st, "store: %s: not installed: %s", w->name, msg);
        }
    }
    if (st == ETCH_OK) {
        copy_str(m.name, sizeof m.name, w->name);
        copy_str(m.min_etch_version, sizeof m.min_etch_version, w->min_version);
        utc_now(m.created, sizeof m.created);
        st = store_lock(s, LOCK_EX);
        if (st == ETCH_OK) {
            st = commit_locked(w, &m, &nd, version_out);
            store_unlock(s);
        }
    }
    needs_free(&nd);
    char msg[1024];
    copy_str(msg, sizeof msg, etch_last_error());
    etch_store_writer_abort(w); /* removes the staging directory unless it was moved in */
    if (st != ETCH_OK)
        etch_err(st, "%s", msg);
    return st;
}

etch_status etch_store_install_buffer(etch_store *s, const char *name,
                                      const etch_store_buffers *files,
                                      const etch_store_install_options *opts,
                                      char *version_out) {
    if (!files || !files->data[ETCH_STORE_PTE])
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "store_install_buffer: no program given");
    etch_store_writer *w;
    etch_status st = etch_store_install_begin(s, name, opts, &w);
    if (st != ETCH_OK)
        return st;
    for (int i = 0; i < ETCH_STORE_NUM_ROLES && st == ETCH_OK; i++)
        if (files->data[i])
            st = etch_store_writer_write(w, (etch_store_role)i, files->data[i], files->size[i]);
    if (st != ETCH_OK) {
        etch_store_writer_abort(w);
        return st;
    }
    return etch_store_writer_commit(w, version_out);
}

static etch_status copy_in(etch_store_writer *w, etch_store_role role, const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return etch_err(ETCH_ERR_ACCESS_FAILED, "cannot open %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return etch_err(ETCH_ERR_ACCESS_FAILED, "%s is not a regular file", path);
    }
    unsigned char *buf = malloc(COPY_CHUNK);
    if (!buf) {
        close(fd);
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "store: out of memory");
    }
    etch_status st = etch_store_writer_write(w, role, buf, 0); /* creates it when empty */
    for (;;) {
        if (st != ETCH_OK)
            break;
        ssize_t n = read(fd, buf, COPY_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            st = etch_err(ETCH_ERR_ACCESS_FAILED, "read %s: %s", path, strerror(errno));
            break;
        }
        if (n == 0)
            break;
        st = etch_store_writer_write(w, role, buf, (size_t)n);
    }
    free(buf);
    close(fd);
    return st;
}

etch_status etch_store_install_file(etch_store *s, const char *name, const char *pte_path,
                                    const etch_store_install_options *opts, char *version_out) {
    if (!pte_path)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "store_install_file: no program given");
    etch_store_writer *w;
    etch_status st = etch_store_install_begin(s, name, opts, &w);
    if (st != ETCH_OK)
        return st;
    st = copy_in(w, ETCH_STORE_PTE, pte_path);
    if (st == ETCH_OK && opts && opts->ptd_path)
        st = copy_in(w, ETCH_STORE_PTD, opts->ptd_path);
    if (st == ETCH_OK && opts && opts->tokenizer_path)
        st = copy_in(w, ETCH_STORE_TOKENIZER, opts->tokenizer_path);
    if (st != ETCH_OK) {
        etch_store_writer_abort(w);
        return st;
    }
    return etch_store_writer_commit(w, version_out);
}

/* ---- serving ---------------------------------------------------------------------------------- */

const char *etch_store_reason_str(etch_store_reason r) {
    switch (r) {
    case ETCH_STORE_REASON_OK: return "ok";
    case ETCH_STORE_REASON_NOT_INSTALLED: return "not-installed";
    case ETCH_STORE_REASON_BAD_STATE: return "bad-state";
    case ETCH_STORE_REASON_BAD_MANIFEST: return "bad-manifest";
    case ETCH_STORE_REASON_FILE_MISSING: return "file-missing";
    case ETCH_STORE_REASON_SIZE_MISMATCH: return "size-mismatch";
    case ETCH_STORE_REASON_HASH_MISMATCH: return "hash-mismatch";
    case ETCH_STORE_REASON_OPERATOR_MISSING: return "operator-missing";
    case ETCH_STORE_REASON_NEEDS_MISMATCH: return "needs-mismatch";
    case ETCH_STORE_REASON_BAD_PROGRAM: return "bad-program";
    case ETCH_STORE_REASON_TOO_NEW: return "too-new";
    case ETCH_STORE_REASON_IO_ERROR: return "io-error";
    }
    return "unknown";
}

static void msg_add(etch_store_served *out, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void msg_add(etch_store_served *out, const char *fmt, ...) {
    size_t n = strlen(out->message);
    if (n + 1 >= sizeof out->message)
        return;
    if (n)
        n += (size_t)snprintf(out->message + n, sizeof out->message - n, "; ");
    if (n + 1 >= sizeof out->message)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->message + n, sizeof out->message - n, fmt, ap);
    va_end(ap);
}

static void fill_paths(etch_store *s, const char *name, const char *version,
                       const etch_store_manifest *m, etch_store_served *out) {
    char *dst[ETCH_STORE_NUM_ROLES] = {out->pte_path, out->ptd_path, out->tokenizer_path};
    for (int i = 0; i < ETCH_STORE_NUM_ROLES; i++) {
        dst[i][0] = 0;
        if (m->files[i].present)
            snprintf(dst[i], ETCH_STORE_PATH_MAX, "%s/%s/" VERSIONS_DIR "/%s/%s", s->path, name,
                     version, ROLE_FILES[i]);
    }
}

etch_status etch_store_open_model(etch_store *s, const char *name,
                                  const etch_store_open_options *opts, etch_store_served *out) {
    if (!s || !out)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "store_open_model: NULL argument");
    memset(out, 0, sizeof *out);
    etch_status st = check_name("model name", name);
    if (st != ETCH_OK) {
        out->reason = ETCH_STORE_REASON_NOT_INSTALLED;
        copy_str(out->message, sizeof out->message, etch_last_error());
        return st;
    }
    etch_store_open_options o = opts ? *opts : etch_store_default_open_options();
    copy_str(out->name, sizeof out->name, name);
    bool first = true, installed = false;
    etch_store_reason first_reason = ETCH_STORE_REASON_OK;
    st = store_lock(s, LOCK_SH);
    if (st != ETCH_OK) {
        first_reason = ETCH_STORE_REASON_IO_ERROR;
        msg_add(out, "%s", etch_last_error());
        first = false;
    } else {
        int namefd = -1;
        store_state state;
        memset(&state, 0, sizeof state);
        st = open_version_dirs(s, name, NULL, &namefd, NULL);
        if (st == ETCH_OK) {
            st = state_read(namefd, &state);
            close(namefd);
            if (st == ETCH_ERR_MEMORY_ALLOCATION_FAILED) {
                /* no fallback for running out of memory: it says nothing of the files */
                store_unlock(s);
                out->reason = ETCH_STORE_REASON_IO_ERROR;
                msg_add(out, "%s: %s", name, etch_last_error());
                return st;
            }
            if (st != ETCH_OK) {
                first_reason = ETCH_STORE_REASON_BAD_STATE;
                msg_add(out, "%s: state file unreadable: %s", name, etch_last_error());
                first = false;
                installed = true;
            } else if (!state.exists || !state.current[0]) {
                first_reason = ETCH_STORE_REASON_NOT_INSTALLED;
                msg_add(out, "%s: no current version", name);
                first = false;
            }
        } else {
            first_reason = st == ETCH_ERR_NOT_FOUND ? ETCH_STORE_REASON_NOT_INSTALLED
                                                    : ETCH_STORE_REASON_IO_ERROR;
            msg_add(out, "%s", etch_last_error());
            first = false;
        }
        const char *chain[2] = {state.current, state.previous};
        for (int k = 0; k < 2 && state.exists; k++) {
            if (!chain[k][0]) {
                if (k == 1 && state.current[0])
                    msg_add(out, "no previous version");
                continue;
            }
            installed = true;
            etch_store_reason r;
            etch_store_manifest *m = NULL;
            st = check_version(s, name, chain[k], o.check, &r, &m);
            if (st == ETCH_ERR_MEMORY_ALLOCATION_FAILED) { /* as above: no fallback */
                store_unlock(s);
                out->reason = ETCH_STORE_REASON_IO_ERROR;
                msg_add(out, "%s %s: %s", name, chain[k], etch_last_error());
                return st;
            }
            if (st == ETCH_OK) {
                out->origin = k == 0 ? ETCH_STORE_SERVED_CURRENT : ETCH_STORE_SERVED_PREVIOUS;
                out->reason = first_reason;
                copy_str(out->version, sizeof out->version, chain[k]);
                fill_paths(s, name, chain[k], m, out);
                etch_store_manifest_free(m);
                if (k == 1)
                    msg_add(out, "served previous version %s", chain[k]);
                store_unlock(s);
                return ETCH_OK;
            }
            if (first) {
                first_reason = r;
                first = false;
            }
            msg_add(out, "%s %s (%s): %s", k == 0 ? "current" : "previous", chain[k],
                    etch_store_reason_str(r), etch_last_error());
        }
        store_unlock(s);
    }
    out->reason = first_reason;
    if (o.embedded && o.embedded->pte) {
        const char *label = o.embedded->label ? o.embedded->label : "no label";
        out->origin = ETCH_STORE_SERVED_EMBEDDED;
        out->pte_data = o.embedded->pte;
        out->pte_size = o.embedded->pte_size;
        out->tokenizer_data = o.embedded->tokenizer;
        out->tokenizer_size = o.embedded->tokenizer ? o.embedded->tokenizer_size : 0;
        msg_add(out, "served the embedded default (%s)", label);
        return ETCH_OK;
    }
    out->origin = ETCH_STORE_SERVED_NONE;
    return etch_err(installed ? ETCH_ERR_INTEGRITY : ETCH_ERR_NOT_FOUND, "%s", out->message);
}

etch_status etch_store_verify(etch_store *s, const char *name, const char *version,
                              etch_store_check check, etch_store_reason *reason) {
    if (!s)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "store_verify: NULL store");
    etch_status st = check_name("model name", name);
    if (st == ETCH_OK && version)
        st = check_name("version", version);
    if (st != ETCH_OK)
        return fail_reason(reason, ETCH_STORE_REASON_NOT_INSTALLED, st);
    if ((st = store_lock(s, LOCK_SH)) != ETCH_OK)
        return fail_reason(reason, ETCH_STORE_REASON_IO_ERROR, st);
    char cur[ETCH_STORE_NAME_MAX + 1];
    if (!version) {
        int namefd = -1;
        store_state state;
        st = open_version_dirs(s, name, NULL, &namefd, NULL);
        if (st == ETCH_OK) {
            st = state_read(namefd, &state);
            close(namefd);
            if (st != ETCH_OK) {
                store_unlock(s);
                etch_err_prefix("%s: state", name);
                return fail_reason(reason, ETCH_STORE_REASON_BAD_STATE, st);
            }
            if (!state.current[0])
                st = etch_err(ETCH_ERR_NOT_FOUND, "%s has no current version", name);
            copy_str(cur, sizeof cur, state.current);
            version = cur;
        }
        if (st != ETCH_OK) {
            store_unlock(s);
            return fail_reason(reason, ETCH_STORE_REASON_NOT_INSTALLED, st);
        }
    }
    st = check_version(s, name, version, check, reason, NULL);
    store_unlock(s);
    return st;
}

/* ---- listing, manifests, rollback, removal ---------------------------------------------------- */

static int entry_cmp(const void *a, const void *b) {
    return strcmp(((const etch_store_entry *)a)->name, ((const etch_store_entry *)b)->name);
}

etch_status etch_store_list(etch_store *s, etch_store_entry **entries, size_t *n) {
    if (!s || !entries || !n)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "store_list: NULL argument");
    etch_status st = store_lock(s, LOCK_SH);
    if (st != ETCH_OK)
        return st;
    DIR *d = opendir_dup(s->root);
    if (!d) {
        store_unlock(s);
        return io_err("read", s->path);
    }
    etch_store_entry *v = NULL;
    size_t cnt = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && st == ETCH_OK) {
        struct stat sb;
        if (!etch_store_name_valid(e->d_name) ||
            fstatat(s->root, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(sb.st_mode))
            continue;
        int namefd = open_dir_at(s->root, e->d_name);
        if (namefd < 0)
            continue;
        store_state state;
        etch_status rs = state_read(namefd, &state);
        bool bad = rs != ETCH_OK;
        char(*vers)[ETCH_STORE_NAME_MAX + 1] = NULL;
        size_t nv = 0;
        etch_status ls = list_versions(namefd, &vers, &nv);
        free(vers);
        close(namefd);
        /* out of memory is not a broken model: the listing fails instead */
        if (rs == ETCH_ERR_MEMORY_ALLOCATION_FAILED || ls == ETCH_ERR_MEMORY_ALLOCATION_FAILED) {
            st = etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "store: out of memory");
            break;
        }
        if (!bad && !state.exists && nv == 0)
            continue; /* not (or no longer) a model */
        if (cnt == cap) {
            cap = cap ? cap * 2 : 8;
            etch_store_entry *p = realloc(v, cap * sizeof *p);
            if (!p) {
                st = etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "store: out of memory");
                break;
            }
            v = p;
        }
        etch_store_entry *en = &v[cnt++];
        memset(en, 0, sizeof *en);
        copy_str(en->name, sizeof en->name, e->d_name);
        if (!bad) {
            copy_str(en->current, sizeof en->current, state.current);
            copy_str(en->previous, sizeof en->previous, state.previous);
        }
        en->bad_state = bad;
        en->num_versions = nv;
    }
    closedir(d);
    store_unlock(s);
    if (st != ETCH_OK) {
        free(v);
        return st;
    }
    if (cnt)
        qsort(v, cnt, sizeof *v, entry_cmp);
    *entries = cnt ? v : NULL;
    if (!cnt)
        free(v);
    *n = cnt;
    return ETCH_OK;
}

etch_status etch_store_manifest_get(etch_store *s, const char *name, const char *version,
                                    etch_store_manifest **out) {
    if (!s || !out)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "store_manifest_get: NULL argument");
    etch_status st = check_name("model name", name);
    if (st == ETCH_OK && version)
        st = check_name("version", version);
    if (st != ETCH_OK)
        return st;
    if ((st = store_lock(s, LOCK_SH)) != ETCH_OK)
        return st;
    int namefd = -1, vfd = -1;
    char cur[ETCH_STORE_NAME_MAX + 1];
    st = open_version_dirs(s, name, NULL, &namefd, NULL);
    if (st == ETCH_OK && !version) {
        store_state state;
        st = state_read(namefd, &state);
        if (st == ETCH_OK && !state.current[0])
            st = etch_err(ETCH_ERR_NOT_FOUND, "%s has no current version", name);
        copy_str(cur, sizeof cur, state.current);
        version = cur;
    }
    if (namefd >= 0)
        close(namefd);
    if (st == ETCH_OK)
        st = open_version_dirs(s, name, version, NULL, &vfd);
    char *text = NULL;
    size_t len;
    if (st == ETCH_OK)
        st = read_small(vfd, MANIFEST_FILE, MANIFEST_MAX, &text, &len);
    if (st == ETCH_OK)
        st = manifest_parse(text, len, out);
    free(text);
    if (vfd >= 0)
        close(vfd);
    store_unlock(s);
    return st;
}

etch_status etch_store_rollback(etch_store *s, const char *name, char *version_out) {
    if (!s)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "store_rollback: NULL store");
    etch_status st = check_name("model name", name);
    if (st != ETCH_OK || (st = store_lock(s, LOCK_EX)) != ETCH_OK)
        return st;
    int namefd = -1;
    store_state state;
    st = open_version_dirs(s, name, NULL, &namefd, NULL);
    if (st == ETCH_OK)
        st = state_read(namefd, &state);
    if (st == ETCH_OK && !state.previous[0])
        st = etch_err(ETCH_ERR_NOT_FOUND, "%s has no previous version to roll back to", name);
    etch_store_reason r;
    if (st == ETCH_OK && check_version(s, name, state.previous, ETCH_STORE_CHECK_FAST, &r,
                                       NULL) != ETCH_OK) {
        etch_err_prefix("not rolled back: the previous version fails its check (%s)",
                        etch_store_reason_str(r));
        st = ETCH_ERR_INTEGRITY;
    }
    if (st == ETCH_OK) {
        store_state ns = state;
        copy_str(ns.current, sizeof ns.current, state.previous);
        copy_str(ns.previous, sizeof ns.previous, state.current);
        st = state_write(namefd, &ns);
        if (st == ETCH_OK && version_out)
            copy_str(version_out, ETCH_STORE_NAME_MAX + 1, ns.current);
    }
    if (namefd >= 0)
        close(namefd);
    store_unlock(s);
    return st;
}

/* Every entry of NAME is the store's (state, versions/ with clean version dirs)? */
static bool name_dir_clean(int namefd, char *foreign, size_t cap) {
    DIR *d = opendir_dup(namefd);
    if (!d) {
        copy_str(foreign, cap, ".");
        return false;
    }
    bool clean = true;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && clean) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
            !strncmp(e->d_name, TMP_PREFIX STATE_FILE, strlen(TMP_PREFIX STATE_FILE)))
            continue;
        struct stat sb;
        if (fstatat(namefd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
            clean = false;
        } else if (!strcmp(e->d_name, STATE_FILE)) {
            clean = S_ISREG(sb.st_mode);
        } else if (!strcmp(e->d_name, VERSIONS_DIR) && S_ISDIR(sb.st_mode)) {
            int vs = open_dir_at(namefd, VERSIONS_DIR);
            DIR *dv = vs >= 0 ? opendir_dup(vs) : NULL;
            if (!dv) {
                clean = false;
            } else {
                struct dirent *f;
                while ((f = readdir(dv)) != NULL && clean) {
                    if (!strcmp(f->d_name, ".") || !strcmp(f->d_name, ".."))
                        continue;
                    char inner[200];
                    if (!etch_store_name_valid(f->d_name) ||
                        !version_dir_clean(vs, f->d_name, inner, sizeof inner)) {
                        snprintf(foreign, cap, VERSIONS_DIR "/%.64s", f->d_name);
                        clean = false;
                        if (etch_store_name_valid(f->d_name))
                            snprintf(foreign, cap, VERSIONS_DIR "/%.64s/%.100s", f->d_name,
                                     inner);
                    }
                }
                closedir(dv);
            }
            if (vs >= 0)
                close(vs);
            if (!clean)
                break;
            continue;
        } else {
            clean = false;
        }
        if (!clean)
            copy_str(foreign, cap, e->d_name);
    }
    closedir(d);
    return clean;
}

etch_status etch_store_remove(etch_store *s, const char *name, const char *version) {
    if (!s)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "store_remove: NULL store");
    etch_status st = check_name("model name", name);
    if (st == ETCH_OK && version)
        st = check_name("version", version);
    if (st != ETCH_OK || (st = store_lock(s, LOCK_EX)) != ETCH_OK)
        return st;
    int namefd = -1;
    st = open_version_dirs(s, name, NULL, &namefd, NULL);
    if (st == ETCH_OK && !version) {
        char foreign[300];
        if (!name_dir_clean(namefd, foreign, sizeof foreign)) {
            st = etch_err(ETCH_ERR_INVALID_STATE,
                          "%s holds '%s', which the store did not write: not removed (remove "
                          "it by hand)",
                          name, foreign);
        } else {
            char tmp[96];
            st = make_tmp_dir(s, "remove", tmp, sizeof tmp);
            if (st == ETCH_OK && io_rename(s->root, name, s->root, tmp) != 0) {
                st = io_err("rename", name);
                unlinkat(s->root, tmp, AT_REMOVEDIR);
            }
            if (st == ETCH_OK) {
                io_fsync(s->root, "store directory");
                rm_tree_at(s->root, tmp, 0);
            }
        }
    } else if (st == ETCH_OK) {
        store_state state;
        int vs = -1;
        st = state_read(namefd, &state);
        if (st == ETCH_OK) {
            vs = open_dir_at(namefd, VERSIONS_DIR);
            if (vs < 0 || !dir_exists_at(vs, version))
                st = etch_err(ETCH_ERR_NOT_FOUND, "%s %s: no such version", name, version);
        }
        char foreign[256];
        if (st == ETCH_OK && !version_dir_clean(vs, version, foreign, sizeof foreign))
            st = etch_err(ETCH_ERR_INVALID_STATE,
                          "%s %s holds '%s', which the store did not write: not removed "
                          "(remove it by hand)",
                          name, version, foreign);
        if (vs >= 0)
            close(vs);
        if (st == ETCH_OK &&
            (!strcmp(version, state.current) || !strcmp(version, state.previous))) {
            store_state ns = state;
            if (!strcmp(version, state.current)) {
                copy_str(ns.current, sizeof ns.current, state.previous);
                ns.previous[0] = 0;
            } else {
                ns.previous[0] = 0;
            }
            st = state_write(namefd, &ns);
        }
        if (st == ETCH_OK)
            st = discard_version(s, namefd, version);
    }
    if (namefd >= 0)
        close(namefd);
    store_unlock(s);
    return st;
}
