/* I/O fault injection: every step of an install that changes the disk (each create, mkdir,
 * write, fsync and rename) is made to fail in turn, one per run, through the store's internal
 * hook (deploy/store_fault.h): a write stops half way with ENOSPC, the others fail with EIO or
 * ENOSPC. After each, a fresh handle on the store must serve a model that
 * passes the full check — the old one, or the new one when the failure came after the switch
 * — leave no temporaries behind, keep the previous version verified, and take the next
 * install. The same for streamed installs, installs that prune, rollback and removal.
 * Then the process is killed before each step in turn (a child that calls _exit there, so no
 * cleanup of its own runs): afterwards the store serves a verified model as well.
 *
 * usage: test_store_faults FIXTURES */
#include "store_test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include "deploy/store_fault.h"
#include "etch/store.h"
#include "etch_test.h"

static char pte_add[512], pte_seg[512], tok512[512];

typedef struct fault_plan {
    int target; /* step to fail (-1: none) */
    int count;  /* steps seen */
    char steps[256][96];
} fault_plan;

/* the child of a crash run dies before step `target` */
static int crash_hook(void *user, const char *step, const char *what) {
    fault_plan *f = (fault_plan *)user;
    (void)step;
    (void)what;
    if (f->count++ == f->target)
        _exit(0);
    return 0;
}

/* the failure injected at step i: a write stops half way on a full disk; the other steps
 * fail with EIO or ENOSPC in turn */
static int hook(void *user, const char *step, const char *what) {
    fault_plan *f = (fault_plan *)user;
    int i = f->count++;
    if (i < 256)
        snprintf(f->steps[i], sizeof f->steps[i], "%s %s", step, what);
    if (i != f->target)
        return 0;
    if (!strcmp(step, "write"))
        return ETCH_STORE_FAULT_SHORT_WRITE;
    return i % 2 ? ENOSPC : EIO;
}

typedef enum op { OP_INSTALL, OP_STREAM, OP_INSTALL_PRUNE, OP_ROLLBACK, OP_REMOVE } op;
static const char *op_names[] = {"install", "streamed install", "install with pruning",
                                 "rollback", "remove current"};

static etch_store *open_store(const char *dir) {
    etch_store *s = NULL;
    etch_store_options o = etch_store_default_options();
    o.lock_timeout_ms = 2000;
    CHECK_OK(etch_store_open(dir, &o, &s));
    return s;
}

/* The store before the operation: v1 = add (and v2 = add_constant_segment with its
 * tokenizer for the operations that need two). */
static void prepare(const char *dir, op o) {
    etch_store *s = open_store(dir);
    etch_store_install_options io = etch_store_default_install_options();
    CHECK_OK(etch_store_install_file(s, "m", pte_add, &io, NULL));
    if (o != OP_INSTALL && o != OP_STREAM) {
        io.tokenizer_path = tok512;
        CHECK_OK(etch_store_install_file(s, "m", pte_seg, &io, NULL));
    }
    etch_store_close(s);
}

static etch_status run_op(etch_store *s, op o, char *version) {
    etch_store_install_options io = etch_store_default_install_options();
    size_t n = 0;
    unsigned char *b = st_read(pte_seg, &n);
    char hex[ETCH_SHA256_HEX_SIZE];
    st_hex_of(b, n, hex);
    io.sha256[ETCH_STORE_PTE] = hex;
    io.tokenizer_path = tok512;
    etch_status st = ETCH_ERR_INTERNAL;
    switch (o) {
    case OP_INSTALL:
    case OP_INSTALL_PRUNE:
        st = etch_store_install_file(s, "m", pte_seg, &io, version);
        break;
    case OP_STREAM: {
        etch_store_writer *w = NULL;
        st = etch_store_install_begin(s, "m", &io, &w);
        for (size_t off = 0; st == ETCH_OK && off < n; off += 500)
            st = etch_store_writer_write(w, ETCH_STORE_PTE, b + off,
                                         n - off < 500 ? n - off : 500);
        if (st == ETCH_OK)
            st = etch_store_writer_commit(w, version);
        else
            etch_store_writer_abort(w);
        break;
    }
    case OP_ROLLBACK:
        st = etch_store_rollback(s, "m", version);
        break;
    case OP_REMOVE:
        st = etch_store_remove(s, "m", "2");
        break;
    }
    free(b);
    return st;
}

/* After the failure of step k: what must hold. */
static void check_after(const char *dir, op o, int k, const char *step, etch_status st,
                        const char *msg, bool crashed) {
    etch_store *s = open_store(dir); /* a fresh handle cleans temporaries */
    CHECK_MSG(st_count_prefix(dir, ".tmp-") == 0, "%s, step %d (%s): temporaries left",
              op_names[o], k, step);
    etch_store_open_options oo = etch_store_default_open_options();
    oo.check = ETCH_STORE_CHECK_FULL;
    etch_store_served m;
    etch_status sv = etch_store_open_model(s, "m", &oo, &m);
    CHECK_MSG(sv == ETCH_OK && m.origin == ETCH_STORE_SERVED_CURRENT,
              "%s, step %d (%s): served %d: %s", op_names[o], k, step, (int)m.origin,
              m.message);
    /* which versions may be current: the one before, or the one after the operation */
    const char *before = o == OP_INSTALL || o == OP_STREAM ? "1" : "2";
    const char *after = o == OP_INSTALL || o == OP_STREAM ? "2"
                        : o == OP_INSTALL_PRUNE           ? "3"
                                                          : "1";
    bool ok_version = !strcmp(m.version, before) || !strcmp(m.version, after);
    CHECK_MSG(ok_version, "%s, step %d (%s): current is %s", op_names[o], k, step, m.version);
    if (st == ETCH_OK)
        CHECK_MSG(!strcmp(m.version, after), "%s, step %d (%s): succeeded but serves %s",
                  op_names[o], k, step, m.version);
    else if (!crashed && !strcmp(m.version, after) && o != OP_REMOVE && o != OP_ROLLBACK)
        /* failed after the switch: only the last directory sync may do that, and says so */
        CHECK_MSG(strstr(msg, "may not survive") != NULL || strstr(msg, "fsync") != NULL,
                  "%s, step %d (%s): failed (%s) yet switched", op_names[o], k, step, msg);
    /* the previous version, when there is one, verifies too */
    etch_store_entry *e = NULL;
    size_t n = 0;
    CHECK_OK(etch_store_list(s, &e, &n));
    CHECK_MSG(n == 1, "%s, step %d: %zu names", op_names[o], k, n);
    if (n == 1 && e[0].previous[0])
        CHECK_MSG(etch_store_verify(s, "m", e[0].previous, ETCH_STORE_CHECK_FULL, NULL) ==
                      ETCH_OK,
                  "%s, step %d (%s): previous %s: %s", op_names[o], k, step, e[0].previous,
                  etch_last_error());
    free(e);
    /* and the store takes the next install */
    char v[ETCH_STORE_NAME_MAX + 1];
    CHECK_MSG(etch_store_install_file(s, "m", pte_add, NULL, v) == ETCH_OK,
              "%s, step %d (%s): next install: %s", op_names[o], k, step, etch_last_error());
    CHECK_OK(etch_store_verify(s, "m", NULL, ETCH_STORE_CHECK_FULL, NULL));
    etch_store_close(s);
}

static void run_faults(op o) {
    char dir[256];
    /* a clean run counts the steps */
    fault_plan *f = calloc(1, sizeof *f);
    f->target = -1;
    st_mkdtemp(dir, sizeof dir, "faults");
    prepare(dir, o);
    etch_store *s = open_store(dir);
    etch_store_set_fault_hook(hook, f);
    char v[ETCH_STORE_NAME_MAX + 1];
    CHECK_OK(run_op(s, o, v));
    etch_store_set_fault_hook(NULL, NULL);
    etch_store_close(s);
    st_rm_rf(dir);
    int total = f->count;
    printf("%s: %d steps:", op_names[o], total);
    for (int i = 0; i < total && i < 256; i++)
        printf("%s %s", i ? "," : "", f->steps[i]);
    printf("\n");
    CHECK(total > 0 && total < 256);
    /* each step failed in turn */
    int failed = 0;
    for (int k = 0; k < total && k < 256; k++) {
        char step[96];
        memcpy(step, f->steps[k], sizeof step);
        st_mkdtemp(dir, sizeof dir, "faults");
        prepare(dir, o);
        s = open_store(dir);
        f->target = k;
        f->count = 0;
        etch_store_set_fault_hook(hook, f);
        etch_status st = run_op(s, o, v);
        etch_store_set_fault_hook(NULL, NULL);
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", etch_last_error());
        failed += st != ETCH_OK;
        etch_store_close(s);
        check_after(dir, o, k, step, st, msg, false);
        st_rm_rf(dir);
    }
    printf("%s: %d of %d injected faults failed the operation; every one left a verified "
           "model served\n",
           op_names[o], failed, total);
    /* killed before each step in turn */
    int crashed = 0;
    for (int k = 0; k < total && k < 256; k++) {
        char step[96];
        memcpy(step, f->steps[k], sizeof step);
        st_mkdtemp(dir, sizeof dir, "crash");
        prepare(dir, o);
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            etch_store *cs = NULL;
            etch_store_options so = etch_store_default_options();
            so.lock_timeout_ms = 2000;
            if (etch_store_open(dir, &so, &cs) != ETCH_OK)
                _exit(2);
            f->target = k;
            f->count = 0;
            etch_store_set_fault_hook(crash_hook, f);
            run_op(cs, o, v);
            _exit(3); /* not reached: the hook ends the process before step k */
        }
        int wst = 0;
        CHECK(pid > 0 && waitpid(pid, &wst, 0) == pid);
        CHECK_MSG(WIFEXITED(wst) && WEXITSTATUS(wst) == 0,
                  "%s: the child meant to die before step %d (%s) ended with %d", op_names[o], k,
                  step, wst);
        crashed += WIFEXITED(wst) && WEXITSTATUS(wst) == 0;
        check_after(dir, o, k, step, ETCH_ERR_INTERNAL, "", true);
        st_rm_rf(dir);
    }
    printf("%s: killed before each of its %d steps (%d crashes): every one left a verified "
           "model served\n",
           op_names[o], total, crashed);
    free(f);
}

int main(int argc, char **argv) {
    const char *fx = argc > 1 ? argv[1] : "../shared/fixtures";
    snprintf(pte_add, sizeof pte_add, "%s/pte/add.pte", fx);
    snprintf(pte_seg, sizeof pte_seg, "%s/pte/add_constant_segment.pte", fx);
    snprintf(tok512, sizeof tok512, "%s/llm/tok512.model", fx);
    run_faults(OP_INSTALL);
    run_faults(OP_STREAM);
    run_faults(OP_INSTALL_PRUNE);
    run_faults(OP_ROLLBACK);
    run_faults(OP_REMOVE);
    return etch_test_finish();
}
