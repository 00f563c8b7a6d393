/*
 * Background execution: run a method, or an LLM generation, on a worker thread, with progress,
 * cancellation and a wait with timeout.
 *
 *   etch_job_callbacks cb = {.on_progress = show, .on_done = finished, .user_data = ui};
 *   etch_job *job;
 *   etch_job_start_generate(runner, prompt, strlen(prompt), &params, &cb, &job);
 *   ...                                   // the UI thread goes on; show() streams tokens
 *   etch_job_cancel(job);                 // any thread, any time: takes effect within one
 *                                         // instruction (methods) / one token (generation)
 *   if (etch_job_wait(job, 2000))         // true once finished (here: within 2 s)
 *       st = etch_job_status(job);        // ETCH_OK, ETCH_ERR_CANCELLED, or the failure
 *   etch_job_free(job);                   // cancels, waits, frees
 *
 * Threads and ownership:
 * - While a job runs, its method or runner (and the tokenizer the runner uses) belongs to the
 *   job: the caller must not use them until etch_job_wait has returned true (or
 *   etch_job_free returned). One job at a time per method / runner.
 * - The prompt and the generate parameters are copied at start (stop ids included): the
 *   caller's buffers may go right away. Inputs set on a method before the start stay the
 *   caller's, as for etch_method_execute (borrowed inputs must outlive the job).
 * - The callbacks run on the worker thread, with `user_data`, in order: every on_progress
 *   before on_done, and on_done exactly once, last. They may call etch_job_cancel and
 *   etch_job_status / etch_job_error of their own job; they must not call etch_job_wait or
 *   etch_job_free on it (that would wait for itself).
 * - etch_job_cancel, etch_job_wait, etch_job_done and etch_job_status may be called from any
 *   thread, concurrently. etch_job_free must be called once, from one thread, by the owner.
 * - The job installs the method's (runner's) interrupt check and observer for its run and
 *   removes them when it finishes.
 *
 * A cancelled method execute has undefined outputs and may leave mutable state half updated
 * (etch_method_reset restores it). A cancelled generation keeps the context it had fed
 * (etch_llm_runner_set_interrupt); its status is ETCH_ERR_CANCELLED, and the result's
 * stop_reason is CANCELLED.
 */
#ifndef ETCH_ASYNC_H
#define ETCH_ASYNC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etch/llm_runner.h"
#include "etch/program.h"
#include "etch/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct etch_job etch_job;

typedef struct etch_job_progress {
    /* methods: instructions run (a skipped, fused one included) out of `total`, the
     * instructions of its chains (a program that jumps may run more); generation: tokens
     * generated out of max_new_tokens (0 when unbounded) */
    size_t done, total;
    double elapsed_ms;   /* since the job started */
    const char *op_name; /* methods: the operator of the instruction just run, else NULL */
    int32_t token;       /* generation: the id just generated (-1 for echoed prompt text) */
    const char *text;    /* generation: its text (not NUL-terminated), else NULL */
    size_t text_len;
} etch_job_progress;

typedef void (*etch_job_progress_fn)(void *user_data, const etch_job_progress *p);
typedef void (*etch_job_done_fn)(void *user_data, etch_status status);

typedef struct etch_job_callbacks {
    etch_job_progress_fn on_progress; /* may be NULL */
    etch_job_done_fn on_done;         /* may be NULL */
    void *user_data;
} etch_job_callbacks;

/* Start etch_method_execute(method) on a new worker thread. `cb` may be NULL. Fails (nothing
 * started) on a NULL argument or when no thread can be made. */
etch_status etch_job_start_execute(etch_method *method, const etch_job_callbacks *cb,
                                   etch_job **out);

/* Start etch_llm_runner_generate(runner, prompt, len, params, ...) on a new worker thread;
 * `params` NULL: the defaults. params->on_token is called before on_progress for each token
 * (its non-zero return stops generation as usual). */
etch_status etch_job_start_generate(etch_llm_runner *runner, const char *prompt, size_t len,
                                    const etch_llm_generate_params *params,
                                    const etch_job_callbacks *cb, etch_job **out);

/* Ask the job to stop; returns at once. Idempotent; no effect once the job has finished. */
void etch_job_cancel(etch_job *job);

/* Wait until the job has finished (on_done has returned): true when it has, false when
 * timeout_ms passed first. timeout_ms < 0 waits as long as it takes; 0 polls. */
bool etch_job_wait(etch_job *job, int64_t timeout_ms);
bool etch_job_done(const etch_job *job); /* finished, without waiting */

/* Once the run has ended (from on_done on): its status (ETCH_ERR_CANCELLED when
 * etch_job_cancel stopped it) and its error message ("" on success); before that,
 * ETCH_ERR_INVALID_STATE and "". */
etch_status etch_job_status(const etch_job *job);
const char *etch_job_error(const etch_job *job);
/* A generation's result once the run has ended (zeros before, and for a method job). */
etch_llm_result etch_job_llm_result(const etch_job *job);

/* Cancel, wait for the worker, free. NULL is fine. Not from the job's own callbacks. */
void etch_job_free(etch_job *job);

#ifdef __cplusplus
}
#endif
#endif
