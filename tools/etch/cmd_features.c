/* etch features FILE.wav|- — audio features (MFCC, log-mel) for a model's input, as .npy. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_util.h"
#include "commands.h"
#include "etch/audio.h"
#include "etch/npy.h"
#include "etch/tensor.h"

void cmd_features_usage(FILE *out) {
    fprintf(out,
            "usage: etch features FILE.wav [options]\n"
            "       etch features - --raw-rate HZ [options]   (16-bit little-endian mono PCM)\n"
            "\n"
            "Decode a WAV file (PCM 8/16/24/32-bit or float, any channels, any rate: mixed to\n"
            "mono), resample it to --rate, and compute its features: by default the keyword\n"
            "spotters' MFCC (640-sample Hann frames every 320 samples at 16 kHz, power\n"
            "spectrum, 40 HTK mels 20-4000 Hz, dB with an 80 dB floor, 10 orthonormal DCT\n"
            "coefficients), the input of ExecuTorch's DS-CNN keyword spotter:\n"
            "  etch features yes.wav --frames 49 --shape 1,1,49,10 -o mfcc.npy\n"
            "  etch run kws_dscnn_cortexm.pte --inputs mfcc.npy\n"
            "Writes float32 [frames, dim] (or --shape) to -o, or prints the values.\n"
            "\n"
            "options:\n"
            "  -o, --output FILE.npy   where to write the features (default: print them)\n"
            "  --frames N              exactly N frames: the audio is cut, or padded with\n"
            "                          silence at the end (default: as many as it makes)\n"
            "  --shape D0,D1,...       the .npy's shape (its product must be frames x dim)\n"
            "  --rate HZ               the features' sample rate (default 16000)\n"
            "  --raw-rate HZ           with '-': standard input is raw s16le mono at HZ\n"
            "  --n-fft N  --win N  --hop N    frame geometry (default 640, 640, 320)\n"
            "  --window hann|hamming|rect     (default hann, periodic)\n"
            "  --center                reflect-pad n_fft/2 at both ends (torch.stft's center)\n"
            "  --power 1|2             magnitude or power spectrum (default 2)\n"
            "  --mels N  --fmin HZ  --fmax HZ (default 40, 20, 4000)\n"
            "  --mel-scale htk|slaney  --mel-norm-slaney\n"
            "  --log db|ln|none        (default db: 10 log10(max(x, 1e-10)))\n"
            "  --top-db X              dB floor below the peak (default 80; 0: none)\n"
            "  --log-offset X          ln(x + X) (default 1e-6)\n"
            "  --mfcc K                DCT coefficients (default 10; 0: log-mel output)\n"
            "  --preemphasis A         y[n] = x[n] - A x[n-1] first (default 0)\n"
            "  -h, --help              show this help\n");
}

typedef struct feat_opts {
    const char *path, *out, *frames, *shape, *rate, *raw_rate, *n_fft, *win, *hop, *window,
        *power, *mels, *fmin, *fmax, *mel_scale, *log, *top_db, *log_offset, *mfcc, *pre;
    bool center, norm_slaney;
} feat_opts;

static int read_all(const char *path, void **data, size_t *size) {
    if (strcmp(path, "-") != 0) return cli_read_file(path, data, size);
    size_t cap = 1 << 16, len = 0;
    unsigned char *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            fprintf(stderr, "error: MemoryAllocationFailed: standard input\n");
            return CLI_FAIL;
        }
        ssize_t got = read(0, buf + len, cap - len);
        if (got < 0) {
            free(buf);
            fprintf(stderr, "error: AccessFailed: cannot read standard input\n");
            return CLI_FAIL;
        }
        if (got == 0) break;
        len += (size_t)got;
        if (len == cap) {
            if (cap >= ((size_t)1 << 30)) {
                free(buf);
                fprintf(stderr, "error: NotSupported: standard input is larger than 1 GiB\n");
                return CLI_FAIL;
            }
            unsigned char *nb = realloc(buf, cap * 2);
            if (!nb) free(buf);
            buf = nb, cap *= 2;
        }
    }
    *data = buf, *size = len;
    return CLI_OK;
}

static bool parse_u32(const char *opt, const char *s, long long lo, long long hi, uint32_t *out) {
    long long v;
    if (!cli_parse_long("features", opt, s, lo, hi, &v)) return false;
    *out = (uint32_t)v;
    return true;
}

static bool parse_f(const char *opt, const char *s, double lo, double hi, float *out) {
    double v;
    if (!cli_parse_double("features", opt, s, lo, hi, &v)) return false;
    *out = (float)v;
    return true;
}

/* The options into the config; false after a usage error. */
static bool make_config(const feat_opts *o, etch_features_config *c) {
    *c = etch_features_default_config();
    if (o->rate && !parse_u32("--rate", o->rate, 1, 1000000, &c->sample_rate)) return false;
    if (o->n_fft && !parse_u32("--n-fft", o->n_fft, 2, 65536, &c->n_fft)) return false;
    if (o->n_fft) c->win_length = c->n_fft; /* torch's default: the window spans the FFT */
    if (o->win && !parse_u32("--win", o->win, 1, 65536, &c->win_length)) return false;
    if (o->hop && !parse_u32("--hop", o->hop, 1, 1 << 24, &c->hop_length)) return false;
    if (o->window) {
        if (!strcmp(o->window, "hann")) c->window = ETCH_WINDOW_HANN;
        else if (!strcmp(o->window, "hamming")) c->window = ETCH_WINDOW_HAMMING;
        else if (!strcmp(o->window, "rect")) c->window = ETCH_WINDOW_RECT;
        else {
            cli_usage_error("features", "--window: '%s' is not hann, hamming or rect", cli_safe(o->window));
            return false;
        }
    }
    c->center = o->center;
    if (o->power) {
        if (!strcmp(o->power, "1")) c->power = 1.0f;
        else if (!strcmp(o->power, "2")) c->power = 2.0f;
        else {
            cli_usage_error("features", "--power: '%s' is not 1 or 2", cli_safe(o->power));
            return false;
        }
    }
    if (o->mels && !parse_u32("--mels", o->mels, 1, 32769, &c->n_mels)) return false;
    if (o->fmin && !parse_f("--fmin", o->fmin, 0, 500000, &c->f_min)) return false;
    if (o->fmax && !parse_f("--fmax", o->fmax, 0, 500000, &c->f_max)) return false;
    if (o->mel_scale) {
        if (!strcmp(o->mel_scale, "htk")) c->mel_scale = ETCH_MEL_HTK;
        else if (!strcmp(o->mel_scale, "slaney")) c->mel_scale = ETCH_MEL_SLANEY;
        else {
            cli_usage_error("features", "--mel-scale: '%s' is not htk or slaney", cli_safe(o->mel_scale));
            return false;
        }
    }
    c->mel_norm_slaney = o->norm_slaney;
    if (o->log) {
        if (!strcmp(o->log, "db")) c->log = ETCH_LOG_DB;
        else if (!strcmp(o->log, "ln")) c->log = ETCH_LOG_LN;
        else if (!strcmp(o->log, "none")) c->log = ETCH_LOG_NONE;
        else {
            cli_usage_error("features", "--log: '%s' is not db, ln or none", cli_safe(o->log));
            return false;
        }
    }
    if (o->top_db && !parse_f("--top-db", o->top_db, 0, 1000, &c->top_db)) return false;
    if (o->log_offset && !parse_f("--log-offset", o->log_offset, 1e-30, 1e30, &c->log_offset)) return false;
    if (o->mfcc && !parse_u32("--mfcc", o->mfcc, 0, 32769, &c->n_mfcc)) return false;
    if (o->pre && !parse_f("--preemphasis", o->pre, 0, 0.9999, &c->preemphasis)) return false;
    if (c->log == ETCH_LOG_NONE && !o->mfcc) c->n_mfcc = 0;
    return true;
}

/* "1,1,49,10" into sizes; false after a usage error. */
static bool parse_shape(const char *s, int64_t *sizes, size_t *dim) {
    *dim = 0;
    const char *p = s;
    while (*p) {
        if (*dim == ETCH_MAX_DIMS) {
            cli_usage_error("features", "--shape: more than %d dimensions", ETCH_MAX_DIMS);
            return false;
        }
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 1 || v > (1LL << 40) || (*end && *end != ',')) {
            cli_usage_error("features", "--shape: '%s' is not a list of positive sizes", cli_safe(s));
            return false;
        }
        sizes[(*dim)++] = v;
        p = *end ? end + 1 : end;
        if (*end == ',' && !*p) {
            cli_usage_error("features", "--shape: '%s' ends with a comma", cli_safe(s));
            return false;
        }
    }
    if (!*dim) {
        cli_usage_error("features", "--shape: empty");
        return false;
    }
    return true;
}

static void *alloc16(size_t n) { return aligned_alloc(16, (n + 15) & ~(size_t)15); }

/* pcm (n at `rate`) -> out_rate, into *res (malloc'd). */
static etch_status resample_all(const float *pcm, size_t n, uint32_t rate, uint32_t out_rate,
                                float **res, size_t *rn) {
    etch_resampler_config rc = etch_resampler_default_config(rate, out_rate);
    size_t bytes;
    etch_status st = etch_resampler_mem_size(&rc, &bytes);
    if (st) return st;
    void *mem = alloc16(bytes);
    size_t cap = (size_t)((double)n * out_rate / rate) + 2;
    float *out = malloc(cap * sizeof *out);
    etch_resampler *r = NULL;
    size_t a = 0, b = 0;
    if (!mem || !out) st = ETCH_ERR_MEMORY_ALLOCATION_FAILED;
    if (!st) st = etch_resampler_init(&rc, mem, bytes, &r);
    if (!st) st = etch_resampler_process(r, pcm, n, out, cap, &a);
    if (!st) st = etch_resampler_flush(r, out + a, cap - a, &b);
    free(mem);
    if (st) {
        free(out);
        return st;
    }
    *res = out, *rn = a + b;
    return ETCH_OK;
}

int cmd_features(int argc, char **argv) {
    feat_opts o = {0};
    for (int i = 1; i < argc; i++) {
        int r = 0;
        const char *oo = NULL;
        if ((r = cli_opt_value("features", argc, argv, &i, "-o", &oo)) ||
            (r = cli_opt_value("features", argc, argv, &i, "--output", &oo))) {
            if (r < 0) return CLI_USAGE;
            if (o.out) return cli_usage_error("features", "the output is given twice");
            o.out = oo;
            continue;
        }
        struct { const char *name; const char **v; } vals[] = {
            {"--frames", &o.frames}, {"--shape", &o.shape}, {"--rate", &o.rate},
            {"--raw-rate", &o.raw_rate}, {"--n-fft", &o.n_fft}, {"--win", &o.win},
            {"--hop", &o.hop}, {"--window", &o.window}, {"--power", &o.power},
            {"--mels", &o.mels}, {"--fmin", &o.fmin}, {"--fmax", &o.fmax},
            {"--mel-scale", &o.mel_scale}, {"--log", &o.log}, {"--top-db", &o.top_db},
            {"--log-offset", &o.log_offset}, {"--mfcc", &o.mfcc}, {"--preemphasis", &o.pre}};
        for (size_t k = 0; k < sizeof vals / sizeof *vals && !r; k++)
            r = cli_opt_value("features", argc, argv, &i, vals[k].name, vals[k].v);
        if (!r) r = cli_opt_flag("features", argv, i, "--center", &o.center);
        if (!r) r = cli_opt_flag("features", argv, i, "--mel-norm-slaney", &o.norm_slaney);
        if (r < 0) return CLI_USAGE;
        if (r > 0) continue;
        if (!strcmp(argv[i], "-") && !o.path) {
            o.path = "-";
            continue;
        }
        if ((r = cli_opt_file("features", argc, argv, &i, &o.path)) < 0) return CLI_USAGE;
        if (r > 0) break;
    }
    if (!o.path) return cli_usage_error("features", "missing FILE.wav (or - for standard input)");
    etch_features_config cfg;
    if (!make_config(&o, &cfg)) return CLI_USAGE;
    uint32_t raw_rate = 0;
    if (o.raw_rate && !parse_u32("--raw-rate", o.raw_rate, 1, 1000000, &raw_rate)) return CLI_USAGE;
    if (raw_rate && strcmp(o.path, "-") != 0)
        return cli_usage_error("features", "--raw-rate is for standard input ('-') only");
    long long want_frames = -1;
    if (o.frames && !cli_parse_long("features", "--frames", o.frames, 1, 1 << 24, &want_frames))
        return CLI_USAGE;
    int64_t sizes[ETCH_MAX_DIMS];
    size_t dim = 0;
    if (o.shape && !parse_shape(o.shape, sizes, &dim)) return CLI_USAGE;

    void *data = NULL;
    size_t size = 0;
    int rc = read_all(o.path, &data, &size);
    if (rc != CLI_OK) return rc;
    float *pcm = NULL, *res = NULL, *feat = NULL;
    void *fmem = NULL;
    size_t n = 0;
    uint32_t rate = raw_rate;
    etch_status st = ETCH_OK;
    const char *label = strcmp(o.path, "-") ? o.path : "standard input";
    if (raw_rate) {
        if (size % 2) {
            fprintf(stderr, "error: InvalidArgument: %s: %zu bytes is not whole 16-bit samples\n",
                    label, size);
            rc = CLI_FAIL;
            goto done;
        }
        n = size / 2;
        pcm = malloc((n ? n : 1) * sizeof *pcm);
        if (!pcm) st = ETCH_ERR_MEMORY_ALLOCATION_FAILED;
        const unsigned char *b = data;
        for (size_t k = 0; pcm && k < n; k++)
            pcm[k] = (int16_t)(uint16_t)(b[2 * k] | b[2 * k + 1] << 8) / 32768.0f;
    } else {
        etch_wav_info wi;
        st = etch_wav_parse(data, size, &wi);
        if (!st && wi.frames > ((size_t)1 << 31)) st = ETCH_ERR_NOT_SUPPORTED;
        if (!st) {
            n = (size_t)wi.frames;
            rate = wi.sample_rate;
            pcm = malloc((n ? n : 1) * sizeof *pcm);
            st = pcm ? etch_wav_decode_mono(data, size, &wi, 0, n, pcm)
                     : ETCH_ERR_MEMORY_ALLOCATION_FAILED;
        }
    }
    if (st) {
        rc = cli_fail_ctx(st, "%s", cli_safe(label));
        goto done;
    }
    if (rate != cfg.sample_rate) {
        size_t rn;
        if ((st = resample_all(pcm, n, rate, cfg.sample_rate, &res, &rn)) != ETCH_OK) {
            rc = cli_fail_ctx(st, "resampling %s from %u Hz", cli_safe(label), (unsigned)rate);
            goto done;
        }
        free(pcm);
        pcm = res, res = NULL, n = rn;
    }
    size_t fbytes;
    etch_features *f = NULL;
    if ((st = etch_features_mem_size(&cfg, &fbytes)) != ETCH_OK ||
        !(fmem = alloc16(fbytes)) || (st = etch_features_init(&cfg, fmem, fbytes, &f)) != ETCH_OK) {
        rc = cli_fail(st ? st : ETCH_ERR_MEMORY_ALLOCATION_FAILED);
        goto done;
    }
    if (want_frames > 0) {
        /* exactly N frames: the samples N frames span, silence after the audio */
        size_t need = cfg.center ? (size_t)(want_frames - 1) * cfg.hop_length + 1
                                 : (size_t)(want_frames - 1) * cfg.hop_length + cfg.n_fft;
        if (need > n) {
            float *p = realloc(pcm, need * sizeof *p);
            if (!p) {
                rc = cli_fail(ETCH_ERR_MEMORY_ALLOCATION_FAILED);
                goto done;
            }
            memset(p + n, 0, (need - n) * sizeof *p);
            pcm = p;
        }
        n = need;
    }
    size_t frames = etch_features_num_frames(f, n), fdim = etch_features_dim(f);
    if (frames == 0) {
        fprintf(stderr, "error: InvalidArgument: %s: %zu samples make no %u-sample frame\n",
                cli_safe(label), n, (unsigned)cfg.n_fft);
        rc = CLI_FAIL;
        goto done;
    }
    feat = malloc(frames * fdim * sizeof *feat);
    if (!feat || (st = etch_features_compute(f, pcm, n, feat, frames, &frames)) != ETCH_OK) {
        rc = cli_fail(feat ? st : ETCH_ERR_MEMORY_ALLOCATION_FAILED);
        goto done;
    }
    if (!dim) {
        sizes[0] = (int64_t)frames, sizes[1] = (int64_t)fdim, dim = 2;
    } else {
        int64_t prod = 1;
        for (size_t k = 0; k < dim; k++) prod *= sizes[k];
        if (prod != (int64_t)(frames * fdim)) {
            char sb[128];
            fprintf(stderr, "error: InvalidArgument: --shape %s holds %lld values; the features are "
                    "%zu frames x %zu = %zu\n", cli_shape_str(sb, sizeof sb, dim, sizes),
                    (long long)prod, frames, fdim, frames * fdim);
            rc = CLI_FAIL;
            goto done;
        }
    }
    etch_tensor t;
    if ((st = etch_tensor_init(&t, ETCH_DTYPE_FLOAT, dim, sizes, feat)) != ETCH_OK) {
        rc = cli_fail(st);
        goto done;
    }
    if (o.out) {
        if ((st = etch_npy_write_file(o.out, &t)) != ETCH_OK) {
            rc = cli_fail(st);
            goto done;
        }
        char sb[128];
        fprintf(stderr, "%s: %zu frames x %zu at %u Hz -> %s float32 %s\n", cli_safe(label),
                frames, fdim, (unsigned)cfg.sample_rate, cli_safe(o.out),
                cli_shape_str(sb, sizeof sb, dim, sizes));
    } else {
        for (size_t r = 0; r < frames; r++)
            for (size_t k = 0; k < fdim; k++)
                printf("%.6g%c", feat[r * fdim + k], k + 1 == fdim ? '\n' : ' ');
    }
    rc = CLI_OK;
done:
    free(data);
    free(pcm);
    free(res);
    free(feat);
    free(fmem);
    return rc;
}
