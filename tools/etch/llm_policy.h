/* etch llm --models: the variants, the budget flags, the thermal trace, and the policy
 * (etch/policy.h) choosing a variant per request. cmd_llm.c runs the requests. */
#ifndef ETCH_CLI_LLM_POLICY_H
#define ETCH_CLI_LLM_POLICY_H

#include <stdbool.h>
#include <stddef.h>

#include "etch/llm_runner.h"

#define LLM_POLICY_MAX_VARIANTS 16

/* The help lines of the flags. */
#define LLM_POLICY_HELP                                                                    \
    "  --models A.pte[:TOK],B.pte[:TOK],...\n"                                             \
    "                         model variants of one task, best first (a larger one, then\n" \
    "                         a smaller or more quantized one); each with its own\n"        \
    "                         tokenizer after ':' (default: --tokenizer); up to 16; paths\n" \
    "                         holding ',' or ':' cannot be given here. Instead of --model:\n" \
    "                         a policy chooses the variant per request (per --chat turn,\n" \
    "                         else per run) and stderr says which one and why\n"           \
    "                         ('policy: request N -> 'NAME' [REASON] ...'). Each variant\n" \
    "                         keeps its own --chat conversation: after a switch the model\n" \
    "                         has not seen the turns the other one served\n"               \
    "  --latency-budget-ms N  with --models: the most milliseconds per generated token\n" \
    "                         (measured on each reply, smoothed per variant): over it,\n"  \
    "                         the next request steps down; stepping back up needs the\n"   \
    "                         better variant at most 80%% of it (default: no budget)\n"    \
    "  --cooldown-ms N        with --models: how long the signals must stay comfortable\n"  \
    "                         before stepping back up to a better variant (default 30000)\n" \
    "  --thermal-trace FILE   with --models: the levels of each request (without it:\n"    \
    "                         thermal 0, battery 1; the CLI reads no sensors). Line N is\n" \
    "                         request N (the last line goes on applying): THERMAL\n"       \
    "                         [BATTERY] (thermal 0-4: nominal, light, moderate, severe,\n" \
    "                         critical; battery charge 0-1) and/or key=value: thermal=,\n" \
    "                         battery=, t= (the request's time in ms, instead of the\n"    \
    "                         clock: on every line), memory= (the memory ceiling in\n"     \
    "                         bytes; a variant's footprint is its file's size); a key\n"   \
    "                         not given keeps the line before's value; '#' comments\n"

/* The flags' values as given (NULL: not given). */
typedef struct llm_policy_flags {
    const char *models, *tokenizer, *latency_budget, *cooldown, *trace;
} llm_policy_flags;

typedef struct llm_policy llm_policy;

/* Check the flags (usage errors printed): CLI_OK or CLI_USAGE. */
int llm_policy_check(const llm_policy_flags *f);

/* Parse the flags and read the trace: CLI_OK, CLI_USAGE or CLI_FAIL (printed). */
int llm_policy_open(const llm_policy_flags *f, bool quiet, llm_policy **out);
void llm_policy_close(llm_policy *lp); /* NULL is fine */

size_t llm_policy_count(const llm_policy *lp);
const char *llm_policy_model(const llm_policy *lp, size_t i);
const char *llm_policy_tokenizer(const llm_policy *lp, size_t i);

/* Before a request: choose the variant (and say so on stderr). CLI_OK or CLI_FAIL. */
int llm_policy_before(llm_policy *lp, size_t *variant);
/* After it: feed back the measured latency per token of the reply's statistics. */
void llm_policy_after(llm_policy *lp, size_t variant, const etch_llm_stats *st);

#endif
