/*
 * The pthreads thread pool (etch/threadpool.h) and the runtime running with it:
 *   - every index of [0, n) runs exactly once, in chunks of >= grain, for many (n, grain,
 *     threads) combinations, n = 0 and grain > n included; every chunk lies inside one
 *     participant's share (part k of [0, n) cut in balanced parts), each share cut in its
 *     balanced number of chunks; thousands of back-to-back jobs;
 *   - etch_threadpool_parallel_for_thread: every item once, each chunk told an index in
 *     [0, threads), 0 the calling thread, never two running chunks with one index, one thread
 *     per index; each participant's chunks of its own share ascending and contiguous from the
 *     share's start, before any taken over; a participant held up in its first chunk has the
 *     rest of its share taken over;
 *   - the workers really take part (a job whose chunks wait for each other completes), and
 *     each participant runs its own share: item k of such a job on the same thread in every
 *     repetition, item 0 on the calling thread;
 *   - nested parallel_for (same pool, another pool) runs serially without deadlock;
 *   - two pools used concurrently from two threads, and one pool from two threads at once;
 *   - no allocation in parallel_for after creation (allocation functions wrapped at link
 *     time), and none during execute of LeNet and of a CNN with pools of 2 and 4 threads;
 *   - a CNN and LeNet run with 1, 2, 3 and 4 threads give outputs bitwise identical to the
 *     serial run, with the portable and with the optimized kernels, through the core API and
 *     through the module API (etch_module_options.num_threads);
 *   - inside a method, a kernel sees etch_kernel_num_threads() == the pool's size and its
 *     etch_kernel_parallel_for chunks run on that many threads at once (a custom relu);
 *   - the module's kernels option and num_threads checks.
 * It also prints the cost of an empty parallel_for (informative, never a pass/fail).
 *
 * usage: test_threadpool FIXTURES_DIR CNN.pte
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <etch/etch.h>
#include <etch/kernels.h>
#include <etch/module.h>
#include <etch/threadpool.h>

#include "etch_test.h"
#include "test_method.h"

#include "alloc_wrap.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- coverage ----------------------------------------------------------------------------- */

#define MAX_N 5000
#define MAX_CHUNKS 128
typedef struct cover {
    _Atomic int hits[MAX_N];
    _Atomic int chunks;
    int64_t cb[MAX_CHUNKS], ce[MAX_CHUNKS]; /* the chunks run, in the order they were claimed */
    _Atomic int bad; /* empty, out-of-range or too-small chunks */
    int64_t n, grain;
} cover;

static void cover_fn(void *arg, int64_t b, int64_t e) {
    cover *c = (cover *)arg;
    const int k = atomic_fetch_add(&c->chunks, 1);
    if (k < MAX_CHUNKS) {
        c->cb[k] = b;
        c->ce[k] = e;
    }
    if (b < 0 || e > c->n || b >= e) {
        atomic_fetch_add(&c->bad, 1);
        return;
    }
    /* every chunk holds >= grain items, unless the whole range is one chunk */
    if (!(b == 0 && e == c->n) && e - b < (c->grain > 0 ? c->grain : 1))
        atomic_fetch_add(&c->bad, 1);
    for (int64_t i = b; i < e; i++)
        atomic_fetch_add(&c->hits[i], 1);
}

/* Part k of [0, n) cut in `parts` balanced parts (the first n % parts one item longer). */
static void part(int64_t n, int64_t parts, int64_t k, int64_t *b, int64_t *e) {
    const int64_t q = n / parts, r = n % parts;
    *b = k * q + (k < r ? k : r);
    *e = *b + q + (k < r ? 1 : 0);
}

/* Whether the chunks of c lie in the shares of a pool of `threads` as etch/threadpool.h says:
 * P = min(threads, n / grain) participants, share k is part k of [0, n) in P parts, cut in
 * min(8, share / grain) chunks. */
static bool shares_ok(const cover *c, int threads) {
    const int chunks = atomic_load(&c->chunks);
    const int64_t grain = c->grain > 0 ? c->grain : 1;
    const int64_t homes = c->n / grain < threads ? c->n / grain : threads;
    if (homes < 2) /* serial: one chunk */
        return chunks == (c->n > 0);
    int total = 0;
    for (int64_t k = 0; k < homes; k++) {
        int64_t sb, se;
        part(c->n, homes, k, &sb, &se);
        const int64_t want = (se - sb) / grain < 8 ? (se - sb) / grain : 8;
        int64_t in = 0, lo = -1, hi = -1;
        for (int i = 0; i < chunks && i < MAX_CHUNKS; i++)
            if (c->cb[i] >= sb && c->ce[i] <= se) {
                const int64_t len = c->ce[i] - c->cb[i];
                lo = lo < 0 || len < lo ? len : lo;
                hi = len > hi ? len : hi;
                in++;
            } else if (c->cb[i] < se && c->ce[i] > sb) {
                return false; /* straddles the share's edge */
            }
        if (in != want || hi - lo > 1) /* its count of chunks, balanced */
            return false;
        total += (int)in;
    }
    return total == chunks;
}

static void test_coverage(void) {
    static const int64_t ns[] = {0, 1, 2, 3, 4, 5, 7, 8, 9, 16, 31, 64, 100, 257, 1000, 4999};
    static const int64_t grains[] = {-3, 0, 1, 2, 3, 5, 16, 100, 1000, 6000};
    static cover c;
    int failures = 0, combos = 0;
    for (int t = 1; t <= 8; t++) {
        etch_threadpool *pool = NULL;
        CHECK_OK(etch_threadpool_create(t, &pool));
        if (!pool)
            continue;
        CHECK(etch_threadpool_num_threads(pool) == t);
        for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++) {
            for (size_t g = 0; g < sizeof grains / sizeof grains[0]; g++) {
                memset(&c, 0, sizeof c);
                c.n = ns[a];
                c.grain = grains[g];
                etch_threadpool_parallel_for(pool, c.n, c.grain, cover_fn, &c);
                int ok = atomic_load(&c.bad) == 0;
                for (int64_t i = 0; i < c.n; i++)
                    ok = ok && atomic_load(&c.hits[i]) == 1;
                int chunks = atomic_load(&c.chunks);
                int64_t gr = c.grain > 0 ? c.grain : 1;
                /* no chunk at all for n = 0; one for n <= grain; never more than 8 per thread */
                ok = ok && (c.n == 0 ? chunks == 0 : chunks >= 1);
                ok = ok && (c.n > gr || chunks <= 1) && chunks <= 8 * t;
                ok = ok && shares_ok(&c, t);
                if (!ok && failures++ < 5)
                    fprintf(stderr, "coverage: threads %d n %lld grain %lld: %d chunks, %d bad\n",
                            t, (long long)c.n, (long long)c.grain, chunks, atomic_load(&c.bad));
                combos++;
            }
        }
        etch_threadpool_destroy(pool);
    }
    CHECK_MSG(failures == 0, "%d of %d (n, grain, threads) combinations wrong", failures, combos);
    /* a NULL pool runs serially */
    memset(&c, 0, sizeof c);
    c.n = 10;
    c.grain = 1;
    etch_threadpool_parallel_for(NULL, 10, 1, cover_fn, &c);
    CHECK(atomic_load(&c.chunks) == 1 && atomic_load(&c.hits[9]) == 1);
}

/* ---- the thread index (etch_threadpool_parallel_for_thread) -------------------------------- */

#define IDX_MAX_THREADS 8
typedef struct indexed {
    int64_t n, grain;
    int threads;
    _Atomic int hits[MAX_N];
    _Atomic int busy[IDX_MAX_THREADS]; /* a chunk of that index is running */
    _Atomic int bad;                   /* index out of range, or in use by a running chunk */
    /* per index, the chunks it ran in order (only that index's chunks write its row) */
    int64_t cb[IDX_MAX_THREADS][MAX_CHUNKS], ce[IDX_MAX_THREADS][MAX_CHUNKS];
    int nch[IDX_MAX_THREADS];
    pthread_t tid[IDX_MAX_THREADS];
    _Atomic int other_thread; /* an index ran on two threads */
    int slow;                 /* this index sleeps in its first chunk (a late thread) */
} indexed;

static void indexed_fn(void *arg, int t, int64_t b, int64_t e) {
    indexed *x = (indexed *)arg;
    if (t < 0 || t >= x->threads || t >= IDX_MAX_THREADS) {
        atomic_fetch_add(&x->bad, 1);
        return;
    }
    if (atomic_exchange(&x->busy[t], 1))
        atomic_fetch_add(&x->bad, 1);
    if (x->nch[t] == 0)
        x->tid[t] = pthread_self();
    else if (!pthread_equal(x->tid[t], pthread_self()))
        atomic_fetch_add(&x->other_thread, 1);
    if (x->nch[t] < MAX_CHUNKS) {
        x->cb[t][x->nch[t]] = b;
        x->ce[t][x->nch[t]] = e;
    }
    if (t == x->slow && x->nch[t] == 0) {
        struct timespec ts = {0, 30 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    x->nch[t]++;
    for (int64_t i = b; i < e; i++)
        atomic_fetch_add(&x->hits[i], 1);
    atomic_store(&x->busy[t], 0);
}

/* Whether participant t's chunks are as etch/threadpool.h says: first those of its own share,
 * ascending, each continuing the last, from the share's start; then none of its share. */
static bool own_chunks_ok(const indexed *x, int t, int64_t homes) {
    if (t >= homes)
        return true; /* no share: only chunks taken over */
    int64_t sb, se;
    part(x->n, homes, t, &sb, &se);
    int k = 0;
    int64_t at = sb;
    const int m = x->nch[t] < MAX_CHUNKS ? x->nch[t] : MAX_CHUNKS;
    for (; k < m && x->cb[t][k] >= sb && x->ce[t][k] <= se; k++) {
        if (x->cb[t][k] != at)
            return false;
        at = x->ce[t][k];
    }
    for (; k < m; k++)
        if (x->cb[t][k] < se && x->ce[t][k] > sb)
            return false;
    return true;
}

static void test_thread_index(void) {
    static const int64_t ns[] = {1, 2, 5, 16, 64, 257, 1000};
    static indexed x;
    int failures = 0, combos = 0, took_over = 0;
    for (int t = 1; t <= IDX_MAX_THREADS; t++) {
        etch_threadpool *pool = NULL;
        CHECK_OK(etch_threadpool_create(t, &pool));
        if (!pool)
            continue;
        for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++) {
            for (int slow = -1; slow < (t > 1 ? 2 : 0); slow++) {
                memset(&x, 0, sizeof x);
                x.n = ns[a];
                x.grain = 1;
                x.threads = t;
                x.slow = slow;
                etch_threadpool_parallel_for_thread(pool, x.n, x.grain, indexed_fn, &x);
                const int64_t homes = x.n < t ? x.n : t;
                int ok = atomic_load(&x.bad) == 0 && atomic_load(&x.other_thread) == 0;
                for (int64_t i = 0; i < x.n; i++)
                    ok = ok && atomic_load(&x.hits[i]) == 1;
                for (int k = 0; k < t; k++)
                    ok = ok && own_chunks_ok(&x, k, homes);
                /* index 0 is the calling thread (which may, descheduled, have run none) */
                ok = ok && (x.nch[0] == 0 || pthread_equal(x.tid[0], pthread_self()));
                /* a late participant's chunks are taken over (its share has 8 of them) */
                if (slow == 1 && homes > 1 && x.n / homes >= 8)
                    took_over += x.nch[1] < 8;
                if (!ok && failures++ < 5)
                    fprintf(stderr, "thread index: threads %d n %lld slow %d: wrong\n", t,
                            (long long)x.n, slow);
                combos++;
            }
        }
        etch_threadpool_destroy(pool);
    }
    CHECK_MSG(failures == 0, "%d of %d thread-index combinations wrong", failures, combos);
    /* participant 1 sleeps 30 ms in its first chunk: the others run the rest of its share */
    CHECK_MSG(took_over > 0, "no late participant's chunks were taken over");
    /* a NULL pool: one chunk, index 0 */
    memset(&x, 0, sizeof x);
    x.n = 10;
    x.threads = 1;
    x.slow = -1;
    etch_threadpool_parallel_for_thread(NULL, 10, 1, indexed_fn, &x);
    CHECK(x.nch[0] == 1 && x.cb[0][0] == 0 && x.ce[0][0] == 10 && atomic_load(&x.bad) == 0);
}

/* ---- many jobs back to back --------------------------------------------------------------- */

typedef struct sum_job {
    const int64_t *data;
    _Atomic int64_t sum;
} sum_job;

static void sum_fn(void *arg, int64_t b, int64_t e) {
    sum_job *j = (sum_job *)arg;
    int64_t s = 0;
    for (int64_t i = b; i < e; i++)
        s += j->data[i];
    atomic_fetch_add(&j->sum, s);
}

/* Run `jobs` sums of varying length on `pool`; returns the number of wrong sums. */
static int sum_jobs(etch_threadpool *pool, const int64_t *data, int64_t len, int jobs,
                    unsigned seed) {
    int wrong = 0;
    for (int k = 0; k < jobs; k++) {
        seed = seed * 1103515245u + 12345u;
        int64_t n = (int64_t)(seed >> 8) % len;
        sum_job j;
        j.data = data;
        atomic_init(&j.sum, 0);
        etch_threadpool_parallel_for(pool, n, 1 + (int64_t)(seed % 7), sum_fn, &j);
        wrong += atomic_load(&j.sum) != n * (n - 1) / 2;
    }
    return wrong;
}

#define DATA_LEN 4096
static int64_t seq[DATA_LEN]; /* seq[i] = i */

static void test_many_jobs(void) {
    for (int t = 2; t <= 4; t++) {
        etch_threadpool *pool = NULL;
        CHECK_OK(etch_threadpool_create(t, &pool));
        int wrong = sum_jobs(pool, seq, DATA_LEN, 20000, (unsigned)t);
        CHECK_MSG(wrong == 0, "%d threads: %d of 20000 sums wrong", t, wrong);
        etch_threadpool_destroy(pool);
    }
}

/* ---- the workers take part ---------------------------------------------------------------- */

typedef struct rendezvous {
    _Atomic int arrived;
    _Atomic int timed_out;
    int parties;
    pthread_t ran_on[8]; /* the thread that ran item k */
} rendezvous;

/* Every chunk waits (up to 20 s) until all chunks have started: only possible when each runs
 * on its own thread. */
static void rendezvous_fn(void *arg, int64_t b, int64_t e) {
    rendezvous *r = (rendezvous *)arg;
    for (int64_t i = b; i < e && i < 8; i++)
        r->ran_on[i] = pthread_self();
    atomic_fetch_add(&r->arrived, (int)(e - b));
    double until = now_s() + 20.0;
    while (atomic_load(&r->arrived) < r->parties) {
        if (now_s() > until) {
            atomic_store(&r->timed_out, 1);
            return;
        }
    }
}

static void test_workers_take_part(void) {
    for (int t = 2; t <= 4; t++) {
        etch_threadpool *pool = NULL;
        CHECK_OK(etch_threadpool_create(t, &pool));
        pthread_t first[8];
        for (int rep = 0; rep < 3; rep++) {
            rendezvous r;
            atomic_init(&r.arrived, 0);
            atomic_init(&r.timed_out, 0);
            r.parties = t;
            etch_threadpool_parallel_for(pool, t, 1, rendezvous_fn, &r);
            CHECK_MSG(!atomic_load(&r.timed_out) && atomic_load(&r.arrived) == t,
                      "%d threads: the %d chunks did not run at the same time", t, t);
            /* no chunk can be stolen here (each participant waits in its own until all have
             * started): item k runs on participant k, the caller being participant 0 */
            CHECK_MSG(pthread_equal(r.ran_on[0], pthread_self()),
                      "%d threads: item 0 did not run on the calling thread", t);
            for (int k = 0; k < t; k++) {
                if (rep == 0)
                    first[k] = r.ran_on[k];
                CHECK_MSG(pthread_equal(r.ran_on[k], first[k]),
                          "%d threads: item %d ran on another thread than in the first job", t,
                          k);
                for (int i = 0; i < k; i++)
                    CHECK_MSG(!pthread_equal(r.ran_on[k], r.ran_on[i]),
                              "%d threads: items %d and %d ran on one thread", t, i, k);
            }
            /* let the workers fall asleep between repetitions: the wake-up path is tested */
            if (rep == 1) {
                struct timespec ts = {0, 20 * 1000 * 1000};
                nanosleep(&ts, NULL);
            }
        }
        etch_threadpool_destroy(pool);
    }
}

/* ---- nested -------------------------------------------------------------------------------- */

typedef struct nested {
    etch_threadpool *outer, *other;
    _Atomic int hits[64 * 64];
} nested;

typedef struct inner_arg {
    nested *ns;
    int64_t row;
} inner_arg;

static void inner_fn(void *arg, int64_t b, int64_t e) {
    inner_arg *ia = (inner_arg *)arg;
    for (int64_t i = b; i < e; i++)
        atomic_fetch_add(&ia->ns->hits[ia->row * 64 + i], 1);
}

static void outer_fn(void *arg, int64_t b, int64_t e) {
    nested *ns = (nested *)arg;
    for (int64_t r = b; r < e; r++) {
        inner_arg ia = {ns, r};
        /* same pool for even rows, another pool for odd ones */
        etch_threadpool_parallel_for(r % 2 ? ns->other : ns->outer, 64, 1, inner_fn, &ia);
    }
}

static void test_nested(void) {
    static nested ns;
    memset(&ns, 0, sizeof ns);
    CHECK_OK(etch_threadpool_create(3, &ns.outer));
    CHECK_OK(etch_threadpool_create(2, &ns.other));
    etch_threadpool_parallel_for(ns.outer, 64, 1, outer_fn, &ns);
    int ok = 1;
    for (int i = 0; i < 64 * 64; i++)
        ok = ok && atomic_load(&ns.hits[i]) == 1;
    CHECK_MSG(ok, "nested parallel_for missed or repeated items");
    etch_threadpool_destroy(ns.outer);
    etch_threadpool_destroy(ns.other);
}

/* ---- concurrent callers ------------------------------------------------------------------- */

typedef struct caller {
    etch_threadpool *pool;
    unsigned seed;
    int wrong;
} caller;

static void *caller_main(void *arg) {
    caller *c = (caller *)arg;
    c->wrong = sum_jobs(c->pool, seq, DATA_LEN, 5000, c->seed);
    return NULL;
}

static void test_concurrent(void) {
    etch_threadpool *p1 = NULL, *p2 = NULL;
    CHECK_OK(etch_threadpool_create(3, &p1));
    CHECK_OK(etch_threadpool_create(2, &p2));
    /* two pools, one thread each; then one pool shared by two threads (the loser of the race
     * for the pool runs serially) */
    for (int shared = 0; shared < 2; shared++) {
        caller a = {p1, 11u, -1}, b = {shared ? p1 : p2, 22u, -1};
        pthread_t ta, tb;
        CHECK(pthread_create(&ta, NULL, caller_main, &a) == 0);
        CHECK(pthread_create(&tb, NULL, caller_main, &b) == 0);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        CHECK_MSG(a.wrong == 0 && b.wrong == 0, "%s: %d and %d wrong sums",
                  shared ? "one shared pool" : "two pools", a.wrong, b.wrong);
    }
    etch_threadpool_destroy(p1);
    etch_threadpool_destroy(p2);
}

/* ---- creation checks, allocation ------------------------------------------------------------ */

static void test_create_checks(void) {
    etch_threadpool *p = (etch_threadpool *)&p;
    CHECK_STATUS(etch_threadpool_create(0, &p), ETCH_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(etch_threadpool_create(-2, &p), ETCH_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(etch_threadpool_create(ETCH_THREADPOOL_MAX_THREADS + 1, &p),
                 ETCH_ERR_INVALID_ARGUMENT);
    CHECK(p == (etch_threadpool *)&p); /* untouched on failure */
    CHECK_STATUS(etch_threadpool_create(2, NULL), ETCH_ERR_INVALID_ARGUMENT);
    etch_threadpool_destroy(NULL);
    CHECK(etch_threadpool_num_threads(NULL) == 1);
    CHECK(etch_threadpool_get_iface(NULL) == NULL);
    CHECK_OK(etch_threadpool_create(1, &p));
    const etch_threadpool_iface *it = etch_threadpool_get_iface(p);
    CHECK(it && it->num_threads == 1 && it->self == p && it->parallel_for);
    etch_threadpool_destroy(p);
}

static void test_no_allocation(void) {
    etch_threadpool *pool = NULL;
    CHECK_OK(etch_threadpool_create(4, &pool));
    /* warm up: the workers have started and slept at least once */
    CHECK(sum_jobs(pool, seq, DATA_LEN, 100, 5u) == 0);
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
    etch_alloc_arm();
    int wrong = sum_jobs(pool, seq, DATA_LEN, 2000, 6u);
    nanosleep(&ts, NULL); /* sleeping workers, then a wake-up */
    wrong += sum_jobs(pool, seq, DATA_LEN, 10, 7u);
    const etch_threadpool_iface *it = etch_threadpool_get_iface(pool);
    sum_job j;
    j.data = seq;
    atomic_init(&j.sum, 0);
    it->parallel_for(it->self, 1000, 10, sum_fn, &j);
    etch_alloc_disarm();
    CHECK(wrong == 0 && atomic_load(&j.sum) == 999 * 1000 / 2);
    CHECK_MSG(etch_alloc_calls == 0, "parallel_for allocated %ld times", etch_alloc_calls);
    etch_threadpool_destroy(pool);
}

/* ---- overhead (printed only) ---------------------------------------------------------------- */

static void empty_fn(void *arg, int64_t b, int64_t e) {
    (void)arg;
    (void)b;
    (void)e;
}

static void report_overhead(void) {
    for (int t = 1; t <= 4; t *= 2) {
        etch_threadpool *pool = NULL;
        if (etch_threadpool_create(t, &pool) != ETCH_OK)
            continue;
        const int reps = 20000;
        for (int k = 0; k < 1000; k++)
            etch_threadpool_parallel_for(pool, 1 << 20, 1, empty_fn, NULL);
        double t0 = now_s();
        for (int k = 0; k < reps; k++)
            etch_threadpool_parallel_for(pool, 1 << 20, 1, empty_fn, NULL);
        double dt = now_s() - t0;
        printf("empty parallel_for, %d thread%s (%d chunks): %.2f us per call (informative)\n",
               t, t == 1 ? "" : "s", t == 1 ? 1 : 8 * t, dt / reps * 1e6);
        etch_threadpool_destroy(pool);
    }
}

/* ---- the runtime with a pool ---------------------------------------------------------------- */

/* A custom aten::relu.out (replacing the portable one while registered last) that first runs a
 * rendezvous through etch_kernel_parallel_for: one chunk per thread, all of which must be
 * running at once. It records what it saw for the test to check. */
static struct {
    int calls, threads_seen, concurrent_ok;
} relu_probe;

static void probe_relu_chunk(void *arg, int64_t b, int64_t e) {
    float **io = (float **)arg;
    for (int64_t i = b; i < e; i++)
        io[1][i] = io[0][i] > 0 ? io[0][i] : 0.0f;
}

static void probe_relu(etch_kernel_context *ctx, etch_value **args, size_t nargs) {
    (void)nargs;
    etch_tensor *in = args[0]->u.tensor, *out = args[1]->u.tensor;
    if (etch_kernel_resize_like(ctx, out, in) != ETCH_OK)
        return;
    if (in->dtype != ETCH_DTYPE_FLOAT) {
        etch_kernel_fail(ctx, ETCH_ERR_NOT_SUPPORTED, "probe relu: Float only");
        return;
    }
    int t = etch_kernel_num_threads(ctx);
    rendezvous r;
    atomic_init(&r.arrived, 0);
    atomic_init(&r.timed_out, 0);
    r.parties = t;
    if (t > 1)
        etch_kernel_parallel_for(ctx, t, 1, rendezvous_fn, &r);
    relu_probe.calls++;
    relu_probe.threads_seen = t;
    relu_probe.concurrent_ok += t == 1 || (!atomic_load(&r.timed_out) && atomic_load(&r.arrived) == t);
    float *io[2] = {(float *)in->data, (float *)out->data};
    etch_kernel_parallel_for(ctx, etch_tensor_numel(in), 64, probe_relu_chunk, io);
}

static const etch_kernel probe_kernels[] = {{"aten::relu.out", "TWW", probe_relu}};

#define MAX_OUT_BYTES (1 << 20)
#define TEMP_SIZE (16u << 20)

/* "forward" of path with the thread pool tp (NULL: none). */
static int load(const char *path, const etch_threadpool_iface *tp, etch_test_method *L) {
    etch_method_options mo;
    memset(&mo, 0, sizeof mo);
    mo.threadpool = tp;
    return etch_test_method_load(L, path, NULL, &mo, TEMP_SIZE);
}

/* Deterministic input for input 0 of the method (float, static shape). */
static int make_input(etch_method *m, float **data, etch_tensor *t) {
    etch_value_info info;
    if (etch_method_meta_input(etch_method_get_meta(m), 0, &info) != ETCH_OK ||
        info.tag != ETCH_VALUE_TENSOR || info.dtype != ETCH_DTYPE_FLOAT)
        return -1;
    int64_t numel = 1;
    for (unsigned d = 0; d < info.dim; d++)
        numel *= info.sizes[d];
    *data = malloc((size_t)numel * sizeof(float));
    if (!*data)
        return -1;
    unsigned s = 12345u;
    for (int64_t i = 0; i < numel; i++) {
        s = s * 1664525u + 1013904223u;
        (*data)[i] = (float)(s >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
    }
    return etch_tensor_init(t, ETCH_DTYPE_FLOAT, info.dim, info.sizes, *data) == ETCH_OK ? 0 : -1;
}

/* Concatenated bytes of every tensor output. */
static size_t collect_outputs(etch_method *m, unsigned char *buf) {
    size_t len = 0;
    for (size_t i = 0; i < etch_method_num_outputs(m); i++) {
        const etch_value *v = etch_method_output(m, i);
        if (v->tag != ETCH_VALUE_TENSOR)
            continue;
        size_t nb = etch_tensor_nbytes(v->u.tensor);
        if (len + nb > MAX_OUT_BYTES)
            return 0;
        memcpy(buf + len, v->u.tensor->data, nb);
        len += nb;
    }
    return len;
}

/* Run `path` serially and with 2, 3 and 4 threads (the kernels registered now); outputs must
 * be bitwise identical and execute must not allocate. */
static void test_program_threads(const char *path, const char *kernels) {
    static unsigned char ref[MAX_OUT_BYTES], got[MAX_OUT_BYTES];
    size_t ref_len = 0;
    for (int t = 1; t <= 4; t++) {
        etch_threadpool *pool = NULL;
        if (t > 1)
            CHECK_OK(etch_threadpool_create(t, &pool));
        etch_test_method L;
        CHECK_MSG(load(path, etch_threadpool_get_iface(pool), &L) == 0, "%s: load", path);
        float *x = NULL;
        etch_tensor in;
        CHECK(L.m && make_input(L.m, &x, &in) == 0);
        if (!L.m || !x) {
            etch_test_method_unload(&L);
            free(x);
            etch_threadpool_destroy(pool);
            return;
        }
        for (int run = 0; run < 2; run++) {
            etch_alloc_arm();
            etch_status st = etch_method_set_input_tensor(L.m, 0, &in);
            if (st == ETCH_OK)
                st = etch_method_execute(L.m);
            etch_alloc_disarm();
            CHECK_OK(st);
            if (t == 2 || t == 4)
                CHECK_MSG(etch_alloc_calls == 0,
                          "%s (%s kernels, %d threads): execute allocated %ld times", path,
                          kernels, t, etch_alloc_calls);
        }
        if (t == 1) {
            ref_len = collect_outputs(L.m, ref);
            CHECK(ref_len > 0);
        } else {
            size_t len = collect_outputs(L.m, got);
            CHECK_MSG(len == ref_len && memcmp(ref, got, len) == 0,
                      "%s (%s kernels): %d threads differ from the serial run", path, kernels,
                      t);
        }
        etch_test_method_unload(&L);
        free(x);
        etch_threadpool_destroy(pool);
    }
}

static void test_kernel_sees_pool(const char *path) {
    CHECK_OK(etch_kernels_register(probe_kernels, 1));
    for (int t = 1; t <= 3; t++) {
        etch_module_options o = etch_module_default_options();
        o.num_threads = t;
        o.kernels = ETCH_MODULE_KERNELS_REGISTERED;
        etch_module *mod = NULL;
        etch_method *m = NULL;
        CHECK_OK(etch_module_open(path, &o, &mod));
        CHECK_OK(etch_module_load_method(mod, "forward", &m));
        float *x = NULL;
        etch_tensor in;
        memset(&relu_probe, 0, sizeof relu_probe);
        if (m && make_input(m, &x, &in) == 0) {
            CHECK_OK(etch_method_set_input_tensor(m, 0, &in));
            CHECK_OK(etch_method_execute(m));
        }
        CHECK_MSG(relu_probe.calls > 0 && relu_probe.threads_seen == t &&
                      relu_probe.concurrent_ok == relu_probe.calls,
                  "module of %d threads: the kernel ran %d times, saw %d threads, %d times "
                  "all at once",
                  t, relu_probe.calls, relu_probe.threads_seen, relu_probe.concurrent_ok);
        free(x);
        etch_module_close(mod);
    }
}

/* The same through the module API: a module of N threads gives the serial module's outputs. */
static void test_module_threads(const char *path, etch_module_kernels kernels) {
    static unsigned char ref[MAX_OUT_BYTES], got[MAX_OUT_BYTES];
    size_t ref_len = 0;
    for (int t = 0; t <= 3; t++) {
        etch_module_options o = etch_module_default_options();
        o.num_threads = t;
        o.kernels = kernels;
        etch_module *mod = NULL;
        etch_method *m = NULL;
        CHECK_OK(etch_module_open(path, &o, &mod));
        if (!mod)
            return;
        CHECK(etch_module_num_threads(mod) == (t > 1 ? t : 1));
        CHECK_OK(etch_module_load_method(mod, "forward", &m));
        float *x = NULL;
        etch_tensor in;
        if (m && make_input(m, &x, &in) == 0) {
            CHECK_OK(etch_method_set_input_tensor(m, 0, &in));
            CHECK_OK(etch_method_execute(m));
            if (t == 0) {
                ref_len = collect_outputs(m, ref);
            } else {
                size_t len = collect_outputs(m, got);
                CHECK_MSG(len == ref_len && len > 0 && memcmp(ref, got, len) == 0,
                          "module with %d threads differs from the serial one", t);
            }
        } else {
            CHECK_MSG(0, "%s: no float input", path);
        }
        free(x);
        etch_module_close(mod);
    }
}

static void test_module_options(const char *cnn) {
    etch_module_options o = etch_module_default_options();
    CHECK(o.kernels == ETCH_MODULE_KERNELS_OPTIMIZED);
    CHECK(o.num_threads == 1);
    CHECK(o.temp_size >= (16u << 20));
    etch_module *mod = (etch_module *)&o;
    o.num_threads = ETCH_THREADPOOL_MAX_THREADS + 1;
    CHECK_STATUS(etch_module_open(cnn, &o, &mod), ETCH_ERR_INVALID_ARGUMENT);
    o.num_threads = -1;
    CHECK_STATUS(etch_module_open(cnn, &o, &mod), ETCH_ERR_INVALID_ARGUMENT);
    o.num_threads = 1;
    o.kernels = (etch_module_kernels)7;
    CHECK_STATUS(etch_module_open(cnn, &o, &mod), ETCH_ERR_INVALID_ARGUMENT);
    CHECK(mod == (etch_module *)&o);
    /* the optimized kernels are registered by now: portable-only cannot be had any more */
    o.kernels = ETCH_MODULE_KERNELS_PORTABLE;
    CHECK_STATUS(etch_module_open(cnn, &o, &mod), ETCH_ERR_INVALID_STATE);
    CHECK(strstr(etch_last_error(), "optimized") != NULL);
    /* "as registered" takes whatever is there */
    o.kernels = ETCH_MODULE_KERNELS_REGISTERED;
    CHECK_OK(etch_module_open(cnn, &o, &mod));
    etch_module_close(mod);
    CHECK(strcmp(etch_module_kernels_name(ETCH_MODULE_KERNELS_PORTABLE), "portable") == 0);
    CHECK(strcmp(etch_module_kernels_name(ETCH_MODULE_KERNELS_OPTIMIZED), "optimized") == 0);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: test_threadpool FIXTURES_DIR CNN.pte\n");
        return 2;
    }
    char lenet[1024];
    snprintf(lenet, sizeof lenet, "%s/pte/lenet_bundled.bpte", argv[1]);
    for (int i = 0; i < DATA_LEN; i++)
        seq[i] = i;
    test_create_checks();
    test_coverage();
    test_thread_index();
    test_many_jobs();
    test_workers_take_part();
    test_nested();
    test_concurrent();
    test_no_allocation();
    report_overhead();

    /* portable kernels first (the registry is process-wide), then the optimized ones */
    CHECK_OK(etch_kernels_register_portable());
    test_program_threads(argv[2], "portable");
    test_program_threads(lenet, "portable");
    test_module_threads(argv[2], ETCH_MODULE_KERNELS_PORTABLE);
    test_kernel_sees_pool(argv[2]); /* registers a custom relu over the portable one */
    CHECK_OK(etch_kernels_register_optimized());
    test_program_threads(argv[2], "optimized");
    test_program_threads(lenet, "optimized");
    test_module_threads(argv[2], ETCH_MODULE_KERNELS_OPTIMIZED);
    test_module_threads(lenet, ETCH_MODULE_KERNELS_OPTIMIZED);
    test_module_options(argv[2]);
    return etch_test_finish();
}
