/* Mixed-radix decimation-in-time FFT: n = p * m splits into p interleaved sub-transforms of
 * size m (computed recursively into consecutive blocks of the output), joined by p-point
 * butterflies with twiddles W_n^(j q). Radix 4 and 2 come first, then 3, 5 and any other odd
 * factor; a prime n is one plain DFT. */
#include "audio/fft.h"

#include <math.h>

static uint32_t factorize(uint32_t n, uint32_t *f, uint32_t *maxp) {
    uint32_t k = 0, m = n;
    *maxp = 1;
    while (m % 4 == 0 && k < ETCH_FFT_MAX_FACTORS - 1) f[k++] = 4, m /= 4;
    while (m % 2 == 0 && k < ETCH_FFT_MAX_FACTORS - 1) f[k++] = 2, m /= 2;
    for (uint32_t p = 3; m > 1 && k < ETCH_FFT_MAX_FACTORS - 1; p += 2) {
        if ((uint64_t)p * p > m) p = m; /* what is left is prime */
        while (m % p == 0 && k < ETCH_FFT_MAX_FACTORS - 1) f[k++] = p, m /= p;
    }
    if (m > 1) f[k++] = m; /* cannot happen for 32-bit n (at most 31 factors), kept safe */
    for (uint32_t i = 0; i < k; i++)
        if (f[i] > *maxp) *maxp = f[i];
    return k;
}

size_t etch_fft_mem_size(uint32_t n) {
    uint32_t f[ETCH_FFT_MAX_FACTORS], maxp;
    factorize(n ? n : 1, f, &maxp);
    return ((size_t)(n ? n : 1) + maxp) * sizeof(etch_cf);
}

void etch_fft_init(etch_fft *f, uint32_t n, void *mem) {
    if (n == 0) n = 1;
    f->n = n;
    f->nfactors = factorize(n, f->factors, &f->maxp);
    f->twiddle = mem;
    f->scratch = f->twiddle + n;
    for (uint32_t k = 0; k < n; k++) {
        double a = -2.0 * 3.14159265358979323846 * (double)k / (double)n;
        f->twiddle[k].re = (float)cos(a);
        f->twiddle[k].im = (float)sin(a);
    }
}

static inline etch_cf cmul(etch_cf a, etch_cf b) {
    return (etch_cf){a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}

/* Transform of size m = n / (product of factors before `stage`), reading in[0], in[stride],
 * ...; tw_step = n_total / m maps W_m^e to twiddle[e * tw_step]. */
static void fft_rec(const etch_fft *f, etch_cf *out, const etch_cf *in, size_t stride,
                    uint32_t stage, uint32_t m, uint32_t tw_step) {
    if (m == 1) {
        out[0] = in[0];
        return;
    }
    uint32_t p = f->factors[stage], sub = m / p;
    for (uint32_t q = 0; q < p; q++)
        fft_rec(f, out + (size_t)q * sub, in + q * stride, stride * p, stage + 1, sub,
                tw_step * p);
    const etch_cf *tw = f->twiddle;
    uint32_t n = f->n;
    if (p == 2) {
        for (uint32_t j = 0; j < sub; j++) {
            etch_cf a = out[j], b = cmul(out[j + sub], tw[(size_t)j * tw_step % n]);
            out[j] = (etch_cf){a.re + b.re, a.im + b.im};
            out[j + sub] = (etch_cf){a.re - b.re, a.im - b.im};
        }
    } else if (p == 4) {
        for (uint32_t j = 0; j < sub; j++) {
            etch_cf a0 = out[j];
            etch_cf a1 = cmul(out[j + sub], tw[(size_t)j * tw_step % n]);
            etch_cf a2 = cmul(out[j + 2 * sub], tw[(size_t)2 * j * tw_step % n]);
            etch_cf a3 = cmul(out[j + 3 * sub], tw[(size_t)3 * j * tw_step % n]);
            etch_cf s02 = {a0.re + a2.re, a0.im + a2.im}, d02 = {a0.re - a2.re, a0.im - a2.im};
            etch_cf s13 = {a1.re + a3.re, a1.im + a3.im}, d13 = {a1.re - a3.re, a1.im - a3.im};
            /* -i * d13 for the forward transform */
            etch_cf md = {d13.im, -d13.re};
            out[j] = (etch_cf){s02.re + s13.re, s02.im + s13.im};
            out[j + sub] = (etch_cf){d02.re + md.re, d02.im + md.im};
            out[j + 2 * sub] = (etch_cf){s02.re - s13.re, s02.im - s13.im};
            out[j + 3 * sub] = (etch_cf){d02.re - md.re, d02.im - md.im};
        }
    } else {
        etch_cf *t = f->scratch;
        uint32_t pstep = n / p; /* W_p^e = twiddle[e * n / p] */
        for (uint32_t j = 0; j < sub; j++) {
            for (uint32_t q = 0; q < p; q++)
                t[q] = cmul(out[j + (size_t)q * sub], tw[(size_t)q * j * tw_step % n]);
            for (uint32_t r = 0; r < p; r++) {
                etch_cf acc = t[0];
                for (uint32_t q = 1; q < p; q++) {
                    etch_cf w = tw[(size_t)((uint64_t)q * r % p) * pstep];
                    etch_cf v = cmul(t[q], w);
                    acc.re += v.re, acc.im += v.im;
                }
                out[j + (size_t)r * sub] = acc;
            }
        }
    }
}

void etch_fft_forward(const etch_fft *f, const etch_cf *in, etch_cf *out) {
    fft_rec(f, out, in, 1, 0, f->n, 1);
}
