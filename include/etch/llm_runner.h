/*
 * etch/llm_runner.h — text generation with a decoder-only language model: load a program,
 * prefill a prompt in one call, decode token by token with a sampler, stream UTF-8-safe text,
 * keep the KV cache across chat turns, and report ExecuTorch-compatible statistics.
 *
 * Basic usage:
 *
 *   etch_tokenizer *tok;
 *   etch_tokenizer_open_file("tokenizer.bin", NULL, &tok);
 *   etch_llm_runner_options o = etch_llm_runner_default_options();
 *   o.sampler.temperature = 0;                          // greedy
 *   etch_llm_runner *r;
 *   if (etch_llm_runner_open("model.pte", tok, &o, &r) != ETCH_OK)
 *       fprintf(stderr, "%s\n", etch_last_error());
 *
 *   static int on_token(void *ud, int32_t id, const char *text, size_t len) {
 *       fwrite(text, 1, len, stdout);                   // whole code points only
 *       return 0;                                       // non-zero: stop (cancel)
 *   }
 *   etch_llm_generate_params gp = etch_llm_generate_default_params();
 *   gp.max_new_tokens = 64;
 *   gp.on_token = on_token;
 *   etch_llm_result res;
 *   etch_llm_runner_generate(r, "Once upon a time", 16, &gp, &res);
 *   // res.stop_reason: EOS, STOP_ID, MAX_TOKENS, CONTEXT_FULL or CANCELLED
 *   etch_llm_runner_generate(r, "And then", 8, &gp, &res);  // next turn: only its tokens
 *                                                            // are prefilled
 *   char line[1024];
 *   etch_llm_stats_json(etch_llm_runner_stats(r), line, sizeof line);
 *   fprintf(stderr, "%s\n", line);                      // PyTorchObserver {...}
 *   etch_llm_runner_reset(r);                           // a new conversation
 *   etch_llm_runner_close(r);
 *   etch_tokenizer_close(tok);
 *
 * The model. A program exported by `python3 -m etch.llm export` (or ExecuTorch's llama export
 * with a KV cache) with a method `forward(tokens: Long[1, T], start_pos: Long[1])` returning
 * Float logits `[1, vocab]` of the last position (or `[1, T, vocab]`: the last row is used);
 * the KV cache is the method's mutable state. Metadata comes from constant methods under
 * ExecuTorch's names (get_vocab_size, get_max_seq_len, get_max_context_len, get_bos_id,
 * get_eos_ids, get_n_layers, use_kv_cache, enable_dynamic_shape); missing ones are taken
 * from the method's shapes and the tokenizer.
 *
 * Positions. The context holds every token that entered the model: BOS, prompts and generated
 * tokens. The token sampled last is fed at the start of the next call (with that call's
 * prompt), so a chat turn prefills that token plus the new turn's tokens and nothing else.
 * A prompt that does not fit the context fails with ETCH_ERR_OUT_OF_RESOURCES (nothing is
 * changed); when decoding reaches the end of the context, generation stops with
 * ETCH_LLM_STOP_CONTEXT_FULL. Call etch_llm_runner_reset to start again at position 0, or
 * etch_llm_runner_shift to drop old tokens and go on (`etch llm` drops the oldest chat turns).
 *
 * Memory: everything is allocated by etch_llm_runner_open (the program, the method's memory,
 * token and logits buffers, the sampler). Generation allocates nothing (the callback is the
 * caller's business). One runner belongs to one thread at a time; its tokenizer is used for
 * encoding and must not be used for encoding by another thread meanwhile.
 */
#ifndef ETCH_LLM_RUNNER_H
#define ETCH_LLM_RUNNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etch/llm.h"
#include "etch/module.h"
#include "etch/program.h"
#include "etch/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* =============================== statistics ================================= */

/*
 * One generation's statistics, as ExecuTorch's LLM runner keeps them. Timestamps are
 * microseconds of a monotonic clock (the JSON line prints milliseconds, as ExecuTorch does).
 *   load:     model_load_start .. model_load_end            (etch_llm_runner_open)
 *   prefill:  inference_start .. prompt_eval_end            (encode + prefill forward calls)
 *   first token: inference_start .. first_token             (time to first token)
 *   decode:   prompt_eval_end .. inference_end
 */
typedef struct etch_llm_stats {
    int64_t model_load_start_us;
    int64_t model_load_end_us;
    int64_t inference_start_us;  /* the generate call began (before encoding the prompt) */
    int64_t token_encode_end_us; /* the prompt is encoded */
    int64_t prompt_eval_end_us;  /* the prompt is prefilled (its logits are ready) */
    int64_t first_token_us;      /* the first token is sampled (= prompt_eval_end if none) */
    int64_t inference_end_us;    /* the generate call ends */
    int64_t aggregate_sampling_time_us; /* time spent in the sampler */
    int64_t prompt_tokens;       /* tokens prefilled by the call */
    int64_t generated_tokens;    /* tokens sampled by the call (a final EOS/stop id included) */
    uint64_t peak_rss_bytes;     /* the process's peak resident set at the end (0: unknown) */
    int num_threads;             /* threads the kernels ran with */
} etch_llm_stats;

/*
 * Writes `PyTorchObserver {...}` (no newline) into buf: the JSON keys of ExecuTorch's
 * llm::stats_to_json_string, in its order — prompt_tokens, generated_tokens,
 * model_load_start_ms, model_load_end_ms, inference_start_ms, inference_end_ms,
 * prompt_eval_end_ms, first_token_ms, aggregate_sampling_time_ms,
 * SCALING_FACTOR_UNITS_PER_SECOND (1000) — then etch's own: peak_rss_bytes. Times are
 * integers in milliseconds (microseconds / 1000, rounded down). Returns the length the line
 * needs (as snprintf); it is complete when that is < cap.
 */
size_t etch_llm_stats_json(const etch_llm_stats *s, char *buf, size_t cap);
/* A human-readable report over several lines (load time, prefill and decode tokens/s, time to
 * first token, sampling time, peak RSS), each ending in '\n'. Returns as snprintf. */
size_t etch_llm_stats_report(const etch_llm_stats *s, char *buf, size_t cap);

/* Monotonic clock in microseconds. */
int64_t etch_llm_time_us(void);
/* Peak resident set size of the process (getrusage), bytes; 0 when unknown. */
uint64_t etch_llm_peak_rss_bytes(void);
/* Current resident set size (/proc/self/statm), bytes; 0 when unknown. */
uint64_t etch_llm_current_rss_bytes(void);

/* ================================= runner =================================== */

typedef struct etch_llm_runner etch_llm_runner;

#define ETCH_LLM_MAX_EOS_IDS 16

/* What the runner knows about the model (from its metadata methods, else derived). */
typedef struct etch_llm_metadata {
    int64_t vocab_size;      /* get_vocab_size, else the logits' last dimension */
    int64_t max_seq_len;     /* get_max_seq_len: most tokens one forward call takes (at most
                              * forward's tokens bound, which ExecuTorch's export sets 1 lower) */
    int64_t max_context_len; /* get_max_context_len: positions of the KV cache */
    int64_t bos_id;          /* get_bos_id, else the tokenizer's; -1 if none */
    int64_t eos_ids[ETCH_LLM_MAX_EOS_IDS]; /* get_eos_ids, else the tokenizer's EOS */
    size_t n_eos_ids;
    int64_t n_layers;        /* get_n_layers; 0 if absent */
    bool use_kv_cache;       /* use_kv_cache (a model without one is not supported) */
    bool enable_dynamic_shape; /* enable_dynamic_shape: prefill takes many tokens per call */
    bool from_program;       /* the values came from the program's metadata methods */
    char kv_cache_dtype[16]; /* get_kv_cache_dtype (etch's exporter: "int8" with --kv-cache
                                int8), "" when the program does not say */
    int64_t kv_cache_bytes_per_token; /* get_kv_cache_bytes_per_token (values, scales and
                                         zero points of all layers), 0 when not said */
} etch_llm_metadata;

typedef struct etch_llm_runner_options {
    etch_load_mode load_mode;    /* ETCH_LOAD_MMAP */
    const char *method;          /* "forward" */
    size_t temp_size;            /* kernel scratch bytes per call; 0: the module's default */
    int num_threads;             /* threads the kernels use (a thread pool started at open,
                                    the calling thread included); 0 or 1: serial. Default 1 */
    etch_module_kernels kernels; /* ETCH_MODULE_KERNELS_OPTIMIZED (etch/module.h) */
    etch_sampler_params sampler; /* etch_sampler_default_params() */
    /* Do not prepack the constant weights at load (etch_method_options.no_prepack). Packing
     * makes prefill (and, on AVX2 and NEON, decode) faster; with the default mmap load mode
     * the original weights' pages are given back once packed, so it costs about no memory
     * (bench/llm's 110M shape peaks at 547 MB with it); with ETCH_LOAD_READ it keeps a second
     * copy of the matrix weights. Default false. */
    bool no_prepack;
} etch_llm_runner_options;

etch_llm_runner_options etch_llm_runner_default_options(void);

/* How many ids a model's vocabulary may have beyond a byte-level tokenizer's nt ids: models
 * pad their embedding (GPT-2 50257 -> 50304, Qwen2 151665 -> 151936 or 152064), never by
 * more than a few hundred rows. 64, or up to 1024 when that is at most nt / 8. */
#define ETCH_LLM_MAX_PAD_IDS(nt) \
    ((int64_t)(nt) / 8 > 1024 ? 1024 : (int64_t)(nt) / 8 > 64 ? (int64_t)(nt) / 8 : 64)

/* Open the model and size every buffer. `tok` is borrowed (it must outlive the runner).
 * Errors: those of opening/loading the program; ETCH_ERR_NOT_SUPPORTED for a program whose
 * forward method does not have the shape described above (message says what);
 * ETCH_ERR_INVALID_ARGUMENT when the tokenizer has more ids than the model's vocabulary, or
 * (llama2.c and sentencepiece tokenizers, which are the vocabulary) a different count. A
 * byte-level tokenizer (tokenizer.json, tiktoken) may have fewer, since models pad their
 * embedding, but at most ETCH_LLM_MAX_PAD_IDS fewer: a tokenizer smaller than that is not the
 * model's (its ids would be garbage) and is refused. The padded ids are never sampled:
 * generation samples from the logits of the tokenizer's ids only. */
etch_status etch_llm_runner_open(const char *model_path, etch_tokenizer *tok,
                                 const etch_llm_runner_options *opts, etch_llm_runner **out);
/* The same from a program in memory (borrowed: it must outlive the runner; 16-byte aligned
 * memory is used in place, other memory is copied). opts->load_mode does not apply. */
etch_status etch_llm_runner_open_buffer(const void *data, size_t size, etch_tokenizer *tok,
                                        const etch_llm_runner_options *opts,
                                        etch_llm_runner **out);
void etch_llm_runner_close(etch_llm_runner *r); /* NULL is fine */

const etch_llm_metadata *etch_llm_runner_metadata(const etch_llm_runner *r);

/* Replace the sampler (allocates; the generator restarts from params->seed). */
etch_status etch_llm_runner_set_sampler(etch_llm_runner *r, const etch_sampler_params *params);

/* Interrupt check for generation (cancellation from another thread, etch/async.h): called
 * before every instruction of every forward call; when it returns non-zero the call stops
 * there and generate returns ETCH_OK with stop_reason CANCELLED. The context keeps what
 * was fed before: the prompt's completed prefill chunks, and a sampled token not yet fed
 * waits for the next call (as after a stop id). NULL removes it. */
void etch_llm_runner_set_interrupt(etch_llm_runner *r, etch_interrupt_fn fn, void *user_data);

typedef enum etch_llm_stop_reason {
    ETCH_LLM_STOP_NONE = 0,     /* no generation happened (error) */
    ETCH_LLM_STOP_EOS,          /* the model produced one of its EOS ids */
    ETCH_LLM_STOP_STOP_ID,      /* an id of generate_params.stop_ids */
    ETCH_LLM_STOP_MAX_TOKENS,   /* max_new_tokens were generated */
    ETCH_LLM_STOP_CONTEXT_FULL, /* no position is left for the next token */
    ETCH_LLM_STOP_CANCELLED     /* the token callback returned non-zero, or the interrupt */
} etch_llm_stop_reason;

/* "none", "eos", "stop_id", "max_tokens", "context_full", "cancelled". */
const char *etch_llm_stop_reason_str(etch_llm_stop_reason reason);

/* Called for every generated token in order, except a final EOS / stop id: `text` holds the
 * whole code points this token completes (possibly none: len 0; not NUL-terminated; valid
 * during the call). With echo, the prompt comes first (id -1 for text given to generate,
 * each prompt id for generate_ids). Return non-zero to stop: the token counts as generated
 * and the reason is ETCH_LLM_STOP_CANCELLED. */
typedef int (*etch_llm_token_fn)(void *user_data, int32_t id, const char *text, size_t len);

typedef struct etch_llm_generate_params {
    int32_t max_new_tokens;    /* tokens to sample at most; < 0: until EOS or the context is
                                  full; 0: prefill only. Default -1 */
    const int32_t *stop_ids;   /* ids that end generation besides the model's EOS ids */
    size_t n_stop_ids;
    bool ignore_eos;           /* do not stop on the model's EOS ids. Default false */
    bool add_bos;              /* start an empty context with BOS. Default true */
    bool echo;                 /* stream the prompt through on_token first. Default false */
    etch_llm_token_fn on_token;
    void *user_data;
} etch_llm_generate_params;

etch_llm_generate_params etch_llm_generate_default_params(void);

typedef struct etch_llm_result {
    etch_llm_stop_reason stop_reason;
    int32_t stop_id;          /* the EOS / stop id that ended generation, else -1 */
    int64_t prompt_tokens;    /* tokens this call prefilled (chat: the new ones only) */
    int64_t generated_tokens; /* tokens sampled (a final EOS / stop id included) */
    int64_t position;         /* tokens in the KV cache after the call */
} etch_llm_result;

/* Append `prompt` (UTF-8, len bytes; may be empty) to the context and generate. The text is
 * encoded without BOS/EOS (BOS is added to an empty context when params->add_bos). params NULL
 * means the defaults. `result` (optional) is filled on every return, errors included. Errors:
 * ETCH_ERR_OUT_OF_RESOURCES when the prompt does not fit the context (nothing changed,
 * result->stop_reason CONTEXT_FULL); ETCH_ERR_INVALID_ARGUMENT when there is nothing to
 * prefill (an empty prompt at position 0 without BOS); those of encoding and executing. */
etch_status etch_llm_runner_generate(etch_llm_runner *r, const char *prompt, size_t len,
                                     const etch_llm_generate_params *params,
                                     etch_llm_result *result);
/* The same with token ids (BOS is still added to an empty context when params->add_bos). */
etch_status etch_llm_runner_generate_ids(etch_llm_runner *r, const int32_t *ids, size_t n,
                                         const etch_llm_generate_params *params,
                                         etch_llm_result *result);

/* Forget the context: the next call starts at position 0 (the cache is overwritten as it
 * refills; stale entries beyond the position are masked by the model). */
void etch_llm_runner_reset(etch_llm_runner *r);
/* Tokens in the context (fed to the model), and the sampled token waiting to be fed (-1). */
int64_t etch_llm_runner_position(const etch_llm_runner *r);
int32_t etch_llm_runner_pending_token(const etch_llm_runner *r);

/* Statistics of the last generate call (load times from open). Valid until the next call. */
const etch_llm_stats *etch_llm_runner_stats(const etch_llm_runner *r);

/* Number of forward calls made since open (prefill chunks and decode steps), for tests. */
uint64_t etch_llm_runner_num_forward_calls(const etch_llm_runner *r);

/* The ids in the context, in order (etch_llm_runner_position() of them; the pending token is
 * not one of them): valid until the next call that changes the context. */
const int32_t *etch_llm_runner_context(const etch_llm_runner *r, size_t *n);

/* Context shifting: drop the context positions [keep, keep + drop) and prefill the tokens
 * after them again at their new positions (the cache's keys depend on the position), so the
 * context keeps its first `keep` tokens (a system prompt) and its newest ones. The pending
 * token stays pending. Errors: ETCH_ERR_INVALID_ARGUMENT when the range is not inside the
 * context; those of executing (the context is then empty: reset). */
etch_status etch_llm_runner_shift(etch_llm_runner *r, size_t keep, size_t drop);

/* Forget the pending token (the one sampled last, fed at the start of the next call): e.g. a
 * final EOS that a chat template replaces with its own end-of-turn text. */
void etch_llm_runner_discard_pending(etch_llm_runner *r);

/* The chat template of the program's metadata method `get_chat_template` (no inputs, 8 String
 * outputs in this order), as written by `python3 -m etch.llm export --hf`. A conversation is
 *   conversation_prefix, then system_prefix + system + system_suffix (system: the caller's,
 *   else default_system; nothing when empty), then per turn
 *   user_prefix + text + user_suffix + assistant_prefix, the reply, assistant_suffix.
 * The strings may hold special tokens ("<|im_start|>"): encode them with
 * ETCH_TOKENIZER_PARSE_SPECIAL, and the user's text without it. */
typedef struct etch_llm_chat_template {
    const char *conversation_prefix, *system_prefix, *system_suffix, *user_prefix,
        *user_suffix, *assistant_prefix, *assistant_suffix, *default_system;
} etch_llm_chat_template;

/* The program's chat template (NUL-terminated strings owned by the runner), or NULL when it
 * has none. */
const etch_llm_chat_template *etch_llm_runner_chat_template(const etch_llm_runner *r);

#ifdef __cplusplus
}
#endif
#endif
