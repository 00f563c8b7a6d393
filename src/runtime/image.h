/* A file or caller buffer holding a program or data image: mmap'd, read, or borrowed. */
#ifndef ETCH_RUNTIME_IMAGE_H
#define ETCH_RUNTIME_IMAGE_H

#include "etch/program.h"

typedef struct etch_image {
    const uint8_t *data;
    size_t size;
    void *map_base; /* mmap'd region, or NULL */
    size_t map_len;
    void *owned;    /* allocator-owned copy, or NULL */
    const etch_allocator *alloc;
} etch_image;

etch_status etch_image_open_file(const char *path, etch_load_mode mode, const etch_allocator *a,
                                 etch_image *out);
/* Borrow `data`; copy it when it is not 16-byte aligned. */
etch_status etch_image_from_buffer(const void *data, size_t size, const etch_allocator *a,
                                   etch_image *out);
void etch_image_close(etch_image *img);
/* Let the pages wholly inside [p, p + n) go when the image is a mapped file and the range
 * lies in it (the kernel reads them back from the file if they are touched again: a read-only
 * private mapping is never written); otherwise nothing. Returns the bytes given back. */
size_t etch_image_release(const etch_image *img, const void *p, size_t n);

#endif
