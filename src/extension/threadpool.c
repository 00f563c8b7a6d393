/* The pthreads thread pool behind etch/threadpool.h.
 *
 * One job at a time per pool. The job is published through one 64-bit atomic word,
 *   state = generation (32 bits) | number of chunks (16 bits) | next chunk to claim (16 bits),
 * and a chunk is claimed with a compare-and-swap on that word. A claim can only succeed for the
 * generation it was read from, so a worker that wakes late (after its job finished and the next
 * one was published) can never run a chunk of the wrong job, and the job's fields (fn, arg, n)
 * stay unchanged until every claimed chunk is counted in `done`: the caller returns, and may
 * publish the next job, only when done == number of chunks.
 *
 * Sleeping uses the classic pairing of a seq_cst store and a seq_cst load on each side (the
 * publisher stores state then reads `sleepers`; a worker increments `sleepers` under the mutex
 * then re-reads state), so a wake-up is never lost; the same for the caller waiting on `done`.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etch/threadpool.h"
#include "runtime/error.h"

#define CHUNKS_PER_THREAD 4
#define SPIN_NS 50000 /* how long an idle participant spins before sleeping */
#define CACHE_LINE 64

#define ST_GEN(s) ((uint32_t)((s) >> 32))
#define ST_NCHUNKS(s) ((uint32_t)(((s) >> 16) & 0xffffu))
#define ST_NEXT(s) ((uint32_t)((s)&0xffffu))
#define ST_MAKE(gen, nchunks, next)                                                          \
    (((uint64_t)(gen) << 32) | ((uint64_t)(nchunks) << 16) | (uint64_t)(next))

struct etch_threadpool {
    /* written by the caller of parallel_for, read by everyone */
    _Alignas(CACHE_LINE) _Atomic uint64_t state;
    etch_parallel_fn fn;
    void *arg;
    int64_t n;
    /* chunk counting */
    _Alignas(CACHE_LINE) _Atomic uint32_t done;
    _Atomic int caller_waiting;
    /* sleeping workers */
    _Alignas(CACHE_LINE) _Atomic int sleepers;
    _Atomic int stop;
    pthread_mutex_t mu;
    pthread_cond_t wake;     /* workers: a new job (or stop) */
    pthread_cond_t finished; /* caller: done reached the chunk count */
    /* one caller at a time; others run serially */
    pthread_mutex_t submit;
    int num_threads;
    int num_workers; /* started */
    etch_threadpool_iface iface;
    pthread_t workers[];
};

/* Nonzero while this thread runs chunks of some pool: nested calls run inline. */
static _Thread_local int in_parallel_region;

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield");
#endif
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Chunk c of nchunks over [0, n): the first n % nchunks chunks have one item more. */
static void chunk_range(int64_t n, uint32_t nchunks, uint32_t c, int64_t *begin, int64_t *end) {
    int64_t q = n / nchunks, r = n % nchunks;
    *begin = (int64_t)c * q + ((int64_t)c < r ? (int64_t)c : r);
    *end = *begin + q + ((int64_t)c < r ? 1 : 0);
}

/* Claim and run chunks of generation `gen` until none is left; returns how many were run. */
static uint32_t run_chunks(etch_threadpool *p, uint32_t gen) {
    uint32_t ran = 0;
    uint64_t s = atomic_load_explicit(&p->state, memory_order_acquire);
    for (;;) {
        if (ST_GEN(s) != gen || ST_NEXT(s) >= ST_NCHUNKS(s))
            break;
        if (!atomic_compare_exchange_weak_explicit(&p->state, &s, s + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue; /* s reloaded */
        int64_t b, e;
        chunk_range(p->n, ST_NCHUNKS(s), ST_NEXT(s), &b, &e);
        in_parallel_region++;
        p->fn(p->arg, b, e);
        in_parallel_region--;
        ran++;
        s = atomic_load_explicit(&p->state, memory_order_acquire);
    }
    return ran;
}

/* Count chunks as done; the one that completes the job wakes a sleeping caller. */
static void add_done(etch_threadpool *p, uint32_t ran, uint32_t nchunks) {
    if (!ran)
        return;
    uint32_t d = atomic_fetch_add(&p->done, ran) + ran; /* seq_cst */
    if (d == nchunks && atomic_load(&p->caller_waiting)) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_signal(&p->finished);
        pthread_mutex_unlock(&p->mu);
    }
}

static void *worker_main(void *self) {
    etch_threadpool *p = (etch_threadpool *)self;
    uint32_t seen = 0; /* the generation at create: a job published before this thread got
                          here is still seen as new */
    for (;;) {
        /* wait for a generation other than `seen`: spin, then sleep */
        uint64_t s = atomic_load_explicit(&p->state, memory_order_acquire);
        if (ST_GEN(s) == seen && !atomic_load_explicit(&p->stop, memory_order_relaxed)) {
            int64_t until = now_ns() + SPIN_NS;
            for (unsigned k = 1;; k++) {
                cpu_relax();
                s = atomic_load_explicit(&p->state, memory_order_acquire);
                if (ST_GEN(s) != seen || atomic_load_explicit(&p->stop, memory_order_relaxed))
                    break;
                if ((k & 63) == 0 && now_ns() > until)
                    break;
            }
        }
        if (ST_GEN(s) == seen && !atomic_load(&p->stop)) {
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1); /* seq_cst, then re-read state */
            while (ST_GEN(s = atomic_load(&p->state)) == seen && !atomic_load(&p->stop))
                pthread_cond_wait(&p->wake, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop))
            return NULL;
        seen = ST_GEN(s);
        add_done(p, run_chunks(p, seen), ST_NCHUNKS(s));
    }
}

void etch_threadpool_parallel_for(etch_threadpool *p, int64_t n, int64_t grain,
                                  etch_parallel_fn fn, void *arg) {
    if (n <= 0 || !fn)
        return;
    if (grain < 1)
        grain = 1;
    int64_t max_chunks = p ? (int64_t)p->num_threads * CHUNKS_PER_THREAD : 1;
    int64_t nchunks = n / grain; /* every chunk then holds >= grain items */
    if (nchunks > max_chunks)
        nchunks = max_chunks;
    if (nchunks < 2 || p->num_workers == 0 || in_parallel_region ||
        pthread_mutex_trylock(&p->submit) != 0) {
        in_parallel_region++;
        fn(arg, 0, n);
        in_parallel_region--;
        return;
    }
    p->fn = fn;
    p->arg = arg;
    p->n = n;
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    uint32_t gen = ST_GEN(atomic_load_explicit(&p->state, memory_order_relaxed)) + 1;
    atomic_store(&p->state, ST_MAKE(gen, (uint32_t)nchunks, 0)); /* seq_cst: publishes */
    int sleeping = atomic_load(&p->sleepers);
    if (sleeping > 0) {
        pthread_mutex_lock(&p->mu);
        if (nchunks - 1 >= p->num_workers)
            pthread_cond_broadcast(&p->wake);
        else
            for (int64_t k = 0; k < nchunks - 1; k++)
                pthread_cond_signal(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    uint32_t ran = run_chunks(p, gen);
    uint32_t total = (uint32_t)nchunks;
    uint32_t d = ran ? atomic_fetch_add(&p->done, ran) + ran : atomic_load(&p->done);
    if (d != total) {
        int64_t until = now_ns() + SPIN_NS;
        for (unsigned k = 1; (d = atomic_load_explicit(&p->done, memory_order_acquire)) != total;
             k++) {
            cpu_relax();
            if ((k & 63) == 0 && now_ns() > until)
                break;
        }
        if (d != total) {
            pthread_mutex_lock(&p->mu);
            atomic_store(&p->caller_waiting, 1); /* seq_cst, then re-read done */
            while (atomic_load(&p->done) != total)
                pthread_cond_wait(&p->finished, &p->mu);
            atomic_store(&p->caller_waiting, 0);
            pthread_mutex_unlock(&p->mu);
        }
    }
    pthread_mutex_unlock(&p->submit);
}

static void iface_parallel_for(void *self, int64_t n, int64_t grain, etch_parallel_fn fn,
                               void *arg) {
    etch_threadpool_parallel_for((etch_threadpool *)self, n, grain, fn, arg);
}

static void stop_workers(etch_threadpool *p) {
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->num_workers; i++)
        pthread_join(p->workers[i], NULL);
    p->num_workers = 0;
}

etch_status etch_threadpool_create(int num_threads, etch_threadpool **out) {
    if (!out)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "threadpool_create: NULL argument");
    if (num_threads < 1 || num_threads > ETCH_THREADPOOL_MAX_THREADS)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "threadpool_create: %d threads is outside [1, %d]", num_threads,
                        ETCH_THREADPOOL_MAX_THREADS);
    size_t size = sizeof(etch_threadpool) + (size_t)(num_threads - 1) * sizeof(pthread_t);
    size = (size + CACHE_LINE - 1) / CACHE_LINE * CACHE_LINE;
    etch_threadpool *p = aligned_alloc(CACHE_LINE, size);
    if (!p)
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "threadpool_create: out of memory");
    memset(p, 0, size);
    atomic_init(&p->state, 0);
    atomic_init(&p->done, 0);
    atomic_init(&p->caller_waiting, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->stop, 0);
    p->num_threads = num_threads;
    p->iface.self = p;
    p->iface.num_threads = num_threads;
    p->iface.parallel_for = iface_parallel_for;
    if (pthread_mutex_init(&p->mu, NULL) != 0) {
        free(p);
        return etch_err(ETCH_ERR_OUT_OF_RESOURCES, "threadpool_create: cannot create a mutex");
    }
    if (pthread_mutex_init(&p->submit, NULL) != 0) {
        pthread_mutex_destroy(&p->mu);
        free(p);
        return etch_err(ETCH_ERR_OUT_OF_RESOURCES, "threadpool_create: cannot create a mutex");
    }
    if (pthread_cond_init(&p->wake, NULL) != 0) {
        pthread_mutex_destroy(&p->submit);
        pthread_mutex_destroy(&p->mu);
        free(p);
        return etch_err(ETCH_ERR_OUT_OF_RESOURCES,
                        "threadpool_create: cannot create a condition variable");
    }
    if (pthread_cond_init(&p->finished, NULL) != 0) {
        pthread_cond_destroy(&p->wake);
        pthread_mutex_destroy(&p->submit);
        pthread_mutex_destroy(&p->mu);
        free(p);
        return etch_err(ETCH_ERR_OUT_OF_RESOURCES,
                        "threadpool_create: cannot create a condition variable");
    }
    /* Workers take no signals: they go to the application's threads. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int err = 0;
    for (int i = 0; i < num_threads - 1; i++) {
        if ((err = pthread_create(&p->workers[i], NULL, worker_main, p)) != 0)
            break;
        p->num_workers++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err) {
        int started = p->num_workers;
        etch_threadpool_destroy(p);
        return etch_err(ETCH_ERR_OUT_OF_RESOURCES,
                        "threadpool_create: could start only %d of %d worker threads",
                        started, num_threads - 1);
    }
    *out = p;
    return ETCH_OK;
}

void etch_threadpool_destroy(etch_threadpool *p) {
    if (!p)
        return;
    stop_workers(p);
    pthread_cond_destroy(&p->finished);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->submit);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

int etch_threadpool_num_threads(const etch_threadpool *p) { return p ? p->num_threads : 1; }

const etch_threadpool_iface *etch_threadpool_get_iface(etch_threadpool *p) {
    return p ? &p->iface : NULL;
}
