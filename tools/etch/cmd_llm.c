/* etch llm — generate text with a language model (.pte) and a tokenizer; stdout carries only
 * the text, streamed; logs and the statistics line go to stderr. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_util.h"
#include "commands.h"
#include "etch/llm.h"
#include "etch/llm_runner.h"

#define MAX_STOP_IDS 64

void cmd_llm_usage(FILE *out) {
    fprintf(out,
            "usage: etch llm --model M.pte --tokenizer T [options]\n"
            "\n"
            "Generate text with a decoder exported by 'python3 -m etch.llm export' (KV cache\n"
            "inside the program). Without --prompt, generation starts from BOS. stdout carries\n"
            "only the text (the prompt first), streamed as it is produced; logs and the\n"
            "statistics line 'PyTorchObserver {...}' (ExecuTorch's keys) go to stderr.\n"
            "\n"
            "options:\n"
            "  --model FILE           the program (.pte)\n"
            "  --tokenizer FILE       llama2.c tokenizer.bin, sentencepiece .model,\n"
            "                         tokenizer.json or tiktoken ranks\n"
            "  --prompt TEXT          text to continue (default: start from BOS)\n"
            "  --max-new-tokens N     tokens to generate at most (default: until EOS or the\n"
            "                         context is full)\n"
            "  --temperature X        0 = greedy (default 0.8)\n"
            "  --top-k K              keep the K most likely tokens (default 0: all)\n"
            "  --top-p P              nucleus sampling mass in (0, 1] (default 0.9)\n"
            "  --seed S               sampler seed (default 0)\n"
            "  --stop-ids A,B,...     ids that also end generation (besides the model's EOS)\n"
            "  --ignore-eos           do not stop on the model's EOS ids\n"
            "  --chat                 read turns from stdin, one per line; the KV cache is kept\n"
            "                         across turns (only each new turn is prefilled); each reply\n"
            "                         ends with a newline on stdout\n"
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
    const char *model, *tokenizer, *prompt, *max_new, *temperature, *top_k, *top_p, *seed;
    const char *stop_ids_s, *threads, *load_mode, *kernels_s;
    etch_module_kernels kernels;
    int nthreads;
    bool chat, ignore_eos, no_prepack;
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
        if ((r = cli_opt_value("llm", argc, argv, &i, "--model", &o->model)) ||
            (r = cli_opt_value("llm", argc, argv, &i, "--tokenizer", &o->tokenizer)) ||
            (r = cli_opt_value("llm", argc, argv, &i, "--prompt", &o->prompt)) ||
            (r = cli_opt_value("llm", argc, argv, &i, "--max-new-tokens", &o->max_new)) ||
            (r = cli_opt_value("llm", argc, argv, &i, "--temperature", &o->temperature)) ||
            (r = cli_opt_value("llm", argc, argv, &i, "--top-k", &o->top_k)) ||
            (r = cli_opt_value("llm", argc, argv, &i, "--top-p", &o->top_p)) ||
            (r = cli_opt_value("llm", argc, argv, &i, "--seed", &o->seed)) ||
            (r = cli_opt_value("llm", argc, argv, &i, "--stop-ids", &o->stop_ids_s)) ||
            (r = cli_opt_value("llm", argc, argv, &i, "--cpu-threads", &o->threads)) ||
            (r = cli_opt_value("llm", argc, argv, &i, "--load-mode", &o->load_mode)) ||
            (r = cli_opt_value("llm", argc, argv, &i, "--kernels", &o->kernels_s)) ||
            (r = cli_opt_flag("llm", argv, i, "--chat", &o->chat)) ||
            (r = cli_opt_flag("llm", argv, i, "--ignore-eos", &o->ignore_eos)) ||
            (r = cli_opt_flag("llm", argv, i, "--no-prepack", &o->no_prepack))) {
            if (r < 0)
                return CLI_USAGE;
            continue;
        }
        if (argv[i][0] == '-' && argv[i][1])
            return cli_usage_error("llm", "unknown option '%s'", argv[i]);
        return cli_usage_error("llm", "unexpected argument '%s' (the prompt goes in --prompt)",
                               argv[i]);
    }
    if (!o->model)
        return cli_usage_error("llm", "missing --model");
    if (!o->tokenizer)
        return cli_usage_error("llm", "missing --tokenizer");
    if (o->chat && o->prompt)
        return cli_usage_error("llm", "--chat reads the turns from stdin; drop --prompt");
    o->max_new_tokens = -1;
    o->temp = 0.8;
    o->p = 0.9;
    o->nthreads = 1;
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

typedef struct stream {
    bool last_newline; /* the last byte written was '\n' (or nothing was written) */
} stream;

static int on_token(void *user_data, int32_t id, const char *text, size_t len) {
    (void)id;
    stream *s = (stream *)user_data;
    if (len) {
        fwrite(text, 1, len, stdout);
        fflush(stdout);
        s->last_newline = text[len - 1] == '\n';
    }
    return interrupted ? 1 : 0;
}

static void report(etch_llm_runner *r, const etch_llm_result *res) {
    char buf[1024];
    const etch_llm_stats *st = etch_llm_runner_stats(r);
    etch_llm_stats_report(st, buf, sizeof buf);
    fprintf(stderr, "stop: %s%s", etch_llm_stop_reason_str(res->stop_reason),
            res->stop_id >= 0 ? " (id " : "");
    if (res->stop_id >= 0)
        fprintf(stderr, "%d)", (int)res->stop_id);
    fprintf(stderr, ", context %lld tokens\n%s", (long long)res->position, buf);
    etch_llm_stats_json(st, buf, sizeof buf);
    fprintf(stderr, "%s\n", buf);
}

static etch_status generate(etch_llm_runner *r, const char *text, const llm_opts *o, bool echo,
                            stream *s, etch_llm_result *res) {
    etch_llm_generate_params gp = etch_llm_generate_default_params();
    gp.max_new_tokens = (int32_t)o->max_new_tokens;
    gp.stop_ids = o->stop_ids;
    gp.n_stop_ids = o->n_stop;
    gp.ignore_eos = o->ignore_eos;
    gp.echo = echo;
    gp.on_token = on_token;
    gp.user_data = s;
    interrupted = 0;
    return etch_llm_runner_generate(r, text ? text : "", text ? strlen(text) : 0, &gp, res);
}

static int chat(etch_llm_runner *r, const llm_opts *o) {
    char *line = NULL;
    size_t cap = 0;
    bool tty = isatty(0);
    int rc = CLI_OK;
    for (;;) {
        if (tty)
            fputs("> ", stderr);
        ssize_t n = getline(&line, &cap, stdin);
        if (n < 0)
            break;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = 0;
        stream s = {true};
        etch_llm_result res;
        etch_status st = generate(r, line, o, false, &s, &res);
        if (st == ETCH_ERR_OUT_OF_RESOURCES && etch_llm_runner_position(r) > 0) {
            fprintf(stderr, "context full after %lld tokens: starting a new conversation\n",
                    (long long)etch_llm_runner_position(r));
            etch_llm_runner_reset(r);
            st = generate(r, line, o, false, &s, &res);
        }
        if (st != ETCH_OK) {
            rc = cli_fail(st);
            break;
        }
        fputc('\n', stdout);
        fflush(stdout);
        report(r, &res);
    }
    free(line);
    return rc;
}

int cmd_llm(int argc, char **argv) {
    llm_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc != CLI_OK)
        return rc;
    etch_tokenizer *tok = NULL;
    etch_status st = etch_tokenizer_open_file(o.tokenizer, NULL, &tok);
    if (st != ETCH_OK)
        return cli_fail_ctx(st, "%s", o.tokenizer);
    etch_llm_runner_options ro = etch_llm_runner_default_options();
    ro.load_mode = o.mode;
    ro.num_threads = o.nthreads;
    ro.kernels = o.kernels;
    ro.no_prepack = o.no_prepack;
    ro.sampler.temperature = (float)o.temp;
    ro.sampler.top_k = (int32_t)o.k;
    ro.sampler.top_p = (float)o.p;
    ro.sampler.seed = (uint64_t)o.s;
    etch_llm_runner *r = NULL;
    st = etch_llm_runner_open(o.model, tok, &ro, &r);
    if (st != ETCH_OK) {
        etch_tokenizer_close(tok);
        return cli_fail(st);
    }
    const etch_llm_metadata *md = etch_llm_runner_metadata(r);
    fprintf(stderr,
            "model: vocab %lld, context %lld, %lld tokens per call, %lld layers, bos %lld, "
            "eos",
            (long long)md->vocab_size, (long long)md->max_context_len,
            (long long)md->max_seq_len, (long long)md->n_layers, (long long)md->bos_id);
    for (size_t i = 0; i < md->n_eos_ids; i++)
        fprintf(stderr, "%s%lld", i ? "," : " ", (long long)md->eos_ids[i]);
    fprintf(stderr,
            "; sampler: temperature %g, top-k %lld, top-p %g, seed %lld; threads %d, kernels "
            "%s\n",
            o.temp, o.k, o.p, o.s, o.nthreads, etch_module_kernels_name(o.kernels));
    if (etch_tokenizer_vocab_size(tok) > md->vocab_size)
        fprintf(stderr, "warning: the tokenizer has %d ids, the model %lld\n",
                (int)etch_tokenizer_vocab_size(tok), (long long)md->vocab_size);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);

    if (o.chat) {
        rc = chat(r, &o);
    } else {
        stream s = {true};
        etch_llm_result res;
        st = generate(r, o.prompt, &o, o.prompt != NULL, &s, &res);
        if (st != ETCH_OK) {
            rc = cli_fail(st);
        } else {
            /* end the text's line on the terminal: on stdout when it is one (the text stays
             * the only thing there otherwise), else before the report on stderr */
            if (!s.last_newline && isatty(1))
                fputc('\n', stdout);
            else if (!s.last_newline && isatty(2))
                fputc('\n', stderr);
            fflush(stdout);
            report(r, &res);
        }
    }
    etch_llm_runner_close(r);
    etch_tokenizer_close(tok);
    return rc;
}
