/* The CLI's embedded default model (tools/etch/embedded_model.h): the blobs of
 * default_model.S when it is linked in (ETCH_HAVE_EMBEDDED_MODEL), nothing otherwise. */
#include "embedded_model.h"

#if defined(ETCH_HAVE_EMBEDDED_MODEL)
extern const unsigned char etch_embedded_pte[], etch_embedded_pte_end[];
extern const unsigned char etch_embedded_tokenizer[], etch_embedded_tokenizer_end[];

bool cli_embedded_model(cli_embedded *out) {
    out->pte = etch_embedded_pte;
    out->pte_size = (size_t)(etch_embedded_pte_end - etch_embedded_pte);
    out->tokenizer = etch_embedded_tokenizer;
    out->tokenizer_size = (size_t)(etch_embedded_tokenizer_end - etch_embedded_tokenizer);
    out->label = ETCH_EMBEDDED_MODEL_LABEL;
    return true;
}
#else
bool cli_embedded_model(cli_embedded *out) {
    out->pte = out->tokenizer = NULL;
    out->pte_size = out->tokenizer_size = 0;
    out->label = NULL;
    return false;
}
#endif
