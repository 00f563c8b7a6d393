/* A ring buffer that turns chunks of any size into overlapping windows (see etch/audio.h). */
#include <string.h>

#include "etch/audio.h"
#include "runtime/error.h"

struct etch_audio_stream {
    size_t window, hop, capacity;
    size_t head;       /* index of the oldest buffered sample */
    size_t count;      /* samples buffered */
    uint64_t position; /* stream index of the oldest buffered sample */
    float *ring;
};

static size_t up16(size_t x) { return (x + 15) & ~(size_t)15; }

static etch_status check(size_t window, size_t hop, size_t capacity) {
    if (window == 0 || hop == 0 || hop > window)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "audio_stream: window %zu, hop %zu (1 <= hop <= window)", window, hop);
    if (capacity < window || capacity > ((size_t)1 << 40) / sizeof(float))
        return etch_err(ETCH_ERR_INVALID_ARGUMENT,
                        "audio_stream: capacity %zu (at least the window, %zu)", capacity, window);
    return ETCH_OK;
}

etch_status etch_audio_stream_mem_size(size_t window, size_t hop, size_t capacity,
                                       size_t *bytes) {
    etch_status st = check(window, hop, capacity);
    if (st) return st;
    if (!bytes) return etch_err(ETCH_ERR_INVALID_ARGUMENT, "audio_stream_mem_size: NULL bytes");
    *bytes = up16(sizeof(etch_audio_stream)) + capacity * sizeof(float);
    return ETCH_OK;
}

etch_status etch_audio_stream_init(size_t window, size_t hop, size_t capacity, void *mem,
                                   size_t size, etch_audio_stream **out) {
    size_t need;
    etch_status st = etch_audio_stream_mem_size(window, hop, capacity, &need);
    if (st) return st;
    if (!mem || !out) return etch_err(ETCH_ERR_INVALID_ARGUMENT, "audio_stream_init: NULL argument");
    if ((uintptr_t)mem % 16)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "audio_stream_init: memory not 16-byte aligned");
    if (size < need)
        return etch_err(ETCH_ERR_INVALID_ARGUMENT, "audio_stream_init: %zu bytes given, %zu needed",
                        size, need);
    etch_audio_stream *s = mem;
    memset(s, 0, sizeof *s);
    s->window = window, s->hop = hop, s->capacity = capacity;
    s->ring = (float *)((uint8_t *)mem + up16(sizeof *s));
    *out = s;
    return ETCH_OK;
}

void etch_audio_stream_push(etch_audio_stream *s, const float *samples, size_t n, size_t *taken) {
    size_t room = s ? s->capacity - s->count : 0;
    size_t take = !samples ? 0 : n < room ? n : room;
    size_t tail = s ? (s->head + s->count) % s->capacity : 0;
    for (size_t done = 0; done < take;) {
        size_t run = s->capacity - tail;
        if (run > take - done) run = take - done;
        memcpy(s->ring + tail, samples + done, run * sizeof(float));
        done += run;
        tail = (tail + run) % s->capacity;
    }
    if (s) s->count += take;
    if (taken) *taken = take;
}

bool etch_audio_stream_pull(etch_audio_stream *s, float *out) {
    if (!s || !out || s->count < s->window) return false;
    size_t first = s->capacity - s->head;
    if (first >= s->window) {
        memcpy(out, s->ring + s->head, s->window * sizeof(float));
    } else {
        memcpy(out, s->ring + s->head, first * sizeof(float));
        memcpy(out + first, s->ring, (s->window - first) * sizeof(float));
    }
    s->head = (s->head + s->hop) % s->capacity;
    s->count -= s->hop;
    s->position += s->hop;
    return true;
}

size_t etch_audio_stream_buffered(const etch_audio_stream *s) { return s ? s->count : 0; }
uint64_t etch_audio_stream_position(const etch_audio_stream *s) { return s ? s->position : 0; }

void etch_audio_stream_reset(etch_audio_stream *s) {
    if (!s) return;
    s->head = 0, s->count = 0, s->position = 0;
}
