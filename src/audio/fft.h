/* Complex FFT of any size (mixed radix: 4, 2, 3, 5, then any odd factor as a plain DFT), into
 * caller memory. Internal to src/audio. */
#ifndef ETCH_AUDIO_FFT_H
#define ETCH_AUDIO_FFT_H

#include <stddef.h>
#include <stdint.h>

#define ETCH_FFT_MAX_FACTORS 32

typedef struct etch_cf {
    float re, im;
} etch_cf;

typedef struct etch_fft {
    uint32_t n;
    uint32_t nfactors;
    uint32_t factors[ETCH_FFT_MAX_FACTORS]; /* radix of each stage, outermost first */
    uint32_t maxp;                          /* largest radix (scratch length) */
    etch_cf *twiddle;                       /* n entries: exp(-2 pi i k / n) */
    etch_cf *scratch;                       /* maxp entries */
} etch_fft;

/* Bytes etch_fft_init needs in `mem` after the struct (twiddles + scratch), 8-aligned. */
size_t etch_fft_mem_size(uint32_t n);
/* n >= 1; `mem` holds etch_fft_mem_size(n) bytes, 8-aligned. */
void etch_fft_init(etch_fft *f, uint32_t n, void *mem);
/* out[k] = sum_j in[j] exp(-2 pi i j k / n); in and out must not overlap. */
void etch_fft_forward(const etch_fft *f, const etch_cf *in, etch_cf *out);

#endif
