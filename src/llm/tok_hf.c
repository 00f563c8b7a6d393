#include "llm/tok_internal.h"
#include "runtime/error.h"
etch_status tok_load_hf(etch_tokenizer *t, const uint8_t *data, size_t size) {
    (void)t; (void)data; (void)size;
    return etch_err(ETCH_ERR_NOT_IMPLEMENTED, "tokenizer.json: not yet");
}
