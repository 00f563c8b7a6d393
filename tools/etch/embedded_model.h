/* The default model linked into the etch CLI (CMake option ETCH_EMBED_DEFAULT_MODEL, on by
 * default: models/default/model.pte and tokenizer.model, in a static library of its own so
 * that libetch does not grow). The last resort of `etch llm` (cmd_llm.c). */
#ifndef ETCH_CLI_EMBEDDED_MODEL_H
#define ETCH_CLI_EMBEDDED_MODEL_H

#include <stdbool.h>
#include <stddef.h>

typedef struct cli_embedded {
    const void *pte; /* 64-byte aligned, read-only, lives as long as the process */
    size_t pte_size;
    const void *tokenizer;
    size_t tokenizer_size;
    const char *label; /* where it came from: "models/default" */
} cli_embedded;

/* Fill *out; false (and zeros) when the CLI was built without an embedded model. */
bool cli_embedded_model(cli_embedded *out);

#endif
