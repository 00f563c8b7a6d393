/*
 * etch/audio.h — the audio front end of the voice pipelines: WAV decoding, resampling to the
 * models' rate, framing, log-mel spectrograms and MFCCs, and a ring buffer that turns chunks
 * of any size into the windows a model wants.
 *
 * Basic usage (a 1-second clip to the 49 x 10 MFCCs of a keyword spotter):
 *
 *   etch_wav_info wi;
 *   if (etch_wav_parse(bytes, size, &wi) != ETCH_OK) { ...etch_last_error()... }
 *   float *pcm = ...wi.frames floats...;
 *   etch_wav_decode_mono(bytes, size, &wi, 0, wi.frames, pcm);        // any format -> mono
 *
 *   // to 16 kHz (skip when wi.sample_rate is already 16000)
 *   etch_resampler_config rc = etch_resampler_default_config(wi.sample_rate, 16000);
 *   size_t rbytes;  etch_resampler_mem_size(&rc, &rbytes);
 *   etch_resampler *rs;  etch_resampler_init(&rc, rmem, rbytes, &rs);
 *   size_t n16;  etch_resampler_process(rs, pcm, wi.frames, out16, cap, &n16);
 *   size_t tail; etch_resampler_flush(rs, out16 + n16, cap - n16, &tail);
 *
 *   // features
 *   etch_features_config fc = etch_features_default_config();       // 16 kHz MFCC, see below
 *   size_t fbytes;  etch_features_mem_size(&fc, &fbytes);
 *   etch_features *f;  etch_features_init(&fc, fmem, fbytes, &f);
 *   size_t frames;  etch_features_compute(f, out16, n16 + tail, mfcc, 49, &frames);
 *
 * Memory: nothing here allocates. Each object lives in memory the caller hands to its _init
 * (size from its _mem_size), aligned to 16 bytes; the objects hold no pointer outside it, so
 * they need no _free: release the memory. Streaming calls (process, push, pull) never
 * allocate and run in bounded time. Objects are not thread-safe; different objects are
 * independent. Errors are etch_status codes with the details in etch_last_error().
 *
 * The files that need a file system (etch_wav_read_file) are in the hosted build only.
 */
#ifndef ETCH_AUDIO_H
#define ETCH_AUDIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etch/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- WAV ----------------------------------------------------------------------------------
 *
 * RIFF/WAVE with a `fmt ` chunk of PCM (format 1: unsigned 8-bit, signed 16/24/32-bit), IEEE
 * float (format 3: 32/64-bit) or WAVE_FORMAT_EXTENSIBLE (0xFFFE) carrying either, any number of
 * channels (1..64) and any rate (1 Hz .. 1 MHz). Chunks before, between and after are skipped
 * (odd sizes padded as RIFF requires). Everything else is refused by name: A-law, mu-law,
 * ADPCM, bits that do not match the block alignment, a data chunk larger than the bytes there
 * are, a RIFF size smaller than the chunks it holds, a second fmt or data chunk, no data. */

typedef enum etch_wav_encoding {
    ETCH_WAV_PCM_U8 = 1,
    ETCH_WAV_PCM_S16,
    ETCH_WAV_PCM_S24,
    ETCH_WAV_PCM_S32,
    ETCH_WAV_FLOAT32,
    ETCH_WAV_FLOAT64,
} etch_wav_encoding;

typedef struct etch_wav_info {
    uint32_t sample_rate;       /* Hz */
    uint32_t channels;
    uint32_t bits_per_sample;   /* container bits: 8, 16, 24, 32 or 64 */
    etch_wav_encoding encoding;
    uint64_t frames;            /* samples per channel */
    size_t data_offset;         /* byte offset of the first sample in the buffer */
    size_t data_size;           /* frames * channels * bits_per_sample / 8 */
} etch_wav_info;

/* Read a WAV header from `data` (the whole file, or at least its header and data chunk). */
etch_status etch_wav_parse(const void *data, size_t size, etch_wav_info *info);

/* Decode frames [first, first + count) as mono float in [-1, 1) (the channels' mean; integer
 * PCM scaled by 2^-(bits-1), 8-bit unsigned centred at 128; float copied, non-finite values
 * refused). `out` holds `count` floats. */
etch_status etch_wav_decode_mono(const void *data, size_t size, const etch_wav_info *info,
                                 uint64_t first, uint64_t count, float *out);

/* Write a mono 16-bit PCM WAV (44-byte header + 2 bytes a sample) into `out`; samples outside
 * [-1, 1] are clipped. `cap` must be at least 44 + 2 * n (`*written` gets the size). */
etch_status etch_wav_write_s16(const float *samples, size_t n, uint32_t sample_rate, void *out,
                               size_t cap, size_t *written);

/* Hosted builds: read a whole WAV file as mono float (malloc'd; free() it). */
etch_status etch_wav_read_file(const char *path, float **samples, size_t *n,
                               uint32_t *sample_rate);

/* ---- resampling ---------------------------------------------------------------------------
 *
 * A polyphase windowed-sinc (Kaiser) filter for any pair of integer rates. The ratio is reduced
 * by their gcd to L/M; with L up to max_phases the filter for every output phase is exact;
 * above it, `max_phases` filters are tabulated and interpolated linearly between neighbours.
 * Output sample k of a stream is the filter centred at input time k * in_rate / out_rate: the
 * stream's output does not depend on how its input is cut into calls. */

typedef struct etch_resampler_config {
    uint32_t in_rate, out_rate;   /* Hz, 1 .. 1,000,000 each */
    uint32_t zero_crossings;      /* filter half-length in zero crossings of the sinc (4..64) */
    float cutoff;                 /* passband edge as a fraction of the lower Nyquist (0.5..1) */
    float kaiser_beta;            /* Kaiser window's beta (0..20) */
    uint32_t max_phases;          /* most filters tabulated (16..65536) */
} etch_resampler_config;

typedef struct etch_resampler etch_resampler;

/* 24 zero crossings, cutoff 0.94, beta 9.0, 1024 phases: about 100 dB of stop band. */
etch_resampler_config etch_resampler_default_config(uint32_t in_rate, uint32_t out_rate);
etch_status etch_resampler_mem_size(const etch_resampler_config *cfg, size_t *bytes);
etch_status etch_resampler_init(const etch_resampler_config *cfg, void *mem, size_t size,
                                etch_resampler **out);
/* Most output samples `n_in` more input samples can produce (a bound for `cap`). */
size_t etch_resampler_max_output(const etch_resampler *r, size_t n_in);
/* Feed `n_in` samples; write the output samples they complete (at most `cap`: with fewer,
 * ETCH_ERR_INVALID_ARGUMENT and nothing is consumed). */
etch_status etch_resampler_process(etch_resampler *r, const float *in, size_t n_in, float *out,
                                   size_t cap, size_t *n_out);
/* End of stream: the input is followed by silence until every output sample whose time lies
 * inside the input has been written (ceil(total_in * out_rate / in_rate) in all). */
etch_status etch_resampler_flush(etch_resampler *r, float *out, size_t cap, size_t *n_out);
/* Forget the stream (the filters stay). */
void etch_resampler_reset(etch_resampler *r);

/* ---- spectrograms, log-mel, MFCC ----------------------------------------------------------
 *
 * Per frame, as torch.stft + torchaudio's MelSpectrogram / MFCC compute it:
 *   frame t covers samples [t * hop - (center ? n_fft / 2 : 0), ... + n_fft); with `center`
 *   the signal is reflect-padded by n_fft / 2 on both sides (zero-padded when shorter than
 *   that); the window (win_length, centred in n_fft, zeros around) multiplies the frame;
 *   spectrum |FFT_n_fft|^power over the n_fft / 2 + 1 bins;
 *   mel: triangular filters between f_min and f_max on the HTK (2595 log10(1 + f / 700)) or
 *   Slaney scale, optionally area-normalised (Slaney norm);
 *   log: none; ln(mel + log_offset); or 10 log10(max(mel, amin)) with, when top_db > 0, every
 *   value raised to at least (largest value of the call) - top_db;
 *   MFCC (n_mfcc > 0): DCT-II of the log-mel bins, orthonormal when dct_ortho (else unscaled:
 *   2 sum x cos(...)), first n_mfcc coefficients.
 * Output: row-major [frames][n_mfcc] (or [frames][n_mels] when n_mfcc = 0). */

typedef enum etch_window_kind {
    ETCH_WINDOW_HANN = 0,
    ETCH_WINDOW_HAMMING,
    ETCH_WINDOW_RECT,
} etch_window_kind;

typedef enum etch_mel_scale { ETCH_MEL_HTK = 0, ETCH_MEL_SLANEY } etch_mel_scale;

typedef enum etch_log_kind {
    ETCH_LOG_NONE = 0,
    ETCH_LOG_LN,   /* ln(x + log_offset) */
    ETCH_LOG_DB,   /* 10 log10(max(x, amin)), top_db floor */
} etch_log_kind;

typedef struct etch_features_config {
    uint32_t sample_rate;
    uint32_t n_fft;          /* 2 .. 65536, any size (mixed-radix FFT) */
    uint32_t win_length;     /* 1 .. n_fft */
    uint32_t hop_length;     /* >= 1 */
    etch_window_kind window;
    bool window_periodic;    /* torch's default (periodic=True) */
    bool center;
    float preemphasis;       /* y[n] = x[n] - a x[n-1] before framing (0: off) */
    float power;             /* 1: magnitude, 2: power */
    uint32_t n_mels;         /* 1 .. n_fft / 2 + 1 */
    float f_min, f_max;      /* Hz; f_max <= sample_rate / 2 */
    etch_mel_scale mel_scale;
    bool mel_norm_slaney;
    etch_log_kind log;
    float log_offset;        /* ETCH_LOG_LN */
    float amin;              /* ETCH_LOG_DB */
    float top_db;            /* ETCH_LOG_DB; <= 0: no floor */
    uint32_t n_mfcc;         /* 0: log-mel output; else 1 .. n_mels */
    bool dct_ortho;
} etch_features_config;

typedef struct etch_features etch_features;

/* The keyword spotters' MFCC at 16 kHz: 640-sample Hann frames every 320 samples, not centred
 * (49 frames a second), power spectrum over n_fft 640, 40 HTK mels 20..4000 Hz, dB with amin
 * 1e-10 and an 80 dB floor, 10 orthonormal DCT coefficients. */
etch_features_config etch_features_default_config(void);
etch_status etch_features_mem_size(const etch_features_config *cfg, size_t *bytes);
etch_status etch_features_init(const etch_features_config *cfg, void *mem, size_t size,
                               etch_features **out);
/* Values a frame yields (n_mfcc, or n_mels when 0). */
uint32_t etch_features_dim(const etch_features *f);
/* Frames `n` samples make (0 when too short without centring). */
size_t etch_features_num_frames(const etch_features *f, size_t n);
/* Features of a whole signal: min(max_frames, num_frames(n)) frames into `out`
 * ([frames][dim] floats); the top_db floor is taken over the frames written. */
etch_status etch_features_compute(etch_features *f, const float *samples, size_t n, float *out,
                                  size_t max_frames, size_t *frames);
/* One frame of exactly n_fft samples already framed (no centring, no pre-emphasis, no top_db
 * floor): the streaming path. `out` holds dim floats. */
etch_status etch_features_frame(etch_features *f, const float *frame, float *out);

/* ---- streaming windows --------------------------------------------------------------------
 *
 * A ring buffer of `capacity` samples that takes chunks of any size and gives windows of
 * `window` samples every `hop` samples (window - hop samples of overlap carried from one to
 * the next). Push may be called with any n; it stores what fits and says how much
 * (`*taken`); pull copies out the next whole window when there is one. */

typedef struct etch_audio_stream etch_audio_stream;

etch_status etch_audio_stream_mem_size(size_t window, size_t hop, size_t capacity,
                                       size_t *bytes);
etch_status etch_audio_stream_init(size_t window, size_t hop, size_t capacity, void *mem,
                                   size_t size, etch_audio_stream **out);
void etch_audio_stream_push(etch_audio_stream *s, const float *samples, size_t n,
                            size_t *taken);
/* true and `window` samples in `out` when a window is ready (then the stream moves on by hop);
 * false otherwise. */
bool etch_audio_stream_pull(etch_audio_stream *s, float *out);
/* Samples buffered, and the stream position of the next window's first sample. */
size_t etch_audio_stream_buffered(const etch_audio_stream *s);
uint64_t etch_audio_stream_position(const etch_audio_stream *s);
void etch_audio_stream_reset(etch_audio_stream *s);

#ifdef __cplusplus
}
#endif

#endif
