/* Polyphase windowed-sinc resampling between integer rates (see etch/audio.h). */
#include <math.h>
#include <string.h>

#include "etch/audio.h"
#include "runtime/error.h"

/* Input samples held beyond the filter's span, so that a call consumes its input in pieces of
 * this many. */
#define RS_BLOCK 4096u

struct etch_resampler {
    etch_resampler_config cfg;
    uint64_t L, M;        /* out / in, reduced */
    uint32_t H;           /* taps either side: the filter spans inputs i0 - H + 1 .. i0 + H */
    uint32_t taps;        /* 2 H */
    uint32_t P;           /* phases tabulated */
    bool exact;           /* P == L: phase k M mod L is row (k M mod L) */
    float *table;         /* (P + 1) x taps */
    float *buf;           /* taps + RS_BLOCK input samples; buf[0] is input index `base` */
    uint32_t cap;
    int64_t base;         /* stream index of buf[0] (negative: the zeros before the start) */
    uint32_t len;         /* samples in buf */
    uint64_t total_in;    /* samples fed */
    uint64_t k;           /* next output sample */
    bool flushed;
};

etch_resampler_config etch_resampler_default_config(uint32_t in_rate, uint32_t out_rate) {
    etch_resampler_config c = {in_rate, out_rate, 24, 0.94f, 9.0f, 1024};
    return c;
}

static uint64_t gcd64(uint64_t a, uint64_t b) {
    while (b) {
        uint64_t t = a % b;
        a = b, b = t;
    }
    return a;
}

static double bessel_i0(double x) {
    double sum = 1.0, term = 1.0, q = x * x / 4.0;
    for (int k = 1; k < 200; k++) {
        term *= q / ((double)k * k);
        sum += term;
        if (term < sum * 1e-17) break;
    }
    return sum;
}

typedef struct rs_shape {
    uint64_t L, M;
    uint32_t H, P;
    double fc, W;
} rs_shape;

static etch_status shape_of(const etch_resampler_config *c, rs_shape *s) {
#define BAD(...) return etch_err(ETCH_ERR_INVALID_ARGUMENT, "resampler: " __VA_ARGS__)
    if (!c) BAD("NULL config");
    if (c->in_rate < 1 || c->in_rate > 1000000 || c->out_rate < 1 || c->out_rate > 1000000)
        BAD("rates %u -> %u Hz (1..1000000 each)", (unsigned)c->in_rate, (unsigned)c->out_rate);
    if (c->zero_crossings < 4 || c->zero_crossings > 64)
        BAD("zero_crossings %u (4..64)", (unsigned)c->zero_crossings);
    if (!(c->cutoff >= 0.5f && c->cutoff <= 1.0f)) BAD("cutoff %g (0.5..1)", (double)c->cutoff);
    if (!(c->kaiser_beta >= 0.0f && c->kaiser_beta <= 20.0f)) BAD("kaiser_beta %g (0..20)", (double)c->kaiser_beta);
    if (c->max_phases < 16 || c->max_phases > 65536) BAD("max_phases %u (16..65536)", (unsigned)c->max_phases);
#undef BAD
    uint64_t g = gcd64(c->in_rate, c->out_rate);
    s->L = c->out_rate / g;
    s->M = c->in_rate / g;
    /* cycles per input sample */
    s->fc = 0.5 * (c->out_rate < c->in_rate ? (double)c->out_rate / c->in_rate : 1.0) * c->cutoff;
    s->W = c->zero_crossings / (2.0 * s->fc); /* half-length in input samples */
    s->H = (uint32_t)ceil(s->W);
    s->P = s->L <= c->max_phases ? (uint32_t)s->L : c->max_phases;
    /* 1 MHz -> 1 Hz: 24 zero crossings at 0.47 cycles per million samples is a 25-million-tap
     * filter. Refused past a million taps (4 MB a phase). */
    if (s->H > 500000)
        return etch_err(ETCH_ERR_NOT_SUPPORTED,
                        "resampler: %u -> %u Hz needs a filter of %u taps (at most 1000000)",
                        (unsigned)c->in_rate, (unsigned)c->out_rate, 2 * s->H);
    return ETCH_OK;
}

static size_t up16(size_t x) { return (x + 15) & ~(size_t)15; }

static size_t mem_of(const rs_shape *s) {
    return up16(sizeof(etch_resampler)) + up16(((size_t)s->P + 1) * 2 * s->H * sizeof(float)) +
           up16(((size_t)2 * s->H + RS_BLOCK) * sizeof(float));
}

etch_status etch_resampler_mem_size(const etch_resampler_config *cfg, size_t *bytes) {
    rs_shape s = {0};
    etch_status st = shape_of(cfg, &s);
    if (st) return st;
    if (!bytes) return etch_err(ETCH_ERR_INVALID_ARGUMENT, "resampler_mem_size: NULL bytes");
    *bytes = mem_of(&s);
    return ETCH_OK;
}

void etch_resampler_reset(etch_resampler *r) {
    if (!r) return;
    /* H zeros before the first sample: output 0 (time 0) reads inputs -H + 1 .. H. */
    memset(r->buf, 0, (size_t)r->H * sizeof(float));
    r->base = -(int64_t)r->H;
    r->len = r->H;
    r->total_in = 0;
    r->k = 0;
    r->flushed = false;
}

etch_status etch_resampler_init(const etch_resampler_config *cfg, void *mem, size_t size,
                                etch_resampler **out) {
    rs_shape s = {0};
    etch_status st = shape_of(cfg, &s);
    if (st) return st;
    if (!mem || !out) return etch_err(ETCH_ERR_INVALID_ARGUMENT, "resampler_init: NULL argument");
    if ((uintptr_t)mem % 16)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "resampler_init: memory not 16-byte aligned");
    if (size < mem_of(&s))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "resampler_init: %zu bytes given, %zu needed",
                        size, mem_of(&s));
    etch_resampler *r = mem;
    memset(r, 0, sizeof *r);
    r->cfg = *cfg;
    r->L = s.L, r->M = s.M, r->H = s.H, r->taps = 2 * s.H, r->P = s.P;
    r->exact = s.P == s.L;
    r->table = (float *)((uint8_t *)mem + up16(sizeof(etch_resampler)));
    r->buf = (float *)((uint8_t *)r->table + up16(((size_t)s.P + 1) * r->taps * sizeof(float)));
    r->cap = r->taps + RS_BLOCK;
    double i0b = bessel_i0(cfg->kaiser_beta);
    for (uint32_t p = 0; p <= s.P; p++) {
        double frac = (double)p / s.P, sum = 0;
        float *row = r->table + (size_t)p * r->taps;
        for (uint32_t j = 0; j < r->taps; j++) {
            /* tap j reads input i0 - H + 1 + j, at distance tau = frac + H - 1 - j */
            double tau = frac + (double)s.H - 1.0 - j, x = tau / s.W, h = 0;
            if (fabs(x) < 1.0) {
                double a = 2.0 * s.fc * tau * 3.14159265358979323846;
                double sinc = tau == 0 ? 1.0 : sin(a) / a;
                h = 2.0 * s.fc * sinc * bessel_i0(cfg->kaiser_beta * sqrt(1.0 - x * x)) / i0b;
            }
            row[j] = (float)h;
            sum += h;
        }
        /* unity gain at DC for every phase */
        if (sum != 0)
            for (uint32_t j = 0; j < r->taps; j++) row[j] = (float)(row[j] / sum);
    }
    etch_resampler_reset(r);
    *out = r;
    return ETCH_OK;
}

/* Outputs whose filters lie inside inputs [.., end): k with floor(k M / L) + H <= end - 1. */
static uint64_t outputs_until(const etch_resampler *r, int64_t end) {
    int64_t lim = end - (int64_t)r->H; /* need floor(kM/L) < lim */
    if (lim <= 0) return 0;
    /* k M / L < lim  <=>  k < lim L / M: ceil(lim L / M) */
    return ((uint64_t)lim * r->L + r->M - 1) / r->M;
}

static float one_output(const etch_resampler *r, uint64_t k) {
    uint64_t num = k * r->M;
    int64_t i0 = (int64_t)(num / r->L);
    uint64_t rem = num % r->L;
    const float *x = r->buf + (i0 - r->H + 1 - r->base);
    float acc = 0.0f;
    if (r->exact) {
        const float *h = r->table + (size_t)rem * r->taps;
        for (uint32_t j = 0; j < r->taps; j++) acc += h[j] * x[j];
    } else {
        double pos = (double)rem / r->L * r->P;
        uint32_t p = (uint32_t)pos;
        if (p >= r->P) p = r->P - 1;
        float t = (float)(pos - p);
        const float *h0 = r->table + (size_t)p * r->taps, *h1 = h0 + r->taps;
        for (uint32_t j = 0; j < r->taps; j++) acc += (h0[j] + t * (h1[j] - h0[j])) * x[j];
    }
    return acc;
}

/* Append n samples (NULL: zeros) and emit the outputs below `kmax` they complete; the caller
 * has checked the room in `out`; n fits in buf (len <= taps before, so RS_BLOCK always does). */
static size_t feed(etch_resampler *r, const float *in, uint32_t n, float *out, uint64_t kmax) {
    if (in) memcpy(r->buf + r->len, in, (size_t)n * sizeof(float));
    else memset(r->buf + r->len, 0, (size_t)n * sizeof(float));
    r->len += n;
    uint64_t until = outputs_until(r, r->base + r->len), made = 0;
    if (until > kmax) until = kmax;
    for (; r->k < until; r->k++) out[made++] = one_output(r, r->k);
    /* keep from the first input the next output needs */
    int64_t keep_from = (int64_t)(r->k * r->M / r->L) - (int64_t)r->H + 1;
    if (keep_from > r->base) {
        uint32_t drop = (uint32_t)(keep_from - r->base);
        if (drop > r->len) drop = r->len;
        memmove(r->buf, r->buf + drop, (size_t)(r->len - drop) * sizeof(float));
        r->len -= drop;
        r->base += drop;
    }
    return made;
}

size_t etch_resampler_max_output(const etch_resampler *r, size_t n_in) {
    if (!r) return 0;
    return (size_t)(outputs_until(r, r->base + r->len + (int64_t)n_in) - r->k);
}

etch_status etch_resampler_process(etch_resampler *r, const float *in, size_t n_in, float *out,
                                   size_t cap, size_t *n_out) {
    if (!r || (n_in && !in) || !n_out)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "resampler_process: NULL argument");
    if (r->flushed)
        return etch_err(ETCH_ERR_INVALID_STATE, "resampler_process: the stream was flushed (reset it)");
    size_t need = etch_resampler_max_output(r, n_in);
    if (need > cap || (need && !out))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "resampler_process: %zu input samples make %zu output samples, room for %zu",
                        n_in, need, cap);
    size_t made = 0;
    while (n_in) {
        uint32_t room = r->cap - r->len, take = n_in < room ? (uint32_t)n_in : room;
        made += feed(r, in, take, out + made, UINT64_MAX);
        in += take, n_in -= take;
        r->total_in += take;
    }
    *n_out = made;
    return ETCH_OK;
}

etch_status etch_resampler_flush(etch_resampler *r, float *out, size_t cap, size_t *n_out) {
    if (!r || !n_out) return etch_err(ETCH_ERR_INVALID_ARGUMENT, "resampler_flush: NULL argument");
    /* every k with k M / L < total_in */
    uint64_t want = (r->total_in * r->L + r->M - 1) / r->M;
    size_t need = r->flushed || want <= r->k ? 0 : (size_t)(want - r->k);
    if (need > cap || (need && !out))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "resampler_flush: %zu output samples remain, room for %zu", need, cap);
    size_t made = 0;
    while (r->k < want && !r->flushed) made += feed(r, NULL, r->cap - r->len, out + made, want);
    r->flushed = true;
    *n_out = made;
    return ETCH_OK;
}
