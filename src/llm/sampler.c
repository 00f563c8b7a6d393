/* Sampling on a row of logits (see etch/llm.h). One allocation at open: the candidate index
 * array; sampling itself never allocates. Orders are total and deterministic: probability
 * descending, then id ascending. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "etch/llm.h"
#include "runtime/error.h"

struct etch_sampler {
    etch_sampler_params p;
    int32_t vocab;
    uint64_t state;
    int32_t *idx; /* vocab entries: candidates */
    int32_t n_cand;
};

etch_sampler_params etch_sampler_default_params(void) {
    etch_sampler_params p;
    memset(&p, 0, sizeof p);
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.seed = 0;
    return p;
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void etch_sampler_reseed(etch_sampler *s, uint64_t seed) {
    uint64_t x = seed;
    s->state = splitmix64(&x);
    if (s->state == 0) s->state = 0x2545F4914F6CDD1Dull; /* xorshift must not start at 0 */
}

double etch_sampler_next_uniform(etch_sampler *s) {
    uint64_t x = s->state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    s->state = x;
    return (double)((x * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0);
}

etch_status etch_sampler_open(const etch_sampler_params *params, int32_t vocab, etch_sampler **out) {
    etch_sampler_params p = params ? *params : etch_sampler_default_params();
    if (!out) return etch_err(ETCH_ERR_INVALID_ARGUMENT, "sampler: NULL out");
    if (vocab < 1) return etch_err(ETCH_ERR_INVALID_ARGUMENT, "sampler: vocab_size %d", (int)vocab);
    if (!(p.temperature >= 0.0f) || isinf(p.temperature))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "sampler: temperature %g", (double)p.temperature);
    if (!(p.top_p > 0.0f && p.top_p <= 1.0f))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "sampler: top_p %g outside (0, 1]", (double)p.top_p);
    if (p.top_k < 0) return etch_err(ETCH_ERR_INVALID_ARGUMENT, "sampler: top_k %d", (int)p.top_k);
    etch_sampler *s = calloc(1, sizeof *s);
    int32_t *idx = malloc((size_t)vocab * sizeof(int32_t));
    if (!s || !idx) {
        free(s);
        free(idx);
        return etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "sampler: %d candidates", (int)vocab);
    }
    s->p = p;
    s->vocab = vocab;
    s->idx = idx;
    etch_sampler_reseed(s, p.seed);
    *out = s;
    return ETCH_OK;
}

void etch_sampler_close(etch_sampler *s) {
    if (!s) return;
    free(s->idx);
    free(s);
}

const int32_t *etch_sampler_last_candidates(const etch_sampler *s, int32_t *n) {
    if (n) *n = s->n_cand;
    return s->idx;
}

/* a goes before b: higher probability, then lower id */
static int before(const float *pr, int32_t a, int32_t b) {
    return pr[a] > pr[b] || (pr[a] == pr[b] && a < b);
}

/* Heap whose root is the candidate that goes last (so it can be replaced by better ones). */
static void sift_down_worst(const float *pr, int32_t *h, int32_t n, int32_t i) {
    for (;;) {
        int32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && before(pr, h[m], h[l])) m = l;
        if (r < n && before(pr, h[m], h[r])) m = r;
        if (m == i) return;
        int32_t t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

/* Sort h[0..n) into the candidate order (heapsort: no allocation, no recursion). */
static void sort_candidates(const float *pr, int32_t *h, int32_t n) {
    for (int32_t i = n / 2 - 1; i >= 0; i--) sift_down_worst(pr, h, n, i);
    for (int32_t end = n - 1; end > 0; end--) {
        int32_t t = h[0]; /* the last in order goes to the back */
        h[0] = h[end];
        h[end] = t;
        sift_down_worst(pr, h, end, 0);
    }
    /* the heap pops the last-in-order first, leaving the array in order */
}

int32_t etch_sampler_sample(etch_sampler *s, float *x, int32_t n) {
    if (!s || !x || n < 1 || n > s->vocab) return -1;
    const etch_sampler_params *p = &s->p;
    if (p->temperature == 0.0f || p->top_k == 1) {
        int32_t best = -1;
        for (int32_t i = 0; i < n; i++)
            if (!isnan(x[i]) && (best < 0 || x[i] > x[best])) best = i;
        return best;
    }
    /* softmax(x / T) in place */
    float m = -INFINITY;
    int32_t any = 0;
    for (int32_t i = 0; i < n; i++)
        if (!isnan(x[i])) {
            any = 1;
            if (x[i] > m) m = x[i];
        }
    if (!any) return -1;
    double sum = 0;
    const float inv_t = 1.0f / p->temperature;
    for (int32_t i = 0; i < n; i++) {
        float e;
        if (isnan(x[i])) e = 0;
        else if (isinf(m) && m > 0) e = x[i] == m ? 1.0f : 0.0f;
        else e = expf((x[i] - m) * inv_t);
        x[i] = e;
        sum += e;
    }
    const float inv = (float)(1.0 / sum);
    double total_all = 0; /* the mass after rounding, in id order */
    for (int32_t i = 0; i < n; i++) {
        x[i] *= inv;
        total_all += x[i];
    }

    int32_t *c = s->idx;
    int32_t nc;
    int32_t k = p->top_k > 0 && p->top_k < n ? p->top_k : n;
    if (k < n) {
        /* keep the k best in a heap rooted at the worst of them */
        for (int32_t i = 0; i < k; i++) c[i] = i;
        for (int32_t i = k / 2 - 1; i >= 0; i--) sift_down_worst(x, c, k, i);
        for (int32_t i = k; i < n; i++)
            if (before(x, i, c[0])) {
                c[0] = i;
                sift_down_worst(x, c, k, 0);
            }
        sort_candidates(x, c, k);
        nc = k;
    } else if (p->top_p < 1.0f) {
        /* Only a token with p >= (1 - top_p) / (n - 1) can be in the nucleus; sort those and
         * fall back to all tokens if rounding keeps their mass below top_p. */
        float cut = n > 1 ? (1.0f - p->top_p) / (float)(n - 1) : 0.0f;
        nc = 0;
        for (int32_t i = 0; i < n; i++)
            if (x[i] >= cut) c[nc++] = i;
        sort_candidates(x, c, nc);
        double mass = 0;
        for (int32_t i = 0; i < nc; i++) mass += x[c[i]];
        if (mass < (double)p->top_p * total_all) {
            for (int32_t i = 0; i < n; i++) c[i] = i;
            sort_candidates(x, c, n);
            nc = n;
        }
    } else {
        /* no truncation: draw over the ids in order, no sort needed */
        s->n_cand = 0;
        double r = etch_sampler_next_uniform(s) * total_all, acc = 0;
        int32_t last = -1;
        for (int32_t i = 0; i < n; i++) {
            if (x[i] <= 0) continue;
            acc += x[i];
            last = i;
            if (r < acc) return i;
        }
        return last;
    }
    /* top-p over the candidates: after top-k, of their (renormalized) mass */
    double total = 0;
    if (k < n)
        for (int32_t i = 0; i < nc; i++) total += x[c[i]];
    else
        total = total_all;
    if (p->top_p < 1.0f) {
        double acc = 0, want = (double)p->top_p * total;
        int32_t keep = nc;
        for (int32_t i = 0; i < nc; i++) {
            acc += x[c[i]];
            if (acc >= want) {
                keep = i + 1;
                break;
            }
        }
        nc = keep;
        total = acc;
    }
    s->n_cand = nc;
    double r = etch_sampler_next_uniform(s) * total, acc = 0;
    for (int32_t i = 0; i < nc; i++) {
        acc += x[c[i]];
        if (r < acc) return c[i];
    }
    return c[nc - 1];
}
