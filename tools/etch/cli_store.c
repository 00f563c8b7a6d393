#include "cli_store.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

bool cli_store_dir(const char *cmd, const char *opt, char *buf, size_t cap) {
    const char *env = getenv("ETCH_STORE"), *xdg = getenv("XDG_DATA_HOME"),
               *home = getenv("HOME");
    int n;
    if (opt)
        n = snprintf(buf, cap, "%s", opt);
    else if (env && env[0])
        n = snprintf(buf, cap, "%s", env);
    else if (xdg && xdg[0])
        n = snprintf(buf, cap, "%s/etch/models", xdg);
    else if (home && home[0])
        n = snprintf(buf, cap, "%s/.local/share/etch/models", home);
    else {
        cli_usage_error(cmd, "no model store: give --store DIR (or set ETCH_STORE)");
        return false;
    }
    if (n <= 0 || (size_t)n >= cap) {
        cli_usage_error(cmd, "the store path is too long");
        return false;
    }
    return true;
}

int cli_store_open(const char *dir, bool create, etch_store **out) {
    etch_store_options o = etch_store_default_options();
    o.create = create;
    etch_status st = etch_store_open(dir, &o, out);
    return st == ETCH_OK ? CLI_OK : cli_fail(st);
}

bool cli_is_path(const char *model) {
    struct stat sb;
    return stat(model, &sb) == 0;
}

static const char *origin_str(etch_store_origin o) {
    switch (o) {
    case ETCH_STORE_SERVED_CURRENT: return "current version";
    case ETCH_STORE_SERVED_PREVIOUS: return "previous version";
    case ETCH_STORE_SERVED_EMBEDDED: return "embedded default";
    case ETCH_STORE_SERVED_NONE: break;
    }
    return "nothing";
}

int cli_store_serve(const char *cmd, const char *store_opt, const char *name,
                    const etch_store_embedded *embedded, bool announce,
                    const etch_store_options *so_in, cli_served *out) {
    memset(out, 0, sizeof *out);
    if (!cli_store_dir(cmd, store_opt, out->store, sizeof out->store))
        return CLI_USAGE;
    etch_store *s = NULL;
    etch_store_options so = so_in ? *so_in : etch_store_default_options();
    so.create = false; /* serving never creates a store */
    etch_status st = etch_store_open(out->store, &so, &s);
    if (st != ETCH_OK) {
        if (!embedded) {
            fflush(stdout);
            fprintf(stderr,
                    "error: NotFound: '%s' is neither a file nor a model in the store %s (%s)\n",
                    name, out->store, etch_last_error());
            return CLI_FAIL;
        }
        /* no store: the embedded default, saying why */
        out->s.origin = ETCH_STORE_SERVED_EMBEDDED;
        out->s.reason = ETCH_STORE_REASON_NOT_INSTALLED;
        out->s.pte_data = embedded->pte;
        out->s.pte_size = embedded->pte_size;
        out->s.tokenizer_data = embedded->tokenizer;
        out->s.tokenizer_size = embedded->tokenizer_size;
        snprintf(out->s.name, sizeof out->s.name, "%s", name);
        char why[300];
        snprintf(why, sizeof why, "%s", etch_last_error());
        snprintf(out->s.message, sizeof out->s.message,
                 "no model store at %.500s (%s); served the embedded default (%s)", out->store,
                 why, embedded->label ? embedded->label : "no label");
        fprintf(stderr, "model: %s: %s: %s\n", name, etch_store_reason_str(out->s.reason),
                out->s.message);
        return CLI_OK;
    }
    etch_store_open_options oo = etch_store_default_open_options();
    oo.embedded = embedded;
    st = etch_store_open_model(s, name, &oo, &out->s);
    etch_store_close(s);
    if (st != ETCH_OK) {
        fflush(stdout);
        if (st == ETCH_ERR_NOT_FOUND)
            fprintf(stderr,
                    "error: NotFound: '%s' is neither a file nor a model in the store %s\n",
                    name, out->store);
        else
            fprintf(stderr, "error: %s: model %s in %s: nothing passed its check: %s\n",
                    etch_status_str(st), name, out->store, out->s.message);
        return CLI_FAIL;
    }
    /* fallbacks always say why: "model: NAME: REASON: what happened; what was served" */
    if (out->s.origin != ETCH_STORE_SERVED_CURRENT)
        fprintf(stderr, "model: %s: %s: %s\n", name, etch_store_reason_str(out->s.reason),
                out->s.message);
    else if (announce)
        fprintf(stderr, "model: served %s %s, the %s, from %s\n", name, out->s.version,
                origin_str(out->s.origin), out->store);
    return CLI_OK;
}
