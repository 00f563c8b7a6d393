/* Background execution (etch/async.h): one worker thread per job, pthreads. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etch/async.h"
#include "runtime/error.h"

typedef enum { JOB_EXECUTE, JOB_GENERATE } job_kind;

struct etch_job {
    job_kind kind;
    etch_method *method;
    etch_llm_runner *runner;
    char *prompt;
    size_t prompt_len;
    int32_t *stop_ids;
    etch_llm_generate_params params; /* the caller's, stop_ids pointing at our copy */
    etch_job_callbacks cb;

    pthread_t thread;
    atomic_bool cancel;
    struct timespec t0;
    size_t total, done;

    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool resolved; /* under lock: status, error and result are final (on_done may run) */
    bool finished; /* under lock: on_done has returned */
    etch_status status;
    char error[512];
    etch_llm_result result;
};

static double elapsed_ms(const etch_job *j) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - j->t0.tv_sec) * 1e3 + (double)(t.tv_nsec - j->t0.tv_nsec) / 1e6;
}

static int interrupt(void *user_data) {
    return atomic_load_explicit(&((etch_job *)user_data)->cancel, memory_order_relaxed);
}

static void on_instruction(void *user_data, size_t chain, size_t pc, const char *op_name) {
    etch_job *j = (etch_job *)user_data;
    j->done++;
    if (!j->cb.on_progress)
        return;
    etch_job_progress p;
    memset(&p, 0, sizeof p);
    p.done = j->done;
    p.total = j->total;
    p.elapsed_ms = elapsed_ms(j);
    p.op_name = op_name;
    p.token = -1;
    j->cb.on_progress(j->cb.user_data, &p);
}

static int on_token(void *user_data, int32_t id, const char *text, size_t len) {
    etch_job *j = (etch_job *)user_data;
    int stop = 0;
    if (j->params.on_token)
        stop = j->params.on_token(j->params.user_data, id, text, len);
    if (id >= 0 || !j->params.echo)
        j->done++;
    if (j->cb.on_progress) {
        etch_job_progress p;
        memset(&p, 0, sizeof p);
        p.done = j->done;
        p.total = j->total;
        p.elapsed_ms = elapsed_ms(j);
        p.token = id;
        p.text = text;
        p.text_len = len;
        j->cb.on_progress(j->cb.user_data, &p);
    }
    return stop || interrupt(j);
}

static void *worker(void *arg) {
    etch_job *j = (etch_job *)arg;
    etch_status st;
    etch_llm_result res;
    memset(&res, 0, sizeof res);
    res.stop_id = -1;
    if (j->kind == JOB_EXECUTE) {
        etch_method_set_interrupt(j->method, interrupt, j);
        etch_method_set_observer(j->method, on_instruction, j);
        st = atomic_load(&j->cancel) ? etch_err(ETCH_ERR_CANCELLED, "cancelled before it ran")
                                     : etch_method_execute(j->method);
        etch_method_set_observer(j->method, NULL, NULL);
        etch_method_set_interrupt(j->method, NULL, NULL);
    } else {
        etch_llm_generate_params gp = j->params;
        gp.on_token = on_token;
        gp.user_data = j;
        etch_llm_runner_set_interrupt(j->runner, interrupt, j);
        st = atomic_load(&j->cancel)
                 ? etch_err(ETCH_ERR_CANCELLED, "cancelled before it ran")
                 : etch_llm_runner_generate(j->runner, j->prompt, j->prompt_len, &gp, &res);
        etch_llm_runner_set_interrupt(j->runner, NULL, NULL);
        /* stopped by etch_job_cancel, not by the caller's own on_token */
        if (st == ETCH_OK && res.stop_reason == ETCH_LLM_STOP_CANCELLED && atomic_load(&j->cancel))
            st = etch_err(ETCH_ERR_CANCELLED, "generation cancelled after %lld tokens",
                          (long long)res.generated_tokens);
    }
    pthread_mutex_lock(&j->lock);
    j->status = st;
    snprintf(j->error, sizeof j->error, "%s", st == ETCH_OK ? "" : etch_last_error());
    j->result = res;
    j->resolved = true;
    pthread_mutex_unlock(&j->lock);
    if (j->cb.on_done)
        j->cb.on_done(j->cb.user_data, st);
    pthread_mutex_lock(&j->lock);
    j->finished = true;
    pthread_cond_broadcast(&j->cond);
    pthread_mutex_unlock(&j->lock);
    return NULL;
}

static void job_release(etch_job *j) {
    pthread_cond_destroy(&j->cond);
    pthread_mutex_destroy(&j->lock);
    free(j->prompt);
    free(j->stop_ids);
    free(j);
}

static etch_status job_new(job_kind kind, const etch_job_callbacks *cb, etch_job **out) {
    etch_job *j = (etch_job *)calloc(1, sizeof *j);
    if (!j)
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "job: out of memory");
    if (pthread_mutex_init(&j->lock, NULL) != 0) {
        free(j);
        return etch_err(ETCH_ERR_OUT_OF_RESOURCES, "job: cannot make a mutex");
    }
    if (pthread_cond_init(&j->cond, NULL) != 0) {
        pthread_mutex_destroy(&j->lock);
        free(j);
        return etch_err(ETCH_ERR_OUT_OF_RESOURCES, "job: cannot make a condition variable");
    }
    if (cb)
        j->cb = *cb;
    j->kind = kind;
    atomic_init(&j->cancel, false);
    j->status = ETCH_ERR_INVALID_STATE;
    *out = j;
    return ETCH_OK;
}

static etch_status job_launch(etch_job *j, etch_job **out) {
    clock_gettime(CLOCK_MONOTONIC, &j->t0);
    int e = pthread_create(&j->thread, NULL, worker, j);
    if (e != 0) {
        job_release(j);
        return etch_err(ETCH_ERR_OUT_OF_RESOURCES, "job: cannot start a thread: %s",
                        strerror(e));
    }
    *out = j;
    return ETCH_OK;
}

etch_status etch_job_start_execute(etch_method *method, const etch_job_callbacks *cb,
                                   etch_job **out) {
    if (out)
        *out = NULL;
    if (!method || !out)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "job_start_execute: NULL argument");
    etch_job *j;
    etch_status st = job_new(JOB_EXECUTE, cb, &j);
    if (st)
        return st;
    j->method = method;
    for (size_t c = 0; c < etch_method_num_chains(method); c++)
        j->total += etch_method_chain_length(method, c);
    return job_launch(j, out);
}

etch_status etch_job_start_generate(etch_llm_runner *runner, const char *prompt, size_t len,
                                    const etch_llm_generate_params *params,
                                    const etch_job_callbacks *cb, etch_job **out) {
    if (out)
        *out = NULL;
    if (!runner || !out || (!prompt && len))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "job_start_generate: NULL argument");
    etch_job *j;
    etch_status st = job_new(JOB_GENERATE, cb, &j);
    if (st)
        return st;
    j->runner = runner;
    j->params = params ? *params : etch_llm_generate_default_params();
    j->prompt = (char *)malloc(len + 1);
    size_t nstop = j->params.stop_ids ? j->params.n_stop_ids : 0;
    j->stop_ids = nstop ? (int32_t *)malloc(nstop * sizeof *j->stop_ids) : NULL;
    if (!j->prompt || (nstop && !j->stop_ids)) {
        job_release(j);
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "job: out of memory");
    }
    if (len)
        memcpy(j->prompt, prompt, len);
    j->prompt[len] = 0;
    j->prompt_len = len;
    if (nstop)
        memcpy(j->stop_ids, j->params.stop_ids, nstop * sizeof *j->stop_ids);
    j->params.stop_ids = j->stop_ids;
    j->params.n_stop_ids = nstop;
    j->total = j->params.max_new_tokens > 0 ? (size_t)j->params.max_new_tokens : 0;
    return job_launch(j, out);
}

void etch_job_cancel(etch_job *job) {
    if (job)
        atomic_store(&job->cancel, true);
}

bool etch_job_wait(etch_job *job, int64_t timeout_ms) {
    if (!job)
        return true;
    struct timespec until;
    if (timeout_ms > 0) {
        clock_gettime(CLOCK_REALTIME, &until); /* pthread_cond_timedwait's default clock */
        until.tv_sec += (time_t)(timeout_ms / 1000);
        until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&job->lock);
    while (!job->finished) {
        if (timeout_ms == 0)
            break;
        if (timeout_ms < 0) {
            pthread_cond_wait(&job->cond, &job->lock);
        } else if (pthread_cond_timedwait(&job->cond, &job->lock, &until) == ETIMEDOUT) {
            break;
        }
    }
    bool done = job->finished;
    pthread_mutex_unlock(&job->lock);
    return done;
}

bool etch_job_done(const etch_job *job) { return etch_job_wait((etch_job *)job, 0); }

etch_status etch_job_status(const etch_job *job) {
    if (!job)
        return ETCH_ERR_INVALID_ARGUMENT;
    etch_job *j = (etch_job *)job;
    pthread_mutex_lock(&j->lock);
    etch_status st = j->resolved ? j->status : ETCH_ERR_INVALID_STATE;
    pthread_mutex_unlock(&j->lock);
    return st;
}

const char *etch_job_error(const etch_job *job) {
    if (!job)
        return "";
    etch_job *j = (etch_job *)job;
    pthread_mutex_lock(&j->lock);
    const char *e = j->resolved ? j->error : "";
    pthread_mutex_unlock(&j->lock);
    return e; /* final once finished: never written again */
}

etch_llm_result etch_job_llm_result(const etch_job *job) {
    etch_llm_result r;
    memset(&r, 0, sizeof r);
    r.stop_id = -1;
    if (!job)
        return r;
    etch_job *j = (etch_job *)job;
    pthread_mutex_lock(&j->lock);
    if (j->resolved)
        r = j->result;
    pthread_mutex_unlock(&j->lock);
    return r;
}

void etch_job_free(etch_job *job) {
    if (!job)
        return;
    etch_job_cancel(job);
    pthread_join(job->thread, NULL);
    job_release(job);
}
