/* etch model — the on-device model store (etch/store.h): install, list, verify, rollback,
 * remove. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli_store.h"
#include "cli_util.h"
#include "commands.h"

void cmd_model_usage(FILE *out) {
    fprintf(out,
            "usage: etch model install NAME FILE [--version V] [--sha256 HEX] [--tokenizer T]\n"
            "                          [--data FILE.ptd] [--store DIR]\n"
            "       etch model list [--store DIR]\n"
            "       etch model verify NAME [--full] [--version V] [--store DIR]\n"
            "       etch model rollback NAME [--store DIR]\n"
            "       etch model remove NAME [--version V] [--store DIR]\n"
            "\n"
            "Keep named, versioned models on the device. install copies FILE (and the\n"
            "tokenizer / .ptd) into the store, checks the SHA-256 when given and that this\n"
            "build can load it (every operator and backend registered), then makes it the\n"
            "current version atomically; the version it replaces is kept as the previous one.\n"
            "'etch run --model NAME' and 'etch llm --model NAME' serve the current version,\n"
            "falling back to the previous one when it fails its check; 'etch llm' without\n"
            "--model serves NAME 'default', else the model built into etch.\n"
            "\n"
            "options:\n"
            "  --version V            install: the version (default: the next number);\n"
            "                         verify, remove: that version (default: verify checks\n"
            "                         the current and previous ones, remove removes all)\n"
            "  --sha256 HEX           install: the FILE's expected SHA-256 (64 hex digits)\n"
            "  --tokenizer T          install: the tokenizer to keep with it\n"
            "  --data FILE.ptd        install: its external data\n"
            "  --full                 verify: hash every byte and open the program (default:\n"
            "                         sizes and the first 4 KiB, as when serving)\n"
            CLI_HELP_STORE
            "  -h, --help             show this help\n"
            "\n"
            "Names and versions: 1-64 characters of A-Z a-z 0-9 . _ + -, not starting with\n"
            "'.' or '-'. Exit status: 0 success, 1 failure (verify: the current version\n"
            "fails), 2 bad usage.\n");
}

typedef struct model_opts {
    const char *sub, *name, *file, *version, *sha256, *tokenizer, *data, *store;
    bool full;
} model_opts;

static int parse(int argc, char **argv, model_opts *o) {
    memset(o, 0, sizeof *o);
    if (argc < 2)
        return cli_usage_error("model", "missing subcommand (install, list, verify, rollback, "
                                        "remove)");
    o->sub = argv[1];
    const char *pos[2] = {NULL, NULL};
    size_t npos = 0;
    for (int i = 2; i < argc; i++) {
        int r;
        if ((r = cli_opt_value("model", argc, argv, &i, "--version", &o->version)) ||
            (r = cli_opt_value("model", argc, argv, &i, "--sha256", &o->sha256)) ||
            (r = cli_opt_value("model", argc, argv, &i, "--tokenizer", &o->tokenizer)) ||
            (r = cli_opt_value("model", argc, argv, &i, "--data", &o->data)) ||
            (r = cli_opt_value("model", argc, argv, &i, "--store", &o->store)) ||
            (r = cli_opt_flag("model", argv, i, "--full", &o->full))) {
            if (r < 0)
                return CLI_USAGE;
            continue;
        }
        if (argv[i][0] == '-' && argv[i][1])
            return cli_usage_error("model", "unknown option '%s'", argv[i]);
        if (npos == 2)
            return cli_usage_error("model", "unexpected argument '%s'", argv[i]);
        pos[npos++] = argv[i];
    }
    bool install = !strcmp(o->sub, "install"), list = !strcmp(o->sub, "list"),
         verify = !strcmp(o->sub, "verify"), rollback = !strcmp(o->sub, "rollback"),
         remove = !strcmp(o->sub, "remove");
    if (!install && !list && !verify && !rollback && !remove)
        return cli_usage_error("model", "unknown subcommand '%s' (install, list, verify, "
                                        "rollback, remove)",
                               o->sub);
    size_t want = install ? 2 : list ? 0 : 1;
    if (npos != want)
        return cli_usage_error("model", "%s takes %s", o->sub,
                               install ? "NAME FILE" : list ? "no arguments" : "NAME");
    o->name = pos[0];
    o->file = pos[1];
    if (!install && (o->sha256 || o->tokenizer || o->data))
        return cli_usage_error("model", "--sha256, --tokenizer and --data go with install");
    if (o->full && !verify)
        return cli_usage_error("model", "--full goes with verify");
    if (o->version && (list || rollback))
        return cli_usage_error("model", "%s takes no --version", o->sub);
    if (o->name && !etch_store_name_valid(o->name))
        return cli_usage_error("model",
                               "invalid model name '%s': 1-64 characters of A-Z a-z 0-9 . _ + "
                               "-, not starting with '.' or '-'",
                               o->name);
    if (o->version && !etch_store_name_valid(o->version))
        return cli_usage_error("model", "invalid version '%s' (the same rules as names)",
                               o->version);
    return CLI_OK;
}

static int do_install(const model_opts *o, etch_store *s, const char *dir) {
    etch_store_install_options io = etch_store_default_install_options();
    io.version = o->version;
    io.sha256[ETCH_STORE_PTE] = o->sha256;
    io.tokenizer_path = o->tokenizer;
    io.ptd_path = o->data;
    char v[ETCH_STORE_NAME_MAX + 1];
    etch_status st = etch_store_install_file(s, o->name, o->file, &io, v);
    if (st != ETCH_OK)
        return cli_fail(st);
    etch_store_manifest *m = NULL;
    if ((st = etch_store_manifest_get(s, o->name, v, &m)) != ETCH_OK)
        return cli_fail(st);
    etch_store_entry *e = NULL;
    size_t n = 0;
    const char *prev = "";
    if (etch_store_list(s, &e, &n) == ETCH_OK)
        for (size_t i = 0; i < n; i++)
            if (!strcmp(e[i].name, o->name))
                prev = e[i].previous;
    printf("installed %s %s in %s: model.pte %" PRIu64 " bytes, sha256 %s", o->name, v, dir,
           m->files[ETCH_STORE_PTE].size, m->files[ETCH_STORE_PTE].sha256);
    if (m->files[ETCH_STORE_TOKENIZER].present)
        printf("; tokenizer %" PRIu64 " bytes", m->files[ETCH_STORE_TOKENIZER].size);
    if (m->files[ETCH_STORE_PTD].present)
        printf("; model.ptd %" PRIu64 " bytes", m->files[ETCH_STORE_PTD].size);
    printf("; %zu operator%s, %zu backend%s", m->num_operators,
           m->num_operators == 1 ? "" : "s", m->num_backends, m->num_backends == 1 ? "" : "s");
    if (prev[0])
        printf("; previous version %s kept for rollback", prev);
    printf("\n");
    free(e);
    etch_store_manifest_free(m);
    return CLI_OK;
}

static int do_list(etch_store *s, const char *dir) {
    etch_store_entry *e = NULL;
    size_t n = 0;
    etch_status st = etch_store_list(s, &e, &n);
    if (st != ETCH_OK)
        return cli_fail(st);
    printf("store %s: %zu model%s\n", dir, n, n == 1 ? "" : "s");
    if (n)
        printf("%-24s %-12s %-12s %8s %12s  %s\n", "NAME", "CURRENT", "PREVIOUS", "VERSIONS",
               "BYTES", "CREATED");
    for (size_t i = 0; i < n; i++) {
        etch_store_manifest *m = NULL;
        char bytes[32] = "?", created[40] = "?";
        if (e[i].bad_state) {
            printf("%-24s %-12s %-12s %8zu %12s  (state file unreadable)\n", e[i].name, "?",
                   "?", e[i].num_versions, "?");
            continue;
        }
        if (e[i].current[0] && etch_store_manifest_get(s, e[i].name, NULL, &m) == ETCH_OK) {
            uint64_t total = 0;
            for (int r = 0; r < ETCH_STORE_NUM_ROLES; r++)
                total += m->files[r].present ? m->files[r].size : 0;
            snprintf(bytes, sizeof bytes, "%" PRIu64, total);
            snprintf(created, sizeof created, "%s", m->created);
        }
        etch_store_manifest_free(m);
        printf("%-24s %-12s %-12s %8zu %12s  %s\n", e[i].name,
               e[i].current[0] ? e[i].current : "-", e[i].previous[0] ? e[i].previous : "-",
               e[i].num_versions, bytes, created);
    }
    free(e);
    return CLI_OK;
}

static int verify_one(etch_store *s, const char *name, const char *version, const char *role,
                      etch_store_check check) {
    etch_store_reason r;
    etch_status st = etch_store_verify(s, name, version, check, &r);
    printf("%s %s%s%s: ", name, version, role ? " " : "", role ? role : "");
    if (st == ETCH_OK)
        printf("ok (%s check)\n", check == ETCH_STORE_CHECK_FULL ? "full" : "fast");
    else
        printf("FAILED: %s: %s\n", etch_store_reason_str(r), etch_last_error());
    return st == ETCH_OK ? CLI_OK : CLI_FAIL;
}

static int do_verify(const model_opts *o, etch_store *s) {
    etch_store_check check = o->full ? ETCH_STORE_CHECK_FULL : ETCH_STORE_CHECK_FAST;
    if (o->version)
        return verify_one(s, o->name, o->version, NULL, check);
    etch_store_entry *e = NULL;
    size_t n = 0;
    etch_status st = etch_store_list(s, &e, &n);
    if (st != ETCH_OK)
        return cli_fail(st);
    const etch_store_entry *me = NULL;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(e[i].name, o->name))
            me = &e[i];
    int rc = CLI_OK;
    if (!me) {
        fflush(stdout);
        fprintf(stderr, "error: NotFound: '%s' is not installed\n", o->name);
        rc = CLI_FAIL;
    } else if (me->bad_state) {
        printf("%s: FAILED: bad-state: the state file is unreadable\n", o->name);
        rc = CLI_FAIL;
    } else {
        if (me->current[0])
            rc = verify_one(s, o->name, me->current, "(current)", check);
        else {
            printf("%s: no current version\n", o->name);
            rc = CLI_FAIL;
        }
        if (me->previous[0])
            verify_one(s, o->name, me->previous, "(previous)", check);
    }
    free(e);
    return rc;
}

int cmd_model(int argc, char **argv) {
    model_opts o;
    int rc = parse(argc, argv, &o);
    if (rc != CLI_OK)
        return rc;
    char dir[ETCH_STORE_PATH_MAX];
    if (!cli_store_dir("model", o.store, dir, sizeof dir))
        return CLI_USAGE;
    bool install = !strcmp(o.sub, "install");
    etch_store *s = NULL;
    if ((rc = cli_store_open(dir, install, &s)) != CLI_OK)
        return rc;
    etch_status st;
    char v[ETCH_STORE_NAME_MAX + 1];
    if (install) {
        rc = do_install(&o, s, dir);
    } else if (!strcmp(o.sub, "list")) {
        rc = do_list(s, dir);
    } else if (!strcmp(o.sub, "verify")) {
        rc = do_verify(&o, s);
    } else if (!strcmp(o.sub, "rollback")) {
        if ((st = etch_store_rollback(s, o.name, v)) != ETCH_OK)
            rc = cli_fail(st);
        else
            printf("%s: version %s is current now (rollback again to undo)\n", o.name, v);
    } else {
        if ((st = etch_store_remove(s, o.name, o.version)) != ETCH_OK)
            rc = cli_fail(st);
        else if (o.version)
            printf("removed %s %s\n", o.name, o.version);
        else
            printf("removed %s (every version)\n", o.name);
    }
    etch_store_close(s);
    return rc;
}
