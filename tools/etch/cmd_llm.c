/* etch llm — generate text with a language model (.pte) and a tokenizer; stdout carries only
 * the text, streamed (or, with --json, one JSON object per generation); logs and the
 * statistics go to stderr. */
#define _GNU_SOURCE /* memmem */
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_store.h"
#include "cli_util.h"
#include "commands.h"
#include "embedded_model.h"
#include "etch/llm.h"
#include "etch/llm_runner.h"
#include "llm_policy.h"

#define MAX_STOP_IDS 64
#define MAX_STOP_STRS 16

void cmd_llm_usage(FILE *out) {
    fprintf(out,
            "usage: etch llm [--model M.pte --tokenizer T | --model NAME] [options]\n"
            "       etch llm --models A.pte[:TOK],B.pte[:TOK],... [options]\n"
            "\n"
            "Generate text with a decoder exported by 'python3 -m etch.llm export' (KV cache\n"
            "inside the program). Without --prompt, generation starts from BOS. stdout carries\n"
            "only the text (the prompt first), streamed as it is produced; logs and the\n"
            "statistics go to stderr: after a --prompt run a report and the line\n"
            "'PyTorchObserver {...}' (ExecuTorch's keys), in --chat one line per turn.\n"
            "\n"
            "options:\n"
            "  --model FILE|NAME      the program (.pte), or a model in the store (etch model):\n"
            "                         its current version, else its previous one. Without\n"
            "                         --model: the store's model 'default', else the model\n"
            "                         built into etch (stderr says which, and why)\n"
            "  --tokenizer FILE       llama2.c tokenizer.bin, sentencepiece .model,\n"
            "                         tokenizer.json or tiktoken ranks (default for a stored\n"
            "                         or built-in model: its own)\n"
            CLI_HELP_STORE
            "  --prompt TEXT          text to continue (default: start from BOS); with a chat\n"
            "                         template (or --system), one user turn: only the reply\n"
            "                         is printed\n"
            "  --raw                  ignore the program's chat template: the prompt (or each\n"
            "                         --chat line) is plain text to continue, after BOS\n"
            "  --system TEXT          the system prompt of the program's chat template\n"
            "                         (get_chat_template; default: the template's own)\n"
            "  --max-new-tokens N     tokens to generate at most (default: until EOS or the\n"
            "                         context is full); a --prompt run longer than the context\n"
            "                         drops the oldest half of the text and goes on\n"
            "  --temperature X        0 = greedy (default 0.8)\n"
            "  --top-k K              keep the K most likely tokens (default 0: all)\n"
            "  --top-p P              nucleus sampling mass in (0, 1] (default 0.9)\n"
            "  --seed S               sampler seed (default 0)\n"
            "  --stop-ids A,B,...     ids that also end generation (besides the model's EOS)\n"
            "  --stop STR             end generation when the text reaches STR (not printed;\n"
            "                         repeatable, up to 16)\n"
            "  --ignore-eos           do not stop on the model's EOS ids\n"
            "  --chat                 read turns from stdin, one per line; the KV cache is kept\n"
            "                         across turns (only each new turn is prefilled); each reply\n"
            "                         ends with a newline on stdout. With a chat template the\n"
            "                         turns are formatted with it. When the context fills, the\n"
            "                         oldest turns are dropped (the system prompt stays); a\n"
            "                         turn that cannot fit, or a line holding a NUL byte, is\n"
            "                         skipped with a message\n"
            "  --quiet                no model line, report or statistics on stderr\n"
            "  --stats                in --chat, the full report and the PyTorchObserver line\n"
            "                         after each turn (instead of one line)\n"
            "  --json                 print one JSON object per generation on stdout instead\n"
            "                         of the text (--chat: one per line): text, token counts,\n"
            "                         stop reason, the statistics\n"
            "  --print-tokens         after each generation print the ids in the context\n"
            "                         ('context: ...') and the pending one to stderr\n"
            LLM_POLICY_HELP
            "  --load-mode MODE       mmap (default) or read\n"
            CLI_HELP_THREADS_KERNELS
            "  --no-prepack           do not prepack the weights at load: slower prefill and\n"
            "                         decode; saves memory only with --load-mode read (mmap\n"
            "                         gives the packed weights' pages back)\n"
            "  -h, --help             show this help\n"
            "\n"
            "Exit status: 0 success, 1 failure, 2 bad usage.\n");
}

typedef struct llm_opts {
    const char *model, *tokenizer, *prompt, *system, *max_new, *temperature, *top_k, *top_p,
        *seed;
    const char *stop_ids_s, *threads, *load_mode, *kernels_s, *store;
    llm_policy_flags policy; /* --models and its budget flags (llm_policy.h) */
    const char *stops[MAX_STOP_STRS];
    size_t n_stops;
    etch_module_kernels kernels;
    int nthreads;
    bool chat, ignore_eos, no_prepack, quiet, stats, json, print_tokens, raw;
    long long max_new_tokens, k, s;
    double temp, p;
    int32_t stop_ids[MAX_STOP_IDS];
    size_t n_stop;
    etch_load_mode mode;
} llm_opts;

static int parse_stop_ids(const char *s, llm_opts *o) {
    const char *p = s;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v > INT32_MAX || (*end && *end != ',') ||
            o->n_stop == MAX_STOP_IDS)
            return cli_usage_error("llm", "--stop-ids: expected up to %d comma-separated ids, "
                                          "got '%s'",
                                   MAX_STOP_IDS, s);
        o->stop_ids[o->n_stop++] = (int32_t)v;
        p = *end ? end + 1 : end;
    }
    return CLI_OK;
}

static int parse_args(int argc, char **argv, llm_opts *o) {
    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i++) {
        int r;
        const char *stop = NULL;
        if ((r = cli_opt_value("llm", argc, argv, &i, "--stop", &stop)) > 0) {
            if (o->n_stops == MAX_STOP_STRS)
                return cli_usage_error("llm", "--stop: at most %d strings", MAX_STOP_STRS);
            o->stops[o->n_stops++] = stop;
            continue;
        }
        if (r < 0 ||
            (r = cli_opt_value("llm", argc, argv, &i, "--model", &o->model)) ||
            (r = cli_opt_value("llm", argc, argv, &i, "--tokenizer", &o->tokenizer)) ||
            (r = cli_opt_value("llm", argc, argv, &i, "--store", &o->store)) ||
            (r = cli_opt_value("llm", argc, argv, &i, "--prompt", &o->prompt)) ||
            (r = cli_opt_value("llm", argc, argv, &i, "--system", &o->system)) ||
            (r = cli_opt_value("llm", argc, argv, &i, "--max-new-tokens", &o->max_new)) ||
            (r = cli_opt_value("llm", argc, argv, &i, "--temperature", &o->temperature)) ||
            (r = cli_opt_value("llm", argc, argv, &i, "--top-k", &o->top_k)) ||
            (r = cli_opt_value("llm", argc, argv, &i, "--top-p", &o->top_p)) ||
            (r = cli_opt_value("llm", argc, argv, &i, "--seed", &o->seed)) ||
            (r = cli_opt_value("llm", argc, argv, &i, "--stop-ids", &o->stop_ids_s)) ||
            (r = cli_opt_value("llm", argc, argv, &i, "--cpu-threads", &o->threads)) ||
            (r = cli_opt_value("llm", argc, argv, &i, "--load-mode", &o->load_mode)) ||
            (r = cli_opt_value("llm", argc, argv, &i, "--kernels", &o->kernels_s)) ||
            (r = cli_opt_value("llm", argc, argv, &i, "--models", &o->policy.models)) ||
            (r = cli_opt_value("llm", argc, argv, &i, "--latency-budget-ms",
                               &o->policy.latency_budget)) ||
            (r = cli_opt_value("llm", argc, argv, &i, "--cooldown-ms", &o->policy.cooldown)) ||
            (r = cli_opt_value("llm", argc, argv, &i, "--thermal-trace", &o->policy.trace)) ||
            (r = cli_opt_flag("llm", argv, i, "--chat", &o->chat)) ||
            (r = cli_opt_flag("llm", argv, i, "--ignore-eos", &o->ignore_eos)) ||
            (r = cli_opt_flag("llm", argv, i, "--raw", &o->raw)) ||
            (r = cli_opt_flag("llm", argv, i, "--no-prepack", &o->no_prepack)) ||
            (r = cli_opt_flag("llm", argv, i, "--quiet", &o->quiet)) ||
            (r = cli_opt_flag("llm", argv, i, "--stats", &o->stats)) ||
            (r = cli_opt_flag("llm", argv, i, "--json", &o->json)) ||
            (r = cli_opt_flag("llm", argv, i, "--print-tokens", &o->print_tokens))) {
            if (r < 0)
                return CLI_USAGE;
            continue;
        }
        if (argv[i][0] == '-' && argv[i][1])
            return cli_usage_error("llm", "unknown option '%s'", argv[i]);
        return cli_usage_error("llm", "unexpected argument '%s' (the prompt goes in --prompt)",
                               argv[i]);
    }
    o->policy.tokenizer = o->tokenizer;
    if (o->model && o->policy.models)
        return cli_usage_error("llm", "--models replaces --model; give one of them");
    if (o->store && o->policy.models)
        return cli_usage_error("llm", "--store goes with --model NAME (--models takes files)");
    /* a --model that is a file needs its tokenizer; a store name or no --model has its own */
    if (!o->policy.models && o->model &&
        (cli_is_path(o->model) || !etch_store_name_valid(o->model)) && !o->tokenizer)
        return cli_usage_error("llm", "missing --tokenizer");
    if (llm_policy_check(&o->policy) != CLI_OK)
        return CLI_USAGE;
    if (o->chat && o->prompt)
        return cli_usage_error("llm", "--chat reads the turns from stdin; drop --prompt");
    if (o->raw && o->system)
        return cli_usage_error("llm", "--raw leaves the chat template out; --system needs it");
    if (o->quiet && o->stats)
        return cli_usage_error("llm", "--quiet and --stats contradict each other");
    o->max_new_tokens = -1;
    o->temp = 0.8;
    o->p = 0.9;
    o->nthreads = cli_default_threads();
    if (o->max_new &&
        !cli_parse_long("llm", "--max-new-tokens", o->max_new, 0, INT32_MAX, &o->max_new_tokens))
        return CLI_USAGE;
    if (o->temperature &&
        !cli_parse_double("llm", "--temperature", o->temperature, 0.0, 1e6, &o->temp))
        return CLI_USAGE;
    if (o->top_k && !cli_parse_long("llm", "--top-k", o->top_k, 0, INT32_MAX, &o->k))
        return CLI_USAGE;
    if (o->top_p && !cli_parse_double("llm", "--top-p", o->top_p, 0.0, 1.0, &o->p))
        return CLI_USAGE;
    if (o->top_p && o->p <= 0.0)
        return cli_usage_error("llm", "--top-p must be in (0, 1], got '%s'", o->top_p);
    if (o->seed && !cli_parse_long("llm", "--seed", o->seed, 0, INT64_MAX, &o->s))
        return CLI_USAGE;
    if (o->threads && !cli_parse_threads("llm", o->threads, &o->nthreads))
        return CLI_USAGE;
    o->kernels = ETCH_MODULE_KERNELS_OPTIMIZED;
    if (o->kernels_s && !cli_parse_kernels("llm", o->kernels_s, &o->kernels))
        return CLI_USAGE;
    if (o->stop_ids_s && parse_stop_ids(o->stop_ids_s, o) != CLI_OK)
        return CLI_USAGE;
    o->mode = ETCH_LOAD_MMAP;
    if (o->load_mode) {
        if (strcmp(o->load_mode, "read") == 0)
            o->mode = ETCH_LOAD_READ;
        else if (strcmp(o->load_mode, "mmap") != 0)
            return cli_usage_error("llm", "--load-mode: '%s' is neither 'mmap' nor 'read'",
                                   o->load_mode);
    }
    return CLI_OK;
}

/* Ctrl-C cancels the current generation (through the token callback). */
static volatile sig_atomic_t interrupted;
static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

/* ---- text out: streaming, stop strings, the --json buffer -------------------------------- */

typedef struct buf {
    char *p;
    size_t len, cap;
} buf;

static bool buf_add(buf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (b->len + n + 1 > cap)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p)
            return false;
        b->p = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return true;
}

/* One reply's text on its way out. */
typedef struct stream {
    const llm_opts *o;
    bool last_newline; /* the last byte written was '\n' (or nothing was written) */
    bool stop_string;  /* a --stop string ended the reply */
    bool oom;
    buf held;          /* text not written yet: it may be the start of a stop string */
    buf text;          /* --json: the reply's text */
} stream;

static void emit(stream *s, const char *t, size_t n) {
    if (!n)
        return;
    if (s->o->json) {
        s->oom |= !buf_add(&s->text, t, n);
    } else {
        fwrite(t, 1, n, stdout);
        fflush(stdout);
    }
    s->last_newline = t[n - 1] == '\n';
}

/* The longest end of t[0..n) that begins some stop string (and is not all of it). */
static size_t stop_prefix_tail(const llm_opts *o, const char *t, size_t n) {
    size_t best = 0;
    for (size_t k = 0; k < o->n_stops; k++) {
        size_t sl = strlen(o->stops[k]);
        for (size_t l = sl - 1 < n ? sl - 1 : n; l > best; l--)
            if (memcmp(t + n - l, o->stops[k], l) == 0) {
                best = l;
                break;
            }
    }
    return best;
}

static int on_token(void *user_data, int32_t id, const char *text, size_t len) {
    stream *s = (stream *)user_data;
    if (id < 0 || s->o->n_stops == 0) { /* the echoed prompt is never a stop */
        emit(s, text, len);
        return interrupted ? 1 : 0;
    }
    if (!buf_add(&s->held, text, len)) {
        s->oom = true;
        return 1;
    }
    const char *first = NULL;
    for (size_t k = 0; k < s->o->n_stops; k++) {
        const char *at = memmem(s->held.p, s->held.len, s->o->stops[k], strlen(s->o->stops[k]));
        if (at && (!first || at < first))
            first = at;
    }
    if (first) {
        emit(s, s->held.p, (size_t)(first - s->held.p));
        s->held.len = 0;
        s->stop_string = true;
        return 1;
    }
    size_t keep = stop_prefix_tail(s->o, s->held.p, s->held.len);
    emit(s, s->held.p, s->held.len - keep);
    memmove(s->held.p, s->held.p + s->held.len - keep, keep);
    s->held.len = keep;
    return interrupted ? 1 : 0;
}

static int oom(void) {
    fflush(stdout);
    fputs("error: MemoryAllocationFailed: out of memory\n", stderr);
    return CLI_FAIL;
}

/* ---- the conversation -------------------------------------------------------------------- */

typedef struct llm_ctx {
    const llm_opts *o;
    etch_llm_runner *r;
    etch_tokenizer *tok;
    const etch_llm_chat_template *tmpl; /* NULL: plain text */
    int64_t window;                     /* max_context_len */
    int32_t *ids;                       /* [window + 1] a turn's ids */
    int32_t *prefix;                    /* conversation_prefix + system, template only */
    size_t n_prefix;
    int32_t *suffix;                    /* assistant_suffix, template only */
    size_t n_suffix;
    size_t keep;                        /* context positions never dropped */
    size_t *turns;                      /* positions where the kept turns begin */
    size_t n_turns, cap_turns;
    bool started;                       /* the first turn was prefilled */
    etch_llm_stop_reason last_stop;     /* of the last reply */
    etch_llm_stats last_stats;          /* of the last reply (all its generate calls) */
} llm_ctx;

/* One reply over possibly several generate calls (context shifts between them). */
typedef struct reply {
    etch_llm_stats st;
    etch_llm_result res;
    int shifts;
    bool have;
} reply;

static void reply_add(reply *rp, const etch_llm_stats *s, const etch_llm_result *res) {
    if (!rp->have) {
        rp->st = *s;
        rp->res = *res;
        rp->have = true;
        return;
    }
    rp->st.inference_end_us = s->inference_end_us;
    rp->st.generated_tokens += s->generated_tokens;
    rp->st.aggregate_sampling_time_us += s->aggregate_sampling_time_us;
    rp->st.peak_rss_bytes = s->peak_rss_bytes;
    if (rp->res.generated_tokens == 0)
        rp->st.first_token_us = s->first_token_us;
    rp->res.generated_tokens += res->generated_tokens;
    rp->res.stop_reason = res->stop_reason;
    rp->res.stop_id = res->stop_id;
    rp->res.position = res->position;
}

static const char *reason_str(const stream *s, const reply *rp) {
    return s->stop_string ? "stop_string" : etch_llm_stop_reason_str(rp->res.stop_reason);
}

static void note(const llm_opts *o, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void note(const llm_opts *o, const char *fmt, ...) {
    if (o->quiet)
        return;
    fflush(stdout);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

/* Encode text onto ids[*n..cap); template text with its special tokens, the user's without.
 * ETCH_ERR_OUT_OF_RESOURCES when it does not fit (*n still counts all of it). */
static etch_status encode_more(llm_ctx *c, const char *text, bool special, int32_t *ids,
                               size_t cap, size_t *n) {
    size_t k = 0;
    if (!*text)
        return ETCH_OK;
    etch_status st = etch_tokenizer_encode(c->tok, text, strlen(text),
                                           special ? ETCH_TOKENIZER_PARSE_SPECIAL : 0,
                                           ids + (*n < cap ? *n : cap),
                                           *n < cap ? cap - *n : 0, &k);
    *n += k;
    return st;
}

static etch_status drop(llm_ctx *c, size_t upto, size_t n_turns_dropped) {
    etch_status st = etch_llm_runner_shift(c->r, c->keep, upto - c->keep);
    if (st != ETCH_OK)
        return st;
    size_t d = upto - c->keep;
    for (size_t i = n_turns_dropped; i < c->n_turns; i++)
        c->turns[i - n_turns_dropped] = c->turns[i] - d;
    c->n_turns -= n_turns_dropped;
    return ETCH_OK;
}

/* The context is full in the middle of a reply: make room to go on. False: the reply ends. */
static bool shift_in_reply(llm_ctx *c, etch_status *st) {
    const llm_opts *o = c->o;
    size_t pos = (size_t)etch_llm_runner_position(c->r);
    *st = ETCH_OK;
    if (o->chat) {
        if (c->n_turns < 2)
            return false; /* only this turn: it ends here */
        /* drop the oldest turns until a quarter of the window is free (or one turn is left) */
        size_t j = 1;
        while (j < c->n_turns - 1 && (int64_t)(pos - (c->turns[j] - c->keep)) >
                                         c->window - c->window / 4)
            j++;
        size_t upto = c->turns[j];
        note(o, "context full: dropped the %zu oldest turn%s (%zu tokens)\n", j,
             j == 1 ? "" : "s", upto - c->keep);
        *st = drop(c, upto, j);
        return *st == ETCH_OK;
    }
    if (o->max_new_tokens < 0 || pos <= c->keep + 1)
        return false; /* no limit asked for: stop at the end of the context, as always */
    size_t d = (pos - c->keep) / 2;
    note(o, "context full: dropped the oldest %zu tokens\n", d);
    *st = etch_llm_runner_shift(c->r, c->keep, d);
    return *st == ETCH_OK;
}

static void print_tokens(llm_ctx *c) {
    size_t n;
    const int32_t *h = etch_llm_runner_context(c->r, &n);
    fflush(stdout);
    fputs("context:", stderr);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, " %d", (int)h[i]);
    fprintf(stderr, "\npending: %d\n", (int)etch_llm_runner_pending_token(c->r));
}

static void report_full(const reply *rp, const stream *s) {
    char b[1024];
    etch_llm_stats_report(&rp->st, b, sizeof b);
    fprintf(stderr, "stop: %s%s", reason_str(s, rp), rp->res.stop_id >= 0 ? " (id " : "");
    if (rp->res.stop_id >= 0)
        fprintf(stderr, "%d)", (int)rp->res.stop_id);
    fprintf(stderr, ", context %lld tokens\n%s", (long long)rp->res.position, b);
    etch_llm_stats_json(&rp->st, b, sizeof b);
    fprintf(stderr, "%s\n", b);
}

static void report_line(const llm_ctx *c, const reply *rp, const stream *s) {
    const etch_llm_stats *st = &rp->st;
    int64_t decode = st->inference_end_us - st->prompt_eval_end_us;
    fprintf(stderr, "[%lld tokens, %.1f tokens/s, first token %.0f ms, context %lld/%lld, %s]\n",
            (long long)st->generated_tokens,
            decode > 0 ? (double)st->generated_tokens * 1e6 / (double)decode : 0.0,
            (double)(st->first_token_us - st->inference_start_us) / 1e3,
            (long long)rp->res.position, (long long)c->window, reason_str(s, rp));
}

static void print_json(const llm_ctx *c, const reply *rp, const stream *s, const char *prompt) {
    char b[1024];
    const etch_llm_stats *st = &rp->st;
    fputs("{\"prompt\": ", stdout);
    cli_json_string(stdout, prompt);
    fputs(", \"text\": ", stdout);
    cli_json_string_n(stdout, s->text.p ? s->text.p : "", s->text.len);
    printf(", \"stop_reason\": \"%s\", \"stop_id\": ", reason_str(s, rp));
    if (rp->res.stop_id >= 0)
        printf("%d", (int)rp->res.stop_id);
    else
        fputs("null", stdout);
    int64_t decode = st->inference_end_us - st->prompt_eval_end_us;
    printf(", \"prompt_tokens\": %lld, \"generated_tokens\": %lld, \"context_tokens\": %lld, "
           "\"context_window\": %lld, \"context_shifts\": %d, \"tokens_per_second\": ",
           (long long)st->prompt_tokens, (long long)st->generated_tokens,
           (long long)rp->res.position, (long long)c->window, rp->shifts);
    cli_json_double(stdout, decode > 0 ? (double)st->generated_tokens * 1e6 / (double)decode
                                       : 0.0);
    printf(", \"threads\": %d", st->num_threads);
    etch_llm_stats_json(st, b, sizeof b);
    const char *obj = strchr(b, '{');
    printf(", \"stats\": %s}\n", obj ? obj : "null");
    fflush(stdout);
}

/* Generate after ids[0..n) (or, with text, after the text as a plain prompt), shifting the
 * context when it fills; reports. */
static etch_status reply_to(llm_ctx *c, const int32_t *ids, size_t n, const char *text,
                            const char *shown_prompt, bool add_bos) {
    const llm_opts *o = c->o;
    stream s;
    memset(&s, 0, sizeof s);
    s.o = o;
    s.last_newline = true;
    reply rp;
    memset(&rp, 0, sizeof rp);
    etch_llm_generate_params gp = etch_llm_generate_default_params();
    gp.max_new_tokens = (int32_t)o->max_new_tokens;
    gp.stop_ids = o->stop_ids;
    gp.n_stop_ids = o->n_stop;
    gp.ignore_eos = o->ignore_eos;
    gp.add_bos = add_bos;
    gp.echo = text != NULL && !o->json;
    gp.on_token = on_token;
    gp.user_data = &s;
    interrupted = 0;
    etch_llm_result res;
    bool cut = false;
    etch_status st = text ? etch_llm_runner_generate(c->r, text, strlen(text), &gp, &res)
                          : etch_llm_runner_generate_ids(c->r, ids, n, &gp, &res);
    for (;;) {
        if (st != ETCH_OK)
            break;
        reply_add(&rp, etch_llm_runner_stats(c->r), &res);
        if (res.stop_reason != ETCH_LLM_STOP_CONTEXT_FULL)
            break;
        if (o->max_new_tokens >= 0 && rp.res.generated_tokens >= o->max_new_tokens)
            break;
        if (!shift_in_reply(c, &st)) {
            cut = st == ETCH_OK && o->chat;
            break;
        }
        rp.shifts++;
        gp.echo = false;
        if (o->max_new_tokens >= 0)
            gp.max_new_tokens = (int32_t)(o->max_new_tokens - rp.res.generated_tokens);
        st = etch_llm_runner_generate_ids(c->r, NULL, 0, &gp, &res);
    }
    if (st == ETCH_OK && s.oom)
        st = ETCH_ERR_MEMORY_ALLOCATION_FAILED;
    if (st == ETCH_OK) {
        if (!s.stop_string)
            emit(&s, s.held.p, s.held.len);
        c->last_stop = s.stop_string ? ETCH_LLM_STOP_CANCELLED : rp.res.stop_reason;
        c->last_stats = rp.st;
        if (o->json) {
            print_json(c, &rp, &s, shown_prompt);
        } else if (o->chat) {
            fputc('\n', stdout);
            fflush(stdout);
        } else if (!s.last_newline && isatty(1)) {
            /* end the text's line on the terminal: on stdout when it is one (the text stays
             * the only thing there otherwise), else before the report on stderr */
            fputc('\n', stdout);
        } else if (!s.last_newline && isatty(2) && !o->quiet) {
            fputc('\n', stderr);
        }
        fflush(stdout);
        if (cut)
            note(o, "context full: the reply is cut (the next turn drops older ones)\n");
        if (o->print_tokens)
            print_tokens(c);
        if (!o->quiet && !o->json) {
            if (o->chat && !o->stats)
                report_line(c, &rp, &s);
            else
                report_full(&rp, &s);
        }
    }
    free(s.held.p);
    free(s.text.p);
    return st;
}

/* The conversation prefix and the system part, and the assistant suffix (template). */
static int prepare_template(llm_ctx *c) {
    const etch_llm_chat_template *t = c->tmpl;
    const char *sys = c->o->system ? c->o->system : t->default_system;
    size_t cap = (size_t)c->window + 1, n = 0;
    c->prefix = malloc(cap * sizeof *c->prefix);
    c->suffix = malloc(cap * sizeof *c->suffix);
    if (!c->prefix || !c->suffix)
        return oom();
    etch_status st = encode_more(c, t->conversation_prefix, true, c->prefix, cap, &n);
    if (st == ETCH_OK && *sys) {
        st = encode_more(c, t->system_prefix, true, c->prefix, cap, &n);
        if (st == ETCH_OK)
            st = encode_more(c, sys, false, c->prefix, cap, &n);
        if (st == ETCH_OK)
            st = encode_more(c, t->system_suffix, true, c->prefix, cap, &n);
    }
    if (st == ETCH_ERR_OUT_OF_RESOURCES || (st == ETCH_OK && (int64_t)n >= c->window)) {
        fflush(stdout);
        fprintf(stderr,
                "error: OutOfResources: the system prompt is %zu tokens; the model's context "
                "holds %lld\n",
                n, (long long)c->window);
        return CLI_FAIL;
    }
    if (st != ETCH_OK)
        return cli_fail_ctx(st, "system prompt");
    c->n_prefix = n;
    n = 0;
    st = encode_more(c, t->assistant_suffix, true, c->suffix, cap, &n);
    if (st != ETCH_OK)
        return cli_fail_ctx(st, "the chat template's assistant_suffix");
    c->n_suffix = n;
    return CLI_OK;
}

/* One user turn: format it (template) or encode it (plain), make room, generate. CLI_OK also
 * when the turn was skipped (too long), with a message. */
static int turn(llm_ctx *c, const char *text) {
    const llm_opts *o = c->o;
    const etch_llm_chat_template *t = c->tmpl;
    size_t cap = (size_t)c->window + 1, n = 0, head = 0;
    etch_status st = ETCH_OK;
    int32_t pending = etch_llm_runner_pending_token(c->r);
    bool suffix = false;
    if (t && c->started) {
        /* the previous reply's end: the template's assistant_suffix; a final EOS (or stop id)
         * that is its first token is not fed twice, another EOS gives way to it */
        size_t from = 0;
        if ((c->last_stop == ETCH_LLM_STOP_EOS || c->last_stop == ETCH_LLM_STOP_STOP_ID) &&
            pending >= 0) {
            if (c->n_suffix && c->suffix[0] == pending)
                from = 1;
            else if (c->last_stop == ETCH_LLM_STOP_EOS)
                etch_llm_runner_discard_pending(c->r);
        }
        pending = etch_llm_runner_pending_token(c->r);
        memcpy(c->ids, c->suffix + from, (c->n_suffix - from) * sizeof *c->ids);
        n = head = c->n_suffix - from;
        suffix = true;
    }
    size_t first = n;
    if (t && !c->started) {
        memcpy(c->ids + n, c->prefix, c->n_prefix * sizeof *c->ids);
        n += c->n_prefix;
        first = n;
    }
    /* a turn that does not fit is still counted whole (for the message) */
    const char *pieces[4] = {t ? t->user_prefix : "", text, t ? t->user_suffix : "",
                             t ? t->assistant_prefix : ""};
    for (int k = 0; k < 4; k++) {
        st = encode_more(c, pieces[k], k != 1, c->ids, cap, &n);
        if (st != ETCH_OK && st != ETCH_ERR_OUT_OF_RESOURCES)
            return cli_fail(st);
    }
    size_t own = n - first; /* the turn's own tokens */
    bool bos = !t && !c->started && etch_llm_runner_metadata(c->r)->bos_id >= 0;
    if (!c->started)
        c->keep = t ? c->n_prefix : (size_t)bos;
    if ((int64_t)(c->keep + own + 1) > c->window || n > cap) {
        if (!o->chat) {
            fflush(stdout);
            fprintf(stderr,
                    "error: OutOfResources: the prompt is %zu tokens; with %zu kept before it "
                    "the model's %lld-token context has no room for a reply\n",
                    own, c->keep, (long long)c->window);
            return CLI_FAIL;
        }
        fflush(stdout);
        fprintf(stderr,
                "this turn is %zu tokens: with the %zu-token %s it leaves no room in the "
                "%lld-token context; skipped\n",
                own, c->keep, t ? "system prompt" : "start", (long long)c->window);
        return CLI_OK;
    }
    /* room: the turn, what comes before it, and some for the reply */
    size_t pos = (size_t)etch_llm_runner_position(c->r);
    size_t extra = (pending >= 0) + head + (c->started ? 0 : (size_t)bos);
    int64_t reserve = o->max_new_tokens >= 0 ? o->max_new_tokens : c->window / 4;
    if (reserve > c->window - (int64_t)(c->keep + own))
        reserve = c->window - (int64_t)(c->keep + own);
    if (reserve < 1)
        reserve = 1;
    if ((int64_t)(pos + extra + own) + reserve > c->window && c->n_turns > 0) {
        size_t j = 0;
        while (j < c->n_turns &&
               (int64_t)(c->keep + (pos - c->turns[j]) + extra + own) + reserve > c->window)
            j++;
        size_t upto = j < c->n_turns ? c->turns[j] : pos;
        if (j == c->n_turns) {
            /* every earlier turn goes: so does the end of the last reply */
            etch_llm_runner_discard_pending(c->r);
            pending = -1;
            if (suffix) {
                memmove(c->ids, c->ids + head, (n - head) * sizeof *c->ids);
                n -= head;
                head = 0;
            }
        }
        note(o, "context full: dropped the %zu oldest turn%s (%zu tokens)\n", j,
             j == 1 ? "" : "s", upto - c->keep);
        st = drop(c, upto, j);
        if (st != ETCH_OK)
            return cli_fail(st);
        pos = (size_t)etch_llm_runner_position(c->r);
    }
    if (c->n_turns == c->cap_turns) {
        size_t nc = c->cap_turns ? 2 * c->cap_turns : 64;
        size_t *p = realloc(c->turns, nc * sizeof *p);
        if (!p)
            return oom();
        c->turns = p;
        c->cap_turns = nc;
    }
    c->turns[c->n_turns++] = pos + (pending >= 0) + (c->started ? head : c->keep);
    bool was_started = c->started;
    c->started = true;
    if (!t && !o->chat && o->prompt) /* a plain --prompt: the runner encodes and echoes it */
        st = reply_to(c, NULL, 0, text, text, true);
    else
        st = reply_to(c, c->ids, n, NULL, text, !t && !was_started);
    return st == ETCH_OK ? CLI_OK : cli_fail(st);
}

static int from_start(llm_ctx *c);

/* The models requests go to: one (--model), or the variants of --models with the policy
 * choosing one per request (llm_policy.c). */
typedef struct llm_session {
    llm_ctx *v;
    size_t n;
    llm_policy *policy; /* NULL: v[0] */
} llm_session;

/* One request (a turn, a --prompt, or NULL: from the start) on the model chosen for it. */
static int request(llm_session *s, const char *text) {
    size_t i = 0;
    int rc;
    if (s->policy && (rc = llm_policy_before(s->policy, &i)) != CLI_OK)
        return rc;
    llm_ctx *c = &s->v[i];
    memset(&c->last_stats, 0, sizeof c->last_stats);
    rc = text ? turn(c, text) : from_start(c);
    if (s->policy && rc == CLI_OK)
        llm_policy_after(s->policy, i, &c->last_stats);
    return rc;
}

static int chat(llm_session *s) {
    char *line = NULL;
    size_t cap = 0;
    bool tty = isatty(0);
    int rc = CLI_OK;
    for (size_t lineno = 1;; lineno++) {
        if (tty)
            fputs("> ", stderr);
        ssize_t n = getline(&line, &cap, stdin);
        if (n < 0)
            break;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = 0;
        /* A turn is text: a NUL byte would end it early, so the line is refused whole (like
         * a turn too long for the context, the session goes on). */
        const char *nul = memchr(line, 0, (size_t)n);
        if (nul) {
            fflush(stdout);
            fprintf(stderr, "line %zu holds a NUL byte (byte %zu of %zd): not text; skipped\n",
                    lineno, (size_t)(nul - line) + 1, n);
            continue;
        }
        if ((rc = request(s, line)) != CLI_OK)
            break;
    }
    free(line);
    return rc;
}

/* Without a prompt: generate from BOS (or the template's start), as a continuation. */
static int from_start(llm_ctx *c) {
    const etch_llm_chat_template *t = c->tmpl;
    c->keep = t ? c->n_prefix : (etch_llm_runner_metadata(c->r)->bos_id >= 0);
    c->started = true;
    etch_status st;
    if (t && c->n_prefix)
        st = reply_to(c, c->prefix, c->n_prefix, NULL, NULL, false);
    else
        st = reply_to(c, NULL, 0, NULL, NULL, true);
    return st == ETCH_OK ? CLI_OK : cli_fail(st);
}

/* Open a model and its tokenizer for requests (the model line on stderr). On failure c holds
 * what was opened: close_ctx frees it. */
/* The model and tokenizer are files, or (the built-in model) bytes in memory: `mem` non-NULL. */
typedef struct llm_mem {
    const void *model, *tokenizer;
    size_t model_size, tokenizer_size;
} llm_mem;

static int open_ctx(const llm_opts *o, const char *model, const char *tokenizer,
                    const llm_mem *mem, llm_ctx *c) {
    int rc = CLI_OK;
    memset(c, 0, sizeof *c);
    if (!tokenizer && !mem)
        return cli_usage_error("llm", "missing --tokenizer for %s", model);
    etch_tokenizer *tok = NULL;
    /* the error names the file already */
    etch_status st =
        tokenizer ? etch_tokenizer_open_file(tokenizer, NULL, &tok)
                  : etch_tokenizer_open_buffer(mem->tokenizer, mem->tokenizer_size, NULL, &tok);
    if (st != ETCH_OK)
        return cli_fail(st);
    c->tok = tok;
    etch_llm_runner_options ro = etch_llm_runner_default_options();
    ro.load_mode = o->mode;
    ro.num_threads = o->nthreads;
    ro.kernels = o->kernels;
    ro.no_prepack = o->no_prepack;
    ro.sampler.temperature = (float)o->temp;
    ro.sampler.top_k = (int32_t)o->k;
    ro.sampler.top_p = (float)o->p;
    ro.sampler.seed = (uint64_t)o->s;
    etch_llm_runner *r = NULL;
    st = mem ? etch_llm_runner_open_buffer(mem->model, mem->model_size, tok, &ro, &r)
             : etch_llm_runner_open(model, tok, &ro, &r);
    if (st != ETCH_OK)
        return cli_fail(st);
    const etch_llm_metadata *md = etch_llm_runner_metadata(r);
    c->o = o;
    c->r = r;
    c->tmpl = o->raw ? NULL : etch_llm_runner_chat_template(r);
    c->window = md->max_context_len;
    if (!o->quiet) {
        fprintf(stderr,
                "model: vocab %lld, context %lld, %lld tokens per call, %lld layers, bos %lld, "
                "eos",
                (long long)md->vocab_size, (long long)md->max_context_len,
                (long long)md->max_seq_len, (long long)md->n_layers, (long long)md->bos_id);
        for (size_t i = 0; i < md->n_eos_ids; i++)
            fprintf(stderr, "%s%lld", i ? "," : " ", (long long)md->eos_ids[i]);
        if (md->kv_cache_dtype[0])
            fprintf(stderr, "; kv cache %s", md->kv_cache_dtype);
        if (md->kv_cache_bytes_per_token)
            fprintf(stderr, "%s %lld bytes/token", md->kv_cache_dtype[0] ? "," : "; kv cache",
                    (long long)md->kv_cache_bytes_per_token);
        fprintf(stderr,
                "%s; sampler: temperature %g, top-k %lld, top-p %g, seed %lld; threads %d, "
                "kernels %s\n",
                c->tmpl ? "; chat template" : "", o->temp, o->k, o->p, o->s, o->nthreads,
                etch_module_kernels_name(o->kernels));
        if (etch_tokenizer_vocab_size(tok) < md->vocab_size)
            fprintf(stderr,
                    "note: the tokenizer has %d ids, the model's vocabulary %lld (padded): "
                    "ids from %d on have no text and are never sampled\n",
                    (int)etch_tokenizer_vocab_size(tok), (long long)md->vocab_size,
                    (int)etch_tokenizer_vocab_size(tok));
    }
    if (o->system && !c->tmpl) {
        fprintf(stderr, "error: NotSupported: --system needs a chat template, and %s has none "
                        "(no get_chat_template method)\n",
                model);
        rc = CLI_FAIL;
    }
    c->ids = malloc(((size_t)c->window + 1) * sizeof *c->ids);
    if (rc == CLI_OK && !c->ids)
        rc = oom();
    if (rc == CLI_OK && c->tmpl)
        rc = prepare_template(c);
    return rc;
}

static void close_ctx(llm_ctx *c) {
    free(c->ids);
    free(c->prefix);
    free(c->suffix);
    free(c->turns);
    etch_llm_runner_close(c->r);
    etch_tokenizer_close(c->tok);
}

int cmd_llm(int argc, char **argv) {
    llm_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc != CLI_OK)
        return rc;
    /* the model: a file; a name in the store; or, without --model, the store's "default"
     * and then the model built into etch */
    cli_served *sv = NULL;
    cli_embedded emb;
    etch_store_embedded semb;
    bool have_emb = cli_embedded_model(&emb);
    llm_mem mem = {NULL, NULL, 0, 0};
    char shown[ETCH_STORE_NAME_MAX + 32];
    /* a store name: valid as one, and not an existing path (paths keep working) */
    if (!o.policy.models &&
        (!o.model || (!cli_is_path(o.model) && etch_store_name_valid(o.model)))) {
        const char *name = o.model ? o.model : "default";
        sv = malloc(sizeof *sv);
        if (!sv)
            return oom();
        semb.pte = emb.pte;
        semb.pte_size = emb.pte_size;
        semb.tokenizer = emb.tokenizer;
        semb.tokenizer_size = emb.tokenizer_size;
        semb.label = emb.label;
        etch_store_options so = etch_store_default_options();
        so.kernels = o.kernels;
        rc = cli_store_serve("llm", o.store, name, !o.model && have_emb ? &semb : NULL,
                             !o.model && !o.quiet, &so, sv);
        if (rc == CLI_OK && !o.model && !have_emb && sv->s.origin == ETCH_STORE_SERVED_NONE)
            rc = CLI_FAIL;
        if (rc != CLI_OK) {
            if (!o.model && !have_emb)
                fprintf(stderr, "(this etch was built without an embedded model: give "
                                "--model FILE --tokenizer FILE)\n");
            free(sv);
            return rc;
        }
        if (sv->s.origin == ETCH_STORE_SERVED_EMBEDDED) {
            mem.model = sv->s.pte_data;
            mem.model_size = sv->s.pte_size;
            mem.tokenizer = sv->s.tokenizer_data;
            mem.tokenizer_size = sv->s.tokenizer_size;
            snprintf(shown, sizeof shown, "%s", emb.label ? emb.label : "the embedded model");
            o.model = shown;
        } else {
            o.model = sv->s.pte_path;
            if (!o.tokenizer && sv->s.tokenizer_path[0])
                o.tokenizer = sv->s.tokenizer_path;
        }
        if (!o.tokenizer && !mem.tokenizer) {
            fprintf(stderr, "error: NotFound: model %s %s has no tokenizer: give --tokenizer "
                            "FILE (or install it with 'etch model install ... --tokenizer')\n",
                    name, sv->s.version);
            free(sv);
            return CLI_FAIL;
        }
    }
    llm_session s;
    memset(&s, 0, sizeof s);
    s.n = 1;
    if (o.policy.models) {
        if ((rc = llm_policy_open(&o.policy, o.quiet, &s.policy)) != CLI_OK)
            return rc;
        s.n = llm_policy_count(s.policy);
    }
    s.v = calloc(s.n, sizeof *s.v);
    if (!s.v) {
        llm_policy_close(s.policy);
        free(sv);
        return oom();
    }
    for (size_t i = 0; rc == CLI_OK && i < s.n; i++)
        rc = s.policy ? open_ctx(&o, llm_policy_model(s.policy, i),
                                 llm_policy_tokenizer(s.policy, i), NULL, &s.v[i])
                      : open_ctx(&o, o.model, o.tokenizer, mem.model ? &mem : NULL, &s.v[i]);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);

    if (rc == CLI_OK)
        rc = o.chat ? chat(&s) : request(&s, o.prompt);
    for (size_t i = 0; i < s.n; i++)
        close_ctx(&s.v[i]);
    free(s.v);
    llm_policy_close(s.policy);
    free(sv);
    return rc;
}
