/*
 * etch/llm.h — tokenizers and sampling for language models (work in progress).
 */
#ifndef ETCH_LLM_H
#define ETCH_LLM_H

#include <stddef.h>
#include <stdint.h>

#include "etch/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Version of the llm API section; bumped when the tokenizer/sampler API changes. */
int etch_llm_api_version(void);

#ifdef __cplusplus
}
#endif
#endif
