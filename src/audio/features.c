/* Spectrogram, log-mel and MFCC features in caller memory (see etch/audio.h for the formulas). */
#include <math.h>
#include <string.h>

#include "audio/fft.h"
#include "etch/audio.h"
#include "runtime/error.h"

#define FEAT_MAX_FFT 65536u

struct etch_features {
    etch_features_config cfg;
    uint32_t nbins, dim;
    etch_fft fft;
    float *window;       /* n_fft: the window centred in the frame, zeros around it */
    uint32_t *mel_start; /* n_mels: first bin of each filter */
    uint32_t *mel_len;   /* n_mels: bins it covers */
    uint32_t *mel_off;   /* n_mels: offset of its weights in mel_w */
    float *mel_w;
    float *dct;          /* n_mfcc x n_mels */
    etch_cf *fin, *fout; /* n_fft each */
    float *spec;         /* nbins */
    float *mel;          /* n_mels */
    float *frame;        /* n_fft: the framed (and pre-emphasised) samples */
};

etch_features_config etch_features_default_config(void) {
    etch_features_config c;
    memset(&c, 0, sizeof c);
    c.sample_rate = 16000;
    c.n_fft = 640;
    c.win_length = 640;
    c.hop_length = 320;
    c.window = ETCH_WINDOW_HANN;
    c.window_periodic = true;
    c.center = false;
    c.preemphasis = 0.0f;
    c.power = 2.0f;
    c.n_mels = 40;
    c.f_min = 20.0f;
    c.f_max = 4000.0f;
    c.mel_scale = ETCH_MEL_HTK;
    c.mel_norm_slaney = false;
    c.log = ETCH_LOG_DB;
    c.log_offset = 1e-6f;
    c.amin = 1e-10f;
    c.top_db = 80.0f;
    c.n_mfcc = 10;
    c.dct_ortho = true;
    return c;
}

static double hz_to_mel(double f, etch_mel_scale s) {
    if (s == ETCH_MEL_HTK) return 2595.0 * log10(1.0 + f / 700.0);
    const double f_sp = 200.0 / 3, min_log_hz = 1000.0, min_log_mel = min_log_hz / f_sp;
    const double logstep = log(6.4) / 27.0;
    return f < min_log_hz ? f / f_sp : min_log_mel + log(f / min_log_hz) / logstep;
}

static double mel_to_hz(double m, etch_mel_scale s) {
    if (s == ETCH_MEL_HTK) return 700.0 * (pow(10.0, m / 2595.0) - 1.0);
    const double f_sp = 200.0 / 3, min_log_hz = 1000.0, min_log_mel = min_log_hz / f_sp;
    const double logstep = log(6.4) / 27.0;
    return m < min_log_mel ? f_sp * m : min_log_hz * exp(logstep * (m - min_log_mel));
}

static etch_status check_config(const etch_features_config *c) {
#define BAD(...) return etch_err(ETCH_ERR_INVALID_ARGUMENT, "features: " __VA_ARGS__)
    if (!c) BAD("NULL config");
    if (c->sample_rate == 0 || c->sample_rate > 1000000) BAD("sample rate %u Hz", (unsigned)c->sample_rate);
    if (c->n_fft < 2 || c->n_fft > FEAT_MAX_FFT) BAD("n_fft %u (2..%u)", (unsigned)c->n_fft, FEAT_MAX_FFT);
    if (c->win_length < 1 || c->win_length > c->n_fft)
        BAD("win_length %u (1..n_fft %u)", (unsigned)c->win_length, (unsigned)c->n_fft);
    if (c->hop_length < 1) BAD("hop_length 0");
    if (c->window != ETCH_WINDOW_HANN && c->window != ETCH_WINDOW_HAMMING &&
        c->window != ETCH_WINDOW_RECT)
        BAD("unknown window %d", (int)c->window);
    if (!(c->preemphasis >= 0.0f && c->preemphasis < 1.0f)) BAD("pre-emphasis %g (0..1)", (double)c->preemphasis);
    if (c->power != 1.0f && c->power != 2.0f) BAD("power %g (1 or 2)", (double)c->power);
    uint32_t nbins = c->n_fft / 2 + 1;
    if (c->n_mels < 1 || c->n_mels > nbins)
        BAD("n_mels %u (1..n_fft / 2 + 1 = %u)", (unsigned)c->n_mels, (unsigned)nbins);
    if (!(c->f_min >= 0.0f) || !(c->f_max > c->f_min) || c->f_max > c->sample_rate / 2.0f)
        BAD("mel range %g..%g Hz (0 <= f_min < f_max <= %g)", (double)c->f_min, (double)c->f_max,
            c->sample_rate / 2.0);
    if (c->mel_scale != ETCH_MEL_HTK && c->mel_scale != ETCH_MEL_SLANEY)
        BAD("unknown mel scale %d", (int)c->mel_scale);
    if (c->log != ETCH_LOG_NONE && c->log != ETCH_LOG_LN && c->log != ETCH_LOG_DB)
        BAD("unknown log kind %d", (int)c->log);
    if (c->log == ETCH_LOG_LN && !(c->log_offset > 0.0f && isfinite(c->log_offset)))
        BAD("log_offset %g (> 0)", (double)c->log_offset);
    if (c->log == ETCH_LOG_DB && !(c->amin > 0.0f && isfinite(c->amin))) BAD("amin %g (> 0)", (double)c->amin);
    if (c->log == ETCH_LOG_DB && !(c->top_db == c->top_db && isfinite(c->top_db))) BAD("top_db %g", (double)c->top_db);
    if (c->n_mfcc > c->n_mels) BAD("n_mfcc %u > n_mels %u", (unsigned)c->n_mfcc, (unsigned)c->n_mels);
    if (c->n_mfcc > 0 && c->log == ETCH_LOG_NONE) BAD("MFCC needs a log (log kind none)");
#undef BAD
    return ETCH_OK;
}

/* The filterbank, as torchaudio's melscale_fbanks: bin k at k * (sr / 2) / (nbins - 1) Hz
 * (sr / 2 with integer division), n_mels + 2 points evenly spaced in mel, triangles between
 * neighbours; with `w` NULL only the sizes are filled. Returns the weights' count. */
static size_t build_mel(const etch_features_config *c, uint32_t nbins, uint32_t *start,
                        uint32_t *len, uint32_t *off, float *w) {
    double mmin = hz_to_mel(c->f_min, c->mel_scale), mmax = hz_to_mel(c->f_max, c->mel_scale);
    size_t total = 0;
    double nyq = (double)(c->sample_rate / 2);
    for (uint32_t m = 0; m < c->n_mels; m++) {
        double f0 = mel_to_hz(mmin + (mmax - mmin) * m / (c->n_mels + 1), c->mel_scale);
        double f1 = mel_to_hz(mmin + (mmax - mmin) * (m + 1) / (c->n_mels + 1), c->mel_scale);
        double f2 = mel_to_hz(mmin + (mmax - mmin) * (m + 2) / (c->n_mels + 1), c->mel_scale);
        double enorm = c->mel_norm_slaney ? 2.0 / (f2 - f0) : 1.0;
        uint32_t s = 0, l = 0;
        for (uint32_t k = 0; k < nbins; k++) {
            double f = nbins > 1 ? nyq * k / (nbins - 1) : 0;
            double down = (f - f0) / (f1 - f0), up = (f2 - f) / (f2 - f1);
            double v = down < up ? down : up;
            if (v > 0) {
                if (!l) s = k;
                if (w) w[total + (k - s)] = (float)(v * enorm);
                l = k - s + 1;
            }
        }
        if (start) start[m] = s, len[m] = l, off[m] = (uint32_t)total;
        total += l;
    }
    return total;
}

typedef struct layout {
    size_t fft_mem, window, mel_idx, mel_w, dct, fin, fout, spec, mel, frame, total;
} layout;

static size_t up16(size_t x) { return (x + 15) & ~(size_t)15; }

static void plan(const etch_features_config *c, size_t nweights, layout *L) {
    size_t at = up16(sizeof(etch_features));
    uint32_t nbins = c->n_fft / 2 + 1;
    L->fft_mem = at, at = up16(at + etch_fft_mem_size(c->n_fft));
    L->window = at, at = up16(at + (size_t)c->n_fft * sizeof(float));
    L->mel_idx = at, at = up16(at + 3 * (size_t)c->n_mels * sizeof(uint32_t));
    L->mel_w = at, at = up16(at + nweights * sizeof(float));
    L->dct = at, at = up16(at + (size_t)c->n_mfcc * c->n_mels * sizeof(float));
    L->fin = at, at = up16(at + (size_t)c->n_fft * sizeof(etch_cf));
    L->fout = at, at = up16(at + (size_t)c->n_fft * sizeof(etch_cf));
    L->spec = at, at = up16(at + (size_t)nbins * sizeof(float));
    L->mel = at, at = up16(at + (size_t)c->n_mels * sizeof(float));
    L->frame = at, at = up16(at + (size_t)c->n_fft * sizeof(float));
    L->total = at;
}

etch_status etch_features_mem_size(const etch_features_config *cfg, size_t *bytes) {
    etch_status st = check_config(cfg);
    if (st) return st;
    if (!bytes) return etch_err(ETCH_ERR_INVALID_ARGUMENT, "features_mem_size: NULL bytes");
    layout L;
    plan(cfg, build_mel(cfg, cfg->n_fft / 2 + 1, NULL, NULL, NULL, NULL), &L);
    *bytes = L.total;
    return ETCH_OK;
}

etch_status etch_features_init(const etch_features_config *cfg, void *mem, size_t size,
                               etch_features **out) {
    etch_status st = check_config(cfg);
    if (st) return st;
    if (!mem || !out) return etch_err(ETCH_ERR_INVALID_ARGUMENT, "features_init: NULL argument");
    if ((uintptr_t)mem % 16)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "features_init: memory not 16-byte aligned");
    uint32_t nbins = cfg->n_fft / 2 + 1;
    layout L;
    plan(cfg, build_mel(cfg, nbins, NULL, NULL, NULL, NULL), &L);
    if (size < L.total)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "features_init: %zu bytes given, %zu needed",
                        size, L.total);
    uint8_t *b = mem;
    etch_features *f = mem;
    memset(f, 0, sizeof *f);
    f->cfg = *cfg;
    f->nbins = nbins;
    f->dim = cfg->n_mfcc ? cfg->n_mfcc : cfg->n_mels;
    etch_fft_init(&f->fft, cfg->n_fft, b + L.fft_mem);
    f->window = (float *)(b + L.window);
    f->mel_start = (uint32_t *)(b + L.mel_idx);
    f->mel_len = f->mel_start + cfg->n_mels;
    f->mel_off = f->mel_len + cfg->n_mels;
    f->mel_w = (float *)(b + L.mel_w);
    f->dct = (float *)(b + L.dct);
    f->fin = (etch_cf *)(b + L.fin);
    f->fout = (etch_cf *)(b + L.fout);
    f->spec = (float *)(b + L.spec);
    f->mel = (float *)(b + L.mel);
    f->frame = (float *)(b + L.frame);

    uint32_t wl = cfg->win_length, left = (cfg->n_fft - wl) / 2;
    double N = cfg->window_periodic ? wl : (wl > 1 ? wl - 1 : 1);
    memset(f->window, 0, (size_t)cfg->n_fft * sizeof(float));
    for (uint32_t i = 0; i < wl; i++) {
        double a = 2.0 * 3.14159265358979323846 * i / N, v = 1.0;
        if (cfg->window == ETCH_WINDOW_HANN) v = 0.5 - 0.5 * cos(a);
        else if (cfg->window == ETCH_WINDOW_HAMMING) v = 0.54 - 0.46 * cos(a);
        f->window[left + i] = wl == 1 ? 1.0f : (float)v;
    }
    build_mel(cfg, nbins, f->mel_start, f->mel_len, f->mel_off, f->mel_w);
    for (uint32_t k = 0; k < cfg->n_mfcc; k++)
        for (uint32_t n = 0; n < cfg->n_mels; n++) {
            double v = cos(3.14159265358979323846 / cfg->n_mels * (n + 0.5) * k);
            if (cfg->dct_ortho) v *= sqrt((k ? 2.0 : 1.0) / cfg->n_mels);
            else v *= 2.0;
            f->dct[(size_t)k * cfg->n_mels + n] = (float)v;
        }
    *out = f;
    return ETCH_OK;
}

uint32_t etch_features_dim(const etch_features *f) { return f ? f->dim : 0; }

size_t etch_features_num_frames(const etch_features *f, size_t n) {
    if (!f) return 0;
    size_t nfft = f->cfg.n_fft, hop = f->cfg.hop_length;
    if (f->cfg.center) return n ? 1 + (n + 2 * (nfft / 2) - nfft) / hop : 0;
    return n >= nfft ? 1 + (n - nfft) / hop : 0;
}

/* The framed samples are in f->frame; the spectrum, mel and (before the floor) log into out. */
static void frame_features(etch_features *f, float *out) {
    const etch_features_config *c = &f->cfg;
    uint32_t nfft = c->n_fft;
    for (uint32_t i = 0; i < nfft; i++) f->fin[i] = (etch_cf){f->frame[i] * f->window[i], 0.0f};
    etch_fft_forward(&f->fft, f->fin, f->fout);
    for (uint32_t k = 0; k < f->nbins; k++) {
        float re = f->fout[k].re, im = f->fout[k].im, p = re * re + im * im;
        f->spec[k] = c->power == 2.0f ? p : sqrtf(p);
    }
    float *dst = c->n_mfcc ? f->mel : out;
    for (uint32_t m = 0; m < c->n_mels; m++) {
        const float *w = f->mel_w + f->mel_off[m];
        const float *s = f->spec + f->mel_start[m];
        float acc = 0.0f;
        for (uint32_t j = 0; j < f->mel_len[m]; j++) acc += w[j] * s[j];
        if (c->log == ETCH_LOG_LN) acc = logf(acc + c->log_offset);
        else if (c->log == ETCH_LOG_DB) acc = 10.0f * log10f(acc > c->amin ? acc : c->amin);
        dst[m] = acc;
    }
}

static void finish_mfcc(const etch_features *f, const float *mel, float *out) {
    const etch_features_config *c = &f->cfg;
    for (uint32_t k = 0; k < c->n_mfcc; k++) {
        const float *d = f->dct + (size_t)k * c->n_mels;
        float acc = 0.0f;
        for (uint32_t n = 0; n < c->n_mels; n++) acc += d[n] * mel[n];
        out[k] = acc;
    }
}

etch_status etch_features_frame(etch_features *f, const float *frame, float *out) {
    if (!f || !frame || !out) return etch_err(ETCH_ERR_INVALID_ARGUMENT, "features_frame: NULL argument");
    memcpy(f->frame, frame, (size_t)f->cfg.n_fft * sizeof(float));
    frame_features(f, out);
    if (f->cfg.n_mfcc) finish_mfcc(f, f->mel, out);
    return ETCH_OK;
}

/* Sample i of the (pre-emphasised) signal extended by reflection about its ends (torch's
 * "reflect" padding, repeated for signals shorter than the pad). */
static float sample_reflect(const float *x, size_t n, int64_t i, float a) {
    if (n == 1) return x[0];
    int64_t period = 2 * ((int64_t)n - 1);
    int64_t j = i % period;
    if (j < 0) j += period;
    if (j >= (int64_t)n) j = period - j;
    return a != 0.0f && j > 0 ? x[j] - a * x[j - 1] : x[j];
}

etch_status etch_features_compute(etch_features *f, const float *samples, size_t n, float *out,
                                  size_t max_frames, size_t *frames) {
    if (!f || (n && !samples) || !frames || (max_frames && !out))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "features_compute: NULL argument");
    const etch_features_config *c = &f->cfg;
    size_t total = etch_features_num_frames(f, n);
    if (total > max_frames) total = max_frames;
    int64_t shift = c->center ? (int64_t)(c->n_fft / 2) : 0;
    float a = c->preemphasis;
    /* The mel values must stay for the floor: without MFCC they are the output itself; with
     * it, the floor needs every frame's log-mel, so MFCC + top_db makes two passes (the first
     * finds the largest log-mel value). */
    bool floor = c->log == ETCH_LOG_DB && c->top_db > 0.0f;
    float peak = -INFINITY;
    for (int pass = (floor && c->n_mfcc) ? 0 : 1; pass < 2; pass++) {
        for (size_t t = 0; t < total; t++) {
            int64_t s0 = (int64_t)(t * c->hop_length) - shift;
            for (uint32_t i = 0; i < c->n_fft; i++) f->frame[i] = sample_reflect(samples, n, s0 + i, a);
            float *o = out + t * f->dim;
            frame_features(f, o);
            const float *mel = c->n_mfcc ? f->mel : o;
            if (pass == 0 || (floor && !c->n_mfcc)) {
                for (uint32_t m = 0; m < c->n_mels; m++)
                    if (mel[m] > peak) peak = mel[m];
                if (pass == 0) continue;
            }
            if (floor && c->n_mfcc) {
                float lo = peak - c->top_db;
                for (uint32_t m = 0; m < c->n_mels; m++)
                    if (f->mel[m] < lo) f->mel[m] = lo;
            }
            if (c->n_mfcc) finish_mfcc(f, f->mel, o);
        }
    }
    if (floor && !c->n_mfcc) {
        float lo = peak - c->top_db;
        for (size_t i = 0; i < total * f->dim; i++)
            if (out[i] < lo) out[i] = lo;
    }
    *frames = total;
    return ETCH_OK;
}
