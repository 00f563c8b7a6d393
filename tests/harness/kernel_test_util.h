/* Shared helpers of the kernel tests (tests/kernels, tests/optimized_*): etch_value builders,
 * Int lists over caller storage, a test thread pool that runs chunks serially in a shuffled
 * order, and the instruction sets to test. Link the object library etch_test_kernel_util. */
#ifndef ETCH_KERNEL_TEST_UTIL_H
#define ETCH_KERNEL_TEST_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etch/etch.h"
#include "etch/kernels.h"
#include "etch/threadpool.h"

/* ---- values ------------------------------------------------------------------------------ */

etch_value kt_vtensor(etch_tensor *t);
etch_value kt_vint(int64_t i);
etch_value kt_vdouble(double d);
etch_value kt_vbool(bool b);
etch_value kt_vnone(void);
etch_value kt_vstr(const char *s); /* borrows s */

/* An Int list value over this storage (no allocation). */
typedef struct kt_ilist {
    etch_value v, items[ETCH_MAX_DIMS];
    etch_value *ptrs[ETCH_MAX_DIMS];
    int64_t scratch[ETCH_MAX_DIMS];
} kt_ilist;
/* The list of vals[0..n) (n <= ETCH_MAX_DIMS), stored in l; returns &l->v. */
etch_value *kt_mklist(kt_ilist *l, const int64_t *vals, size_t n);

/* ---- a test thread pool ---------------------------------------------------------------------
 * parallel_for runs the chunks one after the other on the calling thread, in an order shuffled
 * with the test's own generator, so that a kernel depending on the order or on the split shows
 * it; parallel_for_thread does the same and gives each chunk a thread index drawn at random.
 * How [0, n) is split: */
typedef enum kt_split {
    KT_SPLIT_TWO_PER_THREAD, /* 2 * threads parts, each at least grain items */
    KT_SPLIT_RANDOM_PARTS,   /* threads or 2 * threads parts (drawn per call), >= grain */
    KT_SPLIT_EVEN,           /* min(ceil(n / grain), 4 * threads) parts of n * i / parts
                                boundaries: not multiples of grain */
} kt_split;

typedef struct kt_shuffle_pool {
    etch_threadpool_iface iface; /* pass &pool.iface as the kernel context's pool */
    int threads;
    kt_split split;
    uint32_t (*rnd)(void);
    int64_t calls; /* parallel_for calls so far */
} kt_shuffle_pool;

void kt_shuffle_pool_init(kt_shuffle_pool *p, int threads, kt_split split, uint32_t (*rnd)(void));

/* ---- instruction sets ----------------------------------------------------------------------- */

#define KT_N_ISAS 4
extern const etch_isa kt_all_isas[KT_N_ISAS]; /* scalar, avx2, avx512, neon */
/* Store the instruction sets this build and CPU support into isas (in kt_all_isas order) and
 * return how many; print one line naming each as run or NOT RUN. ETCH_TEST_ISAS=a,b,...
 * (names as ETCH_ISA takes them) keeps only those: tests/cross/run_avx512.sh runs the
 * AVX-512 variants alone in its emulator, the others being tested on the host. A listed
 * instruction set the build or CPU lacks, or an unknown name, ends the test (exit 2). */
int kt_pick_isas(etch_isa isas[KT_N_ISAS]);
/* Whether ETCH_TEST_ISAS (above) lets isa run (always, when it is unset); exits as above. */
bool kt_isa_wanted(etch_isa isa);

/* Channel-blocked layout (etch/kernel.h, NCHW8c): copy an NCHW float tensor [N, C, H, W]
 * (C % ETCH_BLOCK_C == 0) into blocked order, and back. */
void kt_to_blocked(const float *nchw, float *blocked, int64_t N, int64_t C, int64_t H, int64_t W);
void kt_from_blocked(const float *blocked, float *nchw, int64_t N, int64_t C, int64_t H,
                     int64_t W);

/* ---- random data, memory, reference activations ------------------------------------------ */

/* xorshift64 (the same sequence on every platform): start it with a non-zero seed. */
typedef struct kt_rng {
    uint64_t s;
} kt_rng;
uint32_t kt_rng_u32(kt_rng *r);
float kt_rng_float(kt_rng *r);           /* uniform in [-1, 1) */
int kt_rng_int(kt_rng *r, int lo, int hi); /* in [lo, hi] */

/* calloc that never returns NULL (exits with status 2 when out of memory); n == 0 is fine. */
void *kt_xmalloc(size_t n);

/* The fused activation `e` (NULL: none) applied to x in double, as the kernels define it. */
struct etch_epilogue;
double kt_act_ref(const struct etch_epilogue *e, double x);

/* A random 2-D convolution / pooling window: KW from ks[0, nks), KH the same unless
 * kt_rng_int(0, square_odds - 1) draws 0 (then from ks), strides 1..3 (sw == sh two times in
 * three), dilations 1 (three times in four) or 2, padding 0..K/2+1, H in 1..max_h, W in
 * 1..max_w, each grown to hold one dilated window of the padded input. */
typedef struct kt_window {
    int H, W, KH, KW, sh, sw, ph, pw, dh, dw;
} kt_window;
kt_window kt_rand_window(kt_rng *r, const int *ks, int nks, int square_odds, int max_h,
                         int max_w);

#endif
