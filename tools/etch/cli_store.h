/* The model store from the CLI (etch model, and --model NAME in etch run / etch llm): where
 * the store is, and turning a --model argument into files. */
#ifndef ETCH_CLI_STORE_H
#define ETCH_CLI_STORE_H

#include "cli_util.h"
#include "etch/store.h"

/* The store directory: --store DIR, else $ETCH_STORE, else $XDG_DATA_HOME/etch/models, else
 * $HOME/.local/share/etch/models. Into buf; false (error printed) when none can be formed. */
bool cli_store_dir(const char *cmd, const char *opt, char *buf, size_t cap);
#define CLI_HELP_STORE                                                                     \
    "  --store DIR            the model store (default: $ETCH_STORE, else\n"              \
    "                         $XDG_DATA_HOME/etch/models, else ~/.local/share/etch/models)\n"

/* Open the store at dir (create: make it when missing). CLI_OK or CLI_FAIL (printed). */
int cli_store_open(const char *dir, bool create, etch_store **out);

/* True when `model` names an existing file (or anything stat can see): a path, not a name. */
bool cli_is_path(const char *model);

/* A stored model served for --model NAME (or the default): its files and where it came from.
 * Paths are "" when absent; for the embedded model, data/size are set instead. */
typedef struct cli_served {
    etch_store_served s;
    char store[ETCH_STORE_PATH_MAX];
} cli_served;

/* Serve `name` from the store at store_opt (resolved as cli_store_dir), with the fast check
 * and `embedded` as the last resort (may be NULL). When something other than the current
 * version is served, a line saying which and why goes to stderr ("model: ..."); with
 * `announce` a line goes there for the current version too. `so` (NULL: the defaults) says
 * which kernels and backends the check registers: the ones the command will load with, since
 * the registry is process-wide. CLI_OK, or CLI_FAIL (printed). */
int cli_store_serve(const char *cmd, const char *store_opt, const char *name,
                    const etch_store_embedded *embedded, bool announce,
                    const etch_store_options *so, cli_served *out);

#endif
