/* Sampler: greedy ties, top-k / top-p sets against a direct computation, seeded
 * reproducibility, chi-square of the draws, parameter errors, and no allocation while
 * sampling (allocation functions wrapped at link time). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "etch/llm.h"
#include "etch_test.h"

/* ---- allocation counting (-Wl,--wrap=...) ---- */
void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t a, size_t b);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);
static int armed, allocs;
void *__wrap_malloc(size_t n) { allocs += armed; return __real_malloc(n); }
void *__wrap_calloc(size_t a, size_t b) { allocs += armed; return __real_calloc(a, b); }
void *__wrap_realloc(void *p, size_t n) { allocs += armed; return __real_realloc(p, n); }
void __wrap_free(void *p) { allocs += armed && p; __real_free(p); }

static uint64_t rng = 88172645463325252ull;
static double urand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static etch_sampler *open_s(float t, int32_t k, float p, uint64_t seed, int32_t vocab) {
    etch_sampler_params sp = etch_sampler_default_params();
    sp.temperature = t;
    sp.top_k = k;
    sp.top_p = p;
    sp.seed = seed;
    etch_sampler *s = NULL;
    CHECK_OK(etch_sampler_open(&sp, vocab, &s));
    return s;
}

static void test_greedy(void) {
    etch_sampler *s = open_s(0.0f, 0, 1.0f, 1, 8);
    float l[8] = {1, 3, 2, 3, -1, 3, 0, 0};
    float copy[8];
    memcpy(copy, l, sizeof l);
    CHECK(etch_sampler_sample(s, l, 8) == 1); /* three-way tie: lowest id */
    CHECK(memcmp(copy, l, sizeof l) == 0);    /* greedy leaves the logits alone */
    float m[4] = {NAN, 2, NAN, 2};
    CHECK(etch_sampler_sample(s, m, 4) == 1); /* NaN never wins */
    float a[3] = {NAN, NAN, NAN};
    CHECK(etch_sampler_sample(s, a, 3) == -1);
    float inf[3] = {1, INFINITY, INFINITY};
    CHECK(etch_sampler_sample(s, inf, 3) == 1);
    float neg[3] = {-INFINITY, -INFINITY, -5};
    CHECK(etch_sampler_sample(s, neg, 3) == 2);
    CHECK(etch_sampler_sample(s, l, 9) == -1); /* n > vocab */
    CHECK(etch_sampler_sample(s, l, 0) == -1);
    etch_sampler_close(s);
    /* top_k == 1 is greedy at any temperature */
    s = open_s(5.0f, 1, 1.0f, 1, 8);
    float l2[8] = {1, 3, 2, 3, -1, 3, 0, 0};
    CHECK(etch_sampler_sample(s, l2, 8) == 1);
    etch_sampler_close(s);
}

/* Direct computation of the candidate set from the probabilities the sampler wrote. */
static int cmp_by_prob(const void *a, const void *b, const float *p) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (p[x] != p[y]) return p[x] > p[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}
static const float *g_p;
static int cmp_q(const void *a, const void *b) { return cmp_by_prob(a, b, g_p); }

static void test_sets(void) {
    static const int32_t sizes[] = {1, 2, 7, 100, 1000, 32000};
    static const int32_t ks[] = {0, 1, 2, 5, 40, 100000};
    static const float ps[] = {1.0f, 0.9f, 0.5f, 0.1f, 1e-6f, 0.999f};
    static const float ts[] = {1.0f, 0.7f, 1.5f};
    int32_t *order = malloc(32000 * sizeof(int32_t));
    float *logits = malloc(32000 * sizeof(float)), *orig = malloc(32000 * sizeof(float));
    int bad = 0, cases = 0;
    for (size_t si = 0; si < 6; si++)
        for (size_t ki = 0; ki < 6; ki++)
            for (size_t pi = 0; pi < 6; pi++)
                for (size_t ti = 0; ti < 3; ti++)
                    for (int rep = 0; rep < 2; rep++) {
                        int32_t n = sizes[si];
                        for (int32_t i = 0; i < n; i++) {
                            /* coarse values make ties common */
                            orig[i] = rep ? (float)((int)(urand() * 8)) : (float)(urand() * 20 - 10);
                        }
                        memcpy(logits, orig, (size_t)n * sizeof(float));
                        etch_sampler *s = open_s(ts[ti], ks[ki], ps[pi], 7, n);
                        int32_t id = etch_sampler_sample(s, logits, n);
                        cases++;
                        if (ks[ki] == 1) { /* greedy */
                            int32_t g = 0;
                            for (int32_t i = 1; i < n; i++)
                                if (orig[i] > orig[g]) g = i;
                            if (id != g) bad++;
                            etch_sampler_close(s);
                            continue;
                        }
                        /* probabilities = softmax(orig / T) */
                        double mx = -INFINITY, sum = 0;
                        for (int32_t i = 0; i < n; i++) mx = fmax(mx, orig[i]);
                        for (int32_t i = 0; i < n; i++) sum += exp((orig[i] - mx) / ts[ti]);
                        for (int32_t i = 0; i < n; i++)
                            if (fabs(logits[i] - exp((orig[i] - mx) / ts[ti]) / sum) > 1e-6) {
                                if (bad < 5) fprintf(stderr, "probability %d of %d off\n", i, n);
                                bad++;
                            }
                        /* the set */
                        for (int32_t i = 0; i < n; i++) order[i] = i;
                        g_p = logits;
                        qsort(order, (size_t)n, sizeof(int32_t), cmp_q);
                        int32_t k = ks[ki] > 0 && ks[ki] < n ? ks[ki] : n;
                        double total = 0;
                        if (k < n)
                            for (int32_t i = 0; i < k; i++) total += logits[order[i]];
                        else
                            for (int32_t i = 0; i < n; i++) total += logits[i];
                        int32_t keep = k;
                        if (ps[pi] < 1.0f) {
                            double acc = 0;
                            for (int32_t i = 0; i < k; i++) {
                                acc += logits[order[i]];
                                if (acc >= (double)ps[pi] * total) {
                                    keep = i + 1;
                                    break;
                                }
                            }
                        }
                        int32_t nc;
                        const int32_t *c = etch_sampler_last_candidates(s, &nc);
                        if (k == n && ps[pi] >= 1.0f) {
                            /* untruncated: no candidate list, any id with p > 0 */
                            if (!(id >= 0 && id < n && logits[id] > 0)) bad++;
                        } else if (nc != keep || memcmp(c, order, (size_t)keep * sizeof(int32_t)) != 0) {
                            if (bad < 5)
                                fprintf(stderr, "set mismatch: n=%d k=%d p=%g t=%g: %d vs %d\n", n,
                                        ks[ki], (double)ps[pi], (double)ts[ti], nc, keep);
                            bad++;
                        } else {
                            int in = 0;
                            for (int32_t i = 0; i < keep; i++) in |= c[i] == id;
                            if (!in) bad++;
                        }
                        etch_sampler_close(s);
                    }
    printf("truncation sets: %d cases, %d mismatches\n", cases, bad);
    CHECK(bad == 0);
    free(order);
    free(logits);
    free(orig);
}

static void test_seed(void) {
    enum { V = 50, N = 500 };
    float base[V], x[V];
    for (int i = 0; i < V; i++) base[i] = (float)(urand() * 4);
    int32_t a[N], b[N], c[N];
    etch_sampler *s1 = open_s(1.0f, 10, 0.9f, 1234, V), *s2 = open_s(1.0f, 10, 0.9f, 1234, V),
                 *s3 = open_s(1.0f, 10, 0.9f, 1235, V);
    for (int i = 0; i < N; i++) {
        memcpy(x, base, sizeof x);
        a[i] = etch_sampler_sample(s1, x, V);
        memcpy(x, base, sizeof x);
        b[i] = etch_sampler_sample(s2, x, V);
        memcpy(x, base, sizeof x);
        c[i] = etch_sampler_sample(s3, x, V);
    }
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(memcmp(a, c, sizeof a) != 0);
    etch_sampler_reseed(s1, 1234);
    int same = 1;
    for (int i = 0; i < N; i++) {
        memcpy(x, base, sizeof x);
        same &= etch_sampler_sample(s1, x, V) == a[i];
    }
    CHECK(same);
    /* the documented generator: xorshift64* seeded by splitmix64, 53-bit uniforms */
    etch_sampler_reseed(s1, 0);
    uint64_t z = 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    uint64_t st = z ^ (z >> 31);
    int gen_ok = 1;
    for (int i = 0; i < 100; i++) {
        st ^= st >> 12;
        st ^= st << 25;
        st ^= st >> 27;
        double u = (double)((st * 0x2545F4914F6CDD1Dull) >> 11) / 9007199254740992.0;
        gen_ok &= etch_sampler_next_uniform(s1) == u;
    }
    CHECK(gen_ok);
    double mean = 0;
    for (int i = 0; i < 100000; i++) mean += etch_sampler_next_uniform(s1);
    CHECK_NEAR(mean / 100000, 0.5, 0.005);
    etch_sampler_close(s1);
    etch_sampler_close(s2);
    etch_sampler_close(s3);
}

/* Pearson chi-square of counts against expected probabilities; df = cells - 1. */
static double chi2(const int *cnt, const double *p, int cells, int n) {
    double x = 0;
    for (int i = 0; i < cells; i++) {
        double e = p[i] * n;
        if (e > 0) x += (cnt[i] - e) * (cnt[i] - e) / e;
        else if (cnt[i]) x += 1e9;
    }
    return x;
}

static void test_distribution(void) {
    enum { V = 10, N = 200000 };
    const float lg[V] = {2.0f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f, 1.5f, 0.2f, -2.0f, 0.8f};
    struct {
        float t;
        int32_t k;
        float p;
        double crit; /* chi-square 0.999 quantile for the kept cells - 1 */
    } cfg[] = {{1.0f, 0, 1.0f, 27.88}, {0.7f, 0, 1.0f, 27.88}, {1.0f, 3, 1.0f, 13.82},
               {1.0f, 0, 0.6f, 16.27}, {1.3f, 5, 0.8f, 16.27}};
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        etch_sampler *s = open_s(cfg[c].t, cfg[c].k, cfg[c].p, 99 + c, V);
        int cnt[V] = {0};
        float x[V];
        for (int i = 0; i < N; i++) {
            memcpy(x, lg, sizeof x);
            int32_t id = etch_sampler_sample(s, x, V);
            if (id >= 0 && id < V) cnt[id]++;
        }
        /* expected: the kept set from the last call, renormalized */
        memcpy(x, lg, sizeof x);
        etch_sampler_sample(s, x, V);
        double expect[V] = {0};
        int32_t nc;
        const int32_t *cand = etch_sampler_last_candidates(s, &nc);
        int kept = 0;
        if (cfg[c].k == 0 && cfg[c].p >= 1.0f) {
            for (int i = 0; i < V; i++) expect[i] = x[i];
            kept = V;
        } else {
            double tot = 0;
            for (int i = 0; i < nc; i++) tot += x[cand[i]];
            for (int i = 0; i < nc; i++) expect[cand[i]] = x[cand[i]] / tot;
            kept = nc;
        }
        double stat = chi2(cnt, expect, V, N);
        printf("chi-square T=%.1f k=%d p=%.1f: %.2f over %d kept ids (0.999 quantile %.2f)\n",
               (double)cfg[c].t, cfg[c].k, (double)cfg[c].p, stat, kept, cfg[c].crit);
        CHECK_MSG(stat < cfg[c].crit, "chi-square %.2f", stat);
        etch_sampler_close(s);
    }
}

static void test_params(void) {
    etch_sampler *s = NULL;
    etch_sampler_params p = etch_sampler_default_params();
    CHECK(p.temperature == 1.0f && p.top_k == 0 && p.top_p == 1.0f);
    p.temperature = -1;
    CHECK_STATUS(etch_sampler_open(&p, 10, &s), ETCH_ERR_INVALID_ARGUMENT);
    p = etch_sampler_default_params();
    p.top_p = 0;
    CHECK_STATUS(etch_sampler_open(&p, 10, &s), ETCH_ERR_INVALID_ARGUMENT);
    p.top_p = 1.5f;
    CHECK_STATUS(etch_sampler_open(&p, 10, &s), ETCH_ERR_INVALID_ARGUMENT);
    p = etch_sampler_default_params();
    p.top_k = -2;
    CHECK_STATUS(etch_sampler_open(&p, 10, &s), ETCH_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(etch_sampler_open(NULL, 0, &s), ETCH_ERR_INVALID_ARGUMENT);
    CHECK(s == NULL);
    etch_sampler_close(NULL);
}

static void test_no_alloc(void) {
    enum { V = 32000 };
    float *x = malloc(V * sizeof(float));
    etch_sampler *ss[3] = {open_s(0.8f, 40, 0.9f, 5, V), open_s(1.0f, 0, 0.95f, 5, V),
                           open_s(1.0f, 0, 1.0f, 5, V)};
    armed = 1;
    allocs = 0;
    for (int j = 0; j < 3; j++)
        for (int i = 0; i < 200; i++) {
            for (int v = 0; v < V; v++) x[v] = (float)((v * 2654435761u + (unsigned)i) % 1000) / 100.0f;
            etch_sampler_sample(ss[j], x, V);
        }
    armed = 0;
    CHECK_MSG(allocs == 0, "%d allocations while sampling", allocs);
    for (int j = 0; j < 3; j++) etch_sampler_close(ss[j]);
    free(x);
}

int main(void) {
    test_greedy();
    test_sets();
    test_seed();
    test_distribution();
    test_params();
    test_no_alloc();
    return etch_test_finish();
}
