/*
 * Background execution (etch/async.h) on the default language model (models/default):
 * - a method job (forward over one token) reports every instruction in order, then on_done
 *   once, and its logits equal a synchronous execute bit for bit;
 * - cancel from the progress callback after instruction k: nothing past instruction k runs,
 *   the status is Cancelled, and the method executes normally afterwards;
 * - a generation job streams the same tokens as a synchronous generate with the same seed;
 *   cancel after 3 tokens stops at 3 and the runner generates normally afterwards;
 * - cancel from another thread at pseudo-random points (sleeps of 0..2 ms), many times:
 *   every job ends Ok or Cancelled, and a synchronous run after each is still right;
 * - wait with a timeout returns false while a job runs and true once it has finished;
 * - NULL arguments are refused.
 * Run under ThreadSanitizer as well (ctest async.tsan when the tsan build is configured).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <etch/async.h>
#include <etch/llm.h>
#include <etch/llm_runner.h>
#include <etch/module.h>

#include "etch_test.h"

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

typedef struct watch {
    atomic_long progress;  /* on_progress calls */
    atomic_long done;      /* on_done calls */
    atomic_long after;     /* on_progress calls after on_done (must stay 0) */
    long last;             /* last `done` count seen, to check order */
    long cancel_at;        /* cancel when p->done reaches this (0: never) */
    long sleep_us;         /* per progress call */
    _Atomic(etch_job *) job; /* for cancel from the callback (stored right after start) */
    atomic_int status;
    int32_t ids[64];
    long nids;
    bool in_order;
} watch;

static void on_progress(void *ud, const etch_job_progress *p) {
    watch *w = (watch *)ud;
    if (atomic_load(&w->done))
        atomic_fetch_add(&w->after, 1);
    atomic_fetch_add(&w->progress, 1);
    if ((long)p->done < w->last)
        w->in_order = false;
    w->last = (long)p->done;
    if (p->text && p->token >= 0 && w->nids < 64)
        w->ids[w->nids++] = p->token;
    if (w->cancel_at && (long)p->done >= w->cancel_at) {
        etch_job *j;
        while (!(j = atomic_load(&w->job))) /* the starting thread stores it next */
            sleep_us(10);
        etch_job_cancel(j);
    }
    if (w->sleep_us)
        sleep_us(w->sleep_us);
}

static void on_done(void *ud, etch_status st) {
    watch *w = (watch *)ud;
    atomic_store(&w->status, (int)st);
    atomic_fetch_add(&w->done, 1);
}

static void watch_init(watch *w) {
    memset(w, 0, sizeof *w);
    atomic_init(&w->job, NULL);
    w->in_order = true;
}

/* forward(tokens [1, 1], start_pos [1]) of the default model: logits [1, 1, vocab] */
typedef struct fwd {
    etch_module *mod;
    etch_method *m;
    int64_t tok, pos;
    etch_tensor t, p;
} fwd;

static bool fwd_inputs(fwd *f) {
    int64_t ts[2] = {1, 1}, ps[1] = {1};
    return etch_tensor_init(&f->t, ETCH_DTYPE_LONG, 2, ts, &f->tok) == ETCH_OK &&
           etch_tensor_init(&f->p, ETCH_DTYPE_LONG, 1, ps, &f->pos) == ETCH_OK &&
           etch_method_set_input_tensor(f->m, 0, &f->t) == ETCH_OK &&
           etch_method_set_input_tensor(f->m, 1, &f->p) == ETCH_OK;
}

static const float *logits(const fwd *f, size_t *n) {
    const etch_value *v = etch_method_output(f->m, 0);
    *n = (size_t)etch_tensor_numel(v->u.tensor);
    return (const float *)v->u.tensor->data;
}

static void test_method(const char *model) {
    fwd f;
    memset(&f, 0, sizeof f);
    f.tok = 42;
    CHECK_OK(etch_module_open(model, NULL, &f.mod));
    if (!f.mod)
        return;
    CHECK_OK(etch_module_load_method(f.mod, "forward", &f.m));
    if (!f.m)
        return;
    CHECK(fwd_inputs(&f));
    CHECK_OK(etch_method_execute(f.m));
    size_t n;
    const float *l = logits(&f, &n);
    float *ref = (float *)malloc(n * sizeof *ref);
    memcpy(ref, l, n * sizeof *ref);
    size_t total = 0;
    for (size_t c = 0; c < etch_method_num_chains(f.m); c++)
        total += etch_method_chain_length(f.m, c);

    /* a full run */
    CHECK_OK(etch_method_reset(f.m));
    CHECK(fwd_inputs(&f));
    watch w;
    watch_init(&w);
    etch_job_callbacks cb = {on_progress, on_done, &w};
    etch_job *job = NULL;
    CHECK_OK(etch_job_start_execute(f.m, &cb, &job));
    CHECK(etch_job_wait(job, -1));
    CHECK(etch_job_done(job));
    CHECK_OK(etch_job_status(job));
    CHECK(strcmp(etch_job_error(job), "") == 0);
    CHECK_MSG(atomic_load(&w.progress) == (long)total, "%ld progress calls for %zu instructions",
              atomic_load(&w.progress), total);
    CHECK(atomic_load(&w.done) == 1 && atomic_load(&w.after) == 0 && w.in_order);
    etch_job_free(job);
    l = logits(&f, &n);
    CHECK_MSG(memcmp(l, ref, n * sizeof *ref) == 0, "background logits differ from execute");
    printf("method job: %zu instructions reported, logits equal\n", total);

    /* cancel from the callback after instruction k: nothing more runs */
    const long k = (long)total / 3;
    CHECK_OK(etch_method_reset(f.m));
    CHECK(fwd_inputs(&f));
    watch_init(&w);
    w.cancel_at = k;
    CHECK_OK(etch_job_start_execute(f.m, &cb, &job));
    atomic_store(&w.job, job);
    CHECK(etch_job_wait(job, -1));
    CHECK_STATUS(etch_job_status(job), ETCH_ERR_CANCELLED);
    CHECK(strstr(etch_job_error(job), "stopped before instruction") != NULL);
    CHECK_MSG(atomic_load(&w.progress) == k, "cancelled after %ld: %ld instructions ran", k,
              atomic_load(&w.progress));
    CHECK(atomic_load(&w.done) == 1);
    etch_job_free(job);
    /* the method is fine afterwards */
    CHECK_OK(etch_method_reset(f.m));
    CHECK(fwd_inputs(&f));
    CHECK_OK(etch_method_execute(f.m));
    l = logits(&f, &n);
    CHECK(memcmp(l, ref, n * sizeof *ref) == 0);
    printf("method job: cancel after %ld of %zu instructions stops there\n", k, total);

    /* wait with a timeout while it runs (slow callbacks), then cancel from here */
    CHECK_OK(etch_method_reset(f.m));
    CHECK(fwd_inputs(&f));
    watch_init(&w);
    w.sleep_us = 2000;
    CHECK_OK(etch_job_start_execute(f.m, &cb, &job));
    CHECK(!etch_job_wait(job, 5));
    CHECK(!etch_job_done(job));
    CHECK_STATUS(etch_job_status(job), ETCH_ERR_INVALID_STATE);
    etch_job_cancel(job);
    etch_job_cancel(job); /* idempotent */
    CHECK(etch_job_wait(job, 60000));
    CHECK_STATUS(etch_job_status(job), ETCH_ERR_CANCELLED);
    CHECK(atomic_load(&w.progress) < (long)total);
    etch_job_free(job);

    /* cancel from this thread at pseudo-random points */
    unsigned seed = 12345, ok = 0, cancelled = 0;
    for (int it = 0; it < 40; it++) {
        CHECK_OK(etch_method_reset(f.m));
        CHECK(fwd_inputs(&f));
        watch_init(&w);
        CHECK_OK(etch_job_start_execute(f.m, &cb, &job));
        seed = seed * 1103515245u + 12345u;
        sleep_us((long)((seed >> 16) % 2000));
        etch_job_cancel(job);
        CHECK(etch_job_wait(job, -1));
        etch_status st = etch_job_status(job);
        CHECK(st == ETCH_OK || st == ETCH_ERR_CANCELLED);
        ok += st == ETCH_OK;
        cancelled += st == ETCH_ERR_CANCELLED;
        CHECK(atomic_load(&w.done) == 1 && atomic_load(&w.after) == 0);
        etch_job_free(job);
        CHECK_OK(etch_method_reset(f.m));
        CHECK(fwd_inputs(&f));
        CHECK_OK(etch_method_execute(f.m));
        l = logits(&f, &n);
        CHECK(memcmp(l, ref, n * sizeof *ref) == 0);
    }
    printf("method job: 40 cancels at random points: %u finished first, %u cancelled\n", ok,
           cancelled);
    /* freeing a running job cancels and waits */
    CHECK_OK(etch_method_reset(f.m));
    CHECK(fwd_inputs(&f));
    watch_init(&w);
    w.sleep_us = 1000;
    CHECK_OK(etch_job_start_execute(f.m, &cb, &job));
    etch_job_free(job);
    CHECK(atomic_load(&w.done) == 1);
    free(ref);
    etch_module_close(f.mod);
}

typedef struct sync_ids {
    int32_t ids[64];
    long n;
} sync_ids;

static int collect(void *ud, int32_t id, const char *text, size_t len) {
    sync_ids *s = (sync_ids *)ud;
    (void)text;
    (void)len;
    if (id >= 0 && s->n < 64)
        s->ids[s->n++] = id;
    return 0;
}

static etch_llm_runner *open_runner(const char *model, etch_tokenizer *tok) {
    etch_llm_runner_options o = etch_llm_runner_default_options();
    o.sampler.temperature = 0.0f; /* greedy: the same ids after a reset as from a new runner */
    etch_llm_runner *r = NULL;
    CHECK_OK(etch_llm_runner_open(model, tok, &o, &r));
    return r;
}

static void test_generate(const char *model, const char *tokpath) {
    etch_tokenizer *tok = NULL;
    CHECK_OK(etch_tokenizer_open_file(tokpath, NULL, &tok));
    if (!tok)
        return;
    const char *prompt = "Once upon a time";
    etch_llm_generate_params gp = etch_llm_generate_default_params();
    gp.max_new_tokens = 20;
    gp.ignore_eos = true;

    /* synchronous reference */
    etch_llm_runner *r = open_runner(model, tok);
    if (!r)
        return;
    sync_ids ref = {{0}, 0};
    gp.on_token = collect;
    gp.user_data = &ref;
    etch_llm_result res;
    CHECK_OK(etch_llm_runner_generate(r, prompt, strlen(prompt), &gp, &res));
    etch_llm_runner_close(r);

    /* the same in the background: same ids through on_token and on_progress */
    r = open_runner(model, tok);
    sync_ids got = {{0}, 0};
    gp.user_data = &got;
    watch w;
    watch_init(&w);
    etch_job_callbacks cb = {on_progress, on_done, &w};
    etch_job *job = NULL;
    CHECK_OK(etch_job_start_generate(r, prompt, strlen(prompt), &gp, &cb, &job));
    CHECK(etch_job_wait(job, -1));
    CHECK_OK(etch_job_status(job));
    etch_llm_result jr = etch_job_llm_result(job);
    CHECK(jr.generated_tokens == 20 && jr.stop_reason == ETCH_LLM_STOP_MAX_TOKENS);
    CHECK(got.n == ref.n && memcmp(got.ids, ref.ids, (size_t)ref.n * sizeof(int32_t)) == 0);
    CHECK(w.nids == ref.n && memcmp(w.ids, ref.ids, (size_t)ref.n * sizeof(int32_t)) == 0);
    CHECK(atomic_load(&w.done) == 1 && atomic_load(&w.after) == 0 && w.in_order);
    etch_job_free(job);
    printf("generate job: %ld tokens, the same as a synchronous generate\n", ref.n);

    /* cancel from on_progress after 3 tokens; the runner goes on afterwards */
    etch_llm_runner_reset(r);
    watch_init(&w);
    w.cancel_at = 3;
    got.n = 0;
    CHECK_OK(etch_job_start_generate(r, prompt, strlen(prompt), &gp, &cb, &job));
    atomic_store(&w.job, job);
    CHECK(etch_job_wait(job, -1));
    CHECK_STATUS(etch_job_status(job), ETCH_ERR_CANCELLED);
    jr = etch_job_llm_result(job);
    CHECK_MSG(jr.generated_tokens == 3 && jr.stop_reason == ETCH_LLM_STOP_CANCELLED,
              "%lld tokens, stop %s", (long long)jr.generated_tokens,
              etch_llm_stop_reason_str(jr.stop_reason));
    CHECK(got.n == 3 && memcmp(got.ids, ref.ids, 3 * sizeof(int32_t)) == 0);
    etch_job_free(job);
    etch_llm_runner_reset(r);
    got.n = 0;
    gp.user_data = &got;
    CHECK_OK(etch_llm_runner_generate(r, prompt, strlen(prompt), &gp, &res));
    CHECK(res.generated_tokens == 20);

    /* cancel at random points from here (prefill or decode): Ok or Cancelled, never more
     * tokens than asked, and the runner still generates afterwards */
    unsigned seed = 99, cancelled = 0;
    for (int it = 0; it < 12; it++) {
        etch_llm_runner_reset(r);
        watch_init(&w);
        CHECK_OK(etch_job_start_generate(r, prompt, strlen(prompt), &gp, &cb, &job));
        seed = seed * 1103515245u + 12345u;
        sleep_us((long)((seed >> 16) % 3000));
        etch_job_cancel(job);
        CHECK(etch_job_wait(job, -1));
        etch_status st = etch_job_status(job);
        CHECK(st == ETCH_OK || st == ETCH_ERR_CANCELLED);
        cancelled += st == ETCH_ERR_CANCELLED;
        CHECK(etch_job_llm_result(job).generated_tokens <= 20);
        etch_job_free(job);
    }
    etch_llm_runner_reset(r);
    got.n = 0;
    CHECK_OK(etch_llm_runner_generate(r, prompt, strlen(prompt), &gp, &res));
    etch_llm_runner_reset(r);
    printf("generate job: 12 cancels at random points, %u cancelled\n", cancelled);

    /* the prompt and stop ids are copied at start */
    char *p = strdup(prompt);
    int32_t *stop = (int32_t *)malloc(sizeof *stop);
    stop[0] = -5;
    gp.stop_ids = stop;
    gp.n_stop_ids = 1;
    got.n = 0;
    CHECK_OK(etch_job_start_generate(r, p, strlen(p), &gp, NULL, &job));
    memset(p, 'x', strlen(p));
    free(p);
    free(stop);
    CHECK(etch_job_wait(job, -1));
    CHECK_OK(etch_job_status(job));
    CHECK(got.n == ref.n && memcmp(got.ids, ref.ids, (size_t)ref.n * sizeof(int32_t)) == 0);
    etch_job_free(job);
    etch_llm_runner_close(r);
    etch_tokenizer_close(tok);
}

static void test_bad_args(void) {
    etch_job *job = (etch_job *)1;
    CHECK_STATUS(etch_job_start_execute(NULL, NULL, &job), ETCH_ERR_INVALID_ARGUMENT);
    CHECK(job == NULL);
    CHECK_STATUS(etch_job_start_generate(NULL, "x", 1, NULL, NULL, &job),
                 ETCH_ERR_INVALID_ARGUMENT);
    etch_job_cancel(NULL);
    CHECK(etch_job_wait(NULL, 0));
    CHECK_STATUS(etch_job_status(NULL), ETCH_ERR_INVALID_ARGUMENT);
    etch_job_free(NULL);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.pte TOKENIZER\n", argv[0]);
        return 2;
    }
    test_bad_args();
    test_method(argv[1]);
    test_generate(argv[1], argv[2]);
    return etch_test_finish();
}
