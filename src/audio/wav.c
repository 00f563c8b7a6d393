/* WAV (RIFF/WAVE) parsing, decoding to mono float, and writing 16-bit PCM. No allocation. */
#include <math.h>
#include <string.h>

#include "etch/audio.h"
#include "runtime/error.h"

#define WAV_MAX_CHANNELS 64u
#define WAV_MAX_RATE 1000000u

static uint32_t rd_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint16_t rd_u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* KSDATAFORMAT_SUBTYPE_PCM / _IEEE_FLOAT: the format tag, then this fixed tail. */
static const uint8_t guid_tail[14] = {0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80,
                                      0x00, 0x00, 0xaa, 0x00, 0x38, 0x9b, 0x71};

static etch_status parse_fmt(const uint8_t *c, uint32_t len, etch_wav_info *wi) {
    if (len < 16)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "wav: fmt chunk of %u bytes (16 at least)",
                        (unsigned)len);
    uint32_t tag = rd_u16(c), channels = rd_u16(c + 2), rate = rd_u32(c + 4);
    uint32_t align = rd_u16(c + 12), bits = rd_u16(c + 14);
    if (tag == 0xFFFE) {
        if (len < 40)
            return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                            "wav: WAVE_FORMAT_EXTENSIBLE fmt chunk of %u bytes (40 needed)",
                            (unsigned)len);
        uint32_t valid = rd_u16(c + 18);
        if (memcmp(c + 26, guid_tail, sizeof guid_tail) != 0)
            return etch_err(ETCH_ERR_NOT_SUPPORTED,
                            "wav: WAVE_FORMAT_EXTENSIBLE with an unknown sub-format GUID");
        tag = rd_u16(c + 24);
        if (valid != 0 && valid != bits)
            return etch_err(ETCH_ERR_NOT_SUPPORTED,
                            "wav: %u valid bits in %u-bit containers are not supported",
                            (unsigned)valid, (unsigned)bits);
    }
    if (tag == 6 || tag == 7)
        return etch_err(ETCH_ERR_NOT_SUPPORTED, "wav: %s encoding is not supported (PCM or float)",
                        tag == 6 ? "A-law" : "mu-law");
    if (tag != 1 && tag != 3)
        return etch_err(ETCH_ERR_NOT_SUPPORTED,
                        "wav: format tag 0x%04x is not supported (PCM 1 or IEEE float 3)",
                        (unsigned)tag);
    if (channels == 0 || channels > WAV_MAX_CHANNELS)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "wav: %u channels (1..%u)", (unsigned)channels,
                        WAV_MAX_CHANNELS);
    if (rate == 0 || rate > WAV_MAX_RATE)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "wav: sample rate %u Hz (1..%u)",
                        (unsigned)rate, WAV_MAX_RATE);
    etch_wav_encoding enc;
    if (tag == 1 && bits == 8) enc = ETCH_WAV_PCM_U8;
    else if (tag == 1 && bits == 16) enc = ETCH_WAV_PCM_S16;
    else if (tag == 1 && bits == 24) enc = ETCH_WAV_PCM_S24;
    else if (tag == 1 && bits == 32) enc = ETCH_WAV_PCM_S32;
    else if (tag == 3 && bits == 32) enc = ETCH_WAV_FLOAT32;
    else if (tag == 3 && bits == 64) enc = ETCH_WAV_FLOAT64;
    else
        return etch_err(ETCH_ERR_NOT_SUPPORTED, "wav: %u-bit %s samples are not supported",
                        (unsigned)bits, tag == 1 ? "PCM" : "float");
    if (align != channels * (bits / 8))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "wav: block alignment %u does not match %u channels of %u bits",
                        (unsigned)align, (unsigned)channels, (unsigned)bits);
    wi->sample_rate = rate;
    wi->channels = channels;
    wi->bits_per_sample = bits;
    wi->encoding = enc;
    return ETCH_OK;
}

etch_status etch_wav_parse(const void *data, size_t size, etch_wav_info *info) {
    if (!data || !info) return etch_err(ETCH_ERR_INVALID_ARGUMENT, "wav_parse: NULL argument");
    const uint8_t *p = data;
    if (size < 12)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "wav: %zu bytes is too short for a RIFF/WAVE "
                        "header (12 at least)", size);
    if (memcmp(p, "RIFF", 4) != 0 || memcmp(p + 8, "WAVE", 4) != 0)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "wav: not a RIFF/WAVE file%s",
                        size >= 4 && memcmp(p, "RF64", 4) == 0 ? " (RF64 is not supported)" : "");
    uint64_t riff_end = (uint64_t)rd_u32(p + 4) + 8;
    if (riff_end < 12)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "wav: RIFF size %u is too small",
                        (unsigned)rd_u32(p + 4));
    /* A RIFF size past the end of the buffer: the file was cut; chunks are read as far as
     * they are there (a data chunk that lies is refused below). */
    uint64_t end = riff_end < size ? riff_end : size;
    etch_wav_info wi = {0};
    bool have_fmt = false, have_data = false;
    uint64_t data_len = 0;
    uint64_t off = 12;
    while (off + 8 <= end) {
        const uint8_t *c = p + off;
        uint32_t len = rd_u32(c + 4);
        uint64_t body = off + 8;
        if (!memcmp(c, "fmt ", 4)) {
            if (have_fmt) return etch_err(ETCH_ERR_INVALID_ARGUMENT, "wav: a second fmt chunk");
            if (body + len > end)
                return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                                "wav: fmt chunk of %u bytes at offset %llu runs past the end "
                                "(%llu bytes)", (unsigned)len, (unsigned long long)off,
                                (unsigned long long)end);
            etch_status st = parse_fmt(p + body, len, &wi);
            if (st) return st;
            have_fmt = true;
        } else if (!memcmp(c, "data", 4)) {
            if (have_data) return etch_err(ETCH_ERR_INVALID_ARGUMENT, "wav: a second data chunk");
            if (!have_fmt)
                return etch_err(ETCH_ERR_INVALID_ARGUMENT, "wav: data chunk before the fmt chunk (no format known for it)");
            if (body + len > size)
                return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                                "wav: data chunk says %u bytes, the file has %llu after it",
                                (unsigned)len, (unsigned long long)(size - body));
            if (body + len > riff_end)
                return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                                "wav: data chunk of %u bytes runs past the RIFF size (%llu)",
                                (unsigned)len, (unsigned long long)riff_end);
            uint32_t frame = wi.channels * (wi.bits_per_sample / 8);
            if (len % frame != 0)
                return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                                "wav: data chunk of %u bytes is not a whole number of %u-byte "
                                "frames", (unsigned)len, (unsigned)frame);
            wi.data_offset = (size_t)body;
            data_len = len;
            have_data = true;
        }
        off = body + len + (len & 1);
    }
    if (!have_fmt) return etch_err(ETCH_ERR_INVALID_ARGUMENT, "wav: no fmt chunk");
    if (!have_data) return etch_err(ETCH_ERR_INVALID_ARGUMENT, "wav: no data chunk");
    wi.data_size = (size_t)data_len;
    wi.frames = data_len / (wi.channels * (wi.bits_per_sample / 8));
    *info = wi;
    return ETCH_OK;
}

static double sample_at(const uint8_t *s, etch_wav_encoding enc) {
    switch (enc) {
    case ETCH_WAV_PCM_U8: return ((int)s[0] - 128) / 128.0;
    case ETCH_WAV_PCM_S16: return (int16_t)rd_u16(s) / 32768.0;
    case ETCH_WAV_PCM_S24: {
        int32_t v = (int32_t)((uint32_t)s[0] | (uint32_t)s[1] << 8 | (uint32_t)s[2] << 16);
        if (v & 0x800000) v -= 0x1000000;
        return v / 8388608.0;
    }
    case ETCH_WAV_PCM_S32: return (int32_t)rd_u32(s) / 2147483648.0;
    case ETCH_WAV_FLOAT32: {
        uint32_t u = rd_u32(s);
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    case ETCH_WAV_FLOAT64: {
        uint64_t u = (uint64_t)rd_u32(s) | (uint64_t)rd_u32(s + 4) << 32;
        double d;
        memcpy(&d, &u, 8);
        return d;
    }
    }
    return 0;
}

etch_status etch_wav_decode_mono(const void *data, size_t size, const etch_wav_info *info,
                                 uint64_t first, uint64_t count, float *out) {
    if (!data || !info || (count && !out))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "wav_decode_mono: NULL argument");
    uint32_t bytes = info->bits_per_sample / 8;
    if (info->channels == 0 || info->channels > WAV_MAX_CHANNELS || bytes == 0 ||
        info->encoding < ETCH_WAV_PCM_U8 || info->encoding > ETCH_WAV_FLOAT64)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "wav_decode_mono: info is not from wav_parse");
    if (first > info->frames || count > info->frames - first)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "wav_decode_mono: frames [%llu, +%llu) outside the %llu there are",
                        (unsigned long long)first, (unsigned long long)count,
                        (unsigned long long)info->frames);
    uint64_t frame = (uint64_t)info->channels * bytes;
    if (info->data_offset > size || info->frames > (size - info->data_offset) / frame)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "wav_decode_mono: the buffer is smaller than its info says");
    const uint8_t *p = (const uint8_t *)data + info->data_offset + first * frame;
    double inv = 1.0 / info->channels;
    for (uint64_t i = 0; i < count; i++, p += frame) {
        double acc = 0;
        for (uint32_t c = 0; c < info->channels; c++) {
            double v = sample_at(p + (size_t)c * bytes, info->encoding);
            if (!isfinite(v))
                return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                                "wav: sample %llu of channel %u is not a finite number",
                                (unsigned long long)(first + i), (unsigned)c);
            acc += v;
        }
        out[i] = (float)(acc * inv);
    }
    return ETCH_OK;
}

static void wr_u32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24);
}
static void wr_u16(uint8_t *p, uint32_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }

etch_status etch_wav_write_s16(const float *samples, size_t n, uint32_t sample_rate, void *out,
                               size_t cap, size_t *written) {
    if ((n && !samples) || !out || !written)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "wav_write_s16: NULL argument");
    if (sample_rate == 0 || sample_rate > WAV_MAX_RATE)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "wav_write_s16: sample rate %u Hz",
                        (unsigned)sample_rate);
    if (n > (UINT32_MAX - 36) / 2 || cap < 44 || (cap - 44) / 2 < n)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "wav_write_s16: %zu samples need %zu bytes, %zu given", n,
                        n <= (SIZE_MAX - 44) / 2 ? 44 + 2 * n : SIZE_MAX, cap);
    uint8_t *p = out;
    memcpy(p, "RIFF", 4);
    wr_u32(p + 4, (uint32_t)(36 + 2 * n));
    memcpy(p + 8, "WAVEfmt ", 8);
    wr_u32(p + 16, 16);
    wr_u16(p + 20, 1);
    wr_u16(p + 22, 1);
    wr_u32(p + 24, sample_rate);
    wr_u32(p + 28, sample_rate * 2);
    wr_u16(p + 32, 2);
    wr_u16(p + 34, 16);
    memcpy(p + 36, "data", 4);
    wr_u32(p + 40, (uint32_t)(2 * n));
    for (size_t i = 0; i < n; i++) {
        float v = samples[i];
        long q = !(v == v) ? 0 : v >= 1.0f ? 32767 : v <= -1.0f ? -32768 : lrintf(v * 32768.0f);
        if (q > 32767) q = 32767;
        wr_u16(p + 44 + 2 * i, (uint32_t)(uint16_t)(int16_t)q);
    }
    *written = 44 + 2 * n;
    return ETCH_OK;
}
