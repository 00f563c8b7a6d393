#include "etch/llm.h"

int etch_llm_api_version(void) { return 1; }
