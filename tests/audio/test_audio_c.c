/* The audio front end in C, under the sanitizers: the FFT against a plain double-precision DFT
 * at every size 1..130 and some large odd ones; every truncation and every single-byte
 * corruption of real WAV files parsed without a crash (refused, or decoded within bounds); the
 * resampler's streaming equal to one call; ring-buffer windows equal to slices. The
 * comparisons with torch and sox are in test_audio.py. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "audio/fft.h"
#include "etch/audio.h"
#include "etch_test.h"
#include "test_file.h"

static void test_fft(void) {
    uint32_t sizes[200], ns = 0;
    for (uint32_t n = 1; n <= 130; n++) sizes[ns++] = n;
    uint32_t big[] = {243, 256, 320, 375, 400, 401, 512, 640, 1000, 1024, 1021, 4096};
    for (size_t i = 0; i < sizeof big / sizeof *big; i++) sizes[ns++] = big[i];
    for (uint32_t s = 0; s < ns; s++) {
        uint32_t n = sizes[s];
        etch_fft f;
        void *mem = malloc(etch_fft_mem_size(n));
        etch_cf *in = malloc(n * sizeof *in), *out = malloc(n * sizeof *out);
        etch_fft_init(&f, n, mem);
        srand(n);
        for (uint32_t i = 0; i < n; i++)
            in[i] = (etch_cf){(float)rand() / RAND_MAX - 0.5f, (float)rand() / RAND_MAX - 0.5f};
        etch_fft_forward(&f, in, out);
        double worst = 0, scale = sqrt((double)n);
        for (uint32_t k = 0; k < n; k++) {
            double re = 0, im = 0;
            for (uint32_t j = 0; j < n; j++) {
                double a = -2.0 * 3.14159265358979323846 * (double)((uint64_t)j * k % n) / n;
                re += in[j].re * cos(a) - in[j].im * sin(a);
                im += in[j].re * sin(a) + in[j].im * cos(a);
            }
            double e = hypot(out[k].re - re, out[k].im - im) / scale;
            if (e > worst) worst = e;
        }
        CHECK_MSG(worst < 2e-6, "fft n=%u: error %.3g of sqrt(n)", n, worst);
        free(mem), free(in), free(out);
    }
}

/* Parse and (when it parses) decode; any crash or out-of-bounds read is the failure. */
static int parse_and_decode(const uint8_t *data, size_t size) {
    etch_wav_info wi;
    if (etch_wav_parse(data, size, &wi) != ETCH_OK) return 0;
    CHECK(wi.data_offset + wi.data_size <= size);
    uint64_t n = wi.frames < 4096 ? wi.frames : 4096;
    float *out = malloc((size_t)(n ? n : 1) * sizeof(float));
    etch_status st = etch_wav_decode_mono(data, size, &wi, 0, n, out);
    if (st == ETCH_OK)
        for (uint64_t i = 0; i < n; i++) CHECK(out[i] >= -1.0f && out[i] <= 1.0f);
    free(out);
    return 1;
}

static void test_wav_mutations(const char *path) {
    size_t size;
    uint8_t *data = etch_test_read_file(path, 0, &size);
    if (!data) {
        CHECK_MSG(0, "cannot read %s", path);
        return;
    }
    CHECK(parse_and_decode(data, size));
    /* every cut in the header region, then every 997th */
    int accepted = 0;
    for (size_t cut = 0; cut < size; cut += cut < 200 ? 1 : 997) {
        uint8_t *copy = malloc(cut ? cut : 1);
        memcpy(copy, data, cut);
        accepted += parse_and_decode(copy, cut);
        free(copy);
    }
    CHECK_MSG(accepted == 0, "%d cut copies of %s accepted (their data chunk lies)", accepted, path);
    /* every byte of the first 64 set to each of a few values */
    const uint8_t vals[] = {0x00, 0x01, 0x7f, 0x80, 0xff};
    uint8_t *copy = malloc(size);
    for (size_t i = 0; i < 64 && i < size; i++)
        for (size_t v = 0; v < sizeof vals; v++) {
            memcpy(copy, data, size);
            copy[i] = vals[v];
            parse_and_decode(copy, size);
        }
    free(copy);
    free(data);
}

static etch_resampler *new_resampler(uint32_t in, uint32_t out, void **mem) {
    etch_resampler_config rc = etch_resampler_default_config(in, out);
    size_t bytes = 0;
    CHECK_OK(etch_resampler_mem_size(&rc, &bytes));
    *mem = aligned_alloc(16, (bytes + 15) & ~(size_t)15);
    etch_resampler *r = NULL;
    CHECK_OK(etch_resampler_init(&rc, *mem, bytes, &r));
    return r;
}

static void test_resampler_streaming(void) {
    const uint32_t rates[][2] = {{8000, 16000}, {44100, 16000}, {16000, 16001}, {48000, 16000}};
    size_t n = 20000;
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)sin(0.01 * (double)i) * 0.5f + (float)(i % 7) * 0.01f;
    for (size_t t = 0; t < sizeof rates / sizeof *rates; t++) {
        void *m1, *m2;
        etch_resampler *a = new_resampler(rates[t][0], rates[t][1], &m1);
        etch_resampler *b = new_resampler(rates[t][0], rates[t][1], &m2);
        size_t cap = (size_t)((double)n * rates[t][1] / rates[t][0]) + 16;
        float *oa = malloc(cap * sizeof *oa), *ob = malloc(cap * sizeof *ob);
        size_t na = 0, nb = 0, k;
        CHECK_OK(etch_resampler_process(a, x, n, oa, cap, &k));
        na += k;
        CHECK_OK(etch_resampler_flush(a, oa + na, cap - na, &k));
        na += k;
        for (size_t i = 0, step = 1; i < n; i += step, step = step * 3 % 1013 + 1) {
            size_t len = i + step <= n ? step : n - i;
            CHECK_OK(etch_resampler_process(b, x + i, len, ob + nb, cap - nb, &k));
            nb += k;
        }
        CHECK_OK(etch_resampler_flush(b, ob + nb, cap - nb, &k));
        nb += k;
        uint64_t want = ((uint64_t)n * rates[t][1] + rates[t][0] - 1) / rates[t][0];
        CHECK_MSG(na == want && nb == want, "%u->%u: %zu and %zu samples, want %llu",
                  rates[t][0], rates[t][1], na, nb, (unsigned long long)want);
        CHECK(na == nb && memcmp(oa, ob, na * sizeof *oa) == 0);
        free(oa), free(ob), free(m1), free(m2);
    }
    free(x);
}

static void test_stream(void) {
    size_t window = 640, hop = 320, cap = 1000, bytes;
    CHECK_OK(etch_audio_stream_mem_size(window, hop, cap, &bytes));
    void *mem = aligned_alloc(16, (bytes + 15) & ~(size_t)15);
    etch_audio_stream *s;
    CHECK_OK(etch_audio_stream_init(window, hop, cap, mem, bytes, &s));
    float x[5000], w[640];
    for (int i = 0; i < 5000; i++) x[i] = (float)i;
    size_t pos = 0, taken, windows = 0;
    while (pos < 5000) {
        size_t n = 5000 - pos < 777 ? 5000 - pos : 777;
        etch_audio_stream_push(s, x + pos, n, &taken);
        pos += taken;
        while (etch_audio_stream_pull(s, w)) {
            CHECK(w[0] == (float)(windows * hop) && w[639] == (float)(windows * hop + 639));
            windows++;
        }
    }
    CHECK(windows == (5000 - window) / hop + 1);
    CHECK(etch_audio_stream_position(s) == windows * hop);
    free(mem);
}

int main(int argc, char **argv) {
    test_fft();
    for (int i = 1; i < argc; i++) test_wav_mutations(argv[i]);
    test_resampler_streaming();
    test_stream();
    return etch_test_finish();
}
