/* Hosted convenience: a whole WAV file read as mono float (malloc'd). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etch/audio.h"
#include "runtime/error.h"

/* Files above this are refused (1 GiB: hours of audio at any common rate). */
#define WAV_FILE_MAX ((size_t)1 << 30)

etch_status etch_wav_read_file(const char *path, float **samples, size_t *n,
                               uint32_t *sample_rate) {
    if (!path || !samples || !n || !sample_rate)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "wav_read_file: NULL argument");
    FILE *fp = fopen(path, "rb");
    if (!fp) return etch_err(ETCH_ERR_ACCESS_FAILED, "wav: cannot open %s: %s", path, strerror(errno));
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    etch_status st = ETCH_OK;
    for (;;) {
        if (len == cap) {
            if (cap >= WAV_FILE_MAX) {
                st = etch_err(ETCH_ERR_NOT_SUPPORTED, "wav: %s is larger than %zu bytes", path,
                              WAV_FILE_MAX);
                break;
            }
            size_t ncap = cap ? cap * 2 : 65536;
            uint8_t *nb = realloc(buf, ncap);
            if (!nb) {
                st = etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "wav: no memory for %s", path);
                break;
            }
            buf = nb, cap = ncap;
        }
        size_t got = fread(buf + len, 1, cap - len, fp);
        len += got;
        if (got == 0) {
            if (ferror(fp))
                st = etch_err(ETCH_ERR_ACCESS_FAILED, "wav: cannot read %s", path);
            break;
        }
    }
    fclose(fp);
    etch_wav_info wi;
    if (!st && (st = etch_wav_parse(buf, len, &wi)) != ETCH_OK) etch_err_prefix("%s", path);
    float *out = NULL;
    if (!st) {
        out = malloc(wi.frames ? (size_t)wi.frames * sizeof(float) : 1);
        if (!out) st = etch_err(ETCH_ERR_MEMORY_ALLOCATION_FAILED, "wav: no memory for %s", path);
    }
    if (!st && (st = etch_wav_decode_mono(buf, len, &wi, 0, wi.frames, out)) != ETCH_OK)
        etch_err_prefix("%s", path);
    free(buf);
    if (st) {
        free(out);
        return st;
    }
    *samples = out;
    *n = (size_t)wi.frames;
    *sample_rate = wi.sample_rate;
    return ETCH_OK;
}
