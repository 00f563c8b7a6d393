/* The .ptd external-data container (FlatTensor, identifier FT01, header FH01). */
#ifndef ETCH_FORMAT_PTD_H
#define ETCH_FORMAT_PTD_H

#include "etch/status.h"
#include "format/flatbuf.h"
#include "format/pte.h"

typedef struct etch_ptd {
    const uint8_t *image;
    size_t image_size;
    uint64_t segment_base_offset;
    uint64_t segment_data_size;
    fb_buf fb;
    fb_table root;
    fb_vec segments;   /* [DataSegment] */
    fb_vec named_data; /* [NamedData{key, segment_index, tensor_layout}] */
} etch_ptd;

typedef struct etch_ptd_entry {
    const char *key;
    const uint8_t *data;
    uint64_t size;
    bool has_layout;
    etch_tensor_desc layout; /* dtype, rank, sizes, dim_order, nbytes */
} etch_ptd_entry;

/* Verifies the header, the flatbuffer, every segment range and every entry. */
etch_status etch_ptd_open(const uint8_t *data, size_t size, etch_ptd *out);
void etch_ptd_entry_at(const etch_ptd *p, uint32_t i, etch_ptd_entry *out);

#endif
