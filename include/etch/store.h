/*
 * etch/store.h — a directory of named, versioned, verified models on the device, with atomic
 * installs, rollback and a fallback chain that ends in a model the application embeds.
 *
 * Basic usage:
 *
 *   etch_store *s;
 *   etch_store_options so = etch_store_default_options();
 *   if (etch_store_open("/data/etch/models", &so, &s) != ETCH_OK) { ...etch_last_error()... }
 *
 *   // install (copies the files in; the previous version is kept for rollback)
 *   etch_store_install_options io = etch_store_default_install_options();
 *   io.sha256[ETCH_STORE_PTE] = "9f86d08...";        // optional: refused unless it matches
 *   io.tokenizer_path = "tokenizer.model";           // optional
 *   char version[ETCH_STORE_NAME_MAX + 1];
 *   etch_store_install_file(s, "chat", "model.pte", &io, version);
 *
 *   // or stream it as it arrives (the application does its own networking)
 *   etch_store_writer *w;
 *   etch_store_install_begin(s, "chat", &io, &w);
 *   while (...) etch_store_writer_write(w, ETCH_STORE_PTE, bytes, n);   // hashed as written
 *   etch_store_writer_commit(w, version);            // or etch_store_writer_abort(w)
 *
 *   // serve: the current version, else the previous one, else the embedded default
 *   etch_store_open_options oo = etch_store_default_open_options();
 *   etch_store_embedded dflt = {model_bytes, model_size, tok_bytes, tok_size, "built-in"};
 *   oo.embedded = &dflt;
 *   etch_store_served m;
 *   if (etch_store_open_model(s, "chat", &oo, &m) == ETCH_OK) {
 *       if (m.origin != ETCH_STORE_SERVED_CURRENT) log("%s", m.message);   // why
 *       m.pte_path[0] ? etch_module_open(m.pte_path, ...)
 *                     : etch_module_open_buffer(m.pte_data, m.pte_size, ...);
 *   }
 *   etch_store_close(s);
 *
 * ---- on disk ----------------------------------------------------------------------------
 *
 *   DIR/.etch-store                 "etch-store 1\n": marks the directory as a store
 *   DIR/.lock                       flock(2) target: exclusive for changes, shared for reads
 *   DIR/.tmp-*                      temporaries (installs being written, removals under way):
 *                                   never served; removed by etch_store_open when no live
 *                                   writer holds them
 *   DIR/NAME/state                  which versions are served (below)
 *   DIR/NAME/versions/VERSION/      one installed version, never changed once in place:
 *       manifest                    what it holds (below)
 *       model.pte                   the program
 *       model.ptd                   its external data (optional)
 *       tokenizer                   its tokenizer (optional; any format etch/llm.h reads)
 *
 * The state file (written to a temporary, fsync'd, renamed over the old one):
 *
 *   etch-store-state 1
 *   current VERSION
 *   previous VERSION                (absent when there is none)
 *   next N                          install counter: the next auto version / sequence number
 *
 * The manifest (text, one "key value" per line, UTF-8 free: every value is ASCII):
 *
 *   etch-model-manifest 1
 *   name NAME
 *   version VERSION
 *   seq N                           install sequence number (orders versions for pruning)
 *   etch_min_version 0.1.0          oldest etch that may serve it (default: the installer's)
 *   created 2026-12-03T12:00:00Z    install time, UTC (informational)
 *   file ROLE FILENAME SIZE SHA256  one per file; ROLE is pte, ptd or tokenizer; SIZE in
 *                                   bytes, SHA256 64 lowercase hex digits
 *   head_sha256 SHA256              SHA-256 of the first min(4096, size) bytes of model.pte
 *   operator NAME                   every operator the program calls ("aten::add.out"), once
 *   backend NAME                    every backend it delegates to ("XnnpackBackend"), once
 *   end SHA256                      SHA-256 of every manifest byte before this line
 *
 * Unknown keys, repeated keys, a missing `end` or one that does not match, a name or version
 * other than the directory's: the manifest is invalid and the version is not served.
 *
 * ---- guarantees ---------------------------------------------------------------------------
 *
 * - An install writes into DIR/.tmp-XXXXXX, fsyncs every file, checks each against the
 *   caller's SHA-256 (when given), checks this build can load it (the program opens with the
 *   module API; every operator and backend every method needs is registered; the .ptd opens;
 *   the tokenizer parses) and only then, holding the store's lock, renames the directory into
 *   place, fsyncs the directories, and switches the state file. A crash or failure at any
 *   step leaves the previous state served; nothing half-written is ever picked up.
 * - Versions are never modified in place. Installing keeps the version that was current as
 *   `previous`; older ones beyond options.keep_versions are removed after the switch.
 * - The store touches nothing outside DIR, creates no symbolic links and follows none inside
 *   DIR (a symbolic link where a store file belongs is an error for that entry). Files and
 *   directories it does not know are skipped by list and left alone, never deleted (remove
 *   refuses a name or version that holds one, naming it) — except .tmp-* entries in DIR,
 *   which are its own.
 * - Names and versions: 1..ETCH_STORE_NAME_MAX characters of [A-Za-z0-9._+-], not starting
 *   with '.' or '-'. Anything else (path separators, "..", empty, control characters,
 *   overlong) is ETCH_ERR_INVALID_ARGUMENT.
 * - Checks. FAST (the default when serving): the manifest is valid, every file is a regular
 *   file of the recorded size, the first 4 KiB of model.pte hash to head_sha256, every
 *   operator and backend listed is registered, etch_min_version is not newer than this build.
 *   FULL: FAST, then every file's SHA-256, then the program is opened and the operators and
 *   backends it needs must be exactly the manifest's.
 * - Served paths point into the store: its files are immutable, but a later remove (or a
 *   prune by a later install) unlinks them; an mmap'd or open file stays readable.
 *
 * Concurrency: one etch_store handle belongs to one thread at a time. Across handles and
 * processes the lock file serialises changes (a second installer waits up to
 * options.lock_timeout_ms, then fails with ETCH_ERR_INVALID_STATE saying the store is
 * locked); readers take the lock shared. A streamed install holds the lock only while it
 * commits, so several may download at once.
 *
 * Needs POSIX (open/openat/fsync/rename/flock) and allocates: it lives in src/deploy, above
 * the core, which stays allocation-free.
 */
#ifndef ETCH_STORE_H
#define ETCH_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etch/module.h"
#include "etch/sha256.h"
#include "etch/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ETCH_STORE_NAME_MAX 64    /* characters of a name or version */
#define ETCH_STORE_PATH_MAX 4096  /* bytes of a served path, NUL included */
#define ETCH_STORE_HEAD_BYTES 4096 /* prefix of model.pte that the fast check hashes */
#define ETCH_STORE_MESSAGE_MAX 1024

/* The files of one version. */
typedef enum etch_store_role {
    ETCH_STORE_PTE = 0,       /* the program (required) */
    ETCH_STORE_PTD = 1,       /* external data (optional) */
    ETCH_STORE_TOKENIZER = 2, /* tokenizer (optional) */
    ETCH_STORE_NUM_ROLES = 3
} etch_store_role;

/* "pte", "ptd", "tokenizer". */
const char *etch_store_role_name(etch_store_role role);

/* Is `s` a valid model name / version string (see above)? */
bool etch_store_name_valid(const char *s);

/* ---- the store ------------------------------------------------------------------------- */

typedef struct etch_store_options {
    bool create;               /* create DIR (and its parents) and its marker when missing;
                                  default true */
    int lock_timeout_ms;       /* how long to wait for the lock: < 0 forever, 0 not at all;
                                  default 30000 */
    int keep_versions;         /* versions kept per name after an install, current and
                                  previous included (>= 2); 0 keeps all; default 2 */
    etch_module_kernels kernels; /* kernels registered to check programs (as etch_module_open
                                    would); default ETCH_MODULE_KERNELS_OPTIMIZED */
    bool no_backends;          /* do not register the built-in backends, nor require the
                                  backends a program delegates to (it will run its CPU
                                  twins: etch_module_options.no_backends) */
} etch_store_options;

etch_store_options etch_store_default_options(void);

typedef struct etch_store etch_store;

/* Open (and, with options.create, create) the store at `dir`, then remove stale temporaries
 * (when no other handle holds the lock). Errors: ETCH_ERR_ACCESS_FAILED (cannot create or
 * open), ETCH_ERR_INVALID_STATE (a directory that is not empty and not a store: refused, so
 * that pointing the store at $HOME does not scatter files there), ETCH_ERR_NOT_FOUND
 * (without options.create: an existing directory that is not a store). */
etch_status etch_store_open(const char *dir, const etch_store_options *opts, etch_store **out);
void etch_store_close(etch_store *s); /* accepts NULL */
/* The directory it was opened with (borrowed). */
const char *etch_store_path(const etch_store *s);

/* ---- installing ------------------------------------------------------------------------- */

typedef struct etch_store_install_options {
    const char *version;          /* NULL: auto (the state's counter: "1", "2", ...) */
    const char *sha256[ETCH_STORE_NUM_ROLES]; /* expected SHA-256 per file, 64 hex digits;
                                                 NULL: not checked */
    const char *min_etch_version; /* NULL: this build's ETCH_VERSION_STRING */
    /* etch_store_install_file only: the other files, copied from these paths (NULL: none) */
    const char *ptd_path;
    const char *tokenizer_path;
} etch_store_install_options;

etch_store_install_options etch_store_default_install_options(void);

/* Install `pte_path` (and opts->ptd_path, opts->tokenizer_path) as a new version of `name`,
 * making it current. On success the version string is written to `version_out`
 * (ETCH_STORE_NAME_MAX + 1 bytes; may be NULL). Errors: ETCH_ERR_INVALID_ARGUMENT (bad name,
 * version or hex), ETCH_ERR_ACCESS_FAILED (I/O), ETCH_ERR_INTEGRITY (a SHA-256 that does not
 * match: both digests in the message), the program's own open errors
 * (ETCH_ERR_NOT_A_PROGRAM, ETCH_ERR_INVALID_PROGRAM, ...), ETCH_ERR_OPERATOR_MISSING /
 * ETCH_ERR_NOT_FOUND (an operator / backend this build lacks, named), ETCH_ERR_INVALID_STATE
 * (the version exists, or the lock timed out). The store is unchanged on failure. */
etch_status etch_store_install_file(etch_store *s, const char *name, const char *pte_path,
                                    const etch_store_install_options *opts, char *version_out);

/* The same from memory (copied; any of ptd / tokenizer may be NULL). */
typedef struct etch_store_buffers {
    const void *data[ETCH_STORE_NUM_ROLES];
    size_t size[ETCH_STORE_NUM_ROLES];
} etch_store_buffers;
etch_status etch_store_install_buffer(etch_store *s, const char *name,
                                      const etch_store_buffers *files,
                                      const etch_store_install_options *opts,
                                      char *version_out);

/* Streamed install. begin validates the name and options (opts->ptd_path / tokenizer_path
 * are ignored: stream those files too) and creates the temporary; write appends bytes to a
 * file (any order, files may interleave) and hashes them; commit does what install_file
 * does after copying and frees the writer whatever it returns; abort removes the temporary
 * and frees the writer (accepts NULL). After a failed write the writer only commits to the
 * same error: abort it. */
typedef struct etch_store_writer etch_store_writer;
etch_status etch_store_install_begin(etch_store *s, const char *name,
                                     const etch_store_install_options *opts,
                                     etch_store_writer **out);
etch_status etch_store_writer_write(etch_store_writer *w, etch_store_role role,
                                    const void *data, size_t size);
etch_status etch_store_writer_commit(etch_store_writer *w, char *version_out);
void etch_store_writer_abort(etch_store_writer *w);

/* ---- serving ----------------------------------------------------------------------------- */

typedef enum etch_store_check {
    ETCH_STORE_CHECK_FAST = 0, /* sizes, the head hash, registered operators (see above) */
    ETCH_STORE_CHECK_FULL = 1  /* plus every file's SHA-256 and the program's real needs */
} etch_store_check;

/* Which model etch_store_open_model served. */
typedef enum etch_store_origin {
    ETCH_STORE_SERVED_NONE = 0,     /* nothing (the call failed) */
    ETCH_STORE_SERVED_CURRENT = 1,  /* the current version */
    ETCH_STORE_SERVED_PREVIOUS = 2, /* the previous version: the current one failed */
    ETCH_STORE_SERVED_EMBEDDED = 3  /* the caller's embedded default: no stored one passed */
} etch_store_origin;

/* Why a version failed its check (the first failure of the chain is the one reported). */
typedef enum etch_store_reason {
    ETCH_STORE_REASON_OK = 0,           /* it passed */
    ETCH_STORE_REASON_NOT_INSTALLED,    /* no such name, or no current version */
    ETCH_STORE_REASON_BAD_STATE,        /* the name's state file is unreadable or invalid */
    ETCH_STORE_REASON_BAD_MANIFEST,     /* missing, malformed, or contradicts its directory */
    ETCH_STORE_REASON_FILE_MISSING,     /* a file the manifest lists is absent, or not a
                                           regular file (a symbolic link, a directory) */
    ETCH_STORE_REASON_SIZE_MISMATCH,    /* truncated or grown */
    ETCH_STORE_REASON_HASH_MISMATCH,    /* head or full SHA-256 differs */
    ETCH_STORE_REASON_OPERATOR_MISSING, /* this build lacks an operator or backend it needs */
    ETCH_STORE_REASON_NEEDS_MISMATCH,   /* FULL: the program needs other operators/backends
                                           than the manifest says */
    ETCH_STORE_REASON_BAD_PROGRAM,      /* FULL: the program (or .ptd, tokenizer) does not open */
    ETCH_STORE_REASON_TOO_NEW,          /* etch_min_version is newer than this build */
    ETCH_STORE_REASON_IO_ERROR          /* the store could not be read (or locked) */
} etch_store_reason;

/* "ok", "not-installed", "bad-state", "bad-manifest", "file-missing", "size-mismatch",
 * "hash-mismatch", "operator-missing", "needs-mismatch", "bad-program", "too-new",
 * "io-error". */
const char *etch_store_reason_str(etch_store_reason reason);

/* A default model compiled into the application (borrowed: it must outlive its use). */
typedef struct etch_store_embedded {
    const void *pte;
    size_t pte_size;
    const void *tokenizer; /* may be NULL */
    size_t tokenizer_size;
    const char *label;     /* how to call it in messages ("models/default"); may be NULL */
} etch_store_embedded;

typedef struct etch_store_open_options {
    etch_store_check check;              /* default FAST */
    const etch_store_embedded *embedded; /* last resort; NULL: none */
} etch_store_open_options;

etch_store_open_options etch_store_default_open_options(void);

typedef struct etch_store_served {
    etch_store_origin origin;
    etch_store_reason reason;    /* why the current version was not served (OK when it was) */
    char name[ETCH_STORE_NAME_MAX + 1];
    char version[ETCH_STORE_NAME_MAX + 1]; /* "" for the embedded default */
    /* Stored versions: paths into the store ("" when the version has no such file). */
    char pte_path[ETCH_STORE_PATH_MAX];
    char ptd_path[ETCH_STORE_PATH_MAX];
    char tokenizer_path[ETCH_STORE_PATH_MAX];
    /* The embedded default: the caller's buffers (NULL for stored versions). */
    const void *pte_data;
    size_t pte_size;
    const void *tokenizer_data;
    size_t tokenizer_size;
    /* What happened along the chain, e.g. "current 3 (hash-mismatch): chat 3: model.pte:
     * SHA-256 ...; served previous version 2". "" when the current version was served. */
    char message[ETCH_STORE_MESSAGE_MAX];
} etch_store_served;

/* Serve `name`: its current version if it passes opts->check, else its previous one, else
 * opts->embedded. ETCH_OK when something was served (see out->origin, out->reason and
 * out->message); otherwise ETCH_ERR_NOT_FOUND (not installed, no fallback) or
 * ETCH_ERR_INTEGRITY (installed, nothing passed, no fallback), with out->reason and
 * out->message filled in all the same. An invalid name fails with ETCH_ERR_INVALID_ARGUMENT
 * without falling back. */
etch_status etch_store_open_model(etch_store *s, const char *name,
                                  const etch_store_open_options *opts, etch_store_served *out);

/* Check one version (NULL: the current one). ETCH_OK when it passes; otherwise the failure's
 * status, *reason (may be NULL) and etch_last_error() say why. */
etch_status etch_store_verify(etch_store *s, const char *name, const char *version,
                              etch_store_check check, etch_store_reason *reason);

/* ---- listing, rollback, removal ------------------------------------------------------------ */

typedef struct etch_store_entry {
    char name[ETCH_STORE_NAME_MAX + 1];
    char current[ETCH_STORE_NAME_MAX + 1];  /* "" when none */
    char previous[ETCH_STORE_NAME_MAX + 1]; /* "" when none */
    size_t num_versions;                    /* version directories present */
    bool bad_state;                         /* the state file is unreadable */
} etch_store_entry;

/* Every name in the store, sorted. *entries is malloc'd (free with free()); NULL when *n is
 * 0. Entries of DIR that are not store names are skipped. */
etch_status etch_store_list(etch_store *s, etch_store_entry **entries, size_t *n);

/* What a version's manifest says (see the format above). */
typedef struct etch_store_file_info {
    bool present;
    uint64_t size;
    char sha256[ETCH_SHA256_HEX_SIZE];
} etch_store_file_info;

typedef struct etch_store_manifest {
    char name[ETCH_STORE_NAME_MAX + 1];
    char version[ETCH_STORE_NAME_MAX + 1];
    uint64_t seq;
    char min_etch_version[32];
    char created[32];
    etch_store_file_info files[ETCH_STORE_NUM_ROLES];
    char head_sha256[ETCH_SHA256_HEX_SIZE];
    size_t num_operators;
    char (*operators)[128];
    size_t num_backends;
    char (*backends)[128];
} etch_store_manifest;

/* Read and check a version's manifest (NULL version: the current one); free with
 * etch_store_manifest_free. ETCH_ERR_NOT_FOUND, ETCH_ERR_INVALID_PROGRAM (malformed). */
etch_status etch_store_manifest_get(etch_store *s, const char *name, const char *version,
                                    etch_store_manifest **out);
void etch_store_manifest_free(etch_store_manifest *m); /* accepts NULL */

/* Make the previous version current and the current one previous (a second rollback undoes
 * the first). Refused (ETCH_ERR_NOT_FOUND) without a previous version, and
 * (ETCH_ERR_INTEGRITY) when the previous version fails the fast check. On success the
 * version now current is written to version_out (may be NULL). */
etch_status etch_store_rollback(etch_store *s, const char *name, char *version_out);

/* Remove one version (NULL: the whole name, every version). Removing the current version
 * makes the previous one current. A version directory holding files the store does not know
 * is refused (ETCH_ERR_INVALID_STATE, naming them): the store never deletes what it did not
 * write. */
etch_status etch_store_remove(etch_store *s, const char *name, const char *version);

#ifdef __cplusplus
}
#endif
#endif
