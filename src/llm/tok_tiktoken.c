#include "llm/tok_internal.h"
#include "runtime/error.h"
int tok_looks_like_tiktoken(const uint8_t *d, size_t size);
int tok_looks_like_tiktoken(const uint8_t *d, size_t size) { (void)d; (void)size; return 0; }
etch_status tok_load_tiktoken(etch_tokenizer *t, const uint8_t *data, size_t size,
                              const etch_tokenizer_params *p) {
    (void)t; (void)data; (void)size; (void)p;
    return etch_err(ETCH_ERR_NOT_IMPLEMENTED, "tiktoken: not yet");
}
