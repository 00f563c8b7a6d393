/* The pthreads thread pool behind etch/threadpool.h.
 *
 * One job at a time per pool. [0, n) is cut into shares, one per participant (the caller is
 * participant 0, worker i participant i + 1; fewer participants when n holds fewer grains):
 * share k is part k of [0, n) cut in balanced parts (the first n % parts one item longer), so a
 * participant handles the same part of [0, n) in every job of the same size. Kernels that split
 * their work the same way in consecutive calls thus read and write mostly lines the same core
 * touched last, which matters where moving a cache line between cores is slow (hundreds of
 * nanoseconds between the vCPUs of some virtual machines). Each share is cut into up to
 * CHUNKS_PER_THREAD balanced chunks of at least `grain` items, numbered consecutively across the
 * shares, and each participant's chunks form its home range, one atomic word,
 *   range[k] = generation (32 bits) | front (16 bits) | back (16 bits),
 * from which its owner claims chunks at the front; once its own range is empty, a participant
 * steals chunks from the back of the others', so the work of a participant that is late
 * (descheduled, or on a slower core: the vCPUs of a virtual machine run at speeds that change
 * independently, by a third and more) is taken over. A job of etch_parallel_thread_fn tells
 * each chunk the index of the participant running it. The job is published through one 64-bit
 * atomic word,
 *   state = generation (32 bits) | number of chunks (16 bits) | unused (16 bits).
 * A claim is a compare-and-swap that can only succeed for the generation it was read from, so a
 * participant that wakes late (after its job finished and the next one was published) can never
 * run a chunk of the wrong job, and the job's fields (fn, arg, n, the shares) stay unchanged
 * until every claimed chunk is counted in `done`: the caller returns, and may publish the next
 * job, only when done == number of chunks.
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

#define CHUNKS_PER_THREAD 8
#define SPIN_NS 50000 /* how long an idle participant spins before sleeping */
#define CACHE_LINE 64

#define ST_GEN(s) ((uint32_t)((s) >> 32))
#define ST_NCHUNKS(s) ((uint32_t)(((s) >> 16) & 0xffffu))
#define ST_MAKE(gen, nchunks) (((uint64_t)(gen) << 32) | ((uint64_t)(nchunks) << 16))
/* a home range: generation | front | back (the chunks [front, back) are unclaimed) */
#define RG_FRONT(r) ((uint32_t)(((r) >> 16) & 0xffffu))
#define RG_BACK(r) ((uint32_t)((r)&0xffffu))
#define RG_MAKE(gen, front, back)                                                            \
    (((uint64_t)(gen) << 32) | ((uint64_t)(front) << 16) | (uint64_t)(back))

typedef struct home_range {
    _Alignas(CACHE_LINE) _Atomic uint64_t r;
    /* of the current job (set before it is published, like fn, arg and n): the participant's
     * share [ib, ie) of the items and its first chunk */
    int64_t ib, ie;
    uint32_t base, count;
} home_range;

typedef struct worker_arg {
    struct etch_threadpool *pool;
    int index; /* participant index: 1 + worker number */
} worker_arg;

struct etch_threadpool {
    /* written by the caller of parallel_for, read by everyone */
    _Alignas(CACHE_LINE) _Atomic uint64_t state;
    etch_parallel_fn fn;         /* one of fn and fnt */
    etch_parallel_thread_fn fnt; /* told the participant running the chunk */
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
    home_range *ranges;    /* [num_threads] */
    worker_arg *args;      /* [num_threads]: worker i uses args[i] */
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

/* [b, e) of a job of fn or fnt, run by participant self, as a parallel region. */
static void call_chunk(etch_parallel_fn fn, etch_parallel_thread_fn fnt, void *arg, int self,
                       int64_t b, int64_t e) {
    in_parallel_region++;
    if (fnt)
        fnt(arg, self, b, e);
    else
        fn(arg, b, e);
    in_parallel_region--;
}

/* Chunk c, from participant v's home range, run by participant self: part c - base of v's
 * share, cut in as many balanced parts as the range had chunks. */
static void run_one(etch_threadpool *p, int self, uint32_t v, uint32_t c) {
    const home_range *h = &p->ranges[v];
    int64_t b, e;
    chunk_range(h->ie - h->ib, h->count, c - h->base, &b, &e);
    b += h->ib;
    e += h->ib;
    call_chunk(p->fn, p->fnt, p->arg, self, b, e);
}

/* As participant `self`, claim and run chunks of generation `gen` until none is left: first
 * its own range from the front, then the others' from the back, nearest participant first.
 * Returns how many were run. */
static uint32_t run_chunks(etch_threadpool *p, int self, uint32_t gen) {
    uint32_t ran = 0;
    const int T = p->num_threads;
    for (int k = 0; k < T; k++) {
        const int v = (self + k) % T;
        _Atomic uint64_t *w = &p->ranges[v].r;
        uint64_t r = atomic_load_explicit(w, memory_order_acquire);
        for (;;) {
            if ((uint32_t)(r >> 32) != gen || RG_FRONT(r) >= RG_BACK(r))
                break;
            const uint32_t f = RG_FRONT(r), b = RG_BACK(r);
            const uint64_t want = k == 0 ? RG_MAKE(gen, f + 1, b) : RG_MAKE(gen, f, b - 1);
            if (!atomic_compare_exchange_weak_explicit(w, &r, want, memory_order_acq_rel,
                                                       memory_order_acquire))
                continue; /* r reloaded */
            run_one(p, self, (uint32_t)v, k == 0 ? f : b - 1);
            ran++;
            r = atomic_load_explicit(w, memory_order_acquire);
        }
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

static void *worker_main(void *varg) {
    const worker_arg *wa = (const worker_arg *)varg;
    etch_threadpool *p = wa->pool;
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
        add_done(p, run_chunks(p, wa->index, seen), ST_NCHUNKS(s));
    }
}

/* A job of fn or fnt (the other NULL) over [0, n). */
static void submit(etch_threadpool *p, int64_t n, int64_t grain, etch_parallel_fn fn,
                   etch_parallel_thread_fn fnt, void *arg) {
    if (n <= 0 || (!fn && !fnt))
        return;
    if (grain < 1)
        grain = 1;
    /* participants with a share: every one, or as many as the range has grains */
    const int64_t homes = p ? (n / grain < p->num_threads ? n / grain : p->num_threads) : 1;
    if (homes < 2 || p->num_workers == 0 || in_parallel_region ||
        pthread_mutex_trylock(&p->submit) != 0) {
        call_chunk(fn, fnt, arg, 0, 0, n); /* one chunk: index 0 is this call's only one */
        return;
    }
    p->fn = fn;
    p->fnt = fnt;
    p->arg = arg;
    p->n = n;
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    uint32_t gen = ST_GEN(atomic_load_explicit(&p->state, memory_order_relaxed)) + 1;
    int64_t nchunks = 0;
    for (int k = 0; k < p->num_threads; k++) { /* the home ranges: published with state */
        home_range *h = &p->ranges[k];
        h->ib = h->ie = 0;
        h->count = 0;
        if (k < homes) {
            chunk_range(n, (uint32_t)homes, (uint32_t)k, &h->ib, &h->ie);
            const int64_t most = (h->ie - h->ib) / grain; /* >= 1: the share holds a grain */
            h->count = (uint32_t)(most < CHUNKS_PER_THREAD ? most : CHUNKS_PER_THREAD);
        }
        h->base = (uint32_t)nchunks;
        nchunks += h->count;
        atomic_store_explicit(&h->r, RG_MAKE(gen, h->base, h->base + h->count),
                              memory_order_relaxed);
    }
    atomic_store(&p->state, ST_MAKE(gen, (uint32_t)nchunks)); /* seq_cst: publishes */
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
    uint32_t ran = run_chunks(p, 0, gen);
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

void etch_threadpool_parallel_for(etch_threadpool *p, int64_t n, int64_t grain,
                                  etch_parallel_fn fn, void *arg) {
    submit(p, n, grain, fn, NULL, arg);
}

void etch_threadpool_parallel_for_thread(etch_threadpool *p, int64_t n, int64_t grain,
                                         etch_parallel_thread_fn fn, void *arg) {
    submit(p, n, grain, NULL, fn, arg);
}

static void iface_parallel_for(void *self, int64_t n, int64_t grain, etch_parallel_fn fn,
                               void *arg) {
    etch_threadpool_parallel_for((etch_threadpool *)self, n, grain, fn, arg);
}

static void iface_parallel_for_thread(void *self, int64_t n, int64_t grain,
                                      etch_parallel_thread_fn fn, void *arg) {
    etch_threadpool_parallel_for_thread((etch_threadpool *)self, n, grain, fn, arg);
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

static void free_parts(etch_threadpool *p) {
    free(p->ranges);
    free(p->args);
    free(p);
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
    p->ranges = aligned_alloc(CACHE_LINE, (size_t)num_threads * sizeof(home_range));
    p->args = malloc((size_t)num_threads * sizeof(worker_arg));
    if (!p->ranges || !p->args) {
        free_parts(p);
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "threadpool_create: out of memory");
    }
    for (int k = 0; k < num_threads; k++)
        atomic_init(&p->ranges[k].r, 0);
    p->iface.self = p;
    p->iface.num_threads = num_threads;
    p->iface.parallel_for = iface_parallel_for;
    p->iface.parallel_for_thread = iface_parallel_for_thread;
    if (pthread_mutex_init(&p->mu, NULL) != 0) {
        free_parts(p);
        return etch_err(ETCH_ERR_OUT_OF_RESOURCES, "threadpool_create: cannot create a mutex");
    }
    if (pthread_mutex_init(&p->submit, NULL) != 0) {
        pthread_mutex_destroy(&p->mu);
        free_parts(p);
        return etch_err(ETCH_ERR_OUT_OF_RESOURCES, "threadpool_create: cannot create a mutex");
    }
    if (pthread_cond_init(&p->wake, NULL) != 0) {
        pthread_mutex_destroy(&p->submit);
        pthread_mutex_destroy(&p->mu);
        free_parts(p);
        return etch_err(ETCH_ERR_OUT_OF_RESOURCES,
                        "threadpool_create: cannot create a condition variable");
    }
    if (pthread_cond_init(&p->finished, NULL) != 0) {
        pthread_cond_destroy(&p->wake);
        pthread_mutex_destroy(&p->submit);
        pthread_mutex_destroy(&p->mu);
        free_parts(p);
        return etch_err(ETCH_ERR_OUT_OF_RESOURCES,
                        "threadpool_create: cannot create a condition variable");
    }
    /* Workers take no signals: they go to the application's threads. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int err = 0;
    for (int i = 0; i < num_threads - 1; i++) {
        p->args[i] = (worker_arg){p, i + 1};
        if ((err = pthread_create(&p->workers[i], NULL, worker_main, &p->args[i])) != 0)
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
    free_parts(p);
}

int etch_threadpool_num_threads(const etch_threadpool *p) { return p ? p->num_threads : 1; }

const etch_threadpool_iface *etch_threadpool_get_iface(etch_threadpool *p) {
    return p ? &p->iface : NULL;
}
