/*
 * The LLM runner through its C API, on stories260K exported at test time:
 *   test_llm_runner MODEL.pte TOKENIZER GREEDY.txt [GREEDY_TOKENS]
 *
 * - greedy generation from BOS reproduces GREEDY.txt exactly (GREEDY_TOKENS tokens, 258 by
 *   default: the token count of the reference text), streamed piece by piece;
 * - a chat turn with the kept cache gives the same tokens as a fresh prefill of everything
 *   before it, and prefills only the new tokens in one forward call;
 * - the statistics: the JSON line's keys (ExecuTorch's, in order), monotonic timestamps,
 *   token counts equal to what was produced;
 * - stop reasons: EOS, stop ids, max tokens, cancellation from the callback, context full
 *   (and a prompt that does not fit, which changes nothing);
 * - context shifting: after etch_llm_runner_shift the context is BOS + the newest tokens and
 *   the continuation equals a fresh prefill of exactly those; discard_pending; the context
 *   ids; no chat template in this program.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <etch/llm.h>

#include "etch_test.h"
#include "test_file.h"

#define MAX_IDS 4096

typedef struct collect {
    int32_t ids[MAX_IDS];
    size_t n;
    char text[1 << 16];
    size_t len;
    long calls;
    long cancel_at; /* return 1 on this call (1-based); 0 never */
    int echo_calls;
} collect;

static int on_token(void *ud, int32_t id, const char *text, size_t len) {
    collect *c = (collect *)ud;
    c->calls++;
    if (id < 0) {
        c->echo_calls++;
    } else if (c->n < MAX_IDS) {
        c->ids[c->n++] = id;
    }
    if (c->len + len < sizeof c->text) {
        memcpy(c->text + c->len, text, len);
        c->len += len;
    }
    /* a streamed piece never ends inside a code point: its last lead byte is complete */
    if (len) {
        size_t i = len;
        while (i > 0 && ((unsigned char)text[i - 1] & 0xC0) == 0x80)
            i--;
        unsigned char lead = i ? (unsigned char)text[i - 1] : 0;
        size_t need = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
        CHECK_MSG(i > 0 && len - (i - 1) == need, "piece ends inside a code point");
    }
    return c->cancel_at && c->calls == c->cancel_at;
}

static void reset_collect(collect *c) {
    memset(c, 0, sizeof *c);
}

static etch_llm_generate_params params(collect *c, int32_t max_new) {
    etch_llm_generate_params gp = etch_llm_generate_default_params();
    gp.max_new_tokens = max_new;
    gp.on_token = on_token;
    gp.user_data = c;
    return gp;
}

static collect A, B;

static void test_metadata(etch_llm_runner *r) {
    const etch_llm_metadata *md = etch_llm_runner_metadata(r);
    CHECK(md->from_program);
    CHECK(md->vocab_size == 512);
    CHECK(md->max_seq_len == 512);
    CHECK(md->max_context_len == 512);
    CHECK(md->bos_id == 1);
    CHECK(md->n_eos_ids == 2 && md->eos_ids[0] == 1 && md->eos_ids[1] == 2);
    CHECK(md->n_layers == 5);
    CHECK(md->use_kv_cache && md->enable_dynamic_shape);
}

static void test_greedy(etch_llm_runner *r, const char *ref, size_t ref_len, int n_tokens) {
    etch_llm_runner_reset(r);
    reset_collect(&A);
    etch_llm_generate_params gp = params(&A, n_tokens);
    etch_llm_result res;
    uint64_t calls0 = etch_llm_runner_num_forward_calls(r);
    CHECK_OK(etch_llm_runner_generate(r, NULL, 0, &gp, &res));
    CHECK(res.stop_reason == ETCH_LLM_STOP_MAX_TOKENS);
    CHECK(res.prompt_tokens == 1); /* BOS */
    CHECK(res.generated_tokens == n_tokens);
    CHECK(res.position == n_tokens); /* BOS + all but the last (pending) token */
    CHECK(etch_llm_runner_pending_token(r) == A.ids[A.n - 1]);
    CHECK(etch_llm_runner_num_forward_calls(r) - calls0 == (uint64_t)n_tokens);
    CHECK((long)A.n == n_tokens);
    CHECK_MSG(A.len == ref_len && memcmp(A.text, ref, ref_len) == 0,
              "greedy text differs from the reference (%zu vs %zu bytes):\n%.*s", A.len,
              ref_len, (int)A.len, A.text);
    /* the same through generate_ids (BOS added) */
    etch_llm_runner_reset(r);
    reset_collect(&B);
    gp = params(&B, n_tokens);
    CHECK_OK(etch_llm_runner_generate_ids(r, NULL, 0, &gp, &res));
    CHECK(B.n == A.n && memcmp(B.ids, A.ids, A.n * sizeof A.ids[0]) == 0);
}

/* Turn 2 with the kept cache == a fresh prefill of turn 1, its reply and turn 2. */
static void test_chat(etch_llm_runner *r, etch_tokenizer *tok) {
    const char *t1 = "Once upon a time, there was a dog", *t2 = " The dog saw a cat.";
    etch_llm_runner_reset(r);
    reset_collect(&A);
    etch_llm_generate_params gp = params(&A, 24);
    etch_llm_result r1, r2;
    CHECK_OK(etch_llm_runner_generate(r, t1, strlen(t1), &gp, &r1));
    int32_t t1_ids[128], t2_ids[128];
    size_t n1 = 0, n2 = 0;
    CHECK_OK(etch_tokenizer_encode(tok, t1, strlen(t1), 0, t1_ids, 128, &n1));
    CHECK_OK(etch_tokenizer_encode(tok, t2, strlen(t2), 0, t2_ids, 128, &n2));
    CHECK(r1.prompt_tokens == (int64_t)n1 + 1);
    CHECK(r1.generated_tokens == 24 && A.n == 24);
    size_t g1 = A.n;
    int32_t g1_ids[64];
    memcpy(g1_ids, A.ids, g1 * sizeof A.ids[0]);

    reset_collect(&A);
    uint64_t calls0 = etch_llm_runner_num_forward_calls(r);
    CHECK_OK(etch_llm_runner_generate(r, t2, strlen(t2), &gp, &r2));
    /* only the pending reply token and turn 2's tokens were prefilled, in one call */
    CHECK_MSG(r2.prompt_tokens == (int64_t)n2 + 1, "turn 2 prefilled %lld tokens, want %zu",
              (long long)r2.prompt_tokens, n2 + 1);
    CHECK(etch_llm_runner_stats(r)->prompt_tokens == (int64_t)n2 + 1);
    CHECK(etch_llm_runner_num_forward_calls(r) - calls0 == 1 + 23);
    CHECK(r2.position == 1 + (int64_t)n1 + 24 + (int64_t)n2 + 23);
    size_t gk = A.n;
    int32_t kept[64];
    memcpy(kept, A.ids, gk * sizeof A.ids[0]);

    /* fresh: one prefill of BOS + turn 1 + reply + turn 2 */
    int32_t all[512];
    size_t na = 0;
    memcpy(all + na, t1_ids, n1 * sizeof(int32_t));
    na += n1;
    memcpy(all + na, g1_ids, g1 * sizeof(int32_t));
    na += g1;
    memcpy(all + na, t2_ids, n2 * sizeof(int32_t));
    na += n2;
    etch_llm_runner_reset(r);
    reset_collect(&A);
    etch_llm_result rf;
    calls0 = etch_llm_runner_num_forward_calls(r);
    CHECK_OK(etch_llm_runner_generate_ids(r, all, na, &gp, &rf));
    CHECK(rf.prompt_tokens == (int64_t)na + 1);
    CHECK(etch_llm_runner_num_forward_calls(r) - calls0 == 1 + 23);
    CHECK(rf.position == r2.position);
    CHECK_MSG(A.n == gk && memcmp(A.ids, kept, gk * sizeof kept[0]) == 0,
              "turn 2 with the kept cache differs from a fresh prefill");
}

/* Keys of ExecuTorch's stats_to_json_string, in order, then etch's. */
/* Shift: drop 40 tokens after BOS, go on == a fresh run of BOS + the rest + the pending one. */
static void test_shift(etch_llm_runner *r) {
    etch_llm_runner_reset(r);
    reset_collect(&A);
    etch_llm_generate_params gp = params(&A, 100);
    etch_llm_result res;
    CHECK_OK(etch_llm_runner_generate(r, NULL, 0, &gp, &res));
    size_t n = 0;
    const int32_t *ctx = etch_llm_runner_context(r, &n);
    CHECK(n == 100 && ctx[0] == 1); /* BOS + 99 generated; the 100th is pending */
    for (size_t i = 1; i < n && i <= A.n; i++)
        CHECK(ctx[i] == A.ids[i - 1]);
    int32_t before[128];
    memcpy(before, ctx, n * sizeof *ctx);
    int32_t pending = etch_llm_runner_pending_token(r);
    CHECK(etch_llm_runner_shift(r, 1, 100) == ETCH_ERR_INVALID_ARGUMENT); /* out of range */
    CHECK_OK(etch_llm_runner_shift(r, 1, 40));
    ctx = etch_llm_runner_context(r, &n);
    CHECK(n == 60 && ctx[0] == 1 && memcmp(ctx + 1, before + 41, 59 * sizeof *ctx) == 0);
    CHECK(etch_llm_runner_pending_token(r) == pending);
    reset_collect(&A);
    gp = params(&A, 30);
    CHECK_OK(etch_llm_runner_generate_ids(r, NULL, 0, &gp, &res));
    CHECK(res.prompt_tokens == 1 && res.position == 60 + 30);
    int32_t shifted[64];
    size_t ns = A.n;
    memcpy(shifted, A.ids, ns * sizeof *shifted);
    /* fresh: BOS + the kept 59 + the pending token */
    int32_t all[64];
    memcpy(all, before + 41, 59 * sizeof *all);
    all[59] = pending;
    etch_llm_runner_reset(r);
    reset_collect(&A);
    CHECK_OK(etch_llm_runner_generate_ids(r, all, 60, &gp, &res));
    CHECK_MSG(A.n == ns && memcmp(A.ids, shifted, ns * sizeof *shifted) == 0,
              "the continuation after a shift differs from a fresh prefill");
    /* discard_pending: the next call feeds nothing before its prompt */
    CHECK(etch_llm_runner_pending_token(r) >= 0);
    etch_llm_runner_discard_pending(r);
    CHECK(etch_llm_runner_pending_token(r) == -1);
    CHECK(etch_llm_runner_chat_template(r) == NULL);
}

static const char *const KEYS[] = {
    "prompt_tokens",      "generated_tokens",   "model_load_start_ms",
    "model_load_end_ms",  "inference_start_ms", "inference_end_ms",
    "prompt_eval_end_ms", "first_token_ms",     "aggregate_sampling_time_ms",
    "SCALING_FACTOR_UNITS_PER_SECOND", "peak_rss_bytes"};
#define NKEYS (sizeof KEYS / sizeof KEYS[0])

static int parse_json(const char *line, long long *vals) {
    const char *p = strchr(line, '{');
    if (strncmp(line, "PyTorchObserver {", 17) != 0 || !p)
        return -1;
    p++;
    for (size_t k = 0; k < NKEYS; k++) {
        size_t kl = strlen(KEYS[k]);
        if (*p != '"' || strncmp(p + 1, KEYS[k], kl) != 0 || p[1 + kl] != '"' ||
            p[2 + kl] != ':')
            return (int)k + 1;
        p += 3 + kl;
        char *end;
        vals[k] = strtoll(p, &end, 10);
        if (end == p)
            return (int)k + 100;
        p = end;
        if (*p != (k + 1 < NKEYS ? ',' : '}'))
            return (int)k + 200;
        p++;
    }
    return *p == 0 ? 0 : 999;
}

static void test_stats(etch_llm_runner *r) {
    etch_llm_runner_reset(r);
    reset_collect(&A);
    const char *prompt = "Lily and Ben";
    etch_llm_generate_params gp = params(&A, 40);
    gp.echo = true;
    etch_llm_result res;
    CHECK_OK(etch_llm_runner_generate(r, prompt, strlen(prompt), &gp, &res));
    CHECK(A.echo_calls == 1 && strncmp(A.text, prompt, strlen(prompt)) == 0);
    const etch_llm_stats *s = etch_llm_runner_stats(r);
    CHECK(s->generated_tokens == 40 && (long)A.n == 40);
    CHECK(s->prompt_tokens == res.prompt_tokens);
    CHECK(s->model_load_start_us <= s->model_load_end_us);
    CHECK(s->model_load_end_us <= s->inference_start_us);
    CHECK(s->inference_start_us <= s->token_encode_end_us);
    CHECK(s->token_encode_end_us <= s->prompt_eval_end_us);
    CHECK(s->prompt_eval_end_us <= s->first_token_us);
    CHECK(s->first_token_us <= s->inference_end_us);
    CHECK(s->aggregate_sampling_time_us >= 0 &&
          s->aggregate_sampling_time_us <= s->inference_end_us - s->inference_start_us);
    CHECK(s->peak_rss_bytes > 0);
    char line[1024];
    size_t n = etch_llm_stats_json(s, line, sizeof line);
    CHECK(n > 0 && n < sizeof line && strlen(line) == n);
    long long v[NKEYS];
    int e = parse_json(line, v);
    CHECK_MSG(e == 0, "stats line (error at %d): %s", e, line);
    if (e == 0) {
        CHECK(v[0] == res.prompt_tokens && v[1] == 40);
        CHECK(v[2] <= v[3] && v[3] <= v[4] && v[4] <= v[6] && v[6] <= v[7] && v[7] <= v[5]);
        CHECK(v[9] == 1000);
        CHECK(v[2] == s->model_load_start_us / 1000 && v[5] == s->inference_end_us / 1000);
    }
    size_t m = etch_llm_stats_json(s, line, 20); /* truncated: still says what it needs */
    CHECK(m == n && strlen(line) == 19);
    char rep[1024];
    CHECK(etch_llm_stats_report(s, rep, sizeof rep) > 0 && strstr(rep, "tokens/s"));
}

static void test_stops(etch_llm_runner *r) {
    etch_llm_result res;
    /* EOS: greedy from BOS ends its story by starting the next one (BOS, an EOS id here) */
    etch_llm_runner_reset(r);
    reset_collect(&A);
    etch_llm_generate_params gp = params(&A, -1);
    CHECK_OK(etch_llm_runner_generate(r, NULL, 0, &gp, &res));
    CHECK(res.stop_reason == ETCH_LLM_STOP_EOS);
    CHECK(res.stop_id == 1 || res.stop_id == 2);
    CHECK(res.generated_tokens == (int64_t)A.n + 1); /* the EOS id is not streamed */
    CHECK(etch_llm_runner_pending_token(r) == res.stop_id);
    size_t story = A.n;
    fprintf(stderr, "greedy story from BOS: %zu tokens, then id %d\n", story, (int)res.stop_id);

    /* stop ids: the 10th greedy token ends generation */
    int32_t stop = A.ids[9];
    size_t first = 0;
    while (A.ids[first] != stop)
        first++;
    etch_llm_runner_reset(r);
    reset_collect(&B);
    gp = params(&B, 100);
    gp.stop_ids = &stop;
    gp.n_stop_ids = 1;
    CHECK_OK(etch_llm_runner_generate(r, NULL, 0, &gp, &res));
    CHECK(res.stop_reason == ETCH_LLM_STOP_STOP_ID && res.stop_id == stop);
    CHECK(B.n == first && res.generated_tokens == (int64_t)first + 1);

    /* cancellation from the callback: the token counts, the next call feeds it */
    etch_llm_runner_reset(r);
    reset_collect(&B);
    B.cancel_at = 5;
    gp = params(&B, 100);
    CHECK_OK(etch_llm_runner_generate(r, NULL, 0, &gp, &res));
    CHECK(res.stop_reason == ETCH_LLM_STOP_CANCELLED);
    CHECK(res.generated_tokens == 5 && B.n == 5);
    CHECK(memcmp(B.ids, A.ids, 5 * sizeof A.ids[0]) == 0);
    CHECK(res.position == 5 && etch_llm_runner_pending_token(r) == A.ids[4]);
    B.cancel_at = 0;
    CHECK_OK(etch_llm_runner_generate(r, NULL, 0, &gp, &res)); /* continues the story */
    CHECK(res.prompt_tokens == 1 && B.n == 5 + 100);
    CHECK(memcmp(B.ids, A.ids, 100 * sizeof A.ids[0]) == 0);

    /* context full: never past the cache; the last sampled token stays pending */
    etch_llm_runner_reset(r);
    reset_collect(&B);
    gp = params(&B, -1);
    gp.ignore_eos = true;
    CHECK_OK(etch_llm_runner_generate(r, NULL, 0, &gp, &res));
    CHECK(res.stop_reason == ETCH_LLM_STOP_CONTEXT_FULL);
    CHECK(res.position == 512 && etch_llm_runner_position(r) == 512);
    CHECK(res.generated_tokens == 512); /* positions 1..511 fed, the 512th pending */
    CHECK(memcmp(B.ids, A.ids, story * sizeof A.ids[0]) == 0);
    reset_collect(&B);
    etch_llm_result res2;
    CHECK_STATUS(etch_llm_runner_generate(r, "more", 4, &gp, &res2),
                 ETCH_ERR_OUT_OF_RESOURCES);
    CHECK(res2.stop_reason == ETCH_LLM_STOP_CONTEXT_FULL && res2.generated_tokens == 0);
    CHECK(etch_llm_runner_position(r) == 512 && B.calls == 0);
    CHECK(strstr(etch_last_error(), "context") != NULL);
    /* one position short: a prefill that exactly fills the context, then context full */
    etch_llm_runner_reset(r);
    int32_t ids[600];
    for (int i = 0; i < 600; i++)
        ids[i] = A.ids[i % story];
    CHECK_STATUS(etch_llm_runner_generate_ids(r, ids, 512, &gp, &res2),
                 ETCH_ERR_OUT_OF_RESOURCES); /* BOS + 512 > 512 */
    CHECK(etch_llm_runner_position(r) == 0);
    CHECK_STATUS(etch_llm_runner_generate_ids(r, ids, 600, &gp, &res2),
                 ETCH_ERR_OUT_OF_RESOURCES);
    reset_collect(&B);
    CHECK_OK(etch_llm_runner_generate_ids(r, ids, 511, &gp, &res2));
    CHECK(res2.prompt_tokens == 512 && res2.stop_reason == ETCH_LLM_STOP_CONTEXT_FULL);
    CHECK(res2.generated_tokens == 1 && B.n == 1 && res2.position == 512);
    /* max_new_tokens 0: prefill only */
    etch_llm_runner_reset(r);
    gp = params(&B, 0);
    CHECK_OK(etch_llm_runner_generate_ids(r, ids, 10, &gp, &res2));
    CHECK(res2.stop_reason == ETCH_LLM_STOP_MAX_TOKENS && res2.generated_tokens == 0);
    CHECK(res2.position == 11 && etch_llm_runner_pending_token(r) == -1);
    /* an empty prompt without BOS in an empty context: nothing to prefill */
    etch_llm_runner_reset(r);
    gp.add_bos = false;
    CHECK_STATUS(etch_llm_runner_generate(r, "", 0, &gp, &res2), ETCH_ERR_INVALID_ARGUMENT);
    int32_t bad = 100000;
    CHECK_STATUS(etch_llm_runner_generate_ids(r, &bad, 1, &gp, &res2),
                 ETCH_ERR_INVALID_ARGUMENT);
}

static void test_errors(const char *tok_path) {
    etch_tokenizer *tok;
    CHECK_OK(etch_tokenizer_open_file(tok_path, NULL, &tok));
    etch_llm_runner *r = (etch_llm_runner *)1;
    CHECK_STATUS(etch_llm_runner_open("/nonexistent.pte", tok, NULL, &r),
                 ETCH_ERR_ACCESS_FAILED);
    CHECK(r == (etch_llm_runner *)1);
    CHECK_STATUS(etch_llm_runner_open(NULL, tok, NULL, &r), ETCH_ERR_INVALID_ARGUMENT);
    etch_llm_runner_close(NULL);
    CHECK(strcmp(etch_llm_stop_reason_str(ETCH_LLM_STOP_CONTEXT_FULL), "context_full") == 0);
    etch_tokenizer_close(tok);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s MODEL.pte TOKENIZER GREEDY.txt [TOKENS]\n", argv[0]);
        return 2;
    }
    int n_tokens = argc > 4 ? atoi(argv[4]) : 258;
    size_t ref_len = 0;
    char *ref = (char *)etch_test_read_file(argv[3], 0, &ref_len);
    CHECK(ref != NULL);
    etch_tokenizer *tok = NULL;
    CHECK_OK(etch_tokenizer_open_file(argv[2], NULL, &tok));
    etch_llm_runner_options o = etch_llm_runner_default_options();
    o.sampler.temperature = 0;
    etch_llm_runner *r = NULL;
    CHECK_OK(etch_llm_runner_open(argv[1], tok, &o, &r));
    if (!r || !tok || !ref)
        return etch_test_finish() | 1;
    test_metadata(r);
    test_greedy(r, ref, ref_len, n_tokens);
    test_chat(r, tok);
    test_shift(r);
    test_stats(r);
    test_stops(r);
    test_errors(argv[2]);
    etch_llm_runner_close(r);
    etch_tokenizer_close(tok);
    free(ref);
    return etch_test_finish();
}
