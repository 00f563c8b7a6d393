/* The LLM runner: a decoder with its KV cache inside the program, driven through the module
 * API. Everything is allocated at open; prefill and decode only set inputs, execute, copy one
 * row of logits and sample. */
#include <stdlib.h>
#include <string.h>

#include "etch/llm_runner.h"
#include "etch/module.h"
#include "runtime/error.h"

struct etch_llm_runner {
    etch_module *mod;
    etch_method *forward;
    etch_tokenizer *tok;
    etch_sampler *sampler;
    etch_llm_metadata meta;
    etch_llm_stats stats;
    int64_t chunk;        /* most tokens per forward call */
    int64_t *tokens;      /* [chunk] input ids */
    int32_t *ids;         /* [max_context_len + 1] encoded prompt */
    int32_t *hist;        /* [max_context_len] the ids in the cache, positions 0 .. pos-1 */
    size_t ids_cap;
    float *logits;        /* [vocab] one row, the sampler's scratch */
    char *text;           /* one detokenizer output */
    size_t text_cap;
    etch_detokenizer detok;
    int64_t pos;          /* tokens in the cache */
    int32_t pending;      /* sampled, not yet fed; -1 none */
    uint64_t forward_calls;
    int num_threads;
    etch_llm_chat_template tmpl; /* get_chat_template; its strings in tmpl_text */
    char *tmpl_text;
    bool has_tmpl;
};

etch_llm_runner_options etch_llm_runner_default_options(void) {
    etch_llm_runner_options o;
    memset(&o, 0, sizeof o);
    o.load_mode = ETCH_LOAD_MMAP;
    o.method = "forward";
    o.temp_size = 0;
    o.num_threads = 1;
    o.kernels = ETCH_MODULE_KERNELS_OPTIMIZED;
    o.sampler = etch_sampler_default_params();
    return o;
}

etch_llm_generate_params etch_llm_generate_default_params(void) {
    etch_llm_generate_params p;
    memset(&p, 0, sizeof p);
    p.max_new_tokens = -1;
    p.add_bos = true;
    return p;
}

const char *etch_llm_stop_reason_str(etch_llm_stop_reason reason) {
    switch (reason) {
    case ETCH_LLM_STOP_NONE: return "none";
    case ETCH_LLM_STOP_EOS: return "eos";
    case ETCH_LLM_STOP_STOP_ID: return "stop_id";
    case ETCH_LLM_STOP_MAX_TOKENS: return "max_tokens";
    case ETCH_LLM_STOP_CONTEXT_FULL: return "context_full";
    case ETCH_LLM_STOP_CANCELLED: return "cancelled";
    }
    return "unknown";
}

/* ---- metadata --------------------------------------------------------------------------- */

/* Run the metadata method `name`: *m is the method that ran, or NULL when the program has no
 * such method (ETCH_OK); an error when it exists but cannot be loaded or run. */
static etch_status run_meta(etch_llm_runner *r, const char *name, etch_method **m) {
    *m = NULL;
    etch_method_meta mm;
    if (etch_program_method_meta(etch_module_program(r->mod), name, &mm) != ETCH_OK) {
        etch_err_clear();
        return ETCH_OK;
    }
    etch_method *loaded;
    etch_status st = etch_module_load_method(r->mod, name, &loaded);
    if (st == ETCH_OK)
        st = etch_method_execute(loaded);
    if (st != ETCH_OK) {
        etch_err_prefix("metadata method %s", name);
        return st;
    }
    *m = loaded;
    return ETCH_OK;
}

/* Run a metadata method; its outputs as integers (Int or Bool). *count is the count read, 0
 * when the program has no such method. An error when it exists but cannot be read: its own
 * status (loading it may fail for memory: ETCH_ERR_MEMORY_ALLOCATION_FAILED is not an invalid
 * program, and a caller that retries must be able to tell; tests/faults). */
static etch_status read_meta(etch_llm_runner *r, const char *name, int64_t *vals, size_t cap,
                             int *count) {
    etch_method *m;
    *count = 0;
    etch_status st = run_meta(r, name, &m);
    if (st != ETCH_OK || !m)
        return st;
    size_t n = etch_method_num_outputs(m);
    if (n > cap)
        n = cap;
    for (size_t i = 0; i < n; i++) {
        if (!etch_value_scalar_to_int(etch_method_output(m, i), &vals[i]))
            return etch_err(ETCH_ERR_INVALID_PROGRAM,
                            "metadata method %s: output %zu is not an Int", name, i);
    }
    *count = (int)n;
    return ETCH_OK;
}

static etch_status load_kv_cache_dtype(etch_llm_runner *r);

static etch_status load_metadata(etch_llm_runner *r, const char *method) {
    etch_llm_metadata *md = &r->meta;
    etch_method_meta fm;
    etch_status st = etch_program_method_meta(etch_module_program(r->mod), method, &fm);
    if (st != ETCH_OK)
        return st;
    if (etch_method_meta_num_inputs(&fm) != 2 || etch_method_meta_num_outputs(&fm) != 1)
        return etch_err(ETCH_ERR_NOT_SUPPORTED,
                        "%s has %zu inputs and %zu outputs; the LLM runner needs "
                        "(tokens[1, T], start_pos[1]) -> logits",
                        method, etch_method_meta_num_inputs(&fm),
                        etch_method_meta_num_outputs(&fm));
    etch_value_info tin, pin, out;
    etch_method_meta_input(&fm, 0, &tin);
    etch_method_meta_input(&fm, 1, &pin);
    etch_method_meta_output(&fm, 0, &out);
    if (tin.tag != ETCH_VALUE_TENSOR || tin.dtype != ETCH_DTYPE_LONG || tin.dim != 2 ||
        tin.sizes[0] != 1 || tin.sizes[1] < 1)
        return etch_err(ETCH_ERR_NOT_SUPPORTED, "%s input 0 must be Long tokens [1, T]", method);
    if (pin.tag != ETCH_VALUE_TENSOR || pin.dtype != ETCH_DTYPE_LONG || pin.dim != 1 ||
        pin.sizes[0] != 1)
        return etch_err(ETCH_ERR_NOT_SUPPORTED, "%s input 1 must be Long start_pos [1]",
                        method);
    if (out.tag != ETCH_VALUE_TENSOR || out.dtype != ETCH_DTYPE_FLOAT ||
        (out.dim != 2 && out.dim != 3) || out.sizes[out.dim - 1] < 1)
        return etch_err(ETCH_ERR_NOT_SUPPORTED,
                        "%s output 0 must be Float logits [1, vocab] or [1, T, vocab]", method);

    int64_t v[ETCH_LLM_MAX_EOS_IDS];
    int n;
    md->vocab_size = out.sizes[out.dim - 1];
    md->max_seq_len = tin.sizes[1];
    md->enable_dynamic_shape = tin.dynamism != ETCH_SHAPE_STATIC;
    md->use_kv_cache = true;
    md->bos_id = etch_tokenizer_bos_id(r->tok);
    md->n_eos_ids = 0;
    if (etch_tokenizer_eos_id(r->tok) >= 0)
        md->eos_ids[md->n_eos_ids++] = etch_tokenizer_eos_id(r->tok);
    md->n_layers = 0;
    md->from_program = false;
    md->max_context_len = -1;
#define META1(name, field)                                                                 \
    do {                                                                                   \
        if ((st = read_meta(r, name, v, 1, &n)) != ETCH_OK)                                \
            return st;                                                                     \
        if (n == 1) {                                                                      \
            field = v[0];                                                                  \
            md->from_program = true;                                                       \
        }                                                                                  \
    } while (0)
    int64_t vocab = md->vocab_size, kv = 1, dyn = md->enable_dynamic_shape;
    META1("get_vocab_size", vocab);
    META1("get_max_seq_len", md->max_seq_len);
    META1("get_max_context_len", md->max_context_len);
    META1("get_bos_id", md->bos_id);
    META1("get_n_layers", md->n_layers);
    META1("use_kv_cache", kv);
    META1("enable_dynamic_shape", dyn);
    md->kv_cache_bytes_per_token = 0;
    if ((st = read_meta(r, "get_kv_cache_bytes_per_token", v, 1, &n)) != ETCH_OK)
        return st;
    if (n == 1 && (v[0] < 1 || v[0] > (int64_t)1 << 40))
        return etch_err(ETCH_ERR_INVALID_PROGRAM,
                        "get_kv_cache_bytes_per_token says %lld; expected 1 .. 2^40",
                        (long long)v[0]);
    if (n == 1)
        md->kv_cache_bytes_per_token = v[0];
    if ((st = load_kv_cache_dtype(r)) != ETCH_OK)
        return st;
#undef META1
    if ((st = read_meta(r, "get_eos_ids", v, ETCH_LLM_MAX_EOS_IDS, &n)) != ETCH_OK)
        return st;
    if (n > 0) {
        memcpy(md->eos_ids, v, (size_t)n * sizeof v[0]);
        md->n_eos_ids = (size_t)n;
    }
    md->use_kv_cache = kv != 0;
    md->enable_dynamic_shape = dyn != 0;
    if (md->max_context_len < 0)
        md->max_context_len = md->max_seq_len;
    if (!md->use_kv_cache)
        return etch_err(ETCH_ERR_NOT_SUPPORTED,
                        "the model has no KV cache (use_kv_cache is false); the runner needs "
                        "one");
    if (vocab != md->vocab_size)
        return etch_err(ETCH_ERR_INVALID_PROGRAM,
                        "get_vocab_size says %lld but %s returns %lld logits per position",
                        (long long)vocab, method, (long long)md->vocab_size);
    /* ExecuTorch's llama export bounds the tokens input at get_max_seq_len - 1
     * (Dim("token_dim", max=max_seq_len - 1)): a call then takes at most the bound. */
    if (md->max_seq_len > tin.sizes[1])
        md->max_seq_len = tin.sizes[1];
    if (md->max_seq_len < 1 || md->max_context_len < 1 ||
        md->max_context_len > (int64_t)1 << 30)
        return etch_err(ETCH_ERR_INVALID_PROGRAM,
                        "max_seq_len %lld / max_context_len %lld do not fit the %s input "
                        "bound %lld",
                        (long long)md->max_seq_len, (long long)md->max_context_len, method,
                        (long long)tin.sizes[1]);
    if (md->vocab_size > INT32_MAX)
        return etch_err(ETCH_ERR_NOT_SUPPORTED, "vocabulary of %lld ids",
                        (long long)md->vocab_size);
    /* Without dynamic shapes the tokens input has one fixed length: only 1 works for decode. */
    if (md->enable_dynamic_shape)
        r->chunk = md->max_seq_len;
    else if (tin.sizes[1] == 1)
        r->chunk = 1;
    else
        return etch_err(ETCH_ERR_NOT_SUPPORTED,
                        "%s takes exactly %lld tokens per call (no dynamic shape): decoding "
                        "one token at a time is impossible",
                        method, (long long)tin.sizes[1]);
    return ETCH_OK;
}

/* The tokenizer must not know ids the model has no logits for; llama2.c and sentencepiece
 * tokenizers are the model's vocabulary exactly. A byte-level one (tokenizer.json, tiktoken)
 * may have fewer when the model pads its embedding (GPT-2 to 50304, Qwen2 by a few hundred
 * rows): at most ETCH_LLM_MAX_PAD_IDS(nt) padded ids, which are never sampled (the sampler
 * only sees the tokenizer's ids). A tokenizer smaller than that is not this model's. */
static etch_status check_vocab(etch_llm_runner *r) {
    int64_t nt = etch_tokenizer_vocab_size(r->tok), nm = r->meta.vocab_size;
    etch_tokenizer_format f = etch_tokenizer_get_format(r->tok);
    bool exact = f == ETCH_TOKENIZER_LLAMA2C || f == ETCH_TOKENIZER_SENTENCEPIECE;
    if (nt > nm || (exact && nt != nm))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "the tokenizer has %lld ids but the model's vocabulary has %lld%s: "
                        "not this model's tokenizer",
                        (long long)nt, (long long)nm,
                        nt > nm ? "" : (f == ETCH_TOKENIZER_LLAMA2C
                                            ? " (a llama2.c tokenizer must match it exactly)"
                                            : " (a sentencepiece model must match it exactly)"));
    if (nm - nt > ETCH_LLM_MAX_PAD_IDS(nt))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "the tokenizer has %lld ids but the model's vocabulary has %lld: %lld "
                        "ids without text are more than a padded embedding has (at most %lld "
                        "for this tokenizer): not this model's tokenizer",
                        (long long)nt, (long long)nm, (long long)(nm - nt),
                        (long long)ETCH_LLM_MAX_PAD_IDS(nt));
    return ETCH_OK;
}

/* get_kv_cache_dtype: one String output of 1..15 letters, digits or '_' (copied into
 * md->kv_cache_dtype); absent: "". */
static etch_status load_kv_cache_dtype(etch_llm_runner *r) {
    static const char name[] = "get_kv_cache_dtype";
    etch_method *m;
    r->meta.kv_cache_dtype[0] = 0;
    etch_status st = run_meta(r, name, &m);
    if (st != ETCH_OK || !m)
        return st;
    const etch_value *v = etch_method_num_outputs(m) == 1 ? etch_method_output(m, 0) : NULL;
    bool ok = v && v->tag == ETCH_VALUE_STRING && v->u.str.ptr && v->u.str.len >= 1 &&
              v->u.str.len < sizeof r->meta.kv_cache_dtype;
    for (size_t i = 0; ok && i < v->u.str.len; i++) {
        const char c = v->u.str.ptr[i];
        ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '_';
    }
    if (!ok)
        return etch_err(ETCH_ERR_INVALID_PROGRAM,
                        "metadata method %s must return one String of 1 to %zu letters, "
                        "digits or '_'",
                        name, sizeof r->meta.kv_cache_dtype - 1);
    memcpy(r->meta.kv_cache_dtype, v->u.str.ptr, v->u.str.len);
    r->meta.kv_cache_dtype[v->u.str.len] = 0;
    return ETCH_OK;
}

/* get_chat_template: no inputs, 8 String outputs (etch_llm_chat_template's order), copied. */
static etch_status load_chat_template(etch_llm_runner *r) {
    static const char name[] = "get_chat_template";
    etch_method *m;
    etch_status st = run_meta(r, name, &m);
    if (st != ETCH_OK || !m)
        return st;
    enum { N = 8 };
    if (etch_method_num_outputs(m) != N)
        return etch_err(ETCH_ERR_INVALID_PROGRAM,
                        "metadata method %s has %zu outputs; a chat template has %d Strings",
                        name, etch_method_num_outputs(m), N);
    size_t total = 0;
    for (size_t i = 0; i < N; i++) {
        const etch_value *v = etch_method_output(m, i);
        if (!v || v->tag != ETCH_VALUE_STRING || (!v->u.str.ptr && v->u.str.len))
            return etch_err(ETCH_ERR_INVALID_PROGRAM,
                            "metadata method %s: output %zu is not a String", name, i);
        total += v->u.str.len + 1;
    }
    r->tmpl_text = malloc(total);
    if (!r->tmpl_text)
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "llm_runner_open: out of memory");
    const char **dst[N] = {&r->tmpl.conversation_prefix, &r->tmpl.system_prefix,
                           &r->tmpl.system_suffix,       &r->tmpl.user_prefix,
                           &r->tmpl.user_suffix,         &r->tmpl.assistant_prefix,
                           &r->tmpl.assistant_suffix,    &r->tmpl.default_system};
    char *p = r->tmpl_text;
    for (size_t i = 0; i < N; i++) {
        const etch_value *v = etch_method_output(m, i);
        size_t len = v->u.str.len;
        if (len)
            memcpy(p, v->u.str.ptr, len);
        p[len] = 0;
        if (strlen(p) != len)
            return etch_err(ETCH_ERR_INVALID_PROGRAM,
                            "metadata method %s: output %zu holds a NUL byte", name, i);
        *dst[i] = p;
        p += len + 1;
    }
    r->has_tmpl = true;
    return ETCH_OK;
}

/* ---- open / close ----------------------------------------------------------------------- */

/* From a file (model_path) or from memory (data, size; named "model buffer" in errors). */
static etch_status runner_open(const char *model_path, const void *data, size_t size,
                               etch_tokenizer *tok, const etch_llm_runner_options *opts,
                               etch_llm_runner **out);

etch_status etch_llm_runner_open(const char *model_path, etch_tokenizer *tok,
                                 const etch_llm_runner_options *opts, etch_llm_runner **out) {
    if (!model_path || !tok || !out)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "llm_runner_open: NULL argument");
    return runner_open(model_path, NULL, 0, tok, opts, out);
}

etch_status etch_llm_runner_open_buffer(const void *data, size_t size, etch_tokenizer *tok,
                                        const etch_llm_runner_options *opts,
                                        etch_llm_runner **out) {
    if (!data || !tok || !out)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "llm_runner_open_buffer: NULL argument");
    return runner_open(NULL, data, size, tok, opts, out);
}

static etch_status runner_open(const char *model_path, const void *data, size_t size,
                               etch_tokenizer *tok, const etch_llm_runner_options *opts,
                               etch_llm_runner **out) {
    etch_llm_runner_options o = opts ? *opts : etch_llm_runner_default_options();
    const char *method = o.method ? o.method : "forward";
    int64_t t0 = etch_llm_time_us();
    etch_llm_runner *r = calloc(1, sizeof *r);
    if (!r)
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "llm_runner_open: out of memory");
    r->tok = tok;
    r->pending = -1;
    r->num_threads = o.num_threads > 0 ? o.num_threads : 1;
    etch_module_options mo = etch_module_default_options();
    mo.load_mode = o.load_mode;
    if (o.temp_size)
        mo.temp_size = o.temp_size;
    mo.num_threads = o.num_threads;
    mo.kernels = o.kernels;
    mo.no_prepack = o.no_prepack;
    etch_status st = model_path ? etch_module_open(model_path, &mo, &r->mod)
                                : etch_module_open_buffer(data, size, &mo, &r->mod);
    if (st == ETCH_OK)
        r->num_threads = etch_module_num_threads(r->mod);
    if (st == ETCH_OK)
        st = load_metadata(r, method);
    if (st == ETCH_OK)
        st = check_vocab(r);
    if (st == ETCH_OK)
        st = load_chat_template(r);
    if (st == ETCH_OK)
        st = etch_module_load_method(r->mod, method, &r->forward);
    if (st == ETCH_OK)
        st = etch_sampler_open(&o.sampler, (int32_t)r->meta.vocab_size, &r->sampler);
    if (st != ETCH_OK) {
        etch_err_prefix("%s", model_path ? model_path : "model buffer");
        etch_llm_runner_close(r);
        return st;
    }
    r->ids_cap = (size_t)r->meta.max_context_len + 1;
    r->text_cap = etch_detokenizer_max_output(tok);
    if (r->text_cap < 16)
        r->text_cap = 16;
    r->tokens = malloc((size_t)r->chunk * sizeof *r->tokens);
    r->ids = malloc(r->ids_cap * sizeof *r->ids);
    r->hist = malloc((size_t)r->meta.max_context_len * sizeof *r->hist);
    r->logits = malloc((size_t)r->meta.vocab_size * sizeof *r->logits);
    r->text = malloc(r->text_cap);
    if (!r->tokens || !r->ids || !r->hist || !r->logits || !r->text) {
        etch_llm_runner_close(r);
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "llm_runner_open: out of memory");
    }
    etch_detokenizer_init(&r->detok, tok);
    r->stats.model_load_start_us = t0;
    r->stats.model_load_end_us = etch_llm_time_us();
    r->stats.num_threads = r->num_threads;
    *out = r;
    return ETCH_OK;
}

void etch_llm_runner_close(etch_llm_runner *r) {
    if (!r)
        return;
    etch_sampler_close(r->sampler);
    etch_module_close(r->mod);
    free(r->tokens);
    free(r->ids);
    free(r->hist);
    free(r->tmpl_text);
    free(r->logits);
    free(r->text);
    free(r);
}

const etch_llm_metadata *etch_llm_runner_metadata(const etch_llm_runner *r) {
    return r ? &r->meta : NULL;
}

void etch_llm_runner_set_interrupt(etch_llm_runner *r, etch_interrupt_fn fn, void *user_data) {
    if (r && r->forward)
        etch_method_set_interrupt(r->forward, fn, user_data);
}

etch_status etch_llm_runner_set_sampler(etch_llm_runner *r, const etch_sampler_params *params) {
    if (!r || !params)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "llm_runner_set_sampler: NULL argument");
    etch_sampler *s;
    etch_status st = etch_sampler_open(params, (int32_t)r->meta.vocab_size, &s);
    if (st != ETCH_OK)
        return st;
    etch_sampler_close(r->sampler);
    r->sampler = s;
    return ETCH_OK;
}

void etch_llm_runner_reset(etch_llm_runner *r) {
    if (!r)
        return;
    r->pos = 0;
    r->pending = -1;
    etch_detokenizer_init(&r->detok, r->tok);
}

int64_t etch_llm_runner_position(const etch_llm_runner *r) { return r ? r->pos : 0; }
int32_t etch_llm_runner_pending_token(const etch_llm_runner *r) { return r ? r->pending : -1; }
const etch_llm_stats *etch_llm_runner_stats(const etch_llm_runner *r) {
    return r ? &r->stats : NULL;
}
uint64_t etch_llm_runner_num_forward_calls(const etch_llm_runner *r) {
    return r ? r->forward_calls : 0;
}
const int32_t *etch_llm_runner_context(const etch_llm_runner *r, size_t *n) {
    if (n)
        *n = r ? (size_t)r->pos : 0;
    return r ? r->hist : NULL;
}
void etch_llm_runner_discard_pending(etch_llm_runner *r) {
    if (r)
        r->pending = -1;
}
const etch_llm_chat_template *etch_llm_runner_chat_template(const etch_llm_runner *r) {
    return r && r->has_tmpl ? &r->tmpl : NULL;
}

/* ---- generation ------------------------------------------------------------------------- */

/* One forward call over tokens[0..n) (already in r->tokens) at r->pos; copies the last
 * position's logits into r->logits. */
static etch_status forward(etch_llm_runner *r, int64_t n) {
    int64_t tsz[2] = {1, n}, psz[1] = {1};
    int64_t start = r->pos;
    etch_tensor t, p;
    etch_status st = etch_tensor_init(&t, ETCH_DTYPE_LONG, 2, tsz, r->tokens);
    if (st == ETCH_OK)
        st = etch_tensor_init(&p, ETCH_DTYPE_LONG, 1, psz, &start);
    if (st == ETCH_OK)
        st = etch_method_set_input_tensor(r->forward, 0, &t);
    if (st == ETCH_OK)
        st = etch_method_set_input_tensor(r->forward, 1, &p);
    if (st == ETCH_OK)
        st = etch_method_execute(r->forward);
    if (st != ETCH_OK) {
        etch_err_prefix("forward at position %lld, %lld tokens", (long long)start,
                        (long long)n);
        return st;
    }
    r->forward_calls++;
    for (int64_t i = 0; i < n; i++)
        r->hist[start + i] = (int32_t)r->tokens[i];
    r->pos += n;
    const etch_value *ov = etch_method_output(r->forward, 0);
    const etch_tensor *o = ov && ov->tag == ETCH_VALUE_TENSOR ? ov->u.tensor : NULL;
    int64_t vocab = r->meta.vocab_size;
    if (!o || o->dtype != ETCH_DTYPE_FLOAT || o->dim < 1 || o->sizes[o->dim - 1] != vocab ||
        !etch_tensor_is_contiguous(o) || etch_tensor_numel(o) < vocab)
        return etch_err(ETCH_ERR_INVALID_PROGRAM,
                        "forward's output is not Float logits with %lld columns",
                        (long long)vocab);
    const float *row = (const float *)o->data + (etch_tensor_numel(o) - vocab);
    memcpy(r->logits, row, (size_t)vocab * sizeof *r->logits);
    return ETCH_OK;
}

/* Feed ids[0..n) to the model in chunks. */
static etch_status prefill(etch_llm_runner *r, const int32_t *ids, size_t n) {
    size_t done = 0;
    while (done < n) {
        size_t k = n - done;
        if ((int64_t)k > r->chunk)
            k = (size_t)r->chunk;
        for (size_t i = 0; i < k; i++)
            r->tokens[i] = ids[done + i];
        etch_status st = forward(r, (int64_t)k);
        if (st != ETCH_OK)
            return st;
        done += k;
    }
    return ETCH_OK;
}

etch_status etch_llm_runner_shift(etch_llm_runner *r, size_t keep, size_t drop) {
    if (!r)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "llm_runner_shift: NULL argument");
    size_t pos = (size_t)r->pos;
    if (keep > pos || drop > pos - keep)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "llm_runner_shift: dropping %zu tokens after %zu leaves the %zu-token "
                        "context",
                        drop, keep, pos);
    if (drop == 0)
        return ETCH_OK;
    size_t rest = pos - keep - drop;
    memmove(r->hist + keep, r->hist + keep + drop, rest * sizeof *r->hist);
    r->pos = (int64_t)keep;
    /* prefill reads hist[keep + i] and forward writes the same id back to the same place */
    etch_status st = prefill(r, r->hist + keep, rest);
    if (st != ETCH_OK) {
        r->pos = 0;
        r->pending = -1;
    }
    return st;
}

static bool in_list(int32_t id, const int64_t *l, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (l[i] == id)
            return true;
    return false;
}

static bool in_list32(int32_t id, const int32_t *l, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (l[i] == id)
            return true;
    return false;
}

/* Detokenize one id into r->text; its length (0 for ids the tokenizer does not know). */
static size_t detok(etch_llm_runner *r, int32_t id) {
    size_t len = 0;
    if (etch_detokenizer_feed(&r->detok, id, r->text, r->text_cap, &len) != ETCH_OK) {
        etch_err_clear();
        return 0;
    }
    return len;
}

static void finish(etch_llm_runner *r, etch_llm_result *res, const etch_llm_result *loc) {
    r->stats.inference_end_us = etch_llm_time_us();
    if (r->stats.first_token_us == 0)
        r->stats.first_token_us = r->stats.prompt_eval_end_us;
    r->stats.peak_rss_bytes = etch_llm_peak_rss_bytes();
    if (res) {
        *res = *loc;
        res->position = r->pos;
    }
}

/* Generate after the prompt ids[0..n) (the pending token and BOS are added here). The prompt
 * text (echo of generate()) is streamed before when given. */
static etch_status run(etch_llm_runner *r, const int32_t *ids, size_t n,
                       const etch_llm_generate_params *gp, const char *echo_text,
                       size_t echo_len, etch_llm_result *res) {
    etch_llm_result loc;
    memset(&loc, 0, sizeof loc);
    loc.stop_id = -1;
    etch_llm_stats *s = &r->stats;
    bool bos = gp->add_bos && r->pos == 0 && r->pending < 0 && r->meta.bos_id >= 0;
    size_t extra = (r->pending >= 0) + (size_t)bos;
    size_t total = n + extra;
    if (total == 0) {
        finish(r, res, &loc);
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "nothing to prefill: an empty prompt in an empty context without BOS");
    }
    if ((int64_t)total > r->meta.max_context_len - r->pos) {
        loc.stop_reason = ETCH_LLM_STOP_CONTEXT_FULL;
        finish(r, res, &loc);
        return etch_err(ETCH_ERR_OUT_OF_RESOURCES,
                        "the prompt needs %zu positions at position %lld of a %lld-token "
                        "context; reset the runner",
                        total, (long long)r->pos, (long long)r->meta.max_context_len);
    }
    /* The ids buffer holds the whole prefill: pending, BOS, prompt (ids may already be in the
     * buffer, at offset `extra`, when they came from the tokenizer). */
    if (n && ids != r->ids + extra)
        memmove(r->ids + extra, ids, n * sizeof *ids);
    size_t k = 0;
    if (r->pending >= 0)
        r->ids[k++] = r->pending;
    if (bos)
        r->ids[k++] = (int32_t)r->meta.bos_id;
    /* Text: the prompt goes through the detokenizer (the pending token already did), streamed
     * only with echo. */
    for (size_t i = (r->pending >= 0); i < total; i++) {
        size_t len = detok(r, r->ids[i]);
        if (gp->echo && !echo_text && gp->on_token && i >= extra)
            gp->on_token(gp->user_data, r->ids[i], r->text, len);
    }
    if (gp->echo && echo_text && gp->on_token)
        gp->on_token(gp->user_data, -1, echo_text, echo_len);
    r->pending = -1;
    etch_status st = prefill(r, r->ids, total);
    s->prompt_eval_end_us = etch_llm_time_us();
    loc.prompt_tokens = (int64_t)total;
    s->prompt_tokens = loc.prompt_tokens;
    if (st == ETCH_ERR_CANCELLED) { /* the interrupt: the chunks fed so far stay */
        loc.stop_reason = ETCH_LLM_STOP_CANCELLED;
        finish(r, res, &loc);
        return ETCH_OK;
    }
    if (st != ETCH_OK) {
        finish(r, res, &loc);
        return st;
    }
    if (gp->max_new_tokens == 0) {
        loc.stop_reason = ETCH_LLM_STOP_MAX_TOKENS;
        finish(r, res, &loc);
        return ETCH_OK;
    }
    /* only the tokenizer's ids: the rows of a padded embedding past them are never sampled */
    int32_t vocab = (int32_t)r->meta.vocab_size, n_tok = etch_tokenizer_vocab_size(r->tok);
    int32_t n_sample = n_tok < vocab ? n_tok : vocab;
    for (;;) {
        int64_t t0 = etch_llm_time_us();
        int32_t id = etch_sampler_sample(r->sampler, r->logits, n_sample);
        int64_t t1 = etch_llm_time_us();
        s->aggregate_sampling_time_us += t1 - t0;
        if (id < 0) {
            finish(r, res, &loc);
            return etch_err(ETCH_ERR_INTERNAL, "the sampler found no token (NaN logits?)");
        }
        loc.generated_tokens++;
        s->generated_tokens = loc.generated_tokens;
        if (loc.generated_tokens == 1)
            s->first_token_us = t1;
        r->pending = id;
        if (!gp->ignore_eos && in_list(id, r->meta.eos_ids, r->meta.n_eos_ids)) {
            loc.stop_reason = ETCH_LLM_STOP_EOS;
            loc.stop_id = id;
            break;
        }
        if (in_list32(id, gp->stop_ids, gp->stop_ids ? gp->n_stop_ids : 0)) {
            loc.stop_reason = ETCH_LLM_STOP_STOP_ID;
            loc.stop_id = id;
            break;
        }
        size_t len = detok(r, id);
        if (gp->on_token && gp->on_token(gp->user_data, id, r->text, len) != 0) {
            loc.stop_reason = ETCH_LLM_STOP_CANCELLED;
            break;
        }
        if (gp->max_new_tokens > 0 && loc.generated_tokens >= gp->max_new_tokens) {
            loc.stop_reason = ETCH_LLM_STOP_MAX_TOKENS;
            break;
        }
        if (r->pos >= r->meta.max_context_len) {
            loc.stop_reason = ETCH_LLM_STOP_CONTEXT_FULL;
            break;
        }
        r->tokens[0] = id;
        r->pending = -1;
        st = forward(r, 1);
        if (st == ETCH_ERR_CANCELLED) { /* the interrupt: the token is fed by the next call */
            r->pending = id;
            loc.stop_reason = ETCH_LLM_STOP_CANCELLED;
            break;
        }
        if (st != ETCH_OK) {
            finish(r, res, &loc);
            return st;
        }
    }
    finish(r, res, &loc);
    return ETCH_OK;
}

static void begin(etch_llm_runner *r) {
    etch_llm_stats *s = &r->stats;
    int64_t ls = s->model_load_start_us, le = s->model_load_end_us;
    memset(s, 0, sizeof *s);
    s->model_load_start_us = ls;
    s->model_load_end_us = le;
    s->num_threads = r->num_threads;
    s->inference_start_us = etch_llm_time_us();
}

etch_status etch_llm_runner_generate(etch_llm_runner *r, const char *prompt, size_t len,
                                     const etch_llm_generate_params *params,
                                     etch_llm_result *result) {
    if (result) {
        memset(result, 0, sizeof *result);
        result->stop_id = -1;
    }
    if (!r || (!prompt && len))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "llm_runner_generate: NULL argument");
    etch_llm_generate_params gp = params ? *params : etch_llm_generate_default_params();
    begin(r);
    size_t extra = (r->pending >= 0) +
                   (size_t)(gp.add_bos && r->pos == 0 && r->pending < 0 && r->meta.bos_id >= 0);
    size_t n = 0;
    if (len) {
        etch_status st = etch_tokenizer_encode(r->tok, prompt, len, 0, r->ids + extra,
                                               r->ids_cap - extra, &n);
        if (st == ETCH_ERR_OUT_OF_RESOURCES) {
            if (result) {
                result->stop_reason = ETCH_LLM_STOP_CONTEXT_FULL;
                result->position = r->pos;
            }
            return etch_err(ETCH_ERR_OUT_OF_RESOURCES,
                            "the prompt is %zu tokens, more than the %lld-token context", n,
                            (long long)r->meta.max_context_len);
        }
        if (st != ETCH_OK)
            return st;
    }
    r->stats.token_encode_end_us = etch_llm_time_us();
    return run(r, r->ids + extra, n, &gp, prompt, len, result);
}

etch_status etch_llm_runner_generate_ids(etch_llm_runner *r, const int32_t *ids, size_t n,
                                         const etch_llm_generate_params *params,
                                         etch_llm_result *result) {
    if (result) {
        memset(result, 0, sizeof *result);
        result->stop_id = -1;
    }
    if (!r || (!ids && n))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "llm_runner_generate_ids: NULL argument");
    etch_llm_generate_params gp = params ? *params : etch_llm_generate_default_params();
    begin(r);
    r->stats.token_encode_end_us = r->stats.inference_start_us;
    if (n > r->ids_cap - 2) {
        if (result) {
            result->stop_reason = ETCH_LLM_STOP_CONTEXT_FULL;
            result->position = r->pos;
        }
        return etch_err(ETCH_ERR_OUT_OF_RESOURCES,
                        "the prompt is %zu tokens, more than the %lld-token context", n,
                        (long long)r->meta.max_context_len);
    }
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= r->meta.vocab_size)
            return etch_err(ETCH_ERR_INVALID_ARGUMENT, "prompt id %d outside the vocabulary",
                            (int)ids[i]);
    return run(r, ids, n, &gp, NULL, 0, result);
}
