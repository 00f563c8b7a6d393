/*
 * etch/threadpool.h — a pthreads thread pool for kernels that split their work.
 *
 * Basic usage (the module API does this for you: etch_module_options.num_threads):
 *
 *   etch_threadpool *pool;
 *   if (etch_threadpool_create(4, &pool) != ETCH_OK) { ...etch_last_error()... }
 *   etch_method_options mo = {0};
 *   mo.threadpool = etch_threadpool_get_iface(pool);  // kernels now use 4 threads
 *   etch_method_load(prog, "forward", &mem, &mo, &m);
 *   ...etch_method_execute(m)...
 *   etch_method_free(m);
 *   etch_threadpool_destroy(pool);                 // after every method that uses it
 *
 * num_threads counts the calling thread: a pool of N starts N - 1 workers, once, at create.
 * A parallel_for gives each participant a share of [0, n): with P = min(N, n / grain)
 * participants (the caller first, then the workers in order), share k is part k of [0, n) cut
 * in P balanced parts (the first n % P parts one item longer), the same in every call with the
 * same n, grain and pool, so that work split the same way in consecutive calls (rows of an
 * image, say) stays on the same core. Each share is cut into up to 8 balanced chunks of at
 * least `grain` items; a participant runs its own chunks first, then takes the remaining
 * chunks of others (so a late thread's work is not waited for). It returns when every chunk is
 * done. It never allocates and never creates threads. Workers that just finished a job
 * spin briefly (about 50 microseconds) for the next one, then sleep on a condition variable.
 *
 * Runs serially, inline in the caller (no hand-off): n <= grain, a pool of 1 thread, a
 * parallel_for nested inside a chunk of another one (any pool), and a call made while another
 * thread is already using the same pool. So a pool may be shared by several methods and
 * threads: nothing deadlocks, a contended pool only runs serially.
 */
#ifndef ETCH_THREADPOOL_H
#define ETCH_THREADPOOL_H

#include "etch/kernel.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most threads a pool can have. */
#define ETCH_THREADPOOL_MAX_THREADS 256

typedef struct etch_threadpool etch_threadpool;

/* num_threads in [1, ETCH_THREADPOOL_MAX_THREADS] (ETCH_ERR_INVALID_ARGUMENT otherwise);
 * ETCH_ERR_OUT_OF_RESOURCES when a thread cannot be started (none is left running). */
etch_status etch_threadpool_create(int num_threads, etch_threadpool **out);
/* Stops and joins the workers; NULL is fine. No parallel_for may be running on it. */
void etch_threadpool_destroy(etch_threadpool *pool);
int etch_threadpool_num_threads(const etch_threadpool *pool); /* 1 for NULL */
/* The runtime's view of the pool (etch_method_options.threadpool); lives as long as pool. */
const etch_threadpool_iface *etch_threadpool_get_iface(etch_threadpool *pool);
/* Run fn(arg, begin, end) over [0, n) as described above (grain <= 0 means 1). */
void etch_threadpool_parallel_for(etch_threadpool *pool, int64_t n, int64_t grain,
                                  etch_parallel_fn fn, void *arg);
/* The same, each chunk told the participant running it (0 the caller, i + 1 worker i; 0 for
 * every chunk when the call runs serially): fn(arg, participant, begin, end). A participant's
 * chunks of its own share come in ascending order, each continuing the one before; chunks
 * it takes from others come after them, from the back of their shares. */
void etch_threadpool_parallel_for_thread(etch_threadpool *pool, int64_t n, int64_t grain,
                                         etch_parallel_thread_fn fn, void *arg);

#ifdef __cplusplus
}
#endif
#endif
